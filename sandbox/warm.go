package sandbox

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/internal/cgroupfs"
)

// On cgroup v1 every write to cgroup.procs takes the kernel's global
// cgroup_threadgroup_rwsem for writing. About 50 ms after the last writer, the rwsem's
// rcu_sync drops back to the readers' fast path, and the next writer waits a whole RCU grace
// period: measured 6-8 ms per attach here, paid by every call that follows any pause (an agent
// thinking between calls). While executions are recent, a no-op migration — the daemon's own
// pid written into its own pids cgroup — every warmTick keeps the writer path warm, so a
// call's attach costs tens of µs. After warmWindow without a Start it stops: an idle daemon
// costs nothing, and forks elsewhere on the host keep their fast path. v2 starts children
// inside their cgroup (CLONE_INTO_CGROUP) and needs none of this.
const (
	warmTick   = 20 * time.Millisecond
	warmWindow = 30 * time.Second
)

// attachWarmer keeps v1 cgroup attaches fast while the sandbox is busy.
type attachWarmer struct {
	procs string // the daemon's own pids cgroup.procs
	pid   []byte

	mu       sync.Mutex
	last     time.Time // the last Start
	asleep   bool      // run waits for a Start: only then does touch wake it
	wake     chan struct{}
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// newAttachWarmer starts the warmer on v1 hosts; it returns nil where none is needed.
func newAttachWarmer(l *cgroupLayout) *attachWarmer {
	if l == nil || l.v2 {
		return nil
	}
	own, err := cgroupfs.Own()
	if err != nil {
		return nil
	}
	mounts, err := cgroupfs.Mounts()
	if err != nil || mounts["pids"] == "" || own["pids"] == "" {
		return nil
	}
	w := &attachWarmer{
		procs: filepath.Join(mounts["pids"], own["pids"], "cgroup.procs"),
		pid:   []byte(strconv.Itoa(os.Getpid())),
		wake:  make(chan struct{}, 1),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	go w.run()
	return w
}

// touch records a Start; a sleeping warmer wakes and warms at once. A ticking one is left
// alone: waking it would cost the Start a thread wake-up for nothing.
func (w *attachWarmer) touch() {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.last = time.Now()
	asleep := w.asleep
	w.mu.Unlock()
	if asleep {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

func (w *attachWarmer) run() {
	defer close(w.done)
	t := time.NewTicker(warmTick)
	defer t.Stop()
	for {
		w.mu.Lock()
		idle := time.Since(w.last) > warmWindow
		w.asleep = idle
		w.mu.Unlock()
		if idle {
			select {
			case <-w.wake:
			case <-w.stop:
				return
			}
			w.mu.Lock()
			w.asleep = false
			w.mu.Unlock()
		}
		// Writing a pid into the cgroup it is already in moves nothing; the error, if any,
		// only costs speed, never correctness.
		_ = os.WriteFile(w.procs, w.pid, 0)
		// A Start while ticking writes nothing more: the path is warm already, and a write
		// takes the rwsem every fork, exec and exit on the host waits for, the call's own too.
		select {
		case <-t.C:
		case <-w.stop:
			return
		}
	}
}

// close stops the warmer and waits for it; closing twice is fine.
func (w *attachWarmer) close() {
	if w == nil {
		return
	}
	w.stopOnce.Do(func() { close(w.stop) })
	<-w.done
}
