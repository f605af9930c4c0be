// SPDX-License-Identifier: GPL-2.0
/*
 * btree_node_scan.c - finding btree nodes on the devices (see
 * btree_node_scan.h), and choosing among them when fsck lost a node.
 *
 * What the scan reads: every bucket of every present member from
 * first_bucket on, except journal buckets, buckets that now hold user data
 * (by rule (2) below nothing there is taken) and, when the caller trusts
 * the bucket generations (the alloc btree was current and read whole),
 * buckets never allocated (gen 0), in runs of whole buckets (at most 1 MiB,
 * or one bucket when buckets are larger) through one buffer.
 * Nodes are carved from btree buckets at multiples of btree_node_size, so
 * only those offsets are looked at.  A node is recorded when
 *
 *   OFFSET  SIZE  CHECK
 *   16      8     magic == BCH_BTREE_NODE_MAGIC
 *   24      16    fs_uuid == this filesystem's internal UUID
 *   40      1     btree_id < BCH_BTREE_ID_NR
 *   41      1     level < 16
 *   42      1     a known checksum type
 *   48      8     seq == the first bset's seq; min_key <= max_key
 *   0       16    the first bset's checksum (header and keys)
 *
 * and its journal_seq is the newest of the first bset and the appended
 * bsets that follow it with its seq and a good checksum (the node reader's
 * rule).  Memory: the buffer and one record per node found (no keys).
 *
 * Which found leaves fill a lost range (bch_node_scan_pick()):
 *   (1) A leaf inside a lost range of the same btree that the tree does not
 *       reach otherwise.  A node straddling a lost range's edge is an older
 *       life of the space around it (live nodes nest inside their parent's
 *       range), so it is not taken.
 *   (2) Freed space: a node is freed when the parent that no longer points
 *       to it is durable, and its space is reused only after that (btree.h
 *       invariant (4)); so a node lying in a bucket that now holds user data
 *       (or the superblock or journal) is a dead life, overwritten or not,
 *       and is never taken.
 *   (3) When the lost node was itself a leaf (its parent still read), the
 *       pointer names the life that was live: only a node with that seq is
 *       taken (a misplaced copy, e.g. two leaves written at each other's
 *       place).  An older life of the same range would bring back keys
 *       deleted since, so it is not taken.
 *   (4) When an interior node is lost, the lives of its leaves are unknown.
 *       Node seqs are hashes (new_node_seq()) and say nothing of age; the
 *       journal_seq of a node's newest bset does: a node made from another
 *       (rewrite, split, merge) holds every key of it it keeps, plus the
 *       update that made it, so it is at least as new.  The newest wins:
 *       candidates are taken by journal_seq (then more sectors written, then
 *       device and offset, for a deterministic order), a candidate wholly
 *       covered by those taken before it is ignored, and one partly covered
 *       gives only the keys outside them.
 *   (5) A leaf newer than the journal is not taken: a new node (split half,
 *       merged node, moved copy) is written before the journal entry that
 *       links it is durable (btree.h invariant (6)), so a crash can leave one
 *       unlinked, holding keys of entries that never became durable.  Its
 *       journal_seq is newer than the newest entry the open read (the
 *       entries it follows were never written), and by (4) it would win over
 *       the leaf the journal describes: a transaction half applied.  Only
 *       when the open replayed the journal and lost no tail of it (fsck:
 *       entries after the newest readable one were written, and nodes
 *       newer than it may be all that is left of them), and not for a
 *       node the lost pointer names (rule (3): its link was durable).
 * What this cannot tell: a leaf freed and not yet overwritten whose newer
 * life is itself unreadable wins by (4) and brings back the older keys of
 * its range; fsck reports every range it took from the scan so that is seen.
 * Nor, by (5), an unlinked new node left by a crash when a later session
 * reused the journal seqs its entries would have had (they were never
 * written, so nothing records them): if its range's leaf was not written
 * since, it wins by (4).  Both take a crash or a freed node and then a lost
 * interior node before the space is reused.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "bcachefs.h"
#include "blockdev.h"
#include "bkey.h"
#include "btree_node_scan.h"
#include "checksum.h"
#include "crypt.h"
#include "errcode.h"
#include "super.h"

#define SCAN_BUF_BYTES	(1U << 20)
#define NODE_LEVEL_MAX	16

static void found_add(struct bch_node_scan *s, const struct bch_found_node *f)
{
	if (s->nr == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 256;
		s->n = realloc(s->n, s->cap * sizeof(*s->n));
		if (!s->n)
			abort();
	}
	s->n[s->nr++] = *f;
}

/*
 * Check the node at n (nb bytes of it in memory); fill f.  Returns 1 when
 * it is a node of this filesystem, 0 when not, -1 when its header is ours
 * and its first bset bad, or a negative error (a missing library).
 */
static int check_node(struct bch_fs *c, const struct bch_btree_node *n, size_t nb,
		      struct bch_found_node *f)
{
	size_t block = (size_t)c->sb->block_size << BCH_SECTOR_SHIFT;

	if (n->magic != BCH_BTREE_NODE_MAGIC || memcmp(n->fs_uuid, c->sb->uuid, BCH_UUID_SIZE))
		return 0;
	if (n->btree_id >= BCH_BTREE_ID_NR || n->level >= NODE_LEVEL_MAX ||
	    !bch_csum_type_valid(n->csum_type) || n->keys.seq != n->seq ||
	    sizeof(*n) + (size_t)n->keys.u64s * 8 > nb ||
	    (n->csum_type != BCH_CSUM_chacha20_poly1305 && bpos_cmp(n->min_key, n->max_key) > 0))
		return -1;
	bool mac = n->csum_type == BCH_CSUM_chacha20_poly1305;
	if (mac != bch_fs_encrypted(c))
		return -1;
	int r = mac ? bch_crypt_bset_verify(c, n->seq, 0, n->keys.journal_seq, &n->magic,
					    sizeof(*n) - sizeof(n->csum), n->keys._data,
					    (size_t)n->keys.u64s * 8, n->csum)
		    : bch_csum_verify(n->csum_type, &n->magic,
				      sizeof(*n) - sizeof(n->csum) + (size_t)n->keys.u64s * 8, n->csum);
	if (r)
		return r == -BCH_ERR_csum_mismatch ? -1 : r;

	struct { struct bch_bpos min, max; } range = { n->min_key, n->max_key };
	if (mac)
		bch_crypt_node_range(c, false, n->seq, n->keys.journal_seq, &range, sizeof(range));
	if (mac && bpos_cmp(range.min, range.max) > 0)
		return -1;
	*f = (struct bch_found_node) {
		.min_key = range.min, .max_key = range.max, .seq = n->seq,
		.journal_seq = n->keys.journal_seq, .id = n->btree_id, .level = n->level,
	};
	size_t off = (sizeof(*n) + (size_t)n->keys.u64s * 8 + block - 1) / block * block;
	while (off + sizeof(struct bch_btree_node_entry) <= nb) {
		const struct bch_btree_node_entry *e = (const void *)((const char *)n + off);
		size_t end = off + sizeof(*e) + (size_t)e->keys.u64s * 8;
		if (e->keys.seq != n->seq || end > nb ||
		    (mac ? bch_crypt_bset_verify(c, n->seq, off, e->keys.journal_seq, &e->keys,
						 sizeof(e->keys), e->keys._data,
						 (size_t)e->keys.u64s * 8, e->csum)
			 : bch_csum_verify(n->csum_type, &e->keys, sizeof(e->keys) + e->keys.u64s * 8,
					   e->csum)))
			break;
		if (e->keys.journal_seq > f->journal_seq)
			f->journal_seq = e->keys.journal_seq;
		off = (end + block - 1) / block * block;
	}
	f->sectors_written = off >> BCH_SECTOR_SHIFT;
	return 1;
}

/*
 * Can bucket b hold a node worth finding?  Not the superblock's or the
 * journal's, not one holding user data now (rule (2) below: a node there is
 * dead) and, when the generations are to be trusted, not one never
 * allocated (gen 0: every allocation bumps it, and format starts at 0).
 */
static bool bucket_to_scan(struct bch_fs *c, unsigned dev, uint64_t b, bool trust_gens)
{
	struct bch_bucket_state st;

	return bch_alloc_bucket_get(c, dev, b, &st) && st.data_type != BCH_DATA_user &&
	       (!trust_gens || st.gen);
}

static int scan_dev(struct bch_fs *c, struct bch_node_scan *s, unsigned dev, void *buf,
		    size_t buf_bytes, bool trust_gens)
{
	struct bch_dev *ca = c->devs[dev];
	uint64_t nbuckets = bch_alloc_nbuckets(c, dev);
	unsigned bs = bch_alloc_bucket_sectors(c, dev), ns = c->sb->btree_node_size;
	size_t bucket_bytes = (size_t)bs << BCH_SECTOR_SHIFT;
	size_t per_read = buf_bytes / bucket_bytes;
	uint64_t b = bch_sb_member(c->sb, dev)->first_bucket;
	struct bch_bucket_state st;

	while (b < nbuckets) {
		/* a run of buckets that may hold nodes */
		if (!bucket_to_scan(c, dev, b, trust_gens)) {
			b++;
			continue;
		}
		uint64_t nr = 1;
		while (nr < per_read && b + nr < nbuckets && bucket_to_scan(c, dev, b + nr, trust_gens))
			nr++;
		int r = bch_dev_read(ca->bdev, buf, nr * bucket_bytes, b * bucket_bytes);
		if (r)
			return bch_fs_err(c, r, "node scan: %s: reading buckets %llu..%llu: %s",
					  bch_dev_path(ca->bdev), (unsigned long long)b,
					  (unsigned long long)(b + nr - 1), bch_err_str(r));
		s->bytes_read += nr * bucket_bytes;
		for (uint64_t i = 0; i < nr; i++) {
			bch_alloc_bucket_get(c, dev, b + i, &st);
			for (unsigned off = 0; off + ns <= bs; off += ns) {
				const void *n = (const char *)buf + i * bucket_bytes +
						((size_t)off << BCH_SECTOR_SHIFT);
				struct bch_found_node f;
				r = check_node(c, n, (size_t)ns << BCH_SECTOR_SHIFT, &f);
				if (r < -1)
					return r;
				s->headers += r != 0;
				s->bad += r == -1;
				if (r != 1)
					continue;
				f.ptr = (struct bch_extent_ptr) {
					.offset = (b + i) * bs + off, .dev = dev, .gen = st.gen,
				};
				found_add(s, &f);
			}
		}
		b += nr;
	}
	return 0;
}

int bch_node_scan(struct bch_fs *c, struct bch_node_scan *s, bool trust_gens)
{
	int r = 0;

	memset(s, 0, sizeof(*s));
	for (unsigned dev = 0; dev < c->nr_devs && !r; dev++) {
		if (!c->devs[dev] || !c->devs[dev]->bdev || !bch_alloc_nbuckets(c, dev))
			continue;
		size_t bucket_bytes = (size_t)bch_alloc_bucket_sectors(c, dev) << BCH_SECTOR_SHIFT;
		size_t bytes = bucket_bytes >= SCAN_BUF_BYTES ? bucket_bytes
			     : SCAN_BUF_BYTES / bucket_bytes * bucket_bytes;
		void *buf = bch_dev_alloc_buf(bytes);
		if (!buf)
			return -ENOMEM;
		r = scan_dev(c, s, dev, buf, bytes, trust_gens);
		free(buf);
	}
	return r;
}

void bch_node_scan_exit(struct bch_node_scan *s)
{
	free(s->n);
	memset(s, 0, sizeof(*s));
}

struct bch_bkey *bch_found_node_ptr(const struct bch_found_node *f)
{
	struct bch_bkey *k = bch_bkey_alloc(BCH_BKEY_btree_ptr, f->max_key,
					    sizeof(struct bch_btree_ptr) + sizeof(f->ptr));
	struct bch_btree_ptr *bp = bkey_val(k);

	bp->seq = f->seq;
	bp->sectors_written = f->sectors_written <= UINT16_MAX ? f->sectors_written : 0;
	bp->min_key = f->min_key;
	bp->ptrs[0] = f->ptr;
	return k;
}

/* ------------------------------------------------------------ choosing */

struct cand {
	const struct bch_found_node *f;
	bool			identity;	/* its seq is a lost pointer's */
};

static int cand_cmp(const void *a_, const void *b_)
{
	const struct cand *a = a_, *b = b_;

	if (a->identity != b->identity)
		return a->identity ? -1 : 1;
	if (a->f->journal_seq != b->f->journal_seq)
		return a->f->journal_seq > b->f->journal_seq ? -1 : 1;
	if (a->f->sectors_written != b->f->sectors_written)
		return a->f->sectors_written > b->f->sectors_written ? -1 : 1;
	if (a->f->ptr.dev != b->f->ptr.dev)
		return a->f->ptr.dev < b->f->ptr.dev ? -1 : 1;
	return a->f->ptr.offset < b->f->ptr.offset ? -1 : a->f->ptr.offset > b->f->ptr.offset;
}

static int pick_cmp(const void *a_, const void *b_)
{
	const struct bch_node_pick *a = a_, *b = b_;

	return bpos_cmp(a->min_key, b->min_key);
}

/*
 * Rule (5): the newest journal entry the open read, when nodes newer than
 * it were never linked; UINT64_MAX (no limit) when the journal was not
 * replayed (a clean open) or fsck found entries lost after it.
 */
static uint64_t journal_newest(struct bch_fs *c)
{
	if (!c->journal_replayed)
		return UINT64_MAX;
	for (unsigned i = 0; i < c->nr_journal_gaps; i++)
		if (c->journal_gaps[i][1] == UINT64_MAX)
			return UINT64_MAX;
	return c->replay_newest;
}

static bool inside(const struct bch_found_node *f, const struct bch_lost_range *l)
{
	return bpos_cmp(f->min_key, l->min_key) >= 0 && bpos_cmp(f->max_key, l->max_key) <= 0;
}

/* Rule (2): the bucket may still hold this node (it is not data, journal or superblock). */
static bool bucket_may_hold(struct bch_fs *c, const struct bch_found_node *f)
{
	struct bch_bucket_state st;
	unsigned bs = bch_alloc_bucket_sectors(c, f->ptr.dev);

	return bs && bch_alloc_bucket_get(c, f->ptr.dev, f->ptr.offset / bs, &st) &&
	       st.data_type != BCH_DATA_user;
}

/* Add the pieces of c's range not in taken[] (sorted, disjoint) to picks and to taken. */
static void take(const struct bch_found_node *f, struct bch_node_pick **taken, size_t *nr_taken,
		 size_t *cap)
{
	struct bch_bpos lo = f->min_key;
	/* the first taken piece that ends at or after lo */
	size_t a = 0, z = *nr_taken;
	while (a < z) {
		size_t m = (a + z) / 2;
		if (bpos_cmp((*taken)[m].max_key, lo) < 0)
			a = m + 1;
		else
			z = m;
	}
	for (size_t i = a; bpos_cmp(lo, f->max_key) <= 0; ) {
		struct bch_bpos hi = f->max_key;
		bool last = true;
		if (i < *nr_taken && bpos_cmp((*taken)[i].min_key, f->max_key) <= 0) {
			if (bpos_cmp((*taken)[i].min_key, lo) <= 0) {
				/* lo is covered: skip past this piece */
				if (bpos_eq((*taken)[i].max_key, POS_MAX))
					return;
				lo = bpos_successor((*taken)[i].max_key);
				i++;
				continue;
			}
			hi = bpos_predecessor((*taken)[i].min_key);
			last = false;
		}
		if (*nr_taken == *cap) {
			*cap = *cap ? *cap * 2 : 64;
			*taken = realloc(*taken, *cap * sizeof(**taken));
			if (!*taken)
				abort();
		}
		memmove(*taken + i + 1, *taken + i, (*nr_taken - i) * sizeof(**taken));
		(*taken)[i] = (struct bch_node_pick) { .f = f, .min_key = lo, .max_key = hi };
		(*nr_taken)++;
		i++;
		if (last || bpos_eq(hi, POS_MAX))
			return;
		/* the next taken piece starts right after hi: go on past it */
		lo = bpos_successor(hi);
	}
}

int bch_node_scan_pick(struct bch_fs *c, const struct bch_node_scan *s, unsigned id,
		       const struct bch_lost_range *lost, size_t nr_lost,
		       bool (*reachable)(void *priv, const struct bch_found_node *f), void *priv,
		       struct bch_node_pick **ret, size_t *nr)
{
	struct cand *cands = NULL;
	size_t nr_cands = 0, cap_cands = 0;

	uint64_t newest = journal_newest(c);

	*ret = NULL;
	*nr = 0;
	for (size_t i = 0; i < s->nr; i++) {
		const struct bch_found_node *f = &s->n[i];
		if (f->id != id || f->level)
			continue;
		bool ok = false, identity = false;
		for (size_t j = 0; j < nr_lost && !ok; j++) {
			if (!inside(f, &lost[j]))
				continue;
			identity = f->seq == lost[j].seq;
			ok = lost[j].level ? true : identity;	/* rule (3) */
		}
		/* a leaf's own seq may match a lost pointer's while lying in an interior range */
		for (size_t j = 0; j < nr_lost && ok && !identity; j++)
			identity = f->seq == lost[j].seq;
		if (!ok || !bucket_may_hold(c, f) || reachable(priv, f) ||
		    (!identity && f->journal_seq > newest))	/* rule (5) */
			continue;
		if (nr_cands == cap_cands) {
			cap_cands = cap_cands ? cap_cands * 2 : 64;
			cands = realloc(cands, cap_cands * sizeof(*cands));
			if (!cands)
				abort();
		}
		cands[nr_cands++] = (struct cand) { f, identity };
	}
	if (nr_cands)
		qsort(cands, nr_cands, sizeof(*cands), cand_cmp);

	struct bch_node_pick *taken = NULL;
	size_t nr_taken = 0, cap_taken = 0;
	for (size_t i = 0; i < nr_cands; i++)
		take(cands[i].f, &taken, &nr_taken, &cap_taken);
	free(cands);
	if (nr_taken)
		qsort(taken, nr_taken, sizeof(*taken), pick_cmp);	/* already sorted: kept tidy */
	*ret = taken;
	*nr = nr_taken;
	return 0;
}
