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
// command runs (an argument, an assigned value, a here-document a file is written from), and
// only text that cannot name a file or hold a command line (no "/", no line break, no blank):
// at worst a bare name, where a path or a script could be what ran. A private key's block,
// lines and slashes and all, is replaced only in a here-document or a quoted word given to
// cat, tee, echo or printf in a line that runs nothing but them and file commands
// (afterWrite). A line that does not parse, defines an alias or runs a command its
// text does not name keeps every secret in it.
func RedactCommand(cmd string) string {
	if !containsAny(strings.ToLower(cmd), allPatternHints) {
		return cmd
	}
	var d *cmdData
	var read string
	return redact(cmd, func(cur, pattern string, start, end int) bool {
		key := pattern == "private_key"
		if !key && strings.ContainsAny(cur[start:end], "/\n \t") {
			return false
		}
		if d == nil || read != cur {
			// Read again once a pattern has replaced something: the offsets are the
			// current text's.
			d, read = dataSpans(cur), cur
		}
		for _, s := range d.spans {
			if s.start <= start && end <= s.end && (!key || s.emitted) {
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
// or a pipe): that text is data only in a line that runs nothing but them and afterWrite's,
// and does not pipe it on: any other program may run what they wrote (`echo 'KEY…' > k.sh;
// ./k.sh`, `PATH=.:$PATH k`, `npm test` of a script it wrote, `cat <<E | python3`).
var emitters = map[string]bool{"echo": true, "printf": true, "cat": true, "tee": true}

// afterWrite are the file commands a line may run beside emitters and still write data: none
// runs a file it is given (cat > id_rsa <<E … E; chmod 600 id_rsa).
var afterWrite = map[string]bool{"chmod": true, "chown": true, "mkdir": true, "cd": true, "ls": true, "stat": true,
	"wc": true, "true": true, ":": true, "test": true, "[": true, "head": true, "tail": true, "grep": true, "diff": true,
	"cmp": true, "sha256sum": true, "sha1sum": true, "md5sum": true, "rm": true, "cp": true, "mv": true, "touch": true}

// cmdData is what of a command line the shell takes as data (dataSpans).
type cmdData struct {
	spans []dataSpan
	// pathRun: the line runs a program by its path (./x.sh), which may be a file the line
	// writes.
	pathRun bool
}

// dataSpan is a byte range of a command line the shell takes as data; emitted when it is
// passed on (a word or here-document of echo, printf, cat or tee).
type dataSpan struct {
	start, end int
	emitted    bool
}

// dataSpans finds the byte ranges of cmd that the shell takes as data: literal words (quoted
// or not, nothing expanded in them) that are arguments of a command that does not run its
// words (classifier.RunsItsWords), values assigned to a name the line does not expand, and
// literal here-documents given to cat or tee. None when cmd does not parse, defines an alias,
// names a command by an expansion, or runs what it reads as data (runsData).
func dataSpans(cmd string) *cmdData {
	d := &cmdData{}
	if shnest.TooDeep(cmd) || runsData.MatchString(cmd) {
		return d
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(cmd), "")
	if err != nil {
		return d
	}
	// What the line defines, expands and runs, before any span is taken.
	funcs, expanded := map[string]bool{}, map[string]bool{}
	aliases, indirect, runner, unnamed, others := false, false, false, false, false
	syntax.Walk(f, func(n syntax.Node) bool {
		switch x := n.(type) {
		case *syntax.DeclClause:
			for _, a := range x.Args {
				if v, _ := literal(a.Value); a.Naked && strings.HasPrefix(v, "-") && strings.Contains(v, "n") {
					indirect = true // declare -n: a name another one expands
				}
			}
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
				unnamed = unnamed || !ok
				runner = runner || classifier.RunsItsWords(argv)
				others = others || !emitters[argv[0]] && !afterWrite[argv[0]]
				if w, _ := literal(x.Args[0]); strings.Contains(w, "/") {
					d.pathRun = true
				}
			}
		}
		return true
	})
	if aliases || unnamed {
		// An alias runs its value; a command named by an expansion ($r, $(printenv X)) may
		// be any word of the line, an assigned value or an argument.
		return d
	}
	for name := range funcs {
		runner = runner || expanded[name] // a function run by an expansion's name
	}
	var pipedFrom [][2]int // the left side of each pipe
	add := func(n syntax.Node, emitted bool) {
		s := dataSpan{start: int(n.Pos().Offset()), end: int(n.End().Offset()), emitted: emitted}
		if emitted {
			if runner || d.pathRun || others {
				return // what it passes on may be a script the line runs
			}
			for _, p := range pipedFrom {
				if p[0] <= s.start && s.end <= p[1] {
					return
				}
			}
		}
		d.spans = append(d.spans, s)
	}
	// An assigned value is data unless the line may read it as code: by its name, through
	// another name, or from the environment of a shell or runner it starts (env | sh), or
	// later, as bash does PS4's substitutions.
	assigned := func(as []*syntax.Assign) {
		for _, a := range as {
			if a.Value == nil || a.Name == nil || indirect || runner || expanded[a.Name.Value] {
				continue
			}
			if v, ok := literal(a.Value); ok && !strings.Contains(v, "$(") && !strings.Contains(v, "${") && !strings.Contains(v, "`") {
				add(a.Value, false)
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
	return d
}

// literal is the word w as the shell reads it when nothing in it expands: plain text and
// quotes only.
func literal(w *syntax.Word) (string, bool) {
	if w == nil {
		return "", false
	}
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
