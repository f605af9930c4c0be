// SPDX-License-Identifier: GPL-2.0
/*
 * extent_encode.c - checksum and compression of encoded extents (see
 * extent_encode.h).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "checksum.h"
#include "compress.h"
#include "errcode.h"
#include "extent_encode.h"

#define MAX_ENCODED_SECTORS	(1U << 16)	/* 32 MiB: far above encoded_extent_max */

size_t bch_extent_encode_bound(unsigned sectors)
{
	size_t plain = (size_t)sectors << BCH_SECTOR_SHIFT;
	size_t c = bch_compress_bound(plain) + 8;

	return (c > plain ? c : plain) + BCH_SECTOR_SIZE * 8;	/* room to pad to a block */
}

int bch_extent_encode(const struct bch_encode_opts *o, const void *src, unsigned sectors,
		      void *dst, struct bch_extent_crc *crc)
{
	size_t plain = (size_t)sectors << BCH_SECTOR_SHIFT;
	size_t block = (size_t)o->block_sectors << BCH_SECTOR_SHIFT;
	unsigned type = bch_compression_type_of(o->compression);
	long n = 0;

	if (!sectors || !o->block_sectors || sectors % o->block_sectors ||
	    sectors > o->max_sectors || sectors > MAX_ENCODED_SECTORS ||
	    !bch_csum_type_valid(o->csum_type))
		return -EINVAL;

	memset(crc, 0, sizeof(*crc));
	if (!dst && type != BCH_COMPRESSION_none)
		return -EINVAL;
	if (type != BCH_COMPRESSION_none) {
		n = bch_compress(type, bch_compression_level_of(o->compression), src, plain, dst,
				 bch_extent_encode_bound(sectors), block);
		if (n < 0)
			return (int)n;
	}
	if (n > 0) {
		size_t padded = ((size_t)n + block - 1) / block * block;
		memset((char *)dst + n, 0, padded - n);
		crc->compression_type = type;
		crc->compressed_bytes = n;
		crc->compressed_sectors = padded >> BCH_SECTOR_SHIFT;
	} else {
		if (dst)
			memcpy(dst, src, plain);
		crc->compression_type = BCH_COMPRESSION_none;
		crc->compressed_bytes = plain;
		crc->compressed_sectors = sectors;
	}
	crc->uncompressed_sectors = sectors;
	crc->csum_type = o->csum_type;
	return bch_checksum(o->csum_type, dst ? dst : src,
			    (size_t)crc->compressed_sectors << BCH_SECTOR_SHIFT, &crc->csum);
}


int bch_extent_crc_validate(const struct bch_extent_crc *crc, unsigned key_sectors,
			    char *err, size_t errlen)
{
	if (!bch_csum_type_valid(crc->csum_type))
		return bch_errf(err, errlen, -BCH_ERR_bkey_invalid, "unknown checksum type %u", crc->csum_type);
	if (crc->compression_type >= BCH_COMPRESSION_NR)
		return bch_errf(err, errlen, -BCH_ERR_bkey_invalid, "unknown compression type %u", crc->compression_type);
	if (!crc->uncompressed_sectors || crc->uncompressed_sectors > MAX_ENCODED_SECTORS ||
	    !crc->compressed_sectors || crc->compressed_sectors > MAX_ENCODED_SECTORS)
		return bch_errf(err, errlen, -BCH_ERR_bkey_invalid, "bad sizes %u/%u sectors", crc->compressed_sectors,
			    crc->uncompressed_sectors);
	if ((uint64_t)crc->compressed_bytes > (uint64_t)crc->compressed_sectors << BCH_SECTOR_SHIFT ||
	    !crc->compressed_bytes)
		return bch_errf(err, errlen, -BCH_ERR_bkey_invalid, "encoded length %u outside %u sectors",
			    crc->compressed_bytes, crc->compressed_sectors);
	if (bch_crc_plain(crc) &&
	    (crc->compressed_sectors != crc->uncompressed_sectors ||
	     crc->compressed_bytes != crc->uncompressed_sectors << BCH_SECTOR_SHIFT))
		return bch_errf(err, errlen, -BCH_ERR_bkey_invalid, "uncompressed extent with differing sizes");
	if ((uint64_t)crc->offset + key_sectors > crc->uncompressed_sectors)
		return bch_errf(err, errlen, -BCH_ERR_bkey_invalid, "key [%u, +%u) beyond the %u decoded sectors", crc->offset,
			    key_sectors, crc->uncompressed_sectors);
	return 0;
}

int bch_extent_decode(const struct bch_extent_crc *crc, const void *enc, void *dst)
{
	size_t enc_bytes = (size_t)crc->compressed_sectors << BCH_SECTOR_SHIFT;
	size_t dec_bytes = (size_t)crc->uncompressed_sectors << BCH_SECTOR_SHIFT;

	int ret;

	if (bch_extent_crc_validate(crc, 0, NULL, 0))
		return -BCH_ERR_bkey_invalid;
	if ((ret = bch_csum_verify(crc->csum_type, enc, enc_bytes, crc->csum)))
		return ret;
	if (bch_crc_plain(crc)) {
		memcpy(dst, enc, dec_bytes);
		return 0;
	}
	return bch_decompress(crc->compression_type, enc, crc->compressed_bytes, dst, dec_bytes);
}
