// SPDX-License-Identifier: GPL-2.0
/*
 * fsck_pass3_test.c - what fsck -n's pass 3 takes of a streamed leaf in
 * its first pass over the leaf's bytes (fsck_btree.c), instead of reading
 * the leaf again: the live keys and directories of inodes leaves whose
 * later bsets update earlier ones (they size pass 5's tables), and the
 * bucket counts of the extents leaves' pointers.  Both must be what a
 * merged read of every leaf and the open's own count say, with the
 * read-ahead thread checking leaves or not.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "btree.h"
#include "btree_prefetch.h"
#include "fs.h"
#include "fs_ops.h"
#include "fsck.h"
#include "opts.h"
#include "super.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define FILES		1500
#define DIRS		40

static char tmpdir[64];
static char paths[1][TESTFS_PATH_MAX];

/*
 * Files and directories written and flushed (each leaf's first bset), then
 * every file's inode changed, some removed, and flushed again: the inodes
 * leaves get a bset that updates (and deletes) keys of the first.
 */
static void build(void)
{
	char name[32], data[300];
	uint64_t inum;

	test_tmpdir_make(tmpdir, sizeof(tmpdir), "fsck_pass3");
	testfs_format(tmpdir, 1, 64, 64 << 10, 1, paths);
	struct bch_fs *c = testfs_must_open(paths, 1, 0);
	for (unsigned i = 0; i < DIRS; i++) {
		snprintf(name, sizeof(name), "d%u", i);
		cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, name, S_IFDIR | 0755, 0, 0, 0, &inum), 0,
			     "%s", c->err_msg);
	}
	memset(data, 'x', sizeof(data));
	for (unsigned i = 0; i < FILES; i++) {
		snprintf(name, sizeof(name), "f%u", i);
		cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &inum), 0,
			     "%s", c->err_msg);
		cr_assert_eq(bch_fs_write(c, inum, 0, data, 1 + i % sizeof(data)), (ssize_t)(1 + i % sizeof(data)),
			     "%s", c->err_msg);
	}
	cr_assert_eq(bch_btree_flush_all(c), 0, "%s", c->err_msg);
	for (unsigned i = 0; i < FILES; i++) {
		snprintf(name, sizeof(name), "f%u", i);
		if (i % 7 == 3) {
			cr_assert_eq(bch_fs_unlink(c, BCH_ROOT_INO, name), 0, "%s", c->err_msg);
			continue;
		}
		struct bch_setattr sa = { .valid = BCH_SETATTR_MODE, .mode = 0600 };
		cr_assert_eq(bch_fs_lookup(c, BCH_ROOT_INO, name, &inum), 0, "%s", c->err_msg);
		cr_assert_eq(bch_fs_setattr(c, inum, &sa), 0, "%s", c->err_msg);
	}
	cr_assert_eq(bch_fs_close(c), 0);
}

/* Live inode keys and directories, as the read path (merged) sees them. */
static void count_inodes(struct bch_fs *c, uint64_t *keys, uint64_t *dirs)
{
	struct btree_iter it;
	const struct bch_bkey *k;
	int err = 0;

	*keys = *dirs = 0;
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_inodes, POS_MIN, POS_MAX);
	while ((k = bch_btree_iter_next(&it, &err))) {
		if (k->type != BCH_BKEY_deleted) {
			++*keys;
			*dirs += k->type == BCH_BKEY_inode &&
				 S_ISDIR(((const struct bch_inode *)bkey_val(k))->mode);
		}
	}
	cr_assert_eq(err, 0, "%s", c->err_msg);
	bch_btree_iter_exit(&it);
}

/*
 * fsck -n's pass 3 as cmd_fsck runs it (read-only, buckets counted by the
 * pass, read-ahead thread when ahead): its counts and every bucket's
 * state against the merged read and an open that counts them itself.
 */
static void pass3_takes_what_a_second_read_would(bool ahead)
{
	build();
	struct bch_fs *c = testfs_must_open(paths, 1, TESTFS_FSCK | TESTFS_RO);
	uint64_t keys, dirs, nb = bch_alloc_nbuckets(c, 0);
	count_inodes(c, &keys, &dirs);
	cr_assert_geq(dirs, DIRS + 1);
	/* (superblock and journal buckets: none) */
	struct bch_bucket_state *want = calloc(nb, sizeof(*want));
	bool *have = calloc(nb, sizeof(*have));
	uint64_t user = 0;
	for (uint64_t b = 0; b < nb; b++) {
		have[b] = bch_alloc_bucket_get(c, 0, b, &want[b]);
		user += have[b] && want[b].data_type == BCH_DATA_user;
	}
	cr_assert_geq(user, 4, "only %lu buckets of data", (unsigned long)user);
	cr_assert_eq(bch_fs_close(c), 0);

	struct bch_opts o = { 0 };
	char err[256], *p = paths[0];
	bch_opt_set(&o, Opt_fsck, 1);
	bch_opt_set(&o, Opt_read_only, 1);
	bch_opt_set(&o, Opt_fsck_defer_recount, 1);
	cr_assert_eq(bch_fs_open(&p, 1, &o, &c, err, sizeof(err)), 0, "%s", err);
	cr_assert(c->extents_mark_deferred, "the open counted the buckets itself");
	if (ahead)
		cr_assert_eq(bch_prefetch_start(c), 0);
	struct bch_fsck_ctx *n = calloc(1, sizeof(*n));
	uint64_t nodes;
	n->mode = BCH_FSCK_NO;
	cr_assert_eq(bch_fsck_btrees(n, c, &nodes), 0, "%s", n->err_msg);
	cr_assert_eq(bch_fsck_nr_found(n), 0);
	cr_assert_eq(n->leaf_keys[BCH_BTREE_ID_inodes], keys, "inode keys: pass 3 %lu, merged %lu",
		     (unsigned long)n->leaf_keys[BCH_BTREE_ID_inodes], (unsigned long)keys);
	cr_assert_eq(n->dir_keys, dirs, "directories: pass 3 %lu, merged %lu",
		     (unsigned long)n->dir_keys, (unsigned long)dirs);
	for (uint64_t b = 0; b < nb; b++) {
		struct bch_bucket_state got;
		cr_assert_eq(bch_alloc_bucket_get(c, 0, b, &got), have[b]);
		cr_assert(!have[b] || (got.sectors == want[b].sectors && got.data_type == want[b].data_type &&
				       got.gen == want[b].gen),
			  "bucket %lu: pass 3 %u sectors type %u gen %u, the open %u type %u gen %u",
			  (unsigned long)b, got.sectors, got.data_type, got.gen, want[b].sectors,
			  want[b].data_type, want[b].gen);
	}
	free(n);
	free(want);
	free(have);
	bch_prefetch_stop(c);
	cr_assert_eq(bch_fs_close(c), 0);
	test_tmpdir_remove(tmpdir);
}

Test(fsck_pass3, counts_and_buckets_taken_in_the_first_pass)
{
	pass3_takes_what_a_second_read_would(false);
}

Test(fsck_pass3, counts_and_buckets_taken_ahead)
{
	pass3_takes_what_a_second_read_would(true);
}
