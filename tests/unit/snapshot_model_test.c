// SPDX-License-Identifier: GPL-2.0
/*
 * snapshot_model_test.c - subvolumes and snapshots against a model
 * (issue 30, "Tests"): random file operations (create, mkdir, writes at
 * random offsets including the middle of large files, truncate, unlink,
 * rmdir, rename within a subvolume, xattrs) interleaved with snapshots of
 * random live subvolumes (snapshots of snapshots, some read-only),
 * deletions in random order and snapshot gc (tests/lib/snapmodel.h).
 * After every step each live subvolume's tree, walked through its handles,
 * equals the model's copy; st_ino is unique across subvolumes; every change
 * to a read-only snapshot is refused with -EROFS.  The filesystem is closed
 * and reopened (and once cut after a sync: journal replay) on the way.  At
 * the end every snapshot but one goes, gc runs, fsck is clean, and the
 * space used equals that of a filesystem written with the same final tree
 * and no snapshots: user data exactly, btree nodes within a few.
 * Seeds are printed (SEED= repeats one); SOAK=1 runs longer.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bcachefs.h"
#include "bcachefs_format.h"
#include "alloc.h"
#include "opts.h"
#include "fs.h"
#include "fs_ops.h"
#include "fsck.h"
#include "snapshot.h"
#include "tests/lib/snapmodel.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define NODE_BYTES	(64 << 10)

static char tmpdir[64];
static char paths[2][TESTFS_PATH_MAX];
static unsigned nr_devs = 1;	/* the model's filesystem: 1, or 2 with metadata on both */

static struct bch_fs *open_fs(unsigned seed)
{
	char err[256];
	struct bch_fs *c = testfs_open(paths, nr_devs, 0, 0, err, sizeof(err));

	cr_assert(c, "seed %u: open: %s", seed, err);
	return c;
}

/*
 * Open again after a close in the middle of the model.  A failed open fails
 * the test (cr_expect) but the model goes on, on the filesystem opened for
 * fsck (which keeps the keys it cannot load aside), so one open bug does not
 * hide what comes after it.
 */
static struct bch_fs *reopen_fs(unsigned seed, unsigned step)
{
	char err[256];
	struct bch_fs *c = testfs_open(paths, nr_devs, 0, 0, err, sizeof(err));

	if (c)
		return c;
	cr_expect_fail("seed %u step %u: open: %s", seed, step, err);
	fprintf(stderr, "snapshot_model: seed %u step %u: open failed (%s); going on opened for fsck\n", seed,
		step, err);
	c = testfs_open(paths, nr_devs, TESTFS_FSCK, 0, err, sizeof(err));
	cr_assert(c, "seed %u step %u: open for fsck: %s", seed, step, err);
	return c;
}

struct space {
	uint64_t user, btree, used;
};

static struct space space_of(struct bch_fs *c)
{
	struct space r = { 0 };
	struct bch_fs_space sp;

	for (unsigned d = 0; d < nr_devs; d++) {
		struct bch_dev_usage u;
		bch_dev_usage_get(c, d, &u);
		r.user += u.sectors[BCH_DATA_user];
		r.btree += u.sectors[BCH_DATA_btree];
	}
	bch_fs_space(c, &sp);
	r.used = sp.used;
	return r;
}

/*
 * fsck -n: the btrees; and the files with their data when one snapshot is
 * left (fsck checks files across snapshots not yet: cmd_fsck.c skips them).
 */
static void fsck_clean(unsigned seed)
{
	char err[256];
	struct bch_fs *c = testfs_open(paths, nr_devs, TESTFS_FSCK | TESTFS_RO, 0, err, sizeof(err));

	cr_assert(c, "seed %u: open for fsck: %s", seed, err);
	if (bch_snapshot_live_leaves(c) <= 1) {
		testfs_assert_fsck_clean(c, true);
	} else {
		struct bch_fsck_ctx *n = calloc(1, sizeof(*n));
		uint64_t nodes;
		cr_assert(n);
		n->mode = BCH_FSCK_NO;
		cr_assert_eq(bch_fsck_btrees(n, c, &nodes), 0, "seed %u: fsck: %s", seed, n->err_msg);
		for (unsigned p = 0; p < BCH_FSCK_PROBLEM_NR; p++)
			cr_assert_eq(n->found[p], 0, "seed %u: fsck -n finds %s", seed, bch_fsck_problems[p].name);
		free(n);
	}
	bch_fs_close(c);
}

/* Format (encrypted if asked) with compression comp (NULL: none), a superblock option. */
static void format(unsigned size_mb, const char *comp)
{
	testfs_format(tmpdir, nr_devs, size_mb, NODE_BYTES, nr_devs, paths);
	if (comp) {
		struct bch_fs *c = open_fs(0);
		char err[128];
		uint64_t v;
		cr_assert_eq(bch_opt_parse(Opt_compression, comp, &v, err, sizeof(err)), 0);
		c->opts.v[Opt_compression] = v;
		c->sb->opts[bch_opt_table[Opt_compression].sb_slot] = v;
		cr_assert_eq(bch_fs_close(c), 0);
	}
}

/*
 * The model on a filesystem of size_mb MiB, compressed with comp (NULL:
 * not; the space check then wants the same user data exactly, else it only
 * reports: compressed pieces keep whole compressed extents).
 */
static void run(unsigned def_seed, unsigned steps, unsigned size_mb, const char *comp)
{
	struct sm *m = calloc(1, sizeof(*m));
	struct sm_opts o;
	unsigned seed = getenv("SEED") ? (unsigned)atoi(getenv("SEED")) : def_seed;
	unsigned kinds[SM_NOP + 1] = { 0 };
	char when[64];

	cr_assert(m);
	fprintf(stderr, "snapshot_model: seed %u, %u steps, %u device(s), compression %s%s\n", seed, steps,
		nr_devs, comp ? comp : "none", testfs_encrypted ? ", encrypted" : "");
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "snapmodel");
	format(size_mb, comp);
	sm_opts_default(&o);
	struct bch_fs *c = open_fs(seed);
	sm_init(m, c, seed, &o);

	for (unsigned step = 1; step <= steps; step++) {
		enum sm_kind k = sm_step(m);
		kinds[k]++;
		snprintf(when, sizeof(when), "after %s", sm_kind_names[k]);
		sm_check(m, when);
		if (step % 10 == 0) {
			sm_ro_probe(m);
			sm_refusal_probe(m);
		}
		if (step % (steps / 4) == 0 || step == steps / 3) {
			if (step == 2 * (steps / 4)) {	/* a power cut after a sync: replay */
				cr_assert_eq(bch_fs_fsync(c), 0);
				c->read_only = true;
				bch_fs_close(c);
			} else {
				cr_assert_eq(bch_fs_close(c), 0, "seed %u step %u: close", seed, step);
			}
			m->c = c = reopen_fs(seed, step);
			sm_check(m, "after reopen");
			sm_ro_probe(m);
		}
	}
	fprintf(stderr, "snapshot_model: seed %u: %u file ops, %u snapshots (%u ro), %u deletes, %u gc, "
		"%u refusals, %u live\n", seed, m->nr_ops, m->nr_snaps, m->nr_ro_snaps, m->nr_deletes,
		m->nr_gc, m->nr_ro_refused, m->nr);
	for (unsigned k = 0; k <= SM_NOP; k++)
		fprintf(stderr, " %s %u", sm_kind_names[k], kinds[k]);
	fprintf(stderr, "\n");

	/* every snapshot but one goes, in random order; gc gives the space back */
	unsigned keep = 0;
	uint64_t most = 0;
	for (unsigned i = 0; i < m->nr; i++) {		/* keep the one with the most data */
		uint64_t bytes = 0;
		for (unsigned j = 0; j < m->sub[i].t.nr; j++)
			bytes += m->sub[i].t.n[j].size;
		if (bytes > most) {
			most = bytes;
			keep = i;
		}
	}
	uint32_t keep_id = m->sub[keep].id;
	while (m->nr > 1) {
		unsigned i = sm_rand(m) % m->nr;
		if (m->sub[i].id == keep_id)
			continue;
		m->step++;
		sm_delete(m, i);
		sm_check(m, "final delete");
	}
	uint64_t freed = sm_gc(m);
	sm_check(m, "after the last gc");
	cr_assert_eq(bch_snapshot_live_leaves(c), 2, "seed %u: live leaves %u (subvolume 0 and %s)", seed,
		     bch_snapshot_live_leaves(c), m->sub[0].name);
	cr_assert_eq(bch_fs_close(c), 0);
	fsck_clean(seed);
	m->c = c = reopen_fs(seed, m->step);
	sm_check(m, "reopened after gc");
	struct space a = space_of(c);
	/* keep the tree: the model goes with this filesystem */
	struct sm_tree final = m->sub[0].t;
	memset(&m->sub[0].t, 0, sizeof(m->sub[0].t));

	/* the last one too: nothing is left, and fsck checks the files (one snapshot) */
	sm_delete(m, 0);
	sm_gc(m);
	sm_check(m, "after the last delete");
	cr_assert_eq(bch_snapshot_live_leaves(c), 1, "seed %u: live leaves %u, only subvolume 0's left", seed,
		     bch_snapshot_live_leaves(c));
	struct space z = space_of(c);
	cr_assert_eq(z.user, 0, "seed %u: %lu sectors of user data after every file went", seed,
		     (unsigned long)z.user);
	cr_assert_eq(bch_fs_close(c), 0);
	fsck_clean(seed);

	/* the same tree on a filesystem that never had snapshots */
	test_tmpdir_remove(tmpdir);
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "snapmodel");
	format(size_mb, comp);
	c = open_fs(seed);
	uint64_t dir;
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "work", S_IFDIR | 0755, 0, 0, 0, &dir), 0);
	sm_tree_build(c, dir, &final);
	cr_assert_eq(bch_fs_close(c), 0);
	c = open_fs(seed);
	char msg[512];
	cr_assert_null(sm_compare(c, dir, &final, NULL, NULL, msg, sizeof(msg)), "seed %u: rebuilt tree: %s",
		       seed, msg);
	struct space b = space_of(c);
	cr_assert_eq(bch_fs_close(c), 0);

	fprintf(stderr, "snapshot_model: seed %u: gc freed %lu keys; after every snapshot went: user %lu "
		"btree %lu used %lu bytes; without snapshots: user %lu btree %lu used %lu\n", seed,
		(unsigned long)freed, (unsigned long)a.user << 9, (unsigned long)a.btree << 9,
		(unsigned long)a.used, (unsigned long)b.user << 9, (unsigned long)b.btree << 9,
		(unsigned long)b.used);
	if (comp)
		goto out;
	cr_assert_eq(a.user, b.user, "seed %u: user data %lu sectors after deleting every snapshot, "
		     "%lu without snapshots", seed, (unsigned long)a.user, (unsigned long)b.user);
	uint64_t node = NODE_BYTES >> 9, d = a.btree > b.btree ? a.btree - b.btree : b.btree - a.btree;
	cr_assert_leq(a.used > b.used ? a.used - b.used : b.used - a.used, 2 << 20,
		      "seed %u: %lu bytes used after deleting every snapshot, %lu without (more than 2 MiB "
		      "apart)", seed, (unsigned long)a.used, (unsigned long)b.used);
	cr_assert_leq(d, 4 * node, "seed %u: btree %lu sectors after deleting every snapshot, %lu without "
		      "snapshots (more than 4 nodes apart)", seed, (unsigned long)a.btree,
		      (unsigned long)b.btree);
out:
	sm_tree_free(&final);
	sm_free(m);
	free(m);
	test_tmpdir_remove(tmpdir);
}

/* About 0.05 s a step under ASan (every live subvolume is walked after each). */
static unsigned nsteps(unsigned base)
{
	return getenv("SOAK") ? base * 5 : base;
}

Test(snapshot_model, random_ops_snapshots_deletes, .timeout = 1800)
{
	run(3001, nsteps(300), 64, NULL);
}

Test(snapshot_model, another_seed, .timeout = 1800)
{
	run(3002, nsteps(200), 64, NULL);
}

/* Two devices, every btree node on both. */
Test(snapshot_model, two_devices, .timeout = 1800)
{
	nr_devs = 2;
	run(3004, nsteps(150), 48, NULL);
}

/* Compressed extents cut into pieces by snapshots, and encrypted ones. */
Test(snapshot_model, lz4_encrypted, .timeout = 1800)
{
	testfs_encrypted = true;
	run(3003, nsteps(150), 64, "lz4");
}

/*
 * A file filling a bucket, a snapshot, then 4 KiB overwritten in the middle
 * of the source's copy: the pieces left on either side copy the pointers of
 * the snapshot's extent (bcachefs_format.h, "Snapshots and subvolumes"), so
 * the bucket's sectors are counted once per key.  The filesystem must still
 * close and open again (found by the model at seed 3001: "alloc btree ...
 * more sectors than the bucket holds").
 */
Test(snapshot_model, overwrite_middle_of_snapshotted_bucket_then_reopen)
{
	static unsigned char data[256 << 10];
	uint64_t work, f, snap, h;

	test_tmpdir_make(tmpdir, sizeof(tmpdir), "snapmodel");
	testfs_format(tmpdir, 1, 64, NODE_BYTES, 1, paths);
	struct bch_fs *c = open_fs(0);
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = i * 7 + (i >> 12);
	cr_assert_eq(bch_fs_subvol_create(c, BCH_ROOT_INO, "work", S_IFDIR | 0755, 0, 0, &work), 0);
	cr_assert_eq(bch_fs_create(c, work, "f", S_IFREG | 0644, 0, 0, 0, &f), 0);
	cr_assert_eq(bch_fs_write(c, f, 0, data, sizeof(data)), (ssize_t)sizeof(data));
	cr_assert_eq(bch_fs_subvol_snapshot(c, work, BCH_ROOT_INO, "s", false, &snap), 0);
	cr_assert_eq(bch_fs_write(c, f, 100 << 10, "x", 1), 1, "%s", c->err_msg);
	struct bch_dev_usage u;
	bch_dev_usage_get(c, 0, &u);
	fprintf(stderr, "overwrite_middle: user sectors %lu in %lu buckets\n",
		(unsigned long)u.sectors[BCH_DATA_user], (unsigned long)u.buckets[BCH_DATA_user]);
	cr_assert_eq(bch_fs_close(c), 0, "close: %s", c->err_msg);
	c = open_fs(0);
	cr_assert_eq(bch_fs_lookup(c, snap, "f", &h), 0);
	static unsigned char got[sizeof(data)];
	cr_assert_eq(bch_fs_read(c, h, 0, got, sizeof(got)), (ssize_t)sizeof(got));
	cr_assert(!memcmp(got, data, sizeof(data)), "the snapshot's copy changed");
	cr_assert_eq(bch_fs_close(c), 0);
	test_tmpdir_remove(tmpdir);
}

/*
 * A hard link inside a subvolume other than 0 (found by the model at seed
 * 3001, step 210: link in a read-only snapshot gave -ENOENT, not -EROFS).
 * bch_fs_link() masks the subvolume off the inode's handle before it
 * enters the view, so the link is looked up in subvolume 0.
 */
Test(snapshot_model, link_inside_a_subvolume)
{
	uint64_t work, f, g, snap, h;
	struct stat st;

	test_tmpdir_make(tmpdir, sizeof(tmpdir), "snapmodel");
	testfs_format(tmpdir, 1, 64, NODE_BYTES, 1, paths);
	struct bch_fs *c = open_fs(0);
	cr_assert_eq(bch_fs_subvol_create(c, BCH_ROOT_INO, "work", S_IFDIR | 0755, 0, 0, &work), 0);
	cr_assert_eq(bch_fs_create(c, work, "f", S_IFREG | 0644, 0, 0, 0, &f), 0);
	cr_assert_eq(bch_fs_link(c, f, work, "g"), 0, "link in subvolume %u: %s", bch_handle_subvol(work),
		     c->err_msg);
	cr_assert_eq(bch_fs_lookup(c, work, "g", &g), 0);
	cr_assert_eq(g, f);
	cr_assert_eq(bch_fs_getattr(c, f, &st), 0);
	cr_assert_eq(st.st_nlink, 2);
	cr_assert_eq(bch_fs_subvol_snapshot(c, work, BCH_ROOT_INO, "ro", true, &snap), 0);
	cr_assert_eq(bch_fs_lookup(c, snap, "f", &h), 0);
	cr_assert_eq(bch_fs_link(c, h, snap, "h"), -EROFS, "link in a read-only snapshot");
	cr_assert_eq(bch_fs_close(c), 0);
	test_tmpdir_remove(tmpdir);
}

/*
 * A snapshot of subvolume 0 taken while it names subvolume "a" holds a
 * copy of that name.  After "a" is deleted and its ID handed to a new
 * subvolume "b", the old name in the snapshot must not lead into "b".
 */
Test(snapshot_model, deleted_subvolume_name_in_an_older_snapshot)
{
	uint64_t a, snap0, b, h, f;

	test_tmpdir_make(tmpdir, sizeof(tmpdir), "snapmodel");
	testfs_format(tmpdir, 1, 64, NODE_BYTES, 1, paths);
	struct bch_fs *c = open_fs(0);
	cr_assert_eq(bch_fs_subvol_create(c, BCH_ROOT_INO, "a", S_IFDIR | 0755, 0, 0, &a), 0);
	cr_assert_eq(bch_fs_subvol_snapshot(c, BCH_ROOT_INO, BCH_ROOT_INO, "snap0", true, &snap0), 0,
		     "%s", c->err_msg);
	int r = bch_fs_lookup(c, snap0, "a", &h);
	fprintf(stderr, "deleted_subvolume_name: snap0/a: %d, handle %#lx (a is %#lx)\n", r, (unsigned long)h,
		(unsigned long)a);
	cr_assert_eq(bch_fs_subvol_delete(c, BCH_ROOT_INO, "a"), 0, "%s", c->err_msg);
	uint64_t freed;
	cr_assert_eq(bch_snapshot_gc(c, NULL, NULL, &freed), 0);
	r = bch_fs_lookup(c, snap0, "a", &h);
	fprintf(stderr, "deleted_subvolume_name: after the delete, snap0/a: %d (%s), handle %#lx\n", r,
		strerror(-r), (unsigned long)h);
	cr_assert_eq(bch_fs_subvol_create(c, BCH_ROOT_INO, "b", S_IFDIR | 0755, 0, 0, &b), 0);
	cr_assert_eq(bch_fs_create(c, b, "only-in-b", S_IFREG | 0644, 0, 0, 0, &f), 0);
	fprintf(stderr, "deleted_subvolume_name: b is %#lx\n", (unsigned long)b);
	r = bch_fs_lookup(c, snap0, "a", &h);
	if (!r) {
		uint64_t x;
		cr_assert_neq(h, b, "snap0/a leads into the new subvolume b (handle %#lx)", (unsigned long)h);
		cr_assert_neq(bch_fs_lookup(c, h, "only-in-b", &x), 0, "snap0/a shows b's files");
	}
	cr_assert_eq(bch_fs_close(c), 0);
	test_tmpdir_remove(tmpdir);
}

/*
 * A read-only snapshot named inside its own source (t61's /s1/ro): the
 * name lands in the source's new leaf, so the snapshot does not hold its
 * own name; the source cannot be deleted while it names the snapshot; the
 * snapshot keeps the source's tree as it was; both survive a reopen.
 */
Test(snapshot_model, snapshot_named_inside_its_source)
{
	uint64_t work, f, ro, h, x;
	char buf[16];

	test_tmpdir_make(tmpdir, sizeof(tmpdir), "snapmodel");
	testfs_format(tmpdir, 1, 64, NODE_BYTES, 1, paths);
	struct bch_fs *c = open_fs(0);
	cr_assert_eq(bch_fs_subvol_create(c, BCH_ROOT_INO, "work", S_IFDIR | 0755, 0, 0, &work), 0);
	cr_assert_eq(bch_fs_create(c, work, "f", S_IFREG | 0644, 0, 0, 0, &f), 0);
	cr_assert_eq(bch_fs_write(c, f, 0, "before", 6), 6);
	cr_assert_eq(bch_fs_subvol_snapshot(c, work, work, "ro", true, &ro), 0, "%s", c->err_msg);
	cr_assert_eq(bch_fs_write(c, f, 0, "after!", 6), 6);
	for (int pass = 0; pass < 2; pass++) {
		cr_assert_eq(bch_fs_lookup(c, work, "ro", &h), 0, "pass %d", pass);
		cr_assert_eq(h, ro, "pass %d: work/ro is %#lx, the snapshot's root %#lx", pass, (unsigned long)h,
			     (unsigned long)ro);
		cr_assert_eq(bch_fs_lookup(c, ro, "ro", &x), -ENOENT, "pass %d: the snapshot holds its own name",
			     pass);
		cr_assert_eq(bch_fs_lookup(c, ro, "f", &h), 0);
		cr_assert_eq(bch_fs_read(c, h, 0, buf, sizeof(buf)), 6);
		cr_assert(!memcmp(buf, "before", 6), "pass %d: the snapshot's f reads %.6s", pass, buf);
		cr_assert_eq(bch_fs_read(c, f, 0, buf, sizeof(buf)), 6);
		cr_assert(!memcmp(buf, "after!", 6), "pass %d: work's f reads %.6s", pass, buf);
		cr_assert_eq(bch_fs_subvol_delete(c, BCH_ROOT_INO, "work"), -ENOTEMPTY, "pass %d", pass);
		cr_assert_eq(bch_fs_close(c), 0);
		c = open_fs(0);
	}
	cr_assert_eq(bch_fs_subvol_delete(c, work, "ro"), 0, "%s", c->err_msg);
	cr_assert_eq(bch_fs_lookup(c, work, "ro", &x), -ENOENT);
	cr_assert_eq(bch_fs_subvol_delete(c, BCH_ROOT_INO, "work"), 0, "%s", c->err_msg);
	uint64_t freed;
	cr_assert_eq(bch_snapshot_gc(c, NULL, NULL, &freed), 0);
	cr_assert_eq(bch_snapshot_live_leaves(c), 1);
	cr_assert_eq(bch_fs_close(c), 0);
	fsck_clean(0);
	test_tmpdir_remove(tmpdir);
}
