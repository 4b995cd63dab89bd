package sandbox

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sandboxd/sandboxd/internal/testutil"
)

func TestLandlockMasks(t *testing.T) {
	t.Parallel()
	cases := []struct {
		abi      int
		has, not uint64
		scoped   uint64
		size     uint32
	}{
		{1, llReadFile | llMakeSym, llRefer | llTruncate | llIoctlDev, 0, 8},
		{2, llRefer, llTruncate | llIoctlDev, 0, 8},
		{3, llTruncate, llIoctlDev, 0, 8},
		{4, llTruncate, llIoctlDev, 0, 16},
		{5, llIoctlDev, 0, 0, 16},
		{6, llIoctlDev, 0, llScopeSignal | llScopeAbstractUnix, 24},
		{7, llIoctlDev, 0, llScopeSignal | llScopeAbstractUnix, 24},
	}
	for _, tc := range cases {
		fs, scoped, size := landlockMasks(tc.abi)
		if fs&tc.has != tc.has || fs&tc.not != 0 || scoped != tc.scoped || size != tc.size {
			t.Errorf("abi %d: fs %#x scoped %#x size %d", tc.abi, fs, scoped, size)
		}
	}
}

// TestLandlockUnavailable: on a kernel without landlock the sandbox says so in the log and
// still runs calls under the mount confinement.
func TestLandlockUnavailable(t *testing.T) {
	t.Parallel()
	testutil.RequireRoot(t)
	sm := realSeams()
	sm.landlockABI = func() int { return 0 }
	core, logs := observer.New(zap.WarnLevel)
	s, err := newSandbox(Config{CgroupRoot: "sandboxd-test-nolandlock"}, zap.New(core), sm)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		s.Close()
		s.cg.removeTree("")
		for _, d := range s.cg.dirs {
			os.Remove(d)
		}
	}()
	if logs.FilterMessageSnippet("landlock unavailable").Len() != 1 {
		t.Fatalf("no warning logged: %v", logs.All())
	}
	res, out, err := run(t, s, ctxTimeout(t, 10*time.Second), &Spec{Path: "/bin/sh",
		Args: []string{"-c", "echo x > /etc/sbx-nolandlock; grep -c Landlock /proc/self/status; echo ran"},
		UID:  nobody, GID: nobody, Dir: "/", Session: "s", Call: "c"})
	if err != nil || res.ExitCode != 0 || !strings.Contains(out, "Read-only file system") || !strings.Contains(out, "ran") {
		t.Fatalf("res=%+v err=%v out=%s", res, err, out)
	}
}

// A working directory that contains a deny path (a session in $HOME with ~/.ssh denied) stays
// fully usable: new files and directories can be made in it, while the deny path stays hidden.
func TestWritableDirContainingDenyPath(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	home := hostTempDir(t, "/var/tmp", "sbx-home-")
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".ssh", "id_rsa"), []byte("s3cr3t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("chown", "-R", fmt.Sprintf("%d:%d", nobody, nobody), home).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v %s", err, out)
	}
	script := "touch new && mkdir d && echo x > d/f && cat d/f; cat .ssh/id_rsa 2>&1; echo done"
	res, out, err := run(t, s, ctxTimeout(t, 10*time.Second), &Spec{
		Path: "/bin/sh", Args: []string{"-c", script}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: home,
		UID: nobody, GID: nobody, WritableDirs: []string{home},
		DenyPaths: []string{filepath.Join(home, ".ssh"), filepath.Join(home, ".aws")},
		Session:   "s1", Call: "c1",
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || !strings.Contains(out, "x\n") || !strings.Contains(out, "done") {
		t.Fatalf("work in a dir holding a deny path: exit %d, %q", res.ExitCode, out)
	}
	if strings.Contains(out, "s3cr3t") {
		t.Fatalf("deny path readable: %q", out)
	}
	if _, err := os.Stat(filepath.Join(home, "d", "f")); err != nil {
		t.Errorf("file made in the working dir is not on the host: %v", err)
	}
}

func TestAppearLater(t *testing.T) {
	t.Parallel()
	testutil.RequireRoot(t)
	base := hostTempDir(t, "/var/tmp", "sbx-later-")
	mine := filepath.Join(base, "home")
	rootOwned := filepath.Join(base, "run")
	for _, d := range []string{mine, rootOwned, filepath.Join(mine, ".ssh")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(mine, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	deny := []string{
		filepath.Join(mine, ".ssh"),              // exists in the caller's dir: the mounts hide it, landlock what replaces it
		filepath.Join(mine, ".aws"),              // missing, in the caller's dir: guarded
		filepath.Join(mine, ".config", "gcloud"), // missing, nearest existing dir is the caller's: guarded
		filepath.Join(rootOwned, "docker.sock"),  // missing, in a root-owned dir: not the call's to make
	}
	got, covered := appearLater(nil, deny, nil, nobody)
	want := []string{deny[0], deny[1], deny[2]}
	if strings.Join(got, ",") != strings.Join(want, ",") || len(covered) != 1 || covered[0] != deny[0] {
		t.Errorf("appearLater(uid nobody) = %v, covered %v; want %v, covered %s", got, covered, want, deny[0])
	}
	// Inside a writable dir the dir's own rule grants everything: nothing to expand around.
	if got, covered := appearLater(nil, deny, []string{mine}, nobody); slices.Contains(got, deny[0]) || len(covered) != 0 {
		t.Errorf("appearLater(writable %s) = %v, covered %v; want %s left to the mounts", mine, got, covered, deny[0])
	}
	if got, covered := appearLater(nil, deny, nil, 0); len(got) != 1 || got[0] != deny[3] || len(covered) != 0 {
		t.Errorf("appearLater(uid 0) = %v, covered %v; want only the root-owned dir's", got, covered)
	}
}

// A container runtime's socket named as a deny path stays mount-hidden only: landlock cannot
// stop a connect(2), so no rules are spent around /run for it, even for a root caller (who owns
// /run). A file deny path beside it still gets its rules.
func TestSocketDenyPathsAreMountOnly(t *testing.T) {
	t.Parallel()
	testutil.RequireRoot(t)
	s := newTestSandbox(t, Config{})
	if s.landlockABI <= 0 {
		t.Skip("kernel has no landlock")
	}
	plan := func(deny ...string) []llRule {
		cs := planOf(t, s, Spec{Path: "/bin/true", Dir: "/", DenyPaths: deny, UID: 0, GID: 0,
			Session: "s", Call: "c"})
		return append(slices.Clone(cs.landlock.base), cs.landlock.rules...)
	}
	if _, err := os.Lstat("/run/docker.sock"); err == nil {
		t.Skip("/run/docker.sock exists here: the mount plan hides it, landlock is not asked")
	}
	for _, r := range plan("/var/run/docker.sock", "/run/docker.sock") {
		if strings.HasPrefix(r.path, "/run/") || r.path == "/run" {
			t.Fatalf("a rule around /run for a socket deny path: %+v", r)
		}
	}
	// A missing file deny path in the same place is guarded by landlock (the rules around it).
	file := "/run/sbx-no-such-file-" + strconv.Itoa(os.Getpid())
	var around bool
	for _, r := range plan(file) {
		around = around || strings.HasPrefix(r.path, "/run/")
	}
	if !around {
		t.Fatalf("no rules around %s", file)
	}
}

// The expansion cache answers exactly what expandAround builds now: the same rules while the
// listed directories are unchanged, and a new listing once an entry is added to one of them or
// renamed over another. A listing of directories changed just now is not kept, even with their
// mtime set back: the ctime tells.
func TestExpansionCacheFollowsTheDirectories(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for _, d := range []string{"a", "home/u/keep", "home/v"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "home/u/notes"), []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	deny := []string{filepath.Join(root, "home/u/.aws")} // missing: expanded around
	// Times set an hour back: the owner may, but the ctime is now.
	age := func() {
		old := time.Now().Add(-time.Hour)
		for _, d := range []string{root, filepath.Join(root, "home"), filepath.Join(root, "home/u")} {
			if err := os.Chtimes(d, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	age()
	// A minute's slack: the mtimes are an hour old, the ctimes are not a minute old.
	if _, key, err := newExpansionCache(time.Minute).get(root, llRead, deny); err != nil || key != nil {
		t.Fatalf("entry %p, %v: want a listing of directories changed just now used once, not kept", key, err)
	}
	// The rest with no slack: waiting for the test's directories to settle would take stampSlack.
	c := newExpansionCache(0)
	want, err := expandAround(root, llRead, deny, nil)
	if err != nil {
		t.Fatal(err)
	}
	var keys []*expansion
	for range 2 {
		got, key, err := c.get(root, llRead, deny)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("cached expansion\n%v\nwant\n%v", got, want)
		}
		keys = append(keys, key)
	}
	// The same entry both times: what a pooled init's prebuilt landlock base is matched on.
	if keys[0] == nil || keys[0] != keys[1] {
		t.Fatalf("entries %p, %p: want the same cached entry", keys[0], keys[1])
	}
	if len(c.entries) != 1 {
		t.Fatalf("%d cache entries, want 1", len(c.entries))
	}
	// A new entry beside the deny path must get its rule at once. Its directory's times may
	// not move within one clock tick, which the slack covers: make them move for sure.
	if err := os.Mkdir(filepath.Join(root, "home/u/new"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, key, err := c.get(root, llRead, deny)
	if err != nil {
		t.Fatal(err)
	}
	if key == keys[0] {
		t.Fatal("the changed directory's expansion is still the old entry: a prebuilt base would be used")
	}
	if !slices.ContainsFunc(got, func(r llRule) bool { return r.path == filepath.Join(root, "home/u/new") }) {
		t.Fatalf("no rule for the new entry after it was made:\n%v", got)
	}
	if slices.ContainsFunc(got, func(r llRule) bool { return strings.HasPrefix(r.path, deny[0]) }) {
		t.Fatalf("a rule reaches the deny path:\n%v", got)
	}
	// An entry renamed over another (an editor's save) leaves the rules as they were, but not
	// the file behind one of them: the entry changes, whatever the mtime says.
	notes := filepath.Join(root, "home/u/notes")
	if err := os.WriteFile(notes+".new", []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(notes+".new", notes); err != nil {
		t.Fatal(err)
	}
	age()
	again, key2, err := c.get(root, llRead, deny)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(again, got) || key2 == key {
		t.Fatalf("after a rename over an entry: same rules %v, same entry %v; want the same rules from a new entry",
			slices.Equal(again, got), key2 == key)
	}
}

// A pooled init prebuilds the landlock base of the latest call (the rules around a deny path
// that may appear later), and the next call with the same base uses it: reads where the base
// allows them, a covered deny file reads as empty, a missing deny path stays unreadable. Once a
// directory the base was listed from changes, the prebuilt base is not used: a deny path made
// meanwhile is hidden, and a new entry beside it is readable.
func TestPrebuiltLandlockBase(t *testing.T) {
	// A listing is cached (and so a base can be prebuilt) only once its directories have been
	// still for stampSlack: no slack here, not to wait for the fixtures to settle. age's times
	// an hour back make every change below show in the mtime too, whatever the clock's tick.
	s := newTestSandbox(t, Config{}, func(sm *seams) { sm.stampSlack = 0 })
	if s.landlockABI <= 0 {
		t.Skip("kernel has no landlock")
	}
	// The base lists each ancestor of the deny paths, so the fixture lives directly under /,
	// which changes far more rarely than /var/tmp, where tests of other packages run alongside.
	base := hostTempDir(t, "/", "sbx-test-prebuilt-")
	home, work := filepath.Join(base, "home"), filepath.Join(base, "work")
	for _, d := range []string{home, work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(home, "notes.txt"), []byte("notes\n"), 0o644)
	os.WriteFile(filepath.Join(home, ".env"), []byte("SECRET=1\n"), 0o600)
	// An entry no rule is made for (a symlink, here to itself) costs only its rule.
	if err := os.Symlink("loop", filepath.Join(home, "loop")); err != nil {
		t.Fatal(err)
	}
	os.Chmod(base, 0o755)
	chownR(t, base)
	age := func() {
		old := time.Now().Add(-time.Hour)
		for _, d := range []string{base, home} {
			os.Chtimes(d, old, old)
		}
	}
	age()
	deny := []string{filepath.Join(home, ".aws"), filepath.Join(home, ".env")}
	call := func(name, script string) (string, *Process) {
		t.Helper()
		waitPoolReady(t, s, poolMin)
		res, out, p, err := runProc(t, s, ctxTimeout(t, 10*time.Second), &Spec{
			Path: "/bin/sh", Args: []string{"-c", script}, Dir: work, WritableDirs: []string{work},
			DenyPaths: deny, Env: []string{"PATH=/usr/bin:/bin"}, UID: nobody, GID: nobody,
			Session: "prebuilt", Call: name,
		})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%s: %v %+v\n%s", name, err, res, out)
		}
		return out, p
	}
	read := "cat " + filepath.Join(home, "notes.txt") + "; cat " + filepath.Join(home, ".env") + "; echo end"
	// The first call sets the hint; the inits started after it prebuild its base. Drain the
	// ones started before (no hint), so the next call takes a hinted one. A change to / between
	// the two calls rightly keeps the base from being used: that shows as a new expansion cache
	// entry, and only then is the pair tried again.
	entries := func() map[string]*expansion {
		s.expansions.mu.Lock()
		defer s.expansions.mu.Unlock()
		return maps.Clone(s.expansions.entries)
	}
	var out string
	var p *Process
	for attempt := 1; ; attempt++ {
		call("c1", "true")
		before := entries()
		for i := 0; i < poolMax; i++ {
			if in := s.pool.take(nobodyUID); in != nil {
				s.discard(in)
			}
		}
		out, p = call("c2", read)
		if p.llPrebuilt {
			break
		}
		if maps.Equal(before, entries()) {
			t.Fatal("the call did not use the base its init prebuilt, and no directory it lists changed")
		}
		if attempt == 5 {
			t.Fatal("a directory the base lists changed between the calls in each of 5 tries")
		}
		t.Logf("try %d: a directory the base lists changed between the calls; again", attempt)
	}
	if out != "notes\nend\n" {
		t.Fatalf("with the prebuilt base: %q, want the notes, an empty .env, end", out)
	}
	// A file replaced under the same name: the same rules, but the home directory changed, so
	// the base prebuilt before is not used (its rule holds the old file) and the new one reads.
	tmp := filepath.Join(home, "notes.tmp")
	os.WriteFile(tmp, []byte("new notes\n"), 0o644)
	os.Chown(tmp, nobody, nobody)
	if err := os.Rename(tmp, filepath.Join(home, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	age()
	out, p = call("c3", read)
	if p.llPrebuilt {
		t.Fatal("a base prebuilt before its directory changed was used")
	}
	if out != "new notes\nend\n" {
		t.Fatalf("after the file was replaced: %q, want the new notes", out)
	}
	// A deny path made after the base was listed is hidden; an entry made beside it reads.
	if err := os.Mkdir(filepath.Join(home, ".aws"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(home, ".aws", "credentials"), []byte("key\n"), 0o644)
	os.WriteFile(filepath.Join(home, "new.txt"), []byte("new\n"), 0o644)
	chownR(t, base)
	age()
	out, p = call("c4", "cat "+filepath.Join(home, ".aws", "credentials")+" 2>/dev/null; cat "+filepath.Join(home, "new.txt")+"; echo end")
	if p.llPrebuilt {
		t.Fatal("a base prebuilt before its directory changed was used")
	}
	if out != "new\nend\n" {
		t.Fatalf("after the change: %q, want only the new entry", out)
	}
}
