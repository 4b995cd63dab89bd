package api

import (
	"context"
	"errors"
	"net"

	"golang.org/x/sys/unix"
)

type peerKey struct{}

// Peer is the kernel's word on who is at the other end of a connection.
type Peer struct {
	UID, GID uint32
	PID      int32
}

// errNoPeer means the connection carried no credentials; such a request is refused.
var errNoPeer = errors.New("no peer credentials on the connection")

// ConnContext records the peer credentials of an accepted Unix connection in its context.
// It is the http.Server's ConnContext hook: credentials are read once per connection, from
// the kernel (SO_PEERCRED), never from anything the client sends.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return ctx
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return ctx
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil || serr != nil || cred == nil {
		return ctx
	}
	return context.WithValue(ctx, peerKey{}, Peer{UID: cred.Uid, GID: cred.Gid, PID: cred.Pid})
}

// PeerFrom returns the peer recorded by ConnContext.
func PeerFrom(ctx context.Context) (Peer, error) {
	p, ok := ctx.Value(peerKey{}).(Peer)
	if !ok {
		return Peer{}, errNoPeer
	}
	return p, nil
}
