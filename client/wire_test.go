package client

import (
	"reflect"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/approval"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/executor"
	"github.com/sandboxd/sandboxd/permission"
)

// The client's wire types are copies of api/'s (importing api/ would link the daemon into
// every client): each field the client has must exist in api/'s type with the same JSON name
// and kind, and the request bodies and the types printed whole must have every field api/'s have.
func TestWireMatchesAPI(t *testing.T) {
	cases := []struct {
		name     string
		ours     any
		theirs   any
		complete bool // every api/ field is here too
	}{
		{"ErrorBody", ErrorBody{}, api.ErrorBody{}, true},
		{"Rules", Rules{}, api.Rules{}, true},
		{"CreateSession", CreateSession{}, api.CreateSession{}, true},
		{"UpdateSession", UpdateSession{}, api.UpdateSession{}, true},
		{"Session", Session{}, api.Session{}, true},
		{"SessionList", SessionList{}, api.SessionList{}, true},
		{"CallRequest", CallRequest{}, api.CallRequest{}, true},
		{"CallResult", CallResult{}, api.CallResult{}, true},
		{"Decision", Decision{}, permission.Decision{}, true},
		{"Block", Block{}, executor.Block{}, true},
		{"Event", Event{}, executor.Event{}, true},
		{"StreamLine", StreamLine{}, api.StreamLine{}, true},
		{"ToolList", ToolList{}, api.ToolList{}, true},
		{"RuleInfo", RuleInfo{}, api.RuleInfo{}, true},
		{"RuleList", RuleList{}, api.RuleList{}, false},
		{"Effective", Effective{}, permission.Effective{}, false},
		{"TaskList", TaskList{}, api.TaskList{}, true},
		{"Health", Health{}, api.Health{}, true},
		{"AuditKey", AuditKey{}, api.AuditKey{}, true},
		{"AuditVerify", AuditVerify{}, api.AuditVerify{}, true},
		{"VerifyReport", VerifyReport{}, audit.VerifyReport{}, true},
		{"Record", Record{}, audit.Record{}, false},
		{"Approval", Approval{}, approval.Approval{}, true},
		{"ApprovalEvent", ApprovalEvent{}, approval.Event{}, true},
		{"ApprovalList", ApprovalList{}, api.ApprovalList{}, true},
		{"ApprovalAnswer", ApprovalAnswer{}, api.ApprovalAnswer{}, true},
		{"ApprovalAnswered", ApprovalAnswered{}, api.ApprovalAnswered{}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			compare(t, tc.name, reflect.TypeOf(tc.ours), reflect.TypeOf(tc.theirs), tc.complete)
		})
	}
	if DefaultSocket != config.DefaultSocket {
		t.Errorf("DefaultSocket %q, config's %q", DefaultSocket, config.DefaultSocket)
	}
	if Allow != string(permission.Allow) || Deny != string(permission.Deny) || Ask != string(permission.Ask) {
		t.Error("behavior names differ from permission's")
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

func compare(t *testing.T, path string, ours, theirs reflect.Type, complete bool) {
	t.Helper()
	of, tf := jsonFields(ours), jsonFields(theirs)
	for name, f := range of {
		g, ok := tf[name]
		if !ok {
			t.Errorf("%s.%s: not in api/'s type", path, name)
			continue
		}
		a, b := deref(f.Type), deref(g.Type)
		if a.Kind() != b.Kind() {
			t.Errorf("%s.%s: kind %s, api/'s %s", path, name, a.Kind(), b.Kind())
			continue
		}
		if a.Kind() == reflect.Struct && a.PkgPath() != "time" {
			compare(t, path+"."+name, a, b, complete && b.PkgPath() != "github.com/sandboxd/sandboxd/permission")
		}
	}
	if complete {
		for name := range tf {
			if _, ok := of[name]; !ok {
				t.Errorf("%s.%s: api/ has it, the client does not", path, name)
			}
		}
	}
}
