package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
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
	if !allowECH && (slices.Contains(hello.extensions, extEncryptedClientHello) || slices.Contains(hello.extensions, extEncryptedServerName)) {
		return seen, hello, fmt.Sprintf("the TLS ClientHello in the tunnel to %s offers to encrypt the server name it means, so the proxy cannot hold the tunnel to %s; turn encrypted ClientHello off in the client (Chrome: --disable-features=EncryptedClientHello), or an administrator may allow it with network.allow_encrypted_client_hello", t.host, t.host), nil
	}
	if hello.serverName == "" {
		return seen, hello, "", nil // the server's default name, at the address the tunnel was decided on
	}
	if h, _, err := normalizeHost(hello.serverName); err != nil || h != t.host {
		return seen, hello, fmt.Sprintf("the TLS server name %s in the tunnel is not its host %s: a tunnel may reach only the name it was decided on (a front serving several names would otherwise reach any of them)", quoted(hello.serverName), t.host), nil
	}
	return seen, hello, "", nil
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
// answer goes nowhere.
type recordingConn struct {
	net.Conn
	r    io.Reader
	seen []byte
}

func (c *recordingConn) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.seen = append(c.seen, p[:n]...)
	return n, err
}

func (c *recordingConn) Write(p []byte) (int, error) { return len(p), nil }

func (c *recordingConn) Close() error { return nil }
