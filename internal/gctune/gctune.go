// Package gctune holds the daemon's garbage-collector settings in one place, so the daemon
// applies them at start and the latency benchmarks measure the code under the runtime
// configuration it actually runs with.
package gctune

import (
	"os"
	"runtime/debug"
)

const (
	// GCPercent trades memory for latency on the decision path. The daemon's live heap is
	// tens of MiB; collecting at 5x it instead of 2x cuts the GC work that dominates the
	// policy's tail latency (go test ./policy -run LatencyReport -v shows both).
	GCPercent = 400
	// MemoryLimit is a soft limit that keeps a burst from growing the heap without bound.
	MemoryLimit = 1 << 30
)

// Apply sets GCPercent and MemoryLimit, except where GOGC or GOMEMLIMIT in the environment
// say otherwise, and returns a function that restores the previous settings.
func Apply() (restore func()) {
	prevPercent, prevLimit := -2, int64(-1)
	if os.Getenv("GOGC") == "" {
		prevPercent = debug.SetGCPercent(GCPercent)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		prevLimit = debug.SetMemoryLimit(MemoryLimit)
	}
	return func() {
		if prevPercent != -2 {
			debug.SetGCPercent(prevPercent)
		}
		if prevLimit >= 0 {
			debug.SetMemoryLimit(prevLimit)
		}
	}
}
