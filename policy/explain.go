package policy

import (
	"bytes"
	"context"
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/topdown"

	"github.com/sandboxd/sandboxd/permission"
)

// Explain decides like Decide (never from the cache) and also returns OPA's evaluation trace
// with file:line locations, for `sbctl decide --explain`. It is slow; never use it on the
// request path. Decision.Trace already lists the chain steps passed.
func (e *Engine) Explain(ctx context.Context, f *permission.Facts, rs *permission.RuleSet) (permission.Decision, string, error) {
	deny := permission.Decision{Behavior: permission.Deny, Reason: "policy evaluation failed", Source: "policy", Step: "error"}
	if f == nil || rs == nil {
		return deny, "", ErrNilFacts
	}
	c := e.cur.Load()
	if c == nil {
		return deny, "", ErrPolicyNotLoaded
	}
	rv, err := e.rules.get(rs)
	if err != nil {
		return deny, "", fmt.Errorf("convert rules: %w", err)
	}
	in, err := buildInput(f, rv, rs.Effective().AdditionalDirectories...)
	if err != nil {
		return deny, "", fmt.Errorf("build input: %w", err)
	}
	buf := topdown.NewBufferTracer()
	res, err := c.pq.Eval(ctx, rego.EvalParsedInput(in), rego.EvalGenerateJSON(rawTerm), rego.EvalQueryTracer(buf))
	if err != nil {
		return deny, "", fmt.Errorf("evaluate policy: %w", err)
	}
	var out bytes.Buffer
	topdown.PrettyTraceWithLocation(&out, *buf)
	if len(res) == 0 || len(res[0].Expressions) == 0 {
		return deny, out.String(), ErrUndefinedDecision
	}
	t, _ := res[0].Expressions[0].Value.(*ast.Term)
	if t == nil {
		return deny, out.String(), ErrBadDecision
	}
	d, err := toDecision(t, c.steps)
	if err != nil {
		return deny, out.String(), err
	}
	return d, out.String(), nil
}
