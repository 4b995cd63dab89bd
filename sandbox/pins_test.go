package sandbox

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/internal/errcode"
)

// TestPinBudget: one user's calls hold at most their share of the daemon's descriptors for
// pinned paths, all calls at most half of them; what a call gives back is free again.
func TestPinBudget(t *testing.T) {
	b := &pinBudget{held: map[uint32]int{}, limit: func() int { return 4000 }, minPerUser: 100}
	// all = 2000, per user = max(100, 500) = 500.
	if err := b.take(1, 400); err != nil {
		t.Fatal(err)
	}
	err := b.take(1, 200)
	if errcode.Of(err) != errcode.RateLimited || !strings.Contains(err.Error(), "at most 500 a user") {
		t.Errorf("a user past their share: %v", err)
	}
	for uid := uint32(2); uid <= 4; uid++ {
		if err := b.take(uid, 500); err != nil {
			t.Fatalf("user %d: %v", uid, err)
		}
	}
	if err := b.take(5, 200); err == nil {
		t.Error("past half the daemon's descriptors in all: taken")
	}
	b.give(1, 400)
	if err := b.take(5, 200); err != nil {
		t.Errorf("after a call gave its pins back: %v", err)
	}
	if b.held[1] != 0 || b.total != 1700 {
		t.Errorf("held %v, total %d", b.held, b.total)
	}
}

// TestCallPinsBounded: a call's pins are taken from its user's share while it runs and given
// back when it ends; a call that would take more than the share is refused before it pins any.
func TestCallPinsBounded(t *testing.T) {
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	sp := f.spec("echo ran", f.repo, f.repo)
	sp.MoveAsideCreated, sp.Call = true, "c1"
	if _, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp); err != nil || !strings.Contains(out, "ran") {
		t.Fatalf("%v %q", err, out)
	}
	// Given back off the result's path, by the janitor.
	held := func() int {
		s.pins.mu.Lock()
		defer s.pins.mu.Unlock()
		return s.pins.total
	}
	for deadline := time.Now().Add(10 * time.Second); held() != 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := held(); n != 0 {
		t.Fatalf("after the call: %d pins held, want none", n)
	}
	s.pins.limit, s.pins.minPerUser = func() int { return 8 }, 2
	_, _, err := run(t, s, context.Background(), sp)
	if errcode.Of(err) != errcode.RateLimited {
		t.Errorf("a call over its user's share of pins: %v, want rate_limited", err)
	}
	if n := held(); n != 0 {
		t.Errorf("a refused call left %d pins held", n)
	}
}

// TestCallPinsCountAgainstTenant: a call of a subordinate uid takes its pins from its range
// owner's share (Spec.Tenant), as a user's uids would each bring a whole share otherwise.
func TestCallPinsCountAgainstTenant(t *testing.T) {
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	const owner = 4242 // the range owner: nobody is its subordinate uid here
	spec := func() *Spec {
		sp := f.spec("echo ran", f.repo, f.repo)
		sp.MoveAsideCreated, sp.Call, sp.Tenant = true, "c1", owner
		return sp
	}
	s.pins.mu.Lock()
	s.pins.limit, s.pins.minPerUser = func() int { return 1 << 20 }, 64
	_, perUser := s.pins.bounds()
	s.pins.held[owner], s.pins.total = perUser, perUser // the owner's other uids hold its share
	s.pins.mu.Unlock()
	_, _, err := run(t, s, context.Background(), spec())
	if errcode.Of(err) != errcode.RateLimited {
		t.Errorf("a subordinate uid's call past its owner's share of pins: %v, want rate_limited", err)
	}
	s.pins.mu.Lock()
	s.pins.held[owner], s.pins.total = 0, 0
	s.pins.mu.Unlock()
	if _, out, err := run(t, s, ctxTimeout(t, 20*time.Second), spec()); err != nil || !strings.Contains(out, "ran") {
		t.Fatalf("with the owner's share free: %v %q", err, out)
	}
}
