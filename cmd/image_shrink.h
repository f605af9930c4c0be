/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_IMAGE_SHRINK_H
#define _BCACHEFS_IMAGE_SHRINK_H

/*
 * image_shrink.h - the smallest image (cmd_image_shrink.c): the size a
 * one-member image can shrink to, and the shrink, shared by `image shrink`
 * and `format --source DIR IMG` without --fs-size.
 */
#include <stdbool.h>
#include <stdint.h>

#include "opts.h"

struct bch_fs;

#define IMAGE_HEADROOM_DEFAULT		"5%"
#define IMAGE_HEADROOM_MAX_PCT		1000
#define IMAGE_HEADROOM_MAX_BYTES	(1ULL << 40)

struct image_headroom {
	bool		is_pct;
	uint64_t	pct_x100;	/* hundredths of a percent of the bytes in use */
	uint64_t	bytes;
};

struct image_shrink_plan {
	uint64_t	bucket_bytes;
	uint64_t	nbuckets;	/* now */
	uint64_t	size_bytes;	/* now: buckets and the end superblock area */
	uint64_t	used_bytes;	/* buckets in use (superblocks, journal, nodes, data) */
	uint64_t	headroom_bytes;
	uint64_t	min_bytes;	/* the smallest size it can reach (no headroom) */
	uint64_t	min_nbuckets;
	uint64_t	target_bytes;	/* with the headroom */
	uint64_t	target_nbuckets;
};

struct image_shrink_result {
	uint64_t	old_bytes, new_bytes, moved_bytes;
};

/* "5%", "2.5%" or a size ("64M"); 0, or -1 when malformed or too large. */
int image_headroom_parse(const char *s, struct image_headroom *h);
/* The sizes for member 0 of c (an open filesystem of one member). */
int image_shrink_plan(struct bch_fs *c, const struct image_headroom *h, struct image_shrink_plan *p,
		      char *err, size_t errlen);
/* Move data below p's target and resize member 0 to it (the file is cut); reopens *cp. */
int image_shrink_run(struct bch_fs **cp, char ***paths, unsigned *nr, const struct bch_opts *open_opts,
		     const struct image_shrink_plan *p, bool progress, struct image_shrink_result *res,
		     char *err, size_t errlen);

int cmd_image_shrink(int argc, char *argv[]);

#endif /* _BCACHEFS_IMAGE_SHRINK_H */
