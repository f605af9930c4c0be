// SPDX-License-Identifier: GPL-2.0
/*
 * btree_io.c - btree nodes on disk.
 *
 * A node's space (btree_node_size) starts with struct bch_btree_node (the
 * header and the first bset); each later write appends a struct
 * bch_btree_node_entry (a bset) at the next block boundary.  Reading checks
 * the header against the pointer that led here (magic, filesystem UUID,
 * btree, level, seq, min and max key) and every bset's checksum and seq.
 * The node ends at the first block whose header carries another seq.  A bset
 * that fails is damage (the copy is bad: the next replica is read, fsck
 * reports it) unless it is a torn append, which only recovery from a crash
 * can forgive: past the parent's sectors_written, every key of it in the
 * journal being replayed, no bset of the node after it (the rule is at
 * struct bch_bset).  A forgiven node is rewritten elsewhere at its next
 * write (b->torn_tail).  Every key is validated and must be in order and
 * inside the node's range.
 *
 * Appends record the span of journal seqs their keys came from
 * (journal_seq_span, taken from the node's journal pin) for that rule.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcachefs.h"
#include "blockdev.h"
#include "btree.h"
#include "btree_prefetch.h"
#include "snapshot.h"
#include "checksum.h"
#include "crypt.h"
#include "errcode.h"
#include "super.h"

static size_t node_bytes(struct bch_fs *c)
{
	return (size_t)c->sb->btree_node_size << BCH_SECTOR_SHIFT;
}

static size_t block_bytes(struct bch_fs *c)
{
	return (size_t)c->sb->block_size << BCH_SECTOR_SHIFT;
}

static size_t round_block(struct bch_fs *c, size_t bytes)
{
	size_t b = block_bytes(c);

	return (bytes + b - 1) / b * b;
}

bool bch_btree_node_fits(struct bch_fs *c, const struct btree *b)
{
	return sizeof(struct bch_btree_node) + b->u64s * 8 <= node_bytes(c);
}

unsigned bch_btree_node_append_sectors(struct bch_fs *c, struct btree *b)
{
	bch_btree_node_pending_sort(b);
	return round_block(c, sizeof(struct bch_btree_node_entry) + b->pending_u64s * 8) >>
	       BCH_SECTOR_SHIFT;
}

/*
 * The read-ahead thread's parse (bch_btree_node_parse_ahead()): the bytes
 * are given, nothing of the filesystem changes (no error is counted: a copy
 * that fails there is read and reported again by the read path), and keys
 * are validated as the thread that queued it asked.  Thread-local: set only
 * while that thread parses.
 */
struct parse_ahead {
	void	*buf;
	size_t	len;
	bool	skip_validate;
	bool	taken;		/* buf is b's arena now (freed with it) */
};
static __thread struct parse_ahead *ahead_parse;

/* fsck -n after pass 3: every key of these very bytes was validated there already */
static bool keys_validated(struct bch_fs *c)
{
	return ahead_parse ? ahead_parse->skip_validate : c->fsck_copies_checked && c->read_only;
}

/* Apply the keys of one bset (validated here) to b. */
static int read_bset(struct bch_fs *c, struct btree *b, const struct bch_bset *i,
		     char *err, size_t errlen)
{
	const __le64 *p = i->_data, *end = i->_data + i->u64s;
	const struct bch_bkey *prev = NULL;
	unsigned nr = 0;

	/* how many keys come (the loop below checks what this skips over) */
	for (const __le64 *q = p; end - q >= (ptrdiff_t)BCH_BKEY_U64s &&
	     ((const struct bch_bkey *)q)->u64s >= BCH_BKEY_U64s; q += ((const struct bch_bkey *)q)->u64s)
		nr++;
	bch_btree_node_reserve(b, b->nr + nr);
	while (p < end) {
		const struct bch_bkey *k = (const void *)p;

		if (end - p < (ptrdiff_t)BCH_BKEY_U64s || k->u64s < BCH_BKEY_U64s || k->u64s > end - p)
			return snprintf(err, errlen, "key overruns its bset"), -BCH_ERR_btree_node_bad;
		/*
		 * fsck -n after pass 3: every key of these very bytes (the
		 * checksum says so; nothing writes) was validated there already
		 */
		if (!keys_validated(c) &&
		    bch_bkey_validate_fs(c, k, b->id, b->level, err, errlen)) {
			if (!c->opts.v[Opt_fsck] || b->level)
				return -BCH_ERR_btree_node_bad;
			/* fsck: skip the key, keep the node; fsck reports it and rewrites the node */
			char pos[80], *msg;
			bch_bpos_to_text(k->p, pos, sizeof(pos));
			if (asprintf(&msg, "key %s: %s", pos, err) < 0)
				abort();
			b->dropped = realloc(b->dropped, (b->nr_dropped + 1) * sizeof(*b->dropped));
			if (!b->dropped)
				abort();
			b->dropped[b->nr_dropped++] = msg;
			err[0] = 0;
			p += k->u64s;
			continue;
		}
		if (prev && bpos_cmp(prev->p, k->p) >= 0)
			return snprintf(err, errlen, "keys out of order"), -BCH_ERR_btree_node_bad;
		if (bpos_cmp(k->p, b->min_key) < 0 || bpos_cmp(k->p, b->max_key) > 0)
			return snprintf(err, errlen, "key outside the node's range"),
			       -BCH_ERR_btree_node_bad;
		bch_btree_node_insert_ref(b, k);	/* into the read buffer: see read_one() */
		prev = k;
		p += k->u64s;
	}
	if (i->journal_seq > b->disk_journal_seq)
		b->disk_journal_seq = i->journal_seq;
	return 0;
}

static int parse_one(struct bch_fs *c, struct btree *b, const struct bch_extent_ptr *ptr,
		     const struct bch_btree_ptr *bp, char *err, size_t errlen);
static void node_reset_keys(struct btree *b);

/*
 * Read one copy and parse it.  What is read goes straight into the node's
 * arena, and the keys are referenced where they lie in it (no copy per
 * key).  The arena starts at what the parent says was written plus a block
 * (where the header of a later append would be), or 64 KiB when it does
 * not say, and grows while the bsets go on (node_need()).
 */
static int read_one(struct bch_fs *c, struct btree *b, const struct bch_extent_ptr *ptr,
		    const struct bch_btree_ptr *bp, char *err, size_t errlen)
{
	int ret = parse_one(c, b, ptr, bp, err, errlen);

	if (ret) {
		node_reset_keys(b);	/* frees the arena */
		return ret;
	}
	/*
	 * a 64 KiB first read may have left much unused: keep what the node uses
	 * (and the block after it, read with it: trimming only that cost a
	 * system call per node read)
	 */
	size_t used = (size_t)b->sectors_written << BCH_SECTOR_SHIFT;
	if (b->arena_bytes > used + block_bytes(c))
		bch_btree_node_arena_resize(b, used);
	return 0;
}

/*
 * Make b's arena hold at least bytes of the node read from where: grow it
 * (moving the keys that point into it) and read what is missing.  It grows
 * to what is needed and as far as the header of a bset that would follow
 * (one block more at the end of a bset), so an append costs one more read
 * and the arena stays the size of what the node holds, plus a block.
 * *have is how much was read.
 */
static int node_need(struct bch_fs *c, struct btree *b, struct bch_dev *ca, uint64_t where,
		     size_t bytes, size_t *have, char *err, size_t errlen)
{
	size_t nb = node_bytes(c);

	if (bytes <= *have || *have >= nb)
		return 0;
	/* and the header of a bset that would follow (in the block after) */
	size_t more = round_block(c, bytes + sizeof(struct bch_btree_node_entry));
	if (more > nb)
		more = nb;
	if (more > b->arena_bytes)
		bch_btree_node_arena_resize(b, more);
	int ret = bch_dev_read(ca->bdev, (char *)b->arena + *have, more - *have, where + *have);
	if (ret)
		return snprintf(err, errlen, "%s", bch_err_str(ret)), ret;
	*have = more;
	return 0;
}

/* The bset at byte off of a node is damaged: say where, for the caller's report. */
static int bset_damage(size_t off, const char *why, char *err, size_t errlen)
{
	snprintf(err, errlen, "bset at sector %zu: %s", off >> BCH_SECTOR_SHIFT, why);
	return -BCH_ERR_btree_node_bad;
}

/*
 * Check the later bset i at byte off of node seq: its checksum, or on an
 * encrypted filesystem its MAC (nothing decrypted).  The keys follow the
 * header in memory.  0, -BCH_ERR_csum_mismatch, or a library's error.
 */
static int bset_verify(struct bch_fs *c, unsigned csum_type, uint64_t seq, size_t off,
		       const struct bch_bset *i, struct bch_csum csum)
{
	size_t kb = (size_t)i->u64s * 8;

	if (csum_type == BCH_CSUM_chacha20_poly1305)
		return bch_crypt_bset_verify(c, seq, off, i->journal_seq, i, sizeof(*i), i->_data, kb,
					     csum);
	return bch_csum_verify(csum_type, i, sizeof(*i) + kb, csum);
}

/*
 * The node's checksum type against the filesystem: an encrypted one has
 * only MACs, an unencrypted one none (a node that claims otherwise is
 * damage, never read as plaintext).
 */
static bool csum_type_fits(struct bch_fs *c, unsigned csum_type)
{
	return bch_csum_type_valid(csum_type) &&
	       (csum_type == BCH_CSUM_chacha20_poly1305) == bch_fs_encrypted(c);
}

/* Is there a bset of this node (seq, checksum good) at a block after off? */
static int later_bset(struct bch_fs *c, struct btree *b, struct bch_dev *ca, uint64_t where,
		      size_t *have, size_t off, uint64_t seq, unsigned csum_type)
{
	size_t nb = node_bytes(c), bs = block_bytes(c);
	int ret;

	if ((ret = node_need(c, b, ca, where, nb, have, NULL, 0)))
		return ret;
	for (size_t p = off + bs; p + sizeof(struct bch_btree_node_entry) <= nb; p += bs) {
		const struct bch_btree_node_entry *e = (const void *)((char *)b->arena + p);

		if (e->keys.seq == seq && p + sizeof(*e) + (size_t)e->keys.u64s * 8 <= nb &&
		    !bset_verify(c, csum_type, seq, p, &e->keys, e->csum))
			return 1;
	}
	return 0;
}

/*
 * The bset at off fails its checksum past what the parent knew of: 1 when
 * it is a torn append (its keys all in the journal being replayed, nothing
 * of the node after it), 0 when it is damage, negative on a read error.
 */
static int torn_append(struct bch_fs *c, struct btree *b, struct bch_dev *ca, uint64_t where,
		       size_t *have, size_t off, const struct bch_bset *i, uint64_t seq,
		       unsigned csum_type)
{
	uint64_t newest = i->journal_seq, oldest = newest - i->journal_seq_span;

	/* a bset of children's hints only loses nothing but hints */
	if (!(i->flags & BCH_BSET_HINTS) &&
	    (!c->replay_oldest || !(i->flags & BCH_BSET_SPAN) ||
	     oldest < c->replay_oldest || oldest > newest || newest > c->replay_newest))
		return 0;
	int ret = later_bset(c, b, ca, where, have, off, seq, csum_type);
	return ret < 0 ? ret : !ret;
}

/*
 * fsck: the header at off carries another seq.  Usually that is the end of
 * the node; but a bset of ours whose seq field alone was damaged would be
 * taken for it.  Returns 1 when the bset there verifies with the node's seq
 * put back (it is ours, damaged), 0 otherwise, negative on a read error.
 * Costs a read only when the header looks like one of this filesystem's.
 */
static int seq_damaged(struct bch_fs *c, struct btree *b, struct bch_dev *ca, uint64_t where,
		       size_t *have, size_t off, uint64_t seq, unsigned csum_type)
{
	size_t nb = node_bytes(c);
	const struct bch_btree_node_entry *e = (const void *)((char *)b->arena + off);
	size_t end = off + sizeof(*e) + (size_t)e->keys.u64s * 8;
	int ret;

	if (e->keys.version < BCH_VERSION_MIN || e->keys.version > c->sb->version || end > nb || !e->keys.u64s ||
	    !e->keys.journal_seq)
		return 0;
	if ((ret = node_need(c, b, ca, where, end, have, NULL, 0)))
		return ret;
	e = (const void *)((char *)b->arena + off);
	size_t bytes = sizeof(e->keys) + e->keys.u64s * 8;
	struct bch_bset *copy = malloc(bytes);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, &e->keys, bytes);
	copy->seq = seq;
	ret = !bset_verify(c, csum_type, seq, off, copy, e->csum);
	free(copy);
	return ret;
}

/* Parse the copy at ptr, reading it into b's arena as far as needed. */
static int parse_one(struct bch_fs *c, struct btree *b, const struct bch_extent_ptr *ptr,
		     const struct bch_btree_ptr *bp, char *err, size_t errlen)
{
	struct bch_dev *ca = ptr->dev < BCH_SB_MEMBERS_MAX ? c->devs[ptr->dev] : NULL;
	size_t nb = node_bytes(c);
	int ret;

	if (!ca || !ca->bdev)
		return snprintf(err, errlen, "device %u missing", ptr->dev), -BCH_ERR_device_missing;
	/*
	 * Most nodes use a fraction of their space: read what the parent says was
	 * written (plus a block, where the header of a later append would be),
	 * or 64 KiB when it does not say; when the bsets go on, read on as far
	 * as the next one needs.
	 */
	uint64_t where = (uint64_t)ptr->offset << BCH_SECTOR_SHIFT;
	size_t have = bp->sectors_written
		? ((size_t)bp->sectors_written << BCH_SECTOR_SHIFT) + block_bytes(c)
		: (size_t)64 << 10;
	have = have < nb ? round_block(c, have) : nb;
	/* read and parsed ahead (btree_prefetch.c): b has its keys */
	if (!ahead_parse && bch_prefetch_take_parsed(c, b, ptr, bp, have))
		return 0;
	void *ahead = ahead_parse ? ahead_parse->buf : bch_prefetch_take(c, ptr, &have);
	if (ahead_parse) {
		if (ahead_parse->len != have)
			return snprintf(err, errlen, "read ahead: other length"), -BCH_ERR_btree_node_read;
		ahead_parse->taken = true;
	}
	b->arena = ahead ? ahead : bch_node_arena_alloc(have);
	b->arena_bytes = have;	/* for in_arena(): keys in it are not freed one by one */
	b->arena_used = 0;	/* raw node bytes: no appends, the first insert packs */
	ret = ahead ? 0 : bch_dev_read(ca->bdev, b->arena, have, where);
	if (ret)
		return snprintf(err, errlen, "%s", bch_err_str(ret)), ret;
#define NEED(bytes)								\
	do {									\
		if ((ret = node_need(c, b, ca, where, (bytes), &have, err, errlen)))	\
			return ret;						\
		n = b->arena;	/* the arena may have moved */			\
	} while (0)

	const struct bch_btree_node *n = b->arena;
	if (n->magic != BCH_BTREE_NODE_MAGIC)
		return snprintf(err, errlen, "not a btree node (bad magic)"), -BCH_ERR_btree_node_bad;
	if (memcmp(n->fs_uuid, c->sb->uuid, BCH_UUID_SIZE))
		return snprintf(err, errlen, "node of another filesystem"), -BCH_ERR_btree_node_bad;
	/* (an encrypted node's range is checked once decrypted, below) */
	if (n->btree_id != b->id || n->level != b->level || n->seq != bp->seq ||
	    (n->csum_type != BCH_CSUM_chacha20_poly1305 &&
	     (!bpos_eq(n->min_key, b->min_key) || !bpos_eq(n->max_key, b->max_key))))
		return snprintf(err, errlen, "stale or misplaced node (found btree %u level %u)",
				n->btree_id, n->level),
		       -BCH_ERR_btree_node_bad;
	if (!csum_type_fits(c, n->csum_type))
		return snprintf(err, errlen, "%s", !bch_csum_type_valid(n->csum_type) ? "bad checksum type"
				: bch_fs_encrypted(c) ? "unencrypted node on an encrypted filesystem"
				: "encrypted node on a filesystem without encryption"),
		       -BCH_ERR_btree_node_bad;
	if (n->keys.seq != n->seq || sizeof(*n) + (size_t)n->keys.u64s * 8 > nb)
		return snprintf(err, errlen, "bad first bset"), -BCH_ERR_btree_node_bad;
	NEED(sizeof(*n) + (size_t)n->keys.u64s * 8);
	if (n->csum_type == BCH_CSUM_chacha20_poly1305)
		/* the header from magic on is bound to the MAC; the keys decrypted in place */
		ret = bch_crypt_bset_decrypt(c, n->seq, 0, n->keys.journal_seq, &n->magic,
					     sizeof(*n) - sizeof(n->csum), (void *)n->keys._data,
					     (size_t)n->keys.u64s * 8, n->csum);
	else
		ret = bch_csum_verify(n->csum_type, &n->magic,
				      sizeof(*n) - sizeof(n->csum) + n->keys.u64s * 8, n->csum);
	if (ret == -BCH_ERR_csum_mismatch && !ahead_parse)	/* the member's error counter (super.h) */
		bch_dev_error_inc(c, ptr->dev, BCH_DEV_ERROR_checksum);
	if (ret)
		return snprintf(err, errlen, "%s", ret == -BCH_ERR_csum_mismatch
				? (n->csum_type == BCH_CSUM_chacha20_poly1305 ? "bad MAC" : "bad checksum")
				: bch_err_str(ret)), ret;
	if (n->csum_type == BCH_CSUM_chacha20_poly1305) {
		struct btree_range { struct bch_bpos min, max; } r = { n->min_key, n->max_key };
		bch_crypt_node_range(c, false, n->seq, n->keys.journal_seq, &r, sizeof(r));
		if (!bpos_eq(r.min, b->min_key) || !bpos_eq(r.max, b->max_key))
			return snprintf(err, errlen, "stale or misplaced node (found btree %u level %u)",
					n->btree_id, n->level),
			       -BCH_ERR_btree_node_bad;
	}
	b->seq = n->seq;
	b->csum_type = n->csum_type;
	if ((ret = read_bset(c, b, &n->keys, err, errlen)))
		return ret;

	/*
	 * The appends.  Where they end is where a header carries another seq;
	 * a bset that fails is damage unless it is a torn append (see struct
	 * bch_bset in bcachefs_format.h for the rule).
	 */
	size_t hint = (size_t)bp->sectors_written << BCH_SECTOR_SHIFT;
	size_t off = round_block(c, sizeof(*n) + n->keys.u64s * 8);
	while (off + sizeof(struct bch_btree_node_entry) <= nb) {
		NEED(off + sizeof(struct bch_btree_node_entry));
		const struct bch_btree_node_entry *e = (const void *)((char *)b->arena + off);
		bool fits = off + sizeof(*e) + (size_t)e->keys.u64s * 8 <= nb;

		if (e->keys.seq != n->seq) {
			if (off < hint)
				return bset_damage(off, "not written, but the parent says it was",
						   err, errlen);
			if (c->opts.v[Opt_fsck] &&
			    (ret = seq_damaged(c, b, ca, where, &have, off, n->seq, n->csum_type)))
				return bset_damage(off, ret == 1
						   ? "its seq is damaged (the rest is intact)"
						   : bch_err_str(ret), err, errlen);
			break;	/* the end of what this node's life wrote */
		}
		if (fits) {
			NEED(off + sizeof(*e) + (size_t)e->keys.u64s * 8);
			e = (const void *)((char *)b->arena + off);
		}
		/* (the node's checksum type verified the header: no library is missing) */
		if (!fits || bset_verify(c, n->csum_type, n->seq, off, &e->keys, e->csum)) {
			const char *why = fits ? "bad checksum" : "size past the node's end";

			if (off < hint)
				return bset_damage(off, why, err, errlen);
			if ((ret = torn_append(c, b, ca, where, &have, off, &e->keys, n->seq,
					       n->csum_type)) < 0)
				return bset_damage(off, bch_err_str(ret), err, errlen);
			if (!ret)
				return bset_damage(off, why, err, errlen);
			b->torn_tail = true;
			break;
		}
		if (n->csum_type == BCH_CSUM_chacha20_poly1305 &&
		    bch_crypt_bset_decrypt(c, n->seq, off, e->keys.journal_seq, &e->keys, sizeof(e->keys),
					   (void *)e->keys._data, (size_t)e->keys.u64s * 8, e->csum))
			return bset_damage(off, "bad MAC", err, errlen);	/* verified just above */
		if ((ret = read_bset(c, b, &e->keys, err, errlen)))
			return ret;
		off = round_block(c, off + sizeof(*e) + e->keys.u64s * 8);
	}
	if (off < hint)
		return bset_damage(off, "the node ends before what the parent says was written",
				   err, errlen);
	b->sectors_written = off >> BCH_SECTOR_SHIFT;
	b->no_append = bch_fs_encrypted(c);	/* see struct btree */
	return 0;
#undef NEED
}

static void node_reset_keys(struct btree *b)
{
	for (unsigned i = 0; i < b->nr_dropped; i++)
		free(b->dropped[i]);
	free(b->dropped);
	b->dropped = NULL;
	b->nr_dropped = 0;
	b->disk_journal_seq = 0;
	bch_btree_node_free_keys(b);
}

int bch_btree_node_parse_ahead(struct bch_fs *c, struct btree *b, const struct bch_bkey *ptr,
			       void *buf, size_t len, bool skip_validate)
{
	const struct bch_btree_ptr *bp = bkey_val(ptr);
	struct parse_ahead a = { .buf = buf, .len = len, .skip_validate = skip_validate };
	char err[200];

	ahead_parse = &a;
	int r = read_one(c, b, &bp->ptrs[0], bp, err, sizeof(err));
	ahead_parse = NULL;
	if (r && !a.taken)
		bch_node_arena_free(buf, len);
	return r;
}

int bch_btree_node_verify(struct bch_fs *c, unsigned id, unsigned level, const struct bch_bkey *ptr,
			  unsigned only, unsigned *bad, unsigned *missing, uint64_t *bytes,
			  char *err, size_t errlen)
{
	const struct bch_btree_ptr *bp = bkey_val(ptr);
	unsigned nr = bch_btree_ptr_nr(ptr);
	int r = 0;

	*bad = *missing = 0;
	if (err && errlen)
		err[0] = 0;
	for (unsigned i = 0; i < nr; i++) {
		char e[200] = "";
		if (!(only & (1U << i)))
			continue;
		struct btree *t = calloc(1, sizeof(*t));
		if (!t)
			abort();
		t->id = id;
		t->level = level;
		t->min_key = bp->min_key;
		t->max_key = ptr->p;
		int r1 = read_one(c, t, &bp->ptrs[i], bp, e, sizeof(e));
		if (r1 == -BCH_ERR_device_missing) {
			*missing |= 1U << i;
		} else if (bch_err_is_dl(r1) || r1 == -ENOMEM) {
			r = r1;		/* not the copy's fault */
		} else if (r1) {
			*bad |= 1U << i;
			if (err && errlen && !err[0])
				snprintf(err, errlen, "copy on device %u: %s", bp->ptrs[i].dev, e);
		} else {
			*bytes += (uint64_t)t->sectors_written << BCH_SECTOR_SHIFT;
		}
		node_reset_keys(t);
		bch_btree_node_free_index(t);
		free(t);
		if (r)
			break;
	}
	if (r)
		*bad = 0;
	return r;
}

/* what copies_identical() reads of the second copy at a time */
#define PIECE_BYTES	(32U << 10)

/*
 * Do two copies of a node hold the same bytes over what the node has
 * written, and then a block of zeros (where the first copy's parse ended:
 * the second's would end there too)?  Copies are written from one buffer,
 * so a good second copy is byte-identical to the first: fsck then need not
 * parse and validate it again (that doubled its time with two copies).  Any
 * difference, anything but zeros after (an append only one copy has, a torn
 * one, a bucket's old contents: what follows decides how that copy parses),
 * or a read that fails, says no: the caller validates the copy itself.
 */
static bool copies_identical(struct bch_fs *c, const struct btree *node,
			     const struct bch_extent_ptr *a, const struct bch_extent_ptr *b,
			     unsigned sectors)
{
	struct bch_dev *ca = a->dev < BCH_SB_MEMBERS_MAX ? c->devs[a->dev] : NULL;
	struct bch_dev *cb = b->dev < BCH_SB_MEMBERS_MAX ? c->devs[b->dev] : NULL;
	size_t written = (size_t)sectors << BCH_SECTOR_SHIFT, bytes = written;
	bool same = false;

	if (!ca || !ca->bdev || !cb || !cb->bdev || !written || written > node_bytes(c))
		return false;
	int ahead = bch_prefetch_same(c, a, b, written);	/* compared when read ahead */
	if (ahead >= 0)
		return ahead;
	if (bytes < node_bytes(c))
		bytes += block_bytes(c);	/* the block after: zeros on both */
	if (bytes > node_bytes(c))
		return false;
	/*
	 * Unencrypted, the node's arena holds the first copy's bytes as read
	 * (keys are referenced in place): the second is compared with it, and
	 * only its block after must be zeros (that decides where it ends).
	 * Encrypted, the arena was decrypted in place: both are read.
	 */
	bool raw = !bch_fs_encrypted(c) && node->arena && node->arena_bytes >= written;
	if (raw) {
		/*
		 * the second copy a piece at a time, into the stack: no second
		 * node's worth of memory, and no heap block per node read (they
		 * came and went between the nodes' key arrays, and the holes
		 * they left stayed resident)
		 */
		size_t piece = PIECE_BYTES;
		char p[PIECE_BYTES] __attribute__((aligned(4096)));
		same = true;
		for (size_t at = 0; same && at < bytes; at += piece) {
			size_t n = bytes - at < piece ? bytes - at : piece;
			size_t cmp = at >= written ? 0 : written - at < n ? written - at : n;
			if (bch_dev_read(cb->bdev, p, n, ((uint64_t)b->offset << BCH_SECTOR_SHIFT) + at))
				same = false;
			else
				same = !memcmp((const char *)node->arena + at, p, cmp);
			for (size_t i = cmp; same && i < n; i++)
				same = !p[i];
		}
		return same;
	}
	/* filled by the reads: not cleared first (bch_dev_alloc_buf() would) */
	void *x = NULL, *y = NULL;
	if (!posix_memalign(&x, 4096, bytes) && !posix_memalign(&y, 4096, bytes) &&
	    !bch_dev_read(ca->bdev, x, bytes, (uint64_t)a->offset << BCH_SECTOR_SHIFT) &&
	    !bch_dev_read(cb->bdev, y, bytes, (uint64_t)b->offset << BCH_SECTOR_SHIFT)) {
		same = !memcmp(x, y, bytes);
		for (size_t i = written; same && i < bytes; i++)
			same = !((const char *)y)[i];
	}
	free(x);
	free(y);
	return same;
}

int bch_btree_node_read(struct bch_fs *c, unsigned id, unsigned level,
			const struct bch_bkey *ptr, struct btree **ret)
{
	const struct bch_btree_ptr *bp = bkey_val(ptr);
	unsigned nr = bch_btree_ptr_nr(ptr);
	struct btree *b = bch_btree_node_new(c, id, level);
	char err[200] = "", first_err[340] = "";
	int r = -BCH_ERR_btree_node_read;
	unsigned missing = 0;

	b->min_key = bp->min_key;
	b->max_key = ptr->p;
	for (unsigned i = 0; i < nr; i++) {
		node_reset_keys(b);
		r = read_one(c, b, &bp->ptrs[i], bp, err, sizeof(err));
		if (r == -BCH_ERR_device_missing)
			missing++;
		if (r && r != -BCH_ERR_device_missing)	/* a missing member's copy is not bad */
			b->bad_replicas |= 1U << i;
		if (!r) {
			b->nr_ptrs = nr;
			memcpy(b->ptrs, bp->ptrs, nr * sizeof(bp->ptrs[0]));
			/* fsck pass 3: the remaining copies must be good too */
			for (unsigned j = i + 1; c->opts.v[Opt_fsck] && !c->fsck_copies_checked && j < nr;
			     j++) {
				if (copies_identical(c, b, &bp->ptrs[i], &bp->ptrs[j], b->sectors_written))
					continue;	/* the same bytes as the copy just validated */
				struct btree *t = calloc(1, sizeof(*t));
				char e2[200];
				if (!t)
					abort();
				t->id = id;
				t->level = level;
				t->min_key = b->min_key;
				t->max_key = b->max_key;
				int r2 = read_one(c, t, &bp->ptrs[j], bp, e2, sizeof(e2));
				if (r2 && r2 != -BCH_ERR_device_missing)
					b->bad_replicas |= 1U << j;
				node_reset_keys(t);
				bch_btree_node_free_index(t);
				free(t);
			}
			break;
		}
		if (!first_err[0])
			snprintf(first_err, sizeof(first_err), "%s btree level %u node at %u:%" PRIu64
				 ": %s", bch_btree_id_name(id), level, bp->ptrs[i].dev,
				 (uint64_t)bp->ptrs[i].offset, err);
	}
	if (r) {
		/* every copy was on members not here: say so, not only the first's device */
		if (missing && missing == nr)
			snprintf(first_err + strlen(first_err), sizeof(first_err) - strlen(first_err),
				 " (no copy of this node on a member present)");
		/* b is in the cache's LRU since bch_btree_node_new(): take it out */
		bch_btree_cache_account(c, (long)bch_btree_node_bytes(b) - (long)sizeof(*b));
		bch_btree_node_forget(c, b);
		/*
		 * callers see two kinds: could not read it, or read something
		 * wrong; and no memory or a missing library, which are neither
		 */
		r = r == -ENOMEM || bch_err_is_dl(r) ? r
		  : r == -EIO || r == -BCH_ERR_device_short_io || r == -BCH_ERR_device_missing
		  ? -BCH_ERR_btree_node_read : -BCH_ERR_btree_node_bad;
		return bch_fs_err(c, r, "%s", first_err);
	}
	/*
	 * An interior node stays in the cache while every lookup passes
	 * through it, and a node appended to over its life holds old copies
	 * of its pointers in earlier bsets (1M files: the inodes root read
	 * 184 KiB for 106 KiB of live keys): its live keys into an arena of
	 * their own when a quarter of what was read is dead.  Leaves are read
	 * once by a scan and let go: they keep the bytes as read.
	 */
	if (b->level && b->u64s * 8 < b->arena_bytes / 4 * 3)
		bch_btree_node_pack_keys(b);
	*ret = b;
	return 0;
}

static int write_ptrs(struct bch_fs *c, struct btree *b, const void *buf, size_t bytes,
		      unsigned sector_off)
{
	for (unsigned i = 0; i < b->nr_ptrs; i++) {
		struct bch_dev *ca = c->devs[b->ptrs[i].dev];
		int ret;

		if (!ca || !ca->bdev)
			return bch_fs_err(c, -BCH_ERR_device_missing, "device %u missing",
					  b->ptrs[i].dev);
		ret = bch_dev_write(ca->bdev, buf, bytes,
				    ((uint64_t)b->ptrs[i].offset + sector_off) << BCH_SECTOR_SHIFT);
		if (ret)
			return bch_fs_err(c, ret, "%s: writing btree node: %s",
					  bch_dev_path(ca->bdev), bch_err_str(ret));
	}
	return 0;
}

static void pack_keys(__le64 *dst, const struct btree *b)
{
	for (unsigned i = 0; i < b->nr; i++) {	/* whole: packed keys are memory's only */
		struct bch_bkey_buf buf;
		const struct bch_bkey *k = bch_btree_key(b, i, &buf);
		memcpy(dst, k, bkey_bytes(k));
		dst += k->u64s;
	}
}

/*
 * The changed keys and the deletes' whiteouts (sorted:
 * bch_btree_node_append_sectors() did it) into dst of b->pending_u64s words.
 * Anything else than that count would write a bset that is not what the
 * journal says: refused.
 */
static int pack_pending(struct bch_fs *c, __le64 *dst, struct btree *b)
{
	size_t u64s = bch_btree_node_pending_pack(b, (uint64_t *)dst, b->pending_u64s);

	if (u64s == SIZE_MAX)
		return bch_fs_err(c, -EIO, "btree: changed keys past their count");
	return u64s == b->pending_u64s ? 0 : bch_fs_err(c, -EIO, "btree: changed keys miscounted");
}

int bch_btree_node_write_io(struct bch_fs *c, struct btree *b, bool whole)
{
	/* a node's bsets share the header's checksum type: an append keeps it */
	unsigned csum_type = bch_fs_encrypted(c) ? BCH_CSUM_chacha20_poly1305
			   : whole ? c->opts.v[Opt_metadata_checksum] : b->csum_type;
	int ret;

	if (whole) {
		size_t bytes = round_block(c, sizeof(struct bch_btree_node) + b->u64s * 8);
		struct bch_btree_node *n;

		if (bytes > node_bytes(c))
			return bch_fs_err(c, -EINVAL, "btree node content too big to write");
		n = bch_dev_alloc_buf(bytes);
		if (!n)
			return -ENOMEM;
		n->magic = BCH_BTREE_NODE_MAGIC;
		memcpy(n->fs_uuid, c->sb->uuid, BCH_UUID_SIZE);
		n->btree_id = b->id;
		n->level = b->level;
		n->csum_type = csum_type;
		n->seq = b->seq;
		n->min_key = b->min_key;
		n->max_key = b->max_key;
		n->keys.seq = b->seq;
		n->keys.journal_seq = b->journal_seq;
		n->keys.version = bch_fs_write_version(c);
		n->keys.u64s = b->u64s;
		pack_keys(n->keys._data, b);
		/* encrypted: the range too (authenticated as the first bset's header) */
		if (csum_type == BCH_CSUM_chacha20_poly1305)
			bch_crypt_node_range(c, true, b->seq, n->keys.journal_seq, &n->min_key,
					     2 * sizeof(n->min_key));
		if (csum_type == BCH_CSUM_chacha20_poly1305)
			ret = bch_crypt_bset_encrypt(c, b->seq, 0, n->keys.journal_seq, &n->magic,
						     sizeof(*n) - sizeof(n->csum), n->keys._data,
						     (size_t)b->u64s * 8, &n->csum);
		else
			ret = bch_checksum(csum_type, &n->magic,
					   sizeof(*n) - sizeof(n->csum) + b->u64s * 8, &n->csum);
		if (!ret)
			ret = write_ptrs(c, b, n, bytes, 0);
		free(n);
		if (!ret) {
			b->sectors_written = bytes >> BCH_SECTOR_SHIFT;
			b->csum_type = csum_type;
		}
	} else {
		size_t bytes = (size_t)bch_btree_node_append_sectors(c, b) << BCH_SECTOR_SHIFT;
		struct bch_btree_node_entry *e;

		if (((size_t)b->sectors_written << BCH_SECTOR_SHIFT) + bytes > node_bytes(c))
			return bch_fs_err(c, -EINVAL, "btree node append past its space");
		e = bch_dev_alloc_buf(bytes);
		if (!e)
			return -ENOMEM;
		e->keys.seq = b->seq;
		e->keys.journal_seq = b->journal_seq;
		e->keys.version = bch_fs_write_version(c);
		e->keys.u64s = b->pending_u64s;
		/*
		 * The oldest pending key's entry is the one the node's pin holds:
		 * with the span, a reader can tell whether the journal still holds
		 * every key of this bset (a torn append) or not (damage).
		 */
		if (b->pin.seq && b->pin.seq <= b->journal_seq &&
		    b->journal_seq - b->pin.seq <= UINT32_MAX) {
			e->keys.flags = BCH_BSET_SPAN;
			e->keys.journal_seq_span = b->journal_seq - b->pin.seq;
		} else if (!b->pin.seq) {
			e->keys.flags = BCH_BSET_HINTS;	/* children's hints only (update_hint()) */
		}
		ret = pack_pending(c, e->keys._data, b);
		if (ret)
			;
		else if (csum_type == BCH_CSUM_chacha20_poly1305)
			ret = bch_crypt_bset_encrypt(c, b->seq, (uint32_t)b->sectors_written << BCH_SECTOR_SHIFT,
						     e->keys.journal_seq, &e->keys, sizeof(e->keys),
						     e->keys._data, (size_t)b->pending_u64s * 8, &e->csum);
		else
			ret = bch_checksum(csum_type, &e->keys,
					   sizeof(e->keys) + b->pending_u64s * 8, &e->csum);
		if (!ret)
			ret = write_ptrs(c, b, e, bytes, b->sectors_written);
		free(e);
		if (!ret)
			b->sectors_written += bytes >> BCH_SECTOR_SHIFT;
	}
	if (ret)
		bch_fs_error(c, ret, false);	/* half written: never continue */
	else if (!b->arena_used || b->arena_used - bch_btree_node_live_bytes(b) > b->arena_used / 4)
		bch_btree_node_pack_keys(b);	/* a written node's keys lie in order */
	return ret;
}
