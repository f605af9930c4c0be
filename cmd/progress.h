/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_PROGRESS_H
#define _BCACHEFS_PROGRESS_H

/*
 * progress.h - the progress line of long commands: bytes done and left,
 * rate and ETA, rewritten in place (\r) on a terminal at most five times a
 * second; nothing when the output is not a terminal (scripts read the
 * summary or --json instead).
 */

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct cmd_progress {
	FILE		*f;		/* where the line goes */
	bool		on;		/* f is a terminal */
	const char	*what;		/* "device evacuate: moved" */
	double		start, last;
	bool		shown;
};

double cmd_now(void);		/* monotonic seconds */
void cmd_progress_init(struct cmd_progress *p, FILE *f, bool tty, const char *what);
/* Show done of total bytes (total 0: unknown); force: even if shown recently. */
void cmd_progress_update(struct cmd_progress *p, uint64_t done, uint64_t total, bool force);
/* End the line (a newline if a line is shown), before the summary. */
void cmd_progress_done(struct cmd_progress *p);

#endif /* _BCACHEFS_PROGRESS_H */
