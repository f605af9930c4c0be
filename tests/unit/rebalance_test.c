// SPDX-License-Identifier: GPL-2.0
/*
 * rebalance_test.c - the move path and rebalance on two devices labelled
 * ssd and hdd (foreground_target ssd, background_target hdd):
 *   - writes land on ssd and leave a work key; rebalance moves every extent
 *     to hdd, files read back equal, no work is left, space is counted
 *     once (fsck clean after reopen);
 *   - background compression recompresses, and incompressible data is
 *     marked so and not tried again;
 *   - a full target: rebalance parks (no work reported, nothing read)
 *     and finishes once space is freed;
 *   - a key changed between read and commit is left alone (raced).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "bcachefs.h"
#include "blockdev.h"
#include "btree.h"
#include "compress.h"
#include "errcode.h"
#include "extents.h"
#include "format.h"
#include "fs.h"
#include "fs_ops.h"
#include "fsck.h"
#include "journal.h"
#include "move.h"
#include "opts.h"
#include "rebalance.h"
#include "super.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

static char tmpdir[64], paths[2][128];
static struct bch_fs *c;

static bool with_promote;
static const char *fg_label = "ssd", *bg_label = "hdd";

static void make_fs(unsigned ssd_mb, unsigned hdd_mb, const char *bg_compression)
{
	struct bch_format_dev devs[2] = {
		{ .path = paths[0], .size = (uint64_t)ssd_mb << 20, .bucket_size = 64 << 10,
		  .durability = 1, .label = "ssd" },
		{ .path = paths[1], .size = (uint64_t)hdd_mb << 20, .bucket_size = 64 << 10,
		  .durability = 1, .label = "hdd" },
	};
	struct bch_format_args args = { .have_uuid = true, .user_uuid = { 0x5e, 0xba, 1, 2 } };
	struct bch_opts o;
	char err[256];
	uint64_t v;

	test_tmpdir_make(tmpdir, sizeof(tmpdir), "rebalance");
	snprintf(paths[0], sizeof(paths[0]), "%s/ssd.img", tmpdir);
	snprintf(paths[1], sizeof(paths[1]), "%s/hdd.img", tmpdir);
	bch_opts_default(&o);
	bch_opt_set(&o, Opt_btree_node_size, 16 << 10);
	bch_opt_set(&o, Opt_data_replicas, 1);
	bch_opt_set(&o, Opt_metadata_replicas, 1);
	const char *targets[BCH_OPT_NR] = { 0 };
	targets[Opt_foreground_target] = fg_label;
	targets[Opt_background_target] = bg_label;
	if (with_promote)
		targets[Opt_promote_target] = "ssd";
	if (bg_compression) {
		cr_assert_eq(bch_opt_parse(Opt_background_compression, bg_compression, &v, err,
					   sizeof(err)), 0, "%s", err);
		bch_opt_set(&o, Opt_background_compression, v);
	}
	cr_assert_eq(bch_format(devs, 2, &o, targets, &args, err, sizeof(err)), 0, "format: %s", err);
	char *p[2] = { paths[0], paths[1] };
	struct bch_opts oo;
	memset(&oo, 0, sizeof(oo));
	cr_assert_eq(bch_fs_open(p, 2, &oo, &c, err, sizeof(err)), 0, "open: %s", err);
}

static void reopen(unsigned flags_fsck)
{
	char err[256];
	char *p[2] = { paths[0], paths[1] };
	struct bch_opts o;

	cr_assert_eq(bch_fs_close(c), 0);
	memset(&o, 0, sizeof(o));
	if (flags_fsck) {
		bch_opt_set(&o, Opt_fsck, 1);
		bch_opt_set(&o, Opt_read_only, 1);
	}
	cr_assert_eq(bch_fs_open(p, 2, &o, &c, err, sizeof(err)), 0, "open: %s", err);
}

static void fsck_clean_and_reopen(void)
{
	reopen(1);
	testfs_assert_fsck_clean(c, false);
	reopen(0);
}

static void fill(unsigned char *buf, size_t len, unsigned seed, bool compressible)
{
	uint64_t x = 0x9e3779b97f4a7c15ULL * (seed + 1);

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = compressible ? (unsigned char)('a' + (i / 64 + seed) % 7) : (unsigned char)x;
	}
}

/*
 * Sectors of data on device dev over every extent: dirty pointers, or
 * (cached) live cached ones.
 */
static uint64_t sectors_of(unsigned dev, bool cached)
{
	struct btree_iter it;
	const struct bch_bkey *k;
	uint64_t n = 0;
	int err = 0;

	bch_btree_iter_init(&it, c, BCH_BTREE_ID_extents, POS_MIN, POS_MAX);
	while ((k = bch_btree_iter_next(&it, &err))) {
		const struct bch_extent *e = bkey_val(k);
		for (unsigned i = 0; i < bch_extent_nr_ptrs(k); i++)
			if (e->ptrs[i].dev == dev &&
			    !!(e->ptrs[i].flags & BCH_EXTENT_PTR_CACHED) == cached &&
			    (!cached || bch_alloc_ptr_live(c, &e->ptrs[i])))
				n += k->size;
	}
	bch_btree_iter_exit(&it);
	cr_assert_eq(err, 0);
	return n;
}

static uint64_t sectors_on(unsigned dev)	{ return sectors_of(dev, false); }
static uint64_t cached_on(unsigned dev)		{ return sectors_of(dev, true); }

static int run_rebalance(struct bch_move_stats *s, bool *parked)
{
	int r;
	unsigned steps = 0;

	memset(s, 0, sizeof(*s));
	while ((r = bch_rebalance_step(c, 2048, s, parked)) == 1)
		cr_assert_lt(++steps, 100000, "rebalance does not end");
	return r;
}

#define NFILES	8
#define FILE_BYTES (384u << 10)

static uint64_t make_files(unsigned char bufs[NFILES][FILE_BYTES], bool compressible)
{
	uint64_t first = 0;
	for (unsigned f = 0; f < NFILES; f++) {
		char name[16];
		uint64_t inum;
		snprintf(name, sizeof(name), "f%u", f);
		cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &inum), 0);
		if (!f)
			first = inum;
		fill(bufs[f], FILE_BYTES, f, compressible);
		cr_assert_eq(bch_fs_write(c, inum, 0, bufs[f], FILE_BYTES), (ssize_t)FILE_BYTES);
	}
	return first;
}

static void check_files(unsigned char bufs[NFILES][FILE_BYTES], uint64_t first)
{
	unsigned char *got = malloc(FILE_BYTES);
	for (unsigned f = 0; f < NFILES; f++) {
		cr_assert_eq(bch_fs_read(c, first + f, 0, got, FILE_BYTES), (ssize_t)FILE_BYTES);
		cr_assert(!memcmp(got, bufs[f], FILE_BYTES), "file %u differs", f);
	}
	free(got);
}

static unsigned char (*bufs)[FILE_BYTES];

TestSuite(rebalance, .timeout = 120);

Test(rebalance, moves_to_background_target)
{
	struct bch_move_stats s;
	struct bch_rebalance_pending pend;
	bool parked;

	bufs = malloc(NFILES * FILE_BYTES);
	make_fs(32, 32, NULL);
	uint64_t first = make_files(bufs, false);
	cr_assert_eq(sectors_on(1), 0, "foreground writes went to hdd");
	cr_assert_eq(sectors_on(0), NFILES * FILE_BYTES / 512);
	cr_assert_eq(bch_rebalance_pending(c, &pend), 0);
	cr_assert_eq(pend.inodes, NFILES);
	cr_assert_eq(pend.sectors_target, NFILES * FILE_BYTES / 512);

	cr_assert_eq(run_rebalance(&s, &parked), 0, "%s", c->err_msg);
	cr_assert(!parked);
	cr_assert_eq(s.keys_raced + s.keys_no_good_copy + s.keys_no_space, 0, "%s", s.last_problem);
	cr_assert_eq(s.sectors_moved, NFILES * FILE_BYTES / 512);
	cr_assert_eq(sectors_on(0), 0);
	cr_assert_eq(sectors_on(1), NFILES * FILE_BYTES / 512);
	cr_assert_eq(bch_rebalance_pending(c, &pend), 0);
	cr_assert_eq(pend.inodes + pend.sectors_target, 0);
	struct bch_dev_usage u;
	bch_dev_usage_get(c, 0, &u);
	cr_assert_eq(u.sectors[BCH_DATA_user], 0, "ssd still counts %llu user sectors",
		     (unsigned long long)u.sectors[BCH_DATA_user]);
	check_files(bufs, first);
	fsck_clean_and_reopen();
	check_files(bufs, first);
	cr_assert_eq(bch_fs_close(c), 0);
	free(bufs);
	test_tmpdir_remove(tmpdir);
}

Test(rebalance, background_compression)
{
	struct bch_move_stats s;
	bool parked;

	bufs = malloc(NFILES * FILE_BYTES);
	make_fs(32, 32, "zstd");
	uint64_t first = make_files(bufs, true);
	/* one file of random bytes: compression does not help it */
	fill(bufs[NFILES - 1], FILE_BYTES, 99, false);
	cr_assert_eq(bch_fs_write(c, first + NFILES - 1, 0, bufs[NFILES - 1], FILE_BYTES),
		     (ssize_t)FILE_BYTES);
	cr_assert_eq(run_rebalance(&s, &parked), 0, "%s", c->err_msg);
	cr_assert_eq(sectors_on(0), 0);
	struct bch_dev_usage u;
	bch_dev_usage_get(c, 1, &u);
	cr_assert_lt(u.sectors[BCH_DATA_user], NFILES * FILE_BYTES / 512 / 2,
		     "hdd holds %llu sectors: not compressed", (unsigned long long)u.sectors[BCH_DATA_user]);
	check_files(bufs, first);
	/* nothing left: incompressible data is not tried again */
	uint64_t moved = s.keys_moved;
	cr_assert_eq(run_rebalance(&s, &parked), 0);
	cr_assert_eq(s.keys_seen, 0, "a second pass moved %llu keys (of %llu before)",
		     (unsigned long long)s.keys_seen, (unsigned long long)moved);
	fsck_clean_and_reopen();
	check_files(bufs, first);
	cr_assert_eq(bch_fs_close(c), 0);
	free(bufs);
	test_tmpdir_remove(tmpdir);
}

Test(rebalance, full_target_parks)
{
	struct bch_move_stats s;
	bool parked;

	bufs = malloc(NFILES * FILE_BYTES);
	/* hdd of 5 MiB: the files fit, a 4 MiB one more does not */
	make_fs(32, 5, NULL);
	uint64_t first = make_files(bufs, false), big;
	unsigned char *blob = malloc(4 << 20);
	fill(blob, 4 << 20, 77, false);
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "big", S_IFREG | 0644, 0, 0, 0, &big), 0);
	cr_assert_eq(bch_fs_write(c, big, 0, blob, 4 << 20), 4 << 20);
	free(blob);
	cr_assert_eq(run_rebalance(&s, &parked), 0, "%s", c->err_msg);
	cr_assert(s.keys_no_space > 0);
	uint64_t left = sectors_on(0);
	cr_assert_gt(left, 0);
	/* parked: a second step reports no work and reads nothing */
	cr_assert_eq(run_rebalance(&s, &parked), 0);
	cr_assert(parked, "rebalance did not park on a full target");
	cr_assert_eq(s.sectors_read, 0);
	/* space appears on hdd (files whose data moved there are deleted) */
	for (unsigned f = 0; f < NFILES; f++) {
		char name[16];
		snprintf(name, sizeof(name), "f%u", f);
		if (f < 4)
			cr_assert_eq(bch_fs_unlink(c, BCH_ROOT_INO, name), 0);
	}
	cr_assert_eq(run_rebalance(&s, &parked), 0);
	cr_assert(s.keys_moved > 0, "nothing moved once space was freed");
	for (unsigned f = 4; f < NFILES; f++) {
		unsigned char *got = malloc(FILE_BYTES);
		cr_assert_eq(bch_fs_read(c, first + f, 0, got, FILE_BYTES), (ssize_t)FILE_BYTES);
		cr_assert(!memcmp(got, bufs[f], FILE_BYTES), "file %u differs", f);
		free(got);
	}
	fsck_clean_and_reopen();
	cr_assert_eq(bch_fs_close(c), 0);
	free(bufs);
	test_tmpdir_remove(tmpdir);
}

Test(rebalance, raced_key_left_alone)
{
	struct bch_move_stats s = { 0 };
	struct bch_mover *m;

	bufs = malloc(NFILES * FILE_BYTES);
	make_fs(32, 32, NULL);
	uint64_t first = make_files(bufs, false);
	struct bch_bkey *k = NULL;
	cr_assert_eq(bch_btree_peek(c, BCH_BTREE_ID_extents, POS(first, 1, 0), POS(first, UINT64_MAX, 0), &k), 0);
	struct bch_move_op op = { .rewrite = 1, .nr_new = 1, .target = 0 };
	uint64_t target;
	char err[128];
	(void)err;
	cr_assert_eq(bch_target_parse(c->sb, "hdd", &target), 0);
	op.target = target;
	op.target_only = true;
	cr_assert_eq(bch_mover_init(c, &s, &m), 0);
	cr_assert_eq(bch_mover_add(m, k, &op), 0);
	/* a foreground write over the extent before the swap commits */
	unsigned char blk[4096];
	memset(blk, 0x5a, sizeof(blk));
	cr_assert_eq(bch_fs_write(c, first, (bch_extent_start(k) << 9), blk, sizeof(blk)), 4096);
	memcpy(bufs[0] + (bch_extent_start(k) << 9), blk, sizeof(blk));
	cr_assert_eq(bch_mover_exit(m), 0);
	cr_assert_eq(s.keys_raced, 1);
	cr_assert_eq(s.keys_moved, 0);
	free(k);
	check_files(bufs, first);
	fsck_clean_and_reopen();
	check_files(bufs, first);
	cr_assert_eq(bch_fs_close(c), 0);
	free(bufs);
	test_tmpdir_remove(tmpdir);
}

Test(rebalance, promote_adds_cached_copy)
{
	bufs = malloc(NFILES * FILE_BYTES);
	/* data written to hdd, promote target ssd */
	with_promote = true;
	fg_label = "hdd";
	bg_label = NULL;
	make_fs(32, 32, NULL);
	with_promote = false;
	fg_label = "ssd";
	bg_label = "hdd";
	uint64_t first = make_files(bufs, false);
	cr_assert_eq(sectors_on(0), 0);
	cr_assert_eq(cached_on(0), 0);
	/* the first read comes from hdd and promotes */
	check_files(bufs, first);
	cr_assert_eq(cached_on(0), NFILES * FILE_BYTES / 512, "promoted %llu sectors",
		     (unsigned long long)cached_on(0));
	cr_assert_eq(sectors_on(1), NFILES * FILE_BYTES / 512, "dirty data moved");
	struct bch_dev_usage u;
	bch_dev_usage_get(c, 0, &u);
	cr_assert_eq(u.cached_sectors, NFILES * FILE_BYTES / 512);
	cr_assert_eq(u.sectors[BCH_DATA_user], 0, "cached data counted as dirty");
	/* a second read is served by the ssd: not one read request reaches the hdd */
	uint64_t promoted = c->promoted;
	struct bch_dev_io_stats hdd0, hdd1, ssd0, ssd1;
	bch_dev_io_stats(c->devs[1]->bdev, &hdd0);
	bch_dev_io_stats(c->devs[0]->bdev, &ssd0);
	check_files(bufs, first);
	bch_dev_io_stats(c->devs[1]->bdev, &hdd1);
	bch_dev_io_stats(c->devs[0]->bdev, &ssd1);
	cr_assert_eq(hdd1.reads, hdd0.reads, "%llu reads went to the hdd",
		     (unsigned long long)(hdd1.reads - hdd0.reads));
	cr_assert_geq(ssd1.read_bytes - ssd0.read_bytes, (uint64_t)NFILES * FILE_BYTES);
	cr_assert_eq(c->promoted, promoted);
	reopen(0);
	cr_assert_eq(cached_on(0), NFILES * FILE_BYTES / 512);
	check_files(bufs, first);
	cr_assert_eq(c->promoted, 0, "a cached copy was not used after reopen");
	/* deleting the files frees the cached space too */
	for (unsigned f = 0; f < NFILES; f++) {
		char name[16];
		snprintf(name, sizeof(name), "f%u", f);
		cr_assert_eq(bch_fs_unlink(c, BCH_ROOT_INO, name), 0);
	}
	bch_dev_usage_get(c, 0, &u);
	cr_assert_eq(u.cached_sectors, 0);
	cr_assert_eq(bch_fs_close(c), 0);
	free(bufs);
	test_tmpdir_remove(tmpdir);
}

Test(rebalance, data_leaving_promote_target_stays_cached)
{
	struct bch_move_stats s;
	bool parked;

	bufs = malloc(NFILES * FILE_BYTES);
	with_promote = true;
	make_fs(32, 32, NULL);
	with_promote = false;
	uint64_t first = make_files(bufs, false);
	cr_assert_eq(run_rebalance(&s, &parked), 0, "%s", c->err_msg);
	cr_assert_eq(sectors_on(0), 0);
	cr_assert_eq(sectors_on(1), NFILES * FILE_BYTES / 512);
	cr_assert_eq(cached_on(0), NFILES * FILE_BYTES / 512, "moved data was not kept cached");
	struct bch_dev_usage u;
	bch_dev_usage_get(c, 0, &u);
	cr_assert_eq(u.cached_sectors, NFILES * FILE_BYTES / 512);
	cr_assert_eq(u.sectors[BCH_DATA_user], 0);
	check_files(bufs, first);
	cr_assert_eq(c->promoted, 0, "reads promoted although a cached copy was there");
	cr_assert_eq(bch_fs_close(c), 0);
	free(bufs);
	test_tmpdir_remove(tmpdir);
}

Test(rebalance, unlink_takes_the_work_key)
{
	struct bch_rebalance_pending pend;

	bufs = malloc(NFILES * FILE_BYTES);
	make_fs(32, 32, NULL);
	make_files(bufs, false);
	cr_assert_eq(bch_rebalance_pending(c, &pend), 0);
	cr_assert_eq(pend.inodes, NFILES);
	for (unsigned f = 0; f < NFILES; f++) {
		char name[16];
		snprintf(name, sizeof(name), "f%u", f);
		cr_assert_eq(bch_fs_unlink(c, BCH_ROOT_INO, name), 0);
	}
	cr_assert_eq(bch_rebalance_pending(c, &pend), 0);
	cr_assert_eq(pend.inodes, 0, "%llu work keys left behind", (unsigned long long)pend.inodes);
	fsck_clean_and_reopen();
	cr_assert_eq(bch_fs_close(c), 0);
	free(bufs);
	test_tmpdir_remove(tmpdir);
}
