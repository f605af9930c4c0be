// SPDX-License-Identifier: GPL-2.0
/*
 * btree_keys_test.c - the keys of a node in memory, against a sorted model:
 * searches over the 64-bit position prefixes (btree_cache.c) in each kind of
 * node range (inodes differ; one inode, offsets differ; one position,
 * snapshots differ; an interior node's keys), with ties the prefix cannot
 * tell apart, keys past its bits or before its base, whiteouts removing
 * keys, the arena's appends and repacks; and the changes since a write
 * (the changed keys' bits moving with the index, deletes appended unsorted,
 * sorted and merged with the newest change kept, the bset they make exact).
 * Fixed seeds.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bkey.h"
#include "btree.h"
#include "tests/lib/testfs.h"

static uint64_t rng_state;

static uint64_t rng(void)
{
	return testfs_xorshift(&rng_state);
}

static struct btree *node(struct bch_bpos min, struct bch_bpos max)
{
	struct btree *b = calloc(1, sizeof(*b));

	cr_assert(b);
	b->min_key = min;
	b->max_key = max;
	return b;
}

static void node_free(struct btree *b)
{
	bch_btree_node_free_keys(b);
	bch_btree_node_pending_clear(b);
	bch_btree_node_free_index(b);
	free(b->pending);
	free(b);
}

/* The model: positions kept sorted, one per position. */
struct model {
	struct bch_bpos	*p;
	unsigned	nr;
};

static unsigned model_find(const struct model *m, struct bch_bpos pos)
{
	unsigned lo = 0, hi = m->nr;

	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;
		if (bpos_cmp(m->p[mid], pos) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void model_set(struct model *m, struct bch_bpos pos, bool del)
{
	unsigned i = model_find(m, pos);
	bool there = i < m->nr && bpos_eq(m->p[i], pos);

	if (del && there) {
		memmove(&m->p[i], &m->p[i + 1], (m->nr - i - 1) * sizeof(*m->p));
		m->nr--;
	} else if (!del && !there) {
		m->p = realloc(m->p, (m->nr + 1) * sizeof(*m->p));
		memmove(&m->p[i + 1], &m->p[i], (m->nr - i) * sizeof(*m->p));
		m->p[i] = pos;
		m->nr++;
	}
}

static void put(struct btree *b, struct model *m, struct bch_bpos pos, bool del)
{
	struct bch_bkey *k = del ? bch_bkey_alloc(BCH_BKEY_deleted, pos, 0)
				 : bch_bkey_alloc(BCH_BKEY_raw, pos, sizeof(struct bch_raw) + 8 * (pos.offset % 4));
	if (!del)
		((struct bch_raw *)bkey_val(k))->len = 8 * (pos.offset % 4);
	bch_btree_node_insert_key(b, k);
	free(k);
	model_set(m, pos, del);
}

/* Every key found where the model has it; probes around each and at the ends. */
static void check(const struct btree *b, const struct model *m)
{
	cr_assert_eq(b->nr, m->nr);
	for (unsigned i = 0; i < m->nr; i++) {
		cr_assert(bpos_eq(bch_btree_key_pos(b, i), m->p[i]), "key %u out of order", i);
		cr_assert_eq(bch_btree_node_find(b, m->p[i]), (int)i);
		struct bch_bpos q = m->p[i];
		q.snapshot++;
		cr_assert_eq(bch_btree_node_find(b, q), (int)model_find(m, q));
		q = m->p[i];
		if (q.offset) {
			q.offset--;
			cr_assert_eq(bch_btree_node_find(b, q), (int)model_find(m, q));
		}
	}
	cr_assert_eq(bch_btree_node_find(b, POS_MIN), 0);
	cr_assert_eq(bch_btree_node_find(b, POS_MAX), (int)model_find(m, POS_MAX));
	for (unsigned i = 0; i < 200; i++) {
		struct bch_bpos q = POS(rng() % 64, rng(), (uint32_t)rng());
		cr_assert_eq(bch_btree_node_find(b, q), (int)model_find(m, q));
	}
}

/* Inserts and deletes at random positions made by pos_of, checked as they go. */
static void run(struct bch_bpos min, struct bch_bpos max, struct bch_bpos (*pos_of)(void),
		uint64_t seed)
{
	struct btree *b = node(min, max);
	struct model m = { 0 };

	rng_state = seed;
	for (unsigned i = 0; i < 3000; i++) {
		put(b, &m, pos_of(), rng() % 4 == 0);
		if (i % 500 == 0)
			check(b, &m);
	}
	check(b, &m);
	bch_btree_node_pack_keys(b);
	check(b, &m);
	node_free(b);
	free(m.p);
}

/* Inodes 10..40, offsets over all 64 bits: the offset's low bits tie. */
static struct bch_bpos pos_inodes(void)
{
	return POS(10 + rng() % 31, rng() % 8 ? rng() : rng() % 16, (uint32_t)(rng() % 3));
}

/* One inode, offsets 1000..1999 and few snapshots: ties in the snapshot's bits. */
static struct bch_bpos pos_offsets(void)
{
	return POS(7, 1000 + rng() % 1000, (uint32_t)(rng() % 5 ? rng() % 4 : rng()));
}

/* One position, snapshots apart. */
static struct bch_bpos pos_snapshots(void)
{
	return POS(7, 55, (uint32_t)(rng() % 4096));
}

Test(btree_keys, inodes_differ)
{
	run(POS(10, 0, 0), POS(40, UINT64_MAX, UINT32_MAX), pos_inodes, 1);
}

Test(btree_keys, one_inode_offsets_differ)
{
	run(POS(7, 1000, 0), POS(7, 1999, UINT32_MAX), pos_offsets, 2);
}

Test(btree_keys, one_position_snapshots_differ)
{
	run(POS(7, 55, 0), POS(7, 55, UINT32_MAX), pos_snapshots, 3);
}

/*
 * One inode, offsets in four clusters 2^30 apart, a cluster 512 wide: the
 * offsets' distance takes 32 bits and more, so a cluster's keys share the
 * 32-bit prefix kept and are told apart by comparing the keys only.
 */
static struct bch_bpos pos_clustered(void)
{
	return POS(7, 1000 + ((rng() % 4) << 30) + rng() % 512, (uint32_t)(rng() % 3));
}

Test(btree_keys, prefixes_tie_within_clusters)
{
	run(POS(7, 1000, 0), POS(7, UINT64_MAX, UINT32_MAX), pos_clustered, 9);
}

Test(btree_keys, whole_range)
{
	run(POS_MIN, POS_MAX, pos_inodes, 4);
}

/* An interior node: children's ends in one inode, the last one the range's end. */
Test(btree_keys, interior_one_inode_and_range_end)
{
	struct btree *b = node(POS_MIN, POS_MAX);
	struct model m = { 0 };

	rng_state = 8;
	put(b, &m, POS_MAX, false);
	for (unsigned i = 0; i < 1000; i++)
		put(b, &m, POS(1, rng() % 100000, 0), false);
	check(b, &m);
	bch_btree_node_pack_keys(b);	/* the format chosen from the keys */
	check(b, &m);
	for (unsigned i = 0; i < 1000; i++)	/* before the first key, past k bits, other inodes */
		put(b, &m, i % 3 ? POS(1, rng(), (uint32_t)rng()) : POS(rng() % 3, rng() % 100, 0),
		    rng() % 5 == 0);
	check(b, &m);
	node_free(b);
	free(m.p);
}

/* A key before the node's first: every prefix is taken again from the node's range. */
static struct bch_bpos pos_wide(void)
{
	return rng() % 50 ? pos_offsets() : POS(rng() % 64, rng(), 0);
}

Test(btree_keys, key_outside_range)
{
	run(POS(7, 1000, 0), POS(7, 1999, UINT32_MAX), pos_wide, 5);
}

/* Split halves and merges fill a node at once: the same searches. */
Test(btree_keys, set_keys)
{
	struct btree *src = node(POS(10, 0, 0), POS(40, UINT64_MAX, UINT32_MAX));
	struct model m = { 0 };

	rng_state = 6;
	for (unsigned i = 0; i < 2000; i++)
		put(src, &m, pos_inodes(), false);
	unsigned mid = src->nr / 2;
	struct btree *left = node(src->min_key, bch_btree_key_pos(src, mid - 1));
	struct btree *right = node(bpos_successor(bch_btree_key_pos(src, mid - 1)), src->max_key);
	const struct bch_bkey **keys = malloc(src->nr * sizeof(*keys));
	uint64_t *whole = bch_btree_keys_unpacked(src, 0, src->nr, keys);
	bch_btree_node_set_keys(left, keys, mid);
	bch_btree_node_set_keys(right, keys + mid, src->nr - mid);
	free(keys);
	free(whole);
	struct model ml = { malloc(mid * sizeof(*m.p)), mid };
	struct model mr = { malloc((m.nr - mid) * sizeof(*m.p)), m.nr - mid };
	memcpy(ml.p, m.p, mid * sizeof(*m.p));
	memcpy(mr.p, m.p + mid, (m.nr - mid) * sizeof(*m.p));
	check(left, &ml);
	check(right, &mr);
	/* then inserts into the halves' arena room, and past it */
	for (unsigned i = 0; i < 1500; i++) {
		struct bch_bpos p = pos_inodes();
		if (bpos_cmp(p, left->max_key) <= 0)
			continue;
		put(right, &mr, p, false);
	}
	check(right, &mr);
	check(left, &ml);
	node_free(src);
	node_free(left);
	node_free(right);
	free(m.p);
	free(ml.p);
	free(mr.p);
}

/*
 * The index's offsets are 16 bits while the arena is at most 512 KiB: large
 * keys take a node's arena past it (the offsets widen to 32 bits, the keys
 * found where they were), and a pack after most are deleted narrows them.
 */
Test(btree_keys, offsets_widen_past_512k_and_narrow_again)
{
	struct btree *b = node(POS(7, 0, 0), POS(7, UINT64_MAX, UINT32_MAX));
	struct model m = { 0 };
	size_t val = sizeof(struct bch_raw) + 1800;

	rng_state = 8;
	printf("btree_keys: offsets_widen seed 8\n");
	for (unsigned i = 0; i < 400; i++) {
		struct bch_bpos p = POS(7, rng() % 100000, 0);
		struct bch_bkey *k = bch_bkey_alloc(BCH_BKEY_raw, p, val);
		((struct bch_raw *)bkey_val(k))->len = (uint32_t)p.offset;
		bch_btree_node_insert_key(b, k);
		free(k);
		model_set(&m, p, false);
	}
	cr_assert_gt(b->arena_bytes, 512U << 10, "keys too small to pass 512 KiB");
	check(b, &m);
	for (unsigned i = 0; i < b->nr; i++) {
		struct bch_bkey_buf kb;
		const struct bch_bkey *k = bch_btree_key(b, i, &kb);
		cr_assert_eq(((const struct bch_raw *)bkey_val(k))->len, (uint32_t)k->p.offset,
			     "key %u: another key's value", i);
	}
	while (m.nr > 50)
		put(b, &m, m.p[rng() % m.nr], true);
	bch_btree_node_pack_keys(b);
	cr_assert_lt(b->arena_bytes, 512U << 10);
	check(b, &m);
	for (unsigned i = 0; i < b->nr; i++) {
		struct bch_bkey_buf kb;
		const struct bch_bkey *k = bch_btree_key(b, i, &kb);
		cr_assert_eq(((const struct bch_raw *)bkey_val(k))->len, (uint32_t)k->p.offset);
	}
	node_free(b);
	free(m.p);
}

/*
 * The bset of b's changes against the model: sorted, one key a position,
 * exactly the positions in changed[] (a bool per inode of POS(inode, 0, 0)),
 * each the live key where the model has one, else a whiteout; its size the
 * one pending_sort() counted.
 */
static void check_pending(struct btree *b, const struct model *m, const bool *changed, unsigned span)
{
	bch_btree_node_pending_sort(b);
	uint64_t *buf = malloc((b->pending_u64s + 1) * 8);
	cr_assert(buf);
	size_t u64s = bch_btree_node_pending_pack(b, buf, b->pending_u64s);
	cr_assert_eq(u64s, b->pending_u64s, "bset of %zu words, %zu counted", u64s, b->pending_u64s);
	unsigned nr = 0, want = 0;
	const struct bch_bkey *prev = NULL;
	for (size_t o = 0; o < u64s; o += ((const struct bch_bkey *)(buf + o))->u64s, nr++) {
		const struct bch_bkey *k = (const void *)(buf + o);
		if (prev)
			cr_assert(bpos_cmp(prev->p, k->p) < 0, "changes not sorted at %u", nr);
		prev = k;
		cr_assert(k->p.inode < span && changed[k->p.inode], "%" PRIu64 " written, not changed",
			  (uint64_t)k->p.inode);
		unsigned j = model_find(m, k->p);
		bool live = j < m->nr && bpos_eq(m->p[j], k->p);
		/* a whiteout where the key is gone, the live key where it is there */
		cr_assert_eq(k->type == BCH_BKEY_deleted, !live, "%u: newest change lost", nr);
		if (live) {
			int i = bch_btree_node_find(b, k->p);
			struct bch_bkey_buf kb;
			cr_assert(!memcmp(k, bch_btree_key(b, i, &kb), bkey_bytes(k)), "%u: not the live key", nr);
		}
	}
	for (unsigned i = 0; i < span; i++)
		want += changed[i];
	cr_assert_eq(nr, want, "%u changes written, %u made", nr, want);
	free(buf);
}

static void change(struct btree *b, struct model *m, struct bch_bpos p, bool del, unsigned val)
{
	struct bch_bkey *k = del ? bch_bkey_alloc(BCH_BKEY_deleted, p, 0)
				 : bch_bkey_alloc(BCH_BKEY_raw, p, sizeof(struct bch_raw) + 8 * (val % 5));
	if (!del)
		((struct bch_raw *)bkey_val(k))->len = 8 * (val % 5);
	bch_btree_node_insert_key(b, k);
	bch_btree_node_pending_add(b, k);
	model_set(m, p, del);
	free(k);
}

/* The changes: newest change of a position wins; the bset size is exact. */
Test(btree_keys, pending_sorted_newest_wins)
{
	struct btree *b = node(POS_MIN, POS_MAX);
	struct model m = { 0 };
	bool changed[300] = { 0 };

	rng_state = 7;
	for (unsigned i = 0; i < 5000; i++) {
		struct bch_bpos p = POS(rng() % 300, 0, 0);
		change(b, &m, p, rng() % 3 == 0, i);
		changed[p.inode] = true;
	}
	check_pending(b, &m, changed, 300);
	cr_assert_eq(b->nr_dirty + b->nr_pending, 300);
	check(b, &m);
	node_free(b);
	free(m.p);
}

/*
 * Only what changed since the last write (pending_clear()): the changed
 * keys' bits follow their keys while inserts and deletes elsewhere shift
 * the index under them (a node of 3000 keys: 47 words of bits).
 */
Test(btree_keys, pending_bits_follow_keys)
{
	enum { SPAN = 6000 };
	struct btree *b = node(POS_MIN, POS_MAX);
	struct model m = { 0 };
	bool *changed = calloc(SPAN, sizeof(bool));

	cr_assert(changed);
	for (unsigned seed = 1; seed <= 4; seed++) {
		rng_state = seed * 0x9e3779b97f4a7c15ULL;
		printf("btree_keys/pending_bits_follow_keys: seed %u\n", seed);
		for (unsigned i = 0; i < 3000; i++)
			change(b, &m, POS(rng() % SPAN, 0, 0), false, i);
		bch_btree_node_pending_clear(b);	/* written */
		memset(changed, 0, SPAN * sizeof(bool));
		for (unsigned round = 0; round < 3; round++) {
			for (unsigned i = 0; i < 700; i++) {
				struct bch_bpos p = POS(rng() % SPAN, 0, 0);
				change(b, &m, p, rng() % 4 == 0, i);
				changed[p.inode] = true;
			}
			check_pending(b, &m, changed, SPAN);
			check(b, &m);
		}
		/* back in order after a pack: the bits with them */
		bch_btree_node_pack_keys(b);
		check_pending(b, &m, changed, SPAN);
		bch_btree_node_pending_clear(b);
		memset(changed, 0, SPAN * sizeof(bool));
		check_pending(b, &m, changed, SPAN);
	}
	node_free(b);
	free(m.p);
	free(changed);
}

/*
 * A delete unlike a plain whiteout (a version, a size: kv --unchecked) is
 * kept whole and written as it came, the newest of its position; a plain
 * one is written from its position alone.
 */
Test(btree_keys, pending_copies_written_whole)
{
	struct btree *b = node(POS_MIN, POS_MAX);
	struct model m = { 0 };
	uint64_t want[64] = { 0 };	/* the newest delete's version at inode i (0: plain) */

	rng_state = 11;
	for (unsigned i = 0; i < 64; i++)
		change(b, &m, POS(i, 0, 0), false, i);
	bch_btree_node_pending_clear(b);
	for (unsigned r = 0; r < 400; r++) {
		unsigned i = rng() % 64;
		struct bch_bkey *k = bch_bkey_alloc(BCH_BKEY_deleted, POS(i, 0, 0), 0);
		k->version = rng() % 2 ? r + 1 : 0;
		k->size = k->version ? 8 : 0;
		bch_btree_node_insert_key(b, k);
		bch_btree_node_pending_add(b, k);
		model_set(&m, k->p, true);
		want[i] = k->version;
		free(k);
	}
	bch_btree_node_pending_sort(b);
	uint64_t buf[64 * BCH_BKEY_U64s];
	size_t u64s = bch_btree_node_pending_pack(b, buf, sizeof(buf) / 8);
	cr_assert_eq(u64s, b->pending_u64s);
	unsigned nr = 0;
	for (size_t o = 0; o < u64s; o += BCH_BKEY_U64s, nr++) {
		const struct bch_bkey *k = (const void *)(buf + o);
		cr_assert_eq(k->type, BCH_BKEY_deleted);
		cr_assert_eq(k->p.pad, 0, "slot leaked into the position");
		cr_assert_eq(k->version, want[k->p.inode], "inode %" PRIu64 ": version %" PRIu64
			     ", newest %" PRIu64, (uint64_t)k->p.inode, (uint64_t)k->version,
			     want[k->p.inode]);
		cr_assert_eq(k->size, want[k->p.inode] ? 8U : 0U);
	}
	cr_assert_eq(nr, b->nr_pending);
	node_free(b);
	free(m.p);
}

/*
 * Once keys are appended to a node's arena, its index lies in the arena's
 * allocation right after the keys' space, and an arena of 32 KiB or more
 * keeps its room to what is left of a page (btree_cache.c keys_space()):
 * a leaf's memory is its keys, its index and less than a page.  Random
 * inserts (and some deletes, which leave dead keys), packs, and the
 * index growing down into the room: every key still found where the model
 * has it.
 */
Test(btree_keys, index_in_arena_room_fitted)
{
	enum { PAGE = 4096, BIGGEST = 40 + 8 + 24 };	/* put()'s largest key */
	struct btree *b = node(POS_MIN, POS_MAX);
	struct model m = { 0 };
	unsigned fitted = 0, took = 0;

	rng_state = 0x5eed0001;
	printf("btree_keys/index_in_arena_room_fitted: seed 0x5eed0001\n");
	for (unsigned i = 0; i < 6000; i++) {
		size_t bytes_before = b->arena_bytes;
		unsigned cap_before = b->cap;
		put(b, &m, POS(rng() % 100000, rng() % 4, 0), rng() % 16 == 0);
		if (!b->nr)
			continue;
		cr_assert(b->index_in_arena, "insert %u: the index is not in the arena", i);
		cr_assert_eq((char *)b->koff, (char *)b->arena + b->arena_bytes,
			     "insert %u: the index does not follow the keys' space", i);
		cr_assert_eq((char *)b->kpos, (char *)b->koff + b->cap * sizeof(uint16_t));
		cr_assert_leq(b->cap - b->nr, 2 * 16 + 1, "insert %u: cap %u for %u keys", i,
			      b->cap, b->nr);
		if (b->arena_used + b->cap * 4 >= 32 << 10) {
			cr_assert_lt(b->arena_bytes - b->arena_used, PAGE + BIGGEST,
				     "insert %u: %zu bytes of room past %zu used", i,
				     b->arena_bytes - b->arena_used, b->arena_used);
			fitted++;
		}
		/* the index grown down into the keys' room: their space less by its growth */
		if (b->cap > cap_before && cap_before &&
		    b->arena_bytes == bytes_before - (((b->cap - cap_before) * 4 + 7) & ~7UL))
			took++;
		if (i % 1000 == 999) {
			check(b, &m);
			bch_btree_node_pack_keys(b);
			check(b, &m);
		}
	}
	check(b, &m);
	cr_assert_gt(fitted, 1000, "only %u inserts in a fitted arena", fitted);
	cr_assert_gt(took, 10, "the index took room %u times", took);
	node_free(b);
	free(m.p);
}

/*
 * A leaf's keys held packed (btree.h pack_fmt): after a pack they lie
 * packed (the arena's live bytes fewer than their words), the keys put
 * since packed too while they fit, whole after the first that does not
 * (one of another type and size, past the format's range, among them)
 * until a pack takes them in; overwrites and
 * deletes of packed keys; every key read back whole, value and all,
 * against the model; the live bytes counted as the keys lie; the changes'
 * bset whole.  An interior node keeps its keys whole.  Seed printed.
 */
#define PK_SPAN	4096

static struct bch_bkey *pk_key(unsigned off, uint32_t gen)
{
	struct bch_bkey *k = bch_bkey_alloc(BCH_BKEY_raw, POS(5, off * 1000003ULL, 0),
					    sizeof(struct bch_raw) + 8 * (1 + off % 3));
	struct bch_raw *r = bkey_val(k);

	r->len = 8 * (1 + off % 3);
	r->pad = gen;
	memset(r->data, (int)(gen * 7 + off), r->len);
	return k;
}

/* An interior node of inode 5 holding pk_key(0..n-1, 1). */
static struct btree *interior_node(unsigned n)
{
	struct btree *in = node(POS(5, 0, 0), POS(5, UINT64_MAX, UINT32_MAX));

	in->level = 1;
	for (unsigned off = 0; off < n; off++) {
		struct bch_bkey *k = pk_key(off, 1);
		bch_btree_node_insert_key(in, k);
		free(k);
	}
	return in;
}

/* Every key of b where gens[] has one, whole; the live bytes as the keys lie. */
static void pk_check(const struct btree *b, const uint32_t *gens, const char *when)
{
	size_t live = 0;
	unsigned i = 0;

	for (unsigned off = 0; off < PK_SPAN; off++) {
		if (!gens[off])
			continue;
		cr_assert_lt(i, b->nr, "%s: %u keys, more in the model", when, b->nr);
		struct bch_bkey *want = pk_key(off, gens[off]);
		struct bch_bkey_buf buf;
		const struct bch_bkey *k = bch_btree_key(b, i, &buf);
		cr_assert(!memcmp(k, want, bkey_bytes(want)), "%s: key %u (offset %u) differs", when, i, off);
		cr_assert(bpos_eq(bch_btree_key_pos(b, i), want->p));
		cr_assert_eq(bch_btree_key_header(b, i).u64s, want->u64s);
		cr_assert_eq(bch_btree_node_find(b, want->p), (int)i);
		live += bch_btree_key_packed(b, i) ? bch_bkey_packed_u64s_of(b->pack_fmt, want) * 8
						   : bkey_bytes(want);
		free(want);
		i++;
	}
	/* the one key of another kind, past the model's offsets */
	if (i < b->nr) {
		struct bch_bkey_buf buf;
		const struct bch_bkey *k = bch_btree_key(b, i, &buf);
		cr_assert_eq(k->type, BCH_BKEY_raw);
		cr_assert_eq(k->size, 77);
		cr_assert_eq(k->p.snapshot, 9);
		live += bch_btree_key_packed(b, i) ? bch_bkey_packed_u64s_of(b->pack_fmt, k) * 8
						   : bkey_bytes(k);
		i++;
	}
	cr_assert_eq(i, b->nr, "%s: %u keys, %u in the model", when, b->nr, i);
	cr_assert_eq(bch_btree_node_live_bytes(b), live, "%s: live bytes %zu, the keys take %zu",
		     when, bch_btree_node_live_bytes(b), live);
}

Test(btree_keys, leaf_keys_held_packed)
{
	struct btree *b = node(POS(5, 0, 0), POS(5, UINT64_MAX, UINT32_MAX));
	static uint32_t gens[PK_SPAN];
	unsigned packs_seen = 0, packed_read = 0;
	bool odd_in = false;

	memset(gens, 0, sizeof(gens));
	rng_state = 0x9ac4ed;
	printf("btree_keys/leaf_keys_held_packed: seed 0x9ac4ed\n");
	for (unsigned i = 0; i < 12000; i++) {
		unsigned off = rng() % PK_SPAN;
		struct bch_bkey *k;

		if (rng() % 8 == 0) {	/* a delete (of a packed key, mostly) */
			k = bch_bkey_alloc(BCH_BKEY_deleted, POS(5, off * 1000003ULL, 0), 0);
			gens[off] = 0;
		} else {
			k = pk_key(off, ++gens[off]);
		}
		bch_btree_node_insert_key(b, k);
		bch_btree_node_pending_add(b, k);
		free(k);
		if (i == 6000) {	/* past every format: another type, size and snapshot */
			k = bch_bkey_alloc(BCH_BKEY_raw, POS(5, UINT64_MAX - 1, 9), sizeof(struct bch_raw));
			k->size = 77;
			bch_btree_node_insert_key(b, k);
			bch_btree_node_pending_add(b, k);
			free(k);
			odd_in = true;
		}
		if (b->pack_fmt) {
			/* keys put since a pack are taken in as they reach a share of it */
			size_t packed = (size_t)b->packed_u64s * 8, loose = b->arena_used - packed;
			/* (LOOSE_SHARE 1 in btree_cache.c: as many bytes as packed) */
			cr_assert_leq(loose, packed + 4096 + 512, "insert %u: %zu bytes whole beside %zu packed",
				      i, loose, packed);
			packs_seen++;
		}
		for (unsigned j = 0; j < b->nr; j++)
			packed_read += bch_btree_key_packed(b, j) && j % 64 == 0;
		if (i % 1500 == 1499) {
			char when[32];
			snprintf(when, sizeof(when), "insert %u", i);
			pk_check(b, gens, when);
			bch_btree_node_pack_keys(b);
			cr_assert(b->pack_fmt, "%s: a leaf's keys not packed", when);
			cr_assert_gt(b->packed_u64s, 0);
			cr_assert_lt(bch_btree_node_live_bytes(b), b->u64s * 8);
			for (unsigned j = 0; j < b->nr; j++)
				cr_assert(bch_btree_key_packed(b, j), "%s: key %u whole after a pack", when, j);
			pk_check(b, gens, when);
		}
	}
	cr_assert(odd_in);
	cr_assert_gt(packs_seen, 6000, "keys packed after only %u inserts", packs_seen);
	cr_assert_gt(packed_read, 1000);

	/* the changes' bset: every live key whole, in order */
	bch_btree_node_pending_sort(b);
	uint64_t *bset = malloc((b->pending_u64s + 1) * 8);
	cr_assert(bset);
	size_t u64s = bch_btree_node_pending_pack(b, bset, b->pending_u64s);
	cr_assert_eq(u64s, b->pending_u64s);
	unsigned live_written = 0;
	for (size_t o = 0; o < u64s; o += ((const struct bch_bkey *)(bset + o))->u64s) {
		const struct bch_bkey *k = (const void *)(bset + o);
		if (k->type == BCH_BKEY_deleted || k->p.snapshot == 9)
			continue;
		unsigned off = k->p.offset / 1000003ULL;
		struct bch_bkey *want = pk_key(off, gens[off]);
		cr_assert(!memcmp(k, want, bkey_bytes(want)), "bset: offset %u differs", off);
		free(want);
		live_written++;
	}
	cr_assert_gt(live_written, 100);
	free(bset);

	/* split halves and merges: set_keys packs them again */
	const struct bch_bkey **keys = malloc(b->nr * sizeof(*keys));
	uint64_t *whole = bch_btree_keys_unpacked(b, 0, b->nr, keys);
	struct btree *n = node(b->min_key, b->max_key);
	bch_btree_node_set_keys(n, keys, b->nr);
	cr_assert(n->pack_fmt);
	pk_check(n, gens, "set_keys");
	free(keys);
	free(whole);
	node_free(n);
	node_free(b);

	/* an interior node: whole */
	struct btree *in = interior_node(500);
	bch_btree_node_pack_keys(in);
	cr_assert_null(in->pack_fmt);
	cr_assert_eq(bch_btree_node_live_bytes(in), in->u64s * 8);
	node_free(in);
}

/*
 * A key appended to a leaf whose keys all lie packed is packed in place
 * when it fits the format (btree_cache.c append_packed()): the packed
 * keys grow and nothing lies whole; one that does not fit lies whole, and
 * so does every key after it until a pack.  Each read back whole.
 */
Test(btree_keys, appended_keys_packed_while_they_fit)
{
	struct btree *b = node(POS(5, 0, 0), POS(5, UINT64_MAX, UINT32_MAX));
	static uint32_t gens[PK_SPAN];

	memset(gens, 0, sizeof(gens));
	for (unsigned off = 0; off < 200; off += 2) {
		struct bch_bkey *k = pk_key(off, gens[off] = 1);
		bch_btree_node_insert_key(b, k);
		free(k);
	}
	bch_btree_node_pack_keys(b);
	cr_assert(b->pack_fmt);
	cr_assert_eq(b->arena_used, (size_t)b->packed_u64s * 8, "a pack leaves keys whole");

	/* inside the format's range: packed where it is appended */
	for (unsigned off = 101; off < 111; off += 2) {
		struct bch_bkey *k = pk_key(off, gens[off] = 1);
		uint32_t packed = b->packed_u64s;
		bch_btree_node_insert_key(b, k);
		cr_assert(bch_btree_key_packed(b, bch_btree_node_find(b, k->p)), "offset %u whole", off);
		cr_assert_eq(b->packed_u64s, packed + bch_bkey_packed_u64s_of(b->pack_fmt, k));
		cr_assert_eq(b->arena_used, (size_t)b->packed_u64s * 8);
		free(k);
	}
	pk_check(b, gens, "appended packed");

	/* past the format (another size and snapshot): whole, and the keys after it too */
	struct bch_bkey *odd = bch_bkey_alloc(BCH_BKEY_raw, POS(5, UINT64_MAX - 1, 9), sizeof(struct bch_raw));
	odd->size = 77;
	bch_btree_node_insert_key(b, odd);
	cr_assert_not(bch_btree_key_packed(b, b->nr - 1));
	free(odd);
	struct bch_bkey *k = pk_key(151, gens[151] = 1);
	bch_btree_node_insert_key(b, k);
	cr_assert_not(bch_btree_key_packed(b, bch_btree_node_find(b, k->p)),
		      "a key packed after a whole one");
	free(k);
	pk_check(b, gens, "after a whole key");
	node_free(b);
}

/*
 * An overwrite that takes the room of the key it replaces goes in its place
 * (btree_cache.c insert_in_place()): a packed key packed there, a whole one
 * copied there; nothing appended, the arena not packed again however often
 * (an inode's i_size each write).  Another length, a key past the format,
 * an interior node's key: appended as before.  Each read back whole, and
 * the changes' bset holds the newest.
 */
Test(btree_keys, overwrite_of_same_room_in_place)
{
	struct btree *b = node(POS(5, 0, 0), POS(5, UINT64_MAX, UINT32_MAX));
	static uint32_t gens[PK_SPAN];

	memset(gens, 0, sizeof(gens));
	for (unsigned off = 0; off < 300; off++) {
		struct bch_bkey *k = pk_key(off, gens[off] = 1);
		bch_btree_node_insert_key(b, k);
		free(k);
	}
	bch_btree_node_pack_keys(b);
	cr_assert(b->pack_fmt);
	size_t used = b->arena_used;
	void *arena = b->arena;

	/* the same keys again and again, new values: in place, packed */
	for (unsigned n = 0; n < 3000; n++) {
		unsigned off = (n * 7) % 300;
		struct bch_bkey *k = pk_key(off, ++gens[off]);
		bch_btree_node_insert_key(b, k);
		bch_btree_node_pending_add(b, k);
		free(k);
		cr_assert_eq(b->arena_used, used, "overwrite %u of offset %u appended", n, off);
		cr_assert(bch_btree_key_packed(b, bch_btree_node_find(b, POS(5, off * 1000003ULL, 0))));
	}
	cr_assert_eq(b->arena, arena, "overwrites in place packed the leaf again");
	cr_assert_eq(b->nr_dirty, 300);
	pk_check(b, gens, "overwritten in place");

	/* the changes' bset: the newest of each */
	bch_btree_node_pending_sort(b);
	uint64_t *bset = malloc((b->pending_u64s + 1) * 8);
	cr_assert(bset);
	size_t u64s = bch_btree_node_pending_pack(b, bset, b->pending_u64s);
	cr_assert_eq(u64s, b->pending_u64s);
	for (size_t o = 0; o < u64s; o += ((const struct bch_bkey *)(bset + o))->u64s) {
		const struct bch_bkey *k = (const void *)(bset + o);
		unsigned off = k->p.offset / 1000003ULL;
		struct bch_bkey *want = pk_key(off, gens[off]);
		cr_assert(!memcmp(k, want, bkey_bytes(want)), "bset: offset %u not the newest", off);
		free(want);
	}
	free(bset);

	/* past the format (size 77), same length: appended whole, not packed over the old */
	struct bch_bkey *odd = pk_key(10, 99);
	odd->size = 77;
	bch_btree_node_insert_key(b, odd);
	cr_assert_gt(b->arena_used, used);
	unsigned i = bch_btree_node_find(b, odd->p);
	cr_assert_not(bch_btree_key_packed(b, i));
	/* and a whole key overwritten by one of its length: in its place */
	used = b->arena_used;
	odd->size = 78;
	bch_btree_node_insert_key(b, odd);
	cr_assert_eq(b->arena_used, used, "a whole key's overwrite appended");
	struct bch_bkey_buf buf;
	cr_assert(!memcmp(bch_btree_key(b, i, &buf), odd, bkey_bytes(odd)));
	free(odd);

	/* another length: appended */
	struct bch_bkey *longer = pk_key(11, 5);
	struct bch_bkey *k2 = bch_bkey_alloc(BCH_BKEY_raw, longer->p, sizeof(struct bch_raw) + 64);
	((struct bch_raw *)bkey_val(k2))->len = 64;
	used = b->arena_used;
	bch_btree_node_insert_key(b, k2);
	cr_assert_gt(b->arena_used, used);
	cr_assert(!memcmp(bch_btree_key(b, bch_btree_node_find(b, k2->p), &buf), k2, bkey_bytes(k2)));
	free(longer);
	free(k2);
	node_free(b);

	/* an interior node: appended */
	struct btree *in = interior_node(50);
	used = in->arena_used;
	struct bch_bkey *k = pk_key(7, 2);
	bch_btree_node_insert_key(in, k);
	cr_assert_gt(in->arena_used, used);
	cr_assert(!memcmp(bch_btree_interior_key(in, 7), k, bkey_bytes(k)));
	free(k);
	node_free(in);
}

/* Neighbours in b's (narrow) index whose prefixes tie. */
static unsigned prefix_ties(const struct btree *b)
{
	unsigned n = 0;

	cr_assert_not(b->index_wide);
	for (unsigned i = 1; i < b->nr; i++)
		n += b->kpos16[i] == b->kpos16[i - 1];
	return n;
}

static void put_raw(struct btree *b, struct bch_bpos p)
{
	struct bch_bkey *k = bch_bkey_alloc(BCH_BKEY_raw, p, sizeof(struct bch_raw) + 8);

	((struct bch_raw *)bkey_val(k))->len = 8;
	bch_btree_node_insert_key(b, k);
	free(k);
}

/*
 * A leaf's prefixes keep telling one file's keys apart, 8 sectors apart,
 * after a key came before their base (the first overwrite of a file put
 * whole: the base was the node's min_key, POS_MIN, and every key of the
 * inode tied), after keys came past their reach (appends), and from an
 * empty leaf's first key on (btree_cache.c kfmt_refit()).  Every key
 * still found where the model has it.
 */
Test(btree_keys, leaf_prefixes_refit_before_base_and_past_reach)
{
	struct btree *b = node(POS_MIN, POS_MAX);
	struct model m = { 0 };

	rng_state = 0x3f17;
	printf("btree_keys/leaf_prefixes_refit: seed 0x3f17\n");
	for (unsigned j = 0; j < 1000; j++) {
		struct bch_bpos p = POS(4096, 8000 + 8 * (rng() % 1000), 0);
		put_raw(b, p);
		model_set(&m, p, false);
	}
	bch_btree_node_pack_keys(b);	/* fitted to the keys */
	unsigned before = prefix_ties(b);
	cr_assert_lt(before, 5, "%u ties after a pack", before);

	/* before the base, descending: each still apart */
	for (unsigned j = 1; j <= 900; j++) {
		struct bch_bpos p = POS(4096, 8000 - 8 * j, 0);
		put_raw(b, p);
		model_set(&m, p, false);
	}
	cr_assert_lt(prefix_ties(b), 10, "%u ties after keys before the base", prefix_ties(b));
	check(b, &m);

	/* past the reach, ascending (a file's appends) */
	for (unsigned j = 0; j < 2000; j++) {
		struct bch_bpos p = POS(4096, 16000 + 8 * j, 0);
		put_raw(b, p);
		model_set(&m, p, false);
	}
	cr_assert_lt(prefix_ties(b), 20, "%u ties after keys past the reach", prefix_ties(b));
	check(b, &m);
	node_free(b);
	free(m.p);

	/* an empty leaf's keys, from the first, in order */
	b = node(POS_MIN, POS_MAX);
	for (unsigned j = 0; j < 2000; j++)
		put_raw(b, POS(4096, 8 + 8 * j, 0));
	cr_assert_lt(prefix_ties(b), 10, "%u ties in a leaf filled in order", prefix_ties(b));
	for (unsigned j = 0; j < 2000; j++)
		cr_assert_eq(bch_btree_node_find(b, POS(4096, 8 + 8 * j, 0)), (int)j);
	node_free(b);
}

/*
 * bch_btree_node_pending_add() right after the insert of its key takes the
 * index the insert left (no search); for any other key, or after another
 * change, it finds the key's own: the bit is always the key's.
 */
Test(btree_keys, pending_add_marks_its_own_key)
{
	struct btree *b = node(POS(5, 0, 0), POS(5, UINT64_MAX, UINT32_MAX));
	struct bch_bkey *k[4];

	for (unsigned i = 0; i < 4; i++)
		k[i] = pk_key(10 * i + 1, 1);
	for (unsigned i = 0; i < 4; i++)
		bch_btree_node_insert_key(b, k[i]);
	bch_btree_node_pending_add(b, k[1]);	/* k[3] was the last put */
	cr_assert_eq(b->nr_dirty, 1);
	cr_assert(b->kdirty[0] >> 1 & 1, "the bit of another key set");
	bch_btree_node_insert_key(b, k[2]);	/* over itself, in place */
	bch_btree_node_insert_key(b, k[0]);
	bch_btree_node_pending_add(b, k[2]);
	cr_assert(b->kdirty[0] >> 2 & 1);
	bch_btree_node_pending_add(b, k[0]);	/* right after its insert */
	cr_assert_eq(b->kdirty[0], 0x7);
	cr_assert_eq(b->nr_dirty, 3);
	for (unsigned i = 0; i < 4; i++)
		free(k[i]);
	node_free(b);
}
