// SPDX-License-Identifier: GPL-2.0
/*
 * fsstress.c - random-operation stress for a mounted filesystem, with an
 * fsx-style model: build/fsstress -d DIR [-p PROCS] [-n OPS] [-s SEED] ...
 *
 * Written for `bcachefs fusemount` (tests/cli/t26-stress.sh), usable on any
 * mounted filesystem.  PROCS processes each run OPS operations in their own
 * subtree DIR/pN, so each keeps an exact model of what it owns: its names
 * (files, directories, symlinks, hard links), every file's bytes, size, mode,
 * link count and xattrs.  Every read, stat, readlink, getxattr and readdir is
 * checked against that model; the end of a run checks everything once more.
 *
 * Written data is random, one repeated byte (zeroes too) or a short
 * repeating pattern, so compression and zero detection take part.
 *
 * Operations: create mkdir rmdir unlink rename link symlink write read
 * truncate fallocate (default, KEEP_SIZE, PUNCH_HOLE, ZERO_RANGE with and
 * without KEEP_SIZE) dwrite dread (O_DIRECT, 4 KiB aligned) setxattr
 * getxattr removexattr chmod fsync fdatasync sync readdir seek (SEEK_DATA,
 * SEEK_HOLE).  -O NAME=W sets a
 * weight (0 disables); -O list prints the table.
 *
 * Determinism: process k draws from seed+k alone and touches only DIR/pk,
 * so `-s SEED -i K` replays process k by itself (the seed is printed).
 * What is allowed to fail: nothing, except ENOSPC (only with -E) from the
 * operations that allocate: write, dwrite, fallocate, setxattr, and create,
 * mkdir, symlink, link, rename (a full ext4 refuses those too).  A refused
 * operation must have done nothing: a write refused with ENOSPC leaves the
 * file as it was, a short write stored what it counts, a refused name
 * operation left no name.  ENOSPC from fsync, fdatasync, syncfs or close
 * (data accepted, then lost) or from anything else is a failure.
 * Every other errno, short count or difference from the model is a failure:
 * the process prints the operation, what was expected and the tail of its
 * operation log on stderr and exits 1.
 *
 * -w STATE writes each process's model to STATE.pK at the end; -c STATE
 * (no operations) checks a tree against it, e.g. after unmount and mount.
 *
 * Exit status: 0 all processes passed, 1 a check failed, 2 usage or setup.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE	/* O_DIRECT, fallocate, syncfs; t26 may build this with plain cc */
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/falloc.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define MAX_ENTS	64		/* names per process */
#define MAX_FILES	MAX_ENTS	/* inodes per process */
#define NR_XATTRS	4
#define PATH_LEN	128
#define LOG_LINES	40
#define LOG_LEN		200
#define DIO_ALIGN	4096

/* ---- options */

static const char *opt_dir;
static unsigned opt_procs = 4, opt_ops = 10000, opt_only = ~0U;
static uint64_t opt_seed;
static bool opt_seed_set, opt_enospc, opt_verbose;
static size_t opt_max_size = 1 << 20;		/* file size */
static size_t opt_max_write = 128 << 10;
static size_t opt_xattr_max = 1024;
static const char *opt_state_out, *opt_state_check;
static unsigned opt_fa_modes = ~0U;		/* bit k: fa_modes[k] in use */

enum op {
	OP_CREATE, OP_MKDIR, OP_RMDIR, OP_UNLINK, OP_RENAME, OP_LINK, OP_SYMLINK,
	OP_WRITE, OP_READ, OP_TRUNCATE, OP_FALLOCATE, OP_DWRITE, OP_DREAD,
	OP_SETXATTR, OP_GETXATTR, OP_REMOVEXATTR, OP_CHMOD, OP_FSYNC,
	OP_FDATASYNC, OP_SYNC, OP_READDIR, OP_SEEK, NR_OPS
};

static struct {
	const char	*name;
	unsigned	weight;
} ops[NR_OPS] = {
	[OP_CREATE]	= { "create",	 6 },
	[OP_MKDIR]	= { "mkdir",	 2 },
	[OP_RMDIR]	= { "rmdir",	 1 },
	[OP_UNLINK]	= { "unlink",	 3 },
	[OP_RENAME]	= { "rename",	 4 },
	[OP_LINK]	= { "link",	 2 },
	[OP_SYMLINK]	= { "symlink",	 2 },
	[OP_WRITE]	= { "write",	16 },
	[OP_READ]	= { "read",	12 },
	[OP_TRUNCATE]	= { "truncate",	 4 },
	[OP_FALLOCATE]	= { "fallocate", 8 },
	[OP_DWRITE]	= { "dwrite",	 4 },
	[OP_DREAD]	= { "dread",	 4 },
	[OP_SETXATTR]	= { "setxattr",	 4 },
	[OP_GETXATTR]	= { "getxattr",	 3 },
	[OP_REMOVEXATTR] = { "removexattr", 2 },
	[OP_CHMOD]	= { "chmod",	 2 },
	[OP_FSYNC]	= { "fsync",	 3 },
	[OP_FDATASYNC]	= { "fdatasync", 2 },
	[OP_SYNC]	= { "sync",	 1 },
	[OP_READDIR]	= { "readdir",	 2 },
	[OP_SEEK]	= { "seek",	 2 },
};

/* ---- the model of one process's subtree */

enum ent_type { E_FREE, E_REG, E_DIR, E_SYMLINK };

struct mxattr {
	bool		present;
	size_t		len;
	unsigned char	*val;
};

struct mfile {
	unsigned	nlink;		/* 0: slot free */
	mode_t		mode;		/* permission bits */
	size_t		size;
	unsigned char	*data;		/* opt_max_size bytes */
	struct mxattr	x[NR_XATTRS];
};

struct ent {
	enum ent_type	type;
	char		path[PATH_LEN];	/* relative to DIR/pK */
	unsigned	file;		/* E_REG: index into files[] */
	char		target[64];	/* E_SYMLINK */
};

static struct ent ents[MAX_ENTS];
static struct mfile files[MAX_FILES];
static unsigned proc_id, next_name;
static uint64_t rng_state;
static unsigned long op_nr;
static char logbuf[LOG_LINES][LOG_LEN];
static unsigned long log_count;
static unsigned char *iobuf, *diobuf, *cmpbuf;	/* opt_max_size (+ 64 KiB); aligned; aligned */
static unsigned long nr_enospc, nr_incoherent, nr_done[NR_OPS];

/* ---- random numbers (splitmix64: small, fixed across libcs) */

static uint64_t rnd64(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* uniform in [0, n); n > 0 */
static uint64_t rnd(uint64_t n)
{
	return rnd64() % n;
}

/*
 * Data for a write: random bytes half the time, else something compression
 * and zero detection can act on (one byte value, zeroes included, or a short
 * repeating pattern), so those paths see data they shrink.
 */
static void fill_random(unsigned char *p, size_t len)
{
	uint64_t v = 0;
	unsigned kind = rnd(4), period = 1 + rnd(32);

	if (kind == 2) {
		memset(p, rnd(2) ? 0 : (int) rnd(256), len);
		return;
	}
	for (size_t i = 0; i < len; i++) {
		if (kind == 3 && i >= period) {
			p[i] = p[i - period];
			continue;
		}
		if (!(i & 7))
			v = rnd64();
		p[i] = v;
		v >>= 8;
	}
}

/* ---- the op log and failure report */

static void logf_(const char *fmt, ...)
{
	char *l = logbuf[log_count++ % LOG_LINES];
	va_list ap;
	int n = snprintf(l, LOG_LEN, "p%u #%lu ", proc_id, op_nr);

	va_start(ap, fmt);
	vsnprintf(l + n, LOG_LEN - n, fmt, ap);
	va_end(ap);
	if (opt_verbose)
		printf("%s\n", l);
}

static void __attribute__((noreturn, format(printf, 1, 2))) failf(const char *fmt, ...)
{
	/* one write, so that reports of several processes do not interleave */
	char *report = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&report, &len);
	va_list ap;

	if (!f)
		exit(1);
	fprintf(f, "fsstress: %s/p%u: op #%lu (seed %" PRIu64 ", replay with -s %" PRIu64 " -i %u): FAILED: ",
		opt_dir, proc_id, op_nr, opt_seed + proc_id, opt_seed, proc_id);
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fprintf(f, "\nfsstress: p%u: last operations:\n", proc_id);
	unsigned long first = log_count > LOG_LINES ? log_count - LOG_LINES : 0;
	for (unsigned long i = first; i < log_count; i++)
		fprintf(f, "  %s\n", logbuf[i % LOG_LINES]);
	fclose(f);
	fflush(stdout);
	if (write(2, report, len) < 0)
		exit(1);
	exit(1);
}

/* ENOSPC is allowed (with -E) for this operation's errno */
static bool enospc_ok(int err)
{
	if (err == ENOSPC && opt_enospc) {
		nr_enospc++;
		logf_("  -> ENOSPC");
		return true;
	}
	return false;
}

/*
 * A name operation refused for want of space (-E; a full ext4 does this for
 * mkdir and create too): it must have done nothing, so GONE must not exist
 * and THERE (when given) must.
 */
static bool enospc_name_ok(int err, const char *gone, const char *there)
{
	struct stat st;
	if (!enospc_ok(err))
		return false;
	if (gone && !lstat(gone, &st))
		failf("%s exists after an operation creating it failed with ENOSPC", gone);
	if (there && lstat(there, &st))
		failf("%s is gone after an operation failed with ENOSPC: %s", there, strerror(errno));
	return true;
}

/* ---- model helpers */

static int pick_ent(enum ent_type type)
{
	unsigned n = 0;
	for (unsigned i = 0; i < MAX_ENTS; i++)
		n += ents[i].type == type;
	if (!n)
		return -1;
	unsigned k = rnd(n);
	for (unsigned i = 0; i < MAX_ENTS; i++)
		if (ents[i].type == type && !k--)
			return i;
	return -1;
}

static int pick_nondir(void)
{
	unsigned n = 0;
	for (unsigned i = 0; i < MAX_ENTS; i++)
		n += ents[i].type == E_REG || ents[i].type == E_SYMLINK;
	if (!n)
		return -1;
	unsigned k = rnd(n);
	for (unsigned i = 0; i < MAX_ENTS; i++)
		if ((ents[i].type == E_REG || ents[i].type == E_SYMLINK) && !k--)
			return i;
	return -1;
}

static int free_ent(void)
{
	for (unsigned i = 0; i < MAX_ENTS; i++)
		if (ents[i].type == E_FREE)
			return i;
	return -1;
}

static unsigned nr_ents(void)
{
	unsigned n = 0;
	for (unsigned i = 0; i < MAX_ENTS; i++)
		n += ents[i].type != E_FREE;
	return n;
}

static int find_path(const char *path)
{
	for (unsigned i = 0; i < MAX_ENTS; i++)
		if (ents[i].type != E_FREE && !strcmp(ents[i].path, path))
			return i;
	return -1;
}

static bool under(const char *path, const char *dir)
{
	size_t l = strlen(dir);
	return !strncmp(path, dir, l) && path[l] == '/';
}

/* a new name in the top directory or a random directory at most one deep */
static void new_name(char *out, char kind)
{
	int d = rnd(3) ? pick_ent(E_DIR) : -1;
	if (d >= 0 && strchr(ents[d].path, '/'))
		d = -1;
	if (d >= 0)
		snprintf(out, PATH_LEN, "%s/%c%u", ents[d].path, kind, next_name++);
	else
		snprintf(out, PATH_LEN, "%c%u", kind, next_name++);
}

static void drop_link(unsigned f)
{
	if (!--files[f].nlink) {
		files[f].size = 0;
		for (unsigned i = 0; i < NR_XATTRS; i++)
			files[f].x[i].present = false;
	}
}

static void check_stat(const char *what, const char *path, const struct stat *st, unsigned f)
{
	struct mfile *m = &files[f];
	if (!S_ISREG(st->st_mode))
		failf("%s %s: not a regular file (mode %o)", what, path, st->st_mode);
	if ((size_t) st->st_size != m->size)
		failf("%s %s: size %lld, model %zu", what, path, (long long) st->st_size, m->size);
	if ((st->st_mode & 07777) != m->mode)
		failf("%s %s: mode %o, model %o", what, path, st->st_mode & 07777, m->mode);
	if (st->st_nlink != m->nlink)
		failf("%s %s: nlink %lu, model %u", what, path, (unsigned long) st->st_nlink, m->nlink);
}

static void compare(const char *what, const char *path, const unsigned char *got,
		    const unsigned char *want, size_t off, size_t len)
{
	if (!memcmp(got, want, len))
		return;
	size_t i = 0;
	while (got[i] == want[i])
		i++;
	size_t j = i;
	while (j < len && got[j] != want[j])
		j++;
	failf("%s %s: data differs at offset %zu (0x%zx): got 0x%02x, want 0x%02x; %zu bytes differ from there%s",
	      what, path, off + i, off + i, got[i], want[i], j - i,
	      j < len ? "" : " to the end of the read");
}

static int open_file(const char *path, int flags)
{
	int fd = open(path, flags);
	if (fd < 0)
		failf("open %s (flags 0%o): %s", path, flags, strerror(errno));
	return fd;
}

/* close(2) reports write-back errors (ENOSPC found late): never ignored */
static void xclose(int fd, const char *path)
{
	if (close(fd))
		failf("close %s: %s", path, strerror(errno));
}

/* ---- operations: namespace */

static void do_create(void)
{
	int e = free_ent();
	unsigned f;
	for (f = 0; f < MAX_FILES && files[f].nlink; f++)
		;
	if (e < 0 || f == MAX_FILES)
		return;
	char path[PATH_LEN];
	new_name(path, 'f');
	mode_t mode = 0600 | (rnd(0100) & 0066);
	logf_("create %s mode %o", path, mode);
	int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, mode);
	if (fd < 0) {
		if (enospc_name_ok(errno, path, NULL))
			return;
		failf("create %s: %s", path, strerror(errno));
	}
	if (fchmod(fd, mode))	/* the umask */
		failf("fchmod %s: %s", path, strerror(errno));
	xclose(fd, path);
	ents[e] = (struct ent) { .type = E_REG, .file = f };
	strcpy(ents[e].path, path);
	files[f].nlink = 1;
	files[f].mode = mode;
	files[f].size = 0;
}

static void do_mkdir(void)
{
	int e = free_ent();
	if (e < 0)
		return;
	char path[PATH_LEN];
	new_name(path, 'd');
	logf_("mkdir %s", path);
	if (mkdir(path, 0755)) {
		if (enospc_name_ok(errno, path, NULL))
			return;
		failf("mkdir %s: %s", path, strerror(errno));
	}
	ents[e] = (struct ent) { .type = E_DIR };
	strcpy(ents[e].path, path);
}

static void do_rmdir(void)
{
	int d = pick_ent(E_DIR);
	if (d < 0)
		return;
	bool empty = true;
	for (unsigned i = 0; i < MAX_ENTS; i++)
		if (ents[i].type != E_FREE && under(ents[i].path, ents[d].path))
			empty = false;
	logf_("rmdir %s (%s)", ents[d].path, empty ? "empty" : "not empty");
	int r = rmdir(ents[d].path);
	if (empty && r)
		failf("rmdir %s (empty): %s", ents[d].path, strerror(errno));
	if (!empty && (!r || (errno != ENOTEMPTY && errno != EEXIST)))
		failf("rmdir %s (not empty): %s", ents[d].path, r ? strerror(errno) : "succeeded");
	if (empty)
		ents[d].type = E_FREE;
}

static void do_unlink(void)
{
	int e = pick_nondir();
	if (e < 0)
		return;
	logf_("unlink %s", ents[e].path);
	if (unlink(ents[e].path))
		failf("unlink %s: %s", ents[e].path, strerror(errno));
	if (ents[e].type == E_REG)
		drop_link(ents[e].file);
	ents[e].type = E_FREE;
}

static void do_link(void)
{
	int s = pick_ent(E_REG), e = free_ent();
	if (s < 0 || e < 0)
		return;
	char path[PATH_LEN];
	new_name(path, 'f');
	logf_("link %s %s", ents[s].path, path);
	if (link(ents[s].path, path)) {
		if (enospc_name_ok(errno, path, ents[s].path))
			return;
		failf("link %s %s: %s", ents[s].path, path, strerror(errno));
	}
	ents[e] = ents[s];
	strcpy(ents[e].path, path);
	files[ents[s].file].nlink++;
}

static void do_symlink(void)
{
	int e = free_ent();
	if (e < 0)
		return;
	char path[PATH_LEN], target[64];
	new_name(path, 'l');
	/* a target of 1..60 characters, sometimes an existing name */
	int t = rnd(2) ? pick_nondir() : -1;
	if (t >= 0 && strlen(ents[t].path) < sizeof(target))
		strcpy(target, ents[t].path);
	else {
		unsigned len = 1 + rnd(60);
		for (unsigned i = 0; i < len; i++)
			target[i] = 'a' + rnd(26);
		target[len] = 0;
	}
	logf_("symlink %s -> %s", path, target);
	if (symlink(target, path)) {
		if (enospc_name_ok(errno, path, NULL))
			return;
		failf("symlink %s: %s", path, strerror(errno));
	}
	ents[e] = (struct ent) { .type = E_SYMLINK };
	strcpy(ents[e].path, path);
	strcpy(ents[e].target, target);
}

static void rename_dir(int s)
{
	char to[PATH_LEN], from[PATH_LEN];
	/* a fresh name at the top, or in another top-level directory */
	int d = pick_ent(E_DIR);
	if (d >= 0 && (d == s || strchr(ents[d].path, '/') || under(ents[d].path, ents[s].path)))
		d = -1;
	/* keep directories at most two deep */
	bool has_subdir = false;
	for (unsigned i = 0; i < MAX_ENTS; i++)
		if (ents[i].type == E_DIR && under(ents[i].path, ents[s].path))
			has_subdir = true;
	if (d >= 0 && !has_subdir)
		snprintf(to, sizeof(to), "%s/d%u", ents[d].path, next_name++);
	else
		snprintf(to, sizeof(to), "d%u", next_name++);
	strcpy(from, ents[s].path);
	logf_("rename dir %s %s", from, to);
	if (rename(from, to)) {
		if (enospc_name_ok(errno, to, from))
			return;
		failf("rename %s %s: %s", from, to, strerror(errno));
	}
	size_t fl = strlen(from);
	for (unsigned i = 0; i < MAX_ENTS; i++) {
		if (ents[i].type == E_FREE)
			continue;
		if (i == (unsigned) s)
			strcpy(ents[i].path, to);
		else if (under(ents[i].path, from)) {
			char p[PATH_LEN];
			if ((size_t) snprintf(p, sizeof(p), "%s%s", to, ents[i].path + fl) >= sizeof(p))
				failf("path too long under %s", to);
			strcpy(ents[i].path, p);
		}
	}
}

static void do_rename(void)
{
	int s = rnd(4) ? pick_nondir() : pick_ent(E_DIR);
	if (s < 0)
		return;
	if (ents[s].type == E_DIR)
		return rename_dir(s);
	/* over an existing non-directory, or to a fresh name */
	int d = rnd(3) ? -1 : pick_nondir();
	char to[PATH_LEN];
	if (d >= 0)
		strcpy(to, ents[d].path);
	else
		new_name(to, ents[s].type == E_REG ? 'f' : 'l');
	logf_("rename %s %s%s", ents[s].path, to, d >= 0 ? " (replacing)" : "");
	if (rename(ents[s].path, to)) {
		if (enospc_name_ok(errno, d >= 0 ? NULL : to, ents[s].path))
			return;
		failf("rename %s %s: %s", ents[s].path, to, strerror(errno));
	}
	if (d == s)
		return;
	if (d >= 0) {
		/* links of one inode: rename does nothing, both names stay */
		if (ents[d].type == E_REG && ents[s].type == E_REG && ents[d].file == ents[s].file)
			return;
		if (ents[d].type == E_REG)
			drop_link(ents[d].file);
		ents[d].type = E_FREE;
	}
	strcpy(ents[s].path, to);
}

/* ---- operations: data */

static void model_resize(struct mfile *m, size_t size)
{
	if (size > m->size)
		memset(m->data + m->size, 0, size - m->size);
	m->size = size;
}

/* an offset and length for a data op: sometimes past EOF, never past opt_max_size */
static void pick_range(struct mfile *m, size_t max_len, size_t *off, size_t *len)
{
	size_t span = m->size + opt_max_size / 4;
	if (span > opt_max_size)
		span = opt_max_size;
	*off = rnd(span);
	*len = 1 + (rnd(4) ? rnd(max_len < 16384 ? max_len : 16384) : rnd(max_len));
	if (*off + *len > opt_max_size)
		*len = opt_max_size - *off;
}

static void do_write(void)
{
	int e = pick_ent(E_REG);
	if (e < 0)
		return do_create();
	struct mfile *m = &files[ents[e].file];
	size_t off, len;
	pick_range(m, opt_max_write, &off, &len);
	fill_random(iobuf, len);
	logf_("write %s off %zu len %zu (size %zu)", ents[e].path, off, len, m->size);
	int fd = open_file(ents[e].path, O_WRONLY);
	ssize_t r = pwrite(fd, iobuf, len, off);
	if (r < 0 && !enospc_ok(errno))
		failf("write %s off %zu len %zu: %s", ents[e].path, off, len, strerror(errno));
	if (r >= 0 && (size_t) r != len && !opt_enospc)
		failf("write %s off %zu len %zu: short write of %zd", ents[e].path, off, len, r);
	if (r > 0) {
		memcpy(m->data + off, iobuf, r);
		if (off + r > m->size) {
			/* the hole between the old EOF and off reads as zeroes */
			if (off > m->size)
				memset(m->data + m->size, 0, off - m->size);
			m->size = off + r;
		}
	}
	if (r >= 0 && r != (ssize_t) len)
		logf_("  -> short: %zd", r);
	xclose(fd, ents[e].path);
}

static void do_read(void)
{
	int e = pick_ent(E_REG);
	if (e < 0)
		return;
	struct mfile *m = &files[ents[e].file];
	size_t off, len;
	if (!rnd(4)) {
		off = 0;
		len = opt_max_size;
	} else
		pick_range(m, opt_max_size, &off, &len);
	logf_("read %s off %zu len %zu (size %zu)", ents[e].path, off, len, m->size);
	int fd = open_file(ents[e].path, O_RDONLY);
	struct stat st;
	if (fstat(fd, &st))
		failf("fstat %s: %s", ents[e].path, strerror(errno));
	check_stat("read", ents[e].path, &st, ents[e].file);
	ssize_t r = pread(fd, iobuf, len, off);
	size_t want = off >= m->size ? 0 : (m->size - off < len ? m->size - off : len);
	if (r < 0)
		failf("read %s off %zu len %zu: %s", ents[e].path, off, len, strerror(errno));
	if ((size_t) r != want)
		failf("read %s off %zu len %zu: returned %zd, want %zu (size %zu)",
		      ents[e].path, off, len, r, want, m->size);
	compare("read", ents[e].path, iobuf, m->data + off, off, want);
	xclose(fd, ents[e].path);
}

static void do_truncate(void)
{
	int e = pick_ent(E_REG);
	if (e < 0)
		return;
	struct mfile *m = &files[ents[e].file];
	size_t size = rnd(3) ? rnd(m->size + 1) : rnd(opt_max_size + 1);
	logf_("truncate %s %zu (size %zu)", ents[e].path, size, m->size);
	if (truncate(ents[e].path, size))
		failf("truncate %s %zu: %s", ents[e].path, size, strerror(errno));
	model_resize(m, size);
}

static const struct { int mode; const char *name; } fa_modes[] = {
	{ 0,					"default" },
	{ FALLOC_FL_KEEP_SIZE,			"keep-size" },
	{ FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, "punch-hole" },
	{ FALLOC_FL_ZERO_RANGE,			"zero-range" },
	{ FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, "zero-range+keep-size" },
};

/*
 * After an operation on [off, off + len) failed with ENOSPC (fallocate) or
 * stored less than asked (O_DIRECT write): what the file may be now.  Kernel
 * ext4 shows what is allowed: a refused zero range or punch may have zeroed
 * part of its range, a refused or short O_DIRECT write may have stored part
 * of its data there, and the size may have grown toward off + len (never
 * with KEEP_SIZE).  Outside the range nothing may change.  Inside it, ext4
 * and FUSE can even leave the page cache disagreeing with the disk for a
 * while; that is counted (nr_incoherent), the cache of the file dropped and
 * the disk's view taken.  The model then takes what is there, once every
 * byte is shown to be one of those.
 */
static void reconcile(int e, const char *what, size_t off, size_t len,
		      const unsigned char *newdata, bool zero_ok, bool keep_size)
{
	struct mfile *m = &files[ents[e].file];
	const char *path = ents[e].path;
	int fd = open_file(path, O_RDONLY);
	struct stat st;
	if (fstat(fd, &st))
		failf("fstat %s: %s", path, strerror(errno));
	size_t size = st.st_size;
	if (size < m->size || size > (off + len > m->size ? off + len : m->size) ||
	    (keep_size && size != m->size))
		failf("%s %s (failed with ENOSPC): size %zu, was %zu", what, path, size, m->size);
	size_t dlen = (size + DIO_ALIGN - 1) & ~(size_t) (DIO_ALIGN - 1);
	int dfd = open_file(path, O_RDONLY | O_DIRECT);
	ssize_t dr = pread(dfd, cmpbuf, dlen, 0);
	xclose(dfd, path);
	if (dr != (ssize_t) size)
		failf("O_DIRECT read %s after %s ENOSPC: %zd of %zu", path, what, dr, size);
	for (int pass = 0; ; pass++) {
		ssize_t r = pread(fd, iobuf, size, 0);
		if (r != (ssize_t) size)
			failf("read %s after %s ENOSPC: %zd of %zu", path, what, r, size);
		size_t i = 0;
		while (i < size && iobuf[i] == cmpbuf[i])
			i++;
		if (i == size)
			break;
		if (i < off || i >= off + len || pass)
			failf("%s %s (failed with ENOSPC): byte %zu reads 0x%02x through the page cache, "
			      "0x%02x with O_DIRECT%s", what, path, i, iobuf[i], cmpbuf[i],
			      pass ? " after the cache was dropped" : ", outside the range");
		nr_incoherent++;
		logf_("  -> page cache differs from O_DIRECT at %zu: dropped", i);
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	}
	for (size_t i = 0; i < size; i++) {
		unsigned char old = i < m->size ? m->data[i] : 0, now = iobuf[i];
		bool in = i >= off && i < off + len;
		if (now != old && !(in && zero_ok && !now) && !(in && newdata && now == newdata[i - off]))
			failf("%s %s (failed with ENOSPC): byte %zu is 0x%02x, was 0x%02x%s", what, path, i,
			      now, old, in ? "" : " (outside the range)");
	}
	memcpy(m->data, iobuf, size);
	m->size = size;
	xclose(fd, path);
}

static void do_fallocate(void)
{
	int e = pick_ent(E_REG);
	if (e < 0)
		return;
	struct mfile *m = &files[ents[e].file];
	unsigned k = rnd(sizeof(fa_modes) / sizeof(fa_modes[0]));
	while (!(opt_fa_modes & (1U << k)))
		k = (k + 1) % (sizeof(fa_modes) / sizeof(fa_modes[0]));
	int mode = fa_modes[k].mode;
	size_t off, len;
	pick_range(m, opt_max_size / 2, &off, &len);
	logf_("fallocate %s %s off %zu len %zu (size %zu)", ents[e].path, fa_modes[k].name, off, len, m->size);
	int fd = open_file(ents[e].path, O_WRONLY);
	if (fallocate(fd, mode, off, len)) {
		int err = errno;
		xclose(fd, ents[e].path);
		if (!enospc_ok(err))
			failf("fallocate %s %s off %zu len %zu: %s", ents[e].path, fa_modes[k].name,
			      off, len, strerror(err));
		return reconcile(e, "fallocate", off, len, NULL,
				 mode & (FALLOC_FL_ZERO_RANGE | FALLOC_FL_PUNCH_HOLE), mode & FALLOC_FL_KEEP_SIZE);
	}
	xclose(fd, ents[e].path);
	size_t end = off + len;
	if (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)) {
		size_t zend = end;
		if ((mode & FALLOC_FL_KEEP_SIZE) && zend > m->size)
			zend = m->size;
		if (zend > off && off < m->size)
			memset(m->data + off, 0, (zend < m->size ? zend : m->size) - off);
	}
	if (!(mode & FALLOC_FL_KEEP_SIZE) && end > m->size)
		model_resize(m, end);
}

static void do_dwrite(void)
{
	int e = pick_ent(E_REG);
	if (e < 0)
		return;
	struct mfile *m = &files[ents[e].file];
	size_t blocks = opt_max_size / DIO_ALIGN;
	size_t span = (m->size + opt_max_size / 4) / DIO_ALIGN + 1;
	size_t off = rnd(span < blocks ? span : blocks) * DIO_ALIGN;
	size_t len = (1 + rnd(16)) * DIO_ALIGN;
	if (off + len > opt_max_size)
		len = opt_max_size - off;
	fill_random(diobuf, len);
	logf_("dwrite %s off %zu len %zu (size %zu)", ents[e].path, off, len, m->size);
	int fd = open_file(ents[e].path, O_WRONLY | O_DIRECT);
	ssize_t r = pwrite(fd, diobuf, len, off);
	if (r < 0 && !enospc_ok(errno))
		failf("O_DIRECT write %s off %zu len %zu: %s", ents[e].path, off, len, strerror(errno));
	if (r >= 0 && (size_t) r != len && !opt_enospc)
		failf("O_DIRECT write %s off %zu len %zu: short write of %zd", ents[e].path, off, len, r);
	if (r > 0) {
		if (off > m->size)
			memset(m->data + m->size, 0, off - m->size);
		memcpy(m->data + off, diobuf, r);
		if (off + r > m->size)
			m->size = off + r;
	}
	if (r >= 0 && r != (ssize_t) len)
		logf_("  -> short: %zd", r);
	xclose(fd, ents[e].path);
	/* ext4 too may store part of what it then refuses: see reconcile() */
	if (r != (ssize_t) len) {
		size_t done = r > 0 ? r : 0;
		reconcile(e, "O_DIRECT write", off + done, len - done, diobuf + done, false, false);
	}
}

static void do_dread(void)
{
	int e = pick_ent(E_REG);
	if (e < 0)
		return;
	struct mfile *m = &files[ents[e].file];
	size_t off = rnd(m->size / DIO_ALIGN + 1) * DIO_ALIGN;
	size_t len = (1 + rnd(16)) * DIO_ALIGN;
	if (off + len > opt_max_size)
		len = opt_max_size - off;
	if (!len)
		return;
	logf_("dread %s off %zu len %zu (size %zu)", ents[e].path, off, len, m->size);
	int fd = open_file(ents[e].path, O_RDONLY | O_DIRECT);
	ssize_t r = pread(fd, diobuf, len, off);
	size_t want = off >= m->size ? 0 : (m->size - off < len ? m->size - off : len);
	if (r < 0)
		failf("O_DIRECT read %s off %zu len %zu: %s", ents[e].path, off, len, strerror(errno));
	if ((size_t) r != want)
		failf("O_DIRECT read %s off %zu len %zu: returned %zd, want %zu (size %zu)",
		      ents[e].path, off, len, r, want, m->size);
	compare("O_DIRECT read", ents[e].path, diobuf, m->data + off, off, want);
	xclose(fd, ents[e].path);
}

/*
 * SEEK_DATA and SEEK_HOLE from a random offset.  Where holes are is the
 * filesystem's choice, but never wrong about data: SEEK_DATA may not skip a
 * byte the model says is non-zero, and the hole SEEK_HOLE finds must read
 * as zeroes up to the next data (or EOF).
 */
static void do_seek(void)
{
	int e = pick_ent(E_REG);
	if (e < 0)
		return;
	struct mfile *m = &files[ents[e].file];
	size_t off = rnd(m->size + 1), q = off;
	while (q < m->size && !m->data[q])
		q++;
	logf_("seek %s from %zu (size %zu)", ents[e].path, off, m->size);
	int fd = open_file(ents[e].path, O_RDONLY);
	off_t d = lseek(fd, off, SEEK_DATA);
	if (d < 0 && (errno != ENXIO || q < m->size))
		failf("SEEK_DATA %s from %zu: %s (non-zero byte at %zu, size %zu)", ents[e].path, off,
		      strerror(errno), q, m->size);
	if (d >= 0 && ((size_t) d < off || (size_t) d > q))
		failf("SEEK_DATA %s from %zu: %lld, want %zu..%zu (first non-zero byte)", ents[e].path,
		      off, (long long) d, off, q);
	off_t h = lseek(fd, off, SEEK_HOLE);
	if (off < m->size) {
		if (h < 0 || (size_t) h < off || (size_t) h > m->size)
			failf("SEEK_HOLE %s from %zu: %lld (%s), want %zu..%zu", ents[e].path, off,
			      (long long) h, h < 0 ? strerror(errno) : "out of range", off, m->size);
		off_t next = lseek(fd, h, SEEK_DATA);
		size_t end = next < 0 ? m->size : (size_t) next;
		if (next < 0 && errno != ENXIO)
			failf("SEEK_DATA %s from %lld: %s", ents[e].path, (long long) h, strerror(errno));
		for (size_t i = h; i < end && i < m->size; i++)
			if (m->data[i])
				failf("SEEK_HOLE %s from %zu: hole at %lld up to %zu, but byte %zu is 0x%02x",
				      ents[e].path, off, (long long) h, end, i, m->data[i]);
	} else if (h >= 0 || errno != ENXIO)
		failf("SEEK_HOLE %s at EOF %zu: want ENXIO, got %lld", ents[e].path, off, (long long) h);
	xclose(fd, ents[e].path);
}

/* ---- operations: xattrs, metadata, sync */

static void xname(char *out, unsigned i)
{
	sprintf(out, "user.stress%u", i);
}

static void do_setxattr(void)
{
	int e = pick_ent(E_REG);
	if (e < 0)
		return;
	struct mfile *m = &files[ents[e].file];
	unsigned i = rnd(NR_XATTRS);
	size_t len = rnd(3) ? rnd(65) : rnd(opt_xattr_max + 1);
	char name[32];
	xname(name, i);
	fill_random(iobuf, len);
	logf_("setxattr %s %s len %zu", ents[e].path, name, len);
	if (setxattr(ents[e].path, name, iobuf, len, 0)) {
		if (!enospc_ok(errno))
			failf("setxattr %s %s len %zu: %s", ents[e].path, name, len, strerror(errno));
		return;
	}
	struct mxattr *x = &m->x[i];
	x->val = realloc(x->val, len + 1);
	memcpy(x->val, iobuf, len);
	x->len = len;
	x->present = true;
}

static void check_xattr(const char *what, const char *path, unsigned f, unsigned i)
{
	struct mxattr *x = &files[f].x[i];
	char name[32];
	xname(name, i);
	ssize_t r = getxattr(path, name, iobuf, opt_max_size + 65536);
	if (!x->present) {
		if (r >= 0 || errno != ENODATA)
			failf("%s %s %s: want ENODATA, got %s", what, path, name,
			      r >= 0 ? "a value" : strerror(errno));
		return;
	}
	if (r < 0)
		failf("%s %s %s: %s", what, path, name, strerror(errno));
	if ((size_t) r != x->len)
		failf("%s %s %s: length %zd, want %zu", what, path, name, r, x->len);
	compare(what, path, iobuf, x->val, 0, r);
}

static void do_getxattr(void)
{
	int e = pick_ent(E_REG);
	if (e < 0)
		return;
	unsigned i = rnd(NR_XATTRS);
	logf_("getxattr %s user.stress%u", ents[e].path, i);
	check_xattr("getxattr", ents[e].path, ents[e].file, i);
}

static void do_removexattr(void)
{
	int e = pick_ent(E_REG);
	if (e < 0)
		return;
	struct mxattr *x = &files[ents[e].file].x[rnd(NR_XATTRS)];
	unsigned i = x - files[ents[e].file].x;
	char name[32];
	xname(name, i);
	logf_("removexattr %s %s (%s)", ents[e].path, name, x->present ? "present" : "absent");
	int r = removexattr(ents[e].path, name);
	if (x->present ? r != 0 : (r == 0 || errno != ENODATA))
		failf("removexattr %s %s (%s): %s", ents[e].path, name,
		      x->present ? "present" : "absent", r ? strerror(errno) : "succeeded");
	x->present = false;
}

static void do_chmod(void)
{
	int e = pick_ent(E_REG);
	if (e < 0)
		return;
	mode_t mode = 0600 | (rnd(0100) & 0077);
	logf_("chmod %s %o", ents[e].path, mode);
	if (chmod(ents[e].path, mode))
		failf("chmod %s %o: %s", ents[e].path, mode, strerror(errno));
	files[ents[e].file].mode = mode;
	struct stat st;
	if (stat(ents[e].path, &st))
		failf("stat %s: %s", ents[e].path, strerror(errno));
	check_stat("chmod", ents[e].path, &st, ents[e].file);
}

static void do_fsync(bool data)
{
	int e = pick_ent(E_REG);
	if (e < 0)
		return;
	logf_("%s %s", data ? "fdatasync" : "fsync", ents[e].path);
	int fd = open_file(ents[e].path, O_WRONLY);
	if (data ? fdatasync(fd) : fsync(fd))
		failf("%s %s: %s", data ? "fdatasync" : "fsync", ents[e].path, strerror(errno));
	xclose(fd, ents[e].path);
}

static void do_sync(void)
{
	logf_("syncfs");
	int fd = open_file(".", O_RDONLY | O_DIRECTORY);
	if (syncfs(fd))
		failf("syncfs: %s", strerror(errno));
	xclose(fd, ".");
}

/* the names in directory DIR ("" for the top) match the model, and symlinks their targets */
static void check_dir(const char *dir)
{
	DIR *d = opendir(*dir ? dir : ".");
	if (!d)
		failf("opendir %s: %s", *dir ? dir : ".", strerror(errno));
	bool seen[MAX_ENTS] = { 0 };
	struct dirent *de;
	char path[PATH_LEN + 260];
	while ((errno = 0, de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(path, sizeof(path), "%s%s%s", dir, *dir ? "/" : "", de->d_name);
		int e = find_path(path);
		if (e < 0)
			failf("readdir %s: unexpected name %s", *dir ? dir : ".", de->d_name);
		if (seen[e])
			failf("readdir %s: %s listed twice", *dir ? dir : ".", de->d_name);
		seen[e] = true;
		unsigned char want = ents[e].type == E_REG ? DT_REG : ents[e].type == E_DIR ? DT_DIR : DT_LNK;
		if (de->d_type != DT_UNKNOWN && de->d_type != want)
			failf("readdir %s: %s has type %u, want %u", *dir ? dir : ".", de->d_name, de->d_type, want);
	}
	if (errno)
		failf("readdir %s: %s", *dir ? dir : ".", strerror(errno));
	closedir(d);
	for (unsigned i = 0; i < MAX_ENTS; i++) {
		if (ents[i].type == E_FREE)
			continue;
		const char *slash = strrchr(ents[i].path, '/');
		size_t plen = slash ? (size_t) (slash - ents[i].path) : 0;
		if (plen != strlen(dir) || strncmp(ents[i].path, dir, plen))
			continue;
		if (!seen[i])
			failf("readdir %s: %s is missing", *dir ? dir : ".", ents[i].path);
		if (ents[i].type == E_SYMLINK) {
			char t[128];
			ssize_t r = readlink(ents[i].path, t, sizeof(t) - 1);
			if (r < 0)
				failf("readlink %s: %s", ents[i].path, strerror(errno));
			t[r] = 0;
			if (strcmp(t, ents[i].target))
				failf("readlink %s: \"%s\", want \"%s\"", ents[i].path, t, ents[i].target);
		}
	}
}

static void do_readdir(void)
{
	int d = rnd(2) ? pick_ent(E_DIR) : -1;
	logf_("readdir %s", d >= 0 ? ents[d].path : ".");
	check_dir(d >= 0 ? ents[d].path : "");
}

/* everything in the model, against the tree */
static void check_all(const char *what)
{
	logf_("check all (%s)", what);
	check_dir("");
	for (unsigned i = 0; i < MAX_ENTS; i++) {
		if (ents[i].type == E_DIR)
			check_dir(ents[i].path);
		if (ents[i].type != E_REG)
			continue;
		unsigned f = ents[i].file;
		struct stat st;
		if (lstat(ents[i].path, &st))
			failf("%s: stat %s: %s", what, ents[i].path, strerror(errno));
		check_stat(what, ents[i].path, &st, f);
		int fd = open_file(ents[i].path, O_RDONLY);
		ssize_t r = pread(fd, iobuf, opt_max_size, 0);
		if (r != (ssize_t) files[f].size)
			failf("%s: read %s: %zd bytes, size %zu", what, ents[i].path, r, files[f].size);
		compare(what, ents[i].path, iobuf, files[f].data, 0, r);
		xclose(fd, ents[i].path);
		for (unsigned x = 0; x < NR_XATTRS; x++)
			check_xattr(what, ents[i].path, f, x);
	}
}

/* ---- state files: the model, to check the tree again after a remount */

static void state_write(const char *base)
{
	char name[4096];
	snprintf(name, sizeof(name), "%s.p%u", base, proc_id);
	FILE *f = fopen(name, "w");
	if (!f)
		failf("%s: %s", name, strerror(errno));
	fprintf(f, "fsstress-state 1 %zu %u\n", opt_max_size, next_name);
	for (unsigned i = 0; i < MAX_FILES; i++) {
		struct mfile *m = &files[i];
		if (!m->nlink)
			continue;
		fprintf(f, "F %u %u %o %zu\n", i, m->nlink, m->mode, m->size);
		fwrite(m->data, 1, m->size, f);
		for (unsigned x = 0; x < NR_XATTRS; x++)
			if (m->x[x].present) {
				fprintf(f, "X %u %zu\n", x, m->x[x].len);
				fwrite(m->x[x].val, 1, m->x[x].len, f);
			}
	}
	for (unsigned i = 0; i < MAX_ENTS; i++)
		if (ents[i].type != E_FREE)
			fprintf(f, "E %u %u %u %s %s\n", i, ents[i].type, ents[i].file, ents[i].path,
				ents[i].type == E_SYMLINK ? ents[i].target : "-");
	if (fclose(f))
		failf("%s: %s", name, strerror(errno));
}

static void state_read(const char *base)
{
	char name[4096], line[512];
	snprintf(name, sizeof(name), "%s.p%u", base, proc_id);
	FILE *f = fopen(name, "r");
	if (!f)
		failf("%s: %s", name, strerror(errno));
	size_t max;
	struct mfile *m = NULL;
	if (!fgets(line, sizeof(line), f) || sscanf(line, "fsstress-state 1 %zu %u", &max, &next_name) != 2 ||
	    max != opt_max_size)
		failf("%s: not a state file for -m %zu", name, opt_max_size);
	while (fgets(line, sizeof(line), f)) {
		unsigned a, b, c;
		size_t sz;
		char p[PATH_LEN], t[64];
		if (sscanf(line, "F %u %u %o %zu", &a, &b, &c, &sz) == 4 && a < MAX_FILES && sz <= max) {
			m = &files[a];
			m->nlink = b;
			m->mode = c;
			m->size = sz;
			if (fread(m->data, 1, sz, f) != sz)
				failf("%s: truncated", name);
		} else if (sscanf(line, "X %u %zu", &a, &sz) == 2 && m && a < NR_XATTRS && sz <= 65536) {
			m->x[a].val = realloc(m->x[a].val, sz + 1);
			m->x[a].len = sz;
			m->x[a].present = true;
			if (fread(m->x[a].val, 1, sz, f) != sz)
				failf("%s: truncated", name);
		} else if (sscanf(line, "E %u %u %u %127s %63s", &a, &b, &c, p, t) == 5 && a < MAX_ENTS) {
			ents[a] = (struct ent) { .type = b, .file = c };
			strcpy(ents[a].path, p);
			strcpy(ents[a].target, t);
		} else
			failf("%s: bad line: %s", name, line);
	}
	fclose(f);
}

/* ---- one process */

static int run_proc(unsigned k)
{
	char dir[4096];
	proc_id = k;
	rng_state = opt_seed + k;
	snprintf(dir, sizeof(dir), "%s/p%u", opt_dir, k);
	if (!opt_state_check && mkdir(dir, 0755) && errno != EEXIST)
		failf("mkdir %s: %s", dir, strerror(errno));
	if (chdir(dir))
		failf("chdir %s: %s", dir, strerror(errno));
	iobuf = malloc(opt_max_size + 65536);
	if (posix_memalign((void **) &diobuf, DIO_ALIGN, opt_max_size) ||
	    posix_memalign((void **) &cmpbuf, DIO_ALIGN, opt_max_size))
		failf("out of memory");
	for (unsigned i = 0; i < MAX_FILES; i++)
		files[i].data = malloc(opt_max_size);
	if (!iobuf || !files[MAX_FILES - 1].data)
		failf("out of memory");

	if (opt_state_check) {
		state_read(opt_state_check);
		check_all("check against state");
		return 0;
	}

	unsigned total = 0;
	for (unsigned i = 0; i < NR_OPS; i++)
		total += ops[i].weight;
	for (op_nr = 0; op_nr < opt_ops; op_nr++) {
		unsigned w = rnd(total), o = 0;
		while (w >= ops[o].weight)
			w -= ops[o++].weight;
		/* keep the tree from filling up with names: remove more once half full */
		if ((o == OP_CREATE || o == OP_MKDIR || o == OP_SYMLINK || o == OP_LINK) &&
		    nr_ents() > MAX_ENTS / 2 && rnd(2))
			o = rnd(2) ? OP_UNLINK : OP_RMDIR;
		nr_done[o]++;
		switch (o) {
		case OP_CREATE:		do_create(); break;
		case OP_MKDIR:		do_mkdir(); break;
		case OP_RMDIR:		do_rmdir(); break;
		case OP_UNLINK:		do_unlink(); break;
		case OP_RENAME:		do_rename(); break;
		case OP_LINK:		do_link(); break;
		case OP_SYMLINK:	do_symlink(); break;
		case OP_WRITE:		do_write(); break;
		case OP_READ:		do_read(); break;
		case OP_TRUNCATE:	do_truncate(); break;
		case OP_FALLOCATE:	do_fallocate(); break;
		case OP_DWRITE:		do_dwrite(); break;
		case OP_DREAD:		do_dread(); break;
		case OP_SETXATTR:	do_setxattr(); break;
		case OP_GETXATTR:	do_getxattr(); break;
		case OP_REMOVEXATTR:	do_removexattr(); break;
		case OP_CHMOD:		do_chmod(); break;
		case OP_FSYNC:		do_fsync(false); break;
		case OP_FDATASYNC:	do_fsync(true); break;
		case OP_SYNC:		do_sync(); break;
		case OP_READDIR:	do_readdir(); break;
		case OP_SEEK:		do_seek(); break;
		}
	}
	check_all("final check");
	if (opt_state_out)
		state_write(opt_state_out);
	printf("fsstress: p%u: %u operations, %lu ENOSPC, %lu page cache incoherent after ENOSPC, %u names\n",
	       k, opt_ops, nr_enospc, nr_incoherent, nr_ents());
	return 0;
}

/* ---- options and the process fan-out */

static size_t parse_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 0);
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	}
	if (*end || !v) {
		fprintf(stderr, "fsstress: bad size: %s\n", s);
		exit(2);
	}
	return v;
}

static void set_weight(const char *arg)
{
	if (!strcmp(arg, "list")) {
		for (unsigned i = 0; i < NR_OPS; i++)
			printf("%-12s %u\n", ops[i].name, ops[i].weight);
		exit(0);
	}
	const char *eq = strchr(arg, '=');
	for (unsigned i = 0; eq && i < NR_OPS; i++)
		if (strlen(ops[i].name) == (size_t) (eq - arg) && !strncmp(ops[i].name, arg, eq - arg)) {
			ops[i].weight = atoi(eq + 1);
			return;
		}
	fprintf(stderr, "fsstress: -O %s: want NAME=WEIGHT or list\n", arg);
	exit(2);
}

static void set_fa_modes(char *arg)
{
	opt_fa_modes = 0;
	for (char *m = strtok(arg, ","); m; m = strtok(NULL, ",")) {
		unsigned k;
		for (k = 0; k < sizeof(fa_modes) / sizeof(fa_modes[0]); k++)
			if (!strcmp(m, fa_modes[k].name))
				break;
		if (k == sizeof(fa_modes) / sizeof(fa_modes[0])) {
			fprintf(stderr, "fsstress: -F %s: modes are default, keep-size, punch-hole, "
				"zero-range, zero-range+keep-size\n", m);
			exit(2);
		}
		opt_fa_modes |= 1U << k;
	}
	if (!opt_fa_modes)
		ops[OP_FALLOCATE].weight = 0;
}

static const char *absolute(const char *path)
{
	char cwd[4096], *out;
	if (path[0] == '/')
		return path;
	if (!getcwd(cwd, sizeof(cwd)) || asprintf(&out, "%s/%s", cwd, path) < 0) {
		perror("fsstress: getcwd");
		exit(2);
	}
	return out;
}

static void usage(void)
{
	fputs("usage: fsstress -d DIR [-p PROCS] [-n OPS] [-s SEED] [-i K] [-E] [-v]\n"
	      "                [-m MAX_FILE_SIZE] [-W MAX_WRITE] [-x MAX_XATTR] [-O NAME=W|list]\n"
	      "                [-F MODES] [-w STATE | -c STATE]\n"
	      "  -p PROCS   processes, each in DIR/pK (4)\n"
	      "  -n OPS     operations per process (10000)\n"
	      "  -s SEED    process K uses SEED+K (default: from the clock; always printed)\n"
	      "  -i K       run only process K (replay)\n"
	      "  -E         ENOSPC is an allowed result of operations that allocate (write,\n"
	      "             dwrite, fallocate, setxattr, create, mkdir, symlink, link, rename)\n"
	      "  -m SIZE    largest file (1M); -W SIZE largest write (128K)\n"
	      "  -x SIZE    largest xattr value (1024)\n"
	      "  -O NAME=W  operation weight, 0 disables; -O list shows them\n"
	      "  -F MODES   fallocate modes, comma-separated (all): default, keep-size,\n"
	      "             punch-hole, zero-range, zero-range+keep-size\n"
	      "  -w STATE   write each process's model to STATE.pK at the end\n"
	      "  -c STATE   run no operations: check DIR against STATE.pK\n"
	      "exit: 0 passed, 1 a check failed, 2 usage\n", stderr);
	exit(2);
}

int main(int argc, char **argv)
{
	int c;
	while ((c = getopt(argc, argv, "d:p:n:s:i:Evm:W:x:O:F:w:c:h")) != -1) {
		switch (c) {
		case 'd': opt_dir = optarg; break;
		case 'p': opt_procs = atoi(optarg); break;
		case 'n': opt_ops = atoi(optarg); break;
		case 's': opt_seed = strtoull(optarg, NULL, 0); opt_seed_set = true; break;
		case 'i': opt_only = atoi(optarg); break;
		case 'E': opt_enospc = true; break;
		case 'v': opt_verbose = true; break;
		case 'm': opt_max_size = parse_size(optarg); break;
		case 'W': opt_max_write = parse_size(optarg); break;
		case 'x': opt_xattr_max = parse_size(optarg); break;
		case 'O': set_weight(optarg); break;
		case 'F': set_fa_modes(optarg); break;
		case 'w': opt_state_out = optarg; break;
		case 'c': opt_state_check = optarg; break;
		default: usage();
		}
	}
	if (!opt_dir || optind != argc || !opt_procs || opt_xattr_max > 65536 ||
	    opt_max_size % DIO_ALIGN || opt_max_write > opt_max_size)
		usage();
	/* the processes chdir into their subtrees: make the paths absolute */
	opt_dir = absolute(opt_dir);
	opt_state_out = opt_state_out ? absolute(opt_state_out) : NULL;
	opt_state_check = opt_state_check ? absolute(opt_state_check) : NULL;
	if (opt_verbose)	/* whole lines, so processes' logs do not cut into each other */
		setvbuf(stdout, NULL, _IOLBF, 0);
	if (!opt_seed_set)
		opt_seed = (uint64_t) time(NULL);
	printf("fsstress: %s: %u processes x %u operations, seed %" PRIu64 "%s\n", opt_dir,
	       opt_only != ~0U ? 1 : opt_procs, opt_ops, opt_seed, opt_state_check ? " (check only)" : "");
	fflush(stdout);

	if (opt_only != ~0U)
		return run_proc(opt_only);
	pid_t pids[256];
	if (opt_procs > 256)
		usage();
	for (unsigned k = 0; k < opt_procs; k++) {
		pids[k] = fork();
		if (pids[k] < 0) {
			perror("fsstress: fork");
			return 2;
		}
		if (!pids[k])
			exit(run_proc(k));
	}
	int ret = 0;
	for (unsigned k = 0; k < opt_procs; k++) {
		int st;
		if (waitpid(pids[k], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) {
			if (!WIFEXITED(st))
				fprintf(stderr, "fsstress: p%u: killed by signal %d\n", k, WTERMSIG(st));
			ret = 1;
		}
	}
	printf("fsstress: %s\n", ret ? "FAILED" : "passed");
	return ret;
}
