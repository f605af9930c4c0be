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

struct bch_format_dev {
	const char	*path;
	uint64_t	size;		/* bytes; 0 = whole device/file */
	uint64_t	bucket_size;	/* bytes; 0 = choose from size */
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

#endif /* _BCACHEFS_FORMAT_LIB_H */
