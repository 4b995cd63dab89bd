package daemon

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/permission"
)

// TestApprovalAnswerMessageBounded: a deny's message is a reason for the agent, bounded. It is
// held with the answered approval and written into the approval.resolve record, and neither
// counts against its user's bounds: a user asking and denying their own calls with a body's
// worth of message each grew the daemon by 600 MB and the log by 64 KiB a record.
func TestApprovalAnswerMessageBounded(t *testing.T) {
	td := startDaemon(t, "")
	dir := rootDir(t)
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"default"}`, dir))
	r := td.callRaw(t, s.ID, callBody("Bash", `{"command":"touch made"}`, ""))
	if behavior(r) != permission.Ask || r.ApprovalID == "" {
		t.Fatalf("want an ask: %+v", r)
	}
	big := strings.Repeat("M", 512<<10)
	code, b := td.answer(t, r.ApprovalID, fmt.Sprintf(`{"answer":"deny","message":%q}`, big))
	if code != http.StatusUnprocessableEntity {
		t.Fatalf("a 512 KiB message: %d %.200s, want 422", code, b)
	}
	for _, rec := range auditRecords(t, td) {
		if rec.Kind == "approval.resolve" {
			t.Fatalf("a refused answer was recorded: %v", rec.Detail["answer"])
		}
	}
	// Refused, it answered nothing: a message within the bound still denies.
	msg := strings.Repeat("m", maxAnswerMessage)
	if code, b := td.answer(t, r.ApprovalID, fmt.Sprintf(`{"answer":"deny","message":%q}`, msg)); code != http.StatusOK {
		t.Fatalf("a message of %d bytes: %d %.200s", maxAnswerMessage, code, b)
	}
	resumed := td.callRaw(t, s.ID, fmt.Sprintf(`{"approval_id":%q}`, r.ApprovalID))
	if behavior(resumed) != permission.Deny || !strings.Contains(resumed.Decision.Reason, msg) {
		t.Fatalf("resumed: %+v", resumed.Decision)
	}
}
