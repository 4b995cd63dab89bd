package executor

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/session"
)

// decideBy decides every call with a fixed decision or error, and keeps what it saw. A batch
// decides its calls concurrently.
type decideBy struct {
	d    permission.Decision
	err  error
	mu   sync.Mutex
	seen []*DecisionInput
}

func (f *decideBy) Decide(_ context.Context, in *DecisionInput) (permission.Decision, error) {
	f.mu.Lock()
	f.seen = append(f.seen, in)
	f.mu.Unlock()
	return f.d, f.err
}

// memRecorder keeps records in memory; failKind makes that kind fail to record.
type memRecorder struct {
	mu       sync.Mutex
	kinds    []string
	waits    []Wait
	failKind string
}

func (r *memRecorder) RecordCall(_ context.Context, kind string, c *CallRecord) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if kind == r.failKind {
		return errors.New("disk full")
	}
	r.kinds = append(r.kinds, kind)
	r.waits = append(r.waits, c.Wait)
	return nil
}

func allow() *decideBy {
	return &decideBy{d: permission.Decision{Behavior: permission.Allow, Reason: "test", Source: "test"}}
}

// echoDef is a tool that records that it ran and echoes its input's "msg".
func echoDef(ran *int) Def {
	return Def{
		Name:     "Echo",
		Aliases:  []string{"Say"},
		Schema:   `{"type":"object","properties":{"msg":{"type":"string"},"path":{"type":"string"}},"required":["msg"],"additionalProperties":false}`,
		ReadOnly: func(in Input) bool { return in.String("msg") != "write" },
		Validate: func(_ context.Context, c *Call) error {
			if c.Input.String("msg") == "invalid" {
				return errors.New("msg must not be invalid")
			}
			return nil
		},
		Backfill: func(c *Call) error {
			if p := c.Input.String("path"); p != "" && !strings.HasPrefix(p, "/") {
				c.Input["path"] = c.Session.Cwd() + "/" + p
			}
			return nil
		},
		Run: func(_ context.Context, c *Call, progress Progress) (*Result, error) {
			*ran++
			progress(Event{Kind: "stdout", Data: c.Input.String("msg")})
			if c.Input.String("msg") == "panic" {
				panic("tool bug")
			}
			res := Text(c.Input.String("msg"))
			if c.Input.String("msg") == "plan" {
				m := permission.ModePlan
				res.ContextChange = &ContextChange{Mode: &m}
			}
			return res, nil
		},
	}
}

func newTestPipeline(t *testing.T, d Decider, r Recorder, defs ...Def) (*Pipeline, *session.Session) {
	t.Helper()
	reg, err := NewRegistry(defs...)
	if err != nil {
		t.Fatal(err)
	}
	log := zaptest.NewLogger(t)
	host := &Host{log: log, StateDir: t.TempDir()}
	p := NewPipeline(log, reg, host, d, r, nil)
	s := session.NewStore().Create(session.Caller{UID: 1000}, session.Params{Cwd: "/work", Mode: permission.ModeDefault})
	return p, s
}

func req(tool, input string) *Request {
	return &Request{Tool: tool, Input: json.RawMessage(input), ToolUseID: "t1"}
}

func TestPipelineSteps(t *testing.T) {
	cases := []struct {
		name     string
		req      *Request
		decider  *decideBy
		failKind string
		wantCode errcode.Code
		wantRan  bool
		wantText string
	}{
		{"allowed call runs", req("Echo", `{"msg":"hi"}`), allow(), "", "", true, "hi"},
		{"alias", req("Say", `{"msg":"hi"}`), allow(), "", "", true, "hi"},
		{"lookup: unknown tool", req("Ech", `{"msg":"hi"}`), allow(), "", errcode.UnknownTool, false, "Echo"},
		{"schema: wrong type", req("Echo", `{"msg":1}`), allow(), "", errcode.SchemaInvalid, false, "/msg"},
		{"schema: not json", req("Echo", `{"msg":`), allow(), "", errcode.SchemaInvalid, false, "not valid JSON"},
		{"schema: not an object", req("Echo", `[1]`), allow(), "", errcode.SchemaInvalid, false, ""},
		{"validate", req("Echo", `{"msg":"invalid"}`), allow(), "", errcode.Validation, false, "must not be invalid"},
		{"permission: deny", req("Echo", `{"msg":"x"}`), &decideBy{d: permission.Decision{Behavior: permission.Deny, Reason: "rule says no"}}, "", errcode.PermissionDenied, false, "rule says no"},
		{"permission: ask", req("Echo", `{"msg":"x"}`), &decideBy{d: permission.Decision{Behavior: permission.Ask, Reason: "needs approval"}}, "", errcode.AskRequired, false, "needs approval"},
		{"permission: policy error denies", req("Echo", `{"msg":"x"}`), &decideBy{err: errors.New("rego blew up")}, "", errcode.PolicyEval, false, "rego blew up"},
		{"permission: unknown behavior denies", req("Echo", `{"msg":"x"}`), &decideBy{d: permission.Decision{Behavior: "maybe"}}, "", errcode.PermissionDenied, false, "unknown behavior"},
		{"execute: audit failure stops the call", req("Echo", `{"msg":"x"}`), allow(), KindStart, errcode.AuditUnavailable, false, "audit"},
		{"execute: tool panic is contained", req("Echo", `{"msg":"panic"}`), allow(), "", errcode.Internal, true, "internal error"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ran := 0
			rec := &memRecorder{failKind: tc.failKind}
			p, s := newTestPipeline(t, tc.decider, rec, echoDef(&ran))
			out := p.Run(context.Background(), s, s.Owner, tc.req, nil)
			gotCode := errcode.Code("")
			if out.Err != nil {
				gotCode = out.Err.Code
			}
			if gotCode != tc.wantCode {
				t.Errorf("code = %q (%v), want %q", gotCode, out.Err, tc.wantCode)
			}
			if (ran > 0) != tc.wantRan {
				t.Errorf("ran = %d, want ran=%v", ran, tc.wantRan)
			}
			if out.Result == nil {
				t.Fatal("no result")
			}
			text := ""
			for _, b := range out.Result.Content {
				text += b.Text
			}
			if !strings.Contains(text, tc.wantText) {
				t.Errorf("result %q does not mention %q", text, tc.wantText)
			}
			if tc.wantCode != "" && !out.Result.IsError {
				t.Error("an error outcome without is_error")
			}
			// Step 14 always writes the end record (unless that very write is what fails).
			if tc.failKind != KindEnd && (len(rec.kinds) == 0 || rec.kinds[len(rec.kinds)-1] != KindEnd) {
				t.Errorf("records %v do not end with call.end", rec.kinds)
			}
		})
	}
}

func TestAbortCheckStopsCancelledCall(t *testing.T) {
	ran := 0
	p, s := newTestPipeline(t, allow(), &memRecorder{}, echoDef(&ran))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out := p.Run(ctx, s, s.Owner, req("Echo", `{"msg":"hi"}`), nil)
	if out.Err == nil || out.Err.Code != errcode.Cancelled || ran != 0 {
		t.Fatalf("cancelled call: %+v ran=%d", out.Err, ran)
	}
}

func TestBackfillKeepsOriginal(t *testing.T) {
	ran := 0
	d := allow()
	p, s := newTestPipeline(t, d, &memRecorder{}, echoDef(&ran))
	r := req("Echo", `{"msg":"hi","path":"rel/x"}`)
	p.Run(context.Background(), s, s.Owner, r, nil)
	if got := d.seen[0].Call.Input.String("path"); got != "/work/rel/x" {
		t.Errorf("backfilled path = %q", got)
	}
	if !strings.Contains(string(d.seen[0].Call.Original), `"rel/x"`) {
		t.Errorf("original input changed: %s", d.seen[0].Call.Original)
	}
	if !d.seen[0].ReadOnly {
		t.Error("read-only flag not passed to the decider")
	}
}

func TestDontAskTurnsAskIntoDeny(t *testing.T) {
	ran := 0
	p, s := newTestPipeline(t, &decideBy{d: permission.Decision{Behavior: permission.Ask, Reason: "r"}}, &memRecorder{}, echoDef(&ran))
	r := req("Echo", `{"msg":"x"}`)
	r.Mode = permission.ModeDontAsk
	out := p.Run(context.Background(), s, s.Owner, r, nil)
	if out.Decision == nil || out.Decision.Behavior != permission.Deny || out.Err.Code != errcode.PermissionDenied {
		t.Fatalf("dontAsk: %+v %v", out.Decision, out.Err)
	}
}

func TestDecideRunsNothing(t *testing.T) {
	ran := 0
	rec := &memRecorder{}
	p, s := newTestPipeline(t, allow(), rec, echoDef(&ran))
	out := p.Decide(context.Background(), s, s.Owner, req("Echo", `{"msg":"x"}`))
	if ran != 0 || out.Decision == nil || out.Decision.Behavior != permission.Allow {
		t.Fatalf("decide: ran=%d %+v", ran, out.Decision)
	}
	if len(rec.kinds) != 1 || rec.kinds[0] != KindDecide {
		t.Errorf("records = %v, want [call.decide]", rec.kinds)
	}
}

func TestContextChangeAppliesAfterSerialCall(t *testing.T) {
	ran := 0
	p, s := newTestPipeline(t, allow(), &memRecorder{}, echoDef(&ran))
	p.Run(context.Background(), s, s.Owner, req("Echo", `{"msg":"plan"}`), nil)
	if s.Mode() != permission.ModePlan {
		t.Errorf("mode = %s, want plan", s.Mode())
	}
}

func TestProgressEventsReachTheCaller(t *testing.T) {
	ran := 0
	p, s := newTestPipeline(t, allow(), &memRecorder{}, echoDef(&ran))
	var got []Event
	p.Run(context.Background(), s, s.Owner, req("Echo", `{"msg":"hi"}`), func(e Event) { got = append(got, e) })
	if len(got) != 1 || got[0].Data != "hi" {
		t.Errorf("events = %+v", got)
	}
}

// A call that may write waits for a durable start and end; a read-only one queues its start
// and waits for its end to be written; a read whose end cannot be recorded is withheld. A
// decision alone is durable only where it lets the caller change something.
func TestAuditWaitsByEffect(t *testing.T) {
	for _, tc := range []struct {
		msg   string
		start Wait
		end   Wait
	}{{"read", WaitQueued, WaitWritten}, {"write", WaitDurable, WaitDurable}} {
		ran := 0
		rec := &memRecorder{}
		p, s := newTestPipeline(t, allow(), rec, echoDef(&ran))
		p.Run(context.Background(), s, s.Owner, req("Echo", `{"msg":"`+tc.msg+`"}`), nil)
		if len(rec.kinds) != 2 || rec.kinds[0] != KindStart || rec.waits[0] != tc.start || rec.waits[1] != tc.end {
			t.Errorf("%s: records %v waits %v", tc.msg, rec.kinds, rec.waits)
		}
	}
	// A decision waits to be durable only when it lets the caller do what may change
	// something (a hook's agent runs it): a read-only allow, a deny and an ask are written.
	deny := &decideBy{d: permission.Decision{Behavior: permission.Deny, Reason: "no"}}
	ask := &decideBy{d: permission.Decision{Behavior: permission.Ask, Reason: "maybe"}}
	for _, tc := range []struct {
		name string
		d    *decideBy
		msg  string
		want Wait
	}{
		{"allowed write", allow(), "write", WaitDurable},
		{"allowed read", allow(), "read", WaitWritten},
		{"denied write", deny, "write", WaitWritten},
		{"asked write", ask, "write", WaitWritten},
	} {
		rec := &memRecorder{}
		p, s := newTestPipeline(t, tc.d, rec, echoDef(new(int)))
		p.Decide(context.Background(), s, s.Owner, req("Echo", `{"msg":"`+tc.msg+`"}`))
		if len(rec.kinds) != 1 || rec.kinds[0] != KindDecide || rec.waits[0] != tc.want {
			t.Errorf("decide, %s: records %v waits %v, want one %s waiting %v", tc.name, rec.kinds, rec.waits, KindDecide, tc.want)
		}
	}
	ran := 0
	p, s := newTestPipeline(t, allow(), &memRecorder{failKind: KindEnd}, echoDef(&ran))
	out := p.Run(context.Background(), s, s.Owner, req("Echo", `{"msg":"secret"}`), nil)
	if out.Err == nil || out.Err.Code != errcode.AuditUnavailable || strings.Contains(out.Result.Content[0].Text, "secret") {
		t.Errorf("read with an unrecordable end was returned: %+v %v", out.Result, out.Err)
	}
}

// fakeBashDef is a tool named Bash whose own IsReadOnly always says yes, so a test sees where
// the pipeline takes a Bash call's ReadOnly from.
func fakeBashDef() Def {
	return Def{
		Name:     "Bash",
		Schema:   `{"type":"object","properties":{"command":{"type":"string"}},"required":["command"],"additionalProperties":false}`,
		ReadOnly: func(Input) bool { return true },
		Run:      func(context.Context, *Call, Progress) (*Result, error) { return Text(""), nil },
	}
}

// TestBashReadOnlyFromItsClassification: a Bash call is read-only exactly when its
// classification (read for the shell that runs it) says so, and a command read again after a
// hook's updatedInput replaces the one read before.
func TestBashReadOnlyFromItsClassification(t *testing.T) {
	for cmd, want := range map[string]bool{"ls -la": true, "touch x": false, "ls *(e:'touch x':)": false} {
		d := allow()
		p, s := newTestPipeline(t, d, &memRecorder{}, fakeBashDef())
		r := req("Bash", `{"command":`+strconvQuote(cmd)+`}`)
		r.Shell = "zsh"
		p.Decide(context.Background(), s, s.Owner, r)
		if len(d.seen) != 1 || d.seen[0].ReadOnly != want {
			t.Errorf("%q for zsh: decided with read-only %v, want %v", cmd, d.seen, want)
		}
	}
	p, s := newTestPipeline(t, allow(), &memRecorder{}, fakeBashDef())
	st := &state{req: req("Bash", `{"command":"ls"}`), sess: s, caller: s.Owner}
	if err := stepLookup(context.Background(), p, st); err != nil {
		t.Fatal(err)
	}
	st.call.Input = Input{"command": "ls"}
	if err := stepClassifyStart(context.Background(), p, st); err != nil || !st.call.Classification().ReadOnly {
		t.Fatalf("ls: %v %+v", err, st.call.Classification())
	}
	st.call.Input = Input{"command": "touch x"} // as a hook's updatedInput replaces it
	if err := stepClassifyStart(context.Background(), p, st); err != nil || st.call.Classification().ReadOnly {
		t.Errorf("the rewritten command kept the first one's classification: %+v", st.call.Classification())
	}
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

// TestCwdInside: the cwd the decision takes as one of the session's dirs must lie in one, by
// name or where it led when given (a session given as /work/link keeps its cwd resolved); a
// cwd set while a dir was swapped for a link, in the link's tree, lies in none.
func TestCwdInside(t *testing.T) {
	s := session.NewStore().Create(session.Caller{UID: 1000}, session.Params{Cwd: "/work/link", AdditionalDirs: []string{"/extra"}, Mode: permission.ModeDefault})
	s.SetLeadsTo("/work/link", "/work/real")
	leads := s.LeadsTo()
	for cwd, want := range map[string]bool{
		"/work/link": true, "/work/link/sub": true, "/work/real/sub": true, "/extra/x": true,
		"/other/pub": false, "/work": false, "/work/realx": false,
	} {
		if got := cwdInside(s, cwd, leads); got != want {
			t.Errorf("cwdInside(%s) = %v, want %v", cwd, got, want)
		}
	}
}

// TestGitElsewhereThroughLink: in a session given through a link, a cwd in a plain subdir of
// where the link leads is the session's own repository's for git, not another's.
func TestGitElsewhereThroughLink(t *testing.T) {
	s := session.NewStore().Create(session.Caller{UID: 1000}, session.Params{Cwd: "/work/link", Mode: permission.ModeDefault})
	s.SetLeadsTo("/work/link", "/work/real")
	if gitElsewhere(s, "/work/real") {
		t.Error("git at the dir's resolution is taken for another repository's")
	}
	if !gitElsewhere(s, "/other") {
		t.Error("git at a cwd in no dir of the session is taken for the session's")
	}
}

// TestRunningToolUseIDRefused: a call under the tool_use_id of a call of the session that is
// still running is refused before anything of it is recorded (its call.end would read as the
// running call's end, and a crash would leave that call looking finished); once the first
// call's end is recorded, the id may be used again, and another session's calls never meet it.
func TestRunningToolUseIDRefused(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	block := Def{
		Name:   "Block",
		Schema: `{"type":"object"}`,
		Run: func(_ context.Context, c *Call, _ Progress) (*Result, error) {
			entered <- struct{}{}
			<-release
			return Text("done"), nil
		},
	}
	ran := 0
	rec := &memRecorder{}
	p, s := newTestPipeline(t, allow(), rec, block, echoDef(&ran))
	done := make(chan *Outcome)
	go func() { done <- p.Run(context.Background(), s, s.Owner, req("Block", `{}`), nil) }()
	<-entered
	rec.mu.Lock()
	before := len(rec.kinds)
	rec.mu.Unlock()
	for _, r := range []*Request{req("Echo", `{"msg":"hi"}`), req("Block", `{}`)} {
		out := p.Run(context.Background(), s, s.Owner, r, nil)
		if out.Err == nil || out.Err.Code != errcode.Conflict || out.Result == nil || !out.Result.IsError {
			t.Errorf("a second call under the running id: %+v", out.Err)
		}
	}
	rec.mu.Lock()
	after := len(rec.kinds)
	rec.mu.Unlock()
	if ran != 0 || after != before {
		t.Errorf("the refused calls ran (%d) or were recorded (%d records, was %d)", ran, after, before)
	}
	other := session.NewStore().Create(session.Caller{UID: 1000}, session.Params{Cwd: "/work", Mode: permission.ModeDefault})
	if out := p.Run(context.Background(), other, other.Owner, req("Echo", `{"msg":"hi"}`), nil); out.Err != nil {
		t.Errorf("another session's call under the same id: %v", out.Err)
	}
	close(release)
	if out := <-done; out.Err != nil {
		t.Fatalf("the running call: %v", out.Err)
	}
	if out := p.Run(context.Background(), s, s.Owner, req("Echo", `{"msg":"hi"}`), nil); out.Err != nil {
		t.Errorf("the id after its call ended: %v", out.Err)
	}
}
