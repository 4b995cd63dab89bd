package egress

import (
	"bufio"
	"context"
	"errors"
	"net"
	"syscall"
	"time"
)

// serveSOCKS serves one SOCKS5 CONNECT.
func (s *Server) serveSOCKS(ctx context.Context, c *idleConn, br *bufio.Reader, p peer) {
	t, code, err := readSOCKS(br, c)
	if err != nil {
		if code != 0 {
			// A request was made (an address no rule could be asked about, a command not
			// served): the audit log shows the attempt.
			s.recordRefusal(ctx, p, t, nil, err.Error())
			_, _ = c.Write(socksReply(code))
		}
		lingerClose(c)
		return
	}
	c.setHard(time.Time{})
	if s.Intercept != nil && p.origin == nil {
		// Paced before it is answered, as a tunnel is without interception (admit): each
		// new host's certificate costs the daemon a signature.
		if s.pace(ctx, p) != nil {
			_, _ = c.Write(socksReply(socksReplyGeneralFailure))
			lingerClose(c)
			return
		}
		if _, err := c.Write(socksReply(socksReplyOK)); err != nil {
			return
		}
		s.interceptTunnel(ctx, p, t, c, br)
		return
	}
	dst, out, _, pathRules := s.admit(ctx, p, t)
	switch out {
	case outDenied, outPrivate:
		// SOCKS has no room for a reason; the audit event carries it.
		_, _ = c.Write(socksReply(socksReplyNotAllowed))
		lingerClose(c)
		return
	case outResolve:
		_, _ = c.Write(socksReply(socksReplyHostUnreachable))
		lingerClose(c)
		return
	case outPaced:
		_, _ = c.Write(socksReply(socksReplyGeneralFailure))
		lingerClose(c)
		return
	}
	up, err := s.dial(ctx, dst)
	if err != nil {
		_, _ = c.Write(socksReply(dialReplyCode(err)))
		lingerClose(c)
		return
	}
	stop := context.AfterFunc(ctx, func() { _ = up.Close() })
	defer stop()
	if _, err := c.Write(socksReply(socksReplyOK)); err != nil {
		_ = up.Close()
		return
	}
	s.carry(ctx, p, t, c, up, dst, br, pathRules)
}

// dialReplyCode maps a dial error to the SOCKS reply that describes it best.
func dialReplyCode(err error) byte {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return socksReplyConnRefused
	case errors.Is(err, syscall.ENETUNREACH):
		return socksReplyNetworkUnreachable
	case errors.Is(err, syscall.EHOSTUNREACH), errors.As(err, &ne) && ne.Timeout():
		return socksReplyHostUnreachable
	}
	return socksReplyGeneralFailure
}
