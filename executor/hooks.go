package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/permission"
)

// HookVerdict is what PreToolUse hooks said about a call, merged across hooks
// (deny > ask > allow).
type HookVerdict struct {
	Decision     string `json:"decision,omitempty"` // allow, deny, ask or ""
	Reason       string `json:"reason,omitempty"`
	UpdatedInput Input  `json:"-"`
}

// Hooks runs admin-configured command hooks as the session owner inside the sandbox. Where
// the agents' clients fail open (a hook that crashes, times out or prints garbage lets the
// call run), sandboxd fails closed: the call is denied with the reason.
type Hooks struct {
	host *Host
	pre  []compiledMatcher
	post []compiledMatcher
	// perm are PermissionRequest hooks: they may answer a pending approval.
	perm []compiledMatcher
}

type compiledMatcher struct {
	match func(tool string) bool
	hooks []config.Hook
}

// hookOutputLimit bounds what a hook may print.
const hookOutputLimit = 64 << 10

// defaultHookTimeout applies to hooks that set none (COMPAT: 600 s for command hooks).
const defaultHookTimeout = 600 * time.Second

// NewHooks compiles the configured matchers. It returns nil when no hook is configured.
func NewHooks(host *Host, cfg config.Hooks) (*Hooks, error) {
	if len(cfg.PreToolUse) == 0 && len(cfg.PostToolUse) == 0 && len(cfg.PermissionRequest) == 0 {
		return nil, nil
	}
	h := &Hooks{host: host}
	var err error
	if h.pre, err = compileMatchers(cfg.PreToolUse); err != nil {
		return nil, err
	}
	if h.post, err = compileMatchers(cfg.PostToolUse); err != nil {
		return nil, err
	}
	if h.perm, err = compileMatchers(cfg.PermissionRequest); err != nil {
		return nil, err
	}
	return h, nil
}

var namesOnly = regexp.MustCompile(`^[A-Za-z0-9_ ,|-]*$`)

// compileMatchers follows the agents' matcher syntax: empty or * is every tool; only
// [A-Za-z0-9_ ,|-] is a list of names; anything else is an unanchored regular expression.
func compileMatchers(ms []config.HookMatcher) ([]compiledMatcher, error) {
	out := make([]compiledMatcher, 0, len(ms))
	for _, m := range ms {
		cm := compiledMatcher{hooks: m.Hooks}
		switch {
		case m.Matcher == "" || m.Matcher == "*":
			cm.match = func(string) bool { return true }
		case namesOnly.MatchString(m.Matcher):
			names := map[string]bool{}
			for _, n := range strings.FieldsFunc(m.Matcher, func(r rune) bool { return r == '|' || r == ',' || r == ' ' }) {
				names[n] = true
			}
			cm.match = func(t string) bool { return names[t] }
		default:
			re, err := regexp.Compile(m.Matcher)
			if err != nil {
				return nil, fmt.Errorf("hook matcher %q: %w", m.Matcher, err)
			}
			cm.match = re.MatchString
		}
		out = append(out, cm)
	}
	return out, nil
}

type hookOutput struct {
	Continue           *bool  `json:"continue"`
	StopReason         string `json:"stopReason"`
	Decision           string `json:"decision"`
	Reason             string `json:"reason"`
	HookSpecificOutput *struct {
		PermissionDecision       string         `json:"permissionDecision"`
		PermissionDecisionReason string         `json:"permissionDecisionReason"`
		UpdatedInput             map[string]any `json:"updatedInput"`
		AdditionalContext        string         `json:"additionalContext"`
		// Decision is a PermissionRequest hook's answer.
		Decision *struct {
			Behavior string `json:"behavior"`
			Message  string `json:"message"`
		} `json:"decision"`
	} `json:"hookSpecificOutput"`
}

var decisionRank = map[string]int{"": 0, "allow": 1, "ask": 2, "defer": 3, "deny": 4}

// PreToolUse runs the matching hooks and merges their verdicts.
func (h *Hooks) PreToolUse(ctx context.Context, c *Call) (*HookVerdict, error) {
	v := &HookVerdict{}
	for _, m := range h.pre {
		if !m.match(c.Tool.Name()) {
			continue
		}
		for _, hk := range m.hooks {
			out, err := h.runHook(ctx, c, hk, "PreToolUse", nil)
			if err != nil {
				return &HookVerdict{Decision: "deny", Reason: err.Error()}, nil
			}
			d, reason, upd := "", "", map[string]any(nil)
			if out.HookSpecificOutput != nil {
				d = out.HookSpecificOutput.PermissionDecision
				reason = out.HookSpecificOutput.PermissionDecisionReason
				upd = out.HookSpecificOutput.UpdatedInput
			}
			if out.Continue != nil && !*out.Continue {
				d, reason = "deny", "hook stopped the call: "+out.StopReason
			}
			if d == "defer" {
				// sandboxd has no later place to defer to: treat it as ask (fail closed).
				d = "ask"
			}
			if _, known := decisionRank[d]; !known {
				d, reason = "deny", fmt.Sprintf("hook returned an unknown permissionDecision %q", d)
			}
			if decisionRank[d] > decisionRank[v.Decision] {
				v.Decision, v.Reason = d, reason
			}
			if upd != nil && (d == "allow" || d == "ask") {
				// COMPAT 4: updatedInput goes with allow or ask.
				v.UpdatedInput = Input(upd)
			}
		}
	}
	if v.Decision == "" && v.UpdatedInput == nil {
		return nil, nil
	}
	return v, nil
}

// PostToolUse runs the matching hooks; a block marks the result as an error for the agent.
func (h *Hooks) PostToolUse(ctx context.Context, c *Call, r *Result) error {
	for _, m := range h.post {
		if !m.match(c.Tool.Name()) {
			continue
		}
		for _, hk := range m.hooks {
			out, err := h.runHook(ctx, c, hk, "PostToolUse", r)
			if err != nil {
				r.IsError = true
				r.ExtraMessages = append(r.ExtraMessages, "PostToolUse hook failed: "+err.Error())
				continue
			}
			if out.Decision == "block" {
				r.IsError = true
				r.ExtraMessages = append(r.ExtraMessages, "PostToolUse hook blocked the result: "+out.Reason)
			}
			if out.HookSpecificOutput != nil && out.HookSpecificOutput.AdditionalContext != "" {
				r.ExtraMessages = append(r.ExtraMessages, out.HookSpecificOutput.AdditionalContext)
			}
		}
	}
	return nil
}

// HasPermissionRequest reports whether any PermissionRequest hook is configured.
func (h *Hooks) HasPermissionRequest() bool { return h != nil && len(h.perm) > 0 }

// PermissionRequest runs the matching PermissionRequest hooks on a pending approval and
// returns the first answer (allow or deny, with deny's message). A hook that fails, times
// out, exits 2 (COMPAT 4: ignored for this event) or says nothing answers nothing: the
// approval stays for a person, so no error turns it into an allow.
func (h *Hooks) PermissionRequest(ctx context.Context, c *Call, suggestions []string) (answer, message string, errs []error) {
	sugg := make([]map[string]any, 0, len(suggestions))
	for _, r := range suggestions {
		sugg = append(sugg, map[string]any{"type": "addRules", "rules": []string{r}, "behavior": "allow", "destination": "session"})
	}
	for _, m := range h.perm {
		if !m.match(c.Tool.Name()) {
			continue
		}
		for _, hk := range m.hooks {
			out, err := h.runHookExtra(ctx, c, hk, "PermissionRequest", nil, map[string]any{"permission_suggestions": sugg})
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if out.HookSpecificOutput == nil || out.HookSpecificOutput.Decision == nil {
				continue
			}
			switch d := out.HookSpecificOutput.Decision; d.Behavior {
			case "allow", "deny":
				return d.Behavior, d.Message, errs
			default:
				errs = append(errs, fmt.Errorf("hook %q answered an unknown behavior %q", hk.Command, d.Behavior))
			}
		}
	}
	return "", "", errs
}

// errHookBlocked is a hook that exited 2: it blocks, with its stderr as the reason.
var errHookBlocked = errors.New("blocked by hook")

// runHook runs one command hook confined as the session owner, with the event JSON on stdin.
func (h *Hooks) runHook(ctx context.Context, c *Call, hk config.Hook, event string, r *Result) (*hookOutput, error) {
	return h.runHookExtra(ctx, c, hk, event, r, nil)
}

// runHookExtra is runHook with extra fields in the event JSON.
func (h *Hooks) runHookExtra(ctx context.Context, c *Call, hk config.Hook, event string, r *Result, extra map[string]any) (*hookOutput, error) {
	payload := map[string]any{
		"session_id": c.Session.ID, "cwd": c.Session.Cwd(), "permission_mode": string(c.Mode),
		"hook_event_name": event, "tool_name": c.Tool.Name(), "tool_input": c.Input,
	}
	if event != "PermissionRequest" {
		payload["tool_use_id"] = c.ToolUseID // COMPAT 4: not in PermissionRequest
	}
	for k, v := range extra {
		payload[k] = v
	}
	if r != nil {
		payload["tool_response"] = r
	}
	in, err := json.Marshal(payload)
	if err != nil {
		return nil, err
	}
	timeout := defaultHookTimeout
	if hk.TimeoutSec > 0 {
		timeout = time.Duration(hk.TimeoutSec) * time.Second
	}
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	res, err := h.host.runConfined(hctx, c.Session, c.Mode == permission.ModePlan, "hook", hk.Command, in)
	if err != nil {
		return nil, fmt.Errorf("hook %q: %w", hk.Command, err)
	}
	stdout, stderr := bytes.NewBuffer(res.stdout), bytes.NewBuffer(res.stderr)
	switch {
	case res.timedOut:
		return nil, fmt.Errorf("hook %q timed out after %s", hk.Command, timeout)
	case res.exitCode == 2:
		return nil, fmt.Errorf("%w: %s", errHookBlocked, strings.TrimSpace(stderr.String()))
	case res.exitCode != 0:
		return nil, fmt.Errorf("hook %q exited with %d: %s", hk.Command, res.exitCode, strings.TrimSpace(stderr.String()))
	}
	out := &hookOutput{}
	if len(bytes.TrimSpace(stdout.Bytes())) == 0 {
		return out, nil
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		return nil, fmt.Errorf("hook %q printed invalid JSON: %w", hk.Command, err)
	}
	return out, nil
}
