// SPDX-License-Identifier: GPL-2.0
/*
 * progress.c - the progress line of long commands (see progress.h).
 */
#include <inttypes.h>
#include <time.h>

#include "opts.h"
#include "progress.h"

double cmd_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

void cmd_progress_init(struct cmd_progress *p, FILE *f, bool tty, const char *what)
{
	p->f = f;
	p->on = tty;
	p->what = what;
	p->start = cmd_now();
	p->last = 0;
	p->shown = false;
}

void cmd_progress_update(struct cmd_progress *p, uint64_t done, uint64_t total, bool force)
{
	char d[32], t[32], r[32], eta[32] = "";
	double now = cmd_now(), secs = now - p->start;

	if (!p->on || (!force && now - p->last < 0.2))
		return;
	p->last = now;
	uint64_t rate = secs > 0.05 ? (uint64_t)(done / secs) : 0;
	bch_human_size(done, d, sizeof(d));
	bch_human_size(rate, r, sizeof(r));
	if (total) {
		uint64_t left = total > done ? total - done : 0;
		bch_human_size(left, t, sizeof(t));
		if (rate && left)
			snprintf(eta, sizeof(eta), ", ETA %" PRIu64 " s", left / rate + 1);
		fprintf(p->f, "\r%s %s, %s left, %s/s%s   ", p->what, d, t, r, eta);
	} else {
		fprintf(p->f, "\r%s %s, %s/s   ", p->what, d, r);
	}
	fflush(p->f);
	p->shown = true;
}

void cmd_progress_done(struct cmd_progress *p)
{
	if (p->shown) {
		fputc('\n', p->f);
		fflush(p->f);
	}
	p->shown = false;
}
