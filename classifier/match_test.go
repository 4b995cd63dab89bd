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

// TestMatchRuleWithClassify shows the intended use: allow rules see Prefix,
// deny rules see DenyPrefix.
func TestMatchRuleWithClassify(t *testing.T) {
	t.Parallel()
	c := Classify("timeout 5 npm run test:unit && X=1 rm -rf t && $CMD", testOpts)
	if !MatchRule("npm run test:*", c.Subcommands[0].Prefix) && !MatchRule("npm run *", c.Subcommands[0].Prefix) {
		t.Error("wrapper not stripped for allow")
	}
	if MatchRule("rm *", c.Subcommands[1].Prefix) {
		t.Error("unsafe env assignment stripped for allow")
	}
	if !MatchRule("rm *", c.Subcommands[1].DenyPrefix) {
		t.Error("env assignment not stripped for deny")
	}
	if MatchRule("*", c.Subcommands[2].Prefix) {
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
