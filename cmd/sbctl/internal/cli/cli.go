package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/client"
)

// Env is what every subcommand gets: the global flags and the streams.
type Env struct {
	Socket string
	JSON   bool
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Ctx    context.Context
	// Heavy runs a command that needs the packages this one does not link (see HeavyFunc).
	Heavy HeavyFunc

	c *client.Client
	// askWait is the call's --wait, so an ask still unanswered after it says so instead of
	// suggesting --wait.
	askWait time.Duration
	// inSession: the call was made in a session given with --session, whose mode it cannot widen.
	inSession bool
	// usageShown is set once a flag set showed its usage: -h, or a flag it could not parse.
	usageShown bool
}

// HeavyFunc runs command name (with its arguments after the global flags) where the policy
// engine, the classifier, the audit verifier and the MCP SDK are linked: sbctl re-executes
// sbctl-full for it, sbctl-full runs it in-process.
type HeavyFunc func(e *Env, name string, args []string) error

// Client is the daemon's client for this invocation.
func (e *Env) Client() *client.Client {
	if e.c == nil {
		e.c = client.New(e.Socket)
	}
	return e.c
}

// ExitError carries a specific exit code (a command's own, or usage 2).
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return fmt.Sprintf("exit %d", e.Code) }

// UsageError is a wrong invocation: exit 2 with the message.
type UsageError string

func (u UsageError) Error() string { return string(u) }

// Command is one subcommand.
type Command struct {
	Name    string
	Summary string
	Run     func(e *Env, args []string) error
}

// heavyCommands are the commands that run in sbctl-full as a whole.
var heavyCommands = []Command{
	{"classify", "[--json] -- CMD | --jsonl: classify Bash offline", nil},
	{"mcp", "[--mode M] [--cwd D] [--parent ID] [--allow R]...: serve sandboxd's tools over MCP on stdio", nil},
	{"opa", "check | test | eval | fmt | ... ARGS: OPA's command line with sandboxd's builtins (sbctl opa --help)", nil},
}

// Commands lists every subcommand.
func Commands() []Command {
	cmds := []Command{
		{"status", "show the daemon's health and who you are to it", cmdStatus},
		{"session", "new | ls | show ID | mode ID MODE | rm ID", cmdSession},
		{"call", "--session ID TOOL 'JSON': run one tool call", cmdCall},
		{"decide", "--session ID TOOL 'JSON': the decision only, nothing runs", cmdDecide},
		{"bash", "[--session ID] [--timeout D] [--mode M] [--wait D] -- CMD | --command-file F: run a command, exit with its code", cmdBash},
		{"read", "FILE [--offset N] [--limit N]: Read a file", cmdRead},
		{"write", "FILE [--content S | stdin]: Write a file", cmdWrite},
		{"edit", "FILE --old S --new S [--replace-all]: Edit a file", cmdEdit},
		{"glob", "PATTERN [--path DIR]: Glob files", cmdGlob},
		{"grep", "PATTERN [--path P] [--glob G] [--output-mode M] [-i] ...: Grep files", cmdGrep},
		{"fetch", "URL [--prompt P]: WebFetch a page through the session's egress policy, as Markdown", cmdFetch},
		{"tools", "list the tool pool", cmdTools},
		{"task", "ls | output TASK | kill TASK (--session ID): background Bash tasks", cmdTask},
		{"policy", "eval [--explain] TOOL 'JSON' | show | test: inspect the policy", cmdPolicy},
		{"audit", "tail [-f] | query [filters] | stats | export | replay [--deny R]... | verify [--dir D --pubkey K] | pubkey", cmdAudit},
		{"approvals", "[--watch] [--json]: your pending approvals; --watch follows them (y/n/a on a terminal)", cmdApprovals},
		{"approve", "ID [--remember session|localSettings|userSettings] [--rule RULE]: allow a pending call", cmdApprove},
		{"deny", "ID [--message M]: deny a pending call, with a message for the agent", cmdDeny},
		{"hook", "[--confine] [--event E] [--on-unavailable deny|ask]: the PreToolUse hook for agent CLIs (JSON on stdin)", cmdHook},
	}
	for _, h := range heavyCommands {
		name := h.Name
		h.Run = func(e *Env, args []string) error { return e.Heavy(e, name, args) }
		cmds = append(cmds, h)
	}
	return cmds
}

// Run parses the global flags (before the subcommand) and dispatches; it returns the exit code.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, heavy HeavyFunc) int {
	fs := flag.NewFlagSet("sbctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	defSocket := os.Getenv("SANDBOXD_SOCKET")
	if defSocket == "" {
		defSocket = client.DefaultSocket
	}
	e := &Env{Stdin: stdin, Stdout: stdout, Stderr: stderr, Ctx: ctx, Heavy: heavy}
	fs.StringVar(&e.Socket, "socket", defSocket, "daemon socket (env SANDBOXD_SOCKET)")
	fs.BoolVar(&e.JSON, "json", false, "print JSON")
	cmds := Commands()
	fs.Usage = func() {} // shown below: on stdout when asked for, on stderr after a mistake
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout, cmds)
			return 0
		}
		usage(stderr, cmds)
		return 2
	}
	if fs.NArg() == 0 {
		usage(stderr, cmds)
		return 2
	}
	name, rest := fs.Arg(0), fs.Args()[1:]
	if name == "help" {
		usage(stdout, cmds)
		return 0
	}
	if name == "mcp" {
		// The agent CLI starts the MCP server itself (sbctl hook checks on each call).
		if err := selfCheck(); err != nil {
			return exitCode(stderr, name, err)
		}
	}
	for _, c := range cmds {
		if c.Name == name {
			err := c.Run(e, rest)
			var ee *ExitError
			if err != nil && e.usageShown && !errors.As(err, &ee) && !errors.Is(err, flag.ErrHelp) {
				return 2 // a flag it could not parse, reported with the usage
			}
			return exitCode(stderr, name, err)
		}
	}
	fmt.Fprintf(stderr, "sbctl: unknown command %q\n", name)
	usage(stderr, cmds)
	return 2
}

func exitCode(stderr io.Writer, name string, err error) int {
	var ee *ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.Code
	case errors.Is(err, flag.ErrHelp):
		return 0
	}
	fmt.Fprintf(stderr, "sbctl %s: %v\n", name, err)
	var ue UsageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

func usage(w io.Writer, cmds []Command) {
	fmt.Fprintln(w, "usage: sbctl [--socket PATH] [--json] COMMAND [ARGS]   (sbctl COMMAND -h: its flags; docs/sbctl.md: every form)")
	names := make([]string, 0, len(cmds))
	for _, c := range cmds {
		names = append(names, fmt.Sprintf("  %-9s %s", c.Name, c.Summary))
	}
	sort.Strings(names)
	fmt.Fprintln(w, strings.Join(names, "\n"))
}

// PrintJSON writes v indented.
func PrintJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// Multi is a repeatable string flag.
type Multi []string

func (m *Multi) String() string     { return strings.Join(*m, ",") }
func (m *Multi) Set(v string) error { *m = append(*m, v); return nil }

// NewFlags is a subcommand's flag set, reporting to stderr.
func NewFlags(e *Env, name string) *flag.FlagSet {
	fs := flag.NewFlagSet("sbctl "+name, flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	// --json after the command too (sbctl audit replay --json), as before it.
	fs.BoolVar(&e.JSON, "json", e.JSON, "print JSON")
	fs.Usage = func() {
		// The flag package shows the usage on -h and after the message of a flag it could
		// not parse: either way the invocation was the problem (exit 2), already explained.
		e.usageShown = true
		fmt.Fprintf(e.Stderr, "usage of sbctl %s:\n", name)
		fs.PrintDefaults()
	}
	return fs
}

// subcommand splits a command's args into its subcommand and the rest: none is a wrong
// invocation (usage says which there are), and -h prints usage on stdout (exit 0).
func subcommand(e *Env, args []string, usage string) (string, []string, error) {
	if len(args) == 0 {
		return "", nil, UsageError(usage)
	}
	if isHelp(args[0]) {
		fmt.Fprintln(e.Stdout, usage)
		return "", nil, flag.ErrHelp
	}
	return args[0], args[1:], nil
}

func isHelp(arg string) bool { return arg == "-h" || arg == "-help" || arg == "--help" }

// positionalOnly parses the args of a subcommand that takes no flags of its own but --json,
// so -h shows its usage and an unknown flag is refused rather than taken for an argument.
func positionalOnly(e *Env, name string, args []string) ([]string, error) {
	return ParseInterspersed(NewFlags(e, name), args)
}

// ParseInterspersed parses flags wherever they stand among the positional arguments
// (`sbctl read FILE --limit 3`), up to a `--` after which everything is positional.
func ParseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}
