package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/permission"
)

// TestResumeUnderARunningIDKeepsTheApproval: a resume whose call's tool_use_id is that of a
// call of the session still running is refused (conflict), and the answered approval stays
// to resume once that call is over: the refusal must not use up what its owner approved.
func TestResumeUnderARunningIDKeepsTheApproval(t *testing.T) {
	td := startDaemon(t, "")
	dir := rootDir(t)
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"default","rules":{"allow":["Bash(sleep:*)"]}}`, dir))
	r := td.callRaw(t, s.ID, callBody("Bash", `{"command":"touch made"}`, `,"tool_use_id":"X1"`))
	if behavior(r) != permission.Ask || r.ApprovalID == "" {
		t.Fatalf("want an ask: %+v", r.Decision)
	}
	if code, b := td.answer(t, r.ApprovalID, `{"answer":"allow"}`); code != 200 {
		t.Fatalf("allow: %d %s", code, b)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		td.callRaw(t, s.ID, callBody("Bash", `{"command":"sleep 2"}`, `,"tool_use_id":"X1"`))
	}()
	time.Sleep(500 * time.Millisecond) // the sleep runs under X1
	busy := td.callRaw(t, s.ID, fmt.Sprintf(`{"approval_id":%q}`, r.ApprovalID))
	if busy.Error == nil || busy.Error.Class != "conflict" {
		t.Fatalf("a resume under the running id: %+v %+v", busy.Decision, busy.Error)
	}
	<-done
	r = td.callRaw(t, s.ID, fmt.Sprintf(`{"approval_id":%q}`, r.ApprovalID))
	if behavior(r) != permission.Allow || r.IsError {
		t.Fatalf("the resume once the id was free: %+v %+v", r.Decision, r.Error)
	}
	if _, err := os.Stat(filepath.Join(dir, "made")); err != nil {
		t.Errorf("the approved call did not run: %v", err)
	}
}
