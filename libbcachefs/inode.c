// SPDX-License-Identifier: GPL-2.0
/*
 * inode.c - inode keys (see inode.h).
 */
#include <dirent.h>
#include <errno.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "bcachefs.h"
#include "btree.h"
#include "snapshot.h"
#include "errcode.h"
#include "inode.h"
#include "str_hash.h"
#include "super.h"

/*
 * SOURCE_DATE_EPOCH is read once per process: nothing here changes the
 * environment, and a getenv per timestamp (a walk of environ under the
 * FUSE daemon's lock) cost 0.5% of its CPU.
 */
static pthread_once_t epoch_once = PTHREAD_ONCE_INIT;
static bool epoch_fixed;
static int64_t epoch_ns;

static void epoch_read(void)
{
	const char *e = getenv("SOURCE_DATE_EPOCH");
	char *end;

	if (e && *e) {
		long long v = strtoll(e, &end, 10);
		if (!*end) {
			epoch_ns = v * 1000000000LL;
			epoch_fixed = true;
		}
	}
}

bool bch_time_fixed(void)
{
	pthread_once(&epoch_once, epoch_read);
	return epoch_fixed;
}

int64_t bch_now_ns(void)
{
	struct timespec ts;

	pthread_once(&epoch_once, epoch_read);
	if (epoch_fixed)
		return epoch_ns;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int bch_inode_get(struct bch_fs *c, uint64_t inum, struct bch_inode *inode)
{
	struct bch_bkey_buf buf;	/* no malloc: most requests read an inode or more */
	const struct bch_bkey *k;
	int r = bch_vlookup_buf(c, BCH_BTREE_ID_inodes, POS(0, inum, 0), &buf, &k);

	if (r == -BCH_ERR_key_not_found)
		return -ENOENT;
	if (r)
		return r;
	if (k->type != BCH_BKEY_inode)
		return -ENOENT;
	memcpy(inode, bkey_val(k), sizeof(*inode));
	return 0;
}

int bch_inode_update(struct btree_trans *t, uint64_t inum, const struct bch_inode *inode)
{
	/* on the stack: the transaction copies it */
	uint64_t buf[BCH_BKEY_U64s + (sizeof(*inode) + 7) / 8] = { 0 };
	struct bch_bkey *k = (struct bch_bkey *)buf;

	k->u64s = sizeof(buf) / 8;
	k->type = BCH_BKEY_inode;
	k->p = POS(0, inum, 0);
	memcpy(bkey_val(k), inode, sizeof(*inode));
	return bch_trans_update(t, BCH_BTREE_ID_inodes, k);
}

int bch_inode_delete(struct btree_trans *t, uint64_t inum)
{
	struct bch_bkey k = { .u64s = BCH_BKEY_U64s, .type = BCH_BKEY_deleted, .p = POS(0, inum, 0) };

	return bch_trans_update(t, BCH_BTREE_ID_inodes, &k);
}

int bch_inode_alloc_num(struct bch_fs *c, uint64_t *inum)
{
	if (!c->inum_next) {
		uint64_t last;
		bool found;
		int r = bch_btree_last_offset(c, BCH_BTREE_ID_inodes, POS(0, UINT64_MAX, 0), &last, &found);
		if (r)
			return r;
		c->inum_next = found ? last + 1 : BCH_FIRST_INO;
		if (c->inum_next < BCH_FIRST_INO)
			c->inum_next = BCH_FIRST_INO;
	}
	/* file handles keep the low 48 bits for the number (snapshot.h) */
	uint64_t limit = c->opts.v[Opt_inodes_32bit] ? UINT32_MAX : BCH_HANDLE_INUM_MASK;
	if (c->inum_next > limit)
		return -ENOSPC;
	*inum = c->inum_next++;
	return 0;
}

void bch_inode_init(struct bch_fs *c, struct bch_inode *inode, uint64_t inum, mode_t mode,
		    uid_t uid, gid_t gid, dev_t rdev, const struct bch_inode *parent)
{
	int64_t now = bch_now_ns();

	memset(inode, 0, sizeof(*inode));
	inode->mode = mode;
	inode->uid = uid;
	inode->gid = gid;
	inode->nlink = S_ISDIR(mode) ? 2 : 1;
	inode->rdev = (S_ISCHR(mode) || S_ISBLK(mode)) ? rdev : 0;
	inode->atime = inode->mtime = inode->ctime = inode->btime = now;
	/* the key is secret, so a seed derived from the number is as good as a random one */
	inode->hash_seed = bch_siphash24(c->sb->str_hash_key, &inum, sizeof(inum));
	if (parent) {
		/* options are inherited by new children */
		inode->opt_compression = parent->opt_compression;
		inode->opt_data_checksum = parent->opt_data_checksum;
		inode->opt_data_replicas = parent->opt_data_replicas;
		inode->opt_background_compression = parent->opt_background_compression;
		inode->opt_foreground_target = parent->opt_foreground_target;
		inode->opt_background_target = parent->opt_background_target;
		inode->opt_promote_target = parent->opt_promote_target;
		/* as ext4 and tmpfs: these file flags pass to new children (never i or a) */
		inode->flags = parent->flags & (BCH_INODE_NODUMP | BCH_INODE_NOATIME | BCH_INODE_SYNC |
						BCH_INODE_OPT_EC_MASK);
	}
}

unsigned bch_mode_to_dtype(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG:	return DT_REG;
	case S_IFDIR:	return DT_DIR;
	case S_IFLNK:	return DT_LNK;
	case S_IFCHR:	return DT_CHR;
	case S_IFBLK:	return DT_BLK;
	case S_IFIFO:	return DT_FIFO;
	case S_IFSOCK:	return DT_SOCK;
	}
	return DT_UNKNOWN;
}

/* The stored form: the option's value + 1, 0 when the inode inherits it. */
unsigned bch_inode_opt_raw(const struct bch_inode *i, enum bch_opt_id id)
{
	switch (id) {
	case Opt_foreground_target:	return i->opt_foreground_target;
	case Opt_background_target:	return i->opt_background_target;
	case Opt_promote_target:	return i->opt_promote_target;
	case Opt_compression:		return i->opt_compression;
	case Opt_background_compression: return i->opt_background_compression;
	case Opt_data_checksum:		return i->opt_data_checksum;
	case Opt_data_replicas:		return i->opt_data_replicas;
	case Opt_erasure_code:		return (i->flags & BCH_INODE_OPT_EC_MASK) >> BCH_INODE_OPT_EC_SHIFT;
	default:			return 0;
	}
}

const enum bch_opt_id bch_inode_opts[] = {
	Opt_foreground_target, Opt_background_target, Opt_promote_target,
	Opt_compression, Opt_background_compression, Opt_data_checksum, Opt_data_replicas,
	Opt_erasure_code,
};
const unsigned bch_inode_opts_nr = sizeof(bch_inode_opts) / sizeof(bch_inode_opts[0]);

void bch_inode_opt_raw_set(struct bch_inode *i, enum bch_opt_id id, unsigned raw)
{
	switch (id) {
	case Opt_foreground_target:	i->opt_foreground_target = raw; break;
	case Opt_background_target:	i->opt_background_target = raw; break;
	case Opt_promote_target:	i->opt_promote_target = raw; break;
	case Opt_compression:		i->opt_compression = raw; break;
	case Opt_background_compression: i->opt_background_compression = raw; break;
	case Opt_data_checksum:		i->opt_data_checksum = raw; break;
	case Opt_data_replicas:		i->opt_data_replicas = raw; break;
	case Opt_erasure_code:
		i->flags = (i->flags & ~BCH_INODE_OPT_EC_MASK) |
			   ((raw << BCH_INODE_OPT_EC_SHIFT) & BCH_INODE_OPT_EC_MASK);
		break;
	default:			break;
	}
}

uint64_t bch_inode_opt_feature(enum bch_opt_id id)
{
	return id == Opt_erasure_code ? BCH_FEATURE_INODE_EC : 0;
}

int bch_inode_feature_enable(struct bch_fs *c, uint64_t feature)
{
	if (!feature || (c->sb->features & feature) == feature)
		return 0;
	uint64_t old = c->sb->features;
	c->sb->features |= feature;
	int r = bch_write_super(c);
	if (r)
		c->sb->features = old;
	return r;
}

bool bch_inode_ec_effective(struct bch_fs *c, const struct bch_inode *i)
{
	unsigned raw = i ? bch_inode_opt_raw(i, Opt_erasure_code) : 0;

	return raw ? raw - 1 : c->opts.v[Opt_erasure_code] != 0;
}

bool bch_ec_replicas_fit(struct bch_fs *c, unsigned replicas)
{
	unsigned fs = c->opts.v[Opt_data_replicas] ? c->opts.v[Opt_data_replicas] : 1;

	return replicas <= fs;
}

bool bch_inode_ec_stripes(struct bch_fs *c, const struct bch_inode *i)
{
	if (!bch_inode_ec_effective(c, i))
		return false;
	return !i || !i->opt_data_replicas || bch_ec_replicas_fit(c, i->opt_data_replicas - 1);
}

bool bch_inode_ec_memo_on(struct bch_fs *c, struct bch_inode_ec_memo *m, uint64_t inum)
{
	if (!(c->sb->features & BCH_FEATURE_INODE_EC) && !c->opts.v[Opt_erasure_code])
		return false;	/* no inode has a value of its own, and the filesystem's is off */
	if (!m->valid || m->inum != inum) {
		struct bch_inode i;
		m->inum = inum;
		m->valid = true;
		/* an extent whose inode is gone is freed soon: the filesystem's value */
		m->on = bch_inode_ec_stripes(c, bch_inode_get(c, inum, &i) ? NULL : &i);
	}
	return m->on;
}

enum bch_inode_flags_state bch_inode_flags_check(uint64_t features, const struct bch_inode *i)
{
	if ((i->flags & ~BCH_INODE_FLAGS_KNOWN) ||
	    (i->flags & BCH_INODE_OPT_EC_MASK) == BCH_INODE_OPT_EC_MASK)
		return BCH_INODE_FLAGS_UNKNOWN;
	if (((i->flags & BCH_INODE_FILE_FLAGS) || i->project) && !(features & BCH_FEATURE_INODE_FLAGS))
		return BCH_INODE_FLAGS_NO_FEATURE;
	if ((i->flags & BCH_INODE_OPT_EC_MASK) && !(features & BCH_FEATURE_INODE_EC))
		return BCH_INODE_FLAGS_NO_FEATURE;
	return BCH_INODE_FLAGS_OK;
}

uint32_t bch_inode_flags_unknown(const struct bch_inode *i)
{
	uint32_t bad = i->flags & ~BCH_INODE_FLAGS_KNOWN;

	if ((i->flags & BCH_INODE_OPT_EC_MASK) == BCH_INODE_OPT_EC_MASK)
		bad |= BCH_INODE_OPT_EC_MASK;
	return bad;
}

void bch_inode_flags_clear_no_feature(uint64_t features, struct bch_inode *i)
{
	if (!(features & BCH_FEATURE_INODE_FLAGS)) {
		i->flags &= ~BCH_INODE_FILE_FLAGS;
		i->project = 0;
	}
	if (!(features & BCH_FEATURE_INODE_EC))
		i->flags &= ~BCH_INODE_OPT_EC_MASK;
}

/* One table for the FS_*_FL mapping and the names (lsattr's long names). */
static const struct {
	uint32_t	bch;
	unsigned	fs;
	const char	*name;
} file_flags[] = {
	{ BCH_INODE_SYNC,	FS_SYNC_FL,		"sync" },
	{ BCH_INODE_IMMUTABLE,	FS_IMMUTABLE_FL,	"immutable" },
	{ BCH_INODE_APPEND,	FS_APPEND_FL,		"append" },
	{ BCH_INODE_NODUMP,	FS_NODUMP_FL,		"nodump" },
	{ BCH_INODE_NOATIME,	FS_NOATIME_FL,		"noatime" },
};

unsigned bch_inode_flags_to_fs(uint32_t flags)
{
	unsigned fs = 0;

	for (size_t n = 0; n < sizeof(file_flags) / sizeof(file_flags[0]); n++)
		if (flags & file_flags[n].bch)
			fs |= file_flags[n].fs;
	return fs;
}

int bch_inode_flags_from_fs(unsigned fs_flags, uint32_t *flags)
{
	*flags = 0;
	for (size_t n = 0; n < sizeof(file_flags) / sizeof(file_flags[0]); n++)
		if (fs_flags & file_flags[n].fs) {
			*flags |= file_flags[n].bch;
			fs_flags &= ~file_flags[n].fs;
		}
	return fs_flags ? -EOPNOTSUPP : 0;
}

void bch_inode_flags_to_text(uint32_t flags, char *buf, size_t len)
{
	size_t at = 0;

	if (len)
		buf[0] = 0;
	for (size_t n = 0; n < sizeof(file_flags) / sizeof(file_flags[0]) && at < len; n++)
		if (flags & file_flags[n].bch)
			at += snprintf(buf + at, len - at, "%s%s", at ? "," : "", file_flags[n].name);
}

int bch_inode_validate_fs(struct bch_fs *c, const struct bch_bkey *k, char *err, size_t errlen)
{
	if (k->type != BCH_BKEY_inode || c->opts.v[Opt_fsck])
		return 0;	/* fsck reports such inodes itself (fsck_inodes.c) */
	const struct bch_inode *i = bkey_val(k);
	switch (bch_inode_flags_check(c->sb->features, i)) {
	case BCH_INODE_FLAGS_UNKNOWN:
		return bch_errf(err, errlen, -BCH_ERR_bkey_invalid, "inode: unknown flags %x",
				(unsigned)i->flags);
	case BCH_INODE_FLAGS_NO_FEATURE:
		if ((i->flags & BCH_INODE_OPT_EC_MASK) && !(c->sb->features & BCH_FEATURE_INODE_EC))
			return bch_errf(err, errlen, -BCH_ERR_bkey_invalid, "inode: an erasure_code "
					"option on a filesystem without the inode_ec feature");
		return bch_errf(err, errlen, -BCH_ERR_bkey_invalid, "inode: file flags or project ID "
				"on a filesystem without the inode_flags feature");
	default:
		return 0;
	}
}
