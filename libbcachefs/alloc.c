// SPDX-License-Identifier: GPL-2.0
/*
 * alloc.c - per-device bucket state and btree node allocation (see alloc.h).
 *
 * A bucket is free when it holds no live sectors, is not the superblock
 * area or the journal, and the sequence at which it last became empty is
 * durable.  Btree nodes are carved from one open bucket per device in
 * order; a bucket is reopened for nodes only when free, and its generation
 * is bumped then.
 *
 * Degraded (a member not given, bch_dev_missing()): it has no bucket state
 * here; pointers to it are neither counted nor freed, and nothing is
 * allocated on it.  Its alloc keys stay as they are (alloc_btree.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "alloc.h"
#include "alloc_btree.h"
#include "bcachefs.h"
#include "blockdev.h"
#include "errcode.h"
#include "io.h"
#include "journal.h"
#include "super.h"

struct bch_dev_alloc {
	uint64_t	nbuckets;
	unsigned	bucket_sectors;
	uint8_t		*gen;
	uint8_t		*type;		/* enum bch_data_type */
	uint32_t	*sectors;	/* live sectors (dirty: counted in replicas) */
	uint32_t	*cached;	/* sectors of live cached pointers */
	int16_t		*cached_gen;	/* open (rebuild): newest gen of a cached pointer
					 * seen into the bucket, -1 none; NULL after */
	uint64_t	*free_seq;	/* journal seq at which it became empty; NULL
					 * until one does (a read-only open never) */
	int64_t		open;		/* bucket nodes are carved from, -1 none */
	unsigned	open_off;	/* sectors used in it */
	int64_t		open_dup;	/* the same for second copies of nodes on this
					 * device (metadata copies on one device), -1 none */
	unsigned	open_dup_off;
	uint64_t	rotor_dup;	/* where its search resumes: half a device
					 * from the first stream's start */
	int64_t		open_user;	/* bucket user data is appended to, -1 none */
	unsigned	open_user_off;
	int64_t		open_ec;	/* stripe candidate stream (alloc.h): the bucket one
					 * copy of erasure-coded files' data is appended to */
	unsigned	open_ec_off;
	uint64_t	ec_opened;	/* candidate buckets opened this session */
	uint64_t	rotor;		/* where the search for a free bucket resumes */
	uint64_t	limit;		/* no bucket from here on is opened (a shrink
					 * in progress: device.h); nbuckets otherwise */
	uint64_t	nr_empty;	/* buckets with no data (free, or free once durable) */
	uint64_t	nr_cached;	/* buckets holding only cached data (type cached) */
	uint32_t	*read_clock;	/* per bucket: clock of its last cached read (or of
					 * its opening for data); eviction takes the oldest */
	uint32_t	clock;		/* bumped per cached read and per bucket opened */
	/* the member's discard option: buckets emptied, discarded once free (below) */
	struct bch_blockdev *discard_bdev;	/* NULL: discard off (or read-only) */
	uint64_t	*discard;	/* queued buckets, each once (discard_queued) */
	uint8_t		*discard_queued;
	uint64_t	nr_discard, discard_cap;
	uint64_t	discard_durable;	/* journal seq durable at the last pass */
	/*
	 * The sums bch_dev_usage_get() returns (nbuckets aside), kept as the
	 * arrays change: every change of a bucket's type, sectors or cached
	 * count is bracketed by usage_sub() and usage_add(), and the arrays,
	 * when filled in bulk, are summed again by usage_rebuild().
	 */
	struct bch_dev_usage usage;
};

/* Take bucket b's share out of the running sums, before it changes. */
static void usage_sub(struct bch_dev_alloc *a, uint64_t b)
{
	struct bch_dev_usage *u = &a->usage;
	unsigned t = a->type[b];

	u->free_buckets -= t == BCH_DATA_free && !a->sectors[b];
	u->buckets[t]--;
	u->sectors[t] -= a->sectors[b];
	u->cached_sectors -= a->cached[b];
	u->cached_by_type[t] -= a->cached[b];
}

/* Put bucket b's share back, after it changed. */
static void usage_add(struct bch_dev_alloc *a, uint64_t b)
{
	struct bch_dev_usage *u = &a->usage;
	unsigned t = a->type[b];

	u->free_buckets += t == BCH_DATA_free && !a->sectors[b];
	u->buckets[t]++;
	u->sectors[t] += a->sectors[b];
	u->cached_sectors += a->cached[b];
	u->cached_by_type[t] += a->cached[b];
}

/* The sums from the arrays: one pass over every bucket. */
static void usage_scan(const struct bch_dev_alloc *a, struct bch_dev_usage *u)
{
	memset(u, 0, sizeof(*u));
	u->nbuckets = a->nbuckets;
	for (uint64_t b = 0; b < a->nbuckets; b++) {
		if (a->type[b] == BCH_DATA_free && !a->sectors[b])
			u->free_buckets++;
		u->buckets[a->type[b]]++;
		u->sectors[a->type[b]] += a->sectors[b];
		u->cached_sectors += a->cached[b];
		u->cached_by_type[a->type[b]] += a->cached[b];
	}
}

static void usage_rebuild(struct bch_dev_alloc *a)
{
	usage_scan(a, &a->usage);
}

/*
 * Bucket gens and types, a byte each, in one mapping of their own: the
 * buckets never used stay zero pages (a calloc() from the heap clears them
 * all, resident: 128 KB at 64k buckets, for a filesystem using a tenth).
 */
static int gen_type_alloc(struct bch_dev_alloc *a)
{
	void *p = mmap(NULL, 2 * a->nbuckets + 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);

	if (p == MAP_FAILED)
		return -ENOMEM;
	a->gen = p;
	a->type = a->gen + a->nbuckets;
	return 0;
}

static void gen_type_free(struct bch_dev_alloc *a)
{
	if (a->gen)
		munmap(a->gen, 2 * a->nbuckets + 1);
	a->gen = a->type = NULL;
}

int bch_fs_alloc_init(struct bch_fs *c)
{
	struct bch_sb_field_journal *jf = bch_sb_get_journal(c->sb);
	unsigned runs = jf ? (jf->field.u64s * 8 - sizeof(jf->field)) / sizeof(jf->runs[0]) : 0;

	for (unsigned i = 0; i < c->nr_devs; i++) {
		struct bch_dev *ca = c->devs[i];
		struct bch_member *m = bch_sb_member(c->sb, i);
		struct bch_dev_alloc *a;

		if (!ca)
			continue;
		a = calloc(1, sizeof(*a));
		if (!a)
			return -ENOMEM;
		ca->alloc = a;
		a->nbuckets = m->nbuckets;
		a->limit = m->nbuckets;
		a->bucket_sectors = m->bucket_size;
		if (gen_type_alloc(a))
			return -ENOMEM;
		a->sectors = calloc(a->nbuckets, sizeof(uint32_t));
		a->cached = calloc(a->nbuckets, sizeof(uint32_t));
		a->read_clock = calloc(a->nbuckets, sizeof(uint32_t));
		if (!a->sectors || !a->cached || !a->read_clock)
			return -ENOMEM;
		a->open = -1;
		a->open_dup = -1;
		a->rotor_dup = a->nbuckets / 2;
		a->open_user = -1;
		a->open_ec = -1;
		a->nr_empty = a->nbuckets;
		if (m->discard && !c->read_only && ca->bdev)
			a->discard_bdev = ca->bdev;
		for (uint64_t b = 0; b < m->first_bucket && b < a->nbuckets; b++) {
			a->nr_empty--;
			a->type[b] = BCH_DATA_sb;
			a->sectors[b] = a->bucket_sectors;
		}
		for (unsigned r = 0; r < runs; r++)
			if (jf->runs[r].dev == i)
				for (uint64_t b = jf->runs[r].start;
				     b < jf->runs[r].start + jf->runs[r].nr && b < a->nbuckets; b++) {
					a->nr_empty -= a->type[b] == BCH_DATA_free;
					a->type[b] = BCH_DATA_journal;
					a->sectors[b] = a->bucket_sectors;
				}
		usage_rebuild(a);
	}
	return 0;
}

void bch_fs_alloc_exit(struct bch_fs *c)
{
	for (unsigned i = 0; i < BCH_SB_MEMBERS_MAX; i++) {
		struct bch_dev *ca = c->devs[i];
		if (!ca || !ca->alloc)
			continue;
		gen_type_free(ca->alloc);
		free(ca->alloc->sectors);
		free(ca->alloc->cached);
		free(ca->alloc->read_clock);
		free(ca->alloc->cached_gen);
		free(ca->alloc->free_seq);
		free(ca->alloc->discard);
		free(ca->alloc->discard_queued);
		free(ca->alloc);
		ca->alloc = NULL;
	}
}

static struct bch_dev_alloc *dev_alloc(struct bch_fs *c, unsigned dev)
{
	return dev < BCH_SB_MEMBERS_MAX && c->devs[dev] ? c->devs[dev]->alloc : NULL;
}

/* Is b a bucket some stream appends to (so not empty even with no sectors)? */
static bool bucket_is_open(const struct bch_dev_alloc *a, uint64_t b)
{
	return (int64_t)b == a->open || (int64_t)b == a->open_dup || (int64_t)b == a->open_user ||
	       (int64_t)b == a->open_ec;
}

/*
 * The bucket holding sectors [offset, offset + span), or -1 when they are
 * not all inside one bucket of the device.  Marking refuses such a pointer,
 * so nothing that frees or accounts space may count it either.
 */
static int64_t bucket_of(const struct bch_dev_alloc *a, uint64_t offset, unsigned span)
{
	uint64_t b = offset / a->bucket_sectors;

	return b < a->nbuckets && offset % a->bucket_sectors + span <= a->bucket_sectors
		? (int64_t)b : -1;
}

int bch_alloc_mark_ptr(struct bch_fs *c, const struct bch_extent_ptr *p, unsigned sectors,
		       unsigned data_type)
{
	struct bch_dev_alloc *a = dev_alloc(c, p->dev);

	if (!a && bch_dev_missing(c, p->dev))
		return 0;	/* a copy on a member not given (degraded): not counted */
	if (!a)
		return bch_fs_err(c, -BCH_ERR_btree_node_bad, "pointer to missing device %u", p->dev);
	int64_t b = bucket_of(a, p->offset, sectors);
	if (b < 0)
		return bch_fs_err(c, -BCH_ERR_btree_node_bad,
				  "pointer %u:%" PRIu64 " outside the device's buckets",
				  p->dev, (uint64_t)p->offset);
	if (a->type[b] != BCH_DATA_free && a->type[b] != data_type)
		return bch_fs_err(c, -BCH_ERR_btree_node_bad,
				  "pointer %u:%" PRIu64 " into a bucket holding other data",
				  p->dev, (uint64_t)p->offset);
	if (a->type[b] == BCH_DATA_free && !a->sectors[b])
		a->nr_empty--;
	usage_sub(a, b);
	a->type[b] = data_type;
	a->gen[b] = p->gen;
	a->sectors[b] += sectors;
	usage_add(a, b);
	return 0;
}

bool bch_alloc_ptr_live(struct bch_fs *c, const struct bch_extent_ptr *p)
{
	struct bch_dev_alloc *a = dev_alloc(c, p->dev);
	uint64_t b;

	if (!a || (b = p->offset / a->bucket_sectors) >= a->nbuckets)
		return false;
	if (p->flags & BCH_EXTENT_PTR_CACHED)	/* not counted at open: not trusted */
		return a->gen[b] == p->gen &&
		       (a->type[b] == BCH_DATA_user || a->type[b] == BCH_DATA_cached);
	return a->gen[b] == p->gen;
}

static bool bucket_free(struct bch_fs *c, struct bch_dev_alloc *a, uint64_t b)
{
	return a->type[b] == BCH_DATA_free && !a->sectors[b] && !a->cached[b] &&
	       (!a->free_seq || a->free_seq[b] <= bch_journal_seq_durable(c));
}

/*
 * Discard (the member's discard option): a bucket emptied in this session
 * is queued, and discarded (BLKDISCARD, or a hole punched in an image file:
 * bch_dev_discard()) when it is free by bucket_free(): the journal sequence
 * of its free is durable (invariant 2 of DESIGN.md section 4: what is
 * discarded is what the allocator could overwrite), it is not open, and it
 * was not reused meanwhile (then it is dropped from the queue; its next
 * emptying queues it again).  Passes run before a bucket is opened, when
 * the durable sequence moved, and at close (bch_alloc_discard_free()).
 * Buckets that were already empty at open are not discarded.
 */
static void discard_queue(struct bch_dev_alloc *a, uint64_t b)
{
	if (!a->discard_queued && !(a->discard_queued = calloc(a->nbuckets, 1)))
		abort();
	if (a->discard_queued[b])
		return;
	if (a->nr_discard == a->discard_cap) {
		a->discard_cap = a->discard_cap ? a->discard_cap * 2 : 64;
		if (!(a->discard = realloc(a->discard, a->discard_cap * sizeof(*a->discard))))
			abort();
	}
	a->discard[a->nr_discard++] = b;
	a->discard_queued[b] = 1;
}

static int discard_pass(struct bch_fs *c, struct bch_dev_alloc *a)
{
	uint64_t durable = bch_journal_seq_durable(c), kept = 0;
	int ret = 0;

	if (!a->nr_discard || durable == a->discard_durable)
		return 0;
	a->discard_durable = durable;
	for (uint64_t i = 0; i < a->nr_discard; i++) {
		uint64_t b = a->discard[i];
		bool reused = a->type[b] != BCH_DATA_free || a->sectors[b] || a->cached[b] ||
			      bucket_is_open(a, b);

		if (!reused && !bucket_free(c, a, b)) {
			a->discard[kept++] = b;		/* not durable yet */
			continue;
		}
		a->discard_queued[b] = 0;
		if (!reused && !ret) {
			bch_data_reuse_bump(c);	/* zeros where data was (io.h) */
			ret = bch_dev_discard(a->discard_bdev,
					      (b * a->bucket_sectors) << BCH_SECTOR_SHIFT,
					      (uint64_t)a->bucket_sectors << BCH_SECTOR_SHIFT);
		}
	}
	a->nr_discard = kept;
	return ret;
}

int bch_alloc_discard_free(struct bch_fs *c)
{
	int ret = 0;

	for (unsigned i = 0; i < c->nr_devs; i++) {
		struct bch_dev_alloc *a = dev_alloc(c, i);
		int r = a && a->discard_bdev ? discard_pass(c, a) : 0;
		if (!ret)
			ret = r;
	}
	return ret;
}

/* Bucket b became empty now: it is reused once this journal sequence is durable. */
static void bucket_emptied(struct bch_fs *c, struct bch_dev_alloc *a, uint64_t b)
{
	if (!a->free_seq && !(a->free_seq = calloc(a->nbuckets, sizeof(uint64_t))))
		abort();
	a->free_seq[b] = bch_journal_cur_seq(c);
	c->space_gen++;
	if (a->discard_bdev)
		discard_queue(a, b);
}

/*
 * A user data bucket's counts changed (or it stopped being open): it is
 * user while it holds dirty sectors or is open for appends, cached while it
 * holds only cached sectors (reusable at any time, see alloc.h), else free
 * from now (reusable once durable).
 */
static void data_bucket_settle(struct bch_fs *c, struct bch_dev_alloc *a, uint64_t b)
{
	unsigned old = a->type[b], now;

	if (old != BCH_DATA_user && old != BCH_DATA_cached)
		return;
	if (a->sectors[b] || bucket_is_open(a, b))
		now = BCH_DATA_user;
	else if (a->cached[b])
		now = BCH_DATA_cached;
	else
		now = BCH_DATA_free;
	if (now == old)
		return;
	a->nr_cached += (now == BCH_DATA_cached) - (old == BCH_DATA_cached);
	usage_sub(a, b);
	a->type[b] = now;
	usage_add(a, b);
	if (now == BCH_DATA_free) {
		bucket_emptied(c, a, b);
		a->nr_empty++;
	}
}

static uint64_t reserve_of(const struct bch_dev_alloc *a);
static int alloc_on_dev_reserve(struct bch_fs *c, unsigned dev, unsigned data_type, unsigned sectors,
				bool half_reserve, struct bch_extent_ptr *p);

/*
 * Carve sectors from the open bucket of dev for data_type (btree or user),
 * opening a new one if they do not fit.  User data may not take the last
 * reserve_of() empty buckets: those are kept for btree nodes, so metadata
 * can always be updated (deletes free space) on a full filesystem.
 */
static int alloc_on_dev(struct bch_fs *c, unsigned dev, unsigned data_type, unsigned sectors,
			struct bch_extent_ptr *p)
{
	return alloc_on_dev_reserve(c, dev, data_type, sectors, c->alloc_for_delete, p);
}

/*
 * The second btree stream of dev: a node's second copy on a device that
 * already holds its first, from another bucket, searched from half a
 * device further on (so one damaged region rarely holds both copies).
 */
static int alloc_dup_on_dev(struct bch_fs *c, unsigned dev, unsigned sectors,
			    struct bch_extent_ptr *p)
{
	struct bch_dev_alloc *a = dev_alloc(c, dev);
	int64_t open = a->open, open_off = a->open_off;
	uint64_t rotor = a->rotor;
	int r;

	/*
	 * Below the usable end (a shrink moves nodes below it): half of what
	 * is usable away from the first stream, or the search would wrap to
	 * the buckets right after the first copies
	 */
	if (a->rotor_dup >= a->limit && a->limit)
		a->rotor_dup = (a->rotor + a->limit / 2) % a->limit;
	/* the stream's state swapped into the first's: one carving routine */
	a->open = a->open_dup;
	a->open_off = a->open_dup_off;
	a->rotor = a->rotor_dup;
	r = alloc_on_dev_reserve(c, dev, BCH_DATA_btree, sectors, c->alloc_for_delete, p);
	a->open_dup = a->open;
	a->open_dup_off = a->open_off;
	a->rotor_dup = a->rotor;
	a->open = open;
	a->open_off = open_off;
	a->rotor = rotor;
	return r;
}

/*
 * The stripe candidate stream of dev (alloc.h): user data carved from its
 * own open bucket, so that bucket holds one copy of erasure-coded data only.
 * The state is swapped into the user stream's, as alloc_dup_on_dev() does.
 */
static int alloc_ec_on_dev(struct bch_fs *c, unsigned dev, unsigned sectors, bool half_reserve,
			   struct bch_extent_ptr *p)
{
	struct bch_dev_alloc *a = dev_alloc(c, dev);
	int64_t open = a->open_user;
	unsigned open_off = a->open_user_off;
	int64_t was = a->open_ec;
	int r;

	a->open_user = a->open_ec;
	a->open_user_off = a->open_ec_off;
	a->open_ec = open;	/* still open while swapped: nothing settles it */
	r = alloc_on_dev_reserve(c, dev, BCH_DATA_user, sectors, half_reserve, p);
	a->ec_opened += a->open_user != was;
	a->open_ec = a->open_user;
	a->open_ec_off = a->open_user_off;
	a->open_user = open;
	a->open_user_off = open_off;
	return r;
}

static int alloc_on_dev_reserve(struct bch_fs *c, unsigned dev, unsigned data_type, unsigned sectors,
				bool half_reserve, struct bch_extent_ptr *p)
{
	struct bch_dev_alloc *a = dev_alloc(c, dev);
	bool user = data_type == BCH_DATA_user;
	int64_t *open = user ? &a->open_user : &a->open;
	unsigned *off = user ? &a->open_user_off : &a->open_off;

	if (sectors > a->bucket_sectors)
		return -BCH_ERR_no_space;
	if (*open < 0 || *off + sectors > a->bucket_sectors) {
		uint64_t b = 0, n;
		if (user && a->nr_empty <= (half_reserve ? reserve_of(a) / 2 + 1 : reserve_of(a)))
			return -BCH_ERR_no_space;
		if (a->discard_bdev)
			discard_pass(c, a);	/* best effort: an I/O error shows at the next write */
		for (n = 0; n < a->nbuckets; n++) {
			b = (a->rotor + n) % a->nbuckets;
			if (b < a->limit && bucket_free(c, a, b))
				break;
		}
		if (n == a->nbuckets)
			return -BCH_ERR_no_space;
		a->rotor = b + 1;
		int64_t was = *open;
		a->nr_empty--;
		*open = b;
		if (was >= 0 && user) {
			data_bucket_settle(c, a, was);	/* its data may all be gone */
		} else if (was >= 0 && !a->sectors[was]) {
			/* the old open bucket's contents were all freed meanwhile */
			usage_sub(a, was);
			a->type[was] = BCH_DATA_free;
			usage_add(a, was);
			bucket_emptied(c, a, was);
			a->nr_empty++;
		}
		*off = 0;
		bch_data_reuse_bump(c);	/* before anything is written over its old data (io.h) */
		a->gen[b]++;
		usage_sub(a, b);
		a->type[b] = data_type;
		usage_add(a, b);
		a->read_clock[b] = ++a->clock;	/* fresh data is not the least recently used */
	}
	p->dev = dev;
	p->gen = a->gen[*open];
	p->flags = 0;
	p->stripe_block = 0;
	p->stripe = 0;
	p->offset = (uint64_t)*open * a->bucket_sectors + *off;
	*off += sectors;
	usage_sub(a, *open);
	a->sectors[*open] += sectors;
	usage_add(a, *open);
	return 0;
}

unsigned bch_alloc_nr_devs_for(struct bch_fs *c, unsigned data_type)
{
	unsigned n = 0;

	for (unsigned i = 0; i < c->nr_devs; i++) {
		struct bch_member *m = bch_sb_member(c->sb, i);
		n += dev_alloc(c, i) && m->state == BCH_MEMBER_STATE_rw &&
		     (m->data_allowed & (1U << data_type));
	}
	return n;
}

static int alloc_nodes(struct bch_fs *c, unsigned nr, struct bch_extent_ptr *ptrs);

bool bch_alloc_btree_dup(struct bch_fs *c)
{
	unsigned members, want = c->opts.v[Opt_metadata_replicas];

	if (!bch_fs_has_v2(c) || c->devs_missing)
		return false;
	/*
	 * The members nodes can be written to: a member set read-only (one
	 * being evacuated or removed) takes no copy, so the others take two
	 */
	members = bch_alloc_nr_devs_for(c, BCH_DATA_btree);
	return members && members < want;
}

/*
 * Freed space waits for its journal sequence to be durable; when nothing
 * else is free, make it durable now (one journal write) and try again.
 */
int bch_alloc_btree_node(struct bch_fs *c, unsigned nr, struct bch_extent_ptr *ptrs)
{
	int r = alloc_nodes(c, nr, ptrs);

	/* the flush may reclaim, which writes nodes, which allocate: only once */
	if (r == -BCH_ERR_no_space && !c->read_only && !c->alloc_flushing &&
	    bch_journal_seq_durable(c) < bch_journal_cur_seq(c)) {
		c->alloc_flushing = true;
		int f = bch_journal_flush(c);
		c->alloc_flushing = false;
		if (!f) {
			c->err_msg[0] = 0;
			r = alloc_nodes(c, nr, ptrs);
		}
	}
	return r;
}

static int alloc_nodes(struct bch_fs *c, unsigned nr, struct bch_extent_ptr *ptrs)
{
	unsigned got = 0;

	/* devices of metadata_target first, then any other (when the target is full) */
	uint64_t target = c->opts.v[Opt_metadata_target];
	bool used[BCH_SB_MEMBERS_MAX] = { false };
	for (unsigned pass = 0; pass < 2 && got < nr; pass++)
		for (unsigned i = 0; i < c->nr_devs && got < nr; i++) {
			struct bch_member *m = bch_sb_member(c->sb, i);
			if (used[i] || !dev_alloc(c, i) || m->state != BCH_MEMBER_STATE_rw ||
			    !(m->data_allowed & (1U << BCH_DATA_btree)) ||
			    (!pass && !bch_dev_in_target(c->sb, i, target)))
				continue;
			if (!alloc_on_dev(c, i, BCH_DATA_btree, c->sb->btree_node_size, &ptrs[got])) {
				used[i] = true;
				got++;
			}
		}
	/*
	 * Metadata copies on one device (version 2): copies the members could
	 * not take one each go to a second bucket of a member already used,
	 * when the caller asked for more copies than members (btree_update.c
	 * decides when; at most two copies on one device).
	 */
	unsigned distinct = bch_alloc_btree_dup(c) ? got : 0;
	for (unsigned k = 0; k < distinct && got < nr; k++)
		if (!alloc_dup_on_dev(c, ptrs[k].dev, c->sb->btree_node_size, &ptrs[got]))
			got++;
	if (got < nr) {
		bch_free_btree_node(c, ptrs, got);
		return bch_fs_err(c, -BCH_ERR_no_space,
				  "no space for a btree node on %u device%s", nr, nr > 1 ? "s" : "");
	}
	return 0;
}

void bch_free_btree_node(struct bch_fs *c, const struct bch_extent_ptr *ptrs, unsigned nr)
{
	unsigned node = c->sb->btree_node_size;

	for (unsigned i = 0; i < nr; i++) {
		struct bch_dev_alloc *a = dev_alloc(c, ptrs[i].dev);
		int64_t b;

		/*
		 * A damaged pointer (fsck frees what it pointed at) may name data,
		 * or run past its bucket's end: bch_alloc_mark_ptr() counted
		 * neither, so there is nothing of it to take off.
		 */
		if (!a || (b = bucket_of(a, ptrs[i].offset, node)) < 0 ||
		    a->type[b] != BCH_DATA_btree)
			continue;
		usage_sub(a, b);
		a->sectors[b] = a->sectors[b] > node ? a->sectors[b] - node : 0;
		if (!a->sectors[b] && !bucket_is_open(a, b) &&
		    a->type[b] != BCH_DATA_free) {
			a->type[b] = BCH_DATA_free;
			bucket_emptied(c, a, b);
			a->nr_empty++;
		}
		usage_add(a, b);
	}
}

/*
 * Debug builds (the sanitizer build of make check, or -DBCH_DEBUG) compare
 * the running sums with a scan at every bch_dev_usage_get(): a change of a
 * bucket that skipped usage_sub()/usage_add() shows at the next df, and
 * stops the process (a debug-only check of the code's own bookkeeping).
 */
#if defined(BCH_DEBUG) || defined(__SANITIZE_ADDRESS__)
#define USAGE_CHECK	1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define USAGE_CHECK	1
#endif
#endif

#ifdef USAGE_CHECK
static void usage_check(const struct bch_dev_alloc *a, unsigned dev, const struct bch_dev_usage *u)
{
	struct bch_dev_usage s;

	usage_scan(a, &s);
	if (!memcmp(&s, u, sizeof(s)))
		return;
	fprintf(stderr, "bcachefs: device %u usage sums differ from a scan of its buckets:"
		" free %" PRIu64 "/%" PRIu64 ", cached %" PRIu64 "/%" PRIu64 "\n", dev,
		u->free_buckets, s.free_buckets, u->cached_sectors, s.cached_sectors);
	for (unsigned t = 0; t < BCH_DATA_NR; t++)
		fprintf(stderr, "  type %u: buckets %" PRIu64 "/%" PRIu64 ", sectors %" PRIu64 "/%" PRIu64
			", cached %" PRIu64 "/%" PRIu64 "\n", t, u->buckets[t], s.buckets[t],
			u->sectors[t], s.sectors[t], u->cached_by_type[t], s.cached_by_type[t]);
	abort();
}
#endif

void bch_dev_usage_get(struct bch_fs *c, unsigned dev, struct bch_dev_usage *u)
{
	struct bch_dev_alloc *a = dev_alloc(c, dev);

	memset(u, 0, sizeof(*u));
	if (!a)
		return;
	*u = a->usage;
	u->nbuckets = a->nbuckets;
#ifdef USAGE_CHECK
	usage_check(a, dev, u);
#endif
}

void bch_dev_usage_scan(struct bch_fs *c, unsigned dev, struct bch_dev_usage *u)
{
	struct bch_dev_alloc *a = dev_alloc(c, dev);

	memset(u, 0, sizeof(*u));
	if (a)
		usage_scan(a, u);
}

static uint64_t reserve_of(const struct bch_dev_alloc *a)
{
	uint64_t r = a->nbuckets / 32;

	return r < 4 ? 4 : r;
}

/* Has a read-write device that takes btree nodes fewer empty buckets than its reserve / div? */
static bool btree_devs_below(struct bch_fs *c, unsigned div)
{
	for (unsigned i = 0; i < c->nr_devs; i++) {
		struct bch_dev_alloc *a = dev_alloc(c, i);
		struct bch_member *m = bch_sb_member(c->sb, i);
		if (!a || m->state != BCH_MEMBER_STATE_rw || !(m->data_allowed & (1U << BCH_DATA_btree)))
			continue;
		if (a->nr_empty < reserve_of(a) / div)
			return true;
	}
	return false;
}

bool bch_alloc_low(struct bch_fs *c)
{
	return btree_devs_below(c, 1);
}

bool bch_alloc_metadata_low(struct bch_fs *c)
{
	return btree_devs_below(c, 2);
}

bool bch_alloc_copygc_bucket(struct bch_fs *c, const struct bch_extent_ptr *p)
{
	struct bch_dev_alloc *a = dev_alloc(c, p->dev);
	uint64_t b;

	if (!a || (b = p->offset / a->bucket_sectors) >= a->nbuckets)
		return false;
	return a->type[b] == BCH_DATA_btree && !bucket_is_open(a, b) &&
	       a->sectors[b] < a->bucket_sectors / 2;
}

/* ------------------------------------------------------------ user data */

uint64_t bch_alloc_user_free(struct bch_fs *c)
{
	uint64_t sectors = 0;

	for (unsigned i = 0; i < c->nr_devs; i++) {
		struct bch_dev_alloc *a = dev_alloc(c, i);
		struct bch_member *m = bch_sb_member(c->sb, i);
		if (!a || m->state != BCH_MEMBER_STATE_rw || !(m->data_allowed & (1U << BCH_DATA_user)))
			continue;
		/* buckets of cached data only are reclaimed when needed (evicted) */
		if (a->nr_empty + a->nr_cached > reserve_of(a))
			sectors += (a->nr_empty + a->nr_cached - reserve_of(a)) * a->bucket_sectors;
		if (a->open_user >= 0)
			sectors += a->bucket_sectors - a->open_user_off;
		if (a->open_ec >= 0)
			sectors += a->bucket_sectors - a->open_ec_off;
	}
	return sectors;
}

void bch_fs_space(struct bch_fs *c, struct bch_fs_space *s)
{
	uint64_t take = 0;

	memset(s, 0, sizeof(*s));
	for (unsigned i = 0; i < c->nr_devs; i++) {
		struct bch_dev_alloc *a = dev_alloc(c, i);
		struct bch_member *m = bch_sb_member(c->sb, i);
		struct bch_dev_usage u;

		if (!a)
			continue;	/* a missing member: not counted */
		bch_dev_usage_get(c, i, &u);
		uint64_t bb = (uint64_t)a->bucket_sectors << BCH_SECTOR_SHIFT;
		uint64_t free_d = u.free_buckets * bb;
		s->size += u.nbuckets * bb;
		s->free += free_d;
		if (m->state != BCH_MEMBER_STATE_rw || !(m->data_allowed & (1U << BCH_DATA_user))) {
			s->reserve += free_d;
			continue;
		}
		/* as bch_alloc_user_free(): cached-only buckets are evicted when needed */
		uint64_t open = (a->open_user >= 0
			? (uint64_t)(a->bucket_sectors - a->open_user_off) << BCH_SECTOR_SHIFT : 0) +
				(a->open_ec >= 0
			? (uint64_t)(a->bucket_sectors - a->open_ec_off) << BCH_SECTOR_SHIFT : 0);
		uint64_t reclaim = u.buckets[BCH_DATA_cached] * bb + open;
		uint64_t have = u.free_buckets + u.buckets[BCH_DATA_cached];
		uint64_t take_d = (have > reserve_of(a) ? (have - reserve_of(a)) * bb : 0) + open;
		s->reclaimable += reclaim;
		s->reserve += free_d + reclaim - take_d;
		take += take_d;
	}
	s->used = s->size - s->free;
	s->promised = c->reserved_sectors << BCH_SECTOR_SHIFT;
	s->replicas = c->opts.v[Opt_data_replicas] ? c->opts.v[Opt_data_replicas] : 1;
	s->available = take > s->promised ? (take - s->promised) / s->replicas : 0;
}

uint64_t bch_alloc_target_free(struct bch_fs *c, uint64_t target, uint64_t exclude)
{
	uint64_t sectors = 0;

	for (unsigned i = 0; i < c->nr_devs; i++) {
		struct bch_dev_alloc *a = dev_alloc(c, i);
		struct bch_member *m = bch_sb_member(c->sb, i);
		if (!a || m->state != BCH_MEMBER_STATE_rw || !(m->data_allowed & (1U << BCH_DATA_user)) ||
		    (exclude & (1ULL << i)) || (target && !bch_dev_in_target(c->sb, i, target)))
			continue;
		if (a->nr_empty > reserve_of(a))
			sectors += (a->nr_empty - reserve_of(a)) * a->bucket_sectors;
		if (a->open_user >= 0)
			sectors += a->bucket_sectors - a->open_user_off;
	}
	return sectors;
}

int bch_alloc_user_check(struct bch_fs *c, uint64_t sectors, uint64_t released)
{
	uint64_t free = bch_alloc_user_free(c);
	uint64_t promised = c->reserved_sectors > released ? c->reserved_sectors - released : 0;

	if (sectors > free || free - sectors < promised)
		return bch_fs_err(c, -BCH_ERR_no_space, "no space left for %" PRIu64 " sectors of data "
				  "(%" PRIu64 " free, %" PRIu64 " promised to preallocated ranges)",
				  sectors, free, promised);
	return 0;
}

/*
 * The members in the order user data tries them, into order; returns how
 * many.  The emptiest first (by the share of their buckets that are empty):
 * data spreads over the members, and one just added takes new writes at
 * once rather than when the others are full.
 */
static unsigned data_order(struct bch_fs *c, unsigned *order)
{
	unsigned n = 0;

	for (unsigned i = 0; i < c->nr_devs && i < BCH_SB_MEMBERS_MAX; i++)
		order[n++] = i;
	for (unsigned i = 1; i < n; i++)
		for (unsigned k = i; k > 0; k--) {
			struct bch_dev_alloc *x = dev_alloc(c, order[k - 1]), *y = dev_alloc(c, order[k]);
			/* x->nr_empty / x->nbuckets < y->nr_empty / y->nbuckets, without division */
			if (!y || (x && (unsigned __int128)x->nr_empty * y->nbuckets >=
					(unsigned __int128)y->nr_empty * x->nbuckets))
				break;
			unsigned t = order[k - 1];
			order[k - 1] = order[k];
			order[k] = t;
		}
	return n;
}

/* Sectors of the open user bucket of a still free, in whole blocks of bs sectors. */
static unsigned open_tail(const struct bch_dev_alloc *a, unsigned bs)
{
	unsigned t = a->open_user >= 0 ? a->bucket_sectors - a->open_user_off : 0;

	return bs ? t - t % bs : t;
}

unsigned bch_alloc_data_fit(struct bch_fs *c, unsigned sectors, unsigned nr, uint64_t target)
{
	unsigned order[BCH_SB_MEMBERS_MAX], n = data_order(c, order), bs = c->sb->block_size;
	unsigned fit = sectors, chosen = 0;
	bool used[BCH_SB_MEMBERS_MAX] = { false };

	/* the members alloc_data_streams() would take, as it takes them (not ec) */
	for (unsigned pass = 0; pass < 2 && chosen < nr; pass++)
		for (unsigned o = 0; o < n && chosen < nr; o++) {
			unsigned i = order[o];
			struct bch_dev_alloc *a = dev_alloc(c, i);
			struct bch_member *m = bch_sb_member(c->sb, i);
			if (used[i] || !a || m->state != BCH_MEMBER_STATE_rw ||
			    !(m->data_allowed & (1U << BCH_DATA_user)) ||
			    (!pass && target && !bch_dev_in_target(c->sb, i, target)) ||
			    sectors > a->bucket_sectors)
				continue;
			unsigned tail = open_tail(a, bs);
			uint64_t floor = c->alloc_for_delete ? reserve_of(a) / 2 + 1 : reserve_of(a);
			if (!tail && a->nr_empty <= floor)
				continue;	/* it would refuse a new bucket */
			used[i] = true;
			chosen++;
			if (tail && tail < fit)
				fit = tail;
		}
	return fit;
}

/* nr copies on distinct devices, target's first; the reserve as for deletes when they run */
static int alloc_data_streams(struct bch_fs *c, unsigned sectors, unsigned nr, uint64_t target,
			      bool target_only, uint64_t exclude, bool half_reserve, bool ec,
			      struct bch_extent_ptr *ptrs, unsigned *got);

static int alloc_data(struct bch_fs *c, unsigned sectors, unsigned nr, uint64_t target, bool ec,
		      struct bch_extent_ptr *ptrs, unsigned *got)
{
	return alloc_data_streams(c, sectors, nr, target, false, 0, c->alloc_for_delete, ec, ptrs, got);
}

int bch_alloc_data(struct bch_fs *c, unsigned sectors, unsigned nr, uint64_t target,
		   uint64_t released, struct bch_extent_ptr *ptrs, unsigned *got)
{
	return bch_alloc_data_ec(c, sectors, nr, target, released, false, ptrs, got);
}

int bch_alloc_data_ec(struct bch_fs *c, unsigned sectors, unsigned nr, uint64_t target,
		      uint64_t released, bool ec, struct bch_extent_ptr *ptrs, unsigned *got)
{
	unsigned devs = bch_alloc_nr_devs_for(c, BCH_DATA_user);
	int r = c->alloc_for_delete ? 0
		: bch_alloc_user_check(c, (uint64_t)sectors * (nr < devs ? nr : devs), released);

	*got = 0;
	if (r)
		return r;
	r = alloc_data(c, sectors, nr, target, ec, ptrs, got);

	if ((r == -BCH_ERR_no_space || *got < nr) && !c->read_only && !c->alloc_flushing &&
	    bch_journal_seq_durable(c) < bch_journal_cur_seq(c)) {
		/* freed space waits for durability: make it durable, try again */
		bch_alloc_data_free(c, ptrs, *got, sectors);
		c->alloc_flushing = true;
		int f = bch_journal_flush(c);
		c->alloc_flushing = false;
		if (f)
			return f;
		r = alloc_data(c, sectors, nr, target, ec, ptrs, got);
	}
	if (r)
		return bch_fs_err(c, r, "no space left for %u sectors of data", sectors);
	return 0;
}

int bch_alloc_data_move(struct bch_fs *c, unsigned sectors, unsigned nr, uint64_t target,
			bool target_only, uint64_t exclude, bool half_reserve,
			struct bch_extent_ptr *ptrs, unsigned *got)
{
	return alloc_data_streams(c, sectors, nr, target, target_only, exclude, half_reserve, false,
				  ptrs, got);
}

/* ec: the first copy from the stripe candidate stream (alloc.h), when there are two or more */
static int alloc_data_streams(struct bch_fs *c, unsigned sectors, unsigned nr, uint64_t target,
			      bool target_only, uint64_t exclude, bool half_reserve, bool ec,
			      struct bch_extent_ptr *ptrs, unsigned *got)
{
	bool used[BCH_SB_MEMBERS_MAX] = { false };

	*got = 0;
	for (unsigned i = 0; i < c->nr_devs && i < BCH_SB_MEMBERS_MAX; i++)
		used[i] = exclude & (1ULL << i);
	unsigned order[BCH_SB_MEMBERS_MAX], n = data_order(c, order);
	/*
	 * The stripe candidate copy first: to the member whose candidate
	 * bucket still has room (one bucket fills at a time, its extents
	 * contiguous), else to the one that opened the fewest candidate
	 * buckets (so they spread over the members, as stripes need k of
	 * them on distinct members).  Failing that, no candidate copy.
	 */
	if (ec && nr >= 2) {
		int cand = -1;

		for (unsigned o = 0; o < n; o++) {
			unsigned i = order[o];
			struct bch_dev_alloc *a = dev_alloc(c, i);
			struct bch_member *m = bch_sb_member(c->sb, i);
			if (used[i] || !a || m->state != BCH_MEMBER_STATE_rw ||
			    !(m->data_allowed & (1U << BCH_DATA_user)) ||
			    (target && !bch_dev_in_target(c->sb, i, target)))
				continue;
			if (a->open_ec >= 0 && a->open_ec_off + sectors <= a->bucket_sectors) {
				cand = i;
				break;
			}
			if (cand < 0 || a->ec_opened < dev_alloc(c, cand)->ec_opened)
				cand = i;
		}
		if (cand >= 0 && !alloc_ec_on_dev(c, cand, sectors, half_reserve, &ptrs[0])) {
			used[cand] = true;
			*got = 1;
			/*
			 * The other copies on the rest of its group of nr
			 * members by index (0..nr-1, nr..2nr-1, ..., the last
			 * one wrapping), then the members after: a new set of
			 * members costs a superblock write (its replicas
			 * entry), and so a fresh filesystem sees about n / nr
			 * sets, as plain replicated writes do, not every
			 * combination.  The candidate member rotates over all
			 * of them, so the load still spreads.
			 */
			unsigned start = (unsigned)cand / nr * nr;
			for (unsigned o = 0; o < n; o++)
				order[o] = (start + o) % n;
		}
	}
	for (unsigned pass = 0; pass < 2 && *got < nr; pass++) {
		if (pass && target && target_only)
			break;
		for (unsigned o = 0; o < n && *got < nr; o++) {
			unsigned i = order[o];
			struct bch_member *m = bch_sb_member(c->sb, i);
			if (used[i] || !dev_alloc(c, i) || m->state != BCH_MEMBER_STATE_rw ||
			    !(m->data_allowed & (1U << BCH_DATA_user)) ||
			    (!pass && target && !bch_dev_in_target(c->sb, i, target)))
				continue;
			if (!alloc_on_dev_reserve(c, i, BCH_DATA_user, sectors, half_reserve, &ptrs[*got])) {
				used[i] = true;
				(*got)++;
			}
		}
	}
	return *got ? 0 : -BCH_ERR_no_space;
}

void bch_alloc_data_cached(struct bch_fs *c, struct bch_extent_ptr *p, unsigned sectors)
{
	struct bch_dev_alloc *a = dev_alloc(c, p->dev);
	int64_t b;

	p->flags |= BCH_EXTENT_PTR_CACHED;
	if (!a || (b = bucket_of(a, p->offset, sectors)) < 0)
		return;
	usage_sub(a, b);
	a->sectors[b] -= sectors < a->sectors[b] ? sectors : a->sectors[b];
	a->cached[b] += sectors;
	usage_add(a, b);
	data_bucket_settle(c, a, b);
}

void bch_alloc_ec_close(struct bch_fs *c)
{
	for (unsigned i = 0; i < c->nr_devs; i++) {
		struct bch_dev_alloc *a = dev_alloc(c, i);
		if (!a || a->open_ec < 0)
			continue;
		int64_t was = a->open_ec;
		a->open_ec = -1;
		data_bucket_settle(c, a, was);
	}
}

bool bch_alloc_ec_open(struct bch_fs *c, const struct bch_extent_ptr *p)
{
	struct bch_dev_alloc *a = dev_alloc(c, p->dev);

	return a && a->open_ec >= 0 && p->offset / a->bucket_sectors == (uint64_t)a->open_ec;
}

bool bch_alloc_bucket_open(struct bch_fs *c, unsigned dev, uint64_t b)
{
	struct bch_dev_alloc *a = dev_alloc(c, dev);

	return a && b < a->nbuckets && bucket_is_open(a, b);
}

void bch_alloc_data_free(struct bch_fs *c, const struct bch_extent_ptr *ptrs, unsigned nr,
			 unsigned sectors)
{
	for (unsigned i = 0; i < nr; i++)
		bch_alloc_data_account(c, &ptrs[i], sectors, -(int64_t)sectors);
}

/*
 * Piece [offset, offset + sectors) of user bucket b, about to be freed:
 * the last carved from the open user bucket, that bucket takes it again;
 * the end of the bucket opened before the open one, when the open one
 * holds nothing (the pieces after it given back already), that one is open
 * again from the piece on, and the empty one is free (reusable once
 * durable, as any emptied bucket).
 */
static void unwind_piece(struct bch_fs *c, struct bch_dev_alloc *a, int64_t b, uint64_t offset,
			 unsigned sectors)
{
	uint64_t start = (uint64_t)b * a->bucket_sectors, end = offset + sectors;

	if (b == a->open_user && end == start + a->open_user_off) {
		a->open_user_off -= sectors;
		return;
	}
	int64_t was = a->open_user;
	if (was < 0 || a->open_user_off || a->sectors[was] || a->cached[was] ||
	    end != start + a->bucket_sectors || bucket_is_open(a, b))
		return;
	a->open_user = b;
	a->open_user_off = offset - start;
	data_bucket_settle(c, a, was);
}

void bch_alloc_data_unwind(struct bch_fs *c, const struct bch_extent_ptr *ptrs, unsigned nr,
			   unsigned sectors)
{
	for (unsigned i = 0; i < nr; i++) {
		struct bch_dev_alloc *a = dev_alloc(c, ptrs[i].dev);
		const struct bch_extent_ptr *p = &ptrs[i];
		int64_t b = a ? bucket_of(a, p->offset, sectors) : -1;

		if (b >= 0 && !p->flags && a->gen[b] == p->gen && a->type[b] == BCH_DATA_user)
			unwind_piece(c, a, b, p->offset, sectors);
		bch_alloc_data_account(c, p, sectors, -(int64_t)sectors);
	}
}

void bch_alloc_data_account(struct bch_fs *c, const struct bch_extent_ptr *p, unsigned span,
			    int64_t delta)
{
	struct bch_dev_alloc *a = dev_alloc(c, p->dev);
	int64_t b;

	if (delta < 0 && (p->flags & BCH_EXTENT_PTR_STRIPED))
		bch_ec_note_dropped(c, p->stripe);	/* its stripe may be unused now */
	/* past the bucket's end: bch_alloc_mark_data() never counted it */
	if (!a || (b = bucket_of(a, p->offset, span)) < 0 || a->gen[b] != p->gen)
		return;
	/*
	 * A data pointer into a bucket of btree nodes, journal or superblock
	 * was never counted (bch_alloc_mark_data refuses it; fsck drops it):
	 * taking its sectors off would free metadata that is still live.
	 */
	if (a->type[b] != BCH_DATA_user && a->type[b] != BCH_DATA_cached &&
	    a->type[b] != BCH_DATA_free)
		return;
	uint32_t *count = p->flags & BCH_EXTENT_PTR_CACHED ? &a->cached[b] : &a->sectors[b];
	usage_sub(a, b);
	if (delta < 0 && (uint64_t)-delta >= *count)
		*count = 0;
	else
		*count += delta;
	usage_add(a, b);
	data_bucket_settle(c, a, b);
}

static void note_cached(struct bch_dev_alloc *a, const struct bch_extent_ptr *p);

int bch_alloc_mark_data(struct bch_fs *c, const struct bch_extent_ptr *p, unsigned span,
			unsigned sectors)
{
	struct bch_dev_alloc *a = dev_alloc(c, p->dev);

	if (p->flags & BCH_EXTENT_PTR_CACHED) {
		note_cached(a, p);
		return 0;
	}

	if (!a && bch_dev_missing(c, p->dev))
		return 0;	/* a copy on a member not given (degraded): not counted */
	if (!a)
		return bch_fs_err(c, -BCH_ERR_bkey_invalid, "extent pointer to missing device %u", p->dev);
	int64_t b = bucket_of(a, p->offset, span);
	if (b < 0)
		return bch_fs_err(c, -BCH_ERR_bkey_invalid,
				  "extent pointer %u:%" PRIu64 " outside the device's buckets",
				  p->dev, (uint64_t)p->offset);
	if (a->type[b] != BCH_DATA_free && a->type[b] != BCH_DATA_user)
		return bch_fs_err(c, -BCH_ERR_bkey_invalid,
				  "extent pointer %u:%" PRIu64 " into a bucket holding %s data",
				  p->dev, (uint64_t)p->offset, a->type[b] == BCH_DATA_btree ? "btree" : "other");
	if (a->type[b] == BCH_DATA_free && !a->sectors[b]) {
		a->nr_empty--;
		a->gen[b] = p->gen;
	} else if (a->gen[b] != p->gen) {
		return bch_fs_err(c, -BCH_ERR_bkey_invalid,
				  "extent pointer %u:%" PRIu64 " gen %u, bucket has gen %u",
				  p->dev, (uint64_t)p->offset, p->gen, a->gen[b]);
	}
	usage_sub(a, b);
	a->type[b] = BCH_DATA_user;
	a->sectors[b] += sectors;
	usage_add(a, b);
	return 0;
}

/*
 * Cached pointers at a rebuild (alloc.h): the first pass notes the newest
 * generation of a cached pointer into each bucket; once the stored gens are
 * applied, a bucket without dirty data takes the newer of the two (a bucket
 * evicted since has a stored gen past every pointer into it), and the
 * second pass counts the cached pointers whose gen is the bucket's.
 */
static void note_cached(struct bch_dev_alloc *a, const struct bch_extent_ptr *p)
{
	int64_t b;

	if (!a || (b = p->offset / a->bucket_sectors) >= (int64_t)a->nbuckets)
		return;
	if (!a->cached_gen) {
		if (!(a->cached_gen = malloc(a->nbuckets * sizeof(int16_t))))
			return;		/* then no cached pointer is trusted */
		memset(a->cached_gen, 0xff, a->nbuckets * sizeof(int16_t));
	}
	if (a->cached_gen[b] < 0 || (int8_t)(p->gen - (uint8_t)a->cached_gen[b]) > 0)
		a->cached_gen[b] = p->gen;
}

bool bch_alloc_settle_cached_gens(struct bch_fs *c)
{
	bool any = false;

	for (unsigned d = 0; d < c->nr_devs; d++) {
		struct bch_dev_alloc *a = dev_alloc(c, d);
		if (!a || !a->cached_gen)
			continue;
		for (uint64_t b = 0; b < a->nbuckets; b++) {
			if (a->cached_gen[b] < 0)
				continue;
			any = true;
			if (a->type[b] == BCH_DATA_free && !a->sectors[b] &&
			    (int8_t)((uint8_t)a->cached_gen[b] - a->gen[b]) > 0)
				a->gen[b] = a->cached_gen[b];
		}
		free(a->cached_gen);
		a->cached_gen = NULL;
	}
	return any;
}

int bch_alloc_mark_cached(struct bch_fs *c, const struct bch_extent_ptr *p, unsigned span,
			  unsigned sectors)
{
	struct bch_dev_alloc *a = dev_alloc(c, p->dev);
	int64_t b;

	if (!a || (b = bucket_of(a, p->offset, span)) < 0 || a->gen[b] != p->gen)
		return 0;	/* stale (or damaged: fsck drops it) */
	if (a->type[b] != BCH_DATA_user && a->type[b] != BCH_DATA_cached &&
	    !(a->type[b] == BCH_DATA_free && !a->sectors[b] && !a->cached[b]))
		return 0;
	usage_sub(a, b);
	if (a->type[b] == BCH_DATA_free) {
		a->nr_empty--;
		a->nr_cached++;
		a->type[b] = BCH_DATA_cached;
	}
	a->cached[b] += sectors;
	usage_add(a, b);
	return 0;
}

void bch_alloc_recount_begin(struct bch_fs *c)
{
	for (unsigned d = 0; d < c->nr_devs; d++) {
		struct bch_dev_alloc *a = dev_alloc(c, d);
		for (uint64_t b = 0; a && b < a->nbuckets; b++)
			if (a->type[b] == BCH_DATA_user || a->type[b] == BCH_DATA_cached) {
				/* user until settled: a dirty pointer may be found in it */
				a->nr_cached -= a->type[b] == BCH_DATA_cached;
				usage_sub(a, b);
				a->type[b] = BCH_DATA_user;
				a->sectors[b] = a->cached[b] = 0;
				usage_add(a, b);
			}
	}
}

void bch_alloc_recount_end(struct bch_fs *c)
{
	for (unsigned d = 0; d < c->nr_devs; d++) {
		struct bch_dev_alloc *a = dev_alloc(c, d);
		for (uint64_t b = 0; a && b < a->nbuckets; b++)
			data_bucket_settle(c, a, b);
	}
}

int bch_alloc_data_on(struct bch_fs *c, unsigned dev, unsigned sectors, struct bch_extent_ptr *ptr)
{
	struct bch_member *m = dev < c->nr_devs ? bch_sb_member(c->sb, dev) : NULL;

	if (!m || !dev_alloc(c, dev) || m->state != BCH_MEMBER_STATE_rw)
		return -BCH_ERR_no_space;
	int r = alloc_on_dev(c, dev, BCH_DATA_user, sectors, ptr);
	return r ? bch_fs_err(c, r, "no space for %u sectors of data on device %u", sectors, dev) : 0;
}

int bch_alloc_bucket_type(struct bch_fs *c, const struct bch_extent_ptr *p, unsigned sectors)
{
	struct bch_dev_alloc *a = dev_alloc(c, p->dev);
	int64_t b;

	if (!a || (b = bucket_of(a, p->offset, sectors)) < 0)
		return -1;
	return a->type[b];
}

/* ------------------------------------------------------ persisted form */

uint64_t bch_alloc_nbuckets(struct bch_fs *c, unsigned dev)
{
	struct bch_dev_alloc *a = dev_alloc(c, dev);

	return a ? a->nbuckets : 0;
}

unsigned bch_alloc_bucket_sectors(struct bch_fs *c, unsigned dev)
{
	struct bch_dev_alloc *a = dev_alloc(c, dev);

	return a ? a->bucket_sectors : 0;
}

bool bch_alloc_bucket_get(struct bch_fs *c, unsigned dev, uint64_t b, struct bch_bucket_state *s)
{
	struct bch_dev_alloc *a = dev_alloc(c, dev);

	if (!a || b >= a->nbuckets || a->type[b] == BCH_DATA_sb || a->type[b] == BCH_DATA_journal)
		return false;
	s->gen = a->gen[b];
	s->sectors = a->sectors[b];
	s->cached_sectors = a->cached[b];
	s->data_type = s->sectors ? a->type[b] : s->cached_sectors ? BCH_DATA_cached : BCH_DATA_free;
	return true;
}

void bch_alloc_bucket_set(struct bch_fs *c, unsigned dev, uint64_t b,
			  const struct bch_bucket_state *s)
{
	struct bch_dev_alloc *a = dev_alloc(c, dev);

	if (!a || b >= a->nbuckets || a->type[b] != BCH_DATA_free || a->sectors[b] || a->cached[b])
		return;
	a->gen[b] = s->gen;
	usage_sub(a, b);
	if (s->sectors && s->data_type != BCH_DATA_free) {
		a->type[b] = s->data_type;
		a->sectors[b] = s->sectors;
		a->cached[b] = s->data_type == BCH_DATA_user ? s->cached_sectors : 0;
		a->nr_empty--;
	} else if (s->cached_sectors && s->data_type == BCH_DATA_cached) {
		a->type[b] = BCH_DATA_cached;
		a->cached[b] = s->cached_sectors;
		a->nr_empty--;
		a->nr_cached++;
	}
	usage_add(a, b);
}

void bch_alloc_bucket_set_gen(struct bch_fs *c, unsigned dev, uint64_t b, uint8_t gen)
{
	struct bch_dev_alloc *a = dev_alloc(c, dev);

	/* a gen that does not change is not written: untouched pages stay zero pages */
	if (a && b < a->nbuckets && a->type[b] == BCH_DATA_free && !a->sectors[b] && !a->cached[b] &&
	    a->gen[b] != gen)
		a->gen[b] = gen;
}

/* ------------------------------------------------ copygc and eviction */

void bch_alloc_dev_space(struct bch_fs *c, unsigned dev, struct bch_alloc_space *s)
{
	struct bch_dev_alloc *a = dev_alloc(c, dev);
	struct bch_member *m = dev < c->nr_devs ? bch_sb_member(c->sb, dev) : NULL;

	memset(s, 0, sizeof(*s));
	if (!a || !m)
		return;
	s->user = m->state == BCH_MEMBER_STATE_rw && (m->data_allowed & (1U << BCH_DATA_user));
	s->nbuckets = a->nbuckets;
	s->bucket_sectors = a->bucket_sectors;
	s->nr_empty = a->nr_empty;
	s->nr_cached = a->nr_cached;
	s->reserve = reserve_of(a);
	/* what alloc_on_dev_reserve() with half_reserve can still hand out */
	uint64_t floor = reserve_of(a) / 2 + 1;
	s->copygc_room = (a->nr_empty > floor ? a->nr_empty - floor : 0) * a->bucket_sectors;
	if (a->open_user >= 0)
		s->copygc_room += a->bucket_sectors - a->open_user_off;
}

/*
 * The max buckets of a with the smallest score among those want() accepts,
 * best first, into out: a bounded max-heap (the root is the worst kept)
 * over one pass of the bucket array, then a sort.
 */
typedef bool (*bucket_want_fn)(const struct bch_dev_alloc *a, uint64_t b);
typedef uint64_t (*bucket_score_fn)(const struct bch_dev_alloc *a, uint64_t b);

static void heap_sift_down(struct bch_alloc_candidate *h, unsigned n, unsigned i)
{
	for (;;) {
		unsigned l = 2 * i + 1, r = l + 1, m = i;
		if (l < n && h[l].score > h[m].score)
			m = l;
		if (r < n && h[r].score > h[m].score)
			m = r;
		if (m == i)
			return;
		struct bch_alloc_candidate t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

static int candidate_cmp(const void *x, const void *y)
{
	const struct bch_alloc_candidate *a = x, *b = y;

	if (a->score != b->score)
		return a->score < b->score ? -1 : 1;
	return a->bucket < b->bucket ? -1 : a->bucket > b->bucket;
}

static unsigned select_buckets(const struct bch_dev_alloc *a, bucket_want_fn want,
			       bucket_score_fn score, unsigned max, struct bch_alloc_candidate *out)
{
	unsigned n = 0;

	if (!max)
		return 0;
	for (uint64_t b = 0; b < a->nbuckets; b++) {
		if (!want(a, b))
			continue;
		struct bch_alloc_candidate x = { .bucket = b, .sectors = a->sectors[b],
						 .score = score(a, b) };
		if (n < max) {
			/* sift up */
			unsigned i = n++;
			out[i] = x;
			while (i && out[(i - 1) / 2].score < out[i].score) {
				struct bch_alloc_candidate t = out[i];
				out[i] = out[(i - 1) / 2];
				out[(i - 1) / 2] = t;
				i = (i - 1) / 2;
			}
		} else if (x.score < out[0].score) {
			out[0] = x;
			heap_sift_down(out, n, 0);
		}
	}
	qsort(out, n, sizeof(*out), candidate_cmp);
	return n;
}

static bool copygc_want(const struct bch_dev_alloc *a, uint64_t b)
{
	return a->type[b] == BCH_DATA_user && !bucket_is_open(a, b) &&
	       a->sectors[b] < a->bucket_sectors;
}

static uint64_t copygc_score(const struct bch_dev_alloc *a, uint64_t b)
{
	return a->sectors[b];
}

unsigned bch_alloc_copygc_candidates(struct bch_fs *c, unsigned dev, unsigned max,
				     struct bch_alloc_candidate *out)
{
	struct bch_dev_alloc *a = dev_alloc(c, dev);

	return a ? select_buckets(a, copygc_want, copygc_score, max, out) : 0;
}

uint8_t bch_alloc_bucket_gen(struct bch_fs *c, unsigned dev, uint64_t b)
{
	struct bch_dev_alloc *a = dev_alloc(c, dev);

	return a && b < a->nbuckets ? a->gen[b] : 0;
}

void bch_alloc_bucket_read(struct bch_fs *c, const struct bch_extent_ptr *p)
{
	struct bch_dev_alloc *a = dev_alloc(c, p->dev);
	uint64_t b;

	if (a && (b = p->offset / a->bucket_sectors) < a->nbuckets && a->gen[b] == p->gen)
		a->read_clock[b] = ++a->clock;
}

static bool evict_want(const struct bch_dev_alloc *a, uint64_t b)
{
	return a->type[b] == BCH_DATA_cached && !a->sectors[b];
}

/* Oldest read first: the smallest score is the longest since (wraps safely). */
static uint64_t evict_score(const struct bch_dev_alloc *a, uint64_t b)
{
	return UINT32_MAX - (uint32_t)(a->clock - a->read_clock[b]);
}

int bch_alloc_evict(struct bch_fs *c, unsigned dev, unsigned nr)
{
	struct bch_dev_alloc *a = dev_alloc(c, dev);
	struct bch_alloc_candidate *v;
	uint64_t *buckets;
	unsigned n;
	int r;

	if (!a || c->read_only || !nr || !a->nr_cached)
		return 0;
	if (nr > a->nr_cached)
		nr = a->nr_cached;
	if (!a->free_seq && !(a->free_seq = calloc(a->nbuckets, sizeof(uint64_t))))
		return -ENOMEM;
	v = malloc(nr * sizeof(*v));
	buckets = malloc(nr * sizeof(*buckets));
	if (!v || !buckets) {
		free(v);
		free(buckets);
		return -ENOMEM;
	}
	n = select_buckets(a, evict_want, evict_score, nr, v);
	for (unsigned i = 0; i < n; i++) {
		uint64_t b = buckets[i] = v[i].bucket;
		/* every cached pointer into it is stale from now on */
		bch_data_reuse_bump(c);	/* io.h */
		a->gen[b]++;
		usage_sub(a, b);
		a->cached[b] = 0;
		a->type[b] = BCH_DATA_free;
		usage_add(a, b);
		a->nr_cached--;
		a->nr_empty++;
		/* not reusable, not even by the node allocations of the commit below */
		a->free_seq[b] = UINT64_MAX;
	}
	/*
	 * The new gens go to the alloc btree before the buckets can be reused:
	 * the journal entry holding them is older than any key pointing into a
	 * reused bucket, and reuse waits until the entry is durable (free_seq),
	 * so after a crash the stored gen is past every stale cached pointer.
	 * If the commit fails the buckets stay unusable until the next open.
	 */
	r = bch_alloc_btree_write_buckets(c, dev, buckets, n);
	if (!r)
		for (unsigned i = 0; i < n; i++)
			bucket_emptied(c, a, buckets[i]);
	free(v);
	free(buckets);
	return r ? r : (int)n;
}

void bch_alloc_dev_set_limit(struct bch_fs *c, unsigned dev, uint64_t limit)
{
	struct bch_dev_alloc *a = dev_alloc(c, dev);

	if (!a)
		return;
	a->limit = limit < a->nbuckets ? limit : a->nbuckets;
	int64_t *user[] = { &a->open_user, &a->open_ec };
	for (unsigned i = 0; i < 2; i++)
		if (*user[i] >= (int64_t)a->limit) {
			int64_t was = *user[i];
			*user[i] = -1;
			data_bucket_settle(c, a, was);
		}
	int64_t *streams[] = { &a->open, &a->open_dup };
	for (unsigned i = 0; i < 2; i++)
		if (*streams[i] >= (int64_t)a->limit) {
			int64_t was = *streams[i];
			*streams[i] = -1;
			if (!a->sectors[was]) {
				usage_sub(a, was);
				a->type[was] = BCH_DATA_free;
				usage_add(a, was);
				bucket_emptied(c, a, was);
				a->nr_empty++;
			}
		}
}

int bch_alloc_dev_forget(struct bch_fs *c, unsigned dev, uint64_t from)
{
	struct bch_dev_alloc *a = dev_alloc(c, dev);

	if (!a)
		return 0;
	for (uint64_t b = from; b < a->nbuckets; b++)
		if ((a->type[b] == BCH_DATA_user || a->type[b] == BCH_DATA_btree ||
		     a->type[b] == BCH_DATA_cached) && (a->sectors[b] || a->cached[b]))
			return bch_fs_err(c, -EBUSY, "device %u bucket %" PRIu64 " still holds %s data",
					  dev, b, a->type[b] == BCH_DATA_btree ? "btree" :
					  a->type[b] == BCH_DATA_user ? "file" : "cached");
	for (uint64_t b = from; b < a->nbuckets; b++)
		if (a->type[b] == BCH_DATA_free || a->type[b] == BCH_DATA_user ||
		    a->type[b] == BCH_DATA_btree || a->type[b] == BCH_DATA_cached) {
			if (a->type[b] != BCH_DATA_free)
				a->nr_empty++;
			usage_sub(a, b);
			a->type[b] = BCH_DATA_free;
			usage_add(a, b);
			a->gen[b] = 0;
		}
	a->limit = from < a->limit ? from : a->limit;
	return 0;
}
