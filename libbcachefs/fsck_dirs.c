// SPDX-License-Identifier: GPL-2.0
/*
 * fsck_dirs.c - pass 9: directory structure (see fsck_files.h).
 *
 * Checks
 *   root_missing (a new root before the dirents are checked), lost_found_missing,
 * dir_unreachable and inode_unreachable (to lost+found as #inum), dir_loop
 * (the loop is cut and one directory moved to lost+found), inode_unlinked
 * (nothing names it and it was being deleted: the delete is finished).
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
#include "snapshot.h"
#include "super.h"
#include "fsck_files.h"

/* Before the dirents are checked: a root to hang them from. */
int fsck_check_root(struct fstate *s)
{
	struct ino_info root;
	char where[96];

	if (fsck_ino_get(&s->inodes, s->root_inum, &root) && S_ISDIR(ino_mode(&root)))
		return 0;
	if (s->snapshots)
		snprintf(where, sizeof(where), "subvolume %u inode %" PRIu64 " (/)", s->subvol, s->root_inum);
	else
		snprintf(where, sizeof(where), "inode %" PRIu64 " (/)", s->root_inum);
	if (!fsck_fixing(s, BCH_FSCK_root_missing, where, NULL))
		return 0;
	struct bch_inode ri;
	bch_inode_init(s->c, &ri, s->root_inum, S_IFDIR | 0755, 0, 0, 0, NULL);
	int r = fsck_update_inode(s->c, s->root_inum, &ri);
	fsck_fix_done(s, BCH_FSCK_root_missing, r);
	if (!r) {
		fsck_ino_get_new(&s->inodes, s->root_inum, &root);
		ino_set_mode(&root, ri.mode);
		fsck_ino_put(&s->inodes, s->root_inum, &root);
		fsck_ino_extra(&s->inodes, s->root_inum, true);
	}
	return r;
}

static uint64_t lost_found;

static int need_lost_found(struct fstate *s)
{
	uint64_t inum;

	if (lost_found)
		return 0;
	if (!bch_fs_lookup(s->c, s->root_inum, "lost+found", &inum)) {
		inum &= BCH_HANDLE_INUM_MASK;	/* in a view fs_ops answers handles (fs_ops.h) */
		struct ino_info ii;
		if (fsck_ino_get(&s->inodes, inum, &ii) && S_ISDIR(ino_mode(&ii))) {
			lost_found = inum;
			return 0;
		}
	}
	char where[48] = "/lost+found";
	if (s->snapshots)
		snprintf(where, sizeof(where), "subvolume %u /lost+found", s->subvol);
	if (!fsck_fixing(s, BCH_FSCK_lost_found_missing, where, NULL))
		return -ENOENT;
	int r = bch_fs_create(s->c, s->root_inum, "lost+found", S_IFDIR | 0700, 0, 0, 0, &inum);
	fsck_fix_done(s, BCH_FSCK_lost_found_missing, r);
	if (r)
		return r;
	inum &= BCH_HANDLE_INUM_MASK;
	struct ino_info ii;
	fsck_ino_get_new(&s->inodes, inum, &ii);
	struct ino_extra *x = fsck_ino_extra(&s->inodes, inum, true);
	struct bch_inode root;
	ino_set_mode(&ii, S_IFDIR);
	fsck_ino_set_names(&s->inodes, inum, &ii, 1);
	fsck_ino_put(&s->inodes, inum, &ii);
	x->parent = s->root_inum;
	if (!bch_inode_get(s->c, s->root_inum, &root))
		bch_fs_dirent_first(s->c, s->root_inum, &root, "lost+found", &x->parent_slot);
	x->state = 2;
	fsck_ino_extra(&s->inodes, s->root_inum, true)->subdirs++;
	/* create() counted the new directory in the root's nlink: keep the table in step */
	lost_found = inum;
	return 0;
}

/* Give inum a name "#inum" in lost+found; *ii (its entry) is changed to match, and kept. */
static int reattach(struct fstate *s, uint64_t inum, struct ino_info *ii)
{
	char name[32];
	int r = need_lost_found(s);

	if (r)
		return r;
	snprintf(name, sizeof(name), "#%" PRIu64, inum);
	r = bch_fs_dirent_add(s->c, lost_found, name, inum, bch_mode_to_dtype(ino_mode(ii)));
	if (r)
		return r;
	uint64_t slot = 0;
	struct bch_inode lf;
	if (!bch_inode_get(s->c, lost_found, &lf))
		bch_fs_dirent_first(s->c, lost_found, &lf, name, &slot);
	fsck_ino_set_names(&s->inodes, inum, ii, 1);
	/* the parent pointer is set to the new name just below */
	ii->bits |= INO_HAS_BP | INO_BP_NAMED;
	fsck_ino_put(&s->inodes, inum, ii);
	struct ino_extra *x = fsck_ino_extra(&s->inodes, inum, S_ISDIR(ino_mode(ii)));
	if (x) {
		x->parent = lost_found;
		x->parent_slot = slot;
		x->bp_fp = fsck_bp_fp(lost_found, slot);
	}
	struct bch_inode in;
	if (!(r = bch_inode_get(s->c, inum, &in))) {
		in.dir = lost_found;
		in.dir_offset = slot;
		r = fsck_update_inode(s->c, inum, &in);
	}
	if (!r && S_ISDIR(ino_mode(ii))) {
		fsck_ino_extra(&s->inodes, lost_found, true)->subdirs++;
		r = fsck_adjust_nlink(s->c, lost_found, 1);
	}
	return r;
}

/* A deleted inode's rebalance_work key, if it has one, goes with it (or it is stale). */
static int work_key_delete(struct bch_fs *c, uint64_t inum)
{
	struct bch_bkey *k = NULL;
	int r = bch_btree_lookup(c, BCH_BTREE_ID_rebalance_work, POS(inum, 0, 0), &k);

	if (r == -BCH_ERR_key_not_found) {
		c->err_msg[0] = 0;
		return 0;
	}
	free(k);
	return r ? r : fsck_delete_key(c, BCH_BTREE_ID_rebalance_work, POS(inum, 0, 0));
}

/*
 * An inode no dirent names: left by a delete that did not finish (nlink 0
 * or UNLINKED: finish it) or lost (unreachable: to lost+found).
 */
static int nameless(struct fstate *s, uint64_t inum, struct ino_info *ii,
		    enum bch_fsck_problem unreachable)
{
	struct bch_fs *c = s->c;
	struct bch_inode in;
	char where[640];
	int r = bch_inode_get(c, inum, &in);

	if (r)
		return r;
	fsck_inode_where(c, inum, where, sizeof(where));
	if (!in.nlink || (in.flags & BCH_INODE_UNLINKED)) {
		if (fsck_fixing(s, BCH_FSCK_inode_unlinked, where, NULL)) {
			r = bch_fs_inode_free(c, inum);
			if (!r && !s->snapshots)	/* with snapshots: other views may have it */
				r = work_key_delete(c, inum);
			fsck_fix_done(s, BCH_FSCK_inode_unlinked, r);
			ii->bits &= ~INO_TYPE;	/* gone */
			fsck_ino_put(&s->inodes, inum, ii);
		}
	} else if (fsck_fixing(s, unreachable, where, NULL)) {
		fsck_fix_done(s, unreachable, reattach(s, inum, ii));
	}
	return 0;
}

int fsck_check_structure(struct fstate *s)
{
	struct bch_fs *c = s->c;
	char where[640];
	int r;

	lost_found = 0;
	fsck_ino_reserve(&s->inodes, 4);	/* root and lost+found may be added below */
	struct ino_info root;
	if (!fsck_ino_get(&s->inodes, s->root_inum, &root) || !S_ISDIR(ino_mode(&root)))
		return 0;	/* not recreated (-n): nothing can be reached */
	fsck_ino_set_state(&s->inodes, s->root_inum, 2);

	/* directories: named once, and every parent chain reaches the root */
	size_t pos = 0;
	uint64_t inum;
	for (struct ino_info ii; !s->err && fsck_ino_next(&s->inodes, &pos, &inum, &ii);) {
		if (!S_ISDIR(ino_mode(&ii)) || fsck_ino_state(&s->inodes, inum) == 2)
			continue;
		if (!ino_named(&ii)) {
			if ((r = nameless(s, inum, &ii, BCH_FSCK_dir_unreachable)))
				return r;
			fsck_ino_set_state(&s->inodes, inum, 2);
			continue;
		}
		/* walk up: state 1 marks this walk's path */
		struct walk { uint64_t inum; bool have; struct ino_info ii; } *path = NULL;
		size_t plen = 0;
		struct walk cur = { inum, true, ii };
		while (cur.have && fsck_ino_state(&s->inodes, cur.inum) == 0 && ino_named(&cur.ii) &&
		       plen < s->inodes.nr + 1) {
			fsck_ino_set_state(&s->inodes, cur.inum, 1);
			path = realloc(path, (plen + 1) * sizeof(*path));
			if (!path)
				abort();
			path[plen++] = cur;
			const struct ino_extra *x = fsck_ino_extra(&s->inodes, cur.inum, false);
			cur.inum = x ? x->parent : 0;
			cur.have = x && fsck_ino_get(&s->inodes, cur.inum, &cur.ii);
		}
		if (cur.have && fsck_ino_state(&s->inodes, cur.inum) == 1) {
			/* cur is on a loop: cut it there */
			fsck_inode_where(c, cur.inum, where, sizeof(where));
			if (fsck_fixing(s, BCH_FSCK_dir_loop, where, NULL)) {
				const struct ino_extra *x = fsck_ino_extra(&s->inodes, cur.inum, false);
				uint64_t parent = x->parent;
				r = bch_fs_dirent_delete(c, parent, x->parent_slot);
				if (!r) {
					struct ino_extra *px = fsck_ino_extra(&s->inodes, parent, false);
					if (px && px->subdirs)
						px->subdirs--;
					r = fsck_adjust_nlink(c, parent, -1);
				}
				if (!r)
					r = reattach(s, cur.inum, &cur.ii);
				fsck_fix_done(s, BCH_FSCK_dir_loop, r);
			}
		}
		/* every directory on the path now reaches the root (or was reported) */
		for (size_t k = 0; k < plen; k++)
			fsck_ino_set_state(&s->inodes, path[k].inum, 2);
		free(path);
	}

	/* files: a name, or deleted when nothing wants them */
	pos = 0;
	for (struct ino_info ii; !s->err && fsck_ino_next(&s->inodes, &pos, &inum, &ii);) {
		if (!ino_has_key(&ii) || S_ISDIR(ino_mode(&ii)) || ino_named(&ii))
			continue;
		if ((r = nameless(s, inum, &ii, BCH_FSCK_inode_unreachable)))
			return r;
	}
	/* directories left unlinked by an interrupted rmdir */
	return s->err;
}
