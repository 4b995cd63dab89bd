package sandbox

import (
	"sync"
	"time"
)

// janitorDelay is how long a cleanup waits after it was queued. A call's result is on its way
// to the client then: a mount namespace's teardown (an expedited RCU grace period, which
// interrupts every CPU) and a cgroup's removal right at the call's end competed with the
// audit write, the answer and the client for two CPUs here.
const janitorDelay = 2 * time.Millisecond

// janitor runs cleanups that need not hold up a call's result (removing a reaped call's
// cgroup, dropping its mount namespace) one at a time on one goroutine, which Close waits for.
// Once closed it runs each cleanup at once on the caller's goroutine.
type janitor struct {
	mu      sync.Mutex
	cond    *sync.Cond // signalled when the queue empties
	queue   []chore
	running bool
	closed  bool
	wake    chan struct{}
	done    chan struct{}
}

type chore struct {
	f   func()
	due time.Time // not before
}

func newJanitor() *janitor {
	j := &janitor{wake: make(chan struct{}, 1), done: make(chan struct{})}
	j.cond = sync.NewCond(&j.mu)
	go j.run()
	return j
}

// add queues f.
func (j *janitor) add(f func()) {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		f()
		return
	}
	j.queue = append(j.queue, chore{f, time.Now().Add(janitorDelay)})
	j.mu.Unlock()
	select {
	case j.wake <- struct{}{}:
	default:
	}
}

func (j *janitor) run() {
	defer close(j.done)
	for {
		j.mu.Lock()
		for len(j.queue) > 0 {
			c := j.queue[0]
			j.queue = j.queue[1:]
			j.running = true
			closed := j.closed
			j.mu.Unlock()
			if wait := time.Until(c.due); wait > 0 && !closed {
				time.Sleep(wait)
			}
			c.f()
			j.mu.Lock()
			j.running = false
		}
		j.cond.Broadcast()
		closed := j.closed
		j.mu.Unlock()
		if closed {
			return
		}
		<-j.wake
	}
}

// flush waits until everything queued so far has run.
func (j *janitor) flush() {
	j.mu.Lock()
	for len(j.queue) > 0 || j.running {
		j.cond.Wait()
	}
	j.mu.Unlock()
}

// close runs what is queued and stops; closing twice is fine.
func (j *janitor) close() {
	if j == nil {
		return
	}
	j.mu.Lock()
	j.closed = true
	j.mu.Unlock()
	select {
	case j.wake <- struct{}{}:
	default:
	}
	<-j.done
}
