package sandbox

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// escapeEnv is the fixture every escape case runs against:
//
//	base/work     the writable dir (owned by the caller)
//	base/outside  owned by the caller too, so only the confinement (not file modes) stops writes
//	base/home     a home with .ssh/id_rsa and .env (denied) and .aws (denied, created later)
//	base/homelink a symlink to home, as /home is to /var/home on some hosts
//	base/rootonly a root-owned 0600 file: another user's secret
type escapeEnv struct {
	base, work, outside, home, rootOnly string
	hostPort                            int // a listener on the host's 127.0.0.1
	hostHits                            *atomic.Int32
	abstract                            string // an abstract unix socket of the host
	unixSock                            string // a pathname unix socket of the host the caller may connect to
	unixDgram                           string // the same, a datagram socket
}

const secret = "s3cr3t-do-not-leak"

// escapeEnvSeq tells apart the abstract sockets of escape fixtures alive at once.
var escapeEnvSeq atomic.Int32

func newEscapeEnv(t *testing.T) *escapeEnv {
	t.Helper()
	// Not under /tmp: the child's /tmp is private, so a write "escaping" there proves nothing.
	base := hostTempDir(t, "/var/tmp", "sbx-escape-")
	e := &escapeEnv{base: base, work: filepath.Join(base, "work"), outside: filepath.Join(base, "outside"),
		home: filepath.Join(base, "home"), rootOnly: filepath.Join(base, "rootonly")}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Chmod(base, 0o755))
	for _, d := range []string{e.work, e.outside, e.home, filepath.Join(e.home, ".ssh")} {
		must(os.Mkdir(d, 0o755))
		must(os.Chown(d, nobody, nobody))
	}
	for _, f := range []string{filepath.Join(e.outside, "f"), filepath.Join(e.home, ".ssh/id_rsa"),
		filepath.Join(e.home, ".env"), filepath.Join(e.work, "file")} {
		must(os.WriteFile(f, []byte(secret+"\n"), 0o644))
		must(os.Chown(f, nobody, nobody))
	}
	must(os.Symlink("home", filepath.Join(base, "homelink")))
	must(os.WriteFile(e.rootOnly, []byte(secret+"\n"), 0o600))
	// A setuid-root copy of id: if it ran with euid 0 the confinement would have failed.
	id, err := os.ReadFile("/usr/bin/id")
	must(err)
	must(os.WriteFile(filepath.Join(base, "suid-id"), id, 0o755))
	must(os.Chmod(filepath.Join(base, "suid-id"), 0o4755))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(err)
	e.hostPort = ln.Addr().(*net.TCPAddr).Port
	e.hostHits = &atomic.Int32{}
	e.abstract = fmt.Sprintf("@sbx-escape-%d-%d", os.Getpid(), escapeEnvSeq.Add(1))
	uln, err := net.Listen("unix", e.abstract)
	must(err)
	// As a server of the caller's own outside the sandbox (git's credential cache, an ssh
	// ControlMaster): owned by the caller, in a directory the child sees.
	e.unixSock = filepath.Join(base, "host.sock")
	pln, err := net.Listen("unix", e.unixSock)
	must(err)
	must(os.Chown(e.unixSock, nobody, nobody))
	e.unixDgram = filepath.Join(base, "host-dgram.sock")
	dg, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: e.unixDgram, Net: "unixgram"})
	must(err)
	must(os.Chown(e.unixDgram, nobody, nobody))
	go func() {
		for b := make([]byte, 64); ; {
			if _, _, err := dg.ReadFrom(b); err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { dg.Close() })
	done := make(chan struct{}, 3)
	// The pathname socket's connections are not counted: a case connects to it on purpose.
	for l, hits := range map[net.Listener]*atomic.Int32{ln: e.hostHits, uln: e.hostHits, pln: {}} {
		go func() {
			defer func() { done <- struct{}{} }()
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				hits.Add(1)
				c.Close()
			}
		}()
	}
	t.Cleanup(func() {
		ln.Close()
		uln.Close()
		pln.Close()
		<-done
		<-done
		<-done
	})
	return e
}

// pySyscall prints the errno name of a raw syscall: "errno=EPERM" or "ok".
const pySyscall = `import ctypes,errno,sys
libc=ctypes.CDLL(None,use_errno=True)
libc.syscall.restype=ctypes.c_long
a=[ctypes.c_ulong(int(x,0)) for x in sys.argv[2:]]
r=libc.syscall(ctypes.c_long(int(sys.argv[1],0)),*a)
print("errno="+errno.errorcode[ctypes.get_errno()] if r<0 else "ok")`

// pyUnixSocket tries the host's pathname socket $UNIXSOCK, then a socketpair, then the
// host's datagram socket $UNIXDGRAM through a datagram pair's end (connectable again).
const pyUnixSocket = `python3 -c 'import socket,os
try:
  s=socket.socket(socket.AF_UNIX); s.connect(os.environ["UNIXSOCK"]); print("connected")
except OSError as e: print("socket refused", e.errno)
a,b=socket.socketpair(); a.send(b"x"); print("socketpair ok" if b.recv(1)==b"x" else "socketpair broken")
try:
  a,b=socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM); a.connect(os.environ["UNIXDGRAM"]); a.send(b"x"); print("dgram sent")
except OSError as e: print("dgram refused", e.errno)'`

// pyTIOCSTI makes a fresh pty its controlling terminal (so the kernel itself would allow the
// call) and tries to inject input, plainly and with high bits set in the command.
const pyTIOCSTI = `import ctypes,errno,os
libc=ctypes.CDLL(None,use_errno=True)
m=os.open("/dev/ptmx",os.O_RDWR); os.grantpt=None
libc.unlockpt(m); libc.ptsname.restype=ctypes.c_char_p
s=os.open(libc.ptsname(m).decode(),os.O_RDWR)
c=ctypes.c_char(b"x")
for req in (0x5412, 0x100005412):
  r=libc.ioctl(s, ctypes.c_ulong(req), ctypes.byref(c))
  print("tiocsti", hex(req), "errno="+errno.errorcode[ctypes.get_errno()] if r<0 else "ok")`

type escapeCase struct {
	name   string
	script string
	spec   func(e *escapeEnv, s *Spec)
	during func(e *escapeEnv) // runs on the host while the call runs
	ctx    func(t *testing.T) context.Context
	check  func(t *testing.T, e *escapeEnv, res *Result, out string)
}

func wantOut(subs ...string) func(t *testing.T, e *escapeEnv, res *Result, out string) {
	return func(t *testing.T, e *escapeEnv, res *Result, out string) {
		t.Helper()
		for _, s := range subs {
			if !strings.Contains(out, s) {
				t.Errorf("output lacks %q:\n%s", s, out)
			}
		}
		if strings.Contains(out, secret) {
			t.Errorf("secret leaked:\n%s", out)
		}
	}
}

func wantUnchanged(path string, subs ...string) func(t *testing.T, e *escapeEnv, res *Result, out string) {
	return func(t *testing.T, e *escapeEnv, res *Result, out string) {
		t.Helper()
		wantOut(subs...)(t, e, res, out)
		b, err := os.ReadFile(filepath.Join(e.base, path))
		if err != nil || string(b) != secret+"\n" {
			t.Errorf("%s changed: %q %v", path, b, err)
		}
	}
}

func wantAbsent(path string, subs ...string) func(t *testing.T, e *escapeEnv, res *Result, out string) {
	return func(t *testing.T, e *escapeEnv, res *Result, out string) {
		t.Helper()
		wantOut(subs...)(t, e, res, out)
		if !filepath.IsAbs(path) {
			path = filepath.Join(e.base, path)
		}
		if _, err := os.Lstat(path); err == nil {
			t.Errorf("%s was created on the host", path)
			os.Remove(path)
		}
	}
}

// noHostProcess asserts no host process carries marker in its command line.
func noHostProcess(marker string) func(t *testing.T, e *escapeEnv, res *Result, out string) {
	return func(t *testing.T, e *escapeEnv, res *Result, out string) {
		t.Helper()
		ents, _ := os.ReadDir("/proc")
		for _, d := range ents {
			b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
			if err == nil && strings.Contains(string(b), marker) {
				t.Errorf("process %s (%q) outlived its call", d.Name(), b)
			}
		}
	}
}

func syscallCase(name string, nr int, args ...string) escapeCase {
	return escapeCase{
		name:   "seccomp_" + name,
		script: fmt.Sprintf("python3 -c '%s' %d %s", pySyscall, nr, strings.Join(args, " ")),
		check:  wantOut("errno=EPERM"),
	}
}

func escapeCases() []escapeCase {
	cases := []escapeCase{
		// Writes outside the writable dirs.
		{name: "write_root_fs", script: "echo x > /etc/sbx-escape; echo rc=$?",
			check: wantAbsent("/etc/sbx-escape", "Read-only file system")},
		{name: "write_outside_direct", script: "echo x > $OUT/f",
			check: wantUnchanged("outside/f", "Read-only file system")},
		{name: "write_dotdot", script: "echo x > $W/../outside/f",
			check: wantUnchanged("outside/f", "Read-only file system")},
		{name: "write_symlink", script: "ln -s $OUT/f $W/l && echo x > $W/l",
			check: wantUnchanged("outside/f", "Read-only file system")},
		{name: "write_hardlink", script: "ln $OUT/f $W/h; echo rc=$?; echo x >> $W/h",
			check: wantUnchanged("outside/f", "rc=1")},
		{name: "write_proc_self_root", script: "echo x > /proc/self/root$OUT/f",
			check: wantUnchanged("outside/f", "Read-only file system")},
		{name: "write_proc_cwd_dotdot", script: "cd $W && echo x > /proc/self/cwd/../outside/f",
			check: wantUnchanged("outside/f", "Read-only file system")},
		{name: "rename_out", script: "mv $W/file $OUT/moved; echo rc=$?",
			check: wantAbsent("outside/moved", "rc=1")},
		{name: "chmod_outside", script: "chmod 777 $OUT/f",
			check: wantOut("Read-only file system")},
		{name: "plan_mode_readonly", script: "echo x > $W/file",
			spec:  func(e *escapeEnv, s *Spec) { s.ReadOnlyWorkspace = true },
			check: wantUnchanged("work/file", "Read-only file system")},
		{name: "tmp_private", script: "echo x > /tmp/sbx-escape-tmp && echo wrote",
			check: wantAbsent("/tmp/sbx-escape-tmp", "wrote")},
		{name: "dev_shm_private", script: "echo x > /dev/shm/sbx-escape && echo wrote",
			check: wantAbsent("/dev/shm/sbx-escape", "wrote")},
		{name: "mknod_block_device", script: "mknod $W/sda b 8 0",
			check: wantAbsent("work/sda", "Operation not permitted")},
		{name: "cgroup_escape", script: "echo $$ > /sys/fs/cgroup/memory/cgroup.procs",
			check: wantOut("Read-only file system")},
		{name: "proc_sys_write", script: "echo 1 > /proc/sys/kernel/domainname",
			check: wantOut("Read-only file system")},

		// Reads of denied and foreign files.
		{name: "deny_existing_dir", script: "cat $H/.ssh/id_rsa; ls -a $H/.ssh",
			check: wantOut("id_rsa: Permission denied", "cannot open directory")},
		{name: "deny_existing_file", script: "cat $H/.env; echo rc=$?",
			check: wantOut("rc=0")}, // bound over by /dev/null: empty, secret checked by wantOut
		{name: "deny_created_later", script: `for i in $(seq 100); do [ -e $H/.aws/credentials ] && break; sleep 0.02; done; cat $H/.aws/credentials`,
			during: func(e *escapeEnv) {
				time.Sleep(100 * time.Millisecond)
				os.Mkdir(filepath.Join(e.home, ".aws"), 0o755)
				os.WriteFile(filepath.Join(e.home, ".aws/credentials"), []byte(secret+"\n"), 0o644)
			},
			check: wantOut("Permission denied")},
		// The home's parent is listed around the deny paths, and the symlink to the home is one
		// of its entries: its read rule must not land on the home.
		{name: "deny_created_later_beside_symlink", script: `for i in $(seq 100); do [ -e $H/.kube/config ] && break; sleep 0.02; done; cat $H/.kube/config $B/homelink/.kube/config`,
			spec: func(e *escapeEnv, s *Spec) { s.DenyPaths = append(s.DenyPaths, filepath.Join(e.home, ".kube")) },
			during: func(e *escapeEnv) {
				time.Sleep(100 * time.Millisecond)
				os.Mkdir(filepath.Join(e.home, ".kube"), 0o755)
				os.WriteFile(filepath.Join(e.home, ".kube/config"), []byte(secret+"\n"), 0o644)
			},
			check: wantOut(".kube/config: Permission denied", "homelink/.kube/config: Permission denied")},
		{name: "deny_via_symlink", script: "ln -s $H/.ssh/id_rsa $W/k; cat $W/k",
			check: wantOut("k: Permission denied")},
		{name: "other_users_file", script: "cat $B/rootonly",
			check: wantOut("Permission denied")},
		{name: "etc_shadow", script: "cat /etc/shadow",
			check: wantOut("Permission denied")},
		{name: "proc_masked", script: "wc -c < /proc/keys; wc -c < /proc/timer_list; wc -c < /proc/kallsyms",
			check: wantOut("0\n0\n0\n")},
		{name: "sys_firmware_masked", script: "ls /sys/firmware; echo rc=$?",
			check: wantOut("Permission denied")},
		{name: "daemon_env", script: "env; cat /proc/1/environ; cat /proc/*/environ 2>/dev/null",
			check: wantOut("PATH=")},

		// Resources.
		{name: "fork_bomb", script: `f(){ f | f & }; f; sleep 2`,
			spec: func(e *escapeEnv, s *Spec) { s.Limits.PidsMax = 32; s.Limits.CPUQuotaMilli = 300 },
			ctx:  func(t *testing.T) context.Context { return ctxTimeout(t, 3*time.Second) },
			check: func(t *testing.T, e *escapeEnv, res *Result, out string) {
				wantFlag(t, res.PidsLimited, "PidsLimited", res)
			}},
		{name: "memory_bomb", script: `python3 -c 'x=[]
while True: x.append(bytearray(8<<20))'`,
			spec: func(e *escapeEnv, s *Spec) { s.Limits.MemoryMaxBytes = 64 << 20 },
			check: func(t *testing.T, e *escapeEnv, res *Result, out string) {
				wantFlag(t, res.OOMKilled, "OOMKilled", res)
				if res.PeakMemoryBytes < 32<<20 || res.PeakMemoryBytes > 80<<20 {
					t.Errorf("peak memory %d, want near the 64 MiB limit", res.PeakMemoryBytes)
				}
			}},
		// cgroup1 charges socket buffers to a cgroup only once its kmem.tcp limit is set;
		// uncharged, 40 loopback connections held full queue ~150 MiB past the call's limit,
		// taken from net.ipv4.tcp_mem, which every TCP socket on the host shares.
		{name: "socket_buffers_bounded", script: `python3 -c 'import socket
ln = socket.socket(); ln.bind(("127.0.0.1", 0)); ln.listen(64)
keep, total = [], 0
for i in range(40):
	c = socket.create_connection(ln.getsockname()); s, _ = ln.accept(); c.setblocking(False)
	keep += [c, s]
	try:
		while True: total += c.send(bytes(1 << 20))
	except OSError: pass
print("queued", total >> 20, "MiB")'`,
			spec: func(e *escapeEnv, s *Spec) { s.Limits.MemoryMaxBytes = 64 << 20 },
			check: func(t *testing.T, e *escapeEnv, res *Result, out string) {
				var mib int
				if _, err := fmt.Sscanf(out[strings.Index(out, "queued"):], "queued %d MiB", &mib); err != nil && !res.OOMKilled {
					t.Fatalf("no total: %v", err)
				}
				if mib > 96 {
					t.Errorf("%d MiB queued in socket buffers, want the 64 MiB memory limit to bound them", mib)
				}
			}},
		{name: "disk_fill_tmp", script: "dd if=/dev/zero of=/tmp/fill bs=1M count=64",
			spec:  func(e *escapeEnv, s *Spec) { s.Limits.TmpSizeBytes = 8 << 20 },
			check: wantOut("No space left on device")},
		{name: "file_size_rlimit", script: "trap '' XFSZ; dd if=/dev/zero of=$W/big bs=1M count=4",
			spec:  func(e *escapeEnv, s *Spec) { s.Limits.FileSizeMaxBytes = 1 << 20 },
			check: wantOut("File too large")},
		{name: "open_files_rlimit", script: `python3 -c 'fs=[open("/dev/null") for i in range(100)]'`,
			spec:  func(e *escapeEnv, s *Spec) { s.Limits.OpenFilesMax = 32 },
			check: wantOut("Too many open files")},
		{name: "no_core_dumps", script: "ulimit -c", check: wantOut("0\n")},
		{name: "cpu_spin_timeout", script: "while :; do :; done",
			spec: func(e *escapeEnv, s *Spec) { s.Limits.CPUQuotaMilli = 200 },
			ctx:  func(t *testing.T) context.Context { return ctxTimeout(t, 300*time.Millisecond) },
			check: func(t *testing.T, e *escapeEnv, res *Result, out string) {
				if !res.TimedOut || res.KilledBy != "timeout" || res.Signal != "killed" {
					t.Errorf("res = %+v, want timed out and killed", res)
				}
				if res.CPUTimeMs > 200 {
					t.Errorf("cpu %d ms in 300 ms at a 20%% quota", res.CPUTimeMs)
				}
			}},

		// Orphans: nothing survives the call.
		{name: "orphan_background", script: "sleep 999.101 & echo started", check: noHostProcess("999.101")},
		{name: "orphan_setsid", script: "setsid sleep 999.102 & echo started", check: noHostProcess("999.102")},
		{name: "orphan_double_fork", script: "(sh -c 'sleep 999.103 &' &); echo started", check: noHostProcess("999.103")},
		{name: "orphan_nohup", script: "nohup sleep 999.104 >/dev/null 2>&1 & echo started", check: noHostProcess("999.104")},

		// Processes and privileges.
		{name: "kill_host_process", script: "kill -9 $HOSTPID; echo rc=$?", check: wantOut("rc=1")},
		{name: "host_processes_invisible", script: "ls /proc | grep -c '^[0-9]'",
			check: func(t *testing.T, e *escapeEnv, res *Result, out string) {
				// Only the call's own: the init, bash, ls and grep at most.
				if n, err := strconv.Atoi(strings.TrimSpace(out)); err != nil || n < 1 || n > 4 {
					t.Errorf("sees %q processes, want the call's own (at most 4)", out)
				}
			}},
		{name: "setuid_binary", script: "$B/suid-id -u", check: wantOut("65534\n")},
		{name: "su", script: "su -c id root </dev/null; echo rc=$?",
			check: func(t *testing.T, e *escapeEnv, res *Result, out string) {
				if strings.Contains(out, "uid=0") || !strings.Contains(out, "rc=1") {
					t.Errorf("su: %s", out)
				}
			}},
		{name: "capabilities_none", script: "grep -E 'CapEff|CapBnd|CapPrm|NoNewPrivs' /proc/self/status",
			check: wantOut("CapPrm:\t0000000000000000", "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1")},
		{name: "no_controlling_tty", script: "tty; echo > /dev/tty", check: wantOut("not a tty", "No such device or address")},
		{name: "tiocsti", script: "python3 -c '" + pyTIOCSTI + "'",
			check: wantOut("tiocsti 0x5412 errno=EPERM", "tiocsti 0x100005412 errno=EPERM")},
		// A lease on a file the daemon reads (a git config, a start-up file) fails its opens.
		{name: "file_lease", script: `echo x > f && python3 -c 'import fcntl,os
fd=os.open("f", os.O_RDONLY)
for cmd in (fcntl.F_SETLEASE, fcntl.F_SETLEASE|(1<<32)):
  try: fcntl.fcntl(fd, cmd, fcntl.F_RDLCK); print("lease taken")
  except (OSError, OverflowError) as e: print("lease refused", getattr(e, "errno", "big"))'`,
			check: func(t *testing.T, e *escapeEnv, res *Result, out string) {
				if strings.Contains(out, "lease taken") || !strings.Contains(out, "lease refused 1") {
					t.Errorf("lease: %s", out)
				}
			}},

		// Network.
		{name: "net_host_loopback_unreachable", script: `python3 -c 'import socket,os
s=socket.socket()
try: s.connect(("127.0.0.1",int(os.environ["HOSTPORT"]))); print("connected")
except OSError as e: print("refused", e.errno)'`,
			check: func(t *testing.T, e *escapeEnv, res *Result, out string) {
				wantOut("refused 111")(t, e, res, out)
				if e.hostHits.Load() != 0 {
					t.Errorf("host listener got a connection")
				}
			}},
		{name: "net_only_loopback", script: "cat /proc/net/route | wc -l; ls /proc/sys/net/ipv4/conf",
			check: wantOut("1\n", "all\ndefault\nlo\n")},
		{name: "net_loopback_inside_works", script: `python3 -c 'import socket
l=socket.socket(); l.bind(("127.0.0.1",0)); l.listen()
c=socket.create_connection(l.getsockname()); print("inside ok")'`, check: wantOut("inside ok")},
		{name: "net_abstract_unix_scoped", script: `python3 -c 'import socket,os
s=socket.socket(socket.AF_UNIX)
try: s.connect("\0"+os.environ["ABSTRACT"][1:]); print("connected")
except OSError as e: print("refused", e.errno)'`,
			// Same netns, unix sockets allowed: only landlock's scope stops it.
			spec:  func(e *escapeEnv, s *Spec) { s.AllowNetwork, s.AllowUnixSockets = true, true },
			check: wantOut("refused 1")},
		// A setuid or setgid file would run as the caller for whoever starts it outside.
		{name: "setid_file", script: `cp /usr/bin/id setid-copy; chmod 4755 setid-copy; echo chmod-u=$?; chmod g+s setid-copy; echo chmod-g=$?
python3 -c 'import os
for m in (0o4755, 0o2755):
  try: os.close(os.open("setid-%o" % m, os.O_CREAT|os.O_WRONLY, m)); print("created", oct(os.stat("setid-%o" % m).st_mode))
  except OSError as e: print("create refused", e.errno)
try: os.mknod("setid-mknod", 0o104755); print("mknod", oct(os.stat("setid-mknod").st_mode))
except OSError as e: print("mknod refused", e.errno)'
stat -c '%a %n' setid-copy`,
			check: func(t *testing.T, e *escapeEnv, res *Result, out string) {
				wantOut("chmod-u=1", "chmod-g=1", "create refused 1\ncreate refused 1", "mknod refused 1", "755 setid-copy")(t, e, res, out)
			}},
		{name: "netlink_route_and_diag_work", script: `python3 -c 'import socket
for p in (0, 4): socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, p)
print("route and diag ok")'; ip -o link | cut -d: -f2`, check: wantOut("route and diag ok", " lo\n")},
		{name: "unix_socket_of_the_host_refused", script: pyUnixSocket, check: wantOut("socket refused 1", "socketpair ok", "dgram refused 1")},
		{name: "unix_socket_of_the_host_when_allowed", script: pyUnixSocket,
			spec:  func(e *escapeEnv, s *Spec) { s.AllowUnixSockets = true },
			check: wantOut("connected", "socketpair ok", "dgram sent")},
		{name: "net_packet_socket", script: `python3 -c 'import socket
try: socket.socket(socket.AF_PACKET, socket.SOCK_RAW); print("opened")
except OSError as e: print("refused", e.errno)'`, check: wantOut("refused 1")},
	}
	for _, sc := range []struct {
		name string
		nr   int
		args []string
	}{
		{"ptrace_attach", 101, []string{"16", "1"}},
		{"ptrace_traceme", 101, []string{"0"}},
		{"process_vm_readv", 310, []string{"1", "0", "0", "0", "0", "0"}},
		{"process_vm_writev", 311, []string{"1", "0", "0", "0", "0", "0"}},
		{"mount", 165, []string{"0", "0", "0", "0", "0"}},
		{"umount2", 166, []string{"0", "0"}},
		{"pivot_root", 155, []string{"0", "0"}},
		{"move_mount", 429, []string{"0", "0", "0", "0", "0"}},
		{"fsopen", 430, []string{"0", "0"}},
		{"fsmount", 432, []string{"0", "0", "0"}},
		{"open_tree", 428, []string{"0", "0", "0"}},
		{"mount_setattr", 442, []string{"0", "0", "0", "0", "0"}},
		// A NULL program would be EFAULT if the call got through.
		{"seccomp_load", 317, []string{"1", "0", "0"}},
		{"unshare_user", 272, []string{"0x10000000"}},
		{"unshare_net", 272, []string{"0x40000000"}},
		{"setns", 308, []string{"0", "0"}},
		{"clone_newuser", 56, []string{"0x10000011", "0", "0", "0", "0"}},
		{"bpf", 321, []string{"0", "0", "0"}},
		{"perf_event_open", 298, []string{"0", "0", "0", "0", "0"}},
		{"keyctl", 250, []string{"0", "0"}},
		{"add_key", 248, []string{"0", "0", "0", "0", "0"}},
		{"request_key", 249, []string{"0", "0", "0", "0"}},
		{"kexec_load", 246, []string{"0", "0", "0", "0"}},
		{"kexec_file_load", 320, []string{"0", "0", "0", "0", "0"}},
		{"init_module", 175, []string{"0", "0", "0"}},
		{"finit_module", 313, []string{"0", "0", "0"}},
		{"delete_module", 176, []string{"0", "0"}},
		{"userfaultfd", 323, []string{"0"}},
		{"open_by_handle_at", 304, []string{"0", "0", "0"}},
		{"name_to_handle_at", 303, []string{"0", "0", "0", "0", "0"}},
		{"swapon", 167, []string{"0", "0"}},
		{"swapoff", 168, []string{"0"}},
		{"reboot", 169, []string{"0", "0", "0", "0"}},
		{"settimeofday", 164, []string{"0", "0"}},
		{"clock_settime", 227, []string{"0", "0"}},
		{"adjtimex", 159, []string{"0"}},
		{"acct", 163, []string{"0"}},
		{"sethostname", 170, []string{"0", "0"}},
		{"quotactl", 179, []string{"0", "0", "0", "0"}},
		{"io_uring_setup", 425, []string{"1", "0"}},
		{"io_uring_enter", 426, []string{"0", "0", "0", "0", "0", "0"}},
		{"io_uring_register", 427, []string{"0", "0", "0", "0"}},
		{"personality_no_aslr", 135, []string{"0x0040000"}},
		{"socket_unix", 41, []string{"1", "1", "0"}},
		{"socket_netlink_uevent", 41, []string{"16", "2", "15"}},
		{"socket_unix_high_bits", 41, []string{"0x100000001", "1", "0"}},
		{"x32_abi_getpid", 0x40000000 + 39, nil},
	} {
		cases = append(cases, syscallCase(sc.name, sc.nr, sc.args...))
	}
	cases = append(cases, escapeCase{name: "seccomp_clone3_enosys",
		script: fmt.Sprintf("python3 -c '%s' 435 0 0", pySyscall), check: wantOut("errno=ENOSYS")},
		// openat2's mode is in memory the filter cannot read: libraries fall back to openat.
		escapeCase{name: "seccomp_openat2_enosys",
			script: fmt.Sprintf("python3 -c '%s' 437 0 0 0 0", pySyscall), check: wantOut("errno=ENOSYS")},
		// The ptys of every devpts instance come from one host-wide pool: a call holds few.
		escapeCase{name: "ptys_bounded",
			script: `python3 -c 'import os
n=0
try:
  while n < 1000: os.open("/dev/ptmx", os.O_RDWR|os.O_NOCTTY); n+=1
except OSError: pass
print("ptys=%d" % n)'`, check: wantOut(fmt.Sprintf("ptys=%d\n", maxPtys))},
		// Legacy AIO's contexts come from one host-wide limit (fs.aio-max-nr): none for a call.
		escapeCase{name: "seccomp_io_setup_enosys",
			script: fmt.Sprintf("python3 -c '%s' 206 1 0", pySyscall), check: wantOut("errno=ENOSYS")},
		// A hard link would be a second name of the file that a later call's covers miss: no
		// call makes one (EXDEV, so tools copy instead), and git clone still works by copying.
		escapeCase{name: "seccomp_hard_links_exdev",
			script: `cd /tmp && echo s > f && { ln f g 2>&1 || true; } && python3 -c 'import os
try:
  os.link("f", "h")
except OSError as e:
  print("link errno=%d" % e.errno)' && git init -q r && git -C r -c user.name=x -c user.email=x@x commit -q --allow-empty -m i && git clone -q r c && echo cloned`,
			check: wantOut("Invalid cross-device link", "link errno=18", "cloned")})
	return cases
}

func wantFlag(t *testing.T, ok bool, name string, res *Result) {
	t.Helper()
	if !ok {
		t.Errorf("%s not reported: %+v", name, res)
	}
}

// TestEscape is the escape suite: each case tries one way out and asserts the specific
// refusal (EPERM, EROFS, killed by the cgroup, OOM reported, timed out). It runs every case in
// an init started for the call; TestPoolEscape runs them all again through pooled inits.
func TestEscape(t *testing.T) {
	// Not beside the parallel tests: its cases run in parallel with each other, and their
	// orphan markers are TestPoolEscape's too.
	s := newTestSandbox(t, Config{})
	s.noPool.Store(true)
	e := newEscapeEnv(t)
	for i, tc := range escapeCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runEscapeCase(t, s, e, i, tc, false)
		})
	}
}

// runEscapeCase runs one case; pooled waits for a ready pooled init and insists the call ran
// in it.
func runEscapeCase(t *testing.T, s *Sandbox, e *escapeEnv, i int, tc escapeCase, pooled bool) {
	spec := &Spec{
		Path: "/bin/sh", Args: []string{"-c", tc.script},
		Env: []string{"PATH=/usr/bin:/bin:/usr/sbin:/sbin", "LANG=C.UTF-8", "W=" + e.work, "OUT=" + e.outside,
			"H=" + e.home, "B=" + e.base, fmt.Sprintf("HOSTPID=%d", os.Getpid()),
			fmt.Sprintf("HOSTPORT=%d", e.hostPort), "ABSTRACT=" + e.abstract, "UNIXSOCK=" + e.unixSock, "UNIXDGRAM=" + e.unixDgram},
		Dir: e.work, UID: nobody, GID: nobody,
		WritableDirs: []string{e.work},
		DenyPaths: []string{filepath.Join(e.home, ".ssh"), filepath.Join(e.home, ".env"),
			filepath.Join(e.home, ".aws")},
		Session: "escape", Call: fmt.Sprintf("c%d", i),
		Limits: Limits{CPUQuotaMilli: 500},
	}
	if tc.spec != nil {
		tc.spec(e, spec)
	}
	ctx := ctxTimeout(t, 10*time.Second)
	if tc.ctx != nil {
		ctx = tc.ctx(t)
	}
	if pooled {
		waitPoolReady(t, s, 1)
	}
	duringDone := make(chan struct{})
	go func() {
		defer close(duringDone)
		if tc.during != nil {
			tc.during(e)
		}
	}()
	res, out, p, err := runProc(t, s, ctx, spec)
	<-duringDone
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if p.pooled != pooled {
		t.Fatalf("pooled = %v, want %v", p.pooled, pooled)
	}
	tc.check(t, e, res, out)
	if t.Failed() {
		t.Logf("result %+v\n%s", res, out)
	}
}
