package permission

import (
	"strings"
	"testing"
)

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

// TestMatchBashGlobs: a word the shell expands matches a rule when some expansion of it does:
// a glob as a name it matches, $X as anything, either as nothing.
func TestMatchBashGlobs(t *testing.T) {
	t.Parallel()
	g, any, one := GlobPatternMark, GlobAnyMark, GlobOneMark
	for _, tc := range []struct {
		pattern string
		words   []string
		want    bool
	}{
		{"git push *", []string{"git", g + "pus*", "origin"}, true},
		{"git push *", []string{"git", g + "[p]ush"}, true},
		{"git push *", []string{"git", g + "pu[!x]h", "o"}, true},
		{"git push *", []string{"git", g + "*.go"}, false},
		{"git push *", []string{"git", g + "[[:alpha:]]ush", "o"}, true},
		{"git push origin *", []string{"git", any + "$X", "main"}, true},
		{"git push", []string{"git", "push", any + "$X"}, true},
		{"rm -rf *", []string{"rm", g + "-r?", "x"}, true},
		{"rm -rf *", []string{"rm", g + "*.o"}, false},
		{"rm -rf *", []string{"rm", g + "*.o", "-rf", "x"}, true}, // nullglob drops *.o
		{"npm run test *", []string{"npm", "run", g + "tes*"}, true},
		{"curl *", []string{"ls", g + "*"}, false},
		// One quoted word of a shape: its literals, anything for each gap, never gone.
		{"rm -rf *", []string{"rm", one + "./\x03"}, false},
		{"rm -rf *", []string{"rm", one + "\x03/x.o"}, false},
		{"rm -rf *", []string{"rm", one + "\x03"}, true},
		{"rm -rf *", []string{"rm", one + "-r\x03", "x"}, true},
		{"git push *", []string{"git", one + "\x03sh", "o"}, true},
		{"git push *", []string{"git", one + "\x03sx", "o"}, false},
		{"cat /etc/shadow", []string{"cat", one + "\x03/shadow"}, true},
		{"cat /etc/shadow", []string{"cat", one + "/e\x03c/\x03w"}, true},
		{"cat /etc/shadow", []string{"cat", one + "/e\x03x/\x03"}, false},
		{"git push origin", []string{"git", one + "\x03"}, true}, // "push origin", one word to the matcher
		{"git push", []string{"git", one + "\x03", "push"}, false},
		{"rm -rf /x*", []string{"rm", "-rf", one + "./\x03"}, true}, // the rule's own * meets any word
	} {
		if got := MatchBashGlobs(tc.pattern, tc.words, false, NewMatchBudget()); got != tc.want {
			t.Errorf("%q against %q: %v, want %v", tc.pattern, tc.words, got, tc.want)
		}
	}
	// Too many readings to try: taken to match.
	many := []string{"rm"}
	for range 16 {
		many = append(many, g+"*.o")
	}
	if !MatchBashGlobs("rm -rf *", many, false, NewMatchBudget()) {
		t.Error("sixteen globs: want the rule taken to match")
	}
	// A spent budget: taken to match, untried.
	if !MatchBashGlobs("git push *", []string{"git", g + "*.go"}, false, &MatchBudget{}) {
		t.Error("no budget left: want the rule taken to match")
	}
}

// FuzzMatchBashGlobs: marking a word as one the shell expands never loses the reading where
// it stays its own text (a glob matching no file, a quoted word of no expansion), and the
// matcher neither panics nor outruns its budget on any rule and words.
func FuzzMatchBashGlobs(f *testing.F) {
	f.Add("git push *", "git", "push", "origin", byte(0))
	f.Add("rm -rf *", "rm", "-r?", "x", byte(1))
	f.Add("cat /etc/shadow", "cat", "\x03/shadow", "", byte(2))
	f.Fuzz(func(t *testing.T, pattern, w0, w1, w2 string, kind byte) {
		if len(pattern) > 200 || len(w0)+len(w1)+len(w2) > 200 {
			return
		}
		words := []string{w0, w1, w2}
		for _, w := range words {
			if w == "" || strings.ContainsAny(w, " \x00\x01\x02") {
				return // the classifier's words are non-empty, unmarked and unsplit
			}
		}
		plain := MatchBashText(pattern, strings.Join(words, " "), false)
		mark := []string{GlobPatternMark, GlobAnyMark, GlobOneMark}[int(kind)%3]
		if mark == GlobOneMark && strings.Contains(w1, "\x03") {
			return // a shape's gap is not its own text
		}
		marked := []string{w0, mark + w1, w2}
		if got := MatchBashGlobs(pattern, marked, false, NewMatchBudget()); plain && !got {
			t.Errorf("%q against %q: matched as written, not with %q marked", pattern, words, w1)
		}
	})
}

// TestMayCover: a walk may list a name a pattern covers when some path matches both (below
// the pattern too, when it names a dir); wildcard segments meet unless their literal starts
// or ends differ.
func TestMayCover(t *testing.T) {
	for _, tc := range []struct {
		pat   string
		below bool
		walk  string
		want  bool
	}{
		{"/p/secret/**", false, "/p/[s]ecret/*", true},
		{"/p/secret/**", false, "/p/secre?/*", true},
		{"/p/secret/**", false, "/p/*/key.txt", true},
		{"/p/secret/**", false, "/p/**/*.go", true},
		{"/p/secret/**", false, "/p/src/**/*.ts", false},
		{"/p/secret", true, "/p/*/key.txt", true},
		{"/p/secret", false, "/p/*/key.txt", false},
		{"/p/.env", false, "/p/**/*.go", false},
		{"/p/.env", false, "/p/.e*", true},
		{"/p/.env", false, "/p/*.md", false},
		{"/**/*.pem", false, "/p/**/*.go", false},
		{"/**/*.pem", false, "/p/**/*", true},
		{"/**/*.pem", false, "/p/certs/x*.pem", true},
		{"/**/*.pem", false, "/p/certs/*.key", false},
		{"/h/.ssh/**", false, "/p/**/*", false},
		// Negation as shells write it, and what path.Match cannot read, may match.
		{"/p/secret/**", false, "/p/secre[!x]/*", true},
		{"/p/secret/**", false, "/p/[!x]ecret/*", true},
		{"/p/.env", false, "/p/.en[!x]", true},
		{"/p/.env", false, "/p/.en[!v]", false},
		{"/p/secret/**", false, `/p/secret\/*`, true},
		{"/p/secret/**", false, "/p/secret[/]*", true},
		// Extglobs, which node-glob reads.
		{"/p/secret/**", false, "/p/@(secret)/*", true},
		{"/p/secret/**", false, "/p/*(secret)/*", true},
		{"/p/secret/**", false, "/p/+(secret|x)/**", true},
		{"/p/secret/**", false, "/p/secre?/@(key).txt", true},
	} {
		b := NewMatchBudget()
		got, err := MayCover(tc.pat, tc.below, SplitPath(tc.walk), b)
		if err != nil || got != tc.want {
			t.Errorf("MayCover(%q, %v, %q) = %v, %v; want %v", tc.pat, tc.below, tc.walk, got, err, tc.want)
		}
	}
}
