// nsinit_child.h: what the files of the confined child's setup share (nsinit.c lists them).
// Only they include it; the contract with the parent (Go) is nsinit.h.
#ifndef SANDBOXD_NSINIT_CHILD_H
#define SANDBOXD_NSINIT_CHILD_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include "nsinit.h"

#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#define SBX_CLOSE_RANGE_CLOEXEC (1U << 2)

// What an init keeps from before its call's fds arrive sits above every slot sbx_receive_call
// fills (0-6, the call's ExtraFiles from SBX_FD_FIRST_EXTRA), so it survives them landing.
#define SBX_FD_KEEP (SBX_FD_FIRST_EXTRA + SBX_MAX_EXTRA)
#define SBX_FD_KEEP_RULESET (SBX_FD_KEEP + 32)
#define SBX_FD_KEEP_HELD (SBX_FD_KEEP + 33)
#define SBX_FD_KEEP_HOST_NETNS (SBX_FD_KEEP + 34)
#define SBX_FD_KEEP_EMPTY_FS (SBX_FD_KEEP + 35)

// SBX_TRACE (CGO_CFLAGS=-DSBX_TRACE, benchmarking only) prints a timestamp per step to the
// child's stderr; release builds compile it out, keeping the child silent.
#ifdef SBX_TRACE
#include <stdio.h>
#include <time.h>
static inline void trace(const char *what)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	dprintf(2, "sbxtrace %ld.%06ld %s\n", (long)ts.tv_sec, ts.tv_nsec / 1000, what);
}
#else
#define trace(x) do { } while (0)
#endif

// nsinit.c: sbx_fail reports {errno, "step: detail"} on the error pipe and exits.
void sbx_fail(int e, const char *step, const char *detail) __attribute__((noreturn));

// nsinit_spec.c: reading the spec and the prelude. A cursor over a blob:
struct rd {
	const char *p, *end;
};

uint32_t sbx_rd_u32(struct rd *r);
uint64_t sbx_rd_u64(struct rd *r);
char *sbx_rd_str(struct rd *r);
uint32_t sbx_rd_tag(struct rd *r, uint32_t want);
char *sbx_read_spec(int fd, size_t *len);
struct rd sbx_rd_open(char *buf, size_t len, const char *what);

// The call's records before its mounts: what to run, as whom, with which fds.
struct call {
	char *path, *dir; // the program; the directory it runs in ("": stay)
	char **argv, **envp;
	char **direct; // a simple command to exec as bash would (SBX_TAG_DIRECT), or empty
	uint32_t uid, gid, ngroups;
	uint32_t rgid; // the real gid: gid, or another for a program that must be undumpable
	mode_t umask; // the program's file mode creation mask
	gid_t *groups;
	int netns_fd;    // the session's network namespace (SBX_FD_NETNS), or -1: the host's
	uint32_t nextra; // the caller's ExtraFiles, on SBX_FD_FIRST_EXTRA and up
};

void sbx_rd_call(struct rd *r, struct call *c);

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

void sbx_rd_mount_op(struct rd *r, struct mount_op *m);

// nsinit_mount.c: the mount plan. What one plan leaves for a later one: a pooled init's prelude
// makes both for its call's plan, which drops them when done (sbx_drop_held).
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

void sbx_do_mounts(struct rd *r, struct mount_state *ms);
void sbx_drop_held(struct mount_state *ms);

// nsinit_landlock.c: the ruleset. sbx_prebuild_landlock returns the prelude's, or -1.
int sbx_prebuild_landlock(struct rd *r);
void sbx_do_landlock(struct rd *r, int exe_fd, int prebuilt);

// nsinit_cred.c: the network namespace, rlimits, capabilities, credentials and seccomp.
// A pooled init's prelude may sit in the latest session's network namespace (joined, its
// identity) while holding the one it was started in (host, the daemon's): a call of that
// session stays, another joins its own, a call with the host's network goes back.
struct netns_state {
	int host; // -1: the prelude joined none, the init is where it was started
	struct stat joined;
};

void sbx_prejoin_netns(struct rd *r, struct netns_state *ns);
void sbx_join_netns(struct netns_state *ns, int fd);
void sbx_do_rlimits(struct rd *r);
void sbx_drop_bounding_set(void);
void sbx_set_credentials(const struct call *c);
void sbx_load_seccomp(struct rd *r);

// nsinit_exec.c: a pooled init's call, the direct exec and the program's run.
char *sbx_receive_call(size_t *len, int *status_fd);

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

int sbx_prepare_direct(struct direct_exec *d, char **argv, char **envp);
void sbx_run_child(const struct direct_exec *direct, char *path, char **argv, char **envp,
		   uint32_t nextra, int status_fd);

#endif
