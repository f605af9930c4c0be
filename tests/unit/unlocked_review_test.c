// SPDX-License-Identifier: GPL-2.0
/*
 * unlocked_review_test.c - the review of the FUSE daemon's reads and writes
 * outside the engine lock (issue 32): each test drives the steps of
 * fs_ops.h bch_fs_write_begin() / bch_fs_write_run() / bch_fs_write_turn()
 * / bch_fs_write_end() and io.h bch_data_read_plan() /
 * bch_data_read_plan_run() in one bad order, on one thread, as the daemon
 * would let them happen (cmd/fusemount_ops.c op_write, op_read and the ops
 * that take the engine lock without waiting for writes in flight).
 *
 * Six of them failed when written (session 20's review), each for a bug
 * since fixed: enospc_unplanned_behind_later_planned, fallocate_ and
 * copy_range_beside_planned_overwrite, write_after_emergency_ro,
 * option_change_beside_planned_write, write_to_ro_snapshot.  The others
 * show that an order suspected of going wrong does not.
 *
 *   ENOSPC the serial answer: a not-planned write behind an earlier planned
 *     one and beside a later one; fallocate and copy_file_range beside a
 *     planned overwrite (mirrors of the daemon's ops), each with its serial
 *     orders.
 *   error paths: the file freed, the run failing, the filesystem going
 *     read-only; writes after emergency_ro and into a read-only snapshot.
 *   meanwhile: a file option, a snapshot, reflink both ways, a collapse,
 *     copygc; a read plan across an append merge, a reused and a
 *     discarded bucket.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "blockdev.h"
#include "copygc.h"
#include "bcachefs.h"
#include "errcode.h"
#include "extents.h"
#include "format.h"
#include "fs.h"
#include "fs_ops.h"
#include "fs_read.h"
#include "io.h"
#include "move.h"
#include "opts.h"
#include "rebalance.h"
#include "snapshot.h"
#include "super.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

static char tmpdir[64];
static char paths[1][TESTFS_PATH_MAX];
static struct bch_fs *c;
static struct bch_fs_writes writes;	/* the daemon's m->writes */
static struct bch_fs_write_op *in_flight;	/* a planned write the daemon's ops would wait for */

static void setup(void)
{
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "ulreview");
}

static void teardown(void)
{
	if (c)
		bch_fs_close(c);
	c = NULL;
	bch_fs_writes_exit(&writes);
	in_flight = NULL;
	test_tmpdir_remove(tmpdir);
}

TestSuite(unlocked_review, .init = setup, .fini = teardown, .timeout = 120);

static void open_fs(unsigned size_mb)
{
	char err[256];

	testfs_format(tmpdir, 1, size_mb, 16 << 10, 1, paths);
	c = testfs_open(paths, 1, 0, 0, err, sizeof(err));
	cr_assert(c, "open: %s", err);
	writes = (struct bch_fs_writes) { 0 };
}

static void reopen_fsck(void)
{
	char err[256];

	cr_assert_eq(bch_fs_close(c), 0);
	c = testfs_open(paths, 1, TESTFS_FSCK | TESTFS_RO, 0, err, sizeof(err));
	cr_assert(c, "open for fsck: %s", err);
	testfs_assert_fsck_clean(c, true);
}

static uint64_t mkfile(const char *name)
{
	uint64_t inum;

	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &inum), 0);
	return inum;
}

static uint8_t big[1 << 20];

/*
 * Fill file a (64 KiB appends) until at most `left` bytes of user space
 * are free; returns a's size.  The journal is flushed: nothing freed waits.
 */
static uint64_t fill(uint64_t a, uint64_t left)
{
	uint64_t size = 0;

	memset(big, 0x11, sizeof(big));
	while ((bch_alloc_user_free(c) << 9) > left) {
		cr_assert_eq(bch_fs_write(c, a, size, big, 64 << 10), 64 << 10, "%s", c->err_msg);
		size += 64 << 10;
	}
	cr_assert_eq(bch_fs_fsync(c), 0);
	return size;
}

/* ------------------------------------------------------------------ ENOSPC */

/*
 * The scene of the fallocate and copy tests: files a and b (and d when d
 * is not NULL), a filled until 384 KiB are free (*free, if asked: what
 * is), and w1, a planned 128 KiB overwrite of a, begun.  Returns what the
 * op beside it asks: all that is free but 64 KiB.
 */
static uint64_t planned_overwrite_near_full(struct bch_fs_write_op *w1, uint64_t *a, uint64_t *b,
					    uint64_t *d, uint64_t *free)
{
	open_fs(8);
	*a = mkfile("a");
	*b = mkfile("b");
	if (d)
		*d = mkfile("d");
	fill(*a, 384 << 10);
	uint64_t f = bch_alloc_user_free(c) << 9;
	if (free)
		*free = f;
	cr_assert_eq(bch_fs_write_begin(c, &writes, w1, *a, 0, big, 128 << 10, true), 0);
	cr_assert(w1->planned);
	return f - (64 << 10);
}

/*
 * fs_ops_data.c bch_fs_write_turn(): a write not planned waits for the planned
 * writes issued BEFORE it, so that its ENOSPC is the serial answer.  But a
 * write planned AFTER it (of another file, while it waits for its turn
 * with the lock released: op_write's need_wait()) takes its space at once,
 * and the not-planned one, ending later, finds that space gone although in
 * either serial order it had it (before w2: w2's space was not taken;
 * after w2: w2's overwrite freed as much as it took).  It stores a part
 * (v_write()'s halving) or fails with ENOSPC.
 *
 * Daemon order: w0 (planned, file c) runs unlocked; w1 (file b, crosses a
 * 1 MiB boundary: not planned) waits for w0; w2 (file a, an overwrite)
 * is planned; w0 ends; w1 ends short; w2 ends.
 */
Test(unlocked_review, enospc_unplanned_behind_later_planned)
{
	struct bch_fs_write_op w0, w1, w2;

	open_fs(8);
	uint64_t a = mkfile("a"), b = mkfile("b"), f = mkfile("c");
	fill(a, 384 << 10);
	cr_assert_eq(bch_fs_write_begin(c, &writes, &w0, f, 0, big, 8 << 10, true), 0);
	cr_assert(w0.planned);
	uint64_t free = bch_alloc_user_free(c) << 9;
	uint64_t m = free - (64 << 10);
	/* w1: m bytes across b's first 1 MiB boundary (not one transaction: not planned) */
	uint64_t off1 = (1 << 20) - 4096;
	cr_assert_eq(bch_fs_write_begin(c, &writes, &w1, b, off1, big, m, true), 0);
	cr_assert(!w1.planned);
	cr_assert(!bch_fs_write_turn(&writes, &w1), "w1 waits for w0");
	/*
	 * meanwhile (op_write's need_wait() released the lock) w2 begins: not
	 * planned, as w1 would have no room beside it
	 */
	cr_assert_eq(bch_fs_write_begin(c, &writes, &w2, a, 0, big, 128 << 10, true), 0);
	cr_assert(!w2.planned, "planned ahead of w1, which waits");
	bch_fs_write_run(&w0);
	bch_fs_write_run(&w2);
	/* each ends once its turn comes, as the daemon's threads would */
	struct bch_fs_write_op *op[3] = { &w0, &w1, &w2 };
	ssize_t n[3];
	bool ended[3] = { 0 };
	for (unsigned round = 0; round < 3; round++)
		for (unsigned i = 0; i < 3; i++)
			if (!ended[i] && bch_fs_write_turn(&writes, op[i])) {
				n[i] = bch_fs_write_end(c, &writes, op[i]);
				ended[i] = true;
			}
	cr_assert(ended[0] && ended[1] && ended[2]);
	cr_assert_eq(writes.nr, 0);
	cr_assert_eq(n[0], 8 << 10);
	/* w2 after w1 (its ticket's order) may find no room: ENOSPC or short is its serial answer */
	cr_assert(n[2] == 128 << 10 || (n[2] > 0 && n[2] < 128 << 10) || n[2] == -ENOSPC,
		  "w2: %zd %s", n[2], c->err_msg);
	cr_assert_eq(n[1], (ssize_t)m, "w1 stored %zd of %llu bytes (%llu were free before w2 "
		     "was %s)", n[1], (unsigned long long)m, (unsigned long long)free,
		     w2.planned ? "planned" : "issued");
	reopen_fsck();
}

/*
 * The same, serially: w1 before w2 is planned stores all of its bytes, and
 * so does w1 after w2 ended (the answers the test above compares with).
 */
Test(unlocked_review, enospc_serial_orders)
{
	struct bch_fs_write_op w2;

	open_fs(8);
	uint64_t a = mkfile("a"), b = mkfile("b"), d = mkfile("d");
	fill(a, 384 << 10);
	uint64_t free = bch_alloc_user_free(c) << 9, m = free - (64 << 10), off1 = (1 << 20) - 4096;
	/* w2 first, in turn: the overwrite frees what it takes */
	cr_assert_eq(bch_fs_write_begin(c, &writes, &w2, a, 0, big, 128 << 10, true), 0);
	cr_assert(w2.planned);
	bch_fs_write_run(&w2);
	cr_assert_eq(bch_fs_write_end(c, &writes, &w2), 128 << 10);
	cr_assert_eq(bch_fs_write(c, b, off1, big, m), (ssize_t)m, "after w2: %s", c->err_msg);
	/* w1 first: gives back what it took, then the same again */
	cr_assert_eq(bch_fs_unlink(c, BCH_ROOT_INO, "b"), 0);
	cr_assert_eq(bch_fs_fsync(c), 0);
	cr_assert_eq(bch_fs_write(c, d, off1, big, m), (ssize_t)m, "before w2: %s", c->err_msg);
	reopen_fsck();
}

/*
 * fusemount_ops.c op_fallocate() and op_copy_file_range() as the daemon
 * does them: the engine lock, then wait_planned_writes() (the planned
 * writes in flight end first -- here finish_planned(), which runs and ends
 * them as their threads would), then the call.  Without that wait, beside
 * a planned overwrite, the fallocate below got ENOSPC and the copy stored
 * 163,328 of 327,680 bytes.
 */

static void finish_planned(void)
{
	if (!in_flight)
		return;
	bch_fs_write_run(in_flight);
	cr_assert(bch_fs_write_turn(&writes, in_flight));
	cr_assert_eq(bch_fs_write_end(c, &writes, in_flight), (ssize_t)in_flight->len, "%s",
		     c->err_msg);
	in_flight = NULL;
}

static int op_fallocate_as_daemon(uint64_t inum, int mode, uint64_t offset, uint64_t len)
{
	finish_planned();
	return bch_fs_fallocate(c, inum, mode, offset, len);
}

static ssize_t op_copy_file_range_as_daemon(uint64_t src, uint64_t src_off, uint64_t dst,
					    uint64_t dst_off, uint64_t len)
{
	finish_planned();
	return bch_fs_remap_range(c, src, src_off, dst, dst_off, len);
}

/*
 * A fallocate (and a copy_file_range, whose unaligned head and tail are
 * written) issued beside a planned overwrite, which holds its new space
 * until its end frees the old: it fits, as in either serial order.
 */
Test(unlocked_review, fallocate_beside_planned_overwrite)
{
	struct bch_fs_write_op w1;
	uint64_t a, b, free, m = planned_overwrite_near_full(&w1, &a, &b, NULL, &free);

	in_flight = &w1;
	/* op_fallocate while w1 runs unlocked */
	int r = op_fallocate_as_daemon(b, 0, 0, m);
	cr_assert_eq(r, 0, "fallocate of %llu bytes (%llu free before w1): %s", (unsigned long long)m,
		     (unsigned long long)free, bch_err_str(r));
	reopen_fsck();
}

/* The serial answers the test above compares with: the fallocate fits before and after w1. */
Test(unlocked_review, fallocate_serial_orders)
{
	struct bch_fs_write_op w1;
	uint64_t a, b, d, m = planned_overwrite_near_full(&w1, &a, &b, &d, NULL);

	bch_fs_write_run(&w1);
	cr_assert_eq(bch_fs_write_end(c, &writes, &w1), 128 << 10);
	cr_assert_eq(bch_fs_fallocate(c, b, 0, 0, m), 0, "after w1: %s", c->err_msg);
	cr_assert_eq(bch_fs_unlink(c, BCH_ROOT_INO, "b"), 0);
	cr_assert_eq(bch_fs_fsync(c), 0);
	cr_assert_eq(bch_fs_fallocate(c, d, 0, 0, m), 0, "before w1: %s", c->err_msg);
	reopen_fsck();
}

/*
 * The same for fusemount_ops.c op_copy_file_range(): offsets that differ
 * modulo the block size are copied (bch_fs_remap_range()): all of it fits
 * beside a planned overwrite.
 */
Test(unlocked_review, copy_range_beside_planned_overwrite)
{
	struct bch_fs_write_op w1;
	uint64_t a, b, free, m = planned_overwrite_near_full(&w1, &a, &b, NULL, &free);

	in_flight = &w1;
	/* op_copy_file_range while w1 runs unlocked */
	ssize_t n = op_copy_file_range_as_daemon(a, 512 << 10, b, 512, m);
	cr_assert_eq(n, (ssize_t)m, "copy of %llu bytes (%llu free before w1): %zd %s",
		     (unsigned long long)m, (unsigned long long)free, n, n < 0 ? bch_err_str(n) : "");
	reopen_fsck();
}

/* Serially the copy fits, before w1 and after it. */
Test(unlocked_review, copy_range_serial_orders)
{
	struct bch_fs_write_op w1;
	uint64_t a, b, d, m = planned_overwrite_near_full(&w1, &a, &b, &d, NULL);

	bch_fs_write_run(&w1);
	cr_assert_eq(bch_fs_write_end(c, &writes, &w1), 128 << 10);
	cr_assert_eq(bch_fs_remap_range(c, a, 512 << 10, b, 512, m), (ssize_t)m, "after w1: %s",
		     c->err_msg);
	cr_assert_eq(bch_fs_unlink(c, BCH_ROOT_INO, "b"), 0);
	cr_assert_eq(bch_fs_fsync(c), 0);
	cr_assert_eq(bch_fs_remap_range(c, a, 512 << 10, d, 512, m), (ssize_t)m, "before w1: %s",
		     c->err_msg);
	reopen_fsck();
}

/* ---------------------------------------------------- what holds (safe) */

/*
 * A planned write whose file is freed between its begin and its end (the
 * daemon never lets this happen: the kernel holds an open file, and
 * defer_unlinked_free keeps the inode until it forgets it; a library
 * caller may): the end refuses, gives the space back, leaves no ticket,
 * and a file created meanwhile under a reused number gets none of it.
 */
Test(unlocked_review, planned_write_file_freed)
{
	struct bch_fs_write_op w;
	static uint8_t got[64 << 10];

	open_fs(16);
	uint64_t a = mkfile("a");
	struct bch_dev_usage u0, u1;
	bch_dev_usage_get(c, 0, &u0);
	memset(big, 0x5a, 64 << 10);
	cr_assert_eq(bch_fs_write_begin(c, &writes, &w, a, 0, big, 64 << 10, true), 0);
	cr_assert(w.planned);
	bch_fs_write_run(&w);
	cr_assert_eq(bch_fs_unlink(c, BCH_ROOT_INO, "a"), 0);
	uint64_t n2;
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "n", S_IFREG | 0644, 0, 0, 0, &n2), 0);
	cr_assert(bch_fs_write_turn(&writes, &w));
	ssize_t n = bch_fs_write_end(c, &writes, &w);
	cr_assert_eq(writes.nr, 0);
	cr_assert_eq(writes.planned, 0);
	struct stat st;
	cr_assert_eq(bch_fs_getattr(c, n2, &st), 0);
	if (n2 == a) {
		/* the number was reused: the write went into the new file (a library caller's race) */
		printf("unlocked_review: inode %llu reused; the write returned %zd\n",
		       (unsigned long long)a, n);
	} else {
		cr_assert_lt(n, 0, "a write to a freed file returned %zd", n);
		cr_assert_eq(st.st_size, 0);
		cr_assert_eq(bch_fs_read(c, n2, 0, got, sizeof(got)), 0);
		bch_dev_usage_get(c, 0, &u1);
		cr_assert_eq(u1.sectors[BCH_DATA_user], u0.sectors[BCH_DATA_user],
			     "user sectors %llu, %llu before the write: its space is held",
			     (unsigned long long)u1.sectors[BCH_DATA_user],
			     (unsigned long long)u0.sectors[BCH_DATA_user]);
	}
	reopen_fsck();
}

/*
 * A read planned before an append that grows the file's last extent in
 * place (io.c append_merge(): the same key, a longer size and a combined
 * crc32c) reads what the plan saw: the old size, its bytes verified
 * against the old checksum (the data before the append did not move).
 * And a read planned after it reads the grown extent whole.
 */
Test(unlocked_review, read_plan_across_append_merge)
{
	static uint8_t buf[128 << 10];
	struct bch_read_plan pl;

	open_fs(16);
	c->opts.v[Opt_data_checksum] = 1;
	uint64_t a = mkfile("a");
	memset(big, 0x21, 16 << 10);
	memset(big + (16 << 10), 0x43, 16 << 10);
	cr_assert_eq(bch_fs_write(c, a, 0, big, 16 << 10), 16 << 10);
	unsigned nr0 = testfs_count_keys(c, BCH_BTREE_ID_extents, BCH_BKEY_extent);
	cr_assert_eq(bch_fs_read_plan(c, a, 0, 128 << 10, &pl), 0);
	cr_assert_eq(pl.len, 16 << 10, "planned at the old size");
	cr_assert_eq(bch_fs_write(c, a, 16 << 10, big + (16 << 10), 16 << 10), 16 << 10);
	unsigned nr1 = testfs_count_keys(c, BCH_BTREE_ID_extents, BCH_BKEY_extent);
	ssize_t n = bch_data_read_plan_run(&pl, buf);
	bch_data_read_plan_free(&pl);
	cr_assert_eq(nr1, nr0, "the append grew the extent (else this test shows nothing)");
	cr_assert_eq(n, 16 << 10);
	cr_assert(!memcmp(buf, big, 16 << 10));
	cr_assert_eq(bch_fs_read_plan(c, a, 0, 128 << 10, &pl), 0);
	cr_assert_eq(bch_data_read_plan_run(&pl, buf), 32 << 10);
	bch_data_read_plan_free(&pl);
	cr_assert(!memcmp(buf, big, 32 << 10));
	reopen_fsck();
}

/* ------------------------------------------------------- error paths */

static int fail_writes(void *priv, struct bch_blockdev *dev, enum bch_io_op op, uint64_t offset,
		       const void *buf, size_t len)
{
	(void)priv, (void)dev, (void)offset, (void)buf, (void)len;
	return op == BCH_IO_WRITE ? -EIO : 0;
}

/* An overwrite of a's first 64 KiB planned; returns a's user sectors before it. */
static uint64_t planned_overwrite(uint64_t *a, struct bch_fs_write_op *w)
{
	struct bch_dev_usage u;

	open_fs(16);
	*a = mkfile("a");
	memset(big, 0x11, 64 << 10);
	cr_assert_eq(bch_fs_write(c, *a, 0, big, 64 << 10), 64 << 10);
	cr_assert_eq(bch_fs_fsync(c), 0);
	bch_dev_usage_get(c, 0, &u);
	memset(big, 0x77, 64 << 10);
	cr_assert_eq(bch_fs_write_begin(c, &writes, w, *a, 0, big, 64 << 10, true), 0);
	cr_assert(w->planned);
	return u.sectors[BCH_DATA_user];
}

static void assert_unchanged(uint64_t a, uint64_t user_sectors)
{
	static uint8_t got[64 << 10];
	struct bch_dev_usage u;

	cr_assert_eq(writes.nr, 0, "a ticket left");
	cr_assert_eq(writes.planned, 0, "space left planned");
	bch_dev_usage_get(c, 0, &u);
	cr_assert_eq(u.sectors[BCH_DATA_user], user_sectors, "user sectors %llu, %llu before: leaked",
		     (unsigned long long)u.sectors[BCH_DATA_user], (unsigned long long)user_sectors);
	cr_assert_eq(bch_fs_read(c, a, 0, got, sizeof(got)), (ssize_t)sizeof(got));
	for (unsigned i = 0; i < sizeof(got); i++)
		cr_assert_eq(got[i], 0x11, "byte %u: %#x, the failed write's?", i, got[i]);
}

/*
 * The run fails (a device write error): the end returns the error, keeps
 * nothing of the plan (the file's old bytes, the space given back, no
 * ticket), and the filesystem checks clean.
 */
Test(unlocked_review, planned_run_fails)
{
	struct bch_fs_write_op w;
	uint64_t a;
	uint64_t before = planned_overwrite(&a, &w);
	struct bch_io_hook hook = { .fn = fail_writes };

	bch_dev_set_hook(c->devs[0]->bdev, &hook);
	bch_fs_write_run(&w);
	bch_dev_set_hook(c->devs[0]->bdev, NULL);
	cr_assert_neq(w.run_r, 0, "the run did not fail");
	cr_assert(bch_fs_write_turn(&writes, &w));
	ssize_t n = bch_fs_write_end(c, &writes, &w);
	cr_assert_lt(n, 0, "a write whose data did not reach the device returned %zd", n);
	assert_unchanged(a, before);
	reopen_fsck();
}

/*
 * The filesystem goes read-only (an error with errors=ro: emergency_ro)
 * between the run and the end: the end fails (v_write_index() does not
 * look at emergency_ro, but its commit refuses, and the old way's redo
 * fails the same), and nothing of the plan is kept.
 */
Test(unlocked_review, planned_write_fs_goes_ro)
{
	struct bch_fs_write_op w;
	uint64_t a;
	uint64_t before = planned_overwrite(&a, &w);

	bch_fs_write_run(&w);
	cr_assert_eq(w.run_r, 0);
	c->opts.v[Opt_errors] = 1;	/* remount-ro */
	bch_fs_error(c, -EIO, false);
	cr_assert(c->emergency_ro, "errors=ro left the filesystem writable");
	cr_assert(bch_fs_write_turn(&writes, &w));
	ssize_t n = bch_fs_write_end(c, &writes, &w);
	cr_assert_lt(n, 0, "a write after the filesystem went read-only returned %zd", n);
	assert_unchanged(a, before);
}

static unsigned nr_dev_writes;

static int count_writes(void *priv, struct bch_blockdev *dev, enum bch_io_op op, uint64_t offset,
			const void *buf, size_t len)
{
	(void)priv, (void)dev, (void)offset, (void)buf, (void)len;
	nr_dev_writes += op == BCH_IO_WRITE;
	return 0;
}

/*
 * A 64 KiB write of inum the old way, then planned in three steps, with
 * the devices' writes counted: each must be refused with `want` and
 * neither may reach a device.
 */
static void assert_write_refused(uint64_t inum, ssize_t want, const char *what)
{
	struct bch_io_hook hook = { .fn = count_writes };
	struct bch_fs_write_op w;

	bch_dev_set_hook(c->devs[0]->bdev, &hook);
	nr_dev_writes = 0;
	ssize_t n = bch_fs_write(c, inum, 0, big, 64 << 10);
	unsigned old_way = nr_dev_writes;
	nr_dev_writes = 0;
	cr_assert_eq(bch_fs_write_begin(c, &writes, &w, inum, 0, big, 64 << 10, true), 0);
	bool planned = w.planned;
	bch_fs_write_run(&w);
	cr_assert(bch_fs_write_turn(&writes, &w));
	ssize_t n2 = bch_fs_write_end(c, &writes, &w);
	bch_dev_set_hook(c->devs[0]->bdev, NULL);
	printf("unlocked_review: %s: the old way %zd (%u device writes), planned %d: %zd (%u device "
	       "writes)\n", what, n, old_way, planned, n2, nr_dev_writes);
	cr_assert_eq(n, want);
	cr_assert_eq(n2, want);
	cr_assert_eq(old_way, 0, "the old way wrote %u times to the device", old_way);
	cr_assert_eq(nr_dev_writes, 0, "the planned write wrote %u times to the device",
		     nr_dev_writes);
}

/*
 * After an error with errors=ro (emergency_ro: "every later write fails
 * and close writes nothing", fs_err.c), a write must not reach the
 * devices: v_write() and v_write_plan() look at c->read_only only, so the
 * old way writes the data and then fails at its commit (1 device write),
 * and a planned write is planned, run, refused at its end and redone the
 * old way (2 device writes: the same data twice) -- on devices that may
 * be what failed.
 */
Test(unlocked_review, write_after_emergency_ro)
{
	open_fs(16);
	uint64_t a = mkfile("a");
	cr_assert_eq(bch_fs_fsync(c), 0);
	c->opts.v[Opt_errors] = 1;	/* remount-ro */
	bch_fs_error(c, -EIO, false);
	cr_assert(c->emergency_ro);
	memset(big, 0x77, 64 << 10);
	assert_write_refused(a, -EROFS, "after emergency_ro");
}

/* ------------------------------------------------- options meanwhile */

/* Sectors of inum's extents stored compressed, and all its extents' sectors. */
static void compressed_sectors(uint64_t inum, uint64_t *comp, uint64_t *all)
{
	struct bch_viter it;
	const struct bch_bkey *k;
	int err = 0;

	*comp = *all = 0;
	bch_viter_init(&it, c, BCH_BTREE_ID_extents, POS(inum, 1, 0), POS(inum, UINT64_MAX, 0));
	while ((k = bch_viter_next(&it, &err)))
		if (k->type == BCH_BKEY_extent) {
			const struct bch_extent *e = bkey_val(k);
			*all += k->size;
			if (e->crc.compression_type != BCH_COMPRESSION_none)
				*comp += k->size;
		}
	bch_viter_exit(&it);
	cr_assert_eq(err, 0);
}

static void rebalance_all(void)
{
	struct bch_move_stats s;
	bool parked;
	unsigned steps = 0;
	int r;

	memset(&s, 0, sizeof(s));
	while ((r = bch_rebalance_step(c, 2048, &s, &parked)) == 1)
		cr_assert_lt(++steps, 100000, "rebalance does not end");
	cr_assert_eq(r, 0, "%s", c->err_msg);
}

/*
 * A file's background_compression is set (setxattr: its rebalance work
 * from 0) while a planned overwrite of it is in flight, and the daemon's
 * background thread runs the pass before the overwrite ends.  The write
 * was planned with the old options (bch_data_write_plan_index() marks
 * rebalance work by pl->o), so its extents are never compressed: in
 * either serial order they are (setxattr first: the write uses the new
 * options and marks its work; the write first: the pass finds them).
 */
Test(unlocked_review, option_change_beside_planned_write)
{
	struct bch_fs_write_op w;
	uint64_t comp, all;

	open_fs(32);
	uint64_t a = mkfile("a");
	memset(big, 0x61, 256 << 10);
	cr_assert_eq(bch_fs_write(c, a, 0, big, 256 << 10), 256 << 10);
	cr_assert_eq(bch_fs_write_begin(c, &writes, &w, a, 0, big, 128 << 10, true), 0);
	cr_assert(w.planned);
	cr_assert_eq(bch_fs_setxattr(c, a, "bcachefs.background_compression", "lz4", 3, 0), 0,
		     "%s", c->err_msg);
	rebalance_all();	/* the background thread, while w runs */
	compressed_sectors(a, &comp, &all);
	cr_assert_eq(comp, all, "the pass left %llu of %llu sectors plain",
		     (unsigned long long)(all - comp), (unsigned long long)all);
	bch_fs_write_run(&w);
	cr_assert(bch_fs_write_turn(&writes, &w));
	cr_assert_eq(bch_fs_write_end(c, &writes, &w), 128 << 10, "%s", c->err_msg);
	rebalance_all();
	compressed_sectors(a, &comp, &all);
	cr_assert_eq(comp, all, "%llu of %llu sectors never compressed (the planned write's)",
		     (unsigned long long)(all - comp), (unsigned long long)all);
	reopen_fsck();
}

/* The same write not planned (the old way at its end) is compressed by the next pass. */
Test(unlocked_review, option_change_beside_unplanned_write)
{
	struct bch_fs_write_op w;
	uint64_t comp, all;

	open_fs(32);
	uint64_t a = mkfile("a");
	memset(big, 0x61, 256 << 10);
	cr_assert_eq(bch_fs_write(c, a, 0, big, 256 << 10), 256 << 10);
	cr_assert_eq(bch_fs_write_begin(c, &writes, &w, a, 0, big, 128 << 10, false), 0);
	cr_assert_eq(bch_fs_setxattr(c, a, "bcachefs.background_compression", "lz4", 3, 0), 0,
		     "%s", c->err_msg);
	rebalance_all();
	cr_assert(bch_fs_write_turn(&writes, &w));
	cr_assert_eq(bch_fs_write_end(c, &writes, &w), 128 << 10, "%s", c->err_msg);
	rebalance_all();
	compressed_sectors(a, &comp, &all);
	cr_assert_eq(comp, all, "%llu of %llu sectors never compressed",
		     (unsigned long long)(all - comp), (unsigned long long)all);
	reopen_fsck();
}

/* ------------------------------------------------------------ snapshots */

/*
 * A snapshot of the file's subvolume taken between a planned write's begin
 * and its end (the daemon's snapshot is a command body, which waits for
 * planned writes; a library caller may do this): the write lands in the
 * live subvolume only, the snapshot keeps the old bytes.
 */
Test(unlocked_review, snapshot_between_begin_and_end)
{
	static uint8_t got[64 << 10];
	struct bch_fs_write_op w;
	uint64_t snap, in_snap;

	open_fs(32);
	uint64_t a = mkfile("a");
	memset(big, 0x11, 64 << 10);
	cr_assert_eq(bch_fs_write(c, a, 0, big, 64 << 10), 64 << 10);
	memset(big, 0x77, 64 << 10);
	cr_assert_eq(bch_fs_write_begin(c, &writes, &w, a, 0, big, 64 << 10, true), 0);
	cr_assert(w.planned);
	bch_fs_write_run(&w);
	cr_assert_eq(bch_fs_subvol_snapshot(c, BCH_ROOT_INO, BCH_ROOT_INO, "snap", true, &snap), 0,
		     "%s", c->err_msg);
	cr_assert(bch_fs_write_turn(&writes, &w));
	cr_assert_eq(bch_fs_write_end(c, &writes, &w), 64 << 10, "%s", c->err_msg);
	cr_assert_eq(bch_fs_read(c, a, 0, got, sizeof(got)), (ssize_t)sizeof(got));
	for (unsigned i = 0; i < sizeof(got); i++)
		cr_assert_eq(got[i], 0x77, "live byte %u: %#x", i, got[i]);
	cr_assert_eq(bch_fs_lookup(c, snap, "a", &in_snap), 0);
	cr_assert_eq(bch_fs_read(c, in_snap, 0, got, sizeof(got)), (ssize_t)sizeof(got));
	for (unsigned i = 0; i < sizeof(got); i++)
		cr_assert_eq(got[i], 0x11, "snapshot byte %u: %#x", i, got[i]);
	reopen_fsck();
}

/*
 * A write to a file of a read-only snapshot fails (EROFS): the old way
 * writes nothing to the devices; planned, it is planned, run (its data
 * written), refused at its commit and redone the old way, which refuses:
 * v_write_plan() does not look at the view's ro.  (With the daemon: a
 * file of a read-only snapshot opened for writing.)
 */
Test(unlocked_review, write_to_ro_snapshot)
{
	uint64_t snap, in_snap;

	open_fs(32);
	uint64_t a = mkfile("a");
	memset(big, 0x11, 64 << 10);
	cr_assert_eq(bch_fs_write(c, a, 0, big, 64 << 10), 64 << 10);
	cr_assert_eq(bch_fs_subvol_snapshot(c, BCH_ROOT_INO, BCH_ROOT_INO, "snap", true, &snap), 0,
		     "%s", c->err_msg);
	cr_assert_eq(bch_fs_lookup(c, snap, "a", &in_snap), 0);
	cr_assert_eq(bch_fs_fsync(c), 0);
	assert_write_refused(in_snap, -EROFS, "into a read-only snapshot");
}

/* ------------------------------------------------- reflink and collapse */

static void assert_bytes(uint64_t inum, uint64_t off, size_t len, uint8_t want, const char *what)
{
	static uint8_t got[256 << 10];

	cr_assert_leq(len, sizeof(got));
	cr_assert_eq(bch_fs_read(c, inum, off, got, len), (ssize_t)len, "%s", what);
	for (size_t i = 0; i < len; i++)
		cr_assert_eq(got[i], want, "%s: byte %zu: %#x, want %#x", what, off + i, got[i], want);
}

/*
 * Reflink out of a file with a planned overwrite in flight (its extents
 * become indirect under the write), then into it over the write's range:
 * the write lands after both (a serial order), the source of the remap
 * keeps what it shared, and the reference counts check clean.
 */
Test(unlocked_review, remap_both_ways_beside_planned_write)
{
	struct bch_fs_write_op w;

	open_fs(32);
	uint64_t a = mkfile("a"), b = mkfile("b"), d = mkfile("d");
	memset(big, 0x11, 128 << 10);
	cr_assert_eq(bch_fs_write(c, a, 0, big, 128 << 10), 128 << 10);
	memset(big, 0x22, 128 << 10);
	cr_assert_eq(bch_fs_write(c, d, 0, big, 128 << 10), 128 << 10);
	memset(big, 0x77, 64 << 10);
	cr_assert_eq(bch_fs_write_begin(c, &writes, &w, a, 0, big, 64 << 10, true), 0);
	cr_assert(w.planned);
	/* out: a's first 96 KiB shared into b (whole blocks: no data copied) */
	cr_assert_eq(bch_fs_remap_range(c, a, 0, b, 0, 96 << 10), 96 << 10, "%s", c->err_msg);
	bch_fs_write_run(&w);
	/* in: d's bytes over a's 32..96 KiB, across the end of w's range */
	cr_assert_eq(bch_fs_remap_range(c, d, 0, a, 32 << 10, 64 << 10), 64 << 10, "%s", c->err_msg);
	cr_assert(bch_fs_write_turn(&writes, &w));
	cr_assert_eq(bch_fs_write_end(c, &writes, &w), 64 << 10, "%s", c->err_msg);
	assert_bytes(a, 0, 64 << 10, 0x77, "a: the write");
	assert_bytes(a, 64 << 10, 32 << 10, 0x22, "a: d's remap past the write");
	assert_bytes(a, 96 << 10, 32 << 10, 0x11, "a: its own");
	assert_bytes(b, 0, 96 << 10, 0x11, "b: what a held at the remap");
	assert_bytes(d, 0, 128 << 10, 0x22, "d");
	reopen_fsck();
}

/*
 * A planned write that read the old bytes of its partial block, and a
 * collapse (fallocate COLLAPSE_RANGE) of the block before it meanwhile:
 * what was around it moved, so it is written again the old way, where
 * the collapse left the file (a serial order: collapse, then the write).
 */
Test(unlocked_review, rmw_then_collapse)
{
	struct bch_fs_write_op w;
	uint8_t mine[50];
	static uint8_t old[3 * 4096], got[3 * 4096];

	open_fs(16);
	uint64_t a = mkfile("a");
	for (unsigned i = 0; i < sizeof(old); i++)
		old[i] = (uint8_t)(i / 4096 + 1) * 0x10 + (i % 7);
	memset(mine, 0x55, sizeof(mine));
	cr_assert_eq(bch_fs_write(c, a, 0, old, sizeof(old)), (ssize_t)sizeof(old));
	cr_assert_eq(bch_fs_write_begin(c, &writes, &w, a, 4096 + 100, mine, sizeof(mine), true), 0);
	cr_assert(w.planned, "an unaligned write with none in flight is planned");
	bch_fs_write_run(&w);
	cr_assert_eq(bch_fs_fallocate(c, a, FALLOC_FL_COLLAPSE_RANGE, 0, 4096), 0, "%s", c->err_msg);
	cr_assert(bch_fs_write_turn(&writes, &w));
	cr_assert_eq(bch_fs_write_end(c, &writes, &w), (ssize_t)sizeof(mine));
	cr_assert(w.redone, "the partial block changed: written again the old way");
	/* collapse, then the write: old's blocks 1 and 2 at 0, mine at 4096 + 100 */
	struct stat st;
	cr_assert_eq(bch_fs_getattr(c, a, &st), 0);
	cr_assert_eq(st.st_size, 2 * 4096);
	cr_assert_eq(bch_fs_read(c, a, 0, got, 2 * 4096), 2 * 4096);
	for (unsigned i = 0; i < 2 * 4096; i++) {
		uint8_t want = i >= 4096 + 100 && i < 4096 + 150 ? 0x55 : old[i + 4096];
		cr_assert_eq(got[i], want, "byte %u: %#x, want %#x", i, got[i], want);
	}
	cr_assert_eq(writes.nr, 0);
	reopen_fsck();
}

/* ------------------------------------------------------------- copygc */

/*
 * Copygc (the daemon's background thread) while a planned write is in
 * flight, with the bucket holding the write's space its best victim (all
 * else in it overwritten): copygc finds no key into the planned space and
 * must not free the bucket, nor may any later allocation take it; the
 * write then lands whole.  Safe because the plan counts its sectors live
 * at once (bch_alloc_data_ec() in bch_data_write_plan()) and a bucket is
 * free only with no live sector (bucket_free()).
 */
Test(unlocked_review, copygc_beside_planned_write)
{
	struct bch_fs_write_op w;
	static uint8_t fill_buf[1 << 20], mine[8 << 10];

	open_fs(16);
	uint64_t x = mkfile("x"), a = mkfile("a"), y = mkfile("y");
	memset(big, 0x33, 32 << 10);
	cr_assert_eq(bch_fs_write(c, x, 0, big, 32 << 10), 32 << 10);	/* half the open bucket */
	memset(mine, 0x77, sizeof(mine));	/* unchanged until w ends */
	cr_assert_eq(bch_fs_write_begin(c, &writes, &w, a, 0, mine, sizeof(mine), true), 0);
	cr_assert(w.planned);
	cr_assert_eq(w.pl.nr, 1);
	const struct bch_extent_ptr p = w.pl.w[0].ptrs[0];
	unsigned bs = bch_alloc_bucket_sectors(c, p.dev);
	uint64_t b = p.offset / bs;
	/* another 64 KiB: a new bucket opens, w's is closed with x and the plan in it */
	memset(fill_buf, 0x44, sizeof(fill_buf));
	cr_assert_eq(bch_fs_write(c, y, 0, fill_buf, 64 << 10), 64 << 10);
	cr_assert(!bch_alloc_bucket_open(c, p.dev, b), "w's bucket still open");
	/* x rewritten elsewhere: w's bucket holds nothing live but the plan */
	cr_assert_eq(bch_fs_write(c, x, 0, big, 32 << 10), 32 << 10);
	cr_assert_eq(bch_fs_fsync(c), 0);
	struct bch_alloc_candidate cand[64];
	unsigned nr = bch_alloc_copygc_candidates(c, p.dev, 64, cand);
	bool victim = false;
	for (unsigned i = 0; i < nr; i++)
		victim |= cand[i].bucket == b;
	cr_assert(victim, "w's bucket is no copygc candidate: free (the planned space not counted), "
		  "or not among the emptiest (then this test shows nothing)");
	for (unsigned i = 0; i < 4; i++)
		cr_assert_geq(bch_copygc_step(c, NULL), 0, "%s", c->err_msg);
	cr_assert_eq(bch_alloc_bucket_gen(c, p.dev, b), p.gen, "w's bucket was freed under it");
	/* more data: a freed bucket would be taken now */
	for (unsigned i = 0; i < 6; i++)
		cr_assert_eq(bch_fs_write(c, y, (64 << 10) + (uint64_t)i * sizeof(fill_buf), fill_buf,
					  sizeof(fill_buf)), (ssize_t)sizeof(fill_buf), "%s", c->err_msg);
	bch_fs_write_run(&w);
	cr_assert_eq(w.run_r, 0);
	cr_assert(bch_fs_write_turn(&writes, &w));
	cr_assert_eq(bch_fs_write_end(c, &writes, &w), 8 << 10, "%s", c->err_msg);
	cr_assert(!w.redone);
	assert_bytes(a, 0, 8 << 10, 0x77, "a: the planned write");
	assert_bytes(x, 0, 32 << 10, 0x33, "x");
	reopen_fsck();
}

/* ------------------------------------------------------- reads: reuse */

/*
 * A read planned, then the file overwritten, its old bucket emptied,
 * freed and reopened for another file's data before the run (no data
 * checksum: only the reuse sequence can tell): the run refuses (-EAGAIN:
 * redone under the lock).  The same plan with its sequence forced to the
 * current one returns the other file's bytes -- what the check prevents.
 */
Test(unlocked_review, read_plan_then_bucket_reused)
{
	static uint8_t buf[64 << 10], ybuf[1 << 20];
	struct bch_read_plan pl;

	open_fs(16);
	c->opts.v[Opt_data_checksum] = 0;
	uint64_t x = mkfile("x"), y = mkfile("y");
	memset(big, 0x11, 64 << 10);
	cr_assert_eq(bch_fs_write(c, x, 0, big, 64 << 10), 64 << 10);
	cr_assert_eq(bch_fs_fsync(c), 0);
	cr_assert_eq(bch_fs_read_plan(c, x, 0, 64 << 10, &pl), 0);
	cr_assert(pl.nr >= 1 && pl.p[0].bdev);
	unsigned bs = bch_alloc_bucket_sectors(c, 0);
	uint64_t b = (pl.p[0].dev_off >> BCH_SECTOR_SHIFT) / bs;
	uint8_t gen = bch_alloc_bucket_gen(c, 0, b);
	memset(big, 0x22, 64 << 10);
	cr_assert_eq(bch_fs_write(c, x, 0, big, 64 << 10), 64 << 10);
	/* y rewritten over and over: the rotor comes round to x's old bucket */
	memset(ybuf, 0x99, sizeof(ybuf));
	unsigned rounds = 0;
	while (bch_alloc_bucket_gen(c, 0, b) == gen) {
		cr_assert_lt(++rounds, 200, "x's old bucket never reused");
		cr_assert_eq(bch_fs_fsync(c), 0);
		cr_assert_eq(bch_fs_write(c, y, 0, ybuf, sizeof(ybuf)), (ssize_t)sizeof(ybuf), "%s",
			     c->err_msg);
	}
	cr_assert_eq(bch_fs_fsync(c), 0);
	cr_assert_eq(bch_data_read_plan_run(&pl, buf), -EAGAIN, "a run over a reused bucket passed");
	pl.seq = __atomic_load_n(&c->data_reuse_seq, __ATOMIC_SEQ_CST);
	ssize_t n = bch_data_read_plan_run(&pl, buf);
	bch_data_read_plan_free(&pl);
	cr_assert_eq(n, 64 << 10);
	bool other = false;
	for (unsigned i = 0; i < sizeof(buf); i++)
		other |= buf[i] != 0x11 && buf[i] != 0x22;
	cr_assert(other, "the reused bucket still held x's bytes (then this test shows nothing)");
	assert_bytes(x, 0, 64 << 10, 0x22, "x");
	reopen_fsck();
}

/*
 * The same with the member's discard option: the plan's bucket emptied,
 * its free durable, then discarded (a hole punched in the image: it reads
 * zeros, which no version of the file held) before the run: refused.
 */
Test(unlocked_review, read_plan_then_bucket_discarded)
{
	static uint8_t buf[64 << 10];
	struct bch_format_dev d = { 0 };
	struct bch_format_args args = { 0 };
	struct bch_opts o;
	struct bch_read_plan pl;
	char err[256];

	snprintf(paths[0], sizeof(paths[0]), "%s/d0.img", tmpdir);
	d.path = paths[0];
	d.size = 16 << 20;
	d.bucket_size = 64 << 10;
	d.durability = 1;
	d.discard = true;
	bch_opts_default(&o);
	bch_opt_set(&o, Opt_btree_node_size, 16 << 10);
	bch_opt_set(&o, Opt_metadata_replicas, 1);
	cr_assert_eq(bch_format(&d, 1, &o, NULL, &args, err, sizeof(err)), 0, "%s", err);
	c = testfs_open(paths, 1, 0, 0, err, sizeof(err));
	cr_assert(c, "open: %s", err);
	c->opts.v[Opt_data_checksum] = 0;
	uint64_t x = mkfile("x");
	memset(big, 0x11, 128 << 10);
	cr_assert_eq(bch_fs_write(c, x, 0, big, 128 << 10), 128 << 10);
	cr_assert_eq(bch_fs_fsync(c), 0);
	/* the plan reads x's second 64 KiB: a bucket x fills alone */
	cr_assert_eq(bch_fs_read_plan(c, x, 64 << 10, 64 << 10, &pl), 0);
	cr_assert(pl.nr >= 1 && pl.p[0].bdev);
	memset(big, 0x22, 128 << 10);
	cr_assert_eq(bch_fs_write(c, x, 0, big, 128 << 10), 128 << 10);
	cr_assert_eq(bch_fs_fsync(c), 0);
	uint64_t seq = __atomic_load_n(&c->data_reuse_seq, __ATOMIC_SEQ_CST);
	cr_assert_eq(bch_alloc_discard_free(c), 0, "%s", c->err_msg);
	cr_assert_neq(__atomic_load_n(&c->data_reuse_seq, __ATOMIC_SEQ_CST), seq,
		      "nothing discarded (then this test shows nothing)");
	cr_assert_eq(bch_data_read_plan_run(&pl, buf), -EAGAIN, "a run over a discarded bucket passed");
	pl.seq = __atomic_load_n(&c->data_reuse_seq, __ATOMIC_SEQ_CST);
	ssize_t n = bch_data_read_plan_run(&pl, buf);
	bch_data_read_plan_free(&pl);
	cr_assert_eq(n, 64 << 10);
	unsigned zeros = 0;
	for (unsigned i = 0; i < sizeof(buf); i++)
		zeros += !buf[i];
	cr_assert_gt(zeros, 0, "the plan's bucket was not discarded (then this test shows nothing)");
	assert_bytes(x, 0, 128 << 10, 0x22, "x");
	reopen_fsck();
}
