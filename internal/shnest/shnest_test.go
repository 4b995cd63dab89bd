package shnest

import (
	"runtime"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"
)

func TestTooDeep(t *testing.T) {
	for src, want := range map[string]bool{
		"":                              false,
		"echo $((1+(2*3)))":             false,
		strings.Repeat("(", MaxDepth):   false,
		strings.Repeat("(", MaxDepth+1): true,
		strings.Repeat("()", 10000):     false,
		"echo ${a[" + strings.Repeat("a[", MaxDepth) + "1]}": true,
		"'" + strings.Repeat("{", MaxDepth+1) + "'":          true, // quoted: counted all the same
		"echo $((" + strings.Repeat("!", MaxDepth+1) + "1))": true,
		"echo $((" + strings.Repeat("~ -", MaxDepth) + "1))": true,
		"echo $((" + strings.Repeat("!", MaxDepth) + "1))":   false,
		strings.Repeat("a -b ", 1000):                        false,
	} {
		if got := TooDeep(src); got != want {
			t.Errorf("TooDeep(%.20q… %d bytes) = %v, want %v", src, len(src), got, want)
		}
	}
}

// TestParseAtMaxDepth: text just within the bound parses on a small stack.
func TestParseAtMaxDepth(t *testing.T) {
	for _, src := range []string{
		"echo $((" + strings.Repeat("(", MaxDepth-2),
		"echo ${a[" + strings.Repeat("a[", MaxDepth-2),
		strings.Repeat("{ ", MaxDepth),
		strings.Repeat("$(", MaxDepth),
	} {
		if TooDeep(src) {
			t.Fatalf("%.20q… is within the bound", src)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, _ = syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
		runtime.ReadMemStats(&after)
		if grown := int64(after.StackInuse) - int64(before.StackInuse); grown > 64<<20 {
			t.Errorf("%.20q…: the parser's stack grew %d MiB", src, grown>>20)
		}
	}
}
