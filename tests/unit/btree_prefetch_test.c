// SPDX-License-Identifier: GPL-2.0
/*
 * btree_prefetch_test.c - the read-ahead thread of fsck -n parses leaves
 * with the read path's code: every leaf it parsed (and, opened for fsck with
 * two copies, compared) holds the same keys as the read path's own read of
 * it, and a damaged leaf it cannot parse is read and reported by the read
 * path as without it (its checksum error counted once, there).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bkey.h"
#include "btree.h"
#include "btree_prefetch.h"
#include "fs.h"
#include "super.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define NODE_BYTES	(64 << 10)
#define KEYS		2000	/* some 200-byte keys: several leaves under a root */
#define LEAVES_MAX	256

static char tmpdir[64];
static char paths[1][TESTFS_PATH_MAX];

static void fill(unsigned replicas)
{
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "prefetch");
	testfs_format(tmpdir, 1, 32, NODE_BYTES, replicas, paths);
	struct bch_fs *c = testfs_must_open(paths, 1, 0);
	struct btree_trans *t;
	bch_trans_init(c, &t);
	for (unsigned i = 0; i < KEYS; i++) {
		struct bch_bkey *k = bch_bkey_alloc(BCH_BKEY_raw, POS(1, i, 0),
						    sizeof(struct bch_raw) + 200);
		struct bch_raw *r = bkey_val(k);
		r->len = 200;
		memset(r->data, 'a' + i % 26, 200);
		bch_trans_update(t, BCH_BTREE_ID_test, k);
		free(k);
		if (i % 64 == 63)
			cr_assert_eq(bch_trans_commit(t, 0), 0, "%s", c->err_msg);
	}
	cr_assert_eq(bch_trans_commit(t, 0), 0, "%s", c->err_msg);
	bch_trans_exit(t);
	cr_assert_eq(bch_fs_close(c), 0);
}

/* The pointers to every leaf of the test btree (its root is one level up). */
static unsigned leaf_ptrs(struct bch_fs *c, struct bch_bkey **ptrs)
{
	struct btree *root;
	unsigned nr = 0;

	cr_assert_eq(c->roots->r[BCH_BTREE_ID_test].level, 1, "the test tree is not two levels");
	cr_assert_eq(bch_btree_find_node(c, BCH_BTREE_ID_test, 1, POS_MIN, &root), 0, "%s", c->err_msg);
	for (unsigned i = 0; i < root->nr && nr < LEAVES_MAX; i++)
		ptrs[nr++] = bch_btree_key_dup(root, i);
	bch_btree_node_put(c, root);
	cr_assert_geq(nr, 3, "only %u leaves", nr);
	return nr;
}

/* FNV-1a of a leaf's keys, in order. */
static uint64_t leaf_hash(struct bch_fs *c, const struct bch_bkey *ptr, unsigned *nr, uint8_t *bad)
{
	const struct bch_btree_ptr *bp = bkey_val(ptr);
	struct btree *b;
	uint64_t h = 0xcbf29ce484222325ULL;

	bch_btree_cache_drop(c, &bp->ptrs[0]);	/* read from disk, not the cache */
	cr_assert_eq(bch_btree_node_get(c, BCH_BTREE_ID_test, 0, ptr, &b), 0, "%s", c->err_msg);
	for (unsigned i = 0; i < b->nr; i++) {
		struct bch_bkey_buf kb;
		const struct bch_bkey *k = bch_btree_key(b, i, &kb);
		const unsigned char *x = (const void *)k;
		for (size_t j = 0; j < bkey_bytes(k); j++)
			h = (h ^ x[j]) * 0x100000001b3ULL;
	}
	*nr = b->nr;
	*bad = b->bad_replicas;
	bch_btree_node_put(c, b);
	bch_btree_cache_drop(c, &bp->ptrs[0]);
	return h;
}

/* Every leaf parsed ahead, then read by the read path alone: the same keys. */
static void leaves_same(unsigned flags)
{
	struct bch_bkey *ptrs[LEAVES_MAX];
	uint64_t ahead[LEAVES_MAX];
	unsigned nr_ahead[LEAVES_MAX], keys = 0;
	uint8_t bad;

	struct bch_fs *c = testfs_must_open(paths, 1, TESTFS_RO | flags);
	unsigned nr = leaf_ptrs(c, ptrs);
	cr_assert_eq(bch_prefetch_start(c), 0);
	cr_assert(c->prefetch);
	for (unsigned i = 0; i < nr; i++) {
		const struct bch_btree_ptr *bp = bkey_val(ptrs[i]);
		bch_btree_cache_drop(c, &bp->ptrs[0]);
		bch_prefetch_node(c, BCH_BTREE_ID_test, 0, ptrs[i]);
		bch_prefetch_wait_idle(c);
		ahead[i] = leaf_hash(c, ptrs[i], &nr_ahead[i], &bad);
		cr_assert_eq(bad, 0, "leaf %u: copies found different", i);
		keys += nr_ahead[i];
	}
	cr_assert_eq(bch_prefetch_nr_taken(c), nr, "%u leaves, %u taken from the read-ahead", nr,
		     (unsigned)bch_prefetch_nr_taken(c));
	cr_assert_eq(keys, KEYS);
	bch_prefetch_stop(c);
	for (unsigned i = 0; i < nr; i++) {
		unsigned n;
		cr_assert_eq(leaf_hash(c, ptrs[i], &n, &bad), ahead[i], "leaf %u: other keys", i);
		cr_assert_eq(n, nr_ahead[i]);
		free(ptrs[i]);
	}
	cr_assert_eq(bch_fs_close(c), 0);
	test_tmpdir_remove(tmpdir);
}

Test(btree_prefetch, a_leaf_parsed_ahead_holds_what_the_read_path_reads)
{
	fill(1);
	leaves_same(0);
}

/* fsck pass 3: the second copy is compared on the worker too. */
Test(btree_prefetch, fsck_copies_compared_ahead)
{
	fill(2);
	leaves_same(TESTFS_FSCK);
}

/* A leaf the worker cannot parse: the read path reads it and reports its damage. */
Test(btree_prefetch, a_damaged_leaf_is_reported_by_the_read_path)
{
	struct bch_bkey *ptrs[LEAVES_MAX];

	fill(1);
	struct bch_fs *c = testfs_must_open(paths, 1, TESTFS_RO);
	unsigned nr = leaf_ptrs(c, ptrs);
	cr_assert_eq(bch_fs_close(c), 0);
	const struct bch_btree_ptr *bp = bkey_val(ptrs[1]);
	uint64_t byte = ((uint64_t)bp->ptrs[0].offset << 9) + sizeof(struct bch_btree_node) + 100;
	FILE *f = fopen(paths[0], "r+b");
	unsigned char ch;
	cr_assert(f);
	cr_assert_eq(fseeko(f, (off_t)byte, SEEK_SET), 0);
	cr_assert_eq(fread(&ch, 1, 1, f), 1);
	ch ^= 0x5a;
	cr_assert_eq(fseeko(f, (off_t)byte, SEEK_SET), 0);
	cr_assert_eq(fwrite(&ch, 1, 1, f), 1);
	fclose(f);

	c = testfs_must_open(paths, 1, TESTFS_RO);
	uint64_t before[BCH_DEV_ERROR_NR], after[BCH_DEV_ERROR_NR];
	bch_dev_errors_get(c, 0, before, NULL);
	cr_assert_eq(bch_prefetch_start(c), 0);
	bch_btree_cache_drop(c, &bp->ptrs[0]);
	bch_prefetch_node(c, BCH_BTREE_ID_test, 0, ptrs[1]);
	bch_prefetch_wait_idle(c);
	struct btree *b;
	c->err_msg[0] = 0;
	cr_assert_neq(bch_btree_node_get(c, BCH_BTREE_ID_test, 0, ptrs[1], &b), 0,
		      "a damaged leaf was read");
	cr_assert(strstr(c->err_msg, "bad checksum"), "message: %s", c->err_msg);
	cr_assert_eq(bch_prefetch_nr_taken(c), 0);
	/* counted once, by the read path (the worker changes nothing of c) */
	bch_dev_errors_get(c, 0, after, NULL);
	cr_assert_eq(after[BCH_DEV_ERROR_checksum], before[BCH_DEV_ERROR_checksum] + 1,
		     "checksum errors %u -> %u", (unsigned)before[BCH_DEV_ERROR_checksum],
		     (unsigned)after[BCH_DEV_ERROR_checksum]);
	bch_prefetch_stop(c);
	for (unsigned i = 0; i < nr; i++)
		free(ptrs[i]);
	bch_fs_close(c);
	test_tmpdir_remove(tmpdir);
}
