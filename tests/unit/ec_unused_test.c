// SPDX-License-Identifier: GPL-2.0
/*
 * ec_unused_test.c - stripes left with nothing pointing into them
 * (ec_move.h: bch_ec_close_unused()).  On four devices with erasure_code
 * and data_replicas=2 (stripes of 3 data blocks and 1 parity), six files of
 * one data block each are striped, then:
 *   - close_deletes_emptied: the files of one stripe unlinked, and one file
 *     of another stripe partly overwritten: the close deletes the emptied
 *     stripe (its parity bucket freed), keeps the other (its pieces still
 *     point into it), and fsck -n finds nothing; the files left read back.
 *   - crash_before_close: the same unlinks, fsynced, then a power cut
 *     before the close (the write recorder, everything flushed kept): fsck
 *     -n of the crash image finds the stripe unused (the damage a cut close
 *     leaves, as documented); the next read-write open (which replays the
 *     journal) and close deletes it, and fsck -n is clean.
 * Seed: the files' bytes from srandom(3475).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bcachefs.h"
#include "btree.h"
#include "ec.h"
#include "ec_move.h"
#include "extents.h"
#include "format.h"
#include "fs.h"
#include "fs_ops.h"
#include "fsck.h"
#include "move.h"
#include "tests/lib/iorecord.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define NDEV		4
#define NFILES		6
#define FSIZE		(64u << 10)	/* one extent, one data block */

static char tmpdir[64], paths[NDEV][128], crash[NDEV][128];
static unsigned char model[NFILES][FSIZE];

/* fsck -n: problems found, in total and of stripe_unused. */
static void fsck_found(char p[NDEV][128], uint64_t *total, uint64_t *unused)
{
	char err[256];
	struct bch_fs *c = testfs_open(p, NDEV, TESTFS_FSCK | TESTFS_RO, 0, err, 256);
	struct bch_fsck_ctx *n = calloc(1, sizeof(*n));
	struct bch_fsck_file_stats st;
	uint64_t nodes;

	cr_assert(c, "fsck open: %s", err);
	n->mode = BCH_FSCK_NO;
	cr_assert(!bch_fsck_btrees(n, c, &nodes) && !bch_fsck_files(n, c, false, &st),
		  "fsck: %s", n->err_msg);
	*total = 0;
	for (unsigned q = 0; q < BCH_FSCK_PROBLEM_NR; q++) {
		*total += n->found[q];
		if (n->found[q])
			cr_log_info("fsck -n finds %s x%llu", bch_fsck_problems[q].name,
				    (unsigned long long)n->found[q]);
	}
	*unused = n->found[BCH_FSCK_stripe_unused];
	free(n);
	bch_fs_close(c);
}

/* The stripe file inum's (one) extent points into (0: none). */
static uint32_t stripe_of(struct bch_fs *c, uint64_t inum)
{
	struct bch_bkey *k = NULL;
	uint32_t idx = 0;

	cr_assert_eq(bch_btree_peek(c, BCH_BTREE_ID_extents, POS(inum, 0, 0),
				    POS(inum, UINT64_MAX, UINT32_MAX), &k), 0, "%s", c->err_msg);
	if (k->type == BCH_BKEY_extent) {
		const struct bch_extent *e = bkey_val(k);
		for (unsigned i = 0; i < bch_extent_nr_ptrs(k); i++)
			if (e->ptrs[i].flags & BCH_EXTENT_PTR_STRIPED)
				idx = e->ptrs[i].stripe;
	}
	free(k);
	return idx;
}

static bool stripe_exists(struct bch_fs *c, uint32_t idx)
{
	struct bch_bkey *k = NULL;
	int r = bch_btree_lookup(c, BCH_BTREE_ID_stripes, POS(0, idx, 0), &k);

	c->err_msg[0] = 0;
	free(k);
	return !r;
}

static void expect_file(struct bch_fs *c, unsigned f)
{
	static unsigned char buf[FSIZE];
	char name[16];
	uint64_t inum;

	snprintf(name, sizeof(name), "f%u", f);
	cr_assert_eq(bch_fs_lookup(c, BCH_ROOT_INO, name, &inum), 0, "%s: %s", name, c->err_msg);
	cr_assert_eq(bch_fs_read(c, inum, 0, buf, FSIZE), (ssize_t)FSIZE, "%s: %s", name, c->err_msg);
	cr_assert(!memcmp(buf, model[f], FSIZE), "%s differs", name);
}

/*
 * Format, write and stripe the files; *victim: the stripe of f0, whose
 * files are unlinked (gone[] says which); *other: another stripe.
 */
static struct bch_fs *setup(const char *name, uint64_t *inum, uint32_t *victim, uint32_t *other,
			    bool *gone)
{
	const struct testfs_ec geom = { .nr = NDEV, .size_mb = 8, .bucket_bytes = 64 << 10,
					.data_replicas = 2, .uuid = { 0xec, 0x75 } };

	test_tmpdir_make(tmpdir, sizeof(tmpdir), name);
	struct bch_fs *c = testfs_ec_up(tmpdir, &geom, paths, crash);
	srandom(3475);
	for (unsigned f = 0; f < NFILES; f++) {
		char n[16];

		snprintf(n, sizeof(n), "f%u", f);
		for (size_t i = 0; i < FSIZE; i++)
			model[f][i] = random();
		cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, n, S_IFREG | 0644, 0, 0, 0, &inum[f]), 0);
		cr_assert_eq(bch_fs_write(c, inum[f], 0, model[f], FSIZE), (ssize_t)FSIZE, "%s", c->err_msg);
	}
	cr_assert_eq(bch_fs_fsync(c), 0);
	struct bch_move_stats s = { 0 };
	int r;
	while ((r = bch_ec_step(c, UINT64_MAX, true, &s)) == 1)
		;
	cr_assert_eq(r, 0, "%s", c->err_msg);
	cr_assert_eq(bch_fs_fsync(c), 0);
	cr_assert_geq(testfs_count_keys(c, BCH_BTREE_ID_stripes, BCH_BKEY_stripe), 2, "only %u stripes built", testfs_count_keys(c, BCH_BTREE_ID_stripes, BCH_BKEY_stripe));
	*victim = stripe_of(c, inum[0]);
	*other = 0;
	cr_assert_neq(*victim, 0, "f0 not striped");
	for (unsigned f = 0; f < NFILES; f++) {
		uint32_t x = stripe_of(c, inum[f]);
		cr_assert_neq(x, 0, "f%u not striped", f);
		gone[f] = x == *victim;
		if (x != *victim && !*other)
			*other = x;
	}
	cr_assert_neq(*other, 0, "every file in one stripe");
	return c;
}

static void unlink_victims(struct bch_fs *c, const bool *gone)
{
	for (unsigned f = 0; f < NFILES; f++)
		if (gone[f]) {
			char n[16];
			snprintf(n, sizeof(n), "f%u", f);
			cr_assert_eq(bch_fs_unlink(c, BCH_ROOT_INO, n), 0, "%s", c->err_msg);
		}
}

Test(ec_unused, close_deletes_emptied)
{
	uint64_t inum[NFILES], total, unused;
	uint32_t victim, other;
	bool gone[NFILES];
	char err[256];
	struct bch_fs *c = setup("ecunused", inum, &victim, &other, gone);
	unsigned before = testfs_count_keys(c, BCH_BTREE_ID_stripes, BCH_BKEY_stripe);

	unlink_victims(c, gone);
	/* a piece of a file of the other stripe rewritten: the rest still points into it */
	unsigned keep = NFILES;
	for (unsigned f = 0; f < NFILES && keep == NFILES; f++)
		if (!gone[f] && stripe_of(c, inum[f]) == other)
			keep = f;
	for (size_t i = 4096; i < 8192; i++)
		model[keep][i] = random();
	cr_assert_eq(bch_fs_write(c, inum[keep], 4096, model[keep] + 4096, 4096), 4096, "%s", c->err_msg);
	cr_assert(stripe_exists(c, victim), "deleted before the close");
	cr_assert_eq(bch_fs_close(c), 0);

	fsck_found(paths, &total, &unused);
	cr_expect_eq(total, 0, "fsck -n finds %llu problems after the close", (unsigned long long)total);
	c = testfs_open(paths, NDEV, 0, 0, err, 256);
	cr_assert(c, "%s", err);
	cr_expect(!stripe_exists(c, victim), "stripe %u, emptied, still there", victim);
	cr_expect(stripe_exists(c, other), "stripe %u, still used, deleted", other);
	cr_expect_eq(testfs_count_keys(c, BCH_BTREE_ID_stripes, BCH_BKEY_stripe), before - 1, "%u stripes, %u before", testfs_count_keys(c, BCH_BTREE_ID_stripes, BCH_BKEY_stripe), before);
	for (unsigned f = 0; f < NFILES; f++)
		if (!gone[f])
			expect_file(c, f);
	cr_assert_eq(bch_fs_close(c), 0);
	test_tmpdir_remove(tmpdir);
}

Test(ec_unused, crash_before_close, .timeout = 300)
{
	uint64_t inum[NFILES], total, unused;
	uint32_t victim, other;
	bool gone[NFILES];
	char err[256];
	struct bch_fs *c = setup("ecunusedcrash", inum, &victim, &other, gone);
	struct iorec *rec = iorec_new(NDEV);

	for (unsigned d = 0; d < NDEV; d++)
		cr_assert_eq(iorec_attach(rec, d, c->devs[d]->bdev), 0);
	unlink_victims(c, gone);
	cr_assert_eq(bch_fs_fsync(c), 0);
	size_t nev = iorec_nr_events(rec);
	for (unsigned d = 0; d < NDEV; d++)
		iorec_detach(rec, d);
	cr_assert_eq(bch_fs_close(c), 0);

	/* the power cut after the fsync, before the close */
	struct iorec_plan plan;
	struct iorec_cut cut = { .at = nev, .seed = 3475, .keep_pct = 100 };
	cr_assert_eq(iorec_plan(rec, &cut, &plan), 0);
	for (unsigned d = 0; d < NDEV; d++)
		cr_assert_eq(iorec_write_image(rec, &plan, d, crash[d]), 0);
	iorec_plan_free(&plan);
	iorec_free(rec);

	fsck_found(crash, &total, &unused);
	cr_expect_eq(unused, 1, "fsck -n of the crash image: %llu stripes unused, not 1",
		     (unsigned long long)unused);
	cr_expect_eq(total, unused, "fsck -n of the crash image: %llu other problems",
		     (unsigned long long)(total - unused));
	/* a session that drops nothing: its open replayed the journal, its close looks at every stripe */
	c = testfs_open(crash, NDEV, 0, 0, err, 256);
	cr_assert(c, "%s", err);
	cr_assert_gt(c->journal_replayed, 0, "the crash image opened clean");
	cr_assert_eq(bch_fs_close(c), 0);
	fsck_found(crash, &total, &unused);
	cr_expect_eq(total, 0, "fsck -n after a read-write session: %llu problems",
		     (unsigned long long)total);
	c = testfs_open(crash, NDEV, 0, 0, err, 256);
	cr_assert(c, "%s", err);
	cr_expect(!stripe_exists(c, victim), "stripe %u, emptied, still there", victim);
	cr_expect(stripe_exists(c, other), "stripe %u, still used, deleted", other);
	for (unsigned f = 0; f < NFILES; f++)
		if (!gone[f])
			expect_file(c, f);
	cr_assert_eq(bch_fs_close(c), 0);
	test_tmpdir_remove(tmpdir);
}
