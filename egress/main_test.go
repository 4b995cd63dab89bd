package egress

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

// fakeResolver answers from a table, so no test touches real DNS.
type fakeResolver struct {
	mu    sync.Mutex
	names map[string][]netip.Addr
	calls []string
}

func newResolver(pairs ...string) *fakeResolver {
	r := &fakeResolver{names: map[string][]netip.Addr{}}
	for i := 0; i+1 < len(pairs); i += 2 {
		r.names[pairs[i]] = append(r.names[pairs[i]], netip.MustParseAddr(pairs[i+1]))
	}
	return r
}

func (r *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, host)
	a, ok := r.names[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return a, nil
}

func (r *fakeResolver) lookups() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

// recorder keeps the requests Decide saw and the events Audit got.
type recorder struct {
	mu     sync.Mutex
	reqs   []Request
	events []Event
	fail   error // what audit returns
}

func (r *recorder) decide(f func(Request) Verdict) func(context.Context, Request) Verdict {
	return func(_ context.Context, req Request) Verdict {
		r.mu.Lock()
		r.reqs = append(r.reqs, req)
		r.mu.Unlock()
		return f(req)
	}
}

func (r *recorder) audit(ev Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
	return r.fail
}

func (r *recorder) requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.reqs...)
}

func (r *recorder) audited() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

func allowAll(Request) Verdict {
	return Verdict{Allow: true, Reason: "test allows all", Rule: "WebFetch"}
}

// startProxy serves s on a fresh loopback listener for session "s1" and closes it when the test
// ends, checking Serve's return.
func startProxy(t testing.TB, s *Server) string {
	t.Helper()
	if s.Logger == nil {
		if tt, ok := t.(*testing.T); ok {
			s.Logger = zaptest.NewLogger(tt)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(l, "s1") }()
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("serve returned %v, want ErrServerClosed", err)
		}
	})
	return l.Addr().String()
}

// listenAs serves one more listener of s, for session; startProxy's Close ends it too.
func listenAs(t testing.TB, s *Server, session string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(l, session) }()
	return l.Addr().String()
}

// proxyClient is an http.Client using the proxy through net/http's own proxy support.
func proxyClient(t testing.TB, proxyAddr string) *http.Client {
	t.Helper()
	tr := &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: proxyAddr})}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func portOf(t testing.TB, addr string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// dialProxy connects to the proxy at addr, with d for the whole exchange; the connection is
// closed when the test ends.
func dialProxy(t testing.TB, addr string, d time.Duration) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(d))
	return c
}

// rawRequest sends one raw HTTP request to the proxy and returns the response.
func rawRequest(t *testing.T, proxyAddr, req string) (*http.Response, string) {
	t.Helper()
	c := dialProxy(t, proxyAddr, 10*time.Second)
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read response to %q: %v", req, err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	return resp, string(b)
}

// tunnelRequest sends raw, a whole request, through a CONNECT tunnel to host and returns the
// answer and its body.
func tunnelRequest(t *testing.T, proxyAddr, host, raw string) (*http.Response, string) {
	t.Helper()
	c, br := connectTunnel(t, proxyAddr, host)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	return resp, string(b)
}

// socksDial is a small SOCKS5 client (RFC 1928, no auth) so the tests control every byte. It
// returns the connection and the reply code; code 0 means a tunnel is open.
func socksDial(t *testing.T, proxyAddr string, cmd, atyp byte, host string, port int) (net.Conn, byte) {
	t.Helper()
	c := dialProxy(t, proxyAddr, 10*time.Second)
	if _, err := c.Write([]byte{5, 1, 0}); err != nil {
		t.Fatal(err)
	}
	var sel [2]byte
	if _, err := io.ReadFull(c, sel[:]); err != nil || sel != [2]byte{5, 0} {
		t.Fatalf("method selection %v, %v", sel, err)
	}
	msg := []byte{5, cmd, 0, atyp}
	switch atyp {
	case socksAtypIPv4, socksAtypIPv6:
		msg = append(msg, netip.MustParseAddr(host).AsSlice()...)
	case socksAtypDomain:
		msg = append(msg, byte(len(host)))
		msg = append(msg, host...)
	default:
		msg = append(msg, host...)
	}
	msg = binary.BigEndian.AppendUint16(msg, uint16(port))
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	var rep [10]byte
	if _, err := io.ReadFull(c, rep[:]); err != nil {
		t.Fatalf("socks reply: %v", err)
	}
	if rep[0] != 5 {
		t.Fatalf("socks reply version %d", rep[0])
	}
	_ = c.SetDeadline(time.Time{})
	return c, rep[1]
}

// echoServer accepts TCP connections on loopback and echoes them until closed.
func echoServer(t *testing.T) string {
	t.Helper()
	return tcpServer(t, func(c net.Conn) { _, _ = io.Copy(c, c) })
}

// tcpServer serves each TCP connection on loopback with handle (which need not close it) until
// the test ends, when the listener and every connection still open are closed. It returns the
// address.
func tcpServer(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]struct{}{}
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = struct{}{}
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				handle(c)
			})
		}
	})
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		for c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().String()
}

// echoOnce serves one connection on loopback: it sends banner first (an origin that speaks
// first), then echoes what it reads. It returns the address.
func echoOnce(t *testing.T, banner string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.WriteString(c, banner)
		_, _ = io.Copy(c, c)
	}()
	return l.Addr().String()
}

func connectTunnel(t *testing.T, proxyAddr, target string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("CONNECT %s: %s %s", target, resp.Status, b)
	}
	_ = c.SetReadDeadline(time.Time{})
	return c, br
}
