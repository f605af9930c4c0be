/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_SUPER_H
#define _BCACHEFS_SUPER_H

/*
 * super.h - the superblock: read, validate, pick the newest copy, write every
 * copy, and get at its variable-length fields.
 *
 * Invariants
 *   (1) A superblock is used only after bch_sb_validate() accepted it:
 *       magic, version, checksum, sizes, and every field's internal bounds.
 *   (2) Reading tries every copy (the layout at sector 7, sector 8, the
 *       first backup at 8 + max, the end-of-device copy) and returns the
 *       valid one with the highest seq; the report says which copies were bad.
 *   (3) Writing bumps seq once and writes that same image to every copy of
 *       every member device (offset and dev_idx differ), copy 0 last, then
 *       flushes: a crash mid-write leaves at least one complete valid copy.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bcachefs_format.h"

struct bch_blockdev;
struct bch_fs;

#define BCH_SB_BUF_BYTES(max_bits)	((size_t)BCH_SECTOR_SIZE << (max_bits))

/* What reading one device found, copy by copy (for show-super and fsck). */
struct bch_sb_copy_report {
	uint64_t	offset;		/* sector */
	int		err;		/* 0 valid, else -BCH_ERR_* / -errno */
	uint64_t	seq;		/* when readable */
	char		msg[128];
};

struct bch_sb_read_report {
	unsigned			nr;
	struct bch_sb_copy_report	copies[BCH_SB_LAYOUT_MAX + 1];
	int				layout_err;	/* standalone layout at sector 7 */
	unsigned			chosen;		/* index into copies[] */
};

/*
 * Read the newest valid superblock of a device.  On success *ret is a malloc'd
 * buffer of BCH_SB_BUF_BYTES(max_bits) bytes (caller frees).  report may be
 * NULL.  Errors: -BCH_ERR_sb_not_found when no copy validates (report says
 * why for each), -errno on I/O errors, -BCH_ERR_dl_xxhash when no copy
 * validates and libxxhash, needed to check one, cannot be loaded.
 */
int bch_sb_read(struct bch_blockdev *dev, struct bch_sb **ret,
		struct bch_sb_read_report *report);

/* Read and validate the one copy at sector (report: r); *ret malloc'd on success. */
int bch_sb_read_copy(struct bch_blockdev *dev, uint64_t sector, struct bch_sb **ret,
		     struct bch_sb_copy_report *r);

/* Validate a superblock image of buf_bytes; message into err. */
int bch_sb_validate(const struct bch_sb *sb, size_t buf_bytes, char *err, size_t errlen);

/* Total bytes of a superblock (fixed part + fields). */
static inline size_t bch_sb_bytes(const struct bch_sb *sb)
{
	return sizeof(*sb) + (size_t)sb->u64s * 8;
}

/*
 * Compute and store sb->csum (over magic..end) with sb->csum_type: 0, or the
 * error of bch_checksum() (its library cannot be loaded).
 */
int bch_sb_set_csum(struct bch_sb *sb);

/*
 * Write sb to every copy of layout (this device's own: the end copy's place
 * depends on the device size) on one device, as member dev_idx.  Sets
 * sb->layout, offset, dev_idx and the checksum of each copy; does not bump
 * seq.  Writes backups first, copy 0 last, the standalone layout, then flushes.
 */
int bch_sb_write_dev(struct bch_blockdev *dev, struct bch_sb *sb, unsigned dev_idx,
		     const struct bch_sb_layout *layout);

/*
 * Write one copy at sector (which must be in sb's layout) / the standalone
 * layout record at sector 7.  No flush: the caller flushes (fsck repairs).
 */
int bch_sb_write_copy(struct bch_blockdev *dev, struct bch_sb *sb, unsigned dev_idx,
		      uint64_t sector);
int bch_sb_write_layout(struct bch_blockdev *dev, const struct bch_sb *sb);

/* Seconds since the epoch for timestamps written: SOURCE_DATE_EPOCH when set. */
uint64_t bch_now_secs(void);

/* Bump seq and write c->sb to every present member device. */
int bch_write_super(struct bch_fs *c);

/*
 * Device error counters (bcachefs_format.h, struct bch_dev_errors): kept in
 * c, loaded from the superblock at first use, written by every
 * bch_write_super() of a version-2 filesystem.
 * bch_dev_error_inc(): count one error of member dev (checksum errors: the
 * blockdev counts read and write errors itself, folded in on each look).
 * bch_dev_errors_get(): the counts of member dev (by enum
 * bch_dev_error_type) and the time of its last reset (0: never).
 * bch_dev_errors_reset(): zero every member's counts, note the time, and
 * write the superblock (-BCH_ERR_fs_read_only on a read-only open).
 */
void bch_dev_error_inc(struct bch_fs *c, unsigned dev, enum bch_dev_error_type type);
void bch_dev_errors_get(struct bch_fs *c, unsigned dev, uint64_t counts[BCH_DEV_ERROR_NR],
			uint64_t *reset_time);
int  bch_dev_errors_reset(struct bch_fs *c);

/* Fields */
struct bch_sb_field *bch_sb_field_get(const struct bch_sb *sb, unsigned type);
/*
 * Resize (or create, or with u64s == 0 delete) a field in place; *sbp may be
 * reallocated if buf_bytes is too small up to max_bytes.  New space is zeroed.
 * Returns the field or NULL (-BCH_ERR_sb_too_big via *err).
 */
struct bch_sb_field *bch_sb_field_resize(struct bch_sb **sbp, size_t *buf_bytes,
					 unsigned type, unsigned u64s, int *err);

#define bch_sb_get_members(sb)	((struct bch_sb_field_members *)  bch_sb_field_get(sb, BCH_SB_FIELD_members))
#define bch_sb_get_labels(sb)	((struct bch_sb_field_labels *)   bch_sb_field_get(sb, BCH_SB_FIELD_labels))
#define bch_sb_get_journal(sb)	((struct bch_sb_field_journal *)  bch_sb_field_get(sb, BCH_SB_FIELD_journal))
#define bch_sb_get_replicas(sb)	((struct bch_sb_field_replicas *) bch_sb_field_get(sb, BCH_SB_FIELD_replicas))
#define bch_sb_get_clean(sb)	((struct bch_sb_field_clean *)    bch_sb_field_get(sb, BCH_SB_FIELD_clean))

/* Number of member slots in the members field. */
unsigned bch_sb_nr_members(const struct bch_sb *sb);
/* Member idx, or NULL when out of range. */
struct bch_member *bch_sb_member(const struct bch_sb *sb, unsigned idx);
static inline bool bch_member_exists(const struct bch_member *m)
{
	for (unsigned i = 0; i < BCH_UUID_SIZE; i++)
		if (m->uuid[i])
			return true;
	return false;
}

/* Labels: name of label index (0-based), or NULL. */
const char *bch_sb_label_name(const struct bch_sb *sb, unsigned idx, char *buf, size_t len);
/*
 * "member 1 (label hdd, uuid 1234...)" for messages about a member (one
 * that is missing, say); the label part only when it has one.  Returns buf.
 */
const char *bch_sb_member_text(const struct bch_sb *sb, unsigned idx, char *buf, size_t len);
/*
 * Targets: parse "ssd", "hdd.slow" or a device path/index against sb's
 * labels and members into the on-disk u32 form; print it back.
 */
int bch_target_parse(const struct bch_sb *sb, const char *s, uint64_t *target);
void bch_target_to_text(const struct bch_sb *sb, uint64_t target, char *buf, size_t len);
/* Is member dev in target (0: every device)?  A label selects its sub-labels too. */
bool bch_dev_in_target(const struct bch_sb *sb, unsigned dev, uint64_t target);

#endif /* _BCACHEFS_SUPER_H */
