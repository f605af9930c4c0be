// SPDX-License-Identifier: GPL-2.0
/*
 * fsck_btree.c - passes 3 and 4: btree topology and keys.
 *
 * Checks (every btree, every node, from the root down)
 *   btree_node_unreadable  a node that cannot be read or fails validation
 *                          (checksum, identity, a key that is invalid or out
 *                          of order or outside the node's range): pass 4's
 *                          key checks happen as each node is read
 *   btree_replica_bad      a copy of a node is bad while another is good:
 *                          the node is rewritten (all copies) from the good one
 *   bkey_invalid           (pass 4) a key of a leaf that fails its type's
 *                          validation: left out when the node was read (fsck
 *                          mode), and the node rewritten without it
 *   btree_topology         an interior node whose children do not cover its
 *                          range exactly: the first child must start at the
 *                          node's min_key, each next child right after the
 *                          previous one, the last end at the node's max_key
 *
 *   btree_node_scan_found  leaves of a lost node found by scanning the
 *                          devices (btree_node_scan.c): their keys go into
 *                          the rebuilt btree
 *
 * Every btree is checked first; then, if a node could not be read, the
 * devices are scanned once for nodes (btree_node_scan.c) and the leaves that
 * fill the lost ranges are chosen (newest wins; rules there).  With -y their
 * space and, for extents, their data are counted as in use before anything
 * is allocated, so the rebuild cannot write over what it is about to copy;
 * then each damaged btree is rebuilt.
 *
 * Repair: the btree is rebuilt from every leaf that can still be read and
 * the pieces of found leaves (in key order, through ordinary transactions
 * into a new empty tree); the keys of leaves that cannot be read and were
 * not found are lost and reported with their range.  The old tree's nodes
 * and the found leaves are then freed.  Memory: the address of every
 * readable leaf (for the scan: which found leaves the tree still reaches),
 * when repairing the list of node pointers (one key per node, to free them
 * and to copy the leaves' keys from), and one record per node the scan
 * found, never the keys themselves.  Checking only (-n), nothing is
 * rebuilt: no pointer is kept, an interior node's children are walked in
 * the node itself, held (nothing changes it), not in a copy, and a leaf is
 * checked streamed, a piece at a time (check_leaf_streamed()), unless it is
 * not the common kind or something is wrong with it: then it is read whole,
 * and that read reports it.
 */
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "alloc_btree.h"
#include "bcachefs.h"
#include "btree.h"
#include "btree_prefetch.h"
#include "btree_node_scan.h"
#include "crypt.h"
#include "ec.h"
#include "errcode.h"
#include "extents.h"
#include "fsck.h"
#include "reflink.h"
#include "replicas.h"
#include "snapshot.h"

struct ptr_list {
	struct bch_bkey	**k;
	size_t		nr, cap;
};

/* Where a readable leaf's copy lies (one per copy): reachable() below. */
struct leaf_addr {
	uint64_t	offset, seq;
	unsigned	dev;
};

static void ptr_list_add(struct ptr_list *l, const struct bch_bkey *k)
{
	if (l->nr == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 64;
		l->k = realloc(l->k, l->cap * sizeof(*l->k));
		if (!l->k)
			abort();
	}
	l->k[l->nr++] = bch_bkey_dup(k);
}

/* The node at index i moved (rewritten): the list must name where it is now. */
static void ptr_list_set(struct ptr_list *l, size_t i, const struct bch_bkey *k)
{
	free(l->k[i]);
	l->k[i] = bch_bkey_dup(k);
}

static void ptr_list_free(struct ptr_list *l)
{
	for (size_t i = 0; i < l->nr; i++)
		free(l->k[i]);
	free(l->k);
}

struct check_state {
	struct bch_fsck_ctx	*ctx;
	unsigned		id;
	bool			rebuild;	/* a problem the user agreed to repair */
	struct {
		size_t		*i;		/* repairing: readable leaves, in key order: */
		size_t		nr, cap;	/* their entries in nodes (each pointer kept once) */
	}			leaves;
	struct ptr_list		nodes;		/* repairing: every node pointer seen (to free) */
	struct {
		struct leaf_addr *a;		/* every copy of every readable leaf */
		size_t		nr, cap;
	}			addrs;
	uint64_t		nodes_checked;
	bool			stream;		/* leaves checked streamed (bch_leaf_stream_allowed(),
						 * decided once: nothing changes while checking) */
	uint64_t		approved[BCH_FSCK_PROBLEM_NR];	/* problems to be repaired */
	struct bch_lost_range	*lost;		/* ranges of nodes that could not be read */
	size_t			nr_lost, cap_lost;
	struct bch_node_pick	*picks;		/* found leaves that fill them (approved) */
	size_t			nr_picks;
};

static void lost_add(struct check_state *s, unsigned level, const struct bch_bkey *ptr)
{
	const struct bch_btree_ptr *bp = bkey_val(ptr);

	if (s->nr_lost == s->cap_lost) {
		s->cap_lost = s->cap_lost ? s->cap_lost * 2 : 8;
		s->lost = realloc(s->lost, s->cap_lost * sizeof(*s->lost));
		if (!s->lost)
			abort();
	}
	s->lost[s->nr_lost++] = (struct bch_lost_range) {
		.min_key = bp->min_key, .max_key = ptr->p, .level = level, .seq = bp->seq,
	};
}

static void problem(struct check_state *s, enum bch_fsck_problem p, const char *where,
		    const char *detail)
{
	if (bch_fsck_problem(s->ctx, p, where, detail)) {
		s->rebuild = true;
		s->approved[p]++;
	}
}

static void where_of(unsigned id, unsigned level, const struct bch_bkey *ptr, char *buf, size_t len,
		     bool with_location)
{
	const struct bch_btree_ptr *bp = bkey_val(ptr);
	char lo[80], hi[80];

	bch_bpos_to_text(bp->min_key, lo, sizeof(lo));
	bch_bpos_to_text(ptr->p, hi, sizeof(hi));
	if (with_location)
		snprintf(buf, len, "%s btree level %u node %s..%s at %u:%" PRIu64,
			 bch_btree_id_name(id), level, lo, hi, bp->ptrs[0].dev,
			 (uint64_t)bp->ptrs[0].offset);
	else
		snprintf(buf, len, "%s btree level %u node %s..%s", bch_btree_id_name(id), level, lo, hi);
}

/*
 * fsck -n of a clean filesystem: the buckets an extents leaf's keys use are
 * counted here rather than at open (bch_extents_mark_all() would read every
 * leaf once more); errors are pass 5's to report.
 */
/* The pointers of an extent, or of an indirect extent (reflink.h), counted in their buckets. */
static void mark_key(struct bch_fs *c, const struct bch_bkey *k)
{
	struct bch_bkey *x = k->type == BCH_BKEY_reflink_v ? bch_reflink_v_to_extent(k) : NULL;

	if (x)
		k = x;
	if (k->type == BCH_BKEY_stripe)
		bch_ec_mark_stripe(c, k);	/* parity blocks (ec.h) */
	if (k->type == BCH_BKEY_extent) {
		const struct bch_extent *e = bkey_val(k);
		unsigned sectors = bch_extent_disk_sectors(k);
		for (unsigned p = 0; p < bch_extent_nr_ptrs(k); p++)
			bch_alloc_mark_data(c, &e->ptrs[p], e->crc.compressed_sectors, sectors);
	}
	free(x);
}

static bool data_btree(unsigned id)
{
	return id == BCH_BTREE_ID_extents || id == BCH_BTREE_ID_reflink;
}

static void mark_extents(struct bch_fs *c, struct btree *b)
{
	struct bch_bkey_buf buf;

	for (unsigned i = 0; i < b->nr; i++)
		mark_key(c, bch_btree_key(b, i, &buf));
	c->err_msg[0] = 0;
}

/* A replicas entry (data type, member set), into what pass 12 compares with the table. */
static void gather_set(struct bch_fsck_ctx *ctx, unsigned type, uint64_t devs)
{
	unsigned i;

	if (ctx->replicas_nr > FSCK_REPLICAS_GATHER)
		return;
	for (i = 0; i < ctx->replicas_nr; i++)
		if (ctx->replicas_used[i].devs == devs && ctx->replicas_used[i].data_type == type)
			return;
	if (i < FSCK_REPLICAS_GATHER) {
		ctx->replicas_used[i].devs = devs;
		ctx->replicas_used[i].data_type = type;
	}
	ctx->replicas_nr++;
}

/* The replicas entry k needs, into what pass 12 compares with the table. */
static void gather_replicas(struct bch_fs *c, struct bch_fsck_ctx *ctx, unsigned id,
			    const struct bch_bkey *k)
{
	unsigned type;
	uint64_t devs;

	if (ctx->replicas_nr <= FSCK_REPLICAS_GATHER && bch_replicas_key_devs(c, id, k, &type, &devs))
		gather_set(ctx, type, devs);
}

/* Every copy of the readable leaf ptr points to, for reachable(). */
static void leaf_addrs_add(struct check_state *s, const struct bch_bkey *ptr)
{
	const struct bch_btree_ptr *bp = bkey_val(ptr);
	unsigned nr = bch_btree_ptr_nr(ptr);

	if (s->addrs.nr + nr > s->addrs.cap) {
		s->addrs.cap = s->addrs.cap ? s->addrs.cap * 2 : 64;
		if (s->addrs.cap < s->addrs.nr + nr)
			s->addrs.cap = s->addrs.nr + nr;
		s->addrs.a = realloc(s->addrs.a, s->addrs.cap * sizeof(*s->addrs.a));
		if (!s->addrs.a)
			abort();
	}
	for (unsigned p = 0; p < nr; p++)
		s->addrs.a[s->addrs.nr++] = (struct leaf_addr) { bp->ptrs[p].offset, bp->seq,
								 bp->ptrs[p].dev };
}

/*
 * An extents leaf's bucket counts and replicas entries are taken in the
 * first pass over its bytes (leaf_check_key(), perhaps on the read-ahead
 * thread), and applied by check_leaf_streamed() once the checksums said yes,
 * in the order of the keys: no second read of the leaf.  Consecutive
 * pointers into one bucket with one gen are one run: bch_alloc_mark_data()
 * once with their sectors summed does what a call for each would (the
 * first decides, or refuses, the bucket's gen and type; the rest add, or
 * are refused the same way).  Anything else (a cached pointer, one outside
 * its device's buckets, another key type that counts, more runs or entries
 * than fit here, bsets whose keys interleave) and the leaf's keys are read
 * again as before.
 */
#define LC_RUNS		32	/* a leaf of 2000 small files' extents: 17 */
#define LC_SETS		4
/*
 * An inodes leaf whose later bset updates keys of an earlier one (most of
 * them, after format --source) is counted in its first pass too: a bit per
 * inode number from its first key's on, set while the key counted there is
 * live (and one while it is a directory's), so a newer key at the same
 * position takes the older one's place in the counts.  Numbers below the
 * first or LC_POS past it, or positions of other shapes (snapshots): the
 * keys again, merged.
 */
#define LC_POS		3072	/* a leaf of 2000 inodes (2 bsets), numbers dense: 2100 */

struct mark_run {
	struct bch_extent_ptr	ptr;		/* the run's first pointer */
	uint32_t		span;		/* its span (bucket_of() in alloc.c) */
	uint32_t		sectors;	/* the run's, summed */
};

/* What the first pass over a streamed leaf learns (kept until its checksum says yes). */
struct leaf_check {
	struct bch_fs	*c;
	unsigned	id;
	bool		take_marks;	/* extents, counted in pass 3: runs */
	bool		take_sets;	/* extents and indirect extents: sets */
	bool		any;		/* a key was seen (prev) */
	bool		unordered;	/* a key at or before the one before it: bsets interleave */
	bool		lost;		/* runs or sets not all taken */
	bool		verified;	/* the first pass ended (leaf_check_key(NULL)) */
	bool		merged;		/* ... and the keys came again, merged */
	struct bch_bpos	prev;
	uint64_t	keys, dirs;
	unsigned	dev;		/* the device of bucket_sectors, nbuckets */
	uint32_t	bucket_sectors;
	uint64_t	nbuckets;
	unsigned	nr_runs, nr_sets;
	bool		track_pos;	/* inodes: positions in pos (LC_POS) */
	bool		pos_lost;	/* ... a key fell outside it */
	uint64_t	base;		/* the number of the leaf's first key */
	uint32_t	base_snap;
	uint64_t	shadow_keys, shadow_dirs;	/* counted, then replaced by a newer key */
	union {
		struct mark_run	runs[LC_RUNS];		/* take_marks */
		struct {
			uint64_t	live[LC_POS / 64];
			uint64_t	dir[LC_POS / 64];
		}		pos;			/* track_pos */
	};
	struct {
		uint64_t	devs;
		uint32_t	type;
	}		sets[LC_SETS];
	char		err[64];	/* why a key failed (the ordinary read reports it) */
};
_Static_assert(sizeof(struct leaf_check) <= BCH_PREFETCH_PRIV_MAX, "leaf_check: read ahead");

static bool is_dir_key(const struct leaf_check *lc, const struct bch_bkey *k)
{
	return lc->id == BCH_BTREE_ID_inodes && k->type == BCH_BKEY_inode &&
	       S_ISDIR(((const struct bch_inode *)bkey_val(k))->mode);
}

/* What pass 3 counts of a leaf's live key. */
static void leaf_count_key(struct leaf_check *lc, const struct bch_bkey *k)
{
	if (k->type == BCH_BKEY_deleted)
		return;
	lc->keys++;
	if (is_dir_key(lc, k))
		lc->dirs++;
}

/* First pass, inodes: k takes the place of what was counted at its position (LC_POS). */
static void leaf_count_pos(struct leaf_check *lc, const struct bch_bkey *k)
{
	if (!lc->any) {
		lc->base = k->p.offset;
		lc->base_snap = k->p.snapshot;
	}
	uint64_t i = k->p.offset - lc->base;
	if (k->p.inode || k->p.snapshot != lc->base_snap || k->p.offset < lc->base || i >= LC_POS) {
		lc->pos_lost = true;
		return;
	}
	uint64_t bit = 1ULL << (i % 64);
	if (lc->pos.live[i / 64] & bit) {
		lc->shadow_keys++;
		lc->shadow_dirs += !!(lc->pos.dir[i / 64] & bit);
	}
	lc->pos.live[i / 64] &= ~bit;
	lc->pos.dir[i / 64] &= ~bit;
	if (k->type != BCH_BKEY_deleted)
		lc->pos.live[i / 64] |= bit;
	if (is_dir_key(lc, k))
		lc->pos.dir[i / 64] |= bit;
}

/* k's pointers into runs (mark_key() of it, as a log); false: they do not fit. */
static bool take_marks(struct leaf_check *lc, const struct bch_bkey *k)
{
	if (k->type == BCH_BKEY_reflink_v || k->type == BCH_BKEY_stripe)
		return false;
	if (k->type != BCH_BKEY_extent)
		return true;
	const struct bch_extent *e = bkey_val(k);
	unsigned span = e->crc.compressed_sectors, sectors = bch_extent_disk_sectors(k);
	for (unsigned i = 0; i < bch_extent_nr_ptrs(k); i++) {
		const struct bch_extent_ptr *p = &e->ptrs[i];
		if (p->flags & BCH_EXTENT_PTR_CACHED)
			return false;
		if (!lc->bucket_sectors || lc->dev != p->dev) {
			/* fixed while open read-only: the read-ahead thread may ask */
			lc->dev = p->dev;
			lc->bucket_sectors = bch_alloc_bucket_sectors(lc->c, p->dev);
			lc->nbuckets = bch_alloc_nbuckets(lc->c, p->dev);
			if (!lc->bucket_sectors)
				return false;
		}
		uint64_t b = p->offset / lc->bucket_sectors;
		if (b >= lc->nbuckets || p->offset % lc->bucket_sectors + span > lc->bucket_sectors)
			return false;	/* bch_alloc_mark_data() refuses it: the second read */
		struct mark_run *r = lc->nr_runs ? &lc->runs[lc->nr_runs - 1] : NULL;
		if (r && r->ptr.dev == p->dev && r->ptr.gen == p->gen &&
		    r->ptr.offset / lc->bucket_sectors == b) {
			r->sectors += sectors;
			continue;
		}
		if (lc->nr_runs == LC_RUNS)
			return false;
		lc->runs[lc->nr_runs++] = (struct mark_run) { .ptr = *p, .span = span, .sectors = sectors };
	}
	return true;
}

/* k's replicas entry into sets (gather_replicas() of it); false: it does not fit. */
static bool take_set(struct leaf_check *lc, const struct bch_bkey *k)
{
	unsigned type, i;
	uint64_t devs;

	if (!bch_replicas_key_devs(lc->c, lc->id, k, &type, &devs))
		return true;
	for (i = 0; i < lc->nr_sets; i++)
		if (lc->sets[i].devs == devs && lc->sets[i].type == type)
			return true;
	if (i == LC_SETS)
		return false;
	lc->sets[lc->nr_sets++] = (typeof(lc->sets[0])) { devs, type };
	return true;
}

/* k counted, its buckets and replicas entry taken (see above). */
static void leaf_take_key(struct leaf_check *lc, const struct bch_bkey *k)
{
	leaf_count_key(lc, k);
	if (!lc->lost && ((lc->take_sets && !take_set(lc, k)) ||
			  (lc->take_marks && !take_marks(lc, k))))
		lc->lost = true;
}

/*
 * Each key of each bset as the read path would take it
 * (bch_bkey_validate_fs()); anything wrong: 1.  Counted and taken too: of
 * a leaf whose keys ascend across its bsets, these are its live keys
 * (deletions aside).  When they do not (a later bset updates keys of an
 * earlier one: most inodes leaves), the keys again, merged, once the leaf
 * verified (bch_leaf_stream_open(): on whichever thread checks it), and
 * what they say replaces what the first pass counted and took.
 */
static int leaf_check_key(void *priv, const struct bch_bkey *k)
{
	struct leaf_check *lc = priv;

	if (!k) {
		if (lc->verified || !lc->unordered) {
			lc->verified = true;
			return 0;
		}
		if (lc->track_pos && !lc->pos_lost) {
			/* the newest key at each position counted, the older ones not */
			lc->keys -= lc->shadow_keys;
			lc->dirs -= lc->shadow_dirs;
			lc->verified = true;
			return 0;
		}
		lc->verified = lc->merged = true;
		lc->keys = lc->dirs = 0;
		lc->nr_runs = lc->nr_sets = 0;
		lc->lost = false;
		return 1;	/* the merged keys, please */
	}
	if (lc->merged) {
		leaf_take_key(lc, k);
		return 0;
	}
	if (bch_bkey_validate_fs(lc->c, k, lc->id, 0, lc->err, sizeof(lc->err)))
		return 1;
	if (lc->track_pos && !lc->pos_lost)
		leaf_count_pos(lc, k);
	if (lc->any && bpos_cmp(lc->prev, k->p) >= 0)
		lc->unordered = true;
	lc->prev = k->p;
	lc->any = true;
	leaf_take_key(lc, k);
	return 0;
}

/* The first pass's state for a leaf of s's btree. */
static struct leaf_check leaf_check_init(struct bch_fs *c, const struct check_state *s)
{
	return (struct leaf_check) {
		.c = c, .id = s->id,
		.take_marks = s->id == BCH_BTREE_ID_extents && c->extents_mark_deferred,
		.take_sets = data_btree(s->id),
		.track_pos = s->id == BCH_BTREE_ID_inodes,
	};
}

/*
 * Checking only (-n): a leaf whose copies are identical, whose bsets
 * verify and whose every key is valid is checked streamed, a piece at a
 * time (btree_prefetch.h): never whole in memory, and not put in the cache
 * (the passes after read it again).  1: it is not such a leaf (or could not
 * be read so), and check_node() reads it the ordinary way, which reports
 * what is wrong; 0 checked; negative: the leaf's bytes changed between the
 * two passes over them (nothing but this process reads it: an I/O error).
 */
static int check_leaf_streamed(struct bch_fs *c, struct check_state *s, const struct bch_bkey *ptr)
{
	struct leaf_check lc = leaf_check_init(c, s);
	struct bch_leaf_stream *ls = malloc(sizeof(*ls));

	if (!ls)
		abort();
	if (bch_leaf_stream_open(c, ls, s->id, ptr, !c->fsck_copies_checked, leaf_check_key, &lc)) {
		free(ls);
		return 1;
	}
	s->nodes_checked++;
	leaf_addrs_add(s, ptr);
	/*
	 * The open counted the leaf's live keys and took its buckets and
	 * replicas entries (leaf_check_key()); what did not fit, or what is
	 * not taken so (other btrees' buckets), from its keys again
	 */
	bool gather = data_btree(s->id) && lc.lost;
	bool mark_all = (data_btree(s->id) || s->id == BCH_BTREE_ID_stripes) && c->extents_mark_deferred;
	bool mark = mark_all && (lc.lost || !lc.take_marks);
	const struct bch_bkey *k;
	while ((gather || mark) && (k = bch_leaf_stream_next(ls))) {
		if (gather)
			gather_replicas(c, s->ctx, s->id, k);
		if (mark)
			mark_key(c, k);
	}
	if (data_btree(s->id) && !gather)
		for (unsigned i = 0; i < lc.nr_sets; i++)
			gather_set(s->ctx, lc.sets[i].type, lc.sets[i].devs);
	if (mark_all && !mark)
		for (unsigned i = 0; i < lc.nr_runs; i++)
			bch_alloc_mark_data(c, &lc.runs[i].ptr, lc.runs[i].span, lc.runs[i].sectors);
	s->ctx->leaf_keys[s->id] += lc.keys;
	s->ctx->dir_keys += lc.dirs;
	if (mark_all)
		c->err_msg[0] = 0;
	int r = ls->err;
	free(ls);
	if (r) {
		char where[300];
		where_of(s->id, 0, ptr, where, sizeof(where), true);
		return bch_fs_err(c, -BCH_ERR_btree_node_read, "%s: changed while being read", where);
	}
	return 0;
}

static int check_node(struct bch_fs *c, struct check_state *s, unsigned level,
		      const struct bch_bkey *ptr)
{
	char where[300], detail[600];
	struct bch_bkey *moved = NULL;	/* the node's pointer after a rewrite moved it */
	struct btree *b;
	int r;

	bool keep = !c->read_only;	/* a rebuild may need the pointer */
	size_t self = s->nodes.nr;	/* this node's entry in s->nodes */
	if (keep)
		ptr_list_add(&s->nodes, ptr);
	gather_replicas(c, s->ctx, s->id, ptr);
	c->err_msg[0] = 0;
	if (s->stream && !level && (r = check_leaf_streamed(c, s, ptr)) <= 0)
		return r;
	r = bch_btree_node_get(c, s->id, level, ptr, &b);
	if (r) {
		if (r == -ENOMEM || bch_err_is_dl(r))
			return r;	/* not the node's fault */
		/* the read error names the copy that failed */
		where_of(s->id, level, ptr, where, sizeof(where), false);
		snprintf(detail, sizeof(detail), "%s", c->err_msg[0] ? c->err_msg : bch_err_str(r));
		c->err_msg[0] = 0;
		problem(s, BCH_FSCK_btree_node_unreadable, where, detail);
		lost_add(s, level, ptr);
		if (s->id == BCH_BTREE_ID_extents)
			c->alloc_recount_partial = true;	/* its data is not counted */
		return 0;
	}
	s->nodes_checked++;
#ifdef __GLIBC__
	/*
	 * Reading a node frees buffers of every size (a copy compared, key
	 * arrays of leaves evicted), in an order that depends on the read-ahead
	 * thread: hand back the free pages now and then, or the heap's holes
	 * stay resident (1M files: from 5.0 MB up to 7.3 MB at this pass's peak)
	 */
	if (!(s->nodes_checked % 128))
		malloc_trim(0);
#endif
	if (!level)
		s->ctx->leaf_keys[s->id] += b->nr;
	if (!level && s->id == BCH_BTREE_ID_inodes) {
		struct bch_bkey_buf buf;

		for (unsigned i = 0; i < b->nr; i++)
			if (bch_btree_key_header(b, i).type == BCH_BKEY_inode &&
			    S_ISDIR(((const struct bch_inode *)bkey_val(bch_btree_key(b, i, &buf)))->mode))
				s->ctx->dir_keys++;
	}
	/* a copy on a member not given (degraded) was skipped, not found bad */
	for (unsigned i = 0; i < b->nr_ptrs; i++)
		if (bch_dev_missing(c, b->ptrs[i].dev))
			b->bad_replicas &= ~(1U << i);
	if (b->bad_replicas) {
		where_of(s->id, level, ptr, where, sizeof(where), true);
		snprintf(detail, sizeof(detail), "replica mask 0x%x", b->bad_replicas);
		if (bch_fsck_problem(s->ctx, BCH_FSCK_btree_replica_bad, where, detail) &&
		    !c->read_only) {
			r = bch_btree_node_rewrite(c, b);
			if (r) {
				bch_btree_node_put(c, b);
				return r;
			}
			free(moved);
			ptr = moved = bch_btree_ptr_key(b);
			ptr_list_set(&s->nodes, self, ptr);	/* a rebuild frees it there */
			bch_fsck_fixed(s->ctx, BCH_FSCK_btree_replica_bad);
		}
	}
	if (b->nr_dropped) {
		/* pass 4: keys that failed validation were left out when the node was read */
		bool fix = false;
		where_of(s->id, level, ptr, where, sizeof(where), true);
		for (unsigned i = 0; i < b->nr_dropped; i++)
			fix |= bch_fsck_problem(s->ctx, BCH_FSCK_bkey_invalid, where, b->dropped[i]);
		if (fix && !c->read_only) {
			unsigned n = b->nr_dropped;
			for (unsigned i = 0; i < b->nr_dropped; i++)
				free(b->dropped[i]);
			free(b->dropped);
			b->dropped = NULL;
			b->nr_dropped = 0;
			r = bch_btree_node_rewrite(c, b);
			if (r) {
				bch_btree_node_put(c, b);
				return r;
			}
			free(moved);
			ptr = moved = bch_btree_ptr_key(b);
			ptr_list_set(&s->nodes, self, ptr);	/* a rebuild frees it there */
			s->ctx->fixed[BCH_FSCK_bkey_invalid] += n;
		}
	}
	if (!b->level) {
		leaf_addrs_add(s, ptr);
		if (keep) {
			if (s->leaves.nr == s->leaves.cap) {
				s->leaves.cap = s->leaves.cap ? s->leaves.cap * 2 : 64;
				s->leaves.i = realloc(s->leaves.i, s->leaves.cap * sizeof(*s->leaves.i));
				if (!s->leaves.i)
					abort();
			}
			s->leaves.i[s->leaves.nr++] = self;	/* ptr is what nodes has there */
		}
		if (data_btree(s->id)) {	/* extents and indirect extents: pass 12's sets */
			struct bch_bkey_buf buf;

			for (unsigned i = 0; i < b->nr; i++)
				gather_replicas(c, s->ctx, s->id, bch_btree_key(b, i, &buf));
		}
		if ((data_btree(s->id) || s->id == BCH_BTREE_ID_stripes) && c->extents_mark_deferred)
			mark_extents(c, b);
		bch_btree_node_put(c, b);
		free(moved);
		return 0;
	}

	/* children must tile [min_key, max_key] */
	struct bch_bpos expect = b->min_key;
	for (unsigned i = 0; i < b->nr; i++) {
		const struct bch_btree_ptr *cp = bkey_val(bch_btree_interior_key(b, i));
		if (!bpos_eq(cp->min_key, expect)) {
			char e[80], g[80];
			where_of(s->id, b->level, ptr, where, sizeof(where), true);
			bch_bpos_to_text(expect, e, sizeof(e));
			bch_bpos_to_text(cp->min_key, g, sizeof(g));
			snprintf(detail, sizeof(detail), "child %u starts at %s, expected %s", i, g, e);
			problem(s, BCH_FSCK_btree_topology, where, detail);
		}
		expect = bpos_successor(bch_btree_key_pos(b, i));
	}
	if (!b->nr || !bpos_eq(bch_btree_key_pos(b, b->nr - 1), b->max_key)) {
		where_of(s->id, b->level, ptr, where, sizeof(where), true);
		problem(s, BCH_FSCK_btree_topology, where, "children do not reach the node's max_key");
	}

	/*
	 * Repairing, copy the child pointers: a child's rewrite changes b, and
	 * b may be evicted while children are read.  Checking only, nothing
	 * changes b: it is held (not evicted) and its keys are walked in place.
	 */
	unsigned nr = b->nr;
	struct bch_bkey **kids = malloc((nr ? nr : 1) * sizeof(*kids));
	if (!kids)
		abort();
	for (unsigned i = 0; i < nr; i++)
		kids[i] = keep ? bch_btree_key_dup(b, i) : (struct bch_bkey *)bch_btree_interior_key(b, i);
	unsigned child_level = b->level - 1;
	if (keep)
		bch_btree_node_put(c, b);
	/*
	 * The next leaves are read ahead while this one is checked: streamed,
	 * the read-ahead thread checks them as check_leaf_streamed() would
	 * (the farthest first), and this thread takes its verdicts, or checks
	 * those it has not started itself.
	 */
	struct leaf_check lc = leaf_check_init(c, s);
	for (unsigned i = 0; i < nr && !r && !s->ctx->cancelled; i++) {
		for (unsigned j = i + 1; !child_level && j < nr && j <= i + (s->stream ? 4 : 2); j++)
			if (s->stream)
				bch_prefetch_verify_check(c, s->id, kids[j], !c->fsck_copies_checked,
							  leaf_check_key, &lc, sizeof(lc));
			else
				bch_prefetch_node(c, s->id, child_level, kids[j]);
		r = check_node(c, s, child_level, kids[i]);
	}
	if (keep) {
		for (unsigned i = 0; i < nr; i++)
			free(kids[i]);
	} else {
		bch_btree_node_put(c, b);
	}
	free(kids);
	free(moved);
	return r;
}

/*
 * Insert the keys of the leaf ptr points to that lie in [lo, hi] into the
 * new tree, in transactions of at most a quarter of a node.
 */
static int insert_leaf(struct bch_fs *c, struct btree_trans *t, unsigned id,
		       const struct bch_bkey *ptr, struct bch_bpos lo, struct bch_bpos hi)
{
	struct btree *b;
	int r = 0;

	if (bch_btree_node_get(c, id, 0, ptr, &b)) {
		c->err_msg[0] = 0;
		return 0;	/* reported already */
	}
	/* copy first: commits may evict b */
	unsigned nr = 0;
	struct bch_bkey **keys = malloc((b->nr ? b->nr : 1) * sizeof(*keys));
	if (!keys)
		abort();
	for (unsigned j = 0; j < b->nr; j++)
		if (bpos_cmp(bch_btree_key_pos(b, j), lo) >= 0 && bpos_cmp(bch_btree_key_pos(b, j), hi) <= 0)
			keys[nr++] = bch_btree_key_dup(b, j);
	bch_btree_node_put(c, b);
	size_t limit = (((size_t)c->sb->btree_node_size << 9) - sizeof(struct bch_btree_node)) / 32;
	size_t batch = 0;
	for (unsigned j = 0; j < nr && !r; j++) {
		if (batch && batch + 1 + keys[j]->u64s > limit) {
			r = bch_trans_commit(t, 0);
			batch = 0;
		}
		bch_trans_update(t, id, keys[j]);
		batch += 1 + keys[j]->u64s;
	}
	if (!r && batch)
		r = bch_trans_commit(t, 0);
	for (unsigned j = 0; j < nr; j++)
		free(keys[j]);
	free(keys);
	return r;
}

/*
 * Build a new tree for s->id from the readable leaves and the pieces of
 * found leaves, then free the old one (and the found leaves).
 */
static int rebuild(struct bch_fs *c, struct check_state *s)
{
	struct btree_trans *t;
	int r;

	/* a fresh empty root: the old nodes stay readable until freed below */
	struct btree_root *root = &c->roots->r[s->id];
	struct bch_bkey *old_root = root->key;
	unsigned old_level = root->level;
	root->key = NULL;
	r = bch_btree_create_root(c, s->id);
	if (r) {
		free(root->key);
		root->key = old_root;
		root->level = old_level;
		return r;
	}
	free(old_root);

	bch_trans_init(c, &t);
	for (size_t i = 0; i < s->leaves.nr && !r; i++)
		r = insert_leaf(c, t, s->id, s->nodes.k[s->leaves.i[i]], POS_MIN, POS_MAX);
	for (size_t i = 0; i < s->nr_picks && !r; i++) {
		struct bch_bkey *k = bch_found_node_ptr(s->picks[i].f);
		r = insert_leaf(c, t, s->id, k, s->picks[i].min_key, s->picks[i].max_key);
		free(k);
	}
	/* journal keys that replay could not apply (their node was unreadable) */
	for (size_t i = 0; i < c->nr_replay_deferred && !r; i++)
		if (c->replay_deferred[i].id == s->id) {
			bch_trans_update(t, s->id, c->replay_deferred[i].k);
			r = bch_trans_commit(t, 0);
		}
	bch_trans_exit(t);
	if (r)
		return r;
	/* the keys it was rebuilt from are older than the bucket state: all are rewritten */
	if (s->id == BCH_BTREE_ID_alloc)
		bch_alloc_btree_forget_stored(c);
	/* the old nodes: out of the cache and their space freed (btree buckets only) */
	for (size_t i = 0; i < s->nodes.nr; i++) {
		const struct bch_btree_ptr *bp = bkey_val(s->nodes.k[i]);
		bch_btree_cache_drop(c, &bp->ptrs[0]);
		bch_free_btree_node(c, bp->ptrs, bch_btree_ptr_nr(s->nodes.k[i]));
	}
	return bch_journal_flush(c);
}

/* ------------------------------------------------------------ node scan */

static int leaf_addr_cmp(const void *a_, const void *b_)
{
	const struct leaf_addr *a = a_, *b = b_;

	if (a->dev != b->dev)
		return a->dev < b->dev ? -1 : 1;
	if (a->offset != b->offset)
		return a->offset < b->offset ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

struct reach {
	struct leaf_addr	*a;
	size_t			nr;
};

/* Is f one of the leaves the tree still reaches (by every replica's address)? */
static bool reachable(void *priv, const struct bch_found_node *f)
{
	const struct reach *rc = priv;
	struct leaf_addr k = { f->ptr.offset, f->seq, f->ptr.dev };

	return rc->nr && bsearch(&k, rc->a, rc->nr, sizeof(k), leaf_addr_cmp);
}

/*
 * The pieces of found leaves inside lost range l (picks sorted): how many
 * leaves and keys, and the first stretch of l they leave uncovered.
 */
static void describe_found(struct bch_fs *c, struct check_state *s, const struct bch_lost_range *l,
			   const struct bch_node_pick *p, size_t nr, char *buf, size_t len)
{
	uint64_t keys = 0, leaves = 0, gaps = 0;
	struct bch_bpos next = l->min_key, gap_lo = POS_MIN, gap_hi = POS_MIN;
	bool end = false;
	const struct bch_found_node *last = NULL;

	for (size_t i = 0; i < nr; i++) {
		if (bpos_cmp(p[i].min_key, l->min_key) < 0 || bpos_cmp(p[i].max_key, l->max_key) > 0)
			continue;
		if (!end && bpos_cmp(p[i].min_key, next) > 0 && !gaps++) {
			gap_lo = next;
			gap_hi = bpos_predecessor(p[i].min_key);
		}
		end = bpos_eq(p[i].max_key, POS_MAX);
		next = end ? next : bpos_successor(p[i].max_key);
		leaves += p[i].f != last;
		last = p[i].f;
		struct bch_bkey *k = bch_found_node_ptr(p[i].f);
		struct btree *b;
		if (!bch_btree_node_get(c, s->id, 0, k, &b)) {
			for (unsigned j = 0; j < b->nr; j++)
				keys += bpos_cmp(bch_btree_key_pos(b, j), p[i].min_key) >= 0 &&
					bpos_cmp(bch_btree_key_pos(b, j), p[i].max_key) <= 0;
			bch_btree_node_put(c, b);
		}
		c->err_msg[0] = 0;
		free(k);
	}
	if (!end && bpos_cmp(next, l->max_key) <= 0 && !gaps++) {
		gap_lo = next;
		gap_hi = l->max_key;
	}
	int n = snprintf(buf, len, "%" PRIu64 " lea%s found (%" PRIu64 " keys)",
			 leaves, leaves == 1 ? "f" : "ves", keys);
	if (gaps && n > 0 && (size_t)n < len) {
		char lo[80], hi[80];
		bch_bpos_to_text(gap_lo, lo, sizeof(lo));
		bch_bpos_to_text(gap_hi, hi, sizeof(hi));
		snprintf(buf + n, len - n, "; nothing found for %s..%s%s", lo, hi,
			 gaps > 1 ? " and other ranges" : "");
	}
	s->ctx->leaf_keys[s->id] += keys;
}

/*
 * With -y: the found leaves and (extents) their data are in use from now on,
 * so that no node the rebuilds allocate lands on them; their pointers join
 * s->nodes, which the rebuild frees once their keys are copied.
 */
static void claim_picks(struct bch_fs *c, struct check_state *s, const struct bch_node_scan *sc,
			bool *claimed)
{
	for (size_t i = 0; i < s->nr_picks; i++) {
		const struct bch_found_node *f = s->picks[i].f;
		size_t idx = f - sc->n;
		struct bch_bkey *k = bch_found_node_ptr(f);
		if (!claimed[idx]) {
			claimed[idx] = true;
			if (!bch_alloc_mark_ptr(c, &f->ptr, c->sb->btree_node_size, BCH_DATA_btree))
				ptr_list_add(&s->nodes, k);
			c->err_msg[0] = 0;
		}
		struct btree *b;
		if (data_btree(s->id) && !bch_btree_node_get(c, s->id, 0, k, &b)) {
			struct bch_bkey_buf buf;

			for (unsigned j = 0; j < b->nr; j++) {
				const struct bch_bkey *e = bch_btree_key(b, j, &buf);
				if (bpos_cmp(e->p, s->picks[i].min_key) < 0 ||
				    bpos_cmp(e->p, s->picks[i].max_key) > 0)
					continue;
				mark_key(c, e);
			}
			bch_btree_node_put(c, b);
		}
		c->err_msg[0] = 0;	/* pass 5 reports bad pointers */
		free(k);
	}
}

/* The readable leaves of s, sorted by address, for reachable() (s keeps them). */
static struct reach reach_of(struct check_state *s)
{
	struct reach rc = { s->addrs.a, s->addrs.nr };

	if (rc.nr)
		qsort(rc.a, rc.nr, sizeof(*rc.a), leaf_addr_cmp);
	return rc;
}

/*
 * A pick whose node does not read whole (its first bset is good, a later one
 * is not: often the lost node itself) gives nothing: drop it, so that
 * nothing is reported as found that is not.  Returns the new count.
 */
static size_t drop_unreadable(struct bch_fs *c, unsigned id, struct bch_node_pick *p, size_t nr)
{
	size_t out = 0;

	for (size_t i = 0; i < nr; i++) {
		struct bch_bkey *k = bch_found_node_ptr(p[i].f);
		struct btree *b;
		if (!bch_btree_node_get(c, id, 0, k, &b)) {
			bch_btree_node_put(c, b);
			p[out++] = p[i];
		}
		c->err_msg[0] = 0;
		free(k);
	}
	return out;
}

/* Scan the devices once and choose, for every btree that lost nodes, what fills them. */
static int recover_lost(struct bch_fsck_ctx *ctx, struct bch_fs *c, struct check_state *st,
			struct bch_node_scan *sc)
{
	/*
	 * Buckets never allocated (gen 0) hold no node, if the generations are
	 * sound: the alloc btree was current (clean close, nothing replayed)
	 * and none of its nodes is lost.
	 */
	bool trust_gens = bch_alloc_btree_was_current(c) && !c->journal_replayed &&
			  !st[BCH_BTREE_ID_alloc].nr_lost;
	int r = bch_node_scan(c, sc, trust_gens);

	if (r)
		return r;
	bool *claimed = calloc(sc->nr ? sc->nr : 1, sizeof(*claimed));
	if (!claimed)
		abort();
	for (unsigned id = 0; id < BCH_BTREE_ID_NR && !r && !ctx->cancelled; id++) {
		struct check_state *s = &st[id];
		struct bch_node_pick *p;
		size_t nr;

		if (!s->nr_lost)
			continue;
		struct reach rc = reach_of(s);
		r = bch_node_scan_pick(c, sc, id, s->lost, s->nr_lost, reachable, &rc, &p, &nr);
		if (r)
			break;
		nr = drop_unreadable(c, id, p, nr);
		bool use = false;
		for (size_t l = 0; l < s->nr_lost; l++) {
			char where[300], detail[400];
			const struct bch_lost_range *lr = &s->lost[l];
			bool any = false;
			for (size_t i = 0; i < nr && !any; i++)
				any = bpos_cmp(p[i].min_key, lr->min_key) >= 0 &&
				      bpos_cmp(p[i].max_key, lr->max_key) <= 0;
			if (!any)
				continue;
			char lo[80], hi[80];
			bch_bpos_to_text(lr->min_key, lo, sizeof(lo));
			bch_bpos_to_text(lr->max_key, hi, sizeof(hi));
			snprintf(where, sizeof(where), "%s btree level %u node %s..%s",
				 bch_btree_id_name(id), lr->level, lo, hi);
			describe_found(c, s, lr, p, nr, detail, sizeof(detail));
			if (bch_fsck_problem(ctx, BCH_FSCK_btree_node_scan_found, where, detail)) {
				s->approved[BCH_FSCK_btree_node_scan_found]++;
				use = true;
			}
		}
		if (use && s->rebuild && !c->read_only) {
			s->picks = p;
			s->nr_picks = nr;
			claim_picks(c, s, sc, claimed);
		} else {
			free(p);
		}
	}
	free(claimed);
	return r;
}

/*
 * The data of journal keys replay could not apply (fs.c: defer_key()) is in
 * use: no node the rebuilds allocate may land on it.  A bucket some leaf or
 * found leaf already counts is left as it is (the same extent is usually in
 * both, and counting it twice would overfill the bucket); pass 5 recounts.
 */
static void claim_deferred(struct bch_fs *c)
{
	/* which buckets were counted before: decided for all first, then marked */
	size_t nr = 0, n = 0;
	for (size_t i = 0; i < c->nr_replay_deferred; i++)
		nr += BCH_REPLICAS_MAX;
	bool *counted = calloc(nr ? nr : 1, sizeof(*counted));
	if (!counted)
		abort();
	for (int pass = 0; pass < 2; pass++, n = 0)
		for (size_t i = 0; i < c->nr_replay_deferred; i++, n += BCH_REPLICAS_MAX) {
			const struct bch_bkey *k = c->replay_deferred[i].k;
			struct bch_bkey *x = NULL;
			if (c->replay_deferred[i].id == BCH_BTREE_ID_reflink &&
			    k->type == BCH_BKEY_reflink_v && (x = bch_reflink_v_to_extent(k)))
				k = x;	/* an indirect extent's pointers (reflink.h) */
			else if (c->replay_deferred[i].id != BCH_BTREE_ID_extents ||
				 k->type != BCH_BKEY_extent)
				continue;
			const struct bch_extent *e = bkey_val(k);
			for (unsigned p = 0; p < bch_extent_nr_ptrs(k) && p < BCH_REPLICAS_MAX; p++) {
				unsigned bs = bch_alloc_bucket_sectors(c, e->ptrs[p].dev);
				struct bch_bucket_state b;
				if (!pass)
					counted[n + p] = !bs || (bch_alloc_bucket_get(c, e->ptrs[p].dev,
									e->ptrs[p].offset / bs, &b) &&
								 b.sectors);
				else if (!counted[n + p])
					bch_alloc_mark_data(c, &e->ptrs[p], e->crc.compressed_sectors,
							    bch_extent_disk_sectors(k));
			}
			free(x);
			c->err_msg[0] = 0;	/* pass 5 reports bad pointers */
		}
	free(counted);
}

static void extents_lost_add(struct bch_fs *c, struct bch_bpos lo, struct bch_bpos hi)
{
	struct bch_bpos (*n)[2] = realloc(c->extents_lost, (c->nr_extents_lost + 1) * sizeof(*n));

	if (!n)
		abort();
	c->extents_lost = n;
	n[c->nr_extents_lost][0] = lo;
	n[c->nr_extents_lost++][1] = hi;
}

/*
 * What of the extents btree is lost for good: the lost ranges less the
 * pieces the scan gives back (picks are sorted and disjoint).  Pass 7 names
 * the files whose data was there.
 */
static void note_extents_lost(struct bch_fs *c, const struct check_state *s)
{
	for (size_t l = 0; l < s->nr_lost; l++) {
		struct bch_bpos next = s->lost[l].min_key, hi = s->lost[l].max_key;
		bool done = false;

		for (size_t i = 0; i < s->nr_picks && !done; i++) {
			const struct bch_node_pick *p = &s->picks[i];
			if (bpos_cmp(p->max_key, next) < 0 || bpos_cmp(p->min_key, hi) > 0)
				continue;
			if (bpos_cmp(p->min_key, next) > 0)
				extents_lost_add(c, next, bpos_predecessor(p->min_key));
			if (bpos_cmp(p->max_key, hi) >= 0)
				done = true;
			else
				next = bpos_successor(p->max_key);
		}
		if (!done)
			extents_lost_add(c, next, hi);
	}
}

int bch_fsck_btrees(struct bch_fsck_ctx *ctx, struct bch_fs *c, uint64_t *nodes_checked)
{
	struct check_state *st = calloc(BCH_BTREE_ID_NR, sizeof(*st));
	struct bch_node_scan sc = { 0 };
	bool lost = false;
	int r = 0;

	if (!st)
		return -ENOMEM;
	*nodes_checked = 0;
	c->fsck_copies_checked = false;	/* this pass compares them (again) */
	ctx->replicas_gathered = false;
	ctx->replicas_nr = 0;
	uint64_t marks = c->replicas ? c->replicas->marks : 0;
	for (unsigned id = 0; id < BCH_BTREE_ID_NR && !r && !ctx->cancelled; id++) {
		struct check_state *s = &st[id];
		struct btree_root *root = &c->roots->r[id];

		*s = (struct check_state) { .ctx = ctx, .id = id, .stream = bch_leaf_stream_allowed(c) };
		if (!root->key)
			continue;
		/* a copy: repairs may replace the root key while it is being checked */
		struct bch_bkey *rk = bch_bkey_dup(root->key);
		r = check_node(c, s, root->level, rk);
		free(rk);
		*nodes_checked += s->nodes_checked;
		lost |= s->nr_lost;
	}
	/* every btree's own nodes and (extents) data are counted: now the scan */
	if (!r && lost && !ctx->cancelled)
		r = recover_lost(ctx, c, st, &sc);
	if (!r)
		note_extents_lost(c, &st[BCH_BTREE_ID_extents]);
	if (!r && !c->read_only)
		claim_deferred(c);
	for (unsigned id = 0; id < BCH_BTREE_ID_NR && !r && !ctx->cancelled; id++) {
		struct check_state *s = &st[id];
		if (s->rebuild && !c->read_only) {
			r = rebuild(c, s);
			if (!r)
				for (unsigned p = 0; p < BCH_FSCK_PROBLEM_NR; p++)
					ctx->fixed[p] += s->approved[p];
		}
	}
	/*
	 * Every node's copies were compared (and the bad ones rewritten or
	 * reported): the passes after read each node again, and need not
	 * compare them again (nothing but fsck writes meanwhile, and it writes
	 * every copy).
	 */
	if (!r && !ctx->cancelled)
		c->fsck_copies_checked = true;
	/* every key was seen, and none has changed since */
	if (!r && !ctx->cancelled && !lost && c->replicas && c->replicas->marks == marks &&
	    ctx->replicas_nr <= FSCK_REPLICAS_GATHER) {
		ctx->replicas_gathered = true;
		ctx->replicas_fs = c;
		ctx->replicas_marks = marks;
	}
	for (unsigned id = 0; id < BCH_BTREE_ID_NR; id++) {
		free(st[id].leaves.i);
		free(st[id].addrs.a);
		ptr_list_free(&st[id].nodes);
		free(st[id].lost);
		free(st[id].picks);
	}
	free(st);
	bch_node_scan_exit(&sc);
	if (!r && c->extents_mark_deferred && !ctx->cancelled) {
		/*
		 * every extents leaf was read: the dirty recount is complete, and
		 * cached pointers are counted as at open (alloc.h), in a second
		 * walk made only when there are any
		 */
		c->extents_mark_deferred = false;
		if (bch_alloc_settle_cached_gens(c))
			r = bch_extents_mark_cached(c);
		if (!r)
			r = bch_alloc_btree_record_diffs(c);
	}
	if (r && !ctx->err_msg[0])
		snprintf(ctx->err_msg, sizeof(ctx->err_msg), "%s",
			 c->err_msg[0] ? c->err_msg : bch_err_str(r));
	return r;
}
