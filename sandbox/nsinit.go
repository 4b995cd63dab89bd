package sandbox

// The C constructor in nsinit.c is linked into every binary importing this package; it does
// nothing unless argv[1] is initArg. cgo is required anyway for libseccomp. This file is the Go
// end of it: the constants nsinit.h shares, and what starting either kind of init takes.

// #cgo CFLAGS: -Wall -Wextra -Wno-unused-parameter -O2
// #include "nsinit.h"
import "C"
import (
	"fmt"
	"io"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

const (
	initArg         = C.SBX_INIT_ARG
	poolArg         = C.SBX_POOL_ARG
	maxPassedExtra  = C.SBX_MAX_EXTRA
	inlineSpecMax   = C.SBX_INLINE_SPEC_MAX
	specMagic       = C.SBX_MAGIC
	specVersion     = C.SBX_VERSION
	statusMagic     = C.SBX_STATUS_MAGIC
	exitInitFailed  = C.SBX_EXIT_INIT_FAILED
	fdFirstExtra    = C.SBX_FD_FIRST_EXTRA
	fdNetns         = C.SBX_FD_NETNS
	llFileRights    = uint64(C.SBX_LL_FILE_RIGHTS)
	tagExec         = C.SBX_TAG_EXEC
	tagArgv         = C.SBX_TAG_ARGV
	tagEnv          = C.SBX_TAG_ENV
	tagDirect       = C.SBX_TAG_DIRECT
	tagCred         = C.SBX_TAG_CRED
	tagGroups       = C.SBX_TAG_GROUPS
	tagFds          = C.SBX_TAG_FDS
	tagMounts       = C.SBX_TAG_MOUNTS
	tagRlimits      = C.SBX_TAG_RLIMITS
	tagLandlock     = C.SBX_TAG_LANDLOCK
	tagSeccomp      = C.SBX_TAG_SECCOMP
	tagLandlockHint = C.SBX_TAG_LANDLOCK_HINT
	tagNetnsHint    = C.SBX_TAG_NETNS_HINT
	opMount         = C.SBX_OP_MOUNT
	opSetattr       = C.SBX_OP_SETATTR
	opMknod         = C.SBX_OP_MKNOD
	opMkdir         = C.SBX_OP_MKDIR
	opSymlink       = C.SBX_OP_SYMLINK
	opTouch         = C.SBX_OP_TOUCH
)

const (
	opCloneTree = C.SBX_OP_CLONE_TREE
	opMoveTree  = C.SBX_OP_MOVE_TREE
	opHold      = C.SBX_OP_HOLD
	opEmptyFS   = C.SBX_OP_EMPTY_FS
	opCover     = C.SBX_OP_COVER
	optOptional = C.SBX_OPT_OPTIONAL
	optNoFollow = C.SBX_OPT_NOFOLLOW
	maxTrees    = C.SBX_MAX_TREES
)

// memfdWith returns a sealed memfd holding b, positioned at its start.
func memfdWith(b []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate("sandboxd-spec", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd: %w", err)
	}
	f := os.NewFile(uintptr(fd), "sandboxd-spec")
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, fmt.Errorf("write spec: %w", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS,
		unix.F_SEAL_SEAL|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE); err != nil {
		f.Close()
		return nil, fmt.Errorf("seal spec: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("rewind spec: %w", err)
	}
	return f, nil
}

// readAllClose reads f to EOF and closes it.
func readAllClose(f *os.File) ([]byte, error) {
	b, err := io.ReadAll(f)
	f.Close()
	return b, err
}

// initAttr is how every init is cloned.
func initAttr(cg *cgroup) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{
		Setsid:     true,            // no controlling terminal: TIOCSTI and job control can't reach the user's tty
		Pdeathsig:  syscall.SIGKILL, // re-armed by the child after its uid change
		Cloneflags: unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS,
	}
	if cg != nil && cg.v2 {
		// CLONE_INTO_CGROUP: born inside the cgroup, nothing to attach afterwards.
		attr.UseCgroupFD = true
		attr.CgroupFD = cg.fd
	}
	return attr
}

// holdMountNS opens pid's mount namespace. Held until the call was reaped, it makes the
// teardown of the call's mounts (an RCU grace period and every umount, ~0.2 ms) happen when the
// janitor closes it, not inside the init's exit that Wait waits for. -1 when it cannot be held.
func holdMountNS(pid int) int {
	// Through a pidfd where the kernel has it (6.11+): a lookup under /proc/<pid> leaves
	// dentries that reaping the init then has to invalidate, inside the wait for the call's end.
	if pidfd, err := unix.PidfdOpen(pid, 0); err == nil {
		fd, err := unix.IoctlRetInt(pidfd, unix.PIDFD_GET_MNT_NAMESPACE)
		unix.Close(pidfd)
		if err == nil {
			// The kernel makes it close-on-exec; said again so no kernel's default matters.
			if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err == nil {
				return fd
			}
			unix.Close(fd)
		}
	}
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return fd
}

func releaseMountNS(fd int) {
	if fd >= 0 {
		unix.Close(fd)
	}
}
