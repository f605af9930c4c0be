/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCACHEFS_FORMAT_H
#define _BCACHEFS_FORMAT_H

/*
 * bcachefs_format.h - every on-disk structure of this project's format.
 *
 * This format is this project's own.  It is NOT the Linux kernel's bcachefs
 * format: it has its own magic number and its own version numbers, and no
 * kernel will mount it.  man/bcachefs-format.5 describes it for users; this
 * header is the authority.
 *
 * Conventions
 *   (1) All integers are little-endian and fixed width.  Structs here are the
 *       byte layout; every size and key offset is pinned by _Static_assert.
 *   (2) Addresses and sizes on a device are in 512-byte sectors.
 *   (3) Variable-length things are measured in u64 words ("u64s") and are
 *       8-byte aligned.
 *   (4) Every structure that is read from disk carries a checksum and enough
 *       identity (magic, filesystem UUID, kind, position, sequence) to detect
 *       a torn, stale or misdirected write.  Readers validate before use.
 *
 * Device layout (sector numbers)
 *
 *   0 .. 6     unused (room for a boot loader / partition table)
 *   7          struct bch_sb_layout (standalone copy, own checksum)
 *   8 ..       superblock copy 0 (primary), at most 1 << sb_max_size_bits sectors
 *   8 + max .. superblock copy 1 (first backup)
 *   end - max  superblock copy 2 (last backup, aligned down to 4 KiB)
 *   first_bucket * bucket_size ..   buckets: journal, btree nodes, data
 *
 * Buckets below member.first_bucket hold the superblock area and are never
 * allocated.  The end-of-device backup lives past the last bucket
 * (nbuckets is chosen so that it does).
 */

#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>	/* __u8, __le16, __le32, __le64 */

/*
 * Hosts are little-endian (checked here), so __le* fields are used directly.
 * A big-endian port would add byte swapping in the accessors, not here.
 */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "little-endian hosts only");

/*
 * Magic numbers.  Each kind of structure has its own, derived from the
 * superblock magic, so a block of one kind is never mistaken for another.
 * ASCII "bchTOOLS" little-endian.
 */
#define BCH_SB_MAGIC		0x534c4f4f54686362ULL
#define BCH_LAYOUT_MAGIC	(BCH_SB_MAGIC ^ 0x01)
#define BCH_BTREE_NODE_MAGIC	(BCH_SB_MAGIC ^ 0x02)
#define BCH_JSET_MAGIC		(BCH_SB_MAGIC ^ 0x03)

/*
 * Format versions.  version is what wrote the superblock; version_min is the
 * oldest version of the format any structure on the filesystem may still be in.
 * A reader refuses a filesystem whose version_min is newer than it knows.
 */
#define BCH_VERSION_1		1
#define BCH_VERSION_2		2
#define BCH_VERSION_3		3
#define BCH_VERSION_CURRENT	BCH_VERSION_3
#define BCH_VERSION_MIN		BCH_VERSION_1

/*
 * Version 2 (this project, 2026-12) adds, on filesystems formatted at it
 * (version and version_min 2; a version-1 filesystem keeps writing as
 * version 1, so the older binary still opens it):
 *   - metadata copies on one device: a btree_ptr may hold two pointers to the
 *     same device (different buckets, taken from two allocation streams that
 *     start half a device apart), when the filesystem has fewer members that
 *     may hold btree nodes than metadata_replicas asks for;
 *   - journal lanes: a device's journal buckets are split in two halves
 *     (the runs' buckets in order: the first half is lane 0) when the
 *     filesystem has fewer journal devices than it wants targets; each lane
 *     is a ring of its own, and an entry's copies go to different lanes;
 *   - journal stubs (BCH_JSET_STUB): with one copy of each entry, a
 *     header-only record of the entry goes to another lane, so a journal
 *     tail lost after it was acknowledged is found, not taken for one that
 *     was never written;
 *   - device error counters (BCH_SB_FIELD_dev_errors, below): read, write
 *     and checksum errors of each member, kept across sessions.  Written
 *     only on version-2 filesystems; a reader that does not know the field
 *     skips it and keeps it (bch_sb_validate() walks every field by its
 *     size, bch_sb_field_get() finds fields by type), so it never makes a
 *     superblock invalid.
 * Version 3 (2026-12) adds subvolumes and snapshots (see "Snapshots and
 * subvolumes" below): the snapshots btree (id 7, its root made with the
 * first subvolume or snapshot),
 * the key types whiteout, snapshot and subvolume, keys of the file btrees
 * in snapshots other than 0, and dirents naming a subvolume
 * (BCH_DT_SUBVOL).  Format writes version and version_min 3; the feature
 * bit BCH_FEATURE_SNAPSHOTS is set when the first subvolume or snapshot is
 * made.  Filesystems of versions 1 and 2 open and keep writing their own
 * version; they cannot hold subvolumes (the commands refuse, naming the
 * version).
 * Bsets and jsets carry the version of the filesystem that wrote them
 * (between version_min and version).
 */

#define BCH_SECTOR_SHIFT	9
#define BCH_SECTOR_SIZE		(1U << BCH_SECTOR_SHIFT)

#define BCH_SB_LAYOUT_SECTOR	7
#define BCH_SB_SECTOR		8
#define BCH_SB_MAX_SIZE_BITS	7	/* default: 128 sectors = 64 KiB */
#define BCH_SB_LAYOUT_MAX	4	/* at most this many copies */

#define BCH_UUID_SIZE		16
#define BCH_SB_LABEL_SIZE	32
#define BCH_MEMBER_LABEL_SIZE	32
#define BCH_SB_MEMBERS_MAX	64	/* device indices are u8, 0..63 */

/* ---------------------------------------------------------------- checksums */

/*
 * A checksum value: 128 bits of room.  crc32c uses lo's low 32 bits, crc64
 * and xxhash64 use lo; hi is zero for all of them.  chacha20_poly1305 (an
 * encrypted filesystem: see "Encryption" below) stores the 16-byte Poly1305
 * MAC, lo holding its first 8 bytes.
 */
struct bch_csum {
	__le64			lo;
	__le64			hi;
};
_Static_assert(sizeof(struct bch_csum) == 16, "bch_csum size");

/* x(name, on-disk id, bytes of checksum stored) */
#define BCH_CSUM_TYPES()		\
	x(none,		0, 0)		\
	x(crc32c,	1, 4)		\
	x(crc64,	2, 8)		\
	x(xxhash64,	3, 8)		\
	x(chacha20_poly1305, 4, 16)

enum bch_csum_type {
#define x(n, id, bytes)	BCH_CSUM_##n = id,
	BCH_CSUM_TYPES()
#undef x
	BCH_CSUM_NR
};

/* x(name, on-disk id); incompressible: stored as none (see bch_extent_crc) */
#define BCH_COMPRESSION_TYPES()		\
	x(none,		0)		\
	x(lz4,		1)		\
	x(gzip,		2)		\
	x(zstd,		3)		\
	x(incompressible, 4)

enum bch_compression_type {
#define x(n, id)	BCH_COMPRESSION_##n = id,
	BCH_COMPRESSION_TYPES()
#undef x
	BCH_COMPRESSION_NR
};

/* ---------------------------------------------------------- data types */

/* What a bucket or a replicas entry holds.  x(name, on-disk id) */
#define BCH_DATA_TYPES()		\
	x(free,		0)		\
	x(sb,		1)		\
	x(journal,	2)		\
	x(btree,	3)		\
	x(user,		4)		\
	x(cached,	5)

enum bch_data_type {
#define x(n, id)	BCH_DATA_##n = id,
	BCH_DATA_TYPES()
#undef x
	BCH_DATA_NR
};

/* ------------------------------------------------------------ superblock */

/*
 * struct bch_sb_layout - where the superblock copies live on one device.
 *
 * Stored standalone at sector 7 and embedded in every superblock copy.  The
 * standalone copy has its own crc32c (over the bytes after csum) so that a
 * reader can find the backups even when copy 0 is destroyed.
 *
 * OFFSET SIZE DESCRIPTION
 *   0     16  csum         crc32c of bytes 16..end (standalone copy only;
 *                          zero inside a superblock, which has its own)
 *  16      8  magic        BCH_LAYOUT_MAGIC
 *  24      1  layout_type  0
 *  25      1  sb_max_size_bits  log2 of the room for one copy, in sectors
 *  26      1  nr_superblocks    number of valid entries in sb_offset[]
 *  27      5  pad
 *  32     32  sb_offset[4] sector of each copy; [0] is always 8
 */
struct bch_sb_layout {
	struct bch_csum		csum;
	__le64			magic;
	__u8			layout_type;
	__u8			sb_max_size_bits;
	__u8			nr_superblocks;
	__u8			pad[5];
	__le64			sb_offset[BCH_SB_LAYOUT_MAX];
};
_Static_assert(sizeof(struct bch_sb_layout) == 64, "bch_sb_layout size");

/*
 * Variable-length superblock fields follow the fixed part.  Each starts with
 * this header; u64s counts the whole field including the header.  Unknown
 * field types are preserved and skipped.
 */
struct bch_sb_field {
	__le32			u64s;
	__le32			type;
};
_Static_assert(sizeof(struct bch_sb_field) == 8, "bch_sb_field size");

/* x(name, on-disk type id) */
#define BCH_SB_FIELDS()			\
	x(members,	1)		\
	x(labels,	2)		\
	x(journal,	3)		\
	x(replicas,	4)		\
	x(clean,	5)		\
	x(crypt,	6)		\
	x(dev_errors,	7)

enum bch_sb_field_type {
#define x(n, id)	BCH_SB_FIELD_##n = id,
	BCH_SB_FIELDS()
#undef x
	BCH_SB_FIELD_NR
};

/* Member device states. */
#define BCH_MEMBER_STATES()		\
	x(rw,		0)		\
	x(ro,		1)		\
	x(failed,	2)		\
	x(spare,	3)

enum bch_member_state {
#define x(n, id)	BCH_MEMBER_STATE_##n = id,
	BCH_MEMBER_STATES()
#undef x
	BCH_MEMBER_STATE_NR
};

/*
 * struct bch_member - one device of the filesystem (64 bytes).
 * A slot whose uuid is all zero is unused (a removed device).
 */
struct bch_member {
	__u8			uuid[BCH_UUID_SIZE];	/* this device's UUID */
	__le64			nbuckets;	/* usable buckets, from bucket 0 */
	__le32			bucket_size;	/* sectors per bucket */
	__le16			first_bucket;	/* buckets below this hold the sb area */
	__u8			state;		/* enum bch_member_state */
	__u8			durability;	/* copies one replica here counts as (0..4) */
	__le32			data_allowed;	/* bitmask of 1 << enum bch_data_type */
	__le32			label;		/* index+1 into the labels field; 0 = none */
	__u8			discard;	/* issue discards when buckets are freed */
	__u8			pad[3];
	__le32			flags;		/* reserved, zero */
	__le64			last_mount;	/* seconds since epoch; 0 = never */
	__le64			reserved;
};
_Static_assert(sizeof(struct bch_member) == 64, "bch_member size");

struct bch_sb_field_members {
	struct bch_sb_field	field;
	struct bch_member	members[];	/* indexed by device index */
};

/*
 * Labels (disk groups).  Devices carry a label; targets name a label or a
 * device.  A label may contain dots ("ssd.fast"); matching a target "ssd"
 * selects every device whose label is "ssd" or starts with "ssd.".
 */
struct bch_label {
	char			name[BCH_MEMBER_LABEL_SIZE];	/* NUL-padded */
	__le64			flags;		/* bit 0: deleted */
};
_Static_assert(sizeof(struct bch_label) == 40, "bch_label size");

struct bch_sb_field_labels {
	struct bch_sb_field	field;
	struct bch_label	entries[];
};

/*
 * Journal buckets of every device: a list of runs (dev, first bucket, count).
 * The journal ring of a device is its runs in order.
 */
struct bch_journal_run {
	__le32			dev;
	__le32			nr;		/* buckets in this run */
	__le64			start;		/* first bucket index */
};
_Static_assert(sizeof(struct bch_journal_run) == 16, "bch_journal_run size");

struct bch_sb_field_journal {
	struct bch_sb_field	field;
	struct bch_journal_run	runs[];
};

/*
 * Replicas: which sets of devices hold which data type.  Entries are
 * variable length: 4 header bytes then nr_devs device indices, padded so the
 * whole field is u64 aligned (the last entry is followed by zero padding; an
 * entry with nr_devs == 0 ends the list).
 *
 * The table is kept true (libbcachefs/replicas.h):
 *   - what an entry promises: some data of data_type may have its only
 *     copies on exactly devs[] (no amount is implied).  btree: the copies of
 *     a node, as its parent's pointer or the root names them; user: the
 *     dirty pointers of an extent (cached pointers need none); journal: one
 *     entry per member with journal buckets.
 *   - when it is written: a set is added, and the superblock written,
 *     before any key or node pointer using it can reach the disk (commit
 *     path, node allocation), so the table is always a superset of what
 *     the keys use (after a crash, perhaps by a set or two).
 *   - gc (bch_replicas_gc(), fsck pass 12) recomputes it from every key and
 *     drops what nothing uses, at the end of every data job and at the
 *     close of every session that changed a key or node: exact then; only a
 *     crash leaves an entry no key uses.  Sorted by data_type then member set,
 *     devs[] ascending, entries distinct.
 * An open with members missing reads it: a btree or user entry with no
 * present member of durability > 0 is data that would be lost.
 */
struct bch_replicas_entry {
	__u8			data_type;	/* enum bch_data_type */
	__u8			nr_devs;
	__u8			nr_required;	/* copies needed to read (1) */
	__u8			pad;
	__u8			devs[];
};

struct bch_sb_field_replicas {
	struct bch_sb_field	field;
	struct bch_replicas_entry entries[];
};

/*
 * Clean shutdown record.  Present and valid only when the filesystem was
 * closed cleanly: then journal_seq is the last journal sequence written and
 * the btree roots below are current, and open skips journal replay.  Open
 * read-write removes it (marks the filesystem dirty) before changing
 * anything.  The roots are jset entries of type btree_root (see below).
 */
struct bch_sb_field_clean {
	struct bch_sb_field	field;
	__le64			journal_seq;
	__le32			flags;		/* BCH_CLEAN_* */
	__le32			pad;
	__le64			entries[];	/* struct jset_entry, u64 aligned */
};

/*
 * BCH_CLEAN_ALLOC_CURRENT: the alloc btree was brought up to date with every
 * bucket before this record was written, so open loads bucket state from it
 * instead of recomputing it from every pointer.  Without the flag (older
 * closes, or a close that could not settle it) the alloc btree is advisory:
 * bucket state is recomputed and only its generations are kept.
 */
#define BCH_CLEAN_ALLOC_CURRENT	(1U << 0)

/*
 * A clean record may carry, after the roots, one jset entry of type usage
 * (btree_id 0, level 0, u64s 1): the disk sectors promised to reservation
 * keys (fallocate), size x nr_replicas summed.  Open takes it with the
 * stored bucket state; without it (an older close) they are counted from
 * the extents btree.  Readers skip entry types they do not know.
 */
#define BCH_CLEAN_USAGE_U64S	2	/* header + the count */

/*
 * Encryption (BCH_FEATURE_ENCRYPTION, BCH_SB_FLAG_ENCRYPTED): everything
 * after the superblock is encrypted and authenticated with XChaCha20-Poly1305
 * (libsodium's crypto_aead_xchacha20poly1305_ietf, 24-byte nonces) under one
 * 32-byte filesystem key.  The MAC replaces the checksum: csum_type
 * chacha20_poly1305 in extent crcs, btree node headers and journal entries.
 *
 * What is encrypted, and what the MAC also covers in the clear (the AEAD's
 * additional data):
 *   extent data  the whole encoded extent (after compression, padding
 *                included); additional data: none.
 *   btree bset   its keys; additional data: the clear header before them
 *                (first bset: bytes 16..136 of struct bch_btree_node, magic
 *                to the end of the bset header; a later bset: its 32-byte
 *                bset header).  The node's min_key and max_key are
 *                encrypted too, with XChaCha20 alone (nonce below), before
 *                the first bset's MAC is computed over them.
 *   journal      its sub-entries after the first, which is a clear
 *                BCH_JSET_ENTRY_nonce entry; additional data: bytes 16..88
 *                (magic .. hdr_csum, then the nonce entry).
 *
 * Nonces (24 bytes, little-endian fields, zero-filled):
 *   extent       u32 1 | u64 the extent key's version
 *   bset         u32 2 | u64 node seq | u32 byte offset of the bset in the
 *                node | u64 the bset's journal_seq
 *   journal      u32 3 | u64 the nonce entry's counter value | u32 0 |
 *                u64 seq
 *   node range   u32 4 | u64 node seq | u32 0 | u64 first bset's journal_seq
 *   key wrap     24 random bytes (crypt field below)
 *
 * Why a (key, nonce) pair is used once.  The filesystem keeps one 64-bit
 * nonce counter.  Values below the crypt field's nonce_reserved may have been
 * used; a read-write open continues from nonce_reserved and first writes a
 * new reservation to the superblock of every member, and a session that
 * uses up its reservation writes the next one before it takes a value.  No
 * value is handed out twice, whatever crashes between (a crash loses at most
 * unused values).  An extent key's version is a fresh counter value each time
 * data is encoded; a btree node's seq is one for every new node (its bsets
 * then differ by offset, and a node read from disk is rewritten under a
 * new seq before it is appended to, so an append torn by a crash, in any
 * earlier session, is never redone at its offset); a journal entry takes one for its nonce entry.  The
 * move path (rebalance to another device, copygc, evacuate, promote) copies
 * ciphertext with its crc and version unchanged: same key, nonce and
 * plaintext give the same bytes, nothing new is encrypted.  A move that
 * re-encodes (recompression, dropping a trimmed extent's dead sectors) takes
 * a new version.  Journal replay re-applies keys without encrypting anything;
 * the nodes they land in are written as any other.
 *
 * struct bch_sb_field_crypt (136 bytes):
 *   OFFSET SIZE DESCRIPTION
 *     0     8  field header
 *     8     8  flags           bits 0..3 kdf type: 0 none (the key stored in
 *                              the clear: remove-passphrase), 1 scrypt
 *    16     3  kdf_n_log2, kdf_r, kdf_p   scrypt N = 1 << n_log2, r, p
 *    19     5  pad
 *    24    16  salt            scrypt salt (random per wrap)
 *    40    24  wrap_nonce      nonce of the wrap (random per wrap)
 *    64    48  wrapped_key     the key, encrypted with the passphrase's key,
 *                              then its MAC (additional data: the sb's
 *                              internal uuid).  kdf none: the key in the
 *                              clear, then zeros.
 *   112     8  nonce_reserved  see above
 *   120    16  key_check       BLAKE2b-128 keyed with the filesystem key of
 *                              "bcachefs key check" and the internal uuid
 * A wrong passphrase fails the wrapped key's MAC, and any key (one stored in
 * the clear, one a process remembered) must give key_check: a wrong key is
 * recognised before anything is decrypted.
 *
 * The clean record of an encrypted filesystem ends with a clean_mac entry
 * (type 5, two u64s): BLAKE2b-128 keyed with the filesystem key of "bcachefs
 * clean record", the internal uuid, and the record from journal_seq to the
 * end of the entries before it.  A record without a valid one is not used
 * (the journal is read instead), so an older record put back cannot roll
 * the filesystem back.
 *
 * A read-write open also continues past the newest counter value a valid
 * journal entry carries (a superblock rolled back does not rewind the
 * counter), and a degraded one jumps to a random point in [2^62, 2^63):
 * members opened apart, each without the other, then take unrelated ranges
 * (an overlap needs two random starts within the values one session uses
 * of each other: about 2^-30 for a session of 2^32 values).
 */
struct bch_sb_field_crypt {
	struct bch_sb_field	field;
	__le64			flags;		/* bits 0..3: kdf type */
	__u8			kdf_n_log2;
	__u8			kdf_r;
	__u8			kdf_p;
	__u8			pad[5];
	__u8			salt[16];
	__u8			wrap_nonce[24];
	__u8			wrapped_key[32 + 16];	/* key + MAC */
	__le64			nonce_reserved;
	__u8			key_check[16];
};
_Static_assert(sizeof(struct bch_sb_field_crypt) == 136, "bch_sb_field_crypt size");
#define BCH_KDF_NONE		0
#define BCH_KDF_SCRYPT		1
#define BCH_CRYPT_KDF_MASK	0xfULL

/*
 * Device error counters (version 2): the superblock field dev_errors holds
 * one struct bch_dev_errors per member slot, indexed by member index (a
 * field shorter than nr_devices: the missing slots read as zero; it only
 * grows, so slots past nr_devices may be there, zeroed).  The
 * counts are those of the member's whole life, or since its last `device
 * stats --reset` (reset_time).  They are bumped in memory where the engine
 * meets the error (blockdev.c: a read or write the device failed; io.c and
 * btree_io.c: data or a btree node read from this member whose checksum or
 * MAC did not match) and reach the disk with the superblock writes that
 * happen anyway: a read-write open, a close (unmount), and every change of
 * the superblock (device commands, replicas, options).  A crash loses the
 * counts since the last of those; a read-only session counts but never
 * writes them.
 *
 * struct bch_dev_errors (32 bytes):
 *   OFFSET SIZE DESCRIPTION
 *     0     8  read        read requests the device failed (I/O error)
 *     8     8  write       write requests the device failed
 *    16     8  checksum    extents or btree nodes read from it that failed
 *                          their checksum (damage the device returned as data)
 *    24     8  reset_time  seconds since the epoch of the last reset; 0: never
 */
#define BCH_DEV_ERROR_TYPES()		\
	x(read,		0)		\
	x(write,	1)		\
	x(checksum,	2)

enum bch_dev_error_type {
#define x(n, id)	BCH_DEV_ERROR_##n = id,
	BCH_DEV_ERROR_TYPES()
#undef x
	BCH_DEV_ERROR_NR
};

struct bch_dev_errors {
	__le64			count[BCH_DEV_ERROR_NR];	/* by enum bch_dev_error_type */
	__le64			reset_time;	/* seconds since epoch; 0 = never reset */
};
_Static_assert(sizeof(struct bch_dev_errors) == 32, "bch_dev_errors size");

struct bch_sb_field_dev_errors {
	struct bch_sb_field	field;
	struct bch_dev_errors	d[];		/* indexed by member index */
};
_Static_assert(sizeof(struct bch_sb_field_dev_errors) == 8, "bch_sb_field_dev_errors size");

/*
 * Superblock options.  Each option stored in the superblock has a fixed slot
 * in opts[] (its sb_slot in libbcachefs/opts.h); the value's meaning is the
 * option's (a number, an enum index, a boolean, or a target).  Slots never
 * move; a new option takes a new slot.  Unset slots read as zero, and every
 * option's zero means "the default of the version that wrote it" is NOT
 * assumed: format writes every slot explicitly.
 */
#define BCH_SB_OPTS_MAX		32

/*
 * Targets (foreground_target, ...) are stored as u32:
 *   0                  none
 *   1 .. 256           device index + 1
 *   257 ..             label index + 257
 */
#define BCH_TARGET_DEV_START	1
#define BCH_TARGET_LABEL_START	257

/* Superblock flags (bch_sb.flags). */
#define BCH_SB_FLAG_CLEAN	(1ULL << 0)	/* clean field is current */
#define BCH_SB_FLAG_ENCRYPTED	(1ULL << 1)	/* crypt field present */

/*
 * Compat bits: readers that do not know one ignore it.
 * REPLICAS_KEPT: the replicas field is kept true (see struct
 * bch_replicas_entry): set by format and by a table rebuilt from every key
 * (gc, fsck); a table without it (older versions wrote only the journal
 * entries) is not used to judge what a missing member would cost.
 */
#define BCH_COMPAT_REPLICAS_KEPT	(1ULL << 0)

/*
 * struct bch_sb - the superblock (fixed part, 512 bytes), followed by
 * variable fields up to u64s words.  The checksum covers from `magic` to
 * the end of the fields, and the type is csum_type.
 *
 * Every copy on every member device describes the whole filesystem; copies
 * differ only in offset and dev_idx.  seq is bumped on every write; the
 * newest copy that validates wins.
 */
struct bch_sb {
	struct bch_csum		csum;		/*   0 */
	__le64			magic;		/*  16 BCH_SB_MAGIC */
	__le16			version;	/*  24 BCH_VERSION_* that wrote it */
	__le16			version_min;	/*  26 */
	__u8			csum_type;	/*  28 enum bch_csum_type of this sb */
	__u8			dev_idx;	/*  29 which member this device is */
	__u8			nr_devices;	/*  30 members slots in use (highest+1) */
	__u8			pad0;		/*  31 */
	__u8			uuid[BCH_UUID_SIZE];	/*  32 internal UUID */
	__u8			user_uuid[BCH_UUID_SIZE];	/*  48 user-visible (-U) */
	__u8			label[BCH_SB_LABEL_SIZE];	/*  64 filesystem label */
	__le64			offset;		/*  96 sector this copy lives at */
	__le64			seq;		/* 104 bumped on every write */
	__le16			block_size;	/* 112 sectors */
	__le16			pad1;		/* 114 */
	__le32			btree_node_size;	/* 116 sectors */
	__le64			flags;		/* 120 BCH_SB_FLAG_* */
	__le64			features;	/* 128 feature bits (BCH_FEATURE_*) */
	__le64			compat;		/* 136 compat bits */
	__le64			time_base;	/* 144 ns since epoch at format */
	__le64			write_time;	/* 152 seconds since epoch, last write */
	__le32			u64s;		/* 160 u64s of fields after the fixed part */
	__le32			pad2;		/* 164 */
	struct bch_sb_layout	layout;		/* 168 */
	__le64			opts[BCH_SB_OPTS_MAX];	/* 232 */
	__u8			str_hash_key[16];	/* 488 SipHash key of names (dirents, xattrs) */
	__le64			journal_seq_open; /* 504 the first journal entry of the session
						 * that last opened it read-write: durable before
						 * the clean record was dropped, so recovery that
						 * finds no entry that new knows entries were lost */
	__le64			_data[];	/* 512 fields */
};
_Static_assert(sizeof(struct bch_sb) == 512, "bch_sb size");
_Static_assert(__builtin_offsetof(struct bch_sb, magic) == 16, "sb magic");
_Static_assert(__builtin_offsetof(struct bch_sb, offset) == 96, "sb offset");
_Static_assert(__builtin_offsetof(struct bch_sb, layout) == 168, "sb layout");
_Static_assert(__builtin_offsetof(struct bch_sb, opts) == 232, "sb opts");

/* Feature bits: a reader refuses a filesystem with a feature it lacks. */
#define BCH_FEATURE_ENCRYPTION	(1ULL << 0)
#define BCH_FEATURE_SNAPSHOTS	(1ULL << 1)	/* a subvolume or snapshot was made */
#define BCH_FEATURE_INODE_FLAGS	(1ULL << 2)	/* an inode had a file flag or project ID
						 * (BCH_INODE_IMMUTABLE.., bch_inode.project) */
#define BCH_FEATURE_REFLINK	(1ULL << 3)	/* the reflink btree exists: extents were
						 * shared (reflink_v, reflink_p below) */
#define BCH_FEATURE_INODE_EC	(1ULL << 5)	/* an inode had its own erasure_code option
						 * (bch_inode.flags, BCH_INODE_OPT_EC_MASK) */
#define BCH_FEATURE_ERASURE_CODE (1ULL << 6)	/* the stripes btree exists: some data is
						 * erasure-coded (stripe, striped pointers) */
#define BCH_FEATURES_KNOWN	(BCH_FEATURE_ENCRYPTION | BCH_FEATURE_SNAPSHOTS | \
				 BCH_FEATURE_INODE_FLAGS | BCH_FEATURE_REFLINK | \
				 BCH_FEATURE_INODE_EC | BCH_FEATURE_ERASURE_CODE)

/* ------------------------------------------------------------------ keys */

/*
 * Positions.  A key's position is (inode, offset, snapshot), compared in that
 * order.  For extents, offset is the END of the extent in sectors and size
 * its length, so a lookup of "the extent covering sector s" is a search for
 * the first key with offset > s.
 */
struct bch_bpos {
	__le64			inode;
	__le64			offset;
	__le32			snapshot;
	__le32			pad;		/* zero */
};
_Static_assert(sizeof(struct bch_bpos) == 24, "bch_bpos size");

/*
 * struct bch_bkey - key header (40 bytes), followed by the value.
 * u64s counts header plus value.  A key of type deleted is a whiteout: it
 * hides older versions of the same position in earlier bsets and the journal.
 */
struct bch_bkey {
	__le16			u64s;		/*  0 header+value in u64 words */
	__u8			type;		/*  2 enum bch_bkey_type */
	__u8			flags;		/*  3 zero */
	__le32			size;		/*  4 extents: sectors covered; else 0 */
	__le64			version;	/*  8 zero for now */
	struct bch_bpos		p;		/* 16 */
	__le64			_data[];	/* 40 value */
};
_Static_assert(sizeof(struct bch_bkey) == 40, "bch_bkey size");
#define BCH_BKEY_U64s		(sizeof(struct bch_bkey) / 8)
#define BCH_BKEY_VAL_U64s_MAX	(255 - BCH_BKEY_U64s)

/* Btree ids.  x(name, on-disk id) */
#define BCH_BTREE_IDS()			\
	x(extents,	0)		\
	x(inodes,	1)		\
	x(dirents,	2)		\
	x(xattrs,	3)		\
	x(alloc,	4)		\
	x(test,		5)		\
	x(rebalance_work, 6)		\
	x(snapshots,	7)		\
	x(reflink,	8)		\
	x(stripes,	9)

enum bch_btree_id {
#define x(n, id)	BCH_BTREE_ID_##n = id,
	BCH_BTREE_IDS()
#undef x
	BCH_BTREE_ID_NR
};

/*
 * Key types.  x(name, on-disk id, value struct or void)
 * Values are u64 aligned; a key's u64s = BCH_BKEY_U64s + value u64s.
 */
#define BCH_BKEY_TYPES()				\
	x(deleted,	0)				\
	x(btree_ptr,	1)				\
	x(alloc,	2)				\
	x(raw,		3)				\
	x(inode,	4)				\
	x(dirent,	5)				\
	x(hash_whiteout, 6)				\
	x(xattr,	7)				\
	x(extent,	8)				\
	x(reservation,	9)				\
	x(xattr_piece,	10)				\
	x(rebalance_work, 11)				\
	x(whiteout,	12)				\
	x(snapshot,	13)				\
	x(subvolume,	14)				\
	x(snapshot_touch, 15)				\
	x(reflink_v,	16)				\
	x(reflink_p,	17)				\
	x(stripe,	18)

enum bch_bkey_type {
#define x(n, id)	BCH_BKEY_##n = id,
	BCH_BKEY_TYPES()
#undef x
	BCH_BKEY_TYPE_NR
};

/*
 * A pointer to sectors on a device, as held by btree pointers and extents.
 * gen must equal the bucket's generation for the pointer to be live; a
 * mismatch on a cached pointer means the data was reclaimed (stale).
 *
 * Cached pointers (BCH_EXTENT_PTR_CACHED, extents only): an extra copy that
 * promote made on promote_target.  It does not count towards replicas or
 * durability; its sectors count as the bucket's cached_sectors, not its
 * dirty ones, and a bucket holding only cached data may be reused at any
 * time (its generation bumped), which makes the pointer stale: a stale
 * cached pointer is skipped by reads and dropped when the key is next
 * rewritten; it is not damage.  A stale dirty pointer is.
 *
 * Striped pointers (BCH_EXTENT_PTR_STRIPED, extents and reflink_v only;
 * BCH_FEATURE_ERASURE_CODE): a dirty pointer whose sectors lie inside data
 * block stripe_block of stripe `stripe` (see "Erasure coding" below).  It
 * is read like any pointer; when that copy is missing or bad, its sectors
 * are rebuilt from the same sectors of the stripe's other blocks.  Without
 * the flag, stripe_block and stripe are zero (older formats' padding).
 */
struct bch_extent_ptr {
	__le64			offset;		/*  0 sector on the device */
	__u8			dev;		/*  8 member index */
	__u8			gen;		/*  9 bucket generation */
	__u8			flags;		/* 10 BCH_EXTENT_PTR_* */
	__u8			stripe_block;	/* 11 striped: data block index in the stripe */
	__le32			stripe;		/* 12 striped: stripe index (1..), the
						 *    stripes btree key at (0, stripe, 0) */
};
_Static_assert(sizeof(struct bch_extent_ptr) == 16, "bch_extent_ptr size");
_Static_assert(__builtin_offsetof(struct bch_extent_ptr, stripe) == 12, "ptr stripe");
#define BCH_EXTENT_PTR_CACHED	(1U << 0)
#define BCH_EXTENT_PTR_STRIPED	(1U << 1)	/* never with CACHED */
#define BCH_EXTENT_PTR_FLAGS_KNOWN	(BCH_EXTENT_PTR_CACHED | BCH_EXTENT_PTR_STRIPED)

/*
 * btree_ptr: an interior node's pointer to a child (key position = the
 * child's max_key).  One pointer per replica; every replica holds the same
 * bytes.  seq is the child's header seq, checked when the child is read.
 */
struct bch_btree_ptr {
	__le64			seq;		/* child node's seq */
	__le16			sectors_written;	/* written at least (updated after each
						 * append of the child); 0: unknown */
	__le16			flags;
	__le32			pad;
	struct bch_bpos		min_key;	/* child's min_key */
	struct bch_extent_ptr	ptrs[];		/* 1..BCH_REPLICAS_MAX */
};
_Static_assert(sizeof(struct bch_btree_ptr) == 40, "bch_btree_ptr size");
#define BCH_REPLICAS_MAX	4

/*
 * alloc: the state of one bucket, in the alloc btree at (dev, bucket, 0).
 * A bucket with no key is free with generation 0.  Superblock and journal
 * buckets have no key (the superblock places them).  data_type is free,
 * btree or user; free exactly when dirty_sectors is 0.  Written at clean
 * close for every bucket that changed (see BCH_CLEAN_ALLOC_CURRENT); while
 * the filesystem is open the in-memory state is newer.
 */
struct bch_alloc {
	__u8			gen;		/* bumped each time the bucket is reused */
	__u8			data_type;	/* enum bch_data_type: free, btree or user */
	__le16			flags;		/* 0 */
	__le32			dirty_sectors;	/* live sectors */
	__le32			cached_sectors;	/* 0 (no cached data yet) */
	__le32			pad;		/* 0 */
	__le64			journal_seq;	/* journal sequence current when written */
};
_Static_assert(sizeof(struct bch_alloc) == 24, "bch_alloc size");

/* raw: opaque bytes, for the test btree and `bcachefs kv` (length in the value). */
struct bch_raw {
	__le32			len;		/* bytes of data */
	__le32			pad;
	__u8			data[];
};
_Static_assert(sizeof(struct bch_raw) == 8, "bch_raw size");

/* ------------------------------------------------------------ files */

/*
 * Inode numbers: 0..4095 are reserved; the root directory is 4096 and
 * lost+found is created by format as the next number.  New inodes take the
 * number after the highest one in use (in any snapshot), below 2^48 (file
 * handles carry the subvolume in the bits above: fs_ops.h).
 */
#define BCH_ROOT_INO		4096ULL
#define BCH_FIRST_INO		4096ULL

/*
 * inode: btree inodes, position (0, inode number, snapshot).  (120 bytes)
 * Times are nanoseconds since the Unix epoch, signed.  dir/dir_offset point
 * back at the dirent that names the inode (its parent and the dirent's
 * offset) for the first link; fsck uses them to find paths and loops.
 * Per-inode options hold the option value + 1, 0 meaning "inherit the
 * filesystem's".  hash_seed seeds the name hash of a directory's dirents
 * and of the inode's xattrs.
 *
 * OFFSET SIZE DESCRIPTION
 *   0     8  size           i_size in bytes
 *   8     8  sectors        sectors of data allocated (all replicas counted once)
 *  16     8  atime  (s64 ns)
 *  24     8  mtime  (s64 ns)
 *  32     8  ctime  (s64 ns)
 *  40     8  btime  (s64 ns, creation)
 *  48     4  mode           S_IFMT type bits and permissions
 *  52     4  uid
 *  56     4  gid
 *  60     4  nlink          links (directories: 2 + subdirectories)
 *  64     4  flags          BCH_INODE_* (below); bits 8..9 opt_erasure_code
 *  68     4  generation     bumped when an inode number is reused
 *  72     8  rdev           device number of block/char devices
 *  80     8  hash_seed
 *  88     8  dir            parent directory of the first link (0: none)
 *  96     8  dir_offset     position of that dirent in the parent
 * 104     2  opt_compression   compression option + 1 (0: inherit)
 * 106     1  opt_data_checksum checksum option + 1 (0: inherit)
 * 107     1  opt_data_replicas replicas + 1 (0: inherit)
 * 108     4  project        project ID (FS_IOC_FSSETXATTR fsx_projid; 0: none)
 * 112     2  opt_background_compression  compression option + 1 (0: inherit)
 * 114     2  opt_foreground_target       target + 1 (0: inherit; targets as
 * 116     2  opt_background_target         in the superblock options,
 * 118     2  opt_promote_target            BCH_TARGET_*)
 *
 * The per-file options are set through xattrs "bcachefs.<option>" (not
 * stored in the xattrs btree) and copied from the parent directory into a
 * new inode when it is created (inheritance).
 */
struct bch_inode {
	__le64			size;
	__le64			sectors;
	__le64			atime;
	__le64			mtime;
	__le64			ctime;
	__le64			btime;
	__le32			mode;
	__le32			uid;
	__le32			gid;
	__le32			nlink;
	__le32			flags;
	__le32			generation;
	__le64			rdev;
	__le64			hash_seed;
	__le64			dir;
	__le64			dir_offset;
	__le16			opt_compression;
	__u8			opt_data_checksum;
	__u8			opt_data_replicas;
	__le32			project;	/* project ID (was pad: 0) */
	__le16			opt_background_compression;
	__le16			opt_foreground_target;
	__le16			opt_background_target;
	__le16			opt_promote_target;
};
_Static_assert(sizeof(struct bch_inode) == 120, "bch_inode size");

/*
 * Inode flags.  UNLINKED is the engine's own; the others are the file flags
 * of chattr(1) (FS_IOC_SETFLAGS), kept with the kernel's meaning:
 *   IMMUTABLE    no change at all: data, size, attributes, xattrs, names
 *                (no unlink, rename, or link of it; in a directory, no name
 *                added or removed).  Set and cleared by root
 *                (CAP_LINUX_IMMUTABLE) only.
 *   APPEND       data may only grow at the end; no truncate, unlink or
 *                rename, no mode/owner/xattr change (a directory: names may
 *                be added, not removed).  Root only, as IMMUTABLE.
 *   NODUMP       dump(8) skips the file (kept and shown, nothing enforced)
 *   NOATIME      reads do not update atime
 *   SYNC         writes are synchronous (the FUSE daemon flushes after each)
 * A filesystem where an inode has a file flag or a nonzero project ID has
 * BCH_FEATURE_INODE_FLAGS; without that bit such an inode is invalid, so a
 * damaged inode of an older filesystem is still found as before.
 */
#define BCH_INODE_UNLINKED	(1U << 0)	/* nlink 0, data being freed */
#define BCH_INODE_IMMUTABLE	(1U << 1)	/* chattr +i */
#define BCH_INODE_APPEND	(1U << 2)	/* chattr +a */
#define BCH_INODE_NODUMP	(1U << 3)	/* chattr +d */
#define BCH_INODE_NOATIME	(1U << 4)	/* chattr +A */
#define BCH_INODE_SYNC		(1U << 5)	/* chattr +S */
#define BCH_INODE_FILE_FLAGS	(BCH_INODE_IMMUTABLE | BCH_INODE_APPEND | BCH_INODE_NODUMP | \
				 BCH_INODE_NOATIME | BCH_INODE_SYNC)

/*
 * Bits 8..9 of flags are not a flag but a field: the per-file option
 * erasure_code, stored as the other per-file options are (value + 1: 1 off,
 * 2 on; 0 inherit the filesystem's; 3 is invalid).  The first inode given it
 * sets BCH_FEATURE_INODE_EC in the superblock (before the inode is written);
 * without that bit the field must be zero.  bch_inode_flags_check() (inode.c)
 * checks both, fsck reports and clears a bad field (inode_flags_unknown,
 * inode_flags_no_feature).  The stripe builder (ec.h) gathers the extents
 * of inodes whose effective value is on.  Copied into new children as the
 * other options are.
 */
#define BCH_INODE_OPT_EC_SHIFT	8
#define BCH_INODE_OPT_EC_MASK	(3U << BCH_INODE_OPT_EC_SHIFT)
#define BCH_INODE_FLAGS_KNOWN	(BCH_INODE_UNLINKED | BCH_INODE_FILE_FLAGS | BCH_INODE_OPT_EC_MASK)

/*
 * Names are hashed (SipHash-2-4 keyed by sb->str_hash_key, seeded by the
 * owning inode's hash_seed) into the offset of the key; hashes run from
 * BCH_HASH_MIN to BCH_HASH_MAX (0 and 1 are readdir's "." and "..").
 * Colliding names take the next free offset (linear probing); a lookup
 * stops at the first empty offset.  Deleting an entry that has a used
 * offset after it leaves a hash_whiteout (no value) so probes continue past it.
 */
#define BCH_HASH_MIN		2ULL
#define BCH_HASH_MAX		((1ULL << 62) - 1)
#define BCH_NAME_MAX		255

/*
 * dirent: btree dirents, position (directory inode, name hash, snapshot).
 * Value: target inode, d_type (DT_* of <dirent.h>), name length, name
 * (not NUL-terminated, zero padded to u64).  (16 bytes + name)
 */
struct bch_dirent {
	__le64			inum;
	__u8			d_type;
	__u8			name_len;	/* 1..255 */
	__u8			pad[6];
	__u8			name[];
};
_Static_assert(sizeof(struct bch_dirent) == 16, "bch_dirent size");

/*
 * xattr: btree xattrs, position (inode, hash of namespace byte + name, snapshot).
 * Value: namespace, name length, value length, pieces, name, value.
 * (8 bytes +)
 *
 * Values are 0..BCH_XATTR_SIZE_MAX bytes (Linux's XATTR_SIZE_MAX).  One
 * that would make the key too big for a small node or transaction is kept
 * out of the key, in xattr_piece keys of the same inode: then `pieces` is
 * nonzero, val_len is 0 and the key holds the name only.  pieces: bits 0-6
 * the number of pieces (1..BCH_XATTR_PIECES_MAX), bits 7-31 the value's id,
 * unique among the inode's values kept in pieces.
 */
#define BCH_XATTR_NAMESPACES()		\
	x(user,			1, "user.")	\
	x(trusted,		2, "trusted.")	\
	x(security,		3, "security.")	\
	x(posix_acl_access,	4, "system.posix_acl_access")	\
	x(posix_acl_default,	5, "system.posix_acl_default")

enum bch_xattr_ns {
#define x(n, id, prefix)	BCH_XATTR_##n = id,
	BCH_XATTR_NAMESPACES()
#undef x
	BCH_XATTR_NS_NR
};

struct bch_xattr {
	__u8			ns;		/* enum bch_xattr_ns */
	__u8			name_len;	/* after the prefix; 0 for ACLs */
	__le16			val_len;	/* bytes of value in this key */
	__le32			pieces;		/* 0: value in this key; see above */
	__u8			data[];		/* name, then value */
};
_Static_assert(sizeof(struct bch_xattr) == 8, "bch_xattr size");
#define BCH_XATTR_SIZE_MAX		65536U
#define BCH_XATTR_PIECE_BYTES		1024U	/* every piece but the last is full */
#define BCH_XATTR_PIECES_MAX		(BCH_XATTR_SIZE_MAX / BCH_XATTR_PIECE_BYTES)
#define BCH_XATTR_PIECES_NR(p)		((p) & 127U)
#define BCH_XATTR_PIECES_ID(p)		((p) >> 7)
#define BCH_XATTR_PIECES(id, nr)	(((uint32_t)(id) << 7) | (nr))
#define BCH_XATTR_ID_MAX		((1U << 25) - 1)

/*
 * xattr_piece: btree xattrs, position (inode, BCH_XATTR_PIECE_POS(id, n), 0):
 * bytes n * BCH_XATTR_PIECE_BYTES.. of the value whose xattr key names id.
 * Pieces n = 0..nr-1 all exist; each holds BCH_XATTR_PIECE_BYTES but the
 * last, which holds 1..BCH_XATTR_PIECE_BYTES.  Their offsets lie above
 * BCH_HASH_MAX, where no probe for a name reaches: an inode's pieces come
 * after all its xattr keys.  Each id owns 128 offsets.  (8 bytes + data)
 */
#define BCH_XATTR_PIECE_MIN		(1ULL << 62)
#define BCH_XATTR_PIECE_POS(id, n)	(BCH_XATTR_PIECE_MIN + ((uint64_t)(id) << 7) + (n))
#define BCH_XATTR_PIECE_POS_ID(off)	(((off) - BCH_XATTR_PIECE_MIN) >> 7)
#define BCH_XATTR_PIECE_POS_N(off)	((unsigned)(((off) - BCH_XATTR_PIECE_MIN) & 127))

struct bch_xattr_piece {
	__le16			len;		/* bytes of data */
	__u8			pad[6];		/* zero */
	__u8			data[];		/* zero padded to u64 */
};
_Static_assert(sizeof(struct bch_xattr_piece) == 8, "bch_xattr_piece size");

/*
 * reservation: btree extents, an allocated-but-unwritten range (fallocate):
 * reads as zeros, counts as data for SEEK_DATA and for i_sectors.  (8 bytes)
 */
struct bch_reservation {
	__le32			nr_replicas;
	__le32			pad;
};
_Static_assert(sizeof(struct bch_reservation) == 8, "bch_reservation size");

/*
 * rebalance_work: btree rebalance_work, a record that some extents of one
 * inode may not satisfy the inode's effective options (data off its
 * background_target, or not compressed with background_compression), so
 * rebalance finds its work in proportion to the work, not to the
 * filesystem's size.  Keys at (inum, 0, 0), one per inode; the key at
 * (0, 0, 0) asks for a scan of every inode (an option of the whole
 * filesystem changed).  A key without work behind it is harmless (rebalance
 * finds nothing and deletes it); an extent needing work without a key is an
 * error fsck repairs (rebalance_work_missing).  (16 bytes)
 *
 * OFFSET SIZE DESCRIPTION
 *   0     8  cursor   the inode's file sector (the scan's inode number)
 *                     before which the work is done: resuming starts here
 *   8     4  flags    BCH_REBALANCE_WAITING: the last pass stopped because
 *                     the target had no space (retried when space is freed)
 *  12     4  pad      zero
 */
struct bch_rebalance_work {
	__le64			cursor;
	__le32			flags;
	__le32			pad;
};
_Static_assert(sizeof(struct bch_rebalance_work) == 16, "bch_rebalance_work size");
#define BCH_REBALANCE_WAITING	(1U << 0)
#define BCH_REBALANCE_FLAGS_KNOWN	(BCH_REBALANCE_WAITING)

/* ------------------------------------------------- snapshots and subvolumes */

/*
 * Snapshots and subvolumes (version 3).
 *
 * Every key of the file btrees (extents, inodes, dirents, xattrs) lies in
 * one snapshot: the snapshot field of its position.  Snapshots form trees:
 * each snapshot ID but a tree's root has a parent, and a child's ID is
 * always greater than its parent's (IDs are handed out in increasing order,
 * the highest in use + 1).  Snapshot 0 is the root of the tree every
 * filesystem starts with; a filesystem that never made a snapshot has only
 * it, and then no snapshot keys at all.
 *
 * Visibility.  A key at (inode, offset, s) is visible from snapshot v when
 * s is v or an ancestor of v, and no other key at (inode, offset) lies in a
 * snapshot between them (a descendant of s that is v or an ancestor of v):
 * of the keys at one (inode, offset), v sees the one in the deepest of its
 * ancestors-or-self, which is the one with the greatest such ID.  A key of
 * type whiteout (no value) hides what its ancestors hold at its position
 * and is itself seen as nothing.  For extents the position is the END of
 * the extent, so overlaps between snapshots are kept to whole keys: a
 * write in snapshot v over part of an extent k seen from an ancestor does
 * not change k; it adds, in v, the new extent, the pieces of k left on
 * either side (copies of its pointers: each key holds its own share of the
 * bucket's sectors, so shared data is counted once per key, as a reference
 * count) and a whiteout at k's position unless a piece already lies there.
 * So the extents v sees never overlap, as without snapshots.
 *
 * Only leaves are written.  A snapshot with children is frozen: keys are
 * written only in a leaf (the snapshot of a subvolume).  Taking a snapshot
 * of a subvolume writing in leaf p gives p two children: the subvolume goes
 * on writing in the first, the new snapshot subvolume sees the second.  No
 * key is copied or changed: a snapshot costs the same for any tree.
 *
 * Deletion.  Deleting a subvolume removes its subvolume key and the dirent
 * that names it and marks its snapshot BCH_SNAPSHOT_DELETED, in one
 * transaction.  Then (in the background, or to the end offline) the keys no
 * live leaf sees are deleted, and snapshots with no live leaf below them
 * go: a crash in between leaves work that the next pass (or fsck) finishes.
 *
 * snapshot: btree snapshots, position (BCH_SNAPSHOT_INO, id, 0).  (32 bytes)
 *
 * OFFSET SIZE DESCRIPTION
 *   0     4  parent       parent snapshot ID, BCH_SNAPSHOT_NONE for a root
 *   4     4  flags        BCH_SNAPSHOT_DELETED: its subvolume is gone
 *   8     4  subvol       the subvolume seeing this leaf (BCH_SUBVOL_NONE:
 *                         none; interior snapshots have none)
 *  12     4  depth        0 for a root, parent's depth + 1
 *  16     4  children[0]  BCH_SNAPSHOT_NONE when absent
 *  20     4  children[1]
 *  24     8  created      s64 ns since the Unix epoch
 */
#define BCH_SNAPSHOT_INO		0ULL
#define BCH_SNAPSHOT_NONE		0xffffffffU
#define BCH_SNAPSHOT_DELETED		(1U << 0)
#define BCH_SNAPSHOT_FLAGS_KNOWN	(BCH_SNAPSHOT_DELETED)
#define BCH_SNAPSHOT_DEPTH_MAX		4096U

struct bch_snapshot {
	__le32			parent;
	__le32			flags;
	__le32			subvol;
	__le32			depth;
	__le32			children[2];
	__le64			created;
};
_Static_assert(sizeof(struct bch_snapshot) == 32, "bch_snapshot size");

/*
 * subvolume: btree snapshots, position (BCH_SUBVOL_INO, id, 0).  (48 bytes)
 * A subvolume is a directory tree with its own root inode, seen through
 * one leaf snapshot; subvolume 0 is the filesystem's root tree (root inode
 * BCH_ROOT_INO; until the first subvolume is made it has no key and sees
 * snapshot 0).  Another subvolume is named by a dirent of type
 * BCH_DT_SUBVOL in a directory of its parent subvolume (dir_subvol, dir,
 * dir_offset say where), and shows as a directory.  A snapshot is a
 * subvolume made from another (BCH_SUBVOL_SNAP; parent names the source
 * and keeps naming it after the source is deleted).  Files in different
 * subvolumes are different files even with the same inode number: inode
 * numbers are unique across all snapshots (a new inode takes the number
 * after the highest in any snapshot), and callers name a file by
 * (subvolume, inode), which fs_ops.h packs into one 64-bit number.
 *
 * OFFSET SIZE DESCRIPTION
 *   0     4  snapshot     the leaf snapshot it reads and writes
 *   4     4  flags        BCH_SUBVOL_RO (every change is refused with
 *                         EROFS), BCH_SUBVOL_SNAP (made by a snapshot)
 *   8     8  root_inum    its root directory's inode number
 *  16     4  parent       source subvolume of a snapshot (BCH_SUBVOL_NONE:
 *                         none)
 *  20     4  dir_subvol   subvolume of the directory holding its name
 *  24     8  dir          that directory's inode number (0 for subvolume 0)
 *  32     8  dir_offset   the dirent's offset in it
 *  40     8  created      s64 ns since the Unix epoch
 */
#define BCH_SUBVOL_INO			1ULL
#define BCH_SUBVOL_NONE			0xffffffffU
#define BCH_SUBVOL_RO			(1U << 0)
#define BCH_SUBVOL_SNAP			(1U << 1)
#define BCH_SUBVOL_FLAGS_KNOWN		(BCH_SUBVOL_RO | BCH_SUBVOL_SNAP)
#define BCH_SUBVOL_MAX			0xfffeU	/* IDs 0..BCH_SUBVOL_MAX (16 bits, see fs_ops.h) */

struct bch_subvolume {
	__le32			snapshot;
	__le32			flags;
	__le64			root_inum;
	__le32			parent;
	__le32			dir_subvol;
	__le64			dir;
	__le64			dir_offset;
	__le64			created;
};
_Static_assert(sizeof(struct bch_subvolume) == 48, "bch_subvolume size");

/*
 * snapshot_touch: btree snapshots, position (BCH_SNAP_TOUCH_INO(snapshot),
 * inode number, 0), no value: some key of that inode (its inode key, or an
 * extent, dirent or xattr under it) was written in that snapshot.  Written
 * in the same transaction as the key, for snapshots that have a parent, so
 * the difference between two snapshots (subvolume diff) is found from the
 * inodes touched on the paths between them, in proportion to the change.
 * Deleted with the snapshot.
 */
#define BCH_SNAP_TOUCH_INO(snap)	((1ULL << 32) + (snap))

/* A dirent naming subvolume inum (its d_type; readdir shows it as DT_DIR). */
#define BCH_DT_SUBVOL			16

/* --------------------------------------------------------- btree nodes */

/*
 * A btree node occupies btree_node_size sectors.  Its first bset is inside
 * struct bch_btree_node; later writes append a struct bch_btree_node_entry
 * (a checksummed bset) at the next block boundary after the last one written,
 * until the node's space is used up.  Keys in later bsets override keys at
 * the same position in earlier bsets.
 *
 * Every bset's checksum covers from the byte after csum to the end of its
 * keys.  A bset's seq must equal the header's seq: the first block whose
 * header carries another seq is where the node ends (space never written in
 * this node's life).
 *
 * Damage or torn append: a bset that fails (bad checksum, impossible size,
 * or a node that ends early) is DAMAGE, never silently the end of the node,
 * unless all of these hold, which only a write cut by a crash produces:
 *   (a) it starts at or past the parent pointer's sectors_written (a lower
 *       bound of what is written: updated in the parent after every append,
 *       in memory, and written with the parent's next write);
 *   (b) the filesystem is being recovered (journal replay), and the bset's
 *       header says (BCH_BSET_SPAN) that every key in it belongs to journal
 *       entries that are replayed: journal_seq - journal_seq_span >= the
 *       oldest replayed entry, journal_seq <= the newest; or it holds only
 *       children's sectors_written hints (BCH_BSET_HINTS);
 *   (c) no valid bset of this node follows it in the node's space.
 * Then the append is torn: its keys are replayed from the journal and the
 * node is rewritten, so the torn bytes do not outlive the recovery.  A
 * damaged bset on a clean filesystem, or one whose keys the journal no
 * longer holds, is reported (and read from another replica).
 */
struct bch_bset {
	__le64			seq;		/* == node seq */
	__le64			journal_seq;	/* newest journal seq of a key in here */
	__le32			flags;		/* BCH_BSET_* */
	__le16			version;	/* format version */
	__le16			pad;
	__le32			u64s;		/* u64s of keys following */
	__le32			journal_seq_span; /* journal_seq minus the oldest key's
						 * journal seq (valid with BCH_BSET_SPAN) */
	__le64			_data[];	/* struct bch_bkey, sorted */
};
_Static_assert(sizeof(struct bch_bset) == 32, "bch_bset size");
#define BCH_BSET_SPAN		(1U << 0)	/* journal_seq_span is set (appends) */
#define BCH_BSET_HINTS		(1U << 1)	/* only children's pointers with a new
						 * sectors_written (not journalled: losing
						 * them loses nothing but those hints) */

struct bch_btree_node {
	struct bch_csum		csum;		/*   0 covers 16..end of keys */
	__le64			magic;		/*  16 BCH_BTREE_NODE_MAGIC */
	__u8			fs_uuid[BCH_UUID_SIZE];	/*  24 */
	__u8			btree_id;	/*  40 */
	__u8			level;		/*  41 0 = leaf */
	__u8			csum_type;	/*  42 of all bsets in this node */
	__u8			pad;		/*  43 */
	__le32			flags;		/*  44 zero */
	__le64			seq;		/*  48 random per node life */
	struct bch_bpos		min_key;	/*  56 */
	struct bch_bpos		max_key;	/*  80 */
	struct bch_bset		keys;		/* 104 */
};
_Static_assert(sizeof(struct bch_btree_node) == 136, "bch_btree_node size");

struct bch_btree_node_entry {
	struct bch_csum		csum;
	struct bch_bset		keys;
};
_Static_assert(sizeof(struct bch_btree_node_entry) == 48, "btree_node_entry size");

/* ------------------------------------------------------------ journal */

/*
 * A journal entry (jset) is written at a block boundary in a journal bucket
 * and never spans buckets.  Its checksum covers from magic to the end of its
 * entries.  last_seq is the oldest sequence still needed for replay.
 */
struct bch_jset {
	struct bch_csum		csum;
	__le64			magic;		/* BCH_JSET_MAGIC */
	__u8			fs_uuid[BCH_UUID_SIZE];
	__le64			seq;
	__le64			last_seq;
	__le32			version;
	__le32			flags;		/* bits 0..3: csum type; BCH_JSET_HDR_CSUM */
	__le32			u64s;		/* u64s of entries following */
	__le32			hdr_csum;	/* with BCH_JSET_HDR_CSUM: bch_jset_hdr_csum() */
	__le64			_data[];	/* struct bch_jset_entry */
};
_Static_assert(sizeof(struct bch_jset) == 72, "bch_jset size");

/*
 * hdr_csum is set: crc32c (init and xorout ~0) of the header from magic
 * through u64s (52 bytes).  It lets a reader trust an entry's sequence
 * numbers and size from its first block alone (dating a journal bucket
 * without reading its whole first entry); csum still covers everything,
 * hdr_csum included.  Entries without the flag have hdr_csum 0.
 */
#define BCH_JSET_HDR_CSUM	(1U << 4)
#define BCH_JSET_HDR_BYTES	(offsetof(struct bch_jset, hdr_csum) - offsetof(struct bch_jset, magic))

/*
 * A journal stub (version 2): one block holding only the header of entry
 * seq — flags BCH_JSET_STUB | BCH_JSET_HDR_CSUM, checksum type none, u64s 0,
 * csum zero, last_seq as the entry's — written to another lane than the
 * entry, in the same flush.  It is never replayed: it says the entry was
 * written.  A reader that finds a stub of seq S while the newest valid entry
 * is older than S - 1 reports entries up to S as lost (one entry torn by a
 * crash is what a power cut leaves; more than one was acknowledged).  The
 * header checksum is a crc32c, not a MAC, also on encrypted filesystems:
 * a forged stub can only make fsck report loss, never make anything trusted.
 */
#define BCH_JSET_STUB		(1U << 5)

/* Sub-entries of a jset.  x(name, on-disk id) */
#define BCH_JSET_ENTRY_TYPES()		\
	x(btree_keys,	0)		\
	x(btree_root,	1)		\
	x(usage,	2)		\
	x(dev_usage,	3)		\
	x(nonce,	4)		\
	x(clean_mac,	5)

enum bch_jset_entry_type {
#define x(n, id)	BCH_JSET_ENTRY_##n = id,
	BCH_JSET_ENTRY_TYPES()
#undef x
	BCH_JSET_ENTRY_NR
};

/*
 * nonce (encrypted filesystems only): the first sub-entry of every journal
 * entry, in the clear, one u64 of data: the nonce counter value the entry is
 * encrypted with (see "Encryption").  Replay skips it.
 */
struct bch_jset_entry {
	__le16			u64s;		/* u64s of data after this header */
	__u8			btree_id;
	__u8			level;
	__u8			type;		/* enum bch_jset_entry_type */
	__u8			pad[3];
	__le64			_data[];
};
_Static_assert(sizeof(struct bch_jset_entry) == 8, "bch_jset_entry size");

/* ------------------------------------------------------------ extent data */

/*
 * How one encoded extent is stored: the data path checksums (and maybe
 * compresses) file data in units of at most encoded_extent_max, each written
 * once to freshly allocated space, padded with zeros to whole blocks.  An
 * extent key refers to part or all of one encoded extent (overwrites trim keys
 * without rewriting data), so the key's sectors are [offset, offset + size)
 * of the DECODED extent.  (32 bytes)
 *
 * OFFSET SIZE DESCRIPTION
 *   0     4  compressed_sectors    sectors the encoded extent occupies on disk
 *   4     4  uncompressed_sectors  sectors of data it decodes to
 *   8     4  compressed_bytes      exact length of the encoded stream (for
 *                                  none: uncompressed_sectors * 512)
 *  12     1  csum_type             enum bch_csum_type, over the whole encoded
 *                                  extent (compressed_sectors * 512 bytes,
 *                                  padding included)
 *  13     1  compression_type      enum bch_compression_type (see compress.h
 *                                  for each type's encoded form);
 *                                  incompressible is stored exactly as none
 *                                  and says background compression was tried
 *                                  and did not shrink it (rebalance does not
 *                                  try again)
 *  14     2  offset                sectors into the decoded extent where this
 *                                  key's data starts
 *  16    16  csum                  the checksum
 */
struct bch_extent_crc {
	__le32			compressed_sectors;
	__le32			uncompressed_sectors;
	__le32			compressed_bytes;
	__u8			csum_type;
	__u8			compression_type;
	__le16			offset;
	struct bch_csum		csum;
};
_Static_assert(sizeof(struct bch_extent_crc) == 32, "bch_extent_crc size");

/*
 * Value of an extent key (btree extents; position = (inode, END sector,
 * snapshot), key size = sectors covered): the encoding, then one pointer per
 * replica (1..BCH_REPLICAS_MAX), each to compressed_sectors on its device.
 */
struct bch_extent {
	struct bch_extent_crc	crc;
	struct bch_extent_ptr	ptrs[];
};
_Static_assert(sizeof(struct bch_extent) == 32, "bch_extent size");

/* ------------------------------------------------------------ reflink */

/*
 * Shared extents (BCH_FEATURE_REFLINK; any format version).  Data shared
 * between files (bcachefs image cp --reflink, copy_file_range) is held
 * once, by an indirect extent in the reflink btree (id 8), and each file
 * that shares it holds reflink_p keys that point at a range of that btree.
 * The reflink btree's root is made, and the feature bit set (first), with
 * the first shared extent; a filesystem without the bit has no reflink
 * btree, and a reader that does not know the bit refuses it.
 *
 * reflink_v: btree reflink, position (0, END index, 0), key size = sectors
 * covered, key version as the extent it was made from (an encrypted
 * extent's nonce).  The reflink btree's offsets are an index space of its
 * own: indirect extents never overlap, and new ones take the range after
 * the highest in use.  Value: a reference count, then exactly the value of
 * an extent key (the encoding and 1..BCH_REPLICAS_MAX pointers), read,
 * checked and moved as one.  (40 bytes + pointers)
 *
 * OFFSET SIZE DESCRIPTION
 *   0     8  refcount   reflink_p keys (in any snapshot) whose range
 *                       overlaps this key's range; 1.. (a key at 0 is
 *                       deleted with its space)
 *   8    32  crc        struct bch_extent_crc, as in an extent key
 *  40    16n ptrs       struct bch_extent_ptr, as in an extent key
 *
 * Space: the pointers of a reflink_v account its share of the encoded
 * extent to their buckets, once, whatever the number of sharers; a
 * reflink_p holds no pointers and accounts nothing to buckets (it counts
 * in its inode's sectors as an extent does).
 */
struct bch_reflink_v {
	__le64			refcount;
	struct bch_extent_crc	crc;
	struct bch_extent_ptr	ptrs[];
};
_Static_assert(sizeof(struct bch_reflink_v) == 40, "bch_reflink_v size");
_Static_assert(__builtin_offsetof(struct bch_reflink_v, crc) == 8, "reflink_v crc");

/*
 * reflink_p: btree extents, position (inode, END sector, snapshot) like an
 * extent key, key size = sectors covered: file sectors [end - size, end)
 * are the reflink btree's sectors [idx, idx + size).  Trimming its front
 * moves idx with it.  Every indirect extent the range overlaps holds one
 * reference for this key; a range no reflink_v covers is damage (fsck
 * punches it to a hole).  A reflink_p is an extent key of its snapshot in
 * every other respect (snapshots, whiteouts, punch and truncate).
 * (8 bytes)
 *
 * OFFSET SIZE DESCRIPTION
 *   0     8  idx        reflink btree sector of the key's first sector
 */
struct bch_reflink_p {
	__le64			idx;
};
_Static_assert(sizeof(struct bch_reflink_p) == 8, "bch_reflink_p size");

/* ------------------------------------------------------- erasure coding */

/*
 * Erasure coding (BCH_FEATURE_ERASURE_CODE; any format version).  A stripe
 * is k data blocks and p parity blocks of block_sectors each, on k + p
 * different members; any k of them give back the other p (Reed-Solomon
 * over GF(2^8), algorithm BCH_STRIPE_ALG_RS_CAUCHY: the systematic Cauchy
 * matrix of ISA-L's gf_gen_cauchy1_matrix(), polynomial 0x11d; parity row
 * i, column j holds 1 / (i ^ j); libbcachefs/ec.h).  Byte j of a parity
 * block depends only on byte j of the data blocks.  Data blocks hold
 * encoded extents exactly as a replica would (each extent's sectors at
 * its striped pointer's offset) and zeros where no extent lies; stripes
 * are written whole, copy-on-write, and their contents never change, so
 * there is no write hole: a stripe key is committed only after all its
 * blocks are durable, in the transaction that makes extents point into
 * it.  (A repair writes a bad block back in place with the bytes the key
 * already names, or a parity block wrong when built with the data's
 * parity, its checksum in the key corrected after: ec.h,
 * bch_ec_stripe_check().)
 *
 * The stripes btree (id 9) holds one stripe key per stripe; its root is
 * made, and the feature bit set (first, in the superblock), with the first
 * stripe.  A filesystem without the bit has no stripes btree and no
 * striped pointer; a reader that does not know the bit refuses it.
 *
 * stripe: btree stripes, position (0, stripe index, 0), index 1..2^32-1
 * (the index a striped pointer names).  (16 bytes + 24 per block)
 *
 * OFFSET SIZE DESCRIPTION
 *   0     4  block_sectors  sectors of every block (1..BCH_STRIPE_BLOCK_MAX,
 *                           a multiple of the filesystem's block size)
 *   4     1  nr_blocks      k + p (3..BCH_STRIPE_BLOCKS_MAX)
 *   5     1  nr_parity      p (1..BCH_STRIPE_PARITY_MAX); k = nr_blocks - p
 *                           is 2..16
 *   6     1  algorithm      BCH_STRIPE_ALG_RS_CAUCHY (0)
 *   7     1  csum_type      checksum of each whole block (none, crc32c,
 *                           crc64, xxhash64; never a MAC: parity of an
 *                           encrypted filesystem is over ciphertext, and
 *                           the extents' MACs vouch for the data)
 *   8     4  flags          zero (no flags yet)
 *  12     4  pad            zero
 *  16    24n blocks         struct bch_stripe_block, data blocks 0..k-1
 *                           then parity blocks k..k+p-1
 *
 * A block: a pointer (dev, offset, gen; flags, stripe_block and stripe
 * zero) to block_sectors sectors inside one bucket, and the checksum of
 * those block_sectors * 512 bytes (crc32c in the low 32 bits of csum), so
 * scrub and fsck -c find which block of a stripe that does not decode is
 * the bad one.
 *
 * Striped pointers name (stripe, stripe_block); the pointer's dev equals
 * the block's, its gen the block's, and its compressed_sectors from offset
 * lie inside the block.  An extent whose one dirty pointer is striped has
 * the durability of its stripe: p + 1 members may be lost.
 */
#define BCH_STRIPE_ALG_RS_CAUCHY	0
#define BCH_STRIPE_BLOCKS_MAX		20	/* k <= 16, p <= 4: ec.h */
#define BCH_STRIPE_PARITY_MAX		4
#define BCH_STRIPE_BLOCK_MAX		(1U << 20)	/* sectors (512 MiB) */

struct bch_stripe_block {
	struct bch_extent_ptr	ptr;		/* flags, stripe_block, stripe: zero */
	__le64			csum;		/* of the whole block, csum_type */
};
_Static_assert(sizeof(struct bch_stripe_block) == 24, "bch_stripe_block size");

struct bch_stripe {
	__le32			block_sectors;
	__u8			nr_blocks;
	__u8			nr_parity;
	__u8			algorithm;
	__u8			csum_type;
	__le32			flags;
	__le32			pad;
	struct bch_stripe_block	blocks[];
};
_Static_assert(sizeof(struct bch_stripe) == 16, "bch_stripe size");
_Static_assert(__builtin_offsetof(struct bch_stripe, blocks) == 16, "stripe blocks");

#endif /* _BCACHEFS_FORMAT_H */
