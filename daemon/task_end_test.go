package daemon

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/internal/testutil"
	"github.com/sandboxd/sandboxd/protocol"
)

// TestTaskEndAudited: a background task's end is written to the audit log (task.end) with its
// exit code and what the sweep moved aside while it ran, and BashOutput says the same: a
// task may end long after its call's call.end.
func TestTaskEndAudited(t *testing.T) {
	u := testutil.CreateUser(t, "sbtend")
	td := startDaemon(t, "")
	sid := sessionAs(t, td, u, `,"mode":"bypassPermissions"`)
	input, _ := json.Marshal(map[string]any{"command": `m=.mcp.js; echo '{}' > ${m}on; sleep 0.2; exit 3`, "run_in_background": true})
	code, b := curlAs(t, td, u, "POST", "/v1/sessions/"+sid+"/calls", callBody("Bash", string(input), ""), "")
	var res protocol.CallResult
	decodeInto(t, b, &res)
	if code != http.StatusOK || res.IsError {
		t.Fatalf("background task: %d %s", code, b)
	}
	id, _ := res.Data["backgroundTaskId"].(string)
	if id == "" {
		t.Fatalf("no task id in %s", b)
	}
	if r := callEndNaming(t, td, sid, id); r.Outcome.Timeout {
		t.Errorf("a task started in the background: call.end %+v says it timed out", r.Outcome)
	}
	moved := filepath.Join(u.Home, ".mcp.json")
	var end *audit.Record
	waitFor(t, func() bool {
		for _, r := range auditRecords(t, td) {
			if r.Kind == audit.KindTaskEnd && r.Detail["task_id"] == id {
				end = &r
				return true
			}
		}
		return false
	})
	if end.Session != sid || end.Caller == nil || end.Caller.UID != u.UID || end.Detail["exit_code"] != "3" ||
		!strings.Contains(end.Detail["moved_aside"], moved) {
		t.Errorf("task.end record %+v, want session %s, uid %d, exit 3 and %s moved aside", end, sid, u.UID, moved)
	}
	out, _ := json.Marshal(map[string]any{"bash_id": id})
	code, b = curlAs(t, td, u, "POST", "/v1/sessions/"+sid+"/calls", callBody("BashOutput", string(out), ""), "")
	if code != http.StatusOK || !strings.Contains(string(b), "<exit_code>3</exit_code>") || !strings.Contains(string(b), "moved aside") {
		t.Errorf("BashOutput: %d %s, want the exit code and what was moved aside", code, b)
	}
}

// callEndNaming finds the session's call.end record whose outcome names task id.
func callEndNaming(t *testing.T, td *testDaemon, sid, id string) audit.Record {
	t.Helper()
	for _, r := range auditRecords(t, td) {
		if r.Kind == audit.KindCallEnd && r.Session == sid && r.Outcome != nil && r.Outcome.TaskID == id {
			return r
		}
	}
	t.Fatalf("no call.end of session %s names task %s", sid, id)
	return audit.Record{}
}

// TestTimedOutCallNamesItsTask: a Bash command past its timeout goes on as a background task
// (as the agents' Bash does): its call.end says it timed out and names the task, and the
// task's task.end has the command's own exit code, so the log never reads as though the
// command ended with the call.
func TestTimedOutCallNamesItsTask(t *testing.T) {
	u := testutil.CreateUser(t, "sbtmo")
	td := startDaemon(t, "")
	sid := sessionAs(t, td, u, `,"mode":"bypassPermissions"`)
	input, _ := json.Marshal(map[string]any{"command": "sleep 2; exit 7", "timeout": 1000})
	code, b := curlAs(t, td, u, "POST", "/v1/sessions/"+sid+"/calls", callBody("Bash", string(input), ""), "")
	var res protocol.CallResult
	decodeInto(t, b, &res)
	id, _ := res.Data["backgroundTaskId"].(string)
	if to, _ := res.Data["timed_out"].(bool); code != http.StatusOK || id == "" || !to {
		t.Fatalf("a command past its timeout: %d %s, want it moved to a background task", code, b)
	}
	if r := callEndNaming(t, td, sid, id); !r.Outcome.Timeout {
		t.Errorf("call.end %+v: want it to say the command timed out", r.Outcome)
	}
	var end map[string]string
	waitFor(t, func() bool {
		for _, r := range auditRecords(t, td) {
			if r.Kind == audit.KindTaskEnd && r.Detail["task_id"] == id {
				end = r.Detail
				return true
			}
		}
		return false
	})
	if end["exit_code"] != "7" {
		t.Errorf("task.end %v, want the command's exit code 7", end)
	}
}
