/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_FSCK_FILES_H
#define _BCACHEFS_FSCK_FILES_H

/*
 * fsck_files.h - what the passes over files (5 to 11) share: the inode
 * table, the pass state, and helpers that repair through transactions.
 * Internal to fsck_*.c; the entry point is bch_fsck_files() in fsck.h.
 */

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "bcachefs_format.h"
#include "btree.h"
#include "btree_prefetch.h"
#include "fsck.h"
#include "io.h"

struct bch_fs;

/*
 * One entry per inode (2 bytes as a value; in the table most take 2 or 4
 * bits, see struct ino_table): what its key says that later passes compare,
 * and what the scans counted.  Directories (and the rare file that has 15
 * names or links or more, or that its key marks unlinked) have more in a
 * side table, struct ino_extra.
 *
 * A file of one link keeps nothing of its parent pointer: it has one name,
 * which must be where its pointer points, and sums over all of them
 * confirm that (fsck_bp_hash(), fsck_links.c).  A file of another link
 * count keeps its pointer's fingerprint apart (fsck_ino_set_fp()), to tell
 * which of its names is the pointer's.
 */
enum {
	INO_TYPE	= 0x0f,		/* mode >> 12; 0: no inode key (only referenced) */
	INO_PRESENT	= 1 << 4,	/* the slot is in use */
	INO_LOADED	= 1 << 5,	/* nlink and flags are the key's (entries fsck adds have none) */
	INO_HAS_BP	= 1 << 6,	/* the key has a parent pointer (dir != 0) */
	INO_BP_NAMED	= 1 << 7,	/* a file: the name pass 8 took as its pointer's (its one
					 * name, or the one with the pointer's fingerprint) was
					 * summed; a directory: its first name's fingerprint is
					 * its pointer's (pass 10) */
};

#define INO_SAT		15		/* names, nlink: the count is in the side entry */
#define INO_DATA_LOST	3		/* ino_extra.state of a file whose data pass 7 found lost
					 * (the repair agreed): pass 8 deletes its names */

struct ino_info {
	uint8_t		counts;		/* names counted (low 4 bits), the key's nlink (high 4) */
	uint8_t		bits;		/* file type and INO_* flags */
};

/* The file type bits of its mode (the rest is not kept); 0 when none. */
static inline uint32_t ino_mode(const struct ino_info *ii)
{
	return (uint32_t)(ii->bits & INO_TYPE) << 12;
}

static inline void ino_set_mode(struct ino_info *ii, uint32_t mode)
{
	ii->bits = (ii->bits & ~INO_TYPE) | ((mode & S_IFMT) >> 12);
}

/* An inode key was seen (its type is known). */
static inline bool ino_has_key(const struct ino_info *ii)
{
	return ii->bits & INO_TYPE;
}

/* Some dirent names it (the count itself: fsck_ino_names()). */
static inline bool ino_named(const struct ino_info *ii)
{
	return ii->counts & 0x0f;
}

/*
 * Fingerprint of a parent pointer (directory, dirent offset), kept for
 * directories (in their side entry) and files of other than one link.  A
 * name with the pointer's fingerprint is taken as the one it names
 * (INO_BP_NAMED).  Sixteen bits collide often enough to matter, so what was
 * taken on a fingerprint is confirmed as a whole with fsck_bp_hash() (see
 * fsck_links.c).
 */
static inline uint16_t fsck_bp_fp(uint64_t dir, uint64_t offset)
{
	uint64_t x = dir * 0x9e3779b97f4a7c15ULL ^ offset;

	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 29;
	return (uint16_t)(x >> 48);
}

/* 64 bits for (inode, its parent pointer or one of its names): pass 6, 8 and 10 sum them. */
static inline uint64_t fsck_bp_hash(uint64_t inum, uint64_t dir, uint64_t offset)
{
	uint64_t x = (inum * 0xd6e8feb86659fd93ULL) ^ (dir * 0x9e3779b97f4a7c15ULL) ^
		     (offset * 0xc2b2ae3d27d4eb4fULL);

	x ^= x >> 32;
	x *= 0xd6e8feb86659fd93ULL;
	x ^= x >> 32;
	x *= 0xd6e8feb86659fd93ULL;
	return x ^ (x >> 32);
}

/*
 * What directories need besides (48 bytes): few of them, so in a hash
 * table.  Their parent pointer is checked against the fingerprint kept
 * here, and pass 8 hashes their names with the seed kept here (no inode
 * key is read for it).
 */
struct ino_extra {
	uint64_t	inum;		/* 0: empty slot */
	uint64_t	parent;		/* first name seen: directory ... */
	uint64_t	parent_slot;	/* ... and dirent offset */
	uint64_t	hash_seed;	/* directories: the key's, for their names' hashes (0: read it) */
	uint32_t	subdirs;	/* directories: subdirectories named in it */
	uint32_t	names;		/* when ino_info's says INO_SAT */
	uint32_t	nlink;		/* likewise */
	uint8_t		state;		/* directories, pass 9 loop walk: 0 new, 1 walking,
					 * 2 reaches the root; files: INO_DATA_LOST */
	bool		unlinked;	/* the key's unlinked flag */
	uint16_t	bp_fp;		/* directories: fsck_bp_fp() of the key's parent pointer */
};

/*
 * Open addressing keyed by the first u64 of each entry (0: empty), entries
 * of esize bytes; cap is a power of two, at most 3/4 full.
 */
struct fsck_map {
	void		*e;
	size_t		esize, cap, nr;
};

void *fsck_map_find(struct fsck_map *m, uint64_t key, bool add);
/* Room for extra more entries without moving any (pointers into it stay valid). */
void fsck_map_reserve(struct fsck_map *m, size_t extra);
/* The same, at the size asked (no power of two): for a table never walked in slot order. */
void fsck_map_fit(struct fsck_map *m, size_t extra);
void fsck_map_exit(struct fsck_map *m);

/*
 * Inode number -> entry.  Numbers are handed out in order, so most lie in
 * one range: those are kept packed, two or four bits each, as in e2fsck's
 * bitmaps and icount (1M files: 0.25 MB, against 2 MB for whole entries).
 * The bits are a code for one of INO_PALETTE whole entries the table has
 * seen (a file's states are few: its type, a link count of 1 or 2, names
 * counted so far, whether the pointer's name was met); 0 means "not in the
 * palette": the entry, if there is one, is in the hash table.  Codes take
 * two bits until a fourth value comes (a tree of regular files with one
 * link each has two: before and after its name is counted), four after.
 * Directories (their counts vary) and whatever comes once the palette is
 * full go to the hash table, and when more than 1/INO_WIDE_RATIO of the
 * range would be there, the range is kept whole (two bytes a number)
 * instead: never more than that.  Any other number (a damaged image may hold anything) goes to
 * the hash table.  Passes visit inodes in number order, so neighbouring
 * lookups share cache lines.
 *
 * Entries are read and written as values (fsck_ino_get(), fsck_ino_put()):
 * a change is kept only once put back.
 */
struct ino_hent {
	uint64_t	inum;
	struct ino_info	i;
	uint16_t	bp_fp;		/* see fsck_ino_set_fp() */
};

/* Fingerprints of files of several links, in the dense range: made a chunk at a time. */
#define INO_FP_CHUNK	1024
#define INO_PALETTE	15	/* codes 1..15 of the packed range */
#define INO_WIDE_RATIO	16	/* more in the hash than range / this: whole entries */

struct ino_table {
	uint8_t		*packed;	/* dense range, a code_bits code each (low bits first) ... */
	unsigned	code_bits;	/* 2, or 4 once the palette holds more than 3 */
	struct ino_info	*wide;		/* ... or whole entries: wide[i] is inode dense_base + i */
	uint64_t	dense_base;
	size_t		dense_len;
	uint16_t	palette[INO_PALETTE];	/* code k + 1: counts << 8 | bits */
	unsigned	nr_palette;
	uint8_t		palette_hint[256];	/* a likely code per hash of an entry */
	size_t		nr_hashed_dense;	/* entries of the dense range in the hash */
	uint64_t	*hashed_runs;	/* bit per 64 numbers of the range: some are in the
					 * hash (clear: no lookup needed) */
	uint64_t	last_inum;	/* the last number found in the hash ... */
	size_t		last_slot;	/* ... and its slot (checked: the hash may move) */
	struct fsck_map	hash;		/* struct ino_hent: the rest */
	struct ino_info	zero;		/* inode 0 (a damaged key): 0 is the hash's empty key */
	uint16_t	zero_fp;
	uint16_t	**fp_chunks;	/* dense range, INO_FP_CHUNK inodes each; NULL until a
					 * file there needs one (none without hard links) */
	size_t		nr;		/* entries in all */
	struct fsck_map	extra;		/* struct ino_extra */
};

/* pass 6 finds an inode whose sector count is not what its extents add up to */
struct sectors_wrong {
	uint64_t	inum, i_sectors, counted;
};

/*
 * The keys of one btree in order.  The cursor holds the leaf it reads
 * (struct btree_hold), so a pass that reads other btrees meanwhile does not
 * make the cache read it again; the caller may change the tree between
 * calls: a change to the held leaf, or the leaf going, sends the cursor
 * back to the root for the position after the key it last returned, so
 * keys added further on are still met.  A key peeked is valid until the
 * peek after its pop: a copy, or on a filesystem opened read-only (nothing
 * changes a node), the key in the held leaf itself.
 */
struct key_cursor {
	struct bch_fs		*c;
	unsigned		id;
	struct bch_bpos		next;		/* where the next key is looked for ... */
	struct bch_bpos		last;		/* ... or, when next_after, just after this */
	bool			next_after;
	bool			done;
	struct btree_hold	leaf;		/* the leaf next lies in, when valid */
	unsigned		idx;		/* next's index in it */
	struct bch_bkey		*key;		/* a copy of the key peeked ... */
	const struct bch_bkey	*peeked;	/* ... or, read-only, the key in the leaf */
	size_t			key_cap;	/* bytes */
	bool			have;		/* key is peeked and not yet popped */
	uint64_t		nr_popped;
	/*
	 * Snapshots: the cursor shows what snapshot snap sees (a file btree,
	 * in a view): of the keys at one (inode, offset), the one in snap's
	 * deepest ancestor-or-self, whiteouts skipped.  The key keeps the
	 * snapshot it lies in; pop() goes on after the whole position.
	 */
	bool			filter;
	uint32_t		snap;
	unsigned		group_end;	/* index after the peeked position's keys */
	/*
	 * Read-only and not filtered: leaves are streamed (btree_prefetch.h),
	 * a piece at a time, not held whole; a leaf that does not stream is
	 * held as above.  stream: the leaf open in it (its keys next).
	 */
	struct bch_leaf_stream	*ls;
	bool			stream;
	struct bch_bpos		stream_max;	/* the open leaf's max_key */
	/*
	 * Two threads (fsck -n, struct fsck_par): the btree cache's lock,
	 * taken around what looks nodes up (opening a leaf, a held leaf);
	 * the keys of a streamed leaf are read without it.  NULL: one thread.
	 */
	pthread_mutex_t		*lock;
};

void fsck_cursor_init(struct key_cursor *cur, struct bch_fs *c, unsigned id);
void fsck_cursor_exit(struct key_cursor *cur);
/* The next key, NULL after the last (or on an error: *err). */
const struct bch_bkey *fsck_cursor_peek(struct key_cursor *cur, int *err);
void fsck_cursor_pop(struct key_cursor *cur);

/*
 * The blocks pass 5 found claimed on one device, as runs [start, end) of
 * block numbers, sorted and apart, while they are few: data written in
 * order lies in long runs (1M files of a block each: 1,037 runs in 32 KB,
 * where a bitmap of the device was 124 KB resident).  Past FSCK_CLAIM_RUNS runs,
 * one bit per block of the device instead (fsck_table_alloc(): pages
 * touched only where data lies).  Memory: at most FSCK_CLAIM_RUNS * 16
 * bytes, or the bitmap.
 */
#define FSCK_CLAIM_RUNS		4096

struct fsck_claims {
	uint64_t		(*run)[2];
	size_t			nr, cap;
	uint8_t			*map;		/* the bitmap, once the runs were too many */
	uint64_t		blocks;		/* of the device (0: not claimed on) */
};

/* Claims on a device of blocks blocks (0: none taken there). */
void fsck_claims_init(struct fsck_claims *cl, uint64_t blocks);
void fsck_claims_exit(struct fsck_claims *cl);
/*
 * Claim blocks [first, last] (within the device: the caller checks):
 * whether any of them was claimed already.
 */
bool fsck_claims_take(struct fsck_claims *cl, uint64_t first, uint64_t last);

/*
 * fsck -n without snapshots, after pass 3 trusted every leaf (nothing is
 * repaired, no node changes): the inode keys are entered in the table and
 * pass 8 runs on a second thread while the first checks the extents
 * (passes 5 and 6) and pass 7.  See fsck_files_run.c.
 */
struct fsck_par;
struct fsck_par_exit;

/* A work key passed while reading the inode keys, and what they said of its inode. */
struct work_judged {
	uint64_t		inum, cursor;
	bool			work;		/* a rebalance_work key (else skipped) */
	uint8_t			verdict;	/* 0 fine, 1 no such inode, 2 not a regular file */
};

struct fstate {
	struct bch_fsck_ctx	*ctx;
	struct bch_fs		*c;
	/*
	 * The subvolume checked (fsck_snapshots.c: with snapshots, the passes
	 * run once per live leaf, in its view): its root directory, and a
	 * label for the pass headings ("" without snapshots).
	 */
	bool			snapshots;
	uint32_t		subvol;
	uint64_t		root_inum;
	char			label[64];
	struct ino_table	inodes;
	struct bch_fsck_file_stats *stats;
	int			err;

	/* pass 5: blocks claimed, per device; recently seen encoded extents */
	struct fsck_claims	claimed[BCH_SB_MEMBERS_MAX];
	struct {
		struct bch_extent_ptr	ptr;
		struct bch_extent_crc	crc;	/* its encoding (offset: 0) */
		uint64_t		end;	/* end of the pieces seen, in its sectors */
	}			recent[128];
	unsigned		recent_next;

	/* pass 6: the inode whose extents are being scanned */
	uint64_t		cur_inum;
	bool			cur_exists;	/* it has an inode key: */
	uint32_t		cur_mode;	/* its mode, size, sectors */
	uint64_t		cur_size;
	uint64_t		cur_i_sectors;
	uint64_t		cur_counted;	/* sectors of its extents so far */
	uint64_t		prev_end;
	uint64_t		reserved;	/* promises of the reservations kept so
						 * far: c->reserved_sectors after the pass */

	/*
	 * pass 6: the inode keys, read in step with the extents (both are in
	 * inode number order); each is entered in the table as it passes
	 */
	struct key_cursor	inode_keys;

	/*
	 * pass 6: the rebalance_work keys, in step too (keyed by inode number);
	 * the scan key (inode 0) covers every inode from its cursor on
	 */
	struct key_cursor	work_keys;
	bool			scan_pending;
	uint64_t		scan_cursor;
	struct bch_io_opts	cur_opts;	/* the inode's (a regular file's) */
	uint64_t		cur_work_start;	/* its first extent that needs rebalance ... */
	uint64_t		cur_work_end;	/* ... ends here (UINT64_MAX: none) */
	unsigned		cur_work_why;	/* BCH_REBALANCE_REASON_* of that extent */

	/* pass 7 -> 8: files whose data was lost (INO_DATA_LOST; 0: no lookup per name) */
	size_t			nr_data_lost;

	/* pass 6 -> 7: sector counts to report, in inode order */
	struct sectors_wrong	*sectors_wrong;
	size_t			nr_sectors_wrong, sectors_wrong_cap;
	/* pass 6 -> 7: inode keys with bad file flags (inode_flags_*), in order */
	struct bch_bpos		*flags_bad;
	size_t			nr_flags_bad, flags_bad_cap;

	uint64_t		max_inum;	/* highest inode number: for progress */

	/* pass 8: dirents re-hashed (and counted) this pass */
	struct bch_bpos		*moved;
	size_t			nr_moved;

	/*
	 * pass 6, 8, 10: fsck_bp_hash() summed over every parent pointer as
	 * the keys give it, and over the name or key each was accepted on
	 * (see fsck_links.c)
	 */
	uint64_t		bp_sum_keys, bp_sum_names;
	bool			bp_exact;	/* pass 10: every pointer checked by its dirent */
	size_t			nr_unlinked_keys;	/* pass 6: keys with the unlinked flag */
	/* pass 10: files whose pointer is wrong, to give the first name a scan finds */
	struct bp_lost {
		uint64_t	inum;
		uint64_t	dir, slot;	/* that name (dir 0: none found yet) */
	}			*bp_lost;
	size_t			nr_bp_lost, bp_lost_cap;

	/*
	 * pass 8: the values kept in pieces that the xattr keys of inode
	 * xattr_inum name (pieces fields; its pieces come after its keys)
	 */
	uint64_t		xattr_inum;
	uint32_t		*xattr_pieces;
	size_t			nr_xattr_pieces, xattr_pieces_cap;
	/* pass 8: the orphaned value last reported (its other pieces go with it) */
	uint64_t		orphan_inum;
	uint32_t		orphan_id;
	bool			orphan_seen;

	/* pass 8: the directory whose entries are being scanned */
	uint64_t		dir_cached;
	struct bch_inode	dir_inode;

	/*
	 * Two threads (NULL: one).  par_b: this is the second thread's state
	 * (the table, pass 8; its reports wait for the first's); else the
	 * first's, which leaves the table alone: the work keys are judged by
	 * the inode keys read in step (work_q, in order, drained at each inode
	 * with extents).
	 */
	struct fsck_par		*par;
	bool			par_b;
	/*
	 * The second thread, its work done, waits here to exit until
	 * fstate_free() has freed the table (see fsck_files_run.c).
	 */
	struct fsck_par_exit	*par_exit;
	struct work_judged	*work_q;
	size_t			nr_work_q, work_q_at, work_q_cap;
};

/* Around a lookup in the btree cache (nodes read, held, evicted) when two threads check. */
void fsck_lock(struct fstate *s);
void fsck_unlock(struct fstate *s);
/* That lock, for a cursor (NULL: one thread). */
pthread_mutex_t *fsck_par_cache(struct fstate *s);
/*
 * The second thread's report of p: true to report it now (the first
 * thread's passes have printed theirs), false when it was kept for then.
 */
bool fsck_par_defer(struct fstate *s, enum bch_fsck_problem p, const char *where, const char *detail);

/*
 * Zeroed memory for a large table (the inode table, the blocks claimed):
 * pages of its own, so those never written are never resident (calloc()
 * clears a reused chunk of the heap page by page: all of it resident, which
 * read-ahead timing decided from run to run).  NULL when out of memory.
 */
void *fsck_table_alloc(size_t bytes);
void fsck_table_free(void *p, size_t bytes);

/*
 * Size the table for nr inodes numbered up to max_inum: the packed range
 * covers [BCH_ROOT_INO, max_inum] when that range is at most about twice nr.
 */
void fsck_ino_init(struct ino_table *t, size_t nr, uint64_t max_inum);
void fsck_ino_exit(struct ino_table *t);
/* inum's entry into *ii; false (and *ii zeroed) when there is none. */
bool __fsck_ino_get(struct ino_table *t, uint64_t inum, struct ino_info *ii);

/* A packed code (code_bits of them a byte, the lowest bits first). */
static inline unsigned fsck_ino_code(const struct ino_table *t, uint64_t i)
{
	unsigned per_shift = t->code_bits == 2 ? 2 : 1;

	return (t->packed[i >> per_shift] >> ((i & ((1U << per_shift) - 1)) * t->code_bits)) &
	       ((1U << t->code_bits) - 1);
}

/* The common case inline: a number of the packed range with a code. */
static inline bool fsck_ino_get(struct ino_table *t, uint64_t inum, struct ino_info *ii)
{
	uint64_t i = inum - t->dense_base;
	unsigned code;

	if (i < t->dense_len && t->packed && (code = fsck_ino_code(t, i))) {
		uint16_t v = t->palette[code - 1];
		ii->counts = v >> 8;
		ii->bits = v & 0xff;
		return ii->bits & INO_PRESENT;
	}
	return __fsck_ino_get(t, inum, ii);
}
/* Likewise, but when there is none *ii is a new entry (INO_PRESENT), kept once put. */
void fsck_ino_get_new(struct ino_table *t, uint64_t inum, struct ino_info *ii);
/* Keep *ii (INO_PRESENT set) as inum's entry. */
void __fsck_ino_put(struct ino_table *t, uint64_t inum, const struct ino_info *ii);

/* Where the palette's hint for a value (counts << 8 | bits) is. */
static inline unsigned fsck_palette_hash(uint16_t v)
{
	return (v ^ v >> 8 ^ v >> 3) & 0xff;
}

/*
 * The common case inline: a number of the packed range that has a code
 * (it is not in the hash), to a value the palette has under its hint.
 */
static inline void fsck_ino_put(struct ino_table *t, uint64_t inum, const struct ino_info *ii)
{
	uint64_t i = inum - t->dense_base;
	uint16_t v = (uint16_t)ii->counts << 8 | ii->bits;
	unsigned code;

	if (i < t->dense_len && t->packed && fsck_ino_code(t, i) &&
	    (code = t->palette_hint[fsck_palette_hash(v)]) && t->palette[code - 1] == v) {
		unsigned per_shift = t->code_bits == 2 ? 2 : 1;
		unsigned shift = (i & ((1U << per_shift) - 1)) * t->code_bits;
		uint8_t *p = &t->packed[i >> per_shift];

		*p = (*p & ~(((1U << t->code_bits) - 1) << shift)) | code << shift;
		return;
	}
	__fsck_ino_put(t, inum, ii);
}
/* Room for extra entries without moving the side table (pointers into it stay valid). */
void fsck_ino_reserve(struct ino_table *t, size_t extra);
/*
 * Entries in order (the dense range in number order, then the hash table);
 * *pos starts at 0; *inum and *ii are set to the entry; false after the last.
 */
bool fsck_ino_next(struct ino_table *t, size_t *pos, uint64_t *inum, struct ino_info *ii);
/*
 * The parent pointer fingerprint of a file of other than one link (the
 * entry must be there); 0 when none was set.
 */
void fsck_ino_set_fp(struct ino_table *t, uint64_t inum, uint16_t fp);
uint16_t fsck_ino_fp(struct ino_table *t, uint64_t inum);
/* A directory's side entry (added empty when add); may move others when adding. */
struct ino_extra *fsck_ino_extra(struct ino_table *t, uint64_t inum, bool add);
/* Names counted and the key's link count, wherever they are kept; setting may add a side entry. */
uint32_t fsck_ino_names(struct ino_table *t, uint64_t inum, const struct ino_info *ii);
void fsck_ino_set_names(struct ino_table *t, uint64_t inum, struct ino_info *ii, uint32_t n);
uint32_t fsck_ino_nlink(struct ino_table *t, uint64_t inum, const struct ino_info *ii);
void fsck_ino_set_nlink(struct ino_table *t, uint64_t inum, struct ino_info *ii, uint32_t n);
/* A directory's pass 9 walk state, in its side entry (setting adds one). */
unsigned fsck_ino_state(struct ino_table *t, uint64_t inum);
void fsck_ino_set_state(struct ino_table *t, uint64_t inum, unsigned state);

/* Report p; true when it is to be repaired (and the filesystem is writable). */
bool fsck_fixing(struct fstate *s, enum bch_fsck_problem p, const char *where, const char *detail);
/* Count the repair of p, or keep its error. */
void fsck_fix_done(struct fstate *s, enum bch_fsck_problem p, int r);
/*
 * "inode 4100 (/etc/passwd)": the path from parent pointers, best effort
 * (in a view: from its subvolume's root, "subvolume N" in front).
 */
void fsck_inode_where(struct bch_fs *c, uint64_t inum, char *buf, size_t len);

/* One-key transactions. */
int fsck_put_key(struct bch_fs *c, unsigned id, const struct bch_bkey *k);
int fsck_delete_key(struct bch_fs *c, unsigned id, struct bch_bpos p);
/* Replace extent old by new (NULL: delete it), with space accounting. */
int fsck_replace_extent(struct bch_fs *c, const struct bch_bkey *old, const struct bch_bkey *new,
			bool account_new);
int fsck_update_inode(struct bch_fs *c, uint64_t inum, const struct bch_inode *i);
/* A repair that adds or removes a subdirectory keeps its parent's nlink in step. */
int fsck_adjust_nlink(struct bch_fs *c, uint64_t inum, int delta);

/*
 * Visit every key of btree id in order, in batches: fn gets a copy and may
 * change the tree (no iterator is open while it runs).
 */
typedef int (*key_fn)(struct fstate *s, const struct bch_bkey *k);
int fsck_for_each_key(struct fstate *s, unsigned id, key_fn fn);

/* The passes (one file each). */
int fsck_check_extent(struct fstate *s, const struct bch_bkey *k);	/* 5, 6: fsck_extents.c */
int fsck_extents_done(struct fstate *s);				/* 6: the inodes after the last extent */
int fsck_check_alloc(struct fstate *s);				/* 5: fsck_extents.c */
int fsck_load_inode(struct fstate *s, const struct bch_bkey *k);	/* 6: fsck_inodes.c */
int fsck_check_inodes(struct fstate *s);				/* 7 */
int fsck_check_dirent(struct fstate *s, const struct bch_bkey *k);	/* 8: fsck_dirents.c */
int fsck_check_xattr(struct fstate *s, const struct bch_bkey *k);	/* 8 */
int fsck_check_root(struct fstate *s);				/* 9: fsck_dirs.c */
int fsck_check_structure(struct fstate *s);				/* 9 */
int fsck_check_links(struct fstate *s);				/* 10: fsck_links.c */
int fsck_check_data(struct fstate *s, const struct bch_bkey *k);	/* 11: fsck_data.c */

/* The root directory of the subvolume c's view is in (BCH_ROOT_INO without one). */
uint64_t fsck_view_root(struct bch_fs *c);

#endif /* _BCACHEFS_FSCK_FILES_H */
