package egress

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestTunnelServerName: a tunnel the proxy does not terminate is held to the host it was
// decided on. A ClientHello naming another host (domain fronting through a shared front), or
// hiding its name in an encrypted ClientHello, ends the tunnel with an access_denied alert and
// a refusal in the audit log, before a byte of it reaches the origin; no server name, the
// tunnel's own name, and streams that are not TLS pass.
func TestTunnelServerName(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	origin := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.WriteString(w, "served "+r.Host)
	}))
	defer origin.Close()
	port := portOf(t, origin.Listener.Addr().String())
	rec := &recorder{}
	s := &Server{Decide: rec.decide(allowAll), Audit: rec.audit, AllowPrivate: loopback,
		Resolver: newResolver("example.com", "127.0.0.1", "front.test", "127.0.0.1")}
	addr := startProxy(t, s)
	roots := origin.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs

	// handshake opens a tunnel to host (CONNECT, or SOCKS5 when socks) and speaks TLS in it
	// with server name sni ("" sends none); it returns the handshake's error.
	handshake := func(t *testing.T, socks bool, host, sni string) error {
		t.Helper()
		var c net.Conn
		if socks {
			var code byte
			c, code = socksDial(t, addr, socksCmdConnect, socksAtypDomain, host, atoiT(t, port))
			if code != socksReplyOK {
				t.Fatalf("SOCKS reply %#x", code)
			}
		} else {
			c, _ = connectTunnel(t, addr, host+":"+port)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		cfg := &tls.Config{RootCAs: roots, ServerName: sni}
		if sni == "" {
			cfg = &tls.Config{InsecureSkipVerify: true} // no name: nothing to verify it by
		}
		return tls.Client(c, cfg).Handshake()
	}
	for _, tc := range []struct {
		name      string
		socks     bool
		host, sni string
		refused   bool
	}{
		{"its own name", false, "example.com", "example.com", false},
		{"its own name, another case", false, "example.com", "EXAMPLE.com", false},
		{"no name", false, "front.test", "", false},
		{"another name through CONNECT", false, "front.test", "example.com", true},
		{"another name through SOCKS5", true, "front.test", "example.com", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(rec.audited())
			err := handshake(t, tc.socks, tc.host, tc.sni)
			if !tc.refused {
				if err != nil {
					t.Fatalf("handshake: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "access denied") {
				t.Fatalf("handshake error %v, want the proxy's access_denied alert", err)
			}
			evs := rec.audited()[before:]
			if len(evs) != 2 || !evs[0].Allowed || evs[1].Allowed || evs[1].Host != tc.host ||
				!strings.Contains(evs[1].Reason, `TLS server name "example.com" in the tunnel is not its host front.test`) || evs[1].IP == nil {
				t.Fatalf("events %+v, want the tunnel's allow then its refusal", evs)
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("origin served %d requests; the handshakes above send none", n)
	}

	t.Run("encrypted ClientHello", func(t *testing.T) {
		for _, ext := range []uint16{extEncryptedClientHello, extEncryptedServerName} {
			c, br := connectTunnel(t, addr, "front.test:"+port)
			_, _ = c.Write(rawClientHello("front.test", ext))
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			got, _ := io.ReadAll(br)
			c.Close()
			if !bytes.Equal(got, tlsAlertAccessDenied) {
				t.Errorf("extension %#x: client read %x, want the access_denied alert", ext, got)
			}
			if evs := rec.audited(); !strings.Contains(evs[len(evs)-1].Reason, "offers to encrypt the server name") {
				t.Errorf("extension %#x: last event %+v", ext, evs[len(evs)-1])
			}
		}
	})

	t.Run("not TLS", func(t *testing.T) {
		// An origin that speaks first: its banner must reach a client that waits for it.
		origin := echoOnce(t, "SSH-2.0-banner\r\n")
		c, br := connectTunnel(t, addr, "front.test:"+portOf(t, origin))
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		line, err := br.ReadString('\n')
		if err != nil || line != "SSH-2.0-banner\r\n" {
			t.Fatalf("banner %q, %v", line, err)
		}
		_, _ = io.WriteString(c, "SSH-2.0-client\r\n")
		if line, err = br.ReadString('\n'); err != nil || line != "SSH-2.0-client\r\n" {
			t.Fatalf("echo %q, %v", line, err)
		}
	})
}

// rawClientHello is a minimal TLS 1.2 ClientHello record naming host, with one more (empty)
// extension of type ext.
func rawClientHello(host string, ext uint16) []byte {
	u16 := func(b []byte, v int) []byte { return binary.BigEndian.AppendUint16(b, uint16(v)) }
	var sni []byte
	sni = u16(sni, len(host)+3)
	sni = append(sni, 0) // host_name
	sni = u16(sni, len(host))
	sni = append(sni, host...)
	var exts []byte
	exts = u16(exts, 0) // server_name
	exts = u16(exts, len(sni))
	exts = append(exts, sni...)
	exts = u16(exts, int(ext))
	exts = u16(exts, 0)
	var body []byte
	body = u16(body, tls.VersionTLS12)
	body = append(body, make([]byte, 32)...) // random
	body = append(body, 0)                   // session id
	body = u16(body, 2)
	body = u16(body, int(tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256))
	body = append(body, 1, 0) // compression: null
	body = u16(body, len(exts))
	body = append(body, exts...)
	hs := append([]byte{1, 0, byte(len(body) >> 8), byte(len(body))}, body...)
	return append(u16([]byte{tlsRecordHandshake, 3, 1}, len(hs)), hs...)
}

// TestOpenStream checks the ClientHello reading on its own: what it consumed is handed back
// whole for the origin, and a stream that is not TLS is not read at all.
func TestOpenStream(t *testing.T) {
	t.Parallel()
	hello := rawClientHello("front.test", 0x1234)
	ech := rawClientHello("front.test", extEncryptedClientHello)
	for _, tc := range []struct {
		name, host, stream string
		allowECH           bool
		wantRefused        bool
	}{
		{"matching name, early data behind it", "front.test", string(hello) + "early", false, false},
		{"other name", "example.com", string(hello), false, true},
		{"not TLS", "example.com", "GET / HTTP/1.1\r\n\r\n", false, false},
		{"a warning alert before the hello", "front.test", "\x15\x03\x01\x00\x02\x01\x5a" + string(rawClientHello("example.com", 0x1234)), false, true},
		{"change_cipher_spec before the hello", "front.test", "\x14\x03\x01\x00\x01\x01" + string(hello), false, true},
		{"application data first", "front.test", "\x17\x03\x03\x00\x01\x00", false, true},
		{"heartbeat first", "front.test", "\x18\x03\x03\x00\x01\x00", false, true},
		{"cut-off hello", "front.test", string(hello[:20]), false, true},
		{"not a ClientHello", "front.test", "\x16\x03\x01\x00\x04\x02\x00\x00\x00", false, true},
		{"encrypted ClientHello", "front.test", string(ech), false, true},
		{"encrypted ClientHello allowed", "front.test", string(ech), true, false},
		{"encrypted ClientHello allowed, other name", "example.com", string(ech), true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := net.Pipe()
			defer a.Close()
			go func() {
				_, _ = io.WriteString(b, tc.stream)
				_ = b.Close()
			}()
			ic := newIdleConn(a, 5*time.Second, nil)
			br := bufio.NewReader(ic)
			first, _, refused, err := openStream(ic, br, target{host: tc.host}, 5*time.Second, tc.allowECH)
			if err != nil {
				t.Fatalf("err %v", err)
			}
			if (refused != "") != tc.wantRefused {
				t.Fatalf("refused %q", refused)
			}
			rest, _ := io.ReadAll(br)
			if got := string(first) + string(rest); got != tc.stream {
				t.Fatalf("stream after the check %q, want %q", got, tc.stream)
			}
		})
	}
}

// TestTunnelSecondHello: after the origin's HelloRetryRequest the client's second ClientHello
// is held to the tunnel's host as the first is: one naming another server is refused before
// the origin sees it, one naming the host goes on, and a real TLS 1.3 handshake that needs
// the retry (the server takes only P-384) goes through.
func TestTunnelSecondHello(t *testing.T) {
	t.Parallel()
	// A fake origin: reads the first hello, asks for another, and keeps what comes next.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []byte, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				h := make([]byte, 5)
				if _, err := io.ReadFull(c, h); err != nil {
					return
				}
				if _, err := io.CopyN(io.Discard, c, int64(binary.BigEndian.Uint16(h[3:]))); err != nil {
					return
				}
				body := append([]byte{3, 3}, helloRetryRandom...)
				body = append(body, 0, 0x13, 0x01, 0)          // session id, TLS_AES_128_GCM_SHA256, no compression
				body = append(body, 0, 6, 0, 0x2b, 0, 2, 3, 4) // supported_versions: TLS 1.3
				hs := append([]byte{2, 0, byte(len(body) >> 8), byte(len(body))}, body...)
				_, _ = c.Write(append([]byte{tlsRecordHandshake, 3, 3, byte(len(hs) >> 8), byte(len(hs))}, hs...))
				rest, _ := io.ReadAll(c)
				got <- rest
			}()
		}
	}()
	port := portOf(t, ln.Addr().String())
	rec := &recorder{}
	s := &Server{Decide: rec.decide(allowAll), Audit: rec.audit, AllowPrivate: loopback,
		Resolver: newResolver("front.test", "127.0.0.1", "example.com", "127.0.0.1")}
	addr := startProxy(t, s)
	ccs := []byte{tlsRecordChangeCipherSpec, 3, 3, 0, 1, 1}
	for _, tc := range []struct {
		name, second string
		refused      bool
		early        bool // sent right behind the first, before the retry asks for it
	}{{"another name", "example.com", true, false}, {"another name, sent before the retry", "example.com", true, true},
		{"its own name", "front.test", false, false}} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(rec.audited())
			c, br := connectTunnel(t, addr, "front.test:"+port)
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			second := rawClientHello(tc.second, 0x1234)
			stream := rawClientHello("front.test", 0x1234)
			if tc.early {
				stream = append(append(stream, ccs...), second...)
			}
			if _, err := c.Write(stream); err != nil {
				t.Fatal(err)
			}
			h := make([]byte, 5)
			if _, err := io.ReadFull(br, h); err != nil || h[0] != tlsRecordHandshake {
				t.Fatalf("no HelloRetryRequest through the tunnel: %x %v", h, err)
			}
			if _, err := io.CopyN(io.Discard, br, int64(binary.BigEndian.Uint16(h[3:]))); err != nil {
				t.Fatal(err)
			}
			if !tc.early {
				_, _ = c.Write(append(append([]byte(nil), ccs...), second...))
			}
			if tc.refused {
				if b, _ := io.ReadAll(br); !bytes.Equal(b, tlsAlertAccessDenied) {
					t.Errorf("the client read %x, want the access_denied alert", b)
				}
			} else {
				_ = c.(*net.TCPConn).CloseWrite()
			}
			rest := <-got
			if bytes.Contains(rest, second) == tc.refused {
				t.Errorf("the origin got %q after its HelloRetryRequest", rest)
			}
			evs := rec.audited()[before:]
			refusals := 0
			for _, ev := range evs {
				if !ev.Allowed && strings.Contains(ev.Reason, "second ClientHello") {
					refusals++
				}
			}
			if (refusals == 1) != tc.refused {
				t.Errorf("records %+v", evs)
			}
		})
	}
	t.Run("a real retry", func(t *testing.T) {
		origin := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "served") }))
		origin.TLS = &tls.Config{CurvePreferences: []tls.CurveID{tls.CurveP384}, MinVersion: tls.VersionTLS13}
		origin.StartTLS()
		defer origin.Close()
		c, _ := connectTunnel(t, addr, "example.com:"+portOf(t, origin.Listener.Addr().String()))
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		roots := origin.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
		tc := tls.Client(c, &tls.Config{RootCAs: roots, ServerName: "example.com"})
		if err := tc.Handshake(); err != nil {
			t.Fatalf("handshake: %v", err)
		}
		if st := tc.ConnectionState(); st.Version != tls.VersionTLS13 || st.CurveID != tls.CurveP384 {
			t.Fatalf("negotiated %x with %v, want TLS 1.3 with P-384 (after a retry)", st.Version, st.CurveID)
		}
	})
}
