// SPDX-License-Identifier: GPL-2.0
/*
 * snapshot.c - the snapshot tree, subvolumes, views and snapshot-aware
 * reads of the file btrees (see snapshot.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bcachefs.h"
#include "btree.h"
#include "errcode.h"
#include "extents.h"
#include "inode.h"
#include "snapshot.h"
#include "ec.h"
#include "reflink.h"
#include "super.h"

#define TOUCH_SEEN	4

struct bch_snapshots {
	bool			loaded;
	struct bch_snap_info	*s;		/* sorted by id */
	unsigned		nr;
	uint32_t		**anc;		/* per entry: ancestors() (NULL: not made yet) */
	unsigned		*nr_anc;
	struct bch_subvol_info	*sv;		/* sorted by id */
	unsigned		nr_sv;
	struct bch_subvol_info	root;		/* subvolume 0 without keys */
	bool			ro_refused;	/* a change was refused: read-only subvolume */
	uint64_t		gen;		/* bumped by every load (gc cursors restart) */
	/*
	 * snapshot_touch keys seen in the btree since the last load (they
	 * stay while their snapshot does; a snapshot goes only with a load):
	 * a few, as one change touches a directory and a file by turns.
	 */
	struct bch_bpos		touch_seen[TOUCH_SEEN];
	unsigned		nr_touch_seen, touch_next;
	uint64_t		inum_fresh;	/* invariant (5): no frozen key from here up */
	/* the subvolume the last view entered, with its snapshot's parent */
	const struct bch_subvol_info *view_sv;
	uint32_t		view_snap, view_parent;
};

/* ------------------------------------------------------------ the table */

static void anc_free(struct bch_snapshots *t)
{
	for (unsigned i = 0; t->anc && i < t->nr; i++)
		free(t->anc[i]);
	free(t->anc);
	free(t->nr_anc);
	t->anc = NULL;
	t->nr_anc = NULL;
}

void bch_snapshots_exit(struct bch_fs *c)
{
	if (!c->snaps)
		return;
	anc_free(c->snaps);
	free(c->snaps->s);
	free(c->snaps->sv);
	free(c->snaps);
	c->snaps = NULL;
}

/*
 * Invariant (5): one past the highest inode number of any key in the
 * inodes btree, in any snapshot, now.  Every snapshot with children is
 * frozen already (a snapshot made later reads the table again), and a key
 * of the other file btrees in a snapshot lies under an inode its snapshot
 * sees, so no frozen snapshot holds a key of an inode from here up.  On a
 * read error: UINT64_MAX (every inode asks its parent, as before).
 */
static void inum_fresh_load(struct bch_fs *c, struct bch_snapshots *t)
{
	uint64_t last;
	bool found;

	if (!c->roots->r[BCH_BTREE_ID_inodes].key ||
	    bch_btree_last_offset(c, BCH_BTREE_ID_inodes, POS(0, UINT64_MAX, UINT32_MAX), &last, &found))
		return;
	if (!found)
		t->inum_fresh = 0;
	else if (last != UINT64_MAX)
		t->inum_fresh = last + 1;
}

int bch_snapshots_load(struct bch_fs *c)
{
	struct bch_snapshots *t = c->snaps;
	struct btree_iter it;
	const struct bch_bkey *k;
	int err = 0;

	if (!t && !(t = c->snaps = calloc(1, sizeof(*t))))
		return -ENOMEM;
	anc_free(t);
	t->nr = t->nr_sv = 0;
	t->nr_touch_seen = t->touch_next = 0;
	t->view_sv = NULL;
	t->inum_fresh = UINT64_MAX;
	t->loaded = true;
	t->gen++;
	t->root.id = 0;
	t->root.v = (struct bch_subvolume) { .snapshot = 0, .root_inum = BCH_ROOT_INO,
					     .parent = BCH_SUBVOL_NONE, .dir_subvol = BCH_SUBVOL_NONE };
	if (!c->roots || !c->roots->r[BCH_BTREE_ID_snapshots].key)
		return 0;	/* nr 0: ancestors() is never asked */
	unsigned cap_s = 0, cap_sv = 0;
	/* snapshot and subvolume keys only: the snapshot_touch keys after them are many */
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_snapshots, POS_MIN,
			    POS(BCH_SUBVOL_INO, UINT64_MAX, UINT32_MAX));
	while ((k = bch_btree_iter_next(&it, &err))) {
		if (k->type == BCH_BKEY_snapshot) {
			const struct bch_snapshot *s = bkey_val(k);
			if (t->nr == cap_s) {
				cap_s = cap_s ? 2 * cap_s : 16;
				if (!(t->s = realloc(t->s, cap_s * sizeof(*t->s))))
					abort();
			}
			t->s[t->nr++] = (struct bch_snap_info) {
				.id = (uint32_t)k->p.offset, .parent = s->parent, .flags = s->flags,
				.subvol = s->subvol, .depth = s->depth,
				.children = { s->children[0], s->children[1] }, .created = (int64_t)s->created,
			};
		} else if (k->type == BCH_BKEY_subvolume) {
			if (t->nr_sv == cap_sv) {
				cap_sv = cap_sv ? 2 * cap_sv : 16;
				if (!(t->sv = realloc(t->sv, cap_sv * sizeof(*t->sv))))
					abort();
			}
			t->sv[t->nr_sv].id = (uint32_t)k->p.offset;
			memcpy(&t->sv[t->nr_sv++].v, bkey_val(k), sizeof(struct bch_subvolume));
		}
	}
	bch_btree_iter_exit(&it);
	t->anc = calloc(t->nr + 1, sizeof(*t->anc));
	t->nr_anc = calloc(t->nr + 1, sizeof(*t->nr_anc));
	if (!t->anc || !t->nr_anc)
		abort();
	if (!err)
		inum_fresh_load(c, t);
	return err;
}

static struct bch_snapshots *table(struct bch_fs *c)
{
	if ((!c->snaps || !c->snaps->loaded) && bch_snapshots_load(c))
		return NULL;
	return c->snaps;
}

int bch_subvol_writable(struct bch_fs *c, uint64_t handle)
{
	const struct bch_subvol_info *sv = bch_subvol_get(c, bch_handle_subvol(handle));

	if (!sv)
		return -ESTALE;
	if (!(sv->v.flags & BCH_SUBVOL_RO))
		return 0;
	if (c->snaps)
		c->snaps->ro_refused = true;
	return bch_fs_err(c, -EROFS, "subvolume %u is read-only", sv->id);
}

bool bch_snapshot_ro_refused(struct bch_fs *c)
{
	bool r = c->snaps && c->snaps->ro_refused;

	if (c->snaps)
		c->snaps->ro_refused = false;
	return r;
}

bool bch_fs_has_snapshots(struct bch_fs *c)
{
	struct bch_snapshots *t = table(c);

	return t && t->nr;
}

/* The index of id in an array sorted by id (a u32 first in each element), or -1. */
static int id_index(const void *base, unsigned nr, size_t size, uint32_t id)
{
	unsigned lo = 0, hi = nr;

	while (lo < hi) {
		unsigned m = (lo + hi) / 2;
		uint32_t v = *(const uint32_t *)((const char *)base + m * size);
		if (v == id)
			return m;
		if (v < id)
			lo = m + 1;
		else
			hi = m;
	}
	return -1;
}

const struct bch_snap_info *bch_snap_get(struct bch_fs *c, uint32_t id)
{
	struct bch_snapshots *t = table(c);
	int i = t ? id_index(t->s, t->nr, sizeof(*t->s), id) : -1;

	return i >= 0 ? &t->s[i] : NULL;
}

const struct bch_subvol_info *bch_subvol_get(struct bch_fs *c, uint32_t id)
{
	struct bch_snapshots *t = table(c);

	if (!t)
		return NULL;
	if (!t->nr_sv)
		return id ? NULL : &t->root;
	int i = id_index(t->sv, t->nr_sv, sizeof(*t->sv), id);
	return i >= 0 ? &t->sv[i] : NULL;
}

const struct bch_subvol_info *bch_subvols(struct bch_fs *c, unsigned *nr)
{
	struct bch_snapshots *t = table(c);

	if (!t) {
		*nr = 0;
		return NULL;
	}
	if (!t->nr_sv) {
		*nr = 1;
		return &t->root;
	}
	*nr = t->nr_sv;
	return t->sv;
}

const struct bch_snap_info *bch_snaps(struct bch_fs *c, unsigned *nr)
{
	struct bch_snapshots *t = table(c);

	*nr = t ? t->nr : 0;
	return t ? t->s : NULL;
}

/*
 * Snapshot table entry i's ancestors-or-self, newest first: made at the
 * first question and kept with the table (freed when it is read again).
 */
static const uint32_t *ancestors(struct bch_snapshots *t, unsigned i, unsigned *nr)
{
	if (!t->anc[i]) {
		unsigned n = 0, cap = 8;
		uint32_t *a = malloc(cap * sizeof(*a));
		if (!a)
			abort();
		for (int j = (int)i; j >= 0 && n <= BCH_SNAPSHOT_DEPTH_MAX; ) {
			if (n == cap && !(a = realloc(a, (cap *= 2) * sizeof(*a))))
				abort();
			a[n++] = t->s[j].id;
			if (t->s[j].parent == BCH_SNAPSHOT_NONE)
				break;
			j = id_index(t->s, t->nr, sizeof(*t->s), t->s[j].parent);
		}
		t->anc[i] = a;
		t->nr_anc[i] = n;
	}
	*nr = t->nr_anc[i];
	return t->anc[i];
}

bool bch_snap_is_ancestor(struct bch_fs *c, uint32_t anc, uint32_t s)
{
	struct bch_snapshots *t = table(c);

	if (anc == s)
		return true;
	if (!t || anc > s)	/* parents have smaller IDs */
		return false;
	int i = id_index(t->s, t->nr, sizeof(*t->s), s);
	if (i < 0)
		return false;
	unsigned n;
	const uint32_t *a = ancestors(t, i, &n);
	unsigned lo = 0, hi = n;	/* descending */
	while (lo < hi) {
		unsigned m = (lo + hi) / 2;
		if (a[m] == anc)
			return true;
		if (a[m] > anc)
			lo = m + 1;
		else
			hi = m;
	}
	return false;
}

/* ------------------------------------------------------------ views */

static _Thread_local struct bch_view *view_cur;

static struct bch_view *view_of(struct bch_fs *c)
{
	for (struct bch_view *v = view_cur; v; v = v->prev)
		if (v->c == c)
			return v;
	return NULL;
}

const struct bch_view *bch_view_cur(struct bch_fs *c)
{
	return view_of(c);
}

static uint32_t snap_parent(struct bch_fs *c, uint32_t snap)
{
	const struct bch_snap_info *s = bch_snap_get(c, snap);

	return s ? s->parent : BCH_SNAPSHOT_NONE;
}

int bch_view_enter(struct bch_fs *c, struct bch_view *v, uint64_t *inum)
{
	uint32_t subvol = bch_handle_subvol(*inum);
	const struct bch_view *cur = bch_view_cur(c);

	*inum &= BCH_HANDLE_INUM_MASK;
	if (cur && (!subvol || subvol == cur->subvol)) {
		*v = *cur;		/* an inner call: same view */
	} else {
		struct bch_snapshots *t = table(c);
		const struct bch_subvol_info *sv = t && t->view_sv && t->view_sv->id == subvol
			? t->view_sv : bch_subvol_get(c, subvol);
		if (!sv)
			return bch_fs_err(c, -ESTALE, "subvolume %u does not exist", subvol);
		v->c = c;
		v->subvol = subvol;
		v->snap = sv->v.snapshot;
		if (t && t->view_sv == sv && t->view_snap == v->snap) {
			v->parent = t->view_parent;	/* every call enters a view: no search */
		} else {
			v->parent = snap_parent(c, v->snap);
			if (t) {
				t->view_sv = sv;
				t->view_snap = v->snap;
				t->view_parent = v->parent;
			}
		}
		v->ro = sv->v.flags & BCH_SUBVOL_RO;
		v->raw = false;
	}
	v->prev = view_cur;
	view_cur = v;
	return 0;
}

void bch_view_enter_snap(struct bch_fs *c, struct bch_view *v, uint32_t subvol, uint32_t snap, bool ro)
{
	v->c = c;
	v->subvol = subvol;
	v->snap = snap;
	v->parent = snap_parent(c, snap);
	v->ro = ro;
	v->raw = false;
	v->prev = view_cur;
	view_cur = v;
}

void bch_view_enter_raw(struct bch_fs *c, struct bch_view *v)
{
	const struct bch_subvol_info *sv = bch_subvol_get(c, 0);

	bch_view_enter_snap(c, v, 0, sv ? sv->v.snapshot : 0, false);
	v->raw = true;
}

void bch_view_exit(struct bch_view *v)
{
	view_cur = v->prev;
}

uint32_t bch_view_snap(struct bch_fs *c)
{
	const struct bch_view *v = bch_view_cur(c);

	if (v)
		return v->snap;
	const struct bch_subvol_info *sv = bch_subvol_get(c, 0);
	return sv ? sv->v.snapshot : 0;
}

uint64_t bch_view_handle(struct bch_fs *c, uint64_t inum)
{
	const struct bch_view *v = bch_view_cur(c);

	return v && v->subvol != BCH_SUBVOL_NONE ? bch_handle(v->subvol, inum) : inum;
}

/* ------------------------------------------------------------ reading */

static bool filtered(struct bch_fs *c, unsigned id)
{
	return bch_btree_id_is_file(id) && bch_fs_has_snapshots(c);
}

static struct bch_bpos group_pos(struct bch_bpos p, uint32_t snap)
{
	return POS(p.inode, p.offset, snap);
}

/* The key snapshot snap sees at (pos.inode, pos.offset), whiteouts included. */
static int visible_at(struct bch_fs *c, unsigned id, struct bch_bpos pos, uint32_t snap,
		      struct bch_bkey **ret)
{
	struct bch_bpos at = group_pos(pos, snap), start = group_pos(pos, 0);

	for (;;) {
		struct bch_bkey *k;
		int r = bch_btree_peek_prev(c, id, at, start, &k);
		if (r)
			return r;
		if (bch_snap_is_ancestor(c, k->p.snapshot, snap)) {
			*ret = k;
			return 0;
		}
		uint32_t s = k->p.snapshot;
		free(k);
		if (!s)
			return -BCH_ERR_key_not_found;
		at = group_pos(pos, s - 1);
	}
}

int bch_vlookup(struct bch_fs *c, unsigned id, struct bch_bpos pos, struct bch_bkey **ret)
{
	uint32_t snap = bch_view_snap(c);

	if (!filtered(c, id))
		return bch_btree_lookup(c, id, group_pos(pos, snap), ret);
	struct bch_bkey *k;
	const struct bch_view *v = bch_view_cur(c);
	int r;
	/*
	 * No ancestor of a snapshot the table holds (a view's whose parent it
	 * knew) has a key of an inode from inum_fresh up (invariant (5)):
	 * only snap's own key there can be seen.
	 */
	if (v && v->snap == snap && v->parent != BCH_SNAPSHOT_NONE &&
	    (id == BCH_BTREE_ID_inodes ? pos.offset : pos.inode) >= c->snaps->inum_fresh)
		r = bch_btree_lookup(c, id, group_pos(pos, snap), &k);
	else
		r = visible_at(c, id, pos, snap, &k);
	if (r)
		return r;
	if (k->type == BCH_BKEY_whiteout) {
		free(k);
		return -BCH_ERR_key_not_found;
	}
	*ret = k;
	return 0;
}

int bch_vlookup_buf(struct bch_fs *c, unsigned id, struct bch_bpos pos, struct bch_bkey_buf *buf,
		    const struct bch_bkey **ret)
{
	uint32_t snap = bch_view_snap(c);
	const struct bch_view *v;

	if (!filtered(c, id))
		return bch_btree_lookup_buf(c, id, group_pos(pos, snap), buf, ret);
	/* as bch_vlookup(): an inode from inum_fresh up has only snap's own key */
	v = bch_view_cur(c);
	if (v && v->snap == snap && v->parent != BCH_SNAPSHOT_NONE &&
	    (id == BCH_BTREE_ID_inodes ? pos.offset : pos.inode) >= c->snaps->inum_fresh) {
		int r = bch_btree_lookup_buf(c, id, group_pos(pos, snap), buf, ret);
		if (!r && (*ret)->type == BCH_BKEY_whiteout)
			r = -BCH_ERR_key_not_found;
		return r;
	}
	struct bch_bkey *k;
	int r = bch_vlookup(c, id, pos, &k);
	if (r)
		return r;
	memcpy(buf->w, k, bkey_bytes(k));
	free(k);
	*ret = (const struct bch_bkey *)buf->w;
	return 0;
}

/*
 * Of the position of k (a raw key, freed here): the key snap sees there into
 * *ret (0), nothing seen (1: go on to the next position), or an error.
 */
static int seen_at(struct bch_fs *c, unsigned id, struct bch_bkey *k, uint32_t snap, struct bch_bkey **ret)
{
	struct bch_bkey *v;
	int r = visible_at(c, id, k->p, snap, &v);

	free(k);
	if (r)
		return r == -BCH_ERR_key_not_found ? 1 : r;
	if (v->type == BCH_BKEY_whiteout) {
		free(v);
		return 1;
	}
	*ret = v;
	return 0;
}

int bch_vpeek(struct bch_fs *c, unsigned id, struct bch_bpos pos, struct bch_bpos end,
	      struct bch_bkey **ret)
{
	uint32_t snap = bch_view_snap(c);

	if (!filtered(c, id))
		return bch_btree_peek(c, id, group_pos(pos, snap), end, ret);
	struct bch_bpos at = group_pos(pos, 0), last = group_pos(end, UINT32_MAX);
	for (;;) {
		struct bch_bkey *k;
		int r = bch_btree_peek(c, id, at, last, &k);
		if (r)
			return r;
		struct bch_bpos p = k->p;
		if ((r = seen_at(c, id, k, snap, ret)) <= 0)
			return r;
		at = bpos_successor(group_pos(p, UINT32_MAX));
		if (bpos_cmp(at, last) > 0 || bpos_eq(p, POS_MAX))
			return -BCH_ERR_key_not_found;
	}
}

int bch_vpeek_prev(struct bch_fs *c, unsigned id, struct bch_bpos pos, struct bch_bpos start,
		   struct bch_bkey **ret)
{
	uint32_t snap = bch_view_snap(c);

	if (!filtered(c, id))
		return bch_btree_peek_prev(c, id, group_pos(pos, snap), start, ret);
	struct bch_bpos at = group_pos(pos, UINT32_MAX), first = group_pos(start, 0);
	for (;;) {
		struct bch_bkey *k;
		int r = bch_btree_peek_prev(c, id, at, first, &k);
		if (r)
			return r;
		struct bch_bpos p = group_pos(k->p, 0);
		if ((r = seen_at(c, id, k, snap, ret)) <= 0)
			return r;
		if (bpos_cmp(p, first) <= 0 || (!p.inode && !p.offset))
			return -BCH_ERR_key_not_found;
		at = bpos_predecessor(p);
	}
}

#define VITER_KEY_BYTES	(255 * 8)	/* the largest key (u64s is at most 255) */

/*
 * A filtered iterator's three key buffers (out, a candidate, the next
 * group's first), swapped, never freed per key.  Each hash lookup and each
 * file freed starts iterators, and a 2 KiB malloc misses glibc's per-thread
 * cache: the buffers go back to a short per-thread list instead (freed when
 * the thread ends).
 */
#define VITER_BUFS_KEPT	4

struct viter_bufs {
	struct bch_bkey		*b[VITER_BUFS_KEPT][3];
	unsigned		nr;
};

static pthread_key_t viter_bufs_key;
static pthread_once_t viter_bufs_once = PTHREAD_ONCE_INIT;
static _Thread_local struct viter_bufs *viter_bufs;

static void viter_bufs_free(void *p)
{
	struct viter_bufs *vb = p;

	for (unsigned i = 0; i < vb->nr; i++)
		for (unsigned j = 0; j < 3; j++)
			free(vb->b[i][j]);
	free(vb);
}

static void viter_bufs_key_make(void)
{
	if (pthread_key_create(&viter_bufs_key, viter_bufs_free))
		abort();
}

static void viter_bufs_get(struct bch_viter *it)
{
	struct viter_bufs *vb = viter_bufs;

	if (vb && vb->nr) {
		vb->nr--;
		it->out = vb->b[vb->nr][0];
		it->ahead = vb->b[vb->nr][1];
		it->cand = vb->b[vb->nr][2];
		return;
	}
	it->out = malloc(VITER_KEY_BYTES);
	it->ahead = malloc(VITER_KEY_BYTES);
	it->cand = malloc(VITER_KEY_BYTES);
	if (!it->out || !it->ahead || !it->cand)
		abort();
}

static void viter_bufs_put(struct bch_viter *it)
{
	struct viter_bufs *vb = viter_bufs;

	if (!it->out)
		return;
	if (!vb) {
		pthread_once(&viter_bufs_once, viter_bufs_key_make);
		if ((vb = calloc(1, sizeof(*vb))) && pthread_setspecific(viter_bufs_key, vb)) {
			free(vb);
			vb = NULL;
		}
		viter_bufs = vb;
	}
	if (vb && vb->nr < VITER_BUFS_KEPT) {
		vb->b[vb->nr][0] = it->out;
		vb->b[vb->nr][1] = it->ahead;
		vb->b[vb->nr][2] = it->cand;
		vb->nr++;
	} else {
		free(it->ahead);
		free(it->out);
		free(it->cand);
	}
	it->ahead = it->out = it->cand = NULL;
}

void bch_viter_init(struct bch_viter *it, struct bch_fs *c, unsigned id, struct bch_bpos start,
		    struct bch_bpos end)
{
	/* not memset: the raw iterator's key buffer (2 KiB) needs no zeroing */
	it->c = c;
	it->snap = bch_view_snap(c);
	it->filter = filtered(c, id);
	it->ahead_valid = it->done = false;
	it->ahead = it->out = it->cand = NULL;
	if (it->filter) {
		bch_btree_iter_init(&it->raw, c, id, group_pos(start, 0), group_pos(end, UINT32_MAX));
		viter_bufs_get(it);
	} else {
		bch_btree_iter_init(&it->raw, c, id, group_pos(start, it->snap), end);
	}
}

static void key_copy(struct bch_bkey *dst, const struct bch_bkey *k)
{
	memcpy(dst, k, (size_t)k->u64s * 8);
}

static void key_swap(struct bch_bkey **a, struct bch_bkey **b)
{
	struct bch_bkey *t = *a;
	*a = *b;
	*b = t;
}

const struct bch_bkey *bch_viter_next(struct bch_viter *it, int *err)
{
	if (!it->filter)
		return bch_btree_iter_next(&it->raw, err);
	*err = 0;
	while (!it->done || it->ahead_valid) {
		/* the group's first key into cand */
		if (it->ahead_valid) {
			key_swap(&it->cand, &it->ahead);
			it->ahead_valid = false;
		} else {
			const struct bch_bkey *k = bch_btree_iter_next(&it->raw, err);
			if (!k) {
				it->done = true;
				return NULL;
			}
			key_copy(it->cand, k);
		}
		bool have = false;	/* out holds the best so far */
		struct bch_bpos gp = group_pos(it->cand->p, 0);
		for (;;) {
			const struct bch_bkey *k = it->cand;
			if (k->p.snapshot <= it->snap && bch_snap_is_ancestor(it->c, k->p.snapshot, it->snap) &&
			    (!have || k->p.snapshot > it->out->p.snapshot)) {
				key_swap(&it->out, &it->cand);
				have = true;
			}
			if (it->done)
				break;
			const struct bch_bkey *n = bch_btree_iter_next(&it->raw, err);
			if (!n) {
				it->done = true;
				if (*err)
					return NULL;
				break;
			}
			if (!bpos_eq(group_pos(n->p, 0), gp)) {
				key_copy(it->ahead, n);
				it->ahead_valid = true;
				break;
			}
			key_copy(it->cand, n);
		}
		if (have && it->out->type != BCH_BKEY_whiteout)
			return it->out;
	}
	return NULL;
}

void bch_viter_exit(struct bch_viter *it)
{
	bch_btree_iter_exit(&it->raw);
	viter_bufs_put(it);
}

int bch_bkey_validate_fs(struct bch_fs *c, const struct bch_bkey *k, unsigned btree_id, unsigned level,
			 char *err, size_t errlen)
{
	int r = bch_bkey_validate(k, btree_id, level, err, errlen);

	if (!r && !level && (k->type == BCH_BKEY_reflink_v || k->type == BCH_BKEY_reflink_p) &&
	    !(c->sb->features & BCH_FEATURE_REFLINK))
		return bch_errf(err, errlen, -BCH_ERR_bkey_invalid,
				"%s key in a filesystem without the reflink feature",
				bch_bkey_type_name(k->type));
	if (!r && !level && btree_id == BCH_BTREE_ID_inodes)
		r = bch_inode_validate_fs(c, k, err, errlen);
	if (!r)		/* stripe keys and striped pointers need the erasure_code feature */
		r = bch_ec_validate_fs(c, k, btree_id, level, err, errlen);
	if (r || level || !bch_btree_id_is_file(btree_id) || !k->p.snapshot ||
	    (c->sb->features & BCH_FEATURE_SNAPSHOTS))
		return r;
	return bch_errf(err, errlen, -BCH_ERR_bkey_invalid,
			"key in snapshot %u of a filesystem without snapshots", (unsigned)k->p.snapshot);
}

int bch_inode_get_any_snapshot(struct bch_fs *c, uint64_t inum, struct bch_inode *inode)
{
	int r = bch_inode_get(c, inum, inode);

	if (r != -ENOENT || !bch_fs_has_snapshots(c))
		return r;
	/* not seen by subvolume 0: the newest key of the number in any snapshot */
	struct bch_bkey *k;
	r = bch_btree_peek_prev(c, BCH_BTREE_ID_inodes, POS(0, inum, UINT32_MAX), POS(0, inum, 0), &k);
	if (r)
		return r == -BCH_ERR_key_not_found ? -ENOENT : r;
	if (k->type != BCH_BKEY_inode) {
		free(k);
		return -ENOENT;
	}
	memcpy(inode, bkey_val(k), sizeof(*inode));
	free(k);
	return 0;
}

/* ------------------------------------------------------------ updates */

int bch_snap_trans_fixup(struct bch_fs *c, unsigned id, struct bch_bkey *k)
{
	const struct bch_view *v = bch_view_cur(c);

	if (!v || v->raw || !bch_btree_id_is_file(id))
		return 0;
	if (v->ro) {
		if (c->snaps)
			c->snaps->ro_refused = true;
		return bch_fs_err(c, -EROFS, "subvolume %u is read-only", v->subvol);
	}
	k->p.snapshot = v->snap;
	if (k->type != BCH_BKEY_deleted || v->parent == BCH_SNAPSHOT_NONE)
		return 0;
	/* an inode made since the table was read: no ancestor holds a key of it (invariant (5)) */
	const struct bch_snapshots *t = table(c);
	if (t && (id == BCH_BTREE_ID_inodes ? k->p.offset : k->p.inode) >= t->inum_fresh)
		return 0;
	/* what the parent sees here would show through a plain delete */
	struct bch_bkey *below;
	int r = visible_at(c, id, k->p, v->parent, &below);
	if (r == -BCH_ERR_key_not_found)
		return 0;
	if (r)
		return r;
	if (below->type != BCH_BKEY_whiteout)
		k->type = BCH_BKEY_whiteout;
	free(below);
	return 0;
}

/* Is a key of type type at pos in btree id?  (No copy; a read error says no.) */
static bool key_exists(struct bch_fs *c, unsigned id, struct bch_bpos pos, unsigned type)
{
	struct btree *b;

	if (!c->roots->r[id].key || bch_btree_find_node(c, id, 0, pos, &b))
		return false;
	int i = bch_btree_node_find(b, pos);
	bool r = i < (int)b->nr && bpos_eq(bch_btree_key_pos(b, i), pos) && bch_btree_key_header(b, i).type == type;
	bch_btree_node_put(c, b);
	return r;
}

bool bch_snap_touch_pos(struct bch_fs *c, unsigned id, const struct bch_bkey *k, struct bch_bpos *pos)
{
	const struct bch_view *v = bch_view_cur(c);

	if (!v || v->raw || !bch_btree_id_is_file(id) || k->p.snapshot != v->snap ||
	    v->parent == BCH_SNAPSHOT_NONE)
		return false;
	*pos = POS(BCH_SNAP_TOUCH_INO(v->snap), id == BCH_BTREE_ID_inodes ? k->p.offset : k->p.inode, 0);

	struct bch_snapshots *t = c->snaps;
	for (unsigned i = 0; t && i < t->nr_touch_seen; i++)
		if (bpos_eq(t->touch_seen[i], *pos))
			return false;
	if (!key_exists(c, BCH_BTREE_ID_snapshots, *pos, BCH_BKEY_snapshot_touch))
		return true;
	if (t) {
		t->touch_seen[t->touch_next] = *pos;
		t->touch_next = (t->touch_next + 1) % TOUCH_SEEN;
		if (t->nr_touch_seen < TOUCH_SEEN)
			t->nr_touch_seen++;
	}
	return false;
}

/* ------------------------------------------------------------ changes */

struct bch_bkey *bch_snap_key(uint32_t id, const struct bch_snap_info *s)
{
	struct bch_bkey *k = bch_bkey_alloc(BCH_BKEY_snapshot, POS(BCH_SNAPSHOT_INO, id, 0),
					    sizeof(struct bch_snapshot));
	struct bch_snapshot *v = bkey_val(k);

	v->parent = s->parent;
	v->flags = s->flags;
	v->subvol = s->subvol;
	v->depth = s->depth;
	v->children[0] = s->children[0];
	v->children[1] = s->children[1];
	v->created = (uint64_t)s->created;
	return k;
}

struct bch_bkey *bch_subvol_key(uint32_t id, const struct bch_subvolume *sv)
{
	struct bch_bkey *k = bch_bkey_alloc(BCH_BKEY_subvolume, POS(BCH_SUBVOL_INO, id, 0),
					    sizeof(struct bch_subvolume));

	memcpy(bkey_val(k), sv, sizeof(*sv));
	return k;
}

int bch_snapshots_enable(struct bch_fs *c)
{
	if (bch_fs_has_snapshots(c)) {
		if (c->sb->features & BCH_FEATURE_SNAPSHOTS)
			return 0;
		if (c->read_only)
			return -EROFS;
		/* a crash between the keys and the superblock: the bit first */
		c->sb->features |= BCH_FEATURE_SNAPSHOTS;
		return bch_write_super(c);
	}
	if (c->sb->version < BCH_VERSION_3)
		return bch_fs_err(c, -EOPNOTSUPP, "this filesystem is format version %u; subvolumes and "
				  "snapshots need version %u (format it with this version)",
				  (unsigned)c->sb->version, BCH_VERSION_3);
	if (c->read_only)
		return -EROFS;
	int r;
	/* the snapshots btree is made with the first subvolume */
	if (!c->roots->r[BCH_BTREE_ID_snapshots].key && (r = bch_btree_create_root(c, BCH_BTREE_ID_snapshots)))
		return r;
	struct bch_snap_info s0 = {
		.id = 0, .parent = BCH_SNAPSHOT_NONE, .subvol = 0, .depth = 0,
		.children = { BCH_SNAPSHOT_NONE, BCH_SNAPSHOT_NONE }, .created = bch_now_ns(),
	};
	struct bch_subvolume v0 = {
		.snapshot = 0, .root_inum = BCH_ROOT_INO, .parent = BCH_SUBVOL_NONE,
		.dir_subvol = BCH_SUBVOL_NONE, .created = s0.created,
	};
	struct btree_trans *t;
	if ((r = bch_trans_init(c, &t)))
		return r;
	struct bch_bkey *a = bch_snap_key(0, &s0), *b = bch_subvol_key(0, &v0);
	if (!(r = bch_trans_update(t, BCH_BTREE_ID_snapshots, a)) &&
	    !(r = bch_trans_update(t, BCH_BTREE_ID_snapshots, b)))
		r = bch_trans_commit(t, BCH_TRANS_SYNC);
	free(a);
	free(b);
	bch_trans_exit(t);
	if (!r) {
		c->sb->features |= BCH_FEATURE_SNAPSHOTS;
		r = bch_write_super(c);
	}
	int r2 = bch_snapshots_load(c);
	return r ? r : r2;
}

int bch_snap_alloc_ids(struct bch_fs *c, uint32_t *ids, unsigned nr)
{
	unsigned n;
	const struct bch_snap_info *s = bch_snaps(c, &n);
	uint64_t next = n ? (uint64_t)s[n - 1].id + 1 : 1;

	if (next + nr >= BCH_SNAPSHOT_NONE)
		return bch_fs_err(c, -ENOSPC, "no snapshot IDs left");
	for (unsigned i = 0; i < nr; i++)
		ids[i] = (uint32_t)(next + i);
	return 0;
}

int bch_subvol_alloc_id(struct bch_fs *c, uint32_t *id)
{
	unsigned n;
	const struct bch_subvol_info *sv = bch_subvols(c, &n);

	/*
	 * After the highest: a snapshot's stale copy of a deleted subvolume's
	 * name then names no subvolume (fs_ops checks where a subvolume's name
	 * is, too).  IDs are 16 bits of the file handles: past the top, the
	 * lowest free one.
	 */
	uint32_t want = n ? sv[n - 1].id + 1 : 1;
	if (want > BCH_SUBVOL_MAX)
		for (unsigned i = 0, w = 1; i <= n; i++) {
			if (i == n || sv[i].id > w) {
				want = w;
				break;
			}
			if (sv[i].id == w)
				w++;
		}
	if (want > BCH_SUBVOL_MAX)
		return bch_fs_err(c, -ENOSPC, "no subvolume IDs left (at most %u)", BCH_SUBVOL_MAX);
	*id = want;
	return 0;
}

/* ------------------------------------------------------------ gc */

unsigned bch_snapshot_live_leaves(struct bch_fs *c)
{
	unsigned n, leaves = 0;
	const struct bch_snap_info *s = bch_snaps(c, &n);

	for (unsigned i = 0; i < n; i++)
		leaves += !(s[i].flags & BCH_SNAPSHOT_DELETED) && s[i].children[0] == BCH_SNAPSHOT_NONE &&
			  s[i].children[1] == BCH_SNAPSHOT_NONE;
	return leaves;
}

bool bch_snapshot_gc_pending(struct bch_fs *c)
{
	unsigned n;
	const struct bch_snap_info *s = bch_snaps(c, &n);

	for (unsigned i = 0; i < n; i++)
		if (s[i].flags & BCH_SNAPSHOT_DELETED)
			return true;
	return false;
}

struct gc_state {
	struct bch_fs		*c;
	const struct bch_snap_info *s;
	unsigned		nr;
	bool			*alive;		/* per table entry: a live leaf at or below */
	uint32_t		*leaves;	/* live leaves */
	unsigned		nr_leaves;
};

static int snap_idx(const struct gc_state *g, uint32_t id)
{
	return id_index(g->s, g->nr, sizeof(*g->s), id);
}

static bool live_leaf(const struct bch_snap_info *s)
{
	return !(s->flags & BCH_SNAPSHOT_DELETED) &&
	       s->children[0] == BCH_SNAPSHOT_NONE && s->children[1] == BCH_SNAPSHOT_NONE;
}

static int gc_state_init(struct bch_fs *c, struct gc_state *g)
{
	memset(g, 0, sizeof(*g));
	g->c = c;
	g->s = bch_snaps(c, &g->nr);
	g->alive = calloc(g->nr + 1, sizeof(*g->alive));
	g->leaves = calloc(g->nr + 1, sizeof(*g->leaves));
	if (!g->alive || !g->leaves)
		return -ENOMEM;
	/* children have greater IDs: walk down from the newest, marking parents */
	for (unsigned i = g->nr; i--; ) {
		if (live_leaf(&g->s[i])) {
			g->alive[i] = true;
			g->leaves[g->nr_leaves++] = g->s[i].id;
		}
		if (g->alive[i] && g->s[i].parent != BCH_SNAPSHOT_NONE) {
			int p = snap_idx(g, g->s[i].parent);
			if (p >= 0)
				g->alive[p] = true;
		}
	}
	return 0;
}

static void gc_state_exit(struct gc_state *g)
{
	free(g->alive);
	free(g->leaves);
}

/* Of the keys at one position (group[0..n), snapshots ascending), which are seen by a live leaf? */
static void gc_group(struct gc_state *g, struct bch_bkey **group, unsigned n, bool *needed)
{
	for (unsigned i = 0; i < n; i++) {
		int x = snap_idx(g, group[i]->p.snapshot);
		needed[i] = false;
		if (x < 0 || !g->alive[x])
			continue;
		if (n == 1) {
			needed[i] = true;
			continue;
		}
		for (unsigned l = 0; l < g->nr_leaves && !needed[i]; l++) {
			uint32_t leaf = g->leaves[l];
			if (!bch_snap_is_ancestor(g->c, group[i]->p.snapshot, leaf))
				continue;
			bool deeper = false;
			for (unsigned j = i + 1; j < n && !deeper; j++)
				deeper = bch_snap_is_ancestor(g->c, group[j]->p.snapshot, leaf);
			needed[i] = !deeper;
		}
	}
	/* a whiteout with nothing kept below it hides nothing */
	for (unsigned i = 0; i < n; i++) {
		if (!needed[i] || group[i]->type != BCH_BKEY_whiteout)
			continue;
		bool below = false;
		for (unsigned j = 0; j < i && !below; j++)
			below = needed[j] && group[j]->type != BCH_BKEY_whiteout &&
				bch_snap_is_ancestor(g->c, group[j]->p.snapshot, group[i]->p.snapshot);
		needed[i] = below;
	}
}

#define GC_BATCH	256

struct gc_batch {
	struct bch_bkey		**del;
	unsigned		nr, cap;
	unsigned		ref_weight;	/* the dropped reflink_p keys' weight beyond 1 */
	struct bch_extent_update u;
};

static int gc_flush(struct bch_fs *c, unsigned id, struct gc_batch *b)
{
	struct btree_trans *t;
	int r;

	if (!b->nr)
		return 0;
	if ((r = bch_trans_init(c, &t)))
		return r;
	for (unsigned i = 0; i < b->nr && !r; i++) {
		struct bch_bkey d = { .u64s = BCH_BKEY_U64s, .type = BCH_BKEY_deleted, .p = b->del[i]->p };
		r = bch_trans_update(t, id, &d);
	}
	if (!r)		/* dropped reflink_p keys give back their references (reflink.h) */
		r = bch_reflink_refs_trans(c, t, &b->u);
	if (!r)
		r = bch_trans_commit(t, 0);
	bch_trans_exit(t);
	if (!r)
		bch_extent_update_apply(c, &b->u);
	else
		bch_extent_update_abort(c, &b->u);
	for (unsigned i = 0; i < b->nr; i++)
		free(b->del[i]);
	b->nr = 0;
	b->ref_weight = 0;
	return r;
}

static const unsigned gc_btrees[] = {
	BCH_BTREE_ID_extents, BCH_BTREE_ID_inodes, BCH_BTREE_ID_dirents, BCH_BTREE_ID_xattrs,
};

/*
 * Look at up to *budget positions of btree id from *from, deleting what no
 * live leaf sees; *from is where to go on (*more false: the btree is done).
 */
static int gc_btree(struct gc_state *g, unsigned id, struct gc_batch *b, struct bch_bpos *from,
		    uint64_t *budget, bool *more, uint64_t *seen, uint64_t *freed,
		    void (*progress)(void *, uint64_t), void *priv)
{
	struct bch_fs *c = g->c;
	struct bch_bkey **group = NULL;
	bool *needed = NULL;
	unsigned cap = 0;
	int r = 0;

	for (*more = true; *more && *budget && !r; ) {
		struct btree_iter it;
		const struct bch_bkey *k;
		unsigned n = 0;
		int err = 0;
		bool stopped = false;

		bch_btree_iter_init(&it, c, id, *from, POS_MAX);
		k = bch_btree_iter_next(&it, &err);
		while (k && !r) {
			/* one position's keys */
			struct bch_bpos gp = POS(k->p.inode, k->p.offset, 0);
			n = 0;
			while (k && k->p.inode == gp.inode && k->p.offset == gp.offset) {
				if (n == cap) {
					cap = cap ? 2 * cap : 16;
					group = realloc(group, cap * sizeof(*group));
					needed = realloc(needed, cap * sizeof(*needed));
					if (!group || !needed)
						abort();
				}
				group[n++] = bch_bkey_dup(k);
				k = bch_btree_iter_next(&it, &err);
			}
			++*seen;
			--*budget;
			if (progress && !(*seen & 4095))
				progress(priv, *seen);
			gc_group(g, group, n, needed);
			for (unsigned i = 0; i < n; i++) {
				if (needed[i]) {
					free(group[i]);
					continue;
				}
				if (id == BCH_BTREE_ID_extents)
					bch_extent_account_drop(&b->u, group[i]);
				if (b->nr == b->cap) {
					b->cap = b->cap ? 2 * b->cap : GC_BATCH;
					if (!(b->del = realloc(b->del, b->cap * sizeof(*b->del))))
						abort();
				}
				if (group[i]->type == BCH_BKEY_reflink_p)
					b->ref_weight += bch_reflink_p_weight(c, group[i]) - 1;
				b->del[b->nr++] = group[i];
				++*freed;
			}
			/* a dropped reflink_p changes an indirect extent too (reflink.h) */
			if (b->nr + b->ref_weight >= GC_BATCH || !*budget) {
				/* the tree is about to change, or the step is over: go on after this position */
				struct bch_bpos last = POS(gp.inode, gp.offset, UINT32_MAX);
				*more = !bpos_eq(last, POS_MAX);
				if (*more)
					*from = bpos_successor(last);
				stopped = true;
				break;
			}
		}
		bch_btree_iter_exit(&it);
		if (!stopped)
			*more = false;
		if (!r)
			r = err;
		if (!r)
			r = gc_flush(c, id, b);
	}
	free(group);
	free(needed);
	return r;
}

static const unsigned gc_btrees_nr = sizeof(gc_btrees) / sizeof(gc_btrees[0]);

/* Delete the snapshot_touch keys of snapshot id. */
static int gc_touch(struct bch_fs *c, uint32_t id)
{
	struct bch_bpos from = POS(BCH_SNAP_TOUCH_INO(id), 0, 0), end = POS(BCH_SNAP_TOUCH_INO(id), UINT64_MAX, 0);

	for (;;) {
		struct btree_iter it;
		const struct bch_bkey *k;
		struct bch_bpos del[GC_BATCH];
		unsigned n = 0;
		int err = 0, r;

		bch_btree_iter_init(&it, c, BCH_BTREE_ID_snapshots, from, end);
		while (n < GC_BATCH && (k = bch_btree_iter_next(&it, &err)))
			del[n++] = k->p;
		bch_btree_iter_exit(&it);
		if (err || !n)
			return err;
		struct btree_trans *t;
		if ((r = bch_trans_init(c, &t)))
			return r;
		for (unsigned i = 0; i < n && !r; i++) {
			struct bch_bkey d = { .u64s = BCH_BKEY_U64s, .type = BCH_BKEY_deleted, .p = del[i] };
			r = bch_trans_update(t, BCH_BTREE_ID_snapshots, &d);
		}
		if (!r)
			r = bch_trans_commit(t, 0);
		bch_trans_exit(t);
		if (r || n < GC_BATCH)
			return r;
		from = bpos_successor(del[n - 1]);
	}
}

/* The end of a pass: the dead snapshots' records and keys. */
static int gc_finish(struct gc_state *g)
{
	struct bch_fs *c = g->c;
	int r = 0;

	/* their records of touched inodes */
	for (unsigned i = 0; i < g->nr && !r; i++)
		if (!g->alive[i])
			r = gc_touch(c, g->s[i].id);
	if (r)
		return r;
	/* the snapshots no live leaf is below: their keys are gone now */
	struct btree_trans *t;
	if ((r = bch_trans_init(c, &t)))
		return r;
	bool any = false;
	for (unsigned i = 0; i < g->nr && !r; i++) {
		const struct bch_snap_info *s = &g->s[i];
		if (g->alive[i])
			continue;
		any = true;
		struct bch_bkey d = { .u64s = BCH_BKEY_U64s, .type = BCH_BKEY_deleted,
				      .p = POS(BCH_SNAPSHOT_INO, s->id, 0) };
		r = bch_trans_update(t, BCH_BTREE_ID_snapshots, &d);
		int p = s->parent != BCH_SNAPSHOT_NONE ? snap_idx(g, s->parent) : -1;
		if (!r && p >= 0 && g->alive[p]) {
			struct bch_snap_info pi = g->s[p];
			/* a parent may lose both children in one pass */
			for (unsigned q = 0; q < g->nr; q++)
				if (!g->alive[q] && g->s[q].parent == pi.id)
					for (unsigned j = 0; j < 2; j++)
						if (pi.children[j] == g->s[q].id)
							pi.children[j] = BCH_SNAPSHOT_NONE;
			struct bch_bkey *pk = bch_snap_key(pi.id, &pi);
			r = bch_trans_update(t, BCH_BTREE_ID_snapshots, pk);
			free(pk);
		}
	}
	if (!r && any)
		r = bch_trans_commit(t, BCH_TRANS_SYNC);
	bch_trans_exit(t);
	int r2 = bch_snapshots_load(c);
	return r ? r : r2;
}

int bch_snapshot_gc_step(struct bch_fs *c, struct bch_snapshot_gc_cursor *cur, uint64_t budget,
			 bool *done, void (*progress)(void *priv, uint64_t seen), void *priv)
{
	struct gc_state g;
	int r;

	*done = false;
	if (!bch_fs_has_snapshots(c)) {
		*done = true;
		return 0;
	}
	if (c->read_only)
		return -EROFS;
	if (!cur->started || cur->gen != c->snaps->gen) {
		/* first step, or the table changed (a delete meanwhile): from the start */
		memset(cur, 0, sizeof(*cur));
		cur->started = true;
		cur->gen = c->snaps->gen;
		cur->pos = POS_MIN;
	}
	struct gc_batch *b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	if ((r = gc_state_init(c, &g)))
		goto out;
	while (!r && budget && cur->btree < gc_btrees_nr) {
		bool more;
		r = gc_btree(&g, gc_btrees[cur->btree], b, &cur->pos, &budget, &more, &cur->seen,
			     &cur->freed, progress, priv);
		if (!r && !more) {
			cur->btree++;
			cur->pos = POS_MIN;
		}
	}
	if (!r && cur->btree == gc_btrees_nr) {
		r = gc_finish(&g);
		if (!r) {
			*done = true;
			cur->started = false;
			if (progress)
				progress(priv, cur->seen);
		}
	}
out:
	gc_state_exit(&g);
	bch_extent_update_exit(&b->u);
	free(b->del);
	free(b);
	return r;
}

int bch_snapshot_gc(struct bch_fs *c, void (*progress)(void *priv, uint64_t seen), void *priv,
		    uint64_t *freed)
{
	struct bch_snapshot_gc_cursor cur = { 0 };
	bool done = false;
	int r = 0;

	*freed = 0;
	while (!r && !done)
		r = bch_snapshot_gc_step(c, &cur, UINT64_MAX, &done, progress, priv);
	*freed = cur.freed;
	return r;
}

int bch_snapshot_usage(struct bch_fs *c, uint64_t **out)
{
	unsigned n;
	const struct bch_snap_info *s = bch_snaps(c, &n);
	uint64_t *u = calloc(n + 1, sizeof(*u));
	struct btree_iter it;
	const struct bch_bkey *k;
	int err = 0;

	if (!u)
		return -ENOMEM;
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_extents, POS_MIN, POS_MAX);
	while ((k = bch_btree_iter_next(&it, &err))) {
		if (k->type != BCH_BKEY_extent)
			continue;
		if (!n) {	/* no snapshot keys: everything is snapshot 0's */
			u[0] += (uint64_t)bch_extent_disk_sectors(k) * bch_extent_nr_ptrs(k);
			continue;
		}
		int i = id_index(s, n, sizeof(*s), k->p.snapshot);
		if (i >= 0)
			u[i] += (uint64_t)bch_extent_disk_sectors(k) * bch_extent_nr_ptrs(k);
	}
	bch_btree_iter_exit(&it);
	*out = u;
	return err;
}
