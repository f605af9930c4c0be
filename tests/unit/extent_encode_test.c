// SPDX-License-Identifier: GPL-2.0
/*
 * extent_encode_test.c - encode/decode round trips for every checksum and
 * compression type, incompressible data stored plain, every bit flip of the
 * stored bytes caught by the checksum (none excepted), and crc entries with
 * impossible fields refused before use.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "errcode.h"
#include "extent_encode.h"

static void fill(unsigned char *p, size_t len, unsigned seed, bool compressible)
{
	srandom(seed);
	for (size_t i = 0; i < len; i++)
		p[i] = compressible ? "abcdefgh"[(i / 7 + random() % 2) % 8] : random();
}

Test(extent_encode, round_trip_all_types)
{
	for (unsigned cs = 0; cs < BCH_CSUM_NR; cs++)
		/* incompressible is what the move path records, not an option to encode with */
		for (unsigned comp = 0; comp < BCH_COMPRESSION_incompressible; comp++)
			for (unsigned compressible = 0; compressible < 2; compressible++) {
				struct bch_encode_opts o = { cs, comp, 8, 256 };
				unsigned sectors = 64;
				size_t len = sectors * 512;
				unsigned char *src = malloc(len), *out = malloc(len);
				unsigned char *enc = malloc(bch_extent_encode_bound(sectors));
				struct bch_extent_crc crc;
				unsigned seed = cs * 10 + comp * 2 + compressible;

				fill(src, len, seed, compressible);
				cr_assert_eq(bch_extent_encode(&o, src, sectors, enc, &crc), 0);
				if (comp && compressible)
					cr_assert_lt(crc.compressed_sectors, sectors, "seed %u not compressed", seed);
				if (!compressible)
					cr_assert_eq(crc.compression_type, BCH_COMPRESSION_none,
						     "seed %u: random data stored compressed", seed);
				cr_assert_eq(crc.compressed_sectors % 8, 0, "not block aligned");
				cr_assert_eq(bch_extent_crc_validate(&crc, sectors, NULL, 0), 0);
				cr_assert_eq(bch_extent_decode(&crc, enc, out), 0, "seed %u", seed);
				cr_assert_eq(memcmp(src, out, len), 0, "seed %u", seed);
				free(src);
				free(out);
				free(enc);
			}
}

Test(extent_encode, every_flip_detected)
{
	static const unsigned comps[] = { BCH_COMPRESSION_none, BCH_COMPRESSION_zstd };

	for (unsigned c = 0; c < 2; c++) {
		struct bch_encode_opts o = { BCH_CSUM_crc32c, comps[c], 1, 256 };
		unsigned sectors = 8;
		unsigned char src[4096], out[4096];
		unsigned char *enc = malloc(bch_extent_encode_bound(sectors));
		struct bch_extent_crc crc;

		fill(src, sizeof(src), 5, true);
		cr_assert_eq(bch_extent_encode(&o, src, sectors, enc, &crc), 0);
		size_t stored = crc.compressed_sectors * 512;
		for (size_t i = 0; i < stored; i++) {
			enc[i] ^= 1U << (i % 8);
			cr_assert_eq(bch_extent_decode(&crc, enc, out), -BCH_ERR_csum_mismatch,
				     "compression %u: flip at byte %zu not detected", comps[c], i);
			enc[i] ^= 1U << (i % 8);
		}
		/* padding is covered too: it is part of what is stored */
		cr_assert_eq(bch_extent_decode(&crc, enc, out), 0);
		free(enc);
	}
}

Test(extent_encode, bad_crc_refused)
{
	struct bch_encode_opts o = { BCH_CSUM_xxhash64, BCH_COMPRESSION_lz4, 1, 256 };
	unsigned char src[8192], out[8192];
	unsigned char *enc = malloc(bch_extent_encode_bound(16));
	struct bch_extent_crc crc, bad;
	char err[128];

	fill(src, sizeof(src), 9, true);
	cr_assert_eq(bch_extent_encode(&o, src, 16, enc, &crc), 0);
#define BAD(stmt)							\
	do {								\
		bad = crc;						\
		stmt;							\
		cr_assert_neq(bch_extent_crc_validate(&bad, 16, err, sizeof(err)), 0, #stmt); \
	} while (0)
	BAD(bad.csum_type = 9);
	BAD(bad.compression_type = 7);
	BAD(bad.uncompressed_sectors = 0);
	BAD(bad.compressed_sectors = 0);
	BAD(bad.compressed_bytes = bad.compressed_sectors * 512 + 1);
	BAD(bad.compressed_bytes = 0);
	BAD(bad.offset = 1);			/* key of 16 sectors then overruns */
	BAD(bad.uncompressed_sectors = 1U << 20);
	bad = crc;
	bad.compression_type = BCH_COMPRESSION_none;
	cr_assert_neq(bch_extent_crc_validate(&bad, 16, err, sizeof(err)), 0);
	/* a key covering part of the extent */
	bad = crc;
	bad.offset = 4;
	cr_assert_eq(bch_extent_crc_validate(&bad, 12, err, sizeof(err)), 0, "%s", err);
	/* bad arguments to encode */
	cr_assert_neq(bch_extent_encode(&o, src, 0, enc, &bad), 0);
	o.block_sectors = 8;
	cr_assert_neq(bch_extent_encode(&o, src, 12, enc, &bad), 0, "not a block multiple");
	cr_assert_neq(bch_extent_encode(&o, src, 512, enc, &bad), 0, "above max");
	(void)out;
	free(enc);
}
