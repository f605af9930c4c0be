// SPDX-License-Identifier: GPL-2.0
/*
 * fs_ops_test.c - the POSIX layer's edge cases:
 *   - every error path of fs_ops, with the errno a POSIX caller expects;
 *   - dirents and xattrs with forced hash collisions (every name in a
 *     handful of slots): random inserts, renames and deletes against a
 *     model, so probing across whiteouts is exercised;
 *   - the set-id rules of Linux, case by case;
 *   - xattr values up to 64 KiB kept in pieces: every size class, replaced
 *     growing and shrinking, with 64 KiB and 4 KiB nodes (one transaction or
 *     several), no piece left behind, fsck clean; power cuts during changes
 *     leave whole values and at most orphaned pieces (fsck removes them);
 *   - extent overlaps, exhaustively over a 16-block file: every write and
 *     punch range over several starting layouts, compared with a model of
 *     the blocks, with i_sectors checked.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "bcachefs.h"
#include "bcachefs_format.h"
#include "btree.h"
#include "fsck.h"
#include "fs.h"
#include "fs_ops.h"
#include "hash_table.h"
#include "tests/lib/iorecord.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

static struct testfs_one fs1;	/* the suite's filesystem */
static struct bch_fs *c;	/* fs1.c (tests that reopen it set c) */

static void setup(void)
{
	testfs_one_up(&fs1, "fsops", 64);
	c = fs1.c;
}

static void teardown(void)
{
	fs1.c = c;
	c = NULL;
	bch_hash_test_mask = ~0ULL;
	testfs_one_down(&fs1);
}

static uint64_t mk(uint64_t dir, const char *name, mode_t mode)
{
	uint64_t inum;
	int r = bch_fs_create(c, dir, name, mode, 0, 0, 0, &inum);
	cr_assert_eq(r, 0, "create %s: %d", name, r);
	return inum;
}

TestSuite(fs_ops, .init = setup, .fini = teardown);

Test(fs_ops, error_paths)
{
	const uint64_t root = BCH_ROOT_INO;
	char long_name[300], buf[64];
	uint64_t inum, d = mk(root, "d", S_IFDIR | 0755), f = mk(root, "f", S_IFREG | 0644);

	memset(long_name, 'a', 256);
	long_name[256] = 0;
	/* names */
	cr_assert_eq(bch_fs_create(c, root, long_name, S_IFREG, 0, 0, 0, NULL), -ENAMETOOLONG);
	long_name[255] = 0;
	cr_assert_eq(bch_fs_create(c, root, long_name, S_IFREG, 0, 0, 0, NULL), 0, "255 bytes is allowed");
	cr_assert_eq(bch_fs_lookup(c, root, long_name, &inum), 0);
	cr_assert_eq(bch_fs_create(c, root, "", S_IFREG, 0, 0, 0, NULL), -ENOENT);
	cr_assert_eq(bch_fs_create(c, root, "a/b", S_IFREG, 0, 0, 0, NULL), -EINVAL);
	cr_assert_eq(bch_fs_create(c, root, ".", S_IFDIR, 0, 0, 0, NULL), -EEXIST);
	cr_assert_eq(bch_fs_create(c, root, "f", S_IFREG, 0, 0, 0, NULL), -EEXIST);
	cr_assert_eq(bch_fs_create(c, f, "x", S_IFREG, 0, 0, 0, NULL), -ENOTDIR);
	cr_assert_eq(bch_fs_create(c, 999999, "x", S_IFREG, 0, 0, 0, NULL), -ENOENT);
	cr_assert_eq(bch_fs_lookup(c, root, "nope", &inum), -ENOENT);
	cr_assert_eq(bch_fs_lookup(c, f, "x", &inum), -ENOTDIR);
	cr_assert_eq(bch_fs_lookup(c, d, "..", &inum), 0);
	cr_assert_eq(inum, root);
	/* unlink / rmdir */
	cr_assert_eq(bch_fs_unlink(c, root, "d"), -EISDIR);
	cr_assert_eq(bch_fs_unlink(c, root, "nope"), -ENOENT);
	cr_assert_eq(bch_fs_rmdir(c, root, "f"), -ENOTDIR);
	cr_assert_eq(bch_fs_rmdir(c, root, "."), -EINVAL);
	mk(d, "inside", S_IFREG | 0644);
	cr_assert_eq(bch_fs_rmdir(c, root, "d"), -ENOTEMPTY);
	/* link */
	cr_assert_eq(bch_fs_link(c, d, root, "dlink"), -EPERM);
	cr_assert_eq(bch_fs_link(c, f, root, "f"), -EEXIST);
	cr_assert_eq(bch_fs_link(c, f, f, "x"), -ENOTDIR);
	/* rename */
	cr_assert_eq(bch_fs_rename(c, root, "nope", root, "x", 0), -ENOENT);
	cr_assert_eq(bch_fs_rename(c, root, "d", d, "sub", 0), -EINVAL, "into itself");
	cr_assert_eq(bch_fs_rename(c, root, "f", root, "d", 0), -EISDIR);
	cr_assert_eq(bch_fs_rename(c, root, "d", root, "f", 0), -ENOTDIR);
	mk(root, "e", S_IFDIR | 0755);
	cr_assert_eq(bch_fs_rename(c, root, "e", root, "d", 0), -ENOTEMPTY);
	cr_assert_eq(bch_fs_rename(c, root, "f", root, "d", BCH_RENAME_NOREPLACE), -EEXIST);
	cr_assert_eq(bch_fs_rename(c, root, "f", root, "zz", BCH_RENAME_EXCHANGE), -ENOENT);
	cr_assert_eq(bch_fs_rename(c, root, "f", root, "zz", 3), -EINVAL);
	/* data */
	cr_assert_eq(bch_fs_write(c, d, 0, "x", 1), -EISDIR);
	cr_assert_eq(bch_fs_read(c, d, 0, buf, 1), -EISDIR);
	cr_assert_eq(bch_fs_write(c, f, INT64_MAX, "x", 1), -EFBIG);
	cr_assert_eq(bch_fs_truncate(c, f, (uint64_t)INT64_MAX + 1), -EFBIG);
	cr_assert_eq(bch_fs_truncate(c, d, 0), -EISDIR);
	cr_assert_eq(bch_fs_fallocate(c, f, FALLOC_FL_PUNCH_HOLE, 0, 4096), -EINVAL, "punch needs keep_size");
	cr_assert_eq(bch_fs_fallocate(c, f, FALLOC_FL_UNSHARE_RANGE, 0, 4096), -EOPNOTSUPP);
	cr_assert_eq(bch_fs_fallocate(c, f, FALLOC_FL_COLLAPSE_RANGE, 0, 4096), -EINVAL, "not inside the file");
	cr_assert_eq(bch_fs_fallocate(c, f, FALLOC_FL_INSERT_RANGE, 0, 100), -EINVAL, "not whole blocks");
	cr_assert_eq(bch_fs_fallocate(c, f, 0, 0, 0), -EINVAL);
	cr_assert_eq(bch_fs_seek(c, f, 0, SEEK_DATA), -ENXIO, "empty file");
	cr_assert_eq(bch_fs_readlink(c, f, buf, sizeof(buf)), -EINVAL);
	cr_assert_eq(bch_fs_symlink(c, root, "s", "", 0, 0, NULL), -ENOENT);
	char *long_target = malloc(5000);
	memset(long_target, 'x', 4999);
	long_target[4999] = 0;
	cr_assert_eq(bch_fs_symlink(c, root, "s", long_target, 0, 0, NULL), -ENAMETOOLONG);
	free(long_target);
	/* xattrs */
	cr_assert_eq(bch_fs_getxattr(c, f, "user.none", buf, sizeof(buf)), -ENODATA);
	cr_assert_eq(bch_fs_setxattr(c, f, "bogus.x", "v", 1, 0), -EOPNOTSUPP);
	cr_assert_eq(bch_fs_setxattr(c, f, "user.", "v", 1, 0), -EINVAL);
	cr_assert_eq(bch_fs_setxattr(c, f, "user.x", "v", 1, XATTR_REPLACE), -ENODATA);
	cr_assert_eq(bch_fs_setxattr(c, f, "user.x", "v", 1, XATTR_CREATE), 0);
	cr_assert_eq(bch_fs_setxattr(c, f, "user.x", "v", 1, XATTR_CREATE), -EEXIST);
	cr_assert_eq(bch_fs_getxattr(c, f, "user.x", buf, 0), 1, "size query");
	static char big[BCH_XATTR_SIZE_MAX + 2];
	cr_assert_eq(bch_fs_setxattr(c, f, "user.big", big, 3000, 0), 0);
	cr_assert_eq(bch_fs_setxattr(c, f, "user.max", big, BCH_XATTR_SIZE_MAX, 0), 0);
	cr_assert_eq(bch_fs_setxattr(c, f, "user.huge", big, BCH_XATTR_SIZE_MAX + 1, 0), -E2BIG);
	cr_assert_eq(bch_fs_setxattr(c, f, "user.max", big, BCH_XATTR_SIZE_MAX + 1, 0), -E2BIG);
	cr_assert_eq(bch_fs_listxattr(c, f, buf, 3), -ERANGE);
	cr_assert_eq(bch_fs_removexattr(c, f, "user.none"), -ENODATA);
	cr_assert_eq(bch_fs_setxattr(c, f, "system.posix_acl_access", "acl", 3, 0), 0);
	cr_assert_eq(bch_fs_getxattr(c, f, "system.posix_acl_access", buf, sizeof(buf)), 3);
	/* options */
	cr_assert_eq(bch_fs_set_inode_opt(c, d, "compression", "zstd"), 0);
	cr_assert_eq(bch_fs_set_inode_opt(c, d, "block_size", "4k"), -EINVAL);
	cr_assert_eq(bch_fs_set_inode_opt(c, d, "compression", "bogus"), -EINVAL);
	/* a read-only filesystem refuses every change */
	cr_assert_eq(bch_fs_close(c), 0);
	char err[256];
	c = testfs_open(fs1.paths, 1, TESTFS_RO, 0, err, sizeof(err));
	cr_assert(c);
	cr_assert_eq(bch_fs_create(c, root, "new", S_IFREG, 0, 0, 0, NULL), -EROFS);
	cr_assert_eq(bch_fs_write(c, f, 0, "x", 1), -EROFS);
	cr_assert_eq(bch_fs_unlink(c, root, "f"), -EROFS);
	cr_assert_eq(bch_fs_setxattr(c, f, "user.y", "v", 1, 0), -EROFS);
	struct bch_setattr sa = { .valid = BCH_SETATTR_MODE, .mode = 0600 };
	cr_assert_eq(bch_fs_setattr(c, f, &sa), -EROFS);
}

/* ------------------------------------------------------- set-id rules */

/* The rules of Linux's fs/inode.c and fs/attr.c, case by case. */
Test(fs_ops, setid_rules)
{
	const gid_t groups[] = { 10, 4242 };
	const struct bch_caller member = { .uid = 1000, .gid = 100, .groups = groups, .nr_groups = 2 };
	const struct bch_caller other = { .uid = 1000, .gid = 100, .groups = groups, .nr_groups = 1 };
	const struct bch_caller root = { .uid = 0, .gid = 0, .cap_fsetid = true };
	static const struct {
		mode_t	mode;
		bool	is_member;
		mode_t	kill;
	} kill[] = {
		{ S_IFREG | 04777, false, S_ISUID },
		{ S_IFREG | 02777, true, S_ISGID },		/* group-execute: always */
		{ S_IFREG | 02666, true, 0 },			/* no group-execute, member */
		{ S_IFREG | 02666, false, S_ISGID },		/* no group-execute, not a member */
		{ S_IFREG | 06766, false, S_ISUID | S_ISGID },
		{ S_IFREG | 06766, true, S_ISUID },
		{ S_IFREG | 00777, false, 0 },
		{ S_IFDIR | 06777, false, 0 },			/* regular files only */
	};

	for (unsigned i = 0; i < sizeof(kill) / sizeof(kill[0]); i++) {
		const struct bch_caller *cr = kill[i].is_member ? &member : &other;
		cr_assert_eq(bch_kill_priv_bits(kill[i].mode, 4242, cr), kill[i].kill, "case %u", i);
		cr_assert_eq(bch_kill_priv_bits(kill[i].mode, 4242, &root), 0, "case %u: CAP_FSETID", i);
	}
	cr_assert(bch_caller_in_group(&other, 100), "the fsgid counts");
	/* creation in a setgid directory of group 4242 */
	cr_assert_eq(bch_mode_strip_sgid(S_IFDIR | 02777, 4242, &other, S_IFREG | 02755), S_IFREG | 0755);
	cr_assert_eq(bch_mode_strip_sgid(S_IFDIR | 02777, 4242, &member, S_IFREG | 02755), S_IFREG | 02755);
	cr_assert_eq(bch_mode_strip_sgid(S_IFDIR | 02777, 4242, &root, S_IFREG | 02755), S_IFREG | 02755);
	cr_assert_eq(bch_mode_strip_sgid(S_IFDIR | 02777, 4242, &other, S_IFREG | 02745), S_IFREG | 02745,
		     "no group-execute: kept");
	cr_assert_eq(bch_mode_strip_sgid(S_IFDIR | 00777, 4242, &other, S_IFREG | 02755), S_IFREG | 02755,
		     "not a setgid directory");
	cr_assert_eq(bch_mode_strip_sgid(S_IFDIR | 02777, 4242, &other, S_IFDIR | 02755), S_IFDIR | 02755);
	mode_t mode = S_IFDIR | 0755;
	gid_t gid = 100;
	bch_inode_init_owner(S_IFDIR | 02777, 4242, &mode, &gid);
	cr_assert_eq(mode, S_IFDIR | 02755);
	cr_assert_eq(gid, 4242);
	mode = S_IFREG | 0644;
	gid = 100;
	bch_inode_init_owner(S_IFDIR | 02777, 4242, &mode, &gid);
	cr_assert_eq(mode, S_IFREG | 0644);
	cr_assert_eq(gid, 4242);
	bch_inode_init_owner(S_IFDIR | 0777, 7, &mode, &gid);
	cr_assert_eq(gid, 4242, "not setgid: unchanged");
	/* bch_fs_kill_priv: one inode update, the bits it cleared */
	uint64_t f = mk(BCH_ROOT_INO, "f", S_IFREG | 06766);
	struct bch_setattr sa = { .valid = BCH_SETATTR_GID, .gid = 4242 };
	struct stat st;
	cr_assert_eq(bch_fs_setattr(c, f, &sa), 0);
	cr_assert_eq(bch_fs_kill_priv(c, f, &member), S_ISUID);
	cr_assert_eq(bch_fs_kill_priv(c, f, &member), 0);
	cr_assert_eq(bch_fs_kill_priv(c, f, &other), S_ISGID);
	cr_assert_eq(bch_fs_getattr(c, f, &st), 0);
	cr_assert_eq(st.st_mode, S_IFREG | 0766);
}

/* ------------------------------------------------------ large xattrs */

/* Pieces stored for inum (above the hash range). */
static unsigned nr_pieces(uint64_t inum)
{
	struct btree_iter it;
	const struct bch_bkey *k;
	unsigned n = 0;
	int err = 0;

	bch_btree_iter_init(&it, c, BCH_BTREE_ID_xattrs, POS(inum, BCH_XATTR_PIECE_MIN, 0),
			    POS(inum, UINT64_MAX, 0));
	while ((k = bch_btree_iter_next(&it, &err)))
		n += k->type == BCH_BKEY_xattr_piece;
	bch_btree_iter_exit(&it);
	cr_assert_eq(err, 0);
	return n;
}

static void fill(uint8_t *v, size_t len, uint32_t seed)
{
	uint32_t x = seed * 2654435761U + 1;

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		v[i] = x;
	}
}

static void check_value(uint64_t inum, const char *name, size_t len, uint32_t seed)
{
	static uint8_t want[BCH_XATTR_SIZE_MAX], got[BCH_XATTR_SIZE_MAX + 1];

	fill(want, len, seed);
	cr_assert_eq(bch_fs_getxattr(c, inum, name, NULL, 0), (ssize_t)len, "%s: size query", name);
	if (len > 1)	/* (size 0 is a size query) */
		cr_assert_eq(bch_fs_getxattr(c, inum, name, got, len - 1), -ERANGE, "%s: %zu", name, len);
	memset(got, 0xa5, sizeof(got));
	cr_assert_eq(bch_fs_getxattr(c, inum, name, got, sizeof(got)), (ssize_t)len, "%s", name);
	cr_assert(!memcmp(want, got, len), "%s: %zu bytes differ", name, len);
	cr_assert_eq(got[len], 0xa5, "%s: written past the value", name);
}

static void fsck_clean(void)
{
	char err[256];

	cr_assert_eq(bch_fs_close(c), 0);
	c = testfs_open(fs1.paths, 1, TESTFS_FSCK | TESTFS_RO, 0, err, sizeof(err));
	cr_assert(c, "open for fsck: %s", err);
	testfs_assert_fsck_clean(c, false);
	cr_assert_eq(bch_fs_close(c), 0);
	c = testfs_open(fs1.paths, 1, 0, 0, err, sizeof(err));
	cr_assert(c, "reopen: %s", err);
}

static unsigned pieces_for(const char *name, size_t len)
{
	size_t name_len = strlen(name) - strlen("user.");
	return name_len + len <= BCH_XATTR_PIECE_BYTES ? 0
		: (len + BCH_XATTR_PIECE_BYTES - 1) / BCH_XATTR_PIECE_BYTES;
}

static void large_xattrs(void)
{
	static uint8_t v[BCH_XATTR_SIZE_MAX + 1];
	static const size_t sizes[] = { 0, 1, 1019, 1020, 1021, 1024, 1025, 2048, 2049, 3000,
					32768, 65535, 65536, 7, 65536, 40000, 1 };
	const size_t nr = sizeof(sizes) / sizeof(sizes[0]);
	uint64_t f = mk(BCH_ROOT_INO, "f", S_IFREG | 0644), g = mk(BCH_ROOT_INO, "g", S_IFREG | 0644);
	char names[64];
	ssize_t len;

	cr_log_info("large xattrs: data from xorshift32, seeds = the step number");
	/* one name through every size: each step replaces the last */
	for (unsigned i = 0; i < nr; i++) {
		fill(v, sizes[i], i + 1);
		cr_assert_eq(bch_fs_setxattr(c, f, "user.v", v, sizes[i], i ? XATTR_REPLACE : XATTR_CREATE),
			     0, "step %u: %zu bytes", i, sizes[i]);
		check_value(f, "user.v", sizes[i], i + 1);
		cr_assert_eq(nr_pieces(f), pieces_for("user.v", sizes[i]), "step %u: %zu bytes", i, sizes[i]);
	}
	/* too big: E2BIG, and the old value stays */
	cr_assert_eq(bch_fs_setxattr(c, f, "user.v", v, BCH_XATTR_SIZE_MAX + 1, 0), -E2BIG);
	check_value(f, "user.v", sizes[nr - 1], nr);
	/* several large values on one inode, and one on another */
	for (unsigned i = 0; i < 3; i++) {
		fill(v, BCH_XATTR_SIZE_MAX - i, 100 + i);
		snprintf(names, sizeof(names), "user.big%u", i);
		cr_assert_eq(bch_fs_setxattr(c, f, names, v, BCH_XATTR_SIZE_MAX - i, XATTR_CREATE), 0);
	}
	fill(v, 5000, 200);
	cr_assert_eq(bch_fs_setxattr(c, g, "trusted.t", v, 5000, 0), 0);
	cr_assert_eq(bch_fs_setxattr(c, f, "user.big0", v, 10, XATTR_CREATE), -EEXIST);
	cr_assert_eq(nr_pieces(f), 3 * BCH_XATTR_PIECES_MAX);
	len = bch_fs_listxattr(c, f, (char *)v, sizeof(v));
	cr_assert_eq(len, (ssize_t)sizeof("user.v\0user.big0\0user.big1\0user.big2") - 1 + 1,
		     "every name once, no piece: %zd", len);
	/* kept across a close (and fsck agrees) */
	fsck_clean();
	check_value(f, "user.v", sizes[nr - 1], nr);
	for (unsigned i = 0; i < 3; i++) {
		snprintf(names, sizeof(names), "user.big%u", i);
		check_value(f, names, BCH_XATTR_SIZE_MAX - i, 100 + i);
	}
	check_value(g, "trusted.t", 5000, 200);
	/* remove one: its pieces go; unlink: everything goes */
	cr_assert_eq(bch_fs_removexattr(c, f, "user.big1"), 0);
	cr_assert_eq(bch_fs_getxattr(c, f, "user.big1", NULL, 0), -ENODATA);
	cr_assert_eq(nr_pieces(f), 2 * BCH_XATTR_PIECES_MAX);
	check_value(f, "user.big2", BCH_XATTR_SIZE_MAX - 2, 102);
	cr_assert_eq(bch_fs_unlink(c, BCH_ROOT_INO, "f"), 0);
	cr_assert_eq(nr_pieces(f), 0);
	fsck_clean();
	check_value(g, "trusted.t", 5000, 200);
}

/* 64 KiB nodes: a 64 KiB value takes several transactions */
Test(fs_ops, xattr_large_values)
{
	large_xattrs();
}

/* the smallest nodes the format allows: one piece per transaction */
Test(fs_ops, xattr_large_values_4k_nodes)
{
	char err[256];

	cr_assert_eq(bch_fs_close(c), 0);
	unlink(fs1.paths[0]);	/* a new file: not the old image's bytes under the new one */
	testfs_format(fs1.dir, 1, 64, 4096, 1, fs1.paths);
	c = testfs_open(fs1.paths, 1, 0, 0, err, sizeof(err));
	cr_assert(c, "open: %s", err);
	large_xattrs();
}

/*
 * Power cuts while large values change with 8 KiB nodes (several
 * transactions per change): every cut opens with each xattr holding a whole
 * value it had after some operation from the last fsync on (never a mix,
 * never a missing piece); fsck -y finds nothing but orphaned pieces, and
 * fsck -n after it nothing.
 */
#define XC_OPS	12
static uint64_t xc_state[XC_OPS + 1][2];	/* per op, per name: hash of the value, 0 absent */

static uint64_t xc_hash(const uint8_t *v, size_t len)
{
	uint64_t h = 1469598103934665603ULL ^ len;
	for (size_t i = 0; i < len; i++)
		h = (h ^ v[i]) * 1099511628211ULL;
	return h | 1;
}

static struct bch_fs *xc_open(char *path, unsigned flags, char *err)
{
	struct bch_opts o;
	struct bch_fs *r = NULL;

	memset(&o, 0, sizeof(o));
	if (flags & TESTFS_RO)
		bch_opt_set(&o, Opt_read_only, 1);
	if (flags & TESTFS_FSCK)
		bch_opt_set(&o, Opt_fsck, 1);
	return bch_fs_open(&path, 1, &o, &r, err, 256) ? NULL : r;
}

static enum bch_fsck_answer xc_report(struct bch_fsck_ctx *ctx, enum bch_fsck_problem p,
				      const char *where, const char *detail, int fix)
{
	(void)ctx;
	fprintf(stderr, "  %s: %s%s%s (%d)\n", bch_fsck_problems[p].name, where, detail ? ": " : "",
		detail ? detail : "", fix);
	return BCH_FSCK_ANSWER_YES;
}

static int xc_fsck(struct bch_fs *fs, enum bch_fsck_mode mode, struct bch_fsck_ctx *ctx)
{
	struct bch_fsck_file_stats st;
	uint64_t nodes;

	memset(ctx, 0, sizeof(*ctx));
	ctx->mode = mode;
	if (getenv("XC_DEBUG"))
		ctx->report = xc_report;
	int r = bch_fsck_btrees(ctx, fs, &nodes);
	return r ? r : bch_fsck_files(ctx, fs, false, &st);
}

Test(fs_ops, xattr_large_crash, .timeout = 600)
{
	static const char *names[2] = { "user.v", "user.w" };
	static const size_t sizes[XC_OPS] = { 65536, 3000, 40000, 500, 65536, 0,
					      9000, 65536, 1, 20000, 65535, 0 };
	static uint8_t v[BCH_XATTR_SIZE_MAX], got[BCH_XATTR_SIZE_MAX];
	char err[256], path[TESTFS_PATH_MAX + 16];
	size_t op_event[XC_OPS + 1] = { 0 };
	unsigned synced[XC_OPS + 1] = { 0 }, last_sync = 0, orphans = 0, cuts = 0, topology = 0;
	uint64_t f;

	cr_assert_eq(bch_fs_close(c), 0);
	unlink(fs1.paths[0]);
	testfs_format(fs1.dir, 1, 16, 8192, 1, fs1.paths);	/* small: every cut writes the image */
	c = testfs_open(fs1.paths, 1, 0, 0, err, sizeof(err));
	cr_assert(c, "%s", err);
	f = mk(BCH_ROOT_INO, "f", S_IFREG | 0644);
	cr_assert_eq(bch_fs_fsync(c), 0);
	struct iorec *rec = iorec_new(1);
	cr_assert_eq(iorec_attach(rec, 0, c->devs[0]->bdev), 0);
	fprintf(stderr, "xattr crash: values from xorshift32, seed = 50 + op\n");
	for (unsigned op = 1; op <= XC_OPS; op++) {
		unsigned n = op % 3 == 0;	/* user.w every third op */
		memcpy(xc_state[op], xc_state[op - 1], sizeof(xc_state[op]));
		if (op == XC_OPS) {
			cr_assert_eq(bch_fs_removexattr(c, f, names[0]), 0, "%s", c->err_msg);
			xc_state[op][0] = 0;
		} else {
			fill(v, sizes[op - 1], 50 + op);
			cr_assert_eq(bch_fs_setxattr(c, f, names[n], v, sizes[op - 1], 0), 0,
				     "op %u: %s", op, c->err_msg);
			xc_state[op][n] = xc_hash(v, sizes[op - 1]);
		}
		if (op % 4 == 0) {
			cr_assert_eq(bch_fs_fsync(c), 0);
			last_sync = op;
		}
		synced[op] = last_sync;
		op_event[op] = iorec_nr_events(rec);
	}
	size_t events = iorec_nr_events(rec);
	iorec_detach(rec, 0);
	c->read_only = true;
	bch_fs_close(c);
	c = NULL;
	snprintf(path, sizeof(path), "%s/crash.img", fs1.dir);
	for (size_t at = 0; at <= events; at++) {
		bool flush = at > 0 && iorec_event(rec, at - 1)->type == IOREC_FLUSH;
		/* every flush; between them every 6th event (every 2nd with SOAK): 114 is one */
		if (!flush && at % (getenv("SOAK") ? 2 : 6) && at != events)
			continue;
		unsigned durable = 0, issued = 0;
		for (unsigned op = 1; op <= XC_OPS; op++) {
			if (op_event[op] <= at)
				durable = synced[op];
			if (op == 1 || op_event[op - 1] <= at)
				issued = op;
		}
		struct iorec_cut cut = { .at = at, .seed = at * 7, .keep_pct = 50, .torn = true };
		struct iorec_plan plan;
		cr_assert_eq(iorec_plan(rec, &cut, &plan), 0);
		cr_assert_eq(iorec_write_image(rec, &plan, 0, path), 0);
		iorec_plan_free(&plan);
		struct bch_fs *r = xc_open(path, TESTFS_FSCK, err);
		cr_assert(r, "cut %zu: open: %s", at, err);
		uint64_t found[2];
		for (unsigned n = 0; n < 2; n++) {
			ssize_t len = bch_fs_getxattr(r, f, names[n], got, sizeof(got));
			cr_assert(len >= 0 || len == -ENODATA, "cut %zu: %s: %zd (%s)", at, names[n], len, r->err_msg);
			found[n] = len < 0 ? 0 : xc_hash(got, len);
		}
		unsigned op = durable;
		while (op <= issued && memcmp(found, xc_state[op], sizeof(found)))
			op++;
		cr_assert_leq(op, issued, "cut %zu: the values are of no state after ops %u..%u", at, durable, issued);
		struct bch_fsck_ctx *ctx = calloc(1, sizeof(*ctx));
		cr_assert_eq(xc_fsck(r, BCH_FSCK_YES, ctx), 0, "cut %zu: fsck -y: %s", at, ctx->err_msg);
		for (unsigned p = 0; p < BCH_FSCK_PROBLEM_NR; p++) {
			if (!ctx->found[p] || p == BCH_FSCK_xattr_piece_orphan)
				continue;
			/*
			 * Interior nodes too: replay once applied interior keys of an
			 * earlier shape of the tree to a new root (btree_topology at
			 * cuts 112-116 with 8 KiB nodes; XC_DEBUG=1 prints reports).
			 */
			topology++;
			cr_assert_fail("cut %zu: fsck -y finds %s", at, bch_fsck_problems[p].name);
		}
		orphans += ctx->found[BCH_FSCK_xattr_piece_orphan] > 0;
		cr_assert_eq(bch_fs_close(r), 0);
		r = xc_open(path, TESTFS_FSCK | TESTFS_RO, err);
		cr_assert(r, "cut %zu: reopen: %s", at, err);
		cr_assert_eq(xc_fsck(r, BCH_FSCK_NO, ctx), 0, "cut %zu: fsck -n: %s", at, ctx->err_msg);
		cr_assert_eq(bch_fsck_nr_found(ctx), 0, "cut %zu: fsck -n after -y finds problems", at);
		free(ctx);
		bch_fs_close(r);
		cuts++;
	}
	fprintf(stderr, "xattr crash: %zu events, %u cuts, %u left orphaned pieces, %u btree_topology\n",
		events, cuts, orphans, topology);
	cr_assert_gt(orphans, 0, "no cut fell between the transactions of a change");
	iorec_free(rec);
	c = testfs_open(fs1.paths, 1, 0, 0, err, sizeof(err));
	cr_assert(c, "%s", err);
}

/* ------------------------------------------------------- hash collisions */

#define NAMES 200

Test(fs_ops, dirent_and_xattr_collisions)
{
	static bool present[NAMES], xpresent[NAMES];
	uint64_t dir = mk(BCH_ROOT_INO, "dir", S_IFDIR | 0755), inum;
	uint64_t file = mk(BCH_ROOT_INO, "file", S_IFREG | 0644);
	char name[32], other[32];
	unsigned seed = 77;

	fprintf(stderr, "collisions: seed %u\n", seed);
	srandom(seed);
	bch_hash_test_mask = 0x1c;	/* every name hashes into one of 8 slots */
	for (unsigned op = 0; op < 6000; op++) {
		unsigned i = random() % NAMES, j = random() % NAMES, k = random() % 5;
		snprintf(name, sizeof(name), "name-%u", i);
		snprintf(other, sizeof(other), "name-%u", j);
		int r;
		if (k == 0) {
			r = bch_fs_create(c, dir, name, S_IFREG | 0644, 0, 0, 0, NULL);
			cr_assert_eq(r, present[i] ? -EEXIST : 0, "seed %u op %u: create %s: %d", seed, op, name, r);
			present[i] = true;
		} else if (k == 1) {
			r = bch_fs_unlink(c, dir, name);
			cr_assert_eq(r, present[i] ? 0 : -ENOENT, "seed %u op %u: unlink %s: %d", seed, op, name, r);
			present[i] = false;
		} else if (k == 2) {
			r = bch_fs_rename(c, dir, name, dir, other, 0);
			cr_assert_eq(r, present[i] ? 0 : -ENOENT, "seed %u op %u: rename %s %s: %d", seed, op,
				     name, other, r);
			if (present[i] && i != j) {
				present[i] = false;
				present[j] = true;
			}
		} else if (k == 3) {
			r = bch_fs_setxattr(c, file, (snprintf(other, sizeof(other), "user.%u", i), other),
					    name, strlen(name), 0);
			cr_assert_eq(r, 0);
			xpresent[i] = true;
		} else {
			snprintf(other, sizeof(other), "user.%u", i);
			r = bch_fs_removexattr(c, file, other);
			cr_assert_eq(r, xpresent[i] ? 0 : -ENODATA, "seed %u op %u: removexattr: %d", seed, op, r);
			xpresent[i] = false;
		}
		if (op % 500 == 0 || op == 5999)
			for (unsigned n = 0; n < NAMES; n++) {
				snprintf(name, sizeof(name), "name-%u", n);
				r = bch_fs_lookup(c, dir, name, &inum);
				cr_assert_eq(r, present[n] ? 0 : -ENOENT, "seed %u op %u: lookup %s: %d", seed, op,
					     name, r);
				char v[32];
				snprintf(other, sizeof(other), "user.%u", n);
				ssize_t x = bch_fs_getxattr(c, file, other, v, sizeof(v));
				cr_assert_eq(x >= 0, xpresent[n], "seed %u op %u: getxattr %s: %zd", seed, op, other, x);
			}
	}
	/* readdir sees each present name once */
	unsigned seen[NAMES] = { 0 };
	int fn(void *priv, const char *n, size_t len, uint64_t ino, unsigned t, uint64_t next);
	cr_assert_eq(bch_fs_readdir(c, dir, 0, fn, seen), 0);
	for (unsigned n = 0; n < NAMES; n++)
		cr_assert_eq(seen[n], present[n] ? 1 : 0, "name-%u seen %u times", n, seen[n]);
}

int fn(void *priv, const char *n, size_t len, uint64_t ino, unsigned t, uint64_t next)
{
	unsigned *seen = priv;
	(void)ino; (void)t; (void)next;
	if (len > 5 && !strncmp(n, "name-", 5))
		seen[atoi(n + 5)]++;
	return 0;
}

/* --------------------------------------------------------- extent overlaps */

#define BLOCKS	16
#define BS	4096

static unsigned char model[BLOCKS * BS];
static uint64_t model_size;

static void check_file(uint64_t f, const char *what)
{
	static unsigned char buf[BLOCKS * BS];
	struct stat st;

	cr_assert_eq(bch_fs_getattr(c, f, &st), 0);
	cr_assert_eq((uint64_t)st.st_size, model_size, "%s: size %ld, want %lu", what, (long)st.st_size,
		     (unsigned long)model_size);
	ssize_t n = bch_fs_read(c, f, 0, buf, sizeof(buf));
	cr_assert_eq((uint64_t)n, model_size, "%s: read %zd", what, n);
	for (uint64_t i = 0; i < model_size; i++)
		cr_assert_eq(buf[i], model[i], "%s: byte %lu is %u, want %u", what, (unsigned long)i, buf[i],
			     model[i]);
	/* allocated sectors never exceed what the file spans (a write leaks no key) */
	cr_assert_leq((uint64_t)st.st_blocks, (uint64_t)BLOCKS * BS / 512, "%s: %ld sectors", what,
		      (long)st.st_blocks);
}

static void do_write(uint64_t f, unsigned a, unsigned b, unsigned char tag)
{
	static unsigned char buf[BLOCKS * BS];
	memset(buf, tag, sizeof(buf));
	cr_assert_eq(bch_fs_write(c, f, (uint64_t)a * BS, buf, (size_t)(b - a) * BS), (ssize_t)(b - a) * BS);
	memset(model + a * BS, tag, (b - a) * BS);
	if ((uint64_t)b * BS > model_size)
		model_size = (uint64_t)b * BS;
}

static void base_layout(uint64_t f, unsigned kind)
{
	cr_assert_eq(bch_fs_truncate(c, f, 0), 0);
	memset(model, 0, sizeof(model));
	model_size = 0;
	switch (kind) {
	case 0:	/* one extent over everything */
		do_write(f, 0, BLOCKS, 1);
		break;
	case 1:	/* one extent per block */
		for (unsigned b = 0; b < BLOCKS; b++)
			do_write(f, b, b + 1, 10 + b);
		break;
	case 2:	/* data and holes alternating */
		for (unsigned b = 0; b < BLOCKS; b += 2)
			do_write(f, b, b + 1, 40 + b);
		break;
	case 3:	/* three extents of odd sizes */
		do_write(f, 0, 5, 2);
		do_write(f, 5, 12, 3);
		do_write(f, 12, 16, 4);
		break;
	}
}

Test(fs_ops, extent_overlaps_exhaustive)
{
	uint64_t f = mk(BCH_ROOT_INO, "ov", S_IFREG | 0644);
	char what[96];

	for (unsigned kind = 0; kind < 4; kind++)
		for (unsigned a = 0; a < BLOCKS; a++)
			for (unsigned b = a + 1; b <= BLOCKS; b++) {
				base_layout(f, kind);
				do_write(f, a, b, 200);
				snprintf(what, sizeof(what), "layout %u write [%u,%u)", kind, a, b);
				check_file(f, what);

				base_layout(f, kind);
				cr_assert_eq(bch_fs_fallocate(c, f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
							      (uint64_t)a * BS, (uint64_t)(b - a) * BS), 0);
				memset(model + a * BS, 0, (b - a) * BS);
				snprintf(what, sizeof(what), "layout %u punch [%u,%u)", kind, a, b);
				check_file(f, what);
			}
	/* unaligned writes and truncates: partial blocks are read, merged, rewritten */
	base_layout(f, 1);
	static unsigned char pat[10000];
	for (unsigned i = 0; i < sizeof(pat); i++)
		pat[i] = i * 7;
	cr_assert_eq(bch_fs_write(c, f, 1000, pat, sizeof(pat)), (ssize_t)sizeof(pat));
	memcpy(model + 1000, pat, sizeof(pat));
	check_file(f, "unaligned write");
	cr_assert_eq(bch_fs_truncate(c, f, 5000), 0);
	model_size = 5000;
	check_file(f, "truncate to 5000");
	cr_assert_eq(bch_fs_truncate(c, f, 9000), 0);
	memset(model + 5000, 0, 4000);
	model_size = 9000;
	check_file(f, "extend to 9000: the old tail reads as zeros");
}

/*
 * A write's bounce buffer (fs_ops_data.c, bounce_alloc()) zeroes only the
 * bytes of its first and last block that neither the old data nor the new
 * fill: in a new file (nothing to read), the bytes before the write and
 * after it up to the block's end read as zeros, also once the file grows
 * over them.  Each write follows one of 0xee bytes into another file, whose
 * freed buffer the next may be given again.  Seed printed.
 */
Test(fs_ops, unaligned_writes_zero_the_rest_of_their_blocks)
{
	static unsigned char pat[3 * BS];
	uint64_t seed = 38, junk = mk(BCH_ROOT_INO, "junk", S_IFREG | 0644);
	char what[96];

	printf("fs_ops unaligned writes: seed %llu\n", (unsigned long long)seed);
	memset(pat, 0xee, sizeof(pat));
	for (unsigned round = 0; round < 24; round++) {
		char name[16];
		snprintf(name, sizeof(name), "z%u", round);
		uint64_t f = mk(BCH_ROOT_INO, name, S_IFREG | 0644);
		uint64_t off = testfs_xorshift(&seed) % (2 * BS), len = 1 + testfs_xorshift(&seed) % (BS + BS / 2);

		/* a buffer of 0xee freed just before: [1, 3 BS - 1) of junk */
		cr_assert_eq(bch_fs_write(c, junk, 1, pat, sizeof(pat) - 2), (ssize_t)sizeof(pat) - 2);
		for (unsigned i = 0; i < len; i++)
			pat[i] = 1 + (round + i) % 251;
		cr_assert_eq(bch_fs_write(c, f, off, pat, len), (ssize_t)len);
		memset(model, 0, sizeof(model));
		memcpy(model + off, pat, len);
		memset(pat, 0xee, sizeof(pat));
		model_size = off + len;
		snprintf(what, sizeof(what), "seed 38 round %u: write [%lu,+%lu)", round,
			 (unsigned long)off, (unsigned long)len);
		check_file(f, what);
		model_size = (off + len + BS - 1) / BS * BS;
		cr_assert_eq(bch_fs_truncate(c, f, model_size), 0);
		snprintf(what, sizeof(what), "seed 38 round %u: grown to its last block's end", round);
		check_file(f, what);
	}
}

/*
 * A write reads its inode once (fs_ops_data.c, v_write()): each chunk's
 * commit leaves the copy as it wrote it, and a chunk that fails (ENOSPC,
 * retried smaller) reads it again.  A write over several 1 MiB chunks,
 * unaligned at both ends, over old data; then one on a nearly full
 * filesystem that stores only part: size and sectors are those of what was
 * stored, the bytes read back, and fsck (which recounts sectors) is clean.
 */
Test(fs_ops, a_write_over_chunks_and_a_short_one_keep_their_inode, .timeout = 120)
{
	size_t big = (3 << 20) + 1000;
	unsigned char *buf = malloc(big + 4096), *back = malloc(big + 4096);
	uint64_t f = mk(BCH_ROOT_INO, "chunks", S_IFREG | 0644), off = (512 << 10) + 100;
	struct stat st;

	cr_assert(buf && back);
	memset(buf, 0x11, 1 << 20);
	cr_assert_eq(bch_fs_write(c, f, 0, buf, 1 << 20), 1 << 20);
	for (size_t i = 0; i < big; i++)
		buf[i] = 1 + i % 253;
	cr_assert_eq(bch_fs_write(c, f, off, buf, big), (ssize_t)big);
	cr_assert_eq(bch_fs_getattr(c, f, &st), 0);
	cr_assert_eq((uint64_t)st.st_size, off + big);
	cr_assert_eq((uint64_t)st.st_blocks, (off + big + 4095) / 4096 * 8, "sectors %ld",
		     (long)st.st_blocks);
	cr_assert_eq(bch_fs_read(c, f, off, back, big), (ssize_t)big);
	cr_assert(!memcmp(back, buf, big), "the bytes of the write over chunks");

	/* nearly full: a write stores what fits, its inode counts just that */
	uint64_t fill = mk(BCH_ROOT_INO, "fill", S_IFREG | 0644), o = 0;
	struct statvfs sv;
	cr_assert_eq(bch_fs_statfs(c, &sv), 0);
	uint64_t room = (uint64_t)sv.f_bavail * sv.f_frsize;
	memset(buf, 0x22, 1 << 20);
	while (o + (4 << 20) < room) {
		cr_assert_eq(bch_fs_write(c, fill, o, buf, 1 << 20), 1 << 20);
		o += 1 << 20;
	}
	uint64_t g = mk(BCH_ROOT_INO, "short", S_IFREG | 0644);
	ssize_t n = 0, total = 0;
	for (unsigned i = 0; i < 8 && (n = bch_fs_write(c, g, 300 + total, buf, big)) == (ssize_t)big; i++)
		total += n;
	cr_assert_lt(n, (ssize_t)big, "a full filesystem took %zd bytes more", n);
	if (n > 0)
		total += n;
	c->err_msg[0] = 0;
	cr_assert_eq(bch_fs_getattr(c, g, &st), 0);
	cr_assert_eq((uint64_t)st.st_size, 300 + (uint64_t)total, "size %ld after %zd bytes stored",
		     (long)st.st_size, total);
	cr_assert_eq((uint64_t)st.st_blocks, (300 + (uint64_t)total + 4095) / 4096 * 8, "sectors %ld",
		     (long)st.st_blocks);
	testfs_assert_fsck_clean(c, true);
	free(buf);
	free(back);
}

static void xattr_is(uint64_t h, const char *name, const char *want, const char *where)
{
	char buf[64];
	ssize_t n = bch_fs_getxattr(c, h, name, buf, sizeof(buf));

	if (!want) {
		cr_assert_eq(n, -ENODATA, "%s: %s gives %zd, want ENODATA", where, name, n);
		return;
	}
	cr_assert_eq(n, (ssize_t)strlen(want), "%s: %s gives %zd", where, name, n);
	cr_assert(!memcmp(buf, want, n), "%s: %s holds another value", where, name);
}

/*
 * A get or remove of an xattr of an inode with no xattr key in any
 * snapshot answers -ENODATA without reading the inode (fs_ops_xattr.c,
 * xattrs_none()): its neighbours' xattrs, a removed one (its whiteout), and
 * one another snapshot holds (a whiteout over it in this one) are not
 * taken for none, nor for some.
 */
Test(fs_ops, xattr_none_checked_per_inode_and_snapshot)
{
	uint64_t a = mk(BCH_ROOT_INO, "xa", S_IFREG | 0644), b = mk(BCH_ROOT_INO, "xb", S_IFREG | 0644);
	uint64_t d = mk(BCH_ROOT_INO, "xd", S_IFREG | 0644), s1, h;

	cr_assert_eq(b, a + 1);
	cr_assert_eq(d, b + 1);
	cr_assert_eq(bch_fs_setxattr(c, a, "user.n", "a", 1, 0), 0);
	cr_assert_eq(bch_fs_setxattr(c, d, "user.n", "d", 1, 0), 0);
	xattr_is(b, "user.n", NULL, "between two with xattrs");
	cr_assert_eq(bch_fs_removexattr(c, b, "user.n"), -ENODATA);
	cr_assert_eq(bch_fs_kill_caps(c, b), -ENODATA);
	xattr_is(a, "user.n", "a", "before");
	xattr_is(d, "user.n", "d", "after");

	cr_assert_eq(bch_fs_setxattr(c, b, "security.capability", "cap", 3, 0), 0);
	xattr_is(b, "security.capability", "cap", "set");
	cr_assert_eq(bch_fs_kill_caps(c, b), 0);
	xattr_is(b, "security.capability", NULL, "killed");
	cr_assert_eq(bch_fs_kill_caps(c, b), -ENODATA);

	/* in a snapshot: the root's removal whites it out, the snapshot keeps it */
	cr_assert_eq(bch_fs_setxattr(c, b, "user.s", "s", 1, 0), 0);
	cr_assert_eq(bch_fs_subvol_snapshot(c, BCH_ROOT_INO, BCH_ROOT_INO, "xs", true, &s1), 0,
		     "%s", c->err_msg);
	cr_assert_eq(bch_fs_removexattr(c, b, "user.s"), 0);
	xattr_is(b, "user.s", NULL, "removed in the root");
	cr_assert_eq(bch_fs_lookup(c, s1, "xb", &h), 0);
	xattr_is(h, "user.s", "s", "kept in the snapshot");
	cr_assert_eq(bch_fs_lookup(c, s1, "xa", &h), 0);
	xattr_is(h, "user.n", "a", "a in the snapshot");
	testfs_assert_fsck_clean(c, true);
}

/* Leave the stack dirty below the caller (bytes a later call's buffer may take). */
static __attribute__((noinline)) void stack_dirty(void)
{
	volatile unsigned char junk[16384];

	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = 0xa5;
}

/*
 * A dirent key is built on the stack (fs_ops.c, fs_dirent_put()): its
 * padding and the bytes after the name up to the key's end are zero, for
 * every name length past a word's end and within, whatever the stack
 * held.
 */
Test(fs_ops, dirent_keys_are_zero_past_their_names)
{
	uint64_t d = mk(BCH_ROOT_INO, "dz", S_IFDIR | 0755), inum;
	char name[64];

	for (unsigned len = 1; len <= 40; len++) {
		memset(name, 'a' + len % 26, len);
		name[len] = 0;
		stack_dirty();
		cr_assert_eq(bch_fs_create(c, d, name, S_IFREG | 0644, 0, 0, 0, &inum), 0);
	}
	struct btree_iter it;
	const struct bch_bkey *k;
	unsigned seen = 0;
	int err;
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_dirents, POS(d, 0, 0), POS(d, UINT64_MAX, UINT32_MAX));
	while ((k = bch_btree_iter_next(&it, &err))) {
		if (k->type != BCH_BKEY_dirent)
			continue;
		const struct bch_dirent *de = bkey_val(k);
		const unsigned char *v = bkey_val(k), *end = (const unsigned char *)k + bkey_bytes(k);
		for (unsigned i = 0; i < sizeof(de->pad); i++)
			cr_assert_eq(de->pad[i], 0, "name of %u bytes: pad byte %u is %u", de->name_len, i,
				     de->pad[i]);
		for (const unsigned char *p = v + sizeof(*de) + de->name_len; p < end; p++)
			cr_assert_eq(*p, 0, "name of %u bytes: byte %ld after it is %u", de->name_len,
				     (long)(p - (v + sizeof(*de) + de->name_len)), *p);
		seen++;
	}
	bch_btree_iter_exit(&it);
	cr_assert_eq(err, 0);
	cr_assert_eq(seen, 40);
}

/*
 * Space on a full filesystem: a write that does not fit fails with ENOSPC
 * after storing what fits; a reservation (fallocate) takes its space at
 * once, fails whole when it does not fit, and a write into it never fails
 * for space, also after a reopen (the promise is counted again at open).
 * Adding metadata stops before the btree reserve's last half, so deletes
 * still work and free space usable at once.
 */
Test(fs_ops, space_full_and_reservations)
{
	const uint64_t root = BCH_ROOT_INO;
	struct statvfs st0, st1;
	size_t chunk = 1 << 20;
	char *buf = malloc(chunk), err[256];
	uint64_t pre = mk(root, "pre", S_IFREG | 0644), fill = mk(root, "fill", S_IFREG | 0644);
	uint64_t keep = mk(root, "keep", S_IFREG | 0644), inum;

	memset(buf, 0xa5, chunk);
	cr_assert_eq(bch_fs_statfs(c, &st0), 0);
	uint64_t free0 = (uint64_t)st0.f_bavail * st0.f_frsize;
	cr_assert_gt(free0, 16 << 20, "a 64 MiB filesystem has room: %llu", (unsigned long long)free0);

	/* more than is free: refused whole, nothing taken */
	cr_assert_eq(bch_fs_fallocate(c, pre, 0, 0, free0 + (1 << 20)), -ENOSPC);
	cr_assert_eq(bch_fs_statfs(c, &st1), 0);
	cr_assert_eq(st1.f_bavail, st0.f_bavail, "a refused fallocate took space");

	/* 8 MiB reserved: free space drops by as much at once */
	cr_assert_eq(bch_fs_fallocate(c, pre, 0, 0, 8 << 20), 0);
	cr_assert_eq(bch_fs_fallocate(c, keep, FALLOC_FL_KEEP_SIZE, 0, 1 << 20), 0);
	cr_assert_eq(bch_fs_statfs(c, &st1), 0);
	cr_assert_geq(free0 - (uint64_t)st1.f_bavail * st1.f_frsize, 9 << 20);

	/* fill: short writes, then ENOSPC at the write that does not fit */
	uint64_t off = 0;
	ssize_t n;
	while ((n = bch_fs_write(c, fill, off, buf, chunk)) == (ssize_t)chunk)
		off += chunk;
	if (n > 0)
		off += n, n = bch_fs_write(c, fill, off, buf, chunk);
	cr_assert_eq(n, -ENOSPC, "writing past full: %zd", n);
	struct stat sb;
	cr_assert_eq(bch_fs_getattr(c, fill, &sb), 0);
	cr_assert_eq((uint64_t)sb.st_size, off, "size %lld covers only what was stored (%llu)",
		     (long long)sb.st_size, (unsigned long long)off);
	cr_assert_eq(bch_fs_statfs(c, &st1), 0);
	cr_assert_lt((uint64_t)st1.f_bavail * st1.f_frsize, 1 << 20);

	/* the reservations still take their data, every byte of it */
	for (uint64_t o = 0; o < (8 << 20); o += chunk)
		cr_assert_eq(bch_fs_write(c, pre, o, buf, chunk), (ssize_t)chunk, "into the reservation at %llu",
			     (unsigned long long)o);
	cr_assert_eq(bch_fs_write(c, keep, 0, buf, 4096), 4096);

	/* metadata: creates stop with ENOSPC before the reserve is gone */
	unsigned made = 0;
	int r = 0;
	for (; made < 200000 && !r; made++) {
		char name[32];
		snprintf(name, sizeof(name), "e%u", made);
		r = bch_fs_create(c, root, name, S_IFREG | 0644, 0, 0, 0, &inum);
	}
	cr_assert_eq(r, -ENOSPC, "creates on a full filesystem: %d after %u", r, made);
	c->err_msg[0] = 0;

	/* deletes work, and the space is usable at once */
	cr_assert_eq(bch_fs_unlink(c, root, "fill"), 0);
	for (unsigned i = 0; i + 1 < made; i += 7) {
		char name[32];
		snprintf(name, sizeof(name), "e%u", i);
		cr_assert_eq(bch_fs_unlink(c, root, name), 0, "unlink %s", name);
	}
	cr_assert_eq(bch_fs_write(c, mk(root, "after", S_IFREG | 0644), 0, buf, chunk), (ssize_t)chunk);

	/* a reopen counts the promise again: keep's 1 MiB past EOF is still reserved */
	cr_assert_eq(bch_fs_close(c), 0);
	c = testfs_open(fs1.paths, 1, 0, 0, err, sizeof(err));
	cr_assert(c, "reopen: %s", err);
	cr_assert_eq(c->reserved_sectors, ((1 << 20) - 4096) >> 9, "reserved after reopen: %llu",
		     (unsigned long long)c->reserved_sectors);
	free(buf);
}

/*
 * The clean record carries the sectors promised to reservations; fsck
 * recounts them from the keys and corrects a record that is wrong
 * (reserved_sectors_wrong), so no later open trusts a wrong promise.
 */
Test(fs_ops, reserved_count_checked_by_fsck)
{
	struct bch_fsck_ctx *ctx = calloc(1, sizeof(*ctx));
	char err[256];
	uint64_t f = mk(BCH_ROOT_INO, "f", S_IFREG | 0644);

	cr_assert_eq(bch_fs_fallocate(c, f, FALLOC_FL_KEEP_SIZE, 0, 1 << 20), 0);
	uint64_t good = c->reserved_sectors;
	cr_assert_eq(good, (1 << 20) >> 9);
	c->reserved_sectors = good + 100;	/* the clean close records a wrong count */
	cr_assert_eq(bch_fs_close(c), 0);
	c = NULL;

	struct bch_fs *r = xc_open(fs1.paths[0], TESTFS_FSCK | TESTFS_RO, err);
	cr_assert(r, "%s", err);
	cr_assert_eq(xc_fsck(r, BCH_FSCK_NO, ctx), 0);
	cr_assert_eq(ctx->found[BCH_FSCK_reserved_sectors_wrong], 1, "fsck -n did not see the count");
	bch_fs_close(r);

	r = xc_open(fs1.paths[0], TESTFS_FSCK, err);
	cr_assert(r, "%s", err);
	cr_assert_eq(xc_fsck(r, BCH_FSCK_YES, ctx), 0);
	cr_assert_eq(ctx->fixed[BCH_FSCK_reserved_sectors_wrong], 1);
	cr_assert_eq(bch_fsck_nr_found(ctx), 1, "only the count is wrong");
	cr_assert_eq(bch_fs_close(r), 0);

	r = xc_open(fs1.paths[0], TESTFS_FSCK | TESTFS_RO, err);
	cr_assert(r, "%s", err);
	cr_assert_eq(r->reserved_sectors, good);
	cr_assert_eq(xc_fsck(r, BCH_FSCK_NO, ctx), 0);
	cr_assert_eq(bch_fsck_nr_found(ctx), 0);
	bch_fs_close(r);
	free(ctx);
}

/*
 * bch_fs_inodes_free() (what fusemount's queue of forgotten inodes calls):
 * 150 files unlinked with the free deferred, as a mount does, then freed
 * in one call given in a shuffled order (seed 86) with duplicates, a file
 * that still has a name, a directory and a number never used: the
 * unlinked ones go (files with an xattr and a 40-extent file alone, the
 * rest in batches), their space is back, the linked file keeps its data,
 * the twice-given ones are counted once (fsck clean: the buckets' counts).
 */
Test(fs_ops, inodes_free_batched)
{
	const uint64_t root = BCH_ROOT_INO;
	enum { NR = 150 };
	static char data[8192];
	uint64_t inums[NR + 8], keep, dir, nr = 0;
	struct statvfs st1, st2;
	struct stat sb;
	char name[32];

	c->defer_unlinked_free = true;
	memset(data, 0x3c, sizeof(data));
	dir = mk(root, "d", S_IFDIR | 0755);
	for (unsigned i = 0; i < NR; i++) {
		snprintf(name, sizeof(name), "f%u", i);
		uint64_t f = mk(dir, name, S_IFREG | 0644);
		if (i == 40) {		/* every other block: 40 extents, more than a batch takes */
			for (unsigned b = 0; b < 40; b++)
				cr_assert_eq(bch_fs_write(c, f, 2 * b * 4096, data, 4096), 4096);
		} else {
			cr_assert_eq(bch_fs_write(c, f, 0, data, sizeof(data)), (ssize_t)sizeof(data));
		}
		if (i % 7 == 0)
			cr_assert_eq(bch_fs_setxattr(c, f, "user.t", "v", 1, 0), 0);
		inums[nr++] = f;
	}
	keep = inums[5];
	cr_assert_eq(bch_fs_link(c, keep, root, "keep"), 0);
	cr_assert_eq(bch_fs_statfs(c, &st1), 0);
	for (unsigned i = 0; i < NR; i++) {
		snprintf(name, sizeof(name), "f%u", i);
		cr_assert_eq(bch_fs_unlink(c, dir, name), 0, "unlink %s", name);
	}
	cr_assert_eq(bch_fs_rmdir(c, root, "d"), 0);
	cr_assert_eq(bch_fs_getattr(c, inums[3], &sb), 0, "deferred: still there");
	cr_assert_eq(sb.st_nlink, 0);
	inums[nr++] = dir;
	inums[nr++] = inums[3];		/* twice */
	inums[nr++] = inums[40];
	inums[nr++] = dir;
	inums[nr++] = 999999;		/* never used */
	uint64_t seed = 86;
	fprintf(stderr, "inodes_free_batched: shuffled by testfs_xorshift, seed %llu\n",
		(unsigned long long)seed);
	for (uint64_t i = nr - 1; i > 0; i--) {		/* shuffled: the call sorts */
		uint64_t j = testfs_xorshift(&seed) % (i + 1), t = inums[i];
		inums[i] = inums[j], inums[j] = t;
	}
	cr_assert_eq(bch_fs_inodes_free(c, inums, nr), 0);
	for (unsigned i = 0; i < nr; i++)
		if (inums[i] != keep && inums[i] != 999999)
			cr_assert_eq(bch_fs_getattr(c, inums[i], &sb), -ENOENT, "inode %llu left",
				     (unsigned long long)inums[i]);
	cr_assert_eq(bch_fs_getattr(c, keep, &sb), 0);
	cr_assert_eq(sb.st_nlink, 1);
	char got[sizeof(data)];
	cr_assert_eq(bch_fs_read(c, keep, 0, got, sizeof(got)), (ssize_t)sizeof(got));
	cr_assert(!memcmp(got, data, sizeof(got)));
	cr_assert_eq(bch_fs_statfs(c, &st2), 0);
	/* 336 blocks of data freed (148 files of 8 KiB, 40 of the fragmented one): most come back */
	uint64_t back = (st2.f_bfree - st1.f_bfree) * st2.f_frsize;
	cr_assert_geq(back, 300 * 4096, "%llu bytes back", (unsigned long long)back);
	fsck_clean();
}

/*
 * bch_fs_create_stat() says of the new inode what bch_fs_getattr_btime()
 * reads back (fusemount's create replies from it, with no read after): a
 * file, a directory, a device node, a fifo and a symlink, in the root and
 * in a subdirectory; and a failed create leaves its outputs alone.
 */
Test(fs_ops, create_stat_is_getattr)
{
	static const struct { const char *name; mode_t mode; dev_t rdev; const char *target; } k[] = {
		{ "f", S_IFREG | 0640, 0, NULL }, { "d", S_IFDIR | 0750, 0, NULL },
		{ "c", S_IFCHR | 0600, 0x0103, NULL }, { "p", S_IFIFO | 0644, 0, NULL },
		{ "l", 0, 0, "a/target/of/some/length" },
	};
	uint64_t sub = mk(BCH_ROOT_INO, "sub", S_IFDIR | 0755);

	for (unsigned d = 0; d < 2; d++)
		for (unsigned i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
			uint64_t dir = d ? sub : BCH_ROOT_INO, inum = 0;
			struct stat made, read;
			int64_t bt_made = -1, bt_read = -2;
			cr_assert_eq(bch_fs_create_stat(c, dir, k[i].name, k[i].mode, k[i].rdev, 1000 + i,
							100 + i, k[i].target, &inum, &made, &bt_made), 0,
				     "%s in dir %u", k[i].name, d);
			cr_assert_eq(bch_fs_getattr_btime(c, inum, &read, &bt_read), 0);
			cr_assert(!memcmp(&made, &read, sizeof(made)), "%s in dir %u: stat differs", k[i].name, d);
			cr_assert_eq(bt_made, bt_read, "%s in dir %u: btime", k[i].name, d);
			uint64_t found;
			cr_assert_eq(bch_fs_lookup(c, dir, k[i].name, &found), 0);
			cr_assert_eq(found, inum);
			cr_assert_eq((uint64_t)made.st_ino, inum);
		}
	/* a failed create says nothing */
	uint64_t inum = 77;
	struct stat st = { .st_ino = 5 };
	int64_t bt = 9;
	cr_assert_eq(bch_fs_create_stat(c, BCH_ROOT_INO, "f", S_IFREG | 0644, 0, 0, 0, NULL, &inum, &st, &bt),
		     -EEXIST);
	cr_assert(inum == 77 && st.st_ino == 5 && bt == 9);
}
