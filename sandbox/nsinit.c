// nsinit.c: the confined child's setup, run as a constructor before the Go runtime starts.
//
// WARNING: every line here runs as root in the child between fork and exec of user code.
// After any change rerun, as root: go test -run 'TestEscape|TestInit|TestSeccomp' ./sandbox/
//
// The parent (spec.go) re-executes /proc/self/exe with argv[1] == SBX_INIT_ARG and these fds:
//   3  the spec: one blob, read to EOF (format below)
//   4  the error pipe: {u32 errno, u32 len, msg}; CLOEXEC here, so EOF means execve succeeded
//   5  the go-ahead pipe: one byte once the parent has the child in its cgroup; EOF = parent died
//   6  the session's network namespace, or closed when the call keeps the host's network
//   7+ the caller's ExtraFiles, moved down to 3+ just before exec
// A pooled init is started with the prelude (spec.go: encodePrelude, the call-independent
// mounts) on fd 6, runs it, and sends one byte on fd 3 before it blocks for its call.
// A pooled init (argv[2] == SBX_POOL_ARG, pool.go) is started before its call exists, already
// inside its own cgroup, with 4 and 5 as above and fd 3 a unix socket. It blocks on that socket
// before doing anything; the one message that arrives carries the call's fds (nsinit.h), which
// receive_call puts where a per-call init has them. From there on both run the same steps.
// Spec blob: u32 magic, u32 version, then records {u32 tag, u32 len, len bytes} in a fixed order
// the parent guarantees; strings carry no NUL (the parent rejects them) and are terminated here.
// All integers are native-endian: writer and reader are the same binary on the same machine.
//
// The child does not log, touches no network and allocates only the spec buffer, the arrays
// pointing into it and the direct exec's paths and environments.

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>
#include <grp.h>
#include <limits.h>

#include "nsinit.h"

#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x00000001
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef SYS_open_tree
#define SYS_open_tree 428
#define SYS_move_mount 429
#endif
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef OPEN_TREE_CLOEXEC
#define OPEN_TREE_CLOEXEC O_CLOEXEC
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif
#ifndef SYS_fsopen
#define SYS_fsopen 430
#define SYS_fsconfig 431
#define SYS_fsmount 432
#endif
#ifndef SYS_openat2
#define SYS_openat2 437
#endif
#define SBX_RESOLVE_NO_SYMLINKS 0x04
#define SBX_RESOLVE_BENEATH 0x08
#define SBX_MOVE_MOUNT_T_EMPTY_PATH 0x00000040
#define SBX_FSOPEN_CLOEXEC 0x00000001
#define SBX_FSCONFIG_SET_STRING 1
#define SBX_FSCONFIG_CMD_CREATE 6
#define SBX_FSMOUNT_CLOEXEC 0x00000001
#define SBX_CLOSE_RANGE_CLOEXEC (1U << 2)
#define SBX_LANDLOCK_RULE_PATH_BENEATH 1

// What an init keeps from before its call's fds arrive sits above every slot receive_call
// fills (0-6, the call's ExtraFiles from SBX_FD_FIRST_EXTRA), so it survives them landing.
#define SBX_FD_KEEP (SBX_FD_FIRST_EXTRA + SBX_MAX_EXTRA)
#define SBX_FD_KEEP_RULESET (SBX_FD_KEEP + 32)
#define SBX_FD_KEEP_HELD (SBX_FD_KEEP + 33)
#define SBX_FD_KEEP_HOST_NETNS (SBX_FD_KEEP + 34)
#define SBX_FD_KEEP_EMPTY_FS (SBX_FD_KEEP + 35)

struct sbx_mount_attr {
	uint64_t attr_set, attr_clr, propagation, userns_fd;
};

struct sbx_open_how {
	uint64_t flags, mode, resolve;
};

// Layouts of the landlock uapi structs; the system header may predate the fields we use.
struct sbx_ll_ruleset_attr {
	uint64_t handled_access_fs, handled_access_net, scoped;
};
struct sbx_ll_path_beneath {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

// err_fd is where fail() reports: the error pipe, SBX_FD_ERR until move_user_fds lifts it out
// of the ExtraFiles' way. The one mutable static: every step may fail, and through one place.
static int err_fd = SBX_FD_ERR;

// SBX_TRACE (CGO_CFLAGS=-DSBX_TRACE, benchmarking only) prints a timestamp per step to the
// child's stderr; release builds compile it out, keeping the child silent.
#ifdef SBX_TRACE
#include <time.h>
static void trace(const char *what)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	dprintf(2, "sbxtrace %ld.%06ld %s\n", (long)ts.tv_sec, ts.tv_nsec / 1000, what);
}
#else
#define trace(x) do { } while (0)
#endif

// msg_add appends s to buf at *n, stopping at cap.
static void msg_add(char *buf, size_t *n, size_t cap, const char *s)
{
	while (*s && *n < cap)
		buf[(*n)++] = *s++;
}

// fail reports {errno, "step: detail"} to the parent and exits. Nothing after the failing step
// ran, so the user's program never runs half-confined. It formats by hand, without stdio: the
// vfork child of run_child fails through here too, and may only write and _exit.
static void __attribute__((noreturn)) fail(int e, const char *step, const char *detail)
{
	char buf[1024];
	size_t n = 8; // after {code, len}
	msg_add(buf, &n, sizeof(buf) - 1, step);
	msg_add(buf, &n, sizeof(buf) - 1, ": ");
	msg_add(buf, &n, sizeof(buf) - 1, detail ? detail : "");
	uint32_t code = (uint32_t)e, len = (uint32_t)(n - 8);
	memcpy(buf, &code, 4);
	memcpy(buf + 4, &len, 4);
	ssize_t w = write(err_fd, buf, n);
	(void)w;
	_exit(SBX_EXIT_INIT_FAILED);
}

// The spec cursor.
struct rd {
	const char *p, *end;
};

static uint32_t rd_u32(struct rd *r)
{
	uint32_t v;
	if (r->end - r->p < 4)
		fail(EINVAL, "spec", "truncated");
	memcpy(&v, r->p, 4);
	r->p += 4;
	return v;
}

static uint64_t rd_u64(struct rd *r)
{
	uint64_t v;
	if (r->end - r->p < 8)
		fail(EINVAL, "spec", "truncated");
	memcpy(&v, r->p, 8);
	r->p += 8;
	return v;
}

// rd_str returns a NUL-terminated copy-free string: the parent leaves one spare byte after each
// string (the NUL) so the child can point into the buffer.
static char *rd_str(struct rd *r)
{
	uint32_t n = rd_u32(r);
	if ((uint64_t)(r->end - r->p) < (uint64_t)n + 1 || r->p[n] != 0)
		fail(EINVAL, "spec", "bad string");
	char *s = (char *)r->p;
	r->p += n + 1;
	return s;
}

// rd_tag checks that the next record is the one the fixed order expects.
static uint32_t rd_tag(struct rd *r, uint32_t want)
{
	uint32_t tag = rd_u32(r);
	if (tag != want)
		fail(EINVAL, "spec", "unexpected tag");
	return rd_u32(r); // count
}

static char *read_spec(int fd, size_t *len)
{
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap);
	if (!buf)
		fail(ENOMEM, "spec", "malloc");
	for (;;) {
		if (n == cap) {
			if (cap >= (64u << 20))
				fail(E2BIG, "spec", "too large");
			cap *= 2;
			buf = realloc(buf, cap);
			if (!buf)
				fail(ENOMEM, "spec", "realloc");
		}
		ssize_t got = read(fd, buf + n, cap - n);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			fail(errno, "spec", "read");
		if (got == 0)
			break;
		n += got;
	}
	*len = n;
	return buf;
}

static char **rd_strv(struct rd *r, uint32_t tag)
{
	uint32_t n = rd_tag(r, tag);
	char **v = calloc(n + 1, sizeof(char *));
	if (!v)
		fail(ENOMEM, "spec", "calloc");
	for (uint32_t i = 0; i < n; i++)
		v[i] = rd_str(r);
	return v;
}

// close_keep_errno closes fd without losing the errno of the failure being reported.
static void close_keep_errno(int fd)
{
	int e = errno;
	close(fd);
	errno = e;
}

// What a mount plan leaves for a later one: a pooled init's prelude makes both for its call's
// plan, which drops them when done (drop_held).
struct mount_state {
	// held: the directory SBX_OP_HOLD kept (O_PATH) before a mount covered it (the host's
	// /tmp), or -1.
	int held;
	// empty_fs: a detached tmpfs with nothing in it and no room for anything
	// (SBX_OP_EMPTY_FS), read-only: a directory is covered by a clone of it (open_tree +
	// move_mount) instead of a tmpfs of its own, cheaper, and nothing shows where it came
	// from. -1: none; a cover is then its own tmpfs.
	int empty_fs;
	// empty_attached: empty_fs itself covers a directory, so it is in the mount tree and
	// closing its fd frees nothing (the last close of a detached mount waits for an RCU grace
	// period).
	int empty_attached;
};

static int hold_dir(struct mount_state *ms, const char *path)
{
	int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ms->held = fcntl(fd, F_DUPFD_CLOEXEC, SBX_FD_KEEP_HELD);
	close(fd);
	return ms->held < 0 ? -1 : 0;
}

// make_empty_fs creates empty_fs from tmpfs options "k=v,k=v" and MOUNT_ATTR_* flags; on any
// failure (a kernel without the new mount API) it leaves it at -1.
static void make_empty_fs(struct mount_state *ms, const char *opts, uint64_t attrs)
{
	int fs = syscall(SYS_fsopen, "tmpfs", SBX_FSOPEN_CLOEXEC);
	if (fs < 0)
		return;
	char buf[256];
	int ok = strlen(opts) < sizeof(buf);
	if (ok) {
		strcpy(buf, opts);
		for (char *save = NULL, *kv = strtok_r(buf, ",", &save); kv && ok;
		     kv = strtok_r(NULL, ",", &save)) {
			char *v = strchr(kv, '=');
			if (!v)
				ok = 0;
			else {
				*v++ = 0;
				ok = syscall(SYS_fsconfig, fs, SBX_FSCONFIG_SET_STRING, kv, v, 0) == 0;
			}
		}
	}
	int m = -1;
	if (ok && syscall(SYS_fsconfig, fs, SBX_FSCONFIG_CMD_CREATE, NULL, NULL, 0) == 0)
		m = syscall(SYS_fsmount, fs, SBX_FSMOUNT_CLOEXEC, (unsigned int)attrs);
	close(fs);
	if (m < 0)
		return;
	ms->empty_fs = fcntl(m, F_DUPFD_CLOEXEC, SBX_FD_KEEP_EMPTY_FS);
	close(m);
}

// mount_to moves the detached mount m onto the target: the directory pfd (SBX_OPT_NOFOLLOW)
// or the path dst.
static int mount_to(int m, int pfd, const char *dst)
{
	if (pfd >= 0)
		return syscall(SYS_move_mount, m, "", pfd, "",
			       MOVE_MOUNT_F_EMPTY_PATH | SBX_MOVE_MOUNT_T_EMPTY_PATH);
	return syscall(SYS_move_mount, m, "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH);
}

// cover hides the target (as for mount_to; mount_path is the same target as a path mount(2)
// takes) under empty_fs (the first time) or a clone of it, or a tmpfs mounted with opts when
// there is none.
static int cover(struct mount_state *ms, int pfd, const char *dst, const char *mount_path,
		 const char *opts)
{
	if (ms->empty_fs < 0)
		return mount("tmpfs", mount_path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, opts);
	if (!ms->empty_attached) {
		int rc = mount_to(ms->empty_fs, pfd, dst);
		ms->empty_attached = rc == 0;
		return rc;
	}
	int t = syscall(SYS_open_tree, ms->empty_fs, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
	if (t < 0)
		return -1;
	int rc = mount_to(t, pfd, dst);
	close_keep_errno(t);
	return rc;
}

// open_nofollow opens path, relative to dfd, as an O_PATH fd without following a symlink in
// any of its components (and, from a held directory, without leaving it).
static int open_nofollow(int dfd, const char *path)
{
	struct sbx_open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = SBX_RESOLVE_NO_SYMLINKS };
	if (dfd != AT_FDCWD)
		how.resolve |= SBX_RESOLVE_BENEATH;
	return syscall(SYS_openat2, dfd, path, &how, sizeof(how));
}

// drop_held closes what only the mount plan needed, once the call's mounts are done.
static void drop_held(struct mount_state *ms)
{
	if (ms->held >= 0)
		close(ms->held);
	ms->held = -1;
	if (ms->empty_fs >= 0)
		close(ms->empty_fs);
	ms->empty_fs = -1;
}

// One mount op, decoded: each field has one meaning, named for its op (nsinit.h lists them).
struct mount_op {
	uint32_t op, opt;
	const char *path; // what the op acts on; NOFOLLOW resolves it, a failure names it
	union {
		struct {
			const char *src, *fstype, *data;
			unsigned long flags;
		} mount;
		struct {
			uint64_t set, clr;
			int recursive;
		} setattr;
		struct {
			mode_t mode;
			dev_t dev;
		} mknod;
		struct {
			mode_t mode;
		} mkdir, touch;
		struct {
			const char *target;
		} symlink;
		struct {
			const char *options;
			uint64_t attrs;
		} empty_fs;
		struct {
			const char *options;
		} cover;
		struct {
			uint32_t slot;
			int from_held;
		} clone_tree;
		struct {
			uint32_t slot;
		} move_tree;
	};
};

static uint32_t rd_slot(struct rd *r)
{
	uint32_t slot = rd_u32(r);
	if (slot >= SBX_MAX_TREES)
		fail(EINVAL, "mount", "tree slot");
	return slot;
}

// rd_mount_op decodes the next op of a mounts record, refusing one the plan never makes.
static void rd_mount_op(struct rd *r, struct mount_op *m)
{
	memset(m, 0, sizeof(*m));
	m->op = rd_u32(r);
	m->opt = rd_u32(r);
	m->path = rd_str(r);
	int resolvable = 0; // an op NOFOLLOW may apply to: its path is reached as a mount target
	switch (m->op) {
	case SBX_OP_MOUNT:
		m->mount.src = rd_str(r);
		m->mount.fstype = rd_str(r);
		m->mount.data = rd_str(r);
		m->mount.flags = (unsigned long)rd_u64(r);
		resolvable = 1;
		break;
	case SBX_OP_SETATTR:
		m->setattr.set = rd_u64(r);
		m->setattr.clr = rd_u64(r);
		m->setattr.recursive = rd_u32(r) != 0;
		resolvable = 1;
		break;
	case SBX_OP_MKNOD:
		m->mknod.mode = (mode_t)rd_u32(r);
		m->mknod.dev = (dev_t)rd_u64(r);
		break;
	case SBX_OP_MKDIR:
		m->mkdir.mode = (mode_t)rd_u32(r);
		break;
	case SBX_OP_SYMLINK:
		m->symlink.target = rd_str(r);
		break;
	case SBX_OP_TOUCH:
		m->touch.mode = (mode_t)rd_u32(r);
		break;
	case SBX_OP_HOLD:
		break;
	case SBX_OP_EMPTY_FS:
		m->empty_fs.options = rd_str(r);
		m->empty_fs.attrs = rd_u64(r);
		break;
	case SBX_OP_COVER:
		m->cover.options = rd_str(r);
		resolvable = 1;
		break;
	case SBX_OP_CLONE_TREE:
		m->clone_tree.slot = rd_slot(r);
		m->clone_tree.from_held = rd_u32(r) != 0;
		resolvable = 1;
		break;
	case SBX_OP_MOVE_TREE:
		m->move_tree.slot = rd_slot(r);
		resolvable = 1;
		break;
	default:
		fail(EINVAL, "mount", "unknown op");
	}
	if ((m->opt & SBX_OPT_NOFOLLOW) && !resolvable)
		fail(EINVAL, "mount", "nofollow on an op that has no path to resolve");
}

// clone_tree detaches a recursive copy of the op's path into its slot, from the held directory
// when the path lies under it.
static int clone_tree(const struct mount_op *m, const struct mount_state *ms, int *trees)
{
	int *slot = &trees[m->clone_tree.slot];
	int dfd = AT_FDCWD;
	const char *from = m->path;
	unsigned int at = OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE;
	*slot = -1;
	if (m->clone_tree.from_held) {
		if (ms->held < 0)
			fail(EBADF, "mount", "no held directory");
		dfd = ms->held;
		if (!from[0])
			at |= AT_EMPTY_PATH;
	}
	int sfd = -1;
	if ((m->opt & SBX_OPT_NOFOLLOW) && from[0]) {
		sfd = open_nofollow(dfd, from);
		if (sfd < 0)
			return -1;
		dfd = sfd;
		from = "";
		at |= AT_EMPTY_PATH;
	}
	*slot = syscall(SYS_open_tree, dfd, from, at);
	if (sfd >= 0)
		close_keep_errno(sfd);
	return *slot;
}

// move_tree moves the copy in the op's slot onto the target (pfd, else the op's path).
static int move_tree(const struct mount_op *m, int *trees, int pfd)
{
	int *slot = &trees[m->move_tree.slot];
	if (*slot < 0) {
		if (m->opt & SBX_OPT_OPTIONAL)
			return 0; // its source did not exist
		fail(EBADF, "mount", m->path);
	}
	int rc = mount_to(*slot, pfd, m->path);
	close_keep_errno(*slot);
	*slot = -1;
	return rc;
}

// run_op runs one op on its target: pfd, the path opened without following symlinks
// (SBX_OPT_NOFOLLOW), else -1; target, what mount(2) is given for it (/proc/self/fd/<pfd>, or
// the path).
static int run_op(const struct mount_op *m, struct mount_state *ms, int *trees, int pfd,
		  const char *target)
{
	switch (m->op) {
	case SBX_OP_MOUNT:
		return mount(m->mount.src[0] ? m->mount.src : NULL, target,
			     m->mount.fstype[0] ? m->mount.fstype : NULL, m->mount.flags,
			     m->mount.data[0] ? m->mount.data : NULL);
	case SBX_OP_SETATTR: {
		struct sbx_mount_attr a = { .attr_set = m->setattr.set, .attr_clr = m->setattr.clr };
		unsigned int at = m->setattr.recursive ? AT_RECURSIVE : 0;
		if (pfd >= 0)
			return syscall(SYS_mount_setattr, pfd, "", at | AT_EMPTY_PATH, &a, sizeof(a));
		return syscall(SYS_mount_setattr, AT_FDCWD, m->path, at, &a, sizeof(a));
	}
	case SBX_OP_MKNOD:
		return mknod(m->path, m->mknod.mode, m->mknod.dev);
	case SBX_OP_MKDIR:
		// mkdir -p: two planned trees under /tmp may share parents. The tmpfs is fresh, so
		// whatever exists there was made by an earlier op of this plan.
		if (mkdir(m->path, m->mkdir.mode) < 0 && errno != EEXIST)
			return -1;
		return 0;
	case SBX_OP_SYMLINK:
		return symlink(m->symlink.target, m->path);
	case SBX_OP_TOUCH: {
		int fd = open(m->path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, m->touch.mode);
		return fd < 0 ? -1 : close(fd);
	}
	case SBX_OP_HOLD:
		// Keep the host's view of the path (the /tmp the private one covers) for the clones.
		return hold_dir(ms, m->path);
	case SBX_OP_EMPTY_FS:
		make_empty_fs(ms, m->empty_fs.options, m->empty_fs.attrs);
		return 0;
	case SBX_OP_COVER:
		return cover(ms, pfd, m->path, target, m->cover.options);
	case SBX_OP_CLONE_TREE:
		return clone_tree(m, ms, trees);
	case SBX_OP_MOVE_TREE:
		return move_tree(m, trees, pfd);
	}
	fail(EINVAL, "mount", "unknown op"); // rd_mount_op refused it already
}

// do_mounts runs the parent's mount plan. It is a plan rather than policy in C so the policy
// (which paths, which flags) lives in reviewed, tested Go and this loop stays trivial.
//
// WARNING: this runs as root on paths a user controls (the session's directories, the deny
// paths). The plan resolved them as the caller; an op marked SBX_OPT_NOFOLLOW reaches its
// path without following any symlink, so a component swapped for a symlink since (by another
// process of the user) fails the call instead of redirecting a writable mount.
static void do_mounts(struct rd *r, struct mount_state *ms)
{
	uint32_t n = rd_tag(r, SBX_TAG_MOUNTS);
	// The planned modes are exact (0666 device nodes, 1777 /dev/shm); umask would mask them.
	mode_t old_umask = umask(0);
	int trees[SBX_MAX_TREES]; // CLONE_TREE's copies, until MOVE_TREE puts them in place
	for (int t = 0; t < SBX_MAX_TREES; t++)
		trees[t] = -1;
	for (uint32_t i = 0; i < n; i++) {
		struct mount_op m;
		rd_mount_op(r, &m);
		int nofollow = m.opt & SBX_OPT_NOFOLLOW, rc;
		if (!nofollow || m.op == SBX_OP_CLONE_TREE) {
			rc = run_op(&m, ms, trees, -1, m.path); // a clone resolves its source itself
		} else {
			int pfd = open_nofollow(AT_FDCWD, m.path);
			if (pfd < 0) {
				rc = -1;
				if (m.op == SBX_OP_MOVE_TREE && trees[m.move_tree.slot] >= 0) {
					close_keep_errno(trees[m.move_tree.slot]);
					trees[m.move_tree.slot] = -1;
				}
			} else {
				char fdpath[32];
				snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", pfd);
				rc = run_op(&m, ms, trees, pfd, fdpath);
				close_keep_errno(pfd);
			}
		}
		if (rc >= 0)
			continue;
		if (nofollow && errno == ELOOP)
			fail(ELOOP, "mount (a symlink replaced a planned path)", m.path);
		// Optional ops (masking paths this kernel may not have) tolerate a missing target.
		if (!((m.opt & SBX_OPT_OPTIONAL) && (errno == ENOENT || errno == ENOTDIR)))
			fail(errno, "mount", m.path);
	}
	umask(old_umask);
}

static void do_rlimits(struct rd *r)
{
	uint32_t n = rd_tag(r, SBX_TAG_RLIMITS);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t res = rd_u32(r);
		struct rlimit rl = { .rlim_cur = rd_u64(r), .rlim_max = 0 };
		rl.rlim_max = rl.rlim_cur;
		if (setrlimit((int)res, &rl) < 0)
			fail(errno, "rlimit", "setrlimit");
	}
}

struct ll_masks {
	struct sbx_ll_ruleset_attr attr;
	uint32_t size;
};

// ll_read_masks reads a ruleset's access masks and attribute size.
static struct ll_masks ll_read_masks(struct rd *r)
{
	struct ll_masks m = { { 0 }, 0 };
	m.attr.handled_access_fs = rd_u64(r);
	m.attr.scoped = rd_u64(r);
	m.size = rd_u32(r);
	return m;
}

static int ll_create(struct ll_masks *m)
{
	int rs = syscall(SYS_landlock_create_ruleset, &m->attr, (size_t)m->size, 0);
	if (rs < 0)
		fail(errno, "landlock", "create ruleset");
	return rs;
}

// ll_add_rules reads a count of {access, path} rules and adds each to rs. A missing path is
// skipped: there is nothing to allow.
static void ll_add_rules(struct rd *r, int rs, uint64_t handled)
{
	uint32_t rules = rd_u32(r);
	for (uint32_t i = 0; i < rules; i++) {
		uint64_t access = rd_u64(r);
		char *path = rd_str(r);
		int fd = open(path, O_PATH | O_CLOEXEC);
		if (fd < 0) {
			// Out of resources: a rule silently missing would confuse; refuse instead.
			if (errno == EMFILE || errno == ENFILE || errno == ENOMEM)
				fail(errno, "landlock open", path);
			continue; // missing, a symlink loop, ...: there is nothing to allow
		}
		struct stat st;
		if (fstat(fd, &st) < 0)
			fail(errno, "landlock stat", path);
		// A rule on a file may only carry file rights; drop directory-only ones.
		if (!S_ISDIR(st.st_mode))
			access &= SBX_LL_FILE_RIGHTS;
		struct sbx_ll_path_beneath pb = { .allowed_access = access & handled, .parent_fd = fd };
		if (pb.allowed_access &&
		    syscall(SYS_landlock_add_rule, rs, SBX_LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0)
			fail(errno, "landlock rule", path);
		close(fd);
	}
}

// prebuild_landlock (pooled inits, in the prelude) builds the hinted rules (those around the
// deny paths of the pool's latest call) into a ruleset, returned (-1: no hint), while the init
// waits: the part of a call's ruleset that costs most (a rule per entry of each
// ancestor of a deny path) is then off the call's critical path. The daemon hands the call a
// spec that uses it only when the call's rules are exactly the hint's and the directories they
// came from are unchanged since (expansionCache); otherwise the call builds its own.
static int prebuild_landlock(struct rd *r)
{
	if (rd_tag(r, SBX_TAG_LANDLOCK_HINT) == 0)
		return -1;
	struct ll_masks m = ll_read_masks(r);
	int rs = ll_create(&m);
	ll_add_rules(r, rs, m.attr.handled_access_fs);
	int kept = fcntl(rs, F_DUPFD_CLOEXEC, SBX_FD_KEEP_RULESET);
	if (kept < 0)
		fail(errno, "landlock", "move prebuilt ruleset");
	close(rs);
	return kept;
}

// A pooled init's prelude may sit in the latest session's network namespace (joined, its
// identity) while holding the one it was started in (host, the daemon's): a call of that
// session stays, another joins its own, a call with the host's network goes back.
struct netns_state {
	int host; // -1: the prelude joined none, the init is where it was started
	struct stat joined;
};

// prejoin_netns (pooled inits, in the prelude) joins the network namespace on fd
// SBX_FD_FIRST_EXTRA, the latest call's session's: a call of that session then need not join
// it (setns, ~25 µs).
static void prejoin_netns(struct rd *r, struct netns_state *ns)
{
	if (rd_tag(r, SBX_TAG_NETNS_HINT) == 0)
		return;
	int host = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (host < 0)
		fail(errno, "prelude", "hold netns");
	if (fstat(SBX_FD_PRELUDE_NETNS, &ns->joined) < 0 || setns(SBX_FD_PRELUDE_NETNS, CLONE_NEWNET) < 0)
		fail(errno, "prelude", "setns");
	close(SBX_FD_PRELUDE_NETNS);
	ns->host = fcntl(host, F_DUPFD_CLOEXEC, SBX_FD_KEEP_HOST_NETNS);
	if (ns->host < 0)
		fail(errno, "prelude", "move netns");
	close(host);
}

// join_netns puts the call in its network namespace: the session's (fd), or the host's (-1).
static void join_netns(struct netns_state *ns, int fd)
{
	struct stat st;
	int joined = ns->host >= 0 && fd >= 0 && fstat(fd, &st) == 0 &&
		     st.st_dev == ns->joined.st_dev && st.st_ino == ns->joined.st_ino;
	if (fd >= 0 && !joined && setns(fd, CLONE_NEWNET) < 0)
		fail(errno, "setns", "net");
	if (fd < 0 && ns->host >= 0 && setns(ns->host, CLONE_NEWNET) < 0)
		fail(errno, "setns", "host net");
	if (ns->host >= 0)
		close(ns->host);
	ns->host = -1;
}

// do_landlock builds the ruleset (or finishes prebuilt, the prelude's, which it takes) and
// enforces it. The parent chose the access masks for the kernel's ABI, so this only opens
// paths and adds rules.
static void do_landlock(struct rd *r, int exe_fd, int prebuilt)
{
	uint32_t n = rd_tag(r, SBX_TAG_LANDLOCK);
	uint32_t use_prebuilt = n ? rd_u32(r) : 0;
	if (!use_prebuilt && prebuilt >= 0)
		close(prebuilt); // built for another call's rules
	if (n == 0)
		return; // the parent logged that landlock is unavailable
	struct ll_masks m = ll_read_masks(r);
	uint64_t handled = m.attr.handled_access_fs;
	int rs;
	if (use_prebuilt) {
		// Built with the same masks (the parent checked); the call's own rules go on top.
		if (prebuilt < 0)
			fail(EINVAL, "landlock", "no prebuilt ruleset");
		rs = prebuilt;
	} else {
		rs = ll_create(&m);
	}
	ll_add_rules(r, rs, handled);
	// The program this child was started to run may be executed wherever it lives, even where
	// a mount now hides its path (a binary under the host's /tmp): exe_fd was opened before
	// the mounts, so the rule binds to the file itself and grants nothing else.
	if (exe_fd >= 0) {
		struct sbx_ll_path_beneath pb = { .allowed_access = SBX_LL_EXEC_RIGHTS & handled,
						  .parent_fd = exe_fd };
		if (pb.allowed_access &&
		    syscall(SYS_landlock_add_rule, rs, SBX_LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0)
			fail(errno, "landlock rule", "executable");
	}
	// Still root here, so restrict_self needs no no_new_privs yet (CAP_SYS_ADMIN suffices).
	if (syscall(SYS_landlock_restrict_self, rs, 0) < 0)
		fail(errno, "landlock", "restrict self");
	close(rs);
}

// env_find returns the value of name in envp, or NULL.
static const char *env_find(char **envp, const char *name)
{
	size_t n = strlen(name);
	for (char **e = envp; *e; e++)
		if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
			return *e + n + 1;
	return NULL;
}

// direct_usable reports whether argv is a command to exec directly and envp one bash would
// pass on as it is (with PWD, SHLVL or _ already set, bash would check or adjust them).
static int direct_usable(char **argv, char **envp)
{
	if (!argv || !argv[0] || !argv[0][0])
		return 0;
	return !env_find(envp, "PWD") && !env_find(envp, "SHLVL") && !env_find(envp, "_");
}

// set_extras_cloexec sets or clears FD_CLOEXEC on the caller's ExtraFiles (fds 3, 4, ...);
// on a failure it puts back what it changed and returns -1.
static int set_extras_cloexec(uint32_t nextra, int on)
{
	for (uint32_t i = 0; i < nextra; i++) {
		if (fcntl(3 + (int)i, F_SETFD, on ? FD_CLOEXEC : 0) < 0) {
			while (i-- > 0)
				(void)fcntl(3 + (int)i, F_SETFD, on ? 0 : FD_CLOEXEC);
			return -1;
		}
	}
	return 0;
}

// A direct exec, prepared before the vfork: the vfork child shares this process's memory and
// may only exec or _exit, so every path it tries and the environment for each are made here.
struct direct_try {
	const char *path;
	char **envp; // the caller's, then PWD, SHLVL=0 and _=path, as bash adds them
};
struct direct_exec {
	char **argv;
	struct direct_try *tries;
	uint32_t ntries;
};

// add_try adds a path to try, "_=" followed by the directory (dlen bytes of dir; none: "./"
// when name has no slash) and name, with its environment: envp (n strings), pwd and SHLVL=0.
static int add_try(struct direct_exec *d, const char *dir, size_t dlen, const char *name,
		   char **envp, size_t n, char *pwd)
{
	size_t nlen = strlen(name);
	char *under = malloc(2 + dlen + 2 + nlen + 1);
	char **env = calloc(n + 4, sizeof(char *));
	if (!under || !env)
		return -1;
	char *p = under;
	memcpy(p, "_=", 2);
	p += 2;
	if (dir) {
		// An empty element is the current directory, as in bash.
		memcpy(p, dlen ? dir : ".", dlen ? dlen : 1);
		p += dlen ? dlen : 1;
		*p++ = '/';
	}
	memcpy(p, name, nlen + 1);
	memcpy(env, envp, n * sizeof(char *));
	env[n] = pwd;
	env[n + 1] = "SHLVL=0";
	env[n + 2] = under;
	d->tries[d->ntries++] = (struct direct_try){ .path = under + 2, .envp = env };
	return 0;
}

// prepare_direct prepares argv (a simple command of literal words, never a builtin: the parent
// made sure) to be exec'd the way `bash -c` execs such a command: argv[0] as typed, searched in
// PATH unless it holds a slash, with bash's additions to the environment (PWD, SHLVL=0 and _ =
// the path run). It returns 0, for the program (bash) to run the whole command instead, when
// bash might do something else (envp has PWD, SHLVL or _; there is no PATH to search) or there
// is nothing to try.
static int prepare_direct(struct direct_exec *d, char **argv, char **envp)
{
	if (!direct_usable(argv, envp))
		return 0;
	const char *name = argv[0];
	const char *path = strchr(name, '/') ? NULL : env_find(envp, "PATH");
	if (!strchr(name, '/') && !path)
		return 0; // bash's search without PATH is its own business
	size_t n = 0, elems = 1;
	while (envp[n])
		n++;
	for (const char *p = path; p && *p; p++)
		elems += *p == ':';
	char *pwd = malloc(PATH_MAX + 4);
	*d = (struct direct_exec){ .argv = argv, .tries = calloc(elems, sizeof(struct direct_try)) };
	if (!pwd || !d->tries)
		return 0;
	memcpy(pwd, "PWD=", 4);
	if (!getcwd(pwd + 4, PATH_MAX))
		return 0;
	size_t nlen = strlen(name);
	if (!path) {
		if (nlen < PATH_MAX && add_try(d, NULL, 0, name, envp, n, pwd) < 0)
			return 0;
		return d->ntries > 0;
	}
	// Each element in order, up to the first that cannot name a file.
	for (const char *p = path;; p++) {
		const char *end = strchrnul(p, ':');
		size_t dlen = (size_t)(end - p);
		if (dlen + 1 + nlen >= PATH_MAX)
			break;
		if (add_try(d, p, dlen, name, envp, n, pwd) < 0)
			return 0;
		if (!*end)
			break;
		p = end;
	}
	return d->ntries > 0;
}

// exec_direct (in run_child's vfork child) execs the prepared tries in order. It returns,
// having changed nothing the fallback depends on, whenever bash might do something else: the
// program is not found, or exists but cannot be exec'd (bash reports it, or runs a script
// without #! itself). The caller then execs bash, which does that.
static void exec_direct(const struct direct_exec *d, uint32_t nextra)
{
	// The caller's ExtraFiles are the fallback shell's (its exit report): close them on exec.
	if (set_extras_cloexec(nextra, 1) < 0)
		return;
	for (uint32_t i = 0; i < d->ntries; i++) {
		execve(d->tries[i].path, d->argv, d->tries[i].envp);
		// Not there: try the next directory. Anything else (a directory of that name, no
		// execute right, ENOEXEC, a missing #! interpreter) is bash's to handle.
		struct stat st;
		if ((errno != ENOENT && errno != ENOTDIR) || stat(d->tries[i].path, &st) == 0)
			break;
	}
	if (set_extras_cloexec(nextra, 0) < 0)
		fail(errno, "fds", "restore");
}

// close_all_but closes every fd but keep (none when keep < 0).
static void close_all_but(int keep)
{
	if (keep < 0) {
		if (syscall(SYS_close_range, 0, ~0U, 0) == 0)
			return;
	} else if ((keep == 0 || syscall(SYS_close_range, 0, keep - 1, 0) == 0) &&
		   syscall(SYS_close_range, keep + 1, ~0U, 0) == 0) {
		return;
	}
	for (int fd = 0; fd < SBX_FD_STATUS_MIN + 64; fd++)
		if (fd != keep)
			close(fd);
}

// report_end tells the daemon on the status socket that the call is over, so its result need
// not wait for this process's own exit (unmapping this binary, tearing down the namespaces:
// ~0.15 ms). Over means what this init's exit would have meant: every other process of the
// namespace is gone. As its PID 1 this init kills them all and reaps each one; orphans are
// re-parented to it, so "no child left" is "no process left". Without a report (a send that
// fails) the daemon waits for the exit, as it does for an init that failed or was killed.
static void report_end(int status_fd, int code)
{
	for (;;) {
		// kill(-1) walks every task of the host (2.6 µs with ~100 tasks, 56 µs with ~2100
		// measured here), so it is skipped when no child is left: a zombie is reaped first,
		// and ECHILD means this init is alone in its namespace.
		pid_t w = waitpid(-1, NULL, WNOHANG);
		if (w == 0) {
			(void)kill(-1, SIGKILL); // every process of the namespace but PID 1, ourselves
			w = waitpid(-1, NULL, 0);
		}
		if (w < 0 && errno == ECHILD)
			break;
		if (w < 0 && errno != EINTR)
			return;
	}
	uint32_t msg[2] = { SBX_STATUS_MAGIC, (uint32_t)code };
	ssize_t n;
	do
		n = send(status_fd, msg, sizeof(msg), MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
}

// run_child runs the program in a child of this process, which stays PID 1 of the call's PID
// namespace: the program, bash included, gets a process's ordinary signal semantics (PID 1
// ignores, from inside its namespace, every signal it has no handler for: `kill $$` or an
// os.kill of itself would do nothing), and orphans it leaves are reaped here instead of piling
// up as zombies against the pids limit. The child execs the simple command direct when it is
// given (exec_direct), else the program (bash with the whole command). This process then only
// reaps, and exits as bash would have: with the program's status, 128+N for a signal. Without
// a child (vfork failed) it returns and the caller execs the program as PID 1.
static void run_child(const struct direct_exec *direct, char *path, char **argv, char **envp,
		      uint32_t nextra, int status_fd)
{
	// vfork: no copy of this process's page tables; this process waits until the child has
	// exec'd (or exited). The child shares our memory, so it only makes system calls on what
	// was prepared before (prepare_direct), and execs or _exits (fail).
	pid_t pid = vfork();
	if (pid < 0)
		return;
	if (pid == 0) {
		if (direct)
			exec_direct(direct, nextra);
		execve(path, argv, envp);
		fail(errno, "execve", path); // _exit: reported on the error pipe, this copy of it
	}
	// The child holds the call's fds now (and the error pipe until its exec): hold nothing but
	// a pooled init's socket, so output and reports end when the child's do.
	close_all_but(status_fd);
	int status;
	for (;;) {
		pid_t w = waitpid(-1, &status, 0);
		if (w == pid)
			break;
		if (w < 0 && errno != EINTR)
			_exit(SBX_EXIT_INIT_FAILED); // cannot happen: the child is ours until reaped
	}
	int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	if (status_fd >= 0)
		report_end(status_fd, code);
	_exit(code);
}

static void drop_bounding_set(void)
{
	// Needs CAP_SETPCAP, which setuid below takes away: so it sits before the uid change.
	for (int cap = 0; cap <= 63; cap++) {
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0) {
			if (errno == EINVAL)
				break; // past the kernel's last capability
			fail(errno, "capabilities", "bounding set");
		}
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		fail(errno, "capabilities", "ambient");
}

static void move_user_fds(uint32_t nextra)
{
	// The caller's ExtraFiles arrive after our control fds; they must be 3, 4, ... for the
	// program. The error pipe moves out of the way first, then everything else is marked
	// CLOEXEC so execve closes what the child was not handed.
	int e = fcntl(err_fd, F_DUPFD_CLOEXEC, SBX_FD_FIRST_EXTRA + nextra + 16);
	if (e < 0)
		fail(errno, "fds", "move error pipe");
	err_fd = e;
	for (uint32_t i = 0; i < nextra; i++) {
		if (dup2(SBX_FD_FIRST_EXTRA + i, 3 + i) < 0)
			fail(errno, "fds", "dup2");
	}
	if (syscall(SYS_close_range, 3 + nextra, ~0U, SBX_CLOSE_RANGE_CLOEXEC) < 0)
		fail(errno, "fds", "close_range");
}

// receive_call (pooled inits only) blocks until the daemon hands over a call, then moves the
// call's fds into the slots a per-call init is started with. Until the message arrives this
// process holds nothing of any call and has run nothing but this constructor. It returns the
// spec when it came inline (*len set), else NULL: the spec is then in the memfd on fd 3. The
// socket it came on is kept at *status_fd (-1 if it could not be).
static char *receive_call(size_t *len, int *status_fd)
{
	int fds[SBX_PASSED_FIXED + SBX_MAX_EXTRA];
	union {
		char buf[CMSG_SPACE(sizeof(fds))];
		struct cmsghdr align;
	} ctl;
	uint32_t n = 0;
	char *spec = malloc(SBX_INLINE_SPEC_MAX);
	if (!spec)
		fail(ENOMEM, "receive", "malloc");
	struct iovec iov[2] = { { .iov_base = &n, .iov_len = sizeof(n) },
				{ .iov_base = spec, .iov_len = SBX_INLINE_SPEC_MAX } };
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = 2, .msg_control = ctl.buf,
			      .msg_controllen = sizeof(ctl.buf) };
	ssize_t got;
	do
		got = recvmsg(SBX_FD_POOL_SOCK, &msg, MSG_CMSG_CLOEXEC);
	while (got < 0 && errno == EINTR);
	if (got == 0)
		fail(ECHILD, "receive", "daemon gone"); // the pool was closed: never a call here
	if (got < 0)
		fail(errno, "receive", "recvmsg");
	// The payload is the fd count, then the spec when inline; anything cut short (MSG_TRUNC:
	// bytes dropped, MSG_CTRUNC: fds dropped) is refused.
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	if (got < (ssize_t)sizeof(n) || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || n < SBX_PASSED_FIXED ||
	    n > SBX_PASSED_FIXED + SBX_MAX_EXTRA || !c || c->cmsg_level != SOL_SOCKET ||
	    c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(n * sizeof(int)))
		fail(EINVAL, "receive", "bad message");
	memcpy(fds, CMSG_DATA(c), n * sizeof(int));
	// The socket stays, out of the way and closed on exec, to report the call's end
	// (run_child); the program exec'd never holds it. Where it cannot (an fd limit under
	// SBX_FD_STATUS_MIN), the call's end is this process's exit, as for a per-call init.
	*status_fd = fcntl(SBX_FD_POOL_SOCK, F_DUPFD_CLOEXEC, SBX_FD_STATUS_MIN);
	// The kernel gave the fds the lowest free numbers, which may be slots filled below: lift
	// them all above every slot first, so no dup2 overwrites an fd not yet placed.
	for (uint32_t i = 0; i < n; i++) {
		int h = fcntl(fds[i], F_DUPFD_CLOEXEC, SBX_FD_KEEP);
		if (h < 0)
			fail(errno, "receive", "lift fd");
		close(fds[i]);
		fds[i] = h;
	}
	// dup2 clears CLOEXEC on the slot, as fork/exec leaves a per-call init's fds. The spec
	// memfd replaces the socket on fd 3.
	static const int fixed[SBX_PASSED_FIXED] = { SBX_FD_SPEC, 0, 1, 2, SBX_FD_NETNS };
	for (uint32_t i = 0; i < n; i++) {
		int slot = i < SBX_PASSED_FIXED ? fixed[i] : SBX_FD_FIRST_EXTRA + (int)(i - SBX_PASSED_FIXED);
		if (dup2(fds[i], slot) < 0)
			fail(errno, "receive", "dup2");
		close(fds[i]);
	}
	if (got == (ssize_t)sizeof(n)) {
		free(spec);
		return NULL;
	}
	*len = (size_t)got - sizeof(n);
	return spec;
}

// load_seccomp loads every filter of the spec's seccomp record, in order. Each one stacks on
// those before: a syscall runs only if every filter allows it.
static void load_seccomp(struct rd *r)
{
	uint32_t nprog = rd_tag(r, SBX_TAG_SECCOMP);
	for (uint32_t i = 0; i < nprog; i++) {
		uint32_t nbpf = rd_u32(r);
		if (nbpf == 0 || nbpf % sizeof(struct sock_filter) != 0 || (size_t)(r->end - r->p) < nbpf)
			fail(EINVAL, "seccomp", "bad program");
		struct sock_fprog prog = { .len = (unsigned short)(nbpf / sizeof(struct sock_filter)),
					   .filter = (struct sock_filter *)r->p };
		r->p += nbpf;
		if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
			fail(errno, "seccomp", "load");
	}
}

// init_state is what an init's steps leave for later ones. A pooled init's prelude fills it
// ahead of its call; a per-call init starts with it empty.
struct init_state {
	struct mount_state mnt;
	int prebuilt_rs; // the ruleset prebuilt from the prelude's landlock hint, or -1
	struct netns_state netns;
	int bset_dropped; // the prelude dropped the capability bounding set
	int status_fd;    // a pooled init's socket, kept to report the call's end, or -1
};

// The call's records before its mounts: what to run, as whom, with which fds.
struct call {
	char *path, *dir; // the program; the directory it runs in ("": stay)
	char **argv, **envp;
	char **direct; // a simple command to exec as bash would (SBX_TAG_DIRECT), or empty
	uint32_t uid, gid, ngroups;
	gid_t *groups;
	int netns_fd;    // the session's network namespace (SBX_FD_NETNS), or -1: the host's
	uint32_t nextra; // the caller's ExtraFiles, on SBX_FD_FIRST_EXTRA and up
};

static void rd_call(struct rd *r, struct call *c)
{
	rd_tag(r, SBX_TAG_EXEC);
	c->path = rd_str(r);
	c->dir = rd_str(r);
	c->argv = rd_strv(r, SBX_TAG_ARGV);
	c->envp = rd_strv(r, SBX_TAG_ENV);
	c->direct = rd_strv(r, SBX_TAG_DIRECT);
	rd_tag(r, SBX_TAG_CRED);
	c->uid = rd_u32(r);
	c->gid = rd_u32(r);
	c->ngroups = rd_tag(r, SBX_TAG_GROUPS);
	c->groups = calloc(c->ngroups + 1, sizeof(gid_t));
	if (!c->groups)
		fail(ENOMEM, "spec", "calloc");
	for (uint32_t i = 0; i < c->ngroups; i++)
		c->groups[i] = rd_u32(r);
	rd_tag(r, SBX_TAG_FDS);
	c->netns_fd = (int32_t)rd_u32(r);
	c->nextra = rd_u32(r);
}

// rd_open starts reading a blob (the spec, the prelude) after checking it is one of ours.
static struct rd rd_open(char *buf, size_t len, const char *what)
{
	struct rd r = { buf, buf + len };
	if (rd_u32(&r) != SBX_MAGIC || rd_u32(&r) != SBX_VERSION)
		fail(EINVAL, what, "bad magic or version");
	return r;
}

// set_credentials gives up root for the caller's uid, gid and groups.
static void set_credentials(const struct call *c)
{
	if (setgroups(c->ngroups, c->groups) < 0)
		fail(errno, "credentials", "setgroups");
	if (setresgid(c->gid, c->gid, c->gid) < 0)
		fail(errno, "credentials", "setgid");
	if (setresuid(c->uid, c->uid, c->uid) < 0)
		fail(errno, "credentials", "setuid");
	// Belt and braces: with the uid changed, root must be out of reach for good.
	if ((c->uid != 0 && setresuid(0, 0, 0) == 0) || (c->uid != 0 && c->gid != 0 && setegid(0) == 0))
		fail(EPERM, "credentials", "could regain root");
}

// wait_go_ahead blocks until the parent has put this init in its cgroup (one byte on
// SBX_FD_SYNC); EOF means the parent died.
static void wait_go_ahead(void)
{
	char go;
	ssize_t got;
	do
		got = read(SBX_FD_SYNC, &go, 1);
	while (got < 0 && errno == EINTR);
	if (got != 1)
		fail(ECHILD, "sync", "parent gone");
}

// prelude (pooled inits only) makes the call-independent part of the child's filesystem
// (spec.go: preludeMounts), drops the capability bounding set and loads the early seccomp
// filters while the init waits for a call, then says so with one byte on its socket. Dropping
// the bounding set only limits what an execve may grant later: the init keeps the capabilities
// it still needs for the call's mounts, namespaces and credentials. The early filters let the
// setup syscalls through (seccomp.go: setupSyscalls) until the last filter, loaded just before
// execve, refuses them. Nothing here depends on, or holds anything of, a call. What it keeps
// for the call (st) sits above every slot receive_call fills.
static void prelude(struct init_state *st)
{
	size_t len;
	char *buf = read_spec(SBX_FD_PRELUDE, &len);
	close(SBX_FD_PRELUDE); // the call's network namespace (or /dev/null) takes this slot
	struct rd r = rd_open(buf, len, "prelude");
	do_mounts(&r, &st->mnt);
	st->prebuilt_rs = prebuild_landlock(&r);
	prejoin_netns(&r, &st->netns);
	drop_bounding_set();
	st->bset_dropped = 1;
	// Still root with CAP_SYS_ADMIN: loading a filter needs no no_new_privs yet.
	load_seccomp(&r);
	if (r.p != r.end)
		fail(EINVAL, "prelude", "trailing data");
	free(buf); // the filters were copied into the kernel
	char ready = 1;
	ssize_t w;
	do
		w = send(SBX_FD_POOL_SOCK, &ready, 1, MSG_NOSIGNAL);
	while (w < 0 && errno == EINTR);
	if (w != 1)
		fail(errno, "prelude", "ready");
	trace("prelude");
}

static void sbx_run(int pooled)
{
	struct init_state st = { .mnt = { .held = -1, .empty_fs = -1 }, .prebuilt_rs = -1,
				 .netns = { .host = -1 }, .status_fd = -1 };
	size_t len;
	if (fcntl(SBX_FD_ERR, F_SETFD, FD_CLOEXEC) < 0)
		_exit(SBX_EXIT_INIT_FAILED); // no error pipe: nothing to report on
	char *buf = NULL;
	if (pooled) {
		prelude(&st);
		buf = receive_call(&len, &st.status_fd);
	}
	if (!buf)
		buf = read_spec(SBX_FD_SPEC, &len);
	struct rd r = rd_open(buf, len, "spec");
	struct call c;
	rd_call(&r, &c);

	trace("spec read");
	// 0. Join the session's loopback-only network namespace before anything else: setns needs
	//    CAP_SYS_ADMIN, and the namespace was made once per session because creating one per
	//    call costs more than the rest of this setup.
	join_netns(&st.netns, c.netns_fd);

	trace("setns");
	// The executable as the host sees it, before the mounts may cover its path; landlock (3)
	// grants exactly this file execute. A failure here shows up as execve's own error.
	int exe_fd = open(c.path, O_PATH | O_CLOEXEC);

	// 1. Mounts first: they need CAP_SYS_ADMIN, which step 4 gives up, and landlock (3) must see
	//    the final tree (its rules bind to the inodes of the new /tmp and /dev).
	do_mounts(&r, &st.mnt);
	drop_held(&st.mnt); // the host's /tmp and the empty fs: only the call's mounts needed them

	trace("mounts");
	// 2. rlimits while still root, so the hard limits can be lowered and never raised again.
	do_rlimits(&r);

	// 3. landlock while still root (restrict_self without no_new_privs needs CAP_SYS_ADMIN) and
	//    after the mounts (its rules open the mounted paths).
	do_landlock(&r, exe_fd, st.prebuilt_rs);
	st.prebuilt_rs = -1;
	if (exe_fd >= 0)
		close(exe_fd);

	trace("landlock");
	// 4. Credentials: bounding set (needs CAP_SETPCAP; a pooled init's prelude did it), then
	//    groups and gid while we may still change them, uid last because it takes away the
	//    right to change the others.
	if (!st.bset_dropped)
		drop_bounding_set();
	set_credentials(&c);
	// The uid change cleared the parent-death signal the parent set at fork: arm it again.
	// The go-ahead read below then catches a parent that died before this point (EOF).
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		fail(errno, "pdeathsig", "");
	// chdir as the caller, not as root: root could enter a directory the caller cannot search.
	if (c.dir[0] && chdir(c.dir) < 0)
		fail(errno, "chdir", c.dir);

	trace("creds");
	// Wait for the go-ahead: on cgroup v1 the parent writes our pid into each controller while
	// we did the steps above; no user code runs before we are inside the cgroup. A pooled init
	// was inside its cgroup before it was ready: its call is its go-ahead.
	if (!pooled)
		wait_go_ahead();

	trace("sync");
	// 5. no_new_privs: setuid binaries, file capabilities and LSM transitions can no longer
	//    raise privileges; also what lets an unprivileged process load seccomp in step 7.
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		fail(errno, "no_new_privs", "");

	trace("nnp");
	// 6. fds: only stdio, the caller's ExtraFiles and (until exec) the error pipe survive.
	move_user_fds(c.nextra);

	trace("fds");
	// 7. seccomp last: the setup above used calls the filters refuse (mount, setns, ...).
	//    A pooled init's spec holds only the last filter; its prelude loaded the others.
	load_seccomp(&r);

	trace("seccomp");
	// 8. exec, in a child (run_child). On success the CLOEXEC error pipe closes and the parent
	//    reads EOF. A simple command is exec'd as bash would exec it, without bash; when that
	//    cannot be done exactly, the program (bash with the whole command) runs and does it.
	struct direct_exec d;
	run_child(prepare_direct(&d, c.direct, c.envp) ? &d : NULL, c.path, c.argv, c.envp, c.nextra,
		  st.status_fd);
	execve(c.path, c.argv, c.envp);
	fail(errno, "execve", c.path);
}

// sbx_init_mode returns 0 unless argv[1] is the hidden init argument; then 2 for a pooled init
// (argv[2] == SBX_POOL_ARG), else 1. It reads /proc/self/cmdline rather than trusting
// constructor arguments so it works with any libc.
static int sbx_init_mode(void)
{
	char buf[256];
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0; // the kernel NUL-terminates each argument; this ends a cut-off one
	size_t a0 = strnlen(buf, n);
	if ((ssize_t)a0 + 1 >= n)
		return 0;
	char *a1 = buf + a0 + 1;
	if (strcmp(a1, SBX_INIT_ARG) != 0)
		return 0;
	char *a2 = a1 + strlen(a1) + 1;
	return a2 < buf + n && strcmp(a2, SBX_POOL_ARG) == 0 ? 2 : 1;
}

__attribute__((constructor)) static void sbx_init_constructor(void)
{
	int mode = sbx_init_mode();
	if (mode == 0)
		return; // the daemon, a test binary, anything else: do nothing
	trace("constructor");
	sbx_run(mode == 2);
}
