package daemon

import (
	"fmt"
	"testing"

	"github.com/sandboxd/sandboxd/permission"
)

// TestDeletedSessionApprovalsAudited: the approvals a deleted session leaves unanswered are
// denied, and each denial is in the audit log as an approval.resolve, saying who ended it.
func TestDeletedSessionApprovalsAudited(t *testing.T) {
	td := startDaemon(t, "")
	dir := rootDir(t)
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"default"}`, dir))
	r := td.callRaw(t, s.ID, callBody("Bash", `{"command":"touch made"}`, ""))
	if behavior(r) != permission.Ask || r.ApprovalID == "" {
		t.Fatalf("want an ask: %+v", r.Decision)
	}
	if code, b := td.do(t, "DELETE", "/v1/sessions/"+s.ID, ""); code != 204 {
		t.Fatalf("delete: %d %s", code, b)
	}
	if code, _ := td.answer(t, r.ApprovalID, `{"answer":"allow"}`); code == 200 {
		t.Fatal("an approval of a deleted session was answered")
	}
	var found int
	for _, rec := range auditRecords(t, td) {
		if rec.Kind != "approval.resolve" || rec.Detail["approval_id"] != r.ApprovalID {
			continue
		}
		found++
		if rec.Detail["answer"] != "deny" || rec.Detail["by"] != "session_deleted" || rec.Caller == nil || rec.Caller.UID != 0 {
			t.Errorf("the denial's record: %+v caller %+v", rec.Detail, rec.Caller)
		}
	}
	if found != 1 {
		t.Fatalf("%d approval.resolve records of %s, want 1", found, r.ApprovalID)
	}
}
