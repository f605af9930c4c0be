// SPDX-License-Identifier: GPL-2.0
/*
 * copygc_test.c - space: on a small filesystem, rounds of inserting and
 * deleting keys fragment the buckets; copygc must move live nodes out of
 * mostly-empty buckets so the workload never runs out of space.  And a
 * filesystem that is really full says so (-BCH_ERR_no_space) and keeps every
 * committed key.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bkey.h"
#include "btree.h"
#include "errcode.h"
#include "format.h"
#include "fs.h"
#include "journal.h"
#include "alloc.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

static char tmpdir[64], paths[1][TESTFS_PATH_MAX];

static struct bch_fs *make_fs(unsigned mb)
{
	char err[256];
	struct bch_fs *c;

	test_tmpdir_make(tmpdir, sizeof(tmpdir), "copygc");
	testfs_format(tmpdir, 1, mb, 4096, 1, paths);
	c = testfs_open(paths, 1, 0, 0, err, sizeof(err));
	cr_assert(c, "%s", err);
	return c;
}

static int count_node(struct bch_fs *c, struct btree *b, void *priv)
{
	(void)c; (void)b;
	(*(unsigned *)priv)++;
	return 0;
}

static int put(struct btree_trans *t, unsigned i, unsigned len, bool del)
{
	struct bch_bkey *k = del ? bch_bkey_alloc(BCH_BKEY_deleted, POS(4, i, 0), 0)
				 : bch_bkey_alloc(BCH_BKEY_raw, POS(4, i, 0), sizeof(struct bch_raw) + len);
	if (!del)
		((struct bch_raw *)bkey_val(k))->len = len;
	bch_trans_update(t, BCH_BTREE_ID_test, k);
	free(k);
	return bch_trans_commit(t, 0);
}

Test(copygc, fragmenting_workload_never_runs_out)
{
	struct bch_fs *c = make_fs(24);
	struct btree_trans *t;
	static bool present[20000];

	memset(present, 0, sizeof(present));
	bch_trans_init(c, &t);
	srandom(5);
	/* each round: fill to a few thousand keys spread over the key space, delete 90% */
	for (unsigned round = 0; round < 40; round++) {
		for (unsigned n = 0; n < 6000; n++) {
			unsigned i = random() % 20000;
			int pr = put(t, i, 40, false);
			if (pr) {
				struct bch_dev_usage u;
				bch_dev_usage_get(c, 0, &u);
				fprintf(stderr, "round %u n %u: free %llu btree %llu/%llu sectors journal %llu sb %llu durable %llu cur %llu\n",
					round, n, (unsigned long long)u.free_buckets,
					(unsigned long long)u.buckets[BCH_DATA_btree],
					(unsigned long long)u.sectors[BCH_DATA_btree],
					(unsigned long long)u.buckets[BCH_DATA_journal],
					(unsigned long long)u.buckets[BCH_DATA_sb],
					(unsigned long long)bch_journal_seq_durable(c),
					(unsigned long long)bch_journal_cur_seq(c));
				unsigned nn = 0;
				for (unsigned id = 0; id < BCH_BTREE_ID_NR; id++) {
					int wr = bch_btree_walk_nodes(c, id, count_node, &nn);
					if (wr) fprintf(stderr, "walk %u: %d %s\n", id, wr, c->err_msg);
				}
				fprintf(stderr, "nodes in trees: %u (sectors %u)\n", nn, nn * 8);
			}
			cr_assert_eq(pr, 0, "round %u: insert: %s", round, c->err_msg);
			present[i] = true;
		}
		for (unsigned i = 0; i < 20000; i++)
			if (present[i] && random() % 10) {
				cr_assert_eq(put(t, i, 0, true), 0, "round %u: delete: %s", round, c->err_msg);
				present[i] = false;
			}
	}
	uint64_t moves = c->roots->copygc_moves;
	bch_trans_exit(t);
	cr_assert_eq(bch_fs_close(c), 0);

	char err[256];
	c = testfs_open(paths, 1, 0, 0, err, sizeof(err));
	cr_assert(c, "%s", err);
	unsigned want = 0, got = 0;
	for (unsigned i = 0; i < 20000; i++)
		want += present[i];
	struct btree_iter it;
	int ierr;
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_test, POS_MIN, POS_MAX);
	while (bch_btree_iter_next(&it, &ierr))
		got++;
	bch_btree_iter_exit(&it);
	cr_assert_eq(got, want);
	cr_log_info("workload: %llu nodes moved by copygc", (unsigned long long)moves);
	bch_fs_close(c);
	test_tmpdir_remove(tmpdir);
}

Test(copygc, full_filesystem_says_so)
{
	struct bch_fs *c = make_fs(6);
	struct btree_trans *t;
	unsigned i;
	int r = 0;

	bch_trans_init(c, &t);
	for (i = 0; i < 1000000 && !r; i++)
		r = put(t, i, 200, false);
	cr_assert_eq(r, -BCH_ERR_no_space, "after %u keys: %d %s", i, r, c->err_msg);
	cr_assert(strstr(c->err_msg, "no space"), "%s", c->err_msg);
	unsigned committed = i - 1;
	bch_trans_exit(t);
	bch_journal_flush(c);
	c->read_only = true;	/* a full filesystem may not be able to write its nodes */
	bch_fs_close(c);

	/* every committed key is there (from the journal if need be) */
	char err[256];
	c = testfs_open(paths, 1, TESTFS_RO, 0, err, sizeof(err));
	cr_assert(c, "%s", err);
	unsigned got = 0;
	struct btree_iter it;
	int ierr;
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_test, POS_MIN, POS_MAX);
	while (bch_btree_iter_next(&it, &ierr))
		got++;
	bch_btree_iter_exit(&it);
	cr_assert_eq(got, committed, "%u of %u keys", got, committed);
	bch_fs_close(c);
	test_tmpdir_remove(tmpdir);
}

static int count_buckets_used(struct bch_fs *c)
{
	struct bch_dev_usage u;

	bch_dev_usage_get(c, 0, &u);
	return u.buckets[BCH_DATA_btree];
}

/* Sparse buckets after mass deletes: copygc empties them and keys survive. */
Test(copygc, empties_sparse_buckets)
{
	struct bch_fs *c = make_fs(24);
	struct btree_trans *t;

	bch_trans_init(c, &t);
	for (unsigned i = 0; i < 8000; i++)
		cr_assert_eq(put(t, i, 100, false), 0, "%s", c->err_msg);
	/* write every node, so nodes sit in many buckets */
	cr_assert_eq(bch_btree_flush_all(c), 0);
	/* keep every 8th key: leaves stay (sparsely) where they are */
	for (unsigned i = 0; i < 8000; i++)
		if (i % 8)
			cr_assert_eq(put(t, i, 0, true), 0, "%s", c->err_msg);
	cr_assert_eq(bch_btree_flush_all(c), 0);
	cr_assert_eq(bch_journal_flush(c), 0);
	int before = count_buckets_used(c);
	cr_assert_eq(bch_btree_copygc(c), 0, "%s", c->err_msg);
	int after = count_buckets_used(c);
	cr_assert_gt(c->roots->copygc_moves, 0, "copygc moved nothing (%d buckets in use)", before);
	cr_assert_lt(after, before, "copygc freed no bucket (%d -> %d)", before, after);
	cr_log_info("copygc: %llu nodes moved, btree buckets %d -> %d",
		    (unsigned long long)c->roots->copygc_moves, before, after);
	bch_trans_exit(t);
	cr_assert_eq(bch_fs_close(c), 0);

	char err[256];
	c = testfs_open(paths, 1, 0, 0, err, sizeof(err));
	cr_assert(c, "%s", err);
	for (unsigned i = 0; i < 8000; i++) {
		struct bch_bkey *k;
		int r = bch_btree_lookup(c, BCH_BTREE_ID_test, POS(4, i, 0), &k);
		cr_assert_eq(r, i % 8 ? -BCH_ERR_key_not_found : 0, "key %u: %d", i, r);
		if (!r)
			free(k);
	}
	bch_fs_close(c);
	test_tmpdir_remove(tmpdir);
}
