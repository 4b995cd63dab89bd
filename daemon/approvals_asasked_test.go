package daemon

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/internal/testutil"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/protocol"
)

// TestApprovalShowsWhatRunsUnredacted: who answers an approval reads its input as it runs, not
// as redacted for the log; an admin who does not answer it, and the audit log, still get the
// redacted input. A secret-looking assignment whose value is a command substitution is code,
// not a secret: everyone reads it as written (audit.runsCode).
func TestApprovalShowsWhatRunsUnredacted(t *testing.T) {
	alice := testutil.CreateUser(t, "sbaua")
	bob := testutil.CreateUser(t, "sbaub")
	td := startDaemon(t, "admin_group: "+bob.Name+"\n")
	sid := sessionAs(t, td, alice, `,"mode":"default"`)
	const hidden = "hunter2-pwned-literal"
	const substituted = "touch visible-substitution"
	cmd := fmt.Sprintf(`MY_TOKEN="%s" X_TOKEN="$(%s)" true`, hidden, substituted)
	code, b := curlAs(t, td, alice, "POST", "/v1/sessions/"+sid+"/calls", callBody("Bash", fmt.Sprintf(`{"command":%q}`, cmd), ""), "")
	var res struct {
		ApprovalID string `json:"approval_id"`
		Decision   *struct {
			Behavior permission.Behavior `json:"behavior"`
		} `json:"decision"`
	}
	decodeInto(t, b, &res)
	if code != 200 || res.ApprovalID == "" {
		t.Fatalf("want an ask: %d %s", code, b)
	}
	_, b = curlAs(t, td, alice, "GET", "/v1/approvals", "", "")
	var list protocol.ApprovalList
	decodeInto(t, b, &list)
	if len(list.Approvals) != 1 || !strings.Contains(string(list.Approvals[0].Input), hidden) {
		t.Errorf("the owner is not shown what runs: %s", b)
	}
	_, b = curlAs(t, td, bob, "GET", "/v1/approvals", "", "")
	list = protocol.ApprovalList{}
	decodeInto(t, b, &list)
	if len(list.Approvals) != 1 || list.Approvals[0].ID != res.ApprovalID || strings.Contains(string(list.Approvals[0].Input), "pwned") ||
		!strings.Contains(string(list.Approvals[0].Input), substituted) {
		t.Errorf("the admin's view: %s", b)
	}
	for _, rec := range auditRecords(t, td) {
		if strings.Contains(string(rec.Input), "pwned") || len(rec.Input) > 0 && !strings.Contains(string(rec.Input), substituted) {
			t.Errorf("the audit log holds the secret, or hides the code: %s %s", rec.Kind, rec.Input)
		}
	}
}

// TestSuggestedRulesRedactedForOthers: a suggested rule is made of the command's words, so a
// token among them is redacted in the audit log and for an admin, as the input is.
func TestSuggestedRulesRedactedForOthers(t *testing.T) {
	alice := testutil.CreateUser(t, "sbsra")
	bob := testutil.CreateUser(t, "sbsrb")
	td := startDaemon(t, "admin_group: "+bob.Name+"\n")
	sid := sessionAs(t, td, alice, `,"mode":"default"`)
	token := "ghp_" + strings.Repeat("a1B2", 9)
	code, b := curlAs(t, td, alice, "POST", "/v1/sessions/"+sid+"/calls", callBody("Bash", fmt.Sprintf(`{"command":"mytool %s"}`, token), ""), "")
	if code != 200 || !strings.Contains(string(b), "approval_id") {
		t.Fatalf("want an ask: %d %s", code, b)
	}
	_, b = curlAs(t, td, alice, "GET", "/v1/approvals", "", "")
	if !strings.Contains(string(b), "Bash(mytool "+token+")") {
		t.Errorf("the owner's suggestion: %s", b)
	}
	_, b = curlAs(t, td, bob, "GET", "/v1/approvals", "", "")
	if strings.Contains(string(b), token) {
		t.Errorf("the admin sees the token: %s", b)
	}
	// The reason quotes the rule that asked, and the rule the token: redacted for the admin too.
	sid = sessionAs(t, td, alice, fmt.Sprintf(`,"mode":"default","rules":{"ask":["Bash(othertool %s:*)"]}`, token))
	code, b = curlAs(t, td, alice, "POST", "/v1/sessions/"+sid+"/calls", callBody("Bash", fmt.Sprintf(`{"command":"othertool %s x"}`, token), ""), "")
	if code != 200 || !strings.Contains(string(b), "approval_id") {
		t.Fatalf("want an ask by the rule: %d %s", code, b)
	}
	_, b = curlAs(t, td, bob, "GET", "/v1/approvals", "", "")
	if !strings.Contains(string(b), "othertool") || strings.Contains(string(b), token) {
		t.Errorf("the admin's view of an ask whose reason quotes the token: %s", b)
	}
	for _, rec := range auditRecords(t, td) {
		for k, v := range rec.Detail {
			if strings.Contains(v, token) {
				t.Errorf("%s record's %s holds the token: %s", rec.Kind, k, v)
			}
		}
	}
}
