// SPDX-License-Identifier: GPL-2.0
/*
 * checksum_test.c - crc32c, crc64 and xxhash64 against known vectors, against
 * bit-at-a-time reference implementations written from the definitions, and
 * against themselves (incremental = one-shot, SSE4.2 = table path).
 * Random inputs come from a fixed seed that failure messages print.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "checksum.h"

/* checksum.c internals (not in checksum.h): the two crc32c paths. */
uint32_t bch_crc32c_sw(uint32_t crc, const void *data, size_t len);
uint32_t bch_crc32c_hw(uint32_t crc, const void *data, size_t len);
bool bch_crc32c_hw_available(void);
bool bch_crc32c_fold_available(void);	/* bch_crc32c_hw() folds from 1 KiB up */

#define TEST_SEED	0x5eed0c5c5eed0c5cULL

static uint64_t rng_next(uint64_t *s)
{
	/* splitmix64: tiny, deterministic, good enough for test data */
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void rng_fill(uint64_t *s, unsigned char *buf, size_t len)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = rng_next(s);
}

/* ------------------------------------------------- reference implementations */

/* One bit at a time, straight from the definition of a reflected CRC. */
static uint32_t ref_crc32c(uint32_t crc, const unsigned char *p, size_t len)
{
	while (len--) {
		crc ^= *p++;
		for (int i = 0; i < 8; i++)
			crc = crc & 1 ? (crc >> 1) ^ 0x82f63b78U : crc >> 1;
	}
	return crc;
}

static uint64_t ref_crc64(uint64_t crc, const unsigned char *p, size_t len)
{
	while (len--) {
		crc ^= *p++;
		for (int i = 0; i < 8; i++)
			crc = crc & 1 ? (crc >> 1) ^ 0xc96c5795d7870f42ULL : crc >> 1;
	}
	return crc;
}

/* XXH64 from its specification, to check libxxhash is wired up as we think. */
#define P1 0x9e3779b185ebca87ULL
#define P2 0xc2b2ae3d27d4eb4fULL
#define P3 0x165667b19e3779f9ULL
#define P4 0x85ebca77c2b2ae63ULL
#define P5 0x27d4eb2f165667c5ULL

static uint64_t rotl(uint64_t x, int r)
{
	return (x << r) | (x >> (64 - r));
}

static uint64_t le64(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

static uint64_t xxh_round(uint64_t acc, uint64_t lane)
{
	return rotl(acc + lane * P2, 31) * P1;
}

static uint64_t xxh_merge(uint64_t acc, uint64_t v)
{
	return (acc ^ xxh_round(0, v)) * P1 + P4;
}

static uint64_t ref_xxh64(const unsigned char *p, size_t len)
{
	const unsigned char *end = p + len;
	uint64_t acc;

	if (len >= 32) {
		uint64_t v[4] = { P1 + P2, P2, 0, -P1 };

		for (; end - p >= 32; p += 32)
			for (int i = 0; i < 4; i++)
				v[i] = xxh_round(v[i], le64(p + 8 * i));
		acc = rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18);
		for (int i = 0; i < 4; i++)
			acc = xxh_merge(acc, v[i]);
	} else {
		acc = P5;
	}
	acc += len;

	for (; end - p >= 8; p += 8)
		acc = rotl(acc ^ xxh_round(0, le64(p)), 27) * P1 + P4;
	if (end - p >= 4) {
		uint32_t w;

		memcpy(&w, p, 4);
		acc = rotl(acc ^ (w * P1), 23) * P2 + P3;
		p += 4;
	}
	while (p < end)
		acc = rotl(acc ^ (*p++ * P5), 11) * P1;

	acc = (acc ^ (acc >> 33)) * P2;
	acc = (acc ^ (acc >> 29)) * P3;
	return acc ^ (acc >> 32);
}

/* ----------------------------------------------------------------- vectors */

static const char check[] = "123456789";

static uint64_t csum(unsigned type, const void *p, size_t len)
{
	struct bch_csum c;

	cr_assert_eq(bch_checksum(type, p, len, &c), 0, "type %u", type);
	cr_assert_eq(c.hi, 0, "type %u: hi must be zero", type);
	return c.lo;
}

Test(checksum, crc32c_vectors)
{
	unsigned char buf[32];

	cr_expect_eq(csum(BCH_CSUM_crc32c, check, 9), 0xe3069283);
	cr_expect_eq(csum(BCH_CSUM_crc32c, "", 0), 0);

	/* RFC 3720 (iSCSI) appendix B.4 */
	memset(buf, 0, sizeof(buf));
	cr_expect_eq(csum(BCH_CSUM_crc32c, buf, 32), 0x8a9136aa);
	memset(buf, 0xff, sizeof(buf));
	cr_expect_eq(csum(BCH_CSUM_crc32c, buf, 32), 0x62a8ab43);
	for (int i = 0; i < 32; i++)
		buf[i] = i;
	cr_expect_eq(csum(BCH_CSUM_crc32c, buf, 32), 0x46dd794e);
	for (int i = 0; i < 32; i++)
		buf[i] = 31 - i;
	cr_expect_eq(csum(BCH_CSUM_crc32c, buf, 32), 0x113fdb5c);
}

Test(checksum, crc64_vectors)
{
	cr_expect_eq(csum(BCH_CSUM_crc64, check, 9), 0x995dc9bbdf1939faULL);
	cr_expect_eq(csum(BCH_CSUM_crc64, "", 0), 0);
	cr_expect_eq(~ref_crc64(~0ULL, (const void *)check, 9), 0x995dc9bbdf1939faULL,
		     "the reference itself must be CRC-64/XZ");
}

Test(checksum, xxhash64_vectors)
{
	cr_expect_eq(csum(BCH_CSUM_xxhash64, "", 0), 0xef46db3751d8e999ULL);
	cr_expect_eq(ref_xxh64((const void *)"", 0), 0xef46db3751d8e999ULL);
	cr_expect_eq(csum(BCH_CSUM_xxhash64, "a", 1), 0xd24ec4f1a98c6e5bULL);
	cr_expect_eq(csum(BCH_CSUM_xxhash64, "abc", 3), 0x44bc2cf5ad770999ULL);
	cr_expect_eq(csum(BCH_CSUM_xxhash64, check, 9),
		     ref_xxh64((const void *)check, 9));
}

Test(checksum, xxhash64_matches_spec)
{
	uint64_t seed = TEST_SEED;
	unsigned char buf[300];

	rng_fill(&seed, buf, sizeof(buf));
	for (size_t len = 0; len <= sizeof(buf); len++)
		cr_assert_eq(csum(BCH_CSUM_xxhash64, buf, len), ref_xxh64(buf, len),
			     "seed %#llx len %zu", (unsigned long long)TEST_SEED, len);
}

Test(checksum, none_types_names)
{
	cr_expect_eq(csum(BCH_CSUM_none, check, 9), 0);
	cr_expect(bch_csum_type_valid(BCH_CSUM_xxhash64));
	cr_expect_not(bch_csum_type_valid(BCH_CSUM_NR));
	cr_expect_str_eq(bch_csum_type_name(BCH_CSUM_crc32c), "crc32c");
	cr_expect_str_eq(bch_csum_type_name(BCH_CSUM_crc64), "crc64");
	cr_expect_str_eq(bch_csum_type_name(BCH_CSUM_xxhash64), "xxhash64");
	cr_expect_str_eq(bch_csum_type_name(BCH_CSUM_none), "none");
	cr_expect_str_eq(bch_csum_type_name(200), "?");
}

Test(checksum, csum_eq_compares_both_words)
{
	struct bch_csum a = { 1, 2 }, b = { 1, 2 }, c = { 1, 3 }, d = { 0, 2 };

	cr_expect(bch_csum_eq(a, b));
	cr_expect_not(bch_csum_eq(a, c));
	cr_expect_not(bch_csum_eq(a, d));
}

/* ------------------------------------------------------------- properties */

Test(checksum, incremental_equals_oneshot)
{
	uint64_t seed = TEST_SEED;
	unsigned char buf[1000];

	rng_fill(&seed, buf, sizeof(buf));
	uint32_t c32 = bch_crc32c(~0U, buf, sizeof(buf));
	uint64_t c64 = bch_crc64(~0ULL, buf, sizeof(buf));

	cr_assert_eq((uint32_t)~c32, csum(BCH_CSUM_crc32c, buf, sizeof(buf)));
	cr_assert_eq(~c64, csum(BCH_CSUM_crc64, buf, sizeof(buf)));

	for (size_t split = 0; split <= sizeof(buf); split++) {
		uint32_t a32 = bch_crc32c(~0U, buf, split);
		uint64_t a64 = bch_crc64(~0ULL, buf, split);

		cr_assert_eq(bch_crc32c(a32, buf + split, sizeof(buf) - split), c32,
			     "seed %#llx split %zu", (unsigned long long)TEST_SEED, split);
		cr_assert_eq(bch_crc64(a64, buf + split, sizeof(buf) - split), c64,
			     "seed %#llx split %zu", (unsigned long long)TEST_SEED, split);
	}
}

/*
 * Every path over random buffers of many lengths, starting at every
 * alignment within 16 bytes (the word loops load unaligned u64s), with a
 * random starting CRC.
 */
Test(checksum, paths_agree)
{
	/* and around the hardware path's three-stream blocks: 3 x 256 and 3 x 8192 */
	static const size_t big[] = { 511, 512, 513, 767, 768, 769, 1541, 4096, 4099,
				      24575, 24576, 24577, 65536 + 7, 3 * 24576 + 3 * 256 + 9,
				      131072 };
	const size_t nbig = sizeof(big) / sizeof(big[0]);
	uint64_t seed = TEST_SEED;
	size_t max = 131072 + 16;
	unsigned char *buf = malloc(max);
	bool hw = bch_crc32c_hw_available();

	cr_assert(buf);
	if (!hw)
		cr_log_warn("no SSE4.2: checking the table path only");
	rng_fill(&seed, buf, max);

	for (size_t i = 0; i < 300 + nbig; i++) {
		size_t len = i < 300 ? i : big[i - 300];

		for (unsigned align = 0; align < 16; align++) {
			const unsigned char *p = buf + align;
			uint32_t init32 = rng_next(&seed);
			uint64_t init64 = rng_next(&seed);
			uint32_t want32 = ref_crc32c(init32, p, len);

			cr_assert_eq(bch_crc32c_sw(init32, p, len), want32,
				     "table crc32c: seed %#llx len %zu align %u",
				     (unsigned long long)TEST_SEED, len, align);
			if (hw)
				cr_assert_eq(bch_crc32c_hw(init32, p, len), want32,
					     "sse4.2 crc32c: seed %#llx len %zu align %u",
					     (unsigned long long)TEST_SEED, len, align);
			cr_assert_eq(bch_crc64(init64, p, len), ref_crc64(init64, p, len),
				     "crc64: seed %#llx len %zu align %u",
				     (unsigned long long)TEST_SEED, len, align);
		}
	}
	free(buf);
}

/*
 * The folding path of bch_crc32c_hw() (AVX-512 carry-less multiplies, from
 * 1 KiB up, in strides of 256 bytes, the rest by the crc32 instruction):
 * lengths around its threshold and its strides, every alignment, random
 * starting CRCs, against the bit-at-a-time definition; then a 1 MiB buffer
 * with one bit flipped at a time over its first two strides (every lane)
 * and then every 4 KiB or so (each constant moves a lane a different
 * distance: a wrong one shows as a wrong CRC here).
 */
Test(checksum, fold_path_agrees)
{
	static const size_t lens[] = { 1023, 1024, 1025, 1279, 1280, 1281, 1535, 2047, 2048, 4095,
				       4096 + 17, 8192 + 255, 65536, 131072 + 3, 262144 };
	uint64_t seed = TEST_SEED;
	size_t max = (1 << 20) + 16;
	unsigned char *buf = malloc(max);

	cr_assert(buf);
	if (!bch_crc32c_fold_available())
		cr_log_warn("no AVX-512 VPCLMULQDQ: bch_crc32c_hw() never folds here");
	if (!bch_crc32c_hw_available())
		cr_skip_test("no SSE4.2");
	rng_fill(&seed, buf, max);
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		for (unsigned align = 0; align < 16; align++) {
			const unsigned char *p = buf + align;
			uint32_t init = rng_next(&seed);

			cr_assert_eq(bch_crc32c_hw(init, p, lens[i]), ref_crc32c(init, p, lens[i]),
				     "crc32c: seed %#llx len %zu align %u",
				     (unsigned long long)TEST_SEED, lens[i], align);
		}
	size_t len = 1 << 20;
	uint32_t whole = bch_crc32c_sw(~0U, buf, len);

	cr_assert_eq(bch_crc32c_hw(~0U, buf, len), whole, "1 MiB: seed %#llx",
		     (unsigned long long)TEST_SEED);
	for (size_t bit = 0; bit < len * 8; bit += bit < 512 * 8 ? 61 : 4093 * 8 + 5) {
		buf[bit / 8] ^= 1U << (bit % 8);
		cr_assert_eq(bch_crc32c_hw(~0U, buf, len), bch_crc32c_sw(~0U, buf, len),
			     "1 MiB, bit %zu flipped: seed %#llx", bit, (unsigned long long)TEST_SEED);
		buf[bit / 8] ^= 1U << (bit % 8);
	}
	free(buf);
}

Test(checksum, every_bit_flip_detected)
{
	static const unsigned types[] = { BCH_CSUM_crc32c, BCH_CSUM_crc64, BCH_CSUM_xxhash64 };
	uint64_t seed = TEST_SEED;
	unsigned char buf[257];

	rng_fill(&seed, buf, sizeof(buf));
	for (unsigned t = 0; t < 3; t++) {
		uint64_t orig = csum(types[t], buf, sizeof(buf));

		for (size_t bit = 0; bit < sizeof(buf) * 8; bit++) {
			buf[bit / 8] ^= 1U << (bit % 8);
			cr_assert_neq(csum(types[t], buf, sizeof(buf)), orig,
				      "%s: seed %#llx bit %zu flip undetected",
				      bch_csum_type_name(types[t]),
				      (unsigned long long)TEST_SEED, bit);
			buf[bit / 8] ^= 1U << (bit % 8);
		}
	}
}

/* crc32c(A || B) from crc32c(A), crc32c(B) and |B|, for lengths 0..70000 (fixed seed). */
Test(checksum, crc32c_combine)
{
	static unsigned char buf[140000];
	unsigned s = 12345;

	for (size_t i = 0; i < sizeof(buf); i++) {
		s = s * 1103515245u + 12345u;
		buf[i] = s >> 16;
	}
	const size_t lens[] = { 0, 1, 3, 8, 255, 512, 4096, 4097, 65536, 70000 };
	for (unsigned i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		for (unsigned j = 0; j < sizeof(lens) / sizeof(lens[0]); j++) {
			struct bch_csum a, b, ab;
			cr_assert_eq(bch_checksum(BCH_CSUM_crc32c, buf, lens[i], &a), 0);
			cr_assert_eq(bch_checksum(BCH_CSUM_crc32c, buf + lens[i], lens[j], &b), 0);
			cr_assert_eq(bch_checksum(BCH_CSUM_crc32c, buf, lens[i] + lens[j], &ab), 0);
			cr_assert_eq(bch_crc32c_combine((uint32_t)a.lo, (uint32_t)b.lo, lens[j]), (uint32_t)ab.lo,
				     "|A| %zu |B| %zu", lens[i], lens[j]);
		}
}
