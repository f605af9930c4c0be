// SPDX-License-Identifier: GPL-2.0
/*
 * fsck_replicas.c - pass 12: the superblock's replicas table (replicas.h)
 * against what the keys use, recomputed after passes 3-11 have repaired
 * the keys.  It checks:
 *   replicas_missing      a member set used by a btree pointer or an extent's
 *                         dirty pointers (or a journal ring) has no entry:
 *                         added (a degraded open would misjudge the loss)
 *   replicas_bad_member   an entry names a slot that is not a member (a
 *                         removed device): dropped; no key can use it (pass 5
 *                         drops pointers to such slots)
 *   replicas_unused       an entry nothing uses: dropped.  Counted like any
 *                         problem (exit 4 under -n): the gc points keep the
 *                         table exact (replicas.h, invariant 4), so only a
 *                         crash before one leaves these, and a stale entry
 *                         makes a degraded open or `device offline` refuse
 *                         for data that has copies elsewhere
 * The repairs are one superblock write at the end of the pass, which also
 * marks the table kept (BCH_COMPAT_REPLICAS_KEPT) when no set is left
 * missing: a table of an older version becomes one a degraded open uses.
 * The heading is printed only when something is found.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcachefs.h"
#include "errcode.h"
#include "fsck.h"
#include "journal.h"
#include "replicas.h"
#include "super.h"

static const char *entry_text(const struct bch_replicas_cpu_entry *e, char *buf, size_t len)
{
	static const char * const names[] = {
#define x(n, id)	[id] = #n,
		BCH_DATA_TYPES()
#undef x
	};
	int w = snprintf(buf, len, "replicas entry %s [",
			 e->data_type < BCH_DATA_NR ? names[e->data_type] : "?");

	for (unsigned d = 0, k = 0; d < BCH_SB_MEMBERS_MAX && w >= 0 && (size_t)w < len; d++)
		if (e->devs & (1ULL << d))
			w += snprintf(buf + w, len - w, "%s%u", k++ ? " " : "", d);
	if (w >= 0 && (size_t)w < len)
		snprintf(buf + w, len - w, "]");
	return buf;
}

static uint64_t members(const struct bch_fs *c)
{
	uint64_t m = 0;

	for (unsigned d = 0; d < c->nr_devs; d++) {
		const struct bch_member *mi = bch_sb_member(c->sb, d);
		if (mi && bch_member_exists(mi))
			m |= 1ULL << d;
	}
	return m;
}

struct pass {
	struct bch_fsck_ctx	*ctx;
	bool			heading;
	unsigned		fixes[BCH_FSCK_PROBLEM_NR];
};

static bool problem(struct pass *p, enum bch_fsck_problem code, const char *where, const char *detail)
{
	if (!p->heading && p->ctx->progress)
		p->ctx->progress(p->ctx, 12, "replicas table");
	p->heading = true;
	bool fix = bch_fsck_problem(p->ctx, code, where, detail);
	p->fixes[code] += fix;
	return fix;
}

int bch_fsck_replicas(struct bch_fsck_ctx *ctx, struct bch_fs *c)
{
	struct bch_replicas_cpu used, fixed = { 0 };
	struct pass p = { .ctx = ctx };
	uint64_t m = members(c);
	bool changed = false, complete = true;
	char where[160], detail[96];
	int r;

	if (!c->replicas || c->opts.v[Opt_very_degraded])
		return 0;	/* very_degraded: nodes may have no copy to read */
	/* what pass 3 gathered, while no key has changed since; else read them all again */
	if (ctx->replicas_gathered && ctx->replicas_fs == c && ctx->replicas_marks == c->replicas->marks) {
		memset(&used, 0, sizeof(used));
		r = 0;
		for (unsigned i = 0; i < ctx->replicas_nr && !r; i++)
			if (bch_replicas_cpu_add(&used, ctx->replicas_used[i].data_type,
						 ctx->replicas_used[i].devs) < 0)
				r = -ENOMEM;
		if (!r)
			r = bch_replicas_used_journal(c, &used);
		if (r)
			bch_replicas_cpu_free(&used);
	} else {
		r = bch_replicas_used(c, &used);
	}
	ctx->replicas_gathered = false;
	if (r) {
		snprintf(ctx->err_msg, sizeof(ctx->err_msg), "replicas table: reading the keys: %.200s",
			 c->err_msg[0] ? c->err_msg : bch_err_str(r));
		return r;
	}
	for (size_t i = 0; i < c->replicas->nr && !ctx->cancelled; i++) {
		const struct bch_replicas_cpu_entry *e = &c->replicas->e[i];
		bool keep = true;

		entry_text(e, where, sizeof(where));
		if (e->devs & ~m) {
			snprintf(detail, sizeof(detail), "slot %u is not a member",
				 (unsigned)__builtin_ctzll(e->devs & ~m));
			keep = !problem(&p, BCH_FSCK_replicas_bad_member, where, detail);
		} else if (!bch_replicas_cpu_has(&used, e->data_type, e->devs)) {
			keep = !problem(&p, BCH_FSCK_replicas_unused, where, "no key uses it");
		}
		changed |= !keep;
		if (keep && bch_replicas_cpu_add(&fixed, e->data_type, e->devs) < 0)
			r = -ENOMEM;
	}
	for (size_t i = 0; i < used.nr && !ctx->cancelled && !r; i++) {
		const struct bch_replicas_cpu_entry *e = &used.e[i];

		if (bch_replicas_cpu_has(c->replicas, e->data_type, e->devs))
			continue;
		entry_text(e, where, sizeof(where));
		if (problem(&p, BCH_FSCK_replicas_missing, where, "used by keys, not in the table")) {
			changed = true;
			if (bch_replicas_cpu_add(&fixed, e->data_type, e->devs) < 0)
				r = -ENOMEM;
		} else {
			complete = false;
		}
	}
	/* a table of an older version that happens to be right is kept from now on */
	if (!(c->sb->compat & BCH_COMPAT_REPLICAS_KEPT) && complete && !c->read_only &&
	    ctx->mode != BCH_FSCK_NO && !ctx->cancelled)
		changed = true;
	if (!r && changed) {
		/*
		 * Entries dropped: the repairs above durable first, as a gc does
		 * (replicas.h, invariant 4), so no crash replays to a key whose
		 * set is gone.
		 */
		if (!c->read_only && (r = bch_journal_flush(c)))
			snprintf(ctx->err_msg, sizeof(ctx->err_msg), "replicas table: flushing the journal: %.200s",
				 c->err_msg[0] ? c->err_msg : bch_err_str(r));
		else if ((r = bch_replicas_set(c, &fixed, complete)))
			snprintf(ctx->err_msg, sizeof(ctx->err_msg), "replicas table: writing the superblock: %.200s",
				 c->err_msg[0] ? c->err_msg : bch_err_str(r));
		for (unsigned k = 0; k < BCH_FSCK_PROBLEM_NR && !r; k++)
			while (p.fixes[k]--)
				bch_fsck_fixed(ctx, k);
	}
	bch_replicas_cpu_free(&used);
	bch_replicas_cpu_free(&fixed);
	return r;
}
