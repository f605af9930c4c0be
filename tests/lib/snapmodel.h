/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCH_TEST_SNAPMODEL_H
#define _BCH_TEST_SNAPMODEL_H

/*
 * snapmodel.h - a model of subvolumes and snapshots for tests: random file
 * operations (create, mkdir, write, truncate, punch, unlink, rmdir,
 * rename within a subvolume, xattrs) interleaved with snapshots of random live
 * subvolumes (nested, some read-only) and deletions in random order, run
 * on a filesystem and on an in-memory copy of every live subvolume's tree.
 *
 * Layout: subvolume 0 holds only names: "work" (an empty subvolume made by
 * sm_init()) and "s<N>" for each snapshot, all in its root directory.  The
 * model's subvolumes are "work" and the snapshots; subvolume 0 is never
 * snapshotted, so no compared tree holds a subvolume's name.
 *
 * File data is shared between a tree and its snapshot copies until one of
 * them writes (copy on write, reference counted), so a snapshot of the
 * model costs what the tree's metadata costs, as on disk.
 *
 * Randomness comes from the model's own generator (seeded by sm_init()),
 * not random(): the library and libuuid may draw from random().
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bch_fs;

#define SM_BLOCK	4096
#define SM_MAX_FILE	(512 << 10)
#define SM_NBLK		(SM_MAX_FILE / SM_BLOCK)
#define SM_NX		3		/* xattr names user.x0 .. user.x2 */
#define SM_XMAX		3000		/* longest xattr value (long ones go in pieces) */
#define SM_PATH		64

struct sm_blob {
	unsigned	ref;
	bool		hashed;
	uint64_t	hash;		/* of the first hsize bytes, when hashed */
	size_t		hsize;
	size_t		cap;		/* bytes in b; those past the file's size are zero */
	unsigned char	*b;
};

struct sm_node {
	char		path[SM_PATH];	/* from the subvolume's root: "d0/n1" */
	bool		dir;
	size_t		size;
	struct sm_blob	*data;		/* NULL: every byte zero */
	uint64_t	alloc[SM_NBLK / 64];	/* blocks written and not truncated away */
	bool		xset[SM_NX];
	uint16_t	xlen[SM_NX];
	unsigned char	*xval[SM_NX];
};

struct sm_tree {
	unsigned	nr, cap;
	struct sm_node	*n;
};

struct sm_sub {
	uint32_t	id;		/* subvolume ID (handle's top bits) */
	uint64_t	root;		/* handle of its root */
	bool		ro;
	char		name[16];	/* its name in subvolume 0's root */
	struct sm_tree	t;
};

/* Workload knobs: the defaults suit a model test; crash tests restrict. */
struct sm_opts {
	size_t		max_file;	/* files stay below this (<= SM_MAX_FILE) */
	bool		aligned_truncate; /* truncates to block multiples only, no punches
					     or collapse/insert ranges (crash tests: each
					     operation one transaction) */
	unsigned	max_subs;	/* live subvolumes at most */
	unsigned	pct_snapshot;	/* chance per step of a snapshot */
	unsigned	pct_delete;	/* of a deletion */
	unsigned	pct_gc;		/* of bch_snapshot_gc() */
	unsigned	pct_ro;		/* chance a snapshot is read-only */
};

#define SM_SUBS_MAX	64

struct sm {
	struct bch_fs	*c;
	unsigned	seed;
	uint64_t	rng;
	struct sm_opts	o;
	unsigned	step;
	unsigned	nr;		/* live subvolumes */
	struct sm_sub	sub[SM_SUBS_MAX];
	unsigned	next_name;
	unsigned char	*buf, *buf2;	/* SM_MAX_FILE + 64 KiB each */
	bool		gc_had_work;	/* the last sm_gc() found deleted snapshots */
	/* counts, for the log */
	unsigned	nr_ops, nr_snaps, nr_ro_snaps, nr_deletes, nr_gc, nr_ro_refused;
};

/* What sm_step() did. */
enum sm_kind {
	SM_CREATE, SM_MKDIR, SM_WRITE, SM_TRUNCATE, SM_UNLINK, SM_RMDIR, SM_RENAME,
	SM_SETXATTR, SM_RMXATTR, SM_PUNCH, SM_SHIFT, SM_SNAPSHOT, SM_DELETE, SM_GC, SM_NOP,
};
extern const char *const sm_kind_names[];

/* Fill in the defaults for a model test. */
void sm_opts_default(struct sm_opts *o);

/*
 * Start the model on c (a fresh filesystem): make subvolume "work" in the
 * root.  Fails the test on error.
 */
void sm_init(struct sm *m, struct bch_fs *c, unsigned seed, const struct sm_opts *o);
void sm_free(struct sm *m);

uint64_t sm_rand(struct sm *m);

/*
 * One random step on the filesystem and the model (the model changes only
 * when the filesystem's call succeeds as the model says it must; any other
 * result fails the test).  Returns what it did.
 */
enum sm_kind sm_step(struct sm *m);

/* A snapshot of sub (index) named in subvolume 0's root: the model's new index. */
unsigned sm_snapshot(struct sm *m, unsigned src, bool ro);
/* Delete the subvolume at index i (model and filesystem). */
void sm_delete(struct sm *m, unsigned i);
/* bch_snapshot_gc(); the keys it freed.  Sets gc_had_work. */
uint64_t sm_gc(struct sm *m);

/*
 * Every change tried on each read-only subvolume must fail with -EROFS
 * (create, mkdir, write, truncate, unlink, rename, setxattr, removexattr,
 * chmod, a snapshot named inside it).  Fails the test otherwise.
 */
void sm_ro_probe(struct sm *m);

/*
 * Refusals around subvolumes, on random live ones: unlink, rmdir (-EPERM)
 * and rename (-EBUSY) of a subvolume's name; a snapshot over an existing
 * name (-EEXIST) or of a directory that is not a subvolume's root
 * (-EINVAL); a link or rename across subvolumes (-EXDEV).
 */
void sm_refusal_probe(struct sm *m);

/*
 * The tree of the subvolume rooted at handle root on c against t: names,
 * types, sizes, contents and xattrs.  NULL when equal, else a message in
 * msg.  *inos (may be NULL) gets every st_ino seen, *nr_inos counts them
 * (the caller gives room for SM_INOS_MAX).
 */
#define SM_INOS_MAX	4096
const char *sm_compare(struct bch_fs *c, uint64_t root, const struct sm_tree *t, uint64_t *inos,
		       unsigned *nr_inos, char *msg, size_t len);

/*
 * Every live subvolume against the model (fails the test with seed and
 * step), subvolume IDs and read-only flags as the library lists them, and
 * st_ino unique across all of them.
 */
void sm_check(struct sm *m, const char *when);

/* A digest of a tree: the model's, and the filesystem's (0 and -errno on failure). */
uint64_t sm_tree_digest(const struct sm_tree *t);
int sm_fs_digest(struct bch_fs *c, uint64_t root, uint64_t *digest, char *msg, size_t len);

/*
 * Write the files and directories of t into directory dir of c as plain
 * files, each file's data only over its blocks the model says were written
 * (so the same blocks are allocated).
 */
void sm_tree_build(struct bch_fs *c, uint64_t dir, const struct sm_tree *t);

/* A copy of src sharing its file data (copy on write). */
void sm_tree_copy(struct sm_tree *dst, const struct sm_tree *src);
void sm_tree_free(struct sm_tree *t);

#endif
