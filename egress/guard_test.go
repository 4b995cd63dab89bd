package egress

import (
	"net/netip"
	"strings"
	"testing"
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
		{"64:ff9b::7f00:1", nil, "NAT64 of a loopback"},
		{"64:ff9b::a9fe:a9fe", nil, "NAT64 of a cloud metadata"},
		{"64:ff9b::808:808", nil, ""},
		{"64:ff9b:1::1", nil, "NAT64"},
		{"2002:7f00:1::1", nil, "6to4 of a loopback"},
		{"2002:808:808::1", nil, ""},
		{"2001:0:4136:e378::1", nil, "Teredo"},
		{"10.1.2.3", []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}, ""},
		{"10.2.2.3", []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}, "private"},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			got := refusal(netip.MustParseAddr(tc.addr), tc.allow)
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
