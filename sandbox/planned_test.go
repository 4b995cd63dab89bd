package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestWritableDirOnHostReadOnlyMountStaysReadOnly: a session dir the host mounts read-only
// (a read-only bind, the admin's way to freeze a tree the user owns) is not writable in the
// sandbox either; a writable dir beside it still is.
func TestWritableDirOnHostReadOnlyMountStaysReadOnly(t *testing.T) {
	// Not parallel: it mounts on the host.
	s := newTestSandbox(t, Config{})
	base := hostTempDir(t, "/var/tmp", "sbx-romount-")
	frozen, open := filepath.Join(base, "frozen"), filepath.Join(base, "open")
	for _, d := range []string{base, frozen, open} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mount(frozen, frozen, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(frozen, unix.MNT_DETACH) })
	if err := unix.Mount("", frozen, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
		t.Fatal(err)
	}
	res, out, err := run(t, s, ctxTimeout(t, 10*time.Second), &Spec{
		Path: "/bin/sh", Args: []string{"-c", "touch " + open + "/ok && echo open-ok; touch " + frozen + "/x"},
		Env: []string{"PATH=/usr/bin:/bin"}, Dir: open, WritableDirs: []string{frozen, open},
		UID: nobody, GID: nobody, Session: "ro", Call: "c1",
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "open-ok") {
		t.Errorf("the writable dir beside it was not writable: %q", out)
	}
	if res.ExitCode == 0 || !strings.Contains(out, "Read-only file system") {
		t.Errorf("writing under the host's read-only mount: exit %d, %q; want Read-only file system", res.ExitCode, out)
	}
	if _, err := os.Stat(filepath.Join(frozen, "x")); err == nil {
		t.Error("the file was created under the host's read-only mount")
	}
}

// TestPathSwappedAfterPlanFailsClosed: another process of the caller replaces a directory on
// the way to a planned writable dir, or to a deny path, with a symlink between the plan and the
// child's mounts. The child, root while it mounts, must not follow it: it would clone the
// directory the symlink leads to, mount it writable and give landlock's write rule to it. The
// call fails instead, and nothing is written there.
func TestPathSwappedAfterPlanFailsClosed(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	base := hostTempDir(t, "/var/tmp", "sbx-swap-")
	// The writable dir is base/w/tmp and the deny path base/d/tmp; a symlink in place of w or d
	// leads to base/decoy/tmp, which exists and is not the caller's to write through here.
	decoy := filepath.Join(base, "decoy", "tmp")
	for _, d := range []string{base, filepath.Join(base, "w"), filepath.Join(base, "d"), filepath.Join(base, "decoy")} {
		if err := os.MkdirAll(filepath.Join(d, "tmp"), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{d, filepath.Join(d, "tmp")} {
			if err := os.Chown(p, nobody, nobody); err != nil {
				t.Fatal(err)
			}
		}
	}
	work, deny := filepath.Join(base, "w", "tmp"), filepath.Join(base, "d", "tmp")
	spec := func(call string) *Spec {
		return &Spec{
			Path: "/bin/sh", Args: []string{"-c", "touch " + decoy + "/escaped; touch " + work + "/fine && echo fine"},
			Env: []string{"PATH=/usr/bin:/bin"}, Dir: "/", WritableDirs: []string{work},
			DenyPaths: []string{deny}, UID: nobody, GID: nobody, Session: "swap", Call: call,
		}
	}
	for _, swapped := range []string{"w", "d"} {
		t.Run(swapped, func(t *testing.T) {
			dir := filepath.Join(base, swapped)
			s.seams.afterPlan = func() {
				if err := os.Rename(dir, dir+".moved"); err != nil {
					t.Error(err)
				}
				if err := os.Symlink(filepath.Join(base, "decoy"), dir); err != nil {
					t.Error(err)
				}
			}
			defer func() {
				s.seams.afterPlan = nil
				os.Remove(dir)
				if err := os.Rename(dir+".moved", dir); err != nil {
					t.Fatal(err)
				}
			}()
			_, out, err := run(t, s, ctxTimeout(t, 10*time.Second), spec("c-"+swapped))
			if !errors.Is(err, ErrInitFailed) || !errors.Is(err, syscall.ELOOP) {
				t.Errorf("a planned path swapped for a symlink: err %v, output %q; want the init's ELOOP", err, out)
			}
			if _, err := os.Stat(filepath.Join(decoy, "escaped")); err == nil {
				t.Error("the call wrote where the symlink led")
				os.Remove(filepath.Join(decoy, "escaped"))
			}
		})
	}
	// Unswapped, the same call runs and writes only its own dir.
	res, out, err := run(t, s, ctxTimeout(t, 10*time.Second), spec("c-plain"))
	if err != nil || res.ExitCode != 0 || !strings.Contains(out, "fine") {
		t.Fatalf("the call without a swap: %v %+v %q", err, res, out)
	}
	if _, err := os.Stat(filepath.Join(decoy, "escaped")); err == nil {
		t.Error("the unswapped call wrote outside its writable dir")
	}
}

// TestRuntimeDirHidden: the caller's /run/user/<uid> (its session bus, its systemd user
// manager, its agents) is hidden from every call, a unix socket there being out of the network
// namespace's reach; a socket dir in it that a session names (gpg-agent's, here) is exposed
// alone.
func TestRuntimeDirHidden(t *testing.T) {
	// Not parallel: it makes /run/user/65534, which every plan for nobody looks at.
	s := newTestSandbox(t, Config{})
	runtime := "/run/user/" + strconv.Itoa(nobody)
	if _, err := os.Lstat(runtime); err == nil {
		t.Skipf("%s exists on this host: the test makes its own and removes it", runtime)
	}
	// A host without /run/user (a container) gets one as logind makes it, searchable by all:
	// MkdirAll would make it 0700 like the dirs below, and nobody could reach its own.
	if _, err := os.Lstat("/run/user"); os.IsNotExist(err) {
		if err := os.Mkdir("/run/user", 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove("/run/user") })
	}
	if err := os.MkdirAll(filepath.Join(runtime, "gnupg"), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(runtime) })
	for _, d := range []string{runtime, filepath.Join(runtime, "gnupg")} {
		if err := os.Chown(d, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	bus, agent := filepath.Join(runtime, "bus"), filepath.Join(runtime, "gnupg", "S.gpg-agent")
	serveUnix(t, bus, "hello\n")
	serveUnix(t, agent, "hello\n")
	// A symlink beside them, as runtime dirs have: exposing a dir must not trip over it.
	if err := os.Symlink("gnupg/S.gpg-agent", filepath.Join(runtime, "S.gpg")); err != nil {
		t.Fatal(err)
	}
	connect := `python3 -c 'import socket,sys
for p in sys.argv[1:]:
    s=socket.socket(socket.AF_UNIX)
    try: s.connect(p); print(p, "connected")
    except OSError as e: print(p, "refused", e.errno)' ` + bus + " " + agent
	for _, tc := range []struct {
		name     string
		readOnly []string
		want     []string
	}{
		{"nothing exposed", nil, []string{bus + " refused", agent + " refused"}},
		{"gpg-agent exposed by path", []string{filepath.Join(runtime, "gnupg")}, []string{bus + " refused", agent + " connected"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, out, err := run(t, s, ctxTimeout(t, 10*time.Second), &Spec{
				Path: "/bin/sh", Args: []string{"-c", connect}, Env: []string{"PATH=/usr/bin:/bin"},
				Dir: "/", ReadOnlyDirs: tc.readOnly, UID: nobody, GID: nobody, Session: "rt", Call: "c",
				AllowUnixSockets: true, // the hide list is what stands where the config allows them
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("want %q in:\n%s", w, out)
				}
			}
		})
	}
}

func TestHideAround(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	h := filepath.Join(base, "rt")
	for _, d := range []string{"bus", "systemd", "gnupg", "a/b", "a/c"} {
		if err := os.MkdirAll(filepath.Join(h, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A symlink among the entries gets no cover of its own: the child mounts over no symlink.
	if err := os.Symlink("gnupg", filepath.Join(h, "S.gpg")); err != nil {
		t.Fatal(err)
	}
	j := func(p ...string) string { return filepath.Join(append([]string{h}, p...)...) }
	for _, tc := range []struct {
		name string
		keep []string
		want []string
	}{
		{"no session dir in it", []string{base + "/elsewhere"}, []string{h}},
		{"a session dir is it", []string{h}, []string{h}},
		{"a session dir holds it", []string{base}, []string{h}},
		{"a socket dir exposed", []string{j("gnupg")}, []string{j("a"), j("bus"), j("systemd")}},
		{"deeper", []string{j("a", "b")}, []string{j("a", "c"), j("bus"), j("gnupg"), j("systemd")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := hideAround([]string{h}, tc.keep)
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("hideAround = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestMountReadOnly reads a mount table as the kernel writes it: the mount a path lies on is
// the longest mount point holding it, the last listed on a point (on top); read-only is the
// mount's flag or its file system's; mount points come with octal escapes.
func TestMountReadOnly(t *testing.T) {
	table := `22 1 254:0 / / ro,relatime shared:1 - ext4 /dev/vda rw
23 22 254:0 /home /home rw,relatime shared:2 - ext4 /dev/vda rw
24 22 0:30 / /srv/ro\040dir rw,relatime - ext4 /dev/vdb ro
25 22 254:0 /var /var rw,nosuid master:3 - ext4 /dev/vda rw
26 25 254:0 /var /var ro,nosuid - ext4 /dev/vda rw
27 22 0:31 / /data rw - xfs /dev/vdc rw
`
	path := filepath.Join(t.TempDir(), "mountinfo")
	if err := os.WriteFile(path, []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	for d, want := range map[string]bool{
		"/":             true,  // the root mount is read-only
		"/opt/x":        true,  // on the root mount
		"/home/u/proj":  false, // its own writable mount
		"/homes":        true,  // not under /home: the root mount
		"/srv/ro dir/a": true,  // a read-only file system, the point escaped
		"/var/tmp/p":    true,  // the second mount on /var is on top
		"/data":         false, // the mount point itself
		"/data/../etc":  true,  // cleaned before: what under() is given is clean
	} {
		ro, ok := mountReadOnly(path, filepath.Clean(d))
		if !ok || ro != want {
			t.Errorf("%s: read-only %v (found %v), want %v", d, ro, ok, want)
		}
	}
	if _, ok := mountReadOnly(filepath.Join(t.TempDir(), "none"), "/x"); ok {
		t.Error("a missing table answered")
	}
}
