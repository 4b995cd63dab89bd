package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/sandboxd/sandboxd/internal/errcode"
)

// Version is the record schema version written in every record's "v" field. Bump it when a
// field changes meaning; adding an omitempty field does not need a bump. Version 2: the
// input_digest is over the input's RFC 8785 (JCS) form; in version 1 it was over Go's
// canonical JSON. Both verify: the chain does not depend on what a field means.
const Version = 2

// oldestVersion is the oldest record version this build reads.
const oldestVersion = 1

// Kind is what a record is about.
type Kind string

// The record kinds. The audit.* kinds are written only by the log itself.
const (
	KindDaemonStart    Kind = "daemon.start"
	KindDaemonStop     Kind = "daemon.stop"
	KindPolicyLoad     Kind = "policy.load"
	KindSessionCreate  Kind = "session.create"
	KindSessionUpdate  Kind = "session.update"
	KindSessionDelete  Kind = "session.delete"
	KindSessionSuspend Kind = "session.suspend"
	KindSessionResume  Kind = "session.resume"
	KindCallDecide     Kind = "call.decide"
	KindCallStart      Kind = "call.start"
	KindCallEnd        Kind = "call.end"
	// KindCallReport is what an agent reported a call it ran did (a PostToolUse hook): its
	// word, recorded as such.
	KindCallReport      Kind = "call.report"
	KindApprovalRequest Kind = "approval.request"
	KindApprovalResolve Kind = "approval.resolve"
	// KindTaskEnd is how a background Bash task ended (its exit, a kill, what the sweep moved
	// aside while it ran): often long after its call's call.end.
	KindTaskEnd Kind = "task.end"
	// KindNetConnect is one egress proxy decision: session, host, port, resolved ip, method and
	// path when seen, allowed or not, the reason and the rule.
	KindNetConnect Kind = "net.connect"
	KindRotate     Kind = "audit.rotate"
	KindTornTail   Kind = "audit.torn_tail"
	KindCheckpoint Kind = "audit.checkpoint"
	// KindCutBack is written first at a start that found the log short of its signed head
	// (or gone): Verify fails on it for good, since the next head signs over the gap.
	KindCutBack Kind = "audit.cut_back"
	// KindKeyReplaced is written at a start that made a new signing key beside a signed log:
	// the checkpoints before it were signed by a key that is gone.
	KindKeyReplaced Kind = "audit.key_replaced"
)

var callerKinds = map[Kind]bool{
	KindDaemonStart: true, KindDaemonStop: true, KindPolicyLoad: true,
	KindSessionCreate: true, KindSessionUpdate: true, KindSessionDelete: true,
	KindSessionSuspend: true, KindSessionResume: true,
	KindCallDecide: true, KindCallStart: true, KindCallEnd: true, KindCallReport: true,
	KindApprovalRequest: true, KindApprovalResolve: true, KindNetConnect: true, KindTaskEnd: true,
}

var logKinds = map[Kind]bool{KindRotate: true, KindTornTail: true, KindCheckpoint: true, KindCutBack: true,
	KindKeyReplaced: true}

// Known reports whether k is a documented kind.
func (k Kind) Known() bool { return callerKinds[k] || logKinds[k] }

// Caller is who made the request, as the kernel reported it (SO_PEERCRED), plus the user name.
type Caller struct {
	UID  uint32 `json:"uid"`
	GID  uint32 `json:"gid"`
	PID  int32  `json:"pid"`
	User string `json:"user,omitempty"`
	// RangeOwner is the user whose subordinate uid range holds UID (a process in a user
	// namespace that user made), whose limits the record counts against.
	RangeOwner uint32 `json:"range_owner,omitempty"`
}

// tenant is the uid whose budget c's records spend: its range owner's, else its own.
func (c *Caller) tenant() uint32 {
	if c.RangeOwner != 0 {
		return c.RangeOwner
	}
	return c.UID
}

// Decision is the permission decision as recorded. It mirrors permission.Decision without the
// trace, so the audit package stays a leaf that every other package may import.
type Decision struct {
	Behavior string `json:"behavior"`
	Reason   string `json:"reason,omitempty"`
	Rule     string `json:"rule,omitempty"`
	Source   string `json:"source,omitempty"`
	Step     string `json:"step,omitempty"`
}

// Outcome is what an execution did. ExitCode is always present when an outcome is (-1 when the
// child was killed by a signal, as os.ProcessState reports it).
type Outcome struct {
	ExitCode        int    `json:"exit_code"`
	Signal          string `json:"signal,omitempty"`
	DurationMS      int64  `json:"duration_ms"`
	CPUMS           int64  `json:"cpu_ms,omitempty"`
	PeakMemoryBytes int64  `json:"peak_memory_bytes,omitempty"`
	OOM             bool   `json:"oom,omitempty"`
	Timeout         bool   `json:"timeout,omitempty"`
	PidsLimit       bool   `json:"pids_limit,omitempty"`
	OutputBytes     int64  `json:"output_bytes,omitempty"`
	PersistedPath   string `json:"persisted_path,omitempty"`
	// TaskID names the background task the command went on as (started in the background, or
	// moved there at its timeout, still running): ExitCode is then not the command's, which
	// the task's task.end record, with the same task_id, holds.
	TaskID string `json:"task_id,omitempty"`
	// MovedAside are the protected paths a Bash command made, moved aside when it ended: the
	// first few hundred, MovedAsideMore counting the rest (sandbox.Result).
	MovedAside     []string `json:"moved_aside,omitempty"`
	MovedAsideMore int64    `json:"moved_aside_more,omitempty"`
	// Error is the error class (Classify), never the message.
	Error errcode.Code `json:"error,omitempty"`
}

// Record is one audit line. The JSON field order below is the canonical order and part of the
// format: hash is last, so the hashed bytes are the line itself with the hash value emptied.
//
// Canonical encoding: the record is encoded with encoding/json (declared field order,
// omitempty as tagged, SetEscapeHTML(false), no trailing newline) with Hash set to "". That
// encoding necessarily ends in `"hash":""}`. Hash is the lowercase hex SHA-256 of those bytes,
// and the line on disk is the same bytes with the 64 hex digits put between those quotes,
// followed by "\n". Verify recomputes the hash from the line bytes as written (it never
// re-encodes), so any byte change is caught whatever the JSON library does.
//
// Prev is the previous record's Hash ("" only for seq 1 of a new log). Seq starts at 1 and
// increases by one across rotated files.
type Record struct {
	V    int       `json:"v"`
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"` // UTC, RFC 3339 with nanoseconds; set by the log
	Kind Kind      `json:"kind"`

	Caller    *Caller `json:"caller,omitempty"`
	Session   string  `json:"session,omitempty"`
	Mode      string  `json:"mode,omitempty"`
	Tool      string  `json:"tool,omitempty"`
	ToolUseID string  `json:"tool_use_id,omitempty"`
	// Input is the tool input with secrets redacted (Append redacts; pass the raw input).
	Input json.RawMessage `json:"input,omitempty"`
	// InputDigest is "sha256:<hex>" of the canonical unredacted input (see Redact).
	InputDigest string    `json:"input_digest,omitempty"`
	Decision    *Decision `json:"decision,omitempty"`
	Outcome     *Outcome  `json:"outcome,omitempty"`
	// Detail holds kind-specific facts (policy.load: digest; approval.*: id, answer; audit.*:
	// see the kind). String values keep the record flat and map 1:1 onto syslog SD-PARAMs.
	Detail map[string]string `json:"detail,omitempty"`

	Prev string `json:"prev"`
	Hash string `json:"hash"`

	// NotRun marks a call.end of a call that did not run. Its record stands for no effect, so
	// it is charged to its caller's budget like new work and refused past it; without the
	// mark a call.end is what ran, which is always recorded. Not part of the line.
	NotRun bool `json:"-"`
	// Owner is whose budget a record without a Caller is charged to: the daemon's records of
	// what happened to a user's session (a suspension whose reason quotes their settings
	// file), which that user can bring about at will. Not part of the line.
	Owner *Caller `json:"-"`
}

const hashSuffix = `"hash":""}`

// encodeBody returns the JSON members of r from kind to detail, without braces. inputCompact
// says r.Input is known to be compact JSON (it came from Redact).
func encodeBody(r *Record, inputCompact bool) ([]byte, error) {
	return appendBody(make([]byte, 0, bodySizeHint(r)), r, inputCompact)
}

// appendLine appends the canonical line of a record (body from encodeBody) to dst and returns
// it with the record's hash: byte for byte what encode produces, without reflection.
func appendLine(dst []byte, seq uint64, t time.Time, body []byte, prev string) ([]byte, string) {
	start := len(dst)
	dst = append(dst, `{"v":`...)
	dst = strconv.AppendInt(dst, Version, 10)
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendUint(dst, seq, 10)
	dst = append(dst, `,"time":"`...)
	dst = t.AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, `",`...)
	dst = append(dst, body...)
	dst = append(dst, `,"prev":"`...)
	dst = append(dst, prev...) // hex: nothing to escape
	dst = append(dst, `",`+hashSuffix...)
	sum := sha256.Sum256(dst[start:])
	var hx [64]byte
	hex.Encode(hx[:], sum[:])
	dst = append(dst[:len(dst)-2], hx[:]...)
	dst = append(dst, '"', '}', '\n')
	return dst, string(hx[:])
}

// encode returns the record's line (with trailing newline) and its hash. r.Hash is ignored;
// the line carries the current Version whatever r.V says.
func encode(r *Record) (line []byte, hash string, err error) {
	body, err := encodeBody(r, false)
	if err != nil {
		return nil, "", err
	}
	line, hash = appendLine(nil, r.Seq, r.Time, body, r.Prev)
	return line, hash, nil
}

var errLineShape = errors.New("line does not end in a 64-digit hash field")

// lineHash recomputes the hash of a line as written (without its newline) and returns it with
// the hash the line claims.
func lineHash(line []byte) (computed, claimed string, err error) {
	const tail = len(`"hash":"`) + 64 + len(`"}`)
	if len(line) < tail+1 || !bytes.HasSuffix(line, []byte(`"}`)) ||
		!bytes.Equal(line[len(line)-tail:len(line)-tail+len(`"hash":"`)], []byte(`"hash":"`)) {
		return "", "", errLineShape
	}
	claimed = string(line[len(line)-66 : len(line)-2])
	h := sha256.New()
	h.Write(line[:len(line)-66])
	h.Write([]byte(`"}`))
	return hex.EncodeToString(h.Sum(nil)), claimed, nil
}

// parseLine decodes and self-checks one line (without newline).
func parseLine(line []byte) (*Record, error) {
	computed, claimed, err := lineHash(line)
	if err != nil {
		return nil, err
	}
	var r Record
	if err := json.Unmarshal(line, &r); err != nil {
		return nil, fmt.Errorf("decode record: %w", err)
	}
	if r.Hash != claimed {
		return nil, errors.New("hash field is not the last field")
	}
	if computed != claimed {
		return &r, fmt.Errorf("hash mismatch: line says %.12s, content hashes to %.12s", claimed, computed)
	}
	if r.V < oldestVersion || r.V > Version {
		return &r, fmt.Errorf("unsupported record version %d", r.V)
	}
	return &r, nil
}
