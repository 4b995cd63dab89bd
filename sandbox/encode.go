package sandbox

import (
	"encoding/binary"
	"fmt"
	"strings"
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

func (e *specEncoder) strs(tag uint32, v []string) {
	e.tag(tag, uint32(len(v)))
	for _, s := range v {
		e.str(s)
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
		if hasNUL(m.path, m.mount.src, m.mount.fstype, m.mount.data, m.symlink.target, m.emptyFS.options,
			m.cover.options) {
			return fmt.Errorf("%w: NUL byte in a path", ErrBadSpec)
		}
		e.u32(m.op)
		e.u32(m.opt)
		e.str(m.path)
		switch m.op {
		case opMount:
			e.str(m.mount.src)
			e.str(m.mount.fstype)
			e.str(m.mount.data)
			e.u64(m.mount.flags)
		case opSetattr:
			e.u64(m.setattr.set)
			e.u64(m.setattr.clr)
			e.bool(m.setattr.recursive)
		case opMknod:
			e.u32(m.mknod.mode)
			e.u64(m.mknod.dev)
		case opMkdir:
			e.u32(m.mkdir.mode)
		case opTouch:
			e.u32(m.touch.mode)
		case opSymlink:
			e.str(m.symlink.target)
		case opHold: // the path alone
		case opEmptyFS:
			e.str(m.emptyFS.options)
			e.u64(m.emptyFS.attrs)
		case opCover:
			e.str(m.cover.options)
		case opCloneTree:
			e.u32(m.cloneTree.slot)
			e.bool(m.cloneTree.fromHeld)
		case opMoveTree:
			e.u32(m.moveTree.slot)
		default:
			return fmt.Errorf("%w: mount op %d", ErrBadSpec, m.op)
		}
	}
	return nil
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

type rlimit struct {
	resource uint32
	value    uint64
}

// childSpec is everything the child needs, already decided by the parent.
type childSpec struct {
	path, dir string
	argv, env []string
	direct    []string // Spec.Direct
	uid, gid  uint32
	rgid      uint32 // the real gid: gid, or OverflowGID for an undumpable program
	umask     uint32
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
	// aliases is the mount table the mounts were planned on and the paths looked up in it
	// (aliasLookup.staleIn).
	aliases *aliasLookup
	// early seccomp filters go in the prelude, late ones just before execve; a per-call init
	// loads both there, in order.
	early, late [][]byte
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
	e.tag(tagCred, 4)
	e.u32(c.uid)
	e.u32(c.gid)
	e.u32(c.rgid)
	e.u32(c.umask & 0o777)
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
