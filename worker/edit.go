package worker

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sandboxd/sandboxd/internal/errcode"
)

// EditResult is what ApplyEdits did.
type EditResult struct {
	Content      string
	Replacements int
	Fuzzy        bool
	// Start, End are the byte range of the last edit's first replacement in Content.
	Start, End int
}

// ApplyEdits applies edits in order to content, all or nothing. An old_string must occur
// exactly once unless ReplaceAll; when it does not occur at all it is retried with curly
// quotes straightened and whitespace at the end of lines ignored on both sides, and the
// replacement then takes the file's quote style. In a file whose lines end in CRLF, an
// old_string and new_string without \r have their \n read as \r\n (Read shows the lines
// without the \r), so the file keeps its line endings. name is used in error messages.
func ApplyEdits(name, content string, edits []Edit) (*EditResult, error) {
	return ApplyEditsBounded(name, content, edits, MaxEditFileBytes, math.MaxInt64)
}

// ApplyEditsBounded is ApplyEdits with the content never past maxBytes and the edits
// reading at most maxWork bytes in all (each reads the whole content as the edits before it
// left it): the root daemon's approval preview runs the agent's edits in its own memory, where
// edits that grow the content first (a one-byte old_string replaced by sixty, then again)
// would have it find tens of millions of matches. Past either bound: errcode.TooLarge.
func ApplyEditsBounded(name, content string, edits []Edit, maxBytes, maxWork int64) (*EditResult, error) {
	if len(edits) == 0 {
		return nil, errcode.Msg(errcode.Validation, "no edits given; pass old_string and new_string")
	}
	res := &EditResult{Content: content}
	crlf := endsLinesInCRLF(content)
	var work int64
	for i, e := range edits {
		which := ""
		if len(edits) > 1 {
			which = fmt.Sprintf("edit %d: ", i+1)
		}
		if work += int64(len(res.Content)) + 1; work > maxWork {
			return nil, errcode.Msg(errcode.TooLarge, fmt.Sprintf("%sthe edits would read more than %d bytes of %s in all", which, maxWork, name))
		}
		if e.OldString == e.NewString {
			return nil, errcode.Msg(errcode.Validation, which+"old_string and new_string are the same, so there is nothing to change; pass the new text in new_string")
		}
		if e.OldString == "" {
			if res.Content != "" {
				return nil, errcode.Msg(errcode.Validation, which+"old_string is empty but "+name+" is not; pass the exact text to replace, or use Write to replace the whole file")
			}
			res.Content = e.NewString
			res.Replacements++
			res.Start, res.End = 0, len(e.NewString)
			continue
		}
		// The forms old_string is looked for in, in order: in a CRLF file its lines as the
		// file ends them, then as given (a file with some LF lines too).
		type form struct{ old, new string }
		forms := []form{{e.OldString, e.NewString}}
		if crlf && !strings.Contains(e.OldString, "\r") && !strings.Contains(e.NewString, "\r") {
			forms[0] = form{toCRLF(e.OldString), toCRLF(e.NewString)}
			if forms[0].old != e.OldString {
				forms = append(forms, form{e.OldString, e.NewString})
			}
		}
		var spans [][2]int
		var newString string
		for _, f := range forms {
			if spans = findAll(res.Content, f.old); len(spans) > 0 {
				newString = f.new
				break
			}
		}
		for _, f := range forms {
			if len(spans) > 0 {
				break
			}
			if spans = findFuzzy(res.Content, f.old); len(spans) > 0 {
				res.Fuzzy = true
				newString = preserveQuotes(res.Content[spans[0][0]:spans[0][1]], f.new)
			}
		}
		switch {
		case len(spans) == 0:
			return nil, errcode.Msg(errcode.NotFound, fmt.Sprintf("%sold_string was not found in %s: %s. Read the file again and copy the text exactly, including whitespace and indentation", which, name, quoteShort(e.OldString)))
		case len(spans) > 1 && !e.ReplaceAll:
			return nil, errcode.Msg(errcode.Conflict, fmt.Sprintf("%sold_string occurs %d times in %s; add more surrounding lines to old_string so it matches exactly one place, or set replace_all to true to replace all %d", which, len(spans), name, len(spans)))
		}
		// replace_all multiplies new_string by the matches: a one-byte old_string and a long
		// new_string would grow the result far past what Edit takes in (issue 17). Bound it
		// before building it.
		grown := int64(len(res.Content)) + int64(len(spans))*int64(len(newString)-(spans[0][1]-spans[0][0]))
		if grown > maxBytes {
			return nil, errcode.Msg(errcode.TooLarge, fmt.Sprintf("%sreplacing %d occurrences would make %s %d bytes, more than Edit writes (%d); narrow old_string or edit it with Bash (sed)", which, len(spans), name, grown, maxBytes))
		}
		var b strings.Builder
		b.Grow(int(grown))
		prev := 0
		for j, sp := range spans {
			b.WriteString(res.Content[prev:sp[0]])
			if j == 0 {
				res.Start = b.Len()
				res.End = res.Start + len(newString)
			}
			b.WriteString(newString)
			prev = sp[1]
		}
		b.WriteString(res.Content[prev:])
		res.Content = b.String()
		res.Replacements += len(spans)
	}
	return res, nil
}

// endsLinesInCRLF reports whether most of content's lines end in \r\n.
func endsLinesInCRLF(content string) bool {
	crlf := strings.Count(content, "\r\n")
	return crlf > 0 && crlf*2 >= strings.Count(content, "\n")
}

// toCRLF ends s's lines in \r\n.
func toCRLF(s string) string {
	return strings.ReplaceAll(s, "\n", "\r\n")
}

func quoteShort(s string) string {
	if utf8.RuneCountInString(s) > 200 {
		s = string([]rune(s)[:200]) + "…"
	}
	return strconv.Quote(s)
}

// findAll returns the byte spans of the non-overlapping occurrences of sub in s.
func findAll(s, sub string) [][2]int {
	var out [][2]int
	for off := 0; ; {
		i := strings.Index(s[off:], sub)
		if i < 0 {
			return out
		}
		out = append(out, [2]int{off + i, off + i + len(sub)})
		off += i + len(sub)
	}
}

// normalize straightens curly quotes and drops trailing whitespace of every line. idx maps
// each byte of the result to the byte of s it came from (with one extra entry for the end).
func normalize(s string, wantIdx bool) (string, []int) {
	var b strings.Builder
	b.Grow(len(s))
	var idx []int
	if wantIdx {
		idx = make([]int, 0, len(s)+1)
	}
	pendStart := -1 // start of a run of spaces/tabs not yet known to be trailing
	flush := func(upto int) {
		if pendStart < 0 {
			return
		}
		for k := pendStart; k < upto; k++ {
			b.WriteByte(s[k])
			if wantIdx {
				idx = append(idx, k)
			}
		}
		pendStart = -1
	}
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == ' ' || r == '\t':
			if pendStart < 0 {
				pendStart = i
			}
			i += size
			continue
		case r == '\n' || r == '\r':
			pendStart = -1 // trailing: dropped
		default:
			flush(i)
		}
		var out string
		switch r {
		case '\u2018', '\u2019', '\u201a', '\u201b':
			out = "'"
		case '\u201c', '\u201d', '\u201e', '\u201f':
			out = "\""
		default:
			out = s[i : i+size]
		}
		for k := 0; k < len(out); k++ {
			b.WriteByte(out[k])
			if wantIdx {
				// Every byte of a replaced rune maps to the rune's start; End maps past it.
				idx = append(idx, i)
			}
		}
		i += size
	}
	if wantIdx {
		idx = append(idx, len(s))
	}
	return b.String(), idx
}

// findFuzzy finds old in s after normalizing both, and maps the matches back to s.
//
// Whitespace that ends old, with no newline after it, is trailing only if the file's line
// ends there too: a match must then end at the end of a line (or of the file). Otherwise
// "foo\t" would match the "foo" of "food", and "x = foo " the start of "x = foo(bar)".
func findFuzzy(s, old string) [][2]int {
	ns, idx := normalize(s, true)
	nold, _ := normalize(old, false)
	if strings.TrimSpace(nold) == "" {
		return nil
	}
	endsInBlank := strings.TrimRight(old, " \t") != old
	var spans [][2]int
	for off := 0; off <= len(ns); {
		i := strings.Index(ns[off:], nold)
		if i < 0 {
			break
		}
		start, end := off+i, off+i+len(nold)
		if endsInBlank && end < len(ns) && ns[end] != '\n' && ns[end] != '\r' {
			// Not at a line's end: look again one rune on, as a later match may be.
			_, size := utf8.DecodeRuneInString(ns[start:])
			off = start + size
			continue
		}
		spans = append(spans, [2]int{start, end})
		off = end
	}
	var out [][2]int
	for _, sp := range spans {
		start := idx[sp[0]]
		last := idx[sp[1]-1]
		_, size := utf8.DecodeRuneInString(s[last:])
		out = append(out, [2]int{start, last + size})
	}
	return out
}

// preserveQuotes gives newString the curly quotes the file uses in the text it replaces, so
// an agent that typed straight quotes does not change the file's typography.
func preserveQuotes(actual, newString string) string {
	double := strings.ContainsAny(actual, "\u201c\u201d")
	single := strings.ContainsAny(actual, "\u2018\u2019")
	if !double && !single {
		return newString
	}
	var b strings.Builder
	prev := rune(-1)
	rs := []rune(newString)
	for i, r := range rs {
		opening := prev < 0 || unicode.IsSpace(prev) || strings.ContainsRune("([{<\u2014-", prev)
		switch {
		case r == '"' && double:
			if opening {
				b.WriteRune('\u201c')
			} else {
				b.WriteRune('\u201d')
			}
		case r == '\'' && single:
			// An apostrophe inside a word (don't) is a closing quote.
			if opening && !(i+1 < len(rs) && prev >= 0 && unicode.IsLetter(prev)) {
				b.WriteRune('\u2018')
			} else {
				b.WriteRune('\u2019')
			}
		default:
			b.WriteRune(r)
		}
		prev = r
	}
	return b.String()
}

// Snippet returns the lines around content[start:end], cat -n style, with ctx lines of
// context on each side and at most maxLines lines. Only the lines shown are split out, so a
// large file costs one scan for newlines.
func Snippet(content string, start, end, ctx, maxLines int) string {
	startLine := strings.Count(content[:start], "\n") + 1
	endLine := startLine + strings.Count(content[start:end], "\n")
	from := max(1, startLine-ctx)
	to := endLine + ctx
	if to-from+1 > maxLines {
		to = from + maxLines - 1
	}
	// Back up to the start of line `from`.
	pos := start
	for line := startLine; pos > 0 && (line > from || content[pos-1] != '\n'); pos-- {
		if content[pos-1] == '\n' {
			line--
			if line < from {
				break
			}
		}
	}
	var b strings.Builder
	for n := from; n <= to && pos < len(content); n++ {
		l := content[pos:]
		next := len(content)
		if i := strings.IndexByte(l, '\n'); i >= 0 {
			l, next = l[:i], pos+i+1
		}
		l = strings.TrimRight(l, "\r")
		if utf8.RuneCountInString(l) > DefaultMaxLineChars {
			l = string([]rune(l)[:DefaultMaxLineChars]) + "…"
		}
		fmt.Fprintf(&b, "%6d\t%s\n", n, l)
		pos = next
	}
	return b.String()
}
