// SPDX-License-Identifier: GPL-2.0
/* snapmodel.c - a model of subvolumes and snapshots for tests (see snapmodel.h). */
#include <criterion/criterion.h>
#include <errno.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bcachefs.h"
#include "bcachefs_format.h"
#include "fs.h"
#include "fs_ops.h"
#include "snapshot.h"
#include "snapmodel.h"

const char *const sm_kind_names[] = {
	"create", "mkdir", "write", "truncate", "unlink", "rmdir", "rename",
	"setxattr", "rmxattr", "punch", "shift", "snapshot", "delete", "gc", "nop",
};

/*
 * Known engine bugs the workload can step around (1) so that the rest is
 * still tested; each has a test of its own in snapshot_model_test.c.
 *   LINK: bch_fs_link() entered subvolume 0's view (link_inside_a_subvolume):
 *   fixed, the workload makes hard links.
 */
#define SM_KNOWN_BUG_LINK	0

#define FAIL(m, fmt, ...)	cr_assert_fail("seed %u step %u: " fmt, (m)->seed, (m)->step, ##__VA_ARGS__)

void sm_opts_default(struct sm_opts *o)
{
	*o = (struct sm_opts) {
		.max_file = SM_MAX_FILE, .max_subs = 8,
		.pct_snapshot = 6, .pct_delete = 4, .pct_gc = 1, .pct_ro = 30,
	};
}

uint64_t sm_rand(struct sm *m)
{
	/* xorshift64* */
	m->rng ^= m->rng >> 12;
	m->rng ^= m->rng << 25;
	m->rng ^= m->rng >> 27;
	return m->rng * 2685821657736338717ULL;
}

static unsigned rnd(struct sm *m, unsigned n)
{
	return n ? (unsigned)(sm_rand(m) >> 33) % n : 0;
}

/* ------------------------------------------------------------ trees */

static void blob_put(struct sm_blob *b)
{
	if (b && !--b->ref) {
		free(b->b);
		free(b);
	}
}

/* n's data, its own (copied if shared), at least need bytes. */
static unsigned char *blob_mut(struct sm_node *n, size_t need)
{
	struct sm_blob *b = n->data;

	if (!b || b->ref > 1) {
		struct sm_blob *nb = calloc(1, sizeof(*nb));
		cr_assert(nb);
		nb->ref = 1;
		nb->cap = need > n->size ? need : n->size;
		nb->b = calloc(1, nb->cap ? nb->cap : 1);
		cr_assert(nb->b);
		if (b)
			memcpy(nb->b, b->b, n->size < b->cap ? n->size : b->cap);
		blob_put(b);
		n->data = b = nb;
	}
	if (b->cap < need) {
		b->b = realloc(b->b, need);
		cr_assert(b->b);
		memset(b->b + b->cap, 0, need - b->cap);
		b->cap = need;
	}
	b->hashed = false;
	return b->b;
}

static void node_free(struct sm_node *n)
{
	blob_put(n->data);
	for (unsigned x = 0; x < SM_NX; x++)
		free(n->xval[x]);
	memset(n, 0, sizeof(*n));
}

void sm_tree_free(struct sm_tree *t)
{
	for (unsigned i = 0; i < t->nr; i++)
		node_free(&t->n[i]);
	free(t->n);
	memset(t, 0, sizeof(*t));
}

static struct sm_node *tree_add(struct sm_tree *t, const char *path, bool dir)
{
	if (t->nr == t->cap) {
		t->cap = t->cap ? 2 * t->cap : 32;
		t->n = realloc(t->n, t->cap * sizeof(*t->n));
		cr_assert(t->n);
	}
	struct sm_node *n = &t->n[t->nr++];
	memset(n, 0, sizeof(*n));
	snprintf(n->path, sizeof(n->path), "%s", path);
	n->dir = dir;
	return n;
}

static void tree_del(struct sm_tree *t, unsigned i)
{
	node_free(&t->n[i]);
	t->n[i] = t->n[--t->nr];
}

static int tree_find(const struct sm_tree *t, const char *path)
{
	for (unsigned i = 0; i < t->nr; i++)
		if (!strcmp(t->n[i].path, path))
			return i;
	return -1;
}

void sm_tree_copy(struct sm_tree *dst, const struct sm_tree *src)
{
	dst->nr = dst->cap = src->nr;
	dst->n = calloc(src->nr ? src->nr : 1, sizeof(*dst->n));
	cr_assert(dst->n);
	for (unsigned i = 0; i < src->nr; i++) {
		struct sm_node *n = &dst->n[i];
		*n = src->n[i];
		if (n->data)
			n->data->ref++;
		for (unsigned x = 0; x < SM_NX; x++)
			if (n->xval[x]) {
				n->xval[x] = malloc(n->xlen[x] ? n->xlen[x] : 1);
				memcpy(n->xval[x], src->n[i].xval[x], n->xlen[x]);
			}
	}
}

static unsigned depth_of(const char *path)
{
	unsigned d = *path ? 1 : 0;
	for (const char *p = path; *p; p++)
		d += *p == '/';
	return d;
}

/* Is path inside dir (a proper descendant)? */
static bool is_under(const char *path, const char *dir)
{
	size_t l = strlen(dir);
	return !strncmp(path, dir, l) && path[l] == '/';
}

static bool has_children(const struct sm_tree *t, const char *dir)
{
	for (unsigned i = 0; i < t->nr; i++)
		if (is_under(t->n[i].path, dir))
			return true;
	return false;
}

static void split(const char *path, char *parent, char *name)
{
	const char *s = strrchr(path, '/');
	if (!s) {
		parent[0] = 0;
		strcpy(name, path);
	} else {
		memcpy(parent, path, s - path);
		parent[s - path] = 0;
		strcpy(name, s + 1);
	}
}

static void join(char *out, const char *dir, const char *name)
{
	snprintf(out, SM_PATH, "%s%s%s", dir, *dir ? "/" : "", name);
}

/* A random directory of t ("" is the root) with depth < max_depth; NULL if none. */
static const char *pick_dir(struct sm *m, const struct sm_tree *t, unsigned max_depth)
{
	unsigned nr = 0;
	for (unsigned i = 0; i < t->nr; i++)
		nr += t->n[i].dir && depth_of(t->n[i].path) < max_depth;
	unsigned k = rnd(m, nr + 1);
	if (k == nr)
		return "";
	for (unsigned i = 0; i < t->nr; i++)
		if (t->n[i].dir && depth_of(t->n[i].path) < max_depth && !k--)
			return t->n[i].path;
	return "";
}

static int pick(struct sm *m, const struct sm_tree *t, int dir)	/* dir: 1, 0, -1 any */
{
	unsigned nr = 0;
	for (unsigned i = 0; i < t->nr; i++)
		nr += dir < 0 || t->n[i].dir == dir;
	if (!nr)
		return -1;
	unsigned k = rnd(m, nr);
	for (unsigned i = 0; i < t->nr; i++)
		if ((dir < 0 || t->n[i].dir == dir) && !k--)
			return i;
	return -1;
}

/* ------------------------------------------------------------ the filesystem side */

/* The handle of path in the subvolume rooted at root. */
static int fs_lookup(struct bch_fs *c, uint64_t root, const char *path, uint64_t *h)
{
	char tmp[SM_PATH], *save = NULL;
	int r = 0;

	*h = root;
	snprintf(tmp, sizeof(tmp), "%s", path);
	for (char *s = strtok_r(tmp, "/", &save); s && !r; s = strtok_r(NULL, "/", &save))
		r = bch_fs_lookup(c, *h, s, h);
	return r;
}

static uint64_t lookup_ok(struct sm *m, uint64_t root, const char *path)
{
	uint64_t h;
	int r = fs_lookup(m->c, root, path, &h);
	if (r)
		FAIL(m, "lookup %s: %d (%s) [%s]", path, r, strerror(-r), m->c->err_msg);
	return h;
}

static void expect(struct sm *m, const char *what, const char *path, long got, long want)
{
	if (got != want)
		FAIL(m, "%s %s: got %ld (%s), want %ld [%s]", what, path, got, got < 0 ? strerror(-got) : "",
		     want, m->c->err_msg);
}

/* ------------------------------------------------------------ setup */

void sm_init(struct sm *m, struct bch_fs *c, unsigned seed, const struct sm_opts *o)
{
	memset(m, 0, sizeof(*m));
	m->c = c;
	m->seed = seed;
	m->rng = 0x9e3779b97f4a7c15ULL ^ ((uint64_t)seed * 0x100000001b3ULL);
	if (!m->rng)
		m->rng = 1;
	m->o = *o;
	if (m->o.max_subs > SM_SUBS_MAX)
		m->o.max_subs = SM_SUBS_MAX;
	m->buf = malloc(SM_MAX_FILE + 65536);
	m->buf2 = malloc(SM_MAX_FILE + 65536);
	cr_assert(m->buf && m->buf2);

	struct sm_sub *s = &m->sub[m->nr++];
	uint64_t root;
	int r = bch_fs_subvol_create(c, BCH_ROOT_INO, "work", S_IFDIR | 0755, 0, 0, &root);
	if (r)
		FAIL(m, "subvolume create: %d (%s) [%s]", r, strerror(-r), c->err_msg);
	s->id = bch_handle_subvol(root);
	s->root = root;
	snprintf(s->name, sizeof(s->name), "work");
}

void sm_free(struct sm *m)
{
	for (unsigned i = 0; i < m->nr; i++)
		sm_tree_free(&m->sub[i].t);
	free(m->buf);
	free(m->buf2);
	memset(m, 0, sizeof(*m));
}

/* ------------------------------------------------------------ subvolume steps */

unsigned sm_snapshot(struct sm *m, unsigned src, bool ro)
{
	cr_assert(m->nr < SM_SUBS_MAX);
	struct sm_sub *s = &m->sub[m->nr];
	uint64_t h;

	memset(s, 0, sizeof(*s));
	snprintf(s->name, sizeof(s->name), "s%u", m->next_name++);
	int r = bch_fs_subvol_snapshot(m->c, m->sub[src].root, BCH_ROOT_INO, s->name, ro, &h);
	if (r)
		FAIL(m, "snapshot of %s as %s%s: %d (%s) [%s]", m->sub[src].name, s->name, ro ? " (ro)" : "",
		     r, strerror(-r), m->c->err_msg);
	s->id = bch_handle_subvol(h);
	s->root = h;
	s->ro = ro;
	sm_tree_copy(&s->t, &m->sub[src].t);
	for (unsigned i = 0; i < m->nr; i++)
		if (m->sub[i].id == s->id)
			FAIL(m, "snapshot %s got subvolume ID %u of live %s", s->name, s->id, m->sub[i].name);
	if (s->id == 0 || (h & BCH_HANDLE_INUM_MASK) != (m->sub[src].root & BCH_HANDLE_INUM_MASK))
		FAIL(m, "snapshot %s: handle %#lx for source root %#lx", s->name, (unsigned long)h,
		     (unsigned long)m->sub[src].root);
	m->nr_snaps++;
	m->nr_ro_snaps += ro;
	return m->nr++;
}

void sm_delete(struct sm *m, unsigned i)
{
	int r = bch_fs_subvol_delete(m->c, BCH_ROOT_INO, m->sub[i].name);
	if (r)
		FAIL(m, "delete %s: %d (%s) [%s]", m->sub[i].name, r, strerror(-r), m->c->err_msg);
	sm_tree_free(&m->sub[i].t);
	m->sub[i] = m->sub[--m->nr];
	m->nr_deletes++;
}

uint64_t sm_gc(struct sm *m)
{
	uint64_t freed = 0;
	m->gc_had_work = bch_snapshot_gc_pending(m->c);
	int r = bch_snapshot_gc(m->c, NULL, NULL, &freed);
	if (r)
		FAIL(m, "snapshot gc: %d (%s) [%s]", r, strerror(-r), m->c->err_msg);
	if (bch_snapshot_gc_pending(m->c))
		FAIL(m, "snapshot gc left deleted snapshots");
	m->nr_gc++;
	return freed;
}

/* ------------------------------------------------------------ file steps */

static void fill(struct sm *m, unsigned char *b, size_t len)
{
	unsigned mode = rnd(m, 3);
	uint64_t x = sm_rand(m);
	for (size_t i = 0; i < len; i++) {
		if (mode == 0 && !(i & 7))
			x = sm_rand(m);
		b[i] = mode == 0 ? (unsigned char)(x >> (8 * (i & 7))) : mode == 1 ? (unsigned char)(i / 7 + x)
									  : (unsigned char)x;
	}
}

static void set_alloc(struct sm_node *n, size_t off, size_t len, bool on)
{
	for (size_t b = off / SM_BLOCK; b < (off + len + SM_BLOCK - 1) / SM_BLOCK && b < SM_NBLK; b++)
		if (on)
			n->alloc[b / 64] |= 1ULL << (b % 64);
		else
			n->alloc[b / 64] &= ~(1ULL << (b % 64));
}

static enum sm_kind op_create(struct sm *m, struct sm_sub *s, bool dir)
{
	const char *pd = pick_dir(m, &s->t, 3);
	char name[8], path[SM_PATH];
	uint64_t ph, h;

	snprintf(name, sizeof(name), dir ? "d%u" : "n%u", rnd(m, dir ? 3 : 6));
	join(path, pd, name);
	ph = lookup_ok(m, s->root, pd);
	int want = tree_find(&s->t, path) >= 0 ? -EEXIST : 0;
	int r = bch_fs_create(m->c, ph, name, (dir ? S_IFDIR | 0755 : S_IFREG | 0644), 0, 0, 0, &h);
	expect(m, dir ? "mkdir" : "create", path, r, want);
	if (!want) {
		tree_add(&s->t, path, dir);
		if (bch_handle_subvol(h) != s->id)
			FAIL(m, "create %s in subvolume %u: handle %#lx", path, s->id, (unsigned long)h);
	}
	return dir ? SM_MKDIR : SM_CREATE;
}

static enum sm_kind op_write(struct sm *m, struct sm_sub *s)
{
	int i = pick(m, &s->t, 0);
	if (i < 0)
		return op_create(m, s, false);
	struct sm_node *n = &s->t.n[i];
	size_t max = m->o.max_file, off, len;

	switch (rnd(m, 4)) {
	case 0:				/* append */
		off = n->size;
		len = 1 + rnd(m, 32 << 10);
		break;
	case 1:				/* small, anywhere */
		off = rnd(m, max);
		len = 1 + rnd(m, 8192);
		break;
	case 2:				/* large, anywhere */
		off = rnd(m, max);
		len = 1 + rnd(m, 160 << 10);
		break;
	default:			/* the middle of a large file */
		if (n->size < (64 << 10)) {
			off = 0;
			len = (64 << 10) + rnd(m, 128 << 10);
		} else {
			off = n->size / 4 + rnd(m, n->size / 2);
			len = 1 + rnd(m, 64 << 10);
			if (off + len > n->size)
				len = n->size - off;
		}
	}
	if (off >= max)
		off = max - 1;
	if (off + len > max)
		len = max - off;
	fill(m, m->buf, len);
	uint64_t h = lookup_ok(m, s->root, n->path);
	ssize_t r = bch_fs_write(m->c, h, off, m->buf, len);
	expect(m, "write", n->path, r, (long)len);
	memcpy(blob_mut(n, off + len) + off, m->buf, len);
	if (off + len > n->size)
		n->size = off + len;
	set_alloc(n, off, len, true);
	return SM_WRITE;
}

/* A hole punched (partial blocks zeroed, whole ones freed; the size kept). */
static enum sm_kind op_punch(struct sm *m, struct sm_sub *s)
{
	int i = pick(m, &s->t, 0);
	if (i < 0)
		return op_create(m, s, false);
	struct sm_node *n = &s->t.n[i];
	size_t off = rnd(m, m->o.max_file), len = 1 + rnd(m, 128 << 10);
	uint64_t h = lookup_ok(m, s->root, n->path);
	int r = bch_fs_fallocate(m->c, h, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, len);
	expect(m, "punch", n->path, r, 0);
	size_t zend = off + len < n->size ? off + len : n->size;
	if (n->data && off < zend)
		memset(blob_mut(n, 0) + off, 0, zend - off);
	size_t a = (off + SM_BLOCK - 1) / SM_BLOCK, b = (off + len) / SM_BLOCK;
	if (a < b)
		set_alloc(n, a * SM_BLOCK, (b - a) * SM_BLOCK, false);
	return SM_PUNCH;
}

/* The written-block bits of n from block `from` on, moved by `by` blocks. */
static void shift_alloc(struct sm_node *n, size_t from, long by)
{
	uint64_t old[SM_NBLK / 64];

	memcpy(old, n->alloc, sizeof(old));
	for (size_t b = from; b < SM_NBLK; b++) {
		long src = (long)b - by;
		bool on = src >= (long)from && src < SM_NBLK && (old[src / 64] & (1ULL << (src % 64)));
		if (on)
			n->alloc[b / 64] |= 1ULL << (b % 64);
		else
			n->alloc[b / 64] &= ~(1ULL << (b % 64));
	}
}

/*
 * fallocate's collapse or insert range (whole blocks): what follows moves
 * down or up.  In a snapshot the moved keys are often an ancestor's, which
 * stay where they are, hidden, with a moved copy in the snapshot.
 */
static enum sm_kind op_shift(struct sm *m, struct sm_sub *s)
{
	int i = pick(m, &s->t, 0);
	if (i < 0)
		return op_create(m, s, false);
	struct sm_node *n = &s->t.n[i];
	size_t whole = n->size / SM_BLOCK, any = (n->size + SM_BLOCK - 1) / SM_BLOCK;
	bool collapse = rnd(m, 2);
	size_t off, len;

	if (collapse) {
		if (whole < 2)
			return op_punch(m, s);
		size_t ob = rnd(m, whole - 1), room = whole - 1 - ob;
		off = ob * SM_BLOCK;
		len = (1 + rnd(m, room < 16 ? room : 16)) * SM_BLOCK;
	} else {
		len = (1 + rnd(m, 16)) * SM_BLOCK;
		if (!any || n->size + len > m->o.max_file)
			return op_punch(m, s);
		off = rnd(m, any) * SM_BLOCK;
	}
	uint64_t h = lookup_ok(m, s->root, n->path);
	int r = bch_fs_fallocate(m->c, h, collapse ? FALLOC_FL_COLLAPSE_RANGE : FALLOC_FL_INSERT_RANGE,
				 off, len);
	expect(m, collapse ? "collapse" : "insert", n->path, r, 0);
	if (collapse) {
		unsigned char *b = blob_mut(n, n->size);
		memmove(b + off, b + off + len, n->size - off - len);
		memset(b + n->size - len, 0, len);
		n->size -= len;
		shift_alloc(n, off / SM_BLOCK, -(long)(len / SM_BLOCK));
	} else {
		unsigned char *b = blob_mut(n, n->size + len);
		memmove(b + off + len, b + off, n->size - off);
		memset(b + off, 0, len);
		n->size += len;
		shift_alloc(n, off / SM_BLOCK, (long)(len / SM_BLOCK));
	}
	return SM_SHIFT;
}

static enum sm_kind op_truncate(struct sm *m, struct sm_sub *s)
{
	int i = pick(m, &s->t, 0);
	if (i < 0)
		return op_create(m, s, false);
	struct sm_node *n = &s->t.n[i];
	size_t size;

	if (m->o.aligned_truncate)
		size = (size_t)rnd(m, m->o.max_file / SM_BLOCK + 1) * SM_BLOCK;
	else if (rnd(m, 2) && n->size)
		size = n->size - rnd(m, n->size < 20000 ? n->size : 20000);	/* a little shorter */
	else
		size = rnd(m, m->o.max_file + 1);
	uint64_t h = lookup_ok(m, s->root, n->path);
	int r = bch_fs_truncate(m->c, h, size);
	expect(m, "truncate", n->path, r, 0);
	if (size < n->size) {
		if (n->data) {
			unsigned char *b = blob_mut(n, 0);
			memset(b + size, 0, n->size - size);
		}
		set_alloc(n, (size + SM_BLOCK - 1) / SM_BLOCK * SM_BLOCK, SM_MAX_FILE, false);
	} else if (n->data) {
		blob_mut(n, size);		/* the blob covers the file: zeros */
	}
	n->size = size;
	return SM_TRUNCATE;
}

static enum sm_kind op_unlink(struct sm *m, struct sm_sub *s, bool dir)
{
	int i = pick(m, &s->t, dir);
	if (i < 0)
		return op_create(m, s, dir);
	char parent[SM_PATH], name[SM_PATH], path[SM_PATH];
	snprintf(path, sizeof(path), "%s", s->t.n[i].path);
	split(path, parent, name);
	uint64_t ph = lookup_ok(m, s->root, parent);
	int want = dir && has_children(&s->t, path) ? -ENOTEMPTY : 0;
	int r = dir ? bch_fs_rmdir(m->c, ph, name) : bch_fs_unlink(m->c, ph, name);
	expect(m, dir ? "rmdir" : "unlink", path, r, want);
	if (!want)
		tree_del(&s->t, i);
	return dir ? SM_RMDIR : SM_UNLINK;
}

static unsigned subtree_depth(const struct sm_tree *t, const char *dir)
{
	unsigned base = depth_of(dir), d = 0;
	for (unsigned i = 0; i < t->nr; i++)
		if (is_under(t->n[i].path, dir) && depth_of(t->n[i].path) - base > d)
			d = depth_of(t->n[i].path) - base;
	return d;
}

static enum sm_kind op_rename(struct sm *m, struct sm_sub *s)
{
	int i = pick(m, &s->t, -1);
	if (i < 0)
		return op_create(m, s, rnd(m, 2));
	char src[SM_PATH], dst[SM_PATH], sp[SM_PATH], sn[SM_PATH], name[8];
	bool dir = s->t.n[i].dir;
	snprintf(src, sizeof(src), "%s", s->t.n[i].path);
	const char *dd = pick_dir(m, &s->t, 5);
	snprintf(name, sizeof(name), dir ? "d%u" : "n%u", rnd(m, dir ? 3 : 6));
	join(dst, dd, name);
	if (!strcmp(src, dst) || depth_of(dst) + (dir ? subtree_depth(&s->t, src) : 0) > 5)
		return SM_NOP;
	split(src, sp, sn);
	int want = 0, j = tree_find(&s->t, dst);
	if (dir && (is_under(dst, src)))
		want = -EINVAL;
	else if (j >= 0 && dir && has_children(&s->t, dst))
		want = -ENOTEMPTY;
	char ddc[SM_PATH];
	snprintf(ddc, sizeof(ddc), "%s", dd);
	uint64_t h1 = lookup_ok(m, s->root, sp), h2 = lookup_ok(m, s->root, ddc);
	int r = bch_fs_rename(m->c, h1, sn, h2, name, 0);
	expect(m, "rename", src, r, want);
	if (want)
		return SM_RENAME;
	if (j >= 0) {
		tree_del(&s->t, j);
		i = tree_find(&s->t, src);
	}
	size_t l = strlen(src);
	for (unsigned k = 0; k < s->t.nr; k++) {
		char *p = s->t.n[k].path, tmp[SM_PATH];
		if (k == (unsigned)i || is_under(p, src)) {
			snprintf(tmp, sizeof(tmp), "%s%s", dst, p + l);
			strcpy(p, tmp);
		}
	}
	return SM_RENAME;
}

static enum sm_kind op_xattr(struct sm *m, struct sm_sub *s, bool rm)
{
	int i = pick(m, &s->t, -1);
	if (i < 0)
		return op_create(m, s, false);
	struct sm_node *n = &s->t.n[i];
	unsigned x = rnd(m, SM_NX);
	char name[16];
	snprintf(name, sizeof(name), "user.x%u", x);
	uint64_t h = lookup_ok(m, s->root, n->path);
	if (rm) {
		int want = n->xset[x] ? 0 : -ENODATA;
		expect(m, "removexattr", n->path, bch_fs_removexattr(m->c, h, name), want);
		if (!want) {
			free(n->xval[x]);
			n->xval[x] = NULL;
			n->xset[x] = false;
			n->xlen[x] = 0;
		}
		return SM_RMXATTR;
	}
	size_t len = rnd(m, 8) ? rnd(m, 200) : rnd(m, SM_XMAX + 1);
	unsigned char *v = malloc(len ? len : 1);
	fill(m, v, len);
	expect(m, "setxattr", n->path, bch_fs_setxattr(m->c, h, name, v, len, 0), 0);
	free(n->xval[x]);
	n->xval[x] = v;
	n->xlen[x] = len;
	n->xset[x] = true;
	return SM_SETXATTR;
}

enum sm_kind sm_step(struct sm *m)
{
	unsigned k = rnd(m, 100), writable = 0;

	m->step++;
	for (unsigned i = 0; i < m->nr; i++)
		writable += !m->sub[i].ro;
	if (k < m->o.pct_snapshot) {
		if (m->nr < m->o.max_subs) {
			sm_snapshot(m, rnd(m, m->nr), rnd(m, 100) < m->o.pct_ro);
			return SM_SNAPSHOT;
		}
		k = m->o.pct_snapshot;		/* full: delete one instead */
	}
	k -= m->o.pct_snapshot;
	if (k < m->o.pct_delete) {
		if (m->nr < 2)
			return SM_NOP;
		unsigned i = rnd(m, m->nr);
		if (!m->sub[i].ro && writable == 1)
			return SM_NOP;		/* keep one subvolume to work in */
		sm_delete(m, i);
		return SM_DELETE;
	}
	k -= m->o.pct_delete;
	if (k < m->o.pct_gc) {
		sm_gc(m);
		return SM_GC;
	}

	/* a file operation in a random writable subvolume */
	unsigned w = rnd(m, writable);
	struct sm_sub *s = NULL;
	for (unsigned i = 0; i < m->nr && !s; i++)
		if (!m->sub[i].ro && !w--)
			s = &m->sub[i];
	cr_assert(s);
	m->nr_ops++;
	k = rnd(m, 100);
	if (k < 12)
		return op_create(m, s, false);
	if (k < 18)
		return op_create(m, s, true);
	if (k < 44 || (k < 48 && m->o.aligned_truncate))
		return op_write(m, s);
	if (k < 46)
		return op_punch(m, s);
	if (k < 48)
		return op_shift(m, s);
	if (k < 56)
		return op_truncate(m, s);
	if (k < 64)
		return op_unlink(m, s, false);
	if (k < 68)
		return op_unlink(m, s, true);
	if (k < 80)
		return op_rename(m, s);
	if (k < 94)
		return op_xattr(m, s, false);
	return op_xattr(m, s, true);
}

/* ------------------------------------------------------------ read-only subvolumes */

static void ro_expect(struct sm *m, struct sm_sub *s, const char *what, long r)
{
	if (r != -EROFS)
		FAIL(m, "read-only %s: %s gave %ld (%s), want -EROFS [%s]", s->name, what, r,
		     r < 0 ? strerror(-r) : "", m->c->err_msg);
	m->nr_ro_refused++;
}

void sm_ro_probe(struct sm *m)
{
	struct bch_fs *c = m->c;
	unsigned char b[16] = "ro probe";

	for (unsigned i = 0; i < m->nr; i++) {
		struct sm_sub *s = &m->sub[i];
		uint64_t h, x;
		if (!s->ro)
			continue;
		char name[16];
		snprintf(name, sizeof(name), "new%u", rnd(m, 100));
		ro_expect(m, s, "create", bch_fs_create(c, s->root, name, S_IFREG | 0644, 0, 0, 0, &x));
		ro_expect(m, s, "mkdir", bch_fs_create(c, s->root, name, S_IFDIR | 0755, 0, 0, 0, &x));
		ro_expect(m, s, "symlink", bch_fs_symlink(c, s->root, name, "t", 0, 0, &x));
		ro_expect(m, s, "setxattr on the root", bch_fs_setxattr(c, s->root, "user.r", b, 3, 0));
		ro_expect(m, s, "snapshot named inside",
			  bch_fs_subvol_snapshot(c, m->sub[0].root, s->root, name, false, &x));
		ro_expect(m, s, "subvolume inside",
			  bch_fs_subvol_create(c, s->root, name, S_IFDIR | 0755, 0, 0, &x));
		int f = pick(m, &s->t, 0), d = pick(m, &s->t, 1);
		if (f >= 0) {
			struct sm_node *n = &s->t.n[f];
			char parent[SM_PATH], nm[SM_PATH];
			split(n->path, parent, nm);
			h = lookup_ok(m, s->root, n->path);
			uint64_t ph = lookup_ok(m, s->root, parent);
			struct bch_setattr sa = { .valid = BCH_SETATTR_MODE, .mode = 0600 };
			ro_expect(m, s, "write", bch_fs_write(c, h, rnd(m, 1 << 16), b, sizeof(b)));
			ro_expect(m, s, "truncate", bch_fs_truncate(c, h, rnd(m, 1 << 16)));
			ro_expect(m, s, "chmod", bch_fs_setattr(c, h, &sa));
			ro_expect(m, s, "setxattr", bch_fs_setxattr(c, h, "user.x0", b, 5, 0));
			if (n->xset[0])
				ro_expect(m, s, "removexattr", bch_fs_removexattr(c, h, "user.x0"));
			if (!SM_KNOWN_BUG_LINK)
				ro_expect(m, s, "link", bch_fs_link(c, h, s->root, name));
			ro_expect(m, s, "rename", bch_fs_rename(c, ph, nm, s->root, name, 0));
			ro_expect(m, s, "unlink", bch_fs_unlink(c, ph, nm));
		}
		if (d >= 0 && !has_children(&s->t, s->t.n[d].path)) {
			char parent[SM_PATH], nm[SM_PATH];
			split(s->t.n[d].path, parent, nm);
			ro_expect(m, s, "rmdir", bch_fs_rmdir(c, lookup_ok(m, s->root, parent), nm));
		}
	}
}

/* ------------------------------------------------------------ refusals */

static void refuse(struct sm *m, const char *what, long r, long want)
{
	if (r != want)
		FAIL(m, "%s gave %ld (%s), want %ld (%s) [%s]", what, r, r < 0 ? strerror(-r) : "", want,
		     strerror(-want), m->c->err_msg);
}

void sm_refusal_probe(struct sm *m)
{
	struct bch_fs *c = m->c;
	uint64_t x;

	if (!m->nr)
		return;
	struct sm_sub *s = &m->sub[rnd(m, m->nr)], *o = &m->sub[rnd(m, m->nr)];
	/* the names of subvolumes in subvolume 0's root */
	refuse(m, "unlink of a subvolume's name", bch_fs_unlink(c, BCH_ROOT_INO, s->name), -EPERM);
	refuse(m, "rmdir of a subvolume", bch_fs_rmdir(c, BCH_ROOT_INO, s->name), -EPERM);
	/* a subvolume's name moves (and back), but never onto another subvolume's */
	refuse(m, "rename of a subvolume", bch_fs_rename(c, BCH_ROOT_INO, s->name, BCH_ROOT_INO, "elsewhere", 0), 0);
	refuse(m, "rename of a subvolume back", bch_fs_rename(c, BCH_ROOT_INO, "elsewhere", BCH_ROOT_INO, s->name, 0),
	       0);
	if (o != s)
		refuse(m, "rename onto a subvolume", bch_fs_rename(c, BCH_ROOT_INO, s->name, BCH_ROOT_INO, o->name, 0),
		       -EBUSY);
	refuse(m, "a snapshot named as an existing subvolume",
	       bch_fs_subvol_snapshot(c, s->root, BCH_ROOT_INO, o->name, false, &x), -EEXIST);
	int d = pick(m, &s->t, 1);
	if (d >= 0) {
		uint64_t h = lookup_ok(m, s->root, s->t.n[d].path);
		refuse(m, "a snapshot of a directory that is no subvolume's root",
		       bch_fs_subvol_snapshot(c, h, BCH_ROOT_INO, "nosuch", false, &x), -EINVAL);
	}
	/* between subvolumes */
	int f = pick(m, &s->t, 0);
	if (f >= 0 && o != s) {
		char parent[SM_PATH], nm[SM_PATH];
		split(s->t.n[f].path, parent, nm);
		uint64_t h = lookup_ok(m, s->root, s->t.n[f].path), ph = lookup_ok(m, s->root, parent);
		refuse(m, "a link across subvolumes", bch_fs_link(c, h, o->root, "xdev"), -EXDEV);
		refuse(m, "a rename across subvolumes", bch_fs_rename(c, ph, nm, o->root, "xdev", 0), -EXDEV);
	}
}

/* ------------------------------------------------------------ walking the filesystem */

struct fs_ent {
	char		path[SM_PATH];
	uint64_t	h;
	struct stat	st;
};

struct walk {
	struct bch_fs	*c;
	uint32_t	subvol;
	struct fs_ent	*e;
	unsigned	nr, cap;
	const char	*err;
	char		*msg;
	size_t		len;
};

struct dirbuf {
	struct walk	*w;
	const char	*prefix;
	unsigned	first;		/* index of the first entry added */
};

static int walk_fn(void *priv, const char *name, size_t len, uint64_t inum, unsigned d_type, uint64_t next)
{
	struct dirbuf *d = priv;
	struct walk *w = d->w;
	(void)d_type; (void)next;

	if ((len == 1 && name[0] == '.') || (len == 2 && !memcmp(name, "..", 2)))
		return 0;
	if (w->nr == w->cap) {
		w->cap = w->cap ? 2 * w->cap : 64;
		w->e = realloc(w->e, w->cap * sizeof(*w->e));
		cr_assert(w->e);
	}
	struct fs_ent *e = &w->e[w->nr++];
	memset(e, 0, sizeof(*e));
	snprintf(e->path, sizeof(e->path), "%s%s%.*s", d->prefix, *d->prefix ? "/" : "", (int)len, name);
	e->h = inum;
	return 0;
}

static int walk_dir(struct walk *w, uint64_t dir, const char *prefix, unsigned depth)
{
	struct dirbuf d = { w, prefix, w->nr };
	int r = bch_fs_readdir(w->c, dir, 0, walk_fn, &d);
	unsigned end = w->nr;

	if (r)
		return snprintf(w->msg, w->len, "readdir %s: %d (%s)", *prefix ? prefix : "/", r,
				strerror(-r)), r;
	if (depth > 16)
		return snprintf(w->msg, w->len, "directories nested too deep at %s", prefix), -ELOOP;
	for (unsigned i = d.first; i < end; i++) {
		struct fs_ent *e = &w->e[i];
		if (bch_handle_subvol(e->h) != w->subvol)
			return snprintf(w->msg, w->len, "%s: handle %#lx of subvolume %u in subvolume %u",
					e->path, (unsigned long)e->h, bch_handle_subvol(e->h), w->subvol), -EXDEV;
		if ((r = bch_fs_getattr(w->c, e->h, &e->st)))
			return snprintf(w->msg, w->len, "getattr %s: %d (%s)", e->path, r, strerror(-r)), r;
		if (S_ISDIR(e->st.st_mode)) {
			char p[SM_PATH];
			snprintf(p, sizeof(p), "%s", e->path);
			if ((r = walk_dir(w, e->h, p, depth + 1)))
				return r;
		}
	}
	return 0;
}

static int ent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct fs_ent *)a)->path, ((const struct fs_ent *)b)->path);
}

static int fs_walk(struct bch_fs *c, uint64_t root, struct walk *w, char *msg, size_t len)
{
	memset(w, 0, sizeof(*w));
	w->c = c;
	w->subvol = bch_handle_subvol(root);
	w->msg = msg;
	w->len = len;
	int r = walk_dir(w, root, "", 0);
	if (!r && w->nr)
		qsort(w->e, w->nr, sizeof(*w->e), ent_cmp);
	return r;
}

/* Compare the xattrs of h with n's; NULL when equal. */
static const char *xattrs_cmp(struct bch_fs *c, uint64_t h, const struct sm_node *n, char *msg, size_t len)
{
	char list[256], val[SM_XMAX + 16];
	ssize_t l = bch_fs_listxattr(c, h, list, sizeof(list));
	size_t want = 0;

	for (unsigned x = 0; x < SM_NX; x++)
		want += n->xset[x] ? strlen("user.x0") + 1 : 0;
	if (l != (ssize_t)want)
		return snprintf(msg, len, "%s: xattr list %zd bytes, want %zu", n->path, l, want), msg;
	for (unsigned x = 0; x < SM_NX; x++) {
		char name[16];
		snprintf(name, sizeof(name), "user.x%u", x);
		ssize_t g = bch_fs_getxattr(c, h, name, val, sizeof(val));
		if (!n->xset[x] ? g != -ENODATA : g != n->xlen[x] || memcmp(val, n->xval[x], g))
			return snprintf(msg, len, "%s: xattr %s: got %zd, want %d bytes%s", n->path, name, g,
					n->xset[x] ? n->xlen[x] : -ENODATA,
					n->xset[x] && g == n->xlen[x] ? " (contents differ)" : ""), msg;
	}
	return NULL;
}

static int node_cmp(const void *a, const void *b)
{
	return strcmp((*(const struct sm_node *const *)a)->path, (*(const struct sm_node *const *)b)->path);
}

static const struct sm_node **sorted(const struct sm_tree *t)
{
	const struct sm_node **v = malloc((t->nr + 1) * sizeof(*v));
	cr_assert(v);
	for (unsigned i = 0; i < t->nr; i++)
		v[i] = &t->n[i];
	if (t->nr)
		qsort(v, t->nr, sizeof(*v), node_cmp);
	return v;
}

const char *sm_compare(struct bch_fs *c, uint64_t root, const struct sm_tree *t, uint64_t *inos,
		       unsigned *nr_inos, char *msg, size_t len)
{
	static unsigned char *buf;
	struct walk w;
	const char *bad = NULL;

	if (!buf)
		buf = malloc(SM_MAX_FILE + 4096);
	if (fs_walk(c, root, &w, msg, len)) {
		free(w.e);
		return msg;
	}
	const struct sm_node **v = sorted(t);
	unsigned i = 0, j = 0;
	for (; !bad && (i < t->nr || j < w.nr); i++, j++) {
		const struct sm_node *n = i < t->nr ? v[i] : NULL;
		const struct fs_ent *e = j < w.nr ? &w.e[j] : NULL;
		int cmp = !n ? 1 : !e ? -1 : strcmp(n->path, e->path);
		if (cmp < 0) {
			bad = (snprintf(msg, len, "%s missing", n->path), msg);
			break;
		}
		if (cmp > 0) {
			bad = (snprintf(msg, len, "%s there, not in the model", e->path), msg);
			break;
		}
		if (inos && *nr_inos < SM_INOS_MAX)
			inos[(*nr_inos)++] = e->st.st_ino;
		if (n->dir != !!S_ISDIR(e->st.st_mode) || (!n->dir && !S_ISREG(e->st.st_mode))) {
			bad = (snprintf(msg, len, "%s: mode %o, model says %s", n->path, e->st.st_mode,
					n->dir ? "directory" : "file"), msg);
			break;
		}
		if (!n->dir) {
			if ((size_t)e->st.st_size != n->size) {
				bad = (snprintf(msg, len, "%s: size %ld, want %zu", n->path, (long)e->st.st_size,
						n->size), msg);
				break;
			}
			ssize_t r = bch_fs_read(c, e->h, 0, buf, n->size + 4096);
			if (r != (ssize_t)n->size) {
				bad = (snprintf(msg, len, "%s: read %zd of %zu: %s", n->path, r, n->size,
						c->err_msg), msg);
				break;
			}
			for (size_t b = 0; b < n->size; b++) {
				unsigned char want = n->data ? n->data->b[b] : 0;
				if (buf[b] != want) {
					bad = (snprintf(msg, len, "%s: byte %zu is %#x, want %#x (size %zu)",
							n->path, b, buf[b], want, n->size), msg);
					break;
				}
			}
		}
		if (!bad)
			bad = xattrs_cmp(c, e->h, n, msg, len);
	}
	free(v);
	free(w.e);
	return bad;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

struct names {
	char	n[SM_SUBS_MAX + 8][32];
	uint64_t h[SM_SUBS_MAX + 8];
	unsigned nr;
};

static int names_fn(void *priv, const char *name, size_t len, uint64_t inum, unsigned d_type, uint64_t next)
{
	struct names *nm = priv;
	(void)d_type; (void)next;
	if ((len == 1 && name[0] == '.') || (len == 2 && !memcmp(name, "..", 2)))
		return 0;
	if (nm->nr < SM_SUBS_MAX + 8) {
		snprintf(nm->n[nm->nr], 32, "%.*s", (int)len, name);
		nm->h[nm->nr++] = inum;
	}
	return 0;
}

void sm_check(struct sm *m, const char *when)
{
	static uint64_t inos[SM_INOS_MAX];
	unsigned nr_inos = 0;
	char msg[512];

	for (unsigned i = 0; i < m->nr; i++) {
		struct sm_sub *s = &m->sub[i];
		struct stat st;
		if (bch_fs_getattr(m->c, s->root, &st))
			FAIL(m, "%s: getattr of %s's root", when, s->name);
		inos[nr_inos++] = st.st_ino;
		const char *bad = sm_compare(m->c, s->root, &s->t, inos, &nr_inos, msg, sizeof(msg));
		if (bad)
			FAIL(m, "%s: subvolume %s (ID %u%s): %s", when, s->name, s->id, s->ro ? ", ro" : "", bad);
	}
	qsort(inos, nr_inos, sizeof(inos[0]), u64_cmp);
	for (unsigned i = 1; i < nr_inos; i++)
		if (inos[i] == inos[i - 1])
			FAIL(m, "%s: st_ino %#lx seen twice across subvolumes", when, (unsigned long)inos[i]);

	/* the library's list: subvolume 0 and the live ones, read-only as made */
	unsigned n;
	const struct bch_subvol_info *sv = bch_subvols(m->c, &n);
	if (n != m->nr + 1)
		FAIL(m, "%s: the library lists %u subvolumes, the model has %u and subvolume 0", when, n, m->nr);
	for (unsigned i = 0; i < n; i++) {
		if (sv[i].id == 0)
			continue;
		unsigned j = 0;
		while (j < m->nr && m->sub[j].id != sv[i].id)
			j++;
		if (j == m->nr)
			FAIL(m, "%s: subvolume %u listed, not in the model", when, sv[i].id);
		if (!!(sv[i].v.flags & BCH_SUBVOL_RO) != m->sub[j].ro)
			FAIL(m, "%s: subvolume %s read-only flag %u", when, m->sub[j].name, sv[i].v.flags);
	}
	/* their names in subvolume 0's root */
	struct names *nm = calloc(1, sizeof(*nm));
	cr_assert(nm);
	cr_assert_eq(bch_fs_readdir(m->c, BCH_ROOT_INO, 0, names_fn, nm), 0);
	for (unsigned i = 0; i < nm->nr; i++) {
		if (!strcmp(nm->n[i], "lost+found"))
			continue;
		unsigned j = 0;
		while (j < m->nr && strcmp(m->sub[j].name, nm->n[i]))
			j++;
		if (j == m->nr)
			FAIL(m, "%s: the root holds %s, which the model deleted", when, nm->n[i]);
		if (nm->h[i] != m->sub[j].root)
			FAIL(m, "%s: /%s gives handle %#lx, its root is %#lx", when, nm->n[i],
			     (unsigned long)nm->h[i], (unsigned long)m->sub[j].root);
	}
	if (nm->nr != m->nr + 1)
		FAIL(m, "%s: the root holds %u names, want %u and lost+found", when, nm->nr, m->nr);
	free(nm);
}

/* ------------------------------------------------------------ digests */

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ULL;
	return h;
}

static uint64_t zeros_hash(uint64_t h, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h *= 1099511628211ULL;
	return h;
}

#define FNV0	1469598103934665603ULL

static uint64_t data_hash(const struct sm_node *n)
{
	struct sm_blob *b = n->data;
	if (!b)
		return zeros_hash(FNV0, n->size);
	if (!b->hashed || b->hsize != n->size) {
		b->hash = fnv(FNV0, b->b, n->size);
		b->hsize = n->size;
		b->hashed = true;
	}
	return b->hash;
}

static uint64_t ent_hash(uint64_t h, const char *path, bool dir, size_t size, uint64_t dh, size_t xlist)
{
	h = fnv(h, path, strlen(path) + 1);
	h = fnv(h, &dir, 1);
	uint64_t v[3] = { size, dh, xlist };
	return fnv(h, v, sizeof(v));
}

uint64_t sm_tree_digest(const struct sm_tree *t)
{
	const struct sm_node **v = sorted(t);
	uint64_t h = FNV0;

	for (unsigned i = 0; i < t->nr; i++) {
		const struct sm_node *n = v[i];
		size_t xl = 0;
		for (unsigned x = 0; x < SM_NX; x++)
			xl += n->xset[x] ? strlen("user.x0") + 1 : 0;
		h = ent_hash(h, n->path, n->dir, n->dir ? 0 : n->size, n->dir ? 0 : data_hash(n), xl);
		for (unsigned x = 0; x < SM_NX; x++)
			if (n->xset[x]) {
				h = fnv(h, &x, sizeof(x));
				h = fnv(h, &n->xlen[x], sizeof(n->xlen[x]));
				h = fnv(h, n->xval[x], n->xlen[x]);
			}
	}
	free(v);
	return h;
}

int sm_fs_digest(struct bch_fs *c, uint64_t root, uint64_t *digest, char *msg, size_t len)
{
	static unsigned char *buf;
	struct walk w;
	uint64_t h = FNV0;
	int r;

	if (!buf)
		buf = malloc(SM_MAX_FILE + 4096);
	if ((r = fs_walk(c, root, &w, msg, len)))
		goto out;
	for (unsigned i = 0; i < w.nr && !r; i++) {
		struct fs_ent *e = &w.e[i];
		bool dir = S_ISDIR(e->st.st_mode);
		uint64_t dh = 0;
		char list[256], val[SM_XMAX + 16];
		if (!dir) {
			ssize_t n = e->st.st_size > SM_MAX_FILE ? -EFBIG : bch_fs_read(c, e->h, 0, buf, e->st.st_size);
			if (n != e->st.st_size) {
				snprintf(msg, len, "%s: read %zd of %ld", e->path, n, (long)e->st.st_size);
				r = n < 0 ? (int)n : -EIO;
				break;
			}
			dh = fnv(FNV0, buf, n);
		}
		ssize_t xl = bch_fs_listxattr(c, e->h, list, sizeof(list));
		if (xl < 0) {
			snprintf(msg, len, "%s: listxattr %zd", e->path, xl);
			r = xl;
			break;
		}
		h = ent_hash(h, e->path, dir, dir ? 0 : e->st.st_size, dh, xl);
		for (unsigned x = 0; x < SM_NX; x++) {
			char name[16];
			snprintf(name, sizeof(name), "user.x%u", x);
			ssize_t g = bch_fs_getxattr(c, e->h, name, val, sizeof(val));
			if (g == -ENODATA)
				continue;
			if (g < 0) {
				snprintf(msg, len, "%s: getxattr %s: %zd", e->path, name, g);
				r = g;
				break;
			}
			uint16_t gl = g;
			h = fnv(h, &x, sizeof(x));
			h = fnv(h, &gl, sizeof(gl));
			h = fnv(h, val, g);
		}
	}
	*digest = h;
out:
	free(w.e);
	return r;
}

/* ------------------------------------------------------------ a tree without snapshots */

void sm_tree_build(struct bch_fs *c, uint64_t dir, const struct sm_tree *t)
{
	const struct sm_node **v = sorted(t);		/* parents before children */
	static unsigned char zero[SM_MAX_FILE];

	for (unsigned i = 0; i < t->nr; i++) {
		const struct sm_node *n = v[i];
		char parent[SM_PATH], name[SM_PATH];
		uint64_t ph, h;
		split(n->path, parent, name);
		cr_assert_eq(fs_lookup(c, dir, parent, &ph), 0, "%s", n->path);
		cr_assert_eq(bch_fs_create(c, ph, name, n->dir ? S_IFDIR | 0755 : S_IFREG | 0644, 0, 0, 0, &h),
			     0, "build %s: %s", n->path, c->err_msg);
		for (unsigned x = 0; x < SM_NX; x++)
			if (n->xset[x]) {
				char xn[16];
				snprintf(xn, sizeof(xn), "user.x%u", x);
				cr_assert_eq(bch_fs_setxattr(c, h, xn, n->xval[x], n->xlen[x], 0), 0);
			}
		if (n->dir)
			continue;
		/* each run of written blocks in one write, as a file written once would be */
		for (size_t b = 0; b < SM_NBLK; ) {
			if (!(n->alloc[b / 64] & (1ULL << (b % 64)))) {
				b++;
				continue;
			}
			size_t e = b;
			while (e < SM_NBLK && (n->alloc[e / 64] & (1ULL << (e % 64))))
				e++;
			size_t off = b * SM_BLOCK, l = (e - b) * SM_BLOCK;
			b = e;
			if (off >= n->size)
				break;
			if (off + l > n->size)
				l = n->size - off;
			const void *src = n->data ? n->data->b + off : zero;
			cr_assert(n->data || l <= sizeof(zero));
			cr_assert_eq(bch_fs_write(c, h, off, src, l), (ssize_t)l, "build %s: %s", n->path,
				     c->err_msg);
		}
		cr_assert_eq(bch_fs_truncate(c, h, n->size), 0);
	}
	free(v);
}
