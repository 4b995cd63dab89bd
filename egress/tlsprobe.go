package egress

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"
)

// A tunnel that is not intercepted passes the client's ClientHello to the origin as it came,
// and a ClientHello is mostly the client's to fill: its random, session id, cipher list and
// extensions can hold any bytes, a request line among them. A TLS server reads them as TLS;
// a server that speaks plain HTTP on that port may read them as a request (the JDK's takes
// whatever precedes the first space as the method). Where method/path rules name the tunnel's
// host, that request is one no rule decided, so before passing on a ClientHello there the
// proxy checks, with a handshake of its own whose bytes the client has no say in, that the
// origin answers TLS as TLS. A front that routes by the hello (HAProxy's req.ssl_sni, nginx's
// ssl_preread, Envoy's filter chains) may send a hello naming no server, or offering another
// protocol, to another backend than the probe's: the probe offers the server name and the
// protocols (ALPN) the client's hello does, and its answer is remembered for those.

// tlsProbeTTL is how long an origin's TLS answer is remembered: what listens on an address
// and port does not change protocol from one tunnel to the next, and a probe costs the origin
// a handshake.
const tlsProbeTTL = 5 * time.Minute

// maxTLSProbes bounds the remembered origins; past it the memory starts over.
const maxTLSProbes = 4096

// probedOrigin is what a probe's answer holds for: an address and port, and what of a hello a
// front there may route by.
type probedOrigin struct {
	dst        netip.AddrPort
	serverName string
	alpn       string // the offered protocols, each with its length before it
}

// tlsOrigins remembers the origins that answered a probe as TLS servers, until when.
type tlsOrigins struct {
	mu    sync.Mutex
	until map[probedOrigin]time.Time
}

func (o *tlsOrigins) known(k probedOrigin, now time.Time) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return now.Before(o.until[k])
}

func (o *tlsOrigins) remember(k probedOrigin, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.until == nil || len(o.until) >= maxTLSProbes {
		o.until = make(map[probedOrigin]time.Time)
	}
	o.until[k] = now.Add(tlsProbeTTL)
}

// errProbeDone ends the probe's handshake once the origin has shown what it speaks.
var errProbeDone = errors.New("TLS probe done")

// originSpeaksTLS reports why the origin at dst cannot be shown to be a TLS server for a
// hello like the client's, or "" when it answered the proxy's own ClientHello (offering the
// client's server name and protocols) with a TLS record: a handshake message or an alert,
// either way TLS. Nothing of the client's reaches the origin here.
func (s *Server) originSpeaksTLS(ctx context.Context, dst netip.AddrPort, client clientHello) string {
	key := probedOrigin{dst: dst, serverName: client.serverName}
	for _, p := range client.alpn {
		key.alpn += string(rune(len(p))) + p
	}
	if s.tlsOrigins.known(key, time.Now()) {
		return ""
	}
	raw, err := s.dial(ctx, dst)
	if err != nil {
		return err.Error()
	}
	defer raw.Close()
	ctx, cancel := context.WithTimeout(ctx, s.headerTimeout())
	defer cancel()
	fc := &firstRead{Conn: raw}
	cfg := &tls.Config{
		ServerName: client.serverName, // none when the client's names none
		NextProtos: client.alpn,
		// Only the protocol is asked: the client checks the certificate it gets.
		InsecureSkipVerify: true,
		VerifyConnection:   func(tls.ConnectionState) error { return errProbeDone },
	}
	herr := tls.Client(fc, cfg).HandshakeContext(ctx)
	if b := fc.head; len(b) >= 2 && (b[0] == tlsRecordHandshake || b[0] == tlsRecordAlert) && b[1] == 3 {
		s.tlsOrigins.remember(key, time.Now())
		return ""
	}
	switch {
	case len(fc.head) > 0:
		return fmt.Sprintf("it answered a TLS ClientHello with %.16q, not TLS", fc.head)
	case herr != nil:
		return fmt.Sprintf("it did not answer a TLS ClientHello (%v)", herr)
	}
	return "it did not answer a TLS ClientHello"
}

// tlsRecordAlert is the first byte of a TLS alert record.
const tlsRecordAlert = 0x15

// firstRead keeps the first bytes a connection reads.
type firstRead struct {
	net.Conn
	head []byte
}

func (f *firstRead) Read(p []byte) (int, error) {
	n, err := f.Conn.Read(p)
	if len(f.head) < 16 {
		f.head = append(f.head, p[:min(n, 16-len(f.head))]...)
	}
	return n, err
}
