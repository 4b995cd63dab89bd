package daemon

import (
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// TestReloadEndsDeniedTunnels: a tunnel is decided when it opens. A reload that denies its host
// (network.denied_domains) ends a tunnel a session's program holds open, while the program
// runs on; its net.connect record says why.
func TestReloadEndsDeniedTunnels(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	td := startDaemon(t, "network:\n  allow_private_cidrs: [127.0.0.0/8]\n")
	td.d.core.egress.srv.Resolver = testResolver{}
	dir := testHostDir(t)
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions","network":"proxy","rules":{"allow":["WebFetch(domain:echo.test)"]}}`, dir))
	// Through the tunnel a line every 50 ms, for up to 20 s; it says how the tunnel ended.
	script := fmt.Sprintf(`
import os, socket, time, urllib.parse
p = urllib.parse.urlparse(os.environ["HTTP_PROXY"])
c = socket.create_connection((p.hostname, p.port))
c.sendall(b"CONNECT echo.test:%d HTTP/1.1\r\nHost: echo.test:%d\r\n\r\n")
head = b""
while b"\r\n\r\n" not in head:
    head += c.recv(1)
print(head.split(b"\r\n")[0].decode(), flush=True)
try:
    for i in range(400):
        c.sendall(b"\x01line\n")
        if not c.recv(64):
            raise EOFError
        time.sleep(0.05)
    print("still open", flush=True)
except Exception as e:
    print("tunnel ended", flush=True)
time.sleep(1)
print("program ran on", flush=True)
`, port, port)
	if err := os.WriteFile(dir+"/tunnel.py", []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan string, 1)
	go func() {
		_, res := td.call(t, s.ID, "Bash", `{"command":"python3 tunnel.py","timeout":60000}`)
		done <- fmt.Sprint(res.Data["stdout"]) + fmt.Sprint(res.Data["stderr"])
	}()
	waitFor(t, func() bool {
		for _, r := range auditRecords(t, td) {
			if r.Kind == "net.connect" && r.Session == s.ID && r.Detail["allowed"] == "true" {
				return true
			}
		}
		return false
	})
	time.Sleep(200 * time.Millisecond)
	cfgPath := td.d.opts.ConfigPath
	orig, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	denying := strings.Replace(string(orig), "allow_private_cidrs: [127.0.0.0/8]", "allow_private_cidrs: [127.0.0.0/8]\n  denied_domains: [echo.test]", 1)
	if err := os.WriteFile(cfgPath, []byte(denying), 0o600); err != nil {
		t.Fatal(err)
	}
	td.d.Reload()
	var out string
	select {
	case out = <-done:
	case <-time.After(40 * time.Second):
		t.Fatal("the call did not end")
	}
	if !strings.Contains(out, "200") || !strings.Contains(out, "tunnel ended") || !strings.Contains(out, "program ran on") {
		t.Errorf("a tunnel to a host a reload denied: %q, want it ended and the program running on", out)
	}
	ended := false
	for _, r := range auditRecords(t, td) {
		if r.Kind == "net.connect" && r.Session == s.ID && r.Detail["allowed"] == "false" && strings.Contains(r.Detail["reason"], "open tunnel was ended") {
			ended = true
		}
	}
	if !ended {
		t.Error("no net.connect record of the ended tunnel")
	}
}
