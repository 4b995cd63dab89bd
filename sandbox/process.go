package sandbox

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/sandboxd/sandboxd/internal/errcode"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// Result is what an execution did and why it ended.
type Result struct {
	ExitCode        int    // -1 when killed by a signal
	Signal          string // e.g. "killed"; empty on a normal exit
	Duration        time.Duration
	PeakMemoryBytes int64
	CPUTimeMs       int64
	OOMKilled       bool
	PidsLimited     bool
	TimedOut        bool
	KilledBy        string // "timeout", "cancelled", or the reason given to Kill
	// MovedAside are the protected paths the call created, moved aside (Spec.MoveAsideCreated),
	// as ShownPath shows them: the first few hundred, MovedAsideMore counting the rest.
	MovedAside     []string
	MovedAsideMore int
}

// Process is a started execution. Wait must be called exactly once.
type Process struct {
	s     *Sandbox
	spec  Spec
	lim   Limits
	cmd   *exec.Cmd
	cg    *cgroup
	start time.Time
	// pooled: the call runs in a pooled init; its cgroup is under <root>/pool.
	pooled bool
	// llPrebuilt: that init had prebuilt the call's landlock base (landlockPlan.base).
	llPrebuilt bool
	mntns      int // the call's mount namespace held until it was reaped (holdMountNS); -1: none
	// sock is a pooled call's end of the socket its init got the call on and reports the call's
	// end on (awaitEnd); closed in release, off the call's path.
	sock *os.File
	// endReported: the init reported the call's end and may still be exiting; release reaps it.
	endReported bool
	// guard are the protected paths missing at the start, in their writable dirs
	// (Spec.MoveAsideCreated); moved aside whenever they exist while the call runs and at its
	// end, by sweepWhileRunning (done: sweepDone) and lastSweep, into moved.
	guard      []guarded
	covers     []covered            // the protected paths that existed, moved aside once replaced
	hidden     []hiddenPath         // the hidden paths that existed; the call is killed once one is replaced
	rulesAt    time.Time            // when the plan's landlock expansions were listed: a file born later has no rule
	unpinOnce  sync.Once            // unpinCovers
	pins       int                  // what plan reserved of s.pins, given back by unpinCovers
	repos      []guarded            // the dirs whose repository's new gitlinks' .git are moved aside too
	repoLinks  []map[string]fileID  // the gitlinks each of repos held at the start, nil where unknown
	guardWalk  *patternGuard        // Spec.GuardPatterns, whose new matches are moved aside too
	gitStarts  map[string]*gitStart // per writable dir, what of its repositories' git dirs the plan protects
	runState   runState             // the repositories' rebase state at the start
	walkNext   time.Time            // a sweep while the call runs walks guardWalk from then on
	writable   []string             // the writable dirs, where a guarded path behind a link may lead
	sweepDone  chan struct{}
	moved      []string
	movedSet   map[uint64]bool // every path moved aside, by its hash (noteMoved)
	movedSeed  maphash.Seed
	movedBytes int // p.moved's paths' length
	movedMore  int // moved aside past noteMoved's bounds, counted only
	// journalPath is its sweep journal, until its last sweep (journal.go).
	journalPath string

	mu       sync.Mutex
	killedBy string
	timedOut bool

	done      chan struct{} // closed once the child is reaped
	watchDone chan struct{} // closed when the ctx watcher returned, if it ran
	stopWatch func() bool   // unregisters the watcher; false once it has started
}

// Start runs spec confined. When ctx's deadline passes the whole cgroup is killed and
// Result.TimedOut is set; when ctx is cancelled it is killed with KilledBy "cancelled".
func (s *Sandbox) Start(ctx context.Context, spec *Spec) (*Process, error) {
	if err := spec.validate(); err != nil {
		return nil, errcode.New(errcode.SandboxSetup, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errcode.New(errcode.SandboxSetup, ErrClosed)
	}
	s.mu.Unlock()

	p := &Process{
		s:         s,
		spec:      *spec,
		lim:       spec.Limits.merge(s.limits),
		mntns:     -1,
		done:      make(chan struct{}),
		watchDone: make(chan struct{}),
	}
	if err := s.start(p); err != nil {
		s.guarding.done(p)
		p.unpinCovers()
		return nil, errcode.Setup(err) // a refusal over a budget stays rate_limited
	}
	s.mu.Lock()
	s.procs[p] = struct{}{}
	s.mu.Unlock()
	if len(p.guard) > 0 || len(p.repos) > 0 || p.guardWalk != nil || len(p.covers) > 0 || len(p.hidden) > 0 {
		p.sweepDone = make(chan struct{})
		go p.sweepWhileRunning()
	}
	// Registered on ctx rather than a goroutine waiting on it: most calls end first, and then
	// Wait only unregisters it instead of waking a watcher and waiting for it to return.
	p.stopWatch = context.AfterFunc(ctx, func() { p.watch(ctx) })
	return p, nil
}

// start builds the child's spec and runs it in a pooled init when one is ready, else in an init
// started for the call.
//
// WARNING: the whole confinement is assembled here; rerun as root after changing:
// go test -run 'TestEscape|TestInit|TestPool' ./sandbox/
func (s *Sandbox) start(p *Process) error {
	step := s.stepTimer()
	cs, netns, err := s.plan(p)
	if err != nil {
		return err
	}
	if s.seams.afterPlan != nil {
		// Tests: where another process of the caller may swap a planned path for a symlink.
		s.seams.afterPlan()
	}
	if netns != nil {
		defer netns.Close() // both paths below are done with it when they return
	}
	step("plan")
	if s.poolable(&p.spec) {
		in := s.pool.take(p.spec.UID)
		if in != nil && cs.aliases.staleIn(in.mounts) {
			// Its mounts are a copy of a table with a bind mount gone since: it would show
			// a hidden or protected path where the plan no longer covers it.
			stale := in
			s.janitor.add(func() { s.discard(stale) })
			in = nil
		}
		if in != nil {
			// A pooled init ran preludeMounts while it waited, and built the landlock base of
			// its hint: its spec carries only the call's part (the base too, unless the hint
			// is exactly this call's).
			cs.preluded = true
			cs.remountTmp = in.tmpSize != cs.tmpSize
			if cs.landlock != nil {
				cs.landlock.prebuilt = in.hint.matches(cs.landlock)
			}
			blob, err := cs.encode()
			if err != nil {
				s.discard(in)
				return err
			}
			handed, err := s.handOver(p, in, blob, netns, step)
			if handed {
				p.llPrebuilt = cs.landlock != nil && cs.landlock.prebuilt
				return err
			}
			// Nothing of the call reached that init: the per-call path is as good.
		}
	}
	cs.preluded = false
	if cs.landlock != nil {
		cs.landlock.prebuilt = false
	}
	blob, err := cs.encode()
	if err != nil {
		return err
	}
	return s.startCold(p, blob, netns, step)
}

// poolable reports whether a pooled init can take spec: the pool is on and every fd fits in
// the one message (a nil ExtraFiles entry fails the per-call init, which reports why).
func (s *Sandbox) poolable(spec *Spec) bool {
	// A pooled init waits in its uid's own user cgroup: a call counted under another user's
	// (a subordinate uid's) starts cold.
	if s.pool == nil || s.noPool.Load() || len(spec.ExtraFiles) > maxPassedExtra || spec.tenant() != spec.UID {
		return false
	}
	for _, f := range spec.ExtraFiles {
		if f == nil {
			return false
		}
	}
	return true
}

// watch kills the execution when ctx ends before Wait unregistered it; Wait waits for it.
func (p *Process) watch(ctx context.Context) {
	defer close(p.watchDone)
	select {
	case <-p.done:
	default:
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			p.mu.Lock()
			p.timedOut = true
			p.mu.Unlock()
			_ = p.Kill("timeout")
		} else {
			_ = p.Kill("cancelled")
		}
	}
}

// Pid is the child's pid in the daemon's pid namespace.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Kill kills every process of the execution; the first reason lands in Result.KilledBy.
func (p *Process) Kill(reason string) error {
	p.mu.Lock()
	if p.killedBy == "" {
		p.killedBy = reason
	}
	p.mu.Unlock()
	select {
	case <-p.done:
		return nil
	default:
	}
	return p.killAll()
}

func (p *Process) killAll() error {
	if err := p.cg.kill(); err != nil {
		return fmt.Errorf("kill cgroup: %w", err)
	}
	return nil
}

// Wait waits for the child, kills whatever is left in its cgroup, collects the cgroup's
// statistics and removes it.
func (p *Process) Wait() (*Result, error) {
	status, reported := p.awaitEnd()
	var werr error
	if !reported {
		werr = p.cmd.Wait()
	}
	dur := time.Since(p.start)
	close(p.done)
	if !p.stopWatch() {
		<-p.watchDone // ctx ended: the watcher runs; no Kill may come after Wait returns
	}
	defer func() {
		p.s.guarding.done(p) // after the last sweep
		p.unjournal()
		p.s.mu.Lock()
		delete(p.s.procs, p)
		p.s.mu.Unlock()
	}()

	res := &Result{Duration: dur}
	defer func() {
		// Also when the init reported the end: a kill may end the program before the init
		// (a cgroup v1 kill signals one process at a time), and the init then reports.
		p.mu.Lock()
		res.KilledBy = p.killedBy
		res.TimedOut = p.timedOut
		p.mu.Unlock()
	}()
	if reported {
		p.endReported = true
		res.ExitCode = status
		err := p.finish(res)
		res.MovedAside, res.MovedAsideMore = p.lastSweep()
		return res, err
	}
	var ee *exec.ExitError
	switch {
	case werr == nil:
	case errors.As(werr, &ee):
	default:
		p.unpinCovers() // no release follows
		return nil, fmt.Errorf("wait for child: %w", werr)
	}
	ws := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		res.ExitCode = -1
		res.Signal = ws.Signal().String()
	} else {
		res.ExitCode = ws.ExitStatus()
	}
	cleanupErr := p.finish(res)
	res.MovedAside, res.MovedAsideMore = p.lastSweep()
	return res, cleanupErr
}

// awaitEnd waits for a pooled init's report that the program it ran is over and every
// other process of the call is gone (nsinit_exec.c: report_end), and returns the status the
// init exits with. Its own exit (unmapping the binary, tearing down the namespaces) then happens
// off the call's path. Without a report (the init failed, was killed, could not keep the
// socket, or exec'd the program as PID 1 because it could not fork: EOF) the caller waits for
// the init's exit instead. The report cannot be forged: the program never holds the socket
// (close-on-exec), and the init, which changed its uid, is not dumpable, so neither the
// program nor another process of the caller's can reach the init's fds or memory.
func (p *Process) awaitEnd() (status int, ok bool) {
	if !p.pooled || p.sock == nil {
		return 0, false
	}
	var b [8]byte
	n, err := unix.Read(int(p.sock.Fd()), b[:])
	for err == unix.EINTR {
		n, err = unix.Read(int(p.sock.Fd()), b[:])
	}
	runtime.KeepAlive(p.sock)
	if err != nil || n != len(b) || binary.NativeEndian.Uint32(b[:4]) != statusMagic {
		return 0, false
	}
	status = int(binary.NativeEndian.Uint32(b[4:]))
	return status, status <= 255
}

// finish runs after the child was reaped: whatever is left in the cgroup dies and the figures
// are read. The cgroup and the mount namespace go to the janitor: nothing is left in them, and
// their removal (~0.1 ms and ~0.2 ms) need not hold up the result.
func (p *Process) finish(res *Result) error {
	step := p.s.stepTimer()
	var errs []error
	// Usually empty already: the init was PID 1 of its namespace, and its exit made the kernel
	// kill the rest. An init that reported the end killed and reaped the rest itself and is
	// left to exit: release reaps it and empties the cgroup then.
	if !p.endReported {
		if err := p.cg.killAndDrain(); err != nil {
			errs = append(errs, err)
		}
	}
	step("cgroup_kill_drain")
	st := p.cg.stats()
	res.PeakMemoryBytes = st.peakMemory
	res.CPUTimeMs = st.cpuNanos / 1e6
	res.OOMKilled = st.oomKilled
	res.PidsLimited = st.pidsLimit
	step("cgroup_stats")
	p.s.janitor.add(p.release)
	return errors.Join(errs...)
}

// release drops what a reaped call still holds: its pinned paths (once its sweeps are over:
// off the result's path), its mount namespace, then its cgroup.
func (p *Process) release() {
	p.unpinCovers()
	if p.endReported {
		// Done and exiting since it reported; the kill only guards against one stopped since.
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
		if err := p.cg.killAndDrain(); err != nil {
			p.s.log.Warn("empty cgroup", zap.Error(err))
		}
	}
	releaseMountNS(p.mntns)
	p.mntns = -1
	if p.sock != nil {
		p.sock.Close()
		p.sock = nil
	}
	if err := p.cg.remove(); err != nil {
		p.s.log.Warn("remove cgroup", zap.Error(err))
	}
	p.s.mu.Lock()
	closed := p.s.closed
	p.s.mu.Unlock()
	if closed && p.pooled {
		// The last pooled call of a closed sandbox takes the pool's parent with it.
		p.s.removePoolDir()
	}
	if p.pooled {
		p.s.pool.callCleaned()
	}
}

// abort kills an init whose setup failed, reaps it and releases its cgroup.
func (p *Process) abort() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	_ = p.cg.kill()
	p.s.janitor.add(p.release)
}

// OutputPipe returns a pipe for a child's output (or any fd it writes to). The read end is the
// daemon's, read through Go's poller; the write end is the child's, blocking as a program
// expects its stdout to be, and never registered with the poller, which Go's os.Pipe would
// do and then undo, with the O_NONBLOCK flips, once the fd is passed (~10 syscalls a pipe).
func OutputPipe() (r, w *os.File, err error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, fmt.Errorf("pipe: %w", err)
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, fmt.Errorf("pipe: %w", err)
	}
	// os.NewFile registers a non-blocking fd with the poller and leaves a blocking one alone.
	return os.NewFile(uintptr(fds[0]), "|0"), os.NewFile(uintptr(fds[1]), "|1"), nil
}
