// SPDX-License-Identifier: GPL-2.0
/*
 * fsck_stream_test.c - leaves streamed a piece at a time (fsck -n;
 * bch_leaf_stream_open() in btree_prefetch.c): a leaf that streams yields
 * exactly the keys the read path reads, verified ahead by the read-ahead
 * thread or not, its bsets merged as the read path merges them; a leaf that
 * is damaged, whose other copy differs, or whose keys check() refuses does
 * not stream (its reader then reads it the ordinary way, which reports it).
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bkey.h"
#include "btree.h"
#include "blockdev.h"
#include "btree_prefetch.h"
#include "fs.h"
#include "super.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define NODE_BYTES	(64 << 10)	/* several pieces a leaf */
#define KEYS		2000		/* 240-byte keys: several leaves under a root */
#define LEAVES_MAX	256

static char tmpdir[64];
static char paths[1][TESTFS_PATH_MAX];

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

static void free_ptrs(struct bch_bkey **ptrs, unsigned nr)
{
	for (unsigned i = 0; i < nr; i++)
		free(ptrs[i]);
}

/*
 * KEYS keys committed in small transactions (leaves get appends), then every
 * leaf rewritten whole: one bset each, as a leaf written once is.
 */
static void fill(unsigned replicas)
{
	struct bch_bkey *ptrs[LEAVES_MAX];

	test_tmpdir_make(tmpdir, sizeof(tmpdir), "fsck_stream");
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
	cr_assert_eq(bch_btree_flush_all(c), 0, "%s", c->err_msg);
	unsigned nr = leaf_ptrs(c, ptrs);
	for (unsigned i = 0; i < nr; i++) {
		struct btree *b;
		cr_assert_eq(bch_btree_node_get(c, BCH_BTREE_ID_test, 0, ptrs[i], &b), 0, "%s",
			     c->err_msg);
		cr_assert_eq(bch_btree_node_rewrite(c, b), 0, "%s", c->err_msg);
		bch_btree_node_put(c, b);
	}
	free_ptrs(ptrs, nr);
	cr_assert_eq(bch_fs_close(c), 0);
}

static uint64_t hash_key(uint64_t h, const struct bch_bkey *k)
{
	const unsigned char *x = (const void *)k;

	for (size_t j = 0; j < bkey_bytes(k); j++)
		h = (h ^ x[j]) * 0x100000001b3ULL;
	return h;
}

/* FNV-1a of a leaf's keys as the read path reads them (from disk). */
static uint64_t read_hash(struct bch_fs *c, const struct bch_bkey *ptr, unsigned *nr)
{
	const struct bch_btree_ptr *bp = bkey_val(ptr);
	struct btree *b;
	uint64_t h = 0xcbf29ce484222325ULL;

	bch_btree_cache_drop(c, &bp->ptrs[0]);
	cr_assert_eq(bch_btree_node_get(c, BCH_BTREE_ID_test, 0, ptr, &b), 0, "%s", c->err_msg);
	struct bch_bkey_buf kb;
	for (unsigned i = 0; i < b->nr; i++)
		h = hash_key(h, bch_btree_key(b, i, &kb));
	*nr = b->nr;
	bch_btree_node_put(c, b);
	bch_btree_cache_drop(c, &bp->ptrs[0]);
	return h;
}

/* The same of the keys a stream yields (opened already); fails on an error. */
static uint64_t stream_hash(struct bch_leaf_stream *ls, unsigned *nr)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	const struct bch_bkey *k;

	*nr = 0;
	while ((k = bch_leaf_stream_next(ls))) {
		h = hash_key(h, k);
		(*nr)++;
	}
	cr_assert_eq(ls->err, 0, "stream error %d", ls->err);
	return h;
}

static void flip_byte(uint64_t byte)
{
	FILE *f = fopen(paths[0], "r+b");
	unsigned char ch;

	cr_assert(f);
	cr_assert_eq(fseeko(f, (off_t)byte, SEEK_SET), 0);
	cr_assert_eq(fread(&ch, 1, 1, f), 1);
	ch ^= 0x5a;
	cr_assert_eq(fseeko(f, (off_t)byte, SEEK_SET), 0);
	cr_assert_eq(fwrite(&ch, 1, 1, f), 1);
	fclose(f);
}

/* The byte at off of copy i of leaf `leaf` (read in a filesystem opened first). */
static uint64_t leaf_byte(unsigned leaf, unsigned i, size_t off)
{
	struct bch_bkey *ptrs[LEAVES_MAX];
	struct bch_fs *c = testfs_must_open(paths, 1, TESTFS_RO);
	unsigned nr = leaf_ptrs(c, ptrs);
	const struct bch_btree_ptr *bp = bkey_val(ptrs[leaf]);
	uint64_t byte = ((uint64_t)bp->ptrs[i].offset << 9) + off;

	free_ptrs(ptrs, nr);
	cr_assert_eq(bch_fs_close(c), 0);
	return byte;
}

/* Every leaf streams, with the read path's keys; verified ahead when ahead. */
static void streams_same(unsigned replicas, bool ahead)
{
	struct bch_bkey *ptrs[LEAVES_MAX];
	struct bch_leaf_stream *ls = malloc(sizeof(*ls));
	unsigned keys = 0;

	cr_assert(ls);
	fill(replicas);
	struct bch_fs *c = testfs_must_open(paths, 1, TESTFS_RO | TESTFS_FSCK);
	unsigned nr = leaf_ptrs(c, ptrs);
	if (ahead)
		cr_assert_eq(bch_prefetch_start(c), 0);
	for (unsigned i = 0; i < nr; i++) {
		unsigned n, m;
		if (ahead) {
			bch_prefetch_verify(c, BCH_BTREE_ID_test, ptrs[i], replicas > 1);
			bch_prefetch_wait_idle(c);
		}
		cr_assert_eq(bch_leaf_stream_open(c, ls, BCH_BTREE_ID_test, ptrs[i], replicas > 1,
						  NULL, NULL), 0, "leaf %u does not stream", i);
		uint64_t h = stream_hash(ls, &n);
		cr_assert_eq(h, read_hash(c, ptrs[i], &m), "leaf %u: other keys streamed", i);
		cr_assert_eq(n, m, "leaf %u: %u keys streamed, %u read", i, n, m);
		keys += n;
	}
	cr_assert_eq(keys, KEYS);
	if (ahead) {
		cr_assert_eq(bch_prefetch_nr_taken(c), nr, "%u leaves, %u verified ahead", nr,
			     (unsigned)bch_prefetch_nr_taken(c));
		bch_prefetch_stop(c);
	}
	free_ptrs(ptrs, nr);
	free(ls);
	cr_assert_eq(bch_fs_close(c), 0);
	test_tmpdir_remove(tmpdir);
}

Test(fsck_stream, a_streamed_leaf_holds_what_the_read_path_reads)
{
	streams_same(1, false);
}

Test(fsck_stream, copies_compared_and_verified_ahead)
{
	streams_same(2, true);
}

/*
 * Leaf 1 of the filesystem on paths, opened: does it stream (compare: the
 * other copies too), without and with the read-ahead thread verifying it?
 * Both answers must agree; nothing is taken from the thread when it does not.
 */
static int opens(bool compare, bch_leaf_check_fn check, void *priv)
{
	struct bch_bkey *ptrs[LEAVES_MAX];
	struct bch_leaf_stream *ls = malloc(sizeof(*ls));

	cr_assert(ls);
	struct bch_fs *c = testfs_must_open(paths, 1, TESTFS_RO | TESTFS_FSCK);
	unsigned nr = leaf_ptrs(c, ptrs);
	int r = bch_leaf_stream_open(c, ls, BCH_BTREE_ID_test, ptrs[1], compare, check, priv);
	if (!check) {
		cr_assert_eq(bch_prefetch_start(c), 0);
		bch_prefetch_verify(c, BCH_BTREE_ID_test, ptrs[1], compare);
		bch_prefetch_wait_idle(c);
		int r2 = bch_leaf_stream_open(c, ls, BCH_BTREE_ID_test, ptrs[1], compare, NULL, NULL);
		cr_assert_eq(r2, r, "verified ahead: %d, not: %d", r2, r);
		cr_assert_eq(bch_prefetch_nr_taken(c), !r);
		bch_prefetch_stop(c);
	}
	free_ptrs(ptrs, nr);
	free(ls);
	cr_assert_eq(bch_fs_close(c), 0);
	return r;
}

Test(fsck_stream, a_damaged_leaf_does_not_stream)
{
	fill(1);
	cr_assert_eq(opens(false, NULL, NULL), 0);
	/* a byte of a key's value, in the leaf's last piece */
	flip_byte(leaf_byte(1, 0, sizeof(struct bch_btree_node) + 2 * (16 << 10) + 100));
	cr_assert_eq(opens(false, NULL, NULL), 1, "a leaf with a bad checksum streamed");
	test_tmpdir_remove(tmpdir);
}

Test(fsck_stream, a_leaf_whose_other_copy_differs_streams_only_uncompared)
{
	fill(2);
	flip_byte(leaf_byte(1, 1, sizeof(struct bch_btree_node) + 100));
	cr_assert_eq(opens(true, NULL, NULL), 1, "copies differ: streamed all the same");
	cr_assert_eq(opens(false, NULL, NULL), 0, "its first copy is good");
	test_tmpdir_remove(tmpdir);
}

/*
 * A leaf with an append (a key added, one changed, one deleted after it was
 * written whole) streams as the read path merges its bsets.
 */
Test(fsck_stream, a_leaf_with_an_append_streams_merged)
{
	struct bch_bkey *ptrs[LEAVES_MAX];
	struct bch_leaf_stream *ls = malloc(sizeof(*ls));

	cr_assert(ls);
	fill(1);
	struct bch_fs *c = testfs_must_open(paths, 1, 0);
	unsigned nr = leaf_ptrs(c, ptrs);
	struct bch_bpos lo = ((const struct bch_btree_ptr *)bkey_val(ptrs[1]))->min_key;
	struct btree_trans *t;
	bch_trans_init(c, &t);
	/* lo is a key of the leaf (keys are (1, i, 0)): changed; the next deleted; one added */
	struct bch_bkey *k = bch_bkey_alloc(BCH_BKEY_raw, lo, sizeof(struct bch_raw) + 8);
	((struct bch_raw *)bkey_val(k))->len = 8;
	bch_trans_update(t, BCH_BTREE_ID_test, k);
	free(k);
	k = bch_bkey_alloc(BCH_BKEY_deleted, POS(lo.inode, lo.offset + 1, 0), 0);
	bch_trans_update(t, BCH_BTREE_ID_test, k);
	free(k);
	k = bch_bkey_alloc(BCH_BKEY_raw, POS(lo.inode, lo.offset + 1, 7), sizeof(struct bch_raw) + 8);
	((struct bch_raw *)bkey_val(k))->len = 8;
	bch_trans_update(t, BCH_BTREE_ID_test, k);
	free(k);
	cr_assert_eq(bch_trans_commit(t, 0), 0, "%s", c->err_msg);
	bch_trans_exit(t);
	free_ptrs(ptrs, nr);
	cr_assert_eq(bch_fs_close(c), 0);

	c = testfs_must_open(paths, 1, TESTFS_RO | TESTFS_FSCK);
	nr = leaf_ptrs(c, ptrs);
	unsigned n, m;
	cr_assert_eq(bch_leaf_stream_open(c, ls, BCH_BTREE_ID_test, ptrs[1], false, NULL, NULL), 0,
		     "a leaf with an append does not stream");
	cr_assert_gt(ls->nr_bsets, 1, "the change was not appended (%u bset)", ls->nr_bsets);
	uint64_t h = stream_hash(ls, &n);
	cr_assert_eq(h, read_hash(c, ptrs[1], &m), "other keys streamed than the read path reads");
	cr_assert_eq(n, m, "%u keys streamed, %u read", n, m);
	/* after pass 3 (trusted: its bsets found from their headers), the same */
	unsigned bsets = ls->nr_bsets;
	c->fsck_copies_checked = true;
	cr_assert_eq(bch_leaf_stream_open(c, ls, BCH_BTREE_ID_test, ptrs[1], false, NULL, NULL), 0,
		     "a leaf with an append does not stream after pass 3");
	cr_assert_eq(ls->nr_bsets, bsets, "%u bsets found from the headers, %u verified",
		     ls->nr_bsets, bsets);
	cr_assert_eq(stream_hash(ls, &n), h, "after pass 3: other keys streamed");
	free_ptrs(ptrs, nr);
	free(ls);
	cr_assert_eq(bch_fs_close(c), 0);
	test_tmpdir_remove(tmpdir);
}

static uint64_t bytes_read(struct bch_fs *c)
{
	struct bch_dev_io_stats st;

	bch_dev_io_stats(c->devs[0]->bdev, &st);
	return st.read_bytes;
}

/*
 * After pass 3 verified every leaf (c->fsck_copies_checked, read-only), an
 * open that neither compares copies nor checks keys reads the headers
 * only, not the leaf (a first pass over it again); its keys are the read
 * path's all the same.
 */
Test(fsck_stream, after_pass_3_an_open_reads_only_the_headers)
{
	struct bch_bkey *ptrs[LEAVES_MAX];
	struct bch_leaf_stream *ls = malloc(sizeof(*ls));
	unsigned keys = 0;

	cr_assert(ls);
	fill(1);
	struct bch_fs *c = testfs_must_open(paths, 1, TESTFS_RO | TESTFS_FSCK);
	unsigned nr = leaf_ptrs(c, ptrs);
	c->fsck_copies_checked = true;	/* as pass 3 leaves it */
	for (unsigned i = 0; i < nr; i++) {
		unsigned n, m;
		uint64_t before = bytes_read(c);
		cr_assert_eq(bch_leaf_stream_open(c, ls, BCH_BTREE_ID_test, ptrs[i], false, NULL, NULL),
			     0, "leaf %u does not stream", i);
		uint64_t opened = bytes_read(c) - before;
		cr_assert_lt(opened, 1024, "leaf %u: its open read %" PRIu64 " bytes", i, opened);
		uint64_t h = stream_hash(ls, &n);
		cr_assert_eq(h, read_hash(c, ptrs[i], &m), "leaf %u: other keys streamed", i);
		cr_assert_eq(n, m, "leaf %u: %u keys streamed, %u read", i, n, m);
		keys += n;
	}
	cr_assert_eq(keys, KEYS);
	free_ptrs(ptrs, nr);
	free(ls);
	cr_assert_eq(bch_fs_close(c), 0);
	test_tmpdir_remove(tmpdir);
}

static int count_keys(void *priv, const struct bch_bkey *k)
{
	if (!k)
		return 0;	/* verified: the merged keys are not wanted */
	++*(unsigned *)priv;
	return 0;
}

/*
 * Pass 3's leaves checked on the read-ahead thread
 * (bch_prefetch_verify_check()): the open takes the verdict and what
 * check() counted there, and reads the keys only.
 */
Test(fsck_stream, a_check_made_ahead_is_taken_by_the_open)
{
	struct bch_bkey *ptrs[LEAVES_MAX];
	struct bch_leaf_stream *ls = malloc(sizeof(*ls));

	cr_assert(ls);
	fill(2);
	struct bch_fs *c = testfs_must_open(paths, 1, TESTFS_RO | TESTFS_FSCK);
	unsigned nr = leaf_ptrs(c, ptrs);
	cr_assert_eq(bch_prefetch_start(c), 0);
	for (unsigned i = 0; i < nr; i++) {
		unsigned seen = 0, n, m;
		bch_prefetch_verify_check(c, BCH_BTREE_ID_test, ptrs[i], true, count_keys, &seen,
					  sizeof(seen));
		bch_prefetch_wait_idle(c);
		uint64_t before = bytes_read(c);
		cr_assert_eq(bch_leaf_stream_open(c, ls, BCH_BTREE_ID_test, ptrs[i], true, count_keys,
						  &seen), 0, "leaf %u does not stream", i);
		cr_assert_eq(bytes_read(c), before, "leaf %u: read again by the open", i);
		cr_assert_eq(bch_prefetch_nr_taken(c), i + 1, "leaf %u: not checked ahead", i);
		uint64_t h = stream_hash(ls, &n);
		cr_assert_eq(seen, n, "leaf %u: %u keys checked ahead, %u streamed", i, seen, n);
		cr_assert_eq(h, read_hash(c, ptrs[i], &m), "leaf %u: other keys streamed", i);
	}
	bch_prefetch_stop(c);
	free_ptrs(ptrs, nr);
	free(ls);
	cr_assert_eq(bch_fs_close(c), 0);
	test_tmpdir_remove(tmpdir);
}

static int refuse_third(void *priv, const struct bch_bkey *k)
{
	if (!k)
		return 0;
	return ++*(unsigned *)priv == 3;
}

Test(fsck_stream, a_key_check_refuses_stops_the_stream)
{
	unsigned seen = 0;

	fill(1);
	cr_assert_eq(opens(false, refuse_third, &seen), 1);
	cr_assert_eq(seen, 3);
	test_tmpdir_remove(tmpdir);
}

/*
 * A read-only open that replays the journal keeps the replayed keys in
 * dirty nodes it never writes: the leaves on disk are not the btree then,
 * and nothing may stream (t19 found fsck -n reporting the user data's
 * replicas entry unused after a daemon was killed: the streamed extents
 * leaves missed the replayed extents).
 */
Test(fsck_stream, nothing_streams_while_replayed_keys_are_unwritten)
{
	fill(1);
	struct bch_fs *c = testfs_must_open(paths, 1, TESTFS_RO | TESTFS_FSCK);
	cr_assert(bch_leaf_stream_allowed(c), "a clean read-only open does not stream");
	cr_assert_eq(bch_fs_close(c), 0);

	/* one key changed in the journal only, then a crash */
	c = testfs_must_open(paths, 1, 0);
	struct btree_trans *t;
	bch_trans_init(c, &t);
	struct bch_bkey *k = bch_bkey_alloc(BCH_BKEY_raw, POS(1, KEYS / 2, 0), sizeof(struct bch_raw) + 8);
	((struct bch_raw *)bkey_val(k))->len = 8;
	bch_trans_update(t, BCH_BTREE_ID_test, k);
	free(k);
	cr_assert_eq(bch_trans_commit(t, BCH_TRANS_SYNC), 0, "%s", c->err_msg);
	bch_trans_exit(t);
	c->read_only = true;	/* nothing more written: as if killed */
	bch_fs_close(c);

	c = testfs_must_open(paths, 1, TESTFS_RO | TESTFS_FSCK);
	cr_assert_gt(c->journal_replayed, 0, "nothing was replayed");
	cr_assert_not(bch_leaf_stream_allowed(c), "leaves stream past replayed keys");
	bch_fs_close(c);
	test_tmpdir_remove(tmpdir);
}
