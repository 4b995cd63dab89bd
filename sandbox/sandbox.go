package sandbox

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/sandboxd/sandboxd/internal/errcode"
)

// Config is the daemon-wide confinement configuration. Zero values mean the safe default.
type Config struct {
	CgroupRoot    string     // name of the daemon's subtree, default "sandboxd"
	Limits        Limits     // defaults for every execution
	UserLimits    UserLimits // what one user's executions take together
	ExtraSyscalls []string   // admin additions to the seccomp allowlist
	// StepObserver, when set, is told how long each step of a start and of a call's end took
	// (plan, handover, child_setup_exec, cgroup_create, ...): the daemon's metrics.
	StepObserver func(step string, d time.Duration)
}

// Limits bounds one execution. 0 means the default (Config.Limits, then DefaultLimits).
type Limits struct {
	MemoryMaxBytes   int64 // memory cgroup limit, swap disabled
	PidsMax          int64 // pids cgroup limit
	CPUQuotaMilli    int64 // CPU quota in thousandths of a core (1000 = one core)
	FileSizeMaxBytes int64 // RLIMIT_FSIZE
	OpenFilesMax     int64 // RLIMIT_NOFILE
	TmpSizeBytes     int64 // size of the private /tmp tmpfs
}

// DefaultLimits are used for any limit neither the Config nor the Spec sets.
var DefaultLimits = Limits{
	MemoryMaxBytes:   2 << 30,
	PidsMax:          512,
	CPUQuotaMilli:    1000,
	FileSizeMaxBytes: 1 << 30,
	OpenFilesMax:     4096,
	TmpSizeBytes:     512 << 20,
}

// merge returns l with every zero field taken from def.
func (l Limits) merge(def Limits) Limits {
	pick := func(a, b int64) int64 {
		if a > 0 {
			return a
		}
		return b
	}
	return Limits{
		MemoryMaxBytes:   pick(l.MemoryMaxBytes, def.MemoryMaxBytes),
		PidsMax:          pick(l.PidsMax, def.PidsMax),
		CPUQuotaMilli:    pick(l.CPUQuotaMilli, def.CPUQuotaMilli),
		FileSizeMaxBytes: pick(l.FileSizeMaxBytes, def.FileSizeMaxBytes),
		OpenFilesMax:     pick(l.OpenFilesMax, def.OpenFilesMax),
		TmpSizeBytes:     pick(l.TmpSizeBytes, def.TmpSizeBytes),
	}
}

// Sandbox starts confined executions. It is safe for concurrent use.
type Sandbox struct {
	cfg    Config
	limits Limits
	log    *zap.Logger

	cg          *cgroupLayout
	bpfEarly    [][]byte                     // seccomp filters a pooled init loads in its prelude
	bpfLate     [][]byte                     // seccomp filters loaded just before execve (refuseSetup)
	prelude     []byte                       // encodePrelude: what a pooled init does before its call
	llHint      atomic.Pointer[landlockHint] // the landlock base new pooled inits prebuild
	netnsHint   atomic.Pointer[string]       // the session whose netns new pooled inits join
	userHint    atomic.Uint32                // the uid whose cgroup new pooled inits are made in
	devNull     *os.File                     // /dev/null (read-write), handed to pooled calls for nil stdio
	landlockABI int                          // 0: none
	pool        *pool                        // inits started ahead of their calls
	janitor     *janitor                     // removes what finished calls leave

	// noPool (tests, benchmarks) sends every Start down the per-call path.
	noPool atomic.Bool

	// stepDone, when set (Config.StepObserver, benchmarks), is told how long each step of
	// Start and Wait took.
	stepDone func(step string, d time.Duration)

	mu     sync.Mutex
	closed bool
	procs  map[*Process]struct{}
	netns  map[string]*os.File // session -> loopback-only network namespace
}

// New prepares the confinement once for the daemon's lifetime.
func New(cfg Config, log *zap.Logger) (*Sandbox, error) {
	if cfg.CgroupRoot == "" {
		cfg.CgroupRoot = "sandboxd"
	}
	if log == nil {
		log = zap.NewNop()
	}
	s := &Sandbox{
		cfg:    cfg,
		limits: cfg.Limits.merge(DefaultLimits),
		log:    log.Named("sandbox"),
		procs:  map[*Process]struct{}{},
		netns:  map[string]*os.File{},
	}
	s.stepDone = cfg.StepObserver
	warnLoosenings(s.log, cfg.ExtraSyscalls)
	if err := s.init(); err != nil {
		return nil, errcode.New(errcode.SandboxSetup, fmt.Errorf("init sandbox: %w", err))
	}
	return s, nil
}

// KillSession kills every execution of session and removes its cgroups.
func (s *Sandbox) KillSession(session string) error {
	s.mu.Lock()
	var victims []*Process
	for p := range s.procs {
		if p.spec.Session == session {
			victims = append(victims, p)
		}
	}
	s.mu.Unlock()
	for _, p := range victims {
		_ = p.Kill("session_deleted")
	}
	// A call from the pool has its cgroup under <root>/pool, not the session's subtree.
	var errs []error
	for _, p := range victims {
		if p.pooled {
			if err := p.cg.removeDirs(); err != nil {
				errs = append(errs, fmt.Errorf("kill session: %w", err))
			}
		}
	}
	return errors.Join(append(errs, s.killSessionCgroups(session))...)
}

// Close kills every running execution. Start fails afterwards.
func (s *Sandbox) Close() error {
	s.mu.Lock()
	s.closed = true
	var victims []*Process
	for p := range s.procs {
		victims = append(victims, p)
	}
	s.mu.Unlock()
	for _, p := range victims {
		_ = p.Kill("daemon_closed")
	}
	return s.close()
}

// RemoveCgroups kills whatever is still in the daemon's cgroup subtree and removes the subtree,
// root included. Call it after Close, once every Wait has returned: a daemon that stops
// cleanly leaves no cgroup behind (a crashed one's are reaped by the next start).
func (s *Sandbox) RemoveCgroups() error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if !closed {
		return fmt.Errorf("%w: RemoveCgroups before Close", ErrBadSpec)
	}
	err := s.cg.removeTree("")
	for _, d := range s.cg.dirs {
		if rerr := os.Remove(d); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && err == nil {
			err = fmt.Errorf("remove cgroup root: %w", rerr)
		}
	}
	return err
}
