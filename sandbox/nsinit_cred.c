// nsinit_cred.c: the steps that give up privileges, in the order nsinit.c runs them: the
// network namespace, rlimits, the capability bounding set, the caller's credentials, seccomp.
//
// WARNING: what takes root away. After any change rerun, as root:
// go test -run 'TestEscape|TestSeccomp|TestPool' ./sandbox/

// nsinit_child.h first: it defines _GNU_SOURCE, which the system headers read.
#include "nsinit_child.h"

#include <grp.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>

// sbx_prejoin_netns (pooled inits, in the prelude) joins the network namespace on fd
// SBX_FD_PRELUDE_NETNS, the latest call's session's: a call of that session then need not
// join it, and its setns is off the call's critical path.
void sbx_prejoin_netns(struct rd *r, struct netns_state *ns)
{
	if (sbx_rd_tag(r, SBX_TAG_NETNS_HINT) == 0)
		return;
	int host = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (host < 0)
		sbx_fail(errno, "prelude", "hold netns");
	if (fstat(SBX_FD_PRELUDE_NETNS, &ns->joined) < 0 || setns(SBX_FD_PRELUDE_NETNS, CLONE_NEWNET) < 0)
		sbx_fail(errno, "prelude", "setns");
	close(SBX_FD_PRELUDE_NETNS);
	ns->host = fcntl(host, F_DUPFD_CLOEXEC, SBX_FD_KEEP_HOST_NETNS);
	if (ns->host < 0)
		sbx_fail(errno, "prelude", "move netns");
	close(host);
}

// sbx_join_netns puts the call in its network namespace: the session's (fd), or the host's (-1).
void sbx_join_netns(struct netns_state *ns, int fd)
{
	struct stat st;
	int joined = ns->host >= 0 && fd >= 0 && fstat(fd, &st) == 0 &&
		     st.st_dev == ns->joined.st_dev && st.st_ino == ns->joined.st_ino;
	if (fd >= 0 && !joined && setns(fd, CLONE_NEWNET) < 0)
		sbx_fail(errno, "setns", "net");
	if (fd < 0 && ns->host >= 0 && setns(ns->host, CLONE_NEWNET) < 0)
		sbx_fail(errno, "setns", "host net");
	if (ns->host >= 0)
		close(ns->host);
	ns->host = -1;
}

// sbx_do_rlimits sets each limit with hard = soft: the program can lower it, never raise it.
void sbx_do_rlimits(struct rd *r)
{
	uint32_t n = sbx_rd_tag(r, SBX_TAG_RLIMITS);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t res = sbx_rd_u32(r);
		struct rlimit rl = { .rlim_cur = sbx_rd_u64(r), .rlim_max = 0 };
		rl.rlim_max = rl.rlim_cur;
		if (setrlimit((int)res, &rl) < 0)
			sbx_fail(errno, "rlimit", "setrlimit");
	}
}

// sbx_drop_bounding_set empties the capability bounding and ambient sets: no execve can grant a
// capability again, whatever file capabilities the program has.
void sbx_drop_bounding_set(void)
{
	// Needs CAP_SETPCAP, which setuid below takes away: so it sits before the uid change.
	for (int cap = 0; cap <= 63; cap++) {
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0) {
			if (errno == EINVAL)
				break; // past the kernel's last capability
			sbx_fail(errno, "capabilities", "bounding set");
		}
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		sbx_fail(errno, "capabilities", "ambient");
}

// sbx_set_credentials gives up root for the caller's uid, gid and groups.
void sbx_set_credentials(const struct call *c)
{
	if (setgroups(c->ngroups, c->groups) < 0)
		sbx_fail(errno, "credentials", "setgroups");
	// A real gid other than the effective one makes the exec'd program non-dumpable (the kernel
	// checks them at execve), so the caller cannot ptrace it; access checks use the effective.
	if (setresgid(c->rgid, c->gid, c->gid) < 0)
		sbx_fail(errno, "credentials", "setgid");
	if (setresuid(c->uid, c->uid, c->uid) < 0)
		sbx_fail(errno, "credentials", "setuid");
	// Belt and braces: with the uid changed, root must be out of reach for good.
	if ((c->uid != 0 && setresuid(0, 0, 0) == 0) || (c->uid != 0 && c->gid != 0 && setegid(0) == 0))
		sbx_fail(EPERM, "credentials", "could regain root");
}

// sbx_load_seccomp loads every filter of the spec's seccomp record, in order. Each one stacks on
// those before: a syscall runs only if every filter allows it.
void sbx_load_seccomp(struct rd *r)
{
	uint32_t nprog = sbx_rd_tag(r, SBX_TAG_SECCOMP);
	for (uint32_t i = 0; i < nprog; i++) {
		uint32_t nbpf = sbx_rd_u32(r);
		if (nbpf == 0 || nbpf % sizeof(struct sock_filter) != 0 || (size_t)(r->end - r->p) < nbpf)
			sbx_fail(EINVAL, "seccomp", "bad program");
		struct sock_fprog prog = { .len = (unsigned short)(nbpf / sizeof(struct sock_filter)),
					   .filter = (struct sock_filter *)r->p };
		r->p += nbpf;
		if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
			sbx_fail(errno, "seccomp", "load");
	}
}
