package egress

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"
)

// FuzzParseRequest feeds untrusted bytes to the first-request parser (SOCKS5 or HTTP). It must
// never panic, and whatever it accepts must be a target the policy can match safely: a
// normalized host, a valid port, and for plain HTTP a method and a path starting with /.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		"GET http://example.com/a?b HTTP/1.1\r\nHost: example.com\r\n\r\n",
		"POST http://git.example/r.git/git-receive-pack HTTP/1.1\r\nContent-Length: 4\r\n\r\n0000",
		"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
		"CONNECT [::1]:443 HTTP/1.1\r\n\r\n",
		"CONNECT [::ffff:127.0.0.1]:443 HTTP/1.1\r\n\r\n",
		"GET /origin HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET http://EXAMPLE.com./../x HTTP/1.0\r\n\r\n",
		"\x05\x01\x00\x05\x01\x00\x03\x0bexample.com\x01\xbb",
		"\x05\x01\x00\x05\x01\x00\x01\x7f\x00\x00\x01\x00\x50",
		"\x05\x01\x00\x05\x01\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x50",
		"\x05\x01\x00\x05\x03\x00\x01\x00\x00\x00\x00\x00\x00",
		"\x05\x02\x01\x02",
		"\x05\x01\x00\x05\x01\x00\x03\x00\x00\x50",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var w bytes.Buffer
		tg, req, code, err := parseFirst(bufio.NewReader(bytes.NewReader(data)), &w)
		if w.Len() > 2 {
			t.Fatalf("greeting answer of %d bytes", w.Len())
		}
		if err != nil {
			if req != nil && req.Body != nil {
				_, _ = io.Copy(io.Discard, req.Body)
			}
			if code != 0 && tg.kind != KindSOCKS5 {
				t.Fatalf("SOCKS reply code %#x for a %q request", code, tg.kind)
			}
			return
		}
		if code != 0 {
			t.Fatalf("reply code %#x with no error", code)
		}
		switch tg.kind {
		case KindHTTP:
			if req == nil || tg.method == "" || !strings.HasPrefix(tg.path, "/") {
				t.Fatalf("http target %+v", tg)
			}
		case KindConnect:
			if req == nil || tg.method != "" || tg.path != "" {
				t.Fatalf("connect target %+v", tg)
			}
		case KindSOCKS5:
			if req != nil {
				t.Fatalf("socks target with an HTTP request")
			}
		default:
			t.Fatalf("kind %q", tg.kind)
		}
		if tg.port < 1 || tg.port > 65535 {
			t.Fatalf("port %d", tg.port)
		}
		if tg.addr.IsValid() {
			if tg.addr.Is4In6() || tg.addr.Zone() != "" || tg.host != tg.addr.String() {
				t.Fatalf("literal %q vs %v", tg.host, tg.addr)
			}
			return
		}
		if _, err := netip.ParseAddr(tg.host); err == nil {
			t.Fatalf("IP literal %q accepted as a name", tg.host)
		}
		if tg.host == "" || tg.host != strings.ToLower(tg.host) || strings.HasSuffix(tg.host, ".") ||
			strings.ContainsAny(tg.host, " /@:%[]\\\x00") {
			t.Fatalf("host %q not normalized", tg.host)
		}
		// Normalizing is idempotent: a rule written with the normalized name matches it.
		if again, _, err := normalizeHost(tg.host); err != nil || again != tg.host {
			t.Fatalf("normalize(%q) = %q, %v", tg.host, again, err)
		}
	})
}

// FuzzParseInner feeds untrusted bytes as a request read inside an intercepted tunnel to
// api.test:443. It must never panic, and what it accepts is for the tunnel's host and port only,
// with a method and a path starting with /.
func FuzzParseInner(f *testing.F) {
	for _, s := range []string{
		"GET /a/../b HTTP/1.1\r\nHost: api.test\r\n\r\n",
		"POST /x HTTP/1.1\r\nHost: API.test.:443\r\nContent-Length: 1\r\n\r\nx",
		"GET https://api.test/x HTTP/1.1\r\nHost: api.test\r\n\r\n",
		"GET https://other.test/x HTTP/1.1\r\nHost: api.test\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: other.test\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: api.test:444\r\n\r\n",
		"GET http://api.test/x HTTP/1.1\r\n\r\n",
		"CONNECT api.test:443 HTTP/1.1\r\n\r\n",
		"GET /x HTTP/1.0\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	tunnel := target{kind: KindConnect, host: "api.test", port: 443}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(data)))
		if err != nil {
			return
		}
		tg, err := parseInner(req, tunnel, KindHTTPS)
		if err != nil {
			return
		}
		if tg.kind != KindHTTPS || tg.host != "api.test" || tg.port != 443 || tg.method == "" || !strings.HasPrefix(tg.path, "/") {
			t.Fatalf("inner target %+v from %q", tg, data)
		}
	})
}

// FuzzOpenStream feeds a tunnel's first bytes to the ClientHello check. It must never panic or
// lose a byte: what it consumed and what is left are the stream as sent; it passes only a
// stream that is not TLS or a ClientHello naming the tunnel's host or none.
func FuzzOpenStream(f *testing.F) {
	f.Add(rawClientHello("front.test", 0x1234))
	f.Add(rawClientHello("other.test", 0x1234))
	f.Add(rawClientHello("front.test", extEncryptedClientHello))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add([]byte("\x16\x03\x01\x00\x04\x02\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, b := net.Pipe()
		defer a.Close()
		go func() {
			_, _ = b.Write(data)
			_ = b.Close()
		}()
		ic := newIdleConn(a, 5*time.Second, nil)
		br := bufio.NewReader(ic)
		first, _, refused, err := openStream(ic, br, target{host: "front.test"}, 5*time.Second, false)
		if err != nil && len(data) > 0 && !errors.Is(err, errHeadTooLarge) {
			t.Fatalf("error %v on %q", err, data)
		}
		rest, _ := io.ReadAll(br)
		if got := append(first, rest...); !bytes.Equal(got, data) {
			t.Fatalf("stream %q after the check, sent %q", got, data)
		}
		if refused == "" && len(data) > 0 && data[0] == tlsRecordHandshake {
			hello, _, err := readClientHello(ic, bytes.NewReader(data))
			if err != nil || hello.serverName != "" && !strings.EqualFold(strings.TrimSuffix(hello.serverName, "."), "front.test") {
				t.Fatalf("passed %q: %+v %v", data, hello, err)
			}
		}
	})
}

// fuzzOrigin is an origin on loopback: the first connection reads one request and answers it
// with answer, whatever those bytes are, and closes; later ones answer each request with
// freshAnswer. Its Dialer connects there whatever address is asked.
type fuzzOrigin struct {
	l      net.Listener
	answer []byte
}

const freshAnswer = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfresh"

func startFuzzOrigin(t *testing.T, answer []byte) *fuzzOrigin {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := &fuzzOrigin{l: l, answer: answer}
	go func() {
		for first := true; ; first = false {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn, first bool) {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				br := bufio.NewReader(c)
				for {
					if _, err := http.ReadRequest(br); err != nil {
						return
					}
					if first {
						_, _ = c.Write(o.answer)
						return
					}
					if _, err := io.WriteString(c, freshAnswer); err != nil {
						return
					}
				}
			}(c, first)
		}
	}()
	return o
}

func (o *fuzzOrigin) DialContext(ctx context.Context, _, _ string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", o.l.Addr().String())
}

// FuzzUpstreamAnswer feeds an allowed origin's answer, any bytes at all, to the proxy's plain
// HTTP forwarding, where an origin's answer is parsed on the client's own goroutine. The proxy
// must never panic or hang, must answer the client with one well-formed HTTP response, and must
// never pass on more than that one: whatever the origin sent past its answer (a second
// response, a smuggled one) must neither reach the client unasked nor be taken as the answer
// to the client's next request, which goes to the origin on a connection of its own.
func FuzzUpstreamAnswer(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nextra",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n2\r\nok\r\n0\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nhello",
		"HTTP/1.1 304 Not Modified\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nforge",
		"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\nraw",
		"HTTP/1.0 200 OK\r\n\r\nuntil the close",
		"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
		"HTTP/1.1 999 Whatever\r\nX: \x00\r\n\r\n",
		"garbage",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, answer []byte) {
		o := startFuzzOrigin(t, answer)
		defer o.l.Close()
		s := &Server{Decide: allowDecide, AllowPrivate: loopback, Dialer: o}
		defer s.Close()
		client, proxySide := net.Pipe()
		defer client.Close()
		served := make(chan error, 1)
		go func() { served <- s.ServeConn(proxySide, "s1", Origin{}) }()
		_ = client.SetDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(client)
		get := func() (*http.Response, error) {
			go func() {
				_, _ = io.WriteString(client, "GET http://127.0.0.1:80/x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
			}()
			return http.ReadResponse(br, &http.Request{Method: http.MethodGet})
		}
		resp, err := get()
		if err != nil {
			t.Fatalf("the client got no well-formed response (%v) to the origin's %q", err, answer)
		}
		// A body cut short is how the client learns the origin failed mid-body.
		_, bodyErr := io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		// Nothing more comes unasked: the connection is kept for the next request, or closed.
		_ = client.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		n, err := br.Read(make([]byte, 64))
		if n > 0 {
			t.Fatalf("the client got more than the one answer to its one request from the origin's %q", answer)
		}
		if bodyErr == nil && errors.Is(err, os.ErrDeadlineExceeded) && !resp.Close {
			// Kept: the next request's answer is the origin's to it, from a new connection.
			_ = client.SetDeadline(time.Now().Add(10 * time.Second))
			resp, err := get()
			if err != nil {
				t.Fatalf("second request after the origin's %q: %v", answer, err)
			}
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			if resp.StatusCode != 200 || string(b) != "fresh" {
				t.Fatalf("second request after the origin's %q: %d %q, want the fresh connection's answer", answer, resp.StatusCode, b)
			}
		}
		client.Close()
		if err := <-served; err != nil {
			t.Fatal(err)
		}
	})
}
