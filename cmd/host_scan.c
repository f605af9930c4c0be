// SPDX-License-Identifier: GPL-2.0
/*
 * host_scan.c - image update's reading of the host directory (host_scan.h
 * says what it keeps and how its threads share it).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "host_scan.h"

#define DENTS_BUF	(64U << 10)	/* getdents64: most directories in one call */

#if !defined(SYS_listxattrat) && (defined(__x86_64__) || defined(__aarch64__) || defined(__riscv))
#define SYS_listxattrat	465		/* Linux 6.13; the same number on these */
#endif

/* ------------------------------------------------------------ pair map */

static uint64_t mix(uint64_t a, uint64_t b)
{
	uint64_t h = a * 0x9e3779b97f4a7c15ULL ^ (b + 0x632be59bd9b4e019ULL);
	return h ^ (h >> 31);
}

struct pair_ent *pair_find(struct pair_map *m, uint64_t k1, uint64_t k2, bool add)
{
	if (add && (m->nr + 1) * 2 > m->cap) {
		struct pair_map n = { .cap = m->cap ? m->cap * 2 : 256 };
		if (!(n.t = calloc(n.cap, sizeof(*n.t))))
			abort();
		for (size_t i = 0; i < m->cap; i++)
			if (m->t[i].used)
				*pair_find(&n, m->t[i].k1, m->t[i].k2, true) = m->t[i];
		free(m->t);
		*m = n;
	}
	if (!m->cap)
		return NULL;
	for (size_t i = mix(k1, k2) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		struct pair_ent *e = &m->t[i];
		if (e->used && e->k1 == k1 && e->k2 == k2)
			return e;
		if (!e->used) {
			if (!add)
				return NULL;
			*e = (struct pair_ent) { .k1 = k1, .k2 = k2, .used = true };
			m->nr++;
			return e;
		}
	}
}

/* --------------------------------------------------------------- arena */

void *arena_alloc(struct arena *a, size_t n)
{
	struct arena_chunk *c = a->head;

	n = (n + 15) & ~(size_t)15;
	if (!c || c->used + n > c->cap) {
		size_t cap = n > ARENA_CHUNK ? n : ARENA_CHUNK;
		if (!(c = malloc(sizeof(*c) + cap)))
			abort();
		c->next = a->head;
		c->used = 0;
		c->cap = cap;
		a->head = c;
	}
	void *p = c->data + c->used;
	c->used += n;
	return p;
}

char *arena_join(struct arena *a, const char *dir, const char *name)
{
	size_t dl = dir ? strlen(dir) : 0, nl = strlen(name);
	char *p = arena_alloc(a, dl + nl + 2);
	if (dir) {
		memcpy(p, dir, dl);
		p[dl++] = '/';
	}
	memcpy(p + dl, name, nl + 1);
	return p;
}

/* Move b's chunks to a. */
void arena_splice(struct arena *a, struct arena *b)
{
	struct arena_chunk **end = &b->head;
	while (*end)
		end = &(*end)->next;
	*end = a->head;
	a->head = b->head;
	b->head = NULL;
}

void arena_free(struct arena *a)
{
	for (struct arena_chunk *c = a->head, *n; c; c = n) {
		n = c->next;
		free(c);
	}
	a->head = NULL;
}

/* ------------------------------------------------------------ the scan */

char *host_join(const char *a, const char *b)
{
	char *p;
	if (asprintf(&p, "%s/%s", a, b) < 0)
		abort();
	return p;
}

void host_scan_push(struct scan *s, struct hdir *d)
{
	GROW(s->q, s->nr, s->cap);
	s->q[s->nr++] = d;
}

/* Under the lock: d is read and its image directory known, to be matched. */
void host_ready_push(struct scan *s, struct hdir *d)
{
	GROW(s->ready, s->nr_ready, s->cap_ready);
	s->ready[s->nr_ready++] = d;
}

/* Has dirfd/name any xattr?  listxattrat where the kernel has it. */
static bool has_xattrs(int dirfd, const char *dirpath, const char *name)
{
	ssize_t n = -1;
#ifdef SYS_listxattrat
	static int no_at;
	if (!__atomic_load_n(&no_at, __ATOMIC_RELAXED)) {
		n = syscall(SYS_listxattrat, dirfd, name, AT_SYMLINK_NOFOLLOW, NULL, 0);
		if (n < 0 && (errno == ENOSYS || errno == EINVAL))
			__atomic_store_n(&no_at, 1, __ATOMIC_RELAXED);
		else
			return n > 0;
	}
#else
	(void)dirfd;
#endif
	char *p = host_join(dirpath, name);
	n = llistxattr(p, NULL, 0);
	free(p);
	return n > 0;
}

static int open_dir(int at, const char *path)
{
	int fd = openat(at, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NOATIME);
	if (fd < 0 && errno == EPERM)
		fd = openat(at, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd;
}

/* lstat, xattr presence and link target of dirfd/e->name into e. */
static void scan_one(struct scan_worker *w, int fd, const char *dirpath, struct hent *e)
{
	struct stat st;

	if (fstatat(fd, e->name, &st, AT_SYMLINK_NOFOLLOW)) {
		e->err = -errno;
		return;
	}
	e->dev = st.st_dev;
	e->ino = st.st_ino;
	e->rdev = st.st_rdev;
	e->size = st.st_size;
	e->atime = ts_ns(st.st_atim);
	e->mtime = ts_ns(st.st_mtim);
	e->mode = st.st_mode;
	e->uid = st.st_uid;
	e->gid = st.st_gid;
	e->nlink = st.st_nlink;
	e->ctime = ts_ns(st.st_ctim);
	struct pair_map *cts = __atomic_load_n(&w->s->ctimes, __ATOMIC_ACQUIRE);
	/* a whole second is not trusted: second-granular host, SOURCE_DATE_EPOCH */
	if (!cts || !(e->ctime % 1000000000) || !pair_find(cts, e->ctime, 0, false)) {
		e->xattrs = has_xattrs(fd, dirpath, e->name);
		e->xattrs_known = true;
	}
	if (S_ISLNK(e->mode)) {
		char t[4096];
		ssize_t n = readlinkat(fd, e->name, t, sizeof(t) - 1);
		if (n >= 0) {
			t[n] = 0;
			e->target = arena_join(&w->mem, NULL, t);
		}
	}
	if (!S_ISDIR(e->mode) && e->nlink > 1)
		__atomic_store_n(&w->s->links, true, __ATOMIC_RELAXED);
}

/* A name's first 8 bytes (0 after its end) as a number that sorts as strcmp does. */
static uint64_t name_key(const char *name)
{
	uint64_t k = 0;
	unsigned i = 0;
	for (; i < 8 && name[i]; i++)
		k = k << 8 | (unsigned char)name[i];
	return i ? k << 8 * (8 - i) : 0;
}

static inline bool slot_name_less(const struct slot *x, const struct slot *y)
{
	return x->key != y->key ? x->key < y->key : strcmp(x->name, y->name) < 0;
}

static inline bool slot_ino_less(const struct slot *x, const struct slot *y)
{
	return x->ino < y->ino;
}

/*
 * fn(a, tmp, n): merge sort of n slots by less, tmp holding n / 2.  Not
 * qsort: its comparison through a pointer and its generic copies made the
 * sorts a fifth of the walk's user time (81k names, 18k in one directory).
 */
#define SLOT_SORT(fn, less)						\
static void fn(struct slot *a, struct slot *tmp, size_t n)		\
{									\
	if (n <= 12) {		/* insertion sort */			\
		for (size_t i = 1; i < n; i++) {			\
			struct slot x = a[i];				\
			size_t j = i;					\
			for (; j && less(&x, &a[j - 1]); j--)		\
				a[j] = a[j - 1];			\
			a[j] = x;					\
		}							\
		return;							\
	}								\
	size_t m = n / 2, i = 0, j = m, k = 0;				\
	fn(a, tmp, m);							\
	fn(a + m, tmp, n - m);						\
	if (!less(&a[m], &a[m - 1]))					\
		return;		/* the halves are in order already */	\
	/* the left half to tmp, merged back: a[k] never passes a[j] */	\
	memcpy(tmp, a, m * sizeof(*a));					\
	while (i < m && j < n)						\
		a[k++] = less(&a[j], &tmp[i]) ? a[j++] : tmp[i++];	\
	memcpy(a + k, tmp + i, (m - i) * sizeof(*a));			\
}
SLOT_SORT(sort_by_name, slot_name_less)
SLOT_SORT(sort_by_ino, slot_ino_less)

/*
 * The names of directory fd into w->tmp (getdents64 straight into one
 * buffer per worker: no DIR, so no fstat, fcntl and malloc per directory).
 * Returns how many, or -errno.
 */
static ssize_t list_names(struct scan_worker *w, int fd)
{
	size_t nr = 0;

	for (;;) {
		ssize_t n = getdents64(fd, w->dents, DENTS_BUF);
		if (n < 0)
			return -errno;
		if (!n)
			return nr;
		for (ssize_t o = 0; o < n;) {
			struct dirent64 *de = (struct dirent64 *)(w->dents + o);
			o += de->d_reclen;
			if (de->d_name[0] == '.' && (!de->d_name[1] ||
			    (de->d_name[1] == '.' && !de->d_name[2])))
				continue;
			GROW(w->tmp, nr, w->cap);
			w->tmp[nr++] = (struct slot) {
				.key = name_key(de->d_name), .ino = de->d_ino,
				.name = arena_join(&w->mem, NULL, de->d_name),
			};
		}
	}
}

/*
 * Read directory d whole: names, then lstat, xattr presence and link
 * targets in inode order (the inode table is then read in order when it is
 * not cached), kept in name order (the walk's).  The sorts move small
 * slots, not the entries.
 */
static void scan_dir(struct scan_worker *w, struct hdir *d)
{
	int fd = open_dir(AT_FDCWD, d->path);
	ssize_t nr = fd < 0 ? -errno : list_names(w, fd);

	if (nr < 0) {
		d->err = nr;
		if (fd >= 0)
			close(fd);
		return;
	}
	if (nr) {
		if (w->half_cap < (size_t)nr / 2 &&
		    !(w->half = realloc(w->half, (w->half_cap = nr) * sizeof(*w->half))))
			abort();
		sort_by_name(w->tmp, w->half, nr);
		d->e = memset(arena_alloc(&w->mem, nr * sizeof(*d->e)), 0, nr * sizeof(*d->e));
		for (ssize_t i = 0; i < nr; i++) {
			d->e[i].name = w->tmp[i].name;
			w->tmp[i].idx = i;
		}
		sort_by_ino(w->tmp, w->half, nr);
	}
	d->nr = nr;
	for (ssize_t i = 0; i < nr; i++)
		scan_one(w, fd, d->path, &d->e[w->tmp[i].idx]);
	close(fd);
	for (size_t i = 0; i < d->nr; i++) {
		struct hent *e = &d->e[i];
		if (e->err || !S_ISDIR(e->mode))
			continue;
		e->sub = memset(arena_alloc(&w->mem, sizeof(*e->sub)), 0, sizeof(*e->sub));
		e->sub->path = arena_join(&w->mem, d->path, e->name);
	}
}

/* With the lock held and s->nr > 0: read the next directory (unlocked). */
void host_scan_step(struct scan_worker *w)
{
	struct scan *s = w->s;
	struct hdir *d = s->q[--s->nr];

	s->busy++;
	pthread_mutex_unlock(&s->lock);
	scan_dir(w, d);
	pthread_mutex_lock(&s->lock);
	for (size_t i = d->nr; i--;)	/* the first name's on top */
		if (d->e[i].sub)
			host_scan_push(s, d->e[i].sub);
	d->scanned = true;
	if (d->placed)
		host_ready_push(s, d);
	s->busy--;
	pthread_cond_broadcast(&s->cond);
}

void host_scan_worker_init(struct scan_worker *w, struct scan *s)
{
	*w = (struct scan_worker) { .s = s };
	if (!(w->dents = malloc(DENTS_BUF)))
		abort();
}

/* With the lock held, or alone: its memory to the listing's, the rest freed. */
void host_scan_worker_exit(struct scan_worker *w)
{
	arena_splice(w->s->mem, &w->mem);
	free(w->tmp);
	free(w->half);
	free(w->dents);
}

void *host_scan_worker(void *arg)
{
	struct scan_worker w;
	struct scan *s = arg;

	host_scan_worker_init(&w, s);
	pthread_mutex_lock(&s->lock);
	for (;;) {
		while (!s->nr && s->busy)
			pthread_cond_wait(&s->cond, &s->lock);
		if (!s->nr)
			break;
		host_scan_step(&w);
	}
	host_scan_worker_exit(&w);
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return NULL;
}
