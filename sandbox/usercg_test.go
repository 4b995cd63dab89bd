package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestUserCgroupBoundsAllOfAUsersCalls: every call of a uid sits under user-<uid>, whose pids
// limit bounds the user's calls together: a second call cannot start what the first's share
// left, while another user's call, at the same moment, can. Pooled and per-call alike.
func TestUserCgroupBoundsAllOfAUsersCalls(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{UserLimits: UserLimits{PidsMax: 40}})
	const other = nobody - 1
	spec := func(uid uint32, call, script string) *Spec {
		return &Spec{Path: "/bin/bash", Args: []string{"-c", script}, Dir: "/", Env: []string{"PATH=/usr/bin:/bin"},
			UID: uid, GID: uid, Session: fmt.Sprintf("u%d", uid), Call: call, Limits: Limits{PidsMax: 64}}
	}
	// 30 sleepers: within the call's own limit (64) and the user's (40).
	hold, err := s.Start(context.Background(), spec(nobody, "hold", "for i in $(seq 30); do sleep 30 & done; echo started; wait"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		hold.Kill("test_end")
		hold.Wait() // which ends its sweeps
	}()
	waitFor(t, func() bool { return countProcs(t, s, "user-65534") >= 30 })
	for i, pooled := range []bool{true, false} {
		s.noPool.Store(!pooled)
		script := "n=0; for i in $(seq 30); do sleep 5 & n=$((n+1)); done 2>/dev/null; jobs -p | wc -l"
		_, out, err := run(t, s, ctxTimeout(t, 20*time.Second), spec(nobody, fmt.Sprintf("more%d", i), script))
		if err == nil && !strings.Contains(out, "fork") && strings.TrimSpace(out) == "30" {
			t.Errorf("pooled=%v: the second call of the user started 30 more processes past the user's 40:\n%s", pooled, out)
		}
		_, out, err = run(t, s, ctxTimeout(t, 20*time.Second), spec(other, fmt.Sprintf("other%d", i), script))
		if err != nil || strings.TrimSpace(out) != "30" {
			t.Errorf("pooled=%v: another user's call was bounded by the first user's use: %v\n%s", pooled, err, out)
		}
	}
}

func countProcs(t *testing.T, s *Sandbox, rel string) int {
	t.Helper()
	d := s.cg.dirs["pids"]
	if s.cg.v2 {
		d = s.cg.dirs[""]
	}
	b, err := os.ReadFile(filepath.Join(d, rel, "pids.current"))
	if err != nil {
		return 0
	}
	var n int
	fmt.Sscan(string(b), &n)
	return n
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
