package daemon

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/protocol"
)

// testResolver answers every *.test name with 127.0.0.1, where the test's servers are: a
// registry and a git server that only exist on this machine.
type testResolver struct{}

func (testResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if strings.HasSuffix(host, ".test") {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// TestEgressProxy: a session in network mode proxy reaches an allowed name through the
// daemon's proxy with curl, python and git, and nothing else: a name no rule allows, an IP
// literal, a deny that beats an allow, a direct connection, a name that resolves to loopback
// without allow_private_cidrs. Every decision is in the audit log.
func TestEgressProxy(t *testing.T) {
	// A registry and a dumb-HTTP git server on the host's loopback.
	bare := filepath.Join(testHostDir(t), "repo.git")
	work := filepath.Join(testHostDir(t), "w")
	for _, args := range [][]string{
		{"init", "-q", "--bare", bare}, {"init", "-q", work},
		{"-C", work, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-q", "--allow-empty", "-m", "first"},
		{"-C", work, "push", "-q", bare, "HEAD:refs/heads/main"}, {"-C", bare, "symbolic-ref", "HEAD", "refs/heads/main"},
		{"-C", bare, "update-server-info"},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello from the registry\n") })
	mux.Handle("/repo.git/", http.StripPrefix("/repo.git/", http.FileServer(http.Dir(bare))))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port

	td := startDaemon(t, "network:\n  allow_private_cidrs: [127.0.0.0/8]\n  denied_domains: [blocked.test]\n")
	td.d.core.egress.srv.Resolver = testResolver{}
	dir := testHostDir(t)
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions","network":"proxy","rules":{"allow":["WebFetch(domain:registry.test)","WebFetch(domain:blocked.test)"],"deny":["WebFetch(domain:evil.registry.test)"]}}`, dir))
	if s.Network != "proxy" {
		t.Fatalf("session network %q", s.Network)
	}
	run := func(cmd string) string {
		t.Helper()
		_, res := td.call(t, s.ID, "Bash", fmt.Sprintf(`{"command":%q}`, cmd))
		return fmt.Sprint(res.Data["stdout"]) + fmt.Sprint(res.Data["stderr"])
	}
	url := fmt.Sprintf("http://registry.test:%d/hello", port)
	for name, tc := range map[string]struct{ cmd, want string }{
		"curl allowed":       {"curl -s " + url, "hello from the registry"},
		"python allowed":     {fmt.Sprintf(`python3 -c 'import urllib.request; print(urllib.request.urlopen(%q).read().decode())'`, url), "hello from the registry"},
		"git clone allowed":  {fmt.Sprintf("git clone -q http://registry.test:%d/repo.git c && git -C c log --oneline | wc -l", port), "1"},
		"name not allowed":   {fmt.Sprintf("curl -s http://other.test:%d/hello", port), "Do not retry"},
		"deny beats allow":   {fmt.Sprintf("curl -s http://evil.registry.test:%d/hello", port), "Do not retry"},
		"config deny wins":   {fmt.Sprintf("curl -s http://blocked.test:%d/hello", port), "network.denied_domains"},
		"ip literal refused": {fmt.Sprintf("curl -s -x $HTTP_PROXY --noproxy '' http://127.0.0.1:%d/hello", port), "Do not retry"},
		"direct refused":     {fmt.Sprintf("curl -s --noproxy '*' -m 5 http://127.0.0.1:%d/hello; echo rc=$?", port), "rc=7"},
		"https by host":      {fmt.Sprintf("curl -s -m 5 https://nothere.test:%d/ ; echo rc=$?", port), "rc=56"},
	} {
		t.Run(name, func(t *testing.T) {
			if out := run(tc.cmd); !strings.Contains(out, tc.want) {
				t.Errorf("%s: got %q, want %q in it", tc.cmd, out, tc.want)
			}
		})
	}
	// A session in network none has no proxy and no route.
	none := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions"}`, dir))
	_, res := td.call(t, none.ID, "Bash", fmt.Sprintf(`{"command":"curl -s -m 5 %s; echo rc=$?; env | grep -ci proxy"}`, url))
	if out := fmt.Sprint(res.Data["stdout"]); !strings.Contains(out, "rc=") || strings.Contains(out, "hello") || !strings.HasSuffix(strings.TrimSpace(out), "0") {
		t.Errorf("a session without egress reached the registry or got proxy settings: %q", out)
	}
	// Every decision is audited, with the host and the verdict.
	var allowed, denied int
	for _, r := range auditRecords(t, td) {
		if r.Kind != "net.connect" || r.Session != s.ID {
			continue
		}
		if r.Detail["allowed"] == "true" && r.Detail["host"] == "registry.test" && r.Detail["ip"] == "127.0.0.1" {
			allowed++
		}
		if r.Detail["allowed"] == "false" && r.Detail["reason"] != "" {
			denied++
		}
	}
	if allowed < 3 || denied < 4 {
		t.Errorf("net.connect records: %d allowed, %d denied", allowed, denied)
	}
}

// TestEgressPrivateGuard: without allow_private_cidrs, an allowed name that resolves to a
// loopback address is refused (the DNS-rebinding guard), and host mode is only for those the
// configuration permits.
func TestEgressPrivateGuard(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "inside\n") }))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	td := startDaemon(t, "network:\n  mode: proxy\n")
	td.d.core.egress.srv.Resolver = testResolver{}
	dir := testHostDir(t)
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions","rules":{"allow":["WebFetch(domain:*)"]}}`, dir))
	_, res := td.call(t, s.ID, "Bash", fmt.Sprintf(`{"command":"curl -s http://rebind.test:%d/"}`, port))
	if out := fmt.Sprint(res.Data["stdout"]); strings.Contains(out, "inside") || !strings.Contains(out, "loopback") {
		t.Errorf("a name resolving to loopback was reached: %q", out)
	}
	if s.Network != "proxy" {
		t.Errorf("network.mode proxy is not the default: %q", s.Network)
	}
	// Root may pick host; a child never exceeds its parent.
	host := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"network":"host"}`, dir))
	code, b := td.do(t, "POST", "/v1/sessions", fmt.Sprintf(`{"cwd":%q,"parent_id":%q,"network":"host"}`, dir, s.ID))
	if code == http.StatusCreated {
		t.Errorf("a child of a proxied session got the host's network: %s", b)
	}
	var hs protocol.Session
	_, b = td.do(t, "GET", "/v1/sessions/"+host.ID, "")
	if decodeInto(t, b, &hs); hs.Network != "host" {
		t.Errorf("root's host session: %+v", hs)
	}
}
