// SPDX-License-Identifier: GPL-2.0
/*
 * fs_ops.c - the POSIX layer (see fs_ops.h).
 *
 * Each operation loads the inodes it changes once (struct ino_set), builds
 * one transaction of inode, dirent, xattr and extent updates, commits it,
 * and only then applies the extent space accounting (extents.h).
 *
 * Invariants kept here (fsck checks them):
 *   (1) nlink of a non-directory = dirents naming it; of a directory =
 *       2 + its subdirectories.
 *   (2) A directory has exactly one dirent naming it; its inode's dir /
 *       dir_offset point at that dirent (also kept for a file's first link).
 *   (3) i_size covers every extent with data; reservations (fallocate
 *       KEEP_SIZE) may lie past it.  sectors = sectors of its extents and
 *       reservations.
 *   (4) Data past i_size in the last block reads as zeros.
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

#define MAX_FILE_SIZE		((uint64_t)INT64_MAX)
#define WRITE_CHUNK		(1U << 20)	/* bytes of data per transaction */
#define PUNCH_KEYS_PER_TRANS	256

/* --------------------------------------------------------------- helpers */

static int subvol_commit(struct bch_fs *c, struct btree_trans *t);

/*
 * Every entry point taking a file handle runs in the view of its subvolume
 * (snapshot.h): it enters the view, calls its v_ function with the inode
 * number, and leaves the view.
 */
#define VIEW_CALL(c, h, call) ({					\
	struct bch_view _v;						\
	int64_t _r = bch_view_enter(c, &_v, &(h));			\
	if (!_r) {							\
		_r = (call);						\
		bch_view_exit(&_v);					\
	}								\
	_r;								\
})

static int ret_errno(int r)
{
	return r < 0 ? -bch_err_class(r) : r;
}

static uint64_t block_bytes(struct bch_fs *c)
{
	return (uint64_t)c->sb->block_size << BCH_SECTOR_SHIFT;
}

static int check_name(const char *name)
{
	size_t len = strlen(name);

	if (!len)
		return -ENOENT;
	if (len > BCH_NAME_MAX)
		return -ENAMETOOLONG;
	if (strchr(name, '/'))
		return -EINVAL;
	return 0;
}

/*
 * An operation that adds metadata leaves the last of the btree reserve to
 * deletes, replay and fsck (alloc.h): on a full filesystem it fails here,
 * before it changes anything, and rm still works.  Nor may its btree nodes
 * take space promised to reservations (fallocate): when what is free for
 * data does not cover the promises, only writes (which may fill their own
 * reservations) go on.
 */
static int metadata_room_for(struct bch_fs *c, bool write)
{
	if (c->read_only)
		return 0;
	if (bch_alloc_metadata_low(c))
		return bch_fs_err(c, -BCH_ERR_no_space, "no space left for new metadata "
				  "(the rest of the btree reserve is kept for deletes)");
	if (!write && c->reserved_sectors && bch_alloc_user_free(c) <= c->reserved_sectors)
		return bch_fs_err(c, -BCH_ERR_no_space, "no space left for new metadata "
				  "(what is free is promised to preallocated ranges)");
	return 0;
}

static int metadata_room(struct bch_fs *c)
{
	return metadata_room_for(c, false);
}

static bool is_dot(const char *name)
{
	return !strcmp(name, ".") || !strcmp(name, "..");
}

/* The inodes one operation changes, each loaded once and written once. */
struct ino_set {
	unsigned		nr;
	uint64_t		inum[4];
	struct bch_inode	v[4];
	bool			deleted[4];
};

static int ino_get(struct bch_fs *c, struct ino_set *s, uint64_t inum, struct bch_inode **ret)
{
	for (unsigned i = 0; i < s->nr; i++)
		if (s->inum[i] == inum) {
			*ret = &s->v[i];
			return 0;
		}
	if (s->nr == 4)
		abort();
	int r = bch_inode_get(c, inum, &s->v[s->nr]);
	if (r)
		return r;
	s->deleted[s->nr] = false;
	s->inum[s->nr] = inum;
	*ret = &s->v[s->nr++];
	return 0;
}

static void ino_set_delete(struct ino_set *s, uint64_t inum)
{
	for (unsigned i = 0; i < s->nr; i++)
		if (s->inum[i] == inum)
			s->deleted[i] = true;
}

static int ino_set_write(struct bch_fs *c, struct ino_set *s, struct btree_trans *t)
{
	int r = 0;

	for (unsigned i = 0; i < s->nr && !r; i++) {
		if (!s->deleted[i]) {
			r = bch_inode_update(t, s->inum[i], &s->v[i]);
			continue;
		}
		r = bch_inode_delete(t, s->inum[i]);
		if (!r)		/* its rebalance work goes with it */
			r = bch_rebalance_work_clear(c, t, s->inum[i]);
	}
	return r;
}

static void touch(struct bch_inode *i, bool mtime)
{
	int64_t now = bch_now_ns();

	i->ctime = now;
	if (mtime)
		i->mtime = now;
}

/*
 * File flags: the kernel's rules for immutable and append-only inodes
 * (fs/namei.c may_delete(), may_create(), vfs_link(); fs/attr.c
 * notify_change(); fs/open.c do_truncate(); fs/xattr.c xattr_permission()).
 * Each helper is one check, -EPERM when the flags refuse.
 */
#define FLAGS_FROZEN	(BCH_INODE_IMMUTABLE | BCH_INODE_APPEND)

/* i is unlinked, renamed, linked, truncated, or its xattrs change; or a name leaves dir i */
static int flags_no_change(const struct bch_inode *i)
{
	return i->flags & FLAGS_FROZEN ? -EPERM : 0;
}

/* a name is added to directory i */
static int flags_dir_add(const struct bch_inode *i)
{
	return i->flags & BCH_INODE_IMMUTABLE ? -EPERM : 0;
}

/* data written at offset: append-only files only grow at the end */
static int flags_write(const struct bch_inode *i, uint64_t offset)
{
	if (i->flags & BCH_INODE_IMMUTABLE)
		return -EPERM;
	return (i->flags & BCH_INODE_APPEND) && offset < i->size ? -EPERM : 0;
}

/* notify_change(): times set to now pass append-only, not immutable; a read's atime passes both */
static int flags_setattr(const struct bch_inode *i, const struct bch_setattr *sa)
{
	unsigned v = sa->valid;

	if (!(i->flags & FLAGS_FROZEN) || (v & BCH_SETATTR_ATIME_READ))
		return 0;
	if (i->flags & BCH_INODE_IMMUTABLE)
		return -EPERM;
	if ((v & (BCH_SETATTR_MODE | BCH_SETATTR_UID | BCH_SETATTR_GID | BCH_SETATTR_SIZE |
		  BCH_SETATTR_BTIME)) ||
	    ((v & BCH_SETATTR_ATIME) && sa->atime != BCH_TIME_NOW) ||
	    ((v & BCH_SETATTR_MTIME) && sa->mtime != BCH_TIME_NOW))
		return -EPERM;
	return 0;
}

/* flags_no_change() for inum, read here (xattr calls) */
static int flags_no_change_inum(struct bch_fs *c, uint64_t inum)
{
	struct bch_inode i;
	int r = bch_inode_get(c, inum, &i);

	return r ? ret_errno(r) : flags_no_change(&i);
}

/* Commit t (with u's extent accounting, if any). */
static int commit(struct bch_fs *c, struct btree_trans *t, struct bch_extent_update *u)
{
	int r = bch_trans_commit(t, 0);

	if (u) {
		if (r)
			bch_extent_update_abort(c, u);
		else
			bch_extent_update_apply(c, u);
	}
	return r;
}

/* One transaction writing the inodes of s (and nothing else). */
static int commit_inodes(struct bch_fs *c, struct ino_set *s)
{
	struct btree_trans *t;
	int r = bch_trans_init(c, &t);

	if (r)
		return r;
	r = ino_set_write(c, s, t);
	if (!r)
		r = commit(c, t, NULL);
	bch_trans_exit(t);
	return r;
}

/* --------------------------------------------------------------- dirents */

struct name_key {
	const char	*name;
	size_t		len;
};

static bool dirent_match(const struct bch_bkey *k, const void *key)
{
	const struct bch_dirent *d = bkey_val(k);
	const struct name_key *n = key;

	return d->name_len == n->len && !memcmp(d->name, n->name, n->len);
}

static const struct bch_hash_desc dirent_desc = {
	.btree_id	= BCH_BTREE_ID_dirents,
	.key_type	= BCH_BKEY_dirent,
	.match		= dirent_match,
};

static uint64_t dirent_hash(struct bch_fs *c, const struct bch_inode *dir, const char *name)
{
	return bch_hash_slot(bch_str_hash(c->sb->str_hash_key, dir->hash_seed, name, strlen(name)));
}

/* The dirent of name in dir (malloc'd) or -ENOENT. */
static int dirent_lookup(struct bch_fs *c, uint64_t dir, const struct bch_inode *di, const char *name,
			 struct bch_bkey **ret)
{
	struct name_key n = { name, strlen(name) };

	return bch_hash_lookup(c, &dirent_desc, dir, dirent_hash(c, di, name), &n, ret);
}

static int dirent_put(struct btree_trans *t, uint64_t dir, uint64_t slot, const char *name,
		      uint64_t inum, unsigned d_type)
{
	size_t len = strlen(name);
	struct bch_bkey *k = bch_bkey_alloc(BCH_BKEY_dirent, POS(dir, slot, 0), sizeof(struct bch_dirent) + len);
	struct bch_dirent *d = bkey_val(k);
	int r;

	d->inum = inum;
	d->d_type = d_type;
	d->name_len = len;
	memcpy(d->name, name, len);
	r = bch_trans_update(t, BCH_BTREE_ID_dirents, k);
	free(k);
	return r;
}

/* Where a new name goes in dir: -EEXIST if taken. */
static int dirent_new_slot(struct bch_fs *c, uint64_t dir, const struct bch_inode *di,
			   const char *name, uint64_t *slot)
{
	struct name_key n = { name, strlen(name) };
	bool exists;
	int r = bch_hash_find_slot(c, &dirent_desc, dir, dirent_hash(c, di, name), &n, slot, &exists);

	return r ? r : exists ? -EEXIST : 0;
}

static int dir_is_empty(struct bch_fs *c, uint64_t dir)
{
	struct bch_viter it;
	const struct bch_bkey *k;
	int err = 0, ret = 1;

	bch_viter_init(&it, c, BCH_BTREE_ID_dirents, POS(dir, 0, 0), POS(dir, UINT64_MAX, 0));
	while ((k = bch_viter_next(&it, &err)))
		if (k->type == BCH_BKEY_dirent) {
			ret = 0;
			break;
		}
	bch_viter_exit(&it);
	return err ? err : ret;
}

/*
 * The handle dirent k (in directory dir) names: the inode in this view, or
 * the root of the subvolume a BCH_DT_SUBVOL dirent names (*d_type: DT_DIR
 * for it).  0 for a subvolume name that is not the subvolume's own: a
 * snapshot's copy of the name (a snapshot does not hold the subvolumes
 * named inside it, as in btrfs), or a name left by a crash mid-delete
 * (fsck removes those); lookup and readdir do not show it.
 */
static uint64_t dirent_target(struct bch_fs *c, uint64_t dir, const struct bch_bkey *k, unsigned *d_type)
{
	const struct bch_dirent *d = bkey_val(k);

	if (d_type)
		*d_type = d->d_type;
	if (d->d_type == BCH_DT_SUBVOL) {
		const struct bch_subvol_info *sv = bch_subvol_get(c, (uint32_t)d->inum);
		const struct bch_view *v = bch_view_cur(c);
		if (d_type)
			*d_type = DT_DIR;
		if (!sv || !v || sv->v.dir_subvol != v->subvol || sv->v.dir != dir ||
		    sv->v.dir_offset != k->p.offset)
			return 0;
		return bch_handle(sv->id, sv->v.root_inum);
	}
	return bch_view_handle(c, d->inum);
}

/* ".." of dir: its parent, or at a subvolume's root the directory holding its name. */
static uint64_t parent_handle(struct bch_fs *c, uint64_t dir, const struct bch_inode *di)
{
	const struct bch_view *v = bch_view_cur(c);
	const struct bch_subvol_info *sv = v && v->subvol != BCH_SUBVOL_NONE ? bch_subvol_get(c, v->subvol) : NULL;

	if (sv && sv->id && dir == sv->v.root_inum)
		return bch_handle(sv->v.dir_subvol, sv->v.dir);
	return bch_view_handle(c, dir == BCH_ROOT_INO || !di->dir ? BCH_ROOT_INO : di->dir);
}

/* ------------------------------------------------------------ namespace */

static int v_lookup(struct bch_fs *c, uint64_t dir, const char *name, uint64_t *inum)
{
	struct bch_inode di;
	struct bch_bkey *k;
	int r = bch_inode_get(c, dir, &di);

	if (r)
		return ret_errno(r);
	if (!S_ISDIR(di.mode))
		return -ENOTDIR;
	if (!strcmp(name, ".")) {
		*inum = bch_view_handle(c, dir);
		return 0;
	}
	if (!strcmp(name, "..")) {
		*inum = parent_handle(c, dir, &di);
		return 0;
	}
	if ((r = check_name(name)))
		return r;
	if ((r = dirent_lookup(c, dir, &di, name, &k)))
		return ret_errno(r);
	*inum = dirent_target(c, dir, k, NULL);
	free(k);
	return *inum ? 0 : -ENOENT;
}

static void ns_to_ts(int64_t ns, struct timespec *ts)
{
	ts->tv_sec = ns / 1000000000LL;
	ts->tv_nsec = ns % 1000000000LL;
	if (ts->tv_nsec < 0) {
		ts->tv_nsec += 1000000000LL;
		ts->tv_sec--;
	}
}

/* What stat(2) says of inode i of inum (current view). */
static void inode_stat(struct bch_fs *c, uint64_t inum, const struct bch_inode *i, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = bch_view_handle(c, inum);
	st->st_mode = i->mode;
	st->st_nlink = i->nlink;
	st->st_uid = i->uid;
	st->st_gid = i->gid;
	st->st_rdev = i->rdev;
	st->st_size = i->size;
	st->st_blksize = block_bytes(c);
	st->st_blocks = i->sectors;
	ns_to_ts(i->atime, &st->st_atim);
	ns_to_ts(i->mtime, &st->st_mtim);
	ns_to_ts(i->ctime, &st->st_ctim);
}

static int v_getattr(struct bch_fs *c, uint64_t inum, struct stat *st)
{
	struct bch_inode i;
	int r = bch_inode_get(c, inum, &i);

	if (r)
		return ret_errno(r);
	inode_stat(c, inum, &i, st);
	return 0;
}

/*
 * A new name in directory dir (inode di, current view): the checks, and
 * *slot, where its dirent goes.
 */
static int new_name_check(struct bch_fs *c, uint64_t dir, struct bch_inode *di, const char *name,
			  uint64_t *slot)
{
	int r;

	if (!S_ISDIR(di->mode))
		return -ENOTDIR;
	if (di->flags & BCH_INODE_UNLINKED)
		return -ENOENT;
	if (is_dot(name))
		return -EEXIST;
	if ((r = check_name(name)))
		return r;
	if ((r = metadata_room(c)))
		return r;
	return dirent_new_slot(c, dir, di, name, slot);
}

static int create_common(struct bch_fs *c, uint64_t dir, const char *name, mode_t mode, dev_t rdev,
			 uid_t uid, gid_t gid, const char *symlink_target, uint64_t *ret_inum)
{
	struct ino_set s = { 0 };
	struct bch_inode *di, *ni;
	struct btree_trans *t;
	struct bch_extent_update u = { 0 };
	uint64_t slot, inum;
	int r;

	if ((r = ino_get(c, &s, dir, &di)) || (r = new_name_check(c, dir, di, name, &slot)) ||
	    (r = flags_dir_add(di)) || (r = bch_inode_alloc_num(c, &inum)))
		return ret_errno(r);

	ni = &s.v[s.nr];
	s.inum[s.nr++] = inum;
	bch_inode_init(c, ni, inum, mode, uid, gid, rdev, di);
	ni->dir = dir;
	ni->dir_offset = slot;
	if (S_ISDIR(mode))
		di->nlink++;
	touch(di, true);

	if ((r = bch_trans_init(c, &t)))
		return ret_errno(r);
	if (symlink_target) {
		size_t len = strlen(symlink_target), bs = block_bytes(c);
		size_t padded = (len + bs - 1) / bs * bs;
		char *buf = calloc(1, padded);
		struct bch_io_opts o;
		if (!buf)
			abort();
		memcpy(buf, symlink_target, len);
		bch_io_opts_get(c, ni, &o);
		r = bch_data_write(c, t, inum, &o, 0, buf, padded >> BCH_SECTOR_SHIFT, &u);
		free(buf);
		ni->size = len;
		ni->sectors += u.i_sectors_delta;
	}
	if (!r)
		r = dirent_put(t, dir, slot, name, inum, bch_mode_to_dtype(mode));
	if (!r)
		r = ino_set_write(c, &s, t);
	if (!r)
		r = commit(c, t, &u);
	else
		bch_extent_update_abort(c, &u);
	bch_trans_exit(t);
	bch_extent_update_exit(&u);
	if (!r && ret_inum)
		*ret_inum = bch_view_handle(c, inum);
	return ret_errno(r);
}

static int v_create(struct bch_fs *c, uint64_t dir, const char *name, mode_t mode, dev_t rdev,
		  uid_t uid, gid_t gid, uint64_t *inum)
{
	switch (mode & S_IFMT) {
	case S_IFREG: case S_IFDIR: case S_IFCHR: case S_IFBLK: case S_IFIFO: case S_IFSOCK:
		break;
	case 0:
		mode |= S_IFREG;
		break;
	default:
		return -EINVAL;
	}
	return create_common(c, dir, name, mode, rdev, uid, gid, NULL, inum);
}

static int v_symlink(struct bch_fs *c, uint64_t dir, const char *name, const char *target,
		   uid_t uid, gid_t gid, uint64_t *inum)
{
	size_t len = strlen(target);

	if (!len)
		return -ENOENT;
	if (len >= 4096)
		return -ENAMETOOLONG;
	return create_common(c, dir, name, S_IFLNK | 0777, 0, uid, gid, target, inum);
}

static ssize_t v_readlink(struct bch_fs *c, uint64_t inum, char *buf, size_t size)
{
	struct bch_inode i;
	int r = bch_inode_get(c, inum, &i);

	if (r)
		return ret_errno(r);
	if (!S_ISLNK(i.mode))
		return -EINVAL;
	if (!size)
		return -ERANGE;
	size_t want = i.size < size - 1 ? i.size : size - 1;
	ssize_t n = bch_fs_read(c, inum, 0, buf, want);
	if (n < 0)
		return n;
	buf[n] = 0;
	return n;
}

static int v_link(struct bch_fs *c, uint64_t inum, uint64_t dir, const char *name)
{
	struct ino_set s = { 0 };
	struct bch_inode *di, *ti;
	struct btree_trans *t;
	uint64_t slot;
	int r;

	if ((r = ino_get(c, &s, inum, &ti)))
		return ret_errno(r);
	if ((r = ino_get(c, &s, dir, &di)))
		return ret_errno(r);
	if (!S_ISDIR(di->mode))
		return -ENOTDIR;
	if ((r = metadata_room(c)))
		return ret_errno(r);
	if (is_dot(name))
		return -EEXIST;
	if ((r = check_name(name)))
		return r;
	if (ti->flags & BCH_INODE_UNLINKED)
		return -ENOENT;
	if ((r = dirent_new_slot(c, dir, di, name, &slot)))
		return ret_errno(r);
	if ((r = flags_dir_add(di)) || (r = flags_no_change(ti)))
		return r;
	/* after the name check: an existing name is EEXIST even for a directory */
	if (S_ISDIR(ti->mode))
		return -EPERM;
	if (ti->nlink >= UINT32_MAX - 1)
		return -EMLINK;
	ti->nlink++;
	touch(ti, false);
	touch(di, true);
	if ((r = bch_trans_init(c, &t)))
		return ret_errno(r);
	r = dirent_put(t, dir, slot, name, inum, bch_mode_to_dtype(ti->mode));
	if (!r)
		r = ino_set_write(c, &s, t);
	if (!r)
		r = commit(c, t, NULL);
	bch_trans_exit(t);
	return ret_errno(r);
}

/* Does inum own any key in btree id? (1/0, or an error) */
static int has_keys(struct bch_fs *c, unsigned id, uint64_t inum)
{
	struct bch_bkey *k;
	int r = bch_vpeek(c, id, POS(inum, 0, 0), POS(inum, UINT64_MAX, UINT32_MAX), &k);

	if (r == -BCH_ERR_key_not_found)
		return 0;
	if (r)
		return r;
	free(k);
	return 1;
}

static bool has_extents(struct bch_fs *c, uint64_t inum)
{
	return has_keys(c, BCH_BTREE_ID_extents, inum) != 0;
}

/*
 * Delete every key of inum in btree id, in pieces (of at most 256 keys, and
 * fewer when small nodes make transactions small: a 64 KiB xattr value
 * alone is 64 keys).
 */
static int delete_all_keys(struct bch_fs *c, unsigned id, uint64_t inum)
{
	size_t fit = bch_trans_max_u64s(c) * 5 / 8 / (1 + BCH_BKEY_U64s);
	unsigned per_trans = fit < PUNCH_KEYS_PER_TRANS ? (unsigned)fit : PUNCH_KEYS_PER_TRANS;

	for (;;) {
		struct bch_viter it;
		const struct bch_bkey *k;
		struct btree_trans *t;
		unsigned n = 0;
		int err = 0, r;

		if ((r = bch_trans_init(c, &t)))
			return r;
		bch_viter_init(&it, c, id, POS(inum, 0, 0), POS(inum, UINT64_MAX, UINT32_MAX));
		while (n < per_trans && (k = bch_viter_next(&it, &err))) {
			struct bch_bkey del = { .u64s = BCH_BKEY_U64s, .type = BCH_BKEY_deleted, .p = k->p };
			bch_trans_update(t, id, &del);
			n++;
		}
		bch_viter_exit(&it);
		r = err ? err : n ? commit(c, t, NULL) : 0;
		bch_trans_exit(t);
		if (r || !n)
			return r;
	}
}

/*
 * Free an inode whose nlink reached 0: its data (in pieces), xattrs, and
 * then the inode key.  A crash in between leaves an inode with nlink 0 and
 * the UNLINKED flag, which fsck removes.
 */
static int punch_range(struct bch_fs *c, uint64_t inum, uint64_t start, uint64_t end,
		       uint64_t new_size, bool set_size);

/* Extent keys a file may have for inode_free_one() to free it whole. */
#define FREE_ONE_KEYS	16

/*
 * inode_free() in one transaction when that is all it takes: no xattrs, no
 * dirents, at most FREE_ONE_KEYS extent keys (most files of an rm -rf: one
 * commit instead of two, and no inode update just before the inode's
 * delete).  1: not so, nothing done; else 0 or an error.
 */
static int inode_free_one(struct bch_fs *c, uint64_t inum)
{
	struct bch_extent_update u = { 0 };
	struct btree_trans *t;
	uint64_t done_to = 0;
	int r;

	if ((r = has_keys(c, BCH_BTREE_ID_xattrs, inum)) ||
	    (r = has_keys(c, BCH_BTREE_ID_dirents, inum)))
		return r;
	if ((r = bch_trans_init(c, &t)))
		return r;
	r = bch_extents_punch(c, t, inum, 0, UINT64_MAX - 1, FREE_ONE_KEYS, &u, &done_to);
	if (!r && done_to < UINT64_MAX - 1)
		r = 1;		/* more than that: in pieces */
	if (!r)
		r = bch_inode_delete(t, inum);
	if (!r)		/* its rebalance work goes with it */
		r = bch_rebalance_work_clear(c, t, inum);
	if (!r)
		r = commit(c, t, &u);
	else
		bch_extent_update_abort(c, &u);
	bch_trans_exit(t);
	bch_extent_update_exit(&u);
	return r;
}

static int inode_free(struct bch_fs *c, uint64_t inum)
{
	int r = inode_free_one(c, inum);

	if (r != 1)
		return r;
	r = punch_range(c, inum, 0, UINT64_MAX - 1, 0, true);

	if (!r)
		r = delete_all_keys(c, BCH_BTREE_ID_xattrs, inum);
	if (!r)
		r = delete_all_keys(c, BCH_BTREE_ID_dirents, inum);	/* leftover whiteouts */
	if (!r) {
		struct btree_trans *t;
		if (!(r = bch_trans_init(c, &t))) {
			r = bch_inode_delete(t, inum);
			if (!r)		/* its rebalance work goes with it */
				r = bch_rebalance_work_clear(c, t, inum);
			if (!r)
				r = commit(c, t, NULL);
			bch_trans_exit(t);
		}
	}
	return r;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Inodes freed together in one transaction at most (bch_fs_inodes_free()). */
#define FREE_BATCH_MAX	64

enum free_how { FREE_BATCHED, FREE_SKIP, FREE_ALONE };

/*
 * What bch_fs_inodes_free() does with inum: skip it (linked again, gone,
 * or an error reading it: *err), free it alone (inode_free(): xattrs or
 * dirents to delete too) or try it in the batch.
 */
static enum free_how free_how(struct bch_fs *c, uint64_t inum, int *err)
{
	struct bch_inode i;
	int r = bch_inode_get(c, inum, &i);

	if (!r && i.nlink)
		return FREE_SKIP;
	/* dirents (whiteouts a directory kept) only under a directory */
	if (!r && !(r = has_keys(c, BCH_BTREE_ID_xattrs, inum)) && S_ISDIR(i.mode))
		r = has_keys(c, BCH_BTREE_ID_dirents, inum);
	if (r == 1)
		return FREE_ALONE;
	if (r && r != -ENOENT && r != -BCH_ERR_key_not_found && !*err)
		*err = r;
	return r ? FREE_SKIP : FREE_BATCHED;
}

/*
 * One transaction freeing the FREE_BATCHED inodes of inum[*i..nr), as many
 * as fit; *i moves past them.  An inode with more than FREE_ONE_KEYS
 * extent keys turns FREE_ALONE and the transaction is built again without
 * it (a partial punch would leave the inode's sectors wrong).
 */
static int free_batch(struct bch_fs *c, const uint64_t *inum, enum free_how *how, size_t nr,
		      size_t *i)
{
	size_t fit = bch_trans_max_u64s(c) * 5 / 8 / (1 + BCH_BKEY_U64s);
	struct bch_extent_update u = { 0 };
	struct btree_trans *t;
	size_t j, n;
	int r;
again:
	if ((r = bch_trans_init(c, &t))) {
		*i = nr;	/* the rest: nothing more to try */
		return r;
	}
	for (j = *i, n = 0; j < nr && n < FREE_BATCH_MAX; j++) {
		uint64_t done_to = 0;

		if (how[j] != FREE_BATCHED)
			continue;
		/* room for one more at its largest: its extents (reflink_p weigh more) and two keys */
		if (n && u.keys + 2 * n + 2 * FREE_ONE_KEYS + 2 > fit)
			break;
		r = bch_extents_punch(c, t, inum[j], 0, UINT64_MAX - 1, FREE_ONE_KEYS, &u, &done_to);
		if (!r && done_to < UINT64_MAX - 1) {
			how[j] = FREE_ALONE;
			bch_extent_update_abort(c, &u);
			bch_trans_exit(t);
			goto again;
		}
		if (!r)
			r = bch_inode_delete(t, inum[j]);
		if (!r)		/* its rebalance work goes with it */
			r = bch_rebalance_work_clear(c, t, inum[j]);
		if (r)
			break;
		n++;
	}
	if (!r && n)
		r = commit(c, t, &u);
	else
		bch_extent_update_abort(c, &u);
	bch_trans_exit(t);
	bch_extent_update_exit(&u);
	if (r)		/* each of them alone, then */
		for (size_t k = *i; k <= j && k < nr; k++)
			if (how[k] == FREE_BATCHED)
				how[k] = FREE_ALONE;
	*i = j;
	return 0;
}

static int v_inodes_free(struct bch_fs *c, const uint64_t *h, size_t nr)
{
	uint64_t *inum = malloc(nr * sizeof(*inum));
	enum free_how *how = malloc(nr * sizeof(*how));
	int err = 0, r;

	if (!inum || !how) {
		free(inum);
		free(how);
		return -ENOMEM;
	}
	for (size_t i = 0; i < nr; i++)
		inum[i] = h[i] & BCH_HANDLE_INUM_MASK;
	qsort(inum, nr, sizeof(*inum), cmp_u64);
	for (size_t i = 0; i < nr; i++)	/* once each: a transaction deletes it once */
		how[i] = i && inum[i] == inum[i - 1] ? FREE_SKIP : free_how(c, inum[i], &err);
	for (size_t i = 0; i < nr;)
		if ((r = free_batch(c, inum, how, nr, &i)) && !err)
			err = r;
	for (size_t i = 0; i < nr; i++)
		if (how[i] == FREE_ALONE && (r = inode_free(c, inum[i])) && !err)
			err = r;
	free(inum);
	free(how);
	return err;
}

static int remove_entry(struct bch_fs *c, uint64_t dir, const char *name, bool want_dir)
{
	struct ino_set s = { 0 };
	struct bch_inode *di, *ti;
	struct bch_bkey *k;
	struct btree_trans *t;
	uint64_t inum;
	int r;

	if ((r = ino_get(c, &s, dir, &di)))
		return ret_errno(r);
	if (!S_ISDIR(di->mode))
		return -ENOTDIR;
	if (is_dot(name))
		return want_dir ? (!strcmp(name, ".") ? -EINVAL : -ENOTEMPTY) : -EISDIR;
	if ((r = check_name(name)))
		return r;
	if ((r = dirent_lookup(c, dir, di, name, &k)))
		return ret_errno(r);
	inum = ((const struct bch_dirent *)bkey_val(k))->inum;
	uint64_t slot = k->p.offset;
	bool subvol = ((const struct bch_dirent *)bkey_val(k))->d_type == BCH_DT_SUBVOL;
	free(k);
	if (subvol)
		return bch_fs_err(c, -EPERM, "%s is a subvolume: use subvolume delete", name);
	if ((r = ino_get(c, &s, inum, &ti)))
		return ret_errno(r == -ENOENT ? -EIO : r);	/* dirent to a missing inode: fsck */
	if ((r = flags_no_change(di)) || (r = flags_no_change(ti)))
		return r;
	if (want_dir && !S_ISDIR(ti->mode))
		return -ENOTDIR;
	if (!want_dir && S_ISDIR(ti->mode))
		return -EISDIR;
	if (want_dir) {
		if ((r = dir_is_empty(c, inum)) <= 0)
			return r < 0 ? ret_errno(r) : -ENOTEMPTY;
		di->nlink--;
		ti->nlink = 0;
	} else {
		ti->nlink--;
	}
	touch(di, true);
	touch(ti, false);
	/* an inode with nothing but its key goes in this transaction, else in pieces after */
	bool free_later = c->defer_unlinked_free;	/* (then nothing to look up) */
	if (!ti->nlink && !free_later) {
		int e = 0, x = has_keys(c, BCH_BTREE_ID_xattrs, inum);
		if (x >= 0 && want_dir)
			e = has_keys(c, BCH_BTREE_ID_dirents, inum);
		if (x < 0 || e < 0)
			return ret_errno(x < 0 ? x : e);
		free_later = ti->sectors || x || e || has_extents(c, inum);
	}
	if (!ti->nlink) {
		if (free_later)
			ti->flags |= BCH_INODE_UNLINKED;
		else
			ino_set_delete(&s, inum);
	} else if (ti->dir == dir && ti->dir_offset == slot) {
		ti->dir = 0;	/* the back pointer named this link */
		ti->dir_offset = 0;
	}
	if ((r = bch_trans_init(c, &t)))
		return ret_errno(r);
	r = bch_hash_delete_at(c, t, &dirent_desc, dir, slot, 0);
	if (!r)
		r = ino_set_write(c, &s, t);
	if (!r)
		r = commit(c, t, NULL);
	bch_trans_exit(t);
	if (!r && free_later && !c->defer_unlinked_free)
		r = inode_free(c, inum);
	return ret_errno(r);
}

static int v_unlink(struct bch_fs *c, uint64_t dir, const char *name)
{
	return remove_entry(c, dir, name, false);
}

static int v_rmdir(struct bch_fs *c, uint64_t dir, const char *name)
{
	return remove_entry(c, dir, name, true);
}

/* Is dir inside (or equal to) the directory inum?  Walks parent pointers. */
static int is_inside(struct bch_fs *c, uint64_t dir, uint64_t inum)
{
	for (unsigned depth = 0; depth < 100000; depth++) {
		struct bch_inode i;
		if (dir == inum)
			return 1;
		if (dir == BCH_ROOT_INO)
			return 0;
		int r = bch_inode_get(c, dir, &i);
		if (r)
			return r;
		if (!i.dir)
			return 0;
		dir = i.dir;
	}
	return -ELOOP;
}

/*
 * Move the name of a subvolume (dirent sk in olddir) to newname in newdir,
 * both in the current view: the dirents, both directories and the
 * subvolume key (which says where its name is) in one transaction.
 */
static int rename_subvol(struct bch_fs *c, struct ino_set *s, uint64_t olddir, struct bch_inode *od,
			 const struct bch_bkey *sk, uint64_t newdir, struct bch_inode *nd,
			 const char *newname)
{
	const struct bch_view *v = bch_view_cur(c);
	uint32_t sv = (uint32_t)((const struct bch_dirent *)bkey_val(sk))->inum;
	const struct bch_subvol_info *svi = bch_subvol_get(c, sv);
	struct btree_trans *t;
	uint64_t slot;
	int r;

	if (!svi)
		return bch_fs_err(c, -EIO, "a name of subvolume %u, which does not exist (run fsck)", sv);
	if (v->ro)
		return -EROFS;
	if ((r = dirent_new_slot(c, newdir, nd, newname, &slot)))
		return r;
	struct bch_subvolume nv = svi->v;
	nv.dir = newdir;
	nv.dir_offset = slot;
	if (olddir != newdir) {
		od->nlink--;
		nd->nlink++;
	}
	touch(od, true);
	touch(nd, true);
	if ((r = bch_trans_init(c, &t)))
		return r;
	struct bch_bkey *vk = bch_subvol_key(sv, &nv);
	r = bch_hash_delete_at(c, t, &dirent_desc, olddir, sk->p.offset, olddir == newdir ? slot : 0);
	if (!r)
		r = dirent_put(t, newdir, slot, newname, sv, BCH_DT_SUBVOL);
	if (!r)
		r = bch_trans_update(t, BCH_BTREE_ID_snapshots, vk);
	if (!r)
		r = ino_set_write(c, s, t);
	if (!r)
		r = subvol_commit(c, t);
	free(vk);
	bch_trans_exit(t);
	return r;
}

/*
 * RENAME_WHITEOUT: a character device 0/0 takes the old name (its dirent at
 * slot in dir) in transaction t.  (The caller's uid and gid own it.)
 */
static int whiteout_put(struct bch_fs *c, struct btree_trans *t, uint64_t dir, const struct bch_inode *di,
			uint64_t slot, const char *name, uid_t uid, gid_t gid)
{
	struct bch_inode wi;
	uint64_t inum;
	int r = bch_inode_alloc_num(c, &inum);

	if (r)
		return r;
	bch_inode_init(c, &wi, inum, S_IFCHR, uid, gid, 0, di);
	wi.flags = 0;		/* a whiteout inherits no file flag */
	wi.dir = dir;
	wi.dir_offset = slot;
	if (!(r = bch_inode_update(t, inum, &wi)))
		r = dirent_put(t, dir, slot, name, inum, DT_CHR);
	return r;
}

static int v_rename(struct bch_fs *c, uint64_t olddir, const char *oldname, uint64_t newdir,
		  const char *newname, unsigned flags, uid_t wuid, gid_t wgid)
{
	struct ino_set s = { 0 };
	struct bch_inode *od, *nd, *src, *dst = NULL;
	struct bch_bkey *sk = NULL, *dk = NULL;
	struct btree_trans *t = NULL;
	uint64_t src_inum, dst_inum = 0, new_slot;
	bool free_dst = false;
	int r;

	if ((flags & ~(BCH_RENAME_NOREPLACE | BCH_RENAME_EXCHANGE | BCH_RENAME_WHITEOUT)) ||
	    ((flags & BCH_RENAME_NOREPLACE) && (flags & BCH_RENAME_EXCHANGE)) ||
	    ((flags & BCH_RENAME_WHITEOUT) && (flags & BCH_RENAME_EXCHANGE)))
		return -EINVAL;
	if ((r = metadata_room(c)))
		return ret_errno(r);
	if (is_dot(oldname) || is_dot(newname))
		return -EINVAL;
	if ((r = check_name(oldname)) || (r = check_name(newname)))
		return r;
	if ((r = ino_get(c, &s, olddir, &od)) || (r = ino_get(c, &s, newdir, &nd)))
		return ret_errno(r);
	if (!S_ISDIR(od->mode) || !S_ISDIR(nd->mode))
		return -ENOTDIR;
	if ((r = dirent_lookup(c, olddir, od, oldname, &sk)))
		return ret_errno(r);
	src_inum = ((const struct bch_dirent *)bkey_val(sk))->inum;
	r = dirent_lookup(c, newdir, nd, newname, &dk);
	if (r && r != -ENOENT)
		goto out;
	if (dk)
		dst_inum = ((const struct bch_dirent *)bkey_val(dk))->inum;
	r = 0;
	if (dk && ((const struct bch_dirent *)bkey_val(dk))->d_type == BCH_DT_SUBVOL) {
		/* a subvolume goes with subvolume delete only */
		r = bch_fs_err(c, -EBUSY, "%s is a subvolume: it cannot be replaced", newname);
		goto out;
	}
	if (((const struct bch_dirent *)bkey_val(sk))->d_type == BCH_DT_SUBVOL) {
		if (flags & BCH_RENAME_WHITEOUT)
			r = -EINVAL;
		else if (dk)		/* a directory onto another name: as rename(2) wants */
			r = (flags & BCH_RENAME_EXCHANGE) ?
				bch_fs_err(c, -EBUSY, "exchanging a subvolume is not supported") :
				-EEXIST;
		else
			r = rename_subvol(c, &s, olddir, od, sk, newdir, nd, newname);
		goto out;
	}
	if ((flags & BCH_RENAME_NOREPLACE) && dk) {
		r = -EEXIST;
		goto out;
	}
	if (dk && dst_inum == src_inum)
		goto out;	/* both names are links to one inode: nothing to do */
	if ((flags & BCH_RENAME_EXCHANGE) && !dk) {
		r = -ENOENT;
		goto out;
	}
	if ((r = ino_get(c, &s, src_inum, &src)))
		goto out;
	if (dk && (r = ino_get(c, &s, dst_inum, &dst)))
		goto out;
	if ((r = flags_no_change(od)) || (r = flags_no_change(src)) ||
	    (r = dk ? flags_no_change(nd) : flags_dir_add(nd)) || (dst && (r = flags_no_change(dst))))
		goto out;
	/* re-fetch: ino_get may not move entries, but od/nd stay valid (fixed array) */

	/* a directory may not move inside itself */
	if (S_ISDIR(src->mode) && olddir != newdir) {
		r = is_inside(c, newdir, src_inum);
		if (r) {
			r = r > 0 ? -EINVAL : r;
			goto out;
		}
	}
	if ((flags & BCH_RENAME_EXCHANGE) && S_ISDIR(dst->mode) && olddir != newdir) {
		r = is_inside(c, olddir, dst_inum);
		if (r) {
			r = r > 0 ? -EINVAL : r;
			goto out;
		}
	}
	/* the target is an ancestor of the source: it cannot be empty */
	if (dst && S_ISDIR(dst->mode) && (r = is_inside(c, olddir, dst_inum))) {
		r = r > 0 ? ((flags & BCH_RENAME_EXCHANGE) ? -EINVAL : -ENOTEMPTY) : r;
		goto out;
	}
	if (dst && !(flags & BCH_RENAME_EXCHANGE)) {
		if (S_ISDIR(src->mode) && !S_ISDIR(dst->mode)) {
			r = -ENOTDIR;
			goto out;
		}
		if (!S_ISDIR(src->mode) && S_ISDIR(dst->mode)) {
			r = -EISDIR;
			goto out;
		}
		if (S_ISDIR(dst->mode) && (r = dir_is_empty(c, dst_inum)) <= 0) {
			r = r < 0 ? r : -ENOTEMPTY;
			goto out;
		}
	}

	if ((r = bch_trans_init(c, &t)))
		goto out;
	touch(od, true);
	touch(nd, true);
	touch(src, false);
	if (flags & BCH_RENAME_EXCHANGE) {
		r = dirent_put(t, olddir, sk->p.offset, oldname, dst_inum, bch_mode_to_dtype(dst->mode));
		if (!r)
			r = dirent_put(t, newdir, dk->p.offset, newname, src_inum, bch_mode_to_dtype(src->mode));
		touch(dst, false);
		if (S_ISDIR(src->mode) != S_ISDIR(dst->mode)) {
			/* a directory changed parents: move the subdirectory count */
			if (S_ISDIR(src->mode)) {
				od->nlink--;
				nd->nlink++;
			} else {
				nd->nlink--;
				od->nlink++;
			}
		}
		if (src->dir == olddir && src->dir_offset == sk->p.offset) {
			src->dir = newdir;
			src->dir_offset = dk->p.offset;
		}
		if (dst->dir == newdir && dst->dir_offset == dk->p.offset) {
			dst->dir = olddir;
			dst->dir_offset = sk->p.offset;
		}
	} else {
		new_slot = dk ? dk->p.offset : 0;
		if (!dk && (r = dirent_new_slot(c, newdir, nd, newname, &new_slot)))
			goto out;
		r = dirent_put(t, newdir, new_slot, newname, src_inum, bch_mode_to_dtype(src->mode));
		if (!r && (flags & BCH_RENAME_WHITEOUT))
			r = whiteout_put(c, t, olddir, od, sk->p.offset, oldname, wuid, wgid);
		else if (!r)
			r = bch_hash_delete_at(c, t, &dirent_desc, olddir, sk->p.offset,
					       olddir == newdir && !dk ? new_slot : 0);
		if (S_ISDIR(src->mode)) {
			od->nlink--;
			nd->nlink++;
		}
		if (dst) {
			touch(dst, false);
			if (S_ISDIR(dst->mode)) {
				nd->nlink--;
				dst->nlink = 0;
			} else {
				dst->nlink--;
			}
			if (!dst->nlink) {
				free_dst = true;
				dst->flags |= BCH_INODE_UNLINKED;
			} else if (dst->dir == newdir && dst->dir_offset == new_slot) {
				dst->dir = 0;
				dst->dir_offset = 0;
			}
		}
		if ((src->dir == olddir && src->dir_offset == sk->p.offset) || !src->dir ||
		    S_ISDIR(src->mode)) {
			src->dir = newdir;
			src->dir_offset = new_slot;
		}
	}
	if (!r)
		r = ino_set_write(c, &s, t);
	if (!r)
		r = commit(c, t, NULL);
	if (!r && free_dst && !c->defer_unlinked_free)
		r = inode_free(c, dst_inum);
out:
	if (t)
		bch_trans_exit(t);
	free(sk);
	free(dk);
	return ret_errno(r);
}

/* ------------------------------------------------------------------ data */

static ssize_t v_read(struct bch_fs *c, uint64_t inum, uint64_t offset, void *buf, size_t len)
{
	struct bch_inode i;
	int r = bch_inode_get(c, inum, &i);

	if (r)
		return ret_errno(r);
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
	return r ? ret_errno(r) : (ssize_t)len;
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
		touch(i, true);
		r = ino_set_write(c, s, t);
	}
	if (!r)
		r = commit(c, t, u);
	else
		bch_extent_update_abort(c, u);
	bch_trans_exit(t);
	bch_extent_update_exit(u);
	return r;
}

/*
 * Write [offset, offset + len) of one chunk (inside WRITE_CHUNK after block
 * alignment) in one transaction: whole blocks are rewritten, partial ones
 * read first.
 */
static int write_chunk(struct bch_fs *c, uint64_t inum, uint64_t offset, const void *data,
		       size_t len, uint64_t fill_to_size)
{
	struct ino_set s = { 0 };
	struct bch_inode *i;
	struct bch_extent_update u = { 0 };
	struct btree_trans *t;
	struct bch_io_opts o;
	uint64_t bs = block_bytes(c);
	uint64_t a = offset / bs * bs, b = (offset + len + bs - 1) / bs * bs;
	char *buf = NULL;	/* whole blocks, when data does not cover them */
	const char *src = data;
	int r;

	if ((r = ino_get(c, &s, inum, &i)))
		return r;
	if (!data || a != offset || b != offset + len) {
		buf = bch_dev_alloc_buf(b - a);
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
	r = write_commit(c, t, &u, &s, i, offset + len, fill_to_size, r);
out:
	free(buf);
	return r;
}

static ssize_t v_write(struct bch_fs *c, uint64_t inum, uint64_t offset, const void *buf, size_t len)
{
	struct bch_inode i;
	size_t done = 0;
	int r = bch_inode_get(c, inum, &i);

	if (r)
		return ret_errno(r);
	if (S_ISDIR(i.mode))
		return -EISDIR;
	if (!S_ISREG(i.mode))
		return -EINVAL;
	if ((r = flags_write(&i, offset)))
		return r;
	if (offset > MAX_FILE_SIZE || len > MAX_FILE_SIZE - offset)
		return -EFBIG;
	if (c->read_only)
		return -EROFS;
	/* fs_err.c: every later write fails, and none reaches the devices */
	if (c->emergency_ro)
		return ret_errno(-BCH_ERR_fs_emergency_ro);
	if ((r = metadata_room_for(c, true)))
		return ret_errno(r);
	while (done < len) {
		uint64_t pos = offset + done;
		size_t n = WRITE_CHUNK - pos % WRITE_CHUNK;
		if (n > len - done)
			n = len - done;
		r = write_chunk(c, inum, pos, (const char *)buf + done, n, 1);
		/* out of space: copygc or eviction may free some (copygc.h) */
		uint64_t room = 0;
		while (r && bch_err_class(r) == ENOSPC && bch_copygc_make_room(c, &room) > 0)
			r = write_chunk(c, inum, pos, (const char *)buf + done, n, 1);
		/* out of space: store as much as fits (halving, down to one block) */
		while (r && bch_err_class(r) == ENOSPC) {
			uint64_t bs = block_bytes(c), first = bs - pos % bs;
			size_t half = (pos + n / 2) / bs * bs - pos;
			if (n <= first)
				break;
			n = half > first && half < n ? half : first;
			c->err_msg[0] = 0;
			r = write_chunk(c, inum, pos, (const char *)buf + done, n, 1);
		}
		if (r)
			break;
		done += n;
	}
	if (r && !done)
		return ret_errno(r);
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
	uint64_t bs = block_bytes(c);
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
 * *keys, *len (NULL, 0 when they cannot be taken).
 */
static void rmw_keys(struct bch_fs *c, uint64_t inum, uint64_t offset, uint64_t len,
		     char **keys, size_t *keys_len)
{
	uint64_t bs = block_bytes(c), a = offset / bs * bs;
	uint64_t tail = (offset + len + bs - 1) / bs * bs - bs;

	*keys = NULL;
	*keys_len = 0;
	if (bch_data_keys_append(c, inum, a >> BCH_SECTOR_SHIFT, bs >> BCH_SECTOR_SHIFT, keys, keys_len) ||
	    (tail != a &&
	     bch_data_keys_append(c, inum, tail >> BCH_SECTOR_SHIFT, bs >> BCH_SECTOR_SHIFT, keys, keys_len))) {
		free(*keys);
		*keys = NULL;
		*keys_len = 0;
	}
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
	uint64_t bs = block_bytes(c), a = op->offset / bs * bs;
	uint64_t b = (op->offset + op->len + bs - 1) / bs * bs, end = op->offset + op->len;

	if (op->rmw_keys && size == op->rmw_size) {
		char *now;
		size_t now_len;
		rmw_keys(c, inum, op->offset, op->len, &now, &now_len);
		bool same = now && now_len == op->rmw_keys_len &&
			    !memcmp(now, op->rmw_keys, now_len);
		free(now);
		if (same)
			return true;
	}

	char *cur = bch_dev_alloc_buf(b - a);
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
	uint64_t offset = op->offset, len = op->len, bs = block_bytes(c);
	uint64_t a = offset / bs * bs, b = (offset + len + bs - 1) / bs * bs;
	const char *src = op->buf;
	int r = bch_inode_get(c, inum, &i);

	/*
	 * the checks of v_write(): a failure is its to report, before any
	 * data is written (a read-only snapshot is refused only at the commit)
	 */
	const struct bch_view *view = bch_view_cur(c);
	if (r || !S_ISREG(i.mode) || flags_write(&i, offset) || !len || offset > MAX_FILE_SIZE ||
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
		if (!(op->bounce = bch_dev_alloc_buf(b - a)))
			return -ENOMEM;
		if ((r = rmw_read(c, inum, i.size, offset, len, op->bounce)))
			goto err;
		rmw_keys(c, inum, offset, len, &op->rmw_keys, &op->rmw_keys_len);
		op->rmw_size = i.size;
		memcpy(op->bounce + (offset - a), op->buf, len);
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
	uint64_t bs = block_bytes(c);
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

	if (op->pl.inum != inum || ino_get(c, &s, inum, &i) || !S_ISREG(i->mode) ||
	    flags_write(i, op->offset) || c->read_only || bch_trans_init(c, &t))
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
		n = ret_errno(bch_fs_err(c, op->run_r, "writing data of inode %" PRIu64 ": %s",
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
static int punch_range(struct bch_fs *c, uint64_t inum, uint64_t start, uint64_t end,
		       uint64_t new_size, bool set_size)
{
	for (;;) {
		struct ino_set s = { 0 };
		struct bch_inode *i;
		struct bch_extent_update u = { 0 };
		struct btree_trans *t;
		uint64_t done_to;
		int r;

		if ((r = ino_get(c, &s, inum, &i)))
			return r;
		if ((r = bch_trans_init(c, &t)))
			return r;
		r = bch_extents_punch(c, t, inum, start, end, PUNCH_KEYS_PER_TRANS, &u, &done_to);
		if (!r) {
			i->sectors += u.i_sectors_delta;
			if (set_size)
				i->size = new_size;
			touch(i, true);
			r = ino_set_write(c, &s, t);
		}
		if (!r)
			r = commit(c, t, &u);
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
	uint64_t bs = block_bytes(c);
	int r = bch_inode_get(c, inum, &i);

	if (r)
		return ret_errno(r);
	if (S_ISDIR(i.mode))
		return -EISDIR;
	if (!S_ISREG(i.mode) && !S_ISLNK(i.mode))
		return -EINVAL;
	if ((r = flags_no_change(&i)))
		return r;
	if (size > MAX_FILE_SIZE)
		return -EFBIG;
	if (c->read_only)
		return -EROFS;
	if (size < i.size && size % bs &&
	    (r = zero_partial(c, inum, size, (size + bs - 1) / bs * bs)))
		return ret_errno(r);
	uint64_t keep = (size + bs - 1) / bs * (bs >> BCH_SECTOR_SHIFT);
	return ret_errno(punch_range(c, inum, keep, UINT64_MAX - 1, size, true));
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
	uint64_t bs = block_bytes(c);
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

	if (collapse && (r = punch_range(c, inum, s0, s0 + sl, 0, false)))
		return ret_errno(r);
	for (bool first = true;; first = false) {
		struct ino_set s = { 0 };
		struct bch_inode *ip;
		struct bch_extent_update u = { 0 };
		struct btree_trans *t;
		uint64_t next;

		if ((r = ino_get(c, &s, inum, &ip)) || (r = bch_trans_init(c, &t)))
			return ret_errno(r);
		if (!collapse && first) {
			/* a key across offset is split so the shift moves only what follows */
			r = bch_extents_split(c, t, inum, s0, &u);
			if (!r)
				r = commit(c, t, &u);
			if (!r) {
				ip->size += len;	/* room first: nothing lands past the end */
				touch(ip, true);
				r = ino_set_write(c, &s, t);
			}
		}
		if (!r)
			r = bch_extents_shift(c, t, inum, collapse ? s0 + sl : s0,
					      collapse ? -(int64_t)sl : (int64_t)sl,
					      PUNCH_KEYS_PER_TRANS, &next, &u);
		if (!r && collapse && next == UINT64_MAX) {
			ip->size -= len;
			touch(ip, true);
			r = ino_set_write(c, &s, t);
		}
		if (!r)
			r = commit(c, t, &u);
		bch_trans_exit(t);
		bch_extent_update_exit(&u);
		if (r)
			return ret_errno(r);
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
	uint64_t bs = block_bytes(c);
	int r = bch_inode_get(c, inum, &i);

	if (r)
		return ret_errno(r);
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
				r = punch_range(c, inum, a >> BCH_SECTOR_SHIFT, b >> BCH_SECTOR_SHIFT, 0, false);
		}
		if (r || (mode & FALLOC_FL_PUNCH_HOLE))
			return ret_errno(r);
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
	    (holes_total && ((r = metadata_room(c)) ||
			     (r = bch_alloc_user_check(c, holes_total * o.replicas, 0)))))
		return ret_errno(r);
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
		if (!err && !(err = ino_get(c, &s, inum, &ip)) && !(err = bch_trans_init(c, &t))) {
			for (unsigned h = 0; h < n && !err; h++)
				err = bch_extent_insert(t, holes[h], true, &u);
			if (!err) {
				ip->sectors += u.i_sectors_delta;
				touch(ip, true);	/* every fallocate, as file_modified() */
				err = ino_set_write(c, &s, t);
			}
			if (!err)
				err = commit(c, t, &u);
			bch_trans_exit(t);
		}
		for (unsigned h = 0; h < n; h++)
			free(holes[h]);
		bch_extent_update_exit(&u);
		if (err)
			return ret_errno(err);
	}
	if (!(mode & FALLOC_FL_KEEP_SIZE)) {
		struct bch_inode cur;
		if ((r = bch_inode_get(c, inum, &cur)))
			return ret_errno(r);
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
		return ret_errno(r);
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
	return err ? ret_errno(err) : (int64_t)pos;
}

int bch_fs_fsync(struct bch_fs *c)
{
	return ret_errno(bch_journal_flush(c));
}

/* -------------------------------------------------------------- setattr */

static int v_setattr(struct bch_fs *c, uint64_t inum, const struct bch_setattr *sa, struct stat *st)
{
	struct ino_set s = { 0 };
	struct bch_inode *i;
	int64_t now = bch_now_ns();
	int r;

	if (c->read_only)
		return -EROFS;
	/* the inode read once (not again for the flags, nor for the caller's stat) */
	if ((r = ino_get(c, &s, inum, &i)))
		return ret_errno(r);
	if ((r = flags_setattr(i, sa)))
		return r;
	if (sa->valid & BCH_SETATTR_SIZE) {
		s.nr = 0;	/* read again after the truncate */
		struct bch_inode cur;
		if ((r = bch_inode_get(c, inum, &cur)))
			return ret_errno(r);
		if (S_ISDIR(cur.mode))
			return -EISDIR;
		if (!S_ISREG(cur.mode))
			return -EINVAL;
		if (sa->size < cur.size) {
			if ((r = bch_fs_truncate(c, inum, sa->size)))
				return r;
		} else if (sa->size > MAX_FILE_SIZE) {
			return -EFBIG;
		}
	}
	if ((r = ino_get(c, &s, inum, &i)))
		return ret_errno(r);
	if (sa->valid & BCH_SETATTR_SIZE) {
		i->size = sa->size;
		i->mtime = now;
	}
	if (sa->valid & BCH_SETATTR_MODE)
		i->mode = (i->mode & S_IFMT) | (sa->mode & 07777);
	if (sa->valid & BCH_SETATTR_UID)
		i->uid = sa->uid;
	if (sa->valid & BCH_SETATTR_GID)
		i->gid = sa->gid;
	if (sa->valid & BCH_SETATTR_ATIME)
		i->atime = sa->atime == BCH_TIME_NOW ? now : sa->atime;
	if (sa->valid & BCH_SETATTR_MTIME)
		i->mtime = sa->mtime == BCH_TIME_NOW ? now : sa->mtime;
	if (sa->valid & BCH_SETATTR_BTIME)
		i->btime = sa->btime == BCH_TIME_NOW ? now : sa->btime;
	i->ctime = (sa->valid & BCH_SETATTR_CTIME) ? (sa->ctime == BCH_TIME_NOW ? now : sa->ctime) : now;
	if ((r = commit_inodes(c, &s)))
		return ret_errno(r);
	if (st)
		inode_stat(c, inum, i, st);
	return 0;
}

/* ------------------------------------------------------- set-id rules */

bool bch_caller_in_group(const struct bch_caller *cr, gid_t gid)
{
	if (cr->gid == gid)
		return true;
	for (size_t n = 0; n < cr->nr_groups; n++)
		if (cr->groups[n] == gid)
			return true;
	return false;
}

mode_t bch_mode_strip_sgid(mode_t dir_mode, gid_t dir_gid, const struct bch_caller *cr, mode_t mode)
{
	if ((mode & (S_ISGID | S_IXGRP)) != (S_ISGID | S_IXGRP))
		return mode;
	if (S_ISDIR(mode) || !(dir_mode & S_ISGID))
		return mode;
	if (cr->cap_fsetid || bch_caller_in_group(cr, dir_gid))
		return mode;
	return mode & ~S_ISGID;
}

void bch_inode_init_owner(mode_t dir_mode, gid_t dir_gid, mode_t *mode, gid_t *gid)
{
	if (!(dir_mode & S_ISGID))
		return;
	*gid = dir_gid;
	if (S_ISDIR(*mode))
		*mode |= S_ISGID;
}

mode_t bch_kill_priv_bits(mode_t mode, gid_t file_gid, const struct bch_caller *cr)
{
	mode_t kill = 0;

	if (!S_ISREG(mode) || cr->cap_fsetid)
		return 0;
	if (mode & S_ISUID)
		kill |= S_ISUID;
	if ((mode & S_ISGID) && ((mode & S_IXGRP) || !bch_caller_in_group(cr, file_gid)))
		kill |= S_ISGID;
	return kill;
}

static int v_kill_priv(struct bch_fs *c, uint64_t inum, const struct bch_caller *cr)
{
	struct ino_set s = { 0 };
	struct bch_inode *i;
	int r;

	if ((r = ino_get(c, &s, inum, &i)))
		return ret_errno(r);
	mode_t kill = bch_kill_priv_bits(i->mode, i->gid, cr);
	if (!kill)
		return 0;
	if (c->read_only)
		return -EROFS;
	i->mode &= ~kill;
	i->ctime = bch_now_ns();
	r = commit_inodes(c, &s);
	return r ? ret_errno(r) : (int)kill;
}

/* -------------------------------------------------------------- readdir */

struct dirent_copy {
	uint64_t	pos, inum;
	unsigned	d_type, len;
	char		name[BCH_NAME_MAX + 1];
};

/* ------------------------------------------------------------ file flags */

static int v_get_flags(struct bch_fs *c, uint64_t inum, unsigned *fs_flags, uint32_t *project)
{
	struct bch_inode i;
	int r = bch_inode_get(c, inum, &i);

	if (r)
		return ret_errno(r);
	*fs_flags = bch_inode_flags_to_fs(i.flags);
	*project = i.project;
	return 0;
}

/* The superblock says inodes may hold file flags before the first one does. */
static int flags_feature_enable(struct bch_fs *c)
{
	if (c->sb->features & BCH_FEATURE_INODE_FLAGS)
		return 0;
	c->sb->features |= BCH_FEATURE_INODE_FLAGS;
	int r = bch_write_super(c);
	if (r)
		c->sb->features &= ~BCH_FEATURE_INODE_FLAGS;
	return r;
}

/* fileattr_set_prepare(): who may change what */
static int flags_may_set(const struct bch_inode *i, uint32_t flags, const struct bch_caller *cr)
{
	if (!cr)
		return 0;
	if (cr->uid != i->uid && !cr->cap_fowner)
		return -EPERM;
	if (((i->flags ^ flags) & FLAGS_FROZEN) && !cr->cap_linux_immutable)
		return -EPERM;
	return 0;
}

static int v_set_flags(struct bch_fs *c, uint64_t inum, unsigned fs_flags, uint32_t project,
		       const struct bch_caller *cr)
{
	struct ino_set s = { 0 };
	struct bch_inode *i;
	uint32_t flags;
	int r;

	if ((r = ino_get(c, &s, inum, &i)))
		return ret_errno(r);
	if ((r = bch_inode_flags_from_fs(fs_flags, &flags)) || (r = flags_may_set(i, flags, cr)))
		return r;
	if ((i->flags & BCH_INODE_FILE_FLAGS) == flags && i->project == project)
		return 0;
	if (c->read_only)
		return -EROFS;
	if ((flags || project) && (r = flags_feature_enable(c)))
		return ret_errno(r);
	i->flags = (i->flags & ~BCH_INODE_FILE_FLAGS) | flags;
	i->project = project;
	touch(i, false);
	return ret_errno(commit_inodes(c, &s));
}

static int v_readdir(struct bch_fs *c, uint64_t dir, uint64_t pos, bch_readdir_fn fn, void *priv)
{
	struct bch_inode di;
	int r = bch_inode_get(c, dir, &di);

	if (r)
		return ret_errno(r);
	if (!S_ISDIR(di.mode))
		return -ENOTDIR;
	if (pos == 0 && (r = fn(priv, ".", 1, bch_view_handle(c, dir), DT_DIR, 1)))
		return r;
	if (pos <= 1 && (r = fn(priv, "..", 2, parent_handle(c, dir, &di), DT_DIR, BCH_HASH_MIN)))
		return r;
	if (pos < BCH_HASH_MIN)
		pos = BCH_HASH_MIN;

	/* in batches, so the callback may change the tree */
	enum { BATCH = 64 };
	struct dirent_copy *batch = malloc(BATCH * sizeof(*batch));
	if (!batch)
		return -ENOMEM;
	for (;;) {
		struct bch_viter it;
		const struct bch_bkey *k;
		unsigned n = 0;
		int err = 0;

		bch_viter_init(&it, c, BCH_BTREE_ID_dirents, POS(dir, pos, 0), POS(dir, BCH_HASH_MAX, 0));
		while (n < BATCH && (k = bch_viter_next(&it, &err))) {
			if (k->type != BCH_BKEY_dirent)
				continue;
			const struct bch_dirent *d = bkey_val(k);
			batch[n].pos = k->p.offset;
			batch[n].inum = dirent_target(c, dir, k, &batch[n].d_type);
			if (!batch[n].inum)
				continue;	/* not shown: see dirent_target() */
			batch[n].len = d->name_len;
			memcpy(batch[n].name, d->name, d->name_len);
			batch[n].name[d->name_len] = 0;
			n++;
		}
		bch_viter_exit(&it);
		if (err) {
			r = ret_errno(err);
			break;
		}
		for (unsigned j = 0; j < n && !r; j++)
			r = fn(priv, batch[j].name, batch[j].len, batch[j].inum, batch[j].d_type,
			       batch[j].pos + 1);
		if (r || n < BATCH)
			break;
		pos = batch[n - 1].pos + 1;
	}
	free(batch);
	return r;
}

/* ------------------------------------------------------ per-file options */

/*
 * The options a file or directory carries in its inode (value + 1, 0:
 * inherit the filesystem's), seen as xattrs "bcachefs.<option>": they are
 * not kept in the xattrs btree.  Only regular files and directories take
 * them (a directory's are copied into the children made in it later:
 * bch_inode_init); removing one makes the inode inherit again.
 */
#define INODE_OPT_PREFIX	"bcachefs."

/* The option id of a per-file option's name ("background_target"), or -1. */
static int inode_opt_lookup(const char *name)
{
	for (unsigned i = 0; i < bch_inode_opts_nr; i++)
		if (!strcmp(name, bch_opt_table[bch_inode_opts[i]].name))
			return bch_inode_opts[i];
	return -1;
}

/*
 * Parse a value of option id: targets by label or device index (and "dev N",
 * as they are shown), the others with the option table.  -EINVAL with the
 * reason in c->err_msg.
 */
static int inode_opt_parse(struct bch_fs *c, enum bch_opt_id id, const char *val, uint64_t *v)
{
	const char *name = bch_opt_table[id].name;
	char err[128];

	if (bch_opt_table[id].type == BCH_OPT_TARGET) {
		const char *t = strncmp(val, "dev ", 4) ? val : val + 4;
		if (bch_target_parse(c->sb, t, v))
			return bch_fs_err(c, -EINVAL, INODE_OPT_PREFIX "%s: '%s' is neither a label "
					  "nor a device index of this filesystem", name, val);
		return 0;
	}
	if (bch_opt_parse(id, val, v, err, sizeof(err)))
		return bch_fs_err(c, -EINVAL, INODE_OPT_PREFIX "%s", err);
	return 0;
}

static void inode_opt_to_text(struct bch_fs *c, enum bch_opt_id id, uint64_t v, char *buf, size_t len)
{
	if (bch_opt_table[id].type == BCH_OPT_TARGET)
		bch_target_to_text(c->sb, v, buf, len);
	else
		bch_opt_to_text(id, v, buf, len);
}

/*
 * Rebalance looks at a file's extents again when the options it acts on
 * change (a work key from its first sector, rebalance.h).  A directory's
 * change reaches only the files made in it later, which get their work
 * recorded when they are written.
 */
static bool inode_opt_needs_rebalance(const struct bch_inode *i, enum bch_opt_id id)
{
	return S_ISREG(i->mode) &&
	       (id == Opt_background_target || id == Opt_background_compression);
}

/*
 * Set (value) or clear (NULL) option id of inum in one inode update, with
 * the XATTR_CREATE / XATTR_REPLACE rules of setxattr (clear: flags 0, and
 * -ENODATA when must_exist and the option is not set).
 */
static int inode_opt_set(struct bch_fs *c, uint64_t inum, enum bch_opt_id id, const char *value,
			 int flags, bool must_exist)
{
	struct ino_set s = { 0 };
	struct bch_inode *i;
	uint64_t v = 0;
	int r;

	if (value && (r = inode_opt_parse(c, id, value, &v)))
		return r;
	if ((r = ino_get(c, &s, inum, &i)))
		return ret_errno(r);
	if (value && !S_ISREG(i->mode) && !S_ISDIR(i->mode))
		return bch_fs_err(c, -EINVAL, "inode %" PRIu64 ": " INODE_OPT_PREFIX "%s: only "
				  "regular files and directories take file options",
				  inum, bch_opt_table[id].name);
	unsigned old = bch_inode_opt_raw(i, id);
	if ((flags & XATTR_CREATE) && old)
		return -EEXIST;
	if (((flags & XATTR_REPLACE) || must_exist) && !old)
		return -ENODATA;
	/* last: a read-only open tells a caller that everything else passed */
	if (c->read_only)
		return -EROFS;
	if ((r = metadata_room(c)))
		return ret_errno(r);
	unsigned raw = value ? v + 1 : 0;
	if (raw && (r = bch_inode_feature_enable(c, bch_inode_opt_feature(id))))
		return ret_errno(r);
	bch_inode_opt_raw_set(i, id, raw);
	touch(i, false);
	struct btree_trans *t;
	if ((r = bch_trans_init(c, &t)))
		return ret_errno(r);
	r = ino_set_write(c, &s, t);
	/* the work key with the option: no crash leaves the file's data unscheduled */
	if (!r && raw != old && inode_opt_needs_rebalance(i, id))
		r = bch_rebalance_work_set(c, t, inum, 0);
	if (!r)
		r = commit(c, t, NULL);
	bch_trans_exit(t);
	if (!r && raw != old && id == Opt_erasure_code)
		bch_rebalance_kick(c);	/* the stripe builder looks again (ec.h) */
	return ret_errno(r);
}

bool bch_fs_is_inode_opt(const char *name)
{
	return inode_opt_lookup(name) >= 0;
}

static int v_set_inode_opt(struct bch_fs *c, uint64_t inum, const char *opt, const char *value)
{
	int id = inode_opt_lookup(opt);

	if (id < 0)
		return bch_fs_err(c, -EINVAL, "%s: not a per-file option", opt);
	int r = flags_no_change_inum(c, inum);
	return r ? r : inode_opt_set(c, inum, id, value, 0, false);
}

/* "bcachefs.<option>" (name past the prefix) as getxattr. */
static ssize_t inode_opt_xattr_get(struct bch_fs *c, uint64_t inum, const char *name, void *buf,
				   size_t size)
{
	struct bch_inode i;
	char text[128];
	int id = inode_opt_lookup(name), r;

	if (id < 0)
		return -ENODATA;
	if ((r = bch_inode_get(c, inum, &i)))
		return ret_errno(r);
	unsigned raw = bch_inode_opt_raw(&i, id);
	if (!raw)
		return -ENODATA;
	inode_opt_to_text(c, id, raw - 1, text, sizeof(text));
	size_t len = strlen(text);
	if (size && len > size)
		return -ERANGE;
	if (size)
		memcpy(buf, text, len);
	return len;
}

/* "bcachefs.<option>" as setxattr: the value is text, as getxattr gives it. */
static int inode_opt_xattr_set(struct bch_fs *c, uint64_t inum, const char *name, const void *val,
			       size_t size, int flags)
{
	char text[128];
	int id = inode_opt_lookup(name);

	if (id < 0)
		return bch_fs_err(c, -EINVAL, INODE_OPT_PREFIX "%s: not a file option (they are "
				  "foreground_target, background_target, promote_target, compression, "
				  "background_compression, data_checksum, data_replicas, erasure_code)", name);
	if (size >= sizeof(text) || memchr(val, 0, size))
		return bch_fs_err(c, -EINVAL, INODE_OPT_PREFIX "%s: not a value of the option", name);
	memcpy(text, val, size);
	text[size] = 0;
	return inode_opt_set(c, inum, id, text, flags, false);
}

/* Append the names of inode's set options to a listxattr buffer at *total. */
static int inode_opt_xattr_list(const struct bch_inode *i, char *buf, size_t size, size_t *total)
{
	for (unsigned n = 0; n < bch_inode_opts_nr; n++) {
		if (!bch_inode_opt_raw(i, bch_inode_opts[n]))
			continue;
		const char *name = bch_opt_table[bch_inode_opts[n]].name;
		size_t pl = strlen(INODE_OPT_PREFIX), need = pl + strlen(name) + 1;
		if (size) {
			if (*total + need > size)
				return -ERANGE;
			memcpy(buf + *total, INODE_OPT_PREFIX, pl);
			memcpy(buf + *total + pl, name, need - pl);
		}
		*total += need;
	}
	return 0;
}

/* ---------------------------------------------------------------- xattrs */

struct xattr_key {
	unsigned	ns;
	const char	*name;
	size_t		len;
};

static const struct {
	const char	*prefix;
	unsigned	ns;
	bool		whole;	/* the prefix is the whole name */
} xattr_prefixes[] = {
#define x(n, id, prefix)	{ prefix, id, id >= BCH_XATTR_posix_acl_access },
	BCH_XATTR_NAMESPACES()
#undef x
};

static int xattr_parse(const char *name, struct xattr_key *k)
{
	for (unsigned i = 0; i < sizeof(xattr_prefixes) / sizeof(xattr_prefixes[0]); i++) {
		size_t pl = strlen(xattr_prefixes[i].prefix);
		if (xattr_prefixes[i].whole ? strcmp(name, xattr_prefixes[i].prefix)
					    : strncmp(name, xattr_prefixes[i].prefix, pl))
			continue;
		k->ns = xattr_prefixes[i].ns;
		k->name = name + pl;
		k->len = strlen(k->name);
		if (!xattr_prefixes[i].whole && !k->len)
			return -EINVAL;
		if (strlen(name) > 255)
			return -ERANGE;
		return 0;
	}
	return -EOPNOTSUPP;
}

static bool xattr_match(const struct bch_bkey *k, const void *key)
{
	const struct bch_xattr *x = bkey_val(k);
	const struct xattr_key *xk = key;

	return x->ns == xk->ns && x->name_len == xk->len && !memcmp(x->data, xk->name, xk->len);
}

static const struct bch_hash_desc xattr_desc = {
	.btree_id	= BCH_BTREE_ID_xattrs,
	.key_type	= BCH_BKEY_xattr,
	.match		= xattr_match,
};

static uint64_t xattr_hash(struct bch_fs *c, const struct bch_inode *i, const struct xattr_key *k)
{
	char buf[1 + 256];

	buf[0] = k->ns;
	memcpy(buf + 1, k->name, k->len);
	return bch_hash_slot(bch_str_hash(c->sb->str_hash_key, i->hash_seed, buf, 1 + k->len));
}

/*
 * Values (bcachefs_format.h): name and value together up to XATTR_INLINE_MAX
 * bytes stay in the xattr key; a longer value goes into xattr_piece keys
 * under an id of its own.  A change is written as: the new pieces, then the
 * xattr key with the inode, then the deletion of the old pieces.  These are
 * packed into as few transactions as the node and journal sizes allow: with
 * the default 256 KiB nodes a 64 KiB value is one transaction; with small
 * nodes a crash in between leaves pieces no xattr key names, which fsck
 * removes (xattr_piece_orphan), and never a value made of two versions.
 */
#define XATTR_INLINE_MAX	BCH_XATTR_PIECE_BYTES
#define XATTR_INODE_U64S	64	/* room for the inode key in a batch */

static uint64_t piece_pos_end(uint32_t id)
{
	return BCH_XATTR_PIECE_POS(id, 127);
}

/*
 * Keys committed in order in as few transactions as fit: a transaction's
 * keys must fit half a node (bch_trans_max_u64s()) and an open journal
 * entry, which is half a bucket less a quarter kept for internal use.
 */
struct xbatch {
	struct bch_fs		*c;
	struct btree_trans	*t;
	size_t			used, max;
};

static int xbatch_init(struct bch_fs *c, struct xbatch *b)
{
	b->c = c;
	b->used = 0;
	b->max = bch_trans_max_u64s(c) * 5 / 8;
	return bch_trans_init(c, &b->t);
}

/* Make room for u64s more words, committing what is queued if need be. */
static int xbatch_room(struct xbatch *b, size_t u64s)
{
	if (b->used && b->used + u64s > b->max) {
		int r = commit(b->c, b->t, NULL);
		if (r)
			return r;
		b->used = 0;
	}
	b->used += u64s;
	return 0;
}

static int xbatch_add(struct xbatch *b, struct bch_bkey *k)
{
	int r = xbatch_room(b, 1 + k->u64s);

	if (!r)
		r = bch_trans_update(b->t, BCH_BTREE_ID_xattrs, k);
	free(k);
	return r;
}

/* Queue the deletion of the pieces of a value (last first). */
static int xattr_pieces_delete(struct xbatch *b, uint64_t inum, uint32_t pieces)
{
	int r = 0;

	for (unsigned n = BCH_XATTR_PIECES_NR(pieces); n-- && !r; )
		r = xbatch_add(b, bch_bkey_alloc(BCH_BKEY_deleted,
			POS(inum, BCH_XATTR_PIECE_POS(BCH_XATTR_PIECES_ID(pieces), n), 0), 0));
	return r;
}

/* An id no piece of inum uses: from one derived from the slot, upwards. */
static int xattr_id_alloc(struct bch_fs *c, uint64_t inum, uint64_t slot, uint32_t *id)
{
	for (uint32_t n = 0; n <= BCH_XATTR_ID_MAX; n++) {
		uint32_t cand = (uint32_t)(slot + n) & BCH_XATTR_ID_MAX;
		struct bch_bkey *k;
		int r = bch_vpeek(c, BCH_BTREE_ID_xattrs, POS(inum, BCH_XATTR_PIECE_POS(cand, 0), 0),
				       POS(inum, piece_pos_end(cand), 0), &k);
		if (r == -BCH_ERR_key_not_found) {
			*id = cand;
			return 0;
		}
		if (r)
			return r;
		free(k);
	}
	return -ENOSPC;
}

/*
 * Read the value kept in pieces into buf (when size is not 0): its length,
 * -ERANGE when it is longer than size, -EIO when a piece is missing or of
 * the wrong length (fsck: xattr_piece_missing).
 */
static ssize_t xattr_pieces_read(struct bch_fs *c, uint64_t inum, uint32_t pieces, void *buf,
				 size_t size)
{
	uint32_t id = BCH_XATTR_PIECES_ID(pieces);
	unsigned nr = BCH_XATTR_PIECES_NR(pieces), next = 0;
	struct bch_viter it;
	const struct bch_bkey *k;
	size_t total = 0;
	int err = 0;

	bch_viter_init(&it, c, BCH_BTREE_ID_xattrs, POS(inum, BCH_XATTR_PIECE_POS(id, 0), 0),
			    POS(inum, piece_pos_end(id), 0));
	while ((k = bch_viter_next(&it, &err))) {
		if (k->type != BCH_BKEY_xattr_piece)
			continue;
		const struct bch_xattr_piece *p = bkey_val(k);
		unsigned n = BCH_XATTR_PIECE_POS_N(k->p.offset);
		if (n != next++ || n >= nr ||
		    (n + 1 < nr ? p->len != BCH_XATTR_PIECE_BYTES : !p->len)) {
			err = -EIO;
			break;
		}
		if (size && total + p->len <= size)
			memcpy((char *)buf + total, p->data, p->len);
		total += p->len;
	}
	bch_viter_exit(&it);
	if (!err && next != nr)
		err = -EIO;
	if (err)
		return err == -EIO ? bch_fs_err(c, -EIO, "inode %" PRIu64 ": xattr value id %u: "
						"piece %u of %u missing or damaged", inum, id, next, nr)
				   : err;
	if (size && total > size)
		return -ERANGE;
	return (ssize_t)total;
}

static bool is_inode_opt_xattr(const char *name)
{
	return !strncmp(name, INODE_OPT_PREFIX, strlen(INODE_OPT_PREFIX));
}

static ssize_t v_getxattr(struct bch_fs *c, uint64_t inum, const char *name, void *buf, size_t size)
{
	struct bch_inode i;
	struct xattr_key xk;
	struct bch_bkey *k;

	if (is_inode_opt_xattr(name))
		return inode_opt_xattr_get(c, inum, name + strlen(INODE_OPT_PREFIX), buf, size);
	if (bch_xattr_is_effective(name))
		return bch_xattr_effective_get(c, inum, name, buf, size);
	int r = xattr_parse(name, &xk);
	if (r)
		return r == -EOPNOTSUPP ? -ENODATA : r;
	if ((r = bch_inode_get(c, inum, &i)))
		return ret_errno(r);
	r = bch_hash_lookup(c, &xattr_desc, inum, xattr_hash(c, &i, &xk), &xk, &k);
	if (r)
		return r == -ENOENT ? -ENODATA : ret_errno(r);
	const struct bch_xattr *x = bkey_val(k);
	ssize_t len = x->val_len;
	if (x->pieces)
		len = xattr_pieces_read(c, inum, x->pieces, buf, size);
	else if (size && (size_t)len > size)
		len = -ERANGE;
	else if (size)
		memcpy(buf, x->data + x->name_len, len);
	free(k);
	return len < 0 ? ret_errno((int)len) : len;
}

/* The pieces field of the xattr at slot, 0 when there is none or it is inline. */
static int xattr_pieces_at(struct bch_fs *c, uint64_t inum, uint64_t slot, uint32_t *pieces)
{
	struct bch_bkey *k;
	int r = bch_vlookup(c, BCH_BTREE_ID_xattrs, POS(inum, slot, 0), &k);

	*pieces = 0;
	if (r == -BCH_ERR_key_not_found)
		return 0;
	if (r)
		return r;
	if (k->type == BCH_BKEY_xattr)
		*pieces = ((const struct bch_xattr *)bkey_val(k))->pieces;
	free(k);
	return 0;
}

/* mode (not NULL): the inode's permission bits change in the same transaction (ACLs) */
static int xattr_set(struct bch_fs *c, uint64_t inum, const char *name, const void *val,
		     size_t size, int flags, const mode_t *mode)
{
	struct ino_set s = { 0 };
	struct bch_inode *i;
	struct xattr_key xk;
	struct xbatch b;
	uint64_t slot;
	uint32_t old = 0, pieces = 0;
	bool exists;

	if (is_inode_opt_xattr(name))
		return inode_opt_xattr_set(c, inum, name + strlen(INODE_OPT_PREFIX), val, size, flags);
	if (bch_xattr_is_effective(name))
		return bch_xattr_effective_set(c, name);
	int r = xattr_parse(name, &xk);
	if (r)
		return r;
	if (size > BCH_XATTR_SIZE_MAX)
		return -E2BIG;
	if (c->read_only)
		return -EROFS;
	if ((r = metadata_room(c)))
		return ret_errno(r);
	if ((r = ino_get(c, &s, inum, &i)))
		return ret_errno(r);
	if ((r = bch_hash_find_slot(c, &xattr_desc, inum, xattr_hash(c, i, &xk), &xk, &slot, &exists)))
		return ret_errno(r);
	if ((flags & XATTR_CREATE) && exists)
		return -EEXIST;
	if ((flags & XATTR_REPLACE) && !exists)
		return -ENODATA;
	if (exists && (r = xattr_pieces_at(c, inum, slot, &old)))
		return ret_errno(r);
	bool split = xk.len + size > XATTR_INLINE_MAX;
	if (split) {
		uint32_t id = 0;
		if ((r = xattr_id_alloc(c, inum, slot, &id)))
			return ret_errno(r);
		pieces = BCH_XATTR_PIECES(id, (size + BCH_XATTR_PIECE_BYTES - 1) / BCH_XATTR_PIECE_BYTES);
	}
	struct bch_bkey *k = bch_bkey_alloc(BCH_BKEY_xattr, POS(inum, slot, 0),
					    sizeof(struct bch_xattr) + xk.len + (split ? 0 : size));
	struct bch_xattr *x = bkey_val(k);
	x->ns = xk.ns;
	x->name_len = xk.len;
	x->val_len = split ? 0 : size;
	x->pieces = pieces;
	memcpy(x->data, xk.name, xk.len);
	if (size && !split)
		memcpy(x->data + xk.len, val, size);
	touch(i, false);
	if (mode)
		i->mode = (i->mode & S_IFMT) | (*mode & 07777);
	if ((r = xbatch_init(c, &b))) {
		free(k);
		return ret_errno(r);
	}
	for (unsigned n = 0; n < BCH_XATTR_PIECES_NR(pieces) && !r; n++) {
		size_t off = (size_t)n * BCH_XATTR_PIECE_BYTES;
		size_t len = size - off < BCH_XATTR_PIECE_BYTES ? size - off : BCH_XATTR_PIECE_BYTES;
		struct bch_bkey *pk = bch_bkey_alloc(BCH_BKEY_xattr_piece,
			POS(inum, BCH_XATTR_PIECE_POS(BCH_XATTR_PIECES_ID(pieces), n), 0),
			sizeof(struct bch_xattr_piece) + len);
		struct bch_xattr_piece *p = bkey_val(pk);
		p->len = len;
		memcpy(p->data, (const char *)val + off, len);
		r = xbatch_add(&b, pk);
	}
	/* the xattr key and the inode in one transaction */
	if (!r)
		r = xbatch_room(&b, 1 + k->u64s + XATTR_INODE_U64S);
	if (!r)
		r = bch_trans_update(b.t, BCH_BTREE_ID_xattrs, k);
	if (!r)
		r = ino_set_write(c, &s, b.t);
	if (!r)
		r = xattr_pieces_delete(&b, inum, old);
	if (!r)
		r = commit(c, b.t, NULL);
	bch_trans_exit(b.t);
	free(k);
	return ret_errno(r);
}

static int v_setxattr(struct bch_fs *c, uint64_t inum, const char *name, const void *val,
		      size_t size, int flags)
{
	int r = flags_no_change_inum(c, inum);

	return r ? r : xattr_set(c, inum, name, val, size, flags, NULL);
}

static ssize_t v_listxattr(struct bch_fs *c, uint64_t inum, char *buf, size_t size)
{
	struct bch_inode i;
	struct bch_viter it;
	const struct bch_bkey *k;
	size_t total = 0;
	int err = 0, r = bch_inode_get(c, inum, &i);

	if (r)
		return ret_errno(r);
	/* names only: the pieces, above the hash range, are not visited */
	bch_viter_init(&it, c, BCH_BTREE_ID_xattrs, POS(inum, 0, 0), POS(inum, BCH_HASH_MAX, 0));
	while ((k = bch_viter_next(&it, &err))) {
		if (k->type != BCH_BKEY_xattr)
			continue;
		const struct bch_xattr *x = bkey_val(k);
		const char *prefix = xattr_prefixes[x->ns - 1].prefix;
		size_t pl = strlen(prefix), need = pl + x->name_len + 1;
		if (size) {
			if (total + need > size) {
				total = (size_t)-ERANGE;
				break;
			}
			memcpy(buf + total, prefix, pl);
			memcpy(buf + total + pl, x->data, x->name_len);
			buf[total + need - 1] = 0;
		}
		total += need;
	}
	bch_viter_exit(&it);
	if (err)
		return ret_errno(err);
	if (total == (size_t)-ERANGE || (err = inode_opt_xattr_list(&i, buf, size, &total)) ||
	    (err = bch_xattr_effective_list(&i, buf, size, &total)))
		return -ERANGE;
	return (ssize_t)total;
}

static int xattr_remove(struct bch_fs *c, uint64_t inum, const char *name, const mode_t *mode)
{
	struct ino_set s = { 0 };
	struct bch_inode *i;
	struct xattr_key xk;
	struct bch_bkey *k;
	struct xbatch b;

	if (is_inode_opt_xattr(name)) {
		int id = inode_opt_lookup(name + strlen(INODE_OPT_PREFIX));
		return id < 0 ? -ENODATA : inode_opt_set(c, inum, id, NULL, 0, true);
	}
	if (bch_xattr_is_effective(name))
		return bch_xattr_effective_set(c, name);
	int r = xattr_parse(name, &xk);
	if (r)
		return r == -EOPNOTSUPP ? -ENODATA : r;
	if (c->read_only)
		return -EROFS;
	if ((r = ino_get(c, &s, inum, &i)))
		return ret_errno(r);
	r = bch_hash_lookup(c, &xattr_desc, inum, xattr_hash(c, i, &xk), &xk, &k);
	if (r)
		return r == -ENOENT ? -ENODATA : ret_errno(r);
	uint64_t slot = k->p.offset;
	uint32_t pieces = ((const struct bch_xattr *)bkey_val(k))->pieces;
	free(k);
	touch(i, false);
	if (mode)
		i->mode = (i->mode & S_IFMT) | (*mode & 07777);
	if ((r = xbatch_init(c, &b)))
		return ret_errno(r);
	/* the name first: a crash after it leaves pieces fsck removes */
	r = xbatch_room(&b, 2 * (1 + BCH_BKEY_U64s) + XATTR_INODE_U64S);
	if (!r)
		r = bch_hash_delete_at(c, b.t, &xattr_desc, inum, slot, 0);
	if (!r)
		r = ino_set_write(c, &s, b.t);
	if (!r)
		r = xattr_pieces_delete(&b, inum, pieces);
	if (!r)
		r = commit(c, b.t, NULL);
	bch_trans_exit(b.t);
	return ret_errno(r);
}

static int v_removexattr(struct bch_fs *c, uint64_t inum, const char *name)
{
	int r = flags_no_change_inum(c, inum);

	return r ? r : xattr_remove(c, inum, name, NULL);
}

static int v_set_acl(struct bch_fs *c, uint64_t inum, const void *acl, size_t size, mode_t mode)
{
	const char *name = "system.posix_acl_access";
	int r = flags_no_change_inum(c, inum);

	if (r)
		return r;
	if (acl)
		return xattr_set(c, inum, name, acl, size, 0, &mode);
	r = xattr_remove(c, inum, name, &mode);
	if (r != -ENODATA)
		return r;
	struct bch_setattr sa = { .valid = BCH_SETATTR_MODE, .mode = mode };
	return bch_fs_setattr(c, inum, &sa);
}

/* ---------------------------------------------------------------- misc */

int bch_fs_statfs(struct bch_fs *c, struct statvfs *st)
{
	uint64_t bs = block_bytes(c);
	struct bch_fs_space sp;

	/* df's Size, Used and Avail are fs usage's size, used and available (alloc.h) */
	memset(st, 0, sizeof(*st));
	bch_fs_space(c, &sp);
	st->f_bsize = bs;
	st->f_frsize = bs;
	st->f_blocks = sp.size / bs;
	st->f_bfree = sp.free / bs;
	st->f_bavail = sp.available / bs;
	st->f_files = c->opts.v[Opt_inodes_32bit] ? UINT32_MAX : (1ULL << 40);
	st->f_ffree = st->f_files - (c->inum_next > BCH_FIRST_INO ? c->inum_next - BCH_FIRST_INO : 0);
	st->f_favail = st->f_ffree;
	st->f_namemax = BCH_NAME_MAX;
	st->f_fsid = 0;
	memcpy(&st->f_fsid, c->sb->user_uuid, sizeof(st->f_fsid) < 8 ? sizeof(st->f_fsid) : 8);
	if (c->read_only)
		st->f_flag |= ST_RDONLY;
	return 0;
}

int bch_fs_create_root(struct bch_fs *c, mode_t root_mode, uid_t uid, gid_t gid)
{
	struct bch_inode root;
	struct btree_trans *t;
	int r;

	bch_inode_init(c, &root, BCH_ROOT_INO, S_IFDIR | (root_mode & 07777), uid, gid, 0, NULL);
	c->inum_next = BCH_ROOT_INO + 1;
	if ((r = bch_trans_init(c, &t)))
		return ret_errno(r);
	r = bch_inode_update(t, BCH_ROOT_INO, &root);
	if (!r)
		r = commit(c, t, NULL);
	bch_trans_exit(t);
	if (r)
		return ret_errno(r);
	return bch_fs_create(c, BCH_ROOT_INO, "lost+found", S_IFDIR | 0700, 0, 0, 0, NULL);
}

int bch_fs_lookup_path(struct bch_fs *c, const char *path, bool follow_last, uint64_t *inum)
{
	return bch_fs_lookup_path_at(c, BCH_ROOT_INO, path, follow_last, inum);
}

int bch_fs_lookup_path_at(struct bch_fs *c, uint64_t start, const char *path, bool follow_last,
			  uint64_t *inum)
{
	char *work = strdup(path), *save = NULL, *name;
	uint64_t cur = path[0] == '/' ? BCH_ROOT_INO : start;
	unsigned links = 0;
	int r = 0;

	if (!work)
		return -ENOMEM;
	/* components are resolved one by one; a symlink's target is spliced in */
	char *rest = work;
	while (!r) {
		while (*rest == '/')
			rest++;
		if (!*rest)
			break;
		name = rest;
		char *slash = strchr(rest, '/');
		if (slash) {
			*slash = 0;
			rest = slash + 1;
		} else {
			rest += strlen(rest);
		}
		bool last = !slash || !*rest || strspn(rest, "/") == strlen(rest);
		uint64_t next;
		if ((r = bch_fs_lookup(c, cur, name, &next)))
			break;
		struct stat st;
		if ((r = bch_fs_getattr(c, next, &st)))
			break;
		if (S_ISLNK(st.st_mode) && (!last || follow_last)) {
			char target[4096];
			if (++links > 40) {
				r = -ELOOP;
				break;
			}
			ssize_t n = bch_fs_readlink(c, next, target, sizeof(target));
			if (n < 0) {
				r = n;
				break;
			}
			size_t rl = strlen(rest);
			char *nw = malloc(n + 1 + rl + 1);
			if (!nw) {
				r = -ENOMEM;
				break;
			}
			memcpy(nw, target, n);
			nw[n] = '/';
			memcpy(nw + n + 1, rest, rl + 1);
			free(work);
			work = rest = nw;
			if (target[0] == '/')
				cur = BCH_ROOT_INO;
			continue;
		}
		if (!last && !S_ISDIR(st.st_mode)) {
			r = -ENOTDIR;
			break;
		}
		cur = next;
	}
	(void)save;
	free(work);
	if (!r)
		*inum = cur;
	return r;
}

/* ------------------------------------------------------- fsck support */

uint64_t bch_fs_dirent_hash(struct bch_fs *c, const struct bch_inode *dir, const char *name)
{
	return dirent_hash(c, dir, name);
}

static int v_dirent_first(struct bch_fs *c, uint64_t dir, const struct bch_inode *di, const char *name,
			uint64_t *slot)
{
	struct bch_bkey *k;
	int r = dirent_lookup(c, dir, di, name, &k);

	if (!r) {
		*slot = k->p.offset;
		free(k);
	}
	return r;
}

static int v_dirent_add(struct bch_fs *c, uint64_t dir, const char *name, uint64_t inum, unsigned d_type)
{
	struct bch_inode di;
	struct btree_trans *t;
	uint64_t slot;
	int r = bch_inode_get(c, dir, &di);

	if (!r)
		r = dirent_new_slot(c, dir, &di, name, &slot);
	if (!r && !(r = bch_trans_init(c, &t))) {
		r = dirent_put(t, dir, slot, name, inum, d_type);
		if (!r)
			r = commit(c, t, NULL);
		bch_trans_exit(t);
	}
	return r;
}

static int v_dirent_delete(struct bch_fs *c, uint64_t dir, uint64_t slot)
{
	struct btree_trans *t;
	int r = bch_trans_init(c, &t);

	if (!r) {
		r = bch_hash_delete_at(c, t, &dirent_desc, dir, slot, 0);
		if (!r)
			r = commit(c, t, NULL);
		bch_trans_exit(t);
	}
	return r;
}

uint64_t bch_fs_xattr_hash(struct bch_fs *c, const struct bch_inode *i, const struct bch_bkey *k)
{
	const struct bch_xattr *x = bkey_val(k);
	struct xattr_key xk = { x->ns, (const char *)x->data, x->name_len };

	return xattr_hash(c, i, &xk);
}

static int v_xattr_first(struct bch_fs *c, uint64_t inum, const struct bch_inode *i,
		       const struct bch_bkey *k, uint64_t *slot)
{
	const struct bch_xattr *x = bkey_val(k);
	struct xattr_key xk = { x->ns, (const char *)x->data, x->name_len };
	struct bch_bkey *found;
	int r = bch_hash_lookup(c, &xattr_desc, inum, xattr_hash(c, i, &xk), &xk, &found);

	if (!r) {
		*slot = found->p.offset;
		free(found);
	}
	return r;
}

static int v_xattr_reinsert(struct bch_fs *c, uint64_t inum, const struct bch_inode *i,
			  const struct bch_bkey *k)
{
	const struct bch_xattr *x = bkey_val(k);
	struct xattr_key xk = { x->ns, (const char *)x->data, x->name_len };
	struct btree_trans *t;
	uint64_t slot;
	bool exists;
	int r = bch_trans_init(c, &t);

	if (r)
		return r;
	/* out of its chain: remove it, then insert it where lookups will look */
	r = bch_hash_delete_at(c, t, &xattr_desc, inum, k->p.offset, 0);
	if (!r)
		r = commit(c, t, NULL);
	if (!r)
		r = bch_hash_find_slot(c, &xattr_desc, inum, xattr_hash(c, i, &xk), &xk, &slot, &exists);
	if (!r) {
		struct bch_bkey *n = bch_bkey_dup(k);
		n->p.offset = slot;
		r = bch_trans_update(t, BCH_BTREE_ID_xattrs, n);
		free(n);
		if (!r)
			r = commit(c, t, NULL);
	}
	bch_trans_exit(t);
	return r;
}

static int v_xattr_pieces_check(struct bch_fs *c, uint64_t inum, uint32_t pieces)
{
	ssize_t r = xattr_pieces_read(c, inum, pieces, NULL, 0);

	return r < 0 ? (int)r : 0;
}

static int v_xattr_pieces_drop(struct bch_fs *c, uint64_t inum, uint32_t id, unsigned from)
{
	struct xbatch b;
	struct bch_bkey *k;
	uint64_t pos = BCH_XATTR_PIECE_POS(id, from);
	int r = xbatch_init(c, &b);

	if (r)
		return r;
	while (!(r = bch_vpeek(c, BCH_BTREE_ID_xattrs, POS(inum, pos, 0),
				    POS(inum, piece_pos_end(id), 0), &k))) {
		pos = k->p.offset + 1;
		free(k);
		r = xbatch_add(&b, bch_bkey_alloc(BCH_BKEY_deleted, POS(inum, pos - 1, 0), 0));
		if (r)
			break;
	}
	if (r == -BCH_ERR_key_not_found)
		r = commit(c, b.t, NULL);
	bch_trans_exit(b.t);
	return r;
}

static int v_xattr_delete_at(struct bch_fs *c, uint64_t inum, uint64_t slot)
{
	struct btree_trans *t;
	int r = bch_trans_init(c, &t);

	if (r)
		return r;
	r = bch_hash_delete_at(c, t, &xattr_desc, inum, slot, 0);
	if (!r)
		r = commit(c, t, NULL);
	bch_trans_exit(t);
	return r;
}

static int v_inode_free(struct bch_fs *c, uint64_t inum)
{
	return inode_free(c, inum);
}

/* ------------------------------------------------------------ subvolumes */

static int subvol_commit(struct bch_fs *c, struct btree_trans *t)
{
	int r = bch_trans_commit(t, BCH_TRANS_SYNC);
	int r2 = bch_snapshots_load(c);

	return r ? r : r2;
}


static int v_subvol_create(struct bch_fs *c, uint64_t dir, const char *name, mode_t mode, uid_t uid,
			   gid_t gid, uint64_t *ret)
{
	const struct bch_view *pv = bch_view_cur(c);
	struct ino_set s = { 0 };
	struct bch_inode *di, root;
	struct btree_trans *t;
	uint64_t slot, inum;
	uint32_t sv, sn;
	int r;

	if ((r = ino_get(c, &s, dir, &di)) || (r = new_name_check(c, dir, di, name, &slot)))
		return ret_errno(r);
	if (pv->ro)
		return -EROFS;
	if ((r = bch_subvol_alloc_id(c, &sv)) || (r = bch_snap_alloc_ids(c, &sn, 1)) ||
	    (r = bch_inode_alloc_num(c, &inum)))
		return ret_errno(r);
	if (inum > BCH_HANDLE_INUM_MASK)
		return -ENOSPC;
	struct bch_snap_info si = {
		.id = sn, .parent = BCH_SNAPSHOT_NONE, .subvol = sv, .depth = 0,
		.children = { BCH_SNAPSHOT_NONE, BCH_SNAPSHOT_NONE }, .created = bch_now_ns(),
	};
	struct bch_subvolume v = {
		.snapshot = sn, .root_inum = inum, .parent = BCH_SUBVOL_NONE,
		.dir_subvol = pv->subvol, .dir = dir, .dir_offset = slot, .created = si.created,
	};
	bch_inode_init(c, &root, inum, S_IFDIR | (mode & 07777), uid, gid, 0, di);
	di->nlink++;
	touch(di, true);
	if ((r = bch_trans_init(c, &t)))
		return ret_errno(r);
	struct bch_bkey *sk = bch_snap_key(sn, &si), *vk = bch_subvol_key(sv, &v);
	r = bch_trans_update(t, BCH_BTREE_ID_snapshots, sk);
	if (!r)
		r = bch_trans_update(t, BCH_BTREE_ID_snapshots, vk);
	if (!r)
		r = dirent_put(t, dir, slot, name, sv, BCH_DT_SUBVOL);
	if (!r)
		r = ino_set_write(c, &s, t);
	if (!r) {
		struct bch_view nv;
		bch_view_enter_snap(c, &nv, sv, sn, false);
		r = bch_inode_update(t, inum, &root);
		bch_view_exit(&nv);
	}
	if (!r)
		r = subvol_commit(c, t);
	free(sk);
	free(vk);
	bch_trans_exit(t);
	if (!r)
		*ret = bch_handle(sv, inum);
	return ret_errno(r);
}

int bch_fs_subvol_create(struct bch_fs *c, uint64_t dir, const char *name, mode_t mode, uid_t uid,
			 gid_t gid, uint64_t *ret)
{
	int r = bch_snapshots_enable(c);

	return r ? ret_errno(r) : VIEW_CALL(c, dir, v_subvol_create(c, dir, name, mode, uid, gid, ret));
}

static int v_subvol_snapshot(struct bch_fs *c, uint32_t src, uint64_t dir, const char *name, bool ro,
			     uint64_t *ret)
{
	const struct bch_view *pv = bch_view_cur(c);
	const struct bch_subvol_info *svi = bch_subvol_get(c, src);
	struct ino_set s = { 0 };
	struct bch_inode *di;
	struct btree_trans *t;
	uint64_t slot;
	uint32_t ids[2], w;
	int r;

	if (!svi)
		return -ESTALE;
	struct bch_subvolume old = svi->v;
	const struct bch_snap_info *pi = bch_snap_get(c, old.snapshot);
	if (!pi)
		return bch_fs_err(c, -EIO, "subvolume %u: its snapshot %u is missing (run fsck)",
				  src, (unsigned)old.snapshot);
	struct bch_snap_info p = *pi;
	if (p.depth + 1 > BCH_SNAPSHOT_DEPTH_MAX)
		return bch_fs_err(c, -EMLINK, "snapshots nested deeper than %u", BCH_SNAPSHOT_DEPTH_MAX);
	if ((r = ino_get(c, &s, dir, &di)) || (r = new_name_check(c, dir, di, name, &slot)))
		return ret_errno(r);
	if (pv->ro)
		return -EROFS;
	if ((r = bch_subvol_alloc_id(c, &w)) || (r = bch_snap_alloc_ids(c, ids, 2)))
		return ret_errno(r);

	int64_t now = bch_now_ns();
	struct bch_snap_info a = {
		.id = ids[0], .parent = p.id, .subvol = src, .depth = p.depth + 1,
		.children = { BCH_SNAPSHOT_NONE, BCH_SNAPSHOT_NONE }, .created = now,
	}, b = a;
	b.id = ids[1];
	b.subvol = w;
	p.children[0] = a.id;
	p.children[1] = b.id;
	p.subvol = BCH_SUBVOL_NONE;
	struct bch_subvolume nv = old, wv = {
		.snapshot = b.id, .flags = BCH_SUBVOL_SNAP | (ro ? BCH_SUBVOL_RO : 0),
		.root_inum = old.root_inum, .parent = src, .dir_subvol = pv->subvol, .dir = dir,
		.dir_offset = slot, .created = now,
	};
	nv.snapshot = a.id;
	/* the name lands in the source's new leaf when made inside the source */
	uint32_t dir_snap = pv->subvol == src ? a.id : pv->snap;

	di->nlink++;
	touch(di, true);
	if ((r = bch_trans_init(c, &t)))
		return ret_errno(r);
	struct bch_bkey *keys[5] = {
		bch_snap_key(p.id, &p), bch_snap_key(a.id, &a), bch_snap_key(b.id, &b),
		bch_subvol_key(src, &nv), bch_subvol_key(w, &wv),
	};
	for (unsigned i = 0; i < 5 && !r; i++)
		r = bch_trans_update(t, BCH_BTREE_ID_snapshots, keys[i]);
	if (!r) {
		struct bch_view dv;
		bch_view_enter_snap(c, &dv, pv->subvol, dir_snap, false);
		r = dirent_put(t, dir, slot, name, w, BCH_DT_SUBVOL);
		if (!r)
			r = ino_set_write(c, &s, t);
		bch_view_exit(&dv);
		/*
		 * The record that the name's directory changed there (snapshot.h):
		 * a new leaf is not in the table until the commit, so it is not
		 * added by the update itself.
		 */
		struct bch_bkey tk = { .u64s = BCH_BKEY_U64s, .type = BCH_BKEY_snapshot_touch,
				       .p = POS(BCH_SNAP_TOUCH_INO(dir_snap), dir, 0) };
		if (!r && dir_snap == a.id)
			r = bch_trans_update(t, BCH_BTREE_ID_snapshots, &tk);
	}
	if (!r)
		r = subvol_commit(c, t);
	for (unsigned i = 0; i < 5; i++)
		free(keys[i]);
	bch_trans_exit(t);
	if (!r)
		*ret = bch_handle(w, old.root_inum);
	return ret_errno(r);
}

int bch_fs_subvol_snapshot(struct bch_fs *c, uint64_t src, uint64_t dir, const char *name, bool ro,
			   uint64_t *ret)
{
	uint32_t sv = bch_handle_subvol(src);
	const struct bch_subvol_info *svi;
	int r = bch_snapshots_enable(c);

	if (r)
		return ret_errno(r);
	if (!(svi = bch_subvol_get(c, sv)))
		return -ESTALE;
	if ((src & BCH_HANDLE_INUM_MASK) != svi->v.root_inum)
		return bch_fs_err(c, -EINVAL, "not the root of a subvolume");
	return VIEW_CALL(c, dir, v_subvol_snapshot(c, sv, dir, name, ro, ret));
}

static int v_subvol_delete(struct bch_fs *c, uint64_t dir, const char *name)
{
	const struct bch_view *pv = bch_view_cur(c);
	struct ino_set s = { 0 };
	struct bch_inode *di;
	struct bch_bkey *k;
	struct btree_trans *t;
	int r;

	if ((r = ino_get(c, &s, dir, &di)))
		return ret_errno(r);
	if (!S_ISDIR(di->mode))
		return -ENOTDIR;
	if (is_dot(name))
		return -EINVAL;
	if ((r = check_name(name)))
		return r;
	if ((r = dirent_lookup(c, dir, di, name, &k)))
		return ret_errno(r);
	const struct bch_dirent *d = bkey_val(k);
	uint32_t sv = (uint32_t)d->inum;
	uint64_t slot = k->p.offset;
	bool is_subvol = d->d_type == BCH_DT_SUBVOL;
	free(k);
	if (!is_subvol)
		return bch_fs_err(c, -EINVAL, "%s is not a subvolume", name);
	if (pv->ro)
		return -EROFS;
	const struct bch_subvol_info *svi = bch_subvol_get(c, sv);
	if (!svi)
		return bch_fs_err(c, -EIO, "%s names subvolume %u, which does not exist (run fsck)", name, sv);
	unsigned n;
	const struct bch_subvol_info *all = bch_subvols(c, &n);
	for (unsigned i = 0; i < n; i++)
		if (all[i].id != sv && all[i].v.dir_subvol == sv)
			return bch_fs_err(c, -ENOTEMPTY, "%s holds subvolume %u: delete that first", name,
					  all[i].id);
	const struct bch_snap_info *si = bch_snap_get(c, svi->v.snapshot);
	if (!si)
		return bch_fs_err(c, -EIO, "subvolume %u: its snapshot is missing (run fsck)", sv);
	struct bch_snap_info dead = *si;
	dead.flags |= BCH_SNAPSHOT_DELETED;
	dead.subvol = BCH_SUBVOL_NONE;

	di->nlink--;
	touch(di, true);
	if ((r = bch_trans_init(c, &t)))
		return ret_errno(r);
	struct bch_bkey del = { .u64s = BCH_BKEY_U64s, .type = BCH_BKEY_deleted,
				.p = POS(BCH_SUBVOL_INO, sv, 0) };
	struct bch_bkey *sk = bch_snap_key(dead.id, &dead);
	r = bch_trans_update(t, BCH_BTREE_ID_snapshots, &del);
	if (!r)
		r = bch_trans_update(t, BCH_BTREE_ID_snapshots, sk);
	if (!r)
		r = bch_hash_delete_at(c, t, &dirent_desc, dir, slot, 0);
	if (!r)
		r = ino_set_write(c, &s, t);
	if (!r)
		r = subvol_commit(c, t);
	free(sk);
	bch_trans_exit(t);
	return ret_errno(r);
}

int bch_fs_lookup_parent(struct bch_fs *c, const char *path, uint64_t *dir, char *buf, size_t len,
			 char **name)
{
	snprintf(buf, len, "%s", path);
	size_t n = strlen(buf);
	while (n > 1 && buf[n - 1] == '/')
		buf[--n] = 0;
	char *slash = strrchr(buf, '/');
	if (!slash) {
		*dir = BCH_ROOT_INO;
		*name = buf;
		return 0;
	}
	*slash = 0;
	*name = slash + 1;
	if (!**name)
		return -EEXIST;		/* the root itself */
	return bch_fs_lookup_path(c, buf[0] ? buf : "/", true, dir);
}

/* The path of inode inum from its subvolume's root (current view), at most len - 1 bytes. */
static int v_inode_path(struct bch_fs *c, uint64_t inum, uint64_t root, char *buf, size_t len)
{
	char *end = buf + len - 1, *p = end;

	*p = 0;
	for (unsigned depth = 0; inum != root; depth++) {
		struct bch_inode i;
		struct bch_bkey *k;
		int r = bch_inode_get(c, inum, &i);
		if (r)
			return ret_errno(r);
		if (!i.dir || depth > 4096)
			return -ENOENT;
		if ((r = bch_vlookup(c, BCH_BTREE_ID_dirents, POS(i.dir, i.dir_offset, 0), &k)))
			return ret_errno(r);
		const struct bch_dirent *d = bkey_val(k);
		if (k->type != BCH_BKEY_dirent || (size_t)(p - buf) < d->name_len + 1u) {
			r = k->type != BCH_BKEY_dirent ? -ENOENT : -ENAMETOOLONG;
			free(k);
			return r;
		}
		p -= d->name_len;
		memcpy(p, d->name, d->name_len);
		*--p = '/';
		free(k);
		inum = i.dir;
	}
	memmove(buf, p, end - p + 1);
	return 0;
}

int bch_fs_subvol_path(struct bch_fs *c, uint32_t subvol, char *buf, size_t len)
{
	char *tmp = malloc(len);
	size_t n = 0;
	int r = 0;

	if (!tmp)
		return -ENOMEM;
	buf[0] = 0;
	for (unsigned depth = 0; subvol && !r; depth++) {
		const struct bch_subvol_info *sv = bch_subvol_get(c, subvol);
		if (!sv || depth > BCH_SUBVOL_MAX) {
			r = -ENOENT;
			break;
		}
		const struct bch_subvol_info *psv = bch_subvol_get(c, sv->v.dir_subvol);
		struct bch_bkey *k;
		struct bch_view v;
		if (!psv) {
			r = -ENOENT;
			break;
		}
		bch_view_enter_snap(c, &v, psv->id, psv->v.snapshot, true);
		r = v_inode_path(c, sv->v.dir, psv->v.root_inum, tmp, len);
		if (!r && !(r = ret_errno(bch_vlookup(c, BCH_BTREE_ID_dirents,
						       POS(sv->v.dir, sv->v.dir_offset, 0), &k)))) {
			const struct bch_dirent *d = bkey_val(k);
			size_t tl = strlen(tmp);
			if (k->type != BCH_BKEY_dirent)
				r = -ENOENT;
			else if (tl + 1 + d->name_len + n + 1 > len)
				r = -ENAMETOOLONG;
			else {
				/* buf = tmp + "/" + name + buf */
				memmove(buf + tl + 1 + d->name_len, buf, n + 1);
				memcpy(buf, tmp, tl);
				buf[tl] = '/';
				memcpy(buf + tl + 1, d->name, d->name_len);
				n += tl + 1 + d->name_len;
			}
			free(k);
		}
		bch_view_exit(&v);
		subvol = psv->id;
	}
	if (!r && !n)
		snprintf(buf, len, "/");
	free(tmp);
	return r;
}

int bch_fs_subvol_delete(struct bch_fs *c, uint64_t dir, const char *name)
{
	return VIEW_CALL(c, dir, v_subvol_delete(c, dir, name));
}

uint32_t bch_fs_subvol_of(uint64_t handle)
{
	return bch_handle_subvol(handle);
}

/* ------------------------------------------- entry points: views of handles */

int bch_fs_lookup(struct bch_fs *c, uint64_t dir, const char *name, uint64_t *inum)
{
	return VIEW_CALL(c, dir, v_lookup(c, dir, name, inum));
}

int bch_fs_getattr(struct bch_fs *c, uint64_t inum, struct stat *st)
{
	return VIEW_CALL(c, inum, v_getattr(c, inum, st));
}

int bch_fs_create(struct bch_fs *c, uint64_t dir, const char *name, mode_t mode, dev_t rdev,
		  uid_t uid, gid_t gid, uint64_t *inum)
{
	return VIEW_CALL(c, dir, v_create(c, dir, name, mode, rdev, uid, gid, inum));
}

int bch_fs_symlink(struct bch_fs *c, uint64_t dir, const char *name, const char *target,
		   uid_t uid, gid_t gid, uint64_t *inum)
{
	return VIEW_CALL(c, dir, v_symlink(c, dir, name, target, uid, gid, inum));
}

ssize_t bch_fs_readlink(struct bch_fs *c, uint64_t inum, char *buf, size_t size)
{
	return VIEW_CALL(c, inum, v_readlink(c, inum, buf, size));
}

int bch_fs_link(struct bch_fs *c, uint64_t inum, uint64_t dir, const char *name)
{
	if (bch_handle_subvol(inum) != bch_handle_subvol(dir))
		return -EXDEV;
	dir &= BCH_HANDLE_INUM_MASK;	/* the view is inum's (the same subvolume) */
	return VIEW_CALL(c, inum, v_link(c, inum, dir, name));
}

int bch_fs_unlink(struct bch_fs *c, uint64_t dir, const char *name)
{
	return VIEW_CALL(c, dir, v_unlink(c, dir, name));
}

int bch_fs_rmdir(struct bch_fs *c, uint64_t dir, const char *name)
{
	return VIEW_CALL(c, dir, v_rmdir(c, dir, name));
}

int bch_fs_rename(struct bch_fs *c, uint64_t olddir, const char *oldname, uint64_t newdir,
		  const char *newname, unsigned flags)
{
	if (bch_handle_subvol(olddir) != bch_handle_subvol(newdir))
		return -EXDEV;
	newdir &= BCH_HANDLE_INUM_MASK;
	if (flags & BCH_RENAME_WHITEOUT)
		return -EINVAL;		/* bch_fs_rename_whiteout(): the whiteout needs an owner */
	return VIEW_CALL(c, olddir, v_rename(c, olddir, oldname, newdir, newname, flags, 0, 0));
}

int bch_fs_rename_whiteout(struct bch_fs *c, uint64_t olddir, const char *oldname, uint64_t newdir,
			   const char *newname, unsigned flags, uid_t uid, gid_t gid)
{
	if (bch_handle_subvol(olddir) != bch_handle_subvol(newdir))
		return -EXDEV;
	newdir &= BCH_HANDLE_INUM_MASK;
	return VIEW_CALL(c, olddir, v_rename(c, olddir, oldname, newdir, newname,
					     flags | BCH_RENAME_WHITEOUT, uid, gid));
}

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
	uint64_t bs = block_bytes(c);
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
	if ((r = metadata_room_for(c, true)))
		return ret_errno(r);

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
			return got ? (ssize_t)(got < head + mid ? got : head + mid) : ret_errno(r);
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

int bch_fs_setattr(struct bch_fs *c, uint64_t inum, const struct bch_setattr *sa)
{
	return VIEW_CALL(c, inum, v_setattr(c, inum, sa, NULL));
}

int bch_fs_setattr_stat(struct bch_fs *c, uint64_t inum, const struct bch_setattr *sa, struct stat *st)
{
	return VIEW_CALL(c, inum, v_setattr(c, inum, sa, st));
}

int bch_fs_kill_priv(struct bch_fs *c, uint64_t inum, const struct bch_caller *cr)
{
	return VIEW_CALL(c, inum, v_kill_priv(c, inum, cr));
}

int bch_fs_get_flags(struct bch_fs *c, uint64_t inum, unsigned *fs_flags, uint32_t *project)
{
	return VIEW_CALL(c, inum, v_get_flags(c, inum, fs_flags, project));
}

int bch_fs_set_flags(struct bch_fs *c, uint64_t inum, unsigned fs_flags, uint32_t project,
		     const struct bch_caller *cr)
{
	return VIEW_CALL(c, inum, v_set_flags(c, inum, fs_flags, project, cr));
}

int bch_fs_readdir(struct bch_fs *c, uint64_t dir, uint64_t pos, bch_readdir_fn fn, void *priv)
{
	return VIEW_CALL(c, dir, v_readdir(c, dir, pos, fn, priv));
}

int bch_fs_set_inode_opt(struct bch_fs *c, uint64_t inum, const char *opt, const char *value)
{
	return VIEW_CALL(c, inum, v_set_inode_opt(c, inum, opt, value));
}

ssize_t bch_fs_getxattr(struct bch_fs *c, uint64_t inum, const char *name, void *buf, size_t size)
{
	return VIEW_CALL(c, inum, v_getxattr(c, inum, name, buf, size));
}

int bch_fs_setxattr(struct bch_fs *c, uint64_t inum, const char *name, const void *val,
		    size_t size, int flags)
{
	return VIEW_CALL(c, inum, v_setxattr(c, inum, name, val, size, flags));
}

ssize_t bch_fs_listxattr(struct bch_fs *c, uint64_t inum, char *buf, size_t size)
{
	return VIEW_CALL(c, inum, v_listxattr(c, inum, buf, size));
}

int bch_fs_removexattr(struct bch_fs *c, uint64_t inum, const char *name)
{
	return VIEW_CALL(c, inum, v_removexattr(c, inum, name));
}

int bch_fs_kill_caps(struct bch_fs *c, uint64_t inum)
{
	return VIEW_CALL(c, inum, xattr_remove(c, inum, "security.capability", NULL));
}

int bch_fs_dirent_first(struct bch_fs *c, uint64_t dir, const struct bch_inode *di, const char *name,
			uint64_t *slot)
{
	return VIEW_CALL(c, dir, v_dirent_first(c, dir, di, name, slot));
}

int bch_fs_dirent_add(struct bch_fs *c, uint64_t dir, const char *name, uint64_t inum, unsigned d_type)
{
	return VIEW_CALL(c, dir, v_dirent_add(c, dir, name, inum, d_type));
}

int bch_fs_dirent_delete(struct bch_fs *c, uint64_t dir, uint64_t slot)
{
	return VIEW_CALL(c, dir, v_dirent_delete(c, dir, slot));
}

int bch_fs_xattr_first(struct bch_fs *c, uint64_t inum, const struct bch_inode *i,
		       const struct bch_bkey *k, uint64_t *slot)
{
	return VIEW_CALL(c, inum, v_xattr_first(c, inum, i, k, slot));
}

int bch_fs_xattr_reinsert(struct bch_fs *c, uint64_t inum, const struct bch_inode *i,
			  const struct bch_bkey *k)
{
	return VIEW_CALL(c, inum, v_xattr_reinsert(c, inum, i, k));
}

int bch_fs_xattr_pieces_check(struct bch_fs *c, uint64_t inum, uint32_t pieces)
{
	return VIEW_CALL(c, inum, v_xattr_pieces_check(c, inum, pieces));
}

int bch_fs_xattr_pieces_drop(struct bch_fs *c, uint64_t inum, uint32_t id, unsigned from)
{
	return VIEW_CALL(c, inum, v_xattr_pieces_drop(c, inum, id, from));
}

int bch_fs_xattr_delete_at(struct bch_fs *c, uint64_t inum, uint64_t slot)
{
	return VIEW_CALL(c, inum, v_xattr_delete_at(c, inum, slot));
}

int bch_fs_inode_free(struct bch_fs *c, uint64_t inum)
{
	return VIEW_CALL(c, inum, v_inode_free(c, inum));
}

int bch_fs_inodes_free(struct bch_fs *c, const uint64_t *inums, size_t nr)
{
	int err = 0;

	/* a run of handles of one subvolume at a time: one view each */
	for (size_t i = 0, j; i < nr; i = j) {
		uint64_t h = inums[i];
		for (j = i + 1; j < nr && bch_handle_subvol(inums[j]) == bch_handle_subvol(h); j++)
			;
		int r = VIEW_CALL(c, h, v_inodes_free(c, inums + i, j - i));
		if (r && !err)
			err = r;
	}
	return ret_errno(err);
}

int bch_fs_set_acl(struct bch_fs *c, uint64_t inum, const void *acl, size_t size, mode_t mode)
{
	return VIEW_CALL(c, inum, v_set_acl(c, inum, acl, size, mode));
}
