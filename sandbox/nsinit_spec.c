// nsinit_spec.c: reading the spec and the prelude (formats in nsinit.h). Every read is bounds
// checked and fails the init on a short or malformed blob; strings point into the buffer.
#include "nsinit_child.h"

uint32_t sbx_rd_u32(struct rd *r)
{
	uint32_t v;
	if (r->end - r->p < 4)
		sbx_fail(EINVAL, "spec", "truncated");
	memcpy(&v, r->p, 4);
	r->p += 4;
	return v;
}

uint64_t sbx_rd_u64(struct rd *r)
{
	uint64_t v;
	if (r->end - r->p < 8)
		sbx_fail(EINVAL, "spec", "truncated");
	memcpy(&v, r->p, 8);
	r->p += 8;
	return v;
}

// sbx_rd_str returns a NUL-terminated copy-free string: the parent leaves one spare byte after each
// string (the NUL) so the child can point into the buffer.
char *sbx_rd_str(struct rd *r)
{
	uint32_t n = sbx_rd_u32(r);
	if ((uint64_t)(r->end - r->p) < (uint64_t)n + 1 || r->p[n] != 0)
		sbx_fail(EINVAL, "spec", "bad string");
	char *s = (char *)r->p;
	r->p += n + 1;
	return s;
}

// sbx_rd_tag checks that the next record is the one the fixed order expects.
uint32_t sbx_rd_tag(struct rd *r, uint32_t want)
{
	uint32_t tag = sbx_rd_u32(r);
	if (tag != want)
		sbx_fail(EINVAL, "spec", "unexpected tag");
	return sbx_rd_u32(r); // count
}

char *sbx_read_spec(int fd, size_t *len)
{
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap);
	if (!buf)
		sbx_fail(ENOMEM, "spec", "malloc");
	for (;;) {
		if (n == cap) {
			if (cap >= (64u << 20))
				sbx_fail(E2BIG, "spec", "too large");
			cap *= 2;
			buf = realloc(buf, cap);
			if (!buf)
				sbx_fail(ENOMEM, "spec", "realloc");
		}
		ssize_t got = read(fd, buf + n, cap - n);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			sbx_fail(errno, "spec", "read");
		if (got == 0)
			break;
		n += got;
	}
	*len = n;
	return buf;
}

// sbx_rd_open starts reading a blob (the spec, the prelude) after checking it is one of ours.
struct rd sbx_rd_open(char *buf, size_t len, const char *what)
{
	struct rd r = { buf, buf + len };
	if (sbx_rd_u32(&r) != SBX_MAGIC || sbx_rd_u32(&r) != SBX_VERSION)
		sbx_fail(EINVAL, what, "bad magic or version");
	return r;
}

static char **rd_strv(struct rd *r, uint32_t tag)
{
	uint32_t n = sbx_rd_tag(r, tag);
	char **v = calloc(n + 1, sizeof(char *));
	if (!v)
		sbx_fail(ENOMEM, "spec", "calloc");
	for (uint32_t i = 0; i < n; i++)
		v[i] = sbx_rd_str(r);
	return v;
}

void sbx_rd_call(struct rd *r, struct call *c)
{
	sbx_rd_tag(r, SBX_TAG_EXEC);
	c->path = sbx_rd_str(r);
	c->dir = sbx_rd_str(r);
	c->argv = rd_strv(r, SBX_TAG_ARGV);
	c->envp = rd_strv(r, SBX_TAG_ENV);
	c->direct = rd_strv(r, SBX_TAG_DIRECT);
	sbx_rd_tag(r, SBX_TAG_CRED);
	c->uid = sbx_rd_u32(r);
	c->gid = sbx_rd_u32(r);
	c->rgid = sbx_rd_u32(r);
	c->umask = (mode_t)(sbx_rd_u32(r) & 0777);
	c->ngroups = sbx_rd_tag(r, SBX_TAG_GROUPS);
	c->groups = calloc(c->ngroups + 1, sizeof(gid_t));
	if (!c->groups)
		sbx_fail(ENOMEM, "spec", "calloc");
	for (uint32_t i = 0; i < c->ngroups; i++)
		c->groups[i] = sbx_rd_u32(r);
	sbx_rd_tag(r, SBX_TAG_FDS);
	c->netns_fd = (int32_t)sbx_rd_u32(r);
	c->nextra = sbx_rd_u32(r);
}

static uint32_t rd_slot(struct rd *r)
{
	uint32_t slot = sbx_rd_u32(r);
	if (slot >= SBX_MAX_TREES)
		sbx_fail(EINVAL, "mount", "tree slot");
	return slot;
}

// sbx_rd_mount_op decodes the next op of a mounts record, refusing one the plan never makes.
void sbx_rd_mount_op(struct rd *r, struct mount_op *m)
{
	memset(m, 0, sizeof(*m));
	m->op = sbx_rd_u32(r);
	m->opt = sbx_rd_u32(r);
	m->path = sbx_rd_str(r);
	int resolvable = 0; // an op NOFOLLOW may apply to: its path is reached as a mount target
	switch (m->op) {
	case SBX_OP_MOUNT:
		m->mount.src = sbx_rd_str(r);
		m->mount.fstype = sbx_rd_str(r);
		m->mount.data = sbx_rd_str(r);
		m->mount.flags = (unsigned long)sbx_rd_u64(r);
		resolvable = 1;
		break;
	case SBX_OP_SETATTR:
		m->setattr.set = sbx_rd_u64(r);
		m->setattr.clr = sbx_rd_u64(r);
		m->setattr.recursive = sbx_rd_u32(r) != 0;
		resolvable = 1;
		break;
	case SBX_OP_MKNOD:
		m->mknod.mode = (mode_t)sbx_rd_u32(r);
		m->mknod.dev = (dev_t)sbx_rd_u64(r);
		break;
	case SBX_OP_MKDIR:
		m->mkdir.mode = (mode_t)sbx_rd_u32(r);
		break;
	case SBX_OP_SYMLINK:
		m->symlink.target = sbx_rd_str(r);
		break;
	case SBX_OP_TOUCH:
		m->touch.mode = (mode_t)sbx_rd_u32(r);
		break;
	case SBX_OP_HOLD:
		break;
	case SBX_OP_EMPTY_FS:
		m->empty_fs.options = sbx_rd_str(r);
		m->empty_fs.attrs = sbx_rd_u64(r);
		break;
	case SBX_OP_COVER:
		m->cover.options = sbx_rd_str(r);
		resolvable = 1;
		break;
	case SBX_OP_CLONE_TREE:
		m->clone_tree.slot = rd_slot(r);
		m->clone_tree.from_held = sbx_rd_u32(r) != 0;
		resolvable = 1;
		break;
	case SBX_OP_MOVE_TREE:
		m->move_tree.slot = rd_slot(r);
		resolvable = 1;
		break;
	default:
		sbx_fail(EINVAL, "mount", "unknown op");
	}
	if ((m->opt & SBX_OPT_NOFOLLOW) && !resolvable)
		sbx_fail(EINVAL, "mount", "nofollow on an op that has no path to resolve");
}
