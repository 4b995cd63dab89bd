package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/internal/errcode"
	seccomp "github.com/seccomp/libseccomp-golang"
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
	// JournalDir, a dir only root may write, keeps each running call's sweep journal (see
	// journal.go); "" keeps none.
	JournalDir string
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
	// gitlinks are the submodules of the indexes the sweeps read (gitlinkGits).
	gitlinks gitlinkCache

	cg          *cgroupLayout
	bpfEarly    [][]byte                     // seccomp filters a pooled init loads in its prelude
	bpfLate     []byte                       // the seccomp filter loaded just before execve (lastFilter)
	bpfLateUnix []byte                       // the same for a Spec that allows unix sockets
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
	// seams are what a test may replace in this Sandbox alone; New sets the real ones.
	seams seams
	// expansions keeps the landlock expansions of deny paths' ancestors between calls.
	expansions *expansionCache
	// pins bounds the files held open for calls' hidden and protected paths.
	pins *pinBudget
	// linkScans keeps the symlinks found in protected dirs between calls.
	linkScans *linkScans
	// mounts is the mount table children start with: where else a hidden path shows.
	mounts *mountTable

	// stepDone, when set (Config.StepObserver, benchmarks), is told how long each step of
	// Start and Wait took.
	stepDone func(step string, d time.Duration)

	guarding guardSet // the paths running calls guard (guardSet)

	mu     sync.Mutex
	closed bool
	procs  map[*Process]struct{}
	netns  map[string]*os.File // session -> loopback-only network namespace
}

// seams are the parts of a Sandbox a test replaces. They are per Sandbox, not package
// variables, so tests that replace them still run in parallel.
type seams struct {
	landlockABI func() int    // the kernel's landlock ABI version, 0 for none (landlockABI)
	poolIdle    time.Duration // how long the pool keeps idle inits after the last Start
	stampSlack  time.Duration // expansionCache.slack
	defaultDeny []string      // DefaultDenyPaths, as of New
	afterPlan   func()        // when set, runs between a call's plan and its child
}

// realSeams are the daemon's.
func realSeams() seams {
	return seams{landlockABI: landlockABI, poolIdle: poolIdle, stampSlack: stampSlack,
		defaultDeny: slices.Clone(DefaultDenyPaths)}
}

// New prepares the confinement once for the daemon's lifetime.
func New(cfg Config, log *zap.Logger) (*Sandbox, error) {
	return newSandbox(cfg, log, realSeams())
}

// newSandbox is New with the seams given (tests).
func newSandbox(cfg Config, log *zap.Logger, sm seams) (*Sandbox, error) {
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
		seams:  sm,
	}
	s.expansions = newExpansionCache(sm.stampSlack)
	s.linkScans = newLinkScans(sm.stampSlack)
	s.pins = newPinBudget()
	mt, err := newMountTable()
	if err != nil {
		return nil, errcode.New(errcode.SandboxSetup, fmt.Errorf("init sandbox: %w", err))
	}
	s.mounts = mt
	s.stepDone = cfg.StepObserver
	warnLoosenings(s.log, cfg.ExtraSyscalls)
	if err := s.init(); err != nil {
		return nil, errcode.New(errcode.SandboxSetup, fmt.Errorf("init sandbox: %w", err))
	}
	return s, nil
}

// nobodyUID is the overflow uid: the pool's user until a call names one.
const nobodyUID = 65534

// init runs once from New: cgroup layout, leftovers, seccomp, landlock.
func (s *Sandbox) init() error {
	l, err := detectCgroups(s.cfg.CgroupRoot)
	if err != nil {
		return fmt.Errorf("detect cgroups: %w", err)
	}
	s.cg = l
	l.user = s.cfg.UserLimits
	def := DefaultUserLimits()
	if l.user.MemoryMaxBytes <= 0 {
		l.user.MemoryMaxBytes = def.MemoryMaxBytes
	}
	if l.user.PidsMax <= 0 {
		l.user.PidsMax = def.PidsMax
	}
	// Until a call names its user, pooled inits wait for nobody's (any other uid's call
	// takes the per-call path, and the pool follows it).
	s.userHint.Store(nobodyUID)
	// A crashed daemon leaves its calls' cgroups (and maybe processes) behind: no process
	// outlives its call, not even across a daemon restart.
	if err := l.removeTree(""); err != nil {
		s.log.Warn("reap leftover cgroups", zap.Error(err))
	}
	// Loaded in this order: the ioctl refinement, the allowlist (which still lets the setup
	// syscalls through), then, just before execve, lastFilter, in the variant the call's
	// Spec.AllowUnixSockets picks. A pooled init loads the first two in its prelude.
	bpf := func(build func() (*seccomp.ScmpFilter, error)) ([]byte, error) {
		f, err := build()
		if err != nil {
			return nil, err
		}
		defer f.Release()
		return exportBPF(f)
	}
	for _, build := range []func() (*seccomp.ScmpFilter, error){
		refuseIoctls,
		func() (*seccomp.ScmpFilter, error) { return compileSeccomp(s.cfg.ExtraSyscalls) },
	} {
		b, err := bpf(build)
		if err != nil {
			return err
		}
		s.bpfEarly = append(s.bpfEarly, b)
	}
	for refuseUnix, late := range map[bool]*[]byte{true: &s.bpfLate, false: &s.bpfLateUnix} {
		if *late, err = bpf(func() (*seccomp.ScmpFilter, error) { return lastFilter(s.cfg.ExtraSyscalls, refuseUnix) }); err != nil {
			return err
		}
	}
	if s.prelude, err = encodePrelude(s.bpfEarly, s.limits.TmpSizeBytes, nil, false); err != nil {
		return err
	}
	if s.devNull, err = os.OpenFile(os.DevNull, os.O_RDWR, 0); err != nil {
		return fmt.Errorf("open /dev/null: %w", err)
	}
	s.landlockABI = s.seams.landlockABI()
	if s.landlockABI == 0 {
		s.log.Warn("landlock unavailable: filesystem confinement rests on mounts alone, deny paths created after a call starts are not covered")
	} else {
		s.log.Debug("landlock", zap.Int("abi", s.landlockABI))
	}
	// Last, so a failed init leaves no goroutine behind.
	s.janitor = newJanitor()
	s.pool = newPool(s)
	return nil
}

// Holds reports whether procCgroup, the text of a /proc/PID/cgroup, places the process in this
// sandbox's cgroup subtree: a call, a pooled init or a worker it started.
func (s *Sandbox) Holds(procCgroup []byte) bool { return s.cg.holds(procCgroup) }

// KillSession kills every execution of session and removes its cgroups; reason is what each
// killed process's outcome says killed it (e.g. "session_deleted").
func (s *Sandbox) KillSession(session, reason string) error {
	s.mu.Lock()
	var victims []*Process
	for p := range s.procs {
		if p.spec.Session == session {
			victims = append(victims, p)
		}
	}
	s.mu.Unlock()
	for _, p := range victims {
		_ = p.Kill(reason)
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

func (s *Sandbox) killSessionCgroups(session string) error {
	s.mu.Lock()
	if f := s.netns[session]; f != nil {
		f.Close()
		delete(s.netns, session)
	}
	s.mu.Unlock()
	var errs []error
	s.cg.eachUser(func(rel string) {
		if err := s.cg.removeTree(filepath.Join(rel, session)); err != nil {
			errs = append(errs, fmt.Errorf("kill session: %w", err))
		}
	})
	return errors.Join(errs...)
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

func (s *Sandbox) close() error {
	s.pool.close()
	s.janitor.close()
	// The pool's parent goes too once empty; a pooled call still running removes it when its
	// Wait releases it (Process.release).
	s.removePoolDir()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, f := range s.netns {
		f.Close()
		delete(s.netns, k)
	}
	s.mounts.close()
	return nil
}

// removePoolDir removes each user's pool dir that is empty, then each user dir that is: a
// closed sandbox leaves nothing behind.
func (s *Sandbox) removePoolDir() {
	s.cg.eachUser(func(rel string) {
		for _, d := range s.cg.dirs {
			_ = unix.Rmdir(filepath.Join(d, rel, poolDir))
			_ = unix.Rmdir(filepath.Join(d, rel))
		}
	})
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

// stepTimer returns a func reporting the time since its previous call to s.stepDone.
func (s *Sandbox) stepTimer() func(string) {
	if s.stepDone == nil {
		return func(string) {}
	}
	last := time.Now()
	return func(name string) {
		now := time.Now()
		s.stepDone(name, now.Sub(last))
		last = now
	}
}
