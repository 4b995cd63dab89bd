package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/protocol"
)

// maxCommandFileBytes bounds a --command-file: a command, heredocs included, is far smaller.
const maxCommandFileBytes = 16 << 20

func cmdBash(e *Env, args []string) error {
	fs := NewFlags(e, "bash")
	tc := &toolCall{}
	tc.flags(fs)
	tc.waitFlag(fs)
	timeout := fs.Duration("timeout", 0, "command timeout (default the tool's 2m, max 10m)")
	background := fs.Bool("background", false, "run in the background and print the task id")
	cmdFile := fs.String("command-file", "", "read the command from this file (a private file of yours) and delete it; no shell quoting involved")
	cmdSum := fs.String("command-sha256", "", "with --command-file: refuse to run unless the file's SHA-256 is this (hex)")
	fs.StringVar(&tc.approved, "approved", "", "the key of the ask the caller's user already approved (sbctl hook --confine's rewrite of an asked call): answer that ask allow, as its owner, and run it; an ask for another reason is left unanswered")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var command string
	switch {
	case *cmdFile != "" && fs.NArg() > 0:
		return UsageError("sbctl bash: give the command either after -- or in --command-file, not both")
	case *cmdFile != "":
		c, err := readCommandFile(*cmdFile, *cmdSum)
		if err != nil {
			return err
		}
		command = c
	case fs.NArg() == 0:
		return UsageError("usage: sbctl bash [--session ID] [--timeout D] [--mode M] -- CMD   (or --command-file FILE)")
	default:
		command = strings.Join(fs.Args(), " ")
	}
	input := map[string]any{"command": command}
	if *timeout > maxBashTimeout {
		fmt.Fprintf(e.Stderr, "sbctl: --timeout %s is over the Bash tool's %s; the command runs for at most %s\n", *timeout, maxBashTimeout, maxBashTimeout)
	}
	if *timeout > 0 {
		input["timeout"] = timeout.Milliseconds()
	}
	if *background {
		if tc.session == "" {
			// A short-lived session ends, with its tasks, as soon as sbctl exits.
			return UsageError("sbctl bash --background needs --session ID (from sbctl session new): a short-lived session ends, and kills its tasks, when sbctl exits")
		}
		input["run_in_background"] = true
	}
	raw, err := json.Marshal(input)
	if err != nil {
		return fmt.Errorf("encode input: %w", err)
	}
	return tc.withSession(e, func(id, mode string) error {
		req := protocol.CallRequest{Tool: "Bash", Input: raw, Mode: mode}
		if e.JSON {
			res, _, err := tc.send(e, id, req, func(req protocol.CallRequest) (*protocol.CallResult, error) {
				return e.Client().Call(e.Ctx, id, req)
			})
			if err != nil {
				return err
			}
			return finishBash(e, res, true, tc.session)
		}
		// Stream the output as it comes, stdout to stdout and stderr to stderr, as the command
		// wrote them; the final result repeats it, so it is not printed again. A call resumed
		// after an inline answer comes back whole.
		streamed := false
		var outN, errN int64 // bytes of each stream written as they came
		res, resumed, err := tc.send(e, id, req, func(req protocol.CallRequest) (*protocol.CallResult, error) {
			p := startProgress(e)
			defer p.stop()
			return e.Client().Stream(e.Ctx, id, req, func(ev protocol.Event) {
				switch ev.Kind {
				case "stdout":
					streamed = true
					b := ev.Bytes()
					outN += int64(len(b))
					p.write(e.Stdout, string(b))
				case "stderr":
					streamed = true
					b := ev.Bytes()
					errN += int64(len(b))
					p.write(e.Stderr, string(b))
				default:
					p.status(ev)
				}
			})
		})
		if err != nil {
			return err
		}
		if streamed && !resumed {
			restOfStream(e, res, e.Stdout, "stdout", outN, "persistedOutputPath")
			restOfStream(e, res, e.Stderr, "stderr", errN, "persistedStderrPath")
		}
		return finishBash(e, res, resumed || !streamed, tc.session)
	})
}

// restOfStream writes what the command wrote to one stream past the streamed part (the daemon
// streams the first 4 MiB of each), from the file the daemon kept it in, so a caller reading
// the output sees all of it, as the command wrote it. What was not kept is said on stderr.
func restOfStream(e *Env, res *protocol.CallResult, w io.Writer, name string, written int64, pathKey string) {
	total, _ := res.Data[name+"_bytes"].(float64)
	rest := int64(total) - written
	if rest <= 0 {
		return
	}
	path, _ := res.Data[pathKey].(string)
	copied := int64(0)
	if path != "" {
		if f, err := os.Open(path); err == nil {
			if _, err := f.Seek(written, io.SeekStart); err == nil {
				copied, _ = io.Copy(w, io.LimitReader(f, rest))
			}
			f.Close()
		}
	}
	if copied < rest {
		fmt.Fprintf(e.Stderr, "sbctl: %d bytes of the command's %s past the first %d were not kept by sandboxd (limits.persisted_bytes_per_user, or the output's cap) and are not shown\n", rest-copied, name, written+copied)
	}
}

// readCommandFile reads a command the hook saved (sbctl hook --confine) and deletes it, so a
// command runs at most once. The file must be a private regular file of the caller's, named
// without a symlink at its end; with sum, its SHA-256 must match (the hook names it in the
// rewrite), so a file swapped in between runs nothing. A NUL byte is refused: no shell could
// have been given it.
func readCommandFile(path, sum string) (string, error) {
	b, err := readPrivate(path, maxCommandFileBytes)
	if err != nil {
		return "", fmt.Errorf("command file: %w", err)
	}
	if err := os.Remove(path); err != nil {
		return "", fmt.Errorf("command file: %w", err)
	}
	if sum != "" {
		got := sha256.Sum256(b)
		if !strings.EqualFold(hex.EncodeToString(got[:]), sum) {
			return "", fmt.Errorf("command file %s does not hold the command that was decided (SHA-256 differs); nothing ran", path)
		}
	}
	if bytes.IndexByte(b, 0) >= 0 {
		return "", fmt.Errorf("command file %s holds a NUL byte; nothing ran", path)
	}
	return string(b), nil
}

// startedInBackground says res is a command started as a background task (run_in_background),
// not one moved there at its timeout (which reports timed_out, its output so far and 124).
func startedInBackground(res *protocol.CallResult) bool {
	id, _ := res.Data["backgroundTaskId"].(string)
	to, _ := res.Data["timed_out"].(bool)
	return id != "" && !to
}

// finishBash prints what was not streamed and exits with the command's own exit code.
// session is the one --session gave ("" for a short-lived one, whose tasks end with it).
func finishBash(e *Env, res *protocol.CallResult, print bool, session string) error {
	allowed := res.Decision != nil && res.Decision.Behavior == "allow"
	if !e.JSON {
		containment(e, res, session)
	}
	switch {
	case e.JSON:
		if err := PrintJSON(e.Stdout, res); err != nil {
			return err
		}
	case !allowed || res.Error != nil:
		printHuman(e, res)
	case startedInBackground(res):
		// --background: the task id alone on stdout (T=$(sbctl bash --background ...)), how to
		// follow it on stderr.
		id, _ := res.Data["backgroundTaskId"].(string)
		fmt.Fprintln(e.Stdout, Visible(id))
		fmt.Fprintf(e.Stderr, "sbctl: running in the background as task %s: %s\n", Visible(id), taskHint(id, session))
		return nil
	case print:
		// The command's own output, as a shell would show it: no decision line for an allowed
		// call (its exit code says how it went), nothing at all for a silent command, and
		// each stream to its own when the result has them apart.
		stdout, ok1 := res.Data["stdout"].(string)
		stderr, ok2 := res.Data["stderr"].(string)
		if ok1 && ok2 {
			io.WriteString(e.Stdout, stdout)
			io.WriteString(e.Stderr, stderr)
		} else {
			printContent(e, res)
		}
	}
	if res.Decision != nil && res.Decision.Behavior != "allow" {
		return &ExitError{Code: 126}
	}
	if to, _ := res.Data["timed_out"].(bool); to {
		return &ExitError{Code: 124} // as timeout(1) does
	}
	if code, ok := res.Data["exit_code"].(float64); ok {
		if code < 0 {
			return &ExitError{Code: 128 + 9}
		}
		return &ExitError{Code: int(code)}
	}
	if res.IsError {
		return &ExitError{Code: 1}
	}
	return nil
}

// maxBashTimeout is the Bash tool's longest timeout; the daemon clamps a longer one to it.
const maxBashTimeout = 10 * time.Minute

func cmdRead(e *Env, args []string) error {
	fs, tc := toolFlags(e, "read")
	offset := fs.Int("offset", 0, "first line (1-based)")
	limit := fs.Int("limit", 0, "number of lines")
	pages := fs.String("pages", "", "PDF pages, e.g. 1-5")
	args, err := positional(fs, args, 1, "usage: sbctl read [--offset N] [--limit N] FILE")
	if err != nil {
		return err
	}
	in := map[string]any{}
	if err := setPath(in, "file_path", args[0]); err != nil {
		return err
	}
	setIf(in, "offset", *offset, *offset > 0)
	setIf(in, "limit", *limit, *limit > 0)
	setIf(in, "pages", *pages, *pages != "")
	return callMap(e, tc, "Read", in)
}

func cmdWrite(e *Env, args []string) error {
	fs, tc := toolFlags(e, "write")
	content := fs.String("content", "", "file content (default: read stdin)")
	args, err := positional(fs, args, 1, "usage: sbctl write [--content S] FILE   (content from stdin without --content)")
	if err != nil {
		return err
	}
	in := map[string]any{"content": *content}
	if err := setPath(in, "file_path", args[0]); err != nil {
		return err
	}
	if !flagSet(fs, "content") {
		b, err := io.ReadAll(e.Stdin)
		if err != nil {
			return err
		}
		in["content"] = string(b)
	}
	return callMap(e, tc, "Write", in)
}

func cmdEdit(e *Env, args []string) error {
	fs, tc := toolFlags(e, "edit")
	oldS := fs.String("old", "", "text to replace")
	newS := fs.String("new", "", "replacement text")
	all := fs.Bool("replace-all", false, "replace every occurrence")
	args, err := positional(fs, args, 1, "usage: sbctl edit --old S --new S [--replace-all] FILE")
	if err != nil {
		return err
	}
	if !flagSet(fs, "old") || !flagSet(fs, "new") {
		return UsageError("usage: sbctl edit --old S --new S [--replace-all] FILE")
	}
	in := map[string]any{"old_string": *oldS, "new_string": *newS, "replace_all": *all}
	if err := setPath(in, "file_path", args[0]); err != nil {
		return err
	}
	return callMap(e, tc, "Edit", in)
}

func cmdGlob(e *Env, args []string) error {
	fs, tc := toolFlags(e, "glob")
	path := fs.String("path", "", "directory to search (default: the session cwd)")
	args, err := positional(fs, args, 1, "usage: sbctl glob [--path DIR] PATTERN")
	if err != nil {
		return err
	}
	in := map[string]any{"pattern": args[0]}
	if err := setPath(in, "path", *path); err != nil {
		return err
	}
	return callMap(e, tc, "Glob", in)
}

func cmdGrep(e *Env, args []string) error {
	fs, tc := toolFlags(e, "grep")
	path := fs.String("path", "", "file or directory (default: the session cwd)")
	glob := fs.String("glob", "", "only files matching this glob")
	typ := fs.String("type", "", "ripgrep file type, e.g. go")
	mode := fs.String("output-mode", "", "files_with_matches (default), content or count")
	ci := fs.Bool("i", false, "case-insensitive")
	after := fs.Int("A", 0, "lines after each match")
	before := fs.Int("B", 0, "lines before each match")
	ctxLines := fs.Int("C", 0, "lines around each match")
	multiline := fs.Bool("multiline", false, "patterns may span lines")
	headLimit := fs.Int("head-limit", -1, "at most this many entries (0 = all; default 250)")
	offset := fs.Int("offset", 0, "skip this many entries (paging)")
	args, err := positional(fs, args, 1, "usage: sbctl grep [flags] PATTERN")
	if err != nil {
		return err
	}
	in := map[string]any{"pattern": args[0]}
	if err := setPath(in, "path", *path); err != nil {
		return err
	}
	setIf(in, "glob", *glob, *glob != "")
	setIf(in, "type", *typ, *typ != "")
	setIf(in, "output_mode", *mode, *mode != "")
	setIf(in, "-i", true, *ci)
	setIf(in, "-A", *after, *after > 0)
	setIf(in, "-B", *before, *before > 0)
	setIf(in, "-C", *ctxLines, *ctxLines > 0)
	setIf(in, "multiline", true, *multiline)
	setIf(in, "head_limit", *headLimit, *headLimit >= 0)
	setIf(in, "offset", *offset, *offset > 0)
	return callMap(e, tc, "Grep", in)
}

func cmdFetch(e *Env, args []string) error {
	fs, tc := toolFlags(e, "fetch")
	prompt := fs.String("prompt", "", "what to look for in the page (echoed: sandboxd runs no model)")
	args, err := positional(fs, args, 1, "usage: sbctl fetch [--session ID] [--prompt P] URL")
	if err != nil {
		return err
	}
	return callMap(e, tc, "WebFetch", map[string]any{"url": args[0], "prompt": *prompt})
}

func setIf(m map[string]any, k string, v any, ok bool) {
	if ok {
		m[k] = v
	}
}

// flagSet reports whether the flag was given on the command line (even as "").
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func callMap(e *Env, tc *toolCall, tool string, in map[string]any) error {
	raw, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return callTool(e, tc, "calls", tool, raw)
}

// toolFlags is the flag set of a tool convenience, with the session flags.
func toolFlags(e *Env, name string) (*flag.FlagSet, *toolCall) {
	fs := NewFlags(e, name)
	tc := &toolCall{}
	tc.flags(fs)
	tc.waitFlag(fs)
	return fs, tc
}

// positional parses flags anywhere and requires exactly n positional arguments.
func positional(fs *flag.FlagSet, args []string, n int, usage string) ([]string, error) {
	args, err := ParseInterspersed(fs, args)
	if err != nil {
		return nil, err
	}
	if len(args) != n {
		return nil, UsageError(usage)
	}
	return args, nil
}

// setPath sets in[key] to p made absolute against sbctl's cwd, when p is given.
func setPath(in map[string]any, key, p string) error {
	if p == "" {
		return nil
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return err
	}
	in[key] = abs
	return nil
}

// taskHint says how to follow background task id of session.
func taskHint(id, session string) string {
	return fmt.Sprintf("sbctl task output %s --session %s; sbctl task kill %s --session %s", Visible(id), Visible(session), Visible(id), Visible(session))
}

// containment tells, on stderr, what the sandbox stopped: the streamed output alone would not
// say that a fork bomb hit the process limit or that a command was killed for its memory.
func containment(e *Env, res *protocol.CallResult, session string) {
	d := res.Data
	flag := func(k string) bool { b, _ := d[k].(bool); return b }
	var notes []string
	if flag("pids_limited") {
		notes = append(notes, "hit the process limit (pids_limited)")
	}
	if flag("oom_killed") {
		notes = append(notes, "was killed for exceeding its memory limit (oom_killed)")
	}
	if flag("timed_out") {
		if id, _ := d["backgroundTaskId"].(string); id != "" && session != "" {
			notes = append(notes, fmt.Sprintf("ran past its timeout (timed_out) and goes on in the background as task %s: %s", Visible(id), taskHint(id, session)))
		} else if id != "" {
			notes = append(notes, "ran past its timeout (timed_out); it went on as a background task of the short-lived session, which ends with it as sbctl exits (give --session to keep such a command running)")
		} else {
			notes = append(notes, "ran past its timeout (timed_out)")
		}
	}
	if by, _ := d["killed_by"].(string); by != "" {
		notes = append(notes, "was killed: "+by)
	}
	if n, _ := d["background_jobs_killed"].(float64); n > 0 {
		notes = append(notes, fmt.Sprintf("left %d background job(s) running; they were killed when it ended (background_jobs_killed)", int(n)))
	}
	if moved, _ := d["moved_aside"].([]any); len(moved) > 0 {
		var paths []string
		for _, m := range moved {
			if p, ok := m.(string); ok {
				paths = append(paths, Visible(p))
			}
		}
		notes = append(notes, "made protected paths, which sandboxd moved aside to NAME.sandboxd-blocked-CALL (moved_aside; making one takes a person's approval of that very path: use Write or Edit): "+strings.Join(paths, ", "))
	}
	for _, n := range notes {
		fmt.Fprintf(e.Stderr, "sandboxd: the command %s\n", n)
	}
}
