// SPDX-License-Identifier: GPL-2.0
/*
 * compress.c - extent data compression through liblz4, zlib and libzstd.
 * See compress.h for the contract.  Each call is self-contained (no shared
 * contexts), so it is safe from any thread.
 *
 * The three libraries are not linked but loaded (dl.h) the first time a
 * call compresses or decompresses their type: a command that meets no
 * compressed extent never maps them.  Their headers still give the
 * prototypes (the tables below), the constants and the bound macros.
 * Without the library a call returns -BCH_ERR_dl_<lib>, which names it.
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
#include "dl.h"
#include "errcode.h"

/* The functions called, x(member, function, symbol version) each. */
#define ZLIB_FUNCS()							\
	x(deflateInit2_,		deflateInit2_,			NULL)	\
	x(deflate,			deflate,			NULL)	\
	x(deflateEnd,			deflateEnd,			NULL)	\
	x(inflateInit2_,		inflateInit2_,			NULL)	\
	x(inflate,			inflate,			NULL)	\
	x(inflateEnd,			inflateEnd,			NULL)
#define LZ4_FUNCS()							\
	x(compress_default,		LZ4_compress_default,		NULL)	\
	x(compress_HC,			LZ4_compress_HC,		NULL)	\
	x(decompress_safe,		LZ4_decompress_safe,		NULL)
#define ZSTD_FUNCS()							\
	x(compress,			ZSTD_compress,			NULL)	\
	x(decompress,			ZSTD_decompress,		NULL)	\
	x(findFrameCompressedSize,	ZSTD_findFrameCompressedSize,	NULL)	\
	x(getFrameContentSize,		ZSTD_getFrameContentSize,	NULL)	\
	x(getErrorCode,			ZSTD_getErrorCode,		NULL)	\
	x(isError,			ZSTD_isError,			NULL)	\
	x(maxCLevel,			ZSTD_maxCLevel,			NULL)

#define x(member, func, ver)	BCH_DL_MEMBER(member, func)
static struct zlib_fns { ZLIB_FUNCS() } zl;
static struct lz4_fns { LZ4_FUNCS() } lz;
static struct zstd_fns { ZSTD_FUNCS() } zs;
#undef x

#define x(member, func, ver)	BCH_DL_SYM(struct zlib_fns, member, func, ver)
static const struct bch_dl_sym zlib_syms[] = { ZLIB_FUNCS() };
#undef x
#define x(member, func, ver)	BCH_DL_SYM(struct lz4_fns, member, func, ver)
static const struct bch_dl_sym lz4_syms[] = { LZ4_FUNCS() };
#undef x
#define x(member, func, ver)	BCH_DL_SYM(struct zstd_fns, member, func, ver)
static const struct bch_dl_sym zstd_syms[] = { ZSTD_FUNCS() };
#undef x

static struct bch_dl_lib zlib_lib = BCH_DL_LIB(BCH_SONAME_ZLIB, -BCH_ERR_dl_zlib, zlib_syms, &zl);
static struct bch_dl_lib lz4_lib  = BCH_DL_LIB(BCH_SONAME_LZ4, -BCH_ERR_dl_lz4, lz4_syms, &lz);
static struct bch_dl_lib zstd_lib = BCH_DL_LIB(BCH_SONAME_ZSTD, -BCH_ERR_dl_zstd, zstd_syms, &zs);

/* The library of a compression type, or NULL (none, or unknown). */
static struct bch_dl_lib *type_lib(unsigned type)
{
	switch (type) {
	case BCH_COMPRESSION_lz4:	return &lz4_lib;
	case BCH_COMPRESSION_gzip:	return &zlib_lib;
	case BCH_COMPRESSION_zstd:	return &zstd_lib;
	default:			return NULL;
	}
}

/*
 * From the headers' bound macros and zlib's compressBound() formula (zlib
 * 1.2.13, compress.c), so that sizing a buffer loads no library.  The
 * result equals the largest of the three libraries' own compressBound().
 */
size_t bch_compress_bound(size_t len)
{
	size_t b = ZSTD_COMPRESSBOUND(len);
	int l4 = len > INT32_MAX ? INT32_MAX : (int)len;
	size_t l = (size_t)LZ4_COMPRESSBOUND(l4);
	size_t z = len + (len >> 12) + (len >> 14) + (len >> 25) + 13;

	if (l > b)
		b = l;
	return z > b ? z : b;
}

static long gzip_compress(int level, const void *src, size_t len, void *dst, size_t cap)
{
	z_stream s = { 0 };
	long ret;

	/* raw deflate (no zlib header): the extent's checksum guards the data */
	if (zl.deflateInit2_(&s, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY,
			     ZLIB_VERSION, (int)sizeof(s)) != Z_OK)
		return -BCH_ERR_compress_failed;
	s.next_in = (Bytef *)src;
	s.avail_in = len;
	s.next_out = dst;
	s.avail_out = cap;
	int r = zl.deflate(&s, Z_FINISH);
	ret = r == Z_STREAM_END ? (long)s.total_out : r == Z_OK || r == Z_BUF_ERROR ? 0
							 : -BCH_ERR_compress_failed;
	zl.deflateEnd(&s);
	return ret;
}

static int gzip_decompress(const void *src, size_t src_len, void *dst, size_t dst_len)
{
	z_stream s = { 0 };
	int ret;

	if (zl.inflateInit2_(&s, -15, ZLIB_VERSION, (int)sizeof(s)) != Z_OK)
		return -BCH_ERR_decompress_failed;
	s.next_in = (Bytef *)src;
	s.avail_in = src_len;
	s.next_out = dst;
	s.avail_out = dst_len;
	int r = zl.inflate(&s, Z_FINISH);
	ret = r == Z_STREAM_END && s.total_out == dst_len ? 0 : -BCH_ERR_decompress_failed;
	zl.inflateEnd(&s);
	return ret;
}

long bch_compress(unsigned type, unsigned level, const void *src, size_t len,
		  void *dst, size_t cap, unsigned block)
{
	struct bch_dl_lib *lib = type_lib(type);
	long out;
	int ret;

	if (!len || !block || len > INT32_MAX || cap > INT32_MAX)
		return -EINVAL;
	if (lib && (ret = bch_dl_load(lib)))
		return ret;
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
			? lz.compress_default(src, body, (int)len, (int)cap - 4)
			: lz.compress_HC(src, body, (int)len, (int)cap - 4, level > 12 ? 12 : (int)level);
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
		int max = zs.maxCLevel();
		size_t r = zs.compress(dst, cap, src, len,
				       level ? ((int)level > max ? max : (int)level)
					     : BCH_ZSTD_DEFAULT_LEVEL);
		if (zs.isError(r))
			out = zs.getErrorCode(r) == ZSTD_error_dstSize_tooSmall
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
	struct bch_dl_lib *lib = type_lib(type);
	int ret;

	if (src_len > INT32_MAX || dst_len > INT32_MAX)
		return -BCH_ERR_decompress_failed;
	if (lib && (ret = bch_dl_load(lib)))
		return ret;
	switch (type) {
	case BCH_COMPRESSION_lz4: {
		uint32_t body;
		if (src_len < 4)
			return -BCH_ERR_decompress_failed;
		memcpy(&body, src, 4);
		if (body > src_len - 4)
			return -BCH_ERR_decompress_failed;
		int r = lz.decompress_safe((const char *)src + 4, dst, (int)body, (int)dst_len);
		return r == (int)dst_len ? 0 : -BCH_ERR_decompress_failed;
	}
	case BCH_COMPRESSION_gzip:
		return gzip_decompress(src, src_len, dst, dst_len);
	case BCH_COMPRESSION_zstd: {
		/* trim block padding: the frame says how long it is */
		size_t frame = zs.findFrameCompressedSize(src, src_len);
		if (zs.isError(frame))
			return -BCH_ERR_decompress_failed;
		unsigned long long content = zs.getFrameContentSize(src, frame);
		if (content != dst_len)
			return -BCH_ERR_decompress_failed;
		size_t r = zs.decompress(dst, dst_len, src, frame);
		return !zs.isError(r) && r == dst_len ? 0 : -BCH_ERR_decompress_failed;
	}
	default:
		return -BCH_ERR_decompress_failed;
	}
}
