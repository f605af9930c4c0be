/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCH_TESTS_IOEVENTS_H
#define _BCH_TESTS_IOEVENTS_H

/*
 * ioevents.h - a device's writes and the writeback starts (io.h's
 * bch_io_writeback_hook) in the order they were made, for the tests of a
 * planned write's order (io_plan, crypt_pipe): each unit written once, its
 * writeback started once, after its write.
 *
 *	ioev_attach(dev);	  the device's write hook and the writeback hook
 *	ioev_nr = 0; ... a write ...; look at ioev[0 .. ioev_nr)
 *	ioev_detach(dev);
 *
 * Events are appended under a mutex (several pool workers write); past
 * IOEV_MAX they are counted in ioev_nr but not kept: a test asserts
 * ioev_nr <= IOEV_MAX.  A write's buf is the caller's buffer, valid only
 * until the write it belongs to ends.  One test at a time.
 */
#include <stdbool.h>
#include <stdint.h>

#include "blockdev.h"

#define IOEV_MAX	4096

struct ioev {
	bool		wb;		/* a writeback start, else a device write */
	uint64_t	offset, len;
	const void	*buf;		/* a write's bytes (see above); NULL for a start */
};

extern struct ioev ioev[IOEV_MAX];
extern unsigned ioev_nr;

/* Record dev's writes (its hook) and every writeback start (the global hook). */
void ioev_attach(struct bch_blockdev *dev);
/* Remove both hooks. */
void ioev_detach(struct bch_blockdev *dev);

#endif /* _BCH_TESTS_IOEVENTS_H */
