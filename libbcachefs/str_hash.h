/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_STR_HASH_H
#define _BCACHEFS_STR_HASH_H

/*
 * str_hash.h - hashing of directory entry and xattr names.
 *
 * Names are hashed with SipHash-2-4 (libsodium's crypto_shorthash) keyed per
 * filesystem, so a stranger cannot pick names that all collide in a directory
 * of someone else's filesystem.  The hash input is the directory's 64-bit
 * seed (little-endian) followed by the name bytes.
 *
 * Invariant: the result depends only on (key, seed, name): it is part of the
 * on-disk format (dirent and xattr positions) and must never change for a
 * given str_hash option value.
 */

#include <stddef.h>
#include <stdint.h>

#define BCH_STR_HASH_KEY_BYTES	16

/* SipHash-2-4 of data with a 16-byte key (the primitive; test vectors). */
uint64_t bch_siphash24(const uint8_t key[BCH_STR_HASH_KEY_BYTES], const void *data, size_t len);

/* Hash of a name in a directory (or xattr owner) with the given seed. */
uint64_t bch_str_hash(const uint8_t key[BCH_STR_HASH_KEY_BYTES], uint64_t seed,
		      const void *name, size_t len);

#endif /* _BCACHEFS_STR_HASH_H */
