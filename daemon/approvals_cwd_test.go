package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/permission"
)

// TestApprovedCallKeepsItsCwd: a call approved after its session's working directory moved is
// denied, not run in the new one, where its relative paths name other files.
func TestApprovedCallKeepsItsCwd(t *testing.T) {
	td := startDaemon(t, "")
	dir := rootDir(t)
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"default"}`, dir))
	r := td.callRaw(t, s.ID, callBody("Bash", `{"command":"touch made"}`, ""))
	if behavior(r) != permission.Ask || r.ApprovalID == "" {
		t.Fatalf("want an ask: %+v", r.Decision)
	}
	if code, b := td.do(t, "PATCH", "/v1/sessions/"+s.ID, fmt.Sprintf(`{"cwd":%q}`, sub)); code != 200 {
		t.Fatalf("move the cwd: %d %s", code, b)
	}
	if code, b := td.answer(t, r.ApprovalID, `{"answer":"allow"}`); code != 200 {
		t.Fatalf("allow: %d %s", code, b)
	}
	r = td.callRaw(t, s.ID, fmt.Sprintf(`{"approval_id":%q}`, r.ApprovalID))
	if behavior(r) != permission.Deny || !strings.Contains(r.Decision.Reason, "working directory changed") {
		t.Errorf("resumed after the cwd moved: %+v", r.Decision)
	}
	for _, d := range []string{dir, sub} {
		if _, err := os.Stat(filepath.Join(d, "made")); err == nil {
			t.Errorf("the approved call ran in %s", d)
		}
	}
	// Unmoved, an approved call runs.
	r = td.callRaw(t, s.ID, callBody("Bash", `{"command":"touch made"}`, ""))
	if code, b := td.answer(t, r.ApprovalID, `{"answer":"allow"}`); code != 200 {
		t.Fatalf("allow: %d %s", code, b)
	}
	r = td.callRaw(t, s.ID, fmt.Sprintf(`{"approval_id":%q}`, r.ApprovalID))
	if behavior(r) != permission.Allow {
		t.Fatalf("resumed in its own cwd: %+v", r.Decision)
	}
	if _, err := os.Stat(filepath.Join(sub, "made")); err != nil {
		t.Errorf("the approved call did not run: %v", err)
	}
}
