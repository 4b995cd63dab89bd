package executor

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/worker"
)

const grepSchema = `{
  "type": "object",
  "additionalProperties": false,
  "required": ["pattern"],
  "properties": {
    "pattern": {"type": "string", "description": "The regular expression pattern to search for in file contents (ripgrep syntax)"},
    "path": {"type": "string", "description": "File or directory to search in. Defaults to the current working directory."},
    "glob": {"type": "string", "description": "Glob pattern to filter files (e.g. \"*.js\", \"*.{ts,tsx}\")"},
    "type": {"type": "string", "description": "File type to search (rg --type), e.g. js, py, rust, go"},
    "output_mode": {"type": "string", "enum": ["content", "files_with_matches", "count"], "description": "content shows matching lines, files_with_matches shows file paths (default), count shows match counts"},
    "-i": {"type": "boolean", "description": "Case insensitive search"},
    "-n": {"type": "boolean", "description": "Show line numbers in output (content mode; default true)"},
    "-A": {"type": "integer", "minimum": 0, "description": "Lines to show after each match (content mode)"},
    "-B": {"type": "integer", "minimum": 0, "description": "Lines to show before each match (content mode)"},
    "-C": {"type": "integer", "minimum": 0, "description": "Lines to show before and after each match (content mode)"},
    "context": {"type": "integer", "minimum": 0, "description": "Alias of -C"},
    "-o": {"type": "boolean", "description": "Print only the matched parts (content mode)"},
    "multiline": {"type": "boolean", "description": "Let . match newlines and patterns span lines (rg -U --multiline-dotall). Default false."},
    "head_limit": {"type": "integer", "minimum": 0, "description": "Limit output to the first N lines/entries (default 250; 0 = no limit)"},
    "offset": {"type": "integer", "minimum": 0, "description": "Skip the first N lines/entries before applying head_limit (default 0)"}
  }
}`

const (
	grepDefaultHeadLimit = 250
	grepMaxResultChars   = 100_000
)

func grepDef(h *Host) Def {
	return Def{
		Name: "Grep",
		Description: "A search tool built on ripgrep. Supports full regex syntax; filter files with glob or type. output_mode: files_with_matches " +
			"(default, newest first), content (matching lines; -A/-B/-C context, -n line numbers), count. Results are paged: head_limit " +
			"(default 250, 0 = all) and offset. Honours .gitignore; VCS directories are never searched.",
		Schema:             grepSchema,
		ReadOnly:           always,
		ConcurrencySafe:    always,
		Validate:           cwdRelative("path"),
		Backfill:           backfillPath("path", true),
		CheckPermissions:   grepFacts(h),
		MaxResultSizeChars: grepMaxResultChars,
		Run: func(ctx context.Context, c *Call, _ Progress) (*Result, error) {
			return h.runGrep(ctx, c)
		},
	}
}

// searchDecision is what Grep's CheckPermissions resolved as the owner, which the policy then
// decided on: Run searches that file or directory and no other.
type searchDecision struct {
	requested string
	resolved  worker.Resolved
}

// WARNING: the policy decides on these facts and Grep searches only what they name; rerun
// TestGrepSearchesOnlyTheDecidedPath (worker) as root after changing.
//
// grepFacts resolves path as the owner, as pathFacts does, and keeps the resolution (with the
// file's device and inode) for Run: rg is given that file or directory itself, so a symlink
// repointed after the decision cannot send the search to a denied file.
func grepFacts(h *Host) func(ctx context.Context, c *Call) (permission.ToolFacts, error) {
	return func(ctx context.Context, c *Call) (permission.ToolFacts, error) {
		p := c.Input.String("path")
		if p == "" {
			return permission.ToolFacts{}, nil
		}
		p = expandPath(c, p)
		r, err := h.resolveAsOwner(ctx, c, p, func(w *worker.Client) (*worker.Resolved, error) { return w.ResolveInfo(ctx, p) })
		if err != nil {
			return permission.ToolFacts{}, err
		}
		if r.IsDir {
			if err := h.checkTreeUnconfined(c, r.Resolved, "Grep", false, false); err != nil {
				return permission.ToolFacts{}, err
			}
		}
		c.searched = &searchDecision{requested: p, resolved: *r}
		facts := []permission.PathFact{{Requested: p, Resolved: r.Resolved, Access: permission.Read, Special: r.Special}}
		raw, err := h.rawFact(c, "path", permission.Read)
		if err != nil {
			return permission.ToolFacts{}, err
		}
		if raw != nil {
			facts = append(facts, *raw)
		}
		return permission.ToolFacts{Paths: facts}, nil
	}
}

// GrepArgs builds the rg command line of a Grep input (without "rg"); path is absolute.
func GrepArgs(in Input, path string) (args []string, mode string) {
	mode = in.String("output_mode")
	if mode == "" {
		mode = "files_with_matches"
	}
	args = []string{"--hidden", "--no-heading", "--color=never", "--max-columns=500"}
	for _, d := range worker.VCSDirs {
		args = append(args, "--glob", "!"+d)
	}
	if in.Bool("multiline") {
		args = append(args, "-U", "--multiline-dotall")
	}
	if in.Bool("-i") {
		args = append(args, "-i")
	}
	switch mode {
	case "files_with_matches":
		args = append(args, "-l")
	case "count":
		args = append(args, "-c")
	case "content":
		if v, ok := in["-n"].(bool); !ok || v {
			args = append(args, "-n")
		}
		if in.Bool("-o") {
			args = append(args, "-o")
		}
		if n := in.Int("context", -1); n >= 0 {
			args = append(args, "-C", strconv.FormatInt(n, 10))
		} else if n := in.Int("-C", -1); n >= 0 {
			args = append(args, "-C", strconv.FormatInt(n, 10))
		}
		if n := in.Int("-A", -1); n >= 0 {
			args = append(args, "-A", strconv.FormatInt(n, 10))
		}
		if n := in.Int("-B", -1); n >= 0 {
			args = append(args, "-B", strconv.FormatInt(n, 10))
		}
	}
	// Values joined to their options: one that starts with "-" is still the value, never an
	// option of rg's (--pre runs a program on every file).
	if t := in.String("type"); t != "" {
		args = append(args, "--type="+t)
	}
	for _, g := range splitGlobs(in.String("glob")) {
		args = append(args, "--glob="+g)
	}
	// -e keeps a pattern that starts with "-" a pattern.
	args = append(args, "-e", in.String("pattern"), "--", path)
	return args, mode
}

// splitGlobs splits "*.ts *.tsx" and "*.ts,*.tsx" into globs, keeping braces whole.
func splitGlobs(s string) []string {
	var out []string
	for _, f := range strings.Fields(s) {
		if strings.Contains(f, "{") {
			out = append(out, f)
			continue
		}
		for _, g := range strings.Split(f, ",") {
			if g != "" {
				out = append(out, g)
			}
		}
	}
	return out
}

func (h *Host) runGrep(ctx context.Context, c *Call) (*Result, error) {
	path := c.Input.String("path")
	if path == "" {
		path = c.Session.Cwd()
	}
	path = expandPath(c, path)
	args, mode := GrepArgs(c.Input, path)
	limit := int(c.Input.Int("head_limit", grepDefaultHeadLimit))
	offset := int(c.Input.Int("offset", 0))
	deny, err := readHeldPatterns(c, "Grep")
	if err != nil {
		return nil, err
	}
	// What the user's other searches hold of the daemon's memory now leaves this one less.
	uid := c.Session.Owner.Tenant() // a user's subordinate uids share its room
	room := h.grepHeld.take(uid, grepHeldBounds)
	defer func() { h.grepHeld.give(uid, room) }()
	ga := worker.GrepArgs{Args: args, Dir: c.Session.Cwd(), Offset: offset, Limit: limit,
		SortByMTime: mode == "files_with_matches", Deny: deny, Path: path, MaxBytes: room}
	// Outside the pipeline (no decision) the worker searches path by name.
	if d := c.searched; d != nil {
		if d.requested != path {
			return nil, errcode.Msg(errcode.Internal, fmt.Sprintf("refused to search %s: the permission decision was made on %s", path, d.requested))
		}
		ga.Decided = &d.resolved
	}
	var r *worker.GrepReply
	var payload []byte
	err = h.withWorker(ctx, c.Session, func(w *worker.Client) error {
		var err error
		r, payload, err = w.Grep(ctx, ga)
		return err
	})
	if err != nil {
		return nil, err
	}
	if r.ExitCode < 0 {
		// rg did not end by itself: what it printed is no answer, and nothing printed is not
		// "no matches".
		return nil, grepCutShort(r)
	}
	if r.ExitCode >= 2 && r.Total == 0 && !onlyUnreadableBelow(r.Stderr, path) {
		msg := r.Stderr
		if msg == "" {
			msg = fmt.Sprintf("rg exited with status %d", r.ExitCode)
		}
		if strings.Contains(msg, "(os error 13)") {
			// EACCES on the path: nothing about the pattern to fix.
			return nil, errcode.Msg(errcode.ErrnoEACCES, "rg: "+strings.TrimSpace(msg))
		}
		return nil, errcode.Msg(errcode.ToolFailed, "rg: "+msg+"\nFix the pattern (ripgrep regex syntax; escape literal braces and parentheses) or the path, then search again.")
	}
	// rg's output may be 64 MiB, held in the daemon, and a user may run several searches at
	// once: it is copied once, into the result's text, and its lines are counted or walked
	// in place; only the file names of files_with_matches become strings of their own.
	out := bytes.TrimSuffix(payload, []byte("\n"))
	payload = nil
	numLines := 0
	if len(out) > 0 {
		numLines = bytes.Count(out, []byte("\n")) + 1
	}
	data := map[string]any{"mode": mode}
	var b strings.Builder
	switch {
	case numLines == 0 && offset > 0 && r.Total > 0:
		fmt.Fprintf(&b, "No entries at this offset (offset %d; there are %d in total). Use a smaller offset.", offset, r.Total)
	case numLines == 0:
		if mode == "files_with_matches" {
			b.WriteString("No files found")
		} else {
			b.WriteString("No matches found")
		}
	case mode == "files_with_matches":
		fmt.Fprintf(&b, "Found %d file", numLines)
		if numLines != 1 {
			b.WriteString("s")
		}
		b.Grow(1 + len(out) + 256)
		b.WriteString("\n")
		start := b.Len()
		b.Write(out)
		// The names are slices of the text: built once, never changed after.
		data["filenames"] = strings.Split(b.String()[start:], "\n")
	case mode == "count":
		matches, files := 0, 0
		for l := range bytes.Lines(out) {
			l = bytes.TrimSuffix(l, []byte("\n"))
			i := bytes.LastIndexByte(l, ':')
			if n, err := strconv.Atoi(string(l[i+1:])); err == nil {
				matches += n
				files++
			}
		}
		b.Grow(len(out) + 256)
		b.Write(out)
		fmt.Fprintf(&b, "\n\nFound %d total occurrence", matches)
		if matches != 1 {
			b.WriteString("s")
		}
		fmt.Fprintf(&b, " across %d file", files)
		if files != 1 {
			b.WriteString("s")
		}
		b.WriteString(".")
		data["numMatches"], data["numFiles"] = matches, files
	default:
		b.Grow(len(out) + 256)
		b.Write(out)
	}
	out = nil
	data["numLines"] = numLines
	if r.More {
		fmt.Fprintf(&b, "\n\n[Showing results with pagination = limit: %d, offset: %d. Pass offset=%d for the next page.]", limit, offset, offset+numLines)
		data["applied_limit"] = limit
		data["applied_offset"] = offset
	} else if offset > 0 {
		data["applied_offset"] = offset
	}
	res := Text(b.String())
	// Beside the result, not in it: a result this large is persisted, and the agent sees its
	// first lines only.
	switch {
	case r.CutByBytes && room < maxGrepOutput:
		res.ExtraMessages = append(res.ExtraMessages, fmt.Sprintf("rg's output was cut at %s: your other searches running now hold the rest of what the daemon keeps for one user's; search again when they end, or narrow the pattern, path, glob or type", humanBytes(room)))
	case r.CutByBytes:
		res.ExtraMessages = append(res.ExtraMessages, fmt.Sprintf("rg's output was cut at %s; narrow the pattern, path, glob or type", humanBytes(room)))
	}
	if r.ExitCode >= 2 && r.Stderr != "" {
		res.ExtraMessages = append(res.ExtraMessages, "rg reported errors for some files: "+firstLines(r.Stderr, 5))
	}
	res.Data = data
	return res, nil
}

// grepCutShort is the error of a search whose rg was ended by a signal it was not sent by the
// worker (the worker stops rg itself only past a page or its byte bound, and reports no signal
// then), saying why when that is known.
func grepCutShort(r *worker.GrepReply) error {
	const redo = "; nothing can be said of what it did not reach, so this is no answer either way"
	switch {
	case r.OOMKilled:
		return errcode.Msg(errcode.OOM, "Grep was cut short: rg was killed for running out of memory (the sandbox's memory limit)"+redo+". Narrow the path, glob or type, or search fewer or smaller files (very long lines take memory whole)")
	case r.Signal != "":
		return errcode.Msg(errcode.ToolFailed, fmt.Sprintf("Grep was cut short: rg was killed by %s%s (with SIGKILL, most often the out-of-memory killer at the sandbox's memory limit). Search again, narrower if it recurs", r.Signal, redo))
	}
	return errcode.Msg(errcode.ToolFailed, "Grep was cut short: rg ended without an exit status"+redo+". Search again")
}

// onlyUnreadableBelow reports whether rg's stderr holds only "Permission denied" for paths
// below the searched path: the search ran, and found nothing where it could read (a dir of
// another user's, a dir the sandbox hides); the result says which it could not read.
func onlyUnreadableBelow(stderr, path string) bool {
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	for _, l := range lines {
		// [rg: ]PATH: Permission denied (os error 13), or from its walker
		// [rg: ]PATH: IO error for operation on PATH: Permission denied (os error 13)
		p, _, found := strings.Cut(strings.TrimPrefix(l, "rg: "), ": ")
		if !found || !strings.HasSuffix(l, ": Permission denied (os error 13)") ||
			!strings.HasPrefix(p, strings.TrimSuffix(path, "/")+"/") {
			return false
		}
	}
	return stderr != ""
}

// WARNING: Glob and Grep list and print nothing under what these patterns name (issue 16,
// reproduction 6); rerun TestGrepHonoursReadDenies and TestGlobHonoursReadDenies as root
// after changing.
//
// readDenyPatterns are the absolute patterns, exactly as the policy matches them, of the
// session's deny rules on reading with tool: Read denies (COMPAT: they cover Glob and Grep)
// and tool's own. The policy checks the searched path only; what a search meets below it is
// filtered by the worker with these. A deny whose anchor is unknown is already widened to any
// depth by the RuleSet. Rule data of an unexpected shape is an error: the call fails closed.
func readDenyPatterns(c *Call, tool string) ([]string, error) {
	return readPatterns(c, "deny", tool)
}

// readHeldPatterns are what a Glob or Grep call run by the daemon lists and prints nothing
// under: the Read deny rules' patterns (readDenyPatterns), and unless a person approved the
// call, the ask rules' too: a search of the project walks into what an ask rule names, which
// the policy, seeing only where it starts, did not ask about (as holdAsks for Bash), and when
// auto mode's stages allowed the call, the credentials stage one refuses by name. Each is held where a link at its start
// led when the call was decided too (heldThroughLinks).
func readHeldPatterns(c *Call, tool string) ([]string, error) {
	deny, err := readDenyPatterns(c, tool)
	if err != nil || c.Approved {
		return deny, err
	}
	ask, err := readPatterns(c, "ask", tool)
	held := append(deny, ask...)
	if c.autoAllowed {
		held = append(held, credentialPatterns...)
	}
	return held, err
}

// readPatterns are the absolute patterns of the session's behavior ("deny", "ask") rules on
// reading with tool, as readDenyPatterns.
func readPatterns(c *Call, behavior, tool string) ([]string, error) {
	return pathPatterns(c, behavior, "read", tool)
}

// pathPatterns are the absolute patterns of the session's behavior rules in the path rule
// buckets named ("read", "write", a tool's).
func pathPatterns(c *Call, behavior string, buckets ...string) ([]string, error) {
	return pathPatternsOf(c, behavior, nil, buckets...)
}

// pathPatternsOf is pathPatterns of the rules keep accepts (nil: all), each also where a link at
// its start led when the call was decided (heldThroughLinks): every check of the call meets
// the rules there too.
func pathPatternsOf(c *Call, behavior string, keep func(rule map[string]any) bool, buckets ...string) ([]string, error) {
	rs := c.Session.RuleSet()
	if rs == nil {
		return nil, nil
	}
	bad := func(what string) error {
		return errcode.New(errcode.Internal, fmt.Errorf("read the session's %s rules (%s): %s", behavior, strings.Join(buckets, ", "), what))
	}
	rules, ok := rs.Data()[behavior].(map[string]any)
	if !ok {
		return nil, bad("no " + behavior + " rules in the rule data")
	}
	paths, ok := rules["paths"].(map[string][]any)
	if !ok {
		return nil, bad("no path rules in the " + behavior + " rules")
	}
	var out []string
	seen := map[string]bool{}
	for _, bucket := range buckets {
		for _, it := range paths[bucket] {
			m, _ := it.(map[string]any)
			p, _ := m["pattern"].(string)
			if p == "" {
				return nil, bad("a path rule without a pattern")
			}
			if !seen[p] && (keep == nil || keep(m)) {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	return heldThroughLinks(out, c.ruleLinks), nil
}

func firstLines(s string, n int) string {
	ls := strings.SplitN(s, "\n", n+1)
	if len(ls) > n {
		ls = append(ls[:n], "…")
	}
	return strings.Join(ls, "\n")
}

const (
	// maxGrepOutput is what is read of one search's output: the bound of a persisted result.
	maxGrepOutput = 64 << 20
	// maxGrepHeldPerUser is what one user's searches hold of rg's output at once, in the
	// daemon's memory until each result is built: two whole ones. A user runs up to
	// limits.calls_per_user calls at once, and sixteen searches of 64 MiB each, copied once
	// more into their results, held two GiB.
	maxGrepHeldPerUser = 2 * maxGrepOutput
	// minGrepOutput is what a search may read however much the user's others hold.
	minGrepOutput = 1 << 20
)

var grepHeldBounds = heldBounds{perCall: maxGrepOutput, perUser: maxGrepHeldPerUser, least: minGrepOutput}
