package egress

import (
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/sandboxd/sandboxd/internal/testutil"
)

func TestGuard(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		addr  string
		allow []netip.Prefix
		want  string // "" means public (dialable)
	}{
		{"93.184.216.34", nil, ""},
		{"2606:2800:220:1:248:1893:25c8:1946", nil, ""},
		{"8.8.8.8", nil, ""},
		{"127.0.0.1", nil, "loopback"},
		{"127.255.255.254", nil, "loopback"},
		{"127.0.0.1", loopback, ""},
		{"::1", nil, "loopback"},
		{"::1", loopback, "loopback"},
		{"0.0.0.0", nil, "unspecified"},
		{"::", nil, "unspecified"},
		{"10.0.0.1", nil, "private"},
		{"172.16.0.1", nil, "private"},
		{"172.31.255.255", nil, "private"},
		{"172.32.0.1", nil, ""},
		{"192.168.0.1", nil, "private"},
		{"100.64.0.1", nil, "CGNAT"},
		{"100.127.255.255", nil, "CGNAT"},
		{"100.128.0.1", nil, ""},
		{"169.254.1.1", nil, "link-local"},
		{"169.254.169.254", nil, "cloud metadata"},
		{"fd00:ec2::254", nil, "cloud metadata"},
		{"224.0.0.1", nil, "multicast"},
		{"255.255.255.255", nil, "broadcast"},
		{"198.18.0.1", nil, "benchmarking"},
		{"fe80::1", nil, "link-local"},
		{"fc00::1", nil, "unique local"},
		{"fd12:3456::1", nil, "unique local"},
		{"ff02::1", nil, "multicast"},
		{"::ffff:127.0.0.1", nil, "loopback"},
		{"::ffff:10.0.0.1", nil, "private"},
		{"::ffff:10.0.0.1", []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, ""},
		{"::ffff:8.8.8.8", nil, ""},
		{"::127.0.0.1", nil, "IPv4-compatible"},
		{"::ffff:0:7f00:1", nil, "IPv4-translated"},
		{"::ffff:0:808:808", nil, "IPv4-translated"},
		{"64:ff9b::7f00:1", nil, "NAT64 of a loopback"},
		{"64:ff9b::a9fe:a9fe", nil, "NAT64 of a cloud metadata"},
		{"64:ff9b::808:808", nil, ""},
		{"64:ff9b:1::1", nil, "NAT64"},
		{"2002:7f00:1::1", nil, "6to4 of a loopback"},
		{"2002:808:808::1", nil, ""},
		{"2001:0:4136:e378::1", nil, "Teredo"},
		{"10.1.2.3", []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}, ""},
		{"10.2.2.3", []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}, "private"},
		{"192.0.2.2", nil, "documentation"},
		{"198.51.100.1", nil, "documentation"},
		{"203.0.113.255", nil, "documentation"},
		{"::ffff:203.0.113.5", nil, "documentation"},
		{"192.88.99.1", nil, "6to4 relay anycast"},
		{"192.0.3.1", nil, ""},
		{"198.51.101.1", nil, ""},
		{"203.0.114.1", nil, ""},
		{"2001:db8::1", nil, "documentation"},
		{"2001:db8:ffff::1", nil, "documentation"},
		{"2001:db9::1", nil, ""},
		{"3fff::1", nil, "documentation"},
		{"3fff:fff::1", nil, "documentation"},
		{"3fff:1000::1", nil, ""},
		{"5f00::1", nil, "SRv6"},
		{"2001:2::1", nil, "benchmarking"},
		{"2001:10::1", nil, "ORCHID"},
		{"2001:20::1", nil, "ORCHIDv2"},
		{"2001:30::1", nil, "DRIP"},
		{"2001:40::1", nil, ""},
		{"100:0:0:1::1", nil, "dummy"},
		{"64:ff9b::c000:202", nil, "NAT64 of a documentation"},
		{"2002:cb00:7107::1", nil, "6to4 of a documentation"},
		{"2001:db8::1", []netip.Prefix{netip.MustParsePrefix("2001:db8::/32")}, ""},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			got := refusal(netip.MustParseAddr(tc.addr), tc.allow, &hostRoutes{})
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("refusal(%s) = %q, want %q", tc.addr, got, tc.want)
			}
		})
	}
}

func TestNormalizeHost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"Example.COM.", "example.com", true},
		{"a-b_c.example", "a-b_c.example", true},
		{"localhost", "localhost", true},
		{"[::1]", "::1", true},
		{"::FFFF:127.0.0.1", "127.0.0.1", true},
		{"127.0.0.1", "127.0.0.1", true},
		{"", "", false},
		{".", "", false},
		{"a..b", "", false},
		{"ex ample.com", "", false},
		{"exa/mple.com", "", false},
		{"user@example.com", "", false},
		{"127.1", "", false},
		{"2130706433", "", false},
		{"0x7f000001", "", false},
		{"0x7f.0x1", "", false},
		{"127.0.0.1.", "", false},
		{"fe80::1%eth0", "", false},
		{strings.Repeat("a", 64) + ".com", "", false},
		{strings.Repeat("a.", 127) + "com", "", false},
		{"cafe.de1x", "cafe.de1x", true},
		// A gateway turns these into the IPv4 address they carry, which rules name instead.
		{"64:ff9b::a9fe:a9fe", "", false},
		{"[64:ff9b::cb00:7107]", "", false},
		{"2002:cb00:7107::1", "", false},
		{"::a00:1", "", false},
		{"[::10.0.0.1]", "", false},
		{"::", "::", true},
		{"::ffff:203.0.113.7", "203.0.113.7", true},
		{"2001:4860::8888", "2001:4860::8888", true},
		{"bücher.example", "", false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, _, err := normalizeHost(tc.in)
			if (err == nil) != tc.ok || got != tc.want {
				t.Errorf("normalizeHost(%q) = %q, %v; want %q ok=%v", tc.in, got, err, tc.want, tc.ok)
			}
		})
	}
}

// TestRootedPath: the path reaches the rules as sent, only made absolute; dot segments are the
// matcher's to read (permission.MatchWeb).
func TestRootedPath(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                      "/",
		"/":                     "/",
		"a/b":                   "/a/b",
		"/a/b/":                 "/a/b/",
		"/a/../b":               "/a/../b",
		"/a/..;/../b":           "/a/..;/../b",
		"a//b":                  "/a//b",
		"/x/./git-receive-pack": "/x/./git-receive-pack",
	} {
		if got := RootedPath(in); got != want {
			t.Errorf("RootedPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestGuardHostRoutes: an address the kernel delivers to this host is refused however public
// it looks (the daemon dials from the host, where it reaches services bound to 0.0.0.0), by
// itself or carried in a NAT64 or 6to4 address, whether it is an interface's or inside a range
// routed `local`, unless allow_private_cidrs covers it. It runs in a network namespace of its
// own, where the test gives itself public-looking addresses.
func TestGuardHostRoutes(t *testing.T) {
	if !inOwnNetns(t, "^TestGuardHostRoutes$") {
		return
	}
	ip(t, "link", "set", "lo", "up")
	ip(t, "addr", "add", "93.184.216.34/32", "dev", "lo")
	// nodad: a tentative address (duplicate address detection, slower on a loaded host)
	// is not yet routed local.
	ip(t, "addr", "add", "2606:2800:220:1:248:1893:25c8:1946/128", "dev", "lo", "nodad")
	ip(t, "route", "add", "local", "45.33.0.0/24", "dev", "lo")
	pfx := func(s string) []netip.Prefix { return []netip.Prefix{netip.MustParsePrefix(s)} }
	started := &hostRoutes{}
	started.start(zaptest.NewLogger(t))
	defer started.stop()
	if !started.open {
		t.Fatal("the route socket did not open")
	}
	for name, h := range map[string]*hostRoutes{"one socket": started, "a socket per question": {}} {
		for _, tc := range []struct {
			addr  string
			allow []netip.Prefix
			want  string
		}{
			{"93.184.216.34", nil, "an address of this host"},
			{"::ffff:93.184.216.34", nil, "an address of this host"},
			{"2606:2800:220:1:248:1893:25c8:1946", nil, "an address of this host"},
			{"45.33.0.9", nil, "an address of this host"},
			{"64:ff9b::2d21:9", nil, "an address of this host"},   // NAT64 of 45.33.0.9
			{"2002:5db8:d822::1", nil, "an address of this host"}, // 6to4 of 93.184.216.34
			{"64:ff9b::5db8:d823", nil, ""},                       // NAT64 of a public address not here
			{"93.184.216.35", nil, ""},                            // no route at all here
			{"2606:2800:220:1:248:1893:25c8:1947", nil, ""},
			{"93.184.216.34", pfx("93.184.216.34/32"), ""},
			{"45.33.0.9", pfx("45.33.0.0/16"), ""},
			{"93.184.216.34", pfx("10.0.0.0/8"), "an address of this host"},
			{"127.0.0.1", nil, "a loopback address"},
			{"127.0.0.1", loopback, ""},
		} {
			if got := refusal(netip.MustParseAddr(tc.addr), tc.allow, h); got != tc.want {
				t.Errorf("%s: refusal(%s, %v) = %q, want %q", name, tc.addr, tc.allow, got, tc.want)
			}
		}
	}
	// The kernel is asked each time, so a change shows at once.
	h := &hostRoutes{}
	h.start(zaptest.NewLogger(t))
	defer h.stop()
	x := netip.MustParseAddr("198.51.100.7")
	if own, err := h.isLocal(x); own || err != nil {
		t.Fatalf("isLocal(%s) before it is added = %v, %v", x, own, err)
	}
	ip(t, "addr", "add", "198.51.100.7/32", "dev", "lo")
	if own, err := h.isLocal(x); !own || err != nil {
		t.Errorf("isLocal(%s) once added = %v, %v", x, own, err)
	}
	ip(t, "addr", "del", "198.51.100.7/32", "dev", "lo")
	if own, err := h.isLocal(x); own || err != nil {
		t.Errorf("isLocal(%s) once removed = %v, %v", x, own, err)
	}
}

// nonLoopbackAddr is one address of this machine's interfaces that is not loopback.
func nonLoopbackAddr(t *testing.T) netip.Addr {
	t.Helper()
	as, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() {
			if x, ok := netip.AddrFromSlice(n.IP); ok {
				return x.Unmap()
			}
		}
	}
	t.Skip("this machine has no interface address but loopback, so none to check the guard with")
	return netip.Addr{}
}

// TestGuardRealHostAddr: an address of one of this machine's interfaces is local to the guard
// in the namespace tests run in, and a public one elsewhere is not.
func TestGuardRealHostAddr(t *testing.T) {
	t.Parallel()
	a := nonLoopbackAddr(t)
	h := &hostRoutes{}
	if own, err := h.isLocal(a); !own || err != nil {
		t.Errorf("isLocal(%s) = %v, %v; want true", a, own, err)
	}
	if own, err := h.isLocal(netip.MustParseAddr("93.184.216.34")); own || err != nil {
		t.Errorf("isLocal(93.184.216.34) = %v, %v; want false", own, err)
	}
	if w := refusal(a, nil, h); w == "" {
		t.Errorf("%s, this host's own, is not refused", a)
	}
	if w := refusal(a, []netip.Prefix{netip.PrefixFrom(a, a.BitLen())}, h); w != "" {
		t.Errorf("%s refused although a CIDR covers it: %s", a, w)
	}
}

// inOwnNetns runs the test named by run again in a network namespace of its own (the test
// binary under unshare -n) and reports false, or reports true when it is that run.
func inOwnNetns(t *testing.T, run string) bool {
	t.Helper()
	const inNetns = "SANDBOXD_EGRESS_TEST_NETNS"
	if os.Getenv(inNetns) != "" {
		return true
	}
	testutil.RequireRoot(t)
	for _, tool := range []string{"unshare", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s: %v", tool, err)
		}
	}
	cmd := exec.Command("unshare", "--net", os.Args[0], "-test.run="+run, "-test.v")
	cmd.Env = append(os.Environ(), inNetns+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("in a network namespace of its own: %v\n%s", err, out)
	}
	return false
}

func ip(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %v: %v %s", args, err, out)
	}
}

// BenchmarkRefusalPublic is the guard's cost for a public address, the kernel asked through
// the socket start opens.
func BenchmarkRefusalPublic(b *testing.B) {
	h := &hostRoutes{}
	h.start(zaptest.NewLogger(b))
	defer h.stop()
	a := netip.MustParseAddr("93.184.216.34")
	for b.Loop() {
		if w := refusal(a, nil, h); w != "" {
			b.Fatal(w)
		}
	}
}
