/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_EC_USAGE_H
#define _BCACHEFS_EC_USAGE_H

/*
 * ec_usage.h - what erasure coding takes (fs usage): per member and in
 * total, from one walk of the stripes btree and one of the keys that point
 * into stripes (extents, and the reflink btree's indirect extents).
 *
 * For each stripe (ec.h, bcachefs_format.h "Erasure coding") of k data and
 * p parity blocks of block_sectors each:
 *   data         sectors of live file data in its data blocks: what the
 *                striped pointers account (bch_extent_disk_sectors(), as
 *                the buckets count them), on the member of each block;
 *   parity       p * block_sectors, on the parity blocks' members;
 *   reclaimable  the space of its data blocks no live pointer uses (data
 *                deleted or overwritten since the stripe was built, or never
 *                filled: a block shorter than the fullest), and, for a
 *                stripe with no live data left at all, its parity too: what
 *                stripe compaction (rewriting the live data into new
 *                stripes) gives back besides the new parity of what it moves.
 *                An empty data block whose bucket was reused since (its
 *                generation moved: ec.c frees a block with no extents left)
 *                is the stripe's no longer and not counted.
 * Sum over the members = the totals.  data + reclaimable of a member =
 * k's share of its data blocks' space; data of every member together = the
 * encoded size of every striped extent.
 *
 * Reads only.  Memory: 64 bytes per stripe index up to the highest (the
 * live sectors of each data block), freed before returning.
 */

#include <stdint.h>

#include "bcachefs_format.h"

struct bch_fs;

struct bch_ec_dev_usage {
	uint64_t	data;		/* sectors of live data in stripe data blocks */
	uint64_t	parity;		/* sectors of parity blocks */
	uint64_t	reclaimable;	/* sectors of stripe blocks holding no live data */
};

struct bch_ec_usage {
	uint64_t		stripes;	/* stripe keys */
	uint64_t		stripes_empty;	/* of those, with no live data */
	struct bch_ec_dev_usage	total;
	struct bch_ec_dev_usage	dev[BCH_SB_MEMBERS_MAX];
};

/* Fill u (zeroed here); 0, -ENOMEM, or an error of the btree walks. */
int bch_ec_usage(struct bch_fs *c, struct bch_ec_usage *u);

#endif /* _BCACHEFS_EC_USAGE_H */
