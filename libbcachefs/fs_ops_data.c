// SPDX-License-Identifier: GPL-2.0
/*
 * fs_ops_data.c - file data for the POSIX layer (fs_ops.h): reads, writes in
 * transactions of WRITE_CHUNK, the writes planned under the engine lock and
 * written outside it (bch_fs_write_begin() and its rules), truncate,
 * fallocate, seek, remap and fsync.  fs_ops.c's invariants (3) and (4) are
 * kept here.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "alloc.h"
#include "bcachefs.h"
#include "blockdev.h"
#include "btree.h"
#include "snapshot.h"
#include "copygc.h"
#include "errcode.h"
#include "extents.h"
#include "fs_ops.h"
#include "hash_table.h"
#include "inode.h"
#include "io.h"
#include "journal.h"
#include "rebalance.h"
#include "reflink.h"
#include "str_hash.h"
#include "super.h"
#include "xattr_effective.h"
#include "fs_ops_shared.h"

/* ------------------------------------------------------------------ data */

static ssize_t v_read(struct bch_fs *c, uint64_t inum, uint64_t offset, void *buf, size_t len)
{
	struct bch_inode i;
	int r = bch_inode_get(c, inum, &i);

	if (r)
		return fs_ret_errno(r);
	if (S_ISDIR(i.mode))
		return -EISDIR;
	if (!S_ISREG(i.mode) && !S_ISLNK(i.mode))
		return -EINVAL;
	if (offset >= i.size)
		return 0;
	if (len > i.size - offset)
		len = i.size - offset;
	if (len > SSIZE_MAX)
		len = SSIZE_MAX & ~4095UL;

	uint64_t start = offset >> BCH_SECTOR_SHIFT;
	uint64_t end = (offset + len + BCH_SECTOR_SIZE - 1) >> BCH_SECTOR_SHIFT;
	size_t skip = offset & (BCH_SECTOR_SIZE - 1);
	struct bch_io_opts o;
	bch_io_opts_get(c, &i, &o);	/* promote_target: reads may add cached copies */
	if (!skip && !(len & (BCH_SECTOR_SIZE - 1)))
		r = bch_data_read_promote(c, inum, &o, start, buf, end - start);	/* straight into buf */
	else {
		char *tmp = malloc((end - start) << BCH_SECTOR_SHIFT);
		if (!tmp)
			return -ENOMEM;
		r = bch_data_read_promote(c, inum, &o, start, tmp, end - start);
		if (!r)
			memcpy(buf, tmp + skip, len);
		free(tmp);
	}
	return r ? fs_ret_errno(r) : (ssize_t)len;
}

/*
 * The end of a data write's transaction (r: the extent update's result):
 * the inode's sectors, its size (up to end, when grow) and times, then the
 * commit, or the update abandoned on an error.  Ends t and u.
 */
static int write_commit(struct bch_fs *c, struct btree_trans *t, struct bch_extent_update *u,
			struct ino_set *s, struct bch_inode *i, uint64_t end, bool grow, int r)
{
	if (!r) {
		i->sectors += u->i_sectors_delta;
		if (grow && end > i->size)
			i->size = end;
		fs_touch(i, true);
		r = fs_ino_set_write(c, s, t);
	}
	if (!r)
		r = fs_commit(c, t, u);
	else
		bch_extent_update_abort(c, u);
	bch_trans_exit(t);
	bch_extent_update_exit(u);
	return r;
}

/*
 * The whole blocks [a, b) around a write of [from, to) (a <= from, to <=
 * b, less than a block short at each end), aligned for direct I/O: only
 * [a, from) and [to, b) are zeroed, the bytes neither the old data read
 * into them nor the new data copied in by the caller fill; every byte of
 * [from, to) is the caller's to write.  bch_dev_alloc_buf() zeroed all of
 * it, under the engine lock: untar's 10 KiB writes spent ~10% of the
 * daemon's instructions in that memset; then the first and last blocks
 * whole: a small file's write zeroed its 4 KiB block to copy its bytes
 * over it (4.1k instructions a write under callgrind, rep stosb counted
 * per byte).
 */
static char *bounce_alloc(uint64_t a, uint64_t b, uint64_t from, uint64_t to)
{
	void *p;

	if (posix_memalign(&p, 4096, b - a))
		return NULL;
	memset(p, 0, from - a);
	memset((char *)p + (to - a), 0, b - to);
	return p;
}

/*
 * Write [offset, offset + len) of one chunk (inside WRITE_CHUNK after block
 * alignment) in one transaction: whole blocks are rewritten, partial ones
 * read first.  s: the inode as the caller read it (or empty: read here);
 * after a success it holds the inode as committed, after a failure it is
 * emptied (its copy was changed for a commit that did not happen).
 */
static int __write_chunk(struct bch_fs *c, struct ino_set *s, uint64_t inum, uint64_t offset,
			 const void *data, size_t len, uint64_t fill_to_size)
{
	struct bch_inode *i;
	struct bch_extent_update u = { 0 };
	struct btree_trans *t;
	struct bch_io_opts o;
	uint64_t bs = fs_block_bytes(c);
	uint64_t a = offset / bs * bs, b = (offset + len + bs - 1) / bs * bs;
	char *buf = NULL;	/* whole blocks, when data does not cover them */
	const char *src = data;
	int r;

	if ((r = fs_ino_get(c, s, inum, &i)))
		return r;
	if (!data || a != offset || b != offset + len) {
		buf = bounce_alloc(a, b, offset, offset + len);
		if (!buf)
			return -ENOMEM;
		bool head = a < offset && a < i->size;
		uint64_t tail = b - bs;
		if (head && (r = bch_data_read(c, inum, a >> BCH_SECTOR_SHIFT, buf,
					       bs >> BCH_SECTOR_SHIFT)))
			goto out;
		if (b > offset + len && tail < i->size && !(tail == a && head) &&
		    (r = bch_data_read(c, inum, tail >> BCH_SECTOR_SHIFT, buf + (tail - a),
				       bs >> BCH_SECTOR_SHIFT)))
			goto out;
		if (data)
			memcpy(buf + (offset - a), data, len);
		else
			memset(buf + (offset - a), 0, len);
		src = buf;
	}
	bch_io_opts_get(c, i, &o);
	if ((r = bch_trans_init(c, &t)))
		goto out;
	r = bch_data_write(c, t, inum, &o, a >> BCH_SECTOR_SHIFT, src, (b - a) >> BCH_SECTOR_SHIFT, &u);
	r = write_commit(c, t, &u, s, i, offset + len, fill_to_size, r);
out:
	free(buf);
	if (r)
		s->nr = 0;
	return r;
}

static int write_chunk(struct bch_fs *c, uint64_t inum, uint64_t offset, const void *data,
		       size_t len, uint64_t fill_to_size)
{
	struct ino_set s = { 0 };

	return __write_chunk(c, &s, inum, offset, data, len, fill_to_size);
}

/* The inode is read once: its chunks' commits keep s as they write it. */
static ssize_t v_write(struct bch_fs *c, uint64_t inum, uint64_t offset, const void *buf, size_t len)
{
	struct ino_set s = { 0 };
	struct bch_inode *ip;
	size_t done = 0;
	int r = fs_ino_get(c, &s, inum, &ip);

	if (r)
		return fs_ret_errno(r);
	struct bch_inode i = *ip;	/* as it was: its mode and flags */
	if (S_ISDIR(i.mode))
		return -EISDIR;
	if (!S_ISREG(i.mode))
		return -EINVAL;
	if ((r = fs_flags_write(&i, offset)))
		return r;
	if (offset > MAX_FILE_SIZE || len > MAX_FILE_SIZE - offset)
		return -EFBIG;
	if (c->read_only)
		return -EROFS;
	/* fs_err.c: every later write fails, and none reaches the devices */
	if (c->emergency_ro)
		return fs_ret_errno(-BCH_ERR_fs_emergency_ro);
	if ((r = fs_metadata_room_for(c, true)))
		return fs_ret_errno(r);
	while (done < len) {
		uint64_t pos = offset + done;
		size_t n = WRITE_CHUNK - pos % WRITE_CHUNK;
		if (n > len - done)
			n = len - done;
		r = __write_chunk(c, &s, inum, pos, (const char *)buf + done, n, 1);
		/* out of space: copygc or eviction may free some (copygc.h) */
		uint64_t room = 0;
		while (r && bch_err_class(r) == ENOSPC && bch_copygc_make_room(c, &room) > 0)
			r = __write_chunk(c, &s, inum, pos, (const char *)buf + done, n, 1);
		/* out of space: store as much as fits (halving, down to one block) */
		while (r && bch_err_class(r) == ENOSPC) {
			uint64_t bs = fs_block_bytes(c), first = bs - pos % bs;
			size_t half = (pos + n / 2) / bs * bs - pos;
			if (n <= first)
				break;
			n = half > first && half < n ? half : first;
			c->err_msg[0] = 0;
			r = __write_chunk(c, &s, inum, pos, (const char *)buf + done, n, 1);
		}
		if (r)
			break;
		done += n;
	}
	if (r && !done)
		return fs_ret_errno(r);
	if (i.flags & BCH_INODE_SYNC)		/* chattr +S: durable before the write returns */
		bch_fs_fsync(c);
	return done;
}

/* ------------------------------------------- writes outside the engine lock */

/*
 * The old bytes of the partial blocks around [offset, offset + len) into
 * buf (whole blocks from a, zeroed), as write_chunk() reads them for a file
 * of size bytes.
 */
static int rmw_read(struct bch_fs *c, uint64_t inum, uint64_t size, uint64_t offset, uint64_t len,
		    char *buf)
{
	uint64_t bs = fs_block_bytes(c);
	uint64_t a = offset / bs * bs, b = (offset + len + bs - 1) / bs * bs, tail = b - bs;
	bool head = a < offset && a < size;
	int r;

	if (head && (r = bch_data_read(c, inum, a >> BCH_SECTOR_SHIFT, buf, bs >> BCH_SECTOR_SHIFT)))
		return r;
	if (b > offset + len && tail < size && !(tail == a && head) &&
	    (r = bch_data_read(c, inum, tail >> BCH_SECTOR_SHIFT, buf + (tail - a),
			       bs >> BCH_SECTOR_SHIFT)))
		return r;
	return 0;
}

/*
 * The extent keys under the partial blocks of a write at [offset, offset +
 * len) (the first block and the last: what rmw_read() reads), into
 * *keys, *len; false when they cannot be taken.  None (holes, or past the
 * end) is *keys NULL, *len 0, and true.
 */
static bool rmw_keys(struct bch_fs *c, uint64_t inum, uint64_t offset, uint64_t len,
		     char **keys, size_t *keys_len)
{
	uint64_t bs = fs_block_bytes(c), a = offset / bs * bs;
	uint64_t tail = (offset + len + bs - 1) / bs * bs - bs;

	*keys = NULL;
	*keys_len = 0;
	if (bch_data_keys_append(c, inum, a >> BCH_SECTOR_SHIFT, bs >> BCH_SECTOR_SHIFT, keys, keys_len) ||
	    (tail != a &&
	     bch_data_keys_append(c, inum, tail >> BCH_SECTOR_SHIFT, bs >> BCH_SECTOR_SHIFT, keys, keys_len))) {
		free(*keys);
		*keys = NULL;
		*keys_len = 0;
		return false;
	}
	return true;
}

/*
 * A planned write's partial blocks were read at its plan: are they still
 * what the file holds there (a truncate, fallocate or remap meanwhile may
 * have changed them; no write of the file can have: it was planned so with
 * none in flight, and later ones end after it)?  The same size and the
 * same extent keys there (a key equal to the byte holds the same bytes) say
 * yes without reading them again (untar: one device read and checksum less
 * per unaligned write); otherwise the bytes are read and compared (a key
 * moved by rebalance or copygc holds the same bytes elsewhere).
 */
static bool rmw_still(struct bch_fs *c, uint64_t inum, uint64_t size, const struct bch_fs_write_op *op)
{
	uint64_t bs = fs_block_bytes(c), a = op->offset / bs * bs;
	uint64_t b = (op->offset + op->len + bs - 1) / bs * bs, end = op->offset + op->len;

	if (op->rmw_keys_ok && size == op->rmw_size) {
		char *now;
		size_t now_len;
		bool same = rmw_keys(c, inum, op->offset, op->len, &now, &now_len) &&
			    now_len == op->rmw_keys_len &&
			    (!now_len || !memcmp(now, op->rmw_keys, now_len));
		free(now);
		if (same)
			return true;
	}

	char *cur = bounce_alloc(a, b, op->offset, end);	/* only the old bytes are read */
	bool same = cur && !rmw_read(c, inum, size, op->offset, op->len, cur) &&
		    !memcmp(cur, op->bounce, op->offset - a) &&
		    !memcmp(cur + (end - a), op->bounce + (end - a), b - end);

	free(cur);
	return same;
}

/*
 * Plan op (fs_ops.h, bch_fs_write_begin()): -EAGAIN (or another error) when
 * it is to be written the old way.  rmw: the old bytes of a partial block
 * may be read now (no earlier write of the file in flight).
 */
static int v_write_plan(struct bch_fs *c, uint64_t inum, struct bch_fs_write_op *op, bool rmw)
{
	struct bch_inode i;
	struct bch_io_opts o;
	uint64_t offset = op->offset, len = op->len, bs = fs_block_bytes(c);
	uint64_t a = offset / bs * bs, b = (offset + len + bs - 1) / bs * bs;
	const char *src = op->buf;
	uint64_t gen = bch_btree_inode_commits();
	int r = bch_inode_get(c, inum, &i);

	op->inode = i;
	op->inode_gen = r ? gen - 1 : gen;

	/*
	 * the checks of v_write(): a failure is its to report, before any
	 * data is written (a read-only snapshot is refused only at the commit)
	 */
	const struct bch_view *view = bch_view_cur(c);
	if (r || !S_ISREG(i.mode) || fs_flags_write(&i, offset) || !len || offset > MAX_FILE_SIZE ||
	    len > MAX_FILE_SIZE - offset || c->read_only || c->emergency_ro || (view && view->ro))
		return -EAGAIN;
	/* one write_chunk() of v_write(): one transaction */
	if (offset / WRITE_CHUNK != (offset + len - 1) / WRITE_CHUNK)
		return -EAGAIN;
	if (bch_alloc_metadata_low(c) ||
	    (a != offset || b != offset + len ? !rmw : false))
		return -EAGAIN;
	if (a != offset || b != offset + len) {
		/* as write_chunk(): the old bytes of the partial blocks */
		if (!(op->bounce = bounce_alloc(a, b, offset, offset + len)))
			return -ENOMEM;
		if ((r = rmw_read(c, inum, i.size, offset, len, op->bounce)))
			goto err;
		op->rmw_keys_ok = rmw_keys(c, inum, offset, len, &op->rmw_keys, &op->rmw_keys_len);
		op->rmw_size = i.size;
		/* the new bytes go in at the run, outside the lock (the plan reads none) */
		op->bounce_off = offset - a;
		src = op->bounce;
	}
	bch_io_opts_get(c, &i, &o);
	if ((r = bch_data_write_plan(c, inum, &o, a >> BCH_SECTOR_SHIFT, src,
				     (b - a) >> BCH_SECTOR_SHIFT, &op->pl)))
		goto err;
	return 0;
err:
	free(op->bounce);
	op->bounce = NULL;
	free(op->rmw_keys);
	op->rmw_keys = NULL;
	c->err_msg[0] = 0;	/* the old way says what went wrong, if it does */
	return r;
}

int bch_fs_write_begin(struct bch_fs *c, struct bch_fs_writes *ws, struct bch_fs_write_op *op,
		       uint64_t handle, uint64_t offset, const void *buf, size_t len, bool may_plan)
{
	bool earlier = false;

	*op = (struct bch_fs_write_op) { .handle = handle, .offset = offset, .buf = buf, .len = len };
	if (ws->nr == ws->cap) {
		unsigned ncap = ws->cap ? 2 * ws->cap : 16;
		struct bch_fs_write_op **n = realloc(ws->op, ncap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		ws->op = n;
		ws->cap = ncap;
	}
	uint64_t owed = 0;	/* bytes earlier writes not planned are still to store */
	for (unsigned k = 0; k < ws->nr; k++) {
		earlier |= ws->op[k]->handle == handle;
		if (!ws->op[k]->planned)
			owed += ws->op[k]->len;
	}
	/*
	 * A write not planned waits for the planned writes issued before it;
	 * one planned later takes its space at once, ahead of it.  So plan
	 * only while that leaves them room (at the most copies any file may
	 * ask), and their ENOSPC stays the serial answer.
	 */
	uint64_t bs = fs_block_bytes(c);
	if (owed && (owed + len + 2 * bs) / bs * (bs >> BCH_SECTOR_SHIFT) * BCH_REPLICAS_MAX >
		    bch_alloc_user_free(c))
		may_plan = false;
	if (may_plan) {
		uint64_t h = handle;
		op->planned = !VIEW_CALL(c, h, v_write_plan(c, h, op, !earlier));
	}
	op->ticket = ws->seq++;
	ws->op[ws->nr++] = op;
	ws->planned += op->planned;
	return 0;
}

void bch_fs_write_run(struct bch_fs_write_op *op)
{
	if (op->planned && op->bounce)		/* between the old bytes read at the plan */
		memcpy(op->bounce + op->bounce_off, op->buf, op->len);
	op->run_r = op->planned ? bch_data_write_plan_run(&op->pl) : 0;
}

bool bch_fs_write_turn(const struct bch_fs_writes *ws, const struct bch_fs_write_op *op)
{
	for (unsigned k = 0; k < ws->nr && ws->op[k] != op; k++)
		/*
		 * The old way waits for every planned write issued before it
		 * too: its answer (ENOSPC above all: their overwrites free what
		 * they replace) is then the one it has after them in turn.
		 */
		if (ws->op[k]->handle == op->handle || (!op->planned && ws->op[k]->planned))
			return false;
	return true;
}

uint64_t bch_fs_writes_mark(const struct bch_fs_writes *ws)
{
	return ws->seq;
}

bool bch_fs_writes_before(const struct bch_fs_writes *ws, uint64_t handle, uint64_t mark)
{
	for (unsigned k = 0; k < ws->nr; k++)
		if (ws->op[k]->handle == handle && ws->op[k]->ticket < mark)
			return true;
	return false;
}

void bch_fs_writes_exit(struct bch_fs_writes *ws)
{
	free(ws->op);
	*ws = (struct bch_fs_writes) { 0 };
}

/* The index update of a planned write (write_chunk()'s transaction); -EAGAIN: the old way. */
static ssize_t v_write_index(struct bch_fs *c, uint64_t inum, struct bch_fs_write_op *op)
{
	struct ino_set s = { 0 };
	struct bch_inode *i;
	struct bch_extent_update u = { 0 };
	struct btree_trans *t;
	int r;

	/* the plan's read while no inode changed since (one client's writes: ~0.9k instructions) */
	if (op->inode_gen == bch_btree_inode_commits()) {
		s.nr = 1;
		s.inum[0] = inum;
		s.v[0] = op->inode;
		s.deleted[0] = false;
	}
	if (op->pl.inum != inum || fs_ino_get(c, &s, inum, &i) || !S_ISREG(i->mode) ||
	    fs_flags_write(i, op->offset) || c->read_only || bch_trans_init(c, &t))
		return -EAGAIN;
	bool sync = i->flags & BCH_INODE_SYNC;
	struct bch_io_opts now;
	bch_io_opts_get(c, i, &now);
	/* the file's options changed meanwhile (setxattr): written as they say now */
	if (!bch_io_opts_same(&now, &op->pl.o)) {
		bch_trans_exit(t);
		return -EAGAIN;
	}
	if (op->bounce && !rmw_still(c, inum, i->size, op)) {
		bch_trans_exit(t);
		return -EAGAIN;
	}
	r = bch_data_write_plan_index(t, &op->pl, &u);
	r = write_commit(c, t, &u, &s, i, op->offset + op->len, true, r);
	if (r) {
		c->err_msg[0] = 0;
		return -EAGAIN;
	}
	op->pl.held = false;	/* the keys have it now */
	if (sync)		/* chattr +S: durable before the write returns */
		bch_fs_fsync(c);
	return op->len;
}

ssize_t bch_fs_write_end(struct bch_fs *c, struct bch_fs_writes *ws, struct bch_fs_write_op *op)
{
	ssize_t n = -EAGAIN;
	uint64_t h = op->handle;

	if (op->planned && op->pl.c != c) {
		op->pl.held = false;	/* the filesystem it was planned on is gone (not to happen) */
	} else if (op->planned && op->run_r) {
		n = fs_ret_errno(bch_fs_err(c, op->run_r, "writing data of inode %" PRIu64 ": %s",
					 op->pl.inum, bch_err_str(op->run_r)));
	} else if (op->planned) {
		n = VIEW_CALL(c, h, v_write_index(c, h, op));
	}
	if (op->planned)
		bch_data_write_plan_free(&op->pl, true);
	free(op->bounce);
	op->bounce = NULL;
	free(op->rmw_keys);
	op->rmw_keys = NULL;
	if (n == -EAGAIN) {
		op->redone = op->planned;
		n = bch_fs_write(c, op->handle, op->offset, op->buf, op->len);
	}
	for (unsigned k = 0; k < ws->nr; k++)
		if (ws->op[k] == op) {
			memmove(&ws->op[k], &ws->op[k + 1], (ws->nr - k - 1) * sizeof(ws->op[0]));
			ws->nr--;
			break;
		}
	ws->planned -= op->planned;
	return n;
}

/* Remove extents in [start, end) sectors, in as many transactions as needed. */
int fs_punch_range(struct bch_fs *c, uint64_t inum, uint64_t start, uint64_t end,
		       uint64_t new_size, bool set_size)
{
	for (;;) {
		struct ino_set s = { 0 };
		struct bch_inode *i;
		struct bch_extent_update u = { 0 };
		struct btree_trans *t;
		uint64_t done_to;
		int r;

		if ((r = fs_ino_get(c, &s, inum, &i)))
			return r;
		if ((r = bch_trans_init(c, &t)))
			return r;
		r = bch_extents_punch(c, t, inum, start, end, PUNCH_KEYS_PER_TRANS, &u, &done_to);
		if (!r) {
			i->sectors += u.i_sectors_delta;
			if (set_size)
				i->size = new_size;
			fs_touch(i, true);
			r = fs_ino_set_write(c, &s, t);
		}
		if (!r)
			r = fs_commit(c, t, &u);
		else
			bch_extent_update_abort(c, &u);
		bch_trans_exit(t);
		bch_extent_update_exit(&u);
		if (r || done_to >= end)
			return r;
		start = done_to;
	}
}

/* Zero [from, to) bytes inside one block (keeps the file's size). */
static int zero_partial(struct bch_fs *c, uint64_t inum, uint64_t from, uint64_t to)
{
	struct bch_viter it;
	const struct bch_bkey *k;
	int err = 0;
	bool any = false;

	if (from >= to)
		return 0;
	/* nothing to do over a hole */
	bch_viter_init(&it, c, BCH_BTREE_ID_extents, POS(inum, (from >> BCH_SECTOR_SHIFT) + 1, 0),
			    POS(inum, UINT64_MAX, 0));
	k = bch_viter_next(&it, &err);
	any = k && bch_extent_start(k) < ((to + BCH_SECTOR_SIZE - 1) >> BCH_SECTOR_SHIFT);
	bch_viter_exit(&it);
	if (err)
		return err;
	if (!any)
		return 0;
	/* part of a delete: may use the deletes' reserve (alloc_for_delete) */
	bool was = c->alloc_for_delete;
	c->alloc_for_delete = true;
	int r = write_chunk(c, inum, from, NULL, to - from, 0);
	c->alloc_for_delete = was;
	return r;
}

static int v_truncate(struct bch_fs *c, uint64_t inum, uint64_t size)
{
	struct bch_inode i;
	uint64_t bs = fs_block_bytes(c);
	int r = bch_inode_get(c, inum, &i);

	if (r)
		return fs_ret_errno(r);
	if (S_ISDIR(i.mode))
		return -EISDIR;
	if (!S_ISREG(i.mode) && !S_ISLNK(i.mode))
		return -EINVAL;
	if ((r = fs_flags_no_change(&i)))
		return r;
	if (size > MAX_FILE_SIZE)
		return -EFBIG;
	if (c->read_only)
		return -EROFS;
	if (size < i.size && size % bs &&
	    (r = zero_partial(c, inum, size, (size + bs - 1) / bs * bs)))
		return fs_ret_errno(r);
	uint64_t keep = (size + bs - 1) / bs * (bs >> BCH_SECTOR_SHIFT);
	return fs_ret_errno(fs_punch_range(c, inum, keep, UINT64_MAX - 1, size, true));
}

/*
 * FALLOC_FL_COLLAPSE_RANGE removes [offset, offset + len) and moves what
 * follows down; FALLOC_FL_INSERT_RANGE opens a hole there and moves what
 * follows up.  Both take whole blocks inside the file.  The keys move in
 * pieces of PUNCH_KEYS_PER_TRANS; the size changes with the last piece
 * (collapse) or the first (insert), so no data is ever beyond i_size.
 */
static int collapse_insert(struct bch_fs *c, uint64_t inum, const struct bch_inode *i, int mode,
			   uint64_t offset, uint64_t len)
{
	uint64_t bs = fs_block_bytes(c);
	bool collapse = mode == FALLOC_FL_COLLAPSE_RANGE;
	int r;

	if (offset % bs || len % bs || !len)
		return -EINVAL;
	if (collapse ? offset + len >= i->size : offset >= i->size)
		return -EINVAL;
	if (!collapse && i->size + len > MAX_FILE_SIZE)
		return -EFBIG;
	if (c->read_only)
		return -EROFS;
	uint64_t s0 = offset >> BCH_SECTOR_SHIFT, sl = len >> BCH_SECTOR_SHIFT;

	if (collapse && (r = fs_punch_range(c, inum, s0, s0 + sl, 0, false)))
		return fs_ret_errno(r);
	for (bool first = true;; first = false) {
		struct ino_set s = { 0 };
		struct bch_inode *ip;
		struct bch_extent_update u = { 0 };
		struct btree_trans *t;
		uint64_t next;

		if ((r = fs_ino_get(c, &s, inum, &ip)) || (r = bch_trans_init(c, &t)))
			return fs_ret_errno(r);
		if (!collapse && first) {
			/* a key across offset is split so the shift moves only what follows */
			r = bch_extents_split(c, t, inum, s0, &u);
			if (!r)
				r = fs_commit(c, t, &u);
			if (!r) {
				ip->size += len;	/* room first: nothing lands past the end */
				fs_touch(ip, true);
				r = fs_ino_set_write(c, &s, t);
			}
		}
		if (!r)
			r = bch_extents_shift(c, t, inum, collapse ? s0 + sl : s0,
					      collapse ? -(int64_t)sl : (int64_t)sl,
					      PUNCH_KEYS_PER_TRANS, &next, &u);
		if (!r && collapse && next == UINT64_MAX) {
			ip->size -= len;
			fs_touch(ip, true);
			r = fs_ino_set_write(c, &s, t);
		}
		if (!r)
			r = fs_commit(c, t, &u);
		bch_trans_exit(t);
		bch_extent_update_exit(&u);
		if (r)
			return fs_ret_errno(r);
		if (next == UINT64_MAX)
			return 0;
	}
}

/* Sectors of [s0, s1) no extent or reservation of inum covers. */
static int hole_sectors(struct bch_fs *c, uint64_t inum, uint64_t s0, uint64_t s1, uint64_t *holes)
{
	struct bch_viter it;
	const struct bch_bkey *k;
	uint64_t at = s0;
	int err = 0;

	*holes = 0;
	bch_viter_init(&it, c, BCH_BTREE_ID_extents, POS(inum, s0 + 1, 0), POS(inum, UINT64_MAX, 0));
	while (at < s1 && (k = bch_viter_next(&it, &err))) {
		uint64_t ks = bch_extent_start(k);
		if (ks >= s1)
			break;
		if (ks > at)
			*holes += ks - at;
		if (k->p.offset > at)
			at = k->p.offset;
	}
	bch_viter_exit(&it);
	if (at < s1)
		*holes += s1 - at;
	return err;
}

static int v_fallocate(struct bch_fs *c, uint64_t inum, int mode, uint64_t offset, uint64_t len)
{
	struct bch_inode i;
	uint64_t bs = fs_block_bytes(c);
	int r = bch_inode_get(c, inum, &i);

	if (r)
		return fs_ret_errno(r);
	if (S_ISDIR(i.mode))
		return -EISDIR;
	if (!S_ISREG(i.mode))
		return -ENODEV;
	/* vfs_fallocate(): append-only files take only a plain allocation */
	if ((i.flags & BCH_INODE_IMMUTABLE) || ((i.flags & BCH_INODE_APPEND) && (mode & ~FALLOC_FL_KEEP_SIZE)))
		return -EPERM;
	if (mode == FALLOC_FL_COLLAPSE_RANGE || mode == FALLOC_FL_INSERT_RANGE)
		return collapse_insert(c, inum, &i, mode, offset, len);
	if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE))
		return -EOPNOTSUPP;
	if ((mode & FALLOC_FL_PUNCH_HOLE) && !(mode & FALLOC_FL_KEEP_SIZE))
		return -EINVAL;
	if (!len)
		return -EINVAL;
	if (offset > MAX_FILE_SIZE || len > MAX_FILE_SIZE - offset)
		return -EFBIG;
	if (c->read_only)
		return -EROFS;

	uint64_t end = offset + len;
	uint64_t a = (offset + bs - 1) / bs * bs, b = end / bs * bs;	/* whole blocks inside */

	if (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)) {
		uint64_t zend = end < i.size ? end : i.size;
		if (a > b) {	/* inside one block */
			r = zero_partial(c, inum, offset, zend > offset ? zend : offset);
		} else {
			if (!r && offset < a)
				r = zero_partial(c, inum, offset, a < zend ? a : zend);
			if (!r && b < end && b < zend)
				r = zero_partial(c, inum, b, zend);
			if (!r && a < b)
				r = fs_punch_range(c, inum, a >> BCH_SECTOR_SHIFT, b >> BCH_SECTOR_SHIFT, 0, false);
		}
		if (r || (mode & FALLOC_FL_PUNCH_HOLE))
			return fs_ret_errno(r);
	}

	/*
	 * allocate: reservations over the holes of the block range, each
	 * promising its sectors x the file's replicas (refused up front when
	 * the free space cannot keep the promise)
	 */
	uint64_t s0 = offset / bs * (bs >> BCH_SECTOR_SHIFT);
	uint64_t s1 = (end + bs - 1) / bs * (bs >> BCH_SECTOR_SHIFT);
	struct bch_io_opts o;
	uint64_t holes_total;
	bch_io_opts_get(c, &i, &o);
	if ((r = hole_sectors(c, inum, s0, s1, &holes_total)) ||
	    (holes_total && ((r = fs_metadata_room(c)) ||
			     (r = bch_alloc_user_check(c, holes_total * o.replicas, 0)))))
		return fs_ret_errno(r);
	while (s0 < s1) {
		struct ino_set s = { 0 };
		struct bch_inode *ip;
		struct bch_extent_update u = { 0 };
		struct bch_bkey *holes[PUNCH_KEYS_PER_TRANS];
		struct btree_trans *t;
		struct bch_viter it;
		const struct bch_bkey *k;
		unsigned n = 0;
		int err = 0;

		bch_viter_init(&it, c, BCH_BTREE_ID_extents, POS(inum, s0 + 1, 0), POS(inum, UINT64_MAX, 0));
		while (n < PUNCH_KEYS_PER_TRANS && s0 < s1) {
			k = bch_viter_next(&it, &err);
			if (err)
				break;
			uint64_t ks = k ? bch_extent_start(k) : UINT64_MAX;
			if (ks > s0) {
				uint64_t stop = ks < s1 ? ks : s1;
				uint64_t he = stop - s0 > UINT32_MAX ? s0 + UINT32_MAX : stop;
				struct bch_bkey *rk = bch_bkey_alloc(BCH_BKEY_reservation, POS(inum, he, 0),
								     sizeof(struct bch_reservation));
				rk->size = he - s0;
				((struct bch_reservation *)bkey_val(rk))->nr_replicas = o.replicas;
				holes[n++] = rk;
				s0 = he;
				if (he < stop)
					break;	/* capped: look again from here */
			}
			if (!k || ks >= s1)
				break;
			if (k->p.offset > s0)
				s0 = k->p.offset;
		}
		bch_viter_exit(&it);
		if (!err && !(err = fs_ino_get(c, &s, inum, &ip)) && !(err = bch_trans_init(c, &t))) {
			for (unsigned h = 0; h < n && !err; h++)
				err = bch_extent_insert(t, holes[h], true, &u);
			if (!err) {
				ip->sectors += u.i_sectors_delta;
				fs_touch(ip, true);	/* every fallocate, as file_modified() */
				err = fs_ino_set_write(c, &s, t);
			}
			if (!err)
				err = fs_commit(c, t, &u);
			bch_trans_exit(t);
		}
		for (unsigned h = 0; h < n; h++)
			free(holes[h]);
		bch_extent_update_exit(&u);
		if (err)
			return fs_ret_errno(err);
	}
	if (!(mode & FALLOC_FL_KEEP_SIZE)) {
		struct bch_inode cur;
		if ((r = bch_inode_get(c, inum, &cur)))
			return fs_ret_errno(r);
		if (end > cur.size) {
			struct bch_setattr sa = { .valid = BCH_SETATTR_SIZE, .size = end };
			return bch_fs_setattr(c, inum, &sa);
		}
	}
	return 0;
}

static int64_t v_seek(struct bch_fs *c, uint64_t inum, uint64_t offset, int whence)
{
	struct bch_inode i;
	struct bch_viter it;
	const struct bch_bkey *k;
	int err = 0, r = bch_inode_get(c, inum, &i);

	if (r)
		return fs_ret_errno(r);
	if (whence != SEEK_DATA && whence != SEEK_HOLE)
		return -EINVAL;
	if (offset >= i.size)
		return -ENXIO;
	uint64_t s = offset >> BCH_SECTOR_SHIFT, pos = offset;
	bch_viter_init(&it, c, BCH_BTREE_ID_extents, POS(inum, s + 1, 0), POS(inum, UINT64_MAX, 0));
	/*
	 * A reservation (fallocate) reads as zeroes and holds no data: a hole
	 * to SEEK_DATA and SEEK_HOLE, as unwritten extents are on ext4 and XFS.
	 */
	if (whence == SEEK_DATA) {
		while ((k = bch_viter_next(&it, &err)) && k->type == BCH_BKEY_reservation)
			;
		if (!k)
			pos = i.size;
		else if (bch_extent_start(k) << BCH_SECTOR_SHIFT > offset)
			pos = bch_extent_start(k) << BCH_SECTOR_SHIFT;
		if (!err && pos >= i.size)
			err = -ENXIO;
	} else {
		uint64_t at = s;
		while ((k = bch_viter_next(&it, &err))) {
			if (bch_extent_start(k) > at || k->type == BCH_BKEY_reservation)
				break;
			at = k->p.offset;
		}
		pos = at << BCH_SECTOR_SHIFT;
		if (pos < offset)
			pos = offset;
		if (pos > i.size)
			pos = i.size;
	}
	bch_viter_exit(&it);
	return err ? fs_ret_errno(err) : (int64_t)pos;
}

int bch_fs_fsync(struct bch_fs *c)
{
	return fs_ret_errno(bch_journal_flush(c));
}

int bch_fs_fsync_step(struct bch_fs *c, uint64_t *seq)
{
	int r = bch_journal_flush_step(c, seq);

	return r > 0 ? r : fs_ret_errno(r);
}

void bch_fs_fsync_wait(struct bch_fs *c)
{
	bch_journal_flush_wait(c);
}

void bch_fs_journal_seqs(struct bch_fs *c, uint64_t *durable, uint64_t *need)
{
	*durable = bch_journal_seq_durable_now(c);
	*need = bch_journal_seq_needed(c);
}

uint64_t bch_fs_open_durable(struct bch_fs *c)
{
	return c->open_clean || !c->read_only ? c->open_seq : 0;
}

/* ------------------------------------------- entry points: views of handles */

ssize_t bch_fs_read(struct bch_fs *c, uint64_t inum, uint64_t offset, void *buf, size_t len)
{
	return VIEW_CALL(c, inum, v_read(c, inum, offset, buf, len));
}

ssize_t bch_fs_write(struct bch_fs *c, uint64_t inum, uint64_t offset, const void *buf, size_t len)
{
	return VIEW_CALL(c, inum, v_write(c, inum, offset, buf, len));
}

/* Copy len bytes from src at so to dst at d through the page-sized buffer (remap's unshared ends). */
static ssize_t remap_copy(struct bch_fs *c, uint64_t src, uint64_t so, uint64_t dst, uint64_t d, uint64_t len)
{
	char *buf = malloc(WRITE_CHUNK);
	uint64_t done = 0;
	ssize_t r = 0;

	if (!buf)
		return -ENOMEM;
	while (done < len && r >= 0) {
		size_t n = len - done < WRITE_CHUNK ? len - done : WRITE_CHUNK;
		if ((r = bch_fs_read(c, src, so + done, buf, n)) > 0)
			r = bch_fs_write(c, dst, d + done, buf, r);
		if (r == 0)
			break;
		if (r > 0)
			done += r;
	}
	free(buf);
	return r < 0 && !done ? r : (ssize_t)done;
}

ssize_t bch_fs_remap_range(struct bch_fs *c, uint64_t src, uint64_t src_off, uint64_t dst,
			   uint64_t dst_off, uint64_t len)
{
	struct stat ss, ds;
	uint64_t bs = fs_block_bytes(c);
	int r;

	if ((r = bch_fs_getattr(c, src, &ss)) || (r = bch_fs_getattr(c, dst, &ds)))
		return r;
	if (S_ISDIR(ss.st_mode) || S_ISDIR(ds.st_mode))
		return -EISDIR;
	if (!S_ISREG(ss.st_mode) || !S_ISREG(ds.st_mode))
		return -EINVAL;
	if (src_off > MAX_FILE_SIZE || dst_off > MAX_FILE_SIZE || len > MAX_FILE_SIZE - dst_off)
		return -EFBIG;
	if (c->read_only)
		return -EROFS;
	if ((r = bch_subvol_writable(c, dst)))
		return r;
	unsigned fl;
	uint32_t project;
	if ((r = bch_fs_get_flags(c, dst, &fl, &project)))
		return r;
	if ((fl & FS_IMMUTABLE_FL) || ((fl & FS_APPEND_FL) && dst_off < (uint64_t)ds.st_size))
		return -EPERM;		/* as a write there would be (flags_write) */
	if (src_off >= (uint64_t)ss.st_size)
		return 0;
	if (len > (uint64_t)ss.st_size - src_off)
		len = ss.st_size - src_off;
	if (src == dst && src_off < dst_off + len && dst_off < src_off + len)
		return -EINVAL;		/* overlapping ranges of one file */
	if ((r = fs_metadata_room_for(c, true)))
		return fs_ret_errno(r);

	/*
	 * Whole blocks are shared; the unaligned head and tail are copied.  The
	 * source's last block is shared whole when the range ends at the
	 * source's end and reaches the destination's (bytes past the end of a
	 * file read as zeros).
	 */
	uint64_t head = src_off % bs == dst_off % bs ? (bs - src_off % bs) % bs : len;
	if (head > len)
		head = len;
	uint64_t mid = (len - head) / bs * bs, tail_at = head + mid;
	if (mid + head < len && src_off + len == (uint64_t)ss.st_size &&
	    dst_off + len >= (uint64_t)ds.st_size && head < len && src_off % bs == dst_off % bs)
		mid = len - head, tail_at = len;	/* the partial last block too */
	ssize_t n = 0;
	if (head && (n = remap_copy(c, src, src_off, dst, dst_off, head)) < (ssize_t)head)
		return n;
	if (mid) {
		uint64_t sectors = (mid + bs - 1) / bs * bs >> BCH_SECTOR_SHIFT, done = 0;
		r = bch_reflink_remap(c, src, (src_off + head) >> BCH_SECTOR_SHIFT, dst,
				      (dst_off + head) >> BCH_SECTOR_SHIFT, sectors,
				      dst_off + head + mid, &done);
		if (r && bch_err_class(r) == EROFS && !c->read_only) {
			/*
			 * The source's extents cannot be made indirect in a
			 * read-only subvolume (the destination was writable):
			 * the rest is copied, as copy_file_range would.
			 */
			uint64_t at = done << BCH_SECTOR_SHIFT;
			(void)bch_snapshot_ro_refused(c);
			c->err_msg[0] = 0;
			n = remap_copy(c, src, src_off + head + at, dst, dst_off + head + at, mid - at);
			if (n < 0)
				return head + at ? (ssize_t)(head + at) : n;
			if ((uint64_t)n < mid - at)
				return head + at + n;
			r = 0;
		}
		if (r) {
			uint64_t got = head + (done << BCH_SECTOR_SHIFT);
			return got ? (ssize_t)(got < head + mid ? got : head + mid) : fs_ret_errno(r);
		}
	}
	if (tail_at < len && (n = remap_copy(c, src, src_off + tail_at, dst, dst_off + tail_at,
					      len - tail_at)) < 0)
		return tail_at ? (ssize_t)tail_at : n;
	return tail_at + (tail_at < len ? n : 0);
}

int bch_fs_truncate(struct bch_fs *c, uint64_t inum, uint64_t size)
{
	return VIEW_CALL(c, inum, v_truncate(c, inum, size));
}

int bch_fs_fallocate(struct bch_fs *c, uint64_t inum, int mode, uint64_t offset, uint64_t len)
{
	return VIEW_CALL(c, inum, v_fallocate(c, inum, mode, offset, len));
}

int64_t bch_fs_seek(struct bch_fs *c, uint64_t inum, uint64_t offset, int whence)
{
	return VIEW_CALL(c, inum, v_seek(c, inum, offset, whence));
}
