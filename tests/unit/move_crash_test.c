// SPDX-License-Identifier: GPL-2.0
/*
 * move_crash_test.c - power cuts while the move path works: on two devices
 * (ssd: foreground and promote target; hdd: background target), a recorded
 * workload of rebalance steps, reads that promote, and foreground writes
 * racing with them (a write lands between a move's read and its commit), with
 * an fsync now and then, is cut at every recorded write and flush, with
 * random subsets of the unflushed writes surviving and a torn one.  Every
 * crash image must open (replay), show each file as it was after some
 * operation at or after the last fsync before the cut (moves never change
 * what a file reads as), and pass fsck -n with no problem (no space counted
 * twice or lost, no pointer to data that did not land).  Seed printed;
 * SOAK=1 cuts each point with three seeds.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bcachefs.h"
#include "btree.h"
#include "extents.h"
#include "format.h"
#include "fs.h"
#include "fs_ops.h"
#include "fsck.h"
#include "journal.h"
#include "move.h"
#include "rebalance.h"
#include "tests/lib/crashcut.h"
#include "tests/lib/iorecord.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define NFILES		4
#define FSIZE		(256u << 10)
#define NOPS		60

static char tmpdir[64], paths[2][128], crash[2][128];
static unsigned char model[NFILES][FSIZE];
static uint64_t states[NOPS + 1][NFILES];	/* digest of each file after op */
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

Test(move_crash, moves_survive_every_cut, .timeout = 900)
{
	struct bch_format_dev devs[2] = {
		{ .path = paths[0], .size = 16 << 20, .bucket_size = 64 << 10, .durability = 1, .label = "ssd" },
		{ .path = paths[1], .size = 16 << 20, .bucket_size = 64 << 10, .durability = 1, .label = "hdd" },
	};
	struct bch_format_args args = { .have_uuid = true, .user_uuid = { 0x30, 0x7e } };
	const char *targets[BCH_OPT_NR] = { 0 };
	struct bch_opts o;
	char err[256];
	unsigned seed = 4242, seeds = getenv("SOAK") ? 3 : 1;

	fprintf(stderr, "move_crash: seed %u, %u ops\n", seed, NOPS);
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "movecrash");
	for (unsigned d = 0; d < 2; d++) {
		snprintf(paths[d], sizeof(paths[d]), "%s/d%u.img", tmpdir, d);
		snprintf(crash[d], sizeof(crash[d]), "%s/crash%u.img", tmpdir, d);
	}
	targets[Opt_foreground_target] = "ssd";
	targets[Opt_promote_target] = "ssd";
	targets[Opt_background_target] = "hdd";
	bch_opts_default(&o);
	bch_opt_set(&o, Opt_btree_node_size, 8192);
	bch_opt_set(&o, Opt_data_replicas, 1);
	bch_opt_set(&o, Opt_metadata_replicas, 1);
	cr_assert_eq(bch_format(devs, 2, &o, targets, &args, err, sizeof(err)), 0, "%s", err);

	struct bch_fs *c = testfs_open(paths, 2, 0, 0, err, sizeof(err));
	cr_assert(c, "%s", err);
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

	struct iorec *rec = iorec_new(2);
	cr_assert_eq(iorec_attach(rec, 0, c->devs[0]->bdev), 0);
	cr_assert_eq(iorec_attach(rec, 1, c->devs[1]->bdev), 0);
	unsigned last_sync = 0, synced_op[NOPS + 1] = { 0 };
	static unsigned char buf[FSIZE];
	for (unsigned op = 1; op <= NOPS; op++) {
		unsigned f = random() % NFILES, k = random() % 10;
		if (k < 4) {
			/* a little rebalance, maybe with a write racing one move */
			struct bch_move_stats s = { 0 };
			bool parked;
			int r = bch_rebalance_step(c, 64 + random() % 256, &s, &parked);
			cr_assert_geq(r, 0, "op %u: rebalance: %s", op, c->err_msg);
		} else if (k < 6) {
			/* a move read, then a foreground write, then the commit: raced */
			struct bch_bkey *key = NULL;
			if (!bch_btree_peek(c, BCH_BTREE_ID_extents, POS(inum[f], 1, 0),
					    POS(inum[f], UINT64_MAX, 0), &key) && key->type == BCH_BKEY_extent) {
				struct bch_move_stats s = { 0 };
				struct bch_mover *m;
				struct bch_move_op mo = { .rewrite = 1, .nr_new = 1 };
				cr_assert_eq(bch_mover_init(c, &s, &m), 0);
				bch_mover_add(m, key, &mo);
				size_t off = (bch_extent_start(key) << 9) + (random() % 4) * 512;
				unsigned char d[1024];
				for (unsigned i = 0; i < sizeof(d); i++)
					d[i] = random();
				if (off + sizeof(d) <= FSIZE) {
					cr_assert_eq(bch_fs_write(c, inum[f], off, d, sizeof(d)), (ssize_t)sizeof(d));
					memcpy(model[f] + off, d, sizeof(d));
				}
				cr_assert_eq(bch_mover_exit(m), 0, "op %u: %s", op, c->err_msg);
			}
			c->err_msg[0] = 0;
			free(key);
		} else if (k < 8) {
			/* a read: promotes what it reads from hdd */
			cr_assert_eq(bch_fs_read(c, inum[f], 0, buf, FSIZE), (ssize_t)FSIZE);
			cr_assert(!memcmp(buf, model[f], FSIZE), "op %u: f%u reads wrong", op, f);
		} else {
			size_t off = random() % (FSIZE - 8192), len = 1 + random() % 8192;
			for (size_t i = 0; i < len; i++)
				buf[i] = random();
			cr_assert_eq(bch_fs_write(c, inum[f], off, buf, len), (ssize_t)len);
			memcpy(model[f] + off, buf, len);
		}
		snapshot(op);
		if (random() % 5 == 0) {
			cr_assert_eq(bch_fs_fsync(c), 0);
			last_sync = op;
		}
		synced_op[op] = last_sync;
		op_event[op] = iorec_nr_events(rec);
	}
	iorec_detach(rec, 0);
	iorec_detach(rec, 1);
	cr_assert_eq(bch_fs_close(c), 0);

	size_t nev = iorec_nr_events(rec);
	fprintf(stderr, "move_crash: %zu events\n", nev);
	const struct crash_cuts cuts = { .rec = rec, .ndev = 2, .crash = crash, .nops = NOPS,
					 .op_event = op_event, .synced_op = synced_op, .seed = seed,
					 .seeds = seeds, .check = check, .name = "move_crash" };
	crash_cuts_run(&cuts);
	iorec_free(rec);
	test_tmpdir_remove(tmpdir);
}
