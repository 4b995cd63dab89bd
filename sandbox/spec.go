package sandbox

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// specEncoder writes the blob nsinit_spec.c reads: u32/u64 native-endian (same binary, same
// machine), strings as u32 length, bytes and a NUL so the child can point into its buffer.
type specEncoder struct{ b []byte }

func (e *specEncoder) u32(v uint32) { e.b = binary.NativeEndian.AppendUint32(e.b, v) }
func (e *specEncoder) u64(v uint64) { e.b = binary.NativeEndian.AppendUint64(e.b, v) }

func (e *specEncoder) str(s string) {
	e.u32(uint32(len(s)))
	e.b = append(e.b, s...)
	e.b = append(e.b, 0)
}

func (e *specEncoder) tag(tag, count uint32) { e.u32(tag); e.u32(count) }

func (e *specEncoder) bool(v bool) {
	if v {
		e.u32(1)
	} else {
		e.u32(0)
	}
}

func (e *specEncoder) seccomp(progs [][]byte) {
	e.tag(tagSeccomp, uint32(len(progs)))
	for _, prog := range progs {
		e.u32(uint32(len(prog)))
		e.b = append(e.b, prog...)
	}
}

// mounts writes the mount plan, each op laid out as nsinit.h has it: {op, opt, path, the op's
// own fields}, so the child decodes every field under its own name.
func (e *specEncoder) mounts(ops []mountOp) error {
	e.tag(tagMounts, uint32(len(ops)))
	for _, m := range ops {
		if hasNUL(m.src, m.dst, m.fstype, m.data) {
			return fmt.Errorf("%w: NUL byte in a path", ErrBadSpec)
		}
		e.u32(m.op)
		opt := uint32(0)
		if m.optional {
			opt |= optOptional
		}
		if m.nofollow {
			opt |= optNoFollow
		}
		e.u32(opt)
		switch m.op {
		case opMount:
			e.str(m.dst)
			e.str(m.src)
			e.str(m.fstype)
			e.str(m.data)
			e.u64(m.flags)
		case opSetattr:
			e.str(m.dst)
			e.u64(m.flags)
			e.u64(m.clr)
			e.bool(m.data == "r")
		case opMknod:
			e.str(m.dst)
			e.u32(uint32(m.flags))
			e.u64(m.clr)
		case opMkdir, opTouch:
			e.str(m.dst)
			e.u32(uint32(m.flags))
		case opSymlink:
			e.str(m.dst)
			e.str(m.src)
		case opHold:
			e.str(m.src)
		case opEmptyFS:
			e.str("")
			e.str(m.data)
			e.u64(m.flags)
		case opCover:
			e.str(m.dst)
			e.str(m.data)
		case opCloneTree:
			e.str(m.src)
			e.u32(uint32(m.clr))
			e.bool(m.flags&cloneFromHeld != 0)
		case opMoveTree:
			e.str(m.dst)
			e.u32(uint32(m.clr))
		default:
			return fmt.Errorf("%w: mount op %d", ErrBadSpec, m.op)
		}
	}
	return nil
}

func (e *specEncoder) strs(tag uint32, v []string) {
	e.tag(tag, uint32(len(v)))
	for _, s := range v {
		e.str(s)
	}
}

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

type rlimit struct {
	resource uint32
	value    uint64
}

type llRule struct {
	access uint64
	path   string
}

// childSpec is everything the child needs, already decided by the parent.
type childSpec struct {
	path, dir string
	argv, env []string
	direct    []string // Spec.Direct
	uid, gid  uint32
	groups    []uint32
	netnsFD   int // -1: stay in the daemon's network namespace
	nExtra    int
	mounts    []mountOp // callMounts; preludeMounts go first unless preluded
	preluded  bool      // the init ran preludeMounts already (a pooled init)
	tmpSize   int64     // size of the private /tmp and /dev/shm
	// remountTmp: the pooled init's prelude made them another size; resize them first.
	remountTmp bool
	rlimits    []rlimit
	landlock   *landlockPlan
	// early seccomp filters go in the prelude, late ones just before execve; a per-call init
	// loads both there, in order.
	early, late [][]byte
}

type landlockPlan struct {
	handledFS uint64
	scoped    uint64
	attrSize  uint32
	// base is the read rules around deny paths that may appear later (expansions of "/"):
	// most of a ruleset's cost, and the same call after call. baseKey is the expansion cache
	// entry they came from (nil: not cached). A pooled init prebuilds the base of a hint
	// (landlockHint) while it waits; prebuilt says its call uses that instead of base.
	base     []llRule
	baseKey  *expansion
	prebuilt bool
	rules    []llRule // the call's own: /tmp, /dev, read-only and writable dirs
}

// landlockHint is the base a pooled init prebuilds: the latest call's.
type landlockHint struct {
	handledFS, scoped uint64
	attrSize          uint32
	key               *expansion
	rules             []llRule
}

func (l *landlockPlan) hint() *landlockHint {
	return &landlockHint{handledFS: l.handledFS, scoped: l.scoped, attrSize: l.attrSize, key: l.baseKey, rules: l.base}
}

// matches reports whether an init prebuilt from h has exactly l's base: the same masks and
// rules, from the same expansion cache entry (so no directory they came from changed since).
func (h *landlockHint) matches(l *landlockPlan) bool {
	return h != nil && l != nil && h.key != nil && h.key == l.baseKey && h.handledFS == l.handledFS &&
		h.scoped == l.scoped && h.attrSize == l.attrSize && slices.Equal(h.rules, l.base)
}

func (e *specEncoder) llRules(rules ...[]llRule) error {
	n := 0
	for _, rs := range rules {
		n += len(rs)
	}
	e.u32(uint32(n))
	for _, rs := range rules {
		for _, r := range rs {
			if hasNUL(r.path) {
				return fmt.Errorf("%w: NUL byte in a path", ErrBadSpec)
			}
			e.u64(r.access)
			e.str(r.path)
		}
	}
	return nil
}

func hasNUL(ss ...string) bool {
	for _, s := range ss {
		if strings.IndexByte(s, 0) >= 0 {
			return true
		}
	}
	return false
}

func (c *childSpec) encode() ([]byte, error) {
	if hasNUL(c.path, c.dir) || hasNUL(c.argv...) || hasNUL(c.env...) || hasNUL(c.direct...) {
		return nil, fmt.Errorf("%w: NUL byte in path, dir, args or env", ErrBadSpec)
	}
	e := &specEncoder{b: make([]byte, 0, 16384)}
	e.u32(specMagic)
	e.u32(specVersion)
	e.tag(tagExec, 2)
	e.str(c.path)
	e.str(c.dir)
	e.strs(tagArgv, c.argv)
	e.strs(tagEnv, c.env)
	e.strs(tagDirect, c.direct)
	e.tag(tagCred, 2)
	e.u32(c.uid)
	e.u32(c.gid)
	e.tag(tagGroups, uint32(len(c.groups)))
	for _, g := range c.groups {
		e.u32(g)
	}
	e.tag(tagFds, 2)
	e.u32(uint32(int32(c.netnsFD)))
	e.u32(uint32(c.nExtra))
	mounts := c.mounts
	switch {
	case !c.preluded:
		mounts = append(preludeMounts(c.tmpSize), mounts...)
	case c.remountTmp:
		mounts = append(tmpRemounts(c.tmpSize), mounts...)
	}
	if err := e.mounts(mounts); err != nil {
		return nil, err
	}
	e.tag(tagRlimits, uint32(len(c.rlimits)))
	for _, r := range c.rlimits {
		e.u32(r.resource)
		e.u64(r.value)
	}
	if c.landlock == nil {
		e.tag(tagLandlock, 0)
	} else {
		l := c.landlock
		e.tag(tagLandlock, 1)
		if l.prebuilt {
			e.u32(1)
		} else {
			e.u32(0)
		}
		e.u64(l.handledFS)
		e.u64(l.scoped)
		e.u32(l.attrSize)
		base := l.base
		if l.prebuilt {
			base = nil // the init has it
		}
		if err := e.llRules(base, l.rules); err != nil {
			return nil, err
		}
	}
	// Last, so the child can hand the kernel a pointer into its buffer.
	progs := c.late
	if !c.preluded {
		progs = append(append([][]byte{}, c.early...), c.late...)
	}
	e.seccomp(progs)
	return e.b, nil
}

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

// DefaultDenyPaths are hidden in every child in addition to Spec.DenyPaths: the container
// runtimes' sockets would hand out root, and a unix socket reaches its server whatever the
// network namespace: the system bus (services that act for the caller, polkit permitting) and
// screen's sessions (a command typed into the caller's own screen runs unconfined).
var DefaultDenyPaths = []string{
	"/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock",
	"/run/podman/podman.sock", "/run/dbus", "/run/screen", "/run/snapd.socket",
	"/run/snapd-snap.socket",
}

// hiddenFor is DefaultDenyPaths and the caller's runtime directory (/run/user/<uid>): its
// session bus and systemd user manager run whatever they are asked outside the sandbox
// (systemd-run --user), and its gpg-agent, keyring and editor sockets act with the caller's
// keys and rights. An agent socket the policy allows is exposed by path (a session directory).
func hiddenFor(uid uint32) []string {
	return append(slices.Clone(DefaultDenyPaths), "/run/user/"+strconv.FormatUint(uint64(uid), 10))
}

// cleanAbs returns the cleaned absolute path, or an error for a relative one.
func cleanAbs(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("%w: path %q is not absolute", ErrBadSpec, p)
	}
	return filepath.Clean(p), nil
}

// resolve follows symlinks in the longest existing prefix of p, so a rule or a mount names the
// real place (e.g. /var/run -> /run). The rest of the path is kept as given.
func resolve(v *fsView, p string) string {
	// One pass over the components, each looked at once: resolving every prefix from the
	// root again (EvalSymlinks per parent) cost ~80 µs a call for a dozen missing deny paths.
	// Same result: the resolved longest prefix whose resolution succeeds, then the rest.
	resolved := "/"
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i, c := range parts {
		if c == "" {
			continue
		}
		next := filepath.Join(resolved, c)
		fi, err := v.lstat(next)
		if err == nil && fi.Mode()&os.ModeSymlink != 0 {
			next, err = v.evalSymlinks(next)
		}
		if err != nil {
			return filepath.Join(append([]string{resolved}, parts[i:]...)...)
		}
		resolved = next
	}
	return resolved
}

// fsView is one plan's look at the host's filesystem: each path is lstat'ed once. A plan is
// made from one moment's view anyway (its child runs after), and resolving a dozen deny paths
// under one home, then asking which exist and who owns their parents, asked the kernel about
// the same paths ~100 times a call. A nil view asks the kernel every time.
type fsView struct {
	lstats map[string]lstatResult
	links  map[string]linkResult // filepath.EvalSymlinks of a symlink met while resolving
}

type linkResult struct {
	target string
	err    error
}

type lstatResult struct {
	fi  os.FileInfo
	err error
}

func newFSView() *fsView { return &fsView{lstats: make(map[string]lstatResult, 64)} }

func (v *fsView) lstat(p string) (os.FileInfo, error) {
	if v == nil {
		return os.Lstat(p)
	}
	if r, ok := v.lstats[p]; ok {
		return r.fi, r.err
	}
	fi, err := os.Lstat(p)
	v.lstats[p] = lstatResult{fi, err}
	return fi, err
}

// evalSymlinks is filepath.EvalSymlinks through the view: several deny paths share a symlinked
// parent (/var/run), which is then followed once.
func (v *fsView) evalSymlinks(p string) (string, error) {
	if v == nil {
		return filepath.EvalSymlinks(p)
	}
	if r, ok := v.links[p]; ok {
		return r.target, r.err
	}
	target, err := filepath.EvalSymlinks(p)
	if v.links == nil {
		v.links = map[string]linkResult{}
	}
	v.links[p] = linkResult{target, err}
	return target, err
}

// stat is os.Stat through the view: a symlink is followed (uncached; rare in a resolved path).
func (v *fsView) stat(p string) (os.FileInfo, error) {
	fi, err := v.lstat(p)
	if err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return os.Stat(p)
	}
	return fi, err
}

func under(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
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

// encodePrelude is the blob a pooled init reads on fd 6 before it waits for its call: the
// spec's magic and version, preludeMounts as a mounts record, the landlock base to prebuild
// (hint, nil for none), whether to join the netns passed on fd 7, then the early seccomp filters.
func encodePrelude(early [][]byte, tmpSize int64, hint *landlockHint, joinNetns bool) ([]byte, error) {
	e := &specEncoder{}
	e.u32(specMagic)
	e.u32(specVersion)
	if err := e.mounts(preludeMounts(tmpSize)); err != nil {
		return nil, err
	}
	if hint == nil {
		e.tag(tagLandlockHint, 0)
	} else {
		e.tag(tagLandlockHint, 1)
		e.u64(hint.handledFS)
		e.u64(hint.scoped)
		e.u32(hint.attrSize)
		if err := e.llRules(hint.rules); err != nil {
			return nil, err
		}
	}
	if joinNetns {
		e.tag(tagNetnsHint, 1)
	} else {
		e.tag(tagNetnsHint, 0)
	}
	e.seccomp(early)
	return e.b, nil
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
