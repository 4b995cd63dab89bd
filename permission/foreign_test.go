package permission

import (
	"strings"
	"testing"
)

func foreignRuleSet(t *testing.T, texts map[string]Behavior) *RuleSet {
	t.Helper()
	var rules []Rule
	for text, b := range texts {
		r, err := ParseRuleFor(text, b)
		if err != nil {
			t.Fatal(err)
		}
		r.Source = SourceSession
		rules = append(rules, r)
	}
	return NewRuleSet(rules, Effective{}, Anchors{Cwd: "/w", Home: "/h"})
}

// TestForeignHitNotebookPath: a NotebookEdit's notebook_path is held against the path rules,
// a rule naming a directory covering what it holds; a path no rule can be checked against,
// or one whose matching would overrun the call's MatchBudget, is held by the rule (a deny
// denies, an ask asks), never let through.
func TestForeignHitNotebookPath(t *testing.T) {
	t.Parallel()
	deep := "/w/" + strings.Repeat("d/", 2000) + "x.ipynb"
	// One ** and a thousand segments, against a path of 1 100: more pairs than a decision's
	// budget, so the match is not tried.
	costly := "Read(//**/" + strings.Repeat("a/", 1000) + "a)"
	costlyPath := "/" + strings.Repeat("b/", 1100) + "x.ipynb"
	cases := []struct {
		name  string
		rules map[string]Behavior
		path  any
		want  string // the rule that holds, "" for none
	}{
		{"in a denied dir", map[string]Behavior{"Read(./secret)": Deny}, "/w/secret/sub/n.ipynb", "Read(./secret)"},
		{"the denied file", map[string]Behavior{"Edit(./n.ipynb)": Ask}, "/w/n.ipynb", "Edit(./n.ipynb)"},
		{"elsewhere", map[string]Behavior{"Read(./secret)": Deny}, "/w/secrets/n.ipynb", ""},
		{"not clean", map[string]Behavior{"Read(./secret)": Deny}, "/w/x/../secret//n.ipynb", "Read(./secret)"},
		{"relative", map[string]Behavior{"Read(./secret)": Deny}, "n.ipynb", "Read(./secret)"},
		{"absent", map[string]Behavior{"Read(./secret)": Deny}, nil, "Read(./secret)"},
		{"deep, elsewhere", map[string]Behavior{"Read(./secret)": Deny, "Read(.env)": Deny}, deep, ""},
		{"deep, anywhere", map[string]Behavior{"Read(d)": Deny}, deep, "Read(d)"},
		{"over budget deny", map[string]Behavior{costly: Deny}, costlyPath, costly},
		{"over budget ask", map[string]Behavior{costly: Ask}, costlyPath, costly},
		{"not a path rule's tool", map[string]Behavior{"Glob(./secret)": Deny}, "/w/secret/n.ipynb", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rs := foreignRuleSet(t, tc.rules)
			in := map[string]any{}
			if tc.path != nil {
				in["notebook_path"] = tc.path
			}
			r, ok := rs.ForeignHit("NotebookEdit", in)
			if got := r.String(); ok != (tc.want != "") || ok && got != tc.want {
				t.Errorf("ForeignHit = %.60q, %v; want %.60q", got, ok, tc.want)
			}
			if ok && r.Behavior != tc.rules[tc.want] {
				t.Errorf("held as %s, want %s", r.Behavior, tc.rules[tc.want])
			}
		})
	}
}

// TestForeignHitSplitsOnce: the path is cleaned and split once for the call, not again for
// each of its ancestors and each rule: that was quadratic in its depth, and a notebook_path of
// 64 000 segments took 52 s of the daemon's CPU.
func TestForeignHitSplitsOnce(t *testing.T) {
	rs := foreignRuleSet(t, map[string]Behavior{"Read(./secret)": Deny, "Edit(./docs/**)": Ask})
	in := map[string]any{"notebook_path": "/w/" + strings.Repeat("d/", 2000) + "x.ipynb"}
	allocs := testing.AllocsPerRun(5, func() {
		if r, ok := rs.ForeignHit("NotebookEdit", in); ok {
			t.Fatalf("ForeignHit = %s, want none", r)
		}
	})
	// A few for the split, the budget and each rule's anchored patterns; not one per segment.
	if allocs > 50 {
		t.Errorf("ForeignHit made %.0f allocations for a path of 2 000 segments, want at most 50", allocs)
	}
}
