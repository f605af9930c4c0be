// SPDX-License-Identifier: GPL-2.0
/*
 * ec_crash_test.c - power cuts while the stripe builder works (ec.h): on
 * four devices with erasure_code and data_replicas=3 (stripes of 2 data and
 * 2 parity blocks), a recorded workload of stripe builds (rebalance steps)
 * with writes and fsyncs between them is cut at every recorded write and
 * flush, with random subsets of the unflushed writes surviving and a torn
 * one.  Every crash image must open (replay), show each file as it was
 * after some operation at or after the last fsync before the cut (a build
 * never changes what a file reads as: before its commit the replicas serve,
 * after it the stripe), and pass fsck -n with no problem (no space counted
 * twice or lost, no striped pointer into a stripe that did not land).
 * Seed printed; SOAK=1 cuts each point with three seeds.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bcachefs.h"
#include "btree.h"
#include "format.h"
#include "fs.h"
#include "fs_ops.h"
#include "fsck.h"
#include "move.h"
#include "rebalance.h"
#include "tests/lib/crashcut.h"
#include "tests/lib/iorecord.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define NDEV		4
#define NFILES		3
#define FSIZE		(128u << 10)
#define NOPS		8

static char tmpdir[64], paths[NDEV][128], crash[NDEV][128];
static unsigned char model[NFILES][FSIZE];
static uint64_t states[NOPS + 1][NFILES];
static size_t op_event[NOPS + 1];

static void snapshot(unsigned op)
{
	testfs_model_digest(&model[0][0], NFILES, FSIZE, &states[0][0], op);
}

/* NULL when the files match the state after some op in from..to. */
static const char *check(struct bch_fs *c, unsigned from, unsigned to, char *msg, size_t len)
{
	return testfs_model_check(c, NFILES, FSIZE, &states[0][0], from, to, msg, len);
}

Test(ec_crash, builds_survive_every_cut, .timeout = 900)
{
	const struct testfs_ec geom = { .nr = NDEV, .size_mb = 8, .bucket_bytes = 64 << 10,
					.data_replicas = 3, .uuid = { 0xec, 0x34 } };
	unsigned seed = 3434, seeds = getenv("SOAK") ? 3 : 1;
	static unsigned char buf[FSIZE];

	fprintf(stderr, "ec_crash: seed %u, %u ops\n", seed, NOPS);
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "eccrash");
	struct bch_fs *c = testfs_ec_up(tmpdir, &geom, paths, crash);
	srandom(seed);
	uint64_t inum[NFILES];
	for (unsigned f = 0; f < NFILES; f++) {
		char name[16];

		snprintf(name, sizeof(name), "f%u", f);
		cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &inum[f]), 0);
		for (size_t i = 0; i < FSIZE; i++)
			model[f][i] = random();
		cr_assert_eq(bch_fs_write(c, inum[f], 0, model[f], FSIZE), (ssize_t)FSIZE);
	}
	cr_assert_eq(bch_fs_fsync(c), 0);
	snapshot(0);

	struct iorec *rec = iorec_new(NDEV);
	for (unsigned d = 0; d < NDEV; d++)
		cr_assert_eq(iorec_attach(rec, d, c->devs[d]->bdev), 0);
	unsigned last_sync = 0, synced_op[NOPS + 1] = { 0 }, built = 0;
	for (unsigned op = 1; op <= NOPS; op++) {
		unsigned f = random() % NFILES;

		if (op % 2) {
			/* stripes for a budget of 128 to 384 sectors */
			struct bch_move_stats s = { 0 };
			bool parked;
			int r = bch_rebalance_step(c, 128 + random() % 256, &s, &parked);
			cr_assert_geq(r, 0, "op %u: rebalance: %s", op, c->err_msg);
			built += s.keys_moved;
		} else {
			size_t off = random() % (FSIZE - 8192), len = 1 + random() % 8192;
			for (size_t i = 0; i < len; i++)
				buf[i] = random();
			cr_assert_eq(bch_fs_write(c, inum[f], off, buf, len), (ssize_t)len);
			memcpy(model[f] + off, buf, len);
		}
		snapshot(op);
		if (random() % 2 == 0) {
			cr_assert_eq(bch_fs_fsync(c), 0);
			last_sync = op;
		}
		synced_op[op] = last_sync;
		op_event[op] = iorec_nr_events(rec);
	}
	for (unsigned d = 0; d < NDEV; d++)
		iorec_detach(rec, d);
	cr_assert_gt(built, 0, "no extent was striped");
	cr_assert_eq(bch_fs_close(c), 0);

	size_t nev = iorec_nr_events(rec);
	fprintf(stderr, "ec_crash: %zu events, %u extents striped\n", nev, built);
	const struct crash_cuts cuts = { .rec = rec, .ndev = NDEV, .crash = crash, .nops = NOPS,
					 .op_event = op_event, .synced_op = synced_op, .seed = seed,
					 .seeds = seeds, .check = check, .name = "ec_crash" };
	crash_cuts_run(&cuts);
	iorec_free(rec);
	test_tmpdir_remove(tmpdir);
}
