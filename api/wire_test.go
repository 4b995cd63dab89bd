package api

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/approval"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/executor"
	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/protocol"
)

// Each protocol type that stands for a daemon type must have exactly its JSON fields, of the
// same kinds: a field added to the daemon's type and not to protocol's would silently drop
// out of the wire.
func TestWireTypesMatchDaemonTypes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		wire     any
		daemon   any
		complete bool // every daemon field is on the wire too
	}{
		{"Decision", protocol.Decision{}, permission.Decision{}, true},
		{"AutoStage", protocol.AutoStage{}, permission.AutoStage{}, true},
		{"Effective", protocol.Effective{}, permission.Effective{}, true},
		{"Block", protocol.Block{}, executor.Block{}, true},
		{"Event", protocol.Event{}, executor.Event{}, true},
		{"VerifyReport", protocol.VerifyReport{}, audit.VerifyReport{}, true},
		{"Approval", protocol.Approval{}, approval.Approval{}, true},
		{"Resolution", protocol.Resolution{}, approval.Resolution{}, true},
		{"ApprovalEvent", protocol.ApprovalEvent{}, approval.Event{}, true},
		// A client reads only part of a record; the daemon sends audit.Record's lines whole.
		{"Record", protocol.Record{}, audit.Record{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			compareFields(t, tc.name, reflect.TypeOf(tc.wire), reflect.TypeOf(tc.daemon), tc.complete)
		})
	}
	if protocol.Allow != string(permission.Allow) || protocol.Deny != string(permission.Deny) || protocol.Ask != string(permission.Ask) {
		t.Error("behavior names differ from permission's")
	}
	if protocol.Allow != string(approval.Allow) || protocol.Deny != string(approval.Deny) {
		t.Error("answer names differ from approval's")
	}
}

func jsonFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f
	}
	return out
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	return t
}

func compareFields(t *testing.T, path string, wire, daemon reflect.Type, complete bool) {
	t.Helper()
	wf, df := jsonFields(wire), jsonFields(daemon)
	for name, f := range wf {
		g, ok := df[name]
		if !ok {
			t.Errorf("%s.%s: not in the daemon's type", path, name)
			continue
		}
		if f.Tag.Get("json") != g.Tag.Get("json") {
			t.Errorf("%s.%s: tag %q, the daemon's %q", path, name, f.Tag.Get("json"), g.Tag.Get("json"))
		}
		a, b := deref(f.Type), deref(g.Type)
		if a.Kind() != b.Kind() {
			t.Errorf("%s.%s: kind %s, the daemon's %s", path, name, a.Kind(), b.Kind())
			continue
		}
		if a.Kind() == reflect.Struct && a.PkgPath() != "time" {
			compareFields(t, path+"."+name, a, b, complete)
		}
	}
	if complete {
		for name := range df {
			if _, ok := wf[name]; !ok {
				t.Errorf("%s.%s: the daemon's type has it, protocol's does not", path, name)
			}
		}
	}
}

// legacyCallResult is CallResult as api/ encoded it before the wire types moved to package
// protocol: the daemon's own Decision and Blocks inside.
type legacyCallResult struct {
	ToolUseID  string                `json:"tool_use_id"`
	Tool       string                `json:"tool"`
	Decision   *permission.Decision  `json:"decision"`
	IsError    bool                  `json:"is_error"`
	Content    []executor.Block      `json:"content"`
	Data       map[string]any        `json:"data"`
	Extra      []string              `json:"extra_messages,omitempty"`
	Error      *protocol.ErrorDetail `json:"error"`
	ApprovalID string                `json:"approval_id,omitempty"`
}

func legacyResult(o *executor.Outcome) legacyCallResult {
	cr := legacyCallResult{ToolUseID: o.ToolUseID, Tool: o.Tool, Decision: o.Decision, Data: map[string]any{}}
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
		cr.Error = &protocol.ErrorDetail{Class: string(o.Err.Code), Message: o.Err.Error(), Suggestions: o.Suggestions}
	}
	return cr
}

// The conversions give the bytes that encoding the daemon's types gave.
func TestWireBytesUnchanged(t *testing.T) {
	t.Parallel()
	when := time.Date(2025, 3, 4, 5, 6, 7, 890, time.UTC)
	outcomes := map[string]*executor.Outcome{
		"bare":  {ToolUseID: "t1", Tool: "Bash"},
		"error": {Tool: "Nope", Err: &errcode.Error{Code: errcode.NotFound, Err: errors.New("unknown tool <Nope>")}, Suggestions: []string{"Bash"}},
		"allow": {Tool: "Bash", Decision: &permission.Decision{Behavior: permission.Allow, Reason: "rule & <mode>", Rule: "Bash(ls:*)", Source: "session", Step: "allow_rule", ReadOnly: true, Trace: []string{"hook", "deny_rule"}},
			Result: &executor.Result{Content: []executor.Block{{Type: "text", Text: "a\nb"}, {Type: "image", MediaType: "image/png", Data: "iVBO"}}, Data: map[string]any{"exit_code": 0}, ExtraMessages: []string{"x"}}},
		"ask": {Tool: "Bash", Decision: &permission.Decision{Behavior: permission.Ask, Reason: "r", Route: "classifier", ApprovalID: "ap1",
			Auto: []permission.AutoStage{{Stage: 1, Verdict: "ambiguous", Reason: "r1"}, {Stage: 2, Verdict: "error", Reason: "r2"}}},
			Result: &executor.Result{IsError: true}},
		"empty": {Decision: &permission.Decision{Behavior: permission.Deny, Trace: []string{}, Auto: []permission.AutoStage{}}, Result: &executor.Result{Content: []executor.Block{}}},
	}
	pv := &approval.Preview{Path: "/p", Diff: "-a\n+b", Exists: true, SHA256: "s1", NewSHA256: "s2", Content: []byte("secret")}
	ap := approval.Approval{ID: "ap1", Session: "s", ParentSession: "p", Owner: 1000, Tool: "Edit", Input: json.RawMessage(`{"a":1}`), Reason: "r", SuggestedRules: []string{"Edit(/p)"}, Preview: pv, Created: when, Expires: when.Add(time.Minute)}
	bare := approval.Approval{ID: "ap2"}
	res := approval.Resolution{Answer: approval.Allow, Remember: "session", Rule: "Edit(/p)", Message: "m", By: "uid:0", When: when}
	rep := &audit.VerifyReport{Files: []string{"a.jsonl"}, Records: 3, FirstSeq: 1, LastSeq: 3, LastHash: "h", Checkpoints: 1, HeadSeq: 3, Signed: true, BadLine: 2, Reason: "x"}
	eff := permission.Effective{DefaultMode: permission.ModeDefault, AdditionalDirectories: []string{"/d"}, DisableBypass: true, ManagedRulesOnly: true, Files: []string{"f"}, Warnings: []string{"w"}}

	type pair struct{ old, new any }
	cases := map[string]pair{}
	for name, o := range outcomes {
		cases["result/"+name] = pair{legacyResult(o), callResult(o)}
	}
	ev := executor.Event{Kind: "stdout", Data: "hi <b>"}
	cases["stream/event"] = pair{struct {
		Event *executor.Event `json:"event,omitempty"`
	}{&ev}, protocol.StreamLine{Event: (*protocol.Event)(&ev)}}
	for name, l := range map[string][]approval.Approval{"nil": nil, "empty": {}, "two": {ap, bare}} {
		cases["approvals/"+name] = pair{struct {
			Approvals []approval.Approval `json:"approvals"`
		}{l}, protocol.ApprovalList{Approvals: approvalsView(l)}}
	}
	cases["answered"] = pair{struct {
		Approval   approval.Approval   `json:"approval"`
		Resolution approval.Resolution `json:"resolution"`
	}{ap, res}, protocol.ApprovalAnswered{Approval: approvalView(ap), Resolution: resolutionView(res)}}
	cases["event/created"] = pair{approval.Event{Type: "created", Approval: bare}, approvalEventView(approval.Event{Type: "created", Approval: bare})}
	answered := approval.Event{Type: "answered", Approval: ap, Resolution: &res}
	cases["event/answered"] = pair{answered, approvalEventView(answered)}
	type legacyVerify struct {
		OK     bool                `json:"ok"`
		Error  string              `json:"error,omitempty"`
		Report *audit.VerifyReport `json:"report"`
	}
	cases["verify"] = pair{legacyVerify{OK: true, Report: rep}, protocol.AuditVerify{OK: true, Report: (*protocol.VerifyReport)(rep)}}
	cases["verify/nil"] = pair{legacyVerify{Error: "e"}, protocol.AuditVerify{Error: "e"}}
	for name, e := range map[string]permission.Effective{"full": eff, "zero": {}} {
		cases["effective/"+name] = pair{e, effectiveView(e)}
	}

	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			old, err := json.Marshal(tc.old)
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(tc.new)
			if err != nil {
				t.Fatal(err)
			}
			if string(old) != string(got) {
				t.Errorf("wire bytes changed:\nold %s\nnew %s", old, got)
			}
		})
	}
}
