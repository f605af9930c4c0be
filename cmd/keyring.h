/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_CMD_KEYRING_H
#define _BCACHEFS_CMD_KEYRING_H

/*
 * keyring.h - the kernel keyring, through libkeyutils (dlopen()ed on first
 * use, dl.h: soname libkeyutils.so.1, Debian package libkeyutils1).
 *
 * `bcachefs unlock` stores a filesystem's wrapping key (bch_crypt_kdf()'s
 * output, 32 bytes: the passphrase is never stored) as a key of type "user"
 * with description "bcachefs:<external UUID>"; every later open finds it
 * there (passphrase.c's provider) and does not ask.
 *
 * Which keyring: session (the login session's), user (the user's, kept until
 * logout or reboot), user_session (the user's default session keyring, the
 * default, as bcachefs-tools).  Outside a login session a process has no
 * session keyring of its own: "@s" then names the per-user default one for
 * lookups, but adding to it creates a new anonymous session keyring that
 * ends with the process, so its keys cannot be read back by the next
 * command.  bch_keyring_add() therefore adds to the keyring "@s" resolves
 * to WITHOUT creating one, and reads the key back before it says it was
 * stored.  Lookups search the session, the user and the user-session
 * keyrings, in that order.  A key in the user or user-session keyring gets
 * user read and search permission besides the possessor's, so the user's
 * processes find it whatever their session.
 */

#include <stddef.h>
#include <stdint.h>

#include "bcachefs_format.h"

enum bch_keyring {
	BCH_KEYRING_SESSION,
	BCH_KEYRING_USER,
	BCH_KEYRING_USER_SESSION,
};

/* "session", "user", "user_session" (or user-session): 0 or -EINVAL */
int bch_keyring_parse(const char *name, enum bch_keyring *ret);

/*
 * The wrapping key stored for the filesystem with this external UUID.
 * 0 and wk filled; -ENOKEY none found; -EACCES found but not readable;
 * -ELIBACC libkeyutils missing; with a message in err.
 */
int bch_keyring_get(const uint8_t user_uuid[BCH_UUID_SIZE], uint8_t wk[32], char *err, size_t errlen);

/*
 * Store wk in keyring `which` (replacing an older key of the same
 * description there).  0 with what was done in done ("added to the user
 * keyring (key 1234)"); a negative error with a message in err.
 */
int bch_keyring_add(const uint8_t user_uuid[BCH_UUID_SIZE], enum bch_keyring which,
		    const uint8_t wk[32], char *done, size_t donelen, char *err, size_t errlen);

#endif /* _BCACHEFS_CMD_KEYRING_H */
