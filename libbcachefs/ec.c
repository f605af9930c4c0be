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
#include "dl.h"
#include "ec.h"
#include "errcode.h"
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
	int r;

	if (c->roots->r[BCH_BTREE_ID_stripes].key && (c->sb->features & BCH_FEATURE_ERASURE_CODE))
		return 0;
	if (c->read_only)
		return -BCH_ERR_fs_read_only;
	/* the bit before the first key: a crash between leaves an empty btree */
	if (!(c->sb->features & BCH_FEATURE_ERASURE_CODE)) {
		c->sb->features |= BCH_FEATURE_ERASURE_CODE;
		if ((r = bch_write_super(c)))
			return r;
	}
	if (!c->roots->r[BCH_BTREE_ID_stripes].key &&
	    (r = bch_btree_create_root(c, BCH_BTREE_ID_stripes)))
		return r;
	return 0;
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
