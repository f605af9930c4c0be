// SPDX-License-Identifier: GPL-2.0
/* writerhold.c - hold the journal writer's I/O in a device hook (see writerhold.h). */
#include <errno.h>
#include <pthread.h>
#include <time.h>

#include "writerhold.h"

unsigned writerhold_own_flushes, writerhold_writer_flushes, writerhold_writer_writes;

static pthread_t test_thread;
static pthread_mutex_t hk_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hk_cond = PTHREAD_COND_INITIALIZER;
static int hold_op = -1;
static bool held, release;

int writerhold_hook(void *priv, struct bch_blockdev *dev, enum bch_io_op op, uint64_t offset,
		    const void *buf, size_t len)
{
	(void)priv; (void)dev; (void)offset; (void)buf; (void)len;
	pthread_mutex_lock(&hk_lock);
	if (pthread_equal(pthread_self(), test_thread)) {
		writerhold_own_flushes += op == BCH_IO_FLUSH;
	} else {
		writerhold_writer_flushes += op == BCH_IO_FLUSH;
		writerhold_writer_writes += op == BCH_IO_WRITE;
		if ((int)op == hold_op && !release) {
			struct timespec until;
			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_sec += 20;
			held = true;
			pthread_cond_broadcast(&hk_cond);
			while (!release && pthread_cond_timedwait(&hk_cond, &hk_lock, &until) != ETIMEDOUT)
				;
			held = false;
		}
	}
	pthread_mutex_unlock(&hk_lock);
	return 0;
}

void writerhold_reset(int op)
{
	pthread_mutex_lock(&hk_lock);
	hold_op = op;
	held = release = false;
	writerhold_own_flushes = writerhold_writer_flushes = writerhold_writer_writes = 0;
	pthread_mutex_unlock(&hk_lock);
	test_thread = pthread_self();
}

bool writerhold_wait_held(void)
{
	struct timespec until;
	bool ret;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 20;
	pthread_mutex_lock(&hk_lock);
	while (!held && pthread_cond_timedwait(&hk_cond, &hk_lock, &until) != ETIMEDOUT)
		;
	ret = held;
	pthread_mutex_unlock(&hk_lock);
	return ret;
}

bool writerhold_held(void)
{
	pthread_mutex_lock(&hk_lock);
	bool ret = held;
	pthread_mutex_unlock(&hk_lock);
	return ret;
}

void writerhold_let_go(void)
{
	pthread_mutex_lock(&hk_lock);
	release = true;
	pthread_cond_broadcast(&hk_cond);
	pthread_mutex_unlock(&hk_lock);
}
