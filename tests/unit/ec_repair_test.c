// SPDX-License-Identifier: GPL-2.0
/*
 * ec_repair_test.c - checking and repairing stripes (ec.h:
 * bch_ec_stripe_check(); scrub.c's stripe phase).
 *
 * Four devices with erasure_code and data_replicas=3: the builder gathers
 * three files into stripes of 2 data and 2 parity blocks.  Then:
 *   every_pattern   for the first stripe, every set of at most p = 2 of its
 *                   4 blocks (data and parity alike) gets random byte ranges
 *                   inverted: the check finds exactly those blocks, the
 *                   repair rewrites them, a second check finds nothing, the
 *                   files read back; three blocks bad in the same bytes:
 *                   unrecoverable, no byte of any device written.
 *   parity_wrong    a parity block rewritten with other bytes and the key's
 *                   checksum set to them (parity wrong when built): found
 *                   as differing from the data's parity, rewritten, the key
 *                   updated, clean after.
 *   scrub           the scrub walk over damage on two members: every block
 *                   counted and repaired, a second scrub clean; three
 *                   blocks of a stripe bad in ranges that do not line up:
 *                   the extents' repairs leave two, and the stripe checked
 *                   again after them is repaired, not named.
 *   no_block_csums  csum_type none: a parity that differs is reported,
 *                   nothing written.
 *   cut_repair      a repair of two blocks under the write recorder, cut
 *                   at every write and flush (unflushed writes kept at
 *                   random, one torn): every crash image reads the files
 *                   right, and a check of it repairs what is left, clean
 *                   after (in place is crash-safe: never worse than before).
 * Seed fixed, printed by failures.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bcachefs.h"
#include "blockdev.h"
#include "btree.h"
#include "checksum.h"
#include "ec.h"
#include "format.h"
#include "fs.h"
#include "fs_ops.h"
#include "move.h"
#include "scrub.h"
#include "tests/lib/iorecord.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define SEED	0xec34a11dULL
#define NDEV	4
#define NFILES	3
#define FSIZE	(96u << 10)

static char tmpdir[64], paths[NDEV][128], crash[NDEV][128];
static unsigned char model[NFILES][FSIZE];
static uint64_t inum[NFILES];

static uint64_t rng(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static struct bch_fs *open_devs(char p[NDEV][128])
{
	char err[256];
	struct bch_fs *c = testfs_open(p, NDEV, 0, 0, err, sizeof(err));

	cr_assert(c, "open: %s", err);
	return c;
}

/* Four devices, three files, striped (2+2): the open filesystem. */
static struct bch_fs *make_fs(const char *name, uint64_t *seed)
{
	const struct testfs_ec geom = { .nr = NDEV, .size_mb = 8, .bucket_bytes = 64 << 10,
					.data_replicas = 3, .uuid = { 0xec, 0x34, 0x0e } };
	struct bch_move_stats st = { 0 };

	test_tmpdir_make(tmpdir, sizeof(tmpdir), name);
	struct bch_fs *c = testfs_ec_up(tmpdir, &geom, paths, crash);
	for (unsigned f = 0; f < NFILES; f++) {
		char fname[16];

		snprintf(fname, sizeof(fname), "f%u", f);
		cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, fname, S_IFREG | 0644, 0, 0, 0, &inum[f]), 0);
		for (size_t i = 0; i < FSIZE; i++)
			model[f][i] = rng(seed);
		cr_assert_eq(bch_fs_write(c, inum[f], 0, model[f], FSIZE), (ssize_t)FSIZE);
	}
	cr_assert_eq(bch_fs_fsync(c), 0);
	int r;
	while ((r = bch_ec_step(c, UINT64_MAX, true, &st)) == 1)
		;
	cr_assert_eq(r, 0, "stripe builder: %s", c->err_msg);
	cr_assert_gt(st.keys_moved, 0, "nothing striped");
	cr_assert_eq(bch_fs_fsync(c), 0);
	return c;
}

static struct bch_bkey *stripe_key(struct bch_fs *c, unsigned idx)
{
	struct bch_bkey *sk;

	cr_assert_eq(bch_btree_lookup(c, BCH_BTREE_ID_stripes, POS(0, idx, 0), &sk), 0,
		     "stripe %u: %s", idx, c->err_msg);
	cr_assert_eq(sk->type, BCH_BKEY_stripe);
	return sk;
}

static void expect_files(struct bch_fs *c, const char *what)
{
	static unsigned char buf[FSIZE];

	for (unsigned f = 0; f < NFILES; f++) {
		ssize_t n = bch_fs_read(c, inum[f], 0, buf, FSIZE);

		cr_assert_eq(n, (ssize_t)FSIZE, "%s: f%u: read %zd (%s; seed %#llx)", what, f, n,
			     c->err_msg, (unsigned long long)SEED);
		cr_assert(!memcmp(buf, model[f], FSIZE), "%s: f%u: wrong bytes (seed %#llx)", what, f,
			  (unsigned long long)SEED);
	}
}

/* Invert len bytes at byte off of block i of stripe sk (the whole block read and written). */
static void invert(struct bch_fs *c, const struct bch_bkey *sk, unsigned i, size_t off, size_t len)
{
	const struct bch_stripe *s = bch_stripe_val(sk);
	struct bch_blockdev *bd = c->devs[s->blocks[i].ptr.dev]->bdev;
	size_t bytes = (size_t)s->block_sectors << 9;
	uint64_t at = (uint64_t)s->blocks[i].ptr.offset << 9;
	uint8_t *b = bch_dev_alloc_buf(bytes);

	cr_assert(b && off + len <= bytes);
	cr_assert_eq(bch_dev_read(bd, b, bytes, at), 0);
	for (size_t j = off; j < off + len; j++)
		b[j] ^= 0xff;
	cr_assert_eq(bch_dev_write(bd, b, bytes, at), 0);
	cr_assert_eq(bch_dev_flush(bd), 0);
	free(b);
}

/* Random ranges of every block in mask inverted. */
static void damage(struct bch_fs *c, const struct bch_bkey *sk, uint32_t mask, uint64_t *seed)
{
	size_t bytes = (size_t)bch_stripe_val(sk)->block_sectors << 9;

	for (unsigned i = 0; i < BCH_EC_BLOCKS_MAX; i++) {
		if (!(mask & (1U << i)))
			continue;
		size_t off = rng(seed) % bytes, len = 1 + rng(seed) % (bytes - off);
		invert(c, sk, i, off, len);
	}
}

static void expect_clean(struct bch_fs *c, unsigned idx, const char *what)
{
	struct bch_bkey *sk = stripe_key(c, idx);
	struct bch_ec_check x;

	cr_assert_eq(bch_ec_stripe_check(c, sk, 0, &x), 0, "%s: %s", what, c->err_msg);
	cr_assert(!x.bad && !x.parity_wrong && !x.unrecoverable,
		  "%s: stripe %u: bad %#x parity_wrong %#x%s (seed %#llx)", what, idx, x.bad,
		  x.parity_wrong, x.unrecoverable ? " unrecoverable" : "", (unsigned long long)SEED);
	free(sk);
}

Test(ec_repair, every_pattern)
{
	uint64_t seed = SEED;
	struct bch_fs *c = make_fs("ecrep_pat", &seed);
	struct bch_bkey *sk = stripe_key(c, 1);
	const struct bch_stripe *s = bch_stripe_val(sk);
	unsigned n = s->nr_blocks, tried = 0;

	fprintf(stderr, "ec_repair: seed %#llx, stripe 1: %u+%u of %u sectors\n", (unsigned long long)SEED,
		    bch_stripe_data_blocks(s), s->nr_parity, (unsigned)s->block_sectors);
	cr_assert_eq(s->nr_parity, 2);
	expect_clean(c, 1, "healthy");
	for (uint32_t mask = 1; mask < (1U << n); mask++) {
		struct bch_ec_check x;

		if (__builtin_popcount(mask) > s->nr_parity)
			continue;
		damage(c, sk, mask, &seed);
		expect_files(c, "damaged");
		cr_assert_eq(bch_ec_stripe_check(c, sk, ~0U, &x), 0, "%s", c->err_msg);
		cr_assert_eq(x.bad | x.parity_wrong, mask, "blocks %#x damaged, %#x found bad (seed %#llx)",
			     mask, x.bad | x.parity_wrong, (unsigned long long)SEED);
		cr_assert_eq(x.repaired, mask, "blocks %#x damaged, %#x repaired", mask, x.repaired);
		cr_assert(!x.unrecoverable);
		expect_clean(c, 1, "repaired");
		expect_files(c, "repaired");
		tried++;
	}
	cr_assert_eq(tried, 10);	/* 4 single blocks, 6 pairs */

	/* three blocks bad in the same bytes: nothing can rebuild them; nothing written */
	for (unsigned i = 0; i < 3; i++)
		invert(c, sk, i, 512, 4096);
	cr_assert_eq(bch_fs_close(c), 0);
	size_t len[NDEV];
	void *before[NDEV];
	for (unsigned d = 0; d < NDEV; d++)
		before[d] = testfs_slurp(paths[d], &len[d]);
	c = open_devs(paths);
	struct bch_ec_check x;
	cr_assert_eq(bch_ec_stripe_check(c, sk, ~0U, &x), 0, "%s", c->err_msg);
	cr_assert(x.unrecoverable);
	cr_assert_eq(x.repaired, 0);
	cr_assert_eq(bch_fs_close(c), 0);
	for (unsigned d = 0; d < NDEV; d++) {
		size_t l;
		void *after = testfs_slurp(paths[d], &l);
		/* the superblock and journal of the close may change: compare the stripe's blocks */
		for (unsigned i = 0; i < n; i++) {
			const struct bch_extent_ptr *p = &s->blocks[i].ptr;
			if (p->dev != d)
				continue;
			cr_assert(!memcmp((char *)before[d] + ((size_t)p->offset << 9),
					  (char *)after + ((size_t)p->offset << 9),
					  (size_t)s->block_sectors << 9),
				  "block %u written though unrecoverable", i);
		}
		free(after);
		free(before[d]);
	}
	free(sk);
	test_tmpdir_remove(tmpdir);
}

Test(ec_repair, parity_wrong)
{
	uint64_t seed = SEED + 1;
	struct bch_fs *c = make_fs("ecrep_par", &seed);
	struct bch_bkey *sk = stripe_key(c, 1);
	struct bch_stripe *s = bkey_val(sk);
	unsigned pb = bch_stripe_data_blocks(s);	/* the first parity block */
	size_t bytes = (size_t)s->block_sectors << 9;
	uint64_t old_csum = s->blocks[pb].csum;
	uint8_t *b = bch_dev_alloc_buf(bytes);
	struct bch_blockdev *bd = c->devs[s->blocks[pb].ptr.dev]->bdev;
	struct btree_trans *t;
	struct bch_csum cs;
	struct bch_ec_check x;

	/* other bytes in the parity block, and the key's checksum of them */
	cr_assert(b);
	for (size_t j = 0; j < bytes; j++)
		b[j] = rng(&seed);
	cr_assert_eq(bch_dev_write(bd, b, bytes, (uint64_t)s->blocks[pb].ptr.offset << 9), 0);
	cr_assert_eq(bch_dev_flush(bd), 0);
	cr_assert_eq(bch_checksum(BCH_CSUM_crc32c, b, bytes, &cs), 0);
	s->blocks[pb].csum = cs.lo;
	cr_assert_eq(bch_trans_init(c, &t), 0);
	cr_assert_eq(bch_trans_update(t, BCH_BTREE_ID_stripes, sk), 0);
	cr_assert_eq(bch_trans_commit(t, 0), 0);
	bch_trans_exit(t);

	cr_assert_eq(bch_ec_stripe_check(c, sk, 0, &x), 0);
	cr_assert_eq(x.bad, 0, "the block matches its (forged) checksum");
	cr_assert_eq(x.parity_wrong, 1U << pb);
	cr_assert_eq(x.repaired, 0, "asked to repair nothing");
	cr_assert_eq(bch_ec_stripe_check(c, sk, ~0U, &x), 0);
	cr_assert_eq(x.repaired, 1U << pb);
	free(sk);
	sk = stripe_key(c, 1);
	cr_assert_eq(bch_stripe_val(sk)->blocks[pb].csum, old_csum, "the key's checksum is the data's parity's");
	expect_clean(c, 1, "parity rewritten");
	cr_assert_eq(bch_fs_close(c), 0);
	c = open_devs(paths);
	expect_clean(c, 1, "reopened");
	expect_files(c, "reopened");
	cr_assert_eq(bch_fs_close(c), 0);
	free(b);
	free(sk);
	test_tmpdir_remove(tmpdir);
}

static void scrub_all(struct bch_fs *c, struct bch_scrub *s)
{
	char err[128];
	int r;

	cr_assert_eq(bch_scrub_init(c, s, -1, err, sizeof(err)), 0, "%s", err);
	while ((r = bch_scrub_step(c, s, 1 << 20)) == 1)
		;
	cr_assert_eq(r, 0, "scrub: %s", c->err_msg);
}

Test(ec_repair, scrub)
{
	uint64_t seed = SEED + 2;
	struct bch_fs *c = make_fs("ecrep_scrub", &seed);
	struct bch_scrub *s = calloc(1, sizeof(*s));
	unsigned nr = 0, bad = 0;

	/* members 1 and 3 damaged, in every stripe that has a block there */
	for (unsigned idx = 1;; idx++) {
		struct bch_bkey *sk;
		uint32_t mask = 0;

		if (bch_btree_lookup(c, BCH_BTREE_ID_stripes, POS(0, idx, 0), &sk)) {
			c->err_msg[0] = 0;
			break;
		}
		const struct bch_stripe *st = bch_stripe_val(sk);
		for (unsigned i = 0; i < st->nr_blocks; i++)
			if (st->blocks[i].ptr.dev == 1 || st->blocks[i].ptr.dev == 3)
				mask |= 1U << i;
		damage(c, sk, mask, &seed);
		bad += __builtin_popcount(mask);
		nr++;
		free(sk);
	}
	cr_assert_gt(nr, 0);
	scrub_all(c, s);
	cr_assert_eq(s->stripes_checked, nr);
	cr_assert_eq(s->copies_bad, bad, "%u blocks damaged, %llu bad (seed %#llx)", bad,
		     (unsigned long long)s->copies_bad, (unsigned long long)SEED);
	cr_assert_eq(s->copies_repaired, bad);
	cr_assert_eq(s->unrepairable, 0);
	scrub_all(c, s);
	cr_assert_eq(s->copies_bad, 0, "second scrub");
	expect_files(c, "scrubbed");

	/*
	 * three blocks of a stripe bad (more than p), in ranges that do not
	 * line up: a data block in the first 16 KiB of an extent X it holds
	 * that leaves 10 KiB of the block outside it, both parity blocks in
	 * those same 10 KiB.  No choice of blocks rebuilds them whole; X is
	 * rebuilt from the other data block and a parity block (its checksum
	 * says which) and written back, and then, checked again after the
	 * extents, the stripe has two bad blocks: repaired.  Where X lies
	 * follows the builder's layout (in place: the candidate buckets as
	 * the files' writes filled them), found from the striped pointers.
	 */
	unsigned x_idx = 0, x_blk = 0, x_off = 0, x_len = 0;
	struct btree_iter it;
	const struct bch_bkey *k;
	int ierr = 0;
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_extents, POS_MIN, POS_MAX);
	while (!x_idx && (k = bch_btree_iter_next(&it, &ierr))) {
		const struct bch_extent *e = bkey_val(k);
		if (k->type != BCH_BKEY_extent || !(e->ptrs[0].flags & BCH_EXTENT_PTR_STRIPED))
			continue;
		struct bch_bkey *xs = stripe_key(c, e->ptrs[0].stripe);
		const struct bch_stripe *sv = bch_stripe_val(xs);
		unsigned off = e->ptrs[0].offset - sv->blocks[e->ptrs[0].stripe_block].ptr.offset;
		unsigned len = e->crc.compressed_sectors;
		/* 10 KiB of the block outside X, and X at least 16 KiB */
		if (sv->block_sectors == 128 && len >= 32 && (off >= 20 || off + len + 20 <= 128)) {
			x_idx = e->ptrs[0].stripe;
			x_blk = e->ptrs[0].stripe_block;
			x_off = off;
			x_len = len;
		}
		free(xs);
	}
	bch_btree_iter_exit(&it);
	cr_assert_eq(ierr, 0);
	cr_assert_gt(x_idx, 0, "no extent leaves 10 KiB of its block (seed %#llx)",
		     (unsigned long long)SEED);
	struct bch_bkey *sk = stripe_key(c, x_idx);
	cr_assert_eq(bch_stripe_val(sk)->nr_parity, 2);
	size_t outside = x_off + x_len + 20 <= 128 ? (size_t)(x_off + x_len) << 9 : 0;
	invert(c, sk, x_blk, ((size_t)x_off << 9) + 100, (16 << 10) - 200);
	invert(c, sk, 2, outside, 10 << 10);
	invert(c, sk, 3, outside, 10 << 10);
	scrub_all(c, s);
	cr_assert_eq(s->unrepairable, 0, "named: %s: %s", s->nr_bad ? s->bad[0].what : "",
		     s->nr_bad ? s->bad[0].why : "");
	cr_assert_gt(s->copies_repaired, 0);
	expect_clean(c, x_idx, "after the extents' repairs");
	expect_files(c, "after the extents' repairs");
	free(sk);
	free(s);
	cr_assert_eq(bch_fs_close(c), 0);
	test_tmpdir_remove(tmpdir);
}

Test(ec_repair, cut_repair)
{
	uint64_t seed = SEED + 3;
	struct bch_fs *c = make_fs("ecrep_cut", &seed);
	struct bch_bkey *sk = stripe_key(c, 1);
	struct bch_ec_check x;

	damage(c, sk, 0x3, &seed);	/* both data blocks */
	cr_assert_eq(bch_fs_close(c), 0);
	c = open_devs(paths);
	struct iorec *rec = iorec_new(NDEV);
	for (unsigned d = 0; d < NDEV; d++)
		cr_assert_eq(iorec_attach(rec, d, c->devs[d]->bdev), 0);
	cr_assert_eq(bch_ec_stripe_check(c, sk, ~0U, &x), 0, "%s", c->err_msg);
	cr_assert_eq(x.repaired, 0x3);
	for (unsigned d = 0; d < NDEV; d++)
		iorec_detach(rec, d);
	cr_assert_eq(bch_fs_close(c), 0);

	size_t nev = iorec_nr_events(rec);
	fprintf(stderr, "ec_repair cut: %zu events\n", nev);
	cr_assert_gt(nev, 0);
	for (size_t at = 0; at <= nev; at++) {
		struct iorec_plan plan;
		struct iorec_cut cut = { .at = at, .seed = SEED + at, .keep_pct = 50, .torn = true };

		cr_assert_eq(iorec_plan(rec, &cut, &plan), 0);
		for (unsigned d = 0; d < NDEV; d++)
			cr_assert_eq(iorec_write_image(rec, &plan, d, crash[d]), 0);
		iorec_plan_free(&plan);
		struct bch_fs *cc = open_devs(crash);
		expect_files(cc, "crash image");
		cr_assert_eq(bch_ec_stripe_check(cc, sk, ~0U, &x), 0, "cut at %zu: %s", at, cc->err_msg);
		cr_assert(!x.unrecoverable, "cut at %zu: unrecoverable", at);
		cr_assert_eq((x.bad | x.parity_wrong) & ~x.repaired, 0, "cut at %zu: left bad", at);
		expect_clean(cc, 1, "crash image repaired");
		cr_assert_eq(bch_fs_close(cc), 0);
	}
	iorec_free(rec);
	free(sk);
	test_tmpdir_remove(tmpdir);
}

/*
 * A stripe without block checksums (csum_type none: valid on disk, though
 * the builder always writes crc32c): a parity block that differs from the
 * data's parity cannot say whether it or a data block is wrong: reported
 * unrecoverable, nothing written; the files still read (their checksums).
 */
Test(ec_repair, no_block_csums)
{
	uint64_t seed = SEED + 4;
	struct bch_fs *c = make_fs("ecrep_none", &seed);
	struct bch_bkey *sk = stripe_key(c, 1);
	struct bch_stripe *s = bkey_val(sk);
	unsigned pb = bch_stripe_data_blocks(s);
	size_t bytes = (size_t)s->block_sectors << 9;
	struct bch_blockdev *bd = c->devs[s->blocks[pb].ptr.dev]->bdev;
	uint8_t *before = bch_dev_alloc_buf(bytes), *after = bch_dev_alloc_buf(bytes);
	struct btree_trans *t;
	struct bch_ec_check x;

	s->csum_type = BCH_CSUM_none;
	for (unsigned i = 0; i < s->nr_blocks; i++)
		s->blocks[i].csum = 0;
	cr_assert_eq(bch_trans_init(c, &t), 0);
	cr_assert_eq(bch_trans_update(t, BCH_BTREE_ID_stripes, sk), 0);
	cr_assert_eq(bch_trans_commit(t, 0), 0);
	bch_trans_exit(t);
	expect_clean(c, 1, "no block checksums, healthy");

	invert(c, sk, pb, 4096, 512);
	cr_assert(before && after);
	cr_assert_eq(bch_dev_read(bd, before, bytes, (uint64_t)s->blocks[pb].ptr.offset << 9), 0);
	cr_assert_eq(bch_ec_stripe_check(c, sk, ~0U, &x), 0);
	cr_assert(x.unrecoverable, "parity differs, no checksums: which block is wrong is unknown");
	cr_assert_eq(x.parity_wrong, 1U << pb);
	cr_assert_eq(x.repaired, 0);
	cr_assert_eq(bch_dev_read(bd, after, bytes, (uint64_t)s->blocks[pb].ptr.offset << 9), 0);
	cr_assert(!memcmp(before, after, bytes), "written though unrecoverable");
	expect_files(c, "no block checksums, parity wrong");
	cr_assert_eq(bch_fs_close(c), 0);
	free(before);
	free(after);
	free(sk);
	test_tmpdir_remove(tmpdir);
}
