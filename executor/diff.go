package executor

import (
	"fmt"
	"math"
	"strings"
)

// noNewline marks a last line without its newline, as diff does.
const noNewline = "\n\\ No newline at end of file\n"

// diffContext is how many unchanged lines a hunk shows on each side.
const diffContext = 3

// UnifiedDiff is a one-hunk unified diff of old against new (the changed middle after the
// common leading and trailing lines, with up to three lines of context).
//
// It works on the texts in place, lines found as it writes: the daemon makes one for every
// approval of a Write or Edit, and splitting a 4 MiB file of newlines into lines took it
// hundreds of MB.
func UnifiedDiff(name, old, new string, exists bool) string {
	diff, _ := unifiedDiffWithin(name, old, new, exists, math.MaxInt)
	return diff
}

// unifiedDiffWithin is UnifiedDiff when it is at most max bytes long; past that it is not
// made, and fits is false: its size is known before it is written.
func unifiedDiffWithin(name, old, new string, exists bool, max int) (diff string, fits bool) {
	d := diffOf(old, new)
	if d.same {
		return "", max >= 0
	}
	n := d.size(name, exists)
	if n > max {
		return "", false
	}
	var sb strings.Builder
	sb.Grow(n)
	d.write(&sb, name, exists)
	return sb.String(), true
}

// lineDiff is old against new as a common head, changed middles and a common tail, each in
// whole lines.
type lineDiff struct {
	same              bool
	old, new          string
	ctx               string // the head's last lines shown before the change
	oldMid, newMid    string
	tail              string // the tail's first lines shown after the change
	start, nOld, nNew int    // the hunk's first line (0-based) and lengths
}

func diffOf(old, new string) lineDiff {
	if old == new {
		return lineDiff{same: true}
	}
	// The head: the lines both hold whole, up to the first byte that differs.
	i := 0
	for i < len(old) && i < len(new) && old[i] == new[i] {
		i++
	}
	pre := strings.LastIndexByte(old[:i], '\n') + 1
	// The tail: the common trailing bytes past the head, cut to start a line in both.
	j := 0
	for j < len(old)-pre && j < len(new)-pre && old[len(old)-1-j] == new[len(new)-1-j] {
		j++
	}
	if !lineStart(old, len(old)-j) || !lineStart(new, len(new)-j) {
		if k := strings.IndexByte(old[len(old)-j:], '\n'); k < 0 {
			j = 0
		} else {
			j -= k + 1
		}
	}
	d := lineDiff{old: old, new: new, oldMid: old[pre : len(old)-j], newMid: new[pre : len(new)-j]}
	// Up to diffContext lines of the head before the change, and of the tail after it.
	ctxStart := pre
	for n := 0; n < diffContext && ctxStart > 0; n++ {
		ctxStart = strings.LastIndexByte(old[:ctxStart-1], '\n') + 1
	}
	d.ctx = old[ctxStart:pre]
	tail := old[len(old)-j:]
	tailEnd := 0
	for n := 0; n < diffContext && tailEnd < len(tail); n++ {
		if k := strings.IndexByte(tail[tailEnd:], '\n'); k < 0 {
			tailEnd = len(tail)
		} else {
			tailEnd += k + 1
		}
	}
	d.tail = tail[:tailEnd]
	d.start = strings.Count(old[:ctxStart], "\n")
	ctxLines, tailLines := lineCount(d.ctx), lineCount(d.tail)
	d.nOld = ctxLines + lineCount(d.oldMid) + tailLines
	d.nNew = ctxLines + lineCount(d.newMid) + tailLines
	return d
}

// lineStart reports whether byte at of s begins a line.
func lineStart(s string, at int) bool { return at == 0 || s[at-1] == '\n' }

// lineCount is how many lines s holds, a last one without its newline included.
func lineCount(s string) int {
	n := strings.Count(s, "\n")
	if s != "" && s[len(s)-1] != '\n' {
		n++
	}
	return n
}

func (d *lineDiff) header(name string, exists bool) string {
	from := "a" + name
	if !exists {
		from = "/dev/null"
	}
	return fmt.Sprintf("--- %s\n+++ b%s\n@@ -%s +%s @@\n", from, name, hunkRange(d.start, d.nOld), hunkRange(d.start, d.nNew))
}

// size is the length of the diff write writes: each line once more its one-byte mark, and
// the marker of a last line without its newline.
func (d *lineDiff) size(name string, exists bool) int {
	n := len(d.header(name, exists))
	for _, part := range []string{d.ctx, d.oldMid, d.newMid, d.tail} {
		n += len(part) + lineCount(part)
		if part != "" && part[len(part)-1] != '\n' {
			n += len(noNewline)
		}
	}
	return n
}

func (d *lineDiff) write(sb *strings.Builder, name string, exists bool) {
	sb.WriteString(d.header(name, exists))
	writeLines(sb, ' ', d.ctx)
	writeLines(sb, '-', d.oldMid)
	writeLines(sb, '+', d.newMid)
	writeLines(sb, ' ', d.tail)
}

// writeLines writes each line of s after mark; a last line without its newline gets the
// marker instead.
func writeLines(sb *strings.Builder, mark byte, s string) {
	for s != "" {
		k := strings.IndexByte(s, '\n')
		sb.WriteByte(mark)
		if k < 0 {
			sb.WriteString(s)
			sb.WriteString(noNewline)
			return
		}
		sb.WriteString(s[:k+1])
		s = s[k+1:]
	}
}

func hunkRange(start, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}
