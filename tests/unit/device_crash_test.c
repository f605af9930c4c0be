// SPDX-License-Identifier: GPL-2.0
/*
 * device_crash_test.c - power cuts during device add, remove (evacuate +
 * drop), evacuate, resize grow and resize shrink (issue 20, "Crash safety
 * and data"; the argument is in device.h's header).
 *
 * Each test formats three small image files, writes files of random
 * content (fixed seed, printed) and fsyncs them, then records every write
 * and flush of one operation, driven through the library calls the way
 * cmd_device.c's bodies drive them.  The operations close the filesystem
 * and open its members again by path, so the recorder follows the files
 * (iorec_follow()), not one handle.  Then for each cut point (every flush,
 * just before and just after it, and the writes between flushes with a
 * stride; SOAK=1: every event, two seeds) the crash images must:
 *   - open, with the member list as it was or as it became (or the latter
 *     with -o degraded while a member is being dropped), and every fsynced
 *     byte reads back;
 *   - pass fsck -n (superblocks, journal, btrees, files and data: pass 11)
 *     with no problem;
 *   - let the same operation run again to its end (a member added, gone,
 *     empty, or of the new size), after which fsck is clean and every byte
 *     still reads back.
 * A failure names the operation, cut index, seed and what failed, and the
 * plan (which writes landed); DEVICE_CRASH_AT=N checks only cut N (with
 * SOAK=1 both seeds), DEVICE_CRASH_KEEP=1 keeps the images of the last cut.
 * add_with_fs_node_size: device add plans the new member with the
 * filesystem's btree node size (a bug this test found, now fixed).
 * Known bugs of the code under test are listed in known_bugs[] (each is
 * reported, not failed, so the other cuts still run).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "bcachefs.h"
#include "blockdev.h"
#include "data_job.h"
#include "device.h"
#include "fs.h"
#include "fs_ops.h"
#include "fsck.h"
#include "opts.h"
#include "super.h"
#include "tests/lib/iorecord.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define NR_OLD		3		/* members before the operation */
#define NR_DEVS		4		/* recorded devices: + the one device add adds */
#define DEV_MB		8
#define NEW_DEV_MB	20		/* device add: see run_op() */
#define FILLER_BYTES	(5u << 20)	/* shrink: pushes the files past SHRINK_BUCKETS */
#define FILLER_PIECE	(256u << 10)
#define SHRINK_BUCKETS	90		/* of 127 (the least is about 72) */
#define NFILES		8
#define FILE_MAX	(192u << 10)
#define STEP_BYTES	(1ULL << 20)	/* data job budget per step (cmd_device.c: 4 MiB) */
#define SEED		20201u
#define MAX_CUTS	12		/* about, per operation under make check (SOAK=1: all) */

/* remove: the last member (2); remove-0: the first, holding the btree nodes too */
enum op { OP_ADD, OP_REMOVE, OP_EVACUATE, OP_GROW, OP_SHRINK, OP_REMOVE0 };
static const char * const op_names[] = { "add", "remove", "evacuate", "resize-grow", "resize-shrink",
					 "remove-0" };

static bool is_remove(enum op op)
{
	return op == OP_REMOVE || op == OP_REMOVE0;
}

struct world {
	enum op		op;
	char		tmpdir[64];
	char		img[NR_DEVS][TESTFS_PATH_MAX];	/* the recorded files */
	char		crash[NR_DEVS][TESTFS_PATH_MAX];	/* a cut's images */
	unsigned	nr_rec;		/* devices recorded */
	unsigned	target;		/* member index the operation is about */
	uint64_t	new_bytes;	/* resize */
	uint64_t	new_nbuckets;
	bool		on_crash;	/* running on the crash images (add: the new one is c3) */
	size_t		fsize[NFILES];
	unsigned char	*data[NFILES];
};

/*
 * A bug in the code under test found by this test: a cut in [from, to] is
 * reported, not failed; from == SIZE_MAX: the operation itself fails (even
 * uncut) and its test is skipped, saying why (DEVICE_CRASH_RUN_KNOWN=1 runs
 * it anyway: to check a fix).  Remove the entry with the fix.  Cut indices
 * are those of the recording as it is now (printed by SOAK=1 runs).
 */
struct known_bug {
	enum op		op;
	size_t		from, to;
	const char	*what;
};
#define RESIZE_UAF	"bch_dev_resize() reads the member entry (m->nbuckets, m->bucket_size: " \
			"device.c, 'the end copy moves') after close_clean() freed the filesystem " \
			"holding it: heap-use-after-free under ASan"
/*
 * Remove, cut between the drop's first new superblock copy (event 74) and
 * the flush of member 2's wipe (88): the old list opens (fs.c
 * open_devices() checks "is not a member" only for indexes below the newest
 * superblock's nr_devices, and dropping the top member lowers it), fsck
 * -n of that list finds sb_not_member, and the rerun finds member 2 gone,
 * so nothing ever wipes its superblocks.
 */
#define REMOVE_NOT_MEMBER "remove: a dropped top member's device still opens with the others " \
			"(open_devices() skips the not-a-member check past nr_devices); its " \
			"superblock is left for fsck to find as sb_not_member, and a rerun never wipes it"
static const struct known_bug known_bugs[] = {
	{ 0, 0, 0, NULL },
};

static const char *known(enum op op, size_t at)
{
	for (const struct known_bug *k = known_bugs; k->what; k++)
		if (k->op == op && k->from != SIZE_MAX && k->from <= at && at <= k->to)
			return k->what;
	return NULL;
}

/* ------------------------------------------------------------- helpers */

static char **list_dup(char (*p)[TESTFS_PATH_MAX], const unsigned *idx, unsigned n)
{
	char **l = calloc(n + 1, sizeof(*l));

	cr_assert(l);
	for (unsigned i = 0; i < n; i++)
		cr_assert((l[i] = strdup(p[idx[i]])));
	return l;
}

static void list_free(char **l)
{
	for (unsigned i = 0; l && l[i]; i++)
		free(l[i]);
	free(l);
}

static int fs_open(char **l, unsigned n, bool degraded, bool fsck, struct bch_fs **c,
		   char *err, size_t errlen)
{
	struct bch_opts o;

	memset(&o, 0, sizeof(o));
	if (degraded)
		bch_opt_set(&o, Opt_degraded, 1);
	if (fsck) {
		bch_opt_set(&o, Opt_fsck, 1);
		bch_opt_set(&o, Opt_read_only, 1);
	}
	*c = NULL;
	int r = bch_fs_open(l, n, &o, c, err, errlen);
	if (r)
		*c = NULL;
	return r;
}

/* NULL when every file reads back as written (all was fsynced). */
static const char *check_files(struct world *w, struct bch_fs *c, char *msg, size_t len)
{
	static unsigned char buf[FILE_MAX];

	for (unsigned f = 0; f < NFILES; f++) {
		char name[16];
		uint64_t inum;

		snprintf(name, sizeof(name), "f%u", f);
		if (bch_fs_lookup(c, BCH_ROOT_INO, name, &inum))
			return snprintf(msg, len, "%s: missing (%.200s)", name, c->err_msg), msg;
		ssize_t n = bch_fs_read(c, inum, 0, buf, w->fsize[f]);
		if (n != (ssize_t)w->fsize[f])
			return snprintf(msg, len, "%s: read %zd of %zu (%.200s)", name, n, w->fsize[f],
					c->err_msg), msg;
		for (size_t i = 0; i < w->fsize[f]; i++)
			if (buf[i] != w->data[f][i])
				return snprintf(msg, len, "%s: byte %zu reads %u, was written %u", name, i,
						buf[i], w->data[f][i]), msg;
	}
	return NULL;
}

/* fsck -n of the filesystem on l: no problem, files as written. */
static const char *fsck_clean(struct world *w, char **l, unsigned n, bool degraded, char *msg,
			      size_t len)
{
	struct bch_fsck_ctx *x = calloc(1, sizeof(*x));
	struct bch_fsck_file_stats st;
	const char *bad = NULL;
	struct bch_fs *c;
	uint64_t nodes;
	char err[256];

	cr_assert(x);
	x->mode = BCH_FSCK_NO;
	if (!degraded && bch_fsck_superblocks(x, l, n, NULL))
		bad = (snprintf(msg, len, "fsck superblocks: %.300s", x->err_msg), msg);
	for (unsigned q = 0; q < BCH_FSCK_PROBLEM_NR && !bad; q++)
		if (x->found[q])
			bad = (snprintf(msg, len, "fsck -n superblocks finds %s (%.300s)",
					bch_fsck_problems[q].name, x->err_msg), msg);
	for (unsigned q = 0; q < BCH_FSCK_PROBLEM_NR && bad; q++)
		if (x->found[q])
			snprintf(msg + strlen(msg), len - strlen(msg), " [%s]", bch_fsck_problems[q].name);
	if (!bad && fs_open(l, n, degraded, true, &c, err, sizeof(err)))
		bad = (snprintf(msg, len, "fsck open: %s", err), msg);
	if (!bad) {
		if (bch_fsck_journal(x, c) || bch_fsck_btrees(x, c, &nodes) ||
		    bch_fsck_files(x, c, true, &st))
			bad = (snprintf(msg, len, "fsck: %.300s", x->err_msg), msg);
		for (unsigned q = 0; q < BCH_FSCK_PROBLEM_NR && !bad; q++)
			if (x->found[q])
				bad = (snprintf(msg, len, "fsck -n finds %s (%.300s)",
						bch_fsck_problems[q].name, x->err_msg), msg);
		if (!bad)
			bad = check_files(w, c, msg, len);
		bch_fs_close(c);
	}
	free(x);
	return bad;
}

/* The member whose device is path, or -1. */
static int member_of(struct bch_fs *c, const char *path)
{
	struct stat a, b;

	if (stat(path, &a))
		return -1;
	for (unsigned i = 0; i < c->nr_devs; i++) {
		struct bch_dev *ca = c->devs[i];
		if (ca && ca->bdev && !fstat(bch_dev_fd(ca->bdev), &b) &&
		    a.st_dev == b.st_dev && a.st_ino == b.st_ino &&
		    bch_member_exists(bch_sb_member(c->sb, i)))
			return i;
	}
	return -1;
}

/* ------------------------------------------------ the operations, as cmd_device.c */

/* evacuate(): the checks and ro for a whole member, then the job to its end. */
static int evacuate(struct bch_fs *c, unsigned dev, uint64_t first_bucket, char *err, size_t errlen)
{
	struct bch_data_job j = { .kind = BCH_DATA_JOB_evacuate, .dev = dev,
				  .first_bucket = first_bucket };
	struct bch_dev_holdings h;
	int r;

	if (!first_bucket) {
		if ((r = bch_dev_remove_check(c, dev, false, false, &h, err, errlen)))
			return r;
		if (bch_sb_member(c->sb, dev)->state == BCH_MEMBER_STATE_rw &&
		    (r = bch_dev_set_state(c, dev, BCH_MEMBER_STATE_ro, true, err, errlen)))
			return r;
	}
	if ((r = bch_data_job_init(c, &j, err, errlen)))
		return r;
	while ((r = bch_data_job_step(c, &j, STEP_BYTES)) > 0)
		;
	if (r < 0)
		return snprintf(err, errlen, "job step: %s", c->err_msg), r;
	if (j.stuck)
		return snprintf(err, errlen, "%" PRIu64 " stuck: %s", j.stuck, j.problem), -EBUSY;
	return 0;
}

/*
 * Run w->op on *cp (member list *l of *n): the whole operation, or what is
 * left of it after a cut.  0 when it is done.
 */
static int run_op(struct world *w, struct bch_fs **cp, char ***l, unsigned *n, bool degraded,
		  char *err, size_t errlen)
{
	struct bch_opts o;
	uint64_t lost;
	int r;

	memset(&o, 0, sizeof(o));
	if (degraded)
		bch_opt_set(&o, Opt_degraded, 1);
	switch (w->op) {
	case OP_ADD: {
		const char *path = w->on_crash ? w->crash[NR_OLD] : w->img[NR_OLD];
		/*
		 * Bucket size left to add: it plans with the default node size
		 * (256k), not the filesystem's (4k), so 64k buckets are refused
		 * (a bug reported with this test) and the device must be larger.
		 */
		struct bch_dev_add_args a = { .path = path, .durability = 1, .durability_set = true };
		unsigned idx;
		if (member_of(*cp, path) >= 0)
			return 0;	/* added before the cut */
		return bch_dev_add(cp, l, n, &o, &a, &idx, err, errlen);
	}
	case OP_REMOVE:
	case OP_REMOVE0: {
		struct bch_member *m = bch_sb_member((*cp)->sb, w->target);
		if (!m || !bch_member_exists(m))
			return 0;	/* dropped before the cut */
		if ((r = evacuate(*cp, w->target, 0, err, errlen)))
			return r;
		return bch_dev_drop(cp, l, n, &o, w->target, false, &lost, err, errlen);
	}
	case OP_EVACUATE:
		return evacuate(*cp, w->target, 0, err, errlen);
	case OP_GROW:
	case OP_SHRINK: {
		struct bch_member *m = bch_sb_member((*cp)->sb, w->target);
		uint64_t nb = w->new_nbuckets;
		if (nb < m->nbuckets && nb > m->first_bucket) {
			bch_alloc_dev_set_limit(*cp, w->target, nb);
			if ((r = evacuate(*cp, w->target, nb, err, errlen)))
				return r;
		}
		return bch_dev_resize(cp, l, n, &o, w->target, w->new_bytes, err, errlen);
	}
	}
	return -EINVAL;
}

/* Is w->op done on c?  NULL, or what is missing. */
static const char *op_done(struct world *w, struct bch_fs *c, char *msg, size_t len)
{
	struct bch_member *m = bch_sb_member(c->sb, w->target);
	struct bch_dev_holdings h;

	switch (w->op) {
	case OP_ADD:
		if (member_of(c, w->on_crash ? w->crash[NR_OLD] : w->img[NR_OLD]) < 0)
			return snprintf(msg, len, "the new device is not a member"), msg;
		return NULL;
	case OP_REMOVE:
	case OP_REMOVE0:
		if (m && bch_member_exists(m))
			return snprintf(msg, len, "member %u is still there", w->target), msg;
		return NULL;
	case OP_EVACUATE:
		bch_dev_holdings(c, w->target, 0, &h);
		if (h.btree_sectors || h.user_sectors || m->state == BCH_MEMBER_STATE_rw)
			return snprintf(msg, len, "member %u holds %" PRIu64 "+%" PRIu64 " sectors, state %u",
					w->target, h.btree_sectors, h.user_sectors, m->state), msg;
		return NULL;
	case OP_GROW:
	case OP_SHRINK:
		if (m->nbuckets != w->new_nbuckets)
			return snprintf(msg, len, "member %u has %llu buckets, not %" PRIu64, w->target,
					(unsigned long long)m->nbuckets, w->new_nbuckets), msg;
		return NULL;
	}
	return "?";
}

/* ------------------------------------------------------------ one cut */

static void write_images(struct world *w, struct iorec *rec, const struct iorec_plan *plan,
			 size_t nev)
{
	for (unsigned d = 0; d < w->nr_rec; d++) {
		cr_assert_eq(iorec_write_image(rec, plan, d, w->crash[d]), 0);
		if (d != w->target)
			continue;
		/*
		 * The file's size is not a write: a grown file is as long as it
		 * became from the start (longer than its member is harmless);
		 * a shrunk one is cut to the new size once all is done.
		 */
		if (w->op == OP_GROW)
			cr_assert_eq(truncate(w->crash[d], w->new_bytes), 0);
		if (w->op == OP_SHRINK && plan->at == nev)
			cr_assert_eq(truncate(w->crash[d], w->new_bytes), 0);
	}
}

/* NULL when the cut at `at` (seed) passes; else what failed. */
static const char *check_cut(struct world *w, struct iorec *rec, size_t at, uint64_t seed,
			     char *msg, size_t len)
{
	struct iorec_cut cut = { .at = at, .seed = seed, .keep_pct = 50, .torn = true };
	struct iorec_plan plan;
	size_t nev = iorec_nr_events(rec);
	unsigned old[NR_OLD], nw[NR_DEVS], n_old = 0, n_new = 0;
	char err[512];
	const char *bad = NULL;

	cr_assert_eq(iorec_plan(rec, &cut, &plan), 0);
	w->on_crash = true;
	write_images(w, rec, &plan, nev);
	for (unsigned i = 0; i < NR_OLD; i++) {
		old[n_old++] = i;
		if (!is_remove(w->op) || i != w->target)
			nw[n_new++] = i;
	}
	if (w->op == OP_ADD)
		nw[n_new++] = NR_OLD;

	/* 1. it opens with one of the lists (as a mount after the crash would) */
	struct { unsigned *idx, n; bool degraded; } tries[] = {
		{ old, n_old, false }, { nw, n_new, false }, { nw, n_new, true },
	};
	char **l = NULL;
	unsigned n = 0;
	bool degraded = false;
	struct bch_fs *c = NULL;
	char errs[3][200] = { "", "", "" };
	for (unsigned t = 0; t < 3 && !c; t++) {
		if (t == 2 && !is_remove(w->op))
			break;
		if (t == 1 && w->op != OP_ADD && !is_remove(w->op))
			break;
		l = list_dup(w->crash, tries[t].idx, tries[t].n);
		n = tries[t].n;
		degraded = tries[t].degraded;
		if (fs_open(l, n, degraded, false, &c, err, sizeof(err))) {
			snprintf(errs[t], sizeof(errs[t]), "%.190s", err);
			list_free(l);
			l = NULL;
		}
	}
	if (!c) {
		bad = (snprintf(msg, len, "opens with no list: old: %s; new: %s; new degraded: %s",
				errs[0], errs[1], errs[2]), msg);
		goto out;
	}
	if ((bad = check_files(w, c, msg, len))) {
		bch_fs_close(c);
		goto out;
	}
	if (bch_fs_close(c)) {
		bad = (snprintf(msg, len, "close after open: %s", "failed"), msg);
		goto out;
	}

	/* 2. fsck -n is clean */
	if ((bad = fsck_clean(w, l, n, degraded, msg, len)))
		goto out;

	/* 3. the same operation again completes it; then fsck is clean */
	if (fs_open(l, n, degraded, false, &c, err, sizeof(err))) {
		bad = (snprintf(msg, len, "rerun open: %s", err), msg);
		goto out;
	}
	if (run_op(w, &c, &l, &n, degraded, err, sizeof(err))) {
		bad = (snprintf(msg, len, "rerun of %s: %s", op_names[w->op], err), msg);
		if (c)
			bch_fs_close(c);
		goto out;
	}
	if (!c) {
		bad = (snprintf(msg, len, "rerun left no filesystem open"), msg);
		goto out;
	}
	bad = op_done(w, c, msg, len);
	int cr = bch_fs_close(c);
	if (!bad && cr)
		bad = (snprintf(msg, len, "close after rerun failed"), msg);
	if (!bad)
		bad = fsck_clean(w, l, n, false, msg, len);
	if (bad) {
		memmove(msg + 13, msg, strlen(msg) + 1 < len - 13 ? strlen(msg) + 1 : len - 13);
		memcpy(msg, "after rerun: ", 13);
		msg[len - 1] = 0;
		bad = msg;
	}
out:
	list_free(l);
	if (bad) {
		char *desc = iorec_plan_describe(rec, &plan);
		cr_log_error("device_crash: %s: cut at event %zu of %zu, seed %" PRIu64 ": %s\n%s",
			     op_names[w->op], at, nev, seed, bad, desc ? desc : "");
		free(desc);
	}
	iorec_plan_free(&plan);
	return bad;
}

/* ------------------------------------------------------------ the test */

static void make_world(struct world *w, enum op op)
{
	char p[NR_OLD][TESTFS_PATH_MAX];

	memset(w, 0, sizeof(*w));
	w->op = op;
	w->target = op == OP_REMOVE0 ? 0 : 2;
	test_tmpdir_make(w->tmpdir, sizeof(w->tmpdir), "devcrash");
	testfs_format(w->tmpdir, NR_OLD, DEV_MB, 4096, 1, p);
	for (unsigned d = 0; d < NR_DEVS; d++) {
		if (d < NR_OLD)
			memcpy(w->img[d], p[d], TESTFS_PATH_MAX);
		else
			snprintf(w->img[d], TESTFS_PATH_MAX, "%s/d%u.img", w->tmpdir, d);
		snprintf(w->crash[d], TESTFS_PATH_MAX, "%s/c%u.img", w->tmpdir, d);
	}
	w->nr_rec = op == OP_ADD ? NR_DEVS : NR_OLD;
	srandom(SEED + op);
	for (unsigned f = 0; f < NFILES; f++) {
		w->fsize[f] = (32u << 10) + random() % (FILE_MAX - (32u << 10) + 1);
		cr_assert((w->data[f] = malloc(w->fsize[f])));
		for (size_t i = 0; i < w->fsize[f]; i++)
			w->data[f][i] = random();
	}
}

static void free_world(struct world *w)
{
	for (unsigned f = 0; f < NFILES; f++)
		free(w->data[f]);
	if (getenv("DEVICE_CRASH_KEEP"))
		fprintf(stderr, "device_crash: images kept in %s\n", w->tmpdir);
	else
		test_tmpdir_remove(w->tmpdir);
}

static void crash_test(enum op op)
{
	struct world *w;
	unsigned all[NR_OLD] = { 0, 1, 2 };
	char err[512];
	struct bch_fs *c;
	bool soak = getenv("SOAK");

	for (const struct known_bug *k = known_bugs; k->what && !getenv("DEVICE_CRASH_RUN_KNOWN"); k++)
		if (k->op == op && k->from == SIZE_MAX)
			cr_skip_test("%s: known bug: %s", op_names[op], k->what);
	w = malloc(sizeof(*w));
	cr_assert(w);
	make_world(w, op);
	fprintf(stderr, "device_crash: %s: seed %u\n", op_names[op], SEED + op);

	/* files written and fsynced: every byte of them must survive */
	char **l = list_dup(w->img, all, NR_OLD);
	unsigned n = NR_OLD;
	cr_assert_eq(fs_open(l, n, false, false, &c, err, sizeof(err)), 0, "%s", err);
	/* the first half only on the target (the others read-only meanwhile) */
	for (unsigned d = 0; d < NR_OLD; d++)
		if (d != w->target)
			cr_assert_eq(bch_dev_set_state(c, d, BCH_MEMBER_STATE_ro, true, err, sizeof(err)), 0,
				     "%s", err);
	if (op == OP_SHRINK) {
		/* a filler first, deleted after: the files land near the end of the target */
		uint64_t inum;
		unsigned char *z = calloc(1, FILLER_BYTES);
		cr_assert(z);
		for (size_t i = 0; i < FILLER_BYTES; i++)
			z[i] = i * 131 + (i >> 9);
		/* in pieces: unlinking one 5 MiB file is "transaction too big" */
		for (unsigned k = 0; k < FILLER_BYTES / FILLER_PIECE; k++) {
			char name[16];
			snprintf(name, sizeof(name), "filler%u", k);
			cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &inum), 0);
			cr_assert_eq(bch_fs_write(c, inum, 0, z + k * FILLER_PIECE, FILLER_PIECE),
				     (ssize_t)FILLER_PIECE);
		}
		cr_assert_eq(bch_fs_fsync(c), 0);
		free(z);
	}
	for (unsigned f = 0; f < NFILES; f++) {
		char name[16];
		uint64_t inum;
		if (f == NFILES / 2)
			for (unsigned d = 0; d < NR_OLD; d++)
				cr_assert_eq(bch_dev_set_state(c, d, BCH_MEMBER_STATE_rw, true, err,
							       sizeof(err)), 0, "%s", err);
		snprintf(name, sizeof(name), "f%u", f);
		cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &inum), 0);
		cr_assert_eq(bch_fs_write(c, inum, 0, w->data[f], w->fsize[f]), (ssize_t)w->fsize[f]);
		cr_assert_eq(bch_fs_fsync(c), 0);
	}

	if (op == OP_SHRINK) {
		for (unsigned k = 0; k < FILLER_BYTES / FILLER_PIECE; k++) {
			char name[16];
			snprintf(name, sizeof(name), "filler%u", k);
			int ur = bch_fs_unlink(c, BCH_ROOT_INO, name);
			cr_assert_eq(ur, 0, "unlink %s: %d %s", name, ur, c->err_msg);
		}
		cr_assert_eq(bch_fs_fsync(c), 0);
	}

	/* the operation's parameters */
	struct bch_member *m = bch_sb_member(c->sb, w->target);
	uint64_t sb_area = 1ULL << BCH_SB_MAX_SIZE_BITS;
	struct bch_dev_holdings h;
	bch_dev_holdings(c, w->target, 0, &h);
	fprintf(stderr, "device_crash: %s: member %u holds %" PRIu64 " btree, %" PRIu64
		" user sectors, %" PRIu64 " buckets used of %llu\n", op_names[op], w->target,
		h.btree_sectors, h.user_sectors, h.buckets_used, (unsigned long long)m->nbuckets);
	if (is_remove(op) || op == OP_EVACUATE)
		cr_assert(h.user_sectors, "member %u holds no file data: nothing would move", w->target);
	if (op == OP_GROW)
		w->new_nbuckets = m->nbuckets + m->nbuckets / 2;
	if (op == OP_SHRINK) {
		w->new_nbuckets = SHRINK_BUCKETS;
		bch_dev_holdings(c, w->target, w->new_nbuckets, &h);
		fprintf(stderr, "device_crash: shrink to %" PRIu64 " buckets: %" PRIu64 "+%" PRIu64
			" sectors past the new end\n", w->new_nbuckets, h.btree_sectors, h.user_sectors);
		cr_assert(h.user_sectors, "no data past the new end: nothing would move");
	}
	if (op == OP_GROW || op == OP_SHRINK)
		w->new_bytes = (w->new_nbuckets * m->bucket_size + sb_area) << 9;

	/* record the operation, following the files through its reopens */
	struct iorec *rec = iorec_new(w->nr_rec);
	cr_assert(rec);
	for (unsigned d = 0; d < NR_OLD; d++) {
		int i = member_of(c, w->img[d]);
		cr_assert_geq(i, 0);
		cr_assert_eq(iorec_attach(rec, d, c->devs[i]->bdev), 0);
		cr_assert_eq(iorec_follow(rec, d, w->img[d]), 0);
	}
	if (op == OP_ADD) {
		struct bch_blockdev *bd;
		cr_assert_eq(bch_dev_open(w->img[NR_OLD], BCH_DEV_CREATE, &bd), 0);
		cr_assert_eq(bch_dev_set_size(bd, (uint64_t)NEW_DEV_MB << 20), 0);
		cr_assert_eq(iorec_attach(rec, NR_OLD, bd), 0);
		cr_assert_eq(iorec_follow(rec, NR_OLD, w->img[NR_OLD]), 0);
		bch_dev_close(bd);
	}
	int r = run_op(w, &c, &l, &n, false, err, sizeof(err));
	cr_assert_eq(r, 0, "%s: %s", op_names[op], err);
	cr_assert(c);
	char msg[1024];
	cr_assert_null(op_done(w, c, msg, sizeof(msg)), "%s: %s", op_names[op], msg);
	cr_assert_eq(bch_fs_close(c), 0);
	iorec_unfollow(rec);
	list_free(l);

	/* the cuts: around every flush, and the writes between them */
	size_t nev = iorec_nr_events(rec), nflush = 0;
	for (size_t i = 0; i < nev; i++)
		nflush += iorec_event(rec, i)->type == IOREC_FLUSH;
	bool *cut_at = calloc(nev + 1, sizeof(*cut_at));
	cr_assert(cut_at);
	size_t wstride = soak ? 1 : nev / (MAX_CUTS / 2) + 1;
	size_t fstride = soak ? 1 : nflush / (MAX_CUTS / 4) + 1;
	for (size_t at = 0, f = 0; at <= nev; at++) {
		if (soak || at % wstride == wstride / 2 || at == nev)
			cut_at[at] = true;
		if (at < nev && iorec_event(rec, at)->type == IOREC_FLUSH && f++ % fstride == fstride / 2)
			cut_at[at] = cut_at[at + 1] = true;	/* just before and just after it */
	}
	for (const struct known_bug *k = known_bugs; k->what; k++)	/* shown every run */
		if (k->op == op && k->from != SIZE_MAX && (k->from + k->to) / 2 <= nev)
			cut_at[(k->from + k->to) / 2] = true;
	if (getenv("DEVICE_CRASH_AT")) {	/* one cut only: to look at a failure */
		size_t only = strtoull(getenv("DEVICE_CRASH_AT"), NULL, 10);
		for (size_t at = 0; at <= nev; at++)
			cut_at[at] = at == only;
	}
	unsigned checked = 0, failed = 0, known_failed = 0, seeds = soak ? 2 : 1;
	for (size_t at = 0; at <= nev; at++) {
		if (!cut_at[at])
			continue;
		for (unsigned s = 0; s < seeds; s++) {
			uint64_t seed = SEED + op * 1000003ULL + at * 7919 + s;
			const char *bad = check_cut(w, rec, at, seed, msg, sizeof(msg));
			checked++;
			if (bad && known(op, at)) {
				cr_log_warn("device_crash: %s: cut %zu: the known bug: %s", op_names[op], at,
					    known(op, at));
				known_failed++;
			}
			else if (bad)
				failed++;
		}
	}
	fprintf(stderr, "device_crash: %s: %zu events (%zu flushes), %u cuts checked, %u failed, "
		"%u known bugs\n", op_names[op], nev, nflush, checked, failed, known_failed);
	free(cut_at);
	iorec_free(rec);
	free_world(w);
	free(w);
	cr_assert_eq(failed, 0, "%s: %u of %u cuts failed (see the log above)", op_names[op], failed,
		     checked);
}

/*
 * Not a cut: device add of a device with the filesystem's bucket size must
 * be accepted.  bch_dev_add() plans the member with c->opts, whose
 * btree_node_size is the default (256k: fs.c copies only OPT_FS options
 * from the superblock), not the filesystem's 4k, and refuses 64k buckets.
 */
Test(device_crash, add_with_fs_node_size)
{
	char dir[64], p[1][TESTFS_PATH_MAX], nd[TESTFS_PATH_MAX], err[512];
	struct bch_blockdev *bd;
	struct bch_fs *c;
	unsigned idx;

	test_tmpdir_make(dir, sizeof(dir), "devnode");
	testfs_format(dir, 1, DEV_MB, 4096, 1, p);
	snprintf(nd, sizeof(nd), "%s/new.img", dir);
	cr_assert_eq(bch_dev_open(nd, BCH_DEV_CREATE, &bd), 0);
	cr_assert_eq(bch_dev_set_size(bd, (uint64_t)DEV_MB << 20), 0);
	bch_dev_close(bd);
	char **l = calloc(2, sizeof(*l));
	cr_assert(l && (l[0] = strdup(p[0])));
	unsigned n = 1;
	cr_assert_eq(fs_open(l, n, false, false, &c, err, sizeof(err)), 0, "%s", err);
	struct bch_dev_add_args a = { .path = nd, .durability = 1, .durability_set = true,
				      .bucket_size = 64 << 10 };
	int r = bch_dev_add(&c, &l, &n, NULL, &a, &idx, err, sizeof(err));
	cr_expect_eq(r, 0, "device add, 64k buckets, 4k nodes: %s", err);
	cr_expect_eq(n, 2);
	if (c)
		bch_fs_close(c);
	list_free(l);
	test_tmpdir_remove(dir);
}

Test(device_crash, add, .timeout = 900) { crash_test(OP_ADD); }
Test(device_crash, remove, .timeout = 900) { crash_test(OP_REMOVE); }
Test(device_crash, remove_first, .timeout = 900) { crash_test(OP_REMOVE0); }
Test(device_crash, evacuate, .timeout = 900) { crash_test(OP_EVACUATE); }
Test(device_crash, resize_grow, .timeout = 900) { crash_test(OP_GROW); }
Test(device_crash, resize_shrink, .timeout = 900) { crash_test(OP_SHRINK); }
