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
	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/internal/cgroupfs"
)

// The cgroup files are written directly rather than through containerd/cgroups' cgroup1 and
// cgroup2 managers: those packages pull dependencies (go-systemd, godbus, cilium/ebpf,
// runtime-spec) the module does not carry, and their paths make a per-call attach several times
// slower than a direct write of cgroup.procs. containerd/cgroups still decides the mode.

// cgroupLayout is where this daemon's subtree lives, found once in New.
type cgroupLayout struct {
	v2   bool
	dirs map[string]string // v1: controller -> <mount>/<own cgroup>/<root>; v2: "" -> same
	// user bounds what all of one uid's calls and workers take together: every cgroup of the
	// uid sits under <root>/user-<uid>, which has these limits.
	user UserLimits
	// users holds the uids whose user-<uid> dir was made (and given its limits) by this daemon.
	users sync.Map
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
	cg := &cgroup{v2: l.v2, dirs: map[string]string{}, fd: -1}
	for c, d := range l.dirs {
		dir := filepath.Join(d, rel)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		if l.v2 {
			if err := enableV2Controllers(dir); err != nil {
				return "", err
			}
		}
		cg.dirs[c] = dir
	}
	if err := cg.setAggregate(l.user); err != nil {
		return "", err
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

// setAggregate writes a user dir's memory and pids limits (no CPU quota: each call has its
// own, and a user's calls share the host's CPUs fairly by the scheduler's cgroup weights).
func (cg *cgroup) setAggregate(u UserLimits) error {
	mem, pids := strconv.FormatInt(u.MemoryMaxBytes, 10), strconv.FormatInt(u.PidsMax, 10)
	var writes [][2]string
	if cg.v2 {
		writes = [][2]string{{filepath.Join(cg.dirs[""], "memory.max"), mem}, {filepath.Join(cg.dirs[""], "pids.max"), pids}}
	} else {
		writes = [][2]string{{filepath.Join(cg.dirs["memory"], "memory.limit_in_bytes"), mem}, {filepath.Join(cg.dirs["pids"], "pids.max"), pids}}
	}
	for _, w := range writes {
		if err := writeFile(w[0], w[1]); err != nil {
			return fmt.Errorf("set user cgroup limit %s: %w", filepath.Base(w[0]), err)
		}
	}
	return nil
}

// detectCgroups finds the daemon's subtree for each hierarchy. It nests under the daemon's own
// cgroup so an outer limit (a systemd unit, a CI job) also bounds every call.
func detectCgroups(root string) (*cgroupLayout, error) {
	l := &cgroupLayout{dirs: map[string]string{}}
	var err error
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
	case cgroups.Legacy, cgroups.Hybrid:
		if l.dirs, err = cgroupfs.V1Dirs(root); err != nil {
			return nil, err
		}
	default:
		return nil, errors.New("cgroups unavailable")
	}
	for _, d := range l.dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("create cgroup root: %w", err)
		}
	}
	if l.v2 {
		for _, d := range []string{filepath.Dir(l.dirs[""]), l.dirs[""]} {
			if err := enableV2Controllers(d); err != nil {
				return nil, err
			}
		}
	}
	return l, nil
}

// enableV2Controllers lets dir's children use memory, pids and cpu.
func enableV2Controllers(dir string) error {
	if err := writeFile(filepath.Join(dir, "cgroup.subtree_control"), "+memory +pids +cpu"); err != nil {
		return fmt.Errorf("enable cgroup controllers in %s: %w", dir, err)
	}
	return nil
}

// moveSelfToLeaf moves the daemon's process into <base>/daemon.
func moveSelfToLeaf(base string) error {
	leaf := filepath.Join(base, "daemon")
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create daemon leaf cgroup: %w", err)
	}
	if err := writeFile(filepath.Join(leaf, "cgroup.procs"), strconv.Itoa(os.Getpid())); err != nil {
		return fmt.Errorf("move daemon to leaf cgroup: %w", err)
	}
	return nil
}

// cgroup is one execution's cgroup (one directory per v1 hierarchy, one on v2).
type cgroup struct {
	v2   bool
	dirs map[string]string
	fd   int // v2: the directory, for CLONE_INTO_CGROUP; -1 otherwise
	// statFiles, when opened ahead (pool cgroups), are read with pread at the call's end:
	// one syscall each instead of an open, a read and a close on the critical path.
	statFiles [numStats]*os.File
	// emptyFile, opened with them, tells whether any task is left: v1 pids.current (tasks are
	// uncharged only once reaped), v2 cgroup.events' populated.
	emptyFile *os.File
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

// newCgroup creates <root>/<parent>/<call> with the limits set; parent is
// user-<uid>/<session> (userDir), made as needed.
//
// WARNING: the limits that stop fork and memory bombs; rerun as root after changing:
// go test -run 'TestEscape/(fork|memory)' ./sandbox/
func (l *cgroupLayout) newCgroup(parent, call string, lim Limits) (*cgroup, error) {
	cg := &cgroup{v2: l.v2, dirs: map[string]string{}, fd: -1}
	for c, d := range l.dirs {
		sess := filepath.Join(d, parent)
		err := os.Mkdir(sess, 0o755)
		switch {
		case err == nil && l.v2:
			if err := enableV2Controllers(sess); err != nil {
				return nil, err
			}
		case err != nil && !errors.Is(err, os.ErrExist):
			return nil, fmt.Errorf("create cgroup %s: %w", sess, err)
		}
		dir := filepath.Join(sess, call)
		if err := os.Mkdir(dir, 0o755); err != nil {
			cg.remove()
			return nil, fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		cg.dirs[c] = dir
	}
	if err := cg.setLimits(lim, nil); err != nil {
		cg.remove()
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

// setLimits writes lim. old is what the cgroup has (a pool cgroup given its call's limits):
// only what differs is written, in an order every step of which the kernel accepts. nil: a new
// cgroup, unlimited.
//
// WARNING: the limits that stop fork and memory bombs; rerun as root after changing:
// go test -run 'TestEscape/(fork|memory)|TestPool' ./sandbox/
func (cg *cgroup) setLimits(lim Limits, old *Limits) error {
	const period = 100000 // µs
	quota := lim.CPUQuotaMilli * period / 1000
	changed := func(f func(Limits) int64) bool { return old == nil || f(*old) != f(lim) }
	mem := changed(func(l Limits) int64 { return l.MemoryMaxBytes })
	pids := changed(func(l Limits) int64 { return l.PidsMax })
	cpu := changed(func(l Limits) int64 { return l.CPUQuotaMilli })
	var writes [][2]string
	add := func(ok bool, path, val string) {
		if ok {
			writes = append(writes, [2]string{path, val})
		}
	}
	if cg.v2 {
		d := cg.dirs[""]
		add(mem, filepath.Join(d, "memory.max"), strconv.FormatInt(lim.MemoryMaxBytes, 10))
		add(old == nil, filepath.Join(d, "memory.swap.max"), "0")
		add(pids, filepath.Join(d, "pids.max"), strconv.FormatInt(lim.PidsMax, 10))
		add(cpu, filepath.Join(d, "cpu.max"), fmt.Sprintf("%d %d", quota, period))
	} else {
		memDir := cg.dirs["memory"]
		memVal := strconv.FormatInt(lim.MemoryMaxBytes, 10)
		// memsw = mem: no swap. memsw may never be below the memory limit, so it is written
		// after the memory limit when that comes down, before it when it goes up.
		raise := old != nil && lim.MemoryMaxBytes > old.MemoryMaxBytes
		add(mem && raise, filepath.Join(memDir, "memory.memsw.limit_in_bytes"), memVal)
		add(mem, filepath.Join(memDir, "memory.limit_in_bytes"), memVal)
		add(mem && !raise, filepath.Join(memDir, "memory.memsw.limit_in_bytes"), memVal)
		add(pids, filepath.Join(cg.dirs["pids"], "pids.max"), strconv.FormatInt(lim.PidsMax, 10))
		add(old == nil, filepath.Join(cg.dirs["cpu"], "cpu.cfs_period_us"), strconv.Itoa(period))
		add(cpu, filepath.Join(cg.dirs["cpu"], "cpu.cfs_quota_us"), strconv.FormatInt(quota, 10))
	}
	for _, w := range writes {
		err := writeFile(w[0], w[1])
		swap := strings.Contains(w[0], "swap") || strings.Contains(w[0], "memsw")
		if err != nil && swap {
			// No swap accounting on this kernel: swappiness 0 is the best v1 offers; on v2
			// without swap there is no swap to limit.
			if !cg.v2 {
				_ = writeFile(filepath.Join(cg.dirs["memory"], "memory.swappiness"), "0")
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("set cgroup limit %s: %w", filepath.Base(w[0]), err)
		}
	}
	return nil
}

// addProc puts pid into every v1 hierarchy (v2 children start inside via CLONE_INTO_CGROUP).
func (cg *cgroup) addProc(pid int) error {
	p := strconv.Itoa(pid)
	for _, c := range cgroupfs.V1Controllers {
		if err := writeFile(filepath.Join(cg.dirs[c], "cgroup.procs"), p); err != nil {
			return fmt.Errorf("add pid to %s cgroup: %w", c, err)
		}
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
		err := writeFile(filepath.Join(dirs[""], "cgroup.kill"), "1")
		switch {
		case err == nil:
			return nil
		case errors.Is(err, os.ErrNotExist):
			if _, serr := os.Stat(dirs[""]); serr != nil {
				return nil // the cgroup is gone: nothing to kill
			}
			// A kernel before 5.14 (no cgroup.kill): freeze, kill, thaw as on v1.
			return freezeKill(filepath.Join(dirs[""], "cgroup.freeze"), "1", "0", dirs[""])
		default:
			return fmt.Errorf("cgroup.kill: %w", err)
		}
	}
	// v1 has no cgroup.kill: freeze so no task forks while we list and kill, kill each task
	// (SIGKILL is delivered to frozen tasks once thawed), then thaw.
	frz := dirs["freezer"]
	if frz == "" {
		return errors.New("no freezer cgroup")
	}
	return freezeKill(filepath.Join(frz, "freezer.state"), "FROZEN", "THAWED", frz)
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
// field, so it may run beside the owner's remove (KillSession beside a Wait).
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
