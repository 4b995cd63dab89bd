package egress

import (
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/sandboxd/sandboxd/internal/testutil"
)

// knownHostAddrs is a hostAddrs whose snapshot is addrs, for tests that must not depend on the
// machine's interfaces.
func knownHostAddrs(addrs ...string) *hostAddrs {
	m := addrSet{}
	for _, a := range addrs {
		m[netip.MustParseAddr(a)] = struct{}{}
	}
	h := &hostAddrs{}
	h.set.Store(&m)
	return h
}

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
			got := refusal(netip.MustParseAddr(tc.addr), tc.allow, knownHostAddrs())
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

// TestGuardHostAddrs: an address of the host's own interfaces is refused however public it
// looks (the daemon dials from the host, where it reaches services bound to 0.0.0.0), unless
// allow_private_cidrs covers it.
func TestGuardHostAddrs(t *testing.T) {
	t.Parallel()
	own := knownHostAddrs("93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946", "127.0.0.1")
	pfx := func(s string) []netip.Prefix { return []netip.Prefix{netip.MustParsePrefix(s)} }
	for _, tc := range []struct {
		addr  string
		allow []netip.Prefix
		want  string
	}{
		{"93.184.216.34", nil, "an address of this host"},
		{"::ffff:93.184.216.34", nil, "an address of this host"},
		{"2606:2800:220:1:248:1893:25c8:1946", nil, "an address of this host"},
		{"93.184.216.35", nil, ""},
		{"93.184.216.34", pfx("93.184.216.34/32"), ""},
		{"93.184.216.34", pfx("93.184.216.0/24"), ""},
		{"93.184.216.34", pfx("10.0.0.0/8"), "an address of this host"},
		{"127.0.0.1", nil, "a loopback address"},
		{"127.0.0.1", loopback, ""},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			if got := refusal(netip.MustParseAddr(tc.addr), tc.allow, own); got != tc.want {
				t.Errorf("refusal(%s, %v) = %q, want %q", tc.addr, tc.allow, got, tc.want)
			}
		})
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

// TestGuardRealHostAddr: an address of one of this machine's interfaces is known to the guard,
// from the kernel's notifications and by listing them per question alike, and is refused
// unless a CIDR covers it.
func TestGuardRealHostAddr(t *testing.T) {
	t.Parallel()
	a := nonLoopbackAddr(t)
	watched := &hostAddrs{}
	watched.start(zaptest.NewLogger(t))
	defer watched.stop()
	if watched.set.Load() == nil {
		t.Fatal("no snapshot after start: the subscription to address changes failed")
	}
	for name, h := range map[string]*hostAddrs{"watched": watched, "listed per question": {}} {
		if own, err := h.has(a); !own || err != nil {
			t.Errorf("%s: has(%s) = %v, %v; want true", name, a, own, err)
		}
		if own, err := h.has(netip.MustParseAddr("93.184.216.34")); own || err != nil {
			t.Errorf("%s: has(93.184.216.34) = %v, %v; want false", name, own, err)
		}
		if w := refusal(a, nil, h); w == "" {
			t.Errorf("%s: %s, this host's own, is not refused", name, a)
		}
		if w := refusal(a, []netip.Prefix{netip.PrefixFrom(a, a.BitLen())}, h); w != "" {
			t.Errorf("%s: %s refused although a CIDR covers it: %s", name, a, w)
		}
	}
}

// TestHostAddrsWatch: each notification replaces the snapshot; when notifications stop
// coming (the subscription fails), the snapshot goes and every question lists the addresses,
// so the guard never answers from a stale one.
func TestHostAddrsWatch(t *testing.T) {
	t.Parallel()
	a := nonLoopbackAddr(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	h := &hostAddrs{}
	h.watch(r, zaptest.NewLogger(t))
	defer h.stop()
	if m := h.set.Load(); m == nil || !hasKey(*m, a) {
		t.Fatalf("the first snapshot lacks %s", a)
	}
	h.set.Store(&addrSet{}) // a stale snapshot; the next notification must replace it
	if _, err := w.Write([]byte{0}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the snapshot refreshed on a notification", func() bool { m := h.set.Load(); return m != nil && hasKey(*m, a) })
	w.Close() // the subscription ends
	<-h.done
	if h.set.Load() != nil {
		t.Error("a snapshot is kept after the watch ended")
	}
	if own, err := h.has(a); !own || err != nil {
		t.Errorf("has(%s) without a snapshot = %v, %v; want true", a, own, err)
	}
}

func hasKey(m addrSet, a netip.Addr) bool { _, ok := m[a]; return ok }

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestHostAddrsFollowKernel: the snapshot follows the kernel as addresses come and go, with no
// listing but the one each notification brings. It runs in a network namespace of its own
// (the test binary again under unshare -n), so the host's interfaces are left alone.
func TestHostAddrsFollowKernel(t *testing.T) {
	const inNetns = "SANDBOXD_EGRESS_TEST_NETNS"
	if os.Getenv(inNetns) == "" {
		testutil.RequireRoot(t)
		for _, tool := range []string{"unshare", "ip"} {
			if _, err := exec.LookPath(tool); err != nil {
				t.Skipf("needs %s: %v", tool, err)
			}
		}
		cmd := exec.Command("unshare", "--net", os.Args[0], "-test.run=^TestHostAddrsFollowKernel$", "-test.v")
		cmd.Env = append(os.Environ(), inNetns+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestHostAddrsFollowKernel") {
			t.Fatalf("in a network namespace of its own: %v\n%s", err, out)
		}
		return
	}
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v %s", args, err, out)
		}
	}
	h := &hostAddrs{}
	h.start(zaptest.NewLogger(t))
	defer h.stop()
	snapshotHas := func(a netip.Addr) bool { m := h.set.Load(); return m != nil && hasKey(*m, a) }
	for _, a := range []string{"198.51.100.7", "2001:db8::7"} {
		x := netip.MustParseAddr(a)
		if snapshotHas(x) {
			t.Fatalf("%s is there before it is added", a)
		}
		ip("addr", "add", netip.PrefixFrom(x, x.BitLen()).String(), "dev", "lo")
		waitFor(t, a+" in the snapshot", func() bool { return snapshotHas(x) })
		ip("addr", "del", netip.PrefixFrom(x, x.BitLen()).String(), "dev", "lo")
		waitFor(t, a+" gone from the snapshot", func() bool { m := h.set.Load(); return m != nil && !hasKey(*m, x) })
	}
}
