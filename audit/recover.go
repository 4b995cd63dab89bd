package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/internal/durable"
)

// recover finds the chain head and makes the newest file end in a complete record, moving any
// torn bytes aside (see DESIGN note in doc of tornAside).
func (l *Log) recover() error {
	files, err := ListFiles(l.cfg.Dir)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	l.w.lastCP = now
	if len(files) == 0 {
		return l.openFile(fileName(1), now)
	}
	cur := files[len(files)-1]
	last, good, tail, first, err := lastLine(cur)
	if err != nil {
		return err
	}
	var torn *Record
	if len(tail) > 0 {
		if torn, err = l.tornAside(cur, good, tail); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(cur, os.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open audit file: %w", err)
	}
	l.w.f, l.w.name, l.w.off = f, filepath.Base(cur), good
	l.w.started = now
	if first != nil {
		if r, err := parseLine(first); err == nil {
			l.w.started = r.Time
		}
	}
	if last == nil && len(files) > 1 {
		// A rotation created this file and crashed before its first record was durable: chain
		// from the previous file and write the rotate record that was lost.
		prev := files[len(files)-2]
		if last, _, _, _, err = lastLine(prev); err != nil {
			return err
		}
		if last == nil {
			return fmt.Errorf("%s is empty: %w", filepath.Base(prev), ErrCorrupt)
		}
		r, err := parseLine(last)
		if err != nil {
			return fmt.Errorf("last record of %s: %w: %w", filepath.Base(prev), ErrCorrupt, err)
		}
		l.w.seq, l.w.hash = r.Seq, r.Hash
		l.w.pending = append(l.w.pending, rotateRecord(filepath.Base(prev), r))
	} else if last != nil {
		r, err := parseLine(last)
		if err != nil {
			return fmt.Errorf("last record of %s: %w: %w", l.w.name, ErrCorrupt, err)
		}
		l.w.seq, l.w.hash = r.Seq, r.Hash
	}
	if torn != nil {
		l.w.pending = append(l.w.pending, torn)
	}
	return nil
}

// tornAside handles an incomplete last line. Choice: the torn bytes are copied to
// "<file>.torn-<offset>" (0600, fsynced) and the log file is truncated to its last complete
// record, so every log file stays pure JSON lines that Verify and Query read without special
// cases. Nothing is lost: the audit.torn_tail record names the side file, the byte count and
// the SHA-256 of the torn bytes, and the chain continues from the last good record. No append
// can have returned nil for the torn bytes: a record is acknowledged only once its whole line,
// newline included, is in the file (AppendWritten) or fsynced (Append).
func (l *Log) tornAside(path string, good int64, tail []byte) (*Record, error) {
	aside := fmt.Sprintf("%s%s%d", path, tornInfix, good)
	f, err := durable.CreateExcl(aside, os.O_WRONLY)
	if err != nil {
		return nil, err
	}
	_, err = f.Write(tail)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("save torn tail: %w", err)
	}
	if err := durable.SyncDir(l.cfg.Dir); err != nil {
		return nil, err
	}
	if err := os.Truncate(path, good); err != nil {
		return nil, fmt.Errorf("truncate torn tail: %w", err)
	}
	sum := sha256.Sum256(tail)
	l.log.Warn("audit log had a torn last line; moved aside", zap.String("file", filepath.Base(path)),
		zap.Int64("offset", good), zap.Int("bytes", len(tail)))
	return &Record{Kind: KindTornTail, Detail: map[string]string{
		"file":   filepath.Base(path),
		"offset": strconv.FormatInt(good, 10),
		"bytes":  strconv.Itoa(len(tail)),
		"sha256": hex.EncodeToString(sum[:]),
		"aside":  filepath.Base(aside),
	}}, nil
}

// probeBytes is what the probe writes: room for a burst of records, not just one page. A full
// disk's repair frees the page or two a failed write took, and a 4 KB probe then reported the
// log healthy while the next call failed again.
const probeBytes = 64 << 10

// probe checks that the directory takes a probeBytes fsynced write again (and repairs a pending
// truncation), so Healthy recovers without waiting for the next Append.
func (l *Log) probe() error {
	if err := l.repair(); err != nil {
		return err
	}
	path := filepath.Join(l.cfg.Dir, probeFile)
	_ = os.Remove(path)
	f, err := durable.CreateExcl(path, os.O_WRONLY)
	if err != nil {
		return err
	}
	defer os.Remove(path)
	defer f.Close()
	if _, err := f.Write(make([]byte, probeBytes)); err != nil {
		return err
	}
	return unix.Fdatasync(int(f.Fd()))
}

// repair truncates the file back to the last durable record after a failed write, so no half
// line is ever chained over.
func (l *Log) repair() error {
	if l.syncBroke {
		l.flushSync()
		if err := unix.Fdatasync(int(l.w.f.Fd())); err != nil {
			return fmt.Errorf("sync after a failed sync: %w", err)
		}
		l.syncBroke = false
	}
	if !l.w.dirty {
		return nil
	}
	if err := l.w.f.Truncate(l.w.off); err != nil {
		return fmt.Errorf("truncate after failed write: %w", err)
	}
	if err := unix.Fdatasync(int(l.w.f.Fd())); err != nil {
		return fmt.Errorf("sync after truncate: %w", err)
	}
	l.w.dirty = false
	return nil
}
