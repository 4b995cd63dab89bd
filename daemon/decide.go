package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/sandboxd/sandboxd/executor"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/policy"
)

// policyDecider gathers a call's facts for the policy engine. Go reports; the Rego decides.
type policyDecider struct {
	engine *policy.Engine
	// deniedDomain names the network.denied_domains entry host matches, "" for none.
	deniedDomain func(host string) string
}

var errNoRules = errors.New("the session's rules are not loaded")

// Decide implements executor.Decider.
func (p policyDecider) Decide(ctx context.Context, in *executor.DecisionInput) (permission.Decision, error) {
	c := in.Call
	if reason := c.Session.Suspended(); reason != "" {
		return permission.Decision{Behavior: permission.Deny, Source: "policySettings", Step: "suspended", Reason: reason}, nil
	}
	rs := c.Session.RuleSet()
	if rs == nil {
		return permission.Decision{}, errNoRules
	}
	if _, err := rs.Effective().ResolveMode(c.Mode); err != nil {
		return permission.Decision{Behavior: permission.Deny, Source: "policySettings", Step: "mode",
			Reason: fmt.Sprintf("mode %s is disabled by admin policy: %v", c.Mode, err)}, nil
	}
	tf := in.ToolFacts
	if tf.Domain != "" && p.deniedDomain != nil {
		// The admin's list binds every decision that names a host, not only the proxy's: a
		// WebFetch the hook allows is fetched by the agent itself, past any proxy.
		if pat := p.deniedDomain(tf.Domain); pat != "" {
			return permission.Decision{Behavior: permission.Deny, Source: "config", Step: "denied_domains",
				Rule:   "network.denied_domains: " + pat,
				Reason: fmt.Sprintf("%s is in network.denied_domains (%s); denied in every mode", tf.Domain, pat)}, nil
		}
	}
	snap := c.Session.Snapshot()
	if tf.Bash == nil && c.Tool.Name() == "Bash" {
		tf.Bash = c.Classification()
	}
	dirs := append([]string{snap.Root}, snap.AdditionalDirs...)
	// And where each leads: a session given as ~/link holds ~/real, where the paths it names
	// resolve (the call checked they still lead there, DirsMoved).
	for _, to := range c.Session.LeadsTo() {
		if !slices.Contains(dirs, to) {
			dirs = append(dirs, to)
		}
	}
	facts := &permission.Facts{
		Tool: c.Tool.Name(), Input: c.Input, Mode: c.Mode,
		Caller:     permission.Caller{UID: snap.Owner.UID, GID: snap.Owner.GID, User: snap.Owner.User},
		Cwd:        snap.Cwd,
		Dirs:       dirs,
		Home:       snap.Owner.Home,
		ReadOnly:   in.ReadOnly,
		ToolFacts:  tf,
		Unconfined: in.Unconfined,
	}
	if h := in.Hook; h != nil && h.Decision != "" {
		facts.Hook = &permission.HookVerdict{Decision: h.Decision, Reason: h.Reason}
	}
	digest := p.engine.Digest()
	d, err := p.engine.Decide(ctx, facts, rs)
	if err == nil {
		d.Basis = &permission.Basis{Facts: facts, Rules: rs, PolicyDigest: digest}
	}
	return d, err
}
