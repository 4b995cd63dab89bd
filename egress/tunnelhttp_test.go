package egress

import (
	"bufio"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestTunnelPlainHTTPDecided: plain HTTP sent through an allowed tunnel (CONNECT or SOCKS to
// port 80, curl --proxytunnel) is the same plain HTTP a forwarded request is: each request in
// it is decided by method and path, and held to the tunnel's host, so neither a method/path
// deny nor the tunnel's host is escaped by wrapping the request in a tunnel.
func TestTunnelPlainHTTPDecided(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.Host+" "+r.URL.Path)
		mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	}))
	defer origin.Close()
	port := portOf(t, origin.Listener.Addr().String())
	rec := &recorder{}
	s := &Server{
		Decide: rec.decide(func(r Request) Verdict {
			if r.Host != "git.test" {
				return Verdict{Reason: "not allowed"}
			}
			if r.Method == "POST" {
				return Verdict{Reason: "git push is not allowed", Rule: "WebFetch(POST git.test/**)"}
			}
			return Verdict{Allow: true, Rule: "WebFetch(domain:git.test)"}
		}),
		Audit: rec.audit, AllowPrivate: loopback, Resolver: newResolver("git.test", "127.0.0.1"),
	}
	proxy := startProxy(t, s)

	exchange := func(c net.Conn, br *bufio.Reader, req string) (int, string) {
		t.Helper()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(c, req); err != nil {
			return 0, err.Error()
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return 0, err.Error()
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	host := "git.test:" + port
	check := func(name string, c net.Conn, br *bufio.Reader) {
		t.Helper()
		if code, body := exchange(c, br, "GET /repo.git/info/refs HTTP/1.1\r\nHost: "+host+"\r\n\r\n"); code != 200 || body != "ok" {
			t.Errorf("%s: GET: %d %q", name, code, body)
		}
		if code, body := exchange(c, br, "POST /repo.git/git-receive-pack HTTP/1.1\r\nHost: "+host+"\r\nContent-Length: 4\r\n\r\n0000"); code != 403 || !strings.Contains(body, "git push is not allowed") {
			t.Errorf("%s: POST: %d %q", name, code, body)
		}
		c.Close()
	}
	c, br := connectTunnel(t, proxy, host)
	check("connect", c, br)
	// A request line sent in pieces, the client waiting in between, is read whole all the same.
	c, br = connectTunnel(t, proxy, host)
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "POST /repo.git/git-receive-pack")
	time.Sleep(100 * time.Millisecond)
	if code, body := exchange(c, br, " HTTP/1.1\r\nHost: "+host+"\r\nContent-Length: 0\r\n\r\n"); code != 403 {
		t.Errorf("split request line: %d %q", code, body)
	}
	c.Close()
	sc, code := socksDial(t, proxy, socksCmdConnect, socksAtypDomain, "git.test", atoiT(t, port))
	if code != 0 {
		t.Fatalf("socks: %d", code)
	}
	check("socks", sc, bufio.NewReader(sc))

	// Another name served by the same address is not reached through this tunnel.
	c, br = connectTunnel(t, proxy, host)
	if code, body := exchange(c, br, "GET /x HTTP/1.1\r\nHost: other.test\r\n\r\n"); code == 200 {
		t.Errorf("Host other.test through a tunnel to git.test: %d %q", code, body)
	}
	c.Close()
	// Pipelined behind an allowed request, a denied one is still decided on its own.
	c, br = connectTunnel(t, proxy, host)
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "GET /a HTTP/1.1\r\nHost: %s\r\n\r\nPOST /b HTTP/1.1\r\nHost: %s\r\nContent-Length: 0\r\n\r\n", host, host)
	for _, want := range []int{200, 403} {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("pipelined: %v", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("pipelined: %d, want %d", resp.StatusCode, want)
		}
	}
	c.Close()

	mu.Lock()
	defer mu.Unlock()
	for _, r := range seen {
		if strings.HasPrefix(r, "POST") || strings.Contains(r, "other.test") {
			t.Errorf("origin saw %q", r)
		}
	}
}

// TestTunnelNotHTTPPasses: a tunnel whose stream is neither TLS nor HTTP (ssh, a database) is
// still carried as it comes, decided by its host.
func TestTunnelNotHTTPPasses(t *testing.T) {
	t.Parallel()
	s := &Server{Decide: allowDecide, AllowPrivate: loopback}
	proxy := startProxy(t, s)
	for _, first := range []string{"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n", "\x00\x00\x00\x08\x04\xd2\x16\x2f", "EHLO client.example\r\n"} {
		c, br := connectTunnel(t, proxy, echoServer(t))
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(c, first); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, len(first))
		if _, err := io.ReadFull(br, b); err != nil || string(b) != first {
			t.Errorf("%q came back as %q, %v", first, b, err)
		}
		c.Close()
	}
}

func TestPassUntilKnown(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]bool{
		"GET / HTTP/1.1\r\n":                 true,
		"post /x HTTP/1.0\r\n":               true,
		"\r\nGET /x HTTP/1.1\r\n":            true,
		"GET\t/x\tHTTP/1.1\r\n":              true,
		"GET\x1c/x\x1cHTTP/1.1\r\n":          true,
		"GET\r/x\rHTTP/1.1\r\n":              true,
		"GET /x\r\n":                         true, // HTTP/0.9
		"GET x/../admin\r\n":                 true, // HTTP/0.9 as Python's http.server takes it
		"GET\tadmin":                         true,
		"GET http://a/ HTTP/1.1\r\n":         true,
		"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n":   true,
		"GET /" + strings.Repeat("a", 5000):  true, // no end of line in sight
		"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n": false,
		"EHLO client.example\r\n":            false,
		"*1\r\n$4\r\nPING\r\n":               false,
		"\x00\x00\x00\x08\x04\xd2\x16\x2f":   false,
		"U\x00\x00\x01\x85\xa6":              false,
		"hello":                              false, // ended before its line did
		"POST /x HTTP/1.1":                   false,

		// Bytes Netty skips before a request line (ISO controls, white space), and 0xa0, on
		// which Python splits.
		"\x01GET /admin/x HTTP/1.1\r\n":       true,
		"\x00\x00\x00\x08GET /x HTTP/1.1\r\n": true,
		"\x7f\r\nGET /x HTTP/1.1\r\n":         true,
		"\x85GET /x HTTP/1.1\r\n":             true,
		"\x9f\x80GET /x\r\n":                  true,
		"\xa0GET /x HTTP/1.1\r\n":             true,
		"\x1b DELETE /x HTTP/1.1\r\n":         true,
		// Past them, a byte that is neither a method's nor skipped: not HTTP to this test
		// (carry refuses such a stream where method/path rules name the host).
		"\xa1GET /x HTTP/1.1\r\n": false,
		"{GET /x HTTP/1.1\r\n":    false,
	} {
		var up strings.Builder
		br := bufio.NewReaderSize(strings.NewReader(in), 4096)
		got, _ := passUntilKnown(br, &up)
		if got != want {
			t.Errorf("%.40q: %v, want %v", in, got, want)
		}
		if got && strings.ContainsAny(up.String(), "\r\n") {
			t.Errorf("%.40q: a line end went up before it was known to be HTTP: %q", in, up.String())
		}
		rest, _ := io.ReadAll(br)
		if got && string(rest) != in || !got && up.String()+string(rest) != in {
			t.Errorf("%.40q: up %q, left %q", in, up.String(), rest)
		}
	}
}

// TestPassUntilKnownWaitsForMore: a first line that holds a line end (a CR) but no LF yet is
// undecided, and the check waits for the client's next bytes rather than looking at the same
// ones again: a client sending "POST /x HTTP/1.1\r" and nothing more once kept a root daemon's
// CPU busy for good, past the idle timeout, its session's end and Close.
func TestPassUntilKnownWaitsForMore(t *testing.T) {
	t.Parallel()
	for _, start := range []string{"POST /x HTTP/1.1\r", "POST /x\r", "\rPOST /x HTTP/1.1\r"} {
		pr, pw := io.Pipe()
		br := bufio.NewReaderSize(pr, 4096)
		var up strings.Builder
		done := make(chan bool, 1)
		go func() {
			isHTTP, _ := passUntilKnown(br, &up)
			done <- isHTTP
		}()
		if _, err := io.WriteString(pw, start); err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
			t.Fatalf("%q: decided before its line ended", start)
		case <-time.After(50 * time.Millisecond):
		}
		// The next byte must be read: the check is waiting in a read, not spinning on a peek.
		wrote := make(chan error, 1)
		go func() { _, err := io.WriteString(pw, "\nHost: x\r\n\r\n"); wrote <- err }()
		select {
		case isHTTP := <-done:
			if !isHTTP {
				t.Errorf("%q then a line end: not HTTP", start)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%q: the check never read the line end that followed (spinning)", start)
		}
		_ = pw.Close()
		<-wrote
	}
}

// TestTunnelUnendedRequestLineNotActedOn: the start of a request line passes up a tunnel before
// the proxy knows it is HTTP, and some origins (Python's http.server, so Flask's and Django's
// development servers) act on a request line that the end of the stream ends. However the
// client then ends the tunnel (a half-close, a close, going silent, or by going on with the line
// as HTTP), the origin must not see that line ended by a clean end of stream: that would run a
// request no one decided, past any method/path rule on the tunnel's host.
func TestTunnelUnendedRequestLineNotActedOn(t *testing.T) {
	t.Parallel()
	type result struct {
		got   string
		clean bool // the stream ended with EOF, not a reset
	}
	for _, tc := range []struct {
		name string
		end  func(c net.Conn)
	}{
		{"half-close", func(c net.Conn) { _ = c.(*net.TCPConn).CloseWrite() }},
		{"close", func(c net.Conn) { _ = c.Close() }},
		{"line end held back, then half-close", func(c net.Conn) {
			_, _ = io.WriteString(c, "\r")
			time.Sleep(50 * time.Millisecond)
			_ = c.(*net.TCPConn).CloseWrite()
		}},
		{"goes on as HTTP", func(c net.Conn) { _, _ = io.WriteString(c, "\r\nHost: x\r\n\r\n") }},
		{"silent past the idle timeout", func(net.Conn) { time.Sleep(700 * time.Millisecond) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			res := make(chan result, 1)
			go func() {
				c, err := l.Accept()
				if err != nil {
					res <- result{}
					return
				}
				defer c.Close()
				_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
				b, err := io.ReadAll(c)
				res <- result{got: string(b), clean: err == nil}
			}()
			s := &Server{Decide: allowDecide, AllowPrivate: loopback, IdleTimeout: 300 * time.Millisecond}
			proxy := startProxy(t, s)
			c, _ := connectTunnel(t, proxy, l.Addr().String())
			defer c.Close()
			if _, err := io.WriteString(c, "POST /delete HTTP/1.1"); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond) // the proxy passes the unended line up
			tc.end(c)
			r := <-res
			if r.clean && strings.Contains(r.got, "POST /delete") {
				t.Errorf("origin read %q and then a clean end of stream", r.got)
			}
		})
	}
	for in, want := range map[string]error{
		"POST /x HTTP/1.1": errUnendedRequestLine,
		"POST /x":          errUnendedRequestLine,
		"hello":            io.EOF,
		"GET":              io.EOF,
	} {
		var up strings.Builder
		if _, err := passUntilKnown(bufio.NewReader(strings.NewReader(in)), &up); !errors.Is(err, want) {
			t.Errorf("%q then the end: %v, want %v", in, err, want)
		}
	}
}

// laxOrigin is a plain TCP origin on loopback that serves any head, as a lax server does (the
// JDK's takes whatever comes before the first space as the method): once it has read a line
// end and then an empty line it answers 200 "served". Each connection's bytes go on the
// channel when it ends.
func laxOrigin(t *testing.T) (string, <-chan string) {
	t.Helper()
	got := make(chan string, 64)
	addr := tcpServer(t, func(c net.Conn) {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		var b []byte
		buf := make([]byte, 4096)
		for {
			n, err := c.Read(buf)
			b = append(b, buf[:n]...)
			if strings.Contains(string(b), "\n\r\n") || strings.Contains(string(b), "\n\n") {
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\nserved")
				break
			}
			if err != nil {
				break
			}
		}
		got <- string(b)
	})
	return addr, got
}

// originSaw is what reached the origin's connections until none ended for a while.
func originSaw(got <-chan string) []string {
	var all []string
	for {
		select {
		case s := <-got:
			all = append(all, s)
		case <-time.After(300 * time.Millisecond):
			return all
		}
	}
}

// tunnelRoutes opens a tunnel to vm.test:port through the proxy by each route a session has:
// CONNECT, SOCKS5, and CONNECT to a proxy that intercepts TLS (answered before it is decided).
func tunnelRoutes(t *testing.T, decide func(Request) Verdict) map[string]func(port string) (net.Conn, *bufio.Reader, *recorder) {
	t.Helper()
	start := func(intercept bool) (string, *recorder) {
		rec := &recorder{}
		s := &Server{
			Decide: rec.decide(decide), Audit: rec.audit, AllowPrivate: loopback,
			Resolver: newResolver("vm.test", "127.0.0.1"),
		}
		if intercept {
			s.Intercept, _ = testCA(t, "sandboxd egress CA")
		}
		return startProxy(t, s), rec
	}
	plain, plainRec := start(false)
	icpt, icptRec := start(true)
	return map[string]func(string) (net.Conn, *bufio.Reader, *recorder){
		"connect": func(port string) (net.Conn, *bufio.Reader, *recorder) {
			c, br := connectTunnel(t, plain, "vm.test:"+port)
			return c, br, plainRec
		},
		"socks": func(port string) (net.Conn, *bufio.Reader, *recorder) {
			c, code := socksDial(t, plain, socksCmdConnect, socksAtypDomain, "vm.test", atoiT(t, port))
			if code != socksReplyOK {
				t.Fatalf("socks: %#x", code)
			}
			return c, bufio.NewReader(c), plainRec
		},
		"intercept": func(port string) (net.Conn, *bufio.Reader, *recorder) {
			c := openTunnel(t, icpt, "vm.test:"+port)
			return c, bufio.NewReader(c), icptRec
		},
	}
}

// TestTunnelControlBytesBeforeRequest: Netty skips ISO control characters and white space
// before a request line, and the JDK's server takes them into the method and serves the
// request anyway, so a tunnel's stream that starts with such bytes and then a request is HTTP
// to them. The proxy must read it as HTTP too (decided per request, here refused as malformed)
// and not carry it blind past a method/path deny.
func TestTunnelControlBytesBeforeRequest(t *testing.T) {
	t.Parallel()
	routes := tunnelRoutes(t, func(r Request) Verdict {
		if r.Method != "" && strings.HasPrefix(r.Path, "/admin") {
			return Verdict{Reason: "admin is denied", Rule: "WebFetch(* vm.test/admin/**)"}
		}
		return Verdict{Allow: true, Rule: "WebFetch(domain:vm.test)"}
	})
	for name, open := range routes {
		for _, lead := range []string{"\x01", "\x00\x00", "\x7f\r\n", "\x85", "\x9f", "\xa0", "\x1b\x08 \x0b"} {
			t.Run(fmt.Sprintf("%s/%q", name, lead), func(t *testing.T) {
				addr, got := laxOrigin(t)
				port := portOf(t, addr)
				c, br, _ := open(port)
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				fmt.Fprintf(c, "%sGET /admin/x HTTP/1.1\r\nHost: vm.test:%s\r\n\r\n", lead, port)
				if resp, err := http.ReadResponse(br, nil); err == nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode == 200 || string(b) == "served" {
						t.Errorf("answered %s %q", resp.Status, b)
					}
				}
				c.Close()
				for _, s := range originSaw(got) {
					if strings.ContainsAny(s, "\r\n") {
						t.Errorf("a line reached the origin: %q", s)
					}
				}
			})
		}
	}
}

// TestTunnelPathRulesRefuseUnread: where method/path rules name a tunnel's host
// (Verdict.PathRules), a stream the proxy reads neither as TLS nor as HTTP is refused and
// recorded, the tunnel reset, whatever its first byte: the JDK's server serves `{GET /admin/x
// HTTP/1.1` (method `{GET`), so no test of the first bytes can tell every request from another
// protocol. HTTP in such a tunnel is still served request by request.
func TestTunnelPathRulesRefuseUnread(t *testing.T) {
	t.Parallel()
	routes := tunnelRoutes(t, adminDenied)
	for name, open := range routes {
		for _, first := range []string{"{GET /admin/x HTTP/1.1\r\nHost: vm.test\r\n\r\n", "\xa1GET /admin/x HTTP/1.1\r\nHost: vm.test\r\n\r\n", "SSH-2.0-OpenSSH_9.2p1\r\n", "{"} {
			t.Run(fmt.Sprintf("%s/%.8q", name, first), func(t *testing.T) {
				addr, got := laxOrigin(t)
				c, br, rec := open(portOf(t, addr))
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				before := len(rec.audited())
				if _, err := io.WriteString(c, first); err != nil {
					t.Fatal(err)
				}
				if b, err := io.ReadAll(br); len(b) > 0 || err == nil {
					// A reset, not an answer nor a clean end: the client's stream went nowhere.
					t.Errorf("client read %q, %v", b, err)
				}
				for _, s := range originSaw(got) {
					if s != "" {
						t.Errorf("the origin read %q", s)
					}
				}
				if !refusedSince(rec, before, func(ev Event) bool {
					return ev.Host == "vm.test" && ev.Kind != KindHTTP && strings.Contains(ev.Reason, "could not read the tunnel's stream as HTTP")
				}) {
					t.Errorf("no refusal recorded: %+v", rec.audited()[before:])
				}
			})
		}
		t.Run(name+"/http", func(t *testing.T) {
			addr, _ := laxOrigin(t)
			port := portOf(t, addr)
			for path, want := range map[string]int{"/ok": 200, "/admin/x": 403} {
				c, br, _ := open(port)
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: vm.test:%s\r\n\r\n", path, port)
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("%s: %v", path, err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != want {
					t.Errorf("%s: %s, want %d", path, resp.Status, want)
				}
			}
		})
	}
	// TLS is decided by host, as the tunnel was.
	origin := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "tls") }))
	defer origin.Close()
	for _, name := range []string{"connect", "socks"} {
		c, _, _ := routes[name](portOf(t, origin.Listener.Addr().String()))
		tc := tls.Client(c, &tls.Config{ServerName: "vm.test", InsecureSkipVerify: true})
		_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
		if err := tc.Handshake(); err != nil {
			t.Errorf("%s: TLS through a tunnel to a host with method/path rules: %v", name, err)
		}
		tc.Close()
	}
}

// TestTunnelPathRulesHelloToPlainOrigin: a ClientHello is the client's to fill (its random
// alone is 32 bytes of its choosing), so one can carry a request line that a server speaking
// plain HTTP on the tunnel's port serves. Where method/path rules name the host, a ClientHello
// goes up only to an origin that answered the proxy's own as TLS: to a plain one, the tunnel
// is refused and recorded before any of the client's bytes reach it.
func TestTunnelPathRulesHelloToPlainOrigin(t *testing.T) {
	t.Parallel()
	routes := tunnelRoutes(t, adminDenied)
	addr, got := requestFinder(t)
	for name, open := range routes {
		t.Run(name, func(t *testing.T) {
			c, _, rec := open(portOf(t, addr))
			defer c.Close()
			before := len(rec.audited())
			helloCarrying(c, "vm.test", "GET /admin/x HTTP/1.1\r\n\r\n")
			for _, s := range originSaw(got) {
				if strings.Contains(s, "/admin") {
					t.Errorf("the origin read the ClientHello's request: %.80q…", s)
				}
			}
			if name == "intercept" {
				return // the proxy ends the client's TLS itself; its requests are decided inside
			}
			if !refusedSince(rec, before, func(ev Event) bool { return ev.Host == "vm.test" && strings.Contains(ev.Reason, "does not speak TLS") }) {
				t.Errorf("no refusal recorded: %+v", rec.audited()[before:])
			}
		})
	}
}

// TestTLSOriginProbedOnce: an origin's TLS answer is remembered, so tunnels to a host with
// method/path rules cost it one extra handshake, not one each.
func TestTLSOriginProbedOnce(t *testing.T) {
	t.Parallel()
	routes := tunnelRoutes(t, func(r Request) Verdict {
		return Verdict{Allow: true, Rule: "WebFetch(domain:vm.test)", PathRules: true}
	})
	var mu sync.Mutex
	opened := 0
	origin := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "tls") }))
	origin.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			mu.Lock()
			opened++
			mu.Unlock()
		}
	}
	origin.StartTLS()
	defer origin.Close()
	for range 3 {
		c, _, _ := routes["connect"](portOf(t, origin.Listener.Addr().String()))
		tc := tls.Client(c, &tls.Config{ServerName: "vm.test", InsecureSkipVerify: true})
		_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
		if err := tc.Handshake(); err != nil {
			t.Fatalf("TLS through a tunnel to a host with method/path rules: %v", err)
		}
		tc.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if opened != 4 {
		t.Errorf("the origin took %d connections for 3 tunnels, want 4 (one probe)", opened)
	}
}

// requestFinder is a lax plain-HTTP origin answering each connection's first read: 200
// "served" when a request for /admin is anywhere in it (as the JDK's server finds one behind
// any bytes before a space), else a 400. Each connection's bytes go on the channel.
func requestFinder(t *testing.T) (string, <-chan string) {
	t.Helper()
	got := make(chan string, 64)
	addr := tcpServer(t, func(c net.Conn) {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 4096)
		n, _ := c.Read(buf)
		if strings.Contains(string(buf[:n]), "GET /admin") {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\nserved")
		} else if n > 0 {
			_, _ = io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		}
		got <- string(buf[:n])
	})
	return addr, got
}

// helloCarrying sends over c a well-formed ClientHello naming serverName ("" names none) whose
// random is request, padded to its 32 bytes, and reads what comes back.
func helloCarrying(c net.Conn, serverName, request string) {
	random := request + strings.Repeat("\x00", 32-len(request))
	tc := tls.Client(c, &tls.Config{ServerName: serverName, InsecureSkipVerify: true,
		Rand: io.MultiReader(strings.NewReader(random), rand.Reader)})
	_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
	_ = tc.Handshake()
	tc.Close()
}

// TestTLSProbeMirrorsTheHello: a front routing by the ClientHello (HAProxy's req.ssl_sni) may
// send a hello naming the host to a TLS backend and one naming no server to a plain HTTP one.
// The probe offers what the client's hello does, and its answer holds for that alone: a TLS
// answer for the host's name does not pass a nameless hello carrying a request.
func TestTLSProbeMirrorsTheHello(t *testing.T) {
	t.Parallel()
	routes := tunnelRoutes(t, adminDenied)
	plain, got := requestFinder(t)
	secure := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "tls") }))
	defer secure.Close()
	front := tcpServer(t, func(c net.Conn) {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		hello, seen, err := readClientHello(c, c)
		if err != nil {
			return
		}
		backend := plain
		if hello.serverName == "vm.test" {
			backend = secure.Listener.Addr().String()
		}
		up, err := net.Dial("tcp", backend)
		if err != nil {
			return
		}
		defer up.Close()
		_, _ = up.Write(seen)
		go func() { _, _ = io.Copy(up, c) }()
		_, _ = io.Copy(c, up)
	})
	for _, name := range []string{"connect", "socks"} {
		t.Run(name, func(t *testing.T) {
			// The host's name: TLS behind the front, remembered so.
			c, _, _ := routes[name](portOf(t, front))
			tc := tls.Client(c, &tls.Config{ServerName: "vm.test", InsecureSkipVerify: true})
			_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
			if err := tc.Handshake(); err != nil {
				t.Fatalf("TLS naming the host through the front: %v", err)
			}
			tc.Close()
			// No name: the front's plain backend, which must not see the hello.
			c, _, rec := routes[name](portOf(t, front))
			defer c.Close()
			before := len(rec.audited())
			helloCarrying(c, "", "GET /admin/x HTTP/1.1\r\n\r\n")
			for _, s := range originSaw(got) {
				if strings.Contains(s, "/admin") {
					t.Errorf("the plain backend read the ClientHello's request: %.80q…", s)
				}
			}
			if !refusedSince(rec, before, func(ev Event) bool { return strings.Contains(ev.Reason, "does not speak TLS") }) {
				t.Errorf("no refusal recorded: %+v", rec.audited()[before:])
			}
		})
	}
}

// adminDenied is the verdict of a host with method/path rules: its tunnels allowed
// (PathRules), its /admin requests denied, the rest allowed.
func adminDenied(r Request) Verdict {
	if r.Method == "" {
		return Verdict{Allow: true, Rule: "WebFetch(domain:vm.test)", PathRules: true}
	}
	if strings.HasPrefix(r.Path, "/admin") {
		return Verdict{Reason: "admin is denied", Rule: "WebFetch(* vm.test/admin/**)"}
	}
	return Verdict{Allow: true, Rule: "WebFetch(domain:vm.test)"}
}

// refusedSince reports whether a refusal that is matches was recorded since the before'th event.
func refusedSince(rec *recorder, before int, is func(Event) bool) bool {
	for _, ev := range rec.audited()[before:] {
		if !ev.Allowed && is(ev) {
			return true
		}
	}
	return false
}
