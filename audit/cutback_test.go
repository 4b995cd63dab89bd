package audit

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cutBackLog writes records 1-5, a checkpoint (6), records 7-11 and, at Close, a checkpoint
// (12) that the head signs. It returns the head signed at 6, for a crash's lagging head.
func cutBackLog(t *testing.T, dir string) (l *Log, oldHead []byte) {
	t.Helper()
	l = openTest(t, Config{Dir: dir})
	appendN(t, l, 5)
	if err := l.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	oldHead, err := os.ReadFile(filepath.Join(dir, headFile))
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 5)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return l, oldHead
}

func lastLogFile(t *testing.T, dir string) string {
	t.Helper()
	files, err := ListFiles(dir)
	if err != nil || len(files) == 0 {
		t.Fatalf("no log files: %v", err)
	}
	return files[len(files)-1]
}

// dropLines removes the last n lines of path.
func dropLines(t *testing.T, path string, n int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ls := lines(b)
	if err := os.WriteFile(path, bytes.Join(ls[:len(ls)-n], nil), 0o600); err != nil {
		t.Fatal(err)
	}
}

// rewriteRecord re-encodes the record at seq with another time: a well-formed record with
// another hash.
func rewriteRecord(t *testing.T, path string, seq uint64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ls := lines(b)
	for i, line := range ls {
		r, err := parseLine(bytes.TrimSuffix(line, []byte("\n")))
		if err != nil {
			t.Fatal(err)
		}
		if r.Seq == seq {
			r.Time = r.Time.Add(time.Second)
			if ls[i], _, err = encode(r); err != nil {
				t.Fatal(err)
			}
			os.WriteFile(path, bytes.Join(ls, nil), 0o600)
			return
		}
	}
	t.Fatalf("no seq %d in %s", seq, path)
}

func removeLogs(t *testing.T, dir string) {
	t.Helper()
	files, _ := ListFiles(dir)
	for _, f := range files {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
}

// A start that finds the log short of its signed head writes audit.cut_back before anything
// else and signs it at once, and verification fails on it for good, saying what was cut: the
// daemon used to chain on from where the log then ended, reuse the lost seqs and sign a new
// head over the gap, and verify passed. A log that runs past its head (a crash before the next
// checkpoint) is no cut, nor is a clean restart.
func TestCutBackIsRecorded(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		cut  func(t *testing.T, dir string, oldHead []byte)
		want string // in the reason; "" for a log that was not cut
		// tampered: the cut also breaks the chain, which verification reports first; the
		// record is written all the same.
		tampered bool
	}{
		{"last three lines deleted", func(t *testing.T, dir string, _ []byte) {
			dropLines(t, lastLogFile(t, dir), 3)
		}, "the log was cut back from seq 12 to 9 while the daemon was down", false},
		{"every log file removed", func(t *testing.T, dir string, _ []byte) {
			removeLogs(t, dir)
		}, "cut back from seq 12 to nothing", false},
		{"log files and head removed, key kept", func(t *testing.T, dir string, _ []byte) {
			removeLogs(t, dir)
			os.Remove(filepath.Join(dir, headFile))
		}, "every log file was gone when the daemon started, though its signing key was there", false},
		{"head removed with the cut", func(t *testing.T, dir string, _ []byte) {
			dropLines(t, lastLogFile(t, dir), 3)
			os.Remove(filepath.Join(dir, headFile))
		}, "the signed head was gone when the daemon started, with the log at seq 9", false},
		{"head removed with a cut back to before the first checkpoint", func(t *testing.T, dir string, _ []byte) {
			f := lastLogFile(t, dir)
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			ls := lines(b)
			var keep []byte
			for _, line := range ls {
				if r, err := parseLine(bytes.TrimSuffix(line, []byte("\n"))); err != nil || r.Kind == KindCheckpoint {
					break
				}
				keep = append(keep, line...)
			}
			if err := os.WriteFile(f, keep, 0o600); err != nil {
				t.Fatal(err)
			}
			os.Remove(filepath.Join(dir, headFile))
		}, "the signed head was gone when the daemon started", false},
		{"record at the head's seq rewritten", func(t *testing.T, dir string, _ []byte) {
			rewriteRecord(t, lastLogFile(t, dir), 12)
		}, "the record at the signed head's seq 12 was missing or another one", false},
		{"record at a lagging head's seq rewritten", func(t *testing.T, dir string, oldHead []byte) {
			os.WriteFile(filepath.Join(dir, headFile), oldHead, 0o600)
			rewriteRecord(t, lastLogFile(t, dir), 6)
		}, "seq 6 was missing or another one", true},
		{"log past a lagging head", func(t *testing.T, dir string, oldHead []byte) {
			os.WriteFile(filepath.Join(dir, headFile), oldHead, 0o600)
		}, "", false},
		{"clean restart", func(*testing.T, string, []byte) {}, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "audit")
			l, oldHead := cutBackLog(t, dir)
			tc.cut(t, dir, oldHead)

			l2 := openTest(t, Config{Dir: dir})
			// Written and signed within Open: a crash right after start cannot lose it.
			b, _ := os.ReadFile(lastLogFile(t, dir))
			var cut *Record
			for _, line := range lines(b) {
				r, err := parseLine(bytes.TrimSuffix(line, []byte("\n")))
				if err != nil {
					t.Fatal(err)
				}
				if cut != nil && r.Seq == cut.Seq+1 && r.Kind != KindCheckpoint {
					t.Errorf("record after audit.cut_back is %s, want the checkpoint that signs it", r.Kind)
				}
				if r.Kind == KindCutBack {
					cut = r
				}
			}
			appendN(t, l2, 1)
			if err := l2.Close(); err != nil {
				t.Fatal(err)
			}
			rep, err := VerifyDir(dir, l.PublicKey())
			if tc.want == "" {
				if err != nil || cut != nil {
					t.Fatalf("no cut, yet verify says %v and the log holds %+v", err, cut)
				}
				return
			}
			if cut == nil {
				t.Fatalf("no audit.cut_back written; verify says %v", err)
			}
			if got := cut.Detail["last_seq"]; got != itoa(int(cut.Seq-1)) {
				t.Errorf("audit.cut_back at seq %d names the last record found as %s: not the first thing written", cut.Seq, got)
			}
			if tc.tampered {
				if !errors.Is(err, ErrTampered) || !strings.Contains(cutBackWhy(cut.Detail), tc.want) {
					t.Fatalf("verify: %v; record says %q", err, cutBackWhy(cut.Detail))
				}
				return
			}
			if !errors.Is(err, ErrCutBack) || rep.CutBacks != 1 || !strings.Contains(rep.Reason, tc.want) || rep.BadSeq != cut.Seq {
				t.Fatalf("verify: %v, %d cut-backs at seq %d, reason %q; want ErrCutBack at seq %d saying %q",
					err, rep.CutBacks, rep.BadSeq, rep.Reason, cut.Seq, tc.want)
			}
			// The next start finds the head the cut-back start signed: no second record, and
			// the evidence stays.
			l3 := openTest(t, Config{Dir: dir})
			l3.Close()
			if rep, err = VerifyDir(dir, l.PublicKey()); !errors.Is(err, ErrCutBack) || rep.CutBacks != 1 {
				t.Fatalf("after another restart: %v, %d cut-backs", err, rep.CutBacks)
			}
		})
	}
}

// A first start (no key, no head, no log) is no cut.
func TestFirstStartIsNoCutBack(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "audit")
	l := openTest(t, Config{Dir: dir})
	appendN(t, l, 2)
	l.Close()
	if rep, err := VerifyDir(dir, l.PublicKey()); err != nil || rep.CutBacks != 0 {
		t.Fatalf("first start: %v, %d cut-backs", err, rep.CutBacks)
	}
}
