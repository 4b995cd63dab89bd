package permission

import "testing"

func TestDecidedOnlyOutside(t *testing.T) {
	proj := []string{"/home/u/proj"}
	for _, tc := range []struct {
		pattern string
		dirs    []string
		want    bool
	}{
		{"/home/u/proj/secret/x.key", proj, false}, // literal: hidden wherever it is
		{"/home/u/other/x.key", proj, false},       // literal outside: hidden too
		{"/home/u/proj/**", proj, false},           // a literal dir's whole tree
		{`/home/u/proj/\*.key`, proj, false},       // an escaped wildcard is literal
		{"/home/u/proj/secret/*.key", proj, false}, // starts in the session: walked there
		{"/srv/**/*.key", proj, false},             // apart from the session: walked there
		{`/home/\*/x/*.key`, proj, false},          // escaped start apart from the session
		{"/**/*.key", proj, true},                  // starts at /
		{"/home/**/*.key", proj, true},             // starts at a dir that holds the session
		{"/home/u/[ab]/x", proj, true},             // a class is a wildcard too
		{"/home/u/?/x", []string{"/srv", "/home/u/proj"}, true},
		{"/**/*.key", []string{"/"}, false},      // a session at / walks everything
		{"/**/*.key", []string{"rel/dir"}, true}, // a relative dir holds nothing
	} {
		if got := DecidedOnlyOutside(tc.pattern, tc.dirs); got != tc.want {
			t.Errorf("DecidedOnlyOutside(%q, %q) = %v, want %v", tc.pattern, tc.dirs, got, tc.want)
		}
	}
}
