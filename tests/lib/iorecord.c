// SPDX-License-Identifier: GPL-2.0
/*
 * iorecord.c - the write/flush recorder and power-cut images of iorecord.h.
 *
 * Recording appends to one event array under a mutex, so events from
 * several devices (and threads) get one global issue order.  Planning walks
 * that array twice: once to find each device's last flush before the cut,
 * once to decide every write.  Images replay the plan onto the base copy.
 * Following (iorec_follow()) matches each read-write open against the
 * followed files by inode, through the process-wide bch_dev_on_open().
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "iorecord.h"

#define SECTOR	512

struct iorec;

struct iorec_dev {
	struct iorec		*r;		/* back pointer for the hook */
	unsigned		idx;
	struct bch_blockdev	*bdev;		/* NULL when detached */
	void			*base;		/* contents at attach */
	size_t			base_len;
	bool			attached_once;
	bool			follow;		/* iorec_follow(): hook every open of the file */
	dev_t			st_dev;
	ino_t			st_ino;
};

struct iorec {
	pthread_mutex_t		lock;
	unsigned		nr_devs;
	struct iorec_dev	*devs;
	struct iorec_event	*ev;
	size_t			nr, size;
};

/* ------------------------------------------------------------- recording */

static int append(struct iorec *r, const struct iorec_event *e)
{
	if (r->nr == r->size) {
		size_t size = r->size ? r->size * 2 : 64;
		struct iorec_event *ev = realloc(r->ev, size * sizeof(*ev));

		if (!ev)
			return -ENOMEM;
		r->ev = ev;
		r->size = size;
	}
	r->ev[r->nr++] = *e;
	return 0;
}

/*
 * The bch_io_hook: copy the write (or note the flush) and let it proceed.
 * If the copy cannot be made, fail the I/O: a recording with a hole would
 * make every later image wrong.
 */
static int record_hook(void *priv, struct bch_blockdev *bdev, enum bch_io_op op,
		       uint64_t offset, const void *buf, size_t len)
{
	struct iorec_dev *d = priv;
	struct iorec_event e = {
		.type	= op == BCH_IO_WRITE ? IOREC_WRITE : IOREC_FLUSH,
		.dev	= d->idx,
	};
	void *copy = NULL;
	int ret;

	(void)bdev;
	if (e.type == IOREC_WRITE) {
		copy = malloc(len ? len : 1);
		if (!copy)
			return -ENOMEM;
		memcpy(copy, buf, len);
		e.offset = offset;
		e.len = len;
		e.data = copy;
	}

	pthread_mutex_lock(&d->r->lock);
	ret = append(d->r, &e);
	pthread_mutex_unlock(&d->r->lock);
	if (ret)
		free(copy);
	return ret;
}

struct iorec *iorec_new(unsigned nr_devs)
{
	struct iorec *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->devs = calloc(nr_devs ? nr_devs : 1, sizeof(*r->devs));
	if (!r->devs) {
		free(r);
		return NULL;
	}
	pthread_mutex_init(&r->lock, NULL);
	r->nr_devs = nr_devs;
	for (unsigned i = 0; i < nr_devs; i++) {
		r->devs[i].r = r;
		r->devs[i].idx = i;
	}
	return r;
}

void iorec_free(struct iorec *r)
{
	if (!r)
		return;
	iorec_unfollow(r);
	for (unsigned i = 0; i < r->nr_devs; i++) {
		iorec_detach(r, i);
		free(r->devs[i].base);
	}
	for (size_t i = 0; i < r->nr; i++)
		free((void *)r->ev[i].data);
	pthread_mutex_destroy(&r->lock);
	free(r->ev);
	free(r->devs);
	free(r);
}

int iorec_attach(struct iorec *r, unsigned idx, struct bch_blockdev *bdev)
{
	struct iorec_dev *d;
	uint64_t size = bch_dev_size(bdev);
	int ret;

	if (idx >= r->nr_devs || r->devs[idx].attached_once || size > SIZE_MAX)
		return -EINVAL;
	d = &r->devs[idx];
	d->base = malloc(size ? size : 1);
	if (!d->base)
		return -ENOMEM;
	if ((ret = bch_dev_read(bdev, d->base, size, 0))) {
		free(d->base);
		d->base = NULL;
		return ret;
	}
	d->base_len = size;
	d->bdev = bdev;
	d->attached_once = true;
	bch_dev_set_hook(bdev, &(struct bch_io_hook) { record_hook, d });
	return 0;
}

void iorec_detach(struct iorec *r, unsigned idx)
{
	if (idx < r->nr_devs && r->devs[idx].bdev) {
		bch_dev_set_hook(r->devs[idx].bdev, NULL);
		r->devs[idx].bdev = NULL;
	}
}

/* ------------------------------------------------------------- following */

/* The recorder following files (one at a time: bch_dev_on_open() is process-wide). */
static struct iorec *following;
static pthread_mutex_t following_lock = PTHREAD_MUTEX_INITIALIZER;

static void follow_open(struct bch_blockdev *bdev)
{
	struct stat st;

	if (bch_dev_is_rdonly(bdev) || fstat(bch_dev_fd(bdev), &st))
		return;
	pthread_mutex_lock(&following_lock);
	struct iorec *r = following;
	for (unsigned i = 0; r && i < r->nr_devs; i++) {
		struct iorec_dev *d = &r->devs[i];
		if (d->follow && d->st_dev == st.st_dev && d->st_ino == st.st_ino) {
			bch_dev_set_hook(bdev, &(struct bch_io_hook) { record_hook, d });
			break;
		}
	}
	pthread_mutex_unlock(&following_lock);
}

int iorec_follow(struct iorec *r, unsigned idx, const char *path)
{
	struct stat st;

	if (idx >= r->nr_devs || !r->devs[idx].attached_once)
		return -EINVAL;
	if (stat(path, &st))
		return -errno;
	pthread_mutex_lock(&following_lock);
	if (following && following != r) {
		pthread_mutex_unlock(&following_lock);
		return -EBUSY;
	}
	struct iorec_dev *d = &r->devs[idx];
	d->st_dev = st.st_dev;
	d->st_ino = st.st_ino;
	d->follow = true;
	d->bdev = NULL;		/* may be closed by whoever opened it: not ours to touch */
	following = r;
	bch_dev_on_open(follow_open);
	pthread_mutex_unlock(&following_lock);
	return 0;
}

void iorec_unfollow(struct iorec *r)
{
	pthread_mutex_lock(&following_lock);
	for (unsigned i = 0; i < r->nr_devs; i++)
		r->devs[i].follow = false;
	if (following == r) {
		following = NULL;
		bch_dev_on_open(NULL);
	}
	pthread_mutex_unlock(&following_lock);
}

size_t iorec_nr_events(const struct iorec *r)
{
	return r->nr;
}

const struct iorec_event *iorec_event(const struct iorec *r, size_t i)
{
	return i < r->nr ? &r->ev[i] : NULL;
}

/* -------------------------------------------------------------- planning */

/* splitmix64: small, deterministic, and every seed (even 0) works. */
static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Uniform in [0, n), n > 0; the modulo bias is irrelevant at test sizes. */
static uint64_t rng_below(uint64_t *s, uint64_t n)
{
	return rng_next(s) % n;
}

/* Sector boundaries strictly inside a write: the places it can tear. */
static uint64_t tear_points(const struct iorec_event *e)
{
	uint64_t first = (e->offset / SECTOR + 1) * SECTOR;
	uint64_t end = e->offset + e->len;

	return first < end ? (end - 1 - first) / SECTOR + 1 : 0;
}

/*
 * Index one past the last flush of each device in [0, at); writes before
 * it are durable (rule 1).  0 means the device was never flushed.
 */
static int durable_limits(const struct iorec *r, size_t at, size_t **limits)
{
	size_t *lim = calloc(r->nr_devs ? r->nr_devs : 1, sizeof(*lim));

	if (!lim)
		return -ENOMEM;
	for (size_t i = 0; i < at; i++)
		if (r->ev[i].type == IOREC_FLUSH)
			lim[r->ev[i].dev] = i + 1;
	*limits = lim;
	return 0;
}

/* Rule 3: pick one kept unflushed write with a tear point, and the point. */
static void plan_tear(const struct iorec *r, struct iorec_plan *p,
		      const bool *unflushed, uint64_t *rng)
{
	size_t candidates = 0, pick;

	for (size_t i = 0; i < p->at; i++)
		candidates += unflushed[i] && p->bytes[i] && tear_points(&r->ev[i]);
	if (!candidates)
		return;

	pick = rng_below(rng, candidates);
	for (size_t i = 0; i < p->at; i++) {
		const struct iorec_event *e = &r->ev[i];

		if (!(unflushed[i] && p->bytes[i] && tear_points(e)) || pick--)
			continue;
		uint64_t first = (e->offset / SECTOR + 1) * SECTOR;
		uint64_t tear = first + rng_below(rng, tear_points(e)) * SECTOR;

		p->bytes[i] = tear - e->offset;
		p->torn_event = i;
		return;
	}
}

int iorec_plan(const struct iorec *r, const struct iorec_cut *cut,
	       struct iorec_plan *p)
{
	uint64_t rng = cut->seed;
	bool *unflushed = NULL;
	size_t *limit = NULL;
	int ret;

	memset(p, 0, sizeof(*p));
	p->torn_event = SIZE_MAX;
	if (cut->at > r->nr || cut->keep_pct > 100)
		return -EINVAL;
	p->at = cut->at;
	p->bytes = calloc(cut->at ? cut->at : 1, sizeof(*p->bytes));
	unflushed = calloc(cut->at ? cut->at : 1, sizeof(*unflushed));
	if (!p->bytes || !unflushed || (ret = durable_limits(r, cut->at, &limit))) {
		ret = -ENOMEM;
		goto out;
	}

	for (size_t i = 0; i < cut->at; i++) {
		const struct iorec_event *e = &r->ev[i];

		if (e->type != IOREC_WRITE)
			continue;
		if (i < limit[e->dev]) {
			p->bytes[i] = e->len;
			p->nr_durable++;
			continue;
		}
		unflushed[i] = true;
		p->nr_unflushed++;
		/* Draw for every unflushed write so plans differ only by seed. */
		if (rng_below(&rng, 100) < cut->keep_pct) {
			p->bytes[i] = e->len;
			p->nr_kept++;
		}
	}
	if (cut->torn)
		plan_tear(r, p, unflushed, &rng);
	ret = 0;
out:
	free(unflushed);
	free(limit);
	if (ret)
		iorec_plan_free(p);
	return ret;
}

void iorec_plan_free(struct iorec_plan *p)
{
	free(p->bytes);
	p->bytes = NULL;
	p->at = 0;
}

char *iorec_plan_describe(const struct iorec *r, const struct iorec_plan *p)
{
	size_t *limit, size = 0;
	char *s = NULL;
	FILE *f;

	if (durable_limits(r, p->at, &limit))
		return NULL;
	f = open_memstream(&s, &size);
	if (!f) {
		free(limit);
		return NULL;
	}
	for (size_t i = 0; i < p->at; i++) {
		const struct iorec_event *e = &r->ev[i];

		if (e->type == IOREC_FLUSH) {
			fprintf(f, "#%zu dev %u flush\n", i, e->dev);
			continue;
		}
		fprintf(f, "#%zu dev %u off %llu len %zu: ", i, e->dev,
			(unsigned long long)e->offset, e->len);
		if (i == p->torn_event)
			fprintf(f, "torn at %zu\n", p->bytes[i]);
		else if (i < limit[e->dev])
			fprintf(f, "durable\n");
		else
			fprintf(f, "%s\n", p->bytes[i] ? "kept" : "lost");
	}
	fclose(f);
	free(limit);
	return s;
}

/* ---------------------------------------------------------------- images */

/* Image length: the base, or more if a recorded write reached past it. */
static size_t image_len(const struct iorec *r, unsigned idx)
{
	size_t len = r->devs[idx].base_len;

	for (size_t i = 0; i < r->nr; i++) {
		const struct iorec_event *e = &r->ev[i];

		if (e->type == IOREC_WRITE && e->dev == idx && e->offset + e->len > len)
			len = e->offset + e->len;
	}
	return len;
}

int iorec_image(const struct iorec *r, const struct iorec_plan *p,
		unsigned idx, void **img, size_t *lenp)
{
	size_t len;
	char *buf;

	*img = NULL;
	if (idx >= r->nr_devs || !r->devs[idx].attached_once)
		return -EINVAL;
	len = image_len(r, idx);
	buf = calloc(1, len ? len : 1);
	if (!buf)
		return -ENOMEM;
	memcpy(buf, r->devs[idx].base, r->devs[idx].base_len);

	for (size_t i = 0; i < p->at; i++) {
		const struct iorec_event *e = &r->ev[i];

		if (e->type == IOREC_WRITE && e->dev == idx && p->bytes[i])
			memcpy(buf + e->offset, e->data, p->bytes[i]);
	}
	*img = buf;
	*lenp = len;
	return 0;
}

static int write_all(int fd, const char *p, size_t len)
{
	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p += n;
		len -= n;
	}
	return 0;
}

/*
 * Write len bytes of p as a file of that size whose all-zero 4 KiB blocks are
 * left as holes: the same bytes when read, at a fraction of the cost for
 * crash images that are mostly empty (each cut writes one).
 */
static int write_sparse(int fd, const char *p, size_t len)
{
	static const char zero[4096];
	size_t at = 0;

	if (ftruncate(fd, len))
		return -errno;
	while (at < len) {
		size_t n = len - at < sizeof(zero) ? len - at : sizeof(zero);
		size_t end = at;

		if (!memcmp(p + at, zero, n)) {
			at += n;
			continue;
		}
		/* a run of blocks with data */
		while (end < len) {
			size_t m = len - end < sizeof(zero) ? len - end : sizeof(zero);

			if (end > at && !memcmp(p + end, zero, m))
				break;
			end += m;
		}
		if (lseek(fd, at, SEEK_SET) < 0)
			return -errno;
		int ret = write_all(fd, p + at, end - at);
		if (ret)
			return ret;
		at = end;
	}
	return 0;
}

int iorec_write_image(const struct iorec *r, const struct iorec_plan *p,
		      unsigned idx, const char *path)
{
	void *img;
	size_t len;
	int fd, ret;

	if ((ret = iorec_image(r, p, idx, &img, &len)))
		return ret;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		ret = -errno;
		goto out;
	}
	ret = write_sparse(fd, img, len);
	if (close(fd) && !ret)
		ret = -errno;
out:
	free(img);
	return ret;
}
