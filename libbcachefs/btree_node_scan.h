/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_BTREE_NODE_SCAN_H
#define _BCACHEFS_BTREE_NODE_SCAN_H

/*
 * btree_node_scan.h - finding btree nodes by reading the devices, for fsck
 * when a node that points to others is lost (btree_node_scan.c).
 *
 * Every node is self-identifying (struct bch_btree_node: magic, filesystem
 * UUID, btree, level, seq, min and max key, a checksummed first bset), so a
 * scan of every bucket finds the nodes a lost interior node pointed to.  The
 * scan only records what it found; bch_node_scan_pick() chooses, for ranges
 * of one btree that were lost, which found leaves fill them (newest wins),
 * and the caller loads each through bch_btree_node_read() with the pointer
 * bch_found_node_ptr() makes, so a found node is validated like any other.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bcachefs_format.h"

struct bch_fs;
struct bch_bkey;

/* One node found on a device (nothing of its keys is kept). */
struct bch_found_node {
	struct bch_bpos		min_key, max_key;
	uint64_t		seq;		/* the node life's identity (a hash) */
	uint64_t		journal_seq;	/* newest of its valid bsets: orders lives */
	struct bch_extent_ptr	ptr;		/* where: dev, offset, the bucket's gen now */
	uint32_t		sectors_written; /* through its last valid bset */
	uint8_t			id, level;
};

struct bch_node_scan {
	struct bch_found_node	*n;		/* in device, offset order */
	size_t			nr, cap;
	uint64_t		bytes_read;
	uint64_t		headers;	/* magic and UUID of this filesystem */
	uint64_t		bad;		/* of those, first bset bad: not recorded */
};

/*
 * Read every bucket of every member device present (past the superblock
 * area; journal buckets and buckets of user data are skipped, and with
 * trust_gens those never allocated, gen 0: only when the bucket state came
 * from a current alloc btree read whole) in large sequential reads through
 * one buffer of at most 1 MiB (or one bucket), and record each node of this
 * filesystem whose header and first bset check (magic, UUID, btree id,
 * level, checksum type, bset seq, first bset checksum).  Returns 0 or a
 * negative error (I/O, a missing checksum library); s is freed with
 * bch_node_scan_exit().
 */
int  bch_node_scan(struct bch_fs *c, struct bch_node_scan *s, bool trust_gens);
void bch_node_scan_exit(struct bch_node_scan *s);

/* A range of btree id that fsck could not read (an unreadable node's range). */
struct bch_lost_range {
	struct bch_bpos		min_key, max_key;
	unsigned		level;		/* of the lost node */
	uint64_t		seq;		/* its seq, from the pointer to it */
};

/* A piece of a found leaf to take: its keys in [min_key, max_key]. */
struct bch_node_pick {
	const struct bch_found_node *f;
	struct bch_bpos		min_key, max_key;
};

/*
 * Choose the found leaves of btree id that fill the lost ranges (see the
 * rules in btree_node_scan.c): *ret (malloc'd, *nr entries, in key order)
 * are pieces of found leaves, disjoint, each inside one lost range.
 * reachable(priv, f) says that f is a leaf the tree still reaches (it is
 * taken from there, not from the scan).  Returns 0 or -ENOMEM.
 */
int  bch_node_scan_pick(struct bch_fs *c, const struct bch_node_scan *s, unsigned id,
			const struct bch_lost_range *lost, size_t nr_lost,
			bool (*reachable)(void *priv, const struct bch_found_node *f), void *priv,
			struct bch_node_pick **ret, size_t *nr);

/* A btree_ptr key to f (malloc'd), for bch_btree_node_get()/_read(). */
struct bch_bkey *bch_found_node_ptr(const struct bch_found_node *f);

#endif /* _BCACHEFS_BTREE_NODE_SCAN_H */
