// SPDX-License-Identifier: GPL-2.0
/* ioevents.c - see ioevents.h. */
#include <pthread.h>

#include "io.h"
#include "tests/lib/ioevents.h"

struct ioev ioev[IOEV_MAX];
unsigned ioev_nr;
static pthread_mutex_t ioev_lock = PTHREAD_MUTEX_INITIALIZER;

static void ioev_add(bool wb, uint64_t offset, uint64_t len, const void *buf)
{
	pthread_mutex_lock(&ioev_lock);
	if (ioev_nr < IOEV_MAX)
		ioev[ioev_nr] = (struct ioev) { .wb = wb, .offset = offset, .len = len, .buf = buf };
	ioev_nr++;
	pthread_mutex_unlock(&ioev_lock);
}

static int ioev_write_hook(void *priv, struct bch_blockdev *dev, enum bch_io_op op, uint64_t offset,
			   const void *buf, size_t len)
{
	(void)priv, (void)dev;
	if (op == BCH_IO_WRITE)
		ioev_add(false, offset, len, buf);
	return 0;
}

static void ioev_writeback_hook(struct bch_blockdev *dev, uint64_t offset, uint64_t len)
{
	(void)dev;
	ioev_add(true, offset, len, NULL);
}

static struct bch_io_hook ioev_hook = { .fn = ioev_write_hook };

void ioev_attach(struct bch_blockdev *dev)
{
	ioev_nr = 0;
	bch_dev_set_hook(dev, &ioev_hook);
	bch_io_writeback_hook = ioev_writeback_hook;
}

void ioev_detach(struct bch_blockdev *dev)
{
	bch_io_writeback_hook = NULL;
	bch_dev_set_hook(dev, NULL);
}
