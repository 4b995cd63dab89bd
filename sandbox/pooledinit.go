package sandbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// poolSeq names pool cgroups uniquely in this process; the pid keeps two daemons on one root
// (a restart racing the old one's reaping) apart.
var poolSeq atomic.Uint64

// poolInit is an init started ahead of its call: in its own cgroup, blocked on fd 3.
type poolInit struct {
	uid   uint32 // its cgroup is under user-<uid>: only that user's call may take it
	cmd   *exec.Cmd
	cg    *cgroup
	lim   Limits        // what is written in cg
	sock  *os.File      // the daemon's end of the init's fd 3
	errR  *os.File      // the init's error pipe (fd 4)
	mntns int           // the init's mount namespace; see holdMountNS
	hint  *landlockHint // the landlock base it built in its prelude, or nil
	// tmpSize is the size its prelude gave /tmp and /dev/shm.
	tmpSize int64
	// mounts is the mount table when it was started: its mount namespace is a copy of that
	// table, or of a later one (aliasLookup.staleIn).
	mounts *mountTab
}

// startPoolInit starts one init for uid's calls in a new pool cgroup under uid's, and
// returns it once it is inside.
//
// WARNING: a pooled init must hold nothing of a call and run nothing until handOver sends it
// one, and it must be inside its cgroup before it is ready; rerun as root after changing:
// go test -run 'TestPool|TestEscape|TestDaemonCrash' ./sandbox/
func (s *Sandbox) startPoolInit(uid uint32) (_ *poolInit, err error) {
	name := strconv.Itoa(os.Getpid()) + "." + strconv.FormatUint(poolSeq.Add(1), 10)
	user, err := s.cg.userDir(uid)
	if err != nil {
		return nil, err
	}
	cg, err := s.cg.newCgroup(filepath.Join(user, poolDir), name, s.limits)
	if err != nil {
		return nil, err
	}
	// The table first, the fork after: one that changes between them gives the init a newer
	// copy than it records, which can only make it look stale when it is not.
	tab, err := s.mounts.get()
	if err != nil {
		_ = cg.remove()
		return nil, fmt.Errorf("read the mount table: %w", err)
	}
	// in, not a named result: the cleanup below must see the init however we return.
	in := &poolInit{uid: uid, cg: cg, lim: s.limits, mntns: -1, mounts: tab}
	defer func() {
		if err != nil {
			in.closeFiles()
			if in.cmd != nil {
				_ = in.cmd.Process.Kill()
				_ = in.cmd.Wait()
			}
			releaseMountNS(in.mntns)
			_ = cg.remove()
		}
	}()
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("pool socket: %w", err)
	}
	in.sock = os.NewFile(uintptr(pair[0]), "sandboxd-pool")
	childSock := os.NewFile(uintptr(pair[1]), "sandboxd-pool")
	defer childSock.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("error pipe: %w", err)
	}
	in.errR = errR
	defer errW.Close()
	// fd 5, the go-ahead pipe of a per-call init, is never written to: a pooled init is inside
	// its cgroup before it is ready, and its call is its go-ahead.
	syncR, syncW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("sync pipe: %w", err)
	}
	syncW.Close()
	defer syncR.Close()
	blob := s.prelude
	in.tmpSize = s.limits.TmpSizeBytes
	in.hint = s.llHint.Load()
	netns := s.netnsHintFile()
	if netns != nil {
		defer netns.Close()
	}
	if in.hint != nil || netns != nil {
		if blob, err = encodePrelude(s.bpfEarly, in.tmpSize, in.hint, netns != nil); err != nil {
			return nil, err
		}
	}
	prelude, err := memfdWith(blob)
	if err != nil {
		return nil, err
	}
	defer prelude.Close()
	cmd := &exec.Cmd{
		Path: "/proc/self/exe",
		Args: []string{"sandboxd-init", initArg, poolArg},
		Env:  []string{},
		// fds 3, 4, 5 as nsinit.h has them; 6 (the netns slot, filled with the call) holds
		// the prelude until then; 7, when there, the netns the prelude joins.
		ExtraFiles:  append([]*os.File{childSock, errW, syncR, prelude}, fileIf(netns)...),
		SysProcAttr: initAttr(cg),
	}
	err = cmd.Start()
	// The init's ends, closed here now: a failed prelude must show as EOF on our ends.
	childSock.Close()
	errW.Close()
	syncR.Close()
	prelude.Close()
	if err != nil {
		return nil, fmt.Errorf("start pooled init: %w", err)
	}
	in.cmd = cmd
	if !s.cg.v2 {
		// v1: the init runs only its prelude (no user code, nothing of a call) before it
		// blocks in sbx_receive_call; it is ready only once inside.
		if err := cg.addProc(cmd.Process.Pid); err != nil {
			return nil, err
		}
	}
	if err := in.awaitPrelude(); err != nil {
		return nil, err
	}
	in.mntns = holdMountNS(cmd.Process.Pid)
	// The call's end reads its figures with pread on files opened now, not opened then.
	if err := cg.openStats(); err != nil {
		return nil, err
	}
	return in, nil
}

// netnsHintFile is a copy of the network namespace of the latest call's session, for a new
// pooled init to wait in; nil when there is none (host network, or the session is gone).
// The copy is taken under the lock that session deletion closes the original under.
func (s *Sandbox) netnsHintFile() *os.File {
	name := s.netnsHint.Load()
	if name == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.netns[*name]
	if f == nil {
		return nil
	}
	c, err := dupFile(f, "sandboxd-netns-hint")
	if err != nil {
		return nil
	}
	return c
}

func fileIf(f *os.File) []*os.File {
	if f == nil {
		return nil
	}
	return []*os.File{f}
}

// preludeTimeout bounds the wait for a pooled init's prelude (a few mounts; ~0.2 ms).
const preludeTimeout = 5 * time.Second

// awaitPrelude waits for the init's one-byte "ready" on its socket, sent once the prelude's
// mounts are made. An init that failed instead has written its report on the error pipe and
// closed the socket: its report is the error, so a prelude that cannot work on this host
// shows in the log rather than as a pool that silently never fills.
func (in *poolInit) awaitPrelude() error {
	fd := int(in.sock.Fd())
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	deadline := time.Now().Add(preludeTimeout)
	for {
		n, err := unix.Poll(pfd, int(time.Until(deadline).Milliseconds())+1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("pooled init prelude: %w", err)
		}
		if n == 0 {
			return fmt.Errorf("pooled init prelude: no answer in %v", preludeTimeout)
		}
		break
	}
	var b [1]byte
	n, _, err := unix.Recvfrom(fd, b[:], unix.MSG_DONTWAIT)
	runtime.KeepAlive(in.sock)
	if err == nil && n == 1 {
		return nil
	}
	msg, _ := readAllClose(in.errR)
	in.errR = nil
	if len(msg) > 0 {
		return fmt.Errorf("pooled init prelude: %w", decodeInitError(msg))
	}
	return fmt.Errorf("pooled init prelude: init gone without a report (%v)", err)
}

// closeFiles closes the daemon's ends of the init's pipes and socket.
func (in *poolInit) closeFiles() {
	for _, f := range []*os.File{in.sock, in.errR} {
		if f != nil {
			f.Close()
		}
	}
	in.sock, in.errR = nil, nil
}

// discard kills an init that will never get a call, reaps it and removes its cgroup.
func (s *Sandbox) discard(in *poolInit) {
	in.closeFiles()
	_ = in.cmd.Process.Kill()
	_ = in.cmd.Wait()
	s.janitor.add(func() {
		releaseMountNS(in.mntns)
		if !in.cg.empty() {
			_ = in.cg.kill() // the init was reaped; nothing else ever ran in there
		}
		if err := in.cg.remove(); err != nil {
			s.log.Warn("remove pool cgroup", zap.Error(err))
		}
		// A taken init that never got its call leaves the pool short with no call whose
		// cleanup would refill it (the filler's own discards just make it look again).
		if s.pool != nil {
			s.pool.kick()
		}
	})
}

// handOver gives a ready init its call: the call's limits into its cgroup, then the spec and
// the call's fds in one message, which is also its go-ahead. handed is false when nothing
// reached the init (the caller takes the per-call path; the init was discarded); once handed,
// err is the init's report.
//
// WARNING: the limits must be in place before the spec is sent, and the fds are the call's
// whole view of the daemon; rerun as root after changing:
// go test -run 'TestPool|TestEscape|TestRealTools' ./sandbox/
func (s *Sandbox) handOver(p *Process, in *poolInit, blob []byte, netns *os.File, step func(string)) (handed bool, err error) {
	spec := &p.spec
	if p.lim != in.lim {
		if err := in.cg.setLimits(p.lim, in.lim); err != nil {
			s.log.Warn("set pooled cgroup limits", zap.Error(err))
			s.discard(in)
			return false, nil
		}
		in.lim = p.lim
		step("cgroup_limits")
	}
	// A nil stdio gets /dev/null, as exec.Cmd gives a per-call init; the netns slot too when
	// the call keeps the host's network (the init does not use it then, and closes it).
	var nulls []*os.File
	defer func() {
		for _, f := range nulls {
			f.Close()
		}
	}()
	fdOrNull := func(f *os.File, flag int) int {
		if f == nil {
			if s.devNull != nil {
				return int(s.devNull.Fd()) // the child gets its own reference
			}
			var err error
			if f, err = os.OpenFile(os.DevNull, flag, 0); err != nil {
				return -1 // sendmsg fails with EBADF: nothing is sent
			}
			nulls = append(nulls, f)
		}
		return int(f.Fd())
	}
	// The spec rides in the message when it fits (most do: a few KB). A larger one, or one the
	// socket's buffer does not take in one message (EMSGSIZE: nothing was sent), goes in a
	// memfd, whose slot /dev/null takes otherwise.
	inline := len(blob) <= inlineSpecMax
	for {
		msg := make([]byte, 4, 4+len(blob))
		var specFile *os.File
		if inline {
			msg = append(msg, blob...)
		} else if specFile, err = memfdWith(blob); err != nil {
			s.discard(in)
			return false, nil
		}
		fds := []int{fdOrNull(specFile, os.O_RDONLY),
			fdOrNull(spec.Stdin, os.O_RDONLY), fdOrNull(spec.Stdout, os.O_WRONLY), fdOrNull(spec.Stderr, os.O_WRONLY),
			fdOrNull(netns, os.O_RDONLY)}
		for _, f := range spec.ExtraFiles {
			fds = append(fds, int(f.Fd())) // never nil: see poolable
		}
		binary.NativeEndian.PutUint32(msg, uint32(len(fds)))
		p.start = time.Now()
		// One message: the child either gets all of the call or none of it. A dead init
		// (killed while idle) fails here with EPIPE, before anything of the call reached it.
		err = unix.Sendmsg(int(in.sock.Fd()), msg, unix.UnixRights(fds...), nil, unix.MSG_NOSIGNAL)
		runtime.KeepAlive(spec)
		runtime.KeepAlive(netns)
		runtime.KeepAlive(s.devNull)
		if specFile != nil {
			specFile.Close()
		}
		if !inline || !errors.Is(err, unix.EMSGSIZE) {
			break
		}
		inline = false
	}
	if err != nil {
		s.discard(in)
		return false, nil
	}
	// The message is the go-ahead too: the init joined its cgroup before it was ready. The init
	// drops its end of the socket as it places the call's fds; ours is closed off the call's path.
	step("handover")
	p.cmd, p.cg, p.mntns, p.pooled, p.sock = in.cmd, in.cg, in.mntns, true, in.sock
	in.sock = nil
	report, rerr := readAllClose(in.errR)
	in.errR = nil
	if rerr != nil || len(report) > 0 {
		p.abort()
		if rerr != nil {
			return true, fmt.Errorf("read init status: %w", rerr)
		}
		return true, decodeInitError(report)
	}
	step("child_setup_exec")
	return true, nil
}
