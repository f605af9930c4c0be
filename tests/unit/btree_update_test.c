// SPDX-License-Identifier: GPL-2.0
/*
 * btree_update_test.c - bch_trans_commit() of transactions that update one
 * position several times (btree_update.c, commit_order(): only the last
 * update of a position is journalled and applied).  Random interleavings of
 * inserts and deletes of a few positions, in transactions of up to 16 keys
 * (insertion sort) and of more (qsort): after the commit, and after a crash
 * and journal replay, every position holds what its last update says.
 * Seeds are printed.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bkey.h"
#include "btree.h"
#include "errcode.h"
#include "fs.h"
#include "journal.h"
#include "tests/lib/testfs.h"

#define NPOS	12

static struct testfs_one one;

static void up(void)
{
	testfs_one_up(&one, "btree_update", 64);
}

static void down(void)
{
	testfs_one_down(&one);
}

TestSuite(btree_update, .init = up, .fini = down);

static struct bch_bpos pos_of(unsigned i)
{
	return POS(7, 100 + i * 3, 0);
}

static struct bch_bkey *make_key(unsigned i, unsigned gen)
{
	return testfs_raw_key(pos_of(i), i, 1 + gen % 40, gen);
}

/* model[i]: 0 absent, else the gen + 1 of the key there */
static void check(struct bch_fs *c, const unsigned *model, uint64_t seed, const char *when)
{
	for (unsigned i = 0; i < NPOS; i++) {
		struct bch_bkey *k = NULL;
		int r = bch_btree_lookup(c, BCH_BTREE_ID_test, pos_of(i), &k);
		if (!model[i]) {
			cr_assert_eq(r, -BCH_ERR_key_not_found, "seed %llu %s: position %u present",
				     (unsigned long long)seed, when, i);
			continue;
		}
		cr_assert_eq(r, 0, "seed %llu %s: position %u missing: %s", (unsigned long long)seed,
			     when, i, c->err_msg);
		struct bch_bkey *want = make_key(i, model[i] - 1);
		cr_assert(k->u64s == want->u64s && !memcmp(k, want, bkey_bytes(k)),
			  "seed %llu %s: position %u holds an earlier update", (unsigned long long)seed,
			  when, i);
		free(k);
		free(want);
	}
}

Test(btree_update, last_update_of_a_position_wins)
{
	struct bch_fs *c = one.c;
	unsigned model[NPOS] = { 0 }, gen = 0;
	uint64_t seed = 95;

	printf("btree_update: seed %llu\n", (unsigned long long)seed);
	for (unsigned round = 0; round < 40; round++) {
		struct btree_trans *t;
		/* small transactions, then ones past the insertion sort's 16 keys */
		unsigned nr = round < 20 ? 2 + round % 14 : 17 + round % 30;

		cr_assert_eq(bch_trans_init(c, &t), 0);
		for (unsigned n = 0; n < nr; n++) {
			/* few positions: most are updated several times, in any order */
			unsigned i = testfs_xorshift(&seed) % NPOS;
			if (testfs_xorshift(&seed) % 3 == 0) {
				struct bch_bkey d = { .u64s = BCH_BKEY_U64s, .type = BCH_BKEY_deleted,
						      .p = pos_of(i) };
				cr_assert_eq(bch_trans_update(t, BCH_BTREE_ID_test, &d), 0);
				model[i] = 0;
			} else {
				struct bch_bkey *k = make_key(i, ++gen);
				cr_assert_eq(bch_trans_update(t, BCH_BTREE_ID_test, k), 0);
				free(k);
				model[i] = gen + 1;
			}
		}
		cr_assert_eq(bch_trans_commit(t, 0), 0, "seed 95 round %u: %s", round, c->err_msg);
		bch_trans_exit(t);
		check(c, model, 95, "after the commit");
	}
	/* what the journal says: a crash after its flush, then replay */
	cr_assert_eq(bch_journal_flush(c), 0);
	c->read_only = true;	/* the close writes nothing: as if power was lost */
	bch_fs_close(c);
	one.c = c = testfs_must_open(one.paths, 1, 0);
	check(c, model, 95, "after replay");
	testfs_assert_fsck_clean(c, false);
}

/*
 * bch_trans_init() hands out the thread's last ended transaction again
 * (btree_update.c, trans_spare): it must start empty whatever the last one
 * held, its arrays grown past the inline ones and its keys past the arena
 * included, and whether it was committed or abandoned.
 */
Test(btree_update, a_reused_transaction_starts_empty)
{
	struct bch_fs *c = one.c;
	unsigned model[NPOS] = { 0 }, gen = 0;
	uint64_t seed = 96;

	printf("btree_update: seed %llu\n", (unsigned long long)seed);
	for (unsigned round = 0; round < 12; round++) {
		struct btree_trans *t;
		bool commit = round % 2;
		unsigned nr = round < 4 ? 3 : 20 + round * 3;	/* past the inline arrays and the arena */
		unsigned saved[NPOS];

		memcpy(saved, model, sizeof(model));
		cr_assert_eq(bch_trans_init(c, &t), 0);
		for (unsigned n = 0; n < nr; n++) {
			unsigned i = testfs_xorshift(&seed) % NPOS;
			struct bch_bkey *k = make_key(i, ++gen);
			cr_assert_eq(bch_trans_update(t, BCH_BTREE_ID_test, k), 0);
			free(k);
			model[i] = gen + 1;
		}
		if (commit)
			cr_assert_eq(bch_trans_commit(t, 0), 0, "seed 96 round %u: %s", round, c->err_msg);
		else
			memcpy(model, saved, sizeof(model));	/* abandoned */
		bch_trans_exit(t);

		/* the next: one delete of a position; nothing of the last comes along */
		unsigned i = testfs_xorshift(&seed) % NPOS;
		struct bch_bkey d = { .u64s = BCH_BKEY_U64s, .type = BCH_BKEY_deleted, .p = pos_of(i) };
		cr_assert_eq(bch_trans_init(c, &t), 0);
		cr_assert_eq(bch_trans_update(t, BCH_BTREE_ID_test, &d), 0);
		cr_assert_eq(bch_trans_commit(t, 0), 0, "seed 96 round %u: %s", round, c->err_msg);
		bch_trans_exit(t);
		model[i] = 0;
		check(c, model, 96, commit ? "after a committed one" : "after an abandoned one");
	}
	testfs_assert_fsck_clean(c, false);
}

static int count_leaf(struct bch_fs *c, struct btree *b, void *priv)
{
	(void)c;
	if (!b->level)
		(*(unsigned *)priv)++;
	return 0;
}

static unsigned leaves(struct bch_fs *c)
{
	unsigned n = 0;

	cr_assert_eq(bch_btree_walk_nodes(c, BCH_BTREE_ID_test, count_leaf, &n), 0);
	return n;
}

/* perm[0..n) = 0..n-1 in an order drawn from *seed (Fisher-Yates). */
static void shuffled(unsigned *perm, unsigned n, uint64_t *seed)
{
	for (unsigned i = 0; i < n; i++)
		perm[i] = i;
	for (unsigned i = n - 1; i > 0; i--) {
		unsigned j = testfs_xorshift(seed) % (i + 1), x = perm[i];
		perm[i] = perm[j];
		perm[j] = x;
	}
}

/*
 * Delete the keys POS(9, perm[i], 0) in perm's order, batch to a
 * transaction, all but those whose number is a multiple of keep; after
 * each commit, after_commit(c, i) with i the number of perm's entries
 * taken so far (NULL: nothing).
 */
static void delete_in_batches(struct bch_fs *c, const unsigned *perm, unsigned n,
			      unsigned batch, unsigned keep,
			      void (*after_commit)(struct bch_fs *, unsigned))
{
	for (unsigned i = 0; i < n; ) {
		struct btree_trans *t;
		cr_assert_eq(bch_trans_init(c, &t), 0);
		for (unsigned k = 0; k < batch && i < n; i++) {
			if (perm[i] % keep == 0)
				continue;
			struct bch_bkey d = { .u64s = BCH_BKEY_U64s, .type = BCH_BKEY_deleted,
					      .p = POS(9, perm[i], 0) };
			cr_assert_eq(bch_trans_update(t, BCH_BTREE_ID_test, &d), 0);
			k++;
		}
		cr_assert_eq(bch_trans_commit(t, 0), 0, "%s", c->err_msg);
		bch_trans_exit(t);
		if (after_commit)
			after_commit(c, i);
	}
}

/*
 * Deletes merge the leaves they leave small with a sibling (maybe_merge());
 * a commit looks only at deletes whose leaf is small after it
 * (bch_trans_commit()).  Many leaves of keys, then all but a few deleted in
 * transactions of 40 keys in random order, some in leaves still big: the
 * tree shrinks to about what the keys left need, and what is left reads
 * back.  Seed printed.
 */
Test(btree_update, deletes_merge_the_leaves_they_empty, .timeout = 120)
{
	struct bch_fs *c = one.c;
	enum { NK = 12000, BATCH = 40 };
	static unsigned perm[NK];
	uint64_t seed = 97;

	printf("btree_update merges: seed %llu, %u keys\n", (unsigned long long)seed, NK);
	for (unsigned i = 0; i < NK; i += BATCH) {
		struct btree_trans *t;
		cr_assert_eq(bch_trans_init(c, &t), 0);
		for (unsigned j = i; j < i + BATCH && j < NK; j++) {
			struct bch_bkey *k = testfs_raw_key(POS(9, j, 0), j, 8, 1);
			cr_assert_eq(bch_trans_update(t, BCH_BTREE_ID_test, k), 0);
			free(k);
		}
		cr_assert_eq(bch_trans_commit(t, 0), 0, "%s", c->err_msg);
		bch_trans_exit(t);
	}
	unsigned before = leaves(c);
	cr_assert_geq(before, 8, "%u keys in %u leaves: too few to merge", NK, before);

	shuffled(perm, NK, &seed);
	/* all but every 1000th, in random order */
	delete_in_batches(c, perm, NK, BATCH, 1000, NULL);
	unsigned after = leaves(c);
	cr_assert_leq(after, 2, "%u leaves left of %u for %u keys", after, before, NK / 1000);
	for (unsigned i = 0; i < NK; i += 1000) {
		struct bch_bkey *k;
		cr_assert_eq(bch_btree_lookup(c, BCH_BTREE_ID_test, POS(9, i, 0), &k), 0, "key %u", i);
		free(k);
	}
	testfs_assert_fsck_clean(c, false);
}

struct cover {
	struct bch_bpos	pos;
	struct btree	*leaf;
};

static int find_cover(struct bch_fs *c, struct btree *b, void *priv)
{
	struct cover *cv = priv;

	(void)c;
	if (!b->level && bpos_cmp(cv->pos, b->min_key) >= 0 && bpos_cmp(cv->pos, b->max_key) <= 0)
		cv->leaf = b;
	return 0;
}

/* The leaf the tree holds for pos (a walk from the root, no hint). */
static struct btree *leaf_of(struct bch_fs *c, struct bch_bpos pos)
{
	struct cover cv = { .pos = pos };

	cr_assert_eq(bch_btree_walk_nodes(c, BCH_BTREE_ID_test, find_cover, &cv), 0);
	cr_assert(cv.leaf);
	return cv.leaf;
}

/* The hint for pos: NULL, or the leaf the tree holds for it. */
static bool hint_ok(struct bch_fs *c, struct bch_bpos pos, bool *hit)
{
	struct btree *h = bch_btree_leaf_hint(c, BCH_BTREE_ID_test, pos);

	*hit = h;
	if (!h)
		return true;
	bch_btree_node_put(c, h);
	return h == leaf_of(c, pos);
}

enum { HINT_NK = 8000, HINT_BATCH = 50, HINT_KEEP = 500 };

/* After deletes up to perm[i]: a kept key's hint, before and after its lookup. */
static void hint_after_deletes(struct bch_fs *c, unsigned i)
{
	struct bch_bpos p = POS(9, (i / HINT_BATCH % (HINT_NK / HINT_KEEP)) * HINT_KEEP, 0);
	struct bch_bkey *k;
	bool hit;

	cr_assert(hint_ok(c, p, &hit), "after deletes to %u: a stale leaf", i);
	cr_assert_eq(bch_btree_lookup(c, BCH_BTREE_ID_test, p, &k), 0, "key %llu",
		     (unsigned long long)p.offset);
	free(k);
	cr_assert(hint_ok(c, p, &hit));
}

/*
 * bch_btree_find_node()'s leaf hint (btree_cache.c): taken by a lookup,
 * it hands out only the leaf the tree holds for a position, through splits
 * (keys in random order into many leaves), merges (most deleted), and
 * eviction (no hint outlives its node: gone after the cache empties);
 * outside the hinted leaf's range, none.  Seed printed.
 */
Test(btree_update, leaf_hint_follows_splits_merges_and_eviction, .timeout = 120)
{
	struct bch_fs *c = one.c;
	enum { NK = HINT_NK, BATCH = HINT_BATCH };
	static unsigned perm[NK];
	uint64_t seed = 98;
	unsigned hits = 0, misses_elsewhere = 0;
	bool hit;

	printf("btree_update leaf hint: seed %llu, %u keys\n", (unsigned long long)seed, NK);
	shuffled(perm, NK, &seed);
	for (unsigned i = 0; i < NK; i += BATCH) {
		struct btree_trans *t;
		cr_assert_eq(bch_trans_init(c, &t), 0);
		for (unsigned j = i; j < i + BATCH; j++) {
			struct bch_bkey *k = testfs_raw_key(POS(9, perm[j], 0), perm[j], 8, 1);
			cr_assert_eq(bch_trans_update(t, BCH_BTREE_ID_test, k), 0);
			free(k);
		}
		cr_assert_eq(bch_trans_commit(t, 0), 0, "%s", c->err_msg);
		bch_trans_exit(t);
		/* the commit's leaves may have split since its last descent */
		struct bch_bpos p = POS(9, perm[i], 0), far = POS(9, perm[(i + NK / 2) % NK], 0);
		cr_assert(hint_ok(c, p, &hit), "after commit %u: a stale leaf", i / BATCH);
		struct bch_bkey *k;
		cr_assert_eq(bch_btree_lookup(c, BCH_BTREE_ID_test, p, &k), 0, "key %u", perm[i]);
		free(k);
		cr_assert(hint_ok(c, p, &hit));
		cr_assert(hit, "a lookup left no hint");
		hits++;
		struct btree *h = bch_btree_leaf_hint(c, BCH_BTREE_ID_test, p);
		cr_assert(h);
		bool inside = bpos_cmp(far, h->min_key) >= 0 && bpos_cmp(far, h->max_key) <= 0;
		bch_btree_node_put(c, h);
		cr_assert(hint_ok(c, far, &hit));
		cr_assert_eq(hit, inside, "a hint for a position outside its leaf");
		misses_elsewhere += !inside;
	}
	cr_assert_geq(leaves(c), 8, "too few leaves to split");
	cr_assert_gt(misses_elsewhere, 0);

	/* eviction: no hint outlives its node */
	cr_assert_eq(bch_btree_flush_all(c), 0, "%s", c->err_msg);
	bch_btree_cache_evict_unused(c);
	for (unsigned i = 0; i < NK; i += 97)
		cr_assert_null(bch_btree_leaf_hint(c, BCH_BTREE_ID_test, POS(9, i, 0)), "hint after eviction");

	/* merges: most deleted, in random order; each lookup's hint the tree's leaf */
	delete_in_batches(c, perm, NK, HINT_BATCH, HINT_KEEP, hint_after_deletes);
	cr_assert_leq(leaves(c), 2);
	printf("btree_update leaf hint: %u hints checked, %u positions outside them\n", hits,
	       misses_elsewhere);
	testfs_assert_fsck_clean(c, false);
}
