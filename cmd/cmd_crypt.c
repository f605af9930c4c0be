// SPDX-License-Identifier: GPL-2.0
/*
 * cmd_crypt.c - `bcachefs unlock`, `set-passphrase` and `remove-passphrase`:
 * the passphrase of an encrypted filesystem (crypt.h).
 *
 * unlock [-c] [-k session|user|user_session] [--passphrase-file FILE] FS
 *   reads the superblock (nothing is written to the devices), derives the
 *   wrapping key from the passphrase and checks it against the wrapped key's
 *   MAC; -c stops there, otherwise the wrapping key goes to the kernel
 *   keyring (keyring.h) so later commands do not ask.
 * set-passphrase [--passphrase-file NEWFILE] FS
 *   opens FS read-write (the current key: keyring, $BCACHEFS_PASSPHRASE_FILE,
 *   terminal or stdin, like every open), reads the new passphrase (twice on
 *   a terminal) and wraps the key with it: bch_crypt_rewrap() writes the
 *   superblock of every member, and a crash leaves the old or the new wrap.
 * remove-passphrase FS
 *   the same, storing the key in the clear (anyone with the devices can then
 *   read the filesystem; the data stays encrypted and authenticated).
 *
 * Refused: an unencrypted filesystem (before anything is opened read-write),
 * a filesystem mounted through fusemount (named by its mountpoint: the
 * daemon holds its superblocks; unmount first).
 * Exit codes: 0 done, 1 failure (wrong passphrase, not encrypted, mounted,
 * I/O), 16 usage.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>
#include <uuid/uuid.h>

#include "bcachefs.h"
#include "blockdev.h"
#include "cmds.h"
#include "crypt.h"
#include "errcode.h"
#include "fs.h"
#include "fsname.h"
#include "keyring.h"
#include "passphrase.h"
#include "super.h"

/* The newest superblock among devs (highest seq), malloc'd; message printed on failure. */
static int read_newest_sb(const char *cmd, char **devs, unsigned nr, struct bch_sb **ret)
{
	struct bch_sb *best = NULL;
	int r = 0;

	for (unsigned i = 0; i < nr; i++) {
		struct bch_blockdev *bd;
		struct bch_sb *sb;

		if ((r = bch_dev_open(devs[i], BCH_DEV_RDONLY | BCH_DEV_NO_LOCK, &bd))) {
			cmd_err(cmd, "%s: %s", devs[i], bch_err_str(r));
			break;
		}
		r = bch_sb_read(bd, &sb, NULL);
		bch_dev_close(bd);
		if (r) {
			cmd_err(cmd, "%s: no valid superblock: %s", devs[i], bch_err_str(r));
			break;
		}
		if (best && memcmp(best->uuid, sb->uuid, BCH_UUID_SIZE)) {
			cmd_err(cmd, "%s: a member of another filesystem than %s", devs[i], devs[0]);
			free(sb);
			r = -EINVAL;
			break;
		}
		if (!best || sb->seq > best->seq) {
			free(best);
			best = sb;
		} else {
			free(sb);
		}
	}
	if (r) {
		free(best);
		return r;
	}
	*ret = best;
	return 0;
}

/* Resolve FS operands; refuse a mounted filesystem.  0 or the exit code. */
static int resolve_unmounted(const char *cmd, char **args, unsigned nr, struct cmd_fs *fs)
{
	int r = cmd_fs_resolve(cmd, args, nr, fs);

	if (r)
		return r;
	if (fs->mounted) {
		cmd_err(cmd, "%s: mounted (fusemount): unmount it first", fs->mnt);
		cmd_fs_free(fs);
		return EXIT_FAIL;
	}
	return 0;
}

/* The sb of FS, checked to be encrypted with a passphrase (need_pass). */
static int encrypted_sb(const char *cmd, struct cmd_fs *fs, bool need_pass, struct bch_sb **ret)
{
	const struct bch_sb_field_crypt *f;
	struct bch_sb *sb;
	char uuid[37];

	if (read_newest_sb(cmd, fs->devs, fs->nr, &sb))
		return EXIT_FAIL;
	uuid_unparse(sb->user_uuid, uuid);
	if (!bch_sb_encrypted(sb) || !(f = bch_sb_crypt(sb))) {
		cmd_err(cmd, "%s: filesystem %s is not encrypted", fs->devs[0], uuid);
		free(sb);
		return EXIT_FAIL;
	}
	if (need_pass && !bch_crypt_has_passphrase(f)) {
		cmd_err(cmd, "%s: filesystem %s has no passphrase (its key is stored in the clear; "
			"set one with set-passphrase)", fs->devs[0], uuid);
		free(sb);
		return EXIT_FAIL;
	}
	*ret = sb;
	return 0;
}

int cmd_crypt_key_early(const char *cmd, char **devs, unsigned nr, char *err, size_t errlen)
{
	struct bch_sb *best = NULL;
	uint8_t key[BCH_KEY_BYTES];
	int r;

	(void)cmd;
	/* the newest readable superblock; none: the command's own checks say why */
	for (unsigned i = 0; i < nr; i++) {
		struct bch_blockdev *bd;
		struct bch_sb *sb;

		if (bch_dev_open(devs[i], BCH_DEV_RDONLY | BCH_DEV_NO_LOCK, &bd))
			continue;
		r = bch_sb_read(bd, &sb, NULL);
		bch_dev_close(bd);
		if (r)
			continue;
		if (!best || sb->seq > best->seq) {
			free(best);
			best = sb;
		} else {
			free(sb);
		}
	}
	if (!best || !bch_sb_encrypted(best) || !bch_sb_crypt(best) ||
	    !bch_crypt_has_passphrase(bch_sb_crypt(best))) {
		free(best);
		return 0;
	}
	r = bch_cmd_key_provider(best, key, err, errlen);
	if (!r)
		r = bch_crypt_key_remember(best->uuid, key);
	sodium_memzero(key, sizeof(key));
	free(best);
	return r;
}

static void unlock_usage(FILE *f)
{
	fprintf(f,
"Usage: bcachefs unlock [-c] [-k KEYRING] [--passphrase-file FILE] DEVICE...\n"
"Check the passphrase of an encrypted filesystem and put its key in the kernel\n"
"keyring, so that later commands (fsck, fusemount, image, ...) do not ask for it.\n"
"\n"
"  -c, --check                 only check the passphrase; the keyring is unchanged\n"
"  -k, --keyring=KEYRING       session, user or user_session (default); outside a\n"
"                              login session, session is the user-session keyring\n"
"      --passphrase-file=FILE  read the passphrase from FILE (one line) instead of\n"
"                              the terminal (or stdin when it is not a terminal)\n"
"  -q, --quiet                 print nothing on success\n"
"  -h, --help                  this text\n"
"\n"
"The key stored is derived from the passphrase (not the passphrase itself), as\n"
"type user, description bcachefs:<UUID>; remove it with keyctl unlink.\n"
"Nothing is written to the devices.\n"
"Exit codes: 0 success, 1 failure (wrong passphrase, not encrypted, keyring\n"
"unreachable), 16 usage error.\n");
}

int cmd_unlock(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "check",		no_argument,		NULL, 'c' },
		{ "keyring",		required_argument,	NULL, 'k' },
		{ "passphrase-file",	required_argument,	NULL, 'F' },
		{ "quiet",		no_argument,		NULL, 'q' },
		{ "help",		no_argument,		NULL, 'h' },
		{ NULL }
	};
	enum bch_keyring ring = BCH_KEYRING_USER_SESSION;
	const char *file = NULL;
	bool check = false, quiet = false;
	int opt;

	while ((opt = getopt_long(argc, argv, "ck:qh", longopts, NULL)) != -1)
		switch (opt) {
		case 'c': check = true;		break;
		case 'q': quiet = true;		break;
		case 'F': file = optarg;	break;
		case 'k':
			if (bch_keyring_parse(optarg, &ring)) {
				cmd_err("unlock", "-k %s: not a keyring (session, user, user_session)", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'h':
			unlock_usage(stdout);
			return EXIT_OK;
		default:
			return cmd_opt_err("unlock", argv, "ck:qh");
		}
	if (optind >= argc) {
		cmd_err("unlock", "no device given");
		fprintf(stderr, "Try 'bcachefs unlock --help'.\n");
		return EXIT_USAGE;
	}
	if (!file && getenv(BCH_PASSPHRASE_ENV) && *getenv(BCH_PASSPHRASE_ENV))
		file = getenv(BCH_PASSPHRASE_ENV);

	struct cmd_fs fs;
	struct bch_sb *sb;
	int ret = cmd_fs_resolve("unlock", argv + optind, argc - optind, &fs);
	if (ret)
		return ret;
	if (fs.mounted) {
		cmd_err("unlock", "%s: mounted (fusemount): its key is known already", fs.mnt);
		cmd_fs_free(&fs);
		return EXIT_FAIL;
	}
	if ((ret = encrypted_sb("unlock", &fs, true, &sb))) {
		cmd_fs_free(&fs);
		return ret;
	}

	const struct bch_sb_field_crypt *f = bch_sb_crypt(sb);
	uint8_t wk[BCH_KEY_BYTES], key[BCH_KEY_BYTES];
	char uuid[37], prompt[80], err[512], done[256], *pass;
	size_t len;
	int r;

	uuid_unparse(sb->user_uuid, uuid);
	snprintf(prompt, sizeof(prompt), "Enter passphrase for %s: ", uuid);
	r = bch_passphrase_read(file, prompt, false, &pass, &len, err, sizeof(err));
	if (r) {
		cmd_err("unlock", "%s: %s", fs.devs[0], err);
		ret = EXIT_FAIL;
		goto out;
	}
	r = bch_crypt_kdf(f, pass, len, wk);
	bch_passphrase_free(pass);
	if (!r)
		r = bch_crypt_unwrap(sb, f, wk, key);
	sodium_memzero(key, sizeof(key));
	if (r == -BCH_ERR_key_wrong) {
		cmd_err("unlock", "%s: filesystem %s: wrong passphrase", fs.devs[0], uuid);
		ret = EXIT_FAIL;
	} else if (r) {
		cmd_err("unlock", "%s: deriving the key: %s", fs.devs[0], bch_err_str(r));
		ret = EXIT_FAIL;
	} else if (check) {
		if (!quiet)
			printf("%s: passphrase correct (keyring unchanged)\n", uuid);
	} else if ((r = bch_keyring_add(sb->user_uuid, ring, wk, done, sizeof(done), err, sizeof(err)))) {
		cmd_err("unlock", "%s: %s", fs.devs[0], err);
		ret = EXIT_FAIL;
	} else if (!quiet) {
		printf("%s: %s\n", uuid, done);
	}
	sodium_memzero(wk, sizeof(wk));
out:
	free(sb);
	cmd_fs_free(&fs);
	return ret;
}

static void set_pass_usage(FILE *f, bool remove)
{
	if (remove)
		fprintf(f,
"Usage: bcachefs remove-passphrase DEVICE...\n"
"Store the key of an encrypted filesystem in the clear in its superblock: it then\n"
"opens without a passphrase (the data stays encrypted and authenticated, but\n"
"anyone with the devices can read it).  The current passphrase comes from the\n"
"keyring (bcachefs unlock), $" BCH_PASSPHRASE_ENV ", the terminal or stdin.\n");
	else
		fprintf(f,
"Usage: bcachefs set-passphrase [--passphrase-file NEWFILE] DEVICE...\n"
"Change (or, after remove-passphrase, set) the passphrase of an encrypted\n"
"filesystem.  The current passphrase comes from the keyring (bcachefs unlock),\n"
"$" BCH_PASSPHRASE_ENV ", the terminal or a first line of stdin; the new one\n"
"from NEWFILE, the terminal (asked twice) or the next line of stdin.\n"
"\n"
"      --passphrase-file=FILE  read the new passphrase from FILE (one line)\n");
	fprintf(f,
"  -q, --quiet                 print nothing on success\n"
"  -h, --help                  this text\n"
"\n"
"Every member's superblock is rewritten; an interruption leaves the old or the\n"
"new passphrase working.  A key that unlock put in the keyring was derived from\n"
"the old passphrase and no longer opens it: run unlock again.  Refused on an\n"
"unencrypted or a mounted filesystem.\n"
"Exit codes: 0 success, 1 failure (wrong passphrase, not encrypted, mounted),\n"
"16 usage error.\n");
}

static int set_or_remove(int argc, char *argv[], bool remove)
{
	static const struct option longopts[] = {
		{ "passphrase-file",	required_argument,	NULL, 'F' },
		{ "quiet",		no_argument,		NULL, 'q' },
		{ "help",		no_argument,		NULL, 'h' },
		{ NULL }
	};
	const char *cmd = remove ? "remove-passphrase" : "set-passphrase";
	const char *file = NULL;
	bool quiet = false;
	int opt;

	while ((opt = getopt_long(argc, argv, "qh", longopts, NULL)) != -1)
		switch (opt) {
		case 'q': quiet = true;		break;
		case 'F':
			if (remove)
				goto usage;
			file = optarg;
			break;
		case 'h':
			set_pass_usage(stdout, remove);
			return EXIT_OK;
		default:
			return cmd_opt_err(cmd, argv, "qh");
		}
	if (optind >= argc) {
		cmd_err(cmd, "no device given");
		goto usage;
	}

	struct cmd_fs fs;
	struct bch_sb *sb;
	int ret = resolve_unmounted(cmd, argv + optind, argc - optind, &fs);
	if (ret)
		return ret;
	if ((ret = encrypted_sb(cmd, &fs, remove, &sb))) {
		cmd_fs_free(&fs);
		return ret;
	}

	char uuid[37], err[512], *pass = NULL;
	uint8_t user_uuid[BCH_UUID_SIZE];
	struct bch_opts o;
	struct bch_fs *c;
	size_t len = 0;
	int r;

	uuid_unparse(sb->user_uuid, uuid);
	memcpy(user_uuid, sb->user_uuid, BCH_UUID_SIZE);
	free(sb);
	bch_opts_default(&o);
	/* the current key: the provider (keyring, env file, terminal, stdin) */
	if ((r = bch_fs_open(fs.devs, fs.nr, &o, &c, err, sizeof(err)))) {
		/*
		 * not "-o degraded opens it": the key is rewrapped in every member's
		 * superblock, and a member left out would keep the old passphrase
		 */
		if (r == -BCH_ERR_device_missing)
			cmd_err(cmd, "%s: %s: %s rewrites every member's superblock: give every "
				"member device (nothing written)", fs.devs[0],
				strstr(err, " was not given") ? strtok(err, ":") : err, cmd);
		else
			cmd_err(cmd, "%s: %s", fs.devs[0], err);
		cmd_fs_free(&fs);
		return EXIT_FAIL;
	}
	if (!remove && (r = bch_passphrase_read(file, "Enter new passphrase: ", true, &pass, &len,
						 err, sizeof(err)))) {
		cmd_err(cmd, "%s: new passphrase: %s", fs.devs[0],
			r == -BCH_ERR_key_missing ? "none given (stdin ended)" : err);
		ret = EXIT_FAIL;
	} else if ((r = bch_crypt_rewrap(c, pass, len))) {
		cmd_err(cmd, "%s: %s", fs.devs[0], c->err_msg[0] ? c->err_msg : bch_err_str(r));
		ret = EXIT_FAIL;
	}
	bch_passphrase_free(pass);
	int cr = bch_fs_close(c);
	if (cr && !ret) {
		cmd_err(cmd, "%s: closing: %s", fs.devs[0], bch_err_str(cr));
		ret = EXIT_FAIL;
	}
	if (!ret && !quiet) {
		uint8_t wk[BCH_KEY_BYTES];
		char why[256];

		printf(remove ? "%s: passphrase removed: the key is stored in the clear\n"
			      : "%s: passphrase changed\n", uuid);
		/* a key unlock stored was derived from the old passphrase */
		if (!bch_keyring_get(user_uuid, wk, why, sizeof(why)))
			printf("%s: the keyring still holds the key of the old passphrase "
			       "(bcachefs:%s): run `bcachefs unlock` again, or keyctl unlink it\n",
			       uuid, uuid);
		sodium_memzero(wk, sizeof(wk));
	}
	cmd_fs_free(&fs);
	return ret;
usage:
	fprintf(stderr, "Try 'bcachefs %s --help'.\n", cmd);
	return EXIT_USAGE;
}

int cmd_set_passphrase(int argc, char *argv[])
{
	return set_or_remove(argc, argv, false);
}

int cmd_remove_passphrase(int argc, char *argv[])
{
	return set_or_remove(argc, argv, true);
}
