/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_DEVICE_H
#define _BCACHEFS_DEVICE_H

/*
 * device.h - changing the members of a filesystem: add, drop (the end of a
 * remove), state, label, resize.
 *
 * Membership changes (add, drop, resize) commit through the superblocks.
 * The filesystem is closed clean first (every dirty node written, the clean
 * record current), the superblocks are edited and written, and the
 * filesystem is opened again from the new member list: *cp is replaced
 * (the old struct bch_fs is freed) and *paths / *nr are updated.  A
 * mounted filesystem (fusemount) does this under its lock, so a change is a
 * pause of a few milliseconds, not an unmount.  If reopening fails, *cp is
 * NULL and err says why; the superblocks are already consistent.
 *
 * Crash safety: each step leaves every member's superblock either old or
 * new, and the newest valid copy wins at open (super.h).
 *   add:    the new device is formatted with the current member list plus
 *           itself, at a seq that does not win; then every old member gets
 *           the new list (a higher seq).  Cut before that: the device is
 *           not a member (a rerun reuses it); after: it is one.  Cut
 *           between two members' writes: the newest list has it, so the
 *           others open only degraded; a rerun (-o degraded) opens with it
 *           and the close writes every member's superblock.
 *   drop:   the member must hold nothing (bch_dev_data_left() == 0); its
 *           alloc keys are deleted, the filesystem closed clean, then every
 *           other member gets the list without it, and last its own
 *           superblocks are wiped.  A rerun finds it already gone.
 *   resize: grow writes the new last superblock copy past the new end
 *           before the members learn the new size; shrink requires the
 *           buckets past the new end to be empty (an evacuation job with
 *           first_bucket set) and moves the last copy in before it.
 */

#include <stdbool.h>
#include <stdint.h>

#include "bcachefs_format.h"

struct bch_fs;
struct bch_opts;

struct bch_dev_add_args {
	const char	*path;
	const char	*label;		/* NULL: none */
	unsigned	durability;	/* 0..4; default 1 */
	uint64_t	size;		/* bytes; 0: whole device/file */
	uint64_t	bucket_size;	/* bytes; 0: chosen from the size */
	bool		discard;
	bool		durability_set;	/* durability given (0 allowed) */
	bool		force;		/* overwrite another filesystem's superblock */
	bool		dry_run;	/* check everything, change nothing (the filesystem
					 * may be open read-only) */
};

/* The index of the member named by s: a device path, a member index, or a UUID. */
int bch_dev_lookup(struct bch_fs *c, char * const *paths, unsigned nr, const char *s,
		   unsigned *dev, char *err, size_t errlen);

/* Add a member (see above); *new_idx is its index. */
int bch_dev_add(struct bch_fs **cp, char ***paths, unsigned *nr, const struct bch_opts *open_opts,
		const struct bch_dev_add_args *a, unsigned *new_idx, char *err, size_t errlen);

/*
 * Set a member's state (enum bch_member_state).  Written to every member's
 * superblock at once; no reopen.  Refused (unless force) when the
 * remaining read-write members could not take new writes of
 * metadata_replicas / data_replicas copies.
 */
int bch_dev_set_state(struct bch_fs *c, unsigned dev, unsigned state, bool force,
		      char *err, size_t errlen);
/* The checks of bch_dev_set_state() alone (read-only open allowed). */
int bch_dev_set_state_check(struct bch_fs *c, unsigned dev, unsigned state, bool force,
			    char *err, size_t errlen);
/* Is name a valid label?  0, or -EINVAL and why. */
int bch_label_check(const char *name, char *err, size_t errlen);
int bch_dev_set_label(struct bch_fs *c, unsigned dev, const char *label, char *err, size_t errlen);

/*
 * What a member still holds: btree nodes, dirty and cached data sectors,
 * journal buckets in use.  0 when it can be dropped.
 */
struct bch_dev_holdings {
	uint64_t	btree_sectors;
	uint64_t	user_sectors;	/* dirty */
	uint64_t	cached_sectors;
	uint64_t	buckets_used;
	uint64_t	stripes;	/* stripes with a block there (ec_move.h): */
	uint64_t	stripe_sectors;	/* their live data, which dissolving them
					 * writes data_replicas times elsewhere */
};
void bch_dev_holdings(struct bch_fs *c, unsigned dev, uint64_t first_bucket,
		      struct bch_dev_holdings *h);

/*
 * May dev be removed?  Checked before anything moves: not the last member;
 * the others can hold what it holds (*h) in free space and in copies
 * (metadata_replicas, data_replicas), unless force (data) / force_metadata.
 * -EBUSY / -ENOSPC with a message saying how much is missing and where.
 */
int bch_dev_remove_check(struct bch_fs *c, unsigned dev, bool force, bool force_metadata,
			 struct bch_dev_holdings *h, char *err, size_t errlen);

/*
 * Drop an empty member (the end of `device remove`): see above.  force:
 * pointers to it that remain (a lost member: their data is degraded) are
 * dropped from their keys first, and *lost_sectors counts the file data
 * that had no other copy.
 */
int bch_dev_drop(struct bch_fs **cp, char ***paths, unsigned *nr, const struct bch_opts *open_opts,
		 unsigned dev, bool force, uint64_t *lost_sectors, char *err, size_t errlen);

/*
 * path holds a superblock of this filesystem for a member it no longer has
 * (a remove cut before the end): wipe it.  -ENOENT when it is not one.
 */
int bch_dev_wipe_stale(struct bch_fs *c, const char *path, char *err, size_t errlen);

/*
 * Resize a member to new_bytes (grow, or shrink once the buckets past the
 * new end are empty).  An image file is extended or truncated with it.
 */
/*
 * The checks of a resize, before anything moves (read-only open allowed):
 * the member present, the size at least its minimum and (a block device)
 * at most the device, and for a shrink room elsewhere for what lies past
 * the new end.  *nbuckets: the member's buckets at that size.
 */
int bch_dev_resize_check(struct bch_fs *c, unsigned dev, uint64_t new_bytes, uint64_t *nbuckets,
			 char *err, size_t errlen);
int bch_dev_resize(struct bch_fs **cp, char ***paths, unsigned *nr, const struct bch_opts *open_opts,
		   unsigned dev, uint64_t new_bytes, char *err, size_t errlen);

#endif /* _BCACHEFS_DEVICE_H */
