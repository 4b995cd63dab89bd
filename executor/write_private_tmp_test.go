package executor

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/permission"
)

// TestWritePrivateTmpRefused: a Write or Edit the daemon runs to /tmp or /dev/shm outside the
// session's dirs is refused, saying that place is private to each call, before anyone is asked:
// it would land in the file worker's own tmpfs, which no Bash call and not the host sees. A
// session dir under the host's /tmp is written as any other, and an agent's own Write, decided
// for its hook (decide, unconfined), is not refused: it writes the host's /tmp itself.
func TestWritePrivateTmpRefused(t *testing.T) {
	e := newToolEnv(t) // its session dir lies under the host's /tmp
	reg, err := NewRegistry(BuiltinDefs(e.h)...)
	if err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, d *decideBy, tool string, in map[string]any, decide bool) *Outcome {
		t.Helper()
		p := NewPipeline(zaptest.NewLogger(t), reg, e.h, d, &memRecorder{}, nil)
		b, _ := json.Marshal(in)
		r := &Request{Tool: tool, Input: b, ToolUseID: "toolu_" + time.Now().Format("150405.000000000")}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if decide {
			r.Unconfined = true
			return p.Decide(ctx, e.s, e.s.Owner, r)
		}
		return p.Run(ctx, e.s, e.s.Owner, r, func(Event) {})
	}
	hostTmp, err := os.MkdirTemp("/tmp", "sandboxd-private-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(hostTmp) })
	os.Chmod(hostTmp, 0o777)
	e.file(t, "edited.txt", "old\n")
	e.mustCall(t, "Read", Input{"file_path": filepath.Join(e.dir, "edited.txt")})

	for _, tc := range []struct {
		name string
		d    *decideBy
		tool string
		in   map[string]any
	}{
		{"Write to /tmp", allow(), "Write", map[string]any{"file_path": filepath.Join(hostTmp, "x.txt"), "content": "visible?\n"}},
		{"Write to /dev/shm", allow(), "Write", map[string]any{"file_path": "/dev/shm/sandboxd-x.txt", "content": "visible?\n"}},
		{"Edit in /tmp", allow(), "Edit", map[string]any{"file_path": filepath.Join(hostTmp, "x.txt"), "old_string": "a", "new_string": "b"}},
		{"MultiEdit in /tmp", allow(), "MultiEdit", map[string]any{"file_path": "/tmp/x.txt", "edits": []any{map[string]any{"old_string": "a", "new_string": "b"}}}},
		{"asked Write to /tmp", &decideBy{d: permission.Decision{Behavior: permission.Ask, Reason: "needs approval"}}, "Write", map[string]any{"file_path": "/tmp/x.txt", "content": "x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := run(t, tc.d, tc.tool, tc.in, false)
			if out.Err == nil || out.Err.Code != errcode.Validation || !strings.Contains(out.Err.Error(), "private to each call") ||
				!strings.Contains(out.Err.Error(), "inside the session's directories instead ("+e.dir) || out.Ran {
				t.Fatalf("err %v (ran %v), want a refusal naming the private /tmp and the session's dirs", out.Err, out.Ran)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(hostTmp, "x.txt")); !os.IsNotExist(err) {
		t.Errorf("the host's %s/x.txt: %v", hostTmp, err)
	}
	t.Run("session dir under the host's /tmp", func(t *testing.T) {
		p := filepath.Join(e.dir, "made.txt")
		if out := run(t, allow(), "Write", map[string]any{"file_path": p, "content": "seen\n"}, false); out.Err != nil {
			t.Fatalf("write in the session dir: %v", out.Err)
		}
		if b, err := os.ReadFile(p); err != nil || string(b) != "seen\n" {
			t.Errorf("the host reads %q, %v", b, err)
		}
		if out := run(t, allow(), "Edit", map[string]any{"file_path": filepath.Join(e.dir, "edited.txt"), "old_string": "old", "new_string": "new"}, false); out.Err != nil {
			t.Fatalf("edit in the session dir: %v", out.Err)
		}
	})
	t.Run("agent's own Write decided for its hook", func(t *testing.T) {
		out := run(t, allow(), "Write", map[string]any{"file_path": filepath.Join(hostTmp, "hook.txt"), "content": "x"}, true)
		if out.Err != nil || out.Decision == nil || out.Decision.Behavior != permission.Allow {
			t.Fatalf("decide: err %v, decision %+v", out.Err, out.Decision)
		}
	})
}
