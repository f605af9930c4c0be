// SPDX-License-Identifier: GPL-2.0
/*
 * file_flags_test.c - file flags and whiteouts in the POSIX layer (fs_ops.h):
 *   - every call an immutable or append-only file (or directory) refuses,
 *     with -EPERM, and what stays allowed (appends, touch to now, a read's
 *     atime, reads);
 *   - who may set them (owner, CAP_FOWNER, CAP_LINUX_IMMUTABLE for i and a),
 *     a flag not kept (-EOPNOTSUPP), inheritance of d, A and S;
 *   - the feature bit: set by the first flag, kept across an open; an inode
 *     with a flag on a filesystem without it is invalid outside fsck;
 *   - RENAME_WHITEOUT: the old name becomes a 0/0 character device owned by
 *     the caller, in one transaction with the rename; fsck clean after.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "bcachefs.h"
#include "bcachefs_format.h"
#include "bkey.h"
#include "fs.h"
#include "fs_ops.h"
#include "inode.h"
#include "snapshot.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

static struct testfs_one fs1;	/* the suite's filesystem */
static struct bch_fs *c;	/* fs1.c (tests that reopen it set c) */

static void setup(void)
{
	testfs_one_up(&fs1, "flags", 64);
	c = fs1.c;
}

static void teardown(void)
{
	fs1.c = c;
	c = NULL;
	testfs_one_down(&fs1);
}

TestSuite(file_flags, .init = setup, .fini = teardown);

static uint64_t mkfile(uint64_t dir, const char *name, mode_t mode, uid_t uid)
{
	uint64_t inum;

	cr_assert_eq(bch_fs_create(c, dir, name, mode, 0, uid, uid, &inum), 0, "create %s", name);
	return inum;
}

static void set(uint64_t inum, unsigned fl, uint32_t project)
{
	cr_assert_eq(bch_fs_set_flags(c, inum, fl, project, NULL), 0);
}

static unsigned get(uint64_t inum)
{
	unsigned fl;
	uint32_t project;

	cr_assert_eq(bch_fs_get_flags(c, inum, &fl, &project), 0);
	return fl;
}

Test(file_flags, immutable_refuses_every_change)
{
	const uint64_t root = BCH_ROOT_INO;
	uint64_t f = mkfile(root, "f", S_IFREG | 0644, 0), d = mkfile(root, "d", S_IFDIR | 0755, 0);
	char buf[8];

	cr_assert_eq(bch_fs_write(c, f, 0, "one", 3), 3);
	cr_assert_eq(bch_fs_setxattr(c, f, "user.x", "1", 1, 0), 0);
	cr_assert(!(c->sb->features & BCH_FEATURE_INODE_FLAGS));
	set(f, FS_IMMUTABLE_FL, 0);
	cr_assert(c->sb->features & BCH_FEATURE_INODE_FLAGS, "the first flag sets the feature");
	cr_assert_eq(get(f), FS_IMMUTABLE_FL);

	cr_assert_eq(bch_fs_write(c, f, 3, "x", 1), -EPERM);
	cr_assert_eq(bch_fs_write(c, f, 0, "x", 1), -EPERM);
	cr_assert_eq(bch_fs_truncate(c, f, 0), -EPERM);
	cr_assert_eq(bch_fs_fallocate(c, f, 0, 0, 4096), -EPERM);
	cr_assert_eq(bch_fs_unlink(c, root, "f"), -EPERM);
	cr_assert_eq(bch_fs_rename(c, root, "f", root, "g", 0), -EPERM);
	cr_assert_eq(bch_fs_link(c, f, root, "h"), -EPERM);
	cr_assert_eq(bch_fs_setxattr(c, f, "user.y", "1", 1, 0), -EPERM);
	cr_assert_eq(bch_fs_removexattr(c, f, "user.x"), -EPERM);
	cr_assert_eq(bch_fs_set_inode_opt(c, f, "compression", "lz4"), -EPERM);
	struct bch_setattr chmod = { .valid = BCH_SETATTR_MODE, .mode = 0600 };
	struct bch_setattr now = { .valid = BCH_SETATTR_ATIME | BCH_SETATTR_MTIME,
				   .atime = BCH_TIME_NOW, .mtime = BCH_TIME_NOW };
	struct bch_setattr read_atime = { .valid = BCH_SETATTR_ATIME | BCH_SETATTR_ATIME_READ,
					  .atime = 12345 };
	cr_assert_eq(bch_fs_setattr(c, f, &chmod), -EPERM);
	cr_assert_eq(bch_fs_setattr(c, f, &now), -EPERM);
	cr_assert_eq(bch_fs_setattr(c, f, &read_atime), 0, "a read's atime passes");
	cr_assert_eq(bch_fs_read(c, f, 0, buf, sizeof(buf)), 3);
	cr_assert_eq(memcmp(buf, "one", 3), 0);

	/* a directory: no name added or removed, files in it still writable */
	uint64_t x = mkfile(d, "x", S_IFREG | 0644, 0);
	set(d, FS_IMMUTABLE_FL, 0);
	cr_assert_eq(bch_fs_create(c, d, "n", S_IFREG | 0644, 0, 0, 0, NULL), -EPERM);
	cr_assert_eq(bch_fs_unlink(c, d, "x"), -EPERM);
	cr_assert_eq(bch_fs_rename(c, d, "x", root, "x2", 0), -EPERM);
	cr_assert_eq(bch_fs_rename(c, root, "d", root, "d2", 0), -EPERM);
	cr_assert_eq(bch_fs_write(c, x, 0, "y", 1), 1);
	/* an existing name is still EEXIST (the kernel looks it up first) */
	cr_assert_eq(bch_fs_create(c, d, "x", S_IFREG | 0644, 0, 0, 0, NULL), -EEXIST);

	set(f, 0, 0);
	set(d, 0, 0);
	cr_assert_eq(bch_fs_unlink(c, d, "x"), 0);
	cr_assert_eq(bch_fs_unlink(c, root, "f"), 0);
}

Test(file_flags, append_only)
{
	const uint64_t root = BCH_ROOT_INO;
	uint64_t f = mkfile(root, "log", S_IFREG | 0644, 0), d = mkfile(root, "d", S_IFDIR | 0755, 0);

	cr_assert_eq(bch_fs_write(c, f, 0, "one", 3), 3);
	set(f, FS_APPEND_FL, 0);
	cr_assert_eq(bch_fs_write(c, f, 3, "two", 3), 3, "appending is allowed");
	cr_assert_eq(bch_fs_write(c, f, 2, "x", 1), -EPERM, "not inside the file");
	cr_assert_eq(bch_fs_truncate(c, f, 6), -EPERM);
	cr_assert_eq(bch_fs_fallocate(c, f, FALLOC_FL_KEEP_SIZE, 0, 8192), 0);
	cr_assert_eq(bch_fs_fallocate(c, f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096), -EPERM);
	cr_assert_eq(bch_fs_unlink(c, root, "log"), -EPERM);
	cr_assert_eq(bch_fs_rename(c, root, "log", root, "log2", 0), -EPERM);
	cr_assert_eq(bch_fs_setxattr(c, f, "user.y", "1", 1, 0), -EPERM);
	struct bch_setattr chown = { .valid = BCH_SETATTR_UID, .uid = 1 };
	struct bch_setattr times = { .valid = BCH_SETATTR_MTIME, .mtime = 1000 };
	struct bch_setattr now = { .valid = BCH_SETATTR_ATIME | BCH_SETATTR_MTIME,
				   .atime = BCH_TIME_NOW, .mtime = BCH_TIME_NOW };
	cr_assert_eq(bch_fs_setattr(c, f, &chown), -EPERM);
	cr_assert_eq(bch_fs_setattr(c, f, &times), -EPERM);
	cr_assert_eq(bch_fs_setattr(c, f, &now), 0, "touch to now passes append-only");

	/* a directory: names added, not removed */
	set(d, FS_APPEND_FL, 0);
	cr_assert_eq(bch_fs_create(c, d, "n", S_IFREG | 0644, 0, 0, 0, NULL), 0);
	cr_assert_eq(bch_fs_unlink(c, d, "n"), -EPERM);
	cr_assert_eq(bch_fs_rename(c, d, "n", d, "m", 0), -EPERM);
	set(d, 0, 0);
	set(f, 0, 0);
	cr_assert_eq(bch_fs_unlink(c, d, "n"), 0);
}

Test(file_flags, who_may_set)
{
	const uint64_t root = BCH_ROOT_INO;
	uint64_t f = mkfile(root, "f", S_IFREG | 0644, 1000);
	struct bch_caller owner = { .uid = 1000, .gid = 1000 };
	struct bch_caller other = { .uid = 1001, .gid = 1001 };
	struct bch_caller fowner = { .uid = 1001, .gid = 1001, .cap_fowner = true };
	struct bch_caller root_cr = { .uid = 0, .cap_fowner = true, .cap_linux_immutable = true };

	cr_assert_eq(bch_fs_set_flags(c, f, FS_NODUMP_FL, 0, &other), -EPERM);
	cr_assert_eq(bch_fs_set_flags(c, f, FS_NODUMP_FL, 0, &owner), 0);
	cr_assert_eq(bch_fs_set_flags(c, f, FS_NODUMP_FL | FS_NOATIME_FL, 7, &fowner), 0);
	cr_assert_eq(bch_fs_set_flags(c, f, FS_IMMUTABLE_FL, 7, &owner), -EPERM);
	cr_assert_eq(bch_fs_set_flags(c, f, FS_APPEND_FL, 7, &fowner), -EPERM);
	cr_assert_eq(bch_fs_set_flags(c, f, FS_IMMUTABLE_FL, 7, &root_cr), 0);
	cr_assert_eq(bch_fs_set_flags(c, f, 0, 7, &owner), -EPERM, "clearing i needs the capability too");
	cr_assert_eq(bch_fs_set_flags(c, f, FS_IMMUTABLE_FL | FS_SYNC_FL, 7, &owner), 0,
		     "other flags change while i stays");
	cr_assert_eq(bch_fs_set_flags(c, f, FS_COMPR_FL, 7, &root_cr), -EOPNOTSUPP);
	unsigned fl;
	uint32_t project;
	cr_assert_eq(bch_fs_get_flags(c, f, &fl, &project), 0);
	cr_assert_eq(fl, FS_IMMUTABLE_FL | FS_SYNC_FL);
	cr_assert_eq(project, 7);
}

Test(file_flags, inherited_and_kept)
{
	const uint64_t root = BCH_ROOT_INO;
	uint64_t d = mkfile(root, "d", S_IFDIR | 0755, 0);
	char err[256];

	set(d, FS_NODUMP_FL | FS_NOATIME_FL | FS_SYNC_FL | FS_APPEND_FL, 3);
	uint64_t f = mkfile(d, "f", S_IFREG | 0644, 0);
	cr_assert_eq(get(f), FS_NODUMP_FL | FS_NOATIME_FL | FS_SYNC_FL, "d, A and S pass on, a does not");
	cr_assert_eq(bch_fs_write(c, f, 0, "s", 1), 1, "a sync write");
	cr_assert_eq(bch_fs_close(c), 0);
	c = testfs_open(fs1.paths, 1, 0, 0, err, sizeof(err));
	cr_assert(c, "reopen: %s", err);
	cr_assert(c->sb->features & BCH_FEATURE_INODE_FLAGS);
	cr_assert_eq(get(d), FS_NODUMP_FL | FS_NOATIME_FL | FS_SYNC_FL | FS_APPEND_FL);
	cr_assert_eq(bch_fs_close(c), 0);
	c = testfs_open(fs1.paths, 1, TESTFS_FSCK | TESTFS_RO, 0, err, sizeof(err));
	cr_assert(c, "open for fsck: %s", err);
	testfs_assert_fsck_clean(c, false);
}

/* Without the feature bit an inode with a file flag is invalid (outside fsck), and unknown bits always. */
Test(file_flags, validation)
{
	struct bch_bkey *k = bch_bkey_alloc(BCH_BKEY_inode, POS(0, BCH_ROOT_INO + 10, 0),
					    sizeof(struct bch_inode));
	struct bch_inode *i = bkey_val(k);
	char err[128];

	i->mode = S_IFREG | 0644;
	i->nlink = 1;
	cr_assert_eq(bch_bkey_validate_fs(c, k, BCH_BTREE_ID_inodes, 0, err, sizeof(err)), 0);
	i->flags = BCH_INODE_IMMUTABLE;
	cr_assert_neq(bch_bkey_validate_fs(c, k, BCH_BTREE_ID_inodes, 0, err, sizeof(err)), 0);
	cr_assert(strstr(err, "inode_flags"), "%s", err);
	i->flags = 0;
	i->project = 1;
	cr_assert_neq(bch_bkey_validate_fs(c, k, BCH_BTREE_ID_inodes, 0, err, sizeof(err)), 0);
	c->sb->features |= BCH_FEATURE_INODE_FLAGS;
	cr_assert_eq(bch_bkey_validate_fs(c, k, BCH_BTREE_ID_inodes, 0, err, sizeof(err)), 0);
	i->flags = 1U << 20;
	cr_assert_neq(bch_bkey_validate_fs(c, k, BCH_BTREE_ID_inodes, 0, err, sizeof(err)), 0);
	cr_assert(strstr(err, "unknown flags"), "%s", err);
	c->sb->features &= ~BCH_FEATURE_INODE_FLAGS;
	free(k);
}

Test(file_flags, rename_whiteout)
{
	const uint64_t root = BCH_ROOT_INO;
	uint64_t a = mkfile(root, "a", S_IFREG | 0644, 0), wh, moved;
	struct stat st;
	char err[256];

	cr_assert_eq(bch_fs_write(c, a, 0, "A", 1), 1);
	cr_assert_eq(bch_fs_rename(c, root, "a", root, "b", BCH_RENAME_WHITEOUT), -EINVAL,
		     "the plain call takes no whiteout");
	cr_assert_eq(bch_fs_rename_whiteout(c, root, "a", root, "b", BCH_RENAME_EXCHANGE, 5, 6), -EINVAL);
	cr_assert_eq(bch_fs_rename_whiteout(c, root, "a", root, "b", 0, 5, 6), 0);
	cr_assert_eq(bch_fs_lookup(c, root, "b", &moved), 0);
	cr_assert_eq(moved, a);
	cr_assert_eq(bch_fs_lookup(c, root, "a", &wh), 0);
	cr_assert_eq(bch_fs_getattr(c, wh, &st), 0);
	cr_assert(S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0) && (st.st_mode & 07777) == 0);
	cr_assert_eq(st.st_uid, 5);
	cr_assert_eq(st.st_gid, 6);
	/* NOREPLACE with it: the target must not exist */
	cr_assert_eq(bch_fs_rename_whiteout(c, root, "b", root, "a", BCH_RENAME_NOREPLACE, 0, 0), -EEXIST);
	/* over an existing name: the target goes, the source becomes a whiteout */
	cr_assert_eq(bch_fs_rename_whiteout(c, root, "b", root, "a", 0, 0, 0), 0);
	cr_assert_eq(bch_fs_lookup(c, root, "b", &wh), 0);
	cr_assert_eq(bch_fs_getattr(c, wh, &st), 0);
	cr_assert(S_ISCHR(st.st_mode));
	cr_assert_eq(bch_fs_close(c), 0);
	c = testfs_open(fs1.paths, 1, TESTFS_FSCK | TESTFS_RO, 0, err, sizeof(err));
	cr_assert(c, "open for fsck: %s", err);
	testfs_assert_fsck_clean(c, false);
}
