// SPDX-License-Identifier: GPL-2.0
/*
 * super_test.c - the superblock: format then read back with random options
 * (round trip), every single-byte change detected, the newest valid copy
 * chosen, backups found when the primary and the layout are destroyed,
 * field resizing, and validation of logically bad superblocks.
 *
 * Seeds are fixed and printed in every failure message.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blockdev.h"
#include "errcode.h"
#include "format.h"
#include "opts.h"
#include "super.h"
#include "tests/lib/tmpdir.h"

static char tmpdir[64];

static void setup(void)
{
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "super");
}

static void teardown(void)
{
	test_tmpdir_remove(tmpdir);
}

TestSuite(super, .init = setup, .fini = teardown);

static char *tmp_path(const char *name)
{
	char *p = malloc(256);

	snprintf(p, 256, "%s/%s", tmpdir, name);
	return p;
}

/* Format nr image files of size bytes each with opts; superblocks only. */
static void format_images(unsigned nr, uint64_t size, const struct bch_opts *opts,
			  struct bch_format_dev *devs)
{
	struct bch_format_args args = { .no_btrees = true };
	char err[256], name[16];

	for (unsigned i = 0; i < nr; i++) {
		snprintf(name, sizeof(name), "d%u.img", i);
		if (!devs[i].path)
			devs[i].path = tmp_path(name);
		devs[i].size = size;
		if (!devs[i].durability)
			devs[i].durability = 1;
	}
	int ret = bch_format(devs, nr, opts, NULL, &args, err, sizeof(err));
	cr_assert_eq(ret, 0, "format: %s", err);
}

static struct bch_sb *read_sb(const char *path, struct bch_sb_read_report *r)
{
	struct bch_blockdev *dev;
	struct bch_sb *sb = NULL;

	cr_assert_eq(bch_dev_open(path, BCH_DEV_RDONLY, &dev), 0);
	int ret = bch_sb_read(dev, &sb, r);
	bch_dev_close(dev);
	return ret ? NULL : sb;
}

static void write_at(const char *path, const void *buf, size_t len, uint64_t off)
{
	struct bch_blockdev *dev;

	cr_assert_eq(bch_dev_open(path, 0, &dev), 0);
	cr_assert_eq(bch_dev_write(dev, buf, len, off), 0);
	bch_dev_close(dev);
}

Test(super, round_trip_random_options)
{
	for (unsigned seed = 1; seed <= 12; seed++) {
		struct bch_format_dev devs[3] = { 0 };
		struct bch_opts o;
		unsigned nr = 1 + seed % 3;

		srandom(seed);
		bch_opts_default(&o);
		bch_opt_set(&o, Opt_metadata_checksum, 1 + random() % 3);
		bch_opt_set(&o, Opt_data_checksum, random() % 4);
		bch_opt_set(&o, Opt_compression, random() % 4);
		bch_opt_set(&o, Opt_block_size, 512U << (random() % 4));
		bch_opt_set(&o, Opt_btree_node_size, 64U * 1024 << (random() % 3));
		bch_opt_set(&o, Opt_metadata_replicas, 1 + random() % nr);
		bch_opt_set(&o, Opt_errors, random() % 3);
		bch_opt_set(&o, Opt_inodes_32bit, random() % 2);
		for (unsigned i = 0; i < nr; i++) {
			devs[i].durability = 1 + random() % 2;
			devs[i].discard = random() % 2;
			devs[i].label = i % 2 ? "hdd" : "ssd";
		}
		format_images(nr, 64 << 20, &o, devs);

		for (unsigned i = 0; i < nr; i++) {
			struct bch_sb_read_report r;
			struct bch_sb *sb = read_sb(devs[i].path, &r);
			struct bch_opts back;
			char label[40];

			cr_assert(sb, "seed %u dev %u: no superblock", seed, i);
			cr_assert_eq(sb->dev_idx, i, "seed %u", seed);
			cr_assert_eq(sb->nr_devices, nr, "seed %u", seed);
			cr_assert_eq(sb->csum_type, o.v[Opt_metadata_checksum], "seed %u", seed);
			cr_assert_eq((uint64_t)sb->block_size << 9, o.v[Opt_block_size], "seed %u", seed);
			cr_assert_eq((uint64_t)sb->btree_node_size << 9, o.v[Opt_btree_node_size],
				     "seed %u", seed);
			bch_opts_from_sb(&back, sb);
			for (unsigned id = 0; id < BCH_OPT_NR; id++)
				if ((bch_opt_table[id].flags & OPT_FS) && bch_opt_is_set(&o, id))
					cr_assert_eq(back.v[id], o.v[id], "seed %u: option %s",
						     seed, bch_opt_table[id].name);
			for (unsigned m = 0; m < nr; m++) {
				struct bch_member *mi = bch_sb_member(sb, m);
				cr_assert(mi && bch_member_exists(mi), "seed %u member %u", seed, m);
				cr_assert_eq(mi->durability, devs[m].durability, "seed %u", seed);
				cr_assert_eq(mi->discard, devs[m].discard, "seed %u", seed);
				cr_assert(mi->label, "seed %u member %u has no label", seed, m);
				cr_assert_str_eq(bch_sb_label_name(sb, mi->label - 1, label, sizeof(label)),
						 devs[m].label, "seed %u", seed);
			}
			/* every copy valid, all with the same seq */
			for (unsigned c = 0; c < r.nr; c++)
				cr_assert_eq(r.copies[c].err, 0, "seed %u copy %u: %s", seed, c,
					     r.copies[c].msg);
			free(sb);
		}
		for (unsigned i = 0; i < nr; i++) {
			unlink(devs[i].path);
			free((char *)devs[i].path);
		}
	}
}

/* Any single changed byte inside a superblock image fails validation. */
Test(super, every_byte_flip_detected)
{
	static const unsigned csums[] = { BCH_CSUM_crc32c, BCH_CSUM_crc64, BCH_CSUM_xxhash64 };

	for (unsigned c = 0; c < 3; c++) {
		struct bch_format_dev devs[2] = { 0 };
		struct bch_opts o;
		char err[128];

		bch_opts_default(&o);
		bch_opt_set(&o, Opt_metadata_checksum, csums[c]);
		format_images(2, 32 << 20, &o, devs);
		struct bch_sb *sb = read_sb(devs[0].path, NULL);
		cr_assert(sb);
		size_t bytes = bch_sb_bytes(sb), buf_bytes = BCH_SB_BUF_BYTES(sb->layout.sb_max_size_bits);
		struct bch_sb *copy = malloc(buf_bytes);

		cr_assert_eq(bch_sb_validate(sb, buf_bytes, err, sizeof(err)), 0, "%s", err);
		for (size_t i = 0; i < bytes; i++)
			for (unsigned bit = 0; bit < 8; bit += 3) {
				memcpy(copy, sb, buf_bytes);
				((unsigned char *)copy)[i] ^= 1U << bit;
				cr_assert_neq(bch_sb_validate(copy, buf_bytes, err, sizeof(err)), 0,
					      "csum %u: flip of byte %zu bit %u not detected", csums[c],
					      i, bit);
			}
		free(copy);
		free(sb);
		for (unsigned i = 0; i < 2; i++) {
			unlink(devs[i].path);
			free((char *)devs[i].path);
		}
	}
}

Test(super, damaged_primary_served_by_backup)
{
	struct bch_format_dev devs[1] = { 0 };
	struct bch_opts o;
	struct bch_sb_read_report r;

	bch_opts_default(&o);
	format_images(1, 64 << 20, &o, devs);
	struct bch_sb *good = read_sb(devs[0].path, NULL);

	/* one flipped byte in copy 0 */
	unsigned char b = 0x5a;
	write_at(devs[0].path, &b, 1, BCH_SB_SECTOR * 512 + 300);
	struct bch_sb *sb = read_sb(devs[0].path, &r);
	cr_assert(sb, "backup not found");
	cr_assert_neq(r.copies[0].err, 0, "damage in copy 0 not reported");
	cr_assert_neq(r.chosen, 0);
	cr_assert_eq(memcmp(sb->uuid, good->uuid, 16), 0);
	free(sb);

	/* layout and copy 0 both destroyed: probing finds copy 1 */
	char zero[4096] = { 0 };
	write_at(devs[0].path, zero, 4096, BCH_SB_LAYOUT_SECTOR * 512);
	sb = read_sb(devs[0].path, &r);
	cr_assert(sb, "backup not found without the layout");
	cr_assert_neq(r.layout_err, 0);
	free(sb);

	/* copy 1 destroyed too: the end-of-device copy serves */
	write_at(devs[0].path, zero, 4096, (BCH_SB_SECTOR + (1U << BCH_SB_MAX_SIZE_BITS)) * 512);
	sb = read_sb(devs[0].path, &r);
	cr_assert(sb, "end copy not found");
	cr_assert_eq(memcmp(sb->uuid, good->uuid, 16), 0);
	free(sb);

	/* every copy gone: sb_not_found, with a reason per copy */
	for (unsigned i = 0; i < r.nr; i++)
		write_at(devs[0].path, zero, 4096, r.copies[i].offset * 512);
	struct bch_blockdev *dev;
	cr_assert_eq(bch_dev_open(devs[0].path, BCH_DEV_RDONLY, &dev), 0);
	cr_assert_eq(bch_sb_read(dev, &sb, &r), -BCH_ERR_sb_not_found);
	bch_dev_close(dev);
	for (unsigned i = 0; i < r.nr; i++)
		cr_assert_neq(r.copies[i].err, 0);
	free(good);
	free((char *)devs[0].path);
}

Test(super, newest_valid_copy_wins)
{
	struct bch_format_dev devs[1] = { 0 };
	struct bch_opts o;
	struct bch_sb_read_report r;

	bch_opts_default(&o);
	format_images(1, 64 << 20, &o, devs);
	struct bch_sb *sb = read_sb(devs[0].path, NULL);
	size_t bytes = (bch_sb_bytes(sb) + 511) & ~511UL;

	/* a newer sb written only to copy 1 (as if the crash hit before copy 0) */
	sb->seq += 1;
	sb->label[0] = 'N';
	sb->offset = sb->layout.sb_offset[1];
	bch_sb_set_csum(sb);
	write_at(devs[0].path, sb, bytes, sb->layout.sb_offset[1] * 512);

	struct bch_sb *got = read_sb(devs[0].path, &r);
	cr_assert(got);
	cr_assert_eq(r.chosen, 1);
	cr_assert_eq(got->seq, sb->seq);
	cr_assert_eq(got->label[0], 'N');
	free(got);

	/* the newer copy torn (bad checksum): the older valid copy is used */
	unsigned char b = 0xff;
	write_at(devs[0].path, &b, 1, sb->layout.sb_offset[1] * 512 + 400);
	got = read_sb(devs[0].path, &r);
	cr_assert(got);
	cr_assert_eq(got->seq, sb->seq - 1);
	cr_assert_neq(r.copies[1].err, 0);
	free(got);
	free(sb);
	free((char *)devs[0].path);
}

Test(super, field_resize)
{
	struct bch_format_dev devs[1] = { 0 };
	struct bch_opts o;
	int err = 0;

	bch_opts_default(&o);
	format_images(1, 32 << 20, &o, devs);
	struct bch_sb *sb = read_sb(devs[0].path, NULL);
	size_t buf_bytes = BCH_SB_BUF_BYTES(sb->layout.sb_max_size_bits);
	size_t before = bch_sb_bytes(sb);
	char msg[128];

	struct bch_sb_field *f = bch_sb_field_resize(&sb, &buf_bytes, BCH_SB_FIELD_clean, 4, &err);
	cr_assert(f, "create: %d", err);
	cr_assert_eq(f->u64s, 4);
	cr_assert_eq(bch_sb_bytes(sb), before + 32);
	/* grow, shrink, delete; other fields keep their contents */
	struct bch_member m0 = *bch_sb_member(sb, 0);
	cr_assert(bch_sb_field_resize(&sb, &buf_bytes, BCH_SB_FIELD_clean, 40, &err));
	cr_assert_eq(memcmp(bch_sb_member(sb, 0), &m0, sizeof(m0)), 0);
	cr_assert(bch_sb_field_resize(&sb, &buf_bytes, BCH_SB_FIELD_clean, 5, &err));
	cr_assert_eq(bch_sb_field_get(sb, BCH_SB_FIELD_clean)->u64s, 5);
	bch_sb_field_resize(&sb, &buf_bytes, BCH_SB_FIELD_clean, 0, &err);
	cr_assert_null(bch_sb_field_get(sb, BCH_SB_FIELD_clean));
	cr_assert_eq(bch_sb_bytes(sb), before);
	cr_assert_eq(memcmp(bch_sb_member(sb, 0), &m0, sizeof(m0)), 0);
	bch_sb_set_csum(sb);
	cr_assert_eq(bch_sb_validate(sb, buf_bytes, msg, sizeof(msg)), 0, "%s", msg);
	/* too big for the superblock area */
	cr_assert_null(bch_sb_field_resize(&sb, &buf_bytes, BCH_SB_FIELD_clean, 1U << 20, &err));
	cr_assert_eq(err, -BCH_ERR_sb_too_big);
	free(sb);
	free((char *)devs[0].path);
}

/* Superblocks with a valid checksum but impossible contents are refused. */
Test(super, logically_invalid_refused)
{
	struct bch_format_dev devs[2] = { 0 };
	struct bch_opts o;
	char msg[128];

	bch_opts_default(&o);
	format_images(2, 32 << 20, &o, devs);
	struct bch_sb *sb = read_sb(devs[0].path, NULL);
	size_t buf_bytes = BCH_SB_BUF_BYTES(sb->layout.sb_max_size_bits);
	struct bch_sb *bad = malloc(buf_bytes);

#define CHECK_BAD(what, stmt)						\
	do {								\
		memcpy(bad, sb, buf_bytes);				\
		stmt;							\
		bch_sb_set_csum(bad);					\
		cr_assert_neq(bch_sb_validate(bad, buf_bytes, msg, sizeof(msg)), 0, \
			      "accepted: %s", what);			\
		cr_assert(msg[0], "no message for %s", what);		\
	} while (0)

	CHECK_BAD("block size 3", bad->block_size = 3);
	CHECK_BAD("node smaller than block", bad->btree_node_size = 1);
	CHECK_BAD("no devices", bad->nr_devices = 0);
	CHECK_BAD("unknown feature", bad->features |= 1ULL << 40);
	CHECK_BAD("bucket size 0", bch_sb_member(bad, 1)->bucket_size = 0);
	CHECK_BAD("bucket size not pow2", bch_sb_member(bad, 0)->bucket_size += 1);
	CHECK_BAD("first bucket past end", bch_sb_member(bad, 0)->first_bucket =
		  bch_sb_member(bad, 0)->nbuckets);
	CHECK_BAD("durability 9", bch_sb_member(bad, 0)->durability = 9);
	CHECK_BAD("clean flag without record", bad->flags |= BCH_SB_FLAG_CLEAN);
	CHECK_BAD("version from the future", bad->version_min = BCH_VERSION_CURRENT + 1);
	CHECK_BAD("metadata replicas 0", bad->opts[1] = 0);
	/* an empty field would hide a record appended after it (fuzzer find) */
	CHECK_BAD("empty field before the end", bad->u64s += 8);
	/* fields longer than the buffer: refused before the checksum is computed */
	memcpy(bad, sb, buf_bytes);
	bad->u64s = buf_bytes;
	cr_assert_eq(bch_sb_validate(bad, buf_bytes, msg, sizeof(msg)), -BCH_ERR_sb_too_big);
	free(bad);
	free(sb);
	for (unsigned i = 0; i < 2; i++)
		free((char *)devs[i].path);
}
