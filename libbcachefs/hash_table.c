// SPDX-License-Identifier: GPL-2.0
/*
 * hash_table.c - hashed names in a btree (see hash_table.h).
 */
#include <errno.h>
#include <stdlib.h>

#include "bcachefs.h"
#include "btree.h"
#include "snapshot.h"
#include "errcode.h"
#include "hash_table.h"

uint64_t bch_hash_test_mask = ~0ULL;

uint64_t bch_hash_slot(uint64_t h)
{
	h &= bch_hash_test_mask;
	h >>= 2;
	return h < BCH_HASH_MIN ? h + BCH_HASH_MIN : h;
}

/* Walk the probe chain from hash: fn sees each key until an empty offset. */
static int probe(struct bch_fs *c, const struct bch_hash_desc *d, uint64_t inum, uint64_t hash,
		 const void *key, struct bch_bkey **found, uint64_t *first_free, uint64_t *end,
		 bool *next_used)
{
	struct bch_viter it;
	const struct bch_bkey *k;
	uint64_t expect = hash;
	int err = 0;

	*found = NULL;
	*first_free = 0;
	bch_viter_init(&it, c, d->btree_id, POS(inum, hash, 0), POS(inum, BCH_HASH_MAX, 0));
	while ((k = bch_viter_next(&it, &err))) {
		if (k->p.offset != expect)
			break;		/* an empty offset ends the chain */
		if (k->type == d->key_type && d->match(k, key)) {
			*found = bch_bkey_dup(k);
			if (next_used) {	/* the key visible at the next offset, as bch_vlookup() sees it */
				const struct bch_bkey *n = bch_viter_next(&it, &err);
				*next_used = n && n->p.offset == expect + 1 && n->type != BCH_BKEY_deleted;
			}
			break;
		}
		if (k->type != d->key_type && !*first_free)
			*first_free = expect;	/* whiteout (or deleted): reusable */
		expect++;
	}
	bch_viter_exit(&it);
	*end = expect;
	return err;
}

int bch_hash_lookup(struct bch_fs *c, const struct bch_hash_desc *d, uint64_t inum, uint64_t hash,
		    const void *key, struct bch_bkey **ret)
{
	uint64_t first_free, end;
	int r = probe(c, d, inum, hash, key, ret, &first_free, &end, NULL);

	if (r)
		return r;
	return *ret ? 0 : -ENOENT;
}

int bch_hash_lookup_next(struct bch_fs *c, const struct bch_hash_desc *d, uint64_t inum, uint64_t hash,
			 const void *key, struct bch_bkey **ret, bool *next_used)
{
	uint64_t first_free, end;
	int r = probe(c, d, inum, hash, key, ret, &first_free, &end, next_used);

	if (r) {
		free(*ret);
		*ret = NULL;
		return r;
	}
	return *ret ? 0 : -ENOENT;
}

int bch_hash_delete_known(struct btree_trans *t, const struct bch_hash_desc *d, uint64_t inum,
			  uint64_t slot, bool next_used)
{
	struct bch_bkey k = { .u64s = BCH_BKEY_U64s, .p = POS(inum, slot, 0),
			      .type = next_used ? BCH_BKEY_hash_whiteout : BCH_BKEY_deleted };

	return bch_trans_update(t, d->btree_id, &k);
}

int bch_hash_find_slot(struct bch_fs *c, const struct bch_hash_desc *d, uint64_t inum,
		       uint64_t hash, const void *key, uint64_t *slot, bool *exists)
{
	struct bch_bkey *found;
	uint64_t first_free, end;
	int r = probe(c, d, inum, hash, key, &found, &first_free, &end, NULL);

	if (r)
		return r;
	*exists = found != NULL;
	if (found) {
		*slot = found->p.offset;
		free(found);
		return 0;
	}
	*slot = first_free ? first_free : end;
	return *slot > BCH_HASH_MAX ? -ENOSPC : 0;
}

int bch_hash_delete_at(struct bch_fs *c, struct btree_trans *t, const struct bch_hash_desc *d,
		       uint64_t inum, uint64_t slot, uint64_t queued_slot)
{
	struct bch_bkey *next;
	struct bch_bkey k = { .u64s = BCH_BKEY_U64s, .type = BCH_BKEY_deleted, .p = POS(inum, slot, 0) };
	int r = bch_vlookup(c, d->btree_id, POS(inum, slot + 1, 0), &next);

	if (queued_slot == slot + 1) {
		k.type = BCH_BKEY_hash_whiteout;
		if (!r)
			free(next);
	} else if (!r) {
		if (next->type != BCH_BKEY_deleted)
			k.type = BCH_BKEY_hash_whiteout;	/* a chain goes on past this slot */
		free(next);
	} else if (r != -BCH_ERR_key_not_found) {
		return r;
	}
	return bch_trans_update(t, d->btree_id, &k);
}
