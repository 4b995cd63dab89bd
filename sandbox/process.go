package sandbox

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/sandboxd/sandboxd/internal/errcode"
	"golang.org/x/sys/unix"
)

// Spec describes one execution.
type Spec struct {
	Path string   // program to exec; may be "/proc/self/exe" (the daemon's own binary)
	Args []string // arguments after argv[0]; argv[0] is Path
	Env  []string // the whole environment; nothing of the daemon's leaks
	Dir  string   // working directory
	// Direct, when set, is a simple command run as `bash -c` would exec it, without starting
	// bash: argv[0] as typed, searched in Env's PATH (as the caller, inside the confinement)
	// unless it holds a slash, PWD, SHLVL=0 and _ added to Env, only stdio open. Like every
	// program it runs in a child of the init, which stays PID 1 (reaping orphans, exiting with
	// the program's status, 128+N for a signal). Only the literal words of a command that is
	// not a bash builtin belong here (classifier.SimpleCommand). Path and Args (bash with the whole
	// command) run instead whenever the result could differ: the program is missing, cannot be
	// exec'd, or Env has PWD, SHLVL or _ already. ExtraFiles are for Path only.
	Direct []string

	UID    uint32
	GID    uint32
	Groups []uint32

	// WritableDirs are the session's dirs and configured cache dirs; read-only when
	// ReadOnlyWorkspace. Nothing else is ever writable (a worktree's ".git" file is not
	// followed: its main repository must be a session dir of its own).
	WritableDirs []string
	// ReadOnlyWorkspace: the call was allowed because it only reads (or runs in plan mode):
	// WritableDirs are mounted read-only, only the private /tmp is writable.
	ReadOnlyWorkspace bool
	// ProtectedPaths (absolute) and ProtectedPatterns (absolute path-rule patterns, expanded in
	// the writable dirs) are mounted read-only where they exist inside a writable dir: the
	// protected paths (ProtectedCandidates) and the Edit deny rules.
	ProtectedPaths    []string
	ProtectedPatterns []string
	// HidePatterns are absolute path-rule patterns (Read deny rules) whose matches in the
	// session's dirs are hidden like DenyPaths; literal ones belong in DenyPaths.
	HidePatterns []string
	// ReadOnlyDirs are bound read-only on top of everything else, so they show even under the
	// private /tmp (an ssh-agent or gpg-agent socket dir is allowed this way, by path).
	ReadOnlyDirs []string
	// DenyPaths are hidden: an existing dir is covered by an empty unreadable tmpfs, an
	// existing file by /dev/null, and landlock grants no read below them, so a path created
	// after the start stays unreadable too. Landlock cannot express "all but X", so in each
	// ancestor of a deny path only the entries existing at the start are readable (writable,
	// inside a writable dir); new entries directly in such an ancestor are not. DefaultDenyPaths
	// are always added (mount-hidden only: landlock does not govern connect(2)).
	DenyPaths    []string
	AllowNetwork bool // false: the session's own network namespace with loopback only

	Limits Limits // overrides of Config.Limits, 0 = keep

	Session string // cgroup path <CgroupRoot>/<Session>/<Call>
	Call    string

	Stdin, Stdout, Stderr *os.File
	ExtraFiles            []*os.File // fd 3, 4, ... in the child
}

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

	mu       sync.Mutex
	killedBy string
	timedOut bool

	done      chan struct{} // closed once the child is reaped
	watchDone chan struct{} // closed when the ctx watcher returned, if it ran
	stopWatch func() bool   // unregisters the watcher; false once it has started
}

func validName(s string) bool {
	if s == "" || s == "." || s == ".." || len(s) > 200 {
		return false
	}
	for _, c := range s {
		if c == '/' || c == 0 || c == '\n' {
			return false
		}
	}
	return true
}

func (spec *Spec) validate() error {
	switch {
	case spec.Path == "":
		return fmt.Errorf("%w: empty path", ErrBadSpec)
	case !validName(spec.Session) || !validName(spec.Call):
		return fmt.Errorf("%w: session and call must be single path elements", ErrBadSpec)
	case spec.Session == poolDir:
		return fmt.Errorf("%w: session name %q is reserved", ErrBadSpec, poolDir)
	}
	return nil
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
		return nil, errcode.New(errcode.SandboxSetup, err)
	}
	s.mu.Lock()
	s.procs[p] = struct{}{}
	s.mu.Unlock()
	// Registered on ctx rather than a goroutine waiting on it: most calls end first, and then
	// Wait only unregisters it instead of waking a watcher and waiting for it to return.
	p.stopWatch = context.AfterFunc(ctx, func() { p.watch(ctx) })
	return p, nil
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
		p.s.mu.Lock()
		delete(p.s.procs, p)
		p.s.mu.Unlock()
	}()

	res := &Result{Duration: dur}
	if reported {
		p.endReported = true
		res.ExitCode = status
		return res, p.finish(res)
	}
	var ee *exec.ExitError
	switch {
	case werr == nil:
	case errors.As(werr, &ee):
	default:
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
	p.mu.Lock()
	res.KilledBy = p.killedBy
	res.TimedOut = p.timedOut
	p.mu.Unlock()
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
