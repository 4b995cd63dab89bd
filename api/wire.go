package api

import (
	"encoding/json"
	"time"

	"github.com/sandboxd/sandboxd/approval"
	"github.com/sandboxd/sandboxd/executor"
	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/session"
)

// Version is the protocol version prefix of every path.
const Version = "v1"

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
}

// UpdateSession is the body of PATCH /v1/sessions/{id}; absent fields are left alone.
type UpdateSession struct {
	Mode           *string   `json:"mode,omitempty"`
	Cwd            *string   `json:"cwd,omitempty"`
	AdditionalDirs *[]string `json:"additional_dirs,omitempty"`
	Rules          *Rules    `json:"rules,omitempty"`
}

// Owner is a session owner as the wire shows it.
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
}

// ApprovalAnswer is the body of POST /v1/approvals/{id}.
type ApprovalAnswer struct {
	Answer string `json:"answer"` // allow or deny
	// Remember adds the approval's first suggested rule (or Rule, one of them) as an allow
	// to session, localSettings or userSettings.
	Remember string `json:"remember,omitempty"`
	Rule     string `json:"rule,omitempty"`
	// Message goes back to the agent with a deny.
	Message string `json:"message,omitempty"`
}

// ApprovalList is the body of GET /v1/approvals.
type ApprovalList struct {
	Approvals []approval.Approval `json:"approvals"`
}

// ApprovalAnswered is the response of POST /v1/approvals/{id}.
type ApprovalAnswered struct {
	Approval   approval.Approval   `json:"approval"`
	Resolution approval.Resolution `json:"resolution"`
}

// BatchRequest is the body of POST /v1/sessions/{id}/batch.
type BatchRequest struct {
	Calls []CallRequest `json:"calls"`
}

// BatchResponse lists results in request order.
type BatchResponse struct {
	Results []CallResult `json:"results"`
}

// CallResult is the stable result object of a call.
type CallResult struct {
	ToolUseID string               `json:"tool_use_id"`
	Tool      string               `json:"tool"`
	Decision  *permission.Decision `json:"decision"`
	IsError   bool                 `json:"is_error"`
	Content   []executor.Block     `json:"content"`
	Data      map[string]any       `json:"data"`
	Extra     []string             `json:"extra_messages,omitempty"`
	Error     *ErrorDetail         `json:"error"`
	// ApprovalID names the pending approval of an unanswered ask (also decision.approval_id).
	ApprovalID string `json:"approval_id,omitempty"`
}

// StreamLine is one line of an application/x-ndjson call response: events, then the result.
type StreamLine struct {
	Event  *executor.Event `json:"event,omitempty"`
	Result *CallResult     `json:"result,omitempty"`
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

// RuleList is the body of GET /v1/sessions/{id}/rules.
type RuleList struct {
	Rules     []RuleInfo           `json:"rules"`
	Effective permission.Effective `json:"effective"`
	Digest    string               `json:"digest"`
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
	Uptime   string `json:"uptime"`
	Caller   Owner  `json:"caller"`
	Admin    bool   `json:"admin"`
	// GoProcs is the Go scheduler's width as this request found it: 1 while the daemon serves
	// one short request and nothing else (internal/procs), the host's CPUs otherwise.
	GoProcs int `json:"go_procs"`
}

func sessionView(s session.Snapshot) Session {
	return Session{
		ID: s.ID, Owner: Owner{UID: s.Owner.UID, GID: s.Owner.GID, User: s.Owner.User},
		ParentID: s.ParentID, Created: s.Created, Root: s.Root, Cwd: s.Cwd,
		AdditionalDirs: nonNil(s.AdditionalDirs), Mode: string(s.Mode),
		Rules: Rules(s.Rules), PersistCwd: s.PersistCwd, TrustProject: s.TrustProject, Network: s.Network,
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func callResult(o *executor.Outcome) CallResult {
	cr := CallResult{ToolUseID: o.ToolUseID, Tool: o.Tool, Decision: o.Decision, Data: map[string]any{}}
	if o.Decision != nil {
		cr.ApprovalID = o.Decision.ApprovalID
	}
	if o.Result != nil {
		cr.IsError = o.Result.IsError
		cr.Content = o.Result.Content
		cr.Extra = o.Result.ExtraMessages
		if o.Result.Data != nil {
			cr.Data = o.Result.Data
		}
	}
	if cr.Content == nil {
		cr.Content = []executor.Block{}
	}
	if o.Err != nil {
		cr.IsError = true
		cr.Error = &ErrorDetail{Class: string(o.Err.Code), Message: o.Err.Error(), Suggestions: o.Suggestions}
	}
	return cr
}

func errBody(code errcode.Code, msg string) ErrorBody {
	return ErrorBody{Error: ErrorDetail{Class: string(code), Message: msg}}
}
