package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
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
	// A link that leads where the program that opens it is, and a FIFO a glob may match.
	if err := os.Symlink("/proc/self/cwd/up/secret", filepath.Join(dir, "px")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "ff"), 0o644); err != nil {
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
		{def, "cat [[:alpha:]]p/[[=s=]]ecret", permission.Ask},
		{def, "LC_ALL=C; cat u?/secret", permission.Ask},
		{def, "cat px", permission.Ask},
		{def, "cat p?", permission.Ask},
		{def, "cat f*/x", permission.Allow}, // the FIFO is no dir: nothing waits on it
		// A brace or glob where an option's value or a pattern goes gives more words.
		{def, "head -n {1," + secret + "} a.txt", permission.Ask},
		{def, "grep -v -e " + elsewhere + "/* a.txt", permission.Ask},
		{def, "grep -v -e up/* a.txt", permission.Ask},
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
