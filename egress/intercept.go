package egress

import (
	"bufio"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"go.uber.org/zap"
)

// Interceptor terminates TLS inside a session's tunnels, so the proxy sees, and the policy
// decides, each request's method and path on HTTPS as on plain HTTP. It presents a leaf
// certificate it mints per host under the daemon's own CA, which sessions are told to trust
// (and nothing else is); it verifies the origin server itself against Upstream.
type Interceptor struct {
	ca      *x509.Certificate
	caKey   crypto.Signer
	leafKey *ecdsa.PrivateKey
	// Upstream verifies origin servers; nil: the host's roots.
	Upstream *x509.CertPool

	mu    sync.Mutex
	cache *lru.Cache[string, *tls.Certificate]
}

// Leaf certificates live a day (back-dated an hour for clocks a little behind) and are minted
// again when less than an hour is left.
const (
	leafLifetime = 24 * time.Hour
	leafRenew    = time.Hour
	leafCacheMax = 4096
)

// GenerateCA makes a CA for interception: an ECDSA P-256 key and a self-signed certificate
// valid for ten years, allowed to sign leaf certificates only (no intermediate CA), as PEM.
func GenerateCA(name string, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate CA key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, fmt.Errorf("CA serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name, Organization: []string{"sandboxd"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("self-sign the CA: %w", err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encode the CA key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), nil
}

// NewInterceptor loads a CA (GenerateCA's PEM) and makes the key its leaves share.
func NewInterceptor(certPEM, keyPEM []byte) (*Interceptor, error) {
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, errors.New("interception CA: not PEM")
	}
	ca, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("interception CA certificate: %w", err)
	}
	if !ca.IsCA || ca.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, errors.New("interception CA certificate is not a CA")
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("interception CA key: %w", err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, errors.New("interception CA key cannot sign")
	}
	if pub, ok := signer.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(ca.PublicKey) {
		return nil, errors.New("interception CA key does not match its certificate")
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate the leaf key: %w", err)
	}
	cache, _ := lru.New[string, *tls.Certificate](leafCacheMax)
	return &Interceptor{ca: ca, caKey: signer, leafKey: leafKey, cache: cache}, nil
}

// leaf returns a certificate for host (a normalized name or an IP literal), minted under the CA.
func (i *Interceptor) leaf(host string, now time.Time) (*tls.Certificate, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if c, ok := i.cache.Get(host); ok && c.Leaf != nil && now.Add(leafRenew).Before(c.Leaf.NotAfter) {
		return c, nil
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("leaf serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: host},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(leafLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, i.ca, &i.leafKey.PublicKey, i.caKey)
	if err != nil {
		return nil, fmt.Errorf("mint a certificate for %s: %w", host, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse the certificate for %s: %w", host, err)
	}
	c := &tls.Certificate{Certificate: [][]byte{der, i.ca.Raw}, PrivateKey: i.leafKey, Leaf: leaf}
	i.cache.Add(host, c)
	return c, nil
}

// tlsRecordHandshake is the first byte of a TLS stream (a handshake record).
const tlsRecordHandshake = 0x16

// intercept serves a CONNECT tunnel when interception is on: it says the tunnel is open, then
// serves what the client sends (interceptTunnel).
func (h *httpConn) intercept(ctx context.Context, t target) {
	if _, err := h.bw.WriteString("HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	if err := h.bw.Flush(); err != nil {
		return
	}
	h.s.interceptTunnel(ctx, h.peer, t, h.ic, h.br)
}

// interceptTunnel serves a tunnel whose opening was already answered (CONNECT's 200, SOCKS's
// success). A stream that starts with TLS is terminated with a certificate for the tunnel's host
// and each request inside is decided by its method and path (kind https), then sent on over TLS
// to the origin, which the proxy verifies itself. Anything else cannot be read, so it is decided
// by host, as without interception, and closed if refused (the reply has been sent; the audit
// record says why).
//
// WARNING: this terminates the session's TLS; rerun TestIntercept and the daemon's
// TestEgressIntercept after a change.
func (s *Server) interceptTunnel(ctx context.Context, p peer, t target, c *idleConn, br *bufio.Reader) {
	c.setHard(time.Now().Add(s.headerTimeout()))
	b, err := br.Peek(1)
	if err != nil {
		// The tunnel was answered before any decision, so without a record an ended or silent
		// tunnel would leave no trace of the name it asked for.
		s.recordRefusal(ctx, p, t, nil, fmt.Sprintf("the client sent nothing through the tunnel before it ended or the header deadline passed (%v), so nothing was decided or sent", err))
		return
	}
	if b[0] != tlsRecordHandshake {
		why := recordBeforeHello(b[0], t)
		if why == "" && sslv2Hello(br) {
			// TLS all the same, but in a hello the proxy's TLS stack does not take: passed on
			// unread, its requests would go undecided.
			why = fmt.Sprintf("the tunnel's stream starts with an SSLv2-format ClientHello, which the intercepting proxy cannot terminate, so the requests inside it to %s could not be decided; use a current TLS client", t.host)
		}
		if why != "" {
			s.recordRefusal(ctx, p, t, nil, why)
			_, _ = unwrap(c).Write(tlsAlertAccessDenied)
			lingerClose(c)
			return
		}
		s.blindTunnel(ctx, p, t, c, br)
		return
	}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			// The name the client checks must be the tunnel's: a certificate for another name
			// would let a request reach one host while the policy decided another.
			if sni := hello.ServerName; sni != "" {
				if h, _, err := normalizeHost(sni); err != nil || h != t.host {
					return nil, fmt.Errorf("TLS server name %s is not the tunnel's host %s", quoted(sni), t.host)
				}
			}
			return s.Intercept.leaf(t.host, time.Now())
		},
	}
	tc := tls.Server(&bufConn{Conn: c, r: br}, cfg)
	defer tc.Close()
	hctx, cancel := context.WithTimeout(ctx, s.headerTimeout())
	err = tc.HandshakeContext(hctx)
	cancel()
	if err != nil {
		// Nothing was decided or carried, but the attempt is the security team's to see: a
		// client that pins its certificates, one that does not trust the sandbox's CA, or a
		// server name that is not the tunnel's (fronting) all end here.
		s.recordRefusal(ctx, p, t, nil, fmt.Sprintf("the client's TLS handshake with the intercepting proxy failed, so nothing was sent (a client that pins certificates or does not trust the sandbox's CA cannot be intercepted): %v", err))
		s.log.Debug("intercept handshake", zap.String("session", p.session), zap.String("host", t.host), zap.Error(err))
		return
	}
	// The first request inside gets a head deadline and bound of its own, as loop gives the next.
	c.setHard(time.Now().Add(s.headerTimeout()))
	tr := &http.Transport{
		Proxy: nil,
		DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			raw, err := s.dialChecked(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			uc := tls.Client(raw, &tls.Config{
				ServerName: t.host, RootCAs: s.Intercept.Upstream,
				MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"},
			})
			if err := uc.HandshakeContext(ctx); err != nil {
				_ = raw.Close()
				return nil, fmt.Errorf("TLS to %s: %w", t.host, err)
			}
			return uc, nil
		},
		DisableCompression:     true,
		TLSNextProto:           map[string]func(string, *tls.Conn) http.RoundTripper{},
		MaxResponseHeaderBytes: maxResponseHeadBytes,
		MaxIdleConnsPerHost:    8,
		IdleConnTimeout:        90 * time.Second,
		ReadBufferSize:         64 << 10,
		WriteBufferSize:        64 << 10,
	}
	defer tr.CloseIdleConnections()
	inner := &httpConn{
		s: s, c: tc, ic: c, br: bufio.NewReaderSize(tc, 4<<10), bw: bufio.NewWriterSize(tc, 16<<10),
		peer: p, tunnel: &t, inner: KindHTTPS, tr: tr,
	}
	inner.loop(ctx)
}

// blindTunnel decides a tunnel that does not start with TLS by its host, as without
// interception, and carries it if allowed: plain HTTP in it is then decided per request, and
// anything else is refused where method/path rules name the host (carry).
func (s *Server) blindTunnel(ctx context.Context, p peer, t target, c *idleConn, br *bufio.Reader) {
	dst, out, _, pathRules := s.admit(ctx, p, t)
	if out != outAllowed {
		lingerClose(c)
		return
	}
	c.setHard(time.Time{})
	up, err := s.dial(ctx, dst)
	if err != nil {
		lingerClose(c)
		return
	}
	stop := context.AfterFunc(ctx, func() { _ = up.Close() })
	defer stop()
	s.carry(ctx, p, t, c, up, dst, br, pathRules)
}

// bufConn reads through a bufio.Reader that may hold the start of the stream (a ClientHello
// sent right behind the CONNECT) and writes to the connection.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufConn) Read(p []byte) (int, error) { return b.r.Read(p) }
