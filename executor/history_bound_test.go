package executor

import (
	"context"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/permission"
)

// TestHistoryKeepsInputsBounded: a session remembers each decided call for the classifier's
// context, in every mode, with its input cut as the audit log cuts one. Whole, each held a
// request body's worth (max_request_bytes), 100 a session and 64 sessions a user: one user's
// large denied Writes grew the daemon by gigabytes for as long as the sessions lived.
func TestHistoryKeepsInputsBounded(t *testing.T) {
	p, s := newTestPipeline(t, allow(), &memRecorder{}, fakeBashDef())
	st := &state{req: req("Bash", `{"command":"ls"}`), sess: s, caller: s.Owner}
	if err := stepLookup(context.Background(), p, st); err != nil {
		t.Fatal(err)
	}
	st.call.Input = Input{"command": "echo " + strings.Repeat("x", 1<<20)}
	st.decision = &permission.Decision{Behavior: permission.Deny, Reason: "no"}
	for range 3 {
		rememberCall(st)
	}
	for _, c := range s.History.Last(100) {
		if len(c) > 2*historyInputBytes {
			t.Fatalf("a remembered call holds %d bytes", len(c))
		}
		if !strings.Contains(string(c), `"truncated":true`) {
			t.Fatalf("a cut input does not say so: %.200s", c)
		}
	}
	// The call being decided still goes to the classifier whole.
	if n := len(callSummary(st, 0)); n < 1<<20 {
		t.Fatalf("the call's own summary holds %d bytes", n)
	}
	// And as it runs, its secrets too: a redaction could hide from the classifier what runs.
	st.call.Input = Input{"command": "gh api -H 'Authorization: Bearer s3cr3tvalue' /user"}
	if c := string(callSummary(st, 0)); !strings.Contains(c, "s3cr3tvalue") {
		t.Errorf("the call decided reaches the classifier as %s", c)
	}
	if c := string(callSummary(st, historyInputBytes)); strings.Contains(c, "s3cr3tvalue") {
		t.Errorf("a remembered call keeps its secret: %s", c)
	}
}
