/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_EC_H
#define _BCACHEFS_EC_H

/*
 * ec.h - erasure coding: Reed-Solomon stripes of k data + p parity blocks
 * on k + p members (feature erasure_code; layout in bcachefs_format.h,
 * "Erasure coding"), through Intel's ISA-L (libisal.so.2, loaded with the
 * first codec: dl.h).
 *
 * Owns, in ec.c: the codec (encode p parity blocks, rebuild any p missing);
 * the stripe key's and striped pointers' validation and text; the stripes
 * btree's creation (bch_ec_init: feature bit first); rebuilding a read
 * through a stripe (io.c calls it when every copy failed); the parity
 * blocks' bucket state at a recount; the stripe builder (rebalance's step;
 * its builder in place is ec_inplace.c, sharing ec_build.h);
 * what a degraded open may count on (replicas.c); checking a stripe whole
 * and repairing its bad blocks (scrub.c, fsck -c).  fsck_ec.c checks
 * stripes against the extents.
 *
 * The code: the systematic Cauchy matrix of ISA-L's gf_gen_cauchy1_matrix()
 * over GF(2^8) (rows 0..k-1 the identity, rows k..k+p-1 parity), so data
 * blocks are stored as they are, and any k of the k+p rows form an
 * invertible matrix.  Block i of a stripe is row i.  The code is part of
 * the on-disk format: parity written by one version must decode in the
 * next, so the matrix is never changed (a different code would take a new
 * stripe algorithm number, bch_stripe.algorithm).
 *
 * Invariants
 *   (1) Encoding is a pure function of (k, p, data): parity equals the
 *       definition's (ec_test checks it against a reference).
 *   (2) Byte j of every block depends only on byte j of the others: a caller
 *       may encode or rebuild any byte range [off, off + len) of a stripe by
 *       passing the blocks' pointers advanced by off (reads rebuild just an
 *       extent's sectors).
 *   (3) bch_ec_reconstruct() writes only the blocks it was told are missing.
 *   (4) A stripe key is committed only after every one of its blocks is
 *       written, and is durable only after they are flushed (the
 *       rewriting path flushes them itself; the in-place path relies on
 *       the journal's flush of every device before the entry that holds
 *       the key, as every data write does: io.h), in the transaction that
 *       points extents into it; blocks are never written again while the key exists, but by a
 *       repair, with the bytes the key already names (a data block, or an
 *       extent's sectors in it: its checksum says so) or the parity of the
 *       data (bch_ec_stripe_check(); scrub.c).
 *   (5) A rebuilt read is returned only once the extent's own checksum
 *       verifies it.
 *
 * Locking: none of its own; callers hold the engine lock (the builder runs
 * inside rebalance's step).  A codec is read-only after init and may be
 * shared by threads.
 *
 * Memory: a codec holds k*(k+p) + 32*k*p bytes of tables; a rebuild holds
 * k + 2p buffers of the extent's size; the builder k + p buffers of a bucket
 * (kept by the filesystem between steps, freed at close: bch_ec_bufs_free)
 * and a copy of each extent key it gathers (bounded by one transaction per
 * stripe, up to 16 stripes planned at once in place), and for one step 9
 * bytes per bucket of each member (the in-place walk's counts).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bcachefs_format.h"

struct bch_fs;

#define BCH_EC_K_MAX		16	/* data blocks of a stripe, at most */
#define BCH_EC_P_MAX		4	/* parity blocks, at most (BCH_REPLICAS_MAX) */
#define BCH_EC_BLOCKS_MAX	(BCH_EC_K_MAX + BCH_EC_P_MAX)

struct bch_ec_codec {
	unsigned	k;		/* data blocks */
	unsigned	p;		/* parity blocks */
	uint8_t		*matrix;	/* (k+p) x k encode matrix, row-major */
	uint8_t		*enc_tables;	/* ec_init_tables() of the p parity rows */
};

/*
 * Build the codec of k data and p parity blocks (2 <= k <= BCH_EC_K_MAX,
 * 1 <= p <= BCH_EC_P_MAX).  Returns 0, -EINVAL for a shape out of range,
 * -BCH_ERR_dl_isal when libisal cannot be loaded, or -ENOMEM.
 */
int bch_ec_codec_init(struct bch_ec_codec *codec, unsigned k, unsigned p);
void bch_ec_codec_exit(struct bch_ec_codec *codec);

/*
 * Compute the p parity blocks of len bytes each from the k data blocks:
 * blocks[0..k-1] are read, blocks[k..k+p-1] written.  Any len (ISA-L takes
 * the fast path for multiples of 64; any other length is correct).
 */
void bch_ec_encode(const struct bch_ec_codec *codec, size_t len, uint8_t **blocks);

/*
 * Rebuild the blocks whose bit is set in missing (bit i = block i; data and
 * parity alike) from the others, len bytes each, in place in blocks[].
 * Returns 0, or -EINVAL when more than p blocks are missing or a bit names
 * no block (nothing written then).  Blocks not missing are read only.  No
 * allocation: the decode tables live on the stack (about 3 KiB).
 */
int bch_ec_reconstruct(const struct bch_ec_codec *codec, size_t len,
		       uint8_t **blocks, uint32_t missing);

/* ------------------------------------------------------------ keys */

/*
 * A stripe key's value, checked alone (bkey.c calls this for every stripe
 * key read or written): sizes, shape, algorithm, checksum type, distinct
 * members, zero reserved fields.  0 or -BCH_ERR_bkey_invalid with a reason
 * in err.  A key that passes may be indexed by block without bounds checks.
 */
int bch_stripe_validate(const struct bch_bkey *k, char *err, size_t errlen);
void bch_stripe_to_text(const struct bch_bkey *k, char *buf, size_t len);

static inline const struct bch_stripe *bch_stripe_val(const struct bch_bkey *k)
{
	return (const struct bch_stripe *)k->_data;
}

static inline unsigned bch_stripe_data_blocks(const struct bch_stripe *s)
{
	return s->nr_blocks - s->nr_parity;
}

/*
 * The pointer-level rules of striped pointers (bkey.c's check of every
 * extent and reflink_v pointer list): a known flag set, never cached and
 * striped at once, a stripe index and a data block index in range when
 * striped, zeros otherwise, at most one striped pointer per key.
 */
int bch_ec_ptrs_validate(const struct bch_extent_ptr *p, unsigned nr, char *err, size_t errlen);

/*
 * What needs the superblock: a stripe key, or a striped pointer, on a
 * filesystem without BCH_FEATURE_ERASURE_CODE is invalid.  Meant for
 * bch_bkey_validate_fs() (snapshot.c) after bch_bkey_validate().
 */
int bch_ec_validate_fs(struct bch_fs *c, const struct bch_bkey *k, unsigned btree_id,
		       unsigned level, char *err, size_t errlen);

/*
 * Whether striped pointer p of an extent whose encoded data is sectors long
 * fits block p->stripe_block of stripe s (a valid stripe key's value): a
 * data block, the same member and generation, and the sectors inside the
 * block.  Used by fsck and the read path's rebuild.
 */
bool bch_stripe_ptr_fits(const struct bch_stripe *s, const struct bch_extent_ptr *p,
			 unsigned sectors);

/* ------------------------------------------------------- filesystem */

/*
 * Make the filesystem ready for stripes: the feature bit first (superblock
 * written), then the stripes btree's root.  A crash between leaves the bit
 * and an empty btree, a state like any other.  0, or the error of the
 * superblock write or root allocation (-BCH_ERR_fs_read_only read-only).
 */
int bch_ec_init(struct bch_fs *c);

/*
 * Rebuild the encoded extent behind striped pointer p (sectors long, the
 * extent's compressed_sectors) from the same sectors of the other blocks of
 * its stripe, into enc (sectors * 512 bytes).  verify(ctx) then checks enc
 * (the extent's checksum; it may decrypt or decode in place) and returns 0,
 * -BCH_ERR_csum_mismatch (wrong: another choice of blocks is tried; a block
 * that reads but holds wrong bytes is found this way, up to the parity's
 * reach), or another error, returned as it is.
 *
 * Blocks on missing members, unreadable, or stale (their bucket reused) are
 * left out.  Returns 0 when a rebuild verified; -EIO when the stripe key is
 * missing or does not fit p, or too few blocks remain, or no choice
 * verified; -BCH_ERR_dl_isal; -ENOMEM.  Reads only.
 */
int bch_ec_rebuild_ptr(struct bch_fs *c, const struct bch_extent_ptr *p, unsigned sectors,
		       void *enc, int (*verify)(void *ctx), void *ctx);

/* ------------------------------------------------------ bucket state */

/*
 * Bucket state of stripes: a stripe's parity blocks count block_sectors of
 * user data in their buckets (nothing else points there); its data blocks
 * count what their extents' striped pointers count, as any pointer does.
 * bch_ec_mark_stripe() marks one stripe key's parity at a recount (open
 * after a crash, fsck); bch_ec_mark_all() every stripe's.
 */
int bch_ec_mark_stripe(struct bch_fs *c, const struct bch_bkey *k);
int bch_ec_mark_all(struct bch_fs *c);

/*
 * Degraded opens (replicas.c): whether key k (an extent or a reflink_v) has
 * a striped pointer whose stripe has at least k of its blocks on members
 * present, so its data can be rebuilt whatever its own pointer's member.
 */
bool bch_ec_key_readable(struct bch_fs *c, const struct bch_bkey *k);

/* ------------------------------------------------------------ builder */

struct bch_move_stats;

/*
 * The stripe builder (background: rebalance's step, offline `data
 * rebalance` and the FUSE daemon's rebalance thread).  With the filesystem
 * option erasure_code and data_replicas R >= 2, replicated extents are
 * gathered into stripes of p = R - 1 parity blocks and k data blocks
 * (k = members that may take data - p, at most 16, at least 2) of at most
 * a bucket each, on k + p distinct read-write members.
 *
 * In place first (issue 34): an erasure-coded file's first copy is written
 * to its member's stripe candidate bucket (alloc.h), and a bucket whose
 * live sectors are all first copies of extents the builder takes (no
 * cached data, not open, in no stripe: found by one walk, nothing on disk
 * marks it, and at least 3/4 full) becomes a data block where it lies.
 * k such buckets on k distinct members (always k: a narrower stripe would
 * cost more parity than the rewriting path's), p parity members among the
 * rest:
 *   a. each block is read from the bucket's start to its last extent's
 *      end, every extent verified in it against its own checksum (one
 *      that fails leaves the stripe unbuilt: the path below rewrites its
 *      extents from a good copy); the rest of a shorter block is zeros,
 *      written there, so every block is defined on disk;
 *   b. parity computed and written (with the tails: all the build writes);
 *   c. one transaction adds the stripe key and gives each extent still as
 *      read one striped pointer, its first copy where it lies; its other
 *      copies' sectors come off their buckets after it.
 * Then the rest is rewritten into new blocks (in the background only
 * extents the in-place path will not take):
 *   1. candidate extents (not striped, a readable copy) are packed, in key
 *      order, each into the least filled data block (each block on its own
 *      member); blocks are as large as the fullest (parity no larger than
 *      the data it protects);
 *   2. each extent's encoded bytes are read from a good copy (verified)
 *      and placed in its block; parity is computed; every block is written
 *      and flushed;
 *   3. one transaction adds the stripe key and, for each extent still as
 *      it was read, replaces its pointers with one striped pointer into its
 *      block; the old copies' sectors come off their buckets after it.
 * A crash before c or 3 leaves the replicas as they were (the parity, new
 * blocks and zero tails are space no key names; a recount frees it), and
 * the old copies' buckets are reused only once the commit is durable
 * (DESIGN.md invariant 2).  An extent that changed meanwhile stays
 * replicated.  Fewer than two candidate extents left, or
 * fewer than p + 2 members: nothing is built (the rest stays replicated).
 *
 * Builds stripes for up to budget sectors of data: only full ones (the
 * blocks could take no more extent), unless finish (data rebalance: the
 * rest too, in narrower or shorter stripes).  The background (rebalance's
 * step, the daemon) waits for a stripe's worth; `data rebalance` finishes.
 * Returns 1 when it built one and more may follow, 0 when nothing is left
 * to stripe, or a negative error.  s counts keys moved and sectors read and
 * written.
 */
int bch_ec_step(struct bch_fs *c, uint64_t budget, bool finish, struct bch_move_stats *s);

/* Sectors of user data that are replicated and would be striped (fs usage, data rebalance). */
int bch_ec_pending(struct bch_fs *c, uint64_t *sectors);

/* Free the stripe block buffers the builder keeps between steps (at close). */
void bch_ec_bufs_free(struct bch_fs *c);

/* ------------------------------------------------------ stripe check */

/*
 * Check one stripe whole (scrub's stripe phase, fsck -c): every block on a
 * present member is read and checked against the key's block checksum; the
 * data blocks that fail (or cannot be read) are rebuilt from the others
 * (the first choice, fewest left out, whose rebuilt blocks match their
 * checksums); then the parity of the data is computed and compared with
 * the parity blocks.  The data blocks are the reference: they match their
 * checksums (and the extents' own checksums vouch for what lies in them).
 *
 * The blocks of repair (a bit per block; ~0: all) that are bad (and a
 * read-write filesystem): written
 * back where they lie, in place: a data block with the bytes its checksum
 * names, a parity block with the data's parity; the members are flushed,
 * and when a parity block's checksum in the key is not that of the data's
 * parity (the parity was wrong when built), the key is updated after.
 * Why in place and not to a new location (invariant (4) is about new
 * contents; this restores the contents the key already names): a write
 * cut by a crash leaves each sector old (bad, as before) or new (good),
 * so the stripe is never worse than before the repair and the next check
 * finishes it; no extent pointer changes, so no walk of the extents and no
 * transaction bound.  A block whose bucket was reused (stale: a data
 * block whose extents all went, until stripe compaction) or on no member
 * is not judged (rebuilt in memory for the parity check) and never written.  Without block checksums (csum_type none) a parity mismatch
 * cannot say which block is wrong: reported, nothing written.
 *
 * Memory: 2 (k + p) buffers of a block.  Returns 0 (what was found in
 * res), or an error that is not the stripe's (memory, a library).
 */
struct bch_ec_check {
	unsigned	nr_blocks, nr_data;
	uint32_t	bad;		/* blocks unreadable or failing their checksum */
	uint32_t	skipped;	/* not judged: on a member missing (degraded), on no
					 * member, or its bucket reused (stale) */
	uint32_t	stale;		/* of those: no member, or the bucket reused */
	uint32_t	parity_wrong;	/* parity blocks that read good but differ from the data's parity */
	uint32_t	repairable;	/* bad | parity_wrong */
	uint32_t	repaired;	/* of those, rewritten */
	bool		unrecoverable;	/* too many bad blocks, or no checksums to tell */
	bool		unchecked;	/* more blocks skipped than parity, none bad: the
					 * parity could not be compared */
	uint64_t	bytes_read;
};
int bch_ec_stripe_check(struct bch_fs *c, const struct bch_bkey *sk, uint32_t repair,
			struct bch_ec_check *res);

#endif /* _BCACHEFS_EC_H */
