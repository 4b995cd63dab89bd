package egress

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testCA is a CA the test trusts, with the Interceptor that mints under it.
func testCA(t *testing.T, name string) (*Interceptor, *x509.CertPool) {
	t.Helper()
	certPEM, keyPEM, err := GenerateCA(name, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	i, err := NewInterceptor(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(certPEM)
	ca, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return i, pool
}

// tlsOrigin is an HTTPS server on loopback with a certificate for host under its own CA.
func tlsOrigin(t *testing.T, host string, ca *Interceptor, h http.Handler) string {
	t.Helper()
	cert, err := ca.leaf(host, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{*cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return portOf(t, srv.Listener.Addr().String())
}

// TestIntercept: with interception on, a session's HTTPS is decided request by request, by
// method and path, under a certificate of the daemon's CA, and the origin is verified by the
// proxy; a TLS name or Host header naming another host is refused, a stream that is not TLS is
// decided by host, an origin the proxy cannot verify is a 502.
func TestIntercept(t *testing.T) {
	t.Parallel()
	originCA, originPool := testCA(t, "origin CA")
	seen := make(chan string, 16)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Method + " " + r.Host + r.URL.Path
		_, _ = io.WriteString(w, "origin says "+r.Method+" "+r.URL.Path)
	})
	port := tlsOrigin(t, "api.test", originCA, handler)
	rogueCA, _ := testCA(t, "rogue CA")
	roguePort := tlsOrigin(t, "rogue.test", rogueCA, handler)

	icpt, sessionPool := testCA(t, "sandboxd egress CA")
	icpt.Upstream = originPool
	rec := &recorder{}
	s := &Server{
		Decide: rec.decide(func(r Request) Verdict {
			switch {
			case r.Method == "GET":
				return Verdict{Allow: true, Rule: "WebFetch(GET api.test/**)"}
			case r.Method != "":
				return Verdict{Reason: "only GET", Rule: "WebFetch(GET api.test/**)"}
			}
			return Verdict{Reason: "a tunnel the proxy cannot read"}
		}),
		Audit: rec.audit, AllowPrivate: loopback, Intercept: icpt,
		Resolver: newResolver("api.test", "127.0.0.1", "rogue.test", "127.0.0.1"),
	}
	proxyAddr := startProxy(t, s)
	tr := &http.Transport{
		Proxy:           http.ProxyURL(&url.URL{Scheme: "http", Host: proxyAddr}),
		TLSClientConfig: &tls.Config{RootCAs: sessionPool},
	}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}
	get := func(method, u string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, u, strings.NewReader("x"))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, u, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	base := "https://api.test:" + port
	if code, body := get("GET", base+"/a/../b"); code != 200 || body != "origin says GET /a/../b" {
		t.Errorf("GET: %d %q", code, body)
	}
	if code, body := get("POST", base+"/paste"); code != 403 || !strings.Contains(body, "denied POST https://api.test:"+port+"/paste: only GET") {
		t.Errorf("POST: %d %q", code, body)
	}
	if code, body := get("GET", base+"/again"); code != 200 || body != "origin says GET /again" {
		t.Errorf("GET after a refusal: %d %q", code, body)
	}
	if code, body := get("GET", "https://rogue.test:"+roguePort+"/x"); code != 502 || !strings.Contains(body, "certificate") || !strings.Contains(body, "upstream rogue.test:") {
		t.Errorf("unverifiable origin: %d %q", code, body)
	}
	close(seen)
	var got []string
	for x := range seen {
		got = append(got, x)
	}
	if len(got) != 2 || got[0] != "GET api.test:"+port+"/a/../b" || got[1] != "GET api.test:"+port+"/again" {
		t.Errorf("origin saw %q", got)
	}
	var https int
	for _, ev := range rec.audited() {
		if ev.Kind == KindHTTPS && ev.Method != "" && ev.Path != "" {
			https++
		}
	}
	if https != 4 { // the SOCKS PUT below comes after this count
		t.Errorf("audited %+v", rec.audited())
	}

	// SOCKS tunnels are intercepted alike.
	pn, _ := strconv.Atoi(port)
	sc, code := socksDial(t, proxyAddr, socksCmdConnect, socksAtypDomain, "api.test", pn)
	if code != socksReplyOK {
		t.Fatalf("socks reply %#x", code)
	}
	stc := tls.Client(sc, &tls.Config{ServerName: "api.test", RootCAs: sessionPool})
	fmt.Fprintf(stc, "PUT /s HTTP/1.1\r\nHost: api.test:%s\r\nContent-Length: 0\r\n\r\n", port)
	if resp, err := http.ReadResponse(bufio.NewReader(stc), nil); err != nil || resp.StatusCode != 403 {
		t.Errorf("PUT through SOCKS: %v %v", resp, err)
	}
	sc.Close()

	// A TLS name for another host than the tunnel's gets no certificate.
	c := openTunnel(t, proxyAddr, "api.test:"+port)
	tc := tls.Client(c, &tls.Config{ServerName: "other.test", RootCAs: sessionPool})
	if err := tc.Handshake(); err == nil {
		t.Error("handshake for another name succeeded")
	}
	c.Close()
	// A client that does not trust the sandbox's CA (or pins its origin's certificate) fails
	// its handshake. Both failures are audited: nothing was sent, and the team sees why.
	c = openTunnel(t, proxyAddr, "api.test:"+port)
	tc = tls.Client(c, &tls.Config{ServerName: "api.test", RootCAs: originPool})
	if err := tc.Handshake(); err == nil {
		t.Error("a client that does not trust the sandbox's CA completed its handshake")
	}
	c.Close()
	for _, want := range []string{"is not the tunnel's host", "certificate"} {
		ok := false
		for deadline := time.Now().Add(5 * time.Second); !ok && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			for _, ev := range rec.audited() {
				ok = ok || !ev.Allowed && ev.Host == "api.test" && strings.Contains(ev.Reason, "TLS handshake") && strings.Contains(ev.Reason, want)
			}
		}
		if !ok {
			t.Errorf("no audit record of the failed handshake (%q): %+v", want, rec.audited())
		}
	}
	// A Host header naming another host inside the tunnel is refused.
	c = openTunnel(t, proxyAddr, "api.test:"+port)
	tc = tls.Client(c, &tls.Config{ServerName: "api.test", RootCAs: sessionPool})
	fmt.Fprintf(tc, "GET /x HTTP/1.1\r\nHost: rogue.test:%s\r\n\r\n", port)
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil || resp.StatusCode != 400 {
		t.Errorf("other Host inside the tunnel: %v %v", resp, err)
	}
	c.Close()
	// A request head past the bound inside the tunnel is refused as outside it.
	c = openTunnel(t, proxyAddr, "api.test:"+port)
	tc = tls.Client(c, &tls.Config{ServerName: "api.test", RootCAs: sessionPool})
	go fmt.Fprintf(tc, "GET /%s", strings.Repeat("a", 100<<10))
	resp, err = http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("oversized head inside the tunnel: %v %v", resp, err)
	}
	c.Close()
	// Not TLS: decided by host (refused here) and closed.
	c = openTunnel(t, proxyAddr, "api.test:"+port)
	fmt.Fprintf(c, "GET /x HTTP/1.1\r\nHost: api.test\r\n\r\n")
	if n, _ := c.Read(make([]byte, 1)); n != 0 {
		t.Error("a tunnel that is not TLS was carried")
	}
	c.Close()
}

// openTunnel opens a CONNECT tunnel through the proxy.
func openTunnel(t *testing.T, proxyAddr, hostport string) net.Conn {
	t.Helper()
	c := dialProxy(t, proxyAddr, 10*time.Second)
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", hostport, hostport)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 || br.Buffered() != 0 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	return c
}

func TestInterceptorCA(t *testing.T) {
	t.Parallel()
	certPEM, keyPEM, err := GenerateCA("x", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	other, otherKey, _ := GenerateCA("y", time.Now())
	if _, err := NewInterceptor(certPEM, otherKey); err == nil {
		t.Error("a key of another CA was accepted")
	}
	if _, err := NewInterceptor(other[:10], keyPEM); err == nil {
		t.Error("garbage was accepted")
	}
	i, pool := testCA(t, "z")
	c, err := i.leaf("93.184.216.34", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "93.184.216.34"}); err != nil {
		t.Errorf("IP leaf: %v", err)
	}
	c2, _ := i.leaf("93.184.216.34", time.Now())
	if c2 != c {
		t.Error("leaf not cached")
	}
	c3, _ := i.leaf("93.184.216.34", time.Now().Add(leafLifetime))
	if c3 == c {
		t.Error("an expiring leaf was reused")
	}
}

// TestInterceptFailuresPaced: an intercepted tunnel takes its owner's pace when it opens, as a
// tunnel does without interception (each new host's certificate costs a signature), and a
// failed handshake inside it is recorded, that record taking the pace like a decision: past
// it, tunnels in a loop are refused (429) before any certificate is made.
func TestInterceptFailuresPaced(t *testing.T) {
	t.Parallel()
	icpt, _ := testCA(t, "sandboxd egress CA")
	_, otherPool := testCA(t, "a CA the client trusts instead")
	rec := &recorder{}
	s := &Server{Decide: rec.decide(allowAll), Audit: rec.audit, AllowPrivate: loopback, Intercept: icpt,
		Resolver: newResolver("api.test", "127.0.0.1"), RatePerOwner: 0.01, BurstPerOwner: 4}
	addr := startProxy(t, s)
	refused, opened := 0, 0
	for range 5 {
		c := dialProxy(t, addr, 10*time.Second)
		fmt.Fprintf(c, "CONNECT api.test:443 HTTP/1.1\r\nHost: api.test:443\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("CONNECT: %v", err)
		}
		if resp.StatusCode == http.StatusTooManyRequests {
			refused++
			c.Close()
			continue
		}
		if resp.StatusCode != 200 || br.Buffered() != 0 {
			t.Fatalf("CONNECT: %v", resp)
		}
		if err := tls.Client(c, &tls.Config{ServerName: "api.test", RootCAs: otherPool}).Handshake(); err == nil {
			t.Fatal("a client that does not trust the sandbox's CA completed its handshake")
		}
		// The proxy's side of a handshake ends after the client's: wait for its record (and
		// the token it takes) before the next tunnel asks for one.
		opened++
		for deadline := time.Now().Add(5 * time.Second); len(rec.audited()) < opened && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		c.Close()
	}
	if refused != 3 {
		t.Errorf("%d of 5 tunnels refused, want the 3 past a burst of 4 (two tunnels and their two failure records)", refused)
	}
	// The proxy's side of a handshake ends after the client's: wait for the two records, then
	// a little for any the pace should have kept out.
	for deadline := time.Now().Add(5 * time.Second); len(rec.audited()) < 2 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if n := len(rec.audited()); n != 2 {
		t.Errorf("%d handshake failures recorded, want the 2 the pace's burst allows: %+v", n, rec.audited())
	}
}

// TestInterceptSilentTunnelAudited: with interception a tunnel is answered before it is
// decided, so one the client ends without sending anything (or before the header deadline) was
// decided by nothing; it is still recorded, refused, so probing names leaves a trace.
func TestInterceptSilentTunnelAudited(t *testing.T) {
	t.Parallel()
	ca, _ := testCA(t, "silent")
	rec := &recorder{}
	s := &Server{
		Decide: rec.decide(func(Request) Verdict { return Verdict{Reason: "no"} }),
		Audit:  rec.audit, Intercept: ca, HeaderTimeout: 500 * time.Millisecond,
	}
	proxy := startProxy(t, s)
	openTunnel(t, proxy, "closed.test:443").Close()
	c := openTunnel(t, proxy, "quiet.test:443") // says nothing until the header deadline
	defer c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for len(rec.audited()) < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	evs := rec.audited()
	if len(evs) != 2 {
		t.Fatalf("audited %+v, want one record for each tunnel", evs)
	}
	for _, ev := range evs {
		if ev.Allowed || ev.Kind != KindConnect || (ev.Host != "closed.test" && ev.Host != "quiet.test") || ev.Reason == "" {
			t.Errorf("record %+v", ev)
		}
	}
}

// TestInterceptRecordBeforeHello: under interception, a tunnel whose stream starts with a TLS
// record other than the handshake (a warning alert some stacks skip, then a ClientHello for
// another name) is refused and audited, not passed on as a stream that is not TLS.
func TestInterceptRecordBeforeHello(t *testing.T) {
	t.Parallel()
	ca, _ := testCA(t, "alert")
	rec := &recorder{}
	s := &Server{
		Decide: rec.decide(func(Request) Verdict { return Verdict{Allow: true, Rule: "r"} }),
		Audit:  rec.audit, Intercept: ca, HeaderTimeout: 2 * time.Second,
	}
	proxy := startProxy(t, s)
	for i, tc := range []struct {
		stream []byte
		reason string
	}{
		{append([]byte{0x15, 0x03, 0x01, 0x00, 0x02, 0x01, 0x5a}, rawClientHello("other.test", 0x1234)...), "TLS record of type 21"},
		// An SSLv2-format hello offering TLS 1.2: TLS the proxy's stack would not terminate.
		{[]byte{0x80, 0x2f, 0x01, 0x03, 0x03, 0x00, 0x03, 0x00, 0x00, 0x00, 0x20, 0x00, 0x00, 0x9c}, "SSLv2-format ClientHello"},
	} {
		c := openTunnel(t, proxy, "front.test:443")
		defer c.Close()
		if _, err := c.Write(tc.stream); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		got, _ := io.ReadAll(c)
		if !bytes.Equal(got, tlsAlertAccessDenied) {
			t.Errorf("%s: the client read %x, want the access_denied alert", tc.reason, got)
		}
		evs := rec.audited()
		if len(evs) != i+1 || evs[i].Allowed || evs[i].Host != "front.test" || !strings.Contains(evs[i].Reason, tc.reason) {
			t.Errorf("audited %+v, want a refusal of front.test: %s", evs, tc.reason)
		}
	}
}
