/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_DUMP_H
#define _BCACHEFS_DUMP_H

/*
 * dump.h - which byte ranges of the member devices are metadata, for
 * `bcachefs dump` (a metadata image for bug reports; cmd/cmd_dump.c writes
 * the container, man/bcachefs-format.5 "DUMP FILES" describes it).
 *
 * The metadata of a device is:
 *   (1) the superblock area: sectors 0 .. first_bucket * bucket_size (the
 *       layout at sector 7 and the copies placed there);
 *   (2) every superblock copy the layout lists (the end-of-device backup
 *       lies past the last bucket), each its full 1 << sb_max_size_bits
 *       sectors, cut at the end of the device;
 *   (3) every journal bucket (the journal field's runs), whole: entries,
 *       stubs and the stale tail a reader must see to stop where it does;
 *   (4) every node slot (btree_node_size from the bucket's start) of every
 *       bucket the alloc info calls btree; and in the free buckets (with
 *       generations not trusted, also those never allocated) each node
 *       slot that starts with a node header of this filesystem (nodes no
 *       longer reachable, which fsck's node scan would find).  A slot whose
 *       node verifies (header, every bset's checksum or MAC) is cut after
 *       the block following its last bset, where the node reader and the
 *       node scan stop; any other slot is kept whole, so every reader meets
 *       the bytes it met on the original.
 * Nothing in a bucket of user (or cached) data is ever included, so file
 * data (symlink targets too: they are stored as file data) never is; names
 * and xattr values are in keys, so they are.
 *
 * Invariants: ranges come out sorted by (dev, offset), merged, non-empty,
 * inside their device.  The library reads; it writes and prints nothing.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bch_fs;

struct bch_dump_range {
	uint32_t	dev;		/* member index */
	uint64_t	offset;		/* bytes from the start of the device */
	uint64_t	len;		/* bytes */
};

struct bch_dump_ranges {
	struct bch_dump_range	*r;	/* malloc'd, nr entries */
	size_t			nr, cap;
	uint64_t		sb_bytes, journal_bytes, btree_bytes;	/* before merging */
	uint64_t		nodes;	/* unreachable nodes found in free buckets */
};

/* What bch_dump_ranges() leaves out (the scrambled dump's second pass). */
#define BCH_DUMP_REACHABLE	(1U << 0)	/* only the nodes the btrees reach (walked
						 * from the roots), no other node slot */
#define BCH_DUMP_NO_JOURNAL	(1U << 1)	/* no journal bucket (a clean filesystem
						 * opens and fscks without) */

/*
 * Collect the metadata ranges of every member present on the open
 * filesystem c (opened read-only; an encrypted one with its key, to verify
 * node MACs).  Reads every node slot's header and each verifying node's
 * bsets.  Returns 0 or a negative error (I/O, -ENOMEM); free with
 * bch_dump_ranges_exit() either way.
 */
int  bch_dump_ranges(struct bch_fs *c, unsigned flags, struct bch_dump_ranges *d);
void bch_dump_ranges_exit(struct bch_dump_ranges *d);

/*
 * --scramble-names, on a filesystem opened read-write (dump scrambles a
 * private copy of the metadata, never the original): rename every directory
 * entry to a name of the same length drawn from key (random bytes the
 * caller picks: the mapping cannot be undone without them), unique in its
 * directory ([A-Za-z0-9_-], other bytes when a directory needs more names
 * of a length than those give); and the user.* and trusted.* xattrs alike,
 * names after the prefix and values (same lengths).  Kept: lost+found in
 * the root (every filesystem has it; fsck looks for it), security.* and
 * system.* xattrs (labels, capabilities, ACLs: structure, not content).
 * Then every node of the dirents and xattrs btrees is rewritten whole, so
 * no older bset holds a name; the old nodes and the journal still do, which
 * is why the scrambled dump takes BCH_DUMP_REACHABLE | BCH_DUMP_NO_JOURNAL.
 * Returns 0 or a negative error (the filesystem's state is then partly
 * scrambled); *names and *xattrs count what was changed.
 */
#define BCH_DUMP_KEY_BYTES	16
int bch_dump_scramble(struct bch_fs *c, const uint8_t key[BCH_DUMP_KEY_BYTES],
		      uint64_t *names, uint64_t *xattrs);

#endif /* _BCACHEFS_DUMP_H */
