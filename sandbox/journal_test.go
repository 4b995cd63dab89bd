package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestJournalRecovered: a running call's sweep journal is written at its first sweep and
// removed after its last; one a dead daemon left is swept by the next (RecoverJournals): what the call made
// at a protected path is moved aside, as the caller, and the journal goes.
func TestJournalRecovered(t *testing.T) {
	t.Parallel()
	jdir := t.TempDir()
	s := newTestSandbox(t, Config{JournalDir: jdir})
	f := newProtectFixture(t)
	chownR(t, filepath.Dir(f.home))
	sp := f.spec(`sleep 30`, f.repo, f.repo)
	sp.MoveAsideCreated, sp.Call = true, "c-journal"
	p, err := s.Start(ctxTimeout(t, 60*time.Second), sp)
	if err != nil {
		t.Fatal(err)
	}
	own := func() []string {
		ents, _ := os.ReadDir(jdir)
		var out []string
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), strconv.Itoa(os.Getpid())+".") {
				out = append(out, e.Name())
			}
		}
		return out
	}
	// Written at its first sweep, half a second in.
	for deadline := time.Now().Add(10 * time.Second); len(own()) == 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if len(own()) != 1 {
		t.Fatalf("journals of the running call: %v, want one", own())
	}
	// A daemon killed now would leave it: keep a copy under another daemon's pid.
	b, err := os.ReadFile(filepath.Join(jdir, own()[0]))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(jdir, "1.1.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	_ = p.Kill("test")
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if len(own()) != 0 {
		t.Errorf("the call's journal outlived its last sweep: %v", own())
	}
	// What the dead daemon's call made before it died, which no sweep saw.
	made := filepath.Join(f.repo, ".mcp.json")
	// Made where nothing was (guarded), and put in place of a protected file (covered).
	replaced := filepath.Join(f.repo, ".envrc")
	if err := os.Remove(replaced); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{made, replaced} {
		if err := os.WriteFile(p, []byte("echo pwned\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	rs := s.RecoverJournals()
	if len(rs) != 1 || rs[0].Call != "c-journal" || rs[0].UID != nobody || !slices.Contains(rs[0].Moved, made) || !slices.Contains(rs[0].Moved, replaced) {
		t.Fatalf("recovered %+v, want c-journal's sweep moving %s and %s", rs, made, replaced)
	}
	for _, p := range []string{made, replaced} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s is still there after the recovered sweep", p)
		}
	}
	if ents, _ := os.ReadDir(jdir); len(ents) != 0 {
		t.Errorf("journals left after recovery: %v", ents)
	}
	// What appeared after the dead daemon's last sweep (the journal's mtime), or is another
	// user's, is no call's: it stays.
	later, others := filepath.Join(f.repo, ".claude.json"), filepath.Join(f.repo, ".mcp.json")
	for _, p := range []string{later, others} {
		if err := os.WriteFile(p, []byte("{}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(later, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(jdir, "3.1.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(jdir, "3.1.json"), past, past); err != nil {
		t.Fatal(err)
	}
	if rs := s.RecoverJournals(); len(rs) != 1 || len(rs[0].Moved) > 0 {
		t.Errorf("recovered %+v: moved what was made after the daemon died or by another user", rs)
	}
	for _, p := range []string{later, others} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s was moved: %v", p, err)
		}
	}
	// Swept until now: the caller's is moved, another user's stays.
	if err := os.WriteFile(filepath.Join(jdir, "4.1.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if rs := s.RecoverJournals(); len(rs) != 1 || !slices.Equal(rs[0].Moved, []string{later}) {
		t.Errorf("recovered %+v, want %s moved and %s left", rs, later, others)
	}
	if _, err := os.Lstat(others); err != nil {
		t.Errorf("another user's %s was moved: %v", others, err)
	}
	// A journal that is no daemon's (unreadable) is removed, and nothing is swept from it.
	if err := os.WriteFile(filepath.Join(jdir, "2.1.json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if rs := s.RecoverJournals(); len(rs) != 0 {
		t.Errorf("recovered from garbage: %+v", rs)
	}
	if ents, _ := os.ReadDir(jdir); len(ents) != 0 {
		t.Errorf("garbage journal left: %v", ents)
	}
}

// BenchmarkJournal is what a call's sweep journal costs it (written before it runs, removed
// after its last sweep), for BenchmarkPlan's call, beside that plan's own cost:
// go test -run '^$' -bench 'Journal|Plan$' ./sandbox/
func BenchmarkJournal(b *testing.B) {
	s, spec := benchPlanSpec(b)
	s.cfg.JournalDir = b.TempDir()
	spec.MoveAsideCreated = true
	p := plannedProcess(b, s, spec)
	b.ReportMetric(float64(len(p.guard)+len(p.covers)), "paths")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.journal(p); err != nil {
			b.Fatal(err)
		}
		p.unjournal()
	}
}
