package daemon

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/approval"
)

// TestApprovalsBoundTheHeap: what one user's pending approvals hold of the daemon's heap stays
// within the queue's bound on them: calls waiting with large Writes (their input decoded, the
// policy's view of it, a preview's diff and contents) are counted whole, so the queue refuses
// more before they hold past it.
func TestApprovalsBoundTheHeap(t *testing.T) {
	td := startDaemon(t, "")
	dir := rootDir(t)
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"default"}`, dir))
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	content := strings.Repeat("A", 400_000)
	queued := 0
	for i := range 200 {
		r := td.callRaw(t, s.ID, callBody("Write", fmt.Sprintf(`{"file_path":%q,"content":%q}`, filepath.Join(dir, fmt.Sprint("w", i)), content), ""))
		if r.ApprovalID == "" {
			if r.Error == nil || !strings.Contains(r.Error.Message, "approval queue is full") {
				t.Fatalf("call %d: neither queued nor refused for a full queue: %+v %+v", i, r.Decision, r.Error)
			}
			break
		}
		queued++
	}
	held := heap() - before
	t.Logf("%d Writes of 400 KB queued, holding %d MiB of the heap", queued, held>>20)
	if queued == 0 || held > approval.MaxPendingBytesPerOwner+2<<20 {
		t.Errorf("%d pending Writes hold %d MiB of the heap, past the queue's %d MiB", queued, held>>20, approval.MaxPendingBytesPerOwner>>20)
	}
}
