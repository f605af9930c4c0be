// SPDX-License-Identifier: GPL-2.0
/*
 * fsck_claim_test.c - the blocks pass 5 finds claimed (fsck_files.c,
 * struct fsck_claims): runs while they are few, a bitmap past
 * FSCK_CLAIM_RUNS.  Every claim's answer (were any of its blocks claimed
 * already?) is compared with a plain bitmap's, for claims in order (the
 * runs grow at the end), overlapping, touching from either side, inside a
 * run, bridging several runs, and scattered until the bitmap takes over.
 */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "fsck_files.h"

#define BLOCKS	(1U << 20)

struct ref {
	uint8_t	*map;
};

static bool ref_take(struct ref *r, uint64_t first, uint64_t last)
{
	bool taken = false;

	for (uint64_t b = first; b <= last; b++) {
		taken |= r->map[b / 8] >> (b % 8) & 1;
		r->map[b / 8] |= 1U << (b % 8);
	}
	return taken;
}

/* The runs are sorted, apart (not even touching) and non-empty. */
static void check_runs(const struct fsck_claims *cl)
{
	for (size_t i = 0; i < cl->nr; i++) {
		cr_assert(cl->run[i][0] < cl->run[i][1], "run %zu is empty", i);
		if (i)
			cr_assert(cl->run[i - 1][1] < cl->run[i][0], "runs %zu and %zu touch", i - 1, i);
	}
}

static void take_both(struct fsck_claims *cl, struct ref *r, uint64_t first, uint64_t last)
{
	bool want = ref_take(r, first, last);
	bool got = fsck_claims_take(cl, first, last);

	cr_assert_eq(got, want, "claim %llu..%llu: %d, a bitmap says %d", (unsigned long long)first,
		     (unsigned long long)last, got, want);
	if (!cl->map)
		check_runs(cl);
}

Test(fsck_claim, runs_match_a_bitmap)
{
	struct fsck_claims cl;
	struct ref r = { calloc(BLOCKS / 8, 1) };

	cr_assert(r.map);
	fsck_claims_init(&cl, BLOCKS);
	/* in order: one run */
	for (uint64_t b = 1000; b < 2000; b += 4)
		take_both(&cl, &r, b, b + 3);
	cr_assert_eq(cl.nr, 1);
	/* inside it, overlapping its ends, touching it from either side */
	take_both(&cl, &r, 1500, 1500);
	take_both(&cl, &r, 990, 1005);
	take_both(&cl, &r, 1995, 2010);
	take_both(&cl, &r, 980, 989);
	take_both(&cl, &r, 2011, 2020);
	cr_assert_eq(cl.nr, 1);
	/* runs apart, then one claim over several of them and the gaps between */
	for (uint64_t b = 5000; b < 6000; b += 100)
		take_both(&cl, &r, b, b + 9);
	take_both(&cl, &r, 100, 109);	/* before every run */
	cr_assert_eq(cl.nr, 12);
	take_both(&cl, &r, 5005, 5405);
	take_both(&cl, &r, 5950, 5990);	/* in a gap: a run of its own */
	/* random claims, some over what is claimed */
	srand(7);
	for (unsigned i = 0; i < 3000; i++) {
		uint64_t first = (uint64_t)rand() % (BLOCKS - 64);
		take_both(&cl, &r, first, first + (uint64_t)rand() % 64);
	}
	cr_assert_null(cl.map, "3000 claims fit in runs");
	/* scattered until the bitmap takes over; the answers stay the same */
	for (unsigned i = 0; i < 2 * FSCK_CLAIM_RUNS; i++) {
		uint64_t first = (uint64_t)rand() % (BLOCKS - 8);
		take_both(&cl, &r, first, first + (uint64_t)rand() % 8);
	}
	cr_assert_not_null(cl.map, "past FSCK_CLAIM_RUNS runs: the bitmap");
	for (unsigned i = 0; i < 2000; i++) {
		uint64_t first = (uint64_t)rand() % (BLOCKS - 300);
		take_both(&cl, &r, first, first + (uint64_t)rand() % 300);
	}
	/* every block claimed is claimed in the bitmap, and no other */
	for (uint64_t b = 0; b < BLOCKS; b++)
		cr_assert_eq(!!(cl.map[b / 8] >> (b % 8) & 1), !!(r.map[b / 8] >> (b % 8) & 1),
			     "block %llu", (unsigned long long)b);
	fsck_claims_exit(&cl);
	free(r.map);
}
