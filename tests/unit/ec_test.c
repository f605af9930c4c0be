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
#include "errcode.h"

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

/* -------------------------------------------------- keys (validation) */

#include "bcachefs.h"
#include "bkey.h"

/* A valid 4+2 stripe key: blocks on members 0..5, 128 sectors each, crc32c. */
static struct bch_bkey *good_stripe(void)
{
	struct bch_bkey *k = bch_bkey_alloc(BCH_BKEY_stripe, POS(0, 7, 0),
					    sizeof(struct bch_stripe) + 6 * sizeof(struct bch_stripe_block));
	struct bch_stripe *s = (struct bch_stripe *)bkey_val(k);

	s->block_sectors = 128;
	s->nr_blocks = 6;
	s->nr_parity = 2;
	s->algorithm = BCH_STRIPE_ALG_RS_CAUCHY;
	s->csum_type = BCH_CSUM_crc32c;
	for (unsigned i = 0; i < 6; i++) {
		s->blocks[i].ptr.dev = i;
		s->blocks[i].ptr.gen = 3;
		s->blocks[i].ptr.offset = 1024 + 256 * i;
		s->blocks[i].csum = 0x12345678 + i;
	}
	return k;
}

static void expect_invalid(struct bch_bkey *k, unsigned btree, const char *want, const char *what)
{
	char err[256] = "", text[1024];

	cr_expect_eq(bch_bkey_validate(k, btree, 0, err, sizeof(err)), -BCH_ERR_bkey_invalid,
		     "%s: accepted", what);
	cr_expect(strstr(err, want), "%s: message \"%s\" lacks \"%s\"", what, err, want);
	bch_bkey_to_text(k, text, sizeof(text));	/* never reads past the key */
}

Test(ec_keys, stripe_valid_and_text)
{
	struct bch_bkey *k = good_stripe();
	char err[256] = "", text[1024];

	cr_assert_eq(bch_bkey_validate(k, BCH_BTREE_ID_stripes, 0, err, sizeof(err)), 0, "%s", err);
	bch_bkey_to_text(k, text, sizeof(text));
	cr_expect(strstr(text, "0:7:0 stripe 4+2 block 128 csum 1 data 0:1024 gen 3"), "%s", text);
	cr_expect(strstr(text, "parity 5:2304 gen 3 csum 000000001234567d"), "%s", text);
	/* not in another btree */
	expect_invalid(k, BCH_BTREE_ID_extents, "stripe key in extents btree", "wrong btree");
	free(k);
}

Test(ec_keys, stripe_damage_refused)
{
	struct bch_bkey *k;
	struct bch_stripe *s;

#define DAMAGE(stmt, want) do {						\
		k = good_stripe();					\
		s = (struct bch_stripe *)bkey_val(k);			\
		(void)s;						\
		stmt;							\
		expect_invalid(k, BCH_BTREE_ID_stripes, want, #stmt);	\
		free(k);						\
	} while (0)

	DAMAGE(s->nr_blocks = 7, "7 blocks in a value of");
	DAMAGE(k->u64s--, "blocks in a value of");
	DAMAGE(k->u64s = BCH_BKEY_U64s + 1, "stripe: bad size 8");
	DAMAGE(k->p.inode = 1, "bad position");
	DAMAGE(k->p.offset = 0, "bad position");
	DAMAGE(k->p.offset = 1ULL << 32, "bad position");
	DAMAGE(k->p.snapshot = 1, "snapshot 1 of a btree without snapshots");
	DAMAGE(s->nr_parity = 0, "6 blocks, 0 parity");
	DAMAGE(s->nr_parity = 5, "6 blocks, 5 parity");
	DAMAGE(s->algorithm = 1, "unknown algorithm 1");
	DAMAGE(s->csum_type = BCH_CSUM_chacha20_poly1305, "block checksum type 4");
	DAMAGE(s->csum_type = 99, "block checksum type 99");
	DAMAGE(s->block_sectors = 0, "block of 0 sectors");
	DAMAGE(s->block_sectors = BCH_STRIPE_BLOCK_MAX + 1, "block of");
	DAMAGE(s->flags = 1, "nonzero reserved");
	DAMAGE(s->pad = 1, "nonzero reserved");
	DAMAGE(s->blocks[3].ptr.dev = BCH_SB_MEMBERS_MAX, "bad block 3");
	DAMAGE(s->blocks[2].ptr.flags = BCH_EXTENT_PTR_CACHED, "bad block 2");
	DAMAGE(s->blocks[1].ptr.stripe = 4, "bad block 1");
	DAMAGE(s->blocks[4].ptr.dev = 1, "blocks 1 and 4 both on member 1");
	DAMAGE(s->blocks[0].ptr.offset = UINT64_MAX - 10, "past the end");
	DAMAGE(s->blocks[5].csum = 1ULL << 40, "crc32c wider");
#undef DAMAGE
}

/* Random damage to a stripe key: validation answers, to_text stays in bounds (ASan). */
Test(ec_keys, stripe_random_damage)
{
	uint64_t seed = TEST_SEED ^ 0x5712;

	for (unsigned n = 0; n < 20000; n++) {
		struct bch_bkey *k = good_stripe();
		uint8_t *v = (uint8_t *)bkey_val(k);
		size_t vb = bkey_val_bytes(k);
		char err[256], text[2048];

		for (unsigned hits = 1 + rng_next(&seed) % 3; hits--; )
			v[rng_next(&seed) % vb] ^= 1 + rng_next(&seed) % 255;
		if (rng_next(&seed) % 8 == 0)
			k->u64s = BCH_BKEY_U64s + rng_next(&seed) % (k->u64s - BCH_BKEY_U64s + 1);
		int r = bch_bkey_validate(k, BCH_BTREE_ID_stripes, 0, err, sizeof(err));
		cr_assert(r == 0 || r == -BCH_ERR_bkey_invalid, "seed %#llx: %d",
			  (unsigned long long)TEST_SEED, r);
		if (!r) {
			const struct bch_stripe *s = bch_stripe_val(k);

			cr_assert_eq(vb, sizeof(*s) + s->nr_blocks * sizeof(s->blocks[0]));
		}
		bch_bkey_to_text(k, text, sizeof(text));
		free(k);
	}
}

static struct bch_bkey *extent_with(const struct bch_extent_ptr *ptrs, unsigned nr)
{
	struct bch_bkey *k = bch_bkey_alloc(BCH_BKEY_extent, POS(4096, 64, 0),
					    sizeof(struct bch_extent) + nr * sizeof(*ptrs));
	struct bch_extent *e = (struct bch_extent *)bkey_val(k);

	k->size = 64;
	e->crc.compressed_sectors = e->crc.uncompressed_sectors = 64;
	e->crc.compressed_bytes = 64 << 9;
	e->crc.csum_type = BCH_CSUM_crc32c;
	memcpy(e->ptrs, ptrs, nr * sizeof(*ptrs));
	return k;
}

Test(ec_keys, striped_pointers)
{
	struct bch_extent_ptr p[2] = {
		{ .offset = 1024 + 256 + 32, .dev = 1, .gen = 3, .flags = BCH_EXTENT_PTR_STRIPED,
		  .stripe_block = 1, .stripe = 7 },
		{ .offset = 5000, .dev = 2, .gen = 1 },
	};
	struct bch_bkey *k;
	char err[256] = "", text[512];

	k = extent_with(p, 2);
	cr_expect_eq(bch_bkey_validate(k, BCH_BTREE_ID_extents, 0, err, sizeof(err)), 0, "%s", err);
	bch_bkey_to_text(k, text, sizeof(text));
	cr_expect(strstr(text, " ptr 1:1312 gen 3 stripe 7/1 ptr 2:5000 gen 1"), "%s", text);
	free(k);

	static const struct { const char *what, *want; } cases[] = {
		{ "cached and striped",	"both cached and striped" },
		{ "stripe 0",		"stripe 0 block 1 out of range" },
		{ "block 16",		"block 16 out of range" },
		{ "two striped",	"more than one striped pointer" },
		{ "padding",		"pointer padding" },
		{ "block padding",	"pointer padding" },
		{ "unknown flag",	"unknown flags 0x4" },
	};
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct bch_extent_ptr q[2];

		memcpy(q, p, sizeof(q));
		switch (i) {
		case 0: q[0].flags |= BCH_EXTENT_PTR_CACHED; break;
		case 1: q[0].stripe = 0; break;
		case 2: q[0].stripe_block = 16; break;
		case 3: q[1] = q[0]; q[1].dev = 2; break;
		case 4: q[1].stripe = 9; break;
		case 5: q[1].stripe_block = 1; break;
		case 6: q[1].flags = 4; break;
		}
		k = extent_with(q, 2);
		expect_invalid(k, BCH_BTREE_ID_extents, cases[i].want, cases[i].what);
		free(k);
	}
}

Test(ec_keys, ptr_fits_block)
{
	struct bch_bkey *k = good_stripe();
	const struct bch_stripe *s = bch_stripe_val(k);
	struct bch_extent_ptr p = { .offset = 1024 + 256, .dev = 1, .gen = 3,
				    .flags = BCH_EXTENT_PTR_STRIPED, .stripe_block = 1, .stripe = 7 };

	cr_expect(bch_stripe_ptr_fits(s, &p, 128));		/* the whole block */
	cr_expect(!bch_stripe_ptr_fits(s, &p, 129));		/* one past its end */
	p.offset += 100;
	cr_expect(bch_stripe_ptr_fits(s, &p, 28));
	cr_expect(!bch_stripe_ptr_fits(s, &p, 29));
	p.offset = 1024 + 255;					/* before the block */
	cr_expect(!bch_stripe_ptr_fits(s, &p, 1));
	p.offset = 1024 + 256;
	p.gen = 4;
	cr_expect(!bch_stripe_ptr_fits(s, &p, 1), "other generation");
	p.gen = 3;
	p.dev = 2;
	cr_expect(!bch_stripe_ptr_fits(s, &p, 1), "other member");
	p.dev = 4;
	p.stripe_block = 4;
	p.offset = 1024 + 4 * 256;
	cr_expect(!bch_stripe_ptr_fits(s, &p, 1), "a parity block");
	free(k);
}

/* Without the feature bit, a stripe key or a striped pointer is invalid. */
Test(ec_keys, needs_feature)
{
	struct bch_sb sb = { 0 };
	struct bch_fs *c = calloc(1, sizeof(*c));
	struct bch_extent_ptr p = { .offset = 1300, .dev = 1, .gen = 3,
				    .flags = BCH_EXTENT_PTR_STRIPED, .stripe_block = 1, .stripe = 7 };
	struct bch_bkey *st = good_stripe(), *e = extent_with(&p, 1);
	char err[256] = "";

	cr_assert(c);
	c->sb = &sb;
	cr_expect_eq(bch_ec_validate_fs(c, st, BCH_BTREE_ID_stripes, 0, err, sizeof(err)),
		     -BCH_ERR_bkey_invalid);
	cr_expect(strstr(err, "stripe key in a filesystem without the erasure_code feature"), "%s", err);
	cr_expect_eq(bch_ec_validate_fs(c, e, BCH_BTREE_ID_extents, 0, err, sizeof(err)),
		     -BCH_ERR_bkey_invalid);
	cr_expect(strstr(err, "striped pointer in a filesystem without"), "%s", err);
	sb.features = BCH_FEATURE_ERASURE_CODE;
	cr_expect_eq(bch_ec_validate_fs(c, st, BCH_BTREE_ID_stripes, 0, err, sizeof(err)), 0);
	cr_expect_eq(bch_ec_validate_fs(c, e, BCH_BTREE_ID_extents, 0, err, sizeof(err)), 0);
	free(st);
	free(e);
	free(c);
}
