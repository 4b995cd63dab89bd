package classifier

import (
	"strings"

	"github.com/sandboxd/sandboxd/internal/shnest"
	"mvdan.cc/sh/v3/syntax"
)

// Simple is a simple command: the argv bash would exec, and whether it ends in `2>&1`.
type Simple struct {
	Argv []string
	// StderrToStdout: the command's only redirection is `2>&1` (agents add it to most
	// commands), so running argv with its stderr on its stdout is what bash does (bash's own
	// "not found" goes there too).
	StderrToStdout bool
}

// SimpleCommand recognizes one simple command of literal words naming a program (not a
// builtin, keyword or assignment), with at most a `2>&1`: what `bash -c` runs by exec'ing it
// directly, its "one-shot" case. Anything bash would expand, redirect otherwise, or run itself
// — parameters, globs, braces, tildes, backslashes, other redirections, pipelines, lists,
// background jobs, control characters — is not simple, and ok is false. The caller may then
// run Argv without a shell; the result is the same as bash's.
func SimpleCommand(command string) (sc Simple, ok bool) {
	defer func() {
		if recover() != nil {
			sc, ok = Simple{}, false
		}
	}()
	if len(command) > maxParseLen || badChar(command) != "" || lineDivergence(command) || shnest.TooDeep(command) {
		// lineDivergence: the parser and bash may split the lines differently.
		return Simple{}, false
	}
	p := parserPool.Get().(*syntax.Parser)
	f, err := p.Parse(strings.NewReader(command), "")
	parserPool.Put(p)
	if err != nil || len(f.Stmts) != 1 {
		return Simple{}, false
	}
	st := f.Stmts[0]
	if st.Negated || st.Background || st.Coprocess {
		return Simple{}, false
	}
	switch {
	case len(st.Redirs) == 0:
	case len(st.Redirs) == 1 && stderrToStdout(st.Redirs[0]):
		sc.StderrToStdout = true
	default:
		return Simple{}, false
	}
	call, isCall := st.Cmd.(*syntax.CallExpr)
	if !isCall || len(call.Assigns) > 0 || len(call.Args) == 0 {
		return Simple{}, false
	}
	argv := make([]string, 0, len(call.Args))
	for _, w := range call.Args {
		v, lit := literalWord(w)
		if !lit {
			return Simple{}, false
		}
		argv = append(argv, v)
	}
	name := argv[0]
	if name == "" || (!strings.Contains(name, "/") && bashNames[name]) {
		return Simple{}, false
	}
	sc.Argv = argv
	return sc, true
}

// stderrToStdout reports whether r is exactly `2>&1`.
func stderrToStdout(r *syntax.Redirect) bool {
	if r.Op != syntax.DplOut || r.N == nil || r.N.Value != "2" || r.Hdoc != nil || r.Word == nil || len(r.Word.Parts) != 1 {
		return false
	}
	l, ok := r.Word.Parts[0].(*syntax.Lit)
	return ok && l.Value == "1"
}

// literalWord returns w's value when no part of it is expanded by bash: plain text without
// any character that could start an expansion or an escape, single quotes (not $'...'), and
// double quotes around such plain text.
func literalWord(w *syntax.Word) (string, bool) {
	var b strings.Builder
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			if strings.ContainsAny(p.Value, unquotedSpecial) {
				return "", false
			}
			b.WriteString(p.Value)
		case *syntax.SglQuoted:
			if p.Dollar {
				return "", false
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			if p.Dollar {
				return "", false // $"..." is translated by locale
			}
			for _, q := range p.Parts {
				l, isLit := q.(*syntax.Lit)
				if !isLit || strings.ContainsAny(l.Value, quotedSpecial) {
					return "", false
				}
				b.WriteString(l.Value)
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}

const (
	// unquotedSpecial: escapes, globs, brace and tilde expansion (bash expands ~ after = too),
	// and the expansion characters the parser would otherwise have made nodes of.
	unquotedSpecial = "\\*?[]{}~$`"
	// quotedSpecial: what still means something inside double quotes.
	quotedSpecial = "\\$`"
)

// bashNames are bash 5's builtins and reserved words: a command named so is run by bash itself,
// not exec'd (`true`, `echo`, `cd`, `test`, `exec`, ...).
var bashNames = func() map[string]bool {
	m := map[string]bool{}
	for _, n := range strings.Fields(`. : [ alias bg bind break builtin caller cd command compgen complete
		compopt continue declare dirs disown echo enable eval exec exit export false fc fg getopts hash
		help history jobs kill let local logout mapfile popd printf pushd pwd read readarray readonly
		return set shift shopt source suspend test times trap true type typeset ulimit umask unalias
		unset wait
		if then else elif fi case esac for select while until do done in function time { } ! [[ ]]
		coproc`) {
		m[n] = true
	}
	return m
}()
