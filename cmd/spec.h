/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_CMD_SPEC_H
#define _BCACHEFS_CMD_SPEC_H

/*
 * spec.h - owners, modes, times, xattrs and special files for trees built
 * without root: `format --source DIR` and `image import-tar`.
 *
 * Two parts, applied in this order:
 *
 * (1) Mapping, while files are copied in: --uid-map / --gid-map change every
 *     owner (an offset "+N" / "-N" as mkfs.erofs --uid-offset, or a table
 *     "FROM:TO[:COUNT][,...]", or "@FILE" with one FROM:TO[:COUNT] a line),
 *     then --all-root makes every owner 0:0 (mksquashfs -all-root), then
 *     --timestamp=SECONDS sets every atime and mtime (mkfs.erofs -T).
 *
 * (2) The spec file (--spec=FILE), after the copy: mksquashfs pseudo-file
 *     definitions, one a line, taken literally (not mapped):
 *
 *	PATH d MODE UID GID                 directory (an existing one: modified)
 *	PATH m MODE UID GID                 modify an existing entry
 *	PATH b MODE UID GID MAJOR MINOR     block device
 *	PATH c MODE UID GID MAJOR MINOR     character device
 *	PATH s MODE UID GID TARGET          symlink
 *	PATH i MODE UID GID s|f             socket or fifo
 *	PATH l TARGETPATH                   hard link to an entry of the tree
 *	PATH x NAME=VALUE                   xattr (VALUE text, 0t text or 0x hex)
 *	PATH D|M|B|C|S|I TIME MODE UID GID ... the same with mtime TIME (seconds)
 *
 *     f/F (file from a command), R (reference) and L are refused by name.
 *     MODE is octal (at most 07777); UID/GID a number or a name of the
 *     host's passwd/group.  PATH is relative to the root ("/" leading is
 *     taken off); no "." or ".." component, no symlink followed on the way.  Entries without a time get
 *     --timestamp, else SOURCE_DATE_EPOCH, else the current time.
 *
 * Invariants: (1) spec_load() checks every line before anything is
 * written: a bad line is an error naming FILE:LINE, exit 16.  (2) The
 * mapping never makes an id outside 0..2^32-2 (checked when applied).
 */

#include <stdbool.h>
#include <stdint.h>
#include <getopt.h>
#include <sys/types.h>

struct bch_fs;

struct spec_range {
	uint32_t		from, to, count;
};

struct spec_map {
	bool			set;
	int64_t			offset;		/* "+N" / "-N" */
	struct spec_range	*r;		/* table: ids not in it are kept */
	size_t			nr;
};

struct spec_line;

struct bch_spec {
	bool			all_root;
	struct spec_map		uid, gid;
	bool			epoch_set;	/* --timestamp */
	int64_t			epoch;		/* seconds */
	const char		*file;		/* --spec */
	struct spec_line	*lines;
	size_t			nr;
	uint64_t		created, modified, xattrs;	/* spec_apply's counts */
};

/* getopt_long entries of the options above; val from base up. */
#define SPEC_NR_OPTS	5
extern const struct option spec_longopts[SPEC_NR_OPTS];

/* The --help lines of the options. */
extern const char spec_help[];

/* Take option number idx (val - base) with argument arg: 0 or EXIT_USAGE after a message. */
int spec_opt(struct bch_spec *s, int idx, const char *arg, const char *cmd);

/* Read and check the spec file, if any: 0 or EXIT_USAGE after "CMD: FILE:LINE: why". */
int spec_load(struct bch_spec *s, const char *cmd);

/* Anything asked for? */
bool spec_active(const struct bch_spec *s);

/* Map an owner: (1) above.  0, or -ERANGE when the mapped id is out of range. */
int spec_map_owner(const struct bch_spec *s, uint32_t *uid, uint32_t *gid);

/* Owner and times of a host file being copied in (s may be NULL): 0 or -ERANGE. */
struct stat;
int spec_map_stat(const struct bch_spec *s, struct stat *st);

/* Times in ns: --timestamp replaces them. */
void spec_map_time(const struct bch_spec *s, int64_t *atime, int64_t *mtime);

/* Apply the spec file's lines under root: 0, or -errno after "CMD: FILE:LINE: why". */
int spec_apply(struct bch_spec *s, struct bch_fs *c, uint64_t root, const char *cmd);

/*
 * --json: member "spec" of the open object j, what --spec did (the text
 * form's "Spec:" line): {"file", "entries", "created", "modified",
 * "xattrs"}, or null without --spec.
 */
struct bch_json;
void spec_json(const struct bch_spec *s, struct bch_json *j);

void spec_exit(struct bch_spec *s);

#endif /* _BCACHEFS_CMD_SPEC_H */
