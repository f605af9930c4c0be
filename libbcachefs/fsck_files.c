// SPDX-License-Identifier: GPL-2.0
/*
 * fsck_files.c - passes 5 to 11: everything above the btrees.
 *
 * Checks
 *   pass 5 (one scan of the extents btree, with pass 6)
 *     extent_ptr_bad       pointer to a missing device, outside the device's
 *                          buckets or into a superblock, journal or btree bucket
 *     extent_ptr_stale     pointer whose generation is not its bucket's
 *     extent_ptr_dup       two encoded extents claim the same blocks
 *                          (keys sharing one encoded extent after a split are fine)
 *     repair: the pointer is dropped; an extent with none left is deleted
 *   pass 6
 *     extent_no_inode, extent_bad_inode   owner missing / not a file or symlink
 *     extent_overlap       starts before the previous extent of its inode ends
 *     extent_past_eof      starts past the block holding the file's last byte
 *     inode_sectors_wrong  inode's sectors != sum of its extents' sizes
 *   pass 7
 *     inode_unlinked       no names and nlink 0 / unlinked flag: finish deleting
 *     inode_back_pointer   parent pointer does not name one of its links
 *   pass 8 (dirents, then xattrs)
 *     dirent_bad_dir, dirent_dangling, dirent_to_root: the entry is deleted
 *     dirent_type_wrong    d_type differs from the inode's type: corrected
 *     dirent_misplaced     a lookup of its name does not reach it: re-hashed
 *     dirent_duplicate     a lookup of its name finds an earlier entry: deleted
 *     dir_multiple_links   a directory with a second name: the entry is deleted
 *     xattr_no_inode, xattr_misplaced   likewise for xattrs
 *   pass 9
 *     root_missing         a new root directory is created
 *     lost_found_missing   created when something needs reattaching
 *     dir_unreachable      a directory with no name: moved to lost+found
 *     dir_loop             directories whose parents never reach the root:
 *                          one of them is moved to lost+found
 *     inode_unreachable    a file with nlink > 0 but no name: to lost+found
 *   pass 10
 *     nlink_wrong          nlink != names (directories: 2 + subdirectories)
 *   pass 11 (--data)
 *     data_replica_bad     a copy fails its checksum or cannot be read while
 *                          another is good: rewritten from the good one
 *     data_unreadable      no good copy: reported, left as is
 *
 * Memory: one table entry per inode (about 64 bytes) and one bit per block
 * of each device; never in proportion to the data.  Keys are read in
 * batches and repairs happen between batches, so no iterator is open while
 * the tree changes.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "bcachefs.h"
#include "blockdev.h"
#include "btree.h"
#include "checksum.h"
#include "errcode.h"
#include "extents.h"
#include "fs_ops.h"
#include "fsck.h"
#include "inode.h"
#include "io.h"
#include "super.h"

/* ------------------------------------------------------------ inode table */

struct ino_info {
	uint64_t	inum;		/* 0: empty slot */
	uint64_t	sectors;	/* counted from extents */
	uint64_t	parent;		/* first name seen: directory ... */
	uint64_t	parent_slot;	/* ... and dirent offset */
	uint32_t	names;		/* dirents naming it */
	uint32_t	subdirs;	/* directories: subdirectories named in it */
	uint32_t	mode;		/* 0: no inode key (only referenced) */
	uint8_t		state;		/* pass 9 loop walk: 0 new, 1 walking, 2 reaches root */
};

struct ino_table {
	struct ino_info	*e;
	size_t		nr, cap;	/* cap: power of two */
};

static uint64_t ino_hash(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	return x ^ (x >> 33);
}

static struct ino_info *ino_find(struct ino_table *t, uint64_t inum, bool add)
{
	if (add && (t->nr + 1) * 4 > t->cap * 3) {
		size_t ncap = t->cap ? t->cap * 2 : 4096;
		struct ino_info *ne = calloc(ncap, sizeof(*ne));
		if (!ne)
			abort();
		for (size_t i = 0; i < t->cap; i++)
			if (t->e[i].inum) {
				size_t j = ino_hash(t->e[i].inum) & (ncap - 1);
				while (ne[j].inum)
					j = (j + 1) & (ncap - 1);
				ne[j] = t->e[i];
			}
		free(t->e);
		t->e = ne;
		t->cap = ncap;
	}
	if (!t->cap)
		return NULL;
	size_t j = ino_hash(inum) & (t->cap - 1);
	while (t->e[j].inum) {
		if (t->e[j].inum == inum)
			return &t->e[j];
		j = (j + 1) & (t->cap - 1);
	}
	if (!add)
		return NULL;
	memset(&t->e[j], 0, sizeof(t->e[j]));
	t->e[j].inum = inum;
	t->nr++;
	return &t->e[j];
}

/* Room for extra entries without moving the table (pointers into it stay valid). */
static void ino_reserve(struct ino_table *t, size_t extra)
{
	while ((t->nr + extra) * 4 > t->cap * 3) {
		struct ino_info *tmp = ino_find(t, UINT64_MAX, true);	/* grows */
		/* take the placeholder out again */
		tmp->inum = 0;
		t->nr--;
	}
}

/* ------------------------------------------------------------------ state */

struct fstate {
	struct bch_fsck_ctx	*ctx;
	struct bch_fs		*c;
	struct ino_table	inodes;
	struct bch_fsck_file_stats *stats;
	int			err;

	/* pass 5: blocks claimed, per device; recently seen encoded extents */
	uint8_t			*claimed[BCH_SB_MEMBERS_MAX];
	uint64_t		claimed_blocks[BCH_SB_MEMBERS_MAX];
	struct {
		struct bch_extent_ptr	ptr;
		struct bch_csum		csum;
	}			recent[128];
	unsigned		recent_next;

	/* pass 6: the inode whose extents are being scanned */
	uint64_t		cur_inum;
	bool			cur_exists;
	struct bch_inode	cur;
	uint64_t		prev_end;

	uint64_t		max_inum;	/* highest inode number: for progress */

	/* pass 8: dirents re-hashed (and counted) this pass */
	struct bch_bpos		*moved;
	size_t			nr_moved;

	/* pass 8: the directory whose entries are being scanned */
	uint64_t		dir_cached;
	struct bch_inode	dir_inode;
};

static bool fixing(struct fstate *s, enum bch_fsck_problem p, const char *where, const char *detail)
{
	return bch_fsck_problem(s->ctx, p, where, detail) && !s->c->read_only;
}

static void fixed(struct fstate *s, enum bch_fsck_problem p, int r)
{
	if (!r)
		bch_fsck_fixed(s->ctx, p);
	else if (!s->err)
		s->err = r;
}

/* "inode 4100 (/etc/passwd)": the path from the inode's parent pointers, best effort. */
static void inode_where(struct bch_fs *c, uint64_t inum, char *buf, size_t len)
{
	char path[512] = "";
	uint64_t cur = inum;
	unsigned depth = 0;

	while (cur != BCH_ROOT_INO && depth++ < 64) {
		struct bch_inode i;
		struct bch_bkey *k;
		if (bch_inode_get(c, cur, &i) || !i.dir ||
		    bch_btree_lookup(c, BCH_BTREE_ID_dirents, POS(i.dir, i.dir_offset, 0), &k))
			break;
		const struct bch_dirent *d = bkey_val(k);
		if (k->type != BCH_BKEY_dirent || d->inum != cur) {
			free(k);
			break;
		}
		char tmp[sizeof(path) + BCH_NAME_MAX + 2];
		snprintf(tmp, sizeof(tmp), "/%.*s%s", d->name_len, d->name, path);
		size_t n = strlen(tmp) < sizeof(path) - 1 ? strlen(tmp) : sizeof(path) - 1;
		memcpy(path, tmp, n);
		path[n] = 0;
		free(k);
		cur = i.dir;
	}
	if (cur == BCH_ROOT_INO)
		snprintf(buf, len, "inode %" PRIu64 " (%s)", inum, path[0] ? path : "/");
	else
		snprintf(buf, len, "inode %" PRIu64, inum);
}

static int put_key(struct bch_fs *c, unsigned id, const struct bch_bkey *k)
{
	struct btree_trans *t;
	int r = bch_trans_init(c, &t);

	if (!r) {
		r = bch_trans_update(t, id, k);
		if (!r)
			r = bch_trans_commit(t, 0);
		bch_trans_exit(t);
	}
	return r;
}

static int delete_key(struct bch_fs *c, unsigned id, struct bch_bpos p)
{
	struct bch_bkey k = { .u64s = BCH_BKEY_U64s, .type = BCH_BKEY_deleted, .p = p };
	return put_key(c, id, &k);
}

/* Replace extent old by new (NULL: delete it), with space accounting. */
static int replace_extent(struct bch_fs *c, const struct bch_bkey *old, const struct bch_bkey *new,
			  bool account_new)
{
	struct bch_extent_update u = { 0 };
	struct btree_trans *t;
	struct bch_bkey del = { .u64s = BCH_BKEY_U64s, .type = BCH_BKEY_deleted, .p = old->p };
	int r = bch_trans_init(c, &t);

	if (r)
		return r;
	/* the old key's accounting goes; the new one's comes (punch of exactly its range) */
	uint64_t done;
	r = bch_extents_punch(c, t, old->p.inode, bch_extent_start(old), old->p.offset, 0, &u, &done);
	if (!r && new)
		r = bch_extent_insert(t, new, account_new, &u);
	else if (!r)
		r = bch_trans_update(t, BCH_BTREE_ID_extents, &del);
	if (!r) {
		r = bch_trans_commit(t, 0);
		if (r)
			bch_extent_update_abort(c, &u);
		else
			bch_extent_update_apply(c, &u);
	}
	bch_trans_exit(t);
	bch_extent_update_exit(&u);
	return r;
}

static int update_inode(struct bch_fs *c, uint64_t inum, const struct bch_inode *i);

/* A repair that adds or removes a subdirectory keeps its parent's nlink in step. */
static int adjust_nlink(struct bch_fs *c, uint64_t inum, int delta)
{
	struct bch_inode i;
	int r = bch_inode_get(c, inum, &i);

	if (r)
		return r;
	i.nlink += delta;
	return update_inode(c, inum, &i);
}

static int update_inode(struct bch_fs *c, uint64_t inum, const struct bch_inode *i)
{
	struct btree_trans *t;
	int r = bch_trans_init(c, &t);

	if (!r) {
		r = bch_inode_update(t, inum, i);
		if (!r)
			r = bch_trans_commit(t, 0);
		bch_trans_exit(t);
	}
	return r;
}

/*
 * Visit every key of btree id in order, in batches: fn gets a copy and may
 * change the tree (no iterator is open while it runs).
 */
typedef int (*key_fn)(struct fstate *s, const struct bch_bkey *k);

static int for_each_key(struct fstate *s, unsigned id, key_fn fn)
{
	enum { BATCH = 256 };
	struct bch_bkey *batch[BATCH];
	struct bch_bpos pos = POS_MIN;

	if (!s->c->roots->r[id].key)
		return 0;
	for (;;) {
		struct btree_iter it;
		const struct bch_bkey *k;
		unsigned n = 0;
		int err = 0, r = 0;

		bch_btree_iter_init(&it, s->c, id, pos, POS_MAX);
		while (n < BATCH && (k = bch_btree_iter_next(&it, &err)))
			batch[n++] = bch_bkey_dup(k);
		bch_btree_iter_exit(&it);
		if (n && s->ctx->tick && s->max_inum > BCH_FIRST_INO) {
			/* keys are ordered by inode number: that is how far this pass is */
			uint64_t at = id == BCH_BTREE_ID_inodes ? batch[0]->p.offset : batch[0]->p.inode;
			at = at < BCH_FIRST_INO ? 0 : at - BCH_FIRST_INO;
			s->ctx->tick(s->ctx, at >= s->max_inum - BCH_FIRST_INO ? 100
					     : (unsigned)(at * 100 / (s->max_inum - BCH_FIRST_INO)));
		}
		for (unsigned i = 0; i < n; i++) {
			if (!r && !err && !s->ctx->cancelled)
				r = fn(s, batch[i]);
			if (i == n - 1)
				pos = bpos_successor(batch[i]->p);
			free(batch[i]);
		}
		if (err)
			return err;
		if (r)
			return r;
		/* until a batch comes back empty: repairs may have added keys further on */
		if (!n || s->ctx->cancelled || bpos_eq(pos, POS_MAX))
			return 0;
	}
}

/* ------------------------------------------------------- passes 5 and 6 */

static bool claim(struct fstate *s, const struct bch_extent_ptr *p, const struct bch_extent_crc *crc)
{
	unsigned sectors = crc->compressed_sectors;

	/* keys that share one encoded extent are close together: a short memory */
	for (unsigned i = 0; i < 128; i++)
		if (!memcmp(&s->recent[i].ptr, p, sizeof(*p)) && bch_csum_eq(s->recent[i].csum, crc->csum))
			return true;
	s->recent[s->recent_next % 128].ptr = *p;
	s->recent[s->recent_next++ % 128].csum = crc->csum;

	unsigned bs = s->c->sb->block_size;
	uint64_t first = p->offset / bs, last = (p->offset + sectors - 1) / bs;
	uint8_t *map = s->claimed[p->dev];
	if (!map || last >= s->claimed_blocks[p->dev])
		return true;
	bool ok = true;
	for (uint64_t b = first; b <= last; b++) {
		if (map[b / 8] & (1U << (b % 8)))
			ok = false;
		map[b / 8] |= 1U << (b % 8);
	}
	return ok;
}

/* The inode whose extents follow: compare the previous one's sectors. */
static void extents_next_inode(struct fstate *s, uint64_t inum)
{
	s->cur_inum = inum;
	s->prev_end = 0;
	s->cur_exists = !bch_inode_get(s->c, inum, &s->cur);
}

static int check_extent(struct fstate *s, const struct bch_bkey *k)
{
	struct bch_fs *c = s->c;
	char where[640], detail[160];

	if (k->type != BCH_BKEY_extent && k->type != BCH_BKEY_reservation)
		return 0;
	if (k->p.inode != s->cur_inum)
		extents_next_inode(s, k->p.inode);
	s->stats->extents++;
	uint64_t start = bch_extent_start(k);
	snprintf(where, sizeof(where), "inode %" PRIu64 " sectors %" PRIu64 "..%" PRIu64,
		 (uint64_t)k->p.inode, start, (uint64_t)k->p.offset);

	/* pass 5: pointers */
	if (k->type == BCH_BKEY_extent) {
		const struct bch_extent *e = bkey_val(k);
		unsigned nr = bch_extent_nr_ptrs(k), keep = 0;
		struct bch_extent_ptr good[BCH_REPLICAS_MAX];
		for (unsigned i = 0; i < nr; i++) {
			const struct bch_extent_ptr *p = &e->ptrs[i];
			int type = p->dev < c->nr_devs && c->devs[p->dev] && c->devs[p->dev]->bdev
				 ? bch_alloc_bucket_type(c, p, e->crc.compressed_sectors) : -2;
			enum bch_fsck_problem prob = BCH_FSCK_PROBLEM_NR;
			if (type == -2) {
				prob = BCH_FSCK_extent_ptr_bad;
				snprintf(detail, sizeof(detail), "device %u missing", p->dev);
			} else if (type < 0) {
				prob = BCH_FSCK_extent_ptr_bad;
				snprintf(detail, sizeof(detail), "sector %" PRIu64 " outside device %u",
					 (uint64_t)p->offset, p->dev);
			} else if (type != BCH_DATA_user) {
				prob = BCH_FSCK_extent_ptr_bad;
				snprintf(detail, sizeof(detail), "%u:%" PRIu64 " is in a bucket of other data",
					 p->dev, (uint64_t)p->offset);
			} else if (!bch_alloc_ptr_live(c, p)) {
				prob = BCH_FSCK_extent_ptr_stale;
				snprintf(detail, sizeof(detail), "%u:%" PRIu64 " gen %u", p->dev,
					 (uint64_t)p->offset, p->gen);
			} else if (!claim(s, p, &e->crc)) {
				prob = BCH_FSCK_extent_ptr_dup;
				snprintf(detail, sizeof(detail), "%u:%" PRIu64 " already used by another extent",
					 p->dev, (uint64_t)p->offset);
			}
			if (prob == BCH_FSCK_PROBLEM_NR || !fixing(s, prob, where, detail))
				good[keep++] = *p;
			else
				bch_fsck_fixed(s->ctx, prob);	/* counted when the key is rewritten below */
		}
		if (keep < nr) {
			struct bch_bkey *n = NULL;
			if (keep) {
				n = bch_bkey_alloc(BCH_BKEY_extent, k->p,
						   sizeof(struct bch_extent) + keep * sizeof(struct bch_extent_ptr));
				n->size = k->size;
				struct bch_extent *ne = bkey_val(n);
				ne->crc = e->crc;
				memcpy(ne->ptrs, good, keep * sizeof(good[0]));
			}
			int r = replace_extent(c, k, n, true);
			free(n);
			if (r)
				return r;
			if (!keep)
				return 0;	/* the extent is gone */
		}
	}

	/* pass 6: owner, order, end of file */
	enum bch_fsck_problem prob = BCH_FSCK_PROBLEM_NR;
	uint64_t bs = c->sb->block_size;
	if (!s->cur_exists)
		prob = BCH_FSCK_extent_no_inode;
	else if (!S_ISREG(s->cur.mode) && !S_ISLNK(s->cur.mode))
		prob = BCH_FSCK_extent_bad_inode;
	else if (start >= (s->cur.size + (bs << 9) - 1) / (bs << 9) * bs)
		prob = BCH_FSCK_extent_past_eof;
	if (prob != BCH_FSCK_PROBLEM_NR) {
		if (prob == BCH_FSCK_extent_past_eof)
			snprintf(detail, sizeof(detail), "file size %" PRIu64, (uint64_t)s->cur.size);
		if (fixing(s, prob, where, prob == BCH_FSCK_extent_past_eof ? detail : NULL)) {
			fixed(s, prob, replace_extent(c, k, NULL, false));
			return s->err;
		}
	} else if (start < s->prev_end) {
		if (fixing(s, BCH_FSCK_extent_overlap, where, NULL)) {
			int r;
			if (k->p.offset <= s->prev_end) {
				r = replace_extent(c, k, NULL, false);
			} else {
				/* keep the part after the previous extent (same position: replaces it) */
				struct bch_bkey *n = bch_bkey_dup(k);
				bch_extent_cut_front(n, s->prev_end);
				r = put_key(c, BCH_BTREE_ID_extents, n);
				if (!r) {
					ino_find(&s->inodes, k->p.inode, true)->sectors += n->size;
					s->prev_end = n->p.offset;
				}
				free(n);
			}
			fixed(s, BCH_FSCK_extent_overlap, r);
			return s->err;
		}
	}
	if (k->p.offset > s->prev_end)
		s->prev_end = k->p.offset;
	ino_find(&s->inodes, k->p.inode, true)->sectors += k->size;
	return 0;
}

/* --------------------------------------------------------------- pass 7 */

static int scan_inode(struct fstate *s, const struct bch_bkey *k)
{
	if (k->type != BCH_BKEY_inode)
		return 0;
	const struct bch_inode *i = bkey_val(k);
	struct ino_info *ii = ino_find(&s->inodes, k->p.offset, true);

	ii->mode = i->mode;
	s->stats->inodes++;
	if (S_ISDIR(i->mode))
		s->stats->dirs++;
	else
		s->stats->files++;
	if (ii->sectors != i->sectors) {
		char where[640], detail[96];
		inode_where(s->c, k->p.offset, where, sizeof(where));
		snprintf(detail, sizeof(detail), "%" PRIu64 " sectors, extents cover %" PRIu64,
			 (uint64_t)i->sectors, ii->sectors);
		if (fixing(s, BCH_FSCK_inode_sectors_wrong, where, detail)) {
			struct bch_inode n = *i;
			n.sectors = ii->sectors;
			fixed(s, BCH_FSCK_inode_sectors_wrong, update_inode(s->c, k->p.offset, &n));
		}
	}
	return s->err;
}

/* --------------------------------------------------------------- pass 8 */

static void dirent_where(struct fstate *s, uint64_t dir, const char *name, char *buf, size_t len)
{
	char dw[640];

	inode_where(s->c, dir, dw, sizeof(dw));
	snprintf(buf, len, "%s entry \"%s\"", dw, name);
}

static int check_dirent(struct fstate *s, const struct bch_bkey *k)
{
	struct bch_fs *c = s->c;
	char where[1024], detail[1024];

	if (k->type != BCH_BKEY_dirent)
		return 0;
	for (size_t i = 0; i < s->nr_moved; i++)
		if (bpos_eq(s->moved[i], k->p))
			return 0;	/* re-hashed here earlier in this pass: already counted */
	const struct bch_dirent *d = bkey_val(k);
	char name[BCH_NAME_MAX + 1];
	memcpy(name, d->name, d->name_len);
	name[d->name_len] = 0;
	uint64_t dir = k->p.inode, slot = k->p.offset;
	struct ino_info *di = ino_find(&s->inodes, dir, false), *ti = ino_find(&s->inodes, d->inum, false);
	bool moved = false;
	s->stats->dirents++;
#define WHERE()	dirent_where(s, dir, name, where, sizeof(where))

	enum bch_fsck_problem prob = BCH_FSCK_PROBLEM_NR;
	if (!di || !di->mode || !S_ISDIR(di->mode))
		prob = BCH_FSCK_dirent_bad_dir;
	else if (!ti || !ti->mode)
		prob = BCH_FSCK_dirent_dangling;
	else if (d->inum == BCH_ROOT_INO)
		prob = BCH_FSCK_dirent_to_root;
	if (prob != BCH_FSCK_PROBLEM_NR) {
		snprintf(detail, sizeof(detail), "-> inode %" PRIu64, (uint64_t)d->inum);
		WHERE();
		if (fixing(s, prob, where, detail))
			fixed(s, prob, bch_fs_dirent_delete(c, dir, slot));
		return s->err;
	}

	/* hash: a lookup of the name must reach this entry */
	uint64_t first;
	int r = 0;
	if (s->dir_cached != dir) {
		r = bch_inode_get(c, dir, &s->dir_inode);
		s->dir_cached = r ? 0 : dir;
	}
	struct bch_inode dinode = s->dir_inode;
	if (!r)
		r = bch_fs_dirent_first(c, dir, &dinode, name, &first);
	if (r == -ENOENT) {
		snprintf(detail, sizeof(detail), "at %" PRIu64 ", name hashes to %" PRIu64, slot,
			 bch_fs_dirent_hash(c, &dinode, name));
		WHERE();
		if (fixing(s, BCH_FSCK_dirent_misplaced, where, detail)) {
			r = bch_fs_dirent_delete(c, dir, slot);
			if (!r)
				r = bch_fs_dirent_add(c, dir, name, d->inum, d->d_type);
			fixed(s, BCH_FSCK_dirent_misplaced, r);
			if (r)
				return r;
			/* count it now, at its new place, and not again if the scan gets there */
			if (bch_fs_dirent_first(c, dir, &dinode, name, &first))
				return 0;
			slot = first;
			moved = true;
			s->moved = realloc(s->moved, (s->nr_moved + 1) * sizeof(*s->moved));
			if (!s->moved)
				abort();
			s->moved[s->nr_moved++] = POS(dir, slot, 0);
		} else {
			first = slot;	/* count it as it is */
		}
	} else if (r) {
		return r;
	} else if (first != slot) {
		snprintf(detail, sizeof(detail), "same name as the entry at %" PRIu64, first);
		WHERE();
		if (fixing(s, BCH_FSCK_dirent_duplicate, where, detail)) {
			fixed(s, BCH_FSCK_dirent_duplicate, bch_fs_dirent_delete(c, dir, slot));
			return s->err;
		}
	}

	unsigned want = bch_mode_to_dtype(ti->mode);
	if (d->d_type != want && !moved) {
		snprintf(detail, sizeof(detail), "type %u, inode is %u", d->d_type, want);
		WHERE();
		if (fixing(s, BCH_FSCK_dirent_type_wrong, where, detail)) {
			struct bch_bkey *n = bch_bkey_dup(k);
			((struct bch_dirent *)bkey_val(n))->d_type = want;
			fixed(s, BCH_FSCK_dirent_type_wrong, put_key(c, BCH_BTREE_ID_dirents, n));
			free(n);
			if (s->err)
				return s->err;
		}
	}

	if (S_ISDIR(ti->mode)) {
		if (ti->names) {
			char tw[640];
			inode_where(c, d->inum, tw, sizeof(tw));
			snprintf(detail, sizeof(detail), "%s is already named in directory %" PRIu64, tw,
				 ti->parent);
			WHERE();
			if (fixing(s, BCH_FSCK_dir_multiple_links, where, detail)) {
				fixed(s, BCH_FSCK_dir_multiple_links, bch_fs_dirent_delete(c, dir, slot));
				return s->err;
			}
		}
		if (!ti->names) {
			ti->parent = dir;
			ti->parent_slot = slot;
		}
		ti->names++;
		di = ino_find(&s->inodes, dir, false);	/* table may not move here, but be safe */
		di->subdirs++;
	} else {
		if (!ti->names) {
			ti->parent = dir;
			ti->parent_slot = slot;
		}
		ti->names++;
	}
	return 0;
#undef WHERE
}

static int check_xattr(struct fstate *s, const struct bch_bkey *k)
{
	char where[640];

	if (k->type != BCH_BKEY_xattr)
		return 0;
	s->stats->xattrs++;
	struct ino_info *ii = ino_find(&s->inodes, k->p.inode, false);
	if (!ii || !ii->mode) {
		inode_where(s->c, k->p.inode, where, sizeof(where));
		if (fixing(s, BCH_FSCK_xattr_no_inode, where, NULL))
			fixed(s, BCH_FSCK_xattr_no_inode, delete_key(s->c, BCH_BTREE_ID_xattrs, k->p));
		return s->err;
	}
	struct bch_inode i;
	uint64_t first;
	int r = bch_inode_get(s->c, k->p.inode, &i);
	if (!r)
		r = bch_fs_xattr_first(s->c, k->p.inode, &i, k, &first);
	if (r == -ENOENT) {
		inode_where(s->c, k->p.inode, where, sizeof(where));
		if (fixing(s, BCH_FSCK_xattr_misplaced, where, NULL))
			fixed(s, BCH_FSCK_xattr_misplaced, bch_fs_xattr_reinsert(s->c, k->p.inode, &i, k));
		return s->err;
	}
	return r;
}

/* ------------------------------------------------------------ pass 9 */

/* Before the dirents are checked: a root to hang them from. */
static int check_root(struct fstate *s)
{
	struct ino_info *root = ino_find(&s->inodes, BCH_ROOT_INO, false);

	if (root && root->mode && S_ISDIR(root->mode))
		return 0;
	if (!fixing(s, BCH_FSCK_root_missing, "inode 4096 (/)", NULL))
		return 0;
	struct bch_inode ri;
	bch_inode_init(s->c, &ri, BCH_ROOT_INO, S_IFDIR | 0755, 0, 0, 0, NULL);
	int r = update_inode(s->c, BCH_ROOT_INO, &ri);
	fixed(s, BCH_FSCK_root_missing, r);
	if (!r)
		ino_find(&s->inodes, BCH_ROOT_INO, true)->mode = ri.mode;
	return r;
}

static uint64_t lost_found;

static int need_lost_found(struct fstate *s)
{
	uint64_t inum;

	if (lost_found)
		return 0;
	if (!bch_fs_lookup(s->c, BCH_ROOT_INO, "lost+found", &inum)) {
		struct ino_info *ii = ino_find(&s->inodes, inum, false);
		if (ii && S_ISDIR(ii->mode)) {
			lost_found = inum;
			return 0;
		}
	}
	if (!fixing(s, BCH_FSCK_lost_found_missing, "/lost+found", NULL))
		return -ENOENT;
	int r = bch_fs_create(s->c, BCH_ROOT_INO, "lost+found", S_IFDIR | 0700, 0, 0, 0, &inum);
	fixed(s, BCH_FSCK_lost_found_missing, r);
	if (r)
		return r;
	struct ino_info *ii = ino_find(&s->inodes, inum, true);
	struct bch_inode root;
	ii->mode = S_IFDIR | 0700;
	ii->names = 1;
	ii->parent = BCH_ROOT_INO;
	if (!bch_inode_get(s->c, BCH_ROOT_INO, &root))
		bch_fs_dirent_first(s->c, BCH_ROOT_INO, &root, "lost+found", &ii->parent_slot);
	ii->state = 2;
	ino_find(&s->inodes, BCH_ROOT_INO, false)->subdirs++;
	/* create() counted the new directory in the root's nlink: keep the table in step */
	lost_found = inum;
	return 0;
}

/* Give inum a name "#inum" in lost+found. */
static int reattach(struct fstate *s, struct ino_info *ii)
{
	char name[32];
	int r = need_lost_found(s);

	if (r)
		return r;
	snprintf(name, sizeof(name), "#%" PRIu64, ii->inum);
	r = bch_fs_dirent_add(s->c, lost_found, name, ii->inum, bch_mode_to_dtype(ii->mode));
	if (r)
		return r;
	uint64_t slot = 0;
	struct bch_inode lf;
	if (!bch_inode_get(s->c, lost_found, &lf))
		bch_fs_dirent_first(s->c, lost_found, &lf, name, &slot);
	ii->names = 1;
	ii->parent = lost_found;
	ii->parent_slot = slot;
	struct bch_inode in;
	if (!(r = bch_inode_get(s->c, ii->inum, &in))) {
		in.dir = lost_found;
		in.dir_offset = slot;
		r = update_inode(s->c, ii->inum, &in);
	}
	if (!r && S_ISDIR(ii->mode)) {
		ino_find(&s->inodes, lost_found, false)->subdirs++;
		r = adjust_nlink(s->c, lost_found, 1);
	}
	return r;
}

static int check_structure(struct fstate *s)
{
	struct bch_fs *c = s->c;
	char where[640];
	int r;

	lost_found = 0;
	ino_reserve(&s->inodes, 4);	/* root and lost+found may be added below */
	struct ino_info *root = ino_find(&s->inodes, BCH_ROOT_INO, false);
	if (!root || !root->mode || !S_ISDIR(root->mode))
		return 0;	/* not recreated (-n): nothing can be reached */
	root->state = 2;

	/* directories: named once, and every parent chain reaches the root */
	for (size_t i = 0; i < s->inodes.cap && !s->err; i++) {
		struct ino_info *ii = &s->inodes.e[i];
		if (!ii->inum || !ii->mode || !S_ISDIR(ii->mode) || ii->state == 2)
			continue;
		if (!ii->names) {
			struct bch_inode in;
			if ((r = bch_inode_get(c, ii->inum, &in)))
				return r;
			inode_where(c, ii->inum, where, sizeof(where));
			if (!in.nlink || (in.flags & BCH_INODE_UNLINKED)) {
				/* an rmdir that did not finish */
				if (fixing(s, BCH_FSCK_inode_unlinked, where, NULL)) {
					fixed(s, BCH_FSCK_inode_unlinked, bch_fs_inode_free(c, ii->inum));
					ii->mode = 0;
				}
			} else if (fixing(s, BCH_FSCK_dir_unreachable, where, NULL)) {
				fixed(s, BCH_FSCK_dir_unreachable, reattach(s, ii));
			}
			ii->state = 2;
			continue;
		}
		/* walk up: state 1 marks this walk's path */
		struct ino_info **path = NULL;
		size_t plen = 0;
		struct ino_info *cur = ii;
		while (cur && cur->state == 0 && cur->names && plen < s->inodes.nr + 1) {
			cur->state = 1;
			path = realloc(path, (plen + 1) * sizeof(*path));
			if (!path)
				abort();
			path[plen++] = cur;
			cur = ino_find(&s->inodes, cur->parent, false);
		}
		if (cur && cur->state == 1) {
			/* cur is on a loop: cut it there */
			inode_where(c, cur->inum, where, sizeof(where));
			if (fixing(s, BCH_FSCK_dir_loop, where, NULL)) {
				struct ino_info *old_parent = ino_find(&s->inodes, cur->parent, false);
				r = bch_fs_dirent_delete(c, cur->parent, cur->parent_slot);
				if (!r) {
					if (old_parent && old_parent->subdirs)
						old_parent->subdirs--;
					r = adjust_nlink(c, cur->parent, -1);
				}
				if (!r)
					r = reattach(s, cur);
				fixed(s, BCH_FSCK_dir_loop, r);
			}
		}
		/* every directory on the path now reaches the root (or was reported) */
		for (size_t k = 0; k < plen; k++)
			path[k]->state = 2;
		free(path);
	}

	/* files: a name, or deleted when nothing wants them */
	for (size_t i = 0; i < s->inodes.cap && !s->err; i++) {
		struct ino_info *ii = &s->inodes.e[i];
		if (!ii->inum || !ii->mode || S_ISDIR(ii->mode) || ii->names)
			continue;
		struct bch_inode in;
		if ((r = bch_inode_get(c, ii->inum, &in)))
			return r;
		inode_where(c, ii->inum, where, sizeof(where));
		if (!in.nlink || (in.flags & BCH_INODE_UNLINKED)) {
			if (fixing(s, BCH_FSCK_inode_unlinked, where, NULL)) {
				fixed(s, BCH_FSCK_inode_unlinked, bch_fs_inode_free(c, ii->inum));
				ii->mode = 0;	/* gone */
			}
		} else if (fixing(s, BCH_FSCK_inode_unreachable, where, NULL)) {
			fixed(s, BCH_FSCK_inode_unreachable, reattach(s, ii));
		}
	}
	/* directories left unlinked by an interrupted rmdir */
	return s->err;
}

/* ----------------------------------------------------------- pass 10 */

static int check_links_one(struct fstate *s, const struct bch_bkey *k)
{
	struct bch_fs *c = s->c;
	char where[640], detail[160];

	if (k->type != BCH_BKEY_inode)
		return 0;
	struct ino_info *ii = ino_find(&s->inodes, k->p.offset, false);
	if (!ii || !ii->mode)
		return 0;
	const struct bch_inode in = *(const struct bch_inode *)bkey_val(k);
	struct bch_inode n = in;
	uint32_t want = S_ISDIR(in.mode) ? 2 + ii->subdirs : ii->names;
	if (!S_ISDIR(in.mode) && !ii->names)
		return 0;	/* left unreachable: reported in pass 9 */
	if (in.nlink != want || (in.flags & BCH_INODE_UNLINKED)) {
		inode_where(c, ii->inum, where, sizeof(where));
		snprintf(detail, sizeof(detail), "nlink %u, counted %u%s", (unsigned)in.nlink, want,
			 (in.flags & BCH_INODE_UNLINKED) ? " (marked unlinked)" : "");
		if (fixing(s, BCH_FSCK_nlink_wrong, where, detail)) {
			n.nlink = want;
			n.flags &= ~BCH_INODE_UNLINKED;
			bch_fsck_fixed(s->ctx, BCH_FSCK_nlink_wrong);
		}
	}
	/* pass 7's back pointer: the first name of a directory; one of a file's names */
	bool ok = true;
	if (ii->inum == BCH_ROOT_INO) {
		ok = !in.dir;
	} else if (S_ISDIR(in.mode)) {
		ok = in.dir == ii->parent && in.dir_offset == ii->parent_slot;
	} else if (in.dir && !(in.dir == ii->parent && in.dir_offset == ii->parent_slot)) {
		struct bch_bkey *d;
		ok = !bch_btree_lookup(c, BCH_BTREE_ID_dirents, POS(in.dir, in.dir_offset, 0), &d);
		if (ok) {
			ok = d->type == BCH_BKEY_dirent &&
			     ((const struct bch_dirent *)bkey_val(d))->inum == ii->inum;
			free(d);
		}
	}
	if (!ok) {
		inode_where(c, ii->inum, where, sizeof(where));
		snprintf(detail, sizeof(detail), "parent %" PRIu64 " offset %" PRIu64, (uint64_t)in.dir,
			 (uint64_t)in.dir_offset);
		if (fixing(s, BCH_FSCK_inode_back_pointer, where, detail)) {
			n.dir = ii->inum == BCH_ROOT_INO ? 0 : ii->parent;
			n.dir_offset = ii->inum == BCH_ROOT_INO ? 0 : ii->parent_slot;
			bch_fsck_fixed(s->ctx, BCH_FSCK_inode_back_pointer);
		}
	}
	if (memcmp(&n, &in, sizeof(n)))
		return update_inode(c, ii->inum, &n);
	return 0;
}

static int check_links(struct fstate *s)
{
	int r = for_each_key(s, BCH_BTREE_ID_inodes, check_links_one);
	return r ? r : s->err;
}

/* ----------------------------------------------------------- pass 11 */

static int check_data(struct fstate *s, const struct bch_bkey *k)
{
	struct bch_fs *c = s->c;
	unsigned bad;
	char where[700], detail[64];

	if (k->type != BCH_BKEY_extent)
		return 0;
	s->stats->data_bytes += (uint64_t)k->size << 9;
	int r = bch_data_verify_key(c, k, &bad);
	if (r || !bad)
		return r;
	const struct bch_extent *e = bkey_val(k);
	unsigned nr = bch_extent_nr_ptrs(k), good = nr;
	for (unsigned i = 0; i < nr; i++)
		if (!(bad & (1U << i))) {
			good = i;
			break;
		}
	char iw[640];
	inode_where(c, k->p.inode, iw, sizeof(iw));
	snprintf(where, sizeof(where), "%s sectors %" PRIu64 "..%" PRIu64, iw, bch_extent_start(k),
		 (uint64_t)k->p.offset);
	if (good == nr) {
		bch_fsck_problem(s->ctx, BCH_FSCK_data_unreadable, where, NULL);
		return 0;
	}
	/* rewrite each bad copy on its own device from the good one's encoded bytes */
	size_t bytes = (size_t)e->crc.compressed_sectors << 9;
	void *buf = bch_dev_alloc_buf(bytes);
	if (!buf)
		return -ENOMEM;
	r = bch_dev_read(c->devs[e->ptrs[good].dev]->bdev, buf, bytes,
			 (uint64_t)e->ptrs[good].offset << 9);
	struct bch_bkey *n = bch_bkey_dup(k);
	struct bch_extent *ne = bkey_val(n);
	for (unsigned i = 0; i < nr && !r; i++) {
		if (!(bad & (1U << i)))
			continue;
		snprintf(detail, sizeof(detail), "copy on device %u", e->ptrs[i].dev);
		if (!fixing(s, BCH_FSCK_data_replica_bad, where, detail))
			continue;
		struct bch_extent_ptr np;
		struct bch_dev *ca = e->ptrs[i].dev < c->nr_devs ? c->devs[e->ptrs[i].dev] : NULL;
		if (!ca || !ca->bdev || bch_alloc_data_on(c, e->ptrs[i].dev, e->crc.compressed_sectors, &np))
			continue;	/* left uncorrected: no room, or device gone */
		r = bch_dev_write(ca->bdev, buf, bytes, (uint64_t)np.offset << 9);
		if (r) {
			bch_alloc_data_free(c, &np, 1, e->crc.compressed_sectors);
			break;
		}
		bch_alloc_data_account(c, &e->ptrs[i], -(int64_t)bch_extent_disk_sectors(k));
		/* the new copy was counted whole when allocated: count the key's share */
		bch_alloc_data_account(c, &np, (int64_t)bch_extent_disk_sectors(k) -
					       (int64_t)e->crc.compressed_sectors);
		ne->ptrs[i] = np;
		bch_fsck_fixed(s->ctx, BCH_FSCK_data_replica_bad);
	}
	free(buf);
	if (!r && memcmp(n, k, bkey_bytes(k)))
		r = put_key(c, BCH_BTREE_ID_extents, n);
	free(n);
	return r;
}

/* -------------------------------------------------------------- driver */

int bch_fsck_files(struct bch_fsck_ctx *ctx, struct bch_fs *c, bool data,
		   struct bch_fsck_file_stats *stats)
{
	struct fstate *s = calloc(1, sizeof(*s));
	int r = 0;

	if (!s)
		return -ENOMEM;
	memset(stats, 0, sizeof(*stats));
	s->ctx = ctx;
	s->c = c;
	s->stats = stats;
	s->cur_inum = UINT64_MAX;
	struct bch_bkey *last;
	if (!bch_btree_peek_prev(c, BCH_BTREE_ID_inodes, POS(0, UINT64_MAX, 0), POS_MIN, &last)) {
		s->max_inum = last->p.offset;
		free(last);
	}
	for (unsigned d = 0; d < c->nr_devs; d++) {
		if (!c->devs[d] || !c->devs[d]->bdev)
			continue;
		struct bch_member *m = bch_sb_member(c->sb, d);
		s->claimed_blocks[d] = m->nbuckets * m->bucket_size / c->sb->block_size;
		s->claimed[d] = calloc((s->claimed_blocks[d] + 7) / 8, 1);
		if (!s->claimed[d]) {
			r = -ENOMEM;
			goto out;
		}
	}
	if (ctx->progress)
		ctx->progress(ctx, 5, "extents");
	r = for_each_key(s, BCH_BTREE_ID_extents, check_extent);
	if (!r && !s->err && ctx->progress)
		ctx->progress(ctx, 7, "inodes");
	if (!r && !s->err)
		r = for_each_key(s, BCH_BTREE_ID_inodes, scan_inode);
	if (!r && !s->err && ctx->progress)
		ctx->progress(ctx, 8, "directory entries and xattrs");
	if (!r && !s->err)
		r = check_root(s);
	if (!r && !s->err)
		r = for_each_key(s, BCH_BTREE_ID_dirents, check_dirent);
	if (!r && !s->err)
		r = for_each_key(s, BCH_BTREE_ID_xattrs, check_xattr);
	if (!r && !s->err && !ctx->cancelled) {
		if (ctx->progress)
			ctx->progress(ctx, 9, "directory structure");
		r = check_structure(s);
	}
	if (!r && !s->err && !ctx->cancelled) {
		if (ctx->progress)
			ctx->progress(ctx, 10, "link counts");
		r = check_links(s);
	}
	if (!r && !s->err && data && !ctx->cancelled) {
		if (ctx->progress)
			ctx->progress(ctx, 11, "data");
		r = for_each_key(s, BCH_BTREE_ID_extents, check_data);
	}
	if (!r)
		r = s->err;
out:
	if (r && !ctx->err_msg[0])
		snprintf(ctx->err_msg, sizeof(ctx->err_msg), "%s",
			 c->err_msg[0] ? c->err_msg : bch_err_str(r));
	for (unsigned d = 0; d < BCH_SB_MEMBERS_MAX; d++)
		free(s->claimed[d]);
	free(s->inodes.e);
	free(s->moved);
	free(s);
	return r;
}
