package audit

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/sandboxd/sandboxd/internal/durable"
)

func rotateRecord(prevFile string, last *Record) *Record {
	return &Record{Kind: KindRotate, Detail: map[string]string{
		"prev_file": prevFile,
		"prev_seq":  strconv.FormatUint(last.Seq, 10),
		"prev_hash": last.Hash,
	}}
}

func (l *Log) openFile(name string, now time.Time) error {
	f, err := durable.CreateExcl(filepath.Join(l.cfg.Dir, name), os.O_WRONLY)
	if err != nil {
		return err
	}
	if err := durable.SyncDir(l.cfg.Dir); err != nil {
		f.Close()
		return err
	}
	if l.w.f != nil {
		l.w.f.Close()
	}
	l.w.f, l.w.name, l.w.off, l.w.started, l.w.dirty = f, name, 0, now, false
	return nil
}

func (l *Log) rotateIfDue(now time.Time) error {
	if !l.rotationDue(now) {
		return nil
	}
	// Everything written to the old file is synced before the writer moves on from it.
	l.flushSync()
	if l.syncBroke {
		return errors.New("audit file not synced before rotation")
	}
	prev := l.w.name
	last := &Record{Seq: l.w.seq, Hash: l.w.hash}
	if err := l.openFile(fileName(l.w.seq+1), now); err != nil {
		return err
	}
	l.w.pending = append([]*Record{rotateRecord(prev, last)}, l.w.pending...)
	l.rotations.Add(1)
	l.prune()
	return nil
}

// rotationDue reports whether the current file is big or old enough to rotate.
func (l *Log) rotationDue(now time.Time) bool {
	return l.w.off > 0 && (l.w.off >= l.cfg.MaxFileBytes || now.Sub(l.w.started) >= l.cfg.MaxFileAge)
}

// Rotations counts the rotations since Open: a writer that states something once per file
// (the rule sets a replay needs) states it again when this changes, so retention cannot
// leave a file's records without it.
func (l *Log) Rotations() uint64 { return l.rotations.Load() }

// prune applies retention to rotated files (never the current one) and their torn side files.
func (l *Log) prune() {
	if l.cfg.Retain == 0 && l.cfg.RetainAge == 0 {
		return
	}
	files, err := ListFiles(l.cfg.Dir)
	if err != nil {
		return
	}
	var old []string
	for _, f := range files {
		if filepath.Base(f) != l.w.name {
			old = append(old, f)
		}
	}
	cut := 0
	if l.cfg.Retain > 0 && len(old)+1 > l.cfg.Retain {
		cut = len(old) + 1 - l.cfg.Retain
	}
	for i, f := range old {
		st, err := os.Stat(f)
		if err != nil || l.youngerThanRetention(st.ModTime()) {
			// Never a young record, whatever retain_files says: a flood of records must not
			// rotate another user's recent history away (issue 17). The volume's free space
			// check refuses new calls instead.
			continue
		}
		if i >= cut && (l.cfg.RetainAge == 0 || time.Since(st.ModTime()) < l.cfg.RetainAge) {
			continue
		}
		side, _ := filepath.Glob(f + tornInfix + "*")
		for _, p := range append(side, f) {
			if err := os.Remove(p); err != nil {
				l.log.Warn("audit retention", zap.String("code", string(Classify(err))))
			}
		}
		l.log.Info("audit file removed by retention", zap.String("file", filepath.Base(f)))
	}
}
