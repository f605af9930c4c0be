// SPDX-License-Identifier: GPL-2.0
/*
 * ec_move_crash_test.c - power cuts while stripes are dissolved (ec_move.h):
 * on four devices with erasure_code and data_replicas=3 (stripes of 2 data
 * and 2 parity blocks), every file striped first, then a recorded workload:
 * a file rewritten (a data block of its stripe emptied), stripe
 * compaction (rebalance's step), a write, member 3 set read-only and
 * evacuated (the data job: every stripe with a block there dissolved), each
 * op fsynced.  The recording is cut at every write and flush, with random
 * subsets of the unflushed writes surviving and a torn one.  Every crash
 * image must open (replay), show each file as it was after the last op
 * done or the one under way (a dissolve never changes what a file reads
 * as), and pass fsck -n with no problem: no striped pointer into a deleted
 * stripe, no stripe left with nothing pointing into it, no space counted
 * twice or lost.  Seed printed; SOAK=1 cuts each point with three seeds.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bcachefs.h"
#include "data_job.h"
#include "device.h"
#include "ec.h"
#include "ec_move.h"
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
#define NFILES		4
#define FSIZE		(64u << 10)	/* one extent, one data block */
#define NOPS		5

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

static void overwrite(struct bch_fs *c, const uint64_t *inum, unsigned f, size_t off, size_t len)
{
	static unsigned char buf[FSIZE];

	for (size_t i = 0; i < len; i++)
		buf[i] = random();
	cr_assert_eq(bch_fs_write(c, inum[f], off, buf, len), (ssize_t)len, "%s", c->err_msg);
	memcpy(model[f] + off, buf, len);
}

Test(ec_move_crash, dissolves_survive_every_cut, .timeout = 900)
{
	const struct testfs_ec geom = { .nr = NDEV, .size_mb = 8, .bucket_bytes = 64 << 10,
					.data_replicas = 3, .uuid = { 0xec, 0x73 } };
	char err[256];
	unsigned seed = 7334, seeds = getenv("SOAK") ? 3 : 1;

	fprintf(stderr, "ec_move_crash: seed %u, %u ops\n", seed, NOPS);
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "ecmovecrash");
	struct bch_fs *c = testfs_ec_up(tmpdir, &geom, paths, crash);
	srandom(seed);
	uint64_t inum[NFILES];
	for (unsigned f = 0; f < NFILES; f++) {
		char name[16];

		snprintf(name, sizeof(name), "f%u", f);
		cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &inum[f]), 0);
		overwrite(c, inum, f, 0, FSIZE);
	}
	cr_assert_eq(bch_fs_fsync(c), 0);
	struct bch_move_stats s = { 0 };
	while (bch_ec_step(c, UINT64_MAX, true, &s) == 1)
		;
	cr_assert_eq(bch_fs_fsync(c), 0);
	unsigned before = testfs_count_keys(c, BCH_BTREE_ID_stripes, BCH_BKEY_stripe);
	cr_assert_geq(before, 2, "only %u stripes built", before);
	snapshot(0);

	struct iorec *rec = iorec_new(NDEV);
	for (unsigned d = 0; d < NDEV; d++)
		cr_assert_eq(iorec_attach(rec, d, c->devs[d]->bdev), 0);
	uint64_t compacted = 0, dissolved = 0;
	for (unsigned op = 1; op <= NOPS; op++) {
		switch (op) {
		case 1:		/* f0 rewritten: its stripe's data block empties */
			overwrite(c, inum, 0, 0, FSIZE);
			break;
		case 2: {	/* compaction */
			struct bch_move_stats cs = { 0 };
			int r;
			while ((r = bch_ec_compact_step(c, 1 << 20, &cs)) == 1)
				;
			cr_assert_eq(r, 0, "compaction: %s", c->err_msg);
			compacted = cs.stripes_dissolved;
			break;
		}
		case 3:
			overwrite(c, inum, 2, 4096, 8192);
			break;
		case 4: {	/* evacuate member 3 */
			struct bch_data_job j = { .kind = BCH_DATA_JOB_evacuate, .dev = 3 };
			int r;
			cr_assert_eq(bch_dev_set_state(c, 3, BCH_MEMBER_STATE_ro, true, err, sizeof(err)), 0,
				     "%s", err);
			cr_assert_eq(bch_data_job_init(c, &j, err, sizeof(err)), 0, "%s", err);
			while ((r = bch_data_job_step(c, &j, 1 << 20)) == 1)
				;
			cr_assert_eq(r, 0, "evacuate: %s", c->err_msg);
			cr_assert_eq(j.stuck, 0, "evacuate: %s", j.problem);
			dissolved = j.stripes_done;
			break;
		}
		case 5:
			overwrite(c, inum, 1, 0, 4096);
			break;
		}
		cr_assert_eq(bch_fs_fsync(c), 0);
		snapshot(op);
		op_event[op] = iorec_nr_events(rec);
	}
	for (unsigned d = 0; d < NDEV; d++)
		iorec_detach(rec, d);
	cr_assert_gt(compacted, 0, "compaction dissolved no stripe");
	cr_assert_gt(dissolved, 0, "evacuate dissolved no stripe");
	cr_assert_eq(testfs_count_keys(c, BCH_BTREE_ID_stripes, BCH_BKEY_stripe), 0, "stripes left after evacuating member 3");
	cr_assert_eq(bch_fs_close(c), 0);

	size_t nev = iorec_nr_events(rec);
	fprintf(stderr, "ec_move_crash: %zu events, %llu stripes compacted, %llu dissolved by evacuate\n",
		nev, (unsigned long long)compacted, (unsigned long long)dissolved);
	const struct crash_cuts cuts = { .rec = rec, .ndev = NDEV, .crash = crash, .nops = NOPS,
					 .op_event = op_event, .synced_op = NULL, .seed = seed,
					 .seeds = seeds, .check = check, .name = "ec_move_crash" };
	crash_cuts_run(&cuts);
	iorec_free(rec);
	test_tmpdir_remove(tmpdir);
}
