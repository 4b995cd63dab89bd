package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/sandboxd/sandboxd/internal/testutil"
)

// nobody is a uid that is neither root nor the test's.
const nobody = 65534

// trustedBase is a root-owned 0755 directory under the sticky /var/tmp, as a production
// state dir's parent is.
func trustedBase(t *testing.T) string {
	t.Helper()
	testutil.RequireRoot(t)
	dir, err := os.MkdirTemp("/var/tmp", "sandboxd-trust-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func mkdirOwned(t *testing.T, p string, mode os.FileMode, uid int) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(p, uid, uid); err != nil {
		t.Fatal(err)
	}
}

func TestCheckTrustedDir(t *testing.T) {
	base := trustedBase(t)
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string) string // returns the path to check
		ok    bool
	}{
		{"root's directory", func(t *testing.T, d string) string { mkdirOwned(t, d, 0o711, 0); return d }, true},
		{"missing, under root's", func(t *testing.T, d string) string { return filepath.Join(d, "new") }, true},
		{"owned by a user", func(t *testing.T, d string) string { mkdirOwned(t, d, 0o700, nobody); return d }, false},
		{"root's, in a user's directory", func(t *testing.T, d string) string {
			mkdirOwned(t, d, 0o755, nobody)
			mkdirOwned(t, filepath.Join(d, "state"), 0o711, 0)
			return filepath.Join(d, "state")
		}, false},
		{"missing, in a user's directory", func(t *testing.T, d string) string {
			mkdirOwned(t, d, 0o755, nobody)
			return filepath.Join(d, "state")
		}, false},
		{"writable by everyone", func(t *testing.T, d string) string { mkdirOwned(t, d, 0o777, 0); return d }, false},
		{"sticky and writable by everyone", func(t *testing.T, d string) string { mkdirOwned(t, d, os.ModeSticky|0o777, 0); return d }, false},
		{"root's, in a sticky directory", func(t *testing.T, d string) string {
			mkdirOwned(t, d, os.ModeSticky|0o777, 0)
			mkdirOwned(t, filepath.Join(d, "state"), 0o711, 0)
			return filepath.Join(d, "state")
		}, true},
		{"a user's symlink to root's directory", func(t *testing.T, d string) string {
			mkdirOwned(t, d, os.ModeSticky|0o777, 0)
			mkdirOwned(t, filepath.Join(d, "real"), 0o711, 0)
			link := filepath.Join(d, "link")
			if err := os.Symlink("real", link); err != nil {
				t.Fatal(err)
			}
			if err := os.Lchown(link, nobody, nobody); err != nil {
				t.Fatal(err)
			}
			return link
		}, false},
		{"root's symlink to root's directory", func(t *testing.T, d string) string {
			mkdirOwned(t, d, 0o755, 0)
			mkdirOwned(t, filepath.Join(d, "real"), 0o711, 0)
			if err := os.Symlink(filepath.Join(d, "real"), filepath.Join(d, "link")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(d, "link")
		}, true},
		{"root's symlink into a user's directory", func(t *testing.T, d string) string {
			mkdirOwned(t, filepath.Join(d, "home"), 0o755, nobody)
			mkdirOwned(t, filepath.Join(d, "home", "state"), 0o711, 0)
			if err := os.Symlink("home/state", filepath.Join(d, "link")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(d, "link")
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.setup(t, filepath.Join(base, strings.ReplaceAll(tc.name, " ", "_")))
			err := checkTrustedDir(p, false, true)
			if (err == nil) != tc.ok {
				t.Errorf("checkTrustedDir(%s) = %v, want ok %v", p, err, tc.ok)
			}
		})
	}
}

// A state directory a user owns lets them swap tool-results for a symlink to any directory,
// whose contents the next start would remove as root: the daemon refuses to start there, and
// the symlink's target survives.
func TestUntrustedStateDirRefused(t *testing.T) {
	base := trustedBase(t)
	state := filepath.Join(base, "state")
	mkdirOwned(t, state, 0o755, nobody)
	victim := filepath.Join(base, "victim")
	mkdirOwned(t, victim, 0o755, 0)
	if err := os.WriteFile(filepath.Join(victim, "keep"), []byte("root's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(state, "tool-results")); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(base, "c.yaml")
	if err := os.WriteFile(cfg, []byte("sandbox:\n  cgroup_name: sandboxd-test-untrusted-state\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := New(Options{Socket: filepath.Join(base, "s.sock"), StateDir: state, ConfigPath: cfg, ConfigRequired: true}, zaptest.NewLogger(t))
	if err == nil {
		d.shutdown()
		t.Fatal("the daemon started on a state directory a user owns")
	}
	if !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Errorf("error does not say why: %v", err)
	}
	if _, err := os.Stat(filepath.Join(victim, "keep")); err != nil {
		t.Errorf("the file behind the planted symlink: %v", err)
	}
	if fi, err := os.Stat(victim); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("the planted symlink's target was changed: %v %v", fi.Mode(), err)
	}
}

// The socket's directory must be one only root can change (a sticky one like /tmp is): the
// daemon removes a stale socket and chmods the new one there by path.
func TestUntrustedSocketDirRefused(t *testing.T) {
	base := trustedBase(t)
	user := filepath.Join(base, "user")
	mkdirOwned(t, user, 0o755, nobody)
	if l, err := Listen(filepath.Join(user, "s.sock")); err == nil {
		l.Close()
		t.Fatal("listening in a directory a user owns")
	} else if !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Errorf("error does not say why: %v", err)
	}
	shared := filepath.Join(base, "tmp")
	mkdirOwned(t, shared, os.ModeSticky|0o777, 0)
	l, err := Listen(filepath.Join(shared, "s.sock"))
	if err != nil {
		t.Fatalf("listening in a sticky directory: %v", err)
	}
	l.Close()
}

// The metrics socket is bound, chmodded and renamed by path as root too: the same check.
func TestUntrustedMetricsSocketDirRefused(t *testing.T) {
	base := trustedBase(t)
	user := filepath.Join(base, "user")
	mkdirOwned(t, user, 0o755, nobody)
	if l, err := listenMetricsUnix(filepath.Join(user, "m.sock"), "root"); err == nil {
		l.Close()
		t.Fatal("a metrics socket in a directory a user owns")
	} else if !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Errorf("error does not say why: %v", err)
	}
	shared := filepath.Join(base, "tmp")
	mkdirOwned(t, shared, os.ModeSticky|0o777, 0)
	l, err := listenMetricsUnix(filepath.Join(shared, "m.sock"), "root")
	if err != nil {
		t.Fatalf("a metrics socket in a sticky directory: %v", err)
	}
	l.Close()
}
