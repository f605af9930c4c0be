// SPDX-License-Identifier: GPL-2.0
/*
 * replicas_model_test.c - the replicas table follows the keys (replicas.h,
 * invariant 4), checked against a model: seeded random sequences of
 * writes, overwrites and deletes (one or two copies), degraded read-write
 * sessions without one member, heals (data rereplicate), evacuations,
 * device removes (evacuate, drop, add a fresh member in its place) and
 * members lost for good (removed while missing, as `device remove --force`
 * does it) on a
 * three-member filesystem built with the library API.  After every step,
 * with the filesystem closed:
 *   - the superblock's table (and the one in memory at the next open) is
 *     exactly the set of (data type, member set) the keys use, computed
 *     here by a walk of every btree node's pointers and every extent's
 *     dirty pointers (and a journal entry per member with journal buckets);
 *   - fsck -n (passes 3-10 and 12, the library's) finds nothing;
 *   - every file reads back;
 *   - for each member, a read-only -o degraded open without it succeeds
 *     exactly when every key has a copy on the others (then every file
 *     reads back), and is refused with device_missing otherwise.
 * The seed and step are printed on failure; BCH_MODEL_SEED=N runs one seed.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bcachefs.h"
#include "btree.h"
#include "data_job.h"
#include "device.h"
#include "errcode.h"
#include "format.h"
#include "fs.h"
#include "fs_ops.h"
#include "fsck.h"
#include "replicas.h"
#include "super.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define NDEV	3
#define MAXF	48
#define STEPS	20
#define FMAX	(96u << 10)

struct mfile {
	char		name[16];
	unsigned	len, gen;
	bool		live;
};

struct model {
	unsigned	seed, step, rnd;
	char		dir[64];
	char		**devs;		/* the member paths (device.h keeps them) */
	unsigned	nr, next_img;
	struct mfile	f[MAXF];
	unsigned	nf;
	char		what[96];	/* the step being checked */
	struct bch_replicas_cpu	used;	/* what the keys used at the last check */
	unsigned	slot[NDEV];	/* member index of each path, at the last check */
};

/* Over all seeds: steps that ran, and degraded opens checked each way. */
static unsigned nr_degraded, nr_lost, nr_skipped, nr_opens, nr_refusals;

static unsigned rnd(struct model *m, unsigned n)
{
	m->rnd = m->rnd * 1103515245u + 12345u;
	return (m->rnd >> 8) % n;
}

static void fill(unsigned char *buf, size_t len, unsigned i, unsigned gen)
{
	unsigned x = i * 2654435761u ^ gen * 40503u;

	for (size_t k = 0; k < len; k++) {
		x = x * 1103515245u + 12345u;
		buf[k] = (unsigned char)(x >> 16);
	}
}

#define check(m, cond, fmt, ...)								\
	cr_assert(cond, "seed %u step %u (%s): " fmt, (m)->seed, (m)->step, (m)->what, ##__VA_ARGS__)

static void format3(struct model *m)
{
	struct bch_format_dev d[NDEV] = { 0 };
	struct bch_format_args args = { 0 };
	struct bch_opts o;
	char err[256];

	m->devs = calloc(NDEV + 2, sizeof(*m->devs));
	cr_assert(m->devs);
	for (unsigned i = 0; i < NDEV; i++) {
		char p[TESTFS_PATH_MAX];
		snprintf(p, sizeof(p), "%s/d%u.img", m->dir, m->next_img++);
		m->devs[i] = strdup(p);
		d[i].path = m->devs[i];
		d[i].size = 24u << 20;
		d[i].bucket_size = 64 << 10;
		d[i].durability = 1;
	}
	m->nr = NDEV;
	bch_opts_default(&o);
	bch_opt_set(&o, Opt_btree_node_size, 16 << 10);
	bch_opt_set(&o, Opt_metadata_replicas, 2);
	bch_opt_set(&o, Opt_data_replicas, 2);
	cr_assert_eq(bch_format(d, NDEV, &o, NULL, &args, err, sizeof(err)), 0, "format: %s", err);
}

/* Open the members but skip (-1: none); ro, degraded as named. */
static int open_without(struct model *m, int skip, bool ro, bool fsck, struct bch_fs **c,
			char *err, size_t len)
{
	char *p[NDEV + 1];
	unsigned n = 0;
	struct bch_opts o;

	for (unsigned i = 0; i < m->nr; i++)
		if ((int)i != skip)
			p[n++] = m->devs[i];
	memset(&o, 0, sizeof(o));
	if (skip >= 0)
		bch_opt_set(&o, Opt_degraded, 1);
	if (ro)
		bch_opt_set(&o, Opt_read_only, 1);
	if (fsck)
		bch_opt_set(&o, Opt_fsck, 1);
	*c = NULL;
	return bch_fs_open(p, n, &o, c, err, len);
}

static struct bch_fs *open_rw(struct model *m)
{
	struct bch_fs *c;
	char err[512];

	check(m, !open_without(m, -1, false, false, &c, err, sizeof(err)), "open: %s", err);
	return c;
}

static void close_fs(struct model *m, struct bch_fs *c)
{
	int r = bch_fs_close(c);

	check(m, !r, "close: %s", bch_err_str(r));
}

/* ------------------------------------------------------------ workload */

static void put(struct model *m, struct bch_fs *c, unsigned i, unsigned copies)
{
	static unsigned char buf[FMAX];
	struct mfile *f = &m->f[i];
	uint64_t inum;

	c->opts.v[Opt_data_replicas] = copies;
	if (f->live)
		check(m, !bch_fs_unlink(c, BCH_ROOT_INO, f->name), "unlink %s: %s", f->name, c->err_msg);
	snprintf(f->name, sizeof(f->name), "f%u", i);
	f->len = 4096 + rnd(m, FMAX - 4096);
	f->gen++;
	fill(buf, f->len, i, f->gen);
	check(m, !bch_fs_create(c, BCH_ROOT_INO, f->name, S_IFREG | 0644, 0, 0, 0, &inum),
	      "create %s: %s", f->name, c->err_msg);
	check(m, bch_fs_write(c, inum, 0, buf, f->len) == (ssize_t)f->len, "write %s: %s", f->name,
	      c->err_msg);
	f->live = true;
}

static void del(struct model *m, struct bch_fs *c)
{
	for (unsigned tries = 0; tries < MAXF; tries++) {
		struct mfile *f = &m->f[rnd(m, m->nf)];
		if (!f->live)
			continue;
		check(m, !bch_fs_unlink(c, BCH_ROOT_INO, f->name), "unlink %s: %s", f->name, c->err_msg);
		f->live = false;
		return;
	}
}

static unsigned new_file(struct model *m)
{
	for (unsigned i = 0; i < m->nf; i++)
		if (!m->f[i].live)
			return i;
	return m->nf < MAXF ? m->nf++ : rnd(m, MAXF);
}

static void run_job(struct model *m, struct bch_fs *c, enum bch_data_job_kind kind, unsigned dev)
{
	struct bch_data_job j = { .kind = kind, .dev = dev };
	char err[512];
	int r;

	check(m, !bch_data_job_init(c, &j, err, sizeof(err)), "job init: %s", err);
	while ((r = bch_data_job_step(c, &j, 1 << 20)) > 0)
		;
	check(m, !r, "job: %s", c->err_msg);
}

/* -------------------------------------------------------------- model */

struct walk {
	struct bch_replicas_cpu	t;
	struct bch_fs		*c;
};

static uint64_t ptrs_set(struct bch_fs *c, const struct bch_extent_ptr *p, unsigned nr, bool dirty_only)
{
	uint64_t s = 0;

	for (unsigned i = 0; i < nr; i++) {
		const struct bch_member *mi = bch_sb_member(c->sb, p[i].dev);
		if (mi && bch_member_exists(mi) && !(dirty_only && (p[i].flags & BCH_EXTENT_PTR_CACHED)))
			s |= 1ULL << p[i].dev;
	}
	return s;
}

static int walk_node(struct bch_fs *c, struct btree *b, void *priv)
{
	struct walk *w = priv;
	uint64_t s = ptrs_set(c, b->ptrs, b->nr_ptrs, false);

	return s && bch_replicas_cpu_add(&w->t, BCH_DATA_btree, s) < 0 ? -ENOMEM : 0;
}

/* What the keys use, by a walk of our own (not bch_replicas_used()). */
static void keys_use(struct model *m, struct bch_fs *c, struct bch_replicas_cpu *t)
{
	struct walk w = { .c = c };
	struct btree_iter it;
	const struct bch_bkey *k;
	int r = 0;

	for (unsigned id = 0; id < BCH_BTREE_ID_NR; id++)
		if (c->roots->r[id].key)
			check(m, !bch_btree_walk_nodes(c, id, walk_node, &w), "walk: %s", c->err_msg);
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_extents, POS_MIN, POS_MAX);
	while ((k = bch_btree_iter_next(&it, &r)))
		if (k->type == BCH_BKEY_extent) {
			uint64_t s = ptrs_set(c, ((const struct bch_extent *)bkey_val(k))->ptrs,
					      bch_extent_nr_ptrs(k), true);
			if (s)
				cr_assert_geq(bch_replicas_cpu_add(&w.t, BCH_DATA_user, s), 0);
		}
	bch_btree_iter_exit(&it);
	check(m, !r, "extents: %s", c->err_msg);
	struct bch_sb_field_journal *j = bch_sb_get_journal(c->sb);
	size_t runs = j ? ((size_t)j->field.u64s * 8 - sizeof(*j)) / sizeof(j->runs[0]) : 0;
	for (size_t i = 0; i < runs; i++)
		if (j->runs[i].nr)
			cr_assert_geq(bch_replicas_cpu_add(&w.t, BCH_DATA_journal, 1ULL << j->runs[i].dev), 0);
	*t = w.t;
}

static void table_text(const struct bch_replicas_cpu *t, char *buf, size_t len)
{
	int w = 0;

	buf[0] = 0;
	for (size_t i = 0; i < t->nr && w >= 0 && (size_t)w < len; i++)
		w += snprintf(buf + w, len - w, " %u:%llx", t->e[i].data_type,
			      (unsigned long long)t->e[i].devs);
}

static bool same(const struct bch_replicas_cpu *a, const struct bch_replicas_cpu *b)
{
	if (a->nr != b->nr)
		return false;
	for (size_t i = 0; i < a->nr; i++)
		if (!bch_replicas_cpu_has(b, a->e[i].data_type, a->e[i].devs))
			return false;
	return true;
}

static void read_all(struct model *m, struct bch_fs *c, const char *how)
{
	static unsigned char want[FMAX], got[FMAX];

	for (unsigned i = 0; i < m->nf; i++) {
		struct mfile *f = &m->f[i];
		uint64_t inum;
		if (!f->live)
			continue;
		check(m, !bch_fs_lookup(c, BCH_ROOT_INO, f->name, &inum), "%s: %s missing", how, f->name);
		fill(want, f->len, i, f->gen);
		check(m, bch_fs_read(c, inum, 0, got, f->len) == (ssize_t)f->len, "%s: read %s: %s",
		      how, f->name, c->err_msg);
		check(m, !memcmp(want, got, f->len), "%s: %s differs", how, f->name);
	}
}

/* Every key has a copy off member slot `gone`: the degraded open must work. */
static bool survives(const struct bch_replicas_cpu *used, unsigned gone)
{
	for (size_t i = 0; i < used->nr; i++)
		if (used->e[i].data_type != BCH_DATA_journal && !(used->e[i].devs & ~(1ULL << gone)))
			return false;
	return true;
}

static void verify(struct model *m)
{
	struct bch_replicas_cpu used, disk;
	struct bch_fs *c;
	char err[512], a[512], b[512];

	check(m, !open_without(m, -1, true, true, &c, err, sizeof(err)), "open: %s", err);
	keys_use(m, c, &used);
	cr_assert_eq(bch_replicas_from_sb(c->sb, &disk), 0);
	table_text(&used, a, sizeof(a));
	table_text(&disk, b, sizeof(b));
	check(m, same(&used, &disk), "superblock table {%s } is not what the keys use {%s }", b, a);
	check(m, same(&used, c->replicas), "table in memory is not what the keys use {%s }", a);
	check(m, c->sb->compat & BCH_COMPAT_REPLICAS_KEPT, "table not marked kept");

	/* fsck -n, passes 3-10 and then 12 */
	testfs_assert_fsck_clean(c, false);
	struct bch_fsck_ctx *ctx = calloc(1, sizeof(*ctx));
	cr_assert(ctx);
	ctx->mode = BCH_FSCK_NO;
	check(m, !bch_fsck_replicas(ctx, c), "fsck pass 12: %s", ctx->err_msg);
	for (unsigned p = 0; p < BCH_FSCK_PROBLEM_NR; p++)
		check(m, !ctx->found[p], "fsck -n finds %s", bch_fsck_problems[p].name);
	free(ctx);
	read_all(m, c, "all members");
	unsigned slot[NDEV];
	for (unsigned i = 0; i < m->nr; i++) {
		unsigned d;
		check(m, !bch_dev_lookup(c, m->devs, m->nr, m->devs[i], &d, err, sizeof(err)), "%s", err);
		slot[i] = d;
	}
	close_fs(m, c);

	/* each member missing in turn: opens exactly when every key has a copy elsewhere */
	for (unsigned i = 0; i < m->nr; i++) {
		bool ok = survives(&used, slot[i]);
		int r = open_without(m, i, true, false, &c, err, sizeof(err));
		if (getenv("BCH_MODEL_VERBOSE"))
			fprintf(stderr, "  seed %u step %u (%s): without member %u: %s\n", m->seed, m->step,
				m->what, slot[i], ok ? "opens" : "refused");
		nr_opens += ok;
		nr_refusals += !ok;
		if (ok) {
			check(m, !r, "without member %u every key has a copy, yet: %s", slot[i], err);
			read_all(m, c, "degraded");
			close_fs(m, c);
		} else {
			check(m, r == -BCH_ERR_device_missing,
			      "without member %u some key has no copy, yet the open %s (%d)", slot[i],
			      r ? err : "worked", r);
			check(m, strstr(err, "would be lost") || strstr(err, "no copy left"),
			      "refusal names no loss: %s", err);
			if (!r)
				close_fs(m, c);
		}
	}
	bch_replicas_cpu_free(&m->used);
	m->used = used;
	memcpy(m->slot, slot, sizeof(slot));
	bch_replicas_cpu_free(&disk);
}

/* ---------------------------------------------------------------- steps */

static void step_write(struct model *m)
{
	struct bch_fs *c = open_rw(m);
	unsigned n = 1 + rnd(m, 3);

	snprintf(m->what, sizeof(m->what), "write %u files", n);
	for (unsigned k = 0; k < n; k++)
		put(m, c, new_file(m), 1 + rnd(m, 2));
	if (rnd(m, 2))
		del(m, c);
	close_fs(m, c);
}

static void step_overwrite(struct model *m)
{
	struct bch_fs *c = open_rw(m);

	snprintf(m->what, sizeof(m->what), "overwrite");
	for (unsigned k = 0; k < 3; k++) {
		unsigned i = rnd(m, m->nf ? m->nf : 1);
		if (m->nf && m->f[i].live)
			put(m, c, i, 1 + rnd(m, 2));
	}
	del(m, c);
	close_fs(m, c);
}

/* A read-write session without one member (when what remains has a copy of everything). */
static void step_degraded(struct model *m)
{
	unsigned gone = rnd(m, m->nr);
	struct bch_fs *c;
	char err[512];

	snprintf(m->what, sizeof(m->what), "degraded session without %s", m->devs[gone]);
	if (open_without(m, gone, false, false, &c, err, sizeof(err))) {
		check(m, strstr(err, "would be lost") || strstr(err, "no copy left"), "%s", err);
		nr_skipped++;
		return;		/* verify() checked the refusal is right */
	}
	nr_degraded++;
	put(m, c, new_file(m), 2);
	if (rnd(m, 2))
		put(m, c, new_file(m), 1);
	if (rnd(m, 2))
		del(m, c);
	close_fs(m, c);
}

static void step_heal(struct model *m)
{
	struct bch_fs *c = open_rw(m);

	snprintf(m->what, sizeof(m->what), "rereplicate");
	c->opts.v[Opt_data_replicas] = 2;
	run_job(m, c, BCH_DATA_JOB_rereplicate, 0);
	close_fs(m, c);
}

/* Evacuate member index i (the job to its end), then make it read-write again unless dropping. */
static struct bch_fs *evacuate(struct model *m, unsigned i, bool keep_ro)
{
	struct bch_fs *c = open_rw(m);
	unsigned dev;
	char err[512];

	c->opts.v[Opt_data_replicas] = 2;
	check(m, !bch_dev_lookup(c, m->devs, m->nr, m->devs[i], &dev, err, sizeof(err)), "%s", err);
	check(m, !bch_dev_set_state(c, dev, BCH_MEMBER_STATE_ro, false, err, sizeof(err)), "ro: %s", err);
	run_job(m, c, BCH_DATA_JOB_evacuate, dev);
	if (!keep_ro)
		check(m, !bch_dev_set_state(c, dev, BCH_MEMBER_STATE_rw, false, err, sizeof(err)),
		      "rw: %s", err);
	return c;
}

static void step_evacuate(struct model *m)
{
	unsigned i = rnd(m, m->nr);

	snprintf(m->what, sizeof(m->what), "evacuate %s", m->devs[i]);
	close_fs(m, evacuate(m, i, false));
}

static void step_remove(struct model *m)
{
	unsigned i = rnd(m, m->nr), dev, idx;
	char err[512], path[TESTFS_PATH_MAX];
	uint64_t lost;

	snprintf(m->what, sizeof(m->what), "remove %s, add a new member", m->devs[i]);
	struct bch_fs *c = evacuate(m, i, true);
	check(m, !bch_dev_lookup(c, m->devs, m->nr, m->devs[i], &dev, err, sizeof(err)), "%s", err);
	check(m, !bch_dev_drop(&c, &m->devs, &m->nr, NULL, dev, false, &lost, err, sizeof(err)),
	      "drop: %s", err);
	snprintf(path, sizeof(path), "%s/d%u.img", m->dir, m->next_img++);
	struct bch_dev_add_args a = { .path = path, .size = 24u << 20, .bucket_size = 64 << 10,
				      .durability = 1 };
	check(m, !bch_dev_add(&c, &m->devs, &m->nr, NULL, &a, &idx, err, sizeof(err)), "add: %s", err);
	close_fs(m, c);
}

/*
 * A member lost for good (its image gone): when the others hold a copy of
 * everything, `device remove --force` of it as the command does it (opened
 * degraded; evacuated, which re-makes its copies from the others; dropped),
 * then a fresh member added in its place.
 */
static void step_lose(struct model *m)
{
	unsigned i = rnd(m, m->nr), idx;
	char err[512], path[TESTFS_PATH_MAX];
	struct bch_fs *c;
	uint64_t lost;

	snprintf(m->what, sizeof(m->what), "lose %s, remove it, add a new member", m->devs[i]);
	if (!survives(&m->used, m->slot[i])) {
		nr_skipped++;
		return;		/* verify() checked that the open without it is refused */
	}
	nr_lost++;
	char **p = calloc(NDEV + 2, sizeof(*p));
	unsigned n = 0, dev = m->slot[i];
	cr_assert(p);
	for (unsigned k = 0; k < m->nr; k++)
		if (k != i)
			p[n++] = strdup(m->devs[k]);
	check(m, !unlink(m->devs[i]), "unlink %s", m->devs[i]);
	for (unsigned k = 0; k < m->nr; k++)
		free(m->devs[k]);
	free(m->devs);
	m->devs = p;
	m->nr = n;
	struct bch_opts o;
	memset(&o, 0, sizeof(o));
	bch_opt_set(&o, Opt_degraded, 1);
	check(m, !bch_fs_open(m->devs, m->nr, &o, &c, err, sizeof(err)), "open without it: %s", err);
	c->opts.v[Opt_data_replicas] = 2;
	check(m, bch_dev_missing(c, dev), "member %u not missing", dev);
	check(m, !bch_dev_set_state(c, dev, BCH_MEMBER_STATE_ro, true, err, sizeof(err)), "ro: %s", err);
	run_job(m, c, BCH_DATA_JOB_evacuate, dev);
	check(m, !bch_dev_drop(&c, &m->devs, &m->nr, &o, dev, true, &lost, err, sizeof(err)),
	      "drop: %s", err);
	check(m, !lost, "%llu sectors lost although every key had a copy", (unsigned long long)lost);
	snprintf(path, sizeof(path), "%s/d%u.img", m->dir, m->next_img++);
	struct bch_dev_add_args a = { .path = path, .size = 24u << 20, .bucket_size = 64 << 10,
				      .durability = 1 };
	check(m, !bch_dev_add(&c, &m->devs, &m->nr, NULL, &a, &idx, err, sizeof(err)), "add: %s", err);
	close_fs(m, c);
}

static void run_seed(unsigned seed)
{
	struct model *m = calloc(1, sizeof(*m));

	cr_assert(m);
	m->seed = m->rnd = seed;
	fprintf(stderr, "replicas_model: seed %u\n", seed);
	test_tmpdir_make(m->dir, sizeof(m->dir), "replmodel");
	format3(m);
	snprintf(m->what, sizeof(m->what), "format");
	step_write(m);
	verify(m);
	for (m->step = 1; m->step <= STEPS; m->step++) {
		switch (rnd(m, 9)) {
		case 0: case 1:	step_write(m); break;
		case 2:		step_overwrite(m); break;
		case 3: case 4:	step_degraded(m); break;
		case 5:		step_heal(m); break;
		case 6:		step_evacuate(m); break;
		case 7:		step_remove(m); break;
		case 8:		step_lose(m); break;
		}
		verify(m);
	}
	for (unsigned i = 0; i < m->nr; i++)
		free(m->devs[i]);
	free(m->devs);
	bch_replicas_cpu_free(&m->used);
	test_tmpdir_remove(m->dir);
	free(m);
}

Test(replicas_model, random_sequences, .timeout = 900)
{
	const char *one = getenv("BCH_MODEL_SEED");

	if (one) {
		run_seed((unsigned)strtoul(one, NULL, 0));
		return;
	}
	for (unsigned seed = 4601; seed < 4621; seed++)
		run_seed(seed);
	cr_log_info("replicas_model: 20 seeds x %u steps: %u degraded sessions, %u members lost and "
		    "removed, %u skipped (something had no copy elsewhere); %u degraded opens, %u "
		    "refusals checked", STEPS, nr_degraded, nr_lost, nr_skipped, nr_opens, nr_refusals);
	cr_assert(nr_degraded >= 10 && nr_lost >= 5 && nr_refusals >= 10,
		  "the sequences should exercise every path");
}
