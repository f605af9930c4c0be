// SPDX-License-Identifier: GPL-2.0
/*
 * btree_io_test.c - reading nodes: a leaf whose later appends its parent's
 * sectors_written hint does not know of is read whole (every key of every
 * append), into an arena the size of what the node holds (plus one block),
 * not a doubling of the first read.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bkey.h"
#include "btree.h"
#include "fs.h"
#include "super.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define NODE_BYTES	(64 << 10)
#define FILLER		600	/* keys first written: several leaves under a root */
#define APPENDS		6	/* open, insert, close cycles into one leaf */
#define PER_APPEND	8

static char tmpdir[64];
static char paths[1][TESTFS_PATH_MAX];

static void put_key(struct btree_trans *t, unsigned inode, unsigned offset)
{
	struct bch_bkey *k = bch_bkey_alloc(BCH_BKEY_raw, POS(inode, offset, 0),
					    sizeof(struct bch_raw) + 200);
	struct bch_raw *r = bkey_val(k);

	r->len = 200;
	memset(r->data, 'a' + (inode * 7 + offset) % 26, 200);
	bch_trans_update(t, BCH_BTREE_ID_test, k);
	free(k);
}

static struct bch_fs *open_fs(unsigned flags)
{
	char err[256];
	struct bch_fs *c = testfs_open(paths, 1, flags, 0, err, sizeof(err));

	cr_assert(c, "open: %s", err);
	return c;
}

static void insert(unsigned inode, unsigned from, unsigned nr)
{
	struct bch_fs *c = open_fs(0);
	struct btree_trans *t;

	bch_trans_init(c, &t);
	for (unsigned i = from; i < from + nr; i++) {
		put_key(t, inode, i);
		cr_assert_eq(bch_trans_commit(t, 0), 0, "%s", c->err_msg);
	}
	bch_trans_exit(t);
	cr_assert_eq(bch_fs_close(c), 0);	/* writes the leaf: an append */
}

Test(btree_io, appends_past_the_hint_read_whole_into_a_fitting_arena)
{
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "btio");
	testfs_format(tmpdir, 1, 32, NODE_BYTES, 1, paths);
	insert(1, 0, FILLER);
	/* the last leaf (inode 2 sorts after the filler) grows by appends */
	for (unsigned a = 0; a < APPENDS; a++)
		insert(2, a * PER_APPEND, PER_APPEND);

	struct bch_fs *c = open_fs(TESTFS_RO);
	struct btree *leaf, *parent;
	cr_assert_eq(bch_btree_find_node(c, BCH_BTREE_ID_test, 0, POS(2, 0, 0), &leaf), 0);
	cr_assert_eq(bch_btree_find_node(c, BCH_BTREE_ID_test, 1, POS(2, 0, 0), &parent), 0,
		     "the filler should make a tree of two levels");
	int i = bch_btree_node_find(parent, POS(2, 0, 0));
	cr_assert(i >= 0 && (unsigned)i < parent->nr);
	const struct bch_btree_ptr *bp = bkey_val(parent->keys[i]);
	size_t block = (size_t)c->sb->block_size << 9, used = (size_t)leaf->sectors_written << 9;

	/* the case under test: the hint is short of what the leaf holds */
	cr_assert_lt(bp->sectors_written, leaf->sectors_written,
		     "hint %u sectors, leaf %u: no append past the hint", bp->sectors_written,
		     leaf->sectors_written);
	cr_assert_leq(leaf->arena_bytes, used + block, "arena %zu bytes for %zu used (hint %u)",
		      leaf->arena_bytes, used, bp->sectors_written);
	bch_btree_node_put(c, parent);
	bch_btree_node_put(c, leaf);

	/* every key of every append is there */
	for (unsigned k = 0; k < APPENDS * PER_APPEND; k++) {
		struct bch_bkey *found = NULL;
		cr_assert_eq(bch_btree_lookup(c, BCH_BTREE_ID_test, POS(2, k, 0), &found), 0,
			     "key 2:%u missing", k);
		const struct bch_raw *r = bkey_val(found);
		cr_assert_eq(r->len, 200);
		cr_assert_eq(r->data[199], 'a' + (2 * 7 + k) % 26);
		free(found);
	}
	bch_fs_close(c);
	test_tmpdir_remove(tmpdir);
}
