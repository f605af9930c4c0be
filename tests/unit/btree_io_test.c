// SPDX-License-Identifier: GPL-2.0
/*
 * btree_io_test.c - reading nodes: a leaf whose later appends its parent's
 * sectors_written hint does not know of (a crash before the parent was
 * written) is read whole (every key of every append), into an arena the size
 * of what the node holds (plus one block), not a doubling of the first read.
 * A bset that fails is damage (reported; another replica read) unless it is
 * a torn append whose keys the journal replays; the hint is exact after a
 * clean close.  A leaf of 1 MiB nodes past 512 KiB is read with a wide index.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bkey.h"
#include "btree.h"
#include "format.h"
#include "fs.h"
#include "super.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define NODE_BYTES	(64 << 10)
#define FILLER		600	/* keys first written: several leaves under a root */
#define APPENDS		6	/* open, insert, close cycles into one leaf */
#define PER_APPEND	8

static char tmpdir[64];
static char paths[2][TESTFS_PATH_MAX];
static unsigned nr_devs = 1;

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
	struct bch_fs *c = testfs_open(paths, nr_devs, flags, 0, err, sizeof(err));

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

/* ------------------------------------------------ damage, or a torn append */

/*
 * A leaf of inode 2's keys, grown by APPENDS appends; its address on device
 * dev (byte offset in the image) and the byte offsets, inside the node, of
 * every bset after the first.
 */
struct leaf_layout {
	uint64_t	byte;		/* the node's start in dN.img */
	size_t		bset[64];	/* offsets of the appended bsets */
	unsigned	nr;
};

static void leaf_layout(struct bch_fs *c, unsigned dev, struct leaf_layout *l)
{
	struct btree *leaf;
	size_t nb = (size_t)c->sb->btree_node_size << 9, bs = (size_t)c->sb->block_size << 9;

	cr_assert_eq(bch_btree_find_node(c, BCH_BTREE_ID_test, 0, POS(2, 0, 0), &leaf), 0);
	unsigned i;
	for (i = 0; i < leaf->nr_ptrs && leaf->ptrs[i].dev != dev; i++)
		;
	cr_assert_lt(i, leaf->nr_ptrs, "no copy of the leaf on device %u", dev);
	l->byte = (uint64_t)leaf->ptrs[i].offset << 9;
	bch_btree_node_put(c, leaf);

	FILE *f = fopen(paths[dev], "rb");
	char *n = malloc(nb);
	cr_assert(f && n);
	cr_assert_eq(fseeko(f, (off_t)l->byte, SEEK_SET), 0);
	cr_assert_eq(fread(n, 1, nb, f), nb);
	fclose(f);
	const struct bch_btree_node *h = (const void *)n;
	size_t off = (sizeof(*h) + (size_t)h->keys.u64s * 8 + bs - 1) / bs * bs;
	l->nr = 0;
	while (off + sizeof(struct bch_btree_node_entry) <= nb && l->nr < 64) {
		const struct bch_btree_node_entry *e = (const void *)(n + off);
		if (e->keys.seq != h->seq)
			break;
		l->bset[l->nr++] = off;
		off = (off + sizeof(*e) + (size_t)e->keys.u64s * 8 + bs - 1) / bs * bs;
	}
	free(n);
}

/* Flip a byte of the keys of a bset (past its 48-byte header) in dN.img. */
static void damage_bset(unsigned dev, uint64_t byte)
{
	FILE *f = fopen(paths[dev], "r+b");
	unsigned char ch;

	cr_assert(f);
	cr_assert_eq(fseeko(f, (off_t)byte + 60, SEEK_SET), 0);
	cr_assert_eq(fread(&ch, 1, 1, f), 1);
	ch ^= 0x5a;
	cr_assert_eq(fseeko(f, (off_t)byte + 60, SEEK_SET), 0);
	cr_assert_eq(fwrite(&ch, 1, 1, f), 1);
	fclose(f);
}

static void check_keys(struct bch_fs *c, unsigned nr)
{
	for (unsigned k = 0; k < nr; k++) {
		struct bch_bkey *found = NULL;
		cr_assert_eq(bch_btree_lookup(c, BCH_BTREE_ID_test, POS(2, k, 0), &found), 0,
			     "key 2:%u: %s", k, c->err_msg);
		const struct bch_raw *r = bkey_val(found);
		cr_assert_eq(r->data[199], 'a' + (2 * 7 + k) % 26, "key 2:%u: wrong value", k);
		free(found);
	}
}

static void grow_leaf(unsigned nr, unsigned replicas)
{
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "btio");
	nr_devs = nr;
	testfs_format(tmpdir, nr, 32, NODE_BYTES, replicas, paths);
	insert(1, 0, FILLER);
	for (unsigned a = 0; a < APPENDS; a++)
		insert(2, a * PER_APPEND, PER_APPEND);
}

/* A clean filesystem has no torn appends: a bad middle bset is damage, reported. */
Test(btree_io, damaged_middle_bset_is_damage_not_the_end_of_the_node)
{
	struct leaf_layout l;

	grow_leaf(1, 1);
	struct bch_fs *c = open_fs(TESTFS_RO);
	leaf_layout(c, 0, &l);
	bch_fs_close(c);
	cr_assert_geq(l.nr, 3, "only %u appends", l.nr);
	damage_bset(0, l.byte + l.bset[1]);

	c = open_fs(TESTFS_RO);
	struct bch_bkey *found = NULL;
	int r = bch_btree_lookup(c, BCH_BTREE_ID_test, POS(2, 0, 0), &found);
	cr_assert_neq(r, 0, "a damaged bset was taken for the end of the node");
	cr_assert(strstr(c->err_msg, "bset at sector") && strstr(c->err_msg, "bad checksum"),
		  "message: %s", c->err_msg);
	bch_fs_close(c);
	test_tmpdir_remove(tmpdir);
}

/* With two copies, damage to one is a bad replica: every key is read from the other. */
Test(btree_io, damaged_bset_on_one_device_is_read_from_the_other)
{
	struct leaf_layout l;

	grow_leaf(2, 2);
	struct bch_fs *c = open_fs(TESTFS_RO);
	leaf_layout(c, 0, &l);
	bch_fs_close(c);
	cr_assert_geq(l.nr, 3);
	damage_bset(0, l.byte + l.bset[l.nr - 1]);	/* the newest append */

	c = open_fs(TESTFS_RO);
	check_keys(c, APPENDS * PER_APPEND);
	bch_fs_close(c);

	c = open_fs(TESTFS_RO | TESTFS_FSCK);
	struct btree *leaf;
	cr_assert_eq(bch_btree_find_node(c, BCH_BTREE_ID_test, 0, POS(2, 0, 0), &leaf), 0);
	cr_assert_neq(leaf->bad_replicas, 0, "fsck was not told of the bad copy");
	bch_btree_node_put(c, leaf);
	bch_fs_close(c);
	test_tmpdir_remove(tmpdir);
}

/*
 * Append inode 2's leaf alone: its parent learns the new size in memory
 * only, so an image copied now has a parent whose hint is short of the leaf.
 */
static void write_leaf_only(struct bch_fs *c)
{
	struct btree *leaf;

	cr_assert_eq(bch_btree_find_node(c, BCH_BTREE_ID_test, 0, POS(2, 0, 0), &leaf), 0);
	int r = bch_btree_node_write(c, leaf);
	cr_assert_geq(r, 0, "%s", c->err_msg);
	if (r == 0)
		bch_btree_node_put(c, leaf);
}

/*
 * Leave d0.img as a crash would: appends of inode 2's leaf written, the
 * filesystem not closed.  With advance, a later entry moved the journal's
 * last_seq past the append's keys (so the journal no longer holds them).
 */
static void crash_after_append(bool advance, struct leaf_layout *l)
{
	char saved[TESTFS_PATH_MAX + 8];

	grow_leaf(1, 1);
	struct bch_fs *c = open_fs(0);
	struct btree_trans *t;
	bch_trans_init(c, &t);
	for (unsigned i = 0; i < PER_APPEND; i++) {
		put_key(t, 2, APPENDS * PER_APPEND + i);
		cr_assert_eq(bch_trans_commit(t, BCH_TRANS_SYNC), 0, "%s", c->err_msg);
	}
	write_leaf_only(c);
	if (advance) {
		put_key(t, 1, FILLER);	/* another leaf: a newer entry, a newer last_seq */
		cr_assert_eq(bch_trans_commit(t, BCH_TRANS_SYNC), 0, "%s", c->err_msg);
	}
	bch_trans_exit(t);
	leaf_layout(c, 0, l);
	snprintf(saved, sizeof(saved), "%s.crash", paths[0]);
	testfs_copy_file(paths[0], saved);
	bch_fs_close(c);
	testfs_copy_file(saved, paths[0]);
	remove(saved);
}

/* A torn append whose keys the journal replays is forgiven, and rewritten away. */
Test(btree_io, torn_append_is_replayed_and_rewritten)
{
	struct leaf_layout l;

	crash_after_append(false, &l);
	damage_bset(0, l.byte + l.bset[l.nr - 1]);	/* as if the write was cut */

	struct bch_fs *c = open_fs(0);
	check_keys(c, (APPENDS + 1) * PER_APPEND);
	cr_assert_eq(bch_fs_close(c), 0);

	c = open_fs(TESTFS_RO | TESTFS_FSCK);	/* clean now: nothing is forgiven */
	check_keys(c, (APPENDS + 1) * PER_APPEND);
	struct leaf_layout after;
	leaf_layout(c, 0, &after);
	cr_assert_neq(after.byte, l.byte, "the node with the torn bytes is still in use");
	bch_fs_close(c);
	test_tmpdir_remove(tmpdir);
}

/* The same damage once the journal has moved past the keys: damage, reported. */
Test(btree_io, bad_last_bset_whose_keys_left_the_journal_is_damage)
{
	struct leaf_layout l;
	char err[600];

	crash_after_append(true, &l);
	damage_bset(0, l.byte + l.bset[l.nr - 1]);

	struct bch_fs *c = testfs_open(paths, 1, TESTFS_RO, 0, err, sizeof(err));
	if (c) {
		struct bch_bkey *found = NULL;
		int r = bch_btree_lookup(c, BCH_BTREE_ID_test, POS(2, 0, 0), &found);
		cr_assert_neq(r, 0, "the keys of a damaged bset were dropped silently");
		snprintf(err, sizeof(err), "%s", c->err_msg);
		free(found);
		bch_fs_close(c);
	}
	cr_assert(strstr(err, "bset at sector"), "message: %s", err);
	test_tmpdir_remove(tmpdir);
}

Test(btree_io, appends_past_the_hint_read_whole_into_a_fitting_arena)
{
	struct leaf_layout l;

	/* the last leaf (inode 2 sorts after the filler) grows by appends; the
	 * last one is written, its parent is not: the hint is short */
	crash_after_append(false, &l);

	struct bch_fs *c = open_fs(TESTFS_RO);
	struct btree *leaf, *parent;
	cr_assert_eq(bch_btree_find_node(c, BCH_BTREE_ID_test, 0, POS(2, 0, 0), &leaf), 0);
	cr_assert_eq(bch_btree_find_node(c, BCH_BTREE_ID_test, 1, POS(2, 0, 0), &parent), 0,
		     "the filler should make a tree of two levels");
	int i = bch_btree_node_find(parent, POS(2, 0, 0));
	cr_assert(i >= 0 && (unsigned)i < parent->nr);
	const struct bch_btree_ptr *bp = bkey_val(bch_btree_interior_key(parent, i));
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
	for (unsigned k = 0; k < (APPENDS + 1) * PER_APPEND; k++) {
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

/* After a clean close every pointer knows how much of its child is written. */
Test(btree_io, hint_covers_every_append_after_a_clean_close)
{
	grow_leaf(1, 1);
	struct bch_fs *c = open_fs(TESTFS_RO);
	struct btree *leaf, *parent;
	cr_assert_eq(bch_btree_find_node(c, BCH_BTREE_ID_test, 0, POS(2, 0, 0), &leaf), 0);
	cr_assert_eq(bch_btree_find_node(c, BCH_BTREE_ID_test, 1, POS(2, 0, 0), &parent), 0);
	int i = bch_btree_node_find(parent, POS(2, 0, 0));
	const struct bch_btree_ptr *bp = bkey_val(bch_btree_interior_key(parent, i));
	cr_assert_eq(bp->sectors_written, leaf->sectors_written, "hint %u, leaf %u",
		     bp->sectors_written, leaf->sectors_written);
	bch_btree_node_put(c, parent);
	bch_btree_node_put(c, leaf);
	bch_fs_close(c);
	test_tmpdir_remove(tmpdir);
}

/*
 * A node's index takes 16-bit offsets while its arena is at most 512 KiB: a
 * leaf of 1 MiB nodes holding more (read back whole after a close, keys
 * placed where they lie) widens them to 32 bits, and every key is found
 * with its own value, by lookup and in a scan.
 */
Test(btree_io, a_leaf_past_512k_is_read_with_a_wide_index)
{
	enum { BIG_NODE = 1 << 20, NR = 2600 };	/* 248 bytes a key: 630 KiB in one leaf */

	struct bch_format_dev d = { 0 };
	struct bch_format_args args = { 0 };
	struct bch_opts o;
	char err[256];

	test_tmpdir_make(tmpdir, sizeof(tmpdir), "btio");
	nr_devs = 1;
	snprintf(paths[0], TESTFS_PATH_MAX, "%s/d0.img", tmpdir);
	d.path = paths[0];
	d.size = 128 << 20;
	d.bucket_size = BIG_NODE;	/* (testfs_format()'s 64 KiB buckets take no 1 MiB node) */
	d.durability = 1;
	bch_opts_default(&o);
	bch_opt_set(&o, Opt_btree_node_size, BIG_NODE);
	bch_opt_set(&o, Opt_metadata_replicas, 1);
	cr_assert_eq(bch_format(&d, 1, &o, NULL, &args, err, sizeof(err)), 0, "format: %s", err);
	insert(2, 0, NR);

	struct bch_fs *c = open_fs(TESTFS_RO);
	struct btree *leaf;
	cr_assert_eq(bch_btree_find_node(c, BCH_BTREE_ID_test, 0, POS(2, 0, 0), &leaf), 0);
	cr_assert_eq(leaf->nr, NR, "one leaf should hold every key (%u)", leaf->nr);
	cr_assert_gt(leaf->arena_bytes, 512U << 10, "arena %zu bytes", leaf->arena_bytes);
	cr_assert(leaf->index_wide);
	bch_btree_node_put(c, leaf);
	check_keys(c, NR);

	struct btree_iter it;
	const struct bch_bkey *k;
	unsigned seen = 0;
	int ierr;
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_test, POS(2, 0, 0), POS(2, UINT64_MAX, 0));
	while ((k = bch_btree_iter_next(&it, &ierr))) {
		const struct bch_raw *r = bkey_val(k);
		cr_assert_eq(k->p.offset, seen, "scan: key %u at %llu", seen,
			     (unsigned long long)k->p.offset);
		cr_assert_eq(r->data[199], 'a' + (2 * 7 + seen) % 26, "scan: key %u's value", seen);
		seen++;
	}
	bch_btree_iter_exit(&it);
	cr_assert_eq(ierr, 0);
	cr_assert_eq(seen, NR);
	bch_fs_close(c);
	test_tmpdir_remove(tmpdir);
}

/*
 * Appends: keys inserted in order split each leaf near its end (append_split()
 * in btree_update.c: the changed keys are the leaf's last ones, their bits
 * the top of kdirty), so every leaf left behind keeps 15/16 of the split
 * threshold (3/4 of a node): ~70% full, not the ~37% of halves.
 */
static int leaf_fill(struct bch_fs *c, struct btree *b, void *priv)
{
	unsigned *fills = priv;

	if (!b->level && fills[0] < 255)
		fills[1 + fills[0]++] = (unsigned)(b->u64s * 8 * 100 /
						   ((size_t)c->sb->btree_node_size << 9));
	return 0;
}

Test(btree_io, keys_in_order_leave_full_leaves)
{
	enum { NR = 3000, TXN = 50 };	/* 248 bytes a key: ~11 leaves of 64 KiB */
	unsigned fills[256] = { 0 };

	test_tmpdir_make(tmpdir, sizeof(tmpdir), "btio");
	nr_devs = 1;
	testfs_format(tmpdir, 1, 32, NODE_BYTES, 1, paths);
	struct bch_fs *c = open_fs(0);
	struct btree_trans *t;
	bch_trans_init(c, &t);
	for (unsigned i = 0; i < NR; i++) {
		put_key(t, 3, i);
		if ((i + 1) % TXN == 0)
			cr_assert_eq(bch_trans_commit(t, 0), 0, "%s", c->err_msg);
	}
	bch_trans_exit(t);
	cr_assert_eq(bch_btree_walk_nodes(c, BCH_BTREE_ID_test, leaf_fill, fills), 0);
	cr_assert_geq(fills[0], 5, "%u leaves", fills[0]);
	for (unsigned i = 1; i <= fills[0]; i++)
		printf("btree_io/keys_in_order_leave_full_leaves: leaf %u: %u%%\n", i, fills[i]);
	/*
	 * every leaf but the first (the first split, of a leaf all of whose
	 * keys are new, takes halves) and the last (where the appends go on)
	 */
	for (unsigned i = 2; i < fills[0]; i++)
		cr_assert_geq(fills[i], 60, "leaf %u of %u only %u%% full", i, fills[0], fills[i]);
	check_keys(c, 0);
	bch_fs_close(c);
	test_tmpdir_remove(tmpdir);
}
