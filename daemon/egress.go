package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"

	"go.uber.org/zap"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/egress"
	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/session"
)

// egressProxy is the filtering proxy of the sessions in network mode proxy: one listener per
// session, opened inside the session's own network namespace (a socket keeps the namespace it
// was made in), so the session's programs reach it on their loopback and nothing else.
type egressProxy struct {
	srv  *egress.Server
	port int
	log  *zap.Logger
	// caSHA256 is the interception CA's fingerprint, when the proxy intercepts TLS.
	caSHA256 string

	mu        sync.Mutex
	listeners map[string]net.Listener
	owners    map[string]string // session -> "uid:N", for the proxy's per-owner cap
	wg        sync.WaitGroup
}

func newEgressProxy(c *Core, cfg *config.Config, log *zap.Logger) *egressProxy {
	var private []netip.Prefix
	for _, s := range cfg.Network.AllowPrivateCIDRs {
		private = append(private, netip.MustParsePrefix(s)) // Validate parsed them
	}
	e := &egressProxy{
		srv: &egress.Server{
			Decide: c.decideEgress, DecideAddr: c.decideEgressAddr, Audit: c.auditEgress, AllowPrivate: private,
			AllowECH:     cfg.Network.AllowEncryptedClientHello,
			RatePerOwner: cfg.Limits.EgressRequestsPerSecondPerUser, BurstPerOwner: cfg.Limits.EgressRequestsBurstPerUser,
			Logger: log,
		},
		port:      cfg.Network.ProxyPort,
		log:       log.Named("egress"),
		listeners: map[string]net.Listener{},
		owners:    map[string]string{},
	}
	// One user's sessions share one connection cap and one pace of requests, so they cannot
	// take every connection the proxy serves from other users, nor fill the audit log at will.
	// A session without a listener (network none or host) still reaches the proxy through
	// WebFetch (dial), so its owner comes from the store: under a name of its own ("") every
	// user's such sessions would share one cap and one pace.
	e.srv.Owner = func(id string) string {
		e.mu.Lock()
		name, ok := e.owners[id]
		e.mu.Unlock()
		if ok {
			return name
		}
		if s, err := c.store.Get(session.Caller{UID: 0}, id); err == nil {
			return ownerName(s.Owner.Tenant())
		}
		return "" // the session is gone: the policy refuses whatever it asks
	}
	return e
}

// ownerName names a tenant's share of the proxy's connection cap and pace (session.Caller.Tenant).
func ownerName(uid uint32) string { return "uid:" + strconv.FormatUint(uint64(uid), 10) }

// open starts serving s's proxy inside its network namespace.
func (e *egressProxy) open(c *Core, s *session.Session) error {
	l, err := c.sandbox.ListenInSession(s.ID, "127.0.0.1:"+strconv.Itoa(e.port))
	if err != nil {
		return errcode.New(errcode.SandboxSetup, fmt.Errorf("start the session's egress proxy: %w", err))
	}
	e.mu.Lock()
	e.listeners[s.ID] = l
	e.owners[s.ID] = ownerName(s.Owner.Tenant())
	e.mu.Unlock()
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		if err := e.srv.Serve(l, s.ID); err != nil && !errors.Is(err, egress.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			e.log.Warn("egress proxy", zap.String("session", s.ID), zap.Error(err))
		}
	}()
	return nil
}

// close ends the session's proxy and every connection it carries.
func (e *egressProxy) close(id string) {
	e.mu.Lock()
	l := e.listeners[id]
	delete(e.listeners, id)
	delete(e.owners, id)
	e.mu.Unlock()
	if l != nil {
		l.Close()
	}
}

// dial opens a connection to the proxy for session on behalf of the daemon's own client (the
// WebFetch tool): one end of an in-process pipe, the other served as a session's connection
// is, with o saying what it carries. The tool's requests thus meet the same rules, guard and
// audit as the session's programs, whatever the session's network mode.
func (e *egressProxy) dial(_ context.Context, session string, o egress.Origin) (net.Conn, error) {
	client, server := net.Pipe()
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		if err := e.srv.ServeConn(server, session, o); err != nil && !errors.Is(err, egress.ErrServerClosed) {
			e.log.Warn("egress proxy", zap.String("session", session), zap.String("via", o.Via), zap.Error(err))
		}
	}()
	return client, nil
}

// shutdown ends every session's proxy and waits for them.
func (e *egressProxy) shutdown() {
	_ = e.srv.Close()
	e.mu.Lock()
	for id, l := range e.listeners {
		l.Close()
		delete(e.listeners, id)
	}
	e.mu.Unlock()
	e.wg.Wait()
}

// networkFor decides a new session's network: the one asked for, or the daemon's default; host
// only for root, for network.host_users, or where sandbox.allow_network gives it to everyone;
// never more than a parent's (none < proxy < host).
func networkFor(cfg *config.Config, caller session.Caller, asked string, parent *session.Session) (string, error) {
	mode := asked
	if mode == "" {
		mode = cfg.EffectiveNetworkMode()
		if parent != nil && networkRank[parent.Network] < networkRank[mode] {
			mode = parent.Network
		}
	}
	if _, ok := networkRank[mode]; !ok {
		return "", errcode.New(errcode.Validation, fmt.Errorf("network %q: want none, proxy or host", mode))
	}
	if parent != nil && networkRank[mode] > networkRank[parent.Network] {
		return "", errcode.New(errcode.Validation, fmt.Errorf("network %s is wider than the parent session's (%s): a child session never exceeds its parent", mode, parent.Network))
	}
	if mode == config.NetworkHost && caller.UID != 0 && !cfg.Sandbox.AllowNetwork &&
		!slices.Contains(cfg.Network.HostUsers, caller.User) && !slices.Contains(cfg.Network.HostUsers, strconv.FormatUint(uint64(caller.UID), 10)) {
		return "", errcode.New(errcode.PermissionDenied, fmt.Errorf("network host is not permitted for uid %d (network.host_users); use network proxy", caller.UID))
	}
	return mode, nil
}

var networkRank = map[string]int{config.NetworkNone: 0, config.NetworkProxy: 1, config.NetworkHost: 2}

// decideEgress decides one proxied connection (for plain HTTP, each request) with the session's
// rules of every source, evaluated by the policy engine as a WebFetch of that host, and the
// config's domain lists. A request that shows its method and path (plain HTTP) meets
// WebFetch(METHOD host/path) rules too; a tunnel (CONNECT, SOCKS) shows only its host, so such
// a rule naming the host refuses it unless a host-level allow at least as strong (a domain rule
// of the rule's source or a stronger one, or network.allowed_domains, which is the admin's)
// says the host may be reached by host alone. A deny anywhere wins; what no rule allows is
// refused: nobody is there to ask about a connection.
func (c *Core) decideEgress(ctx context.Context, r egress.Request) egress.Verdict {
	s, err := c.store.Get(session.Caller{UID: 0}, r.Session)
	if err != nil {
		return egress.Verdict{Reason: "the session is gone"}
	}
	if reason := s.Suspended(); reason != "" {
		return egress.Verdict{Reason: reason}
	}
	rs := s.RuleSet()
	if rs == nil {
		return egress.Verdict{Reason: "the session's rules are not loaded"}
	}
	v := c.egressVerdict(ctx, r, s, rs)
	switch {
	case v.Allow && r.Method == "":
		// A tunnel allowed by host although a method/path deny or ask names the host (a
		// host-level allow at least as strong, or the admin's allowed_domains): its TLS is
		// decided by host, but a stream the proxy cannot read may be the request that rule
		// is about, so the proxy refuses such a stream. Every source's rules count: an
		// admin's deny is no weaker for a user's domain allow.
		_, v.PathRules = rs.WebRule(r.Host, permission.Deny, permission.Ask)
		v.PathRules = v.PathRules || c.policy.CustomReadsHTTP()
	case v.Allow:
		// A request whose method the rules tell apart: a POST form's _method field could
		// make it another, so the proxy reads the form first.
		_, v.PathRules = rs.WebRule(r.Host, permission.Deny, permission.Ask, permission.Allow)
		v.PathRules = v.PathRules || c.policy.CustomReadsHTTP()
	}
	return v
}

// egressVerdict is decideEgress's decision for the session s with rules rs.
func (c *Core) egressVerdict(ctx context.Context, r egress.Request, s *session.Session, rs *permission.RuleSet) egress.Verdict {
	cfg := c.Config()
	snap := s.Snapshot()
	facts := &permission.Facts{
		Tool: "WebFetch", Mode: permission.ModeDontAsk,
		Input:     map[string]any{"url": fmt.Sprintf("%s://%s:%d%s", r.Kind, r.Host, r.Port, r.Path)},
		Caller:    permission.Caller{UID: snap.Owner.UID, GID: snap.Owner.GID, User: snap.Owner.User},
		Cwd:       snap.Cwd,
		Dirs:      append([]string{snap.Root}, snap.AdditionalDirs...),
		Home:      snap.Owner.Home,
		ToolFacts: permission.ToolFacts{Domain: r.Host},
	}
	if r.Method != "" {
		facts.HTTP = &permission.HTTPFact{Method: r.Method, Path: r.Path}
	}
	configAllow := func() (egress.Verdict, bool) {
		for _, p := range cfg.Network.AllowedDomains {
			if permission.MatchDomain(p, r.Host) {
				return egress.Verdict{Allow: true, Reason: fmt.Sprintf("%s is in network.allowed_domains", r.Host), Rule: "network.allowed_domains: " + p}, true
			}
		}
		return egress.Verdict{}, false
	}
	d, err := c.policy.Decide(ctx, facts, rs)
	if err != nil {
		return egress.Verdict{Reason: "policy evaluation failed: " + err.Error()}
	}
	if p := c.deniedDomain(r.Host); p != "" {
		return egress.Verdict{Reason: fmt.Sprintf("%s is in network.denied_domains", r.Host), Rule: "network.denied_domains: " + p}
	}
	if r.Approved && d.Behavior != permission.Allow && approvable[d.Step] {
		// A person approved this very request (the WebFetch call they were asked about):
		// that is the allow it lacked. Deny rules, custom denies and denied_domains still won.
		return egress.Verdict{Allow: true, Reason: "a person approved this " + r.Via + " call", Rule: "approval"}
	}
	if d.Behavior == permission.Deny && d.Step != "mode" {
		if r.Method == "" && isWebRule(d.Rule) {
			// A tunnel refused only because a method/path rule names its host: the admin's
			// allowed_domains is a host-level allow as strong as any rule.
			if v, ok := configAllow(); ok {
				v.Reason += "; tunnels to it are decided by host only, so " + d.Rule + " applies to plain HTTP only"
				return v
			}
		}
		return egress.Verdict{Reason: d.Reason, Rule: d.Rule}
	}
	if d.Behavior == permission.Allow {
		return egress.Verdict{Allow: true, Reason: d.Reason, Rule: d.Rule}
	}
	if v, ok := configAllow(); ok {
		return v
	}
	if r.Method == "" {
		if rule, ok := rs.WebRule(r.Host, permission.Allow); ok {
			return egress.Verdict{Reason: fmt.Sprintf("a tunnel (HTTPS, CONNECT, SOCKS) to %s shows only its host, and %s covers only plain HTTP requests it can see; allow the host with WebFetch(domain:%s) to permit HTTPS to it, decided by host only", r.Host, rule, r.Host)}
		}
	}
	reason := fmt.Sprintf("no rule allows %s; allow it with WebFetch(domain:%s) or network.allowed_domains", r.Host, r.Host)
	if a, err := netip.ParseAddr(r.Host); err == nil && !a.IsGlobalUnicast() || err == nil && a.IsPrivate() {
		reason += fmt.Sprintf(", and since %s is not a public address, the administrator must also list it in network.allow_private_cidrs", r.Host)
	}
	return egress.Verdict{Reason: reason}
}

// decideEgressAddr decides an address the allowed name r.Host resolved to: an address is no
// less denied reached by a name (a wildcard DNS name spells any address) than by number, so
// network.denied_domains' IP entries and the session's WebFetch deny and ask rules naming an
// IP hold it. Only rules naming an address are evaluated again: a name's allow does not need
// one for its address.
func (c *Core) decideEgressAddr(ctx context.Context, r egress.Request, addr netip.Addr) egress.Verdict {
	// A NAT64, 6to4 or IPv4-compatible address reaches the IPv4 address it carries, by that
	// address's deny as much as by its own.
	addrs := []netip.Addr{addr}
	if v4, ok := permission.CarriedIPv4(addr); ok {
		addrs = append(addrs, v4)
	}
	for _, a := range addrs {
		ip := a.String()
		if p := c.deniedDomain(ip); p != "" {
			return egress.Verdict{Reason: fmt.Sprintf("%s resolves to %s, which is in network.denied_domains", r.Host, addrText(addr, a)), Rule: "network.denied_domains: " + p}
		}
	}
	s, err := c.store.Get(session.Caller{UID: 0}, r.Session)
	if err != nil {
		return egress.Verdict{Reason: "the session is gone"}
	}
	rs := s.RuleSet()
	if rs == nil {
		return egress.Verdict{Reason: "the session's rules are not loaded"}
	}
	if !rs.HoldsAddresses() {
		return egress.Verdict{Allow: true}
	}
	for _, a := range addrs {
		byAddr := r
		byAddr.Host = a.String()
		if v := c.egressVerdict(ctx, byAddr, s, rs); !v.Allow && v.Rule != "" {
			v.Reason = fmt.Sprintf("%s resolves to %s: %s", r.Host, addrText(addr, a), v.Reason)
			return v
		}
	}
	return egress.Verdict{Allow: true}
}

// addrText names the address a name resolved to, and the IPv4 address it carries when that is
// the one a deny names.
func addrText(resolved, denied netip.Addr) string {
	if resolved == denied {
		return resolved.String()
	}
	return fmt.Sprintf("%s (which carries %s)", resolved, denied)
}

// deniedDomain is the network.denied_domains entry host matches, "" for none.
func (c *Core) deniedDomain(host string) string {
	return matchingDomain(c.Config().Network.DeniedDomains, host)
}

// allowedDomain names the network.allowed_domains entry host matches, "" for none.
func (c *Core) allowedDomain(host string) string {
	return matchingDomain(c.Config().Network.AllowedDomains, host)
}

// matchingDomain is the first of the domain patterns that host matches, "" for none.
func matchingDomain(patterns []string, host string) string {
	for _, p := range patterns {
		if permission.MatchDomain(p, host) {
			return p
		}
	}
	return ""
}

// approvable are the decision steps a person's approval answers: an ask (by rule, custom Rego
// or hook) and the mode's lack of an allow. Never a deny.
var approvable = map[string]bool{"ask_rule": true, "custom_ask": true, "hook_ask": true, "mode": true}

// isWebRule reports whether rule text is a WebFetch(METHOD host/path) rule.
func isWebRule(text string) bool {
	r, err := permission.ParseRule(text)
	return err == nil && r.Kind == permission.KindWeb
}

// maxNetPathBytes is how much of a request's path a net.connect record keeps: a proxied program
// sends requests far faster than the API takes calls, so its records are kept small.
const maxNetPathBytes = 4 << 10

// maxNetDetailBytes bounds each other text of a net.connect record (the reason, the rule, the
// method): a refusal's reason quotes what the program sent.
const maxNetDetailBytes = 512

// auditEgress records one proxy decision with its session's owner as the caller: the owner's
// own audit queries then show their sessions' connections, and an admin's can pick them out
// by user. A connection of a session deleted meanwhile is recorded without one.
func (c *Core) auditEgress(ev egress.Event) error {
	var owner *audit.Caller
	if s, err := c.store.Get(session.Caller{UID: 0}, ev.Session); err == nil {
		owner = auditCaller(s.Owner)
		owner.PID = 0 // the proxy knows the session, not which of its processes connected
	}
	return c.recorder.netConnect(ev, owner)
}

// netConnect records one proxy decision (kind net.connect). An error refuses the connection.
func (r *recorder) netConnect(ev egress.Event, owner *audit.Caller) error {
	detail := map[string]string{
		"kind": string(ev.Kind), "host": audit.TruncateDetail(ev.Host, maxNetDetailBytes), "port": strconv.Itoa(ev.Port),
		"allowed": strconv.FormatBool(ev.Allowed), "reason": audit.TruncateDetail(ev.Reason, maxNetDetailBytes),
	}
	path := audit.TruncateDetail(ev.Path, maxNetPathBytes)
	for k, v := range map[string]string{"method": ev.Method, "path": path, "rule": ev.Rule, "via": ev.Via} {
		if v != "" {
			if k != "path" {
				v = audit.TruncateDetail(v, maxNetDetailBytes)
			}
			detail[k] = v
		}
	}
	if ev.IP != nil {
		detail["ip"] = ev.IP.String()
	}
	return r.log.AppendWritten(context.Background(), &audit.Record{Kind: audit.KindNetConnect, Caller: owner, Session: ev.Session, Detail: detail})
}
