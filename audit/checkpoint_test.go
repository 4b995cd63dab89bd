package audit

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
)

// Checkpoint publishes a signed head covering every record so far, so a verify with the
// public key passes while the log stays open.
func TestCheckpointMakesLiveVerifyPass(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(Config{Dir: dir}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if err := l.Append(ctx, &Record{Kind: KindSessionCreate, Session: "s"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := VerifyDir(dir, l.PublicKey())
	if err != nil {
		t.Fatalf("verify after checkpoint: %v (%+v)", err, rep)
	}
	if rep.HeadSeq != rep.LastSeq {
		t.Errorf("head covers seq %d, log ends at %d", rep.HeadSeq, rep.LastSeq)
	}
	if err := l.Checkpoint(ctx); err != nil {
		t.Errorf("a checkpoint with nothing new: %v", err)
	}
}

// An enqueued record is written in order before a later Append returns.
func TestEnqueueIsCoveredByTheNextAppend(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(Config{Dir: dir}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Enqueue(&Record{Kind: KindCallStart, ToolUseID: "a"}); err != nil {
		t.Fatal(err)
	}
	end := &Record{Kind: KindCallEnd, ToolUseID: "a"}
	if err := l.Append(context.Background(), end); err != nil {
		t.Fatal(err)
	}
	var kinds []Kind
	for r, err := range Query(dir, Filter{}) {
		if err != nil {
			t.Fatal(err)
		}
		if r.ToolUseID == "a" {
			kinds = append(kinds, r.Kind)
			if r.Kind == KindCallStart && r.Seq >= end.Seq {
				t.Errorf("start seq %d not before end seq %d", r.Seq, end.Seq)
			}
		}
	}
	if len(kinds) != 2 {
		t.Fatalf("records for a: %v", kinds)
	}
}

// An enqueued record with nothing after it still reaches the file, queuedHold later, and is
// made durable: Enqueue only spares the caller the wait, never the write.
func TestEnqueueAloneIsWrittenSoon(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(Config{Dir: dir}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Enqueue(&Record{Kind: KindCallStart, ToolUseID: "lonely"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		found := false
		for r, err := range Query(dir, Filter{}) {
			if err != nil {
				t.Fatal(err)
			}
			found = found || r.ToolUseID == "lonely"
		}
		if found {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("an enqueued record was not written within 5 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// Each caller's start (Enqueue) precedes its end (AppendWritten) in the chain, however many
// callers interleave: the writer takes queued records ahead of the request that follows them,
// and an end written on its caller's goroutine (writeNow) never overtakes a start the writer
// took in with durable records it holds for the next fsync (durable callers run alongside).
func TestEnqueueKeepsEachCallersOrder(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(Config{Dir: dir}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	const callers, calls = 16, 50
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var durable sync.WaitGroup
	for range 4 {
		durable.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := l.Append(context.Background(), &Record{Kind: KindSessionCreate, Session: itoa(i)}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				id := fmt.Sprintf("c%d-%d", c, i)
				if err := l.Enqueue(&Record{Kind: KindCallStart, ToolUseID: id}); err != nil {
					t.Error(err)
					return
				}
				time.Sleep(100 * time.Microsecond) // the call runs: a durable record may take the start in
				if err := l.AppendWritten(context.Background(), &Record{Kind: KindCallEnd, ToolUseID: id}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	durable.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	started := map[string]bool{}
	ends := 0
	for r, err := range Query(dir, Filter{}) {
		if err != nil {
			t.Fatal(err)
		}
		switch r.Kind {
		case KindCallStart:
			started[r.ToolUseID] = true
		case KindCallEnd:
			if !started[r.ToolUseID] {
				t.Errorf("%s: end (seq %d) before its start", r.ToolUseID, r.Seq)
			}
			ends++
		}
	}
	if len(started) != callers*calls || ends != callers*calls {
		t.Fatalf("%d starts and %d ends, want %d each", len(started), ends, callers*calls)
	}
	if rep, err := VerifyDir(dir, l.PublicKey()); err != nil {
		t.Fatalf("verify: %v (%+v)", err, rep)
	}
}
