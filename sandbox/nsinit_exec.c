// nsinit_exec.c: how the program runs: a pooled init's call arriving (sbx_receive_call), the
// direct exec of a simple command, and the program run in a child whose end the init reports.
//
// WARNING: runs between the setup and the program. After any change rerun, as root:
// go test -run 'TestDirect|TestPool|TestEscape' ./sandbox/

// nsinit_child.h first: it defines _GNU_SOURCE, which the system headers read.
#include "nsinit_child.h"

#include <limits.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

// sbx_receive_call (pooled inits only) blocks until the daemon hands over a call, then moves
// the call's fds into the slots a per-call init is started with. Until the message arrives
// this process holds nothing of any call and has run nothing but its prelude. It returns the
// spec when it came inline (*len set), else NULL: the spec is then in the memfd on fd 3. The
// socket it came on is kept at *status_fd (-1 if it could not be).
char *sbx_receive_call(size_t *len, int *status_fd)
{
	int fds[SBX_PASSED_FIXED + SBX_MAX_EXTRA];
	union {
		char buf[CMSG_SPACE(sizeof(fds))];
		struct cmsghdr align;
	} ctl;
	uint32_t n = 0;
	char *spec = malloc(SBX_INLINE_SPEC_MAX);
	if (!spec)
		sbx_fail(ENOMEM, "receive", "malloc");
	struct iovec iov[2] = { { .iov_base = &n, .iov_len = sizeof(n) },
				{ .iov_base = spec, .iov_len = SBX_INLINE_SPEC_MAX } };
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = 2, .msg_control = ctl.buf,
			      .msg_controllen = sizeof(ctl.buf) };
	ssize_t got;
	do
		got = recvmsg(SBX_FD_POOL_SOCK, &msg, MSG_CMSG_CLOEXEC);
	while (got < 0 && errno == EINTR);
	if (got == 0)
		sbx_fail(ECHILD, "receive", "daemon gone"); // the pool closed: no call comes
	if (got < 0)
		sbx_fail(errno, "receive", "recvmsg");
	// The payload is the fd count, then the spec when inline; anything cut short (MSG_TRUNC:
	// bytes dropped, MSG_CTRUNC: fds dropped) is refused.
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	if (got < (ssize_t)sizeof(n) || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || n < SBX_PASSED_FIXED ||
	    n > SBX_PASSED_FIXED + SBX_MAX_EXTRA || !c || c->cmsg_level != SOL_SOCKET ||
	    c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(n * sizeof(int)))
		sbx_fail(EINVAL, "receive", "bad message");
	memcpy(fds, CMSG_DATA(c), n * sizeof(int));
	// The socket stays, out of the way and closed on exec, to report the call's end
	// (sbx_run_child); the program exec'd never holds it. Where it cannot (an fd limit under
	// SBX_FD_STATUS_MIN), the call's end is this process's exit, as for a per-call init.
	*status_fd = fcntl(SBX_FD_POOL_SOCK, F_DUPFD_CLOEXEC, SBX_FD_STATUS_MIN);
	// The kernel gave the fds the lowest free numbers, which may be slots filled below: lift
	// them all above every slot first, so no dup2 overwrites an fd not yet placed.
	for (uint32_t i = 0; i < n; i++) {
		int h = fcntl(fds[i], F_DUPFD_CLOEXEC, SBX_FD_KEEP);
		if (h < 0)
			sbx_fail(errno, "receive", "lift fd");
		close(fds[i]);
		fds[i] = h;
	}
	// dup2 clears CLOEXEC on the slot, as fork/exec leaves a per-call init's fds. The spec
	// memfd replaces the socket on fd 3.
	static const int fixed[SBX_PASSED_FIXED] = { SBX_FD_SPEC, 0, 1, 2, SBX_FD_NETNS };
	for (uint32_t i = 0; i < n; i++) {
		int slot = i < SBX_PASSED_FIXED ? fixed[i] : SBX_FD_FIRST_EXTRA + (int)(i - SBX_PASSED_FIXED);
		if (dup2(fds[i], slot) < 0)
			sbx_fail(errno, "receive", "dup2");
		close(fds[i]);
	}
	if (got == (ssize_t)sizeof(n)) {
		free(spec);
		return NULL;
	}
	*len = (size_t)got - sizeof(n);
	return spec;
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

// sbx_prepare_direct prepares argv (a simple command of literal words, never a builtin: the
// parent made sure) to be exec'd the way `bash -c` execs such a command: argv[0] as typed,
// searched in PATH unless it holds a slash, with bash's additions to the environment (PWD,
// SHLVL=0 and _ = the path run). It returns 0, for the program (bash) to run the whole command
// instead, when bash might do something else (envp has PWD, SHLVL or _; there is no PATH to
// search) or there is nothing to try. It runs after chdir, so PWD is the call's directory.
int sbx_prepare_direct(struct direct_exec *d, char **argv, char **envp)
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

// exec_direct (in sbx_run_child's vfork child) execs the prepared tries in order. It returns,
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
		sbx_fail(errno, "fds", "restore");
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
// not wait for this process's own exit, which unmaps this binary and tears down the namespaces
// first. Over means what this init's exit would have meant: every other process of the
// namespace is gone. As its PID 1 this init kills them all and reaps each one; orphans are
// re-parented to it, so "no child left" is "no process left". Without a report (a send that
// fails) the daemon waits for the exit, as it does for an init that failed or was killed.
static void report_end(int status_fd, int code)
{
	for (;;) {
		// kill(-1) walks every task of the host, not only the namespace's, so it is skipped
		// when no child is left: a zombie is reaped first, and ECHILD means this init is
		// alone in its namespace.
		pid_t w = waitpid(-1, NULL, WNOHANG);
		if (w == 0) {
			(void)kill(-1, SIGKILL); // all of the namespace but PID 1, ourselves
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

// sbx_run_child runs the program in a child of this process, which stays PID 1 of the call's
// PID namespace: the program, bash included, gets a process's ordinary signal semantics (PID 1
// ignores, from inside its namespace, every signal it has no handler for: `kill $$` or an
// os.kill of itself would do nothing), and orphans it leaves are reaped here instead of piling
// up as zombies against the pids limit. The child execs the simple command direct when it is
// given (exec_direct), else the program (bash with the whole command). This process then only
// reaps, and exits as bash would have: with the program's status, 128+N for a signal. Without
// a child (vfork failed) it returns and the caller execs the program as PID 1.
void sbx_run_child(const struct direct_exec *direct, char *path, char **argv, char **envp,
		   uint32_t nextra, int status_fd)
{
	// vfork: no copy of this process's page tables; this process waits until the child has
	// exec'd (or exited). The child shares our memory, so it only makes system calls on what
	// was prepared before (sbx_prepare_direct), and execs or _exits (sbx_fail).
	pid_t pid = vfork();
	if (pid < 0)
		return;
	if (pid == 0) {
		if (direct)
			exec_direct(direct, nextra);
		execve(path, argv, envp);
		sbx_fail(errno, "execve", path); // reported on this copy of the error pipe
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
			_exit(SBX_EXIT_INIT_FAILED); // cannot happen: ours until reaped
	}
	int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	if (status_fd >= 0)
		report_end(status_fd, code);
	_exit(code);
}
