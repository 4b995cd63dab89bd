// nsinit_mount.c: the mount plan, the child's first step (nsinit.c says why it sits there).
//
// WARNING: runs as root on paths a user controls. After any change rerun, as root:
// go test -run 'TestEscape|TestProtected|TestPool' ./sandbox/

// nsinit_child.h first: it defines _GNU_SOURCE, which the system headers read.
#include "nsinit_child.h"

#include <stdio.h>
#include <sys/mount.h>

#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
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

struct sbx_mount_attr {
	uint64_t attr_set, attr_clr, propagation, userns_fd;
};

struct sbx_open_how {
	uint64_t flags, mode, resolve;
};

// close_keep_errno closes fd without losing the errno of the failure being reported.
static void close_keep_errno(int fd)
{
	int e = errno;
	close(fd);
	errno = e;
}

// hold_dir keeps the directory at path (O_PATH) in ms->held.
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

// sbx_drop_held closes what only the mount plan needed, once the call's mounts are done.
void sbx_drop_held(struct mount_state *ms)
{
	if (ms->held >= 0)
		close(ms->held);
	ms->held = -1;
	if (ms->empty_fs >= 0)
		close(ms->empty_fs);
	ms->empty_fs = -1;
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
			sbx_fail(EBADF, "mount", "no held directory");
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
		sbx_fail(EBADF, "mount", m->path);
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
		// Keep the host's view of the path (the /tmp the private one covers) for the
		// clones.
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
	sbx_fail(EINVAL, "mount", "unknown op"); // sbx_rd_mount_op refused it already
}

// sbx_do_mounts runs the parent's mount plan. It is a plan rather than policy in C so the policy
// (which paths, which flags) lives in reviewed, tested Go and this loop stays trivial.
//
// WARNING: this runs as root on paths a user controls (the session's directories, the deny
// paths). The plan resolved them as the caller; an op marked SBX_OPT_NOFOLLOW reaches its
// path without following any symlink, so a component swapped for a symlink since (by another
// process of the user) fails the call instead of redirecting a writable mount.
void sbx_do_mounts(struct rd *r, struct mount_state *ms)
{
	uint32_t n = sbx_rd_tag(r, SBX_TAG_MOUNTS);
	// The planned modes are exact (0666 device nodes, 1777 /dev/shm); umask would mask them.
	mode_t old_umask = umask(0);
	int trees[SBX_MAX_TREES]; // CLONE_TREE's copies, until MOVE_TREE puts them in place
	for (int t = 0; t < SBX_MAX_TREES; t++)
		trees[t] = -1;
	for (uint32_t i = 0; i < n; i++) {
		struct mount_op m;
		sbx_rd_mount_op(r, &m);
		int nofollow = m.opt & SBX_OPT_NOFOLLOW, rc;
		if (!nofollow || m.op == SBX_OP_CLONE_TREE) {
			// A clone resolves its source itself (from the held directory, maybe).
			rc = run_op(&m, ms, trees, -1, m.path);
		} else {
			int pfd = open_nofollow(AT_FDCWD, m.path);
			if (pfd < 0) {
				rc = -1; // and a copy that was to go there is dropped
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
			sbx_fail(ELOOP, "mount (a symlink replaced a planned path)", m.path);
		// Optional ops (masking paths this kernel may not have) tolerate a missing target.
		if (!((m.opt & SBX_OPT_OPTIONAL) && (errno == ENOENT || errno == ENOTDIR)))
			sbx_fail(errno, "mount", m.path);
	}
	umask(old_umask);
}
