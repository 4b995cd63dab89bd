package egress

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"syscall"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/permission"
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
	// IPv4-translated (SIIT, RFC 2765): a translator on the host's network turns it into the
	// IPv4 address it carries, a private one as readily as any.
	{netip.MustParsePrefix("::ffff:0:0:0/96"), "IPv4-translated (SIIT)"},
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
func refusal(a netip.Addr, allow []netip.Prefix, local *hostRoutes) string {
	if allowedPrivate(a, allow) {
		return ""
	}
	if w := classify(a); w != "" {
		return "a " + w + " address"
	}
	// The daemon dials from the host's network namespace, so an address the kernel delivers
	// locally (its own, public ones included, or a range routed `local`) reaches services bound
	// to 0.0.0.0, where host firewalls usually accept everything. A NAT64 or 6to4 address is
	// asked about by the IPv4 address it carries too, which a gateway may hand back to the host.
	for _, x := range append([]netip.Addr{a}, embeddedIPv4(a)...) {
		switch own, err := local.isLocal(x); {
		case err != nil:
			return "possibly an address of this host (" + err.Error() + ")"
		case own:
			return "an address of this host"
		}
	}
	return ""
}

// embeddedIPv4 is the IPv4 address a NAT64, 6to4 or IPv4-compatible address carries, or
// nothing (permission.CarriedIPv4, which rules are held to as well).
func embeddedIPv4(a netip.Addr) []netip.Addr {
	if v4, ok := permission.CarriedIPv4(a.Unmap()); ok {
		return []netip.Addr{v4}
	}
	return nil
}

// hostRoutes asks the kernel's routing of the network namespace the daemon dials from whether
// it delivers an address locally: the route lookup `ip route get` does, so the answer covers
// the interfaces' addresses, ranges routed `local` and any change since, with nothing to keep
// in step. start opens the netlink socket once, in the daemon's own namespace; the zero value
// opens one per question, in the calling thread's.
type hostRoutes struct {
	mu  sync.Mutex
	fd  int // the netlink socket; -1 or unset (open is false) when not started
	seq uint32
	// open is set while fd is a socket start opened.
	open bool
}

// start opens the socket every question then uses; a failure is logged and questions open
// their own.
func (h *hostRoutes) start(log *zap.Logger) {
	fd, err := routeSocket()
	if err != nil {
		log.Warn("the kernel's routes cannot be asked through one socket; the proxy opens one per address it checks", zap.Error(err))
		return
	}
	h.mu.Lock()
	h.fd, h.open = fd, true
	h.mu.Unlock()
}

// stop closes the socket start opened, if any.
func (h *hostRoutes) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.open {
		_ = unix.Close(h.fd)
		h.open = false
	}
}

// isLocal reports whether the kernel routes a to this host (route type local). An error means
// the kernel could not be asked, and the caller must refuse.
func (h *hostRoutes) isLocal(a netip.Addr) (bool, error) {
	a = a.Unmap().WithZone("")
	h.mu.Lock()
	defer h.mu.Unlock()
	fd := h.fd
	if !h.open {
		var err error
		if fd, err = routeSocket(); err != nil {
			return false, err
		}
		defer unix.Close(fd)
	}
	h.seq++
	t, err := routeType(fd, h.seq, a)
	if err != nil {
		return false, fmt.Errorf("ask the kernel's route to %s: %w", a, err)
	}
	return t == unix.RTN_LOCAL, nil
}

func routeSocket() (int, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return -1, fmt.Errorf("netlink socket: %w", err)
	}
	// The kernel answers a route lookup before sendto returns; the timeout only keeps a
	// broken answer from holding the guard.
	tv := unix.Timeval{Sec: 2}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		_ = unix.Close(fd)
		return -1, fmt.Errorf("netlink socket timeout: %w", err)
	}
	return fd, nil
}

// routeType sends an RTM_GETROUTE for a on fd and returns the type of the route the kernel
// picks (unix.RTN_LOCAL, RTN_UNICAST, ...). An unreachable address is RTN_UNREACHABLE, not an
// error: nothing delivers it here.
func routeType(fd int, seq uint32, a netip.Addr) (uint8, error) {
	family, bits := unix.AF_INET, 32
	if a.Is6() {
		family, bits = unix.AF_INET6, 128
	}
	dst := a.AsSlice()
	attrLen := unix.SizeofRtAttr + len(dst)
	msgLen := unix.SizeofNlMsghdr + unix.SizeofRtMsg + attrLen
	req := make([]byte, msgLen)
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], uint32(msgLen))
	ne.PutUint16(req[4:], unix.RTM_GETROUTE)
	ne.PutUint16(req[6:], unix.NLM_F_REQUEST)
	ne.PutUint32(req[8:], seq)
	rt := req[unix.SizeofNlMsghdr:]
	rt[0], rt[1] = byte(family), byte(bits) // rtm_family, rtm_dst_len
	attr := rt[unix.SizeofRtMsg:]
	ne.PutUint16(attr[0:], uint16(attrLen))
	ne.PutUint16(attr[2:], unix.RTA_DST)
	copy(attr[unix.SizeofRtAttr:], dst)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, err
	}
	buf := make([]byte, 8<<10)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return 0, err
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return 0, err
		}
		for _, m := range msgs {
			if m.Header.Seq != seq {
				continue // the late answer to an earlier question that timed out
			}
			switch m.Header.Type {
			case unix.NLMSG_ERROR:
				if len(m.Data) < 4 {
					return 0, errors.New("short netlink error")
				}
				switch errno := syscall.Errno(-int32(ne.Uint32(m.Data))); errno {
				case 0:
					return 0, errors.New("no route in the answer")
				case unix.ENETUNREACH, unix.EHOSTUNREACH, unix.EACCES:
					// No route (or a prohibit one): the dial cannot reach
					// anything, least of all this host.
					return unix.RTN_UNREACHABLE, nil
				default:
					return 0, errno
				}
			case unix.RTM_NEWROUTE:
				if len(m.Data) < unix.SizeofRtMsg {
					return 0, errors.New("short route message")
				}
				return m.Data[7], nil // rtm_type
			}
		}
	}
}
