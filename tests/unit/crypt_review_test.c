// SPDX-License-Identifier: GPL-2.0
/*
 * crypt_review_test.c - adversarial review of the encryption engine (issue
 * 21): each test takes one promise of crypt.h ("Invariants") or of
 * "Encryption" in bcachefs_format.h and tries to break it from outside the
 * engine, the way a user, a crash or an attacker with the disk could.
 *
 * A test marked "Was a bug" failed on the engine as reviewed; it asserts
 * the right behaviour and passes since the fix named there.  Seeds fixed and
 * printed on failure.
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
#include "inode.h"
#include "super.h"
#include "tests/lib/testfs.h"
#include "tests/lib/tmpdir.h"

#define SEED	4242u

static char tmpdir[64];

static void setup(void)
{
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "cryptreview");
}

/* Every nonce the engine encrypted with in this test (bch_crypt_nonce_hook). */
static uint8_t (*seen)[24];
static size_t nr_seen, cap_seen;

static void record_nonce(const uint8_t n[24])
{
	if (nr_seen == cap_seen) {
		cap_seen = cap_seen ? cap_seen * 2 : 4096;
		seen = realloc(seen, cap_seen * sizeof(*seen));
		if (!seen)
			abort();
	}
	memcpy(seen[nr_seen++], n, 24);
}

static int cmp24(const void *a, const void *b)
{
	return memcmp(a, b, 24);
}

/* How many nonces were used more than once (0: none). */
static size_t nonce_repeats(void)
{
	size_t rep = 0;

	qsort(seen, nr_seen, sizeof(*seen), cmp24);
	for (size_t i = 1; i < nr_seen; i++)
		rep += !memcmp(seen[i - 1], seen[i], 24);
	return rep;
}

static void teardown(void)
{
	bch_crypt_set_key_provider(NULL);
	bch_crypt_nonce_hook = NULL;
	free(seen);
	seen = NULL;
	nr_seen = cap_seen = 0;
	testfs_encrypted = false;
	test_tmpdir_remove(tmpdir);
}

TestSuite(crypt_review, .init = setup, .fini = teardown);

/* Open the members of paths in mask (bit i: paths[i]), -o degraded when asked; NULL if refused. */
static struct bch_fs *open_members(char paths[][TESTFS_PATH_MAX], unsigned mask, bool degraded)
{
	char *p[4], err[512];
	unsigned n = 0;
	struct bch_opts o;
	struct bch_fs *c = NULL;

	for (unsigned i = 0; i < 4; i++)
		if (mask & (1U << i))
			p[n++] = paths[i];
	memset(&o, 0, sizeof(o));
	if (degraded)
		bch_opt_set(&o, Opt_degraded, 1);
	int r = bch_fs_open(p, n, &o, &c, err, sizeof(err));
	if (r)
		cr_log_info("open (members mask %#x) refused: %s", mask, err);
	return r ? NULL : c;
}

/* Random writes on a few files, with fsyncs: encrypts extents, nodes and journal entries. */
static void workload(struct bch_fs *c, unsigned seed, unsigned ops)
{
	unsigned x = seed;
	char *buf = malloc(64 << 10);

	cr_assert(buf);
	for (unsigned i = 0; i < ops; i++) {
		x = x * 1103515245u + 12345u;
		char name[16];
		uint64_t inum;
		snprintf(name, sizeof(name), "f%u", (x >> 8) % 4);
		if (bch_fs_lookup(c, BCH_ROOT_INO, name, &inum))
			cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &inum), 0,
				     "seed %u: create %s", seed, name);
		size_t len = 4096 * (1 + (x >> 12) % 16);
		uint64_t off = 4096 * ((x >> 20) % 16);
		for (size_t k = 0; k < len; k++)
			buf[k] = (char)(seed + i + k / 7);
		cr_assert_eq(bch_fs_write(c, inum, off, buf, len), (ssize_t)len, "seed %u op %u", seed, i);
		if (i % 4 == 3)
			cr_assert_eq(bch_fs_fsync(c), 0);
	}
	free(buf);
}


/* Apply fn to every superblock copy of the image at path, checksums made good. */
static void sb_patch(const char *path, void (*fn)(struct bch_sb *sb, unsigned copy, void *priv), void *priv)
{
	int fd = open(path, O_RDWR);
	struct bch_sb hdr;

	cr_assert(fd >= 0);
	cr_assert_eq(pread(fd, &hdr, sizeof(hdr), 8 << BCH_SECTOR_SHIFT), (ssize_t)sizeof(hdr));
	cr_assert(hdr.layout.nr_superblocks >= 1 && hdr.layout.nr_superblocks <= BCH_SB_LAYOUT_MAX);
	size_t room = (size_t)BCH_SECTOR_SIZE << hdr.layout.sb_max_size_bits;
	struct bch_sb *sb = malloc(room);
	cr_assert(sb);
	for (unsigned i = 0; i < hdr.layout.nr_superblocks; i++) {
		uint64_t at = hdr.layout.sb_offset[i] << BCH_SECTOR_SHIFT;
		cr_assert_eq(pread(fd, sb, room, at), (ssize_t)room);
		fn(sb, i, priv);
		cr_assert_eq(bch_sb_set_csum(sb), 0);
		cr_assert_eq(pwrite(fd, sb, bch_sb_bytes(sb), at), (ssize_t)bch_sb_bytes(sb));
	}
	free(sb);
	close(fd);
}

struct reserved_patch {
	uint64_t	v, old;
};

static void set_reserved(struct bch_sb *sb, unsigned copy, void *priv)
{
	struct reserved_patch *p = priv;
	struct bch_sb_field_crypt *f = (struct bch_sb_field_crypt *)bch_sb_crypt(sb);

	cr_assert(f, "copy %u: no crypt field", copy);
	if (!copy)
		p->old = f->nonce_reserved;
	f->nonce_reserved = p->v;
}

/*
 * Set the crypt field's nonce_reserved in every superblock copy of the image
 * at path to v: what an older superblock put back (a restored disk header,
 * or someone with the disk) looks like.  Returns the value the primary copy
 * held.
 */
static uint64_t sb_set_nonce_reserved(const char *path, uint64_t v)
{
	struct reserved_patch p = { .v = v };

	sb_patch(path, set_reserved, &p);
	return p.old;
}

/*
 * Invariant (1): "no crash, replay or second session can hand [a nonce
 * value] out again".  A degraded read-write open writes the new reservation
 * to the present members only; a later degraded open of the other members
 * (each holds every copy: -o degraded allows it) starts from their older
 * reservation and encrypts other data with the same nonces.  Both
 * ciphertexts are on members of one filesystem: XOR them and the key stream
 * cancels.
 *
 * Was a bug: start_rw()/reserve() trusted the present members' counter
 * (fixed: a degraded session starts at a random point in [2^62, 2^63)).
 */
Test(crypt_review, degraded_split_sessions_never_reuse_nonces)
{
	char paths[2][TESTFS_PATH_MAX];

	testfs_encrypted = true;
	testfs_format(tmpdir, 2, 32, 64 << 10, 2, paths);
	bch_crypt_nonce_hook = record_nonce;
	for (unsigned m = 0; m < 2; m++) {	/* refusing the second open is a fix too */
		struct bch_fs *c = open_members(paths, 1U << m, true);
		if (!c)
			continue;
		workload(c, SEED + m, 12);
		cr_assert_eq(bch_fs_close(c), 0);
	}
	size_t rep = nonce_repeats();
	cr_assert_eq(rep, 0, "member 0 alone, then member 1 alone (both -o degraded): %zu of %zu "
		     "nonces used twice (seed %u)", rep, nr_seen, SEED);
}

/*
 * Invariant (1) again: the reservation is the only thing that keeps a new
 * session from reusing nonces, and it lives in the superblock, which is
 * checksummed but not authenticated.  An older superblock put back (or the
 * field rewritten by anyone with the disk, checksum recomputed) makes the
 * next session encrypt new data under nonces that ciphertexts on disk were
 * made with.  The authenticated journal knows better: its newest entry's
 * nonce counter is past the forged value.
 *
 * Was a bug: bch_crypt_start_rw() took nonce_reserved as it found it
 * (fixed: it continues past the journal's newest authenticated counter).
 */
Test(crypt_review, superblock_rollback_never_reuses_nonces)
{
	char paths[1][TESTFS_PATH_MAX];
	char err[256];

	testfs_encrypted = true;
	testfs_format(tmpdir, 1, 32, 64 << 10, 1, paths);
	struct bch_fs *c = testfs_open(paths, 1, TESTFS_RO, 0, err, sizeof(err));
	cr_assert(c, "open: %s", err);
	uint64_t before = bch_sb_crypt(c->sb)->nonce_reserved;	/* what the older superblock says */
	bch_fs_close(c);

	bch_crypt_nonce_hook = record_nonce;
	c = testfs_open(paths, 1, 0, 0, err, sizeof(err));
	cr_assert(c, "open: %s", err);
	workload(c, SEED, 12);
	cr_assert_eq(bch_fs_close(c), 0);

	uint64_t was = sb_set_nonce_reserved(paths[0], before);
	cr_assert_gt(was, before);
	c = testfs_open(paths, 1, 0, 0, err, sizeof(err));
	if (c) {	/* refusing the open (the rollback found) is right too */
		workload(c, SEED + 1, 12);
		cr_assert_eq(bch_fs_close(c), 0);
	}
	size_t rep = nonce_repeats();
	cr_assert_eq(rep, 0, "nonce_reserved put back from %llu to %llu: %zu of %zu nonces used twice "
		     "(seed %u)", (unsigned long long)was, (unsigned long long)before, rep, nr_seen, SEED);
}

/*
 * Invariant (3): "A wrong passphrase or key is found ... before anything
 * else is read: -BCH_ERR_key_wrong, never damage".  Keys the process
 * remembers are looked up by internal UUID only and used unchecked; two
 * filesystems with one UUID (reproducible images: --uuid with
 * SOURCE_DATE_EPOCH derives the internal UUID, as testfs does) share the
 * slot, so opening the first with the second's key reads every node and
 * journal entry as damaged (fsck would "repair" a filesystem whose only
 * fault is the key).
 *
 * Was a bug (fixed: the crypt field's key_check value): key_known() in crypt.c did not check the key against the
 * superblock (remember the crypt field's wrapped key with it, or store a
 * key check value).
 */
Test(crypt_review, remembered_key_of_another_fs_is_not_damage)
{
	char da[80], db[80], pa[1][TESTFS_PATH_MAX], pb[1][TESTFS_PATH_MAX], err[512];

	testfs_encrypted = true;
	snprintf(da, sizeof(da), "%s/a", tmpdir);
	snprintf(db, sizeof(db), "%s/b", tmpdir);
	cr_assert(!mkdir(da, 0700) && !mkdir(db, 0700));
	testfs_format(da, 1, 32, 64 << 10, 1, pa);
	struct bch_fs *c = testfs_open(pa, 1, 0, 0, err, sizeof(err));
	cr_assert(c, "open a: %s", err);
	workload(c, SEED, 4);
	cr_assert_eq(bch_fs_close(c), 0);
	testfs_format(db, 1, 32, 64 << 10, 1, pb);	/* same internal UUID, another key */

	size_t l0, l1;
	char *before = testfs_slurp(pa[0], &l0);
	char *p[1] = { pa[0] };
	struct bch_opts o;
	memset(&o, 0, sizeof(o));
	c = NULL;
	int r = bch_fs_open(p, 1, &o, &c, err, sizeof(err));
	if (!r) {
		/* the engine found the right key after all: it must read back */
		uint64_t inum;
		char buf[4096];
		cr_assert_eq(bch_fs_lookup(c, BCH_ROOT_INO, "f0", &inum) ? bch_fs_lookup(c, BCH_ROOT_INO, "f1", &inum)
			     : 0, 0);
		cr_assert_geq(bch_fs_read(c, inum, 0, buf, sizeof(buf)), 0);
		bch_fs_close(c);
	} else {
		cr_assert(r == -BCH_ERR_key_wrong || r == -BCH_ERR_key_missing,
			  "filesystem a opened with b's remembered key: %s (%s), not a key error",
			  bch_err_str(r), err);
		char *after = testfs_slurp(pa[0], &l1);
		cr_assert(l0 == l1 && !memcmp(before, after, l0), "a refused open changed the image");
		free(after);
	}
	free(before);
}

/*
 * "An unencrypted fs with a chacha20_poly1305 checksum type (never crash)":
 * the new checksum type widened BCH_CSUM_NR, and the inode key's bound on
 * opt_data_checksum (bkey.c: <= BCH_CSUM_NR, stored as type + 1) with it, so
 * an inode of an unencrypted filesystem may now ask for chacha20_poly1305.
 * Writes to that file then succeed with a "checksum" that is no MAC (zero,
 * bch_checksum() knows no such type), and every read of them fails: data
 * lost on a write that reported success.
 *
 * Was a bug (fixed in bkey.c's inode validation): it must refuse
 * chacha20_poly1305 as a per-inode data checksum.
 */
Test(crypt_review, unencrypted_inode_cannot_ask_for_a_mac)
{
	char paths[1][TESTFS_PATH_MAX], err[256];

	testfs_encrypted = false;
	testfs_format(tmpdir, 1, 32, 64 << 10, 1, paths);
	struct bch_fs *c = testfs_open(paths, 1, 0, 0, err, sizeof(err));
	cr_assert(c, "open: %s", err);
	uint64_t inum;
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "m", S_IFREG | 0644, 0, 0, 0, &inum), 0);
	struct bch_inode ino;
	cr_assert_eq(bch_inode_get(c, inum, &ino), 0);
	ino.opt_data_checksum = BCH_CSUM_chacha20_poly1305 + 1;
	struct btree_trans *t;
	cr_assert_eq(bch_trans_init(c, &t), 0);
	int r = bch_inode_update(t, inum, &ino);
	if (!r)
		r = bch_trans_commit(t, 0);
	bch_trans_exit(t);
	if (!r) {
		char w[8192], rd[8192];
		for (unsigned i = 0; i < sizeof(w); i++)
			w[i] = (char)(SEED + i * 31);
		ssize_t n = bch_fs_write(c, inum, 0, w, sizeof(w));
		if (n == (ssize_t)sizeof(w)) {
			ssize_t got = bch_fs_read(c, inum, 0, rd, sizeof(rd));
			cr_assert_eq(got, (ssize_t)sizeof(rd),
				     "a write that succeeded reads back as %zd (%s): the extent has "
				     "checksum type chacha20_poly1305 on an unencrypted filesystem",
				     got, c->err_msg);
			cr_assert(!memcmp(w, rd, sizeof(w)));
		}
	}
	cr_assert_eq(bch_fs_close(c), 0);
}

struct clean_patch {
	struct bch_sb_field_clean	*old;	/* the older clean record, whole */
	uint64_t			seq;	/* journal_seq to give it */
	bool				fits;
};

static void put_old_clean(struct bch_sb *sb, unsigned copy, void *priv)
{
	struct clean_patch *p = priv;
	struct bch_sb_field_clean *cl = bch_sb_get_clean(sb);

	(void)copy;
	p->fits = cl && cl->field.u64s == p->old->field.u64s;
	if (!p->fits)
		return;
	memcpy(cl, p->old, (size_t)p->old->field.u64s * 8);
	cl->journal_seq = p->seq;
}

/*
 * "Replays of old blocks are detected" (issue 21), for the superblock's
 * clean record: it names the btree roots in the clear, unauthenticated.  The
 * clean record of an earlier close put back (its journal_seq raised past
 * the journal's newest entry, so the newer, authenticated entries look
 * old) opens the filesystem as it was then: every node and extent it
 * reaches is genuine, so every MAC passes, and a file overwritten since
 * silently reads its old contents.
 *
 * Was a bug (fixed: the clean_mac entry): nothing bound the clean record to the key.  (A MAC of the
 * record under the filesystem key, or checking its roots against the
 * newest journal entry, which the close writes and which is authenticated.)
 */
Test(crypt_review, old_clean_record_is_not_a_silent_rollback)
{
	char paths[1][TESTFS_PATH_MAX], err[256];
	size_t len = 64 << 10;
	char *x = malloc(len), *y = malloc(len), *r = malloc(len);

	cr_assert(x && y && r);
	memset(x, 'X', len);
	memset(y, 'Y', len);
	testfs_encrypted = true;
	testfs_format(tmpdir, 1, 32, 64 << 10, 1, paths);
	struct bch_fs *c = testfs_open(paths, 1, 0, 0, err, sizeof(err));
	cr_assert(c, "open: %s", err);
	uint64_t inum;
	cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, "a", S_IFREG | 0644, 0, 0, 0, &inum), 0);
	cr_assert_eq(bch_fs_write(c, inum, 0, x, len), (ssize_t)len);
	cr_assert_eq(bch_fs_close(c), 0);

	c = testfs_open(paths, 1, TESTFS_RO, 0, err, sizeof(err));
	cr_assert(c, "open: %s", err);
	struct bch_sb_field_clean *cl = bch_sb_get_clean(c->sb);
	cr_assert(cl && (c->sb->flags & BCH_SB_FLAG_CLEAN));
	struct clean_patch p = { .old = malloc((size_t)cl->field.u64s * 8) };
	cr_assert(p.old);
	memcpy(p.old, cl, (size_t)cl->field.u64s * 8);
	bch_fs_close(c);

	c = testfs_open(paths, 1, 0, 0, err, sizeof(err));
	cr_assert(c, "open: %s", err);
	cr_assert_eq(bch_fs_write(c, inum, 0, y, len), (ssize_t)len);
	cr_assert_eq(bch_fs_close(c), 0);
	c = testfs_open(paths, 1, TESTFS_RO, 0, err, sizeof(err));
	cr_assert(c, "open: %s", err);
	p.seq = bch_sb_get_clean(c->sb)->journal_seq;
	bch_fs_close(c);

	sb_patch(paths[0], put_old_clean, &p);
	cr_assert(p.fits, "the clean records differ in size: this test needs another way in");
	c = testfs_open(paths, 1, TESTFS_RO, 0, err, sizeof(err));
	if (c) {	/* refusing the open is right too */
		ssize_t n = bch_fs_read(c, inum, 0, r, len);
		cr_assert(n < 0 || !memcmp(r, y, len),
			  "a clean record put back: the file silently reads as it was %s",
			  !memcmp(r, x, len) ? "before its last overwrite" : "nowhere");
		bch_fs_close(c);
	}
	free(p.old);
	free(x);
	free(y);
	free(r);
}

static void kdf_none_other_key(struct bch_sb *sb, unsigned copy, void *priv)
{
	struct bch_sb_field_crypt *f = (struct bch_sb_field_crypt *)bch_sb_crypt(sb);

	(void)priv;
	cr_assert(f, "copy %u: no crypt field", copy);
	f->flags &= ~BCH_CRYPT_KDF_MASK;	/* BCH_KDF_NONE: "the key in the clear" */
	memset(f->wrapped_key, 0, sizeof(f->wrapped_key));
	for (unsigned i = 0; i < BCH_KEY_BYTES; i++)
		f->wrapped_key[i] = (uint8_t)(SEED * 7 + i);
}

/*
 * Invariant (3) with the key stored in the clear (remove-passphrase): no
 * check value at all, so any 32 bytes there are taken as the key.  A
 * superblock rewritten that way (checksum recomputed) opens without a
 * passphrase under a key of the writer's choosing, and the filesystem's real
 * contents read as damage everywhere: the open fails on a "bad MAC" of the
 * first node (fsck would repair; anything written from then on is under the
 * writer's key).  A key error is what must come.
 *
 * Was a bug (fixed: key_check): the filesystem key had no check value of its own (a MAC under
 * it of the internal UUID, say, in the crypt field), so neither a key
 * stored in the clear nor a remembered one can be checked before use.
 */
Test(crypt_review, key_in_the_clear_is_checked_too)
{
	char paths[1][TESTFS_PATH_MAX], err[512];

	testfs_encrypted = true;
	testfs_format(tmpdir, 1, 32, 64 << 10, 1, paths);
	struct bch_fs *c = testfs_open(paths, 1, 0, 0, err, sizeof(err));
	cr_assert(c, "open: %s", err);
	workload(c, SEED, 4);
	cr_assert_eq(bch_fs_close(c), 0);

	sb_patch(paths[0], kdf_none_other_key, NULL);
	bch_crypt_keys_forget();
	size_t l0, l1;
	char *before = testfs_slurp(paths[0], &l0);
	char *p[1] = { paths[0] };
	struct bch_opts o;
	memset(&o, 0, sizeof(o));
	c = NULL;
	int r = bch_fs_open(p, 1, &o, &c, err, sizeof(err));
	if (!r)
		bch_fs_close(c);
	char *after = testfs_slurp(paths[0], &l1);
	cr_assert(l0 == l1 && !memcmp(before, after, l0), "the open (%s) changed the image",
		  r ? bch_err_str(r) : "succeeded");
	cr_assert(r == -BCH_ERR_key_wrong, "a key in the clear that is not the filesystem's: %s (%s), "
		  "not a key error", r ? bch_err_str(r) : "opened", r ? err : "");
	free(before);
	free(after);
}

/*
 * The same, for fsck: "a wrong key is an operational error (exit 8) with a
 * clear message, never a flood of damaged reports and never a repair"
 * (issue 21).  Opened for fsck, read-write, with the wrong key in the clear,
 * the filesystem opens (fsck tolerates nodes that do not read) and the
 * open and close write to the image under the wrong key, before fsck has
 * done anything.
 *
 * Was a bug: as key_in_the_clear_is_checked_too (fixed: key_check).
 */
Test(crypt_review, wrong_key_fsck_open_writes_nothing)
{
	char paths[1][TESTFS_PATH_MAX], err[512];

	testfs_encrypted = true;
	testfs_format(tmpdir, 1, 32, 64 << 10, 1, paths);
	struct bch_fs *c = testfs_open(paths, 1, 0, 0, err, sizeof(err));
	cr_assert(c, "open: %s", err);
	workload(c, SEED, 4);
	cr_assert_eq(bch_fs_close(c), 0);

	sb_patch(paths[0], kdf_none_other_key, NULL);
	bch_crypt_keys_forget();
	size_t l0, l1;
	char *before = testfs_slurp(paths[0], &l0);
	c = testfs_open(paths, 1, TESTFS_FSCK, 0, err, sizeof(err));
	bool opened = c != NULL;
	if (c)
		bch_fs_close(c);
	char *after = testfs_slurp(paths[0], &l1);
	cr_assert(l0 == l1 && !memcmp(before, after, l0),
		  "opened for fsck with a wrong key (%s): the image was written to",
		  opened ? "the open succeeded" : err);
	cr_assert(!opened, "opened for fsck with a wrong key");
	free(before);
	free(after);
}

/* A leaf whose copy on disk holds appended bsets: the byte offset of its last one. */
struct appended {
	const char	*path;
	size_t		node_bytes;
	unsigned	block;
	uint64_t	node_off;	/* bytes into the image */
	uint64_t	last_off;	/* of the last bset, in the node; 0: none found yet */
	unsigned	nr_bsets;
};

static int find_appended(struct bch_fs *c, struct btree *b, void *priv)
{
	struct appended *a = priv;

	(void)c;
	if (a->last_off || b->level)
		return 0;
	char *buf = malloc(a->node_bytes);
	int fd = open(a->path, O_RDONLY);
	cr_assert(buf && fd >= 0);
	uint64_t at = (uint64_t)b->ptrs[0].offset << BCH_SECTOR_SHIFT;
	cr_assert_eq(pread(fd, buf, a->node_bytes, at), (ssize_t)a->node_bytes);
	close(fd);
	const struct bch_btree_node *n = (const void *)buf;
	size_t off = (sizeof(*n) + (size_t)n->keys.u64s * 8 + a->block - 1) / a->block * a->block;
	size_t last = 0;
	unsigned nr = 1;
	while (off + sizeof(struct bch_btree_node_entry) <= a->node_bytes) {
		const struct bch_btree_node_entry *e = (const void *)(buf + off);
		size_t end = off + sizeof(*e) + (size_t)e->keys.u64s * 8;
		if (e->keys.seq != n->seq || !e->keys.u64s || end > a->node_bytes)
			break;
		last = off;
		nr++;
		off = (end + a->block - 1) / a->block * a->block;
	}
	if (last) {
		a->node_off = at;
		a->last_off = last;
		a->nr_bsets = nr;
	}
	free(buf);
	return 0;
}

/*
 * "Flipping any single byte of an encrypted node ... is reported as damage
 * (never silently read)" (issue 21), for a node's last appended bset on a
 * cleanly closed filesystem: the parent knows how much of the node was
 * written, so a bad last bset is damage, not a torn append.
 */
Test(crypt_review, flipped_byte_in_last_appended_bset_is_reported)
{
	char paths[1][TESTFS_PATH_MAX], err[256];

	testfs_encrypted = true;
	testfs_format(tmpdir, 1, 32, 64 << 10, 1, paths);
	struct bch_fs *c = testfs_open(paths, 1, 0, 0, err, sizeof(err));
	cr_assert(c, "open: %s", err);
	for (unsigned step = 0; step < 4; step++) {	/* a whole write, then appends */
		for (unsigned i = 0; i < 8; i++) {
			char name[32];
			uint64_t inum;
			snprintf(name, sizeof(name), "s%u-%u", step, i);
			cr_assert_eq(bch_fs_create(c, BCH_ROOT_INO, name, S_IFREG | 0644, 0, 0, 0, &inum), 0);
		}
		cr_assert_eq(bch_fs_fsync(c), 0);
		cr_assert_eq(bch_btree_flush_all(c), 0);
	}
	cr_assert_eq(bch_fs_close(c), 0);
	cr_assert(!testfs_damage_found(paths, 1), "fsck of the untouched image reports damage");

	c = testfs_open(paths, 1, TESTFS_RO, 0, err, sizeof(err));
	cr_assert(c, "open: %s", err);
	struct appended a = { .path = paths[0], .node_bytes = 64 << 10,
			      .block = (unsigned)c->sb->block_size << BCH_SECTOR_SHIFT };
	for (unsigned id = 0; id < BCH_BTREE_ID_NR && !a.last_off; id++)
		cr_assert_eq(bch_btree_walk_nodes(c, id, find_appended, &a), 0);
	bch_fs_close(c);
	cr_assert(a.last_off, "no leaf with an appended bset: the workload must make one");

	uint64_t where = a.node_off + a.last_off + sizeof(struct bch_btree_node_entry) + 8;
	int fd = open(paths[0], O_RDWR);
	uint8_t byte;
	cr_assert(fd >= 0 && pread(fd, &byte, 1, where) == 1);
	byte ^= 0x04;
	cr_assert(pwrite(fd, &byte, 1, where) == 1);
	close(fd);
	cr_assert(testfs_damage_found(paths, 1), "a flipped byte in the last of %u bsets (at %llu in the node) "
		  "was not reported", a.nr_bsets, (unsigned long long)a.last_off);
}

/*
 * Not encryption's: found while checking that an encrypted filesystem
 * formatted over an older one with the same UUID ignores the older journal
 * (it does: those entries fail the new key's MAC).  Without encryption, a
 * reproducible format (--uuid with SOURCE_DATE_EPOCH derives the internal
 * UUID, as testfs does) over an image that held a filesystem with the same
 * UUID replays the old journal, whose entries are newer than the new clean
 * record: the new, empty filesystem shows the old one's files.
 *
 * Was a bug (format.c, not the encryption engine; fixed: a reproducible
 * format empties the journal and an image file's buckets): format left the
 * journal buckets as they were, and fs.c trusts entries with its UUID.
 */
static void reformat_case(bool encrypted)
{
	char paths[1][TESTFS_PATH_MAX], err[512];

	testfs_encrypted = encrypted;
	testfs_format(tmpdir, 1, 32, 64 << 10, 1, paths);
	struct bch_fs *c = testfs_open(paths, 1, 0, 0, err, sizeof(err));
	cr_assert(c, "open: %s", err);
	workload(c, SEED, 40);
	cr_assert_eq(bch_fs_close(c), 0);

	testfs_format(tmpdir, 1, 32, 64 << 10, 1, paths);	/* same path, same UUID */
	c = testfs_open(paths, 1, TESTFS_RO, 0, err, sizeof(err));
	cr_assert(c, "open after the new format: %s", err);
	uint64_t inum;
	bool old = !bch_fs_lookup(c, BCH_ROOT_INO, "f0", &inum) || !bch_fs_lookup(c, BCH_ROOT_INO, "f1", &inum);
	bch_fs_close(c);
	cr_assert(!old, "%s: a fresh format shows the files of the filesystem it replaced",
		  encrypted ? "encrypted" : "unencrypted");
}

Test(crypt_review, reformat_same_uuid_starts_empty_encrypted)
{
	reformat_case(true);
}

Test(crypt_review, reformat_same_uuid_starts_empty_unencrypted)
{
	reformat_case(false);
}
