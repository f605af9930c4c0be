/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_CHECKSUM_H
#define _BCACHEFS_CHECKSUM_H

/*
 * checksum.h - the checksum types of bcachefs_format.h (enum bch_csum_type).
 *
 * crc32c (Castagnoli, reflected, init/xorout ~0: crc32c("123456789") =
 * 0xe3069283), crc64 (ECMA-182 polynomial, reflected, init/xorout ~0, i.e.
 * CRC-64/XZ: crc64("123456789") = 0x995dc9bbdf1939fa), xxhash64 (seed 0, from
 * libxxhash, loaded on first use).  none yields zero.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bcachefs_format.h"

/*
 * Checksum of data with an on-disk checksum type, into *ret.  Returns 0, or
 * -BCH_ERR_dl_xxhash when the type is xxhash64 and libxxhash cannot be
 * loaded: not a mismatch, a missing library (bch_err_is_dl()).  An unknown
 * type yields zero, like none: callers validate the type
 * (bch_csum_type_valid()) before trusting a comparison.
 */
int bch_checksum(unsigned type, const void *data, size_t len, struct bch_csum *ret);
/* data against want: 0, -BCH_ERR_csum_mismatch, or bch_checksum()'s error. */
int bch_csum_verify(unsigned type, const void *data, size_t len, struct bch_csum want);
/*
 * Load now what computing type needs (xxhash64: libxxhash), so that a
 * writer finds out before it starts: 0 or -BCH_ERR_dl_xxhash.
 */
int bch_csum_type_load(unsigned type);
/* XXH64 of data with seed (derived identities, not checksums): 0 or -BCH_ERR_dl_xxhash. */
int bch_xxhash64(const void *data, size_t len, uint64_t seed, uint64_t *ret);
bool bch_csum_eq(struct bch_csum a, struct bch_csum b);
/*
 * The crc32c (as bch_checksum() gives it) of A followed by B, from the
 * crc32c of A, that of B and B's length in bytes: merging two extents
 * needs no second pass over their data.
 */
uint32_t bch_crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);
/*
 * Fuzzing only: every checksum comparison succeeds, so damage reaches the
 * structure checks behind the checksums.  Never set in the tool.
 */
extern bool bch_checksum_bypass;
bool bch_csum_type_valid(unsigned type);
const char *bch_csum_type_name(unsigned type);	/* "?" if unknown */

uint32_t bch_crc32c(uint32_t crc, const void *data, size_t len);	/* raw, no init/xorout */
uint64_t bch_crc64(uint64_t crc, const void *data, size_t len);		/* raw, no init/xorout */

#endif /* _BCACHEFS_CHECKSUM_H */
