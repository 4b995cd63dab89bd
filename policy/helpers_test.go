package policy

import (
	"context"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/sandboxd/sandboxd/classifier"
	"github.com/sandboxd/sandboxd/permission"
)

func newEngine(t testing.TB, cfg Config) *Engine {
	t.Helper()
	e, err := New(context.Background(), cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatalf("new engine: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// sub builds a classified simple command by hand: words are its argv (and both prefixes).
func sub(ro bool, words ...string) classifier.Subcommand {
	text := ""
	for i, w := range words {
		if i > 0 {
			text += " "
		}
		text += w
	}
	return classifier.Subcommand{Text: text, Argv: words, ReadOnly: ro, Prefix: words, DenyPrefix: words}
}

func bash(subs ...classifier.Subcommand) *classifier.Classification {
	ro := true
	for _, s := range subs {
		ro = ro && s.ReadOnly
	}
	return &classifier.Classification{ReadOnly: ro, Subcommands: subs}
}

func parseErr() *classifier.Classification {
	msg := "1:5: reached EOF without closing quote"
	return &classifier.Classification{ParseError: &msg, Reason: "parse_error"}
}

func ruleSet(t testing.TB, src permission.Source, allow, deny, ask []string) *permission.RuleSet {
	t.Helper()
	var rules []permission.Rule
	for _, x := range []struct {
		b    permission.Behavior
		list []string
	}{{permission.Deny, deny}, {permission.Ask, ask}, {permission.Allow, allow}} {
		for _, s := range x.list {
			r, err := permission.ParseRuleFor(s, x.b)
			if err != nil {
				t.Fatalf("rule %q: %v", s, err)
			}
			r.Source, r.Root, r.Origin = src, "/w", "test"
			rules = append(rules, r)
		}
	}
	return permission.NewRuleSet(rules, permission.Effective{DefaultMode: permission.ModeDefault}, permission.Anchors{Home: "/home/u", Cwd: "/w"})
}
