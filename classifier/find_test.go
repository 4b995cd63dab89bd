package classifier

import (
	"slices"
	"testing"
)

// TestFindRemovesWrites: what find removes, its roots, is written, so the protected paths and
// Edit deny rules hold `find .git -delete` as they hold `rm -rf .git`.
func TestFindRemovesWrites(t *testing.T) {
	opts := Options{Cwd: "/home/u/proj", Home: "/home/u"}
	for cmd, want := range map[string]string{
		`find .git -delete`:                    "/home/u/proj/.git",
		`find -L ~/.config -type f -delete`:    "/home/u/.config",
		`find src -exec rm {} +`:               "/home/u/proj/src",
		`find src -execdir /bin/mv {} /tmp \;`: "/home/u/proj/src",
		`find -delete`:                         "/home/u/proj",
	} {
		c := Classify(cmd, opts)
		if !slices.ContainsFunc(c.Paths, func(p PathUse) bool { return p.Path == want && p.Access == AccessWrite }) {
			t.Errorf("%q: paths %+v, want %s written", cmd, c.Paths, want)
		}
	}
	for _, cmd := range []string{`find .git -name x`, `find src -exec cat {} +`} {
		if c := Classify(cmd, opts); slices.ContainsFunc(c.Paths, func(p PathUse) bool { return p.Access == AccessWrite }) {
			t.Errorf("%q: writes %+v", cmd, c.Paths)
		}
	}
}
