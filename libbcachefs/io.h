/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_IO_H
#define _BCACHEFS_IO_H

/*
 * io.h - the data path: file data to and from extents.
 *
 * Writes are copy-on-write: data is encoded (checksummed, maybe compressed)
 * in units of at most encoded_extent_max, each unit written to freshly
 * allocated space on data_replicas devices, and only then is the extent key
 * pointing at it added to the caller's transaction.  Uncompressed, a unit
 * is allocated before it is encoded and cut to the rest of the open
 * buckets (bch_alloc_data_fit()): no bucket is left with an unused end.
 * A write with one copy that does not fit what user data can still take
 * fails before it allocates anything, so a failed write leaves no dead
 * space; space allocated and never pointed at goes back to its open bucket
 * (bch_alloc_data_unwind()).  The journal flushes
 * every device before it writes an entry, so the data is durable before any
 * key that points at it (DESIGN.md invariant 1).
 *
 * Reads verify the checksum of every encoded extent they touch, decode it,
 * and on a checksum or read error try the next replica; a bad copy is
 * counted in c->data_bad_copies.  Ranges with no extent read as zeros.
 */

#include <stdint.h>
#include <sys/types.h>

#include "bcachefs.h"

#include "bcachefs_format.h"
#include "extent_encode.h"

struct bch_fs;
struct btree_trans;
struct bch_extent_update;
struct bch_inode;

/* How new data of one file is stored (the inode's options over the filesystem's). */
struct bch_io_opts {
	unsigned	csum_type;	/* enum bch_csum_type */
	uint64_t	compression;	/* compression option value */
	unsigned	replicas;
	uint64_t	target;		/* foreground_target (0: any device) */
	uint64_t	background_target;	/* where rebalance moves data (0: nowhere) */
	uint64_t	background_compression;	/* what rebalance recompresses with (0: none) */
	uint64_t	promote_target;		/* where reads add cached copies (0: none) */
	bool		erasure_code;		/* the stripe builder gathers its data */
};

void bch_io_opts_get(struct bch_fs *c, const struct bch_inode *inode, struct bch_io_opts *o);

/* Field by field (the struct has padding): the same options? */
static inline bool bch_io_opts_same(const struct bch_io_opts *a, const struct bch_io_opts *b)
{
	return a->csum_type == b->csum_type && a->compression == b->compression &&
	       a->replicas == b->replicas && a->target == b->target &&
	       a->background_target == b->background_target &&
	       a->background_compression == b->background_compression &&
	       a->promote_target == b->promote_target && a->erasure_code == b->erasure_code;
}

/*
 * Write sectors of buf as inum's data at sector start (start and sectors
 * multiples of the block size): the data goes to disk now, and the
 * removal of what was there plus the new extent keys go into t.
 */
int bch_data_write(struct bch_fs *c, struct btree_trans *t, uint64_t inum,
		   const struct bch_io_opts *o, uint64_t start, const void *buf, uint64_t sectors,
		   struct bch_extent_update *u);

/*
 * Append to *buf (*len bytes, grown with realloc; free() it) every key of
 * inum's extents btree over sectors [start, start + sectors), as the file
 * reads them (its view).  Two equal results mean the same bytes there: a
 * caller that read the range checks this way that it still holds them.
 */
int bch_data_keys_append(struct bch_fs *c, uint64_t inum, uint64_t start, uint64_t sectors,
			 char **buf, size_t *len);

/* Read sectors of inum's data at sector start into buf (holes read as zeros). */
int bch_data_read(struct bch_fs *c, uint64_t inum, uint64_t start, void *buf, uint64_t sectors);
/*
 * The same for a file's reader (fs_ops read): copies are tried live cached
 * ones first, and, with o->promote_target set on a read-write filesystem,
 * each extent read from outside promote_target gets a cached copy there
 * (promote: at most BCH_PROMOTE_MAX extents per call, best effort, through
 * the move path; later reads are served from it).
 */
#define BCH_PROMOTE_MAX	16
int bch_data_read_promote(struct bch_fs *c, uint64_t inum, const struct bch_io_opts *o,
			  uint64_t start, void *buf, uint64_t sectors);
/*
 * Readahead for a sequential reader, in two steps so the slow one needs no
 * lock: plan (under whatever serialises the engine) finds where the first
 * copy of each extent in [start, start + sectors) lies, merging runs that
 * are contiguous on one device; issue asks the devices to start reading
 * them (posix_fadvise WILLNEED), and may run on any thread while the
 * filesystem is open.  A plan holds at most BCH_READAHEAD_MAX runs; it
 * returns the sector up to which it covered the range.  Uncompressed
 * extents of at most BCH_READAHEAD_SLOT_MAX bytes (encrypted or checksummed
 * plain) on a device that reads uncached (blockdev.h) are left out: the
 * read-ahead of a sequential reader (fs_read.h) reads those itself,
 * bypassing the page cache, and a hint would have the kernel read them a
 * second time into it.
 */
#define BCH_READAHEAD_MAX	16
#define BCH_READAHEAD_SLOT_MAX	(256U << 10)

/*
 * An extent of this encoding is one the read-ahead (fs_read.h) may hold:
 * uncompressed (its bytes on disk are the file's, or their ciphertext) and
 * small enough for a slot.
 */
static inline bool bch_readahead_slot_takes(const struct bch_extent_crc *crc)
{
	return bch_crc_plain(crc) &&
	       ((size_t)crc->compressed_sectors << BCH_SECTOR_SHIFT) <= BCH_READAHEAD_SLOT_MAX;
}
struct bch_blockdev;
struct bch_readahead {
	unsigned	nr;
	struct {
		struct bch_blockdev	*bdev;
		uint64_t		offset, len;	/* bytes */
	} run[BCH_READAHEAD_MAX];
};
uint64_t bch_data_readahead_plan(struct bch_fs *c, uint64_t inum, uint64_t start, uint64_t sectors,
				 struct bch_readahead *ra);
void bch_data_readahead_issue(const struct bch_readahead *ra);

/*
 * Reads outside the engine lock.  A caller that serialises the engine with
 * a lock (the FUSE daemon) may split a read in two, each step needing what
 * its BCH_LOCK_ constant says:
 *   plan (BCH_READ_PLAN_NEEDS): bch_data_read_plan() walks the extents
 *     covering file bytes [offset, offset + len) and notes, per piece, the
 *     first copy's device and offset, its encoding (checksum, compression,
 *     the nonce), or zeros for a hole; and c->data_reuse_seq.  Nonzero: it
 *     cannot plan this read (a missing member, a stale or damaged copy,
 *     memory): read it the old way.
 *   run (BCH_READ_RUN_NEEDS): bch_data_read_plan_run() reads each piece,
 *     verifies, decrypts and decompresses it into buf (len bytes), and checks
 *     that c->data_reuse_seq did not move.  It returns len, or -EAGAIN for
 *     anything else (a short read, an I/O error, a checksum mismatch, space
 *     reused meanwhile): the caller then reads the old way under the engine
 *     lock, which tries the other copies, rebuilds from stripes, counts and
 *     reports errors.  The run counts no error, repairs nothing and writes
 *     nothing; what it returned passed the checks the old path makes.
 * Invariant: c->data_reuse_seq is bumped (bch_data_reuse_bump(), engine
 * lock held) before any write over space that may hold data a plan points
 * at: a bucket opened for new data or evicted (alloc.c), discarded
 * (alloc.c), a copy rewritten in place (scrub.c, ec.c).  So a run that saw
 * the same value after its reads read what the plan's keys pointed at.
 */
enum bch_lock_need {
	BCH_LOCK_ENGINE,	/* the engine's lock, exclusive (everything else) */
	BCH_LOCK_DEVICES,	/* only c and its devices kept open: no close, no
				 * membership change, resize or reopen meanwhile */
};
#define BCH_READ_PLAN_NEEDS	BCH_LOCK_ENGINE
#define BCH_READ_RUN_NEEDS	BCH_LOCK_DEVICES

struct bch_read_piece {
	uint64_t		buf_off;	/* bytes into the reader's buffer */
	uint64_t		len;		/* bytes there */
	uint64_t		src_off;	/* bytes into the decoded extent */
	struct bch_blockdev	*bdev;		/* NULL: zeros (a hole, a reservation) */
	uint64_t		dev_off;	/* bytes: the encoded extent on bdev */
	uint64_t		version;	/* the key's version (an encrypted extent's nonce) */
	struct bch_extent_crc	crc;		/* the key's encoding */
};

struct bch_read_plan {
	struct bch_fs		*c;
	uint64_t		offset, len;	/* file bytes */
	uint64_t		seq;		/* c->data_reuse_seq when planned */
	unsigned		nr, cap;
	struct bch_read_piece	*p;		/* malloc'd: bch_data_read_plan_free() */
};

int bch_data_read_plan(struct bch_fs *c, uint64_t inum, uint64_t offset, uint64_t len,
		       struct bch_read_plan *pl);
ssize_t bch_data_read_plan_run(struct bch_read_plan *pl, void *buf);
void bch_data_read_plan_free(struct bch_read_plan *pl);

/*
 * Writes outside the engine lock, in three steps (the caller maps each
 * step's BCH_LOCK_ need to its locks, as for reads):
 *   plan (BCH_WRITE_PLAN_NEEDS): bch_data_write_plan() allocates the space
 *     of sectors of buf as inum's data at sector start (block aligned),
 *     unit by unit exactly as bch_data_write() would (the same calls, in
 *     the same order, units cut to the open buckets alike: ENOSPC is the
 *     same answer), and takes the nonces of an encrypted filesystem.  The
 *     space is counted as live at once, so no other allocation, copygc or
 *     eviction takes it; opening a bucket bumps c->data_reuse_seq as any
 *     allocation does.  -EAGAIN: this write
 *     is not planned so (compression, whose size is known only after
 *     encoding; erasure coding, whose stripe builder reads buckets being
 *     filled): write it the old way.  Any other error: nothing is held.
 *   run (BCH_WRITE_RUN_NEEDS): bch_data_write_plan_run() checksums,
 *     encrypts and writes every unit to its space.  It changes nothing in
 *     c but the devices' I/O counters; the buffer must stay valid and
 *     unchanged until the index step.
 *   index (BCH_WRITE_INDEX_NEEDS): bch_data_write_plan_index() puts into t
 *     what bch_data_write() would: the punch of the range and the extent
 *     keys of the units (an append may grow the previous extent), the
 *     rebalance work.  Not index (an error, a run that failed):
 *     bch_data_write_plan_free(pl, true) gives the space back (to the open
 *     bucket, when nothing was allocated after it).
 * Nothing points at planned space before the index step commits: a crash
 * before leaves it free (the state is rebuilt from the keys), and a read
 * plan cannot point there.
 */
#define BCH_WRITE_PLAN_NEEDS	BCH_LOCK_ENGINE
#define BCH_WRITE_RUN_NEEDS	BCH_LOCK_DEVICES
#define BCH_WRITE_INDEX_NEEDS	BCH_LOCK_ENGINE

struct bch_write_plan_unit {
	uint64_t		start;		/* sector of the file */
	unsigned		sectors;
	unsigned		got;		/* copies allocated */
	struct bch_extent_ptr	ptrs[BCH_REPLICAS_MAX];
	uint64_t		version;	/* encrypted: the nonce */
	struct bch_extent_crc	crc;		/* set by the run */
};

struct bch_write_plan {
	struct bch_fs		*c;
	uint64_t		inum, start, sectors;
	const void		*src;
	struct bch_io_opts	o;
	unsigned		unit;		/* unit_sectors() when planned */
	unsigned		nr;
	struct bch_write_plan_unit *w;		/* malloc'd */
	bool			held;		/* w's space is ours until indexed */
};

int bch_data_write_plan(struct bch_fs *c, uint64_t inum, const struct bch_io_opts *o,
			uint64_t start, const void *buf, uint64_t sectors, struct bch_write_plan *pl);
int bch_data_write_plan_run(struct bch_write_plan *pl);
int bch_data_write_plan_index(struct btree_trans *t, struct bch_write_plan *pl,
			      struct bch_extent_update *u);
/* release: give back the space the plan holds (it was not indexed) */
void bch_data_write_plan_free(struct bch_write_plan *pl, bool release);

static inline void bch_data_reuse_bump(struct bch_fs *c)
{
	__atomic_fetch_add(&c->data_reuse_seq, 1, __ATOMIC_SEQ_CST);
	/* the writes that follow (pwrite's copy) come after it on every CPU (a seqlock's) */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/*
 * Read and verify every replica of one extent key (fsck --data, scrub):
 * *bad gets a bit per pointer whose copy is unreadable or fails its checksum.
 * A library needed to check them that cannot be loaded marks no copy bad: it
 * is returned (bch_err_is_dl()).
 */
int bch_data_verify_key(struct bch_fs *c, const struct bch_bkey *k, unsigned *bad);

/*
 * Read the encoded extent of extent key k from its pointer i into enc (an
 * I/O buffer of crc.compressed_sectors) and verify it; decode it into dec
 * (crc.uncompressed_sectors) too, unless dec is NULL and the extent is not
 * compressed (the data is then enc itself).  A stale pointer or a missing
 * device is an error.
 */
int bch_extent_read_copy(struct bch_fs *c, const struct bch_bkey *k, unsigned i, void *enc,
			 void *dec);
/*
 * The same for a striped pointer i whose copy is bad: its sectors rebuilt
 * from the stripe's other blocks (bch_ec_rebuild_ptr()) and verified as
 * bch_extent_read_copy() verifies a copy.  -EIO when i is not striped or
 * no rebuild verified.
 */
int bch_extent_rebuild_copy(struct bch_fs *c, const struct bch_bkey *k, unsigned i, void *enc,
			    void *dec);

/*
 * Every copy of extent key k failed with r: when it has a striped pointer,
 * rebuild its encoded extent from the stripe (ec.h) into enc (and dec) as
 * bch_extent_read_copy() reads a copy, verified against k's checksum.  0,
 * or r (the move path reads striped data through it: ec_move.h).
 */
int bch_extent_read_rebuild(struct bch_fs *c, const struct bch_bkey *k, void *enc, void *dec,
			    int r);

/*
 * The cipher of encrypted extents on the calling thread and a worker pool
 * (io.c: "Threads").  A job is one extent: its nonce (the key's version),
 * bytes at src and buf (may be src), and its MAC.
 * encrypt_batch encrypts src into buf and sets mac; decrypt_batch checks
 * each mac over src and decrypts src into buf only when it matched (else r
 * is -BCH_ERR_csum_mismatch and buf is untouched).  r is each job's result;
 * the bytes are those of bch_crypt_extent_encrypt() and
 * bch_crypt_extent_decrypt().
 */
struct bch_cipher_job {
	uint64_t		version;
	const void		*src;
	void			*buf;
	size_t			bytes;
	struct bch_csum		mac;
	int			r;
};
void bch_io_encrypt_batch(struct bch_fs *c, struct bch_cipher_job *j, unsigned nr);
void bch_io_decrypt_batch(struct bch_fs *c, struct bch_cipher_job *j, unsigned nr);
/* Workers of the pool: n (at most 7; 0: the caller does everything), or -1: one fewer than the CPUs. */
void bch_io_pool_threads(int n);
/*
 * fn(arg, i) for every i < nr, on this thread and the pool's workers
 * (those free: while another thread's batch runs, all on this one);
 * returns when all are done.  fn takes no lock of the engine (io.c,
 * "Threads"): the read-ahead's verification and decryption of extents.
 */
void bch_io_pool_run(unsigned nr, void (*fn)(void *arg, unsigned i), void *arg);
/*
 * Test builds: every writeback start of a planned write
 * (bch_dev_writeback_start(), over a run of its units lying back to back
 * on one device) is passed to this hook first, on the thread that makes
 * it.  NULL in the tool.
 */
struct bch_blockdev;
extern void (*bch_io_writeback_hook)(struct bch_blockdev *dev, uint64_t offset, uint64_t len);

#endif /* _BCACHEFS_IO_H */
