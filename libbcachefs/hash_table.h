/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_HASH_TABLE_H
#define _BCACHEFS_HASH_TABLE_H

/*
 * hash_table.h - hashed names in a btree (dirents, xattrs).
 *
 * An entry of owner inode `inum` whose name hashes to h lives at
 * (inum, slot, 0) for the first slot >= h that was free when it was
 * inserted (linear probing, see bcachefs_format.h).  Invariant: between
 * an entry's hash and its slot every offset holds a key (an entry or a
 * hash_whiteout), so a lookup may stop at the first empty offset.  A
 * delete therefore leaves a whiteout unless the next offset is empty.
 */

#include <stdbool.h>
#include <stdint.h>

#include "bcachefs_format.h"

struct bch_fs;
struct btree_trans;

struct bch_hash_desc {
	unsigned	btree_id;
	unsigned	key_type;
	/* does entry k carry the name in key? */
	bool		(*match)(const struct bch_bkey *k, const void *key);
};

/* Tests: AND-ed into every name hash, to force collisions (default all ones). */
extern uint64_t bch_hash_test_mask;

/* Map a 64-bit name hash into [BCH_HASH_MIN, BCH_HASH_MAX]. */
uint64_t bch_hash_slot(uint64_t h);

/* The entry for key (malloc'd copy in *ret), or -ENOENT. */
int bch_hash_lookup(struct bch_fs *c, const struct bch_hash_desc *d, uint64_t inum, uint64_t hash,
		    const void *key, struct bch_bkey **ret);
/*
 * bch_hash_lookup(), and *next_used: whether the offset after the entry's
 * holds a key, as bch_hash_delete_at() asks (the probe is there already:
 * an unlink's second lookup saved).
 */
int bch_hash_lookup_next(struct bch_fs *c, const struct bch_hash_desc *d, uint64_t inum, uint64_t hash,
			 const void *key, struct bch_bkey **ret, bool *next_used);

/*
 * Where key would go: *slot is the entry's own slot when it exists (and
 * *exists is set), else the first whiteout or empty offset from hash.
 */
int bch_hash_find_slot(struct bch_fs *c, const struct bch_hash_desc *d, uint64_t inum,
		       uint64_t hash, const void *key, uint64_t *slot, bool *exists);

/*
 * Remove the entry at slot (a whiteout if probing needs the offset).
 * queued_slot: a slot this transaction is filling (0: none), which the
 * btree does not show yet.
 */
/* bch_hash_delete_at(), next_used from bch_hash_lookup_next() (nothing changed since) */
int bch_hash_delete_known(struct btree_trans *t, const struct bch_hash_desc *d, uint64_t inum,
			  uint64_t slot, bool next_used);
int bch_hash_delete_at(struct bch_fs *c, struct btree_trans *t, const struct bch_hash_desc *d,
		       uint64_t inum, uint64_t slot, uint64_t queued_slot);

#endif /* _BCACHEFS_HASH_TABLE_H */
