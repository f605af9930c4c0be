/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCH_TEST_CRASHFILES_H
#define _BCH_TEST_CRASHFILES_H

/*
 * crashfiles.h - the bookkeeping of a crash test whose workload changes
 * files f0, f1, ... in the root directory (fs_crash, reflink_crash,
 * fs_readwrite).
 *
 * struct crash_ops: for each op of the recorded workload, the events
 * (iorec_nr_events()) issued when it finished and the newest op an fsync
 * had made durable by then.  crash_ops_bounds() turns a cut at event `at`
 * into the range of ops whose state the image may show: from the last op
 * fsynced before the cut to the last op begun before it.
 *
 * struct crash_files: a model of files of varying size (at most maxsize
 * bytes; a file may not exist), updated by the test as it changes the real
 * files, and its state (exists, size, a hash of the bytes) after every op.
 * crash_files_check() reads the files of a filesystem and says whether
 * they match the state after some op in a range.
 *
 * Both fail the test (Criterion) when memory runs out.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bch_fs;

struct crash_ops {
	unsigned	nops;
	size_t		*op_event;	/* [nops + 1]: events issued when op finished; [0]: before op 1 */
	unsigned	*synced_op;	/* [nops + 1]: the last op fsynced when op finished */
	unsigned	last_sync;
};

void crash_ops_init(struct crash_ops *o, unsigned nops);
void crash_ops_exit(struct crash_ops *o);
/* Op finished, events issued so far; synced: an fsync returned after it. */
void crash_ops_done(struct crash_ops *o, unsigned op, bool synced, size_t events);
/* A cut at event at: the image shows the state after one of ops *durable..*issued. */
void crash_ops_bounds(const struct crash_ops *o, size_t at, unsigned *durable, unsigned *issued);

struct crash_file_state {
	bool		exists;
	size_t		size;
	uint64_t	hash;
};

struct crash_files {
	unsigned		nfiles;
	size_t			maxsize;
	unsigned char		**data;		/* [nfiles][maxsize]: zero past size */
	size_t			*size;
	bool			*exists;
	struct crash_file_state	*states;	/* [nops + 1][nfiles]; row 0: after format */
	struct crash_ops	ops;
};

void crash_files_init(struct crash_files *m, unsigned nfiles, size_t maxsize, unsigned nops);
void crash_files_exit(struct crash_files *m);
/* Record the model's state as the one after op. */
void crash_files_snapshot(struct crash_files *m, unsigned op);

/* The model's side of each change the workload makes. */
void crash_files_create(struct crash_files *m, unsigned f);
void crash_files_write(struct crash_files *m, unsigned f, size_t off, const void *buf, size_t len);
void crash_files_truncate(struct crash_files *m, unsigned f, size_t size);
void crash_files_rename(struct crash_files *m, unsigned from, unsigned to);
void crash_files_unlink(struct crash_files *m, unsigned f);

/*
 * Files f0.. of c against the states after ops from..to: NULL when they
 * match one, else msg saying what differs (from the state after op from).
 */
const char *crash_files_check(const struct crash_files *m, struct bch_fs *c, unsigned from,
			      unsigned to, char *msg, size_t len);

#endif
