// nsinit_landlock.c: the landlock ruleset, built in the prelude (a pooled init's hint) or for
// the call, and enforced after the mounts (nsinit.c says why it sits there).
//
// WARNING: what keeps denied paths unreadable. After any change rerun, as root:
// go test -run 'TestLandlock|TestEscape|TestPool' ./sandbox/
#include "nsinit_child.h"

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif
#define SBX_LANDLOCK_RULE_PATH_BENEATH 1

// Layouts of the landlock uapi structs; the system header may predate the fields we use.
struct sbx_ll_ruleset_attr {
	uint64_t handled_access_fs, handled_access_net, scoped;
};
struct sbx_ll_path_beneath {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

struct ll_masks {
	struct sbx_ll_ruleset_attr attr;
	uint32_t size;
};

// ll_read_masks reads a ruleset's access masks and attribute size.
static struct ll_masks ll_read_masks(struct rd *r)
{
	struct ll_masks m = { { 0 }, 0 };
	m.attr.handled_access_fs = sbx_rd_u64(r);
	m.attr.scoped = sbx_rd_u64(r);
	m.size = sbx_rd_u32(r);
	return m;
}

static int ll_create(struct ll_masks *m)
{
	int rs = syscall(SYS_landlock_create_ruleset, &m->attr, (size_t)m->size, 0);
	if (rs < 0)
		sbx_fail(errno, "landlock", "create ruleset");
	return rs;
}

// ll_add_rules reads a count of {access, path} rules and adds each to rs. A missing path, or
// a symlink, is skipped: there is nothing to allow.
static void ll_add_rules(struct rd *r, int rs, uint64_t handled)
{
	uint32_t rules = sbx_rd_u32(r);
	for (uint32_t i = 0; i < rules; i++) {
		uint64_t access = sbx_rd_u64(r);
		char *path = sbx_rd_str(r);
		// O_NOFOLLOW: a rule is on the path's own inode. Followed, a symlink among the entries
		// of a deny path's ancestor (/home -> /var/home) would put its read rule on what it
		// leads to, that ancestor perhaps, and a deny path made below it later would read.
		int fd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			// Out of resources: a rule silently missing would confuse; refuse instead.
			if (errno == EMFILE || errno == ENFILE || errno == ENOMEM)
				sbx_fail(errno, "landlock open", path);
			continue; // missing, ...: there is nothing to allow
		}
		struct stat st;
		if (fstat(fd, &st) < 0)
			sbx_fail(errno, "landlock stat", path);
		// What a symlink leads to is granted, or not, by the rules on its own path, which a
		// path through the symlink meets.
		if (S_ISLNK(st.st_mode)) {
			close(fd);
			continue;
		}
		// A rule on a file may only carry file rights; drop directory-only ones.
		if (!S_ISDIR(st.st_mode))
			access &= SBX_LL_FILE_RIGHTS;
		struct sbx_ll_path_beneath pb = { .allowed_access = access & handled, .parent_fd = fd };
		if (pb.allowed_access &&
		    syscall(SYS_landlock_add_rule, rs, SBX_LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0)
			sbx_fail(errno, "landlock rule", path);
		close(fd);
	}
}

// sbx_prebuild_landlock (pooled inits, in the prelude) builds the hinted rules (those around
// the deny paths of the pool's latest call) into a ruleset, returned (-1: no hint), while the
// init waits: the part of a call's ruleset that costs most (a rule per entry of each ancestor
// of a deny path) is then off the call's critical path. The daemon hands the call a spec that
// uses it only when the call's rules are exactly the hint's and the directories they came from
// are unchanged since (expansionCache); otherwise the call builds its own.
int sbx_prebuild_landlock(struct rd *r)
{
	if (sbx_rd_tag(r, SBX_TAG_LANDLOCK_HINT) == 0)
		return -1;
	struct ll_masks m = ll_read_masks(r);
	int rs = ll_create(&m);
	ll_add_rules(r, rs, m.attr.handled_access_fs);
	int kept = fcntl(rs, F_DUPFD_CLOEXEC, SBX_FD_KEEP_RULESET);
	if (kept < 0)
		sbx_fail(errno, "landlock", "move prebuilt ruleset");
	close(rs);
	return kept;
}

// sbx_do_landlock builds the ruleset (or finishes prebuilt, the prelude's, which it takes) and
// enforces it. The parent chose the access masks for the kernel's ABI, so this only opens
// paths and adds rules.
void sbx_do_landlock(struct rd *r, int exe_fd, int prebuilt)
{
	uint32_t n = sbx_rd_tag(r, SBX_TAG_LANDLOCK);
	uint32_t use_prebuilt = n ? sbx_rd_u32(r) : 0;
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
			sbx_fail(EINVAL, "landlock", "no prebuilt ruleset");
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
			sbx_fail(errno, "landlock rule", "executable");
	}
	// Still root here, so restrict_self needs no no_new_privs yet (CAP_SYS_ADMIN suffices).
	if (syscall(SYS_landlock_restrict_self, rs, 0) < 0)
		sbx_fail(errno, "landlock", "restrict self");
	close(rs);
}
