// nsinit.c: the confined child's setup, run as a constructor before the Go runtime starts. This
// file is its entry and the order of its steps; each step lives in a file of its own:
//   nsinit_spec.c      reading the spec and the prelude
//   nsinit_mount.c     the mount plan
//   nsinit_landlock.c  the landlock ruleset
//   nsinit_cred.c      network namespace, rlimits, capabilities, credentials, seccomp
//   nsinit_exec.c      a pooled init's call, the direct exec, the program's run and end
// nsinit.h is the contract with the parent (Go); nsinit_child.h what these files share.
//
// WARNING: every line here runs as root in the child between fork and exec of user code.
// After any change rerun, as root: go test -run 'TestEscape|TestInit|TestSeccomp' ./sandbox/
//
// The parent (cold.go) re-executes /proc/self/exe with argv[1] == SBX_INIT_ARG and these fds:
//   3  the spec: one blob, read to EOF (format below)
//   4  the error pipe: {u32 errno, u32 len, msg}; CLOEXEC here, so EOF means execve succeeded
//   5  the go-ahead pipe: one byte once the parent has the child in its cgroup; EOF = parent died
//   6  the session's network namespace, or closed when the call keeps the host's network
//   7+ the caller's ExtraFiles, moved down to 3+ just before exec
// A pooled init (argv[2] == SBX_POOL_ARG, pool.go) is started before its call exists, already
// inside its own cgroup, with 4 and 5 as above, a unix socket on 3 (SBX_FD_POOL_SOCK), the
// prelude on 6 (encode.go: encodePrelude: the call-independent mounts, hints, the early seccomp
// filters) and, when the prelude is to join it, a session's network namespace on 7. It runs
// the prelude, sends one byte on its socket and blocks there; the one message that arrives
// carries the call's fds (nsinit.h), which sbx_receive_call puts where a per-call init has
// them. From there on both run the same steps.
// Spec blob: u32 magic, u32 version, then records {u32 tag, u32 count, fields} in the order
// nsinit.h lists; strings carry no NUL (the parent rejects them) and are terminated here.
// All integers are native-endian: writer and reader are the same binary on the same machine.
//
// The child does not log, touches no network and allocates only the spec buffer, the arrays
// pointing into it and the direct exec's paths and environments.

// nsinit_child.h first: it defines _GNU_SOURCE, which the system headers read.
#include "nsinit_child.h"

#include <limits.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>

// err_fd is where sbx_fail reports: the error pipe, on SBX_FD_ERR until move_user_fds lifts it
// out of the ExtraFiles' way. The one mutable static: every step may fail, through one place.
static int err_fd = SBX_FD_ERR;

// msg_add appends s to buf at *n, stopping at cap.
static void msg_add(char *buf, size_t *n, size_t cap, const char *s)
{
	while (*s && *n < cap)
		buf[(*n)++] = *s++;
}

// sbx_fail reports {errno, "step: detail"} to the parent and exits. Nothing after the failing
// step ran, so the user's program never runs half-confined. It formats by hand, without stdio:
// the vfork child of sbx_run_child fails through here too, and may only write and _exit.
void sbx_fail(int e, const char *step, const char *detail)
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

// init_state is what an init's steps leave for later ones. A pooled init's prelude fills it
// ahead of its call; a per-call init starts with it empty.
struct init_state {
	struct mount_state mnt;
	int prebuilt_rs; // the ruleset prebuilt from the prelude's landlock hint, or -1
	struct netns_state netns;
	int bset_dropped; // the prelude dropped the capability bounding set
	int status_fd;    // a pooled init's socket, kept to report the call's end, or -1
};

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
		sbx_fail(ECHILD, "sync", "parent gone");
}

// move_user_fds leaves the program stdio and the caller's ExtraFiles, as 3, 4, ...
static void move_user_fds(uint32_t nextra)
{
	// The caller's ExtraFiles arrive after our control fds; they must be 3, 4, ... for the
	// program. The error pipe moves out of the way first, then everything else is marked
	// CLOEXEC so execve closes what the child was not handed.
	int e = fcntl(err_fd, F_DUPFD_CLOEXEC, SBX_FD_FIRST_EXTRA + nextra + 16);
	if (e < 0)
		sbx_fail(errno, "fds", "move error pipe");
	err_fd = e;
	for (uint32_t i = 0; i < nextra; i++) {
		if (dup2(SBX_FD_FIRST_EXTRA + i, 3 + i) < 0)
			sbx_fail(errno, "fds", "dup2");
	}
	if (syscall(SYS_close_range, 3 + nextra, ~0U, SBX_CLOSE_RANGE_CLOEXEC) < 0)
		sbx_fail(errno, "fds", "close_range");
}

// prelude (pooled inits only) makes the call-independent part of the child's filesystem
// (mounts.go: preludeMounts), drops the capability bounding set and loads the early seccomp
// filters while the init waits for a call, then says so with one byte on its socket. Dropping
// the bounding set only limits what an execve may grant later: the init keeps the capabilities
// it still needs for the call's mounts, namespaces and credentials. The early filters let the
// setup syscalls through (seccomp.go: setupSyscalls) until the last filter, loaded just before
// execve, refuses them. Nothing here depends on, or holds anything of, a call. What it keeps
// for the call (st) sits above every slot sbx_receive_call fills.
static void prelude(struct init_state *st)
{
	size_t len;
	char *buf = sbx_read_spec(SBX_FD_PRELUDE, &len);
	close(SBX_FD_PRELUDE); // the call's network namespace (or /dev/null) takes this slot
	struct rd r = sbx_rd_open(buf, len, "prelude");
	sbx_do_mounts(&r, &st->mnt);
	st->prebuilt_rs = sbx_prebuild_landlock(&r);
	sbx_prejoin_netns(&r, &st->netns);
	sbx_drop_bounding_set();
	st->bset_dropped = 1;
	// Still root with CAP_SYS_ADMIN: loading a filter needs no no_new_privs yet.
	sbx_load_seccomp(&r);
	if (r.p != r.end)
		sbx_fail(EINVAL, "prelude", "trailing data");
	free(buf); // the filters were copied into the kernel
	char ready = 1;
	ssize_t w;
	do
		w = send(SBX_FD_POOL_SOCK, &ready, 1, MSG_NOSIGNAL);
	while (w < 0 && errno == EINTR);
	if (w != 1)
		sbx_fail(errno, "prelude", "ready");
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
		buf = sbx_receive_call(&len, &st.status_fd);
	}
	if (!buf)
		buf = sbx_read_spec(SBX_FD_SPEC, &len);
	struct rd r = sbx_rd_open(buf, len, "spec");
	struct call c;
	sbx_rd_call(&r, &c);

	trace("spec read");
	// 0. Join the session's loopback-only network namespace before anything else: setns needs
	//    CAP_SYS_ADMIN, and the namespace was made once per session because creating one per
	//    call costs more than the rest of this setup.
	sbx_join_netns(&st.netns, c.netns_fd);

	trace("setns");
	// The executable as the host sees it, before the mounts may cover its path; landlock (3)
	// grants exactly this file execute. A failure here shows up as execve's own error.
	int exe_fd = open(c.path, O_PATH | O_CLOEXEC);

	// 1. Mounts first: they need CAP_SYS_ADMIN, which step 4 gives up, and landlock (3) must
	//    see the final tree (its rules bind to the inodes of the new /tmp and /dev). The
	//    host's /tmp and the empty fs are dropped after: only the call's mounts needed them.
	sbx_do_mounts(&r, &st.mnt);
	sbx_drop_held(&st.mnt);

	trace("mounts");
	// 2. rlimits while still root, so the hard limits can be lowered and never raised again.
	sbx_do_rlimits(&r);

	// 3. landlock while still root (restrict_self without no_new_privs needs CAP_SYS_ADMIN) and
	//    after the mounts (its rules open the mounted paths).
	sbx_do_landlock(&r, exe_fd, st.prebuilt_rs);
	st.prebuilt_rs = -1;
	if (exe_fd >= 0)
		close(exe_fd);

	trace("landlock");
	// 4. Credentials: bounding set (needs CAP_SETPCAP; a pooled init's prelude did it), then
	//    groups and gid while we may still change them, uid last because it takes away the
	//    right to change the others.
	if (!st.bset_dropped)
		sbx_drop_bounding_set();
	sbx_set_credentials(&c);
	// The uid change cleared the parent-death signal the parent set at fork: arm it again.
	// The go-ahead read below then catches a parent that died before this point (EOF).
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		sbx_fail(errno, "pdeathsig", "");
	// chdir as the caller, not as root: root could enter a directory the caller cannot search.
	if (c.dir[0] && chdir(c.dir) < 0)
		sbx_fail(errno, "chdir", c.dir);
	// c.dir is the plan's resolution of the call's dir, with no link on its way: a link made
	// there since led the chdir elsewhere, and the call would run outside the dir it was
	// decided for.
	if (c.dir[0]) {
		char here[PATH_MAX];
		if (!getcwd(here, sizeof here) || strcmp(here, c.dir) != 0)
			sbx_fail(ELOOP, "chdir moved", c.dir);
	}

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
		sbx_fail(errno, "no_new_privs", "");

	trace("nnp");
	// 6. fds: only stdio, the caller's ExtraFiles and (until exec) the error pipe survive.
	move_user_fds(c.nextra);

	trace("fds");
	// 7. seccomp last: the setup above used calls the filters refuse (mount, setns, ...).
	//    A pooled init's spec holds only the last filter; its prelude loaded the others.
	sbx_load_seccomp(&r);

	trace("seccomp");
	// 8. exec, in a child (sbx_run_child). On success the CLOEXEC error pipe closes and the
	//    parent reads EOF. A simple command is exec'd as bash would exec it, without bash;
	//    when that cannot be done exactly, the program (bash with the whole command) runs and
	//    does it. The direct exec is prepared here: the vfork child may only exec or _exit.
	umask(c.umask); // the caller's, not the daemon's
	struct direct_exec d;
	int direct = sbx_prepare_direct(&d, c.direct, c.envp);
	sbx_run_child(direct ? &d : NULL, c.path, c.argv, c.envp, c.nextra, st.status_fd);
	execve(c.path, c.argv, c.envp);
	sbx_fail(errno, "execve", c.path);
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
