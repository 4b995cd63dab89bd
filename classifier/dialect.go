package classifier

import (
	"fmt"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// A command is parsed as Bash, but not every command runs in bash: an agent that runs its
// commands itself (sbctl hook without --confine) uses its own shell, often zsh, and a script
// given to `sh -c` or `zsh -c` runs in that shell. Where the other shell reads the same text
// as code that bash reads as data, the classification is refused whole (a parse error: never
// read-only, no allow rule matches, deny rules see the text split on blanks; a nested script
// becomes opaque), so what is called read-only is read-only in the shell that runs it.

// The shells a command can be classified for (Options.Shell).
const (
	ShellBash = "bash"
	// ShellZsh is zsh with its default options and EXTENDED_GLOB. Options that make zsh glob
	// or split a variable's value (GLOB_SUBST, SH_WORD_SPLIT, `emulate sh`) are not modelled.
	ShellZsh = "zsh"
	// ShellSh is a POSIX sh: dash, ash, busybox sh, and bash run as sh.
	ShellSh = "sh"
	// shellAny is a shell not known until run time (a runner's $SHELL -c): what zsh or sh
	// reads differently is refused.
	shellAny = "any"
)

// ShellOf is the dialect a shell program reads, by its name or path: "" for a shell the
// classifier cannot read (ksh, fish, csh, ...), whose commands are never classified.
func ShellOf(program string) string {
	// Versioned and restricted names read as their shell: zsh5, bash-5.2, rzsh.
	name := strings.TrimRight(baseName(program), "0123456789.-_")
	if n := strings.TrimPrefix(name, "r"); n == "bash" || n == "zsh" {
		name = n
	}
	switch name {
	case "bash":
		return ShellBash
	case "zsh":
		return ShellZsh
	case "sh", "dash", "ash", "posh", "hush":
		return ShellSh
	}
	return ""
}

// Reasons for text another shell reads differently.
const (
	reasonUnknownShell = "unknown_shell"
	reasonZsh          = "zsh_divergence"
	reasonSh           = "sh_divergence"
)

// checkShell is the text's first construct that shell reads as code, or differently from
// bash, as a failed classification; nil when there is none.
func checkShell(f *syntax.File, src, shell string) *Classification {
	var what string
	switch shell {
	case "", ShellBash:
		return nil
	case ShellZsh:
		what = zshDivergence(f, src)
	case ShellSh:
		what = shDivergence(f)
	case shellAny:
		if what = zshDivergence(f, src); what == "" {
			what = shDivergence(f)
		}
	default:
		return failed(reasonUnknownShell, fmt.Sprintf("not classified: sandboxd reads commands for bash, zsh and POSIX sh, not %q", shell))
	}
	if what == "" {
		return nil
	}
	reason := reasonZsh
	switch shell {
	case ShellSh:
		reason = reasonSh
	case shellAny:
		return failed(reasonZsh, "not classified: the shell that runs it may be zsh or sh, which reads "+what)
	}
	return failed(reason, fmt.Sprintf("not classified: %s reads %s", shell, what))
}

// zshDivergence names the first construct zsh evaluates where bash does not:
//   - a word with ( after a pattern: zsh reads glob qualifiers there, and e:…: and +func run
//     code for each file, P:…: adds words. Bash parses the same text as an extended glob, or
//     as plain text in an operand such as ${x:-*(e:…:)}, which zsh globs too. A ( in
//     unquoted text is refused wherever it is;
//   - $~x, $=x, $^x, $+x, which bash reads as literal text: $~x globs x's value (qualifiers
//     included), $=x splits it into words.
//   - <N-M> with no blanks, zsh's numeric glob, where bash reads an input redirection from
//     N-M followed by another redirection (zshNumericGlob).
//   - $name[...], which zsh subscripts (arithmetic, evaluating $_'s value as code), where bash
//     reads $name and a glob (zshSubscript).
//   - ^ and # in unquoted text: EXTENDED_GLOB makes them glob operators (^x is every name
//     but x, x# is zero or more x), where bash reads plain characters. `find . ^a` is
//     `find . -delete` in a directory holding a file named -delete, and `cat se^x/f` reads
//     secret/f, a name no path check sees. Words that are only matched, never made into
//     file names ([[ ]], case patterns) and arithmetic (16#ff) are left alone.
func zshDivergence(f *syntax.File, src string) (what string) {
	// Text directly inside double quotes is never globbed: ( there is a character.
	quoted := map[*syntax.Lit]bool{}
	// noGlob: literals zsh never makes file names of (see extGlobChar).
	noGlob := map[*syntax.Lit]bool{}
	markNoGlob := func(n syntax.Node) {
		if n == nil {
			return
		}
		syntax.Walk(n, func(n syntax.Node) bool {
			if l, ok := n.(*syntax.Lit); ok {
				noGlob[l] = true
			}
			return true
		})
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.DblQuoted:
			for _, p := range n.Parts {
				if l, ok := p.(*syntax.Lit); ok {
					quoted[l] = true
				}
			}
		case *syntax.TestClause:
			markNoGlob(n.X)
		case *syntax.CaseClause:
			for _, it := range n.Items {
				for _, p := range it.Patterns {
					markNoGlob(p)
				}
			}
		case *syntax.ArithmExp:
			markNoGlob(n.X)
		case *syntax.ArithmCmd:
			markNoGlob(n.X)
		case *syntax.LetClause:
			for _, e := range n.Exprs {
				markNoGlob(e)
			}
		case *syntax.CStyleLoop:
			markNoGlob(n.Init)
			markNoGlob(n.Cond)
			markNoGlob(n.Post)
		case *syntax.ParamExp:
			if n.Param != nil {
				noGlob[n.Param] = true // $# is a name
			}
			markNoGlob(n.Index)
			if n.Slice != nil {
				markNoGlob(n.Slice.Offset)
				markNoGlob(n.Slice.Length)
			}
		}
		return true
	})
	syntax.Walk(f, func(n syntax.Node) bool {
		if what != "" {
			return false
		}
		switch n := n.(type) {
		case *syntax.Redirect:
			if zshNumericGlob(n, src) {
				what = "<" + n.Word.Lit() + "> as a numeric glob, which can expand to any file name"
			}
		case *syntax.Word:
			what = zshSubscript(n.Parts)
		case *syntax.DblQuoted:
			what = zshSubscript(n.Parts)
		case *syntax.ExtGlob:
			what = n.Op.String() + n.Pattern.Value + ") as a glob qualifier, which can run code"
		case *syntax.Lit:
			if !quoted[n] && strings.IndexByte(n.Value, '(') >= 0 {
				what = n.Value + " as a glob qualifier, which can run code"
				break
			}
			// The parser splits a lone $ into a literal of its own: look at what follows it.
			lit := n.Value
			if end := int(n.End().Offset()); strings.HasSuffix(lit, "$") && end < len(src) {
				lit += src[end : end+1]
			}
			if i := zshFlagExpansion(lit); i >= 0 {
				what = lit[i:i+2] + "… as an expansion that globs or splits a value"
				break
			}
			if !quoted[n] && !noGlob[n] {
				if c := extGlobChar(n.Value); c != 0 {
					what = n.Value + " as a pattern (EXTENDED_GLOB's " + string(c) + "), which can expand to any file name"
				}
			}
		}
		return what == ""
	})
	return what
}

// zshSubscript names a $name[...] in parts, a parameter without braces followed by [, whose
// subscript zsh evaluates, quoted or not, where bash reads $name and a glob: the subscript is
// arithmetic, and a name in it is evaluated as an expression, `$_` (the last word of the
// command before) too, so `echo 'path[$(id)1]'; echo $HOME[_]` runs id. A subscript of digits,
// commas and minus signs alone ($x[1], $x[2,-1]) evaluates nothing.
func zshSubscript(parts []syntax.WordPart) string {
	for i := 0; i+1 < len(parts); i++ {
		pe, ok := parts[i].(*syntax.ParamExp)
		if !ok || !pe.Short {
			continue
		}
		l, ok := parts[i+1].(*syntax.Lit)
		if !ok || !strings.HasPrefix(l.Value, "[") {
			continue
		}
		end := strings.IndexByte(l.Value, ']')
		if end > 1 && strings.Trim(l.Value[1:end], "0123456789,-") == "" {
			continue
		}
		return "$" + pe.Param.Value + l.Value + " as a subscript, which is evaluated as code"
	}
	return ""
}

// zshNumericGlob reports an input redirection that zsh reads as a numeric glob: <N-M>, N and
// M optional digits, with no blank between (`cat ~/.ssh/id_ed<->&2` prints
// ~/.ssh/id_ed25519 in zsh), where bash reads `<` from the file N-M and a redirection after it.
func zshNumericGlob(r *syntax.Redirect, src string) bool {
	if r.Op != syntax.RdrIn || r.Word == nil || len(r.Word.Parts) != 1 {
		return false
	}
	l, ok := r.Word.Parts[0].(*syntax.Lit)
	if !ok || r.Word.Pos().Offset() != r.OpPos.Offset()+1 {
		return false
	}
	lo, hi, dash := strings.Cut(l.Value, "-")
	end := int(r.Word.End().Offset())
	return dash && strings.Trim(lo, "0123456789") == "" && strings.Trim(hi, "0123456789") == "" &&
		end < len(src) && src[end] == '>'
}

// extGlobChar is the first unescaped ^ or # of an unquoted literal, or 0. A # is EXTENDED_GLOB's
// wherever it follows text, in the literal or before it ($x#), so every one counts: a # that
// starts a word is a comment, which the parser has already dropped.
func extGlobChar(lit string) byte {
	for i := 0; i < len(lit); i++ {
		switch lit[i] {
		case '\\':
			i++
		case '^', '#':
			return lit[i]
		}
	}
	return 0
}

// zshFlagExpansion is the index of a $ followed by ~, =, ^ or + in lit, or -1.
func zshFlagExpansion(lit string) int {
	for i := strings.IndexByte(lit, '$'); i >= 0 && i+1 < len(lit); {
		if strings.IndexByte("~=^+", lit[i+1]) >= 0 {
			return i
		}
		j := strings.IndexByte(lit[i+1:], '$')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return -1
}

// shDivergence names the first construct a POSIX sh runs where bash does not: $'…' is a $
// and a single-quoted string to dash, so a quote bash reads as escaped ends the string there
// and what follows runs; ((…)) is two nested subshells running a command; &> and &>> end the
// command before them with & and redirect the words after them, a command of their own
// (`ls &>/dev/null ./evil.sh` runs ./evil.sh). [[ is a command dash does not have: once it
// fails, the words after a || in it run (`[[ -z x || ./evil.sh ]]`), and its > is a
// redirection made first, which empties the file. (What dash cannot parse, an extended
// glob, runs nothing.)
func shDivergence(f *syntax.File) (what string) {
	syntax.Walk(f, func(n syntax.Node) bool {
		if what != "" {
			return false
		}
		switch n := n.(type) {
		case *syntax.SglQuoted:
			if n.Dollar {
				what = "$'…' as a $ and a quoted string, ending it where bash does not"
			}
		case *syntax.ArithmCmd:
			what = "((…)) as subshells running a command"
		case *syntax.TestClause:
			what = "[[ as a command it does not have, its words after || as a command and its > as a redirection"
		case *syntax.Redirect:
			switch n.Op {
			case syntax.RdrAll, syntax.AppAll, syntax.RdrAllClob, syntax.AppAllClob:
				what = n.Op.String() + " as & (the command before it in the background) and a redirection of a command made of the words after it"
			}
		}
		return what == ""
	})
	return what
}
