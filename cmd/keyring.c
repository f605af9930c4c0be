// SPDX-License-Identifier: GPL-2.0
/*
 * keyring.c - filesystem wrapping keys in the kernel keyring, through
 * libkeyutils loaded on first use (see keyring.h).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <keyutils.h>
#include <sodium.h>
#include <uuid/uuid.h>

#include "bcachefs.h"
#include "dl.h"
#include "errcode.h"
#include "keyring.h"

#define KEYUTILS_DL_SONAME	"libkeyutils.so.1"	/* Debian package libkeyutils1 */

/* x(member, function): every libkeyutils function used */
#define KEYUTILS_DL_FUNCS()				\
	x(add_key,		add_key)		\
	x(get_keyring_ID,	keyctl_get_keyring_ID)	\
	x(search,		keyctl_search)		\
	x(setperm,		keyctl_setperm)		\
	x(read,			keyctl_read)		\
	x(unlink,		keyctl_unlink)

static struct keyutils_dl {
#define x(member, func)	BCH_DL_MEMBER(member, func)
	KEYUTILS_DL_FUNCS()
#undef x
} ku;

static const struct bch_dl_sym ku_syms[] = {
#define x(member, func)	BCH_DL_SYM(struct keyutils_dl, member, func, NULL)
	KEYUTILS_DL_FUNCS()
#undef x
};

static struct bch_dl_lib ku_lib = BCH_DL_LIB(KEYUTILS_DL_SONAME, -ELIBACC, ku_syms, &ku);

#define WK_BYTES	32

static const struct {
	const char	*name;
	key_serial_t	spec;
	const char	*what;
} rings[] = {
	[BCH_KEYRING_SESSION]		= { "session",	    KEY_SPEC_SESSION_KEYRING,	   "session keyring" },
	[BCH_KEYRING_USER]		= { "user",	    KEY_SPEC_USER_KEYRING,	   "user keyring" },
	[BCH_KEYRING_USER_SESSION]	= { "user_session", KEY_SPEC_USER_SESSION_KEYRING, "user-session keyring" },
};

int bch_keyring_parse(const char *name, enum bch_keyring *ret)
{
	for (unsigned i = 0; i < sizeof(rings) / sizeof(rings[0]); i++)
		if (!strcmp(name, rings[i].name)) {
			*ret = i;
			return 0;
		}
	if (!strcmp(name, "user-session")) {
		*ret = BCH_KEYRING_USER_SESSION;
		return 0;
	}
	return -EINVAL;
}

static void describe(const uint8_t user_uuid[BCH_UUID_SIZE], char desc[64])
{
	char uuid[37];

	uuid_unparse(user_uuid, uuid);
	snprintf(desc, 64, "bcachefs:%s", uuid);
}

static int load(char *err, size_t errlen)
{
	/* sodium_malloc() below: libsodium must be initialised first */
	if (sodium_init() < 0)
		return bch_errf(err, errlen, -ENOMEM, "cannot initialise libsodium");
	if (bch_dl_load(&ku_lib))
		return bch_errf(err, errlen, ku_lib.err, "cannot load %s (the kernel keyring): %s",
				ku_lib.soname, ku_lib.why);
	return 0;
}

/* Read key id's payload into wk: 0, or -errno. */
static int read_wk(key_serial_t id, uint8_t wk[WK_BYTES])
{
	uint8_t *buf = sodium_malloc(WK_BYTES + 1);
	long n;
	int r = 0;

	if (!buf)
		return -ENOMEM;
	n = ku.read(id, (char *)buf, WK_BYTES + 1);
	if (n < 0)
		r = -errno;
	else if (n != WK_BYTES)
		r = -EKEYREJECTED;	/* not a key we stored */
	else
		memcpy(wk, buf, WK_BYTES);
	sodium_free(buf);
	return r;
}

int bch_keyring_get(const uint8_t user_uuid[BCH_UUID_SIZE], uint8_t wk[WK_BYTES], char *err, size_t errlen)
{
	static const enum bch_keyring order[] = { BCH_KEYRING_SESSION, BCH_KEYRING_USER, BCH_KEYRING_USER_SESSION };
	char desc[64];
	int r, unreadable = 0;

	if ((r = load(err, errlen)))
		return r;
	describe(user_uuid, desc);
	for (unsigned i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		long id = ku.search(rings[order[i]].spec, "user", desc, 0);
		if (id < 0)
			continue;
		if (!(r = read_wk(id, wk)))
			return 0;
		unreadable = r;
	}
	if (unreadable)
		return bch_errf(err, errlen, unreadable == -EKEYREJECTED ? -EKEYREJECTED : -EACCES,
				"%s: found in the keyring but cannot read it (%s); unlock with -k user",
				desc, strerror(-unreadable));
	return bch_errf(err, errlen, -ENOKEY, "%s: not in the keyring", desc);
}

int bch_keyring_add(const uint8_t user_uuid[BCH_UUID_SIZE], enum bch_keyring which,
		    const uint8_t wk[WK_BYTES], char *done, size_t donelen, char *err, size_t errlen)
{
	char desc[64];
	uint8_t back[WK_BYTES];
	key_serial_t ring, id;
	bool own_session = true;
	int r;

	if ((r = load(err, errlen)))
		return r;
	describe(user_uuid, desc);
	/* resolve without creating: "@s" of a process outside a login session
	 * is the user-session keyring, not a new one that dies with us */
	ring = ku.get_keyring_ID(rings[which].spec, 0);
	if (ring < 0)
		return bch_errf(err, errlen, -errno, "the %s is not reachable: %s", rings[which].what,
				strerror(errno));
	if (which == BCH_KEYRING_SESSION &&
	    ring == ku.get_keyring_ID(KEY_SPEC_USER_SESSION_KEYRING, 0))
		own_session = false;
	id = ku.add_key("user", desc, wk, WK_BYTES, ring);
	if (id < 0)
		return bch_errf(err, errlen, -errno, "adding %s to the %s: %s", desc, rings[which].what,
				strerror(errno));
	/*
	 * The user keyrings are the user's, in every session: let the user's
	 * other processes (which may not possess the key: no session keyring
	 * linking the user keyring) search and read it, as they could ptrace
	 * this one.  A session keyring's key stays the session's.
	 */
	if (which != BCH_KEYRING_SESSION || !own_session)
		ku.setperm(id, KEY_POS_ALL | KEY_USR_VIEW | KEY_USR_READ | KEY_USR_SEARCH);
	/* make sure a later command finds and reads it */
	long found = ku.search(rings[which].spec, "user", desc, 0);
	r = found == id ? read_wk(id, back) : -ENOKEY;
	if (!r && sodium_memcmp(back, wk, WK_BYTES))
		r = -EKEYREJECTED;
	sodium_memzero(back, sizeof(back));
	if (r) {
		ku.unlink(id, ring);
		return bch_errf(err, errlen, r, "%s: added to the %s but cannot read it back (%s); "
				"try -k user", desc, rings[which].what, strerror(-r));
	}
	snprintf(done, donelen, "added %s to the %s (key %d)%s", desc, rings[which].what, id,
		 own_session ? "" : ": no login session, so that is the user-session keyring");
	return 0;
}
