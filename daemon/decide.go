package daemon

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/sandboxd/sandboxd/classifier"
	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/egress"
	"github.com/sandboxd/sandboxd/executor"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/policy"
)

// policyDecider gathers a call's facts for the policy engine. Go reports; the Rego decides.
type policyDecider struct {
	engine *policy.Engine
	// deniedDomain and allowedDomain name the network.denied_domains and
	// network.allowed_domains entries host matches, "" for none.
	deniedDomain, allowedDomain func(host string) string
	// cacheDirs are sandbox.cache_dirs for the owner whose home is home.
	cacheDirs func(home string) []string
	// domainsDenied reports whether network.denied_domains holds any entry.
	domainsDenied func() bool
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
	if tf.Domain != "" && p.allowedDomain != nil {
		tf.AllowedDomain = p.allowedDomain(tf.Domain)
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
	if in.Unconfined && p.cacheDirs != nil {
		facts.CacheDirs = p.cacheDirs(snap.Owner.Home)
	}
	if h := in.Hook; h != nil && h.Decision != "" {
		facts.Hook = &permission.HookVerdict{Decision: h.Decision, Reason: h.Reason}
	}
	digest := p.engine.Digest()
	var hostAsk, unallowed *permission.Decision
	if tf.Bash != nil && (in.Unconfined || c.Session.Network == config.NetworkHost) {
		// No proxy stands between this command and the network: the hosts its line names
		// meet the WebFetch rules here, or nowhere.
		hd, un, err := p.namedHosts(ctx, tf.Bash, facts, rs)
		if err != nil || hd.Behavior == permission.Deny {
			return hd, err
		}
		if hd.Behavior == permission.Ask {
			hostAsk = &hd
		}
		unallowed = un
	}
	d, err := p.engine.Decide(ctx, facts, rs)
	if err == nil && hostAsk != nil && d.Behavior == permission.Allow {
		d = *hostAsk
	}
	if err == nil && in.Unconfined && unallowed != nil && d.Behavior == permission.Allow && !d.ReadOnly {
		// A command the agent runs itself that may connect (not read-only), allowed by the
		// mode or a Bash rule: confined, the proxy would refuse a host no WebFetch rule or
		// allowed_domains admits, whatever the mode, so the decision does, as it does the
		// host's WebFetch. (A session given the host's network was given it by the admin.)
		d = *unallowed
	}
	if err == nil {
		d.Basis = &permission.Basis{Facts: facts, Rules: rs, PolicyDigest: digest}
	}
	return d, err
}

// decideHost is how a WebFetch of host would be decided in call's session and mode.
func (p policyDecider) decideHost(ctx context.Context, call *permission.Facts, rs *permission.RuleSet, host string) (permission.Decision, error) {
	wf := *call
	tf := permission.ToolFacts{Domain: host}
	if p.allowedDomain != nil {
		tf.AllowedDomain = p.allowedDomain(host)
	}
	wf.Tool, wf.Input, wf.ToolFacts, wf.Unconfined = "WebFetch", map[string]any{"url": "https://" + host + "/"}, tf, true
	wf.Hook, wf.HTTP = nil, nil // the agent's verdict was on the Bash call; the request is unseen
	return p.engine.Decide(ctx, &wf, rs)
}

// unmatchableHost stands for a host no rule can be matched against, in decideHost: a name no
// domain rule, allowed_domains entry or IP rule names (.invalid is reserved: RFC 6761).
const unmatchableHost = "unmatchable.invalid"

// maxNamedHosts bounds the hosts of one Bash line decided as WebFetch calls: each is a
// policy evaluation, and a user's command must not keep the root daemon evaluating for long.
const maxNamedHosts = 64

// hostRuleSteps are the steps of a WebFetch decision where a rule or custom Rego held the
// host back, as opposed to the mode's lack of an allow.
var hostRuleSteps = map[string]bool{"deny_rule": true, "custom_deny": true, "ask_rule": true, "custom_ask": true}

// namedHosts decides the hosts a Bash line names (classifier.NamedHosts) as a WebFetch of
// each would be decided in the call's mode: a deny or ask of a rule, custom Rego or
// network.denied_domains comes back as the call's (Behavior "" when none). A host the rules
// cannot be matched against (`http://$H/`, `http://0x7f.1/`) is refused wherever some rule
// or denied_domains decides hosts.
//
// unallowed is the WebFetch decision (an ask, or the mode's deny) of the first host nothing
// allows, nil when every host is allowed.
func (p policyDecider) namedHosts(ctx context.Context, bash *classifier.Classification, call *permission.Facts, rs *permission.RuleSet) (ask permission.Decision, unallowed *permission.Decision, err error) {
	// Each host once; written strictly somewhere (a URL's), it is strict.
	loose := map[string]bool{}
	var hosts []string
	for _, h := range classifier.NamedHosts(bash) {
		l, seen := loose[h.Host]
		if !seen {
			hosts = append(hosts, h.Host)
		}
		loose[h.Host] = h.Loose && (!seen || l)
	}
	if len(hosts) > maxNamedHosts {
		if rs.DecidesHosts() || p.domainsDenied() {
			return permission.Decision{Behavior: permission.Deny, Source: "policySettings", Step: "named_host",
				Reason: fmt.Sprintf("the command names %d hosts, more than the %d one decision checks against the WebFetch rules, and it would connect past sandboxd's proxy; split it", len(hosts), maxNamedHosts)}, nil, nil
		}
		return ask, nil, nil
	}
	for _, raw := range hosts {
		host, err := egress.PolicyHost(raw)
		if err != nil && loose[raw] {
			continue // a word of a network program that is no name (out.txt is one; 1.2 is not)
		}
		if err != nil {
			if rs.DecidesHosts() || p.domainsDenied() {
				return permission.Decision{Behavior: permission.Deny, Source: "policySettings", Step: "named_host",
					Reason: fmt.Sprintf("the command names the host %q, which the WebFetch rules cannot be matched against (%v), and it would connect past sandboxd's proxy; spell the host plainly", raw, err)}, nil, nil
			}
			// No rule can allow it either (http://2852039166/ is 169.254.169.254 to curl):
			// for the caller's check it is a host nothing allows, decided as a WebFetch of a
			// host no rule names would be in the call's mode.
			if unallowed == nil {
				d, derr := p.decideHost(ctx, call, rs, unmatchableHost)
				if derr != nil {
					return permission.Decision{}, nil, derr
				}
				if d.Behavior != permission.Allow {
					d.Reason = fmt.Sprintf("the command connects to %q outside sandboxd's proxy, a host no WebFetch rule can be matched against (%v); spell it plainly, or run the command confined: %s", raw, err, d.Reason)
					unallowed = &d
				}
			}
			continue
		}
		if pat := p.deniedDomain(host); pat != "" {
			return permission.Decision{Behavior: permission.Deny, Source: "config", Step: "denied_domains",
				Rule:   "network.denied_domains: " + pat,
				Reason: fmt.Sprintf("the command reaches %s, which is in network.denied_domains (%s); denied in every mode", host, pat)}, nil, nil
		}
		d, err := p.decideHost(ctx, call, rs, host)
		if err != nil {
			return permission.Decision{}, nil, err
		}
		if d.Behavior == permission.Allow {
			continue
		}
		d.Reason = fmt.Sprintf("the command connects to %s outside sandboxd's proxy, where only this decision holds it: %s", host, d.Reason)
		if !hostRuleSteps[d.Step] {
			// No rule said anything of this host: the command's own decision stands, unless
			// it allows what may connect (the caller's check) to a host the line surely
			// names (a URL's, not any word of curl's or ssh's: out.txt, uname).
			if unallowed == nil && !loose[raw] {
				unallowed = &d
			}
			continue
		}
		if d.Behavior == permission.Deny {
			return d, nil, nil
		}
		if ask.Behavior == "" {
			ask = d
		}
	}
	return ask, unallowed, nil
}
