package permission

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
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

// globRegexp is MatchGlob's definition: a regexp where `*` is any text and the rest is
// literal, matched against the whole text.
func globRegexp(pattern string) *regexp.Regexp {
	parts := strings.Split(pattern, "*")
	for i := range parts {
		parts[i] = regexp.QuoteMeta(parts[i])
	}
	return regexp.MustCompile("^(?s:" + strings.Join(parts, ".*") + ")$")
}

// TestMatchGlobAgainstDefinition: MatchGlob, which takes each literal at its first place
// left, agrees with the regexp it replaces on every pattern and text of a small alphabet, and
// on text that is not UTF-8 (each such byte a U+FFFD, as a regexp reads it).
func TestMatchGlobAgainstDefinition(t *testing.T) {
	t.Parallel()
	// words are the strings of up to n letters of alphabet.
	words := func(alphabet string, n int) []string {
		out, prev := []string{""}, []string{""}
		for ; n > 0; n-- {
			var next []string
			for _, s := range prev {
				for _, c := range alphabet {
					next = append(next, s+string(c))
				}
			}
			out, prev = append(out, next...), next
		}
		return out
	}
	texts := append(words("ab\n", 5), "a\xffb", "\xff", "a\xff\xfeb", "\xe4\xb8", "\xe4\xb8\x80", "ab\uFFFDab")
	patterns := append(words("ab*", 6), "*\uFFFD*", "a*\uFFFD*b", "*\xff*", "*\u4e00*", "\xe4*a")
	for _, p := range patterns {
		if !strings.Contains(p, "*") {
			continue // compared with ==, no matcher
		}
		var re *regexp.Regexp
		if utf8.ValidString(p) {
			re = globRegexp(p)
		}
		for _, s := range texts {
			want := re != nil && re.MatchString(s)
			if got := MatchGlob(p, s); got != want {
				t.Errorf("MatchGlob(%q, %q) = %v, want %v", p, s, got, want)
			}
		}
	}
}

// TestMatchGlobKeepsNothing: a glob is matched as it is read, with nothing compiled or kept.
// A regexp of each pattern, kept in a memo of 20 000 entries, held 500 KB for a 4 KB rule of
// 2 040 `*`, so a user cycling sessions of such rules grew the daemon to gigabytes.
func TestMatchGlobKeepsNothing(t *testing.T) {
	patterns := make([]string, 64)
	for i := range patterns {
		patterns[i] = fmt.Sprintf("%d%s", i, strings.Repeat("*a", 2040))
	}
	text := "0" + strings.Repeat("a", 1<<16)
	i := 0
	allocs := testing.AllocsPerRun(len(patterns)-1, func() {
		if MatchGlob(patterns[i], text) != (i == 0) {
			t.Fatalf("MatchGlob(pattern %d) = %v", i, i != 0)
		}
		i++
	})
	if allocs != 0 {
		t.Errorf("MatchGlob allocated %.0f times a call, want none", allocs)
	}
}

// TestMemoBoundedInBytes: a memo of compiled patterns holds no more than memoMaxBytes by its
// estimate of what its entries hold, whatever their size: the patterns are users' own, and
// live on after their sessions.
func TestMemoBoundedInBytes(t *testing.T) {
	t.Parallel()
	// The largest a rule makes: a pattern of maxRuleLen bytes, one segment in two, anchored
	// under a directory as long.
	big := func(i int) string {
		return fmt.Sprintf("%s/%d%s", strings.Repeat("/d", maxRuleLen/2), i, strings.Repeat("/a", maxRuleLen/2))
	}
	var m memo[[]string]
	m.size = segsSize
	// Each holds more than 64 KB by the estimate (16 bytes for each of its segments), so
	// these are more than the bound.
	n := 0
	for ; n < memoMaxBytes/(64<<10)+64; n++ {
		k := big(n)
		m.get(k, splitPath)
		m.get(k, splitPath) // held once, counted once
	}
	entries, bytes := m.held()
	if bytes > memoMaxBytes || entries == 0 || entries >= n {
		t.Errorf("after %d large patterns the memo holds %d entries of %d bytes, want some, fewer than all, within %d", n, entries, bytes, memoMaxBytes)
	}
	sum := 0
	for _, k := range m.lru.Keys() {
		e, _ := m.lru.Peek(k)
		sum += e.size
		if want := len(k) + segsSize(e.v) + memoEntryOverhead; e.size != want {
			t.Errorf("entry of %d bytes counted as %d, want %d", len(k), e.size, want)
		}
	}
	if sum != bytes {
		t.Errorf("entries sum to %d bytes, memo counts %d", sum, bytes)
	}

	// The path matchers' memo, through MatchPath.
	for i := range n {
		p := big(i)
		if !MatchPath(p, p+"/x") {
			t.Fatalf("MatchPath of pattern %d does not match its own path", i)
		}
	}
	if _, bytes := pathCache.held(); bytes > memoMaxBytes {
		t.Errorf("pathCache holds %d bytes, over %d", bytes, memoMaxBytes)
	}
}
