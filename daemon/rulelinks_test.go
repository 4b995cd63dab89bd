package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/permission"
)

// TestRuleThroughLinkHoldsWhereItLeads: a deny rule written through a link in the project
// (`Read(./proj/cfg/**)`, cfg a link to realcfg) holds where the link leads, for every tool
// and for calls the agent runs itself, though the link was made after the session's rules
// were read. The policy matched the rule's name alone: Read, Grep and Glob of realcfg were
// allowed, a Write there too in acceptEdits, and only Bash found it hidden by the kernel.
func TestRuleThroughLinkHoldsWhereItLeads(t *testing.T) {
	td := startDaemon(t, "")
	dir := testHostDir(t)
	ext := filepath.Join(dir, "ext")
	real := filepath.Join(ext, "realcfg")
	for _, d := range []string{"proj", "ext/realcfg"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(real, "x.txt"), []byte("SECRET-IN-REALCFG\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	readme := filepath.Join(dir, "proj", "readme")
	if err := os.WriteFile(readme, []byte("hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"acceptEdits","rules":{"deny":["Read(./proj/cfg/**)","Edit(./proj/cfg/**)"]}}`, dir))
	// The session's file worker starts before the link is there: its view hides nothing.
	if _, res := td.call(t, s.ID, "Read", fmt.Sprintf(`{"file_path":%q}`, readme)); behavior(res) != permission.Allow || res.IsError {
		t.Fatalf("a Read of the readme: %+v", res)
	}
	if err := os.Symlink("../ext/realcfg", filepath.Join(dir, "proj", "cfg")); err != nil {
		t.Fatal(err)
	}
	for _, unconfined := range []bool{false, true} {
		for _, c := range []struct{ tool, input string }{
			{"Read", fmt.Sprintf(`{"file_path":%q}`, filepath.Join(real, "x.txt"))},
			{"Grep", fmt.Sprintf(`{"pattern":"SECRET","path":%q}`, real)},
			{"Glob", fmt.Sprintf(`{"pattern":"*","path":%q}`, real)},
			{"Write", fmt.Sprintf(`{"file_path":%q,"content":"x"}`, filepath.Join(real, "new.txt"))},
			{"Bash", fmt.Sprintf(`{"command":"cat %s"}`, filepath.Join(real, "x.txt"))},
		} {
			res := td.decideBy(t, s.ID, c.tool, c.input, unconfined)
			if behavior(res) != permission.Deny || !strings.Contains(res.Decision.Reason, "proj/cfg/**") && !strings.Contains(res.Decision.Reason, "realcfg/**") {
				t.Errorf("%s %s (unconfined %v): %s (%s); want the deny rule through the link", c.tool, c.input, unconfined, res.Decision.Behavior, res.Decision.Reason)
			}
		}
	}
	// Run by the agent itself, a whole tree read of the dir above the link's target (ext,
	// which holds no name of the rule) reaches it, as it would the rule's own dir.
	for _, c := range []struct{ tool, input string }{
		{"Grep", fmt.Sprintf(`{"pattern":"SECRET","path":%q}`, ext)},
		{"Glob", fmt.Sprintf(`{"pattern":"**/*.txt","path":%q}`, ext)},
		{"Bash", fmt.Sprintf(`{"command":"grep -r SECRET %s"}`, ext)},
		{"Bash", fmt.Sprintf(`{"command":"cp -r %s /tmp/x"}`, ext)},
	} {
		if res := td.decideBy(t, s.ID, c.tool, c.input, true); behavior(res) != permission.Deny {
			t.Errorf("%s %s, run by the agent: %s (%s); want it refused for the rule through the link", c.tool, c.input, res.Decision.Behavior, res.Decision.Reason)
		}
	}
	// A search of the dir above, run by the daemon, prints nothing of what the link leads to.
	_, res := td.call(t, s.ID, "Grep", fmt.Sprintf(`{"pattern":"SECRET","path":%q,"output_mode":"content"}`, ext))
	if behavior(res) != permission.Allow || strings.Contains(fmt.Sprint(res.Content), "SECRET-IN-REALCFG") {
		t.Errorf("a Grep of the session's dir: %s; printed %v", behavior(res), res.Content)
	}
	// Where the link no longer leads, neither does the rule.
	if err := os.Remove(filepath.Join(dir, "proj", "cfg")); err != nil {
		t.Fatal(err)
	}
	if res := td.decideBy(t, s.ID, "Read", fmt.Sprintf(`{"file_path":%q}`, filepath.Join(real, "x.txt")), false); behavior(res) != permission.Allow {
		t.Errorf("a Read of realcfg once the link is gone: %s (%s)", res.Decision.Behavior, res.Decision.Reason)
	}
}
