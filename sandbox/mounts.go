package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// mountOp is one step of the child's mount plan, run in order by sbx_do_mounts (nsinit_mount.c).
// specEncoder.mounts writes each field under the name nsinit.h gives it for the op.
type mountOp struct {
	op       uint32
	optional bool // a missing target is skipped (paths a kernel may not have)
	// nofollow: the path (a user's, resolved by the plan) is reached without following any
	// symlink; one there at the child's turn was swapped in since, and fails the call.
	nofollow bool
	// flags: mount(2) flags (opMount), MOUNT_ATTR_* to set (opSetattr, opEmptyFS), the mode
	// (opMknod, opMkdir, opTouch), cloneFromHeld (opCloneTree).
	flags uint64
	// clr: MOUNT_ATTR_* to clear (opSetattr), the device (opMknod), the tree slot
	// (opCloneTree, opMoveTree).
	clr      uint64
	src, dst string
	fstype   string
	data     string // mount(2) data (opMount), tmpfs options (opEmptyFS, opCover), "r" recursive (opSetattr)
}

// cloneFromHeld in an opCloneTree's flags: src is relative to the directory opHold kept.
const cloneFromHeld = 1

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
// runs it before it has a call (nsinit.c: prelude), taking ~0.2 ms off the call's critical
// path; a per-call init runs it first in its plan. Either way it precedes callMounts.
//
// WARNING: part of the child's whole filesystem view; rerun as root after changing:
// go test -run 'TestEscape|TestPool' ./sandbox/
func preludeMounts(tmpSize int64) []mountOp {
	var ops []mountOp
	add := func(op mountOp) { ops = append(ops, op) }
	// Nothing we mount may propagate back to the host, and host mounts appearing later do not
	// show up inside a running call either.
	add(mountOp{op: opMount, dst: "/", flags: unix.MS_REC | unix.MS_PRIVATE})
	// A fresh /proc for the new PID namespace: the host's would show every host process.
	add(mountOp{op: opMount, src: "proc", dst: "/proc", fstype: "proc",
		flags: unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC})
	// A minimal /dev: the nodes programs expect and nothing that reaches hardware.
	add(mountOp{op: opMount, src: "tmpfs", dst: "/dev", fstype: "tmpfs",
		flags: unix.MS_NOSUID | unix.MS_NOEXEC, data: "mode=755,size=64k,nr_inodes=64"})
	for _, d := range []struct {
		name         string
		major, minor uint32
	}{{"null", 1, 3}, {"zero", 1, 5}, {"full", 1, 7}, {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0}} {
		add(mountOp{op: opMknod, dst: "/dev/" + d.name, flags: unix.S_IFCHR | 0o666,
			clr: unix.Mkdev(d.major, d.minor)})
	}
	add(mountOp{op: opMkdir, dst: "/dev/pts", flags: 0o755})
	add(mountOp{op: opMkdir, dst: "/dev/shm", flags: 0o1777})
	// A private devpts instance: ptys of this call only, never the host's.
	add(mountOp{op: opMount, src: "devpts", dst: "/dev/pts", fstype: "devpts",
		flags: unix.MS_NOSUID | unix.MS_NOEXEC, data: "newinstance,ptmxmode=0666,mode=620"})
	add(mountOp{op: opSymlink, src: "pts/ptmx", dst: "/dev/ptmx"})
	for _, l := range [][2]string{{"/proc/self/fd", "/dev/fd"}, {"/proc/self/fd/0", "/dev/stdin"},
		{"/proc/self/fd/1", "/dev/stdout"}, {"/proc/self/fd/2", "/dev/stderr"}} {
		add(mountOp{op: opSymlink, src: l[0], dst: l[1]})
	}
	for _, f := range maskedFiles {
		add(mountOp{op: opMount, src: "/dev/null", dst: f, flags: unix.MS_BIND, optional: true})
	}
	// Masked and denied directories are covered by clones of one empty, read-only fs made here
	// (each a tmpfs of its own where the kernel lacks the new mount API).
	add(mountOp{op: opEmptyFS, data: emptyFSOptions,
		flags: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC})
	for _, d := range maskedDirs {
		add(mountOp{op: opCover, dst: d, data: emptyFSOptions, optional: true})
	}
	// The private, size-limited /tmp and /dev/shm: nothing shared with other calls or users, no
	// disk fill. An init serves one call, so making them here is making them for the call. The
	// host's /tmp is held first: the call's dirs that live there are cloned from it (callMounts).
	add(mountOp{op: opHold, src: "/tmp"})
	for _, d := range []string{"/dev/shm", "/tmp"} {
		add(mountOp{op: opMount, src: "tmpfs", dst: d, fstype: "tmpfs",
			flags: unix.MS_NOSUID | unix.MS_NODEV, data: fmt.Sprintf("mode=1777,size=%d", tmpSize)})
	}
	return ops
}

// tmpRemounts resizes the prelude's /tmp and /dev/shm for a call whose limit differs from the
// one the pooled init was made with (a reload changed it).
func tmpRemounts(tmpSize int64) []mountOp {
	var ops []mountOp
	for _, d := range []string{"/dev/shm", "/tmp"} {
		ops = append(ops, mountOp{op: opMount, src: "tmpfs", dst: d, fstype: "tmpfs",
			flags: unix.MS_REMOUNT | unix.MS_NOSUID | unix.MS_NODEV, data: fmt.Sprintf("size=%d", tmpSize)})
	}
	return ops
}

// callMounts decides the rest of the child's filesystem, after preludeMounts: the call's
// writable and read-only dirs, its private /tmp and /dev/shm, deny paths, and read-only
// everywhere else.
//
// WARNING: the child's whole filesystem view; rerun as root after changing:
// go test -run 'TestEscape' ./sandbox/
func callMounts(v *fsView, spec *Spec, writable, readOnly, deny, protected []string) ([]mountOp, error) {
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
			add(mountOp{op: opCloneTree, src: strings.TrimPrefix(rel, "/"), flags: cloneFromHeld, clr: uint64(i), optional: true, nofollow: true})
			continue
		}
		add(mountOp{op: opCloneTree, src: d, clr: uint64(i), optional: true, nofollow: true})
	}
	for i, d := range trees {
		if under(d, "/tmp") && d != "/tmp" {
			for _, p := range mkdirChain("/tmp", d) {
				add(mountOp{op: opMkdir, dst: p, flags: 0o755, optional: true})
			}
			if fi, err := os.Stat(d); err == nil && !fi.IsDir() {
				add(mountOp{op: opTouch, dst: d, flags: 0o600, optional: true})
			} else {
				add(mountOp{op: opMkdir, dst: d, flags: 0o755, optional: true})
			}
		}
		add(mountOp{op: opMoveTree, dst: d, clr: uint64(i), optional: true, nofollow: true})
	}
	// Deny paths that exist now are covered (after the moves, so a deny inside a writable dir
	// wins); landlock keeps the ones created later unreadable.
	for _, d := range deny {
		fi, err := v.stat(d)
		switch {
		case err != nil:
			continue
		case fi.IsDir():
			add(mountOp{op: opCover, dst: d, data: emptyFSOptions, optional: true, nofollow: true})
		default:
			add(mountOp{op: opMount, src: "/dev/null", dst: d, flags: unix.MS_BIND, optional: true, nofollow: true})
		}
	}
	// Everything read-only and nosuid in one call (mount_setattr, AT_RECURSIVE), then the few
	// writable places opened again: a writable mount can only come from this list.
	add(mountOp{op: opSetattr, dst: "/", flags: ro | nosuid, data: "r"})
	add(mountOp{op: opSetattr, dst: "/tmp", clr: ro})
	add(mountOp{op: opSetattr, dst: "/dev/shm", clr: ro})
	if !spec.ReadOnlyWorkspace {
		for _, d := range reopen {
			add(mountOp{op: opSetattr, dst: d, clr: ro, optional: true, nofollow: true})
		}
		ops = append(ops, protectMounts(protected, reopen)...)
	}
	return ops, nil
}

// hostReadOnly reports whether the mount d lies on is read-only on the host (or cannot be
// told: then it is treated as read-only). Run as the caller, like the rest of the plan.
func hostReadOnly(d string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(d, &st); err != nil {
		return true
	}
	return st.Flags&unix.ST_RDONLY != 0
}

// preludeCovered are the places the prelude covers with a mount of its own (preludeMounts):
// the host's content there is not what the child sees.
var preludeCovered = append([]string{"/tmp", "/dev", "/proc"}, maskedDirs...)

// needsOwnMount reports whether a read-only dir must be mounted for the child to see it as the
// host has it, read-only: when it lies in a writable dir (whose mount would make it writable)
// or in a place the prelude covered. Anywhere else the read-only root shows it as it is, and
// a clone and a move fewer take ~40 µs off the child's setup (the session's tool-results dir,
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
