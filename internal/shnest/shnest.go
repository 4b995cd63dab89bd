// Package shnest bounds how deep shell text nests before mvdan.cc/sh's parser reads it. The
// parser recurses once for each open bracket, and its stack grows with the depth: 130 KB of
// `(` grows one goroutine's stack to 512 MiB in about 6 s, and the runtime kills the whole
// process when one stack passes 1 GiB. Text from a user (a Bash command, a start-up file,
// a hook line) is checked first; what nests deeper is treated as text that did not parse.
package shnest

// MaxDepth is the deepest nesting of (, { and [ parsed. A command an agent writes nests a
// few levels; a generated script rarely a few dozen.
const MaxDepth = 256

// TooDeep reports whether src has, at some point, more than MaxDepth brackets ((, {, [)
// opened and not yet closed, or a run of more than MaxDepth unary operators (!, ~, -, +,
// blanks between them): `$((!!!…1))` nests one arithmetic node in the next, which the
// parser and every walk over the tree recurse through (129 KB of them took 280 MB to
// classify). Quoting is not looked at, so a quoted bracket or a line of 300 dashes counts
// too: the count is at least the depth the parser sees, and errs toward refusing.
func TooDeep[T string | []byte](src T) bool {
	depth, run := 0, 0
	for i := 0; i < len(src); i++ {
		switch c := src[i]; c {
		case '(', '{', '[':
			if depth++; depth > MaxDepth {
				return true
			}
		case ')', '}', ']':
			if depth > 0 {
				depth--
			}
		case '!', '~', '-', '+':
			if run++; run > MaxDepth {
				return true
			}
			continue
		case ' ', '\t':
			continue // a blank neither starts nor ends a run
		}
		run = 0
	}
	return false
}
