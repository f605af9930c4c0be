/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_EXTENT_ENCODE_H
#define _BCACHEFS_EXTENT_ENCODE_H

/*
 * extent_encode.h - turning file data into an encoded extent and back:
 * compression (when it saves at least a block) and the checksum of what is
 * written, described by a struct bch_extent_crc (bcachefs_format.h).
 *
 * Invariants
 *   (1) Decoding verifies the checksum of the encoded bytes before anything
 *       else looks at them; a mismatch is -BCH_ERR_csum_mismatch and nothing
 *       is decompressed.
 *   (2) A crc entry is validated (sizes, types, offset) before use, so a
 *       damaged key cannot make decode read or write out of bounds.
 *   (3) Encoding is deterministic.
 */

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include "bcachefs_format.h"

struct bch_encode_opts {
	unsigned	csum_type;	/* enum bch_csum_type */
	uint64_t	compression;	/* compression option value (type | level << 8) */
	unsigned	block_sectors;	/* filesystem block size in sectors */
	unsigned	max_sectors;	/* encoded_extent_max in sectors */
};

/* Bytes of output buffer bch_extent_encode() needs for sectors of data. */
size_t bch_extent_encode_bound(unsigned sectors);

/*
 * Encode sectors (a multiple of block_sectors, at most max_sectors) of data
 * from src into dst (bch_extent_encode_bound(sectors) bytes); fills crc
 * (offset 0).  The bytes to write are dst[0 .. crc->compressed_sectors * 512).
 * Without compression dst may be NULL: the data is then written as it is
 * in src, and only checksummed.  Returns 0, -EINVAL, -BCH_ERR_compress_failed, or the -BCH_ERR_dl_* of a
 * compression or checksum library that cannot be loaded.
 */
int bch_extent_encode(const struct bch_encode_opts *o, const void *src, unsigned sectors,
		      void *dst, struct bch_extent_crc *crc);

/* Check a crc entry read from disk (and a key of key_sectors using it). */
int bch_extent_crc_validate(const struct bch_extent_crc *crc, unsigned key_sectors,
			    char *err, size_t errlen);

/*
 * Verify and decode: enc holds crc->compressed_sectors * 512 bytes as read;
 * dst receives crc->uncompressed_sectors * 512 bytes.  Returns 0,
 * -BCH_ERR_csum_mismatch, -BCH_ERR_decompress_failed, -BCH_ERR_bkey_invalid,
 * or the -BCH_ERR_dl_* of a library that cannot be loaded (not damage:
 * bch_err_is_dl()).
 */
int bch_extent_decode(const struct bch_extent_crc *crc, const void *enc, void *dst);

/* Is the extent stored as plain data (none, or incompressible: see bch_extent_crc)? */
static inline bool bch_crc_plain(const struct bch_extent_crc *crc)
{
	return crc->compression_type == BCH_COMPRESSION_none ||
	       crc->compression_type == BCH_COMPRESSION_incompressible;
}

#endif /* _BCACHEFS_EXTENT_ENCODE_H */
