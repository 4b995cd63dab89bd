package globwalk

import (
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tree makes a workspace w beside an outside dir holding secret, and returns both.
func tree(t *testing.T) (w, out string) {
	t.Helper()
	root := t.TempDir()
	w, out = filepath.Join(root, "w"), filepath.Join(root, "out")
	for _, d := range []string{w + "/sub", out + "/deep"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{w + "/a.txt", w + "/sub/b.txt", out + "/secret", out + "/deep/key"} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../out", w+"/up"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../out", w+"/\u00e9z"); err != nil {
		t.Fatal(err)
	}
	return w, out
}

func TestOutsideFindsWhatLinksLeadTo(t *testing.T) {
	w, out := tree(t)
	dirs := []string{w}
	big := Budget{Entries: 1000, Matches: 1000}
	for _, c := range []struct {
		pattern string
		want    []string // resolved, in order
	}{
		{"*.txt", nil},
		{"sub/*", nil},
		{"*/secret", []string{out + "/secret"}},
		{"up/sec*", []string{out + "/secret"}},
		{"[uv]p/[!x]ecret", []string{out + "/secret"}}, // brackets
		{"@(up|no)/secret", []string{out + "/secret"}}, // an extended glob group
		{"u\\p/secre?", []string{out + "/secret"}},     // a backslash
		{"**/key", []string{out + "/deep/key"}},        // any depth, links followed
		{"*", []string{out}},                           // the link itself
		{"sub/../*", nil},                              // not expanded: see below
		{"up/nothing*", nil},                           // no match
		{"{a,b}", nil},                                 // braces are the caller's to expand
		{"*/*/key", []string{out + "/deep/key"}},
		{"U?/SECRET", nil}, // a plain segment as spelled: nocaseglob takes a shopt
		{"[[:alpha:]]p/[[=s=]]ecret", []string{out + "/secret"}},
		{"[[.u.]][]p]/sec*", []string{out + "/secret"}},
		{"??z/secret", []string{out + "/secret"}}, // in the C locale ? is a byte of \u00e9
	} {
		links, complete := Outside([]string{w + "/" + c.pattern}, dirs, big, 8)
		var got []string
		for _, l := range links {
			if !slices.Contains(got, l.Resolved) { // up and \u00e9z lead to the same place
				got = append(got, l.Resolved)
			}
		}
		if c.pattern == "sub/../*" {
			if complete {
				t.Errorf("%s: complete, want not expanded", c.pattern)
			}
			continue
		}
		if !complete || !slices.Equal(got, c.want) {
			t.Errorf("%s: %v (complete %v), want %v", c.pattern, got, complete, c.want)
		}
	}
}

func TestOutsideBounds(t *testing.T) {
	w, _ := tree(t)
	if _, complete := Outside([]string{w + "/**/*"}, []string{w}, Budget{Entries: 3, Matches: 1000}, 8); complete {
		t.Error("entries past the budget: complete")
	}
	if _, complete := Outside([]string{w + "/*"}, []string{w}, Budget{Entries: 1000, Matches: 2}, 8); complete {
		t.Error("matches past the budget: complete")
	}
	if _, complete := Outside([]string{w + "/up/*"}, []string{w}, Budget{Entries: 1000, Matches: 1000}, 1); complete {
		t.Error("more links than max: complete")
	}
	if err := os.Symlink(".", w+"/sub/loop"); err != nil {
		t.Fatal(err)
	}
	// A link loop under ** ends where the kernel stops following links (ELOOP).
	if links, _ := Outside([]string{w + "/sub/**/x"}, []string{w}, Budget{Entries: 1 << 20, Matches: 1 << 20}, 8); len(links) != 0 {
		t.Errorf("a link loop under **: %v", links)
	}
	if _, complete := Outside([]string{"rel/*"}, []string{w}, Budget{Entries: 10, Matches: 10}, 8); complete {
		t.Error("a relative pattern: complete")
	}
}

// FuzzLoosen: any glob segment loosens to a valid pattern that matches the segment's own
// text, lower-cased, where the segment holds no wildcard (a literal name matches itself).
func FuzzLoosen(f *testing.F) {
	for _, s := range []string{"*.go", "[!a]?", "@(a|b)*", "\\*x", "[[:alpha:]]", "É*", "a[", "+(x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seg string) {
		pat := loosen(seg)
		if _, err := path.Match(pat, "x"); err != nil {
			t.Fatalf("%q loosened to %q: %v", seg, pat, err)
		}
		if !isGlob(seg) && !strings.Contains(seg, "/") {
			if ok, _ := path.Match(pat, strings.ToLower(seg)); !ok {
				t.Fatalf("%q loosened to %q, which does not match it", seg, pat)
			}
		}
	})
}

// TestOutsideFIFOAndProc: a FIFO a glob matches is no dir to list (opening it would wait for
// a writer), and a link into /proc/self leads where the opening program is: outside.
func TestOutsideFIFOAndProc(t *testing.T) {
	w, _ := tree(t)
	if err := syscall.Mkfifo(w+"/ff", 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/proc/self/cwd/y/secret", w+"/px"); err != nil {
		t.Fatal(err)
	}
	done := make(chan []Link, 1)
	go func() {
		links, _ := Outside([]string{w + "/f*/x", w + "/p*"}, []string{w}, Budget{Entries: 100, Matches: 100}, 8)
		done <- links
	}()
	select {
	case links := <-done:
		if len(links) != 1 || links[0].Resolved != "/proc/self/cwd/y/secret" {
			t.Errorf("links %+v, want px leading to /proc/self/cwd/y/secret", links)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the walk is waiting on a FIFO")
	}
}

// TestThroughLinks: every match reached through a link is reported, inside the workspace or
// out, with where the directory holding it leads; a match that is its own name is not.
func TestThroughLinks(t *testing.T) {
	w, _ := tree(t)
	if err := os.Symlink(".", w+"/self"); err != nil {
		t.Fatal(err)
	}
	root, err := filepath.EvalSymlinks(w)
	if err != nil {
		t.Fatal(err)
	}
	links, complete := ThroughLinks([]string{w + "/s*/*"}, Budget{Entries: 1000, Matches: 1000}, 100)
	if !complete {
		t.Fatal("incomplete")
	}
	got := map[string]string{}
	for _, l := range links {
		got[strings.TrimPrefix(l.Path, w+"/")] = l.Dir
	}
	// sub/b.txt is its own name; self/a.txt (and the rest under self) lead into w itself.
	if _, ok := got["sub/b.txt"]; ok || got["self/a.txt"] != root || got["self/sub"] != root {
		t.Errorf("links %+v", links)
	}
}
