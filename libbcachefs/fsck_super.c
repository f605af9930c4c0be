// SPDX-License-Identifier: GPL-2.0
/*
 * fsck_super.c - pass 1: superblocks.
 *
 * Checks
 *   sb_none_valid      a device with no valid copy at all (fatal)
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

#include "blockdev.h"
#include "errcode.h"
#include "fsck.h"
#include "super.h"

struct dev_state {
	const char			*path;
	struct bch_blockdev		*bdev;
	struct bch_sb			*sb;	/* this device's newest valid copy */
	struct bch_sb_read_report	report;
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
			struct bch_sb_read_report *r = &devs[i].report;
			/* every copy's reason, whole: sized for them, not a fixed line */
			size_t len = r->nr * (sizeof(r->copies[0].msg) + 48) + 1, n = 0;
			char *all = malloc(len);
			if (!all) {
				ret = -ENOMEM;
				goto out;
			}
			all[0] = 0;
			for (unsigned c = 0; c < r->nr && n < len; c++)
				n += snprintf(all + n, len - n, "%ssector %" PRIu64 ": %s",
					      c ? "; " : "", r->copies[c].offset, r->copies[c].msg);
			bch_fsck_problem(ctx, BCH_FSCK_sb_none_valid, paths[i], all);
			free(all);
			ret = -BCH_ERR_sb_not_found;
			goto out;
		}
		if (ret) {
			snprintf(ctx->err_msg, sizeof(ctx->err_msg), "%s: reading superblock: %s",
				 paths[i], bch_err_str(ret));
			goto out;
		}
		if (!newest || devs[i].sb->seq > newest->seq)
			newest = devs[i].sb;
	}

	/* every device of this filesystem, each once, and every member present */
	bool present[BCH_SB_MEMBERS_MAX] = { false };
	for (unsigned i = 0; i < nr; i++) {
		struct bch_sb *sb = devs[i].sb;
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

	size_t buf_bytes = BCH_SB_BUF_BYTES(newest->layout.sb_max_size_bits);
	for (unsigned i = 0; i < nr && !ctx->cancelled; i++) {
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
	if (sb_ret) {
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
