package daemon

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/executor"
	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/protocol"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/session"
)

// recorder turns the daemon's events into audit records.
type recorder struct {
	log *audit.Log
	// rules remembers which rule sets the log already holds (see basisDetail).
	rules recordedRules
	// wait is how long calls wait on their audit records, by wait level: the audit's share of
	// a call's latency, for admins and the benchmark.
	wait *prometheus.HistogramVec
}

func newRecorder(log *audit.Log, reg prometheus.Registerer) *recorder {
	r := &recorder{log: log, wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "sandboxd_audit_wait_seconds",
		Help:    "Time calls waited on their audit records, by wait level (durable, written, queued).",
		Buckets: prometheus.ExponentialBuckets(5e-6, 2.5, 10), // 5 µs .. 19 ms
	}, []string{"wait"})}
	reg.MustRegister(r.wait)
	return r
}

var waitLabel = map[executor.Wait]string{executor.WaitDurable: "durable", executor.WaitWritten: "written", executor.WaitQueued: "queued"}

var _ executor.Recorder = (*recorder)(nil)

func (r *recorder) healthy() bool { return r.log.Healthy() }

func auditCaller(c session.Caller) *audit.Caller {
	return &audit.Caller{UID: c.UID, GID: c.GID, PID: c.PID, User: c.User, RangeOwner: c.RangeOwner}
}

func auditDecision(d *permission.Decision) *audit.Decision {
	if d == nil {
		return nil
	}
	return &audit.Decision{Behavior: string(d.Behavior), Reason: d.Reason, Rule: d.Rule, Source: d.Source, Step: d.Step}
}

// RecordCall implements executor.Recorder.
func (r *recorder) RecordCall(ctx context.Context, kind string, cr *executor.CallRecord) error {
	rec := &audit.Record{Kind: audit.Kind(kind), Decision: auditDecision(cr.Decision)}
	if cr.Request != nil {
		rec.Tool, rec.ToolUseID = cr.Request.Tool, cr.Request.ToolUseID
		rec.Input = validJSON(cr.Request.Input)
	}
	if c := cr.Call; c != nil {
		rec.Caller = auditCaller(c.Caller)
		rec.Session, rec.Mode, rec.Tool = c.Session.ID, string(c.Mode), c.Tool.Name()
		rec.Detail = decidedInput(rec.Input, c.Input)
	} else if cr.Session != nil {
		// Refused before its tool was found: still the caller's record, or a caller could
		// write records that no budget counts and no query of theirs shows.
		rec.Caller = auditCaller(cr.Caller)
		rec.Session = cr.Session.ID
	}
	if cr.Request != nil && cr.Request.Shell != "" && cr.Request.Shell != "bash" {
		// The shell the command was classified for decided it as much as the input did.
		if rec.Detail == nil {
			rec.Detail = map[string]string{}
		}
		rec.Detail["shell"] = cr.Request.Shell
	}
	if cr.Approval != nil || cr.Resolution != nil || (cr.Decision != nil && (len(cr.Decision.Auto) > 0 || cr.Decision.ApprovalID != "")) {
		if rec.Detail == nil {
			rec.Detail = map[string]string{}
		}
		for k, v := range approvalDetail(cr.Approval, cr.Resolution) {
			rec.Detail[k] = v
		}
		if d := cr.Decision; d != nil {
			if d.ApprovalID != "" {
				rec.Detail["approval_id"] = d.ApprovalID
			}
			if len(d.Auto) > 0 {
				// Auto mode's stages and verdicts, so a replay sees why the classifier decided.
				b, _ := json.Marshal(d.Auto)
				rec.Detail["auto"] = string(b)
			}
		}
	}
	if p := cr.Policy; p != nil && p.Basis != nil && cr.Call != nil {
		if rec.Detail == nil {
			rec.Detail = map[string]string{}
		}
		r.basisDetail(rec.Detail, cr.Call.Caller.UID, p, cr.Decision)
	}
	if o := cr.Outcome; o != nil {
		rec.Outcome = outcomeOf(o)
		rec.NotRun = !o.Ran
		if o.Result != nil && o.Result.ContextChange != nil {
			// A call that moves its session's cwd or mode (a persisted cd, plan mode) says so.
			if rec.Detail == nil {
				rec.Detail = map[string]string{}
			}
			b, _ := json.Marshal(o.Result.ContextChange)
			rec.Detail["context_change"] = string(b)
		}
	}
	start := time.Now()
	var err error
	switch cr.Wait {
	case executor.WaitQueued:
		err = r.log.Enqueue(rec)
	case executor.WaitWritten:
		err = r.log.AppendWritten(ctx, rec)
	default:
		err = r.log.Append(ctx, rec)
	}
	r.wait.WithLabelValues(waitLabel[cr.Wait]).Observe(time.Since(start).Seconds())
	return err
}

// decidedInput is the input the call was decided and run with (after the backfill of defaults
// and absolute paths, and a PreToolUse hook's updatedInput), redacted like the original, with
// the digest of the whole; nil when it is the original.
func decidedInput(original json.RawMessage, decided executor.Input) map[string]string {
	if decided == nil || len(original) == 0 {
		return nil
	}
	b, err := json.Marshal(decided)
	if err != nil {
		return map[string]string{"decided_input": "[unencodable]"}
	}
	red, digest := audit.Redact(b)
	if _, orig := audit.Redact(original); orig == digest {
		return nil
	}
	return map[string]string{"decided_input": string(red), "decided_input_digest": digest}
}

// validJSON keeps the input as sent when it is JSON; anything else is recorded as a string,
// so a malformed request is still on the record.
func validJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	if json.Valid(raw) {
		return raw
	}
	b, _ := json.Marshal(string(raw))
	return b
}

func outcomeOf(o *executor.Outcome) *audit.Outcome {
	out := &audit.Outcome{DurationMS: o.Duration.Milliseconds()}
	if o.Err != nil {
		out.Error = o.Err.Code
	} else if o.Result != nil && o.Result.IsError {
		out.Error = errcode.ToolFailed
	}
	if o.Result == nil {
		return out
	}
	d := o.Result.Data
	out.ExitCode = int(num(d["exit_code"]))
	out.Signal, _ = d["signal"].(string)
	out.CPUMS = num(d["cpu_time_ms"])
	out.PeakMemoryBytes = num(d["peak_memory_bytes"])
	out.OOM, _ = d["oom_killed"].(bool)
	out.Timeout, _ = d["timed_out"].(bool)
	out.PidsLimit, _ = d["pids_limited"].(bool)
	out.OutputBytes = num(d["stdout_bytes"]) + num(d["stderr_bytes"])
	out.MovedAside, _ = d["moved_aside"].([]string)
	if n, ok := d["moved_aside_more"].(int); ok {
		out.MovedAsideMore = int64(n)
	}
	out.TaskID, _ = d["backgroundTaskId"].(string)
	// The tools name persisted output as the agents' clients do (COMPAT: persistedOutputPath).
	for _, k := range []string{"persistedOutputPath", "persistedStderrPath"} {
		if p, ok := d[k].(string); ok && p != "" {
			out.PersistedPath = p
			break
		}
	}
	return out
}

func num(v any) int64 {
	switch n := v.(type) {
	case int:
		return int64(n)
	case int64:
		return n
	case float64:
		return int64(n)
	case json.Number:
		i, _ := n.Int64()
		return i
	}
	return 0
}

// session records a session lifecycle event with the session's state: what its calls are
// decided and confined by.
func (r *recorder) session(ctx context.Context, kind string, caller session.Caller, s *session.Session) error {
	return r.appendSession(ctx, kind, caller, s.Snapshot(), sessionDetail(s.Snapshot()))
}

// sessionDelete records a session's end at caller's request; extra says why, when it was not
// the session named (a sub-agent's, whose parent was deleted).
func (r *recorder) sessionDelete(ctx context.Context, caller session.Caller, s *session.Session, extra map[string]string) error {
	snap := s.Snapshot()
	detail := sessionDetail(snap)
	for k, v := range extra {
		detail[k] = v
	}
	return r.appendSession(ctx, "session.delete", caller, snap, detail)
}

// sessionChange records an update with the state before and after it.
func (r *recorder) sessionChange(ctx context.Context, caller session.Caller, before, after session.Snapshot) error {
	detail := sessionDetail(after)
	b, _ := json.Marshal(sessionState(before))
	detail["before"] = string(b)
	return r.appendSession(ctx, "session.update", caller, after, detail)
}

// sessionEvent records something the daemon did to a session on its own (a suspension).
func (r *recorder) sessionEvent(ctx context.Context, kind audit.Kind, s *session.Session, detail map[string]string) error {
	snap := s.Snapshot()
	return r.log.Append(ctx, &audit.Record{Kind: kind, Session: snap.ID, Mode: string(snap.Mode), Detail: detail,
		Owner: auditCaller(snap.Owner)})
}

func (r *recorder) appendSession(ctx context.Context, kind string, caller session.Caller, snap session.Snapshot, detail map[string]string) error {
	err := r.log.Append(ctx, &audit.Record{Kind: audit.Kind(kind), Caller: auditCaller(caller),
		Session: snap.ID, Mode: string(snap.Mode), Detail: detail})
	if err != nil {
		return errcode.Audit(err)
	}
	return nil
}

// sessionState is what a session record keeps of a session, beside its mode.
func sessionState(snap session.Snapshot) map[string]any {
	return map[string]any{"root": snap.Root, "cwd": snap.Cwd, "additional_dirs": snap.AdditionalDirs,
		"mode": snap.Mode, "rules": snap.Rules, "trust_project": snap.TrustProject, "persist_cwd": snap.PersistCwd,
		"network": snap.Network}
}

func sessionDetail(snap session.Snapshot) map[string]string {
	detail := map[string]string{"cwd": snap.Cwd, "root": snap.Root, "owner_uid": itoa(int64(snap.Owner.UID))}
	if snap.ParentID != "" {
		detail["parent_id"] = snap.ParentID
	}
	b, _ := json.Marshal(sessionState(snap))
	detail["state"] = string(b)
	return detail
}

// daemon records a daemon or policy event with details.
func (r *recorder) daemon(ctx context.Context, kind audit.Kind, detail map[string]string) error {
	return r.log.Append(ctx, &audit.Record{Kind: kind, Detail: detail})
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// taskEnd records how a background task ended, owned by its session's owner: it may end long
// after its call's call.end (a command moved to the background at its timeout), killed, or
// with what the sweep moved aside while it ran.
func (r *recorder) taskEnd(ctx context.Context, s *session.Session, id string, res *sandbox.Result, werr error) error {
	snap := s.Snapshot()
	detail := map[string]string{"task_id": id, "status": "completed"}
	switch {
	case werr != nil || res == nil:
		detail["status"] = "failed"
		if werr != nil {
			detail["error"] = werr.Error()
		}
	default:
		detail["exit_code"] = strconv.Itoa(res.ExitCode)
		if res.KilledBy != "" {
			detail["status"], detail["killed_by"] = "killed", res.KilledBy
		}
		if res.Signal != "" {
			detail["signal"] = res.Signal
		}
		if len(res.MovedAside) > 0 {
			b, _ := json.Marshal(res.MovedAside)
			detail["moved_aside"] = string(b)
		}
		if res.MovedAsideMore > 0 {
			detail["moved_aside_more"] = strconv.Itoa(res.MovedAsideMore)
		}
	}
	err := r.log.Append(ctx, &audit.Record{Kind: audit.KindTaskEnd, Caller: auditCaller(snap.Owner), Session: snap.ID,
		Mode: string(snap.Mode), Tool: "Bash", Detail: detail})
	if err != nil {
		return errcode.Audit(err)
	}
	return nil
}

// report records an agent's report on a call it ran, as the agent's word.
func (r *recorder) report(ctx context.Context, s *session.Session, caller session.Caller, tr protocol.ToolReport) error {
	snap := s.Snapshot()
	detail := map[string]string{"event": tr.Event, "reported_by": "agent",
		"is_error": strconv.FormatBool(tr.IsError), "response_bytes": strconv.Itoa(tr.ResponseBytes)}
	err := r.log.Append(ctx, &audit.Record{Kind: audit.KindCallReport, Caller: auditCaller(caller), Session: snap.ID,
		Mode: string(snap.Mode), Tool: tr.Tool, ToolUseID: tr.ToolUseID, Input: validJSON(tr.Input), Detail: detail})
	if err != nil {
		return errcode.Audit(err)
	}
	return nil
}
