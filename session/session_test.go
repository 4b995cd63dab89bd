package session

import (
	"errors"
	"fmt"
	"testing"

	"github.com/sandboxd/sandboxd/permission"
)

func TestOwnershipIsolation(t *testing.T) {
	st := NewStore()
	alice := Caller{UID: 1001}
	bob := Caller{UID: 1002}
	admin := Caller{UID: 0, Admin: true}
	s := st.Create(alice, Params{Cwd: "/home/alice", Mode: permission.ModeDefault})

	if _, err := st.Get(bob, s.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("bob Get = %v, want ErrNotFound", err)
	}
	if _, err := st.Remove(bob, s.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("bob Remove = %v, want ErrNotFound", err)
	}
	if got := st.List(bob); len(got) != 0 {
		t.Errorf("bob sees %d sessions", len(got))
	}
	if _, err := st.Get(alice, s.ID); err != nil {
		t.Errorf("owner Get: %v", err)
	}
	if got := st.List(admin); len(got) != 1 {
		t.Errorf("admin sees %d sessions, want 1", len(got))
	}
	if _, err := st.Remove(admin, s.ID); err != nil {
		t.Errorf("admin Remove: %v", err)
	}
	if _, err := st.Get(alice, s.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("after remove: %v", err)
	}
}

func TestApplyAndSnapshotAreCopies(t *testing.T) {
	st := NewStore()
	s := st.Create(Caller{UID: 1}, Params{Cwd: "/w", AdditionalDirs: []string{"/a"}, Mode: permission.ModeDefault,
		Rules: Rules{Allow: []string{"Bash(ls *)"}}})
	snap := s.Snapshot()
	snap.AdditionalDirs[0] = "/changed"
	snap.Rules.Allow[0] = "Bash"
	if got := s.Snapshot(); got.AdditionalDirs[0] != "/a" || got.Rules.Allow[0] != "Bash(ls *)" {
		t.Errorf("snapshot aliases session state: %+v", got)
	}
	plan := permission.ModePlan
	s.Apply(Update{Mode: &plan})
	if s.Mode() != permission.ModePlan {
		t.Errorf("mode = %s", s.Mode())
	}
	if got := s.Dirs(); len(got) != 2 || got[0] != "/w" || got[1] != "/a" {
		t.Errorf("Dirs = %v", got)
	}
}

func TestReadStateIsBoundedLRU(t *testing.T) {
	rs := NewReadState(1000)
	for i := 0; i < 100; i++ {
		rs.Record(FileRead{Path: fmt.Sprintf("/f/%03d", i), SHA256: "h"})
	}
	if rs.Len() >= 100 {
		t.Fatalf("state not bounded: %d entries", rs.Len())
	}
	if _, ok := rs.Lookup("/f/099"); !ok {
		t.Error("most recent entry evicted")
	}
	if _, ok := rs.Lookup("/f/000"); ok {
		t.Error("oldest entry kept past the bound")
	}
	rs.Forget("/f/099")
	if _, ok := rs.Lookup("/f/099"); ok {
		t.Error("Forget kept the entry")
	}
}

func TestBudgetEvictsLargestFirst(t *testing.T) {
	b := NewBudget(100)
	if ev := b.Admit("a", 30); len(ev) != 0 {
		t.Fatalf("evicted %v", ev)
	}
	b.Admit("b", 50)
	ev := b.Admit("c", 40)
	if len(ev) != 1 || ev[0].ToolUseID != "b" {
		t.Fatalf("evicted %v, want [b]", ev)
	}
	if b.Total() != 70 {
		t.Errorf("total = %d, want 70", b.Total())
	}
}
