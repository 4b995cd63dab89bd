package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/client"
	"github.com/sandboxd/sandboxd/protocol"
)

// connectMCP starts `sbctl mcp` (through sbctl, which re-executes sbctl-full) and connects
// the SDK's own client to it over stdio.
func connectMCP(t *testing.T, b bins, socket string, onProgress func(*mcp.ProgressNotificationClientRequest), args ...string) *mcp.ClientSession {
	t.Helper()
	cmd := exec.Command(b.sbctl, append([]string{"--socket", socket, "mcp"}, args...)...)
	cmd.Stderr = os.Stderr
	c := mcp.NewClient(&mcp.Implementation{Name: "sbctl-test", Version: "0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			if onProgress != nil {
				onProgress(r)
			}
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	return cs
}

func text(r *mcp.CallToolResult) string {
	var sb strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			sb.WriteString(tc.Text)
		}
	}
	return sb.String()
}

func TestMCPListsAndCallsTools(t *testing.T) {
	b := buildBins(t)
	d := startDaemon(t, b, "")
	work := filepath.Join(d.dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(work, "hello.txt")
	if err := os.WriteFile(file, []byte("hello\nworld\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var progress []string
	cs := connectMCP(t, b, d.socket, func(r *mcp.ProgressNotificationClientRequest) {
		mu.Lock()
		defer mu.Unlock()
		progress = append(progress, r.Params.Message)
	}, "--cwd", work, "--deny", "Bash(rm:*)")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	tl, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	daemonTools, err := client.New(d.socket).Tools(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*mcp.Tool{}
	for _, tool := range tl.Tools {
		got[tool.Name] = tool
	}
	for _, name := range []string{"Bash", "Read", "Write", "Edit", "MultiEdit", "Glob", "Grep", "BashOutput", "KillShell", "WebFetch"} {
		tool, ok := got[name]
		if !ok {
			t.Errorf("tool %s not listed (got %v)", name, keys(got))
			continue
		}
		if tool.Annotations == nil || tool.Annotations.DestructiveHint == nil || tool.Annotations.OpenWorldHint == nil {
			t.Errorf("%s: annotations %+v", name, tool.Annotations)
		}
		schema, _ := json.Marshal(tool.InputSchema)
		if !strings.Contains(string(schema), `"type":"object"`) {
			t.Errorf("%s: input schema %s", name, schema)
		}
		// The schema is the daemon's, not a copy.
		for _, dt := range daemonTools.Tools {
			if dt.Name == name && len(dt.InputSchema) > 0 && !jsonEqual(t, dt.InputSchema, schema) {
				t.Errorf("%s: schema %s, the daemon's %s", name, schema, dt.InputSchema)
			}
		}
	}
	for _, notServed := range []string{"ToolSearch", "EnterPlanMode", "ExitPlanMode"} {
		if _, ok := got[notServed]; ok {
			t.Errorf("%s is served", notServed)
		}
	}
	if r := got["Read"]; r != nil && (!r.Annotations.ReadOnlyHint || *r.Annotations.OpenWorldHint) {
		t.Errorf("Read annotations %+v", r.Annotations)
	}
	if r := got["Bash"]; r != nil && (r.Annotations.ReadOnlyHint || !*r.Annotations.DestructiveHint) {
		t.Errorf("Bash annotations %+v", r.Annotations)
	}
	if r := got["WebFetch"]; r != nil && (!r.Annotations.ReadOnlyHint || !*r.Annotations.OpenWorldHint) {
		t.Errorf("WebFetch annotations %+v", r.Annotations)
	}

	call := func(name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return r
	}
	t.Run("Read", func(t *testing.T) {
		r := call("Read", map[string]any{"file_path": file})
		if r.IsError || !strings.Contains(text(r), "hello") || !strings.Contains(text(r), "world") {
			t.Errorf("Read: error %v, %q", r.IsError, text(r))
		}
	})
	t.Run("Glob", func(t *testing.T) {
		r := call("Glob", map[string]any{"pattern": "*.txt"})
		if r.IsError || !strings.Contains(text(r), "hello.txt") {
			t.Errorf("Glob: error %v, %q", r.IsError, text(r))
		}
	})
	t.Run("Bash", func(t *testing.T) {
		r := call("Bash", map[string]any{"command": "echo hi"})
		if r.IsError || !strings.Contains(text(r), "hi") {
			t.Errorf("Bash: error %v, %q", r.IsError, text(r))
		}
	})
	t.Run("an ask is an error that says so", func(t *testing.T) {
		r := call("Write", map[string]any{"file_path": filepath.Join(work, "new.txt"), "content": "x"})
		if !r.IsError || !strings.Contains(text(r), "Approval required (ask)") || !strings.Contains(text(r), "mode") {
			t.Errorf("Write in default mode: error %v, %q", r.IsError, text(r))
		}
		if _, err := os.Stat(filepath.Join(work, "new.txt")); err == nil {
			t.Error("the asked Write ran")
		}
	})
	t.Run("a denial is an error with the rule", func(t *testing.T) {
		r := call("Bash", map[string]any{"command": "rm -f " + file})
		if !r.IsError || !strings.Contains(text(r), "Denied") || !strings.Contains(text(r), "Bash(rm:*)") {
			t.Errorf("denied Bash: error %v, %q", r.IsError, text(r))
		}
	})
	t.Run("a schema violation is an error", func(t *testing.T) {
		r := call("Read", map[string]any{"nope": 1})
		if !r.IsError {
			t.Errorf("bad input: %q", text(r))
		}
	})
	t.Run("progress of a long Bash call", func(t *testing.T) {
		params := &mcp.CallToolParams{Name: "Bash", Arguments: map[string]any{"command": "for i in 1 2 3; do echo tick$i; sleep 0.3; done"}}
		params.SetProgressToken("p1")
		r, err := cs.CallTool(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if r.IsError || !strings.Contains(text(r), "tick3") {
			t.Errorf("Bash: error %v, %q", r.IsError, text(r))
		}
		// Notifications may trail the result on the wire.
		deadline := time.Now().Add(5 * time.Second)
		for {
			mu.Lock()
			n := len(progress)
			all := strings.Join(progress, "")
			mu.Unlock()
			if n >= 2 && strings.Contains(all, "tick1") {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("progress notifications: %q", all)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	})

	t.Run("a session the daemon lost is made again", func(t *testing.T) {
		var l protocol.SessionList
		if err := client.New(d.socket).Do(ctx, "GET", "/v1/sessions", nil, &l); err != nil || len(l.Sessions) != 1 {
			t.Fatalf("sessions: %v %v", l.Sessions, err)
		}
		if err := client.New(d.socket).DeleteSession(ctx, l.Sessions[0].ID); err != nil {
			t.Fatal(err)
		}
		r := call("Bash", map[string]any{"command": "echo again"})
		if r.IsError || !strings.Contains(text(r), "again") {
			t.Errorf("after the session was lost: error %v, %q", r.IsError, text(r))
		}
		if !strings.Contains(text(r), "session was gone") {
			t.Errorf("the call that made the session again does not say so: %q", text(r))
		}
		if r := call("Bash", map[string]any{"command": "echo later"}); strings.Contains(text(r), "session was gone") {
			t.Errorf("a later call in the new session says it was made again: %q", text(r))
		}
	})

	// The connection's session goes with the connection.
	c := client.New(d.socket)
	var before protocol.SessionList
	if err := c.Do(ctx, "GET", "/v1/sessions", nil, &before); err != nil || len(before.Sessions) != 1 {
		t.Fatalf("sessions while connected: %v %v", before.Sessions, err)
	}
	if err := cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var after protocol.SessionList
		if err := c.Do(ctx, "GET", "/v1/sessions", nil, &after); err != nil {
			t.Fatal(err)
		}
		if len(after.Sessions) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sessions after the connection closed: %v", after.Sessions)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func keys(m map[string]*mcp.Tool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

// TestMCPAsksThroughElicitation: with a client that can ask its user, an asked call is put to
// them; an allow runs it (once), a deny refuses it with their message, and the daemon's
// approval queue records both answers.
func TestMCPAsksThroughElicitation(t *testing.T) {
	b := buildBins(t)
	d := startDaemon(t, b, "")
	work := filepath.Join(d.dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	var asked []string
	c := mcp.NewClient(&mcp.Implementation{Name: "sbctl-test", Version: "0"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked = append(asked, r.Params.Message)
			if strings.Contains(r.Params.Message, "allowed.txt") {
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "allow"}}, nil
			}
			if strings.Contains(r.Params.Message, "declined.txt") {
				return &mcp.ElicitResult{Action: "decline"}, nil
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "deny", "message": "write to allowed.txt instead"}}, nil
		},
	})
	cmd := exec.Command(b.sbctl, "--socket", d.socket, "mcp", "--cwd", work, "--wait", "30s")
	cmd.Stderr = os.Stderr
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer cs.Close()
	write := func(name string) *mcp.CallToolResult {
		t.Helper()
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "Write", Arguments: map[string]any{"file_path": filepath.Join(work, name), "content": "x"}})
		if err != nil {
			t.Fatalf("call: %v", err)
		}
		return r
	}
	if r := write("allowed.txt"); r.IsError {
		t.Errorf("allowed through elicitation: %q", text(r))
	}
	if _, err := os.Stat(filepath.Join(work, "allowed.txt")); err != nil {
		t.Errorf("the allowed Write did not run: %v", err)
	}
	r := write("refused.txt")
	if !r.IsError || !strings.Contains(text(r), "write to allowed.txt instead") {
		t.Errorf("denied through elicitation: error %v, %q", r.IsError, text(r))
	}
	if _, err := os.Stat(filepath.Join(work, "refused.txt")); err == nil {
		t.Error("the denied Write ran")
	}
	if r := write("declined.txt"); !r.IsError || !strings.Contains(text(r), "the user declined the question") {
		t.Errorf("declined through elicitation: error %v, %q", r.IsError, text(r))
	}
	if len(asked) != 3 || !strings.Contains(asked[0], "Write") {
		t.Errorf("elicitations: %q", asked)
	}
	// A command padded with blanks is put to the user whole: its tail is in the question
	// (the handler allows only what it can read there).
	padded := "git status" + strings.Repeat(" ", 600) + "; touch allowed.txt.tail"
	if r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "Bash", Arguments: map[string]any{"command": padded}}); err != nil || r.IsError {
		t.Errorf("a padded command whose tail the user read: %v %q; asked %q", err, text(r), asked[len(asked)-1])
	}
	if _, err := os.Stat(filepath.Join(work, "allowed.txt.tail")); err != nil {
		t.Errorf("the padded command's tail did not run after an allow: %v", err)
	}
	var answers []string
	for rec, err := range audit.Query(filepath.Join(d.dir, "state", "audit"), audit.Filter{Kinds: []audit.Kind{audit.KindApprovalResolve}}) {
		if err != nil {
			t.Fatal(err)
		}
		answers = append(answers, rec.Detail["answer"])
	}
	if strings.Join(answers, ",") != "allow,deny,deny,allow" {
		t.Errorf("approval answers in the audit log: %v", answers)
	}
}

// TestMCPWaitsInTheQueue: a client that cannot ask its user, with --wait, leaves the asked
// call waiting in sandboxd's approval queue, where `sbctl approve` lets it run.
func TestMCPWaitsInTheQueue(t *testing.T) {
	b := buildBins(t)
	d := startDaemon(t, b, "")
	work := filepath.Join(d.dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	cs := connectMCP(t, b, d.socket, nil, "--cwd", work, "--wait", "30s")
	defer cs.Close()
	go func() {
		for range 100 {
			out, err := exec.Command(b.sbctl, "--socket", d.socket, "--json", "approvals").Output()
			var list []struct{ ID string }
			if err == nil && json.Unmarshal(out, &list) == nil && len(list) == 1 {
				exec.Command(b.sbctl, "--socket", d.socket, "approve", list[0].ID).Run()
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "Write", Arguments: map[string]any{"file_path": filepath.Join(work, "queued.txt"), "content": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if r.IsError {
		t.Errorf("approved from the queue: %q", text(r))
	}
	if _, err := os.Stat(filepath.Join(work, "queued.txt")); err != nil {
		t.Errorf("the approved Write did not run: %v", err)
	}
}

// TestMCPSurvivesBadLines: lines that are not JSON-RPC messages get a JSON-RPC error each,
// and the server goes on serving the client's real requests (the SDK alone ends the session
// on the first one, and the agent loses its tools).
func TestMCPSurvivesBadLines(t *testing.T) {
	b := buildBins(t)
	d := startDaemon(t, b, "")
	cmd := exec.Command(b.sbctl, "--socket", d.socket, "mcp", "--cwd", d.dir)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan map[string]any, 16)
	go func() {
		dec := json.NewDecoder(stdout)
		for {
			var m map[string]any
			if dec.Decode(&m) != nil {
				close(lines)
				return
			}
			lines <- m
		}
	}()
	next := func() map[string]any {
		select {
		case m, ok := <-lines:
			if !ok {
				t.Fatal("sbctl mcp ended")
			}
			return m
		case <-time.After(30 * time.Second):
			t.Fatal("no answer from sbctl mcp")
		}
		return nil
	}
	send := func(s string) {
		if _, err := stdin.Write([]byte(s + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	for _, bad := range []string{"not json", `{"foo":1}`, `{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}`} {
		send(bad)
		if m := next(); m["error"] == nil {
			t.Errorf("%s: answered %v, want an error", bad, m)
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if m := next(); m["result"] == nil {
		t.Fatalf("initialize after the bad lines: %v", m)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`[{"jsonrpc":"2.0","id":2,"method":"ping"}]`) // no batches in 2025-06-18
	if m := next(); m["error"] == nil {
		t.Errorf("a batch in 2025-06-18: answered %v, want an error", m)
	}
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"Bash","arguments":{"command":"echo still-here"}}}`)
	m := next()
	if b, _ := json.Marshal(m); m["id"] != float64(3) || !strings.Contains(string(b), "still-here") {
		t.Errorf("a call after the bad lines: %s", b)
	}
}

// TestMCPOwnAnswersOnly: an answer a client sends unasked (no elicitation
// declared) for an approval of the user's another session is waiting on is no answer: the
// other call does not run. Nor is an answer through an eliciting client to a question it
// was never put.
func TestMCPOwnAnswersOnly(t *testing.T) {
	b := buildBins(t)
	d := startDaemon(t, b, "")
	work := filepath.Join(d.dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(b.sbctl, "--socket", d.socket, "session", "new", "--cwd", work).Output()
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(work, "other.txt")
	waiting := exec.Command(b.sbctl, "--socket", d.socket, "call", "--session", strings.TrimSpace(string(out)), "--wait", "20s",
		"Write", fmt.Sprintf(`{"file_path":%q,"content":"x"}`, other))
	if err := waiting.Start(); err != nil {
		t.Fatal(err)
	}
	defer waiting.Process.Kill()
	var pending string
	for range 100 {
		out, err := exec.Command(b.sbctl, "--socket", d.socket, "--json", "approvals").Output()
		var list []struct{ ID string }
		if err == nil && json.Unmarshal(out, &list) == nil && len(list) == 1 {
			pending = list[0].ID
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if pending == "" {
		t.Fatal("the other session's Write did not wait for an approval")
	}
	answer := mcp.InputResponseMap{"approve": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "allow"}}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	noElicit := connectMCP(t, b, d.socket, nil, "--cwd", work)
	defer noElicit.Close()
	eliciting := mcp.NewClient(&mcp.Implementation{Name: "sbctl-test", Version: "0"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
	})
	cmd := exec.Command(b.sbctl, "--socket", d.socket, "mcp", "--cwd", work)
	cmd.Stderr = os.Stderr
	withElicit, err := eliciting.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer withElicit.Close()
	for name, cs := range map[string]*mcp.ClientSession{"no elicitation": noElicit, "elicitation, never asked": withElicit} {
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "Write", Arguments: map[string]any{"file_path": other, "content": "x"},
			InputResponses: answer, RequestState: pending})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !r.IsError || !strings.Contains(text(r), "did not put") {
			t.Errorf("%s: an unasked answer was taken: %q", name, text(r))
		}
	}
	time.Sleep(300 * time.Millisecond)
	if _, err := os.Stat(other); err == nil {
		t.Fatal("another session's waiting Write ran on an answer the MCP client made up")
	}
}
