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
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bkey.h"
#include "btree.h"
#include "format.h"
#include "fs.h"
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
	if (ro)
		bch_opt_set(&o, Opt_read_only, 1);
	return bch_fs_open(&p, 1, &o, &c, err, sizeof(err)) ? NULL : c;
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
	free(img);

	char *paths[] = { img_path };
	struct bch_fsck_ctx *y = calloc(1, sizeof(*y));
	y->mode = BCH_FSCK_YES;
	bool ok = !bch_fsck_superblocks(y, paths, 1, NULL);
	if (ok) {
		struct bch_fs *c = open_fs(false);
		uint64_t nodes;
		ok = c && !bch_fsck_btrees(y, c, &nodes);
		if (c)
			ok &= !bch_fs_close(c);
	}
	free(y);
	if (ok) {
		struct bch_fsck_ctx *n = calloc(1, sizeof(*n));
		n->mode = BCH_FSCK_NO;
		struct bch_fs *c = NULL;
		uint64_t nodes;
		if (bch_fsck_superblocks(n, paths, 1, NULL) || !(c = open_fs(true)) ||
		    bch_fsck_btrees(n, c, &nodes) || bch_fsck_nr_found(n)) {
			fprintf(stderr, "fsck -n after a successful -y is not clean\n");
			abort();
		}
		bch_fs_close(c);
		free(n);
	}
	return 0;
}
