/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_BTREE_PREFETCH_H
#define _BCACHEFS_BTREE_PREFETCH_H

/*
 * btree_prefetch.h - btree nodes read ahead on a second thread, for a scan
 * of a filesystem opened read-only (fsck -n).  See btree_prefetch.c.
 */

#include <stdbool.h>
#include <stddef.h>

#include "bcachefs_format.h"

struct bch_fs;
struct btree;

/*
 * Start the reader thread for c (c->prefetch); only on a filesystem opened
 * read-only (nothing may write a node while its bytes wait here).  0, or
 * a negative error (then reads go on as without it).
 */
int bch_prefetch_start(struct bch_fs *c);
/* Stop it and free what it read and nobody took. */
void bch_prefetch_stop(struct bch_fs *c);

/*
 * The node ptr points to (a node of btree id at level) will be read soon:
 * read its first copy ahead and parse it (its keys validated as the read
 * path would now), and, while the read path compares copies (fsck pass 3),
 * compare the second one with it.  Dropped when the queue is full or ptr is
 * queued already.
 */
void bch_prefetch_node(struct bch_fs *c, unsigned id, unsigned level, const struct bch_bkey *ptr);

/*
 * The read path (btree_io.c parse_one()): when the copy at ptr was read and
 * parsed ahead for b's btree, level, range and bp's seq, with the first read
 * len bytes long, b takes its keys, arena and what the parse learnt (the
 * fields parse_one() sets), and true is returned; false: read it yourself
 * (perhaps its bytes wait in bch_prefetch_take()).  Waits a little
 * (btree_prefetch.c) while it is being parsed.
 */
bool bch_prefetch_take_parsed(struct bch_fs *c, struct btree *b, const struct bch_extent_ptr *ptr,
			      const struct bch_btree_ptr *bp, size_t len);

/*
 * btree_io.c, for the read-ahead thread: parse the first copy of the node
 * ptr points to from buf (len bytes read from its start; b's arena from now
 * on, freed on failure too) into b, which is not in the cache and has its
 * id, level and range set.  Nothing of c changes (a bad copy is not
 * counted: the read path reads and reports it again); keys are validated
 * unless skip_validate (fsck -n after pass 3).  0, or negative.
 */
int bch_btree_node_parse_ahead(struct bch_fs *c, struct btree *b, const struct bch_bkey *ptr,
			       void *buf, size_t len, bool skip_validate);

/*
 * The read path (btree_io.c): the bytes of the copy at ptr, from its start,
 * in a node arena (bch_node_arena_alloc(); the caller owns it), when they
 * were read ahead with a first read of *len bytes; *len becomes how many
 * were read (as far as the bsets go: more than asked, perhaps).  Waits a
 * little when they are being read.  NULL: read them yourself.
 */
void *bch_prefetch_take(struct bch_fs *c, const struct bch_extent_ptr *ptr, size_t *len);

/*
 * Were copies a and b of the node last taken compared over written bytes
 * (and b's block after found zeros)?  1 identical, 0 different, -1 not
 * compared here (compare them yourself).
 */
int bch_prefetch_same(struct bch_fs *c, const struct bch_extent_ptr *a,
		      const struct bch_extent_ptr *b, size_t written);

/* For tests: how many nodes the read path took from here (parsed or bytes). */
uint64_t bch_prefetch_nr_taken(struct bch_fs *c);
/* For tests: wait until nothing queued is left to read. */
void bch_prefetch_wait_idle(struct bch_fs *c);


/*
 * Streamed leaves (fsck -n): a leaf's keys read through a buffer of a fixed
 * size (LS_BUF) instead of the whole node held in memory.  Only the common
 * case streams: the leaf's first copy unencrypted, checksummed with crc32c,
 * crc64 or none, its bsets (at most LS_BSETS_MAX) followed by a block of
 * zeros (or the node's end), no shorter than its parent says.  Anything
 * else, or any failure, and the caller reads the node the ordinary way
 * (bch_btree_node_get()), which reports what is wrong.  A leaf of several
 * bsets is read as the read path merges them: of the keys at a position,
 * the latest bset's, none when that is a deletion.
 *
 * Open is a first pass over the copy's bytes: the checksum, and when asked
 * the other copies compared with it (as the read path's copies_identical())
 * and every key given to check(); what check() learns must stay with the
 * caller until open returns 0 (the checksum verified).  Keys are then read
 * again, from the page cache, a piece at a time (bch_leaf_stream_next()):
 * no key is used before the node's checksum was verified (DESIGN.md 4).
 * Once verified, check(priv, NULL) is called: when it returns non-zero
 * (the bsets' keys interleaved, say: what it learnt of each key is not the
 * leaf's), the open gives it the keys as bch_leaf_stream_next() yields them
 * (merged), then NULL again, before it returns, on the same thread (so a
 * leaf checked ahead has this done ahead too); a read that fails then and
 * the open returns 1.
 *
 * After fsck pass 3 (c->fsck_copies_checked on a read-only open: every
 * leaf reachable was verified then, its copies compared, its keys
 * validated, and nothing has written since), an open without compare or
 * check trusts that verification: it reads the headers that say where the
 * bsets lie, not the leaf (the files passes would otherwise read each
 * leaf twice).  This is the trust the second pass over a leaf's bytes
 * already places in the page cache, kept from pass 3 to the passes after:
 * a leaf pass 3 found damaged stops fsck -n before them.
 */
#define LS_BUF		(32U << 10)	/* a stream's buffer (its bsets' windows share it) */
#define LS_KEY_MAX	(256U * 8)	/* a key's most bytes (u64s <= 255) */
#define LS_BSETS_MAX	8		/* a leaf of more bsets does not stream */

/* One bset's keys in a part of the stream's buffer. */
struct ls_window {
	char			*buf;
	size_t			piece;		/* bytes read at a time */
	size_t			at, end;	/* node offsets: the next key, after the last */
	size_t			read_to;	/* read up to this node offset ... */
	size_t			stop;		/* ... and no further than this */
	size_t			base, fill;	/* buf holds node bytes [base, base + fill) */
	struct bch_bpos		prev;		/* the key last read (keys must ascend) */
	bool			any;
	const struct bch_bkey	*k;		/* its next key in the merge (NULL: read it) */
	bool			done;
};

struct bch_leaf_stream {
	struct bch_fs		*c;
	struct bch_blockdev	*bdev;
	uint64_t		where;		/* the copy's first byte on bdev */
	uint64_t		seq;
	struct bch_bpos		min_key, max_key;
	unsigned		nr_bsets;
	size_t			bset_start[LS_BSETS_MAX];	/* node offsets of each bset's keys */
	size_t			bset_end[LS_BSETS_MAX];
	struct ls_window	w[LS_BSETS_MAX];
	int			err;		/* next() returned NULL on an error */
	_Alignas(8) char	buf[LS_BUF];
};

/*
 * k of the leaf being opened (every key of every bset, in the order they
 * lie): 0 to go on, anything else stops (open returns 1); NULL: verified,
 * and then the merged keys, when asked (above)
 */
typedef int (*bch_leaf_check_fn)(void *priv, const struct bch_bkey *k);

/*
 * May leaves be streamed now?  Only read-only and unencrypted, and only
 * while no node in the cache is dirty: a journal replayed by a read-only
 * open leaves its keys in dirty nodes that are never written, so the bytes
 * on disk are not the btree (a streamed leaf would miss them).
 */
bool bch_leaf_stream_allowed(struct bch_fs *c);
/*
 * Open the leaf of btree id ptr points to (its first copy): 0 verified,
 * keys to be read with next(); 1 it does not stream (read it the ordinary
 * way).  compare: the other copies must hold the same bytes.
 */
int bch_leaf_stream_open(struct bch_fs *c, struct bch_leaf_stream *s, unsigned id,
			 const struct bch_bkey *ptr, bool compare, bch_leaf_check_fn check, void *priv);
/*
 * The leaf ptr points to will be opened soon (bch_leaf_stream_open()
 * without check()): the read-ahead thread makes the first pass over it
 * now, and the open then reads its keys only; after pass 3 (trusted, see
 * above) the thread only reads its bytes, so the open finds them in the
 * CPU's shared cache.  Dropped when the queue is full or ptr is queued
 * already.
 */
void bch_prefetch_verify(struct bch_fs *c, unsigned id, const struct bch_bkey *ptr, bool compare);
/*
 * As bch_prefetch_verify(), and every key given to check() with a copy of
 * priv (len bytes, at most BCH_PREFETCH_PRIV_MAX), for a bch_leaf_stream_open() with the same
 * check and priv as they are now: that open then takes the copy back into
 * its priv instead of reading the leaf's first pass itself.  check() runs
 * on the read-ahead thread: it may only read what does not change while
 * the filesystem is open read-only, and write its priv.  These are read
 * newest first: the caller opens the next ones itself while the thread is
 * busy (a leaf queued and not started is the open's own), and the two meet
 * in the middle.
 */
#define BCH_PREFETCH_PRIV_MAX	1024
void bch_prefetch_verify_check(struct bch_fs *c, unsigned id, const struct bch_bkey *ptr,
			       bool compare, bch_leaf_check_fn check, const void *priv, size_t len);
/*
 * The next key of an opened leaf (in s->buf, valid until the next call), in
 * order and inside the leaf's range; NULL at the end, or when a read fails
 * or the keys are not in order (s->err set: read the leaf the ordinary way).
 */
const struct bch_bkey *bch_leaf_stream_next(struct bch_leaf_stream *s);

#endif /* _BCACHEFS_BTREE_PREFETCH_H */
