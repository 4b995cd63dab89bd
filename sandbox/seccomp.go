package sandbox

import (
	"fmt"
	"io"
	"os"
	"slices"
	"sort"

	seccomp "github.com/seccomp/libseccomp-golang"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// syscallRule is one allowlist entry. why says why an entry is there when that is not obvious.
type syscallRule struct {
	name string
	why  string
}

// allowedSyscalls is the seccomp allowlist, modeled on the container runtimes' default profiles
// (moby's default.json) minus what an agent's tools never need. Anything not listed gets EPERM,
// so a syscall new to the kernel is refused until reviewed here. Entries with argument filters
// are in conditionalSyscalls.
//
// Deliberately absent (EPERM): ptrace, process_vm_readv/writev, mount, umount2, pivot_root,
// move_mount, open_tree, fsopen, fsconfig, fsmount, fspick, mount_setattr, unshare, setns, bpf,
// perf_event_open, keyctl, add_key, request_key, kexec_load, kexec_file_load, init_module,
// finit_module, delete_module, userfaultfd, open_by_handle_at, name_to_handle_at, swapon,
// swapoff, reboot, settimeofday, clock_settime, clock_adjtime, adjtimex, acct, quotactl,
// quotactl_fd, io_uring_setup, io_uring_enter, io_uring_register, lookup_dcookie, iopl, ioperm,
// vhangup, syslog, sethostname, setdomainname, chroot, fanotify_init, nfsservctl, uselib,
// create_module, get_kernel_syms, query_module, _sysctl, ustat, sysfs, vm86, lsm_set_self_attr.
var allowedSyscalls = []syscallRule{
	{name: "accept"},
	{name: "accept4"},
	{name: "access"},
	{name: "alarm"},
	{name: "arch_prctl", why: "TLS setup by every x86-64 libc and the Go runtime"},
	{name: "bind"},
	{name: "brk"},
	{name: "cachestat"},
	{name: "capget"},
	{name: "capset", why: "only ever drops: the bounding set is empty"},
	{name: "chdir"},
	{name: "chmod"},
	{name: "chown"},
	{name: "clock_getres"},
	{name: "clock_gettime"},
	{name: "clock_nanosleep"},
	{name: "close"},
	{name: "close_range"},
	{name: "connect"},
	{name: "copy_file_range"},
	{name: "creat"},
	{name: "dup"},
	{name: "dup2"},
	{name: "dup3"},
	{name: "epoll_create"},
	{name: "epoll_create1"},
	{name: "epoll_ctl"},
	{name: "epoll_pwait"},
	{name: "epoll_pwait2"},
	{name: "epoll_wait"},
	{name: "eventfd"},
	{name: "eventfd2"},
	{name: "execve"},
	{name: "execveat"},
	{name: "exit"},
	{name: "exit_group"},
	{name: "faccessat"},
	{name: "faccessat2"},
	{name: "fadvise64"},
	{name: "fallocate"},
	{name: "fanotify_mark", why: "useless without fanotify_init, which is refused"},
	{name: "fchdir"},
	{name: "fchmod"},
	{name: "fchmodat"},
	{name: "fchmodat2"},
	{name: "fchown"},
	{name: "fchownat"},
	{name: "fcntl"},
	{name: "fdatasync"},
	{name: "fgetxattr"},
	{name: "flistxattr"},
	{name: "flock"},
	{name: "fork"},
	{name: "fremovexattr"},
	{name: "fsetxattr"},
	{name: "fstat"},
	{name: "fstatfs"},
	{name: "fsync"},
	{name: "ftruncate"},
	{name: "futex"},
	{name: "futex_requeue"},
	{name: "futex_wait"},
	{name: "futex_waitv"},
	{name: "futex_wake"},
	{name: "futimesat"},
	{name: "get_mempolicy"},
	{name: "get_robust_list"},
	{name: "get_thread_area"},
	{name: "getcpu"},
	{name: "getcwd"},
	{name: "getdents"},
	{name: "getdents64"},
	{name: "getegid"},
	{name: "geteuid"},
	{name: "getgid"},
	{name: "getgroups"},
	{name: "getitimer"},
	{name: "getpeername"},
	{name: "getpgid"},
	{name: "getpgrp"},
	{name: "getpid"},
	{name: "getppid"},
	{name: "getpriority"},
	{name: "getrandom"},
	{name: "getresgid"},
	{name: "getresuid"},
	{name: "getrlimit"},
	{name: "getrusage"},
	{name: "getsid"},
	{name: "getsockname"},
	{name: "getsockopt"},
	{name: "gettid"},
	{name: "gettimeofday"},
	{name: "getuid"},
	{name: "getxattr"},
	{name: "getxattrat"},
	{name: "inotify_add_watch"},
	{name: "inotify_init"},
	{name: "inotify_init1"},
	{name: "inotify_rm_watch"},
	{name: "io_cancel"},
	{name: "io_destroy"},
	{name: "io_getevents"},
	{name: "io_pgetevents"},
	{name: "io_setup", why: "legacy AIO; io_uring is the one refused"},
	{name: "io_submit"},
	{name: "ioprio_get"},
	{name: "ioprio_set", why: "lowering own I/O priority; raising needs CAP_SYS_ADMIN"},
	{name: "kill", why: "the PID namespace limits it to the call's own processes"},
	{name: "landlock_add_rule", why: "a tool may restrict itself further"},
	{name: "landlock_create_ruleset"},
	{name: "landlock_restrict_self"},
	{name: "lchown"},
	{name: "lgetxattr"},
	{name: "link"},
	{name: "linkat"},
	{name: "listen"},
	{name: "listmount", why: "reads the child's own mount namespace"},
	{name: "listxattr"},
	{name: "listxattrat"},
	{name: "llistxattr"},
	{name: "lremovexattr"},
	{name: "lseek"},
	{name: "lsetxattr"},
	{name: "lstat"},
	{name: "madvise"},
	{name: "map_shadow_stack", why: "glibc's CET shadow stacks"},
	{name: "membarrier", why: "JITs (node, java) and the Go runtime"},
	{name: "memfd_create"},
	{name: "memfd_secret"},
	{name: "mincore"},
	{name: "mkdir"},
	{name: "mkdirat"},
	{name: "mknod", why: "the kernel allows only fifos and sockets without CAP_MKNOD"},
	{name: "mknodat"},
	{name: "mlock"},
	{name: "mlock2"},
	{name: "mlockall"},
	{name: "mmap"},
	{name: "mprotect"},
	{name: "mq_getsetattr"},
	{name: "mq_notify"},
	{name: "mq_open", why: "the IPC namespace is private"},
	{name: "mq_timedreceive"},
	{name: "mq_timedsend"},
	{name: "mq_unlink"},
	{name: "mremap"},
	{name: "mseal"},
	{name: "msgctl"},
	{name: "msgget"},
	{name: "msgrcv"},
	{name: "msgsnd"},
	{name: "msync"},
	{name: "munlock"},
	{name: "munlockall"},
	{name: "munmap"},
	{name: "nanosleep"},
	{name: "newfstatat"},
	{name: "open"},
	{name: "openat"},
	{name: "openat2"},
	{name: "pause"},
	{name: "pidfd_getfd", why: "same ptrace-access check as ptrace, and only within the PID namespace"},
	{name: "pidfd_open", why: "Go's os/exec and systemd-style tools"},
	{name: "pidfd_send_signal"},
	{name: "pipe"},
	{name: "pipe2"},
	{name: "pkey_alloc"},
	{name: "pkey_free"},
	{name: "pkey_mprotect"},
	{name: "poll"},
	{name: "ppoll"},
	{name: "prctl", why: "PR_SET_NAME, PR_SET_PDEATHSIG, ...; no_new_privs cannot be undone"},
	{name: "pread64"},
	{name: "preadv"},
	{name: "preadv2"},
	{name: "prlimit64", why: "can only lower; raising a hard limit needs CAP_SYS_RESOURCE"},
	{name: "process_madvise"},
	{name: "process_mrelease"},
	{name: "pselect6"},
	{name: "pwrite64"},
	{name: "pwritev"},
	{name: "pwritev2"},
	{name: "read"},
	{name: "readahead"},
	{name: "readlink"},
	{name: "readlinkat"},
	{name: "readv"},
	{name: "recvfrom"},
	{name: "recvmmsg"},
	{name: "recvmsg"},
	{name: "remap_file_pages"},
	{name: "removexattr"},
	{name: "removexattrat"},
	{name: "rename"},
	{name: "renameat"},
	{name: "renameat2"},
	{name: "restart_syscall"},
	{name: "rmdir"},
	{name: "rseq", why: "glibc registers restartable sequences at start-up"},
	{name: "rt_sigaction"},
	{name: "rt_sigpending"},
	{name: "rt_sigprocmask"},
	{name: "rt_sigqueueinfo"},
	{name: "rt_sigreturn"},
	{name: "rt_sigsuspend"},
	{name: "rt_sigtimedwait"},
	{name: "rt_tgsigqueueinfo"},
	{name: "sched_get_priority_max"},
	{name: "sched_get_priority_min"},
	{name: "sched_getaffinity"},
	{name: "sched_getattr"},
	{name: "sched_getparam"},
	{name: "sched_getscheduler"},
	{name: "sched_rr_get_interval"},
	{name: "sched_setaffinity", why: "within the cpuset the cgroup allows"},
	{name: "sched_setattr"},
	{name: "sched_setparam"},
	{name: "sched_setscheduler"},
	{name: "sched_yield"},
	{name: "select"},
	{name: "semctl"},
	{name: "semget"},
	{name: "semop"},
	{name: "semtimedop"},
	{name: "sendfile"},
	{name: "sendmmsg"},
	{name: "sendmsg"},
	{name: "sendto"},
	{name: "set_mempolicy"},
	{name: "set_mempolicy_home_node"},
	{name: "set_robust_list"},
	{name: "set_thread_area"},
	{name: "set_tid_address"},
	{name: "setfsgid"},
	{name: "setfsuid"},
	{name: "setgid", why: "without capabilities only to ids already held"},
	{name: "setgroups"},
	{name: "setitimer"},
	{name: "setpgid"},
	{name: "setpriority"},
	{name: "setregid"},
	{name: "setresgid"},
	{name: "setresuid"},
	{name: "setreuid"},
	{name: "setrlimit"},
	{name: "setsid"},
	{name: "setsockopt"},
	{name: "setuid"},
	{name: "setxattr"},
	{name: "setxattrat"},
	{name: "shmat"},
	{name: "shmctl"},
	{name: "shmdt"},
	{name: "shmget"},
	{name: "shutdown"},
	{name: "sigaltstack"},
	{name: "signalfd"},
	{name: "signalfd4"},
	{name: "socketpair"},
	{name: "splice"},
	{name: "stat"},
	{name: "statfs"},
	{name: "statmount", why: "reads the child's own mount namespace"},
	{name: "statx"},
	{name: "symlink"},
	{name: "symlinkat"},
	{name: "sync"},
	{name: "sync_file_range"},
	{name: "syncfs"},
	{name: "sysinfo"},
	{name: "tee"},
	{name: "tgkill"},
	{name: "time"},
	{name: "timer_create"},
	{name: "timer_delete"},
	{name: "timer_getoverrun"},
	{name: "timer_gettime"},
	{name: "timer_settime"},
	{name: "timerfd_create"},
	{name: "timerfd_gettime"},
	{name: "timerfd_settime"},
	{name: "times"},
	{name: "tkill"},
	{name: "truncate"},
	{name: "umask"},
	{name: "uname"},
	{name: "unlink"},
	{name: "unlinkat"},
	{name: "utime"},
	{name: "utimensat"},
	{name: "utimes"},
	{name: "vfork"},
	{name: "wait4"},
	{name: "waitid"},
	{name: "write"},
	{name: "writev"},
}

// nsCloneFlags are the namespace flags clone may not carry (CLONE_NEWTIME is left out because
// it shares its bit with the exit signal byte of clone(2); clone3 is refused as a whole).
const nsCloneFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWUSER |
	unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP

// Personalities allowed, as in moby's profile: the default, the query value, and the 32-bit
// uname variants. Anything else, notably ADDR_NO_RANDOMIZE, is refused.
var allowedPersonalities = []uint64{0x0, 0x8, 0x20000, 0x20008, 0xffffffff}

// Address families a tool may create sockets in. AF_NETLINK is for route/link queries in the
// child's own network namespace (ip, getaddrinfo's interface checks); changes need
// CAP_NET_ADMIN, which it does not have. AF_PACKET, AF_KEY, AF_ALG, vsock and the exotic
// families are refused.
var allowedSocketFamilies = []uint64{unix.AF_UNIX, unix.AF_INET, unix.AF_INET6, unix.AF_NETLINK}

// compileSeccomp builds the filter. extra are admin additions (Config.ExtraSyscalls).
//
// WARNING: the child's syscall surface; rerun as root after changing:
// go test -run 'TestSeccomp|TestEscape|TestSeccompGolden' ./sandbox/
func compileSeccomp(extra []string) (*seccomp.ScmpFilter, error) {
	eperm := seccomp.ActErrno.SetReturnCode(int16(unix.EPERM))
	f, err := seccomp.NewFilter(eperm)
	if err != nil {
		return nil, fmt.Errorf("new seccomp filter: %w", err)
	}
	// Only the native ABI: a 32-bit (int 0x80) or x32 syscall gets EPERM, so a filter written
	// for x86-64 numbers cannot be sidestepped through another table.
	if err := f.SetBadArchAction(eperm); err != nil {
		f.Release()
		return nil, fmt.Errorf("seccomp bad arch action: %w", err)
	}
	// A binary tree instead of a linear scan: every syscall pays O(log n) compares, and the
	// kernel's load-time cache pass (it runs the filter for every syscall number) drops from
	// ~250 µs to a fraction, which is most of the child's seccomp cost.
	if err := f.SetOptimize(2); err != nil {
		f.Release()
		return nil, fmt.Errorf("seccomp optimize: %w", err)
	}
	// Deny wins over allow in libseccomp's generated code; lower priority on the allowlist is
	// irrelevant, but the filter must be identical run to run for the golden file.
	allow := func(name string, conds ...seccomp.ScmpCondition) error {
		nr, err := seccomp.GetSyscallFromName(name)
		if err != nil {
			return nil // not on this architecture or unknown to this libseccomp
		}
		if len(conds) == 0 {
			return f.AddRule(nr, seccomp.ActAllow)
		}
		return f.AddRuleConditional(nr, seccomp.ActAllow, conds)
	}
	names := make([]string, 0, len(allowedSyscalls)+len(extra)+len(setupSyscalls))
	for _, r := range allowedSyscalls {
		names = append(names, r.name)
	}
	names = append(names, extra...)
	// The init's own setup after this filter is in; refuseSetup takes them away again.
	names = append(names, setupOnly(extra)...)
	sort.Strings(names)
	for _, n := range names {
		if err := allow(n); err != nil {
			f.Release()
			return nil, fmt.Errorf("allow %s: %w", n, err)
		}
	}
	cond := func(arg uint, op seccomp.ScmpCompareOp, v ...uint64) seccomp.ScmpCondition {
		c, err := seccomp.MakeCondition(arg, op, v...)
		if err != nil {
			panic(err) // constant arguments: a programmer error
		}
		return c
	}
	rules := []struct {
		name  string
		conds [][]seccomp.ScmpCondition
	}{
		// clone without namespace flags: fork, vfork, threads. (arg0 is flags on x86-64.)
		{"clone", [][]seccomp.ScmpCondition{{cond(0, seccomp.CompareMaskedEqual, nsCloneFlags, 0)}}},
	}
	for _, p := range allowedPersonalities {
		rules = append(rules, struct {
			name  string
			conds [][]seccomp.ScmpCondition
		}{"personality", [][]seccomp.ScmpCondition{{cond(0, seccomp.CompareEqual, p)}}})
	}
	for _, fam := range allowedSocketFamilies {
		rules = append(rules, struct {
			name  string
			conds [][]seccomp.ScmpCondition
		}{"socket", [][]seccomp.ScmpCondition{{cond(0, seccomp.CompareEqual, fam)}}})
	}
	for _, r := range rules {
		for _, c := range r.conds {
			if err := allow(r.name, c...); err != nil {
				f.Release()
				return nil, fmt.Errorf("allow %s: %w", r.name, err)
			}
		}
	}
	if nr, err := seccomp.GetSyscallFromName("ioctl"); err == nil {
		// Refined by the second filter (refuseIoctls).
		if err := f.AddRule(nr, seccomp.ActAllow); err != nil {
			f.Release()
			return nil, fmt.Errorf("allow ioctl: %w", err)
		}
	}
	// clone3 passes its flags in memory seccomp cannot read: ENOSYS makes glibc and Go fall
	// back to clone, which the rule above inspects (what runc and moby do).
	if nr, err := seccomp.GetSyscallFromName("clone3"); err == nil {
		if err := f.AddRule(nr, seccomp.ActErrno.SetReturnCode(int16(unix.ENOSYS))); err != nil {
			f.Release()
			return nil, fmt.Errorf("clone3 enosys: %w", err)
		}
	}
	return f, nil
}

// setupSyscalls are what the init's setup still needs once the allowlist is loaded (a pooled
// init loads it while it waits, so the ~0.1 ms its load costs stays off the call's path): the
// call's mounts, the session's network namespace, and the last filter's own load. The
// allowlist lets them through and refuseSetup, loaded just before execve, refuses them, so the
// program the init execs meets exactly the allowlist (the filters' verdicts intersect).
//
// WARNING: the child's syscall surface; rerun as root after changing:
// go test -run 'TestSeccomp|TestEscape|TestPoolEscape' ./sandbox/
var setupSyscalls = []string{"mount", "mount_setattr", "open_tree", "move_mount", "setns", "seccomp"}

// loosenings are the admin's extra syscalls that the table does not already allow outright,
// sorted, each once: every one widens what a confined program may call (a setup syscall such
// as mount for the program itself, clone or socket without their argument checks).
func loosenings(extra []string) []string {
	var out []string
	for _, n := range extra {
		if slices.Contains(out, n) || slices.ContainsFunc(allowedSyscalls, func(r syscallRule) bool { return r.name == n }) {
			continue
		}
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// warnLoosenings logs the loosenings at warn level, once per start: the seccomp allowlist is
// the table in review, and a config that widens it must show beside the daemon's own logs.
func warnLoosenings(log *zap.Logger, extra []string) {
	if l := loosenings(extra); len(l) > 0 {
		log.Warn("sandbox.extra_syscalls loosens the seccomp allowlist of every confined call", zap.Strings("syscalls", l))
	}
}

// setupOnly lists the setup syscalls that neither the table nor the admin's extras allow.
func setupOnly(extra []string) []string {
	var out []string
	for _, n := range setupSyscalls {
		allowed := slices.Contains(extra, n)
		for _, r := range allowedSyscalls {
			allowed = allowed || r.name == n
		}
		if !allowed {
			out = append(out, n)
		}
	}
	return out
}

// refiningFilter starts a filter stacked on the allowlist to refuse more: it allows by default
// (the allowlist decides those) and refuses a foreign ABI as the allowlist does. eperm is the
// action for what it refuses.
func refiningFilter() (f *seccomp.ScmpFilter, eperm seccomp.ScmpAction, err error) {
	eperm = seccomp.ActErrno.SetReturnCode(int16(unix.EPERM))
	if f, err = seccomp.NewFilter(seccomp.ActAllow); err != nil {
		return nil, eperm, fmt.Errorf("new seccomp filter: %w", err)
	}
	if err := f.SetBadArchAction(eperm); err != nil {
		f.Release()
		return nil, eperm, fmt.Errorf("seccomp bad arch action: %w", err)
	}
	return f, eperm, nil
}

// refuseSetup is the last filter: EPERM for setupOnly, everything else left to the filters
// before it.
func refuseSetup(extra []string) (*seccomp.ScmpFilter, error) {
	f, eperm, err := refiningFilter()
	if err != nil {
		return nil, err
	}
	for _, n := range setupOnly(extra) {
		nr, err := seccomp.GetSyscallFromName(n)
		if err != nil {
			continue // not on this architecture: the allowlist did not add it either
		}
		if err := f.AddRule(nr, eperm); err != nil {
			f.Release()
			return nil, fmt.Errorf("refuse %s: %w", n, err)
		}
	}
	return f, nil
}

// refuseIoctls is a second filter stacked on the allowlist: ioctl TIOCSTI (typing into the
// terminal of whoever reads it) and TIOCLINUX get EPERM. It is separate because libseccomp
// refuses a rule whose action equals the filter's default (EPERM) and allows one comparison per
// argument; the kernel runs both filters and the stricter verdict wins. The kernel takes the
// command as 32 bits, so the comparison masks the upper half and a command with any of the
// upper bits set is refused outright: high bits cannot smuggle TIOCSTI past.
//
// WARNING: rerun as root after changing: go test -run 'TestEscape/tiocsti' ./sandbox/
func refuseIoctls() (*seccomp.ScmpFilter, error) {
	f, eperm, err := refiningFilter()
	if err != nil {
		return nil, err
	}
	nr, err := seccomp.GetSyscallFromName("ioctl")
	if err != nil {
		f.Release()
		return nil, fmt.Errorf("ioctl syscall: %w", err)
	}
	conds := []seccomp.ScmpCondition{}
	for _, req := range []uint64{unix.TIOCSTI, unix.TIOCLINUX} {
		c, err := seccomp.MakeCondition(1, seccomp.CompareMaskedEqual, 0xffffffff, req)
		if err != nil {
			f.Release()
			return nil, fmt.Errorf("ioctl condition: %w", err)
		}
		conds = append(conds, c)
	}
	high, err := seccomp.MakeCondition(1, seccomp.CompareGreater, 0xffffffff)
	if err != nil {
		f.Release()
		return nil, fmt.Errorf("ioctl condition: %w", err)
	}
	conds = append(conds, high)
	for _, c := range conds {
		if err := f.AddRuleConditional(nr, eperm, []seccomp.ScmpCondition{c}); err != nil {
			f.Release()
			return nil, fmt.Errorf("refuse ioctl: %w", err)
		}
	}
	return f, nil
}

// exportBPF returns the filter's raw BPF program, as the child loads it.
func exportBPF(f *seccomp.ScmpFilter) ([]byte, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("export seccomp: %w", err)
	}
	defer r.Close()
	errc := make(chan error, 1)
	go func() {
		errc <- f.ExportBPF(w)
		w.Close()
	}()
	b, rerr := io.ReadAll(r)
	if err := <-errc; err != nil {
		return nil, fmt.Errorf("export seccomp: %w", err)
	}
	if rerr != nil {
		return nil, fmt.Errorf("export seccomp: %w", rerr)
	}
	return b, nil
}
