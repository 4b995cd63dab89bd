package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/internal/subid"
	"github.com/sandboxd/sandboxd/session"
)

// A gid in a user's subordinate range is one that user can hold (newgidmap, then setgroups in
// its namespace): an admin group with such a gid makes no one an admin.
func TestAdminGroupInASubordinateRange(t *testing.T) {
	dir := t.TempDir()
	subgid := filepath.Join(dir, "subgid")
	ids := newIdentities("root")
	ids.subuids, ids.subgids = subid.Open(filepath.Join(dir, "subuid")), subid.Open(subgid)
	peer := api.Peer{UID: 4242, GID: 4242, Groups: []uint32{0}}
	if c, _ := ids.Identify(peer); !c.Admin {
		t.Fatal("a member of the admin group is no admin")
	}
	if err := os.WriteFile(subgid, []byte("4242:0:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ids = newIdentities("root")
	ids.subuids, ids.subgids = subid.Open(filepath.Join(dir, "subuid")), subid.Open(subgid)
	if c, _ := ids.Identify(peer); c.Admin {
		t.Error("an admin group whose gid a user may map makes an admin")
	}
	if c, _ := ids.Identify(api.Peer{UID: 0}); !c.Admin {
		t.Error("root is no admin")
	}
}

// TestRebuildOwnersTakeTurns: a reload rebuilds every owner's first session before any
// owner's second, so one user's many slow sessions keep no other user's waiting.
func TestRebuildOwnersTakeTurns(t *testing.T) {
	st := session.NewStore()
	var made []*session.Session
	for _, uid := range []uint32{1, 1, 1, 2, 1, 3, 2} {
		made = append(made, st.Create(session.Caller{UID: uid, GID: uid}, session.Params{Cwd: "/"}))
	}
	var got []uint32
	for _, s := range byOwnerInTurn(made) {
		got = append(got, s.Owner.UID)
	}
	if want := []uint32{1, 2, 3, 1, 2, 1, 1}; !slices.Equal(got, want) {
		t.Errorf("owners in order %v, want %v", got, want)
	}
}

// TestRulesChangeWithoutChildrenWaitsForNoRebuild: a rules change rebuilds the session's
// sub-agents under the reload lock; one without sub-agents does not take it, so another user's
// long rebuild (a reload, a parent of many children) holds no one else's rules change.
func TestRulesChangeWithoutChildrenWaitsForNoRebuild(t *testing.T) {
	td := startDaemon(t, "")
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q}`, testHostDir(t)))
	td.d.core.reloadMu.Lock()
	done := make(chan int, 1)
	go func() {
		code, _ := td.do(t, "PATCH", "/v1/sessions/"+s.ID, `{"rules":{"deny":["Read(./yy)"]}}`)
		done <- code
	}()
	select {
	case code := <-done:
		td.d.core.reloadMu.Unlock()
		if code != 200 {
			t.Errorf("rules change: %d", code)
		}
	case <-time.After(10 * time.Second):
		td.d.core.reloadMu.Unlock()
		<-done
		t.Error("a rules change of a session without sub-agents waited for the reload lock")
	}
}
