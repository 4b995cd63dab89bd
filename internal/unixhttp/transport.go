// Package unixhttp is the clients' HTTP/1.1 transport to the daemon's Unix socket: each request
// is written and its response read on the caller's goroutine, over a kept-alive connection.
//
// net/http's Transport runs two goroutines per connection and hands every request and response
// between them and the caller; on a two-CPU host each hand-off is a thread wake-up, and a call
// paced as an agent makes them spent ~0.18 ms in the client alone (go run ./cmd/sbbench -only
// spawn, before and after). Parsing and framing stay net/http's (Request.Write, ReadResponse).
package unixhttp

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// idleReuse is how long an idle connection is reused. The daemon closes connections idle for
// its idle_timeout_sec (120 s by default); a request must never race that close, since a call
// the daemon may have run is not retried.
const idleReuse = 30 * time.Second

// Transport is an http.RoundTripper over one Unix socket. The zero value is not usable: make
// one with New.
type Transport struct {
	socket  string
	maxIdle int

	mu   sync.Mutex
	idle []*conn // most recently used last
}

// New returns a transport to socket keeping up to maxIdle idle connections.
func New(socket string, maxIdle int) *Transport {
	return &Transport{socket: socket, maxIdle: max(maxIdle, 1)}
}

type conn struct {
	net.Conn
	br   *bufio.Reader
	used time.Time
}

// RoundTrip implements http.RoundTripper. A request is sent again, on a new connection, only
// when a reused one turned out closed before any of it was written.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	for {
		c, reused, err := t.get(ctx)
		if err != nil {
			closeBody(req)
			return nil, err
		}
		resp, written, err := t.exchange(ctx, c, req)
		if err == nil {
			return resp, nil
		}
		c.Close()
		if !reused || written || ctx.Err() != nil {
			closeBody(req)
			return nil, err
		}
		if req.Body != nil && req.Body != http.NoBody {
			if req.GetBody == nil {
				closeBody(req)
				return nil, err // its body may be spent: net/http would not resend it either
			}
			b, gerr := req.GetBody()
			if gerr != nil {
				closeBody(req)
				return nil, gerr
			}
			again := *req // a RoundTripper must not change the caller's request
			again.Body = b
			req = &again
		}
	}
}

// exchange writes req on c and reads the response head; written says whether any of the
// request may have reached the daemon. The response's body gives c back when read to its end.
func (t *Transport) exchange(ctx context.Context, c *conn, req *http.Request) (resp *http.Response, written bool, err error) {
	if err := c.SetDeadline(time.Time{}); err != nil { // open left a past one
		return nil, false, err
	}
	// The context's end, a deadline included, interrupts a blocked write or read (of the body
	// too, until Close); the error is then the context's.
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (*http.Response, bool, error) {
		stop()
		if ctxErr := ctx.Err(); ctxErr != nil {
			err = ctxErr
		}
		return nil, written, err
	}
	cw := &countingWriter{w: c}
	werr := req.Write(cw)
	written = cw.n > 0
	if werr != nil && (!written || ctx.Err() != nil) {
		return fail(werr)
	}
	// A write cut short may be the daemon answering early (a body over its limit: 413) and
	// closing: its answer is then waiting to be read, and is the one to return.
	resp, err = http.ReadResponse(c.br, req)
	if err != nil {
		if werr != nil {
			err = werr
		}
		return fail(err)
	}
	keep := werr == nil && !resp.Close && !req.Close
	resp.Body = &body{ReadCloser: resp.Body, ctx: ctx, t: t, c: c, stop: stop, keep: keep}
	return resp, true, nil
}

// get returns an idle connection still open, or a new one.
func (t *Transport) get(ctx context.Context) (*conn, bool, error) {
	for {
		t.mu.Lock()
		n := len(t.idle)
		if n == 0 {
			t.mu.Unlock()
			break
		}
		c := t.idle[n-1]
		t.idle = t.idle[:n-1]
		t.mu.Unlock()
		if time.Since(c.used) < idleReuse && c.open() {
			return c, true, nil
		}
		c.Close()
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", t.socket)
	if err != nil {
		return nil, false, err
	}
	return &conn{Conn: nc, br: bufio.NewReader(nc)}, false, nil
}

// open reports whether the daemon has not closed the idle connection: a read that cannot wait
// finds nothing to read rather than the end (or stray bytes, which make it unusable too).
func (c *conn) open() bool {
	if c.br.Buffered() > 0 || c.SetReadDeadline(time.Unix(1, 0)) != nil {
		return false
	}
	_, err := c.br.Peek(1)
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// put keeps c for the next request, or closes it when enough are kept.
func (t *Transport) put(c *conn) {
	c.used = time.Now()
	t.mu.Lock()
	if len(t.idle) < t.maxIdle {
		t.idle = append(t.idle, c)
		c = nil
	}
	t.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// CloseIdleConnections closes the kept connections (http.Client.CloseIdleConnections).
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	for _, c := range idle {
		c.Close()
	}
}

// body gives its connection back when read to the end and closed; closed early, the rest of
// the response is unread on the connection, so it is closed instead.
type body struct {
	io.ReadCloser
	ctx  context.Context
	t    *Transport
	c    *conn
	stop func() bool
	keep bool
	eof  bool
	once sync.Once
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == io.EOF:
		b.eof = true
	case err != nil && b.ctx.Err() != nil:
		err = b.ctx.Err()
	}
	return n, err
}

func (b *body) Close() error {
	b.once.Do(func() {
		interrupted := !b.stop() // the context ended: the deadline may be in the past
		_ = b.ReadCloser.Close()
		if b.keep && b.eof && !interrupted && b.c.SetDeadline(time.Time{}) == nil {
			b.t.put(b.c)
		} else {
			b.c.Close()
		}
	})
	return nil
}

type countingWriter struct {
	w io.Writer
	n int
}

func (cw *countingWriter) Write(p []byte) (int, error) {
	n, err := cw.w.Write(p)
	cw.n += n
	return n, err
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}
