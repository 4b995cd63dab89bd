package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/sandboxd/sandboxd/approval"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/classifier"
	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/session"
)

// Auto mode's verdicts.
const (
	verdictAllow     = "allow"
	verdictDeny      = "deny"
	verdictAsk       = "ask"
	verdictAmbiguous = "ambiguous"
	verdictError     = "error"
)

// personOnly are the asks (decision steps) only a person may approve: an ask rule's hit (the
// admin's custom ask too), a call that asks the user (AskUserQuestion, an MCP tool requiring
// interaction) and a critical-path rm. Neither the classifier (the policy routes them to a
// person) nor a PermissionRequest hook's allow answers them.
var personOnly = map[string]bool{"ask_rule": true, "custom_ask": true, "critical_rm": true, "user_interaction": true}

// autoResolve runs auto mode's stages on an ask routed to the classifier. It returns true
// when a stage decided (allow or deny); false leaves the ask for a person. Every verdict is
// recorded in the decision (and so in the audit record).
func (p *Pipeline) autoResolve(ctx context.Context, st *state) bool {
	d := *st.decision
	st.decision = &d
	if personOnly[d.Step] {
		// Whatever routed it here: the policy sends these to a person in an auto session, and
		// a bubble sub-agent's ask that reaches an auto ancestor is the same ask.
		d.Auto = append(d.Auto, permission.AutoStage{Stage: 1, Verdict: verdictAsk,
			Reason: "auto mode: needs a person, not the classifier (" + d.Step + ")"})
		d.Route = "user"
		return false
	}
	if st.sess.Denials.Exhausted() {
		d.Auto = append(d.Auto, permission.AutoStage{Stage: 1, Verdict: verdictAsk,
			Reason: fmt.Sprintf("the classifier denied %d calls in a row or %d in this session; a person decides", session.MaxConsecutiveDenials, session.MaxTotalDenials)})
		d.Route = "user"
		return false
	}
	v1, why1 := autoStageOne(st)
	d.Auto = append(d.Auto, permission.AutoStage{Stage: 1, Verdict: v1, Reason: why1})
	verdict, why := v1, why1
	if v1 == verdictAmbiguous {
		v2, why2 := p.autoStageTwo(ctx, st)
		d.Auto = append(d.Auto, permission.AutoStage{Stage: 2, Verdict: v2, Reason: why2})
		verdict, why = v2, why2
	}
	switch verdict {
	case verdictAllow:
		st.sess.Denials.Record(false)
		d.Behavior, d.Step, d.Source, d.Route = permission.Allow, "resolve", "classifier", ""
		d.Reason = "auto mode: " + why
		// An allow granted because the call only reads runs with read-only mounts, as the
		// policy's own read-only allows do.
		st.call.RunReadOnly = st.readOnly && len(writePaths(st)) == 0
		d.ReadOnly = st.call.RunReadOnly
		st.call.autoAllowed = true
		return true
	case verdictDeny:
		st.sess.Denials.Record(true)
		d.Behavior, d.Step, d.Source, d.Route = permission.Deny, "resolve", "classifier", ""
		d.Reason = "auto mode: " + why
		return true
	}
	d.Route = "user"
	return false
}

func writePaths(st *state) []string {
	var out []string
	for _, pf := range st.facts.Paths {
		if pf.Access == permission.Write {
			out = append(out, pf.Resolved)
		}
	}
	if cl := st.call.Classification(); cl != nil {
		for _, pu := range cl.Paths {
			if pu.Access == classifier.AccessWrite {
				out = append(out, pu.Path)
			}
		}
	}
	return out
}

// credentialMarkers are path fragments that name credentials: auto mode never lets the
// classifier wave a call that touches one through.
var credentialMarkers = []string{
	"/.ssh/", "/.aws/", "/.gnupg/", "/.config/gcloud/", "/.azure/", "/.kube/", "/.docker/config.json",
	"/.netrc", "/.git-credentials", "/.npmrc", "/.pypirc", "/.pgpass", "/.vault-token", "/etc/shadow",
	"/id_rsa", "/id_ed25519", "/id_ecdsa", "/credentials.json", "/proc/self/environ",
}

// credentialPatterns are credentialMarkers as path rule patterns, held from what a Glob or Grep
// run by the daemon lists and prints when auto mode's stages allowed it (readHeldPatterns): a
// search of a directory reads the credentials below it that no name of the call shows. A call
// the mode allows as default would (a read inside the session's dirs) is default's: no name is
// special there, as in default mode.
var credentialPatterns = func() []string {
	var out []string
	for _, m := range credentialMarkers {
		switch {
		case strings.HasPrefix(m, "/etc/") || strings.HasPrefix(m, "/proc/"):
			out = append(out, m)
		case strings.HasSuffix(m, "/"):
			out = append(out, "/**"+m+"**")
		default:
			out = append(out, "/**"+m)
		}
	}
	return append(out, "/**/.env", "/**/.env.*")
}()

func isCredentialPath(p string) bool {
	for _, m := range credentialMarkers {
		if strings.Contains(p+"/", m) {
			return true
		}
	}
	b := path.Base(p)
	return b == ".env" || strings.HasPrefix(b, ".env.")
}

var shells = map[string]bool{"sh": true, "bash": true, "zsh": true, "dash": true, "ksh": true, "fish": true,
	"python": true, "python3": true, "perl": true, "ruby": true, "node": true, "php": true}

// autoStageOne is auto mode's deterministic first stage over the classifier's risk signals,
// the call's paths and the session's directories. It allows only asks that came from the
// mode's own default (never a protected path, an ask rule or a check): read-only calls and
// edits inside the workspace. It denies destruction outside the workspace, credential paths,
// download-and-execute, privilege and exfiltration. The rest is ambiguous.
func autoStageOne(st *state) (verdict, reason string) {
	c := st.call
	var paths []string
	for _, pf := range st.facts.Paths {
		paths = append(paths, pf.Resolved, pf.Requested)
	}
	cl := c.Classification()
	if cl != nil {
		for _, pu := range cl.Paths {
			paths = append(paths, pu.Path)
		}
	}
	for _, p := range paths {
		if isCredentialPath(p) {
			return verdictDeny, "stage one: touches a credential path (" + p + ")"
		}
	}
	if cl != nil {
		risks := map[string]bool{}
		for _, r := range cl.Risks {
			risks[r] = true
		}
		switch {
		case risks[classifier.RiskPrivilege]:
			return verdictDeny, "stage one: privilege escalation"
		case risks[classifier.RiskExfiltration]:
			return verdictDeny, "stage one: sends secrets over the network (exfiltration)"
		case risks[classifier.RiskCriticalPathRm]:
			return verdictDeny, "stage one: removes a critical path"
		case risks[classifier.RiskDestructive] && risks[classifier.RiskOutsideWorkspaceWrite]:
			return verdictDeny, "stage one: destruction outside the workspace"
		case risks[classifier.RiskNetwork] && pipesIntoShell(cl):
			return verdictDeny, "stage one: downloads and executes code"
		}
	}
	if st.decision.Step != "mode" {
		return verdictAmbiguous, "stage one: asked by " + st.decision.Step + ", not by the mode"
	}
	writes := writePaths(st)
	if cl != nil {
		// A read of a whole tree or of a glob's names outside the workspace reaches files
		// no word names (grep -r KEY ~/deploy, cat ~/deploy/id_rs?): the names checked above
		// cannot say it touches no credential, so the classifier judges it.
		if cl.PathsUnbounded {
			return verdictAmbiguous, "stage one: reads paths known only when it runs, which may lie outside the workspace"
		}
		for _, pu := range cl.Paths {
			if pu.Access != classifier.AccessWrite && (pu.Tree || strings.ContainsAny(pu.Path, "*?[")) && !st.sess.Inside(pu.Path) {
				return verdictAmbiguous, "stage one: reads a tree or a glob's files outside the workspace (" + pu.Path + ")"
			}
		}
	}
	if st.readOnly && len(writes) == 0 && (cl == nil || cl.ReadOnly) {
		return verdictAllow, "stage one: read-only call"
	}
	if len(writes) == 0 {
		return verdictAmbiguous, "stage one: no rule for this call"
	}
	for _, w := range writes {
		if !st.sess.Inside(w) {
			return verdictAmbiguous, "stage one: writes outside the workspace (" + w + ")"
		}
	}
	if cl == nil {
		return verdictAllow, "stage one: edit inside the workspace"
	}
	if len(cl.Risks) > 0 || cl.PathsIncomplete {
		return verdictAmbiguous, "stage one: risk signals " + strings.Join(cl.Risks, ",")
	}
	for _, sub := range cl.Subcommands {
		if sub.ReadOnly {
			continue
		}
		if len(sub.Prefix) == 0 || !fileCommands[sub.Prefix[0]] || sub.Opaque || sub.ExactOnly || !editsOnly(sub) {
			return verdictAmbiguous, "stage one: runs " + strings.TrimSpace(sub.Text)
		}
	}
	return verdictAllow, "stage one: file changes inside the workspace"
}

// fileCommands are the commands whose effects the classifier's path facts describe fully.
var fileCommands = map[string]bool{"mkdir": true, "touch": true, "mv": true, "cp": true, "sed": true, "tee": true, "rm": true}

// editsOnly: sed's path facts describe it fully only when in-place editing is all it does
// beyond reading; a script that runs programs (e), reads or writes other files (r, w) or
// comes from a file is more than a file change (the classifier reports those first).
func editsOnly(sub classifier.Subcommand) bool {
	return sub.Prefix[0] != "sed" || sub.Reason == classifier.ReasonSedInPlace
}

// pipesIntoShell reports a line that feeds a shell or an interpreter a script it cannot read
// statically (curl … | sh, bash <(wget …)).
func pipesIntoShell(cl *classifier.Classification) bool {
	for _, sub := range cl.Subcommands {
		w := sub.DenyPrefix
		if len(w) == 0 {
			continue
		}
		if shells[path.Base(w[0])] && (sub.Opaque || len(w) == 1 || strings.HasPrefix(w[len(w)-1], "-")) {
			return true
		}
	}
	return false
}

// AutoRequest is what auto mode's external classifier is sent (docs/policy.md documents it).
type AutoRequest struct {
	Version   int             `json:"version"`
	SessionID string          `json:"session_id"`
	Cwd       string          `json:"cwd"`
	Workdirs  []string        `json:"workdirs"`
	Call      json.RawMessage `json:"call"`
	// Recent are the session's last calls, oldest first.
	Recent []json.RawMessage `json:"recent"`
}

// AutoResponse is its answer.
type AutoResponse struct {
	Decision string `json:"decision"` // allow, deny or ask
	Reason   string `json:"reason"`
}

// historyInputBytes bounds the input of a call a session remembers (History) for the
// classifier's context, as audit.max_input_bytes bounds a record's: every call is remembered,
// in every mode, so whole inputs held a body's worth each (max_request_bytes) for the
// session's life, 100 a session and 64 sessions a user, gigabytes of the daemon's memory.
// The call being decided goes to the classifier whole.
const historyInputBytes = 8 << 10

// callSummary is one call as the classifier sees it: tool, input, classification. The call
// being decided goes whole, as it would run: a secret's redaction may hide what runs, and the
// classifier is the admin's. A call remembered for later ones (maxInput > 0) goes redacted,
// over maxInput bytes in the audit log's truncated form.
func callSummary(st *state, maxInput int) json.RawMessage {
	in, _ := json.Marshal(st.call.Input)
	if maxInput > 0 {
		in, _ = audit.Redact(in)
		in = audit.TruncateInput(in, maxInput)
	}
	m := map[string]any{"tool": st.call.Tool.Name(), "input": json.RawMessage(in)}
	if cl := st.call.Classification(); cl != nil {
		m["risks"] = cl.Risks
		m["read_only"] = cl.ReadOnly
	}
	if st.decision != nil {
		m["behavior"] = st.decision.Behavior
		m["reason"] = st.decision.Reason
	}
	b, _ := json.Marshal(m)
	return b
}

// autoStageTwo asks the configured external classifier. None configured, an error, a
// timeout or an answer it cannot read: ask.
func (p *Pipeline) autoStageTwo(ctx context.Context, st *state) (verdict, reason string) {
	if p.auto == nil {
		return verdictAsk, "stage two: no classifier configured"
	}
	cfg := p.auto()
	if cfg.Command == "" && cfg.URL == "" {
		return verdictAsk, "stage two: no classifier configured"
	}
	req := AutoRequest{Version: 1, SessionID: st.sess.ID, Cwd: st.sess.Cwd(), Workdirs: st.sess.Dirs(),
		Call: callSummary(st, 0), Recent: st.sess.History.Last(cfg.History)}
	body, err := json.Marshal(req)
	if err != nil {
		return verdictError, "stage two: " + err.Error()
	}
	timeout := time.Duration(cfg.TimeoutSec) * time.Second
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var out []byte
	if cfg.Command != "" {
		res, err := p.host.runConfined(cctx, st.sess, true, "classifier", cfg.Command, body)
		switch {
		case err != nil:
			return verdictError, "stage two: classifier: " + err.Error() + "; ask"
		case res.timedOut:
			return verdictError, fmt.Sprintf("stage two: classifier timed out after %s; ask", timeout)
		case res.exitCode != 0:
			return verdictError, fmt.Sprintf("stage two: classifier exited with %d; ask", res.exitCode)
		}
		out = res.stdout
	} else {
		out, err = postClassifier(cctx, cfg.URL, body)
		if err != nil {
			if cctx.Err() != nil {
				return verdictError, fmt.Sprintf("stage two: classifier timed out after %s; ask", timeout)
			}
			return verdictError, "stage two: classifier: " + err.Error() + "; ask"
		}
	}
	var r AutoResponse
	if err := json.Unmarshal(bytes.TrimSpace(out), &r); err != nil {
		return verdictError, "stage two: classifier answered invalid JSON; ask"
	}
	reason = "stage two: " + r.Reason
	switch r.Decision {
	case verdictAllow, verdictDeny, verdictAsk:
		return r.Decision, reason
	}
	return verdictError, fmt.Sprintf("stage two: classifier answered %q; ask", r.Decision)
}

// postClassifier sends the request to an HTTP classifier; only a 2xx answer counts.
func postClassifier(ctx context.Context, url string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, confinedOutputLimit))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return b, nil
}

// rememberCall adds a decided call to its session's history (auto mode's context).
func rememberCall(st *state) {
	if st.call == nil || st.decision == nil || st.decideOnly {
		return
	}
	st.sess.History.Add(callSummary(st, historyInputBytes))
}

// permissionRequestHooks lets PermissionRequest hooks answer a new approval. Their answer is
// audited like a person's; their errors leave it pending.
func (p *Pipeline) permissionRequestHooks(ctx context.Context, h *Hooks, st *state, a approval.Approval) {
	answer, msg, errs := h.PermissionRequest(ctx, st.call, a.SuggestedRules)
	for _, err := range errs {
		p.log.Info("PermissionRequest hook answered nothing", zap.String("code", string(errcode.Of(err))))
	}
	if answer == "" {
		return
	}
	if answer == string(approval.Allow) && personOnly[st.decision.Step] {
		// COMPAT: no rule or hook allow approves an ask rule's hit, a question for the user or
		// a critical-path rm; a hook may still refuse one.
		p.log.Info("PermissionRequest hook's allow ignored: only a person approves this ask", zap.String("step", st.decision.Step))
		return
	}
	res := approval.Resolution{Answer: approval.Answer(answer), Message: msg, By: "hook", When: time.Now().UTC()}
	// Claimed first, so a person answering meanwhile leaves one answer in the log, not two.
	if _, err := p.approvals.Queue.Claim(a.ID, nil); err != nil {
		return
	}
	// Audited before it takes effect: an answer nobody can audit is not given.
	if err := p.recorder.RecordCall(ctx, KindApprovalResolve, &CallRecord{Call: st.call, Request: st.req, Decision: st.decision, Approval: &a, Resolution: &res, Wait: WaitDurable}); err != nil {
		p.log.Error("audit approval answered by hook; left pending", zap.String("code", string(errcode.Of(err))))
		p.approvals.Queue.Unclaim(a.ID)
		return
	}
	_, _ = p.approvals.Queue.Resolve(a.ID, res, nil)
}
