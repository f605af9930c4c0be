/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_SCRUB_H
#define _BCACHEFS_SCRUB_H

/*
 * scrub.h - read every copy of data and metadata, verify it, and rewrite
 * the bad copies from good ones (`bcachefs data scrub`; fsck --data uses
 * the per-extent part, so both repair data the same way).
 *
 * A scrub walks the stripes btree (every erasure-coded stripe read whole,
 * or those with a block on the member: bch_ec_stripe_check()), then the
 * extents btree (every copy of every extent, or only the copies on one
 * member), then every node of every btree (every replica, or only those on
 * the member), in steps of a bounded number of bytes read:
 * the caller holds the engine lock for one step and may release it between
 * steps.  Each extent is read, checked and repaired inside one step, so no
 * other writer can change it meanwhile.  The journal is not scrubbed.
 *
 * Repair
 *   data   a bad dirty copy is rewritten on its own device (new space there)
 *          from the good copy's encoded bytes, and the key's pointer swapped
 *          in one transaction (the journal flushes the devices first, so the
 *          new copy is durable before the key names it); the bad copy's
 *          space is freed with the old pointer.  A bad cached copy is dropped
 *          from the key (promote makes another).  This is in place rather
 *          than through the move path: it keeps the other copies where they
 *          are, needs no re-encode, and reuses the bytes already read.
 *   stripe a bad block (data: failing its checksum; parity: not the parity
 *          of the data) is rebuilt from the others and written back where
 *          it lies, before the extents are read; a striped copy that is
 *          still bad is rebuilt from its stripe (its checksum verifying it)
 *          and written back in its block, in place too (ec.h says why this
 *          is crash-safe).  A stripe with more bad blocks than parity is
 *          checked again after the extents, whose repairs may leave few
 *          enough; else it is named (kind stripe).
 *   btree  a node with a bad replica is rewritten whole (every replica) from
 *          the node in memory, which was validated when read
 *          (bch_btree_node_rewrite()).
 *   none   no good copy: the extent (inode, sectors, bytes) or node is
 *          counted and named in bad[], and left as it is.
 *   skip   copies on a member not given (degraded) and stale cached copies
 *          are neither read nor damage: counted in copies_skipped.
 *
 * A scrub holds no state on disk: interrupted, it is run again (a repaired
 * copy then reads good).
 */

#include <stdbool.h>
#include <stdint.h>

#include "bkey.h"

struct bch_fs;

/* ------------------------------------------------------------ one extent */

/*
 * What reading the copies of one extent key found.  good_buf holds the
 * encoded bytes of the good copy (an I/O buffer, freed by
 * bch_extent_scrub_exit()).
 */
struct bch_extent_scrub {
	unsigned	nr;		/* pointers of the key */
	unsigned	checked;	/* bit per copy read */
	unsigned	bad;		/* bit per copy read that failed (checksum, I/O) */
	unsigned	skipped;	/* bit per copy not read: member missing, stale cached */
	int		good;		/* a copy that read good, -1: none */
	bool		rebuilt;	/* good is a striped copy that is bad itself: good_buf
					 * was rebuilt from its stripe */
	int		bad_err;	/* the first bad copy's error */
	uint64_t	bytes_read;
	void		*good_buf;
};

/*
 * Read and verify the copies of extent k on the devices in devs (a bit per
 * member index), and when one of them is bad, the others until one is good
 * (a source for the repair).  Returns 0, or an error that is not the
 * copies' fault (memory, a missing library: bch_err_is_dl()).
 */
int bch_extent_scrub_read(struct bch_fs *c, const struct bch_bkey *k, uint64_t devs,
			  struct bch_extent_scrub *x);
/*
 * Repair the bad copies of k with a bit in mask from x's good copy (see the
 * header).  *n is the key to commit in place of k (malloc'd; NULL when
 * nothing changed), *fixed the copies repaired; copies that could not be
 * (no space on their device, device gone) are left as they are.  Space
 * accounting is done here; the caller commits *n.
 */
int bch_extent_scrub_repair(struct bch_fs *c, const struct bch_bkey *k,
			    const struct bch_extent_scrub *x, unsigned mask,
			    struct bch_bkey **n, unsigned *fixed);
void bch_extent_scrub_exit(struct bch_extent_scrub *x);

/* ------------------------------------------------------------ the walk */

#define BCH_SCRUB_BAD_MAX	32	/* unrepairable things named (all are counted) */

struct bch_scrub_bad {
	bool		btree;		/* a btree node (else file data) */
	bool		stripe;		/* an erasure-coded stripe (inode: its index) */
	uint64_t	inode;		/* data: the file */
	uint64_t	start, end;	/* data: sectors of the file */
	uint64_t	bytes;		/* data: bytes of the file */
	char		what[384];	/* "inode 4100 (/a/b) sectors 0..128" or the node */
	char		why[320];	/* "no good copy: checksum mismatch" */
};

struct bch_scrub {
	int		dev;		/* only copies on this member; -1: all */

	/* progress and results */
	uint64_t	bytes_total;	/* device bytes to read, estimated at init */
	uint64_t	bytes_read;
	uint64_t	extents_checked;
	uint64_t	nodes_checked;
	uint64_t	stripes_checked;	/* erasure-coded stripes (their blocks count as copies) */
	uint64_t	copies_checked;	/* data copies and node replicas read */
	uint64_t	copies_bad;
	uint64_t	copies_repaired;
	uint64_t	copies_skipped;	/* on a missing member, or stale cached */
	uint64_t	unrepairable;	/* extents and nodes with a bad copy left bad */
	uint64_t	unrepairable_bytes;	/* file bytes of those extents */
	unsigned	nr_bad;		/* entries of bad[] used */
	struct bch_scrub_bad bad[BCH_SCRUB_BAD_MAX];

	/* walk state (private) */
	unsigned	phase;		/* 0 stripes, 1 extents, 2 btree nodes, 3 done */
	bool		in_reflink;	/* phase 1: in the reflink btree (after the extents) */
	struct bch_bpos	pos;
	unsigned	btree_id, level;
	/* stripes with too many bad blocks: checked again after the extents */
	uint32_t	recheck[BCH_SCRUB_BAD_MAX];
	unsigned	nr_recheck;
};

/*
 * Set a scrub up: dev is a member index or -1; totals from the space in
 * use.  0 or an error naming what is wrong in err.
 */
int bch_scrub_init(struct bch_fs *c, struct bch_scrub *s, int dev, char *err, size_t errlen);
/*
 * One step of about budget bytes read: 1 when there is more, 0 when done,
 * <0 on an error that stops the scrub (c->err_msg says what).
 */
int bch_scrub_step(struct bch_fs *c, struct bch_scrub *s, uint64_t budget);

#endif /* _BCACHEFS_SCRUB_H */
