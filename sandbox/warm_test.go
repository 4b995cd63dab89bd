package sandbox

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// After a pause, a Start on a cgroup v1 host must not pay an RCU grace period for its attach
// (6-8 ms measured without the warmer). Checked by the step timer of the attach, over several
// calls with pauses between them, against a generous bound. Without the warmer every attach
// after the first is slow; on a loaded machine (the other packages' tests beside this one) a
// warm one can still be, now and then, so a quarter may be.
func TestAttachStaysFastAfterPauses(t *testing.T) {
	s := newTestSandbox(t, Config{})
	if s.cg.v2 {
		t.Skip("cgroup v2 starts children inside their cgroup; no attach to keep warm")
	}
	s.noPool.Store(true) // a pooled init was attached ahead: only the per-call path attaches
	var attach []time.Duration
	s.stepDone = func(step string, d time.Duration) {
		if step == "cgroup_attach" {
			attach = append(attach, d)
		}
	}
	for i := 0; i < 9; i++ {
		time.Sleep(150 * time.Millisecond) // past the ~50 ms after which the rwsem cools
		spec := &Spec{Path: "/bin/true", Dir: "/", UID: nobody, GID: nobody, Session: "s1", Call: fmt.Sprintf("c%d", i)}
		if _, _, err := run(t, s, context.Background(), spec); err != nil {
			t.Fatal(err)
		}
	}
	if len(attach) == 0 {
		t.Fatal("no cgroup_attach step timed")
	}
	slow := 0
	for _, d := range attach[1:] { // the first may pay one grace period to warm up
		if d > 4*time.Millisecond {
			slow++
		}
	}
	if slow > (len(attach)-1)/4 {
		t.Errorf("%d of %d attaches after pauses slow: %v", slow, len(attach)-1, attach)
	}
}

// TestTouchWakesOnlyASleepingWarmer: a Start wakes the warmer only when it sleeps; waking a
// ticking one would cost every Start a thread wake-up for nothing.
func TestTouchWakesOnlyASleepingWarmer(t *testing.T) {
	w := &attachWarmer{wake: make(chan struct{}, 1)}
	w.touch()
	if len(w.wake) != 0 {
		t.Fatal("touch woke a ticking warmer")
	}
	w.asleep = true
	w.touch()
	if len(w.wake) != 1 || w.last.IsZero() {
		t.Fatal("touch did not wake a sleeping warmer")
	}
}
