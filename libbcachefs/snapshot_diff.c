// SPDX-License-Identifier: GPL-2.0
/*
 * snapshot_diff.c - the difference between two subvolumes of one snapshot
 * tree, found from the snapshot_touch keys of the snapshots between them
 * (see snapshot_diff.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bcachefs.h"
#include "bkey.h"
#include "btree.h"
#include "errcode.h"
#include "extents.h"
#include "inode.h"
#include "snapshot.h"
#include "snapshot_diff.h"

static const char * const field_names[] = {
#define x(n, b)	[b] = #n,
	BCH_SDIFF_FIELDS()
#undef x
};

const char *bch_sdiff_field_name(unsigned f)
{
	return f < BCH_SDIFF_F_NR ? field_names[f] : "?";
}

/* One side of the comparison: a subvolume's view. */
struct side {
	uint32_t		subvol, snap;
	uint64_t		root;
};

/* What one side holds of an inode. */
struct seen {
	bool			present;
	struct bch_inode	i;
	uint64_t		dir;		/* parent (0 for the root) */
	char			*name;		/* in dir ("" for the root) */
	char			*path;
};

struct u64_set {
	uint64_t		*v;
	size_t			nr, cap;
};

static int set_add(struct u64_set *s, uint64_t v)
{
	if (s->nr == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 256;
		uint64_t *n = realloc(s->v, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		s->v = n;
		s->cap = cap;
	}
	s->v[s->nr++] = v;
	return 0;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void set_sort_unique(struct u64_set *s)
{
	size_t o = 0;

	if (s->nr)	/* empty: s->v may be NULL */
		qsort(s->v, s->nr, sizeof(*s->v), u64_cmp);
	for (size_t i = 0; i < s->nr; i++)
		if (!o || s->v[o - 1] != s->v[i])
			s->v[o++] = s->v[i];
	s->nr = o;
}

/* ------------------------------------------------------------ the snapshot tree */

/* The deepest snapshot that is a or b or an ancestor of both; -EXDEV: none. */
static int common_ancestor(struct bch_fs *c, uint32_t a, uint32_t b, uint32_t *anc)
{
	/* parents have smaller IDs (snapshot.h (1)): climb the greater */
	for (unsigned n = 0; a != b; n++) {
		uint32_t *x = a > b ? &a : &b;
		const struct bch_snap_info *s = bch_snap_get(c, *x);
		if (!s || n > 2 * BCH_SNAPSHOT_DEPTH_MAX)
			return bch_fs_err(c, -EIO, "snapshot %u: missing or in a loop (run fsck)", *x);
		if (s->parent == BCH_SNAPSHOT_NONE)
			return bch_fs_err(c, -EXDEV, "unrelated snapshots: %u and %u have no common "
					  "ancestor (different snapshot trees)", a, b);
		*x = s->parent;
	}
	*anc = a;
	return 0;
}

/* The inodes touched in the snapshots from leaf up to (not including) anc. */
static int collect_touched(struct bch_fs *c, uint32_t leaf, uint32_t anc, struct u64_set *set,
			   unsigned *nr_snaps)
{
	for (uint32_t s = leaf; s != anc;) {
		const struct bch_snap_info *si = bch_snap_get(c, s);
		struct btree_iter it;
		const struct bch_bkey *k;
		int err = 0;

		if (!si || si->parent == BCH_SNAPSHOT_NONE)
			return bch_fs_err(c, -EIO, "snapshot %u: missing on the path to %u (run fsck)", s, anc);
		bch_btree_iter_init(&it, c, BCH_BTREE_ID_snapshots, POS(BCH_SNAP_TOUCH_INO(s), 0, 0),
				    POS(BCH_SNAP_TOUCH_INO(s), UINT64_MAX, UINT32_MAX));
		while (!err && (k = bch_btree_iter_next(&it, &err)))
			if (k->type == BCH_BKEY_snapshot_touch)
				err = set_add(set, k->p.offset);
		bch_btree_iter_exit(&it);
		if (err)
			return err;
		(*nr_snaps)++;
		s = si->parent;
	}
	return 0;
}

/* ------------------------------------------------------------ one side's view */

/* The name of inode i (first link) and its path from root; -ENOENT: unreachable. */
static int inode_name(struct bch_fs *c, uint64_t inum, const struct bch_inode *i, uint64_t root,
		      struct seen *s)
{
	size_t cap = 256, len = 0;
	char *rev = malloc(cap);	/* components, last first, each "/name" reversed later */
	int r = 0;

	if (!rev)
		return -ENOMEM;
	s->dir = inum == root ? 0 : i->dir;
	struct bch_inode cur = *i;
	for (unsigned depth = 0; inum != root; depth++) {
		struct bch_bkey *k;
		if (!cur.dir || depth > 4096) {
			r = -ENOENT;
			break;
		}
		r = bch_vlookup(c, BCH_BTREE_ID_dirents, POS(cur.dir, cur.dir_offset, 0), &k);
		if (r == -BCH_ERR_key_not_found)
			r = -ENOENT;
		if (r)
			break;
		const struct bch_dirent *d = bkey_val(k);
		if (k->type != BCH_BKEY_dirent || d->inum != inum) {
			free(k);
			r = -ENOENT;
			break;
		}
		if (!s->name && !(s->name = strndup((const char *)d->name, d->name_len))) {
			free(k);
			r = -ENOMEM;
			break;
		}
		if (len + d->name_len + 2 > cap) {
			cap = 2 * (len + d->name_len + 2);
			char *n = realloc(rev, cap);
			if (!n) {
				free(k);
				r = -ENOMEM;
				break;
			}
			rev = n;
		}
		for (unsigned j = d->name_len; j-- > 0;)
			rev[len++] = d->name[j];
		rev[len++] = '/';
		free(k);
		inum = cur.dir;
		if (inum != root) {
			r = bch_inode_get(c, inum, &cur);
			if (r)
				break;
		}
	}
	if (!r) {
		if (!len)
			rev[len++] = '/';
		if (!(s->path = malloc(len + 1)))
			r = -ENOMEM;
		for (size_t j = 0; !r && j < len; j++)
			s->path[j] = rev[len - 1 - j];
		if (!r)
			s->path[len] = 0;
		if (!r && !s->name && !(s->name = strdup("")))
			r = -ENOMEM;
	}
	free(rev);
	return r;
}

static void seen_exit(struct seen *s)
{
	free(s->name);
	free(s->path);
	memset(s, 0, sizeof(*s));
}

/* Inode inum as side sd sees it (current view: sd's). */
static int seen_get(struct bch_fs *c, const struct side *sd, uint64_t inum, struct seen *s)
{
	int r = bch_inode_get(c, inum, &s->i);

	if (r == -ENOENT || (!r && (s->i.flags & BCH_INODE_UNLINKED)))
		return 0;
	if (r)
		return r;
	r = inode_name(c, inum, &s->i, sd->root, s);
	if (r == -ENOENT && inum != sd->root && !s->i.dir && s->i.nlink) {
		/* linked, but its first link went (fs_ops unlink): named by number */
		struct bch_inode i = s->i;	/* seen_exit clears it: the inode is still this */
		seen_exit(s);
		s->i = i;
		if (asprintf(&s->path, "?inode:%llu", (unsigned long long)inum) < 0 ||
		    !(s->name = strdup("")))
			return -ENOMEM;
		r = 0;
	} else if (r == -ENOENT) {	/* no name reaches it: not in the tree */
		seen_exit(s);
		return 0;
	}
	if (r)
		return r;
	s->present = true;
	return 0;
}

struct keys {
	struct bch_bkey		**k;
	size_t			nr, cap;
};

static void keys_exit(struct keys *l)
{
	for (size_t i = 0; i < l->nr; i++)
		free(l->k[i]);
	free(l->k);
	memset(l, 0, sizeof(*l));
}

/* The keys of inode inum in btree id that the current view sees (hash whiteouts left out). */
static int keys_get(struct bch_fs *c, unsigned id, uint64_t inum, struct keys *l)
{
	struct bch_viter it;
	const struct bch_bkey *k;
	int err = 0;

	bch_viter_init(&it, c, id, POS(inum, 0, 0), POS(inum, UINT64_MAX, 0));
	while ((k = bch_viter_next(&it, &err))) {
		if (k->type == BCH_BKEY_hash_whiteout)
			continue;
		if (l->nr == l->cap) {
			size_t cap = l->cap ? 2 * l->cap : 16;
			struct bch_bkey **n = realloc(l->k, cap * sizeof(*n));
			if (!n) {
				err = -ENOMEM;
				break;
			}
			l->k = n;
			l->cap = cap;
		}
		if (!(l->k[l->nr] = bch_bkey_dup(k))) {
			err = -ENOMEM;
			break;
		}
		l->nr++;
	}
	bch_viter_exit(&it);
	return err;
}

struct side_keys {
	struct seen		s;
	struct keys		extents, xattrs;
};

/* Everything side sd holds of inum, in its view. */
static int side_read(struct bch_fs *c, const struct side *sd, uint64_t inum, struct side_keys *out,
		     bool keys)
{
	struct bch_view v;
	int r;

	bch_view_enter_snap(c, &v, sd->subvol, sd->snap, true);
	r = seen_get(c, sd, inum, &out->s);
	if (!r && keys && out->s.present) {
		if (!S_ISDIR(out->s.i.mode))
			r = keys_get(c, BCH_BTREE_ID_extents, inum, &out->extents);
		if (!r)
			r = keys_get(c, BCH_BTREE_ID_xattrs, inum, &out->xattrs);
	}
	bch_view_exit(&v);
	return r;
}

static void side_keys_exit(struct side_keys *k)
{
	seen_exit(&k->s);
	keys_exit(&k->extents);
	keys_exit(&k->xattrs);
}

/* ------------------------------------------------------------ comparing */

static bool key_val_eq(const struct bch_bkey *a, const struct bch_bkey *b)
{
	return a->type == b->type && a->u64s == b->u64s &&
	       !memcmp(bkey_val(a), bkey_val(b), bkey_val_bytes(a));
}

/* Do extent keys a and b hold the same data where both cover (invariant (3))? */
static bool same_data(const struct bch_bkey *a, const struct bch_bkey *b)
{
	if (a->type != b->type || a->u64s != b->u64s)
		return false;
	if (a->type != BCH_BKEY_extent)
		return !memcmp(bkey_val(a), bkey_val(b), bkey_val_bytes(a));
	const struct bch_extent *ea = bkey_val(a), *eb = bkey_val(b);
	struct bch_extent_crc ca = ea->crc, cb = eb->crc;
	if ((int64_t)ca.offset - (int64_t)bch_extent_start(a) !=
	    (int64_t)cb.offset - (int64_t)bch_extent_start(b))
		return false;
	ca.offset = cb.offset = 0;
	return !memcmp(&ca, &cb, sizeof(ca)) &&
	       !memcmp(ea->ptrs, eb->ptrs, bkey_val_bytes(a) - sizeof(*ea));
}

static int range_add(struct bch_sdiff_entry *e, size_t *cap, uint64_t start, uint64_t end)
{
	if (e->nr_ranges && e->ranges[e->nr_ranges - 1].end == start) {
		e->ranges[e->nr_ranges - 1].end = end;
		return 0;
	}
	if (e->nr_ranges == *cap) {
		*cap = *cap ? 2 * *cap : 4;
		struct bch_sdiff_range *n = realloc(e->ranges, *cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		e->ranges = n;
	}
	e->ranges[e->nr_ranges++] = (struct bch_sdiff_range) { start, end };
	return 0;
}

/* The byte ranges where the extents of a (OLD) and b (NEW) differ: one sweep over both. */
static int extents_diff(const struct keys *a, const struct keys *b, struct bch_sdiff_entry *e)
{
	size_t i = 0, j = 0, cap = 0;
	uint64_t pos = 0;
	int r = 0;

	while (!r) {
		while (i < a->nr && a->k[i]->p.offset <= pos)
			i++;
		while (j < b->nr && b->k[j]->p.offset <= pos)
			j++;
		if (i == a->nr && j == b->nr)
			break;
		uint64_t as = i < a->nr ? bch_extent_start(a->k[i]) : UINT64_MAX;
		uint64_t bs = j < b->nr ? bch_extent_start(b->k[j]) : UINT64_MAX;
		const struct bch_bkey *ka = as <= pos ? a->k[i] : NULL, *kb = bs <= pos ? b->k[j] : NULL;
		if (!ka && !kb) {
			pos = as < bs ? as : bs;
			continue;
		}
		uint64_t ea = ka ? ka->p.offset : as, eb = kb ? kb->p.offset : bs;
		uint64_t next = ea < eb ? ea : eb;
		if (!(ka && kb && same_data(ka, kb)))
			r = range_add(e, &cap, pos << 9, next << 9);
		pos = next;
	}
	/* sectors past both sizes are not the file's */
	uint64_t size = e->old.size > e->new.size ? e->old.size : e->new.size;
	size_t o = 0;
	for (size_t k = 0; k < e->nr_ranges; k++) {
		if (e->ranges[k].start >= size)
			continue;
		if (e->ranges[k].end > size)
			e->ranges[k].end = size;
		e->ranges[o++] = e->ranges[k];
	}
	e->nr_ranges = o;
	return r;
}

static bool keys_eq(const struct keys *a, const struct keys *b)
{
	if (a->nr != b->nr)
		return false;
	for (size_t i = 0; i < a->nr; i++)
		if (a->k[i]->p.offset != b->k[i]->p.offset || !key_val_eq(a->k[i], b->k[i]))
			return false;
	return true;
}

/* The metadata fields that differ between two versions of an inode. */
static unsigned meta_diff(const struct bch_inode *a, const struct bch_inode *b)
{
	unsigned m = 0;

#define F(field, bit)	if (a->field != b->field) m |= 1U << BCH_SDIFF_F_##bit
	F(mode, mode);
	F(uid, uid);
	F(gid, gid);
	F(atime, atime);
	F(mtime, mtime);
	F(ctime, ctime);
	F(btime, btime);
	F(nlink, nlink);
	F(rdev, rdev);
	F(opt_compression, options);
	F(opt_data_checksum, options);
	F(opt_data_replicas, options);
	F(opt_background_compression, options);
	F(opt_foreground_target, options);
	F(opt_background_target, options);
	F(opt_promote_target, options);
#undef F
	if (bch_inode_opt_raw(a, Opt_erasure_code) != bch_inode_opt_raw(b, Opt_erasure_code))
		m |= 1U << BCH_SDIFF_F_options;		/* kept in flags (bcachefs_format.h) */
	return m;
}

static int entry_push(struct bch_sdiff *d, struct bch_sdiff_entry *e)
{
	if (d->nr == d->cap) {
		size_t cap = d->cap ? 2 * d->cap : 64;
		struct bch_sdiff_entry *n = realloc(d->e, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		d->e = n;
		d->cap = cap;
	}
	d->e[d->nr++] = *e;
	return 0;
}

static void entry_exit(struct bch_sdiff_entry *e)
{
	free(e->old_path);
	free(e->new_path);
	free(e->ranges);
}

/* Compare inode inum in the two views; an entry when it differs. */
static int inode_diff(struct bch_fs *c, const struct side *os, const struct side *ns, uint64_t inum,
		      struct bch_sdiff *d)
{
	struct side_keys o = { 0 }, n = { 0 };
	struct bch_sdiff_entry e = { .inum = inum };
	int r;

	if ((r = side_read(c, os, inum, &o, true)) || (r = side_read(c, ns, inum, &n, true)))
		goto out;
	if (!o.s.present && !n.s.present)
		goto out;
	d->nr_touched++;
	if (o.s.present)
		e.old = o.s.i;
	if (n.s.present)
		e.new = n.s.i;
	if (!o.s.present) {
		e.flags = BCH_SDIFF_ADDED;
	} else if (!n.s.present) {
		e.flags = BCH_SDIFF_DELETED;
	} else {
		if (o.s.dir != n.s.dir || strcmp(o.s.name, n.s.name))
			e.flags |= BCH_SDIFF_RENAMED;
		e.meta = meta_diff(&o.s.i, &n.s.i);
		if (!keys_eq(&o.xattrs, &n.xattrs))
			e.meta |= 1U << BCH_SDIFF_F_xattrs;
		if (e.meta)
			e.flags |= BCH_SDIFF_META;
		if (!S_ISDIR(n.s.i.mode)) {
			if ((r = extents_diff(&o.extents, &n.extents, &e)))
				goto out;
			if (e.nr_ranges || o.s.i.size != n.s.i.size)
				e.flags |= BCH_SDIFF_DATA;
		}
	}
	if (!e.flags)
		goto out;
	e.old_path = o.s.path;
	e.new_path = n.s.path;
	o.s.path = n.s.path = NULL;
	if ((r = entry_push(d, &e)))
		goto out;
	memset(&e, 0, sizeof(e));
out:
	entry_exit(&e);
	side_keys_exit(&o);
	side_keys_exit(&n);
	return r;
}

/* Path of the dirent (dir, offset) naming subvolume sv as side sd sees it; NULL: not there. */
static int subvol_seen(struct bch_fs *c, const struct side *sd, const struct bch_subvol_info *sv,
		       char **path)
{
	struct bch_view v;
	struct bch_bkey *k = NULL;
	struct seen dir = { 0 };
	int r;

	*path = NULL;
	bch_view_enter_snap(c, &v, sd->subvol, sd->snap, true);
	r = bch_vlookup(c, BCH_BTREE_ID_dirents, POS(sv->v.dir, sv->v.dir_offset, 0), &k);
	if (r == -BCH_ERR_key_not_found) {
		r = 0;
		goto out;
	}
	if (r)
		goto out;
	const struct bch_dirent *de = bkey_val(k);
	if (k->type != BCH_BKEY_dirent || de->d_type != BCH_DT_SUBVOL || de->inum != sv->id)
		goto out;
	if ((r = seen_get(c, sd, sv->v.dir, &dir)) || !dir.present)
		goto out;
	size_t dl = strlen(dir.path);
	if (!(*path = malloc(dl + de->name_len + 2))) {
		r = -ENOMEM;
		goto out;
	}
	memcpy(*path, dir.path, dl);
	if (dl > 1)
		(*path)[dl++] = '/';
	memcpy(*path + dl, de->name, de->name_len);
	(*path)[dl + de->name_len] = 0;
out:
	seen_exit(&dir);
	free(k);
	bch_view_exit(&v);
	return r;
}

/*
 * Subvolumes named inside OLD or NEW: added or deleted as one entry each;
 * the directories naming them are compared too (invariant (5)).  Costs a
 * lookup per subvolume of the filesystem.
 */
static int subvols_diff(struct bch_fs *c, const struct side *os, const struct side *ns,
			struct bch_sdiff *d, struct u64_set *dirs)
{
	unsigned nr;
	const struct bch_subvol_info *sv = bch_subvols(c, &nr);
	int r = 0;

	for (unsigned i = 0; i < nr && !r; i++) {
		/*
		 * Any subvolume: its name may lie in OLD's or NEW's tree even when
		 * made in an ancestor of theirs (inode numbers are unique, so a
		 * dirent at (dir, dir_offset) naming it is its name).
		 */
		if (!sv[i].v.dir)
			continue;
		if ((r = set_add(dirs, sv[i].v.dir)))
			break;
		struct bch_sdiff_entry e = { .inum = sv[i].id, .subvol = true };
		if ((r = subvol_seen(c, os, &sv[i], &e.old_path)) ||
		    (r = subvol_seen(c, ns, &sv[i], &e.new_path))) {
			entry_exit(&e);
			break;
		}
		if (!e.old_path != !e.new_path)
			e.flags = e.old_path ? BCH_SDIFF_DELETED : BCH_SDIFF_ADDED;
		else if (e.old_path && strcmp(e.old_path, e.new_path))
			e.flags = BCH_SDIFF_RENAMED;
		e.old.mode = e.new.mode = S_IFDIR | 0755;
		if (e.flags)
			r = entry_push(d, &e);
		if (!e.flags || r)
			entry_exit(&e);
	}
	return r;
}

static int entry_cmp(const void *a, const void *b)
{
	const struct bch_sdiff_entry *x = a, *y = b;
	const char *p = x->new_path ? x->new_path : x->old_path;
	const char *q = y->new_path ? y->new_path : y->old_path;
	int c = strcmp(p, q);

	/* a deletion before an addition at the same path */
	return c ? c : (int)!(x->flags & BCH_SDIFF_DELETED) - (int)!(y->flags & BCH_SDIFF_DELETED);
}

static int side_init(struct bch_fs *c, uint32_t subvol, struct side *sd)
{
	const struct bch_subvol_info *sv = bch_subvol_get(c, subvol);

	if (!sv)
		return bch_fs_err(c, -ESTALE, "subvolume %u does not exist", subvol);
	sd->subvol = subvol;
	sd->snap = sv->v.snapshot;
	sd->root = sv->v.root_inum;
	return 0;
}

int bch_snapshot_diff(struct bch_fs *c, uint32_t old_subvol, uint32_t new_subvol, struct bch_sdiff *d)
{
	struct side os = { 0 }, ns = { 0 };
	struct u64_set set = { 0 };
	int r;

	memset(d, 0, sizeof(*d));
	c->err_msg[0] = 0;
	if ((r = side_init(c, old_subvol, &os)) || (r = side_init(c, new_subvol, &ns)))
		return r;
	d->old_subvol = old_subvol;
	d->new_subvol = new_subvol;
	d->old_snap = os.snap;
	d->new_snap = ns.snap;
	d->old_root = os.root;
	d->new_root = ns.root;
	if ((r = common_ancestor(c, os.snap, ns.snap, &d->ancestor)))
		return r;
	if (os.snap == ns.snap)
		return 0;
	if ((r = collect_touched(c, os.snap, d->ancestor, &set, &d->nr_snaps)) ||
	    (r = collect_touched(c, ns.snap, d->ancestor, &set, &d->nr_snaps)) ||
	    (r = set_add(&set, os.root)) || (r = set_add(&set, ns.root)) ||
	    (r = subvols_diff(c, &os, &ns, d, &set)))
		goto out;
	set_sort_unique(&set);
	for (size_t i = 0; i < set.nr && !r; i++)
		r = inode_diff(c, &os, &ns, set.v[i], d);
	if (!r && d->nr)	/* no change: d->e is NULL, which qsort may not take */
		qsort(d->e, d->nr, sizeof(*d->e), entry_cmp);
out:
	free(set.v);
	return r;
}

void bch_snapshot_diff_exit(struct bch_sdiff *d)
{
	for (size_t i = 0; i < d->nr; i++)
		entry_exit(&d->e[i]);
	free(d->e);
	memset(d, 0, sizeof(*d));
}
