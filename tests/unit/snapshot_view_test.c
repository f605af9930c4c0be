// SPDX-License-Identifier: GPL-2.0
/*
 * snapshot_view_test.c - what snapshot.c keeps between calls for speed:
 *   - filtered iterators take their key buffers from a per-thread list:
 *     many open at once (more than the list keeps), stepped by turns and
 *     closed out of order, each sees what one iterator alone sees, in a
 *     subvolume with snapshots behind it and in the snapshot itself;
 *   - a snapshot_touch key is not written again when the btree holds it:
 *     after more changes to the same inodes, after a new snapshot (a new
 *     leaf needs its own keys), and after a snapshot was deleted and its
 *     ID handed out again, every snapshot holds the keys of the inodes
 *     changed in it.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bcachefs.h"
#include "btree.h"
#include "errcode.h"
#include "fs.h"
#include "fs_ops.h"
#include "snapshot.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

static struct testfs_one fs1;	/* the suite's filesystem */
static struct bch_fs *c;	/* fs1.c (tests that reopen it set c) */

static void setup(void)
{
	testfs_one_up(&fs1, "snapview", 64);
	c = fs1.c;
}

static void teardown(void)
{
	fs1.c = c;
	c = NULL;
	testfs_one_down(&fs1);
}

TestSuite(snapshot_view, .init = setup, .fini = teardown);

#define NIT	9	/* more than the per-thread list keeps (4) */
#define MAXD	64

/* The dirent offsets of directory handle dir, with NIT iterators open at once. */
static unsigned dirents_nested(uint64_t dir, uint64_t *out)
{
	struct bch_view v;
	uint64_t inum = dir;
	struct bch_viter it[NIT];
	bool open[NIT];
	unsigned n[NIT] = { 0 }, ref = 0;
	int err;

	cr_assert_eq(bch_view_enter(c, &v, &inum), 0);
	/* the reference: one iterator alone */
	bch_viter_init(&it[0], c, BCH_BTREE_ID_dirents, POS(inum, 0, 0), POS(inum, UINT64_MAX, 0));
	const struct bch_bkey *k;
	while ((k = bch_viter_next(&it[0], &err)))
		if (k->type == BCH_BKEY_dirent) {
			cr_assert_lt(ref, MAXD);
			out[ref++] = k->p.offset;
		}
	cr_assert_eq(err, 0);
	bch_viter_exit(&it[0]);

	for (unsigned i = 0; i < NIT; i++) {
		bch_viter_init(&it[i], c, BCH_BTREE_ID_dirents, POS(inum, 0, 0), POS(inum, UINT64_MAX, 0));
		open[i] = true;
	}
	/* by turns: iterator i takes i % 3 + 1 steps a round, so their keys interleave */
	for (unsigned left = NIT; left; ) {
		for (unsigned i = 0; i < NIT; i++) {
			for (unsigned s = 0; open[i] && s < i % 3 + 1; s++) {
				k = bch_viter_next(&it[i], &err);
				cr_assert_eq(err, 0);
				if (!k) {
					open[i] = false;
					left--;
					break;
				}
				if (k->type != BCH_BKEY_dirent)
					continue;
				cr_assert_lt(n[i], ref, "iterator %u: more dirents than alone (%u)", i, ref);
				cr_assert_eq(k->p.offset, out[n[i]], "iterator %u, dirent %u: offset %lu, alone %lu",
					     i, n[i], (unsigned long)k->p.offset, (unsigned long)out[n[i]]);
				n[i]++;
			}
		}
	}
	/* closed out of order, then opened again: buffers come back from the list */
	static const unsigned order[NIT] = { 4, 0, 8, 2, 6, 1, 7, 3, 5 };
	for (unsigned i = 0; i < NIT; i++) {
		cr_assert_eq(n[order[i]], ref, "iterator %u saw %u dirents, alone %u", order[i], n[order[i]], ref);
		bch_viter_exit(&it[order[i]]);
	}
	for (unsigned i = 0; i < 2; i++) {
		unsigned m = 0;
		bch_viter_init(&it[i], c, BCH_BTREE_ID_dirents, POS(inum, 0, 0), POS(inum, UINT64_MAX, 0));
		while ((k = bch_viter_next(&it[i], &err)))
			m += k->type == BCH_BKEY_dirent;
		cr_assert_eq(m, ref);
	}
	bch_viter_exit(&it[1]);
	bch_viter_exit(&it[0]);
	bch_view_exit(&v);
	return ref;
}

Test(snapshot_view, nested_iterators_in_a_snapshot)
{
	uint64_t inum, s, dummy[MAXD];
	char name[16];
	unsigned base = dirents_nested(BCH_ROOT_INO, dummy);	/* lost+found */

	for (int i = 0; i < 20; i++) {
		snprintf(name, sizeof(name), "f%02d", i);
		cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &inum), 0);
	}
	cr_assert_eq(bch_fs_subvol_snapshot(c, BCH_ROOT_INO, BCH_ROOT_INO, "s", false, &s), 0, "%s", c->err_msg);
	for (int i = 0; i < 5; i++) {
		snprintf(name, sizeof(name), "f%02d", i);
		cr_assert_eq(bch_fs_unlink(c, BCH_ROOT_INO, name), 0);
		snprintf(name, sizeof(name), "g%02d", i);
		cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &inum), 0);
	}
	/* the root: f05..f19, g00..g04 and the snapshot's name; the snapshot: f00..f19 (and
	 * what the root held before) */
	unsigned nr = dirents_nested(BCH_ROOT_INO, dummy), nr_s = dirents_nested(s, dummy);
	cr_assert_eq(nr, base + 21, "the root: %u dirents, %u before", nr, base);
	cr_assert_eq(nr_s, base + 20, "the snapshot: %u dirents, %u before", nr_s, base);
}

static uint32_t leaf_of(uint32_t subvol)
{
	const struct bch_subvol_info *sv = bch_subvol_get(c, subvol);

	cr_assert(sv, "subvolume %u", subvol);
	return sv->v.snapshot;
}

static bool touched(uint32_t snap, uint64_t inum)
{
	struct bch_bkey *k;
	int r = bch_btree_lookup(c, BCH_BTREE_ID_snapshots, POS(BCH_SNAP_TOUCH_INO(snap), inum, 0), &k);

	if (r == -BCH_ERR_key_not_found)
		return false;
	cr_assert_eq(r, 0);
	bool t = k->type == BCH_BKEY_snapshot_touch;
	free(k);
	return t;
}

static void change(uint64_t dir, const char *name, uint64_t *f)
{
	cr_assert_eq(bch_fs_create(c, dir, name, S_IFREG | 0644, 0, 0, 0, f), 0);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(bch_fs_write(c, *f, (uint64_t)i * 4096, "x", 1), 1);
}

Test(snapshot_view, touch_keys_in_every_leaf)
{
	uint64_t s1, s2, s3, f1, f2, f3, f4, h;

	cr_assert_eq(bch_fs_subvol_snapshot(c, BCH_ROOT_INO, BCH_ROOT_INO, "s1", false, &s1), 0, "%s", c->err_msg);
	uint32_t a = leaf_of(0);
	change(BCH_ROOT_INO, "f1", &f1);
	cr_assert(touched(a, f1 & BCH_HANDLE_INUM_MASK) && touched(a, BCH_ROOT_INO));

	/* a new leaf: the same inodes need keys of their own there */
	cr_assert_eq(bch_fs_subvol_snapshot(c, BCH_ROOT_INO, BCH_ROOT_INO, "s2", false, &s2), 0, "%s", c->err_msg);
	uint32_t b = leaf_of(0);
	cr_assert_neq(a, b);
	cr_assert(!touched(b, f1 & BCH_HANDLE_INUM_MASK));
	cr_assert_eq(bch_fs_write(c, f1, 8192, "y", 1), 1);
	cr_assert(touched(b, f1 & BCH_HANDLE_INUM_MASK), "f1 changed in leaf %u without its touch key", b);

	/* writes in the snapshot s2 (a leaf of its own) */
	change(s2, "f2", &f2);
	uint32_t l2 = leaf_of(bch_handle_subvol(s2));
	cr_assert(touched(l2, f2 & BCH_HANDLE_INUM_MASK) && touched(l2, BCH_ROOT_INO));

	/* s2 deleted and collected: the next snapshot may get its leaf's ID again */
	cr_assert_eq(bch_fs_subvol_delete(c, BCH_ROOT_INO, "s2"), 0, "%s", c->err_msg);
	uint64_t freed;
	cr_assert_eq(bch_snapshot_gc(c, NULL, NULL, &freed), 0);
	cr_assert(!touched(l2, f2 & BCH_HANDLE_INUM_MASK), "a deleted snapshot's touch key stayed");
	cr_assert_eq(bch_fs_subvol_snapshot(c, BCH_ROOT_INO, BCH_ROOT_INO, "s3", false, &s3), 0, "%s", c->err_msg);
	uint32_t l3 = leaf_of(bch_handle_subvol(s3));
	change(s3, "f3", &f3);
	cr_assert(touched(l3, f3 & BCH_HANDLE_INUM_MASK) && touched(l3, BCH_ROOT_INO),
		  "snapshot leaf %u (leaf %u before) lacks its touch keys", l3, l2);
	cr_assert_eq(bch_fs_lookup(c, s3, "f1", &h), 0);
	cr_assert_eq(bch_fs_write(c, h, 0, "z", 1), 1);
	cr_assert(touched(l3, f1 & BCH_HANDLE_INUM_MASK));

	/* and the root's leaf after all that */
	uint32_t d = leaf_of(0);
	change(BCH_ROOT_INO, "f4", &f4);
	cr_assert(touched(d, f4 & BCH_HANDLE_INUM_MASK) && touched(d, BCH_ROOT_INO));
	cr_assert_eq(bch_fs_unlink(c, BCH_ROOT_INO, "f1"), 0);
	cr_assert(touched(d, f1 & BCH_HANDLE_INUM_MASK), "f1 unlinked in leaf %u without its touch key", d);

	/* all of it survives a reopen, and fsck finds nothing */
	char err[256];
	cr_assert_eq(bch_fs_close(c), 0);
	c = testfs_open(fs1.paths, 1, 0, 0, err, sizeof(err));
	cr_assert(c, "reopen: %s", err);
	cr_assert(touched(d, f1 & BCH_HANDLE_INUM_MASK) && touched(l3, f3 & BCH_HANDLE_INUM_MASK));
	testfs_assert_fsck_clean(c, true);
}

/* Is name in directory handle dir, and does it read as want? */
static void expect_file(uint64_t dir, const char *name, const char *want)
{
	uint64_t h;
	char buf[16] = { 0 };
	int r = bch_fs_lookup(c, dir, name, &h);

	if (!want) {
		cr_assert_eq(r, -ENOENT, "%s: lookup gives %d, want ENOENT", name, r);
		return;
	}
	cr_assert_eq(r, 0, "%s: lookup gives %d", name, r);
	cr_assert_eq(bch_fs_read(c, h, 0, buf, sizeof(buf) - 1), (ssize_t)strlen(want), "%s", name);
	cr_assert_str_eq(buf, want, "%s reads %s", name, buf);
}

/* The root subvolume's inode inum is gone (not its older version from a snapshot). */
static void expect_gone(uint64_t inum)
{
	struct stat st;
	int r = bch_fs_getattr(c, inum, &st);

	cr_assert_eq(r, -ENOENT, "inode %lu: getattr gives %d in the root, want ENOENT", (unsigned long)inum, r);
}

static uint64_t made(const char *name, const char *data)
{
	uint64_t f;

	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &f), 0);
	cr_assert_eq(bch_fs_write(c, f, 0, data, strlen(data)), (ssize_t)strlen(data));
	return f;
}

/*
 * Deletes and lookups in a leaf skip the parent for inodes numbered above
 * all the table saw when it was read (snapshot.h invariant (5)): files made
 * before a snapshot are still found through the parent and get whiteouts
 * when deleted after it, and the mark moves with each new snapshot, also
 * after a reopen.
 */
Test(snapshot_view, deletes_above_and_below_the_fresh_mark)
{
	uint64_t s1, s2;
	char err[256];

	uint64_t x = made("x", "x1");
	cr_assert_eq(bch_fs_subvol_snapshot(c, BCH_ROOT_INO, BCH_ROOT_INO, "s1", true, &s1), 0, "%s", c->err_msg);
	uint64_t y = made("y", "y1");		/* after the snapshot: the root's leaf alone */
	uint64_t z = made("z", "z1");
	expect_file(BCH_ROOT_INO, "x", "x1");	/* its keys lie in the parent */
	expect_file(BCH_ROOT_INO, "y", "y1");
	cr_assert_eq(bch_fs_unlink(c, BCH_ROOT_INO, "x"), 0);
	cr_assert_eq(bch_fs_unlink(c, BCH_ROOT_INO, "y"), 0);
	expect_file(BCH_ROOT_INO, "x", NULL);
	expect_file(BCH_ROOT_INO, "y", NULL);
	expect_file(s1, "x", "x1");
	expect_file(s1, "y", NULL);
	expect_gone(x);
	expect_gone(y);

	/* z was made after the table was read; a new snapshot freezes it */
	cr_assert_eq(bch_fs_subvol_snapshot(c, BCH_ROOT_INO, BCH_ROOT_INO, "s2", true, &s2), 0, "%s", c->err_msg);
	uint64_t w = made("w", "w1");
	expect_file(BCH_ROOT_INO, "z", "z1");
	expect_file(BCH_ROOT_INO, "w", "w1");
	cr_assert_eq(bch_fs_unlink(c, BCH_ROOT_INO, "z"), 0);
	cr_assert_eq(bch_fs_truncate(c, w, 0), 0);
	expect_file(BCH_ROOT_INO, "z", NULL);
	expect_file(s2, "z", "z1");
	expect_file(s1, "z", NULL);
	expect_gone(z);

	/* after a reopen the mark is read again: files of before stay whiteouts */
	uint64_t v = made("v", "v1");
	cr_assert_eq(bch_fs_close(c), 0);
	c = testfs_open(fs1.paths, 1, 0, 0, err, sizeof(err));
	cr_assert(c, "reopen: %s", err);
	uint64_t s3;
	cr_assert_eq(bch_fs_subvol_snapshot(c, BCH_ROOT_INO, BCH_ROOT_INO, "s3", true, &s3), 0, "%s", c->err_msg);
	expect_file(BCH_ROOT_INO, "v", "v1");
	cr_assert_eq(bch_fs_unlink(c, BCH_ROOT_INO, "v"), 0);
	expect_file(BCH_ROOT_INO, "v", NULL);
	expect_gone(v);
	expect_file(s3, "v", "v1");
	expect_file(s2, "v", NULL);
	expect_file(s2, "z", "z1");
	expect_file(s1, "x", "x1");
	testfs_assert_fsck_clean(c, true);
}

/* bch_vlookup() and bch_vlookup_buf() at p, in the current view: the same answer. */
static void same_lookup(unsigned id, struct bch_bpos p, const char *where)
{
	struct bch_bkey *k = NULL;
	struct bch_bkey_buf buf;
	const struct bch_bkey *kb = NULL;
	int r1 = bch_vlookup(c, id, p, &k), r2 = bch_vlookup_buf(c, id, p, &buf, &kb);

	cr_assert_eq(r1, r2, "%s: btree %u %lu:%lu: vlookup %d, vlookup_buf %d", where, id,
		     (unsigned long)p.inode, (unsigned long)p.offset, r1, r2);
	if (!r1) {
		cr_assert(k->u64s == kb->u64s && !memcmp(k, kb, bkey_bytes(k)),
			  "%s: btree %u %lu:%lu: another key", where, id, (unsigned long)p.inode,
			  (unsigned long)p.offset);
		free(k);
	}
	c->err_msg[0] = 0;
}

/* Every inode number up to last, in the view of handle h (a subvolume's root). */
static void same_lookups(uint64_t h, uint64_t last, const char *where)
{
	struct bch_view v;
	uint64_t inum = h;

	cr_assert_eq(bch_view_enter(c, &v, &inum), 0);
	for (uint64_t i = 0; i <= last + 2; i++)
		same_lookup(BCH_BTREE_ID_inodes, POS(0, i, 0), where);
	bch_view_exit(&v);
}

/*
 * An inode read takes the key into the caller's buffer (bch_vlookup_buf(),
 * no malloc): it sees what bch_vlookup() sees, in a subvolume with
 * snapshots behind it (keys in the parent, whiteouts over them, inodes
 * above the fresh mark, deleted ones), in the snapshots, and where a
 * whiteout lies at a fresh inode's position (put there raw: deletes of
 * fresh inodes write none).
 */
Test(snapshot_view, inode_reads_into_a_buffer_see_what_lookups_see)
{
	uint64_t s1, s2;

	uint64_t x = made("x", "x1"), x2 = made("x2", "x2");
	cr_assert_eq(bch_fs_subvol_snapshot(c, BCH_ROOT_INO, BCH_ROOT_INO, "s1", true, &s1), 0, "%s", c->err_msg);
	uint64_t y = made("y", "y1"), y2 = made("y2", "y2");
	cr_assert_eq(bch_fs_unlink(c, BCH_ROOT_INO, "x"), 0);	/* a whiteout over s1's */
	cr_assert_eq(bch_fs_unlink(c, BCH_ROOT_INO, "y"), 0);	/* fresh: a plain delete */
	cr_assert_eq(bch_fs_subvol_snapshot(c, BCH_ROOT_INO, BCH_ROOT_INO, "s2", false, &s2), 0, "%s", c->err_msg);
	uint64_t z = made("z", "z1");
	uint64_t last = z & BCH_HANDLE_INUM_MASK;

	same_lookups(BCH_ROOT_INO, last, "the root");
	same_lookups(s1, last, "s1");
	same_lookups(s2, last, "s2");

	/* a whiteout where a fresh inode's key was */
	struct bch_view v;
	struct btree_trans *t;
	struct bch_bkey w = { .u64s = BCH_BKEY_U64s, .type = BCH_BKEY_whiteout,
			      .p = POS(0, z & BCH_HANDLE_INUM_MASK, leaf_of(0)) };
	bch_view_enter_raw(c, &v);
	cr_assert_eq(bch_trans_init(c, &t), 0);
	cr_assert_eq(bch_trans_update(t, BCH_BTREE_ID_inodes, &w), 0);
	cr_assert_eq(bch_trans_commit(t, 0), 0, "%s", c->err_msg);
	bch_trans_exit(t);
	bch_view_exit(&v);
	same_lookups(BCH_ROOT_INO, last, "the root, z whited out");
	expect_gone(z);
	(void)x2;
	(void)y2;
	(void)x;
	(void)y;
}
