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

/*
 * x(name, number, pass, flags, message)
 *   flags: FSCK_SAFE  repaired by -p (preen) without asking
 *          FSCK_FATAL cannot be repaired; fsck stops after this pass
 */
#define FSCK_SAFE	(1U << 0)
#define FSCK_FATAL	(1U << 1)

#define BCH_FSCK_PROBLEMS()									\
	x(sb_copy_bad,		0x0101, 1, FSCK_SAFE,						\
	  "superblock copy is damaged; rewrite it from the newest valid copy")		\
	x(sb_copy_stale,	0x0102, 1, FSCK_SAFE,						\
	  "superblock copy is older than the newest valid copy; rewrite it")		\
	x(sb_layout_bad,	0x0103, 1, FSCK_SAFE,						\
	  "superblock layout record is damaged; rewrite it")				\
	x(sb_none_valid,	0x0104, 1, FSCK_FATAL,						\
	  "no valid superblock copy on the device")					\
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
	x(btree_node_unreadable, 0x0301, 3, 0,							\
	  "btree node cannot be read; rebuild the btree from the readable leaves "	\
	  "(the keys of this node are lost)")						\
	x(btree_topology,	0x0302, 3, 0,							\
	  "btree node's children do not cover its range; rebuild the btree")		\
	x(btree_replica_bad,	0x0303, 3, FSCK_SAFE,						\
	  "a copy of a btree node is bad (another one was read); rewrite the node")

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

	/*
	 * Report a problem: where (device, btree, position or path) and what.
	 * fix says what will happen (-1: ask, 0: left, 1: fixed). In ASK mode
	 * the return value is the answer; otherwise it is ignored.
	 */
	enum bch_fsck_answer	(*report)(struct bch_fsck_ctx *ctx, enum bch_fsck_problem p,
					  const char *where, const char *detail, int fix);
	void			*priv;

	/* per problem: found, fixed; per-class answers remembered in ASK mode */
	uint64_t		found[BCH_FSCK_PROBLEM_NR];
	uint64_t		fixed[BCH_FSCK_PROBLEM_NR];
	signed char		class_answer[BCH_FSCK_PROBLEM_NR];	/* 0 ask, 1 yes, -1 no */

	char			err_msg[512];	/* why a pass could not go on (operational error) */
};

/*
 * Report one instance of problem p found at where (e.g. "disk.img: sector 8")
 * with an optional detail ("bad checksum").  Returns true when the pass should
 * repair it; the pass then calls bch_fsck_fixed() if the repair succeeded.
 */
bool bch_fsck_problem(struct bch_fsck_ctx *ctx, enum bch_fsck_problem p,
		      const char *where, const char *detail);
void bch_fsck_fixed(struct bch_fsck_ctx *ctx, enum bch_fsck_problem p);

/* Totals over all problems. */
uint64_t bch_fsck_nr_found(const struct bch_fsck_ctx *ctx);
uint64_t bch_fsck_nr_fixed(const struct bch_fsck_ctx *ctx);

/*
 * Pass 1: superblocks.  Reads every copy (and the layout record) on every
 * device in paths, picks the newest valid superblock of the filesystem,
 * checks that the devices are exactly its members, and (when allowed)
 * rewrites damaged or stale copies.  On success *sb_ret (may be NULL) is the
 * newest superblock, malloc'd.  Returns 0, or a negative error when the
 * filesystem cannot be checked further (no valid superblock, wrong devices,
 * I/O error); the problem was reported.
 */
struct bch_sb;
struct bch_fs;
int bch_fsck_superblocks(struct bch_fsck_ctx *ctx, char * const *paths, unsigned nr,
			 struct bch_sb **sb_ret);

/*
 * Passes 3 and 4: btree topology and keys (fsck_btree.c), on an open
 * filesystem (read-only with -n).  Damaged btrees are rebuilt from their
 * readable leaves when allowed.  *nodes_checked counts the nodes read.
 */
int bch_fsck_btrees(struct bch_fsck_ctx *ctx, struct bch_fs *c, uint64_t *nodes_checked);

#endif /* _BCACHEFS_FSCK_H */
