package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestScreenLines: a line the SDK cannot decode is answered with a JSON-RPC error and not
// passed on; every other line is passed on whole, in order.
func TestScreenLines(t *testing.T) {
	initOld := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}`
	initNew := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`
	ping := `{"jsonrpc":"2.0","id":2,"method":"ping"}`
	batch := `[` + ping + `]`
	for _, tc := range []struct {
		name   string
		lines  []string
		passed []string
		codes  []int
		ids    []string
	}{
		{"not JSON", []string{"hello", ping}, []string{ping}, []int{codeParseError}, []string{"null"}},
		{"not a message", []string{`{"foo":1}`, `42`, ping}, []string{ping}, []int{codeInvalidRequest, codeInvalidRequest}, []string{"null", "null"}},
		{"a bad version keeps its id", []string{`{"jsonrpc":"1.0","id":7,"method":"ping"}`}, nil, []int{codeInvalidRequest}, []string{"7"}},
		{"an object id", []string{`{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}`}, nil, []int{codeInvalidRequest}, []string{"null"}},
		{"an empty batch", []string{`[]`}, nil, []int{codeInvalidRequest}, []string{"null"}},
		{"blank lines", []string{"", "  ", ping}, []string{ping}, nil, nil},
		{"a batch before 2025-06-18", []string{initOld, batch}, []string{initOld, ping}, nil, nil},
		{"a batch from 2025-06-18", []string{initNew, batch, ping}, []string{initNew, ping}, []int{codeInvalidRequest}, []string{"null"}},
		{"too long", []string{`{"jsonrpc":"2.0","id":3,"method":"ping","pad":"` + strings.Repeat("x", maxLineBytes) + `"}`, ping}, []string{ping}, []int{codeInvalidRequest}, []string{"null"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, logs bytes.Buffer
			r, _ := screenLines(strings.NewReader(strings.Join(tc.lines, "\n")), &lockedWriter{w: &out}, &logs)
			got, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			want := ""
			for _, l := range tc.passed {
				want += l + "\n"
			}
			if string(got) != want {
				t.Errorf("passed on %q, want %q", clip(got), clip([]byte(want)))
			}
			replies := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if out.Len() == 0 {
				replies = nil
			}
			if len(replies) != len(tc.codes) {
				t.Fatalf("replies %q, want %d", replies, len(tc.codes))
			}
			for i, line := range replies {
				var rep struct {
					JSONRPC string          `json:"jsonrpc"`
					ID      json.RawMessage `json:"id"`
					Error   struct{ Code int }
				}
				if err := json.Unmarshal([]byte(line), &rep); err != nil || rep.JSONRPC != "2.0" || rep.Error.Code != tc.codes[i] || string(rep.ID) != tc.ids[i] {
					t.Errorf("reply %d: %s (want code %d, id %s)", i, line, tc.codes[i], tc.ids[i])
				}
			}
		})
	}
}

// TestBatchReplies: a batch is answered with one array holding a response for each of its
// requests and an error for each element that is no message, whatever notifications it
// holds, and not at all when it holds notifications alone. The SDK alone never answered a
// batch holding a notification, and the client waited forever on its requests.
func TestBatchReplies(t *testing.T) {
	ping := func(id string) string { return `{"jsonrpc":"2.0","id":` + id + `,"method":"ping"}` }
	cancelled := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}`
	unknown := `{"jsonrpc":"2.0","method":"notifications/no_such"}`
	for _, tc := range []struct {
		name    string
		version string
		batch   string
		// want is the replies to the batch: a result by its id, an error as E<code>@<id>, an
		// array in brackets.
		want []string
	}{
		{"requests and a notification", "2025-03-26", "[" + ping("1") + "," + cancelled + "," + ping("2") + "]", []string{"[1 2]"}},
		{"a notification first", "2025-03-26", "[" + unknown + "," + ping(`"a"`) + "]", []string{`["a"]`}},
		{"under 2024-11-05", "2024-11-05", "[" + ping("1") + "," + unknown + "]", []string{"[1]"}},
		{"notifications alone", "2025-03-26", "[" + cancelled + "," + unknown + "]", nil},
		{"an element that is no object", "2025-03-26", "[1," + ping("2") + "," + unknown + "]", []string{"[E-32600@null 2]"}},
		{"no message at all", "2025-03-26", `[1,"x",{"jsonrpc":"1.0","id":4,"method":"ping"}]`, []string{"[E-32600@null E-32600@null E-32600@4]"}},
		{"invalid elements and notifications", "2025-03-26", "[" + unknown + `,{"foo":1}]`, []string{"[E-32600@null]"}},
		{"an id twice", "2025-03-26", "[" + ping("1") + "," + ping("1") + "]", []string{"[1 E-32600@null]"}},
		{"an unknown method", "2025-03-26", `[{"jsonrpc":"2.0","id":3,"method":"no/such"},` + cancelled + "]", []string{"[E-32601@3]"}},
		{"an empty batch", "2025-03-26", "[]", []string{"E-32600@null"}},
		{"no batches in 2025-06-18", "2025-06-18", "[" + ping("1") + "," + unknown + "]", []string{"E-32600@null"}},
		// Not a batch: white space after a message once made the SDK end the session.
		{"white space after a message", "2025-06-18", ping("5") + " \t ", []string{"5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := startServer(t)
			c.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + tc.version +
				`","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
			if got := c.until("0"); len(got) != 1 || got[0] != "0" {
				t.Fatalf("initialize: %q", got)
			}
			c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			c.send(tc.batch)
			// A ping after it marks where to stop reading; the server may answer it before the
			// batch (it serves requests side by side), so what is still missing is read after.
			c.send(ping(`"sync"`))
			got := c.until(`"sync"`)
			got = got[:len(got)-1]
			for len(got) < len(tc.want) {
				got = append(got, c.next())
			}
			if strings.Join(got, " | ") != strings.Join(tc.want, " | ") {
				t.Errorf("replies %q, want %q", got, tc.want)
			}
		})
	}
}

// TestIDInUse: a request reusing the id of one not yet answered, sent alone or in a batch, is
// refused and not run. Passed on, a batch's tools/list with the id of a tool call still running
// took that call's result as its own, and the call was never answered.
func TestIDInUse(t *testing.T) {
	release := make(chan struct{})
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "0"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "slow"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "slow done"}}}, nil, nil
	})
	c := serve(t, srv)
	c.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if got := c.until("0"); len(got) != 1 {
		t.Fatalf("initialize: %q", got)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	c.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"slow","arguments":{}}}`)
	c.send(`[{"jsonrpc":"2.0","id":5,"method":"tools/list"},{"jsonrpc":"2.0","id":6,"method":"ping"}]`)
	if got := c.next(); got != "[E-32600@null 6]" {
		t.Errorf("batch reusing a running call's id: %q, want [E-32600@null 6]", got)
	}
	c.send(`{"jsonrpc":"2.0","id":5,"method":"ping"}`)
	if got := c.next(); got != "E-32600@null" {
		t.Errorf("ping reusing a running call's id: %q, want E-32600@null", got)
	}
	close(release)
	select {
	case line := <-c.lines:
		if !strings.Contains(line, "slow done") || summary(line) != "5" {
			t.Errorf("the call's response: %s", line)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call was not answered")
	}
	// Answered, its id is free again.
	c.send(`{"jsonrpc":"2.0","id":5,"method":"ping"}`)
	if got := c.next(); got != "5" {
		t.Errorf("ping with the id of an answered call: %q", got)
	}
	c.send(`[{"jsonrpc":"2.0","id":5,"method":"ping"}]`)
	if got := c.next(); got != "[5]" {
		t.Errorf("batch with the id of an answered call: %q", got)
	}
}

// testConn is a client's end of a server on screenLines.
type testConn struct {
	t     *testing.T
	in    io.Writer
	lines chan string
}

// startServer serves an MCP server with no tools through screenLines until the test ends.
func startServer(t *testing.T) *testConn {
	return serve(t, mcp.NewServer(&mcp.Implementation{Name: "t", Version: "0"}, nil))
}

// serve serves srv through screenLines until the test ends.
func serve(t *testing.T, srv *mcp.Server) *testConn {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	out := &lockedWriter{w: outW}
	r, w := screenLines(inR, out, io.Discard)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, &mcp.IOTransport{Reader: nopReadCloser{r}, Writer: nopWriteCloser{w}}) }()
	c := &testConn{t: t, in: inW, lines: make(chan string, 16)}
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(func() {
		_ = inW.Close()
		cancel()
		<-done
		_ = outW.Close()
		<-read
	})
	return c
}

func (c *testConn) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		c.t.Fatal(err)
	}
}

// until reads the server's messages up to the response with id, and returns each as
// summary puts it.
func (c *testConn) until(id string) []string {
	c.t.Helper()
	var got []string
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				c.t.Fatalf("the server ended; read %q", got)
			}
			s := summary(line)
			got = append(got, s)
			if s == id {
				return got
			}
		case <-time.After(10 * time.Second):
			c.t.Fatalf("no response %s; read %q", id, got)
		}
	}
}

// next is the next response, summarized.
func (c *testConn) next() string {
	c.t.Helper()
	select {
	case line, ok := <-c.lines:
		if !ok {
			c.t.Fatal("the server ended")
		}
		return summary(line)
	case <-time.After(10 * time.Second):
		c.t.Fatal("no response")
	}
	return ""
}

// summary is a response as its id, an error as E<code>@<id>, and an array as its elements'
// in brackets.
func summary(line string) string {
	var many []json.RawMessage
	if json.Unmarshal([]byte(line), &many) == nil {
		var s []string
		for _, m := range many {
			s = append(s, summary(string(m)))
		}
		return "[" + strings.Join(s, " ") + "]"
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Error  *struct{ Code int }
	}
	switch {
	case json.Unmarshal([]byte(line), &m) != nil:
		return "not JSON: " + line
	case m.Method != "":
		return "request " + m.Method
	case m.Error != nil:
		return fmt.Sprintf("E%d@%s", m.Error.Code, m.ID)
	}
	return string(m.ID)
}

func clip(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "..."
	}
	return string(b)
}

// FuzzScreenLine: whatever a line holds, what is passed on is messages the SDK decodes
// without ending the session, one a line and none a batch, and a reply at once is a
// well-formed JSON-RPC error or a batch's array of responses.
func FuzzScreenLine(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`, `{"id":{"a":1}}`, `[]`, `"x"`, `nul`,
		`[{"jsonrpc":"2.0","method":"notifications/cancelled"},1,{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":1,"method":"ping"}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if bytes.ContainsRune(line, '\n') || len(bytes.TrimSpace(line)) == 0 {
			t.Skip("screenLines splits lines and skips blank ones before screen")
		}
		sc := screener{batches: &batcher{out: io.Discard}}
		pass, reply, _ := sc.screen(line, false)
		if reply != nil {
			var one json.RawMessage
			if err := json.Unmarshal(reply, &one); err != nil || !bytes.HasSuffix(reply, []byte("\n")) {
				t.Fatalf("reply %q to %q", reply, line)
			}
			msgs := []json.RawMessage{one}
			if one[0] == '[' {
				if err := json.Unmarshal(one, &msgs); err != nil || len(msgs) == 0 {
					t.Fatalf("reply %q to %q", reply, line)
				}
			}
			for _, m := range msgs {
				var rep struct {
					JSONRPC string          `json:"jsonrpc"`
					ID      json.RawMessage `json:"id"`
					Error   *struct{ Code int }
				}
				if err := json.Unmarshal(m, &rep); err != nil || rep.JSONRPC != "2.0" || rep.Error == nil || len(rep.ID) == 0 {
					t.Fatalf("reply %q to %q", reply, line)
				}
			}
		}
		for _, m := range pass {
			if bytes.ContainsRune(m, '\n') || bytes.TrimSpace(m)[0] == '[' {
				t.Fatalf("passed on %q of %q: not one message a line", m, line)
			}
			if _, err := jsonrpc.DecodeMessage(bytes.TrimSpace(m)); err != nil {
				t.Fatalf("passed on %q of %q: %v", m, line, err)
			}
		}
	})
}
