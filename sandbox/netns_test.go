package sandbox

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// TestListenInSession: a listener the daemon opens in a session's namespace is what that
// session's programs reach on loopback, and nothing of the host's loopback is.
func TestListenInSession(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	l, err := s.ListenInSession("lis", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	host, err := net.Listen("tcp", "127.0.0.1:0") // on the host's loopback: out of reach
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.Write([]byte("from-daemon\n"))
	}()
	port := l.Addr().(*net.TCPAddr).Port
	hostPort := host.Addr().(*net.TCPAddr).Port
	script := fmt.Sprintf(`import socket
for p in (%d, %d):
    s = socket.socket()
    s.settimeout(3)
    try:
        s.connect(("127.0.0.1", p)); print("got", s.makefile().readline().strip())
    except OSError as e:
        print("refused", p)
`, port, hostPort)
	_, out, err := run(t, s, ctxTimeout(t, 20*time.Second), &Spec{Path: "/usr/bin/python3", Args: []string{"-c", script},
		Dir: "/", Env: []string{"PATH=/usr/bin:/bin"}, UID: nobody, GID: nobody, Session: "lis", Call: "c"})
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) != 2 || lines[0] != "got from-daemon" || lines[1] != fmt.Sprintf("refused %d", hostPort) {
		t.Fatalf("want the session's listener reached and the host's not:\n%s", out)
	}
}
