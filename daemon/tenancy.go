package daemon

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/approval"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/executor"
	"github.com/sandboxd/sandboxd/session"
)

// apiLimits maps the config's limits onto the API's.
func apiLimits(cfg *config.Config) api.Limits {
	l := cfg.Limits
	return api.Limits{
		BatchCalls: l.BatchCalls, MaxParallelCalls: cfg.MaxParallelCalls, CallsPerUser: l.CallsPerUser,
		ConnectionsPerUser: l.ConnectionsPerUser, RequestsPerSecond: l.RequestsPerSecondPerUser, Burst: l.RequestsBurstPerUser,
		ResponseBytes: l.ResponseBytes, WriteTimeout: config.Duration(l.WriteTimeoutSec),
	}
}

// hostLimits maps the config's limits onto the tools'.
func hostLimits(cfg *config.Config) executor.Limits {
	return executor.Limits{
		PersistedBytesPerUser: cfg.Limits.PersistedBytesPerUser,
		TasksPerUser:          cfg.Limits.TasksPerUser,
		TaskMaxLifetime:       config.Duration(cfg.Limits.TaskMaxSeconds),
		// Twice the audit's own floor: results stop while the audit log still has room of its
		// own, even with several large results being written at once.
		VolumeReserveBytes: 2 * cfg.Audit.MinFreeBytes,
	}
}

// applyLimits puts the limits in force (at start and on reload).
func (d *Daemon) applyLimits(cfg *config.Config) {
	d.api.SetLimits(apiLimits(cfg))
	// Without unix sockets no call can connect at all (seccomp); with them, Identify refuses
	// a peer inside the sandbox's cgroups, which needs each peer's cgroups read.
	d.api.SetPeerCgroups(cfg.Sandbox.AllowUnixSockets)
	d.core.host.SetLimits(hostLimits(cfg))
	d.core.egress.srv.SetPace(cfg.Limits.EgressRequestsPerSecondPerUser, cfg.Limits.EgressRequestsBurstPerUser)
}

// activity is when each session last served a request: sessions.idle_timeout_sec ends the
// ones left alone, with their tasks, worker and results. The session store is not ours to
// change, so the daemon keeps it beside the store.
type activity struct {
	last sync.Map // session id -> *atomic.Int64 (unix nanoseconds)
	busy sync.Map // session id -> *atomic.Int32: its calls running now
}

// running counts a call of session id as running until the returned func is called.
func (a *activity) running(id string) func() {
	v, _ := a.busy.LoadOrStore(id, &atomic.Int32{})
	n := v.(*atomic.Int32)
	n.Add(1)
	return func() { n.Add(-1) }
}

// runsCalls reports whether a call of session id is running now.
func (a *activity) runsCalls(id string) bool {
	v, ok := a.busy.Load(id)
	return ok && v.(*atomic.Int32).Load() > 0
}

// forget drops what is kept of an ended session.
func (a *activity) forget(id string) {
	a.last.Delete(id)
	a.busy.Delete(id)
}

func (a *activity) touch(id string) {
	now := time.Now().UnixNano()
	if v, ok := a.last.Load(id); ok {
		v.(*atomic.Int64).Store(now)
		return
	}
	v := &atomic.Int64{}
	v.Store(now)
	a.last.Store(id, v)
}

// idleSince is when the session last served a request (its creation if never).
func (a *activity) idleSince(s *session.Session) time.Time {
	if v, ok := a.last.Load(s.ID); ok {
		return time.Unix(0, v.(*atomic.Int64).Load())
	}
	return s.Snapshot().Created
}

// expireIdle ends every session idle for longer than the timeout, as an admin ending it would:
// its tasks and worker stop, its results go, and the audit log says why.
func (c *Core) expireIdle(ctx context.Context, now time.Time) int {
	idle := config.Duration(c.Config().Sessions.IdleTimeoutSec)
	n := 0
	all := c.store.All()
	// A session is as busy as its busiest sub-agent: an agent waits on its sub-agent's work,
	// and ending the agent's session would end the sub-agent's with it.
	latest := make(map[*session.Session]time.Time, len(all))
	for _, s := range all {
		t := c.activity.idleSince(s)
		for a := s; a != nil; a = a.Parent {
			if t.After(latest[a]) {
				latest[a] = t
			}
		}
	}
	for _, s := range all {
		if now.Sub(latest[s]) < idle {
			continue
		}
		removed, err := c.store.Remove(session.Caller{Admin: true}, s.ID)
		if err != nil {
			continue // ended meanwhile
		}
		for i, r := range removed {
			c.release(r)
			msg, detail := "the session ended after being idle; denied", map[string]string{"reason": "idle_timeout"}
			if i > 0 {
				// A sub-agent idle or not: it does not outlive the session it works for.
				msg, detail = "the session's parent "+s.ID+" ended after being idle; denied", map[string]string{"reason": "parent_deleted", "parent": s.ID}
			}
			c.dropApprovals(ctx, session.Caller{}, r.ID, approval.Resolution{Answer: approval.Deny, Message: msg, By: "idle_timeout"})
			c.activity.forget(r.ID)
			n++
			c.log.Info("session expired", zap.String("session", r.ID), zap.String("reason", detail["reason"]), zap.Duration("idle_timeout", idle))
			if err := c.recorder.sessionEvent(ctx, audit.KindSessionDelete, r, detail); err != nil {
				c.log.Error("audit session expiry", zap.Error(err))
			}
		}
	}
	return n
}

// evictDisposable ends the least recently used of owner's disposable sessions that runs
// nothing (no call, no background command), waits on no approval and has no sub-agent, to
// make room for a new session at limits.sessions_per_user; it reports whether it ended one.
// Its client makes it again when it next needs it (sbctl hook), so what is lost is its state:
// files read, approvals remembered for the session.
func (c *Core) evictDisposable(ctx context.Context, owner session.Caller) bool {
	all := c.store.All()
	parents := map[*session.Session]bool{}
	for _, s := range all {
		if s.Parent != nil {
			parents[s.Parent] = true
		}
	}
	var victim *session.Session
	var oldest time.Time
	for _, s := range all {
		if !s.Disposable || s.Owner.Tenant() != owner.Tenant() || s.Parent != nil || parents[s] ||
			c.activity.runsCalls(s.ID) || c.runsTasks(s) ||
			len(c.approvals.Pending(func(a approval.Approval) bool { return a.Session == s.ID })) > 0 {
			continue
		}
		if t := c.activity.idleSince(s); victim == nil || t.Before(oldest) {
			victim, oldest = s, t
		}
	}
	if victim == nil {
		return false
	}
	removed, err := c.store.Remove(session.Caller{Admin: true}, victim.ID)
	if err != nil {
		return false // ended meanwhile: its room is free all the same
	}
	for _, r := range removed {
		c.release(r)
		c.activity.forget(r.ID)
		c.dropApprovals(ctx, session.Caller{}, r.ID, approval.Resolution{Answer: approval.Deny, Message: "the session was ended to make room for its owner's next one; denied", By: "evicted"})
		c.log.Info("disposable session ended to make room", zap.String("session", r.ID), zap.Uint32("uid", r.Owner.UID))
		if err := c.recorder.sessionEvent(ctx, audit.KindSessionDelete, r, map[string]string{"reason": "evicted"}); err != nil {
			c.log.Error("audit session eviction", zap.Error(err))
		}
	}
	return true
}

// runsTasks reports whether a background command of s is running.
func (c *Core) runsTasks(s *session.Session) bool {
	for _, t := range c.host.Tasks(s) {
		if t["status"] == "running" {
			return true
		}
	}
	return false
}

// sweepInterval is how often idle sessions are looked for.
const sweepInterval = time.Minute

// sweep runs expireIdle until ctx ends; Serve owns it and waits for it.
func (c *Core) sweep(ctx context.Context) {
	t := time.NewTicker(sweepInterval)
	defer t.Stop()
	at := time.NewTicker(approvalSweepInterval)
	defer at.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			c.expireIdle(ctx, now)
		case now := <-at.C:
			c.expireApprovals(ctx, now)
		}
	}
}
