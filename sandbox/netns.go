package sandbox

import (
	"fmt"
	"net"
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

// sessionNetns returns a copy of the session's loopback-only network namespace (made on first
// use) for one start; the caller closes it. A copy, taken under the lock the session's deletion
// closes the original under: the start then never hands on an fd number closed and reused
// meanwhile.
func (s *Sandbox) sessionNetns(session string) (*os.File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.netns[session]
	if f == nil {
		var err error
		if f, err = newLoopbackNetns(); err != nil {
			return nil, err
		}
		s.netns[session] = f
	}
	return dupFile(f, "sandboxd-netns")
}

// dupFile is a close-on-exec copy of f.
func dupFile(f *os.File, name string) (*os.File, error) {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("dup %s: %w", name, err)
	}
	return os.NewFile(uintptr(fd), name), nil
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

// ListenInSession opens a TCP listener on addr (e.g. "127.0.0.1:3128") inside the session's
// network namespace, made now if the session has none yet. A socket keeps the namespace it was
// made in, so the daemon accepts what the session's programs connect to there: the egress
// proxy needs no route out of the namespace, no veth and no bridge process. The caller closes
// the listener; deleting the session does not.
func (s *Sandbox) ListenInSession(session, addr string) (net.Listener, error) {
	if !validName(session) || session == poolDir {
		return nil, fmt.Errorf("%w: session name %q", ErrBadSpec, session)
	}
	ns, err := s.sessionNetns(session)
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	return listenInNetns(ns, addr)
}

// listenInNetns listens on addr from a thread switched into ns and back.
//
// WARNING: a thread left in another namespace would put the daemon's own sockets there; rerun
// as root after changing: go test -run 'TestListenInSession' ./sandbox/
func listenInNetns(ns *os.File, addr string) (net.Listener, error) {
	type result struct {
		l   net.Listener
		err error
	}
	ch := make(chan result, 1)
	// A goroutine of its own, locked to its thread: if the way back fails, it exits locked
	// and the runtime ends the thread rather than reuse it in the wrong namespace.
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("open own netns: %w", err)}
			return
		}
		defer orig.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("enter session netns: %w", err)}
			return
		}
		l, lerr := net.Listen("tcp", addr)
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			if l != nil {
				l.Close()
			}
			ch <- result{err: fmt.Errorf("restore netns: %w", err)}
			return // still locked: the thread dies with the goroutine
		}
		runtime.UnlockOSThread()
		if lerr != nil {
			lerr = fmt.Errorf("listen in session netns: %w", lerr)
		}
		ch <- result{l, lerr}
	}()
	r := <-ch
	return r.l, r.err
}
