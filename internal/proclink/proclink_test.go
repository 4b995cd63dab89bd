package proclink

import (
	"os"
	"path/filepath"
	"testing"
)

// TestTarget: a link on the way into /proc or /dev/fd is reported with the rest of the path;
// links elsewhere, and none, are not.
func TestTarget(t *testing.T) {
	d := t.TempDir()
	for _, l := range [][2]string{{"/proc/self/cwd/y", "x"}, {"x", "via"}, {"sub", "rel"}, {"/dev/stdin", "in"}} {
		if err := os.Symlink(l[0], filepath.Join(d, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(d, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{
		d + "/x/secret":   "/proc/self/cwd/y/secret",
		d + "/via/secret": "/proc/self/cwd/y/secret",
		d + "/in":         "/dev/stdin",
		d + "/rel/f":      "",
		d + "/sub/f":      "",
		"/proc/self/cwd":  "", // named so, not led to: the caller sees the name itself
	} {
		if got := Target(p); got != want {
			t.Errorf("%s: %q, want %q", p, got, want)
		}
	}
}
