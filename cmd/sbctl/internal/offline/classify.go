package offline

import (
	"os"
	"strings"

	"github.com/sandboxd/sandboxd/classifier"
	"github.com/sandboxd/sandboxd/cmd/sbctl/internal/cli"
)

// Classify classifies Bash offline: no daemon is needed.
func Classify(e *cli.Env, args []string) error {
	fs := cli.NewFlags(e, "classify")
	jsonl := fs.Bool("jsonl", false, "read one JSON string (a command) per line on stdin, write one JSON result per line")
	cwd := fs.String("cwd", "", "working directory for outside-workspace checks (default: the current one)")
	shell := fs.String("shell", classifier.ShellBash, "the shell that will run the command: bash, zsh or sh")
	unconfined := fs.Bool("unconfined", false, "the command runs outside any sandbox (as an agent's hook decides it): the words of commands no table describes count as paths")
	mentionReads := fs.Bool("mention-reads", false, "the session has a Read deny or ask rule only the decision holds outside it (a wildcard starting at / or above the session): the literal words of commands no table describes count as paths they may read")
	if err := fs.Parse(args); err != nil {
		return err
	}
	opts := classifier.Options{Cwd: *cwd, Home: os.Getenv("HOME"), Shell: *shell, Unconfined: *unconfined, MentionReads: *mentionReads}
	if opts.Cwd == "" {
		opts.Cwd, _ = os.Getwd()
	}
	opts.WorkDirs = []string{opts.Cwd}
	if *jsonl {
		return classifier.RunJSONL(e.Stdin, e.Stdout, opts)
	}
	if fs.NArg() == 0 {
		return cli.UsageError("usage: sbctl classify [--json] [--shell bash|zsh|sh] [--unconfined] [--mention-reads] -- 'CMD'   or   sbctl classify --jsonl < commands.jsonl")
	}
	c := classifier.Classify(strings.Join(fs.Args(), " "), opts)
	if e.JSON {
		return cli.PrintJSON(e.Stdout, c)
	}
	_, err := e.Stdout.Write([]byte(c.Format()))
	return err
}
