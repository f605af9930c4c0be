// SPDX-License-Identifier: GPL-2.0
/*
 * cmd_image_update.c - `bcachefs image update IMG DIR [PATH]` (alias
 * `image sync`): make the tree at PATH in the image (its root by default)
 * equal to the host directory DIR, changing only what differs.
 *
 * Per name, the trees compared a directory at a time in name order:
 *  (1) in the image only: removed (a whole tree for a directory); except
 *      lost+found at the image root, the filesystem's own;
 *  (2) in DIR only: copied in (copy.c, as format --source does);
 *  (3) in both with another type, another symlink target or device
 *      number, or sharing an inode the host does not share: replaced;
 *  (4) a regular file whose size or mtime (ns) differs, or with
 *      --checksum whose content differs: its data rewritten in place (the
 *      same inode, so its other hard links follow);
 *  (5) then mode, owner, mtime and xattrs set where they differ; an equal
 *      file is not written at all and keeps its extents.  atime is not
 *      compared (reading DIR changes it) but is set with the rest.
 * Hard links: the names of one host inode end up on one image inode.  Kept
 * is the image inode of the first of those names (in walk order) that the
 * image already has as that same file and no other host inode claims
 * (plan_links(), before the walk, so that it is kept whichever name comes
 * first); other names are linked to it.  A host inode the image does not
 * have yet is made by its first name.  Both through copy.c's link map,
 * seeded with the kept inodes, so names inside new directories (copied by
 * copy_in) are linked as well.
 * Symlink targets and regular files' data are trusted equal, as rsync
 * trusts them, when size and mtime are (--checksum reads them).
 * Per-file options (bcachefs.* xattrs) the image has and DIR does not are
 * left alone: they are the image's settings, not the tree's.
 *
 * Subvolumes.  PATH may lie in any subvolume (--subvolume NAME: PATH from
 * the root of the subvolume at NAME): the scans read what that
 * subvolume's snapshot sees (a view, snapshot.h) and keep every inode
 * number as that subvolume's handle (fs_ops.h), so the walk and the
 * changes stay in it; the keys its snapshot shares with others are
 * overwritten in it alone (copy on write).  Names of other subvolumes
 * inside it are left alone, as at the root.  A read-only snapshot
 * refuses (EROFS) on the check pass, before anything is written.
 *
 * Speed.  The time must follow the change, not the tree, and the tree must
 * still be looked at whole (a file's content changes nothing above it).
 * So the looking is made cheap:
 *  - DIR is read by worker threads (one per CPU), a directory at a time
 *    relative to its descriptor (getdents64 into one buffer per worker;
 *    fstatat, listxattrat, readlinkat: no path walks), into memory;
 *  - meanwhile the main thread reads the image's metadata: three forward
 *    scans (inodes, dirents, xattrs), not a lookup per name, so what the
 *    walk compares (mode, owner, size, mtime, link count, device, whether
 *    any xattr exists) is in memory;
 *  - then, while DIR is still being read, the main thread matches each
 *    directory read with the image's (match_ahead(): a small hash table of
 *    the image directory's names, no sort of the image side), reading
 *    directories itself when none is ready;
 *  - the walk after (in name order, one thread: its output and hard-link
 *    choices are those of one walk) finds every match made and does no
 *    I/O for an equal file; xattrs are read by name only for a file that
 *    has some on either side.
 * Threads.  The reading of DIR is host_scan.c's (host_scan.h says how its
 * threads share the listing); the matching is load()'s and match_ahead()'s
 * on the main thread.  The queues hold directories, not names, and every
 * thread has ended before the walk, which runs alone.
 * What is left is one fstatat per name of DIR and a listxattrat for some
 * (the floor for noticing a change anywhere), three btree scans, and the
 * read-only open made read-write when something differs.
 * Measured (bench/update.sh, 81k names, 100 changed): a dry run takes
 * 0.24 s of system CPU (the reading of DIR, most of it) and 0.07 s of user
 * CPU (the image's scans, the sorts, the matching; 0.085 s before the
 * matching moved ahead and the sorts left qsort); the read-only close and
 * read-write open took 10-50 ms, the changes 30-70 ms, the close 30-70 ms.
 * The open is now made read-write in place: the read-write descriptor
 * reads the superblocks again and the extents leaves of the files
 * rewritten (45 reads, 7 MiB), where the second open read 630 times,
 * 19 MiB (journal bucket heads, alloc and every node the writes needed).
 * This file makes no flush of its own: the fdatasyncs of a run (8) are the
 * engine's, 2 in the read-write start (the session's first journal entry,
 * the superblock: fs.c's start_rw() says why not one) and 6 in the close (the entry the node writes wait for,
 * with its preflush; one flush of the devices before the parents that carry
 * their children's hints; the entry with the new roots; the clean
 * superblock).
 * Ctimes.  A changed xattr moves only the host file's ctime (not its size
 * or mtime), so xattrs cannot be trusted equal from size and mtime.  But
 * format --source and this file (set_attrs(), last of a file's changes)
 * give each image inode its host file's ctime (copy_host_ctime(); not with
 * SOURCE_DATE_EPOCH), and any later change of the image inode makes its
 * ctime now.  So a ctime equal to the nanosecond on both sides means
 * neither side changed since the image took the host's attributes and
 * xattrs: they are not compared.  The scan learns the image's ctimes (a
 * set: a pair_map keyed by ctime) once the inodes are read (after the first ~20% of the
 * walk) and skips listxattrat for a name whose ctime is in it; the compare
 * then checks the ctime against the name's own match, and lists the host
 * xattrs itself if it differs.  A whole second is never trusted (a
 * second-granular host filesystem; the epoch of SOURCE_DATE_EPOCH).  The
 * trust is rsync's in size and mtime: a host change within the kernel's
 * timestamp granularity of the image's copy, during the copy, is not seen.
 * Measured: listxattrat calls of the dry run 81k -> 24k, its CPU 310-324
 * -> 282-298 ms (perf stat -r 8, load 1).
 * The scans read keys through the view iterator (bch_viter, snapshot.h);
 * inodes are at (0, inum), dirents at (dir, hash), xattrs at (inum, hash)
 * with value pieces above BCH_HASH_MAX.
 *
 * States.  The image verbs open read-only first (cmd_image.c).  That
 * check pass does the whole comparison writing nothing and notes each
 * change (an op: kind, host path, image path); a damaged image or a
 * directory of DIR that cannot be listed (a new one too: count_new()) or a
 * name that cannot be read fails there, before the read-write open, so nothing is
 * written; when nothing differs it ends there too (EXIT_IMAGE_DONE), so
 * an image already equal is not made read-write at all.  The read-write
 * pass then makes only the noted changes, each found again by the inode
 * number the check pass saw.  Usually on the same open, made read-write in
 * place, which first finds every superblock as the check pass read it (so
 * no other writer came between); when it cannot, on a second open, where
 * another writer between would make them stale as it would make paths
 * stale: the change then fails, -ENOENT, rather than landing elsewhere, as
 * inode numbers are not reused.
 * --dry-run prints on the check pass and ends there; without a check pass
 * (-o read_only, shell) one walk finds and makes the changes.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "bcachefs.h"
#include "bkey.h"
#include "btree.h"
#include "cmds.h"
#include "copy.h"
#include "host_scan.h"
#include "fs_ops.h"
#include "snapshot.h"
#include "xattr_effective.h"

#define CMD		"image update"
#define CMP_BUF		(1U << 20)
#define SCAN_THREADS	8
#define KEEPER_NEW	UINT64_MAX	/* a host inode made by this update */

/* ---------------------------------------------------------------- paths */

/* A path built a component at a time (push returns the length to pop to). */
struct pbuf {
	char		*s;
	size_t		len, cap;
};

static size_t pb_push(struct pbuf *p, const char *name)
{
	size_t old = p->len, n = strlen(name);
	if (p->len + n + 2 > p->cap) {
		p->cap = (p->len + n + 2) * 2;
		if (!(p->s = realloc(p->s, p->cap)))
			abort();
	}
	p->s[p->len++] = '/';
	memcpy(p->s + p->len, name, n + 1);
	p->len += n;
	return old;
}

static void pb_pop(struct pbuf *p, size_t len)
{
	p->len = len;
	p->s[len] = 0;
}

/* Start at path s, without trailing slashes ("/" alone: "", the image root). */
static void pb_set(struct pbuf *p, const char *s)
{
	size_t n = strlen(s);
	while (n && s[n - 1] == '/')
		n--;
	if (n + 1 > p->cap && !(p->s = realloc(p->s, p->cap = n + 256)))
		abort();
	memcpy(p->s, s, n);
	p->s[n] = 0;
	p->len = n;
}

static struct timespec ns_ts(int64_t ns)
{
	int64_t sec = ns / 1000000000, rem = ns % 1000000000;
	if (rem < 0) {		/* before 1970: nanoseconds stay positive */
		sec--;
		rem += 1000000000;
	}
	return (struct timespec) { .tv_sec = sec, .tv_nsec = rem };
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char * const *)a, *(char * const *)b);
}

/* ----------------------------------------------------------- image scan */

/* What the walk compares of an image inode. */
struct iino {
	uint64_t	inum, size, rdev;
	int64_t		mtime, ctime;
	uint32_t	mode, uid, gid, nlink;
	bool		xattrs;		/* it has xattr keys */
};

struct ient {
	size_t		name;		/* offset in names */
	uint64_t	inum;
};

struct idir {
	uint64_t	inum;
	size_t		start, nr;	/* in ent, in the image's order (by name hash) */
};

/* A host name's entry in the image, and its inode (both NULL: none there). */
struct imatch {
	const struct ient	*ie;
	const struct iino	*ii;	/* NULL with ie: a damaged image */
};

struct iscan {
	uint64_t	handle;		/* bch_handle(subvolume, 0): or'd into every number */
	struct iino	*ino;
	size_t		nr_ino, cap_ino;
	struct ient	*ent;
	size_t		nr_ent, cap_ent;
	struct idir	*dir;
	size_t		nr_dir, cap_dir;
	char		*names;
	size_t		names_len, names_cap;
	uint32_t	*by_inum;	/* dense inode numbers: ino index + 1 at inum - base */
	uint64_t	base, span;
};

static struct iino *iino_find(struct iscan *s, uint64_t inum)
{
	if (s->by_inum) {
		uint64_t o = inum - s->base;
		return o < s->span && s->by_inum[o] ? &s->ino[s->by_inum[o] - 1] : NULL;
	}
	size_t lo = 0, hi = s->nr_ino;
	while (lo < hi) {
		size_t m = (lo + hi) / 2;
		if (s->ino[m].inum < inum)
			lo = m + 1;
		else
			hi = m;
	}
	return lo < s->nr_ino && s->ino[lo].inum == inum ? &s->ino[lo] : NULL;
}

static struct idir *idir_find(struct iscan *s, uint64_t inum)
{
	size_t lo = 0, hi = s->nr_dir;
	while (lo < hi) {
		size_t m = (lo + hi) / 2;
		if (s->dir[m].inum < inum)
			lo = m + 1;
		else
			hi = m;
	}
	return lo < s->nr_dir && s->dir[lo].inum == inum ? &s->dir[lo] : NULL;
}

static int iscan_key(struct iscan *s, unsigned id, const struct bch_bkey *k)
{
	if (id == BCH_BTREE_ID_inodes && k->type == BCH_BKEY_inode) {
		const struct bch_inode *v = bkey_val(k);
		GROW(s->ino, s->nr_ino, s->cap_ino);
		s->ino[s->nr_ino++] = (struct iino) {
			.inum = s->handle | k->p.offset, .size = v->size, .rdev = v->rdev, .mtime = v->mtime,
			.ctime = v->ctime,
			.mode = v->mode, .uid = v->uid, .gid = v->gid, .nlink = v->nlink,
		};
	} else if (id == BCH_BTREE_ID_dirents && k->type == BCH_BKEY_dirent &&
		   ((const struct bch_dirent *)bkey_val(k))->d_type != BCH_DT_SUBVOL) {
		/* a subvolume's name is another tree's: update leaves it alone */
		const struct bch_dirent *d = bkey_val(k);
		if (!s->nr_dir || s->dir[s->nr_dir - 1].inum != (s->handle | k->p.inode)) {
			GROW(s->dir, s->nr_dir, s->cap_dir);
			s->dir[s->nr_dir++] = (struct idir) {
				.inum = s->handle | k->p.inode, .start = s->nr_ent,
			};
		}
		if (s->names_len + d->name_len + 1 > s->names_cap) {
			s->names_cap = (s->names_len + d->name_len + 1) * 2;
			if (!(s->names = realloc(s->names, s->names_cap)))
				abort();
		}
		GROW(s->ent, s->nr_ent, s->cap_ent);
		s->ent[s->nr_ent++] = (struct ient) { .name = s->names_len, .inum = s->handle | d->inum };
		memcpy(s->names + s->names_len, d->name, d->name_len);
		s->names[s->names_len + d->name_len] = 0;
		s->names_len += d->name_len + 1;
		s->dir[s->nr_dir - 1].nr++;
	} else if (id == BCH_BTREE_ID_xattrs && k->type == BCH_BKEY_xattr &&
		   k->p.offset <= BCH_HASH_MAX) {
		struct iino *i = iino_find(s, s->handle | k->p.inode);
		if (i)
			i->xattrs = true;
	}
	return 0;
}

/*
 * Inode numbers as a format or an update gives them are dense: then an
 * array finds each (a lookup per name of DIR) instead of a binary search
 * that misses the cache at every step.  Sparse or out of order: none.
 */
static void index_inums(struct iscan *s)
{
	if (!s->nr_ino || s->nr_ino >= UINT32_MAX)
		return;
	uint64_t base = s->ino[0].inum, span = s->ino[s->nr_ino - 1].inum - base + 1;
	if (span > 4 * s->nr_ino + 4096 || !(s->by_inum = calloc(span, sizeof(*s->by_inum))))
		return;
	for (size_t i = 0; i < s->nr_ino; i++) {
		if (i && s->ino[i].inum <= s->ino[i - 1].inum) {
			free(s->by_inum);
			s->by_inum = NULL;
			return;
		}
		s->by_inum[s->ino[i].inum - base] = i + 1;
	}
	s->base = base;
	s->span = span;
}

/*
 * Read what the walk needs of the image: three forward scans of what the
 * subvolume of handle dir sees (its snapshot's view, snapshot.h), the
 * numbers kept as that subvolume's handles, as the fs_ops calls take them.
 */
/* The set of s's inode ctimes, for the host scan (struct scan's ctimes). */
static struct pair_map *ctimes_of(const struct iscan *s)
{
	struct pair_map *m = calloc(1, sizeof(*m));

	if (!m)
		abort();
	for (size_t n = 0; n < s->nr_ino; n++)
		if (s->ino[n].ctime)
			pair_find(m, s->ino[n].ctime, 0, true);
	return m;
}

/* sc: the host scan, given the inodes' ctimes as soon as they are read (NULL: none). */
static int iscan_load(struct iscan *s, struct bch_fs *c, uint64_t dir, struct scan *sc)
{
	static const unsigned ids[] = {
		BCH_BTREE_ID_inodes, BCH_BTREE_ID_dirents, BCH_BTREE_ID_xattrs,
	};
	struct bch_view v;
	int r = bch_view_enter(c, &v, &dir);

	if (r)
		return r;
	s->handle = bch_handle(v.subvol, 0);
	for (unsigned i = 0; !r && i < sizeof(ids) / sizeof(ids[0]); i++) {
		struct bch_viter it;
		const struct bch_bkey *k;

		bch_viter_init(&it, c, ids[i], POS_MIN, POS_MAX);
		while ((k = bch_viter_next(&it, &r)) && !(r = iscan_key(s, ids[i], k)))
			if (bpos_eq(k->p, POS_MAX))
				break;
		bch_viter_exit(&it);
		if (!r && ids[i] == BCH_BTREE_ID_inodes) {
			index_inums(s);
			if (sc)
				__atomic_store_n(&sc->ctimes, ctimes_of(s), __ATOMIC_RELEASE);
		}
	}
	bch_view_exit(&v);
	return r;
}

static void iscan_free(struct iscan *s)
{
	free(s->ino);
	free(s->ent);
	free(s->dir);
	free(s->names);
	free(s->by_inum);
	memset(s, 0, sizeof(*s));
}

/* ------------------------------------------------------------- the walk */

/* A change found by the check pass, made by the read-write one. */
struct op {
	char		kind;		/* as printed: + - R W M; m: metadata to compare again */
	char		*hpath, *ipath;
	uint64_t	at;		/* + - R: the directory of the last name; W M m: the inode */
};

struct upd {
	struct bch_fs		*c;
	bool			record;		/* check pass: note the changes in ops */
	bool			entries;	/* the directory being walked had entries changed */
	struct op		*ops;
	size_t			nr_ops, cap_ops;
	bool			write;		/* not the check pass, not --dry-run */
	bool			out;		/* this pass says what changed */
	bool			json;
	bool			checksum;
	struct copy_ctx		x;
	char			*cmp_buf;	/* --checksum: image side */
	struct iscan		img;
	struct hdir		*host;
	struct arena		host_mem;	/* host, its listings and names */
	struct arena		match_mem;	/* the listings' matches (match_ahead) */
	struct pbuf		hp, ip;		/* the paths being walked */
	uint32_t		*tab;		/* match_dir's hash table */
	size_t			tab_cap;
	struct pair_map		links;		/* host dev, ino -> kept image inum (v1) */
	struct pair_map		claims;		/* image inum -> host dev, ino */
	struct {			/* --json: the changes, in order */
		char		kind;
		char		*path;
	}			*log;
	size_t			nr_log, cap_log;
	struct {
		uint64_t	created, removed, written, replaced, metadata, unchanged;
		uint64_t	bytes_written, bytes_compared;
	} n;
};

static int upd_err(struct upd *u, int r, const char *what, const char *path)
{
	if (r == -EIO && u->c->err_msg[0])
		cmd_err(CMD, "%s %s: %s (%s)", what, path, strerror(-r), u->c->err_msg);
	else
		cmd_err(CMD, "%s %s: %s", what, path, strerror(-r));
	return r;
}

/* A change (at: as in struct op), printed or noted. */
static void report(struct upd *u, char what, const char *hpath, const char *ipath, uint64_t at)
{
	if (!*ipath)
		ipath = "/";
	if (u->out && what != 'm') {
		if (!u->json) {
			printf("%c %s\n", what, ipath);
		} else {
			GROW(u->log, u->nr_log, u->cap_log);
			u->log[u->nr_log].kind = what;
			if (!(u->log[u->nr_log++].path = strdup(ipath)))
				abort();
		}
	}
	if (what == '+' || what == '-' || what == 'R')
		u->entries = true;
	if (!u->record)
		return;
	GROW(u->ops, u->nr_ops, u->cap_ops);
	struct op *o = &u->ops[u->nr_ops++];
	o->kind = what;
	o->at = at;
	if (!(o->hpath = strdup(hpath)) || !(o->ipath = strdup(ipath)))
		abort();
}

/* ------------------------------------------------------------- changes */

struct names {
	char		**name;
	size_t		nr, cap;
};

static int img_collect(void *priv, const char *name, size_t len, uint64_t inum, unsigned t,
		       uint64_t next)
{
	struct names *l = priv;
	(void)inum; (void)t; (void)next;
	if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
		return 0;
	GROW(l->name, l->nr, l->cap);
	if (!(l->name[l->nr++] = strndup(name, len)))
		abort();
	return 0;
}

static void names_free(struct names *l)
{
	for (size_t i = 0; i < l->nr; i++)
		free(l->name[i]);
	free(l->name);
}

/* Remove name from dir, a tree for a directory: rule (1). */
static int remove_tree(struct upd *u, uint64_t dir, const char *name, const char *ipath)
{
	uint64_t inum;
	struct stat st;
	int r = bch_fs_lookup(u->c, dir, name, &inum);

	if (!r)
		r = bch_fs_getattr(u->c, inum, &st);
	if (r)
		return upd_err(u, r, "reading", ipath);
	u->n.removed++;
	if (S_ISDIR(st.st_mode)) {
		struct names l = { 0 };
		if ((r = bch_fs_readdir(u->c, inum, 0, img_collect, &l)))
			upd_err(u, r, "listing", ipath);
		for (size_t i = 0; !r && i < l.nr; i++) {
			char *p = host_join(ipath, l.name[i]);
			r = remove_tree(u, inum, l.name[i], p);
			free(p);
		}
		names_free(&l);
		if (!r && u->write && (r = bch_fs_rmdir(u->c, dir, name)))
			upd_err(u, r, "removing", ipath);
		return r;
	}
	if (u->write && (r = bch_fs_unlink(u->c, dir, name)))
		upd_err(u, r, "removing", ipath);
	return r;
}

/*
 * What copying in host entry e (at u->hp) would make (check pass,
 * --dry-run): counts, and the hard links it makes noted, as copy_in's link
 * map will have them.  A name below it that cannot be read fails here, as
 * copy_in would on the read-write pass, so that nothing is written.
 */
static int count_new(struct upd *u, const struct hent *e)
{
	int r = 0;

	if (e->err) {
		cmd_err(CMD, "reading %s: %s", u->hp.s, strerror(-e->err));
		return e->err;
	}
	u->n.created++;
	if (!S_ISDIR(e->mode) && e->nlink > 1) {
		struct pair_ent *l = pair_find(&u->links, e->dev, e->ino, true);
		if (l->v1)
			return 0;	/* a link to an inode made or kept */
		l->v1 = KEEPER_NEW;
	}
	if (S_ISREG(e->mode))
		u->n.bytes_written += e->size;
	if (e->sub && e->sub->err) {
		cmd_err(CMD, "listing %s: %s", e->sub->path, strerror(-e->sub->err));
		return e->sub->err;
	}
	for (size_t i = 0; !r && e->sub && i < e->sub->nr; i++) {
		size_t saved = pb_push(&u->hp, e->sub->e[i].name);
		r = count_new(u, &e->sub->e[i]);
		pb_pop(&u->hp, saved);
	}
	return r;
}

/* Copy host path in as dir/name (rule (2)); hard links through copy's map. */
static int create(struct upd *u, const struct hent *e, const char *hpath, uint64_t dir,
		  const char *name)
{
	if (!u->write)
		return e ? count_new(u, e) : 0;
	uint64_t files = u->x.files, bytes = u->x.bytes;
	int r = copy_in(&u->x, hpath, dir, name);
	u->n.created += u->x.files - files;
	u->n.bytes_written += u->x.bytes - bytes;
	return r;
}

/* --checksum: does the image file's content equal the host file's? */
static int same_content(struct upd *u, const char *hpath, uint64_t inum, uint64_t size,
			bool *same)
{
	int fd = open(hpath, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOATIME), r = 0;
	if (fd < 0 && errno == EPERM)
		fd = open(hpath, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	*same = true;
	for (uint64_t pos = 0; pos < size && *same;) {
		size_t want = size - pos < CMP_BUF ? size - pos : CMP_BUF;
		ssize_t a = pread(fd, u->x.buf, want, pos);
		ssize_t b = bch_fs_read(u->c, inum, pos, u->cmp_buf, want);
		if (a < 0 || b < 0) {
			r = a < 0 ? -errno : (int)b;
			break;
		}
		*same = a == b && a && !memcmp(u->x.buf, u->cmp_buf, a);
		pos += a;
		u->n.bytes_compared += a;
	}
	close(fd);
	return r;
}

static bool skip_xattr(const char *n)
{
	return bch_xattr_is_effective(n) || !strncmp(n, "bcachefs.", strlen("bcachefs."));
}

/* Make the image's xattrs of inum those of host path: *changed when any differed. */
static int sync_xattrs(struct upd *u, const char *hpath, uint64_t inum, const char *ipath,
		       bool *changed)
{
	char *hn = NULL, *in = NULL, *hv = u->x.buf, *iv = u->cmp_buf;
	ssize_t hl = llistxattr(hpath, NULL, 0), il = bch_fs_listxattr(u->c, inum, NULL, 0);
	int r = 0;

	if (hl < 0)
		hl = 0;
	if (il < 0)
		return upd_err(u, (int)il, "listing xattrs of", ipath);
	if (hl && (!(hn = malloc(hl)) || (hl = llistxattr(hpath, hn, hl)) < 0))
		hl = 0;
	if (il && (!(in = malloc(il)) || (il = bch_fs_listxattr(u->c, inum, in, il)) < 0)) {
		r = upd_err(u, (int)il, "listing xattrs of", ipath);
		goto out;
	}
	/* the image's that the host lacks go */
	for (ssize_t o = 0; o < il; o += strlen(in + o) + 1) {
		const char *n = in + o;
		if (skip_xattr(n) || (hl && lgetxattr(hpath, n, NULL, 0) >= 0))
			continue;
		*changed = true;
		if (u->write && (r = bch_fs_removexattr(u->c, inum, n))) {
			upd_err(u, r, "removing an xattr of", ipath);
			goto out;
		}
	}
	/* the host's that differ are set */
	for (ssize_t o = 0; o < hl; o += strlen(hn + o) + 1) {
		const char *n = hn + o;
		if (bch_xattr_is_effective(n))
			continue;
		ssize_t a = lgetxattr(hpath, n, hv, CMP_BUF);
		if (a < 0)
			continue;
		ssize_t b = bch_fs_getxattr(u->c, inum, n, iv, CMP_BUF);
		if (b == a && !memcmp(hv, iv, a))
			continue;
		*changed = true;
		if (u->write && (r = bch_fs_setxattr(u->c, inum, n, hv, a, 0))) {
			upd_err(u, r, "setting an xattr of", ipath);
			goto out;
		}
	}
out:
	free(hn);
	free(in);
	return r;
}

/* Set mode, owner and times of inum from host stat hs. */
static int set_attrs(struct upd *u, const struct stat *hs, uint64_t inum, const char *ipath)
{
	bool lnk = S_ISLNK(hs->st_mode);
	struct bch_setattr sa = {
		.valid	= BCH_SETATTR_UID | BCH_SETATTR_GID | BCH_SETATTR_ATIME | BCH_SETATTR_MTIME |
			  (lnk ? 0 : BCH_SETATTR_MODE),
		.mode	= hs->st_mode & 07777,
		.uid	= hs->st_uid,
		.gid	= hs->st_gid,
		.atime	= copy_host_atime(hs),
		.mtime	= ts_ns(hs->st_mtim),
	};
	copy_host_ctime(&sa, hs);	/* last: what the next update compares */
	int r = bch_fs_setattr(u->c, inum, &sa);
	return r ? upd_err(u, r, "setting attributes of", ipath) : 0;
}

/* Do mode, owner and mtime of the image inode (is) differ from the host's? */
static bool attrs_differ(const struct stat *hs, uint32_t mode, uint32_t uid, uint32_t gid,
			 int64_t mtime)
{
	return (!S_ISLNK(hs->st_mode) && (mode & 07777) != (hs->st_mode & 07777)) ||
		uid != hs->st_uid || gid != hs->st_gid || mtime != ts_ns(hs->st_mtim);
}

/*
 * Rule (5) from what is known: xattrs compared by name when either side
 * has some (same_ctime: neither side changed since the image took them:
 * not compared); *changed when anything differed (and, writing, was set).
 * data: its data was just written: the attributes are set anyway (their
 * ctime last).
 */
static int sync_meta_known(struct upd *u, const char *hpath, const struct stat *hs,
			   bool host_xattrs, bool same_ctime, const struct iino *ii,
			   const char *ipath, bool data, bool *changed)
{
	int r;

	if (!same_ctime && (host_xattrs || ii->xattrs) &&
	    (r = sync_xattrs(u, hpath, ii->inum, ipath, changed)))
		return r;
	if (attrs_differ(hs, ii->mode, ii->uid, ii->gid, ii->mtime))
		*changed = true;
	return (*changed || data) && u->write ? set_attrs(u, hs, ii->inum, ipath) : 0;
}

/* Rule (5) read afresh from both sides (the read-write pass, the root). */
static int sync_meta(struct upd *u, const char *hpath, const struct stat *hs, uint64_t inum,
		     const char *ipath, bool data, bool *changed)
{
	struct stat is;
	int r = bch_fs_getattr(u->c, inum, &is);

	if (r)
		return upd_err(u, r, "reading", ipath);
	struct iino ii = {
		.inum = inum, .mode = is.st_mode, .uid = is.st_uid, .gid = is.st_gid,
		.mtime = ts_ns(is.st_mtim), .xattrs = true,
	};
	return sync_meta_known(u, hpath, hs, true, false, &ii, ipath, data, changed);
}

/* Same type, device number and symlink target: could the image entry be kept? */
static bool compatible(struct upd *u, const struct hent *e, const struct iino *ii)
{
	if ((ii->mode & S_IFMT) != (e->mode & S_IFMT))
		return false;
	if ((S_ISCHR(e->mode) || S_ISBLK(e->mode)) && ii->rdev != e->rdev)
		return false;
	if (S_ISLNK(e->mode)) {	/* the target is read as a file's data would be */
		size_t na = e->target ? strlen(e->target) : 0;
		if (!e->target || ii->size != na)
			return false;
		if (u->checksum || ii->mtime != e->mtime) {
			char b[4096];
			ssize_t nb = bch_fs_readlink(u->c, ii->inum, b, sizeof(b));
			if (nb < 0 || (size_t)nb != na || memcmp(e->target, b, na))
				return false;
		}
	}
	return true;
}

/* Rule (3) for an image inode with other names: is it this host file's? */
static bool claimed_by_other(struct upd *u, const struct hent *e, const struct iino *ii)
{
	if (S_ISDIR(e->mode) || ii->nlink <= 1)
		return false;
	struct pair_ent *c = pair_find(&u->claims, ii->inum, 0, true);
	if (!c->v1 && !c->v2) {
		c->v1 = e->dev;
		c->v2 = e->ino;
		return false;
	}
	return c->v1 != e->dev || c->v2 != e->ino;
}

/* match_dir's hash of a name: 8 bytes a step (a byte a step was a third of it). */
static uint64_t name_hash(const char *name)
{
	size_t len = strlen(name);
	uint64_t h = 0xcbf29ce484222325ULL ^ len, w;

	for (; len >= 8; len -= 8, name += 8) {
		memcpy(&w, name, 8);
		h = (h ^ w) * 0x9e3779b97f4a7c15ULL;
		h ^= h >> 29;
	}
	for (w = 0; len; len--)
		w = w << 8 | (unsigned char)name[len - 1];
	h = (h ^ w) * 0x9e3779b97f4a7c15ULL;
	return h ^ (h >> 32);
}

/*
 * m[a]: the entry of image directory d (NULL: none) with the name of host
 * entry h->e[a], and its inode; returns how many were found.  The image
 * directory's names go in a hash table of its own (small, so the lookups
 * stay in the cache) rather than being sorted.
 */
static size_t match_dir(struct upd *u, const struct hdir *h, const struct idir *d,
			struct imatch *m)
{
	const struct ient *ie = d ? u->img.ent + d->start : NULL;
	const char *names = u->img.names;
	size_t ni = d ? d->nr : 0, found = 0, cap = 16;

	if (!h->nr)
		return 0;
	memset(m, 0, h->nr * sizeof(*m));
	if (!ni)
		return 0;
	while (cap < ni * 2)
		cap *= 2;
	if (cap > u->tab_cap && !(u->tab = realloc(u->tab, (u->tab_cap = cap) * sizeof(*u->tab))))
		abort();
	memset(u->tab, 0, cap * sizeof(*u->tab));
	for (size_t i = 0; i < ni; i++) {
		size_t k = name_hash(names + ie[i].name) & (cap - 1);
		while (u->tab[k])
			k = (k + 1) & (cap - 1);
		u->tab[k] = i + 1;
	}
	for (size_t a = 0; a < h->nr; a++)
		for (size_t k = name_hash(h->e[a].name) & (cap - 1); u->tab[k]; k = (k + 1) & (cap - 1)) {
			const struct ient *x = &ie[u->tab[k] - 1];
			if (!strcmp(names + x->name, h->e[a].name)) {
				m[a] = (struct imatch) { .ie = x, .ii = iino_find(&u->img, x->inum) };
				found++;
				break;
			}
		}
	return found;
}

/* h's matches with image directory dir: match_ahead's, or found now (free *tmp). */
static const struct imatch *dir_matches(struct upd *u, const struct hdir *h, uint64_t dir,
					struct imatch **tmp)
{
	*tmp = NULL;
	if (h->match && h->img == dir)
		return h->match;
	if (h->nr && !(*tmp = malloc(h->nr * sizeof(**tmp))))
		abort();
	match_dir(u, h, idir_find(&u->img, dir), *tmp);
	return *tmp;
}

/*
 * Before the walk: for each host inode with several names, the image inode
 * to keep, the first (in walk order) of its names the image has as that
 * same file and no other host inode claims.
 */
static void plan_links(struct upd *u, const struct hdir *h, uint64_t dir)
{
	struct imatch *tmp;
	const struct imatch *m = dir_matches(u, h, dir, &tmp);

	for (size_t i = 0; i < h->nr; i++) {
		const struct hent *e = &h->e[i];
		const struct iino *ii = e->err ? NULL : m[i].ii;
		if (!ii)
			continue;
		if (e->sub && S_ISDIR(ii->mode)) {
			plan_links(u, e->sub, ii->inum);
			continue;
		}
		if (S_ISDIR(e->mode) || e->nlink <= 1)
			continue;
		struct pair_ent *l = pair_find(&u->links, e->dev, e->ino, true);
		if (l->v1 || !compatible(u, e, ii) || claimed_by_other(u, e, ii))
			continue;
		l->v1 = ii->inum;
	}
	free(tmp);
}

/* copy_in's link map: the kept inodes, so new names become links to them. */
static void seed_links(struct upd *u)
{
	for (size_t i = 0; i < u->links.cap; i++) {
		struct pair_ent *l = &u->links.t[i];
		if (l->used && l->v1 && l->v1 != KEEPER_NEW)
			copy_link_note(&u->x, l->k1, l->k2, l->v1);
	}
}

static int walk_dir(struct upd *u, const struct hdir *h, uint64_t dir, bool *entries);

/* One name present on the host side (rules (2) to (5)). */
static int walk_one(struct upd *u, const struct hent *e, uint64_t dir, const struct imatch *m)
{
	const char *hpath = u->hp.s, *ipath = u->ip.s;
	struct stat st = {
		.st_dev = e->dev, .st_ino = e->ino, .st_rdev = e->rdev, .st_size = e->size,
		.st_mode = e->mode, .st_uid = e->uid, .st_gid = e->gid, .st_nlink = e->nlink,
		.st_atim = ns_ts(e->atime), .st_mtim = ns_ts(e->mtime), .st_ctim = ns_ts(e->ctime),
	};
	const struct stat *hs = &st;	/* as copy.c and the setters take it */
	int r;

	if (e->err) {
		cmd_err(CMD, "reading %s: %s", hpath, strerror(-e->err));
		return e->err;
	}
	if (!m->ie) {
		report(u, '+', hpath, ipath, dir);
		return create(u, e, hpath, dir, e->name);
	}
	const struct iino *ii = m->ii;
	if (!ii)
		return upd_err(u, -EIO, "reading", ipath);

	struct pair_ent *l = !S_ISDIR(hs->st_mode) && hs->st_nlink > 1
		? pair_find(&u->links, hs->st_dev, hs->st_ino, true) : NULL;
	if (l && l->v1 == ii->inum && l->done) {	/* a second name of a file done */
		u->n.unchanged++;
		return 0;
	}
	if (l ? l->v1 != ii->inum : !compatible(u, e, ii) || claimed_by_other(u, e, ii)) {
		report(u, 'R', hpath, ipath, dir);
		u->n.replaced++;
		u->n.created--;		/* create() counts it again */
		uint64_t removed = u->n.removed;
		if ((r = remove_tree(u, dir, e->name, ipath)))
			return r;
		u->n.removed = removed;
		return create(u, e, hpath, dir, e->name);
	}
	if (l)
		l->done = true;

	bool data = false, meta = false, entries = false;
	if (e->sub && (r = walk_dir(u, e->sub, ii->inum, &entries)))
		return r;
	hpath = u->hp.s;	/* the walk below may have moved them */
	ipath = u->ip.s;
	if (S_ISREG(hs->st_mode)) {
		data = ii->size != (uint64_t)hs->st_size || ii->mtime != ts_ns(hs->st_mtim);
		if (!data && u->checksum) {
			bool same;
			if ((r = same_content(u, hpath, ii->inum, hs->st_size, &same)))
				return upd_err(u, r, "comparing", ipath);
			data = !same;
		}
		if (data) {
			u->n.written++;
			u->n.bytes_written += hs->st_size;
			if (u->write && (r = bch_fs_truncate(u->c, ii->inum, 0)))
				return upd_err(u, r, "truncating", ipath);
			if (u->write && (r = copy_in_data(&u->x, hpath, ii->inum, hs)))
				return r;
		}
	}
	/*
	 * Not asked in the scan (its ctime was some image inode's): equal to
	 * its match's, neither side has changed since the image took the
	 * host's attributes and xattrs; else asked now.
	 */
	bool same_ctime = !e->xattrs_known && ii->ctime == e->ctime, host_xattrs = e->xattrs;
	if (!e->xattrs_known && !same_ctime)
		host_xattrs = llistxattr(hpath, NULL, 0) != 0;	/* an error: compared, and reported there */
	if ((r = sync_meta_known(u, hpath, hs, host_xattrs, same_ctime, ii, ipath, data, &meta)))
		return r;
	if (data) {
		report(u, 'W', hpath, ipath, ii->inum);
	} else if (meta) {
		report(u, 'M', hpath, ipath, ii->inum);
		u->n.metadata++;
	} else {
		u->n.unchanged++;
		if (entries)	/* changing them changes its times in the image */
			report(u, 'm', hpath, ipath, ii->inum);
	}
	return 0;
}

/*
 * Rule (1) in directory dir: the names of image directory d that host
 * listing h lacks go, in name order.
 */
static int remove_missing(struct upd *u, const struct hdir *h, const struct idir *d, uint64_t dir)
{
	const char **gone = NULL;
	size_t nr = 0, cap = 0;
	int r = 0;

	for (size_t i = d->start; i < d->start + d->nr; i++) {
		const char *name = u->img.names + u->img.ent[i].name;
		/* h->e is in name order, and a hent starts with its name */
		if (h->nr && bsearch(&name, h->e, h->nr, sizeof(*h->e), name_cmp))
			continue;
		/* at the root of the filesystem, or of a snapshot of it */
		if ((dir & BCH_HANDLE_INUM_MASK) == BCH_ROOT_INO && !strcmp(name, "lost+found"))
			continue;
		GROW(gone, nr, cap);
		gone[nr++] = name;
	}
	if (nr)
		qsort(gone, nr, sizeof(*gone), name_cmp);
	for (size_t i = 0; !r && i < nr; i++) {
		size_t saved_ip = pb_push(&u->ip, gone[i]);
		report(u, '-', "", u->ip.s, dir);
		r = remove_tree(u, dir, gone[i], u->ip.s);
		pb_pop(&u->ip, saved_ip);
	}
	free(gone);
	return r;
}

/* Make the entries of image directory dir those of host directory h. */
static int walk_dir(struct upd *u, const struct hdir *h, uint64_t dir, bool *entries)
{
	const struct idir *d = idir_find(&u->img, dir);
	bool saved = u->entries;
	int r = 0;

	if (h->err) {
		cmd_err(CMD, "listing %s: %s", h->path, strerror(-h->err));
		return h->err;
	}
	u->entries = false;
	struct imatch *tmp;
	const struct imatch *m = dir_matches(u, h, dir, &tmp);
	size_t found = 0;
	for (size_t a = 0; a < h->nr; a++)
		found += !!m[a].ie;
	/* removals first, so a name is free again */
	if (d && found < d->nr)
		r = remove_missing(u, h, d, dir);
	for (size_t a = 0; !r && a < h->nr; a++) {
		size_t saved_hp = pb_push(&u->hp, h->e[a].name);
		size_t saved_ip = pb_push(&u->ip, h->e[a].name);
		r = walk_one(u, &h->e[a], dir, &m[a]);
		pb_pop(&u->hp, saved_hp);
		pb_pop(&u->ip, saved_ip);
	}
	free(tmp);
	*entries = u->entries;
	u->entries = saved;
	return r;
}

/* h's matches with its image directory h->img (the main thread, in match_ahead). */
static void match_one(struct upd *u, struct hdir *h)
{
	if (!h->nr)
		return;
	h->match = arena_alloc(&u->match_mem, h->nr * sizeof(*h->match));
	match_dir(u, h, idir_find(&u->img, h->img), h->match);
}

/*
 * The main thread while DIR is read: match each directory read whose image
 * directory is known (from its parent's match; the root's is dir), placing
 * its subdirectories in turn, so that the walk after finds its matches made
 * (that work then overlaps the reading); read directories itself when none
 * is ready.  Without match (the image's metadata could not be read) it only
 * reads.  Returns when all of DIR is read.
 */
static void match_ahead(struct upd *u, struct scan *s, struct scan_worker *w, bool match,
			uint64_t dir)
{
	pthread_mutex_lock(&s->lock);
	if (match) {
		u->host->img = dir;
		u->host->placed = true;
		if (u->host->scanned)
			host_ready_push(s, u->host);
	}
	for (;;) {
		if (s->nr_ready) {
			struct hdir *h = s->ready[--s->nr_ready];
			pthread_mutex_unlock(&s->lock);
			match_one(u, h);
			pthread_mutex_lock(&s->lock);
			for (size_t a = 0; a < h->nr; a++) {
				struct hdir *sub = h->e[a].sub;
				const struct iino *ii = h->match[a].ii;
				if (!sub || !ii || !S_ISDIR(ii->mode))
					continue;
				sub->img = ii->inum;
				sub->placed = true;
				if (sub->scanned)
					host_ready_push(s, sub);
			}
		} else if (s->nr) {
			host_scan_step(w);
		} else if (s->busy) {
			pthread_cond_wait(&s->cond, &s->lock);
		} else {
			break;
		}
	}
	pthread_mutex_unlock(&s->lock);
}

/*
 * Read DIR (worker threads, and this thread once it has read the image's
 * metadata) and match it with the image; dir: the target.
 */
static int load(struct upd *u, const char *src, uint64_t dir)
{
	struct scan s = {
		.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER, .mem = &u->host_mem,
	};
	struct scan_worker w;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned nt = ncpu < 1 ? 1 : ncpu > SCAN_THREADS ? SCAN_THREADS : ncpu, started = 0;
	pthread_t t[SCAN_THREADS];

	u->host = memset(arena_alloc(&u->host_mem, sizeof(*u->host)), 0, sizeof(*u->host));
	u->host->path = arena_join(&u->host_mem, NULL, src);
	host_scan_push(&s, u->host);
	for (unsigned i = 0; i < nt; i++)
		started += !pthread_create(&t[started], NULL, host_scan_worker, &s);
	int r = iscan_load(&u->img, u->c, dir, &s);
	host_scan_worker_init(&w, &s);
	match_ahead(u, &s, &w, !r, dir);	/* no threads: all read here */
	for (unsigned i = 0; i < started; i++)
		pthread_join(t[i], NULL);
	host_scan_worker_exit(&w);
	free(s.q);
	free(s.ready);
	if (s.ctimes)
		free(s.ctimes->t);
	free(s.ctimes);
	if (r) {
		upd_err(u, r, "reading the metadata of", "the image");
		return r;
	}
	if (s.links)
		plan_links(u, u->host, dir);
	return 0;
}

/* ------------------------------------------------------------- the verb */

static const char *change_name(char kind)
{
	switch (kind) {
	case '+': return "created";
	case '-': return "removed";
	case 'R': return "replaced";
	case 'W': return "written";
	default:  return "metadata";
	}
}

static void json_summary(struct upd *u, bool dry_run)
{
	struct bch_json j;

	json_begin(&j, stdout, false);
	json_bool(&j, "dry_run", dry_run);
	json_u64(&j, "created", u->n.created);
	json_u64(&j, "removed", u->n.removed);
	json_u64(&j, "replaced", u->n.replaced);
	json_u64(&j, "written", u->n.written);
	json_u64(&j, "metadata_only", u->n.metadata);
	json_u64(&j, "unchanged", u->n.unchanged);
	json_u64(&j, "bytes_written", u->n.bytes_written);
	json_u64(&j, "bytes_compared", u->n.bytes_compared);
	json_open(&j, "changes", true);
	for (size_t i = 0; i < u->nr_log; i++) {
		json_open(&j, NULL, false);
		json_string(&j, "change", change_name(u->log[i].kind));
		json_string(&j, "path", u->log[i].path);
		json_close(&j);
	}
	json_close(&j);
	json_end(&j);
}

/* The read-write pass: make one change the check pass found. */
static int apply_op(struct upd *u, struct op *o)
{
	const char *name = strrchr(o->ipath, '/');	/* + - R: there is one */
	uint64_t dir = o->at, inum = o->at;
	struct stat hs;
	bool changed = false;
	int r = 0;

	if (o->kind != '-' && lstat(o->hpath, &hs)) {
		r = -errno;
		cmd_err(CMD, "reading %s: %s", o->hpath, strerror(-r));
		return r;
	}
	switch (o->kind) {
	case '-': case '+': case 'R':
		name++;
		report(u, o->kind, o->hpath, o->ipath, o->at);
		if (o->kind == '-')
			return remove_tree(u, dir, name, o->ipath);
		if (o->kind == 'R') {
			uint64_t removed = u->n.removed;
			u->n.replaced++;
			u->n.created--;
			if ((r = remove_tree(u, dir, name, o->ipath)))
				return r;
			u->n.removed = removed;
		}
		return create(u, NULL, o->hpath, dir, name);
	}
	if (o->kind == 'W') {
		u->n.written++;
		u->n.bytes_written += hs.st_size;
		if ((r = bch_fs_truncate(u->c, inum, 0)))
			return upd_err(u, r, "truncating", o->ipath);
		if ((r = copy_in_data(&u->x, o->hpath, inum, &hs)))
			return r;
	}
	if ((r = sync_meta(u, o->hpath, &hs, inum, o->ipath, o->kind == 'W', &changed)))
		return r;
	if (o->kind == 'W')
		report(u, 'W', o->hpath, o->ipath, o->at);
	else if (changed || o->kind == 'M') {
		report(u, 'M', o->hpath, o->ipath, o->at);
		u->n.metadata++;
	}
	return 0;
}

static void upd_free(struct upd *u)
{
	for (size_t i = 0; i < u->nr_ops; i++) {
		free(u->ops[i].hpath);
		free(u->ops[i].ipath);
	}
	for (size_t i = 0; i < u->nr_log; i++)
		free(u->log[i].path);
	free(u->log);
	free(u->ops);
	copy_ctx_exit(&u->x);
	free(u->cmp_buf);
	iscan_free(&u->img);
	arena_free(&u->host_mem);
	arena_free(&u->match_mem);
	free(u->hp.s);
	free(u->ip.s);
	free(u->tab);
	free(u->links.t);
	free(u->claims.t);
	free(u);
}

/* The read-write pass after a check pass: only the changes it found. */
static int apply_ops(struct upd *u, struct bch_fs *c)
{
	uint64_t unchanged = u->n.unchanged, compared = u->n.bytes_compared;
	int r = 0;

	u->c = c;
	u->write = true;
	u->record = false;
	u->out = true;
	copy_ctx_exit(&u->x);
	if (copy_ctx_init(&u->x, c, CMD))
		abort();
	seed_links(u);
	memset(&u->n, 0, sizeof(u->n));
	u->n.unchanged = unchanged;
	u->n.bytes_compared = compared;
	for (size_t i = 0; !r && i < u->nr_ops; i++)
		r = apply_op(u, &u->ops[i]);
	return r;
}

/*
 * --subvolume NAME: the root of the subvolume at path NAME (from the
 * filesystem's root; a bare name is one at the root, as format --subvolume
 * makes it), then dst inside it: *path, the target's path in the image.
 */
static int subvol_target(struct upd *u, const char *name, const char *dst, char **path)
{
	uint64_t h;
	const char *slash = name[0] == '/' ? "" : "/";
	int r = bch_fs_lookup_path(u->c, name, true, &h);

	if (r) {
		cmd_err(CMD, "--subvolume %s: %s", name, strerror(-r));
		return r;
	}
	const struct bch_subvol_info *sv = bch_subvol_get(u->c, bch_fs_subvol_of(h));
	if (!sv || sv->v.root_inum != (h & BCH_HANDLE_INUM_MASK)) {
		cmd_err(CMD, "--subvolume %s: not a subvolume", name);
		return -EINVAL;
	}
	size_t n = strlen(name);
	while (n > 1 && name[n - 1] == '/')
		n--;
	dst += strspn(dst, "/");
	if (asprintf(path, "%s%.*s%s%s", slash, (int)n, name, *dst ? "/" : "", dst) < 0)
		abort();
	return 0;
}

/* Check pass, dry run, or the one pass: compare the trees (and change the image). */
static int walk(struct upd *u, const char *src, const char *dst)
{
	uint64_t dir;
	struct stat st;
	int r = bch_fs_lookup_path(u->c, dst, true, &dir);

	if (!r && !(r = bch_fs_getattr(u->c, dir, &st)) && !S_ISDIR(st.st_mode))
		r = -ENOTDIR;
	if (r)
		return upd_err(u, r, "finding", dst);
	/*
	 * A tree in a read-only snapshot refuses on the check pass, before the
	 * read-write open (--dry-run only compares: it may look).
	 */
	if ((u->write || u->record) && (r = bch_subvol_writable(u->c, dir))) {
		cmd_err(CMD, "%s: %s (a read-only snapshot: nothing written)", dst, strerror(-r));
		return r;
	}
	if ((r = load(u, src, dir)))
		return r;
	if (u->write)
		seed_links(u);
	pb_set(&u->hp, src);
	pb_set(&u->ip, dst);

	bool entries = false, meta = false;
	if ((r = walk_dir(u, u->host, dir, &entries)))
		return r;
	if (lstat(src, &st)) {
		r = -errno;
		cmd_err(CMD, "reading %s: %s", src, strerror(-r));
		return r;
	}
	if (!(r = sync_meta(u, src, &st, dir, dst, false, &meta)) && (meta || entries)) {
		report(u, meta ? 'M' : 'm', src, u->ip.s, dir);
		u->n.metadata += meta;
	}
	return r;
}

void cmd_image_update_priv_free(void *priv)
{
	if (priv)
		upd_free(priv);
}

int cmd_image_update(struct bch_fs *c, bool check_only, bool json, void **priv, int argc,
		     char **argv)
{
	static const struct option lo[] = {
		{ "checksum",	no_argument, NULL, 'c' },
		{ "dry-run",	no_argument, NULL, 'n' },
		{ "subvolume",	required_argument, NULL, 's' },
		{ NULL }
	};
	bool checksum = false, dry_run = false;
	const char *subvol = NULL;
	int o;

	while ((o = getopt_long(argc, argv, "+cn", lo, NULL)) != -1)
		switch (o) {
		case 'c': checksum = true; break;
		case 'n': dry_run = true; break;
		case 's': subvol = optarg; break;
		default: return cmd_opt_err(CMD, argv, "+cn");
		}
	argc -= optind - 1;
	argv += optind - 1;
	if (argc < 2 || argc > 3)
		return EXIT_USAGE;
	const char *src = argv[1], *dst = argc == 3 ? argv[2] : "/";
	if (!c) {	/* before the open: DIR must be a directory */
		struct stat st;
		if (subvol && !*subvol) {
			cmd_err(CMD, "--subvolume needs a name");
			return EXIT_USAGE;
		}
		if (stat(src, &st)) {
			cmd_err(CMD, "%s: %s", src, strerror(errno));
			return EXIT_FAIL;
		}
		if (!S_ISDIR(st.st_mode)) {
			cmd_err(CMD, "%s: not a directory", src);
			return EXIT_FAIL;
		}
		return EXIT_OK;
	}
	/*
	 * The check pass walks writing nothing and notes the changes; the
	 * read-write pass makes only those (*priv carries them across).  With
	 * --dry-run the check pass prints and is the only one; with -o
	 * read_only there is no check pass and the one walk does everything.
	 */
	struct upd *u = priv ? *priv : NULL;
	bool last = !check_only || dry_run;
	int r;
	if (u && !check_only) {
		*priv = NULL;
		u->json = json;
		r = apply_ops(u, c);
		goto done;
	}
	if (!(u = calloc(1, sizeof(*u))) || !(u->cmp_buf = malloc(CMP_BUF)))
		abort();
	u->c = c;
	u->checksum = checksum;
	u->json = json;
	u->write = !check_only && !dry_run;
	u->out = last;
	u->record = check_only && !dry_run && priv;
	if (copy_ctx_init(&u->x, c, CMD))
		abort();
	char *target = NULL;
	if (!(r = subvol ? subvol_target(u, subvol, dst, &target) : 0))
		r = walk(u, src, target ? target : dst);
	free(target);
	if (!r && u->record && u->nr_ops) {
		/* for the read-write pass; the trees are no longer needed */
		iscan_free(&u->img);
		arena_free(&u->host_mem);
		arena_free(&u->match_mem);
		u->host = NULL;
		*priv = u;
		return EXIT_OK;
	}
	if (!r && u->record)	/* nothing differs: no read-write open at all */
		last = true;
done:
	if (!r && json && last)
		json_summary(u, dry_run);
	upd_free(u);
	if (r)
		return EXIT_FAIL;
	/* done on the read-only pass: EXIT_IMAGE_DONE makes it the last */
	return check_only && last ? EXIT_IMAGE_DONE : EXIT_OK;
}
