package executor

import (
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestPreviewOfLargeResultAllocatesLittle: the preview of a large result (a Grep's, up to
// 64 MiB, held in the shared daemon) is cut without copying the whole text, let alone
// converting it to runes (four bytes each): one user's calls would otherwise multiply the
// daemon's memory by what they print.
func TestPreviewOfLargeResultAllocatesLittle(t *testing.T) {
	text := strings.Repeat("é"+strings.Repeat("x", 99)+"\n", 160_000) // 16 MB
	r := Text(text)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	p := previewOf(joinText(r))
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Fatalf("previewOf of %d bytes allocated %d bytes", len(text), got)
	}
	if n := utf8.RuneCountInString(p); n > PreviewChars || n < PreviewChars/2 || !strings.HasPrefix(text, p) {
		t.Fatalf("preview of %d characters: %q…", n, p[:40])
	}
	if got := runePrefix("aéb", 2); got != "aé" {
		t.Fatalf("runePrefix = %q", got)
	}
}
