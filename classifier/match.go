package classifier

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxRulePatternLen bounds a Bash rule pattern.
const MaxRulePatternLen = 4096

// MatchRule reports whether a Bash rule's content (the text inside
// Bash(...)) matches one simple command given as words: pass
// Subcommand.Prefix for allow rules (a nil Prefix matches nothing) and
// Subcommand.DenyPrefix for deny and ask rules. A compound command is
// allowed only if every subcommand matches; it is denied if any does.
//
// Semantics (COMPAT §1): the words are joined with single spaces (quotes
// already removed, so a deny of Bash(echo a b) matches `echo "a b"`; an allow
// does not, see MatchRuleAligned); runs of blanks in
// the pattern count as one space. An empty pattern or "*" matches every
// command. `*` matches any text, spaces included, anywhere in the pattern.
// A trailing " *" also matches nothing at all, so `ls *` matches `ls` and
// `ls -la` but not `lsof`, while `ls*` matches all three. A legacy `:*` at
// the very end means " *" (`npm run test:*` = `npm run test *`); a colon
// anywhere else is literal. A pattern without `*` must equal the text.
func MatchRule(pattern string, words []string) bool {
	if words == nil {
		return false
	}
	return matchJoined(normalizePattern(pattern), strings.Join(words, " "))
}

// MatchRuleAligned is MatchRule for an allow rule: a blank of the pattern outside a `*` falls
// only between two words, never inside one. Joined with spaces, the program "my tool" of
// `'my tool' sub x` reads as `my tool sub x`, which an allow of `Bash(my tool sub x)` would let
// run; a deny or ask rule still matches the joined text, so it catches more. A word holding the
// separator used here (a control character no pattern holds) matches nothing.
func MatchRuleAligned(pattern string, words []string) bool {
	if words == nil {
		return false
	}
	for _, w := range words {
		if strings.Contains(w, wordSeparator) {
			return false
		}
	}
	p := strings.ReplaceAll(normalizePattern(pattern), " ", wordSeparator)
	return matchJoined(p, strings.Join(words, wordSeparator))
}

// wordSeparator joins words for MatchRuleAligned: a control character, which
// ValidateRulePattern keeps out of every pattern.
const wordSeparator = "\x1f"

// matchJoined is MatchRule's match of a normalized pattern p against the words joined as text,
// where the last character of a trailing "<blank>*" is the blank the words were joined with.
func matchJoined(p, text string) bool {
	if p == "" || p == "*" {
		return true
	}
	if !strings.Contains(p, "*") {
		return p == text
	}
	if base, ok := strings.CutSuffix(p, "*"); ok && base != "" && (strings.HasSuffix(base, " ") || strings.HasSuffix(base, wordSeparator)) {
		if globMatch(base[:len(base)-1], text) {
			return true
		}
	}
	return globMatch(p, text)
}

// normalizePattern trims, collapses blanks and rewrites a trailing :*.
func normalizePattern(pattern string) string {
	p := strings.Join(strings.Fields(pattern), " ")
	if base, ok := strings.CutSuffix(p, ":*"); ok {
		p = base + " *"
	}
	return p
}

// globMatch matches text against p where only * is special. The pieces between the stars
// are found left to right, each at its first place (the earliest leaves the most room for the
// rest, so that is never wrong), with strings.Index: linear in practice. The classic two-pointer
// match backtracks on every failure, len(p)*len(text) at worst: one rule of "*aaa…ab" against
// 60 KB of a's took 0.2 s, and a session may hold hundreds of rules.
func globMatch(p, text string) bool {
	first, rest, ok := strings.Cut(p, "*")
	if !ok {
		return p == text
	}
	if !strings.HasPrefix(text, first) {
		return false
	}
	text = text[len(first):]
	for {
		piece, after, more := strings.Cut(rest, "*")
		if !more {
			// The last piece ends the text.
			return strings.HasSuffix(text, piece)
		}
		i := strings.Index(text, piece)
		if i < 0 {
			return false
		}
		text, rest = text[i+len(piece):], after
	}
}

// ValidateRulePattern checks a Bash rule's content before it is stored:
// valid UTF-8, no control characters (a newline would let one rule span
// commands), and a bounded length. Every other string is a valid pattern.
func ValidateRulePattern(pattern string) error {
	if len(pattern) > MaxRulePatternLen {
		return fmt.Errorf("rule pattern of %d bytes: %w", len(pattern), ErrPatternTooLong)
	}
	if !utf8.ValidString(pattern) {
		return fmt.Errorf("rule pattern: %w", ErrPatternInvalidUTF8)
	}
	if r := badChar(strings.ReplaceAll(pattern, "\t", " ")); r != "" || strings.Contains(pattern, "\n") {
		return fmt.Errorf("rule pattern: %w", ErrPatternControlChar)
	}
	return nil
}
