// SPDX-License-Identifier: GPL-2.0
/*
 * str_hash_test.c - SipHash-2-4 against the reference test vectors, and the
 * properties the dirent and xattr btrees rely on: the seed and the key
 * change the hash, equal inputs hash equally, long names work.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "str_hash.h"

/* From the SipHash paper (Aumasson, Bernstein), appendix A: key 00..0f. */
Test(str_hash, siphash_reference_vectors)
{
	uint8_t key[16], msg[64];

	for (unsigned i = 0; i < 16; i++)
		key[i] = i;
	for (unsigned i = 0; i < 64; i++)
		msg[i] = i;
	cr_assert_eq(bch_siphash24(key, msg, 15), 0xa129ca6149be45e5ULL);
	cr_assert_eq(bch_siphash24(key, msg, 0), 0x726fdb47dd0e0e31ULL);
	cr_assert_eq(bch_siphash24(key, msg, 8), 0x93f5f5799a932462ULL);
}

Test(str_hash, seed_key_and_name_matter)
{
	uint8_t k1[16] = { 1 }, k2[16] = { 2 };
	const char *n = "hello";

	uint64_t h = bch_str_hash(k1, 42, n, 5);
	cr_assert_eq(h, bch_str_hash(k1, 42, n, 5));
	cr_assert_neq(h, bch_str_hash(k1, 43, n, 5));
	cr_assert_neq(h, bch_str_hash(k2, 42, n, 5));
	cr_assert_neq(h, bch_str_hash(k1, 42, "hellp", 5));
	cr_assert_neq(h, bch_str_hash(k1, 42, n, 4));
	/* the seed is the first 8 bytes of the input, little-endian */
	uint8_t buf[13];
	uint64_t seed = 42;
	memcpy(buf, &seed, 8);
	memcpy(buf + 8, n, 5);
	cr_assert_eq(h, bch_siphash24(k1, buf, 13));
}

Test(str_hash, long_names)
{
	uint8_t k[16] = { 9 };
	char a[4096], b[4096];

	memset(a, 'a', sizeof(a));
	memcpy(b, a, sizeof(b));
	b[4095] = 'b';
	cr_assert_neq(bch_str_hash(k, 1, a, sizeof(a)), bch_str_hash(k, 1, b, sizeof(b)));
	cr_assert_eq(bch_str_hash(k, 1, a, 255), bch_str_hash(k, 1, b, 255));
}
