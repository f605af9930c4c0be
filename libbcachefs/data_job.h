/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_DATA_JOB_H
#define _BCACHEFS_DATA_JOB_H

/*
 * data_job.h - the long-running data jobs of device administration:
 * evacuate (a member, or the buckets of a member past first_bucket for a
 * shrink) and rereplicate.  Scrub has its own module (scrub.h).
 *
 * Striped data (ec.h) goes first: evacuate dissolves every stripe with a
 * block on the member, rereplicate every stripe with a block on a missing or
 * failed member (ec_move.h); their data is written replicated, and the
 * stripe builder stripes it again on the members there are.  The extents
 * walk leaves striped keys alone (their copies are the stripe's).
 *
 * A job walks the stripes, the extents btree and then every btree node, in steps: the
 * caller holds the engine lock for one step and may release it between
 * steps (fusemount's other work goes on; a race with a foreground write is
 * caught by the move path's compare-and-swap).  A job holds no state on
 * disk: interrupted, it is run again and finds what is left (evacuate:
 * pointers still on the member; rereplicate: keys still short of copies).
 *
 * A job never loops without progress: an extent it cannot handle (no space
 * on the allowed devices, too few devices for the replicas, no readable
 * copy) is counted in stuck and described in problem, and the walk goes
 * on; the job ends with stuck > 0 and the caller says why.
 */

#include <stdbool.h>
#include <stdint.h>

#include "bkey.h"
#include "ec_move.h"
#include "move.h"

struct bch_fs;

enum bch_data_job_kind {
	BCH_DATA_JOB_evacuate,		/* move everything off dev (from first_bucket on) */
	BCH_DATA_JOB_rereplicate,	/* give every key the copies its options ask for */
};

struct bch_data_job {
	enum bch_data_job_kind kind;
	unsigned	dev;		/* evacuate: the member */
	uint64_t	first_bucket;	/* evacuate: only buckets >= this (shrink); 0: all */

	/* progress (bytes are device bytes to move, estimated at start) */
	uint64_t	bytes_total;
	uint64_t	bytes_done;
	uint64_t	keys_done;	/* extents rewritten */
	uint64_t	nodes_done;	/* btree nodes rewritten */
	uint64_t	stuck;		/* extents/nodes left as they were */
	uint64_t	stuck_no_space, stuck_too_few_devs, stuck_unreadable, stuck_raced;
	uint64_t	lost_sectors;	/* rereplicate: file data with no copy left at all */
	char		problem[320];	/* the last thing left as it was, and why */
	uint64_t	stripes_done;	/* stripes dissolved (ec_move.h) */

	/* walk state (private) */
	unsigned	phase;
	struct bch_ec_dissolve ec;	/* phase 0: the stripes chosen, and what is left of them */
	struct bch_bpos	pos;
	bool		in_reflink;	/* pos is in the reflink btree (after the extents) */
	unsigned	btree_id, level;
	uint64_t	passes;
	struct bch_move_stats ms;
	uint64_t	want_inum;	/* the inode whose data_replicas is in want */
	unsigned	want;
};

/* Set the job up (totals); 0 or an error naming what is wrong in err. */
int bch_data_job_init(struct bch_fs *c, struct bch_data_job *j, char *err, size_t errlen);
/*
 * One step of at most budget bytes moved: 1 when there is more, 0 when the
 * job is done (j->stuck says whether all of it could be done), <0 on an
 * error that stops the job (c->err_msg says what).
 */
int bch_data_job_step(struct bch_fs *c, struct bch_data_job *j, uint64_t budget);
/*
 * Free what a job stopped before its end holds (the stripes it chose); a
 * job run to its end, or stopped by an error, holds nothing.
 */
void bch_data_job_exit(struct bch_data_job *j);

/*
 * device remove --force: drop every pointer to dev (a lost member) from the
 * extents and btree nodes; an extent whose only dirty copies were there is
 * deleted and its sectors counted in *lost_sectors (the files are named in
 * c->err_msg's last line... see cmd_device.c).  Nodes are rewritten
 * without the pointer (a node with no other copy: -EIO).
 */
int bch_data_drop_dev_ptrs(struct bch_fs *c, unsigned dev, uint64_t *lost_sectors);

#endif /* _BCACHEFS_DATA_JOB_H */
