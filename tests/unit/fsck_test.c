// SPDX-License-Identifier: GPL-2.0
/*
 * fsck_test.c - the fix decision per mode (-n, -y, -p, asking with
 * remembered per-class answers and quit), the problem table's stable codes,
 * and pass 1 on superblock damage that the CLI cannot produce: stale copies
 * and a device whose superblock is older than its partner's, and a member
 * with no valid copy at all (rebuilt only when something of it is there).
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bcachefs.h"
#include "blockdev.h"
#include "format.h"
#include "fs.h"
#include "fsck.h"
#include "opts.h"
#include "super.h"
#include "tests/lib/tmpdir.h"

static enum bch_fsck_answer scripted[16];
static unsigned nr_asked;

static enum bch_fsck_answer scripted_report(struct bch_fsck_ctx *ctx, enum bch_fsck_problem p,
					    const char *where, const char *detail, int fix)
{
	(void)ctx; (void)p; (void)where; (void)detail;
	if (fix >= 0)
		return BCH_FSCK_ANSWER_NO;
	return scripted[nr_asked++];
}

Test(fsck, decision_per_mode)
{
	struct bch_fsck_ctx ctx = { .mode = BCH_FSCK_NO };

	cr_assert_not(bch_fsck_problem(&ctx, BCH_FSCK_sb_copy_bad, "x", NULL));
	ctx.mode = BCH_FSCK_YES;
	cr_assert(bch_fsck_problem(&ctx, BCH_FSCK_sb_copy_bad, "x", NULL));
	cr_assert_not(bch_fsck_problem(&ctx, BCH_FSCK_sb_wrong_fs, "x", NULL), "fatal fixed");
	cr_assert(ctx.fatal);
	ctx.mode = BCH_FSCK_PREEN;
	cr_assert(bch_fsck_problem(&ctx, BCH_FSCK_sb_layout_bad, "x", NULL), "safe not preened");
	cr_assert_eq(ctx.found[BCH_FSCK_sb_copy_bad], 2);
	cr_assert_eq(bch_fsck_nr_found(&ctx), 4);
	bch_fsck_fixed(&ctx, BCH_FSCK_sb_copy_bad);
	cr_assert_eq(bch_fsck_nr_fixed(&ctx), 1);
}

Test(fsck, ask_remembers_class_answers)
{
	struct bch_fsck_ctx ctx = { .mode = BCH_FSCK_ASK, .report = scripted_report };

	nr_asked = 0;
	scripted[0] = BCH_FSCK_ANSWER_YES;
	scripted[1] = BCH_FSCK_ANSWER_NO;
	scripted[2] = BCH_FSCK_ANSWER_ALL;
	scripted[3] = BCH_FSCK_ANSWER_NONE;
	scripted[4] = BCH_FSCK_ANSWER_QUIT;
	cr_assert(bch_fsck_problem(&ctx, BCH_FSCK_sb_copy_bad, "a", NULL));
	cr_assert_not(bch_fsck_problem(&ctx, BCH_FSCK_sb_copy_bad, "b", NULL));
	cr_assert(bch_fsck_problem(&ctx, BCH_FSCK_sb_copy_bad, "c", NULL));
	/* "all": no more questions for this class */
	cr_assert(bch_fsck_problem(&ctx, BCH_FSCK_sb_copy_bad, "d", NULL));
	cr_assert_eq(nr_asked, 3);
	cr_assert_not(bch_fsck_problem(&ctx, BCH_FSCK_sb_layout_bad, "e", NULL));
	cr_assert_not(bch_fsck_problem(&ctx, BCH_FSCK_sb_layout_bad, "f", NULL));
	cr_assert_eq(nr_asked, 4);
	cr_assert_not(bch_fsck_problem(&ctx, BCH_FSCK_sb_copy_stale, "g", NULL));
	cr_assert(ctx.cancelled);
	/* after quit nothing is fixed and nobody is asked */
	cr_assert_not(bch_fsck_problem(&ctx, BCH_FSCK_sb_dev_newer, "h", NULL));
	cr_assert_eq(nr_asked, 5);
}

Test(fsck, problem_codes_unique)
{
	for (unsigned i = 0; i < BCH_FSCK_PROBLEM_NR; i++) {
		cr_assert(bch_fsck_problems[i].name && bch_fsck_problems[i].msg);
		cr_assert(bch_fsck_problems[i].pass >= 1 && bch_fsck_problems[i].pass <= 12);	/* 12: replicas table */
		for (unsigned j = i + 1; j < BCH_FSCK_PROBLEM_NR; j++)
			cr_assert_neq(bch_fsck_problems[i].number, bch_fsck_problems[j].number,
				      "%s and %s share a code", bch_fsck_problems[i].name,
				      bch_fsck_problems[j].name);
	}
}

/* ---------------------------------------------------- pass 1 on images */

static char tmpdir[64];
static char paths[2][128];

static void setup(void)
{
	struct bch_format_dev devs[2] = { 0 };
	struct bch_format_args args = { .no_btrees = true };
	struct bch_opts o;
	char err[256];

	test_tmpdir_make(tmpdir, sizeof(tmpdir), "fsck");
	for (unsigned i = 0; i < 2; i++) {
		snprintf(paths[i], sizeof(paths[i]), "%s/d%u.img", tmpdir, i);
		devs[i].path = paths[i];
		devs[i].size = 32 << 20;
		devs[i].durability = 1;
	}
	bch_opts_default(&o);
	cr_assert_eq(bch_format(devs, 2, &o, NULL, &args, err, sizeof(err)), 0, "%s", err);
}

static void teardown(void)
{
	test_tmpdir_remove(tmpdir);
}

/* Write sb with seq bumped by one to the given copies of device dev. */
static void write_newer(unsigned dev, const unsigned *copies, unsigned nr)
{
	struct bch_blockdev *bd;
	struct bch_sb *sb;

	cr_assert_eq(bch_dev_open(paths[dev], 0, &bd), 0);
	cr_assert_eq(bch_sb_read(bd, &sb, NULL), 0);
	sb->seq++;
	for (unsigned i = 0; i < nr; i++)
		cr_assert_eq(bch_sb_write_copy(bd, sb, dev, sb->layout.sb_offset[copies[i]]), 0);
	bch_dev_close(bd);
	free(sb);
}

static void run(struct bch_fsck_ctx *ctx)
{
	char *p[2] = { paths[0], paths[1] };

	cr_assert_eq(bch_fsck_superblocks(ctx, p, 2, NULL), 0, "%s", ctx->err_msg);
}

Test(fsck, stale_copy_rewritten, .init = setup, .fini = teardown)
{
	static const unsigned first_two[] = { 0, 1 };
	static const unsigned all[] = { 0, 1, 2 };
	struct bch_fsck_ctx ctx = { .mode = BCH_FSCK_NO };

	/* device 0: copies 0 and 1 newer than the end copy; device 1 all newer */
	write_newer(0, first_two, 2);
	write_newer(1, all, 3);
	run(&ctx);
	cr_assert_eq(ctx.found[BCH_FSCK_sb_copy_stale], 1);
	cr_assert_eq(bch_fsck_nr_found(&ctx), 1);

	struct bch_fsck_ctx fix = { .mode = BCH_FSCK_YES };
	run(&fix);
	cr_assert_eq(fix.fixed[BCH_FSCK_sb_copy_stale], 1);
	struct bch_fsck_ctx again = { .mode = BCH_FSCK_NO };
	run(&again);
	cr_assert_eq(bch_fsck_nr_found(&again), 0);
}

Test(fsck, older_device_rewritten, .init = setup, .fini = teardown)
{
	static const unsigned all[] = { 0, 1, 2 };
	struct bch_fsck_ctx ctx = { .mode = BCH_FSCK_PREEN };

	/* device 1 missed the last superblock write entirely */
	write_newer(0, all, 3);
	run(&ctx);
	cr_assert_eq(ctx.found[BCH_FSCK_sb_dev_newer], 1);
	cr_assert_eq(ctx.fixed[BCH_FSCK_sb_dev_newer], 1);

	struct bch_fsck_ctx again = { .mode = BCH_FSCK_NO };
	run(&again);
	cr_assert_eq(bch_fsck_nr_found(&again), 0);

	/* and the rewritten device kept its own index */
	struct bch_blockdev *bd;
	struct bch_sb *sb;
	cr_assert_eq(bch_dev_open(paths[1], BCH_DEV_RDONLY, &bd), 0);
	cr_assert_eq(bch_sb_read(bd, &sb, NULL), 0);
	cr_assert_eq(sb->dev_idx, 1);
	bch_dev_close(bd);
	free(sb);
}

/* Every superblock copy and the layout record of device dev zeroed. */
static void blank_dev(unsigned dev)
{
	struct bch_blockdev *bd;
	struct bch_sb *sb;
	char zero[4096] = { 0 };

	cr_assert_eq(bch_dev_open(paths[dev], 0, &bd), 0);
	cr_assert_eq(bch_sb_read(bd, &sb, NULL), 0);
	cr_assert_eq(bch_dev_write(bd, zero, 512, BCH_SB_LAYOUT_SECTOR << BCH_SECTOR_SHIFT), 0);
	for (unsigned i = 0; i < sb->layout.nr_superblocks; i++)
		cr_assert_eq(bch_dev_write(bd, zero, sizeof(zero), sb->layout.sb_offset[i] << BCH_SECTOR_SHIFT), 0);
	bch_dev_close(bd);
	free(sb);
}

/* A journal entry header of this filesystem at the start of member dev's first journal bucket. */
static void plant_jset(unsigned dev)
{
	struct bch_blockdev *bd;
	struct bch_sb *sb;
	struct bch_jset js = { .magic = BCH_JSET_MAGIC, .seq = 1 };

	cr_assert_eq(bch_dev_open(paths[0], BCH_DEV_RDONLY, &bd), 0);
	cr_assert_eq(bch_sb_read(bd, &sb, NULL), 0);
	bch_dev_close(bd);
	struct bch_sb_field_journal *jf = bch_sb_get_journal(sb);
	unsigned runs = (jf->field.u64s * 8 - sizeof(jf->field)) / sizeof(jf->runs[0]), r = 0;
	while (r < runs && jf->runs[r].dev != dev)
		r++;
	cr_assert(r < runs, "member %u has no journal", dev);
	uint64_t at = jf->runs[r].start * bch_sb_member(sb, dev)->bucket_size;
	memcpy(js.fs_uuid, sb->uuid, sizeof(js.fs_uuid));
	cr_assert_eq(bch_dev_open(paths[dev], 0, &bd), 0);
	cr_assert_eq(bch_dev_write(bd, &js, sizeof(js), at << BCH_SECTOR_SHIFT), 0);
	bch_dev_close(bd);
	free(sb);
}

static bool sb_area_zero(unsigned dev)
{
	FILE *f = fopen(paths[dev], "rb");
	unsigned char buf[65536];
	bool zero = true;

	cr_assert(f);
	cr_assert_eq(fread(buf, 1, sizeof(buf), f), sizeof(buf));
	for (size_t i = 0; i < sizeof(buf) && zero; i++)
		zero = !buf[i];
	fclose(f);
	return zero;
}

Test(fsck, member_with_no_valid_copy, .init = setup, .fini = teardown)
{
	char *p[2] = { paths[0], paths[1] };

	/* nothing of member 1 on it (a fresh format writes no journal): refused, not written */
	blank_dev(1);
	struct bch_fsck_ctx y = { .mode = BCH_FSCK_YES };
	cr_assert_neq(bch_fsck_superblocks(&y, p, 2, NULL), 0);
	cr_assert(y.fatal);
	cr_assert_eq(y.found[BCH_FSCK_sb_none_valid], 1);
	cr_assert_eq(y.fixed[BCH_FSCK_sb_none_valid], 0);
	cr_assert(sb_area_zero(1), "a device not known to be the member was written");

	/* its journal is there: -n reports it and stops, writing nothing */
	plant_jset(1);
	struct bch_fsck_ctx n = { .mode = BCH_FSCK_NO };
	cr_assert_eq(bch_fsck_superblocks(&n, p, 2, NULL), 0, "%s", n.err_msg);
	cr_assert(n.stop && !n.fatal);
	cr_assert_eq(bch_fsck_nr_found(&n), 1);
	cr_assert(sb_area_zero(1));

	/* -y rewrites its copies as member 1, given in either order */
	char *q[2] = { paths[1], paths[0] };
	struct bch_fsck_ctx y2 = { .mode = BCH_FSCK_YES };
	cr_assert_eq(bch_fsck_superblocks(&y2, q, 2, NULL), 0, "%s", y2.err_msg);
	cr_assert_eq(y2.fixed[BCH_FSCK_sb_none_valid], 1);
	cr_assert_eq(bch_fsck_nr_found(&y2), 1);

	struct bch_blockdev *bd;
	struct bch_sb *sb;
	struct bch_sb_read_report r;
	cr_assert_eq(bch_dev_open(paths[1], BCH_DEV_RDONLY, &bd), 0);
	cr_assert_eq(bch_sb_read(bd, &sb, &r), 0);
	cr_assert_eq(sb->dev_idx, 1);
	cr_assert_eq(r.layout_err, 0);
	for (unsigned i = 0; i < r.nr; i++)
		cr_assert_eq(r.copies[i].err, 0, "copy at %llu", (unsigned long long)r.copies[i].offset);
	bch_dev_close(bd);
	free(sb);

	struct bch_fsck_ctx n2 = { .mode = BCH_FSCK_NO };
	cr_assert_eq(bch_fsck_superblocks(&n2, p, 2, NULL), 0, "%s", n2.err_msg);
	cr_assert_eq(bch_fsck_nr_found(&n2), 0);
}

/* ------------------------------------------- what the open keeps (memory) */

/*
 * fsck's open keeps the superblock in buffers of the bytes it uses, not of
 * the 64 KiB it may grow to (two of them were resident through every pass),
 * and the in-memory copy still grows when a field needs room: a read-write
 * open's close adds the clean field, which the next open finds.
 */
Test(fsck, open_keeps_superblock_bytes, .init = setup, .fini = teardown)
{
	struct bch_format_dev d = { .path = paths[0], .size = 32 << 20, .durability = 1 };
	struct bch_format_args args = { 0 };
	struct bch_opts o;
	struct bch_fs *c = NULL;
	char err[256], *p = paths[0];

	unlink(paths[0]);
	bch_opts_default(&o);
	cr_assert_eq(bch_format(&d, 1, &o, NULL, &args, err, sizeof(err)), 0, "%s", err);
	for (unsigned round = 0; round < 2; round++) {
		memset(&o, 0, sizeof(o));
		bch_opt_set(&o, Opt_fsck, 1);
		if (round)
			bch_opt_set(&o, Opt_read_only, 1);
		cr_assert_eq(bch_fs_open(&p, 1, &o, &c, err, sizeof(err)), 0, "%s", err);
		size_t used = bch_sb_bytes(c->sb);
		cr_assert_lt(used, 16 << 10);
		if (round) {
			/* the close of round 0 grew c->sb by the clean field, and wrote it */
			cr_assert(c->sb->flags & BCH_SB_FLAG_CLEAN);
			cr_assert_not_null(bch_sb_get_clean(c->sb));
		}
		cr_assert_geq(c->sb_bytes, used);
		cr_assert_lt(malloc_usable_size(c->sb), 16 << 10, "c->sb: %zu bytes",
			     malloc_usable_size(c->sb));
		cr_assert_lt(malloc_usable_size(c->devs[0]->disk_sb), 16 << 10, "disk_sb: %zu bytes",
			     malloc_usable_size(c->devs[0]->disk_sb));
		cr_assert_eq(bch_fs_close(c), 0);
	}
}
