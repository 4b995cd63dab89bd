package egress

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"time"
)

// A tunnel (CONNECT, SOCKS) is decided by its host because what it carries is usually TLS,
// which the proxy cannot read without interception. Plain HTTP sent through a tunnel (curl
// --proxytunnel, a SOCKS client to port 80) is another matter: the proxy reads it as well as a
// forwarded request, and carrying it blind would let any request the rules refuse for plain
// HTTP (a method/path deny, another name served by the tunnel's address) through by wrapping
// it in a tunnel. So a tunnel whose stream starts like an HTTP/1 request is served as plain HTTP
// is: each request decided by its method and path, held to the tunnel's host (serveTunnelHTTP).

// isSpaceLike reports bytes some origin server takes as white space in a request line (Python's
// http.server splits it with str.split, which also splits on \v, \f, \x1c-\x1f, \x85, \xa0).
func isSpaceLike(c byte) bool {
	switch c {
	case ' ', '\t', '\r', '\n', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x1f, 0x85, 0xa0:
		return true
	}
	return false
}

// isSkippedBeforeRequest reports bytes some origin server skips, or takes into the method,
// ahead of a request line: Netty skips ISO control characters and white space (Java's
// Character.isISOControl, 0x00-0x1f and 0x7f-0x9f), the JDK's com.sun.net.httpserver takes
// everything before the first space as the method and serves it anyway, and Python's
// http.server splits on 0xa0 too. A stream starting with such bytes and then a request line
// is a request to them, and must not be carried blind because its first byte is not a letter.
func isSkippedBeforeRequest(c byte) bool {
	return c <= ' ' || c >= 0x7f && c <= 0xa0
}

// isTokenByte reports an RFC 9110 tchar, what a method is made of.
func isTokenByte(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return bytes.IndexByte([]byte("!#$%&'*+-.^_`|~"), c) >= 0
}

// looksHTTP tells from the start b of a tunnel's stream whether an origin server may read it as
// an HTTP/1 request: after any leading bytes a server may skip (isSkippedBeforeRequest), a
// token (the method), white space or `/`, and a line that names an HTTP version, or (HTTP/0.9)
// goes on with a path, or is GET and anything. known is false while the first line is not all
// there. No such test is complete (the JDK's server also takes `{GET /x HTTP/1.1`, its method
// being `{GET`): where it matters, a host with method/path rules, a stream found not to be HTTP
// is refused rather than carried (carry).
func looksHTTP(b []byte) (isHTTP, known bool) {
	i := 0
	for i < len(b) && isSkippedBeforeRequest(b[i]) {
		i++
	}
	start := i
	for i < len(b) && isTokenByte(b[i]) {
		i++
	}
	if i == len(b) {
		return false, false
	}
	if i == start || b[i] == '\n' || !isSpaceLike(b[i]) && b[i] != '/' {
		return false, true // binary, or one word on its line: no request line
	}
	if string(b[start:i]) == "GET" && isSpaceLike(b[i]) {
		// HTTP/0.9's request is GET and a target, and a lax server takes any target: Python's
		// http.server runs `GET admin/../secret` (no version, no leading slash) as a GET of
		// /secret, so the target's shape cannot tell such a line from another protocol's.
		return true, true
	}
	line, _, found := bytes.Cut(b[i:], []byte{'\n'})
	if !found {
		return false, false
	}
	if bytes.Contains(bytes.ToLower(line), []byte("http/")) {
		return true, true
	}
	j := 0
	for j < len(line) && isSpaceLike(line[j]) {
		j++
	}
	return j < len(line) && line[j] == '/', true
}

// passUntilKnown sends the start of a tunnel's stream, which is not TLS, to up as it arrives
// until looksHTTP can tell whether it is HTTP, and reports which. No line end goes up before
// then (neither CR nor LF), so an origin has seen no whole line of a stream found to be HTTP,
// and the bytes passed on so far stay in br for the HTTP parser. A client that waits for an
// answer to a few bytes (a prompt, a protocol without lines) still gets it. A first line longer
// than br's buffer is taken as HTTP, so the doubt goes to the parser that refuses what it cannot
// read, never to a blind tunnel. A stream that ends (or fails) first is not HTTP, unless what
// it sent would be a request line ended there: that is errUnendedRequestLine. Since an origin
// may act on a line the end of its stream ends, the caller keeps up's connection abortive (a
// close resets it) until the answer is "not HTTP", and never ends it gracefully after such a
// start (nor after handing an HTTP stream over).
func passUntilKnown(br *bufio.Reader, up io.Writer) (bool, error) {
	sent := 0
	// What is buffered already is looked at first; after that each look needs a byte more than
	// the last one saw. Peeking again at the bytes that left it undecided (a line whose CR has
	// come but not its LF, which is held back, so sent stays short of it) would return at once
	// without reading, and spin for good.
	want := max(br.Buffered(), 1)
	for {
		b, err := br.Peek(want)
		want = len(b) + 1
		if isHTTP, known := looksHTTP(b); known {
			if !isHTTP {
				_, err := br.Discard(sent)
				return false, err
			}
			return true, nil
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			return true, nil
		}
		lim := len(b)
		if k := bytes.IndexAny(b, "\r\n"); k >= 0 {
			lim = k
		}
		if lim > sent {
			if _, werr := up.Write(b[sent:lim]); werr != nil {
				return false, werr
			}
			sent = lim
		}
		if err != nil {
			if _, derr := br.Discard(sent); derr != nil {
				return false, derr
			}
			// Some origins take the end of the stream for the end of the line: Python's
			// http.server (so Flask's and Django's development servers) reads the request line
			// with readline, which returns what came before the end, and runs it. A line that,
			// ended here, is a request is no request any rule decided, so it must not be ended:
			// the caller resets the connection instead (abortive).
			if isHTTP, _ := looksHTTP(append(slices.Clip(b), '\n')); isHTTP {
				return false, errUnendedRequestLine // not io.EOF: nothing is passed on, not even the end
			}
			if lim < len(b) {
				// Line ends held back, then the stream ended: not HTTP, they may go.
				if _, werr := up.Write(b[lim:]); werr != nil {
					return false, werr
				}
				_, _ = br.Discard(len(b) - lim)
			}
			return false, err
		}
	}
}

// serveTunnelHTTP serves the plain HTTP requests a tunnel to t carries, as forwarded requests
// are served: each decided by its method and path (kind http) and audited, origin-form or
// absolute-form for t's own host and port only, sent to the address its own decision checked.
func (s *Server) serveTunnelHTTP(ctx context.Context, p peer, t target, c *idleConn, br *bufio.Reader) {
	tr := s.forwarder()
	defer tr.CloseIdleConnections()
	h := &httpConn{s: s, c: c, ic: c, br: br, bw: bufio.NewWriterSize(c, 16<<10), peer: p, tunnel: &t, inner: KindHTTP, tr: tr}
	defer h.dropUpstream()
	c.setHard(time.Now().Add(s.headerTimeout()))
	h.loop(ctx)
}
