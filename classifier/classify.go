package classifier

import (
	"sort"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

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
}

const (
	// MaxReadOnlyLen is the longest command that may classify as read-only;
	// COMPAT makes longer commands prompt.
	MaxReadOnlyLen = 10000
	// maxParseLen bounds the work done on one input: beyond it the text is
	// not parsed at all, so a huge input costs nothing and matches no rule.
	maxParseLen = 64 << 10
	// maxWrapDepth bounds wrapper unwrapping (`nice nice nice ...`).
	maxWrapDepth = 16
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
			c = failed("internal_error")
		}
	}()
	return classify(command, opts)
}

// failed builds a fail-closed classification with no subcommands.
func failed(reason string) *Classification {
	return &Classification{Reason: reason, Subcommands: []Subcommand{}, Risks: []string{}}
}

func classify(command string, opts Options) *Classification {
	if len(command) > maxParseLen {
		return failed("too_long")
	}
	if r := badChar(command); r != "" {
		// Control characters can hide text from a human approver and make
		// our view and bash's view of the text differ; never read-only,
		// but still parsed below when possible so deny rules can match.
		c := parse(command, opts)
		c.ReadOnly = false
		c.Reason = r
		return c
	}
	c := parse(command, opts)
	if c.ReadOnly && len(command) > MaxReadOnlyLen {
		c.ReadOnly = false
		c.Reason = "too_long"
	}
	return c
}

// badChar reports the reason if s holds a character that is not allowed in a
// read-only command: NUL and other C0/C1 controls (tab and newline are shell
// syntax), DEL, invalid UTF-8, and invisible format characters (bidi
// overrides, zero-width spaces) that make displayed text lie.
func badChar(s string) string {
	for i := 0; i < len(s); {
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

// parse runs the parser and the walker and classifies the result.
func parse(command string, opts Options) *Classification {
	p := parserPool.Get().(*syntax.Parser)
	f, err := p.Parse(strings.NewReader(command), "")
	parserPool.Put(p)
	if err != nil {
		msg := err.Error()
		c := failed("parse_error")
		c.ParseError = &msg
		return c
	}
	w := &walker{src: command, opts: opts}
	w.stmts(f.Stmts, nil)
	return w.finish()
}

// walker collects the simple commands of a parsed file in source order,
// with the facts that make a whole line unsafe even when each command is.
type walker struct {
	src   string
	opts  Options
	subs  []*sub
	funcs map[string]bool
	// setsVars and hasArith together fail a line: bash re-evaluates variable
	// values in arithmetic context, so x='a[$(id)]'; ((x)) runs id.
	setsVars, hasArith bool
	// unsupported is the reason of the first construct we refuse to reason
	// about (coproc, ...).
	unsupported string
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
}

// assign is one NAME=value word.
type assign struct {
	name   string
	word   word // the whole NAME=value as written
	static bool // the value is static
}

func (w *walker) stmts(ss []*syntax.Stmt, inherited []Redirect) {
	for _, s := range ss {
		w.stmt(s, inherited)
	}
}

func (w *walker) stmt(s *syntax.Stmt, inherited []Redirect) {
	if s == nil {
		return
	}
	redirs := inherited
	if len(s.Redirs) > 0 {
		// Redirections on a compound statement apply to every command in it,
		// so `{ ls; } > out` marks ls as writing.
		redirs = append(append([]Redirect(nil), inherited...), w.redirects(s.Redirs)...)
	}
	switch cmd := s.Cmd.(type) {
	case nil:
		w.subs = append(w.subs, &sub{pos: int(s.Pos().Offset()), text: w.stmtText(s), redirs: redirs, noCmd: true})
	case *syntax.CallExpr:
		w.call(s, cmd, redirs)
	case *syntax.BinaryCmd:
		w.stmt(cmd.X, redirs)
		w.stmt(cmd.Y, redirs)
	case *syntax.Subshell:
		w.stmts(cmd.Stmts, redirs)
	case *syntax.Block:
		w.stmts(cmd.Stmts, redirs)
	case *syntax.IfClause:
		for c := cmd; c != nil; c = c.Else {
			w.stmts(c.Cond, redirs)
			w.stmts(c.Then, redirs)
		}
	case *syntax.WhileClause:
		w.stmts(cmd.Cond, redirs)
		w.stmts(cmd.Do, redirs)
	case *syntax.ForClause:
		switch l := cmd.Loop.(type) {
		case *syntax.WordIter:
			w.setsVars = true
			for _, x := range l.Items {
				w.node(x)
			}
		case *syntax.CStyleLoop:
			w.hasArith = true
			w.setsVars = true
			w.node(l)
		}
		w.stmts(cmd.Do, redirs)
	case *syntax.CaseClause:
		w.node(cmd.Word)
		for _, it := range cmd.Items {
			for _, p := range it.Patterns {
				w.node(p)
			}
			w.stmts(it.Stmts, redirs)
		}
	case *syntax.FuncDecl:
		// A function named like a read-only command shadows it for the rest
		// of the line; remember the names so later calls fail closed.
		if w.funcs == nil {
			w.funcs = map[string]bool{}
		}
		if cmd.Name != nil {
			w.funcs[cmd.Name.Value] = true
		}
		for _, n := range cmd.Names {
			w.funcs[n.Value] = true
		}
		w.stmt(cmd.Body, redirs)
	case *syntax.ArithmCmd:
		w.hasArith = true
		w.node(cmd.X)
		w.subs = append(w.subs, &sub{pos: int(s.Pos().Offset()), text: w.stmtText(s), redirs: redirs, noCmd: true})
	case *syntax.TestClause:
		w.node(cmd.X)
		syntax.Walk(cmd.X, func(n syntax.Node) bool {
			if b, ok := n.(*syntax.BinaryTest); ok {
				switch b.Op {
				case syntax.TsEql, syntax.TsNeq, syntax.TsLeq, syntax.TsGeq, syntax.TsLss, syntax.TsGtr:
					w.hasArith = true
				}
			}
			return true
		})
		w.subs = append(w.subs, &sub{pos: int(s.Pos().Offset()), text: w.stmtText(s), redirs: redirs, noCmd: true})
	case *syntax.DeclClause:
		w.setsVars = true
		sb := &sub{pos: int(s.Pos().Offset()), text: w.stmtText(s), redirs: redirs, isDecl: true}
		sb.args = append(sb.args, word{val: cmd.Variant.Value, src: cmd.Variant.Value, static: true})
		for _, a := range cmd.Args {
			w.node(a)
			if a.Value != nil && a.Name == nil {
				sb.args = append(sb.args, evalWord(w.src, a.Value))
				continue
			}
			aw := evalAssign(w.src, a)
			sb.args = append(sb.args, aw.word)
		}
		w.subs = append(w.subs, sb)
	case *syntax.LetClause:
		w.setsVars = true
		w.hasArith = true
		sb := &sub{pos: int(s.Pos().Offset()), text: w.stmtText(s), redirs: redirs, isLet: true}
		sb.args = []word{{val: "let", src: "let", static: true}}
		for _, e := range cmd.Exprs {
			w.node(e)
			sb.args = append(sb.args, word{src: srcText(w.src, e)})
		}
		w.subs = append(w.subs, sb)
	case *syntax.TimeClause:
		w.stmt(cmd.Stmt, redirs)
	case *syntax.CoprocClause:
		w.unsupportedf("coproc")
		w.stmt(cmd.Stmt, redirs)
	default:
		w.unsupportedf("unsupported_construct")
		w.node(cmd)
	}
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

func (w *walker) unsupportedf(reason string) {
	if w.unsupported == "" {
		w.unsupported = reason
	}
}

// node finds substitutions and arithmetic anywhere under n. Commands nested in
// $(...), backticks and <(...)/>(...) become subcommands of their own.
func (w *walker) node(n syntax.Node) {
	if n == nil {
		return
	}
	if wd, ok := n.(*syntax.Word); ok && plainWord(wd) {
		return // nothing to find; skip Walk and its closure
	}
	syntax.Walk(n, func(n syntax.Node) bool {
		switch x := n.(type) {
		case *syntax.CmdSubst:
			if x.TempFile || x.ReplyVar {
				w.unsupportedf("unsupported_construct")
			}
			w.stmts(x.Stmts, nil)
			return false
		case *syntax.ProcSubst:
			w.stmts(x.Stmts, nil)
			return false
		case *syntax.ArithmExp:
			w.hasArith = true
		case *syntax.ParamExp:
			if x.Index != nil || x.Slice != nil {
				w.hasArith = true
			}
			if x.Exp != nil && (x.Exp.Op == syntax.AssignUnset || x.Exp.Op == syntax.AssignUnsetOrNull) {
				w.setsVars = true
			}
		}
		return true
	})
}

// plainWord reports whether a word holds only literals and quoted literals.
func plainWord(wd *syntax.Word) bool {
	for _, p := range wd.Parts {
		switch q := p.(type) {
		case *syntax.Lit, *syntax.SglQuoted:
		case *syntax.DblQuoted:
			for _, dp := range q.Parts {
				if _, ok := dp.(*syntax.Lit); !ok {
					return false
				}
			}
		default:
			return false
		}
	}
	return true
}

func (w *walker) redirects(rs []*syntax.Redirect) []Redirect {
	out := make([]Redirect, 0, len(rs))
	for _, r := range rs {
		if r.Word != nil {
			w.node(r.Word)
		}
		if r.Hdoc != nil {
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
	}
	switch r.Op {
	case syntax.RdrOut, syntax.AppOut, syntax.RdrClob, syntax.AppClob,
		syntax.RdrAll, syntax.AppAll, syntax.RdrAllClob, syntax.AppAllClob, syntax.RdrInOut:
		// <> opens the file for writing too (and creates it).
		out.Write = out.Target == "" || !harmlessTargets[out.Target]
	case syntax.DplOut, syntax.DplIn:
		// >&2 and <&- duplicate or close descriptors; `>&file` is bash's
		// old spelling of &>file and writes.
		if out.Target == "" || !isFdDup(out.Target) {
			out.Write = r.Op == syntax.DplOut && !harmlessTargets[out.Target]
			if r.Op == syntax.DplIn && out.Target == "" {
				out.Write = false
			}
		}
	}
	if out.Target == "" && r.Word != nil {
		// keep the source so a human can see what was redirected to
		out.Target = ""
	}
	return out
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
	sb := &sub{pos: int(s.Pos().Offset()), text: w.stmtText(s), redirs: redirs}
	sb.args = make([]word, 0, len(c.Args))
	for _, a := range c.Assigns {
		sb.assigns = append(sb.assigns, evalAssign(w.src, a))
	}
	for _, a := range c.Args {
		sb.args = append(sb.args, evalWord(w.src, a))
	}
	if len(c.Args) == 0 {
		w.setsVars = true
	}
	w.subs = append(w.subs, sb)
	for _, a := range c.Assigns {
		if a.Value != nil && a.Index == nil && a.Array == nil {
			w.node(a.Value)
			continue
		}
		w.node(a)
	}
	for _, a := range c.Args {
		w.node(a)
	}
}

// finish classifies every collected command and the line as a whole.
func (w *walker) finish() *Classification {
	sort.SliceStable(w.subs, func(i, j int) bool { return w.subs[i].pos < w.subs[j].pos })
	c := &Classification{ReadOnly: true, Reason: "read_only", Subcommands: make([]Subcommand, 0, len(w.subs))}
	hasCd, hasGit := false, false
	for _, sb := range w.subs {
		out := w.classifySub(sb)
		if !out.ReadOnly && c.ReadOnly {
			c.ReadOnly = false
			c.Reason = out.Reason
		}
		if len(out.Prefix) > 0 {
			switch out.Prefix[0] {
			case "cd", "pushd", "popd":
				hasCd = true
			case "git":
				hasGit = true
			}
		}
		c.Subcommands = append(c.Subcommands, out)
	}
	switch {
	case !c.ReadOnly:
	case len(c.Subcommands) == 0:
		c.ReadOnly, c.Reason = false, "empty_command"
	case w.unsupported != "":
		c.ReadOnly, c.Reason = false, w.unsupported
	case w.setsVars && w.hasArith:
		c.ReadOnly, c.Reason = false, "arithmetic_eval"
	case hasCd && hasGit:
		// git in another directory reads that repository's config, which
		// may run programs (core.fsmonitor, core.pager); COMPAT prompts.
		c.ReadOnly, c.Reason = false, "cd_git"
	}
	c.Risks = risks(w.subs, c.Subcommands, w.opts)
	return c
}
