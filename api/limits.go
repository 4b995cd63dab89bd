package api

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/session"
)

// Limits are the per-request and per-user bounds the API enforces (issue 17): one user
// cannot take the daemon's memory, connections or call slots from another.
type Limits struct {
	// BatchCalls bounds one batch request's calls (over it: 400).
	BatchCalls int
	// MaxParallelCalls is how many calls of a batch run at once: a batch takes that many of
	// its user's call slots.
	MaxParallelCalls int
	// CallsPerUser bounds one uid's calls running at once (over it: 429 too_many_calls).
	CallsPerUser int
	// ConnectionsPerUser bounds one uid's open connections (over it: 429, then close).
	ConnectionsPerUser int
	// RequestsPerSecond and Burst are one uid's token bucket on every request but the health
	// check.
	RequestsPerSecond float64
	Burst             int
	// ResponseBytes bounds the result bytes one uid's responses in flight hold together;
	// a result past it is shrunk (Backend.Shrink).
	ResponseBytes int64
	// WriteTimeout bounds each write of a response: a client that stops reading is cut off.
	WriteTimeout time.Duration
}

// defaultLimits serve until SetLimits: the config's defaults.
var defaultLimits = Limits{BatchCalls: 64, MaxParallelCalls: 8, CallsPerUser: 16, ConnectionsPerUser: 32,
	RequestsPerSecond: 50, Burst: 100, ResponseBytes: 64 << 20, WriteTimeout: time.Minute}

// SetLimits swaps in new limits (at start and on reload).
func (s *Server) SetLimits(l Limits) { s.tenants.limits.Store(&l) }

// SetTenantOf gives the uid whose limits a peer's uid counts against (session.Caller.Tenant),
// for the connection cap, which counts a peer before it is identified. Call before serving.
func (s *Server) SetTenantOf(f func(uid uint32) uint32) { s.tenantOfUID = f }

func (s *Server) tenantOf(uid uint32) uint32 {
	if s.tenantOfUID == nil {
		return uid
	}
	return s.tenantOfUID(uid)
}

// tenants is the per-uid bookkeeping behind Limits.
type tenants struct {
	limits atomic.Pointer[Limits]
	mu     sync.Mutex
	users  map[uint32]*tenant
}

type tenant struct {
	calls     int     // call slots held
	conns     int     // open connections
	respBytes int64   // result bytes held by responses in flight
	refusing  int     // connections over the cap waiting for their 429
	scans     int     // audit queries reading the log
	tokens    float64 // token bucket
	last      time.Time
}

func (t *tenants) get() Limits {
	if l := t.limits.Load(); l != nil {
		return *l
	}
	return defaultLimits
}

// user returns uid's entry; t.mu is held.
func (t *tenants) user(uid uint32, l Limits, now time.Time) *tenant {
	if t.users == nil {
		t.users = map[uint32]*tenant{}
	}
	u := t.users[uid]
	if u == nil {
		if len(t.users) > 4096 {
			t.prune(l, now)
		}
		u = &tenant{tokens: float64(l.Burst), last: now}
		t.users[uid] = u
	}
	return u
}

// prune forgets users with nothing in flight whose bucket has refilled: forgetting them
// changes nothing. t.mu is held.
func (t *tenants) prune(l Limits, now time.Time) {
	full := time.Duration(float64(l.Burst) / l.RequestsPerSecond * float64(time.Second))
	for uid, u := range t.users {
		if u.calls == 0 && u.conns == 0 && u.respBytes == 0 && u.refusing == 0 && u.scans == 0 && now.Sub(u.last) >= full {
			delete(t.users, uid)
		}
	}
}

// refusalDelay is how long a 429 is held before it is sent. A refused request costs the
// daemon little, but a client that retries at once can still send tens of thousands a second
// and take the CPU from everyone else; held, each of its connections (at most
// limits.connections_per_user) sends at most one a second.
const refusalDelay = time.Second

// refuse holds the refusal err for refusalDelay (or until the client goes) and returns it.
func refuse(ctx context.Context, err error) error {
	t := time.NewTimer(refusalDelay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return err
}

// bytesPerToken is how much of a request body one token of the rate pays for: what the daemon
// does with a request (decode, classify, match rules, audit) grows with its size, up to a
// quarter of a second of its one P for a 128 KB command of deep nesting, so one call's token
// covers its first 8 KiB and each further 8 KiB takes one more, up to the burst less the
// request's own token: a bucket holds at most the burst, so a request wanting more (any body
// of 800 KiB or more, with the defaults) would be refused however long its client waited.
const bytesPerToken = 8 << 10

// pacedBody takes a caller's request tokens for the body while it is read (bytesPerToken),
// and fails the read with rate_limited when the bucket holds too few. Taken after the decode
// instead, and not at all where a route takes no token (an approval's answer), the bytes a
// user's connections made the daemon hold at once were bounded only by connections_per_user
// times max_request_bytes (32 connections answering approvals with 1 MiB bodies took the
// daemon's RSS from 60 to ~290 MB); taken as read, they are bounded by the user's tokens. A
// body of a known length pays for all of it before its first byte is read, or is refused
// having taken nothing, as a request's own token is; one sent in chunks pays as it comes, and
// reads are cut to one token's bytes, so none runs more than a token ahead of its charge.
type pacedBody struct {
	io.ReadCloser
	ctx    context.Context
	s      *Server
	c      session.Caller
	length int64 // the body's length if known, else -1
	n      int64 // bytes read
	paid   int   // tokens taken
}

// pace wraps r's body in a pacedBody for c; root is not limited.
func (s *Server) pace(r *http.Request, c session.Caller) {
	if c.UID == 0 {
		return
	}
	r.Body = &pacedBody{ReadCloser: r.Body, ctx: r.Context(), s: s, c: c, length: r.ContentLength}
}

func (b *pacedBody) Read(p []byte) (int, error) {
	if b.n == 0 && b.paid == 0 && b.length > 0 {
		if err := b.pay(b.length); err != nil {
			return 0, err
		}
	}
	if len(p) > bytesPerToken {
		p = p[:bytesPerToken]
	}
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	if perr := b.pay(b.n); perr != nil {
		return n, perr
	}
	return n, err
}

// pay takes what a body of size bytes owes past what was paid, all or nothing.
func (b *pacedBody) pay(size int64) error {
	l := b.s.tenants.get()
	owed := min(int(size/bytesPerToken), l.Burst-1) - b.paid
	if owed <= 0 {
		return nil
	}
	if !b.s.tenants.takeTokens(b.c, l, float64(owed), false) {
		return refuse(b.ctx, rateLimited(b.c, l))
	}
	b.paid += owed
	return nil
}

// bodyPaid is the tokens r's body took as it was read.
func bodyPaid(r *http.Request) int {
	if b, ok := r.Body.(*pacedBody); ok {
		return b.paid
	}
	return 0
}

// limitRate takes n tokens of the caller's rate on calls, decide and batch (one per call,
// so a batch takes one per call it holds, and one per 8 KiB of body past the first, never
// more than the burst), or refuses with 429
// rate_limited, naming the limit. A request takes its first token before the body is read,
// so a flood costs as little as it can. Root is not limited (it is the host's administrator,
// not a tenant).
func (s *Server) limitRate(ctx context.Context, c session.Caller, n int) error {
	if c.UID == 0 {
		return nil
	}
	l := s.tenants.get()
	if !s.tenants.takeTokens(c, l, float64(min(n, max(1, l.Burst))), false) {
		return refuse(ctx, rateLimited(c, l))
	}
	return nil
}

// rateLimited is the refusal of a request over its caller's rate.
func rateLimited(c session.Caller, l Limits) error {
	return errcode.New(errcode.RateLimited, fmt.Errorf("%s sends more than %g calls a second (limits.requests_per_second_per_user, burst %d; a batch counts each of its calls, and a body each 8 KiB past its first); slow down and retry", c.TenantName(), l.RequestsPerSecond, l.Burst))
}

// chargeRate takes n more of the caller's request tokens after the fact, for work whose size
// was known only once done (a long list written): the balance may go below zero, so the
// caller's next requests wait for it to refill. Root is not limited.
func (s *Server) chargeRate(c session.Caller, n int) {
	if c.UID == 0 || n <= 0 {
		return
	}
	s.tenants.takeTokens(c, s.tenants.get(), float64(n), true)
}

// takeTokens refills the caller's bucket and takes need from it: only if it holds that much,
// or (debt) whatever it holds, down to minus a burst. It reports whether need was taken.
func (t *tenants) takeTokens(c session.Caller, l Limits, need float64, debt bool) bool {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	u := t.user(c.Tenant(), l, now)
	u.tokens = min(float64(l.Burst), u.tokens+now.Sub(u.last).Seconds()*l.RequestsPerSecond)
	u.last = now
	switch {
	case u.tokens >= need:
		u.tokens -= need
		return true
	case debt:
		u.tokens = max(u.tokens-need, -float64(l.Burst))
	}
	return false
}

// admit takes slots of the caller's concurrent calls, or refuses with 429 too_many_calls,
// naming the limit. Root is not limited. The returned func gives the slots back.
func (s *Server) admit(ctx context.Context, c session.Caller, slots int) (release func(), err error) {
	l := s.tenants.get()
	return s.hold(ctx, c, func(u *tenant) *int { return &u.calls }, slots, l.CallsPerUser, func(running int) error {
		return errcode.New(errcode.TooManyCalls, fmt.Errorf("%s already runs %d calls and this request needs %d; at most %d may run at once (limits.calls_per_user); retry when some are done", c.TenantName(), running, slots, l.CallsPerUser))
	})
}

// scansPerUser is how many audit queries (or verifies) one uid may have reading the log at
// once: each reads every retained file (gigabytes, tens of seconds of CPU), whoever's records
// it keeps.
const scansPerUser = 1

// admitScan takes the caller's audit-query slot, or refuses with 429 too_many_calls. Root is
// not limited. The returned func gives the slot back.
func (s *Server) admitScan(ctx context.Context, c session.Caller) (release func(), err error) {
	return s.hold(ctx, c, func(u *tenant) *int { return &u.scans }, 1, scansPerUser, func(int) error {
		return errcode.New(errcode.TooManyCalls, fmt.Errorf("%s already has an audit query reading the log; one may run at a time per user (each reads every retained file), so wait for it or narrow it with since", c.TenantName()))
	})
}

// hold takes n of the caller's slots of one kind (slot picks the counter) if at most max are
// then held, or refuses with why(the number held). Root is not limited. The returned func
// gives the slots back, once.
func (s *Server) hold(ctx context.Context, c session.Caller, slot func(*tenant) *int, n, max int, why func(held int) error) (func(), error) {
	if c.UID == 0 {
		return func() {}, nil
	}
	t := &s.tenants
	l := t.get()
	t.mu.Lock()
	u := t.user(c.Tenant(), l, time.Now())
	held := *slot(u)
	ok := held+n <= max
	if ok {
		*slot(u) += n
	}
	t.mu.Unlock()
	if !ok {
		return nil, refuse(ctx, why(held))
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			t.mu.Lock()
			*slot(u) -= n
			t.mu.Unlock()
		})
	}, nil
}

// responseBudget is one request's Budget: its results are charged to the caller's share of
// limits.response_bytes, and release gives the bytes back once the response is written.
type responseBudget struct {
	t     *tenants
	uid   uint32
	limit int64
	mu    sync.Mutex
	held  int64
}

func (s *Server) budget(c session.Caller) *responseBudget {
	return &responseBudget{t: &s.tenants, uid: c.Tenant(), limit: s.tenants.get().ResponseBytes}
}

func (b *responseBudget) Limit() int64 { return b.limit }

func (b *responseBudget) Room() int64 {
	l := b.t.get()
	b.t.mu.Lock()
	defer b.t.mu.Unlock()
	return b.limit - b.t.user(b.uid, l, time.Now()).respBytes
}

func (b *responseBudget) Fits(n int64) bool { return b.Room() >= n }

func (b *responseBudget) Charge(n int64) {
	l := b.t.get()
	b.t.mu.Lock()
	b.t.user(b.uid, l, time.Now()).respBytes += n
	b.t.mu.Unlock()
	b.mu.Lock()
	b.held += n
	b.mu.Unlock()
}

func (b *responseBudget) release() {
	b.mu.Lock()
	n := b.held
	b.held = 0
	b.mu.Unlock()
	b.t.mu.Lock()
	if u := b.t.users[b.uid]; u != nil {
		u.respBytes -= n
	}
	b.t.mu.Unlock()
}

// LimitListener wraps l so one uid holds at most limits.connections_per_user connections:
// past it the connection gets a 429 and is closed. Use Server.ConnContext with it.
func (s *Server) LimitListener(l net.Listener) net.Listener { return &limitListener{Listener: l, s: s} }

type limitListener struct {
	net.Listener
	s *Server
}

func (ll *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := ll.Listener.Accept()
		if err != nil {
			return nil, err
		}
		uc, ok := c.(*net.UnixConn)
		if !ok {
			return c, nil
		}
		uid, ok := peerUID(uc)
		if !ok || uid == 0 {
			return c, nil // no credentials: every request on it is refused anyway
		}
		t := &ll.s.tenants
		l := t.get()
		tenant := ll.s.tenantOf(uid)
		t.mu.Lock()
		u := t.user(tenant, l, time.Now())
		if u.conns >= l.ConnectionsPerUser {
			// Held refusals are bounded too: past maxHeldRefusals the connection is just
			// closed, so refusing cannot cost the daemon more descriptors than that.
			held := u.refusing < maxHeldRefusals
			if held {
				u.refusing++
			}
			who := session.Caller{UID: uid}
			if tenant != uid {
				who.RangeOwner = tenant
			}
			msg := fmt.Sprintf("%s already has %d connections open; at most %d (limits.connections_per_user)", who.TenantName(), u.conns, l.ConnectionsPerUser)
			t.mu.Unlock()
			ll.s.metrics.refusals.WithLabelValues(string(errcode.TooManyCalls), "connections_per_user").Inc()
			if !held {
				c.Close()
				continue
			}
			go func() {
				refuseConn(c, msg)
				t.mu.Lock()
				u.refusing--
				t.mu.Unlock()
			}()
			continue
		}
		u.conns++
		t.mu.Unlock()
		return &limitedConn{UnixConn: uc, release: func() {
			t.mu.Lock()
			u.conns--
			t.mu.Unlock()
		}}, nil
	}
}

// limitKeys are the limits a refusal may name, as "(limits.KEY)" in its message: the closed
// set of the refusal counter's limit label.
var limitKeys = []string{"calls_per_user", "connections_per_user", "sessions_per_user", "tasks_per_user",
	"requests_per_second_per_user", "batch_calls", "response_bytes", "persisted_bytes_per_user"}

// refusedBy reports whether an error of code is a limit's refusal, and which limit it names.
func refusedBy(code errcode.Code, msg string) (limit string, ok bool) {
	if code != errcode.TooManyCalls && code != errcode.RateLimited && code != errcode.TooLarge {
		return "", false
	}
	for _, k := range limitKeys {
		if strings.Contains(msg, "(limits."+k) {
			return k, true
		}
	}
	return "other", true
}

// maxHeldRefusals bounds the connections over the cap one uid has waiting for their 429.
const maxHeldRefusals = 4

// refuseConn answers a connection over the cap with a 429 after refusalDelay (so a client
// that reconnects at once does not spin the daemon's accept loop) and closes it; a client
// that does not read is not waited for.
func refuseConn(c net.Conn, msg string) {
	defer c.Close()
	time.Sleep(refusalDelay)
	_ = c.SetDeadline(time.Now().Add(time.Second))
	body := fmt.Sprintf(`{"error":{"class":%q,"message":%q}}`+"\n", errcode.TooManyCalls, msg)
	fmt.Fprintf(c, "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
}

func peerUID(uc *net.UnixConn) (uint32, bool) {
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil || serr != nil || cred == nil {
		return 0, false
	}
	return cred.Uid, true
}

// limitedConn gives its uid's connection slot back when closed.
type limitedConn struct {
	*net.UnixConn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	c.once.Do(c.release)
	return c.UnixConn.Close()
}

// ConnContext is ConnContext for connections from LimitListener; with SetPeerCgroups on, it
// also records where the peer runs (Peer.Cgroup).
func (s *Server) ConnContext(ctx context.Context, c net.Conn) context.Context {
	if lc, ok := c.(*limitedConn); ok {
		c = lc.UnixConn
	}
	return connContext(ctx, c, s.peerCgroups.Load())
}

// SetPeerCgroups says whether each connection's peer has its cgroups read (Peer.Cgroup): needed
// only while confined calls can make unix sockets at all; it costs each connection ~50 µs.
func (s *Server) SetPeerCgroups(on bool) { s.peerCgroups.Store(on) }

// extendWrite moves the connection's write deadline to now+WriteTimeout: each write of a
// response (and the server's final flush after the handler) must complete within it, so a
// client that stops reading cannot hold a call, its results or a stream pump forever.
func (s *Server) extendWrite(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.tenants.get().WriteTimeout))
}
