// SPDX-License-Identifier: GPL-2.0
/*
 * btree_cache_scan_test.c - what the node cache keeps for a long scan
 * (fsck -n's memory): an interior node appended to over its life is read
 * into an arena of its live keys only (the same keys, in order), and
 * bch_btree_cache_evict_unused() leaves exactly the nodes still held;
 * the arena an interior node was read into goes back to the system once
 * its live keys are packed, not kept beside them as the spare.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bkey.h"
#include "btree.h"
#include "fs.h"
#include "tests/lib/testfs.h"

#define KEYS	3000	/* 200-byte keys in 64 KiB nodes: a root over many leaves */

static struct testfs_one t;

/* Keys committed a few at a time: the root gets a bset per few splits. */
static void fill(void)
{
	struct btree_trans *tr;

	testfs_one_up(&t, "btree_cache_scan", 64);
	bch_trans_init(t.c, &tr);
	for (unsigned i = 0; i < KEYS; i++) {
		struct bch_bkey *k = bch_bkey_alloc(BCH_BKEY_raw, POS(1, i, 0),
						    sizeof(struct bch_raw) + 200);
		struct bch_raw *r = bkey_val(k);
		r->len = 200;
		memset(r->data, 'a' + i % 26, 200);
		bch_trans_update(tr, BCH_BTREE_ID_test, k);
		free(k);
		if (i % 16 == 15)
			cr_assert_eq(bch_trans_commit(tr, 0), 0, "%s", t.c->err_msg);
	}
	cr_assert_eq(bch_trans_commit(tr, 0), 0, "%s", t.c->err_msg);
	bch_trans_exit(tr);
	cr_assert_eq(bch_fs_close(t.c), 0);
	char err[256];
	t.c = testfs_open(t.paths, 1, TESTFS_RO | TESTFS_FSCK, 0, err, sizeof(err));
	cr_assert(t.c, "open: %s", err);
}

static void fini(void)
{
	testfs_one_down(&t);
}

/* The root as read: its arena holds its live keys and little else; they tile its range. */
Test(btree_cache_scan, an_interior_node_keeps_only_its_live_keys, .fini = fini)
{
	struct btree *root;

	fill();
	cr_assert_eq(t.c->roots->r[BCH_BTREE_ID_test].level, 1, "the test tree is not two levels");
	cr_assert_eq(bch_btree_find_node(t.c, BCH_BTREE_ID_test, 1, POS_MIN, &root), 0, "%s",
		     t.c->err_msg);
	cr_assert_gt((size_t)root->sectors_written << 9, root->u64s * 8 / 3 * 4,
		     "the root's bsets are not a quarter dead (%u sectors for %zu live bytes): "
		     "nothing to show", root->sectors_written, root->u64s * 8);
	cr_assert_leq(root->arena_bytes, root->u64s * 8 / 3 * 4,
		      "the root keeps %zu bytes for %zu of live keys", root->arena_bytes,
		      root->u64s * 8);
	struct bch_bpos next = root->min_key;
	for (unsigned i = 0; i < root->nr; i++) {
		const struct bch_btree_ptr *bp = bkey_val(bch_btree_interior_key(root, i));
		cr_assert(bpos_eq(bp->min_key, next), "child %u does not start where %u ends", i, i - 1);
		cr_assert((char *)bch_btree_interior_key(root, i) >= (char *)root->arena &&
			  (char *)bch_btree_interior_key(root, i) < (char *)root->arena + root->arena_bytes,
			  "key %u outside the arena", i);
		next = bpos_successor(bch_btree_key_pos(root, i));
	}
	cr_assert(bpos_eq(bch_btree_key_pos(root, root->nr - 1), root->max_key));
	/* every leaf under it reads, and holds every key */
	unsigned keys = 0;
	for (unsigned i = 0; i < root->nr; i++) {
		struct btree *b;
		cr_assert_eq(bch_btree_node_get(t.c, BCH_BTREE_ID_test, 0, bch_btree_interior_key(root, i), &b), 0, "%s",
			     t.c->err_msg);
		keys += b->nr;
		bch_btree_node_put(t.c, b);
	}
	cr_assert_eq(keys, KEYS);
	bch_btree_node_put(t.c, root);
}

/* Leaves read and let go, one held: only the held one stays. */
Test(btree_cache_scan, evict_unused_leaves_what_is_held, .fini = fini)
{
	struct btree *root, *b;
	struct btree_hold h = { 0 };

	fill();
	cr_assert_eq(bch_btree_find_node(t.c, BCH_BTREE_ID_test, 1, POS_MIN, &root), 0, "%s",
		     t.c->err_msg);
	cr_assert_geq(root->nr, 4);
	for (unsigned i = 0; i < 3; i++) {
		cr_assert_eq(bch_btree_node_get(t.c, BCH_BTREE_ID_test, 0, bch_btree_interior_key(root, i), &b), 0);
		bch_btree_node_put(t.c, b);
	}
	cr_assert_eq(bch_btree_node_get(t.c, BCH_BTREE_ID_test, 0, bch_btree_interior_key(root, 3), &b), 0);
	bch_btree_hold(t.c, &h, b);
	bch_btree_node_put(t.c, root);
	cr_assert_gt(bch_btree_cache_bytes(t.c), bch_btree_node_bytes(b), "nothing else cached");
	bch_btree_cache_evict_unused(t.c);
	cr_assert(bch_btree_hold_valid(&h), "the held leaf went");
	cr_assert_eq(bch_btree_cache_bytes(t.c), bch_btree_node_bytes(b),
		     "%zu bytes cached, the held leaf is %zu", bch_btree_cache_bytes(t.c),
		     bch_btree_node_bytes(b));
	bch_btree_unhold(t.c, &h);
}

/*
 * An interior node packed whole (as after its read): the arena its keys
 * lay in is unmapped.  Kept as the spare arena it stayed resident beside
 * the packed copy (fsck -n of 1M files: the inodes root's 184 KiB through
 * most of pass 5).  Under ASan arenas come from malloc unless a test asks
 * for the mappings (bch_node_arenas_mapped()), as this one does.
 */
Test(btree_cache_scan, a_packed_interior_node_gives_its_old_arena_back)
{
	bch_node_arenas_mapped();
	struct btree *in = calloc(1, sizeof(*in));
	unsigned char vec;

	cr_assert(in);
	in->level = 1;
	in->min_key = POS_MIN;
	in->max_key = POS_MAX;
	for (unsigned i = 0; i < 2000; i++) {
		struct bch_bkey *k = bch_bkey_alloc(BCH_BKEY_raw, POS(5, i, 0), sizeof(struct bch_raw) + 24);
		struct bch_raw *r = bkey_val(k);
		r->len = 24;
		memset(r->data, i, 24);
		bch_btree_node_insert_key(in, k);
		free(k);
	}
	cr_assert_geq(in->arena_bytes, 64 << 10, "the arena is %zu bytes: not a mapping of its own",
		      in->arena_bytes);
	void *old = in->arena;
	bch_btree_node_pack_keys(in);
	cr_assert_neq(in->arena, old, "packed in place");
	errno = 0;
	cr_assert_eq(mincore(old, (size_t)sysconf(_SC_PAGESIZE), &vec), -1,
		     "the old arena is still mapped (kept as the spare)");
	cr_assert_eq(errno, ENOMEM);
	cr_assert_eq(in->nr, 2000);
	for (unsigned i = 0; i < in->nr; i++)
		cr_assert(bpos_eq(bch_btree_key_pos(in, i), POS(5, i, 0)), "key %u moved", i);
	bch_btree_node_free_keys(in);
	bch_btree_node_free_index(in);
	free(in);
}
