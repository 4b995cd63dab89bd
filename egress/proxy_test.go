package egress

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/permission"
)

func TestHTTPForward(t *testing.T) {
	t.Parallel()
	var upstreamConns atomic.Int64
	origin := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Proxy-Connection") != "" || r.Header.Get("Proxy-Authorization") != "" {
			t.Errorf("hop-by-hop header forwarded: %v", r.Header)
		}
		switch r.URL.Path {
		case "/echo":
			n, _ := io.Copy(io.Discard, r.Body)
			fmt.Fprintf(w, "%s %d", r.Method, n)
		default:
			fmt.Fprintf(w, "host=%s path=%s query=%s", r.Host, r.URL.Path, r.URL.RawQuery)
		}
	}))
	origin.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			upstreamConns.Add(1)
		}
	}
	origin.Start()
	defer origin.Close()
	port := portOf(t, origin.Listener.Addr().String())

	rec := &recorder{}
	s := &Server{Decide: rec.decide(allowAll), Audit: rec.audit, AllowPrivate: loopback,
		Resolver: newResolver("origin.test", "127.0.0.1")}
	proxyAddr := startProxy(t, s)
	client := proxyClient(t, proxyAddr)

	reused := 0
	for i := range 5 {
		trace := &httptrace.ClientTrace{GotConn: func(ci httptrace.GotConnInfo) {
			if ci.Reused {
				reused++
			}
		}}
		req, _ := http.NewRequest("GET", fmt.Sprintf("http://Origin.TEST.:%s/a/b?i=%d", port, i), nil)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := fmt.Sprintf("host=Origin.TEST.:%s path=/a/b query=i=%d", port, i)
		if resp.StatusCode != 200 || string(b) != want {
			t.Fatalf("got %d %q, want %q", resp.StatusCode, b, want)
		}
	}
	if reused != 4 {
		t.Errorf("client connection reused %d times, want 4 (keep-alive)", reused)
	}
	if n := upstreamConns.Load(); n != 1 {
		t.Errorf("origin saw %d connections, want 1 (upstream reuse)", n)
	}

	// A streamed upload of unknown length arrives whole.
	pr, pw := io.Pipe()
	go func() {
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for range 16 {
			_, _ = pw.Write(chunk)
		}
		_ = pw.Close()
	}()
	resp, err := client.Post(fmt.Sprintf("http://origin.test:%s/echo", port), "application/octet-stream", pr)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != fmt.Sprintf("POST %d", 16*64<<10) {
		t.Errorf("upload: got %q", b)
	}

	// A sized upload, then a request on the same connection: the body was consumed exactly.
	var reusedAfterPost bool
	resp, err = client.Post(fmt.Sprintf("http://origin.test:%s/echo", port), "text/plain", strings.NewReader("12345"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "POST 5" {
		t.Errorf("sized upload: got %q", b)
	}
	req, _ := http.NewRequest("GET", fmt.Sprintf("http://origin.test:%s/after", port), nil)
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn: func(ci httptrace.GotConnInfo) { reusedAfterPost = ci.Reused },
	}))
	if resp, err = client.Do(req); err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if !reusedAfterPost {
		t.Error("connection not kept alive after a sized upload")
	}

	// curl's large uploads wait for 100 Continue before sending the body.
	c := dialProxy(t, proxyAddr, 5*time.Second)
	fmt.Fprintf(c, "PUT http://origin.test:%s/echo HTTP/1.1\r\nHost: origin.test\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n", port)
	cbr := bufio.NewReader(c)
	line, err := cbr.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
		t.Fatalf("expected 100 Continue, got %q %v", line, err)
	}
	_, _ = cbr.ReadString('\n')
	_, _ = io.WriteString(c, "abc")
	resp, err = http.ReadResponse(cbr, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	if string(b) != "PUT 3" {
		t.Errorf("after 100 Continue: %q", b)
	}

	reqs := rec.requests()
	if len(reqs) != 9 {
		t.Fatalf("Decide called %d times, want 9", len(reqs))
	}
	r0 := reqs[0]
	if r0.Session != "s1" || r0.Kind != KindHTTP || r0.Host != "origin.test" || r0.Method != "GET" ||
		r0.Path != "/a/b" || r0.IP != nil || r0.Port != atoiT(t, port) { // decided before the lookup
		t.Errorf("request %+v", r0)
	}
	if reqs[5].Method != "POST" || reqs[5].Path != "/echo" {
		t.Errorf("upload request %+v", reqs[5])
	}
	if evs := rec.audited(); len(evs) != 9 || !evs[0].Allowed || evs[0].Rule != "WebFetch" || evs[0].Host != "origin.test" {
		t.Errorf("events %+v", evs)
	}
}

func atoiT(t testing.TB, s string) int {
	t.Helper()
	p, err := parsePort(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestHTTPStreaming proves the response is not buffered: the first chunk reaches the client
// while the origin is still holding the rest back.
func TestHTTPStreaming(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
		_, _ = io.WriteString(w, "second\n")
	}))
	defer origin.Close()
	s := &Server{Decide: allowDecide, AllowPrivate: loopback}
	client := proxyClient(t, startProxy(t, s))
	resp, err := client.Get(origin.URL)
	if err != nil {
		close(release)
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line := make([]byte, 6)
	if _, err := io.ReadFull(resp.Body, line); err != nil || string(line) != "first\n" {
		t.Fatalf("first chunk %q, %v", line, err)
	}
	close(release)
	rest, _ := io.ReadAll(resp.Body)
	if string(rest) != "second\n" {
		t.Fatalf("rest %q", rest)
	}
}

func allowDecide(_ context.Context, _ Request) Verdict { return Verdict{Allow: true} }

func TestConnectTLS(t *testing.T) {
	t.Parallel()
	origin := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "secret "+r.Host)
	}))
	defer origin.Close()
	port := portOf(t, origin.Listener.Addr().String())
	rec := &recorder{}
	// The httptest certificate names example.com.
	s := &Server{Decide: rec.decide(allowAll), Audit: rec.audit, AllowPrivate: loopback,
		Resolver: newResolver("example.com", "127.0.0.1")}
	addr := startProxy(t, s)
	tr := origin.Client().Transport.(*http.Transport).Clone()
	tr.Proxy = http.ProxyURL(&url.URL{Scheme: "http", Host: addr})
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get("https://example.com:" + port + "/x")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "secret example.com:"+port {
		t.Fatalf("got %q", b)
	}
	reqs := rec.requests()
	if len(reqs) != 1 || reqs[0].Kind != KindConnect || reqs[0].Host != "example.com" || reqs[0].Method != "" || reqs[0].Path != "" {
		t.Fatalf("requests %+v", reqs)
	}
}

func TestSOCKS5(t *testing.T) {
	t.Parallel()
	echo := echoServer(t)
	port := atoiT(t, portOf(t, echo))
	rec := &recorder{}
	s := &Server{
		Decide: rec.decide(func(r Request) Verdict {
			if r.Host == "blocked.test" {
				return Verdict{Reason: "blocked", Rule: "WebFetch(domain:blocked.test)"}
			}
			return Verdict{Allow: true}
		}),
		Audit: rec.audit, AllowPrivate: loopback,
		Resolver: newResolver("echo.test", "127.0.0.1", "blocked.test", "127.0.0.1"),
	}
	addr := startProxy(t, s)

	for _, tc := range []struct {
		name string
		atyp byte
		host string
	}{
		{"domain", socksAtypDomain, "ECHO.test."},
		{"ipv4", socksAtypIPv4, "127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, code := socksDial(t, addr, socksCmdConnect, tc.atyp, tc.host, port)
			defer c.Close()
			if code != socksReplyOK {
				t.Fatalf("reply %#x", code)
			}
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.WriteString(c, "ping"); err != nil {
				t.Fatal(err)
			}
			b := make([]byte, 4)
			if _, err := io.ReadFull(c, b); err != nil || string(b) != "ping" {
				t.Fatalf("echo %q %v", b, err)
			}
		})
	}

	refusals := []struct {
		name string
		cmd  byte
		atyp byte
		host string
		want byte
	}{
		{"denied by policy", socksCmdConnect, socksAtypDomain, "blocked.test", socksReplyNotAllowed},
		{"ipv6 loopback not allowed", socksCmdConnect, socksAtypIPv6, "::1", socksReplyNotAllowed},
		{"metadata", socksCmdConnect, socksAtypIPv4, "169.254.169.254", socksReplyNotAllowed},
		{"unknown name", socksCmdConnect, socksAtypDomain, "nowhere.test", socksReplyHostUnreachable},
		{"bind", 0x02, socksAtypIPv4, "127.0.0.1", socksReplyCmdNotSupported},
		{"udp associate", 0x03, socksAtypIPv4, "127.0.0.1", socksReplyCmdNotSupported},
		{"bad address type", socksCmdConnect, 0x09, "", socksReplyAtypNotSupported},
		{"numeric name", socksCmdConnect, socksAtypDomain, "127.1", socksReplyGeneralFailure},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			c, code := socksDial(t, addr, tc.cmd, tc.atyp, tc.host, port)
			defer c.Close()
			if code != tc.want {
				t.Fatalf("reply %#x, want %#x", code, tc.want)
			}
			// The proxy ends the connection after a refusal.
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if n, err := c.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
				t.Fatalf("after refusal read %d, %v; want EOF", n, err)
			}
		})
	}

	t.Run("no acceptable method", func(t *testing.T) {
		c := dialProxy(t, addr, 5*time.Second)
		_, _ = c.Write([]byte{5, 1, 2}) // username/password only
		var sel [2]byte
		if _, err := io.ReadFull(c, sel[:]); err != nil || sel != [2]byte{5, 0xff} {
			t.Fatalf("selection %v %v", sel, err)
		}
	})

	var denied []Event
	for _, ev := range rec.audited() {
		if !ev.Allowed {
			denied = append(denied, ev)
		}
		if ev.Kind != KindSOCKS5 {
			t.Errorf("event kind %q", ev.Kind)
		}
	}
	// Decided: the policy's, ::1, metadata, unresolved; refused before any decision, each
	// recorded too: BIND, UDP ASSOCIATE, an unknown address type, 127.1.
	if len(denied) != 8 {
		t.Errorf("denied events %+v, want 8 (policy, ::1, metadata, unresolved, bind, udp, atyp, 127.1)", denied)
	}
	// A command refused is recorded with the address it named.
	named := 0
	for _, ev := range denied {
		if strings.Contains(ev.Reason, "only CONNECT is served") && ev.Host == "127.0.0.1" && ev.Port != 0 {
			named++
		}
	}
	if named != 2 {
		t.Errorf("BIND and UDP ASSOCIATE refusals with their address: %d of %+v", named, denied)
	}
}

func TestDenials(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	s := &Server{
		Decide: rec.decide(func(r Request) Verdict {
			return Verdict{Reason: "no rule allows " + r.Host, Rule: "network.denied_domains"}
		}),
		Audit:    rec.audit,
		Resolver: newResolver("example.com", "93.184.216.34"),
		Dialer:   failDialer{t},
	}
	addr := startProxy(t, s)

	resp, body := rawRequest(t, addr, "GET http://example.com/x HTTP/1.1\r\nHost: example.com\r\n\r\n")
	want := "sandboxd egress policy denied GET http://example.com:80/x: no rule allows example.com. Do not retry through another route " +
		"(another client, https, a tunnel or a raw socket): the same policy applies there. If this access is needed, ask the user to change the policy.\n"
	if resp.StatusCode != 403 || body != want {
		t.Errorf("GET: %d %q", resp.StatusCode, body)
	}
	if ps := resp.Header.Get("Proxy-Status"); !strings.Contains(ps, "http_request_denied") {
		t.Errorf("Proxy-Status %q", ps)
	}
	resp, body = rawRequest(t, addr, "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
	if resp.StatusCode != 403 || !strings.HasPrefix(body, "sandboxd egress policy denied a tunnel (CONNECT) to example.com:443: no rule allows example.com. Do not retry") {
		t.Errorf("CONNECT: %d %q", resp.StatusCode, body)
	}
	c, code := socksDial(t, addr, socksCmdConnect, socksAtypDomain, "example.com", 443)
	c.Close()
	if code != socksReplyNotAllowed {
		t.Errorf("socks reply %#x", code)
	}
	evs := rec.audited()
	if len(evs) != 3 {
		t.Fatalf("events %+v", evs)
	}
	for _, ev := range evs {
		// Denied by name before any lookup: nothing went out through DNS, so no address.
		if ev.Allowed || ev.Rule != "network.denied_domains" || ev.IP != nil {
			t.Errorf("event %+v", ev)
		}
	}

	// A denied request without a body leaves the connection usable: an agent's client that
	// keeps one connection to the proxy can go on.
	c2 := dialProxy(t, addr, 5*time.Second)
	br := bufio.NewReader(c2)
	for range 2 {
		fmt.Fprintf(c2, "GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 403 {
			t.Fatalf("keep-alive denial: %v %v", resp, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
	}
}

// failDialer fails the test if the proxy dials anything.
type failDialer struct{ t *testing.T }

func (d failDialer) DialContext(_ context.Context, _, addr string) (net.Conn, error) {
	d.t.Errorf("unexpected dial of %s", addr)
	return nil, errors.New("no dial")
}

// TestPrivateRefused is the DNS-rebinding guard: an allowed name resolving to a private
// address is refused before the policy is asked and before anything is dialed.
func TestPrivateRefused(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	s := &Server{
		Decide: rec.decide(allowAll), Audit: rec.audit, Dialer: failDialer{t},
		Resolver: newResolver(
			"evil.test", "127.0.0.1",
			"mixed.test", "93.184.216.34", "mixed.test", "10.1.2.3",
			"meta.test", "169.254.169.254",
			"v6meta.test", "fd00:ec2::254",
			"mapped.test", "::ffff:192.168.1.1",
			"cgnat.test", "100.64.1.1",
			"nat64.test", "64:ff9b::7f00:1",
			"doc.test", "203.0.113.7",
		),
	}
	addr := startProxy(t, s)
	for _, tc := range []struct{ target, want string }{
		{"evil.test:80", "evil.test resolves to 127.0.0.1, a loopback address"},
		{"mixed.test:80", "mixed.test resolves to 10.1.2.3, a private address"},
		{"meta.test:80", "a cloud metadata address"},
		{"v6meta.test:80", "a cloud metadata address"},
		{"mapped.test:80", "resolves to 192.168.1.1, a private address"},
		{"cgnat.test:80", "a CGNAT shared address"},
		{"nat64.test:80", "NAT64 of a loopback"},
		{"doc.test:80", "doc.test resolves to 203.0.113.7, a documentation address"},
		{"[2001:db8::1]:80", "2001:db8::1 is a documentation address"},
		{"127.0.0.1:80", "127.0.0.1 is a loopback address"},
		{"[::ffff:127.0.0.1]:80", "127.0.0.1 is a loopback address"},
		{"[::1]:80", "::1 is a loopback address"},
		{"[fd12::1]:80", "unique local"},
		{"0.0.0.0:80", "unspecified"},
	} {
		t.Run(tc.target, func(t *testing.T) {
			resp, body := rawRequest(t, addr, "CONNECT "+tc.target+" HTTP/1.1\r\n\r\n")
			if resp.StatusCode != 403 || !strings.Contains(body, tc.want) || !strings.Contains(body, "Do not retry") {
				t.Errorf("%d %q, want 403 with %q", resp.StatusCode, body, tc.want)
			}
			if ps := resp.Header.Get("Proxy-Status"); !strings.Contains(ps, "destination_ip_prohibited") {
				t.Errorf("Proxy-Status %q", ps)
			}
		})
	}
	// Decide was asked by name first (it allows all here); the guard still refused each.
	for _, ev := range rec.audited() {
		if ev.Allowed || ev.Reason == "" || ev.IP == nil {
			t.Errorf("event %+v", ev)
		}
	}
}

// TestOwnAddressRefused: the proxy refuses the host's own addresses, by name or by number,
// public or not, unless allow_private_cidrs covers them: from the host they reach what is
// bound to 0.0.0.0 there.
func TestOwnAddressRefused(t *testing.T) {
	if !inOwnNetns(t, "^TestOwnAddressRefused$") {
		return
	}
	ip(t, "link", "set", "lo", "up")
	ip(t, "addr", "add", "93.184.216.34/32", "dev", "lo")
	var dialed atomic.Int64
	s := &Server{
		Decide: allowDecide,
		Dialer: dialerFunc(func(context.Context, string, string) (net.Conn, error) {
			dialed.Add(1)
			return nil, errors.New("not dialed in this test")
		}),
		Resolver: newResolver("self.test", "93.184.216.34", "other.test", "93.184.216.35"),
	}
	// This host (the test's network namespace) has 93.184.216.34: a public address, which no
	// range refuses.
	addr := startProxy(t, s)
	for _, tc := range []struct{ target, want string }{
		{"self.test:80", "self.test resolves to 93.184.216.34, an address of this host"},
		{"93.184.216.34:80", "93.184.216.34 is an address of this host"},
		{"[::ffff:93.184.216.34]:80", "93.184.216.34 is an address of this host"},
	} {
		resp, body := rawRequest(t, addr, "CONNECT "+tc.target+" HTTP/1.1\r\n\r\n")
		if resp.StatusCode != 403 || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %q, want 403 with %q", tc.target, resp.StatusCode, body, tc.want)
		}
	}
	if n := dialed.Load(); n != 0 {
		t.Fatalf("%d refused addresses dialed", n)
	}
	resp, body := rawRequest(t, addr, "CONNECT other.test:80 HTTP/1.1\r\n\r\n")
	if resp.StatusCode != 502 || dialed.Load() != 1 {
		t.Errorf("another public address: %d %q, dialed %d; want it dialed", resp.StatusCode, body, dialed.Load())
	}

	// A CIDR covering it lets it through.
	allowed := &Server{Decide: allowDecide, AllowPrivate: []netip.Prefix{netip.MustParsePrefix("93.184.216.34/32")},
		Dialer: s.Dialer, Resolver: s.Resolver}
	resp, body = rawRequest(t, startProxy(t, allowed), "CONNECT self.test:80 HTTP/1.1\r\n\r\n")
	if resp.StatusCode != 502 || dialed.Load() != 2 {
		t.Errorf("covered by allow_private_cidrs: %d %q, dialed %d; want it dialed", resp.StatusCode, body, dialed.Load())
	}
}

type dialerFunc func(ctx context.Context, network, address string) (net.Conn, error)

func (f dialerFunc) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	return f(ctx, network, address)
}

func TestIPLiteral(t *testing.T) {
	t.Parallel()
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	defer origin.Close()
	res := newResolver()
	rec := &recorder{}
	s := &Server{Decide: rec.decide(func(r Request) Verdict {
		// An IP literal matches only a rule naming that IP.
		return Verdict{Allow: r.Host == "127.0.0.1", Reason: "ip rule"}
	}), AllowPrivate: loopback, Resolver: res}
	client := proxyClient(t, startProxy(t, s))
	resp, err := client.Get(origin.URL + "/lit")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "ok" {
		t.Fatalf("%d %q", resp.StatusCode, b)
	}
	if l := res.lookups(); len(l) != 0 {
		t.Errorf("IP literal resolved: %v", l)
	}
	r := rec.requests()[0]
	if r.Host != "127.0.0.1" || !r.IP.Equal(net.IPv4(127, 0, 0, 1)) {
		t.Errorf("request %+v", r)
	}
	// The same address in another spelling is still the literal, not a name.
	resp, err = client.Get(strings.Replace(origin.URL, "127.0.0.1", "[::ffff:127.0.0.1]", 1))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("mapped literal: %d", resp.StatusCode)
	}
}

// TestMethodPathRule: plain HTTP shows method and path, so a rule can refuse a git push while
// fetches go through.
func TestMethodPathRule(t *testing.T) {
	t.Parallel()
	var pushes atomic.Int64
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "git-receive-pack") {
			pushes.Add(1)
		}
		_, _ = io.WriteString(w, "refs")
	}))
	defer origin.Close()
	port := portOf(t, origin.Listener.Addr().String())
	rec := &recorder{}
	s := &Server{
		Decide: rec.decide(func(r Request) Verdict {
			if r.Method == "POST" && strings.HasSuffix(r.Path, "/git-receive-pack") {
				return Verdict{Reason: "git push is not allowed", Rule: "WebFetch(POST git.test/**/git-receive-pack)"}
			}
			return Verdict{Allow: true}
		}),
		Audit: rec.audit, AllowPrivate: loopback, Resolver: newResolver("git.test", "127.0.0.1"),
	}
	client := proxyClient(t, startProxy(t, s))
	base := "http://git.test:" + port
	resp, err := client.Get(base + "/repo.git/info/refs?service=git-receive-pack")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("info/refs: %d", resp.StatusCode)
	}
	for _, p := range []string{"/repo.git/git-receive-pack", "/x/../repo.git/git-receive-pack", "/repo.git/git%2Dreceive-pack"} {
		resp, err := client.Post(base+p, "application/x-git-receive-pack-request", strings.NewReader("0000"))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 403 || !strings.Contains(string(b), "git push is not allowed") {
			t.Errorf("push %s: %d %q", p, resp.StatusCode, b)
		}
	}
	if n := pushes.Load(); n != 0 {
		t.Errorf("origin saw %d pushes", n)
	}
	evs := rec.audited()
	if len(evs) != 4 || evs[1].Method != "POST" || evs[1].Path != "/repo.git/git-receive-pack" || evs[1].Allowed {
		t.Errorf("events %+v", evs)
	}
}

// TestMethodPathReadings: the proxy hands the rules the path as sent, so a deny holds against
// what a server that drops `;parameters` (Tomcat, Jetty, Spring) acts on, and an allow does
// not stretch past its path the same way, however the client spells it (`curl --path-as-is`).
func TestMethodPathReadings(t *testing.T) {
	t.Parallel()
	var reached sync.Map
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Store(r.Method+" "+r.URL.EscapedPath(), true)
		_, _ = io.WriteString(w, "ok")
	}))
	defer origin.Close()
	port := portOf(t, origin.Listener.Addr().String())
	rule := func(text string, b permission.Behavior) permission.Rule {
		r, err := permission.ParseRuleFor(text, b)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	deny := rule("WebFetch(POST app.test/admin/**)", permission.Deny)
	allows := []permission.Rule{rule("WebFetch(GET app.test/public/**)", permission.Allow), rule("WebFetch(POST app.test/**)", permission.Allow)}
	s := &Server{
		Decide: func(_ context.Context, r Request) Verdict {
			req := permission.WebRequest{Method: r.Method, Host: r.Host, Path: r.Path}
			if permission.MatchWeb(deny.Pattern, deny.Method, deny.URLPath, req, true) {
				return Verdict{Reason: "denied", Rule: deny.String()}
			}
			for _, a := range allows {
				if permission.MatchWeb(a.Pattern, a.Method, a.URLPath, req, false) {
					return Verdict{Allow: true, Rule: a.String()}
				}
			}
			return Verdict{Reason: "no rule allows it"}
		},
		AllowPrivate: loopback, Resolver: newResolver("app.test", "127.0.0.1"),
	}
	addr := startProxy(t, s)
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/public/a", 200},
		{"POST", "/x/a", 200},
		{"POST", "/x/..;/admin/users", 403},
		{"POST", "/x/..%3b/admin/users", 403},
		{"POST", "/x/..;a=b/admin/users", 403},
		{"POST", "/a/..;/../admin/users", 403},
		{"POST", "/admin;x/users", 403},
		{"POST", "/x/%252e%252e/admin/users", 403},
		{"GET", "/public/..;/admin/secret", 403},
		{"GET", "/public/..%3b/admin/secret", 403},
		{"GET", "/public/%252e%252e/admin/secret", 403},
		{"GET", "/public/..%5cadmin", 403},
		{"POST", "/admin//../users", 403},
		{"POST", "//admin/.//../users", 403},
		{"GET", "/x//../public/a", 403},
	} {
		req := fmt.Sprintf("%s http://app.test:%s%s HTTP/1.1\r\nHost: app.test\r\nContent-Length: 0\r\n\r\n", tc.method, port, tc.path)
		resp, body := rawRequest(t, addr, req)
		if resp.StatusCode != tc.want {
			t.Errorf("%s %s: %d %q, want %d", tc.method, tc.path, resp.StatusCode, body, tc.want)
		}
	}
	reached.Range(func(k, _ any) bool {
		if k != "GET /public/a" && k != "POST /x/a" {
			t.Errorf("the origin got %s", k)
		}
		return true
	})
}

// TestPHPParamName: the names PHP files a query parameter under (php_register_variable_ex).
func TestPHPParamName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"_method":         "_method",
		".method":         "_method",
		" .method":        "_method",
		"  _method":       "_method",
		" method":         "method", // leading spaces are dropped, not turned into _
		"[method":         "_method",
		"[method.x[y":     "_method_x_y",
		"_method[]":       "_method",
		".method[a]":      "_method",
		"_method[":        "_method_",
		"_method\x00tail": "_method",
		"a b.c":           "a_b_c",
		"a[ b]":           "a",
	} {
		if got := phpParamName(in); got != want {
			t.Errorf("phpParamName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	s := &Server{Decide: allowDecide, Dialer: failDialer{t}, Audit: rec.audit}
	addr := startProxy(t, s)
	for _, tc := range []struct{ name, req, want string }{
		{"origin form", "GET /index.html HTTP/1.1\r\nHost: example.com\r\n\r\n", "this is a proxy, not a web server"},
		{"https absolute", "GET https://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n", "use CONNECT for https"},
		{"connect without port", "CONNECT example.com HTTP/1.1\r\n\r\n", "needs host:port"},
		{"connect empty port", "CONNECT example.com: HTTP/1.1\r\n\r\n", "bad port"},
		{"connect port zero", "CONNECT example.com:0 HTTP/1.1\r\n\r\n", "out of range"},
		{"bad host", "CONNECT exa_mple..com:443 HTTP/1.1\r\n\r\n", "bad label"},
		{"numeric host", "CONNECT 0x7f000001:443 HTTP/1.1\r\n\r\n", "numeric"},
		{"garbage", "\x16\x03\x01\x00\x05hello\r\n\r\n", "malformed request"},
		{"decimal host", "GET http://2130706433:8080/x HTTP/1.1\r\nHost: 2130706433:8080\r\n\r\n", "numeric"},
		{"zone", "GET http://[fe80::1%25lo]/x HTTP/1.1\r\nHost: x\r\n\r\n", "400"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := rawRequest(t, addr, tc.req)
			if resp.StatusCode != 400 || !strings.Contains(body, tc.want) && tc.want != "400" {
				t.Errorf("%d %q, want 400 with %q", resp.StatusCode, body, tc.want)
			}
		})
	}
	// Each attempt that named a host is in the audit log, refused, with why: the spellings an
	// agent tries to get around the policy are what an admin most needs to see.
	evs := rec.audited()
	for _, ev := range evs {
		if ev.Allowed {
			t.Errorf("allowed event %+v", ev)
		}
	}
	for host, want := range map[string]string{"example.com": "needs host:port", "0x7f000001": "numeric", "exa_mple..com": "bad label",
		"2130706433": "numeric", "[fe80::1%lo]": "zone"} {
		if !slices.ContainsFunc(evs, func(ev Event) bool { return ev.Host == host && strings.Contains(ev.Reason, want) }) {
			t.Errorf("no refused record for %q with %q (records %+v)", host, want, evs)
		}
	}
	// SOCKS: a name no rule could be asked about, and a command not served.
	for _, tc := range []struct {
		cmd  byte
		host string
	}{{socksCmdConnect, "bad.test\x00x"}, {0x03, "udp.test"}} {
		c, code := socksDial(t, addr, tc.cmd, socksAtypDomain, tc.host, 53)
		if c != nil {
			c.Close()
		}
		if code == socksReplyOK {
			t.Errorf("socks %d %q answered OK", tc.cmd, tc.host)
		}
	}
	socksRecords := 0
	for _, ev := range rec.audited() {
		if ev.Kind == KindSOCKS5 && !ev.Allowed {
			socksRecords++
		}
	}
	if socksRecords != 2 {
		t.Errorf("%d refused SOCKS records, want 2: %+v", socksRecords, rec.audited())
	}
}

func TestNoPolicyDenies(t *testing.T) {
	t.Parallel()
	s := &Server{AllowPrivate: loopback, Dialer: failDialer{t}}
	resp, body := rawRequest(t, startProxy(t, s), "CONNECT 127.0.0.1:443 HTTP/1.1\r\n\r\n")
	if resp.StatusCode != 403 || !strings.Contains(body, "no egress policy is configured") {
		t.Errorf("%d %q", resp.StatusCode, body)
	}
}

func TestCloseEndsTunnels(t *testing.T) {
	t.Parallel()
	echo := echoServer(t)
	s := &Server{Decide: allowDecide, AllowPrivate: loopback}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(l, "s1") }()
	c1, br1 := connectTunnel(t, l.Addr().String(), echo)
	defer c1.Close()
	c2, code := socksDial(t, l.Addr().String(), socksCmdConnect, socksAtypIPv4, "127.0.0.1", atoiT(t, portOf(t, echo)))
	defer c2.Close()
	if code != 0 {
		t.Fatalf("socks %#x", code)
	}
	fmt.Fprint(c1, "x")
	if b, err := br1.ReadByte(); err != nil || b != 'x' {
		t.Fatalf("echo %q %v", b, err)
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return with open tunnels")
	}
	if err := <-done; !errors.Is(err, ErrServerClosed) {
		t.Errorf("Serve: %v", err)
	}
	for _, r := range []io.Reader{br1, c2} {
		_ = c1.SetReadDeadline(time.Now().Add(5 * time.Second))
		_ = c2.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := r.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("tunnel after Close: %v, want EOF", err)
		}
	}
	if err := s.Serve(l, "s2"); !errors.Is(err, ErrServerClosed) {
		t.Errorf("Serve after Close: %v", err)
	}
}

// TestListenerCloseEndsSession: closing one session's listener ends that session's tunnels and
// no other.
func TestListenerCloseEndsSession(t *testing.T) {
	t.Parallel()
	echo := echoServer(t)
	s := &Server{Decide: allowDecide, AllowPrivate: loopback}
	other := startProxy(t, s)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(l, "s2") }()
	c1, br1 := connectTunnel(t, l.Addr().String(), echo)
	defer c1.Close()
	c2, br2 := connectTunnel(t, other, echo)
	defer c2.Close()
	_ = l.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Errorf("Serve: %v, want net.ErrClosed", err)
	}
	_ = c1.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br1.ReadByte(); err == nil {
		t.Error("session s2's tunnel still open")
	}
	fmt.Fprint(c2, "y")
	_ = c2.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b, err := br2.ReadByte(); err != nil || b != 'y' {
		t.Errorf("session s1's tunnel: %q %v", b, err)
	}
}

func TestHalfClose(t *testing.T) {
	t.Parallel()
	// The origin reads to EOF, then answers: only a passed-on half-close gets the answer back.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	srvDone := make(chan struct{})
	go func() {
		defer close(srvDone)
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		n, _ := io.Copy(io.Discard, c)
		fmt.Fprintf(c, "read %d", n)
	}()
	s := &Server{Decide: allowDecide, AllowPrivate: loopback}
	c, br := connectTunnel(t, startProxy(t, s), l.Addr().String())
	defer c.Close()
	fmt.Fprint(c, "hello")
	_ = c.(*net.TCPConn).CloseWrite()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(br)
	if err != nil || string(b) != "read 5" {
		t.Errorf("%q %v", b, err)
	}
	<-srvDone
}

func TestConnCap(t *testing.T) {
	t.Parallel()
	echo := echoServer(t)
	s := &Server{Decide: allowDecide, AllowPrivate: loopback, MaxConns: 2}
	addr := startProxy(t, s)
	c1, _ := connectTunnel(t, addr, echo)
	c2, _ := connectTunnel(t, addr, echo)
	defer c2.Close()
	resp, body := rawRequest(t, addr, "CONNECT "+echo+" HTTP/1.1\r\n\r\n")
	if resp.StatusCode != 503 || !strings.Contains(body, "too many concurrent connections (limit 2)") {
		t.Errorf("over cap: %d %q", resp.StatusCode, body)
	}
	// A SOCKS client over the cap gets SOCKS' refusal.
	sc := dialProxy(t, addr, 5*time.Second)
	_, _ = sc.Write([]byte{5, 1, 0})
	var sel [2]byte
	if _, err := io.ReadFull(sc, sel[:]); err != nil || sel != [2]byte{5, 0xff} {
		t.Errorf("socks over cap: %v %v", sel, err)
	}
	sc.Close()
	// A slot frees when a tunnel ends.
	c1.Close()
	deadline := time.Now().Add(5 * time.Second)
	for s.active.Load() >= 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	c3, _ := connectTunnel(t, addr, echo)
	c3.Close()
}

func TestIdleTimeout(t *testing.T) {
	t.Parallel()
	// The origin sends a byte every 20 ms for 400 ms, then goes quiet; the client never sends.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	srvDone := make(chan struct{})
	go func() {
		defer close(srvDone)
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		for range 20 {
			if _, err := c.Write([]byte{'.'}); err != nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		_, _ = io.Copy(io.Discard, c) // quiet until the proxy closes
	}()
	s := &Server{Decide: allowDecide, AllowPrivate: loopback, IdleTimeout: 150 * time.Millisecond}
	c, br := connectTunnel(t, startProxy(t, s), l.Addr().String())
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	b, _ := io.ReadAll(br)
	took := time.Since(start)
	if len(b) != 20 {
		t.Errorf("got %d bytes, want all 20: a tunnel busy one way was cut for the other way's silence", len(b))
	}
	if took > 3*time.Second {
		t.Errorf("idle tunnel ended after %v", took)
	}
	<-srvDone
}

func TestHeaderTimeout(t *testing.T) {
	t.Parallel()
	s := &Server{Decide: allowDecide, HeaderTimeout: 200 * time.Millisecond}
	addr := startProxy(t, s)
	c := dialProxy(t, addr, 5*time.Second)
	// A header trickled in a byte at a time still has to finish by the deadline.
	start := time.Now()
	for _, b := range []byte("GET http://example.com/ HTTP/1.1\r\nX: ") {
		if _, err := c.Write([]byte{b}); err != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, _ = io.ReadAll(c)
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("slow header kept the connection %v", took)
	}
}

// TestDeniedNameNeverLookedUp: a name the policy denies is refused before any DNS lookup, so
// nothing about it leaves through the resolver; an allowed one is looked up once.
func TestDeniedNameNeverLookedUp(t *testing.T) {
	res := newResolver("ok.test", "127.0.0.1", "leak.test", "127.0.0.1")
	rec := &recorder{}
	s := &Server{Decide: rec.decide(func(r Request) Verdict { return Verdict{Allow: r.Host == "ok.test"} }),
		Audit: rec.audit, Resolver: res, AllowPrivate: loopback}
	addr := startProxy(t, s)
	if resp, _ := rawRequest(t, addr, "CONNECT leak.test:80 HTTP/1.1\r\n\r\n"); resp.StatusCode != 403 {
		t.Fatalf("denied name: %d", resp.StatusCode)
	}
	for _, h := range res.lookups() {
		if h == "leak.test" {
			t.Fatal("a denied name was looked up")
		}
	}
}

// TestAuditFailureRefuses: a connection whose decision cannot be audited is not made.
func TestAuditFailureRefuses(t *testing.T) {
	rec := &recorder{fail: errors.New("disk full")}
	s := &Server{Decide: rec.decide(allowAll), Audit: rec.audit, Resolver: newResolver("ok.test", "127.0.0.1"), AllowPrivate: loopback}
	addr := startProxy(t, s)
	resp, body := rawRequest(t, addr, "CONNECT ok.test:80 HTTP/1.1\r\n\r\n")
	if resp.StatusCode != 403 || !strings.Contains(body, "audit") {
		t.Fatalf("an unauditable connection: %d %q", resp.StatusCode, body)
	}
}

// TestKeepAliveDecidesEachRequest: on one kept connection every request is decided on its
// own method and path, not only the first: an allowed GET does not open the connection for a
// DELETE after it, and a refusal without a body leaves the connection usable for the next.
func TestKeepAliveDecidesEachRequest(t *testing.T) {
	t.Parallel()
	var seen atomic.Int64
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		_, _ = io.WriteString(w, r.Method+" "+r.URL.Path)
	}))
	defer origin.Close()
	port := portOf(t, origin.Listener.Addr().String())
	rec := &recorder{}
	s := &Server{
		Decide: rec.decide(func(r Request) Verdict {
			if r.Method == "GET" {
				return Verdict{Allow: true, Rule: "WebFetch(GET api.test/**)"}
			}
			return Verdict{Reason: "only GET is allowed", Rule: "WebFetch(GET api.test/**)"}
		}),
		Audit: rec.audit, AllowPrivate: loopback, Resolver: newResolver("api.test", "127.0.0.1"),
	}
	c, err := net.Dial("tcp", startProxy(t, s))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	for _, tc := range []struct {
		method, path string
		code         int
		body         string
	}{
		{"GET", "/a", 200, "GET /a"},
		{"DELETE", "/b", 403, "only GET is allowed"},
		{"GET", "/c", 200, "GET /c"},
		{"delete", "/d", 403, "only GET is allowed"},
	} {
		fmt.Fprintf(c, "%s http://api.test:%s%s HTTP/1.1\r\nHost: api.test:%s\r\n\r\n", tc.method, port, tc.path, port)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s %s: %v", tc.method, tc.path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || !strings.Contains(string(b), tc.body) {
			t.Errorf("%s %s: %d %q", tc.method, tc.path, resp.StatusCode, b)
		}
	}
	if n := seen.Load(); n != 2 {
		t.Errorf("origin saw %d requests, want the 2 GETs", n)
	}
	reqs := rec.requests()
	if len(reqs) != 4 || reqs[1].Method != "DELETE" || reqs[1].Path != "/b" || reqs[3].Method != "delete" {
		t.Errorf("decided %+v", reqs)
	}
	evs := rec.audited()
	if len(evs) != 4 || evs[1].Allowed || evs[1].Method != "DELETE" || evs[1].Rule == "" || !evs[2].Allowed {
		t.Errorf("audited %+v", evs)
	}
}

// TestServeConnOrigin: a connection the daemon's own client opens (ServeConn) is served like a
// session's, and its tunnel is decided by the request the client declares; an approval counts
// only for exactly that request. After Close, ServeConn refuses.
func TestServeConnOrigin(t *testing.T) {
	t.Parallel()
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok "+r.URL.Path)
	}))
	defer origin.Close()
	port := portOf(t, origin.Listener.Addr().String())
	rec := &recorder{}
	s := &Server{
		Decide: rec.decide(func(r Request) Verdict {
			if r.Approved {
				return Verdict{Allow: true, Rule: "approval"}
			}
			return Verdict{Reason: "no"}
		}),
		Audit: rec.audit, AllowPrivate: loopback, Resolver: newResolver("api.test", "127.0.0.1"),
	}
	serve := func(o Origin) net.Conn {
		client, server := net.Pipe()
		done := make(chan error, 1)
		go func() { done <- s.ServeConn(server, "s1", o) }()
		t.Cleanup(func() {
			client.Close()
			if err := <-done; err != nil {
				t.Errorf("ServeConn: %v", err)
			}
		})
		_ = client.SetDeadline(time.Now().Add(10 * time.Second))
		return client
	}
	o := Origin{Via: "WebFetch", Method: "GET", Path: "/x", Approved: true}

	// A tunnel: decided as GET /x, approved.
	c := serve(o)
	fmt.Fprintf(c, "CONNECT api.test:%s HTTP/1.1\r\nHost: api.test\r\n\r\n", port)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	fmt.Fprintf(c, "GET /x HTTP/1.1\r\nHost: api.test\r\nConnection: close\r\n\r\n")
	if resp, err = http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("through the tunnel: %v %v", resp, err)
	}
	resp.Body.Close()

	// A plain request for another path than the approved one is not approved.
	c = serve(o)
	fmt.Fprintf(c, "GET http://api.test:%s/y HTTP/1.1\r\nHost: api.test\r\n\r\n", port)
	if resp, err = http.ReadResponse(bufio.NewReader(c), nil); err != nil || resp.StatusCode != 403 {
		t.Fatalf("unapproved path: %v %v", resp, err)
	}
	resp.Body.Close()

	reqs := rec.requests()
	if len(reqs) != 2 || reqs[0].Kind != KindConnect || reqs[0].Method != "GET" || reqs[0].Path != "/x" || !reqs[0].Approved ||
		reqs[0].Via != "WebFetch" || reqs[1].Path != "/y" || reqs[1].Approved {
		t.Errorf("decided %+v", reqs)
	}
	if evs := rec.audited(); len(evs) != 2 || evs[0].Via != "WebFetch" || evs[0].Method != "GET" || !evs[0].Allowed || evs[1].Allowed {
		t.Errorf("audited %+v", evs)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	a, b := net.Pipe()
	defer a.Close()
	if err := s.ServeConn(b, "s1", o); !errors.Is(err, ErrServerClosed) {
		t.Errorf("ServeConn after Close: %v", err)
	}
}

// One owner's sessions share MaxConnsPerOwner: a second session of the same user is refused
// past it, another user's session is still served.
// TestConnCapReservesEachOwnersShare: each owner may hold a 32nd of MaxConns whatever the
// others hold, so users filling every shared connection cannot refuse another's programs all
// proxied traffic.
func TestConnCapReservesEachOwnersShare(t *testing.T) {
	t.Parallel()
	echo := echoServer(t)
	owners := map[string]string{"s1": "alice", "s2": "bob"}
	s := &Server{Decide: allowDecide, AllowPrivate: loopback, MaxConns: 64, MaxConnsPerOwner: 128,
		Owner: func(session string) string { return owners[session] }}
	alice, bob := startProxy(t, s), listenAs(t, s, "s2")
	// alice's 2 reserved and all 64 shared.
	for range 66 {
		c, _ := connectTunnel(t, alice, echo)
		defer c.Close()
	}
	resp, body := rawRequest(t, alice, "CONNECT "+echo+" HTTP/1.1\r\n\r\n")
	if resp.StatusCode != 503 || !strings.Contains(body, "too many concurrent connections (limit 64)") {
		t.Errorf("alice's 67th connection: %d %q", resp.StatusCode, body)
	}
	for range 2 {
		c, _ := connectTunnel(t, bob, echo)
		defer c.Close()
	}
	if resp, body := rawRequest(t, bob, "CONNECT "+echo+" HTTP/1.1\r\n\r\n"); resp.StatusCode != 503 {
		t.Errorf("bob's third connection with the shared ones all alice's: %d %q", resp.StatusCode, body)
	}
}

func TestConnCapPerOwner(t *testing.T) {
	t.Parallel()
	echo := echoServer(t)
	owners := map[string]string{"s1": "alice", "s2": "alice", "s3": "bob"}
	s := &Server{Decide: allowDecide, AllowPrivate: loopback, MaxConns: 10, MaxConnsPerOwner: 2,
		Owner: func(session string) string { return owners[session] }}
	alice1 := startProxy(t, s) // session s1
	alice2, bob := listenAs(t, s, "s2"), listenAs(t, s, "s3")
	c1, _ := connectTunnel(t, alice1, echo)
	defer c1.Close()
	c2, _ := connectTunnel(t, alice2, echo)
	defer c2.Close()
	resp, body := rawRequest(t, alice2, "CONNECT "+echo+" HTTP/1.1\r\n\r\n")
	if resp.StatusCode != 503 || !strings.Contains(body, "this user's sessions (limit 2)") {
		t.Errorf("alice's third connection: %d %q", resp.StatusCode, body)
	}
	c3, _ := connectTunnel(t, bob, echo)
	c3.Close()
	// The daemon's own connection for one of alice's sessions (WebFetch) counts with hers:
	// refused with the same reason while her two tunnels are open.
	client, server := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- s.ServeConn(server, "s1", Origin{Via: "WebFetch"}) }()
	go func() { _, _ = io.WriteString(client, "CONNECT "+echo+" HTTP/1.1\r\n\r\n") }()
	_ = client.SetDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(client), nil)
	if err != nil || resp.StatusCode != 503 {
		t.Errorf("alice's WebFetch connection past her cap: %v %v", resp, err)
	}
	client.Close()
	if err := <-done; !errors.Is(err, ErrBusy) {
		t.Errorf("ServeConn past the owner's cap: %v, want ErrBusy", err)
	}
}

// TestHeadBounded: a request line or header block past maxHeadBytes is refused with 431 as soon
// as the bound is read (the proxy runs as root and must not buffer what a client streams at
// it), first on a connection or after a kept-alive request; a head within the bound and a body
// of any size still go through.
func TestHeadBounded(t *testing.T) {
	t.Parallel()
	var got atomic.Int64
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bighead" {
			w.Header().Set("X-Big", strings.Repeat("e", 1<<20))
		}
		n, _ := io.Copy(io.Discard, r.Body)
		got.Store(n)
		_, _ = io.WriteString(w, "ok")
	}))
	defer origin.Close()
	port := portOf(t, origin.Listener.Addr().String())
	// A timeout far longer than the test's deadline: only the byte bound can answer in time.
	s := &Server{Decide: allowDecide, AllowPrivate: loopback, Resolver: newResolver("api.test", "127.0.0.1"),
		HeaderTimeout: time.Minute}
	addr := startProxy(t, s)
	url := "http://api.test:" + port
	good := "GET " + url + "/ HTTP/1.1\r\nHost: api.test:" + port + "\r\n"
	big := strings.Repeat("a", 200<<10) // past the bound, within what lingerClose drains
	for _, tc := range []struct{ name, first, req string }{
		{"request line", "", "GET " + url + "/" + big},
		{"headers", "", good + strings.Repeat("X-Pad: "+strings.Repeat("b", 1000)+"\r\n", 200)},
		{"one header", "", good + "X-Pad: " + big},
		{"after a kept-alive request", good + "\r\n", "GET " + url + "/" + big},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialProxy(t, addr, 10*time.Second)
			br := bufio.NewReader(c)
			if tc.first != "" {
				_, _ = io.WriteString(c, tc.first)
				resp, err := http.ReadResponse(br, nil)
				if err != nil || resp.StatusCode != 200 {
					t.Fatalf("first request: %v %v", resp, err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			go func() { _, _ = io.WriteString(c, tc.req) }()
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer to an oversized head: %v", err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || !strings.Contains(string(b), "over 64 KiB") {
				t.Errorf("%d %q, want 431 naming the bound", resp.StatusCode, b)
			}
		})
	}
	t.Run("an origin's response head", func(t *testing.T) {
		resp, body := rawRequest(t, addr, "GET "+url+"/bighead HTTP/1.1\r\nHost: api.test:"+port+"\r\n\r\n")
		if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "headers exceeded 262144 bytes") {
			t.Errorf("%d %q, want 502 for a 1 MiB response header", resp.StatusCode, body)
		}
	})
	t.Run("within the bound, with a big body", func(t *testing.T) {
		c := dialProxy(t, addr, 10*time.Second)
		body := strings.Repeat("c", 4<<20)
		req := "POST " + url + "/ HTTP/1.1\r\nHost: api.test:" + port + "\r\nX-Pad: " + strings.Repeat("d", 60<<10) +
			"\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
		go func() { _, _ = io.WriteString(c, req+body) }()
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || got.Load() != int64(len(body)) {
			t.Errorf("%d, origin got %d of %d body bytes", resp.StatusCode, got.Load(), len(body))
		}
	})
}

// TestPacePerOwner: one owner's sessions share a pace of decisions; a request that would wait
// past maxPaceWait is refused (429 for HTTP, a general failure for SOCKS) without being
// decided or audited, and another owner is served meanwhile. A request within the pace waits
// its turn rather than failing.
func TestPacePerOwner(t *testing.T) {
	t.Parallel()
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	defer origin.Close()
	port := portOf(t, origin.Listener.Addr().String())
	owners := map[string]string{"s1": "alice", "s2": "alice", "s3": "bob"}
	rec := &recorder{}
	s := &Server{Decide: rec.decide(allowAll), Audit: rec.audit, AllowPrivate: loopback,
		Resolver: newResolver("api.test", "127.0.0.1"),
		// One request per 100 s after a burst of 3: the fourth would wait far past maxPaceWait.
		RatePerOwner: 0.01, BurstPerOwner: 3,
		Owner: func(session string) string { return owners[session] }}
	alice1 := startProxy(t, s) // session s1
	alice2, bob := listenAs(t, s, "s2"), listenAs(t, s, "s3")
	get := "GET http://api.test:" + port + "/ HTTP/1.1\r\nHost: api.test:" + port + "\r\n\r\n"
	for i, addr := range []string{alice1, alice1, alice2} {
		if resp, body := rawRequest(t, addr, get); resp.StatusCode != 200 {
			t.Fatalf("alice's request %d within the burst: %d %q", i+1, resp.StatusCode, body)
		}
	}
	resp, body := rawRequest(t, alice2, get)
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "more than 0.01 proxied requests a second") {
		t.Errorf("alice's fourth request: %d %q, want 429 naming the pace", resp.StatusCode, body)
	}
	sc, code := socksDial(t, alice1, socksCmdConnect, socksAtypDomain, "api.test", atoiT(t, port))
	sc.Close()
	if code != socksReplyGeneralFailure {
		t.Errorf("alice's SOCKS connect over the pace: reply %#x", code)
	}
	if n, m := len(rec.requests()), len(rec.audited()); n != 3 || m != 3 {
		t.Errorf("%d decided and %d audited, want only the 3 within the pace", n, m)
	}
	if resp, body := rawRequest(t, bob, get); resp.StatusCode != 200 {
		t.Errorf("bob while alice is over her pace: %d %q", resp.StatusCode, body)
	}
	// A reload that lifts the pace applies to owners already served.
	s.SetPace(0, 1)
	if resp, body := rawRequest(t, alice2, get); resp.StatusCode != 200 {
		t.Errorf("alice after the pace was lifted: %d %q", resp.StatusCode, body)
	}

	// Within the pace, a request waits for its turn: 20 a second, no burst.
	rec2 := &recorder{}
	s2 := &Server{Decide: rec2.decide(allowAll), Audit: rec2.audit, AllowPrivate: loopback,
		Resolver: newResolver("api.test", "127.0.0.1"), RatePerOwner: 20, BurstPerOwner: 1}
	carol := startProxy(t, s2)
	for i := range 4 {
		if resp, body := rawRequest(t, carol, get); resp.StatusCode != 200 {
			t.Errorf("paced request %d: %d %q", i+1, resp.StatusCode, body)
		}
	}
}

// TestUpstreamNotShared: an upstream connection serves the client connection that opened it
// and no other. Shared, a connection one user's request opened (an origin that authenticates
// the connection, as NTLM does, or one left mid-response) would carry the next session's
// request as that user's. One client connection's requests still share theirs.
func TestUpstreamNotShared(t *testing.T) {
	t.Parallel()
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.RemoteAddr) // which upstream connection carried it
	}))
	defer origin.Close()
	s := &Server{Decide: allowDecide, AllowPrivate: loopback}
	proxies := []string{startProxy(t, s), listenAs(t, s, "s2")}
	get := func(c net.Conn, br *bufio.Reader) string {
		t.Helper()
		fmt.Fprintf(c, "GET %s/x HTTP/1.1\r\nHost: %s\r\n\r\n", origin.URL, origin.Listener.Addr())
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return string(b)
	}
	seen := map[string]string{}
	for i, p := range []string{proxies[0], proxies[1], proxies[0]} {
		c := dialProxy(t, p, 10*time.Second)
		br := bufio.NewReader(c)
		first, second := get(c, br), get(c, br)
		c.Close()
		if first != second {
			t.Errorf("client connection %d: its two requests went up on %s and %s, want one kept-alive connection", i, first, second)
		}
		if prev, ok := seen[first]; ok {
			t.Errorf("client connection %d's requests went up on %s, which carried %s's", i, first, prev)
		}
		seen[first] = fmt.Sprintf("client connection %d", i)
		// The origin's side is closed when the proxy lets go; give an idle pool the chance
		// to hand the connection on, as a shared one would.
		time.Sleep(50 * time.Millisecond)
	}
}

// scriptedOrigin is an origin on loopback whose every answer a test writes: answer gets the
// connection's number (from 1) and the request, and returns the raw response and whether to
// close the connection after it. conns counts the connections it accepted; closed is told of
// each connection it closed so.
type scriptedOrigin struct {
	addr   string
	conns  atomic.Int32
	closed chan int
}

func newScriptedOrigin(t *testing.T, answer func(conn int, r *http.Request) (string, bool)) *scriptedOrigin {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	o := &scriptedOrigin{addr: l.Addr().String(), closed: make(chan int, 16)}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n := int(o.conns.Add(1))
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					r, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, r.Body)
					resp, closeAfter := answer(n, r)
					if _, err := io.WriteString(c, resp); err != nil {
						return
					}
					if closeAfter {
						c.Close()
						o.closed <- n
						return
					}
				}
			}()
		}
	}()
	return o
}

// TestUpstreamKeptConnection: plain HTTP requests without a body are exchanged with the origin on
// the client connection's own goroutine, over one kept connection per client connection, and
// that connection is given up whenever it cannot carry the next request as it is: the origin
// closed it while idle (a GET goes again on a new one; so does a POST, since a closed connection
// is seen before anything is sent), it said Connection: close, or the next request names
// another origin. A request the origin read but closed on without answering goes again on a new
// connection only when it may be sent twice (GET), as the Transport does. Informational answers
// (103) are passed over to the final one.
func TestUpstreamKeptConnection(t *testing.T) {
	t.Parallel()
	ok := func(body string) string {
		return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	}
	var mu sync.Mutex
	armed := map[int]bool{} // connections whose next request is read and dropped unanswered
	var seen []string
	o := newScriptedOrigin(t, func(conn int, r *http.Request) (string, bool) {
		body := fmt.Sprintf("conn %d %s %s", conn, r.Method, r.URL.Path)
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, body)
		if armed[conn] {
			// As when an idle timeout closes a connection the request was already on its way
			// to: neither end can tell whether the origin acted on it.
			delete(armed, conn)
			return "", true
		}
		switch r.URL.Path {
		case "/arm":
			armed[conn] = true
		case "/then-close": // as an idle timeout would, without saying so
			return ok(body), true
		case "/say-close":
			return "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body, true
		case "/hints":
			return "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n" + ok(body), false
		}
		return ok(body), false
	})
	other := newScriptedOrigin(t, func(conn int, r *http.Request) (string, bool) {
		return ok(fmt.Sprintf("other conn %d %s", conn, r.URL.Path)), false
	})
	addr := startProxy(t, &Server{Decide: allowDecide, AllowPrivate: loopback})
	c := dialProxy(t, addr, 10*time.Second)
	br := bufio.NewReader(c)
	send := func(method, origin, path string) string {
		t.Helper()
		fmt.Fprintf(c, "%s http://%s%s HTTP/1.1\r\nHost: %s\r\nContent-Length: 0\r\n\r\n", method, origin, path, origin)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Sprintf("%d", resp.StatusCode)
		}
		return string(b)
	}
	for _, step := range []struct{ method, origin, path, want string }{
		{"GET", o.addr, "/a", "conn 1 GET /a"},
		{"GET", o.addr, "/b", "conn 1 GET /b"}, // kept
		{"GET", o.addr, "/then-close", "conn 1 GET /then-close"},
		{"GET", o.addr, "/c", "conn 2 GET /c"}, // the closed one was noticed
		{"GET", o.addr, "/then-close", "conn 2 GET /then-close"},
		{"POST", o.addr, "/d", "conn 3 POST /d"}, // not sent on the closed one
		{"GET", o.addr, "/say-close", "conn 3 GET /say-close"},
		{"GET", o.addr, "/e", "conn 4 GET /e"},
		{"GET", o.addr, "/hints", "conn 4 GET /hints"},
		{"GET", other.addr, "/f", "other conn 1 /f"}, // another origin: another connection
		{"GET", o.addr, "/arm", "conn 5 GET /arm"},
		{"GET", o.addr, "/h", "conn 6 GET /h"}, // dropped on conn 5, sent again
		{"GET", o.addr, "/arm", "conn 6 GET /arm"},
		{"POST", o.addr, "/i", "502"}, // dropped on conn 6, not sent again; the client's ends
	} {
		if got := send(step.method, step.origin, step.path); got != step.want {
			t.Errorf("%s %s: the origin saw %q, want %q", step.method, step.path, got, step.want)
		}
		if strings.Contains(step.path, "close") {
			// The next request comes once the proxy's kernel has the origin's FIN: a close
			// the proxy could not have seen yet is the race every client has.
			<-o.closed
			waitNotEstablished(t, o.addr)
		}
	}
	if n := o.conns.Load(); n != 6 {
		t.Errorf("the origin accepted %d connections, want 6", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Count(strings.Join(seen, "\n"), "POST /i"); got != 1 {
		t.Errorf("the origin saw POST /i %d times, want once:\n%s", got, strings.Join(seen, "\n"))
	}
}

// waitNotEstablished waits until no TCP connection of this network namespace to addr (an IPv4
// loopback address) is still ESTABLISHED: the peer's FIN has reached every one
// (/proc/net/tcp, state 01).
func waitNotEstablished(t *testing.T, addr string) {
	t.Helper()
	ap := netip.MustParseAddrPort(addr)
	ip := ap.Addr().As4()
	// /proc/net/tcp writes the address as the host-order u32 and the port big-endian, in hex.
	remote := fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], ap.Port())
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile("/proc/net/tcp")
		if err != nil {
			t.Fatal(err)
		}
		open := false
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) > 3 && f[2] == remote && f[3] == "01" {
				open = true
			}
		}
		if !open {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a connection to %s is still established 10 s after the origin closed it", addr)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestOverrideHeadersRefused: a request whose headers ask the server to act on another method
// or path (X-HTTP-Method-Override, which Rack, Symfony and Laravel honor on a POST, in either
// spelling a CGI-style server reads; X-Original-URL) is refused, forwarded or in a tunnel: the
// rules decided the method and path on the request line, not the ones the server would run.
func TestOverrideHeadersRefused(t *testing.T) {
	t.Parallel()
	var acted sync.Map // what the origin ran, as a framework honoring the headers would
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		method, path := r.Method, r.URL.Path
		if m := r.URL.Query().Get("_method"); m != "" {
			method = m
		}
		for k, v := range r.Header {
			switch strings.ReplaceAll(strings.ToLower(k), "_", "-") {
			case "x-http-method-override":
				method = v[0]
			case "x-original-url":
				path = v[0]
			}
		}
		acted.Store(method+" "+path, true)
		_, _ = io.WriteString(w, "ok")
	}))
	defer origin.Close()
	port := portOf(t, origin.Listener.Addr().String())
	s := &Server{
		Decide: func(_ context.Context, r Request) Verdict {
			if r.Method == "DELETE" || strings.HasPrefix(r.Path, "/admin") {
				return Verdict{Reason: "not allowed", Rule: "WebFetch(DELETE api.test/**)"}
			}
			return Verdict{Allow: true}
		},
		AllowPrivate: loopback, Resolver: newResolver("api.test", "127.0.0.1"),
	}
	var recorded atomic.Int32 // refusals recorded naming the host and its port
	s.Audit = func(ev Event) error {
		if !ev.Allowed && ev.Host == "api.test" && strconv.Itoa(ev.Port) == port && strings.Contains(ev.Reason, "asks the server to act") {
			recorded.Add(1)
		}
		return nil
	}
	proxy := startProxy(t, s)
	host := "api.test:" + port
	refusals := int32(0)
	for _, tc := range []struct {
		name, head string
		want       int
	}{
		{"method override", "POST /items/1 HTTP/1.1\r\nX-HTTP-Method-Override: DELETE\r\n", 400},
		{"method override, CGI spelling", "POST /items/1 HTTP/1.1\r\nX_HTTP_METHOD_OVERRIDE: delete\r\n", 400},
		{"X-HTTP-Method", "POST /items/1 HTTP/1.1\r\nX-Http-Method: DELETE\r\n", 400},
		{"url override", "GET /public HTTP/1.1\r\nX-Original-URL: /admin/users\r\n", 400},
		{"override naming its own method", "POST /items/1 HTTP/1.1\r\nX-HTTP-Method-Override: post\r\n", 200},
		{"_method in the query", "POST /items/1?a=1&_method=DELETE HTTP/1.1\r\n", 400},
		{"_method in the query, escaped", "POST /items/1?%5Fmethod=DELETE HTTP/1.1\r\n", 400},
		// PHP files these under $_GET['_method'] too.
		{"_method spelled .method", "POST /items/1?.method=DELETE HTTP/1.1\r\n", 400},
		{"_method spelled [method", "POST /items/1?%5Bmethod=DELETE HTTP/1.1\r\n", 400},
		{"_method spelled [method, raw", "POST /items/1?[method=DELETE HTTP/1.1\r\n", 400},
		{"_method after a space", "POST /items/1?+_method=DELETE HTTP/1.1\r\n", 400},
		{"_method cut at a NUL", "POST /items/1?_method%00x=DELETE HTTP/1.1\r\n", 400},
		{"_method as an array", "POST /items/1?.method[]=DELETE HTTP/1.1\r\n", 400},
		{"_method with a bad escape beside it", "POST /items/1?.method=DELETE%zz HTTP/1.1\r\n", 400},
		{"_method behind a semicolon", "POST /items/1?a=1;_method=DELETE HTTP/1.1\r\n", 400},
		{".method naming its own method", "POST /items/1?.method=post HTTP/1.1\r\n", 200},
		{"x.method is another name", "POST /items/1?x.method=DELETE&method=DELETE HTTP/1.1\r\n", 200},
	} {
		if tc.want == 400 {
			refusals += 2 // forwarded and in a tunnel
		}
		t.Run(tc.name, func(t *testing.T) {
			method, rest, _ := strings.Cut(tc.head, " ")
			path, rest, _ := strings.Cut(rest, " ")
			fwd := method + " http://" + host + path + " " + rest + "Host: " + host + "\r\nContent-Length: 0\r\n\r\n"
			if resp, body := rawRequest(t, proxy, fwd); resp.StatusCode != tc.want {
				t.Errorf("forwarded: %d %q, want %d", resp.StatusCode, body, tc.want)
			}
			if resp, _ := tunnelRequest(t, proxy, host, tc.head+"Host: "+host+"\r\nContent-Length: 0\r\n\r\n"); resp.StatusCode != tc.want {
				t.Errorf("in a tunnel: %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
	if n := recorded.Load(); n != refusals {
		t.Errorf("%d refusals recorded with the host and port, want %d", n, refusals)
	}
	acted.Range(func(k, _ any) bool {
		if a := k.(string); strings.HasPrefix(strings.ToUpper(a), "DELETE") || strings.Contains(a, "/admin") {
			t.Errorf("origin ran %q", a)
		}
		return true
	})
}

// TestRequestTrailersDropped: a chunked request's trailers never reach the origin. They come
// after the request was decided and sent on, so no check can see them first, and a server
// that files allowed trailers among the headers (Tomcat's allowedTrailerHeaders) would act on
// an X-HTTP-Method-Override in one.
func TestRequestTrailersDropped(t *testing.T) {
	t.Parallel()
	var trailers sync.Map
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		for k := range r.Trailer {
			if r.Trailer.Get(k) != "" {
				trailers.Store(k, true)
			}
		}
		_, _ = io.WriteString(w, "got "+string(b))
	}))
	defer origin.Close()
	port := portOf(t, origin.Listener.Addr().String())
	proxy := startProxy(t, &Server{Decide: allowDecide, AllowPrivate: loopback, Resolver: newResolver("api.test", "127.0.0.1")})
	host := "api.test:" + port
	const chunked = "Transfer-Encoding: chunked\r\nTrailer: X-HTTP-Method-Override\r\n\r\n4\r\nbody\r\n0\r\nX-HTTP-Method-Override: DELETE\r\n\r\n"
	resp, body := rawRequest(t, proxy, "POST http://"+host+"/items/1 HTTP/1.1\r\nHost: "+host+"\r\n"+chunked)
	if resp.StatusCode != 200 || body != "got body" {
		t.Errorf("forwarded: %d %q, want the request through without its trailer", resp.StatusCode, body)
	}
	if resp, body := tunnelRequest(t, proxy, host, "POST /items/1 HTTP/1.1\r\nHost: "+host+"\r\n"+chunked); resp.StatusCode != 200 || body != "got body" {
		t.Errorf("in a tunnel: %d %q, want the request through without its trailer", resp.StatusCode, body)
	}
	trailers.Range(func(k, _ any) bool {
		t.Errorf("the origin got the trailer %s", k)
		return true
	})
}

// TestFormBodyOverrideRefused: a POST whose form body holds a _method field naming another
// method is refused, to a host that method or path rules name (Rails, Symfony and Laravel act
// on it as that method, one the rules did not decide); urlencoded, multipart, or with no
// Content-Type (Rack reads that as a form). Its body is read before anything is sent, so a
// larger one is refused (413); other content types and hosts no such rule names pass as sent.
func TestFormBodyOverrideRefused(t *testing.T) {
	t.Parallel()
	var acted sync.Map
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		method := r.Method
		if m := r.FormValue("_method"); r.Method == "POST" && m != "" {
			method = strings.ToUpper(m)
		}
		acted.Store(method+" "+r.Host, true)
		_, _ = io.WriteString(w, "ok")
	}))
	defer origin.Close()
	port := portOf(t, origin.Listener.Addr().String())
	var refusals atomic.Int32
	s := &Server{
		Decide: func(_ context.Context, r Request) Verdict {
			if r.Method == "DELETE" {
				return Verdict{Reason: "not allowed"}
			}
			return Verdict{Allow: true, PathRules: r.Host == "api.test"}
		},
		Audit: func(ev Event) error {
			if !ev.Allowed && strings.Contains(ev.Reason, "_method") || strings.Contains(ev.Reason, "KiB") {
				refusals.Add(1)
			}
			return nil
		},
		AllowPrivate: loopback, Resolver: newResolver("api.test", "127.0.0.1", "free.test", "127.0.0.1"),
	}
	proxy := startProxy(t, s)
	multipartBody := "--b\r\nContent-Disposition: form-data; name=\"_method\"\r\n\r\nDELETE\r\n--b--\r\n"
	part := func(disposition string) string {
		return "--b\r\nContent-Disposition: " + disposition + "\r\n\r\nDELETE\r\n--b--\r\n"
	}
	big := "a=" + strings.Repeat("x", maxFormScan) + "&_method=DELETE"
	for _, tc := range []struct {
		name, host, headers, body string
		want                      int
	}{
		{"urlencoded", "api.test", "Content-Type: application/x-www-form-urlencoded\r\n", "a=1&_method=DELETE", 400},
		{"urlencoded, PHP's spelling", "api.test", "Content-Type: application/x-www-form-urlencoded\r\n", "a=1&.method=delete", 400},
		{"multipart", "api.test", "Content-Type: multipart/form-data; boundary=b\r\n", multipartBody, 400},
		{"multipart, a disposition Go cannot read", "api.test", "Content-Type: multipart/form-data; boundary=b\r\n", part(`form-data; name="_method";;`), 400},
		{"multipart, an unquoted name and a stray word", "api.test", "Content-Type: multipart/form-data; boundary=b\r\n", part(`form-data; name=_method; x`), 400},
		{"multipart, a parameter twice", "api.test", "Content-Type: multipart/form-data; boundary=b\r\n", part(`form-data; name="_method"; a="1"; a="2"`), 400},
		{"multipart, the name inside another parameter", "api.test", "Content-Type: multipart/form-data; boundary=b\r\n", part(`form-data; x="a name=_method"`), 400},
		{"multipart, two dispositions", "api.test", "Content-Type: multipart/form-data; boundary=b\r\n", "--b\r\nContent-Disposition: form-data; name=\"a\"\r\nContent-Disposition: form-data; name=\"_method\"\r\n\r\nDELETE\r\n--b--\r\n", 400},
		{"multipart, a part outside the parts", "api.test", "Content-Type: multipart/form-data; boundary=b\r\n", "--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\n--b\nContent-Disposition: form-data; name=\"_method\"\n\nDELETE\r\n--b--\r\n", 400},
		{"multipart/mixed (Rack parses it)", "api.test", "Content-Type: multipart/mixed; boundary=b\r\n", multipartBody, 400},
		{"multipart/related", "api.test", "Content-Type: multipart/related; boundary=b\r\n", multipartBody, 400},
		{"a boundary after a comma", "api.test", "Content-Type: multipart/form-data, boundary=b\r\n", multipartBody, 400},
		{"a boundary after a space", "api.test", "Content-Type: multipart/form-data boundary=b\r\n", multipartBody, 400},
		{"a Content-ID for the name", "api.test", "Content-Type: multipart/form-data; boundary=b\r\n", "--b\r\nContent-Disposition: form-data\r\nContent-ID: _method\r\n\r\nDELETE\r\n--b--\r\n", 400},
		{"a backslash in the name", "api.test", "Content-Type: multipart/form-data; boundary=b\r\n", part(`form-data; name=_met\hod`), 400},
		{"a quoted backslash", "api.test", "Content-Type: multipart/form-data; boundary=b\r\n", part(`form-data; name="\_method"`), 400},
		{"a separator after the name", "api.test", "Content-Type: multipart/form-data; boundary=b\r\n", part(`form-data; name=_method(`), 400},
		{"a comma after the name", "api.test", "Content-Type: multipart/form-data; boundary=b\r\n", part(`form-data; name=_method,x`), 400},
		{"a name PHP joins across two lines", "api.test", "Content-Type: multipart/form-data, boundary=b\r\n", "--b\r\nContent-Disposition: form-data; name=\"_met\r\nhod\"\r\n\r\nDELETE\r\n--b--\r\n", 400},
		{"JSON that Go cannot read", "api.test", "Content-Type: application/json\r\n", `{"_method":"DELETE","x":1e400}`, 400},
		{"JSON that is no object", "api.test", "Content-Type: application/json\r\n", `["_method","DELETE"]`, 200},
		{"multipart/mixed without it", "api.test", "Content-Type: multipart/mixed; boundary=b\r\n", strings.Replace(part(`form-data; name="a"`), "DELETE", "x", 1), 200},
		{"multipart, its own method", "api.test", "Content-Type: multipart/form-data; boundary=b\r\n", strings.Replace(part(`form-data; name="_method"`), "DELETE", "POST", 1), 200},
		{"no content type", "api.test", "", "_method=DELETE", 400},
		{"expecting 100-continue", "api.test", "Content-Type: application/x-www-form-urlencoded\r\nExpect: 100-continue\r\n", "_method=DELETE", 400},
		{"over the bound", "api.test", "Content-Type: application/x-www-form-urlencoded\r\n", big, 413},
		{"its own method", "api.test", "Content-Type: application/x-www-form-urlencoded\r\n", "_method=post&a=1", 200},
		{"a small form", "api.test", "Content-Type: application/x-www-form-urlencoded\r\nExpect: 100-continue\r\n", "a=1", 200},
		{"JSON (Laravel)", "api.test", "Content-Type: application/json; charset=utf-8\r\n", `{"a":1,"_method":"DELETE"}`, 400},
		{"JSON without it", "api.test", "Content-Type: application/vnd.api+json\r\n", `{"a":"_method"}`, 200},
		{"another type", "api.test", "Content-Type: text/plain\r\n", "_method=DELETE", 200},
		{"two content types", "api.test", "Content-Type: text/plain\r\nContent-Type: application/x-www-form-urlencoded\r\n", "_method=DELETE", 400},
		{"a host no rule names", "free.test", "Content-Type: application/x-www-form-urlencoded\r\n", "_method=DELETE", 200},
	} {
		host := tc.host + ":" + port
		head := "POST http://" + host + "/items/1 HTTP/1.1\r\nHost: " + host + "\r\n" + tc.headers + "Content-Length: " + strconv.Itoa(len(tc.body)) + "\r\n\r\n"
		c := dialProxy(t, proxy, 10*time.Second)
		if _, err := io.WriteString(c, head); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		if strings.Contains(tc.headers, "100-continue") {
			if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 100 {
				t.Fatalf("%s: want 100 Continue first: %v %v", tc.name, resp, err)
			}
		}
		if _, err := io.WriteString(c, tc.body); err != nil {
			t.Fatal(err)
		}
		wantStatus(t, tc.name, c, br, tc.want)
	}
	if _, ok := acted.Load("DELETE api.test:" + port); ok {
		t.Error("the origin ran a DELETE the rules deny")
	}
	if _, ok := acted.Load("DELETE free.test:" + port); !ok {
		t.Error("the form to a host no method rule names did not reach the origin as sent")
	}
	if n := refusals.Load(); n != 25 {
		t.Errorf("%d refusals recorded, want 25", n)
	}
}

// bodyIgnoringOrigin is an origin that never reads a request's body, as Python's http.server does for a
// handler that ignores it: what a body holds becomes the connection's next request. It
// records every request it serves, as method, host and path.
func bodyIgnoringOrigin(t *testing.T) (addr string, served func() []string) {
	t.Helper()
	var mu sync.Mutex
	var lines []string
	addr = tcpServer(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			mu.Lock()
			lines = append(lines, req.Method+" "+req.Host+req.URL.Path)
			mu.Unlock()
			if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"); err != nil {
				return
			}
		}
	})
	return addr, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(lines)
	}
}

// TestBodyStartingAsRequestRefused: to a host that method or path rules name, a request whose
// body begins as a request line does is refused before anything reaches the origin, forwarded
// or through a tunnel: an origin that ignores the body would serve that line as a request no
// rule decided. Other bodies go through as sent, and to a host no such rule names any body.
func TestBodyStartingAsRequestRefused(t *testing.T) {
	t.Parallel()
	addr, served := bodyIgnoringOrigin(t)
	port := portOf(t, addr)
	var refusals atomic.Int32
	s := &Server{
		Decide: func(_ context.Context, r Request) Verdict {
			if r.Method == "POST" || r.Method == "DELETE" {
				return Verdict{Reason: "not allowed"}
			}
			return Verdict{Allow: true, PathRules: r.Host == "api.test"}
		},
		Audit: func(ev Event) error {
			if !ev.Allowed && strings.Contains(ev.Reason, "begins as an HTTP request") {
				refusals.Add(1)
			}
			return nil
		},
		AllowPrivate: loopback, Resolver: newResolver("api.test", "127.0.0.1", "free.test", "127.0.0.1"),
	}
	proxy := startProxy(t, s)
	hidden := func(host string) string {
		return "POST /paste HTTP/1.1\r\nHost: " + host + "\r\nContent-Length: 6\r\n\r\nsecret"
	}
	for _, tc := range []struct {
		name, host string
		tunnel     bool
		headers    string
		body       []string // written one after the other, the proxy reading between them
		want       int
	}{
		{"a POST in a GET's body", "api.test", false, "", []string{hidden("api.test")}, 400},
		{"after empty lines", "api.test", false, "", []string{"\r\n\r\n" + hidden("api.test")}, 400},
		{"absolute form, lower case", "api.test", false, "", []string{"delete http://api.test/x http/1.1\r\n\r\n"}, 400},
		{"HTTP/0.9", "api.test", false, "", []string{"GET admin/../secret\n"}, 400},
		{"a line its body leaves open", "api.test", false, "", []string{"GET /secret?q=1"}, 400},
		{"in pieces", "api.test", false, "", []string{"PO", "ST /paste HTTP/1.1\r\n\r\n"}, 400},
		{"expecting 100-continue", "api.test", false, "Expect: 100-continue\r\n", []string{hidden("api.test")}, 400},
		{"through a tunnel", "api.test", true, "", []string{hidden("api.test")}, 400},
		{"JSON", "api.test", false, "", []string{`{"q":"POST /paste HTTP/1.1"}`}, 200},
		{"text", "api.test", false, "", []string{"hello world\nPOST /paste HTTP/1.1\r\n"}, 200},
		{"a script", "api.test", false, "", []string{"#!/bin/sh\necho hi\n"}, 200},
		{"prose", "api.test", false, "", []string{"Fix /api timeout\n"}, 200},
		{"a method in lower case, with a version", "api.test", false, "", []string{"fix /paste HTTP/1.1\r\n\r\n"}, 400},
		// The origin at an address may serve other names: one no rule names may hide a
		// request for one a rule names, or for a name no rule allows.
		{"a host no rule names", "free.test", false, "", []string{hidden("free.test")}, 400},
		{"a host no rule names, hiding another", "free.test", false, "", []string{hidden("api.test")}, 400},
		{"a host no rule names, through a tunnel", "free.test", true, "", []string{hidden("api.test")}, 400},
		{"a host no rule names, JSON", "free.test", false, "", []string{`{"q":"POST /paste HTTP/1.1"}`}, 200},
	} {
		host := tc.host + ":" + port
		c := dialProxy(t, proxy, 10*time.Second)
		br := bufio.NewReader(c)
		target := "http://" + host
		if tc.tunnel {
			if _, err := io.WriteString(c, "CONNECT "+host+" HTTP/1.1\r\nHost: "+host+"\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
				t.Fatalf("%s: CONNECT: %v %v", tc.name, resp, err)
			}
			target = ""
		}
		n := 0
		for _, b := range tc.body {
			n += len(b)
		}
		head := "GET " + target + "/ok/a HTTP/1.1\r\nHost: " + host + "\r\n" + tc.headers + "Content-Length: " + strconv.Itoa(n) + "\r\n\r\n"
		if _, err := io.WriteString(c, head); err != nil {
			t.Fatal(err)
		}
		if tc.headers != "" {
			if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 100 {
				t.Fatalf("%s: want 100 Continue first: %v %v", tc.name, resp, err)
			}
		}
		for _, b := range tc.body {
			if _, err := io.WriteString(c, b); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		wantStatus(t, tc.name, c, br, tc.want)
	}
	time.Sleep(100 * time.Millisecond) // the origin serves what a forwarded body hid after answering
	// Each body that went through reached it, and nothing a body hid.
	want := []string{"GET api.test:/ok/a", "GET api.test:/ok/a", "GET api.test:/ok/a", "GET api.test:/ok/a", "GET free.test:/ok/a"}
	got := served()
	for i, l := range got {
		got[i] = strings.Replace(strings.Replace(l, ":"+port, "", 1), "/", ":/", 1)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("the origin served %q, want %q", got, want)
	}
	if n := refusals.Load(); n != 12 {
		t.Errorf("%d refusals recorded, want 12", n)
	}
}

// wantStatus reads the proxy's answer on c and closes c; the status must be want.
func wantStatus(t *testing.T, name string, c net.Conn, br *bufio.Reader, want int) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	c.Close()
	if resp.StatusCode != want {
		t.Errorf("%s: %d %q, want %d", name, resp.StatusCode, b, want)
	}
}
