package sandbox

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// newLoopbackNetns creates a network namespace with only "lo", up, and returns it as a file
// the child joins with setns. One per session: creating a namespace per call would cost more
// than the rest of the child's setup, and the kernel tears them down asynchronously.
//
// WARNING: the child's only network; rerun as root after changing:
// go test -run 'TestEscape/net' ./sandbox/
func newLoopbackNetns() (*os.File, error) {
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("open own netns: %w", err)
	}
	defer orig.Close()
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("unshare netns: %w", err)
	}
	ns, nsErr := os.Open("/proc/thread-self/ns/net")
	upErr := loopbackUp()
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		// This thread is stuck in the new namespace: stay locked so the runtime kills the
		// thread when the goroutine exits instead of reusing it.
		if ns != nil {
			ns.Close()
		}
		return nil, fmt.Errorf("restore netns: %w", err)
	}
	runtime.UnlockOSThread()
	if nsErr != nil {
		return nil, fmt.Errorf("open new netns: %w", nsErr)
	}
	if upErr != nil {
		ns.Close()
		return nil, upErr
	}
	return ns, nil
}

// loopbackUp sets IFF_UP on "lo" in the calling thread's network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback socket: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("loopback ifreq: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("get lo flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("set lo up: %w", err)
	}
	return nil
}
