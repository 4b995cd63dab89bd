package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/permission"
)

// TestAskRulesHoldInTheKernel: what an ask path rule names is hidden (Read) or read-only
// (Edit) in every call no person approved, in every mode: a glob, a recursive search or an
// interpreter reaches it by no path the decision sees, and must not read or change it unasked.
// Glob and Grep skip what they name. A call a person approved, who saw the command, runs
// without them.
func TestAskRulesHoldInTheKernel(t *testing.T) {
	td := startDaemon(t, "")
	dir := testHostDir(t)
	for _, d := range []string{"secrets", "src"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "secrets", "k.txt"), []byte("TOPSECRET\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "src", "important.txt"), []byte("keep\n"), 0o644)
	rules := `"rules":{"ask":["Read(./secrets/**)","Edit(./src/**)"]}`
	for _, mode := range []string{"default", "acceptEdits", "dontAsk", "bypassPermissions"} {
		s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":%q,%s}`, dir, mode, rules))
		for _, cmd := range []string{
			"cat sec*/k.txt",
			"grep -r TOPSECRET .",
			`python3 -c 'print(open("sec"+"rets/k.txt").read())'`,
			"rm -f sr?/important.txt",
			`python3 -c 'open("sr"+"c/important.txt","a").write("changed\n")'`,
		} {
			_, res := td.call(t, s.ID, "Bash", fmt.Sprintf(`{"command":%q}`, cmd))
			if out, _ := res.Data["stdout"].(string); strings.Contains(out, "TOPSECRET") {
				t.Errorf("%s: %q read what an ask rule names, unasked: %q", mode, cmd, out)
			}
			if got, err := os.ReadFile(filepath.Join(dir, "src", "important.txt")); err != nil || string(got) != "keep\n" {
				t.Fatalf("%s: %q changed what an ask rule names, unasked: %q %v", mode, cmd, got, err)
			}
		}
		// The daemon's own searches skip it too: the policy saw only where they start.
		for tool, input := range map[string]string{
			"Grep": fmt.Sprintf(`{"pattern":"TOPSECRET","path":%q,"output_mode":"content"}`, dir),
			"Glob": `{"pattern":"**/k.txt"}`,
		} {
			_, res := td.call(t, s.ID, tool, input)
			if len(res.Content) == 0 || strings.Contains(res.Content[0].Text, "TOPSECRET") || strings.Contains(res.Content[0].Text, "k.txt") {
				t.Errorf("%s: %s listed or printed what an ask rule names, unasked: %+v", mode, tool, res)
			}
		}
	}
	// Approved: the person saw `cat secrets/k.txt`, which then reads it.
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"default",%s}`, dir, rules))
	res := td.callRaw(t, s.ID, callBody("Bash", `{"command":"cat secrets/k.txt"}`, ""))
	if behavior(res) != permission.Ask || res.ApprovalID == "" {
		t.Fatalf("want an ask: %+v", res)
	}
	if code, b := td.answer(t, res.ApprovalID, `{"answer":"allow"}`); code != 200 {
		t.Fatalf("answer: %d %s", code, b)
	}
	res = td.callRaw(t, s.ID, fmt.Sprintf(`{"approval_id":%q,"wait_ms":10000}`, res.ApprovalID))
	if out, _ := res.Data["stdout"].(string); out != "TOPSECRET\n" {
		t.Errorf("the approved call did not read what it was approved to: %+v", res)
	}
}

// TestTreeReadsMeetAskRulesUnconfined: a Bash command its caller runs itself (an agent's hook
// without --confine) meets no sandbox, so a read of everything under a dir where an ask rule
// may match a file (grep -r, rg) asks, as the caller's own Grep does; a read of a dir no ask
// rule reaches does not.
func TestTreeReadsMeetAskRulesUnconfined(t *testing.T) {
	td := startDaemon(t, "")
	dir := testHostDir(t)
	for _, d := range []string{"secrets", "docs"} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
	}
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"default","rules":{"ask":["Read(./secrets/**)","Read(**/*.key)"]}}`, dir))
	for cmd, want := range map[string]permission.Behavior{
		"grep -r SECRET .":      permission.Ask,
		"rg -uu SECRET":         permission.Ask,
		"grep -rl KEY docs":     permission.Ask, // *.key may lie below
		"cat docs/readme.txt":   permission.Allow,
		"grep SECRET docs/a.md": permission.Allow,
	} {
		res := td.decideBy(t, s.ID, "Bash", fmt.Sprintf(`{"command":%q}`, cmd), true)
		if got := behavior(res); got != want {
			t.Errorf("%s: %s (%s), want %s", cmd, got, res.Decision.Reason, want)
		}
	}
	// The reason names the tree the rule reaches into, not the line's first word or tree.
	s = td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"default","rules":{"ask":["Read(./secrets/**)"]}}`, dir))
	for _, cmd := range []string{"tar cf - . | wc -c", "grep -r x docs ."} {
		res := td.decideBy(t, s.ID, "Bash", fmt.Sprintf(`{"command":%q}`, cmd), true)
		want := dir
		if behavior(res) != permission.Ask || !strings.Contains(res.Decision.Reason, "files under "+want+",") {
			t.Errorf("%s: %s (%s), want an ask naming %s", cmd, behavior(res), res.Decision.Reason, want)
		}
	}
}
