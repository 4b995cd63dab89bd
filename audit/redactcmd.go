package audit

import (
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"

	"github.com/sandboxd/sandboxd/classifier"
	"github.com/sandboxd/sandboxd/internal/shnest"
)

// RedactCommand is RedactString for a shell command line, which the record must show as it
// ran: a secret is replaced only where the shell takes it as data, inside one word that no
// command runs (an argument, an assigned value, a here-document a file is written from). A
// pattern reaching past a line break or a word's end (`echo Bearer` and, on the next line,
// the program it runs; a key's header and lines that are commands) takes nothing there. A
// line that does not parse, or that defines an alias, keeps every secret in it.
func RedactCommand(cmd string) string {
	if !containsAny(strings.ToLower(cmd), allPatternHints) {
		return cmd
	}
	var spans [][2]int
	parsed, ok := false, false
	return redact(cmd, func(start, end int) bool {
		if !parsed {
			spans, ok = dataSpans(cmd)
			parsed = true
		}
		if !ok {
			return false
		}
		for _, s := range spans {
			if s[0] <= start && end <= s[1] {
				return true
			}
		}
		return false
	})
}

// allPatternHints is every secretPatterns hint.
var allPatternHints = func() []string {
	var all []string
	for _, p := range secretPatterns {
		all = append(all, p.hints...)
	}
	return all
}()

// emitters are programs that pass the text of their words or here-document on (to a file
// or a pipe): that text is data only in a line that runs no shell or interpreter after
// them (`echo 'KEY…' > k.sh; bash k.sh`, `cat <<E | python3`).
var emitters = map[string]bool{"echo": true, "printf": true, "cat": true, "tee": true}

// dataSpans returns the byte ranges of cmd that the shell takes as data: literal words
// (quoted or not, nothing expanded in them) that are arguments of a program named in the
// line that does not run them, values assigned to a name the line does not expand, and
// literal here-documents given to cat or tee. False when cmd does not parse, defines an
// alias, or runs what it reads as data (runsData).
func dataSpans(cmd string) ([][2]int, bool) {
	if shnest.TooDeep(cmd) || runsData.MatchString(cmd) {
		return nil, false
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(cmd), "")
	if err != nil {
		return nil, false
	}
	// What the line defines, expands and runs, before any span is taken.
	funcs, expanded := map[string]bool{}, map[string]bool{}
	aliases, indirect, runner := false, false, false
	syntax.Walk(f, func(n syntax.Node) bool {
		switch x := n.(type) {
		case *syntax.FuncDecl:
			if x.Name != nil {
				funcs[x.Name.Value] = true
			}
			for _, l := range x.Names {
				funcs[l.Value] = true
			}
		case *syntax.ParamExp:
			if x.Excl || x.Param == nil {
				indirect = true
			} else {
				expanded[x.Param.Value] = true
			}
		case *syntax.CallExpr:
			if len(x.Args) > 0 {
				argv, ok := literalArgv(x.Args)
				aliases = aliases || argv[0] == "alias"
				runner = runner || !ok || classifier.RunsItsWords(argv)
			}
		}
		return true
	})
	if aliases {
		return nil, false
	}
	for name := range funcs {
		runner = runner || expanded[name] // a function run by an expansion's name
	}
	var spans [][2]int
	var pipedFrom [][2]int // the left side of each pipe
	add := func(n syntax.Node, emitted bool) {
		s := [2]int{int(n.Pos().Offset()), int(n.End().Offset())}
		if emitted {
			if runner {
				return
			}
			for _, p := range pipedFrom {
				if p[0] <= s[0] && s[1] <= p[1] {
					return
				}
			}
		}
		spans = append(spans, s)
	}
	assigned := func(as []*syntax.Assign) {
		for _, a := range as {
			if a.Value != nil && a.Name != nil && !indirect && !expanded[a.Name.Value] {
				if _, ok := literal(a.Value); ok {
					add(a.Value, false)
				}
			}
		}
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		switch x := n.(type) {
		case *syntax.CmdSubst, *syntax.ProcSubst, *syntax.ArithmExp, *syntax.ArithmCmd:
			// What a substitution prints may be a command's name or words.
			return false
		case *syntax.BinaryCmd:
			if x.Op == syntax.Pipe || x.Op == syntax.PipeAll {
				pipedFrom = append(pipedFrom, [2]int{int(x.X.Pos().Offset()), int(x.X.End().Offset())})
			}
		case *syntax.DeclClause:
			assigned(x.Args)
		case *syntax.Stmt:
			call, ok := x.Cmd.(*syntax.CallExpr)
			if !ok || len(call.Args) == 0 {
				break
			}
			argv, _ := literalArgv(call.Args)
			for _, r := range x.Redirs {
				if (r.Op == syntax.Hdoc || r.Op == syntax.DashHdoc) && r.Hdoc != nil && emitters[argv[0]] {
					if _, ok := literal(r.Hdoc); ok {
						add(r.Hdoc, true)
					}
				}
			}
		case *syntax.CallExpr:
			assigned(x.Assigns)
			if len(x.Args) == 0 {
				break
			}
			argv, ok := literalArgv(x.Args)
			if !ok || classifier.RunsItsWords(argv) || funcs[argv[0]] {
				break
			}
			for _, w := range x.Args[1:] {
				if _, ok := literal(w); ok {
					add(w, emitters[argv[0]])
				}
			}
		}
		return true
	})
	return spans, true
}

// literal is the word w as the shell reads it when nothing in it expands: plain text and
// quotes only.
func literal(w *syntax.Word) (string, bool) {
	var b strings.Builder
	for _, p := range w.Parts {
		switch x := p.(type) {
		case *syntax.Lit:
			// Outside quotes a backslash makes the next character plain (\timeout is timeout).
			for i := 0; i < len(x.Value); i++ {
				if x.Value[i] == '\\' && i+1 < len(x.Value) {
					if i++; x.Value[i] == '\n' {
						continue // a line continued
					}
				}
				b.WriteByte(x.Value[i])
			}
		case *syntax.SglQuoted:
			if x.Dollar {
				return "", false
			}
			b.WriteString(x.Value)
		case *syntax.DblQuoted:
			for _, q := range x.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok {
					return "", false
				}
				b.WriteString(dquoteEscapes.Replace(l.Value))
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}

// dquoteEscapes are the backslash escapes bash reads inside double quotes.
var dquoteEscapes = strings.NewReplacer(`\$`, "$", "\\`", "`", `\"`, `"`, `\\`, `\`, "\\\n", "")

// literalArgv is a command's words as the shell passes them, its program by its base name;
// false when its program is not a literal (what an expansion names is known only when it
// runs). A word that expands is "" here.
func literalArgv(args []*syntax.Word) ([]string, bool) {
	name, ok := literal(args[0])
	if !ok {
		return []string{""}, false
	}
	if name != "." {
		name = path.Base(name)
	}
	argv := []string{name}
	for _, w := range args[1:] {
		v, _ := literal(w)
		argv = append(argv, v)
	}
	return argv, true
}
