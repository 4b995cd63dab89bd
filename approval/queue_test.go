package approval

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/protocol"
)

// TestExpiry: an approval past its time is listed by Expired (an answered one nobody took is
// dropped instead), stays pending until resolved, and its denial releases a waiter.
func TestExpiry(t *testing.T) {
	t.Parallel()
	q := NewQueue()
	open, err := q.Add(Approval{Approval: protocol.Approval{Owner: 1000, Tool: "Bash"}}, time.Minute, "payload")
	if err != nil {
		t.Fatal(err)
	}
	answered, err := q.Add(Approval{Approval: protocol.Approval{Owner: 1000, Tool: "Edit"}}, time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Resolve(answered.ID, Resolution{Answer: Allow, By: "uid:1000"}, nil); err != nil {
		t.Fatal(err)
	}
	if got := q.Expired(time.Now()); len(got) != 0 {
		t.Fatalf("expired before their time: %v", got)
	}
	later := time.Now().Add(2 * time.Minute)
	got := q.Expired(later)
	if len(got) != 1 || got[0].ID != open.ID {
		t.Fatalf("Expired = %v, want only %s", got, open.ID)
	}
	if _, _, ok := q.Get(answered.ID); ok {
		t.Error("an answered approval nobody took outlived its expiry")
	}
	if _, res, ok := q.Get(open.ID); !ok || res != nil {
		t.Fatal("Expired resolved the approval itself: the daemon audits before it resolves")
	}
	waited := make(chan *Resolution, 1)
	go func() {
		res, _ := q.Wait(context.Background(), open.ID, time.Minute)
		waited <- res
	}()
	deny := ExpiryDenial(open)
	if deny.Answer != Deny || deny.By != "expiry" || !strings.Contains(deny.Message, "expired after 1m0s") {
		t.Fatalf("ExpiryDenial = %+v", deny)
	}
	if _, err := q.Resolve(open.ID, deny, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-waited:
		if res == nil || res.Answer != Deny {
			t.Fatalf("waiter got %+v", res)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the denial did not release the waiter")
	}
}

// One uid's unanswered approvals are bounded in number and in bytes; another uid still queues.
func TestQueueBoundsOneOwner(t *testing.T) {
	q := NewQueue()
	big := json.RawMessage(`"` + strings.Repeat("x", 4<<20) + `"`)
	n := 0
	for ; n < 100; n++ {
		if _, err := q.Add(Approval{Approval: protocol.Approval{Owner: 1000, Tool: "Write", Input: big}}, time.Minute, nil); err != nil {
			if !errors.Is(err, ErrFull) {
				t.Fatalf("add %d: %v, want ErrFull", n, err)
			}
			break
		}
	}
	if n == 0 || 2*n*len(big) > MaxPendingBytesPerOwner {
		t.Errorf("%d approvals of 4 MiB queued for one uid, want as many as fit %d MiB", n, MaxPendingBytesPerOwner>>20)
	}
	if _, err := q.Add(Approval{Approval: protocol.Approval{Owner: 1001, Tool: "Write", Input: big}}, time.Minute, nil); err != nil {
		t.Errorf("another uid: %v", err)
	}
	for i := range MaxPendingPerOwner {
		if _, err := q.Add(Approval{Approval: protocol.Approval{Owner: 1002, Tool: "Bash"}}, time.Minute, nil); err != nil {
			t.Fatalf("small approval %d: %v", i, err)
		}
	}
	if _, err := q.Add(Approval{Approval: protocol.Approval{Owner: 1002, Tool: "Bash"}}, time.Minute, nil); !errors.Is(err, ErrFull) {
		t.Errorf("approval %d of one uid: %v, want ErrFull", MaxPendingPerOwner+1, err)
	}
	// A user's subordinate uids (each an Owner of its own) share the user's bounds.
	for i := range MaxPendingPerOwner {
		sub := Approval{Approval: protocol.Approval{Owner: 200000 + uint32(i), Tool: "Bash"}, Tenant: 1004}
		if _, err := q.Add(sub, time.Minute, nil); err != nil {
			t.Fatalf("approval of subordinate uid %d: %v", sub.Owner, err)
		}
	}
	if _, err := q.Add(Approval{Approval: protocol.Approval{Owner: 300000, Tool: "Bash"}, Tenant: 1004}, time.Minute, nil); !errors.Is(err, ErrFull) {
		t.Errorf("approval %d of one user's subordinate uids: %v, want ErrFull", MaxPendingPerOwner+1, err)
	}
	// Answered and never resumed, they still hold their calls: they count until taken.
	var last Approval
	for i := range MaxPendingPerOwner {
		a, err := q.Add(Approval{Approval: protocol.Approval{Owner: 1003, Tool: "Bash"}}, time.Minute, nil)
		if err != nil {
			t.Fatalf("approval %d of uid 1003: %v", i, err)
		}
		if _, err := q.Resolve(a.ID, Resolution{Answer: Deny}, nil); err != nil {
			t.Fatal(err)
		}
		last = a
	}
	if _, err := q.Add(Approval{Approval: protocol.Approval{Owner: 1003, Tool: "Bash"}}, time.Minute, nil); !errors.Is(err, ErrFull) {
		t.Errorf("approval %d of one uid, the others answered and not taken: %v, want ErrFull", MaxPendingPerOwner+1, err)
	}
	if _, _, ok := q.Take(last.ID); !ok {
		t.Fatal("take an answered approval")
	}
	if _, err := q.Add(Approval{Approval: protocol.Approval{Owner: 1003, Tool: "Bash"}}, time.Minute, nil); err != nil {
		t.Errorf("after one was taken: %v", err)
	}
}
