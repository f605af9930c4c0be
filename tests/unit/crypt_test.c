// SPDX-License-Identifier: GPL-2.0
/*
 * crypt_test.c - the key API of crypt.h: wrap/unwrap round trips (with a
 * passphrase and without), a wrong passphrase and a wrap moved to another
 * filesystem refused as -BCH_ERR_key_wrong, the provider's errors reaching
 * bch_fs_open, rewrap on an open filesystem (set-passphrase and
 * remove-passphrase), and set-passphrase under power cuts: the writes of a
 * rewrap and the close after it are recorded (tests/lib/iorecord.h) and for
 * a cut at every event, with several seeds (printed on failure), the old or
 * the new passphrase opens the rebuilt images, never neither.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "bcachefs.h"
#include "crypt.h"
#include "errcode.h"
#include "format.h"
#include "fs.h"
#include "super.h"
#include "tests/lib/iorecord.h"
#include "tests/lib/tmpdir.h"

/* A superblock with only what the wrap uses: the internal UUID. */
static struct bch_sb *fake_sb(uint8_t fill)
{
	struct bch_sb *sb = calloc(1, sizeof(*sb));

	cr_assert(sb);
	memset(sb->uuid, fill, BCH_UUID_SIZE);
	memset(sb->user_uuid, fill ^ 0xff, BCH_UUID_SIZE);
	return sb;
}

static void key_fill(uint8_t key[BCH_KEY_BYTES], uint8_t seed)
{
	for (unsigned i = 0; i < BCH_KEY_BYTES; i++)
		key[i] = seed * 31 + i * 7;
}

Test(crypt, wrap_unwrap_round_trip)
{
	struct bch_sb *sb = fake_sb(0x11);
	struct bch_sb_field_crypt f = { 0 };
	uint8_t key[BCH_KEY_BYTES], wk[BCH_KEY_BYTES], got[BCH_KEY_BYTES];

	key_fill(key, 1);
	cr_assert_eq(bch_crypt_wrap(sb, &f, key, "hunter2", 7), 0);
	cr_assert(bch_crypt_has_passphrase(&f));
	cr_assert_eq(f.kdf_n_log2, BCH_KDF_SCRYPT_N_LOG2);
	/* the key is not stored in the clear */
	cr_assert_neq(memcmp(f.wrapped_key, key, BCH_KEY_BYTES), 0);
	cr_assert_eq(bch_crypt_kdf(&f, "hunter2", 7, wk), 0);
	cr_assert_eq(bch_crypt_unwrap(sb, &f, wk, got), 0);
	cr_assert_eq(memcmp(got, key, BCH_KEY_BYTES), 0);
	/* no wrapping key for a passphrase-protected key */
	cr_assert_eq(bch_crypt_unwrap(sb, &f, NULL, got), -BCH_ERR_key_missing);
	free(sb);
}

Test(crypt, wrong_passphrase_is_key_wrong)
{
	struct bch_sb *sb = fake_sb(0x22), *other = fake_sb(0x23);
	struct bch_sb_field_crypt f = { 0 };
	uint8_t key[BCH_KEY_BYTES], wk[BCH_KEY_BYTES], got[BCH_KEY_BYTES];
	static const uint8_t zero[BCH_KEY_BYTES];

	key_fill(key, 2);
	cr_assert_eq(bch_crypt_wrap(sb, &f, key, "right", 5), 0);
	/* a wrong passphrase, one differing in its last byte, a prefix */
	static const char *wrong[] = { "wrong", "righT", "righ" };
	for (unsigned i = 0; i < 3; i++) {
		memset(got, 0xaa, sizeof(got));
		cr_assert_eq(bch_crypt_kdf(&f, wrong[i], strlen(wrong[i]), wk), 0);
		cr_assert_eq(bch_crypt_unwrap(sb, &f, wk, got), -BCH_ERR_key_wrong, "%s", wrong[i]);
		cr_assert_eq(memcmp(got, zero, BCH_KEY_BYTES), 0, "key bytes left after a failed unwrap");
	}
	/* the right passphrase, but the wrap copied to another filesystem */
	cr_assert_eq(bch_crypt_kdf(&f, "right", 5, wk), 0);
	cr_assert_eq(bch_crypt_unwrap(other, &f, wk, got), -BCH_ERR_key_wrong);
	/* one flipped bit of the wrapped key or its MAC */
	for (unsigned byte = 0; byte < sizeof(f.wrapped_key); byte += 13) {
		f.wrapped_key[byte] ^= 1;
		cr_assert_eq(bch_crypt_unwrap(sb, &f, wk, got), -BCH_ERR_key_wrong, "byte %u", byte);
		f.wrapped_key[byte] ^= 1;
	}
	cr_assert_eq(bch_crypt_unwrap(sb, &f, wk, got), 0);
	free(sb);
	free(other);
}

Test(crypt, no_passphrase_and_rewrap)
{
	struct bch_sb *sb = fake_sb(0x33);
	struct bch_sb_field_crypt f = { 0 };
	uint8_t key[BCH_KEY_BYTES], wk[BCH_KEY_BYTES], got[BCH_KEY_BYTES];

	key_fill(key, 3);
	f.nonce_reserved = 12345;
	cr_assert_eq(bch_crypt_wrap(sb, &f, key, NULL, 0), 0);
	cr_assert_not(bch_crypt_has_passphrase(&f));
	cr_assert_eq(bch_crypt_kdf(&f, "x", 1, wk), -EINVAL);
	cr_assert_eq(bch_crypt_unwrap(sb, &f, NULL, got), 0);
	cr_assert_eq(memcmp(got, key, BCH_KEY_BYTES), 0);
	/* wrapping again with a passphrase: a new salt each time, the counter kept */
	cr_assert_eq(bch_crypt_wrap(sb, &f, key, "one", 3), 0);
	uint8_t salt1[sizeof(f.salt)];
	memcpy(salt1, f.salt, sizeof(salt1));
	cr_assert_eq(bch_crypt_wrap(sb, &f, key, "one", 3), 0);
	cr_assert_neq(memcmp(salt1, f.salt, sizeof(salt1)), 0);
	cr_assert_eq(f.nonce_reserved, 12345);
	cr_assert_eq(bch_crypt_kdf(&f, "one", 3, wk), 0);
	cr_assert_eq(bch_crypt_unwrap(sb, &f, wk, got), 0);
	cr_assert_eq(memcmp(got, key, BCH_KEY_BYTES), 0);
	/* too long */
	char *longp = malloc(BCH_PASSPHRASE_MAX + 1);
	memset(longp, 'x', BCH_PASSPHRASE_MAX + 1);
	cr_assert_eq(bch_crypt_wrap(sb, &f, key, longp, BCH_PASSPHRASE_MAX + 1), -EINVAL);
	free(longp);
	free(sb);
}

/* ------------------------------------------------- an encrypted filesystem */

/*
 * The provider: tries each passphrase of `passes`; derivations are cached
 * by passphrase and salt (scrypt is slow under the sanitizers, and a crash state has one
 * of two salts).  Records which one opened it.
 */
#define NR_CACHE	8
static const char *passes[2];
static int opened_with;		/* index into passes, -1 */
static unsigned provider_calls;
static struct {
	uint8_t		salt[16];
	const char	*pass;
	uint8_t		wk[BCH_KEY_BYTES];
} cache[NR_CACHE];
static unsigned nr_cache;

static int test_provider(const struct bch_sb *sb, uint8_t key[BCH_KEY_BYTES], char *err, size_t errlen)
{
	const struct bch_sb_field_crypt *f = bch_sb_crypt(sb);
	int r = -BCH_ERR_key_missing;

	provider_calls++;
	opened_with = -1;
	for (int p = 0; p < 2 && passes[p]; p++) {
		uint8_t wk[BCH_KEY_BYTES];
		unsigned i;

		for (i = 0; i < nr_cache; i++)
			if (!strcmp(cache[i].pass, passes[p]) && !memcmp(cache[i].salt, f->salt, sizeof(f->salt)))
				break;
		if (i < nr_cache) {
			memcpy(wk, cache[i].wk, sizeof(wk));
		} else {
			cr_assert_eq(bch_crypt_kdf(f, passes[p], strlen(passes[p]), wk), 0);
			if (nr_cache < NR_CACHE) {
				memcpy(cache[nr_cache].salt, f->salt, sizeof(f->salt));
				cache[nr_cache].pass = passes[p];
				memcpy(cache[nr_cache].wk, wk, sizeof(wk));
				nr_cache++;
			}
		}
		r = bch_crypt_unwrap(sb, f, wk, key);
		if (!r) {
			opened_with = p;
			return 0;
		}
	}
	return bch_errf(err, errlen, r, "test provider: %s", bch_err_str(r));
}

static char tmpdir[64];
static char paths[2][128];

static void setup(void)
{
	test_tmpdir_make(tmpdir, sizeof(tmpdir), "crypt");
	bch_crypt_set_key_provider(test_provider);
	nr_cache = 0;
	provider_calls = 0;
	passes[0] = passes[1] = NULL;
}

static void teardown(void)
{
	bch_crypt_set_key_provider(NULL);
	bch_crypt_keys_forget();
	test_tmpdir_remove(tmpdir);
}

/* Two small members, encrypted with passphrase pass; the key forgotten. */
static void format_encrypted(const char *pass)
{
	struct bch_format_dev d[2] = { 0 };
	struct bch_format_args args = { .passphrase = pass };
	struct bch_opts o;
	char err[256];

	for (unsigned i = 0; i < 2; i++) {
		snprintf(paths[i], sizeof(paths[i]), "%s/d%u.img", tmpdir, i);
		d[i].path = paths[i];
		d[i].size = 8 << 20;
		d[i].bucket_size = 64 << 10;
		d[i].durability = 1;
	}
	bch_opts_default(&o);
	bch_opt_set(&o, Opt_btree_node_size, 64 << 10);
	bch_opt_set(&o, Opt_encrypted, 1);
	cr_assert_eq(bch_format(d, 2, &o, NULL, &args, err, sizeof(err)), 0, "format: %s", err);
	bch_crypt_keys_forget();	/* every open below goes through the provider */
}

static int open_fs(char p[][128], bool ro, struct bch_fs **c, char *err, size_t errlen)
{
	char *l[2] = { p[0], p[1] };
	struct bch_opts o;

	memset(&o, 0, sizeof(o));
	if (ro)
		bch_opt_set(&o, Opt_read_only, 1);
	bch_crypt_keys_forget();
	return bch_fs_open(l, 2, &o, c, err, errlen);
}

TestSuite(crypt_fs, .init = setup, .fini = teardown, .timeout = 600);

Test(crypt_fs, provider_errors_reach_open)
{
	struct bch_fs *c;
	char err[256];

	format_encrypted("old pass");
	passes[0] = "not it";
	cr_assert_eq(open_fs(paths, true, &c, err, sizeof(err)), -BCH_ERR_key_wrong);
	cr_assert(strstr(err, "test provider"), "%s", err);
	passes[0] = NULL;
	cr_assert_eq(open_fs(paths, true, &c, err, sizeof(err)), -BCH_ERR_key_missing);
	bch_crypt_set_key_provider(NULL);
	cr_assert_eq(open_fs(paths, true, &c, err, sizeof(err)), -BCH_ERR_key_missing);
	cr_assert(strstr(err, "no key"), "%s", err);
	bch_crypt_set_key_provider(test_provider);
	passes[0] = "old pass";
	cr_assert_eq(open_fs(paths, true, &c, err, sizeof(err)), 0, "%s", err);
	cr_assert(bch_fs_encrypted(c));
	bch_fs_close(c);
}

Test(crypt_fs, rewrap_set_and_remove)
{
	struct bch_fs *c;
	char err[256];

	format_encrypted("old pass");
	passes[0] = "old pass";
	cr_assert_eq(open_fs(paths, false, &c, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(bch_crypt_rewrap(c, "", 0), -EINVAL);
	cr_assert_eq(bch_crypt_rewrap(c, "new pass", 8), 0);
	cr_assert_eq(bch_fs_close(c), 0);

	cr_assert_eq(open_fs(paths, true, &c, err, sizeof(err)), -BCH_ERR_key_wrong, "old still opens");
	passes[0] = "new pass";
	cr_assert_eq(open_fs(paths, false, &c, err, sizeof(err)), 0, "%s", err);
	/* remove-passphrase: opens with no provider at all */
	cr_assert_eq(bch_crypt_rewrap(c, NULL, 0), 0);
	cr_assert_eq(bch_fs_close(c), 0);
	bch_crypt_set_key_provider(NULL);
	cr_assert_eq(open_fs(paths, true, &c, err, sizeof(err)), 0, "%s", err);
	cr_assert(bch_fs_encrypted(c));
	cr_assert_not(bch_crypt_has_passphrase(bch_sb_crypt(c->sb)));
	bch_fs_close(c);
}

#define SEEDS	2

Test(crypt_fs, set_passphrase_power_cut)
{
	struct bch_fs *c;
	char err[256], crash[2][128];

	format_encrypted("old pass");
	passes[0] = "old pass";
	cr_assert_eq(open_fs(paths, false, &c, err, sizeof(err)), 0, "%s", err);
	/* record from here: the rewrap and the close that follows */
	struct iorec *rec = iorec_new(2);
	cr_assert(rec);
	/* member d is paths[d] (format's order); followed, so the close may close it */
	for (unsigned d = 0; d < 2; d++) {
		cr_assert_eq(iorec_attach(rec, d, c->devs[d]->bdev), 0);
		cr_assert_eq(iorec_follow(rec, d, paths[d]), 0);
	}
	cr_assert_eq(bch_crypt_rewrap(c, "new pass", 8), 0);
	size_t after_rewrap = iorec_nr_events(rec);
	cr_assert_eq(bch_fs_close(c), 0);
	size_t nr = iorec_nr_events(rec);
	cr_assert_gt(after_rewrap, 0);

	for (unsigned d = 0; d < 2; d++)
		snprintf(crash[d], sizeof(crash[d]), "%s/crash%u.img", tmpdir, d);
	passes[0] = "old pass";
	passes[1] = "new pass";
	unsigned by[2] = { 0, 0 }, states = 0;
	for (size_t at = 0; at <= nr; at++)
		for (unsigned seed = 0; seed < (at ? SEEDS : 1); seed++) {
			struct iorec_cut cut = { .at = at, .seed = seed * 7919 + at, .keep_pct = 50,
						 .torn = seed & 1 };
			struct iorec_plan plan;

			cr_assert_eq(iorec_plan(rec, &cut, &plan), 0);
			for (unsigned d = 0; d < 2; d++)
				cr_assert_eq(iorec_write_image(rec, &plan, d, crash[d]), 0);
			int r = open_fs(crash, true, &c, err, sizeof(err));
			if (r) {
				char *why = iorec_plan_describe(rec, &plan);
				cr_assert_fail("cut %zu of %zu seed %u: neither passphrase opens it: %s\n%s",
					       at, nr, seed, err, why);
			}
			cr_assert(opened_with == 0 || opened_with == 1);
			by[opened_with]++;
			bch_fs_close(c);
			iorec_plan_free(&plan);
			states++;
		}
	/* before the rewrap: old; after everything: new */
	cr_assert_gt(by[0], 0);
	cr_assert_gt(by[1], 0);
	cr_assert_eq(open_fs(crash, true, &c, err, sizeof(err)), 0);
	cr_assert_eq(opened_with, 1, "the last state opens with the new passphrase");
	bch_fs_close(c);
	cr_log_info("crypt set_passphrase_power_cut: %zu events (%zu in the rewrap), %u states: "
		    "%u opened with the old passphrase, %u with the new", nr, after_rewrap, states,
		    by[0], by[1]);
	iorec_free(rec);
}
