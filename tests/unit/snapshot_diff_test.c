// SPDX-License-Identifier: GPL-2.0
/*
 * snapshot_diff_test.c - bch_snapshot_diff() against a model:
 *   - a snapshot of the root, then seeded random operations in the root
 *     (writes at block offsets, truncates, unlinks, renames, chmod, xattrs,
 *     new files): every inode's flags, its byte ranges (the union of the
 *     blocks written, up to the larger size) and its metadata fields equal
 *     what the model recorded; untouched files are not reported;
 *   - the reverse diff swaps added and deleted;
 *   - unrelated subvolumes (a new subvolume starts a tree of its own) give
 *     -EXDEV; a subvolume against itself gives nothing.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bcachefs.h"
#include "fs.h"
#include "fs_ops.h"
#include "snapshot.h"
#include "snapshot_diff.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define NFILES	24
#define BLOCK	4096
#define NBLOCKS	16

static struct testfs_one fs1;	/* the suite's filesystem */
static struct bch_fs *c;	/* fs1.c (tests that reopen it set c) */

static void setup(void)
{
	testfs_one_up(&fs1, "sdiff", 128);
	c = fs1.c;
}

static void teardown(void)
{
	fs1.c = c;
	c = NULL;
	testfs_one_down(&fs1);
}

TestSuite(snapshot_diff, .init = setup, .fini = teardown);

struct model {
	uint64_t	inum;
	char		name[32];
	bool		gone, renamed, added, chmod, xattr;
	uint64_t	old_size, size;
	bool		dirty[NBLOCKS * 2];	/* blocks written since the snapshot */
};

static struct model m[NFILES + 8];
static unsigned nm;

static void write_blocks(struct model *f, unsigned first, unsigned nr)
{
	char *buf = malloc((size_t)nr * BLOCK);

	cr_assert(buf);
	memset(buf, 'a' + (int)(random() % 26), (size_t)nr * BLOCK);
	cr_assert_eq(bch_fs_write(c, f->inum, (uint64_t)first * BLOCK, buf, (size_t)nr * BLOCK),
		     (ssize_t)nr * BLOCK);
	free(buf);
	for (unsigned b = first; b < first + nr; b++)
		f->dirty[b] = true;
	if ((uint64_t)(first + nr) * BLOCK > f->size)
		f->size = (uint64_t)(first + nr) * BLOCK;
}

static struct model *new_file(const char *name, unsigned blocks)
{
	struct model *f = &m[nm++];

	snprintf(f->name, sizeof(f->name), "%s", name);
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &f->inum), 0);
	if (blocks)
		write_blocks(f, 0, blocks);
	return f;
}

/* The ranges the model expects: dirty blocks, merged, clipped to the larger size. */
static void check_ranges(const struct model *f, const struct bch_sdiff_entry *e)
{
	uint64_t size = f->size > f->old_size ? f->size : f->old_size;
	size_t k = 0;

	for (unsigned b = 0; b < NBLOCKS * 2;) {
		if (!f->dirty[b] || (uint64_t)b * BLOCK >= size) {
			b++;
			continue;
		}
		unsigned s = b;
		while (b < NBLOCKS * 2 && f->dirty[b])
			b++;
		uint64_t end = (uint64_t)b * BLOCK < size ? (uint64_t)b * BLOCK : size;
		cr_assert_lt(k, e->nr_ranges, "%s: range %u..%u missing", f->name, s, b);
		cr_expect_eq(e->ranges[k].start, (uint64_t)s * BLOCK, "%s: range %zu starts %lu, want %lu",
			     f->name, k, (unsigned long)e->ranges[k].start, (unsigned long)s * BLOCK);
		cr_expect_eq(e->ranges[k].end, end, "%s: range %zu ends %lu, want %lu", f->name, k,
			     (unsigned long)e->ranges[k].end, (unsigned long)end);
		k++;
	}
	cr_expect_eq(k, e->nr_ranges, "%s: %zu ranges, want %zu", f->name, e->nr_ranges, k);
}

static const struct bch_sdiff_entry *find(const struct bch_sdiff *d, uint64_t inum)
{
	for (size_t i = 0; i < d->nr; i++)
		if (d->e[i].inum == inum && !d->e[i].subvol)
			return &d->e[i];
	return NULL;
}

Test(snapshot_diff, model)
{
	uint64_t snap_root;
	unsigned seed = getenv("SDIFF_SEED") ? (unsigned)atoi(getenv("SDIFF_SEED")) : 30;

	srandom(seed);
	cr_log_info("seed %u (SDIFF_SEED)", seed);
	for (unsigned i = 0; i < NFILES; i++) {
		char name[32];
		snprintf(name, sizeof(name), "f%02u", i);
		new_file(name, 1 + (unsigned)(random() % NBLOCKS));
	}
	for (unsigned i = 0; i < nm; i++) {
		m[i].old_size = m[i].size;
		memset(m[i].dirty, 0, sizeof(m[i].dirty));
	}
	cr_assert_eq(bch_fs_subvol_snapshot(c, BCH_ROOT_INO, BCH_ROOT_INO, "snap", true, &snap_root), 0);

	for (unsigned i = 0; i < NFILES; i++) {
		struct model *f = &m[i];
		switch (random() % 8) {
		case 0:		/* a few blocks rewritten in place */
		case 1: {
			unsigned first = (unsigned)(random() % NBLOCKS), nr = 1 + (unsigned)(random() % 3);
			write_blocks(f, first, nr);
			break;
		}
		case 2:
			cr_assert_eq(bch_fs_unlink(c, BCH_ROOT_INO, f->name), 0);
			f->gone = true;
			break;
		case 3: {
			char to[32];
			snprintf(to, sizeof(to), "r%02u", i);
			cr_assert_eq(bch_fs_rename(c, BCH_ROOT_INO, f->name, BCH_ROOT_INO, to, 0), 0);
			snprintf(f->name, sizeof(f->name), "%s", to);
			f->renamed = true;
			break;
		}
		case 4: {
			struct bch_setattr sa = { .valid = BCH_SETATTR_MODE, .mode = 0600 };
			cr_assert_eq(bch_fs_setattr(c, f->inum, &sa), 0);
			f->chmod = true;
			break;
		}
		case 5:
			cr_assert_eq(bch_fs_setxattr(c, f->inum, "user.t", "v", 1, 0), 0);
			f->xattr = true;
			break;
		case 6: {	/* truncated to half its blocks: the rest is a change */
			unsigned nb = (unsigned)(f->size / BLOCK);
			cr_assert_eq(bch_fs_truncate(c, f->inum, (uint64_t)(nb / 2) * BLOCK), 0);
			for (unsigned b = nb / 2; b < nb; b++)
				f->dirty[b] = true;
			f->size = (uint64_t)(nb / 2) * BLOCK;
			break;
		}
		default:	/* untouched */
			break;
		}
	}
	for (unsigned i = 0; i < 4; i++) {
		char name[32];
		snprintf(name, sizeof(name), "new%u", i);
		new_file(name, 1 + i)->added = true;
	}

	struct bch_sdiff d;
	uint32_t snap_sv = bch_fs_subvol_of(snap_root);
	cr_assert_eq(bch_snapshot_diff(c, snap_sv, 0, &d), 0, "%s", c->err_msg);
	if (getenv("SDIFF_DEBUG"))
		for (size_t i = 0; i < d.nr; i++)
			fprintf(stderr, "%lu %x %x %s %s\n", (unsigned long)d.e[i].inum, d.e[i].flags, d.e[i].meta,
				d.e[i].old_path ?: "-", d.e[i].new_path ?: "-");
	for (unsigned i = 0; i < nm; i++) {
		struct model *f = &m[i];
		const struct bch_sdiff_entry *e = find(&d, f->inum);
		if (getenv("SDIFF_DEBUG"))
			fprintf(stderr, "model %s %lu gone %d ren %d add %d chmod %d x %d size %lu->%lu\n", f->name,
				(unsigned long)f->inum, f->gone, f->renamed, f->added, f->chmod, f->xattr,
				(unsigned long)f->old_size, (unsigned long)f->size);
		bool data = !f->gone && !f->added && (f->size != f->old_size ||
						      memchr(f->dirty, 1, sizeof(f->dirty)));
		bool any = f->gone || f->added || f->renamed || f->chmod || f->xattr || data;
		if (!any) {
			cr_expect_null(e, "%s: reported (flags %x) but not changed", f->name, e ? e->flags : 0);
			continue;
		}
		cr_assert_not_null(e, "%s: changed but not reported", f->name);
		if (f->gone) {
			cr_expect_eq(e->flags, BCH_SDIFF_DELETED, "%s: flags %x", f->name, e->flags);
			continue;
		}
		if (f->added) {
			cr_expect_eq(e->flags, BCH_SDIFF_ADDED, "%s: flags %x", f->name, e->flags);
			continue;
		}
		cr_expect_eq(!!(e->flags & BCH_SDIFF_RENAMED), f->renamed, "%s: flags %x", f->name, e->flags);
		cr_expect_eq(!!(e->flags & BCH_SDIFF_DATA), data, "%s: flags %x", f->name, e->flags);
		cr_expect_eq(!!(e->meta & (1U << BCH_SDIFF_F_mode)), f->chmod, "%s: meta %x", f->name, e->meta);
		cr_expect_eq(!!(e->meta & (1U << BCH_SDIFF_F_xattrs)), f->xattr, "%s: meta %x", f->name, e->meta);
		if (data)
			check_ranges(f, e);
		char want[40];
		snprintf(want, sizeof(want), "/%s", f->name);
		cr_expect_str_eq(e->new_path, want);
	}
	/* the snapshot's own name is new in the root */
	bool snap_added = false;
	for (size_t i = 0; i < d.nr; i++)
		if (d.e[i].subvol && d.e[i].inum == snap_sv && d.e[i].flags == BCH_SDIFF_ADDED)
			snap_added = !strcmp(d.e[i].new_path, "/snap");
	cr_expect(snap_added, "the snapshot's name in the root is not reported as added");
	size_t nr = d.nr;
	bch_snapshot_diff_exit(&d);

	/* the reverse swaps added and deleted */
	cr_assert_eq(bch_snapshot_diff(c, 0, snap_sv, &d), 0, "%s", c->err_msg);
	cr_expect_eq(d.nr, nr);
	for (unsigned i = 0; i < nm; i++) {
		const struct bch_sdiff_entry *e = find(&d, m[i].inum);
		if (m[i].gone)
			cr_expect(e && e->flags == BCH_SDIFF_ADDED, "%s: reverse of a deletion", m[i].name);
		if (m[i].added)
			cr_expect(e && e->flags == BCH_SDIFF_DELETED, "%s: reverse of an addition", m[i].name);
	}
	bch_snapshot_diff_exit(&d);

	/* itself: nothing */
	cr_assert_eq(bch_snapshot_diff(c, snap_sv, snap_sv, &d), 0);
	cr_expect_eq(d.nr, 0);
	bch_snapshot_diff_exit(&d);

	/* a new subvolume has its own snapshot tree */
	uint64_t other;
	cr_assert_eq(bch_fs_subvol_create(c, BCH_ROOT_INO, "other", 0755, 0, 0, &other), 0);
	cr_expect_eq(bch_snapshot_diff(c, bch_fs_subvol_of(other), 0, &d), -EXDEV);
	cr_expect(strstr(c->err_msg, "unrelated snapshots"), "message: %s", c->err_msg);
	bch_snapshot_diff_exit(&d);
	cr_expect_eq(bch_snapshot_diff(c, 777, 0, &d), -ESTALE);
	bch_snapshot_diff_exit(&d);
}
