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

/*
 * Start the reader thread for c (c->prefetch); only on a filesystem opened
 * read-only (nothing may write a node while its bytes wait here).  0, or
 * a negative error (then reads go on as without it).
 */
int bch_prefetch_start(struct bch_fs *c);
/* Stop it and free what it read and nobody took. */
void bch_prefetch_stop(struct bch_fs *c);

/*
 * The node ptr points to will be read soon: read its first copy ahead (and,
 * while the read path compares copies (fsck pass 3), its second one, and
 * compare them).  Dropped when the queue is full or ptr is queued already.
 */
void bch_prefetch_node(struct bch_fs *c, const struct bch_bkey *ptr);

/*
 * The read path (btree_io.c): the bytes of the copy at ptr, len bytes from
 * its start, in a node arena (bch_node_arena_alloc(); the caller owns it),
 * when they were read ahead; waits when they are being read.  NULL: read
 * them yourself.
 */
void *bch_prefetch_take(struct bch_fs *c, const struct bch_extent_ptr *ptr, size_t len);

/*
 * Were copies a and b of the node last taken compared over written bytes
 * (and b's block after found zeros)?  1 identical, 0 different, -1 not
 * compared here (compare them yourself).
 */
int bch_prefetch_same(struct bch_fs *c, const struct bch_extent_ptr *a,
		      const struct bch_extent_ptr *b, size_t written);

#endif /* _BCACHEFS_BTREE_PREFETCH_H */
