// SPDX-License-Identifier: GPL-2.0
/*
 * fs_ops_subvol.c - subvolumes and snapshots for the POSIX layer (fs_ops.h):
 * create, snapshot, delete, the path of a subvolume and the parent
 * lookups (snapshot.h has the snapshot tree itself).
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

/* ------------------------------------------------------------ subvolumes */

int fs_subvol_commit(struct bch_fs *c, struct btree_trans *t)
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

	if ((r = fs_ino_get(c, &s, dir, &di)) || (r = fs_new_name_check(c, dir, di, name, &slot)))
		return fs_ret_errno(r);
	if (pv->ro)
		return -EROFS;
	if ((r = bch_subvol_alloc_id(c, &sv)) || (r = bch_snap_alloc_ids(c, &sn, 1)) ||
	    (r = bch_inode_alloc_num(c, &inum)))
		return fs_ret_errno(r);
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
	fs_touch(di, true);
	if ((r = bch_trans_init(c, &t)))
		return fs_ret_errno(r);
	struct bch_bkey *sk = bch_snap_key(sn, &si), *vk = bch_subvol_key(sv, &v);
	r = bch_trans_update(t, BCH_BTREE_ID_snapshots, sk);
	if (!r)
		r = bch_trans_update(t, BCH_BTREE_ID_snapshots, vk);
	if (!r)
		r = fs_dirent_put(t, dir, slot, name, sv, BCH_DT_SUBVOL);
	if (!r)
		r = fs_ino_set_write(c, &s, t);
	if (!r) {
		struct bch_view nv;
		bch_view_enter_snap(c, &nv, sv, sn, false);
		r = bch_inode_update(t, inum, &root);
		bch_view_exit(&nv);
	}
	if (!r)
		r = fs_subvol_commit(c, t);
	free(sk);
	free(vk);
	bch_trans_exit(t);
	if (!r)
		*ret = bch_handle(sv, inum);
	return fs_ret_errno(r);
}

int bch_fs_subvol_create(struct bch_fs *c, uint64_t dir, const char *name, mode_t mode, uid_t uid,
			 gid_t gid, uint64_t *ret)
{
	int r = bch_snapshots_enable(c);

	return r ? fs_ret_errno(r) : VIEW_CALL(c, dir, v_subvol_create(c, dir, name, mode, uid, gid, ret));
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
	if ((r = fs_ino_get(c, &s, dir, &di)) || (r = fs_new_name_check(c, dir, di, name, &slot)))
		return fs_ret_errno(r);
	if (pv->ro)
		return -EROFS;
	if ((r = bch_subvol_alloc_id(c, &w)) || (r = bch_snap_alloc_ids(c, ids, 2)))
		return fs_ret_errno(r);

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
	fs_touch(di, true);
	if ((r = bch_trans_init(c, &t)))
		return fs_ret_errno(r);
	struct bch_bkey *keys[5] = {
		bch_snap_key(p.id, &p), bch_snap_key(a.id, &a), bch_snap_key(b.id, &b),
		bch_subvol_key(src, &nv), bch_subvol_key(w, &wv),
	};
	for (unsigned i = 0; i < 5 && !r; i++)
		r = bch_trans_update(t, BCH_BTREE_ID_snapshots, keys[i]);
	if (!r) {
		struct bch_view dv;
		bch_view_enter_snap(c, &dv, pv->subvol, dir_snap, false);
		r = fs_dirent_put(t, dir, slot, name, w, BCH_DT_SUBVOL);
		if (!r)
			r = fs_ino_set_write(c, &s, t);
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
		r = fs_subvol_commit(c, t);
	for (unsigned i = 0; i < 5; i++)
		free(keys[i]);
	bch_trans_exit(t);
	if (!r)
		*ret = bch_handle(w, old.root_inum);
	return fs_ret_errno(r);
}

int bch_fs_subvol_snapshot(struct bch_fs *c, uint64_t src, uint64_t dir, const char *name, bool ro,
			   uint64_t *ret)
{
	uint32_t sv = bch_handle_subvol(src);
	const struct bch_subvol_info *svi;
	int r = bch_snapshots_enable(c);

	if (r)
		return fs_ret_errno(r);
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

	if ((r = fs_ino_get(c, &s, dir, &di)))
		return fs_ret_errno(r);
	if (!S_ISDIR(di->mode))
		return -ENOTDIR;
	if (fs_is_dot(name))
		return -EINVAL;
	if ((r = fs_check_name(name)))
		return r;
	if ((r = fs_dirent_lookup(c, dir, di, name, &k)))
		return fs_ret_errno(r);
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
	fs_touch(di, true);
	if ((r = bch_trans_init(c, &t)))
		return fs_ret_errno(r);
	struct bch_bkey del = { .u64s = BCH_BKEY_U64s, .type = BCH_BKEY_deleted,
				.p = POS(BCH_SUBVOL_INO, sv, 0) };
	struct bch_bkey *sk = bch_snap_key(dead.id, &dead);
	r = bch_trans_update(t, BCH_BTREE_ID_snapshots, &del);
	if (!r)
		r = bch_trans_update(t, BCH_BTREE_ID_snapshots, sk);
	if (!r)
		r = bch_hash_delete_at(c, t, &fs_dirent_desc, dir, slot, 0);
	if (!r)
		r = fs_ino_set_write(c, &s, t);
	if (!r)
		r = fs_subvol_commit(c, t);
	free(sk);
	bch_trans_exit(t);
	return fs_ret_errno(r);
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
			return fs_ret_errno(r);
		if (!i.dir || depth > 4096)
			return -ENOENT;
		if ((r = bch_vlookup(c, BCH_BTREE_ID_dirents, POS(i.dir, i.dir_offset, 0), &k)))
			return fs_ret_errno(r);
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
		if (!r && !(r = fs_ret_errno(bch_vlookup(c, BCH_BTREE_ID_dirents,
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
