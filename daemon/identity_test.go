package daemon

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/internal/subid"
	"github.com/sandboxd/sandboxd/internal/testutil"
	"github.com/sandboxd/sandboxd/protocol"
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

// TestRebuildOwnersSideBySide: a reload rebuilds each owner's sessions beside every other
// owner's: one whose rebuild waits (its owner stopped their worker; here its lock is held)
// keeps no other user's session on the old rules.
func TestRebuildOwnersSideBySide(t *testing.T) {
	td := startDaemon(t, "")
	stalled := td.newSession(t, fmt.Sprintf(`{"cwd":%q}`, testHostDir(t)))
	u := testutil.CreateUser(t, "sbrsb")
	code, b := curlAs(t, td, u, "POST", "/v1/sessions", fmt.Sprintf(`{"cwd":%q}`, u.Home), "")
	if code != 201 && code != 200 {
		t.Fatalf("session as %s: %d %s", u.Name, code, b)
	}
	var other protocol.Session
	decodeInto(t, b, &other)
	sess := func(id string) *session.Session { return storedSession(t, td, id) }
	held, theirs := sess(stalled.ID), sess(other.ID)
	before := theirs.RuleSet()
	held.RulesMu.Lock()
	done := make(chan struct{})
	go func() { td.d.core.reloadRules(); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for theirs.RuleSet() == before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if theirs.RuleSet() == before {
		t.Error("another user's session waited for a stalled session's rebuild")
	}
	held.RulesMu.Unlock()
	<-done
}

// TestRulesChangeWaitsForNoOtherSessionsRebuild: a session's rules are rebuilt under its own
// lock, so another session's long rebuild (a reload's, a parent of many sub-agents, settings
// read at their deadline) holds no one else's rules change, a parent's included; a rebuild of
// the same session does, so the rule set in force is built from the rules last applied.
func TestRulesChangeWaitsForNoOtherSessionsRebuild(t *testing.T) {
	td := startDaemon(t, "")
	dir := testHostDir(t)
	other := td.newSession(t, fmt.Sprintf(`{"cwd":%q}`, dir))
	parent := td.newSession(t, fmt.Sprintf(`{"cwd":%q}`, dir))
	child := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"parent_id":%q}`, dir, parent.ID))
	sess := func(id string) *session.Session { return storedSession(t, td, id) }
	patch := func(id, rule string) chan int {
		done := make(chan int, 1)
		go func() {
			code, _ := td.do(t, "PATCH", "/v1/sessions/"+id, fmt.Sprintf(`{"rules":{"deny":[%q]}}`, rule))
			done <- code
		}()
		return done
	}
	held := sess(other.ID)
	held.RulesMu.Lock()
	select {
	case code := <-patch(parent.ID, "Read(./yy)"):
		if code != 200 {
			t.Errorf("rules change: %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Error("a parent's rules change waited for another session's rebuild")
	}
	held.RulesMu.Unlock()
	if rs := sess(child.ID).RuleSet(); !strings.Contains(fmt.Sprint(rs.Rules()), "yy") {
		t.Errorf("the child's rules were not rebuilt with the parent's new deny: %v", rs.Rules())
	}
	own := sess(parent.ID)
	own.RulesMu.Lock()
	done := patch(parent.ID, "Read(./zz)")
	select {
	case <-done:
		t.Error("a rules change went on while a rebuild of the same session ran")
	case <-time.After(300 * time.Millisecond):
	}
	own.RulesMu.Unlock()
	if code := <-done; code != 200 {
		t.Errorf("rules change after the rebuild: %d", code)
	}
}

// TestChildMadeDuringParentsChangeHasItsRules: a sub-agent made while its parent's rules
// change ends with the parent's new rules. The change lands after the child's creation read
// the parent's rules and before it put them in force; made under its own lock, the child's
// rebuild waits for its creation and then reads what the parent holds, rather than being
// overwritten by the rule set its creation built from the older rules.
func TestChildMadeDuringParentsChangeHasItsRules(t *testing.T) {
	td := startDaemon(t, "")
	dir := testHostDir(t)
	parent := td.newSession(t, fmt.Sprintf(`{"cwd":%q}`, dir))
	loaded, patched := make(chan struct{}), make(chan struct{})
	afterNewSessionRules = func(s *session.Session) {
		if s.ParentID != parent.ID {
			return
		}
		close(loaded)
		select { // the parent's change, unless it waits for this creation (as it should)
		case <-patched:
		case <-time.After(2 * time.Second):
		}
	}
	defer func() { afterNewSessionRules = nil }()
	childDone := make(chan string, 1)
	go func() {
		code, b := td.do(t, "POST", "/v1/sessions", fmt.Sprintf(`{"cwd":%q,"parent_id":%q}`, dir, parent.ID))
		var snap protocol.Session
		if code == http.StatusCreated {
			decodeInto(t, b, &snap)
		} else {
			t.Errorf("make the child: %d %s", code, b)
		}
		childDone <- snap.ID
	}()
	<-loaded
	patchDone := make(chan int, 1)
	go func() {
		code, _ := td.do(t, "PATCH", "/v1/sessions/"+parent.ID, `{"rules":{"deny":["Read(./secret)"]}}`)
		patchDone <- code
	}()
	code := 0
	select {
	case code = <-patchDone:
		close(patched)
	case <-time.After(time.Second):
		// Waiting for the child's creation: it goes on at the hook's deadline.
	}
	id := <-childDone
	if code == 0 {
		code = <-patchDone
	}
	if code != 200 {
		t.Fatalf("parent's rules change: %d", code)
	}
	// The parent's rule as it means it there: anchored at the parent's root.
	want := "Read(/" + filepath.Join(dir, "secret") + ")"
	for _, s := range td.d.core.store.All() {
		if s.ID == id && !strings.Contains(fmt.Sprint(s.RuleSet().Rules()), want) {
			t.Errorf("the child made during the parent's change lacks its new deny: %v", s.RuleSet().Rules())
		}
	}
}

// storedSession is the daemon's session id.
func storedSession(t *testing.T, td *testDaemon, id string) *session.Session {
	t.Helper()
	for _, s := range td.d.core.store.All() {
		if s.ID == id {
			return s
		}
	}
	t.Fatalf("no session %s", id)
	return nil
}

// TestReloadNotHeldBySessionLock: a session whose lock its owner's requests hold (and may
// queue on, each for up to ownerPaced) holds a configuration reload for revokeWait at most:
// the new configuration is in force, for every other session, at once after.
func TestReloadNotHeldBySessionLock(t *testing.T) {
	td := startDaemon(t, "")
	held := storedSession(t, td, td.newSession(t, fmt.Sprintf(`{"cwd":%q}`, testHostDir(t))).ID)
	held.RulesMu.Lock()
	defer held.RulesMu.Unlock()
	start := time.Now()
	done := make(chan struct{})
	go func() { td.d.Reload(); close(done) }()
	select {
	case <-done:
		if el := time.Since(start); el > revokeWait+5*time.Second {
			t.Errorf("the reload took %v", el)
		}
	case <-time.After(revokeWait + 15*time.Second):
		t.Fatal("a reload waited on a session's lock")
	}
}
