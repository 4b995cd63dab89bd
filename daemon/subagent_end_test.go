package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/internal/harness"
	"github.com/sandboxd/sandboxd/internal/testutil"
	"github.com/sandboxd/sandboxd/protocol"
)

// TestDeletingSessionEndsSubAgents: deleting a session (as its owner, or as an admin ending a
// runaway agent) ends its sub-agents' sessions at every depth, what they run included, with a
// session.delete record saying whose end it was. A session aside stays.
func TestDeletingSessionEndsSubAgents(t *testing.T) {
	u := testutil.CreateUser(t, "sbsae")
	td := startDaemon(t, "")
	parent := sessionAs(t, td, u, `,"mode":"bypassPermissions"`)
	child := sessionAs(t, td, u, fmt.Sprintf(`,"parent_id":%q`, parent))
	grandchild := sessionAs(t, td, u, fmt.Sprintf(`,"parent_id":%q`, child))
	aside := sessionAs(t, td, u, "")
	input, _ := json.Marshal(map[string]any{"command": "sleep 300", "run_in_background": true})
	code, b := curlAs(t, td, u, "POST", "/v1/sessions/"+grandchild+"/calls", callBody("Bash", string(input), ""), "")
	var res protocol.CallResult
	decodeInto(t, b, &res)
	if code != http.StatusOK || res.IsError {
		t.Fatalf("background task in the grandchild: %d %s", code, b)
	}
	sleeping := func() int { return len(sleepersOf(u.UID)) }
	waitFor(t, func() bool { return sleeping() > 0 })

	if code, b := curlAs(t, td, u, "DELETE", "/v1/sessions/"+parent, "", ""); code != http.StatusNoContent {
		t.Fatalf("delete the parent: %d %s", code, b)
	}
	for _, id := range []string{parent, child, grandchild} {
		if code, _ := curlAs(t, td, u, "GET", "/v1/sessions/"+id, "", ""); code != http.StatusNotFound {
			t.Errorf("session %s is still there after its ancestor was deleted: %d", id, code)
		}
	}
	if code, _ := curlAs(t, td, u, "GET", "/v1/sessions/"+aside, "", ""); code != http.StatusOK {
		t.Errorf("a session outside the tree went too: %d", code)
	}
	waitFor(t, func() bool { return sleeping() == 0 })
	ended := map[string]string{}
	for _, r := range auditRecords(t, td) {
		if r.Kind == audit.KindSessionDelete {
			ended[r.Session] = r.Detail["reason"] + "/" + r.Detail["parent"]
		}
	}
	if want := "parent_deleted/" + parent; ended[child] != want {
		t.Errorf("the child's session.delete: %q, want %q", ended[child], want)
	}
	if want := "parent_deleted/" + parent; ended[grandchild] != want {
		t.Errorf("the grandchild's session.delete: %q, want %q", ended[grandchild], want)
	}
	if _, ok := ended[parent]; !ok {
		t.Error("no session.delete record of the parent")
	}
}

// TestIdleParentWaitsForSubAgent: a session whose sub-agent is at work is not idle, however
// long since its own last request; once the whole tree is idle, it ends as one.
func TestIdleParentWaitsForSubAgent(t *testing.T) {
	u := testutil.CreateUser(t, "sbsai")
	td := startDaemon(t, "")
	parent := sessionAs(t, td, u, "")
	child := sessionAs(t, td, u, fmt.Sprintf(`,"parent_id":%q`, parent))
	// The parent's last request was long ago; the child's is now.
	at := func(id string, when time.Time) {
		v := &atomic.Int64{}
		v.Store(when.UnixNano())
		td.d.core.activity.last.Store(id, v)
	}
	at(parent, time.Now().Add(-48*time.Hour))
	at(child, time.Now())
	if n := td.d.core.expireIdle(context.Background(), time.Now().Add(time.Hour)); n != 0 {
		t.Fatalf("expired %d sessions while the sub-agent works", n)
	}
	if n := td.d.core.expireIdle(context.Background(), time.Now().Add(49*time.Hour)); n != 2 {
		t.Fatalf("expired %d sessions once all were idle, want 2", n)
	}
	for _, id := range []string{parent, child} {
		if code, _ := curlAs(t, td, u, "GET", "/v1/sessions/"+id, "", ""); code != http.StatusNotFound {
			t.Errorf("session %s is still there: %d", id, code)
		}
	}
}

// sleepersOf are the pids of uid's processes running sleep: the background commands the task
// tests start.
func sleepersOf(uid uint32) []int {
	var pids []int
	for _, pid := range testutil.ProcessesOf(uid) {
		if harness.ProcComm(pid) == "sleep" {
			pids = append(pids, pid)
		}
	}
	return pids
}
