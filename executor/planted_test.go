package executor

import "testing"

// TestLastSegments: a name is matched against the protected paths by its last segments, where
// each protected name lies, whatever its length; a short one whole, from a slash.
func TestLastSegments(t *testing.T) {
	t.Parallel()
	for p, want := range map[string]string{
		"/home/u/.config/git/config": "/.config/git/config",
		"a/b/c/d/e/f":                "/d/e/f",
		"x":                          "/x",
		"a/b":                        "/a/b",
		"/a/b/c":                     "/a/b/c",
	} {
		if got := lastSegments(p, 3); got != want {
			t.Errorf("lastSegments(%q, 3) = %q, want %q", p, got, want)
		}
	}
}
