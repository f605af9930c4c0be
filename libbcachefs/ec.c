// SPDX-License-Identifier: GPL-2.0
/*
 * ec.c - Reed-Solomon codec of stripes over ISA-L (see ec.h).
 *
 * Rebuilding: choose the first k blocks present (rows r[0..k-1] of the
 * encode matrix A), invert that k x k submatrix B; then data = B^-1 *
 * present.  A missing data block i is row i of B^-1; a missing parity block
 * j is A[j] * B^-1.  Those rows, one per missing block, are themselves an
 * "encode" matrix from the k present blocks, which ISA-L's ec_encode_data()
 * applies in one pass over the bytes.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <isa-l/erasure_code.h>

#include "alloc.h"
#include "bcachefs.h"
#include "bkey.h"
#include "blockdev.h"
#include "btree.h"
#include "checksum.h"
#include "dl.h"
#include "ec.h"
#include "ec_build.h"
#include "inode.h"
#include "errcode.h"
#include "extent_encode.h"
#include "extents.h"
#include "io.h"
#include "move.h"
#include "opts.h"
#include "replicas.h"
#include "super.h"

/* libisal, loaded with the first codec (dl.h).  x(member, function, version) */
#define ISAL_FUNCS()						\
	x(gen_cauchy1_matrix,	gf_gen_cauchy1_matrix,	NULL)	\
	x(invert_matrix,	gf_invert_matrix,	NULL)	\
	x(init_tables,		ec_init_tables,		NULL)	\
	x(encode_data,		ec_encode_data,		NULL)	\
	x(mul,			gf_mul,			NULL)

#define x(member, func, ver)	BCH_DL_MEMBER(member, func)
static struct isal_fns { ISAL_FUNCS() } isal;
#undef x
#define x(member, func, ver)	BCH_DL_SYM(struct isal_fns, member, func, ver)
static const struct bch_dl_sym isal_syms[] = { ISAL_FUNCS() };
#undef x

static struct bch_dl_lib isal_lib =
	BCH_DL_LIB(BCH_SONAME_ISAL, -BCH_ERR_dl_isal, isal_syms, &isal);

int bch_ec_codec_init(struct bch_ec_codec *codec, unsigned k, unsigned p)
{
	int err;

	memset(codec, 0, sizeof(*codec));
	if (k < 2 || k > BCH_EC_K_MAX || p < 1 || p > BCH_EC_P_MAX)
		return -EINVAL;
	if ((err = bch_dl_load(&isal_lib)))
		return err;

	codec->k = k;
	codec->p = p;
	codec->matrix = malloc((size_t)(k + p) * k);
	codec->enc_tables = malloc((size_t)32 * k * p);
	if (!codec->matrix || !codec->enc_tables) {
		bch_ec_codec_exit(codec);
		return -ENOMEM;
	}
	isal.gen_cauchy1_matrix(codec->matrix, k + p, k);
	isal.init_tables(k, p, codec->matrix + k * k, codec->enc_tables);
	return 0;
}

void bch_ec_codec_exit(struct bch_ec_codec *codec)
{
	free(codec->matrix);
	free(codec->enc_tables);
	memset(codec, 0, sizeof(*codec));
}

void bch_ec_encode(const struct bch_ec_codec *codec, size_t len, uint8_t **blocks)
{
	if (!len)
		return;
	isal.encode_data((int)len, codec->k, codec->p, codec->enc_tables,
		       blocks, blocks + codec->k);
}

int bch_ec_reconstruct(const struct bch_ec_codec *codec, size_t len,
		       uint8_t **blocks, uint32_t missing)
{
	unsigned k = codec->k, n = codec->k + codec->p;
	uint8_t b[BCH_EC_K_MAX * BCH_EC_K_MAX];
	uint8_t inv[BCH_EC_K_MAX * BCH_EC_K_MAX];
	uint8_t rows[BCH_EC_P_MAX * BCH_EC_K_MAX];
	uint8_t tables[32 * BCH_EC_K_MAX * BCH_EC_P_MAX];
	uint8_t *src[BCH_EC_K_MAX], *dst[BCH_EC_P_MAX];
	unsigned nr_src = 0, nr_miss = 0;

	if (missing >> n)
		return -EINVAL;
	if (!missing)
		return 0;
	if ((unsigned)__builtin_popcount(missing) > codec->p)
		return -EINVAL;

	for (unsigned i = 0; i < n && nr_src < k; i++) {
		if (missing & (1U << i))
			continue;
		memcpy(b + nr_src * k, codec->matrix + i * k, k);
		src[nr_src++] = blocks[i];
	}
	/* any k rows of a Cauchy-extended identity are invertible */
	if (isal.invert_matrix(b, inv, k))
		return -EINVAL;

	for (unsigned i = 0; i < n; i++) {
		uint8_t *row;

		if (!(missing & (1U << i)))
			continue;
		row = rows + nr_miss * k;
		if (i < k) {
			memcpy(row, inv + i * k, k);
		} else {
			const uint8_t *a = codec->matrix + i * k;

			for (unsigned c = 0; c < k; c++) {
				uint8_t s = 0;

				for (unsigned t = 0; t < k; t++)
					s ^= isal.mul(a[t], inv[t * k + c]);
				row[c] = s;
			}
		}
		dst[nr_miss++] = blocks[i];
	}

	if (len) {
		isal.init_tables(k, nr_miss, rows, tables);
		isal.encode_data((int)len, k, nr_miss, tables, src, dst);
	}
	return 0;
}

/* ------------------------------------------------------------ keys */

#define INVALID(...)	bch_errf(err, errlen, -BCH_ERR_bkey_invalid, __VA_ARGS__)

int bch_stripe_validate(const struct bch_bkey *k, char *err, size_t errlen)
{
	size_t vb = bkey_val_bytes(k);
	const struct bch_stripe *s;
	unsigned k_data;

	if (vb < sizeof(*s))
		return INVALID("stripe: bad size %zu", vb);
	s = bch_stripe_val(k);
	if (vb != sizeof(*s) + (size_t)s->nr_blocks * sizeof(s->blocks[0]))
		return INVALID("stripe: %u blocks in a value of %zu bytes", s->nr_blocks, vb);
	if (k->p.inode || !k->p.offset || k->p.offset > UINT32_MAX || k->p.snapshot)
		return INVALID("stripe key at a bad position");
	if (s->nr_parity < 1 || s->nr_parity > BCH_STRIPE_PARITY_MAX ||
	    s->nr_blocks > BCH_STRIPE_BLOCKS_MAX || s->nr_blocks < s->nr_parity + 2)
		return INVALID("stripe %" PRIu64 ": %u blocks, %u parity", (uint64_t)k->p.offset,
			       s->nr_blocks, s->nr_parity);
	k_data = bch_stripe_data_blocks(s);
	if (k_data > BCH_EC_K_MAX)
		return INVALID("stripe %" PRIu64 ": %u data blocks", (uint64_t)k->p.offset, k_data);
	if (s->algorithm != BCH_STRIPE_ALG_RS_CAUCHY)
		return INVALID("stripe %" PRIu64 ": unknown algorithm %u", (uint64_t)k->p.offset,
			       s->algorithm);
	if (s->csum_type != BCH_CSUM_none && s->csum_type != BCH_CSUM_crc32c &&
	    s->csum_type != BCH_CSUM_crc64 && s->csum_type != BCH_CSUM_xxhash64)
		return INVALID("stripe %" PRIu64 ": block checksum type %u", (uint64_t)k->p.offset,
			       s->csum_type);
	if (!s->block_sectors || s->block_sectors > BCH_STRIPE_BLOCK_MAX)
		return INVALID("stripe %" PRIu64 ": block of %u sectors", (uint64_t)k->p.offset,
			       (unsigned)s->block_sectors);
	if (s->flags || s->pad)
		return INVALID("stripe %" PRIu64 ": nonzero reserved fields", (uint64_t)k->p.offset);
	for (unsigned i = 0; i < s->nr_blocks; i++) {
		const struct bch_extent_ptr *p = &s->blocks[i].ptr;

		if (p->dev >= BCH_SB_MEMBERS_MAX || p->flags || p->stripe_block || p->stripe)
			return INVALID("stripe %" PRIu64 ": bad block %u", (uint64_t)k->p.offset, i);
		if (p->offset > UINT64_MAX - s->block_sectors)
			return INVALID("stripe %" PRIu64 ": block %u past the end of any device",
				       (uint64_t)k->p.offset, i);
		if (s->csum_type == BCH_CSUM_crc32c && s->blocks[i].csum >> 32)
			return INVALID("stripe %" PRIu64 ": block %u: crc32c wider than 32 bits",
				       (uint64_t)k->p.offset, i);
		for (unsigned j = 0; j < i; j++)
			if (s->blocks[j].ptr.dev == p->dev)
				return INVALID("stripe %" PRIu64 ": blocks %u and %u both on member %u",
					       (uint64_t)k->p.offset, j, i, p->dev);
	}
	return 0;
}

void bch_stripe_to_text(const struct bch_bkey *k, char *buf, size_t len)
{
	const struct bch_stripe *s = bch_stripe_val(k);
	int n;

	if (bkey_val_bytes(k) < sizeof(*s) ||
	    bkey_val_bytes(k) < sizeof(*s) + (size_t)s->nr_blocks * sizeof(s->blocks[0])) {
		snprintf(buf, len, " (bad size)");
		return;
	}
	n = snprintf(buf, len, " %u+%u block %u csum %u", bch_stripe_data_blocks(s), s->nr_parity,
		     (unsigned)s->block_sectors, s->csum_type);
	for (unsigned i = 0; i < s->nr_blocks && n >= 0 && (size_t)n < len; i++)
		n += snprintf(buf + n, len - n, " %s %u:%" PRIu64 " gen %u csum %016" PRIx64,
			      i < bch_stripe_data_blocks(s) ? "data" : "parity",
			      s->blocks[i].ptr.dev, (uint64_t)s->blocks[i].ptr.offset,
			      s->blocks[i].ptr.gen, (uint64_t)s->blocks[i].csum);
}

int bch_ec_ptrs_validate(const struct bch_extent_ptr *p, unsigned nr, char *err, size_t errlen)
{
	unsigned striped = 0;

	for (unsigned i = 0; i < nr; i++) {
		if (p[i].flags & ~BCH_EXTENT_PTR_FLAGS_KNOWN)
			return INVALID("pointer %u: unknown flags %#x", i, p[i].flags);
		if (!(p[i].flags & BCH_EXTENT_PTR_STRIPED)) {
			if (p[i].stripe_block || p[i].stripe)
				return INVALID("pointer padding");
			continue;
		}
		if (p[i].flags & BCH_EXTENT_PTR_CACHED)
			return INVALID("pointer %u: both cached and striped", i);
		if (!p[i].stripe || p[i].stripe_block >= BCH_EC_K_MAX)
			return INVALID("pointer %u: stripe %u block %u out of range", i,
				       (unsigned)p[i].stripe, p[i].stripe_block);
		if (++striped > 1)
			return INVALID("more than one striped pointer");
	}
	return 0;
}

static bool key_has_striped_ptr(const struct bch_bkey *k)
{
	const struct bch_extent_ptr *p;
	unsigned nr;

	if (k->type == BCH_BKEY_extent) {
		p = ((const struct bch_extent *)bkey_val(k))->ptrs;
		nr = bch_extent_nr_ptrs(k);
	} else if (k->type == BCH_BKEY_reflink_v) {
		p = ((const struct bch_reflink_v *)bkey_val(k))->ptrs;
		nr = (bkey_val_bytes(k) - sizeof(struct bch_reflink_v)) / sizeof(*p);
	} else {
		return false;
	}
	for (unsigned i = 0; i < nr; i++)
		if (p[i].flags & BCH_EXTENT_PTR_STRIPED)
			return true;
	return false;
}

int bch_ec_validate_fs(struct bch_fs *c, const struct bch_bkey *k, unsigned btree_id,
		       unsigned level, char *err, size_t errlen)
{
	if (level || (c->sb->features & BCH_FEATURE_ERASURE_CODE))
		return 0;
	if (k->type == BCH_BKEY_stripe)
		return INVALID("stripe key in a filesystem without the erasure_code feature");
	if (key_has_striped_ptr(k))
		return INVALID("striped pointer in a filesystem without the erasure_code feature");
	(void)btree_id;
	return 0;
}

bool bch_stripe_ptr_fits(const struct bch_stripe *s, const struct bch_extent_ptr *p,
			 unsigned sectors)
{
	const struct bch_extent_ptr *b;

	if (!(p->flags & BCH_EXTENT_PTR_STRIPED) || p->stripe_block >= bch_stripe_data_blocks(s))
		return false;
	b = &s->blocks[p->stripe_block].ptr;
	return b->dev == p->dev && b->gen == p->gen && p->offset >= b->offset &&
	       sectors <= s->block_sectors && p->offset - b->offset <= s->block_sectors - sectors;
}

/* ------------------------------------------------------- filesystem */

int bch_ec_init(struct bch_fs *c)
{
	return bch_btree_feature_init(c, BCH_FEATURE_ERASURE_CODE, BCH_BTREE_ID_stripes);
}

/* Read block i's sectors [off, off + len) into buf; false when it cannot be had. */
static bool read_block(struct bch_fs *c, const struct bch_stripe *s, unsigned i,
		       uint64_t off, size_t len, void *buf)
{
	const struct bch_extent_ptr *b = &s->blocks[i].ptr;
	struct bch_dev *ca = b->dev < c->nr_devs ? c->devs[b->dev] : NULL;

	if (!ca || !ca->bdev || !bch_alloc_ptr_live(c, b))
		return false;
	return !bch_dev_read(ca->bdev, buf, len, ((uint64_t)b->offset << BCH_SECTOR_SHIFT) + off);
}

/* The next mask above m with the same number of bits (Gosper's hack); 0 past 32 bits. */
static uint64_t next_same_popcount(uint64_t m)
{
	uint64_t lo = m & -m, hi = m + lo;

	return hi | (((m ^ hi) >> 2) / lo);
}

/*
 * Rebuild with the blocks in miss left out (into scratch buffers), copy
 * the target's bytes to enc and verify.
 */
static int try_rebuild(const struct bch_ec_codec *codec, size_t len, uint8_t **have,
		       uint8_t **scratch, uint32_t miss, unsigned target, void *enc,
		       int (*verify)(void *ctx), void *ctx)
{
	uint8_t *ptrs[BCH_EC_BLOCKS_MAX];
	unsigned used = 0;
	int r;

	for (unsigned i = 0; i < codec->k + codec->p; i++)
		ptrs[i] = miss & (1U << i) ? scratch[used++] : have[i];
	if ((r = bch_ec_reconstruct(codec, len, ptrs, miss)))
		return r;
	memcpy(enc, ptrs[target], len);
	return verify(ctx);
}

int bch_ec_rebuild_ptr(struct bch_fs *c, const struct bch_extent_ptr *p, unsigned sectors,
		       void *enc, int (*verify)(void *ctx), void *ctx)
{
	struct bch_bkey *sk = NULL;
	const struct bch_stripe *s;
	struct bch_ec_codec codec = { 0 };
	uint8_t *have[BCH_EC_BLOCKS_MAX] = { 0 }, *scratch[BCH_EC_P_MAX] = { 0 };
	size_t len = (size_t)sectors << BCH_SECTOR_SHIFT;
	uint32_t gone = 0;
	unsigned n, target = p->stripe_block;
	uint64_t off;
	int r = -EIO;

	if (!c->roots->r[BCH_BTREE_ID_stripes].key ||
	    bch_btree_lookup(c, BCH_BTREE_ID_stripes, POS(0, p->stripe, 0), &sk) ||
	    sk->type != BCH_BKEY_stripe || bch_stripe_validate(sk, NULL, 0))
		goto out;
	s = bch_stripe_val(sk);
	if (!bch_stripe_ptr_fits(s, p, sectors))
		goto out;
	if ((r = bch_ec_codec_init(&codec, bch_stripe_data_blocks(s), s->nr_parity)))
		goto out;
	n = s->nr_blocks;
	off = (p->offset - s->blocks[target].ptr.offset) << BCH_SECTOR_SHIFT;

	r = -ENOMEM;
	for (unsigned i = 0; i < n; i++)
		if (!(have[i] = bch_dev_alloc_buf(len)))
			goto out;
	for (unsigned i = 0; i < codec.p; i++)
		if (!(scratch[i] = bch_dev_alloc_buf(len)))
			goto out;

	gone = 1U << target;
	for (unsigned i = 0; i < n; i++)
		if (i != target && !read_block(c, s, i, off, len, have[i]))
			gone |= 1U << i;

	/* the blocks known gone, then each choice of more to leave out, fewest first */
	r = -EIO;
	for (unsigned extra = 0; __builtin_popcount(gone) + extra <= codec.p; extra++) {
		unsigned want = __builtin_popcount(gone) + extra;

		for (uint64_t m = (1ULL << want) - 1; m < (1ULL << n); m = next_same_popcount(m)) {
			if ((m & gone) != gone)
				continue;
			int v = try_rebuild(&codec, len, have, scratch, (uint32_t)m, target, enc,
					    verify, ctx);
			if (v != -BCH_ERR_csum_mismatch) {
				r = v;
				goto out;
			}
		}
	}
out:
	for (unsigned i = 0; i < BCH_EC_BLOCKS_MAX; i++)
		free(have[i]);
	for (unsigned i = 0; i < BCH_EC_P_MAX; i++)
		free(scratch[i]);
	bch_ec_codec_exit(&codec);
	free(sk);
	return r;
}

/* ------------------------------------------------------ bucket state */

int bch_ec_mark_stripe(struct bch_fs *c, const struct bch_bkey *k)
{
	const struct bch_stripe *s;
	int r = 0;

	if (k->type != BCH_BKEY_stripe || bch_stripe_validate(k, NULL, 0))
		return 0;
	s = bch_stripe_val(k);
	for (unsigned i = bch_stripe_data_blocks(s); i < s->nr_blocks && !r; i++)
		r = bch_alloc_mark_data(c, &s->blocks[i].ptr, s->block_sectors, s->block_sectors);
	return r;
}

int bch_ec_mark_all(struct bch_fs *c)
{
	struct btree_iter it;
	const struct bch_bkey *k;
	int err = 0, r = 0;

	if (!c->roots->r[BCH_BTREE_ID_stripes].key)
		return 0;
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_stripes, POS_MIN, POS_MAX);
	while (!r && (k = bch_btree_iter_next(&it, &err))) {
		r = bch_ec_mark_stripe(c, k);
		if (r && c->opts.v[Opt_fsck] && r != -ENOMEM) {
			c->err_msg[0] = 0;	/* fsck reports and repairs it (fsck_ec.c) */
			r = 0;
		}
	}
	bch_btree_iter_exit(&it);
	if (err && c->opts.v[Opt_fsck] && err != -ENOMEM && !bch_err_is_dl(err)) {
		c->err_msg[0] = 0;
		err = 0;
	}
	return r ? r : err;
}

bool bch_ec_key_readable(struct bch_fs *c, const struct bch_bkey *k)
{
	const struct bch_extent_ptr *ptrs;
	struct bch_bkey *sk;
	unsigned nr, sectors, present = 0;
	bool ok = false;

	if (k->type == BCH_BKEY_extent) {
		const struct bch_extent *e = bkey_val(k);
		ptrs = e->ptrs;
		sectors = e->crc.compressed_sectors;
		nr = bch_extent_nr_ptrs(k);
	} else if (k->type == BCH_BKEY_reflink_v) {
		const struct bch_reflink_v *v = bkey_val(k);
		ptrs = v->ptrs;
		sectors = v->crc.compressed_sectors;
		nr = (bkey_val_bytes(k) - sizeof(*v)) / sizeof(*ptrs);
	} else {
		return false;
	}
	for (unsigned i = 0; i < nr && !ok; i++) {
		if (!(ptrs[i].flags & BCH_EXTENT_PTR_STRIPED) || !c->roots->r[BCH_BTREE_ID_stripes].key)
			continue;
		if (bch_btree_lookup(c, BCH_BTREE_ID_stripes, POS(0, ptrs[i].stripe, 0), &sk)) {
			c->err_msg[0] = 0;	/* no stripe: judged by its pointer */
			continue;
		}
		const struct bch_stripe *s = bch_stripe_val(sk);
		if (sk->type == BCH_BKEY_stripe && !bch_stripe_validate(sk, NULL, 0) &&
		    bch_stripe_ptr_fits(s, &ptrs[i], sectors)) {
			for (unsigned b = 0; b < s->nr_blocks; b++) {
				unsigned d = s->blocks[b].ptr.dev;
				present += d < c->nr_devs && c->devs[d] && c->devs[d]->bdev;
			}
			ok = present >= bch_stripe_data_blocks(s);
		}
		free(sk);
	}
	return ok;
}

/* ------------------------------------------------------------ builder */

/* p from data_replicas; 0: no erasure coding here. */
unsigned ec_parity(struct bch_fs *c)
{
	uint64_t r = c->opts.v[Opt_data_replicas];

	/* inode_ec: some file may have it on whatever the filesystem's option */
	if ((!c->opts.v[Opt_erasure_code] && !(c->sb->features & BCH_FEATURE_INODE_EC)) || r < 2)
		return 0;
	return r - 1 > BCH_STRIPE_PARITY_MAX ? BCH_STRIPE_PARITY_MAX : r - 1;
}

/* Read-write members present that may take data; their number. */
unsigned ec_members(struct bch_fs *c, unsigned *devs)
{
	unsigned n = 0;

	for (unsigned d = 0; d < c->nr_devs && n < BCH_STRIPE_BLOCKS_MAX; d++) {
		struct bch_member *m = c->devs[d] ? bch_sb_member(c->sb, d) : NULL;

		if (m && c->devs[d]->bdev && m->state == BCH_MEMBER_STATE_rw && m->durability &&
		    bch_alloc_bucket_sectors(c, d))
			devs[n++] = d;
	}
	return n;
}

bool ec_candidate(const struct bch_bkey *k, unsigned block_sectors)
{
	const struct bch_extent *e = bkey_val(k);
	bool dirty = false;

	if (k->type != BCH_BKEY_extent || e->crc.compressed_sectors > block_sectors)
		return false;
	for (unsigned i = 0; i < bch_extent_nr_ptrs(k); i++) {
		if (e->ptrs[i].flags & BCH_EXTENT_PTR_STRIPED)
			return false;
		dirty |= !(e->ptrs[i].flags & BCH_EXTENT_PTR_CACHED);
	}
	return dirty;
}

unsigned ec_new_key_u64s(void)
{
	return BCH_BKEY_U64s + (sizeof(struct bch_extent) + sizeof(struct bch_extent_ptr)) / 8;
}

/*
 * Pack candidates, in key order from file position *pos on, each into the
 * least filled of the k data blocks (so a few extents still make a wide
 * stripe), until the least filled cannot take the next.  Then b->k is the
 * number of blocks used and b->block_sectors the fullest one's sectors: the
 * parity is no larger than the data it protects.
 */
static int gather(struct build *b, struct bch_bpos *pos)
{
	struct bch_fs *c = b->c;
	struct btree_iter it;
	const struct bch_bkey *k;
	size_t cap = 0, u64s_max = bch_trans_max_u64s(c) / 2;
	size_t u64s = BCH_BKEY_U64s + (sizeof(struct bch_stripe) +
			BCH_STRIPE_BLOCKS_MAX * sizeof(struct bch_stripe_block)) / 8 + 1;
	unsigned fillv[BCH_EC_K_MAX] = { 0 }, used = 0, most = 0;
	int err = 0;

	struct bch_inode_ec_memo memo = { 0 };	/* the file's erasure_code (inode.h) */

	bch_btree_iter_init(&it, c, BCH_BTREE_ID_extents, *pos, POS_MAX);
	while ((k = bch_btree_iter_next(&it, &err))) {
		if (!ec_candidate(k, b->block_sectors) || !bch_inode_ec_memo_on(c, &memo, k->p.inode) ||
		    (b->ip && ec_ip_claims(c, b->ip, k))) {
			*pos = bpos_successor(k->p);
			continue;
		}
		unsigned cs = ((const struct bch_extent *)bkey_val(k))->crc.compressed_sectors, j = 0;
		for (unsigned i = 1; i < b->k; i++)
			if (fillv[i] < fillv[j])
				j = i;
		if (fillv[j] + cs > b->block_sectors || u64s + ec_new_key_u64s() + 1 > u64s_max) {
			b->full = true;	/* the next stripe starts with it */
			break;
		}
		*pos = bpos_successor(k->p);
		if (b->nr == cap) {
			cap = cap ? 2 * cap : 64;
			struct cand *n = realloc(b->cands, cap * sizeof(*n));
			if (!n) {
				err = -ENOMEM;
				break;
			}
			b->cands = n;
		}
		b->cands[b->nr++] = (struct cand) { .k = bch_bkey_dup(k), .block = j, .off = fillv[j] };
		fillv[j] += cs;
		u64s += ec_new_key_u64s() + 1;
	}
	bch_btree_iter_exit(&it);
	if (err)
		return err;
	/* ties go to the lowest index: the blocks used are 0..used-1 */
	for (unsigned i = 0; i < b->k; i++)
		if (fillv[i]) {
			used = i + 1;
			most = fillv[i] > most ? fillv[i] : most;
		}
	if (b->nr >= 2) {	/* fewer than two: nothing to build, the rest stays replicated */
		b->k = used;
		b->block_sectors = most;
	}
	return 0;
}

/* Each candidate's encoded bytes from a good copy into its block. */
static void fill(struct build *b, struct bch_move_stats *st)
{
	for (size_t i = 0; i < b->nr; i++) {
		struct cand *x = &b->cands[i];
		const struct bch_extent *e = bkey_val(x->k);
		uint8_t *dst = b->bufs[x->block] + ((size_t)x->off << BCH_SECTOR_SHIFT);
		void *dec = malloc((size_t)e->crc.uncompressed_sectors << BCH_SECTOR_SHIFT);

		for (unsigned j = 0; dec && j < bch_extent_nr_ptrs(x->k) && !x->ok; j++) {
			if (e->ptrs[j].flags & BCH_EXTENT_PTR_CACHED)
				continue;
			/* with dec given, dst keeps the bytes as stored (ciphertext) */
			if (!bch_extent_read_copy(b->c, x->k, j, dst, dec)) {
				x->ok = true;
				if (st)
					st->sectors_read += e->crc.compressed_sectors;
			}
		}
		free(dec);
		if (!x->ok) {
			memset(dst, 0, (size_t)e->crc.compressed_sectors << BCH_SECTOR_SHIFT);
			if (st) {
				st->keys_no_good_copy++;
				snprintf(st->last_problem, sizeof(st->last_problem),
					 "inode %" PRIu64 " sectors %" PRIu64 "..%" PRIu64
					 ": no good copy to stripe", (uint64_t)x->k->p.inode,
					 bch_extent_start(x->k), (uint64_t)x->k->p.offset);
			}
		}
	}
}

/* Allocate, checksum and write the k + p blocks; flush their members. */
static int write_blocks(struct build *b, struct bch_stripe *sv)
{
	struct bch_fs *c = b->c;
	size_t bytes = (size_t)b->block_sectors << BCH_SECTOR_SHIFT;
	int r;

	for (unsigned i = 0; i < b->n; i++) {
		struct bch_csum cs;

		if ((r = bch_alloc_data_on(c, b->devs[i], b->block_sectors, &b->blocks[i])))
			return r;
		b->nr_alloced++;
		if ((r = bch_checksum(BCH_CSUM_crc32c, b->bufs[i], bytes, &cs)))
			return r;
		sv->blocks[i].ptr = b->blocks[i];
		sv->blocks[i].csum = cs.lo;
		r = bch_dev_write(c->devs[b->devs[i]]->bdev, b->bufs[i], bytes,
				  (uint64_t)b->blocks[i].offset << BCH_SECTOR_SHIFT);
		if (r)
			return bch_fs_err(c, r, "stripe block on device %u: %s", b->devs[i], bch_err_str(r));
	}
	for (unsigned i = 0; i < b->n; i++)
		if ((r = bch_dev_flush(c->devs[b->devs[i]]->bdev)))
			return r;
	return 0;
}

int ec_next_stripe_index(struct bch_fs *c, uint64_t *idx)
{
	bool found;
	int r = bch_btree_last_offset(c, BCH_BTREE_ID_stripes, POS(0, UINT32_MAX, 0), idx, &found);

	if (r)
		return r;
	*idx += 1;	/* stripe indices start at 1 */
	return *idx > UINT32_MAX ? bch_fs_err(c, -BCH_ERR_no_space, "no stripe index left") : 0;
}

/* The stripe key and the striped extents, in one transaction; then the buckets. */
int ec_build_commit(struct build *b, struct bch_bkey *sk, struct bch_move_stats *st)
{
	struct bch_fs *c = b->c;
	struct btree_trans *t;
	uint64_t share[BCH_STRIPE_BLOCKS_MAX] = { 0 };
	bool *in = calloc(b->nr ? b->nr : 1, sizeof(*in));
	int r;

	if (!in)
		return -ENOMEM;
	if ((r = bch_trans_init(c, &t))) {
		free(in);
		return r;
	}
	r = bch_trans_update(t, BCH_BTREE_ID_stripes, sk);
	for (size_t i = 0; i < b->nr && !r; i++) {
		struct cand *x = &b->cands[i];
		struct bch_bkey *now = NULL;

		if (!x->ok)
			continue;
		/* only an extent still as it was read (compare-and-swap) */
		if (bch_btree_lookup(c, BCH_BTREE_ID_extents, x->k->p, &now) ||
		    bkey_bytes(now) != bkey_bytes(x->k) || memcmp(now, x->k, bkey_bytes(x->k))) {
			c->err_msg[0] = 0;
			free(now);
			if (st)
				st->keys_raced++;
			continue;
		}
		free(now);
		const struct bch_extent *oe = bkey_val(x->k);
		struct bch_bkey *nk = bch_bkey_alloc(BCH_BKEY_extent, x->k->p,
						     sizeof(struct bch_extent) + sizeof(struct bch_extent_ptr));
		struct bch_extent *ne = bkey_val(nk);

		nk->size = x->k->size;
		nk->version = x->k->version;
		ne->crc = oe->crc;
		ne->ptrs[0] = b->blocks[x->block];
		ne->ptrs[0].offset += x->off;
		ne->ptrs[0].flags = BCH_EXTENT_PTR_STRIPED;
		ne->ptrs[0].stripe_block = x->block;
		ne->ptrs[0].stripe = (uint32_t)sk->p.offset;
		r = bch_trans_update(t, BCH_BTREE_ID_extents, nk);
		free(nk);
		in[i] = true;
	}
	if (!r)
		r = bch_trans_commit(t, 0);
	bch_trans_exit(t);
	if (r) {
		free(in);
		return r;
	}
	/* the old copies come off their buckets; the data blocks keep what their extents use */
	for (size_t i = 0; i < b->nr; i++) {
		if (!in[i])
			continue;
		const struct bch_extent *oe = bkey_val(b->cands[i].k);
		unsigned sh = bch_extent_disk_sectors(b->cands[i].k);

		/* in place: the first copy is the striped one, where it lies */
		for (unsigned j = b->inplace; j < bch_extent_nr_ptrs(b->cands[i].k); j++)
			bch_alloc_data_account(c, &oe->ptrs[j], oe->crc.compressed_sectors, -(int64_t)sh);
		share[b->cands[i].block] += sh;
		if (st) {
			st->keys_moved++;
			st->sectors_moved += b->cands[i].k->size;
		}
	}
	for (unsigned i = 0; i < b->k && !b->inplace; i++)
		bch_alloc_data_account(c, &b->blocks[i], b->block_sectors,
				       (int64_t)share[i] - b->block_sectors);
	b->nr_alloced = 0;	/* now the stripe's */
	c->space_gen++;
	free(in);
	return 0;
}

/*
 * Block i's buffer of bytes, kept by the filesystem between builder steps
 * (c->ec_bufs): a fresh mapping for every block of every stripe cost a
 * third of a mounted build's time in page faults and zeroing.  At most
 * BCH_STRIPE_BLOCKS_MAX buffers of the largest block asked for, until
 * bch_ec_bufs_free().  Its contents are whatever the last step left.
 */
uint8_t *ec_block_buf(struct bch_fs *c, unsigned i, size_t bytes)
{
	_Static_assert(sizeof(c->ec_bufs) / sizeof(c->ec_bufs[0]) == BCH_STRIPE_BLOCKS_MAX,
		       "one buffer per stripe block");
	if (c->ec_bufs_bytes < bytes) {
		bch_ec_bufs_free(c);
		c->ec_bufs_bytes = bytes;
	}
	if (!c->ec_bufs[i])
		c->ec_bufs[i] = bch_dev_alloc_buf(c->ec_bufs_bytes);
	return c->ec_bufs[i];
}

void bch_ec_bufs_free(struct bch_fs *c)
{
	for (unsigned i = 0; i < BCH_STRIPE_BLOCKS_MAX; i++) {
		free(c->ec_bufs[i]);
		c->ec_bufs[i] = NULL;
	}
	c->ec_bufs_bytes = 0;
}

static void build_free(struct build *b)
{
	for (unsigned i = 0; i < b->nr_alloced; i++)
		bch_alloc_data_free(b->c, &b->blocks[i], 1, b->block_sectors);
	for (size_t i = 0; i < b->nr; i++)
		free(b->cands[i].k);
	free(b->cands);
}

/* One stripe from the candidates at *pos on: 1 built, 0 nothing to build, < 0 error. */
int ec_build_one(struct bch_fs *c, unsigned p, const unsigned *members, unsigned nr_members,
		 bool finish, const struct inplace *ip, struct bch_bpos *pos,
		 struct bch_move_stats *st, uint64_t *built)
{
	struct build b = { .c = c, .p = p, .ip = ip };
	struct bch_ec_codec codec = { 0 };
	struct bch_bkey *sk = NULL;
	uint64_t idx;
	int r;

	idx = 1;
	if (c->roots->r[BCH_BTREE_ID_stripes].key && (r = ec_next_stripe_index(c, &idx)))
		return r;
	/* members rotate with the stripe index, so blocks spread over all of them */
	b.k = nr_members - p > BCH_EC_K_MAX ? BCH_EC_K_MAX : nr_members - p;
	b.block_sectors = UINT32_MAX;
	for (unsigned i = 0; i < b.k + p; i++) {
		b.devs[i] = members[(idx + i) % nr_members];
		unsigned bs = bch_alloc_bucket_sectors(c, b.devs[i]);
		if (bs < b.block_sectors)
			b.block_sectors = bs;
	}
	if (b.block_sectors > BCH_STRIPE_BLOCK_MAX)
		b.block_sectors = BCH_STRIPE_BLOCK_MAX;
	if ((r = gather(&b, pos)))
		goto out;
	if (!b.full) {		/* what is left waits: the hint counts it */
		c->ec_waiting = 0;
		for (size_t i = 0; i < b.nr; i++)
			c->ec_waiting += ((const struct bch_extent *)bkey_val(b.cands[i].k))->crc.compressed_sectors;
		c->ec_waiting_known = true;
	}
	if (b.nr < 2 || (!b.full && !finish))
		goto out;
	/* the feature bit and the stripes btree come with the first stripe */
	if ((r = bch_ec_init(c)))
		goto out;
	/* the parity members follow the data blocks actually filled */
	for (unsigned i = 0; i < p; i++)
		b.devs[b.k + i] = members[(idx + (nr_members - p > BCH_EC_K_MAX ? BCH_EC_K_MAX
							       : nr_members - p) + i) % nr_members];
	b.n = b.k + p;
	r = -ENOMEM;
	for (unsigned i = 0; i < b.n; i++) {
		size_t bytes = (size_t)b.block_sectors << BCH_SECTOR_SHIFT;
		if (!(b.bufs[i] = ec_block_buf(c, i, bytes)))
			goto out;
		memset(b.bufs[i], 0, bytes);	/* fill() leaves the gaps as they are */
	}
	fill(&b, st);
	bool any = false;
	for (size_t i = 0; i < b.nr; i++)
		any |= b.cands[i].ok;
	if (!any) {
		r = 1;		/* none readable: counted; go on after them */
		goto out;
	}
	if ((r = bch_ec_codec_init(&codec, b.k, p)))
		goto out;
	bch_ec_encode(&codec, (size_t)b.block_sectors << BCH_SECTOR_SHIFT, b.bufs);

	sk = bch_bkey_alloc(BCH_BKEY_stripe, POS(0, idx, 0),
			    sizeof(struct bch_stripe) + b.n * sizeof(struct bch_stripe_block));
	struct bch_stripe *sv = bkey_val(sk);
	sv->block_sectors = b.block_sectors;
	sv->nr_blocks = b.n;
	sv->nr_parity = p;
	sv->algorithm = BCH_STRIPE_ALG_RS_CAUCHY;
	sv->csum_type = BCH_CSUM_crc32c;
	if ((r = write_blocks(&b, sv)))
		goto out;
	if (st)
		st->sectors_written += (uint64_t)b.n * b.block_sectors;
	if ((r = ec_build_commit(&b, sk, st)))
		goto out;
	*built += (uint64_t)b.k * b.block_sectors;
	r = 1;
out:
	bch_ec_codec_exit(&codec);
	free(sk);
	build_free(&b);
	return r;
}

int bch_ec_step(struct bch_fs *c, uint64_t budget, bool finish, struct bch_move_stats *st)
{
	unsigned members[BCH_STRIPE_BLOCKS_MAX], nr, p = ec_parity(c);
	struct bch_bpos pos = POS_MIN;
	uint64_t built = 0;
	int r = 0;

	if (!p || c->read_only || !c->roots->r[BCH_BTREE_ID_extents].key)
		return 0;
	nr = ec_members(c, members);
	if (nr < p + 2) {	/* bch_ec_pending() still counts the work */
		if (st)
			snprintf(st->last_problem, sizeof(st->last_problem),
				 "erasure_code: stripes of %u parity blocks (data_replicas %u) need %u "
				 "read-write members, %u can take them: the data stays replicated",
				 p, p + 1, p + 2, nr);
		return 0;
	}
	/*
	 * The background walks the extents only when a full stripe may be
	 * waiting: what the last walk left plus what was written since (bounds
	 * the daemon's cost per write wake when nothing is to be done)
	 */
	uint64_t stripe = (uint64_t)(nr - p > BCH_EC_K_MAX ? BCH_EC_K_MAX : nr - p) *
			  bch_alloc_bucket_sectors(c, members[0]);
	if (!finish && c->ec_waiting_known && c->ec_waiting < stripe)
		return 0;
	/*
	 * Stripes in place first (candidate buckets as data blocks); then the
	 * rest is rewritten into new blocks: in the background only what the
	 * in-place builder will never take, at the end (finish) all of it
	 */
	struct inplace *ip = calloc(1, sizeof(*ip));
	if (!ip)
		return -ENOMEM;
	if (finish)
		bch_alloc_ec_close(c);	/* the partly filled candidate buckets too */
	r = ec_ip_scan(c, members, nr, ip);
	if (!r)
		r = ec_ip_step(c, ip, p, members, nr, budget, st, &built);
	while (!r && built < budget &&
	       (r = ec_build_one(c, p, members, nr, finish, finish ? NULL : ip, &pos, st, &built)) == 1)
		r = 0;
	if (r >= 0 && built >= budget)
		c->ec_waiting_known = false;	/* more may be ready: the next step looks */
	else if (r >= 0 && c->ec_waiting_known)
		c->ec_waiting += ip->left;	/* full buckets waiting for members to pair with */
	ec_ip_free(ip);
	free(ip);
	if (r < 0)
		return r;
	return built ? 1 : 0;
}

int bch_ec_pending(struct bch_fs *c, uint64_t *sectors)
{
	struct btree_iter it;
	const struct bch_bkey *k;
	int err = 0;

	*sectors = 0;
	if (!ec_parity(c) || !c->roots->r[BCH_BTREE_ID_extents].key)
		return 0;
	uint64_t nr = 0;
	struct bch_inode_ec_memo memo = { 0 };
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_extents, POS_MIN, POS_MAX);
	while ((k = bch_btree_iter_next(&it, &err)))
		if (ec_candidate(k, BCH_STRIPE_BLOCK_MAX) && bch_inode_ec_memo_on(c, &memo, k->p.inode)) {
			*sectors += k->size;
			nr++;
		}
	bch_btree_iter_exit(&it);
	if (nr < 2)
		*sectors = 0;	/* a lone extent keeps its replicas: no stripe of one */
	return err;
}

/* ------------------------------------------------------ stripe check */

struct chk {
	struct bch_fs			*c;
	const struct bch_stripe		*s;
	struct bch_ec_codec		codec;
	unsigned			n, k;
	size_t				len;
	uint8_t				*buf[BCH_EC_BLOCKS_MAX];	/* the blocks as read */
	uint8_t				*fix[BCH_EC_BLOCKS_MAX];	/* rebuilt or recomputed */
};

/* Block i's bytes as the stripe's checksum names them? (none: not known, true) */
static int block_csum_ok(const struct chk *x, unsigned i, const uint8_t *b, bool *ok)
{
	struct bch_csum want = { .lo = x->s->blocks[i].csum };
	int r;

	*ok = true;
	if (x->s->csum_type == BCH_CSUM_none)
		return 0;
	r = bch_csum_verify(x->s->csum_type, b, x->len, want);
	if (r == -BCH_ERR_csum_mismatch) {
		*ok = false;
		r = 0;
	}
	return r;
}

/*
 * Rebuild the data blocks in bad (with the blocks in gone not to be read)
 * into x->fix[]: the first choice of blocks to leave out, fewest first,
 * whose rebuilt data blocks all match their checksums.  Returns 0 (found),
 * -EIO (none), or a library's error.
 */
static int chk_rebuild_data(struct chk *x, uint32_t gone, uint32_t bad)
{
	uint8_t *ptrs[BCH_EC_BLOCKS_MAX];
	unsigned n = x->n, p = x->codec.p;
	uint32_t want_data = bad & ((1U << x->k) - 1);

	for (unsigned extra = 0; __builtin_popcount(gone) + extra <= p; extra++) {
		unsigned w = __builtin_popcount(gone) + extra;

		for (uint64_t m = (1ULL << w) - 1; m < (1ULL << n); m = next_same_popcount(m)) {
			bool all = true;
			int r;

			if ((m & gone) != gone)
				continue;
			for (unsigned i = 0; i < n; i++)
				ptrs[i] = m & (1U << i) ? x->fix[i] : x->buf[i];
			if ((r = bch_ec_reconstruct(&x->codec, x->len, ptrs, (uint32_t)m)))
				return r;
			for (unsigned i = 0; i < x->k && all; i++) {
				if (!(want_data & (1U << i)))
					continue;
				if ((r = block_csum_ok(x, i, x->fix[i], &all)))
					return r;
			}
			if (all)
				return 0;
		}
	}
	return -EIO;
}

/* Write the blocks in mask from x->fix[] where they lie, then flush their members. */
static int chk_write(struct chk *x, uint32_t mask, uint32_t *written)
{
	struct bch_fs *c = x->c;
	int r = 0;

	for (unsigned i = 0; i < x->n; i++) {
		const struct bch_extent_ptr *b = &x->s->blocks[i].ptr;

		if (!(mask & (1U << i)))
			continue;
		/* a block whose bucket was reused is someone else's now: never written */
		if (!bch_alloc_ptr_live(c, b))
			continue;
		bch_data_reuse_bump(c);	/* rewritten in place (io.h) */
		r = bch_dev_write(c->devs[b->dev]->bdev, x->fix[i], x->len,
				  (uint64_t)b->offset << BCH_SECTOR_SHIFT);
		if (r)
			continue;	/* left bad: reported */
		*written |= 1U << i;
	}
	for (unsigned i = 0; i < x->n; i++)
		if ((*written & (1U << i)) &&
		    (r = bch_dev_flush(c->devs[x->s->blocks[i].ptr.dev]->bdev)))
			*written &= ~(1U << i);
	return 0;
}

/* The stripe key with the parity checksums of the data's parity (x->fix of mask). */
static int chk_put_csums(struct chk *x, const struct bch_bkey *sk, uint32_t mask)
{
	struct bch_bkey *n = bch_bkey_dup(sk);
	struct btree_trans *t;
	int r;

	if (!n)
		return -ENOMEM;
	struct bch_stripe *ns = bkey_val(n);
	for (unsigned i = x->k; i < x->n; i++) {
		struct bch_csum cs;

		if (!(mask & (1U << i)))
			continue;
		if ((r = bch_checksum(x->s->csum_type, x->fix[i], x->len, &cs)))
			goto out;
		ns->blocks[i].csum = cs.lo;
	}
	if (!(r = bch_trans_init(x->c, &t))) {
		r = bch_trans_update(t, BCH_BTREE_ID_stripes, n);
		if (!r)
			r = bch_trans_commit(t, 0);
		bch_trans_exit(t);
	}
out:
	free(n);
	return r;
}

static void chk_free(struct chk *x)
{
	for (unsigned i = 0; i < BCH_EC_BLOCKS_MAX; i++) {
		free(x->buf[i]);
		free(x->fix[i]);
	}
	bch_ec_codec_exit(&x->codec);
}

int bch_ec_stripe_check(struct bch_fs *c, const struct bch_bkey *sk, uint32_t repair,
			struct bch_ec_check *res)
{
	struct chk x = { .c = c };
	uint32_t gone = 0, bad = 0, csum_wrong = 0;
	int r;

	memset(res, 0, sizeof(*res));
	if (sk->type != BCH_BKEY_stripe || bch_stripe_validate(sk, NULL, 0))
		return 0;	/* not a stripe to check: fsck's other checks judge the key */
	x.s = bch_stripe_val(sk);
	x.n = x.s->nr_blocks;
	x.k = bch_stripe_data_blocks(x.s);
	x.len = (size_t)x.s->block_sectors << BCH_SECTOR_SHIFT;
	res->nr_blocks = x.n;
	res->nr_data = x.k;
	if ((r = bch_ec_codec_init(&x.codec, x.k, x.s->nr_parity)))
		goto out;
	r = -ENOMEM;
	for (unsigned i = 0; i < x.n; i++)
		if (!(x.buf[i] = bch_dev_alloc_buf(x.len)) || !(x.fix[i] = bch_dev_alloc_buf(x.len)))
			goto out;

	/* 1. every block that can be read: read, against its checksum */
	for (unsigned i = 0; i < x.n; i++) {
		const struct bch_extent_ptr *b = &x.s->blocks[i].ptr;
		struct bch_dev *ca = b->dev < c->nr_devs ? c->devs[b->dev] : NULL;
		bool ok;

		if (bch_dev_missing(c, b->dev)) {
			gone |= 1U << i;
			res->skipped |= 1U << i;
			continue;
		}
		if (!ca || !ca->bdev || !bch_alloc_ptr_live(c, b)) {
			/*
			 * no member (fsck_ec.c's stripe_block_bad), or its bucket
			 * reused (a data block whose extents all went: normal until
			 * stripe compaction): not judged, never written
			 */
			gone |= 1U << i;
			res->skipped |= 1U << i;
			res->stale |= 1U << i;
			continue;
		}
		res->bytes_read += x.len;
		if (bch_dev_read(ca->bdev, x.buf[i], x.len, (uint64_t)b->offset << BCH_SECTOR_SHIFT)) {
			gone |= 1U << i;
			res->bad |= 1U << i;
			continue;
		}
		if ((r = block_csum_ok(&x, i, x.buf[i], &ok)))
			goto out;
		if (!ok) {
			bad |= 1U << i;
			res->bad |= 1U << i;
			bch_dev_error_inc(c, b->dev, BCH_DEV_ERROR_checksum);
		}
	}

	/* 2. the data blocks: as read when good, else rebuilt from the others */
	uint32_t lost = (gone | bad) & ((1U << x.k) - 1);
	if (__builtin_popcount(gone | bad) > (int)x.codec.p && !bad) {
		/* more blocks not there than parity, none found bad: nothing to compare */
		res->unchecked = true;
		r = 0;
		goto out;
	}
	if (lost) {
		r = chk_rebuild_data(&x, gone | bad, lost);
		if (r == -EIO) {
			res->unrecoverable = true;
			r = 0;
			goto out;
		}
		if (r)
			goto out;
	}
	for (unsigned i = 0; i < x.k; i++)
		if (!(lost & (1U << i)))
			memcpy(x.fix[i], x.buf[i], x.len);

	/* 3. the parity of the data, against the parity blocks */
	bch_ec_encode(&x.codec, x.len, x.fix);
	for (unsigned i = x.k; i < x.n; i++) {
		struct bch_csum cs;

		if (res->skipped & (1U << i))
			continue;	/* on a missing member, or reused: not judged */
		if (!(res->bad & (1U << i)) && memcmp(x.buf[i], x.fix[i], x.len))
			res->parity_wrong |= 1U << i;
		if (x.s->csum_type == BCH_CSUM_none)
			continue;
		if ((r = bch_checksum(x.s->csum_type, x.fix[i], x.len, &cs)))
			goto out;
		if (cs.lo != x.s->blocks[i].csum)
			csum_wrong |= 1U << i;	/* the key's checksum is not the data's parity's */
	}
	/*
	 * Without block checksums a parity that differs may as well mean a
	 * data block that rotted: which one is not known, nothing is rewritten
	 */
	if (x.s->csum_type == BCH_CSUM_none && res->parity_wrong) {
		res->unrecoverable = true;
		r = 0;
		goto out;
	}
	res->repairable = res->bad | res->parity_wrong;
	r = 0;
	repair &= res->repairable;
	if (!repair || c->read_only)
		goto out;

	/* 4. rewrite: the same bytes the key names (data), the data's parity (parity) */
	if ((r = chk_write(&x, repair, &res->repaired)))
		goto out;
	if (csum_wrong & res->repaired) {
		r = chk_put_csums(&x, sk, csum_wrong & res->repaired);
		if (r)
			res->repaired &= ~csum_wrong;
	}
out:
	chk_free(&x);
	return r;
}
