package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

type peerKey struct{}

// Peer is the kernel's word on who is at the other end of a connection: its uid, gid and pid
// (SO_PEERCRED) and supplementary groups (SO_PEERGROUPS), as they were when it connected. A
// group the caller dropped before connecting is not in Groups, whatever NSS says.
type Peer struct {
	UID, GID uint32
	PID      int32
	Groups   []uint32
	// Cgroup is /proc/PID/cgroup of the process that connected, read when the connection
	// was accepted; empty when its pid means nothing here (another pid namespace) or the
	// file could not be read. Gone is set when that process had exited by then, so the
	// file read may be another's.
	Cgroup []byte
	Gone   bool
}

// errNoPeer means the connection carried no credentials; such a request is refused.
var errNoPeer = errors.New("no peer credentials on the connection")

// ConnContext records the peer credentials of an accepted Unix connection in its context.
// It is the http.Server's ConnContext hook: credentials are read once per connection, from
// the kernel (SO_PEERCRED), never from anything the client sends.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return connContext(ctx, c, false)
}

// connContext is ConnContext; withCgroup also reads where the peer runs (Peer.Cgroup).
func connContext(ctx context.Context, c net.Conn, withCgroup bool) context.Context {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return ctx
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return ctx
	}
	var cred *unix.Ucred
	var groups []uint32
	var serr, gerr error
	pidfd := -1
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		groups, gerr = peerGroups(int(fd))
		if !withCgroup {
			return
		}
		if p, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PEERPIDFD); err == nil {
			pidfd = p
		}
	}); err != nil || serr != nil || gerr != nil || cred == nil {
		if pidfd >= 0 {
			unix.Close(pidfd)
		}
		return ctx // no credentials: every request on it is refused
	}
	p := Peer{UID: cred.Uid, GID: cred.Gid, PID: cred.Pid, Groups: groups}
	if withCgroup {
		p.Cgroup, p.Gone = peerCgroup(cred.Pid, pidfd)
	}
	return context.WithValue(ctx, peerKey{}, p)
}

// peerCgroup reads the cgroups of the process that connected. A pid is a name that can be
// reused: with the peer's pidfd (SO_PEERPIDFD, Linux 6.5+), the process is checked to be
// alive after the read, so the file read was its own; gone says it was not. It closes pidfd.
func peerCgroup(pid int32, pidfd int) (cgroup []byte, gone bool) {
	if pidfd >= 0 {
		defer unix.Close(pidfd)
	}
	if pid <= 0 {
		return nil, false // in a pid namespace this daemon does not see into: none of its calls
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if pidfd >= 0 && unix.PidfdSendSignal(pidfd, 0, nil, 0) != nil {
		return nil, true
	}
	if err != nil {
		return nil, false
	}
	return b, false
}

// peerGroups reads SO_PEERGROUPS (Linux 4.13+), growing the buffer as the kernel asks.
func peerGroups(fd int) ([]uint32, error) {
	buf := make([]uint32, 64)
	for {
		n := uint32(len(buf) * 4)
		_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_PEERGROUPS,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n)), 0)
		switch {
		case errno == unix.ERANGE && int(n/4) > len(buf) && n <= 65536*4:
			buf = make([]uint32, n/4)
		case errno != 0:
			return nil, fmt.Errorf("SO_PEERGROUPS: %w", errno)
		default:
			return buf[:n/4], nil
		}
	}
}

// PeerFrom returns the peer recorded by ConnContext.
func PeerFrom(ctx context.Context) (Peer, error) {
	p, ok := ctx.Value(peerKey{}).(Peer)
	if !ok {
		return Peer{}, errNoPeer
	}
	return p, nil
}
