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
