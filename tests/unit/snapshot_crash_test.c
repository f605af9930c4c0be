// SPDX-License-Identifier: GPL-2.0
/*
 * snapshot_crash_test.c - power cuts during the snapshot model's workload
 * (issue 30, "Tests"; tests/lib/snapmodel.h): file operations in random
 * subvolumes, snapshots of random live ones (nested, some read-only),
 * deletions and snapshot gc, recorded with the write recorder
 * (tests/lib/iorecord.h) and cut after every write and every flush, with
 * half the unflushed writes surviving and one torn.  Each image must open (journal replay) and show,
 * over all live subvolumes at once (their names in subvolume 0's root, IDs,
 * read-only flags and trees), exactly the model's state after some
 * operation at or after the last one that was durable when power went:
 * snapshot create and delete commit synchronously, so a snapshot whose
 * create returned is there and intact, one whose delete returned is gone,
 * and nothing is half done.  The recorded run itself is checked against
 * the model after every operation.  fsck -n finds nothing (the btrees while
 * several snapshots live, the files too once one is left), a clean close
 * and reopen keeps the state, and snapshot gc then finishes any deletion
 * the cut left half done without changing what a subvolume shows (on a
 * sample of the cuts).
 *
 * Every operation is one transaction here: files stay under 1 MiB, so a
 * write is one chunk, and truncates are block-aligned (fs_ops.h: large
 * operations commit in pieces), and there are no hole punches.  Seeds
 * are printed (SEED= repeats one); SOAK=1 records a longer workload.
 *
 * A filesystem that fails to open after a cut fails the test (counted, the
 * first message printed) and is then checked opened for fsck, so that one
 * open bug does not hide the others.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bcachefs.h"
#include "bcachefs_format.h"
#include "btree.h"
#include "fs.h"
#include "fs_ops.h"
#include "fsck.h"
#include "opts.h"
#include "snapshot.h"
#include "tests/lib/iorecord.h"
#include "tests/lib/snapmodel.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define SOAK		(getenv("SOAK") != NULL)
/*
 * Cut after every flush, and after every CUT_EVERY-th other event: 1, every
 * write (about 0.1 s a cut under ASan: an image, an open with replay, a walk
 * of every subvolume; a clean reopen and fsck on every 8th).  A larger
 * value samples by event index, so runs stay comparable.
 */
#define CUT_EVERY	1

static char tmpdir[64];
static char paths[1][TESTFS_PATH_MAX], crash[1][TESTFS_PATH_MAX];

/* The state of every live subvolume after an operation. */
struct sub_state {
	char		name[16];
	uint32_t	id;
	bool		ro;
	uint64_t	digest;
};
struct state {
	unsigned	nr;
	struct sub_state s[SM_SUBS_MAX];
	struct sm_tree	*trees;		/* the model's trees, in m->sub order, for messages */
	char		(*names)[16];
	unsigned	nr_trees;
};

static int sub_state_cmp(const void *a, const void *b)
{
	return strcmp(((const struct sub_state *)a)->name, ((const struct sub_state *)b)->name);
}

static void model_state(struct sm *m, struct state *st)
{
	st->nr = m->nr;
	st->nr_trees = m->nr;
	st->trees = calloc(m->nr + 1, sizeof(*st->trees));
	st->names = calloc(m->nr + 1, sizeof(*st->names));
	cr_assert(st->trees && st->names);
	for (unsigned i = 0; i < m->nr; i++) {
		sm_tree_copy(&st->trees[i], &m->sub[i].t);
		snprintf(st->names[i], 16, "%s", m->sub[i].name);
	}
	for (unsigned i = 0; i < m->nr; i++) {
		struct sub_state *s = &st->s[i];
		memset(s, 0, sizeof(*s));
		snprintf(s->name, sizeof(s->name), "%s", m->sub[i].name);
		s->id = m->sub[i].id;
		s->ro = m->sub[i].ro;
		s->digest = sm_tree_digest(&m->sub[i].t);
	}
	qsort(st->s, st->nr, sizeof(st->s[0]), sub_state_cmp);
}

struct root_names {
	struct state	*st;
	int		err;
};

static int root_fn(void *priv, const char *name, size_t len, uint64_t inum, unsigned d_type, uint64_t next)
{
	struct root_names *rn = priv;
	(void)d_type; (void)next;

	if ((len == 1 && name[0] == '.') || (len == 2 && !memcmp(name, "..", 2)) ||
	    (len == 10 && !memcmp(name, "lost+found", 10)))
		return 0;
	if (rn->st->nr == SM_SUBS_MAX || len >= sizeof(rn->st->s[0].name))
		return rn->err = -E2BIG;
	struct sub_state *s = &rn->st->s[rn->st->nr++];
	memset(s, 0, sizeof(*s));
	memcpy(s->name, name, len);
	s->id = bch_handle_subvol(inum);
	s->digest = inum;		/* the root's handle, for now */
	return 0;
}

/* The state the filesystem shows: NULL, or what is wrong in msg. */
static const char *fs_state(struct bch_fs *c, struct state *st, char *msg, size_t len)
{
	struct root_names rn = { st, 0 };
	int r;

	st->nr = 0;
	if ((r = bch_fs_readdir(c, BCH_ROOT_INO, 0, root_fn, &rn)) || (r = rn.err))
		return snprintf(msg, len, "readdir of the root: %d (%s)", r, strerror(-r)), msg;
	unsigned n;
	bch_subvols(c, &n);
	if (n != st->nr + 1)
		return snprintf(msg, len, "%u subvolumes listed, %u named in the root and subvolume 0", n,
				st->nr), msg;
	for (unsigned i = 0; i < st->nr; i++) {
		struct sub_state *s = &st->s[i];
		uint64_t root = s->digest;
		const struct bch_subvol_info *si = bch_subvol_get(c, s->id);
		if (!s->id || !si)
			return snprintf(msg, len, "/%s names subvolume %u, not listed", s->name, s->id), msg;
		s->ro = si->v.flags & BCH_SUBVOL_RO;
		if ((r = sm_fs_digest(c, root, &s->digest, msg, len)))
			return msg;
	}
	qsort(st->s, st->nr, sizeof(st->s[0]), sub_state_cmp);
	return NULL;
}

static bool state_eq(const struct state *a, const struct state *b)
{
	return a->nr == b->nr && !memcmp(a->s, b->s, sizeof(a->s[0]) * a->nr);
}

static void state_free(struct state *st)
{
	for (unsigned i = 0; i < st->nr_trees; i++)
		sm_tree_free(&st->trees[i]);
	free(st->trees);
	free(st->names);
}

/* How each subvolume found differs from the model's tree after op k (stderr). */
static void explain(struct bch_fs *c, const struct state *found, const struct state *st, unsigned k)
{
	char msg[512];
	for (unsigned i = 0; i < found->nr; i++) {
		unsigned j = 0;
		while (j < st->nr_trees && strcmp(st->names[j], found->s[i].name))
			j++;
		if (j == st->nr_trees) {
			fprintf(stderr, "  after op %u: %s is not in the model\n", k, found->s[i].name);
			continue;
		}
		const struct bch_subvol_info *si = bch_subvol_get(c, found->s[i].id);
		if (!si)
			continue;
		const char *bad = sm_compare(c, bch_handle(si->id, si->v.root_inum), &st->trees[j], NULL, NULL,
					     msg, sizeof(msg));
		fprintf(stderr, "  after op %u: %s: %s\n", k, found->s[i].name, bad ? bad : "equal");
	}
}

static void state_describe(const struct state *st, char *buf, size_t len)
{
	size_t n = 0;
	buf[0] = 0;
	for (unsigned i = 0; i < st->nr && n < len; i++)
		n += snprintf(buf + n, len - n, " %s(%u%s %016lx)", st->s[i].name, st->s[i].id,
			      st->s[i].ro ? " ro" : "", (unsigned long)st->s[i].digest);
}

static void fsck_clean(struct bch_fs *c, unsigned seed, size_t at)
{
	struct bch_fsck_ctx *n = calloc(1, sizeof(*n));
	struct bch_fsck_file_stats fst;
	uint64_t nodes;

	cr_assert(n);
	n->mode = BCH_FSCK_NO;
	cr_assert_eq(bch_fsck_btrees(n, c, &nodes), 0, "seed %u cut %zu: fsck: %s", seed, at, n->err_msg);
	/* the files passes check one snapshot only (cmd_fsck.c skips them with more) */
	if (bch_snapshot_live_leaves(c) <= 1)
		cr_assert_eq(bch_fsck_files(n, c, true, &fst), 0, "seed %u cut %zu: fsck: %s", seed, at,
			     n->err_msg);
	for (unsigned p = 0; p < BCH_FSCK_PROBLEM_NR; p++)
		cr_assert_eq(n->found[p], 0, "seed %u cut %zu: fsck -n finds %s", seed, at,
			     bch_fsck_problems[p].name);
	free(n);
}

static unsigned open_failures;
static char first_open_failure[300];

/*
 * Open a crash image.  A failed open fails the test (cr_expect, counted and
 * the first message kept) and the check goes on with the image opened for
 * fsck, so one open bug does not hide the others.
 */
static struct bch_fs *open_crash(unsigned seed, size_t at, unsigned flags)
{
	char err[256];
	struct bch_fs *c = testfs_open(crash, 1, flags, 1 << 20, err, sizeof(err));

	if (c)
		return c;
	if (!open_failures++) {
		snprintf(first_open_failure, sizeof(first_open_failure), "cut %zu: %s", at, err);
		cr_expect_fail("seed %u cut %zu: open: %s", seed, at, err);
	}
	c = testfs_open(crash, 1, flags | TESTFS_FSCK, 1 << 20, err, sizeof(err));
	cr_assert(c, "seed %u cut %zu: open for fsck: %s", seed, at, err);
	return c;
}

static void crash_run(unsigned def_seed, const char *comp, unsigned nops)
{
	unsigned seed = getenv("SEED") ? (unsigned)atoi(getenv("SEED")) : def_seed;
	struct sm *m = calloc(1, sizeof(*m));
	struct sm_opts o;
	char err[256];

	cr_assert(m);
	fprintf(stderr, "snapshot_crash: seed %u, %u ops, cut after every flush and every %u event(s)%s%s\n",
		seed, nops, CUT_EVERY, comp ? ", compression " : "", comp ? comp : "");
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "snapcrash");
	testfs_format(tmpdir, 1, 24, 8192, 1, paths);
	if (comp) {		/* a superblock option, set as format would */
		struct bch_fs *f = testfs_open(paths, 1, 0, 0, err, sizeof(err));
		uint64_t v;
		cr_assert(f, "%s", err);
		cr_assert_eq(bch_opt_parse(Opt_compression, comp, &v, err, sizeof(err)), 0);
		f->opts.v[Opt_compression] = v;
		f->sb->opts[bch_opt_table[Opt_compression].sb_slot] = v;
		cr_assert_eq(bch_fs_close(f), 0);
	}
	snprintf(crash[0], sizeof(crash[0]), "%s/crash.img", tmpdir);

	struct state *states = calloc(nops + 1, sizeof(*states));
	size_t *op_event = calloc(nops + 1, sizeof(*op_event));
	unsigned *synced_op = calloc(nops + 1, sizeof(*synced_op));	/* per op: the last durable op */
	unsigned kinds[SM_NOP + 1] = { 0 };
	enum sm_kind *op_kind = calloc(nops + 1, sizeof(*op_kind));
	cr_assert(states && op_event && synced_op);

	struct bch_fs *c = testfs_open(paths, 1, 0, 1 << 20, err, sizeof(err));
	cr_assert(c, "%s", err);
	sm_opts_default(&o);
	o.max_file = 128 << 10;
	o.aligned_truncate = true;
	o.max_subs = 6;
	o.pct_snapshot = 10;
	o.pct_delete = 6;
	o.pct_ro = 50;
	o.pct_gc = 2;
	sm_init(m, c, seed, &o);		/* "work" is made before the recording: durable */
	cr_assert_eq(bch_fs_fsync(c), 0);
	model_state(m, &states[0]);

	struct iorec *rec = iorec_new(1);
	cr_assert(rec);
	cr_assert_eq(iorec_attach(rec, 0, c->devs[0]->bdev), 0);
	unsigned last_sync = 0;
	for (unsigned op = 1; op <= nops; op++) {
		enum sm_kind k = sm_step(m);
		kinds[k]++;
		op_kind[op] = k;
		sm_check(m, sm_kind_names[k]);		/* the workload itself is right */
		model_state(m, &states[op]);
		/*
		 * snapshot create and delete commit synchronously, and so does gc
		 * when there are deleted snapshots to drop (else it commits nothing)
		 */
		if (k == SM_SNAPSHOT || k == SM_DELETE || (k == SM_GC && m->gc_had_work))
			last_sync = op;
		/* node writes (appends, moves, splits) as reclaim would do them */
		if (op % 20 == 0)
			cr_assert_eq(bch_btree_flush_all(c), 0, "op %u: flush: %s", op, c->err_msg);
		if (sm_rand(m) % 8 == 0) {
			cr_assert_eq(bch_fs_fsync(c), 0);
			last_sync = op;
		}
		synced_op[op] = last_sync;
		op_event[op] = iorec_nr_events(rec);
	}
	size_t events = iorec_nr_events(rec);
	iorec_detach(rec, 0);
	c->read_only = true;		/* the recording is the workload */
	bch_fs_close(c);
	fprintf(stderr, "snapshot_crash: seed %u: %zu events; %u snapshots (%u ro), %u deletes, %u gc,", seed,
		events, m->nr_snaps, m->nr_ro_snaps, m->nr_deletes, m->nr_gc);
	for (unsigned k = 0; k <= SM_NOP; k++)
		fprintf(stderr, " %s %u", sm_kind_names[k], kinds[k]);
	fprintf(stderr, "\n");

	unsigned checked = 0, reopened = 0, fscked = 0;
	uint64_t gc_freed = 0;
	for (size_t at = 0; at <= events; at++) {
		bool flush = at > 0 && iorec_event(rec, at - 1)->type == IOREC_FLUSH;
		if (!flush && at % CUT_EVERY && at != events)
			continue;
		/* the newest durable op when power went, and the last op begun */
		unsigned durable = 0, issued = 0;
		for (unsigned op = 1; op <= nops; op++) {
			if (op_event[op] <= at)
				durable = synced_op[op];
			if (op == 1 || op_event[op - 1] <= at)
				issued = op;
		}
		struct iorec_cut cut = { .at = at, .seed = at * 7 + seed, .keep_pct = 50, .torn = true };
		struct iorec_plan plan;
		char msg[512];
		struct state found;

		cr_assert_eq(iorec_plan(rec, &cut, &plan), 0);
		cr_assert_eq(iorec_write_image(rec, &plan, 0, crash[0]), 0);
		bool sample = checked % 8 == 0;
		for (unsigned pass = 0; pass < (sample ? 2 : 1); pass++) {
			struct bch_fs *r = open_crash(seed, at, pass ? TESTFS_RO : 0);
			const char *bad = fs_state(r, &found, msg, sizeof(msg));
			cr_assert_null(bad, "seed %u cut %zu%s: %s", seed, at, pass ? " (reopened)" : "", bad);
			unsigned k = durable;
			while (k <= issued && !state_eq(&found, &states[k]))
				k++;
			if (k > issued) {
				char f[1024], w[1024], *d = iorec_plan_describe(rec, &plan);
				state_describe(&found, f, sizeof(f));
				state_describe(&states[durable], w, sizeof(w));
				fprintf(stderr, "%s\n", d ? d : "");
				free(d);
				for (unsigned op = durable > 12 ? durable - 12 : 1; op <= issued; op++)
					fprintf(stderr, "  op %u: %s, events to %zu, durable from op %u\n", op,
						sm_kind_names[op_kind[op]], op_event[op], synced_op[op]);
				for (unsigned any = 0; any <= nops; any++)
					if (state_eq(&found, &states[any]))
						fprintf(stderr, "  (the state after op %u)\n", any);
				explain(r, &found, &states[durable], durable);
				if (issued != durable)
					explain(r, &found, &states[issued], issued);
				cr_assert_fail("seed %u cut %zu%s: no state after ops %u..%u matches:\n found:%s\n "
					       "after op %u:%s", seed, at, pass ? " (reopened)" : "", durable, issued,
					       f, durable, w);
			}
			if (sample && !pass) {
				cr_assert_eq(bch_fs_close(r), 0, "seed %u cut %zu: clean close: %s", seed, at,
					     r->err_msg);
				reopened++;
				continue;
			}
			if (sample) {
				bch_fs_close(r);
				r = open_crash(seed, at, TESTFS_RO | TESTFS_FSCK);
				fsck_clean(r, seed, at);
				fscked++;
				bch_fs_close(r);
				/* deletion resumes where the cut left it, and changes nothing seen */
				r = open_crash(seed, at, 0);
				uint64_t freed;
				cr_assert_eq(bch_snapshot_gc(r, NULL, NULL, &freed), 0, "seed %u cut %zu: gc: %s",
					     seed, at, r->err_msg);
				cr_assert(!bch_snapshot_gc_pending(r), "seed %u cut %zu: gc left work", seed, at);
				struct state after;
				bad = fs_state(r, &after, msg, sizeof(msg));
				cr_assert_null(bad, "seed %u cut %zu after gc: %s", seed, at, bad);
				cr_assert(state_eq(&after, &states[k]), "seed %u cut %zu: gc changed what the "
					  "subvolumes show", seed, at);
				gc_freed += freed;
			}
			bch_fs_close(r);
		}
		iorec_plan_free(&plan);
		checked++;
	}
	fprintf(stderr, "snapshot_crash: seed %u: %zu events, %u crash states checked, %u reopened, %u fsck'd "
		"and gc'd (%lu keys freed), %u failed to open%s%s\n", seed, events, checked, reopened, fscked,
		(unsigned long)gc_freed, open_failures, open_failures ? "; first: " : "", first_open_failure);
	iorec_free(rec);
	sm_free(m);
	free(m);
	for (unsigned op = 0; op <= nops; op++)
		state_free(&states[op]);
	free(states);
	free(op_event);
	free(synced_op);
	free(op_kind);
	test_tmpdir_remove(tmpdir);
}

Test(snapshot_crash, every_returned_snapshot_survives_every_cut, .timeout = 900)
{
	crash_run(4001, NULL, SOAK ? 400 : 100);
}

/* The same on a compressed filesystem: pieces of compressed extents. */
Test(snapshot_crash, compressed_every_returned_snapshot_survives_every_cut, .timeout = 900)
{
	crash_run(4002, "lz4", SOAK ? 400 : 60);
}
