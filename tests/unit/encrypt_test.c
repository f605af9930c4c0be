// SPDX-License-Identifier: GPL-2.0
/*
 * encrypt_test.c - the encrypted filesystem (crypt.c through the engine):
 *   - no plaintext: distinctive names, contents (plain and compressed) and
 *     xattr values, and the file size's encoding, are nowhere in the image;
 *   - the key: a wrong passphrase is refused before anything is read, with
 *     the image unchanged; no key at all is refused; the right one reads
 *     everything back and fsck (data included) is clean;
 *   - tampering: a byte flipped in an extent or in a btree node is found
 *     (never read back silently);
 *   - nonces: every (key, nonce) used over a workload with overwrites,
 *     recompression, reopens, and power cuts at many points followed by
 *     replay and more writes, is distinct (reservations made small so that
 *     cuts fall between them).
 * Seeds fixed and printed.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bcachefs.h"
#include "btree.h"
#include "crypt.h"
#include "errcode.h"
#include "fs.h"
#include "fs_ops.h"
#include "fsck.h"
#include "tests/lib/iorecord.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define SEED	2112u

static char tmpdir[64], paths[1][TESTFS_PATH_MAX];

static void setup(void)
{
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "encrypt");
	testfs_encrypted = true;
	testfs_format(tmpdir, 1, 48, 64 << 10, 1, paths);
}

static void teardown(void)
{
	bch_crypt_set_key_provider(NULL);
	bch_crypt_nonce_hook = NULL;
	test_tmpdir_remove(tmpdir);
}

TestSuite(encrypt, .init = setup, .fini = teardown);


static bool image_has(const char *path, const void *needle, size_t n)
{
	size_t len;
	char *b = testfs_slurp(path, &len);
	bool found = memmem(b, len, needle, n) != NULL;

	free(b);
	return found;
}

/* A distinctive string: "tag" + 20 letters from the seed. */
static void distinct(char *out, const char *tag, unsigned i)
{
	unsigned x = SEED * 2654435761u ^ (i + 1) * 40503u;
	int n = sprintf(out, "%s", tag);

	for (unsigned k = 0; k < 20; k++) {
		x = x * 1103515245u + 12345u;
		out[n++] = 'A' + (x >> 16) % 26;
	}
	out[n] = 0;
}

static uint64_t mkfile(struct bch_fs *c, const char *name)
{
	uint64_t inum;

	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &inum), 0,
		     "create %s", name);
	return inum;
}

/* Fill len bytes with copies of s. */
static void *repeat(const char *s, size_t len)
{
	char *b = malloc(len);
	size_t n = strlen(s);

	cr_assert(b);
	for (size_t i = 0; i < len; i++)
		b[i] = s[i % n];
	return b;
}

static const char *provider_pass;

/* The command layer's provider, reduced: a fixed passphrase through kdf and unwrap. */
static int pass_provider(const struct bch_sb *sb, uint8_t key[BCH_KEY_BYTES], char *err, size_t errlen)
{
	const struct bch_sb_field_crypt *f = bch_sb_crypt(sb);
	uint8_t wk[BCH_KEY_BYTES];
	int r = bch_crypt_kdf(f, provider_pass, strlen(provider_pass), wk);

	if (!r)
		r = bch_crypt_unwrap(sb, f, wk, key);
	if (r == -BCH_ERR_key_wrong)
		snprintf(err, errlen, "wrong passphrase");
	return r;
}

#define ODD_SIZE	12345679ULL	/* the size's le64 encoding is searched for too */

Test(encrypt, no_plaintext_and_keys)
{
	char name[3][64], body[3][64], xval[64];
	struct bch_fs *c = testfs_must_open(paths, 1, 0);

	for (unsigned i = 0; i < 3; i++) {
		distinct(name[i], "NAME", i);
		distinct(body[i], "BODY", i);
	}
	distinct(xval, "XATTR", 9);
	/* plain data, compressed data, and a file of ODD_SIZE */
	uint64_t a = mkfile(c, name[0]), b = mkfile(c, name[1]), big = mkfile(c, name[2]);
	void *d0 = repeat(body[0], 256 << 10), *d1 = repeat(body[1], 256 << 10);
	cr_assert_eq(bch_fs_write(c, a, 0, d0, 256 << 10), 256 << 10);
	cr_assert_eq(bch_fs_set_inode_opt(c, b, "compression", "lz4"), 0);
	cr_assert_eq(bch_fs_write(c, b, 0, d1, 256 << 10), 256 << 10);
	void *d2 = repeat(body[2], ODD_SIZE);
	cr_assert_eq(bch_fs_write(c, big, 0, d2, ODD_SIZE), (ssize_t)ODD_SIZE);
	cr_assert_eq(bch_fs_setxattr(c, a, "user.secret", xval, strlen(xval), 0), 0);
	cr_assert_eq(bch_fs_fsync(c), 0);
	cr_assert_eq(bch_fs_close(c), 0);

	for (unsigned i = 0; i < 3; i++) {
		cr_assert(!image_has(paths[0], name[i], strlen(name[i])), "name %s in the image", name[i]);
		cr_assert(!image_has(paths[0], body[i], strlen(body[i])), "content %s in the image", body[i]);
	}
	cr_assert(!image_has(paths[0], xval, strlen(xval)), "xattr value in the image");
	uint64_t sz = ODD_SIZE;
	cr_assert(!image_has(paths[0], &sz, 8), "the file size's encoding in the image");

	/* without the key: refused, nothing written */
	size_t len0;
	char *before = testfs_slurp(paths[0], &len0);
	bch_crypt_keys_forget();
	char err[256];
	struct bch_fs *x = testfs_open(paths, 1, 0, 0, err, sizeof(err));
	cr_assert_null(x, "opened without a key");
	cr_assert(strstr(err, "no key"), "message: %s", err);

	/* a wrong passphrase: refused by the wrapped key's MAC */
	provider_pass = "not the passphrase";
	bch_crypt_set_key_provider(pass_provider);
	x = testfs_open(paths, 1, 0, 0, err, sizeof(err));
	cr_assert_null(x, "opened with a wrong passphrase");
	cr_assert(strstr(err, "wrong passphrase"), "message: %s", err);
	size_t len1;
	char *after = testfs_slurp(paths[0], &len1);
	cr_assert(len0 == len1 && !memcmp(before, after, len0), "refused opens changed the image");
	free(after);

	/* the right one: everything back, fsck with data clean */
	provider_pass = TESTFS_PASSPHRASE;
	c = testfs_must_open(paths, 1, 0);
	char *r = malloc(ODD_SIZE);
	cr_assert_eq(bch_fs_read(c, a, 0, r, 256 << 10), 256 << 10);
	cr_assert(!memcmp(r, d0, 256 << 10));
	cr_assert_eq(bch_fs_read(c, b, 0, r, 256 << 10), 256 << 10);
	cr_assert(!memcmp(r, d1, 256 << 10));
	cr_assert_eq(bch_fs_read(c, big, 0, r, ODD_SIZE), (ssize_t)ODD_SIZE);
	cr_assert(!memcmp(r, d2, ODD_SIZE));
	char xb[64];
	cr_assert_eq(bch_fs_getxattr(c, a, "user.secret", xb, sizeof(xb)), (ssize_t)strlen(xval));
	cr_assert(!memcmp(xb, xval, strlen(xval)));
	cr_assert_eq(bch_fs_close(c), 0);
	c = testfs_must_open(paths, 1, TESTFS_RO | TESTFS_FSCK);
	testfs_assert_fsck_clean(c, true);
	bch_fs_close(c);
	free(r);
	free(before);
	free(d0);
	free(d1);
	free(d2);
}

struct node_at {
	uint64_t	sector;		/* first copy's */
	uint64_t	seq;
};

static int first_node(struct bch_fs *c, struct btree *b, void *priv)
{
	struct node_at *n = priv;

	(void)c;
	if (!n->sector) {
		n->sector = b->ptrs[0].offset;
		n->seq = b->seq;
	}
	return 0;
}

static void image_patch(const char *path, uint64_t off, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY);

	cr_assert(fd >= 0);
	cr_assert_eq(pwrite(fd, buf, len, off), (ssize_t)len);
	close(fd);
}

static void image_read(const char *path, uint64_t off, void *buf, size_t len)
{
	int fd = open(path, O_RDONLY);

	cr_assert(fd >= 0);
	cr_assert_eq(pread(fd, buf, len, off), (ssize_t)len);
	close(fd);
}

Test(encrypt, tamper_and_replay)
{
	char body[64];
	struct bch_fs *c = testfs_must_open(paths, 1, 0);

	distinct(body, "TAMPER", 1);
	void *d = repeat(body, 64 << 10);
	uint64_t a = mkfile(c, "a");
	cr_assert_eq(bch_fs_write(c, a, 0, d, 64 << 10), 64 << 10);
	cr_assert_eq(bch_fs_close(c), 0);

	c = testfs_must_open(paths, 1, TESTFS_RO);
	struct bch_bkey *k = NULL;
	cr_assert_eq(bch_btree_peek(c, BCH_BTREE_ID_extents, POS(a, 0, 0), POS(a, UINT64_MAX, 0), &k), 0);
	uint64_t data = ((struct bch_extent *)bkey_val(k))->ptrs[0].offset;
	free(k);
	struct node_at old = { 0 };
	cr_assert_eq(bch_btree_walk_nodes(c, BCH_BTREE_ID_inodes, first_node, &old), 0);
	bch_fs_close(c);
	cr_assert(!testfs_damage_found(paths, 1), "fsck of the untouched image reports damage");

	/* one byte of the extent, then of the node's keys: reported, never read back */
	uint64_t where[2] = { data * 512 + 1000, old.sector * 512 + 200 };
	for (unsigned i = 0; i < 2; i++) {
		uint8_t byte, flipped;
		image_read(paths[0], where[i], &byte, 1);
		flipped = byte ^ 0x10;
		image_patch(paths[0], where[i], &flipped, 1);
		cr_assert(testfs_damage_found(paths, 1), "a flipped byte in the %s was not found", i ? "node" : "extent");
		if (!i) {
			c = testfs_must_open(paths, 1, TESTFS_RO);
			char *r = malloc(64 << 10);
			cr_assert_lt(bch_fs_read(c, a, 0, r, 64 << 10), 0, "damaged data read back");
			free(r);
			bch_fs_close(c);
		}
		image_patch(paths[0], where[i], &byte, 1);
	}
	cr_assert(!testfs_damage_found(paths, 1));

	/* an older copy of a node put where the current one lives: detected */
	size_t nb = 64 << 10;
	char *oldnode = malloc(nb);
	image_read(paths[0], old.sector * 512, oldnode, nb);
	c = testfs_must_open(paths, 1, 0);
	uint64_t b = mkfile(c, "b");
	cr_assert_eq(bch_fs_write(c, b, 0, d, 4096), 4096);
	cr_assert_eq(bch_fs_close(c), 0);
	c = testfs_must_open(paths, 1, TESTFS_RO);
	struct node_at now = { 0 };
	cr_assert_eq(bch_btree_walk_nodes(c, BCH_BTREE_ID_inodes, first_node, &now), 0);
	bch_fs_close(c);
	cr_assert_neq(now.seq, old.seq, "a changed node kept its seq");
	image_patch(paths[0], now.sector * 512, oldnode, nb);
	cr_assert(testfs_damage_found(paths, 1), "an old node in place of the current one was not found");
	free(oldnode);
	free(d);
}

/* ---------------------------------------------------------------- nonces */

/*
 * Every nonce used, with the number of device events recorded when it was
 * used (0 outside the recorded session): a cut at event `at` loses exactly
 * the ciphertexts of nonces used at or after `at` (a write follows its
 * encryption), which never reached the disk, so only the others count.
 */
struct used_nonce {
	uint8_t		n[24];
	size_t		ev;
};
static struct used_nonce *seen;
static size_t nr_seen, cap_seen;
static struct iorec *cur_rec;

static void record_nonce(const uint8_t n[24])
{
	if (nr_seen == cap_seen) {
		cap_seen = cap_seen ? cap_seen * 2 : 4096;
		seen = realloc(seen, cap_seen * sizeof(*seen));
		if (!seen)
			abort();
	}
	memcpy(seen[nr_seen].n, n, 24);
	seen[nr_seen++].ev = cur_rec ? iorec_nr_events(cur_rec) : 0;
}

static int cmp24(const void *a, const void *b)
{
	return memcmp(a, b, 24);
}

static void assert_no_repeat(const char *when)
{
	qsort(seen, nr_seen, sizeof(*seen), cmp24);
	for (size_t i = 1; i < nr_seen; i++)
		cr_assert(memcmp(seen[i - 1].n, seen[i].n, 24), "%s: a nonce used twice (of %zu, seed %u)",
			  when, nr_seen, SEED);
}

/* Random writes, overwrites and fsyncs on a few files; some compressed. */
static void workload(struct bch_fs *c, unsigned seed, unsigned ops)
{
	unsigned x = seed;
	char *buf = malloc(96 << 10);

	for (unsigned i = 0; i < ops; i++) {
		x = x * 1103515245u + 12345u;
		char name[16];
		snprintf(name, sizeof(name), "f%u", (x >> 8) % 6);
		uint64_t inum;
		if (bch_fs_lookup(c, BCH_ROOT_INO, name, &inum)) {
			inum = mkfile(c, name);
			if ((x >> 4) & 1)
				cr_assert_eq(bch_fs_set_inode_opt(c, inum, "compression", "zstd"), 0);
		}
		size_t len = 4096 * (1 + (x >> 12) % 24);
		uint64_t off = 4096 * ((x >> 20) % 32);
		memset(buf, 'a' + i % 26, len);
		cr_assert_eq(bch_fs_write(c, inum, off, buf, len), (ssize_t)len, "seed %u op %u", seed, i);
		if (i % 7 == 0)
			cr_assert_eq(bch_fs_fsync(c), 0);
	}
	free(buf);
}

Test(encrypt, nonces_never_repeat)
{
	bch_crypt_nonce_reserve_step = 16;	/* reservations fall between cuts */
	bch_crypt_nonce_hook = record_nonce;
	struct bch_fs *c = testfs_must_open(paths, 1, 0);
	workload(c, SEED, 30);
	cr_assert_eq(bch_fs_close(c), 0);
	for (unsigned round = 0; round < 2; round++) {	/* clean reopens */
		c = testfs_must_open(paths, 1, 0);
		workload(c, SEED + round, 20);
		cr_assert_eq(bch_fs_close(c), 0);
	}
	assert_no_repeat("clean sessions");

	/* power cuts: what reached the disk before the cut is never used again after replay */
	c = testfs_must_open(paths, 1, 0);
	struct iorec *rec = iorec_new(1);
	cr_assert_eq(iorec_attach(rec, 0, c->devs[0]->bdev), 0);
	cur_rec = rec;
	workload(c, SEED + 100, 50);
	cur_rec = NULL;
	iorec_detach(rec, 0);
	bch_fs_close(c);	/* its writes are not recorded: the cuts are before it */
	assert_no_repeat("the recorded session");
	size_t all = nr_seen, nev = iorec_nr_events(rec);
	char crash[1][TESTFS_PATH_MAX];
	snprintf(crash[0], sizeof(crash[0]), "%s/crash.img", tmpdir);
	unsigned cuts = getenv("SOAK") ? 64 : 5;
	for (unsigned i = 1; i <= cuts; i++) {
		struct iorec_cut cut = { .at = nev * i / (cuts + 1), .seed = SEED + i, .keep_pct = 50,
					 .torn = true };
		struct iorec_plan plan;
		cr_assert_eq(iorec_plan(rec, &cut, &plan), 0);
		cr_assert_eq(iorec_write_image(rec, &plan, 0, crash[0]), 0);
		iorec_plan_free(&plan);
		/* what may be on disk: everything used before the cut (sorted: bsearch) */
		struct used_nonce *base = malloc(all * sizeof(*base));
		size_t nb = 0;
		for (size_t j = 0; j < all; j++)
			if (seen[j].ev < cut.at)
				base[nb++] = seen[j];
		char err[256];
		struct bch_fs *x = testfs_open(crash, 1, 0, 0, err, sizeof(err));
		cr_assert(x, "cut at %zu of %zu (seed %u): open: %s", cut.at, nev, SEED + i, err);
		workload(x, SEED + 200 + i, 20);
		cr_assert_eq(bch_fs_close(x), 0);
		qsort(seen + all, nr_seen - all, sizeof(*seen), cmp24);
		for (size_t j = all; j < nr_seen; j++) {
			cr_assert(j == all || memcmp(seen[j - 1].n, seen[j].n, 24),
				  "cut %u: a nonce used twice after the cut", i);
			cr_assert_null(bsearch(&seen[j], base, nb, sizeof(*base), cmp24),
				       "cut at %zu of %zu (seed %u): a nonce used before the cut used again",
				       cut.at, nev, SEED + i);
		}
		free(base);
		nr_seen = all;
	}
	iorec_free(rec);
	free(seen);
	seen = NULL;
	nr_seen = cap_seen = 0;
}
