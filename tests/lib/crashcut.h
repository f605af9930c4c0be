/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCH_TEST_CRASHCUT_H
#define _BCH_TEST_CRASHCUT_H

/*
 * crashcut.h - the cut loop of crash tests whose session ran on ndev
 * recorded members (iorecord.h) and whose files a model checks
 * (ec_crash, ec_inplace, ec_move_crash, move_crash).
 *
 * crash_cuts_run() cuts the recording at every event 0..nev, `seeds` times
 * each (cut seed: seed + s * 7919 + at; half the writes in flight kept,
 * torn), writes the cut's images to crash[], opens them, asks check() for
 * the ops whose state they may show, and then fsck -n (no data pass) of
 * the images must find nothing.  The first failure fails the test naming
 * the event and seed, with the cut's plan in the log; CRASH_KEEP=1 in the
 * environment keeps that cut's images (their names printed) and exits.
 */

#include <stddef.h>
#include <stdint.h>

#include "tests/lib/testfs.h"

struct bch_fs;
struct iorec;

/* NULL when c's files match the state after some op in from..to, else msg saying why. */
typedef const char *crash_check_fn(struct bch_fs *c, unsigned from, unsigned to, char *msg,
				   size_t len);

struct crash_cuts {
	struct iorec	*rec;
	unsigned	ndev;
	char		(*crash)[TESTFS_PATH_MAX];	/* where the cut's images go */
	unsigned	nops;
	const size_t	*op_event;	/* [nops + 1]: events issued when op had finished */
	const unsigned	*synced_op;	/* [nops + 1]: the last op fsynced by then;
					 * NULL: each op was durable when it finished */
	uint64_t	seed;
	unsigned	seeds;		/* cuts per event */
	crash_check_fn	*check;
	const char	*name;		/* the suite, in messages */
};

/* Every cut; returns the number of cuts checked. */
size_t crash_cuts_run(const struct crash_cuts *cc);

#endif
