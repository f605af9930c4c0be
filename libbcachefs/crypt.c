// SPDX-License-Identifier: GPL-2.0
/*
 * crypt.c - the filesystem key, its wrap, the nonce counter, and
 * XChaCha20-Poly1305 of extents, bsets and journal entries (see crypt.h and
 * "Encryption" in bcachefs_format.h).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <libscrypt.h>
#include <sodium.h>

#include <pthread.h>

#include "bcachefs.h"
#include "crypt.h"
#include "dl.h"
#include "errcode.h"
#include "journal.h"
#include "super.h"

_Static_assert(crypto_aead_xchacha20poly1305_ietf_KEYBYTES == BCH_KEY_BYTES, "key size");
_Static_assert(crypto_aead_xchacha20poly1305_ietf_ABYTES == BCH_MAC_BYTES, "mac size");
_Static_assert(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES == 24, "nonce size");

/* Values taken per superblock write of the reservation (tests make it small). */
uint64_t bch_crypt_nonce_reserve_step = 1ULL << 20;
#define NONCE_RESERVE		bch_crypt_nonce_reserve_step

enum nonce_domain {
	NONCE_EXTENT	= 1,
	NONCE_BSET	= 2,
	NONCE_JSET	= 3,
	NONCE_NODE_KEYS	= 4,
};

struct bch_crypt {
	uint8_t		key[BCH_KEY_BYTES];
	uint64_t	nonce_next;	/* next counter value to hand out */
	uint64_t	nonce_end;	/* first value not reserved on disk */
};

void (*bch_crypt_nonce_hook)(const uint8_t nonce[24]);

struct bch_crypt *bch_fs_crypt(const struct bch_fs *c)
{
	return c->crypt;
}

/* The external uuid of sb as text (a static buffer: messages only). */
static const char *bch_sb_crypt_uuid_text(const struct bch_sb *sb)
{
	static char buf[40];
	const uint8_t *u = sb->user_uuid;

	snprintf(buf, sizeof(buf), "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
		 u[14], u[15]);
	return buf;
}

static int sodium_ready(void)
{
	return sodium_init() < 0 ? -ENOMEM : 0;
}

/* ------------------------------------------------------ superblock field */

/* BLAKE2b-128 keyed with key, of label, the uuid, then data. */
static void keyed_hash(const uint8_t key[BCH_KEY_BYTES], const char *label, const uint8_t uuid[BCH_UUID_SIZE],
		       const void *data, size_t len, uint8_t out[16])
{
	crypto_generichash_state st;

	crypto_generichash_init(&st, key, BCH_KEY_BYTES, 16);
	crypto_generichash_update(&st, (const uint8_t *)label, strlen(label) + 1);
	crypto_generichash_update(&st, uuid, BCH_UUID_SIZE);
	if (len)
		crypto_generichash_update(&st, data, len);
	crypto_generichash_final(&st, out, 16);
	sodium_memzero(&st, sizeof(st));
}

/* Is key the key of sb (its crypt field's key_check)? */
static bool key_checks(const struct bch_sb *sb, const struct bch_sb_field_crypt *f,
		       const uint8_t key[BCH_KEY_BYTES])
{
	uint8_t want[16];

	keyed_hash(key, "bcachefs key check", sb->uuid, NULL, 0, want);
	return !sodium_memcmp(want, f->key_check, 16);
}


bool bch_sb_encrypted(const struct bch_sb *sb)
{
	return (sb->features & BCH_FEATURE_ENCRYPTION) != 0;
}

const struct bch_sb_field_crypt *bch_sb_crypt(const struct bch_sb *sb)
{
	const struct bch_sb_field *f = bch_sb_field_get(sb, BCH_SB_FIELD_crypt);

	if (!f || (size_t)f->u64s * 8 < sizeof(struct bch_sb_field_crypt))
		return NULL;
	return (const struct bch_sb_field_crypt *)f;
}

bool bch_crypt_has_passphrase(const struct bch_sb_field_crypt *f)
{
	return (f->flags & BCH_CRYPT_KDF_MASK) == BCH_KDF_SCRYPT;
}

int bch_sb_crypt_validate(const struct bch_sb *sb, char *err, size_t errlen)
{
	const struct bch_sb_field_crypt *f = bch_sb_crypt(sb);
	bool flag = sb->flags & BCH_SB_FLAG_ENCRYPTED;

	if (!bch_sb_encrypted(sb)) {
		if (flag || bch_sb_field_get(sb, BCH_SB_FIELD_crypt))
			return bch_errf(err, errlen, -BCH_ERR_sb_invalid,
					"crypt field or flag on a filesystem without encryption");
		return 0;
	}
	if (!f || !flag)
		return bch_errf(err, errlen, -BCH_ERR_sb_invalid,
				"encrypted filesystem without its crypt field");
	unsigned kdf = f->flags & BCH_CRYPT_KDF_MASK;
	if (kdf != BCH_KDF_NONE && kdf != BCH_KDF_SCRYPT)
		return bch_errf(err, errlen, -BCH_ERR_sb_invalid, "crypt: unknown kdf type %u", kdf);
	/* bounded work and memory: a stranger's image cannot make an open run for hours */
	if (kdf == BCH_KDF_SCRYPT &&
	    (f->kdf_n_log2 < 10 || f->kdf_n_log2 > 24 || !f->kdf_r || !f->kdf_p ||
	     (uint64_t)f->kdf_r * f->kdf_p > 64 ||
	     ((uint64_t)128 * f->kdf_r << f->kdf_n_log2) > (1ULL << 30) ||
	     ((uint64_t)f->kdf_r * f->kdf_p << f->kdf_n_log2) > (1ULL << 26)))
		return bch_errf(err, errlen, -BCH_ERR_sb_invalid,
				"crypt: scrypt parameters out of range (N=2^%u r=%u p=%u)",
				f->kdf_n_log2, f->kdf_r, f->kdf_p);
	if (!f->nonce_reserved)
		return bch_errf(err, errlen, -BCH_ERR_sb_invalid, "crypt: nonce counter is zero");
	return 0;
}

int bch_crypt_kdf(const struct bch_sb_field_crypt *f, const char *pass, size_t len,
		  uint8_t wrapping_key[BCH_KEY_BYTES])
{
	if (!bch_crypt_has_passphrase(f) || f->kdf_n_log2 > 30 || !f->kdf_r || !f->kdf_p)
		return -EINVAL;
	if (libscrypt_scrypt((const uint8_t *)pass, len, f->salt, sizeof(f->salt),
			     1ULL << f->kdf_n_log2, f->kdf_r, f->kdf_p, wrapping_key, BCH_KEY_BYTES))
		return errno ? -errno : -ENOMEM;
	return 0;
}

/*
 * format --source --encrypted wraps the key only when the copy ends (the
 * scrypt runs beside it, cmd_format.c): until then the wrapped key and its
 * MAC are zero, which no wrap leaves (a MAC of zero bytes is a 2^-128 chance).
 */
bool bch_crypt_key_unwritten(const struct bch_sb_field_crypt *f)
{
	for (size_t i = 0; i < sizeof(f->wrapped_key); i++)
		if (f->wrapped_key[i])
			return false;
	return bch_crypt_has_passphrase(f);
}

int bch_crypt_unwrap(const struct bch_sb *sb, const struct bch_sb_field_crypt *f,
		     const uint8_t *wrapping_key, uint8_t key[BCH_KEY_BYTES])
{
	int r;

	if ((r = sodium_ready()))
		return r;
	if (!bch_crypt_has_passphrase(f)) {
		memcpy(key, f->wrapped_key, BCH_KEY_BYTES);
		return key_checks(sb, f, key) ? 0 : -BCH_ERR_key_wrong;
	}
	if (bch_crypt_key_unwritten(f))
		return -BCH_ERR_key_unwritten;
	if (!wrapping_key)
		return -BCH_ERR_key_missing;
	if (crypto_aead_xchacha20poly1305_ietf_decrypt_detached(key, NULL, f->wrapped_key, BCH_KEY_BYTES,
								f->wrapped_key + BCH_KEY_BYTES,
								sb->uuid, BCH_UUID_SIZE,
								f->wrap_nonce, wrapping_key)) {
		sodium_memzero(key, BCH_KEY_BYTES);
		return -BCH_ERR_key_wrong;
	}
	if (!key_checks(sb, f, key)) {
		sodium_memzero(key, BCH_KEY_BYTES);
		return -BCH_ERR_key_wrong;
	}
	return 0;
}

int bch_crypt_wrap(const struct bch_sb *sb, struct bch_sb_field_crypt *f, const uint8_t key[BCH_KEY_BYTES],
		   const char *pass, size_t len)
{
	uint8_t wk[BCH_KEY_BYTES];
	int r;

	if ((r = sodium_ready()))
		return r;
	if (pass && len > BCH_PASSPHRASE_MAX)
		return -EINVAL;
	f->flags = (f->flags & ~BCH_CRYPT_KDF_MASK) | (pass ? BCH_KDF_SCRYPT : BCH_KDF_NONE);
	memset(f->pad, 0, sizeof(f->pad));
	keyed_hash(key, "bcachefs key check", sb->uuid, NULL, 0, f->key_check);
	if (!pass) {
		f->kdf_n_log2 = f->kdf_r = f->kdf_p = 0;
		memset(f->salt, 0, sizeof(f->salt));
		memset(f->wrap_nonce, 0, sizeof(f->wrap_nonce));
		memset(f->wrapped_key, 0, sizeof(f->wrapped_key));
		memcpy(f->wrapped_key, key, BCH_KEY_BYTES);
		return 0;
	}
	bch_crypt_wrap_prepare(sb, f, key);
	if ((r = bch_crypt_kdf(f, pass, len, wk)))
		return r;
	bch_crypt_wrap_finish(sb, f, key, wk);
	sodium_memzero(wk, sizeof(wk));
	return 0;
}

void bch_crypt_wrap_prepare(const struct bch_sb *sb, struct bch_sb_field_crypt *f,
			    const uint8_t key[BCH_KEY_BYTES])
{
	f->flags = (f->flags & ~BCH_CRYPT_KDF_MASK) | BCH_KDF_SCRYPT;
	memset(f->pad, 0, sizeof(f->pad));
	keyed_hash(key, "bcachefs key check", sb->uuid, NULL, 0, f->key_check);
	f->kdf_n_log2 = BCH_KDF_SCRYPT_N_LOG2;
	f->kdf_r = BCH_KDF_SCRYPT_R;
	f->kdf_p = BCH_KDF_SCRYPT_P;
	randombytes_buf(f->salt, sizeof(f->salt));
	randombytes_buf(f->wrap_nonce, sizeof(f->wrap_nonce));
	memset(f->wrapped_key, 0, sizeof(f->wrapped_key));
}

void bch_crypt_wrap_finish(const struct bch_sb *sb, struct bch_sb_field_crypt *f,
			   const uint8_t key[BCH_KEY_BYTES], const uint8_t wrapping_key[BCH_KEY_BYTES])
{
	crypto_aead_xchacha20poly1305_ietf_encrypt_detached(f->wrapped_key, f->wrapped_key + BCH_KEY_BYTES,
							    NULL, key, BCH_KEY_BYTES,
							    sb->uuid, BCH_UUID_SIZE, NULL,
							    f->wrap_nonce, wrapping_key);
}

int bch_crypt_wrap_finish_fs(struct bch_fs *c, const uint8_t wrapping_key[BCH_KEY_BYTES])
{
	struct bch_sb_field_crypt *f = (struct bch_sb_field_crypt *)bch_sb_crypt(c->sb);

	if (!c->crypt || !f || !bch_crypt_has_passphrase(f))
		return bch_fs_err(c, -EINVAL, "filesystem has no passphrase to wrap its key with");
	if (c->read_only)
		return -BCH_ERR_fs_read_only;
	bch_crypt_wrap_finish(c->sb, f, c->crypt->key, wrapping_key);
	return bch_write_super(c);
}

int bch_crypt_clean_mac(struct bch_fs *c, const void *record, size_t len, uint8_t mac[16])
{
	if (!c->crypt)
		return -BCH_ERR_key_missing;
	keyed_hash(c->crypt->key, "bcachefs clean record", c->sb->uuid, record, len, mac);
	return 0;
}

/* ------------------------------------------------------- finding the key */

#define KEYS_MAX	16

struct known_key {
	uint8_t		uuid[BCH_UUID_SIZE];
	uint8_t		key[BCH_KEY_BYTES];
	bool		used;
};

static struct known_key *known;		/* sodium_malloc()ed: KEYS_MAX entries */
static bch_key_provider_fn provider;

int bch_crypt_key_remember(const uint8_t uuid[BCH_UUID_SIZE], const uint8_t key[BCH_KEY_BYTES])
{
	int r;

	if ((r = sodium_ready()))
		return r;
	if (!known) {
		if (!(known = sodium_malloc(KEYS_MAX * sizeof(*known))))
			return -ENOMEM;
		memset(known, 0, KEYS_MAX * sizeof(*known));
	}
	struct known_key *slot = NULL;
	for (unsigned i = 0; i < KEYS_MAX; i++)
		if (known[i].used && !memcmp(known[i].uuid, uuid, BCH_UUID_SIZE)) {
			slot = &known[i];
			break;
		} else if (!known[i].used && !slot) {
			slot = &known[i];
		}
	if (!slot)
		return -ENOSPC;
	memcpy(slot->uuid, uuid, BCH_UUID_SIZE);
	memcpy(slot->key, key, BCH_KEY_BYTES);
	slot->used = true;
	return 0;
}

void bch_crypt_keys_forget(void)
{
	if (known)
		sodium_free(known);	/* wipes it */
	known = NULL;
}

void bch_crypt_set_key_provider(bch_key_provider_fn fn)
{
	provider = fn;
}

static bool key_known(const uint8_t uuid[BCH_UUID_SIZE], uint8_t key[BCH_KEY_BYTES])
{
	for (unsigned i = 0; known && i < KEYS_MAX; i++)
		if (known[i].used && !memcmp(known[i].uuid, uuid, BCH_UUID_SIZE)) {
			memcpy(key, known[i].key, BCH_KEY_BYTES);
			return true;
		}
	return false;
}

/* ----------------------------------------------------- an open filesystem */

int bch_crypt_open(struct bch_fs *c, char *err, size_t errlen)
{
	const struct bch_sb_field_crypt *f;
	struct bch_crypt *cr;
	int r;

	if (!bch_sb_encrypted(c->sb))
		return 0;
	if ((r = bch_sb_crypt_validate(c->sb, err, errlen)))
		return r;
	f = bch_sb_crypt(c->sb);
	if ((r = sodium_ready()))
		return r;
	if (!(cr = sodium_malloc(sizeof(*cr))))
		return -ENOMEM;
	memset(cr, 0, sizeof(*cr));
	if (!bch_crypt_has_passphrase(f)) {
		r = bch_crypt_unwrap(c->sb, f, NULL, cr->key);
	} else if (key_known(c->sb->uuid, cr->key)) {
		r = 0;
	} else if (provider) {
		r = provider(c->sb, cr->key, err, errlen);
		if (!r)
			(void)bch_crypt_key_remember(c->sb->uuid, cr->key);
	} else {
		r = bch_errf(err, errlen, -BCH_ERR_key_missing,
			     "filesystem is encrypted and no key was given");
	}
	if (!r && !key_checks(c->sb, f, cr->key))
		r = bch_errf(err, errlen, -BCH_ERR_key_wrong, "filesystem %s: wrong key (its key check fails)",
			     bch_sb_crypt_uuid_text(c->sb));
	if (r) {
		sodium_free(cr);
		return r;
	}
	cr->nonce_next = cr->nonce_end = f->nonce_reserved;
	c->crypt = cr;
	return 0;
}

void bch_crypt_close(struct bch_fs *c)
{
	if (c->crypt)
		sodium_free(c->crypt);
	c->crypt = NULL;
}

/* Write a reservation up to at least want (and a step beyond). */
static int reserve(struct bch_fs *c, uint64_t from)
{
	struct bch_crypt *cr = c->crypt;
	struct bch_sb_field_crypt *f = (struct bch_sb_field_crypt *)bch_sb_crypt(c->sb);
	int r;

	if (!f)
		return -BCH_ERR_sb_invalid;
	if (from > UINT64_MAX - 2 * NONCE_RESERVE)
		return bch_fs_err(c, -EOVERFLOW, "encryption: nonce counter exhausted");
	uint64_t old = f->nonce_reserved;
	f->nonce_reserved = from + NONCE_RESERVE;
	if ((r = bch_write_super(c))) {
		f->nonce_reserved = old;
		return r;
	}
	cr->nonce_next = from;
	cr->nonce_end = from + NONCE_RESERVE;
	return 0;
}

int bch_crypt_start_rw(struct bch_fs *c)
{
	struct bch_crypt *cr = c->crypt;

	if (!cr || c->read_only)
		return 0;
	/*
	 * The newest superblock's reservation, or any member's if higher (an
	 * older copy never has more; a newer one that did not validate might).
	 */
	uint64_t from = bch_sb_crypt(c->sb)->nonce_reserved;
	for (unsigned i = 0; i < c->nr_devs; i++) {
		const struct bch_sb *d = c->devs[i] ? c->devs[i]->disk_sb : NULL;
		const struct bch_sb_field_crypt *f = d && bch_sb_encrypted(d) ? bch_sb_crypt(d) : NULL;
		if (f && f->nonce_reserved > from)
			from = f->nonce_reserved;
	}
	/* past what the (authenticated) journal says was used: a rolled back sb does not rewind */
	uint64_t j = bch_journal_nonce_max(c);
	if (j >= from)
		from = j + 1;
	/* degraded: members opened apart must not continue from one value (bcachefs_format.h) */
	if (c->devs_missing) {
		uint64_t r;
		randombytes_buf(&r, sizeof(r));
		r = (r & ((1ULL << 62) - 1)) | (1ULL << 62);
		if (r > from)
			from = r;
	}
	return reserve(c, from);
}

int bch_crypt_nonce_take(struct bch_fs *c, uint64_t *v)
{
	struct bch_crypt *cr = c->crypt;
	int r;

	if (!cr)
		return -EINVAL;
	if (c->read_only)
		return -BCH_ERR_fs_read_only;
	if (cr->nonce_next >= cr->nonce_end && (r = reserve(c, cr->nonce_end)))
		return r;
	*v = cr->nonce_next++;
	return 0;
}

/* ---------------------------------------------------------- the cipher */

static void put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);	/* host is little-endian (bcachefs_format.h) */
}

static void put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static void nonce_make(uint8_t n[24], uint32_t domain, uint64_t a, uint32_t b, uint64_t d)
{
	memset(n, 0, 24);
	put32(n, domain);
	put64(n + 4, a);
	put32(n + 12, b);
	put64(n + 16, d);
}

static void mac_to_csum(const uint8_t mac[BCH_MAC_BYTES], struct bch_csum *csum)
{
	memcpy(csum, mac, BCH_MAC_BYTES);
}

static void pieces_mac(const uint8_t key[BCH_KEY_BYTES], const uint8_t n[24], const void *ad, size_t ad_len,
		       const void *buf, size_t bytes, struct bch_csum *mac);
static void pieces_xor(const uint8_t key[BCH_KEY_BYTES], const uint8_t n[24], uint64_t ic, const void *src,
		       void *dst, size_t len);

/* Bsets and journal entries: the AEAD (with additional data) done as the extent pieces are. */
static int seal(struct bch_fs *c, const uint8_t n[24], const void *ad, size_t ad_len,
		void *buf, size_t len, struct bch_csum *csum)
{
	if (!c->crypt)
		return -BCH_ERR_key_missing;
	if (bch_crypt_nonce_hook)
		bch_crypt_nonce_hook(n);
	pieces_xor(c->crypt->key, n, 1, buf, buf, len);		/* the AEAD's bytes, faster */
	pieces_mac(c->crypt->key, n, ad, ad_len, buf, len, csum);
	return 0;
}

/*
 * Verify (dst NULL) or verify and decrypt into dst (may be src).  Two passes,
 * the MAC over all of it, then the cipher: an extent (128 KiB) stays in the
 * core's L2 between them, and the two in 16-64 KiB chunks measured no faster
 * (1 GiB of extents, one core: 342-354 ms of CPU either way, pass for pass
 * at libcrypto's speed), while it would decrypt before verifying.
 */
static int open_(struct bch_fs *c, const uint8_t n[24], const void *ad, size_t ad_len,
		 const void *src, void *dst, size_t len, const struct bch_csum *csum)
{
	struct bch_csum got;

	if (!c->crypt)
		return -BCH_ERR_key_missing;
	pieces_mac(c->crypt->key, n, ad, ad_len, src, len, &got);
	if (crypto_verify_16((const uint8_t *)&got, (const uint8_t *)csum))
		return -BCH_ERR_csum_mismatch;
	if (dst)				/* only once it is verified */
		pieces_xor(c->crypt->key, n, 1, src, dst, len);
	return 0;
}

int bch_crypt_extent_encrypt(struct bch_fs *c, uint64_t version, struct bch_extent_crc *crc,
			     const void *src, void *dst)
{
	uint8_t n[24], mac[BCH_MAC_BYTES];

	if (!c->crypt)
		return -BCH_ERR_key_missing;
	nonce_make(n, NONCE_EXTENT, version, 0, 0);
	if (bch_crypt_nonce_hook)
		bch_crypt_nonce_hook(n);
	crc->csum_type = BCH_CSUM_chacha20_poly1305;
	crypto_aead_xchacha20poly1305_ietf_encrypt_detached(dst, mac, NULL, src,
							    (size_t)crc->compressed_sectors << BCH_SECTOR_SHIFT,
							    NULL, 0, NULL, n, c->crypt->key);
	mac_to_csum(mac, &crc->csum);
	return 0;
}

int bch_crypt_extent_verify(struct bch_fs *c, uint64_t version, const struct bch_extent_crc *crc,
			    const void *buf)
{
	uint8_t n[24];

	nonce_make(n, NONCE_EXTENT, version, 0, 0);
	return open_(c, n, NULL, 0, buf, NULL, (size_t)crc->compressed_sectors << BCH_SECTOR_SHIFT,
		     &crc->csum);
}

int bch_crypt_extent_decrypt(struct bch_fs *c, uint64_t version, const struct bch_extent_crc *crc,
			     const void *src, void *dst)
{
	uint8_t n[24];

	nonce_make(n, NONCE_EXTENT, version, 0, 0);
	return open_(c, n, NULL, 0, src, dst, (size_t)crc->compressed_sectors << BCH_SECTOR_SHIFT,
		     &crc->csum);
}

int bch_crypt_extent_open(struct bch_fs *c, uint64_t version, const void *src, void *dst, size_t bytes,
			  const struct bch_csum *mac)
{
	uint8_t n[24];

	nonce_make(n, NONCE_EXTENT, version, 0, 0);
	return open_(c, n, NULL, 0, src, dst, bytes, mac);
}

/*
 * libcrypto (OpenSSL 3), when it can be loaded, for the pieces of extents:
 * its ChaCha20 and Poly1305 use AVX-512 or AVX2 where the CPU has them,
 * about three times libsodium 1.0.18's speed here (2.7 GB/s against 0.9 for
 * the AEAD on one core).  Same bytes: XChaCha20 is HChaCha20 (libsodium's)
 * then the IETF ChaCha20 of OpenSSL with the subkey, its 16-byte IV being
 * the 32-bit block counter, four zero bytes and nonce bytes 16..23; the MAC
 * is Poly1305 keyed with keystream block 0.  Without it (or when
 * bch_crypt_use_libcrypto is false) libsodium does it all.  Only the few
 * prototypes used are declared here (OpenSSL 3's stable ABI, symbol version
 * OPENSSL_3.0.0): no build dependency on its headers.
 */
#define BCH_SONAME_CRYPTO	"libcrypto.so.3"	/* libssl3 */
typedef struct evp_cipher_st EVP_CIPHER;
typedef struct evp_cipher_ctx_st EVP_CIPHER_CTX;
typedef struct evp_mac_st EVP_MAC;
typedef struct evp_mac_ctx_st EVP_MAC_CTX;
typedef struct ossl_lib_ctx_st OSSL_LIB_CTX;
typedef struct ossl_param_st OSSL_PARAM;
typedef struct engine_st ENGINE;
EVP_CIPHER_CTX *EVP_CIPHER_CTX_new(void);
void EVP_CIPHER_CTX_free(EVP_CIPHER_CTX *ctx);
int EVP_EncryptInit_ex(EVP_CIPHER_CTX *ctx, const EVP_CIPHER *type, ENGINE *impl, const unsigned char *key,
		       const unsigned char *iv);
int EVP_EncryptUpdate(EVP_CIPHER_CTX *ctx, unsigned char *out, int *outl, const unsigned char *in, int inl);
EVP_CIPHER *EVP_CIPHER_fetch(OSSL_LIB_CTX *libctx, const char *algorithm, const char *properties);
EVP_MAC *EVP_MAC_fetch(OSSL_LIB_CTX *libctx, const char *algorithm, const char *properties);
EVP_MAC_CTX *EVP_MAC_CTX_new(EVP_MAC *mac);
void EVP_MAC_CTX_free(EVP_MAC_CTX *ctx);
int EVP_MAC_init(EVP_MAC_CTX *ctx, const unsigned char *key, size_t keylen, const OSSL_PARAM *params);
int EVP_MAC_update(EVP_MAC_CTX *ctx, const unsigned char *data, size_t datalen);
int EVP_MAC_final(EVP_MAC_CTX *ctx, unsigned char *out, size_t *outl, size_t outsize);

#define OSSL_V	"OPENSSL_3.0.0"
#define CRYPTO_FUNCS()						\
	x(cipher_ctx_new,	EVP_CIPHER_CTX_new,	OSSL_V)	\
	x(cipher_ctx_free,	EVP_CIPHER_CTX_free,	OSSL_V)	\
	x(encrypt_init,		EVP_EncryptInit_ex,	OSSL_V)	\
	x(encrypt_update,	EVP_EncryptUpdate,	OSSL_V)	\
	x(cipher_fetch,		EVP_CIPHER_fetch,	OSSL_V)	\
	x(mac_fetch,		EVP_MAC_fetch,		OSSL_V)	\
	x(mac_ctx_new,		EVP_MAC_CTX_new,	OSSL_V)	\
	x(mac_ctx_free,		EVP_MAC_CTX_free,	OSSL_V)	\
	x(mac_init,		EVP_MAC_init,		OSSL_V)	\
	x(mac_update,		EVP_MAC_update,		OSSL_V)	\
	x(mac_final,		EVP_MAC_final,		OSSL_V)

#define x(member, func, ver)	BCH_DL_MEMBER(member, func)
static struct crypto_fns { CRYPTO_FUNCS() } ossl;
#undef x
#define x(member, func, ver)	BCH_DL_SYM(struct crypto_fns, member, func, ver)
static const struct bch_dl_sym crypto_syms[] = { CRYPTO_FUNCS() };
#undef x

static struct bch_dl_lib crypto_lib = BCH_DL_LIB(BCH_SONAME_CRYPTO, -ENOENT, crypto_syms, &ossl);

bool bch_crypt_use_libcrypto = true;
static EVP_MAC *ossl_poly1305;
static EVP_CIPHER *ossl_chacha20;
/*
 * Less than this goes to libsodium: a libcrypto context costs a microsecond
 * or two to set up, as much as libsodium's cipher and MAC of 1-2 KiB.  From
 * one 4 KiB block up libcrypto is ahead even so (cipher and MAC of 4 KiB
 * with a fresh context each: 2.2-4.7 us against libsodium's 5.7-9.4 us;
 * 8 KiB 3.5-8 us against 15-19 us, on a loaded two-core machine); it was
 * 16 KiB, which left format --source's small files (62k of the 70k files
 * of /usr/share and /usr/include) to libsodium.
 */
#define OSSL_MIN_BYTES		(2 << 10)
static pthread_once_t ossl_once = PTHREAD_ONCE_INIT;

static void ossl_init(void)
{
	if (bch_dl_load(&crypto_lib))
		return;
	/* fetched once, kept for the process's life: an init with EVP_chacha20()
	 * would look the implementation up again every time */
	ossl_chacha20 = ossl.cipher_fetch(NULL, "ChaCha20", NULL);
	ossl_poly1305 = ossl.mac_fetch(NULL, "POLY1305", NULL);
}

static bool ossl_ready(void)
{
	if (!bch_crypt_use_libcrypto)
		return false;
	pthread_once(&ossl_once, ossl_init);
	return ossl_chacha20 && ossl_poly1305;
}

/* XChaCha20 of len bytes from block ic with libcrypto; false: not done (libsodium then). */
static bool ossl_xor(const uint8_t key[BCH_KEY_BYTES], const uint8_t n[24], uint64_t ic,
		     const uint8_t *src, uint8_t *dst, size_t len)
{
	uint8_t sub[32], iv[16];
	bool ok = false;

	if (len < OSSL_MIN_BYTES || ic + (len + 63) / 64 > UINT32_MAX || len > INT32_MAX || !ossl_ready())
		return false;
	crypto_core_hchacha20(sub, n, key, NULL);
	put32(iv, (uint32_t)ic);
	memset(iv + 4, 0, 4);
	memcpy(iv + 8, n + 16, 8);
	EVP_CIPHER_CTX *ctx = ossl.cipher_ctx_new();
	int outl = 0;
	ok = ctx && ossl.encrypt_init(ctx, ossl_chacha20, NULL, sub, iv) == 1 &&
	     ossl.encrypt_update(ctx, dst, &outl, src, (int)len) == 1 && (size_t)outl == len;
	if (ctx)
		ossl.cipher_ctx_free(ctx);	/* wipes its key schedule */
	sodium_memzero(sub, sizeof(sub));
	return ok;
}

/* Poly1305 with libcrypto of the pieces p[0..nr) with key; false: not done. */
static bool ossl_mac(const uint8_t key[32], const void *const *p, const size_t *len, unsigned nr,
		     uint8_t out[16])
{
	size_t total = 0;
	for (unsigned i = 0; i < nr; i++)
		total += len[i];
	if (total < OSSL_MIN_BYTES || !ossl_ready())
		return false;
	EVP_MAC_CTX *m = ossl.mac_ctx_new(ossl_poly1305);
	size_t outl = 0;
	bool ok = m && ossl.mac_init(m, key, 32, NULL) == 1;
	for (unsigned i = 0; ok && i < nr; i++)
		ok = !len[i] || ossl.mac_update(m, p[i], len[i]) == 1;
	ok = ok && ossl.mac_final(m, out, &outl, 16) == 1 && outl == 16;
	if (m)
		ossl.mac_ctx_free(m);
	return ok;
}

void bch_crypt_extent_nonce_note(uint64_t version)
{
	uint8_t n[24];

	if (bch_crypt_nonce_hook) {
		nonce_make(n, NONCE_EXTENT, version, 0, 0);
		bch_crypt_nonce_hook(n);
	}
}

int bch_crypt_extent_xor_at(struct bch_fs *c, uint64_t version, size_t off, const void *src, void *dst,
			    size_t len)
{
	uint8_t n[24];

	if (!c->crypt)
		return -BCH_ERR_key_missing;
	if (off % 64)
		return -EINVAL;
	nonce_make(n, NONCE_EXTENT, version, 0, 0);
	/* the AEAD's IETF counter (32 bits, then 0000 and nonce bytes 16..23) is
	 * this 64-bit counter while it stays below 2^32: extents are far smaller */
	pieces_xor(c->crypt->key, n, 1 + off / 64, src, dst, len);
	return 0;
}

int bch_crypt_extent_xor(struct bch_fs *c, uint64_t version, const void *src, void *dst, size_t off,
			 size_t len)
{
	return bch_crypt_extent_xor_at(c, version, off, (const uint8_t *)src + off, (uint8_t *)dst + off, len);
}

/* The AEAD's Poly1305 MAC of ciphertext buf with additional data ad, for nonce n. */
static void pieces_mac(const uint8_t key[BCH_KEY_BYTES], const uint8_t n[24], const void *ad, size_t ad_len,
		       const void *buf, size_t bytes, struct bch_csum *mac)
{
	static const uint8_t pad[16];
	crypto_onetimeauth_poly1305_state st;
	uint8_t block0[64], lens[16], out[BCH_MAC_BYTES];

	memset(block0, 0, sizeof(block0));
	crypto_stream_xchacha20(block0, sizeof(block0), n, key);
	put64(lens, ad_len);
	put64(lens + 8, bytes);
	const void *p[5] = { ad, pad, buf, pad, lens };
	size_t len[5] = { ad_len, (16 - ad_len % 16) % 16, bytes, (16 - bytes % 16) % 16, sizeof(lens) };
	if (!ossl_mac(block0, p, len, 5, out)) {
		crypto_onetimeauth_poly1305_init(&st, block0);
		for (unsigned i = 0; i < 5; i++)
			if (len[i])
				crypto_onetimeauth_poly1305_update(&st, p[i], len[i]);
		crypto_onetimeauth_poly1305_final(&st, out);
		sodium_memzero(&st, sizeof(st));
	}
	mac_to_csum(out, mac);
	sodium_memzero(block0, sizeof(block0));
}

/* The AEAD's XChaCha20 (block counter ic at src) of len bytes. */
static void pieces_xor(const uint8_t key[BCH_KEY_BYTES], const uint8_t n[24], uint64_t ic, const void *src,
		       void *dst, size_t len)
{
	if (!ossl_xor(key, n, ic, src, dst, len))
		crypto_stream_xchacha20_xor_ic(dst, src, len, n, ic, key);
}

int bch_crypt_extent_mac(struct bch_fs *c, uint64_t version, const void *buf, size_t bytes,
			 struct bch_csum *mac)
{
	uint8_t n[24];

	if (!c->crypt)
		return -BCH_ERR_key_missing;
	nonce_make(n, NONCE_EXTENT, version, 0, 0);
	pieces_mac(c->crypt->key, n, NULL, 0, buf, bytes, mac);
	return 0;
}

int bch_crypt_extent_mac_check(struct bch_fs *c, uint64_t version, const void *buf, size_t bytes,
			       const struct bch_csum *mac)
{
	struct bch_csum got;
	int r = bch_crypt_extent_mac(c, version, buf, bytes, &got);

	if (r)
		return r;
	return crypto_verify_16((const uint8_t *)&got, (const uint8_t *)mac) ? -BCH_ERR_csum_mismatch : 0;
}

int bch_crypt_bset_encrypt(struct bch_fs *c, uint64_t node_seq, uint32_t offset, uint64_t journal_seq,
			   const void *ad, size_t ad_len, void *keys, size_t keys_len, struct bch_csum *mac)
{
	uint8_t n[24];

	nonce_make(n, NONCE_BSET, node_seq, offset, journal_seq);
	return seal(c, n, ad, ad_len, keys, keys_len, mac);
}

int bch_crypt_bset_verify(struct bch_fs *c, uint64_t node_seq, uint32_t offset, uint64_t journal_seq,
			  const void *ad, size_t ad_len, const void *keys, size_t keys_len,
			  struct bch_csum mac)
{
	uint8_t n[24];

	nonce_make(n, NONCE_BSET, node_seq, offset, journal_seq);
	return open_(c, n, ad, ad_len, keys, NULL, keys_len, &mac);
}

int bch_crypt_bset_decrypt(struct bch_fs *c, uint64_t node_seq, uint32_t offset, uint64_t journal_seq,
			   const void *ad, size_t ad_len, void *keys, size_t keys_len, struct bch_csum mac)
{
	uint8_t n[24];

	nonce_make(n, NONCE_BSET, node_seq, offset, journal_seq);
	return open_(c, n, ad, ad_len, keys, keys, keys_len, &mac);
}

int bch_crypt_jset_encrypt(struct bch_fs *c, uint64_t counter, uint64_t seq, const void *ad, size_t ad_len,
			   void *data, size_t len, struct bch_csum *mac)
{
	uint8_t n[24];

	nonce_make(n, NONCE_JSET, counter, 0, seq);
	return seal(c, n, ad, ad_len, data, len, mac);
}

int bch_crypt_jset_verify(struct bch_fs *c, uint64_t counter, uint64_t seq, const void *ad, size_t ad_len,
			  const void *data, size_t len, struct bch_csum mac)
{
	uint8_t n[24];

	nonce_make(n, NONCE_JSET, counter, 0, seq);
	return open_(c, n, ad, ad_len, data, NULL, len, &mac);
}

int bch_crypt_jset_decrypt(struct bch_fs *c, uint64_t counter, uint64_t seq, const void *ad, size_t ad_len,
			   void *data, size_t len, struct bch_csum mac)
{
	uint8_t n[24];

	nonce_make(n, NONCE_JSET, counter, 0, seq);
	return open_(c, n, ad, ad_len, data, data, len, &mac);
}

int bch_crypt_rewrap(struct bch_fs *c, const char *pass, size_t len)
{
	struct bch_sb_field_crypt *f = (struct bch_sb_field_crypt *)bch_sb_crypt(c->sb);
	struct bch_sb_field_crypt old;
	int r;

	if (!c->crypt || !f)
		return bch_fs_err(c, -EINVAL, "filesystem is not encrypted");
	if (c->read_only)
		return -BCH_ERR_fs_read_only;
	if (pass && (!len || len > BCH_PASSPHRASE_MAX))
		return bch_fs_err(c, -EINVAL, "passphrase empty or longer than %u bytes",
				  BCH_PASSPHRASE_MAX);
	old = *f;
	if ((r = bch_crypt_wrap(c->sb, f, c->crypt->key, pass, len)) ||
	    (r = bch_write_super(c)))
		*f = old;	/* the superblocks on disk keep the old wrap (or the new, if some were written) */
	sodium_memzero(&old, sizeof(old));
	return r;
}

int bch_crypt_node_range(struct bch_fs *c, bool encrypt, uint64_t node_seq, uint64_t journal_seq,
			 void *range, size_t len)
{
	uint8_t n[24];

	if (!c->crypt)
		return -BCH_ERR_key_missing;
	nonce_make(n, NONCE_NODE_KEYS, node_seq, 0, journal_seq);
	if (encrypt && bch_crypt_nonce_hook)
		bch_crypt_nonce_hook(n);
	crypto_stream_xchacha20_xor(range, range, len, n, c->crypt->key);
	return 0;
}
