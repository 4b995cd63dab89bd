package sandbox

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"golang.org/x/sys/unix"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestIndexGitlinks: the gitlinks of every index format git writes are found, and nothing
// else is taken for one.
func TestIndexGitlinks(t *testing.T) {
	needGit(t)
	for _, tc := range []struct {
		name string
		init []string
		then [][]string
	}{
		{"v2", []string{"init", "-q"}, nil},
		{"v3 (intent to add)", []string{"init", "-q"}, [][]string{{"add", "-N", "later.txt"}}},
		{"v4", []string{"init", "-q"}, [][]string{{"update-index", "--index-version", "4"}}},
		{"sha256", []string{"init", "-q", "--object-format=sha256"}, nil},
		{"split", []string{"init", "-q"}, [][]string{{"update-index", "--split-index"}, {"update-index", "--add", "--cacheinfo", "160000,HEAD2,deep/er/sub2"}}},
		{"no checksum", []string{"init", "-q"}, [][]string{{"config", "index.skipHash", "true"}, {"add", "a.txt"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			hostGit(t, dir, tc.init...)
			for _, f := range []string{"a.txt", "later.txt", "long/" + strings.Repeat("n", 300) + ".txt"} {
				os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755)
				os.WriteFile(filepath.Join(dir, f), []byte(f), 0o644)
			}
			hostGit(t, dir, "add", "a.txt", "long")
			hostGit(t, dir, "commit", "-qm", "x")
			out, _ := exec.Command("git", "-C", dir, "rev-parse", "HEAD").Output()
			head := strings.TrimSpace(string(out))
			hostGit(t, dir, "update-index", "--add", "--cacheinfo", "160000,"+head+",lib/sub")
			want := []string{"lib/sub"}
			for _, args := range tc.then {
				for i := range args {
					args[i] = strings.ReplaceAll(args[i], "HEAD2", head)
				}
				hostGit(t, dir, args...)
				if strings.Contains(strings.Join(args, " "), "deep/er/sub2") {
					want = append(want, "deep/er/sub2")
				}
			}
			fd := openDirFD(t, dir)
			links, err := readGitlinks(fd, ".git/index")
			slices.Sort(links)
			if slices.Sort(want); err != nil || !slices.Equal(slices.Compact(links), want) {
				t.Errorf("gitlinks %q, %v; want %q", links, err, want)
			}
		})
	}
	for _, bad := range [][]byte{nil, []byte("DIRC"), []byte("DIRC\x00\x00\x00\x02\xff\xff\xff\xff" + strings.Repeat("\x00", 20))} {
		if _, _, ok := readIndex(bad); ok {
			t.Errorf("read %q as an index", bad)
		}
	}
}

// v4Index is a version 4 index (no checksum, as index.skipHash writes it) of entries each
// given as the bytes its name strips from the one before and its suffix, all of mode.
func v4Index(mode uint32, entries [][2]any) []byte {
	b := binary.BigEndian.AppendUint32([]byte("DIRC\x00\x00\x00\x04"), uint32(len(entries)))
	for _, e := range entries {
		hdr := make([]byte, 40+20+2)
		binary.BigEndian.PutUint32(hdr[24:], mode)
		b = append(b, hdr...)
		strip := e[0].(int)
		// git's offset varint, as gitVarint reads it.
		var v []byte
		v = append(v, byte(strip&0x7f))
		for strip >>= 7; strip > 0; strip >>= 7 {
			strip--
			v = append([]byte{0x80 | byte(strip&0x7f)}, v...)
		}
		b = append(append(append(b, v...), e[1].(string)...), 0)
	}
	return append(b, make([]byte, 20)...)
}

// TestIndexGitlinksBounded: an index is the user's file, and what reading it costs the root
// daemon must not grow faster than the file. A version 4 index whose names each grow by one
// byte is read in place (a few allocations, not one per entry: built afresh, each name cost
// time and memory in the square of the entries); a name past PATH_MAX, or more submodule paths
// than a sweep keeps, makes the index one it cannot read (which fails closed).
func TestIndexGitlinksBounded(t *testing.T) {
	grow := func(n int) [][2]any {
		e := make([][2]any, n)
		for i := range e {
			e[i] = [2]any{0, "a"}
		}
		return e
	}
	const file, link = 0o100644, 0o160000
	b := v4Index(file, grow(maxIndexName))
	if _, _, ok := readIndex(b); !ok {
		t.Fatal("an index of names up to PATH_MAX was not read")
	}
	if allocs := testing.AllocsPerRun(3, func() { readIndex(b) }); allocs > 64 {
		t.Errorf("reading %d names of growing length made %.0f allocations", maxIndexName, allocs)
	}
	if _, _, ok := readIndex(v4Index(file, grow(maxIndexName+1))); ok {
		t.Error("a name past PATH_MAX was read")
	}
	links, _, ok := readIndex(v4Index(link, [][2]any{{0, "lib/a"}, {1, "b"}, {5, "deep/c"}}))
	if !ok || !slices.Equal(links, []string{"lib/a", "lib/b", "deep/c"}) {
		t.Errorf("gitlinks %q (%v), want lib/a lib/b deep/c", links, ok)
	}
	many := make([][2]any, maxIndexLinkBytes/1000+1)
	for i := range many {
		many[i] = [2]any{1000, strings.Repeat("s", 1000)}
	}
	many[0][0] = 0
	if _, _, ok := readIndex(v4Index(link, many)); ok {
		t.Errorf("an index of %d bytes of gitlinks was read", len(many)*1000)
	}
	// A handful of extensions is an index; a file of empty ones is not stepped through.
	head := "DIRC\x00\x00\x00\x02\x00\x00\x00\x00"
	if _, _, ok := readIndex([]byte(head + strings.Repeat("\x00", 8*3+20))); !ok {
		t.Error("an index of three empty extensions was not read")
	}
	if _, _, ok := readIndex([]byte(head + strings.Repeat("\x00", 8*(maxIndexExtensions+1)+20))); ok {
		t.Errorf("an index of %d empty extensions was read", maxIndexExtensions+1)
	}
	// Short paths count what each kept one costs, and git writes no empty one.
	if _, _, ok := readIndex(v4Index(link, [][2]any{{0, ""}})); ok {
		t.Error("an empty gitlink path was read")
	}
	short := make([][2]any, maxIndexLinkBytes/(1+linkOverhead)+1)
	for i := range short {
		short[i] = [2]any{min(i, 1), "x"}
	}
	if _, _, ok := readIndex(v4Index(link, short)); ok {
		t.Errorf("an index of %d one-byte gitlinks was read", len(short))
	}
	// A file with a hole (a sparse 256 MB costs its maker nothing) is not read at all.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "index"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	fd := openDirFD(t, dir)
	if _, err := readGitlinks(fd, "index"); err != nil {
		t.Fatalf("the index as a file: %v", err)
	}
	if err := os.Truncate(filepath.Join(dir, "index"), int64(len(b))+64<<20); err != nil {
		t.Fatal(err)
	}
	if hole, err := holeIn(filepath.Join(dir, "index")); err != nil || hole < 0 {
		t.Skipf("the file system of %s reports no holes (%v): sparse files are read as any", dir, err)
	}
	if _, err := readGitlinks(fd, "index"); err == nil || !strings.Contains(err.Error(), "hole") {
		t.Errorf("a sparse index: %v, want refused for its hole", err)
	}
}

// holeIn is where the file p's first hole starts, -1 when it reports none.
func holeIn(p string) (int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	hole, err := unix.Seek(int(f.Fd()), 0, unix.SEEK_HOLE)
	if err != nil || hole >= fi.Size() {
		return -1, err
	}
	return hole, nil
}

// readIndex is indexGitlinks of b.
func readIndex(b []byte) ([]string, string, bool) {
	return indexGitlinks(bytes.NewReader(b), int64(len(b)))
}

func FuzzIndexGitlinks(f *testing.F) {
	f.Add([]byte("DIRC\x00\x00\x00\x02\x00\x00\x00\x00" + strings.Repeat("\x00", 20)))
	f.Add([]byte("DIRC\x00\x00\x00\x04\x00\x00\x00\x01" + strings.Repeat("\x00", 62) + "\x05a\x00" + strings.Repeat("\x00", 20)))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, n := range []int{20, 32} {
			links, _, ok := (&indexStream{r: bufio.NewReader(bytes.NewReader(b))}).parse(int64(len(b)), n)
			if !ok && links != nil {
				t.Fatal("links from an index it could not read")
			}
			for _, l := range links {
				if strings.IndexByte(l, 0) >= 0 {
					t.Fatalf("a NUL in gitlink %q", l)
				}
			}
		}
	})
}

func openDirFD(t *testing.T, dir string) int {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return int(f.Fd())
}

// TestNewGitlinkGitMovedAside: in an existing repository, a call that adds a gitlink and a
// lib/.git naming a git dir of its own (or an embedded one) would have the user's next git
// status run that dir's core.fsmonitor; the .git is moved aside. A submodule that was there
// before the call and that it left alone stays.
func TestNewGitlinkGitMovedAside(t *testing.T) {
	t.Parallel()
	needGit(t)
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	const evil = `mkdir -p evil/objects evil/refs && echo 'ref: refs/heads/main' > evil/HEAD && ` +
		`printf '[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tfsmonitor = touch PWNED; false\n' > evil/config && `
	const link = `git update-index --add --cacheinfo 160000,$(git rev-parse HEAD),lib && `
	// A submodule present before the call, whose .git the call does not touch.
	hostGit(t, f.repo, "update-index", "--add", "--cacheinfo", "160000,"+strings.TrimSpace(gitOut(t, f.repo, "rev-parse", "HEAD"))+",kept")
	os.MkdirAll(filepath.Join(f.repo, "kept"), 0o755)
	os.WriteFile(filepath.Join(f.repo, "kept", ".git"), []byte("gitdir: ../.git/modules/kept\n"), 0o644)
	chownR(t, f.repo)
	time.Sleep(100 * time.Millisecond) // kept/.git is older than the calls
	for i, script := range []string{
		evil + `mkdir lib && echo 'gitdir: ../evil' > lib/.git && ` + link + `echo done`,
		`mkdir -p lib && git init -q lib && printf '[core]\n\tfsmonitor = touch PWNED; false\n' >> lib/.git/config && ` + link + `echo done`,
	} {
		os.RemoveAll(filepath.Join(f.repo, "lib"))
		os.RemoveAll(filepath.Join(f.repo, "evil"))
		hostGit(t, f.repo, "rm", "-q", "--cached", "--ignore-unmatch", "lib")
		sp := f.spec(script, f.repo, f.repo)
		sp.MoveAsideCreated = true
		sp.Call = "c1"
		res, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp)
		if err != nil || !strings.Contains(out, "done") {
			t.Fatalf("case %d: %v %q", i, err, out)
		}
		if want := filepath.Join(f.repo, "lib", ".git"); !slices.Contains(res.MovedAside, want) || slices.Contains(res.MovedAside, filepath.Join(f.repo, "kept", ".git")) {
			t.Errorf("case %d: moved aside %v, want %s and not kept/.git", i, res.MovedAside, want)
		}
		cmd := exec.Command("git", "-c", "safe.directory=*", "status")
		cmd.Dir, cmd.Env = f.repo, []string{"HOME=" + f.repo, "PATH=/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM=1"}
		_ = cmd.Run()
		for _, p := range []string{"PWNED", "lib/PWNED"} {
			if _, err := os.Lstat(filepath.Join(f.repo, p)); err == nil {
				t.Errorf("case %d: git status ran what the call left in a submodule (%s)", i, p)
			}
		}
	}
	// An index the sweep cannot read, left by the call, goes too: its gitlinks cannot be checked.
	sp := f.spec(`head -c 100 /dev/urandom >> .git/index && echo done`, f.repo, f.repo)
	sp.MoveAsideCreated = true
	sp.Call = "c2"
	res, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp)
	if err != nil || !strings.Contains(out, "done") || !slices.Contains(res.MovedAside, filepath.Join(f.repo, ".git", "index")) {
		t.Errorf("an unreadable index the call left: %v %q, moved aside %v", err, out, res.MovedAside)
	}
}

// TestGitlinkAddedLaterMovedAside: a repository one call made, whose .git is then older than
// the next call, registered as a submodule by that next call, is the call's all the same: a
// gitlink the index did not hold when the call started has its .git moved aside.
func TestGitlinkAddedLaterMovedAside(t *testing.T) {
	t.Parallel()
	needGit(t)
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	// A submodule of the user's, there before the calls.
	hostGit(t, f.repo, "update-index", "--add", "--cacheinfo", "160000,"+strings.TrimSpace(gitOut(t, f.repo, "rev-parse", "HEAD"))+",kept")
	os.MkdirAll(filepath.Join(f.repo, "kept"), 0o755)
	os.WriteFile(filepath.Join(f.repo, "kept", ".git"), []byte("gitdir: ../.git/modules/kept\n"), 0o644)
	chownR(t, f.repo)
	first := f.spec(`mkdir -p vendor && for r in lib1 lib2 lib3; do git init -q vendor/$r && printf '[core]\n\tfsmonitor = touch PWNED; false\n' >> vendor/$r/.git/config; done && echo done`, f.repo, f.repo)
	first.MoveAsideCreated, first.Call = true, "c1"
	if _, out, err := run(t, s, ctxTimeout(t, 20*time.Second), first); err != nil || !strings.Contains(out, "done") {
		t.Fatalf("%v %q", err, out)
	}
	time.Sleep(100 * time.Millisecond) // vendor/lib1/.git is older than the next call
	second := f.spec(`git update-index --add --cacheinfo 160000,$(git rev-parse HEAD),vendor/lib1 && echo done`, f.repo, f.repo)
	second.MoveAsideCreated, second.Call = true, "c2"
	res, out, err := run(t, s, ctxTimeout(t, 20*time.Second), second)
	if err != nil || !strings.Contains(out, "done") {
		t.Fatalf("%v %q", err, out)
	}
	if want := filepath.Join(f.repo, "vendor", "lib1", ".git"); !slices.Contains(res.MovedAside, want) {
		t.Errorf("moved aside %v, want %s", res.MovedAside, want)
	}
	cmd := exec.Command("git", "-c", "safe.directory=*", "status")
	cmd.Dir, cmd.Env = f.repo, []string{"HOME=" + f.repo, "PATH=/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM=1"}
	_ = cmd.Run()
	if _, err := os.Lstat(filepath.Join(f.repo, "vendor", "lib1", "PWNED")); err == nil {
		t.Error("git status ran what the first call left in the submodule the second registered")
	}
	// Registered after the index was removed by an earlier call: nothing was the user's then.
	rm := f.spec(`rm .git/index && echo done`, f.repo, f.repo)
	rm.MoveAsideCreated, rm.Call = true, "c2b"
	if _, out, err := run(t, s, ctxTimeout(t, 20*time.Second), rm); err != nil || !strings.Contains(out, "done") {
		t.Fatalf("%v %q", err, out)
	}
	time.Sleep(100 * time.Millisecond)
	reg := f.spec(`git update-index --add --cacheinfo 160000,$(git rev-parse HEAD),vendor/lib3 && echo done`, f.repo, f.repo)
	reg.MoveAsideCreated, reg.Call = true, "c2c"
	res, out, err = run(t, s, ctxTimeout(t, 20*time.Second), reg)
	if err != nil || !strings.Contains(out, "done") {
		t.Fatalf("%v %q", err, out)
	}
	if want := filepath.Join(f.repo, "vendor", "lib3", ".git"); !slices.Contains(res.MovedAside, want) {
		t.Errorf("with no index at the start: moved aside %v, want %s", res.MovedAside, want)
	}
	hostGit(t, f.repo, "update-index", "--add", "--cacheinfo", "160000,"+strings.TrimSpace(gitOut(t, f.repo, "rev-parse", "HEAD"))+",kept")
	// Moved into the place of a submodule the index held at the start: its .git is another.
	third := f.spec(`rm -rf kept && mv vendor/lib2 kept && echo done`, f.repo, f.repo)
	third.MoveAsideCreated, third.Call = true, "c3"
	res, out, err = run(t, s, ctxTimeout(t, 20*time.Second), third)
	if err != nil || !strings.Contains(out, "done") {
		t.Fatalf("%v %q", err, out)
	}
	if want := filepath.Join(f.repo, "kept", ".git"); !slices.Contains(res.MovedAside, want) {
		t.Errorf("moved aside %v, want %s", res.MovedAside, want)
	}
	// An index that is a link (git follows it to one that registers a planted submodule) is
	// no index the sweep can read: it goes, as one not in git's format does.
	link := f.spec(`cp .git/index .idx2 && GIT_INDEX_FILE=.idx2 git update-index --add --cacheinfo 160000,$(git rev-parse HEAD),vendor/lib3 && `+
		`rm .git/index && ln -s ../.idx2 .git/index && echo done`, f.repo, f.repo)
	link.MoveAsideCreated, link.Call = true, "c4"
	res, out, err = run(t, s, ctxTimeout(t, 20*time.Second), link)
	if err != nil || !strings.Contains(out, "done") {
		t.Fatalf("%v %q", err, out)
	}
	if want := filepath.Join(f.repo, ".git", "index"); !slices.Contains(res.MovedAside, want) {
		t.Errorf("an index made a link: moved aside %v, want %s", res.MovedAside, want)
	}
}

func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir, "-c", "safe.directory=*"}, args...)...).Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return string(out)
}
