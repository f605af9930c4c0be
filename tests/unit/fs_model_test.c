// SPDX-License-Identifier: GPL-2.0
/*
 * fs_model_test.c - the POSIX layer against the host's own filesystem:
 * the same random operations (create, mkdir, write, truncate, punch, zero
 * range, fallocate, unlink, rmdir, rename with and without flags, link,
 * symlink, xattrs, chmod) run on fs_ops and on a directory of the host,
 * and must give the same result code; every few hundred operations (and
 * at the end) the two trees must hold the same names, types, sizes,
 * contents, link counts, modes, link targets and xattrs.  With clean
 * close/reopen and crash-reopen (journal replay) cycles, on one and two
 * devices, with each compression type, and with erasure coding on four
 * devices (data_replicas 2: the stripe builder gathers the data into RS(k,1)
 * stripes every few hundred operations, so later operations read, overwrite,
 * truncate and delete striped data).  Seeds are printed; SOAK=1 runs longer.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "bcachefs.h"
#include "bcachefs_format.h"
#include "errcode.h"
#include "format.h"
#include "fs.h"
#include "fs_ops.h"
#include "alloc.h"
#include "ec.h"
#include "ec_usage.h"
#include "journal.h"
#include "move.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define MAX_FILE	(1 << 20)

static char tmpdir[64], hostroot[128];
#define MAX_DEVS	4
static char paths[MAX_DEVS][TESTFS_PATH_MAX];
static unsigned nr_paths, seed;
static const char *compression;
static bool erasure_code;	/* the parameter: the filesystem's erasure_code on */

static struct bch_fs *open_fs(void)
{
	char err[256];
	struct bch_fs *c = testfs_open(paths, nr_paths, 0, 0, err, sizeof(err));

	cr_assert(c, "seed %u: open: %s", seed, err);
	return c;
}

static void setup(unsigned nr, const char *comp)
{
	char cmd[512];

	test_tmpdir_make(tmpdir, sizeof(tmpdir), "fsmodel");
	nr_paths = nr;
	compression = comp;
	/* erasure coding: two copies (p = 1) on four members, stripes of up to 3 + 1 */
	testfs_format(tmpdir, nr, erasure_code ? 64 : 128, 64 << 10, erasure_code ? 2 : nr, paths);
	if (comp || erasure_code) {
		/* superblock options: set them as format would */
		struct bch_fs *c = open_fs();
		char err[128];
		uint64_t v;
		if (comp) {
			cr_assert_eq(bch_opt_parse(Opt_compression, comp, &v, err, sizeof(err)), 0);
			c->opts.v[Opt_compression] = v;
			c->sb->opts[bch_opt_table[Opt_compression].sb_slot] = v;
		}
		if (erasure_code) {
			c->opts.v[Opt_erasure_code] = 1;
			c->sb->opts[bch_opt_table[Opt_erasure_code].sb_slot] = 1;
			c->opts.v[Opt_data_replicas] = 2;
			c->sb->opts[bch_opt_table[Opt_data_replicas].sb_slot] = 2;
		}
		cr_assert_eq(bch_fs_close(c), 0);
	}
	snprintf(hostroot, sizeof(hostroot), "%s/host", tmpdir);
	cr_assert_eq(mkdir(hostroot, 0755), 0);
	(void)cmd;
}

static void teardown_all(void)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd))
		fprintf(stderr, "could not remove %s\n", tmpdir);
}

/* ------------------------------------------------------------ namespace */

/* A small namespace so operations collide: 3 levels of d0..d2, names n0..n5. */
static void rand_path(char *buf, size_t len)
{
	int depth = random() % 3;
	size_t n = 0;

	for (int i = 0; i < depth; i++)
		n += snprintf(buf + n, len - n, "d%ld/", random() % 3);
	if (random() % 3 == 0)
		snprintf(buf + n, len - n, "d%ld", random() % 3);
	else
		snprintf(buf + n, len - n, "n%ld", random() % 6);
}

/* Our side: resolve the parent of path and its last name. */
static int our_parent(struct bch_fs *c, const char *path, uint64_t *dir, char *name)
{
	char tmp[256];
	snprintf(tmp, sizeof(tmp), "%s", path);
	char *slash = strrchr(tmp, '/');
	if (!slash) {
		*dir = BCH_ROOT_INO;
		strcpy(name, tmp);
		return 0;
	}
	*slash = 0;
	strcpy(name, slash + 1);
	/* as path resolution does: the parent must be a directory */
	struct stat st;
	int r = bch_fs_lookup_path(c, tmp, true, dir);
	if (!r && !(r = bch_fs_getattr(c, *dir, &st)) && !S_ISDIR(st.st_mode))
		r = -ENOTDIR;
	return r;
}

static int our_lookup(struct bch_fs *c, const char *path, uint64_t *inum)
{
	return bch_fs_lookup_path(c, path, false, inum);
}

static void host_path(const char *path, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", hostroot, path);
}

static int h(int r)
{
	return r < 0 ? -errno : r;
}

/* --------------------------------------------------------------- compare */

struct count {
	unsigned	n;
	bool		root;
};

static int count_fn(void *priv, const char *name, size_t len, uint64_t inum, unsigned t, uint64_t next)
{
	struct count *k = priv;
	(void)inum; (void)t; (void)next;

	if ((len == 1 && name[0] == '.') || (len == 2 && !memcmp(name, "..", 2)) ||
	    (k->root && len == 10 && !memcmp(name, "lost+found", 10)))
		return 0;
	k->n++;
	return 0;
}

static unsigned char *hbuf, *obuf;

static void compare_tree(struct bch_fs *c, const char *rel, unsigned op)
{
	char hp[1024];
	DIR *d;
	struct dirent *e;
	unsigned nr_host = 0;

	host_path(rel, hp, sizeof(hp));
	d = opendir(hp);
	cr_assert(d, "seed %u op %u: opendir %s", seed, op, hp);
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    (!*rel && !strcmp(e->d_name, "lost+found")))
			continue;
		nr_host++;
		char sub[512], hsub[1024];
		snprintf(sub, sizeof(sub), "%s%s%s", rel, *rel ? "/" : "", e->d_name);
		host_path(sub, hsub, sizeof(hsub));
		struct stat hs, os;
		uint64_t inum;
		cr_assert_eq(lstat(hsub, &hs), 0);
		cr_assert_eq(our_lookup(c, sub, &inum), 0, "seed %u op %u: %s missing", seed, op, sub);
		cr_assert_eq(bch_fs_getattr(c, inum, &os), 0);
		cr_assert_eq(hs.st_mode, os.st_mode, "seed %u op %u: %s mode %o vs %o", seed, op, sub,
			     hs.st_mode, os.st_mode);
		cr_assert_eq(hs.st_nlink, os.st_nlink, "seed %u op %u: %s nlink %lu vs %lu", seed, op, sub,
			     (unsigned long)hs.st_nlink, (unsigned long)os.st_nlink);
		if (S_ISREG(hs.st_mode)) {
			cr_assert_eq(hs.st_size, os.st_size, "seed %u op %u: %s size %ld vs %ld", seed, op,
				     sub, (long)hs.st_size, (long)os.st_size);
			int fd = open(hsub, O_RDONLY);
			ssize_t hn = read(fd, hbuf, MAX_FILE + 65536);
			close(fd);
			ssize_t on = bch_fs_read(c, inum, 0, obuf, MAX_FILE + 65536);
			cr_assert_eq(hn, on, "seed %u op %u: %s read %zd vs %zd", seed, op, sub, hn, on);
			for (ssize_t i = 0; i < hn; i++)
				cr_assert_eq(hbuf[i], obuf[i], "seed %u op %u: %s byte %zd differs", seed, op, sub, i);
		}
		if (S_ISLNK(hs.st_mode)) {
			char ht[256] = "", ot[256] = "";
			cr_assert(readlink(hsub, ht, sizeof(ht) - 1) >= 0);
			cr_assert(bch_fs_readlink(c, inum, ot, sizeof(ot)) >= 0);
			cr_assert_str_eq(ht, ot, "seed %u op %u: %s target", seed, op, sub);
		} else {
			char hx[4096], ox[4096];
			ssize_t hl = llistxattr(hsub, hx, sizeof(hx)), ol = bch_fs_listxattr(c, inum, ox, sizeof(ox));
			cr_assert_eq(hl, ol, "seed %u op %u: %s xattr list %zd vs %zd", seed, op, sub, hl, ol);
			for (ssize_t o = 0; o < hl; o += strlen(hx + o) + 1) {
				char hv[512], ov[512];
				ssize_t a = lgetxattr(hsub, hx + o, hv, sizeof(hv));
				ssize_t b = bch_fs_getxattr(c, inum, hx + o, ov, sizeof(ov));
				cr_assert(a == b && !memcmp(hv, ov, a), "seed %u op %u: %s xattr %s", seed, op,
					  sub, hx + o);
			}
		}
		if (S_ISDIR(hs.st_mode))
			compare_tree(c, sub, op);
	}
	closedir(d);

	/* and nothing more on our side */
	uint64_t dir;
	unsigned nr_ours = 0;
	cr_assert_eq(our_lookup(c, *rel ? rel : "/", &dir), 0);
	struct count cnt = { 0, !*rel };
	cr_assert_eq(bch_fs_readdir(c, dir, 0, count_fn, &cnt), 0);
	nr_ours = cnt.n;
	cr_assert_eq(nr_host, nr_ours, "seed %u op %u: %s has %u entries here, %u on the host", seed,
		     op, *rel ? rel : "/", nr_ours, nr_host);
}

/* ------------------------------------------------------------------ ops */

static void fill(unsigned char *b, size_t len, unsigned op)
{
	unsigned mode = op % 3;
	for (size_t i = 0; i < len; i++)
		b[i] = mode == 0 ? (unsigned char)random() : mode == 1 ? (unsigned char)(i / 7 + op) : 0x5a;
}

static void one_op(struct bch_fs *c, unsigned op)
{
	char p1[256], p2[256], hp1[512], hp2[512], name1[256], name2[256];
	uint64_t d1, d2, inum;
	int hr, orr, kind = random() % 100;

	rand_path(p1, sizeof(p1));
	rand_path(p2, sizeof(p2));
	host_path(p1, hp1, sizeof(hp1));
	host_path(p2, hp2, sizeof(hp2));

	/* each op: the host's result, then ours (parent lookup errors count as the op's) */
#define OUR_PARENT(p, d, n)	({ int _r = our_parent(c, p, d, n); _r; })
	if (kind < 12) {			/* create */
		hr = h(mknod(hp1, S_IFREG | 0644, 0));
		orr = OUR_PARENT(p1, &d1, name1);
		if (!orr)
			orr = bch_fs_create(c, d1, name1, S_IFREG | 0644, 0, getuid(), getgid(), NULL);
	} else if (kind < 18) {			/* mkdir */
		hr = h(mkdir(hp1, 0755));
		orr = OUR_PARENT(p1, &d1, name1);
		if (!orr)
			orr = bch_fs_create(c, d1, name1, S_IFDIR | 0755, 0, getuid(), getgid(), NULL);
	} else if (kind < 40) {			/* write */
		size_t off = random() % MAX_FILE, len = random() % (random() % 2 ? 4096 : 200000);
		if (off + len > MAX_FILE)
			len = MAX_FILE - off;
		fill(hbuf, len, op);
		int fd = open(hp1, O_WRONLY | O_NOFOLLOW);
		hr = fd < 0 ? -errno : 0;
		if (fd >= 0) {
			hr = h(pwrite(fd, hbuf, len, off));
			close(fd);
		}
		orr = our_lookup(c, p1, &inum);
		if (!orr) {
			struct stat st;
			bch_fs_getattr(c, inum, &st);
			orr = S_ISLNK(st.st_mode) ? -ELOOP : (int)bch_fs_write(c, inum, off, hbuf, len);
		}
	} else if (kind < 46) {			/* truncate */
		off_t size = random() % (MAX_FILE + 1);
		hr = h(truncate(hp1, size));
		orr = our_lookup(c, p1, &inum);
		if (!orr) {
			struct stat st;
			bch_fs_getattr(c, inum, &st);
			if (S_ISLNK(st.st_mode))
				hr = orr = 0;	/* truncate follows symlinks: skip */
			else
				orr = bch_fs_truncate(c, inum, size);
		}
	} else if (kind < 54) {			/* fallocate: punch, zero, allocate */
		static const int modes[] = { FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, FALLOC_FL_ZERO_RANGE,
					     FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, 0, FALLOC_FL_KEEP_SIZE,
					     FALLOC_FL_COLLAPSE_RANGE, FALLOC_FL_INSERT_RANGE };
		int mode = modes[random() % 7];
		off_t off = random() % MAX_FILE, len = 1 + random() % 300000;
		if (mode == FALLOC_FL_COLLAPSE_RANGE || mode == FALLOC_FL_INSERT_RANGE) {
			/* whole blocks, and the file must not grow past MAX_FILE */
			off &= ~4095L;
			len = (len & ~4095L) ?: 4096;
			if (mode == FALLOC_FL_INSERT_RANGE)
				len = 4096 * (1 + random() % 4);
		}
		if (off + len > MAX_FILE)
			len = MAX_FILE - off;
		struct stat hst;
		if (mode == FALLOC_FL_INSERT_RANGE && !lstat(hp1, &hst) && hst.st_size + len > MAX_FILE)
			return;		/* would grow the file past what the model compares */
		int fd = open(hp1, O_WRONLY | O_NOFOLLOW);
		hr = fd < 0 ? -errno : 0;
		if (fd >= 0) {
			hr = h(fallocate(fd, mode, off, len));
			close(fd);
		}
		orr = our_lookup(c, p1, &inum);
		if (hr == -EOPNOTSUPP)
			return;		/* the host's filesystem lacks the mode */
		if (!orr) {
			struct stat st;
			bch_fs_getattr(c, inum, &st);
			orr = S_ISLNK(st.st_mode) ? -ELOOP : S_ISDIR(st.st_mode) ? -EISDIR
			    : bch_fs_fallocate(c, inum, mode, off, len);
		}
	} else if (kind < 62) {			/* unlink */
		hr = h(unlink(hp1));
		orr = OUR_PARENT(p1, &d1, name1);
		if (!orr)
			orr = bch_fs_unlink(c, d1, name1);
	} else if (kind < 66) {			/* rmdir */
		hr = h(rmdir(hp1));
		orr = OUR_PARENT(p1, &d1, name1);
		if (!orr)
			orr = bch_fs_rmdir(c, d1, name1);
	} else if (kind < 78) {			/* rename, maybe with flags */
		unsigned flags = random() % 4 == 0 ? RENAME_NOREPLACE : random() % 4 == 0 ? RENAME_EXCHANGE : 0;
		hr = h(renameat2(AT_FDCWD, hp1, AT_FDCWD, hp2, flags));
		orr = OUR_PARENT(p1, &d1, name1);
		if (!orr)
			orr = OUR_PARENT(p2, &d2, name2);
		if (!orr)
			orr = bch_fs_rename(c, d1, name1, d2, name2,
					    (flags & RENAME_NOREPLACE ? BCH_RENAME_NOREPLACE : 0) |
					    (flags & RENAME_EXCHANGE ? BCH_RENAME_EXCHANGE : 0));
		/* the kernel checks the target's existence before loops; the order of checks varies */
		if (hr != orr && (hr == -EINVAL || orr == -EINVAL || hr == -ENOTEMPTY || hr == -EEXIST))
			cr_assert_fail("seed %u op %u: rename %s -> %s flags %u: host %d, ours %d",
				       seed, op, p1, p2, flags, hr, orr);
	} else if (kind < 84) {			/* link */
		hr = h(link(hp1, hp2));
		orr = our_lookup(c, p1, &inum);
		if (!orr)
			orr = OUR_PARENT(p2, &d2, name2);
		if (!orr)
			orr = bch_fs_link(c, inum, d2, name2);
	} else if (kind < 88) {			/* symlink */
		char target[64];
		snprintf(target, sizeof(target), "target-%u", op);
		hr = h(symlink(target, hp1));
		orr = OUR_PARENT(p1, &d1, name1);
		if (!orr)
			orr = bch_fs_symlink(c, d1, name1, target, getuid(), getgid(), NULL);
	} else if (kind < 94) {			/* xattrs */
		char name[32], val[300];
		snprintf(name, sizeof(name), "user.x%ld", random() % 3);
		size_t vl = random() % sizeof(val);
		fill((unsigned char *)val, vl, op);
		bool rm = random() % 3 == 0;
		struct stat st;
		if (!lstat(hp1, &st) && S_ISLNK(st.st_mode))
			return;		/* user xattrs on symlinks: refused by the host */
		hr = h(rm ? lremovexattr(hp1, name) : lsetxattr(hp1, name, val, vl, 0));
		orr = our_lookup(c, p1, &inum);
		if (!orr)
			orr = rm ? bch_fs_removexattr(c, inum, name) : bch_fs_setxattr(c, inum, name, val, vl, 0);
	} else {				/* chmod */
		mode_t m = random() % 2 ? 0600 : 0755;
		struct stat st;
		if (!lstat(hp1, &st) && S_ISLNK(st.st_mode))
			return;
		hr = h(chmod(hp1, m));
		struct bch_setattr sa = { .valid = BCH_SETATTR_MODE, .mode = m };
		orr = our_lookup(c, p1, &inum);
		if (!orr)
			orr = bch_fs_setattr(c, inum, &sa);
	}
	if (hr > 0)
		hr = 0;
	if (orr > 0)
		orr = 0;
	cr_assert_eq(hr, orr, "seed %u op %u kind %d: %s / %s: host %d (%s), ours %d (%s) [%s]", seed, op,
		     kind, p1, p2, hr, strerror(-hr), orr, strerror(-orr), c->err_msg);
}

static void run_model(unsigned nr, const char *comp, unsigned ops)
{
	seed = getenv("SEED") ? atoi(getenv("SEED")) : 1000 + nr * 10 + (comp ? comp[0] : 0);
	fprintf(stderr, "fs_model: seed %u, %u devices, compression %s, %u ops\n", seed, nr,
		comp ? comp : "none", ops);
	setup(nr, comp);
	srandom(seed);		/* after format: libuuid reseeds random() */
	hbuf = malloc(MAX_FILE + 65536);
	obuf = malloc(MAX_FILE + 65536);
	struct bch_fs *c = open_fs();
	uint64_t stripes_built = 0;

	for (unsigned op = 1; op <= ops; op++) {
		one_op(c, op);
		if (erasure_code && op % 300 == 0) {	/* stripe what is there, as data rebalance */
			struct bch_move_stats ms = { 0 };
			int r;
			while ((r = bch_ec_step(c, UINT64_MAX, true, &ms)) == 1)
				stripes_built++;
			cr_assert_geq(r, 0, "seed %u op %u: stripe builder: %d %s [%s]", seed, op, r,
				      bch_err_str(r), ms.last_problem);
		}
		if (op % 400 == 0)
			compare_tree(c, "", op);
		if (op % 701 == 0) {			/* clean close and reopen */
			cr_assert_eq(bch_fs_close(c), 0);
			c = open_fs();
		} else if (op % 997 == 0) {		/* power cut after fsync: replay */
			cr_assert_eq(bch_fs_fsync(c), 0);
			c->read_only = true;
			bch_fs_close(c);
			c = open_fs();
		}
	}
	compare_tree(c, "", ops);
	if (erasure_code) {
		/* the model read and changed striped data: stripes were built, and some hold data */
		struct bch_ec_usage *u = malloc(sizeof(*u));
		cr_assert_eq(bch_ec_usage(c, u), 0);
		fprintf(stderr, "fs_model: erasure coding: %lu builder runs built stripes; at the end "
			"%lu stripes, %lu sectors of data, %lu of parity, %lu reclaimable\n",
			(unsigned long)stripes_built, (unsigned long)u->stripes,
			(unsigned long)u->total.data, (unsigned long)u->total.parity,
			(unsigned long)u->total.reclaimable);
		cr_assert(stripes_built && u->stripes && u->total.data, "seed %u: nothing was striped", seed);
		free(u);
	}
	/* space accounting kept while running = recounted from the keys at open */
	struct bch_dev_usage before[MAX_DEVS], after;
	for (unsigned d = 0; d < nr; d++)
		bch_dev_usage_get(c, d, &before[d]);
	cr_assert_eq(bch_fs_close(c), 0);
	c = open_fs();
	for (unsigned d = 0; d < nr; d++) {
		bch_dev_usage_get(c, d, &after);
		cr_assert_eq(before[d].sectors[BCH_DATA_user], after.sectors[BCH_DATA_user],
			     "seed %u: device %u user sectors %lu kept, %lu recounted", seed, d,
			     (unsigned long)before[d].sectors[BCH_DATA_user],
			     (unsigned long)after.sectors[BCH_DATA_user]);
	}
	compare_tree(c, "", ops + 1);
	cr_assert_eq(bch_fs_close(c), 0);
	free(hbuf);
	free(obuf);
	teardown_all();
}

static unsigned nops(unsigned base)
{
	return getenv("SOAK") ? base * 10 : base;
}

Test(fs_model, one_device) { run_model(1, NULL, nops(20000)); }
Test(fs_model, two_devices_replicated) { run_model(2, NULL, nops(10000)); }
Test(fs_model, lz4) { run_model(1, "lz4", nops(5000)); }
Test(fs_model, gzip) { run_model(1, "gzip", nops(5000)); }
Test(fs_model, zstd) { run_model(1, "zstd", nops(5000)); }
/* the same model on an encrypted filesystem (compressed, so both paths are taken) */
Test(fs_model, encrypted) { testfs_encrypted = true; run_model(1, "lz4", nops(5000)); }
/* erasure coding on four devices: reads, overwrites and deletes of striped data */
Test(fs_model, erasure_code) { erasure_code = true; run_model(4, NULL, nops(3000)); }
