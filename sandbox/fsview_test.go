package sandbox

import (
	"os"
	"path/filepath"
	"testing"
)

// resolveByPrefixes is resolve as first written: EvalSymlinks on the whole path, then on each
// shorter prefix until one resolves. resolve must give the same answer in one pass.
func resolveByPrefixes(p string) string {
	rest := ""
	for cur := p; ; {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return p
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

func TestResolveMatchesPrefixWalk(t *testing.T) {
	t.Parallel()
	d := t.TempDir()
	mk := func(p string) {
		if err := os.MkdirAll(filepath.Join(d, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ln := func(target, p string) {
		if err := os.Symlink(target, filepath.Join(d, p)); err != nil {
			t.Fatal(err)
		}
	}
	mk("real/sub")
	os.WriteFile(filepath.Join(d, "real/file"), nil, 0o644)
	ln("real", "rel")                       // relative, to a dir
	ln(filepath.Join(d, "real/sub"), "abs") // absolute
	ln("rel/sub", "chain")                  // through another link
	ln("missing/x", "dangling")
	ln("loop2", "loop1")
	ln("loop1", "loop2")
	ln("../real", "real/sub/up")
	ln("file", "real/tofile")
	paths := []string{
		"", "/real", "/real/sub", "/real/sub/new/deeper", "/rel", "/rel/sub/x", "/abs", "/abs/x/y",
		"/chain", "/chain/up/sub/up/file", "/dangling", "/dangling/x", "/loop1", "/loop1/x",
		"/real/file", "/real/file/x", "/real/tofile/x", "/nothere", "/nothere/a/b",
	}
	view, reversed := newFSView(), newFSView()
	for i, p := range paths {
		in := d + p
		want := resolveByPrefixes(in)
		if got := resolve(nil, in); got != want {
			t.Errorf("resolve(%q) = %q, want %q", in, got, want)
		}
		// Through one view shared by every path, as a plan resolves its paths: a path's
		// answer is built on its dir's, which the view may or may not have seen first.
		if got := resolve(view, in); got != want {
			t.Errorf("resolve(view, %q) = %q, want %q", in, got, want)
		}
		in = d + paths[len(paths)-1-i]
		if got, want := resolve(reversed, in), resolveByPrefixes(in); got != want {
			t.Errorf("resolve(view, %q) after the deeper paths = %q, want %q", in, got, want)
		}
	}
	for _, p := range []string{"/", "/proc/self", "/var/run/docker.sock", "/nonexistent/.aws"} {
		if got, want := resolve(nil, p), resolveByPrefixes(p); got != want {
			t.Errorf("resolve(%q) = %q, want %q", p, got, want)
		}
	}
}
