// SPDX-License-Identifier: GPL-2.0
/*
 * crypt_read_test.c - encrypted reads outside the engine lock
 * (bch_data_read_plan_run(): each extent verified and decrypted whole by
 * one thread, bch_crypt_extent_open()) give the bytes of the locked read
 * (bch_fs_read()) byte for byte: files written in random pieces (extents
 * of random sizes, partly overwritten, with holes), read at random offsets
 * and lengths, aligned and not, with 0, 1 and 3 workers and with libcrypto
 * and libsodium.  bch_crypt_extent_open() equals the single AEAD call and
 * leaves its output untouched when the MAC fails.  The seed is fixed and
 * printed.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bcachefs.h"
#include "crypt.h"
#include "errcode.h"
#include "fs.h"
#include "fs_ops.h"
#include "fs_read.h"
#include "io.h"
#include "super.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define SEED		0xc0ffee32u
#define NFILES		3
#define FILE_MAX	(1536 << 10)
#define READ_MAX	(512 << 10)
#define READS		150

static struct testfs_one fs1;	/* the suite's filesystem, encrypted */
static struct bch_fs *c;	/* fs1.c */
static uint64_t rng;

static void setup(void)
{
	testfs_encrypted = true;
	testfs_one_up(&fs1, "cread", 48);
	c = fs1.c;
	cr_assert(bch_fs_encrypted(c));
}

static void teardown(void)
{
	fs1.c = c;
	c = NULL;
	bch_io_pool_threads(-1);
	bch_crypt_use_libcrypto = true;
	testfs_encrypted = false;
	testfs_one_down(&fs1);
}

TestSuite(crypt_read, .init = setup, .fini = teardown, .timeout = 120);

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void fill(uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		p[i] = rnd();
}

/* A file of about FILE_MAX bytes written in random pieces: extents of many sizes, holes. */
static uint64_t make_file(unsigned f, uint8_t *buf)
{
	char name[16];
	uint64_t inum;

	snprintf(name, sizeof(name), "f%u", f);
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &inum), 0);
	for (unsigned w = 0; w < 40; w++) {
		uint64_t off = rnd() % FILE_MAX, len = 1 + rnd() % (200 << 10);
		if (rnd() % 3 == 0)
			off &= ~4095ULL;
		if (off + len > FILE_MAX)
			len = FILE_MAX - off;
		fill(buf, len);
		cr_assert_eq(bch_fs_write(c, inum, off, buf, len), (ssize_t)len, "write: %s", c->err_msg);
	}
	return inum;
}

/* Random reads of every file: the planned run against the locked read. */
static void compare_reads(const uint64_t *ino, uint8_t *want, uint8_t *got, const char *what)
{
	unsigned direct = 0;

	for (unsigned i = 0; i < READS; i++) {
		unsigned f = rnd() % NFILES;
		uint64_t off = rnd() % (FILE_MAX + (64 << 10));
		size_t len = 1 + rnd() % READ_MAX;
		struct bch_read_plan pl;

		if (rnd() % 2) {	/* as the kernel reads: pages, often whole extents */
			off &= ~4095ULL;
			len = ((len + 4095) & ~4095UL);
			direct++;
		}
		ssize_t w = bch_fs_read(c, ino[f], off, want, len);
		cr_assert_geq(w, 0, "%s: locked read: %s", what, bch_err_str(w));
		cr_assert_eq(bch_fs_read_plan(c, ino[f], off, len, &pl), 0, "%s: read %u not planned", what, i);
		memset(got, 0xa5, READ_MAX);
		ssize_t g = bch_data_read_plan_run(&pl, got);
		bch_data_read_plan_free(&pl);
		cr_assert_eq(g, w, "%s: read %u (file %u, %zu bytes at %llu): run %zd, locked read %zd", what,
			     i, f, len, (unsigned long long)off, g, w);
		cr_assert(!memcmp(got, want, w), "%s: read %u (file %u, %zu bytes at %llu): bytes differ",
			  what, i, f, len, (unsigned long long)off);
	}
	cr_assert_gt(direct, READS / 4);
}

Test(crypt_read, plan_run_matches_locked_read)
{
	uint64_t ino[NFILES];
	uint8_t *want = NULL, *got = NULL;

	rng = SEED;
	printf("crypt_read: seed %#x\n", SEED);
	cr_assert_eq(posix_memalign((void **)&want, 4096, READ_MAX), 0);
	cr_assert_eq(posix_memalign((void **)&got, 4096, READ_MAX), 0);
	for (unsigned f = 0; f < NFILES; f++)
		ino[f] = make_file(f, want);
	cr_assert_eq(bch_fs_fsync(c), 0);

	static const int workers[] = { 0, 1, 3 };
	for (unsigned lib = 0; lib < 2; lib++)
		for (unsigned w = 0; w < sizeof(workers) / sizeof(workers[0]); w++) {
			char what[64];
			snprintf(what, sizeof(what), "%s, %d workers", lib ? "libsodium" : "libcrypto",
				 workers[w]);
			bch_crypt_use_libcrypto = !lib;
			bch_io_pool_threads(workers[w]);
			compare_reads(ino, want, got, what);
		}
	cr_assert_eq(c->nr_errors, 0, "errors counted: %s", c->err_msg);
	cr_assert_eq(c->data_bad_copies, 0);
	free(want);
	free(got);
}

Test(crypt_read, extent_open_matches_aead)
{
	uint8_t *plain, *enc, *out, *keep;
	size_t max = 256 << 10;

	rng = SEED ^ 0x5a5a;
	printf("crypt_read: seed %#x\n", SEED ^ 0x5a5a);
	plain = malloc(max);
	enc = malloc(max);
	out = malloc(max);
	keep = malloc(max);
	cr_assert(plain && enc && out && keep);
	for (unsigned lib = 0; lib < 2; lib++) {
		bch_crypt_use_libcrypto = !lib;
		for (unsigned i = 0; i < 40; i++) {
			size_t bytes = (1 + rnd() % (max >> BCH_SECTOR_SHIFT)) << BCH_SECTOR_SHIFT;
			uint64_t version = 1 + rnd();
			struct bch_extent_crc crc = { .compressed_sectors = bytes >> BCH_SECTOR_SHIFT,
						      .uncompressed_sectors = bytes >> BCH_SECTOR_SHIFT };
			fill(plain, bytes);
			cr_assert_eq(bch_crypt_extent_encrypt(c, version, &crc, plain, enc), 0);
			/* into another buffer and in place: the plaintext */
			cr_assert_eq(bch_crypt_extent_open(c, version, enc, out, bytes, &crc.csum), 0);
			cr_assert(!memcmp(out, plain, bytes), "%zu bytes: open differs", bytes);
			memcpy(out, enc, bytes);
			cr_assert_eq(bch_crypt_extent_open(c, version, out, out, bytes, &crc.csum), 0);
			cr_assert(!memcmp(out, plain, bytes), "%zu bytes in place: open differs", bytes);
			/* one bit flipped anywhere: refused, the output untouched */
			enc[rnd() % bytes] ^= 1 << (rnd() % 8);
			fill(out, bytes);
			memcpy(keep, out, bytes);
			cr_assert_eq(bch_crypt_extent_open(c, version, enc, out, bytes, &crc.csum),
				     -BCH_ERR_csum_mismatch);
			cr_assert(!memcmp(out, keep, bytes), "output written although the MAC failed");
			cr_assert_eq(bch_crypt_extent_decrypt(c, version, &crc, enc, out), -BCH_ERR_csum_mismatch);
		}
	}
	free(plain);
	free(enc);
	free(out);
	free(keep);
}
