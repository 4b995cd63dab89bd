package daemon

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/approval"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/executor"
	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/protocol"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/session"
)

// Version is the daemon's version, reported by healthz.
var Version = "0.1.0"

// Core is the daemon's logic behind the API: sessions and their lifecycle, calls, tools.
type Core struct {
	log      *zap.Logger
	cfg      atomic.Pointer[config.Config]
	ids      *identities
	store    *session.Store
	pipeline *executor.Pipeline
	host     *executor.Host
	sandbox  *sandbox.Sandbox
	recorder *recorder
	policy   *policy.Engine
	// cliRules are rules given on the daemon's command line (source cliArg).
	cliRules *permission.Settings
	started  time.Time
	// activity is when each session last served a request (sessions.idle_timeout_sec).
	activity activity
	// approvals are the asks waiting for a person, every owner's.
	approvals *approval.Queue
	// egress is the filtering proxy of sessions in network mode proxy.
	egress *egressProxy
	// reloads is how the last loads of the configuration and the policy went.
	reloads reloadState
	// settings are the settings files each session's rules were read from.
	settings settingsWatch
}

var _ api.Backend = (*Core)(nil)

// Config is the configuration in force.
func (c *Core) Config() *config.Config { return c.cfg.Load() }

// Identify implements api.Backend.
//
// Nothing sandboxd runs may use sandboxd: a call that reached the daemon (a hard link to its
// socket, with sandbox.allow_unix_sockets) would make itself a session of any mode, or answer
// its own asks. Path hiding keeps the socket out of sight; this refuses by the kernel's account
// of where the process that connected sits.
func (c *Core) Identify(p api.Peer) (session.Caller, error) {
	switch {
	case p.Gone:
		return session.Caller{}, errors.New("the process that opened this connection has exited; connect from the process that makes the requests")
	case len(p.Cgroup) > 0 && c.host != nil && c.host.Sandbox() != nil && c.host.Sandbox().Holds(p.Cgroup):
		return session.Caller{}, errors.New("this connection comes from inside a sandboxd call or worker; nothing sandboxd runs may use sandboxd")
	}
	return c.ids.Identify(p)
}

// Health implements api.Backend.
func (c *Core) Health(caller session.Caller) protocol.Health {
	h := protocol.Health{
		Status: "ok", Version: Version, Audit: "ok",
		Sessions: len(c.store.List(caller)),
		Uptime:   time.Since(c.started).Round(time.Second).String(),
		Caller:   protocol.Owner{UID: caller.UID, GID: caller.GID, User: caller.User},
		Admin:    caller.Admin,
	}
	if !c.recorder.healthy() {
		h.Status, h.Audit = "degraded", "unavailable: calls are refused until the audit log can be written"
	}
	if !c.reloads.ok(&c.reloads.rules) {
		h.Status = "degraded"
	}
	if caller.Admin {
		// Admins reload; what a refused reload says (file names, parse errors) is theirs.
		h.Reload = c.reloads.summary()
	}
	return h
}

// checkDirs requires absolute, clean directory paths. Whether they exist and the owner may
// use them is checked by the owner's own confined child, never by the daemon as root.
func checkDirs(cwd string, extra []string, max int) error {
	if err := checkDirCount(extra, max); err != nil {
		return err
	}
	for _, d := range append([]string{cwd}, extra...) {
		if d == "" {
			return errcode.Msg(errcode.Validation, "cwd is required: give the session's working directory as an absolute path")
		}
		if !filepath.IsAbs(d) {
			return errcode.New(errcode.Validation, fmt.Errorf("directory %q must be an absolute path", d))
		}
		if filepath.Clean(d) != d {
			return errcode.New(errcode.Validation, fmt.Errorf("directory %q is not clean; use %q", d, filepath.Clean(d)))
		}
	}
	return nil
}

// checkDirCount bounds a session's additional directories (limits.dirs_per_session): each is
// resolved as the owner and mounted in every call, a cost the owner sets and the daemon pays.
func checkDirCount(extra []string, max int) error {
	if len(extra) > max {
		return errcode.New(errcode.Validation, fmt.Errorf("%d additional directories, over limits.dirs_per_session (%d): each is mounted in every call; give a common parent instead", len(extra), max))
	}
	return nil
}

// CreateSession implements api.Backend.
func (c *Core) CreateSession(ctx context.Context, caller session.Caller, p session.Params) (session.Snapshot, error) {
	cfg := c.Config()
	if err := checkDirs(p.Cwd, p.AdditionalDirs, cfg.Limits.DirsPerSession); err != nil {
		return session.Snapshot{}, err
	}
	if p.ParentID != "" {
		parent, err := c.store.Get(caller, p.ParentID)
		if err != nil {
			return session.Snapshot{}, errcode.New(errcode.NotFound, fmt.Errorf("parent session %q not found", p.ParentID))
		}
		if parent.Owner.UID != caller.UID {
			// A child's asks go to its parent's queue, answered by the parent's owner, and its
			// calls run as the child's: root's child of a user's session ran as root what that
			// user approved, and a remembered rule went into root's settings.
			return session.Snapshot{}, errcode.Msg(errcode.PermissionDenied, "a sub-agent session belongs to its parent's owner: make it as that user")
		}
		p.Parent = parent
		if p.Mode == "" {
			// A sub-agent without a mode of its own takes its parent's: never wider.
			p.Mode = parent.Mode()
		}
	} else if p.Mode == permission.ModeBubble {
		return session.Snapshot{}, errcode.Msg(errcode.Validation, "bubble mode routes asks to a parent session: give parent_id")
	}
	owned := 0
	for _, s := range c.store.All() {
		if s.Owner.Tenant() == caller.Tenant() {
			owned++
		}
	}
	if owned >= cfg.EffectiveSessionsPerUser() && !c.evictDisposable(ctx, caller) {
		return session.Snapshot{}, errcode.New(errcode.Conflict, fmt.Errorf("%s already has %d sessions (limits.sessions_per_user); delete one first", caller.TenantName(), owned))
	}
	network, err := networkFor(cfg, caller, p.Network, p.Parent)
	if err != nil {
		return session.Snapshot{}, err
	}
	p.Network = network
	p.Umask = processUmask(caller.PID)
	owner := caller
	owner.Admin = false // the owner identity runs tools; admin rights are per request
	p.ReadStateBytes, p.BudgetChars = cfg.ReadStateBytes, cfg.SessionBudgetChars
	s := c.store.Create(owner, p)
	// In the store now, it is rebuilt with its parent's (and by a reload): each waits for its
	// rules to be set from what it read here, then rebuilds from what holds by then. What is
	// asked of the owner's worker meanwhile is bounded (ownerPaced).
	s.RulesMu.Lock()
	ctx, cancelPaced := context.WithTimeout(ctx, ownerPaced)
	defer cancelPaced()
	rulesHeld := true
	defer func() {
		if rulesHeld {
			s.RulesMu.Unlock()
		}
	}()
	fail := func(err error) (session.Snapshot, error) {
		if removed, rerr := c.store.Remove(caller, s.ID); rerr == nil {
			for _, r := range removed {
				c.release(r)
			}
		}
		return session.Snapshot{}, err
	}
	// The owner's own confined worker checks the directory: the daemon never stats a user
	// path as root.
	if err := c.checkDirsAsOwner(ctx, s, s.Dirs()); err != nil {
		return fail(err)
	}
	if err := recordHomeLeadsTo(s); err != nil {
		return fail(err)
	}
	rs, err := c.loadRules(ctx, s, p.Rules)
	if err != nil {
		return fail(err)
	}
	if afterNewSessionRules != nil {
		afterNewSessionRules(s)
	}
	eff := rs.Effective()
	mode, err := eff.ResolveMode(p.Mode)
	if err != nil {
		return fail(errcode.New(errcode.Validation, err))
	}
	extra := mergeDirs(p.AdditionalDirs, eff.AdditionalDirectories)
	if err := checkDirCount(extra, cfg.Limits.DirsPerSession); err != nil {
		return fail(err)
	}
	// The settings' dirs are the session's as much as --add-dir's: where they lead is
	// recorded too, or a settings dir replaced by a link would move the session with it.
	if err := recordLeadsTo(s, eff.AdditionalDirectories); err != nil {
		return fail(err)
	}
	if err := c.checkChild(ctx, s, mode, append([]string{s.Root}, extra...)); err != nil {
		return fail(err)
	}
	s.Apply(session.Update{Mode: &mode, AdditionalDirs: &extra})
	s.SetRuleSet(rs)
	s.RulesMu.Unlock()
	rulesHeld = false
	if s.Network == config.NetworkProxy {
		if err := c.egress.open(c, s); err != nil {
			return fail(err)
		}
	}
	if s.Closed() || s.Parent != nil && s.Parent.Closed() {
		// Its parent was deleted while it was made: deleting a session ends the ones below it.
		return fail(errcode.New(errcode.NotFound, fmt.Errorf("parent session %q was deleted", p.ParentID)))
	}
	if err := c.recorder.session(ctx, "session.create", caller, s); err != nil {
		return fail(err)
	}
	return s.Snapshot(), nil
}

// afterNewSessionRules, when set (by a test), runs in CreateSession between reading the rules
// and putting them in force: where a parent's change could once slip in.
var afterNewSessionRules func(*session.Session)

// checkAdminSettings loads the admin settings files (policy_dir's *.json) and the daemon's
// own rules alone. Every session's rule set includes them, so one that does not load (bad
// JSON, a malformed rule, a file others may write) refuses every new session and suspends
// the open ones; a session's error names the file to its user, and this says it once to
// the admins, in the status and the metrics, instead of a daemon that reports ok.
func (c *Core) checkAdminSettings() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _, err := permission.Load(ctx, permission.LoadOptions{PolicyDir: c.Config().PolicyDir, CLIArgs: c.cliRules})
	return err
}

// reloadRules rebuilds every session's rule set after the policy reloaded (admin settings
// may have changed). A session whose rules fail to load is suspended: its old rules may lack
// the admin's new deny, so every call is denied until a rebuild succeeds. Both are audited.
func (c *Core) reloadRules() {
	c.rebuildRules(context.Background(), func(*session.Session) bool { return true })
	c.recheckTunnels(func(string) bool { return true })
}

// stopAllCommands stops every session's running commands, as a narrowing of each (a reload
// that confines calls more).
func (c *Core) stopAllCommands() {
	for _, s := range c.store.All() {
		s.MarkNarrowed()
		c.host.StopTasks(s, executor.KilledNarrowed)
	}
}

// recheckTunnels asks the policy again about the open tunnels of the sessions which selects,
// ending those it now refuses: each was decided when it opened.
func (c *Core) recheckTunnels(which func(id string) bool) {
	if c.egress != nil {
		c.egress.srv.Recheck(context.Background(), which)
	}
}

// rebuildTimeout bounds one session's rebuild. Each has its own: under one deadline for all,
// one user's slow sessions (thousands of rules over a big tree) used it up and every session
// after them, other users' too, was suspended.
const rebuildTimeout = 20 * time.Second

// ownerPaced bounds what a request does under a session's RulesMu that its owner sets the
// pace of (their worker reads their dirs and settings; they may stop it): a reload's network
// revocation and rebuild wait for that lock.
const ownerPaced = rebuildTimeout

// rebuildRules rebuilds the rule sets of the sessions which selects, suspending those whose
// rules fail to load (see reloadRules). Owners go side by side, each one's sessions in turn,
// so no user's sessions keep another's waiting on old rules. Each session is rebuilt under
// its own lock alone: one user's slow rebuilds (settings read at
// their deadline, a parent with many sub-agents) hold up no other session's.
func (c *Core) rebuildRules(ctx context.Context, which func(*session.Session) bool) {
	var selected []*session.Session
	for _, s := range c.store.All() {
		if which(s) {
			selected = append(selected, s)
		}
	}
	// Parents before their sub-agents, whatever the clock said at their making: a child's
	// rules are built from its parent's rule set in force (inheritedRules).
	slices.SortStableFunc(selected, func(a, b *session.Session) int { return depth(a) - depth(b) })
	// Each owner's sessions in their order, the owners side by side: a rebuild waits on its
	// owner's worker (up to rebuildTimeout, which the owner paces by stopping it), and one
	// user's stalled sessions must not hold another's on rules an admin has narrowed.
	byTenant := map[uint32][]*session.Session{}
	for _, s := range selected {
		byTenant[s.Owner.Tenant()] = append(byTenant[s.Owner.Tenant()], s)
	}
	var wg sync.WaitGroup
	for _, ss := range byTenant {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, s := range ss {
				c.rebuildSession(ctx, s)
			}
		}()
	}
	wg.Wait()
}

// rebuildSession rebuilds one session's rule set from the rules it has now (rebuildRules).
func (c *Core) rebuildSession(ctx context.Context, s *session.Session) {
	s.RulesMu.Lock()
	defer s.RulesMu.Unlock()
	if err := networkPermitted(c.Config(), s); err != nil {
		// Not resumed by rules that load: the network it has is no longer its owner's.
		c.revokeNetwork(ctx, s, err)
		return
	}
	sctx, cancel := context.WithTimeout(ctx, rebuildTimeout)
	rs, err := c.loadRules(sctx, s, s.Snapshot().Rules)
	cancel()
	if err != nil {
		c.suspend(ctx, s, fmt.Errorf("session rules could not be rebuilt: %w", err))
		return
	}
	was, old := s.Suspended(), s.RuleSet()
	s.SetRuleSet(rs)
	if old != nil && permission.Narrows(old, rs) {
		// A reload (the admin's policy, a settings file) that takes something away: what the
		// session runs was decided under the rules it had.
		s.MarkNarrowed()
		c.host.StopTasks(s, executor.KilledNarrowed)
	}
	if was != "" {
		if aerr := c.recorder.sessionEvent(ctx, audit.KindSessionResume, s, nil); aerr != nil {
			c.log.Error("audit session resumption", zap.Error(aerr))
		}
	}
}

// depth is how many sessions s lies below.
func depth(s *session.Session) int {
	n := 0
	for p := s.Parent; p != nil; p = p.Parent {
		n++
	}
	return n
}

// revokeNetworks suspends, at once, the sessions whose network the configuration in force no
// longer gives their owner (host taken from network.host_users or sandbox.allow_network): a
// session keeps the network namespace it was made with, so what a reload withdraws would
// otherwise stay with every session already open. A later reload that gives it back resumes
// them, with their rules rebuilt (rebuildRules checks the same).
func (c *Core) revokeNetworks(ctx context.Context) {
	// Each session on its own: one whose lock a request holds (at most ownerPaced, but its
	// owner may queue many) holds up no other's, nor the reload past revokeWait: it is revoked
	// when its lock is free.
	var wg sync.WaitGroup
	for _, s := range c.store.All() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.RulesMu.Lock() // after a rebuild that read an older configuration, not before
			defer s.RulesMu.Unlock()
			if err := networkPermitted(c.Config(), s); err != nil && s.Suspended() == "" {
				c.revokeNetwork(ctx, s, err)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(revokeWait):
	}
}

// revokeWait is how long a reload waits for the sessions' network revocations.
const revokeWait = 2 * time.Second

// suspend denies every call of s from now on with why, and audits it.
func (c *Core) suspend(ctx context.Context, s *session.Session, why error) {
	// The reason may quote what its owner wrote (a settings file's key): a bounded part of it.
	reason := fmt.Sprintf("%.2048s; recreate the session", why.Error())
	if s.Suspended() == reason {
		return // already, for the same reason: one record of it is enough
	}
	s.Suspend(reason)
	// Its rules are unknown now, and may deny what it runs: that stops, as for a narrowing.
	s.MarkNarrowed()
	c.host.StopTasks(s, executor.KilledNarrowed)
	c.log.Error("session suspended", zap.String("session", s.ID), zap.Error(why))
	if err := c.recorder.sessionEvent(ctx, audit.KindSessionSuspend, s, map[string]string{"reason": reason}); err != nil {
		c.log.Error("audit session suspension", zap.Error(err))
	}
}

// revokeNetwork suspends s and kills what it runs: a running command or background task holds
// the network it was started with, and the configuration no longer gives it to its owner.
// The session stays (suspended), so a reload that gives the network back resumes it.
func (c *Core) revokeNetwork(ctx context.Context, s *session.Session, why error) {
	c.suspend(ctx, s, why)
	if err := c.sandbox.KillSession(s.ID, "network_revoked"); err != nil {
		c.log.Warn("kill the processes of a session whose network was withdrawn", zap.String("session", s.ID), zap.Error(err))
	}
}

// networkPermitted says whether cfg still lets s's owner have the network s was made with.
func networkPermitted(cfg *config.Config, s *session.Session) error {
	if s.Network != config.NetworkHost {
		return nil // none and proxy are anyone's
	}
	if _, err := networkFor(cfg, s.Owner, config.NetworkHost, nil); err != nil {
		return fmt.Errorf("the configuration no longer permits this session's network: %w", err)
	}
	return nil
}

// checkDirsAsOwner asks the owner's worker whether each session directory exists and is a
// directory the owner can use.
func (c *Core) checkDirsAsOwner(ctx context.Context, s *session.Session, dirs []string) error {
	for _, d := range dirs {
		info, err := c.host.ResolveInfo(ctx, s, d)
		if errcode.Of(err) == errcode.Unavailable {
			return err // the daemon's own trouble (its state volume full), not the directory's
		}
		if err != nil && errcode.Setup(err).Code == errcode.RateLimited {
			return errcode.New(errcode.RateLimited, err) // the owner's share of the daemon spent
		}
		if err != nil {
			return errcode.New(errcode.Validation, fmt.Errorf("directory %s is not usable by uid %d: %w", d, s.Owner.UID, err))
		}
		if !info.IsDir {
			return errcode.New(errcode.Validation, fmt.Errorf("%s is not a directory", d))
		}
	}
	o := s.Owner
	if d, err := sandbox.Unsearchable(o.UID, o.GID, o.Groups, dirs); err != nil {
		return errcode.New(errcode.SandboxSetup, fmt.Errorf("look at the session's directories as uid %d: %w", o.UID, err))
	} else if d != "" {
		return errcode.New(errcode.Validation, fmt.Errorf("directory %s is not usable by uid %d: it cannot enter it (no search permission)", d, o.UID))
	}
	return recordLeadsTo(s, dirs)
}

// recordLeadsTo records where each of dirs, the session's, leads now, as a plan resolves it
// (Session.LeadsTo): a dir replaced by a link later is refused.
func recordLeadsTo(s *session.Session, dirs []string) error {
	o := s.Owner
	to, err := sandbox.ResolveDirs(o.UID, o.GID, o.Groups, dirs)
	if err != nil {
		return errcode.New(errcode.SandboxSetup, fmt.Errorf("resolve the session's directories as uid %d: %w", o.UID, err))
	}
	for i, d := range dirs {
		s.SetLeadsTo(d, to[i])
	}
	return nil
}

// recordHomeLeadsTo records where the owner's home leads, resolved as the owner as the
// session's dirs are (recordLeadsTo): the daemon never follows a user's link with its own
// privileges. A rule anchored at the home (~/vault/**) holds where it leads too.
func recordHomeLeadsTo(s *session.Session) error {
	o := s.Owner
	if !filepath.IsAbs(o.Home) || filepath.Clean(o.Home) == "/" {
		return nil // no home of its own: ~ rules are widened or dropped (permission.NewRuleSet)
	}
	to, err := sandbox.ResolveDirs(o.UID, o.GID, o.Groups, []string{filepath.Clean(o.Home)})
	if err != nil {
		return errcode.New(errcode.SandboxSetup, fmt.Errorf("resolve the owner's home as uid %d: %w", o.UID, err))
	}
	s.SetHomeLeadsTo(to[0])
	return nil
}

// inheritedRules is what s's parent chain adds to its rules: its parent's rule set's deny and
// ask rules, of every source, and its session allow rules, each meaning what it means there
// (permission.RuleSet.Inheritable). The parent's rule set already holds its own parent's, and
// a rebuild of the parent's rules rebuilds s's after it (UpdateSession, rebuildRules).
func inheritedRules(s *session.Session) ([]permission.Rule, error) {
	par := s.Parent
	if par == nil {
		return nil, nil
	}
	prs := par.RuleSet()
	if prs == nil {
		return nil, errcode.New(errcode.Conflict, fmt.Errorf("the parent session %s has no rules in force yet; try again once it is made", par.ID))
	}
	if why := par.Suspended(); why != "" {
		// Its rule set in force may be older, and looser, than what holds it now: the child
		// is held with it, not decided by rules its parent no longer has.
		return nil, errcode.New(errcode.PermissionDenied, fmt.Errorf("the parent session %s is suspended (%s), and a sub-agent is decided by its parent's rules", par.ID, why))
	}
	return prs.Inheritable(par.ID), nil
}

// loadRules reads every settings source for the session: admin files as the daemon (they
// are root-owned), project and user files as the owner through its worker.
func (c *Core) loadRules(ctx context.Context, s *session.Session, rules session.Rules) (_ *permission.RuleSet, err error) {
	cfg := c.Config()
	snap := s.Snapshot()
	// A child is decided by its parent chain's rules and then its own: deny and ask win over
	// allow whatever their order, so a child's allow never outweighs a parent's deny or ask.
	// They come from the parent's rule set, not its rule texts: the parent's settings files
	// are not the child's (another root), and a text read against the child's root would
	// mean another path.
	inherited, err := inheritedRules(s)
	if err != nil {
		return nil, err
	}
	read := &readSettings{}
	defer func() {
		// A failed rebuild of a live session is kept too (a fix of the file that failed
		// rebuilds again); a session that failed to be made is no one's to watch.
		if err == nil || c.settings.has(s.ID) {
			c.settings.set(s.ID, read)
		}
	}()
	rs, _, err := permission.Load(ctx, permission.LoadOptions{
		PolicyDir: cfg.PolicyDir,
		CLIArgs:   c.cliRules,
		Session:   &permission.Settings{Allow: rules.Allow, Deny: rules.Deny, Ask: rules.Ask},
		// The root, not the cwd: a persisted `cd` never changes which project's settings
		// apply, nor what the rules' relative paths mean.
		Cwd:         snap.Root,
		ProjectRoot: snap.Root,
		Home:        snap.Owner.Home,
		// Where they lead, as the owner resolved them: a rule anchored at a dir reached
		// through a link holds under its real path too, the name a call may use.
		CwdLeadsTo:  s.LeadsTo()[snap.Root],
		HomeLeadsTo: s.HomeLeadsTo(),
		Inherited:   inherited,
		// The entries of the owner's files and the request are counted as they are read, so
		// a file of a million rules is refused before any is built; at least the default, as
		// entries count directories too.
		MaxOwnedEntries:    max(cfg.Limits.RulesPerSession, permission.DefaultMaxOwnedEntries),
		Owner:              ownerReader{host: c.host, s: s, read: read},
		ReadClaudeSettings: cfg.ReadClaudeSettings,
		// A cloned repository's settings may deny and ask, but only a session that says it
		// trusts its project lets those files allow (COMPAT 2: untrusted workspaces).
		TrustProject: s.TrustProject,
		OwnerUID:     snap.Owner.UID,
	})
	if err != nil {
		if cfg.PolicyDir != "" && strings.Contains(err.Error(), cfg.PolicyDir+"/") {
			return nil, errcode.New(errcode.Validation, fmt.Errorf("rules: the administrator's policy in %s does not load, so no session can be made until an administrator fixes it: %w", cfg.PolicyDir, err))
		}
		return nil, errcode.New(errcode.Validation, fmt.Errorf("rules: %w", err))
	}
	n, size := ownedRules(rs)
	if n > cfg.Limits.RulesPerSession {
		return nil, errcode.New(errcode.Validation, fmt.Errorf("rules: the session's own rules (its request's, its parents', its project's and user's settings files) number %d, over limits.rules_per_session (%d); each is checked on every call", n, cfg.Limits.RulesPerSession))
	}
	if size > maxOwnedRuleBytes {
		return nil, errcode.New(errcode.Validation, fmt.Errorf("rules: the session's own rules (its request's, its parents', its project's and user's settings files) hold %d bytes, over %d; each session keeps them compiled, about ten times that", size, maxOwnedRuleBytes))
	}
	return rs, nil
}

// maxOwnedRuleBytes bounds the text of the rules a session's owner controls. The count alone
// let 1 MB settings files of long rules hold 9 MB of the daemon per session, every session of
// their owner; real rule sets are a few KB.
const maxOwnedRuleBytes = 64 << 10

// ownedRules counts the rules of rs its session's owner controls (all but the admin's and the
// daemon's command line), and the bytes of their text.
func ownedRules(rs *permission.RuleSet) (n, size int) {
	for _, r := range rs.Rules() {
		if r.Source != permission.SourcePolicy && r.Source != permission.SourceCLI {
			n++
			size += len(r.Tool) + len(r.Content)
		}
	}
	return n, size
}

// ownerReader reads settings files as the session owner, through the owner's worker.
type ownerReader struct {
	host *executor.Host
	s    *session.Session
	read *readSettings // what was read, for settingsWatch; nil: not kept
}

// settingsMaxBytes bounds a settings file.
const settingsMaxBytes = 1 << 20

func (o ownerReader) ReadFile(ctx context.Context, path string) ([]byte, error) {
	b, _, _, err := o.ReadOwnedFile(ctx, path, filepath.Dir(path))
	return b, err
}

// ReadOwnedFile implements permission.OwnedFileReader.
func (o ownerReader) ReadOwnedFile(ctx context.Context, path, top string) ([]byte, uint32, string, error) {
	// One a call still running made where there was none: moved aside within half a second,
	// and never a source of rules (a background task's ~/.config/sandboxd/settings.json would
	// otherwise set the mode and rules of a session made meanwhile). Asked before and after
	// the read, and only of a file that exists: a running call guards every missing one, and
	// a missing file is no source at all.
	if o.read != nil {
		o.read.add(o.s, path)
	}
	sb := o.host.Sandbox()
	before := sb != nil && sb.MadeByRunningCall(path, o.s.Owner.UID)
	b, uid, err := o.host.ReadSettingsAs(ctx, o.s, path, settingsMaxBytes)
	if err == nil && (before || sb != nil && sb.MadeByRunningCall(path, o.s.Owner.UID)) {
		return nil, 0, "", fmt.Errorf("%s was made by a call that is still running (a protected path, moved aside when the call's sweep looks); try again once it is gone", path)
	}
	shared := ""
	if err == nil && uid == o.s.Owner.UID {
		// The file is the owner's; no one else may have changed it or what its name leads
		// to: another user's link to it (proj/.sandboxd/settings.json -> ~/notes.json), or a
		// dir of theirs holding it, makes it their choice (reported as theirs), and so does
		// a group-writable file or dir of the owner's in a team's shared dir. Looked at as
		// the owner, up to the project's dir or the home.
		o2 := o.s.Owner
		other, why, ferr := sandbox.OwnedAlone(o2.UID, o2.GID, o2.Groups, top, path)
		if ferr != nil {
			return nil, 0, "", ferr
		}
		uid, shared = other, why
	}
	return b, uid, shared, err
}

func mergeDirs(a, b []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, d := range append(append([]string(nil), a...), b...) {
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}

// Session implements api.Backend.
func (c *Core) Session(caller session.Caller, id string) (*session.Session, error) {
	s, err := c.store.Get(caller, id)
	if err == nil {
		c.activity.touch(id)
		// Whatever the request (its rules shown, its tasks listed), it sees the rules its
		// settings files say now.
		c.refreshSettings(context.Background(), s)
	}
	return s, err
}

// SessionView implements api.Backend.
func (c *Core) SessionView(caller session.Caller, id string) (*session.Session, error) {
	return c.store.See(caller, id)
}

// Sessions implements api.Backend.
func (c *Core) Sessions(caller session.Caller) []session.Snapshot {
	ss := c.store.List(caller)
	out := make([]session.Snapshot, len(ss))
	for i, s := range ss {
		out[i] = s.Snapshot()
	}
	return out
}

// UpdateSession implements api.Backend.
func (c *Core) UpdateSession(ctx context.Context, caller session.Caller, id string, u session.Update) (session.Snapshot, error) {
	s, err := c.store.Get(caller, id)
	if err != nil {
		return session.Snapshot{}, err
	}
	narrowings := s.Narrowings()
	if err := c.updateSession(ctx, caller, s, u); err != nil {
		return session.Snapshot{}, err
	}
	if u.Rules != nil {
		// Its sub-agents are decided by its rules too: theirs are rebuilt now, not at their
		// next change, so a deny the parent gains binds them from its next call.
		c.rebuildRules(ctx, func(d *session.Session) bool { return d.Descends(s) })
	}
	if s.Narrowings() != narrowings {
		// Its open tunnels and its sub-agents' too, as their commands are stopped.
		mine := map[string]bool{s.ID: true}
		for _, d := range c.store.All() {
			if d.Descends(s) {
				mine[d.ID] = true
			}
		}
		c.recheckTunnels(func(id string) bool { return mine[id] })
	}
	return s.Snapshot(), nil
}

// updateSession checks and applies u to s, with its rule set rebuilt from the rules it then
// has, set once the change is recorded; a rebuild of s (a reload's) waits for it.
func (c *Core) updateSession(ctx context.Context, caller session.Caller, s *session.Session, u session.Update) error {
	s.RulesMu.Lock()
	defer s.RulesMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, ownerPaced)
	defer cancel()
	snap := s.Snapshot()
	cwd, extra := snap.Cwd, snap.AdditionalDirs
	if u.Cwd != nil {
		cwd = *u.Cwd
	}
	if u.AdditionalDirs != nil {
		extra = *u.AdditionalDirs
	}
	if err := checkDirs(cwd, extra, c.Config().Limits.DirsPerSession); err != nil {
		return err
	}
	if u.AdditionalDirs != nil {
		// As at creation: each is a directory its owner can use, checked as the owner.
		if err := c.checkDirsAsOwner(ctx, s, extra); err != nil {
			return err
		}
	}
	if u.Cwd != nil {
		// A new cwd lies inside the session's directories, as the owner resolves it: the
		// directories are what the session may write, and only they widen it.
		if _, err := c.host.DirInside(ctx, s, cwd, append([]string{s.Root}, extra...)); err != nil {
			return fmt.Errorf("cwd: %w; add the directory to the session (additional_dirs; sbctl --add-dir) or create a session there", err)
		}
	}
	if u.Mode != nil && *u.Mode == permission.ModeBubble && snap.ParentID == "" {
		return errcode.Msg(errcode.Validation, "bubble mode needs a parent session")
	}
	if u.Mode != nil {
		if _, err := s.RuleSet().Effective().ResolveMode(*u.Mode); err != nil {
			return errcode.New(errcode.Validation, err)
		}
	}
	if s.Parent != nil && (u.Mode != nil || u.AdditionalDirs != nil) {
		mode := snap.Mode
		if u.Mode != nil {
			mode = *u.Mode
		}
		if err := c.checkChild(ctx, s, mode, append([]string{s.Root}, extra...)); err != nil {
			return err
		}
	}
	if u.AdditionalDirs != nil {
		if err := c.checkDescendantsWithin(ctx, s, append([]string{s.Root}, extra...)); err != nil {
			return err
		}
	}
	var rs *permission.RuleSet
	var err error
	if u.Rules != nil {
		if rs, err = c.loadRules(ctx, s, *u.Rules); err != nil {
			return err
		}
	}
	narrows := u.Narrows(snap)
	// Recorded before it is in force: a change the log refuses (short of space, or past its
	// owner's audit budget) never applies, so no call is decided by a mode or rule that no
	// record gave the session.
	if err := c.recorder.sessionChange(ctx, caller, snap, u.On(snap)); err != nil {
		return err
	}
	s.Apply(u)
	if rs != nil {
		err = c.setRuleSet(ctx, s, rs)
	}
	if narrows {
		// Its commands, and its sub-agents', run with what it gave when they started: a
		// narrowing is not kept waiting on them.
		s.MarkNarrowed()
		c.host.StopTasks(s, executor.KilledNarrowed)
	}
	return err
}

// setRuleSet puts rs in force for s, lifting a suspension for rules that did not load, but
// not one for a network the configuration no longer gives s's owner: that one stays until a
// reload gives it back (rebuildSession). The caller holds s.RulesMu.
func (c *Core) setRuleSet(ctx context.Context, s *session.Session, rs *permission.RuleSet) error {
	if err := networkPermitted(c.Config(), s); err != nil {
		c.revokeNetwork(ctx, s, err)
		return errcode.New(errcode.PermissionDenied, err)
	}
	s.SetRuleSet(rs)
	return nil
}

// DeleteSession implements api.Backend: the session's processes and cgroups go with it.
func (c *Core) DeleteSession(ctx context.Context, caller session.Caller, id string) error {
	removed, err := c.store.Remove(caller, id)
	if err != nil {
		return err
	}
	var errs []error
	for i, s := range removed {
		c.release(s)
		c.activity.forget(s.ID)
		msg, detail := "the session was deleted; denied", map[string]string(nil)
		if i > 0 {
			msg, detail = "the session's parent "+id+" was deleted; denied", map[string]string{"reason": "parent_deleted", "parent": id}
		}
		c.dropApprovals(ctx, caller, s.ID, approval.Resolution{Answer: approval.Deny, Message: msg, By: "session_deleted"})
		if err := c.recorder.sessionDelete(ctx, caller, s, detail); err != nil {
			// Ending a session only takes away, so it is not undone for want of its record.
			errs = append(errs, fmt.Errorf("session %s was deleted and its processes ended, but its record could not be written: %w", s.ID, err))
		}
	}
	return errors.Join(errs...)
}

func (c *Core) release(s *session.Session) {
	c.settings.drop(s.ID)
	c.egress.close(s.ID)
	c.host.StopSession(s.ID)
	if err := c.sandbox.KillSession(s.ID, "session_deleted"); err != nil {
		c.log.Warn("kill session processes", zap.String("session", s.ID), zap.Error(err))
	}
}

// Tasks implements api.Backend.
func (c *Core) Tasks(s *session.Session) []map[string]any { return c.host.Tasks(s) }

// AuditDir implements api.Backend.
func (c *Core) AuditDir() string { return c.recorder.log.Dir() }

// Report implements api.Backend.
func (c *Core) Report(ctx context.Context, s *session.Session, caller session.Caller, r protocol.ToolReport) error {
	return c.recorder.report(ctx, s, caller, r)
}

// Policy implements api.Backend.
func (c *Core) Policy() protocol.Policy {
	return protocol.Policy{Digest: c.policy.Digest(), Modules: c.policy.Modules()}
}

// AuditCheckpoint implements api.Backend.
func (c *Core) AuditCheckpoint(ctx context.Context) error { return c.recorder.log.Checkpoint(ctx) }

// AuditPublicKey implements api.Backend.
func (c *Core) AuditPublicKey() ed25519.PublicKey { return c.recorder.log.PublicKey() }

// deniesWholeTool reports whether a deny rule covers every call of the tool.
func deniesWholeTool(rs *permission.RuleSet, name string) bool {
	if rs == nil {
		return false
	}
	for _, r := range rs.Rules() {
		if r.Behavior != permission.Deny {
			continue
		}
		if (r.Kind == permission.KindAll && r.Tool == name) || (r.Kind == permission.KindTool && permission.MatchGlob(r.Tool, name)) {
			return true
		}
	}
	return false
}

// checkChild refuses a sub-agent session that would exceed its parent: a mode more
// permissive than the parent's (bubble counts as the parent's), or a directory outside the
// parent's (as the owner resolves both). It refuses rather than narrows, so the caller learns
// what its child may do.
func (c *Core) checkChild(ctx context.Context, s *session.Session, mode permission.Mode, dirs []string) error {
	parent := s.Parent
	if parent == nil {
		return nil
	}
	pm := parent.EffectiveMode()
	if mode != permission.ModeBubble {
		want, ok1 := permission.Rank(mode)
		have, ok2 := permission.Rank(pm)
		if !ok1 || !ok2 || want > have {
			return errcode.New(errcode.PermissionDenied, fmt.Errorf("a child session may not be more permissive than its parent: the parent %s is in %s mode, the child asked for %s (order: plan < default = dontAsk < acceptEdits < auto < bypassPermissions; bubble counts as the parent's)", parent.ID, pm, mode))
		}
	}
	pdirs := parent.Dirs()
	for _, d := range dirs {
		if _, err := c.host.DirInside(ctx, s, d, pdirs); err != nil {
			return errcode.New(errcode.PermissionDenied, fmt.Errorf("a child session's directories must lie within its parent's (%v): %s: %w", pdirs, d, err))
		}
	}
	return nil
}

// checkDescendantsWithin refuses a change of s's directories to dirs that would leave one of
// its sub-agents' directories outside them: a child's directories lie within its parent's
// (checkChild), and narrowing the parent must bind the child as a narrowed mode or a new deny
// does, not leave it writing where the parent no longer may. It refuses rather than narrows
// the child, whose root cannot change: the caller narrows or deletes the child first.
func (c *Core) checkDescendantsWithin(ctx context.Context, s *session.Session, dirs []string) error {
	for _, d := range c.store.All() {
		if !d.Descends(s) {
			continue
		}
		for _, dir := range d.Dirs() {
			if _, err := c.host.DirInside(ctx, d, dir, dirs); err != nil {
				return errcode.New(errcode.Conflict, fmt.Errorf("sub-agent session %s has the directory %s, which would lie outside this session's directories %v; narrow or delete that session first", d.ID, dir, dirs))
			}
		}
	}
	return nil
}

// defaultUmask is what a session's calls get when its creator's umask cannot be read.
const defaultUmask = 0o022

// processUmask reads the umask of process pid (a session's creator, connected while it asks)
// from /proc, or returns defaultUmask. The calls then create files as the creator's own
// programs would, not with the daemon's umask (0077 under the shipped unit).
func processUmask(pid int32) uint32 {
	if pid <= 0 {
		return defaultUmask
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/status")
	if err != nil {
		return defaultUmask
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Umask:"); ok {
			if m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil && m <= 0o777 {
				return uint32(m)
			}
			break
		}
	}
	return defaultUmask
}

// cacheDirs are sandbox.cache_dirs with "~/" as home.
func (c *Core) cacheDirs(home string) []string {
	var out []string
	for _, d := range c.Config().Sandbox.CacheDirs {
		if rest, ok := strings.CutPrefix(d, "~/"); ok {
			if home == "" {
				continue
			}
			d = filepath.Join(home, rest)
		}
		out = append(out, filepath.Clean(d))
	}
	return out
}
