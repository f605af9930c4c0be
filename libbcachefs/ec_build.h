/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_EC_BUILD_H
#define _BCACHEFS_EC_BUILD_H

/*
 * ec_build.h - what the stripe builders share, inside the erasure-coding
 * modules only: ec.c builds stripes from extents rewritten into new blocks
 * (struct build; bch_ec_step() drives both builders), ec_inplace.c builds
 * them from candidate buckets where they lie (struct inplace; its rule is
 * in that file's header).  Not an interface for other modules: ec.h is.
 */

#include <stdbool.h>
#include <stdint.h>

#include "bcachefs_format.h"
#include "ec.h"

struct bch_fs;
struct bch_bkey;
struct bch_move_stats;

struct cand {
	struct bch_bkey	*k;		/* the extent as read */
	unsigned	block;		/* data block it goes into */
	unsigned	off;		/* sectors into the block */
	bool		ok;		/* its data was read */
};

struct build {
	struct bch_fs	*c;
	unsigned	k, p, n;
	unsigned	devs[BCH_STRIPE_BLOCKS_MAX];
	unsigned	block_sectors;
	struct cand	*cands;
	size_t		nr;
	uint8_t		*bufs[BCH_STRIPE_BLOCKS_MAX];
	struct bch_extent_ptr blocks[BCH_STRIPE_BLOCKS_MAX];
	unsigned	nr_alloced;
	bool		full;		/* gather stopped for want of room, not of extents */
	bool		inplace;	/* the data blocks are candidate buckets where they lie */
	const struct inplace *ip;	/* gather leaves the extents it claims (NULL: none) */
};

/* Per member: what the in-place scan found in each bucket. */
struct ip_dev {
	uint64_t	nbuckets;
	unsigned	bucket_sectors;
	uint32_t	*live;		/* sectors of first copies accounted to the bucket */
	uint32_t	*end;		/* sectors into the bucket where the last one ends */
	uint32_t	*nkeys;		/* extents with their first copy there */
	uint8_t		*state;		/* IP_* */
};

struct inplace {
	struct ip_dev	d[BCH_SB_MEMBERS_MAX];
	uint64_t	left;		/* sectors in qualifying buckets not yet striped */
	uint64_t	cands;		/* extents either path would take */
	uint64_t	planned;	/* of those, in the stripes planned in place */
};

/* ec.c: the builder of new blocks */
unsigned ec_parity(struct bch_fs *c);
unsigned ec_members(struct bch_fs *c, unsigned *devs);
bool ec_candidate(const struct bch_bkey *k, unsigned block_sectors);
unsigned ec_new_key_u64s(void);
int ec_build_commit(struct build *b, struct bch_bkey *sk, struct bch_move_stats *st);
int ec_build_one(struct bch_fs *c, unsigned p, const unsigned *members, unsigned nr_members,
		 bool finish, const struct inplace *ip, struct bch_bpos *pos,
		 struct bch_move_stats *st, uint64_t *built);
uint8_t *ec_block_buf(struct bch_fs *c, unsigned i, size_t bytes);
int ec_next_stripe_index(struct bch_fs *c, uint64_t *idx);

/* ec_inplace.c: the builder in place */
bool ec_ip_claims(struct bch_fs *c, const struct inplace *ip, const struct bch_bkey *k);
int ec_ip_scan(struct bch_fs *c, const unsigned *members, unsigned nr_members,
	       struct inplace *ip);
int ec_ip_step(struct bch_fs *c, struct inplace *ip, unsigned p, const unsigned *members,
	       unsigned nr, uint64_t budget, struct bch_move_stats *st, uint64_t *built);
void ec_ip_free(struct inplace *ip);

#endif
