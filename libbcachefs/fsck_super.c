// SPDX-License-Identifier: GPL-2.0
/*
 * fsck_super.c - pass 1: superblocks.
 *
 * Checks
 *   sb_none_valid      a device with no valid copy at all: when another
 *                      member's superblock is good and names exactly one
 *                      member this device can be (below), every copy is
 *                      rewritten from it; otherwise fatal
 *   sb_wrong_fs        a device whose newest copy is of another filesystem (fatal)
 *   sb_not_member      a device whose index is not a member (fatal)
 *   sb_dup_dev_idx     two devices with the same member index (fatal)
 *   (a member no given device is: an operational error naming it, unless
 *   ctx->degraded; problem sb_member_missing is no longer reported)
 *   sb_dev_newer       a device whose newest copy is older than the
 *                      filesystem's newest: all its copies are rewritten
 *   sb_copy_bad        a damaged copy at a place the layout lists
 *   sb_copy_stale      a valid copy older than the device's newest
 *   sb_layout_bad      a damaged standalone layout record (sector 7), or one
 *                      that lists other places than the superblock
 *   sb_layout_unusable no valid copy has a layout that fits the device (fatal)
 *
 * A device with no valid copy is identified as a member of the newest
 * superblock's table that no other given device is: the only one left over
 * when one device and one member are (the device list says so), or, when
 * more are, the member whose journal bucket headers and btree roots (clean
 * record) are found on it, when that picks exactly one.  Its size must hold
 * the member's buckets, and the layout is its own standalone record (sector
 * 7) when that is valid, else format's default for its size.  Anything else
 * is ambiguous: refused (fatal), nothing written.
 *
 * The newest valid superblock over all devices is the truth; repairs write
 * it (with each device's own index, layout and copy offset: the layout is
 * per device, as the end copy's place depends on the device's size) over the
 * bad copies, then flush.  With -n devices are opened read-only.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uuid/uuid.h>

#include "bkey.h"
#include "blockdev.h"
#include "errcode.h"
#include "fsck.h"
#include "super.h"

struct dev_state {
	const char			*path;
	struct bch_blockdev		*bdev;
	struct bch_sb			*sb;	/* this device's newest valid copy */
	struct bch_sb_read_report	report;
	bool				blank;	/* no valid copy (sb_none_valid) */
	int				member;	/* blank: the member it is, -1 unknown */
	int				got;	/* blank: this round's answer (identify_blank()) */
	bool				conflict; /* blank: another device looks like the same member */
	char				why[160];	/* blank: how it was identified, or why not */
};

/*
 * Would newest, written to this device as member idx with layout, read back
 * as valid?  (Validation includes the layout against the member's buckets and
 * the device's size.)
 */
static bool layout_fits(struct bch_sb *buf, const struct bch_sb *newest, size_t newest_buf,
			const struct bch_sb_layout *layout, unsigned idx, uint64_t dev_sectors)
{
	memcpy(buf, newest, newest_buf);
	buf->layout = *layout;
	buf->dev_idx = idx;
	buf->offset = layout->sb_offset[0];
	bch_sb_set_csum(buf);
	if (bch_sb_validate(buf, newest_buf, NULL, 0))
		return false;
	for (unsigned i = 0; i < layout->nr_superblocks; i++)
		if (layout->sb_offset[i] + (1ULL << layout->sb_max_size_bits) > dev_sectors)
			return false;
	return true;
}

/*
 * This device's layout: its newest copy's, unless that one (damaged in a way
 * its checksum did not catch) does not fit; then that of another valid copy.
 */
static bool pick_layout(struct dev_state *d, struct bch_sb *buf, const struct bch_sb *newest,
			size_t newest_buf, struct bch_sb_layout *ret)
{
	uint64_t dev_sectors = bch_dev_size(d->bdev) >> BCH_SECTOR_SHIFT;
	unsigned idx = d->sb->dev_idx;

	if (layout_fits(buf, newest, newest_buf, &d->sb->layout, idx, dev_sectors)) {
		*ret = d->sb->layout;
		return true;
	}
	for (unsigned i = 0; i < d->report.nr; i++) {
		struct bch_sb_copy_report c;
		struct bch_sb *copy = NULL;
		bool ok = false;

		if (d->report.copies[i].err ||
		    bch_sb_read_copy(d->bdev, d->report.copies[i].offset, &copy, &c))
			continue;
		if (layout_fits(buf, newest, newest_buf, &copy->layout, idx, dev_sectors)) {
			*ret = copy->layout;
			ok = true;
		}
		free(copy);
		if (ok)
			return true;
	}
	return false;
}

/* Check and repair the copies of one device against the newest superblock. */
static int check_dev_copies(struct bch_fsck_ctx *ctx, struct dev_state *d, struct bch_sb *newest,
			    size_t newest_buf)
{
	char where[300], detail[160];
	bool wrote = false;
	int ret = 0;
	unsigned idx = d->sb->dev_idx;
	struct bch_sb *buf = malloc(newest_buf);

	if (!buf)
		return -ENOMEM;

	struct bch_sb_layout layout;
	if (!pick_layout(d, buf, newest, newest_buf, &layout)) {
		bch_fsck_problem(ctx, BCH_FSCK_sb_layout_unusable, d->path, NULL);
		goto out;
	}

	if (d->sb->seq < newest->seq) {
		snprintf(where, sizeof(where), "%s", d->path);
		snprintf(detail, sizeof(detail), "seq %" PRIu64 ", filesystem is at seq %" PRIu64,
			 (uint64_t)d->sb->seq, (uint64_t)newest->seq);
		if (bch_fsck_problem(ctx, BCH_FSCK_sb_dev_newer, where, detail)) {
			memcpy(buf, newest, newest_buf);
			ret = bch_sb_write_dev(d->bdev, buf, idx, &layout);
			if (ret)
				goto out;
			bch_fsck_fixed(ctx, BCH_FSCK_sb_dev_newer);
		}
		goto out;	/* every copy was older or bad: one problem, one repair */
	}

	/* every copy this device's layout lists (read again: the standalone
	 * layout record may have listed other places, or none) */
	for (unsigned i = 0; i < layout.nr_superblocks && i < BCH_SB_LAYOUT_MAX; i++) {
		uint64_t sector = layout.sb_offset[i];
		struct bch_sb_copy_report c = { 0 };
		struct bch_sb *copy = NULL;
		enum bch_fsck_problem p;

		if (!bch_sb_read_copy(d->bdev, sector, &copy, &c))
			free(copy);
		if (c.err)
			p = BCH_FSCK_sb_copy_bad;
		else if (c.seq < d->sb->seq)
			p = BCH_FSCK_sb_copy_stale;
		else
			continue;
		snprintf(where, sizeof(where), "%s: superblock copy at sector %" PRIu64,
			 d->path, sector);
		if (p == BCH_FSCK_sb_copy_bad)
			snprintf(detail, sizeof(detail), "%s", c.msg[0] ? c.msg : bch_err_str(c.err));
		else
			snprintf(detail, sizeof(detail), "seq %" PRIu64 ", newest is %" PRIu64,
				 c.seq, (uint64_t)d->sb->seq);
		if (bch_fsck_problem(ctx, p, where, detail)) {
			memcpy(buf, newest, newest_buf);
			buf->layout = layout;	/* this device's own */
			ret = bch_sb_write_copy(d->bdev, buf, idx, sector);
			if (ret)
				goto out;
			wrote = true;
			bch_fsck_fixed(ctx, p);
		}
	}
	/* the standalone record must list exactly this layout */
	bool layout_differs = false;
	if (!d->report.layout_err) {
		struct bch_sb_layout l;
		if (!bch_dev_read(d->bdev, &l, sizeof(l), BCH_SB_LAYOUT_SECTOR << BCH_SECTOR_SHIFT) &&
		    (l.nr_superblocks != layout.nr_superblocks ||
		     memcmp(l.sb_offset, layout.sb_offset, sizeof(l.sb_offset)) ||
		     l.sb_max_size_bits != layout.sb_max_size_bits))
			layout_differs = true;
	}
	if (d->report.layout_err || layout_differs) {
		snprintf(where, sizeof(where), "%s: superblock layout at sector %u", d->path,
			 BCH_SB_LAYOUT_SECTOR);
		if (bch_fsck_problem(ctx, BCH_FSCK_sb_layout_bad, where,
				     layout_differs ? "does not match the superblock's layout"
				     : d->report.layout_err == -EIO ? "read error" : "bad magic or checksum")) {
			memcpy(buf, newest, newest_buf);
			buf->layout = layout;
			ret = bch_sb_write_layout(d->bdev, buf);
			if (ret)
				goto out;
			wrote = true;
			bch_fsck_fixed(ctx, BCH_FSCK_sb_layout_bad);
		}
	}
	if (wrote)
		ret = bch_dev_flush(d->bdev);
out:
	free(buf);
	return ret;
}

/* ------------------------------------------- a member with no valid copy */

#define EVIDENCE_JOURNAL_BUCKETS	16	/* journal buckets read per member, at most */

/*
 * What on bdev says it is member idx of newest: the journal buckets the
 * superblock gives the member that start with an entry of this filesystem
 * (*journal), and the btree roots of the clean record with a copy on the
 * member whose node is there, with the root's seq (*roots).  False when the
 * device cannot hold the member's buckets.
 */
static bool member_evidence(struct bch_blockdev *bdev, const struct bch_sb *newest, unsigned idx,
			    unsigned *journal, unsigned *roots)
{
	const struct bch_member *m = bch_sb_member(newest, idx);
	uint64_t dev_sectors = bch_dev_size(bdev) >> BCH_SECTOR_SHIFT;

	*journal = *roots = 0;
	if (!m || !bch_member_exists(m) || m->nbuckets * m->bucket_size > dev_sectors)
		return false;

	struct bch_sb_field_journal *jf = bch_sb_get_journal(newest);
	unsigned runs = jf ? (jf->field.u64s * 8 - sizeof(jf->field)) / sizeof(jf->runs[0]) : 0;
	unsigned read = 0;
	for (unsigned r = 0; r < runs && read < EVIDENCE_JOURNAL_BUCKETS; r++) {
		if (jf->runs[r].dev != idx)
			continue;
		for (uint64_t b = jf->runs[r].start; b < jf->runs[r].start + jf->runs[r].nr &&
		     read < EVIDENCE_JOURNAL_BUCKETS; b++, read++) {
			struct bch_jset js;
			if (b >= m->nbuckets ||
			    bch_dev_read(bdev, &js, sizeof(js), (b * m->bucket_size) << BCH_SECTOR_SHIFT))
				continue;
			*journal += js.magic == BCH_JSET_MAGIC &&
				    !memcmp(js.fs_uuid, newest->uuid, BCH_UUID_SIZE);
		}
	}

	struct bch_sb_field_clean *cl = bch_sb_get_clean(newest);
	if (!(newest->flags & BCH_SB_FLAG_CLEAN) || !cl)
		return true;
	const __le64 *p = cl->entries, *end = (const __le64 *)&cl->field + cl->field.u64s;
	while (p < end) {
		const struct bch_jset_entry *e = (const void *)p;
		const struct bch_bkey *k = (const void *)e->_data;
		if (p + 1 + e->u64s > end)
			break;
		p += 1 + e->u64s;
		if (e->type != BCH_JSET_ENTRY_btree_root || e->u64s < BCH_BKEY_U64s ||
		    k->u64s != e->u64s || k->type != BCH_BKEY_btree_ptr)
			continue;
		const struct bch_btree_ptr *bp = bkey_val(k);
		for (unsigned i = 0; i < bch_btree_ptr_nr(k); i++) {
			struct bch_btree_node n;
			if (bp->ptrs[i].dev != idx || bp->ptrs[i].offset >= dev_sectors ||
			    bch_dev_read(bdev, &n, sizeof(n), bp->ptrs[i].offset << BCH_SECTOR_SHIFT))
				continue;
			*roots += n.magic == BCH_BTREE_NODE_MAGIC && n.seq == bp->seq &&
				  !memcmp(n.fs_uuid, newest->uuid, BCH_UUID_SIZE);
		}
	}
	return true;
}

/*
 * One device with no valid copy against the members still unclaimed
 * (taken[]): the member it is, or -1 with d->why saying why not.
 */
static int identify_one(struct dev_state *d, const struct bch_sb *newest, const bool *taken,
			unsigned nr_blank)
{
	unsigned best = 0, best_score = 0, plausible = 0, fits = 0, nr_missing = 0;
	bool tied = false;

	for (unsigned idx = 0; idx < bch_sb_nr_members(newest); idx++) {
		unsigned j, r;
		if (!bch_member_exists(bch_sb_member(newest, idx)) || taken[idx])
			continue;
		nr_missing++;
		if (!member_evidence(d->bdev, newest, idx, &j, &r))
			continue;
		fits++;
		unsigned score = r * 1000 + j;	/* a root with its seq says more than a header */
		if (!score)
			continue;	/* nothing of ours there: perhaps another disk given by mistake */
		if (!plausible++ || score > best_score) {
			best = idx;
			best_score = score;
			tied = false;
		} else if (score == best_score) {
			tied = true;
		}
	}
	if (!nr_missing)
		snprintf(d->why, sizeof(d->why), "every member is another device given: "
			 "this one is not a member");
	else if (!fits)
		snprintf(d->why, sizeof(d->why), "too small for any member not given");
	else if (!plausible)
		snprintf(d->why, sizeof(d->why), "no journal bucket or btree root of a member "
			 "not given is on it: not a device of this filesystem?");
	else if (nr_blank == 1 && nr_missing == 1)
		snprintf(d->why, sizeof(d->why), "the only device given for the only member "
			 "left, and its journal or btree roots are there");
	else if (tied)
		snprintf(d->why, sizeof(d->why), "%u members not given and %u devices without a "
			 "superblock: nothing on it tells which member it is", nr_missing, nr_blank);
	else
		snprintf(d->why, sizeof(d->why), "its journal and btree roots are member %u's", best);
	return (nr_blank == 1 && nr_missing == 1 && plausible) || (plausible && !tied) ? (int)best : -1;
}

/*
 * Which member each device with no valid copy is (d->member, and d->why
 * says how, or why none): see the top of this file.  present[] are the
 * members other devices are.  Rounds: a device told apart by what is on it
 * leaves fewer members for the others, until one is left for one.
 */
static void identify_blank(struct dev_state *devs, unsigned nr, const struct bch_sb *newest,
			   const bool *present)
{
	bool taken[BCH_SB_MEMBERS_MAX];
	bool progress = true;

	memcpy(taken, present, sizeof(taken));
	for (unsigned i = 0; i < nr; i++)
		devs[i].member = -1;
	while (progress) {
		unsigned nr_blank = 0;

		progress = false;
		for (unsigned i = 0; i < nr; i++)
			nr_blank += devs[i].blank && devs[i].member < 0 && !devs[i].conflict;
		for (unsigned i = 0; i < nr; i++)
			devs[i].got = devs[i].blank && devs[i].member < 0 && !devs[i].conflict
				? identify_one(&devs[i], newest, taken, nr_blank) : -1;
		/* two devices found to be the same member: neither is trusted */
		for (unsigned i = 0; i < nr; i++)
			for (unsigned j = i + 1; j < nr; j++)
				if (devs[i].got >= 0 && devs[i].got == devs[j].got) {
					snprintf(devs[i].why, sizeof(devs[i].why), "%s also looks like "
						 "member %d", devs[j].path, devs[i].got);
					snprintf(devs[j].why, sizeof(devs[j].why), "%s also looks like "
						 "member %d", devs[i].path, devs[i].got);
					devs[i].conflict = devs[j].conflict = true;
				}
		for (unsigned i = 0; i < nr; i++)
			if (devs[i].got >= 0 && !devs[i].conflict) {
				devs[i].member = devs[i].got;
				taken[devs[i].got] = true;
				progress = true;
			}
	}
}

/* The layout of a device that has no valid copy: its standalone record, or format's default. */
static bool blank_layout(struct dev_state *d, struct bch_sb *buf, const struct bch_sb *newest,
			 size_t newest_buf, struct bch_sb_layout *ret)
{
	uint64_t dev_sectors = bch_dev_size(d->bdev) >> BCH_SECTOR_SHIFT;
	struct bch_sb_layout l;

	if (!d->report.layout_err &&
	    !bch_dev_read(d->bdev, &l, sizeof(l), BCH_SB_LAYOUT_SECTOR << BCH_SECTOR_SHIFT) &&
	    layout_fits(buf, newest, newest_buf, &l, d->member, dev_sectors)) {
		*ret = l;
		return true;
	}
	uint64_t area = 1ULL << newest->layout.sb_max_size_bits;
	memset(&l, 0, sizeof(l));
	l.magic = BCH_LAYOUT_MAGIC;
	l.sb_max_size_bits = newest->layout.sb_max_size_bits;
	l.nr_superblocks = newest->layout.nr_superblocks < 3 ? newest->layout.nr_superblocks : 3;
	l.sb_offset[0] = BCH_SB_SECTOR;
	l.sb_offset[1] = BCH_SB_SECTOR + area;
	if (l.nr_superblocks == 3 && dev_sectors > area)
		l.sb_offset[2] = (dev_sectors - area) & ~7ULL;
	if (!layout_fits(buf, newest, newest_buf, &l, d->member, dev_sectors))
		return false;
	*ret = l;
	return true;
}

/* Every copy's reason for a device with no valid one, malloc'd (NULL: no memory). */
static char *copies_text(const struct bch_sb_read_report *r, const char *tail)
{
	/* every copy's reason, whole: sized for them, not a fixed line */
	size_t len = r->nr * (sizeof(r->copies[0].msg) + 48) + strlen(tail) + 1, n = 0;
	char *all = malloc(len);

	if (!all)
		return NULL;
	all[0] = 0;
	for (unsigned c = 0; c < r->nr && n < len; c++)
		n += snprintf(all + n, len - n, "%ssector %" PRIu64 ": %s",
			      c ? "; " : "", r->copies[c].offset, r->copies[c].msg);
	if (n < len)
		snprintf(all + n, len - n, "%s", tail);
	return all;
}

/*
 * Report a device with no valid copy and, when it is known which member it
 * is and the answer is yes, write the newest superblock there as that
 * member.  Returns 0 (d->sb set when rewritten), or an error.
 */
static int rebuild_blank(struct bch_fsck_ctx *ctx, struct dev_state *d, const struct bch_sb *newest,
			 size_t newest_buf)
{
	char tail[400], who[160];
	struct bch_sb_layout layout;
	struct bch_sb *buf = malloc(newest_buf);
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	if (d->member >= 0 && !blank_layout(d, buf, newest, newest_buf, &layout)) {
		snprintf(d->why, sizeof(d->why), "no superblock layout fits it");
		d->member = -1;
	}
	if (d->member >= 0)
		snprintf(tail, sizeof(tail), "; it is %s: %s",
			 bch_sb_member_text(newest, d->member, who, sizeof(who)), d->why);
	else
		snprintf(tail, sizeof(tail), "; not rebuilt: %s", d->why);
	char *all = copies_text(&d->report, tail);
	if (!all) {
		ret = -ENOMEM;
		goto out;
	}
	if (d->member < 0) {
		bch_fsck_problem_unfixable(ctx, BCH_FSCK_sb_none_valid, d->path, all);
	} else if (bch_fsck_problem(ctx, BCH_FSCK_sb_none_valid, d->path, all)) {
		memcpy(buf, newest, newest_buf);
		if (!(ret = bch_sb_write_dev(d->bdev, buf, d->member, &layout)) &&
		    !(ret = bch_sb_read(d->bdev, &d->sb, &d->report)))
			bch_fsck_fixed(ctx, BCH_FSCK_sb_none_valid);
	} else {
		ctx->stop = true;	/* the open would not find this member */
	}
	free(all);
out:
	free(buf);
	return ret;
}

int bch_fsck_superblocks(struct bch_fsck_ctx *ctx, char * const *paths, unsigned nr,
			 struct bch_sb **sb_ret)
{
	struct dev_state *devs = calloc(nr, sizeof(*devs));
	struct bch_sb *newest = NULL;
	char detail[200];
	int ret = 0;

	if (!devs)
		return -ENOMEM;

	for (unsigned i = 0; i < nr; i++) {
		devs[i].path = paths[i];
		ret = bch_dev_open(paths[i], ctx->mode == BCH_FSCK_NO ? BCH_DEV_RDONLY : 0,
				   &devs[i].bdev);
		if (ret) {
			snprintf(ctx->err_msg, sizeof(ctx->err_msg), "%s: %s", paths[i],
				 bch_err_str(ret));
			goto out;
		}
		ret = bch_sb_read(devs[i].bdev, &devs[i].sb, &devs[i].report);
		if (ret == -BCH_ERR_sb_not_found) {
			devs[i].blank = true;	/* another member's may rebuild it (below) */
			ret = 0;
			continue;
		}
		if (ret) {
			snprintf(ctx->err_msg, sizeof(ctx->err_msg), "%s: reading superblock: %s",
				 paths[i], bch_err_str(ret));
			goto out;
		}
		if (!newest || devs[i].sb->seq > newest->seq)
			newest = devs[i].sb;
	}
	if (!newest) {
		/* no device has a valid copy: nothing to rebuild from */
		char *all = copies_text(&devs[0].report, nr > 1 ? "; no device given has a valid "
					"superblock to rebuild it from" : "");
		if (!all) {
			ret = -ENOMEM;
			goto out;
		}
		bch_fsck_problem_unfixable(ctx, BCH_FSCK_sb_none_valid, paths[0], all);
		free(all);
		ret = -BCH_ERR_sb_not_found;
		goto out;
	}

	/* every device of this filesystem, each once, and every member present */
	bool present[BCH_SB_MEMBERS_MAX] = { false };
	for (unsigned i = 0; i < nr; i++) {
		struct bch_sb *sb = devs[i].sb;
		if (devs[i].blank)
			continue;
		unsigned idx = sb->dev_idx;

		if (memcmp(sb->uuid, newest->uuid, BCH_UUID_SIZE)) {
			char a[37], b[37];
			uuid_unparse_lower(sb->user_uuid, a);
			uuid_unparse_lower(newest->user_uuid, b);
			snprintf(detail, sizeof(detail), "UUID %s, the others are %s", a, b);
			bch_fsck_problem(ctx, BCH_FSCK_sb_wrong_fs, paths[i], detail);
			ret = -BCH_ERR_sb_mismatch;
			continue;
		}
		struct bch_member *m = bch_sb_member(newest, idx);
		if (!m || !bch_member_exists(m)) {
			snprintf(detail, sizeof(detail), "index %u", idx);
			bch_fsck_problem(ctx, BCH_FSCK_sb_not_member, paths[i], detail);
			ret = -BCH_ERR_sb_mismatch;
			continue;
		}
		if (present[idx]) {
			snprintf(detail, sizeof(detail), "index %u", idx);
			bch_fsck_problem(ctx, BCH_FSCK_sb_dup_dev_idx, paths[i], detail);
			ret = -BCH_ERR_sb_mismatch;
			continue;
		}
		present[idx] = true;
	}
	size_t buf_bytes = BCH_SB_BUF_BYTES(newest->layout.sb_max_size_bits);
	/* devices with no valid copy: rebuilt only when the others agree */
	if (!ret)
		identify_blank(devs, nr, newest, present);
	for (unsigned i = 0; i < nr && !ctx->cancelled; i++) {
		if (!devs[i].blank)
			continue;
		if (ret) {
			snprintf(devs[i].why, sizeof(devs[i].why), "the other devices given disagree");
			devs[i].member = -1;
		}
		if (devs[i].member >= 0)
			present[devs[i].member] = true;	/* given, rewritten or not */
		int r = rebuild_blank(ctx, &devs[i], newest, buf_bytes);
		if (r) {
			snprintf(ctx->err_msg, sizeof(ctx->err_msg), "%s: writing superblock: %s",
				 paths[i], bch_err_str(r));
			ret = r;
			goto out;
		}
		if (devs[i].sb)
			devs[i].blank = false;
	}
	if (!ret && ctx->fatal)
		ret = -BCH_ERR_sb_not_found;
	if (ret || ctx->cancelled)
		goto out;
	/*
	 * A member not given is no damage of the filesystem: checked degraded
	 * (the open says which), or an operational error naming it.
	 */
	for (unsigned idx = 0; idx < bch_sb_nr_members(newest) && !ret; idx++)
		if (bch_member_exists(bch_sb_member(newest, idx)) && !present[idx] &&
		    !ctx->degraded) {
			char who[160];
			snprintf(ctx->err_msg, sizeof(ctx->err_msg), "%s was not given: give every "
				 "device, or -o degraded to check without it",
				 bch_sb_member_text(newest, idx, who, sizeof(who)));
			ret = -BCH_ERR_device_missing;
		}
	if (ret)
		goto out;

	/* (a device left without any valid copy, -n: reported above, ctx->stop set) */
	for (unsigned i = 0; i < nr && !ctx->cancelled; i++) {
		if (devs[i].blank)
			continue;
		ret = check_dev_copies(ctx, &devs[i], newest, buf_bytes);
		if (ret) {
			snprintf(ctx->err_msg, sizeof(ctx->err_msg), "%s: writing superblock: %s",
				 paths[i], bch_err_str(ret));
			goto out;
		}
	}
	if (ctx->fatal) {
		ret = -BCH_ERR_sb_invalid;
		goto out;
	}
	if (sb_ret && !ctx->stop) {
		*sb_ret = malloc(buf_bytes);
		if (!*sb_ret) {
			ret = -ENOMEM;
			goto out;
		}
		memcpy(*sb_ret, newest, buf_bytes);
	}
out:
	for (unsigned i = 0; i < nr; i++) {
		if (devs[i].bdev)
			bch_dev_close(devs[i].bdev);
		free(devs[i].sb);
	}
	free(devs);
	return ret;
}
