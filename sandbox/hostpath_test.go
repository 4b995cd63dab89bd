package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sandboxd/sandboxd/internal/globwalk"
	"github.com/sandboxd/sandboxd/internal/testutil"
)

// TestResolveOnHost: a path is followed as the caller's own open would follow it on the host:
// links (relative, absolute, chained), `..` after a link taken physically, a missing part or a
// dir the caller cannot search ending the walk, a hidden dir never looked into, /proc judged
// by its names (a process's root, cwd or files depend on the opener: an error), and a loop
// ending as the kernel's ELOOP would.
func TestResolveOnHost(t *testing.T) {
	t.Parallel()
	testutil.RequireRoot(t)
	d := hostTempDir(t, "/var/tmp", "sbx-hostpath-")
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"secret/sub", "pub/deep", "closed/in"} {
		if err := os.MkdirAll(filepath.Join(d, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"secret/id", "secret/sub/x", "pub/deep/f", "closed/in/f"} {
		if err := os.WriteFile(filepath.Join(d, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(d, "pub/fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(d, "closed"), 0o700); err != nil { // root's: nobody cannot search it
		t.Fatal(err)
	}
	ln := func(target, name string) {
		if err := os.Symlink(target, filepath.Join(d, name)); err != nil {
			t.Fatal(err)
		}
	}
	ln(filepath.Join(d, "secret/id"), "pub/to-secret")   // absolute, into the hidden dir
	ln("../secret/sub", "pub/rel-secret")                // relative, into it
	ln("deep", "pub/d")                                  // relative, to a dir
	ln("d/f", "pub/chain")                               // through another link
	ln(filepath.Join(d, "pub/deep"), "pub/abs")          // absolute, to a dir
	ln("/proc/self/root"+d+"/secret/id", "pub/via-proc") // the opener's root
	ln("/proc/cpuinfo", "pub/cpuinfo")                   // a /proc file like any other
	ln("loop2", "pub/loop1")
	ln("loop1", "pub/loop2")
	hidden := func(p string) bool { return p == d+"/secret" || strings.HasPrefix(p, d+"/secret/") }
	var ins []string
	var wants []HostPath
	for _, tc := range []struct {
		in, want, special string
		exists, dir       bool
	}{
		{"/pub/deep/f", "/pub/deep/f", "", true, false},
		{"/pub/chain", "/pub/deep/f", "", true, false},
		{"/pub/d/../deep/f", "/pub/deep/f", "", true, false},
		{"/pub/abs/../fifo", "/pub/fifo", "fifo", true, false}, // .. of the dir the link reached
		{"/pub/abs", "/pub/deep", "", true, true},
		{"/pub/to-secret", "/secret/id", "hidden", false, false},
		{"/pub/rel-secret/x", "/secret/sub/x", "hidden", false, false},
		{"/secret/id", "/secret/id", "hidden", false, false},
		{"/pub/missing/x/../y", "/pub/missing/y", "", false, false},
		{"/closed/in/f", "/closed/in/f", "", false, false},
		{"/pub/loop1/x", "/pub/loop1/x", "", false, false},
	} {
		got, err := ResolveOnHost(nobody, nobody, nil, d+tc.in, hidden)
		want := HostPath{Resolved: d + tc.want, Special: tc.special, Exists: tc.exists, IsDir: tc.dir}
		if err != nil || got != want {
			t.Errorf("%s: %+v, %v; want %+v", tc.in, got, err, want)
		}
		ins, wants = append(ins, d+tc.in), append(wants, want)
	}
	// All at once, as a command's paths are (their lookups shared): the same answers, and a
	// relative path refused on its own.
	got, errs := ResolveAllOnHost(nobody, nobody, nil, append(ins, "rel/path"), hidden)
	for i, want := range wants {
		if errs[i] != nil || got[i] != want {
			t.Errorf("%s, in a batch: %+v, %v; want %+v", ins[i], got[i], errs[i], want)
		}
	}
	if errs[len(ins)] == nil {
		t.Error("a relative path in a batch resolved")
	}
	if got, err := ResolveOnHost(nobody, nobody, nil, d+"/pub/cpuinfo", hidden); err != nil || got.Resolved != "/proc/cpuinfo" || got.Special != "proc" {
		t.Errorf("a link to /proc/cpuinfo: %+v, %v", got, err)
	}
	for _, p := range []string{d + "/pub/via-proc", "/proc/self/root" + d + "/secret/id", "/proc/1/cwd/x", "/proc/self/fd/3",
		"/proc/thread-self/root/etc", "/proc/self/task/1/../1/cwd", "/proc/12/map_files/x"} {
		if got, err := ResolveOnHost(nobody, nobody, nil, p, hidden); !errors.Is(err, ErrOpenerDependent) {
			t.Errorf("%s: %+v, %v; want ErrOpenerDependent", p, got, err)
		}
	}
	if _, err := ResolveOnHost(nobody, nobody, nil, "rel/path", hidden); err == nil {
		t.Error("a relative path resolved")
	}
}

// TestGlobOutsideOnHost expands as the caller: a link in a dir the caller cannot list is no
// match of theirs, one in a dir they can is found where it leads.
func TestGlobOutsideOnHost(t *testing.T) {
	t.Parallel()
	testutil.RequireRoot(t)
	d := hostTempDir(t, "/var/tmp", "sbx-globhost-")
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"w/pub", "w/closed", "out"} {
		if err := os.MkdirAll(filepath.Join(d, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(d, "out/secret"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"w/pub/up", "w/closed/up"} {
		if err := os.Symlink(filepath.Join(d, "out"), filepath.Join(d, l)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(d, "w/closed"), 0o700); err != nil { // root's: nobody cannot list it
		t.Fatal(err)
	}
	b := globwalk.Budget{Entries: 100, Matches: 100}
	links, complete, err := GlobOutsideOnHost(nobody, nobody, nobody, nil, []string{d + "/w/*/*/secret"}, []string{d + "/w"}, b, 8)
	if err != nil || !complete || len(links) != 1 || links[0].Path != d+"/w/pub/up/secret" || links[0].Resolved != d+"/out/secret" {
		t.Fatalf("as nobody: %+v complete %v err %v; want only w/pub/up/secret, leading to out/secret", links, complete, err)
	}
}
