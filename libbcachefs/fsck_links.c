// SPDX-License-Identifier: GPL-2.0
/*
 * fsck_links.c - pass 10: link counts and parent pointers (see fsck_files.h).
 *
 * Checks
 *   nlink_wrong (files: their names; directories: 2 + subdirectories),
 * inode_back_pointer (a directory's parent pointer names its one name, a
 * file's one of its names).
 *
 * Parent pointers are mostly checked without reading a key or a dirent.  A
 * file of one link has one name, and pass 8 takes that name as the one its
 * pointer names; a file of several links, the name whose 16-bit
 * fingerprint is its pointer's (fsck_ino_fp()); a directory's first name
 * is taken here when its fingerprint (in the side entry) is its pointer's.
 * Each is INO_BP_NAMED.  The whole is confirmed: pass 6 sums fsck_bp_hash()
 * of every key's pointer (bp_sum_keys); each pointer is summed once more
 * (bp_sum_names), as the name it was taken on, or as the key says when it
 * was checked exactly here (its dirent read).  When the sums differ, a name
 * taken was not the pointer's (or damage elsewhere left one out):
 * bp_recheck() looks at every pointer taken exactly.  A wrong pointer slips
 * through only if 64-bit sums collide.
 *
 * After repairs the keys may have changed since pass 6: then every inode
 * key is read again and every pointer checked exactly (bp_exact).
 *
 * A file whose pointer names no dirent of its own (and that is not in
 * lost+found, where pass 9 named it) gets the first name one scan of the
 * dirents finds, at the end (bp_lost_resolve()).
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

/* Is there a dirent at (dir, slot), and does it name inum? */
static bool bp_dirent_ok(struct bch_fs *c, uint64_t inum, uint64_t dir, uint64_t slot)
{
	struct bch_bkey *d;
	bool ok = !bch_vlookup(c, BCH_BTREE_ID_dirents, POS(dir, slot, 0), &d);

	if (ok) {
		ok = d->type == BCH_BKEY_dirent &&
		     ((const struct bch_dirent *)bkey_val(d))->inum == inum;
		free(d);
	}
	return ok;
}

static void bp_lost_add(struct fstate *s, uint64_t inum)
{
	if (s->nr_bp_lost == s->bp_lost_cap) {
		s->bp_lost_cap = s->bp_lost_cap ? 2 * s->bp_lost_cap : 16;
		s->bp_lost = realloc(s->bp_lost, s->bp_lost_cap * sizeof(*s->bp_lost));
		if (!s->bp_lost)
			abort();
	}
	s->bp_lost[s->nr_bp_lost++] = (struct bp_lost){ .inum = inum };
}

static void bp_report(struct fstate *s, uint64_t inum, const struct bch_inode *in,
		      struct bch_inode *n, uint64_t parent, uint64_t parent_slot)
{
	char where[640], detail[160];

	fsck_inode_where(s->c, inum, where, sizeof(where));
	snprintf(detail, sizeof(detail), "parent %" PRIu64 " offset %" PRIu64, (uint64_t)in->dir,
		 (uint64_t)in->dir_offset);
	if (fsck_fixing(s, BCH_FSCK_inode_back_pointer, where, detail)) {
		n->dir = inum == s->root_inum ? 0 : parent;
		n->dir_offset = inum == s->root_inum ? 0 : parent_slot;
		bch_fsck_fixed(s->ctx, BCH_FSCK_inode_back_pointer);
	}
}

/*
 * The parent pointer of in, exactly (taken: a file's name counted in pass
 * 8 was taken as the pointer's; not looked at again unless bp_exact).
 * Reports and sets n's pointer when wrong.
 */
static void check_bp(struct fstate *s, uint64_t inum, const struct bch_inode *in,
		     struct bch_inode *n, const struct ino_extra *x, bool taken)
{
	uint64_t parent = x ? x->parent : 0, parent_slot = x ? x->parent_slot : 0;
	bool ok = true;

	if (inum == s->root_inum) {
		ok = !in->dir;
	} else if (S_ISDIR(in->mode)) {
		ok = in->dir == parent && in->dir_offset == parent_slot;
	} else if (in->dir && (s->bp_exact || !taken) &&
		   !bp_dirent_ok(s->c, inum, in->dir, in->dir_offset)) {
		if (x && x->parent)
			ok = false;	/* its name in lost+found */
		else
			bp_lost_add(s, inum);	/* no name known yet: see bp_lost_resolve() */
	}
	if (!ok)
		bp_report(s, inum, in, n, parent, parent_slot);
}

static int check_links_one(struct fstate *s, uint64_t inum, struct ino_info *ii,
			   const struct bch_bkey *k)
{
	struct bch_fs *c = s->c;
	char where[640], detail[160];

	if (k->type != BCH_BKEY_inode)
		return 0;
	const struct bch_inode in = *(const struct bch_inode *)bkey_val(k);
	struct bch_inode n = in;
	bool dir = S_ISDIR(in.mode);
	bool taken = !dir && in.dir && (ii->bits & INO_BP_NAMED);
	/* summed in pass 8 when taken there; checked exactly here otherwise */
	if (in.dir && !taken)
		s->bp_sum_names += fsck_bp_hash(inum, in.dir, in.dir_offset);
	/* directories: always a side entry; files: rarely one */
	struct ino_extra *x = fsck_ino_extra(&s->inodes, inum, dir);
	uint32_t names = fsck_ino_names(&s->inodes, inum, ii);
	uint32_t want = dir ? 2 + x->subdirs : names;
	if (!dir && !names)
		return 0;	/* left unreachable: reported in pass 9 */
	if (in.nlink != want || (in.flags & BCH_INODE_UNLINKED)) {
		fsck_inode_where(c, inum, where, sizeof(where));
		snprintf(detail, sizeof(detail), "nlink %u, counted %u%s", (unsigned)in.nlink, want,
			 (in.flags & BCH_INODE_UNLINKED) ? " (marked unlinked)" : "");
		if (fsck_fixing(s, BCH_FSCK_nlink_wrong, where, detail)) {
			n.nlink = want;
			n.flags &= ~BCH_INODE_UNLINKED;
			bch_fsck_fixed(s->ctx, BCH_FSCK_nlink_wrong);
		}
	}
	check_bp(s, inum, &in, &n, x, taken);
	if (memcmp(&n, &in, sizeof(n)))
		return fsck_update_inode(c, inum, &n);
	return 0;
}

static int check_links_key(struct fstate *s, const struct bch_bkey *k)
{
	struct ino_info ii;

	if (!fsck_ino_get(&s->inodes, k->p.offset, &ii) || !ino_has_key(&ii))
		return 0;
	return check_links_one(s, k->p.offset, &ii, k);
}

/*
 * What check_links_one() decides from the inode's key, decided from the
 * table: true when it would find nothing (false: maybe).  A directory
 * whose first name has its pointer's fingerprint is accepted here (and
 * its entry kept so).
 */
static bool links_ok(struct fstate *s, uint64_t inum, struct ino_info *ii)
{
	bool dir = S_ISDIR(ino_mode(ii));
	const struct ino_extra *x = dir || s->nr_unlinked_keys ?
		fsck_ino_extra(&s->inodes, inum, false) : NULL;

	if (!(ii->bits & INO_LOADED) || (dir && !x) || (x && x->unlinked))
		return false;
	uint32_t want = dir ? 2 + x->subdirs : fsck_ino_names(&s->inodes, inum, ii);
	if (!dir && !want)
		return true;
	if (fsck_ino_nlink(&s->inodes, inum, ii) != want)
		return false;
	if (inum == s->root_inum)
		return !(ii->bits & INO_HAS_BP);
	if (!dir)
		return !(ii->bits & INO_HAS_BP) || (ii->bits & INO_BP_NAMED);
	if (!(ii->bits & INO_HAS_BP))
		return !x->parent;
	if (!x->parent || x->bp_fp != fsck_bp_fp(x->parent, x->parent_slot))
		return false;
	ii->bits |= INO_BP_NAMED;
	fsck_ino_put(&s->inodes, inum, ii);
	s->bp_sum_names += fsck_bp_hash(inum, x->parent, x->parent_slot);
	return true;
}

/* The sums differ: every pointer taken on a name, exactly. */
static int bp_recheck(struct fstate *s)
{
	size_t pos = 0;
	uint64_t inum;

	s->bp_exact = true;
	for (struct ino_info ii; !s->err && !s->ctx->cancelled &&
				 fsck_ino_next(&s->inodes, &pos, &inum, &ii);) {
		if (!(ii.bits & INO_BP_NAMED) || !ino_has_key(&ii))
			continue;
		struct bch_bkey *k;
		int r = bch_vlookup(s->c, BCH_BTREE_ID_inodes, POS(0, inum, 0), &k);
		if (r == -BCH_ERR_key_not_found)
			continue;
		if (r)
			return r;
		if (k->type == BCH_BKEY_inode) {
			const struct bch_inode in = *(const struct bch_inode *)bkey_val(k);
			struct bch_inode n = in;
			check_bp(s, inum, &in, &n, fsck_ino_extra(&s->inodes, inum, false), false);
			if (memcmp(&n, &in, sizeof(n)))
				r = fsck_update_inode(s->c, inum, &n);
		}
		free(k);
		if (r)
			return r;
	}
	return s->err;
}

static int bp_lost_cmp(const void *a, const void *b)
{
	const struct bp_lost *x = a, *y = b;

	return x->inum < y->inum ? -1 : x->inum > y->inum;
}

static int bp_lost_name(struct fstate *s, const struct bch_bkey *k)
{
	if (k->type != BCH_BKEY_dirent)
		return 0;
	struct bp_lost key = { .inum = ((const struct bch_dirent *)bkey_val(k))->inum };
	struct bp_lost *l = bsearch(&key, s->bp_lost, s->nr_bp_lost, sizeof(key), bp_lost_cmp);
	if (l && !l->dir) {
		l->dir = k->p.inode;
		l->slot = k->p.offset;
	}
	return 0;
}

/* Files whose pointer names no dirent of theirs: the first name a scan finds is the new one. */
static int bp_lost_resolve(struct fstate *s)
{
	int r = 0;

	if (!s->nr_bp_lost)
		return 0;
	qsort(s->bp_lost, s->nr_bp_lost, sizeof(*s->bp_lost), bp_lost_cmp);
	if ((r = fsck_for_each_key(s, BCH_BTREE_ID_dirents, bp_lost_name)))
		return r;
	for (size_t i = 0; i < s->nr_bp_lost && !r; i++) {
		const struct bp_lost *l = &s->bp_lost[i];
		struct bch_inode in, n;
		if (i && l->inum == l[-1].inum)
			continue;
		if (!l->dir || bch_inode_get(s->c, l->inum, &in))
			continue;	/* nameless: pass 9's */
		n = in;
		bp_report(s, l->inum, &in, &n, l->dir, l->slot);
		if (memcmp(&n, &in, sizeof(n)))
			r = fsck_update_inode(s->c, l->inum, &n);
	}
	free(s->bp_lost);
	s->bp_lost = NULL;
	s->nr_bp_lost = s->bp_lost_cap = 0;
	return r ? r : s->err;
}

int fsck_check_links(struct fstate *s)
{
	int r = 0;

	/*
	 * Repairs so far may have changed inodes behind the table's copies:
	 * then every inode key is read again, every pointer checked exactly.
	 * Otherwise the table says which inodes need a look (a file whose
	 * pointer no name was taken for is looked at, as its dirent must be
	 * read).
	 */
	if (bch_fsck_nr_fixed(s->ctx)) {
		s->bp_exact = true;
		r = fsck_for_each_key(s, BCH_BTREE_ID_inodes, check_links_key);
		return r ? r : s->err ? s->err : bp_lost_resolve(s);
	}
	size_t pos = 0;
	uint64_t inum;
	for (struct ino_info ii; !s->err && !s->ctx->cancelled &&
				 fsck_ino_next(&s->inodes, &pos, &inum, &ii);) {
		if (!ino_has_key(&ii) || links_ok(s, inum, &ii))
			continue;
		struct bch_bkey *k;
		r = bch_vlookup(s->c, BCH_BTREE_ID_inodes, POS(0, inum, 0), &k);
		if (r == -BCH_ERR_key_not_found)
			continue;
		if (r)
			return r;
		r = check_links_one(s, inum, &ii, k);
		free(k);
		if (r)
			return r;
	}
	if (s->err || s->ctx->cancelled)
		return s->err;
	if (s->bp_sum_names != s->bp_sum_keys && (r = bp_recheck(s)))
		return r;
	return bp_lost_resolve(s);
}
