// SPDX-License-Identifier: GPL-2.0
/*
 * ec_test.c - the Reed-Solomon codec of stripes (ec.c over ISA-L).
 *
 * Parity is checked against a reference written here from the definition
 * (GF(2^8) with polynomial 0x11d, a bit at a time; the Cauchy rows
 * 1 / (i ^ j)), which pins the code as part of the format.  Every loss
 * pattern of up to p blocks (data and parity) is rebuilt for k+p in
 * {3+1, 4+2, 6+2}, on lengths that do and do not take ISA-L's 64-byte path.
 * Random data from fixed seeds, printed by failures.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ec.h"

#define TEST_SEED	0xec34ec34ec34ec34ULL

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* ------------------------------------------------ reference arithmetic */

static uint8_t ref_mul(uint8_t a, uint8_t b)
{
	uint8_t r = 0;

	while (b) {
		if (b & 1)
			r ^= a;
		a = (a << 1) ^ (a & 0x80 ? 0x1d : 0);
		b >>= 1;
	}
	return r;
}

static uint8_t ref_inv(uint8_t a)
{
	for (unsigned x = 1; x < 256; x++)
		if (ref_mul(a, x) == 1)
			return x;
	return 0;
}

/* parity row i (k <= i < k+p), column j: 1 / (i ^ j) */
static void ref_encode(unsigned k, unsigned p, size_t len, uint8_t **blocks)
{
	for (unsigned i = k; i < k + p; i++)
		for (size_t b = 0; b < len; b++) {
			uint8_t s = 0;

			for (unsigned j = 0; j < k; j++)
				s ^= ref_mul(ref_inv(i ^ j), blocks[j][b]);
			blocks[i][b] = s;
		}
}

/* ------------------------------------------------------------ fixtures */

struct stripe {
	unsigned	n;
	size_t		len;
	uint8_t		*b[BCH_EC_BLOCKS_MAX];
	uint8_t		*orig[BCH_EC_BLOCKS_MAX];
};

static void stripe_make(struct stripe *s, const struct bch_ec_codec *c,
			size_t len, uint64_t *seed)
{
	s->n = c->k + c->p;
	s->len = len;
	for (unsigned i = 0; i < s->n; i++) {
		s->b[i] = malloc(len ? len : 1);
		s->orig[i] = malloc(len ? len : 1);
		cr_assert(s->b[i] && s->orig[i]);
		for (size_t j = 0; j < len; j++)
			s->b[i][j] = i < c->k ? rng_next(seed) : 0;
	}
	bch_ec_encode(c, len, s->b);
	for (unsigned i = 0; i < s->n; i++)
		memcpy(s->orig[i], s->b[i], len);
}

static void stripe_free(struct stripe *s)
{
	for (unsigned i = 0; i < s->n; i++) {
		free(s->b[i]);
		free(s->orig[i]);
	}
}

/* ---------------------------------------------------------------- tests */

Test(ec, shapes_refused)
{
	struct bch_ec_codec c;

	cr_expect_eq(bch_ec_codec_init(&c, 1, 1), -EINVAL);
	cr_expect_eq(bch_ec_codec_init(&c, 2, 0), -EINVAL);
	cr_expect_eq(bch_ec_codec_init(&c, BCH_EC_K_MAX + 1, 1), -EINVAL);
	cr_expect_eq(bch_ec_codec_init(&c, 4, BCH_EC_P_MAX + 1), -EINVAL);
	cr_assert_eq(bch_ec_codec_init(&c, BCH_EC_K_MAX, BCH_EC_P_MAX), 0);
	bch_ec_codec_exit(&c);
}

/* Parity equals the definition's, byte for byte (the code is on-disk format). */
Test(ec, parity_matches_reference)
{
	static const unsigned shapes[][2] = { {3, 1}, {4, 2}, {6, 2}, {8, 3}, {2, 4} };
	uint64_t seed = TEST_SEED;

	for (unsigned t = 0; t < sizeof(shapes) / sizeof(shapes[0]); t++) {
		unsigned k = shapes[t][0], p = shapes[t][1];
		struct bch_ec_codec c;
		struct stripe s;
		uint8_t *ref[BCH_EC_BLOCKS_MAX];

		cr_assert_eq(bch_ec_codec_init(&c, k, p), 0);
		stripe_make(&s, &c, 1000, &seed);
		for (unsigned i = 0; i < k + p; i++) {
			ref[i] = malloc(s.len);
			memcpy(ref[i], s.orig[i], s.len);
		}
		ref_encode(k, p, s.len, ref);
		for (unsigned i = k; i < k + p; i++) {
			cr_expect(!memcmp(ref[i], s.b[i], s.len),
				  "%u+%u: parity block %u differs from the reference (seed %#llx)",
				  k, p, i, (unsigned long long)TEST_SEED);
			free(ref[i]);
		}
		for (unsigned i = 0; i < k; i++)
			free(ref[i]);
		stripe_free(&s);
		bch_ec_codec_exit(&c);
	}
}

/* Every set of up to p missing blocks is rebuilt exactly; nothing else written. */
static void all_losses(unsigned k, unsigned p, size_t len)
{
	uint64_t seed = TEST_SEED ^ (k << 8 | p) ^ len;
	uint64_t seed0 = seed;
	struct bch_ec_codec c;
	struct stripe s;
	unsigned n = k + p, patterns = 0;

	cr_assert_eq(bch_ec_codec_init(&c, k, p), 0);
	stripe_make(&s, &c, len, &seed);

	for (uint32_t miss = 1; miss < (1U << n); miss++) {
		if ((unsigned)__builtin_popcount(miss) > p)
			continue;
		for (unsigned i = 0; i < n; i++)
			if (miss & (1U << i))
				memset(s.b[i], 0xa5, len);
		cr_assert_eq(bch_ec_reconstruct(&c, len, s.b, miss), 0,
			     "%u+%u len %zu: missing %#x refused", k, p, len, miss);
		for (unsigned i = 0; i < n; i++)
			cr_assert(!memcmp(s.b[i], s.orig[i], len),
				  "%u+%u len %zu missing %#x: block %u wrong (seed %#llx)",
				  k, p, len, miss, i, (unsigned long long)seed0);
		patterns++;
	}
	/* sum of C(n, i), i = 1..p */
	unsigned want = 0, cnk = 1;

	for (unsigned i = 1; i <= p; i++) {
		cnk = cnk * (n - i + 1) / i;
		want += cnk;
	}
	cr_expect_eq(patterns, want);
	stripe_free(&s);
	bch_ec_codec_exit(&c);
}

Test(ec, every_loss_3_1)	{ all_losses(3, 1, 4096); all_losses(3, 1, 513); }
Test(ec, every_loss_4_2)	{ all_losses(4, 2, 4096); all_losses(4, 2, 777); }
Test(ec, every_loss_6_2)	{ all_losses(6, 2, 4096); all_losses(6, 2, 100); }

/* More than p missing, or a bit past the last block: refused, nothing written. */
Test(ec, too_many_missing_refused)
{
	uint64_t seed = TEST_SEED;
	struct bch_ec_codec c;
	struct stripe s;

	cr_assert_eq(bch_ec_codec_init(&c, 4, 2), 0);
	stripe_make(&s, &c, 512, &seed);
	cr_expect_eq(bch_ec_reconstruct(&c, 512, s.b, 0x7), -EINVAL);
	cr_expect_eq(bch_ec_reconstruct(&c, 512, s.b, 1U << 6), -EINVAL);
	cr_expect_eq(bch_ec_reconstruct(&c, 512, s.b, 0), 0);
	for (unsigned i = 0; i < s.n; i++)
		cr_expect(!memcmp(s.b[i], s.orig[i], 512), "block %u written", i);
	stripe_free(&s);
	bch_ec_codec_exit(&c);
}

/* Invariant (2): a byte range of a stripe rebuilds from the same range of the others. */
Test(ec, sub_range)
{
	uint64_t seed = TEST_SEED + 1;
	struct bch_ec_codec c;
	struct stripe s;
	uint8_t *part[BCH_EC_BLOCKS_MAX];
	size_t off = 4096 + 17, len = 3000;

	cr_assert_eq(bch_ec_codec_init(&c, 6, 2), 0);
	stripe_make(&s, &c, 16384, &seed);
	memset(s.b[1] + off, 0, len);
	memset(s.b[7] + off, 0, len);
	for (unsigned i = 0; i < s.n; i++)
		part[i] = s.b[i] + off;
	cr_assert_eq(bch_ec_reconstruct(&c, len, part, (1U << 1) | (1U << 7)), 0);
	for (unsigned i = 0; i < s.n; i++)
		cr_expect(!memcmp(s.b[i], s.orig[i], s.len), "block %u", i);
	stripe_free(&s);
	bch_ec_codec_exit(&c);
}
