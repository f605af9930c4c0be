// SPDX-License-Identifier: GPL-2.0
/*
 * fs_read.c - a file's read planned under the engine lock, and the
 * verified (and decrypted) read-ahead of a sequential reader (see
 * fs_read.h).
 *
 * Only what bch_fs_read() answers with data is planned; every error and
 * every special case is left to it, so its answers stay the only ones.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include "bcachefs.h"
#include "blockdev.h"
#include "checksum.h"
#include "crypt.h"
#include "extent_encode.h"
#include "fs_read.h"
#include "inode.h"
#include "io.h"
#include "opts.h"
#include "snapshot.h"

static int plan(struct bch_fs *c, uint64_t inum, uint64_t offset, size_t len, struct bch_read_plan *pl)
{
	struct bch_inode i;
	struct bch_io_opts o;

	if (bch_inode_get(c, inum, &i) || (!S_ISREG(i.mode) && !S_ISLNK(i.mode)))
		return -EAGAIN;
	bch_io_opts_get(c, &i, &o);
	if (o.promote_target && !c->read_only && !c->opts.v[Opt_fsck])
		return -EAGAIN;		/* reads add cached copies: that writes */
	if (offset >= i.size)
		len = 0;
	else if (len > i.size - offset)
		len = i.size - offset;
	if (len > SSIZE_MAX)
		len = SSIZE_MAX & ~4095UL;
	return bch_data_read_plan(c, inum, offset, len, pl);
}

int bch_fs_read_plan(struct bch_fs *c, uint64_t inum, uint64_t offset, size_t len,
		     struct bch_read_plan *pl)
{
	struct bch_view v;
	int r = bch_view_enter(c, &v, &inum);

	if (r)
		return r;
	r = plan(c, inum, offset, len, pl);
	bch_view_exit(&v);
	return r;
}

/*
 * The read-ahead (fs_read.h): SLOTS extents, each the whole of one
 * uncompressed extent whose checksum or MAC matched, keyed by where its
 * copy lies and its key's version (an encrypted one's nonce) and checksum.
 * A slot is
 *   EMPTY    free;
 *   CLAIMED  a run is reading this extent itself (no bytes): the
 *            read-ahead leaves it alone;
 *   DONE     a run read it (no bytes): the read-ahead leaves it alone;
 *   FILLING  a read-ahead is reading and verifying it: a run wanting it
 *            waits (ra->cond) rather than do the same work again;
 *   READY    verified, for a run whose plan has slot->seq: the run
 *            copies or replies from it (plain: not encrypted, or
 *            decrypted by the filler after the MAC matched) or decrypts
 *            from it (ciphertext) straight into its buffer.
 * Slots move under ra->lock; their bytes are written only while FILLING
 * (by the one filler) and read only while READY with refs held.
 *
 * Decrypt-ahead: the filler, after the reply that planned it, checks the
 * MAC and then decrypts in place while the ciphertext is still in its
 * cache, so the reply path of a later read only copies (a quarter of
 * the decrypt's time: the cipher leaves the path the kernel waits on).
 * The plaintext is the mount's own, for its next reads: kept only in
 * buffers locked in memory (never swapped: no plaintext reaches a disk)
 * and left out of core dumps, wiped when the buffer goes; where mlock()
 * fails (RLIMIT_MEMLOCK) the slot keeps ciphertext as before.
 */
#define SLOTS		128		/* twice the window of 64 KiB extents: one read partly is kept */
#define SLOT_MAX	BCH_READAHEAD_SLOT_MAX	/* larger extents are not read ahead */
#define AHEAD_BYTES	(4ULL << 20)	/* how far past a sequential read */
#define AHEAD_UNIT	(1ULL << 20)	/* planned once this much of that is missing */
#define GROUP_MAX	16		/* extents per uncached read at most */
#define REPLY_IOV_MAX	256		/* iovecs of a reply from the slots (the kernel takes 1024) */
#define ARENA_CHUNK	(2U << 20)	/* a huge page: locked (mlock()) at once */
#define AHEAD_NEAR	(1ULL << 20)	/* a read this close to the last end is sequential (as
					 * fusemount's readahead hint, which leaves these extents to us) */

enum slot_state { SLOT_EMPTY, SLOT_CLAIMED, SLOT_DONE, SLOT_FILLING, SLOT_READY };

struct slot {
	enum slot_state		state;
	unsigned		refs;		/* runs decrypting from it (READY) */
	bool			used;		/* a run read it (READY, DONE) */
	uint64_t		tick;		/* last use: the oldest goes first */
	struct bch_blockdev	*bdev;		/* the key: the copy read... */
	uint64_t		dev_off;
	uint64_t		version;	/* ...its nonce... */
	struct bch_csum		csum;		/* ...and MAC */
	size_t			bytes;
	uint64_t		seq;		/* c->data_reuse_seq of the plan it was read by */
	bool			plain;		/* READY: buf holds the plaintext */
	bool			locked;		/* buf is mlock()ed: it may hold plaintext */
	char			*buf;		/* SLOT_MAX bytes of the arena, NULL: never used */
};

struct bch_fs_read_cache {
	pthread_mutex_t		lock;
	pthread_cond_t		cond;		/* a slot left FILLING */
	uint64_t		tick;
	struct slot		slot[SLOTS];
	char			*arena;		/* the slots' buffers (slot_buf()) */
	enum { CHUNK_UNTRIED, CHUNK_LOCKED, CHUNK_REFUSED } chunk[SLOTS * SLOT_MAX / ARENA_CHUNK];
	/* bch_fs_read_ahead_plan() only (the engine lock serialises it): */
	uint64_t		inum, end;	/* the last read's file and end */
	uint64_t		ahead_to;	/* read ahead up to here in inum */
	/* counters (tests, benchmarks) */
	uint64_t		nr_hit, nr_filled, nr_plain;
};

int bch_fs_read_cache_new(struct bch_fs_read_cache **ret)
{
	struct bch_fs_read_cache *ra = calloc(1, sizeof(*ra));

	if (!ra)
		return -ENOMEM;
	pthread_mutex_init(&ra->lock, NULL);
	pthread_cond_init(&ra->cond, NULL);
	*ret = ra;
	return 0;
}

void bch_fs_read_cache_free(struct bch_fs_read_cache *ra)
{
	if (!ra)
		return;
	if (ra->arena) {
		/* the plaintext wiped before the pages go */
		for (unsigned i = 0; i < SLOTS; i++)
			if (ra->slot[i].buf)
				explicit_bzero(ra->slot[i].buf, SLOT_MAX);
		munmap(ra->arena, SLOTS * SLOT_MAX);
	}
	pthread_cond_destroy(&ra->cond);
	pthread_mutex_destroy(&ra->lock);
	free(ra);
}

void bch_fs_read_cache_counts(struct bch_fs_read_cache *ra, uint64_t *hits, uint64_t *filled,
			      uint64_t *decrypted)
{
	pthread_mutex_lock(&ra->lock);
	*hits = ra->nr_hit;
	*filled = ra->nr_filled;
	*decrypted = ra->nr_plain;
	pthread_mutex_unlock(&ra->lock);
}

static bool encrypted(const struct bch_read_piece *p)
{
	return p->crc.csum_type == BCH_CSUM_chacha20_poly1305;
}

/*
 * Is p a piece of an uncompressed extent small enough for a slot: an
 * encrypted one, or a plain one on a device that reads uncached (else the
 * page cache and io.h's hints serve it: read into a slot through it, it
 * would be copied once more, not once less)?
 */
static bool cacheable(const struct bch_read_piece *p)
{
	return p->bdev && bch_readahead_slot_takes(&p->crc) &&
	       (encrypted(p) || bch_dev_uncached_ok(p->bdev));
}

static size_t piece_bytes(const struct bch_read_piece *p)
{
	return (size_t)p->crc.compressed_sectors << BCH_SECTOR_SHIFT;
}

static bool slot_is(const struct slot *s, const struct bch_read_piece *p)
{
	return s->state != SLOT_EMPTY && s->bdev == p->bdev && s->dev_off == p->dev_off &&
	       s->version == p->version && s->bytes == piece_bytes(p) &&
	       !memcmp(&s->csum, &p->crc.csum, sizeof(s->csum));
}

/* Under ra->lock: the slot holding p's extent, or NULL. */
static struct slot *slot_find(struct bch_fs_read_cache *ra, const struct bch_read_piece *p)
{
	for (unsigned i = 0; i < SLOTS; i++)
		if (slot_is(&ra->slot[i], p))
			return &ra->slot[i];
	return NULL;
}

static struct slot *slot_set(struct bch_fs_read_cache *ra, struct slot *s, const struct bch_read_piece *p,
			     enum slot_state state);

/*
 * Under ra->lock: a slot for p, set to state, or NULL: an empty one, else
 * the least recently used of those a run read (DONE or READY), else of
 * those read ahead and not yet read (READY).
 */
static struct slot *slot_take(struct bch_fs_read_cache *ra, const struct bch_read_piece *p,
			      enum slot_state state)
{
	struct slot *s = NULL;

	for (unsigned i = 0; i < SLOTS; i++) {
		struct slot *t = &ra->slot[i];
		if (t->state == SLOT_EMPTY) {
			s = t;
			break;
		}
		if (t->state != SLOT_DONE && (t->state != SLOT_READY || t->refs))
			continue;
		if (!s || (t->used && !s->used) || (t->used == s->used && t->tick < s->tick))
			s = t;
	}
	return s ? slot_set(ra, s, p, state) : NULL;
}

/* Under ra->lock: s (not held) set to hold p's extent, in state. */
static struct slot *slot_set(struct bch_fs_read_cache *ra, struct slot *s, const struct bch_read_piece *p,
			     enum slot_state state)
{
	s->state = state;
	s->refs = 0;
	s->used = false;
	s->plain = false;
	s->tick = ++ra->tick;
	s->bdev = p->bdev;
	s->dev_off = p->dev_off;
	s->version = p->version;
	s->csum = p->crc.csum;
	s->bytes = piece_bytes(p);
	return s;
}

int bch_fs_read_ahead_plan(struct bch_fs *c, struct bch_fs_read_cache *ra, uint64_t inum,
			   uint64_t offset, size_t len, struct bch_read_plan *ahead)
{
	uint64_t end = offset + len;
	bool seq = ra && inum == ra->inum && offset + AHEAD_NEAR >= ra->end && offset <= ra->end + AHEAD_NEAR;
	int r = -EAGAIN;

	ahead->nr = 0;
	ahead->p = NULL;
	if (!ra)
		return r;
	if (!seq)
		ra->ahead_to = 0;
	ra->inum = inum;
	ra->end = end;
	if (!seq || !len)
		return r;
	uint64_t from = ra->ahead_to > end ? ra->ahead_to : end;
	/* in units of AHEAD_UNIT: one device read for several extents */
	if (from + AHEAD_UNIT > end + AHEAD_BYTES)
		return r;
	r = bch_fs_read_plan(c, inum, from, end + AHEAD_BYTES - from, ahead);
	if (r)
		return r;
	if (!ahead->len) {
		bch_data_read_plan_free(ahead);
		return -EAGAIN;		/* at the end of the file */
	}
	ra->ahead_to = from + ahead->len;
	return 0;
}

/*
 * The slots' buffers, SLOT_MAX bytes each, in one arena of huge pages
 * where the kernel has them: an uncached read into a slot and the reply
 * from it pin its pages (get_user_pages()), a tenth of the daemon's CPU in
 * a sequential read with 4 KiB pages.  Reserved at the first fill, its
 * pages taken as they are first written; left out of core dumps.
 */
static int arena_get(struct bch_fs_read_cache *ra)
{
	size_t bytes = SLOTS * SLOT_MAX;

	pthread_mutex_lock(&ra->lock);
	if (!ra->arena) {
		/* aligned to a huge page: the mapping's one more chunk, trimmed */
		char *m = mmap(NULL, bytes + ARENA_CHUNK, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (m != MAP_FAILED) {
			uintptr_t a = ((uintptr_t)m + ARENA_CHUNK - 1) & ~(uintptr_t)(ARENA_CHUNK - 1);
			char *al = (char *)a;

			if (al > m)
				munmap(m, al - m);
			munmap(al + bytes, m + ARENA_CHUNK - al);
#ifdef MADV_HUGEPAGE
			(void)madvise(al, bytes, MADV_HUGEPAGE);
#endif
#ifdef MADV_DONTDUMP
			(void)madvise(al, bytes, MADV_DONTDUMP);
#endif
			ra->arena = al;
		}
	}
	pthread_mutex_unlock(&ra->lock);
	return ra->arena ? 0 : -ENOMEM;
}

/*
 * s's buffer (FILLING); for an encrypted extent, locked in memory where it
 * can be, a huge page of the arena at once (a lock of part of one would
 * split it).
 */
static int slot_buf(struct bch_fs_read_cache *ra, struct slot *s, bool lock)
{
	unsigned i = s - ra->slot;
	int r = arena_get(ra);

	if (r)
		return r;
	s->buf = ra->arena + (size_t)i * SLOT_MAX;
	if (!lock)
		return 0;
	unsigned k = (size_t)i * SLOT_MAX / ARENA_CHUNK;
	pthread_mutex_lock(&ra->lock);
	if (ra->chunk[k] == CHUNK_UNTRIED)
		ra->chunk[k] = mlock(ra->arena + (size_t)k * ARENA_CHUNK, ARENA_CHUNK) ? CHUNK_REFUSED
										       : CHUNK_LOCKED;
	s->locked = ra->chunk[k] == CHUNK_LOCKED;
	pthread_mutex_unlock(&ra->lock);
	return 0;
}

/*
 * Verify p's extent in s (FILLING), read already when r is 0, then decrypt
 * it there when its buffer is locked; then READY or EMPTY.
 */
static void slot_fill(struct bch_fs_read_cache *ra, struct slot *s, const struct bch_read_plan *ahead,
		      const struct bch_read_piece *p, int r)
{
	struct bch_fs *c = ahead->c;
	bool plain = false;

	if (!r && !encrypted(p)) {
		r = bch_csum_verify(p->crc.csum_type, s->buf, s->bytes, p->crc.csum);
		plain = true;
	} else if (!r) {
		r = bch_crypt_extent_mac_check(c, p->version, s->buf, s->bytes, &p->crc.csum);
		/* only after the MAC matched (invariant (2) of crypt.h's pieces) */
		if (!r && s->locked)
			plain = !bch_crypt_extent_xor_at(c, p->version, 0, s->buf, s->buf, s->bytes);
	}
	/* no space the plan read from was rewritten meanwhile (io.h, as a run checks) */
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (!r && __atomic_load_n(&c->data_reuse_seq, __ATOMIC_SEQ_CST) != ahead->seq)
		r = -EAGAIN;
	pthread_mutex_lock(&ra->lock);
	s->state = r ? SLOT_EMPTY : SLOT_READY;
	s->seq = ahead->seq;
	s->plain = plain;
	if (!r) {
		ra->nr_filled++;
		ra->nr_plain += plain && encrypted(p);
	}
	pthread_cond_broadcast(&ra->cond);
	pthread_mutex_unlock(&ra->lock);
}

struct group {
	struct bch_fs_read_cache	*ra;
	const struct bch_read_plan	*ahead;
	struct slot			**g;
	const struct bch_read_piece	**gp;
};

static void group_fill_one(void *arg, unsigned i)
{
	struct group *g = arg;

	slot_fill(g->ra, g->g[i], g->ahead, g->gp[i], 0);
}

/*
 * Read the extents of the group g[0..n) (slots FILLING for pieces gp[],
 * contiguous on one device): in one uncached read where the device can,
 * else each the usual way; then verify and decrypt each.
 */
static void group_fill(struct bch_fs_read_cache *ra, const struct bch_read_plan *ahead, struct slot **g,
		       const struct bch_read_piece **gp, unsigned n)
{
	struct iovec iov[GROUP_MAX] = { { 0 } };
	int r = 0;

	for (unsigned i = 0; i < n && !r; i++) {
		r = slot_buf(ra, g[i], encrypted(gp[i]));
		iov[i].iov_base = g[i]->buf;
		iov[i].iov_len = g[i]->bytes;
	}
	if (r || bch_dev_readv_uncached(gp[0]->bdev, iov, n, gp[0]->dev_off)) {
		for (unsigned i = 0; i < n; i++)
			slot_fill(ra, g[i], ahead, gp[i],
				  r ?: bch_dev_read_try(gp[i]->bdev, g[i]->buf, g[i]->bytes, gp[i]->dev_off));
		return;
	}
	bool cipher = false;

	for (unsigned i = 0; i < n; i++)
		cipher |= encrypted(gp[i]);
	if (!cipher) {
		/*
		 * plain: checksums alone, 40 us for 1 MiB (checksum.c's fold),
		 * less than waking a worker and waiting for its share, which
		 * a loaded machine preempts while this thread waits
		 */
		for (unsigned i = 0; i < n; i++)
			slot_fill(ra, g[i], ahead, gp[i], 0);
		return;
	}
	struct group g_ = { .ra = ra, .ahead = ahead, .g = g, .gp = gp };
	bch_io_pool_run(n, group_fill_one, &g_);	/* MACs and ciphers on a free core too */
}

void bch_fs_read_ahead_run(struct bch_fs_read_cache *ra, struct bch_read_plan *ahead)
{
	struct slot *g[GROUP_MAX];
	const struct bch_read_piece *gp[GROUP_MAX];
	unsigned n = 0;

	for (unsigned i = 0; i < ahead->nr; i++) {
		const struct bch_read_piece *p = &ahead->p[i];
		struct slot *s = NULL;

		if (!cacheable(p))
			continue;
		/* a group ends where the next extent does not follow on the device */
		if (n && (n == GROUP_MAX || p->bdev != gp[0]->bdev ||
			  p->dev_off != gp[n - 1]->dev_off + piece_bytes(gp[n - 1]))) {
			group_fill(ra, ahead, g, gp, n);
			n = 0;
		}
		pthread_mutex_lock(&ra->lock);
		struct slot *f = slot_find(ra, p);
		if (!f)
			s = slot_take(ra, p, SLOT_FILLING);
		else if (f->state == SLOT_READY && !f->refs && f->seq < ahead->seq)
			s = slot_set(ra, f, p, SLOT_FILLING);	/* read before space was reused: no
								 * later plan takes it, so read it again */
		pthread_mutex_unlock(&ra->lock);
		if (s) {
			g[n] = s;
			gp[n++] = p;
		} else if (n) {
			group_fill(ra, ahead, g, gp, n);
			n = 0;
		}
	}
	if (n)
		group_fill(ra, ahead, g, gp, n);
	bch_data_read_plan_free(ahead);
}

/*
 * Under ra->lock: p copied or decrypted into dst if a slot has its extent
 * verified for this plan (waiting while it is being read ahead); else claim a slot
 * for p so that no read-ahead reads it again meanwhile (*claimed, NULL
 * when none was free).  hold (a reply from the slots, bch_fs_read_run_reply()):
 * a slot of plaintext is not copied but set there and kept (its refs) until
 * the reply is done.
 */
static bool take_or_claim(struct bch_fs_read_cache *ra, const struct bch_read_plan *pl,
			  const struct bch_read_piece *p, char *dst, struct slot **claimed,
			  struct slot **hold)
{
	struct slot *s;

	while ((s = slot_find(ra, p)) && s->state == SLOT_FILLING)
		pthread_cond_wait(&ra->cond, &ra->lock);
	*claimed = NULL;
	if (s && s->state == SLOT_READY && s->seq == pl->seq && (s->plain || !(p->src_off % 64))) {
		int r = 0;

		s->refs++;
		if (hold && s->plain) {
			*hold = s;
			s->used = true;
			s->tick = ++ra->tick;
			ra->nr_hit++;
			return true;
		}
		pthread_mutex_unlock(&ra->lock);
		if (s->plain)
			memcpy(dst, s->buf + p->src_off, p->len);
		else
			r = bch_crypt_extent_xor_at(pl->c, p->version, p->src_off, s->buf + p->src_off, dst,
						    p->len);
		pthread_mutex_lock(&ra->lock);
		s->refs--;
		s->used = true;
		s->tick = ++ra->tick;
		if (!r)
			ra->nr_hit++;
		return !r;
	}
	if (!s)
		*claimed = slot_take(ra, p, SLOT_CLAIMED);
	return false;
}

/* Do pl's pieces follow each other from byte 0 of the buffer to its end? */
static bool pieces_in_order(const struct bch_read_plan *pl)
{
	uint64_t at = 0;

	for (unsigned i = 0; i < pl->nr; i++) {
		if (pl->p[i].buf_off != at)
			return false;
		at += pl->p[i].len;
	}
	return at == pl->len;
}

/* rep's iovecs: each held piece from its slot, the bytes between from buf. */
static void reply_iov(const struct bch_read_plan *pl, char *buf, struct slot **held,
		      struct bch_fs_read_reply *rep)
{
	struct iovec *v = rep->iov;
	bool last_buf = false;		/* v[rep->nr - 1] is in buf */

	rep->nr = 0;
	for (unsigned i = 0; i < pl->nr; i++) {
		const struct bch_read_piece *p = &pl->p[i];
		char *from = held[i] ? held[i]->buf + p->src_off : buf + p->buf_off;

		if (!p->len)
			continue;
		if (!held[i] && last_buf) {	/* pieces in order: buf's bytes follow on */
			v[rep->nr - 1].iov_len += p->len;
			continue;
		}
		v[rep->nr].iov_base = from;
		v[rep->nr++].iov_len = p->len;
		last_buf = !held[i];
	}
}

/* Drop the slots of n pieces held[] (NULL: none) for a reply. */
static void release(struct bch_fs_read_cache *ra, struct slot **held, unsigned n)
{
	pthread_mutex_lock(&ra->lock);
	for (unsigned i = 0; i < n; i++)
		if (held[i]) {
			held[i]->refs--;
			held[i]->tick = ++ra->tick;
		}
	pthread_mutex_unlock(&ra->lock);
}

static ssize_t run(struct bch_fs_read_cache *ra, struct bch_read_plan *pl, void *buf,
		   struct bch_fs_read_reply *rep)
{
	struct bch_read_plan rest = *pl;
	struct slot **claimed, **held = NULL;
	ssize_t r;
	unsigned i;

	for (i = 0; i < pl->nr && !cacheable(&pl->p[i]); i++)
		;
	if (!ra || i == pl->nr)
		return bch_data_read_plan_run(pl, buf);
	rest.p = malloc(pl->nr * sizeof(*rest.p));
	claimed = calloc(pl->nr, sizeof(*claimed));
	/* a reply from the slots: an iovec a piece at most, REPLY_IOV_MAX at most */
	if (rep && pl->nr <= REPLY_IOV_MAX && pieces_in_order(pl)) {
		held = calloc(pl->nr, sizeof(*held));
		rep->iov = malloc(pl->nr * sizeof(*rep->iov));
		if (!held || !rep->iov) {
			free(held);
			free(rep->iov);
			rep->iov = NULL;
			held = NULL;
		}
	}
	if (!rest.p || !claimed) {
		free(rest.p);
		free(claimed);
		free(held);
		if (rep) {
			free(rep->iov);
			rep->iov = NULL;
		}
		return bch_data_read_plan_run(pl, buf);
	}
	/* what the read-ahead has is copied out (or held); the rest is read as the plan says */
	rest.nr = 0;
	pthread_mutex_lock(&ra->lock);
	for (i = 0; i < pl->nr; i++) {
		const struct bch_read_piece *p = &pl->p[i];
		if (!cacheable(p) || !take_or_claim(ra, pl, p, (char *)buf + p->buf_off, &claimed[i],
						    held ? &held[i] : NULL))
			rest.p[rest.nr++] = *p;
	}
	pthread_mutex_unlock(&ra->lock);
	r = bch_data_read_plan_run(&rest, buf);
	pthread_mutex_lock(&ra->lock);
	for (i = 0; i < pl->nr; i++)
		if (claimed[i] && claimed[i]->state == SLOT_CLAIMED) {
			claimed[i]->state = SLOT_DONE;
			claimed[i]->used = true;
			claimed[i]->tick = ++ra->tick;
		}
	pthread_mutex_unlock(&ra->lock);
	free(rest.p);
	free(claimed);
	if (held) {
		bool any = false;

		for (i = 0; i < pl->nr && !any; i++)
			any = held[i];
		if (r >= 0 && any) {
			reply_iov(pl, buf, held, rep);
			rep->held = (void **)held;
			rep->nr_held = pl->nr;
			rep->ra = ra;
		} else {
			release(ra, held, pl->nr);
			free(held);
			free(rep->iov);
			rep->iov = NULL;
		}
	}
	return r;
}

ssize_t bch_fs_read_run(struct bch_fs_read_cache *ra, struct bch_read_plan *pl, void *buf)
{
	return run(ra, pl, buf, NULL);
}

ssize_t bch_fs_read_run_reply(struct bch_fs_read_cache *ra, struct bch_read_plan *pl, void *buf,
			      struct bch_fs_read_reply *rep)
{
	memset(rep, 0, sizeof(*rep));
	return run(ra, pl, buf, rep);
}

void bch_fs_read_reply_done(struct bch_fs_read_reply *rep)
{
	if (rep->held)
		release(rep->ra, (struct slot **)rep->held, rep->nr_held);
	free(rep->held);
	free(rep->iov);
	memset(rep, 0, sizeof(*rep));
}
