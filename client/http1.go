package client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The client speaks HTTP/1.1 itself on a socket it opens with syscall, rather than through
// net/http or net: linking net/http brings crypto/tls, x509 and HTTP/2's tables, and linking
// net makes the binary use the C resolver, so dynamically linked; both slow the start of a CLI
// started per tool call. Each request is written and its answer read on the caller's
// goroutine, where net/http's Transport hands both between goroutines of its own (a thread
// wake-up each on a small host). The daemon is net/http's server; what it sends is plain
// HTTP/1.1 with a Content-Length or chunked.

// maxHeaderBytes bounds a response's status line and headers.
const maxHeaderBytes = 64 << 10

// idleReuse is how long an idle connection is reused. The daemon closes connections idle for
// its idle_timeout_sec (120 s by default); a request must never race that close, since a call
// the daemon may have run is not sent again.
const idleReuse = 30 * time.Second

// Conn is a connection to the daemon: an *os.File from the default dialer, or a net.Conn from
// Options.Dial.
type Conn interface {
	io.ReadWriteCloser
	SetDeadline(t time.Time) error
	SetReadDeadline(t time.Time) error
}

// Response is an answer whose body the caller reads to its end and closes.
type Response struct {
	StatusCode  int
	ContentType string
	Body        io.ReadCloser
}

// conn is a connection and what was read ahead on it.
type conn struct {
	Conn
	br   *bufio.Reader
	used time.Time
}

// roundTrip sends one request and returns the response once its head is read. A request is
// sent again, on a new connection, only when a kept one turned out closed before any of it
// was written: one that reached the daemon may have run.
func (c *Client) roundTrip(ctx context.Context, method, path string, body []byte, contentType, accept string) (*Response, error) {
	for {
		cn, reused, err := c.get(ctx)
		if err != nil {
			return nil, err
		}
		resp, written, err := c.exchange(ctx, cn, method, path, body, contentType, accept)
		if err == nil {
			return resp, nil
		}
		cn.Close()
		if !reused || written || ctx.Err() != nil {
			return nil, err
		}
	}
}

// exchange writes one request on cn and reads the response's head; written says whether any
// of the request may have reached the daemon. The body gives cn back when read to its end.
// Cancelling ctx closes the connection, which ends any read or write on it.
func (c *Client) exchange(ctx context.Context, cn *conn, method, path string, body []byte, contentType, accept string) (resp *Response, written bool, err error) {
	if err := cn.SetDeadline(time.Time{}); err != nil { // the liveness check left a past one
		return nil, false, err
	}
	stop := context.AfterFunc(ctx, func() { cn.Close() })
	fail := func(err error) (*Response, bool, error) {
		stop()
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, written, err
	}
	var req bytes.Buffer
	fmt.Fprintf(&req, "%s %s HTTP/1.1\r\nHost: sandboxd\r\nUser-Agent: sbctl\r\n", method, path)
	if c.opts.KeepAlive == 0 {
		req.WriteString("Connection: close\r\n")
	}
	if contentType != "" {
		fmt.Fprintf(&req, "Content-Type: %s\r\n", contentType)
	}
	if accept != "" {
		fmt.Fprintf(&req, "Accept: %s\r\n", accept)
	}
	if body != nil || method == "POST" || method == "PATCH" || method == "PUT" {
		fmt.Fprintf(&req, "Content-Length: %d\r\n", len(body))
	}
	req.WriteString("\r\n")
	req.Write(body)
	n, werr := cn.Write(req.Bytes())
	written = n > 0
	if werr != nil && !written {
		return fail(fmt.Errorf("send request: %w", werr))
	}
	// A write cut short may be the daemon answering early (a body over its limit: 413) and
	// closing: its answer is then waiting to be read, and is the one to return.
	h, err := readHead(cn.br)
	if err != nil {
		if werr != nil {
			err = werr
		}
		return fail(fmt.Errorf("read response: %w", err))
	}
	b := &connBody{Reader: cn.br, ctx: ctx, c: c, cn: cn, stop: stop}
	switch {
	case h.status == 204 || h.status == 304 || method == "HEAD":
		b.Reader, h.length, h.chunked = &lengthReader{}, 0, false // never a body (RFC 9112 §6.3)
	case h.chunked:
		b.Reader = &chunkedReader{br: cn.br}
	case h.length >= 0:
		b.Reader = &lengthReader{r: cn.br, left: h.length}
	}
	// Kept only when its end is known and nobody said it would close.
	b.keep = c.opts.KeepAlive > 0 && werr == nil && !h.close && (h.chunked || h.length >= 0)
	return &Response{StatusCode: h.status, ContentType: h.contentType, Body: b}, true, nil
}

// get returns a kept connection still open, or a new one.
func (c *Client) get(ctx context.Context) (*conn, bool, error) {
	for {
		c.mu.Lock()
		n := len(c.idle)
		if n == 0 {
			c.mu.Unlock()
			break
		}
		cn := c.idle[n-1]
		c.idle = c.idle[:n-1]
		c.mu.Unlock()
		if time.Since(cn.used) < idleReuse && cn.open() {
			return cn, true, nil
		}
		cn.Close()
	}
	var nc Conn
	var err error
	if c.opts.Dial != nil {
		nc, err = c.opts.Dial(ctx)
	} else {
		nc, err = dialUnix(c.socket)
	}
	if err != nil {
		var de *dialError
		if !errors.As(err, &de) {
			err = &dialError{c.socket, err}
		}
		return nil, false, err
	}
	return &conn{Conn: nc, br: bufio.NewReaderSize(nc, 32<<10)}, false, nil
}

// open reports whether the daemon has not closed the idle connection: a read that cannot wait
// finds nothing to read rather than the end (or stray bytes, which make it unusable too).
func (cn *conn) open() bool {
	if cn.br.Buffered() > 0 || cn.SetReadDeadline(time.Unix(1, 0)) != nil {
		return false
	}
	_, err := cn.br.Peek(1)
	return errors.Is(err, os.ErrDeadlineExceeded)
}

// put keeps cn for the next request, or closes it when enough are kept.
func (c *Client) put(cn *conn) {
	cn.used = time.Now()
	c.mu.Lock()
	if len(c.idle) < c.opts.KeepAlive {
		c.idle = append(c.idle, cn)
		cn = nil
	}
	c.mu.Unlock()
	if cn != nil {
		cn.Close()
	}
}

// Close closes the kept connections.
func (c *Client) Close() {
	c.mu.Lock()
	idle := c.idle
	c.idle = nil
	c.mu.Unlock()
	for _, cn := range idle {
		cn.Close()
	}
}

// connBody gives its connection back when read to its end and closed; closed early, the rest
// of the response is unread on the connection, so the connection is closed instead.
type connBody struct {
	io.Reader
	ctx  context.Context
	c    *Client
	cn   *conn
	stop func() bool
	keep bool
	eof  bool
	once sync.Once
}

func (b *connBody) Read(p []byte) (int, error) {
	n, err := b.Reader.Read(p)
	switch {
	case err == io.EOF:
		b.eof = true
	case err != nil && b.ctx.Err() != nil:
		err = b.ctx.Err()
	}
	return n, err
}

func (b *connBody) Close() error {
	b.once.Do(func() {
		interrupted := !b.stop() // the context ended: the connection is being closed
		if b.keep && b.eof && !interrupted {
			b.c.put(b.cn)
		} else {
			b.cn.Close()
		}
	})
	return nil
}

// lengthReader reads a body of a known length; the connection ending before it is an error,
// not a short body.
type lengthReader struct {
	r    io.Reader
	left int64
}

func (l *lengthReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	if err == io.EOF && l.left > 0 {
		err = io.ErrUnexpectedEOF
	}
	if err == nil && l.left == 0 {
		err = io.EOF
	}
	return n, err
}

// head is what the client needs of a response's status line and headers.
type head struct {
	status      int
	length      int64 // -1: none given
	chunked     bool
	close       bool // the daemon closes the connection after this response
	contentType string
}

// readHead reads the status line and headers.
func readHead(br *bufio.Reader) (head, error) {
	h := head{length: -1}
	total := 0
	first := true
	for {
		line, err := br.ReadSlice('\n')
		total += len(line)
		if err != nil {
			if errors.Is(err, bufio.ErrBufferFull) || total > maxHeaderBytes {
				return h, errors.New("response head too large")
			}
			return h, err
		}
		if total > maxHeaderBytes {
			return h, errors.New("response head too large")
		}
		s := strings.TrimRight(string(line), "\r\n")
		if first {
			first = false
			proto, rest, ok := strings.Cut(s, " ")
			code, _, _ := strings.Cut(rest, " ")
			if !ok || !strings.HasPrefix(proto, "HTTP/1.") {
				return h, fmt.Errorf("malformed status line %q", s)
			}
			if h.status, err = strconv.Atoi(code); err != nil || h.status < 100 || h.status > 999 {
				return h, fmt.Errorf("malformed status line %q", s)
			}
			h.close = proto == "HTTP/1.0"
			continue
		}
		if s == "" {
			if h.status >= 100 && h.status < 200 {
				// An interim response (the server never sends one unasked): the real one follows.
				first = true
				continue
			}
			return h, nil
		}
		k, v, ok := strings.Cut(s, ":")
		if !ok {
			return h, fmt.Errorf("malformed header %q", s)
		}
		v = strings.TrimSpace(v)
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "content-length":
			if h.length, err = strconv.ParseInt(v, 10, 64); err != nil || h.length < 0 {
				return h, fmt.Errorf("malformed Content-Length %q", v)
			}
		case "transfer-encoding":
			if h.chunked = strings.EqualFold(v, "chunked"); !h.chunked {
				return h, fmt.Errorf("unsupported Transfer-Encoding %q", v)
			}
		case "connection":
			h.close = h.close || strings.EqualFold(v, "close")
		case "content-type":
			h.contentType = v
		}
	}
}

// chunkedReader decodes a chunked body (RFC 9112 §7.1).
type chunkedReader struct {
	br   *bufio.Reader
	left int64 // bytes left in the current chunk
	eof  bool
}

func (r *chunkedReader) Read(p []byte) (int, error) {
	if r.eof {
		return 0, io.EOF
	}
	if r.left == 0 {
		line, err := r.br.ReadSlice('\n')
		if err != nil {
			return 0, unexpected(err)
		}
		size, _, _ := strings.Cut(strings.TrimRight(string(line), "\r\n"), ";")
		n, err := strconv.ParseInt(strings.TrimSpace(size), 16, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("malformed chunk size %q", line)
		}
		if n == 0 {
			// Trailers, if any, end with an empty line.
			for {
				line, err := r.br.ReadSlice('\n')
				if err != nil {
					return 0, unexpected(err)
				}
				if strings.TrimRight(string(line), "\r\n") == "" {
					r.eof = true
					return 0, io.EOF
				}
			}
		}
		r.left = n
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.br.Read(p)
	r.left -= int64(n)
	if r.left == 0 && err == nil {
		var crlf [2]byte
		if _, err := io.ReadFull(r.br, crlf[:]); err != nil || crlf != [2]byte{'\r', '\n'} {
			return n, errors.New("malformed chunk end")
		}
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// connectWait bounds how long a connect waits for room in the daemon's listen backlog.
const connectWait = 5 * time.Second

// dialError is a connection that could not be made: nothing was sent.
type dialError struct {
	socket string
	err    error
}

func (e *dialError) Error() string { return fmt.Sprintf("dial unix %s: %v", e.socket, e.err) }
func (e *dialError) Unwrap() error { return e.err }

// dialUnix connects to a Unix stream socket. The descriptor is non-blocking once connected,
// so *os.File puts it in the runtime's poller: reads and writes park the goroutine, deadlines
// and Close end them, as on a net.Conn.
//
// The connect itself blocks, up to connectWait, while the daemon's listen backlog is full: a
// non-blocking one fails at once (EAGAIN), so any user flooding the socket with connections
// made every other user's calls fail, and sbctl hook answer deny for lack of a daemon. The
// kernel wakes the waiting connects as the backlog drains.
func dialUnix(path string) (*os.File, error) {
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, &dialError{path, os.NewSyscallError("socket", err)}
	}
	wait := syscall.NsecToTimeval(connectWait.Nanoseconds())
	err = syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_SNDTIMEO, &wait)
	for err == nil {
		err = syscall.Connect(fd, &syscall.SockaddrUnix{Name: path})
		if err != syscall.EINTR {
			break
		}
		err = nil
	}
	if err == syscall.EAGAIN || err == syscall.EINPROGRESS {
		err = fmt.Errorf("the daemon's connection queue stayed full for %v: %w", connectWait, syscall.EAGAIN)
	} else if err == nil {
		err = syscall.SetNonblock(fd, true)
	}
	if err != nil {
		syscall.Close(fd)
		return nil, &dialError{path, os.NewSyscallError("connect", err)}
	}
	if err := checkServer(fd); err != nil {
		syscall.Close(fd)
		return nil, &dialError{path, err}
	}
	return os.NewFile(uintptr(fd), "unix:"+path), nil
}

// checkServer refuses a socket served by anyone but root (the daemon) or this user. A socket
// path in a shared directory (/tmp) can be bound by another user while the daemon is down:
// their server would then decide this user's calls and read what they send. A server of the
// user's own is the user's business (a test, a daemon of their own).
func checkServer(fd int) error {
	cred, err := syscall.GetsockoptUcred(fd, syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	if err != nil {
		return os.NewSyscallError("getsockopt SO_PEERCRED", err)
	}
	if cred.Uid != 0 && int(cred.Uid) != os.Geteuid() {
		return fmt.Errorf("the socket is served by uid %d, neither root nor you, so it is not sandboxd: refusing to send it anything", cred.Uid)
	}
	return nil
}
