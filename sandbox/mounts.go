package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// maxPtys bounds the ptys one call may hold at once (its devpts instance's max=): enough for
// a terminal multiplexer's or expect's tests, far below the pool every instance shares.
const maxPtys = 64

// mountOp is one step of the child's mount plan, run in order by sbx_do_mounts (nsinit_mount.c).
// Like nsinit.h's struct mount_op it is the op, its opt bits, the path it acts on, and the op's
// own fields, each named for what it is to that op; only the op's own are set (the
// constructors below make each op), and specEncoder.mounts writes them as nsinit.h lays them
// out.
type mountOp struct {
	op   uint32
	opt  uint32 // optOptional, optNoFollow (optional, noFollow)
	path string // what the op acts on; nsinit.h's table says what it is for each op

	mount struct { // opMount: mount(2)
		src, fstype, data string
		flags             uint64 // MS_*
	}
	setattr struct { // opSetattr: mount_setattr(2)
		set, clr  uint64 // MOUNT_ATTR_*
		recursive bool
	}
	mknod struct { // opMknod
		mode uint32
		dev  uint64
	}
	mkdir   struct{ mode uint32 }   // opMkdir
	touch   struct{ mode uint32 }   // opTouch
	symlink struct{ target string } // opSymlink
	emptyFS struct {                // opEmptyFS
		options string // tmpfs options
		attrs   uint64 // MOUNT_ATTR_*
	}
	cover     struct{ options string } // opCover: tmpfs options, for a kernel without the empty fs
	cloneTree struct {                 // opCloneTree
		slot     uint32
		fromHeld bool // path is relative to the directory opHold kept ("" = itself)
	}
	moveTree struct{ slot uint32 } // opMoveTree
}

// mountFS mounts src on target: mount(2).
func mountFS(src, target, fstype string, flags uint64, data string) mountOp {
	m := mountOp{op: opMount, path: target}
	m.mount.src, m.mount.fstype, m.mount.flags, m.mount.data = src, fstype, flags, data
	return m
}

// setattrOp sets and clears MOUNT_ATTR_* on the mount at path, on every mount below it too
// when recursive: mount_setattr(2).
func setattrOp(path string, set, clr uint64, recursive bool) mountOp {
	m := mountOp{op: opSetattr, path: path}
	m.setattr.set, m.setattr.clr, m.setattr.recursive = set, clr, recursive
	return m
}

// mknodOp makes the device node path.
func mknodOp(path string, mode uint32, dev uint64) mountOp {
	m := mountOp{op: opMknod, path: path}
	m.mknod.mode, m.mknod.dev = mode, dev
	return m
}

// mkdirOp makes the directory path; one already there is fine.
func mkdirOp(path string, mode uint32) mountOp {
	m := mountOp{op: opMkdir, path: path}
	m.mkdir.mode = mode
	return m
}

// touchOp makes path a new empty file, to bind over.
func touchOp(path string, mode uint32) mountOp {
	m := mountOp{op: opTouch, path: path}
	m.touch.mode = mode
	return m
}

// symlinkOp makes the symlink path, pointing at target.
func symlinkOp(path, target string) mountOp {
	m := mountOp{op: opSymlink, path: path}
	m.symlink.target = target
	return m
}

// holdOp keeps the directory path (O_PATH) for opCloneTree, before a mount covers it.
func holdOp(path string) mountOp { return mountOp{op: opHold, path: path} }

// emptyFSOp makes the detached, empty fs that coverOp clones.
func emptyFSOp(options string, attrs uint64) mountOp {
	m := mountOp{op: opEmptyFS}
	m.emptyFS.options, m.emptyFS.attrs = options, attrs
	return m
}

// coverOp covers the directory path with a clone of the empty fs (where there is none, a
// tmpfs mounted with options).
func coverOp(path, options string) mountOp {
	m := mountOp{op: opCover, path: path}
	m.cover.options = options
	return m
}

// cloneTreeOp puts a detached recursive copy of path in slot (open_tree); fromHeld: path is
// relative to the directory holdOp kept.
func cloneTreeOp(path string, slot uint32, fromHeld bool) mountOp {
	m := mountOp{op: opCloneTree, path: path}
	m.cloneTree.slot, m.cloneTree.fromHeld = slot, fromHeld
	return m
}

// moveTreeOp moves the copy in slot onto path (move_mount).
func moveTreeOp(path string, slot uint32) mountOp {
	m := mountOp{op: opMoveTree, path: path}
	m.moveTree.slot = slot
	return m
}

// optional: a missing path skips the op (a path a kernel may not have, or a user's that went).
func (m mountOp) optional() mountOp { m.opt |= optOptional; return m }

// noFollow: the path (a user's, resolved by the plan) is reached without following any
// symlink; one there at the child's turn was swapped in since, and fails the call.
func (m mountOp) noFollow() mountOp { m.opt |= optNoFollow; return m }

// emptyFSOptions make the empty fs that covers masked and denied directories: no room for a
// file, nobody may enter it.
const emptyFSOptions = "size=4k,nr_inodes=1,mode=000"

// Paths masked in every child, as container runtimes do: kernel memory, keys, timers and
// firmware interfaces an agent never needs and that leak host information.
var maskedFiles = []string{
	"/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug",
	"/proc/latency_stats", "/proc/kallsyms", "/proc/sysrq-trigger",
}

var maskedDirs = []string{
	"/proc/acpi", "/proc/scsi", "/proc/asound", "/sys/firmware",
	"/sys/devices/virtual/powercap", "/sys/kernel/debug", "/sys/kernel/security",
}

// preludeMounts is the part of every child's filesystem that does not depend on its call: the
// mounts made private, a fresh /proc, a minimal /dev and the masked kernel paths. A pooled init
// runs it before it has a call (nsinit.c: prelude), off the call's critical path; a per-call
// init runs it first in its plan. Either way it precedes callMounts.
//
// WARNING: part of the child's whole filesystem view; rerun as root after changing:
// go test -run 'TestEscape|TestPool' ./sandbox/
func preludeMounts(tmpSize int64) []mountOp {
	var ops []mountOp
	add := func(op mountOp) { ops = append(ops, op) }
	// Nothing we mount may propagate back to the host, and host mounts appearing later do not
	// show up inside a running call either.
	add(mountFS("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""))
	// A fresh /proc for the new PID namespace: the host's would show every host process.
	add(mountFS("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""))
	// A minimal /dev: the nodes programs expect and nothing that reaches hardware.
	add(mountFS("tmpfs", "/dev", "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=755,size=64k,nr_inodes=64"))
	for _, d := range []struct {
		name         string
		major, minor uint32
	}{{"null", 1, 3}, {"zero", 1, 5}, {"full", 1, 7}, {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0}} {
		add(mknodOp("/dev/"+d.name, unix.S_IFCHR|0o666, unix.Mkdev(d.major, d.minor)))
	}
	add(mkdirOp("/dev/pts", 0o755))
	add(mkdirOp("/dev/shm", 0o1777))
	// A private devpts instance: ptys of this call only, never the host's.
	// The ptys of every devpts instance but the host's first come from one pool
	// (kernel.pty.max less kernel.pty.reserve, 3072 by default): a call without a bound of its
	// own could take them all from every other user's calls and the host's containers.
	add(mountFS("devpts", "/dev/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, fmt.Sprintf("newinstance,ptmxmode=0666,mode=620,max=%d", maxPtys)))
	add(symlinkOp("/dev/ptmx", "pts/ptmx"))
	for _, l := range [][2]string{{"/proc/self/fd", "/dev/fd"}, {"/proc/self/fd/0", "/dev/stdin"},
		{"/proc/self/fd/1", "/dev/stdout"}, {"/proc/self/fd/2", "/dev/stderr"}} {
		add(symlinkOp(l[1], l[0]))
	}
	for _, f := range maskedFiles {
		add(mountFS("/dev/null", f, "", unix.MS_BIND, "").optional())
	}
	// Masked and denied directories are covered by clones of one empty, read-only fs made here
	// (each a tmpfs of its own where the kernel lacks the new mount API).
	add(emptyFSOp(emptyFSOptions, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC))
	for _, d := range maskedDirs {
		add(coverOp(d, emptyFSOptions).optional())
	}
	// The private, size-limited /tmp and /dev/shm: nothing shared with other calls or users, no
	// disk fill. An init serves one call, so making them here is making them for the call. The
	// host's /tmp is held first: the call's dirs that live there are cloned from it (callMounts).
	add(holdOp("/tmp"))
	for _, d := range []string{"/dev/shm", "/tmp"} {
		add(mountFS("tmpfs", d, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("mode=1777,size=%d", tmpSize)))
	}
	return ops
}

// tmpRemounts resizes the prelude's /tmp and /dev/shm for a call whose limit differs from the
// one the pooled init was made with (a reload changed it).
func tmpRemounts(tmpSize int64) []mountOp {
	var ops []mountOp
	for _, d := range []string{"/dev/shm", "/tmp"} {
		ops = append(ops, mountFS("tmpfs", d, "tmpfs", unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("size=%d", tmpSize)))
	}
	return ops
}

// callMounts decides the rest of the child's filesystem, after preludeMounts: the call's
// writable and read-only dirs, its private /tmp and /dev/shm, deny paths, and read-only
// everywhere else. origin maps a deny path that is an alias (aliasLookup) to the path it shows.
//
// WARNING: the child's whole filesystem view; rerun as root after changing:
// go test -run 'TestEscape' ./sandbox/
func callMounts(v *fsView, spec *Spec, writable, readOnly, deny, protected []string, origin map[string]string) ([]mountOp, error) {
	const (
		ro     = unix.MOUNT_ATTR_RDONLY
		nosuid = unix.MOUNT_ATTR_NOSUID
	)
	// Only dirs that exist now get a mount: the child reaches each without following a
	// symlink, so a path whose resolution stopped at a dangling one must not reach it.
	var trees, reopen []string // reopen: the writable ones whose mounts are made writable again
	for _, d := range writable {
		if _, err := v.stat(d); err == nil {
			trees = append(trees, d)
			// A dir the host mounts read-only stays so: writable means what the caller may
			// write outside the sandbox too, never more.
			if !hostReadOnly(d) {
				reopen = append(reopen, d)
			}
		}
	}
	for _, d := range readOnly {
		if _, err := v.stat(d); err == nil && needsOwnMount(d, writable) {
			trees = append(trees, d)
		}
	}
	if len(trees) > maxTrees {
		return nil, fmt.Errorf("%w: more than %d writable and read-only dirs", ErrBadSpec, maxTrees)
	}
	var ops []mountOp
	add := func(op mountOp) { ops = append(ops, op) }
	// Writable and read-only dirs are cloned (a detached recursive bind) and moved on top of the
	// private /tmp and everything else; each then is a mount of its own whose read-only bit can
	// be cleared alone. One under /tmp (t.TempDir(), agent sockets) is cloned from the host's
	// /tmp the prelude held before covering it. A dir under another prelude mount (/proc, /dev,
	// a masked path) is cloned as the child sees it, never the host's.
	for i, d := range trees {
		if rel, ok := strings.CutPrefix(d, "/tmp"); ok && (rel == "" || rel[0] == '/') {
			add(cloneTreeOp(strings.TrimPrefix(rel, "/"), uint32(i), true).optional().noFollow())
			continue
		}
		add(cloneTreeOp(d, uint32(i), false).optional().noFollow())
	}
	for i, d := range trees {
		if under(d, "/tmp") && d != "/tmp" {
			for _, p := range mkdirChain("/tmp", d) {
				add(mkdirOp(p, 0o755).optional())
			}
			if fi, err := os.Stat(d); err == nil && !fi.IsDir() {
				add(touchOp(d, 0o600).optional())
			} else {
				add(mkdirOp(d, 0o755).optional())
			}
		}
		add(moveTreeOp(d, uint32(i)).optional().noFollow())
	}
	// Deny paths that exist now are covered (after the moves, so a deny inside a writable dir
	// wins); landlock keeps the ones created later unreadable.
	var covered []string
	for _, d := range deny {
		fi, err := v.stat(d)
		if o, ok := origin[d]; ok && err != nil {
			// An alias the host's table no longer shows may still be in a pooled init's copy:
			// covered as what it showed, where it shows it (optional: nothing there, no cover).
			fi, err = v.stat(o)
		}
		switch {
		case err != nil:
			continue
		case fi.IsDir():
			add(coverOp(d, emptyFSOptions).optional().noFollow())
		default:
			add(mountFS("/dev/null", d, "", unix.MS_BIND, "").optional().noFollow())
		}
		covered = append(covered, d)
	}
	// Everything read-only and nosuid in one call (mount_setattr, AT_RECURSIVE), then the few
	// writable places opened again: a writable mount can only come from this list.
	add(setattrOp("/", ro|nosuid, 0, true))
	add(setattrOp("/tmp", 0, ro, false))
	add(setattrOp("/dev/shm", 0, ro, false))
	if !spec.ReadOnlyWorkspace {
		for _, d := range reopen {
			add(setattrOp(d, 0, ro, false).optional().noFollow())
		}
		ops = append(ops, protectMounts(protected, covered, reopen)...)
	}
	return ops, nil
}

// hostReadOnly reports whether the mount d lies on is read-only on the host (or cannot be
// told: then it is treated as read-only). The daemon's own view (statfs) answers first; only
// where it says read-only is PID 1's mount table asked: under a service manager's hardening
// (systemd's ProtectSystem=strict) the daemon's namespace is read-only where the host's is
// not, and a user's project in /srv or /var would otherwise be read-only in every call.
// Run as the caller, like the rest of the plan.
func hostReadOnly(d string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(d, &st); err != nil {
		return true
	}
	if st.Flags&unix.ST_RDONLY == 0 {
		return false
	}
	ro, ok := mountReadOnly("/proc/1/mountinfo", d)
	return ro || !ok
}

// mountReadOnly reports whether, in the mountinfo table at path, the mount d lies on is
// read-only (the mount or its file system); ok is false when the table cannot be read or holds
// no mount for d.
func mountReadOnly(path, d string) (ro, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return false, false
	}
	t := parseMountinfo(b)
	i := t.mountAt(d)
	if i < 0 {
		return false, false
	}
	return t.all[i].ro, true
}

// unescapeMountinfo undoes the kernel's octal escapes in a mountinfo path (\040 for a space).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1:i+4]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '7' {
			return false
		}
	}
	return true
}

// preludeCovered are the places the prelude covers with a mount of its own (preludeMounts):
// the host's content there is not what the child sees.
var preludeCovered = append([]string{"/tmp", "/dev", "/proc"}, maskedDirs...)

// needsOwnMount reports whether a read-only dir must be mounted for the child to see it as the
// host has it, read-only: when it lies in a writable dir (whose mount would make it writable)
// or in a place the prelude covered. Anywhere else the read-only root shows it as it is, and
// a clone and a move fewer shorten the child's setup (the session's tool-results dir,
// read-only in every call, is such a dir).
func needsOwnMount(d string, writable []string) bool {
	for _, w := range writable {
		if under(d, w) {
			return true
		}
	}
	for _, c := range preludeCovered {
		if under(d, c) {
			return true
		}
	}
	return false
}

// mkdirChain lists the directories strictly between base and p, outermost first.
func mkdirChain(base, p string) []string {
	var chain []string
	for d := filepath.Dir(p); d != base && under(d, base) && d != "/"; d = filepath.Dir(d) {
		chain = append([]string{d}, chain...)
	}
	return chain
}
