package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// listenFDsStart is the first fd systemd passes (SD_LISTEN_FDS_START).
const listenFDsStart = 3

// Listen returns the daemon's listener: the socket systemd passed (LISTEN_FDS, for this
// pid), or a new one at path. A path held by a live daemon is refused; a stale socket file
// (nobody answers) is removed first.
func Listen(path string) (net.Listener, error) {
	if l, ok, err := activated(); ok || err != nil {
		return l, err
	}
	// The socket's directory is where the daemon removes a stale socket and chmods the new
	// one by path, as root: a directory another user can change would let them swap a symlink
	// in between. A sticky one (/tmp) is fine: nobody else can replace root's socket there.
	dir := filepath.Dir(path)
	if err := checkTrustedDir(dir, true, true); err != nil {
		return nil, fmt.Errorf("socket directory: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create socket directory: %w", err)
	}
	if err := checkTrustedDir(dir, true, false); err != nil {
		return nil, fmt.Errorf("socket directory: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("socket path %s exists and is not a socket; remove it or choose another --socket", path)
		}
		c, err := net.DialTimeout("unix", path, time.Second)
		if err == nil {
			c.Close()
			return nil, fmt.Errorf("socket %s is held by a running daemon; stop it first or choose another --socket", path)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.ENOENT) {
			return nil, fmt.Errorf("probe existing socket %s: %w", path, err)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
		}
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	// Anyone may connect: authorization is by peer credentials on every request.
	if err := os.Chmod(path, 0o666); err != nil {
		l.Close()
		return nil, fmt.Errorf("chmod socket: %w", err)
	}
	return l, nil
}

// activated returns the systemd-passed listener, if the environment says there is one.
func activated() (net.Listener, bool, error) {
	pid, n := os.Getenv("LISTEN_PID"), os.Getenv("LISTEN_FDS")
	if n == "" {
		return nil, false, nil
	}
	if pid != strconv.Itoa(os.Getpid()) {
		return nil, false, nil
	}
	count, err := strconv.Atoi(n)
	if err != nil || count < 1 {
		return nil, true, fmt.Errorf("LISTEN_FDS=%q is not a positive count", n)
	}
	if count > 1 {
		return nil, true, fmt.Errorf("LISTEN_FDS=%d: sandboxd takes exactly one socket", count)
	}
	// Not for our children: they must never inherit the activation variables.
	os.Unsetenv("LISTEN_PID")
	os.Unsetenv("LISTEN_FDS")
	os.Unsetenv("LISTEN_FDNAMES")
	syscall.CloseOnExec(listenFDsStart)
	f := os.NewFile(listenFDsStart, "systemd-socket")
	l, err := net.FileListener(f)
	f.Close()
	if err != nil {
		return nil, true, fmt.Errorf("use the systemd socket: %w", err)
	}
	if _, ok := l.(*net.UnixListener); !ok {
		l.Close()
		return nil, true, errors.New("the systemd socket is not a Unix stream socket")
	}
	return l, true, nil
}

// cgroupLock is the host-wide lock on the daemon's cgroup subtree name (lockCgroupName).
type cgroupLock struct {
	f    *os.File
	path string
}

// Release removes the lock file, then drops the lock: a daemon that stops cleanly leaves no
// file behind (every cgroup_name used on a host left one). A daemon that takes the lock
// meanwhile checks it locked the file still at the path (lockCgroupName), so the removal
// cannot let two daemons share a name.
func (l *cgroupLock) Release() {
	_ = os.Remove(l.path)
	l.f.Close()
}

// sweepStaleLocks removes the lock files no daemon holds: a daemon killed with SIGKILL leaves
// its file behind, and daemons started in short-lived cgroups (tests, CI) name a new one each
// time. A file is removed only while we hold its lock; a daemon that opened it meanwhile finds
// its lock is not on the file at the path any more and takes a new one (lockCgroupName).
func sweepStaleLocks(dir string) {
	paths, _ := filepath.Glob(filepath.Join(dir, "cgroup-*.lock"))
	for _, p := range paths {
		f, err := os.OpenFile(p, os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			_ = os.Remove(p)
		}
		f.Close()
	}
}

// lockCgroupName takes a host-wide lock on the daemon's cgroup subtree: its name under the
// cgroup the daemon runs in. A daemon kills whatever is in its subtree at start (a crashed
// predecessor's leftovers), so a second daemon on the same subtree would kill the first one's
// calls: it is refused instead.
func lockCgroupName(name string) (*cgroupLock, error) {
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("read own cgroup: %w", err)
	}
	sum := sha256.Sum256(append(own, name...))
	dir := "/run/sandboxd"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create lock directory: %w", err)
	}
	sweepStaleLocks(dir)
	path := filepath.Join(dir, "cgroup-"+name+"-"+hex.EncodeToString(sum[:8])+".lock")
	for range 5 {
		f, busy, err := tryLock(path)
		switch {
		case busy:
			return nil, fmt.Errorf("another sandboxd in this cgroup uses sandbox.cgroup_name %q; give this one another name", name)
		case err != nil:
			return nil, fmt.Errorf("lock cgroup name: %w", err)
		}
		// The holder we waited on may have removed the file before we locked it: then our
		// lock is on a file no one else will open. Lock the one at the path instead.
		var held, now syscall.Stat_t
		if syscall.Fstat(int(f.Fd()), &held) == nil && syscall.Stat(path, &now) == nil &&
			held.Dev == now.Dev && held.Ino == now.Ino {
			return &cgroupLock{f: f, path: path}, nil
		}
		f.Close()
	}
	return nil, fmt.Errorf("lock cgroup name %q: the lock file keeps being replaced", name)
}
