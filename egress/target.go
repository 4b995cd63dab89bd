package egress

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
)

// Kind is how a connection reached the proxy.
type Kind string

// The kinds of proxy request.
const (
	KindHTTP    Kind = "http"    // absolute-form plain HTTP request, forwarded
	KindConnect Kind = "connect" // HTTP CONNECT tunnel
	KindSOCKS5  Kind = "socks5"  // SOCKS5 CONNECT tunnel
	KindHTTPS   Kind = "https"   // a request inside an intercepted tunnel (network.tls_intercept)
)

// target is one parsed proxy request: where it goes and, for plain HTTP, what it asks.
type target struct {
	kind   Kind
	host   string     // normalized: lowercase, no trailing dot; an IP literal as addr.String()
	addr   netip.Addr // valid when host is an IP literal
	port   int
	method string // plain HTTP only
	path   string // plain HTTP only: decoded, as sent (RootedPath)
}

// scheme is the URL scheme of a request target.
func (t target) scheme() string {
	if t.kind == KindHTTPS {
		return "https"
	}
	return "http"
}

// parseInner turns a request read inside a tunnel into a target of kind (KindHTTPS inside an
// intercepted TLS tunnel, KindHTTP for plain HTTP a tunnel carries): origin-form (or
// absolute-form naming the tunnel's own host), with a Host header naming the tunnel's host. A
// request for another host through this tunnel (another name served by the same address) is
// refused rather than decided as the tunnel's.
func parseInner(req *http.Request, tunnel target, kind Kind) (target, error) {
	if req.Method == http.MethodConnect {
		return target{}, fmt.Errorf("%w: CONNECT inside a tunnel", ErrUnsupported)
	}
	if req.ProtoMajor != 1 {
		// HTTP/2 with prior knowledge (PRI * HTTP/2.0) would carry requests no one reads.
		return target{}, fmt.Errorf("%w: %s inside a tunnel", ErrUnsupported, req.Proto)
	}
	for _, authority := range []string{req.URL.Host, req.Host} {
		if authority == "" {
			continue
		}
		a, err := parseHostPort(authority, tunnel.port)
		if err != nil {
			return target{}, err
		}
		if a.host != tunnel.host || a.port != tunnel.port {
			return target{}, fmt.Errorf("%w: a request for %s inside a tunnel to %s", ErrBadRequest, a.hostport(), tunnel.hostport())
		}
	}
	if want := (target{kind: kind}).scheme(); req.URL.Scheme != "" && !strings.EqualFold(req.URL.Scheme, want) {
		return target{}, fmt.Errorf("%w: scheme %s inside a tunnel carrying %s", ErrBadRequest, quoted(req.URL.Scheme), want)
	}
	t := tunnel
	t.kind = kind
	t.method = req.Method
	t.path = RootedPath(req.URL.Path)
	return t, nil
}

// hostport is the target as people write it, for messages.
func (t target) hostport() string {
	return net.JoinHostPort(t.host, strconv.Itoa(t.port))
}

// maxHostLen is the longest DNS name (RFC 1035) the proxy accepts.
const maxHostLen = 253

// normalizeHost lowercases h, drops one trailing dot and brackets, and returns either an IP
// literal (unmapped, so ::ffff:127.0.0.1 is checked as 127.0.0.1) or a syntactically valid
// name. Policy rules match the result, so anything ambiguous is refused rather than guessed.
func normalizeHost(h string) (string, netip.Addr, error) {
	host, a, err := policyHost(h)
	if err != nil {
		return "", netip.Addr{}, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	return host, a, nil
}

// PolicyHost is the host WebFetch rules are matched against for a URL's host h, as the proxy
// normalizes it: a decision taken before the proxy sees the request (WebFetch's own, or one
// for an agent that fetches by itself) must name the host the proxy would, and refuse what it
// would refuse.
func PolicyHost(h string) (string, error) {
	host, _, err := policyHost(h)
	return host, err
}

func policyHost(h string) (string, netip.Addr, error) {
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	if a, err := netip.ParseAddr(h); err == nil {
		// A zone names a host interface; nothing outside the daemon's host should pick one.
		if a.Zone() != "" {
			return "", netip.Addr{}, fmt.Errorf("host %s has a zone", quoted(h))
		}
		a = a.Unmap()
		// A NAT64, 6to4 or IPv4-compatible address reaches the IPv4 address it carries
		// (through a gateway), where a rule naming that IPv4 address would not see it.
		if v4 := embeddedIPv4(a); len(v4) > 0 {
			return "", netip.Addr{}, fmt.Errorf("host %s carries the IPv4 address %s (NAT64, 6to4 or IPv4-compatible); ask for %s itself", a, v4[0], v4[0])
		}
		return a.String(), a, nil
	}
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	if h == "" || len(h) > maxHostLen {
		return "", netip.Addr{}, fmt.Errorf("bad host length %d", len(h))
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 {
			return "", netip.Addr{}, fmt.Errorf("host %s has a bad label", quoted(h))
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			// '_' appears in real names (SRV-style, some CDNs); the resolver decides if it exists.
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", netip.Addr{}, fmt.Errorf("host %s has a character other than a-z, 0-9, - and _ (a name in another script goes in its xn-- form)", quoted(h))
			}
		}
	}
	// inet_aton forms (127.1, 0x7f.1, 2130706433) are not IP literals to netip but are to a libc
	// resolver and to a browser's URL parser; a name whose last label is a number is never a
	// real DNS name, so refuse it rather than let a rule about "names" match an address.
	last := h[strings.LastIndexByte(h, '.')+1:]
	if isNumeric(last) {
		return "", netip.Addr{}, fmt.Errorf("host %s looks like a numeric address; give the address in dotted decimal", quoted(h))
	}
	return h, netip.Addr{}, nil
}

func isNumeric(s string) bool {
	if t, ok := strings.CutPrefix(s, "0x"); ok {
		s = t
		if s == "" {
			return true
		}
		for i := 0; i < len(s); i++ {
			c := s[i]
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func parsePort(s string) (int, error) {
	if s == "" || len(s) > 5 {
		return 0, fmt.Errorf("%w: bad port %s", ErrBadRequest, quoted(s))
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%w: bad port %s", ErrBadRequest, quoted(s))
		}
	}
	p, _ := strconv.Atoi(s)
	if p < 1 || p > 65535 {
		return 0, fmt.Errorf("%w: port %d out of range", ErrBadRequest, p)
	}
	return p, nil
}

// parseHostPort splits an authority; defPort is used when it has none (0: a port is required).
func parseHostPort(authority string, defPort int) (target, error) {
	var t target
	hostPart, portPart, hasPort := authority, "", false
	if h, p, err := net.SplitHostPort(authority); err == nil {
		hostPart, portPart, hasPort = h, p, true
	} else if defPort == 0 {
		return t, fmt.Errorf("%w: %s needs host:port", ErrBadRequest, quoted(authority))
	}
	host, addr, err := normalizeHost(hostPart)
	if err != nil {
		return t, err
	}
	t.host, t.addr, t.port = host, addr, defPort
	// "host:" has a port, an empty one: refused, never taken as the default or as 0.
	if hasPort {
		if t.port, err = parsePort(portPart); err != nil {
			return t, err
		}
	}
	return t, nil
}

// parseHTTP turns a request read from the client into a target. Only CONNECT and absolute-form
// http:// requests are proxy requests.
func parseHTTP(req *http.Request) (target, error) {
	if req.Method == http.MethodConnect {
		t, err := parseHostPort(req.URL.Host, 0)
		t.kind = KindConnect
		return t, err
	}
	if req.URL.Scheme == "" || req.URL.Host == "" {
		return target{}, ErrNotProxyRequest
	}
	if !strings.EqualFold(req.URL.Scheme, "http") {
		return target{}, fmt.Errorf("%w: scheme %s in a forwarded request (use CONNECT for https)", ErrUnsupported, quoted(req.URL.Scheme))
	}
	t, err := parseHostPort(req.URL.Host, 80)
	if err != nil {
		return t, err
	}
	t.kind = KindHTTP
	t.method = req.Method
	t.path = RootedPath(req.URL.Path)
	return t, nil
}

// RootedPath is the decoded path p (URL.Path) with a leading slash, and nothing else changed:
// the rules' matcher reads dot segments, `;parameters` and escapes as the servers that may act
// on the path do (permission.MatchWeb), which removing dot segments here first would defeat
// (path.Clean takes `/a/..;/../b` to /a/b, a path a server dropping `;parameters` reads as /b).
func RootedPath(p string) string {
	if strings.HasPrefix(p, "/") {
		return p
	}
	return "/" + p
}

// SOCKS5 (RFC 1928) constants.
const (
	socksVersion = 0x05

	socksMethodNone         = 0x00
	socksMethodNoAcceptable = 0xff

	socksCmdConnect = 0x01

	socksAtypIPv4   = 0x01
	socksAtypDomain = 0x03
	socksAtypIPv6   = 0x04

	socksReplyOK                 = 0x00
	socksReplyGeneralFailure     = 0x01
	socksReplyNotAllowed         = 0x02
	socksReplyNetworkUnreachable = 0x03
	socksReplyHostUnreachable    = 0x04
	socksReplyConnRefused        = 0x05
	socksReplyCmdNotSupported    = 0x07
	socksReplyAtypNotSupported   = 0x08
)

// readSOCKS runs the SOCKS5 greeting (answering it on w) and reads the request. On an error
// the returned code is the reply to send, or 0 when none should be (the greeting already said
// no, or the input is not SOCKS at all).
func readSOCKS(r *bufio.Reader, w io.Writer) (target, byte, error) {
	t := target{kind: KindSOCKS5}
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return t, 0, fmt.Errorf("%w: socks greeting: %w", ErrBadRequest, err)
	}
	if hdr[0] != socksVersion || hdr[1] == 0 {
		return t, 0, fmt.Errorf("%w: socks greeting version %d with %d methods", ErrBadRequest, hdr[0], hdr[1])
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(r, methods); err != nil {
		return t, 0, fmt.Errorf("%w: socks methods: %w", ErrBadRequest, err)
	}
	// Authentication would identify nothing: the listener already is the session.
	if !strings.ContainsRune(string(methods), socksMethodNone) {
		_, _ = w.Write([]byte{socksVersion, socksMethodNoAcceptable})
		return t, 0, fmt.Errorf("%w: socks client offers no unauthenticated method", ErrUnsupported)
	}
	if _, err := w.Write([]byte{socksVersion, socksMethodNone}); err != nil {
		return t, 0, fmt.Errorf("socks method reply: %w", err)
	}

	var req [4]byte // VER CMD RSV ATYP
	if _, err := io.ReadFull(r, req[:]); err != nil {
		return t, 0, fmt.Errorf("%w: socks request: %w", ErrBadRequest, err)
	}
	if req[0] != socksVersion {
		return t, socksReplyGeneralFailure, fmt.Errorf("%w: socks request version %d", ErrBadRequest, req[0])
	}
	var host string
	switch req[3] {
	case socksAtypIPv4:
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return t, 0, fmt.Errorf("%w: socks address: %w", ErrBadRequest, err)
		}
		host = netip.AddrFrom4(b).String()
	case socksAtypIPv6:
		var b [16]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return t, 0, fmt.Errorf("%w: socks address: %w", ErrBadRequest, err)
		}
		host = netip.AddrFrom16(b).String()
	case socksAtypDomain:
		n, err := r.ReadByte()
		if err != nil {
			return t, 0, fmt.Errorf("%w: socks name length: %w", ErrBadRequest, err)
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			return t, 0, fmt.Errorf("%w: socks name: %w", ErrBadRequest, err)
		}
		host = string(b)
	default:
		return t, socksReplyAtypNotSupported, fmt.Errorf("%w: socks address type %d", ErrUnsupported, req[3])
	}
	var pb [2]byte
	if _, err := io.ReadFull(r, pb[:]); err != nil {
		return t, 0, fmt.Errorf("%w: socks port: %w", ErrBadRequest, err)
	}
	port := int(binary.BigEndian.Uint16(pb[:]))
	if req[1] != socksCmdConnect {
		// BIND and UDP ASSOCIATE would open paths the policy cannot see (inbound, UDP). The
		// address is read first, for the refusal's record.
		t.host, t.port = auditableHost(host), port
		return t, socksReplyCmdNotSupported, fmt.Errorf("%w: socks command %d (only CONNECT is served)", ErrUnsupported, req[1])
	}
	if port == 0 {
		return t, socksReplyGeneralFailure, fmt.Errorf("%w: socks port 0", ErrBadRequest)
	}
	h, addr, err := normalizeHost(host)
	if err != nil {
		t.host, t.port = auditableHost(host), port // for the refusal's record
		return t, socksReplyGeneralFailure, err
	}
	t.host, t.addr, t.port = h, addr, port
	return t, 0, nil
}

// maxAuditedHost bounds a host name as a refusal's record keeps it: a DNS name is at most 253.
const maxAuditedHost = 300

// auditableHost is a host as a client sent it, made fit for a record: valid UTF-8, cut at
// maxAuditedHost bytes.
func auditableHost(h string) string {
	if len(h) > maxAuditedHost {
		h = h[:maxAuditedHost] + "…"
	}
	return strings.ToValidUTF8(h, "\uFFFD")
}

// socksReply is a reply with an all-zero bound address: the address the daemon dialed from
// means nothing inside the session's namespace and would only tell it about the host.
func socksReply(code byte) []byte {
	return []byte{socksVersion, code, 0x00, socksAtypIPv4, 0, 0, 0, 0, 0, 0}
}

// parseFirst reads the first request on a connection: SOCKS5 when it starts with 0x05 (no
// HTTP method does), HTTP otherwise. w receives the SOCKS greeting's answer. The request is
// returned for HTTP so its body and headers can be forwarded.
func parseFirst(r *bufio.Reader, w io.Writer) (target, *http.Request, byte, error) {
	b, err := r.Peek(1)
	if err != nil {
		return target{}, nil, 0, fmt.Errorf("%w: sniff: %w", ErrBadRequest, err)
	}
	if b[0] == socksVersion {
		t, code, err := readSOCKS(r, w)
		return t, nil, code, err
	}
	req, err := http.ReadRequest(r)
	if err != nil {
		return target{}, nil, 0, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	t, err := parseHTTP(req)
	return t, req, 0, err
}

// quoted is what a refusal shows of a name, port or scheme the program sent: its first 128
// bytes, quoted. The reason goes into the 403 and the net.connect record.
func quoted(s string) string {
	const max = 128
	if len(s) > max {
		return strconv.Quote(s[:max]) + "…"
	}
	return strconv.Quote(s)
}
