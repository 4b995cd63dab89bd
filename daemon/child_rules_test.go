package daemon

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/internal/testutil"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/protocol"
)

// mkFiles makes each file (and its dirs) under dir, holding "x".
func mkFiles(t *testing.T, dir string, files ...string) {
	t.Helper()
	for _, f := range files {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// decideIn is the decision on a call of tool with input in session id, and its reason.
func decideIn(t *testing.T, td *testDaemon, id, tool, input string) (permission.Behavior, string) {
	t.Helper()
	code, b := td.do(t, "POST", "/v1/sessions/"+id+"/decide", callBody(tool, input, ""))
	var res protocol.CallResult
	decodeInto(t, b, &res)
	if code != http.StatusOK || res.Decision == nil {
		t.Fatalf("decide %s %s: %d %s", tool, input, code, b)
	}
	return behavior(res), res.Decision.Reason
}

// TestChildHeldByParentRulesAsParentMeansThem: a sub-agent at a subdir of its parent's root is
// held by the parent's deny rules at the paths they name for the parent: its session rules
// were read again against the child's root (./sub/locked/** became sub/sub/locked/**), and its
// project's settings were not the child's at all. A deny the parent gains later binds too.
func TestChildHeldByParentRulesAsParentMeansThem(t *testing.T) {
	td := startDaemon(t, "")
	proj := rootDir(t)
	sub := filepath.Join(proj, "sub")
	mkFiles(t, proj, "sub/locked/f.txt", "sub/.env", "sub/id", "secrets/k", "sub/later")
	mkFiles(t, proj, ".sandboxd/settings.json")
	if err := os.WriteFile(filepath.Join(proj, ".sandboxd/settings.json"), []byte(`{"permissions":{"deny":["Read(./secrets/**)"]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	parentRules := `"deny":["Edit(./sub/locked/**)","Read(./sub/.env)","Read(/sub/id)"]`
	parent := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions","rules":{%s}}`, proj, parentRules))
	child := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions","parent_id":%q}`, sub, parent.ID))
	grandchild := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions","parent_id":%q}`, sub, child.ID))
	cases := []struct{ tool, input string }{
		{"Bash", `{"command":"echo PWNED >> locked/f.txt"}`},
		{"Bash", `{"command":"cat .env"}`},
		{"Bash", `{"command":"cat id"}`},
		{"Bash", `{"command":"cat ../secrets/k"}`},
		{"Read", fmt.Sprintf(`{"file_path":%q}`, filepath.Join(proj, "secrets/k"))},
		{"Write", fmt.Sprintf(`{"file_path":%q,"content":"PWNED"}`, filepath.Join(sub, "locked/f.txt"))},
	}
	for _, id := range []string{child.ID, grandchild.ID} {
		for _, tc := range cases {
			if got, why := decideIn(t, td, id, tc.tool, tc.input); got != permission.Deny {
				t.Errorf("session %s: %s %s: %s (%s), want deny", id, tc.tool, tc.input, got, why)
			}
		}
	}
	// Run, not only decided: nothing is written or printed.
	_, res := td.call(t, child.ID, "Bash", `{"command":"echo PWNED >> locked/f.txt; cat .env ../secrets/k"}`)
	if !res.IsError {
		t.Errorf("the child ran it: %+v", res)
	}
	if b, _ := os.ReadFile(filepath.Join(sub, "locked/f.txt")); string(b) != "x" {
		t.Errorf("locked/f.txt holds %q", b)
	}
	// A deny the parent gains binds its sub-agents from their next call.
	later := `{"command":"cat later"}`
	if got, why := decideIn(t, td, child.ID, "Bash", later); got != permission.Allow {
		t.Fatalf("before the parent's new deny: %s (%s)", got, why)
	}
	if code, b := td.do(t, "PATCH", "/v1/sessions/"+parent.ID, fmt.Sprintf(`{"rules":{%s}}`, strings.Replace(parentRules, `]`, `,"Read(./sub/later)"]`, 1))); code != http.StatusOK {
		t.Fatalf("patch parent: %d %s", code, b)
	}
	for _, id := range []string{child.ID, grandchild.ID} {
		if got, why := decideIn(t, td, id, "Bash", later); got != permission.Deny {
			t.Errorf("session %s after the parent's new deny: %s (%s)", id, got, why)
		}
	}
	// And a reload rebuilds them from the parent's rule set, parents first.
	td.d.core.reloadRules()
	if got, why := decideIn(t, td, grandchild.ID, "Bash", `{"command":"cat ../secrets/k"}`); got != permission.Deny {
		t.Errorf("grandchild after a reload: %s (%s)", got, why)
	}
}

// TestLinkedCwdRulesHoldAtRealPath: in a session given as a link to its project, a rule
// anchored at the cwd holds a call naming the project by its real path.
func TestLinkedCwdRulesHoldAtRealPath(t *testing.T) {
	td := startDaemon(t, "")
	base := testHostDir(t)
	real, link := filepath.Join(base, "proj2"), filepath.Join(base, "proj2link")
	mkFiles(t, real, "secrets/k", "src/a.txt")
	if err := os.Symlink("proj2", link); err != nil {
		t.Fatal(err)
	}
	def := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"default","rules":{"ask":["Read(./secrets/**)"]}}`, link))
	edits := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"acceptEdits","rules":{"ask":["Edit(./src/**)"]}}`, link))
	child := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"default","parent_id":%q}`, filepath.Join(link, "src"), def.ID))
	for _, tc := range []struct {
		id, tool, input string
	}{
		{def.ID, "Bash", `{"command":"cat secrets/k"}`},
		{def.ID, "Bash", fmt.Sprintf(`{"command":"cat %s/secrets/k"}`, real)},
		{def.ID, "Read", fmt.Sprintf(`{"file_path":%q}`, filepath.Join(real, "secrets/k"))},
		{edits.ID, "Write", fmt.Sprintf(`{"file_path":%q,"content":"x"}`, filepath.Join(real, "src/new.txt"))},
		{edits.ID, "Bash", fmt.Sprintf(`{"command":"echo x > %s/src/new.txt"}`, real)},
		{child.ID, "Read", fmt.Sprintf(`{"file_path":%q}`, filepath.Join(real, "secrets/k"))},
	} {
		if got, why := decideIn(t, td, tc.id, tc.tool, tc.input); got != permission.Ask {
			t.Errorf("%s %s: %s (%s), want ask", tc.tool, tc.input, got, why)
		}
	}
	_, res := td.call(t, def.ID, "Read", fmt.Sprintf(`{"file_path":%q}`, filepath.Join(real, "secrets/k")))
	if res.Decision == nil || behavior(res) != permission.Ask {
		t.Errorf("Read of the real path ran: %+v", res)
	}
}

// TestLinkedHomeRulesHoldAtRealPath: a rule anchored at a home that is a link (/home/c ->
// /home/c_real) holds a call naming the real home; the home is resolved as its owner.
func TestLinkedHomeRulesHoldAtRealPath(t *testing.T) {
	td := startDaemon(t, "")
	u := testutil.CreateUser(t, "sbhlk")
	// The link outside /tmp, which each session's worker has its own of.
	real, link := u.Home, filepath.Join(testHostDir(t), "home")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("usermod", "-d", link, u.Name).CombinedOutput(); err != nil {
		t.Fatalf("usermod -d: %v: %s", err, out)
	}
	mkFiles(t, real, "vault/k")
	if err := os.Chown(filepath.Join(real, "vault/k"), int(u.UID), int(u.GID)); err != nil {
		t.Fatal(err)
	}
	code, b := curlAs(t, td, u, "POST", "/v1/sessions", fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions","rules":{"deny":["Read(~/vault/**)"]}}`, real), "")
	if code != http.StatusCreated {
		t.Fatalf("create session: %d %s", code, b)
	}
	var s protocol.Session
	decodeInto(t, b, &s)
	for _, p := range []string{filepath.Join(link, "vault/k"), filepath.Join(real, "vault/k")} {
		code, b := curlAs(t, td, u, "POST", "/v1/sessions/"+s.ID+"/decide", callBody("Read", fmt.Sprintf(`{"file_path":%q}`, p), ""), "")
		var res protocol.CallResult
		decodeInto(t, b, &res)
		if code != http.StatusOK || res.Decision == nil || behavior(res) != permission.Deny {
			t.Errorf("Read %s: %d %s, want deny", p, code, b)
		}
	}
}
