package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// serveCounting runs h on a new socket and counts the connections the server accepted.
func serveCounting(t *testing.T, h http.HandlerFunc) (string, *atomic.Int64) {
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

// serveRaw answers each connection with handle, below HTTP: for answers net/http's server
// would never give.
func serveRaw(t *testing.T, handle func(nc net.Conn, req *http.Request)) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			if req, err := http.ReadRequest(bufio.NewReader(nc)); err == nil {
				handle(nc, req)
			}
			nc.Close()
		}
	}()
	return sock
}

func echo(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.Path, b)
}

// post sends body to /x and returns the answer's body read to its end.
func post(c *Client, ctx context.Context, body string) (string, error) {
	resp, err := c.Open(ctx, MethodPost, "/x", json.RawMessage(body), "")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func keepAlive(sock string, n int) *Client { return NewWith(sock, Options{KeepAlive: n}) }

func TestKeepsOneConnection(t *testing.T) {
	t.Parallel()
	sock, conns := serveCounting(t, echo)
	c := keepAlive(sock, 4)
	for i := 0; i < 5; i++ {
		got, err := post(c, context.Background(), fmt.Sprint("body", i))
		if want := fmt.Sprint("POST /x body", i); err != nil || got != want {
			t.Fatalf("request %d: %q, %v; want %q", i, got, err, want)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections for 5 sequential requests, want 1", n)
	}
}

// TestNoContent: a 204 has no body whatever its headers say; the connection is kept.
func TestNoContent(t *testing.T) {
	t.Parallel()
	sock, conns := serveCounting(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == MethodDelete {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		echo(w, r)
	})
	c := NewWith(sock, Options{KeepAlive: 1, Timeout: 5 * time.Second})
	for i := 0; i < 2; i++ {
		if status, err := c.Send(context.Background(), MethodDelete, "/x", nil, nil); status != http.StatusNoContent || err != nil {
			t.Fatalf("DELETE: HTTP %d, %v", status, err)
		}
	}
	if got, err := post(c, context.Background(), "after"); err != nil || got != "POST /x after" {
		t.Fatalf("after two 204s: %q, %v", got, err)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

func TestWithoutKeepAliveEachRequestCloses(t *testing.T) {
	t.Parallel()
	sock, conns := serveCounting(t, echo)
	c := New(sock)
	for i := 0; i < 3; i++ {
		if _, err := post(c, context.Background(), "x"); err != nil {
			t.Fatal(err)
		}
	}
	if n := conns.Load(); n != 3 {
		t.Errorf("%d connections, want 3", n)
	}
}

// TestDaemonClosedIdleConnection: a connection the daemon closed while it sat idle is noticed
// before a request is written on it; the request goes on a new one.
func TestDaemonClosedIdleConnection(t *testing.T) {
	t.Parallel()
	var requests atomic.Int64
	closed := make(chan struct{}, 4)
	// One request and answer per connection, without saying so: keep-alive as far as the
	// client knows, then closed as if by the daemon's idle timeout. The next request waits
	// for the close (a sleep raced it on a loaded machine: the close came after the write).
	sock := serveRaw(t, func(nc net.Conn, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		requests.Add(1)
		fmt.Fprintf(nc, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(b), b)
		nc.Close()
		closed <- struct{}{}
	})
	c := keepAlive(sock, 4)
	for i := 0; i < 3; i++ {
		if i > 0 {
			select {
			case <-closed:
			case <-time.After(10 * time.Second):
				t.Fatal("the server did not close the connection")
			}
		}
		if got, err := post(c, context.Background(), fmt.Sprint("b", i)); err != nil || got != fmt.Sprint("b", i) {
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
	t.Parallel()
	var requests atomic.Int64
	sock, _ := serveCounting(t, func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) == 1 {
			fmt.Fprint(w, "first")
			return
		}
		panic(http.ErrAbortHandler) // closes the connection without an answer
	})
	c := keepAlive(sock, 4)
	if _, err := post(c, context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	if got, err := post(c, context.Background(), "b"); err == nil || !NoAnswer(err) {
		t.Fatalf("unanswered request: %q, %v; want a no-answer error", got, err)
	}
	if n := requests.Load(); n != 2 {
		t.Errorf("daemon saw %d requests, want 2 (the unanswered one exactly once)", n)
	}
}

func TestCancelInterruptsWaitAndBody(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	defer close(release)
	sock, _ := serveCounting(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/body" {
			fmt.Fprint(w, "partial")
			w.(http.Flusher).Flush()
		}
		<-release
	})
	c := keepAlive(sock, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := post(c, ctx, "x"); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 3*time.Second {
		t.Errorf("waiting for an answer: %v after %v, want the deadline at 100 ms", err, time.Since(start))
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	resp, err := c.Open(ctx2, MethodGet, "/body", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(50*time.Millisecond, cancel2)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !errors.Is(err, context.Canceled) || !strings.Contains(string(b), "partial") {
		t.Errorf("reading a body past a cancel: %q, %v; want the part sent, then context.Canceled", b, err)
	}
}

// TestOptionsTimeout bounds a request made through Do, the wait for its answer included.
func TestOptionsTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	defer close(release)
	sock, _ := serveCounting(t, func(w http.ResponseWriter, r *http.Request) { <-release })
	c := NewWith(sock, Options{KeepAlive: 1, Timeout: 100 * time.Millisecond})
	start := time.Now()
	if err := c.Do(context.Background(), MethodGet, "/", nil, nil); !errors.Is(err, context.DeadlineExceeded) || !NoAnswer(err) {
		t.Errorf("a request past its timeout: %v after %v", err, time.Since(start))
	}
}

// TestUnreadBodyDropsConnection: a response not read to its end leaves bytes on its
// connection, so the connection is not used again.
func TestUnreadBodyDropsConnection(t *testing.T) {
	t.Parallel()
	sock, conns := serveCounting(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, strings.Repeat("x", 100000))
	})
	c := keepAlive(sock, 4)
	for i := 0; i < 2; i++ {
		resp, err := c.Open(context.Background(), MethodGet, "/", nil, "")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Read(make([]byte, 10))
		resp.Body.Close()
	}
	if got, err := post(c, context.Background(), ""); err != nil || len(got) != 100000 {
		t.Fatalf("after unread bodies: %d bytes, %v", len(got), err)
	}
	if n := conns.Load(); n != 3 {
		t.Errorf("%d connections, want 3 (none reused after an unread body)", n)
	}
}

// TestShortBodyIsAnError: a connection that ends before the Content-Length is a broken
// answer, never a short one taken as whole.
func TestShortBodyIsAnError(t *testing.T) {
	t.Parallel()
	sock := serveRaw(t, func(nc net.Conn, _ *http.Request) {
		fmt.Fprint(nc, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"status\":")
	})
	var out map[string]any
	if err := keepAlive(sock, 1).Do(context.Background(), MethodGet, "/", nil, &out); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a body cut short: %v, want io.ErrUnexpectedEOF", err)
	}
}

func TestConnectionCloseIsHonoured(t *testing.T) {
	t.Parallel()
	sock, conns := serveCounting(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		echo(w, r)
	})
	c := keepAlive(sock, 4)
	for i := 0; i < 3; i++ {
		if _, err := post(c, context.Background(), "x"); err != nil {
			t.Fatal(err)
		}
	}
	if n := conns.Load(); n != 3 {
		t.Errorf("%d connections, want 3", n)
	}
}

func TestConcurrentRequests(t *testing.T) {
	t.Parallel()
	sock, conns := serveCounting(t, echo)
	// Room for every client's connection when idle: with fewer, one put back over the limit is
	// closed and a later request rightly dials again, so the count below would say nothing.
	c := keepAlive(sock, 20)
	var wg sync.WaitGroup
	errs := make(chan error, 400)
	for g := 0; g < 20; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				body := fmt.Sprintf("g%d-%d", g, i)
				if got, err := post(c, context.Background(), body); err != nil || got != "POST /x "+body {
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
	c.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.idle) != 0 {
		t.Errorf("%d idle connections after Close", len(c.idle))
	}
}

// TestDial: a client dials through Options.Dial, and a failure there is ErrUnavailable.
func TestDial(t *testing.T) {
	t.Parallel()
	sock, _ := serveCounting(t, echo)
	var dials atomic.Int64
	c := NewWith("elsewhere", Options{KeepAlive: 1, Dial: func(ctx context.Context) (Conn, error) {
		dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}})
	if got, err := post(c, context.Background(), "via dial"); err != nil || got != "POST /x via dial" || dials.Load() != 1 {
		t.Errorf("through Dial: %q, %v, %d dials", got, err, dials.Load())
	}
	broken := NewWith("elsewhere", Options{Dial: func(context.Context) (Conn, error) { return nil, errors.New("refused") }})
	if _, err := post(broken, context.Background(), "x"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("a failed dial: %v, want ErrUnavailable", err)
	}
}

// TestEarlyAnswerToALargeBody: the daemon answers a body over its limit before reading it all
// and closes the connection; the answer (413 and why) reaches the caller, not a broken pipe.
func TestEarlyAnswerToALargeBody(t *testing.T) {
	t.Parallel()
	sock, _ := serveCounting(t, func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 1024)
		if _, err := io.ReadAll(r.Body); err != nil {
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			fmt.Fprint(w, `{"error":{"class":"too_large","message":"request body is larger than the limit"}}`)
			return
		}
		fmt.Fprint(w, `"small"`)
	})
	c := keepAlive(sock, 4)
	big := json.RawMessage(`"` + strings.Repeat("x", 16<<20) + `"`)
	status, err := c.Send(context.Background(), MethodPost, "/x", big, nil)
	var ae *APIError
	if status != http.StatusRequestEntityTooLarge || !errors.As(err, &ae) || !strings.Contains(ae.Detail.Message, "larger than the limit") {
		t.Fatalf("a body over the limit: HTTP %d, %v; want the daemon's 413 and its message", status, err)
	}
	var got string
	if err := c.Do(context.Background(), MethodPost, "/x", json.RawMessage(`"after"`), &got); err != nil || got != "small" {
		t.Fatalf("the next request: %q, %v", got, err)
	}
}

// TestRefusesAnotherUsersServer: a socket another user serves (one bound in a shared
// directory while the daemon is down) gets no request: the dial fails, naming the uid.
func TestRefusesAnotherUsersServer(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: serves a socket as another user (nobody)")
	}
	dir, err := os.MkdirTemp("", "sbclient-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "s.sock")
	// nobody's server: any request it gets, it records in the file next to its socket.
	script := `import socket,sys
s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(4); print("ready", flush=True)
while True:
    c,_=s.accept(); d=c.recv(65536)
    if d: open(sys.argv[1]+".got","wb").write(d)
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"); c.close()
`
	cmd := exec.Command("/usr/bin/python3", "-c", script, sock)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start a server as nobody: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || !strings.HasPrefix(line, "ready") {
		t.Fatalf("nobody's server did not start: %q %v", line, err)
	}
	c := New(sock)
	var v map[string]any
	_, err = c.Send(context.Background(), MethodGet, "/v1/status", nil, &v)
	if err == nil || !strings.Contains(err.Error(), "served by uid 65534") {
		t.Errorf("a request to nobody's socket: %v, want a refusal naming uid 65534", err)
	}
	if _, err := os.Stat(sock + ".got"); err == nil {
		t.Error("nobody's server received the request")
	}
}
