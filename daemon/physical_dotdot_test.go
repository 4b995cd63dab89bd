package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/protocol"
)

// TestBashPathDotDotAfterLink: a Bash path with a .. after a link is decided where the kernel
// takes it, from where the link leads (lnk/../secret with lnk -> elsewhere/a is
// elsewhere/secret), not where its cleaned name points.
func TestBashPathDotDotAfterLink(t *testing.T) {
	td := startDaemon(t, "")
	dir, elsewhere := testHostDir(t), testHostDir(t)
	if err := os.Mkdir(filepath.Join(elsewhere, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(elsewhere, "a"), filepath.Join(dir, "lnk")); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(elsewhere, "secret")
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions","rules":{"deny":[%q]}}`, dir, "Edit(/"+secret+")"))
	for cmd, denied := range map[string]bool{
		"touch lnk/../secret":   true,
		"touch ./lnk/../secret": true,
		"touch lnk/../other":    false,
		"touch secret":          false,
	} {
		code, b := td.do(t, "POST", "/v1/sessions/"+s.ID+"/decide", callBody("Bash", fmt.Sprintf(`{"command":%q}`, cmd), ""))
		var res protocol.CallResult
		decodeInto(t, b, &res)
		if code != 200 || res.Decision == nil {
			t.Fatalf("%q: %d %s", cmd, code, b)
		}
		if got := behavior(res) == permission.Deny && res.Decision.Step == "deny_rule"; got != denied {
			t.Errorf("%q: %s at %s, want denied %v: %s", cmd, res.Decision.Behavior, res.Decision.Step, denied, res.Decision.Reason)
		}
	}
}
