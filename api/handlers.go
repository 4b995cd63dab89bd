package api

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/approval"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/protocol"
	"github.com/sandboxd/sandboxd/session"
)

func (s *Server) health(w http.ResponseWriter, _ *http.Request, c session.Caller) error {
	writeJSON(w, http.StatusOK, s.backend.Health(c))
	return nil
}

func (s *Server) tools(w http.ResponseWriter, r *http.Request, c session.Caller) error {
	tools, err := s.backend.Tools(c, r.URL.Query().Get("session"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, protocol.ToolList{Tools: tools})
	return nil
}

// parseMode checks a mode name; "" is left for the settings' defaultMode to fill.
func parseMode(s string) (permission.Mode, error) {
	if s == "" {
		return "", nil
	}
	m, err := permission.ParseMode(s)
	if err != nil {
		return "", errcode.New(errcode.Validation, err)
	}
	return m, nil
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request, c session.Caller) error {
	// A session costs the daemon a network namespace, its directories checked as the owner and
	// its settings read: making and ending them in a loop is paced like calls (wrap). Making
	// one reads and compiles its settings files, as a call's decision does: it takes a
	// call's slot, so a user's concurrent creations are bounded as their calls are.
	release, err := s.admit(r.Context(), c, 1)
	if err != nil {
		return err
	}
	defer release()
	var req protocol.CreateSession
	if err := decode(r, &req); err != nil {
		return err
	}
	mode, err := parseMode(req.Mode)
	if err != nil {
		return err
	}
	if len(req.ClientKey) > maxClientKey {
		return errcode.New(errcode.Validation, fmt.Errorf("client_key may be at most %d bytes", maxClientKey))
	}
	snap, err := s.backend.CreateSession(r.Context(), c, session.Params{
		Cwd: req.Cwd, AdditionalDirs: req.AdditionalDirs, Mode: mode,
		Rules: session.Rules(req.Rules), ParentID: req.ParentID, PersistCwd: req.PersistCwd, TrustProject: req.TrustProject,
		Network: req.Network, ClientKey: req.ClientKey, Disposable: req.Disposable,
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, sessionView(snap))
	return nil
}

func (s *Server) listSessions(w http.ResponseWriter, _ *http.Request, c session.Caller) error {
	snaps := s.backend.Sessions(c)
	out := protocol.SessionList{Sessions: make([]protocol.Session, 0, len(snaps))}
	for _, sn := range snaps {
		out.Sessions = append(out.Sessions, sessionView(sn))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request, c session.Caller) error {
	sess, err := s.backend.SessionView(c, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sessionView(sess.Snapshot()))
	return nil
}

func (s *Server) updateSession(w http.ResponseWriter, r *http.Request, c session.Caller) error {
	release, err := s.admit(r.Context(), c, 1) // as createSession: new rules are compiled
	if err != nil {
		return err
	}
	defer release()
	var req protocol.UpdateSession
	if err := decode(r, &req); err != nil {
		return err
	}
	var u session.Update
	if req.Mode != nil {
		m, err := permission.ParseMode(*req.Mode)
		if err != nil {
			return errcode.New(errcode.Validation, err)
		}
		u.Mode = &m
	}
	u.Cwd, u.AdditionalDirs = req.Cwd, req.AdditionalDirs
	if req.Rules != nil {
		rules := session.Rules(*req.Rules)
		u.Rules = &rules
	}
	snap, err := s.backend.UpdateSession(r.Context(), c, r.PathValue("id"), u)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sessionView(snap))
	return nil
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request, c session.Caller) error {
	if err := s.backend.DeleteSession(r.Context(), c, r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// sessionSlots is the session a call request names, and slots of its user's concurrent calls
// (limits.calls_per_user) held until release.
func (s *Server) sessionSlots(r *http.Request, c session.Caller, slots int, clientKeys ...string) (*session.Session, func(), error) {
	sess, err := s.backend.Session(c, r.PathValue("id"))
	if err != nil {
		return nil, nil, err
	}
	for _, k := range clientKeys {
		if err := checkClientKey(sess, k); err != nil {
			return nil, nil, err
		}
	}
	release, err := s.admit(r.Context(), c, slots)
	if err != nil {
		return nil, nil, err
	}
	return sess, release, nil
}

// maxClientKey bounds a session's client_key: a digest's hex fits.
const maxClientKey = 128

// checkClientKey refuses a request naming a client key that is not sess's, as not found: the
// client then makes its own session rather than act in one it was pointed at.
func checkClientKey(sess *session.Session, key string) error {
	if key != "" && key != sess.ClientKey {
		return errcode.New(errcode.NotFound, fmt.Errorf("session %q is not the one this client made (its client_key differs)", sess.ID))
	}
	return nil
}

// maxAuditedName bounds a call's tool name and tool_use_id, as a report's.
const maxAuditedName = 256

// checkCall refuses what no call request may be, before any session is looked up or any
// slot taken.
// shellName is what "shell" may hold: a program's name, short enough for an audit record.
var shellName = regexp.MustCompile(`^[a-z][a-z0-9_.+-]{0,31}$`)

func checkCall(cr protocol.CallRequest, decideOnly bool) error {
	if strings.TrimSpace(cr.Tool) == "" {
		return errcode.Msg(errcode.BadRequest, `missing "tool": name the tool to call`)
	}
	// Both go into the call's audit records whole, where audit.max_input_bytes bounds only
	// the input: unbounded, one request's body became one record's tool name.
	if len(cr.Tool) > maxAuditedName || len(cr.ToolUseID) > maxAuditedName {
		return errcode.Msg(errcode.Validation, fmt.Sprintf(`"tool" and "tool_use_id" are at most %d bytes`, maxAuditedName))
	}
	if cr.Shell != "" {
		if !shellName.MatchString(cr.Shell) {
			return errcode.Msg(errcode.BadRequest, `"shell" must be a shell's name, such as bash, zsh or sh`)
		}
		if !decideOnly && cr.Shell != "bash" {
			return errcode.Msg(errcode.BadRequest, `"shell" other than bash is for decide only: sandboxd runs Bash commands with bash`)
		}
	}
	if cr.Unconfined && !decideOnly {
		return errcode.Msg(errcode.BadRequest, `"unconfined" is for decide only: a call sandboxd runs is confined`)
	}
	if cr.Cwd != "" && (!filepath.IsAbs(cr.Cwd) || filepath.Clean(cr.Cwd) != cr.Cwd || len(cr.Cwd) > 4096 || strings.ContainsRune(cr.Cwd, 0)) {
		return errcode.Msg(errcode.BadRequest, `"cwd" must be an absolute, clean path of at most 4096 bytes`)
	}
	if cr.WaitMS < 0 {
		return errcode.Msg(errcode.BadRequest, `"wait_ms" must be >= 0`)
	}
	if cr.Mode != "" {
		if _, err := permission.ParseMode(cr.Mode); err != nil {
			return errcode.New(errcode.Validation, err)
		}
	}
	return nil
}

// outcomeStatus is the HTTP status of a single call: errors before the decision (unknown
// tool, bad input) and an unwritable audit log are HTTP errors; everything the policy or
// the tool decided is a 200 with the result object, which carries the decision.
func outcomeStatus(o Outcome) int {
	r := o.Result
	if r.Error == nil {
		return http.StatusOK
	}
	code := errcode.Code(r.Error.Class)
	if code == errcode.AuditUnavailable {
		return http.StatusServiceUnavailable
	}
	if r.Decision == nil && !o.Ran {
		return statusFor(code)
	}
	return http.StatusOK
}

func (s *Server) call(w http.ResponseWriter, r *http.Request, c session.Caller) error {
	return s.oneCall(w, r, c, false)
}

func (s *Server) decide(w http.ResponseWriter, r *http.Request, c session.Caller) error {
	return s.oneCall(w, r, c, true)
}

func (s *Server) oneCall(w http.ResponseWriter, r *http.Request, c session.Caller, decideOnly bool) error {
	var cr protocol.CallRequest
	if err := decode(r, &cr); err != nil {
		return err
	}
	if cr.ApprovalID != "" && !decideOnly {
		return s.resume(w, r, c, cr)
	}
	if err := checkCall(cr, decideOnly); err != nil {
		return err
	}
	sess, release, err := s.sessionSlots(r, c, 1, cr.ClientKey)
	if err != nil {
		return err
	}
	defer release()
	if decideOnly {
		o, err := s.backend.Decide(r.Context(), sess, c, cr)
		if err != nil {
			return err
		}
		writeCallResult(w, outcomeStatus(o), o.Result)
		return nil
	}
	budget := s.budget(c)
	defer budget.release()
	if !strings.Contains(r.Header.Get("Accept"), "application/x-ndjson") {
		o, err := s.backend.Call(r.Context(), sess, c, cr, nil, budget)
		if err != nil {
			return err
		}
		s.countCall(o)
		writeCallResult(w, outcomeStatus(o), o.Result)
		return nil
	}
	// Streaming: progress events as they come, then the result, one JSON object a line.
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	var mu sync.Mutex
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	flush := func() {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	o, err := s.backend.Call(r.Context(), sess, c, cr, func(ev protocol.Event) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(protocol.StreamLine{Event: &ev})
		flush()
	}, budget)
	if err != nil {
		// The status line is out: the refusal goes in the stream.
		o = Outcome{Result: protocol.CallResult{ToolUseID: cr.ToolUseID, Tool: cr.Tool, IsError: true, Content: []protocol.Block{}, Data: map[string]any{},
			Error: &protocol.ErrorDetail{Class: string(errcode.Of(err)), Message: err.Error()}}}
	}
	s.countCall(o)
	res := o.Result
	mu.Lock()
	// protocol.StreamLine{Result: &res}, written by hand for writeResult's sake.
	if _, err := io.WriteString(w, `{"result":`); err == nil && writeResult(w, &res) == nil {
		_, _ = io.WriteString(w, "}\n")
	}
	flush()
	mu.Unlock()
	return nil
}

func (s *Server) batch(w http.ResponseWriter, r *http.Request, c session.Caller) error {
	lim := s.tenants.get()
	calls, err := decodeBatch(r, lim.BatchCalls)
	if err != nil {
		return err
	}
	br := protocol.BatchRequest{Calls: calls}
	if len(br.Calls) == 0 {
		return errcode.Msg(errcode.BadRequest, `"calls" is empty: send at least one call`)
	}
	keys := make([]string, len(br.Calls))
	for i, cr := range br.Calls {
		if err := checkCall(cr, false); err != nil {
			return err
		}
		keys[i] = cr.ClientKey
	}
	// The rate is of calls: the rest of the batch's tokens, now that its size is known, within
	// the burst with what its body took (a bucket holds at most the burst: a request wanting
	// more would be refused however long its client waited).
	if err := s.limitRate(r.Context(), c, max(0, min(len(br.Calls)-1, s.tenants.get().Burst-1-bodyPaid(r)))); err != nil {
		return err
	}
	// A batch holds as many of its user's call slots as it runs calls at once.
	sess, release, err := s.sessionSlots(r, c, min(len(br.Calls), max(1, lim.MaxParallelCalls)), keys...)
	if err != nil {
		return err
	}
	defer release()
	budget := s.budget(c)
	defer budget.release()
	outs, err := s.backend.Batch(r.Context(), sess, c, br.Calls, budget)
	if err != nil {
		return err
	}
	results := make([]protocol.CallResult, len(outs))
	for i, o := range outs {
		s.countCall(o)
		results[i] = o.Result
	}
	writeBatch(w, results)
	return nil
}

func (s *Server) sessionTasks(w http.ResponseWriter, r *http.Request, c session.Caller) error {
	sess, err := s.backend.SessionView(c, r.PathValue("id"))
	if err != nil {
		return err
	}
	tasks := s.backend.Tasks(sess)
	if c.UID != sess.Owner.UID && c.UID != 0 {
		// An admin sees a command as the audit log shows it: with its secrets redacted.
		for _, t := range tasks {
			if cmd, ok := t["command"].(string); ok {
				t["command"] = audit.RedactCommand(cmd)
			}
		}
	}
	writeJSON(w, http.StatusOK, protocol.TaskList{Tasks: tasks})
	return nil
}

func (s *Server) sessionRules(w http.ResponseWriter, r *http.Request, c session.Caller) error {
	sess, err := s.backend.SessionView(c, r.PathValue("id"))
	if err != nil {
		return err
	}
	rs := sess.RuleSet()
	if rs == nil {
		return errcode.Msg(errcode.PolicyNotLoaded, "the session's rules are not loaded")
	}
	out := protocol.RuleList{Rules: []protocol.RuleInfo{}, Effective: effectiveView(rs.Effective()), Digest: rs.Digest()}
	for _, b := range []permission.Behavior{permission.Deny, permission.Ask, permission.Allow} {
		for _, rule := range rs.Rules() {
			if rule.Behavior == b {
				out.Rules = append(out.Rules, protocol.RuleInfo{Behavior: string(rule.Behavior), Rule: rule.String(), Source: string(rule.Source), Origin: rule.Origin})
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// resume finishes the call a pending approval holds: it waits up to wait_ms for the answer
// and then runs exactly what was decided (or returns the deny, or the ask again).
func (s *Server) resume(w http.ResponseWriter, r *http.Request, c session.Caller, cr protocol.CallRequest) error {
	if cr.WaitMS < 0 {
		return errcode.Msg(errcode.BadRequest, `"wait_ms" must be >= 0`)
	}
	sess, release, err := s.sessionSlots(r, c, 1)
	if err != nil {
		return err
	}
	defer release()
	budget := s.budget(c)
	defer budget.release()
	o, err := s.backend.Resume(r.Context(), sess, c, cr.ApprovalID, time.Duration(cr.WaitMS)*time.Millisecond, budget)
	if err != nil {
		return err
	}
	s.countCall(o)
	writeCallResult(w, outcomeStatus(o), o.Result)
	return nil
}

// listApprovals writes the caller's pending approvals one at a time, and charges their size
// to the caller's request rate (a token per MiB): a list can be tens of MB (each approval holds
// its call's input and previews), and looping on it from many connections took the daemon's
// CPU and memory from every other user.
func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request, c session.Caller) error {
	as := s.backend.Approvals(c)
	pre, err := s.precharge(r, c, as)
	if err != nil {
		return err
	}
	n := writeApprovals(w, approvalsView(as))
	s.chargeRate(c, int(n>>20)-pre)
	return nil
}

// precharge takes a token per MiB of the approvals as before they are written (what the list
// writes of them at least), all or none, and returns how many it took; the rest of what was
// written is charged after. Charged only after, 32 connections passed the one-token check
// together and wrote 84 lists of 16 MB in 10 s where the bucket allows about 35.
func (s *Server) precharge(r *http.Request, c session.Caller, as []approval.Approval) (int, error) {
	n := 0
	for _, a := range as {
		// What the list writes of it at least: its input and its diffs.
		n += len(a.Input)
		for _, p := range a.AllPreviews() {
			n += len(p.Diff)
		}
	}
	n = min(n>>20, s.tenants.get().Burst)
	return n, s.limitRate(r.Context(), c, n)
}

func (s *Server) answerApproval(w http.ResponseWriter, r *http.Request, c session.Caller) error {
	var req protocol.ApprovalAnswer
	if err := decode(r, &req); err != nil {
		return err
	}
	a, res, err := s.backend.AnswerApproval(r.Context(), c, r.PathValue("id"), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, protocol.ApprovalAnswered{Approval: a.Approval, Resolution: res})
	return nil
}

// streamApprovals streams the caller's approval events (created, answered, expired) as
// NDJSON until the client goes away; first the approvals already pending, as created. A
// reader that falls too far behind is cut off and reconnects.
func (s *Server) streamApprovals(w http.ResponseWriter, r *http.Request, c session.Caller) error {
	sub, cancel := s.backend.SubscribeApprovals(c)
	defer cancel()
	pending := s.backend.Approvals(c)
	pre, err := s.precharge(r, c, pending)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	cw := &countingWriter{w: w}
	enc := json.NewEncoder(cw)
	enc.SetEscapeHTML(false)
	flush := func() {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	seen := map[string]bool{}
	for _, a := range pending {
		seen[a.ID] = true
		if err := enc.Encode(protocol.ApprovalEvent{Type: "created", Approval: a.Approval}); err != nil {
			return nil
		}
	}
	flush()
	s.chargeRate(c, int(cw.n>>20)-pre) // the pending ones, as a list of them is (listApprovals)
	for {
		select {
		case <-r.Context().Done():
			return nil
		case ev, ok := <-sub.C:
			if !ok {
				return nil
			}
			if ev.Type == "created" && seen[ev.Approval.ID] {
				continue
			}
			if err := enc.Encode(approvalEventView(ev)); err != nil {
				return nil
			}
			flush()
		}
	}
}

// report records an agent's word on a call it ran (PostToolUse) in the session's audit trail.
// Only who may act in the session may speak for it.
func (s *Server) report(w http.ResponseWriter, r *http.Request, c session.Caller) error {
	var tr protocol.ToolReport
	if err := decode(r, &tr); err != nil {
		return err
	}
	if tr.Tool == "" || tr.Event == "" || len(tr.Tool) > 256 || len(tr.Event) > 64 || len(tr.ToolUseID) > 256 {
		return errcode.Msg(errcode.Validation, "a report needs event (at most 64 bytes) and tool (at most 256); tool_use_id is at most 256")
	}
	if len(tr.Input) > 0 && !json.Valid(tr.Input) {
		return errcode.Msg(errcode.Validation, "input must be JSON")
	}
	sess, err := s.backend.Session(c, r.PathValue("id"))
	if err != nil {
		return err
	}
	if err := checkClientKey(sess, tr.ClientKey); err != nil {
		return err
	}
	if err := s.backend.Report(r.Context(), sess, c, tr); err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, map[string]bool{"recorded": true})
	return nil
}
