// SPDX-License-Identifier: GPL-2.0
/*
 * fs_ops.c - the POSIX layer (see fs_ops.h).
 *
 * The layer is four files and a shared header: this one (namespace:
 * dirents, create, link, unlink, rename, setattr, set-id rules,
 * readdir, statfs, paths), fs_ops_data.c (file data), fs_ops_xattr.c
 * (xattrs, ACLs, file flags, per-file options, fsck's hashes),
 * fs_ops_subvol.c (subvolumes) and fs_ops_shared.h (what they share).
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
#include "fs_ops_shared.h"

/* --------------------------------------------------------------- helpers */


int fs_ret_errno(int r)
{
	return r < 0 ? -bch_err_class(r) : r;
}

uint64_t fs_block_bytes(struct bch_fs *c)
{
	return (uint64_t)c->sb->block_size << BCH_SECTOR_SHIFT;
}

int fs_check_name(const char *name)
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
int fs_metadata_room_for(struct bch_fs *c, bool write)
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

int fs_metadata_room(struct bch_fs *c)
{
	return fs_metadata_room_for(c, false);
}

bool fs_is_dot(const char *name)
{
	return !strcmp(name, ".") || !strcmp(name, "..");
}

int fs_ino_get(struct bch_fs *c, struct ino_set *s, uint64_t inum, struct bch_inode **ret)
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

int fs_ino_set_write(struct bch_fs *c, struct ino_set *s, struct btree_trans *t)
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

void fs_touch(struct bch_inode *i, bool mtime)
{
	int64_t now = bch_now_ns();

	i->ctime = now;
	if (mtime)
		i->mtime = now;
}

/* i is unlinked, renamed, linked, truncated, or its xattrs change; or a name leaves dir i */
int fs_flags_no_change(const struct bch_inode *i)
{
	return i->flags & FLAGS_FROZEN ? -EPERM : 0;
}

/* a name is added to directory i */
static int flags_dir_add(const struct bch_inode *i)
{
	return i->flags & BCH_INODE_IMMUTABLE ? -EPERM : 0;
}

/* data written at offset: append-only files only grow at the end */
int fs_flags_write(const struct bch_inode *i, uint64_t offset)
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

/* fs_flags_no_change() for inum, read here (xattr calls) */
int fs_flags_no_change_inum(struct bch_fs *c, uint64_t inum)
{
	struct bch_inode i;
	int r = bch_inode_get(c, inum, &i);

	return r ? fs_ret_errno(r) : fs_flags_no_change(&i);
}

/* Commit t (with u's extent accounting, if any). */
int fs_commit(struct bch_fs *c, struct btree_trans *t, struct bch_extent_update *u)
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
int fs_commit_inodes(struct bch_fs *c, struct ino_set *s)
{
	struct btree_trans *t;
	int r = bch_trans_init(c, &t);

	if (r)
		return r;
	r = fs_ino_set_write(c, s, t);
	if (!r)
		r = fs_commit(c, t, NULL);
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

const struct bch_hash_desc fs_dirent_desc = {
	.btree_id	= BCH_BTREE_ID_dirents,
	.key_type	= BCH_BKEY_dirent,
	.match		= dirent_match,
};

uint64_t fs_dirent_hash(struct bch_fs *c, const struct bch_inode *dir, const char *name)
{
	return bch_hash_slot(bch_str_hash(c->sb->str_hash_key, dir->hash_seed, name, strlen(name)));
}

/* The dirent of name in dir (malloc'd) or -ENOENT. */
int fs_dirent_lookup(struct bch_fs *c, uint64_t dir, const struct bch_inode *di, const char *name,
			 struct bch_bkey **ret)
{
	struct name_key n = { name, strlen(name) };

	return bch_hash_lookup(c, &fs_dirent_desc, dir, fs_dirent_hash(c, di, name), &n, ret);
}

int fs_dirent_put(struct btree_trans *t, uint64_t dir, uint64_t slot, const char *name,
		      uint64_t inum, unsigned d_type)
{
	/* on the stack, zeroed as far as it goes (no calloc and free: every create) */
	uint64_t buf[BCH_BKEY_U64s + (sizeof(struct bch_dirent) + BCH_NAME_MAX + 7) / 8];
	size_t len = strlen(name), u64s = BCH_BKEY_U64s + (sizeof(struct bch_dirent) + len + 7) / 8;
	struct bch_bkey *k = (struct bch_bkey *)buf;
	struct bch_dirent *d = bkey_val(k);

	if (len > BCH_NAME_MAX)
		return -ENAMETOOLONG;
	memset(buf, 0, u64s * 8);
	k->u64s = u64s;
	k->type = BCH_BKEY_dirent;
	k->p = POS(dir, slot, 0);
	d->inum = inum;
	d->d_type = d_type;
	d->name_len = len;
	memcpy(d->name, name, len);
	return bch_trans_update(t, BCH_BTREE_ID_dirents, k);
}

/* Where a new name goes in dir: -EEXIST if taken. */
int fs_dirent_new_slot(struct bch_fs *c, uint64_t dir, const struct bch_inode *di,
			   const char *name, uint64_t *slot)
{
	struct name_key n = { name, strlen(name) };
	bool exists;
	int r = bch_hash_find_slot(c, &fs_dirent_desc, dir, fs_dirent_hash(c, di, name), &n, slot, &exists);

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
uint64_t fs_dirent_target(struct bch_fs *c, uint64_t dir, const struct bch_bkey *k, unsigned *d_type)
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
uint64_t fs_parent_handle(struct bch_fs *c, uint64_t dir, const struct bch_inode *di)
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
		return fs_ret_errno(r);
	if (!S_ISDIR(di.mode))
		return -ENOTDIR;
	if (!strcmp(name, ".")) {
		*inum = bch_view_handle(c, dir);
		return 0;
	}
	if (!strcmp(name, "..")) {
		*inum = fs_parent_handle(c, dir, &di);
		return 0;
	}
	if ((r = fs_check_name(name)))
		return r;
	if ((r = fs_dirent_lookup(c, dir, &di, name, &k)))
		return fs_ret_errno(r);
	*inum = fs_dirent_target(c, dir, k, NULL);
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
	st->st_blksize = fs_block_bytes(c);
	st->st_blocks = i->sectors;
	ns_to_ts(i->atime, &st->st_atim);
	ns_to_ts(i->mtime, &st->st_mtim);
	ns_to_ts(i->ctime, &st->st_ctim);
}

static int v_getattr(struct bch_fs *c, uint64_t inum, struct stat *st, int64_t *btime,
		     unsigned *fs_flags)
{
	struct bch_inode i;
	int r = bch_inode_get(c, inum, &i);

	if (r)
		return fs_ret_errno(r);
	inode_stat(c, inum, &i, st);
	if (btime)
		*btime = i.btime;
	if (fs_flags)
		*fs_flags = bch_inode_flags_to_fs(i.flags);
	return 0;
}

/*
 * A new name in directory dir (inode di, current view): the checks, and
 * *slot, where its dirent goes.
 */
int fs_new_name_check(struct bch_fs *c, uint64_t dir, struct bch_inode *di, const char *name,
			  uint64_t *slot)
{
	int r;

	if (!S_ISDIR(di->mode))
		return -ENOTDIR;
	if (di->flags & BCH_INODE_UNLINKED)
		return -ENOENT;
	if (fs_is_dot(name))
		return -EEXIST;
	if ((r = fs_check_name(name)))
		return r;
	if ((r = fs_metadata_room(c)))
		return r;
	return fs_dirent_new_slot(c, dir, di, name, slot);
}

/* What a create made: its handle, and (st not NULL) its stat and birth time, from the inode written. */
struct fs_made {
	uint64_t	*inum;
	struct stat	*st;
	int64_t		*btime;
};

static int create_common(struct bch_fs *c, uint64_t dir, const char *name, mode_t mode, dev_t rdev,
			 uid_t uid, gid_t gid, const char *symlink_target, const struct fs_made *made)
{
	struct ino_set s = { 0 };
	struct bch_inode *di, *ni;
	struct btree_trans *t;
	struct bch_extent_update u = { 0 };
	uint64_t slot, inum;
	int r;

	if ((r = fs_ino_get(c, &s, dir, &di)) || (r = fs_new_name_check(c, dir, di, name, &slot)) ||
	    (r = flags_dir_add(di)) || (r = bch_inode_alloc_num(c, &inum)))
		return fs_ret_errno(r);

	ni = &s.v[s.nr];
	s.inum[s.nr++] = inum;
	bch_inode_init(c, ni, inum, mode, uid, gid, rdev, di);
	ni->dir = dir;
	ni->dir_offset = slot;
	if (S_ISDIR(mode))
		di->nlink++;
	fs_touch(di, true);

	if ((r = bch_trans_init(c, &t)))
		return fs_ret_errno(r);
	if (symlink_target) {
		size_t len = strlen(symlink_target), bs = fs_block_bytes(c);
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
		r = fs_dirent_put(t, dir, slot, name, inum, bch_mode_to_dtype(mode));
	if (!r)
		r = fs_ino_set_write(c, &s, t);
	if (!r)
		r = fs_commit(c, t, &u);
	else
		bch_extent_update_abort(c, &u);
	bch_trans_exit(t);
	bch_extent_update_exit(&u);
	if (!r && made->inum)
		*made->inum = bch_view_handle(c, inum);
	if (!r && made->st) {
		inode_stat(c, inum, ni, made->st);
		*made->btime = ni->btime;
	}
	return fs_ret_errno(r);
}

static int v_create(struct bch_fs *c, uint64_t dir, const char *name, mode_t mode, dev_t rdev,
		  uid_t uid, gid_t gid, const struct fs_made *made)
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
	return create_common(c, dir, name, mode, rdev, uid, gid, NULL, made);
}

static int v_symlink(struct bch_fs *c, uint64_t dir, const char *name, const char *target,
		   uid_t uid, gid_t gid, const struct fs_made *made)
{
	size_t len = strlen(target);

	if (!len)
		return -ENOENT;
	if (len >= 4096)
		return -ENAMETOOLONG;
	return create_common(c, dir, name, S_IFLNK | 0777, 0, uid, gid, target, made);
}

static ssize_t v_readlink(struct bch_fs *c, uint64_t inum, char *buf, size_t size)
{
	struct bch_inode i;
	int r = bch_inode_get(c, inum, &i);

	if (r)
		return fs_ret_errno(r);
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

	if ((r = fs_ino_get(c, &s, inum, &ti)))
		return fs_ret_errno(r);
	if ((r = fs_ino_get(c, &s, dir, &di)))
		return fs_ret_errno(r);
	if (!S_ISDIR(di->mode))
		return -ENOTDIR;
	if ((r = fs_metadata_room(c)))
		return fs_ret_errno(r);
	if (fs_is_dot(name))
		return -EEXIST;
	if ((r = fs_check_name(name)))
		return r;
	if (ti->flags & BCH_INODE_UNLINKED)
		return -ENOENT;
	if ((r = fs_dirent_new_slot(c, dir, di, name, &slot)))
		return fs_ret_errno(r);
	if ((r = flags_dir_add(di)) || (r = fs_flags_no_change(ti)))
		return r;
	/* after the name check: an existing name is EEXIST even for a directory */
	if (S_ISDIR(ti->mode))
		return -EPERM;
	if (ti->nlink >= UINT32_MAX - 1)
		return -EMLINK;
	ti->nlink++;
	fs_touch(ti, false);
	fs_touch(di, true);
	if ((r = bch_trans_init(c, &t)))
		return fs_ret_errno(r);
	r = fs_dirent_put(t, dir, slot, name, inum, bch_mode_to_dtype(ti->mode));
	if (!r)
		r = fs_ino_set_write(c, &s, t);
	if (!r)
		r = fs_commit(c, t, NULL);
	bch_trans_exit(t);
	return fs_ret_errno(r);
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
		r = err ? err : n ? fs_commit(c, t, NULL) : 0;
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

/* Extent keys a file may have for inode_free_one() to free it whole. */
#define FREE_ONE_KEYS	16

/*
 * fs_inode_free() in one transaction when that is all it takes: no xattrs, no
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
		r = fs_commit(c, t, &u);
	else
		bch_extent_update_abort(c, &u);
	bch_trans_exit(t);
	bch_extent_update_exit(&u);
	return r;
}

int fs_inode_free(struct bch_fs *c, uint64_t inum)
{
	int r = inode_free_one(c, inum);

	if (r != 1)
		return r;
	r = fs_punch_range(c, inum, 0, UINT64_MAX - 1, 0, true);

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
				r = fs_commit(c, t, NULL);
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
 * or an error reading it: *err), free it alone (fs_inode_free(): xattrs or
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
		r = fs_commit(c, t, &u);
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
	bool sorted = true;
	for (size_t i = 0; i < nr; i++) {
		inum[i] = h[i] & BCH_HANDLE_INUM_MASK;
		sorted &= !i || inum[i - 1] <= inum[i];
	}
	/* fusemount's frees come sorted (fm_frees_run()): a sort again cost ~135 instructions a file */
	if (!sorted)
		qsort(inum, nr, sizeof(*inum), cmp_u64);
	for (size_t i = 0; i < nr; i++)	/* once each: a transaction deletes it once */
		how[i] = i && inum[i] == inum[i - 1] ? FREE_SKIP : free_how(c, inum[i], &err);
	for (size_t i = 0; i < nr;)
		if ((r = free_batch(c, inum, how, nr, &i)) && !err)
			err = r;
	for (size_t i = 0; i < nr; i++)
		if (how[i] == FREE_ALONE && (r = fs_inode_free(c, inum[i])) && !err)
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

	if ((r = fs_ino_get(c, &s, dir, &di)))
		return fs_ret_errno(r);
	if (!S_ISDIR(di->mode))
		return -ENOTDIR;
	if (fs_is_dot(name))
		return want_dir ? (!strcmp(name, ".") ? -EINVAL : -ENOTEMPTY) : -EISDIR;
	if ((r = fs_check_name(name)))
		return r;
	/* and whether the offset after it is used: its delete's whiteout, known without a lookup */
	struct name_key nk = { name, strlen(name) };
	bool next_used = false;
	if ((r = bch_hash_lookup_next(c, &fs_dirent_desc, dir, fs_dirent_hash(c, di, name), &nk, &k,
				      &next_used)))
		return fs_ret_errno(r);
	inum = ((const struct bch_dirent *)bkey_val(k))->inum;
	uint64_t slot = k->p.offset;
	bool subvol = ((const struct bch_dirent *)bkey_val(k))->d_type == BCH_DT_SUBVOL;
	free(k);
	if (subvol)
		return bch_fs_err(c, -EPERM, "%s is a subvolume: use subvolume delete", name);
	if ((r = fs_ino_get(c, &s, inum, &ti)))
		return fs_ret_errno(r == -ENOENT ? -EIO : r);	/* dirent to a missing inode: fsck */
	if ((r = fs_flags_no_change(di)) || (r = fs_flags_no_change(ti)))
		return r;
	if (want_dir && !S_ISDIR(ti->mode))
		return -ENOTDIR;
	if (!want_dir && S_ISDIR(ti->mode))
		return -EISDIR;
	if (want_dir) {
		if ((r = dir_is_empty(c, inum)) <= 0)
			return r < 0 ? fs_ret_errno(r) : -ENOTEMPTY;
		di->nlink--;
		ti->nlink = 0;
	} else {
		ti->nlink--;
	}
	fs_touch(di, true);
	fs_touch(ti, false);
	/* an inode with nothing but its key goes in this transaction, else in pieces after */
	bool free_later = c->defer_unlinked_free;	/* (then nothing to look up) */
	if (!ti->nlink && !free_later) {
		int e = 0, x = has_keys(c, BCH_BTREE_ID_xattrs, inum);
		if (x >= 0 && want_dir)
			e = has_keys(c, BCH_BTREE_ID_dirents, inum);
		if (x < 0 || e < 0)
			return fs_ret_errno(x < 0 ? x : e);
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
		return fs_ret_errno(r);
	r = bch_hash_delete_known(t, &fs_dirent_desc, dir, slot, next_used);
	if (!r)
		r = fs_ino_set_write(c, &s, t);
	if (!r)
		r = fs_commit(c, t, NULL);
	bch_trans_exit(t);
	if (!r && free_later && !c->defer_unlinked_free)
		r = fs_inode_free(c, inum);
	return fs_ret_errno(r);
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
	if ((r = fs_dirent_new_slot(c, newdir, nd, newname, &slot)))
		return r;
	struct bch_subvolume nv = svi->v;
	nv.dir = newdir;
	nv.dir_offset = slot;
	if (olddir != newdir) {
		od->nlink--;
		nd->nlink++;
	}
	fs_touch(od, true);
	fs_touch(nd, true);
	if ((r = bch_trans_init(c, &t)))
		return r;
	struct bch_bkey *vk = bch_subvol_key(sv, &nv);
	r = bch_hash_delete_at(c, t, &fs_dirent_desc, olddir, sk->p.offset, olddir == newdir ? slot : 0);
	if (!r)
		r = fs_dirent_put(t, newdir, slot, newname, sv, BCH_DT_SUBVOL);
	if (!r)
		r = bch_trans_update(t, BCH_BTREE_ID_snapshots, vk);
	if (!r)
		r = fs_ino_set_write(c, s, t);
	if (!r)
		r = fs_subvol_commit(c, t);
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
		r = fs_dirent_put(t, dir, slot, name, inum, DT_CHR);
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
	if ((r = fs_metadata_room(c)))
		return fs_ret_errno(r);
	if (fs_is_dot(oldname) || fs_is_dot(newname))
		return -EINVAL;
	if ((r = fs_check_name(oldname)) || (r = fs_check_name(newname)))
		return r;
	if ((r = fs_ino_get(c, &s, olddir, &od)) || (r = fs_ino_get(c, &s, newdir, &nd)))
		return fs_ret_errno(r);
	if (!S_ISDIR(od->mode) || !S_ISDIR(nd->mode))
		return -ENOTDIR;
	if ((r = fs_dirent_lookup(c, olddir, od, oldname, &sk)))
		return fs_ret_errno(r);
	src_inum = ((const struct bch_dirent *)bkey_val(sk))->inum;
	r = fs_dirent_lookup(c, newdir, nd, newname, &dk);
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
	if ((r = fs_ino_get(c, &s, src_inum, &src)))
		goto out;
	if (dk && (r = fs_ino_get(c, &s, dst_inum, &dst)))
		goto out;
	if ((r = fs_flags_no_change(od)) || (r = fs_flags_no_change(src)) ||
	    (r = dk ? fs_flags_no_change(nd) : flags_dir_add(nd)) || (dst && (r = fs_flags_no_change(dst))))
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
	fs_touch(od, true);
	fs_touch(nd, true);
	fs_touch(src, false);
	if (flags & BCH_RENAME_EXCHANGE) {
		r = fs_dirent_put(t, olddir, sk->p.offset, oldname, dst_inum, bch_mode_to_dtype(dst->mode));
		if (!r)
			r = fs_dirent_put(t, newdir, dk->p.offset, newname, src_inum, bch_mode_to_dtype(src->mode));
		fs_touch(dst, false);
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
		if (!dk && (r = fs_dirent_new_slot(c, newdir, nd, newname, &new_slot)))
			goto out;
		r = fs_dirent_put(t, newdir, new_slot, newname, src_inum, bch_mode_to_dtype(src->mode));
		if (!r && (flags & BCH_RENAME_WHITEOUT))
			r = whiteout_put(c, t, olddir, od, sk->p.offset, oldname, wuid, wgid);
		else if (!r)
			r = bch_hash_delete_at(c, t, &fs_dirent_desc, olddir, sk->p.offset,
					       olddir == newdir && !dk ? new_slot : 0);
		if (S_ISDIR(src->mode)) {
			od->nlink--;
			nd->nlink++;
		}
		if (dst) {
			fs_touch(dst, false);
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
		r = fs_ino_set_write(c, &s, t);
	if (!r)
		r = fs_commit(c, t, NULL);
	if (!r && free_dst && !c->defer_unlinked_free)
		r = fs_inode_free(c, dst_inum);
out:
	if (t)
		bch_trans_exit(t);
	free(sk);
	free(dk);
	return fs_ret_errno(r);
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
	if ((r = fs_ino_get(c, &s, inum, &i)))
		return fs_ret_errno(r);
	if ((r = flags_setattr(i, sa)))
		return r;
	if (sa->valid & BCH_SETATTR_SIZE) {
		s.nr = 0;	/* read again after the truncate */
		struct bch_inode cur;
		if ((r = bch_inode_get(c, inum, &cur)))
			return fs_ret_errno(r);
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
	if ((r = fs_ino_get(c, &s, inum, &i)))
		return fs_ret_errno(r);
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
	if ((r = fs_commit_inodes(c, &s)))
		return fs_ret_errno(r);
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

	if ((r = fs_ino_get(c, &s, inum, &i)))
		return fs_ret_errno(r);
	mode_t kill = bch_kill_priv_bits(i->mode, i->gid, cr);
	if (!kill)
		return 0;
	if (c->read_only)
		return -EROFS;
	i->mode &= ~kill;
	i->ctime = bch_now_ns();
	r = fs_commit_inodes(c, &s);
	return r ? fs_ret_errno(r) : (int)kill;
}

/* -------------------------------------------------------------- readdir */

/* ---------------------------------------------------------------- misc */

int bch_fs_statfs(struct bch_fs *c, struct statvfs *st)
{
	uint64_t bs = fs_block_bytes(c);
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
		return fs_ret_errno(r);
	r = bch_inode_update(t, BCH_ROOT_INO, &root);
	if (!r)
		r = fs_commit(c, t, NULL);
	bch_trans_exit(t);
	if (r)
		return fs_ret_errno(r);
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

/* ------------------------------------------- entry points: views of handles */

int bch_fs_lookup(struct bch_fs *c, uint64_t dir, const char *name, uint64_t *inum)
{
	return VIEW_CALL(c, dir, v_lookup(c, dir, name, inum));
}

int bch_fs_getattr(struct bch_fs *c, uint64_t inum, struct stat *st)
{
	return VIEW_CALL(c, inum, v_getattr(c, inum, st, NULL, NULL));
}

int bch_fs_getattr_btime(struct bch_fs *c, uint64_t inum, struct stat *st, int64_t *btime)
{
	return VIEW_CALL(c, inum, v_getattr(c, inum, st, btime, NULL));
}

int bch_fs_getattr_flags(struct bch_fs *c, uint64_t inum, struct stat *st, unsigned *fs_flags)
{
	return VIEW_CALL(c, inum, v_getattr(c, inum, st, NULL, fs_flags));
}

int bch_fs_create(struct bch_fs *c, uint64_t dir, const char *name, mode_t mode, dev_t rdev,
		  uid_t uid, gid_t gid, uint64_t *inum)
{
	struct fs_made made = { .inum = inum };

	return VIEW_CALL(c, dir, v_create(c, dir, name, mode, rdev, uid, gid, &made));
}

int bch_fs_symlink(struct bch_fs *c, uint64_t dir, const char *name, const char *target,
		   uid_t uid, gid_t gid, uint64_t *inum)
{
	struct fs_made made = { .inum = inum };

	return VIEW_CALL(c, dir, v_symlink(c, dir, name, target, uid, gid, &made));
}

int bch_fs_create_stat(struct bch_fs *c, uint64_t dir, const char *name, mode_t mode, dev_t rdev,
		       uid_t uid, gid_t gid, const char *target, uint64_t *inum, struct stat *st,
		       int64_t *btime)
{
	struct fs_made made = { .inum = inum, .st = st, .btime = btime };

	return VIEW_CALL(c, dir, target ? v_symlink(c, dir, name, target, uid, gid, &made)
					: v_create(c, dir, name, mode, rdev, uid, gid, &made));
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
	return fs_ret_errno(err);
}
