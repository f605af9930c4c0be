// SPDX-License-Identifier: GPL-2.0
/*
 * crypt_pool_test.c - the batched cipher of io.c (bch_io_encrypt_batch(),
 * bch_io_decrypt_batch(): XChaCha20 in 64 KiB pieces and the Poly1305 MAC
 * apart, on the caller and a worker pool) against the single AEAD call of
 * crypt.c, for random extent sizes and batch sizes with a fixed seed, with
 * 0, 1 and 3 workers, the pieces by libcrypto and by libsodium (crypt.c):
 * the same ciphertext and MAC byte for byte, decrypted
 * back by either; a damaged extent of a batch fails its MAC alone and its
 * output buffer is left untouched.  Then files written through the data path
 * with and without workers read back alike, and every extent of them opens
 * with the single AEAD call (the bytes on disk did not change).  Bsets and
 * journal entries seal alike with either library and open only undamaged.
 *
 * Encrypted reads outside the engine lock (crypt_read: bch_data_read_plan_run(),
 * each extent verified and decrypted whole by one thread with
 * bch_crypt_extent_open()) give the bytes of the locked read byte for byte:
 * files written in random pieces (extents of random sizes, partly
 * overwritten, with holes), read at random offsets and lengths, aligned and
 * not, with 0, 1 and 3 workers and either library; bch_crypt_extent_open()
 * equals the single AEAD call and leaves its output untouched when the MAC
 * fails.  Seeds fixed and printed.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bcachefs.h"
#include "crypt.h"
#include "errcode.h"
#include "extents.h"
#include "fs.h"
#include "fs_ops.h"
#include "fs_read.h"
#include "io.h"
#include "btree.h"
#include "snapshot.h"
#include "blockdev.h"
#include "super.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

static struct testfs_one fs1;	/* the suite's filesystem, encrypted */
static struct bch_fs *c;	/* fs1.c */

static void setup(void)
{
	testfs_encrypted = true;
	testfs_one_up(&fs1, "cpool", 64);
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

TestSuite(crypt_pool, .init = setup, .fini = teardown);

static uint64_t rng;

static uint64_t rnd(void)
{
	return testfs_xorshift(&rng);
}

static void fill(uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		p[i] = rnd();
}

#define JOBS_MAX	12

Test(crypt_pool, batch_matches_aead)
{
	static const int workers[] = { 0, 1, 3 };
	rng = 0x5eed32;

	for (unsigned round = 0; round < 36; round++) {
		bch_io_pool_threads(workers[round % 3]);
		/* libcrypto's pieces (where it loads) and libsodium's */
		bch_crypt_use_libcrypto = round % 2;
		unsigned nr = 1 + rnd() % JOBS_MAX;
		struct bch_cipher_job j[JOBS_MAX];
		uint8_t *plain[JOBS_MAX], *want[JOBS_MAX], *out[JOBS_MAX];
		struct bch_extent_crc crc[JOBS_MAX];
		bool in_place[JOBS_MAX];

		for (unsigned i = 0; i < nr; i++) {
			/* 1 to 256 sectors, some of them not a whole 64 KiB piece */
			unsigned sectors = 1 + rnd() % 256;
			size_t bytes = (size_t)sectors << BCH_SECTOR_SHIFT;
			plain[i] = malloc(bytes);
			want[i] = malloc(bytes);
			out[i] = malloc(bytes);
			cr_assert(plain[i] && want[i] && out[i]);
			fill(plain[i], bytes);
			in_place[i] = rnd() & 1;
			memcpy(out[i], plain[i], bytes);
			memset(&crc[i], 0, sizeof(crc[i]));
			crc[i].compressed_sectors = crc[i].uncompressed_sectors = sectors;
			crc[i].compressed_bytes = bytes;
			uint64_t version = 1 + rnd() % (1ULL << 40);
			cr_assert_eq(bch_crypt_extent_encrypt(c, version, &crc[i], plain[i], want[i]), 0);
			j[i] = (struct bch_cipher_job) {
				.version	= version,
				.src		= in_place[i] ? out[i] : plain[i],
				.buf		= out[i],
				.bytes		= bytes,
			};
		}
		bch_io_encrypt_batch(c, j, nr);
		for (unsigned i = 0; i < nr; i++) {
			cr_assert_eq(j[i].r, 0);
			cr_assert_eq(memcmp(out[i], want[i], j[i].bytes), 0,
				     "round %u job %u (%zu bytes): ciphertext differs from the AEAD's", round, i,
				     j[i].bytes);
			cr_assert_eq(memcmp(&j[i].mac, &crc[i].csum, sizeof(j[i].mac)), 0,
				     "round %u job %u: MAC differs from the AEAD's", round, i);
		}

		/* damage one extent; decrypt the batch in place or into another buffer */
		unsigned bad = rnd() % nr;
		size_t at = rnd() % j[bad].bytes;
		out[bad][at] ^= 0x10;
		uint8_t *dec[JOBS_MAX];
		for (unsigned i = 0; i < nr; i++) {
			dec[i] = in_place[i] ? out[i] : malloc(j[i].bytes);
			cr_assert(dec[i]);
			if (!in_place[i])
				memset(dec[i], 0xa5, j[i].bytes);
			j[i].src = out[i];
			j[i].buf = dec[i];
			j[i].mac = crc[i].csum;
		}
		bch_io_decrypt_batch(c, j, nr);
		for (unsigned i = 0; i < nr; i++) {
			if (i == bad) {
				cr_assert_eq(j[i].r, -BCH_ERR_csum_mismatch, "round %u: damage not found", round);
				/* nothing decrypted: the ciphertext (or the untouched buffer) is left */
				if (in_place[i]) {
					out[i][at] ^= 0x10;
					cr_assert_eq(memcmp(out[i], want[i], j[i].bytes), 0);
				} else {
					for (size_t b = 0; b < j[i].bytes; b++)
						cr_assert_eq(dec[i][b], 0xa5, "decrypted before the MAC was checked");
				}
				continue;
			}
			cr_assert_eq(j[i].r, 0, "round %u job %u: %d", round, i, j[i].r);
			cr_assert_eq(memcmp(dec[i], plain[i], j[i].bytes), 0, "round %u job %u: not the data",
				     round, i);
			/* and the single AEAD call opens what the batch wrote */
			if (!in_place[i]) {
				memset(dec[i], 0, j[i].bytes);
				cr_assert_eq(bch_crypt_extent_decrypt(c, j[i].version, &crc[i], out[i], dec[i]), 0);
				cr_assert_eq(memcmp(dec[i], plain[i], j[i].bytes), 0);
			}
		}
		for (unsigned i = 0; i < nr; i++) {
			if (!in_place[i])
				free(dec[i]);
			free(plain[i]);
			free(want[i]);
			free(out[i]);
		}
	}
}

/* Every extent of inum opens with the single AEAD call; how many there were. */
static unsigned extents_open_with_aead(uint64_t inum)
{
	struct bch_viter it;
	const struct bch_bkey *k;
	unsigned nr = 0;
	int err = 0;

	bch_viter_init(&it, c, BCH_BTREE_ID_extents, POS(inum, 0, 0), POS(inum, UINT64_MAX, 0));
	while ((k = bch_viter_next(&it, &err))) {
		if (k->type != BCH_BKEY_extent)
			continue;
		struct bch_bkey *d = bch_bkey_dup(k);
		const struct bch_extent *e = bkey_val(d);
		size_t bytes = (size_t)e->crc.compressed_sectors << BCH_SECTOR_SHIFT;
		void *enc = malloc(bytes);
		cr_assert(enc);
		cr_assert_eq(e->crc.csum_type, BCH_CSUM_chacha20_poly1305);
		cr_assert_eq(bch_dev_read(c->devs[e->ptrs[0].dev]->bdev, enc, bytes,
					  (uint64_t)e->ptrs[0].offset << BCH_SECTOR_SHIFT), 0);
		cr_assert_eq(bch_crypt_extent_verify(c, d->version, &e->crc, enc), 0,
			     "extent at %llu: the AEAD does not verify it", (unsigned long long)d->p.offset);
		free(enc);
		free(d);
		nr++;
	}
	bch_viter_exit(&it);
	cr_assert_eq(err, 0);
	return nr;
}

Test(crypt_pool, data_path_same_with_and_without_workers)
{
	rng = 0xda7a32;
	size_t len = (3 << 20) + 4096 * 7;	/* several groups of units, a partial last one */
	uint8_t *data = malloc(len), *back = malloc(len);
	cr_assert(data && back);
	fill(data, len);

	uint64_t ino[2];
	for (unsigned w = 0; w < 2; w++) {
		char name[16];
		snprintf(name, sizeof(name), "f%u", w);
		bch_io_pool_threads(w ? 3 : 0);
		bch_crypt_use_libcrypto = w;
		cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &ino[w]), 0);
		/* one write of it all, then odd-sized rewrites inside */
		cr_assert_eq(bch_fs_write(c, ino[w], 0, data, len), (ssize_t)len);
		for (unsigned i = 0; i < 6; i++) {
			size_t off = (rnd() % (len / 4096)) * 4096, n = 4096 * (1 + rnd() % 300);
			if (off + n > len)
				n = len - off;
			fill(data + off, n);
			cr_assert_eq(bch_fs_write(c, ino[w], off, data + off, n), (ssize_t)n);
		}
		/* the same rewrites on the second file */
		if (!w)
			rng = 0xda7a32, fill(data, len);
	}
	for (unsigned w = 0; w < 2; w++) {
		bch_io_pool_threads(w ? 0 : 3);	/* read each the other way */
		bch_crypt_use_libcrypto = !w;
		memset(back, 0, len);
		cr_assert_eq(bch_fs_read(c, ino[w], 0, back, len), (ssize_t)len);
		cr_assert_eq(memcmp(back, data, len), 0, "file %u does not read back", w);
		cr_assert_gt(extents_open_with_aead(ino[w]), 8);
	}
	free(data);
	free(back);
}

/*
 * Bsets and journal entries (additional data, any length): the pieces by
 * libcrypto and by libsodium seal alike; what either sealed opens, and a
 * changed byte of the additional data or of the body fails the MAC and
 * leaves the body as it was.
 */
Test(crypt_pool, bset_and_jset_same_with_either_library)
{
	rng = 0xb5e732;
	for (unsigned round = 0; round < 40; round++) {
		size_t ad_len = rnd() % 100, len = 1 + rnd() % 70000;
		uint8_t *ad = malloc(ad_len + 1), *p = malloc(len), *a = malloc(len), *b = malloc(len);
		cr_assert(ad && p && a && b);
		fill(ad, ad_len);
		fill(p, len);
		memcpy(a, p, len);
		memcpy(b, p, len);
		struct bch_csum ma, mb;
		uint64_t seq = rnd(), js = rnd();
		uint32_t off = rnd() % 4096;
		bool jset = round & 1;

		bch_crypt_use_libcrypto = true;
		cr_assert_eq(jset ? bch_crypt_jset_encrypt(c, seq, js, ad, ad_len, a, len, &ma)
				  : bch_crypt_bset_encrypt(c, seq, off, js, ad, ad_len, a, len, &ma), 0);
		bch_crypt_use_libcrypto = false;
		cr_assert_eq(jset ? bch_crypt_jset_encrypt(c, seq, js, ad, ad_len, b, len, &mb)
				  : bch_crypt_bset_encrypt(c, seq, off, js, ad, ad_len, b, len, &mb), 0);
		cr_assert_eq(memcmp(a, b, len), 0, "round %u: ciphertexts differ", round);
		cr_assert_eq(memcmp(&ma, &mb, sizeof(ma)), 0, "round %u: MACs differ", round);
		cr_assert_neq(memcmp(a, p, len), 0);

		/* damage: the additional data, then the body; the body is left as it was */
		bch_crypt_use_libcrypto = round % 4 < 2;
		uint8_t *which = ad_len && (rnd() & 1) ? ad : a;
		size_t at = rnd() % (which == ad ? ad_len : len);
		which[at] ^= 1;
		cr_assert_eq(jset ? bch_crypt_jset_decrypt(c, seq, js, ad, ad_len, a, len, ma)
				  : bch_crypt_bset_decrypt(c, seq, off, js, ad, ad_len, a, len, ma),
			     -BCH_ERR_csum_mismatch, "round %u: damage not found", round);
		which[at] ^= 1;
		cr_assert_eq(memcmp(a, b, len), 0, "round %u: decrypted before the MAC was checked", round);
		cr_assert_eq(jset ? bch_crypt_jset_decrypt(c, seq, js, ad, ad_len, a, len, ma)
				  : bch_crypt_bset_decrypt(c, seq, off, js, ad, ad_len, a, len, ma), 0);
		cr_assert_eq(memcmp(a, p, len), 0, "round %u: not the data", round);
		free(ad);
		free(p);
		free(a);
		free(b);
	}
}

/* ------------------------------------------------------------ crypt_read */

#define READ_SEED	0xc0ffee32u
#define NFILES		3
#define FILE_MAX	(1536 << 10)
#define READ_MAX	(512 << 10)
#define READS		150

TestSuite(crypt_read, .init = setup, .fini = teardown, .timeout = 120);

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

	rng = READ_SEED;
	printf("crypt_read: seed %#x\n", READ_SEED);
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

	rng = READ_SEED ^ 0x5a5a;
	printf("crypt_read: seed %#x\n", READ_SEED ^ 0x5a5a);
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
