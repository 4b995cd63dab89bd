package policy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/permission"
)

// TestPathMatchBudget: a user's own rules of thousands of segments with **, against a path
// thousands of segments deep, cost a decision one refusal, not seconds of the daemon's CPU:
// the decision denies with ErrMatchBudget, on the deny side and on the allow side. A session's
// worth of ordinary rules against an ordinary deep path stays well within the budget.
func TestPathMatchBudget(t *testing.T) {
	t.Parallel()
	e := newEngine(t, Config{})
	deep := "/home/u/" + strings.Repeat("b/", 2000) + "x"
	var hostile []string
	for i := range 20 {
		hostile = append(hostile, fmt.Sprintf("Read(//**/%sc%d/**)", strings.Repeat("b/", 1000), i))
	}
	read := call{tool: "Read", ro: true, paths: []permission.PathFact{rd(deep)}}
	for _, tc := range []struct {
		name        string
		allow, deny []string
	}{{"deny rules", nil, hostile}, {"allow rules", hostile, nil}} {
		d, err := e.Decide(context.Background(), read.facts(), ruleSet(t, permission.SourceSession, tc.allow, tc.deny, nil))
		if !errors.Is(err, permission.ErrMatchBudget) || d.Behavior != permission.Deny {
			t.Errorf("%s of 1 000 segments against a path of 2 000: %v, %v; want a deny with ErrMatchBudget", tc.name, d.Behavior, err)
		}
	}
	var ordinary []string
	for i := range 1000 {
		ordinary = append(ordinary, fmt.Sprintf("Read(//**/secret%d/**/*.key)", i))
	}
	p := "/home/u/" + strings.Repeat("d/", 60) + "f.go"
	d, err := e.Decide(context.Background(), call{tool: "Read", ro: true, paths: []permission.PathFact{rd(p)}}.facts(), ruleSet(t, permission.SourceSession, nil, ordinary, nil))
	if err != nil || d.Behavior == permission.Deny {
		t.Errorf("1 000 ordinary deny rules against a path of 61 segments: %v, %v", d.Behavior, err)
	}
}
