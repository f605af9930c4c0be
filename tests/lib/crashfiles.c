// SPDX-License-Identifier: GPL-2.0
/*
 * crashfiles.c - a crash test's model of files f0.. and its op bookkeeping
 * (crashfiles.h says what each part keeps).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bcachefs.h"
#include "fs.h"
#include "fs_ops.h"
#include "tests/lib/crashfiles.h"

void crash_ops_init(struct crash_ops *o, unsigned nops)
{
	o->nops = nops;
	o->op_event = calloc(nops + 1, sizeof(*o->op_event));
	o->synced_op = calloc(nops + 1, sizeof(*o->synced_op));
	o->last_sync = 0;
	cr_assert(o->op_event && o->synced_op);
}

void crash_ops_exit(struct crash_ops *o)
{
	free(o->op_event);
	free(o->synced_op);
	o->op_event = NULL;
	o->synced_op = NULL;
}

void crash_ops_done(struct crash_ops *o, unsigned op, bool synced, size_t events)
{
	if (synced)
		o->last_sync = op;
	o->synced_op[op] = o->last_sync;
	o->op_event[op] = events;
}

/*
 * An fsync returns after its flush: the ops fsynced by event at are those
 * of an op that had finished by then (op_event <= at).  Op n had begun when
 * op n - 1 had finished.
 */
void crash_ops_bounds(const struct crash_ops *o, size_t at, unsigned *durable, unsigned *issued)
{
	*durable = 0;
	*issued = 0;
	for (unsigned op = 1; op <= o->nops; op++) {
		if (o->op_event[op] <= at)
			*durable = o->synced_op[op];
		if (o->op_event[op - 1] <= at)
			*issued = op;
	}
}

static uint64_t fnv(const unsigned char *p, size_t n)
{
	uint64_t h = 1469598103934665603ULL;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ULL;
	return h;
}

void crash_files_init(struct crash_files *m, unsigned nfiles, size_t maxsize, unsigned nops)
{
	m->nfiles = nfiles;
	m->maxsize = maxsize;
	m->data = calloc(nfiles, sizeof(*m->data));
	m->size = calloc(nfiles, sizeof(*m->size));
	m->exists = calloc(nfiles, sizeof(*m->exists));
	m->states = calloc((size_t)(nops + 1) * nfiles, sizeof(*m->states));
	cr_assert(m->data && m->size && m->exists && m->states);
	for (unsigned f = 0; f < nfiles; f++)
		cr_assert(m->data[f] = calloc(1, maxsize));
	crash_ops_init(&m->ops, nops);
}

void crash_files_exit(struct crash_files *m)
{
	for (unsigned f = 0; f < m->nfiles; f++)
		free(m->data[f]);
	free(m->data);
	free(m->size);
	free(m->exists);
	free(m->states);
	crash_ops_exit(&m->ops);
}

void crash_files_snapshot(struct crash_files *m, unsigned op)
{
	struct crash_file_state *row = m->states + (size_t)op * m->nfiles;

	for (unsigned f = 0; f < m->nfiles; f++)
		row[f] = (struct crash_file_state) {
			m->exists[f], m->size[f], m->exists[f] ? fnv(m->data[f], m->size[f]) : 0 };
}

void crash_files_create(struct crash_files *m, unsigned f)
{
	m->exists[f] = true;
	m->size[f] = 0;
}

void crash_files_write(struct crash_files *m, unsigned f, size_t off, const void *buf, size_t len)
{
	cr_assert_leq(off + len, m->maxsize);
	memmove(m->data[f] + off, buf, len);
	if (off + len > m->size[f])
		m->size[f] = off + len;
}

void crash_files_truncate(struct crash_files *m, unsigned f, size_t size)
{
	cr_assert_leq(size, m->maxsize);
	if (size < m->size[f])
		memset(m->data[f] + size, 0, m->size[f] - size);
	m->size[f] = size;
}

void crash_files_unlink(struct crash_files *m, unsigned f)
{
	m->exists[f] = false;
	memset(m->data[f], 0, m->maxsize);
	m->size[f] = 0;
}

void crash_files_rename(struct crash_files *m, unsigned from, unsigned to)
{
	if (from == to)
		return;
	memcpy(m->data[to], m->data[from], m->maxsize);
	m->size[to] = m->size[from];
	m->exists[to] = m->exists[from];
	crash_files_unlink(m, from);
}

/* Field by field: the padding after `exists` is not part of a state. */
static bool same_state(const struct crash_file_state *a, const struct crash_file_state *b)
{
	return a->exists == b->exists && a->size == b->size && a->hash == b->hash;
}

const char *crash_files_check(const struct crash_files *m, struct bch_fs *c, unsigned from,
			      unsigned to, char *msg, size_t len)
{
	unsigned nf = m->nfiles;
	struct crash_file_state *found = calloc(nf, sizeof(*found));
	unsigned char *buf = malloc(m->maxsize + 4096);
	const char *bad = NULL;

	cr_assert(found && buf);
	for (unsigned f = 0; f < nf && !bad; f++) {
		char name[16];
		uint64_t inum;
		struct stat st;
		snprintf(name, sizeof(name), "f%u", f);
		int r = bch_fs_lookup(c, BCH_ROOT_INO, name, &inum);
		if (r == -ENOENT)
			continue;	/* found[f]: does not exist */
		if (r || (r = bch_fs_getattr(c, inum, &st))) {
			snprintf(msg, len, "%s: %d (%s)", name, r, c->err_msg);
			bad = msg;
			break;
		}
		/* one byte more than the model allows: a file too long shows */
		ssize_t n = bch_fs_read(c, inum, 0, buf, m->maxsize + 4096);
		if (n < 0 || (size_t)n != (size_t)st.st_size) {
			snprintf(msg, len, "%s: read %zd of %ld (%s)", name, n, (long)st.st_size,
				 c->err_msg);
			bad = msg;
			break;
		}
		found[f] = (struct crash_file_state) { true, (size_t)n, fnv(buf, n) };
	}
	for (unsigned p = from; p <= to && !bad; p++) {
		const struct crash_file_state *row = m->states + (size_t)p * nf;
		unsigned f = 0;
		while (f < nf && same_state(&found[f], &row[f]))
			f++;
		if (f == nf)
			goto out;	/* matches the state after op p */
	}
	if (!bad) {
		const struct crash_file_state *row = m->states + (size_t)from * nf;
		unsigned f = 0;
		while (f < nf && same_state(&found[f], &row[f]))
			f++;
		if (f < nf)
			snprintf(msg, len, "no state after ops %u..%u matches (f%u: exists %d size %zu, "
				 "after op %u: exists %d size %zu)", from, to, f, found[f].exists,
				 found[f].size, from, row[f].exists, row[f].size);
		else
			snprintf(msg, len, "no state after ops %u..%u matches", from, to);
		bad = msg;
	}
out:
	free(found);
	free(buf);
	return bad;
}
