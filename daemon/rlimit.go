package daemon

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// minOpenFiles is the daemon's own floor: the confined child moves the descriptors it keeps
// to fixed numbers past 100 (sandbox/nsinit*.h) before it lowers its limit, and fails with
// EINVAL under a limit below them; the daemon's connections and pools need their share too.
const minOpenFiles = 1024

// wantOpenFiles is what the daemon raises its limit to when it can (as the shipped unit's
// LimitNOFILE): it holds a descriptor for each path a running call hides or protects, and
// each user's share of those is a fraction of the limit (sandbox.pinBudget).
const wantOpenFiles = 65536

// raiseOpenFiles makes the daemon's RLIMIT_NOFILE at least need, hard and soft. A child
// inherits the daemon's hard limit and may only lower it (it sits in a user namespace, where
// raising needs a capability it lacks), so a daemon started under a lower one (ulimit -n, a
// unit's LimitNOFILE) could set up no call at all: every one failed at "rlimit: setrlimit:
// operation not permitted" or "mount: invalid argument". Raising it needs CAP_SYS_RESOURCE,
// which root has; without it the daemon says so at start instead.
func raiseOpenFiles(need uint64) error {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return fmt.Errorf("read the open-files limit: %w", err)
	}
	if rl.Cur < wantOpenFiles || rl.Max < wantOpenFiles {
		// Best effort: without CAP_SYS_RESOURCE the need below is what must hold.
		if want := (unix.Rlimit{Cur: max(rl.Cur, wantOpenFiles), Max: max(rl.Max, wantOpenFiles)}); unix.Setrlimit(unix.RLIMIT_NOFILE, &want) == nil {
			rl = want
		}
	}
	if rl.Max >= need && rl.Cur >= need {
		return nil
	}
	want := unix.Rlimit{Cur: max(rl.Cur, need), Max: max(rl.Max, need)}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &want); err != nil {
		return fmt.Errorf("the open-files limit is %d (hard %d), below the %d that sandbox.open_files_max and the confined children need, and it cannot be raised (%w): raise LimitNOFILE or ulimit -n, or lower sandbox.open_files_max",
			rl.Cur, rl.Max, need, err)
	}
	return nil
}
