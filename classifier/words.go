package classifier

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// word is one shell word as static analysis sees it. Only val of a static
// word can be trusted to be what the program receives as its argument.
type word struct {
	val    string // the unquoted value; meaningful only when static
	src    string // the source text, always set
	static bool   // every part is a literal or a quoted literal
	// glob is true when an unquoted part can expand to other words at run
	// time (pathname globs, brace expansion): `find . {-delete,}` becomes
	// `find . -delete`, and `rg x *` may pick up a file named `--pre=sh`.
	glob bool
	// param is true when the word holds a parameter expansion, needed for
	// COMPAT's "globs under a variable" critical-path rm.
	param bool
	// tilde is true when the word starts with an unquoted ~ (home expansion).
	tilde bool
	// procSubst is true when the word is one process substitution, <(cmd) or >(cmd): it
	// names a pipe (/dev/fd/N), not a file; cmd's own paths are its words'.
	procSubst bool
	// extGlob is true when the word is made of literals and extended globs (`*(x|y)`) only:
	// not static, but what it matches is decided by its text as a glob's is.
	extGlob bool
	// braced is true for a word brace expansion gave: bash expands braces once, so its
	// braces (an unclosed {*, a literal {a}) are text, never expanded again.
	braced bool
	// node is the word as parsed, for a word that is not static: what its expansions may
	// become is read from it (wordShape).
	node *syntax.Word
}

// srcText returns the source text of a node, bounded so that a position
// beyond the text (which the parser should never produce) cannot panic.
func srcText(src string, n syntax.Node) string {
	return spanText(src, int(n.Pos().Offset()), int(n.End().Offset()))
}

// spanText is src[start:end], bounded as srcText describes.
func spanText(src string, start, end int) string {
	if start < 0 || start > len(src) {
		return ""
	}
	if end > len(src) {
		end = len(src)
	}
	if end < start {
		return ""
	}
	return src[start:end]
}

// evalWord computes the static view of w without expanding anything.
func evalWord(src string, w *syntax.Word) word {
	var out word
	evalWordTo(&out, src, w)
	return out
}

// evalWordTo is evalWord writing its result to *dst, which it overwrites.
func evalWordTo(dst *word, src string, w *syntax.Word) {
	if len(w.Parts) == 1 {
		// Fast path for the common plain word: no copy when nothing needs
		// unescaping or marks an expansion.
		if l, ok := w.Parts[0].(*syntax.Lit); ok && plainLit(l.Value) {
			// A one-literal word spans exactly its literal.
			*dst = word{src: spanText(src, int(l.ValuePos.Offset()), int(l.ValueEnd.Offset())), static: true, val: l.Value}
			return
		}
		if q, ok := w.Parts[0].(*syntax.SglQuoted); ok && !q.Dollar {
			*dst = word{src: srcText(src, w), static: true, val: q.Value}
			return
		}
	}
	*dst = evalWordSlow(src, w)
}

// evalWordSlow is evalWord for words that need unquoting.
func evalWordSlow(src string, w *syntax.Word) word {
	out := word{src: srcText(src, w), static: true}
	var b strings.Builder
	litOrExtGlob := true // every part a literal or an extended glob
	for i, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			unquoteLit(&b, p.Value, &out, i == 0)
			continue
		case *syntax.SglQuoted:
			if p.Dollar && strings.ContainsRune(p.Value, '\\') {
				// $'..' escapes (\x, \u, \c) are decoded by bash; rather than
				// reimplement them, such a word is not static.
				out.static = false
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			for _, dp := range p.Parts {
				switch d := dp.(type) {
				case *syntax.Lit:
					unquoteDbl(&b, d.Value)
				case *syntax.ParamExp:
					out.static = false
					out.param = true
				default:
					out.static = false
				}
			}
		case *syntax.ParamExp:
			out.static = false
			out.param = true
		default:
			// Command and process substitution, arithmetic, extended globs and
			// brace expansion all produce text known only at run time.
			out.static = false
			if _, ok := p.(*syntax.ExtGlob); ok {
				out.glob = true
				continue
			}
			if _, ok := p.(*syntax.BraceExp); ok {
				out.glob = true
			}
		}
		litOrExtGlob = false
	}
	out.val = b.String()
	if !out.static {
		out.node = w
	}
	if len(w.Parts) == 1 {
		_, out.procSubst = w.Parts[0].(*syntax.ProcSubst)
	}
	out.extGlob = !out.static && litOrExtGlob
	if !out.glob && len(w.Parts) > 1 && (braceExpands(w) || bracketAcrossParts(w)) {
		// {"-o",f}: the comma is in another literal part than the brace. -dele["t"]e: the ]
		// closing the bracket expression is in another literal part than its [, and bash
		// globs it to a file named -delete.
		out.glob = true
	}
	return out
}

// bracketAcrossParts reports an unquoted [ followed, in the same or a later unquoted literal
// of w, by an unquoted ]: a bracket expression bash matches file names with, whatever quoted
// text sits inside it.
func bracketAcrossParts(w *syntax.Word) bool {
	open := false
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
			case '[':
				open = true
			case ']':
				if open {
					return true
				}
			}
		}
	}
	return false
}

// plainLit reports whether s holds none of \ * ? [ { ~, the characters
// unquoteLit would remove or note.
func plainLit(s string) bool {
	for i := 0; i < len(s); i++ {
		if litSpecial[s[i]] {
			return false
		}
	}
	return true
}

var litSpecial = [256]bool{'\\': true, '*': true, '?': true, '[': true, '{': true, '~': true}

// unquoteLit appends an unquoted literal, removing backslash escapes and
// noting glob, brace and tilde characters that bash would expand.
func unquoteLit(b *strings.Builder, s string, w *word, first bool) {
	if first && strings.HasPrefix(s, "~") {
		w.tilde = true
	}
	braceOpen := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '\\':
			if i+1 < len(s) {
				i++
				if s[i] != '\n' {
					b.WriteByte(s[i])
				}
			}
			continue
		case '*', '?':
			w.glob = true
		case '[':
			// A lone [ (the test command) is literal; [...] is a glob.
			if strings.IndexByte(s[i+1:], ']') >= 0 {
				w.glob = true
			}
		case '{':
			braceOpen = true
		case ',':
			if braceOpen {
				w.glob = true
			}
		case '.':
			if braceOpen && i+1 < len(s) && s[i+1] == '.' {
				w.glob = true
			}
		}
		b.WriteByte(c)
	}
}

// unquoteDbl appends a literal from inside double quotes, where a backslash
// only escapes $ ` " \ and newline.
func unquoteDbl(b *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' && i+1 < len(s) {
			switch s[i+1] {
			case '$', '`', '"', '\\':
				b.WriteByte(s[i+1])
				i++
				continue
			case '\n':
				i++
				continue
			}
		}
		b.WriteByte(c)
	}
}
