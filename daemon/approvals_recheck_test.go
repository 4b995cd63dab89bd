package daemon

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/protocol"
)

// TestApprovalRecheckedBeforeRun: an allow answers the question asked, not what changed
// since: a deny rule added, or the mode narrowed to plan, between the ask and the resume
// stops the approved call, on the resume and on a call waiting for its answer alike; with
// nothing changed it runs.
func TestApprovalRecheckedBeforeRun(t *testing.T) {
	td := startDaemon(t, "")
	dir := rootDir(t)
	for _, tc := range []struct {
		name, change string
		wantRun      bool
	}{
		{"nothing changed", "", true},
		{"a deny rule added", `{"rules":{"deny":["Bash(touch:*)"]}}`, false},
		{"the mode narrowed to plan", `{"mode":"plan"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"default"}`, dir))
			f := filepath.Join(dir, fmt.Sprintf("f-%s", s.ID))
			r := td.callRaw(t, s.ID, callBody("Bash", fmt.Sprintf(`{"command":"touch %s"}`, f), ""))
			if behavior(r) != permission.Ask || r.ApprovalID == "" {
				t.Fatalf("want an ask: %+v", r)
			}
			if tc.change != "" {
				if code, b := td.do(t, "PATCH", "/v1/sessions/"+s.ID, tc.change); code != http.StatusOK {
					t.Fatalf("patch: %d %s", code, b)
				}
			}
			if code, b := td.answer(t, r.ApprovalID, `{"answer":"allow"}`); code != http.StatusOK {
				t.Fatalf("answer: %d %s", code, b)
			}
			r = td.callRaw(t, s.ID, fmt.Sprintf(`{"approval_id":%q}`, r.ApprovalID))
			_, err := os.Stat(f)
			ran := err == nil
			if ran != tc.wantRun || r.IsError == tc.wantRun {
				t.Fatalf("ran %v (want %v): %+v", ran, tc.wantRun, r)
			}
			if !tc.wantRun && (behavior(r) != permission.Deny || r.Decision.Step != "recheck") {
				t.Errorf("decision %+v, want a recheck deny", r.Decision)
			}
		})
	}
	t.Run("a deny rule added while the call waits", func(t *testing.T) {
		s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"default"}`, dir))
		f := filepath.Join(dir, "waited")
		got := make(chan protocol.CallResult, 1)
		go func() {
			got <- td.callRaw(t, s.ID, callBody("Bash", fmt.Sprintf(`{"command":"touch %s"}`, f), `,"wait_ms":20000`))
		}()
		var id string
		for deadline := time.Now().Add(10 * time.Second); id == ""; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("no approval queued")
			}
			_, b := td.do(t, "GET", "/v1/approvals", "")
			var list protocol.ApprovalList
			decodeInto(t, b, &list)
			for _, a := range list.Approvals {
				if a.Session == s.ID {
					id = a.ID
				}
			}
		}
		if code, b := td.do(t, "PATCH", "/v1/sessions/"+s.ID, `{"rules":{"deny":["Bash(touch:*)"]}}`); code != http.StatusOK {
			t.Fatalf("patch: %d %s", code, b)
		}
		if code, b := td.answer(t, id, `{"answer":"allow"}`); code != http.StatusOK {
			t.Fatalf("answer: %d %s", code, b)
		}
		r := <-got
		if _, err := os.Stat(f); err == nil || !r.IsError || behavior(r) != permission.Deny {
			t.Fatalf("the waiting call ran or was not denied: %+v", r)
		}
	})
}
