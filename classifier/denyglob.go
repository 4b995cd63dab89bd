package classifier

import (
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// Deny and ask rules name words (`Bash(git push *)`), and a word the shell expands is not
// the word it runs: `git {push,} origin` runs git push, and so does `git pus* origin` once a
// file named push is there, which the line itself can make. So the words of DenyPrefix that
// the shell expands are marked (Subcommand.DenyGlobs) for the matcher to take for whatever
// they may become (permission.MatchBashGlobs), and braces are expanded here, where the words
// are known, into the words the rules meet too (Subcommand.DenyExpanded).

// maxBraceWords bounds the words one brace word may expand to here; past it the word is taken
// for any words at all.
const maxBraceWords = 256

// DenyWords are a command's words for deny and ask rules, with Globs marking those known only
// at run time (DenyGlobs).
type DenyWords struct {
	Words []string   `json:"words"`
	Globs []GlobKind `json:"globs"`
	// Shapes holds, where Globs is GlobOne, the word's shape; "" elsewhere.
	Shapes []string `json:"shapes,omitempty"`
}

// GlobKind says what a word of DenyPrefix may become when the shell expands it.
type GlobKind string

const (
	// GlobNone: the word is what the program gets.
	GlobNone GlobKind = ""
	// GlobPattern: a pathname pattern (pus*, [p]ush): any names matching it, or itself.
	GlobPattern GlobKind = "pattern"
	// GlobAny: built when the line runs ($X, $(…), a brace expansion past the bound): any
	// words, or none.
	GlobAny GlobKind = "any"
	// GlobOne: literals and quoted expansions only (./"$f", "$dir"/x.o, "$f"): exactly one
	// word, holding the literals in their order, its shape (Subcommand.DenyShapes) the
	// literals with ShapeGap for each expansion. `rm ./"$f"` is never `rm -rf`.
	GlobOne GlobKind = "one"
)

// ShapeGap stands in a word's shape for a quoted expansion: any text, "/" and blanks too.
const ShapeGap = "\x03"

// denyGlobs fills out.DenyGlobs and out.DenyExpanded from sb's words, DenyPrefix's last
// len(out.DenyPrefix) of them. The command name is not looked at: one the shell expands makes
// the command opaque.
func denyGlobs(out *Subcommand, sb *sub) {
	off := len(sb.args) - len(out.DenyPrefix)
	if len(sb.args) == 0 || off < 0 {
		return
	}
	var globs []GlobKind
	var shapes []string
	braces := false
	appended := xargsAppends(sb.args[:off])
	if appended {
		globs = make([]GlobKind, len(out.DenyPrefix))
	}
	repl := xargsReplace(sb.args[:off])
	for i := 1; i < len(out.DenyPrefix); i++ {
		a := sb.args[off+i]
		kind := GlobNone
		switch {
		case repl != "" && strings.Contains(a.val, repl):
			kind = GlobAny // xargs -I{} rm {} x: a line of its input stands there
		case !a.static:
			kind = GlobAny
			if shape, ok := wordShape(a.node); ok {
				kind = GlobOne
				if shapes == nil {
					shapes = make([]string, len(out.DenyPrefix))
				}
				shapes[i] = shape
			}
		case a.glob:
			kind = GlobPattern
			braces = braces || strings.Contains(a.src, "{")
		}
		if kind != GlobNone {
			if globs == nil {
				globs = make([]GlobKind, len(out.DenyPrefix))
			}
			globs[i] = kind
		}
	}
	if globs == nil {
		return
	}
	out.DenyGlobs = globs
	out.DenyShapes = shapes
	if braces || appended {
		e := DenyWords{Words: out.DenyPrefix, Globs: globs, Shapes: shapes}
		if braces {
			e = braceExpanded(out.DenyPrefix, globs, shapes, sb.args[off:])
		}
		if appended {
			// xargs puts the words it reads after the command's own: any words.
			e.Words = append(append([]string(nil), e.Words...), "")
			e.Globs = append(append([]GlobKind(nil), e.Globs...), GlobAny)
			if e.Shapes != nil {
				e.Shapes = append(append([]string(nil), e.Shapes...), "")
			}
		}
		out.DenyExpanded = &e
	}
}

// wordShape is the shape of the shell word w (GlobOne) when it is one word whatever its
// expansions give: unquoted literals without anything bash expands (globs, braces, ~,
// escapes), quoted literals, and expansions inside double quotes that give one word ($x,
// ${x}, $(…), $((…)); not "$@", arrays, indirection or ${x:-…} forms). ok is false otherwise.
func wordShape(w *syntax.Word) (shape string, ok bool) {
	if w == nil {
		return "", false
	}
	var b strings.Builder
	literal := func(s string) bool {
		if strings.Contains(s, ShapeGap) {
			return false
		}
		b.WriteString(s)
		return true
	}
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			if strings.ContainsAny(p.Value, "*?[]{}\\~()") {
				return "", false
			}
			if !literal(p.Value) {
				return "", false
			}
		case *syntax.SglQuoted:
			if p.Dollar && strings.ContainsRune(p.Value, '\\') {
				return "", false
			}
			if !literal(p.Value) {
				return "", false
			}
		case *syntax.DblQuoted:
			for _, dp := range p.Parts {
				switch d := dp.(type) {
				case *syntax.Lit:
					if strings.ContainsRune(d.Value, '\\') || !literal(d.Value) {
						return "", false
					}
				case *syntax.ParamExp:
					if !oneWordParam(d) {
						return "", false
					}
					b.WriteString(ShapeGap)
				case *syntax.CmdSubst, *syntax.ArithmExp:
					b.WriteString(ShapeGap)
				default:
					return "", false
				}
			}
		default:
			return "", false
		}
	}
	return b.String(), strings.Contains(b.String(), ShapeGap)
}

// oneWordParam reports a parameter expansion that, double-quoted, gives one word: a plain
// $x or ${x} (or its length), never $@ or $*, an array or subscript, an indirection, an
// operator form whose word may hold "$@", or any of zsh's flags and modifiers ("${(@)a}",
// "${=a}", "${^a}").
func oneWordParam(p *syntax.ParamExp) bool {
	if p.Param == nil || p.Param.Value == "@" || p.Param.Value == "*" {
		return false
	}
	return p.Flags == nil && !p.Excl && !p.Width && !p.IsSet && p.Split == syntax.OptUnset &&
		p.GlobSubst == syntax.OptUnset && p.RcExpand == syntax.OptUnset && p.NestedParam == nil &&
		p.Index == nil && len(p.Modifiers) == 0 && p.Slice == nil && p.Repl == nil && p.Names == 0 && p.Exp == nil
}

// xargsAppends reports whether the wrappers before a command include an xargs that puts the
// words it reads after the command's (without -I or -i, which put them where a name stands,
// and which the command's words then show as that name).
func xargsAppends(wrappers []word) bool {
	in := false
	for _, a := range wrappers {
		switch {
		case !a.static:
			if in {
				return true // an option known only when it runs: taken to append
			}
		case baseName(a.val) == "xargs":
			in = true
		case in && (a.val == "-I" || strings.HasPrefix(a.val, "-i") || strings.HasPrefix(a.val, "--replace") ||
			strings.HasPrefix(a.val, "-I") || len(a.val) > 1 && a.val[0] == '-' && a.val[1] != '-' && strings.ContainsAny(a.val[1:], "Ii")):
			return false
		}
	}
	return in
}

// xargsReplace is the text an xargs among the wrappers before a command replaces with each
// line it reads (-I R, -IR, -i[R], --replace[=R]; {} by default), or "".
func xargsReplace(wrappers []word) string {
	in := false
	for i, a := range wrappers {
		switch {
		case !a.static:
		case baseName(a.val) == "xargs":
			in = true
		case !in:
		case a.val == "-I" && i+1 < len(wrappers):
			return wrappers[i+1].val
		case strings.HasPrefix(a.val, "-I"):
			return a.val[2:]
		case a.val == "-i" || a.val == "--replace":
			return "{}"
		case strings.HasPrefix(a.val, "-i"):
			return a.val[2:]
		case strings.HasPrefix(a.val, "--replace="):
			return strings.TrimPrefix(a.val, "--replace=")
		}
	}
	return ""
}

// braceExpanded is a command's deny words with each brace word replaced by the words its
// expansion gives (`{push,origin}` is push origin; an empty unquoted one is dropped, as bash
// drops it), each a glob still or a static word. A brace word it cannot expand (too many
// words, a parse error) stays, as GlobAny.
func braceExpanded(words []string, globs []GlobKind, shapes []string, args []word) DenyWords {
	var out DenyWords
	for i, w := range words {
		var exp []DenyWords
		if globs[i] == GlobPattern && strings.Contains(args[i].src, "{") {
			exp = expandBraces(args[i].src)
			if exp == nil {
				exp = []DenyWords{{Words: []string{w}, Globs: []GlobKind{GlobAny}}}
			}
		} else {
			exp = []DenyWords{{Words: []string{w}, Globs: []GlobKind{globs[i]}}}
			if globs[i] == GlobOne {
				exp[0].Shapes = []string{shapes[i]}
			}
		}
		for _, e := range exp {
			if e.Shapes != nil && out.Shapes == nil {
				out.Shapes = make([]string, len(out.Words))
			}
			out.Words = append(out.Words, e.Words...)
			out.Globs = append(out.Globs, e.Globs...)
			if out.Shapes != nil {
				if e.Shapes != nil {
					out.Shapes = append(out.Shapes, e.Shapes...)
				} else {
					out.Shapes = append(out.Shapes, make([]string, len(e.Words))...)
				}
			}
		}
	}
	return out
}

// parseWord parses src, a shell word as written, as the one word it is; ok is false when it
// does not parse as one.
func parseWord(src string) (*syntax.Word, bool) {
	f, err := syntax.NewParser().Parse(strings.NewReader("x "+src), "")
	if err != nil || len(f.Stmts) != 1 {
		return nil, false
	}
	call, ok := f.Stmts[0].Cmd.(*syntax.CallExpr)
	if !ok || len(call.Args) != 2 {
		return nil, false
	}
	return call.Args[1], true
}

// expandBraces returns the words the brace expansion of the shell word src gives, nil if it
// has none or they cannot be told (too many, a parse error).
func expandBraces(src string) []DenyWords {
	w, ok := parseWord(src)
	if !ok {
		return nil
	}
	if !syntax.SplitBraces(w) {
		return nil
	}
	var out []DenyWords
	for e, err := range expand.BracesSeq(nil, w) {
		if err != nil || len(out) >= maxBraceWords {
			return nil
		}
		ev := evalWord("x "+src, e)
		switch {
		case !ev.static:
			out = append(out, DenyWords{Words: []string{ev.src}, Globs: []GlobKind{GlobAny}})
		case ev.val == "" && !strings.ContainsAny(ev.src, `'"`):
			out = append(out, DenyWords{}) // bash drops an empty unquoted word
		case ev.glob:
			out = append(out, DenyWords{Words: []string{ev.val}, Globs: []GlobKind{GlobPattern}})
		default:
			out = append(out, DenyWords{Words: []string{ev.val}, Globs: []GlobKind{GlobNone}})
		}
	}
	return out
}
