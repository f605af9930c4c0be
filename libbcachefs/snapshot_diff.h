/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_SNAPSHOT_DIFF_H
#define _BCACHEFS_SNAPSHOT_DIFF_H

/*
 * snapshot_diff.h - what changed from one subvolume (or snapshot) to
 * another of the same snapshot tree: `subvolume diff` and
 * `image export-tar --since`.  Reads only; owns no on-disk structure.
 *
 * How.  Let A be the deepest common ancestor of OLD's and NEW's snapshots.
 * A key that differs between the two views lies in a snapshot on one of
 * the paths (A, OLD] or (A, NEW]: keys in A and above are seen by both
 * unless hidden by one on a path.  Every write in a snapshot with a parent
 * leaves a snapshot_touch key naming its inode (bcachefs_format.h), so the
 * touch keys of the snapshots on the two paths name every inode that can
 * differ.  Each is then read in both views (snapshot.h): its inode, its
 * name (the back pointer to its first dirent), its xattr keys and its
 * extent keys, compared key by key without reading data.  The cost follows
 * the number of inodes touched and their sizes in keys, not the tree.
 *
 * Invariants
 *   (1) Nothing is written: views are entered read-only, no transaction.
 *   (2) OLD and NEW must share a snapshot tree; else -EXDEV (unrelated).
 *   (3) Two extent keys hold the same data at a sector when they are of
 *       the same type and, for extents, carry the same pointers and the
 *       same encoding (crc) with the same offset into the encoded extent
 *       at that sector; everything else is reported as changed.  So a
 *       range reported may be wider than the bytes that differ (rewritten
 *       with equal bytes), never narrower.
 *   (4) Entries are sorted by path (the NEW path, else the OLD one).
 *   (5) Inode writes that leave no touch key (the dirent and parent
 *       directory a snapshot's creation writes in the source's new leaf)
 *       are covered by also comparing both roots and the directories
 *       naming the subvolumes seen from OLD and NEW.
 *
 * Limits.  A file with several hard links is named by its first link
 * (its back pointer); links added or removed show as a change of nlink.
 * A subvolume named inside OLD or NEW is one entry (type "subvolume"):
 * its own tree is not compared.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "bcachefs_format.h"

struct bch_fs;

/* What differs for one inode (flags of struct bch_sdiff_entry) */
#define BCH_SDIFF_ADDED		(1U << 0)	/* in NEW only */
#define BCH_SDIFF_DELETED	(1U << 1)	/* in OLD only */
#define BCH_SDIFF_RENAMED	(1U << 2)	/* another parent or name */
#define BCH_SDIFF_DATA		(1U << 3)	/* data ranges or size */
#define BCH_SDIFF_META		(1U << 4)	/* some field below */

/* Which metadata differs (meta of struct bch_sdiff_entry); names: bch_sdiff_field_name(). */
#define BCH_SDIFF_FIELDS()		\
	x(mode,		0)		\
	x(uid,		1)		\
	x(gid,		2)		\
	x(atime,	3)		\
	x(mtime,	4)		\
	x(ctime,	5)		\
	x(btime,	6)		\
	x(nlink,	7)		\
	x(rdev,		8)		\
	x(options,	9)		\
	x(xattrs,	10)

enum bch_sdiff_field {
#define x(n, b)	BCH_SDIFF_F_##n = b,
	BCH_SDIFF_FIELDS()
#undef x
	BCH_SDIFF_F_NR
};
const char *bch_sdiff_field_name(unsigned f);

struct bch_sdiff_range {
	uint64_t		start, end;	/* bytes, [start, end) */
};

struct bch_sdiff_entry {
	uint64_t		inum;
	unsigned		flags;		/* BCH_SDIFF_* */
	unsigned		meta;		/* 1 << BCH_SDIFF_F_* */
	bool			subvol;		/* a dirent naming subvolume inum */
	char			*old_path;	/* NULL when not in OLD */
	char			*new_path;	/* NULL when not in NEW */
	struct bch_inode	old, new;	/* valid where the path is */
	struct bch_sdiff_range	*ranges;	/* data that differs (BCH_SDIFF_DATA) */
	size_t			nr_ranges;
};

struct bch_sdiff {
	uint32_t		old_subvol, new_subvol;
	uint32_t		old_snap, new_snap, ancestor;
	uint64_t		old_root, new_root;	/* root inode numbers */
	unsigned		nr_snaps;	/* snapshots on the two paths */
	uint64_t		nr_touched;	/* inodes compared */
	struct bch_sdiff_entry	*e;		/* sorted by path */
	size_t			nr, cap;
};

/*
 * Compare subvolume old_subvol (OLD) with new_subvol (NEW).  0, or
 * -ESTALE (no such subvolume), -EXDEV (different snapshot trees: message
 * in c->err_msg), -EIO (a damaged tree), -ENOMEM.  *d is filled on success
 * and must be freed with bch_snapshot_diff_exit() in every case.
 */
int  bch_snapshot_diff(struct bch_fs *c, uint32_t old_subvol, uint32_t new_subvol, struct bch_sdiff *d);
void bch_snapshot_diff_exit(struct bch_sdiff *d);

#endif /* _BCACHEFS_SNAPSHOT_DIFF_H */
