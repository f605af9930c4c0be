// SPDX-License-Identifier: GPL-2.0
/*
 * enospc_fill_test.c - exact ENOSPC near full: a write gets ENOSPC (or a
 * short count) only when the space user data could take is used, and no
 * space is lost on the way (io.c unit_alloc(), write_fits(); alloc.h
 * bch_alloc_data_fit(), bch_alloc_data_unwind()).
 *
 * fill_{plain,encrypted}: one writer appends seeded sizes (8-252 KiB) to
 * two files, the planned way (bch_fs_write_begin(), run, end: what the
 * FUSE daemon does) and the old way (bch_fs_write()) in turn, until a
 * write of one block gets ENOSPC.  Then no user bucket holds dead space
 * (space not live and not the rest of an open bucket), and what the
 * writes returned adds up to the space available before them, less the
 * buckets the btree took meanwhile.  Before the writes' pieces were cut to
 * the rest of the open bucket, a piece that did not fit opened a new one
 * and left the rest dead; copygc packs that for plain data only (it never
 * cuts an encrypted extent), and encrypted the fill ended with buckets
 * part dead (t82 under ENCRYPTED=1: 14% of them, 86% stored).
 *
 * plan_given_back_{plain,encrypted}: a plan freed without being indexed
 * (a failed run, a redo the old way) gives its space back to the open
 * bucket: the space user data can take is as before, and the next write
 * lands where the plan would have.
 *
 * reclaimable_{old_way,planned,planned_encrypted}: near full, with half of
 * every bucket dead (punched), a 1 MiB write finds no free space; the old
 * way runs copygc before it answers, and a plan that finds no space goes
 * the old way at its turn: both store all of it (without copygc on ENOSPC
 * both fail).
 *
 * The seed is fixed and printed.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "bcachefs.h"
#include "fs.h"
#include "fs_ops.h"
#include "inode.h"
#include "io.h"
#include "opts.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define SEED		0x32e05bu
#define WRITE_MAX	(252 << 10)

static char tmpdir[64];
static char paths[1][TESTFS_PATH_MAX];
static struct bch_fs *c;
static struct bch_fs_writes writes;

static void setup(void)
{
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "enospcfill");
}

static void teardown(void)
{
	if (c)
		bch_fs_close(c);
	c = NULL;
	bch_fs_writes_exit(&writes);
	testfs_encrypted = false;
	test_tmpdir_remove(tmpdir);
}

TestSuite(enospc_fill, .init = setup, .fini = teardown, .timeout = 120);

static void open_fs(unsigned size_mb, bool encrypted)
{
	char err[256];

	testfs_encrypted = encrypted;
	testfs_format(tmpdir, 1, size_mb, 16 << 10, 1, paths);
	c = testfs_open(paths, 1, 0, 0, err, sizeof(err));
	cr_assert(c, "open: %s", err);
	writes = (struct bch_fs_writes) { 0 };
}


/*
 * Bytes of user buckets that are neither live nor the rest of an open
 * bucket: space lost until copygc (none here is cached).
 */
static uint64_t dead_bytes(void)
{
	struct bch_dev_usage u;
	struct bch_fs_space s;
	uint64_t bb = (uint64_t)bch_alloc_bucket_sectors(c, 0) << 9;

	bch_dev_usage_get(c, 0, &u);
	bch_fs_space(c, &s);
	cr_assert_eq(u.cached_sectors, 0);
	return u.buckets[BCH_DATA_user] * bb - (u.sectors[BCH_DATA_user] << 9) - s.reclaimable;
}

static uint64_t btree_buckets(void)
{
	struct bch_dev_usage u;

	bch_dev_usage_get(c, 0, &u);
	return u.buckets[BCH_DATA_btree];
}

/* One write as the FUSE daemon does it when it may plan (alone: no wait). */
static ssize_t write_planned(uint64_t inum, uint64_t off, const void *buf, size_t len, bool *planned)
{
	struct bch_fs_write_op op;

	cr_assert_eq(bch_fs_write_begin(c, &writes, &op, inum, off, buf, len, true), 0);
	*planned = op.planned;
	bch_fs_write_run(&op);
	cr_assert(bch_fs_write_turn(&writes, &op));
	return bch_fs_write_end(c, &writes, &op);
}

static void fill(bool encrypted)
{
	static uint8_t buf[WRITE_MAX];
	uint64_t ino[2], size[2] = { 0, 0 }, total = 0, rng = SEED;
	unsigned nr_planned = 0, nr_writes = 0;

	printf("enospc_fill: seed %#x, %s\n", SEED, encrypted ? "encrypted" : "plain");
	open_fs(12, encrypted);
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "a", S_IFREG | 0644, 0, 0, 0, &ino[0]), 0);
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "b", S_IFREG | 0644, 0, 0, 0, &ino[1]), 0);
	for (unsigned i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 7 + 3);
	struct bch_fs_space sp;
	bch_fs_space(c, &sp);
	uint64_t btree0 = btree_buckets(), bb = (uint64_t)bch_alloc_bucket_sectors(c, 0) << 9;

	/* until the last write (of one block) finds no space */
	for (size_t len = 0; len != 4096; nr_writes++) {
		unsigned f = nr_writes % 2;
		bool planned = false;
		len = 4096 * (2 + testfs_xorshift(&rng) % (WRITE_MAX / 4096 - 1));
		ssize_t n = (nr_writes / 2) % 2 ? bch_fs_write(c, ino[f], size[f], buf, len)
						: write_planned(ino[f], size[f], buf, len, &planned);
		nr_planned += planned;
		if (n == -ENOSPC) {
			len = 4096;	/* the next: one block, the last if it fails too */
			if (write_planned(ino[f], size[f], buf, len, &planned) == -ENOSPC)
				break;
			n = 4096;
		}
		cr_assert_gt(n, 0, "write %u of %zu bytes: %zd %s", nr_writes, len, n, c->err_msg);
		size[f] += n;
		total += n;
		cr_assert_eq(dead_bytes(), 0, "write %u (%s, %zu bytes) left %llu bytes dead", nr_writes,
			     (nr_writes / 2) % 2 ? "old way" : planned ? "planned" : "not planned", len,
			     (unsigned long long)dead_bytes());
	}
	uint64_t btree_took = (btree_buckets() - btree0) * bb;
	printf("enospc_fill: %u writes (%u planned), %llu bytes stored of %llu available; "
	       "the btree took %llu\n", nr_writes, nr_planned, (unsigned long long)total,
	       (unsigned long long)sp.available, (unsigned long long)btree_took);
	cr_assert_gt(nr_planned, 0);
	cr_assert_eq(dead_bytes(), 0);
	cr_assert_lt(bch_alloc_user_free(c), 8, "%llu sectors left free",
		     (unsigned long long)bch_alloc_user_free(c));
	/* all of it, less what btree nodes took of the empty buckets above the reserve */
	cr_assert_leq(total, sp.available);
	cr_assert_geq(total + btree_took + 4096, sp.available, "%llu of %llu stored: space lost",
		      (unsigned long long)total, (unsigned long long)sp.available);
	/* the files hold what the writes said */
	for (unsigned f = 0; f < 2; f++) {
		struct stat st;
		cr_assert_eq(bch_fs_getattr(c, ino[f], &st), 0);
		cr_assert_eq((uint64_t)st.st_size, size[f], "file %u", f);
	}
}

Test(enospc_fill, fill_plain)
{
	fill(false);
}

Test(enospc_fill, fill_encrypted)
{
	fill(true);
}

static void plan_given_back(bool encrypted)
{
	static uint8_t buf[96 << 10];
	struct bch_write_plan pl;
	struct bch_inode i;
	struct bch_io_opts o;
	uint64_t inum;

	open_fs(8, encrypted);
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "f", S_IFREG | 0644, 0, 0, 0, &inum), 0);
	memset(buf, 0x5a, sizeof(buf));
	/* the open bucket part used: the plan's pieces go behind what is there */
	cr_assert_eq(bch_fs_write(c, inum, 0, buf, 24 << 10), 24 << 10, "%s", c->err_msg);
	uint64_t free = bch_alloc_user_free(c);
	cr_assert_eq(bch_inode_get(c, inum, &i), 0);
	bch_io_opts_get(c, &i, &o);
	cr_assert_eq(bch_data_write_plan(c, inum, &o, (24 << 10) >> 9, buf, sizeof(buf) >> 9, &pl), 0,
		     "%s", c->err_msg);
	cr_assert_geq(pl.nr, 2, "a plan of one piece");
	struct bch_extent_ptr first = pl.w[0].ptrs[0];
	cr_assert_eq(bch_alloc_user_free(c), free - (sizeof(buf) >> 9));
	bch_data_write_plan_free(&pl, true);
	cr_assert_eq(bch_alloc_user_free(c), free, "a plan given back left %llu sectors dead",
		     (unsigned long long)(free - bch_alloc_user_free(c)));
	cr_assert_eq(dead_bytes(), 0);
	/* the next write takes the same place */
	cr_assert_eq(bch_data_write_plan(c, inum, &o, (24 << 10) >> 9, buf, sizeof(buf) >> 9, &pl), 0);
	cr_assert_eq(pl.w[0].ptrs[0].offset, first.offset);
	bch_data_write_plan_free(&pl, true);
	cr_assert_eq(bch_alloc_user_free(c), free);
}

Test(enospc_fill, plan_given_back_plain)
{
	plan_given_back(false);
}

Test(enospc_fill, plan_given_back_encrypted)
{
	plan_given_back(true);
}

/*
 * Near full with space copygc can win back (every other 32 KiB of a full
 * file punched: each 64 KiB bucket half dead), a 1 MiB write finds no free
 * space.  The old way runs copygc before it answers (v_write(),
 * bch_copygc_make_room()); a plan that finds no space goes the old way at
 * its turn.  So both get the serial answer: all of it stored, as the
 * other path stores it.  Returns what the write returned.
 */
static ssize_t write_beside_reclaimable(bool planned, bool encrypted)
{
	static uint8_t buf[1 << 20];
	uint64_t a, b, size = 0;
	ssize_t n;

	open_fs(8, encrypted);
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "a", S_IFREG | 0644, 0, 0, 0, &a), 0);
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "b", S_IFREG | 0644, 0, 0, 0, &b), 0);
	memset(buf, 0x3c, sizeof(buf));
	while ((n = bch_fs_write(c, a, size, buf, 64 << 10)) > 0)
		size += n;
	cr_assert_eq(n, -ENOSPC);
	for (uint64_t off = 0; off + (64 << 10) <= size; off += 64 << 10)
		cr_assert_eq(bch_fs_fallocate(c, a, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off,
					      32 << 10), 0, "%s", c->err_msg);
	cr_assert_eq(bch_fs_fsync(c), 0);
	uint64_t free = bch_alloc_user_free(c) << 9;
	cr_assert_lt(free, sizeof(buf), "%llu bytes free: copygc is not needed",
		     (unsigned long long)free);
	if (planned) {
		bool was_planned;
		n = write_planned(b, 0, buf, sizeof(buf), &was_planned);
		cr_assert(!was_planned, "a write with no space for it was planned");
	} else {
		n = bch_fs_write(c, b, 0, buf, sizeof(buf));
	}
	printf("enospc_fill: %s%s, %llu of %llu bytes punched, %llu free: the write returned %zd\n",
	       planned ? "planned" : "old way", encrypted ? ", encrypted" : "",
	       (unsigned long long)(size / 2), (unsigned long long)size, (unsigned long long)free, n);
	return n;
}

Test(enospc_fill, reclaimable_old_way)
{
	cr_assert_eq(write_beside_reclaimable(false, false), 1 << 20);
}

Test(enospc_fill, reclaimable_planned)
{
	cr_assert_eq(write_beside_reclaimable(true, false), 1 << 20);
}

Test(enospc_fill, reclaimable_planned_encrypted)
{
	cr_assert_eq(write_beside_reclaimable(true, true), 1 << 20);
}
