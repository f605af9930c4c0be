// SPDX-License-Identifier: GPL-2.0
/*
 * fsck_dirents.c - pass 8: directory entries and xattrs (see fsck_files.h).
 *
 * Checks
 *   dirent_bad_dir, dirent_dangling, dirent_to_root (deleted), dirent_type_wrong
 * (corrected), dirent_misplaced (re-hashed: a lookup must reach it),
 * dirent_duplicate (a lookup finds an earlier one), dir_multiple_links;
 * xattr_no_inode, xattr_misplaced, xattr_piece_missing (every piece of a value
 * kept in pieces is there, of the right length), xattr_piece_orphan (a piece
 * whose value no xattr key of its inode names); dirent_subvol_dangling (a
 * name of a subvolume that is gone: deleted).  Names are counted for passes
 * 9 and 10 (a subvolume's name as a subdirectory).
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

static void dirent_where(struct fstate *s, uint64_t dir, const char *name, char *buf, size_t len)
{
	char dw[640];

	fsck_lock(s);
	fsck_inode_where(s->c, dir, dw, sizeof(dw));
	fsck_unlock(s);
	snprintf(buf, len, "%s entry \"%s\"", dw, name);
}

/*
 * A name of another subvolume (BCH_DT_SUBVOL: d->inum is its ID).  The
 * subvolume must exist: a name a snapshot took of its directory outlives
 * the subvolume's delete (normal, so minor), as does one a crash left in
 * the middle of a delete.  It counts as a subdirectory of its directory.
 * The name's hash is checked like any other's; the subvolume's own pointer
 * to its name is checked in pass 4 (fsck_snapshots.c): in a snapshot of
 * the directory the name is a copy, and the pointer names the original.
 */
static int check_subvol_dirent(struct fstate *s, const struct bch_bkey *k,
			       const struct bch_dirent *d, const char *name)
{
	struct bch_fs *c = s->c;
	uint64_t dir = k->p.inode, slot = k->p.offset;
	char where[1024], detail[96];

	if (!d->inum || d->inum > BCH_SUBVOL_MAX || !bch_subvol_get(c, (uint32_t)d->inum)) {
		snprintf(detail, sizeof(detail), "-> subvolume %" PRIu64, (uint64_t)d->inum);
		dirent_where(s, dir, name, where, sizeof(where));
		if (fsck_fixing(s, BCH_FSCK_dirent_subvol_dangling, where, detail)) {
			int r = bch_fs_dirent_delete(c, dir, slot);
			if (!r)
				r = fsck_adjust_nlink(c, dir, -1);
			fsck_fix_done(s, BCH_FSCK_dirent_subvol_dangling, r);
			return s->err;
		}
	}
	int r = 0;
	uint64_t first;
	struct bch_inode dinode;
	fsck_lock(s);
	if (!(r = bch_inode_get(c, dir, &dinode)) && bch_fs_dirent_hash(c, &dinode, name) != slot)
		r = bch_fs_dirent_first(c, dir, &dinode, name, &first);
	else
		first = slot;
	fsck_unlock(s);
	if (r == -ENOENT) {
		snprintf(detail, sizeof(detail), "at %" PRIu64 ", name hashes to %" PRIu64, slot,
			 bch_fs_dirent_hash(c, &dinode, name));
		dirent_where(s, dir, name, where, sizeof(where));
		r = 0;
		if (fsck_fixing(s, BCH_FSCK_dirent_misplaced, where, detail)) {
			/* re-hashed, and the subvolume's pointer to its name (when it is this one) with it */
			const struct bch_subvol_info *sv = bch_subvol_get(c, (uint32_t)d->inum);
			bool named = sv && sv->v.dir_subvol == s->subvol && sv->v.dir == dir &&
				     sv->v.dir_offset == slot;
			struct bch_subvolume nv = sv ? sv->v : (struct bch_subvolume){ 0 };
			uint32_t id = (uint32_t)d->inum;
			r = bch_fs_dirent_delete(c, dir, slot);
			if (!r)
				r = bch_fs_dirent_add(c, dir, name, id, BCH_DT_SUBVOL);
			if (!r)
				r = bch_fs_dirent_first(c, dir, &dinode, name, &first);
			if (!r && named) {
				nv.dir_offset = first;
				struct bch_bkey *n = bch_subvol_key(id, &nv);
				r = fsck_put_key(c, BCH_BTREE_ID_snapshots, n);
				free(n);
				if (!r)
					r = bch_snapshots_load(c);
			}
			fsck_fix_done(s, BCH_FSCK_dirent_misplaced, r);
			if (r)
				return r;
			s->moved = realloc(s->moved, (s->nr_moved + 1) * sizeof(*s->moved));
			if (!s->moved)
				abort();
			s->moved[s->nr_moved++] = POS(dir, first, 0);
		}
	} else if (r) {
		return r;
	} else if (first != slot) {
		snprintf(detail, sizeof(detail), "same name as the entry at %" PRIu64, first);
		dirent_where(s, dir, name, where, sizeof(where));
		if (fsck_fixing(s, BCH_FSCK_dirent_duplicate, where, detail)) {
			r = bch_fs_dirent_delete(c, dir, slot);
			if (!r)
				r = fsck_adjust_nlink(c, dir, -1);
			fsck_fix_done(s, BCH_FSCK_dirent_duplicate, r);
			return s->err;
		}
	}
	fsck_ino_extra(&s->inodes, dir, true)->subdirs++;
	return 0;
}

int fsck_check_dirent(struct fstate *s, const struct bch_bkey *k)
{
	struct bch_fs *c = s->c;
	char where[1024], detail[1024];

	if (k->type != BCH_BKEY_dirent)
		return 0;
	for (size_t i = 0; i < s->nr_moved; i++)
		if (s->moved[i].inode == k->p.inode && s->moved[i].offset == k->p.offset)
			return 0;	/* re-hashed here earlier in this pass: already counted
					 * (in a view the key lies in its snapshot, not 0) */
	const struct bch_dirent *d = bkey_val(k);
	char name[BCH_NAME_MAX + 1];
	memcpy(name, d->name, d->name_len);
	name[d->name_len] = 0;
	uint64_t dir = k->p.inode, slot = k->p.offset;
	struct ino_info dent, tent, *di = fsck_ino_get(&s->inodes, dir, &dent) ? &dent : NULL,
			*ti = fsck_ino_get(&s->inodes, d->inum, &tent) ? &tent : NULL;
	s->stats->dirents++;
#define WHERE()	dirent_where(s, dir, name, where, sizeof(where))

	enum bch_fsck_problem prob = BCH_FSCK_PROBLEM_NR;
	if (!di || !S_ISDIR(ino_mode(di)))
		prob = BCH_FSCK_dirent_bad_dir;
	else if (d->d_type == BCH_DT_SUBVOL)
		return check_subvol_dirent(s, k, d, name);
	else if (!ti || !ino_has_key(ti))
		prob = BCH_FSCK_dirent_dangling;
	else if (d->inum == s->root_inum)
		prob = BCH_FSCK_dirent_to_root;
	if (prob != BCH_FSCK_PROBLEM_NR) {
		snprintf(detail, sizeof(detail), "-> inode %" PRIu64, (uint64_t)d->inum);
		WHERE();
		if (fsck_fixing(s, prob, where, detail))
			fsck_fix_done(s, prob, bch_fs_dirent_delete(c, dir, slot));
		return s->err;
	}

	if (s->nr_data_lost && !S_ISDIR(ino_mode(ti))) {
		/* a file whose data pass 7 found lost: its names go (it goes to lost+found) */
		struct ino_extra *x = fsck_ino_extra(&s->inodes, d->inum, false);
		if (x && x->state == INO_DATA_LOST) {
			int r = bch_fs_dirent_delete(c, dir, slot);
			if (r) {
				WHERE();
				snprintf(s->ctx->err_msg, sizeof(s->ctx->err_msg), "%.400s: %s", where,
					 bch_err_str(r));
				s->err = r;
			}
			return s->err;
		}
	}

	unsigned want = bch_mode_to_dtype(ino_mode(ti));
	if (d->d_type != want) {
		snprintf(detail, sizeof(detail), "type %u, inode is %u", d->d_type, want);
		WHERE();
		if (fsck_fixing(s, BCH_FSCK_dirent_type_wrong, where, detail)) {
			struct bch_bkey *n = bch_bkey_dup(k);
			((struct bch_dirent *)bkey_val(n))->d_type = want;
			fsck_fix_done(s, BCH_FSCK_dirent_type_wrong, fsck_put_key(c, BCH_BTREE_ID_dirents, n));
			free(n);
			if (s->err)
				return s->err;
		}
	}

	/* hash: a lookup of the name must reach this entry */
	uint64_t first;
	int r = 0;
	if (s->dir_cached != dir) {
		/*
		 * Names hash with the directory's seed, which pass 6 kept in its
		 * side entry (0: not known, e.g. a directory fsck made: its key
		 * is read).  Only the seed is used.
		 */
		const struct ino_extra *dx = fsck_ino_extra(&s->inodes, dir, false);
		if (dx && dx->hash_seed) {
			memset(&s->dir_inode, 0, sizeof(s->dir_inode));
			s->dir_inode.hash_seed = dx->hash_seed;
		} else {
			fsck_lock(s);
			r = bch_inode_get(c, dir, &s->dir_inode);
			fsck_unlock(s);
		}
		s->dir_cached = r ? 0 : dir;
	}
	struct bch_inode dinode = s->dir_inode;
	/* at the slot its name hashes to, the lookup's first probe is this entry */
	if (!r && bch_fs_dirent_hash(c, &dinode, name) == slot)
		first = slot;
	else if (!r) {
		fsck_lock(s);
		r = bch_fs_dirent_first(c, dir, &dinode, name, &first);
		fsck_unlock(s);
	}
	if (r == -ENOENT) {
		snprintf(detail, sizeof(detail), "at %" PRIu64 ", name hashes to %" PRIu64, slot,
			 bch_fs_dirent_hash(c, &dinode, name));
		WHERE();
		if (fsck_fixing(s, BCH_FSCK_dirent_misplaced, where, detail)) {
			r = bch_fs_dirent_delete(c, dir, slot);
			if (!r)
				r = bch_fs_dirent_add(c, dir, name, d->inum, bch_mode_to_dtype(ino_mode(ti)));
			fsck_fix_done(s, BCH_FSCK_dirent_misplaced, r);
			if (r)
				return r;
			/* count it now, at its new place, and not again if the scan gets there */
			if (bch_fs_dirent_first(c, dir, &dinode, name, &first))
				return 0;
			slot = first;
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
		if (fsck_fixing(s, BCH_FSCK_dirent_duplicate, where, detail)) {
			fsck_fix_done(s, BCH_FSCK_dirent_duplicate, bch_fs_dirent_delete(c, dir, slot));
			return s->err;
		}
	}

	if (S_ISDIR(ino_mode(ti))) {
		struct ino_extra *tx = fsck_ino_extra(&s->inodes, d->inum, true);
		if (ino_named(ti)) {
			char tw[640];
			fsck_lock(s);
			fsck_inode_where(c, d->inum, tw, sizeof(tw));
			fsck_unlock(s);
			snprintf(detail, sizeof(detail), "%s is already named in directory %" PRIu64, tw,
				 tx->parent);
			WHERE();
			if (fsck_fixing(s, BCH_FSCK_dir_multiple_links, where, detail)) {
				fsck_fix_done(s, BCH_FSCK_dir_multiple_links, bch_fs_dirent_delete(c, dir, slot));
				return s->err;
			}
		}
		if (!ino_named(ti)) {
			tx->parent = dir;
			tx->parent_slot = slot;
		}
		fsck_ino_set_names(&s->inodes, d->inum, ti, fsck_ino_names(&s->inodes, d->inum, ti) + 1);
		fsck_ino_put(&s->inodes, d->inum, ti);
		fsck_ino_extra(&s->inodes, dir, true)->subdirs++;
	} else {
		/*
		 * A file of one link: its name must be where its pointer points
		 * (a second name is another problem, nlink_wrong, and not taken).
		 * Of several: the name with the pointer's fingerprint.  Taken so
		 * here, confirmed as a whole in pass 10 (the sums).
		 */
		if ((ti->bits & (INO_HAS_BP | INO_LOADED | INO_BP_NAMED)) == (INO_HAS_BP | INO_LOADED) &&
		    (fsck_ino_nlink(&s->inodes, d->inum, ti) == 1 ||
		     fsck_ino_fp(&s->inodes, d->inum) == fsck_bp_fp(dir, slot))) {
			ti->bits |= INO_BP_NAMED;
			s->bp_sum_names += fsck_bp_hash(d->inum, dir, slot);
		}
		fsck_ino_set_names(&s->inodes, d->inum, ti, fsck_ino_names(&s->inodes, d->inum, ti) + 1);
		fsck_ino_put(&s->inodes, d->inum, ti);
	}
	return 0;
#undef WHERE
}

/* The pieces field of an xattr of s->xattr_inum that names id, or 0. */
static uint32_t xattr_named(struct fstate *s, uint64_t inum, uint32_t id)
{
	if (inum != s->xattr_inum)
		return 0;
	for (size_t n = 0; n < s->nr_xattr_pieces; n++)
		if (BCH_XATTR_PIECES_ID(s->xattr_pieces[n]) == id)
			return s->xattr_pieces[n];
	return 0;
}

static int xattr_pieces_note(struct fstate *s, uint64_t inum, uint32_t pieces)
{
	if (inum != s->xattr_inum) {
		s->xattr_inum = inum;
		s->nr_xattr_pieces = 0;
	}
	if (s->nr_xattr_pieces == s->xattr_pieces_cap) {
		size_t cap = s->xattr_pieces_cap ? 2 * s->xattr_pieces_cap : 16;
		uint32_t *n = realloc(s->xattr_pieces, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		s->xattr_pieces = n;
		s->xattr_pieces_cap = cap;
	}
	s->xattr_pieces[s->nr_xattr_pieces++] = pieces;
	return 0;
}

static int check_xattr_piece(struct fstate *s, const struct bch_bkey *k)
{
	uint32_t id = BCH_XATTR_PIECE_POS_ID(k->p.offset);
	uint32_t pieces = xattr_named(s, k->p.inode, id);
	char where[640], detail[96];

	if (pieces && BCH_XATTR_PIECE_POS_N(k->p.offset) < BCH_XATTR_PIECES_NR(pieces))
		return 0;
	/* one problem per value: its first orphan piece stands for the rest */
	if (s->orphan_seen && s->orphan_inum == k->p.inode && s->orphan_id == id)
		return 0;
	s->orphan_seen = true;
	s->orphan_inum = k->p.inode;
	s->orphan_id = id;
	fsck_lock(s);
	fsck_inode_where(s->c, k->p.inode, where, sizeof(where));
	fsck_unlock(s);
	snprintf(detail, sizeof(detail), "value id %u, from piece %u",
		 (unsigned)id, BCH_XATTR_PIECE_POS_N(k->p.offset));
	if (fsck_fixing(s, BCH_FSCK_xattr_piece_orphan, where, detail))
		fsck_fix_done(s, BCH_FSCK_xattr_piece_orphan,
			      bch_fs_xattr_pieces_drop(s->c, k->p.inode, id,
						       pieces ? BCH_XATTR_PIECES_NR(pieces) : 0));
	return s->err;
}

/* A value kept in pieces: all there (or the xattr goes, and its pieces with it). */
static int check_xattr_pieces(struct fstate *s, const struct bch_bkey *k, uint64_t slot)
{
	const struct bch_xattr *x = bkey_val(k);
	char where[640], detail[96];
	fsck_lock(s);
	int r = bch_fs_xattr_pieces_check(s->c, k->p.inode, x->pieces);

	if (r != -EIO) {
		fsck_unlock(s);
		return r ? r : xattr_pieces_note(s, k->p.inode, x->pieces);
	}
	s->c->err_msg[0] = 0;
	fsck_inode_where(s->c, k->p.inode, where, sizeof(where));
	fsck_unlock(s);
	snprintf(detail, sizeof(detail), "value id %u of %u pieces",
		 BCH_XATTR_PIECES_ID(x->pieces), BCH_XATTR_PIECES_NR(x->pieces));
	if (!fsck_fixing(s, BCH_FSCK_xattr_piece_missing, where, detail))
		/* left: its pieces are not orphans */
		return s->err ? s->err : xattr_pieces_note(s, k->p.inode, x->pieces);
	r = bch_fs_xattr_delete_at(s->c, k->p.inode, slot);
	if (!r)
		r = bch_fs_xattr_pieces_drop(s->c, k->p.inode, BCH_XATTR_PIECES_ID(x->pieces), 0);
	fsck_fix_done(s, BCH_FSCK_xattr_piece_missing, r);
	return s->err;
}

int fsck_check_xattr(struct fstate *s, const struct bch_bkey *k)
{
	char where[640];

	if (k->type == BCH_BKEY_xattr_piece)
		return check_xattr_piece(s, k);
	if (k->type != BCH_BKEY_xattr)
		return 0;
	s->stats->xattrs++;
	struct ino_info ii;
	if (!fsck_ino_get(&s->inodes, k->p.inode, &ii) || !ino_has_key(&ii)) {
		fsck_lock(s);
		fsck_inode_where(s->c, k->p.inode, where, sizeof(where));
		fsck_unlock(s);
		if (fsck_fixing(s, BCH_FSCK_xattr_no_inode, where, NULL))
			fsck_fix_done(s, BCH_FSCK_xattr_no_inode, fsck_delete_key(s->c, BCH_BTREE_ID_xattrs, k->p));
		return s->err;
	}
	struct bch_inode i;
	uint64_t first;
	fsck_lock(s);
	int r = bch_inode_get(s->c, k->p.inode, &i);
	if (!r)
		r = bch_fs_xattr_first(s->c, k->p.inode, &i, k, &first);
	if (r == -ENOENT)
		fsck_inode_where(s->c, k->p.inode, where, sizeof(where));
	fsck_unlock(s);
	if (r == -ENOENT) {
		if (fsck_fixing(s, BCH_FSCK_xattr_misplaced, where, NULL))
			fsck_fix_done(s, BCH_FSCK_xattr_misplaced, bch_fs_xattr_reinsert(s->c, k->p.inode, &i, k));
		if (s->err || !((const struct bch_xattr *)bkey_val(k))->pieces)
			return s->err;
		/* re-hashed (or left where it was): its pieces are still its own */
		fsck_lock(s);
		r = bch_fs_xattr_first(s->c, k->p.inode, &i, k, &first);
		fsck_unlock(s);
		if (r && r != -ENOENT)
			return r;
		return check_xattr_pieces(s, k, r ? k->p.offset : first);
	}
	if (r)
		return r;
	if (((const struct bch_xattr *)bkey_val(k))->pieces)
		return check_xattr_pieces(s, k, k->p.offset);
	return 0;
}
