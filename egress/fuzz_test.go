package egress

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// FuzzParseRequest feeds untrusted bytes to the first-request parser (SOCKS5 or HTTP). It must
// never panic, and whatever it accepts must be a target the policy can match safely: a
// normalized host, a valid port, and for plain HTTP a method and a clean path.
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
// with a method and a clean path.
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
		tg, err := parseInner(req, tunnel)
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
		first, refused, err := openStream(ic, br, target{host: "front.test"}, 5*time.Second, false)
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
