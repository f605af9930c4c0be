// SPDX-License-Identifier: GPL-2.0
/* crashcut.c - the cut loop of crash tests on recorded members (see crashcut.h). */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <stdio.h>
#include <stdlib.h>

#include "fs.h"
#include "tests/lib/crashcut.h"
#include "tests/lib/iorecord.h"

/* The cut's images on disk, opened and checked: NULL, or what is wrong. */
static const char *cut_problem(const struct crash_cuts *cc, unsigned done, char *msg, size_t len)
{
	char err[256];
	struct bch_fs *c = testfs_open(cc->crash, cc->ndev, 0, 0, err, sizeof(err));
	const char *bad;

	if (!c)
		return snprintf(msg, len, "open: %s", err), msg;
	unsigned from = cc->synced_op ? cc->synced_op[done] : done;
	unsigned to = done < cc->nops ? done + 1 : cc->nops;
	bad = cc->check(c, from, to, msg, len);
	bch_fs_close(c);
	return bad ? bad : testfs_fsck_problem(cc->crash, cc->ndev, false, msg, len);
}

size_t crash_cuts_run(const struct crash_cuts *cc)
{
	size_t nev = iorec_nr_events(cc->rec), cuts = 0;
	char msg[512];

	for (size_t at = 0; at <= nev; at++) {
		/* the last op finished before the cut */
		unsigned done = 0;
		while (done < cc->nops && cc->op_event[done + 1] <= at)
			done++;
		for (unsigned s = 0; s < cc->seeds; s++, cuts++) {
			struct iorec_plan plan;
			struct iorec_cut cut = { .at = at, .seed = cc->seed + s * 7919 + at, .keep_pct = 50,
						 .torn = true };

			cr_assert_eq(iorec_plan(cc->rec, &cut, &plan), 0);
			for (unsigned d = 0; d < cc->ndev; d++)
				cr_assert_eq(iorec_write_image(cc->rec, &plan, d, cc->crash[d]), 0);
			const char *bad = cut_problem(cc, done, msg, sizeof(msg));
			if (bad) {
				char *desc = iorec_plan_describe(cc->rec, &plan);
				cr_log_error("%s: cut at event %zu (seed %llu): %s\n%s", cc->name, at,
					     (unsigned long long)cut.seed, bad, desc ? desc : "");
				free(desc);
				if (getenv("CRASH_KEEP")) {
					for (unsigned d = 0; d < cc->ndev; d++)
						fprintf(stderr, "%s: image kept: %s\n", cc->name, cc->crash[d]);
					exit(1);
				}
			}
			iorec_plan_free(&plan);
			cr_assert(!bad, "%s: cut at event %zu of %zu, seed %llu: %s", cc->name, at, nev,
				  (unsigned long long)cc->seed, bad);
		}
	}
	return cuts;
}
