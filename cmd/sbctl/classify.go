package main

import (
	"os"
	"strings"

	"github.com/sandboxd/sandboxd/classifier"
)

// cmdClassify classifies Bash offline: no daemon is needed.
func cmdClassify(e *env, args []string) error {
	fs := newFlags(e, "classify")
	asJSON := fs.Bool("json", false, "print JSON")
	jsonl := fs.Bool("jsonl", false, "read one JSON string (a command) per line on stdin, write one JSON result per line")
	cwd := fs.String("cwd", "", "working directory for outside-workspace checks (default: the current one)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	opts := classifier.Options{Cwd: *cwd, Home: os.Getenv("HOME")}
	if opts.Cwd == "" {
		opts.Cwd, _ = os.Getwd()
	}
	opts.WorkDirs = []string{opts.Cwd}
	if *jsonl {
		return classifier.RunJSONL(e.stdin, e.stdout, opts)
	}
	if fs.NArg() == 0 {
		return usageError("usage: sbctl classify [--json] -- 'CMD'   or   sbctl classify --jsonl < commands.jsonl")
	}
	c := classifier.Classify(strings.Join(fs.Args(), " "), opts)
	if *asJSON || e.json {
		return printJSON(e.stdout, c)
	}
	_, err := e.stdout.Write([]byte(c.Format()))
	return err
}
