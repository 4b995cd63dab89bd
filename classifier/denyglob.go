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
)

// denyGlobs fills out.DenyGlobs and out.DenyExpanded from sb's words, DenyPrefix's last
// len(out.DenyPrefix) of them. The command name is not looked at: one the shell expands makes
// the command opaque.
func denyGlobs(out *Subcommand, sb *sub) {
	off := len(sb.args) - len(out.DenyPrefix)
	if len(sb.args) == 0 || off < 0 {
		return
	}
	var globs []GlobKind
	braces := false
	appended := xargsAppends(sb.args[:off])
	if appended {
		globs = make([]GlobKind, len(out.DenyPrefix))
	}
	for i := 1; i < len(out.DenyPrefix); i++ {
		a := sb.args[off+i]
		kind := GlobNone
		switch {
		case !a.static:
			kind = GlobAny
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
	if braces || appended {
		e := DenyWords{Words: out.DenyPrefix, Globs: globs}
		if braces {
			e = braceExpanded(out.DenyPrefix, globs, sb.args[off:])
		}
		if appended {
			// xargs puts the words it reads after the command's own: any words.
			e.Words = append(append([]string(nil), e.Words...), "")
			e.Globs = append(append([]GlobKind(nil), e.Globs...), GlobAny)
		}
		out.DenyExpanded = &e
	}
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

// braceExpanded is a command's deny words with each brace word replaced by the words its
// expansion gives (`{push,origin}` is push origin; an empty unquoted one is dropped, as bash
// drops it), each a glob still or a static word. A brace word it cannot expand (too many
// words, a parse error) stays, as GlobAny.
func braceExpanded(words []string, globs []GlobKind, args []word) DenyWords {
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
		}
		for _, e := range exp {
			out.Words = append(out.Words, e.Words...)
			out.Globs = append(out.Globs, e.Globs...)
		}
	}
	return out
}

// expandBraces returns the words the brace expansion of the shell word src gives, nil if it
// has none or they cannot be told (too many, a parse error).
func expandBraces(src string) []DenyWords {
	f, err := syntax.NewParser().Parse(strings.NewReader("x "+src), "")
	if err != nil || len(f.Stmts) != 1 {
		return nil
	}
	call, ok := f.Stmts[0].Cmd.(*syntax.CallExpr)
	if !ok || len(call.Args) != 2 {
		return nil
	}
	w := call.Args[1]
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
