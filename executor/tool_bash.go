package executor

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/classifier"
	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/internal/globwalk"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/session"
	"github.com/sandboxd/sandboxd/worker"
)

const bashSchema = `{
  "type": "object",
  "additionalProperties": false,
  "required": ["command"],
  "properties": {
    "command": {"type": "string", "description": "The command to execute"},
    "timeout": {"type": "number", "description": "Optional timeout in milliseconds (max 600000; larger values are clamped). Default 120000."},
    "description": {"type": "string", "description": "Clear, concise description of what this command does in 5-10 words"},
    "run_in_background": {"type": "boolean", "description": "Run the command in the background; read its output later with BashOutput"},
    "dangerouslyDisableSandbox": {"type": "boolean", "description": "Accepted for compatibility; sandboxd never disables the sandbox"}
  }
}`

const (
	bashDefaultTimeoutMs = 120_000
	bashMaxTimeoutMs     = 600_000
	bashMaxResultChars   = 30_000
	bashFailureChars     = 10_000
)

func bashDef(h *Host) Def {
	return Def{
		Name: "Bash",
		Description: "Executes a bash command (bash --noprofile --norc -c) in the session's working directory, as the session's user inside the sandbox. " +
			"timeout is in ms (default 120000, max 600000); a command still running at its timeout moves to the background. " +
			"run_in_background starts it as a background task: read its output with BashOutput, stop it with KillShell. " +
			"`cd` does not carry over to the next command. Output beyond 30000 characters is saved to a file and previewed.",
		Schema:             bashSchema,
		ReadOnly:           bashReadOnly,
		ConcurrencySafe:    bashReadOnly,
		MaxResultSizeChars: bashMaxResultChars,
		Validate: func(_ context.Context, c *Call) error {
			command := c.Input.String("command")
			if strings.TrimSpace(command) == "" {
				return errcode.Msg(errcode.Validation, "command is empty; pass the shell command to run")
			}
			// Refused before the decision: the policy would judge the whole string while the
			// shell, given a C string, could only ever see what comes before the NUL.
			if strings.IndexByte(command, 0) >= 0 {
				return errcode.Msg(errcode.Validation, "command contains a NUL byte, which no program can be passed; remove it")
			}
			if len(command) > MaxBashCommandBytes {
				return errcode.Msg(errcode.Validation, fmt.Sprintf("command is %d bytes; bash -c takes at most %d (the kernel's limit on one argument): write long content with the Write tool, or put the script in a file and run that", len(command), MaxBashCommandBytes))
			}
			if max := h.AuditInputBytes; max > 0 && !auditKeepsWhole(c.Input, max) {
				return inputTooLarge(c.Input, max)
			}
			return nil
		},
		CheckPermissions: h.bashFacts,
		Run: func(ctx context.Context, c *Call, progress Progress) (*Result, error) {
			return h.runBash(ctx, c, progress)
		},
	}
}

// auditKeepsWhole reports whether the audit log stores in, redacted, whole: a Bash command
// it would cut could hide what it runs past the cut (and its facts, as big, go too).
// Redaction may grow a text (x_pat=y becomes x_pat=[REDACTED:assignment], 3.5 times its
// size at most), so only an input under a quarter of max is taken as fitting unredacted.
func auditKeepsWhole(in Input, max int) bool {
	// Escaped, a string is at most six times its bytes: most inputs fit without encoding them.
	bound := 0
	for k, v := range in {
		bound += len(k) + 8
		if s, ok := v.(string); ok {
			bound += 6 * len(s)
		} else {
			bound += 64
		}
	}
	if bound <= max/4 {
		return true
	}
	js, err := json.Marshal(in)
	if err != nil {
		return false
	}
	if len(js) <= max/4 {
		return true
	}
	red, _ := audit.Redact(js)
	return len(red) <= max
}

// inputTooLarge is the refusal of a Bash input the audit log would not keep whole. It names the
// fields by size, largest first: the command may be small and a description (or another
// field) what is too large, and only the field at fault tells the agent what to shorten.
func inputTooLarge(in Input, max int) error {
	type field struct {
		key  string
		size int
	}
	fields := make([]field, 0, len(in))
	for k, v := range in {
		n := 0
		if s, ok := v.(string); ok {
			n = len(s)
		} else if js, err := json.Marshal(v); err == nil {
			n = len(js)
		}
		fields = append(fields, field{k, n})
	}
	slices.SortFunc(fields, func(a, b field) int { return cmp.Or(b.size-a.size, strings.Compare(a.key, b.key)) })
	var sizes []string
	for _, f := range fields {
		sizes = append(sizes, fmt.Sprintf("%s %d bytes", f.key, f.size))
	}
	fix := "shorten " + fields[0].key
	if fields[0].key == "command" {
		fix = "write long content with the Write tool, or put the script in a file and run that"
	}
	return errcode.Msg(errcode.Validation, fmt.Sprintf("%s is %d bytes (the input: %s), and the audit log keeps a call's input whole only up to %d bytes (audit.max_input_bytes): a call it could not record whole is not run; %s",
		fields[0].key, fields[0].size, strings.Join(sizes, ", "), max, fix))
}

// nothingBelow reports a whole-tree use whose path, as the agent's process finds it, holds
// nothing a rule below it could meet: a file that is no directory (mv a.md b.md, git log -p
// README.md), or, read by a line that makes nothing (so no command before the read made the
// path), one that does not exist (a revision: git diff main, git stash list).
func nothingBelow(r *worker.Resolved, access permission.Access, lineReadOnly bool) bool {
	switch {
	case r == nil:
		return false
	case r.Exists && !r.IsDir:
		return true
	}
	return !r.Exists && access == permission.Read && lineReadOnly
}

// maxBashPathFacts bounds the paths of one command resolved for the policy: each is a round
// trip to the owner's worker. Past it the command is not read-only for the policy.
const maxBashPathFacts = 64

// bashFacts gives the policy the classification and the paths its recognised commands read
// and write, resolved as the owner (symlinks, `..`), so Read and Edit rules and the protected
// and outside-the-session checks apply to Bash as to the file tools. What the classifier
// cannot see the sandbox still confines (hidden and read-only paths).
func (h *Host) bashFacts(ctx context.Context, c *Call) (permission.ToolFacts, error) {
	cl := c.Classification()
	tf := permission.ToolFacts{Bash: cl}
	if cl == nil {
		return tf, nil
	}
	if len(cl.Paths) > maxBashPathFacts {
		return tf, errcode.Msg(errcode.Validation, fmt.Sprintf("the command names more than %d paths; split it", maxBashPathFacts))
	}
	globFacts, globsSeen := h.globsOutside(c, cl.Globs)
	if !globsSeen {
		marked := *cl
		marked.PathsIncomplete, marked.PathsUnbounded = true, true
		cl = &marked
		tf.Bash = cl
	}
	cl = h.rmGlobCritical(c, cl)
	tf.Bash = cl
	if len(cl.Paths) == 0 {
		tf.Paths = globFacts
		return tf, nil
	}
	tf.Paths = make([]permission.PathFact, len(cl.Paths))
	undecidable := make([]error, len(cl.Paths))
	entries := make([]*permission.PathFact, len(cl.Paths))
	planted := make([][]permission.PathFact, len(cl.Paths))
	unseen := make([]bool, len(cl.Paths)) // a landing whose source was too large to look through
	walkBudget := sandbox.WalkBudget{Entries: maxPlantedWalk, Bytes: maxPlantedWalkBytes}
	walked := map[string]bool{}
	names := make([]string, len(cl.Paths))
	for i, pu := range cl.Paths {
		names[i] = pu.Path
		if c.unconfined && pu.Raw != "" {
			names[i] = pu.Raw // the agent's program hands the kernel this, `..` and all
		}
	}
	// A call its caller runs itself is looked up on the host, all its paths in one walk as the
	// owner; otherwise each path is a round trip to the worker, which answers requests
	// concurrently: asked all at once, a command's paths cost about one round trip.
	var onHost []*worker.Resolved
	var onHostErrs []error
	if c.unconfined {
		onHost, onHostErrs = h.resolveAllOnHost(c, names)
	}
	fact := func(i int) {
		pu := cl.Paths[i]
		access := permission.Read
		if pu.Access == "write" {
			access = permission.Write
		}
		var resolved, special string
		var err error
		if c.unconfined {
			if r := onHost[i]; r != nil {
				resolved, special = r.Resolved, r.Special
				if pu.Mention && r.IsDir && r.Exists {
					// A program given a directory may read or write what it holds (tar, zip,
					// a script): a rule that covers each of its entries (Read(~/.ssh/**)) holds
					// it, one that names some of them (Read(./.env)) does not, as for a command
					// that names no directory at all.
					entries[i] = &permission.PathFact{Requested: filepath.Join(pu.Path, "*"), Resolved: filepath.Join(resolved, "*"), Access: access}
				}
			}
			err = onHostErrs[i]
		} else {
			resolved, special, err = h.Resolve(ctx, c.Session, names[i])
			if err == nil && strings.Contains(pu.Raw, "..") {
				// sub/l/../../.config: the kernel takes each .. from where the part before it
				// leads (a link), where the cleaned name does not go.
				phys, ok := physicalPath(strings.TrimRight(pu.Raw, "/"), func(n string) (string, bool) {
					r, _, err := h.Resolve(ctx, c.Session, n)
					return r, err == nil
				})
				if ok && phys != resolved {
					resolved, special, err = h.Resolve(ctx, c.Session, phys)
				}
			}
		}
		tree := pu.Tree
		if pu.TreeOf != "" && c.unconfined {
			// A landing is a whole-tree write when its source may be a dir (not there yet, or
			// not resolvable, counts), and what the source holds is looked through.
			src := h.landingSource(c, pu.TreeOf)
			tree = tree || src == nil || !src.Exists || src.IsDir
			if err == nil {
				var seen bool
				planted[i], seen = h.plantedBy(ctx, c, pu, src, resolved, &walkBudget, walked)
				unseen[i] = !seen
			}
		}
		if err == nil && tree && !(c.unconfined && nothingBelow(onHost[i], access, cl.ReadOnly)) {
			root := resolved
			if pu.Worktree && c.unconfined {
				o := c.Session.Owner
				root = sandbox.WorktreeTop(o.UID, o.GID, o.Groups, resolved)
			}
			err = h.checkTreeUnconfined(c, root, pu.Cmd, access == permission.Write, pu.Unpacked)
		}
		if errcode.Of(err) == errcode.Validation {
			undecidable[i] = err // run by its caller, where it leads depends on the process
			return
		}
		if err != nil {
			// Unresolvable as the owner (a dir it cannot enter): the rules see the name as given,
			// and a name the sandbox hides is still hidden.
			resolved, special = pu.Path, h.hiddenSpecial(c.Session, pu.Path, pu.Path, "")
		}
		tf.Paths[i] = permission.PathFact{Requested: pu.Path, Resolved: resolved, Access: access, Special: special,
			Redirect: pu.Cmd == "redirect", Alternative: pu.Alternative, Tree: tree && c.unconfined && access == permission.Read}
	}
	if c.unconfined {
		for i := range cl.Paths {
			fact(i)
		}
	} else {
		var wg sync.WaitGroup
		for i := 1; i < len(cl.Paths); i++ {
			wg.Go(func() { fact(i) })
		}
		fact(0)
		wg.Wait()
	}
	if err := errors.Join(undecidable...); err != nil {
		return tf, err
	}
	for _, e := range entries {
		if e != nil {
			tf.Paths = append(tf.Paths, *e)
		}
	}
	for _, ps := range planted {
		tf.Paths = append(tf.Paths, ps...)
	}
	tf.Paths = append(tf.Paths, globFacts...)
	if slices.Contains(unseen, true) {
		// What it plants is known only when it runs, as for a path known only then: asked,
		// or denied where nothing asks.
		marked := *cl
		marked.PathsIncomplete, marked.PathsUnbounded = true, true
		cl = &marked
	}
	tf.Bash = linkedCritical(c, cl, tf.Paths, func(name string) (string, bool) {
		if c.unconfined {
			rs, errs := h.resolveAllOnHost(c, []string{name})
			if errs[0] != nil || rs[0] == nil {
				return "", false
			}
			return rs[0].Resolved, true
		}
		r, _, err := h.Resolve(ctx, c.Session, name)
		return r, err == nil
	})
	c.bashWrites, c.bashNamed = c.bashWrites[:0], c.bashNamed[:0]
	for _, p := range tf.Paths {
		if p.Access == permission.Write {
			c.bashWrites = append(c.bashWrites, decidedPath{p.Requested, p.Resolved})
		}
		c.bashNamed = append(c.bashNamed, p.Requested, p.Resolved)
	}
	return tf, nil
}

// Bounds of the walk that expands one line's globs (globsOutside): entries listed, names
// matched, and matches leading out of the session's directories reported.
var globWalkBudget = globwalk.Budget{Entries: 16384, Matches: 4096}

const maxGlobLinks = 16

// globsOutside expands the line's bounded globs (Classification.Globs) as the owner, in the
// daemon (sandbox.GlobOutsideOnHost) rather than through the worker, whose round trip is a
// wake-up on every such call, and gives
// each match that leads out of the session's directories through a symbolic link as a Read
// fact: with up -> .., `cat up/*` and `cat */secret` read what no name of the line shows, and
// the policy's outside-the-session and rule checks must see where. seen is false when the
// walk could not look at everything (its bounds, an error): the line's paths are then unbounded.
func (h *Host) globsOutside(c *Call, globs []string) (facts []permission.PathFact, seen bool) {
	if len(globs) == 0 || c.unconfined {
		// A line its caller runs itself is never read-only with a glob (a path known only
		// when it runs, where no sandbox holds it): the policy asks for it whatever it matches.
		return nil, true
	}
	dirs := c.Session.Dirs()
	for _, to := range c.Session.LeadsTo() {
		dirs = append(dirs, to)
	}
	o := c.Session.Owner
	links, complete, err := sandbox.GlobOutsideOnHost(o.UID, o.GID, o.Tenant(), o.Groups, globs, dirs, globWalkBudget, maxGlobLinks)
	if err != nil {
		return nil, false
	}
	for _, l := range links {
		facts = append(facts, permission.PathFact{Requested: l.Path, Resolved: l.Resolved, Access: permission.Read,
			Special: h.hiddenSpecial(c.Session, l.Path, l.Resolved, "")})
	}
	return facts, complete
}

// rmGlobCritical is cl with the critical-path rm risk when a glob of an rm, rmdir, unlink or
// find of the line reaches the cwd, the home or / through a symbolic link that exists already
// (build/zz -> .., then rm -rf build/*/ or build/*/*): linkedCritical's check, for the names
// the globs become. The globs are expanded as the owner; a walk that could not finish leaves
// the line's paths unknown, as globsOutside does.
func (h *Host) rmGlobCritical(c *Call, cl *classifier.Classification) *classifier.Classification {
	if len(cl.Globs) == 0 || slices.Contains(cl.Risks, classifier.RiskCriticalPathRm) || !removes(cl) {
		return cl
	}
	o := c.Session.Owner
	opts := classifier.Options{Cwd: c.Session.Cwd(), Home: o.Home}
	mark := func(risk bool) *classifier.Classification {
		out := *cl
		if risk {
			out.Risks = append(slices.Clone(cl.Risks), classifier.RiskCriticalPathRm)
			slices.Sort(out.Risks)
		} else {
			out.PathsIncomplete, out.PathsUnbounded = true, true
		}
		return &out
	}
	for _, g := range cl.Globs {
		links, complete, err := sandbox.GlobThroughLinksOnHost(o.UID, o.GID, o.Tenant(), o.Groups, []string{g}, globWalkBudget, globWalkBudget.Matches)
		if err != nil || !complete {
			return mark(false)
		}
		// A trailing slash (or /.) follows the match itself; otherwise rm takes the name, in
		// the dir it lies in, and a last segment that matches everything takes all of that dir.
		followed := strings.HasSuffix(g, "/") || strings.HasSuffix(g, "/.")
		last := filepath.Base(strings.TrimRight(strings.TrimSuffix(g, "/."), "/"))
		for _, l := range links {
			if followed && classifier.CriticalPath(l.Resolved, opts) ||
				classifier.CriticalPath(filepath.Join(l.Dir, filepath.Base(l.Path)), opts) ||
				classifier.CriticalPath(filepath.Join(l.Dir, last), opts) {
				return mark(true)
			}
		}
	}
	return cl
}

// removes reports whether a command of the line is rm, rmdir, unlink or find (its -delete),
// past the wrappers deny rules see through.
func removes(cl *classifier.Classification) bool {
	return slices.ContainsFunc(cl.Subcommands, func(s classifier.Subcommand) bool {
		if len(s.DenyPrefix) == 0 {
			return s.Opaque
		}
		switch filepath.Base(s.DenyPrefix[0]) {
		case "rm", "rmdir", "unlink", "find":
			return true
		}
		return false
	})
}

// linkedCritical is cl with the critical-path rm risk when an rm, rmdir or find of the line
// reaches the cwd, the home or / through a symbolic link that exists already (ln -s . me or
// ln -s .. up, made by an earlier call; then rm -rf me/, me/*, up/proj, me/../proj, find me/
// -delete): the classifier judges names, the resolution shows where they lead. A target whose
// last segment is itself a link, without a trailing slash, is the link, which rm removes
// alone: resolve (a name resolved as the call's paths are) tells them apart. cl itself may be
// shared (the classification cache): a changed one is a copy.
func linkedCritical(c *Call, cl *classifier.Classification, facts []permission.PathFact, resolve func(string) (string, bool)) *classifier.Classification {
	if slices.Contains(cl.Risks, classifier.RiskCriticalPathRm) {
		return cl
	}
	opts := classifier.Options{Cwd: c.Session.Cwd(), Home: c.Session.Owner.Home}
	for i, pu := range cl.Paths {
		if i >= len(facts) || pu.Access != classifier.AccessWrite || pu.Cmd != "rm" && pu.Cmd != "rmdir" && pu.Cmd != "find" {
			continue
		}
		name, resolved := pu.Path, facts[i].Resolved
		if strings.Contains(pu.Raw, "..") {
			// me/../proj: the kernel takes .. from where me leads, the name cleaned does not.
			r, ok := physicalPath(strings.TrimRight(pu.Raw, "/"), resolve)
			if !ok {
				continue
			}
			name, resolved = r, r
		} else if resolved == pu.Path {
			continue
		}
		if !classifier.CriticalPath(resolved, opts) {
			continue
		}
		// Followed: a trailing slash, and find's roots (-H, -L). Otherwise the target is
		// where it resolves unless its last segment is the link.
		followed := strings.HasSuffix(pu.Raw, "/") || strings.HasSuffix(pu.Raw, "/.") || pu.Cmd == "find"
		if !followed {
			parent, ok := resolve(filepath.Dir(name))
			followed = !ok || filepath.Join(parent, filepath.Base(name)) == resolved
		}
		if followed {
			out := *cl
			out.Risks = append(slices.Clone(cl.Risks), classifier.RiskCriticalPathRm)
			slices.Sort(out.Risks)
			return &out
		}
	}
	return cl
}

// physicalPath is the absolute name p as the kernel walks it: each `..` taken from where the
// part before it resolves (me/../x, with me -> ., is ../x), resolve resolving each part.
func physicalPath(p string, resolve func(string) (string, bool)) (string, bool) {
	for range 16 {
		i := strings.Index(p+"/", "/../")
		if i < 0 {
			return resolve(p)
		}
		head, ok := resolve(p[:i])
		if !ok {
			return "", false
		}
		p = filepath.Join(head, p[i+1:]) // the first .. applies to head, lexically now
	}
	return "", false
}

// bashReadOnly asks the classifier: only a command that parsed and is read-only in every
// part is read-only (and so may run beside other calls).
func bashReadOnly(in Input) bool {
	cl := classifier.Classify(in.String("command"), classifier.Options{})
	return cl != nil && cl.ReadOnly
}

// exitOneIsSuccess: grep, find, diff and friends exit 1 to say "no match" or "differs".
func exitOneIsSuccess(c *Call, command string) bool {
	cl := c.Classification()
	if cl == nil {
		cl = classifier.Classify(command, classifier.Options{Cwd: c.Session.Cwd(), WorkDirs: c.Session.Dirs(), Home: c.Session.Owner.Home})
	}
	if cl == nil || len(cl.Subcommands) == 0 {
		return false
	}
	last := cl.Subcommands[len(cl.Subcommands)-1]
	argv := last.Prefix
	if len(argv) == 0 {
		argv = last.DenyPrefix
	}
	if len(argv) == 0 {
		return false
	}
	switch filepath.Base(argv[0]) {
	case "grep", "rg", "egrep", "fgrep", "find", "diff", "test", "[":
		return true
	case "git":
		for _, a := range argv[1:] {
			if strings.HasPrefix(a, "-") {
				continue
			}
			return a == "diff" || a == "grep"
		}
	}
	return false
}

// outputEvent is the event of chunk, read after carry: UTF-8 text as Data, anything else
// base64'd, so the stream carries the command's bytes exactly; a character the chunk splits
// is kept back (the new carry) to go whole with the next.
func outputEvent(kind string, carry, chunk []byte) (Event, []byte) {
	b := chunk
	if len(carry) > 0 {
		b = append(carry, chunk...)
	}
	keep := 0
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				keep = len(b) - i
			}
			break
		}
	}
	next := append([]byte(nil), b[len(b)-keep:]...)
	b = b[:len(b)-keep]
	if len(b) == 0 {
		return Event{Kind: kind}, next
	}
	if utf8.Valid(b) {
		return Event{Kind: kind, Data: string(b)}, next
	}
	return Event{Kind: kind, B64: base64.StdEncoding.EncodeToString(b)}, next
}

// pumpBufs holds the output pumps' read buffers: two 64 KiB buffers a call were most of the
// garbage a short command made.
var pumpBufs = sync.Pool{New: func() any { return new([64 << 10]byte) }}

// closeAll closes the files that are not nil.
func closeAll(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}

func randomCallID(prefix string) string {
	return prefix + strings.TrimPrefix(newTaskID(), "bash_")
}

// startBash starts command confined as the session owner. The process lives on its own
// context, not the call's, so it can outlive the call as a background task.
//
// WARNING: runs the agent's command; everything it may touch comes from h.Spec. Rerun
// TestBashTool and TestBash20GBOutputBoundedMemory as root after changing.
func (h *Host) startBash(c *Call, callID, command string, report bool, progress Progress) (*bashRun, error) {
	if h.sandbox == nil {
		return nil, errcode.Msg(errcode.Unavailable, "Bash is unavailable: the daemon has no sandbox configured; ask the administrator")
	}
	if _, err := h.resultsDir(c.Session); err != nil {
		return nil, err
	}
	// A simple command is exec'd as bash -c would exec it, minus bash's start-up (~0.5 ms).
	// It cannot change the cwd or leave jobs behind, so it reports nothing: neither it nor
	// the bash that runs it when the exec cannot be done that way gets the report pipe. One
	// that ends in 2>&1 runs with its stderr on the stdout pipe, as bash would put it.
	simple, isSimple := classifier.SimpleCommand(command)
	report = report && !isSimple
	script := command
	var cwdR, cwdW *os.File
	var err error
	if report {
		// The shell reports as it exits, with builtins only (no fork): its cwd, then the PIDs
		// of its background jobs still running, which die with the call (exitReport).
		if cwdR, cwdW, err = sandbox.OutputPipe(); err != nil {
			return nil, errcode.New(errcode.SandboxSetup, err)
		}
		script = reportPrologue + command + reportEpilogue
	}
	mode := c.Mode
	if mode == "" {
		mode = c.Session.Mode()
	}
	spec := h.Spec(c.Session, c.RunReadOnly || mode == permission.ModePlan, callID, []string{"/bin/bash", "--noprofile", "--norc", "-c", script})
	// A protected path the command makes that its decision did not see (a visible write to
	// one asks) is moved aside when it ends. One a person approved the command to write is
	// theirs; approving a command is not approving what it writes out of sight (a build's
	// script, a path in a variable), which goes aside as in any call.
	spec.MoveAsideCreated = true
	// Approved by a person who saw the command: the ask rules' paths it names were theirs to
	// see it reach; the others stay held, so what it reaches by no name (a link planted in a
	// tree it walks, a path a script opens) is hidden or read-only as in any call.
	var seen []string
	if c.Approved {
		seen = c.bashNamed
	}
	holdAsks(spec, c.Session, seen)
	if c.Approved {
		for _, w := range c.bashWrites {
			spec.KeepCreated = append(spec.KeepCreated, w.requested, w.resolved)
		}
	}
	if isSimple {
		spec.Direct = simple.Argv
	}
	outR, outW, err := sandbox.OutputPipe()
	if err != nil {
		closeAll(cwdR, cwdW)
		return nil, errcode.New(errcode.SandboxSetup, err)
	}
	spec.Stdout, spec.Stderr = outW, outW
	var errR, errW *os.File
	if !isSimple || !simple.StderrToStdout {
		if errR, errW, err = sandbox.OutputPipe(); err != nil {
			closeAll(cwdR, cwdW, outR, outW)
			return nil, errcode.New(errcode.SandboxSetup, err)
		}
		spec.Stderr = errW
	}
	if cwdW != nil {
		spec.ExtraFiles = []*os.File{cwdW}
	}
	pctx, cancel := context.WithCancel(context.Background())
	proc, err := h.sandbox.Start(pctx, spec)
	closeAll(outW, errW, cwdW)
	if err != nil {
		cancel()
		closeAll(outR, errR, cwdR)
		return nil, err
	}
	run := &bashRun{proc: proc, stdout: newSink(h, c.Session), stderr: newSink(h, c.Session), cancel: cancel, done: make(chan struct{})}
	hardCap := h.tools().BashOutputHardCapBytes
	if hardCap <= 0 {
		hardCap = defaultOutputHardCap
	}
	var total atomic.Int64
	var streaming atomic.Bool
	streaming.Store(progress != nil)
	run.progressOff = func() { streaming.Store(false) }
	pump := func(r *os.File, sink *outputSink, kind string) {
		defer r.Close()
		bp := pumpBufs.Get().(*[64 << 10]byte)
		defer pumpBufs.Put(bp)
		buf := bp[:]
		sent := 0
		var carry []byte // the start of a character the last read split
		for {
			n, err := r.Read(buf)
			if n > 0 {
				sink.Write(buf[:n])
				if total.Add(int64(n)) > hardCap {
					run.killedForOutput.Store(true)
					run.kill("output_limit")
				}
				if streaming.Load() {
					if sent < progressBytes {
						var ev Event
						ev, carry = outputEvent(kind, carry, buf[:min(n, progressBytes-sent)])
						if ev.Data != "" || ev.B64 != "" {
							progress(ev)
						}
					} else if sent-n < progressBytes {
						progress(Event{Kind: "status", Data: fmt.Sprintf("%s continues past %s; the rest is in the result", kind, humanBytes(progressBytes))})
					}
				}
				sent += n
			}
			if err != nil {
				if len(carry) > 0 && streaming.Load() {
					progress(Event{Kind: kind, B64: base64.StdEncoding.EncodeToString(carry)})
				}
				return
			}
		}
	}
	ts := h.tools()
	ts.wg.Add(1)
	go func() {
		defer ts.wg.Done()
		pumps := make(chan struct{}, 3)
		n := 1
		go func() { pump(outR, run.stdout, "stdout"); pumps <- struct{}{} }()
		if errR != nil {
			n++
			go func() { pump(errR, run.stderr, "stderr"); pumps <- struct{}{} }()
		}
		if cwdR != nil {
			n++
			run.exit = make(chan exitReport, 1)
			go func() {
				b, _ := io.ReadAll(io.LimitReader(cwdR, 64<<10))
				cwdR.Close()
				run.exit <- parseExitReport(string(b))
				pumps <- struct{}{}
			}()
		}
		res, err := proc.Wait()
		// The cgroup is gone, so every writer end is closed: the pumps end.
		for i := 0; i < n; i++ {
			<-pumps
		}
		cancel()
		run.mu.Lock()
		run.res, run.err = res, err
		run.mu.Unlock()
		close(run.done)
	}()
	return run, nil
}

func (h *Host) runBash(ctx context.Context, c *Call, progress Progress) (*Result, error) {
	command := c.Input.String("command")
	timeoutMs := c.Input.Int("timeout", bashDefaultTimeoutMs)
	if timeoutMs <= 0 {
		timeoutMs = bashDefaultTimeoutMs
	}
	timeoutMs = min(timeoutMs, bashMaxTimeoutMs)
	var notes []string
	if c.Input.Bool("dangerouslyDisableSandbox") {
		notes = append(notes, "dangerouslyDisableSandbox was ignored: sandboxd always runs commands inside the sandbox.")
	}
	ts := h.tools()
	persist := ts.PersistCwd != nil && ts.PersistCwd(c.Session)
	if c.Input.Bool("run_in_background") {
		id := newTaskID()
		run, err := h.startBash(c, "task-"+strings.TrimPrefix(id, "bash_"), command, false, nil)
		if err != nil {
			return cwdGone(c, err)
		}
		if _, err := h.addTask(c.Session, id, command, run); err != nil {
			run.kill("task_limit")
			<-run.done
			return nil, err
		}
		c.stopIfNarrowed(run)
		res := Text(fmt.Sprintf("Command running in background with ID: %s. Read its output with BashOutput (bash_id %q); stop it with KillShell.", id, id))
		res.Data = map[string]any{"backgroundTaskId": id, "stdout": "", "stderr": "", "interrupted": false}
		res.ExtraMessages = notes
		return res, nil
	}
	run, err := h.startBash(c, randomCallID("bash-"), command, true, progress)
	if err != nil {
		return cwdGone(c, err)
	}
	defer h.trackForeground(c.Session, run)()
	c.stopIfNarrowed(run)
	timer := time.NewTimer(time.Duration(timeoutMs) * time.Millisecond)
	defer timer.Stop()
	interrupted := false
	select {
	case <-run.done:
	case <-ctx.Done():
		run.kill("cancelled")
		<-run.done
		interrupted = true
	case <-timer.C:
		run.progressOff()
		id := newTaskID()
		if _, err := h.addTask(c.Session, id, command, run); err == nil {
			return h.movedToBackground(c, id, run, timeoutMs, notes)
		}
		run.kill("timeout")
		<-run.done
		interrupted = true
	}
	res, err := h.bashResult(c, command, run, interrupted, persist, notes)
	if err == nil && !interrupted && res != nil {
		if code, ok := res.Data["exit_code"].(int); ok && code == 0 {
			h.recordBashView(ctx, c)
		}
	}
	return res, err
}

// viewPrograms show a file's text: a single-file view with them counts as a read (COMPAT:
// cat, head, tail, sed -n, grep and rg), after which the file may be edited as after Read.
var viewPrograms = map[string]bool{"cat": true, "head": true, "tail": true, "sed": true, "grep": true,
	"egrep": true, "fgrep": true, "rg": true}

// recordBashView records, as a read of the session's, the one file a line that only views
// it showed: a whole read for a bare `cat FILE`, a partial one otherwise (Edit, not Write,
// may follow). The file is read again as the owner for its hash: what the agent saw, unless
// it changed in between, which Edit's own check then finds.
func (h *Host) recordBashView(ctx context.Context, c *Call) {
	cl := c.Classification()
	if cl == nil {
		// Run outside the pipeline (no classify step): read the line here.
		s := c.Session
		cl = classifier.Classify(c.Input.String("command"), classifier.Options{WorkDirs: s.Dirs(), Cwd: s.Cwd(), Home: s.Owner.Home})
	}
	if cl.ParseError != nil || len(cl.Subcommands) != 1 || cl.PathsIncomplete || len(cl.Paths) != 1 {
		return
	}
	sub, p := cl.Subcommands[0], cl.Paths[0]
	if len(sub.DenyPrefix) == 0 || sub.Opaque || len(sub.Redirects) > 0 || p.Access != classifier.AccessRead || p.Tree || p.Mention || p.Alternative {
		return
	}
	name := filepath.Base(sub.DenyPrefix[0])
	if !viewPrograms[name] || name == "sed" && !slices.Contains(sub.DenyPrefix, "-n") {
		return
	}
	b, err := h.ReadFileAs(ctx, c.Session, p.Path, maxPreviewFileBytes)
	if err != nil {
		return
	}
	whole := name == "cat" && len(sub.DenyPrefix) == 2
	c.Session.Reads.Record(session.FileRead{Path: p.Path, SHA256: sha256hex(b), MTime: time.Now(), Size: int64(len(b)), Partial: !whole})
}

// cwdGone is the result of a command that did not start because the session's cwd no longer
// leads where it did (sandbox.ErrDirMoved): a dir on its way replaced by a link, or the dir
// removed. Nothing ran; a cwd a `cd` moved is reset to the session's root, as the agents'
// own shells reset one that left the project, and the agent runs the command again from
// there, knowing where. The root itself is the session's: that is an error to fix.
func cwdGone(c *Call, err error) (*Result, error) {
	if !errors.Is(err, sandbox.ErrDirMoved) {
		return nil, err
	}
	cwd, root := c.Session.Cwd(), c.Session.Root
	if cwd == root {
		return nil, errcode.New(errcode.Conflict, fmt.Errorf("the session's directory %s: %w; nothing ran", root, err))
	}
	res := Text(fmt.Sprintf("Shell cwd was reset to %s: %s is gone or no longer leads where it did (%v). Nothing ran; run the command again, from %s.", root, cwd, err, root))
	res.IsError = true
	res.ContextChange = &ContextChange{Cwd: &root}
	return res, nil
}

// movedToBackground is the result of a command that outlived its timeout: what it printed
// so far, and the task id to follow it with.
func (h *Host) movedToBackground(c *Call, id string, run *bashRun, timeoutMs int64, notes []string) (*Result, error) {
	t, err := h.task(c.Session, id)
	if err != nil {
		return nil, err
	}
	out, _ := run.stdout.ReadAt(0, bashMaxResultChars/2)
	errOut, _ := run.stderr.ReadAt(0, bashMaxResultChars/4)
	t.mu.Lock()
	t.offOut, t.offErr = int64(len(out)), int64(len(errOut))
	t.mu.Unlock()
	text := fmt.Sprintf("Command still running after %s; it was moved to the background with ID: %s. Read the rest of its output with BashOutput (bash_id %q) or stop it with KillShell.",
		time.Duration(timeoutMs)*time.Millisecond, id, id)
	if len(out) > 0 || len(errOut) > 0 {
		text += "\nOutput so far:\n" + toValidUTF8(string(out)) + toValidUTF8(string(errOut))
	}
	res := Text(text)
	res.Data = map[string]any{"backgroundTaskId": id, "timed_out": true, "interrupted": false,
		"stdout": toValidUTF8(string(out)), "stderr": toValidUTF8(string(errOut))}
	res.ExtraMessages = notes
	return res, nil
}

func (h *Host) bashResult(c *Call, command string, run *bashRun, interrupted, persist bool, notes []string) (*Result, error) {
	sres, werr, _ := run.result()
	if werr != nil && sres == nil {
		run.stdout.close()
		run.stderr.close()
		return nil, errcode.New(errcode.SandboxSetup, fmt.Errorf("wait for the command: %w", werr))
	}
	var rep exitReport
	if run.exit != nil {
		rep = <-run.exit // sent before run.done was closed
	}
	outputCapped := run.killedForOutput.Load()
	exitOK := sres.ExitCode == 0 || (sres.ExitCode == 1 && exitOneIsSuccess(c, command))
	failed := !exitOK || interrupted
	// Failures show head and tail, no file (COMPAT); a command stopped for its output volume
	// keeps what it printed, saved for the owner.
	headTail := failed && !outputCapped
	limit := bashMaxResultChars
	if headTail {
		limit = bashFailureChars
	}
	outV := run.stdout.finish(limit, headTail)
	errV := run.stderr.finish(limit, headTail)
	res := &Result{IsError: failed}
	var text []string
	if outV.image != nil {
		res.Content = append(res.Content, *outV.image)
	} else if outV.text != "" {
		text = append(text, strings.TrimRight(outV.text, "\n"))
	}
	if errV.text != "" {
		text = append(text, strings.TrimRight(errV.text, "\n"))
	}
	switch {
	case outputCapped:
		text = append(text, fmt.Sprintf("[the command was killed after printing more than %s, the output limit]", humanBytes(outV.total+errV.total)))
	case sres.OOMKilled:
		text = append(text, "[the command was killed: it ran out of memory (the sandbox's memory limit); use less memory or process the data in parts]")
	case sres.PidsLimited:
		text = append(text, "[the command hit the sandbox's process limit; start fewer processes]")
	}
	if rep.jobs > 0 {
		// No process outlives its call: say so, or a server started with & just vanishes.
		jobs := "1 background job was"
		if rep.jobs > 1 {
			jobs = fmt.Sprintf("%d background jobs were", rep.jobs)
		}
		text = append(text, "["+jobs+" still running when the command ended and died with it, with everything it started; use run_in_background to keep a process running]")
	}
	if interrupted {
		if sres.KilledBy == "timeout" {
			text = append(text, "<error>Command timed out and was killed</error>")
		} else {
			text = append(text, "<error>Command was aborted before completion</error>")
		}
	}
	switch {
	case sres.KilledBy == sandbox.KilledRemade:
		text = append(text, "<error>sandboxd killed the command: it made a protected path again after sandboxd had moved it aside (moved_aside names it)</error>")
	case sres.KilledBy == sandbox.KilledCoverLost:
		text = append(text, "<error>sandboxd killed the command: a protected path it kept read-only was replaced outside the sandbox while it ran, which would have made it writable (the daemon's log names it)</error>")
	case sres.KilledBy == sandbox.KilledHiddenLost:
		text = append(text, "<error>sandboxd killed the command: a path it kept hidden was replaced outside the sandbox while it ran, which would have shown it (the daemon's log names it); run the command again</error>")
	case sres.KilledBy == KilledNarrowed:
		text = append(text, "<error>sandboxd stopped the command: its session (or a parent's) was changed to give less (a mode that runs less unasked, a deny or ask rule added) while it ran; run it again, and it is decided anew</error>")
	case sres.KilledBy == killedSessionDeleted:
		text = append(text, "<error>sandboxd stopped the command: its session was deleted while it ran</error>")
	case !exitOK && !interrupted:
		text = append(text, fmt.Sprintf("Exit code %d", sres.ExitCode))
	}
	if len(sres.MovedAside) > 0 {
		names := strings.Join(sres.MovedAside, ", ")
		if sres.MovedAsideMore > 0 {
			names += fmt.Sprintf(" and %d more", sres.MovedAsideMore)
		}
		text = append(text, fmt.Sprintf("[sandboxd moved aside what this command made at protected paths (each is now NAME%sCALL beside it): %s. Protected paths are read-only in every call, and making one takes a person's approval of that very path: write it with Write or Edit, which ask]",
			sandbox.BlockedSuffix, names))
	}
	if len(text) > 0 {
		res.Content = append([]Block{{Type: "text", Text: strings.Join(text, "\n")}}, res.Content...)
	}
	if len(res.Content) == 0 {
		res.Content = []Block{{Type: "text", Text: ""}}
	}
	res.Data = map[string]any{
		"stdout": outV.text, "stderr": errV.text, "exit_code": sres.ExitCode, "interrupted": interrupted,
		"timed_out": sres.KilledBy == "timeout", "peak_memory_bytes": sres.PeakMemoryBytes, "cpu_time_ms": sres.CPUTimeMs,
		"oom_killed": sres.OOMKilled, "pids_limited": sres.PidsLimited, "killed_by": sres.KilledBy,
		"duration_ms": sres.Duration.Milliseconds(), "stdout_bytes": outV.total, "stderr_bytes": errV.total,
	}
	if sres.Signal != "" {
		res.Data["signal"] = sres.Signal
	}
	if outV.image != nil {
		res.Data["isImage"] = true
		res.Data["stdout"] = ""
	}
	if outV.persisted != "" {
		res.Data["persistedOutputPath"] = outV.persisted
		res.Data["persistedOutputSize"] = outV.total
	}
	if errV.persisted != "" {
		res.Data["persistedStderrPath"] = errV.persisted
		res.Data["persistedStderrSize"] = errV.total
	}
	if rep.jobs > 0 {
		res.Data["background_jobs_killed"] = rep.jobs
	}
	if len(sres.MovedAside) > 0 {
		res.Data["moved_aside"] = sres.MovedAside
	}
	if sres.MovedAsideMore > 0 {
		res.Data["moved_aside_more"] = sres.MovedAsideMore
	}
	// The report comes from the command's own shell, so it is only a claim: the new cwd is
	// resolved as the owner and kept only inside the session's directories.
	if cwd := rep.cwd; persist && cwd != "" && cwd != c.Session.Cwd() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resolved, err := h.DirInside(ctx, c.Session, cwd, c.Session.Dirs())
		cancel()
		if err == nil {
			res.ContextChange = &ContextChange{Cwd: &resolved}
		} else {
			notes = append(notes, fmt.Sprintf("Shell cwd was reset to %s (the command left the session's directories)", c.Session.Cwd()))
		}
	}
	res.ExtraMessages = append(res.ExtraMessages, notes...)
	return res, nil
}

// reportPrologue moves the report pipe from fd 3 (where it arrives) to a free fd of bash's
// choosing above 9, so fd 3 is as free for the command as in any shell, sets the EXIT trap that
// writes the report there, and opens a group that reportEpilogue closes with that fd closed: the
// programs the command starts never get it (bash keeps its own copy close-on-exec for the
// trap). The report is only the shell's claim all the same: the cwd in it is resolved as the
// owner and kept only inside the session's directories. The trap writes only while that fd is
// still a pipe: a command that reused the number for a file of its own gets nothing written
// into it. One line, so bash's error messages keep the command's own line numbers.
const reportPrologue = "exec {__sandboxd_report_fd}>&3 3>&-; " +
	"trap '[[ -p /dev/fd/$__sandboxd_report_fd ]] && { builtin pwd -P; builtin jobs -pr; } >&$__sandboxd_report_fd 2>/dev/null' EXIT; { "

// reportEpilogue ends the group: an empty line first, so a command ending in a backslash or a
// comment does not swallow the brace.
const reportEpilogue = "\n\n} {__sandboxd_report_fd}>&-"

// MaxBashCommandBytes is the longest command bash -c can be given with the prologue and
// epilogue around it: the kernel refuses an execve with any one argument of MAX_ARG_STRLEN (32
// pages) or more.
const MaxBashCommandBytes = 32*4096 - 1 - len(reportPrologue) - len(reportEpilogue)

// exitReport is what the shell said as it exited: its cwd and how many of its background jobs
// were still running. A command that replaced the shell (exec) or its EXIT trap says nothing.
type exitReport struct {
	cwd  string
	jobs int
}

// parseExitReport reads the trap's output: the cwd on the first line, then one PID per line.
func parseExitReport(s string) exitReport {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	rep := exitReport{cwd: strings.TrimSpace(lines[0])}
	for _, l := range lines[1:] {
		if _, err := strconv.Atoi(strings.TrimSpace(l)); err == nil {
			rep.jobs++
		}
	}
	return rep
}

// insideDir reports whether the clean path p is d or below it.
func insideDir(p, d string) bool {
	return p == d || strings.HasPrefix(p, strings.TrimSuffix(d, "/")+"/")
}

func runeLen(b []byte) int { return utf8.RuneCount(b) }

// toValidUTF8 replaces invalid bytes (binary output, a rune cut at a chunk edge).
func toValidUTF8(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
