// SPDX-License-Identifier: GPL-2.0
/*
 * str_hash.c - SipHash-2-4 name hashing through libsodium (see str_hash.h).
 */
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "str_hash.h"

_Static_assert(crypto_shorthash_siphash24_KEYBYTES == BCH_STR_HASH_KEY_BYTES, "siphash key");
_Static_assert(crypto_shorthash_siphash24_BYTES == 8, "siphash output");

uint64_t bch_siphash24(const uint8_t key[BCH_STR_HASH_KEY_BYTES], const void *data, size_t len)
{
	unsigned char out[8];
	uint64_t v;

	crypto_shorthash_siphash24(out, data, len, key);
	memcpy(&v, out, 8);	/* SipHash's output is little-endian; so is the host */
	return v;
}

uint64_t bch_str_hash(const uint8_t key[BCH_STR_HASH_KEY_BYTES], uint64_t seed,
		      const void *name, size_t len)
{
	unsigned char stack[8 + 512], *buf = stack;
	uint64_t v;

	if (len > sizeof(stack) - 8) {
		buf = malloc(8 + len);
		if (!buf)
			abort();
	}
	memcpy(buf, &seed, 8);
	memcpy(buf + 8, name, len);
	v = bch_siphash24(key, buf, 8 + len);
	if (buf != stack)
		free(buf);
	return v;
}
