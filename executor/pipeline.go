package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/sandboxd/sandboxd/approval"
	"github.com/sandboxd/sandboxd/classifier"
	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/protocol"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/session"
)

// Request is one tool call as a client sent it.
type Request struct {
	Tool      string
	Input     json.RawMessage
	ToolUseID string
	// Mode, when set, is the mode this one call is decided in; it may only narrow the
	// session's.
	Mode permission.Mode
	// Wait is how long an ask waits for its approval's answer (0: not at all).
	Wait time.Duration
	// Room, when set, is the response's room left in bytes: an image that would not fit is
	// left out before it is read.
	Room func() int64
	// Shell is the shell a Bash command is classified for (classifier.Options.Shell): set
	// only when the caller runs the command itself (decide); "" is bash.
	Shell string
	// Unconfined: the caller runs the call itself, outside any sandbox (decide only; a Shell
	// says so too).
	Unconfined bool
	// Cwd, when set, must be the session's cwd (protocol.CallRequest.Cwd).
	Cwd string
}

// Outcome is what the pipeline made of one request.
type Outcome struct {
	ToolUseID string
	Tool      string
	// Decision is nil when the call failed before the permission step.
	Decision *permission.Decision
	// Result is the tool's result (or the error result shown to the agent).
	Result *Result
	// Err is set when the call did not run to a result of its own: the code is
	// telemetry-safe, the message is for the caller only.
	Err *errcode.Error
	// Suggestions are close tool names for an unknown tool.
	Suggestions []string
	// Ran reports whether the tool executed (step 10 started).
	Ran      bool
	Duration time.Duration
}

// Decider is the permission step's policy evaluation: facts in, decision out. Any error
// denies (the pipeline turns it into a deny with code policy_eval_error).
type Decider interface {
	Decide(ctx context.Context, in *DecisionInput) (permission.Decision, error)
}

// DecisionInput is what Go gathered for the policy about one call.
type DecisionInput struct {
	Call      *Call
	ToolFacts permission.ToolFacts
	ReadOnly  bool
	Hook      *HookVerdict
	// Unconfined says the caller runs the call itself, outside any sandbox: a decide that
	// names the shell it will run a Bash command in (an agent's hook). Nothing then holds
	// what the decision did not see.
	Unconfined bool
}

// Recorder writes the audit trail of calls. Record must not return before the record is
// durable: the pipeline relies on it to audit before any effect.
type Recorder interface {
	RecordCall(ctx context.Context, kind string, c *CallRecord) error
}

// CallRecord is the pipeline's view of one call for the audit log.
type CallRecord struct {
	Call *Call
	// Session and Caller name whose call it is when Call is nil (refused before the tool was
	// found): such a record is still its caller's, on their budget and in their queries.
	Session  *session.Session
	Caller   session.Caller
	Request  *Request
	Decision *permission.Decision
	// Policy is the policy's own decision, with its Basis, before any route (approval,
	// classifier, parent) answered it: what a replay re-decides. Set on the call's last record.
	Policy  *permission.Decision
	Outcome *Outcome
	// Approval and Resolution are set on approval.request and approval.resolve records.
	Approval   *approval.Approval
	Resolution *approval.Resolution
	// Wait is how far the record must have got before RecordCall returns.
	Wait Wait
}

// Wait is how far a record must have got before the pipeline goes on.
type Wait int

// Waits, strongest first. A call that may change anything waits for its start record to be
// durable before it runs, and for its end record to be durable before its result leaves. A
// read-only call has no effect but what it discloses: its start is queued and its end must be
// in the log file — where a crash of the daemon cannot lose it — before the result leaves; the
// fsync follows at once beside the writer.
const (
	WaitDurable Wait = iota
	WaitWritten
	WaitQueued
)

// Audit record kinds the pipeline writes.
const (
	KindDecide = "call.decide"
	KindStart  = "call.start"
	KindEnd    = "call.end"
)

// Pipeline runs calls through the 14 steps of DESIGN.md.
type Pipeline struct {
	log      *zap.Logger
	registry *Registry
	host     *Host
	decider  Decider
	recorder Recorder
	hooks    atomic.Pointer[Hooks]
	// approvals, when set, is where asks wait for a person (SetApprovals).
	approvals *Approvals
	// auto, when set, gives auto mode's external classifier (SetAuto).
	auto func() config.AutoClassifier
	// stageDone, when set (ObserveStages, before the first call), is told each step's time.
	stageDone func(stage string, d time.Duration)
}

// NewPipeline wires a pipeline.
func NewPipeline(log *zap.Logger, reg *Registry, host *Host, d Decider, r Recorder, hooks *Hooks) *Pipeline {
	p := &Pipeline{log: log.Named("executor"), registry: reg, host: host, decider: d, recorder: r}
	p.hooks.Store(hooks)
	return p
}

// ObserveStages has f told how long each step of every call took (the daemon's metrics). Call
// it before the first call.
func (p *Pipeline) ObserveStages(f func(stage string, d time.Duration)) { p.stageDone = f }

// SetHooks swaps in reloaded hooks (nil: none); calls already past a hook step keep theirs.
func (p *Pipeline) SetHooks(h *Hooks) { p.hooks.Store(h) }

// Registry is the pipeline's tool registry.
func (p *Pipeline) Registry() *Registry { return p.registry }

// state is one call's progress through the steps.
type state struct {
	req      *Request
	sess     *session.Session
	caller   session.Caller
	call     *Call
	decision *permission.Decision
	// policy is the policy's decision as it came from the decider (stepPermission).
	policy *permission.Decision
	hook   *HookVerdict
	// facts are what the tool reported for the policy (paths, classification, domain).
	facts permission.ToolFacts
	// cwd is the session's working directory the call was decided in: its relative paths
	// and facts mean that directory, and the call runs in the session's.
	cwd string
	// approval is the pending approval this call created; resolution its answer.
	approval   *approval.Approval
	resolution *approval.Resolution
	result     *Result
	err        error
	ran        bool
	readOnly   bool
	progress   Progress
	// deferContext leaves the context change for the batch to apply in order.
	deferContext bool
	decideOnly   bool
	start        time.Time
	// releaseID frees the call's tool_use_id in its session (stepExecute claims it).
	releaseID func()
}

// stage is one named step of the pipeline.
type stage struct {
	name string
	run  func(ctx context.Context, p *Pipeline, st *state) error
}

// The steps, in order. decideStages are the ones `decide` runs; runStages follow for a call.
var (
	decideStages = []stage{
		{"lookup", stepLookup},
		{"abort_check", stepAbortCheck},
		{"schema", stepSchema},
		{"validate", stepValidate},
		{"classify_start", stepClassifyStart},
		{"backfill", stepBackfill},
		{"pre_hooks", stepPreHooks},
		{"permission", stepPermission},
	}
	runStages = []stage{
		{"resolve", stepResolve},
		{"denied", stepDenied},
		{"execute", stepExecute},
		{"budget", stepBudget},
		{"post_hooks", stepPostHooks},
	}
	// finish (error classification, the audit record, then the context change it records)
	// always runs: steps 13 and 14.
)

// Run takes one call through every step.
func (p *Pipeline) Run(ctx context.Context, sess *session.Session, caller session.Caller, req *Request, progress Progress) *Outcome {
	return p.run(ctx, &state{req: req, sess: sess, caller: caller, progress: progress})
}

// Decide takes one call through the decision steps only: nothing runs.
func (p *Pipeline) Decide(ctx context.Context, sess *session.Session, caller session.Caller, req *Request) *Outcome {
	return p.run(ctx, &state{req: req, sess: sess, caller: caller, decideOnly: true})
}

func (p *Pipeline) run(ctx context.Context, st *state) (out *Outcome) {
	if !st.decideOnly {
		if out := p.claimID(st); out != nil {
			return out
		}
	}
	st.start = time.Now()
	ctx, cancel := sessionContext(ctx, st.sess)
	defer cancel()
	defer func() {
		// A panic in a tool or a stage is a bug; the call fails closed and the daemon goes on.
		if r := recover(); r != nil {
			p.log.Error("panic in pipeline", zap.Any("panic", r), zap.ByteString("stack", debug.Stack()))
			st.err = errcode.Msg(errcode.Internal, "internal error while handling the call")
			out = p.finish(ctx, st)
		}
	}()
	stages := decideStages
	if !st.decideOnly {
		stages = append(append([]stage(nil), decideStages...), runStages...)
	}
	last := st.start
	for _, s := range stages {
		err := s.run(ctx, p, st)
		if p.stageDone != nil {
			now := time.Now()
			p.stageDone(s.name, now.Sub(last))
			last = now
		}
		if err != nil {
			st.err = err
			break
		}
	}
	out = p.finish(ctx, st)
	if p.stageDone != nil {
		p.stageDone("finish", time.Since(last))
	}
	return out
}

// stepLookup finds the tool (aliases too). Step 1.
func stepLookup(_ context.Context, p *Pipeline, st *state) error {
	t, ok := p.registry.Lookup(st.req.Tool)
	if !ok || !t.IsEnabled() {
		if st.decideOnly {
			// The input's own faults first: a rule that names the tool would otherwise be
			// matched against a path the agent never takes.
			tool, in, isFile, err := agentFileTool(*st.req)
			if err != nil {
				return err
			}
			if err := decideForeign(st); err != nil {
				return err
			}
			if isFile {
				// The agent's NotebookEdit writes its notebook_path itself (NotebookRead and LS
				// read theirs): past the rules that name the tool, it is decided as the Write
				// or Read it amounts to (the daemon's deny paths, protected paths, Edit and
				// Read rules, the mode), which is what it is recorded as.
				r := *st.req
				r.Tool, r.Input = tool, in
				st.req = &r
				t, ok = p.registry.Lookup(tool)
			}
		}
		if !ok || !t.IsEnabled() {
			return &UnknownToolError{Name: st.req.Tool, Suggestions: p.registry.Suggest(st.req.Tool)}
		}
	}
	// Read before the mode and the rules the decision uses: a narrowing after it stops the call.
	narrowings := st.sess.Narrowings()
	mode := st.req.Mode
	if err := modeBound(st.sess, mode); err != nil {
		return err
	}
	if mode == "" {
		mode = st.sess.Mode()
	}
	mode = clampToAncestors(st.sess, mode)
	st.cwd = st.sess.Cwd()
	st.call = &Call{
		Tool: t, ToolUseID: st.req.ToolUseID, Original: st.req.Input,
		Session: st.sess, Caller: st.caller, Mode: mode, host: p.host, room: st.req.Room,
		narrowings: narrowings,
		unconfined: st.decideOnly && (st.req.Shell != "" || st.req.Unconfined),
	}
	return nil
}

// agentFileTool is a call of a file tool the agent runs itself as the sandboxd tool it amounts
// to, for a decision: NotebookEdit as the Write of its notebook_path (the cell's new source as
// the content), NotebookRead as its Read, LS as the Glob of everything below its path (an
// agent's LS lists a tree). isFile is false for
// another tool. The agent reads its keys as written: an input whose path is missing, not a
// string, or given again in another case is an error, never a tool left to --unknown-tool.
func agentFileTool(req Request) (tool string, in json.RawMessage, isFile bool, err error) {
	var key string
	switch req.Tool {
	case "NotebookEdit":
		tool, key = "Write", "notebook_path"
	case "NotebookRead":
		tool, key = "Read", "notebook_path"
	case "LS":
		tool, key = "Glob", "path" // it lists the tree below its path
	default:
		return "", nil, false, nil
	}
	fail := func(format string, a ...any) (string, json.RawMessage, bool, error) {
		return "", nil, true, errcode.New(errcode.SchemaInvalid, fmt.Errorf("%s: %s", req.Tool, fmt.Sprintf(format, a...)))
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(req.Input, &top) != nil || top == nil {
		return fail("the input is not a JSON object")
	}
	for k := range top {
		if k != key && strings.EqualFold(k, key) {
			return fail("%q is %s in another case; give it once, as %s", k, key, key)
		}
	}
	var path string
	if raw, ok := top[key]; !ok || json.Unmarshal(raw, &path) != nil || !filepath.IsAbs(path) {
		return fail("%s must be an absolute path (a string starting with /)", key)
	}
	as := map[string]string{"file_path": path}
	if tool == "Glob" {
		as = map[string]string{"pattern": "**", "path": path}
	}
	if req.Tool == "NotebookEdit" {
		var src string
		if raw, ok := top["new_source"]; ok && json.Unmarshal(raw, &src) != nil {
			return fail("new_source must be a string")
		}
		as["content"] = src
	}
	b, err := json.Marshal(as)
	if err != nil {
		return fail("%v", err)
	}
	return tool, b, true, nil
}

// decideForeign holds the session's deny and ask rules on a call of a tool sandboxd does not
// run, decided for an agent that runs it itself (a hook): a rule that names it (Task,
// mcp__srv, *, Edit(...) for NotebookEdit) denies or asks as it would in the agent, in every
// mode; an ask is a deny in dontAsk. Nothing else is said of such a call (unknown tool).
func decideForeign(st *state) error {
	var in map[string]any
	dec := json.NewDecoder(bytes.NewReader(st.req.Input))
	dec.UseNumber()
	_ = dec.Decode(&in) // an input that is not an object has no parameters or path to match
	r, ok := st.sess.RuleSet().ForeignHit(st.req.Tool, in)
	if !ok {
		return nil
	}
	d := permission.Decision{Behavior: r.Behavior, Rule: r.String(), Source: string(r.Source), Step: "rules",
		Reason: fmt.Sprintf("%s rule %s (%s)", r.Behavior, r, r.Source)}
	mode := st.req.Mode
	if mode == "" {
		mode = st.sess.Mode()
	}
	if d.Behavior == permission.Ask && clampToAncestors(st.sess, mode) == permission.ModeDontAsk {
		d.Behavior, d.Reason = permission.Deny, "dontAsk mode: "+d.Reason+" would require approval"
	}
	st.decision = &d
	if d.Behavior == permission.Ask {
		return errcode.New(errcode.AskRequired, fmt.Errorf("permission required: %s", d.Reason))
	}
	return errcode.New(errcode.PermissionDenied, fmt.Errorf("permission denied: %s", d.Reason))
}

// stepAbortCheck stops a call whose client already gave up, or whose session is gone (a
// batch's later calls, a request that found the session just before it was deleted). Step 2.
func stepAbortCheck(ctx context.Context, _ *Pipeline, st *state) error {
	if st.sess != nil && st.sess.Closed() {
		return errSessionClosed(st.sess)
	}
	if st.sess != nil {
		// A session dir replaced by a link since it was given: every path the call names is
		// decided against dirs that are not the ones it would act in (the plan refuses its
		// child too, Spec.DirsLeadTo).
		o := st.sess.Owner
		leads := st.sess.LeadsTo()
		if err := sandbox.DirsMoved(o.UID, o.GID, o.Groups, leads); err != nil {
			return errcode.New(errcode.Conflict, fmt.Errorf("%w; nothing runs in this session until it leads there again", err))
		}
		if cwd, root := st.sess.Cwd(), st.sess.Root; !cwdInside(st.sess, cwd, leads) {
			// The decision takes the cwd as one of the session's dirs: one that lies in
			// none (set while a dir was swapped) is the root again, and nothing runs.
			st.sess.Apply(session.Update{Cwd: &root})
			return errcode.New(errcode.Conflict, fmt.Errorf("the session's cwd %s lies outside its directories: it was reset to %s; nothing ran", cwd, root))
		}
		if cwd, root := st.sess.Cwd(), st.sess.Root; cwd != root {
			// A dir on the way to a cwd a cd moved, replaced by a link out since (by a task, on
			// the host): the decision would take the call's relative names where they no
			// longer lead. Reset, as the child's own check resets it (cwdGone).
			if err := sandbox.CwdMoved(o.UID, o.GID, o.Groups, cwd, st.sess.Dirs()); err != nil {
				if !errors.Is(err, sandbox.ErrDirMoved) {
					return errcode.New(errcode.Internal, fmt.Errorf("look up the session's cwd %s as its owner: %w", cwd, err))
				}
				st.sess.Apply(session.Update{Cwd: &root})
				if st.req.Cwd != "" {
					return errcode.New(errcode.Conflict, fmt.Errorf("%s: %s no longer leads where it did (%v), and the session's cwd was reset to %s; nothing was decided", protocol.SessionCwdMoved, cwd, err, root))
				}
				return errcode.New(errcode.Conflict, fmt.Errorf("the shell cwd was reset to %s: %s no longer leads where it did (%v); nothing ran, run the command again from %s", root, cwd, err, root))
			}
		}
		if want, cwd := st.req.Cwd, st.sess.Cwd(); want != "" && want != cwd {
			// The caller runs the call at want: decided at the session's cwd, its relative
			// names would be taken where they do not lead.
			return errcode.New(errcode.Conflict, fmt.Errorf("%s: the call runs at %s, the session's cwd is %s; nothing was decided", protocol.SessionCwdMoved, want, cwd))
		}
	}
	if err := ctx.Err(); err != nil {
		return errcode.New(errcode.Cancelled, fmt.Errorf("call aborted before it started: %w", err))
	}
	return nil
}

// stepSchema decodes the input and validates it against the tool's JSON Schema. Step 3.
func stepSchema(_ context.Context, _ *Pipeline, st *state) error {
	raw := bytes.TrimSpace(st.req.Input)
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	var doc any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return errcode.New(errcode.SchemaInvalid, fmt.Errorf("input is not valid JSON: %w", err))
	}
	if dec.More() {
		return errcode.Msg(errcode.SchemaInvalid, "input has trailing data after the JSON object")
	}
	if err := st.call.Tool.ValidateSchema(doc); err != nil {
		var se *SchemaError
		if errors.As(err, &se) && st.call.Tool.ShouldDefer() {
			se.Hint = "this tool's schema is deferred: call ToolSearch with its name to load it first"
		}
		return errcode.New(errcode.SchemaInvalid, err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return errcode.Msg(errcode.SchemaInvalid, "input must be a JSON object")
	}
	st.call.Input = Input(obj)
	return nil
}

// stepValidate runs the tool's semantic checks. Step 4.
func stepValidate(ctx context.Context, _ *Pipeline, st *state) error {
	if err := st.call.Tool.Validate(ctx, st.call); err != nil {
		var e *errcode.Error
		if errors.As(err, &e) {
			return err
		}
		return errcode.New(errcode.Validation, err)
	}
	return nil
}

// stepClassifyStart starts classifying a Bash command while the other steps go on. Step 5.
func stepClassifyStart(_ context.Context, p *Pipeline, st *state) error {
	cmd, ok := st.call.Input["command"].(string)
	if st.call.Tool.Name() != "Bash" || !ok {
		return nil
	}
	ch := make(chan *classifier.Classification, 1)
	// A hook's updatedInput starts this again: what was read of the old command is dropped.
	st.call.bash, st.call.bashResult = ch, nil
	shell := st.req.Shell
	if d := classifier.ShellOf(shell); d != "" {
		shell = d // dash reads as sh, rbash as bash; a shell it cannot read stays unclassified
	}
	opts := classifier.Options{WorkDirs: st.sess.Dirs(), Cwd: st.sess.Cwd(), Home: st.sess.Owner.Home, Shell: shell,
		Unconfined: st.call.unconfined, MentionReads: mentionReads(st.call)}
	sess := st.sess
	classify := func() *classifier.Classification { return classifyLine(sess, cmd, opts) }
	if p.hooks.Load() == nil {
		// No hook to overlap with: classifying here costs less than waking a thread for it.
		ch <- classify()
		return nil
	}
	go func() { ch <- classify() }()
	return nil
}

// classifyLine classifies cmd with the facts of s's repository at opts.Cwd: whether git there
// takes another repository (gitElsewhere), and whether it is a partial clone. Whether git
// runs is the classifier's to say (g”it is git): the repository's config is looked at only
// for a line that runs it, and the line read again if it is a partial clone's.
func classifyLine(s *session.Session, cmd string, opts classifier.Options) *classifier.Classification {
	opts.GitElsewhere = gitElsewhere(s, opts.Cwd)
	c := classifier.Classify(cmd, opts)
	if o := s.Owner; c.RunsGit() && sandbox.PartialClone(o.UID, o.GID, o.Groups, opts.Cwd) {
		opts.GitPartialClone = true
		c = classifier.Classify(cmd, opts)
	}
	return c
}

// cwdInside reports whether cwd lies in one of s's dirs, by name or where the dir led when
// it was given (a session given as ~/link keeps its cwd resolved, in ~/real).
func cwdInside(s *session.Session, cwd string, leads map[string]string) bool {
	for _, d := range s.Dirs() {
		if session.Within(cwd, d) {
			return true
		}
		if to, ok := leads[d]; ok && session.Within(cwd, to) {
			return true
		}
	}
	return false
}

// gitElsewhere reports whether git run at cwd, in s, may take a repository other than the
// one of the session dir cwd lies in (sandbox.RepoBelow): a cwd a cd moved into a repository
// a call could have made. At a session dir, or where cwd lies in none, git takes the dir's.
func gitElsewhere(s *session.Session, cwd string) bool {
	top := ""
	leads := s.LeadsTo()
	for _, d := range s.Dirs() {
		// By name, or where the dir led when given (a session given as ~/link keeps its cwd
		// resolved, in ~/real).
		for _, base := range []string{d, leads[d]} {
			if base == "" {
				continue
			}
			if cwd == base {
				return false
			}
			if session.Within(cwd, base) && len(base) > len(top) {
				top = base
			}
		}
	}
	if top == "" {
		return true
	}
	o := s.Owner
	return sandbox.RepoBelow(o.UID, o.GID, o.Groups, top, cwd)
}

// stepBackfill fills derived input on a copy; Original keeps what the client sent. Step 6.
func stepBackfill(_ context.Context, _ *Pipeline, st *state) error {
	st.call.Input = st.call.Input.Clone()
	if err := st.call.Tool.Backfill(st.call); err != nil {
		return errcode.New(errcode.Validation, err)
	}
	return nil
}

// stepPreHooks runs PreToolUse hooks. A hook's deny is final; its allow only skips the
// question (the policy still applies deny and ask rules and safety checks). Step 7a.
func stepPreHooks(ctx context.Context, p *Pipeline, st *state) error {
	hooks := p.hooks.Load()
	if hooks == nil {
		return nil
	}
	v, err := hooks.PreToolUse(ctx, st.call)
	if err != nil {
		return errcode.New(errcode.HookError, err)
	}
	st.hook = v
	if v != nil && v.UpdatedInput != nil {
		if err := st.call.Tool.ValidateSchema(map[string]any(v.UpdatedInput)); err != nil {
			return errcode.New(errcode.HookError, fmt.Errorf("hook's updatedInput does not match the schema: %w", err))
		}
		st.call.Input = v.UpdatedInput
		if err := st.call.Tool.Backfill(st.call); err != nil {
			return errcode.New(errcode.HookError, err)
		}
		if err := stepClassifyStart(ctx, p, st); err != nil {
			return err
		}
	}
	return nil
}

// stepPermission gathers the facts and asks the policy. Any error denies. Step 7b.
func stepPermission(ctx context.Context, p *Pipeline, st *state) error {
	facts, err := p.gatherFacts(ctx, st.call)
	if err != nil {
		d := permission.Decision{Behavior: permission.Deny, Source: "pipeline", Step: "facts",
			Reason: "could not gather the facts to decide this call: " + err.Error()}
		st.decision = &d
		return errcode.New(errcode.Of(err), err)
	}
	st.facts = facts
	// Nothing changes the input after this step: execute and the audit use the same answer.
	if cl := st.call.Classification(); cl != nil {
		// The command as read for the shell that runs it (Request.Shell). Bash's own reading
		// without the session's dirs (the tool's IsReadOnly) says the same or less: the
		// dirs do not change ReadOnly, and another shell's reading only ever refuses more
		// (both are fuzzed: FuzzClassify, FuzzClassifyDialects). So the command is not
		// parsed twice.
		st.readOnly = cl.ReadOnly
	} else {
		st.readOnly = st.call.Tool.IsReadOnly(st.call.Input)
	}
	in := &DecisionInput{Call: st.call, ToolFacts: facts, ReadOnly: st.readOnly, Hook: st.hook,
		Unconfined: st.call.unconfined}
	d, err := p.decider.Decide(ctx, in)
	if err != nil {
		d = permission.Decision{Behavior: permission.Deny, Source: "policy", Step: "error",
			Reason: "policy evaluation failed; denied: " + err.Error()}
		st.decision = &d
		return errcode.New(errcode.PolicyEval, err)
	}
	if d.Behavior != permission.Allow && d.Behavior != permission.Ask && d.Behavior != permission.Deny {
		d = permission.Decision{Behavior: permission.Deny, Source: "policy", Step: "error",
			Reason: fmt.Sprintf("policy returned an unknown behavior %q; denied", d.Behavior)}
	}
	st.call.RunReadOnly = d.Behavior == permission.Allow && (d.ReadOnly || st.call.Mode == permission.ModePlan)
	st.decision = &d
	pd := d
	st.policy = &pd
	return nil
}

// gatherFacts gathers what the policy decides c on, as its owner: the rules' links first, so
// the facts' own checks (a whole tree read, a Glob's walk) meet the rules' patterns where the
// links lead too.
func (p *Pipeline) gatherFacts(ctx context.Context, c *Call) (permission.ToolFacts, error) {
	if p.host != nil && namesPaths(c) {
		links, err := p.host.ruleLinks(ctx, c)
		if err != nil {
			return permission.ToolFacts{}, err
		}
		c.ruleLinks = links
	}
	facts, err := c.Tool.CheckPermissions(ctx, c)
	if err != nil {
		return permission.ToolFacts{}, err
	}
	if p.host != nil {
		if err := p.host.markConfigNamed(c, facts.Paths); err != nil {
			return permission.ToolFacts{}, err
		}
		aliasThroughLinks(facts.Paths, c.ruleLinks, c.unconfined)
		p.host.markOwnResults(c, facts.Paths)
	}
	return facts, nil
}

// stepDenied stops a call that is not allowed, with an error result that says why. Step 9.
func stepDenied(_ context.Context, _ *Pipeline, st *state) error {
	switch st.decision.Behavior {
	case permission.Allow:
		return nil
	case permission.Ask:
		if id := st.decision.ApprovalID; id != "" {
			return errcode.New(errcode.AskRequired, fmt.Errorf("permission required: %s (approval %s is pending: its session's owner answers with POST /v1/approvals/%s; resume the call with approval_id)", st.decision.Reason, id, id))
		}
		return errcode.New(errcode.AskRequired, fmt.Errorf("permission required: %s", st.decision.Reason))
	default:
		return errcode.New(errcode.PermissionDenied, fmt.Errorf("permission denied: %s", st.decision.Reason))
	}
}

// stepExecute audits the start durably, then runs the tool. Step 10.
func stepExecute(ctx context.Context, p *Pipeline, st *state) error {
	// Audit before effect: if the start cannot be recorded the call does not run. A read-only
	// call's start rides on its end record (see Wait).
	wait := WaitDurable
	if st.readOnly {
		wait = WaitQueued
	}
	if err := p.recorder.RecordCall(ctx, KindStart, &CallRecord{Call: st.call, Request: st.req, Decision: st.decision, Wait: wait}); err != nil {
		return errcode.Audit(fmt.Errorf("the audit log cannot be written, so the call was not run: %w", err))
	}
	st.ran = true
	var res *Result
	var err error
	if st.resolution != nil && st.approval != nil && st.approval.Preview != nil {
		// What was approved is what runs: the previewed content, not the tool again.
		res, err = p.host.applyPreviews(ctx, st.call, st.approval.AllPreviews(), st.approval.PreviewContents)
	} else {
		res, err = st.call.Tool.Call(ctx, st.call, st.progress)
	}
	if err != nil {
		return p.host.explainHidden(st.call, err)
	}
	if res == nil {
		return errcode.Msg(errcode.Internal, "tool returned no result")
	}
	st.result = res
	return nil
}

// stepBudget persists oversize output and applies the session's aggregate budget. Step 11.
func stepBudget(_ context.Context, p *Pipeline, st *state) error {
	res, err := p.host.Budget(st.call, st.result)
	if err != nil {
		return err
	}
	st.result = res
	return nil
}

// stepPostHooks runs PostToolUse hooks; a block turns the result into an error for the agent. Step 12.
func stepPostHooks(ctx context.Context, p *Pipeline, st *state) error {
	hooks := p.hooks.Load()
	if hooks == nil {
		return nil
	}
	return hooks.PostToolUse(ctx, st.call, st.result)
}

func (h *Host) applyContextChange(s *session.Session, cc *ContextChange) {
	u := session.Update{Mode: cc.Mode, Cwd: cc.Cwd, PlanFrom: cc.PlanFrom}
	narrows := u.Narrows(s.Snapshot())
	s.Apply(u)
	if narrows {
		s.MarkNarrowed()
		if h != nil {
			h.StopTasks(s, KilledNarrowed)
		}
	}
}

// claimID claims the call's tool_use_id in its session until finish has recorded its end
// (session.ClaimToolUseID), or answers why not: a call under the id of one still running is
// refused before anything of it is recorded, as a malformed request is, since its call.end
// would read as the end of the running one.
func (p *Pipeline) claimID(st *state) *Outcome {
	release, ok := st.sess.ClaimToolUseID(st.req.ToolUseID)
	if ok {
		st.releaseID = release
		return nil
	}
	err := errcode.New(errcode.Conflict, fmt.Errorf("tool_use_id %q is a call of this session's that is still running: give each call its own id", st.req.ToolUseID))
	return &Outcome{ToolUseID: st.req.ToolUseID, Tool: st.req.Tool, Err: err,
		Result: &Result{IsError: true, Content: []Block{{Type: "text", Text: err.Error()}}}}
}

// finish classifies the error into a telemetry-safe code and writes the audit record. Step 14.
func (p *Pipeline) finish(ctx context.Context, st *state) *Outcome {
	if st.releaseID != nil {
		defer st.releaseID() // once its end is recorded, the id is free for another call
		st.releaseID = nil
	}
	out := &Outcome{ToolUseID: st.req.ToolUseID, Tool: st.req.Tool, Decision: st.decision,
		Result: st.result, Ran: st.ran, Duration: time.Since(st.start)}
	if st.call != nil {
		out.Tool = st.call.Tool.Name()
	}
	if st.err == nil && st.ran && ctx.Err() != nil {
		// The client went away or the daemon is draining: the tool was stopped, whatever
		// its own result says.
		st.err = errcode.New(errcode.Cancelled, fmt.Errorf("call cancelled while running: %w", ctx.Err()))
	}
	if st.err != nil {
		var ut *UnknownToolError
		if errors.As(st.err, &ut) {
			out.Suggestions = ut.Suggestions
		}
		out.Err = errcode.New(errcode.Of(st.err), st.err)
		if out.Result == nil {
			out.Result = &Result{IsError: true, Content: []Block{{Type: "text", Text: agentMessage(st.err)}}}
		}
	}
	rememberCall(st)
	// The record must outlive a client that hung up: write it on a context that is not cancelled.
	rctx := context.WithoutCancel(ctx)
	kind := KindEnd
	if st.decideOnly {
		kind = KindDecide
	}
	// Durable before the answer where the record stands for an effect that may change
	// something: a call that ran, or a decision that lets the caller run it (a hook's agent
	// runs what was decided). A read-only call, run or only decided, and a decision that
	// allows nothing have no effect but what they disclose: written, as the Waits say.
	wait := WaitDurable
	allowed := st.decision != nil && st.decision.Behavior == permission.Allow
	if st.readOnly && (st.ran || st.decideOnly) || !st.ran && !allowed {
		wait = WaitWritten
	}
	if err := p.recorder.RecordCall(rctx, kind, &CallRecord{Call: st.call, Session: st.sess, Caller: st.caller, Request: st.req, Decision: st.decision, Policy: st.policy, Outcome: out, Wait: wait}); err != nil {
		if errcode.Of(err) != errcode.RateLimited {
			// Not a user's own budget, which the refusal and its metric already report: a
			// line per refused call would let one user fill the daemon's log instead.
			p.log.Error("audit record failed", zap.String("tool", out.Tool), zap.String("code", string(errcode.Of(err))))
		}
		if !st.ran || st.readOnly {
			// Nothing ran, or nothing but a read whose output has not left yet: refusing is
			// still possible, so an unauditable call fails closed.
			out.Err = errcode.Audit(fmt.Errorf("the audit log cannot be written: %w", err))
			out.Result = &Result{IsError: true, Content: []Block{{Type: "text", Text: out.Err.Error()}}}
		} else if out.Result != nil && out.Result.ContextChange != nil {
			// A mode or cwd the calls after it would run in, which no record gave the session:
			// not made (a batch applies what its calls' results still carry).
			r := *out.Result
			r.ContextChange = nil
			r.ExtraMessages = append(slices.Clip(r.ExtraMessages), "the session's mode or cwd was left as it was: the change could not be recorded in the audit log")
			out.Result = &r
		}
	}
	// Step 13: a mode or cwd change for the calls after this one, once recorded.
	if !st.deferContext && out.Result != nil && out.Result.ContextChange != nil {
		p.host.applyContextChange(st.sess, out.Result.ContextChange)
	}
	return out
}

// agentMessage is the text an error shows the agent: what went wrong and what to do next.
func agentMessage(err error) string {
	msg := err.Error()
	switch errcode.Of(err) {
	case errcode.SchemaInvalid:
		return msg + ". Fix the input to match the tool's schema (GET /v1/tools) and call again."
	case errcode.UnknownTool:
		return msg
	case errcode.Cancelled:
		return msg
	}
	return strings.TrimSpace(msg)
}

// UnknownToolError is a call to a tool the registry does not have.
type UnknownToolError struct {
	Name        string
	Suggestions []string
}

func (e *UnknownToolError) Error() string {
	msg := fmt.Sprintf("unknown tool %q", e.Name)
	if len(e.Suggestions) > 0 {
		msg += "; did you mean " + strings.Join(e.Suggestions, ", ") + "?"
	}
	return msg
}

// Unwrap lets errcode.Of classify it.
func (e *UnknownToolError) Unwrap() error { return errcode.Msg(errcode.UnknownTool, "unknown tool") }

// errSessionClosed refuses to start anything in a session that was removed.
func errSessionClosed(s *session.Session) error {
	return errcode.New(errcode.NotFound, fmt.Errorf("session %s was deleted; nothing more runs in it", s.ID))
}

// sessionContext is ctx, also cancelled when sess is removed: a call does not outlive its
// session (deleted by its owner, ended by an admin or expired), so what it runs is stopped
// with the session's other processes rather than left behind them.
func sessionContext(ctx context.Context, sess *session.Session) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	if sess == nil {
		return ctx, cancel
	}
	stop := context.AfterFunc(sess.Lifetime(), cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}
