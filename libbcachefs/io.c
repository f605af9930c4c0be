// SPDX-License-Identifier: GPL-2.0
/*
 * io.c - the data path (see io.h).
 *
 * Invariants
 *   (1) An extent key is added to a transaction only after its data has
 *       been written to every replica it points to.
 *   (2) An encoded extent lies inside one bucket of each device.
 *   (3) Data is returned to a reader only after its checksum matched.
 *   (4) A planned read (bch_data_read_plan_run()) returns data only if
 *       c->data_reuse_seq did not move between its plan and the end of its
 *       device reads: every write over space that may hold data bumps it
 *       first (io.h), so what it read is what the plan's keys pointed at.
 *
 * A copy on a member that was not given (opened degraded) is skipped, as
 * one that failed its read, but is no damage: it is not counted in
 * data_bad_copies.  When no copy is left the read fails with EIO.
 *
 * Threads: the cipher of encrypted extents runs on the calling thread and
 * a small worker pool (one thread fewer than the CPUs, at most 7), here and
 * nowhere else: bch_io_encrypt_batch() / bch_io_decrypt_batch() split the
 * extents of one request into pieces (XChaCha20 of 64 KiB, the MAC of one
 * extent) and wait for all of them; a batch of less than 512 KiB runs on
 * the caller alone.  The encrypted units of a write are a pipeline
 * (pool_run_ordered(); a planned write's from 512 KiB up, bch_data_write()'s
 * groups from 256 KiB): a unit's cipher and MAC are one job, and the caller
 * stores each unit (device writes; bch_data_write(): then its key), in
 * order, as soon as its job is done, taking jobs itself while the next unit
 * is not; a planned unit's writeback start (bch_dev_writeback_start(), a
 * hint) is a job of its own, for a worker done with the ciphers, which
 * starts every unit written by then.  A
 * planned read's extents are one job each (device read, MAC, then cipher:
 * one wait), on the pool from 256 KiB (two extents) up when no other read
 * is decrypting.
 * The jobs are pure work over buffers the caller owns, the key and (a
 * planned read's) device reads, which need only the devices the caller
 * keeps open until its run returns: a worker takes no lock of the engine,
 * so the caller may hold any (the FUSE daemon's engine lock), and the
 * pool's own mutex is held over no call out of it: no new lock order.
 * Everything else (nonces, allocation, device writes, keys, their order,
 * the commit) stays on the calling thread, in the order it had
 * single-threaded.
 * A planned read's run may be on several threads at once without the
 * engine's lock: it reads only its plan, the devices (kept open by the
 * caller) and c->crypt's key, and counts only the devices' atomic I/O
 * counters.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "bcachefs.h"
#include "blockdev.h"
#include "btree.h"
#include "snapshot.h"
#include "ec.h"
#include "errcode.h"
#include "checksum.h"
#include "compress.h"
#include "crypt.h"
#include "extent_encode.h"
#include "extents.h"
#include "inode.h"
#include "io.h"
#include "move.h"
#include "rebalance.h"
#include "reflink.h"
#include "super.h"

void bch_io_opts_get(struct bch_fs *c, const struct bch_inode *inode, struct bch_io_opts *o)
{
	o->csum_type = c->opts.v[Opt_data_checksum];
	o->compression = c->opts.v[Opt_compression];
	o->replicas = c->opts.v[Opt_data_replicas];
	o->target = c->opts.v[Opt_foreground_target];
	o->background_target = c->opts.v[Opt_background_target];
	o->background_compression = c->opts.v[Opt_background_compression];
	o->promote_target = c->opts.v[Opt_promote_target];
	o->erasure_code = bch_inode_ec_effective(c, inode);
	if (inode) {
		if (inode->opt_data_checksum)
			o->csum_type = inode->opt_data_checksum - 1;
		if (inode->opt_compression)
			o->compression = inode->opt_compression - 1u;
		if (inode->opt_data_replicas)
			o->replicas = inode->opt_data_replicas - 1;
		if (inode->opt_background_compression)
			o->background_compression = inode->opt_background_compression - 1u;
		if (inode->opt_foreground_target)
			o->target = inode->opt_foreground_target - 1u;
		if (inode->opt_background_target)
			o->background_target = inode->opt_background_target - 1u;
		if (inode->opt_promote_target)
			o->promote_target = inode->opt_promote_target - 1u;
	}
	if (!o->replicas)
		o->replicas = 1;
	if (o->replicas > BCH_REPLICAS_MAX)
		o->replicas = BCH_REPLICAS_MAX;
}

/* ------------------------------------------------ the cipher's worker pool */

typedef void (*io_job_fn)(void *arg, unsigned i);

#define POOL_MAX	7

static struct {
	pthread_mutex_t	lock;
	pthread_cond_t	work, done;
	pid_t		pid;		/* the process whose workers these are (not a fork's) */
	unsigned	started;	/* workers running */
	int		want;		/* workers wanted: -1 the default (CPUs - 1) */
	unsigned	active;		/* workers that take jobs (pool_start()) */
	bool		busy;		/* a batch runs: */
	io_job_fn	fn;
	void		*arg;
	unsigned	nr, next, finished;
	bool		*ready;		/* pool_run_ordered(): job i done */
	bool		waiting;	/* its caller waits for a job to be done */
	/* pool_run_ordered()'s after jobs: after(arg, i) for i < after_avail */
	io_job_fn	after;
	unsigned	after_avail, after_next, after_done;
} pool = {
	.lock	= PTHREAD_MUTEX_INITIALIZER,
	.work	= PTHREAD_COND_INITIALIZER,
	.done	= PTHREAD_COND_INITIALIZER,
	.want	= -1,
};

static unsigned pool_wanted(void)
{
	static long cpus;

	if (!cpus)
		cpus = sysconf(_SC_NPROCESSORS_ONLN);
	if (pool.want >= 0)
		return pool.want < POOL_MAX ? pool.want : POOL_MAX;
	long n = cpus - 1;
	return n <= 0 ? 0 : n < POOL_MAX ? n : POOL_MAX;
}

static void *pool_worker(void *p)
{
	unsigned id = (uintptr_t)p;

	pthread_mutex_lock(&pool.lock);
	for (;;) {
		while (!pool.busy || id >= pool.active ||
		       (pool.next >= pool.nr && pool.after_next >= pool.after_avail))
			pthread_cond_wait(&pool.work, &pool.lock);
		bool after = pool.next >= pool.nr;	/* the batch's jobs first, then its after jobs */
		unsigned i = after ? pool.after_next++ : pool.next++;
		io_job_fn fn = after ? pool.after : pool.fn;
		void *arg = pool.arg;
		pthread_mutex_unlock(&pool.lock);
		fn(arg, i);
		pthread_mutex_lock(&pool.lock);
		if (after) {
			pool.after_done++;
		} else {
			if (pool.ready)
				pool.ready[i] = true;
			pool.finished++;
		}
		if ((!after && pool.finished == pool.nr) || pool.waiting)
			pthread_cond_signal(&pool.done);
	}
	return NULL;
}

/* Start the workers wanted and not running (under pool.lock); how many run. */
static unsigned pool_start(void)
{
	if (pool.pid != getpid()) {	/* a fork: its parent's workers are not here */
		pool.pid = getpid();
		pool.started = 0;
	}
	unsigned want = pool_wanted();
	sigset_t all, old;
	sigfillset(&all);
	/* signals go to the threads that wait for them, never to a worker */
	pthread_sigmask(SIG_SETMASK, &all, &old);
	while (pool.started < want) {
		pthread_t th;
		if (pthread_create(&th, NULL, pool_worker, (void *)(uintptr_t)pool.started))
			break;		/* fewer workers: the caller does more itself */
		pthread_detach(th);
		pool.started++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pool.active = pool.started < want ? pool.started : want;
	return pool.active;
}

/*
 * fn(arg, i) for every i < nr, on this thread and the workers; returns when
 * all are done.  While another thread's batch runs, this one runs its own.
 */
static void pool_run(unsigned nr, io_job_fn fn, void *arg)
{
	if (nr > 1) {
		pthread_mutex_lock(&pool.lock);
		if (!pool.busy && pool_start()) {
			pool.busy = true;
			pool.fn = fn;
			pool.arg = arg;
			pool.nr = nr;
			pool.next = pool.finished = 0;
			pthread_cond_broadcast(&pool.work);
			while (pool.next < pool.nr) {
				unsigned i = pool.next++;
				pthread_mutex_unlock(&pool.lock);
				fn(arg, i);
				pthread_mutex_lock(&pool.lock);
				pool.finished++;
			}
			while (pool.finished < pool.nr)
				pthread_cond_wait(&pool.done, &pool.lock);
			pool.busy = false;
			pthread_mutex_unlock(&pool.lock);
			return;
		}
		pthread_mutex_unlock(&pool.lock);
	}
	for (unsigned i = 0; i < nr; i++)
		fn(arg, i);
}

/*
 * fn(arg, i) for every i < nr, as pool_run(), and then(targ, i) on this
 * thread alone for i = 0, 1, ... in order, each as soon as fn(arg, i) is
 * done: a pipeline, whose caller hands on what the workers finished, runs
 * a job itself while the next one to hand on is not finished, and waits
 * only when no job is left to take.  With no worker free it is fn, then,
 * fn, then... on this thread.  ready: nr flags, all false.  The first
 * nonzero result of then() ends the calls of then() (the jobs still run):
 * it is returned once every fn() is done.
 * after (may be NULL): after(arg, i) once then(targ, i) returned 0 (and
 * every earlier then()), on a worker that has no fn() left to run and
 * looks for work (none is woken for them) or, those none took, on this
 * thread at the end:
 * work that need not delay the next then(), off the caller's path while a
 * worker is free.  Returns once every after() is done too.
 */
static int pool_run_ordered(unsigned nr, io_job_fn fn, void *arg, int (*then)(void *, unsigned),
			    void *targ, bool *ready, bool spread, io_job_fn after)
{
	unsigned w = 0;
	int r = 0;

	pthread_mutex_lock(&pool.lock);
	if (!spread || nr < 2 || pool.busy || !pool_start()) {
		pthread_mutex_unlock(&pool.lock);
		for (unsigned i = 0; i < nr; i++) {
			fn(arg, i);
			if (!r && !(r = then(targ, i)) && after)
				after(arg, i);
		}
		return r;
	}
	pool.after = after;
	pool.after_avail = pool.after_next = pool.after_done = 0;
	pool.busy = true;
	pool.fn = fn;
	pool.arg = arg;
	pool.nr = nr;
	pool.next = pool.finished = 0;
	pool.ready = ready;
	pthread_cond_broadcast(&pool.work);
	while (w < nr) {
		if (ready[w]) {
			pthread_mutex_unlock(&pool.lock);
			if (!r)
				r = then(targ, w);
			pthread_mutex_lock(&pool.lock);
			w++;
			/*
			 * no wake for them: a worker takes them as it looks for
			 * work after a job (a wake for every two units doubled
			 * the daemon's context switches; the CPU they cost hid
			 * what it saved)
			 */
			if (after && !r)
				pool.after_avail = w;
		} else if (pool.next < nr) {
			unsigned i = pool.next++;
			pthread_mutex_unlock(&pool.lock);
			fn(arg, i);
			pthread_mutex_lock(&pool.lock);
			ready[i] = true;
			pool.finished++;
		} else {
			pool.waiting = true;
			pthread_cond_wait(&pool.done, &pool.lock);
			pool.waiting = false;
		}
	}
	/* every job handed on: every one finished; the after jobs no worker took */
	while (pool.after_next < pool.after_avail) {
		unsigned k = pool.after_next++;
		pthread_mutex_unlock(&pool.lock);
		after(arg, k);
		pthread_mutex_lock(&pool.lock);
		pool.after_done++;
	}
	while (pool.after_done < pool.after_avail) {
		pool.waiting = true;
		pthread_cond_wait(&pool.done, &pool.lock);
		pool.waiting = false;
	}
	pool.after = NULL;
	pool.after_avail = pool.after_next = pool.after_done = 0;
	pool.ready = NULL;
	pool.busy = false;
	pthread_mutex_unlock(&pool.lock);
	return r;
}

void bch_io_pool_run(unsigned nr, void (*fn)(void *arg, unsigned i), void *arg)
{
	pool_run(nr, fn, arg);
}

void bch_io_pool_threads(int n)
{
	pthread_mutex_lock(&pool.lock);
	pool.want = n < 0 ? -1 : n;
	pthread_mutex_unlock(&pool.lock);
}

/* --------------------------------------------------- the batched cipher */

#define PIECE_BYTES	(64 << 10)	/* XChaCha20 done in pieces of this (a multiple of 64) */
/*
 * Less work than this runs on the caller alone: waking a worker costs more
 * than it saves on one 128 KiB extent (a FUSE read: measured slower with
 * libcrypto's cipher on a loaded two-core machine, 1.81 s against 1.72 s
 * for 1 GiB).
 */
#define POOL_MIN_BYTES	(512 << 10)

struct cipher_batch {
	struct bch_fs		*c;
	struct bch_cipher_job	*j;
	unsigned		nr;
	bool			encrypt;
};

static unsigned job_pieces(const struct bch_cipher_job *j)
{
	return (j->bytes + PIECE_BYTES - 1) / PIECE_BYTES;
}

/* Piece i of the batch: XChaCha20 over one 64 KiB piece of one extent. */
static void cipher_piece(void *arg, unsigned i)
{
	struct cipher_batch *b = arg;
	unsigned n = 0, k = 0;

	while (k < b->nr && i >= n + job_pieces(&b->j[k]))
		n += job_pieces(&b->j[k++]);
	struct bch_cipher_job *j = &b->j[k];
	size_t off = (size_t)(i - n) * PIECE_BYTES;
	size_t len = j->bytes - off < PIECE_BYTES ? j->bytes - off : PIECE_BYTES;

	if (j->r)
		return;		/* decrypting: its MAC failed, it stays ciphertext */
	int r = bch_crypt_extent_xor(b->c, j->version, j->src, j->buf, off, len);
	if (r)
		j->r = r;	/* only with no key: every piece says the same */
}

/* Job i's MAC: set (encrypting) or checked (decrypting). */
static void cipher_mac(void *arg, unsigned i)
{
	struct cipher_batch *b = arg;
	struct bch_cipher_job *j = &b->j[i];

	if (b->encrypt) {
		if (!j->r)
			j->r = bch_crypt_extent_mac(b->c, j->version, j->buf, j->bytes, &j->mac);
	} else {
		j->r = bch_crypt_extent_mac_check(b->c, j->version, j->src, j->bytes, &j->mac);
	}
}

static unsigned batch_pieces(const struct bch_cipher_job *j, unsigned nr)
{
	unsigned n = 0;

	for (unsigned i = 0; i < nr; i++)
		n += job_pieces(&j[i]);
	return n;
}

/* pool_run(), or its jobs on this thread when the batch is small (POOL_MIN_BYTES) */
static void batch_run(const struct bch_cipher_job *j, unsigned nr, unsigned jobs, io_job_fn fn,
		      struct cipher_batch *b)
{
	size_t bytes = 0;

	for (unsigned i = 0; i < nr; i++)
		bytes += j[i].bytes;
	if (bytes >= POOL_MIN_BYTES || pool.want > 0) {	/* (tests ask for workers: they get them) */
		pool_run(jobs, fn, b);
		return;
	}
	for (unsigned i = 0; i < jobs; i++)
		fn(b, i);
}

void bch_io_encrypt_batch(struct bch_fs *c, struct bch_cipher_job *j, unsigned nr)
{
	struct cipher_batch b = { .c = c, .j = j, .nr = nr, .encrypt = true };

	for (unsigned i = 0; i < nr; i++) {
		j[i].r = c->crypt ? 0 : -BCH_ERR_key_missing;
		if (!j[i].r)
			bch_crypt_extent_nonce_note(j[i].version);
	}
	batch_run(j, nr, batch_pieces(j, nr), cipher_piece, &b);	/* the MAC is over the ciphertext */
	batch_run(j, nr, nr, cipher_mac, &b);
}

void bch_io_decrypt_batch(struct bch_fs *c, struct bch_cipher_job *j, unsigned nr)
{
	struct cipher_batch b = { .c = c, .j = j, .nr = nr, .encrypt = false };

	batch_run(j, nr, nr, cipher_mac, &b);			/* nothing decrypted unverified */
	batch_run(j, nr, batch_pieces(j, nr), cipher_piece, &b);
}

/* ------------------------------------------------------------------ */

/* Largest unit encoded at once: encoded_extent_max, and never above a bucket. */
static unsigned unit_sectors(struct bch_fs *c)
{
	uint64_t s = c->opts.v[Opt_encoded_extent_max] >> BCH_SECTOR_SHIFT;

	for (unsigned i = 0; i < c->nr_devs; i++)
		if (c->devs[i]) {
			uint64_t b = bch_sb_member(c->sb, i)->bucket_size;
			if (b < s)
				s = b;
		}
	s -= s % c->sb->block_size;
	return s ? s : c->sb->block_size;
}

/*
 * An append may grow the file's previous extent instead of adding one: a
 * program writing 8 KiB at a time would otherwise leave 16 keys where one
 * fits, and every later walk, copy and share pays for them.  The previous
 * extent (the key of this snapshot ending at start) grows when all of:
 *  - both are plain (no compression, no encryption, whole: the checksum
 *    covers exactly the key) with the same checksum type, none or crc32c
 *    (whose checksums combine: bch_crc32c_combine()), and the file does not
 *    compress (its data that did not shrink is stored plain, one unit per
 *    write, as compressed data is);
 *  - together they fit one encoding unit (unit sectors);
 *  - on every member the new data lies right behind the old, in the same
 *    bucket (io.c invariant (2)), with the same pointers' devices and gens.
 * Only for a write's first unit: the punch at the start of
 * bch_data_write() leaves the key ending at start alone, and nothing in
 * the transaction has changed it.  Returns the grown key and the old one
 * in *old (for bch_extent_grow()), or NULL.
 */
static struct bch_bkey *append_merge(struct bch_fs *c, uint64_t inum, uint64_t start,
				     unsigned sectors, unsigned unit, const struct bch_extent_crc *crc,
				     const struct bch_extent_ptr *ptrs, unsigned got,
				     struct bch_bkey **old)
{
	struct bch_viter it;
	const struct bch_bkey *k;
	struct bch_bkey *prev = NULL;
	int err = 0;

	if (c->crypt || !start || crc->compression_type != BCH_COMPRESSION_none ||
	    (crc->csum_type != BCH_CSUM_none && crc->csum_type != BCH_CSUM_crc32c))
		return NULL;
	bch_viter_init(&it, c, BCH_BTREE_ID_extents, POS(inum, start, 0), POS(inum, UINT64_MAX, 0));
	k = bch_viter_next(&it, &err);
	if (k && k->type == BCH_BKEY_extent && k->p.inode == inum && k->p.offset == start &&
	    k->p.snapshot == bch_view_snap(c) && !k->version)
		prev = bch_bkey_dup(k);
	bch_viter_exit(&it);
	if (!prev)
		return NULL;

	const struct bch_extent *e = bkey_val(prev);
	const struct bch_extent_crc *pc = &e->crc;
	bool ok = pc->compression_type == BCH_COMPRESSION_none && pc->csum_type == crc->csum_type &&
		  !pc->offset && pc->uncompressed_sectors == prev->size &&
		  pc->compressed_sectors == prev->size && prev->size + sectors <= unit &&
		  bch_extent_nr_ptrs(prev) == got;
	for (unsigned i = 0; ok && i < got; i++) {
		const struct bch_extent_ptr *a = &e->ptrs[i], *b = &ptrs[i];
		uint64_t bs = bch_sb_member(c->sb, b->dev)->bucket_size;
		ok = a->dev == b->dev && a->gen == b->gen && !a->flags && !b->flags &&
		     a->offset + prev->size == b->offset && bs &&
		     a->offset / bs == (b->offset + sectors - 1) / bs;
	}
	struct bch_bkey *grown = ok ? bch_bkey_dup(prev) : NULL;
	if (!grown) {
		free(prev);
		return NULL;
	}
	struct bch_extent *m = bkey_val(grown);
	if (crc->csum_type == BCH_CSUM_crc32c)
		m->crc.csum.lo = bch_crc32c_combine((uint32_t)pc->csum.lo, (uint32_t)crc->csum.lo,
						    (uint64_t)sectors << BCH_SECTOR_SHIFT);
	grown->size += sectors;
	grown->p.offset = start + sectors;
	m->crc.uncompressed_sectors = m->crc.compressed_sectors = grown->size;
	m->crc.compressed_bytes = grown->size << BCH_SECTOR_SHIFT;
	*old = prev;
	return grown;
}

/* One encoding unit of a write, from its encoding to its key. */
struct write_unit {
	uint64_t		start;		/* sector */
	const void		*src;
	unsigned		sectors;
	struct bch_extent_crc	crc;
	uint64_t		version;	/* encrypted: the nonce */
	const void		*out;		/* what goes to disk */
	unsigned		got;		/* copies allocated, not yet handed on */
	struct bch_extent_ptr	ptrs[BCH_REPLICAS_MAX];
};

/*
 * Allocate the copies of a piece of *sectors (released: as bch_alloc_data()).
 * cut: the piece may be shortened to the rest of the open buckets
 * (bch_alloc_data_fit()), which it then fills: a piece that does not fit
 * would open new ones and leave the rest of the old ones dead.  Copygc
 * could pack that space again only for plain extents: an encrypted one is
 * never cut by a move (move.c), and near full the dead space stayed
 * (t82 under ENCRYPTED=1: 14% of the user buckets, the fill ending at 86%
 * of the space available).  Not cut: a compressed piece (allocated for its
 * encoded size) and the erasure-coded stream's.
 */
static int unit_alloc(struct bch_fs *c, const struct bch_io_opts *o, uint64_t released, bool cut,
		      unsigned *sectors, struct bch_extent_ptr *ptrs, unsigned *got)
{
	bool ec = o->erasure_code && bch_ec_replicas_fit(c, o->replicas);
	int r;

	if (cut && !ec)
		*sectors = bch_alloc_data_fit(c, *sectors, o->replicas, o->target);
	/* erasure-coded: the first copy into a stripe candidate bucket (alloc.h) */
	if ((r = bch_alloc_data_ec(c, *sectors, o->replicas, o->target, released, ec, ptrs, got))) {
		*got = 0;	/* nothing held (a failed flush gave it back) */
		return r;
	}
	unsigned n = *got;
	if (n < c->opts.v[Opt_data_replicas_required] && n < o->replicas) {
		bch_alloc_data_unwind(c, ptrs, n, *sectors);
		*got = 0;
		return bch_fs_err(c, -BCH_ERR_no_space, "only %u of %u required data replicas could be "
				  "allocated", n, (unsigned)c->opts.v[Opt_data_replicas_required]);
	}
	return 0;
}

/*
 * Encode w (checksum, compression) into enc, or leave it in src when it is
 * stored as it is; encrypted, take its nonce: the caller encrypts it into
 * enc (its group's pipeline, struct data_pipe).
 */
static int unit_encode(struct bch_fs *c, uint64_t inum, const struct bch_io_opts *o, struct write_unit *w,
		       void *enc)
{
	struct bch_encode_opts eo = {
		.csum_type	= o->csum_type,
		.compression	= o->compression,
		.block_sectors	= c->sb->block_size,
		.max_sectors	= w->sectors,
	};
	/*
	 * Encrypted: the MAC is the checksum, and enc is always given (see
	 * bch_data_write()); uncompressed data is encrypted from src into it.
	 */
	bool plain = bch_compression_type_of(o->compression) == BCH_COMPRESSION_none;
	if (c->crypt)
		eo.csum_type = BCH_CSUM_none;
	/* uncompressed (enc NULL): checksummed and written from src, no copy */
	int r = bch_extent_encode(&eo, w->src, w->sectors, c->crypt && plain ? NULL : enc, &w->crc);
	w->out = enc ? enc : w->src;
	w->version = 0;
	if (!r && c->crypt)
		r = bch_crypt_nonce_take(c, &w->version);
	if (r)
		return bch_fs_err(c, r, "encoding %u sectors of inode %" PRIu64 ": %s", w->sectors, inum,
				  bch_err_str(r));
	return 0;
}

static int unit_key(struct bch_fs *c, struct btree_trans *t, uint64_t inum,
		    const struct bch_io_opts *o, const struct write_unit *w,
		    const struct bch_extent_ptr *ptrs, unsigned got, unsigned unit, bool first,
		    struct bch_extent_update *u, bool *needs_rebalance);

/* A write over a reservation may use the space the reservation promised. */
static uint64_t released_of(const struct bch_extent_update *u)
{
	return u->reserved_delta < 0 ? (uint64_t)-u->reserved_delta : 0;
}

/*
 * Can a plain write of sectors (pieces cut to fit: unit_alloc()) find
 * space for all of them?  With one copy, not when user data cannot take
 * that much (bch_alloc_user_free(), which its pieces' allocations use up
 * exactly): such a write fails here, before it takes any, where its first
 * pieces would have been given back when its transaction was abandoned,
 * and left dead behind the open bucket's end.  With more copies a member
 * short of space takes fewer (replicas_required): then the pieces say.
 */
static int write_fits(struct bch_fs *c, const struct bch_io_opts *o, uint64_t sectors,
		      uint64_t released)
{
	unsigned devs = bch_alloc_nr_devs_for(c, BCH_DATA_user);

	if (c->alloc_for_delete || (o->replicas > 1 && devs > 1) ||
	    bch_compression_type_of(o->compression) != BCH_COMPRESSION_none)
		return 0;
	return bch_alloc_user_check(c, sectors, released);
}

/*
 * Allocate (unless its space was allocated with its piece: w->got), write
 * and add the key of the encoded unit w.  Whatever happens, w holds no
 * space after (w->got 0).
 */
static int unit_store(struct bch_fs *c, struct btree_trans *t, uint64_t inum,
		      const struct bch_io_opts *o, struct write_unit *w, unsigned unit, bool first,
		      struct bch_extent_update *u, bool *needs_rebalance)
{
	const struct bch_extent_crc *crc = &w->crc;
	unsigned sectors = crc->compressed_sectors, got = w->got;
	int r;

	w->got = 0;
	if (!got && (r = unit_alloc(c, o, released_of(u), false, &sectors, w->ptrs, &got)))
		return r;
	for (unsigned i = 0; i < got; i++) {
		struct bch_dev *ca = c->devs[w->ptrs[i].dev];
		r = bch_dev_write(ca->bdev, w->out, (size_t)crc->compressed_sectors << BCH_SECTOR_SHIFT,
				  (uint64_t)w->ptrs[i].offset << BCH_SECTOR_SHIFT);
		if (r) {
			bch_alloc_data_free(c, w->ptrs, got, crc->compressed_sectors);
			return bch_fs_err(c, r, "writing data to %s: %s", bch_dev_path(ca->bdev),
					  bch_err_str(r));
		}
	}

	return unit_key(c, t, inum, o, w, w->ptrs, got, unit, first, u, needs_rebalance);
}

/* Add the key of unit w, written at ptrs[0..got), to t (or grow the previous extent). */
static int unit_key(struct bch_fs *c, struct btree_trans *t, uint64_t inum,
		    const struct bch_io_opts *o, const struct write_unit *w,
		    const struct bch_extent_ptr *ptrs, unsigned got, unsigned unit, bool first,
		    struct bch_extent_update *u, bool *needs_rebalance)
{
	const struct bch_extent_crc *crc = &w->crc;
	bool plain = bch_compression_type_of(o->compression) == BCH_COMPRESSION_none;
	int r;
	struct bch_bkey *old = NULL;
	/* not in a file that compresses: data that did not shrink is stored plain, yet not merged */
	struct bch_bkey *k = first && plain ? append_merge(c, inum, w->start, w->sectors, unit, crc, ptrs,
							   got, &old)
					    : NULL;
	if (k) {
		r = bch_extent_grow(t, old, k, ptrs, got, w->sectors, u);
		free(old);
	} else {
		k = bch_bkey_alloc(BCH_BKEY_extent, POS(inum, w->start + w->sectors, 0),
				   sizeof(struct bch_extent) + got * sizeof(struct bch_extent_ptr));
		struct bch_extent *e = bkey_val(k);
		k->size = w->sectors;
		k->version = w->version;	/* encrypted: the data's nonce (crypt.h) */
		e->crc = *crc;
		memcpy(e->ptrs, ptrs, got * sizeof(ptrs[0]));
		r = bch_extent_insert(t, k, false, u);
	}
	if (!r && !*needs_rebalance)
		*needs_rebalance = bch_extent_rebalance_reasons(c, k, o) != 0;
	free(k);
	return r;
}

static void *io_buf(size_t bytes);

/*
 * The calling thread's buffer for the encrypted units of a write, kept from
 * one write to the next: a fresh megabyte each time came from mmap() (or a
 * heap grown and trimmed again) and cost a page fault per 4 KiB.  Freed
 * when the thread ends.
 */
static __thread char *wbuf;
static __thread size_t wbuf_cap;
static pthread_key_t wbuf_key;
static pthread_once_t wbuf_once = PTHREAD_ONCE_INIT;
static bool wbuf_keyed;

static void wbuf_free(void *p)
{
	free(p);
	wbuf = NULL;
	wbuf_cap = 0;
}

static void wbuf_key_init(void)
{
	wbuf_keyed = !pthread_key_create(&wbuf_key, wbuf_free);
}

static char *write_buf(size_t bytes)
{
	if (wbuf_cap >= bytes)
		return wbuf;
	char *p = io_buf(bytes);
	if (!p)
		return NULL;
	free(wbuf);
	wbuf = p;
	wbuf_cap = bytes;
	pthread_once(&wbuf_once, wbuf_key_init);
	if (wbuf_keyed)
		pthread_setspecific(wbuf_key, p);
	return p;
}

/* Units encrypted together (at most WRITE_GROUP_BYTES of them): the pool's batch. */
#define WRITE_GROUP_MAX		16
#define WRITE_GROUP_BYTES	(2 << 20)
/*
 * A group of encrypted units from this size up goes through the pipeline on
 * the pool (two units: the second's cipher beside the first's store).
 */
#define WRITE_PIPE_MIN_BYTES	(256 << 10)

/*
 * An encrypted group of bch_data_write(), a pipeline (pool_run_ordered()):
 * unit i's cipher and MAC one job (the pool's and this thread's), its
 * store (device writes, then its key) on this thread in order as soon as
 * it is done, while the next units are being encrypted.  Stores, keys and
 * their order are the single-threaded ones.
 */
struct data_pipe {
	struct bch_fs			*c;
	struct btree_trans		*t;
	uint64_t			inum, start;
	const struct bch_io_opts	*o;
	struct write_unit		*w;
	struct bch_cipher_job		*j;
	unsigned			unit;
	struct bch_extent_update	*u;
	bool				*needs_rebalance;
};

static void data_pipe_seal(void *arg, unsigned i)
{
	struct data_pipe *dp = arg;
	struct bch_cipher_job *j = &dp->j[i];

	j->r = bch_crypt_extent_xor(dp->c, j->version, j->src, j->buf, 0, j->bytes);
	if (!j->r)
		j->r = bch_crypt_extent_mac(dp->c, j->version, j->buf, j->bytes, &j->mac);
}

static int data_pipe_store(void *arg, unsigned i)
{
	struct data_pipe *dp = arg;
	struct write_unit *w = &dp->w[i];
	const struct bch_cipher_job *j = &dp->j[i];

	if (j->r)
		return bch_fs_err(dp->c, j->r, "encrypting %u sectors of inode %" PRIu64 ": %s", w->sectors,
				  dp->inum, bch_err_str(j->r));
	w->crc.csum_type = BCH_CSUM_chacha20_poly1305;
	w->crc.csum = j->mac;
	return unit_store(dp->c, dp->t, dp->inum, dp->o, w, dp->unit, w->start == dp->start, dp->u,
			  dp->needs_rebalance);
}

int bch_data_write(struct bch_fs *c, struct btree_trans *t, uint64_t inum,
		   const struct bch_io_opts *o, uint64_t start, const void *buf, uint64_t sectors,
		   struct bch_extent_update *u)
{
	unsigned unit = unit_sectors(c);
	uint64_t done;
	int r;

	if (start % c->sb->block_size || sectors % c->sb->block_size)
		return bch_fs_err(c, -EINVAL, "unaligned data write");
	if ((r = bch_extents_punch(c, t, inum, start, start + sectors, 0, u, &done)) ||
	    (r = write_fits(c, o, sectors, released_of(u))))
		return r;

	/*
	 * enc: the compressor's output, or what is encrypted; encrypted, one
	 * buffer per unit of a group (aligned for direct I/O, not zeroed: the
	 * cipher writes every byte of it, the encoder its padding).
	 */
	size_t bound = (bch_extent_encode_bound(unit) + 4095) & ~(size_t)4095;
	unsigned group = 1;
	if (c->crypt) {
		group = WRITE_GROUP_BYTES / ((size_t)unit << BCH_SECTOR_SHIFT);
		group = group < 1 ? 1 : group > WRITE_GROUP_MAX ? WRITE_GROUP_MAX : group;
		uint64_t units = (sectors + unit - 1) / unit;
		if (units < group)
			group = units;
	}
	char *enc = NULL;
	if ((bch_compression_type_of(o->compression) != BCH_COMPRESSION_none || c->crypt) &&
	    !(enc = c->crypt ? write_buf(group * bound) : bch_dev_alloc_buf(bound)))
		return -ENOMEM;
	bool needs_rebalance = false;
	/* plain: each piece's space is taken before it is encoded, and it is cut to fit */
	bool plain = bch_compression_type_of(o->compression) == BCH_COMPRESSION_none;
	for (uint64_t off = 0; off < sectors && !r;) {
		struct write_unit w[WRITE_GROUP_MAX];
		struct bch_cipher_job j[WRITE_GROUP_MAX];
		unsigned nr = 0;

		while (nr < group && off < sectors && !r) {
			unsigned n = sectors - off < unit ? sectors - off : unit;
			w[nr] = (struct write_unit) {
				.start		= start + off,
				.src		= (const char *)buf + (off << BCH_SECTOR_SHIFT),
			};
			if (plain)
				r = unit_alloc(c, o, released_of(u), true, &n, w[nr].ptrs, &w[nr].got);
			w[nr].sectors = n;
			if (!r)
				r = unit_encode(c, inum, o, &w[nr], enc ? enc + nr * bound : NULL);
			off += n;
			nr++;
		}
		if (!r && c->crypt) {
			size_t bytes = 0;
			for (unsigned i = 0; i < nr; i++) {
				/* uncompressed (also data that did not shrink) from src */
				bool from_src = w[i].crc.compression_type == BCH_COMPRESSION_none &&
						bch_compression_type_of(o->compression) == BCH_COMPRESSION_none;
				j[i] = (struct bch_cipher_job) {
					.version	= w[i].version,
					.src		= from_src ? w[i].src : w[i].out,
					.buf		= (void *)w[i].out,
					.bytes		= (size_t)w[i].crc.compressed_sectors << BCH_SECTOR_SHIFT,
				};
				bch_crypt_extent_nonce_note(j[i].version);
				bytes += j[i].bytes;
			}
			struct data_pipe dp = { .c = c, .t = t, .inum = inum, .start = start, .o = o, .w = w,
						.j = j, .unit = unit, .u = u, .needs_rebalance = &needs_rebalance };
			bool ready[WRITE_GROUP_MAX] = { 0 };
			r = pool_run_ordered(nr, data_pipe_seal, &dp, data_pipe_store, &dp, ready,
					     bytes >= WRITE_PIPE_MIN_BYTES || pool.want > 0, NULL);
		} else {
			for (unsigned i = 0; i < nr && !r; i++)
				r = unit_store(c, t, inum, o, &w[i], unit, w[i].start == start, u,
					       &needs_rebalance);
		}
		for (unsigned i = nr; i-- > 0;)	/* failed: the pieces not stored, last first */
			if (w[i].got)
				bch_alloc_data_unwind(c, w[i].ptrs, w[i].got, w[i].sectors);
	}
	if (!c->crypt)
		free(enc);
	/* data off its background target, or not in its background compression */
	if (!r && needs_rebalance)
		r = bch_rebalance_work_set(c, t, inum, start);
	if (!r && o->erasure_code && bch_ec_replicas_fit(c, o->replicas))
		c->ec_waiting += sectors;	/* the stripe builder's hint (ec.h) */
	return r;
}

/* ------------------------------------------------------------------ */
/* Writes outside the engine lock (io.h) */

int bch_data_write_plan(struct bch_fs *c, uint64_t inum, const struct bch_io_opts *o,
			uint64_t start, const void *buf, uint64_t sectors, struct bch_write_plan *pl)
{
	unsigned unit = unit_sectors(c);
	int r = 0;

	*pl = (struct bch_write_plan) { .c = c, .inum = inum, .start = start, .sectors = sectors,
					.src = buf, .o = *o, .unit = unit };
	if (start % c->sb->block_size || sectors % c->sb->block_size)
		return bch_fs_err(c, -EINVAL, "unaligned data write");
	/*
	 * Compressed: the space needed is known only after encoding, which is
	 * what runs unlocked.  Erasure coded: the stripe builder reads the
	 * candidate buckets it closes, which must hold no unindexed data.
	 */
	if (bch_compression_type_of(o->compression) != BCH_COMPRESSION_none ||
	    (o->erasure_code && bch_ec_replicas_fit(c, o->replicas)) || !sectors)
		return -EAGAIN;
	if ((r = write_fits(c, o, sectors, 0)))
		return r;
	/* units, and one more per open bucket a piece is cut at (grown when short) */
	unsigned cap = (sectors + unit - 1) / unit + 2;
	if (!(pl->w = calloc(cap, sizeof(*pl->w))))
		return -ENOMEM;
	pl->held = true;
	for (uint64_t off = 0; off < sectors && !r;) {
		if (pl->nr == cap) {
			struct bch_write_plan_unit *n = realloc(pl->w, 2 * cap * sizeof(*n));
			if (!n) {
				r = -ENOMEM;
				break;
			}
			memset(n + cap, 0, cap * sizeof(*n));
			pl->w = n;
			cap *= 2;
		}
		struct bch_write_plan_unit *w = &pl->w[pl->nr];
		unsigned n = sectors - off < unit ? sectors - off : unit;

		w->start = start + off;
		/* as bch_data_write(): allocated (cut to fit), then encoded (unit_encode()) */
		if ((r = unit_alloc(c, o, 0, true, &n, w->ptrs, &w->got)))
			break;
		w->sectors = n;
		pl->nr++;
		off += n;
		if (c->crypt && (r = bch_crypt_nonce_take(c, &w->version)))
			r = bch_fs_err(c, r, "encoding %u sectors of inode %" PRIu64 ": %s", w->sectors,
				       inum, bch_err_str(r));
	}
	if (r)
		bch_data_write_plan_free(pl, true);
	return r;
}

/*
 * A planned write of at least this much starts the device writing it at
 * once (bch_dev_writeback_start()): a 1 GiB stream of 1 MiB writes through
 * the mount otherwise left it all dirty in the page cache until each
 * journal entry's preflush, which then wrote ~80 MiB with the engine lock
 * held (13 fdatasyncs, 0.73 s of a 2.1 s fio run; with it 1.4 s).  Smaller
 * writes (untar's files) leave it to the flush: a call per small write
 * would cost a syscall each and split the device's writes.
 */
#define WRITEBACK_START_MIN	(256U << 10)

/*
 * An encrypted planned write, a pipeline (pool_run_ordered()): unit i's
 * cipher and MAC (one job: its bytes stay in that core's cache between the
 * two) on the pool, its device writes on the calling thread as soon as it
 * is done, while the next units are being encrypted, and its writeback
 * start (the kernel's block allocation and I/O submission for the image
 * file: 7-20 us a 128 KiB unit here, 14-27% of a plain 1 MiB run) an after job,
 * done by a worker once the ciphers are (the calling thread's path is then
 * the device writes alone), which starts every unit written by then
 * (plan_pipe_writeback()).  The MAC goes only into the key (the index
 * step), so it need not wait for the write either way; what reaches the
 * device is the ciphertext the MAC covers.
 */
struct plan_pipe {
	struct bch_write_plan	*pl;
	char			*enc;		/* the ciphertext, at the units' offsets */
	int			r[WRITE_GROUP_MAX];
	unsigned		first;		/* the group's first unit */
	bool			writeback;
	unsigned		written;	/* units [0, written) of the group are on the device */
	unsigned		started;	/* and [0, started) had their writeback started */
};

static uint64_t plan_unit_off(const struct bch_write_plan *pl, const struct bch_write_plan_unit *w)
{
	return (w->start - pl->start) << BCH_SECTOR_SHIFT;
}

static void plan_encrypt_one(void *arg, unsigned i)
{
	struct plan_pipe *pp = arg;
	struct bch_write_plan *pl = pp->pl;
	struct bch_write_plan_unit *w = &pl->w[pp->first + i];
	uint64_t off = plan_unit_off(pl, w);
	size_t bytes = (size_t)w->sectors << BCH_SECTOR_SHIFT;
	int r = bch_crypt_extent_xor(pl->c, w->version, (const char *)pl->src + off, pp->enc + off, 0,
				     bytes);

	if (!r)
		r = bch_crypt_extent_mac(pl->c, w->version, pp->enc + off, bytes, &w->crc.csum);
	w->crc.csum_type = BCH_CSUM_chacha20_poly1305;
	pp->r[i] = r;
}

void (*bch_io_writeback_hook)(struct bch_blockdev *dev, uint64_t offset, uint64_t len);

static void writeback_start(struct bch_blockdev *dev, uint64_t offset, uint64_t len)
{
	if (bch_io_writeback_hook)
		bch_io_writeback_hook(dev, offset, len);
	bch_dev_writeback_start(dev, offset, len);
}

/*
 * Write unit i of the plan (from out: the plan's bytes as they go to disk)
 * to each of its copies; its writeback is started with its run's
 * (plan_run_writeback()).
 */
static int plan_write_unit(struct bch_write_plan *pl, unsigned i, const char *out)
{
	struct bch_fs *c = pl->c;
	struct bch_write_plan_unit *w = &pl->w[i];
	size_t bytes = (size_t)w->sectors << BCH_SECTOR_SHIFT;
	int r = 0;

	out += plan_unit_off(pl, w);
	for (unsigned p = 0; p < w->got && !r; p++) {
		struct bch_blockdev *bdev = c->devs[w->ptrs[p].dev]->bdev;
		uint64_t dev_off = (uint64_t)w->ptrs[p].offset << BCH_SECTOR_SHIFT;

		r = bch_dev_write(bdev, out, bytes, dev_off);
	}
	return r;
}

/*
 * How many units from i on (before end) lie back to back on every copy
 * (the same devices, each unit's space right behind the previous one's):
 * a plain write's allocation of a 1 MiB write is mostly one such run.
 */
static unsigned plan_run_units(const struct bch_write_plan *pl, unsigned i, unsigned end)
{
	const struct bch_write_plan_unit *a = &pl->w[i];
	unsigned n = 1;

	for (; i + n < end; n++) {
		const struct bch_write_plan_unit *p = &pl->w[i + n - 1], *w = &pl->w[i + n];
		unsigned k = 0;

		if (w->got != a->got)
			break;
		while (k < w->got && w->ptrs[k].dev == p->ptrs[k].dev &&
		       w->ptrs[k].offset == p->ptrs[k].offset + p->sectors)
			k++;
		if (k < w->got)
			break;
	}
	return n;
}

/*
 * The writeback start of units [i, i + n), back to back on every copy
 * (plan_run_units()), written: one call per copy, not one per unit (each
 * call is a pass of ext4's writepages and a kick of the virtual disk).
 * The pwrites stay a unit each: on this machine writes of 512 KiB and more
 * into the image's page cache were as often as not several times slower.
 */
static void plan_run_writeback(struct bch_write_plan *pl, unsigned i, unsigned n)
{
	const struct bch_write_plan_unit *a = &pl->w[i], *z = &pl->w[i + n - 1];

	for (unsigned p = 0; p < a->got; p++)
		writeback_start(pl->c->devs[a->ptrs[p].dev]->bdev,
				(uint64_t)a->ptrs[p].offset << BCH_SECTOR_SHIFT,
				(uint64_t)(z->start + z->sectors - a->start) << BCH_SECTOR_SHIFT);
}

static int plan_pipe_write(void *arg, unsigned i)
{
	struct plan_pipe *pp = arg;

	if (pp->r[i])
		return pp->r[i];
	int r = plan_write_unit(pp->pl, pp->first + i, pp->enc);	/* the start: plan_pipe_writeback() */
	if (!r)
		__atomic_store_n(&pp->written, i + 1, __ATOMIC_RELEASE);
	return r;
}

/*
 * After unit i's device writes (pool_run_ordered()'s after job): the kernel
 * starts writing out every unit written and not yet started, not only i, a
 * call per run back to back on the device (plan_run_writeback()).  A
 * worker takes these jobs once the ciphers are done, when most units are
 * written: its first job then starts them all, the rest find nothing to
 * do (a MiB took 8 sync_file_ranges, now mostly 1-2).  Each unit's range
 * is claimed by one job (the compare-exchange on started), so its start
 * comes once, after its write.
 */
static void plan_pipe_writeback(void *arg, unsigned i)
{
	struct plan_pipe *pp = arg;
	unsigned from = __atomic_load_n(&pp->started, __ATOMIC_ACQUIRE), to;

	(void)i;	/* unit i is written: written > i */
	do {
		to = __atomic_load_n(&pp->written, __ATOMIC_ACQUIRE);
		if (from >= to)
			return;
	} while (!__atomic_compare_exchange_n(&pp->started, &from, to, false, __ATOMIC_ACQ_REL,
					      __ATOMIC_ACQUIRE));
	for (unsigned k = pp->first + from, n; k < pp->first + to; k += n) {
		n = plan_run_units(pp->pl, k, pp->first + to);
		plan_run_writeback(pp->pl, k, n);
	}
}

int bch_data_write_plan_run(struct bch_write_plan *pl)
{
	struct bch_fs *c = pl->c;
	bool writeback = ((uint64_t)pl->sectors << BCH_SECTOR_SHIFT) >= WRITEBACK_START_MIN;
	struct bch_encode_opts eo = {
		.csum_type	= c->crypt ? BCH_CSUM_none : pl->o.csum_type,
		.compression	= 0,
		.block_sectors	= c->sb->block_size,
	};
	char *enc = NULL;
	int r = 0;

	if (c->crypt && !(enc = write_buf((size_t)pl->sectors << BCH_SECTOR_SHIFT)))
		return -ENOMEM;
	for (unsigned i = 0; i < pl->nr && !r; i++) {
		struct bch_write_plan_unit *w = &pl->w[i];
		eo.max_sectors = w->sectors;
		r = bch_extent_encode(&eo, (const char *)pl->src + plan_unit_off(pl, w), w->sectors,
				      NULL, &w->crc);
		if (!r && c->crypt)
			bch_crypt_extent_nonce_note(w->version);
	}
	if (!c->crypt) {
		for (unsigned i = 0, n; i < pl->nr && !r; i += n) {
			n = plan_run_units(pl, i, pl->nr);
			for (unsigned k = i; k < i + n && !r; k++)
				r = plan_write_unit(pl, k, pl->src);
			if (!r && writeback)
				plan_run_writeback(pl, i, n);
		}
		return r;
	}
	/* encrypted: groups of units through the pipeline, into enc */
	bool spread = ((uint64_t)pl->sectors << BCH_SECTOR_SHIFT) >= POOL_MIN_BYTES || pool.want > 0;
	for (unsigned i = 0; i < pl->nr && !r;) {
		struct plan_pipe pp = { .pl = pl, .enc = enc, .first = i, .writeback = writeback };
		bool ready[WRITE_GROUP_MAX] = { 0 };
		unsigned nr = pl->nr - i < WRITE_GROUP_MAX ? pl->nr - i : WRITE_GROUP_MAX;

		r = pool_run_ordered(nr, plan_encrypt_one, &pp, plan_pipe_write, &pp, ready, spread,
				     writeback ? plan_pipe_writeback : NULL);
		i += nr;
	}
	return r;
}

int bch_data_write_plan_index(struct btree_trans *t, struct bch_write_plan *pl,
			      struct bch_extent_update *u)
{
	struct bch_fs *c = pl->c;
	bool needs_rebalance = false;
	uint64_t done;
	int r;

	/* the filesystem's units may have changed (a device added): then not as planned */
	if (unit_sectors(c) != pl->unit)
		return -EAGAIN;
	if ((r = bch_extents_punch(c, t, pl->inum, pl->start, pl->start + pl->sectors, 0, u, &done)))
		return r;
	for (unsigned i = 0; i < pl->nr && !r; i++) {
		struct bch_write_plan_unit *pw = &pl->w[i];
		struct write_unit w = {
			.start		= pw->start,
			.sectors	= pw->sectors,
			.crc		= pw->crc,
			.version	= pw->version,
		};
		unsigned fresh = u->nr_fresh;

		r = unit_key(c, t, pl->inum, &pl->o, &w, pw->ptrs, pw->got, pl->unit, !i, u,
			     &needs_rebalance);
		if (u->nr_fresh != fresh)
			pw->got = 0;	/* u gives it back if the transaction is abandoned */
	}
	if (!r && needs_rebalance)
		r = bch_rebalance_work_set(c, t, pl->inum, pl->start);
	return r;
}

void bch_data_write_plan_free(struct bch_write_plan *pl, bool release)
{
	/* never indexed: the open buckets take it back, last piece first */
	for (unsigned i = pl->nr; release && pl->held && i-- > 0;)
		if (pl->w[i].got)
			bch_alloc_data_unwind(pl->c, pl->w[i].ptrs, pl->w[i].got, pl->w[i].sectors);
	free(pl->w);
	pl->w = NULL;
	pl->nr = 0;
	pl->held = false;
}

/*
 * An encrypted extent read into enc: verify its MAC, then decrypt (and
 * decompress) into dec, or in place into enc when dec is NULL (plain only).
 */
static int read_encrypted(struct bch_fs *c, const struct bch_bkey *k, void *enc, void *dec)
{
	const struct bch_extent *e = bkey_val(k);
	size_t bytes = (size_t)e->crc.compressed_sectors << BCH_SECTOR_SHIFT;

	if (!c->crypt || e->crc.csum_type != BCH_CSUM_chacha20_poly1305)
		return -BCH_ERR_csum_mismatch;	/* encrypted data without a key, or plaintext
						 * where only ciphertext can be: damage */
	if (bch_extent_crc_validate(&e->crc, 0, NULL, 0))
		return -BCH_ERR_bkey_invalid;
	struct bch_cipher_job j = {
		.version	= k->version,
		.src		= enc,
		.buf		= dec ? dec : enc,
		.bytes		= bytes,
		.mac		= e->crc.csum,
	};
	if (bch_crc_plain(&e->crc)) {
		bch_io_decrypt_batch(c, &j, 1);
		return j.r;
	}
	if (!dec)
		return -EINVAL;
	void *tmp = malloc(bytes);
	if (!tmp)
		return -ENOMEM;
	j.buf = tmp;
	bch_io_decrypt_batch(c, &j, 1);
	int r = j.r;
	if (!r)
		r = bch_decompress(e->crc.compression_type, tmp, e->crc.compressed_bytes, dec,
				   (size_t)e->crc.uncompressed_sectors << BCH_SECTOR_SHIFT);
	free(tmp);
	return r;
}

static int check_copy(struct bch_fs *c, const struct bch_bkey *k, void *enc, void *dec);

/*
 * Read the encoded extent of k from pointer i into enc and check it; for a
 * compressed extent, decode it into dec too (dec may be NULL when the extent
 * is not compressed: the data is then enc itself).  Encrypted: with dec,
 * enc keeps the bytes as read (ciphertext: what a copy writes elsewhere)
 * and the data goes to dec; without, enc is decrypted in place.
 */
static int read_copy_raw(struct bch_fs *c, const struct bch_bkey *k, unsigned i, void *enc, void *dec,
			 bool dec_check)
{
	const struct bch_extent *e = bkey_val(k);
	const struct bch_extent_ptr *p = &e->ptrs[i];
	struct bch_dev *ca = p->dev < BCH_SB_MEMBERS_MAX ? c->devs[p->dev] : NULL;
	size_t bytes = (size_t)e->crc.compressed_sectors << BCH_SECTOR_SHIFT;

	if (!ca || !ca->bdev)
		return -BCH_ERR_device_missing;
	if (!bch_alloc_ptr_live(c, p))
		return -BCH_ERR_btree_node_bad;	/* stale: the bucket was reused */
	int r = bch_dev_read(ca->bdev, enc, bytes, (uint64_t)p->offset << BCH_SECTOR_SHIFT);
	if (r || !dec_check)
		return r;
	return check_copy(c, k, enc, dec);
}

static int read_copy(struct bch_fs *c, const struct bch_bkey *k, unsigned i, void *enc, void *dec)
{
	return read_copy_raw(c, k, i, enc, dec, true);
}

/* Verify (and decrypt, decode) the encoded extent of k read into enc; see read_copy(). */
static int check_copy(struct bch_fs *c, const struct bch_bkey *k, void *enc, void *dec)
{
	const struct bch_extent *e = bkey_val(k);
	size_t bytes = (size_t)e->crc.compressed_sectors << BCH_SECTOR_SHIFT;

	if (c->crypt || e->crc.csum_type == BCH_CSUM_chacha20_poly1305)
		return read_encrypted(c, k, enc, dec);
	if (bch_crc_plain(&e->crc) && !dec) {
		if (bch_extent_crc_validate(&e->crc, 0, NULL, 0))
			return -BCH_ERR_bkey_invalid;
		return bch_csum_verify(e->crc.csum_type, enc, bytes, e->crc.csum);
	}
	return bch_extent_decode(&e->crc, enc, dec);
}

/* ... counting a copy that fails its checksum against its member (super.h) */
int bch_extent_read_copy(struct bch_fs *c, const struct bch_bkey *k, unsigned i, void *enc, void *dec)
{
	int r = read_copy(c, k, i, enc, dec);

	if (r == -BCH_ERR_csum_mismatch)
		bch_dev_error_inc(c, ((const struct bch_extent *)bkey_val(k))->ptrs[i].dev,
				  BCH_DEV_ERROR_checksum);
	return r;
}

/* An I/O buffer (aligned for direct I/O, not zeroed: reads fill it). */
static void *io_buf(size_t bytes)
{
	void *p;

	return posix_memalign(&p, 4096, bytes ? bytes : 4096) ? NULL : p;
}

int bch_data_verify_key(struct bch_fs *c, const struct bch_bkey *k, unsigned *bad)
{
	const struct bch_extent *e = bkey_val(k);

	*bad = 0;
	if (k->type != BCH_BKEY_extent)
		return 0;
	void *enc = bch_dev_alloc_buf((size_t)e->crc.compressed_sectors << BCH_SECTOR_SHIFT);
	void *dec = malloc((size_t)e->crc.uncompressed_sectors << BCH_SECTOR_SHIFT);
	if (!enc || !dec) {
		free(enc);
		free(dec);
		return -ENOMEM;
	}
	int r = 0;
	for (unsigned i = 0; i < bch_extent_nr_ptrs(k) && !r; i++) {
		int cr = bch_extent_read_copy(c, k, i, enc, dec);
		if (bch_err_is_dl(cr))
			r = cr;		/* not the copy's fault: every copy would fail */
		else if (cr)
			*bad |= 1U << i;
	}
	free(enc);
	free(dec);
	if (r)
		*bad = 0;
	return r;
}

struct rebuild_ctx {
	struct bch_fs		*c;
	const struct bch_bkey	*k;
	void			*enc, *dec;
};

static int rebuild_verify(void *p)
{
	struct rebuild_ctx *x = p;

	return check_copy(x->c, x->k, x->enc, x->dec);
}

/*
 * Every copy of k failed with r: when one of its pointers is striped, rebuild
 * the encoded extent from its stripe into enc (and dec, as read_copy()) and
 * verify it (ec.h).  0 then; otherwise r, or a library's error.
 */
static int read_rebuild(struct bch_fs *c, const struct bch_bkey *k, void *enc, void *dec, int r)
{
	const struct bch_extent *e = bkey_val(k);
	struct rebuild_ctx x = { c, k, enc, dec };

	if (bch_err_is_dl(r) || !(c->sb->features & BCH_FEATURE_ERASURE_CODE))
		return r;
	for (unsigned i = 0; i < bch_extent_nr_ptrs(k); i++) {
		if (!(e->ptrs[i].flags & BCH_EXTENT_PTR_STRIPED))
			continue;
		int rr = bch_ec_rebuild_ptr(c, &e->ptrs[i], e->crc.compressed_sectors, enc,
					    rebuild_verify, &x);
		if (!rr) {
			c->data_rebuilt++;
			return 0;
		}
		return bch_err_is_dl(rr) ? rr : r;
	}
	return r;
}

int bch_extent_rebuild_copy(struct bch_fs *c, const struct bch_bkey *k, unsigned i, void *enc,
			    void *dec)
{
	const struct bch_extent *e = bkey_val(k);
	struct rebuild_ctx x = { c, k, enc, dec };

	if (!(e->ptrs[i].flags & BCH_EXTENT_PTR_STRIPED))
		return -EIO;
	return bch_ec_rebuild_ptr(c, &e->ptrs[i], e->crc.compressed_sectors, enc, rebuild_verify, &x);
}

int bch_extent_read_rebuild(struct bch_fs *c, const struct bch_bkey *k, void *enc, void *dec, int r)
{
	return read_rebuild(c, k, enc, dec, r);
}

/* read_key()'s error when no copy of k could be read; r is the last copy's. */
static int no_good_copy(struct bch_fs *c, const struct bch_bkey *k, int r)
{
	uint64_t ks = bch_extent_start(k);

	if (bch_err_is_dl(r))	/* a missing library: the copies may well be good */
		return bch_fs_err(c, r, "inode %" PRIu64 ": sectors %" PRIu64 "..%" PRIu64 ": %s",
				  (uint64_t)k->p.inode, ks, (uint64_t)k->p.offset, bch_err_str(r));
	return bch_fs_err(c, -EIO, "inode %" PRIu64 ": no good copy of sectors %" PRIu64
			  "..%" PRIu64 " (%s)", (uint64_t)k->p.inode, ks, (uint64_t)k->p.offset,
			  bch_err_str(r));
}

/*
 * The order copies of k are tried in: live cached copies first (promote put
 * them on the fast devices), then the dirty ones as stored.
 */
static unsigned read_order(struct bch_fs *c, const struct bch_bkey *k, unsigned *order)
{
	const struct bch_extent *e = bkey_val(k);
	unsigned nr = bch_extent_nr_ptrs(k), n = 0;

	for (unsigned i = 0; i < nr; i++)	/* (never without a checksum: see move.c) */
		if ((e->ptrs[i].flags & BCH_EXTENT_PTR_CACHED) && e->crc.csum_type != BCH_CSUM_none &&
		    bch_alloc_ptr_live(c, &e->ptrs[i]))
			order[n++] = i;
	for (unsigned i = 0; i < nr; i++)
		if (!(e->ptrs[i].flags & BCH_EXTENT_PTR_CACHED))
			order[n++] = i;
	return n;
}

/*
 * Promote: k was read from copy i; does it want a cached copy on
 * promote_target?  Not when a live copy is there already, or the key has no
 * room for another pointer.
 */
static bool wants_promote(struct bch_fs *c, const struct bch_bkey *k, unsigned i, uint64_t target)
{
	const struct bch_extent *e = bkey_val(k);
	unsigned nr = bch_extent_nr_ptrs(k);

	if (!target || nr >= BCH_REPLICAS_MAX || bch_dev_in_target(c->sb, e->ptrs[i].dev, target))
		return false;
	/* a cached copy needs a checksum to be trusted (move.c), and covers the
	 * whole encoded extent: not worth it for a small part of one */
	if (e->crc.csum_type == BCH_CSUM_none || 2 * (uint64_t)k->size < e->crc.uncompressed_sectors)
		return false;
	for (unsigned j = 0; j < nr; j++)
		if (bch_dev_in_target(c->sb, e->ptrs[j].dev, target) &&
		    (!(e->ptrs[j].flags & BCH_EXTENT_PTR_CACHED) || bch_alloc_ptr_live(c, &e->ptrs[j])))
			return false;
	return true;
}

struct promote_list {
	uint64_t		target;		/* 0: no promotes */
	struct bch_bkey		*keys[BCH_PROMOTE_MAX];
	unsigned		nr;
};

static void promote_note(struct bch_fs *c, struct promote_list *pl, const struct bch_bkey *k,
			 unsigned i)
{
	const struct bch_extent_ptr *p = &((const struct bch_extent *)bkey_val(k))->ptrs[i];

	if (pl && pl->nr < BCH_PROMOTE_MAX && wants_promote(c, k, i, pl->target) &&
	    (pl->keys[pl->nr] = bch_bkey_dup(k)))
		pl->nr++;
	if (pl && (p->flags & BCH_EXTENT_PTR_CACHED))
		bch_alloc_bucket_read(c, p);	/* eviction takes the least recently read */
}

/*
 * Encrypted extents a read wants whole, read (not yet verified) into the
 * caller's buffer: verified and decrypted together on the pool
 * (bch_io_decrypt_batch()), then each handled as read_key() would have.
 */
#define READ_DEFER_MAX	16

struct read_defer {
	unsigned		nr;
	struct {
		struct bch_bkey	*k;
		unsigned	order[BCH_REPLICAS_MAX], nr_order, o;
		char		*dst;
	}			e[READ_DEFER_MAX];
};

/*
 * Try k's copies order[o0..] into enc (and dec) after r (the last copy's
 * error): the first that verifies, else a rebuild from its stripe.  0 or
 * the error.
 */
static int read_copies(struct bch_fs *c, const struct bch_bkey *k, const unsigned *order, unsigned nr_order,
		       unsigned o0, void *enc, void *dec, struct promote_list *pl, int r)
{
	for (unsigned o = o0; o < nr_order; o++) {
		unsigned i = order[o];
		r = bch_extent_read_copy(c, k, i, enc, dec);
		if (!r) {
			promote_note(c, pl, k, i);
			return 0;
		}
		if (bch_err_is_dl(r))
			break;
		c->data_bad_copies += r != -BCH_ERR_device_missing;
	}
	return read_rebuild(c, k, enc, dec, r);
}

/* Verify and decrypt the deferred extents; on a bad copy go on as read_key() does. */
static int read_defer_flush(struct bch_fs *c, struct read_defer *d, struct promote_list *pl)
{
	struct bch_cipher_job j[READ_DEFER_MAX];
	int ret = 0;

	for (unsigned n = 0; n < d->nr; n++) {
		const struct bch_extent *e = bkey_val(d->e[n].k);
		j[n] = (struct bch_cipher_job) {
			.version	= d->e[n].k->version,
			.src		= d->e[n].dst,
			.buf		= d->e[n].dst,
			.bytes		= (size_t)e->crc.compressed_sectors << BCH_SECTOR_SHIFT,
			.mac		= e->crc.csum,
		};
	}
	bch_io_decrypt_batch(c, j, d->nr);
	for (unsigned n = 0; n < d->nr; n++) {
		struct bch_bkey *k = d->e[n].k;
		unsigned i = d->e[n].order[d->e[n].o];
		int r = j[n].r;

		if (!r) {
			promote_note(c, pl, k, i);
		} else if (!ret) {
			if (r == -BCH_ERR_csum_mismatch)	/* as bch_extent_read_copy() counts it */
				bch_dev_error_inc(c, ((const struct bch_extent *)bkey_val(k))->ptrs[i].dev,
						  BCH_DEV_ERROR_checksum);
			c->data_bad_copies += r != -BCH_ERR_device_missing;
			r = read_copies(c, k, d->e[n].order, d->e[n].nr_order, d->e[n].o + 1, d->e[n].dst,
					NULL, pl, r);
			if (r)
				ret = no_good_copy(c, k, r);
		}
		free(k);
	}
	d->nr = 0;
	return ret;
}

/*
 * k, an encrypted extent wanted whole into dst: read its first readable
 * copy there and defer its check to read_defer_flush().  False when it
 * cannot be deferred (no room, a damaged key, no copy read): read_key()
 * then does it all.
 */
static bool read_defer_add(struct bch_fs *c, struct read_defer *d, const struct bch_bkey *k,
			   const unsigned *order, unsigned nr_order, char *dst)
{
	const struct bch_extent *e = bkey_val(k);

	if (!d || d->nr == READ_DEFER_MAX || !c->crypt || e->crc.csum_type != BCH_CSUM_chacha20_poly1305 ||
	    bch_extent_crc_validate(&e->crc, 0, NULL, 0))
		return false;
	/* its first copy unreadable: read_key() tries them in turn, counting each */
	struct bch_bkey *dup;
	if (!nr_order || read_copy_raw(c, k, order[0], dst, NULL, false) || !(dup = bch_bkey_dup(k)))
		return false;
	d->e[d->nr].k = dup;
	memcpy(d->e[d->nr].order, order, nr_order * sizeof(*order));
	d->e[d->nr].nr_order = nr_order;
	d->e[d->nr].o = 0;
	d->e[d->nr].dst = dst;
	d->nr++;
	return true;
}

/* Copy the part of k's data inside [start, start + sectors) to buf (d: it may defer, see above). */
static int read_key(struct bch_fs *c, const struct bch_bkey *k, uint64_t start, uint64_t sectors,
		    char *buf, struct promote_list *pl, struct read_defer *d)
{
	unsigned order[BCH_REPLICAS_MAX], nr_order;
	const struct bch_extent *e = bkey_val(k);
	uint64_t ks = bch_extent_start(k), from = ks > start ? ks : start;
	uint64_t to = k->p.offset < start + sectors ? k->p.offset : start + sectors;
	char *dst = buf + ((from - start) << BCH_SECTOR_SHIFT);
	size_t len = (to - from) << BCH_SECTOR_SHIFT;

	if (k->type == BCH_BKEY_reservation) {
		memset(dst, 0, len);
		return 0;
	}
	bool plain = bch_crc_plain(&e->crc);
	/* the whole encoded extent wanted, into an aligned buffer: read it in place */
	nr_order = read_order(c, k, order);
	if (plain && !e->crc.offset && from == ks && to == k->p.offset &&
	    k->size == e->crc.compressed_sectors && !((uintptr_t)dst & 4095)) {
		if (read_defer_add(c, d, k, order, nr_order, dst))
			return 0;
		int r = read_copies(c, k, order, nr_order, 0, dst, NULL, pl, -BCH_ERR_device_missing);
		return r ? no_good_copy(c, k, r) : 0;
	}
	void *enc = io_buf((size_t)e->crc.compressed_sectors << BCH_SECTOR_SHIFT);
	void *dec = plain ? NULL : malloc((size_t)e->crc.uncompressed_sectors << BCH_SECTOR_SHIFT);
	int r = -ENOMEM;
	if (enc && (plain || dec)) {
		r = -BCH_ERR_device_missing;
		for (unsigned o = 0; o < nr_order; o++) {
			unsigned i = order[o];
			r = bch_extent_read_copy(c, k, i, enc, dec);
			if (!r)
				promote_note(c, pl, k, i);
			if (!r || bch_err_is_dl(r))
				break;
			c->data_bad_copies += r != -BCH_ERR_device_missing;
		}
		if (r)
			r = read_rebuild(c, k, enc, dec, r);
	}
	if (!r)
		memcpy(dst, (char *)(plain ? enc : dec) + ((e->crc.offset + from - ks) << BCH_SECTOR_SHIFT), len);
	free(enc);
	free(dec);
	if (r && r != -ENOMEM)
		return no_good_copy(c, k, r);
	return r;
}

/*
 * The part of reflink_p k inside [start, start + sectors): the indirect
 * extents behind it, each read as an extent of the file (no promote: the
 * cached copy would belong to the indirect extent, which the move path's
 * compare-and-swap on the extents btree does not reach).
 */
static int read_reflink(struct bch_fs *c, const struct bch_bkey *k, uint64_t start, uint64_t sectors,
			char *buf)
{
	uint64_t ks = bch_extent_start(k), from = ks > start ? ks : start;
	uint64_t to = k->p.offset < start + sectors ? k->p.offset : start + sectors;
	struct bch_bkey **keys;
	unsigned nr;
	int r = bch_reflink_resolve(c, k, from, to, &keys, &nr);

	for (unsigned i = 0; i < nr; i++) {
		if (!r)
			r = read_key(c, keys[i], start, sectors, buf, NULL, NULL);
		free(keys[i]);
	}
	free(keys);
	return r;
}

static int data_read(struct bch_fs *c, uint64_t inum, uint64_t start, void *buf, uint64_t sectors,
		     struct promote_list *pl)
{
	struct bch_viter it;
	const struct bch_bkey *cur;
	int r = 0, err = 0;
	struct read_defer *d = c->crypt ? malloc(sizeof(*d)) : NULL;

	if (d)
		d->nr = 0;
	uint64_t done = start;	/* sectors before this are filled */

	bch_viter_init(&it, c, BCH_BTREE_ID_extents, POS(inum, start + 1, 0),
			    POS(inum, UINT64_MAX, 0));
	/* the iterator's key is only valid until the next step: reads use a copy */
	while (!r && (cur = bch_viter_next(&it, &err))) {
		if (bch_extent_start(cur) >= start + sectors)
			break;
		if (cur->type != BCH_BKEY_extent && cur->type != BCH_BKEY_reservation &&
		    cur->type != BCH_BKEY_reflink_p)
			continue;
		uint64_t ks = bch_extent_start(cur);
		if (ks > done)		/* a hole reads as zeros */
			memset((char *)buf + ((done - start) << BCH_SECTOR_SHIFT), 0,
			       (ks - done) << BCH_SECTOR_SHIFT);
		struct bch_bkey *k = bch_bkey_dup(cur);
		r = k->type == BCH_BKEY_reflink_p ? read_reflink(c, k, start, sectors, buf)
						  : read_key(c, k, start, sectors, buf, pl, d);
		free(k);
		if (!r && d && d->nr == READ_DEFER_MAX)
			r = read_defer_flush(c, d, pl);
		if (cur->p.offset > done)
			done = cur->p.offset;
	}
	bch_viter_exit(&it);
	if (d) {
		/* also after an error (it frees the keys); its extents came first */
		int fr = read_defer_flush(c, d, pl);
		if (fr)
			r = fr;
		free(d);
	}
	if (!r && !err && done < start + sectors)
		memset((char *)buf + ((done - start) << BCH_SECTOR_SHIFT), 0,
		       (start + sectors - done) << BCH_SECTOR_SHIFT);
	return r ? r : err;
}

int bch_data_keys_append(struct bch_fs *c, uint64_t inum, uint64_t start, uint64_t sectors,
			 char **buf, size_t *len)
{
	struct bch_viter it;
	const struct bch_bkey *cur;
	int r = 0, err = 0;

	bch_viter_init(&it, c, BCH_BTREE_ID_extents, POS(inum, start + 1, 0),
		       POS(inum, UINT64_MAX, 0));
	while (!r && (cur = bch_viter_next(&it, &err))) {
		if (bch_extent_start(cur) >= start + sectors)
			break;
		size_t n = bkey_bytes(cur);
		char *nb = realloc(*buf, *len + n);
		if (!nb) {
			r = -ENOMEM;
			break;
		}
		memcpy(nb + *len, cur, n);
		*buf = nb;
		*len += n;
	}
	bch_viter_exit(&it);
	return r ? r : err;
}

int bch_data_read(struct bch_fs *c, uint64_t inum, uint64_t start, void *buf, uint64_t sectors)
{
	return data_read(c, inum, start, buf, sectors, NULL);
}

int bch_data_read_promote(struct bch_fs *c, uint64_t inum, const struct bch_io_opts *o,
			  uint64_t start, void *buf, uint64_t sectors)
{
	struct promote_list pl = { .target = c->read_only || c->opts.v[Opt_fsck] ? 0 : o->promote_target };
	int r = data_read(c, inum, start, buf, sectors, &pl);

	/* best effort: a promote that fails (no space, a race) changes nothing */
	if (pl.nr) {
		struct bch_move_stats s = { 0 };
		struct bch_mover *m;
		struct bch_move_op op = { .nr_new = 1, .target = pl.target, .target_only = true,
					  .cached = true };
		if (!bch_mover_init(c, &s, &m)) {
			for (unsigned i = 0; i < pl.nr; i++)
				bch_mover_add(m, pl.keys[i], &op);
			bch_mover_exit(m);
			c->promoted += s.keys_moved;
			/*
			 * The promote target is full: its least recently read
			 * cached data makes room for the next promotes (free once
			 * the eviction is durable).
			 */
			for (unsigned d = 0; s.keys_no_space && d < c->nr_devs; d++)
				if (c->devs[d] && bch_dev_in_target(c->sb, d, pl.target))
					bch_alloc_evict(c, d, 2);
		}
		c->err_msg[0] = 0;
	}
	for (unsigned i = 0; i < pl.nr; i++)
		free(pl.keys[i]);
	return r;
}

uint64_t bch_data_readahead_plan(struct bch_fs *c, uint64_t inum, uint64_t start, uint64_t sectors,
				 struct bch_readahead *ra)
{
	struct bch_viter it;
	const struct bch_bkey *k;
	uint64_t covered = start + sectors;
	int err;

	ra->nr = 0;
	bch_viter_init(&it, c, BCH_BTREE_ID_extents, POS(inum, start + 1, 0),
			    POS(inum, start + sectors, 0));
	while ((k = bch_viter_next(&it, &err))) {
		if (k->type != BCH_BKEY_extent || !bch_extent_nr_ptrs(k))
			continue;
		const struct bch_extent *e = bkey_val(k);
		unsigned order[BCH_REPLICAS_MAX];
		if (!read_order(c, k, order))		/* the copy a read would try first */
			continue;
		const struct bch_extent_ptr *p = &e->ptrs[order[0]];
		struct bch_dev *ca = p->dev < BCH_SB_MEMBERS_MAX ? c->devs[p->dev] : NULL;
		if (!ca || !ca->bdev)
			continue;
		uint64_t off = (uint64_t)p->offset << BCH_SECTOR_SHIFT;
		uint64_t len = (uint64_t)e->crc.compressed_sectors << BCH_SECTOR_SHIFT;
		if (bch_readahead_slot_takes(&e->crc) && bch_dev_uncached_ok(ca->bdev))
			continue;	/* fs_read.h's read-ahead reads it, uncached */
		if (ra->nr && ra->run[ra->nr - 1].bdev == ca->bdev &&
		    ra->run[ra->nr - 1].offset + ra->run[ra->nr - 1].len == off) {
			ra->run[ra->nr - 1].len += len;
			continue;
		}
		if (ra->nr == BCH_READAHEAD_MAX) {
			covered = bch_extent_start(k);
			break;
		}
		ra->run[ra->nr].bdev = ca->bdev;
		ra->run[ra->nr].offset = off;
		ra->run[ra->nr].len = len;
		ra->nr++;
	}
	bch_viter_exit(&it);
	return covered > start ? covered : start;
}

void bch_data_readahead_issue(const struct bch_readahead *ra)
{
	for (unsigned i = 0; i < ra->nr; i++)
		bch_dev_willneed(ra->run[i].bdev, ra->run[i].offset, ra->run[i].len);
}

/* ------------------------------------------- reads outside the engine lock */

/*
 * The plan of one read (io.h "Reads outside the engine lock").  Anything
 * the fast path does not do itself makes bch_data_read_plan() refuse, and
 * the caller reads the old way: reflinked extents are planned through their
 * indirect extents, but a first copy that is not readable now (a missing
 * member, a stale pointer), a damaged encoding, or a promote are not.
 */
static int plan_add(struct bch_read_plan *pl, const struct bch_read_piece *p)
{
	if (pl->nr == pl->cap) {
		unsigned cap = pl->cap ? pl->cap * 2 : 8;
		struct bch_read_piece *n = realloc(pl->p, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		pl->p = n;
		pl->cap = cap;
	}
	pl->p[pl->nr++] = *p;
	return 0;
}

/* Bytes [from, to) of the read (file bytes) read as zeros. */
static int plan_zero(struct bch_read_plan *pl, uint64_t from, uint64_t to)
{
	if (from >= to)
		return 0;
	struct bch_read_piece p = { .buf_off = from - pl->offset, .len = to - from };
	return plan_add(pl, &p);
}

/* The part of extent (or reservation) k inside the read. */
static int plan_key(struct bch_fs *c, struct bch_read_plan *pl, const struct bch_bkey *k)
{
	uint64_t ks = bch_extent_start(k) << BCH_SECTOR_SHIFT, ke = (uint64_t)k->p.offset << BCH_SECTOR_SHIFT;
	uint64_t from = ks > pl->offset ? ks : pl->offset;
	uint64_t end = pl->offset + pl->len, to = ke < end ? ke : end;
	unsigned order[BCH_REPLICAS_MAX];

	if (from >= to)
		return 0;
	if (k->type == BCH_BKEY_reservation)
		return plan_zero(pl, from, to);
	const struct bch_extent *e = bkey_val(k);
	if (bch_extent_crc_validate(&e->crc, 0, NULL, 0) || !read_order(c, k, order))
		return -EAGAIN;
	if ((c->crypt || e->crc.csum_type == BCH_CSUM_chacha20_poly1305) &&
	    (!c->crypt || e->crc.csum_type != BCH_CSUM_chacha20_poly1305))
		return -EAGAIN;		/* damage: the old path says so */
	const struct bch_extent_ptr *ptr = &e->ptrs[order[0]];
	struct bch_dev *ca = ptr->dev < BCH_SB_MEMBERS_MAX ? c->devs[ptr->dev] : NULL;
	if (!ca || !ca->bdev || !bch_alloc_ptr_live(c, ptr))
		return -EAGAIN;		/* degraded, or stale: the old path tries the others */
	if (ptr->flags & BCH_EXTENT_PTR_CACHED)
		bch_alloc_bucket_read(c, ptr);	/* as promote_note(): eviction's clock */
	struct bch_read_piece p = {
		.buf_off	= from - pl->offset,
		.len		= to - from,
		.src_off	= ((uint64_t)e->crc.offset << BCH_SECTOR_SHIFT) + (from - ks),
		.bdev		= ca->bdev,
		.dev_off	= (uint64_t)ptr->offset << BCH_SECTOR_SHIFT,
		.version	= k->version,
		.crc		= e->crc,
	};
	return plan_add(pl, &p);
}

static int plan_reflink(struct bch_fs *c, struct bch_read_plan *pl, const struct bch_bkey *k)
{
	uint64_t start = pl->offset >> BCH_SECTOR_SHIFT;
	uint64_t end = (pl->offset + pl->len + BCH_SECTOR_SIZE - 1) >> BCH_SECTOR_SHIFT;
	uint64_t ks = bch_extent_start(k), from = ks > start ? ks : start;
	uint64_t to = k->p.offset < end ? k->p.offset : end;
	struct bch_bkey **keys;
	unsigned nr;
	int r = bch_reflink_resolve(c, k, from, to, &keys, &nr);

	if (r)
		return -EAGAIN;
	for (unsigned i = 0; i < nr; i++) {
		if (!r)
			r = plan_key(c, pl, keys[i]);
		free(keys[i]);
	}
	free(keys);
	return r;
}

int bch_data_read_plan(struct bch_fs *c, uint64_t inum, uint64_t offset, uint64_t len,
		       struct bch_read_plan *pl)
{
	uint64_t start = offset >> BCH_SECTOR_SHIFT;
	uint64_t end = (offset + len + BCH_SECTOR_SIZE - 1) >> BCH_SECTOR_SHIFT;
	uint64_t done = offset;		/* file bytes before this are planned */
	struct bch_viter it;
	const struct bch_bkey *k;
	int r = 0, err = 0;

	*pl = (struct bch_read_plan) { .c = c, .offset = offset, .len = len,
				       .seq = __atomic_load_n(&c->data_reuse_seq, __ATOMIC_SEQ_CST) };
	bch_viter_init(&it, c, BCH_BTREE_ID_extents, POS(inum, start + 1, 0), POS(inum, UINT64_MAX, 0));
	while (!r && (k = bch_viter_next(&it, &err))) {
		if (bch_extent_start(k) >= end)
			break;
		if (k->type != BCH_BKEY_extent && k->type != BCH_BKEY_reservation &&
		    k->type != BCH_BKEY_reflink_p)
			continue;
		uint64_t ks = bch_extent_start(k) << BCH_SECTOR_SHIFT;
		if (ks > done)
			r = plan_zero(pl, done, ks < offset + len ? ks : offset + len);
		if (!r)
			r = k->type == BCH_BKEY_reflink_p ? plan_reflink(c, pl, k) : plan_key(c, pl, k);
		if (((uint64_t)k->p.offset << BCH_SECTOR_SHIFT) > done)
			done = (uint64_t)k->p.offset << BCH_SECTOR_SHIFT;
	}
	bch_viter_exit(&it);
	if (!r && !err && done < offset + len)
		r = plan_zero(pl, done, offset + len);
	if (r || err) {
		bch_data_read_plan_free(pl);
		return r ? r : err;
	}
	return 0;
}

void bch_data_read_plan_free(struct bch_read_plan *pl)
{
	free(pl->p);
	pl->p = NULL;
	pl->nr = pl->cap = 0;
}

/*
 * Read piece p's encoded extent and verify it; its bytes go to dst.  Whole
 * plain extents at an aligned dst are read in place; others through enc
 * (and a decompression buffer).  An encrypted extent is only read here: its
 * MAC and cipher are the batch's (run_decrypt()).
 */
static bool run_direct(const struct bch_read_piece *p, const char *dst)
{
	return bch_crc_plain(&p->crc) && !p->src_off &&
	       p->len == (uint64_t)p->crc.compressed_sectors << BCH_SECTOR_SHIFT && !((uintptr_t)dst & 4095);
}

static bool run_encrypted(const struct bch_read_piece *p)
{
	return p->crc.csum_type == BCH_CSUM_chacha20_poly1305;
}

/* The decoded bytes of p, from its encoded extent at enc (decrypted when it was encrypted). */
static int run_decode(const struct bch_read_piece *p, const void *enc, char *dst)
{
	size_t enc_bytes = (size_t)p->crc.compressed_sectors << BCH_SECTOR_SHIFT;
	size_t dec_bytes = (size_t)p->crc.uncompressed_sectors << BCH_SECTOR_SHIFT;
	int r;

	if (!run_encrypted(p) && (r = bch_csum_verify(p->crc.csum_type, enc, enc_bytes, p->crc.csum)))
		return r;
	if (bch_crc_plain(&p->crc)) {
		if (enc != dst)
			memcpy(dst, (const char *)enc + p->src_off, p->len);
		return 0;
	}
	void *dec = malloc(dec_bytes);
	if (!dec)
		return -ENOMEM;
	r = bch_decompress(p->crc.compression_type, enc, p->crc.compressed_bytes, dec, dec_bytes);
	if (!r)
		memcpy(dst, (char *)dec + p->src_off, p->len);
	free(dec);
	return r;
}

/*
 * A read's encrypted extents, each read, verified and decrypted whole by
 * one thread (bch_crypt_extent_open(): its MAC, then its cipher, over
 * bytes that stay in that core's cache): one wait for the pool, and on
 * it the read of the next extent overlaps the MAC and cipher of this one.
 */
struct run_crypt {
	struct bch_fs			*c;
	struct bch_cipher_job		*j;
	const struct bch_read_piece	**p;	/* j[i]'s piece: read into j[i].src first */
};

static void run_crypt_one(void *arg, unsigned i)
{
	struct run_crypt *rc = arg;
	struct bch_cipher_job *j = &rc->j[i];
	const struct bch_read_piece *p = rc->p[i];

	if ((j->r = bch_dev_read_try(p->bdev, (void *)j->src, j->bytes, p->dev_off)))
		return;
	j->r = bch_crypt_extent_open(rc->c, j->version, j->src, j->buf, j->bytes, &j->mac);
}

/*
 * Less than this is decrypted on the calling thread alone.  Two 128 KiB
 * extents (the kernel's usual 256 KiB read) go to the caller and a worker,
 * but only while no other run is decrypting: the kernel's readahead keeps
 * several reads in flight, each on its own daemon thread, and those
 * already fill the cores.  Measured (1 GiB through the mount, medians of
 * 5-7): the pool for every such run was 2-4% slower at load 2-5 (and 27%
 * faster at load 10); only alone, level at load 4-5, and O_DIRECT reads
 * of 1 MiB (one in flight) 3-15% faster.
 */
#define READ_POOL_MIN_BYTES	(256 << 10)
static unsigned runs_decrypting;

static void run_decrypt(struct bch_fs *c, struct bch_cipher_job *j, const struct bch_read_piece **p,
			unsigned nr)
{
	struct run_crypt rc = { .c = c, .j = j, .p = p };
	size_t bytes = 0;
	bool alone = __atomic_add_fetch(&runs_decrypting, 1, __ATOMIC_RELAXED) == 1;

	for (unsigned i = 0; i < nr; i++)
		bytes += j[i].bytes;
	bool spread = (alone && bytes >= READ_POOL_MIN_BYTES) || pool.want > 0;	/* (tests ask for workers) */
	if (nr == 1 && spread) {		/* one big extent: its pieces spread */
		if (!(j->r = bch_dev_read_try(p[0]->bdev, (void *)j->src, j->bytes, p[0]->dev_off)))
			bch_io_decrypt_batch(c, j, nr);
	} else if (spread)
		pool_run(nr, run_crypt_one, &rc);
	else
		for (unsigned i = 0; i < nr; i++)
			run_crypt_one(&rc, i);
	__atomic_sub_fetch(&runs_decrypting, 1, __ATOMIC_RELAXED);
}

ssize_t bch_data_read_plan_run(struct bch_read_plan *pl, void *buf)
{
	struct bch_fs *c = pl->c;
	char *out = buf;
	void **enc = calloc(pl->nr ? pl->nr : 1, sizeof(*enc));
	struct bch_cipher_job *j = calloc(pl->nr ? pl->nr : 1, sizeof(*j));
	const struct bch_read_piece **jp = calloc(pl->nr ? pl->nr : 1, sizeof(*jp));
	unsigned nr_j = 0;
	int r = enc && j && jp ? 0 : -ENOMEM;

	/* 1: read every piece (zeros for holes), but the encrypted ones: step 2 does */
	for (unsigned i = 0; i < pl->nr && !r; i++) {
		const struct bch_read_piece *p = &pl->p[i];
		char *dst = out + p->buf_off;
		size_t bytes = (size_t)p->crc.compressed_sectors << BCH_SECTOR_SHIFT;

		if (!p->bdev) {
			memset(dst, 0, p->len);
			continue;
		}
		enc[i] = run_direct(p, dst) ? dst : io_buf(bytes);
		if (!enc[i]) {
			r = -ENOMEM;
			break;
		}
		if (run_encrypted(p)) {
			jp[nr_j] = p;
			j[nr_j++] = (struct bch_cipher_job) {
				.version = p->version, .src = enc[i], .buf = enc[i],
				.bytes = bytes, .mac = p->crc.csum,
			};
		} else if ((r = bch_dev_read_try(p->bdev, enc[i], bytes, p->dev_off))) {
			break;
		}
	}
	/* 2: the reads, MACs and cipher of the encrypted ones, together (the pool) */
	if (!r && nr_j) {
		run_decrypt(c, j, jp, nr_j);
		for (unsigned n = 0; n < nr_j && !r; n++)
			r = j[n].r;
	}
	/* 3: verify, decompress, copy out */
	for (unsigned i = 0; i < pl->nr && !r; i++)
		if (pl->p[i].bdev)
			r = run_decode(&pl->p[i], enc[i], out + pl->p[i].buf_off);
	for (unsigned i = 0; enc && i < pl->nr; i++)
		if (enc[i] != out + pl->p[i].buf_off)
			free(enc[i]);
	free(enc);
	free(j);
	free(jp);
	/* 4: no space the plan read from was rewritten meanwhile (io.h); the
	 * fence keeps the reads above before the load on weakly ordered CPUs */
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (!r && __atomic_load_n(&c->data_reuse_seq, __ATOMIC_SEQ_CST) != pl->seq)
		r = -EAGAIN;
	return r ? -EAGAIN : (ssize_t)pl->len;
}
