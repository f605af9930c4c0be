// SPDX-License-Identifier: GPL-2.0
/*
 * btree_node_scan_test.c - the node scan finds every live node of a
 * filesystem (and loads it through the normal read path), does not record a
 * node whose first bset is damaged, and bch_node_scan_pick() applies its
 * rules: newest journal_seq wins, a covered older node gives only what is
 * outside the newer ones, nothing straddling a lost range's edge or lying in
 * a bucket of user data is taken, and a lost leaf takes only its own seq.
 * Keys come from random() seeded with 17 (printed on failure).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "bkey.h"
#include "blockdev.h"
#include "btree.h"
#include "btree_node_scan.h"
#include "errcode.h"
#include "fs.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define SEED	17

static char tmpdir[64], paths[1][TESTFS_PATH_MAX];

/* A filesystem with a few thousand keys of the test btree (several levels), closed. */
static void make_fs(void)
{
	char err[256];
	struct btree_trans *t;

	test_tmpdir_make(tmpdir, sizeof(tmpdir), "nodescan");
	testfs_format(tmpdir, 1, 16, 4096, 1, paths);
	struct bch_fs *c = testfs_open(paths, 1, 0, 0, err, sizeof(err));
	cr_assert(c, "%s", err);
	bch_trans_init(c, &t);
	srandom(SEED);
	for (unsigned n = 0; n < 3000; n++) {
		unsigned i = random() % 5000;
		struct bch_bkey *k = bch_bkey_alloc(BCH_BKEY_raw, POS(4, i, 0),
						    sizeof(struct bch_raw) + 16);
		((struct bch_raw *)bkey_val(k))->len = 16;
		bch_trans_update(t, BCH_BTREE_ID_test, k);
		free(k);
		cr_assert_eq(bch_trans_commit(t, 0), 0, "seed %d: %s", SEED, c->err_msg);
	}
	bch_trans_exit(t);
	cr_assert_eq(bch_fs_close(c), 0);
}

static struct bch_fs *open_ro(void)
{
	char err[256];
	struct bch_fs *c = testfs_open(paths, 1, TESTFS_RO, 0, err, sizeof(err));

	cr_assert(c, "%s", err);
	return c;
}

struct live {
	struct {
		uint64_t	offset, seq;
		struct bch_bpos	min, max;
		unsigned	level;
	} n[4096];
	unsigned nr, leaves;
};

static int note_node(struct bch_fs *c, struct btree *b, void *priv)
{
	struct live *l = priv;

	(void)c;
	cr_assert_lt(l->nr, 4096);
	l->n[l->nr].offset = b->ptrs[0].offset;
	l->n[l->nr].seq = b->seq;
	l->n[l->nr].min = b->min_key;
	l->n[l->nr].max = b->max_key;
	l->n[l->nr].level = b->level;
	l->leaves += !b->level;
	l->nr++;
	return 0;
}

static const struct bch_found_node *find(const struct bch_node_scan *s, uint64_t offset)
{
	for (size_t i = 0; i < s->nr; i++)
		if (s->n[i].ptr.offset == offset)
			return &s->n[i];
	return NULL;
}

Test(node_scan, finds_every_live_node)
{
	static struct live l;
	struct bch_node_scan s;

	make_fs();
	struct bch_fs *c = open_ro();
	memset(&l, 0, sizeof(l));
	cr_assert_eq(bch_btree_walk_nodes(c, BCH_BTREE_ID_test, note_node, &l), 0);
	cr_assert_gt(l.leaves, 10, "want a tree of many leaves");
	cr_assert_gt(l.nr, l.leaves + 1, "want more than one interior node");

	cr_assert_eq(bch_node_scan(c, &s, false), 0, "%s", c->err_msg);
	cr_assert_geq(s.nr, l.nr);
	cr_assert_eq(s.bad, 0);
	cr_assert_gt(s.bytes_read, 0);
	for (unsigned i = 0; i < l.nr; i++) {
		const struct bch_found_node *f = find(&s, l.n[i].offset);
		cr_assert(f, "live node at %llu not found", (unsigned long long)l.n[i].offset);
		cr_assert_eq(f->id, BCH_BTREE_ID_test);
		cr_assert_eq(f->level, l.n[i].level);
		cr_assert_eq(f->seq, l.n[i].seq);
		cr_assert(bpos_eq(f->min_key, l.n[i].min) && bpos_eq(f->max_key, l.n[i].max));
		cr_assert_gt(f->journal_seq, 0);
		/* the normal read path accepts the pointer the scan makes */
		struct bch_bkey *k = bch_found_node_ptr(f);
		struct btree *b;
		cr_assert_eq(bch_btree_node_get(c, f->id, f->level, k, &b), 0, "%s", c->err_msg);
		cr_assert_eq(b->seq, f->seq);
		bch_btree_node_put(c, b);
		free(k);
	}
	uint64_t all_bytes = s.bytes_read;
	bch_node_scan_exit(&s);

	/* trusting the generations: buckets never allocated are not read, nothing is missed */
	cr_assert_eq(bch_node_scan(c, &s, true), 0, "%s", c->err_msg);
	cr_assert_lt(s.bytes_read, all_bytes);
	for (unsigned i = 0; i < l.nr; i++)
		cr_assert(find(&s, l.n[i].offset), "trusting gens: node at %llu missed",
			  (unsigned long long)l.n[i].offset);
	bch_node_scan_exit(&s);
	bch_fs_close(c);
	test_tmpdir_remove(tmpdir);
}

Test(node_scan, damaged_first_bset_not_recorded)
{
	static struct live l;
	struct bch_node_scan s;

	make_fs();
	struct bch_fs *c = open_ro();
	memset(&l, 0, sizeof(l));
	cr_assert_eq(bch_btree_walk_nodes(c, BCH_BTREE_ID_test, note_node, &l), 0);
	bch_fs_close(c);
	/* a byte of the first key of the last leaf walked */
	uint64_t off = 0;
	for (unsigned i = 0; i < l.nr; i++)
		if (!l.n[i].level)
			off = l.n[i].offset;
	FILE *f = fopen(paths[0], "r+b");
	cr_assert(f);
	cr_assert_eq(fseek(f, (long)(off * 512 + sizeof(struct bch_btree_node) + 3), SEEK_SET), 0);
	int ch = fgetc(f);
	cr_assert_eq(fseek(f, (long)(off * 512 + sizeof(struct bch_btree_node) + 3), SEEK_SET), 0);
	fputc(ch ^ 0x40, f);
	fclose(f);

	c = open_ro();
	cr_assert_eq(bch_node_scan(c, &s, false), 0, "%s", c->err_msg);
	cr_assert_null(find(&s, off));
	cr_assert_geq(s.bad, 1);
	bch_node_scan_exit(&s);
	bch_fs_close(c);
	test_tmpdir_remove(tmpdir);
}

static bool none_reachable(void *priv, const struct bch_found_node *f)
{
	(void)priv; (void)f;
	return false;
}

static struct bch_found_node fake(uint64_t lo, uint64_t hi, uint64_t jseq, uint64_t seq,
				  const struct bch_extent_ptr *where)
{
	return (struct bch_found_node) {
		.min_key = POS(4, lo, 0), .max_key = POS(4, hi, 0), .seq = seq,
		.journal_seq = jseq, .ptr = *where, .sectors_written = 8,
		.id = BCH_BTREE_ID_test, .level = 0,
	};
}

Test(node_scan, pick_rules)
{
	static struct live l;

	make_fs();
	struct bch_fs *c = open_ro();
	memset(&l, 0, sizeof(l));
	cr_assert_eq(bch_btree_walk_nodes(c, BCH_BTREE_ID_test, note_node, &l), 0);
	/* a bucket of btree nodes, and one made to hold user data (in memory only) */
	struct bch_extent_ptr btree_at = { .offset = l.n[0].offset, .dev = 0 };
	struct bch_bucket_state st;
	cr_assert(bch_alloc_bucket_get(c, 0, btree_at.offset / bch_alloc_bucket_sectors(c, 0), &st));
	btree_at.gen = st.gen;
	uint64_t user_bucket = 0;
	for (uint64_t b = bch_alloc_nbuckets(c, 0) - 1; b && !user_bucket; b--)
		if (bch_alloc_bucket_get(c, 0, b, &st) && !st.sectors)
			user_bucket = b;
	struct bch_extent_ptr user_at = {
		.offset = user_bucket * bch_alloc_bucket_sectors(c, 0), .dev = 0, .gen = st.gen,
	};
	cr_assert_eq(bch_alloc_mark_ptr(c, &user_at, 8, BCH_DATA_user), 0, "%s", c->err_msg);

	struct bch_found_node n[6] = {
		fake(0, 100, 10, 1, &btree_at),		/* older: gives 0..49 */
		fake(50, 150, 20, 2, &btree_at),	/* newest: all of it */
		fake(60, 70, 5, 3, &btree_at),		/* covered: nothing */
		fake(150, 250, 30, 4, &btree_at),	/* straddles the lost range's end */
		fake(160, 190, 40, 5, &user_at),	/* in a bucket of user data */
		fake(300, 310, 1, 6, &btree_at),	/* a lost leaf's own seq */
	};
	struct bch_node_scan s = { .n = n, .nr = 6 };
	struct bch_lost_range lost[2] = {
		{ .min_key = POS(4, 0, 0), .max_key = POS(4, 200, 0), .level = 1, .seq = 99 },
		{ .min_key = POS(4, 300, 0), .max_key = POS(4, 320, 0), .level = 0, .seq = 6 },
	};
	struct bch_node_pick *p;
	size_t nr;
	cr_assert_eq(bch_node_scan_pick(c, &s, BCH_BTREE_ID_test, lost, 2, none_reachable, NULL,
					&p, &nr), 0);
	cr_assert_eq(nr, 3);
	cr_assert_eq(p[0].f, &n[0]);
	cr_assert(bpos_eq(p[0].min_key, POS(4, 0, 0)));
	cr_assert(bpos_eq(p[0].max_key, bpos_predecessor(POS(4, 50, 0))));
	cr_assert_eq(p[1].f, &n[1]);
	cr_assert(bpos_eq(p[1].min_key, POS(4, 50, 0)) && bpos_eq(p[1].max_key, POS(4, 150, 0)));
	cr_assert_eq(p[2].f, &n[5]);
	free(p);

	/* a lost leaf takes no other life of its range, however new */
	n[5].seq = 7;
	n[5].journal_seq = 1000;
	cr_assert_eq(bch_node_scan_pick(c, &s, BCH_BTREE_ID_test, &lost[1], 1, none_reachable, NULL,
					&p, &nr), 0);
	cr_assert_eq(nr, 0);
	free(p);
	bch_fs_close(c);
	test_tmpdir_remove(tmpdir);
}
