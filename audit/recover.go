package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/internal/durable"
)

// recover finds the chain head, makes the newest file end in a complete record (moving any
// torn bytes aside, see tornAside) and compares the log with its signed head (checkHead). The
// records to write first go to w.pending in the order they are written. keyCreated says Open
// generated the signing key just now.
func (l *Log) recover(keyCreated bool) error {
	files, err := ListFiles(l.cfg.Dir)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	l.w.lastCP = now
	head := l.startHead()
	headSig := l.headSignature(head, keyCreated)
	if len(files) == 0 {
		if err := l.openFile(fileName(1), now); err != nil {
			return err
		}
		// A head or a key that was already there says a log was: only a first start has none.
		if head != nil || !keyCreated {
			l.w.pending = append(l.w.pending, l.cutBack(cutRemoved, head, headSig, nil))
		}
		if keyCreated && head != nil {
			l.w.pending = append(l.w.pending, l.keyReplaced(head))
		}
		return nil
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
	cut, err := l.checkHead(files, head, headSig)
	if err != nil {
		return err
	}
	if cut != nil {
		l.w.pending = append(l.w.pending, cut)
	}
	if keyCreated && (head != nil || l.w.seq > 0) {
		l.w.pending = append(l.w.pending, l.keyReplaced(head))
	}
	if torn != nil {
		l.w.pending = append(l.w.pending, torn)
	}
	return nil
}

// startHead reads the signed head the last run left, or nil. One that cannot be read is taken
// as missing (checkHead): it is written by rename, so no crash leaves it half written.
func (l *Log) startHead() *Head {
	h, err := ReadHead(filepath.Join(l.cfg.Dir, headFile))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			l.log.Error("audit head unreadable at start; taken as missing", zap.Error(err))
		}
		return nil
	}
	return h
}

// headSignature says whether h's signature holds under the log's key, for the record of a
// head the log does not reach: a head that does not verify may have been written to raise a
// false alarm, and an auditor weighs the record by it.
func (l *Log) headSignature(h *Head, keyCreated bool) string {
	switch {
	case h == nil:
		return ""
	case keyCreated:
		return "unchecked: the key that signed it is gone"
	case verifyHeadSig(l.PublicKey(), h), h.V < headVersion && verifySig(l.PublicKey(), h.Seq, h.Hash, h.Sig):
		return "valid"
	}
	return "invalid"
}

// Why a start found the log short of its signed head (an audit.cut_back record's reason).
const (
	cutShort       = "short"        // the log ends before the head's seq
	cutRewritten   = "rewritten"    // the record at the head's seq is missing or another one
	cutRemoved     = "removed"      // no log file at all, beside a head or a signing key
	cutHeadMissing = "head_missing" // no head beside a log that holds signed checkpoints
)

// checkHead compares the log found at start (its last record is w.seq, w.hash) with the signed
// head, and returns the audit.cut_back record to write when the log does not reach the head.
// Without it the writer chained on from wherever the log now ended, reused the lost seqs and
// signed a new head over the gap: a tail cut while the daemon was down left no trace. The
// daemon still starts (the record, not a refusal, is the evidence), and Verify fails on the
// record for as long as the log keeps it.
//
// WARNING: this is what makes a cut-back log fail verification; rerun TestCutBackIsRecorded.
func (l *Log) checkHead(files []string, head *Head, headSig string) (*Record, error) {
	if head == nil {
		// The daemon writes a head at its first checkpoint, at once after its first start's
		// daemon.start, and only ever replaces it: a log with no head lost it, perhaps to hide
		// a cut of its tail, even one cut back to the records before that first checkpoint.
		// (A daemon killed between those two records leaves such a log too: its next start
		// says the stop was unclean.)
		if l.w.seq == 0 {
			return nil, nil
		}
		return l.cutBack(cutHeadMissing, nil, "", nil), nil
	}
	switch {
	case head.Seq > l.w.seq:
		return l.cutBack(cutShort, head, headSig, nil), nil
	case head.Seq == l.w.seq:
		if l.w.hash != head.Hash {
			return l.cutBack(cutRewritten, head, headSig, &l.w.hash), nil
		}
		return nil, nil
	}
	// The log goes on past the head (a crash after records the next checkpoint did not sign).
	hash, retained, err := hashAt(files, head.Seq)
	if err != nil || !retained {
		// Not retained: retention removed the head's file, which it may (Verify says where the
		// log starts); there is nothing to compare.
		return nil, err
	}
	if hash != head.Hash {
		return l.cutBack(cutRewritten, head, headSig, &hash), nil
	}
	return nil, nil
}

// cutBack is the audit.cut_back record of a log that does not reach head (nil if none was
// found), and says so in the daemon's log.
func (l *Log) cutBack(reason string, head *Head, headSig string, atHead *string) *Record {
	d := map[string]string{
		"reason":    reason,
		"last_seq":  strconv.FormatUint(l.w.seq, 10),
		"last_hash": l.w.hash,
	}
	fields := []zap.Field{zap.String("reason", reason), zap.Uint64("last_seq", l.w.seq)}
	if head != nil {
		d["head_seq"] = strconv.FormatUint(head.Seq, 10)
		d["head_hash"] = head.Hash
		d["head_file"] = head.File
		d["head_time"] = head.Time.UTC().Format(time.RFC3339Nano)
		d["head_key"] = head.Key
		d["head_signature"] = headSig
		fields = append(fields, zap.Uint64("head_seq", head.Seq), zap.String("head_signature", headSig))
	}
	if atHead != nil {
		d["hash_at_head_seq"] = *atHead
	}
	l.log.Error("audit log does not reach its signed head: records were lost while the daemon was down; recorded as audit.cut_back, which verification reports", fields...)
	return &Record{Kind: KindCutBack, Detail: d}
}

// keyReplaced is the audit.key_replaced record of a start that had to make a new signing key
// beside a signed log (head is the last one's head, nil if none was found), and says so in the
// daemon's log. Without it the new key signed on in silence, and verification with it then
// failed on every earlier checkpoint as though the log had been forged.
func (l *Log) keyReplaced(head *Head) *Record {
	d := map[string]string{
		"key":       KeyID(l.PublicKey()),
		"last_seq":  strconv.FormatUint(l.w.seq, 10),
		"last_hash": l.w.hash,
	}
	if head != nil {
		d["old_key"] = head.Key
		d["old_head_seq"] = strconv.FormatUint(head.Seq, 10)
		d["old_head_hash"] = head.Hash
	}
	l.log.Error("audit signing key was gone and a new one was made: earlier checkpoints were signed by a key this daemon no longer has; recorded as audit.key_replaced",
		zap.String("old_key", d["old_key"]), zap.String("key", d["key"]), zap.Uint64("last_seq", l.w.seq))
	return &Record{Kind: KindKeyReplaced, Detail: d}
}

// pendingAlarm reports whether a record waiting to be written says the log lost records or its
// key: Open signs it at once, with the key that signs from now on.
func (w *writer) pendingAlarm() bool {
	for _, r := range w.pending {
		if r.Kind == KindCutBack || r.Kind == KindKeyReplaced {
			return true
		}
	}
	return false
}

// errFound stops a scan that found what it looked for.
var errFound = errors.New("found")

// hashAt returns the hash of the record at seq ("" if the file that should hold it does not,
// or holds a line there that is not a record); retained is false when seq precedes the oldest
// file. Files are named by their first seq, so one file is read.
func hashAt(files []string, seq uint64) (hash string, retained bool, err error) {
	for i := len(files) - 1; i >= 0; i-- {
		first, ok := fileFirstSeq(files[i])
		if !ok || first > seq {
			continue
		}
		f, err := openRead(files[i])
		if err != nil {
			return "", true, err
		}
		defer f.Close()
		_, _, err = scanLines(f, func(line []byte, _ int64) error {
			if s, ok := lineSeq(line); !ok || s != seq {
				return nil
			}
			if r, perr := parseLine(line); perr == nil {
				hash = r.Hash
			}
			return errFound
		})
		if errors.Is(err, errFound) {
			err = nil
		}
		return hash, true, err
	}
	return "", false, nil
}

// lineSeq reads a line's seq from its fixed start ({"v":N,"seq":S,...), without decoding it.
func lineSeq(line []byte) (uint64, bool) {
	rest, ok := bytes.CutPrefix(line, []byte(`{"v":`))
	i := bytes.IndexByte(rest, ',')
	if !ok || i < 0 {
		return 0, false
	}
	rest, ok = bytes.CutPrefix(rest[i:], []byte(`,"seq":`))
	j := bytes.IndexByte(rest, ',')
	if !ok || j < 0 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(rest[:j]), 10, 64)
	return n, err == nil
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
