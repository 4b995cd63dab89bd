package sandbox

import (
	"sync"
	"time"
)

// cpuShare is a token bucket of CPU time per uid: what one user's work done in the daemon
// itself (outside any cgroup of theirs) may take of its CPUs, over every session and call of
// theirs. Root is not held to it.
type cpuShare struct {
	rate  float64       // CPU time given back per second of wall time
	burst time.Duration // what may be spent at once
	mu    sync.Mutex
	users map[uint32]*cpuAccount
}

type cpuAccount struct {
	left time.Duration // negative: owed
	at   time.Time
}

// maxCPUAccounts bounds the accounts kept; full ones go first when it is reached.
const maxCPUAccounts = 4096

func newCPUShare(rate float64, burst time.Duration) *cpuShare {
	return &cpuShare{rate: rate, burst: burst, users: map[uint32]*cpuAccount{}}
}

// account is uid's account, given back what the time since it was last looked at earns.
func (s *cpuShare) account(uid uint32, now time.Time) *cpuAccount {
	a := s.users[uid]
	if a == nil {
		if len(s.users) >= maxCPUAccounts {
			for u, o := range s.users {
				if o.left+time.Duration(s.rate*float64(now.Sub(o.at))) >= s.burst {
					delete(s.users, u)
				}
			}
		}
		a = &cpuAccount{left: s.burst, at: now}
		s.users[uid] = a
	}
	a.left = min(s.burst, a.left+time.Duration(s.rate*float64(now.Sub(a.at))))
	a.at = now
	return a
}

// wait is how long uid must wait before spending again: zero unless it owes.
func (s *cpuShare) wait(uid uint32) time.Duration {
	if uid == 0 {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.account(uid, time.Now())
	if a.left >= 0 {
		return 0
	}
	return time.Duration(float64(-a.left) / s.rate)
}

// reserve takes d from uid's account unless it owes: zero then, else how long to wait.
func (s *cpuShare) reserve(uid uint32, d time.Duration) time.Duration {
	if uid == 0 {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.account(uid, time.Now())
	if a.left < 0 {
		return time.Duration(float64(-a.left) / s.rate)
	}
	a.left -= d
	return 0
}

// charge takes d from uid's account, into debt if need be (work that had to be done, the
// sweep after a call, is paid for by the calls after it); a negative d gives back what a
// reservation did not use.
func (s *cpuShare) charge(uid uint32, d time.Duration) {
	if uid == 0 || d == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.account(uid, time.Now())
	a.left = min(s.burst, a.left-d)
}

// uidLocks are a mutex per uid, made on first use and dropped when unused.
type uidLocks struct {
	mu    sync.Mutex
	locks map[uint32]*uidLock
}

type uidLock struct {
	sync.Mutex
	users int
}

// unboundedWalks keeps one user's unbounded walks (the sweeps after calls) one at a time:
// their cost is owed after the fact, and at once they would take every CPU of the daemon.
var unboundedWalks = &uidLocks{locks: map[uint32]*uidLock{}}

// lock takes uid's lock and returns its release.
func (l *uidLocks) lock(uid uint32) func() {
	l.mu.Lock()
	u := l.locks[uid]
	if u == nil {
		u = &uidLock{}
		l.locks[uid] = u
	}
	u.users++
	l.mu.Unlock()
	u.Lock()
	return func() {
		u.Unlock()
		l.mu.Lock()
		if u.users--; u.users == 0 {
			delete(l.locks, uid)
		}
		l.mu.Unlock()
	}
}
