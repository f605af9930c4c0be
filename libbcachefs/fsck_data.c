// SPDX-License-Identifier: GPL-2.0
/*
 * fsck_data.c - pass 11: data (fsck --data) (see fsck_files.h).
 *
 * Checks
 *   data_replica_bad: a copy failing its checksum or read while another is good
 * is rewritten on its device from the good one, or, a cached copy, dropped
 * from the key (it counts for nothing); data_unreadable: no good copy
 * (reported, no repair).  A copy on a member not given (degraded), or a stale
 * cached one (its bucket was reused), is neither: it is left alone.  The
 * reading and the repair are scrub's (scrub.h): one implementation for both.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "bcachefs.h"
#include "blockdev.h"
#include "btree.h"
#include "checksum.h"
#include "errcode.h"
#include "extents.h"
#include "fs_ops.h"
#include "fsck.h"
#include "inode.h"
#include "io.h"
#include "reflink.h"
#include "scrub.h"
#include "super.h"
#include "fsck_files.h"

static int check_data(struct fstate *s, const struct bch_bkey *k, const struct bch_bkey *indirect);

/* k: an extent, or a reflink_v (reflink.h: its data checked once for all its sharers) */
int fsck_check_data(struct fstate *s, const struct bch_bkey *k)
{
	if (k->type != BCH_BKEY_reflink_v)
		return check_data(s, k, NULL);
	struct bch_bkey *x = bch_reflink_v_to_extent(k);
	if (!x)
		return -ENOMEM;
	int r = check_data(s, x, k);
	free(x);
	return r;
}

static int check_data(struct fstate *s, const struct bch_bkey *k, const struct bch_bkey *indirect)
{
	struct bch_fs *c = s->c;
	struct bch_extent_scrub x;
	char where[700], detail[64];

	if (k->type != BCH_BKEY_extent)
		return 0;
	if (!indirect)	/* file data: an indirect extent's bytes are its sharers' */
		s->stats->data_bytes += (uint64_t)k->size << 9;
	int r = bch_extent_scrub_read(c, k, ~0ULL, &x);
	if (r || !x.bad)
		goto out;	/* copies on a member not given (degraded), stale cached ones: not damage */
	const struct bch_extent *e = bkey_val(k);
	char iw[640];
	if (indirect)
		snprintf(iw, sizeof(iw), "indirect extent (shared files)");
	else
		fsck_inode_where(c, k->p.inode, iw, sizeof(iw));
	snprintf(where, sizeof(where), "%s sectors %" PRIu64 "..%" PRIu64, iw, bch_extent_start(k),
		 (uint64_t)k->p.offset);
	if (x.good < 0) {
		bch_fsck_problem(s->ctx, BCH_FSCK_data_unreadable, where, NULL);
		goto out;
	}
	/* rewrite each bad copy on its own device from the good one (scrub.c) */
	unsigned mask = 0, fixed;
	for (unsigned i = 0; i < x.nr; i++) {
		if (!(x.bad & (1U << i)))
			continue;
		snprintf(detail, sizeof(detail), "%scopy on device %u",
			 e->ptrs[i].flags & BCH_EXTENT_PTR_CACHED ? "cached " : "", e->ptrs[i].dev);
		if (fsck_fixing(s, BCH_FSCK_data_replica_bad, where, detail))
			mask |= 1U << i;
	}
	struct bch_bkey *n;
	r = bch_extent_scrub_repair(c, k, &x, mask, &n, &fixed);
	for (unsigned i = 0; i < x.nr; i++)
		if (fixed & (1U << i))
			bch_fsck_fixed(s->ctx, BCH_FSCK_data_replica_bad);
	if (!r && n && indirect) {
		/* back as the reflink_v, its refcount kept */
		const struct bch_extent *ne = bkey_val(n);
		unsigned nr = bch_extent_nr_ptrs(n);
		struct bch_bkey *nv = bch_bkey_alloc(BCH_BKEY_reflink_v, indirect->p,
						     sizeof(struct bch_reflink_v) + nr * sizeof(ne->ptrs[0]));
		if (nv) {
			struct bch_reflink_v *rv = bkey_val(nv);
			nv->size = n->size;
			nv->version = n->version;
			rv->refcount = ((const struct bch_reflink_v *)bkey_val(indirect))->refcount;
			rv->crc = ne->crc;
			memcpy(rv->ptrs, ne->ptrs, nr * sizeof(ne->ptrs[0]));
			r = fsck_put_key(c, BCH_BTREE_ID_reflink, nv);
			free(nv);
		} else {
			r = -ENOMEM;
		}
	} else if (!r && n) {
		r = fsck_put_key(c, BCH_BTREE_ID_extents, n);
	}
	free(n);
out:
	bch_extent_scrub_exit(&x);
	return r;
}
