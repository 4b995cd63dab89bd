package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandboxd/sandboxd/permission"
)

// TestAncestorNarrowingBindsDescendants: a session narrowed to plan binds every session below
// it, not only its children: a grandchild made in acceptEdits writes nothing once the top of
// its chain is in plan, and runs again as before once that is undone.
func TestAncestorNarrowingBindsDescendants(t *testing.T) {
	td := startDaemon(t, "")
	dir := rootDir(t)
	top := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"acceptEdits"}`, dir))
	mid := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"acceptEdits","parent_id":%q}`, dir, top.ID))
	leaf := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"acceptEdits","parent_id":%q}`, dir, mid.ID))
	if code, b := td.do(t, "PATCH", "/v1/sessions/"+top.ID, `{"mode":"plan"}`); code != 200 {
		t.Fatalf("narrow the top session: %d %s", code, b)
	}
	for _, s := range []struct{ name, id string }{{"child", mid.ID}, {"grandchild", leaf.ID}} {
		f := filepath.Join(dir, s.name)
		r := td.callRaw(t, s.id, callBody("Write", fmt.Sprintf(`{"file_path":%q,"content":"x"}`, f), ""))
		if behavior(r) != permission.Deny {
			t.Errorf("%s under a plan session: Write decided %+v", s.name, r.Decision)
		}
		if _, err := os.Stat(f); err == nil {
			t.Errorf("%s under a plan session wrote %s", s.name, f)
		}
	}
	if code, b := td.do(t, "PATCH", "/v1/sessions/"+top.ID, `{"mode":"acceptEdits"}`); code != 200 {
		t.Fatalf("widen the top session back: %d %s", code, b)
	}
	f := filepath.Join(dir, "again")
	r := td.callRaw(t, leaf.ID, callBody("Write", fmt.Sprintf(`{"file_path":%q,"content":"x"}`, f), ""))
	if behavior(r) != permission.Allow {
		t.Fatalf("grandchild once the top is back in acceptEdits: %+v", r.Decision)
	}
}

// TestBubbleBoundByAncestors: a bubble session's asks are answered as its ancestors' own
// calls would be: under a session in plan a write is denied, not put to a person, and under
// an auto session narrowed by its own parent to default, a person answers, not the classifier.
func TestBubbleBoundByAncestors(t *testing.T) {
	td := startDaemon(t, "")
	dir := rootDir(t)

	plan := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"plan"}`, dir))
	child := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bubble","parent_id":%q}`, dir, plan.ID))
	r := td.callRaw(t, child.ID, callBody("Bash", `{"command":"mkdir -p under-plan"}`, ""))
	if behavior(r) != permission.Deny || r.ApprovalID != "" {
		t.Errorf("a bubble session's write under a plan parent: %+v approval %q", r.Decision, r.ApprovalID)
	}

	top := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"auto"}`, dir))
	mid := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"auto","parent_id":%q}`, dir, top.ID))
	leaf := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bubble","parent_id":%q}`, dir, mid.ID))
	if code, b := td.do(t, "PATCH", "/v1/sessions/"+top.ID, `{"mode":"default"}`); code != 200 {
		t.Fatalf("narrow the top session: %d %s", code, b)
	}
	r = td.callRaw(t, leaf.ID, callBody("Bash", `{"command":"mkdir -p by-classifier"}`, ""))
	if behavior(r) != permission.Ask || r.ApprovalID == "" {
		t.Errorf("a bubble session's write under an auto parent narrowed to default: %+v", r.Decision)
	}
	for _, d := range []string{"under-plan", "by-classifier"} {
		if _, err := os.Stat(filepath.Join(dir, d)); err == nil {
			t.Errorf("%s was made", d)
		}
	}
}
