// SPDX-License-Identifier: GPL-2.0
/*
 * fsck_snapshots.c - pass 4, second half: snapshots and subvolumes (on a
 * filesystem that has snapshot keys; bcachefs_format.h "Snapshots and
 * subvolumes" is the spec).  Runs after the btrees were found sound and
 * before the passes over files, which read the file btrees through the
 * views this pass makes sure exist.
 *
 * Checks, in this order (each step works on what the steps before left):
 *   (1) the tree: every snapshot's parent exists, has a smaller ID and lists
 *       it as a child (snapshot_parent_bad); every child listed names the
 *       snapshot as its parent (snapshot_children_wrong); depth is the
 *       parent's + 1 (snapshot_depth_wrong).
 *   (2) subvolumes against leaves: a subvolume's snapshot exists
 *       (subvol_snapshot_missing), is a leaf (subvol_snapshot_interior), is
 *       not marked deleted (subvol_snapshot_deleted), and is seen by no
 *       other subvolume (subvol_snapshot_shared); every live leaf is seen by
 *       a subvolume (snapshot_no_subvol), which its subvol field names, and
 *       interior and deleted snapshots name none (snapshot_subvol_wrong).
 *   (3) subvolumes in their views: the root directory exists in the
 *       subvolume's view (subvol_root_missing); its name, the dirent at
 *       (dir, dir_offset) in the view of dir_subvol, is of type
 *       BCH_DT_SUBVOL and names it (subvol_name_missing).
 *   (4) keys: one walk over the raw keys of the file btrees, a position at
 *       a time: every key lies in a snapshot that exists
 *       (snapshot_key_missing), keys of deleted snapshots are freed
 *       (snapshot_deleted_keys, minor: a delete cut short), a whiteout
 *       hides a key of an ancestor (whiteout_orphan, minor and harmless).
 *       The repair of all three is bch_snapshot_gc(), which deletes every
 *       key no live leaf sees, once at the end.
 *
 * Repairs keep what the user has: a leaf no subvolume sees gets one (named
 * "#subvol<ID>" in the root of subvolume 0) rather than being deleted;
 * two subvolumes on one leaf each get a child of it, as a snapshot would
 * make; a subvolume on an interior snapshot moves to a leaf below it; only
 * a subvolume whose snapshot is gone and held nothing is deleted (one
 * whose keys are still there gets its snapshot back, as a tree of its
 * own), and keys in snapshots that do not exist and no subvolume names
 * (no view sees them).
 *
 * Cost: the snapshot and subvolume tables are small (in memory already);
 * step (4) reads every key of the file btrees once, holding one
 * position's keys at a time.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "bcachefs.h"
#include "btree.h"
#include "errcode.h"
#include "fs_ops.h"
#include "fsck.h"
#include "inode.h"
#include "snapshot.h"
#include "fsck_files.h"

struct snap_state {
	struct bch_fsck_ctx	*ctx;
	struct bch_fs		*c;
	struct bch_snap_info	*s;		/* a copy of the table, sorted by id */
	unsigned		nr;
	bool			*dirty;		/* per entry: rewrite its key */
	bool			*gone;		/* per entry: delete its key */
	/* children dropped because their key is missing: (child, parent) */
	struct { uint32_t child, parent; } lost[16];
	unsigned		nr_lost;
	int			err;
};

static bool fixing(struct snap_state *st, enum bch_fsck_problem p, const char *where,
		   const char *detail)
{
	return bch_fsck_problem(st->ctx, p, where, detail) && !st->c->read_only;
}

static void fix_done(struct snap_state *st, enum bch_fsck_problem p, int r)
{
	if (!r)
		bch_fsck_fixed(st->ctx, p);
	else if (!st->err)
		st->err = r;
}

static int snap_find(struct snap_state *st, uint32_t id)
{
	unsigned lo = 0, hi = st->nr;

	while (lo < hi) {
		unsigned m = (lo + hi) / 2;
		if (st->s[m].id == id)
			return st->gone[m] ? -1 : (int)m;
		if (st->s[m].id < id)
			lo = m + 1;
		else
			hi = m;
	}
	return -1;
}

static bool is_leaf(const struct bch_snap_info *s)
{
	return s->children[0] == BCH_SNAPSHOT_NONE && s->children[1] == BCH_SNAPSHOT_NONE;
}

static int table_copy(struct snap_state *st)
{
	const struct bch_snap_info *s = bch_snaps(st->c, &st->nr);

	free(st->s);
	free(st->dirty);
	free(st->gone);
	st->s = malloc((st->nr + 1) * sizeof(*st->s));
	st->dirty = calloc(st->nr + 1, sizeof(*st->dirty));
	st->gone = calloc(st->nr + 1, sizeof(*st->gone));
	if (!st->s || !st->dirty || !st->gone)
		return -ENOMEM;
	memcpy(st->s, s, st->nr * sizeof(*s));
	return 0;
}

/* Write the snapshot keys changed, in one transaction, and read the table again. */
static int table_write(struct snap_state *st)
{
	struct btree_trans *t;
	bool any = false;
	int r;

	for (unsigned i = 0; i < st->nr; i++)
		any |= st->dirty[i] || st->gone[i];
	if (!any || st->c->read_only)
		return 0;
	if ((r = bch_trans_init(st->c, &t)))
		return r;
	for (unsigned i = 0; i < st->nr && !r; i++) {
		if (st->gone[i]) {
			struct bch_bkey d = { .u64s = BCH_BKEY_U64s, .type = BCH_BKEY_deleted,
					      .p = POS(BCH_SNAPSHOT_INO, st->s[i].id, 0) };
			r = bch_trans_update(t, BCH_BTREE_ID_snapshots, &d);
		} else if (st->dirty[i]) {
			struct bch_bkey *k = bch_snap_key(st->s[i].id, &st->s[i]);
			r = bch_trans_update(t, BCH_BTREE_ID_snapshots, k);
			free(k);
		}
	}
	if (!r)
		r = bch_trans_commit(t, 0);
	bch_trans_exit(t);
	if (!r)
		r = bch_snapshots_load(st->c);
	if (!r)
		r = table_copy(st);
	return r;
}

static int subvol_put(struct bch_fs *c, uint32_t id, const struct bch_subvolume *v)
{
	struct bch_bkey *k = bch_subvol_key(id, v);
	int r = fsck_put_key(c, BCH_BTREE_ID_snapshots, k);

	free(k);
	return r ? r : bch_snapshots_load(c);
}

/* ------------------------------------------------------- (1) the tree */

static void check_tree(struct snap_state *st)
{
	char where[64], detail[160];

	for (unsigned i = 0; i < st->nr; i++) {
		struct bch_snap_info *s = &st->s[i];
		if (s->parent == BCH_SNAPSHOT_NONE)
			continue;
		int p = snap_find(st, s->parent);
		snprintf(where, sizeof(where), "snapshot %u", s->id);
		if (p >= 0 && s->parent < s->id &&
		    (st->s[p].children[0] == s->id || st->s[p].children[1] == s->id))
			continue;
		bool slot = p >= 0 && s->parent < s->id &&
			    (st->s[p].children[0] == BCH_SNAPSHOT_NONE ||
			     st->s[p].children[1] == BCH_SNAPSHOT_NONE);
		snprintf(detail, sizeof(detail), "parent %u %s", s->parent,
			 p < 0 ? "does not exist" : s->parent > s->id ? "has a greater ID"
			 : "does not list it as a child");
		if (!fixing(st, BCH_FSCK_snapshot_parent_bad, where, detail))
			continue;
		if (slot) {
			struct bch_snap_info *ps = &st->s[p];
			ps->children[ps->children[0] == BCH_SNAPSHOT_NONE ? 0 : 1] = s->id;
			st->dirty[p] = true;
		} else {
			s->parent = BCH_SNAPSHOT_NONE;
			st->dirty[i] = true;
		}
		fix_done(st, BCH_FSCK_snapshot_parent_bad, 0);
	}
	for (unsigned i = 0; i < st->nr; i++) {
		struct bch_snap_info *s = &st->s[i];
		for (unsigned j = 0; j < 2; j++) {
			uint32_t ch = s->children[j];
			if (ch == BCH_SNAPSHOT_NONE)
				continue;
			int c = snap_find(st, ch);
			if (c >= 0 && st->s[c].parent == s->id && !(j == 1 && s->children[0] == ch))
				continue;
			snprintf(where, sizeof(where), "snapshot %u", s->id);
			snprintf(detail, sizeof(detail), "child %u %s", ch,
				 c < 0 ? "does not exist" : st->s[c].parent == s->id ? "listed twice"
				 : "names another parent");
			if (fixing(st, BCH_FSCK_snapshot_children_wrong, where, detail)) {
				/* a lost key: a subvolume's may be made again below its parent */
				if (c < 0 && st->nr_lost < sizeof(st->lost) / sizeof(st->lost[0])) {
					st->lost[st->nr_lost].child = ch;
					st->lost[st->nr_lost++].parent = s->id;
				}
				s->children[j] = BCH_SNAPSHOT_NONE;
				st->dirty[i] = true;
				fix_done(st, BCH_FSCK_snapshot_children_wrong, 0);
			}
		}
	}
	/* parents have smaller IDs (mended above): their depth is final when a child's is checked */
	for (unsigned i = 0; i < st->nr; i++) {
		struct bch_snap_info *s = &st->s[i];
		int p = s->parent == BCH_SNAPSHOT_NONE ? -1 : snap_find(st, s->parent);
		uint32_t want = p < 0 ? 0 : st->s[p].depth + 1;
		if (s->depth == want)
			continue;
		snprintf(where, sizeof(where), "snapshot %u", s->id);
		snprintf(detail, sizeof(detail), "depth %u, parent's + 1 is %u", s->depth, want);
		if (fixing(st, BCH_FSCK_snapshot_depth_wrong, where, detail)) {
			s->depth = want;
			st->dirty[i] = true;
			fix_done(st, BCH_FSCK_snapshot_depth_wrong, 0);
		}
	}
}

/* ----------------------------------------- (2) subvolumes and leaves */

/* Delete subvolume id's key, and its name when the name is there and names it. */
static int subvol_delete(struct bch_fs *c, uint32_t id, const struct bch_subvolume *v)
{
	if (v->dir_subvol != BCH_SUBVOL_NONE && bch_subvol_get(c, v->dir_subvol)) {
		const struct bch_subvol_info *dsv = bch_subvol_get(c, v->dir_subvol);
		struct bch_view view;
		struct bch_bkey *k;
		int r;
		bch_view_enter_snap(c, &view, dsv->id, dsv->v.snapshot, false);
		r = bch_vlookup(c, BCH_BTREE_ID_dirents, POS(v->dir, v->dir_offset, 0), &k);
		if (!r) {
			const struct bch_dirent *d = bkey_val(k);
			if (k->type == BCH_BKEY_dirent && d->d_type == BCH_DT_SUBVOL && d->inum == id) {
				r = bch_fs_dirent_delete(c, v->dir, v->dir_offset);
				if (!r)
					r = fsck_adjust_nlink(c, v->dir, -1);
			}
			free(k);
		} else if (r == -BCH_ERR_key_not_found) {
			c->err_msg[0] = 0;
			r = 0;
		}
		bch_view_exit(&view);
		if (r)
			return r;
	}
	struct bch_bkey d = { .u64s = BCH_BKEY_U64s, .type = BCH_BKEY_deleted,
			      .p = POS(BCH_SUBVOL_INO, id, 0) };
	int r = fsck_put_key(c, BCH_BTREE_ID_snapshots, &d);
	return r ? r : bch_snapshots_load(c);
}

/* A new leaf below snapshot index p for subvolume sv (in the copy; written by table_write). */
static int new_leaf(struct snap_state *st, unsigned p, uint32_t sv, uint32_t *id)
{
	int r = bch_snap_alloc_ids(st->c, id, 1);
	struct timespec ts;

	if (r)
		return r;
	/* IDs above every one in the copy too (not yet written) */
	if (st->nr && *id <= st->s[st->nr - 1].id)
		*id = st->s[st->nr - 1].id + 1;
	struct bch_snap_info *n = realloc(st->s, (st->nr + 1) * sizeof(*n));
	bool *d = realloc(st->dirty, (st->nr + 1) * sizeof(*d));
	bool *g = d ? realloc(st->gone, (st->nr + 1) * sizeof(*g)) : NULL;
	if (!n || !d || !g)
		abort();
	st->s = n;
	st->dirty = d;
	st->gone = g;
	clock_gettime(CLOCK_REALTIME, &ts);
	st->s[st->nr] = (struct bch_snap_info) {
		.id = *id, .parent = st->s[p].id, .subvol = sv, .depth = st->s[p].depth + 1,
		.children = { BCH_SNAPSHOT_NONE, BCH_SNAPSHOT_NONE },
		.created = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec,
	};
	st->dirty[st->nr] = true;
	st->gone[st->nr] = false;
	struct bch_snap_info *ps = &st->s[p];
	ps->children[ps->children[0] == BCH_SNAPSHOT_NONE ? 0 : 1] = *id;
	ps->subvol = BCH_SUBVOL_NONE;
	st->dirty[p] = true;
	st->nr++;
	return 0;
}

/* Subvolume sv to snapshot id (its key rewritten). */
static int subvol_move(struct bch_fs *c, const struct bch_subvol_info *sv, uint32_t id)
{
	struct bch_subvolume v = sv->v;

	v.snapshot = id;
	return subvol_put(c, sv->id, &v);
}

/* Subvolume sv on an interior snapshot (index i): to the leaf below that names it, or a new one. */
static int subvol_to_leaf(struct snap_state *st, const struct bch_subvol_info *sv, unsigned i)
{
	struct bch_snap_info *s = &st->s[i];

	for (unsigned j = 0; j < 2; j++) {
		int c = s->children[j] == BCH_SNAPSHOT_NONE ? -1 : snap_find(st, s->children[j]);
		if (c >= 0 && is_leaf(&st->s[c]) && st->s[c].subvol == sv->id &&
		    !(st->s[c].flags & BCH_SNAPSHOT_DELETED))
			return subvol_move(st->c, sv, st->s[c].id);
	}
	if (s->children[0] != BCH_SNAPSHOT_NONE && s->children[1] != BCH_SNAPSHOT_NONE)
		return 1;	/* no room below: left */
	uint32_t id;
	int r = new_leaf(st, i, sv->id, &id);
	if (!r)
		r = table_write(st);
	return r ? r : subvol_move(st->c, sv, id);
}

/* Two subvolumes a and b on leaf index i: each gets a child of it (what a snapshot does). */
static int subvol_split(struct snap_state *st, const struct bch_subvol_info *a,
			const struct bch_subvol_info *b, unsigned i)
{
	uint32_t ida, idb, sa = a->id, sb = b->id;
	int r = new_leaf(st, i, sa, &ida);

	if (!r)
		r = new_leaf(st, i, sb, &idb);
	if (!r)
		r = table_write(st);
	if (!r)
		r = subvol_move(st->c, bch_subvol_get(st->c, sa), ida);
	if (!r)
		r = subvol_move(st->c, bch_subvol_get(st->c, sb), idb);
	return r;
}

/* The inode at the root of what snapshot snap sees: BCH_ROOT_INO, or the first with no parent. */
static uint64_t find_root(struct bch_fs *c, uint32_t snap)
{
	struct bch_view v;
	struct bch_viter it;
	const struct bch_bkey *k;
	uint64_t root = 0;
	int err = 0;

	bch_view_enter_snap(c, &v, BCH_SUBVOL_NONE, snap, true);
	bch_viter_init(&it, c, BCH_BTREE_ID_inodes, POS(0, BCH_ROOT_INO, 0), POS(0, UINT64_MAX, 0));
	while (!root && (k = bch_viter_next(&it, &err)))
		if (k->type == BCH_BKEY_inode && !((const struct bch_inode *)bkey_val(k))->dir &&
		    S_ISDIR(((const struct bch_inode *)bkey_val(k))->mode))
			root = k->p.offset;
	bch_viter_exit(&it);
	bch_view_exit(&v);
	return root ? root : BCH_ROOT_INO;
}

/* A name of subvolume id elsewhere in dir (current view): its slot, or 0. */
static uint64_t find_name(struct bch_fs *c, uint64_t dir, uint32_t id)
{
	struct bch_viter it;
	const struct bch_bkey *k;
	uint64_t slot = 0;
	int err = 0;

	bch_viter_init(&it, c, BCH_BTREE_ID_dirents, POS(dir, 0, 0), POS(dir, UINT64_MAX, 0));
	while (!slot && (k = bch_viter_next(&it, &err))) {
		const struct bch_dirent *d = bkey_val(k);
		if (k->type == BCH_BKEY_dirent && d->d_type == BCH_DT_SUBVOL && d->inum == id)
			slot = k->p.offset;
	}
	bch_viter_exit(&it);
	return slot;
}

/*
 * A name for subvolume id in directory dir of subvolume dsv ("#subvol<ID>"),
 * or the name it has there already; *slot set.  nlink: count the new name
 * in the directory's link count (not when the count still has the name lost).
 */
static int name_subvol(struct bch_fs *c, uint32_t dsv, uint64_t dir, uint32_t id, uint64_t *slot,
		       bool nlink)
{
	const struct bch_subvol_info *d = bch_subvol_get(c, dsv);
	struct bch_view v;
	struct bch_inode di;
	char name[32];
	int r;

	if (!d)
		return -ENOENT;
	snprintf(name, sizeof(name), "#subvol%u", id);
	bch_view_enter_snap(c, &v, d->id, d->v.snapshot, false);
	if ((*slot = find_name(c, dir, id))) {
		bch_view_exit(&v);
		return 0;
	}
	r = bch_fs_dirent_add(c, dir, name, id, BCH_DT_SUBVOL);
	if (!r && nlink)
		r = fsck_adjust_nlink(c, dir, 1);
	if (!r)
		r = bch_inode_get(c, dir, &di);
	if (!r)
		r = bch_fs_dirent_first(c, dir, &di, name, slot);
	bch_view_exit(&v);
	return r;
}

/* A leaf (index i) no subvolume sees: a new subvolume for it, named in subvolume 0's root. */
static int subvol_adopt(struct snap_state *st, unsigned i)
{
	struct bch_fs *c = st->c;
	const struct bch_subvol_info *root = bch_subvol_get(c, 0);
	struct bch_snap_info *s = &st->s[i];
	uint32_t id;
	uint64_t slot;
	struct timespec ts;
	int r;

	if (!root)
		return -ENOENT;
	if (s->subvol != BCH_SUBVOL_NONE && s->subvol && s->subvol <= BCH_SUBVOL_MAX &&
	    !bch_subvol_get(c, s->subvol))
		id = s->subvol;		/* its key was lost: the same ID again */
	else if ((r = bch_subvol_alloc_id(c, &id)))
		return r;
	if ((r = name_subvol(c, 0, root->v.root_inum, id, &slot, true)))
		return r;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct bch_subvolume v = {
		.snapshot = s->id, .flags = 0, .root_inum = find_root(c, s->id),
		.parent = BCH_SUBVOL_NONE, .dir_subvol = 0, .dir = root->v.root_inum,
		.dir_offset = slot, .created = (uint64_t)ts.tv_sec * 1000000000 + ts.tv_nsec,
	};
	if ((r = subvol_put(c, id, &v)))
		return r;
	s->subvol = id;
	st->dirty[i] = true;
	return 0;
}

/* Does any key of the file btrees lie in snapshot snap?  (A walk of them all: rare damage.) */
static int snap_has_keys(struct bch_fs *c, uint32_t snap, bool *ret)
{
	static const unsigned ids[] = {
		BCH_BTREE_ID_extents, BCH_BTREE_ID_inodes, BCH_BTREE_ID_dirents, BCH_BTREE_ID_xattrs,
	};
	int err = 0;

	*ret = false;
	for (unsigned b = 0; b < sizeof(ids) / sizeof(ids[0]) && !*ret && !err; b++) {
		struct btree_iter it;
		const struct bch_bkey *k;
		if (!c->roots->r[ids[b]].key)
			continue;
		bch_btree_iter_init(&it, c, ids[b], POS_MIN, POS_MAX);
		while (!*ret && (k = bch_btree_iter_next(&it, &err)))
			*ret = k->p.snapshot == snap;
		bch_btree_iter_exit(&it);
	}
	return err;
}

/*
 * Snapshot id (its key lost) made again for subvolume sv: a leaf below the
 * parent that listed it, when that is known (check_tree() dropped the
 * link), so the subvolume sees what it saw; else the root of a tree of its
 * own (what its ancestors held is not seen through it).
 */
static int snap_remake(struct snap_state *st, uint32_t id, uint32_t sv)
{
	struct bch_snap_info n = {
		.id = id, .parent = BCH_SNAPSHOT_NONE, .subvol = sv, .depth = 0,
		.children = { BCH_SNAPSHOT_NONE, BCH_SNAPSHOT_NONE },
	};
	int r, p = -1;

	for (unsigned l = 0; l < st->nr_lost && p < 0; l++)
		if (st->lost[l].child == id && st->lost[l].parent < id)
			p = snap_find(st, st->lost[l].parent);
	if (p >= 0 && (st->s[p].children[0] == BCH_SNAPSHOT_NONE ||
		       st->s[p].children[1] == BCH_SNAPSHOT_NONE)) {
		struct bch_snap_info *ps = &st->s[p];
		n.parent = ps->id;
		n.depth = ps->depth + 1;
		ps->children[ps->children[0] == BCH_SNAPSHOT_NONE ? 0 : 1] = id;
		st->dirty[p] = true;
		if ((r = table_write(st)))
			return r;
	}
	struct bch_bkey *k = bch_snap_key(id, &n);
	r = fsck_put_key(st->c, BCH_BTREE_ID_snapshots, k);
	free(k);
	if (!r)
		r = bch_snapshots_load(st->c);
	return r ? r : table_copy(st);
}

static void check_subvols(struct snap_state *st)
{
	struct bch_fs *c = st->c;
	char where[64], detail[160];
	unsigned nr;

	/* each subvolume on a live leaf of its own */
	const struct bch_subvol_info *svs = bch_subvols(c, &nr);
	uint32_t *ids = malloc((nr + 1) * sizeof(*ids));
	if (!ids)
		abort();
	for (unsigned n = 0; n < nr; n++)
		ids[n] = svs[n].id;
	for (unsigned n = 0; n < nr && !st->err; n++) {
		/* a copy: repairs read the table again, which moves its entries */
		const struct bch_subvol_info *cur = bch_subvol_get(c, ids[n]);
		if (!cur)
			continue;
		const struct bch_subvol_info svc = *cur, *sv = &svc;
		int i = snap_find(st, sv->v.snapshot);
		snprintf(where, sizeof(where), "subvolume %u", sv->id);
		snprintf(detail, sizeof(detail), "snapshot %u", sv->v.snapshot);
		if (i < 0) {
			bool keys;
			int r = snap_has_keys(c, sv->v.snapshot, &keys);
			if (r) {
				st->err = r;
				break;
			}
			snprintf(detail, sizeof(detail), "snapshot %u, %s", sv->v.snapshot,
				 keys ? "which keys lie in" : "nothing in it");
			if (!fixing(st, BCH_FSCK_subvol_snapshot_missing, where, detail))
				continue;
			/* its keys are what the user has: their snapshot again, or the subvolume goes */
			if (keys || !sv->id)
				r = snap_remake(st, sv->v.snapshot, sv->id);
			else
				r = subvol_delete(c, sv->id, &sv->v);
			fix_done(st, BCH_FSCK_subvol_snapshot_missing, r);
			continue;
		}
		if (!is_leaf(&st->s[i])) {
			if (fixing(st, BCH_FSCK_subvol_snapshot_interior, where, detail)) {
				int r = subvol_to_leaf(st, sv, i);
				if (r <= 0)
					fix_done(st, BCH_FSCK_subvol_snapshot_interior, r);
			}
			continue;
		}
		if (st->s[i].flags & BCH_SNAPSHOT_DELETED) {
			if (fixing(st, BCH_FSCK_subvol_snapshot_deleted, where, detail)) {
				st->s[i].flags &= ~BCH_SNAPSHOT_DELETED;
				st->dirty[i] = true;
				fix_done(st, BCH_FSCK_subvol_snapshot_deleted, table_write(st));
			}
		}
		/* another subvolume before it on the same leaf */
		for (unsigned m = 0; m < n; m++) {
			const struct bch_subvol_info *o = bch_subvol_get(c, ids[m]);
			if (!o || o->v.snapshot != sv->v.snapshot)
				continue;
			snprintf(detail, sizeof(detail), "snapshot %u, seen by subvolume %u too",
				 sv->v.snapshot, o->id);
			if (fixing(st, BCH_FSCK_subvol_snapshot_shared, where, detail))
				fix_done(st, BCH_FSCK_subvol_snapshot_shared, subvol_split(st, o, sv, i));
			break;
		}
	}
	free(ids);
	if (st->err)
		return;
	/* each live leaf seen by a subvolume, which its field names */
	for (unsigned i = 0; i < st->nr && !st->err; i++) {
		struct bch_snap_info *s = &st->s[i];
		uint32_t owner = BCH_SUBVOL_NONE;
		svs = bch_subvols(c, &nr);
		for (unsigned n = 0; n < nr && owner == BCH_SUBVOL_NONE; n++)
			if (svs[n].v.snapshot == s->id)
				owner = svs[n].id;
		bool live = is_leaf(s) && !(s->flags & BCH_SNAPSHOT_DELETED);
		snprintf(where, sizeof(where), "snapshot %u", s->id);
		if (live && owner == BCH_SUBVOL_NONE) {
			snprintf(detail, sizeof(detail), "names subvolume %d", (int)s->subvol);
			if (fixing(st, BCH_FSCK_snapshot_no_subvol, where, detail))
				fix_done(st, BCH_FSCK_snapshot_no_subvol, subvol_adopt(st, i));
			continue;
		}
		/* a deleted leaf keeps naming its old subvolume until gc: no damage */
		if ((s->flags & BCH_SNAPSHOT_DELETED) || s->subvol == owner)
			continue;
		snprintf(detail, sizeof(detail), "names subvolume %d, seen by %d", (int)s->subvol,
			 (int)owner);
		if (fixing(st, BCH_FSCK_snapshot_subvol_wrong, where, detail)) {
			s->subvol = owner;
			st->dirty[i] = true;
			fix_done(st, BCH_FSCK_snapshot_subvol_wrong, 0);
		}
	}
}

/* --------------------------------- (3) subvolumes: root directory, name */

static void check_subvol_root(struct snap_state *st, const struct bch_subvol_info *sv)
{
	struct bch_fs *c = st->c;
	struct bch_inode in;
	struct bch_view v;
	char where[64], detail[96];

	bch_view_enter_snap(c, &v, sv->id, sv->v.snapshot, false);
	int r = bch_inode_get(c, sv->v.root_inum, &in);
	if (r == -ENOENT || r == -BCH_ERR_key_not_found || (!r && !S_ISDIR(in.mode))) {
		c->err_msg[0] = 0;
		snprintf(where, sizeof(where), "subvolume %u", sv->id);
		snprintf(detail, sizeof(detail), "root inode %" PRIu64 " %s", (uint64_t)sv->v.root_inum,
			 r ? "missing" : "not a directory");
		if (fixing(st, BCH_FSCK_subvol_root_missing, where, detail)) {
			bch_inode_init(c, &in, sv->v.root_inum, S_IFDIR | 0755, 0, 0, 0, NULL);
			fix_done(st, BCH_FSCK_subvol_root_missing,
				 fsck_update_inode(c, sv->v.root_inum, &in));
		}
	} else if (r && !st->err) {
		st->err = r;
	}
	bch_view_exit(&v);
}

/* The dirent at (dir, slot) in the current view: a name of subvolume id? */
static bool names_subvol(struct bch_fs *c, uint64_t dir, uint64_t slot, uint32_t id)
{
	struct bch_bkey *k;
	bool ok = false;

	if (!bch_vlookup(c, BCH_BTREE_ID_dirents, POS(dir, slot, 0), &k)) {
		const struct bch_dirent *d = bkey_val(k);
		ok = k->type == BCH_BKEY_dirent && d->d_type == BCH_DT_SUBVOL && d->inum == id;
		free(k);
	}
	c->err_msg[0] = 0;
	return ok;
}

static void check_subvol_name(struct snap_state *st, uint32_t id)
{
	struct bch_fs *c = st->c;
	const struct bch_subvol_info *sv = bch_subvol_get(c, id);
	const struct bch_subvol_info *dsv;
	char where[64], detail[160];
	struct bch_view v;

	if (!sv || !id)
		return;		/* subvolume 0 has no name */
	dsv = sv->v.dir_subvol != BCH_SUBVOL_NONE && sv->v.dir_subvol != id
		? bch_subvol_get(c, sv->v.dir_subvol) : NULL;
	if (dsv) {
		bch_view_enter_snap(c, &v, dsv->id, dsv->v.snapshot, false);
		bool ok = names_subvol(c, sv->v.dir, sv->v.dir_offset, id);
		bch_view_exit(&v);
		if (ok)
			return;
	}
	snprintf(where, sizeof(where), "subvolume %u", id);
	snprintf(detail, sizeof(detail), "subvolume %d directory %" PRIu64 " offset %" PRIu64 ": %s",
		 (int)sv->v.dir_subvol, (uint64_t)sv->v.dir, (uint64_t)sv->v.dir_offset,
		 dsv ? "no entry naming it" : "no such subvolume");
	if (!fixing(st, BCH_FSCK_subvol_name_missing, where, detail))
		return;
	struct bch_subvolume nv = sv->v;
	bool counted = false;	/* the directory's link count has the lost name */
	int r = 0;
	uint64_t slot = 0;
	if (dsv) {
		/* its name elsewhere in the same directory: point at it */
		bch_view_enter_snap(c, &v, dsv->id, dsv->v.snapshot, false);
		struct bch_inode di;
		if (!bch_inode_get(c, sv->v.dir, &di) && S_ISDIR(di.mode))
			counted = true;
		else
			nv.dir = dsv->v.root_inum;	/* its directory is gone: the root */
		c->err_msg[0] = 0;
		bch_view_exit(&v);
	} else {
		nv.dir_subvol = 0;
		nv.dir = bch_subvol_get(c, 0)->v.root_inum;
	}
	if (!slot)
		r = name_subvol(c, nv.dir_subvol, nv.dir, id, &slot, !counted);
	nv.dir_offset = slot;
	if (!r)
		r = subvol_put(c, id, &nv);
	fix_done(st, BCH_FSCK_subvol_name_missing, r);
}

/* ----------------------------------------------------------- (4) keys */

struct key_scan {
	struct snap_state	*st;
	unsigned		btree;
	/* snapshots that do not exist, with their key counts (few) */
	struct { uint32_t snap; uint64_t nr; } *missing;
	unsigned		nr_missing;
	uint64_t		deleted, whiteouts;
};

/* Is snapshot id marked deleted, or has no live leaf at or below it? */
static bool snap_dead(struct snap_state *st, int i)
{
	const struct bch_snap_info *s = &st->s[i];

	if (is_leaf(s))
		return s->flags & BCH_SNAPSHOT_DELETED;
	for (unsigned j = 0; j < 2; j++) {
		int c = s->children[j] == BCH_SNAPSHOT_NONE ? -1 : snap_find(st, s->children[j]);
		if (c > i && !snap_dead(st, c))
			return false;
	}
	return true;
}

static void scan_group(struct key_scan *ks, struct bch_bkey **g, unsigned n, const bool *dead)
{
	struct snap_state *st = ks->st;

	for (unsigned i = 0; i < n; i++) {
		uint32_t snap = g[i]->p.snapshot;
		int x = snap_find(st, snap);
		if (x < 0) {
			unsigned m = 0;
			while (m < ks->nr_missing && ks->missing[m].snap != snap)
				m++;
			if (m == ks->nr_missing) {
				ks->missing = realloc(ks->missing, (m + 1) * sizeof(*ks->missing));
				if (!ks->missing)
					abort();
				ks->missing[m].snap = snap;
				ks->missing[m].nr = 0;
				ks->nr_missing++;
			}
			ks->missing[m].nr++;
			continue;
		}
		if (dead[x]) {
			ks->deleted++;
			continue;
		}
		if (g[i]->type != BCH_BKEY_whiteout)
			continue;
		bool below = false;
		for (unsigned j = 0; j < i && !below; j++)
			below = g[j]->type != BCH_BKEY_whiteout &&
				bch_snap_is_ancestor(st->c, g[j]->p.snapshot, snap);
		ks->whiteouts += !below;
	}
}

static int scan_btree(struct key_scan *ks, const bool *dead)
{
	struct bch_fs *c = ks->st->c;
	struct btree_iter it;
	const struct bch_bkey *k;
	struct bch_bkey **g = NULL;
	unsigned n = 0, cap = 0;
	int err = 0;

	bch_btree_iter_init(&it, c, ks->btree, POS_MIN, POS_MAX);
	k = bch_btree_iter_next(&it, &err);
	while (k) {
		struct bch_bpos gp = k->p;
		n = 0;
		while (k && k->p.inode == gp.inode && k->p.offset == gp.offset) {
			if (n == cap) {
				cap = cap ? 2 * cap : 16;
				if (!(g = realloc(g, cap * sizeof(*g))))
					abort();
			}
			g[n++] = bch_bkey_dup(k);
			k = bch_btree_iter_next(&it, &err);
		}
		scan_group(ks, g, n, dead);
		for (unsigned i = 0; i < n; i++)
			free(g[i]);
	}
	bch_btree_iter_exit(&it);
	free(g);
	return err;
}

static const char *btree_name(unsigned id)
{
	switch (id) {
	case BCH_BTREE_ID_extents:	return "extents";
	case BCH_BTREE_ID_inodes:	return "inodes";
	case BCH_BTREE_ID_dirents:	return "dirents";
	default:			return "xattrs";
	}
}

static int check_keys(struct snap_state *st)
{
	static const unsigned ids[] = {
		BCH_BTREE_ID_extents, BCH_BTREE_ID_inodes, BCH_BTREE_ID_dirents, BCH_BTREE_ID_xattrs,
	};
	bool *dead = calloc(st->nr + 1, sizeof(*dead));
	bool gc = false;
	int r = 0;

	if (!dead)
		return -ENOMEM;
	for (unsigned i = 0; i < st->nr; i++)
		dead[i] = snap_dead(st, i);
	for (unsigned b = 0; b < sizeof(ids) / sizeof(ids[0]) && !r && !st->ctx->cancelled; b++) {
		struct key_scan ks = { .st = st, .btree = ids[b] };
		char where[64], detail[96];
		if (!st->c->roots->r[ids[b]].key)
			continue;
		if ((r = scan_btree(&ks, dead)))
			break;
		for (unsigned m = 0; m < ks.nr_missing; m++) {
			snprintf(where, sizeof(where), "%s of snapshot %u", btree_name(ids[b]),
				 ks.missing[m].snap);
			snprintf(detail, sizeof(detail), "%" PRIu64 " key%s", ks.missing[m].nr,
				 ks.missing[m].nr == 1 ? "" : "s");
			if (fixing(st, BCH_FSCK_snapshot_key_missing, where, detail)) {
				bch_fsck_fixed(st->ctx, BCH_FSCK_snapshot_key_missing);
				gc = true;
			}
		}
		free(ks.missing);
		if (ks.deleted) {
			snprintf(where, sizeof(where), "%s", btree_name(ids[b]));
			snprintf(detail, sizeof(detail), "%" PRIu64 " key%s of deleted snapshots",
				 ks.deleted, ks.deleted == 1 ? "" : "s");
			if (fixing(st, BCH_FSCK_snapshot_deleted_keys, where, detail)) {
				bch_fsck_fixed(st->ctx, BCH_FSCK_snapshot_deleted_keys);
				gc = true;
			}
		}
		if (ks.whiteouts) {
			snprintf(where, sizeof(where), "%s", btree_name(ids[b]));
			snprintf(detail, sizeof(detail), "%" PRIu64 " whiteout%s", ks.whiteouts,
				 ks.whiteouts == 1 ? "" : "s");
			if (fixing(st, BCH_FSCK_whiteout_orphan, where, detail)) {
				bch_fsck_fixed(st->ctx, BCH_FSCK_whiteout_orphan);
				gc = true;
			}
		}
	}
	free(dead);
	/* a delete cut short with no keys left: only the snapshot keys go */
	if (!r && !gc && !st->c->read_only && bch_snapshot_gc_pending(st->c) &&
	    st->ctx->mode != BCH_FSCK_NO)
		gc = true;
	if (!r && gc) {
		uint64_t freed;
		r = bch_snapshot_gc(st->c, NULL, NULL, &freed);
	}
	return r;
}

/* ------------------------------------------------------------- the pass */

int bch_fsck_snapshots(struct bch_fsck_ctx *ctx, struct bch_fs *c)
{
	struct snap_state st = { .ctx = ctx, .c = c };
	int r;

	if (!bch_fs_has_snapshots(c))
		return 0;
	if (ctx->progress)
		ctx->progress(ctx, 4, "snapshots and subvolumes");
	if ((r = table_copy(&st)))
		goto out;
	check_tree(&st);
	if (!st.err)
		st.err = table_write(&st);
	if (!st.err)
		check_subvols(&st);
	if (!st.err)
		st.err = table_write(&st);
	if (!st.err) {
		unsigned nr;
		const struct bch_subvol_info *svs = bch_subvols(c, &nr);
		uint32_t *ids = malloc((nr + 1) * sizeof(*ids));
		if (!ids)
			abort();
		for (unsigned n = 0; n < nr; n++)
			ids[n] = svs[n].id;
		for (unsigned n = 0; n < nr && !st.err && !ctx->cancelled; n++) {
			const struct bch_subvol_info *sv = bch_subvol_get(c, ids[n]);
			const struct bch_snap_info *s = sv ? bch_snap_get(c, sv->v.snapshot) : NULL;
			if (s && is_leaf(s))
				check_subvol_root(&st, sv);
		}
		for (unsigned n = 0; n < nr && !st.err && !ctx->cancelled; n++)
			check_subvol_name(&st, ids[n]);
		free(ids);
	}
	if (!st.err && !ctx->cancelled && !(st.err = table_copy(&st)))
		st.err = check_keys(&st);
	r = st.err;
out:
	if (r && !ctx->err_msg[0])
		snprintf(ctx->err_msg, sizeof(ctx->err_msg), "snapshots: %.480s",
			 c->err_msg[0] ? c->err_msg : bch_err_str(r));
	free(st.s);
	free(st.dirty);
	free(st.gone);
	return r;
}
