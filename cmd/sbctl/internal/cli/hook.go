package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sandboxd/sandboxd/client"
	"github.com/sandboxd/sandboxd/protocol"
)

// hookInput is what an agent CLI sends a PreToolUse (or PostToolUse) command hook on stdin
// (COMPAT.md §4).
type hookInput struct {
	SessionID      string          `json:"session_id"`
	Cwd            string          `json:"cwd"`
	PermissionMode string          `json:"permission_mode"`
	HookEventName  string          `json:"hook_event_name"`
	ToolName       string          `json:"tool_name"`
	ToolInput      json.RawMessage `json:"tool_input"`
	ToolUseID      string          `json:"tool_use_id"`
	// ToolResponse is PostToolUse's: what the tool returned to the agent.
	ToolResponse json.RawMessage `json:"tool_response"`
}

// hookOutput is the PreToolUse answer.
type hookOutput struct {
	HookSpecificOutput hookDecision `json:"hookSpecificOutput"`
}

type hookDecision struct {
	HookEventName            string         `json:"hookEventName"`
	PermissionDecision       string         `json:"permissionDecision"`
	PermissionDecisionReason string         `json:"permissionDecisionReason"`
	UpdatedInput             map[string]any `json:"updatedInput,omitempty"`
}

// maxHookInputBytes bounds the hook's stdin: a Write of a large file carries its content.
const maxHookInputBytes = 64 << 20

// maxReasonChars keeps a reason under the agents' 10,000-character limit for hook strings.
const maxReasonChars = 9000

// agentModes are the agents' permission_mode values sandboxd has too: a call is decided in
// the mode the agent is in (unless --mode fixes one), so switching the agent to plan mode
// makes sandboxd deny writes as well.
var agentModes = map[string]bool{"default": true, "acceptEdits": true, "plan": true, "bypassPermissions": true, "dontAsk": true}

type hookFlags struct {
	confine       bool
	event         string
	onUnavailable string
	unknownTool   string
	mode          string
	timeout       time.Duration
	stateDir      string
	shell         string
	sf            sessionFlags
	// noAnswer is set once the input turns out to be an event that gets no answer (PostToolUse).
	noAnswer atomic.Bool
	// asksPerson: the input was read, and its permission_mode puts the agent's asks to a
	// person (personAnswers); until then, and otherwise, an undecided call is denied.
	asksPerson atomic.Bool
	// confinedBash: the input is a Bash call and --confine is set, so an ask without the
	// rewrite says that approving it runs the command unconfined.
	confinedBash atomic.Bool
	// misconfigured: the daemon refused what the hook's flags gave it (a rule that does not
	// parse), so the call is denied and the hook exits 2, as for a bad flag.
	misconfigured atomic.Bool
}

// hookGrace is how long past --timeout the watchdog waits for an answer still on its way.
const hookGrace = time.Second

// sessionKey is what picks the agent session's sandboxd session besides the agent's session
// id: its cwd, the mode, and the session flags the hook was given. A hook command changed to
// deny more (a --deny added to the agent's settings) then decides in a new session with that
// rule at once, not after the old session goes idle.
func (hf *hookFlags) sessionKey(cwd, mode string) string {
	sf := &hf.sf
	parts := []string{cwd, mode, sf.network, fmt.Sprint(sf.persistCwd, sf.trustProject)}
	for _, l := range []Multi{sf.allow, sf.deny, sf.ask, sf.addDirs} {
		parts = append(parts, strings.Join(l, "\x01"))
	}
	return strings.Join(parts, "\x00")
}

// cmdHook is the PreToolUse command hook: it decides the agent's call in a sandboxd session
// of that agent session and prints the hook's JSON. It always answers PreToolUse with
// explicit JSON and exit 0, since agents fail open on anything else (a crash, bad JSON, a
// timeout): whatever stops it from deciding is a deny (or, with --on-unavailable ask, an ask).
func cmdHook(e *Env, args []string) error {
	fs := NewFlags(e, "hook")
	var hf hookFlags
	fs.BoolVar(&hf.confine, "confine", false, "rewrite an allowed Bash call to run inside sandboxd (hookSpecificOutput.updatedInput)")
	fs.StringVar(&hf.event, "event", "", "hook event (default: hook_event_name of the input, else PreToolUse)")
	fs.StringVar(&hf.onUnavailable, "on-unavailable", "deny", "answer when sandboxd cannot be reached, does not answer in time or fails (5xx): deny or ask; a call sandboxd refuses is denied either way")
	fs.StringVar(&hf.unknownTool, "unknown-tool", "ask", "answer for a tool sandboxd does not run (TodoWrite, Task, …): ask, or pass (no answer: the agent's own permissions decide)")
	fs.StringVar(&hf.mode, "mode", "", "mode of the session and its calls (default: the agent's permission_mode when sandboxd has it)")
	fs.DurationVar(&hf.timeout, "timeout", 20*time.Second, "own deadline, under the hook's timeout in the agent's settings (30 s in the README's snippet): an agent runs a call whose hook timed out")
	fs.StringVar(&hf.shell, "shell", "", "the shell the agent runs its Bash commands in, without --confine: bash, zsh or sh (default: from $CLAUDE_CODE_SHELL, else $SHELL; zsh when neither names bash or zsh)")
	fs.StringVar(&hf.stateDir, "state-dir", "", "where the hook keeps the session of each agent session (default $XDG_RUNTIME_DIR/sandboxd/hook, else ~/.cache/sandboxd/hook)")
	fs.Var(&hf.sf.allow, "allow", "allow rule of the agent session's sandboxd session (repeatable; a changed set of session flags picks a new one)")
	fs.Var(&hf.sf.deny, "deny", "deny rule of the agent session's sandboxd session (repeatable)")
	fs.Var(&hf.sf.ask, "ask", "ask rule of the agent session's sandboxd session (repeatable)")
	fs.Var(&hf.sf.addDirs, "add-dir", "additional directory of the agent session's sandboxd session (repeatable)")
	fs.BoolVar(&hf.sf.trustProject, "trust-project", false, "let the project's .sandboxd settings allow, not only deny and ask")
	if err := hookConfig(fs, &hf, args); err != nil {
		// A hook the agent cannot run as written still answers: the agent runs a call whose
		// hook printed nothing. Exit 2 blocks the call as well, with the message.
		if b, jerr := json.Marshal(decision(protocol.Deny, "sbctl hook is misconfigured in the agent's settings, so sandboxd denies every call until it is fixed: "+err.Error())); jerr == nil {
			e.Stdout.Write(append(b, '\n'))
		}
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return UsageError(err.Error())
	}
	ctx, cancel := context.WithTimeout(e.Ctx, hf.timeout)
	defer cancel()
	// The deadline ends what listens to ctx (the daemon's answer); the watchdog ends the rest
	// (a file operation that blocks), with the answer for a call that could not be decided. The
	// goroutine left behind ends with the process.
	type answer struct {
		out hookOutput
		ok  bool
	}
	answered := make(chan answer, 1)
	go func() {
		out, ok := hook(ctx, e, &hf)
		answered <- answer{out, ok}
	}()
	watchdog := time.NewTimer(hf.timeout + hookGrace)
	defer watchdog.Stop()
	var a answer
	select {
	case a = <-answered:
	case <-watchdog.C:
		if hf.event == "PostToolUse" || hf.noAnswer.Load() {
			fmt.Fprintln(e.Stderr, "sbctl hook: the report was not recorded within --timeout")
			return nil
		}
		a = answer{hf.undecidedAnswer(fmt.Sprintf("sandboxd could not decide this call within %s", hf.timeout), "no answer in time"), true}
	}
	out, ok := a.out, a.ok
	if !ok {
		return nil
	}
	b, err := json.Marshal(out)
	if err != nil {
		return fmt.Errorf("encode hook output: %w", err)
	}
	if _, err = e.Stdout.Write(append(b, '\n')); err != nil {
		return err
	}
	if hf.misconfigured.Load() {
		// As for a bad flag: exit 2 blocks the call too, and the agent shows the message.
		return UsageError(out.HookSpecificOutput.PermissionDecisionReason)
	}
	return nil
}

// foldedKey returns a top-level key of the input that is not one hookInput reads but equals
// one of them but for case, or "".
func foldedKey(raw []byte) string {
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil {
		return ""
	}
	known := []string{"session_id", "cwd", "permission_mode", "hook_event_name", "tool_name", "tool_input", "tool_use_id", "tool_response"}
	for k := range top {
		for _, n := range known {
			if k != n && strings.EqualFold(k, n) {
				return k
			}
		}
	}
	return ""
}

// hookConfig parses the hook's flags and checks their values.
func hookConfig(fs *flag.FlagSet, hf *hookFlags, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q (the hook reads its input on stdin)", fs.Arg(0))
	case hf.onUnavailable != "deny" && hf.onUnavailable != "ask":
		return errors.New("--on-unavailable is deny or ask")
	case hf.unknownTool != "ask" && hf.unknownTool != "pass":
		return errors.New("--unknown-tool is ask or pass")
	case hf.timeout <= 0:
		return errors.New("--timeout is a positive duration, such as 20s")
	case hf.event != "" && hf.event != "PreToolUse" && hf.event != "PostToolUse" && !otherHookEvents[hf.event]:
		return fmt.Errorf("--event %q is not a hook event (PreToolUse, PostToolUse, …)", hf.event)
	case hf.mode != "" && !hookModes[hf.mode]:
		// Refused by the daemon only when a session is made, a bad mode was a call it could
		// not decide, which --on-unavailable ask turned into an ask.
		return fmt.Errorf("--mode %q is not a mode of sandboxd's the hook can use (default, acceptEdits, plan, dontAsk, bypassPermissions, auto)", hf.mode)
	case hf.shell != "" && !shellName.MatchString(hf.shell):
		return fmt.Errorf("--shell %q is not a shell's name, such as bash, zsh or sh", hf.shell)
	case hf.stateDir != "" && !filepath.IsAbs(hf.stateDir):
		// Relative, it would be wherever the agent runs the hook from.
		return fmt.Errorf("--state-dir %q is not an absolute path", hf.stateDir)
	}
	for _, d := range hf.sf.addDirs {
		if !filepath.IsAbs(d) || filepath.Clean(d) != d {
			return fmt.Errorf("--add-dir %q is not an absolute, clean path", d)
		}
	}
	for _, l := range []struct {
		flag  string
		rules Multi
	}{{"--allow", hf.sf.allow}, {"--deny", hf.sf.deny}, {"--ask", hf.sf.ask}} {
		for _, r := range l.rules {
			// The rules' syntax is the daemon's to check (its parser is not linked here): a
			// rule it refuses when it makes the session is a misconfiguration too.
			if strings.TrimSpace(r) == "" {
				return fmt.Errorf("%s has an empty rule", l.flag)
			}
		}
	}
	return nil
}

// hookModes are the modes the hook's --mode takes: sandboxd's (permission.ParseMode), but for
// bubble, which needs a parent session the hook's sessions do not have.
var hookModes = map[string]bool{"default": true, "manual": true, "acceptEdits": true, "plan": true, "dontAsk": true, "bypassPermissions": true, "auto": true}

// shellName is what the daemon takes as a call's shell (api.checkCall's shellName).
var shellName = regexp.MustCompile(`^[a-z][a-z0-9_.+-]{0,31}$`)

// otherHookEvents are the agents' hook events other than PreToolUse and PostToolUse, which
// this command leaves to the agent's normal flow.
var otherHookEvents = map[string]bool{
	"PostToolUseFailure": true, "PermissionRequest": true, "Notification": true, "UserPromptSubmit": true,
	"Stop": true, "SubagentStart": true, "SubagentStop": true, "PreCompact": true, "SessionStart": true, "SessionEnd": true,
}

// hook decides; ok is false when the event needs no answer (PostToolUse).
func hook(ctx context.Context, e *Env, hf *hookFlags) (out hookOutput, ok bool) {
	// unavailable answers a call sandboxd could not decide because it is not there to: not
	// reached, no answer in time, or a failure of its own (5xx). Only that is --on-unavailable's
	// to answer.
	unavailable := func(why string) (hookOutput, bool) {
		if hf.event == "PostToolUse" {
			fmt.Fprintln(e.Stderr, "sbctl hook: the PostToolUse report was not recorded:", why)
			return hookOutput{}, false // nothing to answer after the fact
		}
		return hf.undecidedAnswer("sandboxd could not decide this call", why), true
	}
	// refused denies a call the hook or sandboxd refused to decide: an input it cannot read,
	// its own state, or any answer of sandboxd's that is not a decision (over a limit, too
	// large, not valid). Each of those the agent can bring about itself, so none may become an
	// ask (--on-unavailable) the person at the agent could approve, unconfined.
	refused := func(why string) (hookOutput, bool) {
		if hf.event == "PostToolUse" {
			fmt.Fprintln(e.Stderr, "sbctl hook: the PostToolUse report was not recorded:", why)
			return hookOutput{}, false
		}
		return decision(protocol.Deny, "sandboxd did not decide this call, so it is denied: "+why), true
	}
	if hf.event != "" && hf.event != "PreToolUse" && hf.event != "PostToolUse" {
		return hookOutput{}, false // an event this command does not answer: the agent's normal flow
	}
	raw, err := io.ReadAll(io.LimitReader(e.Stdin, maxHookInputBytes+1))
	if err != nil {
		return refused("read the hook input: " + err.Error())
	}
	if len(raw) > maxHookInputBytes {
		return refused(fmt.Sprintf("the hook input is over %d bytes", maxHookInputBytes))
	}
	var in hookInput
	if err := json.Unmarshal(raw, &in); err != nil {
		return refused("the hook input is not the expected JSON: " + err.Error())
	}
	hf.asksPerson.Store(personAnswers(in.PermissionMode))
	hf.confinedBash.Store(hf.confine && in.ToolName == "Bash")
	if k := foldedKey(raw); k != "" {
		// Go's decoder matches keys in any case, the agent's own reader only exactly: a
		// TOOL_INPUT beside tool_input would decide one input while the agent runs the other.
		return refused(fmt.Sprintf("the hook input has a key %q that only differs in case from one the hook reads", k))
	}
	event := hf.event
	if event == "" {
		event = in.HookEventName
	} else if event == "PostToolUse" && in.HookEventName == "PreToolUse" {
		// Registered under PreToolUse with --event PostToolUse: answering nothing, as for a
		// report, would let every call run.
		return decision(protocol.Deny, fmt.Sprintf("sbctl hook is misconfigured in the agent's settings: it runs with --event %s but got a %s event, so sandboxd denies the call", event, in.HookEventName)), true
	}
	if event == "PostToolUse" {
		hf.noAnswer.Store(true)
		report(ctx, e, hf, &in)
		return hookOutput{}, false
	}
	if event != "" && event != "PreToolUse" && (otherHookEvents[event] || in.ToolName == "") {
		return hookOutput{}, false // an event this command does not answer
	}
	// An event name it does not know, on a tool call, is decided as PreToolUse: answered
	// nothing, the agent would run the call (its hooks fail open).
	if in.ToolName == "" || in.SessionID == "" || !filepath.IsAbs(in.Cwd) {
		return refused("the hook input lacks tool_name, session_id or an absolute cwd")
	}
	if err := selfCheck(); err != nil {
		return refused(err.Error())
	}
	if len(in.ToolInput) == 0 || string(in.ToolInput) == "null" {
		in.ToolInput = json.RawMessage("{}")
	}
	mode := hf.mode
	if mode == "" && agentModes[in.PermissionMode] {
		mode = in.PermissionMode
	}
	c := e.Client()
	// The socket by its absolute path: it keys the state and goes into the rewrite, which the
	// agent's shell runs from wherever it then is.
	socket, err := filepath.Abs(e.Socket)
	if err != nil {
		return refused("socket path: " + err.Error())
	}
	// One sandboxd session per agent session, cwd and mode: a call's mode may only narrow its
	// session's, so a mode the agent switches to is a session of that mode.
	store, err := newHookStore(hf.stateDir, socket, in.SessionID, hf.sessionKey(in.Cwd, mode))
	if err != nil {
		return refused(err.Error())
	}
	req := protocol.CallRequest{Tool: in.ToolName, Input: in.ToolInput, ToolUseID: in.ToolUseID}
	if in.ToolName == "Bash" && !hf.confine {
		// The agent runs the command itself, in its own shell: decide it as that shell reads it.
		req.Shell = agentShell(hf.shell)
	}
	// The agent runs every other tool itself, and Bash too unless it is rewritten to run in
	// sandboxd: its paths are decided where the agent's own process finds them.
	req.Unconfined = in.ToolName != "Bash" || !hf.confine
	sid, res, err := decideInSession(ctx, c, store, hf, in.Cwd, mode, req)
	var ae *client.APIError
	if errors.As(err, &ae) && ae.Detail.Class == "unknown_tool" || err == nil && res.Error != nil && res.Error.Class == "unknown_tool" {
		// A tool of the agent's own that sandboxd does not run (TodoWrite, Task, an MCP
		// server's): sandboxd has no say on it. Never an allow: the person at the agent
		// decides, or (--unknown-tool pass) the agent's own permissions do.
		if hf.confinedBash.Load() {
			// An ask here would carry no rewrite: approved, the command would run unconfined.
			return decision(protocol.Deny, "sandboxd does not run Bash here, so it cannot run it confined (sbctl hook --confine), and it is denied"), true
		}
		if hf.unknownTool == "pass" || agentOwnTools[in.ToolName] {
			return hookOutput{}, false
		}
		if !personAnswers(in.PermissionMode) {
			// Asked, the agent's classifier could answer for the person (as below).
			return decision(protocol.Deny, fmt.Sprintf("sandboxd does not run the tool %q, so it cannot decide it, and in the agent's %q mode its asks may be answered without a person, so sandboxd denies it (sbctl hook --unknown-tool pass leaves such tools to the agent's own permissions)", in.ToolName, in.PermissionMode)), true
		}
		return decision(protocol.Ask, fmt.Sprintf("sandboxd does not run the tool %q, so it cannot decide it; asking", in.ToolName)), true
	}
	var ce *hookConfigError
	switch {
	case errors.As(err, &ce):
		hf.misconfigured.Store(true)
		return decision(protocol.Deny, "sbctl hook is misconfigured in the agent's settings, so sandboxd denies every call until it is fixed: "+err.Error()), true
	case err != nil && unanswered(err):
		return unavailable(err.Error())
	case err != nil:
		return refused(err.Error())
	}
	d := res.Decision
	if d == nil {
		return refused("sandboxd answered with no decision")
	}
	out = decision(d.Behavior, reason(d))
	if d.Behavior != protocol.Allow && d.Behavior != protocol.Ask {
		out.HookSpecificOutput.PermissionDecision = protocol.Deny
		return out, true
	}
	if d.Behavior == protocol.Ask && req.Unconfined && !personAnswers(in.PermissionMode) {
		// The agent runs this call itself, outside any sandbox, and in this mode its asks may
		// be answered by its classifier: an ask passed on could come back a yes no person
		// gave (rm -rf ~ included). Confined Bash is asked again by sandboxd instead.
		return decision(protocol.Deny, fmt.Sprintf("sandboxd asks about this call (%s), but in the agent's %q mode its asks may be answered without a person, and the agent would run it itself, outside any sandbox, so sandboxd denies it. Run the agent in a mode that asks you, or have sandboxd run Bash confined (sbctl hook --confine), where it asks you itself.", reason(d), in.PermissionMode)), true
	}
	if hf.confine && in.ToolName == "Bash" {
		if d.Behavior == protocol.Ask {
			// The agent shows its user the rewrite (the launcher), not the command: the reason
			// carries the command, whole, or the call is not put to them at all.
			var bi struct {
				Command string `json:"command"`
			}
			_ = json.Unmarshal(in.ToolInput, &bi)
			why, fits := confinedAskReason(d, bi.Command)
			if !fits {
				return decision(protocol.Deny, fmt.Sprintf("sandboxd asks about this command, but at %d characters it is too long to show the user in full for approval; split it into shorter commands", len(bi.Command))), true
			}
			if !personAnswers(in.PermissionMode) {
				why += fmt.Sprintf(" In the agent's %q mode its asks may be answered without a person, so its approval does not count as yours: sandboxd asks again when the command runs, and it waits for your answer (sbctl approvals) as long as the approval lives (approvals.timeout_sec, 5 minutes by default).", in.PermissionMode)
			}
			out = decision(protocol.Ask, why)
		}
		behavior := d.Behavior
		if behavior == protocol.Ask && !personAnswers(in.PermissionMode) {
			behavior = askAgain
		}
		upd, err := confineBash(socket, store, sid, mode, behavior, askKey(d), in.ToolInput)
		if err != nil {
			return decision(protocol.Deny, "sandboxd cannot run this command confined, so it is denied: "+err.Error()), true
		}
		out.HookSpecificOutput.UpdatedInput = upd
	}
	return out, true
}

// agentShell is the shell an agent runs its Bash commands in: the --shell flag, else the one
// Claude Code picks, $CLAUDE_CODE_SHELL or else $SHELL when it names bash or zsh. When
// neither does, the agent falls back to a bash or zsh it finds; zsh's reading refuses
// everything bash's does, and more, so it is the one to decide by.
func agentShell(flag string) string {
	if flag != "" {
		return flag
	}
	for _, v := range []string{"CLAUDE_CODE_SHELL", "SHELL"} {
		switch name := filepath.Base(os.Getenv(v)); {
		case strings.Contains(name, "zsh"):
			return "zsh"
		case strings.Contains(name, "bash"):
			return "bash"
		}
	}
	return "zsh"
}

// confinedAskReason is the reason an ask of a confined command gives, as the agent shows it,
// and whether it fits the agent's limit whole. It is measured as shown: escaping makes a
// reason longer, and decision would cut the command's tail off a reason that only fit raw.
func confinedAskReason(d *protocol.Decision, command string) (string, bool) {
	why := Visible(reason(d)+"\nApproving runs, confined: ") + Shown(command)
	return why, len(why) <= maxReasonChars
}

func verb(behavior string) string {
	if behavior == protocol.Ask {
		return "asked"
	}
	return "denied"
}

func decision(behavior, why string) hookOutput {
	// The person at the agent reads the reason in its prompt, next to the command it quotes.
	why = Visible(why)
	if len(why) > maxReasonChars {
		// Cut on a character boundary: the agent reads the reason as UTF-8 text.
		why = strings.ToValidUTF8(why[:maxReasonChars], "") + "…"
	}
	return hookOutput{HookSpecificOutput: hookDecision{HookEventName: "PreToolUse", PermissionDecision: behavior, PermissionDecisionReason: why}}
}

// reason is the decision's reason with the rule and source that made it, as the model and the
// person at the agent should see it.
func reason(d *protocol.Decision) string {
	var b strings.Builder
	b.WriteString("sandboxd ")
	switch d.Behavior {
	case protocol.Allow:
		b.WriteString("allows")
	case protocol.Ask:
		b.WriteString("asks")
	default:
		b.WriteString("denies")
	}
	if d.Reason != "" {
		b.WriteString(": ")
		b.WriteString(d.Reason)
	}
	switch {
	case d.Rule != "" && d.Source != "":
		fmt.Fprintf(&b, " (rule %s from %s)", d.Rule, d.Source)
	case d.Rule != "":
		fmt.Fprintf(&b, " (rule %s)", d.Rule)
	case d.Source != "":
		fmt.Fprintf(&b, " (%s)", d.Source)
	}
	return b.String()
}

// decideInSession decides req in the agent session's sandboxd session, creating it on first
// use and again when the daemon no longer knows it (a restart, an idle timeout).
func decideInSession(ctx context.Context, c *client.Client, store *hookStore, hf *hookFlags, cwd, mode string, req protocol.CallRequest) (string, *protocol.CallResult, error) {
	sid, err := store.load()
	if err != nil {
		return "", nil, err
	}
	for attempt := 0; attempt < 2; attempt++ {
		if sid == "" {
			s, err := createHookSession(ctx, c, store, hf, cwd, mode)
			if err != nil {
				return "", nil, err
			}
			if sid, err = store.save(s.ID, attempt > 0); err != nil {
				_ = c.DeleteSession(ctx, s.ID)
				return "", nil, err
			}
			if sid != s.ID {
				// Another hook of the same agent session (agents run tools in parallel)
				// saved its session first: use that one, drop ours.
				_ = c.DeleteSession(ctx, s.ID)
			}
		}
		req.ClientKey = store.key
		// Decided where the agent runs it: a session whose cwd was reset (a dir on the way
		// replaced by a link) refuses the call rather than decide it at its root.
		req.Cwd = filepath.Clean(cwd)
		res, err := decide(ctx, c, sid, req)
		var ae *client.APIError
		// not_found is the session, gone (an unknown tool is unknown_tool); a session made
		// by a process with a group this one lacks cannot serve it either, nor one whose cwd
		// is no longer the agent's: made again, which fails where the cwd now leads out of
		// the agent's root.
		gone := errors.As(err, &ae) && (ae.Status == 404 && ae.Detail.Class == "not_found" ||
			ae.Status == 403 && strings.Contains(ae.Detail.Message, protocol.SessionGroupsLacking) ||
			ae.Status == 409 && strings.Contains(ae.Detail.Message, protocol.SessionCwdMoved))
		if gone && attempt == 0 {
			sid = ""
			continue
		}
		return sid, res, err
	}
	return "", nil, errors.New("the daemon keeps losing the session")
}

// decide is POST /decide, with a refusal the daemon answers as a result without a decision
// (a status with the result's error: unknown_tool, too_many_calls, rate_limited, too_large,
// schema_invalid) made an *client.APIError of that status, as every other refusal is: what
// is refused and what failed are told apart by the status. An error that is no answer is a
// noAnswer.
func decide(ctx context.Context, c *client.Client, sid string, req protocol.CallRequest) (*protocol.CallResult, error) {
	var res protocol.CallResult
	status, err := c.Send(ctx, client.MethodPost, "/v1/sessions/"+url.PathEscape(sid)+"/decide", req, &res)
	if err != nil {
		return nil, daemonErr(err)
	}
	if res.Decision == nil && res.Error != nil {
		return nil, &client.APIError{Status: status, Detail: *res.Error}
	}
	return &res, nil
}

// noAnswer is the error of a request to the daemon that got no answer: it could not be
// reached, the connection broke, or the deadline passed.
type noAnswer struct{ err error }

func (n *noAnswer) Error() string { return n.err.Error() }
func (n *noAnswer) Unwrap() error { return n.err }

// daemonErr marks the error of a request to the daemon that got no answer as such; an error
// answer (*client.APIError) stays what it is.
func daemonErr(err error) error {
	if err == nil || !client.NoAnswer(err) {
		return err
	}
	return &noAnswer{err}
}

// unanswered reports whether err means sandboxd could not decide because it is not there to:
// no answer (noAnswer), or a failure of its own (5xx). Any other answer (4xx) is a refusal
// it made, which the caller of the hook, the agent, can bring about (a limit it fills, a
// command too large, an input not valid): never an ask the agent's user could approve.
func unanswered(err error) bool {
	var ae *client.APIError
	if errors.As(err, &ae) {
		return ae.Status >= 500
	}
	var na *noAnswer
	return errors.As(err, &na)
}

// hookConfigError is the daemon's refusal of what the hook's own flags gave it: a
// misconfiguration of the hook, as a bad flag value is.
type hookConfigError struct{ err error }

func (h *hookConfigError) Error() string { return h.err.Error() }
func (h *hookConfigError) Unwrap() error { return h.err }

// sessionRulesRefused is how the daemon's refusal of a session's own rules begins (status
// 422): "rules: " and the source, "session", of the rule that did not load.
const sessionRulesRefused = "rules: session:"

// createHookSession makes the sandboxd session of the agent session for calls at cwd: rooted
// at the agent's root, with cwd as its cwd, so a relative path is the agent's and a rule is
// anchored where the agent's is. A cwd outside the session's directories is refused.
func createHookSession(ctx context.Context, c *client.Client, store *hookStore, hf *hookFlags, cwd, mode string) (protocol.Session, error) {
	root, saved, err := store.agentRoot(cwd)
	if err != nil {
		return protocol.Session{}, err
	}
	cs := protocol.CreateSession{Cwd: root, Mode: mode, AdditionalDirs: hf.sf.addDirs, TrustProject: hf.sf.trustProject,
		Rules: protocol.Rules{Allow: hf.sf.allow, Deny: hf.sf.deny, Ask: hf.sf.ask}, ClientKey: store.key,
		// One per agent session, cwd and mode, made again on demand (decideInSession): at
		// the user's session limit the daemon may end the least recently used to make room.
		Disposable: true}
	s, err := c.CreateSession(ctx, cs)
	if err != nil {
		if saved {
			store.forgetRoot(root)
		}
		var ae *client.APIError
		if errors.As(err, &ae) && ae.Status/100 == 4 && strings.HasPrefix(ae.Detail.Message, sessionRulesRefused) {
			// The session's own rules are the hook's flags (a settings file is named by its
			// path): the hook command is wrong, not this call.
			return protocol.Session{}, &hookConfigError{fmt.Errorf("a rule of its --allow, --deny or --ask does not load: %w", err)}
		}
		err = daemonErr(err)
		if saved {
			return protocol.Session{}, fmt.Errorf("create a session for %s: %w", root, err)
		}
		return protocol.Session{}, fmt.Errorf("create a session for %s, the agent session's first cwd (kept in %s: remove it to root the agent session elsewhere): %w", root, store.rootPath, err)
	}
	if cwd != root {
		// Moved before the session's id is saved: no other call uses it at its root.
		if err := c.Do(ctx, client.MethodPatch, "/v1/sessions/"+s.ID, protocol.UpdateSession{Cwd: &cwd}, nil); err != nil {
			_ = c.DeleteSession(ctx, s.ID)
			return protocol.Session{}, fmt.Errorf("the agent's cwd %s in its session rooted at %s: %w", cwd, root, daemonErr(err))
		}
	}
	return s, nil
}

// confineBash writes the command where only this user can read it and returns the Bash input
// with its command replaced by one that runs the original through sandboxd in session sid.
// The original never passes through a shell's parser on the way: the rewrite names the file
// and its digest, so no quoting can break it.
func confineBash(socket string, store *hookStore, sid, mode, behavior, asked string, raw json.RawMessage) (map[string]any, error) {
	var in map[string]any
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, fmt.Errorf("decode the Bash input: %w", err)
	}
	cmd, ok := in["command"].(string)
	if !ok {
		return nil, errors.New("the Bash input has no command")
	}
	if strings.IndexByte(cmd, 0) >= 0 {
		return nil, errors.New("the command contains a NUL byte")
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find sbctl: %w", err)
	}
	path, err := store.writeCommand(cmd)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(cmd))
	argv := []string{self, "--socket", socket, "bash", "--session", sid}
	switch {
	case behavior == protocol.Ask:
		// The agent asks its user before it runs this; once they approve, the command runs
		// confined as every call does, its ask answered through sandboxd's queue as the owner
		// (audited) rather than asked twice. A per-call mode may only narrow the session's.
		// Only the ask the user saw: one asked for another reason when it runs (a link swapped
		// since, making it a critical rm or an ask rule's hit) is not theirs to answer.
		argv = append(argv, "--approved", asked)
	case behavior == askAgain:
		// Whoever answers the agent may not be a person: sandboxd's own ask stands, and the
		// launcher waits on it for the person's answer (sbctl approvals) as long as a Bash
		// call may run, rather than fail at once.
		argv = append(argv, "--wait", confinedTimeout)
	case mode != "":
		argv = append(argv, "--mode", mode)
	}
	// The agent's own timeout moves its launcher to the background, where the agent goes on
	// reading it; sandboxd must not end the command first. So the call runs to the longest
	// timeout a Bash call takes, whatever the agent's: past it, sandboxd keeps the command as
	// a background task of the session and the launcher exits 124 with what it printed.
	argv = append(argv, "--timeout", confinedTimeout)
	argv = append(argv, "--command-file", path, "--command-sha256", hex.EncodeToString(sum[:]))
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = shellQuote(a)
	}
	in["command"] = strings.Join(quoted, " ")
	return in, nil
}

// askKey names the question an ask put: what decided it (its step and rule) and the reason
// shown. A launcher run with --approved answers only an ask of this key.
func askKey(d *protocol.Decision) string {
	sum := sha256.Sum256([]byte(d.Step + "\x00" + d.Rule + "\x00" + d.Reason))
	return hex.EncodeToString(sum[:12])
}

// undecided is --on-unavailable's answer for a call sandboxd could not decide because it is
// not there to (not reached, no answer in time, a 5xx): an ask only where the agent puts its
// asks to a person. In auto or a mode unknown here, or before the input was read, the
// agent's classifier could answer the ask, and the agent would run the call itself: a deny.
func (hf *hookFlags) undecided() string {
	if hf.onUnavailable == protocol.Ask && hf.asksPerson.Load() {
		return protocol.Ask
	}
	return protocol.Deny
}

// undecidedAnswer is the answer for a call sandboxd could not decide (what, why). An ask of a
// Bash call under --confine carries no rewrite (there is no session to run it in), so its
// reason says that approving it runs the command as the agent runs it, outside sandboxd.
func (hf *hookFlags) undecidedAnswer(what, why string) hookOutput {
	answer := hf.undecided()
	text := what + ", so it is " + verb(answer) + ": " + why
	if answer == protocol.Ask && hf.confinedBash.Load() {
		text += ". Approving it runs the command as the agent runs its commands, unconfined, outside sandboxd (sbctl hook --on-unavailable ask)."
	}
	return decision(answer, text)
}

// askAgain is confineBash's behavior for an asked call whose approval by the agent is not a
// person's: rewritten without --approved, so sandboxd asks its owner when it runs.
const askAgain = "ask_again"

// agentOwnTools are the agent's tools, not sandboxd's, that act on nothing outside its own
// process and conversation: its to-do list, a question to its user, a sub-agent (whose own
// tool calls come through this hook). Asked about on every call, they made the hook
// unusable; left to the agent's own permissions, unless a deny or ask rule names one (the
// daemon holds those first).
var agentOwnTools = map[string]bool{"TodoWrite": true, "TodoRead": true, "AskUserQuestion": true, "Task": true}

// personAnswers reports whether, in the agent's permission_mode, what the hook asks is put to
// a person: the modes sandboxd shares with the agent, and no mode given (an agent that sends
// none prompts). Not in auto, where the agent's classifier answers, nor in a mode unknown here.
func personAnswers(permissionMode string) bool {
	return permissionMode == "" || agentModes[permissionMode]
}

// confinedTimeout is the longest timeout a Bash call takes (COMPAT: 600000 ms, larger
// clamped).
const confinedTimeout = "600000ms"

// shellQuote quotes s so that every POSIX shell, zsh and fish read it back as s: inside single
// quotes fish takes \\ and \' as escapes, so a backslash, like a quote, is written between
// closed quotes, escaped, where each shell reads \\ as one backslash and \' as a quote.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:@+,") == "" {
		return s
	}
	r := strings.NewReplacer(`'`, `'\''`, `\`, `'\\'`)
	return "'" + r.Replace(s) + "'"
}

// report records a PostToolUse outcome in the audit log of the session the PreToolUse hook
// decided the call in. It answers nothing (the agent's flow goes on whatever happens); a
// failure is said on stderr, which the agent shows in its transcript.
func report(ctx context.Context, e *Env, hf *hookFlags, in *hookInput) {
	if in.ToolName == "" || in.SessionID == "" || !filepath.IsAbs(in.Cwd) {
		fmt.Fprintln(e.Stderr, "sbctl hook: the PostToolUse input lacks tool_name, session_id or an absolute cwd; not recorded")
		return
	}
	socket, err := filepath.Abs(e.Socket)
	if err != nil {
		return
	}
	mode := hf.mode
	if mode == "" && agentModes[in.PermissionMode] {
		mode = in.PermissionMode
	}
	store, err := newHookStore(hf.stateDir, socket, in.SessionID, hf.sessionKey(in.Cwd, mode))
	if err != nil {
		fmt.Fprintln(e.Stderr, "sbctl hook:", err)
		return
	}
	sid, err := store.load()
	if err != nil || sid == "" {
		// No PreToolUse was decided for this cwd and mode: none at all in this agent session,
		// or the call moved the agent's cwd (a cd it keeps) or its mode changed since. Said, so
		// a report missing from the audit log is not a mystery.
		fmt.Fprintf(e.Stderr, "sbctl hook: no sandboxd session of this agent session for cwd %s and mode %q (its PreToolUse was decided elsewhere, or not at all); the PostToolUse report was not recorded\n", in.Cwd, mode)
		return
	}
	tr := protocol.ToolReport{Event: "PostToolUse", Tool: in.ToolName, ToolUseID: in.ToolUseID, Input: in.ToolInput,
		IsError: responseIsError(in.ToolResponse), ResponseBytes: len(in.ToolResponse), ClientKey: store.key}
	if err := e.Client().Do(ctx, client.MethodPost, "/v1/sessions/"+sid+"/reports", tr, nil); err != nil {
		fmt.Fprintln(e.Stderr, "sbctl hook: the PostToolUse report was not recorded:", err)
	}
}

// responseIsError reads the agents' error markers in a tool response: is_error, or an
// interrupted or failed Bash call.
func responseIsError(resp json.RawMessage) bool {
	var r struct {
		IsError     bool   `json:"is_error"`
		Interrupted bool   `json:"interrupted"`
		Error       string `json:"error"`
	}
	return json.Unmarshal(resp, &r) == nil && (r.IsError || r.Interrupted || r.Error != "")
}
