package executor

import (
	"go.uber.org/zap"
)

// Host is what tools may use of the daemon: the sandbox that starts confined children, the
// per-session workers that run the file tools as the caller, and the state directory.
type Host struct {
	log *zap.Logger
	// StateDir is the daemon's state directory (tool-results/ lives under it).
	StateDir string
}
