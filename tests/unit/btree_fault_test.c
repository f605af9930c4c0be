// SPDX-License-Identifier: GPL-2.0
/*
 * btree_fault_test.c - damaged btree nodes: with metadata replicas 2 a bad
 * checksum or an unreadable copy on one device is survived (the other
 * replica is read); with both copies bad, or with one replica, it is a clear
 * error naming btree, level and node, never a crash.  Read-only opens of
 * damaged filesystems write nothing.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bkey.h"
#include "blockdev.h"
#include "btree.h"
#include "errcode.h"
#include "format.h"
#include "fs.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

static char tmpdir[64];
static char paths[2][TESTFS_PATH_MAX];

static void make_fs(unsigned nr)
{
	char err[256];

	test_tmpdir_make(tmpdir, sizeof(tmpdir), "btfault");
	testfs_format(tmpdir, nr, 16, 4096, nr, paths);
	struct bch_fs *c = testfs_open(paths, nr, 0, 0, err, sizeof(err));
	cr_assert(c, "%s", err);
	struct btree_trans *t;
	bch_trans_init(c, &t);
	for (unsigned i = 0; i < 500; i++) {
		struct bch_bkey *k = bch_bkey_alloc(BCH_BKEY_raw, POS(3, i, 0), sizeof(struct bch_raw) + 16);
		struct bch_raw *r = bkey_val(k);
		r->len = 16;
		memset(r->data, 'a' + i % 26, 16);
		bch_trans_update(t, BCH_BTREE_ID_test, k);
		free(k);
		cr_assert_eq(bch_trans_commit(t, 0), 0, "%s", c->err_msg);
	}
	bch_trans_exit(t);
	cr_assert_eq(bch_fs_close(c), 0);
}

/* The first leaf of the test btree: where its replicas are. */
static struct btree_leaf { unsigned nr; struct bch_extent_ptr ptrs[4]; } leaf;

static int find_leaf(struct bch_fs *c, struct btree *b, void *priv)
{
	(void)c;
	(void)priv;
	if (!b->level && !leaf.nr) {
		leaf.nr = b->nr_ptrs;
		memcpy(leaf.ptrs, b->ptrs, sizeof(leaf.ptrs));
	}
	return 0;
}

static struct bch_fs *open_ro(unsigned nr, char *err)
{
	return testfs_open(paths, nr, TESTFS_RO, 0, err, 256);
}

static void smash(unsigned replica, unsigned byte)
{
	struct bch_blockdev *bd;
	unsigned char junk[64];

	memset(junk, 0xa5, sizeof(junk));
	cr_assert_eq(bch_dev_open(paths[leaf.ptrs[replica].dev], 0, &bd), 0);
	cr_assert_eq(bch_dev_write(bd, junk, sizeof(junk), leaf.ptrs[replica].offset * 512 + byte), 0);
	bch_dev_close(bd);
}

static unsigned count_keys(struct bch_fs *c, int *err)
{
	struct bch_bpos p = POS_MIN;
	unsigned n = 0;

	for (;;) {
		struct bch_bkey *k;
		int r = bch_btree_peek(c, BCH_BTREE_ID_test, p, POS_MAX, &k);
		if (r) {
			*err = r == -BCH_ERR_key_not_found ? 0 : r;
			return n;
		}
		n++;
		p = bpos_successor(k->p);
		free(k);
	}
}

/*
 * With every copy of a leaf bad, opening (which visits every node to rebuild
 * bucket state) or reading fails with an error naming the node.
 */
static void expect_node_error(unsigned nr, const char *what)
{
	char err[256];
	int e;
	struct bch_fs *c = open_ro(nr, err);

	if (!c) {
		cr_assert(strstr(err, what), "open: %s", err);
		return;
	}
	count_keys(c, &e);
	cr_assert_eq(e, -BCH_ERR_btree_node_bad, "got %d", e);
	cr_assert(strstr(c->err_msg, what), "%s", c->err_msg);
	bch_fs_close(c);
}

Test(btree_fault, replica_survives_bad_copy)
{
	char err[256];
	int e;

	make_fs(2);
	struct bch_fs *c = open_ro(2, err);
	cr_assert(c, "%s", err);
	memset(&leaf, 0, sizeof(leaf));
	bch_btree_walk_nodes(c, BCH_BTREE_ID_test, find_leaf, NULL);
	bch_fs_close(c);
	cr_assert_eq(leaf.nr, 2, "metadata replicas 2 gave %u pointers", leaf.nr);
	cr_assert_neq(leaf.ptrs[0].dev, leaf.ptrs[1].dev);

	/* a bad checksum in the first replica: the second serves */
	smash(0, 200);
	c = open_ro(2, err);
	cr_assert(c, "%s", err);
	cr_assert_eq(count_keys(c, &e), 500);
	cr_assert_eq(e, 0, "%d %s (leaf at %u:%llu and %u:%llu)", e, c->err_msg, leaf.ptrs[0].dev, (unsigned long long)leaf.ptrs[0].offset, leaf.ptrs[1].dev, (unsigned long long)leaf.ptrs[1].offset);
	bch_fs_close(c);

	/* both bad: an error naming the node, no crash */
	smash(1, 300);
	expect_node_error(2, "test btree level 0 node at");
	test_tmpdir_remove(tmpdir);
}

Test(btree_fault, single_replica_clear_error)
{
	char err[256];

	make_fs(1);
	struct bch_fs *c = open_ro(1, err);
	cr_assert(c, "%s", err);
	memset(&leaf, 0, sizeof(leaf));
	bch_btree_walk_nodes(c, BCH_BTREE_ID_test, find_leaf, NULL);
	bch_fs_close(c);

	smash(0, 100);
	FILE *f = fopen(paths[0], "rb");
	char *before = malloc(16 << 20), *after = malloc(16 << 20);
	cr_assert(fread(before, 1, 16 << 20, f) == 16 << 20);
	fclose(f);
	expect_node_error(1, "test btree level 0 node at 0:");
	f = fopen(paths[0], "rb");
	cr_assert(fread(after, 1, 16 << 20, f) == 16 << 20);
	fclose(f);
	cr_assert_eq(memcmp(before, after, 16 << 20), 0, "read-only open wrote to the device");
	free(before);
	free(after);
	test_tmpdir_remove(tmpdir);
}
