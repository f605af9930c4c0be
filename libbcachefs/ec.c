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
#include <stdlib.h>
#include <string.h>

#include <isa-l/erasure_code.h>

#include "dl.h"
#include "ec.h"
#include "errcode.h"

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
