// SPDX-License-Identifier: GPL-2.0
/*
 * ec_read_test.c - reads through a stripe (io.c's rebuild, ec.h).
 *
 * The test builds one stripe by hand, as the builder does but around the
 * extent where it lies (so it knows which block holds what): a file's
 * extent (one copy) is data block 0 of a 2+2 stripe
 * on four members (testfs' most); block 1 is fresh space with random data,
 * blocks 2-3 its parity; then the stripe key and the striped pointer are committed in
 * one transaction.  The file must read back byte for byte while its copy is
 * overwritten with garbage (rebuilt from the others), also when another
 * block that still reads holds wrong bytes (found by trying choices against
 * the extent's checksum), and across a close and open (the keys on disk
 * validate); with three of the four blocks bad, the read fails with EIO and
 * no wrong byte.  Seed fixed, printed by failures.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "bcachefs.h"
#include "bkey.h"
#include "blockdev.h"
#include "btree.h"
#include "checksum.h"
#include "ec.h"
#include "errcode.h"
#include "fs.h"
#include "fs_ops.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define SEED		0xec34e34dULL
#define NR_DEVS		4
#define FILE_BYTES	(32 << 10)

static char tmpdir[64];
static char paths[NR_DEVS][TESTFS_PATH_MAX];

static uint64_t rng(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static struct bch_fs *open_fs(void)
{
	char err[256];
	struct bch_fs *c = testfs_open(paths, NR_DEVS, 0, 0, err, sizeof(err));

	cr_assert(c, "open: %s", err);
	return c;
}

static struct bch_bkey *file_extent(struct bch_fs *c, uint64_t inum)
{
	struct bch_bkey *k;

	cr_assert_eq(bch_btree_peek(c, BCH_BTREE_ID_extents, POS(inum, 0, 0),
				    POS(inum, UINT64_MAX, UINT32_MAX), &k), 0);
	cr_assert_eq(k->type, BCH_BKEY_extent);
	cr_assert_eq(bch_extent_nr_ptrs(k), 1, "one copy expected");
	cr_assert_eq(k->size * 512, FILE_BYTES, "one extent for the whole file expected");
	return k;
}

static void dev_write(struct bch_fs *c, const struct bch_extent_ptr *p, const void *buf, size_t len)
{
	cr_assert_eq(bch_dev_write(c->devs[p->dev]->bdev, buf, len, (uint64_t)p->offset << 9), 0);
	cr_assert_eq(bch_dev_flush(c->devs[p->dev]->bdev), 0);
}

/* Make the file's extent data block 0 of stripe 1 (2+2); returns the stripe key. */
static struct bch_bkey *make_stripe(struct bch_fs *c, uint64_t inum, uint64_t *seed)
{
	struct bch_bkey *e = file_extent(c, inum);
	struct bch_extent *ev = bkey_val(e);
	unsigned sectors = ev->crc.compressed_sectors, n = NR_DEVS;
	size_t len = (size_t)sectors << 9;
	struct bch_bkey *sk = bch_bkey_alloc(BCH_BKEY_stripe, POS(0, 1, 0),
					     sizeof(struct bch_stripe) + n * sizeof(struct bch_stripe_block));
	struct bch_stripe *s = bkey_val(sk);
	struct bch_ec_codec codec;
	uint8_t *blocks[NR_DEVS];
	struct btree_trans *t;

	s->block_sectors = sectors;
	s->nr_blocks = n;
	s->nr_parity = 2;
	s->csum_type = BCH_CSUM_crc32c;
	s->blocks[0].ptr = ev->ptrs[0];
	for (unsigned i = 1, dev = 0; i < n; i++, dev++) {
		if (dev == ev->ptrs[0].dev)
			dev++;
		cr_assert_eq(bch_alloc_data_on(c, dev, sectors, &s->blocks[i].ptr), 0);
	}
	for (unsigned i = 0; i < n; i++) {
		blocks[i] = bch_dev_alloc_buf(len);
		cr_assert(blocks[i]);
		if (!i)
			cr_assert_eq(bch_dev_read(c->devs[s->blocks[0].ptr.dev]->bdev, blocks[0], len,
						  (uint64_t)s->blocks[0].ptr.offset << 9), 0);
		else if (i < 2)
			for (size_t j = 0; j < len; j++)
				blocks[i][j] = rng(seed);
	}
	cr_assert_eq(bch_ec_codec_init(&codec, 2, 2), 0);
	bch_ec_encode(&codec, len, blocks);
	bch_ec_codec_exit(&codec);
	for (unsigned i = 0; i < n; i++) {
		struct bch_csum cs;

		if (i)
			dev_write(c, &s->blocks[i].ptr, blocks[i], len);
		cr_assert_eq(bch_checksum(BCH_CSUM_crc32c, blocks[i], len, &cs), 0);
		s->blocks[i].csum = cs.lo;
		free(blocks[i]);
	}

	cr_assert_eq(bch_ec_init(c), 0);
	ev->ptrs[0].flags |= BCH_EXTENT_PTR_STRIPED;
	ev->ptrs[0].stripe_block = 0;
	ev->ptrs[0].stripe = 1;
	cr_assert_eq(bch_trans_init(c, &t), 0);
	cr_assert_eq(bch_trans_update(t, BCH_BTREE_ID_stripes, sk), 0);
	cr_assert_eq(bch_trans_update(t, BCH_BTREE_ID_extents, e), 0);
	cr_assert_eq(bch_trans_commit(t, BCH_TRANS_SYNC), 0, "%s", c->err_msg);
	bch_trans_exit(t);
	free(e);
	return sk;
}

static void garbage(struct bch_fs *c, const struct bch_extent_ptr *p, unsigned sectors, uint64_t *seed)
{
	size_t len = (size_t)sectors << 9;
	uint8_t *b = bch_dev_alloc_buf(len);

	for (size_t j = 0; j < len; j++)
		b[j] = rng(seed);
	dev_write(c, p, b, len);
	free(b);
}

static void expect_file(struct bch_fs *c, uint64_t inum, const uint8_t *want, const char *what)
{
	uint8_t *buf = malloc(FILE_BYTES);

	cr_assert(buf);
	ssize_t n = bch_fs_read(c, inum, 0, buf, FILE_BYTES);
	cr_assert_eq(n, FILE_BYTES, "%s: read %zd (%s; seed %#llx)", what, n, c->err_msg,
		     (unsigned long long)SEED);
	cr_assert(!memcmp(buf, want, FILE_BYTES), "%s: wrong bytes (seed %#llx)", what,
		  (unsigned long long)SEED);
	free(buf);
}

Test(ec_read, rebuild_through_stripe)
{
	uint64_t seed = SEED, inum;
	uint8_t *data = malloc(FILE_BYTES), *buf = malloc(FILE_BYTES);

	struct bch_fs *c;
	struct bch_bkey *sk, *e;
	const struct bch_stripe *s;

	cr_assert(data && buf);
	for (size_t i = 0; i < FILE_BYTES; i++)
		data[i] = rng(&seed);
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "ec_read");
	testfs_format(tmpdir, NR_DEVS, 32, 64 << 10, 1, paths);
	c = open_fs();
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "f", S_IFREG | 0644, 0, 0, 0, &inum), 0);
	cr_assert_eq(bch_fs_write(c, inum, 0, data, FILE_BYTES), FILE_BYTES);
	sk = make_stripe(c, inum, &seed);
	s = bch_stripe_val(sk);
	cr_assert(c->sb->features & BCH_FEATURE_ERASURE_CODE);
	expect_file(c, inum, data, "healthy");
	cr_expect_eq(c->data_rebuilt, 0);

	/* the extent's own copy destroyed: rebuilt from blocks 1-3 */
	garbage(c, &s->blocks[0].ptr, s->block_sectors, &seed);
	expect_file(c, inum, data, "copy destroyed");
	cr_expect_eq(c->data_rebuilt, 1);
	cr_expect_eq(c->data_bad_copies, 1);

	/* and a data block that reads but is wrong: found by the extent's checksum */
	garbage(c, &s->blocks[1].ptr, s->block_sectors, &seed);
	expect_file(c, inum, data, "copy and block 1 destroyed");
	cr_expect_eq(c->data_rebuilt, 2);

	/* the keys on disk: closed, opened, read again */
	cr_assert_eq(bch_fs_close(c), 0);
	c = open_fs();
	e = file_extent(c, inum);
	cr_expect(((struct bch_extent *)bkey_val(e))->ptrs[0].flags & BCH_EXTENT_PTR_STRIPED);
	free(e);
	expect_file(c, inum, data, "after reopen");

	/* a third bad block: more than p = 2, the read fails rather than lie */
	garbage(c, &s->blocks[2].ptr, s->block_sectors, &seed);
	memset(buf, 0, FILE_BYTES);
	cr_expect_lt(bch_fs_read(c, inum, 0, buf, FILE_BYTES), 0, "three bad blocks read");
	cr_expect(strstr(c->err_msg, "no good copy"), "%s", c->err_msg);

	bch_fs_close(c);
	free(sk);
	free(data);
	free(buf);
	test_tmpdir_remove(tmpdir);
}

/* ------------------------------------------------------------------ fsck */

#include "fsck.h"

/* fsck (-n or -y) of the closed filesystem: the number of each stripe problem found. */
static void run_fsck(enum bch_fsck_mode mode, uint64_t found[3])
{
	static const enum bch_fsck_problem codes[3] = {
		BCH_FSCK_stripe_block_bad, BCH_FSCK_stripe_ptr_dangling, BCH_FSCK_stripe_unused,
	};
	char err[256];
	struct bch_fs *c = testfs_open(paths, NR_DEVS, TESTFS_FSCK | (mode == BCH_FSCK_NO ? TESTFS_RO : 0),
				       0, err, sizeof(err));
	struct bch_fsck_ctx *n = calloc(1, sizeof(*n));
	struct bch_fsck_file_stats st;
	uint64_t nodes;

	cr_assert(c && n, "%s", err);
	n->mode = mode;
	cr_assert_eq(bch_fsck_btrees(n, c, &nodes), 0, "%s", n->err_msg);
	cr_assert_eq(bch_fsck_files(n, c, false, &st), 0, "%s", n->err_msg);
	for (unsigned i = 0; i < 3; i++) {
		found[i] = n->found[codes[i]];
		if (mode == BCH_FSCK_YES)
			cr_expect_eq(n->fixed[codes[i]], found[i], "%s not all fixed",
				     bch_fsck_problems[codes[i]].name);
	}
	free(n);
	cr_assert_eq(bch_fs_close(c), 0);
}

static void expect_found(enum bch_fsck_mode mode, uint64_t bad, uint64_t dangling, uint64_t unused,
			 const char *what)
{
	uint64_t f[3];

	run_fsck(mode, f);
	cr_expect(f[0] == bad && f[1] == dangling && f[2] == unused,
		  "%s: found block_bad %llu ptr_dangling %llu unused %llu, expected %llu %llu %llu",
		  what, (unsigned long long)f[0], (unsigned long long)f[1], (unsigned long long)f[2],
		  (unsigned long long)bad, (unsigned long long)dangling, (unsigned long long)unused);
}

static void put_key(struct bch_fs *c, unsigned btree, const struct bch_bkey *k)
{
	struct btree_trans *t;

	cr_assert_eq(bch_trans_init(c, &t), 0);
	cr_assert_eq(bch_trans_update(t, btree, k), 0);
	cr_assert_eq(bch_trans_commit(t, BCH_TRANS_SYNC), 0, "%s", c->err_msg);
	bch_trans_exit(t);
}

/*
 * The three problems, each found by -n, repaired by -y, gone on a second -n;
 * the file reads back after every repair.
 */
Test(ec_read, fsck_stripe_problems)
{
	uint64_t seed = SEED ^ 0xf5c4, inum, inum2;
	uint8_t *data = malloc(FILE_BYTES);
	struct bch_fs *c;
	struct bch_bkey *sk, *sk2, *e;
	struct bch_stripe *s;

	cr_assert(data);
	for (size_t i = 0; i < FILE_BYTES; i++)
		data[i] = rng(&seed);
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "ec_fsck");
	testfs_format(tmpdir, NR_DEVS, 32, 64 << 10, 1, paths);
	c = open_fs();
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "f", S_IFREG | 0644, 0, 0, 0, &inum), 0);
	cr_assert_eq(bch_fs_write(c, inum, 0, data, FILE_BYTES), FILE_BYTES);
	sk = make_stripe(c, inum, &seed);
	cr_assert_eq(bch_fs_close(c), 0);
	expect_found(BCH_FSCK_NO, 0, 0, 0, "a good stripe");

	/* the stripe key gone: the pointer dangles */
	c = open_fs();
	struct bch_bkey del = { .u64s = BCH_BKEY_U64s, .type = BCH_BKEY_deleted, .p = sk->p };
	put_key(c, BCH_BTREE_ID_stripes, &del);
	cr_assert_eq(bch_fs_close(c), 0);
	expect_found(BCH_FSCK_NO, 0, 1, 0, "stripe deleted, -n");
	expect_found(BCH_FSCK_YES, 0, 1, 0, "stripe deleted, -y");
	expect_found(BCH_FSCK_NO, 0, 0, 0, "stripe deleted, second -n");
	c = open_fs();
	e = file_extent(c, inum);
	cr_expect(!(((struct bch_extent *)bkey_val(e))->ptrs[0].flags & BCH_EXTENT_PTR_STRIPED));
	free(e);
	expect_file(c, inum, data, "after stripe_ptr_dangling");

	/* the stripe back, nothing pointing into it: unused */
	put_key(c, BCH_BTREE_ID_stripes, sk);
	cr_assert_eq(bch_fs_close(c), 0);
	expect_found(BCH_FSCK_NO, 0, 0, 1, "unused, -n");
	expect_found(BCH_FSCK_YES, 0, 0, 1, "unused, -y");
	expect_found(BCH_FSCK_NO, 0, 0, 0, "unused, second -n");

	/* a second file in a stripe whose block 1 lies past its member's buckets */
	c = open_fs();
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "g", S_IFREG | 0644, 0, 0, 0, &inum2), 0);
	cr_assert_eq(bch_fs_write(c, inum2, 0, data, FILE_BYTES), FILE_BYTES);
	sk2 = make_stripe(c, inum2, &seed);
	s = bkey_val(sk2);
	s->blocks[1].ptr.offset = (uint64_t)c->devs[s->blocks[1].ptr.dev]->mi.nbuckets *
				  c->devs[s->blocks[1].ptr.dev]->mi.bucket_size;
	put_key(c, BCH_BTREE_ID_stripes, sk2);
	cr_assert_eq(bch_fs_close(c), 0);
	expect_found(BCH_FSCK_NO, 1, 1, 0, "block outside, -n");
	expect_found(BCH_FSCK_YES, 1, 1, 0, "block outside, -y");
	expect_found(BCH_FSCK_NO, 0, 0, 0, "block outside, second -n");
	c = open_fs();
	expect_file(c, inum, data, "f at the end");
	expect_file(c, inum2, data, "g at the end");
	bch_fs_close(c);

	free(sk);
	free(sk2);
	free(data);
	test_tmpdir_remove(tmpdir);
}
