// SPDX-License-Identifier: GPL-2.0
/*
 * inode_opts_test.c - per-file options (fs_ops.h, "bcachefs.<option>"
 * xattrs) on a filesystem of two devices labelled ssd and hdd whose own
 * foreground_target is ssd:
 *   - set, get (as text), list and remove each of the eight options, with
 *     XATTR_CREATE / XATTR_REPLACE, size queries and short buffers;
 *   - refusals: unknown labels (named in c->err_msg), bad values, names
 *     that are not options, files that take no options, read-only;
 *   - inheritance by files and directories created later (not by those that
 *     exist), and the values kept across a close and an open;
 *   - the data path: bch_io_opts_get() gives the inode's values, a file with
 *     compression=zstd gets zstd extents, one with foreground_target=hdd
 *     (set on it, or inherited) has every copy on the hdd device, and reads
 *     back what was written;
 *   - rebalance acts on them: setting background_target or
 *     background_compression of a written file records its work in the
 *     same change, and a run moves / recompresses its data (and a file
 *     created in a directory with them is moved after its write);
 *   - bcachefs_effective.<option> (xattr_effective.h): own, inherited and
 *     filesystem values, what is listed, set/remove refused;
 *   - inode key validation of the option fields;
 *   - erasure_code's field (bits 8..9 of flags): the feature bit inode_ec
 *     set with the first value, the effective value, an invalid 3 or a value
 *     without the bit refused on read and found and cleared by fsck;
 *   - fsck -n clean at the end.
 * Data: a fixed pattern (no randomness).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "bcachefs.h"
#include "bcachefs_format.h"
#include "bkey.h"
#include "btree.h"
#include "format.h"
#include "fs.h"
#include "fs_ops.h"
#include "fsck.h"
#include "inode.h"
#include "io.h"
#include "move.h"
#include "rebalance.h"
#include "super.h"
#include "xattr_effective.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define DEV_SSD	0
#define DEV_HDD	1

static char tmpdir[64];
static char paths[2][TESTFS_PATH_MAX];
static struct bch_fs *c;

/* Two 32 MiB devices, labels ssd and hdd; the filesystem writes to ssd. */
static void format_labelled(void)
{
	struct bch_format_dev devs[2] = { 0 };
	struct bch_format_args args = { .have_uuid = true, .time_ns = 1700000000ULL * 1000000000ULL };
	const char *targets[BCH_OPT_NR] = { 0 };
	struct bch_opts o;
	char err[256];

	for (unsigned i = 0; i < 2; i++) {
		snprintf(paths[i], TESTFS_PATH_MAX, "%s/d%u.img", tmpdir, i);
		devs[i].path = paths[i];
		devs[i].size = 32 << 20;
		devs[i].bucket_size = 64 << 10;
		devs[i].durability = 1;
		devs[i].label = i == DEV_SSD ? "ssd" : "hdd";
	}
	memset(args.user_uuid, 0x5e, sizeof(args.user_uuid));
	bch_opts_default(&o);
	bch_opt_set(&o, Opt_btree_node_size, 64 << 10);
	targets[Opt_foreground_target] = "ssd";
	cr_assert_eq(bch_format(devs, 2, &o, targets, &args, err, sizeof(err)), 0, "format: %s", err);
}

static void reopen(unsigned flags)
{
	char err[256];

	if (c)
		cr_assert_eq(bch_fs_close(c), 0);
	c = testfs_open(paths, 2, flags, 0, err, sizeof(err));
	cr_assert(c, "open: %s", err);
}

static void setup(void)
{
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "inodeopts");
	format_labelled();
	reopen(0);
}

static void teardown(void)
{
	if (c)
		cr_assert_eq(bch_fs_close(c), 0);
	c = NULL;
	test_tmpdir_remove(tmpdir);
}

TestSuite(inode_opts, .init = setup, .fini = teardown);

static uint64_t mk(uint64_t dir, const char *name, mode_t mode)
{
	uint64_t inum;
	int r = bch_fs_create(c, dir, name, mode, 0, 0, 0, &inum);
	cr_assert_eq(r, 0, "create %s: %d", name, r);
	return inum;
}

/* setxattr of a string (the message slot emptied first: callers clear it) */
static int setx(uint64_t inum, const char *name, const char *val, int flags)
{
	c->err_msg[0] = 0;
	return bch_fs_setxattr(c, inum, name, val, strlen(val), flags);
}

/* The option's value as getxattr gives it (asserted to exist). */
static void expect_x(uint64_t inum, const char *name, const char *want)
{
	char got[128];
	ssize_t n = bch_fs_getxattr(c, inum, name, got, sizeof(got) - 1);

	cr_assert_geq(n, 0, "%s of %llu: %zd", name, (unsigned long long)inum, n);
	got[n] = 0;
	cr_assert_str_eq(got, want, "%s of %llu", name, (unsigned long long)inum);
	cr_assert_eq(bch_fs_getxattr(c, inum, name, NULL, 0), n, "%s: size query", name);
}

static void expect_unset(uint64_t inum, const char *name)
{
	char got[128];

	cr_assert_eq(bch_fs_getxattr(c, inum, name, got, sizeof(got)), -ENODATA,
		     "%s of %llu is set", name, (unsigned long long)inum);
}

/* The names listxattr gives, joined with spaces. */
static void list_names(uint64_t inum, char *out, size_t len)
{
	char buf[1024];
	ssize_t n = bch_fs_listxattr(c, inum, buf, sizeof(buf));

	cr_assert_geq(n, 0, "listxattr: %zd", n);
	cr_assert_eq(bch_fs_listxattr(c, inum, NULL, 0), n, "listxattr size query");
	out[0] = 0;
	for (ssize_t off = 0; off < n; off += strlen(buf + off) + 1)
		snprintf(out + strlen(out), len - strlen(out), "%s%s", off ? " " : "", buf + off);
}

static const struct { const char *name, *val, *shown; } all_opts[] = {
	{ "bcachefs.foreground_target",		"hdd",		"hdd" },
	{ "bcachefs.background_target",		"1",		"dev 1" },
	{ "bcachefs.promote_target",		"ssd",		"ssd" },
	{ "bcachefs.compression",		"zstd:3",	"zstd:3" },
	{ "bcachefs.background_compression",	"gzip",		"gzip" },
	{ "bcachefs.data_checksum",		"xxhash64",	"xxhash64" },
	{ "bcachefs.data_replicas",		"2",		"2" },
	{ "bcachefs.erasure_code",		"1",		"yes" },
};
#define NR_ALL	(sizeof(all_opts) / sizeof(all_opts[0]))

Test(inode_opts, set_get_list_remove)
{
	uint64_t f = mk(BCH_ROOT_INO, "f", S_IFREG | 0644);
	char names[1024], want[1024] = "user.x";

	cr_assert_eq(setx(f, "user.x", "1", 0), 0);
	for (unsigned i = 0; i < NR_ALL; i++) {
		expect_unset(f, all_opts[i].name);
		cr_assert_eq(setx(f, all_opts[i].name, all_opts[i].val, XATTR_REPLACE), -ENODATA, "%s",
			     all_opts[i].name);
		cr_assert_eq(setx(f, all_opts[i].name, all_opts[i].val, XATTR_CREATE), 0, "%s: %s",
			     all_opts[i].name, c->err_msg);
		cr_assert_eq(setx(f, all_opts[i].name, all_opts[i].val, XATTR_CREATE), -EEXIST);
		expect_x(f, all_opts[i].name, all_opts[i].shown);
		snprintf(want + strlen(want), sizeof(want) - strlen(want), " %s", all_opts[i].name);
	}
	/* the options after the xattrs of the btree, in a fixed order, then the
	 * effective names of the same options (xattr_effective.h), table order */
	snprintf(want + strlen(want), sizeof(want) - strlen(want), "%s",
		 " bcachefs_effective.data_replicas bcachefs_effective.data_checksum"
		 " bcachefs_effective.compression bcachefs_effective.background_compression"
		 " bcachefs_effective.foreground_target bcachefs_effective.background_target"
		 " bcachefs_effective.promote_target bcachefs_effective.erasure_code");
	list_names(f, names, sizeof(names));
	cr_assert_str_eq(names, want);
	cr_assert_eq(bch_fs_listxattr(c, f, names, strlen("user.x") + 1 + 3), -ERANGE);
	/* a short buffer for a value */
	cr_assert_eq(bch_fs_getxattr(c, f, "bcachefs.compression", names, 3), -ERANGE);
	/* the shown form parses back ("dev 1"), "none" is a value of its own */
	cr_assert_eq(setx(f, "bcachefs.background_target", "dev 1", XATTR_REPLACE), 0, "%s", c->err_msg);
	expect_x(f, "bcachefs.background_target", "dev 1");
	cr_assert_eq(setx(f, "bcachefs.promote_target", "none", XATTR_REPLACE), 0);
	expect_x(f, "bcachefs.promote_target", "none");
	cr_assert_eq(setx(f, "bcachefs.compression", "none", 0), 0);
	expect_x(f, "bcachefs.compression", "none");
	/* the values are not xattrs of the btree: removing the user one leaves them */
	cr_assert_eq(bch_fs_removexattr(c, f, "user.x"), 0);
	for (unsigned i = 0; i < NR_ALL; i++) {
		cr_assert_eq(bch_fs_removexattr(c, f, all_opts[i].name), 0, "%s", all_opts[i].name);
		cr_assert_eq(bch_fs_removexattr(c, f, all_opts[i].name), -ENODATA);
		expect_unset(f, all_opts[i].name);
	}
	cr_assert_eq(bch_fs_listxattr(c, f, names, sizeof(names)), 0);
	/* the library call behind `image setopt` is the same setting */
	cr_assert_eq(bch_fs_set_inode_opt(c, f, "background_target", "hdd"), 0);
	expect_x(f, "bcachefs.background_target", "hdd");
	cr_assert_eq(bch_fs_set_inode_opt(c, f, "background_target", NULL), 0);
	expect_unset(f, "bcachefs.background_target");
	cr_assert_eq(bch_fs_set_inode_opt(c, f, "background_target", NULL), 0, "clearing twice");
	cr_assert(bch_fs_is_inode_opt("promote_target"));
	cr_assert(!bch_fs_is_inode_opt("metadata_target"));
	cr_assert(!bch_fs_is_inode_opt("str_hash"));
}

/*
 * bcachefs_effective.<option>: the file's own value (set or inherited when
 * it was made), else the filesystem's (foreground_target ssd from format,
 * the defaults for the rest); listed only where the inode has a value;
 * set and remove refused with ENOTSUP; the shown values parse back.
 */
Test(inode_opts, effective)
{
	uint64_t d = mk(BCH_ROOT_INO, "d", S_IFDIR | 0755), l;
	char names[1024], fsval[64], buf[64];

	cr_assert_eq(setx(d, "bcachefs.compression", "zstd:3", 0), 0, "%s", c->err_msg);
	cr_assert_eq(setx(d, "bcachefs.background_target", "hdd", 0), 0, "%s", c->err_msg);
	uint64_t f = mk(d, "f", S_IFREG | 0644), g = mk(d, "g", S_IFREG | 0644);
	cr_assert_eq(setx(g, "bcachefs.compression", "lz4", 0), 0);
	cr_assert_eq(bch_fs_symlink(c, d, "l", "f", 0, 0, &l), 0);

	/* own, inherited, the filesystem's */
	expect_x(d, "bcachefs_effective.compression", "zstd:3");
	expect_x(f, "bcachefs_effective.compression", "zstd:3");
	expect_x(g, "bcachefs_effective.compression", "lz4");
	expect_x(f, "bcachefs_effective.background_target", "hdd");
	expect_x(BCH_ROOT_INO, "bcachefs_effective.compression", "none");
	expect_x(BCH_ROOT_INO, "bcachefs_effective.background_target", "none");
	expect_x(f, "bcachefs_effective.foreground_target", "ssd");
	bch_opt_to_text(Opt_data_checksum, c->opts.v[Opt_data_checksum], fsval, sizeof(fsval));
	expect_x(f, "bcachefs_effective.data_checksum", fsval);
	/* what the data path is given, for every option */
	struct bch_inode fi;
	struct bch_io_opts o;
	cr_assert_eq(bch_inode_get(c, f, &fi), 0);
	bch_io_opts_get(c, &fi, &o);
	bch_opt_to_text(Opt_compression, o.compression, fsval, sizeof(fsval));
	cr_assert_eq(bch_inode_opt_effective_text(c, &fi, Opt_compression, buf, sizeof(buf)), 0);
	cr_assert_str_eq(buf, fsval);
	snprintf(fsval, sizeof(fsval), "%u", o.replicas);
	expect_x(f, "bcachefs_effective.data_replicas", fsval);
	cr_assert_eq(bch_inode_opt_effective_text(c, &fi, Opt_metadata_target, buf, sizeof(buf)), -EINVAL);

	/* listed only for the options the inode carries */
	list_names(BCH_ROOT_INO, names, sizeof(names));
	cr_assert_str_eq(names, "");
	list_names(f, names, sizeof(names));
	cr_assert_str_eq(names, "bcachefs.background_target bcachefs.compression "
			 "bcachefs_effective.compression bcachefs_effective.background_target");
	cr_assert_eq(bch_fs_getxattr(c, f, "bcachefs_effective.compression", buf, 3), -ERANGE);

	/* not options, or no options taken */
	cr_assert_eq(bch_fs_getxattr(c, f, "bcachefs_effective.metadata_target", buf, sizeof(buf)), -ENODATA);
	cr_assert_eq(bch_fs_getxattr(c, f, "bcachefs_effective.", buf, sizeof(buf)), -ENODATA);
	cr_assert_eq(bch_fs_getxattr(c, f, "bcachefs_effective.data-replicas", buf, sizeof(buf)), -ENODATA);
	cr_assert_eq(bch_fs_getxattr(c, l, "bcachefs_effective.compression", buf, sizeof(buf)), -ENODATA);

	/* read-only: ENOTSUP with the reason, nothing changed */
	struct stat before, after;
	cr_assert_eq(bch_fs_getattr(c, f, &before), 0);
	cr_assert_eq(setx(f, "bcachefs_effective.compression", "lz4", 0), -EOPNOTSUPP);
	cr_assert(strstr(c->err_msg, "read-only") && strstr(c->err_msg, "bcachefs.compression"),
		  "%s", c->err_msg);
	cr_assert_eq(setx(f, "bcachefs_effective.nonsense", "1", 0), -EOPNOTSUPP);
	cr_assert_eq(bch_fs_removexattr(c, f, "bcachefs_effective.compression"), -EOPNOTSUPP);
	cr_assert_eq(bch_fs_getattr(c, f, &after), 0);
	cr_assert_eq(after.st_ctim.tv_nsec, before.st_ctim.tv_nsec);
	expect_x(f, "bcachefs_effective.compression", "zstd:3");

	/* removing the file's own value: the filesystem's shows */
	cr_assert_eq(bch_fs_removexattr(c, f, "bcachefs.compression"), 0);
	expect_x(f, "bcachefs_effective.compression", "none");
	/* every shown value sets back as it reads */
	for (unsigned i = 0; i < NR_ALL; i++) {
		char en[64], v[64];
		snprintf(en, sizeof(en), "bcachefs_effective.%s", all_opts[i].name + strlen("bcachefs."));
		ssize_t n = bch_fs_getxattr(c, g, en, v, sizeof(v) - 1);
		cr_assert_geq(n, 0, "%s", en);
		v[n] = 0;
		cr_assert_eq(setx(g, all_opts[i].name, v, 0), 0, "%s=%s: %s", all_opts[i].name, v, c->err_msg);
		expect_x(g, en, v);
	}
	/* a read-only open answers too */
	reopen(TESTFS_RO);
	expect_x(d, "bcachefs_effective.compression", "zstd:3");
	cr_assert_eq(setx(d, "bcachefs_effective.compression", "lz4", 0), -EOPNOTSUPP);
}

Test(inode_opts, refusals)
{
	uint64_t f = mk(BCH_ROOT_INO, "f", S_IFREG | 0644), l, p = mk(BCH_ROOT_INO, "p", S_IFIFO | 0644);
	struct stat before, after;

	cr_assert_eq(bch_fs_symlink(c, BCH_ROOT_INO, "l", "f", 0, 0, &l), 0);
	cr_assert_eq(bch_fs_getattr(c, f, &before), 0);
	cr_assert_eq(setx(f, "bcachefs.foreground_target", "nvme", 0), -EINVAL);
	cr_assert(strstr(c->err_msg, "nvme") && strstr(c->err_msg, "foreground_target"), "%s", c->err_msg);
	cr_assert_eq(setx(f, "bcachefs.promote_target", "7", 0), -EINVAL, "no device 7");
	cr_assert_eq(setx(f, "bcachefs.compression", "bogus", 0), -EINVAL);
	cr_assert(strstr(c->err_msg, "bogus"), "%s", c->err_msg);
	cr_assert_eq(setx(f, "bcachefs.compression", "zstd:16", 0), -EINVAL);
	cr_assert_eq(setx(f, "bcachefs.compression", "incompressible", 0), -EINVAL);
	cr_assert_eq(setx(f, "bcachefs.compression", "", 0), -EINVAL);
	cr_assert_eq(setx(f, "bcachefs.data_replicas", "0", 0), -EINVAL);
	cr_assert_eq(setx(f, "bcachefs.data_replicas", "5", 0), -EINVAL);
	cr_assert_eq(setx(f, "bcachefs.data_checksum", "md5", 0), -EINVAL);
	cr_assert_eq(bch_fs_setxattr(c, f, "bcachefs.compression", "zstd\0x", 6, 0), -EINVAL);
	static char longv[300];
	memset(longv, 'a', sizeof(longv) - 1);
	cr_assert_eq(setx(f, "bcachefs.compression", longv, 0), -EINVAL);
	/* names under bcachefs. that are not per-file options */
	cr_assert_eq(setx(f, "bcachefs.metadata_target", "ssd", 0), -EINVAL);
	cr_assert(strstr(c->err_msg, "metadata_target"), "%s", c->err_msg);
	cr_assert_eq(setx(f, "bcachefs.usage", "x", 0), -EINVAL);
	cr_assert_eq(setx(f, "bcachefs.", "x", 0), -EINVAL);
	cr_assert_eq(setx(f, "bcachefs.data-replicas", "2", 0), -EINVAL, "the table's spelling only");
	expect_unset(f, "bcachefs.metadata_target");
	cr_assert_eq(bch_fs_removexattr(c, f, "bcachefs.metadata_target"), -ENODATA);
	cr_assert_eq(bch_fs_set_inode_opt(c, f, "block_size", "4k"), -EINVAL);
	/* nothing of that was stored, not even a ctime */
	cr_assert_eq(bch_fs_getattr(c, f, &after), 0);
	cr_assert_eq(after.st_ctim.tv_nsec, before.st_ctim.tv_nsec);
	cr_assert_eq(after.st_ctim.tv_sec, before.st_ctim.tv_sec);
	char names[256];
	cr_assert_eq(bch_fs_listxattr(c, f, names, sizeof(names)), 0);
	/* only regular files and directories take options */
	cr_assert_eq(setx(l, "bcachefs.compression", "lz4", 0), -EINVAL);
	cr_assert(strstr(c->err_msg, "regular files and directories"), "%s", c->err_msg);
	cr_assert_eq(setx(p, "bcachefs.background_target", "hdd", 0), -EINVAL);
	expect_unset(l, "bcachefs.compression");
	cr_assert_eq(bch_fs_removexattr(c, l, "bcachefs.compression"), -ENODATA);
	/* a read-only filesystem refuses every change */
	cr_assert_eq(setx(f, "bcachefs.compression", "lz4", 0), 0);
	reopen(TESTFS_RO);
	cr_assert_eq(setx(f, "bcachefs.compression", "gzip", 0), -EROFS);
	/* every other refusal comes first: `image setfattr` checks on a read-only open */
	cr_assert_eq(setx(f, "bcachefs.foreground_target", "nvme", 0), -EINVAL);
	cr_assert_eq(setx(l, "bcachefs.compression", "lz4", 0), -EINVAL);
	cr_assert_eq(setx(f, "bcachefs.compression", "gzip", XATTR_CREATE), -EEXIST);
	cr_assert_eq(bch_fs_removexattr(c, f, "bcachefs.promote_target"), -ENODATA);
	cr_assert_eq(bch_fs_removexattr(c, f, "bcachefs.compression"), -EROFS);
	expect_x(f, "bcachefs.compression", "lz4");
}

Test(inode_opts, inheritance)
{
	uint64_t d = mk(BCH_ROOT_INO, "d", S_IFDIR | 0755);
	uint64_t old = mk(d, "old", S_IFREG | 0644), olddir = mk(d, "olddir", S_IFDIR | 0755);

	for (unsigned i = 0; i < NR_ALL; i++)
		cr_assert_eq(setx(d, all_opts[i].name, all_opts[i].val, 0), 0, "%s", all_opts[i].name);
	uint64_t f = mk(d, "f", S_IFREG | 0644), sub = mk(d, "sub", S_IFDIR | 0755);
	uint64_t deep = mk(sub, "deep", S_IFREG | 0644), s;
	cr_assert_eq(bch_fs_symlink(c, d, "s", "f", 0, 0, &s), 0);
	/* a child with an option of its own passes that one on */
	cr_assert_eq(setx(sub, "bcachefs.compression", "lz4", 0), 0);
	uint64_t deep2 = mk(sub, "deep2", S_IFREG | 0644);
	/* removing an option from the directory leaves its children as they are */
	cr_assert_eq(bch_fs_removexattr(c, d, "bcachefs.promote_target"), 0);
	uint64_t late = mk(d, "late", S_IFREG | 0644);

	reopen(0);
	for (unsigned i = 0; i < NR_ALL; i++) {
		const char *n = all_opts[i].name, *v = all_opts[i].shown;
		bool promote = !strcmp(n, "bcachefs.promote_target");
		bool comp = !strcmp(n, "bcachefs.compression");
		expect_x(f, n, v);
		expect_x(sub, n, comp ? "lz4" : v);
		expect_x(deep, n, v);
		expect_x(deep2, n, comp ? "lz4" : v);
		expect_unset(old, n);
		expect_unset(olddir, n);
		if (promote)
			expect_unset(late, n);
		else
			expect_x(late, n, v);
	}
}

/* Every extent of inum: its compression types and the devices of its copies. */
static void extents_of(uint64_t inum, unsigned *comp_mask, unsigned *dev_mask, unsigned *nr)
{
	struct btree_iter it;
	const struct bch_bkey *k;
	int err = 0;

	*comp_mask = *dev_mask = *nr = 0;
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_extents, POS(inum, 0, 0), POS(inum, UINT64_MAX, 0));
	while ((k = bch_btree_iter_next(&it, &err))) {
		if (k->type != BCH_BKEY_extent)
			continue;
		const struct bch_extent *e = bkey_val(k);
		*comp_mask |= 1U << e->crc.compression_type;
		for (unsigned p = 0; p < bch_extent_nr_ptrs(k); p++)
			*dev_mask |= 1U << e->ptrs[p].dev;
		(*nr)++;
	}
	bch_btree_iter_exit(&it);
	cr_assert_eq(err, 0);
}

#define DATA_BYTES	(512 << 10)

/* Compressible, and different per file: lines of text numbered from seed. */
static char *pattern(unsigned seed)
{
	char *buf = malloc(DATA_BYTES + 64);
	size_t n = 0;

	cr_assert(buf);
	for (unsigned line = 0; n < DATA_BYTES; line++)
		n += sprintf(buf + n, "file %u line %08u: the quick brown fox\n", seed, line);
	return buf;
}

static void write_check(uint64_t inum, unsigned seed)
{
	char *data = pattern(seed), *back = malloc(DATA_BYTES);

	cr_assert(back);
	cr_assert_eq(bch_fs_write(c, inum, 0, data, DATA_BYTES), DATA_BYTES);
	cr_assert_eq(bch_fs_read(c, inum, 0, back, DATA_BYTES), DATA_BYTES);
	cr_assert(!memcmp(data, back, DATA_BYTES), "inode %llu reads back other data",
		  (unsigned long long)inum);
	free(data);
	free(back);
}

Test(inode_opts, data_path)
{
	uint64_t plain = mk(BCH_ROOT_INO, "plain", S_IFREG | 0644);
	uint64_t z = mk(BCH_ROOT_INO, "z", S_IFREG | 0644);
	uint64_t h = mk(BCH_ROOT_INO, "h", S_IFREG | 0644);
	uint64_t d = mk(BCH_ROOT_INO, "d", S_IFDIR | 0755);
	unsigned comp, devs, nr;

	cr_assert_eq(setx(z, "bcachefs.compression", "zstd", 0), 0);
	cr_assert_eq(setx(h, "bcachefs.foreground_target", "hdd", 0), 0);
	cr_assert_eq(setx(d, "bcachefs.foreground_target", "hdd", 0), 0);
	cr_assert_eq(setx(d, "bcachefs.compression", "gzip", 0), 0);
	uint64_t dh = mk(d, "dh", S_IFREG | 0644);

	/* what the data path is told */
	struct bch_inode i;
	struct bch_io_opts o;
	cr_assert_eq(bch_inode_get(c, plain, &i), 0);
	bch_io_opts_get(c, &i, &o);
	cr_assert_eq(o.target, BCH_TARGET_LABEL_START + 0, "the filesystem's ssd");
	cr_assert_eq(o.compression, 0);
	cr_assert_eq(setx(plain, "bcachefs.background_target", "hdd", 0), 0);
	cr_assert_eq(setx(plain, "bcachefs.promote_target", "dev 0", 0), 0);
	cr_assert_eq(setx(plain, "bcachefs.background_compression", "zstd:5", 0), 0);
	cr_assert_eq(bch_inode_get(c, plain, &i), 0);
	bch_io_opts_get(c, &i, &o);
	uint64_t hdd;
	cr_assert_eq(bch_target_parse(c->sb, "hdd", &hdd), 0);
	cr_assert_eq(o.background_target, hdd);
	cr_assert_eq(o.promote_target, BCH_TARGET_DEV_START + 0);
	cr_assert_eq(o.background_compression, BCH_COMPRESSION_zstd | (5 << 8));
	cr_assert_eq(o.target, BCH_TARGET_LABEL_START + 0, "foreground target still inherited");
	cr_assert_eq(setx(plain, "bcachefs.foreground_target", "none", 0), 0);
	cr_assert_eq(bch_inode_get(c, plain, &i), 0);
	bch_io_opts_get(c, &i, &o);
	cr_assert_eq(o.target, 0, "an explicit none overrides the filesystem's target");
	cr_assert_eq(bch_fs_removexattr(c, plain, "bcachefs.foreground_target"), 0);

	/* what it does with it */
	write_check(plain, 1);
	write_check(z, 2);
	write_check(h, 3);
	write_check(dh, 4);
	reopen(0);
	extents_of(plain, &comp, &devs, &nr);
	cr_assert(nr && comp == 1U << BCH_COMPRESSION_none && devs == 1U << DEV_SSD,
		  "plain: comp %x devs %x", comp, devs);
	extents_of(z, &comp, &devs, &nr);
	cr_assert(nr && comp == 1U << BCH_COMPRESSION_zstd && devs == 1U << DEV_SSD,
		  "z: comp %x devs %x", comp, devs);
	extents_of(h, &comp, &devs, &nr);
	cr_assert(nr && comp == 1U << BCH_COMPRESSION_none && devs == 1U << DEV_HDD,
		  "h: comp %x devs %x", comp, devs);
	extents_of(dh, &comp, &devs, &nr);
	cr_assert(nr && comp == 1U << BCH_COMPRESSION_gzip && devs == 1U << DEV_HDD,
		  "dh: comp %x devs %x", comp, devs);
	/* a removed option: new writes follow the filesystem's again */
	cr_assert_eq(bch_fs_removexattr(c, h, "bcachefs.foreground_target"), 0);
	write_check(h, 5);
	extents_of(h, &comp, &devs, &nr);
	cr_assert(nr && devs == 1U << DEV_SSD, "h rewritten: devs %x", devs);
}

static void rebalance_all(void)
{
	struct bch_move_stats st;
	bool parked = false;
	unsigned steps = 0;
	int r;

	memset(&st, 0, sizeof(st));
	while ((r = bch_rebalance_step(c, 2048, &st, &parked)) == 1)
		cr_assert_lt(++steps, 100000, "rebalance does not end");
	cr_assert_eq(r, 0, "rebalance: %s", c->err_msg);
	cr_assert(!parked, "rebalance parked");
	cr_assert_eq(st.keys_raced + st.keys_no_good_copy + st.keys_no_space, 0, "%s", st.last_problem);
}

Test(inode_opts, rebalance)
{
	uint64_t f = mk(BCH_ROOT_INO, "f", S_IFREG | 0644), d = mk(BCH_ROOT_INO, "d", S_IFDIR | 0755);
	struct bch_rebalance_pending p;
	unsigned comp, devs, nr;

	write_check(f, 7);
	cr_assert_eq(bch_rebalance_pending(c, &p), 0);
	cr_assert_eq(p.inodes, 0, "work without a background option");
	/* the option and its work key in one change */
	cr_assert_eq(setx(f, "bcachefs.background_target", "hdd", 0), 0);
	cr_assert_eq(bch_rebalance_pending(c, &p), 0);
	cr_assert_eq(p.inodes, 1);
	cr_assert_eq(p.sectors_target, DATA_BYTES / 512);
	rebalance_all();
	extents_of(f, &comp, &devs, &nr);
	cr_assert(nr && comp == 1U << BCH_COMPRESSION_none && devs == 1U << DEV_HDD,
		  "f after rebalance: comp %x devs %x", comp, devs);
	cr_assert_eq(setx(f, "bcachefs.background_compression", "zstd", 0), 0);
	cr_assert_eq(bch_rebalance_pending(c, &p), 0);
	cr_assert_eq(p.sectors_compression, DATA_BYTES / 512);
	rebalance_all();
	extents_of(f, &comp, &devs, &nr);
	cr_assert(nr && comp == 1U << BCH_COMPRESSION_zstd && devs == 1U << DEV_HDD,
		  "f recompressed: comp %x devs %x", comp, devs);
	/* the same value again records nothing new; other options record nothing */
	cr_assert_eq(setx(f, "bcachefs.background_target", "hdd", 0), 0);
	cr_assert_eq(setx(f, "bcachefs.promote_target", "ssd", 0), 0);
	cr_assert_eq(setx(d, "bcachefs.background_target", "hdd", 0), 0);
	cr_assert_eq(bch_rebalance_pending(c, &p), 0);
	cr_assert_eq(p.inodes, 0);
	/* a file made in d: written to ssd, then moved to hdd */
	uint64_t g = mk(d, "g", S_IFREG | 0644);
	write_check(g, 8);
	extents_of(g, &comp, &devs, &nr);
	cr_assert(nr && devs == 1U << DEV_SSD, "g written: devs %x", devs);
	rebalance_all();
	extents_of(g, &comp, &devs, &nr);
	cr_assert(nr && devs == 1U << DEV_HDD, "g after rebalance: devs %x", devs);
	reopen(0);
	char *want = pattern(7), *got = malloc(DATA_BYTES);
	cr_assert_eq(bch_fs_read(c, f, 0, got, DATA_BYTES), DATA_BYTES);
	cr_assert(!memcmp(want, got, DATA_BYTES), "f reads back other data after rebalance");
	free(want);
	free(got);
}

/* An inode key with one option field changed passes validation or not. */
static bool inode_valid(void (*poke)(struct bch_inode *, unsigned), unsigned v)
{
	struct bch_bkey *k = bch_bkey_alloc(BCH_BKEY_inode, POS(0, BCH_FIRST_INO + 7, 0),
					    sizeof(struct bch_inode));
	struct bch_inode *i = bkey_val(k);
	char err[128];

	bch_inode_init(c, i, BCH_FIRST_INO + 7, S_IFREG | 0644, 0, 0, 0, NULL);
	poke(i, v);
	int r = bch_bkey_validate(k, BCH_BTREE_ID_inodes, 0, err, sizeof(err));
	free(k);
	return !r;
}

static void poke_comp(struct bch_inode *i, unsigned v)		{ i->opt_compression = v; }
static void poke_bgcomp(struct bch_inode *i, unsigned v)	{ i->opt_background_compression = v; }
static void poke_fg(struct bch_inode *i, unsigned v)		{ i->opt_foreground_target = v; }
static void poke_bg(struct bch_inode *i, unsigned v)		{ i->opt_background_target = v; }
static void poke_promote(struct bch_inode *i, unsigned v)	{ i->opt_promote_target = v; }

Test(inode_opts, validation)
{
	void (*comp[])(struct bch_inode *, unsigned) = { poke_comp, poke_bgcomp };
	void (*target[])(struct bch_inode *, unsigned) = { poke_fg, poke_bg, poke_promote };

	for (unsigned n = 0; n < 2; n++) {
		/* stored as value + 1: 0 inherits */
		cr_assert(inode_valid(comp[n], 0));
		cr_assert(inode_valid(comp[n], BCH_COMPRESSION_none + 1));
		cr_assert(inode_valid(comp[n], BCH_COMPRESSION_zstd + 1));
		cr_assert(inode_valid(comp[n], (BCH_COMPRESSION_zstd | 15 << 8) + 1));
		cr_assert(!inode_valid(comp[n], (BCH_COMPRESSION_zstd | 16 << 8) + 1));
		cr_assert(!inode_valid(comp[n], (BCH_COMPRESSION_none | 3 << 8) + 1));
		cr_assert(!inode_valid(comp[n], BCH_COMPRESSION_incompressible + 1));
		cr_assert(!inode_valid(comp[n], 0x42 + 1));
	}
	for (unsigned n = 0; n < 3; n++) {
		cr_assert(inode_valid(target[n], 0));
		cr_assert(inode_valid(target[n], 0 + 1), "none");
		cr_assert(inode_valid(target[n], BCH_TARGET_DEV_START + 63 + 1));
		cr_assert(!inode_valid(target[n], BCH_TARGET_DEV_START + 64 + 1));
		cr_assert(!inode_valid(target[n], BCH_TARGET_LABEL_START - 1 + 1));
		cr_assert(inode_valid(target[n], BCH_TARGET_LABEL_START + 1));
		cr_assert(inode_valid(target[n], 0xffff));
	}
}

/* fsck's reports, for the failure message: the first one */
static char fsck_first[512];

static enum bch_fsck_answer fsck_report(struct bch_fsck_ctx *ctx, enum bch_fsck_problem p,
					const char *where, const char *detail, int fix)
{
	(void)ctx;
	(void)fix;
	if (!fsck_first[0])
		snprintf(fsck_first, sizeof(fsck_first), "%s: %s: %s", bch_fsck_problems[p].name,
			 where ? where : "", detail ? detail : "");
	return BCH_FSCK_ANSWER_NO;
}

Test(inode_opts, fsck_clean)
{
	uint64_t d = mk(BCH_ROOT_INO, "d", S_IFDIR | 0755);

	for (unsigned i = 0; i < NR_ALL; i++)
		cr_assert_eq(setx(d, all_opts[i].name, all_opts[i].val, 0), 0);
	cr_assert_eq(bch_fs_removexattr(c, d, "bcachefs.data_replicas"), 0);
	/*
	 * Not promote_target: the read-back would add a cached copy in a bucket
	 * of only cached data, which fsck pass 5 (fsck_extents.c) still calls
	 * extent_ptr_bad ("in a bucket of other data") - a promote matter.
	 */
	cr_assert_eq(bch_fs_removexattr(c, d, "bcachefs.promote_target"), 0);
	write_check(mk(d, "f", S_IFREG | 0644), 6);
	mk(d, "sub", S_IFDIR | 0755);

	char err[256];
	cr_assert_eq(bch_fs_close(c), 0);
	c = testfs_open(paths, 2, TESTFS_FSCK | TESTFS_RO, 0, err, sizeof(err));
	cr_assert(c, "open for fsck: %s", err);
	struct bch_fsck_ctx *n = calloc(1, sizeof(*n));
	struct bch_fsck_file_stats st;
	uint64_t nodes;
	n->mode = BCH_FSCK_NO;
	n->report = fsck_report;
	cr_assert(bch_fsck_btrees(n, c, &nodes) == 0 && bch_fsck_files(n, c, true, &st) == 0,
		  "%s", n->err_msg);
	uint64_t found = 0;
	for (unsigned p = 0; p < BCH_FSCK_PROBLEM_NR; p++)
		found += n->found[p];
	free(n);
	cr_assert_eq(found, 0, "fsck -n finds %s", fsck_first);
	cr_assert_geq(st.inodes, 4);
}

/* Run fsck (mode) on a fresh fsck open; the count of problem p. */
static uint64_t fsck_count(enum bch_fsck_mode mode, enum bch_fsck_problem p)
{
	char err[256];

	cr_assert_eq(bch_fs_close(c), 0);
	c = testfs_open(paths, 2, TESTFS_FSCK | (mode == BCH_FSCK_NO ? TESTFS_RO : 0), 0, err, sizeof(err));
	cr_assert(c, "open for fsck: %s", err);
	struct bch_fsck_ctx *n = calloc(1, sizeof(*n));
	struct bch_fsck_file_stats st;
	uint64_t nodes;
	n->mode = mode;
	n->report = mode == BCH_FSCK_NO ? fsck_report : NULL;
	cr_assert(bch_fsck_btrees(n, c, &nodes) == 0 && bch_fsck_files(n, c, mode != BCH_FSCK_NO, &st) == 0,
		  "%s", n->err_msg);
	uint64_t found = n->found[p];
	free(n);
	reopen(0);
	return found;
}

/* Rewrite inode inum with its erasure_code field raw (0..3), bypassing fs_ops. */
static void poke_ec(uint64_t inum, unsigned raw)
{
	struct bch_inode i;
	struct btree_trans *t;

	cr_assert_eq(bch_inode_get(c, inum, &i), 0);
	i.flags = (i.flags & ~BCH_INODE_OPT_EC_MASK) | raw << BCH_INODE_OPT_EC_SHIFT;
	cr_assert_eq(bch_trans_init(c, &t), 0);
	cr_assert_eq(bch_inode_update(t, inum, &i), 0);
	bch_trans_unchecked = true;	/* as kv --unchecked: the commit would refuse 3 */
	int r = bch_trans_commit(t, 0);
	bch_trans_unchecked = false;
	cr_assert_eq(r, 0);
	bch_trans_exit(t);
}

Test(inode_opts, erasure_code_field)
{
	uint64_t d = mk(BCH_ROOT_INO, "d", S_IFDIR | 0755), f = mk(d, "f", S_IFREG | 0644);
	struct bch_inode i;

	/* no bit before the first value; set with it, kept across an open */
	cr_assert_eq(c->sb->features & BCH_FEATURE_INODE_EC, 0);
	cr_assert_eq(setx(f, "bcachefs.erasure_code", "off", 0), 0, "%s", c->err_msg);
	cr_assert_neq(c->sb->features & BCH_FEATURE_INODE_EC, 0);
	cr_assert_eq(setx(d, "bcachefs.erasure_code", "yes", 0), 0, "%s", c->err_msg);
	uint64_t g = mk(d, "g", S_IFREG | 0644);
	reopen(0);
	cr_assert_neq(c->sb->features & BCH_FEATURE_INODE_EC, 0);
	expect_x(f, "bcachefs.erasure_code", "no");
	expect_x(g, "bcachefs.erasure_code", "yes");		/* inherited */
	expect_x(BCH_ROOT_INO, "bcachefs_effective.erasure_code", "no");
	cr_assert_eq(bch_inode_get(c, g, &i), 0);
	cr_assert_eq(i.flags & BCH_INODE_OPT_EC_MASK, 2U << BCH_INODE_OPT_EC_SHIFT);
	cr_assert(bch_inode_ec_effective(c, &i));
	cr_assert_eq(bch_inode_flags_to_fs(i.flags), 0, "the field is no file flag");
	struct bch_inode_ec_memo m = { 0 };
	cr_assert(bch_inode_ec_memo_on(c, &m, g) && !bch_inode_ec_memo_on(c, &m, f));
	cr_assert(!bch_inode_ec_memo_on(c, &m, BCH_ROOT_INO));
	/* chattr keeps it */
	cr_assert_eq(bch_fs_set_flags(c, g, FS_NODUMP_FL, 0, NULL), 0);
	expect_x(g, "bcachefs.erasure_code", "yes");
	cr_assert_eq(setx(g, "bcachefs.erasure_code", "2", 0), -EINVAL);

	/* validation: 3 is invalid; a value without the bit is invalid */
	cr_assert_eq(bch_inode_get(c, g, &i), 0);
	i.flags |= BCH_INODE_OPT_EC_MASK;
	cr_assert_eq(bch_inode_flags_check(c->sb->features, &i), BCH_INODE_FLAGS_UNKNOWN);
	cr_assert_eq(bch_inode_flags_unknown(&i), BCH_INODE_OPT_EC_MASK);
	i.flags &= ~(1U << BCH_INODE_OPT_EC_SHIFT);
	cr_assert_eq(bch_inode_flags_check(c->sb->features, &i), BCH_INODE_FLAGS_OK);
	cr_assert_eq(bch_inode_flags_check(c->sb->features & ~BCH_FEATURE_INODE_EC, &i),
		     BCH_INODE_FLAGS_NO_FEATURE);
	bch_inode_flags_clear_no_feature(c->sb->features & ~BCH_FEATURE_INODE_EC, &i);
	cr_assert_eq(i.flags & BCH_INODE_OPT_EC_MASK, 0);
	cr_assert_neq(i.flags & BCH_INODE_NODUMP, 0, "inode_flags is set: file flags stay");

	/* fsck: the invalid 3 found (unknown) and cleared; a commit refuses it */
	cr_assert_eq(bch_inode_get(c, f, &i), 0);
	i.flags |= BCH_INODE_OPT_EC_MASK;
	struct btree_trans *t;
	cr_assert_eq(bch_trans_init(c, &t), 0);
	cr_assert_eq(bch_inode_update(t, f, &i), 0);
	cr_assert_neq(bch_trans_commit(t, 0), 0);
	bch_trans_exit(t);
	c->err_msg[0] = 0;
	poke_ec(f, 3);
	cr_assert_eq(fsck_count(BCH_FSCK_NO, BCH_FSCK_inode_flags_unknown), 1, "%s", fsck_first);
	cr_assert_eq(fsck_count(BCH_FSCK_YES, BCH_FSCK_inode_flags_unknown), 1);
	fsck_first[0] = 0;
	cr_assert_eq(fsck_count(BCH_FSCK_NO, BCH_FSCK_inode_flags_unknown), 0, "%s", fsck_first);
	expect_unset(f, "bcachefs.erasure_code");
	/* a superblock without the bit: both values found and cleared, the flag kept */
	c->sb->features &= ~BCH_FEATURE_INODE_EC;
	cr_assert_eq(bch_write_super(c), 0);
	cr_assert_eq(fsck_count(BCH_FSCK_NO, BCH_FSCK_inode_flags_no_feature), 2, "%s", fsck_first);
	cr_assert_eq(fsck_count(BCH_FSCK_YES, BCH_FSCK_inode_flags_no_feature), 2);
	fsck_first[0] = 0;
	cr_assert_eq(fsck_count(BCH_FSCK_NO, BCH_FSCK_inode_flags_no_feature), 0, "%s", fsck_first);
	expect_unset(g, "bcachefs.erasure_code");
	expect_unset(d, "bcachefs.erasure_code");
	cr_assert_eq(bch_inode_get(c, g, &i), 0);
	cr_assert_neq(i.flags & BCH_INODE_NODUMP, 0);
}
