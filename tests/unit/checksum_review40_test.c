// SPDX-License-Identifier: GPL-2.0
/*
 * checksum_review40_test.c - h-review40b (session 30) against h-io40's
 * crc32c fold (AVX-512 VPCLMULQDQ from 1 KiB up): the public entry points
 * (bch_crc32c(), bch_checksum()) at every length 0..4096 and every
 * alignment 0..63, against a bit-at-a-time reference computed byte by byte
 * (one pass gives every prefix's CRC); buffers that end, or start, at a
 * page with no access beside them (an over- or under-read faults); one
 * long buffer split at random points (incremental = one shot).
 * Data: splitmix64, seed printed on failure.
 */
#include <criterion/criterion.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "checksum.h"

bool bch_crc32c_fold_available(void);

#define SEED	0x40b40b40b40b40bULL

static uint64_t rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* one byte into a raw reflected crc32c (polynomial 0x82f63b78), bit by bit */
static uint32_t ref_byte(uint32_t crc, unsigned char b)
{
	crc ^= b;
	for (int k = 0; k < 8; k++)
		crc = (crc >> 1) ^ (0x82f63b78U & -(crc & 1));
	return crc;
}

Test(checksum_review40, known_vector)
{
	struct bch_csum c;

	cr_assert_eq(bch_checksum(BCH_CSUM_crc32c, "123456789", 9, &c), 0);
	cr_assert_eq((uint32_t)c.lo, 0xe3069283U, "crc32c(123456789) = %#x", (unsigned)c.lo);
	cr_assert_eq(~bch_crc32c(~0U, "123456789", 9), 0xe3069283U);
}

/* every length 0..4096 at every alignment 0..63, random starting CRCs */
Test(checksum_review40, every_length_every_alignment)
{
	enum { MAXLEN = 4096, ALIGNS = 64 };
	uint64_t s = SEED;
	unsigned char *buf = malloc(MAXLEN + ALIGNS);
	uint32_t *want = malloc((MAXLEN + 1) * sizeof(*want));

	cr_assert(buf && want);
	cr_log_info("fold path %s", bch_crc32c_fold_available() ? "available" : "not available");
	for (size_t i = 0; i < MAXLEN + ALIGNS; i++)
		buf[i] = rnd(&s);
	for (unsigned a = 0; a < ALIGNS; a++) {
		const unsigned char *p = buf + a;
		uint32_t init = a ? rnd(&s) : ~0U;

		want[0] = init;
		for (size_t n = 0; n < MAXLEN; n++)
			want[n + 1] = ref_byte(want[n], p[n]);
		for (size_t n = 0; n <= MAXLEN; n++) {
			uint32_t got = bch_crc32c(init, p, n);

			cr_assert_eq(got, want[n], "seed %#llx align %u len %zu init %#x: %#x, want %#x",
				     (unsigned long long)SEED, a, n, init, got, want[n]);
		}
		/* bch_checksum() (init and xorout ~0) at a few lengths of each alignment */
		for (size_t n = 1020; n <= 1300; n += 7) {
			struct bch_csum c;
			uint32_t w = ~0U;

			for (size_t k = 0; k < n; k++)
				w = ref_byte(w, p[k]);
			cr_assert_eq(bch_checksum(BCH_CSUM_crc32c, p, n, &c), 0);
			cr_assert_eq((uint32_t)c.lo, ~w, "bch_checksum align %u len %zu", a, n);
			cr_assert_eq(c.hi, 0);
		}
	}
	free(want);
	free(buf);
}

/* No read past the end nor before the start: no-access pages on both sides. */
Test(checksum_review40, no_read_outside_the_buffer)
{
	long pg = sysconf(_SC_PAGESIZE);
	size_t span = 3 * 4096 > (size_t)pg ? (3 * 4096 + pg - 1) / pg * pg : (size_t)pg;
	unsigned char *map = mmap(NULL, span + 2 * pg, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint64_t s = SEED ^ 1;

	cr_assert(map != MAP_FAILED);
	cr_assert_eq(mprotect(map, pg, PROT_NONE), 0);
	cr_assert_eq(mprotect(map + pg + span, pg, PROT_NONE), 0);
	unsigned char *lo = map + pg, *hi = map + pg + span;
	for (size_t i = 0; i < span; i++)
		lo[i] = rnd(&s);
	for (size_t n = 0; n <= 3 * 4096; n += n < 1100 ? 1 : 13) {
		uint32_t w = ~0U;

		for (size_t k = 0; k < n; k++)
			w = ref_byte(w, lo[k]);
		cr_assert_eq(bch_crc32c(~0U, lo, n), w, "at the start, len %zu", n);
		w = ~0U;
		for (size_t k = 0; k < n; k++)
			w = ref_byte(w, hi[k - n]);
		cr_assert_eq(bch_crc32c(~0U, hi - n, n), w, "at the end, len %zu", n);
	}
	munmap(map, span + 2 * pg);
}

/* 4 MiB + 77 bytes one shot = the same split at random points (some pieces past 1 KiB) */
Test(checksum_review40, split_anywhere)
{
	size_t len = (4 << 20) + 77;
	unsigned char *buf = malloc(len);
	uint64_t s = SEED ^ 2;

	cr_assert(buf);
	for (size_t i = 0; i < len; i++)
		buf[i] = rnd(&s);
	uint32_t w = ~0U;
	for (size_t k = 0; k < len; k++)
		w = ref_byte(w, buf[k]);
	cr_assert_eq(bch_crc32c(~0U, buf, len), w, "one shot");
	for (int round = 0; round < 20; round++) {
		uint32_t c = ~0U;

		for (size_t off = 0; off < len;) {
			size_t n = rnd(&s) % (round & 1 ? 5000 : 70000);

			if (n > len - off)
				n = len - off;
			c = bch_crc32c(c, buf + off, n);
			off += n;
		}
		cr_assert_eq(c, w, "round %d: seed %#llx", round, (unsigned long long)SEED);
	}
	free(buf);
}
