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
#include <string.h>

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

/*
 * Packed keys (in memory only: nothing on disk holds one).  A node's keys
 * are packed against a format chosen from them, as bcachefs' bkey_format:
 * for each header field a base and a bit width, the field kept as its
 * distance from the base in that many bits.  A packed key is its header's
 * bits (the fields one after another, from bit 0 of its first word, in
 * enum bch_bkey_field's order: the position first) in key_u64s words, then
 * the value as it is; its length follows from the u64s field, so
 * nothing but the format tells a packed key from an unpacked one: who
 * holds packed keys keeps track of which are (btree.h).  The widest format
 * (every field its full width from base 0) is 320 bits, the 40 bytes of an
 * unpacked header: every key packs into it.
 *
 *	OFFSET (bits)	SIZE			DESCRIPTION
 *	0		bits[INODE]		p.inode - base[INODE]
 *	...		bits[f]			field f - base[f], f in enum order
 *	key_u64s * 64				the value (u64s - BCH_BKEY_U64s words)
 */
enum bch_bkey_field {
	BKF_INODE, BKF_OFFSET, BKF_SNAPSHOT, BKF_PAD,	/* the position: first */
	BKF_U64S, BKF_TYPE, BKF_SIZE, BKF_VERSION, BKF_FLAGS, BKF_NR
};
#define BKF_POS_NR	4

/* A field of more than 0 bits: where it lies packed and in the header (a word, a shift). */
struct bch_bkey_field_at {
	uint16_t		off;
	uint8_t			bits, word, shift;
	uint8_t			field;		/* enum bch_bkey_field */
};

/*
 * A position field (inode, offset, snapshot) read without a branch: the
 * bits at shift of packed word `word` and, when they run past it, of
 * word2's (else word2 == word, and what it adds lies above mask), masked;
 * a field of 0 bits has mask 0 and adds nothing to its base.
 */
struct bch_bkey_pos_at {
	uint64_t		mask;
	uint8_t			word, word2, shift;
};

struct bch_bkey_format {
	/* what unpacking reads first (walking only the fields that vary), from the rest: */
	uint64_t		tmpl[BCH_BKEY_U64s];	/* a header of every field's base */
	uint8_t			key_u64s;	/* header words of a packed key, >= 1 */
	uint8_t			nr_live, nr_live_pos;	/* of them, the position's first */
	bool			pos_fast;	/* p.pad is its base: pos_at[] read p */
	bool			pos_only;	/* and every other field too: a key
						 * is its position and value */
	struct bch_bkey_pos_at	pos_at[3];	/* inode, offset, snapshot */
	struct bch_bkey_field_at live[BKF_NR];
	uint64_t		base[BKF_NR];
	uint64_t		lim[BKF_NR];	/* the most over base a field packs (2^bits - 1):
						 * a pack's check of every field, no shift */
	uint8_t			bits[BKF_NR];	/* 0 (every key the base) .. the field's width */
	uint16_t		off[BKF_NR];	/* bit offset of each field (from bits) */
};

/* The least and most of each field over keys added: what a format is chosen from. */
struct bch_bkey_format_state {
	uint64_t		lo[BKF_NR], hi[BKF_NR];
	bool			any;
};

/* The widest format: every key packs into it (to 40 bytes of header). */
void bch_bkey_format_widest(struct bch_bkey_format *f);
void bch_bkey_format_state_init(struct bch_bkey_format_state *s);
void bch_bkey_format_add(struct bch_bkey_format_state *s, const struct bch_bkey *k);
/* A position every key of the format must cover too (a node's range). */
void bch_bkey_format_add_pos(struct bch_bkey_format_state *s, struct bch_bpos p);
/* The narrowest format that holds every key (and position) added; no key: widest. */
void bch_bkey_format_done(const struct bch_bkey_format_state *s, struct bch_bkey_format *f);
/* Does k pack into f (each field within base .. base + 2^bits - 1)? */
bool bch_bkey_format_fits(const struct bch_bkey_format *f, const struct bch_bkey *k);

/* The words k takes packed in f (whether it fits or not). */
static inline size_t bch_bkey_packed_u64s_of(const struct bch_bkey_format *f,
					     const struct bch_bkey *k)
{
	return f->key_u64s + (k->u64s - BCH_BKEY_U64s);
}

/*
 * k packed into dst (room for bch_bkey_packed_u64s_of() words, 8-aligned):
 * the words written, or 0 when k does not fit f (dst then unchanged) or is
 * malformed (u64s below a header).
 */
size_t bch_bkey_pack(const struct bch_bkey_format *f, const struct bch_bkey *k, uint64_t *dst);

/* w (1..64) bits at bit off of the words at src (a field spans two words at most). */
static inline uint64_t bch_bkey_bits_read(const uint64_t *src, unsigned off, unsigned w)
{
	unsigned word = off / 64, sh = off % 64;
	uint64_t v = src[word] >> sh;

	if (sh + w > 64)
		v |= src[word + 1] << (64 - sh);
	return w < 64 ? v & ((1ULL << w) - 1) : v;
}

/* Position field i's distance from its base (pos_fast formats). */
static inline __attribute__((always_inline)) uint64_t bch_bkey_pos_read(const struct bch_bkey_format *f,
								      const uint64_t *src, unsigned i)
{
	const struct bch_bkey_pos_at *a = &f->pos_at[i];

	/* (<< 1 << 63 - shift: the high word's share, 0 at shift 0, no shift by 64) */
	return (src[a->word] >> a->shift | src[a->word2] << 1 << (63 - a->shift)) & a->mask;
}

/*
 * The header of the key packed at src into words (a struct bch_bkey's
 * first 40 bytes): the bases, each field that varies added in (a field's
 * distance cannot carry into the next: base + distance is a field value).
 * The generic walk (a format whose p.pad varies: none but by damage or
 * kv --unchecked).
 */
static inline void bch_bkey_unpack_words(const struct bch_bkey_format *f, const uint64_t *src,
					 uint64_t w[BCH_BKEY_U64s])
{
	for (unsigned j = 0; j < BCH_BKEY_U64s; j++)
		w[j] = f->tmpl[j];
	for (unsigned i = 0; i < f->nr_live; i++) {
		const struct bch_bkey_field_at *a = &f->live[i];

		w[a->word] += bch_bkey_bits_read(src, a->off, a->bits) << a->shift;
	}
}

/* The header's five words into dst, one 8-byte store each. */
static inline __attribute__((always_inline)) void bch_bkey_store_words(struct bch_bkey *dst,
			uint64_t w0, uint64_t w1, uint64_t w2, uint64_t w3, uint64_t w4)
{
	char *d = (char *)dst;

	memcpy(d, &w0, 8);
	memcpy(d + 8, &w1, 8);
	memcpy(d + 16, &w2, 8);
	memcpy(d + 24, &w3, 8);
	memcpy(d + 32, &w4, 8);
}

/*
 * Only the header of the key packed at src (dst->_data untouched).  A
 * pos_fast format (every one but damage's): each word computed in a
 * register and stored once, the position's fields without a loop or a
 * branch, the others (header words 0 and 1), which vary in few formats
 * (pos_only: none), by a loop.  Not through an array of words copied after:
 * its words' stores, read back by the copy's wider loads, stall those
 * loads until the stores reach the cache, which cost a scan more than the
 * unpacking's instructions (btree-bench: 1M keys' scan 58-62M -> 88-93M
 * keys/s, CPU time).
 */
static inline __attribute__((always_inline)) void bch_bkey_unpack_header(const struct bch_bkey_format *f,
								       const uint64_t *src,
								       struct bch_bkey *dst)
{
	if (__builtin_expect(!f->pos_fast, 0)) {
		uint64_t w[BCH_BKEY_U64s];

		bch_bkey_unpack_words(f, src, w);
		bch_bkey_store_words(dst, w[0], w[1], w[2], w[3], w[4]);
		return;
	}

	uint64_t w0 = f->tmpl[0], w1 = f->tmpl[1];

	for (unsigned i = f->nr_live_pos; i < f->nr_live; i++) {
		const struct bch_bkey_field_at *a = &f->live[i];
		uint64_t v = bch_bkey_bits_read(src, a->off, a->bits) << a->shift;

		/* u64s, type, flags, size lie in word 0; version is word 1 */
		w0 += a->word ? 0 : v;
		w1 += a->word ? v : 0;
	}
	bch_bkey_store_words(dst, w0, w1,
			     f->tmpl[2] + bch_bkey_pos_read(f, src, 0),
			     f->tmpl[3] + bch_bkey_pos_read(f, src, 1),
			     f->tmpl[4] + bch_bkey_pos_read(f, src, 2));
}

/*
 * n words from s to d: a value of a few words (most are) copied inline, not
 * through a call to memcpy() sized at run time (a scan copies one a key).
 */
static inline __attribute__((always_inline)) void bch_bkey_copy_words(uint64_t *d, const uint64_t *s,
								    size_t n)
{
	if (n > 8) {
		memcpy(d, s, n * 8);
		return;
	}
	/* a word at a time (the reader's loads then take each from its store) */
	switch (n) {
	case 8: d[7] = s[7];	/* fall through */
	case 7: d[6] = s[6];	/* fall through */
	case 6: d[5] = s[5];	/* fall through */
	case 5: d[4] = s[4];	/* fall through */
	case 4: d[3] = s[3];	/* fall through */
	case 3: d[2] = s[2];	/* fall through */
	case 2: d[1] = s[1];	/* fall through */
	case 1: d[0] = s[0];	/* fall through */
	case 0: break;
	}
}

/* The key packed at src, whole, into dst (room for its unpacked u64s words). */
static inline __attribute__((always_inline)) void bch_bkey_unpack(const struct bch_bkey_format *f,
								const uint64_t *src, struct bch_bkey *dst)
{
	bch_bkey_unpack_header(f, src, dst);
	/* pos_only: the length is the format's (no reload of what was just stored) */
	bch_bkey_copy_words((uint64_t *)dst->_data, src + f->key_u64s,
			    (f->pos_only ? f->tmpl[0] & 0xffff : dst->u64s) - BCH_BKEY_U64s);
}

/* Its position alone. */
static inline __attribute__((always_inline)) struct bch_bpos bch_bkey_packed_pos(const struct bch_bkey_format *f, const uint64_t *src)
{
	uint64_t w[3] = { f->tmpl[2], f->tmpl[3], f->tmpl[4] };
	struct bch_bpos p;

	if (f->pos_fast) {
		w[0] += bch_bkey_pos_read(f, src, 0);
		w[1] += bch_bkey_pos_read(f, src, 1);
		w[2] += bch_bkey_pos_read(f, src, 2);
		memcpy(&p, w, sizeof(p));
		return p;
	}
	for (unsigned i = 0; i < f->nr_live_pos; i++) {
		const struct bch_bkey_field_at *a = &f->live[i];

		w[a->word - 2] += bch_bkey_bits_read(src, a->off, a->bits) << a->shift;
	}
	memcpy(&p, w, sizeof(p));
	return p;
}

/* One field of a packed key; its length in words. */
uint64_t bch_bkey_packed_field(const struct bch_bkey_format *f, const uint64_t *src,
			       enum bch_bkey_field field);
size_t bch_bkey_packed_u64s(const struct bch_bkey_format *f, const uint64_t *src);
/* The value of the key packed at src (val bytes: its unpacked u64s less the header's). */
static inline const void *bch_bkey_packed_val(const struct bch_bkey_format *f, const uint64_t *src)
{
	return src + f->key_u64s;
}

#endif /* _BCACHEFS_BKEY_H */
