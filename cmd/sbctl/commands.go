package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/permission"
)

func cmdStatus(e *env, args []string) error {
	if err := newFlags(e, "status").Parse(args); err != nil {
		return err
	}
	var h api.Health
	if err := e.client().do(e.ctx, http.MethodGet, "/v1/healthz", nil, &h); err != nil {
		return err
	}
	if e.json {
		return printJSON(e.stdout, h)
	}
	fmt.Fprintf(e.stdout, "sandboxd %s: %s (up %s)\nsocket:   %s\ncaller:   uid %d (%s)%s\nsessions: %d\naudit:    %s\n",
		h.Version, h.Status, h.Uptime, e.socket, h.Caller.UID, h.Caller.User, map[bool]string{true: ", admin"}[h.Admin], h.Sessions, h.Audit)
	return nil
}

// sessionFlags are the flags that shape a new session, shared by `session new` and the
// short-lived sessions of bash/read/...
type sessionFlags struct {
	cwd, mode, parent string
	persistCwd        bool
	trustProject      bool
	allow, deny, ask  multi
	addDirs           multi
}

func (sf *sessionFlags) request() (api.CreateSession, error) {
	cwd := sf.cwd
	if cwd == "" {
		wd, err := os.Getwd()
		if err != nil {
			return api.CreateSession{}, err
		}
		cwd = wd
	}
	return api.CreateSession{Cwd: cwd, Mode: sf.mode, ParentID: sf.parent, AdditionalDirs: sf.addDirs, PersistCwd: sf.persistCwd, TrustProject: sf.trustProject,
		Rules: api.Rules{Allow: sf.allow, Deny: sf.deny, Ask: sf.ask}}, nil
}

func cmdSession(e *env, args []string) error {
	if len(args) == 0 {
		return usageError("session needs a subcommand: new, ls, show ID, mode ID MODE, rm ID")
	}
	c := e.client()
	switch sub, rest := args[0], args[1:]; sub {
	case "new":
		fs := newFlags(e, "session new")
		var sf sessionFlags
		fs.StringVar(&sf.cwd, "cwd", "", "working directory (default: the current one)")
		fs.StringVar(&sf.mode, "mode", "", "permission mode (default: default)")
		fs.StringVar(&sf.parent, "parent", "", "parent session id (for bubble mode)")
		fs.Var(&sf.allow, "allow", "allow rule (repeatable)")
		fs.Var(&sf.deny, "deny", "deny rule (repeatable)")
		fs.Var(&sf.ask, "ask", "ask rule (repeatable)")
		fs.Var(&sf.addDirs, "add-dir", "additional directory (repeatable)")
		fs.BoolVar(&sf.trustProject, "trust-project", false, "let the project's .sandboxd settings allow, not only deny and ask")
		fs.BoolVar(&sf.persistCwd, "persist-cwd", false, "let a Bash `cd` inside the session's directories carry over to later calls")
		if err := fs.Parse(rest); err != nil {
			return err
		}
		req, err := sf.request()
		if err != nil {
			return err
		}
		var s api.Session
		if err := c.do(e.ctx, http.MethodPost, "/v1/sessions", req, &s); err != nil {
			return err
		}
		if e.json {
			return printJSON(e.stdout, s)
		}
		fmt.Fprintln(e.stdout, s.ID)
		return nil
	case "ls":
		var l api.SessionList
		if err := c.do(e.ctx, http.MethodGet, "/v1/sessions", nil, &l); err != nil {
			return err
		}
		if e.json {
			return printJSON(e.stdout, l)
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tOWNER\tMODE\tCWD\tCREATED")
		for _, s := range l.Sessions {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.ID, ownerName(s.Owner), s.Mode, s.Cwd, s.Created.Local().Format(time.DateTime))
		}
		return tw.Flush()
	case "show":
		if len(rest) != 1 {
			return usageError("usage: sbctl session show ID")
		}
		var s api.Session
		if err := c.do(e.ctx, http.MethodGet, "/v1/sessions/"+rest[0], nil, &s); err != nil {
			return err
		}
		return printJSON(e.stdout, s)
	case "mode":
		if len(rest) != 2 {
			return usageError("usage: sbctl session mode ID MODE")
		}
		var s api.Session
		if err := c.do(e.ctx, http.MethodPatch, "/v1/sessions/"+rest[0], api.UpdateSession{Mode: &rest[1]}, &s); err != nil {
			return err
		}
		if e.json {
			return printJSON(e.stdout, s)
		}
		fmt.Fprintf(e.stdout, "%s: mode %s\n", s.ID, s.Mode)
		return nil
	case "rm":
		if len(rest) == 0 {
			return usageError("usage: sbctl session rm ID...")
		}
		for _, id := range rest {
			if err := c.do(e.ctx, http.MethodDelete, "/v1/sessions/"+id, nil, nil); err != nil {
				return fmt.Errorf("%s: %w", id, err)
			}
		}
		return nil
	default:
		return usageError(fmt.Sprintf("unknown session subcommand %q: want new, ls, show, mode, rm", sub))
	}
}

func ownerName(o api.Owner) string {
	if o.User != "" {
		return o.User
	}
	return fmt.Sprint(o.UID)
}

// toolCall is the common part of call/decide/bash/read/...: a session (given or short-lived)
// and one call.
type toolCall struct {
	session string
	sf      sessionFlags
}

func (tc *toolCall) flags(fs interface {
	StringVar(*string, string, string, string)
}) {
	fs.StringVar(&tc.session, "session", "", "session id (default: a short-lived session for the current directory)")
	fs.StringVar(&tc.sf.mode, "mode", "", "mode of the short-lived session, or of this call with --session")
	fs.StringVar(&tc.sf.cwd, "cwd", "", "cwd of the short-lived session")
}

// withSession runs fn in the given session or a short-lived one that is removed afterwards.
func (tc *toolCall) withSession(e *env, fn func(id, callMode string) error) error {
	c := e.client()
	if tc.session != "" {
		return fn(tc.session, tc.sf.mode)
	}
	req, err := tc.sf.request()
	if err != nil {
		return err
	}
	var s api.Session
	if err := c.do(e.ctx, http.MethodPost, "/v1/sessions", req, &s); err != nil {
		return err
	}
	defer func() { _ = c.do(e.ctx, http.MethodDelete, "/v1/sessions/"+s.ID, nil, nil) }()
	return fn(s.ID, "")
}

// callTool sends one call and prints its result; exit 1 for an error result.
func callTool(e *env, tc *toolCall, path, tool string, input json.RawMessage) error {
	return tc.withSession(e, func(id, mode string) error {
		var res api.CallResult
		err := e.client().do(e.ctx, http.MethodPost, "/v1/sessions/"+id+"/"+path,
			api.CallRequest{Tool: tool, Input: input, Mode: mode}, &res)
		if err != nil {
			return err
		}
		return printResult(e, &res)
	})
}

func printResult(e *env, res *api.CallResult) error {
	if e.json {
		if err := printJSON(e.stdout, res); err != nil {
			return err
		}
	} else {
		printHuman(e, res)
	}
	if res.IsError {
		return &exitError{code: 1}
	}
	return nil
}

func printHuman(e *env, res *api.CallResult) {
	if d := res.Decision; d != nil {
		line := fmt.Sprintf("decision: %s", d.Behavior)
		if d.Reason != "" {
			line += " — " + d.Reason
		}
		if d.Rule != "" {
			line += fmt.Sprintf(" [rule %s from %s]", d.Rule, d.Source)
		} else if d.Source != "" {
			line += fmt.Sprintf(" [%s]", d.Source)
		}
		fmt.Fprintln(e.stderr, line)
	}
	printContent(e, res)
	for _, m := range res.Extra {
		fmt.Fprintln(e.stderr, m)
	}
	if res.Error != nil && len(res.Content) == 0 {
		fmt.Fprintf(e.stderr, "error [%s]: %s\n", res.Error.Class, res.Error.Message)
	}
	if d := res.Decision; d != nil && d.Behavior == permission.Ask {
		// A new user's first `sbctl bash -- CMD` in the default mode lands here: say how to
		// run it, since the sandbox confines it whatever the mode.
		fmt.Fprintln(e.stderr, askHint)
	}
}

// askHint is what sbctl says when a call needed someone to ask: it has no one.
const askHint = "sbctl: nobody here to ask; to run it anyway, confined as every call is, pass --mode bypassPermissions (--mode acceptEdits lets edits inside the session's directories run), or allow it with a rule (sbctl policy eval --explain TOOL 'JSON' shows why it asked)"

// printContent writes the result's content blocks; empty text prints nothing.
func printContent(e *env, res *api.CallResult) {
	for _, b := range res.Content {
		switch b.Type {
		case "text":
			if b.Text == "" {
				continue
			}
			fmt.Fprint(e.stdout, b.Text)
			if !strings.HasSuffix(b.Text, "\n") {
				fmt.Fprintln(e.stdout)
			}
		case "image":
			fmt.Fprintf(e.stdout, "[image %s, %d base64 bytes]\n", b.MediaType, len(b.Data))
		}
	}
}

func parseCallArgs(e *env, name string, args []string) (*toolCall, string, json.RawMessage, error) {
	fs := newFlags(e, name)
	tc := &toolCall{}
	tc.flags(fs)
	args, err := parseInterspersed(fs, args)
	if err != nil {
		return nil, "", nil, err
	}
	if len(args) < 1 || len(args) > 2 {
		return nil, "", nil, usageError(fmt.Sprintf("usage: sbctl %s [--session ID] TOOL ['JSON' | - for stdin]", name))
	}
	input := json.RawMessage("{}")
	if len(args) == 2 {
		arg := args[1]
		if arg == "-" {
			b, err := io.ReadAll(e.stdin)
			if err != nil {
				return nil, "", nil, err
			}
			arg = string(b)
		}
		input = json.RawMessage(arg)
	}
	return tc, args[0], input, nil
}

func cmdCall(e *env, args []string) error {
	tc, tool, input, err := parseCallArgs(e, "call", args)
	if err != nil {
		return err
	}
	return callTool(e, tc, "calls", tool, input)
}

func cmdDecide(e *env, args []string) error {
	tc, tool, input, err := parseCallArgs(e, "decide", args)
	if err != nil {
		return err
	}
	return decideAndPrint(e, tc, tool, input, false)
}

// decideAndPrint asks for the decision of one call (nothing runs) and prints it; explain adds
// the decision chain's steps.
func decideAndPrint(e *env, tc *toolCall, tool string, input json.RawMessage, explain bool) error {
	return tc.withSession(e, func(id, mode string) error {
		var res api.CallResult
		if err := e.client().do(e.ctx, http.MethodPost, "/v1/sessions/"+id+"/decide",
			api.CallRequest{Tool: tool, Input: input, Mode: mode}, &res); err != nil {
			return err
		}
		if e.json {
			return printJSON(e.stdout, res)
		}
		d := res.Decision
		if d == nil {
			return fmt.Errorf("%s", res.Error.Message)
		}
		fmt.Fprintf(e.stdout, "decision: %s\nreason:   %s\n", d.Behavior, d.Reason)
		if d.Rule != "" {
			fmt.Fprintf(e.stdout, "rule:     %s\n", d.Rule)
		}
		fmt.Fprintf(e.stdout, "source:   %s\nstep:     %s\n", d.Source, d.Step)
		if d.Route != "" {
			fmt.Fprintf(e.stdout, "route:    %s\n", d.Route)
		}
		if explain {
			fmt.Fprintln(e.stdout, "trace:")
			for i, step := range d.Trace {
				fmt.Fprintf(e.stdout, "  %d. %s\n", i+1, step)
			}
		}
		return nil
	})
}

func cmdTools(e *env, args []string) error {
	if err := newFlags(e, "tools").Parse(args); err != nil {
		return err
	}
	var tl api.ToolList
	if err := e.client().do(e.ctx, http.MethodGet, "/v1/tools", nil, &tl); err != nil {
		return err
	}
	if e.json {
		return printJSON(e.stdout, tl)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	for _, t := range tl.Tools {
		desc, _, _ := strings.Cut(t.Description, "\n")
		flags := ""
		if t.Deferred {
			flags = " (deferred)"
		}
		fmt.Fprintf(tw, "%s%s\t%s\n", t.Name, flags, desc)
	}
	return tw.Flush()
}
