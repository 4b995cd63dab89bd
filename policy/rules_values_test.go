package policy

import (
	"fmt"
	"testing"

	"github.com/sandboxd/sandboxd/permission"
)

// TestRulesValuesBoundedByBytes: the cache of rule sets' AST values is the daemon's, shared by
// every user; one who makes and ends sessions of a thousand rules in a loop fills it to its
// bytes bound, not to a thousand such sets.
func TestRulesValuesBoundedByBytes(t *testing.T) {
	var c rulesValues
	for i := range 200 {
		var rules []permission.Rule
		for j := range 1000 {
			r, err := permission.ParseRuleFor(fmt.Sprintf("Bash(cmd%d-%d *)", i, j), permission.Deny)
			if err != nil {
				t.Fatal(err)
			}
			r.Source = permission.SourceSession
			rules = append(rules, r)
		}
		rs := permission.NewRuleSet(rules, permission.Effective{}, permission.Anchors{Home: "/h", Cwd: "/h/p"})
		if _, err := c.get(rs); err != nil {
			t.Fatal(err)
		}
		if c.bytes.Load() > rulesValuesMaxBytes {
			t.Fatalf("after %d rule sets the cache holds %d bytes, over %d", i+1, c.bytes.Load(), rulesValuesMaxBytes)
		}
	}
	if n := c.lru.Len(); n >= 200 || n == 0 {
		t.Errorf("%d rule sets cached", n)
	}
}
