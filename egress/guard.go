package egress

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync/atomic"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
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
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation"},
	// The 6to4 relay anycast (RFC 7526 deprecated it): a relay the host's networks pick.
	{netip.MustParsePrefix("192.88.99.0/24"), "6to4 relay anycast"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved or broadcast"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	// IPv4-compatible (deprecated) addresses embed an IPv4 address some stacks still route.
	{netip.MustParsePrefix("::/96"), "IPv4-compatible"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use NAT64"},
	{netip.MustParsePrefix("100::/64"), "discard-only"},
	{netip.MustParsePrefix("100:0:0:1::/64"), "dummy (RFC 9780)"},
	// Teredo hides an (obfuscated) IPv4 server and client; nothing a session needs.
	{netip.MustParsePrefix("2001::/32"), "Teredo"},
	{netip.MustParsePrefix("2001:2::/48"), "benchmarking"},
	// ORCHIDs and DRIP entity tags are identifiers that look like addresses; they are not
	// routed to a server.
	{netip.MustParsePrefix("2001:10::/28"), "ORCHID identifier"},
	{netip.MustParsePrefix("2001:20::/28"), "ORCHIDv2 identifier"},
	{netip.MustParsePrefix("2001:30::/28"), "DRIP entity tag"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
	{netip.MustParsePrefix("3fff::/20"), "documentation"},
	{netip.MustParsePrefix("5f00::/16"), "SRv6 segment identifier"},
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

// refusal returns why a must not be dialed, as a phrase ("a loopback address", "an address of
// this host"), or "" when it may: it is public and not the host's own, or allow covers it.
func refusal(a netip.Addr, allow []netip.Prefix, local *hostAddrs) string {
	if allowedPrivate(a, allow) {
		return ""
	}
	if w := classify(a); w != "" {
		return "a " + w + " address"
	}
	// The daemon dials from the host's network namespace, so its own addresses, public ones
	// included, reach services bound to 0.0.0.0 over loopback, where host firewalls usually
	// accept everything.
	switch own, err := local.has(a); {
	case err != nil:
		return "possibly an address of this host (" + err.Error() + ")"
	case own:
		return "an address of this host"
	}
	return ""
}

// hostAddrs knows the addresses assigned to the interfaces of the network namespace the daemon
// dials from. Every proxied connection and request asks it, so it keeps a snapshot, replaced
// whenever the kernel says an address came or went, rather than listing the interfaces per
// dial. The zero value has no snapshot and lists them on every question: slower, never
// stale.
type hostAddrs struct {
	set  atomic.Pointer[addrSet] // nil: no snapshot to trust; has lists the addresses itself
	file *os.File                // the kernel's address notifications; nil when not watching
	done chan struct{}           // closed when the watching goroutine has ended
}

type addrSet map[netip.Addr]struct{}

// has reports whether a is assigned to one of the host's interfaces. An error means the
// addresses could not be listed, and the caller must refuse.
func (h *hostAddrs) has(a netip.Addr) (bool, error) {
	a = a.Unmap().WithZone("")
	if m := h.set.Load(); m != nil {
		_, ok := (*m)[a]
		return ok, nil
	}
	m, err := readHostAddrs()
	if err != nil {
		return false, err
	}
	_, ok := m[a]
	return ok, nil
}

// start subscribes to the kernel's address notifications and keeps the snapshot from them.
// Without a subscription the snapshot stays unset, so every question lists the addresses (fail
// closed), and that is logged once. stop ends it.
func (h *hostAddrs) start(log *zap.Logger) {
	f, err := subscribeAddrChanges()
	if err != nil {
		log.Warn("this host's addresses cannot be watched; the proxy lists them for every address it checks", zap.Error(err))
		return
	}
	h.watch(f, log)
}

// watch reads notifications from f (one datagram each) and lists the addresses again after
// each one; their content does not matter, only that something changed.
func (h *hostAddrs) watch(f *os.File, log *zap.Logger) {
	h.file, h.done = f, make(chan struct{})
	// Subscribed before the first listing, so a change in between is not missed.
	h.refresh()
	go func() {
		defer close(h.done)
		buf := make([]byte, 16<<10)
		for {
			_, err := f.Read(buf)
			if errors.Is(err, os.ErrClosed) {
				return
			}
			// ENOBUFS: the socket overflowed and notifications were lost; listing again makes
			// up for them. Any other error ends the watch, and with no snapshot every question
			// lists the addresses itself.
			if err != nil && !errors.Is(err, unix.ENOBUFS) {
				h.set.Store(nil)
				log.Warn("watching this host's addresses stopped; the proxy lists them for every address it checks", zap.Error(err))
				return
			}
			h.refresh()
		}
	}()
}

// refresh replaces the snapshot with the addresses now assigned, or drops it when they cannot
// be listed.
func (h *hostAddrs) refresh() {
	m, err := readHostAddrs()
	if err != nil {
		h.set.Store(nil)
		return
	}
	h.set.Store(&m)
}

// stop ends the watch started by start, if any, and waits for it.
func (h *hostAddrs) stop() {
	if h.file == nil {
		return
	}
	_ = h.file.Close()
	<-h.done
	h.file = nil
}

// readHostAddrs lists the addresses of every interface, up or down: an IPv4 address stays
// assigned while its interface is down, and the interface coming up notifies no address
// change, so one left out now would stay out once it is up.
func readHostAddrs() (addrSet, error) {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("list this host's addresses: %w", err)
	}
	m := make(addrSet, len(as))
	for _, a := range as {
		var ip net.IP
		switch a := a.(type) {
		case *net.IPNet:
			ip = a.IP
		case *net.IPAddr:
			ip = a.IP
		}
		if x, ok := netip.AddrFromSlice(ip); ok {
			m[x.Unmap()] = struct{}{}
		}
	}
	return m, nil
}

// subscribeAddrChanges opens a NETLINK_ROUTE socket that receives a message whenever an IPv4 or
// IPv6 address is added to or removed from an interface of the calling thread's network
// namespace. It is non-blocking, so reads wait in the runtime's poller and Close ends them.
func subscribeAddrChanges() (*os.File, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink socket: %w", err)
	}
	sa := &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: unix.RTMGRP_IPV4_IFADDR | unix.RTMGRP_IPV6_IFADDR}
	if err := unix.Bind(fd, sa); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("subscribe to address changes: %w", err)
	}
	return os.NewFile(uintptr(fd), "netlink:ifaddr"), nil
}
