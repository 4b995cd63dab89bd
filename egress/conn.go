package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// activity is the last time bytes moved on any of the connections sharing it, so a tunnel
// busy in one direction is not cut for being quiet in the other.
type activity struct{ last atomic.Int64 }

func (a *activity) touch(now time.Time) { a.last.Store(now.UnixNano()) }

func (a *activity) since(now time.Time) time.Duration {
	return now.Sub(time.Unix(0, a.last.Load()))
}

// idleConn ends a connection once no bytes have moved for idle (on it or on the connections
// sharing its activity), or, while hard is set, at that fixed deadline. It has one reader and
// one writer at a time, which the deadline bookkeeping relies on.
type idleConn struct {
	net.Conn
	idle time.Duration
	act  *activity
	hard atomic.Int64 // unix nanos of a fixed read deadline; 0: the rolling idle deadline
	// headLeft is what may still be read while hard is set: a request's head (or a SOCKS
	// request, or a TLS handshake) is read under it, so no client makes the root daemon buffer
	// an endless request line or header. Only the reader touches it.
	headLeft int

	rdl, wdl time.Time // deadlines last set, to skip resetting the timer on every call
}

func newIdleConn(c net.Conn, idle time.Duration, act *activity) *idleConn {
	if act == nil {
		act = &activity{}
	}
	act.touch(time.Now())
	return &idleConn{Conn: c, idle: idle, act: act}
}

// maxHeadBytes bounds what is read under a hard deadline: a request line and its headers, as
// the daemon's API bounds its own (MaxHeaderBytes).
const maxHeadBytes = 64 << 10

// maxResponseHeadBytes bounds an origin's response head (net/http's default is 10 MiB, which a
// hostile allowed origin could make the daemon hold per connection); browsers take about this.
const maxResponseHeadBytes = 256 << 10

// setHard fixes the read deadline at t (a header must arrive whole by then, however slowly it
// trickles in, and within maxHeadBytes); the zero time returns to the rolling idle deadline
// and to unbounded reads (a body or a tunnel streams through).
func (c *idleConn) setHard(t time.Time) {
	if t.IsZero() {
		c.hard.Store(0)
	} else {
		c.hard.Store(t.UnixNano())
		c.headLeft = maxHeadBytes
	}
	c.rdl = time.Time{}
}

// headSpent reports whether a head being read under the hard deadline used up maxHeadBytes.
func (c *idleConn) headSpent() bool {
	return c.hard.Load() != 0 && c.headLeft <= 0
}

// refresh moves a deadline forward only when it has used up an eighth of the idle time, so a
// busy connection pays for a timer update now and then rather than on every read.
func (c *idleConn) refresh(cur *time.Time, now time.Time, set func(time.Time) error) {
	want := now.Add(c.idle)
	if want.Sub(*cur) > c.idle/8 {
		*cur = want
		_ = set(want)
	}
}

func (c *idleConn) Read(p []byte) (int, error) {
	bounded := c.hard.Load() != 0
	if bounded {
		if c.headLeft <= 0 {
			return 0, errHeadTooLarge
		}
		p = p[:min(len(p), c.headLeft)]
	}
	for {
		now := time.Now()
		if h := c.hard.Load(); h != 0 {
			if t := time.Unix(0, h); !t.Equal(c.rdl) {
				c.rdl = t
				_ = c.Conn.SetReadDeadline(t)
			}
		} else {
			c.refresh(&c.rdl, now, c.Conn.SetReadDeadline)
		}
		n, err := c.Conn.Read(p)
		if n > 0 {
			c.act.touch(time.Now())
			if bounded {
				c.headLeft -= n
			}
			return n, err
		}
		if err == nil || c.hard.Load() != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
			return n, err
		}
		// Quiet here, but was anything moving elsewhere within the idle time? Then wait on.
		now = time.Now()
		if quiet := c.act.since(now); quiet < c.idle {
			c.rdl = now.Add(c.idle - quiet)
			_ = c.Conn.SetReadDeadline(c.rdl)
			continue
		}
		return n, err
	}
}

// Write writes all of p unless nothing moves for idle: a deadline that fires while the peer is
// still taking bytes, only slowly, starts another idle period instead of failing the write.
func (c *idleConn) Write(p []byte) (int, error) {
	written := 0
	for {
		c.refresh(&c.wdl, time.Now(), c.Conn.SetWriteDeadline)
		n, err := c.Conn.Write(p[written:])
		written += n
		if n > 0 {
			c.act.touch(time.Now())
		}
		if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) || c.act.since(time.Now()) >= c.idle {
			return written, err
		}
	}
}

// closeWrite passes a half-close on: the peer sees EOF but can still answer.
func closeWrite(c net.Conn) error {
	c = unwrap(c)
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}

// unwrap returns the connection under an idleConn, for calls that must bypass its deadlines.
func unwrap(c net.Conn) net.Conn {
	if ic, ok := c.(*idleConn); ok {
		return ic.Conn
	}
	return c
}

// Copy buffers. A stream starts on a small buffer and moves to a bulk one once a read fills
// the small one: a bulk transfer then moves in few large reads and writes (on a loopback
// download three processes share the CPUs, and each wakeup is a switch between them), while a
// chatty or quiet connection holds only the small buffer. bulkSlots bounds the bulk buffers in
// use, so many downloads at once cost at most maxBulkBufs of them; the rest stay small.
const (
	smallBufSize = 64 << 10
	bulkBufSize  = 2 << 20
	maxBulkBufs  = 64
)

var (
	smallBufs = sync.Pool{New: func() any { b := make([]byte, smallBufSize); return &b }}
	bulkBufs  = sync.Pool{New: func() any { b := make([]byte, bulkBufSize); return &b }}
	bulkSlots = make(chan struct{}, maxBulkBufs)
)

// copyBuf is one stream's copy buffer.
type copyBuf struct {
	p    *[]byte
	bulk bool
}

func newCopyBuf() *copyBuf { return &copyBuf{p: smallBufs.Get().(*[]byte)} }

func (b *copyBuf) bytes() []byte { return *b.p }

// filled is told each read's length: one that filled the small buffer moves the stream to a
// bulk buffer, when a slot is free; one that would have fitted the small buffer moves it back,
// so a stream that slowed or went quiet (a kept-alive tunnel between responses) does not wait
// in its next read holding a bulk buffer.
func (b *copyBuf) filled(n int) {
	switch {
	case !b.bulk && n == len(*b.p):
		select {
		case bulkSlots <- struct{}{}:
		default:
			return
		}
		smallBufs.Put(b.p)
		b.p, b.bulk = bulkBufs.Get().(*[]byte), true
	case b.bulk && n < smallBufSize:
		b.release()
		b.p = smallBufs.Get().(*[]byte)
	}
}

func (b *copyBuf) release() {
	if b.bulk {
		bulkBufs.Put(b.p)
		<-bulkSlots
	} else {
		smallBufs.Put(b.p)
	}
	b.p, b.bulk = nil, false
}

// copyStream copies src to dst until EOF or an error, through a copyBuf.
func copyStream(dst io.Writer, src io.Reader) error {
	b := newCopyBuf()
	defer b.release()
	for {
		n, rerr := src.Read(b.bytes())
		if n > 0 {
			if _, err := dst.Write(b.bytes()[:n]); err != nil {
				return err
			}
			b.filled(n)
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

// carry copies between the client c and the upstream connection up until both directions end
// or the tunnel idles out, then closes both. What the origin sends flows from the start (some
// protocols speak first); what the client sends goes up once openStream has seen how it starts,
// and a ClientHello naming another host than t's ends the tunnel there. The client may have sent
// the start of its stream right behind its request: it sits in br, which the client's direction
// reads through. up is connected to dst. pathRules (Verdict.PathRules): method/path rules name
// t's host, so a stream that is neither TLS nor HTTP the proxy reads is refused, the tunnel
// reset, rather than carried, and a ClientHello goes up only to an origin that speaks TLS
// (tlsprobe.go).
func (s *Server) carry(ctx context.Context, p peer, t target, c *idleConn, up net.Conn, dst netip.AddrPort, br *bufio.Reader, pathRules bool) {
	uc := newIdleConn(up, s.idleTimeout(), c.act)
	// handover: the client's stream is plain HTTP, served request by request instead; the
	// origin's direction then ends without touching the client's connection.
	var handover atomic.Bool
	retry := newHelloRetry()
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := retry.copyOrigin(c, uc)
		if !handover.Load() {
			endHalf(c, uc, err)
		}
	}()
	defer func() {
		<-done
		_ = c.Close()
		_ = uc.Close()
	}()
	defer s.track(p, t, dst, func() {
		abortive(c, true)
		_ = c.Close()
		_ = uc.Close()
	})()
	first, hello, refused, err := openStream(c, br, t, s.headerTimeout(), s.AllowECH)
	if err == nil && refused == "" && len(first) > 0 && pathRules && p.origin == nil {
		if why := s.originSpeaksTLS(ctx, dst, hello); why != "" {
			refused = fmt.Sprintf("method/path rules name %s, and its server at %s does not speak TLS (%s): a server reading plain HTTP may take the bytes of the tunnel's ClientHello, which the client chooses, for a request no rule decided, so none of them was passed on; send plain HTTP requests through the proxy instead, each decided by its method and path", t.host, dst, why)
		}
	}
	if refused != "" {
		// Recorded before the client learns of it, as every decision is.
		s.recordRefusal(ctx, p, t, up.RemoteAddr(), refused)
		_, _ = unwrap(c).Write(tlsAlertAccessDenied)
		lingerClose(c)
		_ = uc.Close()
		return
	}
	if err == nil && first == nil && p.origin == nil {
		// Not TLS. Plain HTTP the proxy can read, so the rules about requests apply to it as
		// to a forwarded request (tunnelhttp.go); the daemon's own client (origin) declared
		// its request already. The tunnel's own connection, which has seen no whole line, is
		// not used: each request goes to the address its own decision checked.
		//
		// The start of the first line goes up before it is known, and an origin may run a
		// request line that the end of its stream ends: until the stream is known not to be
		// HTTP, closing the upstream connection (a handover, the client's end, a timeout, the
		// session's end) resets it rather than ending it.
		abortive(up, true)
		var toUp io.Writer = uc
		if pathRules {
			// The stream is either HTTP, served over connections of its own, or refused: none
			// of it is for this connection, not even the start of a line.
			toUp = io.Discard
		}
		var isHTTP bool
		if isHTTP, err = passUntilKnown(br, toUp); isHTTP {
			handover.Store(true)
			_ = uc.Close()
			<-done
			s.serveTunnelHTTP(ctx, p, t, c, br)
			return
		}
		if pathRules {
			// Not reading a stream as HTTP does not mean no server does: the JDK's takes any
			// bytes before a space as the method, so no first-byte test is complete, and a rule
			// about a request must not be passed by a stream the proxy could not read.
			if ctx.Err() == nil {
				s.recordRefusal(ctx, p, t, up.RemoteAddr(), fmt.Sprintf("method/path rules name %s, and the proxy could not read the tunnel's stream as HTTP (nor as TLS, which is decided by host), so it could not tell which request the stream makes; the tunnel was reset without passing any of it on", t.host))
			}
			abortive(c, true)
			_ = c.Close()
			_ = uc.Close()
			return
		}
		if !errors.Is(err, errUnendedRequestLine) {
			abortive(up, false)
		}
	}
	if err == nil && len(first) > 0 {
		retry.tls.Store(true) // before the hello goes up: the origin's answer is to it
		_, err = uc.Write(first)
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = nil // the client ended before sending anything: pass its half-close on
		}
		endHalf(uc, c, err)
		return
	}
	if len(first) > 0 {
		if why, err := s.checkSecondHello(retry, c, uc, br, t); why != "" || err != nil {
			if why != "" {
				s.recordRefusal(ctx, p, t, up.RemoteAddr(), why)
				_, _ = unwrap(c).Write(tlsAlertAccessDenied)
				abortive(up, true)
				lingerClose(c)
				_ = uc.Close()
				return
			}
			if errors.Is(err, io.EOF) {
				err = nil // the client ended: pass its half-close on
			}
			endHalf(uc, c, err)
			return
		}
	}
	copyHalf(uc, br, c)
}

// copyHalf copies one direction of a tunnel, from src (read through r) to dst, and ends it.
func copyHalf(dst net.Conn, r io.Reader, src net.Conn) {
	endHalf(dst, src, copyStream(dst, r))
}

// endHalf ends one direction of a tunnel: its EOF (err nil) is passed on as a half-close, so the
// other direction can still answer; an error tears the tunnel down so the other direction ends
// too.
func endHalf(dst, src net.Conn, err error) {
	if err == nil && closeWrite(dst) == nil {
		return
	}
	_ = src.Close()
	_ = dst.Close()
}

// abortive makes closing c reset the connection (on), so its peer reads an error rather than
// the end of the stream, or end it gracefully again (off). Only a TCP connection can.
func abortive(c net.Conn, on bool) {
	sec := -1
	if on {
		sec = 0
	}
	if l, ok := unwrap(c).(interface{ SetLinger(sec int) error }); ok {
		_ = l.SetLinger(sec)
	}
}

// lingerClose ends a connection after a refusal without losing the refusal: closing a socket
// with unread input makes the kernel send a reset, which can destroy the reply before the
// client reads it. So half-close, drain briefly, then close.
func lingerClose(c net.Conn) {
	c = unwrap(c)
	_ = closeWrite(c)
	_ = c.SetReadDeadline(time.Now().Add(lingerTime))
	_, _ = io.Copy(io.Discard, io.LimitReader(c, lingerBytes))
	_ = c.Close()
}

const (
	lingerTime  = time.Second
	lingerBytes = 256 << 10
)
