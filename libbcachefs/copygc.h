/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_COPYGC_H
#define _BCACHEFS_COPYGC_H

/*
 * copygc.h - copying garbage collection of user data buckets, and the
 * eviction of cached data, so that a copy-on-write filesystem full of
 * overwritten data can still take writes.
 *
 * Overwrites leave dead sectors in the buckets of the data they replaced;
 * a bucket is reusable only once it holds no live (dirty) data.  Copygc
 * picks the user buckets with the least live sectors (greedy cleaning:
 * bch_alloc_copygc_candidates(), one pass over the bucket array), moves
 * their live extents through the move path (move.h, op.same_dev: a new
 * bucket on the same device, allocated from the first half of the btree
 * reserve, which is what lets copygc run on a device that user writes
 * already call full), and so frees whole buckets for the cost of their live
 * data.  Cached pointers into a victim bucket are not moved: they are
 * dropped with the key's rewrite, or, for keys with no dirty pointer there,
 * the bucket is left holding only cached data and is evicted
 * (bch_alloc_evict(), alloc.h) like any other such bucket.
 *
 * Cost.  Finding the victims is O(nbuckets log batch); finding the keys
 * that point into them is one walk of the whole extents btree per batch,
 * O(extents): there are no backpointers (bucket -> extents) yet, which
 * would make it O(keys moved).  A batch is as many victims as the space
 * copygc may write holds, so a walk frees as much as one walk can.
 *
 * Invariants
 *   (1) Copygc never makes data worse: it moves keys through the mover,
 *       which replaces a key only if it did not change meanwhile, and writes
 *       the new copy before the key that points at it is committed.
 *   (2) Freed buckets become reusable only once the journal entry that
 *       dropped their last pointer is durable: bch_copygc_step() flushes
 *       the journal when it freed any (alloc.c's free_seq does the rest).
 *   (3) A key covering only part of its encoded extent is rewritten in all
 *       its dirty copies (when all their devices take writes), so the move
 *       path trims it: moving dead sectors along would use more space than
 *       it frees.
 *   (4) Progress: bch_copygc_make_room() reports success only when it
 *       evicted a bucket (finitely many hold cached data) or left more
 *       space for user writes than its last call for the same write (a
 *       retry that fails again leaves dead space that a step would free
 *       every time), so a caller retrying on success terminates.
 *   (5) The btree reserve is refilled: when a step leaves a device that
 *       takes user data with no empty bucket above its reserve (btree
 *       nodes took them: overwrites that split large extents grow the
 *       btree), bch_copygc_make_room() runs further steps while each leaves
 *       copygc more room than the last.  Else the reserve would shrink into
 *       the half copygc may use, and copygc could free nothing more.
 *   (6) Moved data packs: a plain key moved whole on one device that does
 *       not fit the rest of the open bucket is cut there into two keys
 *       (move.c, move_split): else each move of a nearly bucket-sized piece
 *       (what an overwrite leaves of an extent grown by appends, io.c)
 *       would leave the rest unused, and copygc would waste what it frees.
 *
 * The caller holds whatever serialises the engine (fusemount's lock).
 */

#include <stdbool.h>
#include <stdint.h>

struct bch_fs;
struct bch_move_stats;

/*
 * Is copygc worth running in the background?  True when a read-write device
 * that takes user data has fewer empty or evictable buckets than its btree
 * reserve plus 1/16 of its buckets (a low-water mark: enough headroom that
 * foreground writes rarely wait for it), and its emptiest user bucket is at
 * most half live (moving it writes no more than it frees; a fuller victim is
 * left to the write that needs the space: bch_copygc_make_room) or the
 * device is critically low (fewer than reserve + 1/64 of its buckets).
 */
bool bch_copygc_needed(struct bch_fs *c);

/*
 * One batch: on each device that takes user data, the buckets with the
 * least live sectors whose live data fits in the space copygc may write
 * (evicting cached buckets first when that space is short), their live
 * extents moved, the journal flushed.  Adds to *s (may be NULL) and to
 * c->copygc_*.  Returns 1 if a bucket was freed, 0 if there was nothing to
 * do, or a negative error.
 */
int bch_copygc_step(struct bch_fs *c, struct bch_move_stats *s);

/*
 * For a write that failed with ENOSPC (fs_ops_data.c): evict cached buckets,
 * else run a copygc step (more while the btree reserve is short: invariant
 * 5).  Returns 1 when the write is worth retrying
 * (invariant 4), 0 when nothing could be freed, or a negative error.
 * *progress (0 before the first call for one write) remembers the room
 * the last call left.
 */
int bch_copygc_make_room(struct bch_fs *c, uint64_t *progress);

#endif /* _BCACHEFS_COPYGC_H */
