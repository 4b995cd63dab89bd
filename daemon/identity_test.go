package daemon

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/internal/subid"
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
