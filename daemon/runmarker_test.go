package daemon

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/sandboxd/sandboxd/audit"
)

// TestUnfinishedCallsAndTasks: what a daemon that died left running is named by the next
// daemon.start: a call with no end, and a background task a call started until its
// task.end; another session's end under the same id ends nothing.
func TestUnfinishedCallsAndTasks(t *testing.T) {
	dir := t.TempDir()
	l, err := audit.Open(audit.Config{Dir: dir}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	caller := audit.Caller{UID: 1000}
	for _, r := range []*audit.Record{
		{Kind: audit.KindCallStart, Session: "s_a", ToolUseID: "dup"},
		{Kind: audit.KindCallStart, Session: "s_a", ToolUseID: "done"},
		{Kind: audit.KindCallEnd, Session: "s_a", ToolUseID: "done", Outcome: &audit.Outcome{}},
		{Kind: audit.KindCallStart, Session: "s_a", ToolUseID: "bg1"},
		{Kind: audit.KindCallEnd, Session: "s_a", ToolUseID: "bg1", Outcome: &audit.Outcome{TaskID: "t1"}},
		{Kind: audit.KindCallStart, Session: "s_a", ToolUseID: "bg2"},
		{Kind: audit.KindCallEnd, Session: "s_a", ToolUseID: "bg2", Outcome: &audit.Outcome{TaskID: "t2"}},
		{Kind: audit.KindTaskEnd, Session: "s_a", Tool: "Bash", Detail: map[string]string{"task_id": "t2", "status": "completed"}},
		// Another session's end under the same id ends nothing of s_a's.
		{Kind: audit.KindCallEnd, Session: "s_b", ToolUseID: "dup", Outcome: &audit.Outcome{}},
	} {
		r.Caller = &caller
		if err := l.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	u, err := unfinishedCalls(dir, &runMarker{Started: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if u.calls != 1 || !slices.Equal(u.callIDs, []string{"dup"}) {
		t.Errorf("unfinished calls %d %q, want the running dup only", u.calls, u.callIDs)
	}
	if u.tasks != 1 || !slices.Equal(u.taskIDs, []string{"t1"}) {
		t.Errorf("unfinished tasks %d %q, want t1 only", u.tasks, u.taskIDs)
	}
}
