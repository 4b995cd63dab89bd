package executor

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/sandboxd/sandboxd/approval"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/classifier"
	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/protocol"
	"github.com/sandboxd/sandboxd/session"
	"github.com/sandboxd/sandboxd/worker"
)

// Audit record kinds of the approval steps.
const (
	KindApprovalRequest = string(audit.KindApprovalRequest)
	KindApprovalResolve = string(audit.KindApprovalResolve)
)

// DontAskReason is what a call that would ask is denied with in dontAsk mode.
const DontAskReason = "would require approval"

// Approvals is how the pipeline puts asks before a person: the daemon's queue, and how long
// an approval waits for its answer.
type Approvals struct {
	Queue *approval.Queue
	// TTL is how long a pending approval lives before it expires as a deny.
	TTL func() time.Duration
}

// SetApprovals attaches the approval queue. Call it before the first call; without it an
// ask stays an ask (nothing runs and nothing is queued).
func (p *Pipeline) SetApprovals(a *Approvals) { p.approvals = a }

// SetAuto attaches auto mode's external classifier settings (nil: stage two never runs, its
// ambiguous calls ask a person).
func (p *Pipeline) SetAuto(f func() config.AutoClassifier) { p.auto = f }

// stepResolve settles an ask by the call's mode: dontAsk denies it at once, bubble sends it up
// to the first ancestor that is not bubble, auto lets its classifier stages try, and what is
// left goes to the approval queue, where the call may wait for its answer. Nothing here turns
// a question into an allow but a person's (or a PermissionRequest hook's) answer or auto
// mode's classifier: a timeout, an error or an exhausted budget leaves it an ask or denies.
// Step 8.
func stepResolve(ctx context.Context, p *Pipeline, st *state) error {
	if d := st.decision; d.Behavior == permission.Deny && st.call.Mode == permission.ModeDontAsk &&
		len(d.Trace) > 0 && d.Trace[len(d.Trace)-1] == "resolve" {
		// The policy resolved an ask by dontAsk: the reason is exactly DontAskReason, and
		// why it would have asked stays in the trace.
		nd := *d
		nd.Reason = DontAskReason
		nd.Trace = append(append([]string(nil), d.Trace...), "asked: "+strings.TrimSuffix(d.Reason, "; "+DontAskReason))
		st.decision = &nd
		return nil
	}
	if st.decision.Behavior == permission.Allow || st.decision.Behavior == permission.Ask {
		// Before anyone is asked: an approved write there would still vanish.
		if err := st.call.host.privateTmpWrite(st.call); err != nil {
			return err
		}
	}
	if st.decision.Behavior != permission.Ask {
		return nil
	}
	mode := st.call.Mode
	route := st.decision.Route
	queue := st.sess
	if mode == permission.ModeBubble || route == "parent" {
		anc := st.sess.Parent
		for anc != nil && anc.Mode() == permission.ModeBubble {
			anc = anc.Parent
		}
		if anc == nil {
			st.denyResolved("bubble mode has no parent session to ask; denied")
			return nil
		}
		queue = anc
		// The ancestor's mode as its own calls are decided in: bound by its ancestors too.
		switch clampToAncestors(anc, anc.Mode()) {
		case permission.ModeDontAsk:
			st.denyResolved(DontAskReason + " (the parent session is in dontAsk mode)")
			return nil
		case permission.ModeBypassPermissions:
			st.denyResolved("the parent session is in bypassPermissions mode, which never asks, and this call needs approval")
			return nil
		case permission.ModeAuto:
			route = "classifier"
		default:
			route = "parent"
		}
	}
	if mode == permission.ModeDontAsk {
		st.denyResolved(DontAskReason)
		return nil
	}
	if route == "classifier" {
		if done := p.autoResolve(ctx, st); done {
			return nil
		}
	}
	if p.approvals == nil || p.approvals.Queue == nil {
		return nil
	}
	return p.enqueue(ctx, st, queue)
}

// denyResolved turns the ask into a deny decided by this step, keeping why it asked.
func (st *state) denyResolved(reason string) {
	d := *st.decision
	d.Behavior = permission.Deny
	d.Reason = reason + ": " + d.Reason
	if reason == DontAskReason {
		d.Reason = DontAskReason
		d.Trace = append(append([]string(nil), d.Trace...), "asked: "+st.decision.Reason)
	}
	d.Step, d.Route = "resolve", ""
	st.decision = &d
}

// enqueue puts the ask before queue's owner and, when the call asked to wait, waits for the
// answer.
func (p *Pipeline) enqueue(ctx context.Context, st *state, queue *session.Session) error {
	c := st.call
	b, err := json.Marshal(c.Input)
	if err != nil {
		return errcode.New(errcode.Internal, fmt.Errorf("encode the input for the approval: %w", err))
	}
	red, _ := audit.Redact(b)
	a := approval.Approval{Approval: protocol.Approval{
		Session: st.sess.ID, Owner: queue.Owner.UID, Tool: c.Tool.Name(), Input: red,
		Reason: st.decision.Reason, SuggestedRules: suggestRules(c, st.facts),
	}, Tenant: queue.Owner.Tenant()}
	if !bytes.Equal(red, b) {
		a.AsAsked = b
	}
	// The call waits with its input decoded besides the request's bytes (a Write's content
	// once more): 21 Writes of 400 KB held 40 MiB of the heap while the queue counted 32.
	a.Held = len(b)
	if cl := c.Classification(); cl != nil {
		// The call waits with its command parsed: 30 000 words of a 60 KB command held
		// 1.9 MB that the queue's count of the input did not see. Counted twice its Size,
		// which leaves out what refers to it: over the count, never under.
		a.Held += 2 * cl.Size()
	}
	if queue != st.sess {
		a.ParentSession = queue.ID
	}
	if pvs, contents, err := p.preview(ctx, c, p.approvals.Queue.Room(a)); errcode.Of(err) == errcode.Stale {
		return err // a change to what the session no longer holds: nothing to ask
	} else if err != nil {
		// Without a preview the approved call runs as the tool, as any other call does.
		p.log.Info("no preview for approval", zap.String("tool", a.Tool), zap.String("code", string(errcode.Of(err))))
	} else {
		a.Preview, a.PreviewContents = &pvs[0], contents
		if len(pvs) > 1 {
			a.Previews = pvs
		}
	}
	a, err = p.approvals.Queue.Add(a, p.approvals.TTL(), st)
	if err != nil {
		// Not queued: it stays an ask and nothing runs.
		return errcode.New(errcode.TooManyCalls, fmt.Errorf("permission required: %s; and the approval queue is full: %w", st.decision.Reason, err))
	}
	d := *st.decision
	d.ApprovalID = a.ID
	st.decision = &d
	st.approval = &a
	if err := p.recorder.RecordCall(ctx, KindApprovalRequest, &CallRecord{Call: c, Request: st.req, Decision: st.decision, Approval: &a, Wait: WaitDurable}); err != nil {
		// An approval nobody can audit must not be answered into a run.
		_, _ = p.approvals.Queue.Resolve(a.ID, approval.Resolution{Answer: approval.Deny, Message: "the audit log cannot be written", By: "audit"}, nil)
		p.approvals.Queue.Take(a.ID)
		if st.deniedWithSession() {
			return nil // its deletion ended the record's context, not the audit log
		}
		return errcode.Audit(fmt.Errorf("the audit log cannot be written, so the call was not queued: %w", err))
	}
	if h := p.hooks.Load(); h != nil && h.HasPermissionRequest() {
		p.permissionRequestHooks(ctx, h, st, a)
	}
	if st.req.Wait > 0 {
		return p.awaitAnswer(ctx, st, a, st.req.Wait)
	}
	return nil
}

// awaitAnswer waits up to d for the approval and applies its answer: allow runs the call as
// decided (the same state, no new decision), deny denies with the message, no answer leaves
// the ask with its approval_id.
func (p *Pipeline) awaitAnswer(ctx context.Context, st *state, a approval.Approval, d time.Duration) error {
	id := a.ID
	d = waitBound(a, d)
	res, err := p.approvals.Queue.Wait(ctx, id, d)
	if st.deniedWithSession() {
		return nil
	}
	if err != nil || res == nil {
		return nil
	}
	if _, _, ok := p.approvals.Queue.Take(id); !ok {
		// Someone else (a concurrent resume) took it: it runs there, not here.
		return errcode.Msg(errcode.Conflict, fmt.Sprintf("approval %s was already taken by another request", id))
	}
	p.applyAnswer(ctx, st, res)
	return nil
}

// deniedWithSession denies the call when its session was deleted, and reports whether it was:
// deleting a session ends its calls first (their contexts), then drops its approvals, so an
// ask is no longer pending anywhere, whatever its wait or its record saw.
func (st *state) deniedWithSession() bool {
	if !st.sess.Closed() {
		return false
	}
	st.applyResolution(&approval.Resolution{Answer: approval.Deny, By: "session_deleted", Message: "the session was deleted; denied"})
	return true
}

// applyAnswer makes the answer the call's decision. An allow answers the question asked, not
// what changed since: the call's paths are looked up again and it is decided again under the
// session's rules, mode and admin policy as they are now. A path that leads elsewhere, a deny
// then (a rule or policy added, the mode narrowed to plan) or an ask for another reason wins
// over the answer; an ask for the same reason leaves the allow, which answered it.
func (p *Pipeline) applyAnswer(ctx context.Context, st *state, res *approval.Resolution) {
	st.applyResolution(res)
	if st.decision.Behavior != permission.Allow {
		return
	}
	deny := func(why string) {
		d := *st.decision
		d.Behavior, d.Step, d.Reason = permission.Deny, "recheck", "approved by "+res.By+", but denied since: "+why
		st.decision = &d
	}
	if cwd := st.sess.Cwd(); cwd != st.cwd {
		// A call runs in the session's working directory, and this one was asked, shown and
		// decided in another: its relative paths would now name other files.
		deny(fmt.Sprintf("the session's working directory changed from %s to %s since it was asked; call it again", st.cwd, cwd))
		return
	}
	mode := st.req.Mode
	if err := modeBound(st.sess, mode); err != nil {
		deny(err.Error())
		return
	}
	if mode == "" {
		mode = st.sess.Mode()
	}
	st.call.Mode = clampToAncestors(st.sess, mode)
	// What it names is looked up again: a link made or moved since it was asked would have it
	// act on files the person never saw it reach, and once approved a Bash call's ask-rule
	// paths are no longer held by the kernel.
	fresh, err := p.gatherFacts(ctx, st.call)
	if err != nil {
		deny("the paths it names could not be looked up again: " + err.Error())
		return
	}
	if why := pathsMoved(st.facts.Paths, fresh.Paths); why != "" {
		deny(why + "; call it again to have it asked anew")
		return
	}
	d, err := p.decider.Decide(ctx, &DecisionInput{Call: st.call, ToolFacts: fresh, ReadOnly: st.readOnly, Hook: st.hook,
		Unconfined: st.call.unconfined})
	switch {
	case err != nil:
		deny("the policy could not decide it again: " + err.Error())
	case d.Behavior == permission.Deny:
		deny(d.Reason)
	case d.Behavior == permission.Ask && st.policy != nil && (d.Step != st.policy.Step || d.Rule != st.policy.Rule):
		// The person answered one question; this is another (a rule added since, a path that
		// now makes it a critical rm).
		deny("it now asks for another reason than the one approved (" + d.Reason + "); call it again to have it asked anew")
	}
}

// pathsMoved says how the paths a call names lead elsewhere now than in was, the facts it was
// asked with, or "" when each leads where it did.
func pathsMoved(was, now []permission.PathFact) string {
	if len(was) != len(now) {
		return fmt.Sprintf("the paths it names changed since it was asked (%d then, %d now)", len(was), len(now))
	}
	for i, w := range was {
		n := now[i]
		if w.Requested != n.Requested || w.Access != n.Access {
			return fmt.Sprintf("the paths it names changed since it was asked (%s, now %s)", w.Requested, n.Requested)
		}
		if w.Resolved != n.Resolved || w.Special != n.Special || w.OwnResult != n.OwnResult || !slices.Equal(w.Aliases, n.Aliases) {
			return fmt.Sprintf("%s leads to %s now, not to %s as when it was asked", w.Requested, n.Resolved, w.Resolved)
		}
	}
	return ""
}

// applyResolution makes the answer the call's decision.
func (st *state) applyResolution(res *approval.Resolution) {
	d := *st.decision
	d.Step, d.Route, d.Source = "approval", "", res.By
	if res.Answer == approval.Allow {
		d.Behavior = permission.Allow
		st.call.Approved = true
		d.Reason = "approved by " + res.By
		if res.Rule != "" {
			rules := res.Rules
			if len(rules) == 0 {
				rules = []string{res.Rule}
			}
			d.Reason += "; remembered " + strings.Join(rules, ", ") + " in " + res.Remember
		}
	} else {
		d.Behavior = permission.Deny
		d.Reason = "denied by " + res.By
		if res.Message != "" {
			d.Reason += ": " + res.Message
		}
	}
	st.decision = &d
	st.resolution = res
}

// Resume waits up to wait for the answer of a pending approval of sess and, once it is
// answered, finishes its call: an allow runs exactly what was decided and previewed, a deny
// returns the message. Unanswered, the outcome is the ask again. An approval of another
// session is not found.
func (p *Pipeline) Resume(ctx context.Context, sess *session.Session, caller session.Caller, id string, wait time.Duration, progress Progress) (*Outcome, error) {
	if p.approvals == nil || p.approvals.Queue == nil {
		return nil, errcode.Msg(errcode.NotFound, "approval not found")
	}
	a, _, ok := p.approvals.Queue.Get(id)
	if !ok || a.Session != sess.ID {
		return nil, errcode.New(errcode.NotFound, fmt.Errorf("approval %q not found in session %s", id, sess.ID))
	}
	res, err := p.approvals.Queue.Wait(ctx, id, waitBound(a, wait))
	if err != nil {
		return nil, errcode.New(errcode.NotFound, err)
	}
	if res == nil {
		d := permission.Decision{Behavior: permission.Ask, Reason: a.Reason, Step: "approval", Route: "user", ApprovalID: id}
		return &Outcome{Tool: a.Tool, Decision: &d, Err: errcode.New(errcode.AskRequired, fmt.Errorf("permission required: %s (approval %s is still pending)", a.Reason, id)),
			Result: &Result{IsError: true, Content: []Block{{Type: "text", Text: "permission required: " + a.Reason}}}}, nil
	}
	// Its id is claimed before the approval is taken: a resume refused for an id in use leaves
	// the answered approval to resume once that call is over.
	pl, _ := p.approvals.Queue.Payload(id)
	st, _ := pl.(*state)
	if st == nil {
		return nil, errcode.Msg(errcode.Internal, "approval holds no call")
	}
	if out := p.claimID(st); out != nil {
		return out, nil
	}
	if _, res, ok = p.approvals.Queue.Take(id); !ok {
		st.releaseID()
		st.releaseID = nil
		return nil, errcode.New(errcode.NotFound, fmt.Errorf("approval %q was already taken", id))
	}
	st.err, st.result, st.ran, st.progress = nil, nil, false, progress
	st.start = time.Now()
	p.applyAnswer(ctx, st, res)
	_ = caller // the call runs as the session's owner, whoever resumes it (only its owner or root may)
	return p.runFrom(ctx, st, "denied"), nil
}

// runFrom runs the run stages from the named one on (a resumed call), then finish.
func (p *Pipeline) runFrom(ctx context.Context, st *state, from string) *Outcome {
	ctx, cancel := sessionContext(ctx, st.sess)
	defer cancel()
	if st.sess != nil && st.sess.Closed() {
		st.err = errSessionClosed(st.sess)
		return p.finish(ctx, st)
	}
	started := false
	for _, s := range runStages {
		if s.name == from {
			started = true
		}
		if !started {
			continue
		}
		if err := s.run(ctx, p, st); err != nil {
			st.err = err
			break
		}
	}
	return p.finish(ctx, st)
}

// prefixReasons are the classifier's reasons for a command that is not read-only whose prefix
// rule allows that program's own work (npm test, git commit, sed -i): any other (sed's e
// command, git -c of a key that runs a program, an interpreter) runs what its words say.
var prefixReasons = map[string]bool{"unknown_command": true, "path_command": true, "git_write_subcommand": true,
	"git_index_write": true, "sed_in_place": true, "find_delete": true, "write_redirect": true, "write_option": true,
	"write_operand": true, "sort_output": true, "tail_follow": true, "nohup_output": true, "glob_argument": true}

// suggestRules are the rules that would allow this call next time, most specific first: a
// Bash prefix rule per command that is not read-only (the classifier's allow prefix, up to
// its first flag or path), the file's own Edit rule, the path's own Read rule, the domain of
// a fetch; the bare tool only for a call that names neither path nor domain, since it would
// allow the tool on every path.
func suggestRules(c *Call, tf permission.ToolFacts) []string {
	name := c.Tool.Name()
	var out []string
	add := func(r string) {
		for _, x := range out {
			if x == r {
				return
			}
		}
		out = append(out, r)
	}
	switch {
	case name == "Bash":
		cl := c.Classification()
		if cl == nil || cl.ParseError != nil {
			return []string{}
		}
		for i, sub := range cl.Subcommands {
			// A Bash rule cannot say a literal *, nor where a word with a blank or a
			// parenthesis in it ends: the command word `*` made Bash(*:*), every command, and
			// `'my tool' x` made Bash(my tool x), which `my tool x` matches too. A nested
			// script's commands are judged by the rule of the command that runs them.
			unsayable := func(w string) bool { return strings.ContainsAny(w, "* \t\n()") }
			if sub.ReadOnly || sub.Nested || len(sub.Prefix) == 0 || unsayable(sub.Prefix[0]) || strings.HasPrefix(sub.Prefix[0], "-") {
				continue
			}
			// tar --to-command=…, git -c core.pager=…; not the tails of a program no table
			// describes (go test ./...), which only may be commands.
			runsCommands := i+1 < len(cl.Subcommands) && cl.Subcommands[i+1].Nested && !cl.Subcommands[i+1].Tail
			if sub.ExactOnly || sub.Opaque || runsCommands || !prefixReasons[sub.Reason] || classifier.RunsCommandLine(sub.Prefix) {
				// A program that runs what its words say (env, bash -c, python3 -c, npx,
				// npm exec, an option naming a program) is allowed by its prefix for
				// everything: only this very line may be remembered.
				if slices.ContainsFunc(sub.Prefix, unsayable) {
					continue // as an exact rule it would match more than this command
				}
				add("Bash(" + strings.Join(sub.Prefix, " ") + ")")
				continue
			}
			words := []string{sub.Prefix[0]}
			for _, w := range sub.Prefix[1:] {
				if len(words) == 3 || strings.HasPrefix(w, "-") || strings.ContainsAny(w, "/.=*?$") || unsayable(w) {
					break
				}
				words = append(words, w)
			}
			if len(words) == len(sub.Prefix) {
				add("Bash(" + strings.Join(words, " ") + ")")
			} else {
				add("Bash(" + strings.Join(words, " ") + ":*)")
			}
		}
	case tf.Domain != "":
		add(name + "(domain:" + tf.Domain + ")")
	default:
		reads := false
		for _, pf := range tf.Paths {
			// //p is the filesystem root in rule syntax (COMPAT 1); /p would be the rule
			// file's directory. Its name quoted: a remembered rule allows the path approved,
			// and a file named `*` must not make it allow the whole directory.
			switch {
			case pf.Access == permission.Write:
				add("Edit(/" + permission.LiteralPath(pf.Requested) + ")")
			case pf.Access == permission.Read && !pf.Alternative:
				reads = true
			}
		}
		if len(out) == 0 {
			// A read's own rule only when the call writes nothing: an Edit rule allows
			// reading its file too.
			for _, pf := range tf.Paths {
				if pf.Access == permission.Read && !pf.Alternative {
					add("Read(/" + permission.LiteralPath(pf.Requested) + ")")
				}
			}
		}
		if len(out) == 0 && !reads {
			add(name)
		}
	}
	if out == nil {
		out = []string{}
	}
	return out
}

// preview computes what an approved Write, Edit or MultiEdit writes, on the file as the
// session owner reads it now, or what an approved sed -i writes (sedPreview): each file, in
// the order approving writes them, and its content. The session must have read an existing
// file as the tool requires; otherwise there is no preview and the tool's own check applies.
//
// room bounds the preview (previewBytes): what its owner's approval queue can still take of
// it (approval.Queue.Room), and at most maxPreviewFileBytes of file. Past it there is no
// preview and nothing is read: a 60 MB file's replace_all preview took 1 GB and 7 s of the
// daemon's own memory and CPU, only for the queue to refuse it.
func (p *Pipeline) preview(ctx context.Context, c *Call, room int) ([]protocol.Preview, [][]byte, error) {
	name := c.Tool.Name()
	if name == "Bash" {
		pvs, contents, err := p.sedPreview(ctx, c)
		if err == nil && previewBytes(pvs, contents) > room {
			return nil, nil, errNoPreview
		}
		return pvs, contents, err
	}
	if name != "Write" && name != "Edit" && name != "MultiEdit" {
		return nil, nil, errNoPreview
	}
	limit := min(room/2, maxPreviewFileBytes)
	if limit <= 0 || name == "Write" && len(c.Input.String("content")) > limit {
		return nil, nil, errNoPreview
	}
	pth := expandPath(c, c.Input.String("file_path"))
	cur, err := p.host.ReadFileAs(ctx, c.Session, pth, int64(limit))
	exists := err == nil
	if errcode.Of(err) == errcode.TooLarge {
		return nil, nil, errNoPreview
	}
	if err != nil && errcode.Of(err) != errcode.ErrnoENOENT {
		return nil, nil, err
	}
	if exists {
		rec, ok := c.Session.Reads.Lookup(pth)
		if !ok || rec.Partial && name == "Write" {
			return nil, nil, errNoPreview
		}
		if rec.SHA256 != "" && rec.SHA256 != sha256hex(cur) {
			// The change was made to what the session read; approved over what is there now,
			// it would undo whatever changed the file since (the user's own edit).
			return nil, nil, errcode.Msg(errcode.Stale, fmt.Sprintf("%s has changed on disk since this session read it (by the user, a formatter or another process); Read it again, then retry the change", pth))
		}
	}
	var next string
	switch name {
	case "Write":
		next = c.Input.String("content")
	default:
		// Each edit reads the whole content as the edits before it left it, which they may
		// have grown: bounded as it goes, not by the file's size.
		r, err := worker.ApplyEditsBounded(pth, string(cur), editsOf(c), int64(limit), maxPreviewEditWork)
		if errcode.Of(err) == errcode.TooLarge {
			return nil, nil, errNoPreview
		}
		if err != nil {
			return nil, nil, err
		}
		next = r.Content
	}
	if c.decidedWrite == "" {
		return nil, nil, errNoPreview // nowhere decided for the approved write to go
	}
	// The diff's size is known before it is made: past the room, it is not made at all.
	diff, fits := unifiedDiffWithin(pth, string(cur), next, exists, room-len(next))
	if !fits {
		return nil, nil, errNoPreview
	}
	return []protocol.Preview{previewWith(pth, c.decidedWrite, cur, exists, []byte(next), diff)}, [][]byte{[]byte(next)}, nil
}

const (
	// maxPreviewFileBytes is the largest file an approval's preview reads and the largest
	// content it holds; a larger edit is approved without one and runs as the tool.
	maxPreviewFileBytes = 4 << 20
	// maxPreviewEditWork bounds the bytes a preview's edits rewrite (the file once per edit).
	maxPreviewEditWork = 64 << 20
)

// previewBytes is what previews hold in an approval: their diffs and contents.
func previewBytes(pvs []protocol.Preview, contents [][]byte) int {
	n := 0
	for _, pv := range pvs {
		n += len(pv.Diff)
	}
	for _, c := range contents {
		n += len(c)
	}
	return n
}

// newPreview is the preview of writing next over path, which the decision found leads to
// resolved, and whose content is cur (exists) or which is absent.
func newPreview(path, resolved string, cur []byte, exists bool, next []byte) protocol.Preview {
	return previewWith(path, resolved, cur, exists, next, UnifiedDiff(path, string(cur), string(next), exists))
}

// previewWith is newPreview with its diff made already.
func previewWith(path, resolved string, cur []byte, exists bool, next []byte, diff string) protocol.Preview {
	pv := protocol.Preview{Path: path, Resolved: resolved, Exists: exists, NewSHA256: sha256hex(next), Diff: diff}
	if exists {
		pv.SHA256 = sha256hex(cur)
	}
	return pv
}

var errNoPreview = errors.New("no preview for this call")

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// editsOf is an Edit or MultiEdit call's replacements.
func editsOf(c *Call) []worker.Edit {
	if c.Tool.Name() == "Edit" {
		return []worker.Edit{{OldString: c.Input.String("old_string"), NewString: c.Input.String("new_string"), ReplaceAll: c.Input.Bool("replace_all")}}
	}
	raw, _ := c.Input["edits"].([]any)
	edits := make([]worker.Edit, 0, len(raw))
	for _, r := range raw {
		m, _ := r.(map[string]any)
		in := Input(m)
		edits = append(edits, worker.Edit{OldString: in.String("old_string"), NewString: in.String("new_string"), ReplaceAll: in.Bool("replace_all")})
	}
	return edits
}

// applyPreviews writes exactly the approved contents, and only over the files the previews
// were made on (same digest; still absent for a new file): what was approved is what runs.
// Every file is checked before the first is written, so a file changed since leaves all of
// them as they were (a change in the moment between the check and the writes is still caught
// by each write's own check).
func (h *Host) applyPreviews(ctx context.Context, c *Call, pvs []protocol.Preview, contents [][]byte) (*Result, error) {
	if len(pvs) == 0 || len(pvs) != len(contents) {
		return nil, errcode.Msg(errcode.Internal, "the approval's previews and contents do not match")
	}
	stale := func(path string, err error) error {
		c.Session.Reads.Forget(path)
		return errcode.New(errcode.Stale, fmt.Errorf("%s changed since the approved preview was made, so the approved change was not applied; read it again and retry: %w", path, err))
	}
	// One file: its write's own check is the whole check.
	for _, pv := range pvs[:checkFirst(len(pvs))] {
		cur, err := h.ReadFileAs(ctx, c.Session, pv.Path, worker.MaxEditFileBytes)
		switch {
		case err != nil && errcode.Of(err) == errcode.ErrnoENOENT && !pv.Exists:
		case err != nil && errcode.Of(err) == errcode.ErrnoENOENT:
			return nil, stale(pv.Path, err)
		case err != nil:
			return nil, err
		case !pv.Exists:
			return nil, stale(pv.Path, errors.New("it exists now"))
		case sha256hex(cur) != pv.SHA256:
			return nil, stale(pv.Path, errors.New("its content differs"))
		}
	}
	var lines []string
	res := &Result{Data: map[string]any{"approved_preview": true}}
	for i, pv := range pvs {
		var expect *worker.Expect
		if pv.Exists {
			expect = &worker.Expect{SHA256: pv.SHA256}
		}
		if pv.Resolved == "" {
			return nil, errcode.Msg(errcode.Internal, "the approval's preview of "+pv.Path+" has no decided place to write")
		}
		w, err := h.writer(ctx, c.Session, pv.Path, pv.Resolved)
		if err != nil {
			return nil, err
		}
		// Where the decision found the path leads, or nowhere: a link swapped in on the way
		// while the approval waited would take the write elsewhere (a protected path).
		r, err := w.WriteDecided(ctx, worker.WriteArgs{Path: pv.Path, Expect: expect, Decided: pv.Resolved}, contents[i])
		if err != nil {
			if errcode.Of(err) == errcode.Stale || errcode.Of(err) == errcode.ErrnoEEXIST {
				return nil, stale(pv.Path, err)
			}
			return nil, err
		}
		if !pv.Exists && r != nil && !r.Created {
			return nil, errcode.Msg(errcode.Stale, pv.Path+" appeared since the approved preview was made")
		}
		recordWrite(c.Session, pv.Path, r, false)
		lines = append(lines, fmt.Sprintf("%s (%d lines)", pv.Path, r.Lines))
		if i == len(pvs)-1 {
			res.Data["filePath"], res.Data["lines"], res.Data["bytes"], res.Data["sha256"] = pv.Path, r.Lines, r.Size, r.SHA256
		}
	}
	if len(pvs) == 1 {
		res.Content = Text(fmt.Sprintf("The file %s has been updated with the approved change (%d lines).", pvs[0].Path, res.Data["lines"])).Content
	} else {
		res.Content = Text("The approved change was applied to " + strings.Join(lines, ", ") + ".").Content
		res.Data["files"] = len(pvs)
	}
	return res, nil
}

// checkFirst is how many of n previews applyPreviews checks before writing any: all of them
// when there are several, none for one.
func checkFirst(n int) int {
	if n == 1 {
		return 0
	}
	return n
}

// modeBound refuses a call's own mode that is wider than its session's: a call's mode may
// only narrow (bubble counts as the parent's).
func modeBound(sess *session.Session, m permission.Mode) error {
	if m == "" {
		return nil
	}
	if m == permission.ModeBubble && sess.Parent == nil {
		return errcode.Msg(errcode.Validation, "a call's mode bubble needs a session with a parent")
	}
	eff := m
	if m == permission.ModeBubble {
		eff = sess.Parent.EffectiveMode()
	}
	base := sess.EffectiveMode()
	want, ok1 := permission.Rank(eff)
	have, ok2 := permission.Rank(base)
	if !ok1 || !ok2 || want > have {
		return errcode.Msg(errcode.PermissionDenied, fmt.Sprintf("a call's mode may only narrow its session's: the session is in %s, the call asked for %s", base, m))
	}
	return nil
}

// clampToAncestors keeps a sub-agent's calls within the mode of every session above it (and a
// call's default within its own session's dontAsk), when
// one of them narrowed after it was made (its own widening is refused when it is asked for).
// Every ancestor, not only the parent: a parent keeps the mode it was made with when its own
// parent narrows, so a grandchild bound by its parent alone wrote in acceptEdits under a
// session put in plan.
//
// A bubble call keeps its mode (its asks go up, stepResolve) unless an ancestor is in plan:
// it is then decided in plan, as that ancestor's own calls are, so its writes are denied
// rather than put to a person.
func clampToAncestors(sess *session.Session, m permission.Mode) permission.Mode {
	if m == permission.ModeBubble {
		for anc := sess.Parent; anc != nil; anc = anc.Parent {
			if anc.EffectiveMode() == permission.ModePlan {
				return permission.ModePlan
			}
		}
		return m
	}
	for anc := sess.Parent; anc != nil; anc = anc.Parent {
		am := anc.EffectiveMode()
		want, ok1 := permission.Rank(m)
		have, ok2 := permission.Rank(am)
		if ok1 && ok2 && want > have {
			m = am
		}
	}
	// default ranks with dontAsk (it allows no more), but it asks: a call that asks for it in
	// a session that never asks, or under one, is decided in dontAsk, its asks denied, so no
	// approval is queued for what the session's owner said never to ask about.
	for s := sess; s != nil && m == permission.ModeDefault; s = s.Parent {
		if s.EffectiveMode() == permission.ModeDontAsk {
			m = permission.ModeDontAsk
		}
	}
	return m
}

// expirySlack covers the expiry sweep's period: a call that waits as long as its approval
// lives sees the expiry's deny instead of a bare timeout.
const expirySlack = 2 * time.Second

// waitBound bounds a wait by the approval's life (approvals.timeout_sec).
func waitBound(a approval.Approval, d time.Duration) time.Duration {
	if limit := time.Until(a.Expires) + expirySlack; d > limit {
		return limit
	}
	return d
}
