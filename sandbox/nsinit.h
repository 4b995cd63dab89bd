// nsinit.h: the contract between the parent (encode.go) and the child's constructor (nsinit*.c).
#ifndef SANDBOXD_NSINIT_H
#define SANDBOXD_NSINIT_H

#define SBX_INIT_ARG "__sandboxd_init__"
/* argv[2] of a pooled init: started ahead of any call, it waits on fd 3 for its call. */
#define SBX_POOL_ARG "pool"
#define SBX_MAGIC 0x58425353u /* "SSBX" */
#define SBX_VERSION 9u

#define SBX_FD_SPEC 3
#define SBX_FD_ERR 4
#define SBX_FD_SYNC 5
#define SBX_FD_NETNS 6
#define SBX_FD_FIRST_EXTRA 7
/* A pooled init's fds before its call, whose own fds then take these slots (sbx_receive_call):
 * its socket to the daemon (the ready byte, the call, the end report), the prelude blob, and
 * the network namespace the prelude joins when it says so. */
#define SBX_FD_POOL_SOCK 3
#define SBX_FD_PRELUDE 6
#define SBX_FD_PRELUDE_NETNS 7

/* A pooled init receives its call's fds on fd 3 (a unix socket) in one message, in this order:
 * the spec memfd (to fd 3), stdin, stdout, stderr (0-2), the network namespace or /dev/null
 * (6), then up to SBX_MAX_EXTRA ExtraFiles (7+). The message's payload is the fd count (u32);
 * a spec of at most SBX_INLINE_SPEC_MAX bytes follows it in the same payload instead of in
 * the memfd, whose slot then holds /dev/null. */
#define SBX_PASSED_FIXED 5
#define SBX_MAX_EXTRA 64
#define SBX_INLINE_SPEC_MAX (48u << 10)

#define SBX_EXIT_INIT_FAILED 125

/* A pooled init, which runs the program as its child (sbx_run_child), reports the call's end on
 * its socket: {SBX_STATUS_MAGIC, status} (two u32), sent once every other process of the call's
 * PID namespace was killed and reaped; status is what the init then exits with. Anything else
 * (EOF: the init was killed, or exec'd the program itself) means its exit status is the call's. */
#define SBX_STATUS_MAGIC 0x54535853u /* "SXST" */
/* The init keeps its socket at this fd or above: clear of every slot sbx_receive_call fills. */
#define SBX_FD_STATUS_MIN 160

/* Records, numbered in the order they appear. A call's spec: EXEC to FDS, MOUNTS, RLIMITS,
 * LANDLOCK, SECCOMP. A pooled init's prelude (fd 6): MOUNTS, LANDLOCK_HINT, NETNS_HINT,
 * SECCOMP. Each is {u32 tag, u32 count, fields}. */
#define SBX_TAG_EXEC 1     /* path, dir */
#define SBX_TAG_ARGV 2     /* count, strings */
#define SBX_TAG_ENV 3      /* count, strings */
#define SBX_TAG_DIRECT 4   /* count, strings: a simple command run as bash would, or 0 */
#define SBX_TAG_CRED 5     /* uid, gid, real gid, umask */
#define SBX_TAG_GROUPS 6   /* count, u32s */
#define SBX_TAG_FDS 7      /* netns fd (or -1), number of caller's ExtraFiles */
#define SBX_TAG_MOUNTS 8   /* count, mount ops (below) */
#define SBX_TAG_RLIMITS 9  /* count, {resource, u64 limit} */
/* 0 or 1, {u32 use prebuilt, u64 fs, u64 scoped, attr size, n, {u64 access, path}} */
#define SBX_TAG_LANDLOCK 10
/* prelude only: 0 or 1, {u64 fs, u64 scoped, attr size, n, rules} */
#define SBX_TAG_LANDLOCK_HINT 11
/* prelude only: 0 or 1 = join the netns on fd SBX_FD_PRELUDE_NETNS (a session's) */
#define SBX_TAG_NETNS_HINT 12
#define SBX_TAG_SECCOMP 13 /* program count, {u32 bytes, raw BPF}; all are loaded */

/* A mount op is {u32 op, u32 opt (SBX_OPT_*), path, then the op's own fields}: path is what the
 * op acts on, the one SBX_OPT_NOFOLLOW resolves and a failure names. Strings that mount(2)
 * takes as optional are "" for none.
 *   op          path         fields
 *   MOUNT       target       src, fstype, data, u64 flags: mount(2)
 *   SETATTR     mount        u64 set, u64 clr (MOUNT_ATTR_*), u32 recursive: mount_setattr(2)
 *   MKNOD       node         u32 mode, u64 dev
 *   MKDIR       directory    u32 mode; one already there is fine (mkdir -p)
 *   SYMLINK     link         target
 *   TOUCH       file         u32 mode: a new empty file, to bind over
 *   HOLD        directory    -: kept (O_PATH) for CLONE_TREE, before a mount covers it
 *   EMPTY_FS    "" (none)    options (tmpfs "k=v,..."), u64 attrs (MOUNT_ATTR_*): a detached,
 *                            empty fs that COVER clones
 *   COVER       directory    options: covered by a clone of the empty fs (or, without one, a
 *                            tmpfs mounted with options)
 *   CLONE_TREE  source       u32 slot, u32 from_held: a detached recursive copy of path
 *                            (open_tree) put in slot; from_held: path is relative to the held
 *                            directory ("" = itself)
 *   MOVE_TREE   target       u32 slot: the copy in slot moved onto path (move_mount) */
#define SBX_OP_MOUNT 1
#define SBX_OP_SETATTR 2
#define SBX_OP_MKNOD 3
#define SBX_OP_MKDIR 4
#define SBX_OP_SYMLINK 5
#define SBX_OP_TOUCH 6
#define SBX_OP_CLONE_TREE 7
#define SBX_OP_MOVE_TREE 8
#define SBX_OP_HOLD 9
#define SBX_OP_EMPTY_FS 10
#define SBX_OP_COVER 11
/* A mount op's opt bits. */
#define SBX_OPT_OPTIONAL 1 /* a missing path (ENOENT, ENOTDIR) skips the op */
#define SBX_OPT_NOFOLLOW 2 /* path is resolved without following any symlink: the plan resolved
			      it, so one there now means it changed since (a user's swap), and
			      the op fails. Only for MOUNT, SETATTR, COVER, CLONE_TREE, MOVE_TREE */
#define SBX_MAX_TREES 64

/* Landlock rights a rule on a non-directory may carry (EXECUTE, WRITE_FILE, READ_FILE,
 * TRUNCATE, IOCTL_DEV). */
// EXECUTE (bit 0) and READ_FILE (bit 2): what the program being exec'd needs of its own file.
#define SBX_LL_EXEC_RIGHTS ((1ULL << 0) | (1ULL << 2))
#define SBX_LL_FILE_RIGHTS ((1ULL << 0) | (1ULL << 1) | (1ULL << 2) | (1ULL << 14) | (1ULL << 15))

#endif
