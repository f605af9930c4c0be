// SPDX-License-Identifier: GPL-2.0
/*
 * io_plan_test.c - a planned plain write's device writes and writeback
 * starts (io.c: bch_data_write_plan_run()).  Writes of 1 MiB and of odd
 * sizes through the planned path (bch_fs_write_begin(), run, end, as the
 * FUSE daemon does them) on an unencrypted filesystem: every unit is
 * written once, with exactly its bytes; from WRITEBACK_START_MIN (256 KiB)
 * up, the writeback of a run of units lying back to back on the device is
 * started once, for exactly the run's range, after the last of its writes
 * (one sync_file_range per run, not one per unit); below it none is.  The
 * file reads back.  Seed fixed and printed.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bcachefs.h"
#include "blockdev.h"
#include "crypt.h"
#include "fs.h"
#include "fs_ops.h"
#include "io.h"
#include "super.h"
#include "tests/lib/ioevents.h"
#include "tests/lib/testfs.h"

#define SEED		0x5e9a7u

static struct testfs_one fs1;
static struct bch_fs *c;
static struct bch_fs_writes writes;
static uint32_t rng;

static uint32_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 17;
	rng ^= rng << 5;
	return rng;
}

static void setup(void)
{
	testfs_one_up(&fs1, "ioplan", 64);
	c = fs1.c;
	cr_assert(!bch_fs_encrypted(c));
}

static void teardown(void)
{
	bch_fs_writes_exit(&writes);
	memset(&writes, 0, sizeof(writes));
	testfs_one_down(&fs1);
}

TestSuite(io_plan, .init = setup, .fini = teardown);

/* The writes and starts of one planned write of len bytes at off, checked. */
static void check_write(uint64_t inum, uint64_t off, size_t len, const uint8_t *data)
{
	struct bch_fs_write_op op;

	cr_assert_eq(bch_fs_write_begin(c, &writes, &op, inum, off, data, len, true), 0);
	cr_assert(op.planned, "%zu bytes at %llu: not planned", len, (unsigned long long)off);
	ioev_nr = 0;
	bch_fs_write_run(&op);
	cr_assert_eq(op.run_r, 0);
	cr_assert_leq(ioev_nr, IOEV_MAX);

	/* each unit written once, with its own bytes */
	for (unsigned k = 0; k < op.pl.nr; k++) {
		const struct bch_write_plan_unit *w = &op.pl.w[k];
		uint64_t dev_off = (uint64_t)w->ptrs[0].offset << BCH_SECTOR_SHIFT;
		uint64_t file_off = (w->start - op.pl.start) << BCH_SECTOR_SHIFT;
		unsigned found = 0;

		cr_assert_eq(w->got, 1);
		for (unsigned e = 0; e < ioev_nr; e++)
			if (!ioev[e].wb && ioev[e].offset <= dev_off &&
			    dev_off + ((uint64_t)w->sectors << BCH_SECTOR_SHIFT) <= ioev[e].offset + ioev[e].len) {
				cr_assert(!memcmp((const char *)ioev[e].buf + (dev_off - ioev[e].offset),
						  (const char *)op.pl.src + file_off,
						  (size_t)w->sectors << BCH_SECTOR_SHIFT),
					  "unit %u: other bytes written", k);
				found++;
			}
		cr_assert_eq(found, 1, "%zu bytes: unit %u written %u times", len, k, found);
	}

	/* the runs of units back to back on the device, and the starts expected */
	unsigned starts = 0, runs = 0;
	for (unsigned e = 0; e < ioev_nr; e++)
		starts += ioev[e].wb;
	for (unsigned k = 0; k < op.pl.nr;) {
		const struct bch_write_plan_unit *a = &op.pl.w[k];
		uint64_t run_off = (uint64_t)a->ptrs[0].offset << BCH_SECTOR_SHIFT, run_len = 0;
		unsigned n = 0;

		while (k + n < op.pl.nr &&
		       (uint64_t)op.pl.w[k + n].ptrs[0].offset << BCH_SECTOR_SHIFT == run_off + run_len) {
			run_len += (uint64_t)op.pl.w[k + n].sectors << BCH_SECTOR_SHIFT;
			n++;
		}
		runs++;
		if (len >= (256U << 10)) {
			int started = -1, last_write = -1;
			for (unsigned e = 0; e < ioev_nr; e++) {
				if (ioev[e].wb && ioev[e].offset == run_off) {
					cr_assert_eq(ioev[e].len, run_len, "%zu bytes: a start of %llu for a run of %llu",
						     len, (unsigned long long)ioev[e].len,
						     (unsigned long long)run_len);
					started = e;
				}
				if (!ioev[e].wb && ioev[e].offset >= run_off && ioev[e].offset < run_off + run_len)
					last_write = e;
			}
			cr_assert_geq(started, 0, "%zu bytes: run at %llu not started", len,
				      (unsigned long long)run_off);
			cr_assert_gt(started, last_write, "%zu bytes: writeback started before the last write",
				     len);
		}
		k += n;
	}
	if (len >= (256U << 10))
		cr_assert_eq(starts, runs, "%zu bytes in %u units, %u runs: %u writeback starts", len,
			     op.pl.nr, runs, starts);
	else
		cr_assert_eq(starts, 0, "%zu bytes: %u writeback starts", len, starts);
	cr_assert(bch_fs_write_turn(&writes, &op));
	cr_assert_eq(bch_fs_write_end(c, &writes, &op), (ssize_t)len, "%s", c->err_msg);
}

Test(io_plan, writeback_started_once_per_run_after_its_writes)
{
	static const size_t sizes[] = { 1 << 20, 1 << 20, 384 << 10, 256 << 10, 192 << 10, 12 << 10,
					1 << 20, 640 << 10 };
	uint8_t *data = malloc(1 << 20), *back = malloc(1 << 20);
	uint64_t inum, off = 0;

	printf("io_plan: seed %#x\n", SEED);
	rng = SEED;
	cr_assert(data && back);
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "wb", S_IFREG | 0644, 0, 0, 0, &inum), 0);
	ioev_attach(c->devs[0]->bdev);
	for (unsigned n = 0; n < sizeof(sizes) / sizeof(sizes[0]); n++) {
		for (size_t i = 0; i < sizes[n]; i++)
			data[i] = rnd();
		check_write(inum, off, sizes[n], data);
		cr_assert_eq(bch_fs_read(c, inum, off, back, sizes[n]), (ssize_t)sizes[n]);
		cr_assert(!memcmp(back, data, sizes[n]), "write %u: reads back other bytes", n);
		off += 1 << 20;	/* each in a chunk of its own: one transaction, planned */
	}
	ioev_detach(c->devs[0]->bdev);
	cr_assert_eq(c->nr_errors, 0, "errors counted: %s", c->err_msg);
	free(data);
	free(back);
}
