package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/protocol"
)

// TestBashGlobThroughLink: a glob's matches are decided where they lead. With up -> a dir
// outside the session, `cat up/sec*` and `cat */secret` read it though no word of theirs
// names it: a read outside the session asks in default mode, and a Read deny rule on the
// file holds; a line the caller runs itself is never allowed a glob.
func TestBashGlobThroughLink(t *testing.T) {
	td := startDaemon(t, "")
	dir, elsewhere := testHostDir(t), testHostDir(t)
	for _, f := range []string{filepath.Join(dir, "a.txt"), filepath.Join(elsewhere, "secret"), filepath.Join(elsewhere, "notes")} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(elsewhere, filepath.Join(dir, "up")); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(elsewhere, "secret")
	def := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"default"}`, dir))
	denied := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions","rules":{"deny":[%q]}}`, dir, "Read(/"+secret+")"))
	for _, tc := range []struct {
		session protocol.Session
		cmd     string
		want    permission.Behavior
	}{
		{def, "cat *.txt", permission.Allow},
		{def, "cat up/sec*", permission.Ask},
		{def, "cat */secret", permission.Ask},
		{def, "head -n1 u?/*", permission.Ask},
		{def, "shopt -s extglob; cat @(up|x)/secret", permission.Ask},
		{def, "cat U[p]/SECRET", permission.Ask}, // nocaseglob may be on
		{denied, "cat up/sec*", permission.Deny},
		{denied, "cat */secret", permission.Deny},
		{denied, "cat up/no*", permission.Allow},
	} {
		for _, extra := range []string{"", `,"unconfined":true`} {
			code, b := td.do(t, "POST", "/v1/sessions/"+tc.session.ID+"/decide", callBody("Bash", fmt.Sprintf(`{"command":%q}`, tc.cmd), extra))
			var res protocol.CallResult
			decodeInto(t, b, &res)
			if code != 200 || res.Decision == nil {
				t.Fatalf("%q%s: %d %s", tc.cmd, extra, code, b)
			}
			got := behavior(res)
			if extra != "" {
				// The caller runs it outside any sandbox: a glob is never read-only there.
				if got == permission.Allow {
					t.Errorf("%q in %s%s: allowed (%s)", tc.cmd, tc.session.Mode, extra, res.Decision.Reason)
				}
				continue
			}
			if got != tc.want {
				t.Errorf("%q in %s: %s (%s), want %s", tc.cmd, tc.session.Mode, got, res.Decision.Reason, tc.want)
			}
		}
	}
}
