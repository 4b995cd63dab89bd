package faults

import (
	"context"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/protocol"
)

// TestSchedulerWidthFollowsTheWork: the daemon binary runs a lone request on one P, widens to
// the host's CPUs while a request runs beside another, and narrows again once it is alone
// (internal/procs; /v1/healthz reports the width it found).
func TestSchedulerWidthFollowsTheWork(t *testing.T) {
	if os.Getenv("GOMAXPROCS") != "" {
		t.Skip("GOMAXPROCS is set in the environment: the daemon keeps it, by design")
	}
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("one CPU here: the daemon has nothing to narrow")
	}
	d := start(t, nil)
	ctx := context.Background()
	c := NewClient(d.Socket, 30*time.Second)
	width := func() int {
		t.Helper()
		h, err := c.Health(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return h.GoProcs
	}
	// The pool fills in the background after start: that holds the scheduler wide until done.
	if !waitFor(10*time.Second, func() bool { return width() == 1 }) {
		t.Fatalf("a lone healthz on an idle daemon saw %d Ps, want 1", width())
	}
	s, err := c.CreateSession(ctx, protocol.CreateSession{Cwd: workDir(t, d), Mode: "bypassPermissions"})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan string, 1)
	go func() {
		res, _, err := c.Call(ctx, s.ID, bashReq("w_sleep", "sleep 2"))
		if err != nil {
			done <- err.Error()
			return
		}
		done <- text(res)
	}()
	if !waitFor(5*time.Second, func() bool { return width() > 1 }) {
		t.Fatalf("a healthz beside a running call saw %d P, want the host's CPUs", width())
	}
	select {
	case msg := <-done:
		if msg != "" {
			t.Fatalf("the sleep call: %s", msg)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the sleep call did not end")
	}
	// Its clean-up and the pool's refill hold it wide a few ms more.
	if !waitFor(10*time.Second, func() bool { return width() == 1 }) {
		t.Fatalf("after the call a lone healthz saw %d Ps, want 1", width())
	}
}
