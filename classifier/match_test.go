package classifier

import (
	"errors"
	"strings"
	"testing"
)

func TestMatchRule(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pattern string
		cmd     string
		want    bool
	}{
		{"ls *", "ls", true},
		{"ls *", "ls -la", true},
		{"ls *", "lsof", false},
		{"ls*", "ls", true},
		{"ls*", "ls -la", true},
		{"ls*", "lsof", true},
		{"ls:*", "ls", true},
		{"ls:*", "ls -la", true},
		{"ls:*", "lsof", false},
		{"npm run test:*", "npm run test", true},
		{"npm run test:*", "npm run test --watch", true},
		{"npm run test:*", "npm run test:unit", false},
		{"npm run test:*", "npm run testx", false},
		{"git * main", "git push origin main", true},
		{"git * main", "git push origin main2", false},
		{"git:* push", "git push", false},
		{"git:* push", "git:x push", true},
		{"* install", "npm install", true},
		{"* install", "npm install x", false},
		{"git *", "git status", true},
		{"git *", "gitk", false},
		{"npm test", "npm test", true},
		{"npm test", "npm test --x", false},
		{"npm  test ", "npm test", true},
		{"*", "anything at all", true},
		{"", "rm -rf /", true},
		{"echo a b", "echo a b", true},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
		{"**", "x", true},
	} {
		words := strings.Fields(tc.cmd)
		if got := MatchRule(tc.pattern, words); got != tc.want {
			t.Errorf("MatchRule(%q, %q) = %v, want %v", tc.pattern, tc.cmd, got, tc.want)
		}
	}
	if MatchRule("*", nil) {
		t.Error("nil words (non-static command) must match no rule")
	}
}

// TestMatchRuleAligned: an allow rule's blanks fall between words, so a word quoted whole is
// not read as the several words its blanks would join it into; a `*` still spans them.
func TestMatchRuleAligned(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pattern string
		words   []string
		want    bool
	}{
		{"my tool sub x", []string{"my tool", "sub", "x"}, false},
		{"my tool sub x", []string{"my", "tool", "sub", "x"}, true},
		{"npm run test:*", []string{"npm", "run test"}, false},
		{"npm run test:*", []string{"npm run", "test", "--watch"}, false},
		{"npm run test:*", []string{"npm", "run", "test", "a b"}, true},
		{"echo a b", []string{"echo", "a b"}, false},
		{"echo *", []string{"echo", "a b"}, true},
		{"git commit -m *", []string{"git", "commit", "-m", "fix the bug"}, true},
		{"git * main", []string{"git", "push origin", "main"}, true},
		{"ls *", []string{"ls"}, true},
		{"ls *", []string{"ls x"}, false},
		{"a b", []string{"a\x1fb"}, false},
		{"*", []string{"a\x1fb"}, false},
	} {
		if got := MatchRuleAligned(tc.pattern, tc.words); got != tc.want {
			t.Errorf("MatchRuleAligned(%q, %q) = %v, want %v", tc.pattern, tc.words, got, tc.want)
		}
		if !MatchRule(tc.pattern, tc.words) && tc.want {
			t.Errorf("MatchRuleAligned(%q, %q) holds where MatchRule does not", tc.pattern, tc.words)
		}
	}
	// On words without blanks the two agree.
	for _, p := range []string{"ls *", "ls*", "ls:*", "git * main", "* install", "npm test", "", "*", "a*b*c"} {
		for _, cmd := range []string{"ls", "ls -la", "lsof", "git push origin main", "npm install", "npm test", "axxbyyc"} {
			w := strings.Fields(cmd)
			if MatchRule(p, w) != MatchRuleAligned(p, w) {
				t.Errorf("%q against %q: MatchRule %v, MatchRuleAligned %v", p, cmd, MatchRule(p, w), MatchRuleAligned(p, w))
			}
		}
	}
	if MatchRuleAligned("*", nil) {
		t.Error("nil words (non-static command) must match no rule")
	}
}

// TestMatchRuleWithClassify shows the intended use: allow rules see Prefix,
// deny rules see DenyPrefix.
func TestMatchRuleWithClassify(t *testing.T) {
	t.Parallel()
	c := Classify("timeout 5 npm run test:unit && X=1 rm -rf t && $CMD", testOpts)
	var subs []Subcommand // the line's own commands; npm's tails are nested after it
	for _, s := range c.Subcommands {
		if !s.Nested {
			subs = append(subs, s)
		}
	}
	if !MatchRule("npm run test:*", subs[0].Prefix) && !MatchRule("npm run *", subs[0].Prefix) {
		t.Error("wrapper not stripped for allow")
	}
	if MatchRule("rm *", subs[1].Prefix) {
		t.Error("unsafe env assignment stripped for allow")
	}
	if !MatchRule("rm *", subs[1].DenyPrefix) {
		t.Error("env assignment not stripped for deny")
	}
	if MatchRule("*", subs[2].Prefix) {
		t.Error("dynamic command matched an allow rule")
	}
}

func TestMatchRuleNoBlowup(t *testing.T) {
	t.Parallel()
	p := strings.Repeat("a*", 2000) + "b"
	words := []string{strings.Repeat("a", 20000)}
	if MatchRule(p, words) {
		t.Fatal("matched")
	}
}

func TestValidateRulePattern(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pattern string
		want    error
	}{
		{"git *", nil},
		{"npm run test:*", nil},
		{"", nil},
		{"ls\nrm", ErrPatternControlChar},
		{"ls\rrm", ErrPatternControlChar},
		{"ls\u202e", ErrPatternControlChar},
		{"ls \xff", ErrPatternInvalidUTF8},
		{strings.Repeat("a", MaxRulePatternLen+1), ErrPatternTooLong},
	} {
		err := ValidateRulePattern(tc.pattern)
		if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("ValidateRulePattern(%q) = %v, want %v", tc.pattern, err, tc.want)
		}
	}
}

// globMatch finds the pieces between stars left to right; it must agree with the plain
// recursive definition of * on every small pattern and text.
func TestGlobMatchAgainstDefinition(t *testing.T) {
	t.Parallel()
	var def func(p, s string) bool
	def = func(p, s string) bool {
		switch {
		case p == "":
			return s == ""
		case p[0] == '*':
			return def(p[1:], s) || s != "" && def(p, s[1:])
		default:
			return s != "" && p[0] == s[0] && def(p[1:], s[1:])
		}
	}
	all := func(alphabet string, max int) []string {
		out := []string{""}
		for prev := []string{""}; max > 0; max-- {
			var next []string
			for _, x := range prev {
				for _, c := range alphabet {
					next = append(next, x+string(c))
				}
			}
			out, prev = append(out, next...), next
		}
		return out
	}
	texts := all("ab", 6)
	for _, p := range all("ab*", 5) {
		for _, s := range texts {
			if got, want := globMatch(p, s), def(p, s); got != want {
				t.Fatalf("globMatch(%q, %q) = %v, want %v", p, s, got, want)
			}
		}
	}
	// The shape that made the backtracking match quadratic still answers right.
	long := strings.Repeat("a", 60000)
	if globMatch("*"+strings.Repeat("a", 4000)+"b", long) || !globMatch("*"+strings.Repeat("a", 4000), long) {
		t.Error("a long piece after a star against a long text: wrong answer")
	}
}
