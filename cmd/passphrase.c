// SPDX-License-Identifier: GPL-2.0
/*
 * passphrase.c - reading a passphrase (file, terminal, stdin) and the key
 * provider of every open (see passphrase.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include <sodium.h>
#include <uuid/uuid.h>

#include "bcachefs.h"
#include "crypt.h"
#include "errcode.h"
#include "keyring.h"
#include "passphrase.h"

/* room for BCH_PASSPHRASE_MAX bytes, a newline, one byte more (too long) and the NUL */
#define BUF_BYTES	(BCH_PASSPHRASE_MAX + 3)

void bch_passphrase_free(char *pass)
{
	if (pass)
		sodium_free(pass);	/* wipes it */
}

static char *buf_alloc(void)
{
	char *b;

	if (sodium_init() < 0 || !(b = sodium_malloc(BUF_BYTES)))
		return NULL;
	memset(b, 0, BUF_BYTES);
	return b;
}

/*
 * Read from fd into b up to and including the first newline (or EOF, or
 * BUF_BYTES - 1 bytes), a byte at a time: nothing after the line is taken.
 * Returns the bytes read or -errno.
 */
static ssize_t read_line(int fd, char *b)
{
	size_t n = 0;

	while (n < BUF_BYTES - 1) {
		ssize_t r = read(fd, b + n, 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (!r)
			break;
		if (b[n++] == '\n')
			break;
	}
	b[n] = 0;
	return n;
}

/* Strip one trailing newline (and a CR before it); check empty / too long. */
static int check_line(char *b, size_t n, const char *what, size_t *len, char *err, size_t errlen)
{
	if (n && b[n - 1] == '\n')
		b[--n] = 0;
	if (n && b[n - 1] == '\r')
		b[--n] = 0;
	if (!n)
		return bch_errf(err, errlen, -EINVAL, "%s: empty passphrase", what);
	if (n > BCH_PASSPHRASE_MAX)
		return bch_errf(err, errlen, -EINVAL, "%s: passphrase longer than %u bytes", what,
				BCH_PASSPHRASE_MAX);
	if (memchr(b, '\n', n) || strlen(b) != n)
		return bch_errf(err, errlen, -EINVAL, "%s: more than one line (or a NUL byte)", what);
	*len = n;
	return 0;
}

static int from_file(const char *file, char *b, size_t *len, char *err, size_t errlen)
{
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	size_t n = 0;

	if (fd < 0)
		return bch_errf(err, errlen, -errno, "cannot read passphrase file %s: %s", file,
				strerror(errno));
	while (n < BUF_BYTES - 1) {
		ssize_t r = read(fd, b + n, BUF_BYTES - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			close(fd);
			return bch_errf(err, errlen, -e, "cannot read passphrase file %s: %s", file,
					strerror(e));
		}
		if (!r)
			break;
		n += r;
	}
	close(fd);
	b[n] = 0;
	if (n == BUF_BYTES - 1)		/* more than a passphrase, its newline and one byte */
		return bch_errf(err, errlen, -EINVAL, "passphrase file %s: longer than %u bytes",
				file, BCH_PASSPHRASE_MAX);
	char what[PATH_MAX + 32];
	snprintf(what, sizeof(what), "passphrase file %s", file);
	return check_line(b, n, what, len, err, errlen);
}

/* One entry on the terminal with echo off; the terminal restored after. */
static int from_tty(int tty, const char *prompt, char *b, size_t *len, char *err, size_t errlen)
{
	struct termios old, noecho;
	bool restore = false;
	ssize_t n;

	/* echo off before the prompt: nothing typed after it is shown */
	if (!tcgetattr(tty, &old)) {
		noecho = old;
		noecho.c_lflag &= ~(ECHO | ECHONL);
		noecho.c_lflag |= ICANON;
		restore = !tcsetattr(tty, TCSAFLUSH, &noecho);
	}
	if (write(tty, prompt, strlen(prompt)) < 0) {
		int e = errno;
		if (restore)
			tcsetattr(tty, TCSAFLUSH, &old);
		return bch_errf(err, errlen, -e, "/dev/tty: %s", strerror(e));
	}
	n = read_line(tty, b);
	if (restore)
		tcsetattr(tty, TCSAFLUSH, &old);
	/* the newline the user typed was not echoed: end the prompt's line */
	ssize_t w = write(tty, "\n", 1);
	(void)w;
	if (n < 0)
		return bch_errf(err, errlen, n, "/dev/tty: %s", strerror(-n));
	if (!n)
		return bch_errf(err, errlen, -BCH_ERR_key_missing, "no passphrase entered");
	return check_line(b, n, "terminal", len, err, errlen);
}

int bch_passphrase_read(const char *file, const char *prompt, bool confirm,
			char **pass, size_t *len, char *err, size_t errlen)
{
	char *b = buf_alloc(), *b2 = NULL;
	int r, tty = -1;

	*pass = NULL;
	if (!b)
		return bch_errf(err, errlen, -ENOMEM, "out of locked memory for the passphrase");
	if (file) {
		r = from_file(file, b, len, err, errlen);
	} else if (isatty(STDIN_FILENO) &&
		   ((tty = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY)) >= 0 ||
		    (tty = dup(STDIN_FILENO)) >= 0)) {	/* no /dev/tty: the terminal on stdin */
		r = from_tty(tty, prompt, b, len, err, errlen);
		if (!r && confirm) {
			size_t len2;
			if (!(b2 = buf_alloc()))
				r = bch_errf(err, errlen, -ENOMEM, "out of locked memory for the passphrase");
			else if (!(r = from_tty(tty, "Enter the same passphrase again: ", b2, &len2,
						err, errlen)) &&
				 (len2 != *len || sodium_memcmp(b, b2, *len)))
				r = bch_errf(err, errlen, -EINVAL, "the two passphrases do not match");
			bch_passphrase_free(b2);
		}
		close(tty);
	} else {
		ssize_t n = read_line(STDIN_FILENO, b);
		if (n < 0)
			r = bch_errf(err, errlen, n, "stdin: %s", strerror(-n));
		else if (!n)
			r = bch_errf(err, errlen, -BCH_ERR_key_missing, "no passphrase on stdin");
		else
			r = check_line(b, n, "stdin", len, err, errlen);
	}
	if (r) {
		bch_passphrase_free(b);
		return r;
	}
	*pass = b;
	return 0;
}

int bch_cmd_key_provider(const struct bch_sb *sb, uint8_t *key, char *err, size_t errlen)
{
	const struct bch_sb_field_crypt *f = bch_sb_crypt(sb);
	uint8_t wk[BCH_KEY_BYTES];
	char uuid[37], prompt[80], *pass, why[512];
	const char *file = getenv(BCH_PASSPHRASE_ENV);
	bool stale = false;
	size_t len;
	int r;

	if (!f)
		return bch_errf(err, errlen, -BCH_ERR_sb_invalid, "encrypted filesystem without its crypt field");
	uuid_unparse(sb->user_uuid, uuid);
	if (bch_crypt_key_unwritten(f))	/* before asking for a passphrase that cannot help */
		return bch_errf(err, errlen, -BCH_ERR_key_unwritten,
				"filesystem %s: no key recorded: its format --source did not finish "
				"(the image holds part of the tree at most): format it again", uuid);

	/* the keyring first: `bcachefs unlock` put the wrapping key there */
	char kr_why[sizeof(why) + 4] = "";
	r = bch_keyring_get(sb->user_uuid, wk, why, sizeof(why));
	if (r == -EACCES || r == -EKEYREJECTED)	/* say so if no passphrase comes either */
		snprintf(kr_why, sizeof(kr_why), " (%s)", why);
	if (!r) {
		r = bch_crypt_unwrap(sb, f, wk, key);
		sodium_memzero(wk, sizeof(wk));
		if (!r)
			return 0;
		stale = true;	/* the passphrase changed since unlock: ask */
	}

	if (file && !*file)
		file = NULL;
	snprintf(prompt, sizeof(prompt), "Enter passphrase for %s: ", uuid);
	r = bch_passphrase_read(file, prompt, false, &pass, &len, why, sizeof(why));
	if (r == -BCH_ERR_key_missing)
		return bch_errf(err, errlen, stale ? -BCH_ERR_key_wrong : -BCH_ERR_key_missing,
				stale ? "filesystem %s: the key in the keyring is wrong (passphrase changed?) "
					"and no passphrase was given: run `bcachefs unlock` again"
				      : "filesystem %s is encrypted and no key was given%s: run `bcachefs unlock "
					"DEVICE` first, or set " BCH_PASSPHRASE_ENV "=FILE", uuid, stale ? "" : kr_why);
	if (r)
		return bch_errf(err, errlen, r, "filesystem %s: %s", uuid, why);
	r = bch_crypt_kdf(f, pass, len, wk);
	bch_passphrase_free(pass);
	if (!r)
		r = bch_crypt_unwrap(sb, f, wk, key);
	sodium_memzero(wk, sizeof(wk));
	if (r == -BCH_ERR_key_wrong)
		return bch_errf(err, errlen, r, "filesystem %s: wrong passphrase", uuid);
	if (r)
		return bch_errf(err, errlen, r, "filesystem %s: deriving the key: %s", uuid, bch_err_str(r));
	return 0;
}
