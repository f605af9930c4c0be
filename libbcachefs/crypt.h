/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_CRYPT_H
#define _BCACHEFS_CRYPT_H

/*
 * crypt.h - encryption: the filesystem key, how a passphrase unlocks it, the
 * nonce counter, and the authenticated encryption (XChaCha20-Poly1305 from
 * libsodium) of data extents, btree bsets and journal entries.  Where
 * libcrypto.so.3 loads, its ChaCha20 and Poly1305 do the bulk of it (about
 * three times as fast; the same bytes: crypt.c); io.c runs the extents' on
 * several threads.
 *
 * On disk (bcachefs_format.h, "Encryption"): struct bch_sb_field_crypt holds
 * the 32-byte filesystem key wrapped by a key derived from the passphrase
 * with scrypt, and the nonce counter's reservation.  Everything after the
 * superblock is encrypted with the filesystem key; the Poly1305 MAC takes the
 * place of the checksum (csum_type BCH_CSUM_chacha20_poly1305).
 *
 * Invariants
 *   (1) A (key, nonce) pair encrypts one message, ever.  Every nonce holds a
 *       value of the filesystem's nonce counter, which is durable before it
 *       is used (bch_crypt_nonce_take() writes the superblock's reservation
 *       first), so no crash, replay or second session can hand it out again.
 *       Copies made by the move path copy ciphertext and nonce unchanged;
 *       re-encoding (recompression, a trimmed extent) takes a new nonce.
 *   (2) Nothing is decrypted before its MAC is verified; a MAC mismatch is
 *       -BCH_ERR_csum_mismatch, like a checksum's (damage, read elsewhere).
 *   (3) A wrong passphrase or key is found by the wrapped key's MAC before
 *       anything else is read: -BCH_ERR_key_wrong, never damage.
 *   (4) Key material lives in sodium_malloc()ed (mlocked, guarded) memory
 *       and is wiped when freed; copies on the stack are sodium_memzero()ed.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bcachefs_format.h"

struct bch_fs;

#define BCH_KEY_BYTES		32
#define BCH_MAC_BYTES		16
#define BCH_PASSPHRASE_MAX	4096	/* bytes; a longer one is refused */

/* scrypt parameters format and set-passphrase use (about 0.1 s, 32 MiB) */
#define BCH_KDF_SCRYPT_N_LOG2	15
#define BCH_KDF_SCRYPT_R	8
#define BCH_KDF_SCRYPT_P	1

/* ------------------------------------------------------ superblock field */

bool bch_sb_encrypted(const struct bch_sb *sb);
/* The crypt field of sb, or NULL (absent, or too short: callers say so). */
const struct bch_sb_field_crypt *bch_sb_crypt(const struct bch_sb *sb);
/* Validate the crypt field of an encrypted sb (sizes, kdf type, params). */
int bch_sb_crypt_validate(const struct bch_sb *sb, char *err, size_t errlen);
/* Does the field need a passphrase (kdf scrypt), or is the key stored in the clear? */
bool bch_crypt_has_passphrase(const struct bch_sb_field_crypt *f);

/*
 * The key a passphrase derives with f's kdf parameters (the "wrapping key":
 * what `unlock` puts in the keyring).  0, -EINVAL (bad parameters), -ENOMEM.
 */
int bch_crypt_kdf(const struct bch_sb_field_crypt *f, const char *pass, size_t len,
		  uint8_t wrapping_key[BCH_KEY_BYTES]);
/* A passphrase's wrapped key not written yet: a format --source that did not finish. */
bool bch_crypt_key_unwritten(const struct bch_sb_field_crypt *f);
/*
 * The filesystem key from f with a wrapping key (NULL when f has no
 * passphrase).  0, -BCH_ERR_key_wrong (the wrapped key's MAC failed) or
 * -BCH_ERR_key_unwritten (bch_crypt_key_unwritten()).
 */
int bch_crypt_unwrap(const struct bch_sb *sb, const struct bch_sb_field_crypt *f,
		     const uint8_t *wrapping_key, uint8_t key[BCH_KEY_BYTES]);
/*
 * Fill f (whose field header the caller set) for key: a new salt and wrap
 * nonce, scrypt with the default parameters over pass (NULL: no
 * passphrase, the key stored in the clear).  nonce_reserved is kept.
 */
int bch_crypt_wrap(const struct bch_sb *sb, struct bch_sb_field_crypt *f, const uint8_t key[BCH_KEY_BYTES],
		   const char *pass, size_t len);
/*
 * bch_crypt_wrap() with a passphrase in two steps, so that its scrypt
 * (0.1-0.3 s) may run beside other work (format --source: beside the copy):
 * _prepare fills f for key (key check, scrypt parameters, a new salt and
 * wrap nonce) with the wrapped key all zero: until _finish, nothing on disk
 * holds the key, and a passphrase opens nothing (-BCH_ERR_key_wrong).
 * _finish wraps key with the wrapping key bch_crypt_kdf() derived from f's
 * parameters.  bch_crypt_wrap_finish_fs() does that on an open filesystem,
 * with its key, and writes the superblock of every member.
 */
void bch_crypt_wrap_prepare(const struct bch_sb *sb, struct bch_sb_field_crypt *f,
			    const uint8_t key[BCH_KEY_BYTES]);
void bch_crypt_wrap_finish(const struct bch_sb *sb, struct bch_sb_field_crypt *f,
			   const uint8_t key[BCH_KEY_BYTES], const uint8_t wrapping_key[BCH_KEY_BYTES]);
int bch_crypt_wrap_finish_fs(struct bch_fs *c, const uint8_t wrapping_key[BCH_KEY_BYTES]);

/* ------------------------------------------------------- finding the key */

/*
 * Keys known to this process, by internal filesystem UUID (format adds the
 * key it made; a command adds the key it unlocked so a second open of the
 * same filesystem does not ask again).  At most 16; kept in mlocked memory.
 */
int bch_crypt_key_remember(const uint8_t uuid[BCH_UUID_SIZE], const uint8_t key[BCH_KEY_BYTES]);
void bch_crypt_keys_forget(void);

/*
 * How an open gets a key it does not know: the command layer's provider
 * (keyring, then the terminal or stdin).  It returns 0 with the unwrapped
 * filesystem key, -BCH_ERR_key_wrong, -BCH_ERR_key_missing, or another
 * error, with a message in err.
 */
typedef int (*bch_key_provider_fn)(const struct bch_sb *sb, uint8_t key[BCH_KEY_BYTES],
				   char *err, size_t errlen);
void bch_crypt_set_key_provider(bch_key_provider_fn fn);

/* ----------------------------------------------------- an open filesystem */

/*
 * At open: for an encrypted superblock, find the key (remembered, then the
 * provider) and set c->crypt.  Read-write opens then take a fresh
 * reservation of the nonce counter (bch_crypt_start_rw(), after the
 * superblock of every member is known).  No-op on an unencrypted filesystem.
 */
int bch_crypt_open(struct bch_fs *c, char *err, size_t errlen);
int bch_crypt_start_rw(struct bch_fs *c);
void bch_crypt_close(struct bch_fs *c);
static inline bool bch_fs_encrypted(const struct bch_fs *c);

/*
 * set-passphrase / remove-passphrase on an open read-write filesystem: wrap
 * its key anew (pass NULL: stored in the clear) and write the superblock of
 * every member.  A crash leaves each member with the old or the new wrap,
 * and the newest superblock wins: the old or the new passphrase works.
 */
int bch_crypt_rewrap(struct bch_fs *c, const char *pass, size_t len);

/*
 * The clean record's MAC (see bcachefs_format.h): BLAKE2b-128 keyed with the
 * filesystem key over record (len bytes).
 */
int bch_crypt_clean_mac(struct bch_fs *c, const void *record, size_t len, uint8_t mac[16]);

/* The next value of the nonce counter (never 0), durable before it returns. */
int bch_crypt_nonce_take(struct bch_fs *c, uint64_t *v);

/*
 * Test builds: every nonce used to encrypt is passed to this hook (tests
 * record them and look for repeats).  NULL in the tool.
 */
extern void (*bch_crypt_nonce_hook)(const uint8_t nonce[24]);
/* Counter values per reservation written (1 << 20; tests lower it). */
extern uint64_t bch_crypt_nonce_reserve_step;

/* ------------------------------------------------------------- extents */

/*
 * Encrypt the encoded extent src (crc->compressed_sectors * 512 bytes,
 * padding included) into dst (may be src) with nonce version (the extent
 * key's version: bch_crypt_nonce_take()), and set crc's checksum to the MAC.
 */
int bch_crypt_extent_encrypt(struct bch_fs *c, uint64_t version, struct bch_extent_crc *crc,
			     const void *src, void *dst);
/* Verify the MAC only (the bytes stay ciphertext): 0 or -BCH_ERR_csum_mismatch. */
int bch_crypt_extent_verify(struct bch_fs *c, uint64_t version, const struct bch_extent_crc *crc,
			    const void *buf);
/* Verify, then decrypt src into dst (may be src). */
int bch_crypt_extent_decrypt(struct bch_fs *c, uint64_t version, const struct bch_extent_crc *crc,
			     const void *src, void *dst);

/*
 * bch_crypt_extent_decrypt() of an extent of bytes with MAC mac (a job of
 * io.c's batches): verify, then decrypt src into dst (may be src), with the
 * pieces' libraries (below).  0, -BCH_ERR_csum_mismatch (dst untouched) or
 * -BCH_ERR_key_missing.  Threads may call it at once (it only reads the key).
 */
int bch_crypt_extent_open(struct bch_fs *c, uint64_t version, const void *src, void *dst, size_t bytes,
			  const struct bch_csum *mac);

/*
 * The same cipher in pieces, for io.c's worker pool (several threads may
 * call these at once on one filesystem: they only read the key).  The bytes
 * are those of the calls above: XChaCha20 with block counter 1 at the
 * extent's first byte, and the Poly1305 MAC (key: keystream block 0) over
 * the ciphertext and the AEAD's length block (no additional data).
 *   nonce_note  tells the test hook an extent nonce is used (call it once
 *               per encryption, on the calling thread, before the pieces);
 *   xor         XORs the keystream of bytes [off, off + len) of the extent
 *               (off a multiple of 64) over src into dst (may be src);
 *   xor_at      the same with src and dst pointing at byte off itself (a
 *               read-ahead's verified ciphertext into a reader's buffer);
 *   mac         the MAC of an extent's ciphertext buf of bytes;
 *   mac_check   0 when mac is buf's, or -BCH_ERR_csum_mismatch.
 * An encryption is every piece's xor, then the mac; a decryption mac_check,
 * then the xors, only after it passed (invariant (2)).
 */
void bch_crypt_extent_nonce_note(uint64_t version);
/*
 * The pieces use libcrypto's ChaCha20 and Poly1305 when libcrypto.so.3 can
 * be loaded (crypt.c: same bytes, faster), libsodium otherwise; tests set
 * this false to compare the two.
 */
extern bool bch_crypt_use_libcrypto;
int bch_crypt_extent_xor(struct bch_fs *c, uint64_t version, const void *src, void *dst, size_t off,
			 size_t len);
int bch_crypt_extent_xor_at(struct bch_fs *c, uint64_t version, size_t off, const void *src, void *dst,
			    size_t len);
int bch_crypt_extent_mac(struct bch_fs *c, uint64_t version, const void *buf, size_t bytes,
			 struct bch_csum *mac);
int bch_crypt_extent_mac_check(struct bch_fs *c, uint64_t version, const void *buf, size_t bytes,
			       const struct bch_csum *mac);

/* --------------------------------------------------------- btree bsets */

/*
 * A bset: ad (the clear header bytes it is bound to) and keys (encrypted in
 * place); nonce from the node's seq, the bset's byte offset in the node and
 * its journal_seq.
 */
int bch_crypt_bset_encrypt(struct bch_fs *c, uint64_t node_seq, uint32_t offset, uint64_t journal_seq,
			   const void *ad, size_t ad_len, void *keys, size_t keys_len, struct bch_csum *mac);
int bch_crypt_bset_verify(struct bch_fs *c, uint64_t node_seq, uint32_t offset, uint64_t journal_seq,
			  const void *ad, size_t ad_len, const void *keys, size_t keys_len,
			  struct bch_csum mac);
int bch_crypt_bset_decrypt(struct bch_fs *c, uint64_t node_seq, uint32_t offset, uint64_t journal_seq,
			   const void *ad, size_t ad_len, void *keys, size_t keys_len, struct bch_csum mac);

/*
 * A node's min_key and max_key (len bytes at range), encrypted or decrypted
 * in place with XChaCha20 (nonce domain 4: the node seq and the first
 * bset's journal_seq).  Not authenticated by itself: the first bset's MAC
 * covers these bytes as additional data, so it is checked before decrypting.
 */
int bch_crypt_node_range(struct bch_fs *c, bool encrypt, uint64_t node_seq, uint64_t journal_seq,
			 void *range, size_t len);

/* ------------------------------------------------------ journal entries */

/* The same for a journal entry: nonce from its nonce entry's counter value and its seq. */
int bch_crypt_jset_encrypt(struct bch_fs *c, uint64_t counter, uint64_t seq, const void *ad, size_t ad_len,
			   void *data, size_t len, struct bch_csum *mac);
int bch_crypt_jset_verify(struct bch_fs *c, uint64_t counter, uint64_t seq, const void *ad, size_t ad_len,
			  const void *data, size_t len, struct bch_csum mac);
int bch_crypt_jset_decrypt(struct bch_fs *c, uint64_t counter, uint64_t seq, const void *ad, size_t ad_len,
			   void *data, size_t len, struct bch_csum mac);

/* ------------------------------------------------------------------ */

struct bch_crypt;	/* crypt.c */
struct bch_crypt *bch_fs_crypt(const struct bch_fs *c);

static inline bool bch_fs_encrypted(const struct bch_fs *c)
{
	return bch_fs_crypt(c) != NULL;
}

#endif /* _BCACHEFS_CRYPT_H */
