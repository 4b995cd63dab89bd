package gctune

import (
	"os"
	"runtime/debug"
	"testing"
)

func TestApplyAndRestore(t *testing.T) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		t.Skip("GOGC or GOMEMLIMIT set in the environment: Apply leaves them alone by design")
	}
	before := debug.SetGCPercent(77)
	defer debug.SetGCPercent(before)
	restore := Apply()
	if got := debug.SetGCPercent(GCPercent); got != GCPercent {
		t.Errorf("GC percent after Apply = %d, want %d", got, GCPercent)
	}
	if got := debug.SetMemoryLimit(-1); got != MemoryLimit {
		t.Errorf("memory limit after Apply = %d, want %d", got, MemoryLimit)
	}
	restore()
	if got := debug.SetGCPercent(-1); got != 77 {
		t.Errorf("GC percent after restore = %d, want 77", got)
	}
	debug.SetGCPercent(77)
}
