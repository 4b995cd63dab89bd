package daemon

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/sandboxd/sandboxd/internal/testutil"
)

// TestChildHasItsParentsOwner: a sub-agent session belongs to its parent's owner. Not even
// root makes one under a user's session: its bubbled asks would be answered by that user and
// run as root.
func TestChildHasItsParentsOwner(t *testing.T) {
	td := startDaemon(t, "")
	alice := testutil.CreateUser(t, "sbcoa")
	parent := sessionAs(t, td, alice, `,"mode":"default"`)
	code, b := td.do(t, "POST", "/v1/sessions", fmt.Sprintf(`{"cwd":%q,"mode":"bubble","parent_id":%q}`, alice.Home, parent))
	if code == http.StatusCreated {
		t.Fatalf("root made a child of alice's session: %s", b)
	}
	if code, b := curlAs(t, td, alice, "POST", "/v1/sessions", fmt.Sprintf(`{"cwd":%q,"mode":"bubble","parent_id":%q}`, alice.Home, parent), ""); code != http.StatusCreated {
		t.Fatalf("alice's own child: %d %s", code, b)
	}
}
