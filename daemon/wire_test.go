package daemon

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/sandboxd/sandboxd/executor"
	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/internal/testutil"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/protocol"
)

// The protocol types a call's result is made of have exactly the JSON fields of the
// executor's and permission's types they stand for.
func TestCallWireTypesMatch(t *testing.T) {
	t.Parallel()
	testutil.SameJSONFields(t, "Decision", protocol.Decision{}, permission.Decision{}, true)
	testutil.SameJSONFields(t, "AutoStage", protocol.AutoStage{}, permission.AutoStage{}, true)
	testutil.SameJSONFields(t, "Block", protocol.Block{}, executor.Block{}, true)
	testutil.SameJSONFields(t, "Event", protocol.Event{}, executor.Event{}, true)
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

// callResult gives the bytes that encoding the daemon's own types gave.
func TestCallResultBytesUnchanged(t *testing.T) {
	t.Parallel()
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
	for name, o := range outcomes {
		old, err := json.Marshal(legacyResult(o))
		if err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(callResult(o))
		if err != nil {
			t.Fatal(err)
		}
		if string(old) != string(got) {
			t.Errorf("%s: wire bytes changed:\nold %s\nnew %s", name, old, got)
		}
	}
	ev := executor.Event{Kind: "stdout", Data: "hi <b>"}
	old, _ := json.Marshal(struct {
		Event *executor.Event `json:"event,omitempty"`
	}{&ev})
	pe := protocol.Event(ev)
	got, _ := json.Marshal(protocol.StreamLine{Event: &pe})
	if string(old) != string(got) {
		t.Errorf("stream event: wire bytes changed:\nold %s\nnew %s", old, got)
	}
}
