/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_FSCK_H
#define _BCACHEFS_FSCK_H

/*
 * fsck.h - the check and repair passes, and the table of problems they find.
 *
 * Every problem fsck can report is one row of BCH_FSCK_PROBLEMS(): a stable
 * name and number (never renumbered: scripts and golden tests match them),
 * the pass that finds it, whether its repair is safe without asking (-p),
 * and the message and repair wording.  A pass calls bch_fsck_problem() for
 * each instance; the context decides (from -n/-y/-p or by asking through the
 * caller's callback) whether to repair, and counts it.
 *
 * Invariants
 *   (1) In no-write mode (-n) no pass writes to any device: devices are opened
 *       read-only and bch_fsck_problem() always answers "do not fix".
 *   (2) Reports go through the caller's callback; the library never prints.
 *   (3) A pass repairs a problem only when bch_fsck_problem() said yes, and
 *       records the outcome with bch_fsck_fixed() or leaves it uncorrected.
 */

#include <stdbool.h>
#include <stdint.h>
#include "bcachefs_format.h"

/*
 * x(name, number, pass, flags, message)
 *   flags: FSCK_SAFE  repaired by -p (preen) without asking
 *          FSCK_FATAL cannot be repaired; fsck stops after this pass
 *          FSCK_NOFIX cannot be repaired; fsck goes on
 */
#define FSCK_SAFE	(1U << 0)
#define FSCK_FATAL	(1U << 1)
#define FSCK_NOFIX	(1U << 2)	/* reported and left: there is no repair */
#define FSCK_MINOR	(1U << 3)	/* a state normal work leaves (say, after a crash):
					 * reported and repaired, but not counted in the
					 * totals nor in the exit code */

#define BCH_FSCK_PROBLEMS()									\
	x(sb_copy_bad,		0x0101, 1, FSCK_SAFE,						\
	  "superblock copy is damaged; rewrite it from the newest valid copy")		\
	x(sb_copy_stale,	0x0102, 1, FSCK_SAFE,						\
	  "superblock copy is older than the newest valid copy; rewrite it")		\
	x(sb_layout_bad,	0x0103, 1, FSCK_SAFE,						\
	  "superblock layout record is damaged; rewrite it")				\
	x(sb_none_valid,	0x0104, 1, 0,							\
	  "no valid superblock copy on the device; rewrite its copies from another "	\
	  "member's superblock")							\
	x(sb_wrong_fs,		0x0105, 1, FSCK_FATAL,						\
	  "device belongs to a different filesystem")					\
	x(sb_dup_dev_idx,	0x0106, 1, FSCK_FATAL,						\
	  "two devices claim the same member index")					\
	x(sb_member_missing,	0x0107, 1, FSCK_FATAL,						\
	  "a member device of the filesystem was not given")				\
	x(sb_not_member,	0x0108, 1, FSCK_FATAL,						\
	  "device is not a member of the filesystem")					\
	x(sb_dev_newer,		0x0109, 1, FSCK_SAFE,						\
	  "device has an older superblock than another member; rewrite it")		\
	x(sb_layout_unusable,	0x010a, 1, FSCK_FATAL,						\
	  "no superblock copy has a layout that fits the device")			\
	x(journal_entry_missing, 0x0201, 2, 0,						\
	  "journal entries missing or damaged; replay the entries around them (their "	\
	  "changes are lost)")								\
	x(btree_node_unreadable, 0x0301, 3, 0,							\
	  "btree node cannot be read; rebuild the btree from the readable leaves "	\
	  "(the keys of this node are lost)")						\
	x(btree_topology,	0x0302, 3, 0,							\
	  "btree node's children do not cover its range; rebuild the btree")		\
	x(btree_replica_bad,	0x0303, 3, FSCK_SAFE,						\
	  "a copy of a btree node is bad (another one was read); rewrite the node")	\
	x(btree_node_scan_found, 0x0304, 3, 0,						\
	  "leaves of a lost btree node found by scanning the devices; keep their keys "	\
	  "in the rebuilt btree")							\
	x(bkey_invalid,		0x0401, 4, 0,							\
	  "key fails validation; delete it (the node is rewritten without it)")	\
	x(snapshot_parent_bad,	0x0411, 4, 0,							\
	  "snapshot's parent does not exist, has a greater ID, or does not list it as "	\
	  "a child; list it there (or, with no parent to list it, make it the root of "	\
	  "a tree: what its lost ancestors held is gone)")				\
	x(snapshot_children_wrong, 0x0412, 4, FSCK_SAFE,					\
	  "snapshot lists a child that does not exist or names another parent; "	\
	  "drop it from the list")							\
	x(snapshot_depth_wrong,	0x0413, 4, FSCK_SAFE,						\
	  "snapshot's depth is not its parent's + 1; correct it")			\
	x(snapshot_subvol_wrong, 0x0414, 4, FSCK_SAFE,					\
	  "snapshot's subvolume field does not name the subvolume that sees it; "	\
	  "correct it")									\
	x(snapshot_no_subvol,	0x0415, 4, 0,							\
	  "live snapshot leaf that no subvolume sees (its files are unreachable); give "	\
	  "it a new subvolume, named in the root of subvolume 0")			\
	x(subvol_snapshot_missing, 0x0416, 4, 0,						\
	  "subvolume's snapshot does not exist; make it again when keys lie in it "	\
	  "(below the parent that listed it, or as a tree of its own), else delete "	\
	  "the subvolume and its name")							\
	x(subvol_snapshot_interior, 0x0417, 4, 0,						\
	  "subvolume's snapshot has children (only leaves are written); move the "	\
	  "subvolume to a leaf below it (a new one if none is free)")			\
	x(subvol_snapshot_deleted, 0x0418, 4, FSCK_SAFE,					\
	  "subvolume's snapshot is marked deleted; clear the mark (its files stay)")	\
	x(subvol_snapshot_shared, 0x0419, 4, 0,						\
	  "two subvolumes see the same snapshot (writes of one would show in the "	\
	  "other); give each a new leaf below it, as a snapshot does")		\
	x(subvol_root_missing,	0x041a, 4, 0,							\
	  "subvolume's root directory is missing in its snapshot; create it again "	\
	  "(the entries in it stay; pass 10 counts its links)")			\
	x(subvol_name_missing,	0x041b, 4, 0,							\
	  "subvolume's name (the directory entry its key points at) is missing or "	\
	  "names something else; point at its name, or name it again")		\
	x(snapshot_key_missing,	0x041c, 4, 0,							\
	  "keys in a snapshot that does not exist (no subvolume can see them); delete "	\
	  "them")									\
	x(snapshot_deleted_keys, 0x041d, 4, FSCK_SAFE | FSCK_MINOR,				\
	  "keys of deleted snapshots (a subvolume delete not finished); free them")	\
	x(whiteout_orphan,	0x041e, 4, FSCK_SAFE | FSCK_MINOR,				\
	  "whiteouts that hide nothing (harmless); delete them")			\
	x(extent_ptr_bad,	0x0501, 5, 0,							\
	  "extent points to a missing device, outside the device or into metadata; "	\
	  "drop the pointer (the extent goes when none is left)")			\
	x(extent_ptr_stale,	0x0502, 5, FSCK_SAFE,						\
	  "extent pointer has an old bucket generation (space reused); drop it")	\
	x(extent_ptr_dup,	0x0503, 5, 0,							\
	  "two extents claim the same disk space; drop the later pointer")		\
	x(alloc_key_wrong,	0x0504, 5, FSCK_SAFE,						\
	  "alloc btree disagrees with the pointers about a bucket; rewrite its key")	\
	x(alloc_key_bad,	0x0505, 5, FSCK_SAFE,						\
	  "alloc key names no bucket that can hold data; delete it")			\
	x(extent_no_copy,	0x0506, 5, FSCK_NOFIX,						\
	  "extent has copies only on missing members (opened very_degraded); "	\
	  "left as it is: reads of it fail until the member is back")			\
	x(cached_ptr_bad,	0x0507, 5, FSCK_SAFE,						\
	  "cached pointer (not stale) into a bucket of metadata, or on a device "	\
	  "that holds a dirty copy; drop it (no data is lost)")			\
	x(extent_no_inode,	0x0601, 6, 0,							\
	  "extent of an inode that does not exist; delete it")				\
	x(extent_bad_inode,	0x0602, 6, 0,							\
	  "extent of an inode that is not a regular file or symlink; delete it")	\
	x(extent_overlap,	0x0603, 6, 0,							\
	  "extent overlaps the one before it; trim it")				\
	x(extent_past_eof,	0x0604, 6, FSCK_SAFE,						\
	  "extent past the end of the file; delete it")				\
	x(inode_sectors_wrong,	0x0605, 6, FSCK_SAFE,						\
	  "inode's sector count differs from its extents; correct it")		\
	x(reserved_sectors_wrong, 0x0606, 6, FSCK_SAFE,					\
	  "space promised to preallocated ranges, as the clean record says, "	\
	  "differs from the reservation keys; correct it")				\
	x(rebalance_work_missing, 0x0607, 6, FSCK_SAFE,					\
	  "file has data that needs rebalance (off its background target or not in "	\
	  "its background compression) but no pending-work record covers it; add one")	\
	x(rebalance_work_stale,	0x0608, 6, FSCK_SAFE,						\
	  "pending-work record of an inode that does not exist or is not a regular "	\
	  "file; delete it")								\
	x(reflink_p_dangling,	0x0508, 5, 0,							\
	  "shared extent points at indirect extents that are missing; punch what is missing to a hole") \
	x(reflink_refcount_wrong, 0x0509, 5, FSCK_SAFE,					\
	  "indirect extent's reference count differs from the shared extents pointing "	\
	  "at it; correct it")								\
	x(reflink_v_unreferenced, 0x050a, 5, FSCK_SAFE,					\
	  "indirect extent no shared extent points at; delete it (its space is freed)") \
	x(stripe_block_bad,	0x050b, 5, 0,							\
	  "erasure-coded stripe has a block that is not where a block can be; delete "	\
	  "the stripe (its extents keep their own copy)")				\
	x(stripe_ptr_dangling,	0x050c, 5, FSCK_SAFE,						\
	  "extent points into a stripe that is missing or does not hold its data; "	\
	  "clear the pointer's striped flag")						\
	x(stripe_unused,	0x050d, 5, FSCK_SAFE,						\
	  "erasure-coded stripe no extent points into; delete it")			\
	x(inode_unlinked,	0x0701, 7, FSCK_SAFE,						\
	  "inode with no links left over from an interrupted delete; finish deleting it") \
	x(inode_back_pointer,	0x0702, 7, FSCK_SAFE,						\
	  "inode's parent pointer does not name one of its links; correct it")		\
	x(inode_data_lost,	0x0703, 7, 0,							\
	  "file's data was in a btree node that is lost; move the file to lost+found "	\
	  "(what is left of it is kept there)")						\
	x(inode_flags_unknown,	0x0704, 7, FSCK_SAFE,						\
	  "inode has flag bits this version does not know (damage); clear them")	\
	x(inode_flags_no_feature, 0x0705, 7, FSCK_SAFE,					\
	  "inode has file flags or a project ID (feature inode_flags) or an "	\
	  "erasure_code option (inode_ec), but the superblock lacks that feature "	\
	  "(damage); clear them")							\
	x(dirent_dangling,	0x0801, 8, 0,							\
	  "directory entry points to an inode that does not exist; delete it")		\
	x(dirent_bad_dir,	0x0802, 8, 0,							\
	  "directory entry in an inode that is not a directory; delete it")		\
	x(dirent_type_wrong,	0x0803, 8, FSCK_SAFE,						\
	  "directory entry's file type differs from the inode's; correct it")		\
	x(dirent_misplaced,	0x0804, 8, FSCK_SAFE,						\
	  "directory entry not where its name hashes to (lookups miss it); re-hash it") \
	x(dirent_duplicate,	0x0805, 8, 0,							\
	  "two entries with the same name in a directory; delete the later one")	\
	x(dirent_to_root,	0x0806, 8, 0,							\
	  "directory entry names the root directory; delete it")			\
	x(xattr_no_inode,	0x0807, 8, 0,							\
	  "xattr of an inode that does not exist; delete it")				\
	x(xattr_misplaced,	0x0808, 8, FSCK_SAFE,						\
	  "xattr not where its name hashes to (lookups miss it); re-hash it")		\
	x(xattr_piece_missing,	0x0809, 8, 0,							\
	  "xattr value kept in pieces has a piece missing or damaged; delete the xattr") \
	x(xattr_piece_orphan,	0x080a, 8, FSCK_SAFE,						\
	  "xattr value piece that no xattr names (an interrupted change); delete it")	\
	x(dirent_subvol_dangling, 0x080b, 8, FSCK_SAFE | FSCK_MINOR,				\
	  "directory entry names a subvolume that does not exist (deleted after a "	\
	  "snapshot of its directory, or a delete cut short); delete it")		\
	x(root_missing,		0x0901, 9, 0,							\
	  "root directory missing or not a directory; create a new one")		\
	x(lost_found_missing,	0x0902, 9, FSCK_SAFE,						\
	  "lost+found missing; create it")						\
	x(dir_unreachable,	0x0903, 9, 0,							\
	  "directory not reachable from the root; move it to lost+found")		\
	x(dir_multiple_links,	0x0904, 9, 0,							\
	  "directory has more than one name; delete the extra entry")			\
	x(dir_loop,		0x0905, 9, 0,							\
	  "directories form a loop cut off from the root; move one to lost+found")	\
	x(inode_unreachable,	0x0906, 9, 0,							\
	  "file with links but no name; move it to lost+found")			\
	x(nlink_wrong,		0x0a01, 10, FSCK_SAFE,						\
	  "link count differs from the number of names; correct it")			\
	x(data_replica_bad,	0x0b01, 11, FSCK_SAFE,						\
	  "a copy of file data is bad (another copy is good); rewrite it (a cached "	\
	  "copy is dropped instead)")							\
	x(data_unreadable,	0x0b02, 11, FSCK_NOFIX,							\
	  "file data with no good copy (checksum or read errors)")			\
	x(stripe_data_bad,	0x0b03, 11, FSCK_SAFE,						\
	  "data block of an erasure-coded stripe is unreadable or fails its checksum; "	\
	  "rebuild it from the other blocks and write it back")				\
	x(stripe_parity_bad,	0x0b04, 11, FSCK_SAFE,						\
	  "parity block of an erasure-coded stripe is unreadable or differs from the "	\
	  "parity of its data; write the data's parity back")				\
	x(stripe_unrecoverable,	0x0b05, 11, FSCK_NOFIX,						\
	  "erasure-coded stripe with more bad blocks than parity blocks (or no block "	\
	  "checksums to tell which is bad): its blocks cannot be rebuilt")		\
	x(replicas_missing,	0x0c01, 12, FSCK_SAFE,						\
	  "superblock replicas table lacks a member set that keys use (a degraded "	\
	  "open would misjudge what is lost); add it")					\
	x(replicas_bad_member,	0x0c02, 12, FSCK_SAFE,						\
	  "superblock replicas entry names a member slot that is not a member; drop it") \
	x(replicas_unused,	0x0c03, 12, FSCK_SAFE,						\
	  "superblock replicas entry that no key uses (left by a crash before a gc "	\
	  "point; a degraded open would count its data as lost); drop it")

enum bch_fsck_problem {
#define x(n, ...)	BCH_FSCK_##n,
	BCH_FSCK_PROBLEMS()
#undef x
	BCH_FSCK_PROBLEM_NR
};

struct bch_fsck_problem_info {
	const char	*name;
	unsigned	number;
	unsigned	pass;
	unsigned	flags;
	const char	*msg;
};
extern const struct bch_fsck_problem_info bch_fsck_problems[BCH_FSCK_PROBLEM_NR];

enum bch_fsck_mode {
	BCH_FSCK_NO,		/* -n: report only, write nothing */
	BCH_FSCK_YES,		/* -y: repair everything */
	BCH_FSCK_PREEN,		/* -p: repair what is safe, report the rest */
	BCH_FSCK_ASK,		/* ask through the callback, per problem class */
};

/* The caller's answer to "fix this?" in ASK mode. */
enum bch_fsck_answer {
	BCH_FSCK_ANSWER_NO,
	BCH_FSCK_ANSWER_YES,
	BCH_FSCK_ANSWER_ALL,	/* yes, and to every later problem of this class */
	BCH_FSCK_ANSWER_NONE,	/* no, and to every later problem of this class */
	BCH_FSCK_ANSWER_QUIT,	/* cancel: stop checking */
};

struct bch_fsck_ctx {
	enum bch_fsck_mode	mode;
	bool			force;		/* -f: check even if clean */
	bool			verbose;
	bool			cancelled;	/* the user answered quit */
	bool			fatal;		/* a FSCK_FATAL problem was found */
	bool			degraded;	/* -o degraded: members may be missing (pass 1) */
	bool			stop;		/* a problem left that later passes cannot work
						 * around (pass 1: a member's superblock not
						 * rewritten): no further pass, no operational error */

	/*
	 * Report a problem: where (device, btree, position or path) and what.
	 * fix says what will happen (-1: ask, 0: left, 1: fixed, and
	 * BCH_FSCK_CANNOT_FIX: there is no repair here). In ASK mode the return
	 * value is the answer; otherwise it is ignored.
	 */
	enum bch_fsck_answer	(*report)(struct bch_fsck_ctx *ctx, enum bch_fsck_problem p,
					  const char *where, const char *detail, int fix);
	void			*priv;
	/* A pass begins (optional): for the "pass N: what" lines and progress. */
	void			(*progress)(struct bch_fsck_ctx *ctx, unsigned pass, const char *what);
	/* How far the current pass is, in percent (optional; for a terminal). */
	void			(*tick)(struct bch_fsck_ctx *ctx, unsigned percent);

	/* per problem: found, fixed; per-class answers remembered in ASK mode */
	uint64_t		found[BCH_FSCK_PROBLEM_NR];
	uint64_t		fixed[BCH_FSCK_PROBLEM_NR];
	signed char		class_answer[BCH_FSCK_PROBLEM_NR];	/* 0 ask, 1 yes, -1 no */

	char			err_msg[512];	/* why a pass could not go on (operational error) */

	/* pass 3: keys in the leaves read, per btree (sizes pass 5's tables) */
	uint64_t		leaf_keys[BCH_BTREE_ID_NR];
	/* pass 3: inode keys of directories (sizes the side table once) */
	uint64_t		dir_keys;

	/*
	 * pass 3 -> 12: the replicas entries the keys use (every node pointer,
	 * every extent key), gathered as pass 3 reads them all, so pass 12 need
	 * not read the extents again: taken while replicas_fs's table has seen
	 * no mark since (its mark count is still replicas_marks), and only the
	 * first FSCK_REPLICAS_GATHER distinct ones (more: not gathered).
	 */
#define FSCK_REPLICAS_GATHER	32
	struct {
		uint64_t	devs;
		uint8_t		data_type;
	}			replicas_used[FSCK_REPLICAS_GATHER];
	unsigned		replicas_nr;	/* > FSCK_REPLICAS_GATHER: too many */
	bool			replicas_gathered;
	const void		*replicas_fs;
	uint64_t		replicas_marks;
};

/*
 * Report one instance of problem p found at where (e.g. "disk.img: sector 8")
 * with an optional detail ("bad checksum").  Returns true when the pass should
 * repair it; the pass then calls bch_fsck_fixed() if the repair succeeded.
 */
bool bch_fsck_problem(struct bch_fsck_ctx *ctx, enum bch_fsck_problem p,
		      const char *where, const char *detail);
void bch_fsck_fixed(struct bch_fsck_ctx *ctx, enum bch_fsck_problem p);
/*
 * Report an instance of p that has no repair in this case although p may
 * have one (sb_none_valid with no good member): counted, fatal (fsck stops
 * after the pass), and reported with fix == BCH_FSCK_CANNOT_FIX.
 */
#define BCH_FSCK_CANNOT_FIX	(-2)
void bch_fsck_problem_unfixable(struct bch_fsck_ctx *ctx, enum bch_fsck_problem p,
				const char *where, const char *detail);

/* Totals over all problems (FSCK_MINOR ones not counted). */
uint64_t bch_fsck_nr_found(const struct bch_fsck_ctx *ctx);
uint64_t bch_fsck_nr_fixed(const struct bch_fsck_ctx *ctx);
/* Every repair made, FSCK_MINOR ones included (did this run change anything?). */
uint64_t bch_fsck_nr_repairs(const struct bch_fsck_ctx *ctx);

/*
 * Pass 1: superblocks.  Reads every copy (and the layout record) on every
 * device in paths, picks the newest valid superblock of the filesystem,
 * checks that the devices are exactly its members, and (when allowed)
 * rewrites damaged or stale copies, and every copy of a member device that
 * has none valid (fsck_super.c says how it is known which member it is;
 * not allowed, ctx->stop is set: the filesystem cannot be opened).  On success *sb_ret (may be NULL) is the
 * newest superblock, malloc'd.  Returns 0, or a negative error when the
 * filesystem cannot be checked further (no valid superblock, wrong devices,
 * I/O error); the problem was reported.
 */
struct bch_sb;
struct bch_fs;
int bch_fsck_superblocks(struct bch_fsck_ctx *ctx, char * const *paths, unsigned nr,
			 struct bch_sb **sb_ret);

/*
 * Pass 2: the journal, as read when the filesystem was opened for fsck
 * (entries are validated and replayed by the open; gaps are reported here).
 * The repair is the replay itself, made permanent when fsck closes.
 */
int bch_fsck_journal(struct bch_fsck_ctx *ctx, struct bch_fs *c);

/*
 * Passes 3 and 4: btree topology and keys (fsck_btree.c), on an open
 * filesystem (read-only with -n).  Damaged btrees are rebuilt from their
 * readable leaves when allowed.  *nodes_checked counts the nodes read.
 */
int bch_fsck_btrees(struct bch_fsck_ctx *ctx, struct bch_fs *c, uint64_t *nodes_checked);

/*
 * Pass 4, second half (fsck_snapshots.c), on a filesystem with snapshots:
 * the snapshot tree, the subvolumes (their leaves, root directories and
 * names), and the snapshots the keys of the file btrees lie in; keys of
 * deleted snapshots are freed (bch_snapshot_gc()) when repairing.  Run
 * after passes 3-4 found the btrees sound, before bch_fsck_files().
 */
int bch_fsck_snapshots(struct bch_fsck_ctx *ctx, struct bch_fs *c);

/*
 * Passes 5-10 (fsck_files_run.c): extent pointers, extents, inodes, dirents
 * and xattrs, directory structure, link counts; pass 11 (with data set)
 * reads every copy of every extent.  With snapshots, passes 5-10 run once
 * per subvolume, in its view (what it sees; repairs go into its snapshot);
 * pass 11 reads every key of every snapshot once.  Counts of what was
 * checked in *stats (summed over the views: a file two subvolumes see
 * counts twice).  When this run repaired anything (read-write), the
 * buckets of file data are then counted again from the extents as kept
 * (bch_alloc_btree_recount()), so the close writes counts the next run
 * agrees with.
 */
struct bch_fsck_file_stats {
	uint64_t	inodes, dirs, files, extents, dirents, xattrs, data_bytes;
};
int bch_fsck_files(struct bch_fsck_ctx *ctx, struct bch_fs *c, bool data,
		   struct bch_fsck_file_stats *stats);

/*
 * Pass 12 (fsck_replicas.c): the superblock's replicas table against what
 * the keys use (replicas.h).  Prints its heading (progress) only when it
 * finds something, so a clean run reads as before.
 */
int bch_fsck_replicas(struct bch_fsck_ctx *ctx, struct bch_fs *c);

/*
 * Shared extents (fsck_reflink.c), run by bch_fsck_files() before pass 5
 * when the reflink btree exists: reflink_p keys pointing at missing
 * indirect extents, refcounts, indirect extents nothing points at.
 */
int bch_fsck_reflink(struct bch_fsck_ctx *ctx, struct bch_fs *c);

/*
 * Erasure-coded stripes (fsck_ec.c), run by bch_fsck_files() after the
 * shared extents when the stripes btree exists: stripes with blocks out of
 * place, striped pointers into missing stripes, stripes nothing points into.
 */
int bch_fsck_ec(struct bch_fsck_ctx *ctx, struct bch_fs *c);
/*
 * Pass 11 (with -c), first (fsck_ec.c): every stripe read whole, its blocks
 * against their checksums and its parity against its data
 * (bch_ec_stripe_check()); bad blocks are rebuilt and written back, so the
 * extents read next find them good.  *left (malloc'd, or NULL) names the
 * stripes with more bad blocks than parity; after the extents (whose
 * repairs may leave few enough) bch_fsck_ec_data_after() checks those again
 * and repairs them (stripe_unrecoverable is then counted fixed), and frees
 * left; given an error r, it only frees left and returns r.
 */
struct bch_fsck_ec_left;
int bch_fsck_ec_data(struct bch_fsck_ctx *ctx, struct bch_fs *c, struct bch_fsck_ec_left **left);
int bch_fsck_ec_data_after(struct bch_fsck_ctx *ctx, struct bch_fs *c,
			   struct bch_fsck_ec_left *left, int r);

#endif /* _BCACHEFS_FSCK_H */
