package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEditDenyPatternPastDeepTree: what a call makes that a wildcard Edit deny names is moved
// aside when it ends though the call also made a tree deeper than any walk goes; the part past
// the walk's depth goes aside too, and the next call is refused until the tree shrinks.
func TestEditDenyPatternPastDeepTree(t *testing.T) {
	td := startDaemon(t, "")
	dir := testHostDir(t)
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions","rules":{"deny":["Edit(src/**)"]}}`, dir))
	cmd := `python3 -c 'import os; os.makedirs("sr"+"c"); open("sr"+"c/main.py","w").write("PLANTED"); os.makedirs("/".join(["d"]*300))'`
	_, res := td.call(t, s.ID, "Bash", fmt.Sprintf(`{"command":%q}`, cmd))
	if res.IsError {
		t.Fatalf("the call: %+v", res)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "src", "main.py")); err == nil {
		t.Errorf("a file the Edit deny names was left where the call made it: %q (%+v)", b, res.Data)
	}
	if _, err := os.Stat(filepath.Join(dir, strings.Repeat("d/", 299)+"d")); err == nil {
		t.Errorf("the tree past the walk's depth was left whole")
	}
	if _, res := td.call(t, s.ID, "Bash", `{"command":"echo next"}`); !res.IsError || len(res.Content) == 0 || !strings.Contains(res.Content[0].Text, "dirs deep") {
		t.Errorf("the next call ran, or was refused without saying why: %+v", res)
	}
}
