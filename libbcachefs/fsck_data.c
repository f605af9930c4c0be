// SPDX-License-Identifier: GPL-2.0
/*
 * fsck_data.c - pass 11: data (fsck --data) (see fsck_files.h).
 *
 * Checks
 *   data_replica_bad: a copy failing its checksum or read while another is good
 * is rewritten on its device from the good one, or, a cached copy, dropped
 * from the key (it counts for nothing); data_unreadable: no good copy
 * (reported, no repair).  A copy on a member not given (degraded), or a stale
 * cached one (its bucket was reused), is neither: it is left alone.
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
#include "super.h"
#include "fsck_files.h"

int fsck_check_data(struct fstate *s, const struct bch_bkey *k)
{
	struct bch_fs *c = s->c;
	unsigned bad;
	char where[700], detail[64];

	if (k->type != BCH_BKEY_extent)
		return 0;
	s->stats->data_bytes += (uint64_t)k->size << 9;
	int r = bch_data_verify_key(c, k, &bad);
	if (r || !bad)
		return r;
	const struct bch_extent *e = bkey_val(k);
	unsigned nr = bch_extent_nr_ptrs(k), good = nr, missing = 0;
	for (unsigned i = 0; i < nr; i++)
		if (bch_dev_missing(c, e->ptrs[i].dev) ||
		    ((e->ptrs[i].flags & BCH_EXTENT_PTR_CACHED) && !bch_alloc_ptr_live(c, &e->ptrs[i])))
			missing |= 1U << i;
	if (!(bad & ~missing))
		return 0;	/* copies on a member not given (degraded), stale cached ones: not damage */
	for (unsigned i = 0; i < nr; i++)
		if (!(bad & (1U << i))) {
			good = i;
			break;
		}
	char iw[640];
	fsck_inode_where(c, k->p.inode, iw, sizeof(iw));
	snprintf(where, sizeof(where), "%s sectors %" PRIu64 "..%" PRIu64, iw, bch_extent_start(k),
		 (uint64_t)k->p.offset);
	if (good == nr) {
		bch_fsck_problem(s->ctx, BCH_FSCK_data_unreadable, where, NULL);
		return 0;
	}
	/* rewrite each bad copy on its own device from the good one's encoded bytes */
	size_t bytes = (size_t)e->crc.compressed_sectors << 9;
	void *buf = bch_dev_alloc_buf(bytes);
	if (!buf)
		return -ENOMEM;
	r = bch_dev_read(c->devs[e->ptrs[good].dev]->bdev, buf, bytes,
			 (uint64_t)e->ptrs[good].offset << 9);
	struct bch_bkey *n = bch_bkey_dup(k);
	struct bch_extent *ne = bkey_val(n);
	unsigned drop = 0;
	for (unsigned i = 0; i < nr && !r; i++) {
		if (!(bad & (1U << i)) || (missing & (1U << i)))
			continue;
		bool cached = e->ptrs[i].flags & BCH_EXTENT_PTR_CACHED;
		snprintf(detail, sizeof(detail), "%scopy on device %u", cached ? "cached " : "",
			 e->ptrs[i].dev);
		if (!fsck_fixing(s, BCH_FSCK_data_replica_bad, where, detail))
			continue;
		if (cached) {
			/* a cached copy is not rewritten: it goes (promote makes another) */
			bch_alloc_data_account(c, &e->ptrs[i], e->crc.compressed_sectors,
					       -(int64_t)bch_extent_disk_sectors(k));
			drop |= 1U << i;
			bch_fsck_fixed(s->ctx, BCH_FSCK_data_replica_bad);
			continue;
		}
		struct bch_extent_ptr np;
		struct bch_dev *ca = e->ptrs[i].dev < c->nr_devs ? c->devs[e->ptrs[i].dev] : NULL;
		if (!ca || !ca->bdev || bch_alloc_data_on(c, e->ptrs[i].dev, e->crc.compressed_sectors, &np))
			continue;	/* left uncorrected: no room, or device gone */
		r = bch_dev_write(ca->bdev, buf, bytes, (uint64_t)np.offset << 9);
		if (r) {
			bch_alloc_data_free(c, &np, 1, e->crc.compressed_sectors);
			break;
		}
		bch_alloc_data_account(c, &e->ptrs[i], e->crc.compressed_sectors,
				       -(int64_t)bch_extent_disk_sectors(k));
		/* the new copy was counted whole when allocated: count the key's share */
		bch_alloc_data_account(c, &np, e->crc.compressed_sectors,
				       (int64_t)bch_extent_disk_sectors(k) -
					       (int64_t)e->crc.compressed_sectors);
		ne->ptrs[i] = np;
		bch_fsck_fixed(s->ctx, BCH_FSCK_data_replica_bad);
	}
	free(buf);
	if (!r && drop) {
		unsigned keep = 0;
		for (unsigned i = 0; i < nr; i++)
			if (!(drop & (1U << i)))
				ne->ptrs[keep++] = ne->ptrs[i];
		n->u64s -= (nr - keep) * sizeof(struct bch_extent_ptr) / 8;
	}
	if (!r && (drop || memcmp(n, k, bkey_bytes(k))))
		r = fsck_put_key(c, BCH_BTREE_ID_extents, n);
	free(n);
	return r;
}
