// SPDX-License-Identifier: GPL-2.0
/*
 * ec_move_test.c - dissolving stripes (ec_move.h) and the move path's rules
 * for striped keys: on four devices (erasure_code, data_replicas=3: stripes
 * of 2 data and 2 parity blocks) with every file striped,
 *  - the move path refuses to rewrite a striped pointer unless the op says
 *    unstripe (the stripe's redundancy is not a plain copy's);
 *  - a key that changed after it was queued keeps the stripe: the deletion
 *    handed to bch_mover_flush_extra() is not committed, the stripe and the
 *    pieces still pointing into it stay consistent (fsck -n clean);
 *  - the builder's own stripes are never chosen by compaction (no churn),
 *    and the choice by member names exactly the stripes with a block there.
 * Seed fixed (srandom 7335).
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
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define NDEV		4
#define NFILES		4
#define FSIZE		(128u << 10)

static char tmpdir[64], paths[NDEV][128];
static unsigned char model[NFILES][FSIZE];

static void overwrite(struct bch_fs *c, const uint64_t *inum, unsigned f, size_t off, size_t len)
{
	static unsigned char buf[FSIZE];

	for (size_t i = 0; i < len; i++)
		buf[i] = random();
	cr_assert_eq(bch_fs_write(c, inum[f], off, buf, len), (ssize_t)len, "%s", c->err_msg);
	memcpy(model[f] + off, buf, len);
}

static struct bch_fs *setup(uint64_t *inum)
{
	const struct testfs_ec geom = { .nr = NDEV, .size_mb = 8, .bucket_bytes = 64 << 10,
					.data_replicas = 3, .uuid = { 0xec, 0x74 } };

	test_tmpdir_make(tmpdir, sizeof(tmpdir), "ecmove");
	struct bch_fs *c = testfs_ec_up(tmpdir, &geom, paths, NULL);
	srandom(7335);
	for (unsigned f = 0; f < NFILES; f++) {
		char name[16];

		snprintf(name, sizeof(name), "f%u", f);
		cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &inum[f]), 0);
		overwrite(c, inum, f, 0, FSIZE);
	}
	struct bch_move_stats s = { 0 };
	while (bch_ec_step(c, UINT64_MAX, true, &s) == 1)
		;
	cr_assert_eq(bch_fs_fsync(c), 0);
	cr_assert_geq(testfs_count_keys(c, BCH_BTREE_ID_stripes, BCH_BKEY_stripe), 2);
	return c;
}

static void teardown(struct bch_fs *c)
{
	char msg[512];

	cr_assert_eq(bch_fs_close(c), 0);
	const char *bad = testfs_fsck_problem(paths, NDEV, false, msg, sizeof(msg));
	cr_assert(!bad, "%s", bad);
	test_tmpdir_remove(tmpdir);
}

/* The first extent of inum (a striped one, after setup). */
static struct bch_bkey *first_extent(struct bch_fs *c, uint64_t inum)
{
	struct bch_bkey *k = NULL;

	cr_assert_eq(bch_btree_peek(c, BCH_BTREE_ID_extents, POS(inum, 0, 0),
				    POS(inum, UINT64_MAX, UINT32_MAX), &k), 0);
	cr_assert_eq(k->type, BCH_BKEY_extent);
	const struct bch_extent *e = bkey_val(k);
	cr_assert(e->ptrs[0].flags & BCH_EXTENT_PTR_STRIPED, "not striped");
	return k;
}

static bool stripe_exists(struct bch_fs *c, uint32_t idx)
{
	struct bch_bkey *k = NULL;
	bool there = !bch_btree_lookup(c, BCH_BTREE_ID_stripes, POS(0, idx, 0), &k) &&
		     k->type == BCH_BKEY_stripe;

	free(k);
	c->err_msg[0] = 0;
	return there;
}

Test(ec_move, striped_rewrite_needs_unstripe)
{
	uint64_t inum[NFILES];
	struct bch_fs *c = setup(inum);
	struct bch_bkey *k = first_extent(c, inum[0]);
	struct bch_move_stats s = { 0 };
	struct bch_mover *m;
	struct bch_move_op op = { .rewrite = 1, .nr_new = 3 };

	cr_assert_eq(bch_mover_init(c, &s, &m), 0);
	cr_assert_eq(bch_mover_add(m, k, &op), -EINVAL, "a striped pointer rewritten as a plain copy");
	op.same_dev = true;	/* copygc's shape */
	op.nr_new = 1;
	cr_assert_eq(bch_mover_add(m, k, &op), -EINVAL);
	cr_assert_eq(bch_mover_exit(m), 0);
	cr_assert_eq(s.keys_moved, 0);
	struct bch_bkey *now = first_extent(c, inum[0]);
	cr_assert(!memcmp(now, k, bkey_bytes(k)), "the key changed");
	cr_assert_eq(bch_move_ptrs_off_target(c, k, 1 /* any target bit */), 0,
		     "a striped pointer is off target");
	free(now);
	free(k);
	teardown(c);
}

Test(ec_move, raced_key_keeps_its_stripe)
{
	uint64_t inum[NFILES];
	struct bch_fs *c = setup(inum);
	struct bch_bkey *k = first_extent(c, inum[0]);
	uint32_t idx = ((const struct bch_extent *)bkey_val(k))->ptrs[0].stripe;
	struct bch_move_stats s = { 0 };
	struct bch_mover *m;
	struct bch_move_op op = { .rewrite = 1, .nr_new = 3, .unstripe = true };
	bool done = true;

	cr_assert_eq(bch_mover_init(c, &s, &m), 0);
	cr_assert_eq(bch_mover_add(m, k, &op), 0, "%s", s.last_problem);
	/* a write into the middle of the extent: the key splits, pieces stay striped */
	overwrite(c, inum, 0, 8192, 4096);
	struct bch_bkey del = { .u64s = BCH_BKEY_U64s, .type = BCH_BKEY_deleted, .p = POS(0, idx, 0) };
	cr_assert_eq(bch_mover_flush_extra(m, BCH_BTREE_ID_stripes, &del, &done), 0);
	cr_assert(!done, "the stripe was deleted though a key into it raced");
	cr_assert_eq(s.keys_raced, 1);
	cr_assert(stripe_exists(c, idx));
	cr_assert_eq(bch_mover_exit(m), 0);
	free(k);
	teardown(c);
}

Test(ec_move, builder_stripes_are_not_compacted)
{
	uint64_t inum[NFILES];
	struct bch_fs *c = setup(inum);
	struct bch_ec_dissolve d = { .kind = BCH_EC_SELECT_sparse };
	struct bch_move_stats s = { 0 };
	uint64_t n, sectors;

	cr_assert_eq(bch_ec_dissolve_count(c, &d, &n, &sectors), 0);
	cr_assert_eq(n, 0, "%llu of the builder's stripes judged sparse", (unsigned long long)n);
	cr_assert_eq(bch_ec_compact_step(c, 1 << 20, &s), 0);
	cr_assert_eq(s.stripes_dissolved, 0);

	/* by member: each stripe with a block on member 1, and no other */
	struct bch_ec_dissolve on1 = { .kind = BCH_EC_SELECT_dev, .dev = 1 };
	struct btree_iter it;
	const struct bch_bkey *k;
	uint64_t want = 0;
	int err = 0;
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_stripes, POS_MIN, POS_MAX);
	while ((k = bch_btree_iter_next(&it, &err))) {
		const struct bch_stripe *sv = bch_stripe_val(k);
		bool on = false;
		for (unsigned i = 0; i < sv->nr_blocks; i++)
			on |= sv->blocks[i].ptr.dev == 1;
		cr_assert_eq(bch_ec_stripe_selected(c, k, &on1), on);
		want += on;
	}
	bch_btree_iter_exit(&it);
	cr_assert_eq(bch_ec_dissolve_count(c, &on1, &n, &sectors), 0);
	cr_assert_eq(n, want);
	cr_assert_gt(n, 0);

	/* half of f1 rewritten: its stripe has a data block left with nothing live */
	overwrite(c, inum, 1, 0, FSIZE / 2);
	cr_assert_eq(bch_ec_dissolve_count(c, &d, &n, &sectors), 0);
	cr_assert_geq(n, 1, "no stripe judged sparse after half a file was rewritten");
	cr_assert_eq(bch_ec_compact_step(c, 1 << 20, &s), 1);
	cr_assert_geq(s.stripes_dissolved, 1);
	cr_assert_eq(bch_ec_dissolve_count(c, &d, &n, &sectors), 0);
	cr_assert_eq(n, 0);
	teardown(c);
}

/*
 * An evacuation in small steps, with writes into the striped files and
 * compaction steps between them (as the daemon interleaves requests with
 * the job's steps, the lock released): keys chosen in one step and changed
 * before the next are caught (raced) and found again by the next pass;
 * the job ends with no stripe on the member, every file as written, and
 * fsck -n clean.
 */
Test(ec_move, evacuate_steps_with_writes_between, .timeout = 120)
{
	uint64_t inum[NFILES];
	struct bch_fs *c = setup(inum);
	char err[256];
	struct bch_data_job j = { .kind = BCH_DATA_JOB_evacuate, .dev = 2 };
	static unsigned char buf[FSIZE];
	int r;

	cr_assert_eq(bch_dev_set_state(c, 2, BCH_MEMBER_STATE_ro, true, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(bch_data_job_init(c, &j, err, sizeof(err)), 0, "%s", err);
	unsigned steps = 0;
	while ((r = bch_data_job_step(c, &j, 16 << 10)) == 1) {
		if (steps++ < 12) {
			unsigned f = random() % NFILES;
			size_t off = (random() % (FSIZE / 4096)) * 4096;
			overwrite(c, inum, f, off, 4096);
		}
		if (steps % 5 == 0) {
			struct bch_move_stats cs = { 0 };
			cr_assert_geq(bch_ec_compact_step(c, 1 << 10, &cs), 0, "%s", c->err_msg);
		}
	}
	cr_assert_eq(r, 0, "evacuate: %s", c->err_msg);
	cr_assert_eq(j.stuck, 0, "evacuate left %llu: %s", (unsigned long long)j.stuck, j.problem);
	cr_assert_gt(steps, 4, "the job took only %u steps", steps);
	fprintf(stderr, "ec_move: evacuate in %u steps, %llu stripes dissolved, %llu passes, %llu raced\n",
		steps, (unsigned long long)j.stripes_done, (unsigned long long)j.passes,
		(unsigned long long)j.stuck_raced);
	cr_assert_gt(j.stripes_done, 0);
	bch_data_job_exit(&j);
	struct bch_ec_dissolve on2 = { .kind = BCH_EC_SELECT_dev, .dev = 2 };
	uint64_t n, sectors;
	cr_assert_eq(bch_ec_dissolve_count(c, &on2, &n, &sectors), 0);
	cr_assert_eq(n, 0, "%llu stripes still have a block on member 2", (unsigned long long)n);
	for (unsigned f = 0; f < NFILES; f++) {
		cr_assert_eq(bch_fs_read(c, inum[f], 0, buf, FSIZE), (ssize_t)FSIZE, "%s", c->err_msg);
		cr_assert(!memcmp(buf, model[f], FSIZE), "f%u differs", f);
	}
	teardown(c);
}
