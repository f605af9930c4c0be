// SPDX-License-Identifier: GPL-2.0
/*
 * sb_mutate_test.c - a fixed-seed mutation run over the superblock areas of
 * a two-device filesystem: random byte changes in the layout record and the
 * copies, half of them with the checksum recomputed so the mutation reaches
 * the field validation behind it.  For each image: show-super's read, then
 * fsck pass 1 with -y, then -n.  Must hold: no crash or sanitizer report,
 * and after a successful -y the -n run finds nothing.
 * SOAK=1 runs 20x as many iterations.  The seed of a failure is printed.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blockdev.h"
#include "format.h"
#include "fsck.h"
#include "super.h"
#include "tests/lib/tmpdir.h"

#define DEV_MB		32
/*
 * Restored before every iteration, so each seed starts from the same image:
 * everything outside the buckets (fsck never writes inside them, which the
 * test checks at the end).  The copies: layout at 7, copy 0 at 8, copy 1 at
 * 136, the end copy in the last 64 KiB.
 */
#define END_COPY_BYTES	(128 * 512)
static size_t front_bytes[2], end_bytes[2];	/* before the first, after the last bucket */

static char tmpdir[64], paths[2][128];
static unsigned char *pristine_front[2], *pristine_end[2];

static uint64_t dev_bytes(unsigned i)
{
	return (uint64_t)(DEV_MB + 8 * i) << 20;
}

static void setup(void)
{
	struct bch_format_dev devs[2] = { 0 };
	struct bch_format_args args = { .no_btrees = true };
	struct bch_opts o;
	char err[256];

	test_tmpdir_make(tmpdir, sizeof(tmpdir), "sbmut");
	for (unsigned i = 0; i < 2; i++) {
		snprintf(paths[i], sizeof(paths[i]), "%s/d%u.img", tmpdir, i);
		devs[i].path = paths[i];
		devs[i].size = dev_bytes(i);
		devs[i].durability = 1;
		devs[i].label = i ? "hdd" : "ssd";
	}
	bch_opts_default(&o);
	bch_opt_set(&o, Opt_metadata_replicas, 2);
	cr_assert_eq(bch_format(devs, 2, &o, NULL, &args, err, sizeof(err)), 0, "%s", err);

	for (unsigned i = 0; i < 2; i++) {
		struct bch_blockdev *bd;
		struct bch_sb *sb;
		cr_assert_eq(bch_dev_open(paths[i], BCH_DEV_RDONLY, &bd), 0);
		cr_assert_eq(bch_sb_read(bd, &sb, NULL), 0);
		struct bch_member *m = bch_sb_member(sb, i);
		front_bytes[i] = (size_t)m->first_bucket * m->bucket_size * 512;
		end_bytes[i] = dev_bytes(i) - m->nbuckets * m->bucket_size * 512;
		cr_assert_geq(front_bytes[i], (8 + 2 * 128) * 512);
		cr_assert_geq(end_bytes[i], END_COPY_BYTES);
		free(sb);
		bch_dev_close(bd);
	}
#define FRONT_BYTES	front_bytes[i]
#define END_BYTES	end_bytes[i]
	for (unsigned i = 0; i < 2; i++) {
		FILE *f = fopen(paths[i], "rb");
		pristine_front[i] = malloc(FRONT_BYTES);
		pristine_end[i] = malloc(END_BYTES);
		cr_assert(fread(pristine_front[i], 1, FRONT_BYTES, f) == FRONT_BYTES);
		fseeko(f, dev_bytes(i) - END_BYTES, SEEK_SET);
		cr_assert(fread(pristine_end[i], 1, END_BYTES, f) == END_BYTES);
		fclose(f);
	}
}

static void teardown(void)
{
	for (unsigned i = 0; i < 2; i++) {
		free(pristine_front[i]);
		free(pristine_end[i]);
	}
	test_tmpdir_remove(tmpdir);
}

/* Restore device i's sb areas, mutate them with seed, write them back. */
static void mutate(unsigned i, unsigned seed)
{
	unsigned char *front = malloc(FRONT_BYTES), *end = malloc(END_BYTES);
	FILE *f = fopen(paths[i], "r+b");

	memcpy(front, pristine_front[i], FRONT_BYTES);
	memcpy(end, pristine_end[i], END_BYTES);
	srandom(seed * 2 + i);
	unsigned n = random() % 3 == 0 ? 0 : 1 + random() % 24;	/* a third stay intact */
	for (unsigned k = 0; k < n; k++) {
		unsigned what = random() % 10;
		/* mostly the fixed part and fields of copy 0, sometimes elsewhere */
		size_t off = what < 6 ? 8 * 512 + random() % 1024
			   : what < 8 ? 7 * 512 + random() % 64
			   : 136 * 512 + random() % 1024;
		switch (random() % 3) {
		case 0: front[off] ^= 1U << (random() % 8); break;
		case 1: front[off] = random(); break;
		default: front[off] = random() % 2 ? 0 : 0xff; break;
		}
	}
	/* half the time: make copy 0's checksum match its mutated contents */
	if (n && random() % 2) {
		struct bch_sb *sb = (struct bch_sb *)(front + 8 * 512);
		if (sb->csum_type && sb->csum_type < BCH_CSUM_NR &&
		    sizeof(*sb) + (size_t)sb->u64s * 8 <= 128 * 512)
			bch_sb_set_csum(sb);
	}
	if (random() % 8 == 0)
		memset(end + END_BYTES - END_COPY_BYTES + random() % (END_COPY_BYTES - 512),
		       random(), random() % 512);
	cr_assert(fwrite(front, 1, FRONT_BYTES, f) == FRONT_BYTES);
	fseeko(f, dev_bytes(i) - END_BYTES, SEEK_SET);
	cr_assert(fwrite(end, 1, END_BYTES, f) == END_BYTES);
	fclose(f);
	free(front);
	free(end);
}

/* With SB_MUTATE_SEED=N only that seed runs, and problems are printed. */
static enum bch_fsck_answer print_report(struct bch_fsck_ctx *ctx, enum bch_fsck_problem p,
					 const char *where, const char *detail, int fix)
{
	fprintf(stderr, "%s %s: %s (%s) fix=%d\n", ctx->mode == BCH_FSCK_NO ? "-n" : "-y",
		bch_fsck_problems[p].name, where, detail ? detail : "", fix);
	return BCH_FSCK_ANSWER_NO;
}

Test(sb_mutate, fixed_seed_corpus, .init = setup, .fini = teardown, .timeout = 300)
{
	unsigned iters = getenv("SOAK") ? 40000 : 2000;
	char *p[2] = { paths[0], paths[1] };
	unsigned repaired = 0, fatal = 0;

	const char *one = getenv("SB_MUTATE_SEED");
	for (unsigned seed = one ? atoi(one) : 1; seed <= (one ? (unsigned)atoi(one) : iters); seed++) {
		mutate(0, seed);
		mutate(1, seed);

		struct bch_blockdev *bd;
		struct bch_sb *sb = NULL;
		struct bch_sb_read_report r;
		cr_assert_eq(bch_dev_open(paths[0], BCH_DEV_RDONLY, &bd), 0);
		if (!bch_sb_read(bd, &sb, &r))
			free(sb);
		bch_dev_close(bd);

		struct bch_fsck_ctx *y = calloc(1, sizeof(*y));
		y->mode = BCH_FSCK_YES;
		if (one)
			y->report = print_report;
		int ret = bch_fsck_superblocks(y, p, 2, NULL);
		if (ret) {
			fatal++;
		} else {
			struct bch_fsck_ctx *n = calloc(1, sizeof(*n));
			n->mode = BCH_FSCK_NO;
			if (one)
				n->report = print_report;
			int nret = bch_fsck_superblocks(n, p, 2, NULL);
			uint64_t left = bch_fsck_nr_found(n);
			repaired += bch_fsck_nr_fixed(y) > 0;
			free(n);
			if (nret || left) {
				free(y);
				cr_assert_fail("seed %u: after -y, -n returns %d and finds %llu problems "
					       "(rerun with SB_MUTATE_SEED=%u)", seed, nret,
					       (unsigned long long)left, seed);
			}
		}
		free(y);
	}
	/* nothing was ever written inside the buckets (all zero after format) */
	for (unsigned i = 0; i < 2; i++) {
		FILE *f = fopen(paths[i], "rb");
		unsigned char blk[65536];
		uint64_t end = dev_bytes(i) - END_BYTES;
		fseeko(f, FRONT_BYTES, SEEK_SET);
		for (uint64_t off = FRONT_BYTES; off < end; off += sizeof(blk)) {
			size_t n = fread(blk, 1, sizeof(blk), f);
			for (size_t k = 0; k < n; k++)
				cr_assert_eq(blk[k], 0, "device %u: byte %llu written inside the buckets",
					     i, (unsigned long long)(off + k));
		}
		fclose(f);
	}
	/* the corpus must exercise both outcomes, or it tests nothing */
	if (one)
		return;
	cr_assert_gt(repaired, iters / 10, "only %u of %u images needed repair", repaired, iters);
	cr_log_info("sb_mutate: %u iterations, %u repaired, %u unrecoverable", iters, repaired, fatal);
}
