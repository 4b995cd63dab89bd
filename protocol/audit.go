package protocol

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

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

// VerifyReport is what a verification saw, and on failure the first bad place (audit.Verify
// fills it; it has no JSON tags: the fields go by their Go names).
type VerifyReport struct {
	Files       []string
	Records     uint64
	FirstSeq    uint64
	LastSeq     uint64
	LastHash    string
	Pruned      bool   // the log starts at an audit.rotate: earlier files were removed by retention
	Checkpoints int    // audit.checkpoint records seen (signatures checked when a key is given)
	TornTails   int    // audit.torn_tail records: crashes that Open recovered
	CutBacks    int    // audit.cut_back records: starts that found the log short of its signed head
	HeadSeq     uint64 // the head's seq, when a head was checked
	Signed      bool   // checkpoints and head were checked against a public key
	// Unsigned counts the records after the last signature (checkpoint or head), when Signed:
	// the chain alone holds them, and anyone with the files can append such records.
	Unsigned uint64
	// KeyReplacements counts audit.key_replaced records: starts that made a new signing key
	// beside a signed log. UncheckedCheckpoints counts the checkpoints before them signed by a
	// replaced key that was not given: the records they cover are held by the chain alone.
	KeyReplacements      int
	UncheckedCheckpoints int

	BadFile string // first failure: file, 1-based line, seq (the expected seq when unreadable)
	BadLine int
	BadSeq  uint64
	Reason  string
}

// Record is the part of an audit record (audit.Record, one line of GET /v1/audit/records)
// a client reads to print a table. The daemon sends audit.Record's lines as the log holds
// them, so a client that passes records on should pass the raw lines.
type Record struct {
	Seq      uint64            `json:"seq"`
	Time     time.Time         `json:"time"`
	Kind     string            `json:"kind"`
	Caller   *RecordCaller     `json:"caller,omitempty"`
	Session  string            `json:"session,omitempty"`
	Mode     string            `json:"mode,omitempty"`
	Tool     string            `json:"tool,omitempty"`
	Input    json.RawMessage   `json:"input,omitempty"`
	Decision *RecordDecision   `json:"decision,omitempty"`
	Outcome  *RecordOutcome    `json:"outcome,omitempty"`
	Detail   map[string]string `json:"detail,omitempty"`
}

// RecordCaller is an audit record's caller.
type RecordCaller struct {
	UID  uint32 `json:"uid"`
	User string `json:"user,omitempty"`
}

// RecordDecision is an audit record's decision.
type RecordDecision struct {
	Behavior string `json:"behavior"`
	Reason   string `json:"reason,omitempty"`
	Rule     string `json:"rule,omitempty"`
	Source   string `json:"source,omitempty"`
	Step     string `json:"step,omitempty"`
}

// RecordOutcome is an audit record's outcome.
type RecordOutcome struct {
	ExitCode   int    `json:"exit_code"`
	DurationMS int64  `json:"duration_ms"`
	Timeout    bool   `json:"timeout,omitempty"`
	TaskID     string `json:"task_id,omitempty"`
	Error      string `json:"error,omitempty"`
}

// Policy is the body of GET /v1/policy (admins): the policy in force, by module name, so a
// replay decides recorded calls under exactly what the daemon runs.
type Policy struct {
	Digest  string            `json:"digest"`
	Modules map[string]string `json:"modules"`
}

// ToolReport is the body of POST /v1/sessions/{id}/reports: what the agent says a call it ran
// did (a PostToolUse hook). It is recorded as the agent's word (call.report), never as
// something sandboxd saw.
type ToolReport struct {
	// Event is the agent's hook event, e.g. "PostToolUse".
	Event     string          `json:"event"`
	Tool      string          `json:"tool"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	// IsError and ResponseBytes describe the tool's response as the agent saw it; the response
	// itself is not sent (it may hold what the agent read).
	IsError       bool `json:"is_error,omitempty"`
	ResponseBytes int  `json:"response_bytes,omitempty"`
	// ClientKey, when set, must be the session's (CreateSession.ClientKey), else 404.
	ClientKey string `json:"client_key,omitempty"`
}

// ParseTime reads an audit filter's since or until: an RFC 3339 time, or a duration back from
// now ("15m", "24h", or whole days and weeks, "7d", "2w", which is how a log is asked about
// and which time.ParseDuration does not take).
func ParseTime(v string) (time.Time, error) {
	if d, err := time.ParseDuration(v); err == nil {
		return time.Now().Add(-d), nil
	}
	if n, unit := strings.TrimRight(v, "dw"), strings.TrimLeft(v, "0123456789"); n != "" && (unit == "d" || unit == "w") {
		if days, err := strconv.Atoi(n); err == nil && days <= 100*366 {
			if unit == "w" {
				days *= 7
			}
			return time.Now().AddDate(0, 0, -days), nil
		}
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("want an RFC 3339 time or a duration like 24h or 7d: %q", v)
	}
	return t, nil
}
