package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sandboxd/sandboxd/client"
	"github.com/sandboxd/sandboxd/protocol"
)

func cmdStatus(e *Env, args []string) error {
	if err := NewFlags(e, "status").Parse(args); err != nil {
		return err
	}
	var h protocol.Health
	if err := e.Client().Do(e.Ctx, client.MethodGet, "/v1/healthz", nil, &h); err != nil {
		return err
	}
	if e.JSON {
		return PrintJSON(e.Stdout, h)
	}
	fmt.Fprintf(e.Stdout, "sandboxd %s: %s (up %s)\nsocket:   %s\ncaller:   uid %d (%s)%s\nsessions: %d\naudit:    %s\n",
		h.Version, h.Status, h.Uptime, e.Socket, h.Caller.UID, h.Caller.User, map[bool]string{true: ", admin"}[h.Admin], h.Sessions, h.Audit)
	if h.Reload != "" {
		fmt.Fprintf(e.Stdout, "reload:   %s\n", Visible(h.Reload))
	}
	return nil
}

// sessionFlags are the flags that shape a new session, shared by `session new` and the
// short-lived sessions of bash/read/...
type sessionFlags struct {
	cwd, mode, parent string
	network           string
	persistCwd        bool
	trustProject      bool
	allow, deny, ask  Multi
	addDirs           Multi
}

func (sf *sessionFlags) request() (protocol.CreateSession, error) {
	cwd := sf.cwd
	if cwd == "" {
		wd, err := os.Getwd()
		if err != nil {
			return protocol.CreateSession{}, err
		}
		cwd = wd
	}
	return protocol.CreateSession{Cwd: cwd, Mode: sf.mode, ParentID: sf.parent, AdditionalDirs: sf.addDirs, PersistCwd: sf.persistCwd, TrustProject: sf.trustProject,
		Network: sf.network, Rules: protocol.Rules{Allow: sf.allow, Deny: sf.deny, Ask: sf.ask}}, nil
}

func cmdSession(e *Env, args []string) error {
	sub, rest, err := subcommand(e, args, "usage: sbctl session new [flags] | ls | show ID | mode ID MODE | rm ID...")
	if err != nil {
		return err
	}
	if sub != "new" {
		if rest, err = positionalOnly(e, "session "+sub, rest); err != nil {
			return err
		}
	}
	c := e.Client()
	switch sub {
	case "new":
		fs := NewFlags(e, "session new")
		var sf sessionFlags
		fs.StringVar(&sf.cwd, "cwd", "", "working directory (default: the current one)")
		fs.StringVar(&sf.mode, "mode", "", "permission mode (default: default)")
		fs.StringVar(&sf.parent, "parent", "", "parent session id (for bubble mode)")
		fs.Var(&sf.allow, "allow", "allow rule (repeatable)")
		fs.Var(&sf.deny, "deny", "deny rule (repeatable)")
		fs.Var(&sf.ask, "ask", "ask rule (repeatable)")
		fs.Var(&sf.addDirs, "add-dir", "additional directory (repeatable)")
		fs.BoolVar(&sf.trustProject, "trust-project", false, "let the project's .sandboxd settings allow, not only deny and ask")
		fs.BoolVar(&sf.persistCwd, "persist-cwd", false, "let a Bash cd inside the session's directories carry over to later calls")
		fs.StringVar(&sf.network, "network", "", "none (loopback only), proxy (only through the daemon's filtering proxy) or host (default: the daemon's network.mode)")
		if err := fs.Parse(rest); err != nil {
			return err
		}
		req, err := sf.request()
		if err != nil {
			return err
		}
		var s protocol.Session
		if err := c.Do(e.Ctx, client.MethodPost, "/v1/sessions", req, &s); err != nil {
			return err
		}
		if e.JSON {
			return PrintJSON(e.Stdout, s)
		}
		fmt.Fprintln(e.Stdout, s.ID)
		return nil
	case "ls":
		var l protocol.SessionList
		if err := c.Do(e.Ctx, client.MethodGet, "/v1/sessions", nil, &l); err != nil {
			return err
		}
		if e.JSON {
			return PrintJSON(e.Stdout, l)
		}
		tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tOWNER\tMODE\tCWD\tCREATED")
		for _, s := range l.Sessions {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.ID, Visible(ownerName(s.Owner)), s.Mode, Visible(s.Cwd), s.Created.Local().Format(time.DateTime))
		}
		return tw.Flush()
	case "show":
		if len(rest) != 1 {
			return UsageError("usage: sbctl session show ID")
		}
		var s protocol.Session
		if err := c.Do(e.Ctx, client.MethodGet, "/v1/sessions/"+rest[0], nil, &s); err != nil {
			return err
		}
		return PrintJSON(e.Stdout, s)
	case "mode":
		if len(rest) != 2 {
			return UsageError("usage: sbctl session mode ID MODE")
		}
		var s protocol.Session
		if err := c.Do(e.Ctx, client.MethodPatch, "/v1/sessions/"+rest[0], protocol.UpdateSession{Mode: &rest[1]}, &s); err != nil {
			return err
		}
		if e.JSON {
			return PrintJSON(e.Stdout, s)
		}
		fmt.Fprintf(e.Stdout, "%s: mode %s\n", s.ID, s.Mode)
		return nil
	case "rm":
		if len(rest) == 0 {
			return UsageError("usage: sbctl session rm ID...")
		}
		for _, id := range rest {
			if err := c.Do(e.Ctx, client.MethodDelete, "/v1/sessions/"+id, nil, nil); err != nil {
				return fmt.Errorf("%s: %w", id, err)
			}
		}
		return nil
	default:
		return UsageError(fmt.Sprintf("unknown session subcommand %q: want new, ls, show, mode, rm", sub))
	}
}

func ownerName(o protocol.Owner) string {
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
	// wait is --wait: how long an ask waits for its answer (0: not at all).
	wait time.Duration
	// approved is --approved: a person already approved this call where it was asked (the
	// agent's own prompt, before it ran sbctl hook --confine's rewrite). Its ask is answered
	// allow as the owner, through the approval queue (audited), and the call resumed: exactly
	// the decided input, deny rules and the checks no one may approve still standing. It is
	// the key (askKey) of the ask they saw: an ask for another reason is not answered.
	approved string
	// shell is --shell (decide only): the shell the caller will run a Bash command in.
	shell string
}

// shellFlag adds --shell to the commands that decide without running.
func (tc *toolCall) shellFlag(fs *flag.FlagSet) {
	fs.StringVar(&tc.shell, "shell", "", "decide a Bash command as this shell reads it (bash, zsh, sh): for a command you run yourself, not in sandboxd")
}

// waitFlag adds --wait to the commands that run a call.
func (tc *toolCall) waitFlag(fs *flag.FlagSet) {
	fs.DurationVar(&tc.wait, "wait", 0, "wait up to this long for an answer when the call asks (answer with sbctl approve|deny, or inline on a terminal); then run it or exit 126")
}

// send runs one call with --wait's meaning. Without a terminal the daemon waits (wait_ms)
// and the result is the answered call's. On one (stdin and stderr), the ask comes back at
// once and waitAnswer asks inline while the call waits for whoever answers first; resumed
// says the result came from that resumed call (its output was not streamed).
func (tc *toolCall) send(e *Env, id string, req protocol.CallRequest, call func(protocol.CallRequest) (*protocol.CallResult, error)) (res *protocol.CallResult, resumed bool, err error) {
	in, prompt := e.Stdin.(*os.File)
	errOut, ok := e.Stderr.(*os.File)
	prompt = prompt && ok && tc.wait > 0 && isTerminal(in) && isTerminal(errOut)
	e.askWait, e.inSession = tc.wait, tc.session != ""
	if tc.wait > 0 && !prompt {
		req.WaitMS = tc.wait.Milliseconds()
	}
	res, err = call(req)
	if err == nil && tc.approved != "" && res.Decision != nil && res.Decision.Behavior == protocol.Ask && res.ApprovalID != "" {
		if askKey(res.Decision) != tc.approved {
			fmt.Fprintf(e.Stderr, "sbctl: the command now asks for another reason than the one your user approved (%s), so it did not run; run it again to have it asked anew\n", res.Decision.Reason)
			return res, false, nil
		}
		if _, err := e.Client().AnswerApproval(e.Ctx, res.ApprovalID, protocol.ApprovalAnswer{Answer: protocol.Allow}); err != nil {
			return res, false, err
		}
		res, err = e.Client().Call(e.Ctx, id, protocol.CallRequest{ApprovalID: res.ApprovalID, WaitMS: 10_000})
		return res, true, err
	}
	if err != nil || !prompt || res.Decision == nil || res.Decision.Behavior != protocol.Ask || res.ApprovalID == "" {
		return res, false, err
	}
	res, err = waitAnswer(e, in, id, res, tc.wait)
	return res, true, err
}

// askExit is --wait's exit for a call that did not run: 126, as a shell's "cannot execute".
func (tc *toolCall) askExit(res *protocol.CallResult) error {
	if tc.wait > 0 && res.Decision != nil && res.Decision.Behavior != protocol.Allow {
		return &ExitError{Code: 126}
	}
	return nil
}

func (tc *toolCall) flags(fs interface {
	StringVar(*string, string, string, string)
}) {
	fs.StringVar(&tc.session, "session", "", "session id (default: a short-lived session for the current directory)")
	fs.StringVar(&tc.sf.mode, "mode", "", "mode of the short-lived session, or of this call with --session")
	fs.StringVar(&tc.sf.cwd, "cwd", "", "cwd of the short-lived session")
}

// withSession runs fn in the given session or a short-lived one that is removed afterwards.
func (tc *toolCall) withSession(e *Env, fn func(id, callMode string) error) error {
	c := e.Client()
	if tc.session != "" {
		if tc.sf.cwd != "" {
			// Ignored, the call would run somewhere the user did not say.
			return UsageError(fmt.Sprintf("--cwd sets the short-lived session's cwd; a call in --session %s runs in that session's cwd (for Bash, cd in the command: cd DIR && …)", tc.session))
		}
		return fn(tc.session, tc.sf.mode)
	}
	req, err := tc.sf.request()
	if err != nil {
		return err
	}
	// The session is this command's to remove, interrupted or not: an interrupt ends the call
	// (its context), then the session goes, then sbctl exits as the signal would have it.
	parent := e.Ctx
	ctx, stop := interruptible(parent)
	e.Ctx = ctx
	defer func() { e.Ctx = parent }()
	err = func() error {
		var s protocol.Session
		if err := c.Do(ctx, client.MethodPost, "/v1/sessions", req, &s); err != nil {
			return err
		}
		defer func() {
			rmCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if err := c.Do(rmCtx, client.MethodDelete, "/v1/sessions/"+s.ID, nil, nil); err != nil {
				fmt.Fprintf(e.Stderr, "sbctl: the short-lived session %s was not removed (it expires when idle): %v\n", s.ID, err)
			}
		}()
		return fn(s.ID, "")
	}()
	if sig := stop(); sig != 0 {
		return &ExitError{Code: 128 + int(sig)}
	}
	return err
}

// callTool sends one call and prints its result; exit 1 for an error result.
func callTool(e *Env, tc *toolCall, path, tool string, input json.RawMessage) error {
	return tc.withSession(e, func(id, mode string) error {
		res, _, err := tc.send(e, id, protocol.CallRequest{Tool: tool, Input: input, Mode: mode}, func(req protocol.CallRequest) (*protocol.CallResult, error) {
			var res protocol.CallResult
			err := e.Client().Do(e.Ctx, client.MethodPost, "/v1/sessions/"+id+"/"+path, req, &res)
			return &res, err
		})
		if err != nil {
			return err
		}
		err = printResult(e, res)
		if ee := tc.askExit(res); ee != nil {
			return ee
		}
		return err
	})
}

func printResult(e *Env, res *protocol.CallResult) error {
	if e.JSON {
		if err := PrintJSON(e.Stdout, res); err != nil {
			return err
		}
	} else {
		printHuman(e, res)
	}
	if d := res.Decision; d != nil && d.Behavior != protocol.Allow {
		return &ExitError{Code: 126} // denied, or asked and unanswered: nothing ran
	}
	if res.IsError {
		return &ExitError{Code: 1}
	}
	return nil
}

func printHuman(e *Env, res *protocol.CallResult) {
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
		fmt.Fprintln(e.Stderr, Visible(line))
	}
	if d := res.Decision; d != nil && d.Behavior != protocol.Allow {
		// Nothing ran: what the daemon says about it is a message, not the call's output, and
		// `sbctl bash -- CMD > out` must not write it into out.
		printContentTo(e.Stderr, res)
	} else {
		printContentTo(e.Stdout, res)
	}
	for _, m := range res.Extra {
		fmt.Fprintln(e.Stderr, VisibleLines(m))
	}
	if res.Error != nil && len(res.Content) == 0 {
		fmt.Fprintf(e.Stderr, "error [%s]: %s\n", res.Error.Class, VisibleLines(res.Error.Message))
	}
	if d := res.Decision; d != nil && d.Behavior == protocol.Ask {
		// A new user's first `sbctl bash -- CMD` in the default mode lands here: say how to
		// run it, since the sandbox confines it whatever the mode.
		if res.ApprovalID != "" && e.askWait > 0 {
			fmt.Fprintf(e.Stderr, "sbctl: no answer within --wait %s (approval %s); answer with `sbctl approve|deny ID` or `sbctl approvals --watch` in another terminal while a call waits\n", e.askWait, res.ApprovalID)
		} else if res.ApprovalID != "" && !e.inSession {
			fmt.Fprintf(e.Stderr, "sbctl: unanswered; approval %s ended with the short-lived session as sbctl exited: pass --wait D to wait for an answer from `sbctl approve|deny ID` or `sbctl approvals --watch` in another terminal (inline on a terminal), or run it in a session (--session ID) whose approvals stay until answered\n", res.ApprovalID)
		} else if res.ApprovalID != "" {
			fmt.Fprintf(e.Stderr, "sbctl: unanswered (approval %s); pass --wait D to wait for an answer from `sbctl approve|deny ID` or `sbctl approvals --watch` in another terminal (inline on a terminal)\n", res.ApprovalID)
		}
		if res.Tool == "WebFetch" {
			fmt.Fprintln(e.Stderr, fetchAskHint)
		} else if e.inSession {
			fmt.Fprintln(e.Stderr, sessionAskHint)
		} else {
			fmt.Fprintln(e.Stderr, askHint)
		}
	}
}

// askHint is what sbctl says when a call asked and nobody answered.
const askHint = "sbctl: to run it without asking, confined as every call is, pass --mode bypassPermissions (--mode acceptEdits lets edits inside the session's directories run), or allow it with a rule (sbctl policy eval --explain TOOL 'JSON' shows why it asked)"

// sessionAskHint replaces askHint for a call in a session given with --session, whose mode a
// call may only narrow.
const sessionAskHint = "sbctl: to run such calls without asking, make a session of a mode that allows more, confined as every call is (sbctl session new --mode acceptEdits or bypassPermissions), or allow it with a rule (sbctl policy eval --explain TOOL 'JSON' shows why it asked)"

// fetchAskHint replaces askHint for WebFetch: bypassPermissions allows the call and the
// egress proxy then refuses it, since a mode never opens the network; only a rule or an
// answer lets it through.
const fetchAskHint = "sbctl: a mode never opens the network: allow the host with a rule (sbctl session new --allow 'WebFetch(domain:HOST)', or the admin's network.allowed_domains), or answer the ask (sbctl approve ID)"

// printContent writes the result's content blocks to stdout; empty text prints nothing.
func printContent(e *Env, res *protocol.CallResult) { printContentTo(e.Stdout, res) }

func printContentTo(w io.Writer, res *protocol.CallResult) {
	for _, b := range res.Content {
		switch b.Type {
		case "text":
			if b.Text == "" {
				continue
			}
			fmt.Fprint(w, b.Text)
			if !strings.HasSuffix(b.Text, "\n") {
				fmt.Fprintln(w)
			}
		case "image":
			fmt.Fprintf(w, "[image %s, %d base64 bytes]\n", b.MediaType, len(b.Data))
		}
	}
}

func parseCallArgs(e *Env, name string, args []string) (*toolCall, string, json.RawMessage, error) {
	fs := NewFlags(e, name)
	tc := &toolCall{}
	tc.flags(fs)
	if name == "call" {
		tc.waitFlag(fs)
	} else {
		tc.shellFlag(fs)
	}
	args, err := ParseInterspersed(fs, args)
	if err != nil {
		return nil, "", nil, err
	}
	if len(args) < 1 || len(args) > 2 {
		return nil, "", nil, UsageError(fmt.Sprintf("usage: sbctl %s [--session ID] TOOL ['JSON' | - for stdin]", name))
	}
	input := json.RawMessage("{}")
	if len(args) == 2 {
		arg := args[1]
		if arg == "-" {
			b, err := io.ReadAll(e.Stdin)
			if err != nil {
				return nil, "", nil, err
			}
			arg = string(b)
		}
		input = json.RawMessage(arg)
	}
	return tc, args[0], input, nil
}

func cmdCall(e *Env, args []string) error {
	tc, tool, input, err := parseCallArgs(e, "call", args)
	if err != nil {
		return err
	}
	return callTool(e, tc, "calls", tool, input)
}

func cmdDecide(e *Env, args []string) error {
	tc, tool, input, err := parseCallArgs(e, "decide", args)
	if err != nil {
		return err
	}
	return decideAndPrint(e, tc, tool, input, false)
}

// decideAndPrint asks for the decision of one call (nothing runs) and prints it; explain adds
// the decision chain's steps.
func decideAndPrint(e *Env, tc *toolCall, tool string, input json.RawMessage, explain bool) error {
	return tc.withSession(e, func(id, mode string) error {
		var res protocol.CallResult
		if err := e.Client().Do(e.Ctx, client.MethodPost, "/v1/sessions/"+id+"/decide",
			protocol.CallRequest{Tool: tool, Input: input, Mode: mode, Shell: tc.shell}, &res); err != nil {
			return err
		}
		if e.JSON {
			return PrintJSON(e.Stdout, res)
		}
		d := res.Decision
		if d == nil {
			return fmt.Errorf("%s", res.Error.Message)
		}
		fmt.Fprintf(e.Stdout, "decision: %s\nreason:   %s\n", d.Behavior, Visible(d.Reason))
		if d.Rule != "" {
			fmt.Fprintf(e.Stdout, "rule:     %s\n", Visible(d.Rule))
		}
		fmt.Fprintf(e.Stdout, "source:   %s\nstep:     %s\n", d.Source, d.Step)
		if d.Route != "" {
			fmt.Fprintf(e.Stdout, "route:    %s\n", d.Route)
		}
		if explain {
			fmt.Fprintln(e.Stdout, "trace:")
			for i, step := range d.Trace {
				fmt.Fprintf(e.Stdout, "  %d. %s\n", i+1, Visible(step))
			}
		}
		return nil
	})
}

func cmdTools(e *Env, args []string) error {
	if err := NewFlags(e, "tools").Parse(args); err != nil {
		return err
	}
	var tl protocol.ToolList
	if err := e.Client().Do(e.Ctx, client.MethodGet, "/v1/tools", nil, &tl); err != nil {
		return err
	}
	if e.JSON {
		return PrintJSON(e.Stdout, tl)
	}
	tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
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
