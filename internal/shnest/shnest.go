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
// opened and not yet closed. Quoting is not looked at, so a quoted bracket counts too: the
// count is at least the depth the parser sees, and errs toward refusing.
func TooDeep[T string | []byte](src T) bool {
	depth := 0
	for i := 0; i < len(src); i++ {
		switch src[i] {
		case '(', '{', '[':
			if depth++; depth > MaxDepth {
				return true
			}
		case ')', '}', ']':
			if depth > 0 {
				depth--
			}
		}
	}
	return false
}
