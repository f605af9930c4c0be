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
 * says was written plus a block, or 64 KiB, then as far as the bsets go),
 * and parses it as the read path would (checksums, identity, keys
 * validated unless pass 3 did already) into a node outside the cache;
 * while fsck pass 3 still compares copies, it then compares the second
 * copy with it over what the parse found written, as copies_identical()
 * would.  The read path takes the parsed node's keys and arena from here
 * (bch_prefetch_take_parsed()) instead of reading, and waits a little for
 * one being parsed (PF_WAIT_NS: a worker the scheduler left waiting is not
 * waited for; the read path reads that node itself).  A node not queued,
 * or not started, it reads and parses itself as before; on an encrypted
 * filesystem it takes the bytes only (bch_prefetch_take(): it decrypts in
 * place).  So the second core does the system calls, the copying out of
 * the page cache, the checksums, the parse and the comparing, and the
 * first one checks what the keys say; in pass 3, where a node costs the
 * worker more than the checks of it, the two share the nodes (worker()).
 *
 * Invariants
 *   (1) Only on a filesystem opened read-only: nothing writes a node while
 *       its bytes wait here, so they are what a read would return.
 *   (2) A node is parsed here exactly as the read path parses it (the same
 *       code, bch_btree_node_parse_ahead()), for the btree, level, range
 *       and seq the read path then asks for (anything else is dropped);
 *       a streamed leaf's first pass is the open's own code (ls_open()).  A
 *       copy that fails here, or a failed read, is a miss: the read path
 *       reads it again and reports what it gets (errors are counted there).
 *   (3) Locking: one mutex guards the slots; the worker holds it only to
 *       pick a slot and to publish what it parsed, never across I/O or the
 *       parse.  The worker changes nothing of the filesystem: it reads the
 *       devices (their reads count atomically) and what does not change
 *       once opened read-only (the superblock, the options, the replay
 *       range); what the read path's state says (keys validated already) is
 *       copied into the slot when it is queued.
 *
 * A streamed leaf (bch_leaf_stream_open(), the end of this file) is not
 * parsed here: its slot (verify) has the worker make the open's first pass
 * over its bytes (checksum) and keep the verdict and where its keys end,
 * nothing of its bytes; the open that takes a good verdict reads the keys
 * only.  Pass 3 (bch_prefetch_verify_check()): the first pass gives every
 * key to the caller's check() too, into the slot's copy of its state (and,
 * when check() asks once the leaf verified, the keys again, merged), and
 * the worker takes the newest queued while the read path opens the oldest
 * itself, so the two share the leaves.  Passes 5-10, trusting pass 3
 * (ls_trusted()): the worker only reads the leaf's bytes (warm()).
 *
 * Memory: at most PF_SLOTS nodes wait here (a slot parsed and never taken,
 * its node found in the cache meanwhile, is reused first).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bcachefs.h"
#include "blockdev.h"
#include "btree.h"
#include "btree_prefetch.h"
#include "checksum.h"
#include "crypt.h"
#include "errcode.h"
#include "super.h"

#define PF_SLOTS	6
#define PF_PRIV_MAX	BCH_PREFETCH_PRIV_MAX	/* bch_prefetch_verify_check()'s state, at most */

/*
 * PF_DROPPED: being read, and the read path did not wait for it (it reads
 * the node itself): the worker frees what it made and frees the slot.
 */
enum pf_state { PF_FREE, PF_QUEUED, PF_READING, PF_READY, PF_DROPPED };

/*
 * How long the read path waits for a node being read here before it reads
 * the node itself: a parse takes well under this, so it waits only for a
 * worker that is not running (a busy machine's scheduler), and never
 * longer than this for it.
 */
#define PF_WAIT_NS	(300 * 1000)

struct pf_slot {
	enum pf_state		state;
	uint64_t		seq;		/* queue order (which is read first: worker()) */
	struct bch_blockdev	*bdev[2];
	struct bch_extent_ptr	ptr[2];		/* the copy to read, the one to compare (bdev[1]) */
	size_t			len;		/* bytes of the first copy first read */
	size_t			got;		/* PF_READY, bytes only: bytes read (>= len) */
	size_t			written;	/* compare: bytes the copies must share (0: none) */
	size_t			bytes;		/* ... and the block after them (zeros) */
	/* parse (nothing when encrypted: the bytes only) */
	struct bch_bkey		*key;		/* a copy of the pointer (NULL: bytes only) */
	uint8_t			id, level;
	bool			skip_validate;	/* pass 3 validated these keys already */
	bool			compare_parsed;	/* compare over what the parse found written */
	struct btree		*node;		/* PF_READY, parsed: outside the cache */
	bool			verify;		/* a streamed leaf's first pass only (key) */
	bool			verify_compare;	/* ... comparing the other copies */
	bool			warm;		/* ... read only: the open trusts it (ls_trusted()) */
	bool			newest_first;	/* ... its check() shared with the read path */
	bch_leaf_check_fn	check;		/* ... each key given to it, with priv */
	size_t			priv_len;
	_Alignas(8) char	priv[PF_PRIV_MAX];	/* check()'s state, the caller's copy */
	unsigned		v_nr;		/* PF_READY, verified: its bsets' keys */
	size_t			v_start[LS_BSETS_MAX], v_end[LS_BSETS_MAX];
	void			*buf;		/* PF_READY, bytes only: a node arena of got bytes */
	int			err;
	int			same;		/* 1, 0, -1 not compared */
};

struct bch_prefetch {
	struct bch_fs		*c;		/* the worker reads only what does not change */
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
	uint64_t		taken;		/* nodes the read path took from here */
	struct bch_leaf_stream	*ls;		/* the worker's, for verify slots */
};

static int ls_open(struct bch_fs *c, struct bch_leaf_stream *s, unsigned id,
		   const struct bch_bkey *ptr, bool compare, bch_leaf_check_fn check, void *priv);
static bool ls_trusted(struct bch_fs *c, bool compare, bch_leaf_check_fn check);
static size_t min_sz(size_t a, size_t b);

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
#define PF_PIECE	(32 << 10)
static int compare(const struct pf_slot *job, const void *buf)
{
	char y[PF_PIECE] __attribute__((aligned(4096)));	/* not the heap: see copies_identical() */
	int same = 1;

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
	return same;
}

/* A node parsed here and never taken: its keys, arena and itself. */
static void node_discard(struct btree *t)
{
	if (!t)
		return;
	for (unsigned i = 0; i < t->nr_dropped; i++)
		free(t->dropped[i]);
	free(t->dropped);
	bch_btree_node_free_keys(t);
	bch_btree_node_free_index(t);
	free(t);
}

/* What a slot holds, freed (the slot's state is the caller's). */
static void slot_clear(struct pf_slot *s)
{
	node_discard(s->node);
	s->node = NULL;
	if (s->buf)
		bch_node_arena_free(s->buf, s->got);
	s->buf = NULL;
	free(s->key);
	s->key = NULL;
}

/*
 * Parse the first copy (buf, job->len bytes: the node's arena from now
 * on) into a node outside the cache; then, when asked, compare the second
 * copy with it over what it found written, as copies_identical() would
 * (*same; job->written and job->bytes set to what was compared).  NULL
 * when it failed: the read path reads it again and reports it.
 */
static struct btree *parse(struct bch_fs *c, struct pf_slot *job, void *buf, int *same)
{
	const struct bch_btree_ptr *bp = bkey_val(job->key);
	struct btree *t = calloc(1, sizeof(*t));

	if (!t) {
		bch_node_arena_free(buf, job->len);
		return NULL;
	}
	t->id = job->id;
	t->level = job->level;
	t->min_key = bp->min_key;
	t->max_key = job->key->p;
	if (bch_btree_node_parse_ahead(c, t, job->key, buf, job->len, job->skip_validate)) {
		node_discard(t);
		return NULL;
	}
	size_t nb = (size_t)c->sb->btree_node_size << 9, bs = (size_t)c->sb->block_size << 9;
	size_t written = (size_t)t->sectors_written << 9, bytes = written;
	if (bytes < nb)
		bytes += bs;	/* the block after: zeros on both */
	job->written = job->bytes = 0;
	if (job->compare_parsed && written && bytes <= nb && t->arena_bytes >= written) {
		job->written = written;
		job->bytes = bytes;
		*same = compare(job, t->arena);
	}
	return t;
}

static size_t round_to(size_t x, size_t bs)
{
	return (x + bs - 1) / bs * bs;
}

/*
 * The bytes of the first copy only (encrypted): read on as far
 * as its bsets go, exactly as parse_one()'s node_need() would (so the read
 * path reads nothing more), without checking anything: where they end is
 * returned (0: not a node of ours), the compare's length when the parse
 * finds the same (else the read path compares).  *buf grows to *got bytes;
 * *err is set when a read failed (the bytes are not to be used).
 */
static size_t read_on(struct bch_fs *c, const struct pf_slot *job, void **buf, size_t *got,
		      int *err)
{
	size_t nb = (size_t)c->sb->btree_node_size << 9, bs = (size_t)c->sb->block_size << 9;
	uint64_t where = (uint64_t)job->ptr[0].offset << 9;
	size_t have = *got;

/* the arena holds bytes [0, x) of the copy, or return 0 */
#define NEED(x)									\
	do {									\
		size_t _x = (x);						\
		if (_x > have && have < nb) {					\
			size_t more = round_to(_x + sizeof(struct bch_btree_node_entry), bs); \
			if (more > nb)						\
				more = nb;					\
			*buf = bch_node_arena_resize(*buf, *got, more);		\
			*got = more;						\
			if ((*err = bch_dev_read(job->bdev[0], (char *)*buf + have, more - have, \
						 where + have)))			\
				return 0;	/* the read path reads (and reports) it */ \
			have = more;						\
		}								\
		if (_x > have)							\
			return 0;						\
	} while (0)

	const struct bch_btree_node *n = *buf;
	if (have < sizeof(*n) || n->magic != BCH_BTREE_NODE_MAGIC)
		return 0;
	size_t off = sizeof(*n) + (size_t)n->keys.u64s * 8;
	uint64_t seq = n->seq;
	if (off > nb)
		return 0;
	NEED(off);
	off = round_to(off, bs);
	while (off + sizeof(struct bch_btree_node_entry) <= nb) {
		NEED(off + sizeof(struct bch_btree_node_entry));
		const struct bch_btree_node_entry *e = (const void *)((char *)*buf + off);
		size_t end = off + sizeof(*e) + (size_t)e->keys.u64s * 8;
		if (e->keys.seq != seq || end > nb)
			break;
		NEED(end);
		off = round_to(end, bs);
	}
	return off;
#undef NEED
}

/*
 * A trusted leaf's bytes (ls_trusted()): read, as far as its parent says
 * was written, and let go.  They are then in the CPU's shared cache when
 * the open reads its keys (1M files: 10 ms less of the read path's time
 * in pass 5 than reading them cold).
 */
static void warm(struct bch_prefetch *p, const struct pf_slot *job)
{
	const struct bch_btree_ptr *bp = bkey_val(job->key);
	size_t bytes = (size_t)bp->sectors_written << 9;

	for (size_t at = 0; at < bytes; at += LS_BUF)
		if (bch_dev_read(job->bdev[0], p->ls->buf, min_sz(LS_BUF, bytes - at),
				 ((uint64_t)job->ptr[0].offset << 9) + at))
			break;
}

/* The worker: read (and parse) a queued slot, publish it, again. */
static void *worker(void *arg)
{
	struct bch_prefetch *p = arg;

	pthread_mutex_lock(&p->lock);
	while (!p->stop) {
		struct pf_slot *s = NULL;
		/*
		 * Which first.  Pass 3 (keys validated, copies compared): a
		 * node costs this thread more (both copies read, one parsed and
		 * its keys validated) than the read path's checks of it, so the
		 * newest: the read path does a queued node itself when it gets
		 * there first, and the two work from either end of the queue,
		 * neither waiting for the other.  Later passes: parsing costs
		 * less than the checks of the keys, so the oldest, the one the
		 * read path needs next.
		 */
		for (unsigned i = 0; i < PF_SLOTS; i++) {
			struct pf_slot *t = &p->slot[i];
			bool newest = !t->skip_validate || t->newest_first;
			if (t->state == PF_QUEUED &&
			    (!s || (newest ? t->seq > s->seq : t->seq < s->seq)))
				s = t;
		}
		if (!s) {
			pthread_cond_wait(&p->work, &p->lock);
			continue;
		}
		s->state = PF_READING;
		struct pf_slot job = *s;
		pthread_mutex_unlock(&p->lock);

		int same = -1;
		struct btree *node = NULL;
		void *buf = NULL;
		int err = 0;
		if (!job.verify) {
			buf = bch_node_arena_alloc(job.len);
			err = bch_dev_read(job.bdev[0], buf, job.len, (uint64_t)job.ptr[0].offset << 9);
		}
		if (job.warm) {
			warm(p, &job);
		} else if (job.verify) {
			/* a streamed leaf's first pass: nothing kept but the verdict */
			err = ls_open(p->c, p->ls, job.id, job.key, job.verify_compare, job.check,
				      job.check ? job.priv : NULL) ? -1 : 0;
			job.v_nr = err ? 0 : p->ls->nr_bsets;
			memcpy(job.v_start, p->ls->bset_start, sizeof(job.v_start));
			memcpy(job.v_end, p->ls->bset_end, sizeof(job.v_end));
		} else if (err) {
			bch_node_arena_free(buf, job.len);
			buf = NULL;
		} else if (job.key) {
			node = parse(p->c, &job, buf, &same);
			buf = NULL;	/* the node's arena, or freed */
			err = node ? 0 : -1;
		} else {
			/* as far as the bsets go, as parse_one() would read on */
			size_t got = job.len, written = read_on(p->c, &job, &buf, &got, &err);
			if (job.bdev[1] && !job.written && written) {
				size_t nb = (size_t)p->c->sb->btree_node_size << 9;
				job.written = job.bytes = written;
				if (job.bytes < nb)
					job.bytes += (size_t)p->c->sb->block_size << 9;
				if (job.bytes > nb)
					job.written = job.bytes = 0;
			}
			if (!err && job.written && job.written <= got)
				same = compare(&job, buf);
			else
				job.written = 0;
			job.got = got;
			if (err) {
				bch_node_arena_free(buf, got);
				buf = NULL;
			}
		}

		pthread_mutex_lock(&p->lock);
		s->buf = buf;
		s->node = node;
		s->err = err;
		s->same = same;
		s->written = job.written;
		s->bytes = job.bytes;
		s->got = job.got;
		s->v_nr = job.v_nr;
		memcpy(s->v_start, job.v_start, sizeof(s->v_start));
		memcpy(s->v_end, job.v_end, sizeof(s->v_end));
		memcpy(s->priv, job.priv, job.priv_len);
		if (s->state == PF_DROPPED || job.warm) {	/* nothing to take */
			slot_clear(s);
			s->state = PF_FREE;
		} else {
			s->state = PF_READY;
		}
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
	if (!(p->ls = malloc(sizeof(*p->ls)))) {
		free(p);
		return -ENOMEM;
	}
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->work, NULL);
	pthread_cond_init(&p->ready, NULL);
	p->last_same = -1;
	p->c = c;
	if (pthread_create(&p->thread, NULL, worker, p)) {
		pthread_cond_destroy(&p->ready);
		pthread_cond_destroy(&p->work);
		pthread_mutex_destroy(&p->lock);
		free(p->ls);
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
		slot_clear(&p->slot[i]);
	pthread_cond_destroy(&p->ready);
	pthread_cond_destroy(&p->work);
	pthread_mutex_destroy(&p->lock);
	free(p->ls);
	free(p);
	c->prefetch = NULL;
}

/*
 * A slot for a read of the node at ptr (lock held): a free one, else the
 * oldest read ahead (or verified) and never taken, which is cleared; NULL
 * when ptr is queued already or every slot is busy.
 */
static struct pf_slot *slot_to_queue(struct bch_prefetch *p, const struct bch_extent_ptr *ptr)
{
	struct pf_slot *s = NULL, *old = NULL;

	for (unsigned i = 0; i < PF_SLOTS; i++) {
		struct pf_slot *t = &p->slot[i];
		if (t->state != PF_FREE && ptr_eq(&t->ptr[0], ptr))
			return NULL;	/* queued already */
		if (t->state == PF_FREE)
			s = s ? s : t;
		else if (t->state == PF_READY && (!old || t->seq < old->seq))
			old = t;
	}
	if (!s && old) {
		slot_clear(old);
		old->state = PF_FREE;
		s = old;
	}
	return s;
}

void bch_prefetch_node(struct bch_fs *c, unsigned id, unsigned level, const struct bch_bkey *ptr)
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
	struct bch_blockdev *b = compare && nr > 1 ? ptr_bdev(c, &bp->ptrs[1]) : NULL;
	/* and parse it (encrypted: the bytes only, the read path decrypts in place) */
	bool parsed = !bch_fs_encrypted(c);
	size_t written = (size_t)bp->sectors_written << 9, bytes = written;
	if (bytes < nb)
		bytes += bs;
	if (!b || !written || bytes > nb || written > len)
		written = 0;	/* compared over what the bsets found say was written */

	pthread_mutex_lock(&p->lock);
	struct pf_slot *s = slot_to_queue(p, &bp->ptrs[0]);
	if (!s)
		goto out;
	struct bch_bkey *key = parsed ? bch_bkey_dup(ptr) : NULL;
	if (parsed && !key)
		goto out;
	*s = (struct pf_slot) {
		.state = PF_QUEUED, .seq = ++p->seq, .bdev = { a, b }, .len = len, .got = len,
		.written = written, .bytes = bytes, .key = key, .id = id, .level = level,
		.skip_validate = c->fsck_copies_checked && c->read_only,
		.compare_parsed = parsed && b,
	};
	s->ptr[0] = bp->ptrs[0];
	if (b)
		s->ptr[1] = bp->ptrs[1];
	pthread_cond_signal(&p->work);
out:
	pthread_mutex_unlock(&p->lock);
}

void bch_prefetch_verify(struct bch_fs *c, unsigned id, const struct bch_bkey *ptr, bool compare)
{
	bch_prefetch_verify_check(c, id, ptr, compare, NULL, NULL, 0);
}

void bch_prefetch_verify_check(struct bch_fs *c, unsigned id, const struct bch_bkey *ptr,
			       bool compare, bch_leaf_check_fn check, const void *priv, size_t len)
{
	struct bch_prefetch *p = c->prefetch;

	if (!p || ptr->type != BCH_BKEY_btree_ptr || !bch_btree_ptr_nr(ptr) || bch_fs_encrypted(c) ||
	    (check && len > PF_PRIV_MAX))
		return;
	const struct bch_btree_ptr *bp = bkey_val(ptr);
	struct bch_blockdev *a = ptr_bdev(c, &bp->ptrs[0]);
	if (!a)
		return;
	pthread_mutex_lock(&p->lock);
	struct pf_slot *s = slot_to_queue(p, &bp->ptrs[0]);
	struct bch_bkey *key = s ? bch_bkey_dup(ptr) : NULL;
	if (!key)
		goto out;
	*s = (struct pf_slot) {
		.state = PF_QUEUED, .seq = ++p->seq, .bdev = { a }, .key = key, .id = id,
		.skip_validate = true,	/* the oldest first (worker()) ... */
		.newest_first = check,	/* ... unless the read path does them too */
		.verify = true, .verify_compare = compare, .check = check,
		.warm = ls_trusted(c, compare, check),
		.priv_len = check ? len : 0,
	};
	if (check)
		memcpy(s->priv, priv, len);
	s->ptr[0] = bp->ptrs[0];
	pthread_cond_signal(&p->work);
out:
	pthread_mutex_unlock(&p->lock);
}

/*
 * Wait (under p->lock) a little for s being read: true when it is ready;
 * false when the worker did not finish in time: s is dropped (the worker
 * frees it) and the caller reads the node itself.
 */
static bool wait_ready(struct bch_prefetch *p, struct pf_slot *s)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_nsec += PF_WAIT_NS;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	while (s->state == PF_READING)
		if (pthread_cond_timedwait(&p->ready, &p->lock, &until) == ETIMEDOUT)
			break;
	if (s->state != PF_READING)
		return true;
	s->state = PF_DROPPED;
	return false;
}

/* The slot of the copy at ptr (queued, being read or ready), or NULL; under p->lock. */
static struct pf_slot *slot_of(struct bch_prefetch *p, const struct bch_extent_ptr *ptr)
{
	for (unsigned i = 0; i < PF_SLOTS; i++)
		if (p->slot[i].state != PF_FREE && p->slot[i].state != PF_DROPPED &&
		    ptr_eq(&p->slot[i].ptr[0], ptr))
			return &p->slot[i];
	return NULL;
}

/* What bch_prefetch_same() answers for the node just taken from s. */
static void note_taken(struct bch_prefetch *p, const struct pf_slot *s)
{
	p->last[0] = s->ptr[0];
	p->last[1] = s->ptr[1];
	p->last_written = s->written;
	p->last_same = s->written ? s->same : -1;
	p->taken++;
}

/*
 * b takes t's keys and arena and what parse_one() set from the node's
 * header and bsets (keep in step with it); t is freed.
 */
static void adopt(struct btree *b, struct btree *t)
{
	bch_btree_node_free_keys(b);	/* empty already: read_one() resets it */
	bch_btree_node_free_index(b);
	for (unsigned i = 0; i < b->nr_dropped; i++)
		free(b->dropped[i]);
	free(b->dropped);
	b->seq = t->seq;
	b->csum_type = t->csum_type;
	b->sectors_written = t->sectors_written;
	b->torn_tail = t->torn_tail;
	b->no_append = t->no_append;
	b->disk_journal_seq = t->disk_journal_seq;
	b->dropped = t->dropped;
	b->nr_dropped = t->nr_dropped;
	b->koff = t->koff;
	b->index_wide = t->index_wide;
	b->kpos = t->kpos;
	b->kfmt_lo = t->kfmt_lo;
	b->kfmt_ref = t->kfmt_ref;
	b->kfmt_mode = t->kfmt_mode;
	b->kfmt_bits = t->kfmt_bits;
	b->nr = t->nr;
	b->cap = t->cap;
	b->u64s = t->u64s;
	b->arena = t->arena;
	b->arena_bytes = t->arena_bytes;
	b->arena_used = t->arena_used;
	b->pack_fmt = t->pack_fmt;	/* (none: a read's raw bytes) */
	b->packed_u64s = t->packed_u64s;
	b->packed_saved = t->packed_saved;
	b->mod++;
	free(t);
}

bool bch_prefetch_take_parsed(struct bch_fs *c, struct btree *b, const struct bch_extent_ptr *ptr,
			      const struct bch_btree_ptr *bp, size_t len)
{
	struct bch_prefetch *p = c->prefetch;
	struct btree *t = NULL;

	if (!p)
		return false;
	pthread_mutex_lock(&p->lock);
	struct pf_slot *s = slot_of(p, ptr);
	if (!s || !s->key) {	/* not queued, or bytes only (bch_prefetch_take()) */
		pthread_mutex_unlock(&p->lock);
		return false;
	}
	p->last_same = -1;
	if (s->state == PF_QUEUED) {
		slot_clear(s);	/* not started: the caller reads it now */
		s->state = PF_FREE;
		pthread_mutex_unlock(&p->lock);
		return false;
	}
	if (!wait_ready(p, s)) {
		pthread_mutex_unlock(&p->lock);
		return false;
	}
	const struct bch_btree_ptr *sp = bkey_val(s->key);
	if (s->node && s->len == len && s->id == b->id && s->level == b->level &&
	    bpos_eq(sp->min_key, b->min_key) && bpos_eq(s->key->p, b->max_key) && sp->seq == bp->seq &&
	    sp->sectors_written == bp->sectors_written) {
		t = s->node;
		s->node = NULL;
		note_taken(p, s);
	}
	slot_clear(s);
	s->state = PF_FREE;
	pthread_mutex_unlock(&p->lock);
	if (t)
		adopt(b, t);
	return t;
}

void *bch_prefetch_take(struct bch_fs *c, const struct bch_extent_ptr *ptr, size_t *len)
{
	struct bch_prefetch *p = c->prefetch;
	void *buf = NULL;

	if (!p)
		return NULL;
	pthread_mutex_lock(&p->lock);
	p->last_same = -1;
	struct pf_slot *s = slot_of(p, ptr);
	if (s && s->state == PF_QUEUED) {
		slot_clear(s);	/* not started: the caller reads it now */
		s->state = PF_FREE;
	} else if (s && wait_ready(p, s)) {
		if (!s->err && !s->node && s->buf && s->len == *len) {
			buf = s->buf;
			*len = s->got;
			s->buf = NULL;
			note_taken(p, s);
		}
		slot_clear(s);
		s->state = PF_FREE;
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

uint64_t bch_prefetch_nr_taken(struct bch_fs *c)
{
	struct bch_prefetch *p = c->prefetch;
	uint64_t n = 0;

	if (p) {
		pthread_mutex_lock(&p->lock);
		n = p->taken;
		pthread_mutex_unlock(&p->lock);
	}
	return n;
}

void bch_prefetch_wait_idle(struct bch_fs *c)
{
	struct bch_prefetch *p = c->prefetch;

	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	for (;;) {
		bool busy = false;
		for (unsigned i = 0; i < PF_SLOTS; i++)
			busy |= p->slot[i].state == PF_QUEUED || p->slot[i].state == PF_READING ||
				p->slot[i].state == PF_DROPPED;
		if (!busy)
			break;
		pthread_cond_wait(&p->ready, &p->lock);
	}
	pthread_mutex_unlock(&p->lock);
}

/* ------------------------------------------------------------ streamed leaves */

#define LS_TMP		(16U << 10)	/* another copy compared this much at a time */

/* What the first pass over a leaf's bytes checks as they are read. */
struct ls_verify {
	unsigned		csum_type;
	uint64_t		crc;		/* the bset's, running (raw: no init/xorout) */
	size_t			csum_lo, csum_end;	/* checksummed: node bytes [lo, end) */
	size_t			written;	/* the copies are equal below this ... */
	size_t			limit;		/* ... and zeros from there to this */
	unsigned		nr_other;
	struct bch_blockdev	*other[BCH_REPLICAS_MAX];
	uint64_t		other_where[BCH_REPLICAS_MAX];
	bool			bad;
	char			*tmp;		/* LS_TMP bytes: another copy's piece */
};

static size_t min_sz(size_t a, size_t b)
{
	return a < b ? a : b;
}

static size_t max_sz(size_t a, size_t b)
{
	return a > b ? a : b;
}

static bool all_zero(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/* The checksum of the bset being read over node bytes [at, at + n), in p. */
static void ls_csum(struct ls_verify *v, const char *p, size_t at, size_t n)
{
	size_t lo = max_sz(at, v->csum_lo), hi = min_sz(at + n, v->csum_end);

	if (lo >= hi)
		return;
	if (v->csum_type == BCH_CSUM_crc32c)
		v->crc = bch_crc32c((uint32_t)v->crc, p + (lo - at), hi - lo);
	else if (v->csum_type == BCH_CSUM_crc64)
		v->crc = bch_crc64(v->crc, p + (lo - at), hi - lo);
}

/* Node bytes [at, at + n) just read into p: checksum, zeros after, other copies. */
static void ls_verify_bytes(struct ls_verify *v, const char *p, size_t at, size_t n)
{
	ls_csum(v, p, at, n);
	size_t lo = max_sz(at, v->written), hi = min_sz(at + n, v->limit);
	if (lo < hi && !all_zero(p + (lo - at), hi - lo))
		v->bad = true;
	/* the other copies: the same bytes below written, zeros from there to limit */
	size_t upto = min_sz(at + n, max_sz(v->written, v->limit));
	for (unsigned i = 0; i < v->nr_other && !v->bad; i++)
		for (size_t x = at; x < upto && !v->bad; x += LS_TMP) {
			size_t len = min_sz(LS_TMP, upto - x);
			size_t cmp = x < v->written ? min_sz(len, v->written - x) : 0;
			if (bch_dev_read(v->other[i], v->tmp, len, v->other_where[i] + x) ||
			    memcmp(v->tmp, p + (x - at), cmp) || !all_zero(v->tmp + cmp, len - cmp))
				v->bad = true;
		}
}

/*
 * Read n node bytes from w->read_to after what w's buffer holds (the
 * caller made room), verifying them as read when v.
 */
static int ls_read(struct bch_leaf_stream *s, struct ls_window *w, size_t n, struct ls_verify *v)
{
	char *dst = w->buf + w->fill;

	if (bch_dev_read(s->bdev, dst, n, s->where + w->read_to))
		return -1;
	if (v)
		ls_verify_bytes(v, dst, w->read_to, n);
	w->read_to += n;
	w->fill += n;
	return 0;
}

/*
 * w's buffer holds node bytes [at, at + bytes) (bytes <= LS_KEY_MAX): 0, or
 * -1.  What lies between what it held and at is read (and verified) and let go.
 */
static int ls_need(struct bch_leaf_stream *s, struct ls_window *w, size_t bytes, struct ls_verify *v)
{
	if (w->at + bytes <= w->base + w->fill)
		return 0;
	if (w->at >= w->read_to) {
		while (w->read_to < w->at) {
			w->base = w->read_to;
			w->fill = 0;
			if (ls_read(s, w, min_sz(w->piece, w->at - w->read_to), v))
				return -1;
		}
		w->base = w->at;
		w->fill = 0;
	} else {
		/* what is left (part of a key) to the front, the next piece after it */
		size_t keep = w->read_to - w->at;
		memmove(w->buf, w->buf + (w->at - w->base), keep);
		w->base = w->at;
		w->fill = keep;
	}
	size_t n = w->stop > w->read_to ? min_sz(w->piece, w->stop - w->read_to) : 0;
	if (!n || ls_read(s, w, n, v))
		return -1;
	return w->at + bytes <= w->base + w->fill ? 0 : -1;
}

/* The key at w->at, whole in its buffer, in order and inside the node; NULL if not. */
static const struct bch_bkey *ls_key(struct bch_leaf_stream *s, struct ls_window *w,
				     struct ls_verify *v)
{
	/* (ls_need() only when the buffer lacks the bytes: most keys are in it) */
	if (w->end - w->at < sizeof(struct bch_bkey) ||
	    (w->at + sizeof(struct bch_bkey) > w->base + w->fill &&
	     ls_need(s, w, sizeof(struct bch_bkey), v)))
		return NULL;
	const struct bch_bkey *k = (const void *)(w->buf + (w->at - w->base));
	size_t bytes = (size_t)k->u64s * 8;
	if (k->u64s < BCH_BKEY_U64s || bytes > LS_KEY_MAX || bytes > w->end - w->at ||
	    (w->at + bytes > w->base + w->fill && ls_need(s, w, bytes, v)))
		return NULL;
	k = (const void *)(w->buf + (w->at - w->base));
	if ((w->any && bpos_cmp(w->prev, k->p) >= 0) || bpos_cmp(k->p, s->min_key) < 0 ||
	    bpos_cmp(k->p, s->max_key) > 0)
		return NULL;
	w->prev = k->p;
	w->any = true;
	w->at += bytes;
	return k;
}

/* s verified: its bsets' keys from the first, each bset in its part of the buffer. */
static void ls_start_keys(struct bch_leaf_stream *s)
{
	size_t part = LS_BUF / s->nr_bsets / 8 * 8;

	for (unsigned i = 0; i < s->nr_bsets; i++) {
		struct ls_window *w = &s->w[i];
		*w = (struct ls_window) {
			.buf = s->buf + i * part, .piece = part - LS_KEY_MAX,
			.at = s->bset_start[i], .end = s->bset_end[i],
			.read_to = s->bset_start[i], .stop = s->bset_end[i], .base = s->bset_start[i],
		};
	}
	s->err = 0;
}

static int ls_open(struct bch_fs *c, struct bch_leaf_stream *s, unsigned id,
		   const struct bch_bkey *ptr, bool compare, bch_leaf_check_fn check, void *priv);

/*
 * Was the leaf ptr points to verified ahead (bch_prefetch_verify()), its
 * copies compared when compare, its keys given to check when that is not
 * NULL?  true, and ls has where its bsets' keys lie, priv what check()
 * learnt.
 */
static bool take_verified(struct bch_fs *c, const struct bch_bkey *ptr, bool compare,
			  bch_leaf_check_fn check, void *priv, struct bch_leaf_stream *ls)
{
	struct bch_prefetch *p = c->prefetch;
	const struct bch_btree_ptr *bp = bkey_val(ptr);
	bool ok = false;

	if (!p)
		return false;
	pthread_mutex_lock(&p->lock);
	struct pf_slot *s = slot_of(p, &bp->ptrs[0]);
	if (!s || !s->verify) {
		pthread_mutex_unlock(&p->lock);
		return false;
	}
	if (s->state != PF_QUEUED && wait_ready(p, s)) {
		const struct bch_btree_ptr *sp = bkey_val(s->key);
		ok = !s->err && s->v_nr && (s->verify_compare || !compare) && s->check == check &&
		     bkey_bytes(s->key) == bkey_bytes(ptr) && !memcmp(s->key, ptr, bkey_bytes(ptr)) &&
		     sp->seq == bp->seq;
		if (ok) {
			if (check)
				memcpy(priv, s->priv, s->priv_len);
			ls->nr_bsets = s->v_nr;
			memcpy(ls->bset_start, s->v_start, sizeof(ls->bset_start));
			memcpy(ls->bset_end, s->v_end, sizeof(ls->bset_end));
		}
		if (ok)
			p->taken++;
	}
	if (s->state != PF_DROPPED) {
		slot_clear(s);
		s->state = PF_FREE;
	}
	pthread_mutex_unlock(&p->lock);
	return ok;
}

/* s reads the first copy of the leaf ptr points to (its device, place, seq and range). */
static void ls_target(struct bch_fs *c, struct bch_leaf_stream *s, const struct bch_bkey *ptr)
{
	const struct bch_btree_ptr *bp = bkey_val(ptr);

	s->c = c;
	s->bdev = ptr_bdev(c, &bp->ptrs[0]);
	s->where = (uint64_t)bp->ptrs[0].offset << 9;
	s->seq = bp->seq;
	s->min_key = bp->min_key;
	s->max_key = ptr->p;
}

/*
 * Did pass 3 verify every leaf this open can be asked for (fsck -n after
 * pass 3, btree_prefetch.h)?  Then only where its bsets lie is read, from
 * their headers (ls_layout()).  Not after a journal replay: the read path
 * then forgives a torn append (a bset failing its checksum, its keys in
 * the journal), which the headers alone would not tell from a good bset.
 */
static bool ls_trusted(struct bch_fs *c, bool compare, bch_leaf_check_fn check)
{
	return !compare && !check && c->read_only && c->fsck_copies_checked &&
	       !c->journal_replayed && !c->replay_oldest;
}

/*
 * Where the bsets of the leaf s targets lie, from the node's header and
 * the header of the block after each bset, as ls_open() finds them: 0, or
 * 1 (read it the ordinary way).  Nothing else is read: the caller trusts
 * the bytes (ls_trusted()); bch_leaf_stream_next() still checks every
 * key's size, order and range, so bytes changed since cannot crash it.
 */
static int ls_layout(struct bch_fs *c, struct bch_leaf_stream *s, unsigned id,
		     const struct bch_bkey *ptr)
{
	const struct bch_btree_ptr *bp = bkey_val(ptr);
	size_t nb = (size_t)c->sb->btree_node_size << 9, bs = (size_t)c->sb->block_size << 9;
	struct bch_btree_node n;
	struct bch_btree_node_entry e;

	if (bch_dev_read(s->bdev, &n, sizeof(n), s->where) ||
	    n.magic != BCH_BTREE_NODE_MAGIC || memcmp(n.fs_uuid, c->sb->uuid, BCH_UUID_SIZE) ||
	    n.btree_id != id || n.level || n.seq != bp->seq || n.keys.seq != n.seq ||
	    !bpos_eq(n.min_key, s->min_key) || !bpos_eq(n.max_key, s->max_key) ||
	    sizeof(n) + (size_t)n.keys.u64s * 8 > nb)
		return 1;
	size_t start = sizeof(n), end = start + (size_t)n.keys.u64s * 8, off;
	for (;;) {
		if (s->nr_bsets == LS_BSETS_MAX)
			return 1;
		s->bset_start[s->nr_bsets] = start;
		s->bset_end[s->nr_bsets++] = end;
		off = (end + bs - 1) / bs * bs;
		if (off + sizeof(e) > nb)
			break;
		if (bch_dev_read(s->bdev, &e, sizeof(e), s->where + off))
			return 1;
		if (e.keys.seq != s->seq)
			break;	/* the end of what this node's life wrote */
		start = off + sizeof(e);
		end = start + (size_t)e.keys.u64s * 8;
		if (end > nb)
			return 1;
	}
	if (off < ((size_t)bp->sectors_written << 9))
		return 1;
	ls_start_keys(s);
	return 0;
}

int bch_leaf_stream_open(struct bch_fs *c, struct bch_leaf_stream *s, unsigned id,
			 const struct bch_bkey *ptr, bool compare, bch_leaf_check_fn check, void *priv)
{
	if (ls_trusted(c, compare, check) && ptr->type == BCH_BKEY_btree_ptr &&
	    bch_btree_ptr_nr(ptr) && !bch_fs_encrypted(c)) {
		ls_target(c, s, ptr);
		s->nr_bsets = 0;
		s->err = 0;
		if (s->bdev && !ls_layout(c, s, id, ptr))
			return 0;
	}
	/* verified ahead by the worker (check() given its keys there): its keys only */
	if (ptr->type == BCH_BKEY_btree_ptr && bch_btree_ptr_nr(ptr) &&
	    take_verified(c, ptr, compare, check, priv, s)) {
		ls_target(c, s, ptr);
		if (s->bdev) {
			ls_start_keys(s);
			return 0;
		}
	}
	return ls_open(c, s, id, ptr, compare, check, priv);
}

static int ls_open(struct bch_fs *c, struct bch_leaf_stream *s, unsigned id,
		   const struct bch_bkey *ptr, bool compare, bch_leaf_check_fn check, void *priv)
{
	const struct bch_btree_ptr *bp = bkey_val(ptr);
	unsigned nr = bch_btree_ptr_nr(ptr);
	size_t nb = (size_t)c->sb->btree_node_size << 9, bs = (size_t)c->sb->block_size << 9;
	struct ls_window *w = &s->w[0];

	if (ptr->type != BCH_BKEY_btree_ptr || !nr || bch_fs_encrypted(c) ||
	    nb < sizeof(struct bch_btree_node) || bs < sizeof(struct bch_btree_node) ||
	    bs > LS_BUF - LS_KEY_MAX)
		return 1;
	ls_target(c, s, ptr);
	s->nr_bsets = 0;
	s->err = 0;
	if (!s->bdev)
		return 1;
	/* the first pass reads the node in order through the whole buffer */
	*w = (struct ls_window) { .buf = s->buf, .piece = LS_BUF - LS_KEY_MAX };

	char tmp[LS_TMP] __attribute__((aligned(4096)));	/* not the heap: see compare() */
	struct ls_verify v = { .tmp = tmp, .written = nb, .limit = nb };
	for (unsigned i = 1; compare && i < nr; i++) {
		if (!(v.other[v.nr_other] = ptr_bdev(c, &bp->ptrs[i])))
			return 1;
		v.other_where[v.nr_other++] = (uint64_t)bp->ptrs[i].offset << 9;
	}

	/* the header's block (nothing verified yet: checked as the read path does) */
	w->stop = min_sz(bs, nb);
	if (ls_read(s, w, w->stop, NULL))
		return 1;
	const struct bch_btree_node *n = (const void *)s->buf;
	if (n->magic != BCH_BTREE_NODE_MAGIC || memcmp(n->fs_uuid, c->sb->uuid, BCH_UUID_SIZE) ||
	    n->btree_id != id || n->level || n->seq != bp->seq || n->keys.seq != n->seq ||
	    !bpos_eq(n->min_key, s->min_key) || !bpos_eq(n->max_key, s->max_key) ||
	    (n->csum_type != BCH_CSUM_none && n->csum_type != BCH_CSUM_crc32c &&
	     n->csum_type != BCH_CSUM_crc64) ||
	    sizeof(*n) + (size_t)n->keys.u64s * 8 > nb)
		return 1;
	struct bch_csum want = n->csum;
	v.csum_type = n->csum_type;
	v.crc = v.csum_type == BCH_CSUM_crc32c ? 0xffffffffU : ~0ULL;
	v.csum_lo = 16;		/* from magic on */
	v.csum_end = sizeof(*n) + (size_t)n->keys.u64s * 8;
	ls_verify_bytes(&v, s->buf, 0, w->fill);
	size_t start = sizeof(*n), end = v.csum_end, off;

	/*
	 * Each bset: its keys as they come (check() keeps what it learns until
	 * the checksums say yes), its checksum; then the header of the block
	 * after it: another bset of this node, or the end.  Reads go no further
	 * than the block after the bset being read.
	 */
	for (;;) {
		w->stop = min_sz(nb, (end + bs - 1) / bs * bs + bs);
		w->at = start;
		w->any = false;
		w->end = end;
		while (!v.bad && w->at < end) {
			const struct bch_bkey *k = ls_key(s, w, &v);
			if (!k || (check && check(priv, k)))
				return 1;
		}
		if (w->read_to < end)
			return 1;
		struct bch_csum got = { 0 };
		if (v.csum_type != BCH_CSUM_none)
			got.lo = ~v.crc & (v.csum_type == BCH_CSUM_crc32c ? 0xffffffffULL : ~0ULL);
		if (v.bad || !bch_csum_eq(got, want) || s->nr_bsets == LS_BSETS_MAX)
			return 1;
		s->bset_start[s->nr_bsets] = start;
		s->bset_end[s->nr_bsets++] = end;

		off = (end + bs - 1) / bs * bs;
		if (off + sizeof(struct bch_btree_node_entry) > nb)
			break;
		w->at = off;
		if (ls_need(s, w, sizeof(struct bch_btree_node_entry), &v))
			return 1;
		const struct bch_btree_node_entry *e = (const void *)(w->buf + (off - w->base));
		if (e->keys.seq != s->seq)	/* (n is gone from the buffer by now) */
			break;	/* the end of what this node's life wrote */
		if (off + sizeof(*e) + (size_t)e->keys.u64s * 8 > nb)
			return 1;
		want = e->csum;
		start = off + sizeof(*e);
		end = start + (size_t)e->keys.u64s * 8;
		/* the next bset's checksum, from its header (read already) on */
		v.crc = v.csum_type == BCH_CSUM_crc32c ? 0xffffffffU : ~0ULL;
		v.csum_lo = off + sizeof(e->csum);
		v.csum_end = end;
		ls_csum(&v, w->buf + (v.csum_lo - w->base), v.csum_lo, w->read_to - v.csum_lo);
	}
	/* the parent says more was written: damage, or a torn append (the read path decides) */
	if (off < ((size_t)bp->sectors_written << 9))
		return 1;
	/* the block after: zeros in every copy (what was read of it is in the buffer) */
	v.written = off;
	v.limit = min_sz(off + bs, nb);
	if (w->read_to > off &&
	    !all_zero(w->buf + (max_sz(off, w->base) - w->base), min_sz(w->read_to, v.limit) - max_sz(off, w->base)))
		return 1;
	w->stop = v.limit;
	while (!v.bad && w->read_to < v.limit) {
		w->base = w->read_to;
		w->fill = 0;
		if (ls_read(s, w, min_sz(w->piece, v.limit - w->read_to), &v))
			return 1;
	}
	if (v.bad)
		return 1;
	/* verified: the keys again from the first (page cache) */
	ls_start_keys(s);
	if (check && check(priv, NULL)) {
		/* and, asked, as the merge yields them (btree_prefetch.h) */
		const struct bch_bkey *k;
		while ((k = bch_leaf_stream_next(s)))
			check(priv, k);
		check(priv, NULL);
		if (s->err)
			return 1;
		ls_start_keys(s);
	}
	return 0;
}

bool bch_leaf_stream_allowed(struct bch_fs *c)
{
	return c->read_only && !bch_fs_encrypted(c) && !bch_btree_cache_first_dirty(c);
}

const struct bch_bkey *bch_leaf_stream_next(struct bch_leaf_stream *s)
{
	if (s->nr_bsets == 1) {		/* most leaves: nothing to merge */
		struct ls_window *w = &s->w[0];
		while (w->at < w->end) {
			const struct bch_bkey *k = ls_key(s, w, NULL);
			if (!k) {
				s->err = -BCH_ERR_btree_node_bad;
				return NULL;
			}
			if (k->type != BCH_BKEY_deleted)
				return k;
		}
		return NULL;
	}
	for (;;) {
		const struct bch_bkey *best = NULL;

		/* each bset's next key; of those at the lowest position, the latest bset's */
		for (unsigned i = 0; i < s->nr_bsets; i++) {
			struct ls_window *w = &s->w[i];
			if (!w->k && !w->done) {
				if (w->at >= w->end) {
					w->done = true;
				} else if (!(w->k = ls_key(s, w, NULL))) {
					s->err = -BCH_ERR_btree_node_bad;
					return NULL;
				}
			}
			if (w->k && (!best || bpos_cmp(w->k->p, best->p) <= 0))
				best = w->k;
		}
		if (!best)
			return NULL;
		/* the position's keys are used up (read again at the next call) */
		for (unsigned i = 0; i < s->nr_bsets; i++)
			if (s->w[i].k && s->w[i].k != best && bpos_eq(s->w[i].k->p, best->p))
				s->w[i].k = NULL;
		for (unsigned i = 0; i < s->nr_bsets; i++)
			if (s->w[i].k == best)
				s->w[i].k = NULL;
		if (best->type != BCH_BKEY_deleted)	/* a deletion: nothing there */
			return best;
	}
}
