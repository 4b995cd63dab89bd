package cli

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// What sbctl shows a person (an approval's command, a file's diff, an audit record's input, a
// rule, a path) is mostly written by the agent it confines. A terminal acts on some of what it
// prints: an escape sequence or a carriage return can erase a line and draw another, so an
// approver would read `ls` and approve `curl … | sh`; bidirectional overrides and invisible
// characters reorder or hide text the same way without a terminal's help. Visible shows each
// such character as an escape instead, so what a person reads is what runs.

// Visible returns s for one line of a terminal: control characters (a tab too, which would
// shift a table's columns), bidirectional and other invisible formatting characters, spaces
// other than U+0020 and characters drawn blank, and bytes that are not UTF-8 are shown as
// Go-style escapes; a newline is ⏎.
func Visible(s string) string { return visible(s, false) }

// VisibleLines is Visible for a block of lines (a diff): newlines and tabs are kept.
func VisibleLines(s string) string { return visible(s, true) }

func visible(s string, lines bool) string {
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if hidden(r, size, lines) {
			break
		}
		i += size
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case !hidden(r, size, lines):
			b.WriteString(s[i : i+size])
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString("⏎")
		case r < utf8.RuneSelf:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r > 0xffff:
			fmt.Fprintf(&b, `\U%08x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += size
	}
	return b.String()
}

// hidden reports whether a rune (size bytes of input) must be shown as an escape.
func hidden(r rune, size int, lines bool) bool {
	switch {
	case r == utf8.RuneError && size == 1:
		return true
	case r == '\n' || r == '\t':
		return !lines
	case r < utf8.RuneSelf:
		return r < 0x20 || r == 0x7f
	}
	// Not printable: controls, formatting, separators, surrogates, private use and unassigned
	// code points, and every space but U+0020 (a no-break or ideographic space looks like a
	// space but is none to a shell, and a run of them is blank padding that Shown would not
	// see). Nor the printable characters that draw nothing.
	return !unicode.IsPrint(r) || blankGlyph(r) || unicode.In(r,
		unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point)
}

// blankGlyph reports the printable characters a terminal draws as empty cells: the braille
// blank and the Hangul fillers.
func blankGlyph(r rune) bool {
	switch r {
	case '\u2800', '\u115f', '\u1160', '\u3164', '\uffa0':
		return true
	}
	return false
}
