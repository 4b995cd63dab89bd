package executor

import (
	"encoding/base64"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/internal/errcode"
)

// The persisted results of one uid stay within persisted_bytes_per_user: the oldest go
// first, and an output larger than the whole limit is refused.
func TestPersistedBytesPerUser(t *testing.T) {
	env := newToolEnv(t)
	const limit = 1 << 20
	env.h.SetLimits(Limits{PersistedBytesPerUser: limit})
	var paths []string
	for i := range 5 {
		p, err := env.h.persistText(env.s, strings.Repeat(string(rune('a'+i)), 300<<10))
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
		if got := env.h.PersistedBytes(env.s.Owner.UID); got > limit {
			t.Fatalf("after %d results the user holds %d bytes, more than %d", i+1, got, limit)
		}
	}
	for i, p := range paths {
		_, err := os.Stat(p)
		if kept := err == nil; kept != (i >= 2) {
			t.Errorf("result %d kept = %v; want the oldest two evicted", i, kept)
		}
	}
	_, err := env.h.persistText(env.s, strings.Repeat("z", limit+1))
	if !errors.Is(err, errPersistedTooLarge) || errcode.Of(err) != errcode.TooLarge {
		t.Fatalf("an output larger than the limit: err = %v", err)
	}
	env.h.StopSession(env.s.ID)
	if got := env.h.PersistedBytes(env.s.Owner.UID); got != 0 {
		t.Errorf("a removed session's results still counted: %d", got)
	}
}

func TestShrink(t *testing.T) {
	env := newToolEnv(t)
	cases := []struct {
		name      string
		res       *Result
		wantPath  bool
		wantImage bool
	}{
		{"long text persisted", &Result{Content: []Block{{Type: "text", Text: strings.Repeat("x", 50_000)}}, Data: map[string]any{"stdout": strings.Repeat("x", 50_000)}}, true, false},
		{"image left out", &Result{Content: []Block{{Type: "image", MediaType: "image/png", Data: strings.Repeat("A", 1<<20)}}}, false, false},
		{"short text kept", &Result{Content: []Block{{Type: "text", Text: "ok"}}}, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := &Outcome{Result: tc.res}
			before := ResponseSize(o)
			env.h.Shrink(env.s, o, 64<<20)
			if after := ResponseSize(o); after > 8<<10 || after > before {
				t.Errorf("shrunk result is %d bytes (was %d)", after, before)
			}
			_, has := o.Result.Data["persistedOutputPath"]
			if has != tc.wantPath {
				t.Errorf("persisted = %v, want %v", has, tc.wantPath)
			}
			for _, b := range o.Result.Content {
				if b.Type == "image" {
					t.Error("image kept")
				}
			}
		})
	}
}

// A background task dies at its maximum lifetime.
func TestTaskMaxLifetime(t *testing.T) {
	env := newToolEnv(t)
	env.h.SetLimits(Limits{TaskMaxLifetime: 500 * time.Millisecond, TasksPerUser: 1})
	r := env.mustCall(t, "Bash", Input{"command": "sleep 30", "run_in_background": true})
	id, _ := r.Data["backgroundTaskId"].(string)
	if _, err := env.call(t, "Bash", Input{"command": "sleep 30", "run_in_background": true}); err == nil || !strings.Contains(err.Error(), "tasks_per_user") {
		t.Fatalf("second task past tasks_per_user: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := env.h.Tasks(env.s)
		if len(st) == 1 && st[0]["status"] != "running" {
			if st[0]["killed_by"] != "task_max_seconds" {
				t.Fatalf("task %s ended as %v", id, st[0])
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("task still running past its lifetime: %v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// base64Yielding encodes exactly as base64.StdEncoding does, whatever the length's place
// against its slices.
func TestBase64Yielding(t *testing.T) {
	b := make([]byte, 3*base64Slice+2)
	for i := range b {
		b[i] = byte(i*7 + i>>8)
	}
	for _, n := range []int{0, 1, 2, 3, base64Slice - 1, base64Slice, base64Slice + 1, 2*base64Slice + 3, len(b)} {
		if got, want := base64Yielding(b[:n]), base64.StdEncoding.EncodeToString(b[:n]); got != want {
			t.Errorf("%d bytes: base64Yielding differs from base64.StdEncoding (%d against %d chars)", n, len(got), len(want))
		}
	}
}
