// SPDX-License-Identifier: GPL-2.0
/*
 * sb_crash_test.c - power cuts during superblock writes (DESIGN.md section 7
 * on the superblock layer): a two-device filesystem gets five superblock
 * updates (each labelled with its generation, written to every copy of both
 * devices, flushed per device).  For every event of the recording as the cut
 * point, with several seeds deciding which unflushed writes survive and one
 * torn write, the rebuilt images must:
 *   - each still have a valid superblock (old or new, never none);
 *   - hold at least the newest update whose flush on that device preceded
 *     the cut, with the label that update wrote (never a mix);
 *   - be repaired by fsck pass 1 (-y) so that -n then finds nothing.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blockdev.h"
#include "errcode.h"
#include "format.h"
#include "fsck.h"
#include "super.h"
#include "tests/lib/iorecord.h"
#include "tests/lib/tmpdir.h"

#define NR_UPDATES	5
#define SEEDS		6

static char tmpdir[64];

static void label_of(unsigned gen, char *buf)
{
	memset(buf, 0, BCH_SB_LABEL_SIZE);
	snprintf(buf, BCH_SB_LABEL_SIZE, "generation %u", gen);
}

Test(sb_crash, every_cut_leaves_a_valid_superblock, .timeout = 300)
{
	struct bch_format_dev fdevs[2] = { 0 };
	struct bch_format_args args = { .no_btrees = true };
	struct bch_opts o;
	char err[256], path[2][128], crash[2][128];
	struct bch_blockdev *dev[2];
	/* event count after update k's flush on device d: durable from there */
	size_t durable_at[2][NR_UPDATES + 1] = { { 0 } };
	uint64_t seq_of[NR_UPDATES + 1];

	test_tmpdir_make(tmpdir, sizeof(tmpdir), "sbcrash");
	for (unsigned d = 0; d < 2; d++) {
		snprintf(path[d], sizeof(path[d]), "%s/d%u.img", tmpdir, d);
		snprintf(crash[d], sizeof(crash[d]), "%s/crash%u.img", tmpdir, d);
		fdevs[d].path = path[d];
		fdevs[d].size = (6 + 2 * d) << 20;	/* small: every crash state is written out */
		fdevs[d].bucket_size = 64 << 10;
		fdevs[d].durability = 1;
	}
	bch_opts_default(&o);
	bch_opt_set(&o, Opt_btree_node_size, 64 << 10);
	cr_assert_eq(bch_format(fdevs, 2, &o, NULL, &args, err, sizeof(err)), 0, "%s", err);

	struct iorec *rec = iorec_new(2);
	struct bch_sb *sb[2];
	for (unsigned d = 0; d < 2; d++) {
		cr_assert_eq(bch_dev_open(path[d], 0, &dev[d]), 0);
		cr_assert_eq(bch_sb_read(dev[d], &sb[d], NULL), 0);
		cr_assert_eq(iorec_attach(rec, d, dev[d]), 0);
	}
	seq_of[0] = sb[0]->seq;
	struct bch_sb_layout own[2] = { sb[0]->layout, sb[1]->layout };
	/* the workload: what bch_write_super does, update by update */
	for (unsigned k = 1; k <= NR_UPDATES; k++) {
		for (unsigned d = 0; d < 2; d++) {
			sb[0]->seq = seq_of[0] + k;
			label_of(k, (char *)sb[0]->label);
			int wret = bch_sb_write_dev(dev[d], sb[0], d, &own[d]);
			cr_assert_eq(wret, 0, "update %u dev %u: %s", k, d, bch_err_str(wret));
			durable_at[d][k] = iorec_nr_events(rec);
		}
		seq_of[k] = seq_of[0] + k;
	}
	size_t nr_events = iorec_nr_events(rec);
	cr_assert_gt(nr_events, NR_UPDATES * 2 * 3);

	unsigned checked = 0;
	for (size_t at = 0; at <= nr_events; at++)
		for (unsigned seed = 0; seed < (at ? SEEDS : 1); seed++) {
			struct iorec_cut cut = { .at = at, .seed = seed * 7919 + at,
						 .keep_pct = 50, .torn = seed % 2 };
			struct iorec_plan plan;
			char *why = NULL;

			cr_assert_eq(iorec_plan(rec, &cut, &plan), 0);
			for (unsigned d = 0; d < 2; d++)
				cr_assert_eq(iorec_write_image(rec, &plan, d, crash[d]), 0);

			for (unsigned d = 0; d < 2; d++) {
				struct bch_blockdev *bd;
				struct bch_sb *got = NULL;
				unsigned want = 0;
				char label[BCH_SB_LABEL_SIZE];

				for (unsigned k = 1; k <= NR_UPDATES; k++)
					if (durable_at[d][k] <= at)
						want = k;
				cr_assert_eq(bch_dev_open(crash[d], BCH_DEV_RDONLY, &bd), 0);
				int ret = bch_sb_read(bd, &got, NULL);
				bch_dev_close(bd);
				if (ret)
					why = iorec_plan_describe(rec, &plan);
				cr_assert_eq(ret, 0, "cut %zu seed %u dev %u: no valid superblock\n%s",
					     at, seed, d, why);
				unsigned gen = got->seq - seq_of[0];
				if (gen < want || gen > NR_UPDATES)
					why = iorec_plan_describe(rec, &plan);
				cr_assert(gen >= want && gen <= NR_UPDATES,
					  "cut %zu seed %u dev %u: generation %u, flushed %u\n%s",
					  at, seed, d, gen, want, why);
				if (gen)
					label_of(gen, label);
				else
					memset(label, 0, sizeof(label));
				cr_assert_eq(memcmp(got->label, label, BCH_SB_LABEL_SIZE), 0,
					     "cut %zu seed %u dev %u: label does not match seq", at, seed, d);
				free(got);
			}

			char *p[2] = { crash[0], crash[1] };
			struct bch_fsck_ctx *y = calloc(1, sizeof(*y)), *n = calloc(1, sizeof(*n));
			y->mode = BCH_FSCK_YES;
			n->mode = BCH_FSCK_NO;
			cr_assert_eq(bch_fsck_superblocks(y, p, 2, NULL), 0, "cut %zu seed %u: fsck -y: %s",
				     at, seed, y->err_msg);
			cr_assert_eq(bch_fsck_superblocks(n, p, 2, NULL), 0);
			cr_assert_eq(bch_fsck_nr_found(n), 0, "cut %zu seed %u: -n after -y finds %llu",
				     at, seed, (unsigned long long)bch_fsck_nr_found(n));
			free(y);
			free(n);
			iorec_plan_free(&plan);
			checked++;
		}
	cr_log_info("sb_crash: %zu events, %u crash states checked", nr_events, checked);
	iorec_free(rec);
	for (unsigned d = 0; d < 2; d++) {
		bch_dev_close(dev[d]);
		free(sb[d]);
	}
	test_tmpdir_remove(tmpdir);
}
