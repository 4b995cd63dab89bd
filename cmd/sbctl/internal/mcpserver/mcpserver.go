package mcpserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandboxd/sandboxd/client"
	"github.com/sandboxd/sandboxd/cmd/sbctl/internal/cli"
	"github.com/sandboxd/sandboxd/protocol"
)

// version is what the server tells MCP clients it is.
const version = "0.1.0"

// toolSpec is how MCP clients should see one of sandboxd's tools. The schema and description
// are the daemon's (GET /v1/tools); the hints are the tool's nature, which the daemon's list
// does not carry.
type toolSpec struct {
	title       string
	readOnly    bool
	destructive bool
	idempotent  bool
	openWorld   bool
}

// served lists the tools an MCP client gets, in the daemon's vocabulary; a tool the daemon
// does not have (NotebookEdit before it exists, or an older daemon's) is left out. Plan-mode and tool-search tools are
// not served: the session's mode is the connection's, and every tool's schema is given.
var served = map[string]toolSpec{
	"Bash":         {title: "Run a shell command (confined)", destructive: true, openWorld: true},
	"Read":         {title: "Read a file", readOnly: true},
	"Write":        {title: "Write a file", destructive: true, idempotent: true},
	"Edit":         {title: "Edit a file", destructive: true},
	"MultiEdit":    {title: "Make several edits to one file", destructive: true},
	"NotebookEdit": {title: "Edit a Jupyter notebook cell", destructive: true},
	"Glob":         {title: "Find files by name", readOnly: true},
	"Grep":         {title: "Search file contents", readOnly: true},
	"BashOutput":   {title: "Read a background command's output", readOnly: true},
	"KillShell":    {title: "Stop a background command", destructive: true, idempotent: true},
	"WebFetch":     {title: "Fetch a web page", readOnly: true, openWorld: true},
}

// Cmd runs `sbctl mcp`: it makes the connection's session, serves until the client goes away
// (stdin closes) or a signal ends sbctl, and removes the session.
func Cmd(e *cli.Env, args []string) error {
	fs := cli.NewFlags(e, "mcp")
	var cs protocol.CreateSession
	var allow, deny, ask, dirs cli.Multi
	fs.StringVar(&cs.Cwd, "cwd", "", "working directory of the session (default: the current one)")
	fs.StringVar(&cs.Mode, "mode", "", "permission mode (default: default)")
	fs.StringVar(&cs.ParentID, "parent", "", "parent session id (for bubble mode)")
	fs.Var(&allow, "allow", "allow rule (repeatable)")
	fs.Var(&deny, "deny", "deny rule (repeatable)")
	fs.Var(&ask, "ask", "ask rule (repeatable)")
	fs.Var(&dirs, "add-dir", "additional directory (repeatable)")
	fs.BoolVar(&cs.TrustProject, "trust-project", false, "let the project's .sandboxd settings allow, not only deny and ask")
	fs.BoolVar(&cs.PersistCwd, "persist-cwd", false, "let a Bash cd inside the session's directories carry over to later calls")
	wait := fs.Duration("wait", 0, "how long an asked call waits in sandboxd's approval queue for an answer (sbctl approvals) when the MCP client cannot ask its user (elicitation); 0: it returns at once")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.UsageError("usage: sbctl mcp [--mode M] [--cwd D] [--parent ID] [--allow R]... [--deny R]... [--ask R]... [--add-dir D]... [--wait D]")
	}
	cs.Rules = protocol.Rules{Allow: allow, Deny: deny, Ask: ask}
	cs.AdditionalDirs = dirs
	// Made again whenever a call finds it gone (connSession), so at the user's session limit
	// the daemon may end it, idle, to make room; and one this process failed to remove does
	// not hold the user's room until it expires.
	cs.Disposable = true
	if cs.Cwd == "" {
		wd, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("working directory: %w", err)
		}
		cs.Cwd = wd
	}
	c := e.Client()
	sess, err := c.CreateSession(e.Ctx, cs)
	if err != nil {
		return fmt.Errorf("create the connection's session: %w", err)
	}
	conn := &connSession{c: c, params: cs, id: sess.ID, wait: *wait}
	defer func() {
		// The connection's ctx may be what ended: removing the session (and killing what it
		// still runs) must not depend on it.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		id := conn.current()
		// Tried again while the daemon refuses it for now (the user's connections at their
		// limit, as when many servers end at once).
		for {
			err := c.DeleteSession(ctx, id)
			var ae *client.APIError
			if err == nil || errors.As(err, &ae) && ae.Status == 404 {
				break
			}
			select {
			case <-ctx.Done():
				fmt.Fprintf(e.Stderr, "sbctl mcp: remove session %s: %v\n", id, err)
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	srv, err := newServer(e.Ctx, conn, e.Stderr)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.Stderr, "sbctl mcp: serving sandboxd's tools in session %s (mode %s, cwd %s)\n", sess.ID, sess.Mode, sess.Cwd)
	out := &lockedWriter{w: e.Stdout}
	in, sdkOut := screenLines(e.Stdin, out, e.Stderr)
	t := &mcp.IOTransport{Reader: nopReadCloser{in}, Writer: nopWriteCloser{sdkOut}}
	if err := srv.Run(e.Ctx, t); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
		return fmt.Errorf("serve MCP: %w", err)
	}
	return nil
}

type nopReadCloser struct{ io.Reader }

func (nopReadCloser) Close() error { return nil }

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// connSession is the connection's session. A daemon that restarted has forgotten it: the
// next call makes it again with the same parameters, so a long-lived MCP connection outlives
// a daemon restart.
type connSession struct {
	c      *client.Client
	params protocol.CreateSession
	// wait is --wait: how long an ask waits in the approval queue when the client cannot ask.
	wait time.Duration

	mu sync.Mutex
	id string
	// asked are the approvals this connection put to its client's user (askThroughClient),
	// each with its tool: only an answer to one of them is taken, and once.
	asked map[string]string
}

// maxAsked bounds the questions a connection remembers; an older one's answer is refused.
const maxAsked = 64

func (s *connSession) putAsked(approvalID, tool string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.asked == nil {
		s.asked = map[string]string{}
	}
	for id := range s.asked {
		if len(s.asked) < maxAsked {
			break
		}
		delete(s.asked, id)
	}
	s.asked[approvalID] = tool
}

// takeAsked reports whether approvalID is a question this connection put about tool, and
// forgets it.
func (s *connSession) takeAsked(approvalID, tool string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.asked[approvalID]
	delete(s.asked, approvalID)
	return ok && t == tool
}

func (s *connSession) current() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

// renew makes a new session unless another call already replaced lost.
func (s *connSession) renew(ctx context.Context, lost string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.id != lost {
		return s.id, nil
	}
	sess, err := s.c.CreateSession(ctx, s.params)
	if err != nil {
		return "", fmt.Errorf("make the connection's session again: %w", err)
	}
	s.id = sess.ID
	return s.id, nil
}

// newServer returns an MCP server whose tools run as calls in the connection's session.
// Logs go to logw.
func newServer(ctx context.Context, conn *connSession, logw io.Writer) (*mcp.Server, error) {
	tools, err := toolDefs(ctx, conn.c, conn.current())
	if err != nil {
		return nil, err
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "sandboxd", Title: "sandboxd: confined tools", Version: version},
		&mcp.ServerOptions{Logger: slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	for _, t := range tools {
		srv.AddTool(t, handler(conn, t.Name))
	}
	return srv, nil
}

// toolDefs builds the served tools from the daemon's list. A deferred tool's schema is not in
// the list; ToolSearch (read-only, a call of the session) gives it.
func toolDefs(ctx context.Context, c *client.Client, sessionID string) ([]*mcp.Tool, error) {
	tl, err := c.Tools(ctx, sessionID)
	if err != nil {
		return nil, fmt.Errorf("list the daemon's tools: %w", err)
	}
	var deferred []string
	for _, ti := range tl.Tools {
		if _, ok := served[ti.Name]; ok && len(ti.InputSchema) == 0 {
			deferred = append(deferred, ti.Name)
		}
	}
	schemas := map[string]json.RawMessage{}
	if len(deferred) > 0 {
		in, _ := json.Marshal(map[string]any{"query": "select:" + strings.Join(deferred, ","), "max_results": len(deferred)})
		res, err := c.Call(ctx, sessionID, protocol.CallRequest{Tool: "ToolSearch", Input: in})
		if err != nil {
			return nil, fmt.Errorf("load the deferred tools' schemas: %w", err)
		}
		var found struct {
			Tools []struct {
				Name        string          `json:"name"`
				InputSchema json.RawMessage `json:"input_schema"`
			} `json:"tools"`
		}
		if b, err := json.Marshal(res.Data); err == nil && json.Unmarshal(b, &found) == nil {
			for _, t := range found.Tools {
				schemas[t.Name] = t.InputSchema
			}
		}
	}
	var out []*mcp.Tool
	for _, ti := range tl.Tools {
		spec, ok := served[ti.Name]
		if !ok {
			continue
		}
		schema := ti.InputSchema
		if len(schema) == 0 {
			schema = schemas[ti.Name]
		}
		// MCP requires an object schema (the SDK refuses anything else); a tool whose schema
		// is missing or not one is left out rather than served with a made-up one.
		var head struct {
			Type string `json:"type"`
		}
		if len(schema) == 0 || json.Unmarshal(schema, &head) != nil || head.Type != "object" {
			continue
		}
		destructive, openWorld := spec.destructive, spec.openWorld
		out = append(out, &mcp.Tool{
			Name: ti.Name, Title: spec.title, Description: ti.Description, InputSchema: schema,
			Annotations: &mcp.ToolAnnotations{Title: spec.title, ReadOnlyHint: spec.readOnly, DestructiveHint: &destructive,
				IdempotentHint: spec.idempotent, OpenWorldHint: &openWorld},
		})
	}
	if len(out) == 0 {
		return nil, errors.New("the daemon serves none of the tools sbctl mcp exposes")
	}
	return out, nil
}

// handler runs one MCP tool call as a sandboxd call. The daemon validates the input against
// the same schema and decides it; what it answers becomes the MCP result.
func handler(conn *connSession, tool string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args := req.Params.Arguments
		if len(args) == 0 || string(args) == "null" {
			args = json.RawMessage("{}")
		}
		cr := protocol.CallRequest{Tool: tool, Input: args}
		elicit := canElicit(req.Session)
		if conn.wait > 0 && !elicit {
			// Nobody to ask through the client: the call waits in the approval queue, where
			// `sbctl approvals` answers it.
			cr.WaitMS = conn.wait.Milliseconds()
		}
		token := req.Params.GetProgressToken()
		run := func(id string) (*protocol.CallResult, error) {
			if token != nil && tool == "Bash" {
				return conn.c.Stream(ctx, id, cr, progressNotifier(ctx, req, token))
			}
			return conn.c.Call(ctx, id, cr)
		}
		id := conn.current()
		if resp, ok := req.Params.InputResponses[approveKey]; ok {
			// The client's user answered the question askThroughClient put: only through a
			// client that can put questions, and only to one this connection put about this
			// tool. A client-made answer for another approval of the user's (another
			// session's pending call) is no answer of the user's to this connection.
			if !elicit || !conn.takeAsked(req.Params.RequestState, tool) {
				return errorResult("an answer to a question this connection did not put to its user: sandboxd takes only answers to its own questions, through the client's elicitation; call the tool again"), nil
			}
			return answered(ctx, conn, id, cr, req.Params.RequestState, resp), nil
		}
		res, err := run(id)
		var ae *client.APIError
		renewed := false
		if errors.As(err, &ae) && ae.Status == 404 && ae.Detail.Class == "not_found" {
			// Nothing ran: the daemon did not know the session.
			if id, err = conn.renew(ctx, id); err == nil {
				renewed = true
				res, err = run(id)
			}
		}
		if err != nil {
			// The daemon refused the request itself (unreachable, a bad session): a tool
			// error the model can read, not a protocol error.
			return errorResult("sandboxd could not run the call: " + err.Error()), nil
		}
		var out *mcp.CallToolResult
		if elicit && res.Decision != nil && res.Decision.Behavior == protocol.Ask && res.ApprovalID != "" {
			conn.putAsked(res.ApprovalID, tool)
			out = askThroughClient(cr, res, approvalPreviews(ctx, conn.c, res.ApprovalID))
		} else {
			out = toResult(res, conn.wait)
		}
		if renewed {
			// Said where the model and its user read it: the old session's changes are gone.
			out.Content = append(out.Content, &mcp.TextContent{Text: sessionRenewedNote})
		}
		return out, nil
	}
}

// sessionRenewedNote follows the result of the call that found the connection's session gone.
const sessionRenewedNote = "[sandboxd: this connection's session was gone (the daemon restarted, or the session was " +
	"deleted or expired), so a new one was made from the flags sbctl mcp was started with. Changes made to the old " +
	"session since (its mode, directories or working directory) are not carried over.]"

// canElicit reports whether the MCP client can put a question to its user.
func canElicit(ss *mcp.ServerSession) bool {
	p := ss.InitializeParams()
	return p != nil && p.Capabilities != nil && p.Capabilities.Elicitation != nil
}

// approveKey names the one input request an asked call makes of the client.
const approveKey = "approve"

// elicitSchema is the form the client shows its user for an asked call.
var elicitSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"decision":{"type":"string","enum":["allow","deny"],"description":"Run this call once (allow), or refuse it (deny)"},` +
	`"message":{"type":"string","description":"With a deny: what the agent should do instead"}},` +
	`"required":["decision"]}`)

// askThroughClient turns an asked call into a question for the MCP client's user (an
// elicitation, as an input request the client fulfils and retries the call with). The
// request state is the call's approval in sandboxd: only its answer decides what runs, and
// the daemon lets only the session's owner give it.
func askThroughClient(cr protocol.CallRequest, asked *protocol.CallResult, previews []protocol.Preview) *mcp.CallToolResult {
	// The person answering reads this in the client: whole, as it will run (cli.Shown), since
	// an allow runs all of it, and for an edit what it writes (the path alone says nothing of
	// the content), as every other place that asks shows it.
	msg := fmt.Sprintf("sandboxd asks before this %s call runs: %s\n\n%s", cli.Visible(cr.Tool), cli.Visible(why(asked.Decision)), cli.Shown(cli.InputSummary(cr.Tool, cr.Input)))
	if d := cli.Changes(cr.Tool, cr.Input, previews); d != "" {
		msg += "\n\n" + d
	}
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{approveKey: &mcp.ElicitParams{Message: msg, RequestedSchema: elicitSchema}},
		RequestState:  asked.ApprovalID,
	}
}

// approvalPreviews is what approving the approval id writes, from the daemon's queue; none
// when it writes nothing (or the queue cannot be read: the question then shows the call).
func approvalPreviews(ctx context.Context, c *client.Client, id string) []protocol.Preview {
	list, err := c.Approvals(ctx)
	if err != nil {
		return nil
	}
	for i := range list {
		if list[i].ID == id {
			return list[i].AllPreviews()
		}
	}
	return nil
}

// answered gives the user's answer to the approval the request state names and, on an
// allow, resumes the approved call, which runs exactly what was decided (whatever arguments
// the retry carries). A decline, a cancel or anything else is a deny.
func answered(ctx context.Context, conn *connSession, sessionID string, cr protocol.CallRequest, approvalID string, resp mcp.InputResponse) *mcp.CallToolResult {
	if approvalID == "" {
		return errorResult("an answer came without the approval it answers; call the tool again")
	}
	answer := protocol.ApprovalAnswer{Answer: protocol.Deny, Message: "the user did not allow it"}
	if er, ok := resp.(*mcp.ElicitResult); ok {
		switch {
		case er.Action == "accept" && er.Content["decision"] == protocol.Allow:
			answer = protocol.ApprovalAnswer{Answer: protocol.Allow}
		case er.Action == "accept":
			if m, _ := er.Content["message"].(string); m != "" {
				answer.Message = m
			}
		case er.Action == "decline":
			answer.Message = "the user declined the question"
		case er.Action == "cancel":
			answer.Message = "the user cancelled the question"
		default:
			answer.Message = fmt.Sprintf("the client answered the question with %q, which allows nothing", er.Action)
		}
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := conn.c.AnswerApproval(actx, approvalID, answer); err != nil {
		return errorResult(fmt.Sprintf("sandboxd did not take the answer to approval %s (it may have expired; call the tool again): %v", approvalID, err))
	}
	cr.ApprovalID = approvalID
	res, err := conn.c.Call(ctx, sessionID, cr)
	if err != nil {
		return errorResult("sandboxd could not run the call: " + err.Error())
	}
	return toResult(res, 0)
}

// progressNotifier turns the daemon's NDJSON events into MCP progress notifications: a
// growing count of output bytes, and the latest output (or status) as the message.
func progressNotifier(ctx context.Context, req *mcp.CallToolRequest, token any) func(protocol.Event) {
	var mu sync.Mutex
	var total float64
	return func(ev protocol.Event) {
		mu.Lock()
		defer mu.Unlock()
		total += float64(len(ev.Data))
		if total == 0 {
			total = 1
		}
		msg := ev.Data
		if len(msg) > 1000 {
			msg = msg[len(msg)-1000:]
		}
		if ev.Kind != "status" {
			msg = ev.Kind + ": " + msg
		}
		// A client that stopped listening does not stop the call.
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: total, Message: msg})
	}
}

// toResult maps a call's result to MCP content. Anything but an allow is an error result
// that says why, so the model reads the reason and the rule instead of an empty success.
// waited is the server's --wait: an ask that comes back after it found no answer in time.
func toResult(res *protocol.CallResult, waited time.Duration) *mcp.CallToolResult {
	d := res.Decision
	switch {
	case d == nil:
		msg := "sandboxd returned no decision"
		if res.Error != nil {
			msg = fmt.Sprintf("%s [%s]", res.Error.Message, res.Error.Class)
		}
		return errorResult(msg)
	case d.Behavior == protocol.Deny:
		return errorResult("Denied by sandboxd: " + why(d))
	case d.Behavior == protocol.Ask:
		pending := ""
		if id := res.ApprovalID; id != "" {
			pending = " Its approval " + id + " is left to expire: answering it does not run this call, which has returned; call again once it is allowed."
		}
		if waited > 0 {
			return errorResult("Approval required (ask): sandboxd needs a person to approve this call, and no answer came " +
				"within " + waited.String() + " (sbctl approvals --watch, sbctl approve ID), so it did not run. " + why(d) + "." +
				" To run it, the user can answer it in time, allow it with a rule (sbctl mcp --allow 'RULE'), or start the " +
				"server in a mode that allows it (--mode acceptEdits for edits inside the session's directories, bypassPermissions).")
		}
		return errorResult("Approval required (ask): sandboxd needs a person to approve this call, and this MCP session has " +
			"no one to ask, so it did not run. " + why(d) + "." + pending + " To run it, the user can allow it with a rule " +
			"(sbctl mcp --allow 'RULE'), start the server with --wait D so that such calls wait for an answer from " +
			"sbctl approvals --watch in another terminal, or start it in a mode that allows it (--mode acceptEdits for " +
			"edits inside the session's directories, bypassPermissions).")
	case d.Behavior != protocol.Allow:
		return errorResult("sandboxd did not allow this call: " + why(d))
	}
	out := &mcp.CallToolResult{IsError: res.IsError, Content: []mcp.Content{}}
	for _, b := range res.Content {
		switch b.Type {
		case "image":
			data, err := base64.StdEncoding.DecodeString(b.Data)
			if err != nil {
				out.Content = append(out.Content, &mcp.TextContent{Text: "[an image sandboxd returned could not be decoded]"})
				continue
			}
			out.Content = append(out.Content, &mcp.ImageContent{Data: data, MIMEType: b.MediaType})
		default:
			out.Content = append(out.Content, &mcp.TextContent{Text: b.Text})
		}
	}
	for _, m := range res.Extra {
		out.Content = append(out.Content, &mcp.TextContent{Text: m})
	}
	if res.Error != nil && len(res.Content) == 0 {
		out.Content = append(out.Content, &mcp.TextContent{Text: fmt.Sprintf("%s [%s]", res.Error.Message, res.Error.Class)})
	}
	if len(out.Content) == 0 {
		out.Content = append(out.Content, &mcp.TextContent{Text: ""})
	}
	return out
}

// why is a decision's reason with its rule and source.
func why(d *protocol.Decision) string {
	s := d.Reason
	if s == "" {
		s = "no reason given"
	}
	switch {
	case d.Rule != "" && d.Source != "":
		s += fmt.Sprintf(" (rule %s from %s)", d.Rule, d.Source)
	case d.Rule != "":
		s += fmt.Sprintf(" (rule %s)", d.Rule)
	case d.Source != "":
		s += fmt.Sprintf(" (%s)", d.Source)
	}
	return s
}

func errorResult(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}
