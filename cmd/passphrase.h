/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_CMD_PASSPHRASE_H
#define _BCACHEFS_CMD_PASSPHRASE_H

/*
 * passphrase.h - reading a passphrase, and the key provider every open of an
 * encrypted filesystem calls (crypt.h) when the process does not know its key.
 *
 * Where a passphrase comes from, first that applies:
 *   - a file (--passphrase-file FILE, or $BCACHEFS_PASSPHRASE_FILE for
 *     commands without the option): its one line, a trailing newline
 *     stripped;
 *   - the terminal, when stdin is one: /dev/tty with echo off; a new
 *     passphrase is asked twice and both must match;
 *   - otherwise one line of stdin, read a byte at a time so that nothing
 *     after that line is consumed.
 * Refused with a message: empty, longer than BCH_PASSPHRASE_MAX bytes, more
 * than one line in a file, an unreadable file, two entries that differ.
 *
 * Invariants
 *   (1) A passphrase lives only in sodium_malloc()ed (mlocked, guarded)
 *       memory and is wiped when freed (bch_passphrase_free); derived keys
 *       on the stack are sodium_memzero()ed before return.
 *   (2) The terminal's echo is restored before returning, also on error.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BCH_PASSPHRASE_ENV	"BCACHEFS_PASSPHRASE_FILE"

/*
 * Read a passphrase from file (NULL: the terminal or stdin as above; the
 * terminal shows prompt).  confirm: a new passphrase, asked twice on a
 * terminal.  0 with *pass (NUL-terminated, free with bch_passphrase_free)
 * and *len; -BCH_ERR_key_missing when stdin ended before any byte;
 * another negative error with a message in err (no "bcachefs CMD:" prefix).
 */
int bch_passphrase_read(const char *file, const char *prompt, bool confirm,
			char **pass, size_t *len, char *err, size_t errlen);
void bch_passphrase_free(char *pass);

/*
 * The key provider (crypt.h, installed by main()): the keyring's wrapping
 * key (keyring.h), else a passphrase from $BCACHEFS_PASSPHRASE_FILE, the
 * terminal ("Enter passphrase for <uuid>: ") or stdin.
 */
struct bch_sb;
int bch_cmd_key_provider(const struct bch_sb *sb, uint8_t *key, char *err, size_t errlen);

#endif /* _BCACHEFS_CMD_PASSPHRASE_H */
