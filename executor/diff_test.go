package executor

import (
	"fmt"
	"strings"
	"testing"
)

// referenceDiff is UnifiedDiff as it was first written, by whole lines split apart: the
// model the in-place one must match. It is a one-hunk unified diff of old against new (the changed middle after the
// common leading and trailing lines, with up to three lines of context).
func referenceDiff(name, old, new string, exists bool) string {
	if old == new {
		return ""
	}
	a, b := referenceSplitLines(old), referenceSplitLines(new)
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	const ctxLines = 3
	start := max(0, pre-ctxLines)
	endA, endB := min(len(a), len(a)-suf+ctxLines), min(len(b), len(b)-suf+ctxLines)
	var sb strings.Builder
	from := "a" + name
	if !exists {
		from = "/dev/null"
	}
	fmt.Fprintf(&sb, "--- %s\n+++ b%s\n", from, name)
	fmt.Fprintf(&sb, "@@ -%s +%s @@\n", referenceHunkRange(start, endA-start), referenceHunkRange(start, endB-start))
	for i := start; i < pre; i++ {
		sb.WriteString(" " + a[i])
	}
	for i := pre; i < len(a)-suf; i++ {
		sb.WriteString("-" + a[i])
	}
	for i := pre; i < len(b)-suf; i++ {
		sb.WriteString("+" + b[i])
	}
	for i := len(a) - suf; i < endA; i++ {
		sb.WriteString(" " + a[i])
	}
	return sb.String()
}

func referenceHunkRange(start, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

// splitLines splits keeping each line's newline; a last line without one gets the marker.
func referenceSplitLines(s string) []string {
	if s == "" {
		return nil
	}
	var out []string
	for len(s) > 0 {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			out = append(out, s+"\n\\ No newline at end of file\n")
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

// diffCases are texts whose diffs meet the edges: no newline at the end, changes at the start,
// the end or both, a text that is the other's prefix, empty ones.
var diffCases = []string{"", "a", "a\n", "b\n", "a\nb", "a\nb\n", "a\nbc\n", "x\nb", "y\nb", "\n", "\n\n\n",
	"1\n2\n3\n4\n5\n6\n7\n8\n9\n", "1\n2\n3\n4\nX\n6\n7\n8\n9\n", "X\n2\n3\n4\n5\n6\n7\n8\nY\n",
	"1\n2\n3\n4\n5\n6\n7\n8\n9", "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n", "a\na\na\n", "a\na\n"}

// TestUnifiedDiffMatchesReference: the in-place diff is the reference's, byte for byte, and
// diffSize its length, for every pair of the edge cases.
func TestUnifiedDiffMatchesReference(t *testing.T) {
	for _, a := range diffCases {
		for _, b := range diffCases {
			for _, exists := range []bool{true, false} {
				checkDiff(t, a, b, exists)
			}
		}
	}
}

func checkDiff(t *testing.T, a, b string, exists bool) {
	t.Helper()
	want, got := referenceDiff("/f", a, b, exists), UnifiedDiff("/f", a, b, exists)
	if got != want {
		t.Fatalf("diff of %q against %q (exists %v):\n%s\nwant\n%s", a, b, exists, got, want)
	}
	if d, fits := unifiedDiffWithin("/f", a, b, exists, len(want)); !fits || d != want {
		t.Fatalf("the diff of %q against %q within its own size: %v %q", a, b, fits, d)
	}
	if _, fits := unifiedDiffWithin("/f", a, b, exists, len(want)-1); fits && want != "" {
		t.Fatalf("the diff of %q against %q fits in a byte less than it takes", a, b)
	}
}

func FuzzUnifiedDiff(f *testing.F) {
	for _, a := range diffCases {
		f.Add(a, "x\n"+a)
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		checkDiff(t, a, b, true)
	})
}

// TestUnifiedDiffOfManyLines: a 4 MiB file of newlines changed at both ends makes a diff of
// every line without a line's worth of garbage each (it took the daemon 742 MB).
func TestUnifiedDiffOfManyLines(t *testing.T) {
	old := strings.Repeat("\n", 4<<20)
	new := "x" + old[1:len(old)-1] + "y\n"
	allocs := testing.AllocsPerRun(1, func() { _ = UnifiedDiff("/f", old, new, true) })
	if allocs > 50 {
		t.Errorf("%v allocations for one diff of %d lines, want a few", allocs, 4<<20)
	}
	d := UnifiedDiff("/f", old, new, true)
	if !strings.HasPrefix(d, fmt.Sprintf("--- a/f\n+++ b/f\n@@ -1,%d +1,%d @@\n-\n-\n", 4<<20, 4<<20-1)) || strings.Count(d, "\n") != 2+1+2*(4<<20)-1 {
		t.Errorf("diff of %d bytes starts %q", len(d), d[:60])
	}
}
