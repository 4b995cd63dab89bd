package egress

import (
	"net/netip"
)

// special is one address range the proxy refuses unless AllowPrivate covers the address.
type special struct {
	prefix netip.Prefix
	what   string
}

// specialRanges are the ranges that reach the daemon's host, its networks or its cloud, and
// never a public server. Order matters only for the message: the first match names the range.
var specialRanges = []special{
	{netip.MustParsePrefix("169.254.169.254/32"), "cloud metadata"},
	{netip.MustParsePrefix("fd00:ec2::254/128"), "cloud metadata"},
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified (this-network)"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "CGNAT shared"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignment"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved or broadcast"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	// IPv4-compatible (deprecated) addresses embed an IPv4 address some stacks still route.
	{netip.MustParsePrefix("::/96"), "IPv4-compatible"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use NAT64"},
	{netip.MustParsePrefix("100::/64"), "discard-only"},
	// Teredo hides an (obfuscated) IPv4 server and client; nothing a session needs.
	{netip.MustParsePrefix("2001::/32"), "Teredo"},
	{netip.MustParsePrefix("fc00::/7"), "unique local (ULA)"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// classify names the special range a holds, or returns "" for a public address. IPv4-mapped
// addresses are unmapped first, and NAT64 and 6to4 addresses are judged by the IPv4 address
// they carry, since a gateway turns them into exactly that.
func classify(a netip.Addr) string {
	a = a.Unmap().WithZone("")
	if !a.IsValid() {
		return "invalid"
	}
	if a.Is6() {
		b := a.As16()
		switch {
		case nat64.Contains(a):
			if w := classify(netip.AddrFrom4([4]byte(b[12:16]))); w != "" {
				return "NAT64 of a " + w
			}
			return ""
		case sixToFour.Contains(a):
			if w := classify(netip.AddrFrom4([4]byte(b[2:6]))); w != "" {
				return "6to4 of a " + w
			}
			return ""
		}
	}
	for _, s := range specialRanges {
		if s.prefix.Contains(a) {
			return s.what
		}
	}
	return ""
}

// allowedPrivate reports whether a (or its unmapped form) is inside one of the allowed prefixes.
func allowedPrivate(a netip.Addr, allow []netip.Prefix) bool {
	a = a.WithZone("")
	u := a.Unmap()
	for _, p := range allow {
		if p.Contains(a) || p.Contains(u) {
			return true
		}
	}
	return false
}

// refusal returns why a must not be dialed, or "" when it may.
func refusal(a netip.Addr, allow []netip.Prefix) string {
	w := classify(a)
	if w == "" || allowedPrivate(a, allow) {
		return ""
	}
	return w
}
