package executor

import (
	"context"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/session"
)

// A call's context ends when its session is removed, and a call that ended first leaves
// nothing tied to the session.
func TestSessionContextEndsWithSession(t *testing.T) {
	st := session.NewStore()
	owner := session.Caller{UID: 1000}
	sess := st.Create(owner, session.Params{Cwd: "/work", Mode: permission.ModeDefault})

	finished, cancelFinished := sessionContext(context.Background(), sess)
	cancelFinished()
	if finished.Err() == nil {
		t.Fatal("cancel did not end the call's context")
	}

	running, cancel := sessionContext(context.Background(), sess)
	defer cancel()
	if running.Err() != nil {
		t.Fatal("a call's context ended while its session lives")
	}
	if _, err := st.Remove(owner, sess.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case <-running.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("removing the session did not end its running call's context")
	}

	// A call started after the removal ends at once.
	late, cancelLate := sessionContext(context.Background(), sess)
	defer cancelLate()
	select {
	case <-late.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a call in a removed session got a live context")
	}
}
