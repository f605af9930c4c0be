/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_FORMAT_LIB_H
#define _BCACHEFS_FORMAT_LIB_H

/*
 * format.h - create a new filesystem on a set of devices.
 *
 * Everything is checked before anything is written: device sizes, option
 * ranges, duplicate devices, bucket and journal geometry.  Probing for an
 * existing filesystem is the caller's choice (cmd_format does it with
 * libblkid unless --force).
 */

#include <stdbool.h>
#include <stdint.h>

#include "bcachefs_format.h"
#include "opts.h"

/* Fewest buckets a member may have past its superblock area (format, resize). */
#define BCH_MIN_NR_BUCKETS	64

struct bch_format_dev {
	const char	*path;
	uint64_t	size;		/* bytes; 0 = whole device/file */
	uint64_t	bucket_size;	/* bytes; 0 = choose from size */
	uint64_t	plan_size;	/* bytes the bucket size, journal and metadata
					 * copies are chosen for; 0 = size (the smallest
					 * image: formatted larger, shrunk to this after) */
	unsigned	durability;	/* default 1 */
	bool		discard;
	const char	*label;		/* NULL = none */
};

struct bch_format_args {
	const char	*fs_label;	/* NULL = none */
	uint8_t		user_uuid[BCH_UUID_SIZE];	/* all zero = random */
	bool		have_uuid;
	uint64_t	time_ns;	/* format time; 0 = now (SOURCE_DATE_EPOCH honoured) */
	bool		no_btrees;	/* superblocks only (tests of the sb layer) */
	const char	*passphrase;	/* with opts encrypted: the key's passphrase;
					 * NULL: the key stored in the clear */
	bool		wrap_later;	/* with a passphrase: the key not wrapped yet
					 * (crypt.h, bch_crypt_wrap_prepare()): the
					 * caller finishes it on the open filesystem */
};

/*
 * Format.  opts holds filesystem options (OPT_FORMAT|OPT_FS); targets must
 * already be resolved, or given as names in target_names[] (indexed by
 * option id, NULL if unset) which are resolved against the new labels.
 * On error returns negative and writes a message naming the device into err.
 */
int bch_format(struct bch_format_dev *devs, unsigned nr_devs,
	       const struct bch_opts *opts, const char * const *target_names,
	       const struct bch_format_args *args, char *err, size_t errlen);

/* Bucket size format picks for a device of dev_size bytes (bytes). */
uint64_t bch_pick_bucket_size(uint64_t dev_size, uint64_t btree_node_size);

/*
 * The smallest image (format --source without --fs-size): a tree measured
 * as data_bytes of file data (each file rounded up to blocks), nr_inodes
 * inodes and name_bytes of names and xattrs.  _estimate: the bytes of an
 * image that holds it with headroom bytes to spare, no compression assumed
 * (the geometry is chosen for it: bch_format_dev.plan_size).  _room: the
 * size of the image file to copy into before the shrink, with room for
 * an estimate that fell short.
 */
uint64_t bch_format_min_estimate(uint64_t data_bytes, uint64_t nr_inodes, uint64_t name_bytes,
				 uint64_t headroom, const struct bch_opts *opts);
uint64_t bch_format_min_room(uint64_t estimate);
/* The btree node size for an image of estimate bytes: dflt, smaller below 64 MiB. */
uint64_t bch_format_min_node_size(uint64_t estimate, uint64_t dflt, uint64_t block);

/*
 * Device add (device.c): one new member of an existing filesystem whose
 * options are opts.  _plan checks the device like format does and fills the
 * member entry (a new UUID, geometry, state rw, d's durability and discard;
 * label left to the caller) and its journal run (dev left to the caller),
 * writing nothing.  _write wipes its superblock areas, writes sb (the whole
 * filesystem's superblock, this member at idx) and empties its journal
 * buckets' heads.  _same: is other the same device or file as the plan's.
 */
struct bch_member;
struct bch_journal_run;
struct bch_sb;
struct bch_member_plan;
int  bch_format_member_plan(struct bch_format_dev *d, const struct bch_opts *opts,
			    struct bch_member *m, struct bch_journal_run *jrun,
			    struct bch_member_plan **ret, char *err, size_t errlen);
bool bch_format_member_same(const struct bch_member_plan *mp, const char *path, const char *other);
uint64_t bch_format_member_size(const struct bch_member_plan *mp);
int  bch_format_member_write(struct bch_format_dev *d, struct bch_member_plan *mp,
			     struct bch_sb *sb, unsigned idx, char *err, size_t errlen);
void bch_format_member_plan_free(struct bch_member_plan *mp);

#endif /* _BCACHEFS_FORMAT_LIB_H */
