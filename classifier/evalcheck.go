package classifier

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Bash evaluates text as code in places that look like data: an array subscript in any
// variable name a builtin takes (printf -v, read, test -v, ...) is evaluated arithmetically,
// arithmetic re-evaluates a variable's value as an expression (so x='a[$(id)]'; ((x)) runs
// id), ${!x} evaluates x's value as a name with a subscript, and ${x@P} runs the command
// substitutions of a prompt string. The checks here refuse every such place unless the text
// evaluated is plainly harmless: an integer literal, or a variable no command of the line can
// have set to an expression. They err toward "not read-only", never the other way.

// Reasons for code evaluated from data.
const (
	reasonArith       = "arithmetic_eval"
	reasonVarName     = "variable_name_eval"
	reasonIndirect    = "indirect_expansion"
	reasonPrompt      = "prompt_expansion"
	reasonQuoteInExp  = "quote_divergence"
	reasonArrayAssign = "array_assignment"
	reasonFuncDef     = "function_definition"
	reasonLineStruct  = "line_structure"
	// reasonUnsafeAssign is a variable set that a bare assignment could not set (safeBareAssign).
	reasonUnsafeAssign = "unsafe_assignment"
)

// isIdent reports whether s is a shell variable name.
func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// implicitVar reports variables that commands of a read-only line set without an
// assignment the walker sees: $_ (the last argument of the previous command), BASH_REMATCH
// ([[ =~ ]]), REPLY and MAPFILE (read, mapfile), OPTARG (getopts), and bash's own BASH_*.
// Their values can be any text, so arithmetic on them is code.
func implicitVar(s string) bool {
	switch s {
	case "_", "REPLY", "MAPFILE", "OPTARG", "PWD", "OLDPWD", "DIRSTACK", "COMP_WORDS", "COMP_LINE":
		return true
	}
	return strings.HasPrefix(s, "BASH_")
}

// arithLiteral reports whether s is an integer constant as bash's arithmetic reads it
// (decimal, 0x.., octal, base#digits).
func arithLiteral(s string) bool {
	if s == "" || s[0] < '0' || s[0] > '9' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '#' || c == '@' || c == '_') {
			return false
		}
	}
	return true
}

// arithOperand reports whether one operand word of an arithmetic expression is harmless:
// an integer literal, a plain variable name, or $name / ${name} / ${#name} of a variable no
// command sets implicitly. Quotes (bash drops them in arithmetic), subscripts, command
// substitutions and every other expansion are refused: their text is evaluated as code.
func arithOperand(w *syntax.Word) bool {
	if w == nil || len(w.Parts) != 1 {
		return false
	}
	switch p := w.Parts[0].(type) {
	case *syntax.Lit:
		return arithLiteral(p.Value) || isIdent(p.Value) && !implicitVar(p.Value)
	case *syntax.ParamExp:
		return simpleParam(p)
	}
	return false
}

// simpleParam reports $x, ${x} or ${#x} of a name that is not set implicitly; special
// parameters ($?, $#, $1) are numbers or the (empty) positional parameters of a tool call.
func simpleParam(p *syntax.ParamExp) bool {
	if p.Param == nil || p.Excl || p.Index != nil || p.Slice != nil || p.Repl != nil || p.Exp != nil ||
		p.Names != 0 || p.NestedParam != nil || p.Width || p.IsSet {
		return false
	}
	n := p.Param.Value
	if n == "" {
		return false
	}
	if isIdent(n) {
		return !implicitVar(n)
	}
	switch n {
	case "?", "#", "$", "!", "-", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9":
		return true
	}
	return false
}

// arith checks an arithmetic expression: every operand must be harmless (arithOperand), and
// an assignment (=, +=, ++, ...) sets a variable, which later arithmetic may re-evaluate.
func (w *walker) arith(x syntax.ArithmExpr) {
	switch x := x.(type) {
	case nil:
	case *syntax.BinaryArithm:
		switch x.Op {
		case syntax.Assgn, syntax.AddAssgn, syntax.SubAssgn, syntax.MulAssgn, syntax.QuoAssgn,
			syntax.RemAssgn, syntax.AndAssgn, syntax.OrAssgn, syntax.XorAssgn, syntax.ShlAssgn,
			syntax.ShrAssgn, syntax.AndBoolAssgn, syntax.OrBoolAssgn, syntax.XorBoolAssgn, syntax.PowAssgn:
			w.setsVars = true
		}
		w.arith(x.X)
		w.arith(x.Y)
	case *syntax.UnaryArithm:
		if x.Op == syntax.Inc || x.Op == syntax.Dec {
			w.setsVars = true
		}
		w.arith(x.X)
	case *syntax.ParenArithm:
		w.arith(x.X)
	case *syntax.Word:
		if !arithOperand(x) {
			w.unsupportedf(reasonArith)
		}
	default:
		w.unsupportedf(reasonArith)
	}
}

// paramExp checks one parameter expansion for the forms that evaluate a value as code.
func (w *walker) paramExp(p *syntax.ParamExp) {
	if p.Excl && p.Names == 0 && !allIndex(p.Index) {
		// ${!x}: x's value is a name, subscript included, evaluated. ${!prefix*} and
		// ${!a[@]} only list names or keys.
		w.unsupportedf(reasonIndirect)
	}
	if p.Index != nil && !allIndex(p.Index) {
		// An indexed array's subscript is arithmetic; an associative array's is a string,
		// but which one a name is cannot be known here.
		w.arith(p.Index)
	}
	if p.Slice != nil {
		w.arith(p.Slice.Offset)
		w.arith(p.Slice.Length)
	}
	if p.Exp != nil && p.Exp.Op == syntax.OtherParamOps {
		// ${x@P} expands a prompt string, running its $(...); ${x@Q}, @E, @U, @u, @L, @a,
		// @A, @K and @k only transform text.
		op := ""
		if p.Exp.Word != nil && len(p.Exp.Word.Parts) == 1 {
			if l, ok := p.Exp.Word.Parts[0].(*syntax.Lit); ok {
				op = l.Value
			}
		}
		switch op {
		case "Q", "E", "U", "u", "L", "a", "A", "K", "k":
		default:
			w.unsupportedf(reasonPrompt)
		}
	}
}

// allIndex reports an [@] or [*] subscript, which names every element and evaluates nothing.
func allIndex(x syntax.ArithmExpr) bool {
	wd, ok := x.(*syntax.Word)
	if !ok || len(wd.Parts) != 1 {
		return false
	}
	l, ok := wd.Parts[0].(*syntax.Lit)
	return ok && (l.Value == "@" || l.Value == "*")
}

// dblQuotedParams checks the parameter expansions directly inside double quotes (or a
// here-document body): single quotes in their operand words are literal characters to bash
// there, so text the parser reads as quoted ('$(id)') is expanded by bash.
func (w *walker) dblQuotedParams(parts []syntax.WordPart) {
	for _, p := range parts {
		pe, ok := p.(*syntax.ParamExp)
		if !ok {
			continue
		}
		var words []*syntax.Word
		if pe.Exp != nil {
			words = append(words, pe.Exp.Word)
		}
		if pe.Repl != nil {
			words = append(words, pe.Repl.Orig, pe.Repl.With)
		}
		for _, wd := range words {
			if wd != nil && hasSglQuoted(wd.Parts) {
				w.unsupportedf(reasonQuoteInExp)
			}
		}
	}
}

func hasSglQuoted(parts []syntax.WordPart) bool {
	for _, p := range parts {
		switch x := p.(type) {
		case *syntax.SglQuoted:
			return true
		case *syntax.DblQuoted:
			if hasSglQuoted(x.Parts) {
				return true
			}
		}
	}
	return false
}

// testClause checks [[ ... ]]: -v and -R name a variable (a subscript there is evaluated),
// and the operands of -eq, -lt, ... are arithmetic expressions, quoted or not.
func (w *walker) testClause(x syntax.TestExpr) {
	syntax.Walk(x, func(n syntax.Node) bool {
		switch t := n.(type) {
		case *syntax.BinaryTest:
			switch t.Op {
			case syntax.TsEql, syntax.TsNeq, syntax.TsLeq, syntax.TsGeq, syntax.TsLss, syntax.TsGtr:
				w.hasArith = true
				for _, o := range []syntax.TestExpr{t.X, t.Y} {
					if wd, ok := o.(*syntax.Word); !ok || !arithOperand(wd) {
						w.unsupportedf(reasonArith)
					}
				}
			case syntax.TsReMatch:
				w.setsVars = true // BASH_REMATCH
			}
		case *syntax.Word:
			if w.opts.Shell == ShellZsh || w.opts.Shell == shellAny {
				if v := evalWord(w.src, t); v.static && zshSubscriptCode(v.val) {
					w.unsupportedf(reasonArith) // [[ -t 'path[$(id)]' ]]: zsh does math on -t's fd
				}
			}
		case *syntax.UnaryTest:
			if t.Op == syntax.TsVarSet || t.Op == syntax.TsRefVar {
				wd, ok := t.X.(*syntax.Word)
				if !ok {
					w.unsupportedf(reasonVarName)
					break
				}
				if v := evalWord(w.src, wd); !v.static || !isIdent(v.val) {
					w.unsupportedf(reasonVarName)
				}
			}
		}
		return true
	})
}

// zshSubscriptCode reports a word zsh would run code from wherever it evaluates it as math:
// a subscript with an expansion in it (path[$(id)]). zsh does math on far more builtin
// arguments than bash (printf's %d, read's and test's -t, shift, exit, repeat, ...), and a
// subscript's expansions run when the name is looked up, so such a word is refused wherever
// it stands rather than builtin by builtin.
func zshSubscriptCode(s string) bool {
	i := strings.IndexByte(s, '[')
	return i >= 0 && strings.ContainsAny(s[i:], "$`")
}

// zshMathArgs reports a zsh builtin that evaluates a plain name among its arguments as math,
// which evaluates the name's value in turn: printf's numeric conversions, test's -t and
// integer comparisons, shift, exit, return, break, continue and repeat. Like bash's
// arithmetic, it fails a line that also sets variables (walker.hasArith).
func zshMathArgs(args []word) bool {
	if len(args) < 2 || !args[0].static {
		return false
	}
	names := false
	for _, a := range args[1:] {
		names = names || !a.static || isIdent(a.val)
	}
	if !names {
		return false
	}
	switch baseName(args[0].val) {
	case "shift", "exit", "return", "break", "continue", "repeat":
		return true
	case "printf":
		for _, a := range args[1:] {
			if !a.static || strings.HasPrefix(a.val, "-") {
				continue
			}
			// The format: a numeric conversion (or a * width) takes its argument as math.
			return strings.Contains(a.val, "%") && strings.ContainsAny(a.val, "diouxXeEfFgGaAc*")
		}
	case "test", "[":
		for _, a := range args[1:] {
			switch a.val {
			case "-t", "-eq", "-ne", "-lt", "-le", "-gt", "-ge":
				return true
			}
		}
	}
	return false
}

// nameArg reports whether a word a builtin takes as a variable name is a plain name: static
// and without a subscript, which bash would evaluate.
func nameArg(a word) bool {
	return a.static && !a.glob && isIdent(a.val)
}

// assignedName checks a word a builtin assigns to as a variable (read, mapfile, getopts,
// printf -v): a plain name, and one a bare assignment could set. PATH or HOME set through
// `read` or `printf -v` is exported to the commands after it as surely as PATH=x is.
func assignedName(a word, shell string) string {
	if !nameArg(a) {
		return reasonVarName
	}
	if !safeBareAssign(a.val, shell) {
		return reasonUnsafeAssign
	}
	return ""
}

// assignedInline is assignedName for a name glued to its option (-vHOME, -aHOME).
func assignedInline(name, shell string) string {
	if !isIdent(name) {
		return reasonVarName
	}
	if !safeBareAssign(name, shell) {
		return reasonUnsafeAssign
	}
	return ""
}

// checkNameArgs is the check of read, mapfile, readarray, getopts, printf, test and [: the
// words they take as variable names must be plain names (nameArg), and any word that could
// expand to an option (a glob, a brace expansion, a non-static word where options go) is
// refused, since `printf *` may meet a file named -v.
func checkNameArgs(args []string, w *walker) string {
	ws := w.cur
	if len(ws) == 0 {
		return ""
	}
	for _, a := range ws[1:] {
		if a.glob {
			return "glob_argument"
		}
	}
	switch name := baseName(ws[0].val); name {
	case "read":
		w.setsVars = true
		return readNames(ws[1:], "dinNptu", "a", "", "inNpt", w.opts.Shell)
	case "mapfile", "readarray":
		w.setsVars = true
		return readNames(ws[1:], "dnOsuc", "", "C", "", w.opts.Shell)
	case "getopts":
		w.setsVars = true
		if len(ws) < 3 {
			return reasonVarName
		}
		return assignedName(ws[2], w.opts.Shell)
	case "printf":
		if len(ws) < 2 {
			return ""
		}
		a := ws[1]
		if !a.static {
			return "dynamic_argument"
		}
		if v, ok := strings.CutPrefix(a.val, "-v"); ok {
			w.setsVars = true
			if v == "" {
				if len(ws) < 3 {
					return reasonVarName
				}
				return assignedName(ws[2], w.opts.Shell)
			}
			return assignedInline(v, w.opts.Shell)
		}
	case "test", "[":
		hasSub := false
		for _, a := range args {
			if strings.IndexByte(a, '[') >= 0 && a != "[" {
				hasSub = true
			}
		}
		for i := 1; i < len(ws); i++ {
			a := ws[i]
			if !a.static {
				if hasSub {
					// $x may expand to -v before a subscripted name.
					return reasonVarName
				}
				continue
			}
			if a.val == "-v" || a.val == "-R" {
				if i+1 >= len(ws) || !nameArg(ws[i+1]) && !(ws[i+1].static && (ws[i+1].val == "]" && name == "[")) {
					return reasonVarName
				}
			}
		}
	}
	return ""
}

// readNames checks the options and name operands of read and mapfile: argOpts take an
// argument, nameOpts take a variable name as their argument, execOpts run code (mapfile -C).
// zshFlags are argOpts that take no argument in zsh (read -t, -n, -p): the word after one is
// a name there, so `read -t path` sets zsh's path, its PATH, and is held to what a name may be.
func readNames(ws []word, argOpts, nameOpts, execOpts, zshFlags, shell string) string {
	i := 0
	for ; i < len(ws); i++ {
		a := ws[i]
		if !a.static {
			return reasonVarName
		}
		v := a.val
		if v == "--" {
			i++
			break
		}
		if len(v) < 2 || v[0] != '-' {
			break
		}
		for j := 1; j < len(v); j++ {
			c := v[j]
			if strings.IndexByte(execOpts, c) >= 0 {
				return "executes_code"
			}
			inName := strings.IndexByte(nameOpts, c) >= 0
			if inName || strings.IndexByte(argOpts, c) >= 0 {
				arg, hasArg := v[j+1:], j+1 < len(v)
				if !hasArg {
					if i+1 >= len(ws) {
						return reasonVarName
					}
					i++
					if inName {
						if r := assignedName(ws[i], shell); r != "" {
							return r
						}
					}
					if (shell == ShellZsh || shell == shellAny) && strings.IndexByte(zshFlags, c) >= 0 &&
						ws[i].static && isIdent(ws[i].val) && !safeBareAssign(ws[i].val, shell) {
						return reasonUnsafeAssign
					}
					if !ws[i].static {
						return reasonVarName
					}
				} else if inName {
					if r := assignedInline(arg, shell); r != "" {
						return r
					}
				}
				break
			}
		}
	}
	for ; i < len(ws); i++ {
		if r := assignedName(ws[i], shell); r != "" {
			return r
		}
	}
	return ""
}

// baseName is the last element of a slash-separated command name.
func baseName(s string) string {
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// braceExpands reports whether bash would brace-expand w: an unquoted { with an unquoted
// comma or .. before its unquoted }, where quoted parts may sit in between ({"-o",f} is the
// two words -o f). The parser keeps such a word as literal parts, so it is found here.
func braceExpands(w *syntax.Word) bool {
	var sep [8]bool
	depth := 0
	for _, part := range w.Parts {
		l, ok := part.(*syntax.Lit)
		if !ok {
			continue
		}
		s := l.Value
		for i := 0; i < len(s); i++ {
			switch s[i] {
			case '\\':
				i++
			case '{':
				if depth+1 >= len(sep) {
					return true
				}
				depth++
				sep[depth] = false
			case ',':
				if depth > 0 {
					sep[depth] = true
				}
			case '.':
				if depth > 0 && i+1 < len(s) && s[i+1] == '.' {
					sep[depth] = true
				}
			case '}':
				if depth > 0 {
					if sep[depth] {
						return true
					}
					depth--
				}
			}
		}
	}
	return false
}

// lineDivergence reports text whose line structure bash and the parser may read
// differently: a backslash-newline on a line holding a # (bash ends a comment at the
// newline, the parser joined the lines), or a backslash-newline anywhere in a text with a
// here-document (a delimiter split across lines).
func lineDivergence(src string) bool {
	if !strings.Contains(src, "\\\n") {
		return false
	}
	if strings.Contains(src, "<<") {
		return true
	}
	start := 0
	for i := 0; i < len(src); i++ {
		if src[i] != '\n' {
			continue
		}
		if i > start && src[i-1] == '\\' && strings.IndexByte(src[start:i], '#') >= 0 {
			return true
		}
		start = i + 1
	}
	return false
}

// heredocDivergence reports a here-document whose end bash and the parser may find at
// different lines: a line of its text that is the delimiter (an unclosed ${ the parser read
// on past it) or starts with it and goes on (`EOF)`, `EOF )`). Inside a command substitution bash 5.2 ends the document there, and runs the
// lines after it, which the parser took for the document's text, as commands. A delimiter
// built by expansion, which bash does not expand either, counts as such too.
func heredocDivergence(f *syntax.File, src string) bool {
	diverges := false
	syntax.Walk(f, func(n syntax.Node) bool {
		rd, ok := n.(*syntax.Redirect)
		if diverges || !ok || (rd.Op != syntax.Hdoc && rd.Op != syntax.DashHdoc) {
			return !diverges
		}
		delim, ok := heredocDelim(rd.Word)
		if !ok {
			diverges = true
			return false
		}
		if rd.Hdoc == nil {
			return true
		}
		// The parser's span of the document may end with the delimiter's line; before it, a
		// line that is the delimiter (an expansion such as ${x:- the parser ran on past it)
		// or starts with it is where bash may end the document instead.
		body := src[rd.Hdoc.Pos().Offset():rd.Hdoc.End().Offset()]
		lines := strings.Split(body, "\n")
		if last := len(lines) - 1; strings.TrimLeft(lines[last], "\t") == delim {
			lines = lines[:last]
		}
		for _, line := range lines {
			// Tabs stripped for << too: the document's text is what bash may end early.
			if strings.HasPrefix(strings.TrimLeft(line, "\t"), delim) {
				diverges = true
				return false
			}
		}
		return true
	})
	return diverges
}

// heredocDelim is a here-document's delimiter as bash compares lines with it: its word with
// the quotes removed; false for a word with an expansion in it.
func heredocDelim(w *syntax.Word) (string, bool) {
	var b strings.Builder
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			b.WriteString(strings.ReplaceAll(p.Value, `\`, ""))
		case *syntax.SglQuoted:
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok {
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
