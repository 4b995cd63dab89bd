// Command sbctl is the sandboxd CLI: sessions, tool calls, decisions, classification.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/sandboxd/sandboxd/config"
)

// env is what every subcommand gets: the global flags and the streams.
type env struct {
	socket string
	json   bool
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	ctx    context.Context
}

func (e *env) client() *client { return newClient(e.socket) }

// exitError carries a specific exit code (a command's own, or usage 2).
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

type command struct {
	name    string
	summary string
	run     func(e *env, args []string) error
}

var commands []command

func init() {
	commands = []command{
		{"status", "show the daemon's health and who you are to it", cmdStatus},
		{"session", "new | ls | show ID | mode ID MODE | rm ID", cmdSession},
		{"call", "--session ID TOOL 'JSON': run one tool call", cmdCall},
		{"decide", "--session ID TOOL 'JSON': the decision only, nothing runs", cmdDecide},
		{"bash", "[--session ID] [--timeout D] [--mode M] -- CMD: run a command, exit with its code", cmdBash},
		{"read", "FILE [--offset N] [--limit N]: Read a file", cmdRead},
		{"write", "FILE [--content S | stdin]: Write a file", cmdWrite},
		{"edit", "FILE --old S --new S [--replace-all]: Edit a file", cmdEdit},
		{"glob", "PATTERN [--path DIR]: Glob files", cmdGlob},
		{"grep", "PATTERN [--path P] [--glob G] [--mode M] [-i] ...: Grep files", cmdGrep},
		{"tools", "list the tool pool", cmdTools},
		{"task", "ls | output TASK | kill TASK (--session ID): background Bash tasks", cmdTask},
		{"classify", "[--json] -- CMD | --jsonl: classify Bash offline", cmdClassify},
		{"policy", "eval [--explain] TOOL 'JSON' | show | test: inspect the policy", cmdPolicy},
		{"audit", "tail [-f] | query [filters] | export | verify [--dir D --pubkey K] | pubkey", cmdAudit},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run parses the global flags (before the subcommand) and dispatches.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sbctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	defSocket := os.Getenv("SANDBOXD_SOCKET")
	if defSocket == "" {
		defSocket = config.DefaultSocket
	}
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr, ctx: ctx}
	fs.StringVar(&e.socket, "socket", defSocket, "daemon socket (env SANDBOXD_SOCKET)")
	fs.BoolVar(&e.json, "json", false, "print JSON")
	fs.Usage = func() { usage(stderr) }
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		usage(stderr)
		return 2
	}
	name, rest := fs.Arg(0), fs.Args()[1:]
	for _, c := range commands {
		if c.name == name {
			err := c.run(e, rest)
			var ee *exitError
			switch {
			case err == nil:
				return 0
			case errors.As(err, &ee):
				return ee.code
			case errors.Is(err, flag.ErrHelp):
				return 0
			}
			fmt.Fprintf(stderr, "sbctl %s: %v\n", name, err)
			var ue usageError
			if errors.As(err, &ue) {
				return 2
			}
			return 1
		}
	}
	fmt.Fprintf(stderr, "sbctl: unknown command %q\n", name)
	usage(stderr)
	return 2
}

type usageError string

func (u usageError) Error() string { return string(u) }

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: sbctl [--socket PATH] [--json] COMMAND [ARGS]")
	names := make([]string, 0, len(commands))
	for _, c := range commands {
		names = append(names, fmt.Sprintf("  %-9s %s", c.name, c.summary))
	}
	sort.Strings(names)
	fmt.Fprintln(w, strings.Join(names, "\n"))
}

// printJSON writes v indented.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// multi is a repeatable string flag.
type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func newFlags(e *env, name string) *flag.FlagSet {
	fs := flag.NewFlagSet("sbctl "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	return fs
}

// parseInterspersed parses flags wherever they stand among the positional arguments
// (`sbctl read FILE --limit 3`), up to a `--` after which everything is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
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
