/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_BKEY_H
#define _BCACHEFS_BKEY_H

/*
 * bkey.h - keys: positions, comparison, and the key type table.
 *
 * In memory a key has its on-disk layout (struct bch_bkey followed by the
 * value), so keys move between journal entries, bsets and callers by memcpy.
 * Every key read from disk passes bch_bkey_validate() before it is used:
 * its size, its type, whether that type belongs in that btree at that level,
 * and the type's own checks of the value.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bcachefs_format.h"

#define POS(i, o, s)	((struct bch_bpos) { .inode = (i), .offset = (o), .snapshot = (s) })
#define POS_MIN		POS(0, 0, 0)
#define POS_MAX		POS(UINT64_MAX, UINT64_MAX, UINT32_MAX)

/*
 * The largest file: i_size is below 2^63 (inode_validate), so no extent of a
 * file ends past 2^54 sectors; one that does is damage, and a byte offset
 * computed from any valid extent (sectors << 9) cannot overflow.
 */
#define BCH_FILE_SECTORS_MAX	(1ULL << (63 - BCH_SECTOR_SHIFT))

static inline int bpos_cmp(struct bch_bpos a, struct bch_bpos b)
{
	if (a.inode != b.inode)
		return a.inode < b.inode ? -1 : 1;
	if (a.offset != b.offset)
		return a.offset < b.offset ? -1 : 1;
	if (a.snapshot != b.snapshot)
		return a.snapshot < b.snapshot ? -1 : 1;
	return 0;
}

static inline bool bpos_eq(struct bch_bpos a, struct bch_bpos b)
{
	return !bpos_cmp(a, b);
}

/* The next / previous position (saturating at POS_MAX / POS_MIN). */
struct bch_bpos bpos_successor(struct bch_bpos p);
struct bch_bpos bpos_predecessor(struct bch_bpos p);

static inline size_t bkey_bytes(const struct bch_bkey *k)
{
	return (size_t)k->u64s * 8;
}

static inline size_t bkey_val_bytes(const struct bch_bkey *k)
{
	return bkey_bytes(k) - sizeof(*k);
}

static inline void *bkey_val(const struct bch_bkey *k)
{
	return (void *)k->_data;
}

/* A zeroed key of type with val_bytes (rounded up to u64s) of value; malloc'd. */
struct bch_bkey *bch_bkey_alloc(unsigned type, struct bch_bpos pos, size_t val_bytes);
struct bch_bkey *bch_bkey_dup(const struct bch_bkey *k);

/* Number of pointers of an extent key (0 if not an extent). */
unsigned bch_extent_nr_ptrs(const struct bch_bkey *k);

/* Number of pointers of a btree_ptr key (0 if malformed). */
unsigned bch_btree_ptr_nr(const struct bch_bkey *k);

/*
 * Validate a key found in btree id at level (level > 0: interior node, so
 * only btree_ptr keys).  0 or -BCH_ERR_bkey_invalid with a message.
 */
int bch_bkey_validate(const struct bch_bkey *k, unsigned btree_id, unsigned level,
		      char *err, size_t errlen);

/* "inode:offset:snapshot" and back (decimal; POS_MAX is "max"). */
void bch_bpos_to_text(struct bch_bpos p, char *buf, size_t len);
int bch_bpos_parse(const char *s, struct bch_bpos *p);

/* One line: "pos type [value...]". */
void bch_bkey_to_text(const struct bch_bkey *k, char *buf, size_t len);

const char *bch_bkey_type_name(unsigned type);
const char *bch_btree_id_name(unsigned id);
/* The btrees whose keys lie in snapshots (snapshot.h): files' extents, inodes, dirents, xattrs. */
static inline bool bch_btree_id_is_file(unsigned id)
{
	return id == BCH_BTREE_ID_extents || id == BCH_BTREE_ID_inodes ||
	       id == BCH_BTREE_ID_dirents || id == BCH_BTREE_ID_xattrs;
}
int bch_btree_id_parse(const char *s);		/* -1 if unknown */

#endif /* _BCACHEFS_BKEY_H */
