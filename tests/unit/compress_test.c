// SPDX-License-Identifier: GPL-2.0
/*
 * compress_test.c - round trips for every compression type and several
 * levels and sizes, incompressible data reported as such, padding after the
 * compressed stream tolerated, and damaged input never read or written out
 * of bounds (ASan) and never reported as a success of the wrong length.
 * Seeds are fixed and printed on failure.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "bcachefs_format.h"
#include "compress.h"
#include "errcode.h"

static const unsigned types[] = { BCH_COMPRESSION_lz4, BCH_COMPRESSION_gzip, BCH_COMPRESSION_zstd };
static const char * const type_names[] = { "none", "lz4", "gzip", "zstd" };

/* Text-like data: words from a small vocabulary, compressible but not trivially. */
static void fill_text(unsigned char *p, size_t len, unsigned seed)
{
	static const char * const words[] = { "bucket ", "extent ", "journal ", "btree ",
					      "inode ", "dirent ", "\n", "0123 " };
	size_t i = 0;

	srandom(seed);
	while (i < len) {
		const char *w = words[random() % 8];
		for (; *w && i < len; w++)
			p[i++] = *w;
	}
}

static void fill_random(unsigned char *p, size_t len, unsigned seed)
{
	srandom(seed);
	for (size_t i = 0; i < len; i++)
		p[i] = random();
}

Test(compress, round_trip_types_levels_sizes)
{
	static const size_t sizes[] = { 512, 4096, 4096 + 17, 65536, 128 * 1024 };
	static const unsigned levels[] = { 0, 1, 9 };

	for (unsigned t = 0; t < 3; t++)
		for (unsigned s = 0; s < 5; s++)
			for (unsigned l = 0; l < 3; l++) {
				size_t len = sizes[s], cap = bch_compress_bound(len);
				unsigned seed = t * 100 + s * 10 + l;
				unsigned char *src = malloc(len), *dst = malloc(cap), *back = malloc(len);

				fill_text(src, len, seed);
				long n = bch_compress(types[t], levels[l], src, len, dst, cap, 512);
				cr_assert_geq(n, 0, "%s level %u len %zu: %ld", type_names[types[t]],
					      levels[l], len, n);
				if (len >= 4096)
					cr_assert_gt(n, 0, "%s len %zu: text not compressed",
						     type_names[types[t]], len);
				if (n > 0) {
					memset(back, 0xaa, len);
					cr_assert_eq(bch_decompress(types[t], dst, n, back, len), 0,
						     "seed %u %s", seed, type_names[types[t]]);
					cr_assert_eq(memcmp(src, back, len), 0, "seed %u", seed);
					/* padded to a block with zeros: still decodes */
					size_t padded = (n + 511) & ~511UL;
					unsigned char *pad = calloc(1, padded);
					memcpy(pad, dst, n);
					cr_assert_eq(bch_decompress(types[t], pad, padded, back, len), 0,
						     "seed %u %s padded", seed, type_names[types[t]]);
					cr_assert_eq(memcmp(src, back, len), 0);
					free(pad);
				}
				free(src);
				free(dst);
				free(back);
			}
}

Test(compress, incompressible_is_stored_plain)
{
	size_t len = 65536, cap = bch_compress_bound(len);
	unsigned char *src = malloc(len), *dst = malloc(cap);

	fill_random(src, len, 7);
	for (unsigned t = 0; t < 3; t++)
		cr_assert_eq(bch_compress(types[t], 0, src, len, dst, cap, 4096), 0,
			     "%s: random data reported compressible", type_names[types[t]]);
	/* saving less than one block is not worth it */
	memset(src, 'x', 8192);
	cr_assert_eq(bch_compress(BCH_COMPRESSION_zstd, 0, src, 4096, dst, cap, 4096), 0);
	cr_assert_gt(bch_compress(BCH_COMPRESSION_zstd, 0, src, 8192, dst, cap, 4096), 0);
	cr_assert_eq(bch_compress(BCH_COMPRESSION_none, 0, src, 4096, dst, cap, 512), 0);
	free(src);
	free(dst);
}

Test(compress, deterministic)
{
	size_t len = 65536, cap = bch_compress_bound(len);
	unsigned char *src = malloc(len), *a = malloc(cap), *b = malloc(cap);

	fill_text(src, len, 3);
	for (unsigned t = 0; t < 3; t++) {
		long na = bch_compress(types[t], 0, src, len, a, cap, 512);
		long nb = bch_compress(types[t], 0, src, len, b, cap, 512);
		cr_assert_eq(na, nb);
		cr_assert_eq(memcmp(a, b, na), 0, "%s output differs between runs",
			     type_names[types[t]]);
	}
	free(src);
	free(a);
	free(b);
}

/* Damaged input: truncated, bit-flipped, random, wrong length asked. */
Test(compress, damaged_input_safe)
{
	size_t len = 32768, cap = bch_compress_bound(len);
	unsigned char *src = malloc(len), *comp = malloc(cap), *work = malloc(cap);
	unsigned char *out = malloc(len + 64);

	fill_text(src, len, 11);
	for (unsigned t = 0; t < 3; t++) {
		long n = bch_compress(types[t], 0, src, len, comp, cap, 512);
		cr_assert_gt(n, 0);
		/* asking for a different length always fails */
		cr_assert_neq(bch_decompress(types[t], comp, n, out, len - 1), 0);
		cr_assert_neq(bch_decompress(types[t], comp, n / 2, out, len), 0,
			      "%s: truncated input accepted", type_names[types[t]]);
		srandom(1000 + t);
		for (unsigned iter = 0; iter < 3000; iter++) {
			size_t wlen = n;
			memcpy(work, comp, n);
			unsigned flips = 1 + random() % 4;
			for (unsigned f = 0; f < flips; f++)
				work[random() % n] ^= 1U << (random() % 8);
			if (iter % 7 == 0)
				wlen = random() % (n + 1);
			/* out has exactly len bytes usable; ASan catches overruns of out */
			unsigned char *o = malloc(len);
			int r = bch_decompress(types[t], work, wlen, o, len);
			cr_assert(r == 0 || r == -BCH_ERR_decompress_failed,
				  "%s seed %u iter %u: %d", type_names[types[t]], 1000 + t, iter, r);
			free(o);
		}
		/* pure garbage */
		for (unsigned iter = 0; iter < 500; iter++) {
			size_t glen = 1 + random() % 4096;
			fill_random(work, glen, iter);
			unsigned char *o = malloc(4096);
			int r = bch_decompress(types[t], work, glen, o, 4096);
			cr_assert(r == 0 || r == -BCH_ERR_decompress_failed);
			free(o);
		}
	}
	cr_assert_neq(bch_decompress(99, comp, 10, out, 10), 0, "unknown type accepted");
	free(src);
	free(comp);
	free(work);
	free(out);
}
