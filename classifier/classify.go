package classifier

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/sandboxd/sandboxd/internal/shnest"
	"mvdan.cc/sh/v3/syntax"
)

// Options carries the session facts that some signals depend on.
type Options struct {
	// WorkDirs are the session's writable directories (absolute). A write
	// outside them (and outside Cwd) raises the outside_workspace_write risk.
	WorkDirs []string
	// Cwd is the session's working directory (absolute); relative paths are
	// resolved against it, and rm on it or its ancestors is critical_path_rm.
	Cwd string
	// Home is the caller's home directory, for ~ and critical_path_rm.
	Home string
	// Shell is the shell that runs the command: "" or ShellBash, ShellZsh or ShellSh (see
	// dialect.go). Any other value leaves the command unclassified.
	Shell string
	// Unconfined says the command runs outside any sandbox (an agent's own shell, through its
	// hook): no mount or landlock holds a path rule there, so the words of a command no table
	// describes count as paths it may read and write (PathUse.Mention).
	Unconfined bool
	// MentionReads: the session has a Read deny or ask rule that only the decision holds
	// outside its directories (a wildcard starting at / or at a dir holding a session dir),
	// where no mount hides what a program opens. The literal words of a command no table
	// describes, and the paths inside any command's words, then count as paths it may read
	// (PathUse.Mention, PathUse.Alternative): the rule meets `awk 1 ~/other/id.key`.
	MentionReads bool
	// GitElsewhere: git run at Cwd may take a repository other than the session's own, one
	// between the session's dir and Cwd that no plan protected when it was made: git there
	// is read as after a cd (cd_git).
	GitElsewhere bool
	// GitPartialClone: git run at Cwd works in a partial clone, where reading an object it
	// lacks fetches it from the promisor remote (an id the line chooses, sent out): no git
	// command is read-only there (git_partial_clone).
	GitPartialClone bool

	// braces is the line's brace expansions, made by Classify: a value of Options is one
	// line's, shared by its nested scripts.
	braces *braceMemo
	// inTails: the line is one tail of an outer command's words (tailScript), or a word of
	// one read as shell (shellWord); argvTail: the former, words a program may exec.
	inTails, argvTail bool
}

const (
	// MaxReadOnlyLen is the longest command that may classify as read-only;
	// COMPAT makes longer commands prompt.
	MaxReadOnlyLen = 10000
	// maxParseLen bounds the text parsed: beyond it the text is not parsed at
	// all, so a huge input costs nothing, and it is treated as one that did not
	// parse. It is the kernel's limit on one execve argument (MAX_ARG_STRLEN), so
	// every command bash -c can be given is parsed; maxStmtBytes bounds the work
	// past the parser.
	maxParseLen = 32 * 4096
	// maxWrapDepth bounds wrapper unwrapping (`nice nice nice ...`).
	maxWrapDepth = 16
	// maxStmtBytes bounds the work done on one input past the parser: the sum, over every
	// statement found (in substitutions and bash -c scripts too), of the length of its text.
	// A flat command sums to about its own length; nesting makes the sum grow as the square of
	// the depth ($( … ) 20 000 deep fits in 64 KiB and sums to 600 MB), and the walker, and
	// then the policy matching each command's words, cost in proportion to it. Past it the
	// command is not classified, as if it had not parsed.
	maxStmtBytes = 1 << 20
)

// parserPool reuses parsers: a syntax.Parser is not safe for concurrent use
// but is costly enough to build that a fresh one per call shows in profiles.
var parserPool = sync.Pool{New: func() any {
	return syntax.NewParser(syntax.Variant(syntax.LangBash), syntax.KeepComments(false))
}}

// Classify parses command as Bash and classifies it. It never runs or expands
// the text, is deterministic, safe for concurrent use and cheap enough to
// call on every Bash tool call (it backs the tool's IsReadOnly and
// IsConcurrencySafe). It never panics: any unexpected failure yields a
// fail-closed Classification with reason "internal_error".
//
// The policy engine should use ReadOnly for mode defaults, Subcommands[i].Prefix
// with MatchRule for allow rules (every subcommand must match; a nil Prefix
// matches nothing), Subcommands[i].DenyPrefix with MatchRule for deny and ask
// rules (any subcommand matching denies or asks), and Risks in auto mode.
func Classify(command string, opts Options) (c *Classification) {
	defer func() {
		if r := recover(); r != nil {
			c = failed("internal_error", "not classified: the classifier failed on this command")
		}
	}()
	return classify(command, opts)
}

// failed builds a fail-closed classification with no subcommands. It always carries a
// ParseError: a command that was not classified must be treated as one that did not parse
// (never read-only, no allow rule, asked for or denied whatever the mode), never as one
// that parsed into no commands, which no deny rule could match.
func failed(reason, msg string) *Classification {
	return &Classification{Reason: reason, ParseError: &msg, Subcommands: []Subcommand{}, Risks: []string{}}
}

func classify(command string, opts Options) *Classification {
	opts.braces = &braceMemo{words: map[string][]DenyWords{}}
	if len(command) > maxParseLen {
		return failed("too_long", fmt.Sprintf("not parsed: the command is %d bytes, over the %d the classifier reads; put a long script in a file and run that", len(command), maxParseLen))
	}
	if r := badChar(command); r != "" {
		// Control characters can hide text from a human approver and make
		// our view and bash's view of the text differ; never read-only,
		// but still parsed below when possible so deny rules can match.
		c := parse(command, opts)
		c.ReadOnly = false
		c.Reason = r
		// Nor is it the command an allow rule names: the parser splits words at a \r that
		// bash keeps in them (make\rbuild is one program to bash, `make build` to a rule).
		for i := range c.Subcommands {
			c.Subcommands[i].Prefix = nil
			c.Subcommands[i].ReadOnly, c.Subcommands[i].RedirectOnly = false, false
		}
		if c.LineReason == "" {
			c.LineReason = r
		}
		return c
	}
	c := parse(command, opts)
	if len(command) > MaxReadOnlyLen {
		if c.ReadOnly {
			c.ReadOnly, c.Reason = false, "too_long"
		}
		if c.LineReason == "" {
			c.LineReason = "too_long"
		}
	}
	return c
}

// badChar reports the reason if s holds a character that is not allowed in a
// read-only command: NUL and other C0/C1 controls (tab and newline are shell
// syntax), DEL, invalid UTF-8, and invisible format characters (bidi
// overrides, zero-width spaces) that make displayed text lie.
func badChar(s string) string {
	for i := 0; i < len(s); {
		// Skip printable ASCII, by far the most common, 8 bytes at a time
		// while none of them is below 0x20 or above 0x7e.
		for i+8 <= len(s) && !hasNonPrintable(load64(s[i:i+8])) {
			i += 8
		}
		for i < len(s) && s[i]-0x20 < 0x7f-0x20 {
			i++
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if c == 0 {
				return "nul_byte"
			}
			if (c < 0x20 && c != '\t' && c != '\n') || c == 0x7f {
				return "control_character"
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return "invalid_utf8"
		}
		if unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) {
			return "control_character"
		}
		i += size
	}
	return ""
}

// hasNonPrintable reports whether any byte of x is below 0x20 or above 0x7e
// (the classic "has less than" and "has more than" word tricks, exact
// for these bounds).
func hasNonPrintable(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	less := (x - ones*0x20) &^ x & highs
	more := ((x + ones*(0x7f-0x7e)) | x) & highs
	return less|more != 0
}

// load64 reads 8 bytes little-endian (the compiler makes it one load).
func load64(b string) uint64 {
	_ = b[7]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// parse runs the parser and the walker and classifies the result.
func parse(command string, opts Options) *Classification {
	left := maxStmtBytes
	c := parseDepth(command, opts, 0, &left)
	if left < 0 {
		// A nested script ran the budget out: it was left opaque, but the line is refused
		// whole, so no part of it is judged on less than all of it.
		return tooComplex()
	}
	if len(c.Subcommands) > MaxSubcommands {
		// Each simple command is matched against every Bash rule: 65 000 of them (`a;a;…`)
		// against a thousand rules took the policy 9 s of the daemon's CPU for one call.
		return failed("too_complex", fmt.Sprintf("not classified: over %d simple commands in one line; put a long script in a file and run that", MaxSubcommands))
	}
	return c
}

// MaxSubcommands bounds the simple commands of one line, nested scripts included: a command
// an agent writes has a few, a generated script a few dozen.
const MaxSubcommands = 512

func tooComplex() *Classification {
	return failed("too_complex", fmt.Sprintf("not classified: its commands nest so deep that their texts add up to over %d bytes", maxStmtBytes))
}

// afterLinks are the commands that may run after the line's first command that may make a
// symbolic link (linkAt; -1 for none known): those after it in a line that runs in order, all
// of them where a loop, a function or a trap may run one again later (rm -rf dist && cp -r
// public dist removes before it copies).
func (w *walker) afterLinks(linkAt int) []*sub {
	if linkAt < 0 || w.loops || w.funcs != nil || slices.ContainsFunc(w.subs, func(sb *sub) bool {
		return len(sb.args) > 0 && sb.args[0].static && sb.args[0].val == "trap"
	}) {
		return w.subs
	}
	return w.subs[linkAt:]
}

// runsWrittenFile marks opaque each command whose program is a file the line itself writes
// (printf 'rm x' > p; chmod +x p; ./p, cp /bin/bash b; ./b -c …, ln -s /usr/bin/git g; ./g
// push, and a nested script's, git -c core.fsmonitor=./q): what it runs is the line's own
// data, under a name no rule knows. A write that changes no content (chmod, touch) does not
// count.
func runsWrittenFile(c *Classification, opts Options) {
	var written, made []string // made: written by what a command is known to do, not a mention
	setsPath := false
	for _, p := range c.Paths {
		if p.Access == AccessWrite && !metadataWriters[p.Cmd] && !strings.HasPrefix(p.Path, "/dev/") {
			written = append(written, p.Path)
			if !p.Mention {
				made = append(made, p.Path)
			}
		}
	}
	if len(written) == 0 {
		return
	}
	for _, s := range c.Subcommands {
		setsPath = setsPath || strings.Contains(s.Text, "PATH=")
	}
	for i := range c.Subcommands {
		s := &c.Subcommands[i]
		written := written
		if s.Tail {
			// Only may be a command: through the hook its program's own words count as
			// written (mentions), and go test ./... would run ./... as a file it wrote.
			written = made
		}
		argv := s.Prefix
		if len(argv) == 0 {
			argv = s.DenyPrefix // PATH=.:$PATH m: no allow prefix after an unsafe assignment
		}
		if argv = stripWrappers(argv, true); len(argv) == 0 {
			continue
		}
		prog := argv[0]
		// By its name too, as a cd or ~+ may lead there (cd /tmp; ./m), or a PATH the line
		// sets (PATH=.:$PATH m).
		if (strings.Contains(prog, "/") || setsPath) && slices.ContainsFunc(written, func(w string) bool { return path.Base(w) == path.Base(prog) }) {
			s.Opaque = true
			continue
		}
		if !strings.Contains(prog, "/") {
			continue
		}
		if !path.IsAbs(prog) {
			if opts.Cwd == "" {
				s.Opaque = true
				continue
			}
			prog = path.Join(opts.Cwd, prog)
		}
		prog = path.Clean(prog)
		if slices.ContainsFunc(written, func(w string) bool { return prog == w || strings.HasPrefix(prog, w+"/") }) {
			s.Opaque = true
		}
	}
}

// metadataWriters change a file's metadata, not what it holds.
var metadataWriters = map[string]bool{"chmod": true, "chown": true, "chgrp": true, "touch": true, "setfacl": true, "chattr": true}

// parseDepth is parse for a script nested depth levels deep (bash -c 'STRING'). left is
// what is left of maxStmtBytes for the whole line, nested scripts included.
func parseDepth(command string, opts Options, depth int, left *int) *Classification {
	if shnest.TooDeep(command) {
		return failed("too_deep", fmt.Sprintf("not parsed: its brackets, or a run of unary operators, nest over %d deep", shnest.MaxDepth))
	}
	if lineDivergence(command) {
		return failed(reasonLineStruct, "not parsed: a backslash-newline ends a comment line, or shares a command with a here-document, where bash and the parser may split the lines differently")
	}
	p := parserPool.Get().(*syntax.Parser)
	f, err := p.Parse(strings.NewReader(command), "")
	parserPool.Put(p)
	if err != nil {
		return failed("parse_error", err.Error())
	}
	if strings.Contains(command, "<<") && heredocDivergence(f, command) {
		return failed(reasonLineStruct, "not parsed: a here-document holds its delimiter's line before its end, or a line that starts with it and goes on (`EOF)`), where bash may end the document and run the lines after it as commands")
	}
	if c := checkShell(f, command, opts.Shell); c != nil {
		return c
	}
	if *left -= stmtBytes(f, *left); *left < 0 {
		return tooComplex()
	}
	w := walkerPool.Get().(*walker)
	w.src, w.opts, w.depth, w.left = command, opts, depth, left
	w.stmts(f.Stmts, nil)
	c := w.finish()
	// Nothing in c points into the walker's buffers (Argv, Prefix,
	// DenyPrefix and Redirects are allocated for c), so they can be reused.
	w.reset()
	walkerPool.Put(w)
	return c
}

// stmtBytes sums the length of every statement's text in f, nested ones included, stopping
// once the sum passes limit.
func stmtBytes(f *syntax.File, limit int) int {
	n := 0
	syntax.Walk(f, func(node syntax.Node) bool {
		if st, ok := node.(*syntax.Stmt); ok {
			n += int(st.End().Offset() - st.Pos().Offset())
		}
		return n <= limit
	})
	return n
}

// walkerPool reuses walkers and their buffers. A walker is put back only
// after a classification finished; a panic leaves it to the collector.
// New is set in init: walking a line can parse a nested script, which takes a walker from
// this pool, an initialization cycle for a composite literal.
var walkerPool sync.Pool

func init() {
	walkerPool.New = func() any {
		w := &walker{}
		w.visit = w.visitNode
		return w
	}
}

// walker collects the simple commands of a parsed file in source order,
// with the facts that make a whole line unsafe even when each command is.
type walker struct {
	src   string
	opts  Options
	subs  []*sub
	funcs map[string]bool
	// loops: the line has a for or while loop, whose commands may run again after later ones.
	loops bool
	// parsedLast says the last nested script parseNested read parsed (shellWord).
	parsedLast bool
	// setsVars and hasArith together fail a line: bash re-evaluates variable
	// values in arithmetic context, so x='a[$(id)]'; ((x)) runs id.
	setsVars, hasArith bool
	// evalsText: a word of the line is evaluated as code: a subscript in a name a builtin
	// takes (declare 'a[$(id)]=1', unset 'a[$(id)]', read "$1"), a nameref's value, a name
	// known only at run time, or an evalsData reason of any command's check.
	evalsText bool
	// decodedScript: a command that runs what no word of it shows reads it from a decoder
	// (decodes): echo cm0g… | base64 -d | bash.
	decodedScript bool
	// unsupported is the reason of the first construct we refuse to reason
	// about (coproc, ...).
	unsupported string

	// visit is visitNode bound once, so syntax.Walk calls need no closure
	// allocation each.
	visit func(syntax.Node) bool
	// subBuf and wordBuf hand out sub records and argument words. When one
	// fills up a buffer twice the size replaces it (records already handed
	// out stay where they are); reset keeps the last, largest buffer for
	// the next line.
	subBuf  []sub
	wordBuf []word
	// vals is scratch space for a command's argument values while its
	// reason is computed; no check keeps the slice.
	vals []string
	// cur is the words of the command a check is judging (argv[0] first), for the
	// checks that need more than the values (is a name word static?).
	cur []word

	// depth is how deep in nested scripts (bash -c 'STRING') this walker is.
	depth int
	// left is what the line has left of maxStmtBytes, shared with its nested scripts.
	left *int
	// pipeIn is the statement whose output is the stdin of the commands being walked
	// (the left side of a pipe), nil when there is none.
	pipeIn *syntax.Stmt
	// dirs are the directories relative paths may be relative to at this point of the
	// line (Options.Cwd, then static cd targets); dirsUnknown is set after a non-static cd.
	dirs        []string
	dirsUnknown bool
	// cd is the last static cd the walk took: the statement it was and where it goes.
	cd lastCd
}

// lastCd is a static cd (or pushd) of the line: its statement's offset and its targets, the
// dirs the commands after it are in when it succeeded.
type lastCd struct {
	pos     int
	targets []string
	// plain: `cd DIR` and nothing else, DIR a name with no .. (which a cd may take
	// physically, from where a link led), no ~ and no option.
	plain bool
}

// maxKeptBuf bounds the records a pooled walker keeps between lines, so one
// huge line does not pin its memory.
const maxKeptBuf = 1024

// reset clears w for reuse, dropping every reference to the last line.
func (w *walker) reset() {
	// The records in subBuf and wordBuf are overwritten whole before they
	// are read again; only w.subs can reach buffers that were replaced.
	clear(w.subs)
	*w = walker{
		visit:   w.visit,
		subs:    w.subs[:0],
		subBuf:  w.subBuf[:0],
		wordBuf: w.wordBuf[:0],
		vals:    w.vals[:0],
	}
	if cap(w.subs) > maxKeptBuf {
		w.subs = nil
	}
	if cap(w.subBuf) > maxKeptBuf {
		w.subBuf = nil
	}
	if cap(w.wordBuf) > maxKeptBuf {
		w.wordBuf = nil
	}
	if cap(w.vals) > maxKeptBuf {
		w.vals = nil
	}
}

// newSub returns a new sub record owned by the walker. The caller appends
// it to w.subs when the original code did.
func (w *walker) newSub(s *syntax.Stmt, redirs []Redirect) *sub {
	if len(w.subBuf) == cap(w.subBuf) {
		w.subBuf = make([]sub, 0, max(2*cap(w.subBuf), 16))
	}
	// Every record takes the directories of this point of the line, the redirections of a
	// statement without a command too: `cd ~/.ssh; < id_rsa` opens ~/.ssh/id_rsa.
	w.subBuf = append(w.subBuf, sub{pos: int(s.Pos().Offset()), text: w.stmtText(s), redirs: redirs,
		dirs: w.dirs, dirsUnknown: w.dirsUnknown})
	return &w.subBuf[len(w.subBuf)-1]
}

// newWords returns an empty slice with capacity exactly n, carved from the
// walker's word buffer so that appending beyond n reallocates rather than
// overwrite a neighbour.
func (w *walker) newWords(n int) []word {
	if cap(w.wordBuf)-len(w.wordBuf) < n {
		if n > maxKeptBuf/4 {
			return make([]word, 0, n)
		}
		w.wordBuf = make([]word, 0, max(2*cap(w.wordBuf), 64, 2*n))
	}
	k := len(w.wordBuf)
	w.wordBuf = w.wordBuf[:k+n]
	return w.wordBuf[k : k : k+n]
}

// sub is a simple command plus what the walker knows about it.
type sub struct {
	pos     int
	text    string
	assigns []assign
	args    []word
	redirs  []Redirect
	isDecl  bool // declare/export/local/readonly/typeset
	isLet   bool
	noCmd   bool // a statement with redirections only
	// plain is true for a call with at least one word, every word static
	// and no assignments (set by call).
	plain bool
	// opaque: what the command runs is known only at run time (see Subcommand.Opaque).
	opaque bool
	// tails: nested holds the command lines an undescribed program's words may be
	// (argvTails), for deny and ask rules only: their paths are the program's own words.
	tails bool
	// nested are the classified commands of a literal script this command runs.
	nested *Classification
	// dirs and dirsUnknown are the walker's at this command (see walker.dirs).
	dirs        []string
	dirsUnknown bool
	// listedIn: its stdin is a listing of a dir's entries (ls, echo *, a find of a dir that
	// picks no file), so an xargs before it takes that dir's every name (listedDir).
	listedIn string
}

// assign is one NAME=value word.
type assign struct {
	name   string
	word   word // the whole NAME=value as written
	static bool // the value is static
}

func (w *walker) stmts(ss []*syntax.Stmt, inherited []Redirect) {
	for _, s := range ss {
		if len(w.subs) > MaxSubcommands {
			return // refused whole by parse; walking on would only build what is dropped
		}
		w.stmt(s, inherited)
	}
}

func (w *walker) stmt(s *syntax.Stmt, inherited []Redirect) {
	if s == nil {
		return
	}
	redirs := inherited
	nsubs := len(w.subs)
	if len(s.Redirs) > 0 {
		// Redirections on a compound statement apply to every command in it,
		// so `{ ls; } > out` marks ls as writing.
		redirs = w.redirects(inherited, s.Redirs)
	}
	switch cmd := s.Cmd.(type) {
	case nil:
		sb := w.newSub(s, redirs)
		sb.noCmd = true
		w.subs = append(w.subs, sb)
	case *syntax.CallExpr:
		w.call(s, cmd, redirs)
	case *syntax.BinaryCmd:
		if cmd.Op == syntax.Pipe || cmd.Op == syntax.PipeAll {
			// Each side of a pipe runs in a subshell: a cd there does not last.
			in, dirs, unk := w.pipeIn, w.dirs, w.dirsUnknown
			w.pipeIn = nil
			w.stmt(cmd.X, redirs)
			w.dirs, w.dirsUnknown = dirs, unk
			w.pipeIn = cmd.X
			w.stmt(cmd.Y, redirs)
			w.pipeIn = in
			if w.opts.Shell != ShellZsh && w.opts.Shell != shellAny {
				// zsh runs the last command of a pipeline in the shell itself: its cd lasts.
				// So does bash after `shopt -s lastpipe`, which the line may or may not have
				// set by then: a cd there leaves the dir unknown.
				moved := w.dirsUnknown != unk || !slices.Equal(w.dirs, dirs)
				w.dirs, w.dirsUnknown = dirs, unk || moved && strings.Contains(w.src, "shopt")
			}
			break
		}
		if cmd.Op == syntax.AndStmt {
			w.andList(cmd, redirs)
			break
		}
		w.cd = lastCd{}
		w.stmt(cmd.X, redirs)
		cd := w.cd
		w.stmt(cmd.Y, redirs)
		if cmd.Op == syntax.OrStmt && exits(cmd.Y) && w.trustsCd(cmd.X, cd) {
			// cd build || exit 1: past it, the line is in build or has ended.
			w.dirs = cd.targets
		}
	case *syntax.Subshell:
		dirs, unk := w.dirs, w.dirsUnknown
		w.stmts(cmd.Stmts, redirs)
		w.dirs, w.dirsUnknown = dirs, unk
	case *syntax.Block:
		w.stmts(cmd.Stmts, redirs)
	case *syntax.IfClause:
		if cmd.Else == nil && len(cmd.Cond) == 1 {
			w.ifCd(cmd, redirs)
			break
		}
		for c := cmd; c != nil; c = c.Else {
			w.stmts(c.Cond, redirs)
			w.stmts(c.Then, redirs)
		}
	case *syntax.WhileClause:
		w.loops = true
		n, dirs, unk := len(w.subs), w.dirs, w.dirsUnknown
		w.stmts(cmd.Cond, redirs)
		w.stmts(cmd.Do, redirs)
		w.loopCd(n, dirs, unk)
	case *syntax.ForClause:
		w.loops = true
		n, dirs, unk := len(w.subs), w.dirs, w.dirsUnknown
		switch l := cmd.Loop.(type) {
		case *syntax.WordIter:
			w.assigned(l.Name.Value)
			for _, x := range l.Items {
				w.node(x)
			}
		case *syntax.CStyleLoop:
			w.hasArith = true
			w.setsVars = true
			w.arith(l.Init)
			w.arith(l.Cond)
			w.arith(l.Post)
			w.node(l)
		}
		w.stmts(cmd.Do, redirs)
		w.loopCd(n, dirs, unk)
	case *syntax.CaseClause:
		w.node(cmd.Word)
		for _, it := range cmd.Items {
			for _, p := range it.Patterns {
				w.node(p)
			}
			w.stmts(it.Stmts, redirs)
		}
	case *syntax.FuncDecl:
		// A function shadows a command or path for the rest of the line
		// (`/bin/ls() {...}`, command_not_found_handle runs for unknown names):
		// no later command is provably what it looks like, so the line is
		// not read-only. The names are kept for the per-command reason.
		w.unsupportedf(reasonFuncDef)
		if w.funcs == nil {
			w.funcs = map[string]bool{}
		}
		if cmd.Name != nil {
			w.funcs[cmd.Name.Value] = true
		}
		for _, n := range cmd.Names {
			w.funcs[n.Value] = true
		}
		// The body runs where the function is called, after whatever cd comes before
		// (`f() { cat id_rsa; }; cd ~/.ssh; f`), as often as it is called: its relative
		// paths are unknown, and so are those after it when a cd in it may run.
		n, dirs, unk := len(w.subs), w.dirs, w.dirsUnknown
		w.stmt(cmd.Body, redirs)
		for _, sb := range w.subs[n:] {
			sb.dirsUnknown = true
		}
		w.loopCd(n, dirs, unk)
	case *syntax.ArithmCmd:
		w.hasArith = true
		w.arith(cmd.X)
		w.node(cmd.X)
		sb := w.newSub(s, redirs)
		sb.noCmd = true
		w.subs = append(w.subs, sb)
	case *syntax.TestClause:
		w.node(cmd.X)
		w.testClause(cmd.X)
		sb := w.newSub(s, redirs)
		sb.noCmd = true
		w.subs = append(w.subs, sb)
	case *syntax.DeclClause:
		w.setsVars = true
		sb := w.newSub(s, redirs)
		sb.isDecl = true
		sb.args = append(sb.args, word{val: cmd.Variant.Value, src: cmd.Variant.Value, static: true})
		for _, a := range cmd.Args {
			w.node(a)
			if a.Index != nil || a.Array != nil && slices.ContainsFunc(a.Array.Elems, func(e *syntax.ArrayElem) bool { return e.Index != nil }) {
				w.evalsText = true // declare a[$(x)]=1, declare -A a=([$(x)]=1)
			}
			if a.Value != nil && a.Name == nil {
				v := evalWord(w.src, a.Value)
				if v.static && len(v.val) > 1 && (v.val[0] == '-' || v.val[0] == '+') && strings.ContainsRune(v.val[1:], 'n') {
					w.evalsText = true // declare -n r=…: the value is a name, evaluated on use
				}
				if name, _, _ := strings.Cut(v.val, "="); !v.static || strings.ContainsRune(name, '[') {
					// declare 'a[$(x)]=1' evaluates the subscript, and a name known only at
					// run time may hold one; and a nameref's value (declare -n r=$x) is a
					// name evaluated wherever r is used.
					w.evalsText = true
				}
				sb.args = append(sb.args, v)
				continue
			}
			aw := evalAssign(w.src, a)
			sb.args = append(sb.args, aw.word)
		}
		if w.opts.Shell == ShellZsh || w.opts.Shell == shellAny {
			for _, a := range sb.args[1:] {
				if a.static && zshSubscriptCode(a.val) {
					w.unsupportedf(reasonArith) // typeset -i x='path[$(id)]'
				}
			}
		}
		// export GIT_SSH_COMMAND='curl x' runs curl in the git after it.
		w.commandVars(sb, sb.args[1:])
		w.subs = append(w.subs, sb)
	case *syntax.LetClause:
		w.setsVars = true
		w.hasArith = true
		sb := w.newSub(s, redirs)
		sb.isLet = true
		sb.args = []word{{val: "let", src: "let", static: true}}
		for _, e := range cmd.Exprs {
			w.arith(e)
			w.node(e)
			sb.args = append(sb.args, word{src: srcText(w.src, e)})
		}
		w.subs = append(w.subs, sb)
	case *syntax.TimeClause:
		w.stmt(cmd.Stmt, redirs)
	case *syntax.CoprocClause:
		w.unsupportedf("coproc")
		n := len(w.subs)
		w.stmt(cmd.Stmt, redirs)
		if _, simple := cmd.Stmt.Cmd.(*syntax.CallExpr); simple && cmd.Name != nil {
			// bash takes a NAME only before a compound command: `coproc curl x` runs curl x,
			// where the parser read curl as the name. What runs is not the command seen.
			for _, sb := range w.subs[n:] {
				sb.opaque = true
			}
		}
	default:
		w.unsupportedf("unsupported_construct")
		w.node(cmd)
	}
	if len(s.Redirs) > 0 && len(w.subs) == nsubs {
		// A compound command with no simple command in it (`case x in esac > f`)
		// still opens its redirection targets: keep them as a command of their own.
		if _, ok := s.Cmd.(*syntax.CallExpr); !ok && s.Cmd != nil {
			sb := w.newSub(s, redirs)
			sb.noCmd = true
			w.subs = append(w.subs, sb)
		}
	}
}

// loopCd is called after a loop whose commands are w.subs[n:], with the directories before
// it: a loop runs its commands again after a cd among them, so on the next pass a command
// before the cd reads relative to the cd's target (`for i in 1 2; do cat id_rsa; cd ~/.ssh;
// done` reads ~/.ssh/id_rsa), and two passes of `cd sub` land in sub/sub. When the loop left
// the directories changed, its commands' relative paths and those after it are unknown.
func (w *walker) loopCd(n int, dirs []string, unk bool) {
	if slices.Equal(dirs, w.dirs) && unk == w.dirsUnknown {
		return
	}
	for _, sb := range w.subs[n:] {
		sb.dirsUnknown = true
	}
	w.dirsUnknown = true
}

// andList walks X && Y && …: each command runs only when the one before it succeeded, so
// after a cd that is one of them, the next is in the cd's target alone (cd build && rm -rf *
// empties build, never the cwd). What comes after the list may follow a failure anywhere in
// it, so it is in any dir the list passed through.
func (w *walker) andList(cmd *syntax.BinaryCmd, redirs []Redirect) {
	list := []*syntax.Stmt{cmd.Y}
	x := cmd.X
	for {
		b, ok := x.Cmd.(*syntax.BinaryCmd)
		if !ok || b.Op != syntax.AndStmt || x.Negated || x.Background || x.Coprocess || len(x.Redirs) > 0 {
			break
		}
		list = append(list, b.Y)
		x = b.X
	}
	list = append(list, x)
	slices.Reverse(list)
	passed := w.startDirs()
	for _, s := range list {
		w.cd = lastCd{}
		w.stmt(s, redirs)
		passed = w.passing(passed)
		if w.trustsCd(s, w.cd) {
			w.dirs = w.cd.targets
		}
	}
	w.endPassed(passed)
}

// ifCd walks `if COND; then …; fi` with no else, as COND && …: when COND is the line's
// trusted cd (if cd build; then rm -rf *; fi), its then part runs in the cd's target alone.
func (w *walker) ifCd(cmd *syntax.IfClause, redirs []Redirect) {
	passed := w.startDirs()
	w.cd = lastCd{}
	w.stmt(cmd.Cond[0], redirs)
	passed = w.passing(passed)
	if w.trustsCd(cmd.Cond[0], w.cd) {
		w.dirs = w.cd.targets
	}
	w.stmts(cmd.Then, redirs)
	w.endPassed(w.passing(passed))
}

// startDirs are the dirs the line is in before a list: its dirs, or the cwd.
func (w *walker) startDirs() []string {
	passed := slices.Clone(w.dirs)
	if len(passed) == 0 && w.opts.Cwd != "" {
		passed = []string{path.Clean(w.opts.Cwd)}
	}
	return passed
}

// passing adds the dirs the line is in now to passed.
func (w *walker) passing(passed []string) []string {
	for _, d := range w.dirs {
		if !containsStr(passed, d) {
			passed = append(passed, d)
		}
	}
	return passed
}

// endPassed leaves the line after a list in any dir the list passed through: what follows
// may come after a failure anywhere in it.
func (w *walker) endPassed(passed []string) {
	if len(passed) > maxDirs {
		w.dirsUnknown = true
	}
	w.dirs = passed
}

// listedDir is the dir whose every entry st (the left of a pipe) prints, "" when it prints
// anything else: ls of one dir or none (the cwd's), echo or printf of a glob taking every name
// (*), a find of one root that selects no file by a test (findSelects). The dir is as written,
// relative to where the line is.
func (w *walker) listedDir(st *syntax.Stmt) string {
	c, ok := st.Cmd.(*syntax.CallExpr)
	if !ok || len(c.Args) == 0 {
		return ""
	}
	vals := make([]string, 0, len(c.Args))
	for _, a := range c.Args {
		v := evalWord(w.src, a)
		if !v.static && !v.glob {
			return ""
		}
		vals = append(vals, v.val)
	}
	var ops []string
	for _, v := range vals[1:] {
		if !strings.HasPrefix(v, "-") {
			ops = append(ops, v)
		}
	}
	switch baseName(vals[0]) {
	case "ls":
		switch len(ops) {
		case 0:
			return "."
		case 1:
			return ops[0]
		}
	case "echo", "printf":
		for _, o := range ops {
			if dir, last := splitGlob(strings.TrimRight(o, "/")); matchAll(last) {
				return strings.TrimSuffix(dir, "/") + "."
			}
		}
	case "find":
		if len(vals) > 1 && !strings.HasPrefix(vals[1], "-") && !findSelects(vals[1:]) {
			return vals[1]
		}
	}
	return ""
}

// trustsCd reports whether the commands that run only when s succeeded are in cd's targets
// alone: s is that cd, plain, the line's (cdIsTheLines), and nothing may mislead it.
func (w *walker) trustsCd(s *syntax.Stmt, cd lastCd) bool {
	_, call := s.Cmd.(*syntax.CallExpr)
	return call && !s.Negated && !w.dirsUnknown && cd.plain && cd.pos == int(s.Pos().Offset()) &&
		w.cdIsTheLines() && !w.cdMayMislead()
}

// exits reports a statement that ends the shell: exit or return, alone or last in a block
// (|| { echo "no build" >&2; exit 1; }).
func exits(s *syntax.Stmt) bool {
	if b, ok := s.Cmd.(*syntax.Block); ok && len(b.Stmts) > 0 {
		return exits(b.Stmts[len(b.Stmts)-1])
	}
	c, ok := s.Cmd.(*syntax.CallExpr)
	if !ok || len(c.Args) == 0 || s.Negated || s.Background {
		return false
	}
	name := c.Args[0].Lit()
	return name == "exit" || name == "return"
}

// cdIsTheLines reports the one shape of line whose cd the && rule trusts: the cd (w.cd) is
// the line's first command and its only cd, pushd or popd, no function is defined, and bash
// or sh reads it. Anything else, a cd after a command that may have made a link or moved a
// dir, a second cd that may take .. physically, zsh's expansions, keeps the cwd judged.
func (w *walker) cdIsTheLines() bool {
	if w.funcs != nil || w.opts.Shell != "" && w.opts.Shell != ShellBash && w.opts.Shell != ShellSh {
		return false
	}
	if len(w.subs) == 0 || w.subs[0].pos != w.cd.pos {
		return false
	}
	return len(cdWord.FindAllStringIndex(w.src, 2)) == 1
}

// cdWord finds a word that may be a cd, pushd or popd, wherever it stands.
var cdWord = regexp.MustCompile(`(^|[^\w-])(cd|pushd|popd)([^\w-]|$)`)

// cdMayMislead reports a line that may make a cd go elsewhere than its word says, or nowhere,
// by means trackCd does not follow: a word whose value names CDPATH, cdable_vars or HOME
// (declare CDPA""TH=..), a name set that is known only when it runs (printf -v "$v"), a
// builtin turned off (enable -n cd), or anything run that no word shows. After such a line's
// cd, the commands are judged in the dirs before it too.
func (w *walker) cdMayMislead() bool {
	if w.evalsText {
		return true
	}
	for _, sb := range w.subs {
		if sb.opaque {
			return true
		}
		if len(sb.args) > 0 && sb.args[0].static {
			name := baseName(sb.args[0].val)
			setsName := evalsNames[name] || namesSetters[name]
			if name == "printf" || name == "print" {
				// Only with -v NAME (zsh: -v too) is an operand a name.
				setsName = len(sb.args) > 1 && !sb.args[1].static ||
					slices.ContainsFunc(sb.args[1:], func(a word) bool { return a.static && strings.HasPrefix(a.val, "-v") })
			}
			if name == "enable" || name == "disable" || setsName && slices.ContainsFunc(sb.args[1:], func(a word) bool { return !a.static }) {
				return true
			}
		}
		for _, a := range sb.args {
			if a.static && cdVarNamed(a.val) {
				return true
			}
		}
		for _, a := range sb.assigns {
			if cdVarNamed(a.word.val) {
				return true
			}
		}
	}
	return false
}

// namesSetters, beside evalsNames, set the variables their operands name.
var namesSetters = map[string]bool{"printf": true, "declare": true, "typeset": true, "export": true, "local": true,
	"readonly": true, "let": true, "print": true, "vared": true, "zparseopts": true}

// subshell walks statements that run in a subshell of their own ($(...), <(...)): a cd
// there does not last, and their stdin is not the pipe the outer command reads.
func (w *walker) subshell(ss []*syntax.Stmt) {
	in, dirs, unk := w.pipeIn, w.dirs, w.dirsUnknown
	w.pipeIn = nil
	w.stmts(ss, nil)
	w.pipeIn, w.dirs, w.dirsUnknown = in, dirs, unk
}

// stmtText is the source of a statement without its trailing ; or &, so a
// subcommand's text is the command itself.
func (w *walker) stmtText(s *syntax.Stmt) string {
	start := int(s.Pos().Offset())
	end := start
	if s.Cmd != nil {
		end = int(s.Cmd.End().Offset())
	}
	for _, r := range s.Redirs {
		end = max(end, int(r.End().Offset()))
	}
	if start < 0 || start > len(w.src) || end < start {
		return ""
	}
	return w.src[start:min(end, len(w.src))]
}

// evalsData reports the reasons for text bash evaluates as code: arithmetic, a variable's
// name or value taken as a name, a prompt string, an array subscript.
func evalsData(reason string) bool {
	switch reason {
	case reasonArith, reasonVarName, reasonIndirect, reasonPrompt, reasonArrayAssign:
		return true
	}
	return false
}

// dataMayHoldCode reports a line where the text evaluated may carry a command substitution:
// one is written in it, or text that can build one (escapes, expansions), or a builtin sets
// values from input (read, mapfile, readarray, getopts, printf -v), which a file the agent
// wrote earlier can fill. A counting loop over literals has none of these.
func (w *walker) dataMayHoldCode(c *Classification) bool {
	// Text that can build a $( or a backquote without writing one: an ANSI-C string ($'\x24'),
	// a backslash, a parameter expansion (d='$'; x="a[${d}(…)]"), a backquote itself.
	if strings.ContainsAny(w.src, "`\\") || strings.Contains(w.src, "${") || strings.Contains(w.src, "$'") {
		return true
	}
	for i := 0; i+1 < len(w.src); i++ {
		if w.src[i] != '$' {
			continue
		}
		switch c := w.src[i+1]; {
		case c == '(' && (i+2 >= len(w.src) || w.src[i+2] != '('):
			return true // a command substitution, not $(( arithmetic
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			return true // $name: a value the line may have built
		}
	}
	for _, s := range c.Subcommands {
		if len(s.Argv) == 0 {
			continue
		}
		switch baseName(s.Argv[0]) {
		case "read", "mapfile", "readarray", "getopts":
			return true
		case "printf":
			if slices.ContainsFunc(s.Argv[1:], func(a string) bool { return strings.HasPrefix(a, "-v") }) {
				return true
			}
		}
	}
	return false
}

// evaluatingDecl reports a declaration with an attribute that evaluates its values or
// takes a number (declare -i, -a, -A; zsh's typeset -Z, -L, -R, -E, -F widths).
func evaluatingDecl(c *Classification) bool {
	for _, s := range c.Subcommands {
		for _, a := range s.Argv {
			if len(a) > 1 && (a[0] == '-' || a[0] == '+') && strings.ContainsAny(a[1:], "iaAZLREFn") {
				return true
			}
		}
	}
	return false
}

func (w *walker) unsupportedf(reason string) {
	if w.unsupported == "" {
		w.unsupported = reason
	}
	w.evalsText = w.evalsText || evalsData(reason)
}

// assigned notes a variable the line sets other than by a plain assignment: a for or select
// loop's name, ${name:=word}, a {name}<file redirection. It is held to what a bare assignment
// may set (safeBareAssign): PATH or HOME set any of these ways is exported to every command
// after it, which then runs whatever that PATH or HOME points at.
func (w *walker) assigned(name string) {
	w.setsVars = true
	if !safeBareAssign(name, w.opts.Shell) {
		w.unsupportedf(reasonUnsafeAssign)
	}
}

// node finds substitutions and arithmetic anywhere under n. Commands nested in
// $(...), backticks and <(...)/>(...) become subcommands of their own.
func (w *walker) node(n syntax.Node) {
	if n == nil {
		return
	}
	if wd, ok := n.(*syntax.Word); ok {
		w.wordParts(wd.Parts)
		return
	}
	syntax.Walk(n, w.visit)
}

// wordParts visits the parts of a word in the order syntax.Walk would, doing
// what visitNode does for each, without Walk's interface dispatch for the
// common parts. Anything less common goes to syntax.Walk itself.
func (w *walker) wordParts(parts []syntax.WordPart) {
	for _, p := range parts {
		switch x := p.(type) {
		case *syntax.Lit, *syntax.SglQuoted:
			// nothing to find
		case *syntax.DblQuoted:
			w.dblQuotedParams(x.Parts)
			w.wordParts(x.Parts)
		case *syntax.CmdSubst:
			w.visitNode(x)
		case *syntax.ParamExp:
			if x.NestedParam != nil || x.Index != nil || x.Slice != nil || x.Repl != nil || x.Exp != nil {
				syntax.Walk(x, w.visit)
			} else {
				w.visitNode(x) // Flags and Param are literals: nothing below
			}
		default:
			syntax.Walk(p, w.visit)
		}
	}
}

// visitNode is the syntax.Walk callback of node.
func (w *walker) visitNode(n syntax.Node) bool {
	switch x := n.(type) {
	case *syntax.CmdSubst:
		if x.TempFile || x.ReplyVar {
			w.unsupportedf("unsupported_construct")
		}
		w.subshell(x.Stmts)
		return false
	case *syntax.ProcSubst:
		w.subshell(x.Stmts)
		return false
	case *syntax.ArithmExp:
		w.hasArith = true
		w.arith(x.X)
	case *syntax.DblQuoted:
		w.dblQuotedParams(x.Parts)
	case *syntax.ParamExp:
		w.paramExp(x)
		if x.Index != nil || x.Slice != nil {
			w.hasArith = true
		}
		if x.Exp != nil && (x.Exp.Op == syntax.AssignUnset || x.Exp.Op == syntax.AssignUnsetOrNull) && x.Param != nil {
			w.assigned(x.Param.Value)
		}
	}
	return true
}

// redirects returns a new slice of the inherited redirections followed by
// those of rs.
func (w *walker) redirects(inherited []Redirect, rs []*syntax.Redirect) []Redirect {
	out := make([]Redirect, 0, len(inherited)+len(rs))
	out = append(out, inherited...)
	for _, r := range rs {
		if r.N != nil && strings.HasPrefix(r.N.Value, "{") {
			w.assigned(strings.Trim(r.N.Value, "{}")) // bash stores the fd it opens in the name
		}
		if r.Word != nil {
			w.node(r.Word)
		}
		if r.Hdoc != nil {
			w.dblQuotedParams(r.Hdoc.Parts)
			w.node(r.Hdoc)
		}
		out = append(out, w.redirect(r))
	}
	return out
}

// harmlessTargets are the files a write redirection may name and still be
// read-only.
var harmlessTargets = map[string]bool{"/dev/null": true, "/dev/stdout": true, "/dev/stderr": true}

func (w *walker) redirect(r *syntax.Redirect) Redirect {
	out := Redirect{Op: r.Op.String()}
	if r.N != nil {
		out.Op = r.N.Value + out.Op
	}
	var tw word
	if r.Word != nil {
		tw = evalWord(w.src, r.Word)
		if tw.static && !tw.glob && !tw.tilde {
			out.Target = tw.val
		}
		if tw.static && !tw.glob && tw.tilde {
			out.tilde = tw.val
		}
		out.procSubst = tw.procSubst
		if r.Op == syntax.RdrIn {
			// The one read that opens a file by name (every other such op writes, and is refused
			// as a write already; here-documents, here-strings and fd dups open no name).
			out.mayBeNet = !tw.static && mayBeNetPath(r.Word)
		}
	}
	switch {
	case r.Hdoc != nil && int(r.Hdoc.End().Offset()) <= len(w.src):
		out.body = w.src[r.Hdoc.Pos().Offset():r.Hdoc.End().Offset()]
	case r.Op == syntax.WordHdoc && r.Word != nil && int(r.Word.End().Offset()) <= len(w.src):
		out.body = w.src[r.Word.Pos().Offset():r.Word.End().Offset()]
	}
	switch r.Op {
	case syntax.RdrOut, syntax.AppOut, syntax.RdrClob, syntax.AppClob,
		syntax.RdrAll, syntax.AppAll, syntax.RdrAllClob, syntax.AppAllClob, syntax.RdrInOut:
		// <> opens the file for writing too (and creates it).
		out.Write = out.Target == "" || !harmlessTargets[out.Target]
	case syntax.DplOut, syntax.DplIn:
		// >&2 and <&- duplicate or close descriptors; `>&file` is bash's
		// old spelling of &>file and writes. zsh has no N- (move) form: >&1- writes a file
		// named 1-.
		zshFile := (w.opts.Shell == ShellZsh || w.opts.Shell == shellAny) && r.Op == syntax.DplOut &&
			len(out.Target) > 1 && strings.HasSuffix(out.Target, "-")
		if out.Target == "" || !isFdDup(out.Target) || zshFile {
			out.Write = r.Op == syntax.DplOut && !harmlessTargets[out.Target]
			if r.Op == syntax.DplIn && out.Target == "" {
				out.Write = false
			}
		}
	}
	if rebindsStdout(r, out.Target) {
		// /dev/stdout and /dev/stderr open again whatever fd 1 or 2 holds: after `1<f` (or
		// `1<&0` with stdin from f) `echo x >/dev/stdout` truncates and writes f. Their
		// harmlessness holds only while those fds are the caller's, so a line that gives
		// either another file is a write: of that file, or of one unknown for a dup.
		out.Write = true
		if r.Op != syntax.RdrIn {
			out.Target = ""
		}
	}
	if out.Target == "" && r.Word != nil {
		// keep the source so a human can see what was redirected to
		out.Target = ""
	}
	return out
}

// rebindsStdout reports a redirection that puts on fd 1 or 2 something other than the
// caller's output: a file opened for reading, a here-document, or a copy of any fd but 1 and 2
// (a close, 1>&-, leaves it closed; the next open by name then takes it, as 1<f does).
func rebindsStdout(r *syntax.Redirect, target string) bool {
	fd := 0
	switch r.Op {
	case syntax.RdrOut, syntax.AppOut, syntax.RdrClob, syntax.AppClob, syntax.DplOut:
		fd = 1
	}
	if r.N != nil {
		n, err := strconv.Atoi(r.N.Value)
		if err != nil {
			return false // {var}: bash picks an fd of 10 or above
		}
		fd = n
	}
	if fd != 1 && fd != 2 {
		return false
	}
	switch r.Op {
	case syntax.RdrIn, syntax.Hdoc, syntax.DashHdoc, syntax.WordHdoc:
		return true
	case syntax.DplIn, syntax.DplOut:
		// >&file (bash's &>file) is a write of file already.
		from := strings.TrimSuffix(target, "-")
		return (target == "" || isFdDup(target)) && from != "1" && from != "2"
	}
	return false
}

// mayBeNetPath reports whether a redirection target known only at run time may expand to a
// name bash opens as a socket: `cat < /dev/tcp/$h/80` connects, and
// `cat < /dev/tcp/$(cmd).example.com/80` sends cmd's output out in a DNS query. The text
// before the first expansion must rule out /dev/tcp/ and /dev/udp/; a process substitution
// alone is a /dev/fd name.
func mayBeNetPath(w *syntax.Word) bool {
	if len(w.Parts) == 1 {
		if _, ok := w.Parts[0].(*syntax.ProcSubst); ok {
			return false
		}
	}
	var b strings.Builder
parts:
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			// Dropping every backslash only brings the text nearer to /dev/tcp/.
			b.WriteString(strings.ReplaceAll(p.Value, "\\", ""))
		case *syntax.SglQuoted:
			if p.Dollar {
				break parts
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok {
					break parts
				}
				b.WriteString(strings.ReplaceAll(l.Value, "\\", ""))
			}
		default:
			break parts
		}
	}
	s := b.String()
	for _, dev := range []string{"/dev/tcp/", "/dev/udp/"} {
		if strings.HasPrefix(dev, s) || strings.HasPrefix(s, dev) {
			return true
		}
	}
	return false
}

// isFdDup reports whether t is a descriptor number (optionally moved with a
// trailing -) or "-" (close).
func isFdDup(t string) bool {
	t = strings.TrimSuffix(t, "-")
	if t == "" {
		return true
	}
	for _, c := range t {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func evalAssign(src string, a *syntax.Assign) assign {
	out := assign{word: word{src: srcText(src, a), static: true}, static: true}
	if a.Name != nil {
		out.name = a.Name.Value
	}
	if a.Index != nil || a.Array != nil {
		out.static = false
		out.word.static = false
	}
	val := ""
	if a.Value != nil {
		v := evalWord(src, a.Value)
		val = v.val
		if !v.static {
			out.static = false
			out.word.static = false
			out.word.node = a.Value // what it may hold is read from it (opaqueCritical)
		}
	}
	op := "="
	if a.Append {
		op = "+="
	}
	out.word.val = out.name + op + val
	if a.Naked {
		out.word.val = out.name
	}
	return out
}

func (w *walker) call(s *syntax.Stmt, c *syntax.CallExpr, redirs []Redirect) {
	sb := w.newSub(s, redirs)
	sb.args = w.newWords(len(c.Args))
	zsh := w.opts.Shell == ShellZsh || w.opts.Shell == shellAny
	for _, a := range c.Assigns {
		if a.Index != nil || a.Array != nil {
			// a[i]=v and a=([i]=v) evaluate i arithmetically (indexed arrays).
			w.unsupportedf(reasonArrayAssign)
		}
		as := evalAssign(w.src, a)
		if zsh && as.word.static && zshSubscriptCode(as.word.val) {
			w.unsupportedf(reasonArith) // x='path[$(id)]'; printf %d x
		}
		sb.assigns = append(sb.assigns, as)
	}
	plain := len(c.Args) > 0 && len(sb.assigns) == 0
	for i, a := range c.Args {
		sb.args = sb.args[:i+1]
		evalWordTo(&sb.args[i], w.src, a)
		plain = plain && sb.args[i].static
		if zsh && sb.args[i].static && zshSubscriptCode(sb.args[i].val) {
			w.unsupportedf(reasonArith)
		}
	}
	if zsh && zshMathArgs(sb.args) {
		w.hasArith = true // a variable the line sets is evaluated as math here
	}
	sb.plain = plain
	if len(c.Args) == 0 {
		w.setsVars = true
	}
	sb.dirs, sb.dirsUnknown = w.dirs, w.dirsUnknown
	if w.pipeIn != nil {
		sb.listedIn = w.listedDir(w.pipeIn)
	}
	w.subs = append(w.subs, sb)
	w.nestedOf(sb, s)
	w.trackCd(sb)
	for _, a := range c.Assigns {
		if a.Value != nil && a.Index == nil && a.Array == nil {
			w.node(a.Value)
			continue
		}
		w.node(a)
	}
	for i, a := range c.Args {
		// A static word holds only literals and quoted literals (see
		// evalWord): no substitution or arithmetic for node to find.
		if !sb.args[i].static {
			w.wordParts(a.Parts)
		}
	}
}

func bySubPos(a, b *sub) int { return a.pos - b.pos }

// finish classifies every collected command and the line as a whole.
func (w *walker) finish() *Classification {
	if !slices.IsSortedFunc(w.subs, bySubPos) {
		slices.SortStableFunc(w.subs, bySubPos)
	}
	c := &Classification{ReadOnly: true, Reason: "read_only", Subcommands: make([]Subcommand, 0, len(w.subs))}
	// One backing array holds every Argv, Prefix and DenyPrefix; each is
	// carved with the capacity it would have had alone.
	n := 0
	for _, sb := range w.subs {
		n += argvWords(sb)
	}
	strs := strSlab(make([]string, 0, n))
	hasCd, hasGit := false, false
	nested := 0
	pc := pathCollector{opts: w.opts, cdVars: cdVarNamed(w.src), curlrcVars: curlrcVarNamed(w.src)}
	linkAt := -1 // the first command that may make a symbolic link
	for i, sb := range w.subs {
		c.Subcommands = c.Subcommands[:i+1]
		out := &c.Subcommands[i]
		w.classifySub(out, sb, &strs)
		out.Opaque = sb.opaque
		pc.subPaths(sb, out.DenyPrefix)
		if pc.symlinks && linkAt < 0 {
			linkAt = i
		}
		if sb.nested != nil {
			nested += len(sb.nested.Subcommands)
		}
		if !out.ReadOnly && c.ReadOnly {
			c.ReadOnly = false
			c.Reason = out.Reason
		}
		// The deny prefix as well as the allow prefix: it sees through env and a path to the
		// program (`cd /tmp/evil && env git status`, `... && /usr/bin/git status`).
		for _, p := range [][]string{out.Prefix, out.DenyPrefix} {
			if len(p) == 0 {
				continue
			}
			switch baseName(p[0]) {
			case "cd", "pushd", "popd":
				hasCd = hasCd || !w.cdStays(sb)
			case "git":
				hasGit = true
			}
		}
	}
	switch {
	case len(c.Subcommands) == 0:
		c.LineReason = "empty_command"
	case w.unsupported != "":
		c.LineReason = w.unsupported
	case w.setsVars && w.hasArith:
		c.LineReason = "arithmetic_eval"
	case hasGit && (hasCd || w.opts.GitElsewhere):
		// git in another directory reads that repository's config, which
		// may run programs (core.fsmonitor, core.pager); COMPAT prompts.
		c.LineReason = "cd_git"
	case hasGit && w.opts.GitPartialClone:
		c.LineReason = "git_partial_clone"
	}
	if c.LineReason != "" && c.ReadOnly {
		c.ReadOnly, c.Reason = false, c.LineReason
	}
	// x='a[$(id)]'; ((x)); make: a variable the line sets, evaluated as arithmetic, whatever
	// the reason another command of the line gave.
	w.evalsText = w.evalsText || w.setsVars && w.hasArith
	if (w.evalsText || evalsData(c.Reason) || c.Reason == "declaration" && evaluatingDecl(c)) && w.dataMayHoldCode(c) && len(c.Subcommands) > 0 {
		// x='a[$(touch x)]'; echo $((x)) runs touch, a command no word of the line names:
		// the line meets every Bash deny and ask rule, as a script it cannot read would.
		c.Subcommands[0].Opaque = true
	}
	c.Risks = risks(w.subs, c.Subcommands, w.opts)
	if !slices.Contains(c.Risks, RiskCriticalPathRm) && slices.ContainsFunc(c.Subcommands, func(s Subcommand) bool { return s.Opaque }) && (w.decodedScript || w.opaqueCritical()) {
		c.Risks = mergeRisks(c.Risks, []string{RiskCriticalPathRm, RiskDestructive})
	}
	c.Paths, c.PathsIncomplete, c.PathsUnbounded = pc.out, pc.incomplete, pc.unbounded
	c.Globs = pc.globs
	c.RedirectsIncomplete = pc.redirectsIncomplete
	c.GitObjectsUnseen = pc.gitUnseen
	c.symlinks, c.linkUses = pc.symlinks, pc.linkUses
	if nested > 0 {
		w.spliceNested(c, nested)
	}
	runsWrittenFile(c, w.opts)
	if c.symlinks && !slices.Contains(c.Risks, RiskCriticalPathRm) && removesFiles(w.afterLinks(linkAt)) {
		// ln -s . me; rm -rf me/: a link the line makes may lead an rm's target to the cwd,
		// the home or /, which no name shows.
		c.Risks = append(c.Risks, RiskCriticalPathRm)
	}
	if c.symlinks && (len(c.Paths) > c.linkUses || c.PathsIncomplete) {
		// A symbolic link the line makes leads a name elsewhere than when the line was
		// decided: `ln -s .. up; cat up/keys/id.key` reads ../keys/id.key, which no path here
		// shows. So a path of the line's other commands may lie anywhere.
		c.PathsIncomplete, c.PathsUnbounded = true, true
	}
	return c
}

// cdStays reports a cd to the directory the line starts in, named as Options.Cwd names it
// or as `.`, before any other cd (`cd /home/u/proj && git status`, as agents write it): git
// after it takes the repository that git alone would, so it is not a cd before git.
func (w *walker) cdStays(sb *sub) bool {
	if !sb.plain || len(sb.args) != 2 || sb.args[0].val != "cd" || len(sb.dirs) > 0 || sb.dirsUnknown {
		return false
	}
	// `.` stays whatever the cwd is: the line's reading must not hang on whether it is known.
	t := sb.args[1].val
	return t == "." || t == "./" || w.opts.Cwd != "" && path.IsAbs(t) && path.Clean(t) == path.Clean(w.opts.Cwd)
}

// writesByRedirect reports whether a command writes a file through a redirection.
func writesByRedirect(s Subcommand) bool {
	return slices.ContainsFunc(s.Redirects, func(r Redirect) bool { return r.Write })
}

// spliceNested puts the commands of nested scripts right after the command that runs
// them, marked Nested, and adds their risks and paths to the line's.
func (w *walker) spliceNested(c *Classification, n int) {
	all := make([]Subcommand, 0, len(c.Subcommands)+n)
	for i, sb := range w.subs {
		all = append(all, c.Subcommands[i])
		if sb.nested == nil {
			continue
		}
		for _, ns := range sb.nested.Subcommands {
			ns.Nested, ns.Tail = true, sb.tails
			all = append(all, ns)
			// A line is read-only only with every script it runs: the command's own check
			// and the nested reading may part on an option cluster (`mapfile -cC00`,
			// `read -d -C x`), and the stricter one holds.
			if !ns.ReadOnly && c.ReadOnly && !sb.tails {
				c.ReadOnly, c.Reason = false, ns.Reason
			}
		}
		c.Risks = mergeRisks(c.Risks, sb.nested.Risks)
		if sb.tails {
			continue
		}
		c.Paths = append(c.Paths, sb.nested.Paths...)
		c.Globs = append(c.Globs, sb.nested.Globs...)
		if sb.nested.PathsIncomplete {
			c.PathsIncomplete = true
			c.PathsUnbounded = c.PathsUnbounded || sb.nested.PathsUnbounded
		}
		c.RedirectsIncomplete = c.RedirectsIncomplete || sb.nested.RedirectsIncomplete
		c.GitObjectsUnseen = c.GitObjectsUnseen || sb.nested.GitObjectsUnseen
		c.symlinks, c.linkUses = c.symlinks || sb.nested.symlinks, c.linkUses+sb.nested.linkUses
		if len(sb.dirs) > 0 || sb.dirsUnknown || cdVarNamed(w.src) && len(sb.nested.Paths) > 0 {
			// The script's relative paths were taken against Options.Cwd; after a cd
			// in the outer line they may be elsewhere.
			c.PathsIncomplete, c.PathsUnbounded = true, true
			c.RedirectsIncomplete = c.RedirectsIncomplete || slices.ContainsFunc(sb.nested.Subcommands, writesByRedirect)
		}
	}
	c.Subcommands = all
}

// RunsGit reports whether the line, or a script it runs, may run git: a command that is git
// past wrappers, quotes and escapes (g”it), one of git's own programs (git-upload-pack), or
// one known only at run time.
func (c *Classification) RunsGit() bool {
	return slices.ContainsFunc(c.Subcommands, func(s Subcommand) bool {
		if s.Opaque {
			return true
		}
		if len(s.DenyPrefix) == 0 {
			return false
		}
		name := path.Base(s.DenyPrefix[0])
		return name == "git" || strings.HasPrefix(name, "git-")
	})
}
