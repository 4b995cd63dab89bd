package sandbox

import (
	"errors"
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// errIdentityStuck: a thread could not be given back the daemon's filesystem identity after
// asCaller. It stays locked to its goroutine, so no other goroutine ever runs on it.
var errIdentityStuck = errors.New("cannot restore the daemon's filesystem identity on this thread")

// asCaller runs f on this goroutine's thread with the caller's filesystem identity: fsuid,
// fsgid and supplementary groups. setfsuid(2), setfsgid(2) and the raw setgroups(2) change the
// calling thread only, and while the fsuid is not 0 the kernel keeps root's file capabilities
// (DAC_OVERRIDE, DAC_READ_SEARCH, FOWNER, ...) out of the thread's effective set: every path f
// looks up, stats or opens is checked as the caller's own lookups are. The daemon's other
// threads, and so its other goroutines, keep root's identity throughout.
//
// A thread that cannot be given the daemon's identity back stays locked to this goroutine (the
// runtime ends such a thread when its goroutine exits) and the error says so: whatever else the
// goroutine does meanwhile runs with the caller's rights, never more.
//
// WARNING: every user-named path the root daemon resolves goes through here; rerun as root
// after changing: go test -run 'TestAsCaller|TestEscape|TestRealTools' ./sandbox/
func asCaller(uid, gid uint32, groups []uint32, f func()) (err error) {
	runtime.LockOSThread()
	saved, err := saveIdentity()
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer func() {
		if rerr := setIdentity(saved); rerr != nil {
			err = errors.Join(err, fmt.Errorf("%w: %w", errIdentityStuck, rerr))
			return // still locked: see above
		}
		runtime.UnlockOSThread()
	}()
	if err := setIdentity(fsIdentity{uid: int(uid), gid: int(gid), groups: toInts(groups)}); err != nil {
		return fmt.Errorf("take the caller's filesystem identity: %w", err)
	}
	f()
	return nil
}

// fsIdentity is what access checks on paths use: fsuid, fsgid, supplementary groups.
type fsIdentity struct {
	uid, gid int
	groups   []int
}

// saveIdentity reads the thread's identity. setfsuid(-1) changes nothing (an invalid id) and
// returns the current fsuid; likewise setfsgid.
func saveIdentity() (fsIdentity, error) {
	groups, err := unix.Getgroups()
	if err != nil {
		return fsIdentity{}, fmt.Errorf("getgroups: %w", err)
	}
	uid, _ := unix.SetfsuidRetUid(-1)
	gid, _ := unix.SetfsgidRetGid(-1)
	return fsIdentity{uid: uid, gid: gid, groups: groups}, nil
}

// setIdentity gives the thread id: groups, fsgid, then fsuid (CAP_SETGID and CAP_SETUID allow
// each, both ways: a non-zero fsuid clears only the file capabilities), and checks that the
// ids took, since setfsuid reports no error for an id it refuses.
func setIdentity(id fsIdentity) error {
	if err := unix.Setgroups(id.groups); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if _, err := unix.SetfsgidRetGid(id.gid); err != nil {
		return fmt.Errorf("setfsgid %d: %w", id.gid, err)
	}
	if _, err := unix.SetfsuidRetUid(id.uid); err != nil {
		return fmt.Errorf("setfsuid %d: %w", id.uid, err)
	}
	if got, _ := unix.SetfsuidRetUid(-1); got != id.uid {
		return fmt.Errorf("fsuid is %d after setting %d", got, id.uid)
	}
	if got, _ := unix.SetfsgidRetGid(-1); got != id.gid {
		return fmt.Errorf("fsgid is %d after setting %d", got, id.gid)
	}
	return nil
}

func toInts(u []uint32) []int {
	out := make([]int, len(u))
	for i, v := range u {
		out[i] = int(v)
	}
	return out
}
