package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestRecheckEndsRefusedTunnels: a tunnel is decided when it opens; once its session's rules
// or the policy change, Recheck asks again and ends each tunnel now refused (audited, saying
// so), in the selected sessions only, leaving the allowed ones and other sessions' carrying.
func TestRecheckEndsRefusedTunnels(t *testing.T) {
	t.Parallel()
	echo := echoServer(t)
	port := portOf(t, echo)
	var denied atomic.Bool
	rec := &recorder{}
	s := &Server{
		Decide: rec.decide(func(r Request) Verdict {
			if denied.Load() && r.Host == "gone.test" {
				return Verdict{Reason: "denied by a rule added since", Rule: "WebFetch(domain:gone.test)"}
			}
			return Verdict{Allow: true}
		}),
		Audit: rec.audit, AllowPrivate: loopback,
		Resolver: newResolver("gone.test", "127.0.0.1", "kept.test", "127.0.0.1"),
	}
	addr := startProxy(t, s)
	other := listenAs(t, s, "s2")
	gone, goneR := connectTunnel(t, addr, "gone.test:"+port)
	defer gone.Close()
	kept, keptR := connectTunnel(t, addr, "kept.test:"+port)
	defer kept.Close()
	elsewhere, elsewhereR := connectTunnel(t, other, "gone.test:"+port)
	defer elsewhere.Close()
	roundTrip := func(c io.Writer, r io.Reader, what string) error {
		if _, err := io.WriteString(c, what); err != nil {
			return err
		}
		b := make([]byte, len(what))
		_, err := io.ReadFull(r, b)
		return err
	}
	for _, c := range []struct {
		w io.Writer
		r io.Reader
	}{{gone, goneR}, {kept, keptR}, {elsewhere, elsewhereR}} {
		if err := roundTrip(c.w, c.r, "\x01before\n"); err != nil {
			t.Fatal(err)
		}
	}
	denied.Store(true)
	if n := s.Recheck(context.Background(), func(id string) bool { return id == "s1" }); n != 1 {
		t.Fatalf("Recheck ended %d tunnels, want 1", n)
	}
	_ = gone.SetDeadline(time.Now().Add(5 * time.Second))
	if err := roundTrip(gone, goneR, "\x01after\n"); err == nil {
		t.Error("a tunnel its session now refuses still carries")
	}
	if err := roundTrip(kept, keptR, "\x01after\n"); err != nil {
		t.Errorf("an allowed tunnel was ended: %v", err)
	}
	if err := roundTrip(elsewhere, elsewhereR, "\x01after\n"); err != nil {
		t.Errorf("another session's tunnel was ended: %v", err)
	}
	n := 0
	for _, ev := range rec.audited() {
		if !ev.Allowed && ev.Host == "gone.test" && strings.Contains(ev.Reason, "open tunnel was ended") && ev.Rule == "WebFetch(domain:gone.test)" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d records of the ended tunnel, want 1: %+v", n, rec.audited())
	}
}

// TestRecheckEndsRefusedResponses: a forwarded request whose response is still streaming is
// ended too once the policy refuses its host.
func TestRecheckEndsRefusedResponses(t *testing.T) {
	t.Parallel()
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i < 500 && r.Context().Err() == nil; i++ {
			_, _ = io.WriteString(w, "chunk\n")
			w.(http.Flusher).Flush()
			time.Sleep(20 * time.Millisecond)
		}
	}))
	defer origin.Close()
	port := portOf(t, origin.Listener.Addr().String())
	s, denied := deniedLater("stream.test")
	addr := startProxy(t, s)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(c, "GET http://stream.test:%s/ HTTP/1.1\r\nHost: stream.test:%s\r\n\r\n", port, port)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "chunk\n" {
		t.Fatalf("first chunk: %q %v", line, err)
	}
	denied.Store(true)
	if n := s.Recheck(context.Background(), func(string) bool { return true }); n != 1 {
		t.Fatalf("Recheck ended %d, want the streaming response", n)
	}
	// What was already on its way may arrive; the other 490-odd chunks may not.
	rest, _ := io.Copy(io.Discard, resp.Body)
	if chunks := rest / int64(len("chunk\n")); chunks > 50 {
		t.Errorf("the response streamed on after its host was refused: %d more chunks", chunks)
	}
}

// TestRecheckEndsRefusedUploads: a forwarded request whose body is still coming (a chunked
// POST that never ends: an exfiltration channel) is ended too.
func TestRecheckEndsRefusedUploads(t *testing.T) {
	t.Parallel()
	var got atomic.Int64
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 64)
		for {
			n, err := r.Body.Read(buf)
			got.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	defer origin.Close()
	port := portOf(t, origin.Listener.Addr().String())
	s, denied := deniedLater("sink.test")
	addr := startProxy(t, s)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST http://sink.test:%s/up HTTP/1.1\r\nHost: sink.test:%s\r\nTransfer-Encoding: chunked\r\n\r\n", port, port)
	chunk := func() error { _, err := io.WriteString(c, "4\r\nabcd\r\n"); return err }
	// The proxy reads a body's first 64 KiB before it forwards the request (checkBodyStart).
	fmt.Fprintf(c, "%x\r\n%s\r\n", 70000, strings.Repeat("x", 70000))
	for got.Load() < 70008 {
		if err := chunk(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	denied.Store(true)
	if n := s.Recheck(context.Background(), func(string) bool { return true }); n != 1 {
		t.Fatalf("Recheck ended %d, want the upload", n)
	}
	at := got.Load()
	var werr error
	for i := 0; i < 200 && werr == nil; i++ {
		werr = chunk()
		time.Sleep(10 * time.Millisecond)
	}
	if werr == nil {
		t.Error("the upload went on after its host was refused")
	}
	if more := got.Load() - at; more > 64 {
		t.Errorf("the origin got %d more bytes after the upload was ended", more)
	}
}

// deniedLater is a proxy that allows everything, name on loopback, until denied is set.
func deniedLater(name string) (*Server, *atomic.Bool) {
	denied := &atomic.Bool{}
	return &Server{
		Decide: func(context.Context, Request) Verdict {
			if denied.Load() {
				return Verdict{Reason: "denied since"}
			}
			return Verdict{Allow: true}
		},
		AllowPrivate: loopback, Resolver: newResolver(name, "127.0.0.1"),
	}, denied
}
