// SPDX-License-Identifier: GPL-2.0
/* writerhold.c - hold the journal writer's I/O in a device hook (see writerhold.h). */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bcachefs.h"
#include "errcode.h"
#include "format.h"
#include "journal.h"
#include "super.h"
#include "testfs.h"
#include "tmpdir.h"
#include "iorecord.h"
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

/* ------------------------------------------------ the journal they share */

char writerhold_dir[64], writerhold_paths[1][128];
unsigned writerhold_pin_flushes;
static struct bch_journal_pin test_pin;

static int pin_flush(struct bch_fs *c, struct bch_journal_pin *pin, uint64_t seq)
{
	(void)seq;
	writerhold_pin_flushes++;
	bch_journal_pin_drop(c, pin);
	return 0;
}

struct bch_fs *writerhold_fresh_journal(const char *name)
{
	struct bch_format_dev dev = { 0 };
	struct bch_format_args args = { .no_btrees = true };
	struct bch_opts o;
	char err[256];
	uint64_t newest;

	test_tmpdir_make(writerhold_dir, sizeof(writerhold_dir), name);
	snprintf(writerhold_paths[0], sizeof(writerhold_paths[0]), "%s/d0.img", writerhold_dir);
	dev.path = writerhold_paths[0];
	dev.size = 64 << 20;
	dev.bucket_size = 64 << 10;
	dev.durability = 1;
	bch_opts_default(&o);
	bch_opt_set(&o, Opt_btree_node_size, 64 << 10);
	cr_assert_eq(bch_format(&dev, 1, &o, NULL, &args, err, sizeof(err)), 0, "%s", err);

	struct bch_fs *c = testfs_journal_open(writerhold_paths, 1, false, 0, 0);
	cr_assert_eq(bch_journal_read(c, NULL, NULL, &newest), 0);
	bch_journal_start(c, 1);
	memset(&test_pin, 0, sizeof(test_pin));
	writerhold_pin_flushes = 0;
	bch_journal_pin_add(c, &test_pin, testfs_journal_record(c, 1, 10), pin_flush);
	return c;
}

void writerhold_other_write(struct bch_fs *c)
{
	struct bch_blockdev *bd = c->devs[0]->bdev;
	char *buf = bch_dev_alloc_buf(4096);
	uint64_t off = bch_dev_size(bd) - 4096;

	cr_assert_eq(bch_dev_read(bd, buf, 4096, off), 0);
	cr_assert_eq(bch_dev_write(bd, buf, 4096, off), 0);
	free(buf);
}

unsigned writerhold_fill_entry(struct bch_fs *c, unsigned tag)
{
	uint64_t seq = bch_journal_seq_open(c);

	writerhold_other_write(c);
	while (bch_journal_seq_open(c) == seq) {
		cr_assert_lt(tag, 4096);
		testfs_journal_record(c, tag++, 200);
	}
	return tag;
}

void writerhold_teardown(void)
{
	writerhold_let_go();
	test_tmpdir_remove(writerhold_dir);
}

unsigned writerhold_jset_writes;

int writerhold_fail_second_jset(void *priv, struct bch_blockdev *dev, enum bch_io_op op,
				uint64_t offset, const void *buf, size_t len)
{
	const struct bch_jset *js = buf;

	(void)priv; (void)dev; (void)offset;
	if (op == BCH_IO_WRITE && len >= sizeof(*js) && js->magic == BCH_JSET_MAGIC &&
	    !(js->flags & BCH_JSET_STUB) &&
	    __atomic_add_fetch(&writerhold_jset_writes, 1, __ATOMIC_SEQ_CST) == 2)
		return -EIO;
	return 0;
}

unsigned writerhold_check_cuts(struct iorec *rec, size_t events, unsigned tag,
			       const size_t *flushed_at, unsigned seeds, unsigned mult, bool no_hole)
{
	char crash[160];
	unsigned states = 0;

	snprintf(crash, sizeof(crash), "%s/crash.img", writerhold_dir);
	for (size_t at = 0; at <= events; at++)
		for (unsigned seed = 0; seed < seeds; seed++) {
			struct iorec_cut cut = { .at = at, .seed = seed * mult + at, .keep_pct = 50,
						 .torn = seed & 1 };
			struct iorec_plan plan;
			struct testfs_jseen *s = calloc(1, sizeof(*s));

			cr_assert(s);
			cr_assert_eq(iorec_plan(rec, &cut, &plan), 0);
			cr_assert_eq(iorec_write_image(rec, &plan, 0, crash), 0);
			int ret = testfs_journal_replay(crash, s);
			char *why = ret || s->bad ? iorec_plan_describe(rec, &plan) : NULL;
			cr_assert_eq(ret, 0, "cut %zu seed %u: %s\n%s", at, seed, bch_err_str(ret), why);
			cr_assert_not(s->bad, "cut %zu seed %u: bad or out-of-order entry\n%s", at, seed, why);
			bool hole = false;
			for (unsigned u = 1; u < tag; u++) {
				if (flushed_at[u] <= at && !s->tag[u])
					cr_assert_fail("cut %zu seed %u: tag %u lost, durable at event %zu\n%s",
						       at, seed, u, flushed_at[u],
						       why = iorec_plan_describe(rec, &plan));
				if (no_hole && hole && s->tag[u])
					cr_assert_fail("cut %zu seed %u: tag %u replayed after a missing one\n%s",
						       at, seed, u, why = iorec_plan_describe(rec, &plan));
				hole |= !s->tag[u];
			}
			free(s);
			free(why);
			iorec_plan_free(&plan);
			states++;
		}
	return states;
}
