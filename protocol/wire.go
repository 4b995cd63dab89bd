package protocol

import (
	"encoding/base64"
	"encoding/json"
	"time"
)

// Version is the protocol version prefix of every path.
const Version = "v1"

// Behaviors of a Decision (permission.Behavior).
const (
	Allow = "allow"
	Deny  = "deny"
	Ask   = "ask"
)

// ErrorBody is every error response: {"error":{"class":"...","message":"..."}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is a telemetry-safe class and a message for the caller.
type ErrorDetail struct {
	Class       string   `json:"class"`
	Message     string   `json:"message"`
	Suggestions []string `json:"suggestions,omitempty"`
}

// SessionGroupsLacking is in the message refusing a request from a process of a session's
// owner that lacks one of the session's groups (status 403): the session cannot serve that
// process, which makes a new one (an agent's hook does, as for a session gone).
const SessionGroupsLacking = "which this process does not have"

// SessionCwdMoved is in the message refusing a call whose cwd (CallRequest.Cwd) is not the
// session's (status 409): the caller's cwd must be looked up again, in a session made for it
// (an agent's hook makes one, which fails where that cwd now leads out of its dirs).
const SessionCwdMoved = "the session's cwd is not the caller's"

// Rules are allow/deny/ask rule texts.
type Rules struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
	Ask   []string `json:"ask,omitempty"`
}

// CreateSession is the body of POST /v1/sessions.
type CreateSession struct {
	Cwd            string   `json:"cwd"`
	AdditionalDirs []string `json:"additional_dirs,omitempty"`
	Mode           string   `json:"mode,omitempty"`
	Rules          Rules    `json:"rules,omitempty"`
	ParentID       string   `json:"parent_id,omitempty"`
	// PersistCwd makes a Bash `cd` inside the session's directories carry over to later calls.
	PersistCwd bool `json:"persist_cwd,omitempty"`
	// TrustProject lets the project's settings files (.sandboxd/settings*.json) add allow rules
	// and directories; without it they may only deny and ask.
	TrustProject bool `json:"trust_project,omitempty"`
	// Network is none (loopback only), proxy (only through the daemon's filtering proxy) or
	// host; empty takes the daemon's network.mode.
	Network string `json:"network,omitempty"`
	// ClientKey binds the session to what its client made it for (sbctl hook: the agent
	// session, cwd and mode). A call or decide that names a key is refused as not found unless
	// it is the session's, so a client that keeps the session's id in a file another program
	// could write cannot be switched to another session of its owner.
	ClientKey string `json:"client_key,omitempty"`
	// Disposable says the client makes the session again whenever it finds it gone (sbctl
	// hook: one per agent session, cwd and mode). When its owner is at
	// limits.sessions_per_user, the least recently used of their disposable sessions that
	// runs nothing, waits on no approval and has no sub-agent is ended to make room for a new
	// session, rather than the new one refused.
	Disposable bool `json:"disposable,omitempty"`
}

// UpdateSession is the body of PATCH /v1/sessions/{id}; absent fields are left alone.
type UpdateSession struct {
	Mode           *string   `json:"mode,omitempty"`
	Cwd            *string   `json:"cwd,omitempty"`
	AdditionalDirs *[]string `json:"additional_dirs,omitempty"`
	Rules          *Rules    `json:"rules,omitempty"`
}

// Owner is a session owner (or the caller) as the wire shows it.
type Owner struct {
	UID  uint32 `json:"uid"`
	GID  uint32 `json:"gid"`
	User string `json:"user,omitempty"`
}

// Session is a session as the wire shows it.
type Session struct {
	ID             string    `json:"id"`
	Owner          Owner     `json:"owner"`
	ParentID       string    `json:"parent_id,omitempty"`
	Created        time.Time `json:"created"`
	Root           string    `json:"root"`
	Cwd            string    `json:"cwd"`
	AdditionalDirs []string  `json:"additional_dirs"`
	Mode           string    `json:"mode"`
	Rules          Rules     `json:"rules"`
	PersistCwd     bool      `json:"persist_cwd,omitempty"`
	TrustProject   bool      `json:"trust_project,omitempty"`
	Network        string    `json:"network,omitempty"`
}

// SessionList is the body of GET /v1/sessions.
type SessionList struct {
	Sessions []Session `json:"sessions"`
}

// CallRequest is one tool call: the body of POST /v1/sessions/{id}/calls and .../decide.
type CallRequest struct {
	Tool      string          `json:"tool"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Mode      string          `json:"mode,omitempty"`
	// WaitMS is how long an ask waits for its approval's answer before the result says
	// "ask" with approval_id (0, the default: not at all). Bounded by approvals.timeout_sec.
	WaitMS int64 `json:"wait_ms,omitempty"`
	// ApprovalID resumes the call that created this approval instead of making a new one:
	// wait up to WaitMS for its answer, then run exactly what was decided (tool and input
	// are then not needed).
	ApprovalID string `json:"approval_id,omitempty"`
	// ClientKey, when set, must be the session's (CreateSession.ClientKey), else 404.
	ClientKey string `json:"client_key,omitempty"`
	// Shell is the shell that will run a Bash command the caller runs itself, for decide
	// only (an agent's hook): "bash" (the default), "zsh" or "sh". The command is classified
	// as that shell reads it; any other name leaves it unclassified, so it is asked. A call
	// sandboxd runs is run by bash, so it takes no other.
	Shell string `json:"shell,omitempty"`
	// Unconfined says the caller runs the call itself, outside any sandbox (an agent's hook:
	// its own Read, Write and Edit, and Bash without --confine), for decide only. The paths
	// are then looked up as the caller's own process would look them up on the host, not in
	// the sandbox's view (its private /tmp and /dev/shm, its own /proc). A Bash decide that
	// names a shell is unconfined anyway.
	Unconfined bool `json:"unconfined,omitempty"`
	// Cwd, when set, is the dir the caller runs the call in (an agent's hook: the agent's
	// shell's). It must be the session's cwd: one the session no longer has (reset to its root
	// when a dir on the way was replaced by a link) refuses the call with 409 and
	// SessionCwdMoved, rather than decide it as if run at the session's.
	Cwd string `json:"cwd,omitempty"`
}

// BatchRequest is the body of POST /v1/sessions/{id}/batch.
type BatchRequest struct {
	Calls []CallRequest `json:"calls"`
}

// BatchResponse lists results in request order.
type BatchResponse struct {
	Results []CallResult `json:"results"`
}

// Decision is the policy's answer for one call, with why (permission.Decision).
type Decision struct {
	Behavior string `json:"behavior"` // Allow, Deny or Ask
	Reason   string `json:"reason"`
	// Rule is the rule text that decided, e.g. "Bash(npm run test:*)"; empty when a mode or check decided.
	Rule string `json:"rule,omitempty"`
	// Source is where the rule or check came from: a settings source name, "mode", "safety", "hook", "classifier".
	Source string `json:"source,omitempty"`
	// Step is the decision-chain step that decided (hook, deny_rule, ask_rule, allow_rule, safety, mode, resolve).
	Step string `json:"step,omitempty"`
	// Route says where an ask goes: "user" (approval queue), "parent" (bubble), "classifier" (auto).
	Route string `json:"route,omitempty"`
	// ReadOnly marks an allow granted because the call only reads.
	ReadOnly bool `json:"read_only,omitempty"`
	// Trace lists the chain steps evaluated, for --explain.
	Trace []string `json:"trace,omitempty"`
	// Auto lists what each stage of auto mode said about an ask routed to the classifier.
	Auto []AutoStage `json:"auto,omitempty"`
	// ApprovalID names the pending approval an unanswered ask created (or answered one).
	ApprovalID string `json:"approval_id,omitempty"`
}

// AutoStage is one auto-mode stage's verdict (permission.AutoStage): stage 1 is the daemon's
// deterministic risk rules, stage 2 the external classifier.
type AutoStage struct {
	Stage   int    `json:"stage"`
	Verdict string `json:"verdict"` // allow, deny, ask, ambiguous (stage 1), error (stage 2)
	Reason  string `json:"reason"`
}

// Block is one content block of a result (executor.Block).
type Block struct {
	Type      string `json:"type"` // "text" or "image"
	Text      string `json:"text,omitempty"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"` // base64, for images
}

// CallResult is the stable result object of a call.
type CallResult struct {
	ToolUseID string         `json:"tool_use_id"`
	Tool      string         `json:"tool"`
	Decision  *Decision      `json:"decision"`
	IsError   bool           `json:"is_error"`
	Content   []Block        `json:"content"`
	Data      map[string]any `json:"data"`
	Extra     []string       `json:"extra_messages,omitempty"`
	Error     *ErrorDetail   `json:"error"`
	// ApprovalID names the pending approval of an unanswered ask (also decision.approval_id).
	ApprovalID string `json:"approval_id,omitempty"`
}

// Event is a running call's progress event (executor.Event).
type Event struct {
	Kind string `json:"kind"` // "stdout", "stderr", "status"
	Data string `json:"data"`
	// B64 holds a stdout or stderr chunk that is not UTF-8 text, base64-encoded (Data is then
	// empty): the output's bytes pass through exactly. A character split between reads is
	// sent whole in the next chunk.
	B64 string `json:"b64,omitempty"`
}

// Bytes is what an output event carries: Data, or B64 decoded (nil if it does not decode).
func (e Event) Bytes() []byte {
	if e.B64 == "" {
		return []byte(e.Data)
	}
	b, err := base64.StdEncoding.DecodeString(e.B64)
	if err != nil {
		return nil
	}
	return b
}

// StreamLine is one line of an application/x-ndjson call response: events, then the result.
type StreamLine struct {
	Event  *Event      `json:"event,omitempty"`
	Result *CallResult `json:"result,omitempty"`
}

// ToolInfo is one entry of GET /v1/tools. Deferred tools carry no schema.
type ToolInfo struct {
	Name        string          `json:"name"`
	Aliases     []string        `json:"aliases,omitempty"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
	Deferred    bool            `json:"deferred"`
	External    bool            `json:"external"`
}

// ToolList is the body of GET /v1/tools.
type ToolList struct {
	Tools []ToolInfo `json:"tools"`
}

// RuleInfo is one effective rule of a session with where it came from.
type RuleInfo struct {
	Behavior string `json:"behavior"`
	Rule     string `json:"rule"`
	Source   string `json:"source"`
	Origin   string `json:"origin,omitempty"`
}

// Effective is what a session's settings sources add up to besides the rules
// (permission.Effective).
type Effective struct {
	// DefaultMode is the strongest source's defaultMode.
	DefaultMode string `json:"default_mode"`
	// AdditionalDirectories merges every source's directories, made absolute.
	AdditionalDirectories []string `json:"additional_directories,omitempty"`
	// DisableBypass and DisableAuto forbid those modes.
	DisableBypass bool `json:"disable_bypass,omitempty"`
	DisableAuto   bool `json:"disable_auto,omitempty"`
	// ManagedRulesOnly drops allow rules of every source but policySettings.
	ManagedRulesOnly bool `json:"managed_rules_only,omitempty"`
	// Files lists the settings files read, in precedence order.
	Files []string `json:"files,omitempty"`
	// Warnings lists rules or settings that were dropped or changed, and why.
	Warnings []string `json:"warnings,omitempty"`
}

// RuleList is the body of GET /v1/sessions/{id}/rules.
type RuleList struct {
	Rules     []RuleInfo `json:"rules"`
	Effective Effective  `json:"effective"`
	Digest    string     `json:"digest"`
}

// TaskList is the body of GET /v1/sessions/{id}/tasks: the session's background Bash tasks.
type TaskList struct {
	Tasks []map[string]any `json:"tasks"`
}

// Health is the body of GET /v1/healthz.
type Health struct {
	Status   string `json:"status"`
	Version  string `json:"version"`
	Sessions int    `json:"sessions"`
	Audit    string `json:"audit"`
	Policy   string `json:"policy,omitempty"`
	// Reload, for admins, says which reload was refused and why while the daemon serves on
	// the configuration or policy it had; empty when the last ones succeeded.
	Reload string `json:"reload,omitempty"`
	Uptime string `json:"uptime"`
	Caller Owner  `json:"caller"`
	Admin  bool   `json:"admin"`
}
