package daemon

import (
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/protocol"
)

// TestFinishedTasksMemoryBounded: a user's finished background tasks are kept in bounded
// number over all its sessions, and none keeps more than a text head of its output in the
// daemon's memory, though each printed an image's worth: a user starting task after task
// cannot grow the daemon without bound.
func TestFinishedTasksMemoryBounded(t *testing.T) {
	td := startDaemon(t, "limits:\n  tasks_per_user: 2\n")
	const perTask = 3_800_000
	cmd := fmt.Sprintf(`printf '\211PNG\r\n\032\n'; head -c %d /dev/zero`, perTask)
	input, _ := json.Marshal(map[string]any{"command": cmd, "run_in_background": true})
	var sessions []string
	for range 3 {
		sessions = append(sessions, td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions"}`, rootDir(t))).ID)
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse
	}
	before := heap()
	tasks := func(id string) []map[string]any {
		code, b := td.do(t, "GET", "/v1/sessions/"+id+"/tasks", "")
		if code != http.StatusOK {
			t.Fatalf("tasks: %d %s", code, b)
		}
		var tl protocol.TaskList
		decodeInto(t, b, &tl)
		return tl.Tasks
	}
	var last, lastSession string
	for i := range 24 {
		id := sessions[i%len(sessions)]
		// At most tasks_per_user run at once: wait for the session's tasks to finish.
		deadline := time.Now().Add(30 * time.Second)
		for {
			running := 0
			for _, s := range sessions {
				for _, tk := range tasks(s) {
					if tk["status"] == "running" {
						running++
					}
				}
			}
			if running < 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("tasks do not finish")
			}
			time.Sleep(20 * time.Millisecond)
		}
		code, res := td.call(t, id, "Bash", string(input))
		if code != http.StatusOK || res.IsError {
			t.Fatalf("task %d: %d %+v", i, code, res)
		}
		last, lastSession = fmt.Sprint(res.Data["backgroundTaskId"]), id
	}
	time.Sleep(time.Second) // the last ones finish
	kept := 0
	for _, s := range sessions {
		kept += len(tasks(s))
	}
	if kept > 2*2+1 {
		t.Errorf("%d tasks kept over the user's sessions, want at most %d (twice tasks_per_user)", kept, 2*2+1)
	}
	if grew := int64(heap()) - int64(before); grew > 40<<20 {
		t.Errorf("the daemon's heap grew by %d MiB for finished tasks", grew>>20)
	}
	// What a task printed is still there to read.
	code, res := td.call(t, lastSession, "BashOutput", fmt.Sprintf(`{"bash_id":%q}`, last))
	if code != http.StatusOK || res.IsError {
		t.Fatalf("BashOutput: %d %+v", code, res)
	}
	if out, _ := res.Data["stdout"].(string); len(out) == 0 {
		t.Errorf("BashOutput read nothing: %+v", res.Data)
	}
}
