/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_COMPRESS_H
#define _BCACHEFS_COMPRESS_H

/*
 * compress.h - encoding of extent data: lz4, gzip (zlib raw deflate), zstd.
 *
 * The data path compresses each encoded extent (at most encoded_extent_max)
 * as one unit and stores the result padded to whole blocks.  Compression is
 * only worth it when it saves at least one block: otherwise bch_compress()
 * says "incompressible" and the caller stores the data plain.
 *
 * Invariants
 *   (1) bch_decompress() never writes outside dst and never reads outside
 *       src, whatever src holds: extents come from disk, and disks lie.
 *   (2) A successful decompression produced exactly dst_len bytes; anything
 *       else is -BCH_ERR_decompress_failed, unless the type's library could
 *       not be loaded: -BCH_ERR_dl_<lib>, no verdict on the data.
 *   (3) Output is deterministic for a given input, type and level (needed for
 *       byte-identical images).
 *   (4) liblz4, zlib and libzstd are loaded (dl.h) when their type is first
 *       compressed or decompressed, from any thread; nothing else loads them.
 *
 * Encoded forms (on disk, followed by zero padding to the next block):
 *   lz4    u32 LE length of the LZ4 block, then the LZ4 block
 *   gzip   a raw deflate stream (RFC 1951, no zlib or gzip header)
 *   zstd   one zstd frame with its content size
 * Each ends where it says it ends, so the padding is never decoded.
 */

#include <stddef.h>
#include <stdint.h>

/* Default levels when the option gives none ("zstd" rather than "zstd:3"). */
#define BCH_LZ4_DEFAULT_LEVEL	0	/* 0/1: fast LZ4; 2..12: LZ4HC */
#define BCH_GZIP_DEFAULT_LEVEL	6
#define BCH_ZSTD_DEFAULT_LEVEL	3

/* Largest compressed size of len input bytes for any type (for buffers; loads nothing). */
size_t bch_compress_bound(size_t len);

/*
 * Compress src (len bytes) with type (enum bch_compression_type) at level
 * (0 = the type's default) into dst (cap bytes).  block is the filesystem
 * block size: the result is only used when, rounded up to blocks, it is
 * smaller than len rounded up to blocks.
 * Returns the compressed length (> 0), 0 when the data is incompressible (store
 * it plain), or -BCH_ERR_compress_failed / -EINVAL, or -BCH_ERR_dl_<lib> when
 * the type's library cannot be loaded (it is loaded on first use).
 */
long bch_compress(unsigned type, unsigned level, const void *src, size_t len,
		  void *dst, size_t cap, unsigned block);

/*
 * Decompress exactly dst_len bytes from src (src_len bytes; trailing
 * padding allowed).  Returns 0, -BCH_ERR_decompress_failed, or
 * -BCH_ERR_dl_<lib> when the type's library cannot be loaded: then nothing
 * is known about the data (bch_err_is_dl()).
 */
int bch_decompress(unsigned type, const void *src, size_t src_len, void *dst, size_t dst_len);

/* Option value (type in bits 0..7, level in 8..15) to type and level. */
static inline unsigned bch_compression_type_of(uint64_t opt)	{ return opt & 0xff; }
static inline unsigned bch_compression_level_of(uint64_t opt)	{ return (opt >> 8) & 0xff; }

#endif /* _BCACHEFS_COMPRESS_H */
