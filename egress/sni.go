package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync/atomic"
	"time"
)

// A tunnel the proxy does not terminate (CONNECT or SOCKS without interception) is decided by
// its host alone. What its client sends first can still name another host: a TLS ClientHello
// carries the server name the client means, and a shared front (a CDN, a hosting provider)
// routes by that name, not by the address it was dialed on. A tunnel allowed to one customer of
// a front would reach every other customer through it (domain fronting). So when a tunnel's
// stream starts with TLS, the proxy reads the ClientHello before passing it on and holds the
// tunnel to the name it was decided on. Inside the encrypted stream a Host header can still
// differ; only interception (network.tls_intercept) sees that.

// Extensions that hide the server name the client means behind an encrypted one (encrypted
// ClientHello, and its draft predecessor, encrypted SNI): the visible name is then the front's,
// not the one the client reaches.
const (
	extEncryptedClientHello = 0xfe0d
	extEncryptedServerName  = 0xffce
)

// tlsAlertAccessDenied is a fatal TLS alert, access_denied, as a plaintext record: what a
// client whose tunnel is refused at its ClientHello reads as the reason its handshake ended.
var tlsAlertAccessDenied = []byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 49}

// openStream returns what of the client's stream may go upstream first (bytes it read to
// check a ClientHello) and the ClientHello, or why the tunnel is refused. It reads from br only when the stream
// starts with a TLS handshake; anything else passes as it comes, decided by host. A ClientHello
// is read under the header deadline and bound, so a client cannot hold the check open or make
// it buffer without end.
func openStream(ic *idleConn, br *bufio.Reader, t target, headerTimeout time.Duration, allowECH bool) ([]byte, clientHello, string, error) {
	b, err := br.Peek(1)
	if err != nil {
		return nil, clientHello{}, "", err
	}
	if b[0] != tlsRecordHandshake {
		return nil, clientHello{}, recordBeforeHello(b[0], t), nil
	}
	ic.setHard(time.Now().Add(headerTimeout))
	defer ic.setHard(time.Time{})
	hello, seen, err := readClientHello(ic, br)
	if err != nil {
		if errors.Is(err, errHeadTooLarge) || ic.headSpent() {
			return nil, clientHello{}, "", err
		}
		return seen, hello, fmt.Sprintf("the tunnel's stream starts with a TLS handshake the proxy cannot read (%v), so the server name it carries cannot be checked against the tunnel's host %s", err, t.host), nil
	}
	return seen, hello, helloRefused(hello, t, allowECH), nil
}

// helloRefused is why a tunnel to t whose client sent hello is refused, or "".
func helloRefused(hello clientHello, t target, allowECH bool) string {
	if !allowECH && (slices.Contains(hello.extensions, extEncryptedClientHello) || slices.Contains(hello.extensions, extEncryptedServerName)) {
		return fmt.Sprintf("the TLS ClientHello in the tunnel to %s offers to encrypt the server name it means, so the proxy cannot hold the tunnel to %s; turn encrypted ClientHello off in the client (Chrome: --disable-features=EncryptedClientHello), or an administrator may allow it with network.allow_encrypted_client_hello", t.host, t.host)
	}
	if hello.serverName == "" {
		return "" // the server's default name, at the address the tunnel was decided on
	}
	if h, _, err := normalizeHost(hello.serverName); err != nil || h != t.host {
		return fmt.Sprintf("the TLS server name %s in the tunnel is not its host %s: a tunnel may reach only the name it was decided on (a front serving several names would otherwise reach any of them)", quoted(hello.serverName), t.host)
	}
	return ""
}

// recordBeforeHello is why a tunnel whose stream starts with first is refused, or "" for a
// stream that is not TLS. A TLS client opens with its ClientHello; a record of another type
// in front of it (a warning alert, which some TLS stacks skip) would make the stream pass as
// not TLS, its server name unchecked.
func recordBeforeHello(first byte, t target) string {
	if first < tlsRecordChangeCipherSpec || first > tlsRecordHeartbeat {
		return ""
	}
	return fmt.Sprintf("the tunnel's stream starts with a TLS record of type %d, not the handshake a TLS client opens with, so the server name its ClientHello carries would not be checked against the tunnel's host %s", first, t.host)
}

// sslv2Hello reports whether br starts with a ClientHello in SSLv2's record format (RFC 6101
// appendix E.2), which old clients sent to offer TLS too: a two-byte header with the top bit
// set, then message type 1.
func sslv2Hello(br *bufio.Reader) bool {
	if b, err := br.Peek(1); err != nil || b[0]&0x80 == 0 {
		return false // peeked no further: a stream that is not one waits for nothing more
	}
	b, err := br.Peek(3)
	return err == nil && b[2] == 1
}

// The TLS record types (RFC 8446 §5.1, and heartbeat, RFC 6520): the first byte of a record.
const (
	tlsRecordChangeCipherSpec = 0x14
	tlsRecordHeartbeat        = 0x18
)

// clientHello is what the tunnel check needs of a ClientHello.
type clientHello struct {
	serverName string
	alpn       []string // the protocols it offers (ALPN), by which a front may route it too
	extensions []uint16
}

// errHelloRead ends a handshake once its ClientHello has been read.
var errHelloRead = errors.New("client hello read")

// readClientHello parses the ClientHello at the head of r with crypto/tls's own parser (a
// handshake run only until the hello is read, its replies discarded) and returns it with the
// bytes the parser consumed, which are the client's and go upstream unchanged.
func readClientHello(c net.Conn, r io.Reader) (clientHello, []byte, error) {
	rc := &recordingConn{Conn: c, r: r}
	var hello *clientHello
	cfg := &tls.Config{GetConfigForClient: func(chi *tls.ClientHelloInfo) (*tls.Config, error) {
		hello = &clientHello{serverName: chi.ServerName, alpn: slices.Clone(chi.SupportedProtos), extensions: slices.Clone(chi.Extensions)}
		return nil, errHelloRead
	}}
	err := tls.Server(rc, cfg).HandshakeContext(context.Background())
	if hello == nil {
		if err == nil {
			err = errors.New("no ClientHello")
		}
		return clientHello{}, rc.seen, err
	}
	return *hello, rc.seen, nil
}

// recordingConn gives a TLS server the client's bytes and keeps a copy; what the server would
// answer goes nowhere. It reads whole records only, so nothing behind the hello's (a second
// hello sent early, which no one would then check) is taken with it.
type recordingConn struct {
	net.Conn
	r    io.Reader
	seen []byte
	hdr  []byte // a record header read but not handed on yet
	rem  int    // bytes of the current record still to hand on
}

func (c *recordingConn) Read(p []byte) (int, error) {
	if len(c.hdr) == 0 && c.rem == 0 {
		h := make([]byte, 5)
		n, err := io.ReadFull(c.r, h)
		switch {
		case n == 0:
			if errors.Is(err, io.ErrUnexpectedEOF) {
				err = io.EOF
			}
			return 0, err
		case n == len(h):
			c.rem = int(h[3])<<8 | int(h[4])
		}
		c.hdr = h[:n]
	}
	if len(c.hdr) > 0 {
		n := copy(p, c.hdr)
		c.seen = append(c.seen, c.hdr[:n]...)
		c.hdr = c.hdr[n:]
		return n, nil
	}
	n, err := c.r.Read(p[:min(len(p), c.rem)])
	c.rem -= n
	c.seen = append(c.seen, p[:n]...)
	return n, err
}

func (c *recordingConn) Write(p []byte) (int, error) { return len(p), nil }

func (c *recordingConn) Close() error { return nil }

// A TLS 1.3 server that cannot use the key share a ClientHello offers answers with a
// HelloRetryRequest, and the client sends a second ClientHello, which may name another server
// (servers pick their virtual host again from it: OpenSSL's servername callback runs for
// each). helloRetry holds a tunnel's second hello to its host as openStream holds the first.
type helloRetry struct {
	tls atomic.Bool // the client's stream started with a ClientHello (set before it went up)
	// asked is what the origin's first record said: retryNone (a ServerHello, an alert, the
	// origin's end: no second hello follows) or retryAsked, set before known is closed.
	asked atomic.Int32
	known chan struct{}
}

func newHelloRetry() *helloRetry { return &helloRetry{known: make(chan struct{})} }

const (
	retryNone int32 = iota
	retryAsked
)

// helloRetryRandom is the random of a ServerHello that is a HelloRetryRequest (RFC 8446 4.1.3).
var helloRetryRandom = []byte{
	0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
	0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
}

// copyOrigin copies the origin's direction of a tunnel, telling r first whether its first
// record, the answer to the client's ClientHello, asks for another. A TLS server never speaks
// first, so its first bytes come after the hello (and after tls was set).
func (r *helloRetry) copyOrigin(dst io.Writer, src io.Reader) error {
	br := bufio.NewReaderSize(src, 64)
	if _, err := br.Peek(1); err == nil && r.tls.Load() {
		r.asked.Store(retryAskedBy(br))
	}
	close(r.known)
	return copyStream(dst, br)
}

// retryAskedBy says whether the record at the head of br is a HelloRetryRequest. A handshake
// record too short to hold a ServerHello's random cannot be told apart, so it counts as one.
func retryAskedBy(br *bufio.Reader) int32 {
	h, err := br.Peek(5)
	if err != nil || h[0] != tlsRecordHandshake {
		return retryNone
	}
	const upToRandom = 4 + 2 + 32 // handshake header, legacy_version, random
	if int(h[3])<<8|int(h[4]) < upToRandom {
		return retryAsked
	}
	b, err := br.Peek(5 + upToRandom)
	if err != nil {
		return retryAsked
	}
	if b[5] == 2 && bytes.Equal(b[11:5+upToRandom], helloRetryRandom) {
		return retryAsked
	}
	return retryNone
}

// checkSecondHello holds the client's stream after its first ClientHello went up until the
// origin has answered it: a client may send its second hello before the retry that asks for
// it. Once the origin asked for another hello, that one (past a change_cipher_spec) is read
// and held to t's host as openStream held the first. It returns why the tunnel is refused,
// or an error of the stream (io.EOF: the client ended); "" and nil leave the rest of the
// stream to be copied as it comes.
func (s *Server) checkSecondHello(r *helloRetry, ic *idleConn, up io.Writer, br *bufio.Reader, t target) (string, error) {
	<-r.known // the origin answers a ClientHello alone, so nothing the client sends is needed first
	for r.asked.Load() == retryAsked {
		h, err := br.Peek(5)
		if err != nil {
			return "", err
		}
		switch h[0] {
		case tlsRecordChangeCipherSpec:
			if _, err := io.CopyN(up, br, 5+int64(int(h[3])<<8|int(h[4]))); err != nil {
				return "", err
			}
		case tlsRecordHandshake:
			ic.setHard(time.Now().Add(s.headerTimeout()))
			hello, seen, err := readClientHello(ic, br)
			ic.setHard(time.Time{})
			if err != nil {
				if errors.Is(err, errHeadTooLarge) || ic.headSpent() {
					return "", err
				}
				return fmt.Sprintf("the origin asked the client for another ClientHello (a HelloRetryRequest), and the one that followed cannot be read (%v), so the server name it carries cannot be checked against the tunnel's host %s", err, t.host), nil
			}
			if why := helloRefused(hello, t, s.AllowECH); why != "" {
				return why + " (in the second ClientHello, after the origin's HelloRetryRequest)", nil
			}
			_, err = up.Write(seen)
			return "", err
		default:
			return fmt.Sprintf("the origin asked the client for another ClientHello (a HelloRetryRequest), and the client sent a TLS record of type %d in its place, so the server name it carries would not be checked against the tunnel's host %s", h[0], t.host), nil
		}
	}
	return "", nil
}
