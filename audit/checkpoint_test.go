package audit

import (
	"context"
	"testing"

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
