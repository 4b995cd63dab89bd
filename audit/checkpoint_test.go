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
