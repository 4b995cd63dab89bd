package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/cgroups/v3"
	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/containerd/cgroups/v3/cgroup2"
	"github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/internal/cgroupfs"
)

// The cgroups are created, limited and attached to through containerd/cgroups' managers
// (cgroup1 on v1 and hybrid hosts, cgroup2 on unified ones), and killed through cgroup2's on
// v2. By hand stays what they cannot do or do at a cost: CLONE_INTO_CGROUP's directory fd (v2),
// the call's statistics read from files opened ahead (cgroupstats.go), a kill whose freeze is
// bounded in time (the managers' Freeze waits without limit for a task in uninterruptible
// sleep), removal (removeDirs), and the reaping of a crashed daemon's leftovers, whose shape no
// manager knows.

// cgroupLayout is where this daemon's subtree lives, found once in New.
type cgroupLayout struct {
	v2   bool
	dirs map[string]string // v1: controller -> <mount>/<own cgroup>/<root>; v2: "" -> same
	// v1: the controllers sandboxd uses, and each one's path to <root> inside its mount.
	hier cgroup1.Hierarchy
	rel  map[cgroup1.Name]string
	// swap: the kernel accounts swap, so a call's can be set to none (memsw on v1,
	// memory.swap.max on v2); without it, v1 gets swappiness 0 and v2 has no swap to limit.
	swap bool
	// tcp (v1): the memory controller has memory.kmem.tcp.limit_in_bytes. cgroup1 charges
	// the buffers of a cgroup's TCP and UDP sockets to it only once that limit is set
	// (cgroup2 charges them to memory.current always); until then they count against the
	// host's net.ipv4.tcp_mem alone, one limit for every socket on the host, which one
	// call's loopback connections (a few hundred, each holding its buffers full) could take
	// whole, beyond its memory limit.
	tcp bool
	// user bounds what all of one uid's calls and workers take together: every cgroup of the
	// uid sits under <root>/user-<uid>, which has these limits.
	user UserLimits
	// users holds the uids whose user-<uid> dir was made (and given its limits) by this daemon.
	users sync.Map
	// rel2 is the root's path inside the cgroup2 mount (v2), as /proc/PID/cgroup shows it.
	rel2 string
}

// UserLimits bounds one user's calls together. 0 means the default (DefaultUserLimits).
type UserLimits struct {
	MemoryMaxBytes int64
	PidsMax        int64
}

// DefaultUserLimits are half the host's memory and 4096 processes.
func DefaultUserLimits() UserLimits {
	var si unix.Sysinfo_t
	mem := int64(8 << 30)
	if unix.Sysinfo(&si) == nil && si.Totalram > 0 {
		mem = int64(si.Totalram) * int64(si.Unit) / 2
	}
	return UserLimits{MemoryMaxBytes: mem, PidsMax: 4096}
}

// userDir is uid's dir under the root, "user-<uid>", made with the user limits the first time.
//
// WARNING: the bound on what one user's calls take together; rerun as root after changing:
// go test -run 'TestUserCgroup' ./sandbox/
func (l *cgroupLayout) userDir(uid uint32) (string, error) {
	rel := "user-" + strconv.FormatUint(uint64(uid), 10)
	if _, ok := l.users.Load(uid); ok {
		return rel, nil
	}
	lim := limitSet{mem: l.user.MemoryMaxBytes, pids: l.user.PidsMax}
	if _, err := l.create(rel, lim, true); err != nil {
		return "", fmt.Errorf("create user cgroup: %w", err)
	}
	l.users.Store(uid, true)
	return rel, nil
}

// eachUser calls f with each user dir this daemon made, "user-<uid>".
func (l *cgroupLayout) eachUser(f func(rel string)) {
	l.users.Range(func(k, _ any) bool {
		f("user-" + strconv.FormatUint(uint64(k.(uint32)), 10))
		return true
	})
}

// detectCgroups finds the daemon's subtree for each hierarchy and creates its root. It nests
// under the daemon's own cgroup so an outer limit (a systemd unit, a CI job) also bounds every
// call.
func detectCgroups(root string) (*cgroupLayout, error) {
	l := &cgroupLayout{dirs: map[string]string{}}
	switch cgroups.Mode() {
	case cgroups.Unified:
		base, atRoot, err := cgroupfs.V2Dir()
		if err != nil {
			return nil, err
		}
		l.v2 = true
		if !atRoot {
			// cgroup v2's no-internal-processes rule: a cgroup with processes cannot hand
			// controllers to children. Move the daemon into a leaf of its own cgroup (as
			// runc and systemd's Delegate= expect), then the subtree sits beside it.
			if err := moveSelfToLeaf(base); err != nil {
				return nil, err
			}
		}
		l.dirs[""] = filepath.Join(base, root)
		mounts, err := cgroupfs.Mounts()
		if err != nil {
			return nil, err
		}
		l.rel2 = "/" + strings.TrimPrefix(strings.TrimPrefix(l.dirs[""], mounts[""]), "/")
		// The manager enables the controllers in base, the daemon's own cgroup, for the
		// root: never above it.
		if _, err := cgroup2.NewManager(base, "/"+root, resources2(limitSet{}, false)); err != nil {
			return nil, fmt.Errorf("create cgroup root: %w", err)
		}
		_, err = os.Stat(filepath.Join(l.dirs[""], "memory.swap.max"))
		l.swap = err == nil
	case cgroups.Legacy, cgroups.Hybrid:
		if err := l.detectV1(root); err != nil {
			return nil, err
		}
		if _, err := cgroup1.New(l.path1(""), &specs.LinuxResources{}, cgroup1.WithHierarchy(l.hier)); err != nil {
			return nil, fmt.Errorf("create cgroup root: %w", err)
		}
		_, err := os.Stat(filepath.Join(l.dirs["memory"], "memory.memsw.limit_in_bytes"))
		l.swap = err == nil
		_, err = os.Stat(filepath.Join(l.dirs["memory"], "memory.kmem.tcp.limit_in_bytes"))
		l.tcp = err == nil
	default:
		return nil, errors.New("cgroups unavailable")
	}
	return l, nil
}

// detectV1 finds each of cgroupfs.V1Controllers' mount and this process's cgroup in it. The
// cgroup1 controllers take the directory above their mounts, so each must be mounted (or
// linked, as systemd does for co-mounted ones) at <that dir>/<its name>.
func (l *cgroupLayout) detectV1(root string) error {
	own, err := cgroupfs.Own()
	if err != nil {
		return err
	}
	mounts, err := cgroupfs.Mounts()
	if err != nil {
		return err
	}
	l.rel = map[cgroup1.Name]string{}
	var subs []cgroup1.Subsystem
	for _, c := range cgroupfs.V1Controllers {
		mnt, ok := mounts[c]
		if !ok {
			return fmt.Errorf("cgroup v1 controller %s not mounted", c)
		}
		top := filepath.Dir(mnt)
		if got, err := filepath.EvalSymlinks(filepath.Join(top, c)); err != nil || got != mnt {
			return fmt.Errorf("cgroup v1 controller %s is mounted at %s, not at %s", c, mnt, filepath.Join(top, c))
		}
		var s cgroup1.Subsystem
		switch cgroup1.Name(c) {
		case cgroup1.Memory:
			s = cgroup1.NewMemory(top)
		case cgroup1.Pids:
			s = cgroup1.NewPids(top)
		case cgroup1.Cpu:
			s = cgroup1.NewCpu(top)
		case cgroup1.Cpuacct:
			s = cgroup1.NewCpuacct(top)
		case cgroup1.Freezer:
			s = cgroup1.NewFreezer(top)
		default:
			return fmt.Errorf("cgroup v1 controller %s: no manager", c)
		}
		subs = append(subs, s)
		l.rel[cgroup1.Name(c)] = filepath.Join(own[c], root)
		l.dirs[c] = filepath.Join(mnt, own[c], root)
	}
	l.hier = func() ([]cgroup1.Subsystem, error) { return subs, nil }
	return nil
}

// holds reports whether procCgroup, the text of a /proc/PID/cgroup, places the process inside
// this daemon's subtree: one of its calls, inits or workers.
func (l *cgroupLayout) holds(procCgroup []byte) bool {
	for _, line := range strings.Split(string(procCgroup), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var roots []string
		if l.v2 && parts[1] == "" {
			roots = append(roots, l.rel2)
		}
		for _, c := range strings.Split(parts[1], ",") {
			if r, ok := l.rel[cgroup1.Name(c)]; ok && !l.v2 {
				roots = append(roots, r)
			}
		}
		for _, r := range roots {
			if parts[2] == r || strings.HasPrefix(parts[2], strings.TrimSuffix(r, "/")+"/") {
				return true
			}
		}
	}
	return false
}

// path1 is the cgroup1 path of rel under the root, in each controller.
func (l *cgroupLayout) path1(rel string) cgroup1.Path {
	return func(n cgroup1.Name) (string, error) {
		r, ok := l.rel[n]
		if !ok {
			return "", fmt.Errorf("cgroup v1 controller %s not used", n)
		}
		return filepath.Join(r, rel), nil
	}
}

// moveSelfToLeaf moves the daemon's process into <base>/daemon.
func moveSelfToLeaf(base string) error {
	leaf := filepath.Join(base, "daemon")
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create daemon leaf cgroup: %w", err)
	}
	if err := manager2(leaf).AddProc(uint64(os.Getpid())); err != nil {
		return fmt.Errorf("move daemon to leaf cgroup: %w", err)
	}
	return nil
}

// cgroup is one execution's cgroup (one directory per v1 hierarchy, one on v2).
type cgroup struct {
	v2   bool
	dirs map[string]string
	swap bool
	tcp  bool // v1: cgroupLayout.tcp
	// The manager of this cgroup: cg1 on v1, cg2 on v2.
	cg1 cgroup1.Cgroup
	cg2 *cgroup2.Manager
	fd  int // v2: the directory, for CLONE_INTO_CGROUP; -1 otherwise
	// statFiles, when opened ahead (pool cgroups), are read with pread at the call's end:
	// one syscall each instead of an open, a read and a close on the critical path.
	statFiles [numStats]*os.File
	// emptyFile, opened with them, tells whether any task is left: v1 pids.current (tasks are
	// uncharged only once reaped), v2 cgroup.events' populated.
	emptyFile *os.File
}

// limitSet is what a cgroup is limited to; 0 leaves a limit out (a user dir has no CPU
// quota: each call has its own, and a user's calls share the CPUs by the scheduler's weights).
type limitSet struct {
	mem, pids, cpuMilli int64
}

func limitsOf(lim Limits) limitSet {
	return limitSet{mem: lim.MemoryMaxBytes, pids: lim.PidsMax, cpuMilli: lim.CPUQuotaMilli}
}

// cpuPeriod is the CFS period the quota is a share of, in µs.
const cpuPeriod = 100000

// resources1 is lim as cgroup1 writes it. fresh: a new cgroup, which also gets the period and,
// without swap accounting, swappiness 0. tcp: the memory limit bounds the cgroup's socket
// buffers too (cgroupLayout.tcp), set with the limit so that it is on before any socket of the
// call is made (a socket is charged to the cgroup it was made in, and only if the limit was
// set by then).
func resources1(lim limitSet, fresh, swap, tcp bool) *specs.LinuxResources {
	var r specs.LinuxResources
	if lim.mem > 0 {
		r.Memory = &specs.LinuxMemory{Limit: &lim.mem}
		if tcp {
			r.Memory.KernelTCP = &lim.mem
		}
		switch {
		case swap:
			// memsw = mem: no swap. The manager orders the two writes so memsw is never
			// below the memory limit.
			r.Memory.Swap = &lim.mem
		case fresh:
			zero := uint64(0)
			r.Memory.Swappiness = &zero
		}
	}
	if lim.pids > 0 {
		r.Pids = &specs.LinuxPids{Limit: &lim.pids}
	}
	if lim.cpuMilli > 0 {
		quota := lim.cpuMilli * cpuPeriod / 1000
		r.CPU = &specs.LinuxCPU{Quota: &quota}
		if fresh {
			period := uint64(cpuPeriod)
			r.CPU.Period = &period
		}
	}
	return &r
}

// resources2 is lim as cgroup2 writes it. Every controller is named, limited or not, so the
// manager enables all three in the parent for the new cgroup and its own children.
func resources2(lim limitSet, swap bool) *cgroup2.Resources {
	r := &cgroup2.Resources{Memory: &cgroup2.Memory{}, Pids: &cgroup2.Pids{}, CPU: &cgroup2.CPU{}}
	if lim.mem > 0 {
		r.Memory.Max = &lim.mem
		if swap {
			var zero int64
			r.Memory.Swap = &zero
		}
	}
	r.Pids.Max = lim.pids
	if lim.cpuMilli > 0 {
		quota, period := lim.cpuMilli*cpuPeriod/1000, uint64(cpuPeriod)
		r.CPU.Max = cgroup2.NewCPUMax(&quota, &period)
	}
	return r
}

// create makes the cgroup rel under the root with lim, and its parents as needed. exist: an
// existing rel is fine (a user dir); else it is an error wrapping os.ErrExist.
func (l *cgroupLayout) create(rel string, lim limitSet, exist bool) (*cgroup, error) {
	cg := &cgroup{v2: l.v2, dirs: map[string]string{}, swap: l.swap, tcp: l.tcp, fd: -1}
	for c, d := range l.dirs {
		cg.dirs[c] = filepath.Join(d, rel)
	}
	// Every hierarchy is looked at: a run of the same name whose removal (the janitor's) is
	// half done has some dirs left, and a create that reused them would see them go.
	for _, d := range cg.dirs {
		if _, err := os.Lstat(d); err == nil && !exist {
			return nil, fmt.Errorf("create cgroup %s: %w", d, os.ErrExist)
		}
	}
	var err error
	if l.v2 {
		// Made level by level: each level's manager enables the controllers in its parent.
		parent := l.dirs[""]
		if dir := filepath.Dir(rel); dir != "." {
			parent = filepath.Join(parent, dir)
			if _, err := os.Stat(parent); err != nil {
				if _, err := l.create(dir, limitSet{}, true); err != nil {
					return nil, err
				}
			}
		}
		cg.cg2, err = cgroup2.NewManager(parent, "/"+filepath.Base(rel), resources2(lim, l.swap))
	} else {
		cg.cg1, err = cgroup1.New(l.path1(rel), resources1(lim, true, l.swap, l.tcp), cgroup1.WithHierarchy(l.hier))
	}
	if err != nil {
		if !exist {
			_ = cg.removeDirs() // what this create made; an existing dir is someone's parent
		}
		return nil, fmt.Errorf("create cgroup %s: %w", rel, err)
	}
	return cg, nil
}

// newCgroup creates <root>/<parent>/<call> with the limits set; parent is
// user-<uid>/<session> (userDir), made as needed.
//
// WARNING: the limits that stop fork and memory bombs; rerun as root after changing:
// go test -run 'TestEscape/(fork|memory)' ./sandbox/
func (l *cgroupLayout) newCgroup(parent, call string, lim Limits) (*cgroup, error) {
	cg, err := l.create(filepath.Join(parent, call), limitsOf(lim), false)
	if err != nil {
		return nil, err
	}
	if l.v2 {
		fd, err := unix.Open(cg.dirs[""], unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			cg.remove()
			return nil, fmt.Errorf("open cgroup: %w", err)
		}
		cg.fd = fd
	}
	return cg, nil
}

// setLimits gives a pool cgroup, made with old, its call's limits: only what differs is
// written, in an order every step of which the kernel accepts.
//
// WARNING: the limits that stop fork and memory bombs; rerun as root after changing:
// go test -run 'TestEscape/(fork|memory)|TestPool' ./sandbox/
func (cg *cgroup) setLimits(lim, old Limits) error {
	var d limitSet
	if lim.MemoryMaxBytes != old.MemoryMaxBytes {
		d.mem = lim.MemoryMaxBytes
	}
	if lim.PidsMax != old.PidsMax {
		d.pids = lim.PidsMax
	}
	if lim.CPUQuotaMilli != old.CPUQuotaMilli {
		d.cpuMilli = lim.CPUQuotaMilli
	}
	var err error
	switch {
	case cg.v2:
		err = cg.cg2.Update(resources2(d, cg.swap))
	case cg.swap && d.mem > old.MemoryMaxBytes:
		// memsw may never be below the memory limit, so a raise writes it first. cgroup1's
		// Update means to, but swaps the limit with the soft limit instead.
		err = cg.cg1.Update(&specs.LinuxResources{Memory: &specs.LinuxMemory{Swap: &d.mem}})
		if err == nil {
			err = cg.cg1.Update(resources1(d, false, cg.swap, cg.tcp))
		}
	default:
		err = cg.cg1.Update(resources1(d, false, cg.swap, cg.tcp))
	}
	if err != nil {
		return fmt.Errorf("set cgroup limits: %w", err)
	}
	return nil
}

// addProc puts pid into every v1 hierarchy (v2 children start inside via CLONE_INTO_CGROUP).
func (cg *cgroup) addProc(pid int) error {
	if err := cg.cg1.AddProc(uint64(pid)); err != nil {
		return fmt.Errorf("add pid to cgroup: %w", err)
	}
	return nil
}

// killTree kills every process in dir and its descendants in one indivisible step: nothing
// can fork away while it runs.
//
// WARNING: what makes "no process outlives its call" true; rerun as root after changing:
// go test -run 'TestEscape/orphan' ./sandbox/
func killTree(v2 bool, dirs map[string]string) error {
	if v2 {
		dir := dirs[""]
		if _, err := os.Stat(dir); err != nil {
			return nil // the cgroup is gone: nothing to kill
		}
		if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
			// A kernel before 5.14 (no cgroup.kill): freeze, kill, thaw as on v1. Not the
			// manager's fallback, whose freeze waits without bound.
			return freezeKill(filepath.Join(dir, "cgroup.freeze"), "1", "0", dir)
		}
		if err := manager2(dir).Kill(); err != nil {
			return fmt.Errorf("cgroup.kill: %w", err)
		}
		return nil
	}
	// v1 has no cgroup.kill: freeze so no task forks while we list and kill, kill each task
	// (SIGKILL is delivered to frozen tasks once thawed), then thaw.
	frz := dirs["freezer"]
	if frz == "" {
		return errors.New("no freezer cgroup")
	}
	return freezeKill(filepath.Join(frz, "freezer.state"), "FROZEN", "THAWED", frz)
}

// manager2 is the cgroup2 manager of an existing directory.
func manager2(dir string) *cgroup2.Manager {
	// Load only records the path; it fails only on a relative group, and "/" is not.
	m, _ := cgroup2.Load("/", cgroup2.WithMountpoint(dir))
	return m
}

func writeFile(path, val string) error {
	// O_WRONLY|O_TRUNC without O_CREAT: cgroup files exist or the controller is missing.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(val)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// freezeKill freezes through stateFile, SIGKILLs every task under dir and thaws.
func freezeKill(stateFile, frozen, thawed, dir string) error {
	if err := writeFile(stateFile, frozen); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("freeze: %w", err)
	}
	// v1 reports FREEZING until every task stopped; v2's cgroup.freeze is the request, and
	// the kill below is correct either way since SIGKILL wins once thawed.
	for i := 0; i < 200 && frozen == "FROZEN"; i++ {
		b, err := os.ReadFile(stateFile)
		if err != nil || strings.TrimSpace(string(b)) == frozen {
			break
		}
		time.Sleep(100 * time.Microsecond)
	}
	var firstErr error
	for _, pid := range cgroupfs.ProcsUnder(dir) {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) && firstErr == nil {
			firstErr = fmt.Errorf("kill %d: %w", pid, err)
		}
	}
	// The whole subtree: a child left frozen by a daemon that died mid-kill (a restart's
	// reaping, a session's delete) would keep its killed tasks in the freezer.
	if err := cgroupfs.ThawTree(dir, filepath.Base(stateFile), thawed); err != nil && firstErr == nil {
		firstErr = err
	}
	return firstErr
}

func (cg *cgroup) kill() error { return killTree(cg.v2, cg.dirs) }

// killAndDrain kills whatever is left in the cgroup and waits, up to 200 ms, until it is empty.
// An empty cgroup (the usual case) costs one read: freezing one would only cost time.
func (cg *cgroup) killAndDrain() error {
	if cg.empty() {
		return nil
	}
	err := cg.kill()
	for i := 0; i < 2000; i++ {
		if cg.empty() {
			return err
		}
		time.Sleep(100 * time.Microsecond)
	}
	return errors.Join(err, errors.New("cgroup not empty 200 ms after its kill"))
}

// empty reports whether no process is left in the cgroup. One hierarchy is enough: a call's
// processes are attached to all of them together, and it cannot make child cgroups (the
// cgroup filesystem is read-only inside).
func (cg *cgroup) empty() bool {
	if cg.emptyFile != nil {
		s, ok := preadAll(cg.emptyFile)
		switch {
		case !ok:
			return true // the cgroup is gone, as below
		case cg.v2:
			return parseKV(s, "populated") == 0
		default:
			return parseInt(s) == 0
		}
	}
	d := cg.dirs["freezer"]
	if cg.v2 {
		d = cg.dirs[""]
	}
	b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
	return err != nil || len(bytes.TrimSpace(b)) == 0
}

// remove closes what the cgroup holds open and deletes its directories; the cgroup must be
// empty.
func (cg *cgroup) remove() error {
	if cg.fd >= 0 {
		unix.Close(cg.fd)
		cg.fd = -1
	}
	for i, f := range cg.statFiles {
		if f != nil {
			f.Close()
			cg.statFiles[i] = nil
		}
	}
	if cg.emptyFile != nil {
		cg.emptyFile.Close()
		cg.emptyFile = nil
	}
	return cg.removeDirs()
}

// removeDirs deletes the cgroup's directories, waiting for killed tasks to go. It touches no
// field, so it may run beside the owner's remove (KillSession beside a Wait). By hand, not the
// managers' Delete: that lists every controller's tasks by walking each directory, which the
// emptiness the kill already waited for makes redundant, and costs calls/s under load.
func (cg *cgroup) removeDirs() error {
	var firstErr error
	for _, d := range cg.dirs {
		if err := rmdirRetry(d); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

// rmdirRetry removes a cgroup directory, retrying while exiting tasks still pin it (EBUSY).
func rmdirRetry(d string) error {
	var err error
	for i := 0; i < 500; i++ {
		err = unix.Rmdir(d)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	return fmt.Errorf("remove cgroup %s: %w", d, err)
}

// removeTree kills everything under dir's subtrees and removes them bottom-up: leftovers of a
// crashed daemon, or a deleted session.
func (l *cgroupLayout) removeTree(rel string) error {
	dirs := map[string]string{}
	for c, d := range l.dirs {
		dirs[c] = filepath.Join(d, rel)
	}
	if err := killTree(l.v2, dirs); err != nil {
		return err
	}
	var firstErr error
	for _, d := range dirs {
		var sub []string
		_ = filepath.WalkDir(d, func(path string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				sub = append(sub, path)
			}
			return nil
		})
		for i := len(sub) - 1; i >= 0; i-- {
			if rel == "" && sub[i] == d {
				continue // keep the daemon's root
			}
			if err := rmdirRetry(sub[i]); err != nil && firstErr == nil {
				firstErr = err
			}
		}
	}
	return firstErr
}
