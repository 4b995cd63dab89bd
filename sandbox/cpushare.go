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

// charge takes d from uid's account, into debt if need be: work that had to be done (the
// sweep after a call) is paid for by the calls after it.
func (s *cpuShare) charge(uid uint32, d time.Duration) {
	if uid == 0 || d <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.account(uid, time.Now()).left -= d
}
