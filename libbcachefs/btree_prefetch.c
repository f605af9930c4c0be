// SPDX-License-Identifier: GPL-2.0
/*
 * btree_prefetch.c - btree nodes read ahead on a second thread (see
 * btree_prefetch.h).
 *
 * A scan that knows which nodes it reads next (fsck pass 3: the next
 * children of the interior node it walks; the key cursors of passes 5 to
 * 10: the leaves after the one they hold) queues their pointers here.  A
 * worker thread reads each one's first copy into a node arena, exactly
 * what the read path would read (parse_one() in btree_io.c: what the parent
 * says was written plus a block, or 64 KiB), and, while fsck pass 3 still
 * compares copies, the second copy too, and compares them as
 * copies_identical() would.  The read path takes the arena from here
 * instead of reading (bch_prefetch_take()), and waits for one being read;
 * anything not queued, or of another length, it reads itself as before.
 * So the second core does the system calls, the copying out of the page
 * cache and the comparing, and the first one parses and checks.
 *
 * Invariants
 *   (1) Only on a filesystem opened read-only: nothing writes a node while
 *       its bytes wait here, so they are what a read would return.
 *   (2) The bytes are only bytes: everything is verified by the read path
 *       as if it had read them (checksum, identity, keys).  A failed read
 *       here is a miss: the read path reads again and reports what it gets.
 *   (3) Locking: one mutex guards the slots; the worker holds it only to
 *       pick a slot and to publish what it read, never across I/O.  The
 *       worker touches nothing of the filesystem but the devices (their
 *       reads count atomically) and sizes copied when the slot was queued.
 *
 * Memory: at most PF_SLOTS nodes' bytes wait here (a slot read ahead and
 * never taken, its node found in the cache meanwhile, is reused first).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bcachefs.h"
#include "blockdev.h"
#include "btree.h"
#include "btree_prefetch.h"
#include "super.h"

#define PF_SLOTS	3

enum pf_state { PF_FREE, PF_QUEUED, PF_READING, PF_READY };

struct pf_slot {
	enum pf_state		state;
	uint64_t		seq;		/* queue order: the oldest is read first */
	struct bch_blockdev	*bdev[2];
	struct bch_extent_ptr	ptr[2];		/* the copy to read, the one to compare (compare) */
	size_t			len;		/* bytes of the first copy */
	size_t			written;	/* compare: bytes the copies must share (0: none) */
	size_t			bytes;		/* ... and the block after them (zeros) */
	void			*buf;		/* PF_READY: a node arena of len bytes */
	int			err;
	int			same;		/* 1, 0, -1 not compared */
};

struct bch_prefetch {
	pthread_t		thread;
	pthread_mutex_t		lock;
	pthread_cond_t		work;		/* a slot was queued, or stop */
	pthread_cond_t		ready;		/* a slot was read */
	bool			stop;
	uint64_t		seq;
	struct pf_slot		slot[PF_SLOTS];
	/* the copies of the node last taken, as compared (bch_prefetch_same()) */
	struct bch_extent_ptr	last[2];
	size_t			last_written;
	int			last_same;
};

static bool ptr_eq(const struct bch_extent_ptr *a, const struct bch_extent_ptr *b)
{
	return a->dev == b->dev && a->offset == b->offset;
}

static struct bch_blockdev *ptr_bdev(struct bch_fs *c, const struct bch_extent_ptr *p)
{
	struct bch_dev *ca = p->dev < BCH_SB_MEMBERS_MAX ? c->devs[p->dev] : NULL;

	return ca ? ca->bdev : NULL;
}

/*
 * As copies_identical() (btree_io.c): does the second copy hold the bytes
 * of the first (buf) over what was written, then a block of zeros?  Read
 * a piece at a time (no second node's worth of memory).  1, 0, or -1 when
 * it could not be read (the read path compares then).
 */
#define PF_PIECE	(64 << 10)
static int compare(const struct pf_slot *job, const void *buf)
{
	char *y = malloc(PF_PIECE);
	int same = 1;

	if (!y)
		return -1;
	for (size_t at = 0; same == 1 && at < job->bytes; at += PF_PIECE) {
		size_t n = job->bytes - at < PF_PIECE ? job->bytes - at : PF_PIECE;
		if (bch_dev_read(job->bdev[1], y, n, ((uint64_t)job->ptr[1].offset << 9) + at)) {
			same = -1;
			break;
		}
		size_t cmp = at >= job->written ? 0 : job->written - at < n ? job->written - at : n;
		same = !memcmp((const char *)buf + at, y, cmp);
		for (size_t i = cmp; same && i < n; i++)
			same = !y[i];
	}
	free(y);
	return same;
}

/* The worker: read the oldest queued slot, publish it, again. */
static void *worker(void *arg)
{
	struct bch_prefetch *p = arg;

	pthread_mutex_lock(&p->lock);
	while (!p->stop) {
		struct pf_slot *s = NULL;
		for (unsigned i = 0; i < PF_SLOTS; i++)
			if (p->slot[i].state == PF_QUEUED && (!s || p->slot[i].seq < s->seq))
				s = &p->slot[i];
		if (!s) {
			pthread_cond_wait(&p->work, &p->lock);
			continue;
		}
		s->state = PF_READING;
		struct pf_slot job = *s;
		pthread_mutex_unlock(&p->lock);

		int same = -1;
		void *buf = bch_node_arena_alloc(job.len);
		int err = bch_dev_read(job.bdev[0], buf, job.len, (uint64_t)job.ptr[0].offset << 9);
		if (!err && job.written)
			same = compare(&job, buf);

		pthread_mutex_lock(&p->lock);
		s->buf = buf;
		s->err = err;
		s->same = same;
		s->state = PF_READY;
		pthread_cond_broadcast(&p->ready);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

int bch_prefetch_start(struct bch_fs *c)
{
	if (!c->read_only || c->prefetch)
		return 0;
	struct bch_prefetch *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->work, NULL);
	pthread_cond_init(&p->ready, NULL);
	p->last_same = -1;
	if (pthread_create(&p->thread, NULL, worker, p)) {
		pthread_cond_destroy(&p->ready);
		pthread_cond_destroy(&p->work);
		pthread_mutex_destroy(&p->lock);
		free(p);
		return -EAGAIN;
	}
	c->prefetch = p;
	return 0;
}

void bch_prefetch_stop(struct bch_fs *c)
{
	struct bch_prefetch *p = c->prefetch;

	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->lock);
	pthread_join(p->thread, NULL);
	for (unsigned i = 0; i < PF_SLOTS; i++)
		if (p->slot[i].state == PF_READY)
			bch_node_arena_free(p->slot[i].buf, p->slot[i].len);
	pthread_cond_destroy(&p->ready);
	pthread_cond_destroy(&p->work);
	pthread_mutex_destroy(&p->lock);
	free(p);
	c->prefetch = NULL;
}

void bch_prefetch_node(struct bch_fs *c, const struct bch_bkey *ptr)
{
	struct bch_prefetch *p = c->prefetch;

	if (!p || ptr->type != BCH_BKEY_btree_ptr)
		return;
	const struct bch_btree_ptr *bp = bkey_val(ptr);
	unsigned nr = bch_btree_ptr_nr(ptr);
	struct bch_blockdev *a = nr ? ptr_bdev(c, &bp->ptrs[0]) : NULL;
	if (!a)
		return;
	/* what parse_one() reads first */
	size_t nb = (size_t)c->sb->btree_node_size << 9, bs = (size_t)c->sb->block_size << 9;
	size_t len = bp->sectors_written ? ((size_t)bp->sectors_written << 9) + bs : (size_t)64 << 10;
	len = len < nb ? (len + bs - 1) / bs * bs : nb;
	/* what copies_identical() compares, when bch_btree_node_read() compares copies */
	bool compare = c->opts.v[Opt_fsck] && !c->fsck_copies_checked;
	size_t written = (size_t)bp->sectors_written << 9, bytes = written;
	struct bch_blockdev *b = compare && nr > 1 ? ptr_bdev(c, &bp->ptrs[1]) : NULL;
	if (bytes < nb)
		bytes += bs;
	if (!b || !written || bytes > nb || written > len)
		written = 0;

	pthread_mutex_lock(&p->lock);
	struct pf_slot *s = NULL, *old = NULL;
	for (unsigned i = 0; i < PF_SLOTS; i++) {
		struct pf_slot *t = &p->slot[i];
		if (t->state != PF_FREE && ptr_eq(&t->ptr[0], &bp->ptrs[0]))
			goto out;	/* queued already */
		if (t->state == PF_FREE)
			s = s ? s : t;
		else if (t->state == PF_READY && (!old || t->seq < old->seq))
			old = t;
	}
	if (!s && old) {
		/* read ahead and never taken (the node was in the cache): reuse it */
		bch_node_arena_free(old->buf, old->len);
		old->state = PF_FREE;
		s = old;
	}
	if (!s)
		goto out;
	*s = (struct pf_slot) {
		.state = PF_QUEUED, .seq = ++p->seq, .bdev = { a, b }, .len = len,
		.written = written, .bytes = bytes,
	};
	s->ptr[0] = bp->ptrs[0];
	if (written)
		s->ptr[1] = bp->ptrs[1];
	pthread_cond_signal(&p->work);
out:
	pthread_mutex_unlock(&p->lock);
}

void *bch_prefetch_take(struct bch_fs *c, const struct bch_extent_ptr *ptr, size_t len)
{
	struct bch_prefetch *p = c->prefetch;
	void *buf = NULL;

	if (!p)
		return NULL;
	pthread_mutex_lock(&p->lock);
	p->last_same = -1;
	for (unsigned i = 0; i < PF_SLOTS; i++) {
		struct pf_slot *s = &p->slot[i];
		if (s->state == PF_FREE || !ptr_eq(&s->ptr[0], ptr))
			continue;
		if (s->state == PF_QUEUED) {
			s->state = PF_FREE;	/* not started: the caller reads it now */
			break;
		}
		while (s->state == PF_READING)
			pthread_cond_wait(&p->ready, &p->lock);
		if (!s->err && s->len == len) {
			buf = s->buf;
			p->last[0] = s->ptr[0];
			p->last[1] = s->ptr[1];
			p->last_written = s->written;
			p->last_same = s->written ? s->same : -1;
		} else {
			bch_node_arena_free(s->buf, s->len);
		}
		s->state = PF_FREE;
		break;
	}
	pthread_mutex_unlock(&p->lock);
	return buf;
}

int bch_prefetch_same(struct bch_fs *c, const struct bch_extent_ptr *a,
		      const struct bch_extent_ptr *b, size_t written)
{
	struct bch_prefetch *p = c->prefetch;
	int same = -1;

	if (!p)
		return -1;
	pthread_mutex_lock(&p->lock);
	if (p->last_same >= 0 && p->last_written == written &&
	    ptr_eq(&p->last[0], a) && ptr_eq(&p->last[1], b))
		same = p->last_same;
	pthread_mutex_unlock(&p->lock);
	return same;
}
