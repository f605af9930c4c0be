/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_CMD_SUBVOLUME_DIFF_H
#define _BCACHEFS_CMD_SUBVOLUME_DIFF_H

/*
 * subvolume_diff.h - `subvolume diff` (the image verb subvolume-diff):
 * printing what libbcachefs/snapshot_diff.h found, as text or JSON
 * (docs/json/subvolume-diff.schema.json); and the path-to-subvolume check
 * shared with `image export-tar --since`.
 */

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct bch_fs;

/*
 * The subvolume whose root is path (in the image): 0, or EXIT_FAIL after a
 * message naming verb and path (missing, or not a subvolume's root).
 */
int subvol_of_path(struct bch_fs *c, const char *verb, const char *path, uint32_t *subvol);

/*
 * The diff from subvolume root old to new (paths from the filesystem's
 * root) printed to out, as text or JSON; failures to err as "bcachefs
 * PREFIX: ...".  Both forms use it: offline (the image verb, stdout and
 * stderr) and mounted (the daemon's body, cmd_subvolume.c, the client's
 * streams), so their output is the same.  The exit code.
 */
int subvolume_diff_print(FILE *out, FILE *err, const char *prefix, struct bch_fs *c, bool json,
			 const char *old, const char *new);

/* The verb on an open filesystem: argv = { "subvolume-diff", OLD, NEW }; the exit code. */
int cmd_subvolume_diff_image(struct bch_fs *c, bool json, int argc, char **argv);

#endif /* _BCACHEFS_CMD_SUBVOLUME_DIFF_H */
