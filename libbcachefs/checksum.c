// SPDX-License-Identifier: GPL-2.0
/*
 * checksum.c - the checksum types of bcachefs_format.h.
 *
 * Owns: crc32c (Castagnoli), crc64 (ECMA-182, i.e. CRC-64/XZ) and xxhash64,
 * and the mapping from an on-disk enum bch_csum_type to a struct bch_csum.
 *
 * Both CRCs are reflected (bit 0 of each byte is shifted in first), so on a
 * little-endian host eight input bytes XORed into the running CRC can be
 * looked up in eight tables at once ("slice-by-8").  crc32c also has a path
 * through the SSE4.2 crc32 instruction (three streams at once), and for
 * buffers of 1 KiB and more one that folds with AVX-512 carry-less
 * multiplies where the CPU has them, chosen at run time; the paths must
 * agree bit for bit (tests/unit/checksum_test.c checks that).
 *
 * Invariants
 *   (1) bch_crc32c()/bch_crc64() are raw: no initial value or final XOR, so
 *       feeding a buffer in pieces gives the same result as feeding it whole.
 *       bch_checksum() adds init = xorout = ~0.
 *   (2) A struct bch_csum holds the value in lo (crc32c in its low 32 bits),
 *       hi is zero: two checksums compare equal only if both words do.
 *
 *   (3) xxhash64 is libxxhash's XXH64, loaded (dl.h) the first time a
 *       checksum of that type, or a seeded hash, is computed: a command
 *       that meets none never maps the library.  Without it those calls
 *       return -BCH_ERR_dl_xxhash, which callers pass up as a missing piece
 *       of the system, never as a checksum mismatch.
 *
 * Locking: the lookup and shift tables are built once, on first use, under
 * pthread_once, and libxxhash is loaded under dl.c's lock; after that
 * everything here is read-only and thread-safe.
 */
#include <pthread.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <xxhash.h>

#include "checksum.h"
#include "dl.h"
#include "errcode.h"

#define CRC32C_POLY	0x82f63b78U		/* 0x1edc6f41 bit-reversed */
#define CRC64_POLY	0xc96c5795d7870f42ULL	/* 0x42f0e1eba9ea3693 bit-reversed */

static uint32_t crc32c_table[8][256];
static uint64_t crc64_table[8][256];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

/*
 * table[0][b] is the CRC of the single byte b; table[k][b] is the CRC of b
 * followed by k zero bytes, which lets one step consume eight bytes.
 */
static void build_tables(void)
{
	for (unsigned b = 0; b < 256; b++) {
		uint32_t c32 = b;
		uint64_t c64 = b;

		for (unsigned bit = 0; bit < 8; bit++) {
			c32 = (c32 >> 1) ^ (CRC32C_POLY & -(c32 & 1));
			c64 = (c64 >> 1) ^ (CRC64_POLY & -(c64 & 1));
		}
		crc32c_table[0][b] = c32;
		crc64_table[0][b] = c64;
	}

	for (unsigned k = 1; k < 8; k++)
		for (unsigned b = 0; b < 256; b++) {
			uint32_t p32 = crc32c_table[k - 1][b];
			uint64_t p64 = crc64_table[k - 1][b];

			crc32c_table[k][b] = (p32 >> 8) ^ crc32c_table[0][p32 & 0xff];
			crc64_table[k][b] = (p64 >> 8) ^ crc64_table[0][p64 & 0xff];
		}
}

static inline uint64_t load_le64(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));	/* unaligned-safe; host is little-endian */
	return v;
}

/* ------------------------------------------------------------- crc32c */

/* Slice-by-8 crc32c; exported (not in checksum.h) so tests can compare paths. */
uint32_t bch_crc32c_sw(uint32_t crc, const void *data, size_t len)
{
	const unsigned char *p = data;

	pthread_once(&tables_once, build_tables);

	for (; len >= 8; len -= 8, p += 8) {
		uint64_t w = load_le64(p) ^ crc;

		crc = crc32c_table[7][w & 0xff] ^
		      crc32c_table[6][(w >> 8) & 0xff] ^
		      crc32c_table[5][(w >> 16) & 0xff] ^
		      crc32c_table[4][(w >> 24) & 0xff] ^
		      crc32c_table[3][(w >> 32) & 0xff] ^
		      crc32c_table[2][(w >> 40) & 0xff] ^
		      crc32c_table[1][(w >> 48) & 0xff] ^
		      crc32c_table[0][w >> 56];
	}
	while (len--)
		crc = (crc >> 8) ^ crc32c_table[0][(crc ^ *p++) & 0xff];
	return crc;
}

/*
 * crc32c of A then B from the crc32c of each (bch_checksum()'s, init and
 * xorout ~0, which cancel out): A's shifted over |B| zero bytes, XOR B's.
 * The shift is a multiplication by x^(8 |B|) modulo the polynomial,
 * reflected (bit 31 holds x^0), by squaring: 2 log2 |B| products.
 */
#define CRC32C_POLY_REFLECTED	0x82f63b78U

static uint32_t crc32c_mulmod(uint32_t a, uint32_t b)
{
	uint32_t prod = 0;

	for (uint32_t m = 1U << 31; m; m >>= 1) {
		if (a & m)
			prod ^= b;
		b = b & 1 ? (b >> 1) ^ CRC32C_POLY_REFLECTED : b >> 1;	/* b * x */
	}
	return prod;
}

uint32_t bch_crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b)
{
	uint32_t shift = 1U << 31, pow = 1U << 23;	/* x^0; x^8 */

	for (; len_b; len_b >>= 1) {
		if (len_b & 1)
			shift = crc32c_mulmod(shift, pow);
		pow = crc32c_mulmod(pow, pow);
	}
	return crc32c_mulmod(shift, crc_a) ^ crc_b;
}

#if defined(__x86_64__)
bool bch_crc32c_hw_available(void)
{
	return __builtin_cpu_supports("sse4.2");
}

/*
 * The crc32 instruction takes 3 cycles and can start one every cycle, so
 * the hardware path runs three streams over three adjacent blocks at once
 * and joins them: crc32c is linear, so the CRC of A then B is the CRC of A
 * shifted over |B| zero bytes, XOR the CRC of B from 0.  crc32c_shift_*
 * tabulate that shift for blocks of CRC32C_LONG and CRC32C_SHORT bytes (by
 * byte of the register, as for slice-by-8).
 */
#define CRC32C_LONG	8192
#define CRC32C_SHORT	256

static uint32_t crc32c_shift_long[4][256], crc32c_shift_short[4][256];
static pthread_once_t shift_once = PTHREAD_ONCE_INIT;

static void build_shift(uint32_t table[4][256], size_t n)
{
	static const unsigned char zeros[CRC32C_LONG];
	uint32_t basis[32];	/* bit i of the register, shifted over n zero bytes */

	for (unsigned i = 0; i < 32; i++)
		basis[i] = bch_crc32c_sw(1U << i, zeros, n);
	for (unsigned k = 0; k < 4; k++)
		for (unsigned b = 0; b < 256; b++) {
			uint32_t v = 0;
			for (unsigned j = 0; j < 8; j++)
				if (b & (1U << j))
					v ^= basis[8 * k + j];
			table[k][b] = v;
		}
}

static void build_shifts(void)
{
	build_shift(crc32c_shift_long, CRC32C_LONG);
	build_shift(crc32c_shift_short, CRC32C_SHORT);
}

static inline uint32_t crc32c_shift(const uint32_t table[4][256], uint32_t crc)
{
	return table[0][crc & 0xff] ^ table[1][(crc >> 8) & 0xff] ^
	       table[2][(crc >> 16) & 0xff] ^ table[3][crc >> 24];
}

/* Three streams over blocks [p, +block), [+block, +2 block), [+2 block, +3 block). */
__attribute__((target("sse4.2")))
static inline uint64_t crc32c_3way(uint64_t c, const unsigned char *p, size_t block,
				   const uint32_t shift[4][256])
{
	uint64_t c1 = 0, c2 = 0;

	for (size_t i = 0; i < block; i += 8) {
		c = __builtin_ia32_crc32di(c, load_le64(p + i));
		c1 = __builtin_ia32_crc32di(c1, load_le64(p + block + i));
		c2 = __builtin_ia32_crc32di(c2, load_le64(p + 2 * block + i));
	}
	c = crc32c_shift(shift, (uint32_t)c) ^ (uint32_t)c1;
	return crc32c_shift(shift, (uint32_t)c) ^ (uint32_t)c2;
}

/*
 * Folding with carry-less multiplies (AVX-512 VPCLMULQDQ), for long
 * buffers: the crc32 instruction's three streams reach 8 bytes a cycle (40
 * ms a GiB in cache, 75 from memory: a plain file's read-ahead checks
 * extents just read uncached), this path 64 bytes a fold of four lanes.
 * Sixteen 128-bit accumulators A (four zmm) run over 256-byte strides.  In
 * a lane loaded little-endian, bit i is the coefficient of x^(127 - i) of
 * the 16 bytes' polynomial (reflected), so its low 64 bits L are the high
 * half: A = L x^64 + H.  Moving A forward by D bits is
 *   A x^D = L (x^(64 + D) mod P) + H (x^D mod P)    (mod P),
 * each product 64 x 32 bits, its sum below x^96: a lane again, XORed into
 * the data D bits on.  PCLMULQDQ of two reflected 64-bit values yields the
 * product times x in the reflected 128 bits, hence the constants x^(D + 63)
 * and x^(D - 1) mod P, a 32-bit polynomial each, reflected into the high
 * half of a 64-bit lane (FOLD_K; tests/unit/checksum_test.c checks them
 * against the definition).  The initial CRC is XORed into the first four
 * bytes (the raw CRC is linear); the last lane's CRC is the whole
 * prefix's, taken with two crc32 instructions, and the tail (< 256 bytes)
 * continues from it.
 */
#define FOLD_K(lo, hi)	_mm512_set_epi64(hi, lo, hi, lo, hi, lo, hi, lo)
#define FOLD_MIN	1024	/* below this the setup is more than it saves */

bool bch_crc32c_fold_available(void)
{
	return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq") &&
	       __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.2");
}

/* the lanes of a moved D bits on (the constant pair of D), XOR x */
#define FOLD_TARGET	__attribute__((target("avx512f,avx512vl,vpclmulqdq,pclmul,sse4.2")))
FOLD_TARGET static inline __m512i fold512(__m512i a, __m512i k, __m512i x)
{
	return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(a, k, 0x00),
					 _mm512_clmulepi64_epi128(a, k, 0x11), x, 0x96);
}

FOLD_TARGET static inline __m128i fold128(__m128i a, uint64_t klo, uint64_t khi, __m128i x)
{
	__m128i k = _mm_set_epi64x((long long)khi, (long long)klo);

	return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(a, k, 0x00),
					   _mm_clmulepi64_si128(a, k, 0x11)), x);
}

/* The raw crc32c of len bytes (len >= 256, a multiple of 256) from crc. */
FOLD_TARGET static uint32_t crc32c_fold(uint32_t crc, const unsigned char *p, size_t len)
{
	const __m512i k2048 = FOLD_K(0xe9a5d8be00000000ULL, 0x1426a81500000000ULL);
	__m512i z0 = _mm512_xor_si512(_mm512_loadu_si512(p), _mm512_castsi128_si512(_mm_cvtsi32_si128((int)crc)));
	__m512i z1 = _mm512_loadu_si512(p + 64);
	__m512i z2 = _mm512_loadu_si512(p + 128);
	__m512i z3 = _mm512_loadu_si512(p + 192);

	for (size_t off = 256; off < len; off += 256) {
		z0 = fold512(z0, k2048, _mm512_loadu_si512(p + off));
		z1 = fold512(z1, k2048, _mm512_loadu_si512(p + off + 64));
		z2 = fold512(z2, k2048, _mm512_loadu_si512(p + off + 128));
		z3 = fold512(z3, k2048, _mm512_loadu_si512(p + off + 192));
	}
	/* four zmm into the last, 512 bits apart */
	const __m512i k512 = FOLD_K(0x1c19243b00000000ULL, 0x75bba45b00000000ULL);
	z1 = fold512(z0, k512, z1);
	z2 = fold512(z1, k512, z2);
	z3 = fold512(z2, k512, z3);
	/* its four lanes into the last, 128 bits apart */
	__m128i a = _mm512_extracti32x4_epi32(z3, 0);
	a = fold128(a, 0x3743f7bd00000000ULL, 0x3171d43000000000ULL, _mm512_extracti32x4_epi32(z3, 1));
	a = fold128(a, 0x3743f7bd00000000ULL, 0x3171d43000000000ULL, _mm512_extracti32x4_epi32(z3, 2));
	a = fold128(a, 0x3743f7bd00000000ULL, 0x3171d43000000000ULL, _mm512_extracti32x4_epi32(z3, 3));
	uint64_t c = __builtin_ia32_crc32di(0, (uint64_t)_mm_cvtsi128_si64(a));
	return (uint32_t)__builtin_ia32_crc32di(c, (uint64_t)_mm_extract_epi64(a, 1));
}

/* SSE4.2 crc32c; callers check bch_crc32c_hw_available() first. */
__attribute__((target("sse4.2")))
uint32_t bch_crc32c_hw(uint32_t crc, const void *data, size_t len)
{
	const unsigned char *p = data;
	uint64_t c = crc;

	if (len >= FOLD_MIN && bch_crc32c_fold_available()) {
		size_t n = len & ~(size_t)255;

		c = crc32c_fold(crc, p, n);
		p += n;
		len -= n;
	}
	if (len >= 3 * CRC32C_SHORT)
		pthread_once(&shift_once, build_shifts);
	for (; len >= 3 * CRC32C_LONG; len -= 3 * CRC32C_LONG, p += 3 * CRC32C_LONG)
		c = crc32c_3way(c, p, CRC32C_LONG, crc32c_shift_long);
	for (; len >= 3 * CRC32C_SHORT; len -= 3 * CRC32C_SHORT, p += 3 * CRC32C_SHORT)
		c = crc32c_3way(c, p, CRC32C_SHORT, crc32c_shift_short);
	for (; len >= 8; len -= 8, p += 8)
		c = __builtin_ia32_crc32di(c, load_le64(p));
	while (len--)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	return (uint32_t)c;
}
#else
bool bch_crc32c_hw_available(void)
{
	return false;
}

bool bch_crc32c_fold_available(void)
{
	return false;
}

uint32_t bch_crc32c_hw(uint32_t crc, const void *data, size_t len)
{
	return bch_crc32c_sw(crc, data, len);
}
#endif

uint32_t bch_crc32c(uint32_t crc, const void *data, size_t len)
{
	/* __builtin_cpu_supports reads a cached cpuid result: cheap per call. */
	if (bch_crc32c_hw_available())
		return bch_crc32c_hw(crc, data, len);
	return bch_crc32c_sw(crc, data, len);
}

/* -------------------------------------------------------------- crc64 */

uint64_t bch_crc64(uint64_t crc, const void *data, size_t len)
{
	const unsigned char *p = data;

	pthread_once(&tables_once, build_tables);

	for (; len >= 8; len -= 8, p += 8) {
		uint64_t w = load_le64(p) ^ crc;

		crc = crc64_table[7][w & 0xff] ^
		      crc64_table[6][(w >> 8) & 0xff] ^
		      crc64_table[5][(w >> 16) & 0xff] ^
		      crc64_table[4][(w >> 24) & 0xff] ^
		      crc64_table[3][(w >> 32) & 0xff] ^
		      crc64_table[2][(w >> 40) & 0xff] ^
		      crc64_table[1][(w >> 48) & 0xff] ^
		      crc64_table[0][w >> 56];
	}
	while (len--)
		crc = (crc >> 8) ^ crc64_table[0][(crc ^ *p++) & 0xff];
	return crc;
}

/* ----------------------------------------------------------- xxhash64 */

/* x(member, function, symbol version) */
#define XXHASH_FUNCS()		x(XXH64, XXH64, NULL)

#define x(member, func, ver)	BCH_DL_MEMBER(member, func)
static struct xxhash_fns { XXHASH_FUNCS() } xxh;
#undef x
#define x(member, func, ver)	BCH_DL_SYM(struct xxhash_fns, member, func, ver)
static const struct bch_dl_sym xxhash_syms[] = { XXHASH_FUNCS() };
#undef x

static struct bch_dl_lib xxhash_lib =
	BCH_DL_LIB(BCH_SONAME_XXHASH, -BCH_ERR_dl_xxhash, xxhash_syms, &xxh);

int bch_xxhash64(const void *data, size_t len, uint64_t seed, uint64_t *ret)
{
	int err = bch_dl_load(&xxhash_lib);

	*ret = err ? 0 : xxh.XXH64(data, len, seed);
	return err;
}

/* ---------------------------------------------------------- bch_csum */

static const char * const csum_type_names[] = {
#define x(n, id, bytes)	[id] = #n,
	BCH_CSUM_TYPES()
#undef x
};

bool bch_csum_type_valid(unsigned type)
{
	return type < BCH_CSUM_NR;
}

const char *bch_csum_type_name(unsigned type)
{
	return bch_csum_type_valid(type) ? csum_type_names[type] : "?";
}

int bch_csum_type_load(unsigned type)
{
	return type == BCH_CSUM_xxhash64 ? bch_dl_load(&xxhash_lib) : 0;
}

int bch_checksum(unsigned type, const void *data, size_t len, struct bch_csum *ret)
{
	ret->lo = ret->hi = 0;
	switch (type) {
	case BCH_CSUM_crc32c:
		ret->lo = ~bch_crc32c(~0U, data, len);
		break;
	case BCH_CSUM_crc64:
		ret->lo = ~bch_crc64(~0ULL, data, len);
		break;
	case BCH_CSUM_xxhash64: {
		uint64_t h;
		int err = bch_xxhash64(data, len, 0, &h);

		ret->lo = h;
		return err;
	}
	}
	return 0;
}

int bch_csum_verify(unsigned type, const void *data, size_t len, struct bch_csum want)
{
	struct bch_csum got;
	int ret = bch_checksum(type, data, len, &got);

	return ret ? ret : bch_csum_eq(got, want) ? 0 : -BCH_ERR_csum_mismatch;
}

bool bch_checksum_bypass;

bool bch_csum_eq(struct bch_csum a, struct bch_csum b)
{
	return bch_checksum_bypass || (a.lo == b.lo && a.hi == b.hi);
}
