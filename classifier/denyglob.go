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

// maxBraceGroups bounds the braces of one word taken apart here, side by side or nested; past
// it the word's expansion cannot be told (GlobAny, an incomplete path list). mvdan.cc/sh's
// BracesSeq rebuilds every word it gives through one closure and one copy of the parts per
// group, so n groups cost n² per word: 1600 groups (8 KB) took seconds and 25 000 gigabytes.
// Words bash users write have a handful.
const maxBraceGroups = 64

// tooManyBraces reports a word, src as written, with more than maxBraceGroups braces. Each {
// counts, quoted or escaped too, which can only take a word for one past the bound: reading
// the source is linear, where taking the groups apart is what the bound is there to spare.
func tooManyBraces(src string) bool {
	return strings.Count(src, "{") > maxBraceGroups
}

// maxLineBraceWords bounds the words brace expansions give over one line (its nested scripts
// too), counted each time a check is given them; past it a brace word's expansion cannot be
// told. Each word given is a path, a deny word and a critical-path check in turn: a 128 KB
// line of 8-group words gave 768 000 of each.
const maxLineBraceWords = 4096

// braceMemo is one Classify's brace expansions by the word's source text, shared by the
// checks that each expand the same word (deny words, paths, the critical-path rm), and the
// count of words they gave against maxLineBraceWords.
type braceMemo struct {
	words map[string][]DenyWords
	given int
}

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
func denyGlobs(out *Subcommand, sb *sub, opts Options) {
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
			e = braceExpanded(out.DenyPrefix, globs, shapes, sb.args[off:], opts)
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
func braceExpanded(words []string, globs []GlobKind, shapes []string, args []word, opts Options) DenyWords {
	var out DenyWords
	for i, w := range words {
		var exp []DenyWords
		if globs[i] == GlobPattern && strings.Contains(args[i].src, "{") {
			exp = expandBraces(args[i].src, opts)
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
// has none or they cannot be told (too many words or braces, for the word or the line, a
// parse error). The result is shared: callers must not change it.
func expandBraces(src string, opts Options) []DenyWords {
	m := opts.braces
	if m == nil {
		return expandBracesOnce(src)
	}
	if m.given >= maxLineBraceWords {
		return nil // spent: not even taken apart
	}
	out, ok := m.words[src]
	if !ok {
		out = expandBracesOnce(src)
		m.words[src] = out
	}
	// Each use counts, a word the memo holds too: each check walks the words it is given.
	if m.given+len(out) > maxLineBraceWords {
		m.given = maxLineBraceWords
		return nil
	}
	m.given += len(out)
	return out
}

// expandBracesOnce is expandBraces without the line's memo and bound.
func expandBracesOnce(src string) []DenyWords {
	if tooManyBraces(src) {
		return nil
	}
	w, ok := parseWord(src)
	if !ok {
		return nil
	}
	if !syntax.SplitBraces(w) {
		return nil
	}
	words, ok := braceProduct(w, maxBraceWords)
	if !ok {
		return nil
	}
	var out []DenyWords
	for _, e := range words {
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

// braceProduct returns the words the brace expansion of w (taken apart by SplitBraces) gives,
// in bash's order, as expand.BracesSeq gives them; ok is false past limit words. BracesSeq
// expands each group alone here: over a whole word it copies each word's parts once per group,
// n² for n groups side by side, where this product of the groups' words costs a word only
// its parts.
func braceProduct(w *syntax.Word, limit int) (words []*syntax.Word, ok bool) {
	alts := make([][][]syntax.WordPart, 0, len(w.Parts))
	total := 1
	for _, p := range w.Parts {
		br, isBrace := p.(*syntax.BraceExp)
		if !isBrace {
			alts = append(alts, [][]syntax.WordPart{{p}})
			continue
		}
		var as [][]syntax.WordPart
		for e, err := range expand.BracesSeq(nil, &syntax.Word{Parts: []syntax.WordPart{br}}) {
			if err != nil || len(as) >= limit {
				return nil, false
			}
			as = append(as, e.Parts)
		}
		if len(as) == 0 {
			return nil, true
		}
		// total stays at most limit, so the product cannot overflow.
		if total *= len(as); total > limit {
			return nil, false
		}
		alts = append(alts, as)
	}
	// Odometer over the parts' words, the last turning fastest: {a,b}{1,2} is a1 a2 b1 b2.
	at := make([]int, len(alts))
	words = make([]*syntax.Word, 0, total)
	for range total {
		var parts []syntax.WordPart
		for i, as := range alts {
			parts = append(parts, as[at[i]]...)
		}
		words = append(words, &syntax.Word{Parts: parts})
		for i := len(at) - 1; i >= 0; i-- {
			if at[i]++; at[i] < len(alts[i]) {
				break
			}
			at[i] = 0
		}
	}
	return words, true
}
