// SPDX-License-Identifier: GPL-2.0
/*
 * compress.c - extent data compression through liblz4, zlib and libzstd.
 * See compress.h for the contract.  Each call is self-contained (no shared
 * contexts), so it is safe from any thread.
 */
#include <errno.h>
#include <string.h>

#include <lz4.h>
#include <lz4hc.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "bcachefs_format.h"
#include "compress.h"
#include "errcode.h"

size_t bch_compress_bound(size_t len)
{
	size_t b = ZSTD_compressBound(len);
	size_t l = (size_t)LZ4_compressBound(len > INT32_MAX ? INT32_MAX : (int)len);
	size_t z = compressBound(len);

	if (l > b)
		b = l;
	return z > b ? z : b;
}

static long gzip_compress(int level, const void *src, size_t len, void *dst, size_t cap)
{
	z_stream s = { 0 };
	long ret;

	/* raw deflate (no zlib header): the extent's checksum guards the data */
	if (deflateInit2(&s, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -BCH_ERR_compress_failed;
	s.next_in = (Bytef *)src;
	s.avail_in = len;
	s.next_out = dst;
	s.avail_out = cap;
	int r = deflate(&s, Z_FINISH);
	ret = r == Z_STREAM_END ? (long)s.total_out : r == Z_OK || r == Z_BUF_ERROR ? 0
							 : -BCH_ERR_compress_failed;
	deflateEnd(&s);
	return ret;
}

static int gzip_decompress(const void *src, size_t src_len, void *dst, size_t dst_len)
{
	z_stream s = { 0 };
	int ret;

	if (inflateInit2(&s, -15) != Z_OK)
		return -BCH_ERR_decompress_failed;
	s.next_in = (Bytef *)src;
	s.avail_in = src_len;
	s.next_out = dst;
	s.avail_out = dst_len;
	int r = inflate(&s, Z_FINISH);
	ret = r == Z_STREAM_END && s.total_out == dst_len ? 0 : -BCH_ERR_decompress_failed;
	inflateEnd(&s);
	return ret;
}

long bch_compress(unsigned type, unsigned level, const void *src, size_t len,
		  void *dst, size_t cap, unsigned block)
{
	long out;

	if (!len || !block || len > INT32_MAX || cap > INT32_MAX)
		return -EINVAL;
	switch (type) {
	case BCH_COMPRESSION_none:
		return 0;
	case BCH_COMPRESSION_lz4: {
		/* a 32-bit LE length first: an LZ4 block does not delimit itself */
		if (cap < 8)
			return 0;
		char *body = (char *)dst + 4;
		if (!level)
			level = BCH_LZ4_DEFAULT_LEVEL;
		out = level <= 1
			? LZ4_compress_default(src, body, (int)len, (int)cap - 4)
			: LZ4_compress_HC(src, body, (int)len, (int)cap - 4, level > 12 ? 12 : (int)level);
		if (out > 0) {
			uint32_t le = (uint32_t)out;	/* little-endian host (bcachefs_format.h) */
			memcpy(dst, &le, 4);
			out += 4;
		}
		break;		/* 0: did not fit in cap */
	}
	case BCH_COMPRESSION_gzip:
		out = gzip_compress(level ? (level > 9 ? 9 : (int)level) : BCH_GZIP_DEFAULT_LEVEL,
				    src, len, dst, cap);
		break;
	case BCH_COMPRESSION_zstd: {
		int max = ZSTD_maxCLevel();
		size_t r = ZSTD_compress(dst, cap, src, len,
					 level ? ((int)level > max ? max : (int)level)
					       : BCH_ZSTD_DEFAULT_LEVEL);
		if (ZSTD_isError(r))
			out = ZSTD_getErrorCode(r) == ZSTD_error_dstSize_tooSmall
				? 0 : -BCH_ERR_compress_failed;
		else
			out = (long)r;
		break;
	}
	default:
		return -EINVAL;
	}
	if (out <= 0)
		return out;
	/* worth it only when it saves at least one block */
	size_t plain_blocks = (len + block - 1) / block;
	size_t comp_blocks = ((size_t)out + block - 1) / block;
	return comp_blocks < plain_blocks ? out : 0;
}

int bch_decompress(unsigned type, const void *src, size_t src_len, void *dst, size_t dst_len)
{
	if (src_len > INT32_MAX || dst_len > INT32_MAX)
		return -BCH_ERR_decompress_failed;
	switch (type) {
	case BCH_COMPRESSION_lz4: {
		uint32_t body;
		if (src_len < 4)
			return -BCH_ERR_decompress_failed;
		memcpy(&body, src, 4);
		if (body > src_len - 4)
			return -BCH_ERR_decompress_failed;
		int r = LZ4_decompress_safe((const char *)src + 4, dst, (int)body, (int)dst_len);
		return r == (int)dst_len ? 0 : -BCH_ERR_decompress_failed;
	}
	case BCH_COMPRESSION_gzip:
		return gzip_decompress(src, src_len, dst, dst_len);
	case BCH_COMPRESSION_zstd: {
		/* trim block padding: the frame says how long it is */
		size_t frame = ZSTD_findFrameCompressedSize(src, src_len);
		if (ZSTD_isError(frame))
			return -BCH_ERR_decompress_failed;
		unsigned long long content = ZSTD_getFrameContentSize(src, frame);
		if (content != dst_len)
			return -BCH_ERR_decompress_failed;
		size_t r = ZSTD_decompress(dst, dst_len, src, frame);
		return !ZSTD_isError(r) && r == dst_len ? 0 : -BCH_ERR_decompress_failed;
	}
	default:
		return -BCH_ERR_decompress_failed;
	}
}
