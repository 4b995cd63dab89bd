package executor

import (
	"strings"
	"testing"
)

// TestNarrowedBeforeStart: a command decided before its session narrowed, and started after
// (StopTasks ran before it existed), is stopped at once, in the foreground and the background.
func TestNarrowedBeforeStart(t *testing.T) {
	e := newToolEnv(t)
	e.s.MarkNarrowed() // after e.call's decision would have read the count, as 0
	r := e.mustCall(t, "Bash", Input{"command": "sleep 30; echo ran"})
	if text := text(r); r.Data["stdout"] != "" || !strings.Contains(text, "session (or a parent's) was changed") || r.Data["killed_by"] != KilledNarrowed {
		t.Errorf("a foreground command decided before a narrowing: %q, want it stopped, saying why", text)
	}
	r = e.mustCall(t, "Bash", Input{"command": "sleep 30", "run_in_background": true})
	id, _ := r.Data["backgroundTaskId"].(string)
	task, err := e.h.task(e.s, id)
	if err != nil {
		t.Fatal(err)
	}
	<-task.run.done
	if res, _, _ := task.run.result(); res == nil || res.KilledBy != KilledNarrowed {
		t.Errorf("a background command decided before a narrowing: %+v, want it killed by %s", res, KilledNarrowed)
	}
}
