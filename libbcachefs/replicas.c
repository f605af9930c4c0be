// SPDX-License-Identifier: GPL-2.0
/*
 * replicas.c - the superblock's replicas table in memory, kept true by the
 * commit path (see replicas.h for what an entry promises and the
 * invariants).
 *
 * c->replicas mirrors the superblock field: a sorted array of (data type,
 * member bit set).  A mark looks the key's set up (binary search); only a
 * set never seen before costs a superblock write, which is made before the
 * caller can journal the key (invariant 1).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "bcachefs.h"
#include "btree.h"
#include "ec.h"
#include "errcode.h"
#include "journal.h"
#include "replicas.h"
#include "super.h"

static int cmp_entry(unsigned t1, uint64_t d1, unsigned t2, uint64_t d2)
{
	if (t1 != t2)
		return t1 < t2 ? -1 : 1;
	return d1 < d2 ? -1 : d1 > d2;
}

/* Index of the entry, or of where it would go (*found false). */
static size_t find(const struct bch_replicas_cpu *t, unsigned data_type, uint64_t devs, bool *found)
{
	size_t lo = 0, hi = t->nr;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = cmp_entry(t->e[mid].data_type, t->e[mid].devs, data_type, devs);
		if (!c) {
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = false;
	return lo;
}

bool bch_replicas_cpu_has(const struct bch_replicas_cpu *t, unsigned data_type, uint64_t devs)
{
	bool found;

	find(t, data_type, devs, &found);
	return found;
}

int bch_replicas_cpu_add(struct bch_replicas_cpu *t, unsigned data_type, uint64_t devs)
{
	bool found;
	size_t i = find(t, data_type, devs, &found);

	if (found)
		return 0;
	if (t->nr == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 8;
		struct bch_replicas_cpu_entry *n = realloc(t->e, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		t->e = n;
		t->cap = cap;
	}
	memmove(&t->e[i + 1], &t->e[i], (t->nr - i) * sizeof(*t->e));
	t->e[i] = (struct bch_replicas_cpu_entry) { devs, data_type, 1 };
	t->nr++;
	return 1;
}

static void cpu_del(struct bch_replicas_cpu *t, unsigned data_type, uint64_t devs)
{
	bool found;
	size_t i = find(t, data_type, devs, &found);

	if (found) {
		memmove(&t->e[i], &t->e[i + 1], (t->nr - i - 1) * sizeof(*t->e));
		t->nr--;
	}
}

void bch_replicas_cpu_free(struct bch_replicas_cpu *t)
{
	free(t->e);
	memset(t, 0, sizeof(*t));
}

int bch_replicas_from_sb(const struct bch_sb *sb, struct bch_replicas_cpu *t)
{
	struct bch_sb_field *f = bch_sb_field_get(sb, BCH_SB_FIELD_replicas);

	memset(t, 0, sizeof(*t));
	if (!f)
		return 0;
	/* bch_sb_validate() checked the bounds and that every member index is < nr_devices */
	const uint8_t *p = (const uint8_t *)(f + 1);
	const uint8_t *end = (const uint8_t *)f + (size_t)f->u64s * 8;
	while (p + sizeof(struct bch_replicas_entry) <= end) {
		const struct bch_replicas_entry *e = (const void *)p;
		uint64_t devs = 0;

		if (!e->nr_devs)
			break;
		for (unsigned i = 0; i < e->nr_devs && p + sizeof(*e) + i < end; i++)
			if (e->devs[i] < BCH_SB_MEMBERS_MAX)
				devs |= 1ULL << e->devs[i];
		if (devs && bch_replicas_cpu_add(t, e->data_type, devs) < 0) {
			bch_replicas_cpu_free(t);
			return -ENOMEM;
		}
		p += sizeof(*e) + e->nr_devs;
	}
	return 0;
}

int bch_replicas_load(struct bch_fs *c)
{
	struct bch_replicas_cpu *t = calloc(1, sizeof(*t));
	int r;

	if (!t)
		return -ENOMEM;
	if ((r = bch_replicas_from_sb(c->sb, t))) {
		free(t);
		return r;
	}
	bch_replicas_exit(c);
	c->replicas = t;
	return 0;
}

void bch_replicas_exit(struct bch_fs *c)
{
	if (c->replicas) {
		bch_replicas_cpu_free(c->replicas);
		free(c->replicas);
		c->replicas = NULL;
	}
}

/* Write t into c->sb's replicas field (not to disk). */
static int to_sb(struct bch_fs *c, const struct bch_replicas_cpu *t)
{
	size_t bytes = sizeof(struct bch_sb_field);
	int err = 0;

	for (size_t i = 0; i < t->nr; i++)
		bytes += sizeof(struct bch_replicas_entry) + __builtin_popcountll(t->e[i].devs);
	struct bch_sb_field *f = bch_sb_field_resize(&c->sb, &c->sb_bytes, BCH_SB_FIELD_replicas,
						     (bytes + 7) / 8, &err);
	if (!f)
		return bch_fs_err(c, err, "superblock: no room for %zu replicas entries", t->nr);
	uint8_t *p = (uint8_t *)(f + 1);
	memset(p, 0, (size_t)f->u64s * 8 - sizeof(*f));
	for (size_t i = 0; i < t->nr; i++) {
		struct bch_replicas_entry *e = (void *)p;
		e->data_type = t->e[i].data_type;
		e->nr_required = t->e[i].nr_required ? t->e[i].nr_required : 1;
		e->nr_devs = 0;
		for (unsigned d = 0; d < BCH_SB_MEMBERS_MAX; d++)
			if (t->e[i].devs & (1ULL << d))
				e->devs[e->nr_devs++] = d;
		p += sizeof(*e) + e->nr_devs;
	}
	return 0;
}

/* Is dev a member slot in use? */
static bool is_member(const struct bch_fs *c, unsigned dev)
{
	const struct bch_member *m = dev < c->nr_devs ? bch_sb_member(c->sb, dev) : NULL;

	return m && bch_member_exists(m);
}

static uint64_t ptrs_devs(const struct bch_fs *c, const struct bch_extent_ptr *p, unsigned nr,
			  bool skip_cached)
{
	uint64_t devs = 0;

	for (unsigned i = 0; i < nr; i++)
		if (!(skip_cached && (p[i].flags & BCH_EXTENT_PTR_CACHED)) && is_member(c, p[i].dev))
			devs |= 1ULL << p[i].dev;
	return devs;
}

bool bch_replicas_key_devs(const struct bch_fs *c, unsigned btree_id, const struct bch_bkey *k,
			   unsigned *data_type, uint64_t *devs)
{
	if (k->type == BCH_BKEY_btree_ptr) {
		*data_type = BCH_DATA_btree;
		*devs = ptrs_devs(c, ((const struct bch_btree_ptr *)bkey_val(k))->ptrs,
				  bch_btree_ptr_nr(k), false);
	} else if (k->type == BCH_BKEY_extent && btree_id == BCH_BTREE_ID_extents) {
		*data_type = BCH_DATA_user;
		*devs = ptrs_devs(c, ((const struct bch_extent *)bkey_val(k))->ptrs,
				  bch_extent_nr_ptrs(k), true);
	} else if (k->type == BCH_BKEY_reflink_v && btree_id == BCH_BTREE_ID_reflink) {
		unsigned nr = (bkey_val_bytes(k) - sizeof(struct bch_reflink_v)) / sizeof(struct bch_extent_ptr);
		*data_type = BCH_DATA_user;	/* an indirect extent's copies (reflink.h) */
		*devs = ptrs_devs(c, ((const struct bch_reflink_v *)bkey_val(k))->ptrs, nr, true);
	} else {
		return false;
	}
	return *devs != 0;
}

static int mark(struct bch_fs *c, unsigned data_type, uint64_t devs)
{
	if (!c->replicas || bch_replicas_cpu_has(c->replicas, data_type, devs))
		return 0;
	/* invariant 1: on disk before the caller journals anything that uses it */
	int r = bch_replicas_cpu_add(c->replicas, data_type, devs);
	if (r < 0)
		return r;
	if (!(r = to_sb(c, c->replicas)))
		r = bch_write_super(c);
	if (r) {
		cpu_del(c->replicas, data_type, devs);
		(void)to_sb(c, c->replicas);
	}
	return r;
}

/*
 * A key of the extents btree (an extent, or the whiteout of a delete) or a
 * btree pointer replaces older ones, whose member set may have been the
 * last use of an entry: the next gc point recounts (bch_replicas_gc_at_close()).
 */
static void note_change(struct bch_fs *c)
{
	if (c->replicas) {
		c->replicas->marks++;
		c->replicas->maybe_stale = true;
	}
}

int bch_replicas_mark_key(struct bch_fs *c, unsigned btree_id, const struct bch_bkey *k)
{
	unsigned type;
	uint64_t devs;

	if (btree_id == BCH_BTREE_ID_extents || btree_id == BCH_BTREE_ID_reflink ||
	    k->type == BCH_BKEY_btree_ptr)
		note_change(c);
	return bch_replicas_key_devs(c, btree_id, k, &type, &devs) ? mark(c, type, devs) : 0;
}

int bch_replicas_mark_ptrs(struct bch_fs *c, unsigned data_type,
			   const struct bch_extent_ptr *ptrs, unsigned nr)
{
	uint64_t devs = ptrs_devs(c, ptrs, nr, data_type == BCH_DATA_user);

	note_change(c);		/* a new node: an old one (and its set) goes */
	return devs ? mark(c, data_type, devs) : 0;
}

/* ------------------------------------------------------------ recompute */

struct used {
	struct bch_replicas_cpu	*t;
	unsigned		id;
};

static int add_key(struct bch_fs *c, struct bch_replicas_cpu *t, unsigned id, const struct bch_bkey *k)
{
	unsigned type;
	uint64_t devs;

	if (!bch_replicas_key_devs(c, id, k, &type, &devs))
		return 0;
	return bch_replicas_cpu_add(t, type, devs) < 0 ? -ENOMEM : 0;
}

static int used_node(struct bch_fs *c, struct btree *b, void *priv)
{
	struct used *u = priv;
	struct bch_bkey_buf buf;
	int r = 0;

	for (unsigned i = 0; i < b->nr && !r; i++)
		r = add_key(c, u->t, u->id, bch_btree_key(b, i, &buf));
	return r;
}

/*
 * stripes_read (degraded opens): a key a stripe can still rebuild
 * (bch_ec_key_readable()) names no set, whatever its own pointer's member.
 */
static int used_table(struct bch_fs *c, struct bch_replicas_cpu *t, bool stripes_read)
{
	int r = 0;

	memset(t, 0, sizeof(*t));
	for (unsigned id = 0; id < BCH_BTREE_ID_NR && !r; id++) {
		struct btree_root *root = &c->roots->r[id];
		struct used u = { t, id };

		if (!root->key)
			continue;
		r = add_key(c, t, id, root->key);
		/* interior nodes hold the btree pointers; only the extents' leaves are read */
		if (!r && root->level)
			r = bch_btree_walk_levels(c, id, 1, used_node, &u);
	}
	if (!r) {
		struct btree_iter it;
		const struct bch_bkey *k;

		bch_btree_iter_init(&it, c, BCH_BTREE_ID_extents, POS_MIN, POS_MAX);
		while ((k = bch_btree_iter_next(&it, &r)) && !r)
			if (!(stripes_read && bch_ec_key_readable(c, k)))
				r = add_key(c, t, BCH_BTREE_ID_extents, k);
		bch_btree_iter_exit(&it);
		/* and the indirect extents' leaves (reflink.h) */
		if (!r && c->roots->r[BCH_BTREE_ID_reflink].key) {
			bch_btree_iter_init(&it, c, BCH_BTREE_ID_reflink, POS_MIN, POS_MAX);
			while ((k = bch_btree_iter_next(&it, &r)) && !r)
				if (!(stripes_read && bch_ec_key_readable(c, k)))
					r = add_key(c, t, BCH_BTREE_ID_reflink, k);
			bch_btree_iter_exit(&it);
		}
	}
	if (!r)
		r = bch_replicas_used_journal(c, t);
	if (r)
		bch_replicas_cpu_free(t);
	return r;
}

int bch_replicas_used(struct bch_fs *c, struct bch_replicas_cpu *t)
{
	return used_table(c, t, false);
}

int bch_replicas_used_journal(struct bch_fs *c, struct bch_replicas_cpu *t)
{
	struct bch_sb_field_journal *j = bch_sb_get_journal(c->sb);
	size_t nr_runs = j ? ((size_t)j->field.u64s * 8 - sizeof(*j)) / sizeof(j->runs[0]) : 0;

	for (size_t i = 0; i < nr_runs; i++)
		if (j->runs[i].nr && is_member(c, j->runs[i].dev) &&
		    bch_replicas_cpu_add(t, BCH_DATA_journal, 1ULL << j->runs[i].dev) < 0)
			return -ENOMEM;
	return 0;
}

int bch_replicas_set(struct bch_fs *c, const struct bch_replicas_cpu *t, bool complete)
{
	struct bch_replicas_cpu *n = calloc(1, sizeof(*n));
	int r;

	if (!n || (t->nr && !(n->e = malloc(t->nr * sizeof(*n->e))))) {
		free(n);
		return -ENOMEM;
	}
	if (t->nr)
		memcpy(n->e, t->e, t->nr * sizeof(*n->e));
	n->nr = n->cap = t->nr;
	uint64_t compat = c->sb->compat;
	if (complete)
		c->sb->compat |= BCH_COMPAT_REPLICAS_KEPT;
	if ((r = to_sb(c, n)) || (r = bch_write_super(c))) {
		c->sb->compat = compat;
		if (c->replicas)
			(void)to_sb(c, c->replicas);
		bch_replicas_cpu_free(n);
		free(n);
		return r;
	}
	bch_replicas_exit(c);
	c->replicas = n;
	return 0;
}

static bool same_table(const struct bch_replicas_cpu *a, const struct bch_replicas_cpu *b)
{
	if (a->nr != b->nr)
		return false;
	for (size_t i = 0; i < a->nr; i++)
		if (a->e[i].data_type != b->e[i].data_type || a->e[i].devs != b->e[i].devs)
			return false;
	return true;
}

/*
 * A filesystem of one member has no set but {it}: when the table holds
 * exactly (btree, {it}), (user, {it}) and, with its journal buckets,
 * (journal, {it}), and the bucket counts say the
 * member holds live user data (btree nodes it always holds), a walk would
 * find the same table.  So a close after a small change does not read
 * every key of a large filesystem.  The counts only ever spare a walk; an
 * entry is dropped on a walk's word alone.
 */
static bool single_member_current(struct bch_fs *c)
{
	const struct bch_replicas_cpu *t = c->replicas;
	int dev = -1;

	if (!(c->sb->compat & BCH_COMPAT_REPLICAS_KEPT) || t->nr < 2 || t->nr > 3)
		return false;
	for (unsigned d = 0; d < c->nr_devs; d++)
		if (is_member(c, d)) {
			if (dev >= 0)
				return false;
			dev = d;
		}
	if (dev < 0 || !bch_replicas_cpu_has(t, BCH_DATA_btree, 1ULL << dev) ||
	    !bch_replicas_cpu_has(t, BCH_DATA_user, 1ULL << dev))
		return false;
	/* the journal's entry: there when the member has journal buckets */
	struct bch_sb_field_journal *j = bch_sb_get_journal(c->sb);
	size_t nr_runs = j ? ((size_t)j->field.u64s * 8 - sizeof(*j)) / sizeof(j->runs[0]) : 0;
	bool journal = false;
	for (size_t i = 0; i < nr_runs; i++)
		journal |= j->runs[i].nr && j->runs[i].dev == (unsigned)dev;
	if (t->nr != 2u + journal || (journal && !bch_replicas_cpu_has(t, BCH_DATA_journal, 1ULL << dev)))
		return false;
	struct bch_dev_usage u;
	bch_dev_usage_get(c, dev, &u);
	return u.sectors[BCH_DATA_user] > 0;
}

/*
 * One recount: the journal flushed first, so that a crash replays to the
 * state walked (older entries' keys naming a dropped set are overwritten
 * by the flushed ones); then every key walked.  1 when the btrees changed
 * during the walk (a node written back moved, say): the caller tries again.
 */
static int gc_once(struct bch_fs *c, bool flush)
{
	struct bch_replicas_cpu t;
	int r;

	if (single_member_current(c)) {
		c->replicas->maybe_stale = false;
		return 0;
	}
	if (flush && (r = bch_journal_flush(c)))
		return r;
	uint64_t marks = c->replicas->marks;
	if ((r = bch_replicas_used(c, &t))) {
		if (r == -ENOMEM)
			return r;
		/*
		 * A node that cannot be read (its only copies on a missing
		 * member, or damaged: fsck's business), so neither can every
		 * key: the table stays a superset (invariant 1 holds) until a gc
		 * that can read them all.  Not an error of the caller's work.
		 */
		c->err_msg[0] = 0;
		return 0;
	}
	if (c->replicas->marks != marks) {
		bch_replicas_cpu_free(&t);
		return 1;
	}
	if (same_table(c->replicas, &t) && (c->sb->compat & BCH_COMPAT_REPLICAS_KEPT))
		c->replicas->maybe_stale = false;	/* nothing to write */
	else
		r = bch_replicas_set(c, &t, true);
	bch_replicas_cpu_free(&t);
	return r;
}

static int gc(struct bch_fs *c, bool flush)
{
	int r = 1;

	if (c->read_only)
		return -BCH_ERR_fs_read_only;
	if (!c->replicas)
		return 0;
	for (unsigned tries = 0; r == 1 && tries < 4; tries++)
		r = gc_once(c, flush);
	return r == 1 ? 0 : r;	/* the btrees kept changing: the next gc point */
}

int bch_replicas_gc(struct bch_fs *c)
{
	return gc(c, true);
}

int bch_replicas_gc_at_close(struct bch_fs *c)
{
	if (c->read_only || c->emergency_ro || !c->replicas || !c->replicas->maybe_stale)
		return 0;
	/*
	 * Every node is written, so every key is in a durable journal entry
	 * already (nodes are written after the journal up to their keys):
	 * a flush would only write an entry with nothing in it.
	 */
	return gc(c, false);
}

/* ------------------------------------------------------------ degraded */

const char *bch_replicas_devs_text(uint64_t devs, char *buf, size_t len)
{
	unsigned n = __builtin_popcountll(devs), k = 0;
	int w = snprintf(buf, len, "member%s ", n == 1 ? "" : "s");

	for (unsigned d = 0; d < BCH_SB_MEMBERS_MAX && w >= 0 && (size_t)w < len; d++) {
		if (!(devs & (1ULL << d)))
			continue;
		k++;
		w += snprintf(buf + w, len - w, "%s%u", k == 1 ? "" : k == n ? " and " : ", ", d);
	}
	return buf;
}

/* Members present, of durability > 0: copies there count. */
static uint64_t present_devs(struct bch_fs *c)
{
	uint64_t present = 0;

	for (unsigned d = 0; d < c->nr_devs; d++) {
		const struct bch_member *m = bch_sb_member(c->sb, d);
		if (m && bch_member_exists(m) && !bch_dev_missing(c, d) && m->durability)
			present |= 1ULL << d;
	}
	return present;
}

/* What table t says is lost without the missing members (buf, empty if nothing). */
static bool table_lost(struct bch_fs *c, const struct bch_replicas_cpu *t, char *buf, size_t len)
{
	static const struct { unsigned type; const char *what; } kinds[] = {
		{ BCH_DATA_user, "file data" }, { BCH_DATA_btree, "metadata" },
	};
	uint64_t present = present_devs(c);
	int w = 0;

	buf[0] = 0;
	/*
	 * The journal is not judged here: each entry is written to as many
	 * members as metadata_replicas asks, whatever the table says, and
	 * its read finds out what is missing.
	 */
	for (unsigned k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		uint64_t lost = 0;
		for (size_t i = 0; i < t->nr; i++)
			if (t->e[i].data_type == kinds[k].type && !(t->e[i].devs & present))
				lost |= t->e[i].devs;
		if (!lost || w < 0 || (size_t)w >= len)
			continue;
		char devs[200];
		w += snprintf(buf + w, len - w, "%s%s kept only on %s", w ? "; " : "", kinds[k].what,
			      bch_replicas_devs_text(lost, devs, sizeof(devs)));
	}
	return buf[0] != 0;
}

bool bch_replicas_degraded(struct bch_fs *c, char *buf, size_t len, bool *trusted)
{
	buf[0] = 0;
	*trusted = false;
	if (!c->replicas)
		return false;
	*trusted = c->sb->compat & BCH_COMPAT_REPLICAS_KEPT;
	return table_lost(c, c->replicas, buf, len);
}

int bch_replicas_degraded_keys(struct bch_fs *c, char *buf, size_t len, bool *loses)
{
	struct bch_replicas_cpu t;
	int r;

	buf[0] = 0;
	*loses = false;
	if ((r = used_table(c, &t, true)))
		return r;
	*loses = table_lost(c, &t, buf, len);
	if (c->replicas && !same_table(c->replicas, &t))
		c->replicas->maybe_stale = true;	/* read-write: the close drops the rest */
	bch_replicas_cpu_free(&t);
	return 0;
}
