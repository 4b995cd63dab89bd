package sandbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// A session zygote is a per-call init (nsinit.c) that stops after the per-session part, the
// namespaces and the mounts, and then forks one child per call; each child runs the per-call
// init's remaining steps (rlimits, landlock, credentials, go-ahead, no_new_privs, fds, seccomp,
// exec) in the same order and with the same checks. That saves the re-exec of the daemon
// binary, the mounts and the namespace teardown (mostly RCU waits) of every call.
//
// What is per session rather than per call with a zygote: the mount namespace, so /tmp and
// /dev/shm (and the devpts instance); the PID namespace (hidepid=ptraceable and each call's own
// landlock domain keep a call from seeing, signalling or ptracing its siblings and the
// zygote); the IPC and UTS namespaces. A zygote serves only calls whose mount plan is identical
// (the zygote key), so writable, read-only and deny dirs, ReadOnlyWorkspace and the /tmp size
// always match the call. A deny path created after the zygote's start is not mount-covered in
// it, but landlock, planned per call, still denies it.

// zygoteCgroupPrefix names the zygotes' own cgroups, beside the sessions' under the daemon's
// root; no session may be named so (Spec.validate). KillSession, Close and the zygote's end
// remove them; New reaps a crashed daemon's with the rest.
const zygoteCgroupPrefix = "sandboxd.zygote"

// maxZygotesPerSession bounds the zygotes (each a process and a mount namespace) one session
// keeps when its calls differ in their mount plans; past it, idle ones are retired, and when none
// is idle a call takes the per-call init.
const maxZygotesPerSession = 4

// errZygoteUnavailable: nothing was forked; the caller runs the per-call init instead.
var errZygoteUnavailable = errors.New("zygote unavailable")

// zygote is one session zygote, seen from the daemon.
type zygote struct {
	key, session string
	cmd          *exec.Cmd
	conn         *net.UnixConn
	cg           *cgroup

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan zygFork           // fork requests awaiting their reply
	exits   map[int32]chan syscall.WaitStatus // calls' children by pid in the zygote's namespace
	dead    bool

	done chan struct{} // closed once the reader returned and the zygote was reaped
}

// zygFork is the zygote's answer to one fork request.
type zygFork struct {
	pid  int                     // in the daemon's pid namespace
	exit chan syscall.WaitStatus // receives the child's wait status exactly once
	err  error
}

// zygoteEligible says whether a call may run in a session zygote: the isolation between the
// calls of one session rests on landlock's signal and abstract-socket scoping (ABI 6) and its
// ptrace restriction (hidepid), so without those every call gets its own namespaces.
func (s *Sandbox) zygoteEligible() bool { return !s.noZygote && s.landlockABI >= 6 }

// zygoteKey is what the zygote's namespaces depend on: the session, the mount plan and
// whether it joined the session's network namespace.
func zygoteKey(session string, netns bool, mounts []mountOp) string {
	return fmt.Sprintf("%q %v %+v", session, netns, mounts)
}

// zygoteFor returns the live zygote for key, starting one when there is none.
func (s *Sandbox) zygoteFor(key, session string, mounts []mountOp, netns bool) (*zygote, error) {
	s.zmu.Lock()
	defer s.zmu.Unlock()
	if z := s.zygotes[key]; z != nil && !z.isDead() {
		return z, nil
	}
	delete(s.zygotes, key)
	n := 0
	for _, z := range s.zygotes {
		if z.session != session {
			continue
		}
		if z.idle() {
			// Retired while no call runs in it: killing a zygote kills its whole namespace.
			delete(s.zygotes, z.key)
			z.kill()
			continue
		}
		n++
	}
	if n >= maxZygotesPerSession {
		return nil, fmt.Errorf("%w: session has %d busy zygotes", errZygoteUnavailable, n)
	}
	var nsf *os.File
	if netns {
		var err error
		if nsf, err = s.sessionNetns(session); err != nil {
			return nil, fmt.Errorf("%w: %w", errZygoteUnavailable, err)
		}
	}
	s.zygSeq++
	z, err := s.startZygote(key, session, zygoteCgroupPrefix+"-"+strconv.FormatUint(s.zygSeq, 10), mounts, nsf)
	if err != nil {
		return nil, fmt.Errorf("%w: start: %w", errZygoteUnavailable, err)
	}
	s.zygotes[key] = z
	return z, nil
}

// startZygote starts a zygote through the per-call init path: same re-exec, same fds, same
// namespaces and mounts, in a cgroup of its own under the daemon's root.
//
// WARNING: every call of the session runs in what this sets up; rerun as root after changing:
// go test -run 'TestEscape|TestZygote|TestLifecycle|TestDaemonCrash' ./sandbox/
func (s *Sandbox) startZygote(key, session, cgName string, mounts []mountOp, netns *os.File) (z *zygote, err error) {
	cs := &childSpec{env: []string{}, netnsFD: -1, zygote: true, mounts: mounts}
	if netns != nil {
		cs.netnsFD = fdNetns
	}
	blob, err := cs.encode()
	if err != nil {
		return nil, err
	}
	cg, err := s.cg.newTopCgroup(cgName, s.limits)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = cg.kill()
			_ = cg.remove()
		}
	}()
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("zygote socket: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(pair[0]), "zygote"), os.NewFile(uintptr(pair[1]), "zygote")
	defer theirs.Close()
	// SO_PASSCRED: the zygote names each child in SCM_CREDENTIALS, which the kernel then
	// translates into our pid namespace.
	if err := unix.SetsockoptInt(pair[0], unix.SOL_SOCKET, unix.SO_PASSCRED, 1); err != nil {
		ours.Close()
		return nil, fmt.Errorf("zygote socket: %w", err)
	}
	fc, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		return nil, fmt.Errorf("zygote socket: %w", err)
	}
	conn := fc.(*net.UnixConn)
	defer func() {
		if err != nil {
			conn.Close()
		}
	}()
	specFile, err := memfdWith(blob)
	if err != nil {
		return nil, err
	}
	defer specFile.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("error pipe: %w", err)
	}
	defer errR.Close()
	syncR, syncW, err := os.Pipe()
	if err != nil {
		errW.Close()
		return nil, fmt.Errorf("sync pipe: %w", err)
	}
	defer syncW.Close()
	attr := &syscall.SysProcAttr{
		Setsid: true,
		// The zygote keeps its uid, so this holds for its life: it dies with the daemon, and
		// every call of the session with it (it is PID 1 of their namespace).
		Pdeathsig:  syscall.SIGKILL,
		Cloneflags: unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS,
	}
	if s.cg.v2 {
		attr.UseCgroupFD = true
		attr.CgroupFD = cg.fd
	}
	cmd := &exec.Cmd{
		Path:        "/proc/self/exe",
		Args:        []string{"sandboxd-zygote", initArg},
		Env:         []string{},
		ExtraFiles:  []*os.File{specFile, errW, syncR, netns, theirs}, // fds 3-7
		SysProcAttr: attr,
	}
	err = cmd.Start()
	errW.Close()
	syncR.Close()
	if err != nil {
		return nil, fmt.Errorf("start zygote: %w", err)
	}
	fail := func(e error) (*zygote, error) {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, e
	}
	if !s.cg.v2 {
		// The zygote forks nothing before the go-ahead, so every call's child starts in a
		// cgroup of the daemon's subtree.
		if err = cg.addProc(cmd.Process.Pid); err != nil {
			return fail(err)
		}
	}
	_, syncErr := syncW.Write([]byte{0})
	syncW.Close()
	// EOF on the error pipe: the mounts are done and the zygote serves.
	msg, rerr := io.ReadAll(errR)
	switch {
	case rerr != nil:
		return fail(fmt.Errorf("read zygote status: %w", rerr))
	case len(msg) > 0:
		return fail(decodeInitError(msg))
	case syncErr != nil:
		return fail(fmt.Errorf("release zygote: %w", syncErr))
	}
	z = &zygote{key: key, session: session, cmd: cmd, conn: conn, cg: cg,
		pending: map[uint64]chan zygFork{}, exits: map[int32]chan syscall.WaitStatus{},
		done: make(chan struct{})}
	go z.read(s.log)
	return z, nil
}

func (z *zygote) isDead() bool {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.dead
}

func (z *zygote) idle() bool {
	z.mu.Lock()
	defer z.mu.Unlock()
	return len(z.pending) == 0 && len(z.exits) == 0
}

// kill ends the zygote and with it its pid namespace; read reports the calls as killed.
func (z *zygote) kill() { _ = z.cmd.Process.Kill() }

// fork asks the zygote for a child with fds in request order (spec, error pipe, go-ahead pipe,
// stdin, stdout, stderr, ExtraFiles); the reply comes on the returned channel.
func (z *zygote) fork(fds []int) (chan zygFork, error) {
	if len(fds) < zygFixedFDs || len(fds) > zygMaxFDs {
		return nil, fmt.Errorf("%w: %d fds", errZygoteUnavailable, len(fds))
	}
	ch := make(chan zygFork, 1)
	z.mu.Lock()
	if z.dead {
		z.mu.Unlock()
		return nil, fmt.Errorf("%w: exited", errZygoteUnavailable)
	}
	z.nextID++
	id := z.nextID
	z.pending[id] = ch
	z.mu.Unlock()
	req := make([]byte, zygReqSize)
	binary.NativeEndian.PutUint32(req, zygMagic)
	binary.NativeEndian.PutUint64(req[8:], id)
	if _, _, err := z.conn.WriteMsgUnix(req, unix.UnixRights(fds...), nil); err != nil {
		z.mu.Lock()
		delete(z.pending, id)
		z.mu.Unlock()
		z.kill()
		return nil, fmt.Errorf("%w: send: %v", errZygoteUnavailable, err)
	}
	return ch, nil
}

// read is the zygote's reply loop and the owner of its process: it hands out fork replies
// and wait statuses, and once the zygote is gone it reaps it and reports every call still
// running as killed, which they are: the kernel kills a pid namespace whose PID 1 exits, and the
// zygote is reaped only after all of them.
func (z *zygote) read(log *zap.Logger) {
	defer close(z.done)
	buf := make([]byte, 2*zygReplySize)
	oob := make([]byte, 2*unix.CmsgSpace(unix.SizeofUcred))
	for {
		n, oobn, _, _, err := z.conn.ReadMsgUnix(buf, oob)
		if err != nil || n != zygReplySize {
			if err == nil && n != 0 {
				log.Warn("zygote protocol error", zap.Int("bytes", n))
			}
			break
		}
		typ := binary.NativeEndian.Uint32(buf)
		val := binary.NativeEndian.Uint32(buf[4:])
		id := binary.NativeEndian.Uint64(buf[8:])
		zpid := int32(binary.NativeEndian.Uint32(buf[16:]))
		switch typ {
		case zygExited:
			z.mu.Lock()
			ch := z.exits[zpid]
			delete(z.exits, zpid)
			z.mu.Unlock()
			if ch != nil {
				ch <- syscall.WaitStatus(val)
			} // else an orphan of some call, reaped by the zygote as PID 1
			continue
		case zygForked, zygFailed:
		default:
			log.Warn("zygote protocol error", zap.Uint32("type", typ))
			z.kill()
			continue
		}
		f := zygFork{}
		if typ == zygFailed {
			f.err = fmt.Errorf("%w: fork: %v", errZygoteUnavailable, syscall.Errno(val))
		} else if f.pid = credPid(oob[:oobn]); f.pid <= 0 {
			// A child we cannot name cannot be put in its cgroup: it waits for a go-ahead
			// that never comes and exits when its pipe closes.
			f.err = fmt.Errorf("%w: no child pid", errZygoteUnavailable)
		} else {
			f.exit = make(chan syscall.WaitStatus, 1)
		}
		z.mu.Lock()
		if f.exit != nil {
			z.exits[zpid] = f.exit
		}
		ch := z.pending[id]
		delete(z.pending, id)
		z.mu.Unlock()
		if ch != nil {
			ch <- f
		}
	}
	z.kill()
	z.conn.Close()
	_ = z.cmd.Wait()
	z.mu.Lock()
	z.dead = true
	pending, exits := z.pending, z.exits
	z.pending, z.exits = map[uint64]chan zygFork{}, map[int32]chan syscall.WaitStatus{}
	z.mu.Unlock()
	for _, ch := range pending {
		ch <- zygFork{err: fmt.Errorf("%w: exited", errZygoteUnavailable)}
	}
	for _, ch := range exits {
		ch <- syscall.WaitStatus(syscall.SIGKILL) // signalled by SIGKILL, no core
	}
	if err := z.cg.remove(); err != nil {
		log.Warn("remove zygote cgroup", zap.Error(err))
	}
}

// credPid returns the pid of the SCM_CREDENTIALS in oob, 0 when there is none.
func credPid(oob []byte) int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return 0
	}
	for i := range msgs {
		if uc, err := unix.ParseUnixCredentials(&msgs[i]); err == nil {
			return int(uc.Pid)
		}
	}
	return 0
}

// stopZygotes kills the zygotes of session (all with session ""), and waits until they are
// reaped.
func (s *Sandbox) stopZygotes(session string, all bool) {
	s.zmu.Lock()
	var stop []*zygote
	for k, z := range s.zygotes {
		if all || z.session == session {
			stop = append(stop, z)
			delete(s.zygotes, k)
		}
	}
	s.zmu.Unlock()
	for _, z := range stop {
		z.kill()
	}
	for _, z := range stop {
		<-z.done
	}
}

// startInZygote runs the call as a child of the session's zygote. errZygoteUnavailable means
// nothing was forked, so the caller may still run a per-call init.
//
// WARNING: the per-call half of the confinement with a zygote; rerun as root after changing:
// go test -run 'TestEscape|TestZygote|TestInit|TestLifecycle' ./sandbox/
func (s *Sandbox) startInZygote(p *Process, z *zygote, cs *childSpec) (err error) {
	spec := &p.spec
	step := s.stepTimer()
	// The child's spec: the per-call steps only. nsinit.c refuses mounts, a netns or zygote
	// mode in a zygote's child.
	callSpec := *cs
	callSpec.mounts, callSpec.netnsFD, callSpec.zygote = nil, -1, false
	blob, err := callSpec.encode()
	if err != nil {
		return err
	}
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
	defer errW.Close()
	syncR, syncW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("sync pipe: %w", err)
	}
	defer syncR.Close()
	defer syncW.Close()
	stdio := []*os.File{spec.Stdin, spec.Stdout, spec.Stderr}
	for i, f := range stdio {
		if f == nil {
			// As os/exec does for a nil stdio: /dev/null, never one of the daemon's.
			if f, err = os.OpenFile(os.DevNull, os.O_RDWR, 0); err != nil {
				return err
			}
			defer f.Close()
			stdio[i] = f
		}
	}
	fds := []int{int(specFile.Fd()), int(errW.Fd()), int(syncR.Fd())}
	for _, f := range append(stdio, spec.ExtraFiles...) {
		fds = append(fds, int(f.Fd()))
	}
	step("fds")
	p.start = time.Now()
	replies, err := z.fork(fds)
	if err != nil {
		return err
	}
	// The cgroup is made while the zygote forks and the child does its steps 2-4; the child
	// waits for the go-ahead before anything of the user's runs.
	cg, cgErr := s.cg.newCgroup(spec.Session, spec.Call, p.lim)
	f := <-replies
	step("zygote_fork")
	errW.Close()
	syncR.Close()
	if f.err != nil {
		if cgErr == nil {
			_ = cg.remove()
		}
		return f.err
	}
	p.pid, p.exitc = f.pid, f.exit
	// From here a child exists: every failure closes the go-ahead pipe (the child then fails
	// and exits without running anything) and reaps it through the zygote.
	abandon := func(e error) error {
		syncW.Close()
		_, _ = io.Copy(io.Discard, errR)
		<-f.exit
		if cg != nil {
			_ = cg.kill()
			_ = cg.remove()
		}
		return e
	}
	if cgErr != nil {
		cg = nil
		return abandon(cgErr)
	}
	// The child does not exit before its go-ahead, even after a failed step (fail() in
	// nsinit.c waits for it), so the pid is still the child's when it is written here.
	if err := cg.attach(f.pid); err != nil {
		return abandon(err)
	}
	p.cg = cg
	step("cgroup_attach")
	_, syncErr := syncW.Write([]byte{0})
	syncW.Close()
	msg, rerr := io.ReadAll(errR)
	switch {
	case rerr != nil:
		return abandon(fmt.Errorf("read init status: %w", rerr))
	case len(msg) > 0:
		return abandon(decodeInitError(msg))
	case syncErr != nil:
		return abandon(fmt.Errorf("release child: %w", syncErr))
	}
	step("child_setup_exec")
	return nil
}
