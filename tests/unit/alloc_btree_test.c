// SPDX-License-Identifier: GPL-2.0
/*
 * alloc_btree_test.c - bucket state persisted in the alloc btree.
 *
 * A file workload (fixed seed) churns buckets so generations climb; then:
 * the state loaded after a clean close equals the state recomputed from
 * every pointer (the fsck comparison finds no difference); generations of
 * free buckets survive both a clean close and a crash; a damaged alloc key
 * fails the open with a message naming it, and fsck finds and deletes it.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "alloc_btree.h"
#include "super.h"
#include "bcachefs.h"
#include "btree.h"
#include "fs.h"
#include "fs_ops.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define SEED	4242u

static char tmpdir[64], paths[1][TESTFS_PATH_MAX];

static struct bch_fs *open_fs(unsigned flags)
{
	char err[256];
	struct bch_fs *c = testfs_open(paths, 1, flags, 0, err, sizeof(err));

	cr_assert(c, "seed %u: open: %s", SEED, err);
	return c;
}

/* Files written, overwritten and deleted at random: buckets fill, empty and are reused. */
static void churn(struct bch_fs *c, unsigned ops)
{
	static char buf[96 * 1024];
	unsigned rng = SEED;

	for (unsigned i = 0; i < sizeof(buf); i++)
		buf[i] = (char)(i * 7 + 3);
	for (unsigned op = 0; op < ops; op++) {
		char name[32];
		uint64_t inum;
		rng = rng * 1103515245u + 12345u;
		snprintf(name, sizeof(name), "f%u", (rng >> 8) % 40);
		if ((rng >> 20) % 3 == 0) {
			int r = bch_fs_unlink(c, BCH_ROOT_INO, name);
			cr_assert(!r || r == -ENOENT, "seed %u op %u: unlink %s: %d", SEED, op, name, r);
			continue;
		}
		int r = bch_fs_lookup(c, BCH_ROOT_INO, name, &inum);
		if (r == -ENOENT)
			r = bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &inum);
		cr_assert_eq(r, 0, "seed %u op %u: create %s: %d", SEED, op, name, r);
		size_t len = 4096 * (1 + (rng >> 4) % 24);
		cr_assert_eq(bch_fs_write(c, inum, 0, buf, len), (ssize_t)len, "seed %u op %u", SEED, op);
	}
}

static int count_diff(void *priv, unsigned dev, uint64_t bucket,
		      const struct bch_bucket_state *stored, const struct bch_bucket_state *now)
{
	(void)dev;
	cr_log_warn("bucket %lu: stored gen %u type %u sectors %u, recomputed gen %u type %u sectors %u",
		    (unsigned long)bucket, stored->gen, stored->data_type, stored->sectors,
		    now->gen, now->data_type, now->sectors);
	(*(unsigned *)priv)++;
	return 0;
}

static int count_bad(void *priv, struct bch_bpos pos, const char *why)
{
	(void)pos;
	(void)why;
	(*(unsigned *)priv)++;
	return 0;
}

static uint8_t *gens_of(struct bch_fs *c, uint64_t *n, unsigned *max_gen)
{
	*n = bch_alloc_nbuckets(c, 0);
	uint8_t *g = calloc(*n, 1);
	*max_gen = 0;
	for (uint64_t b = 0; b < *n; b++) {
		struct bch_bucket_state s;
		if (bch_alloc_bucket_get(c, 0, b, &s)) {
			g[b] = s.gen;
			if (s.gen > *max_gen)
				*max_gen = s.gen;
		}
	}
	return g;
}

static void setup(void)
{
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "allocbt");
	testfs_format(tmpdir, 1, 48, 4096, 1, paths);
}

static void teardown(void)
{
	test_tmpdir_remove(tmpdir);
}

TestSuite(alloc_btree, .init = setup, .fini = teardown);

Test(alloc_btree, loaded_state_equals_recomputed)
{
	struct bch_fs *c = open_fs(0);
	churn(c, 1500);
	cr_assert_eq(bch_fs_close(c), 0);

	/* fsck recomputes from the pointers and compares with the stored keys */
	c = open_fs(TESTFS_RO | TESTFS_FSCK);
	cr_assert(bch_alloc_btree_was_current(c), "seed %u: clean close did not settle the alloc btree", SEED);
	unsigned diffs = 0, bad = 0;
	bch_alloc_btree_for_each_diff(c, count_diff, &diffs);
	bch_alloc_btree_for_each_bad(c, count_bad, &bad);
	cr_assert_eq(diffs, 0, "seed %u: %u buckets differ from the alloc btree", SEED, diffs);
	cr_assert_eq(bad, 0, "seed %u", SEED);
	struct bch_dev_usage recount;
	bch_dev_usage_get(c, 0, &recount);
	bch_fs_close(c);

	/* an ordinary open loads the keys: the same usage without reading an extent */
	struct bch_dev_usage loaded;
	c = open_fs(TESTFS_RO);
	bch_dev_usage_get(c, 0, &loaded);
	bch_fs_close(c);
	for (unsigned t = 0; t < BCH_DATA_NR; t++) {
		cr_assert_eq(loaded.sectors[t], recount.sectors[t], "seed %u: data type %u", SEED, t);
		cr_assert_eq(loaded.buckets[t], recount.buckets[t], "seed %u: data type %u", SEED, t);
	}
	cr_assert_gt(loaded.sectors[BCH_DATA_user], 0);
}

Test(alloc_btree, generations_survive_close_and_crash)
{
	struct bch_fs *c = open_fs(0);
	churn(c, 3000);
	cr_assert_eq(bch_fs_close(c), 0);

	c = open_fs(0);
	uint64_t n;
	unsigned max_gen;
	uint8_t *g = gens_of(c, &n, &max_gen);
	cr_assert_gt(max_gen, 1, "seed %u: the workload reused no bucket", SEED);
	/* power cut with nothing changed: the next open recomputes (not clean) */
	c->read_only = true;
	bch_fs_close(c);

	c = open_fs(0);
	cr_assert(!bch_alloc_btree_was_current(c));
	uint64_t n2;
	unsigned max2;
	uint8_t *g2 = gens_of(c, &n2, &max2);
	cr_assert_eq(n, n2);
	for (uint64_t b = 0; b < n; b++)
		cr_assert_eq(g[b], g2[b], "seed %u: bucket %lu gen %u before the crash, %u after",
			     SEED, (unsigned long)b, g[b], g2[b]);
	cr_assert_eq(bch_fs_close(c), 0);
	free(g);
	free(g2);
}

Test(alloc_btree, bad_key_refused_and_repaired)
{
	struct bch_fs *c = open_fs(0);
	churn(c, 200);
	uint64_t nb = bch_alloc_nbuckets(c, 0);
	struct {
		struct bch_bkey	k;
		struct bch_alloc v;
	} key;
	memset(&key, 0, sizeof(key));
	key.k.u64s = sizeof(key) / 8;
	key.k.type = BCH_BKEY_alloc;
	key.k.p.inode = 0;
	key.k.p.offset = nb + 5;	/* past the end of the device */
	key.v.gen = 3;
	key.v.data_type = BCH_DATA_user;
	key.v.dirty_sectors = 8;
	struct btree_trans *t;
	cr_assert_eq(bch_trans_init(c, &t), 0);
	cr_assert_eq(bch_trans_update(t, BCH_BTREE_ID_alloc, &key.k), 0);
	cr_assert_eq(bch_trans_commit(t, 0), 0);
	bch_trans_exit(t);
	cr_assert_eq(bch_fs_close(c), 0);

	char err[256];
	c = testfs_open(paths, 1, TESTFS_RO, 0, err, sizeof(err));
	cr_assert_null(c, "a bucket past the end of the device was accepted");
	cr_assert(strstr(err, "alloc btree") && strstr(err, "beyond the end"), "message: %s", err);

	c = open_fs(TESTFS_FSCK);
	unsigned bad = 0;
	bch_alloc_btree_for_each_bad(c, count_bad, &bad);
	cr_assert_eq(bad, 1);
	cr_assert_eq(bch_alloc_btree_delete(c, key.k.p), 0);
	cr_assert_eq(bch_fs_close(c), 0);
	bch_fs_close(open_fs(TESTFS_RO));
}

/*
 * A damaged btree pointer that runs past its bucket's end was never counted
 * in the bucket (bch_alloc_mark_ptr() refuses it), so freeing it (fsck
 * dropping the node) must not take sectors off the bucket: the nodes still
 * there would be undercounted (fuzzer find: the second fsck found the
 * alloc key wrong).  An in-bucket pointer still frees its node.
 */
Test(alloc_btree, free_of_pointer_past_bucket_end_changes_nothing)
{
	struct bch_fs *c = open_fs(0);
	uint64_t n = bch_alloc_nbuckets(c, 0), b;
	struct bch_bucket_state before, after;
	unsigned node = c->sb->btree_node_size, bucket = bch_sb_member(c->sb, 0)->bucket_size;

	for (b = 0; b < n; b++)
		if (bch_alloc_bucket_get(c, 0, b, &before) && before.data_type == BCH_DATA_btree &&
		    before.sectors >= 2 * node)
			break;
	cr_assert_lt(b, n, "seed %u: no bucket holding two btree nodes", SEED);

	struct bch_extent_ptr past = { .dev = 0, .gen = before.gen,
				       .offset = (b + 1) * bucket - 1 };
	bch_free_btree_node(c, &past, 1);
	cr_assert(bch_alloc_bucket_get(c, 0, b, &after));
	cr_assert_eq(after.sectors, before.sectors,
		     "seed %u: bucket %lu: %u sectors before freeing a pointer past its end, %u after",
		     SEED, (unsigned long)b, before.sectors, after.sectors);

	struct bch_extent_ptr inside = past;
	inside.offset = b * bucket;
	bch_free_btree_node(c, &inside, 1);
	cr_assert(bch_alloc_bucket_get(c, 0, b, &after));
	cr_assert_eq(after.sectors, before.sectors - node, "seed %u", SEED);
	bch_fs_close(c);
}
