package client

import (
	"encoding/json"
	"time"
)

// The wire types below mirror api/'s JSON (api/wire.go, api/audit.go). They are defined here
// rather than imported because api/ links the daemon's whole stack (executor, the JSON Schema
// compiler, Prometheus, audit, zap): a client that imported it would pay their package init,
// ~40 ms, on every start. wire_test.go checks that the field names agree with api/'s.

// DefaultSocket is where the daemon serves by default (config.DefaultSocket).
const DefaultSocket = "/run/sandboxd/sandboxd.sock"

// Behaviors of a Decision.
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
	PersistCwd     bool     `json:"persist_cwd,omitempty"`
	TrustProject   bool     `json:"trust_project,omitempty"`
	Network        string   `json:"network,omitempty"`
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
	// WaitMS is how long an ask waits for its approval's answer (0: not at all).
	WaitMS int64 `json:"wait_ms,omitempty"`
	// ApprovalID resumes the call that created this approval.
	ApprovalID string `json:"approval_id,omitempty"`
}

// Decision is the policy's answer for one call, with why (permission.Decision).
type Decision struct {
	Behavior string   `json:"behavior"`
	Reason   string   `json:"reason"`
	Rule     string   `json:"rule,omitempty"`
	Source   string   `json:"source,omitempty"`
	Step     string   `json:"step,omitempty"`
	Route    string   `json:"route,omitempty"`
	ReadOnly bool     `json:"read_only,omitempty"`
	Trace    []string `json:"trace,omitempty"`
	// Auto lists what each stage of auto mode said about an ask routed to the classifier.
	Auto []AutoStage `json:"auto,omitempty"`
	// ApprovalID names the pending approval an unanswered ask created (or answered one).
	ApprovalID string `json:"approval_id,omitempty"`
}

// AutoStage is one auto-mode stage's verdict (permission.AutoStage).
type AutoStage struct {
	Stage   int    `json:"stage"`
	Verdict string `json:"verdict"`
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

// Effective is the part of a session's merged settings sbctl shows (permission.Effective).
type Effective struct {
	DefaultMode           string   `json:"default_mode"`
	AdditionalDirectories []string `json:"additional_directories,omitempty"`
	Files                 []string `json:"files,omitempty"`
	Warnings              []string `json:"warnings,omitempty"`
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
	Uptime   string `json:"uptime"`
	Caller   Owner  `json:"caller"`
	Admin    bool   `json:"admin"`
	GoProcs  int    `json:"go_procs"`
}

// AuditKey is the body of GET /v1/audit/pubkey.
type AuditKey struct {
	KeyID     string `json:"key_id"`
	PublicKey string `json:"public_key"`
}

// AuditVerify is the body of GET /v1/audit/verify.
type AuditVerify struct {
	OK     bool          `json:"ok"`
	Error  string        `json:"error,omitempty"`
	Report *VerifyReport `json:"report"`
}

// VerifyReport is what a verification saw (audit.VerifyReport, which has no JSON tags).
type VerifyReport struct {
	Files       []string
	Records     uint64
	FirstSeq    uint64
	LastSeq     uint64
	LastHash    string
	Pruned      bool
	Checkpoints int
	TornTails   int
	HeadSeq     uint64
	Signed      bool
	BadFile     string
	BadLine     int
	BadSeq      uint64
	Reason      string
}

// Record is the part of an audit record (audit.Record) sbctl prints in a table; the JSON
// outputs pass the daemon's lines through unchanged.
type Record struct {
	Seq      uint64          `json:"seq"`
	Time     time.Time       `json:"time"`
	Kind     string          `json:"kind"`
	Caller   *RecordCaller   `json:"caller,omitempty"`
	Session  string          `json:"session,omitempty"`
	Tool     string          `json:"tool,omitempty"`
	Decision *RecordDecision `json:"decision,omitempty"`
	Outcome  *RecordOutcome  `json:"outcome,omitempty"`
}

// RecordCaller is an audit record's caller.
type RecordCaller struct {
	UID  uint32 `json:"uid"`
	User string `json:"user,omitempty"`
}

// RecordDecision is an audit record's decision.
type RecordDecision struct {
	Behavior string `json:"behavior"`
	Rule     string `json:"rule,omitempty"`
	Source   string `json:"source,omitempty"`
}

// RecordOutcome is an audit record's outcome.
type RecordOutcome struct {
	ExitCode   int    `json:"exit_code"`
	DurationMS int64  `json:"duration_ms"`
	Error      string `json:"error,omitempty"`
}
