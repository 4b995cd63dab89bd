package audit

import (
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"

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

// runsArgs are programs that run their arguments, or take a program or code from them (a
// shell, a wrapper, an interpreter, an editor of commands): their words are not data.
var runsArgs = map[string]bool{
	"sh": true, "bash": true, "zsh": true, "dash": true, "ksh": true, "mksh": true, "fish": true, "busybox": true,
	"eval": true, "exec": true, "command": true, "builtin": true, "source": true, ".": true, "trap": true,
	"xargs": true, "env": true, "sudo": true, "doas": true, "su": true, "runuser": true, "nohup": true,
	"nice": true, "ionice": true, "timeout": true, "time": true, "setsid": true, "stdbuf": true,
	"chroot": true, "unshare": true, "nsenter": true, "flock": true, "taskset": true, "strace": true,
	"ltrace": true, "watch": true, "ssh": true, "script": true, "parallel": true, "find": true,
	"python": true, "pypy": true, "perl": true, "ruby": true, "node": true, "nodejs": true, "deno": true,
	"bun": true, "php": true, "lua": true, "tclsh": true, "R": true, "Rscript": true, "osascript": true,
	"awk": true, "gawk": true, "mawk": true, "nawk": true, "sed": true, "make": true, "npx": true,
	"gdb": true, "vim": true, "vi": true, "ex": true, "ed": true, "at": true, "batch": true, "crontab": true,
}

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
				name, ok := literal(x.Args[0])
				aliases = aliases || name == "alias"
				runner = runner || !ok || runsArgs[programName(name)]
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
			name, _ := literal(call.Args[0])
			for _, r := range x.Redirs {
				if (r.Op == syntax.Hdoc || r.Op == syntax.DashHdoc) && r.Hdoc != nil && emitters[name] {
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
			name, ok := literal(x.Args[0])
			if !ok || runsArgs[programName(name)] || funcs[name] {
				break
			}
			for _, w := range x.Args[1:] {
				if _, ok := literal(w); ok {
					add(w, emitters[programName(name)])
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

// programName is the name a command word runs, its dir and a version's digits cut
// (/usr/bin/python3.12 is python).
func programName(word string) string {
	if word == "." {
		return word
	}
	return strings.TrimRight(path.Base(word), "0123456789.")
}
