package sandbox

import (
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
)

// The prefork pool takes the fork, the re-exec of this (big) binary up to the C constructor, and
// the cgroup creation and attach off a call's critical path: a few inits are started ahead,
// each in a cgroup of its own under <root>/user-<uid>/pool, and block in sbx_receive_call
// (nsinit_exec.c) before doing anything. Start hands one its call (limits, spec, stdio) and it then runs exactly the
// steps a per-call init runs. A claimed init's cgroup is the call's cgroup; it is never reused.
//
// The pool never makes a call wait: when none is ready, Start takes the per-call path and the
// pool grows (up to poolMax). After poolIdle without a Start the idle inits are killed: an idle
// daemon keeps no processes, and an init never sits for long on a copy of the host's mounts
// taken when it was started.
const (
	poolDir = "pool" // <root>/user-<uid>/pool: reserved, no session may be called so
	poolMin = 2
	poolMax = 4
	// refillDelay holds a refill back after a take: its fork and re-exec of this binary would
	// compete with the call's setup and first milliseconds for the CPU and the kernel's mount
	// and cgroup locks, slowing a short call. A take that leaves a spare
	// ready does not refill at all until the call's cleanup (see take).
	refillDelay = 2 * time.Millisecond
	// poolRetry is how long the filler waits after a failed start before trying again.
	poolRetry = time.Second
)

// poolIdle is how long the pool keeps idle inits after the last Start (seams.poolIdle).
const poolIdle = 30 * time.Second

// activeWindow is how long a user counts as calling after their last take: the filler shares
// the pool among the users seen within it.
const activeWindow = 10 * time.Second

// pool keeps the ready inits and the goroutine that starts them.
type pool struct {
	s *Sandbox

	mu     sync.Mutex
	ready  []*poolInit
	target int           // how many to keep ready
	last   time.Time     // the last take
	hold   time.Time     // no refill before (refillDelay)
	idle   time.Duration // seams.poolIdle
	closed bool
	// demand is when each uid last wanted an init, filled when each last got one made: the
	// filler makes the next for the active user with the fewest ready (the one served longest
	// ago on a tie), so one user's stream of calls cannot keep every init while another
	// user's calls all take the per-call path.
	demand, filled map[uint32]time.Time

	wake chan struct{}
	stop chan struct{}
	done chan struct{}
}

// newPool fills the pool once, so a daemon is ready when New returns, and starts the filler.
func newPool(s *Sandbox) *pool {
	p := &pool{s: s, target: poolMin, last: time.Now(), idle: s.seams.poolIdle,
		demand: map[uint32]time.Time{}, filled: map[uint32]time.Time{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	for i := 0; i < poolMin; i++ {
		if !p.fillOne() {
			break
		}
	}
	// run's first pass looks at the pool before any take can: one that ran later saw a take's
	// spare as a shortfall and refilled beside the call.
	looked := make(chan struct{})
	go p.run(looked)
	<-looked
	return p
}

// take returns a ready init, or nil at once when none is. The filler is woken only when the
// pool is empty now: while a spare is ready, the refill waits until the call's cleanup wakes
// it (callCleaned), janitorDelay after the result. Waking it here and again at the call's end
// put a goroutine, and a thread woken for it on the other CPU, right where the init's setup
// and then the answer needed the CPUs, and ran the refill's fork and re-exec during any call
// longer than refillDelay (~2% of a paced /bin/true call through the socket, measured).
//
// An init waits in a cgroup under its user's (user-<uid>), whose limits bound all of that
// user's calls together, so only a call of that uid may take it. When none is ready for uid,
// the filler is woken to make one (nextUser), and one made for a user no longer calling, if
// any, is dropped to make room.
func (p *pool) take(uid uint32) *poolInit {
	p.mu.Lock()
	busy := time.Since(p.last) < p.idle
	p.last = time.Now()
	p.demand[uid] = p.last
	var in, stale *poolInit
	i := slices.IndexFunc(p.ready, func(r *poolInit) bool { return r.uid == uid })
	idle := slices.IndexFunc(p.ready, func(r *poolInit) bool { return !p.active(r.uid, p.last) })
	switch {
	case p.closed:
	case i >= 0:
		in = p.ready[i]
		p.ready = slices.Delete(p.ready, i, i+1)
		p.hold = p.last.Add(refillDelay)
	case idle >= 0:
		stale = p.ready[idle]
		p.ready = slices.Delete(p.ready, idle, idle+1)
	case busy:
		p.target = min(p.target+1, poolMax) // demand outran the pool
	}
	refill := len(p.ready) == 0 || in == nil
	p.mu.Unlock()
	if stale != nil {
		p.s.janitor.add(func() { p.s.discard(stale) })
	}
	if refill {
		p.kick()
	}
	return in
}

// active reports whether uid wanted an init within activeWindow of now; p.mu is held.
func (p *pool) active(uid uint32, now time.Time) bool {
	t, ok := p.demand[uid]
	return ok && now.Sub(t) < activeWindow
}

// nextUser is whom the next init is made for: of the active users, the one with the fewest
// ready, and of those the one served longest ago; before any call, the plan's hint. p.mu is
// held.
func (p *pool) nextUser(now time.Time) uint32 {
	best, bestN := p.s.userHint.Load(), -1
	for uid := range p.demand {
		if !p.active(uid, now) {
			delete(p.demand, uid)
			delete(p.filled, uid)
			continue
		}
		n := 0
		for _, r := range p.ready {
			if r.uid == uid {
				n++
			}
		}
		if bestN < 0 || n < bestN || n == bestN && p.filled[uid].Before(p.filled[best]) {
			best, bestN = uid, n
		}
	}
	p.filled[best] = now
	return best
}

// callCleaned wakes the filler: a pooled call's cleanup ran, so a refill now is off every
// call's path (unless another call was taken within refillDelay: the hold still applies).
func (p *pool) callCleaned() { p.kick() }

// kick wakes the filler.
func (p *pool) kick() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *pool) run(looked chan struct{}) {
	defer close(p.done)
	idle := time.NewTimer(p.idle)
	defer idle.Stop()
	for {
		p.mu.Lock()
		busy := time.Since(p.last) < p.idle
		need := busy && len(p.ready) < p.target
		hold := time.Until(p.hold)
		idleIn := time.Until(p.last.Add(p.idle))
		var drained []*poolInit
		if !busy && len(p.ready) > 0 {
			drained, p.ready, p.target = p.ready, nil, poolMin
		}
		p.mu.Unlock()
		for _, in := range drained {
			p.s.discard(in)
		}
		var wait <-chan time.Time
		switch {
		case need && hold > 0:
			wait = time.After(hold)
		case need:
			if p.fillOne() {
				continue
			}
			wait = time.After(poolRetry)
		}
		if busy {
			idle.Reset(idleIn + time.Millisecond)
		}
		if looked != nil {
			close(looked)
			looked = nil
		}
		select {
		case <-p.stop:
			return
		case <-p.wake:
		case <-idle.C:
		case <-wait:
		}
	}
}

// fillOne starts one init and adds it to the ready list; false when that failed.
func (p *pool) fillOne() bool {
	p.mu.Lock()
	uid := p.nextUser(time.Now())
	p.mu.Unlock()
	in, err := p.s.startPoolInit(uid)
	if err != nil {
		p.s.log.Warn("start pooled init", zap.Error(err))
		return false
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.s.discard(in)
		return false
	}
	p.ready = append(p.ready, in)
	p.mu.Unlock()
	return true
}

// close stops the filler and kills every idle init; closing twice is fine.
func (p *pool) close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.mu.Unlock()
	close(p.stop)
	<-p.done
	p.mu.Lock()
	idle := p.ready
	p.ready = nil
	p.mu.Unlock()
	for _, in := range idle {
		p.s.discard(in)
	}
}
