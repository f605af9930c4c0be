/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCH_TESTS_WRITERHOLD_H
#define _BCH_TESTS_WRITERHOLD_H

/*
 * writerhold.h - hold the journal writer's I/O in a device hook, for the
 * journal's tests (journal_async, journal_flush_step, journal_queue,
 * journal_lost, journal_review40).
 *
 * I/O from any thread but the test's (the one that called writerhold_reset())
 * is the writer's.  The writer's first request of the kind given to
 * writerhold_reset() waits in the hook, before it reaches the device, until
 * writerhold_let_go() (or 20 s); writerhold_held() says one is waiting.  The
 * counters say whose flushes and writes went by.  One test at a time.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "blockdev.h"

extern unsigned writerhold_own_flushes, writerhold_writer_flushes, writerhold_writer_writes;

/* The hook (struct bch_io_hook's fn). */
int writerhold_hook(void *priv, struct bch_blockdev *dev, enum bch_io_op op, uint64_t offset,
		    const void *buf, size_t len);
/* Start over: hold the writer's next op (a BCH_IO_*, or -1: none); the caller is the test. */
void writerhold_reset(int op);
/* Wait (at most 20 s) until the writer is held: true if it is. */
bool writerhold_wait_held(void);
/* Is the writer held now? */
bool writerhold_held(void);
/* Let the held request (and any later one) go on. */
void writerhold_let_go(void);

/*
 * The journal those tests share: one 64 MiB device, 64 KiB buckets (an
 * entry is at most 32 KiB), in a new directory under NAME (its path and
 * the image's below), a journal only, started, with record 1 written and
 * pinned so every entry stays in the replay range; writerhold_pin_flushes
 * counts the pin's flushes (0 while the workload stays inside the ring).
 */
struct bch_fs;
extern char writerhold_dir[64], writerhold_paths[1][128];
extern unsigned writerhold_pin_flushes;
struct bch_fs *writerhold_fresh_journal(const char *name);
/* A write outside the journal (as a data write): the next preflush reaches the device. */
void writerhold_other_write(struct bch_fs *c);
/*
 * Records of 200 words (after one writerhold_other_write()) until the open
 * entry is handed on, tagged from tag on; returns the next tag.
 */
unsigned writerhold_fill_entry(struct bch_fs *c, unsigned tag);
/* A suite's .fini: the writer let go, writerhold_dir removed. */
void writerhold_teardown(void);
/*
 * A hook (struct bch_io_hook's fn) failing the second journal entry
 * written (stubs not counted) with EIO; writerhold_jset_writes counts the
 * entries written since the test set it to 0.
 */
extern unsigned writerhold_jset_writes;
int writerhold_fail_second_jset(void *priv, struct bch_blockdev *dev, enum bch_io_op op,
				uint64_t offset, const void *buf, size_t len);

/*
 * Every power cut of rec's events (at 0..events, seeds cuts at each: seed
 * k keeps half the unflushed writes at random from seed k * mult + at,
 * torn when k is odd), each written to an image under writerhold_dir and
 * replayed: the replay clean and in order, every tag u in 1..tag-1 with
 * flushed_at[u] <= at there and, with no_hole, none after a missing one.
 * Returns the states checked.  The failure names the cut and its plan.
 */
struct iorec;
unsigned writerhold_check_cuts(struct iorec *rec, size_t events, unsigned tag,
			       const size_t *flushed_at, unsigned seeds, unsigned mult, bool no_hole);
#endif
