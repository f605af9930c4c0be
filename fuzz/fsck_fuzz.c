// SPDX-License-Identifier: GPL-2.0
/*
 * fsck_fuzz.c - libFuzzer target: fsck on a damaged image.
 *
 * A base image (8 MiB, 4 KiB nodes, a few hundred keys) is built once; each
 * input is a list of patches applied to a copy of it: records of
 * [u32 offset][u8 length][length bytes], offsets taken modulo the image
 * size.  Then: fsck pass 1 with -y, open for fsck, passes 3-4 with -y,
 * close; if that all worked, a second read-only run must find nothing.  Any
 * crash, sanitizer report, leak or "-n after -y is not clean" is a finding.
 *
 *   make fuzz                         (all targets, FUZZ_TIME seconds each)
 *   build/fuzz/fsck_fuzz corpus/      (by hand)
 *   BCH_FUZZ_SAVE=x.img build/fuzz/fsck_fuzz crash-...   (keep the damaged
 *                                      image; checksums are bypassed when
 *                                      the input's first byte is odd)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bkey.h"
#include "btree.h"
#include "format.h"
#include "fs.h"
#include "fs_ops.h"
#include "checksum.h"
#include "fsck.h"

#define IMG_BYTES	(8 << 20)

static unsigned char *base;
static char base_path[64], img_path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct bch_fs *open_fs(bool ro)
{
	struct bch_opts o;
	struct bch_fs *c = NULL;
	char err[256], *p = img_path;

	memset(&o, 0, sizeof(o));
	bch_opt_set(&o, Opt_fsck, 1);
	if (ro) {
		bch_opt_set(&o, Opt_read_only, 1);
		bch_opt_set(&o, Opt_fsck_defer_recount, 1);	/* as bcachefs fsck -n */
	}
	return bch_fs_open(&p, 1, &o, &c, err, sizeof(err)) ? NULL : c;
}

/* The scratch image goes when the fuzzer ends (not after a crash: it is the evidence). */
static void remove_image(void)
{
	unlink(img_path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct bch_format_dev d = { 0 };
	struct bch_format_args args = { 0 };
	struct bch_opts o;
	char err[256];

	(void)argc;
	(void)argv;
	snprintf(img_path, sizeof(img_path), "/tmp/bch-fsck-fuzz-%d.img", getpid());
	snprintf(base_path, sizeof(base_path), "%s", img_path);
	d.path = img_path;
	d.size = IMG_BYTES;
	d.bucket_size = 64 << 10;
	d.durability = 1;
	bch_opts_default(&o);
	bch_opt_set(&o, Opt_btree_node_size, 4096);
	unlink(img_path);
	atexit(remove_image);
	if (bch_format(&d, 1, &o, NULL, &args, err, sizeof(err)))
		abort();
	struct bch_fs *c = open_fs(false);
	struct btree_trans *t;
	bch_trans_init(c, &t);
	for (unsigned i = 0; i < 300; i++) {
		struct bch_bkey *k = bch_bkey_alloc(BCH_BKEY_raw, POS(1, i, 0), sizeof(struct bch_raw) + 8);
		((struct bch_raw *)bkey_val(k))->len = 8;
		bch_trans_update(t, BCH_BTREE_ID_test, k);
		free(k);
		if (bch_trans_commit(t, 0))
			abort();
	}
	bch_trans_exit(t);
	/* files too, so the damage reaches the passes over files */
	uint64_t dir, inum;
	char name[32], buf[5000];
	memset(buf, 'x', sizeof(buf));
	if (bch_fs_create(c, BCH_ROOT_INO, "d", S_IFDIR | 0755, 0, 0, 0, &dir))
		abort();
	for (unsigned i = 0; i < 60; i++) {
		snprintf(name, sizeof(name), "f%u", i);
		if (bch_fs_create(c, i % 2 ? dir : BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &inum) ||
		    bch_fs_write(c, inum, i * 512, buf, 100 + i * 70) < 0)
			abort();
		if (i % 7 == 0 && bch_fs_setxattr(c, inum, "user.x", "y", 1, 0))
			abort();
		if (i % 9 == 0 && (snprintf(name, sizeof(name), "l%u", i), bch_fs_link(c, inum, dir, name)))
			abort();
	}
	if (bch_fs_symlink(c, dir, "s", "../f0", 0, 0, NULL))
		abort();
	if (bch_fs_close(c))
		abort();
	base = malloc(IMG_BYTES);
	FILE *f = fopen(img_path, "rb");
	if (!base || !f || fread(base, 1, IMG_BYTES, f) != IMG_BYTES)
		abort();
	fclose(f);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned char *img = malloc(IMG_BYTES);

	memcpy(img, base, IMG_BYTES);
	/* the first byte: odd bypasses checksums, so damage reaches the structure checks */
	bool bypass = size && (data[0] & 1);
	if (size) {
		data++;
		size--;
	}
	while (size >= 5) {
		uint32_t off;
		memcpy(&off, data, 4);
		unsigned len = data[4];
		data += 5;
		size -= 5;
		if (len > size)
			len = size;
		off %= IMG_BYTES - 256;
		memcpy(img + off, data, len);
		data += len;
		size -= len;
	}
	FILE *f = fopen(img_path, "wb");
	if (!f || fwrite(img, 1, IMG_BYTES, f) != IMG_BYTES)
		abort();
	fclose(f);
	/* BCH_FUZZ_SAVE=FILE keeps the damaged image, to replay a finding with the CLI */
	const char *save = getenv("BCH_FUZZ_SAVE");
	if (save && (f = fopen(save, "wb"))) {
		if (fwrite(img, 1, IMG_BYTES, f) != IMG_BYTES)
			fprintf(stderr, "BCH_FUZZ_SAVE: short write to %s\n", save);
		fclose(f);
	}
	free(img);

	char *paths[] = { img_path };
	/* -n first, as bcachefs fsck users do: anything but a crash or a hang is fine */
	struct bch_fsck_ctx *n0 = calloc(1, sizeof(*n0));
	n0->mode = BCH_FSCK_NO;
	bch_checksum_bypass = bypass;
	if (!bch_fsck_superblocks(n0, paths, 1, NULL)) {
		struct bch_fs *c = open_fs(true);
		struct bch_fsck_file_stats st0;
		uint64_t nodes;
		if (c && !bch_fsck_btrees(n0, c, &nodes))
			bch_fsck_files(n0, c, false, &st0);
		if (c)
			bch_fs_close(c);
	}
	free(n0);
	struct bch_fsck_ctx *y = calloc(1, sizeof(*y));
	struct bch_fsck_file_stats st;
	y->mode = BCH_FSCK_YES;
	bch_checksum_bypass = bypass;
	bool ok = !bch_fsck_superblocks(y, paths, 1, NULL);
	if (ok) {
		struct bch_fs *c = open_fs(false);
		uint64_t nodes;
		ok = c && !bch_fsck_btrees(y, c, &nodes);
		if (ok && bch_fsck_nr_found(y) == bch_fsck_nr_fixed(y))
			ok = !bch_fsck_files(y, c, false, &st);
		if (c)
			ok &= !bch_fs_close(c);
	}
	ok &= bch_fsck_nr_found(y) == bch_fsck_nr_fixed(y);
	free(y);
	if (ok) {
		struct bch_fsck_ctx *n = calloc(1, sizeof(*n));
		n->mode = BCH_FSCK_NO;
		struct bch_fs *c = NULL;
		uint64_t nodes;
		if (bch_fsck_superblocks(n, paths, 1, NULL) || !(c = open_fs(true)) ||
		    bch_fsck_btrees(n, c, &nodes) || bch_fsck_files(n, c, false, &st) ||
		    bch_fsck_nr_found(n)) {
			fprintf(stderr, "fsck -n after a successful -y is not clean\n");
			for (unsigned p = 0; p < BCH_FSCK_PROBLEM_NR; p++)
				if (n->found[p])
					fprintf(stderr, "  %s: %llu\n", bch_fsck_problems[p].name,
						(unsigned long long)n->found[p]);
			abort();
		}
		bch_fs_close(c);
		free(n);
	}
	bch_checksum_bypass = false;
	return 0;
}
