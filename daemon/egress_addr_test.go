package daemon

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

// addrResolver answers NAME.test with 127.0.0.N for one, two and three, with the NAT64
// addresses carrying 1.2.3.4 and 1.2.3.5 for nat4 and nat5, and the 6to4 one of 1.2.3.4 for
// six4.
type addrResolver struct{}

func (addrResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if n := map[string]string{"one.test": "127.0.0.1", "two.test": "127.0.0.2", "three.test": "127.0.0.3",
		"nat4.test": "64:ff9b::102:304", "nat5.test": "64:ff9b::102:305", "six4.test": "2002:102:304::"}[host]; n != "" {
		return []netip.Addr{netip.MustParseAddr(n)}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// TestEgressAddressDeny: a deny naming an IP address holds a name that resolves to it, as it
// holds the address asked for by number: network.denied_domains' entry and a session's
// WebFetch deny rule alike, and so do the NAT64 addresses carrying it, while other names go
// through.
func TestEgressAddressDeny(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello\n") }))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	td := startDaemon(t, "network:\n  allow_private_cidrs: [127.0.0.0/8]\n  denied_domains: [127.0.0.2, 1.2.3.4]\n")
	td.d.core.egress.srv.Resolver = addrResolver{}
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions","network":"proxy","rules":{"allow":["WebFetch(domain:*)"],"deny":["WebFetch(domain:127.0.0.3)","WebFetch(domain:1.2.3.5)"]}}`, testHostDir(t)))
	for name, want := range map[string]string{
		"one.test":   "hello",
		"two.test":   "which is in network.denied_domains",
		"three.test": "resolves to 127.0.0.3",
		"nat4.test":  "(which carries 1.2.3.4), which is in network.denied_domains",
		"six4.test":  "(which carries 1.2.3.4), which is in network.denied_domains",
		"nat5.test":  "resolves to 64:ff9b::102:305 (which carries 1.2.3.5)",
	} {
		cmd := fmt.Sprintf("curl -s -m 5 http://%s:%d/", name, port)
		_, res := td.call(t, s.ID, "Bash", fmt.Sprintf(`{"command":%q}`, cmd))
		if out := fmt.Sprint(res.Data["stdout"]); !strings.Contains(out, want) {
			t.Errorf("%s: %q, want %q in it", cmd, out, want)
		}
	}
	denied := map[string]string{}
	for _, r := range auditRecords(t, td) {
		if r.Kind == "net.connect" && r.Detail["allowed"] == "false" {
			denied[r.Detail["host"]] = r.Detail["ip"]
		}
	}
	if denied["two.test"] != "127.0.0.2" || denied["three.test"] != "127.0.0.3" {
		t.Errorf("net.connect refusals by host, with the address: %v", denied)
	}
}
