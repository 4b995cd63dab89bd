package permission

import "testing"

// TestNarrows: a rule set built again for a session narrows it when it gains a deny or ask
// rule, loses an allow, forbids a mode it allowed or drops a settings directory; gaining an
// allow, or the same rules in another order, does not.
func TestNarrows(t *testing.T) {
	rule := func(s string, b Behavior) Rule {
		r, err := ParseRuleFor(s, b)
		if err != nil {
			t.Fatal(err)
		}
		r.Source = SourceSession
		return r
	}
	base := []Rule{rule("Bash(make:*)", Allow), rule("Read(./.env)", Deny), rule("Bash(git push:*)", Ask)}
	set := func(rs []Rule, eff Effective) *RuleSet { return NewRuleSet(rs, eff, Anchors{Cwd: "/p", Home: "/h"}) }
	old := set(base, Effective{AdditionalDirectories: []string{"/x"}})
	for name, tc := range map[string]struct {
		next *RuleSet
		want bool
	}{
		"the same":            {set(base, Effective{AdditionalDirectories: []string{"/x"}}), false},
		"reordered":           {set([]Rule{base[2], base[0], base[1]}, Effective{AdditionalDirectories: []string{"/x"}}), false},
		"an allow gained":     {set(append(base[:3:3], rule("Bash(ls:*)", Allow)), Effective{AdditionalDirectories: []string{"/x"}}), false},
		"a deny gained":       {set(append(base[:3:3], rule("Bash(curl:*)", Deny)), Effective{AdditionalDirectories: []string{"/x"}}), true},
		"an ask gained":       {set(append(base[:3:3], rule("Edit(./src/**)", Ask)), Effective{AdditionalDirectories: []string{"/x"}}), true},
		"an allow lost":       {set(base[1:], Effective{AdditionalDirectories: []string{"/x"}}), true},
		"bypass disabled":     {set(base, Effective{AdditionalDirectories: []string{"/x"}, DisableBypass: true}), true},
		"a directory dropped": {set(base, Effective{}), true},
	} {
		if got := Narrows(old, tc.next); got != tc.want {
			t.Errorf("%s: Narrows = %v, want %v", name, got, tc.want)
		}
	}
}
