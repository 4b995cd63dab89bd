package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"
)

// Request is one connection attempt, as the policy sees it.
type Request struct {
	Session string
	Kind    Kind
	// Host is the name as asked, lowercased and without a trailing dot, or the IP literal.
	Host string
	Port int
	// IP is the checked address that will be dialed (for an IP literal, the literal).
	IP net.IP
	// Method and Path are set for plain HTTP, and for a tunnel the daemon's own client opened
	// (Via set), which declares the one request it will carry; Path is decoded and otherwise
	// as sent, dot segments included (RootedPath): the rules' matcher reads it as servers may.
	Method string
	Path   string
	// Via names the daemon's tool that opened the connection ("WebFetch"), "" for a session's
	// program.
	Via string
	// Approved is set when a person approved this very request (the Origin's, Approved).
	Approved bool
}

// Origin is what the daemon's own client (the WebFetch tool) tells the proxy about a connection
// it opens with ServeConn. The daemon builds the request itself, so it can say what a tunnel
// will carry: the proxy decides such a tunnel by that method and path, as it would a plain HTTP
// request. Nothing a session sends can set it.
type Origin struct {
	Via    string
	Method string
	// Path is the request's path as RootedPath gives it.
	Path string
	// Approved: a person approved this request; it counts only for a request with exactly this
	// method and path.
	Approved bool
}

// peer is who a connection is served for.
type peer struct {
	session string
	origin  *Origin
	owner   *owner // nil for the daemon's own connections (ServeConn): its API paces those
}

// owner is what one owner's sessions share: the connection cap and the request pace.
type owner struct {
	conns atomic.Int64
	pace  *rate.Limiter
}

// Verdict is the policy's answer to a Request.
type Verdict struct {
	Allow  bool
	Reason string
	Rule   string
	// PathRules is set on an allowed tunnel to a host that method/path deny or ask rules name.
	// The tunnel was admitted by its host, which is all TLS shows; a stream the proxy can read
	// neither as TLS nor as HTTP may still be a request to a server laxer than the proxy's
	// reading (the JDK's takes `{GET /admin HTTP/1.1`), the very one such a rule is about, so
	// it is refused rather than carried blind. On an allowed plain HTTP request, it is set when
	// method/path rules of any behavior name the host: a POST's form body is then read for a
	// _method field before it is sent (checkFormBody).
	PathRules bool
}

// Event is one connection decision, for the audit log (record kind net.connect).
type Event struct {
	Time    time.Time
	Session string
	Kind    Kind
	Host    string
	Port    int
	IP      net.IP // nil when the name did not resolve
	Method  string
	Path    string
	Via     string // the daemon's tool that opened the connection, "" for a session's program
	Allowed bool
	Reason  string
	Rule    string
}

// Resolver looks names up; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Dialer opens upstream connections; *net.Dialer is one.
type Dialer interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// Defaults for the Server's zero-valued fields.
const (
	DefaultMaxConns      = 512
	DefaultMaxConnsOwner = 128
	DefaultDialTimeout   = 10 * time.Second
	DefaultHeaderTimeout = 30 * time.Second
	DefaultIdleTimeout   = 5 * time.Minute
)

// Server is the filtering proxy. Set its fields before the first Serve and do not change them
// afterwards; one Server may serve many listeners (one per session) at once.
type Server struct {
	// Decide is asked once per connection (per request for plain HTTP), before the name is
	// resolved (Request.IP nil: a denied name is never looked up, so nothing leaks through
	// DNS); the destination then still has to pass the private-address guard. Nil denies
	// everything.
	Decide func(ctx context.Context, r Request) Verdict
	// DecideAddr, when set, is asked for each address a name Decide allowed resolved to: a
	// deny naming that address (a rule or list entry of an IP) refuses the connection, as it
	// refuses the address asked for by number. Nil asks nothing more.
	DecideAddr func(ctx context.Context, r Request, addr netip.Addr) Verdict
	// Audit receives one Event per decision, synchronously, before the connection is made. An
	// error refuses the connection: what cannot be audited does not happen.
	Audit func(Event) error
	// Resolver defaults to net.DefaultResolver.
	Resolver Resolver
	// Dialer defaults to a *net.Dialer with DialTimeout.
	Dialer Dialer
	// AllowPrivate lists the non-public ranges, and the host's own addresses, that may be
	// reached anyway.
	AllowPrivate []netip.Prefix
	// AllowECH lets a tunnel's ClientHello carry an encrypted ClientHello extension as long as
	// its visible server name is the tunnel's host. Chrome sends one (a GREASE one, which
	// cannot be told from a real one) on every connection; a real one hides the name it means.
	AllowECH bool
	// MaxConns caps concurrent client connections over all listeners (DefaultMaxConns if 0),
	// past the 32nd of it each owner may hold whatever the others hold (reservedPerOwner).
	MaxConns int
	// MaxConnsPerOwner caps one owner's (DefaultMaxConnsOwner if 0), so one user's programs
	// cannot take every connection MaxConns allows from everyone else's. Owner names the owner
	// of a session's listener; nil: each session is its own.
	MaxConnsPerOwner int
	Owner            func(session string) string
	// RatePerOwner paces one owner's decisions (each plain HTTP request, each tunnel: each one
	// audited) to this many a second, in bursts of up to BurstPerOwner; 0: not paced. A request
	// over it waits its turn, up to maxPaceWait, and is refused past that (429) without being
	// decided or audited, so a program looping on requests cannot grow the audit log faster.
	// SetPace changes both while serving.
	RatePerOwner  float64
	BurstPerOwner int
	// DialTimeout bounds resolving plus dialing (DefaultDialTimeout if 0).
	DialTimeout time.Duration
	// HeaderTimeout bounds reading one request's header or SOCKS handshake (DefaultHeaderTimeout if 0).
	HeaderTimeout time.Duration
	// IdleTimeout ends a connection with no bytes moving either way (DefaultIdleTimeout if 0).
	IdleTimeout time.Duration
	// Logger defaults to a no-op logger.
	Logger *zap.Logger
	// Intercept, when set, terminates TLS in the sessions' tunnels (not in the daemon's own
	// connections, which declare their request) so each request inside is decided by method and
	// path; nil: tunnels are decided by host only.
	Intercept *Interceptor

	initOnce sync.Once
	log      *zap.Logger
	ctx      context.Context // cancelled by Close: every connection's context derives from it
	cancel   context.CancelFunc
	active   atomic.Int64      // client connections being served
	owners   map[string]*owner // under mu
	refusing atomic.Int64      // over-cap connections being told so
	// local asks the host's routes for the guard: its socket is open from the first Serve or
	// ServeConn until Close.
	local hostRoutes
	// tlsOrigins: origins that answered a TLS probe (tlsprobe.go).
	tlsOrigins tlsOrigins

	mu        sync.Mutex
	closed    bool
	routing   bool // local was started
	listeners map[net.Listener]struct{}
	tunnels   map[*tunnel]struct{} // being carried, for Recheck
	serving   sync.WaitGroup       // one per running Serve
}

func (s *Server) init() {
	s.initOnce.Do(func() {
		s.log = s.Logger
		if s.log == nil {
			s.log = zap.NewNop()
		}
		s.log = s.log.Named("egress")
		s.ctx, s.cancel = context.WithCancel(context.Background())
		s.listeners = make(map[net.Listener]struct{})
		s.owners = make(map[string]*owner)
	})
}

// forwarder is the transport of one client connection's plain HTTP requests. Its upstream
// connections serve that client connection alone: pooled across connections, one that a
// session's request opened would carry another session's (another user's) next request, as
// whoever the origin took the connection for (NTLM and Negotiate authenticate the connection,
// not the request). The caller closes its idle connections when the client's connection ends.
func (s *Server) forwarder() *http.Transport {
	return &http.Transport{
		Proxy:       nil, // the daemon's own proxy settings must not apply to sessions
		DialContext: s.dialChecked,
		// Pass the origin's encoding through untouched; the client asked for it.
		DisableCompression: true,
		// Only http:// is forwarded (https goes through CONNECT), so no HTTP/2.
		TLSNextProto:           map[string]func(string, *tls.Conn) http.RoundTripper{},
		MaxResponseHeaderBytes: maxResponseHeadBytes,
		// One request at a time per client connection: one kept-alive connection per host it
		// names, a few hosts.
		MaxIdleConns:        4,
		MaxIdleConnsPerHost: 1,
		IdleConnTimeout:     90 * time.Second,
		ReadBufferSize:      64 << 10,
		WriteBufferSize:     64 << 10,
	}
}

func (s *Server) maxConnsPerOwner() int {
	if s.MaxConnsPerOwner > 0 {
		return s.MaxConnsPerOwner
	}
	return DefaultMaxConnsOwner
}

func (s *Server) maxConns() int {
	if s.MaxConns > 0 {
		return s.MaxConns
	}
	return DefaultMaxConns
}

func (s *Server) dialTimeout() time.Duration {
	if s.DialTimeout > 0 {
		return s.DialTimeout
	}
	return DefaultDialTimeout
}

func (s *Server) headerTimeout() time.Duration {
	if s.HeaderTimeout > 0 {
		return s.HeaderTimeout
	}
	return DefaultHeaderTimeout
}

func (s *Server) idleTimeout() time.Duration {
	if s.IdleTimeout > 0 {
		return s.IdleTimeout
	}
	return DefaultIdleTimeout
}

// Serve accepts connections on l for session until l is closed or the Server is. Before it
// returns it ends every connection it accepted and waits for them, so closing a session's
// listener is how a session's egress ends. It returns ErrServerClosed after Close, or the
// accept error otherwise (wrapping net.ErrClosed when l was closed).
func (s *Server) Serve(l net.Listener, session string) error {
	s.init()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = l.Close()
		return ErrServerClosed
	}
	s.listeners[l] = struct{}{}
	s.serving.Add(1)
	s.startRoutes()
	own := s.ownerOf(session)
	s.mu.Unlock()

	ctx, cancel := context.WithCancel(s.ctx)
	var conns sync.WaitGroup
	defer func() {
		cancel()
		_ = l.Close()
		conns.Wait()
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
		s.serving.Done()
	}()

	var backoff time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if s.isClosed() {
				return ErrServerClosed
			}
			// Out of descriptors is transient: wait for connections to end rather than spin
			// or give the session up.
			if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ECONNABORTED) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("accept", zap.Error(err), zap.Duration("backoff", backoff))
				select {
				case <-time.After(backoff):
					continue
				case <-ctx.Done():
					return ErrServerClosed
				}
			}
			return fmt.Errorf("accept: %w", err)
		}
		backoff = 0
		release, busy := s.takeConn(own)
		if busy != "" {
			s.refuseBusy(&conns, c, busy)
			continue
		}
		conns.Go(func() {
			defer release()
			s.serveConn(ctx, c, peer{session: session, owner: own})
		})
	}
}

// reservedPerOwner are the connections each owner may hold whatever the others hold, a 32nd of
// MaxConns (16 by default): they do not count against MaxConns, so a few users holding every
// shared connection (four at the default caps) cannot refuse everyone else's programs all
// proxied traffic.
func (s *Server) reservedPerOwner() int64 { return int64(s.maxConns() / 32) }

// takeConn admits a connection of own's: within its owner's cap, and past the owner's
// reserved ones within MaxConns. It returns what gives the connection back, or why it is
// refused.
func (s *Server) takeConn(own *owner) (release func(), busy string) {
	n := own.conns.Add(1)
	if n > int64(s.maxConnsPerOwner()) {
		own.conns.Add(-1)
		return nil, "too many concurrent connections from this user's sessions (limit " + strconv.Itoa(s.maxConnsPerOwner()) + ")"
	}
	if n <= s.reservedPerOwner() {
		return func() { own.conns.Add(-1) }, ""
	}
	if s.active.Add(1) > int64(s.maxConns()) {
		s.active.Add(-1)
		own.conns.Add(-1)
		return nil, "too many concurrent connections (limit " + strconv.Itoa(s.maxConns()) + ")"
	}
	return func() { s.active.Add(-1); own.conns.Add(-1) }, ""
}

// ownerOf is what session's owner's sessions share, made on first use; s.mu is held.
func (s *Server) ownerOf(session string) *owner {
	name := session
	if s.Owner != nil {
		name = s.Owner(session)
	}
	own := s.owners[name]
	if own == nil {
		own = &owner{pace: rate.NewLimiter(s.paceLimit(), max(s.BurstPerOwner, 1))}
		s.owners[name] = own
	}
	return own
}

// SetPace changes RatePerOwner and BurstPerOwner, for the owners served already too.
func (s *Server) SetPace(perSecond float64, burst int) {
	s.init()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.RatePerOwner, s.BurstPerOwner = perSecond, burst
	for _, o := range s.owners {
		o.pace.SetLimit(s.paceLimit())
		o.pace.SetBurst(max(burst, 1))
	}
}

// paceLimit is RatePerOwner as a limiter's rate; s.mu is held.
func (s *Server) paceLimit() rate.Limit {
	if s.RatePerOwner <= 0 {
		return rate.Inf
	}
	return rate.Limit(s.RatePerOwner)
}

// startRoutes opens the guard's route socket when the Server first serves (not at Close, nor
// for a Server never used), in the daemon's own network namespace; s.mu is held and the
// Server is not closed.
func (s *Server) startRoutes() {
	if !s.routing {
		s.routing = true
		s.local.start(s.log)
	}
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close stops every Serve and ends every open connection (tunnels included), then waits for
// them. It is safe to call more than once.
func (s *Server) Close() error {
	s.init()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.serving.Wait()
		return nil
	}
	s.closed = true
	s.cancel()
	var errs []error
	for l := range s.listeners {
		if err := l.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, fmt.Errorf("close listener %s: %w", l.Addr(), err))
		}
	}
	s.mu.Unlock()
	s.serving.Wait()
	// Nothing is served any more, so nothing asks the guard.
	s.local.stop()
	return errors.Join(errs...)
}

// maxRefusing bounds the goroutines that explain an over-cap refusal; past it a connection is
// just closed, so a flood cannot turn the cap itself into unbounded work.
const maxRefusing = 16

// refuseBusy tells an over-cap client why, in its own protocol, when that is cheap.
func (s *Server) refuseBusy(wg *sync.WaitGroup, c net.Conn, why string) {
	if s.refusing.Add(1) > maxRefusing {
		s.refusing.Add(-1)
		_ = c.Close()
		return
	}
	wg.Go(func() {
		defer s.refusing.Add(-1)
		_ = c.SetDeadline(time.Now().Add(lingerTime))
		br := bufio.NewReaderSize(c, 512)
		b, err := br.Peek(1)
		switch {
		case err != nil:
		case b[0] == socksVersion:
			// The greeting's "no acceptable method" is the only refusal SOCKS has this early.
			_, _ = c.Write([]byte{socksVersion, socksMethodNoAcceptable})
		default:
			msg := "sandboxd egress proxy: " + why + "; close some and retry.\n"
			_, _ = c.Write(textResponse(http.StatusServiceUnavailable, msg, "", true))
		}
		lingerClose(c)
	})
}

// ServeConn serves one connection the daemon itself opened for session (the WebFetch tool's
// end of a net.Pipe), as a session's program's connection is served, with o telling what it
// will carry. It returns when the connection ends or the Server closes (ErrServerClosed if it
// already had; ErrBusy when MaxConns connections are being served, or MaxConnsPerOwner of the
// session owner's).
func (s *Server) ServeConn(c net.Conn, session string, o Origin) error {
	s.init()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = c.Close()
		return ErrServerClosed
	}
	s.serving.Add(1)
	s.startRoutes()
	// The daemon's own connections for a session (WebFetch) count with its programs' against
	// the owner's cap and pace: a user's many WebFetch calls at once could otherwise hold most
	// of the proxy's connections from every other user.
	own := s.ownerOf(session)
	s.mu.Unlock()
	defer s.serving.Done()
	release, busy := s.takeConn(own)
	if busy != "" {
		var refusing sync.WaitGroup
		s.refuseBusy(&refusing, c, busy)
		refusing.Wait()
		return ErrBusy
	}
	defer release()
	s.serveConn(s.ctx, c, peer{session: session, origin: &o, owner: own})
	return nil
}

// serveConn sniffs the protocol and hands the connection to its handler. ctx ends with the
// listener's Serve; the connection is closed then, which unblocks whatever it waits on.
func (s *Server) serveConn(ctx context.Context, c net.Conn, p peer) {
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stop()
	defer c.Close()

	ic := newIdleConn(c, s.idleTimeout(), nil)
	ic.setHard(time.Now().Add(s.headerTimeout()))
	br := bufio.NewReaderSize(ic, 4<<10)
	b, err := br.Peek(1)
	if err != nil {
		return
	}
	if b[0] == socksVersion {
		s.serveSOCKS(ctx, ic, br, p)
		return
	}
	s.serveHTTP(ctx, ic, br, p)
}

// outcome is how admit ended, for the client's reply.
type outcome int

const (
	outAllowed outcome = iota
	outDenied          // the policy said no
	outPrivate         // the guard said no
	outResolve         // the name did not resolve
	outPaced           // over its owner's rate: not decided
)

// maxPaceWait is the longest a request waits for its owner's pace; past it it is refused, so a
// flood's connections do not pile up waiting.
const maxPaceWait = 5 * time.Second

// pace waits for p's owner's turn, or says why not.
func (s *Server) pace(ctx context.Context, p peer) error {
	if p.owner == nil {
		return nil
	}
	r := p.owner.pace.Reserve()
	if d := r.Delay(); d > 0 {
		if d > maxPaceWait {
			r.Cancel()
			return fmt.Errorf("this user's sessions send more than %g proxied requests a second (their limit); slow down", float64(p.owner.pace.Limit()))
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			r.Cancel()
			return ctx.Err()
		}
	}
	return nil
}

// admit resolves t once, applies the private-address guard to every address, asks the policy
// about the address it will dial and audits the decision. The returned address is the only one
// the caller may dial; pathRules is the allowed Verdict's PathRules, for a tunnel's carry.
//
// WARNING: this is the egress security boundary (DNS rebinding, metadata, the host's own
// addresses, policy); rerun TestGuard, TestGuardHostAddrs, TestPrivateRefused,
// TestOwnAddressRefused, TestIPLiteral, TestDenials and, as root, TestHostAddrsFollowKernel
// after a change.
func (s *Server) admit(ctx context.Context, p peer, t target) (dst netip.AddrPort, out outcome, reason string, pathRules bool) {
	if err := s.pace(ctx, p); err != nil {
		return netip.AddrPort{}, outPaced, err.Error(), false
	}
	req := requestOf(p, t)
	ev := Event{
		Time: time.Now(), Session: p.session, Kind: t.kind, Host: t.host, Port: t.port,
		Method: req.Method, Path: req.Path, Via: req.Via,
	}
	v := Verdict{Reason: "no egress policy is configured"}
	if s.Decide != nil {
		v = s.Decide(ctx, req)
	}
	ev.Rule = v.Rule
	if !v.Allow {
		ev.Reason = v.Reason
		if ev.Reason == "" {
			ev.Reason = "not allowed"
		}
		if err := s.audit(ev); err != nil {
			return netip.AddrPort{}, outDenied, err.Error(), false
		}
		return netip.AddrPort{}, outDenied, ev.Reason, false
	}
	addr := t.addr
	if !addr.IsValid() {
		rctx, cancel := context.WithTimeout(ctx, s.dialTimeout())
		addrs, err := s.resolver().LookupNetIP(rctx, "ip", t.host)
		cancel()
		if err == nil && len(addrs) == 0 {
			err = ErrNoAddress
		}
		if err != nil {
			ev.Reason = fmt.Sprintf("resolve %s: %v", t.host, err)
			_ = s.audit(ev) // refused whatever the audit says
			return netip.AddrPort{}, outResolve, ev.Reason, false
		}
		// Every address is checked, not just the one dialed: a name answering with one public
		// and one private address is a rebinding attempt whichever is dialed.
		for _, a := range addrs {
			if w := refusal(a, s.AllowPrivate, &s.local); w != "" {
				ev.IP = net.IP(a.Unmap().AsSlice())
				ev.Reason = fmt.Sprintf("%s resolves to %s, %s", t.host, a.Unmap(), w)
				_ = s.audit(ev)
				return netip.AddrPort{}, outPrivate, ev.Reason, false
			}
		}
		if s.DecideAddr != nil {
			for _, a := range addrs {
				if av := s.DecideAddr(ctx, req, a.Unmap().WithZone("")); !av.Allow {
					ev.IP, ev.Rule = net.IP(a.Unmap().AsSlice()), av.Rule
					ev.Reason = av.Reason
					if err := s.audit(ev); err != nil {
						return netip.AddrPort{}, outDenied, err.Error(), false
					}
					return netip.AddrPort{}, outDenied, ev.Reason, false
				}
			}
		}
		addr = addrs[0].Unmap().WithZone("")
	} else if w := refusal(addr, s.AllowPrivate, &s.local); w != "" {
		ev.IP = net.IP(addr.AsSlice())
		ev.Reason = fmt.Sprintf("%s is %s", addr, w)
		_ = s.audit(ev)
		return netip.AddrPort{}, outPrivate, ev.Reason, false
	}
	ev.IP = net.IP(addr.AsSlice())
	ev.Allowed, ev.Reason = true, v.Reason
	if err := s.audit(ev); err != nil {
		return netip.AddrPort{}, outDenied, err.Error(), false
	}
	return netip.AddrPortFrom(addr, uint16(t.port)), outAllowed, v.Reason, v.PathRules
}

// requestOf is what the policy is asked about t, for p.
func requestOf(p peer, t target) Request {
	req := Request{Session: p.session, Kind: t.kind, Host: t.host, Port: t.port, Method: t.method, Path: t.path}
	if o := p.origin; o != nil {
		req.Via = o.Via
		if t.kind != KindHTTP {
			// The daemon's own client says what its tunnel carries; it builds that request.
			req.Method, req.Path = o.Method, o.Path
		}
		req.Approved = o.Approved && req.Method == o.Method && req.Path == o.Path
	}
	if t.addr.IsValid() {
		req.IP = net.IP(t.addr.AsSlice())
	}
	return req
}

// tunnel is a tunnel being carried (carry), or a forwarded request's exchange, for Recheck.
type tunnel struct {
	req Request
	dst netip.AddrPort
	end func()
}

// track registers a tunnel being carried until the returned func is called.
func (s *Server) track(p peer, t target, dst netip.AddrPort, end func()) (untrack func()) {
	tn := &tunnel{req: requestOf(p, t), dst: dst, end: end}
	s.mu.Lock()
	if s.tunnels == nil {
		s.tunnels = map[*tunnel]struct{}{}
	}
	s.tunnels[tn] = struct{}{}
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		delete(s.tunnels, tn)
		s.mu.Unlock()
	}
}

// Recheck asks the policy again about each tunnel being carried for a session sessions
// selects (and each forwarded request whose response is still coming), and ends those it now
// refuses, each audited (allowed false, the reason saying the tunnel ended). A tunnel is decided when it opens: a deny added to its session, or a reloaded
// policy, must not leave one that is open carrying on. It returns how many it ended.
func (s *Server) Recheck(ctx context.Context, sessions func(string) bool) int {
	s.init()
	s.mu.Lock()
	var open []*tunnel
	for tn := range s.tunnels {
		if sessions(tn.req.Session) {
			open = append(open, tn)
		}
	}
	s.mu.Unlock()
	ended := 0
	for _, tn := range open {
		v := Verdict{Reason: "no egress policy is configured"}
		if s.Decide != nil {
			v = s.Decide(ctx, tn.req)
		}
		if v.Allow && s.DecideAddr != nil && !tn.req.IP.Equal(net.IP(tn.dst.Addr().AsSlice())) {
			v = s.DecideAddr(ctx, tn.req, tn.dst.Addr())
		}
		if v.Allow {
			continue
		}
		if v.Reason == "" {
			v.Reason = "not allowed"
		}
		ev := Event{Time: time.Now(), Session: tn.req.Session, Kind: tn.req.Kind, Host: tn.req.Host, Port: tn.req.Port,
			IP: net.IP(tn.dst.Addr().AsSlice()), Method: tn.req.Method, Path: tn.req.Path, Via: tn.req.Via, Rule: v.Rule,
			Reason: "an open tunnel was ended, as its session's rules or the policy changed: " + v.Reason}
		_ = s.audit(ev) // ended whatever the audit says
		tn.end()
		ended++
	}
	return ended
}

func (s *Server) resolver() Resolver {
	if s.Resolver != nil {
		return s.Resolver
	}
	return net.DefaultResolver
}

// audit records ev; an error means the connection must not be made.
func (s *Server) audit(ev Event) error {
	if s.Audit == nil {
		return nil
	}
	if err := s.Audit(ev); err != nil {
		return fmt.Errorf("the audit log cannot be written, so the connection was refused: %w", err)
	}
	return nil
}

// recordRefusal records a tunnel refused after its decision (its opening answered, at, when
// known, the address it was dialed on). The record is paced like a decision's, so a client
// failing this way in a loop cannot grow the audit log faster than requests can.
func (s *Server) recordRefusal(ctx context.Context, p peer, t target, at net.Addr, reason string) {
	if s.pace(ctx, p) != nil {
		return
	}
	ev := Event{Time: time.Now(), Session: p.session, Kind: t.kind, Host: t.host, Port: t.port, Reason: reason}
	if o := p.origin; o != nil {
		ev.Via = o.Via
	}
	if a, ok := at.(*net.TCPAddr); ok {
		ev.IP = a.IP
	}
	_ = s.audit(ev)
}

// dial connects to an address admit returned.
func (s *Server) dial(ctx context.Context, dst netip.AddrPort) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, s.dialTimeout())
	defer cancel()
	var d Dialer = s.Dialer
	if d == nil {
		d = &net.Dialer{}
	}
	c, err := d.DialContext(ctx, "tcp", dst.String())
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", dst, err)
	}
	return c, nil
}

// dialChecked is the forwarders' dialer. The forwarder puts the checked address in
// the URL, so addr is always an IP literal; anything else would mean a re-resolution, so it is
// refused.
func (s *Server) dialChecked(ctx context.Context, network, addr string) (net.Conn, error) {
	dst, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrNotChecked, addr)
	}
	c, err := s.dial(ctx, dst)
	if err != nil {
		return nil, err
	}
	return newIdleConn(c, s.idleTimeout(), nil), nil
}
