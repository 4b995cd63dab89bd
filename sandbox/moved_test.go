package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMovedAsideBounded: a call that makes hundreds of paths an Edit deny names has each moved
// aside, but its result names only the first few hundred and counts the rest; a name that is
// not valid UTF-8 is shown quoted, so two such names stay two.
func TestMovedAsideBounded(t *testing.T) {
	s := newTestSandbox(t, Config{})
	for _, tc := range []struct {
		script       string
		listed, more int
		quotedAndTwo bool
	}{
		{`for i in $(seq 400); do : > f$i.lock; done`, maxMovedListed, 400 - maxMovedListed, false},
		{`: > $'\xff.lock'; : > $'\xfe.lock'`, 2, 0, true},
	} {
		f := newProtectFixture(t)
		sp := f.spec(tc.script+"; echo done", f.repo, f.repo)
		sp.GuardPatterns = []string{escapePattern(f.repo) + "/**/*.lock"}
		sp.ProtectedPatterns = sp.GuardPatterns
		sp.MoveAsideCreated, sp.Call = true, "c1"
		res, out, err := run(t, s, ctxTimeout(t, 60*time.Second), sp)
		if err != nil || !strings.Contains(out, "done") {
			t.Fatalf("%v %q", err, out)
		}
		if len(res.MovedAside) != tc.listed || res.MovedAsideMore != tc.more {
			t.Errorf("%s: %d named and %d more, want %d and %d", tc.script, len(res.MovedAside), res.MovedAsideMore, tc.listed, tc.more)
		}
		if tc.quotedAndTwo && (res.MovedAside[0] == res.MovedAside[1] || !strings.HasPrefix(res.MovedAside[0], `"`) || !strings.Contains(res.MovedAside[0], `\x`)) {
			t.Errorf("names not valid UTF-8 shown as %q", res.MovedAside)
		}
		es, _ := os.ReadDir(f.repo)
		for _, e := range es {
			if strings.HasSuffix(e.Name(), ".lock") {
				t.Errorf("%s: %q left in place", tc.script, e.Name())
				break
			}
		}
	}
}

// TestRemadePastTheListKills: a call that remakes a protected path it made, after it was moved
// aside, is killed also when that path lies past the few hundred its result lists.
func TestRemadePastTheListKills(t *testing.T) {
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	// The list is full once the first 300 are moved; z.lock, made after, lies past it.
	sp := f.spec(`for i in $(seq 300); do : > f$i.lock; done; sleep 1.5; : > z.lock; sleep 1.5; `+
		`for j in $(seq 300); do : > z.lock; sleep 0.02; done; echo done`, f.repo, f.repo)
	sp.GuardPatterns = []string{escapePattern(f.repo) + "/**/*.lock"}
	sp.ProtectedPatterns = sp.GuardPatterns
	sp.MoveAsideCreated, sp.Call = true, "c1"
	res, out, err := run(t, s, ctxTimeout(t, 60*time.Second), sp)
	if err != nil {
		t.Fatal(err)
	}
	if res.KilledBy != KilledRemade || strings.Contains(out, "done") {
		t.Errorf("killed by %q, output %q: want the call killed for remaking a moved path", res.KilledBy, out)
	}
}

// TestLinkToGitDirKept: a link on the way to the git dir a .git file names (gitdir: ../s/gl,
// gl -> real.git) is put back when a call removes it: gone, the next call would not find the
// git dir, and would leave its config writable, to be trusted again once the user restored it.
func TestLinkToGitDirKept(t *testing.T) {
	needGit(t)
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	q1, q2 := filepath.Join(f.home, "q1"), filepath.Join(f.home, "q2")
	os.MkdirAll(q2, 0o755)
	hostGit(t, f.home, "init", "-q", "--separate-git-dir", filepath.Join(q2, "real.git"), q1)
	os.Symlink("real.git", filepath.Join(q2, "gl"))
	os.WriteFile(filepath.Join(q1, ".git"), []byte("gitdir: ../q2/gl\n"), 0o644)
	chownR(t, f.home)
	time.Sleep(50 * time.Millisecond) // older than the call, as a user's link is
	sp := f.spec("rm ../q2/gl && echo done", q1, q1, q2)
	sp.ProtectedPaths = ProtectedCandidates(sp.WritableDirs, q1, f.home)
	sp.MoveAsideCreated, sp.Call = true, "c1"
	_, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp)
	if err != nil || !strings.Contains(out, "done") {
		t.Fatalf("%v %q", err, out)
	}
	if to, err := os.Readlink(filepath.Join(q2, "gl")); err != nil || to != "real.git" {
		t.Errorf("the link on the way to the git dir after the call: %q %v, want it put back", to, err)
	}
}
