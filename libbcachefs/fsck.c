// SPDX-License-Identifier: GPL-2.0
/*
 * fsck.c - the problem table and the fix-or-not decision shared by every
 * pass (see fsck.h).  The passes themselves live in fsck_<pass>.c.
 */
#include <inttypes.h>
#include <stdio.h>

#include "bcachefs.h"

#include "fsck.h"

const struct bch_fsck_problem_info bch_fsck_problems[BCH_FSCK_PROBLEM_NR] = {
#define x(n, num, pass, flags, msg)	[BCH_FSCK_##n] = { #n, num, pass, flags, msg },
	BCH_FSCK_PROBLEMS()
#undef x
};

bool bch_fsck_problem(struct bch_fsck_ctx *ctx, enum bch_fsck_problem p,
		      const char *where, const char *detail)
{
	const struct bch_fsck_problem_info *info = &bch_fsck_problems[p];
	bool fix;

	ctx->found[p]++;
	if (info->flags & FSCK_FATAL)
		ctx->fatal = true;

	if ((info->flags & (FSCK_FATAL | FSCK_NOFIX)) || ctx->cancelled || ctx->mode == BCH_FSCK_NO)
		fix = false;
	else if (ctx->mode == BCH_FSCK_YES)
		fix = true;
	else if (ctx->mode == BCH_FSCK_PREEN)
		fix = info->flags & FSCK_SAFE;
	else if (ctx->class_answer[p])
		fix = ctx->class_answer[p] > 0;
	else {
		enum bch_fsck_answer a = ctx->report
			? ctx->report(ctx, p, where, detail, -1) : BCH_FSCK_ANSWER_NO;
		switch (a) {
		case BCH_FSCK_ANSWER_ALL:
			ctx->class_answer[p] = 1;
			/* fallthrough */
		case BCH_FSCK_ANSWER_YES:
			return true;
		case BCH_FSCK_ANSWER_NONE:
			ctx->class_answer[p] = -1;
			return false;
		case BCH_FSCK_ANSWER_QUIT:
			ctx->cancelled = true;
			return false;
		default:
			return false;
		}
	}
	if (ctx->report)
		ctx->report(ctx, p, where, detail, fix);
	return fix;
}

void bch_fsck_problem_unfixable(struct bch_fsck_ctx *ctx, enum bch_fsck_problem p,
				const char *where, const char *detail)
{
	ctx->found[p]++;
	ctx->fatal = true;
	if (ctx->report)
		ctx->report(ctx, p, where, detail, BCH_FSCK_CANNOT_FIX);
}

void bch_fsck_fixed(struct bch_fsck_ctx *ctx, enum bch_fsck_problem p)
{
	ctx->fixed[p]++;
}

uint64_t bch_fsck_nr_found(const struct bch_fsck_ctx *ctx)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < BCH_FSCK_PROBLEM_NR; i++)
		if (!(bch_fsck_problems[i].flags & FSCK_MINOR))
			n += ctx->found[i];
	return n;
}

uint64_t bch_fsck_nr_fixed(const struct bch_fsck_ctx *ctx)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < BCH_FSCK_PROBLEM_NR; i++)
		if (!(bch_fsck_problems[i].flags & FSCK_MINOR))
			n += ctx->fixed[i];
	return n;
}

uint64_t bch_fsck_nr_repairs(const struct bch_fsck_ctx *ctx)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < BCH_FSCK_PROBLEM_NR; i++)
		n += ctx->fixed[i];
	return n;
}

int bch_fsck_journal(struct bch_fsck_ctx *ctx, struct bch_fs *c)
{
	for (unsigned i = 0; i < c->nr_journal_gaps; i++) {
		char detail[128];
		if (c->journal_gaps[i][1] == UINT64_MAX)
			snprintf(detail, sizeof(detail), "entries %" PRIu64 " and after (the newest: "
				 "written, now missing or damaged)", c->journal_gaps[i][0]);
		else
			snprintf(detail, sizeof(detail), "entries %" PRIu64 "..%" PRIu64,
				 c->journal_gaps[i][0], c->journal_gaps[i][1]);
		if (bch_fsck_problem(ctx, BCH_FSCK_journal_entry_missing, "journal", detail) &&
		    !c->read_only)
			bch_fsck_fixed(ctx, BCH_FSCK_journal_entry_missing);
	}
	return 0;
}
