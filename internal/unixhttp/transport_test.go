package unixhttp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// serve runs h on a new socket and counts the connections the server accepted.
func serve(t *testing.T, h http.HandlerFunc) (string, *atomic.Int64) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var conns atomic.Int64
	srv := &http.Server{Handler: h, ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return sock, &conns
}

func echo(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.Path, b)
}

func post(t *testing.T, c *http.Client, ctx context.Context, body string) (string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://sandboxd/x", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func TestKeepsOneConnection(t *testing.T) {
	sock, conns := serve(t, echo)
	c := &http.Client{Transport: New(sock, 4)}
	for i := 0; i < 5; i++ {
		got, err := post(t, c, context.Background(), fmt.Sprint("body", i))
		if want := fmt.Sprint("POST /x body", i); err != nil || got != want {
			t.Fatalf("request %d: %q, %v; want %q", i, got, err, want)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections for 5 sequential requests, want 1", n)
	}
}

// TestDaemonClosedIdleConnection: a connection the daemon closed while it sat idle is noticed
// before a request is written on it; the request goes on a new one.
func TestDaemonClosedIdleConnection(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var requests atomic.Int64
	go func() {
		for {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			// One request and answer per connection, without saying so: keep-alive as far as
			// the client knows, then closed as if by the daemon's idle timeout.
			req, err := http.ReadRequest(bufio.NewReader(nc))
			if err == nil {
				b, _ := io.ReadAll(req.Body)
				requests.Add(1)
				fmt.Fprintf(nc, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(b), b)
			}
			time.Sleep(10 * time.Millisecond)
			nc.Close()
		}
	}()
	c := &http.Client{Transport: New(sock, 4)}
	for i := 0; i < 3; i++ {
		time.Sleep(30 * time.Millisecond)
		if got, err := post(t, c, context.Background(), fmt.Sprint("b", i)); err != nil || got != fmt.Sprint("b", i) {
			t.Fatalf("request %d: %q, %v", i, got, err)
		}
	}
	if n := requests.Load(); n != 3 {
		t.Errorf("daemon saw %d requests, want 3", n)
	}
}

// TestNoResendAfterWrite: a request that reached the daemon is never sent again, even when the
// connection then closes without an answer: the daemon may have run the call.
func TestNoResendAfterWrite(t *testing.T) {
	var requests atomic.Int64
	sock, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) == 1 {
			fmt.Fprint(w, "first")
			return
		}
		panic(http.ErrAbortHandler) // closes the connection without an answer
	})
	c := &http.Client{Transport: New(sock, 4)}
	if _, err := post(t, c, context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	if got, err := post(t, c, context.Background(), "b"); err == nil {
		t.Fatalf("no error for an unanswered request, got %q", got)
	}
	if n := requests.Load(); n != 2 {
		t.Errorf("daemon saw %d requests, want 2 (the unanswered one exactly once)", n)
	}
}

func TestCancelInterruptsWaitAndBody(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	sock, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/body" {
			fmt.Fprint(w, "partial")
			w.(http.Flusher).Flush()
		}
		<-release
	})
	c := &http.Client{Transport: New(sock, 4)}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := post(t, c, ctx, "x"); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 3*time.Second {
		t.Errorf("waiting for an answer: %v after %v, want the deadline at 100 ms", err, time.Since(start))
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx2, http.MethodGet, "http://sandboxd/body", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(50*time.Millisecond, cancel2)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !errors.Is(err, context.Canceled) || string(b) != "partial" {
		t.Errorf("reading a body past a cancel: %q, %v; want the part sent, then context.Canceled", b, err)
	}
}

// TestUnreadBodyDropsConnection: a response not read to its end leaves bytes on its
// connection, so the connection is not used again.
func TestUnreadBodyDropsConnection(t *testing.T) {
	sock, conns := serve(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, strings.Repeat("x", 100000))
	})
	c := &http.Client{Transport: New(sock, 4)}
	for i := 0; i < 2; i++ {
		req, _ := http.NewRequest(http.MethodGet, "http://sandboxd/", nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Read(make([]byte, 10))
		resp.Body.Close()
	}
	if got, err := post(t, c, context.Background(), ""); err != nil || len(got) != 100000 {
		t.Fatalf("after unread bodies: %d bytes, %v", len(got), err)
	}
	if n := conns.Load(); n != 3 {
		t.Errorf("%d connections, want 3 (none reused after an unread body)", n)
	}
}

func TestConnectionCloseIsHonoured(t *testing.T) {
	sock, conns := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		echo(w, r)
	})
	c := &http.Client{Transport: New(sock, 4)}
	for i := 0; i < 3; i++ {
		if _, err := post(t, c, context.Background(), "x"); err != nil {
			t.Fatal(err)
		}
	}
	if n := conns.Load(); n != 3 {
		t.Errorf("%d connections, want 3", n)
	}
}

func TestConcurrentRequests(t *testing.T) {
	sock, conns := serve(t, echo)
	// Room for every client's connection when idle: with fewer, one put back over the limit is
	// closed and a later request rightly dials again, so the count below would say nothing.
	tr := New(sock, 20)
	c := &http.Client{Transport: tr}
	var wg sync.WaitGroup
	errs := make(chan error, 400)
	for g := 0; g < 20; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				body := fmt.Sprintf("g%d-%d", g, i)
				if got, err := post(t, c, context.Background(), body); err != nil || got != "POST /x "+body {
					errs <- fmt.Errorf("%s: %q, %v", body, got, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := conns.Load(); n > 20 {
		t.Errorf("%d connections for 20 concurrent clients", n)
	}
	tr.CloseIdleConnections()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.idle) != 0 {
		t.Errorf("%d idle connections after CloseIdleConnections", len(tr.idle))
	}
}

func TestDialErrorNamesTheSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "missing.sock")
	_, err := post(t, &http.Client{Transport: New(sock, 1)}, context.Background(), "x")
	var ne *net.OpError
	if !errors.As(err, &ne) || ne.Op != "dial" || !strings.Contains(err.Error(), sock) {
		t.Errorf("dial error %v, want a *net.OpError naming %s", err, sock)
	}
}

// TestEarlyAnswerToALargeBody: the daemon answers a body over its limit before reading it all
// and closes the connection; the answer (413 and why) reaches the caller, not a broken pipe.
func TestEarlyAnswerToALargeBody(t *testing.T) {
	sock, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 1024)
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, "request body is larger than the limit", http.StatusRequestEntityTooLarge)
			return
		}
		fmt.Fprint(w, "small")
	})
	c := &http.Client{Transport: New(sock, 4)}
	req, _ := http.NewRequest(http.MethodPost, "http://sandboxd/x", strings.NewReader(strings.Repeat("x", 16<<20)))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("a body over the limit: %v, want the daemon's 413", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "larger than the limit") {
		t.Fatalf("HTTP %d %q, want 413 and its message", resp.StatusCode, b)
	}
	if got, err := post(t, c, context.Background(), "after"); err != nil || got != "small" {
		t.Fatalf("the next request: %q, %v", got, err)
	}
}
