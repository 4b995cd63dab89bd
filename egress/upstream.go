package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// upstream is a client connection's kept-alive connection to the origin its last plain HTTP
// request went to. A request without a body is written, and its answer read, on the client's
// own goroutine: net/http's Transport hands each request to a writer goroutine and each answer
// back from a reader goroutine, a thread wake-up each way for every small request. A request
// with a body goes through the Transport, which also reads an answer that comes before the
// body is all sent.
type upstream struct {
	dst  netip.AddrPort
	c    net.Conn
	head *headBudget
	br   *bufio.Reader
	bw   *bufio.Writer
	stop func() bool // stops closing c when the proxy's context ends
}

// headBudget bounds what a response's head may take (maxResponseHeadBytes), as the Transport's
// MaxResponseHeaderBytes does; left < 0 while a body streams through.
type headBudget struct {
	r    io.Reader
	left int
	read int // bytes read since the budget was set: none means the origin said nothing
}

// errResponseHeadTooLarge says what the Transport says of the same bound.
var errResponseHeadTooLarge = fmt.Errorf("response headers exceeded %d bytes", maxResponseHeadBytes)

func (b *headBudget) Read(p []byte) (int, error) {
	if b.left == 0 {
		return 0, errResponseHeadTooLarge
	}
	if b.left > 0 && len(p) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.read += n
	if b.left > 0 {
		b.left -= n
	}
	return n, err
}

func (u *upstream) close() {
	u.stop()
	_ = u.c.Close()
}

// maxInformational bounds the 1xx answers skipped before a request's final one.
const maxInformational = 5

// exchange sends out, a request with no body, to dst on the kept connection to it (or a new
// one) and reads the answer's head. The caller reads the body from the connection and drops
// the connection (dropUpstream) when it cannot carry the next request. A request that may be
// sent twice (GET, HEAD, OPTIONS, TRACE) is sent again on a new connection when the origin
// closed a kept one without a word after alive looked: it timed the idle connection out.
func (h *httpConn) exchange(ctx context.Context, out *http.Request, dst netip.AddrPort) (*http.Response, error) {
	for {
		reused := h.up != nil && h.up.dst == dst && h.up.alive()
		if !reused {
			h.dropUpstream()
			c, err := h.s.dial(ctx, dst)
			if err != nil {
				return nil, err
			}
			ic := newIdleConn(c, h.s.idleTimeout(), nil)
			hb := &headBudget{r: ic}
			h.up = &upstream{dst: dst, c: c, head: hb, br: bufio.NewReaderSize(hb, 64<<10), bw: bufio.NewWriterSize(ic, 16<<10),
				stop: context.AfterFunc(ctx, func() { _ = c.Close() })}
		}
		resp, err := h.up.send(out)
		if err == nil {
			return resp, nil
		}
		silent := h.up.head.read == 0
		h.dropUpstream()
		if !reused || !silent || !replayable(out) || ctx.Err() != nil {
			return nil, err
		}
	}
}

// alive reports whether the kept connection is still open and quiet. An origin closes idle
// connections when it likes, and between requests nothing reads this one to notice; a request
// that may not be sent twice must not go out on a connection already closed.
func (u *upstream) alive() bool {
	if u.br.Buffered() > 0 {
		return false // bytes no request asked for
	}
	sc, ok := u.c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	open := false
	var buf [1]byte
	if err := rc.Read(func(fd uintptr) bool {
		_, _, err := unix.Recvfrom(int(fd), buf[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		open = errors.Is(err, unix.EAGAIN) // nothing to read, and no end of stream
		return true
	}); err != nil {
		return false
	}
	return open
}

func (u *upstream) send(out *http.Request) (*http.Response, error) {
	u.head.left, u.head.read = maxResponseHeadBytes, 0
	if err := out.Write(u.bw); err != nil {
		return nil, fmt.Errorf("send request: %w", err)
	}
	if err := u.bw.Flush(); err != nil {
		return nil, fmt.Errorf("send request: %w", err)
	}
	for range maxInformational + 1 {
		resp, err := http.ReadResponse(u.br, out)
		if err != nil {
			return nil, fmt.Errorf("read response: %w", err)
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			u.head.left = -1
			return resp, nil
		}
		u.head.left = maxResponseHeadBytes
	}
	return nil, fmt.Errorf("read response: more than %d informational (1xx) answers", maxInformational)
}

func (h *httpConn) dropUpstream() {
	if h.up != nil {
		h.up.close()
		h.up = nil
	}
}

// replayable reports whether a request may be sent again (RFC 9110 9.2.2), as the Transport
// judges it: an idempotent method and no body.
func replayable(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}
