// SPDX-License-Identifier: GPL-2.0
/*
 * alloc_btree.c - bucket state persisted in the alloc btree (see alloc_btree.h).
 *
 * Design: bucket state changes with every allocation and free; journalling
 * each change would double the journal traffic of small writes.  Instead
 * the in-memory state is authoritative while the filesystem is open and the
 * alloc btree is brought up to date at clean close, where the clean record
 * then says so.  After a crash, the state is recomputed from the pointers
 * (they are all in the btrees, which the journal made current), and the
 * stale alloc keys contribute only the generations of free buckets.
 *
 * Checks at read (an image comes from a stranger): the device exists, the
 * bucket is on it and is not a superblock or journal bucket, the data type
 * is free, btree or user, free exactly when there are no sectors, and the
 * sectors fit the bucket.  A bad key is an error naming its position; under
 * fsck it is ignored (fsck reports the difference and rewrites the key).
 * Keys of a member that is missing (opened degraded) are kept untouched.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "alloc.h"
#include "extents.h"
#include "alloc_btree.h"
#include "bcachefs.h"
#include "bkey.h"
#include "btree.h"
#include "errcode.h"
#include "journal.h"

struct open_diff {
	unsigned		dev;
	uint64_t		bucket;
	struct bch_bucket_state	stored, now;
};

#define MAX_OPEN_DIFFS	100000	/* reported one by one; the rest are fixed silently */

struct bch_alloc_btree {
	struct bch_bucket_state	*stored[BCH_SB_MEMBERS_MAX];	/* what the btree holds */
	/*
	 * fsck -n (fsck, read-only): no mirror.  Nothing writes the keys, and
	 * the one comparison reads them again (for_each_diff): only the
	 * generations are kept from the open (free buckets take them), a byte
	 * a bucket in pages of their own, written only where not zero.
	 */
	bool			walk;
	uint8_t			*gens[BCH_SB_MEMBERS_MAX];
	bool			was_current;
	bool			leave_stale;
	struct open_diff	*diffs;		/* fsck: stored != recomputed, at open */
	unsigned		nr_diffs;
	struct bch_bpos		*bad;		/* fsck: keys that failed the checks */
	const char		**bad_why;
	unsigned		nr_bad;
};

#define SYNC_ROUNDS	8	/* writes that keep changing buckets: give up, not current */
#define KEYS_PER_TRANS	64	/* at most; fewer when nodes are small */

static bool state_eq(const struct bch_bucket_state *a, const struct bch_bucket_state *b)
{
	return a->gen == b->gen && a->data_type == b->data_type && a->sectors == b->sectors &&
	       a->cached_sectors == b->cached_sectors;
}

static int stored_init(struct bch_fs *c)
{
	struct bch_alloc_btree *ab = calloc(1, sizeof(*ab));

	if (!ab)
		return -ENOMEM;
	c->alloc_btree = ab;
	ab->walk = c->opts.v[Opt_fsck] && c->read_only;
	for (unsigned d = 0; d < c->nr_devs; d++) {
		uint64_t n = bch_alloc_nbuckets(c, d);
		if (!n)
			continue;
		if (ab->walk) {
			void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (p == MAP_FAILED)
				return -ENOMEM;
			ab->gens[d] = p;
			continue;
		}
		ab->stored[d] = calloc(n, sizeof(struct bch_bucket_state));
		if (!ab->stored[d])
			return -ENOMEM;
	}
	return 0;
}

static void gens_free(struct bch_fs *c, struct bch_alloc_btree *ab)
{
	for (unsigned d = 0; d < BCH_SB_MEMBERS_MAX; d++)
		if (ab->gens[d]) {
			munmap(ab->gens[d], bch_alloc_nbuckets(c, d));
			ab->gens[d] = NULL;
		}
}

void bch_alloc_btree_exit(struct bch_fs *c)
{
	struct bch_alloc_btree *ab = c->alloc_btree;

	if (!ab)
		return;
	for (unsigned d = 0; d < BCH_SB_MEMBERS_MAX; d++)
		free(ab->stored[d]);
	gens_free(c, ab);
	free(ab->diffs);
	free(ab->bad);
	free(ab->bad_why);
	free(ab);
	c->alloc_btree = NULL;
}

enum key_verdict { KEY_SKIP, KEY_BAD, KEY_GOOD };

/*
 * What alloc key k says: KEY_GOOD with the state in *s, KEY_BAD with *why
 * (failed the checks: as if absent), or KEY_SKIP (not an alloc key, or a
 * member not given).
 */
static enum key_verdict key_state(struct bch_fs *c, const struct bch_bkey *k,
				  struct bch_bucket_state *s, const char **why)
{
	const struct bch_alloc *a = bkey_val(k);
	uint64_t dev = k->p.inode, b = k->p.offset;
	struct bch_bucket_state now;

	*why = NULL;
	if (k->type != BCH_BKEY_alloc)
		return KEY_SKIP;
	if (dev >= c->nr_devs || !bch_alloc_nbuckets(c, dev)) {
		/*
		 * a member not given (degraded): its keys are neither checked nor
		 * loaded, and as write_diffs() only writes the buckets of present
		 * devices, they stay as they are
		 */
		if (bch_dev_missing(c, dev))
			return KEY_SKIP;
		*why = "no such device";
	} else if (b >= bch_alloc_nbuckets(c, dev)) {
		*why = "bucket beyond the end of the device";
	} else if (!bch_alloc_bucket_get(c, dev, b, &now)) {
		*why = "superblock or journal bucket";
	} else if (a->data_type != BCH_DATA_free && a->data_type != BCH_DATA_btree &&
		   a->data_type != BCH_DATA_user && a->data_type != BCH_DATA_cached) {
		*why = "data type not free, btree, user or cached";
	} else if ((a->data_type == BCH_DATA_free) != (!a->dirty_sectors && !a->cached_sectors) ||
		   (a->data_type == BCH_DATA_cached) != (!a->dirty_sectors && a->cached_sectors) ||
		   (a->data_type == BCH_DATA_btree && a->cached_sectors)) {
		*why = "free with sectors, or used without";
	} else if ((a->dirty_sectors > bch_alloc_bucket_sectors(c, dev) &&
		    !(c->sb->features & BCH_FEATURE_SNAPSHOTS)) ||
		   a->cached_sectors > bch_alloc_bucket_sectors(c, dev)) {
		/*
		 * With snapshots, data two snapshots' keys share counts once per
		 * key (snapshot.h): a bucket's count may then pass its size.
		 */
		*why = "more sectors than the bucket holds";
	}
	if (*why)
		return KEY_BAD;
	s->gen = a->gen;
	s->data_type = a->data_type;
	s->sectors = a->dirty_sectors;
	s->cached_sectors = a->cached_sectors;
	return KEY_GOOD;
}

/* One key into stored state; 0 or an error naming the key. */
static int read_key(struct bch_fs *c, const struct bch_bkey *k)
{
	struct bch_alloc_btree *ab = c->alloc_btree;
	struct bch_bucket_state s;
	const char *why;

	switch (key_state(c, k, &s, &why)) {
	case KEY_SKIP:
		return 0;
	case KEY_GOOD:
		if (!ab->walk)
			ab->stored[k->p.inode][k->p.offset] = s;
		else if (ab->gens[k->p.inode][k->p.offset] != s.gen)
			ab->gens[k->p.inode][k->p.offset] = s.gen;	/* zero pages stay so */
		return 0;
	case KEY_BAD:
		break;
	}
	if (c->opts.v[Opt_fsck]) {
		struct bch_bpos *nb = realloc(ab->bad, (ab->nr_bad + 1) * sizeof(*nb));
		const char **nw = realloc(ab->bad_why, (ab->nr_bad + 1) * sizeof(*nw));
		if (nb)
			ab->bad = nb;
		if (nw)
			ab->bad_why = nw;
		if (!nb || !nw)
			return -ENOMEM;
		ab->bad[ab->nr_bad] = k->p;
		ab->bad_why[ab->nr_bad++] = why;
		return 0;
	}
	return bch_fs_err(c, -BCH_ERR_bkey_invalid,
			  "alloc btree, level 0, key %" PRIu64 ":%" PRIu64 ":%u: %s (run fsck)",
			  (uint64_t)k->p.inode, (uint64_t)k->p.offset, (unsigned)k->p.snapshot, why);
}

int bch_alloc_btree_read(struct bch_fs *c, bool current, bool *loaded)
{
	struct btree_iter it;
	const struct bch_bkey *k;
	bool load = current && !c->opts.v[Opt_fsck];	/* fsck recomputes, then compares */
	int r, err = 0;

	*loaded = false;
	if ((r = stored_init(c)))
		return r;
	c->alloc_btree->was_current = current;
	if (!c->roots->r[BCH_BTREE_ID_alloc].key)
		return load ? bch_fs_err(c, -BCH_ERR_btree_node_bad, "alloc btree has no root") : 0;
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_alloc, POS_MIN, POS_MAX);
	for (uint64_t n = 1; !r && (k = bch_btree_iter_next(&it, &err)); n++) {
		if (!(n % 4096))
			bch_btree_cache_evict_clean(c);	/* open may not write: keep memory bounded */
		r = read_key(c, k);
	}
	bch_btree_iter_exit(&it);
	if (!r && err) {
		if (!c->opts.v[Opt_fsck] || err == -ENOMEM || bch_err_is_dl(err))
			return err;
		c->err_msg[0] = 0;	/* fsck finds the damaged node itself */
	}
	if (r || !load)
		return r;
	for (unsigned d = 0; d < c->nr_devs; d++)
		for (uint64_t b = 0; b < bch_alloc_nbuckets(c, d); b++) {
			struct bch_bucket_state now;
			if (bch_alloc_bucket_get(c, d, b, &now))
				bch_alloc_bucket_set(c, d, b, &c->alloc_btree->stored[d][b]);
		}
	*loaded = true;
	return 0;
}

static int record_diff(void *priv, unsigned dev, uint64_t bucket,
		       const struct bch_bucket_state *stored, const struct bch_bucket_state *now)
{
	struct bch_alloc_btree *ab = priv;

	if (ab->nr_diffs == MAX_OPEN_DIFFS)
		return 0;
	if (!(ab->nr_diffs & (ab->nr_diffs - 1)) || !ab->nr_diffs) {
		unsigned cap = ab->nr_diffs ? ab->nr_diffs * 2 : 16;
		struct open_diff *n = realloc(ab->diffs, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		ab->diffs = n;
	}
	ab->diffs[ab->nr_diffs++] = (struct open_diff) { dev, bucket, *stored, *now };
	return 0;
}

int bch_alloc_btree_rebuilt(struct bch_fs *c)
{
	struct bch_alloc_btree *ab = c->alloc_btree;

	for (unsigned d = 0; d < c->nr_devs; d++)
		for (uint64_t b = 0; ab && ab->stored[d] && b < bch_alloc_nbuckets(c, d); b++)
			bch_alloc_bucket_set_gen(c, d, b, ab->stored[d][b].gen);
	for (unsigned d = 0; d < c->nr_devs; d++)
		for (uint64_t b = 0; ab && ab->gens[d] && b < bch_alloc_nbuckets(c, d); b++)
			bch_alloc_bucket_set_gen(c, d, b, ab->gens[d][b]);
	if (ab)
		gens_free(c, ab);	/* nothing reads them again */
	/* cached pointers are counted once every bucket has its gen (alloc.h) */
	if (bch_alloc_settle_cached_gens(c) && !c->extents_mark_deferred) {
		int r = bch_extents_mark_cached(c);
		if (r)
			return r;
	}
	return c->extents_mark_deferred ? 0 : bch_alloc_btree_record_diffs(c);
}

int bch_alloc_btree_recount(struct bch_fs *c)
{
	int r;

	bch_alloc_recount_begin(c);
	r = bch_extents_mark_all(c);
	/* cached pointers in a second walk, as at open (alloc.h), only when there are any */
	if (!r && bch_alloc_settle_cached_gens(c))
		r = bch_extents_mark_cached(c);
	bch_alloc_recount_end(c);
	return r;
}

int bch_alloc_btree_record_diffs(struct bch_fs *c)
{
	struct bch_alloc_btree *ab = c->alloc_btree;

	/*
	 * fsck: what the keys said against the pointers, unless nodes could not
	 * be read (their space was not counted: a comparison would only show that)
	 */
	int r = 0;

	if (ab && ab->was_current && !c->alloc_recount_partial)
		r = bch_alloc_btree_for_each_diff(c, record_diff, ab);
	/*
	 * Read-only (fsck -n): nothing will write alloc keys, and the
	 * differences are taken: the mirror is not needed again (it is a
	 * fifth of fsck's memory at 1M files)
	 */
	for (unsigned d = 0; ab && !r && c->read_only && d < BCH_SB_MEMBERS_MAX; d++) {
		free(ab->stored[d]);
		ab->stored[d] = NULL;
	}
	return r;
}

int bch_alloc_btree_for_each_open_diff(struct bch_fs *c,
				       int (*fn)(void *priv, unsigned dev, uint64_t bucket,
						 const struct bch_bucket_state *stored,
						 const struct bch_bucket_state *now),
				       void *priv)
{
	struct bch_alloc_btree *ab = c->alloc_btree;
	int r;

	for (unsigned i = 0; ab && i < ab->nr_diffs; i++)
		if ((r = fn(priv, ab->diffs[i].dev, ab->diffs[i].bucket, &ab->diffs[i].stored,
			    &ab->diffs[i].now)))
			return r;
	return 0;
}

void bch_alloc_btree_forget_stored(struct bch_fs *c)
{
	struct bch_alloc_btree *ab = c->alloc_btree;

	for (unsigned d = 0; ab && d < c->nr_devs; d++)
		for (uint64_t b = 0; ab->stored[d] && b < bch_alloc_nbuckets(c, d); b++)
			ab->stored[d][b].data_type = 0xff;	/* matches no state: written at close */
}

bool bch_alloc_btree_was_current(struct bch_fs *c)
{
	return c->alloc_btree && c->alloc_btree->was_current;
}

void bch_alloc_btree_leave_stale(struct bch_fs *c)
{
	if (c->alloc_btree)
		c->alloc_btree->leave_stale = true;
}

/*
 * for_each_diff without the mirror: the keys read again, in order, beside
 * every bucket (a bucket without a good key: stored state all zeros, as
 * the mirror would hold).
 */
static int diff_walk(struct bch_fs *c,
		     int (*fn)(void *priv, unsigned dev, uint64_t bucket,
			       const struct bch_bucket_state *stored,
			       const struct bch_bucket_state *now),
		     void *priv)
{
	struct btree_iter it;
	const struct bch_bkey *k = NULL;
	int r = 0, err = 0;

	if (c->roots->r[BCH_BTREE_ID_alloc].key) {
		bch_btree_iter_init(&it, c, BCH_BTREE_ID_alloc, POS_MIN, POS_MAX);
		k = bch_btree_iter_next(&it, &err);
	}
	for (unsigned d = 0; d < c->nr_devs && !r; d++)
		for (uint64_t b = 0; b < bch_alloc_nbuckets(c, d) && !r; b++) {
			struct bch_bucket_state stored = { 0 }, s, now;
			const char *why;
			/* keys before this bucket belong to none (reported as bad at open) */
			while (k && (k->p.inode < d || (k->p.inode == d && k->p.offset <= b))) {
				if (k->p.inode == d && k->p.offset == b &&
				    key_state(c, k, &s, &why) == KEY_GOOD)
					stored = s;
				k = bch_btree_iter_next(&it, &err);
			}
			if (bch_alloc_bucket_get(c, d, b, &now) && !state_eq(&now, &stored))
				r = fn(priv, d, b, &stored, &now);
		}
	if (c->roots->r[BCH_BTREE_ID_alloc].key)
		bch_btree_iter_exit(&it);
	if (!r && err) {
		if (err == -ENOMEM || bch_err_is_dl(err))
			return err;
		c->err_msg[0] = 0;	/* a damaged node: the open's read met it too (fsck finds it) */
	}
	return r;
}

int bch_alloc_btree_for_each_diff(struct bch_fs *c,
				  int (*fn)(void *priv, unsigned dev, uint64_t bucket,
					    const struct bch_bucket_state *stored,
					    const struct bch_bucket_state *now),
				  void *priv)
{
	struct bch_alloc_btree *ab = c->alloc_btree;

	if (ab && ab->walk)
		return diff_walk(c, fn, priv);
	for (unsigned d = 0; ab && d < c->nr_devs; d++)
		for (uint64_t b = 0; ab->stored[d] && b < bch_alloc_nbuckets(c, d); b++) {
			struct bch_bucket_state now;
			int r;
			if (bch_alloc_bucket_get(c, d, b, &now) && !state_eq(&now, &ab->stored[d][b]) &&
			    (r = fn(priv, d, b, &ab->stored[d][b], &now)))
				return r;
		}
	return 0;
}

int bch_alloc_btree_for_each_bad(struct bch_fs *c,
				  int (*fn)(void *priv, struct bch_bpos pos, const char *why),
				  void *priv)
{
	struct bch_alloc_btree *ab = c->alloc_btree;
	int r;

	for (unsigned i = 0; ab && i < ab->nr_bad; i++)
		if ((r = fn(priv, ab->bad[i], ab->bad_why[i])))
			return r;
	return 0;
}

int bch_alloc_btree_delete(struct bch_fs *c, struct bch_bpos pos)
{
	struct bch_bkey del = { .u64s = BCH_BKEY_U64s, .type = BCH_BKEY_deleted, .p = pos };
	struct btree_trans *t;
	int r = bch_trans_init(c, &t);

	if (r)
		return r;
	if (!(r = bch_trans_update(t, BCH_BTREE_ID_alloc, &del)))
		r = bch_trans_commit(t, 0);
	bch_trans_exit(t);
	return r;
}

#define BUCKET_KEY_U64s	((sizeof(struct bch_bkey) + sizeof(struct bch_alloc)) / 8)

/* The alloc key of bucket b of dev in state now, built in buf. */
static struct bch_bkey *bucket_key(struct bch_fs *c, unsigned dev, uint64_t b,
				   const struct bch_bucket_state *now, uint64_t *buf)
{
	struct bch_bkey *k = (struct bch_bkey *)buf;
	struct bch_alloc *v = bkey_val(k);

	memset(buf, 0, BUCKET_KEY_U64s * 8);
	k->u64s = BUCKET_KEY_U64s;
	k->p = POS(dev, b, 0);
	if (!now->gen && now->data_type == BCH_DATA_free) {
		k->u64s = BCH_BKEY_U64s;
		k->type = BCH_BKEY_deleted;	/* the default needs no key */
	} else {
		k->type = BCH_BKEY_alloc;
		v->gen = now->gen;
		v->data_type = now->data_type;
		v->dirty_sectors = now->sectors;
		v->cached_sectors = now->cached_sectors;
		v->journal_seq = bch_journal_cur_seq(c);
	}
	return k;
}

static unsigned keys_per_trans(struct bch_fs *c)
{
	unsigned n = bch_trans_max_u64s(c) / (1 + BUCKET_KEY_U64s);

	return n > KEYS_PER_TRANS ? KEYS_PER_TRANS : n ? n : 1;
}

int bch_alloc_btree_write_buckets(struct bch_fs *c, unsigned dev, const uint64_t *buckets,
				  unsigned nr)
{
	struct bch_alloc_btree *ab = c->alloc_btree;
	unsigned per_trans = keys_per_trans(c);
	int r = 0;

	if (!nr)
		return 0;
	if (!ab || dev >= c->nr_devs || !ab->stored[dev])
		return bch_fs_err(c, -EINVAL, "alloc btree: no state for device %u", dev);
	if (!c->roots->r[BCH_BTREE_ID_alloc].key && (r = bch_btree_create_root(c, BCH_BTREE_ID_alloc)))
		return r;
	for (unsigned i = 0; i < nr && !r; ) {
		struct btree_trans *t;
		unsigned start = i;
		if ((r = bch_trans_init(c, &t)))
			break;
		for (; i < nr && i - start < per_trans && !r; i++) {
			struct bch_bucket_state now;
			uint64_t buf[BUCKET_KEY_U64s];
			if (!bch_alloc_bucket_get(c, dev, buckets[i], &now))
				continue;
			r = bch_trans_update(t, BCH_BTREE_ID_alloc, bucket_key(c, dev, buckets[i], &now, buf));
		}
		if (!r)
			r = bch_trans_commit(t, 0);
		bch_trans_exit(t);
		/* mirrored once committed (the commit may change other buckets: close syncs them) */
		for (unsigned j = start; j < i && !r; j++) {
			struct bch_bucket_state now;
			if (bch_alloc_bucket_get(c, dev, buckets[j], &now))
				ab->stored[dev][buckets[j]] = now;
		}
	}
	return r;
}

/* Keys for every bucket that differs from the stored state; *nr how many. */
static int write_diffs(struct bch_fs *c, uint64_t *nr)
{
	struct bch_alloc_btree *ab = c->alloc_btree;
	struct btree_trans *t = NULL;
	unsigned in_trans = 0, per_trans = keys_per_trans(c);
	int r = 0;

	*nr = 0;
	for (unsigned d = 0; d < c->nr_devs && !r; d++)
		for (uint64_t b = 0; ab->stored[d] && b < bch_alloc_nbuckets(c, d) && !r; b++) {
			struct bch_bucket_state now;
			if (!bch_alloc_bucket_get(c, d, b, &now) || state_eq(&now, &ab->stored[d][b]))
				continue;
			if (!t && (r = bch_trans_init(c, &t)))
				break;
			uint64_t buf[BUCKET_KEY_U64s];
			struct bch_bkey *k = bucket_key(c, d, b, &now, buf);
			if ((r = bch_trans_update(t, BCH_BTREE_ID_alloc, k)))
				break;
			ab->stored[d][b] = now;
			(*nr)++;
			if (++in_trans == per_trans) {
				r = bch_trans_commit(t, 0);
				in_trans = 0;
			}
		}
	if (!r && t && in_trans)
		r = bch_trans_commit(t, 0);
	if (t)
		bch_trans_exit(t);
	return r;
}

static int any_diff(void *priv, unsigned dev, uint64_t bucket,
		    const struct bch_bucket_state *stored, const struct bch_bucket_state *now)
{
	(void)priv, (void)dev, (void)bucket, (void)stored, (void)now;
	return 1;
}

int bch_alloc_btree_sync(struct bch_fs *c, bool *current)
{
	struct bch_alloc_btree *ab = c->alloc_btree;
	int r;

	*current = false;
	if (ab && !ab->leave_stale && !c->roots->r[BCH_BTREE_ID_alloc].key &&
	    (r = bch_btree_create_root(c, BCH_BTREE_ID_alloc)))
		return r;	/* made before the alloc btree existed */
	for (unsigned round = 0; round < SYNC_ROUNDS; round++) {
		uint64_t nr;
		if (ab && !ab->leave_stale && (r = write_diffs(c, &nr))) {
			if (r != -BCH_ERR_no_space || c->emergency_ro)
				return r;
			/* full: close cleanly anyway, with the alloc btree not current */
			c->err_msg[0] = 0;
			ab->leave_stale = true;
		}
		if ((r = bch_btree_flush_all(c)) || (r = bch_journal_reclaim_all(c)))
			return r;
		if (!ab || ab->leave_stale)
			return 0;
		/* settled when the flush, too, left every bucket as written */
		if (!bch_alloc_btree_for_each_diff(c, any_diff, NULL)) {
			*current = true;
			return 0;
		}
	}
	return 0;
}

