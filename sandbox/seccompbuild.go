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
	// The init's own setup after this filter is in; lastFilter takes them away again.
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
		conds := [][]seccomp.ScmpCondition{{cond(0, seccomp.CompareEqual, fam)}}
		if fam == unix.AF_NETLINK {
			conds = nil
			for _, proto := range allowedNetlinkProtocols {
				conds = append(conds, []seccomp.ScmpCondition{cond(0, seccomp.CompareEqual, fam), cond(2, seccomp.CompareEqual, proto)})
			}
		}
		rules = append(rules, struct {
			name  string
			conds [][]seccomp.ScmpCondition
		}{"socket", conds})
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
	// Legacy AIO's contexts count against fs.aio-max-nr, one limit for the whole host and
	// nothing per cgroup or user: a call holding them all (a few io_setup calls) makes every
	// other program's io_setup fail with EAGAIN until it ends, a background task's until its
	// session does. ENOSYS, as on a kernel built without AIO: libaio's users (databases, fio,
	// qemu) fall back to threads. An admin extra allows it again.
	if nr, err := seccomp.GetSyscallFromName("io_setup"); err == nil && !slices.Contains(extra, "io_setup") {
		if err := f.AddRule(nr, seccomp.ActErrno.SetReturnCode(int16(unix.ENOSYS))); err != nil {
			f.Release()
			return nil, fmt.Errorf("io_setup enosys: %w", err)
		}
	}
	// A hard link made by one call outlives it as a second name of the file: once the file is
	// hidden by a Read deny rule or made read-only (a protected path, an Edit deny rule, or
	// one a later rule or hook names), a later call reads or writes it through the other name,
	// which no mount covers. EXDEV, as across filesystems: git clone, cargo, pnpm and ccache
	// copy instead, and ln and cp -l say why they failed. An admin extra allows them again.
	for _, name := range []string{"link", "linkat"} {
		if nr, err := seccomp.GetSyscallFromName(name); err == nil && !slices.Contains(extra, name) {
			if err := f.AddRule(nr, seccomp.ActErrno.SetReturnCode(int16(unix.EXDEV))); err != nil {
				f.Release()
				return nil, fmt.Errorf("%s exdev: %w", name, err)
			}
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

// lastFilter is the last filter, loaded just before execve: EPERM for setupOnly, for making
// a file setuid or setgid, for a file lease, and (refuseUnix) for unix sockets; everything
// else is left to the filters before it.
//
// A setuid or setgid file outlives the call: the kernel runs it with its owner's uid (or its
// group, the docker group say) for whoever starts it outside the sandbox, so a confined
// program could hand any local user the caller's identity. The bits are refused where a mode
// is given (chmod, the O_CREAT mode of open, mknod's regular files); mkdir drops them itself.
// openat2 carries its mode in memory seccomp cannot read: ENOSYS, so libraries fall back to
// openat.
//
// With refuseUnix, socket(AF_UNIX, ...) is refused (Spec.AllowUnixSockets): connect(2) to a
// pathname socket is no filesystem right, so neither the mounts nor landlock stop a program
// from reaching a server of the caller's outside the sandbox (git's credential cache, an ssh
// ControlMaster, a database with peer authentication) unless it cannot make the socket. A
// stream or seqpacket socketpair(2) stays: its two ends reach nothing else; a datagram pair is
// refused, since its ends can be connected to any datagram socket.
//
// WARNING: the child's syscall surface; rerun as root after changing:
// go test -run 'TestEscape|TestSeccompGolden' ./sandbox/
func lastFilter(extra []string, refuseUnix bool) (*seccomp.ScmpFilter, error) {
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
	// An argument matches when (arg & mask) == val. The kernel reads these arguments as ints
	// and modes: the masks keep to the low 32 bits, so high bits change nothing.
	type argRule struct {
		syscall   string
		arg       uint
		mask, val uint64
	}
	var rules []argRule
	for _, m := range []struct {
		syscall string
		arg     uint
	}{{"chmod", 1}, {"fchmod", 1}, {"fchmodat", 2}, {"fchmodat2", 2}, {"open", 2}, {"openat", 3}, {"creat", 1}, {"mknod", 1}, {"mknodat", 2}} {
		for _, bit := range []uint64{unix.S_ISUID, unix.S_ISGID} {
			rules = append(rules, argRule{m.syscall, m.arg, bit, bit})
		}
	}
	// A lease: the kernel then fails every non-blocking open of the file by another process
	// (EAGAIN) until it breaks the lease, and the holder may take it again at once. The
	// daemon reads a repository's configs and the user's start-up files, as the caller, to
	// learn what they name and keep it read-only; a call holding a lease on them would
	// blind that look. The caller owns those files, and the lease needs nothing more.
	rules = append(rules, argRule{"fcntl", 1, 0xffffffff, unix.F_SETLEASE})
	if refuseUnix {
		rules = append(rules,
			argRule{"socket", 0, 0xffffffff, unix.AF_UNIX},
			// The type's low bits are the type, the rest SOCK_NONBLOCK and SOCK_CLOEXEC.
			argRule{"socketpair", 1, 0xf, unix.SOCK_DGRAM})
	}
	for _, r := range rules {
		nr, err := seccomp.GetSyscallFromName(r.syscall)
		if err != nil {
			continue // not on this architecture: nothing to refuse
		}
		c, err := seccomp.MakeCondition(r.arg, seccomp.CompareMaskedEqual, r.mask, r.val)
		if err != nil {
			f.Release()
			return nil, fmt.Errorf("%s condition: %w", r.syscall, err)
		}
		if err := f.AddRuleConditional(nr, eperm, []seccomp.ScmpCondition{c}); err != nil {
			f.Release()
			return nil, fmt.Errorf("refuse %s: %w", r.syscall, err)
		}
	}
	if nr, err := seccomp.GetSyscallFromName("openat2"); err == nil {
		if err := f.AddRule(nr, seccomp.ActErrno.SetReturnCode(int16(unix.ENOSYS))); err != nil {
			f.Release()
			return nil, fmt.Errorf("openat2 enosys: %w", err)
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
