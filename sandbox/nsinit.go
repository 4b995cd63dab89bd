package sandbox

// The C constructor in nsinit.c is linked into every binary importing this package; it does
// nothing unless argv[1] is initArg. cgo is required anyway for libseccomp.

// #cgo CFLAGS: -Wall -Wextra -Wno-unused-parameter -O2
// #include "nsinit.h"
import "C"

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
