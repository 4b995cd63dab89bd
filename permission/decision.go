package permission

import "fmt"

// Behavior is what a decision says to do with a call.
type Behavior string

// The three behaviors. Anything else is invalid and treated as deny.
const (
	Allow Behavior = "allow"
	Deny  Behavior = "deny"
	Ask   Behavior = "ask"
)

// Mode is a session's permission mode.
type Mode string

// The seven modes of DESIGN.md.
const (
	ModeDefault           Mode = "default"
	ModeAcceptEdits       Mode = "acceptEdits"
	ModePlan              Mode = "plan"
	ModeDontAsk           Mode = "dontAsk"
	ModeBypassPermissions Mode = "bypassPermissions"
	ModeAuto              Mode = "auto"
	ModeBubble            Mode = "bubble"
)

// Modes lists every valid mode in documentation order.
var Modes = []Mode{ModeDefault, ModeAcceptEdits, ModePlan, ModeDontAsk, ModeBypassPermissions, ModeAuto, ModeBubble}

// ParseMode accepts a mode name (and the `manual` alias of default); anything else is an error.
func ParseMode(s string) (Mode, error) {
	if s == "manual" {
		return ModeDefault, nil
	}
	for _, m := range Modes {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("unknown permission mode %q (want one of default, acceptEdits, plan, dontAsk, bypassPermissions, auto, bubble)", s)
}

// Decision is the outcome of the permission step for one call. It always carries why.
type Decision struct {
	Behavior Behavior `json:"behavior"`
	Reason   string   `json:"reason"`
	// Rule is the rule text that decided, e.g. "Bash(npm run test:*)"; empty when a mode or check decided.
	Rule string `json:"rule,omitempty"`
	// Source is where the rule or check came from: a settings source name, "mode", "safety", "hook", "classifier".
	Source string `json:"source,omitempty"`
	// Step is the decision-chain step that decided (hook, deny_rule, ask_rule, allow_rule, safety, mode, resolve).
	Step string `json:"step,omitempty"`
	// Route says where an ask goes: "user" (approval queue), "parent" (bubble), "classifier" (auto).
	Route string `json:"route,omitempty"`
	// ReadOnly marks an allow granted because the call only reads: it runs with every mount
	// read-only but its private /tmp, so whatever the classifier missed cannot write.
	ReadOnly bool `json:"read_only,omitempty"`
	// Trace lists the chain steps evaluated, for --explain.
	Trace []string `json:"trace,omitempty"`
	// Auto lists what each stage of auto mode said about an ask routed to the classifier.
	Auto []AutoStage `json:"auto,omitempty"`
	// ApprovalID names the pending approval an unanswered ask created (or answered one).
	ApprovalID string `json:"approval_id,omitempty"`
	// Basis is what the policy decided from, set by the daemon's decider for the audit log,
	// so a replay can decide the call again under another policy.
	Basis *Basis `json:"-"`
}

// Basis is everything a policy decision was made from: the call's facts, the session's rules
// and the digest of the policy that evaluated them.
type Basis struct {
	Facts        *Facts
	Rules        *RuleSet
	PolicyDigest string
}

// AutoStage is one auto-mode stage's verdict: stage 1 is the daemon's deterministic risk
// rules, stage 2 the external classifier.
type AutoStage struct {
	Stage   int    `json:"stage"`
	Verdict string `json:"verdict"` // allow, deny, ask, ambiguous (stage 1), error (stage 2)
	Reason  string `json:"reason"`
}

// Denied reports whether the decision lets the call run: only an explicit allow does.
func (d Decision) Denied() bool { return d.Behavior != Allow }

// Rank orders modes by how much runs unasked: plan < default = dontAsk < acceptEdits < auto <
// bypassPermissions. dontAsk allows no more than default (it only never asks). bubble has no
// rank of its own: it counts as its parent's (ok is false for it and for unknown modes).
func Rank(m Mode) (rank int, ok bool) {
	switch m {
	case ModePlan:
		return 0, true
	case ModeDefault, ModeDontAsk:
		return 1, true
	case ModeAcceptEdits:
		return 2, true
	case ModeAuto:
		return 3, true
	case ModeBypassPermissions:
		return 4, true
	}
	return 0, false
}
