package sandbox

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	seccomp "github.com/seccomp/libseccomp-golang"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

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
	// syscalls through), then, just before execve, refuseSetup. A pooled init loads the first
	// two in its prelude.
	for i, build := range []func() (*seccomp.ScmpFilter, error){
		refuseIoctls,
		func() (*seccomp.ScmpFilter, error) { return compileSeccomp(s.cfg.ExtraSyscalls) },
		func() (*seccomp.ScmpFilter, error) { return refuseSetup(s.cfg.ExtraSyscalls) },
	} {
		f, err := build()
		if err != nil {
			return err
		}
		b, err := exportBPF(f)
		f.Release()
		if err != nil {
			return err
		}
		if i < 2 {
			s.bpfEarly = append(s.bpfEarly, b)
		} else {
			s.bpfLate = append(s.bpfLate, b)
		}
	}
	if s.prelude, err = encodePrelude(s.bpfEarly, s.limits.TmpSizeBytes, nil, false); err != nil {
		return err
	}
	if s.devNull, err = os.OpenFile(os.DevNull, os.O_RDWR, 0); err != nil {
		return fmt.Errorf("open /dev/null: %w", err)
	}
	s.landlockABI = detectLandlockABI()
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

// sessionNetns returns a copy of the session's loopback-only network namespace (made on first
// use) for one start; the caller closes it. A copy, taken under the lock the session's deletion
// closes the original under: the start then never hands on an fd number closed and reused
// meanwhile.
func (s *Sandbox) sessionNetns(session string) (*os.File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.netns[session]
	if f == nil {
		var err error
		if f, err = newLoopbackNetns(); err != nil {
			return nil, err
		}
		s.netns[session] = f
	}
	return dupFile(f, "sandboxd-netns")
}

// dupFile is a close-on-exec copy of f.
func dupFile(f *os.File, name string) (*os.File, error) {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("dup %s: %w", name, err)
	}
	return os.NewFile(uintptr(fd), name), nil
}

// cleanDirs makes every path absolute-clean and symlink-resolved, dropping duplicates.
func cleanDirs(v *fsView, in []string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, p := range in {
		c, err := cleanAbs(p)
		if err != nil {
			return nil, err
		}
		c = resolve(v, c)
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return out, nil
}

// outermost drops every dir that lies inside another one of the list: the outer dir's mount
// already carries it, and one mount per tree keeps the plan short.
func outermost(dirs []string) []string {
	var out []string
	for i, d := range dirs {
		inside := false
		for j, o := range dirs {
			if i != j && under(d, o) && d != o {
				inside = true
				break
			}
		}
		if !inside {
			out = append(out, d)
		}
	}
	return out
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
	if afterPlan != nil {
		afterPlan()
	}
	if netns != nil {
		defer netns.Close() // both paths below are done with it when they return
	}
	step("plan")
	if s.poolable(&p.spec) {
		if in := s.pool.take(p.spec.UID); in != nil {
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
	if s.pool == nil || s.noPool.Load() || len(spec.ExtraFiles) > maxPassedExtra {
		return false
	}
	for _, f := range spec.ExtraFiles {
		if f == nil {
			return false
		}
	}
	return true
}

// plan decides everything the child does; netns is the session's network namespace to join,
// nil to keep the host's.
//
// WARNING: the whole confinement is decided here; rerun as root after changing:
// go test -run 'TestEscape|TestInit' ./sandbox/
func (s *Sandbox) plan(p *Process) (cs *childSpec, netns *os.File, err error) {
	spec := &p.spec
	var l *look
	// Everything the plan learns about paths (the session's directories, their git dirs, the
	// deny paths) it learns as the caller: the root daemon never resolves or opens a path a
	// user named with root's rights.
	if cerr := asCaller(spec.UID, spec.GID, spec.Groups, func() { l, err = lookAround(spec) }); cerr != nil {
		return nil, nil, errors.Join(err, cerr)
	}
	if err != nil {
		return nil, nil, err
	}
	// The landlock expansion lists the ancestors of deny paths as the daemon: names only,
	// which become kernel rules that never grant past the caller's own permissions. As the
	// caller, a home under a 711 /home could not be listed, and would be unreadable in the
	// child.
	ll, err := landlockRules(s.landlockABI, spec, l.writable, l.readOnly, l.fileDeny, l.later)
	if err != nil {
		return nil, nil, err
	}
	// The next pooled inits prebuild this base: the next call is most likely this session's.
	if ll != nil && ll.baseKey != nil && !s.llHint.Load().matches(ll) {
		s.llHint.Store(ll.hint())
	}
	env := spec.Env
	if env == nil {
		env = []string{}
	}
	cs = &childSpec{
		path: spec.Path, dir: spec.Dir,
		argv: append([]string{spec.Path}, spec.Args...), env: env, direct: spec.Direct,
		uid: spec.UID, gid: spec.GID, groups: spec.Groups,
		netnsFD: -1, nExtra: len(spec.ExtraFiles),
		mounts: l.mounts, tmpSize: p.lim.TmpSizeBytes,
		rlimits: []rlimit{
			{unix.RLIMIT_CORE, 0}, // core dumps could land secrets on disk
			{unix.RLIMIT_FSIZE, uint64(p.lim.FileSizeMaxBytes)},
			{unix.RLIMIT_NOFILE, uint64(p.lim.OpenFilesMax)},
		},
		landlock: ll,
		early:    s.bpfEarly,
		late:     s.bpfLate,
	}
	// The next pooled inits are made in this user's cgroup: the next call is most likely theirs.
	if s.userHint.Load() != spec.UID {
		s.userHint.Store(spec.UID)
	}
	if !spec.AllowNetwork {
		if netns, err = s.sessionNetns(spec.Session); err != nil {
			return nil, nil, err
		}
		cs.netnsFD = fdNetns
		// The next pooled inits wait in this session's network namespace.
		if last := s.netnsHint.Load(); last == nil || *last != spec.Session {
			s.netnsHint.Store(&spec.Session)
		}
	}
	return cs, netns, nil
}

// afterPlan, tests only, runs between a call's plan and its child: where another process of
// the caller may swap a planned path for a symlink.
var afterPlan func()

// look is what a plan learned about the filesystem, as the caller.
type look struct {
	writable, readOnly []string // resolved, outermost only
	protected          []string // read-only inside writable dirs (protectedPaths)
	fileDeny           []string // deny paths landlock keeps unreadable
	later              []string // deny paths that may appear while the call runs (appearLater)
	mounts             []mountOp
}

// lookAround resolves the spec's paths and plans the call's mounts. Run as the caller.
func lookAround(spec *Spec) (*look, error) {
	v := newFSView()
	// Only the dirs the spec names are writable: a worktree's ".git" file names its git dir,
	// but that file is the agent's to write, so following it would let the agent pick what
	// becomes writable. A worktree's main repository is added as a session dir instead.
	writable, err := cleanDirs(v, spec.WritableDirs)
	if err != nil {
		return nil, err
	}
	l := &look{writable: outermost(writable)}
	readOnly, err := cleanDirs(v, spec.ReadOnlyDirs)
	if err != nil {
		return nil, err
	}
	l.readOnly = outermost(readOnly)
	deny, err := cleanDirs(v, spec.DenyPaths)
	if err != nil {
		return nil, err
	}
	// Paths the policy denies reading by a pattern: the ones that exist in the session's dirs
	// now are hidden like deny paths.
	for _, p := range expandPatterns(v, spec.HidePatterns, append(slices.Clone(l.writable), l.readOnly...)) {
		if !slices.Contains(deny, p) {
			deny = append(deny, p)
		}
	}
	if !spec.ReadOnlyWorkspace {
		if l.protected, err = protectedPaths(v, spec, l.writable); err != nil {
			return nil, err
		}
	}
	// The sockets (and the dirs that hold them) hidden by default stay mount-hidden only, also
	// when the config names them: landlock does not govern connect(2), so rules around one that
	// appears later would cost (a dozen around /run for a root caller) and protect nothing.
	// Resolved like the rest (/var/run is a symlink): the child mounts over none.
	sockets, err := cleanDirs(v, hiddenFor(spec.UID))
	if err != nil {
		return nil, err
	}
	sockets = hideAround(sockets, append(slices.Clone(l.writable), l.readOnly...))
	mountDeny := append(slices.Clone(deny), slices.DeleteFunc(slices.Clone(sockets), func(d string) bool { return slices.Contains(deny, d) })...)
	if l.mounts, err = callMounts(v, spec, l.writable, l.readOnly, mountDeny, l.protected); err != nil {
		return nil, err
	}
	l.fileDeny = slices.DeleteFunc(slices.Clone(deny), func(d string) bool { return slices.Contains(sockets, d) })
	l.later = appearLater(v, l.fileDeny, spec.UID)
	return l, nil
}

// hideAround returns hidden with every dir that holds one of keep (a session dir: an agent's
// socket dir the policy exposes by path, such as /run/user/<uid>/gnupg) replaced by its
// entries but the ones on the way to keep, recursively: a cover over the dir would hide what
// the session asked for, and only that is shown. A hidden path in a session dir, or equal to
// one, stays hidden, as deny paths do. The entries are listed as the caller, like the rest of
// the plan.
func hideAround(hidden, keep []string) []string {
	var out []string
	for _, h := range hidden {
		out = append(out, hideAroundOne(h, keep)...)
	}
	return out
}

func hideAroundOne(h string, keep []string) []string {
	holds := slices.ContainsFunc(keep, func(k string) bool { return k != h && under(k, h) })
	if !holds {
		return []string{h}
	}
	entries, err := os.ReadDir(h)
	if err != nil {
		return []string{h} // cannot be listed: hidden whole, the session dir with it
	}
	var out []string
	for _, e := range entries {
		// A symlink needs no cover: what it leads to is covered where it lies, or lies
		// outside and is not the runtime dir's to hide (and the child mounts over no symlink).
		if p := filepath.Join(h, e.Name()); !slices.Contains(keep, p) && e.Type()&os.ModeSymlink == 0 {
			out = append(out, hideAroundOne(p, keep)...)
		}
	}
	return out
}

// startCold creates the call's cgroup and re-executes this binary as the call's init.
//
// WARNING: the child must be inside its cgroup before its go-ahead; rerun as root after
// changing: go test -run 'TestEscape|TestInit' ./sandbox/
func (s *Sandbox) startCold(p *Process, blob []byte, netns *os.File, step func(string)) (err error) {
	spec := &p.spec
	// v2 needs the cgroup before the clone (CLONE_INTO_CGROUP). On v1 it is made after the
	// fork, while the child execs and sets itself up: the child waits for the go-ahead before
	// anything of the user's runs, so creating it later costs no confinement, only less time.
	var cg *cgroup
	defer func() {
		if err != nil && cg != nil {
			_ = cg.kill()
			_ = cg.remove()
		}
	}()
	if s.cg.v2 {
		if cg, err = s.newCallCgroup(spec, p.lim); err != nil {
			return err
		}
		p.cg = cg
		step("cgroup_create")
	}

	// The spec travels in a sealed memfd rather than a pipe: no writer goroutine, no pipe
	// size limit, and the child reads a fixed snapshot.
	specFile, err := memfdWith(blob)
	if err != nil {
		return err
	}
	defer specFile.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("error pipe: %w", err)
	}
	defer errR.Close()
	syncR, syncW, err := os.Pipe()
	if err != nil {
		errW.Close()
		return fmt.Errorf("sync pipe: %w", err)
	}
	defer syncW.Close()

	extra := []*os.File{specFile, errW, syncR, netns}
	extra = append(extra, spec.ExtraFiles...)
	cmd := &exec.Cmd{
		Path:        "/proc/self/exe",
		Args:        []string{"sandboxd-init", initArg},
		Env:         []string{},
		Stdin:       spec.Stdin,
		Stdout:      spec.Stdout,
		Stderr:      spec.Stderr,
		ExtraFiles:  extra,
		SysProcAttr: initAttr(cg),
	}
	step("fds")
	p.start = time.Now()
	err = cmd.Start()
	errW.Close()
	syncR.Close()
	if err != nil {
		return fmt.Errorf("start init: %w", err)
	}
	p.cmd = cmd
	p.mntns = holdMountNS(cmd.Process.Pid)
	step("fork_exec")
	if !s.cg.v2 {
		// v1: the child is blocked on the sync pipe until its pid is in every controller.
		if cg, err = s.newCallCgroup(spec, p.lim); err == nil {
			p.cg = cg
			step("cgroup_create")
			err = cg.addProc(cmd.Process.Pid)
		}
		if err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			releaseMountNS(p.mntns)
			return err
		}
		step("cgroup_attach")
	}
	// A child that failed before the go-ahead has closed its end (EPIPE); its report on the
	// error pipe says why, so read that before giving up.
	_, syncErr := syncW.Write([]byte{0})
	syncW.Close()
	// EOF on the CLOEXEC error pipe: execve succeeded. Anything else is the init's report.
	msg, rerr := io.ReadAll(errR)
	switch {
	case rerr != nil || len(msg) > 0:
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		releaseMountNS(p.mntns)
		if rerr != nil {
			return fmt.Errorf("read init status: %w", rerr)
		}
		return decodeInitError(msg)
	case syncErr != nil:
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		releaseMountNS(p.mntns)
		return fmt.Errorf("release child: %w", syncErr)
	}
	step("child_setup_exec")
	return nil
}

// newCallCgroup creates <root>/user-<uid>/<session>/<call>. A call name may come again once
// its last run ended (a session's restarted worker); that run's cgroup may still be queued for
// the janitor, so on EEXIST the queue is flushed and the create tried once more.
func (s *Sandbox) newCallCgroup(spec *Spec, lim Limits) (*cgroup, error) {
	user, err := s.cg.userDir(spec.UID)
	if err != nil {
		return nil, err
	}
	parent := filepath.Join(user, spec.Session)
	cg, err := s.cg.newCgroup(parent, spec.Call, lim)
	if errors.Is(err, os.ErrExist) {
		s.janitor.flush()
		cg, err = s.cg.newCgroup(parent, spec.Call, lim)
	}
	return cg, err
}

// readAllClose reads f to EOF and closes it.
func readAllClose(f *os.File) ([]byte, error) {
	b, err := io.ReadAll(f)
	f.Close()
	return b, err
}

// InitError is the child's report of the setup step that failed; the program never ran.
type InitError struct {
	Errno syscall.Errno
	Step  string
}

// Error says which step failed and why.
func (e *InitError) Error() string { return fmt.Sprintf("sandbox init: %s: %v", e.Step, e.Errno) }

// Unwrap lets callers test errors.Is(err, ErrInitFailed) or errors.Is(err, syscall.ENOENT).
func (e *InitError) Unwrap() []error { return []error{ErrInitFailed, e.Errno} }

func decodeInitError(b []byte) error {
	if len(b) < 8 {
		return fmt.Errorf("%w: short report", ErrInitFailed)
	}
	code := binary.NativeEndian.Uint32(b)
	n := binary.NativeEndian.Uint32(b[4:])
	msg := b[8:]
	if int(n) < len(msg) {
		msg = msg[:n]
	}
	return &InitError{Errno: syscall.Errno(code), Step: string(bytes.ToValidUTF8(msg, nil))}
}

// memfdWith returns a sealed memfd holding b, positioned at its start.
func memfdWith(b []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate("sandboxd-spec", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd: %w", err)
	}
	f := os.NewFile(uintptr(fd), "sandboxd-spec")
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, fmt.Errorf("write spec: %w", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS,
		unix.F_SEAL_SEAL|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE); err != nil {
		f.Close()
		return nil, fmt.Errorf("seal spec: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("rewind spec: %w", err)
	}
	return f, nil
}

func (p *Process) killAll() error {
	if err := p.cg.kill(); err != nil {
		return fmt.Errorf("kill cgroup: %w", err)
	}
	return nil
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

// release drops what a reaped call still holds: its mount namespace, then its cgroup.
func (p *Process) release() {
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
