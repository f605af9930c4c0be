// SPDX-License-Identifier: GPL-2.0
/*
 * fs.c - open and close of a filesystem (see fs.h), and journal replay.
 *
 * Recovery order: superblocks -> journal scan (ring positions, entries from
 * last_seq) -> roots (clean record, or the newest entry) -> replay of every
 * key entry in sequence order into the nodes in memory -> bucket state
 * rebuilt from every node pointer (interior nodes) -> journal restarts after the newest
 * entry -> (read-write: start_rw()) first entry durable, clean record
 * removed, overfull nodes split.  A clean read-only open may run start_rw()
 * later (bch_fs_read_write()), after opening its members again for writing
 * and finding their superblocks as they were read.
 * A journal with no room even after reclaim (full on disk, left by older
 * versions) is emptied when it must write: replayed nodes written back,
 * roots put in the clean record, ring reused (spill_to_clean).
 *
 * Degraded (members missing, c->devs_missing): after the roots are known,
 * degraded_check() refuses unless what remains holds a copy of everything;
 * the missing members' pointers are then skipped copies everywhere.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>
#include <uuid/uuid.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "alloc_btree.h"
#include "blockdev.h"
#include "btree.h"
#include "crypt.h"
#include "ec.h"
#include "ec_move.h"
#include "checksum.h"
#include "errcode.h"
#include "extents.h"
#include "fs.h"
#include "fs_ops.h"
#include "journal.h"
#include "replicas.h"
#include "snapshot.h"
#include "super.h"

struct replay_list {
	struct bch_jset	**j;
	size_t		nr, cap;
};

static int collect_jset(struct bch_fs *c, struct bch_jset *j, void *priv)
{
	struct replay_list *l = priv;
	size_t bytes = sizeof(*j) + (size_t)j->u64s * 8;

	(void)c;
	if (l->nr == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 64;
		l->j = realloc(l->j, l->cap * sizeof(*l->j));
		if (!l->j)
			return -ENOMEM;
	}
	l->j[l->nr] = malloc(bytes);
	if (!l->j[l->nr])
		return -ENOMEM;
	memcpy(l->j[l->nr++], j, bytes);
	return 0;
}

static void free_replay_list(struct replay_list *l)
{
	for (size_t i = 0; i < l->nr; i++)
		free(l->j[i]);
	free(l->j);
}

/*
 * fsck: a key whose node cannot be read is kept for after pass 3, which
 * rebuilds that btree from what can be read and then applies these (in
 * replay order), so a damaged node costs what it held, not what the journal
 * held for it.  Interior keys are dropped: the rebuild makes its own.
 */
static bool defer_key(struct bch_fs *c, int r, unsigned id, unsigned level,
		      const struct bch_bkey *k)
{
	if (!c->opts.v[Opt_fsck] || (r != -BCH_ERR_btree_node_bad && r != -BCH_ERR_btree_node_read))
		return false;
	c->err_msg[0] = 0;
	if (level)
		return true;
	struct bch_deferred_key *n = realloc(c->replay_deferred,
					     (c->nr_replay_deferred + 1) * sizeof(*n));
	if (!n)
		abort();
	c->replay_deferred = n;
	n[c->nr_replay_deferred++] = (struct bch_deferred_key) { id, level, bch_bkey_dup(k) };
	return true;
}

/*
 * Replay, one level at a time from the top: interior updates first (in
 * sequence order), so that when keys of a level are replayed, the levels
 * above already have their final shape.  Replaying a leaf key through an
 * interior pointer that a later entry replaces would load a node that is no
 * longer part of the tree, and the key would be lost with it.
 */
static int replay_level(struct bch_fs *c, struct replay_list *l, unsigned level)
{
	char err[160];

	for (size_t i = 0; i < l->nr; i++) {
		struct bch_jset *j = l->j[i];
		struct bch_jset_entry *e;

		for_each_jset_entry(e, j) {
			if (e->type != BCH_JSET_ENTRY_btree_keys || e->level != level)
				continue;
			if (e->btree_id >= BCH_BTREE_ID_NR)
				return bch_fs_err(c, -BCH_ERR_journal_bad,
						  "journal entry %" PRIu64 ": unknown btree %u",
						  (uint64_t)j->seq, e->btree_id);
			const __le64 *p = e->_data, *end = e->_data + e->u64s;
			while (p < end) {
				const struct bch_bkey *k = (const void *)p;
				if (end - p < (ptrdiff_t)BCH_BKEY_U64s || k->u64s > end - p ||
				    bch_bkey_validate_fs(c, k, e->btree_id, e->level, err, sizeof(err)))
					return bch_fs_err(c, -BCH_ERR_journal_bad,
							  "journal entry %" PRIu64 ": invalid key: %s",
							  (uint64_t)j->seq, err);
				int r = bch_btree_replay_key(c, e->btree_id, e->level, k, j->seq);
				if (r && defer_key(c, r, e->btree_id, e->level, k))
					r = 0;
				if (r)
					return r;
				p += k->u64s;
			}
		}
	}
	return 0;
}

#define BTREE_MAX_DEPTH	16

static int replay(struct bch_fs *c, struct replay_list *l)
{
	for (int level = BTREE_MAX_DEPTH - 1; level >= 0; level--) {
		int r = replay_level(c, l, level);
		if (r)
			return r;
	}
	return 0;
}

static int mark_ptr_key(struct bch_fs *c, const struct bch_bkey *k)
{
	const struct bch_btree_ptr *bp = bkey_val(k);

	for (unsigned i = 0; i < bch_btree_ptr_nr(k); i++) {
		int r = bch_alloc_mark_ptr(c, &bp->ptrs[i], c->sb->btree_node_size, BCH_DATA_btree);
		if (r)
			return r;
	}
	return 0;
}

/*
 * Bucket state from the pointers in interior nodes (leaves need not be
 * read).  Opened for fsck, an unreadable interior node is skipped: fsck
 * reports it and rebuilds that btree.
 */
static int mark_subtree(struct bch_fs *c, unsigned id, unsigned level, const struct bch_bkey *ptr)
{
	struct btree *b;
	int r = mark_ptr_key(c, ptr);
	/*
	 * -o very_degraded, read-only: a node with no copy left costs what is
	 * under it, not the open (read-write, the space of what is under it
	 * would not be counted, and could be handed out again)
	 */
	bool skip_bad = c->opts.v[Opt_fsck] || (c->opts.v[Opt_very_degraded] && c->read_only);

	if (r && skip_bad && r != -ENOMEM) {
		c->err_msg[0] = 0;	/* a pointer fsck will find bad: not followed */
		c->alloc_recount_partial = true;
		return 0;
	}
	if (r || !level)
		return r;
	r = bch_btree_node_get(c, id, level, ptr, &b);
	if (r) {
		if (skip_bad && r != -ENOMEM && !bch_err_is_dl(r)) {
			c->err_msg[0] = 0;
			c->alloc_recount_partial = true;
			return 0;
		}
		return r;
	}
	unsigned nr = b->nr;
	struct bch_bkey **kids = malloc((nr ? nr : 1) * sizeof(*kids));
	if (!kids)
		abort();
	for (unsigned i = 0; i < nr; i++)
		kids[i] = bch_btree_key_dup(b, i);
	bch_btree_node_put(c, b);
	for (unsigned i = 0; i < nr && !r; i++)
		r = mark_subtree(c, id, level - 1, kids[i]);
	for (unsigned i = 0; i < nr; i++)
		free(kids[i]);
	free(kids);
	return r;
}

static void fs_free(struct bch_fs *c)
{
	free(c->journal_gaps);
	for (size_t i = 0; i < c->nr_replay_deferred; i++)
		free(c->replay_deferred[i].k);
	free(c->replay_deferred);
	free(c->extents_lost);
	bch_ec_bufs_free(c);
	bch_btree_cache_exit(c);
	bch_fs_journal_exit(c);
	bch_alloc_btree_exit(c);
	bch_fs_alloc_exit(c);
	bch_replicas_exit(c);
	bch_crypt_close(c);
	bch_snapshots_exit(c);
	if (c->roots) {
		for (unsigned i = 0; i < BCH_BTREE_ID_NR; i++)
			free(c->roots->r[i].key);
		free(c->roots);
	}
	for (unsigned i = 0; i < BCH_SB_MEMBERS_MAX; i++) {
		struct bch_dev *ca = c->devs[i];
		if (!ca)
			continue;
		if (ca->bdev)
			bch_dev_close(ca->bdev);
		free(ca->disk_sb);
		free(ca);
	}
	free(c->sb);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* "member 1 (uuid ...)" for each missing member, joined by ", ", then "was"/"were". */
static const char *missing_text(struct bch_fs *c, char *buf, size_t len)
{
	char one[160];
	int n = 0;

	buf[0] = 0;
	for (unsigned i = 0; i < BCH_SB_MEMBERS_MAX && n < (int)len; i++)
		if (bch_dev_missing(c, i))
			n += snprintf(buf + n, len - n, "%s%s", n ? ", " : "",
				      bch_sb_member_text(c->sb, i, one, sizeof(one)));
	if (n < (int)len)
		snprintf(buf + n, len - n, " %s", c->devs_missing & (c->devs_missing - 1) ? "were" : "was");
	return buf;
}

static int open_devices(struct bch_fs *c, char * const *paths, unsigned nr)
{
	struct bch_sb *newest = NULL;
	unsigned flags = c->read_only ? BCH_DEV_RDONLY : 0;
	int r;

	for (unsigned i = 0; i < nr; i++) {
		struct bch_blockdev *bd;
		struct bch_sb *sb;

		if ((r = bch_dev_open(paths[i], flags, &bd)))
			return bch_fs_err(c, r, "%s: %s", paths[i], bch_err_str(r));
		if ((r = bch_sb_read(bd, &sb, NULL))) {
			bch_dev_close(bd);
			/* one of several: fsck -y rewrites a member's from another member's */
			if (r == -BCH_ERR_sb_not_found && nr > 1)
				return bch_fs_err(c, r, "%s: no valid superblock copy (every copy "
						  "damaged); if it is a member, `bcachefs fsck -y` "
						  "rewrites them from another member's", paths[i]);
			return bch_fs_err(c, r, "%s: %s", paths[i], bch_err_str(r));
		}
		if (newest && memcmp(sb->uuid, newest->uuid, BCH_UUID_SIZE)) {
			free(sb);
			bch_dev_close(bd);
			return bch_fs_err(c, -BCH_ERR_sb_mismatch, "%s: not a device of the same filesystem",
					  paths[i]);
		}
		if (c->devs[sb->dev_idx]) {
			unsigned idx = sb->dev_idx;

			free(sb);
			bch_dev_close(bd);
			return bch_fs_err(c, -BCH_ERR_sb_mismatch, "%s: device %u given twice", paths[i],
					  idx);
		}
		struct bch_dev *ca = calloc(1, sizeof(*ca));
		if (!ca)
			return -ENOMEM;
		ca->fs = c;
		ca->idx = sb->dev_idx;
		ca->bdev = bd;
		ca->disk_sb = sb;
		c->devs[sb->dev_idx] = ca;
		if (!newest || sb->seq > newest->seq)
			newest = sb;
	}
	/*
	 * The superblock's buffers hold what it uses (whole sectors, as a
	 * write writes), not the room it may grow into (64 KiB each):
	 * bch_sb_field_resize() grows c->sb to that when a field needs it, and
	 * the members' copies are only compared and read from.
	 */
	size_t bytes = (bch_sb_bytes(newest) + BCH_SECTOR_SIZE - 1) & ~(size_t)(BCH_SECTOR_SIZE - 1);
	c->sb = calloc(1, bytes);
	if (!c->sb)
		return -ENOMEM;
	memcpy(c->sb, newest, bch_sb_bytes(newest));
	c->sb_bytes = bytes;
	for (unsigned i = 0; i < BCH_SB_MEMBERS_MAX; i++) {
		struct bch_dev *ca = c->devs[i];
		struct bch_sb *small = ca ? realloc(ca->disk_sb, bch_sb_bytes(ca->disk_sb)) : NULL;
		if (small)
			ca->disk_sb = small;
	}
	c->nr_devs = c->sb->nr_devices;
	for (unsigned i = 0; i < c->nr_devs; i++) {
		struct bch_member *m = bch_sb_member(c->sb, i);
		if (m && bch_member_exists(m)) {
			if (!c->devs[i]) {
				c->devs_missing |= 1ULL << i;
				continue;
			}
			/* a removed member whose slot a new device took since: not this member */
			const struct bch_member *own = bch_sb_member(c->devs[i]->disk_sb, i);
			if (!own || memcmp(own->uuid, m->uuid, sizeof(m->uuid))) {
				char a[37], b[37];
				uuid_unparse(own ? own->uuid : m->uuid, a);
				uuid_unparse(m->uuid, b);
				return bch_fs_err(c, -BCH_ERR_sb_mismatch,
						  "%s: was member %u (uuid %s), which was removed: member %u "
						  "is now uuid %s", bch_dev_path(c->devs[i]->bdev), i, a, i, b);
			}
			c->devs[i]->mi = *m;
		} else if (c->devs[i]) {
			return bch_fs_err(c, -BCH_ERR_sb_mismatch,
					  "%s: device %u is not a member (removed from this filesystem, or added by a device add that did not finish; "
					  "leave it out, or `bcachefs device remove` it to wipe it)",
					  bch_dev_path(c->devs[i]->bdev), i);
		}
	}
	/* a member dropped from the top lowers nr_devices: its device is no member either */
	for (unsigned i = c->nr_devs; i < BCH_SB_MEMBERS_MAX; i++)
		if (c->devs[i])
			return bch_fs_err(c, -BCH_ERR_sb_mismatch,
					  "%s: device %u is not a member (removed from this filesystem, or added by a device add that did not finish; "
					  "leave it out, or `bcachefs device remove` it to wipe it)",
					  bch_dev_path(c->devs[i]->bdev), i);
	return 0;
}

/* Members missing and no -o degraded: refused, with no more said (journal-only opens). */
static int missing_refusal(struct bch_fs *c)
{
	char who[320];

	if (!c->devs_missing || c->opts.v[Opt_degraded] || c->opts.v[Opt_very_degraded])
		return 0;
	return bch_fs_err(c, -BCH_ERR_device_missing,
			  "%s not given: give every device, or open with -o degraded "
			  "to do without %s", missing_text(c, who, sizeof(who)),
			  c->devs_missing & (c->devs_missing - 1) ? "them" : "it");
}

/*
 * Members whose copies could be all there is of something: those allowed
 * to hold data_type (with a durability).  Each write puts its copies on
 * distinct devices, so data of `replicas` copies survives fewer missing.
 */
static unsigned missing_holders(struct bch_fs *c, unsigned data_type)
{
	unsigned n = 0;

	for (unsigned i = 0; i < c->nr_devs; i++) {
		struct bch_member *m = bch_sb_member(c->sb, i);
		n += bch_dev_missing(c, i) && m->durability &&
		     (m->data_allowed & (1U << data_type));
	}
	return n;
}

/*
 * The refusal the table gives (degraded_check() deferred it to the keys,
 * and they could not be read: what the table names is missing).
 */
static int degraded_lost(struct bch_fs *c)
{
	char who[320], lost[400];
	bool trusted;

	bch_replicas_degraded(c, lost, sizeof(lost), &trusted);
	c->err_msg[0] = 0;	/* the read that failed says less than this */
	return bch_fs_err(c, -BCH_ERR_device_missing,
			  "%s not given: %s would be lost; -o very_degraded opens it "
			  "anyway (reads of that fail)", missing_text(c, who, sizeof(who)), lost);
}

/*
 * Opened with members missing: are the copies that remain enough?  First
 * (before the journal is read) by the replicas table (replicas.h): an entry
 * of file data or metadata with no present member of durability > 0 is what
 * would be lost.  With -o degraded such an entry is not taken on trust:
 * *verify asks for the second call (roots set, journal replayed) to judge
 * from the keys themselves (bch_replicas_degraded_keys()), since an entry
 * may outlive its keys until the next gc point.  Without -o degraded the
 * open is refused all the same, saying what would be lost, or that nothing
 * would and -o degraded opens it.  A table not known to be kept
 * (BCH_COMPAT_REPLICAS_KEPT unset: an older version wrote it) is not
 * trusted: the replication options decide.  Then (roots set) exactly by
 * the btree roots.  -o very_degraded opens anyway: reads of what has no
 * copy left then fail (EIO), and nothing is repaired away.
 */
static int degraded_check(struct bch_fs *c, bool roots, bool *verify)
{
	const char *what = NULL;
	char who[320], lost[400];
	bool trusted = true, loses;

	if (!c->devs_missing || c->opts.v[Opt_very_degraded])
		return 0;
	if (!roots) {
		loses = bch_replicas_degraded(c, lost, sizeof(lost), &trusted);
		if (trusted && loses && c->opts.v[Opt_degraded]) {
			*verify = true;
			return 0;
		}
		if (trusted && loses)
			return bch_fs_err(c, -BCH_ERR_device_missing,
					  "%s not given: %s would be lost; -o very_degraded opens it "
					  "anyway (reads of that fail)", missing_text(c, who, sizeof(who)), lost);
		if (trusted && !c->opts.v[Opt_degraded])
			return bch_fs_err(c, -BCH_ERR_device_missing,
					  "%s not given: nothing would be lost (every copy has another "
					  "on a present member); -o degraded opens it",
					  missing_text(c, who, sizeof(who)));
		if (!trusted && missing_refusal(c))
			return -BCH_ERR_device_missing;
	}
	if (roots && *verify) {
		*verify = false;
		/* replayed nodes are dirty and the journal not started: evict clean ones only */
		c->roots->no_shrink++;
		int r = bch_replicas_degraded_keys(c, lost, sizeof(lost), &loses);
		c->roots->no_shrink--;
		if (r)
			return degraded_lost(c);	/* a node with no copy present */
		if (loses) {
			c->err_msg[0] = 0;
			return bch_fs_err(c, -BCH_ERR_device_missing,
					  "%s not given: %s would be lost; -o very_degraded opens it "
					  "anyway (reads of that fail)", missing_text(c, who, sizeof(who)), lost);
		}
	}
	if (!roots && !trusted && missing_holders(c, BCH_DATA_btree) >= c->opts.v[Opt_metadata_replicas])
		what = "metadata (metadata_replicas too low)";
	else if (!roots && !trusted && missing_holders(c, BCH_DATA_user) >= c->opts.v[Opt_data_replicas])
		what = "file data (data_replicas too low)";
	for (unsigned id = 0; roots && id < BCH_BTREE_ID_NR && !what; id++) {
		const struct bch_bkey *k = c->roots->r[id].key;
		bool any = !k;
		for (unsigned i = 0; k && i < bch_btree_ptr_nr(k); i++)
			any |= !bch_dev_missing(c, ((const struct bch_btree_ptr *)bkey_val(k))->ptrs[i].dev);
		if (!any)
			what = "a btree root";
	}
	if (!what)
		return 0;
	return bch_fs_err(c, -BCH_ERR_device_missing,
			  "%s not given: %s may have no copy left; -o very_degraded opens it anyway",
			  missing_text(c, who, sizeof(who)), what);
}

/*
 * Encrypted: the clean record's last entry is its MAC (clean_mac, over the
 * record from journal_seq to the entry before it: bcachefs_format.h).
 */
static bool clean_mac_good(struct bch_fs *c, const struct bch_sb_field_clean *cl, const __le64 *end)
{
	const __le64 *p = cl->entries, *last = NULL;
	uint8_t mac[16];

	while (p < end) {
		const struct bch_jset_entry *e = (const void *)p;
		if (p + 1 + e->u64s > end)
			return false;
		last = p;
		p += 1 + e->u64s;
	}
	const struct bch_jset_entry *m = (const void *)last;
	if (!m || m->type != BCH_JSET_ENTRY_clean_mac || m->u64s != 2 ||
	    bch_crypt_clean_mac(c, &cl->journal_seq, (const char *)last - (const char *)&cl->journal_seq, mac))
		return false;
	return !sodium_memcmp(mac, m->_data, 16);
}

/* Roots from the clean record; false if there is none usable. */
/* The roots (and the usage entry: *reserved, or UINT64_MAX without one) of the clean record. */
static bool roots_from_clean(struct bch_fs *c, uint64_t *seq, uint64_t *reserved)
{
	struct bch_sb_field_clean *cl = bch_sb_get_clean(c->sb);

	*reserved = UINT64_MAX;
	if (!(c->sb->flags & BCH_SB_FLAG_CLEAN) || !cl)
		return false;
	const __le64 *p = cl->entries, *end = (const __le64 *)&cl->field + cl->field.u64s;
	if (c->crypt && !clean_mac_good(c, cl, end))
		return false;	/* not the key's: the journal is read instead */
	while (p < end) {
		const struct bch_jset_entry *e = (const void *)p;
		if (p + 1 + e->u64s > end || bch_btree_roots_from_jset(c, e))
			return false;
		if (e->type == BCH_JSET_ENTRY_usage && e->u64s == 1)
			*reserved = e->_data[0];
		p += 1 + e->u64s;
	}
	*seq = cl->journal_seq;
	return true;
}

/*
 * The clean record: the roots and the newest durable journal seq in the
 * superblock, so the next open needs no replay.  Every dirty node must be
 * written first.
 */
static int write_clean(struct bch_fs *c, bool alloc_current)
{
	unsigned u64s = bch_btree_roots_u64s(c);
	unsigned mac_u64s = c->crypt ? 3 : 0;	/* encrypted: the clean_mac entry */
	size_t fu64s = (sizeof(struct bch_sb_field_clean) + 7) / 8 + u64s + BCH_CLEAN_USAGE_U64S + mac_u64s;
	int e2 = 0;
	struct bch_sb_field_clean *cl = (void *)bch_sb_field_resize(
		&c->sb, &c->sb_bytes, BCH_SB_FIELD_clean, fu64s, &e2);

	if (!cl)
		return e2;
	cl->journal_seq = bch_journal_seq_durable(c);
	cl->flags = alloc_current ? BCH_CLEAN_ALLOC_CURRENT : 0;
	bch_btree_roots_to_jset(c, (struct bch_jset_entry *)cl->entries);
	/* the promises of reservation keys (usage entry, bcachefs_format.h) */
	struct bch_jset_entry *ue = (void *)(cl->entries + u64s);
	memset(ue, 0, sizeof(*ue));
	ue->type = BCH_JSET_ENTRY_usage;
	ue->u64s = 1;
	ue->_data[0] = c->reserved_sectors;
	if (c->crypt) {
		struct bch_jset_entry *me = (void *)(cl->entries + u64s + BCH_CLEAN_USAGE_U64S);
		memset(me, 0, sizeof(*me) + 16);
		me->type = BCH_JSET_ENTRY_clean_mac;
		me->u64s = 2;
		int r = bch_crypt_clean_mac(c, &cl->journal_seq, (const char *)me - (const char *)&cl->journal_seq,
					    (uint8_t *)me->_data);
		if (r)
			return r;
	}
	c->sb->flags |= BCH_SB_FLAG_CLEAN;
	return bch_write_super(c);
}

/*
 * The journal's last resort (bch_journal_set_spill_fn): a ring with no room
 * even after reclaim (left full on disk by an older version).  Every pinned
 * node is written back; the clean record takes the roots, and the ring is
 * reused.  A crash before the next entry opens clean; after it, the journal
 * is replayed from that entry (newer than the clean record's seq).
 */
static int spill_to_clean(struct bch_fs *c)
{
	int r = write_clean(c, false);

	return r ? bch_fs_err(c, r, "journal full: writing the clean record: %s", bch_err_str(r)) : 0;
}

/*
 * The read-write part of an open, after the roots and bucket state are
 * known (fs_open(), and bch_fs_read_write() from a read-only open): the
 * journal restarts after c->open_seq, then the session's first entry is
 * made durable, then the superblock drops the clean record and names that
 * entry, then overfull nodes are split.  Nothing before the journal start
 * writes; a refusal there (degraded) writes nothing.
 * Two flushes, and they stay two: the superblock may not reach the disk
 * before the entry it names (a crash between would leave a superblock
 * naming an entry that is not there: "entries lost", where there were
 * none), and the session's changes may not be made durable before that
 * superblock is (with the clean record still in place, a journal tail
 * zeroed or damaged after them would open as clean, the session's fsynced
 * changes gone without a word; the superblock naming the first entry is
 * what tells recovery that entries are missing).  fs_readwrite_test's
 * crash cuts fail when the first order is turned around.
 */
static int start_rw(struct bch_fs *c)
{
	bool clean = c->open_clean;
	int r;

	/*
	 * Started first: it refuses a degraded open below
	 * metadata_replicas_required, before the nonce reservation
	 * writes the superblock (a refused open writes nothing)
	 */
	if ((r = bch_journal_start(c, c->open_seq + 1)))
		return r;
	/* a fresh nonce reservation before anything is encrypted */
	if ((r = bch_crypt_start_rw(c)))
		return r;
	/*
	 * The session's first entry is durable before the superblock names
	 * it: recovery that cannot find it (or newer) knows entries were
	 * lost, where a zeroed or damaged tail would look like no writes.
	 */
	struct bch_journal_res res;
	/*
	 * Clean: the last writer flushed everything at its close (the
	 * superblock write that set the flag ends with a flush), and this
	 * session has written only the superblock (flushed) so far: the
	 * entry needs no preflush.
	 */
	if (clean)
		bch_journal_clean_start(c);
	if ((r = bch_journal_res_get(c, 0, &res)))
		return r;
	bch_journal_res_put(c, &res);
	if ((r = bch_journal_flush(c)))
		return r;
	c->sb->journal_seq_open = bch_journal_seq_durable(c);
	/* dirty from here on: drop the clean record before changing anything */
	c->sb->flags &= ~BCH_SB_FLAG_CLEAN;
	int e2;
	bch_sb_field_resize(&c->sb, &c->sb_bytes, BCH_SB_FIELD_clean, 0, &e2);
	for (unsigned i = 0; i < c->nr_devs; i++)
		if (c->devs[i]) {
			c->devs[i]->mi.last_mount = bch_now_secs();
			struct bch_member *m = bch_sb_member(c->sb, i);
			m->last_mount = c->devs[i]->mi.last_mount;
		}
	if ((r = bch_write_super(c)))
		return r;
	return bch_btree_split_overfull(c);
}

/*
 * Where an open's c->data_reuse_seq starts (io.h): past every earlier
 * open's in this process, 2^40 bumps apart.  A read plan, or a slot of a
 * read-ahead cache that outlives the open (fusemount's m->rac across a
 * remount's reopen, fs_read.c), is keyed by the seq and by its device's
 * struct, whose address a later open may get again: with seqs restarting
 * at 0, a slot read on one open matched an extent written over its space
 * before the next (tests/unit/readahead_reopen_test.c: another file's old
 * bytes served, with data_checksum=none).
 */
static uint64_t reuse_seq_base(void)
{
	static uint64_t next;

	return __atomic_add_fetch(&next, 1ULL << 40, __ATOMIC_SEQ_CST);
}

static int fs_open(char * const *paths, unsigned nr, const struct bch_opts *opts,
		   bool allow_no_roots, struct bch_fs **ret)
{
	struct bch_fs *c = calloc(1, sizeof(*c));
	struct replay_list list = { 0 };
	uint64_t newest = 0, clean_seq = 0;
	bool verify = false;	/* degraded: the table says a loss, the keys decide */
	int r;

	if (!c)
		return -ENOMEM;
	c->data_reuse_seq = reuse_seq_base();
	*ret = c;
	pthread_mutex_init(&c->lock, NULL);
	bch_opts_default(&c->opts);
	if (opts)
		for (unsigned i = 0; i < BCH_OPT_NR; i++)
			if (bch_opt_is_set(opts, i))
				bch_opt_set(&c->opts, i, opts->v[i]);
	c->read_only = c->opts.v[Opt_read_only];

	if (!nr)
		return bch_fs_err(c, -EINVAL, "no devices");
	/* writing makes btree nodes, whose seqs are xxhash64s: fail now, not midway */
	if (!c->read_only && (r = bch_csum_type_load(BCH_CSUM_xxhash64)))
		return bch_fs_err(c, r, "opening read-write: %s", bch_err_str(r));
	if ((r = open_devices(c, paths, nr)))
		return r;
	/* superblock options, then what the caller set explicitly on top */
	struct bch_opts sbo;
	bch_opts_from_sb(&sbo, c->sb);
	for (unsigned i = 0; i < BCH_OPT_NR; i++)
		if ((bch_opt_table[i].flags & OPT_FS) && !(opts && bch_opt_is_set(opts, i)))
			c->opts.v[i] = sbo.v[i];

	if ((r = bch_replicas_load(c)) || (r = degraded_check(c, false, &verify)))
		return r;
	/* encrypted: the key, before anything past the superblock is read */
	if ((r = bch_crypt_open(c, c->err_msg, sizeof(c->err_msg))))
		return r;
	c->roots = calloc(1, sizeof(*c->roots));
	if (!c->roots)
		return -ENOMEM;
	if ((r = bch_btree_cache_init(c)) || (r = bch_fs_journal_init(c)) ||
	    (r = bch_fs_alloc_init(c)))
		return r;
	/*
	 * fsck -n (fsck, read-only, pass 3 to count the buckets: only
	 * cmd_fsck's -n opens so): leaves are read once each, in order (the
	 * open's alloc keys, the passes' streams), so unreferenced ones are not
	 * kept past 64 KiB; the cache's room goes to the nodes above them,
	 * which serve every lookup.  From here, not from after the open: the
	 * alloc leaves the open reads held 0.3 MB of its peak at 1M files.
	 */
	if (c->opts.v[Opt_fsck] && c->read_only && c->opts.v[Opt_fsck_defer_recount])
		bch_btree_cache_set_leaf_limit(c, 64 << 10);

	uint64_t clean_reserved;
	bool clean = roots_from_clean(c, &clean_seq, &clean_reserved);
	struct bch_sb_field_clean *cl = bch_sb_get_clean(c->sb);
	bool alloc_current = clean && cl && (cl->flags & BCH_CLEAN_ALLOC_CURRENT);
	/*
	 * A filesystem format just created has an empty journal (entries left
	 * by an earlier filesystem carry its UUID, and would be ignored): no
	 * need to read every journal bucket.
	 */
	if (!allow_no_roots &&
	    (r = bch_journal_read(c, clean ? NULL : collect_jset, &list, &newest)))
		goto out;
	if (clean && newest > clean_seq)
		clean = false;	/* written after the clean record: not clean after all */
	c->reserved_clean = clean ? clean_reserved : UINT64_MAX;	/* fsck checks it */
	if (!clean && !list.nr && newest) {
		/* marked clean once, journal moved on: read entries after all */
		if ((r = bch_journal_read(c, collect_jset, &list, &newest)))
			goto out;
	}
	if (!clean) {
		/* roots: the newest entry carries every root */
		if (list.nr) {
			struct bch_jset_entry *e;
			for_each_jset_entry(e, list.j[list.nr - 1])
				if ((r = bch_btree_roots_from_jset(c, e)))
					goto out;
		}
		bool any = false;
		for (unsigned i = 0; i < BCH_BTREE_ID_NR; i++)
			any |= c->roots->r[i].key != NULL;
		if (!any && !allow_no_roots) {
			r = bch_fs_err(c, -BCH_ERR_journal_bad,
				       "no btree roots: neither a clean record nor journal entries");
			goto out;
		}
		if (list.nr) {
			c->replay_oldest = list.j[0]->seq;
			c->replay_newest = list.j[list.nr - 1]->seq;
		}
		if ((r = replay(c, &list))) {
			if (verify)	/* a leaf with no copy present: what the table said */
				r = degraded_lost(c);
			goto out;
		}
		c->journal_replayed = list.nr;
	}
	if ((r = degraded_check(c, true, &verify)))
		goto out;
	/* the first read-write session after a crash: a gc point at its close */
	if (!clean && !c->read_only && c->replicas)
		c->replicas->maybe_stale = true;
	c->roots->no_shrink++;
	/* bucket state: stored at the clean close, or recomputed from every pointer */
	bool loaded = false;
	r = bch_alloc_btree_read(c, clean && alloc_current, &loaded);
	for (unsigned id = 0; id < BCH_BTREE_ID_NR && !r && !loaded; id++)
		if (c->roots->r[id].key)
			r = mark_subtree(c, id, c->roots->r[id].level, c->roots->r[id].key);
	if (!r && !loaded) {
		/*
		 * User data buckets, from the extent keys.  fsck -n of a clean
		 * filesystem (nothing replayed, nothing written) may leave that
		 * to its pass 3, which reads every extents leaf anyway.
		 */
		if (c->opts.v[Opt_fsck] && c->opts.v[Opt_fsck_defer_recount] && c->read_only && clean)
			c->extents_mark_deferred = true;
		else
			r = bch_extents_mark_all(c);
		if (!r)
			r = bch_alloc_btree_rebuilt(c);
	} else if (!r && clean_reserved != UINT64_MAX) {
		c->reserved_sectors = clean_reserved;
	} else if (!r) {
		r = bch_extents_count_reserved(c);	/* a clean record of an older version */
	}
	c->roots->no_shrink--;
	if (r)
		goto out;

	bch_journal_set_roots_fn(c, bch_btree_roots_u64s, bch_btree_roots_to_jset);
	bch_journal_set_spill_fn(c, spill_to_clean);
	c->open_clean = clean;
	c->open_seq = clean ? clean_seq : newest;
	if (!c->read_only)
		r = start_rw(c);
out:
	free_replay_list(&list);
	return r;
}

int bch_fs_open(char * const *paths, unsigned nr, const struct bch_opts *opts,
		struct bch_fs **ret, char *err, size_t errlen)
{
	struct bch_fs *c;
	int r = fs_open(paths, nr, opts, false, &c);

	if (r) {
		snprintf(err, errlen, "%s", c->err_msg[0] ? c->err_msg : bch_err_str(r));
		c->read_only = true;	/* nothing more is written on the way out */
		fs_free(c);
		return r;
	}
	*ret = c;
	return 0;
}

/*
 * Can this read-only open become what a read-write open would have been,
 * without reading anything again?  Only when the read-write open would
 * have done nothing the read-only one did not: opened clean (nothing
 * replayed: replayed nodes of a read-only open are dirty, unjournalled),
 * every member present (a degraded read-write open counts and refuses
 * differently, and very_degraded skips unreadable nodes only read-only),
 * not for fsck (its opens defer and skip work), no member with discard
 * on (set up by a read-write alloc init only), no error met.
 */
static bool can_read_write(struct bch_fs *c)
{
	if (!c->read_only || c->emergency_ro || c->nr_errors || !c->open_clean ||
	    c->journal_replayed || c->nr_replay_deferred || c->devs_missing ||
	    c->opts.v[Opt_very_degraded] || c->opts.v[Opt_fsck] || c->prefetch ||
	    c->extents_mark_deferred || c->alloc_recount_partial)
		return false;
	for (unsigned i = 0; i < c->nr_devs; i++) {
		struct bch_dev *ca = c->devs[i];
		struct bch_member *m = bch_sb_member(c->sb, i);
		if (m && bch_member_exists(m) && (!ca || !ca->bdev || m->discard))
			return false;
	}
	/* writing makes btree nodes, whose seqs are xxhash64s (as fs_open) */
	return !bch_csum_type_load(BCH_CSUM_xxhash64);
}

/*
 * Every member opened again for writing (exclusive: blockdev.h (1)), its
 * superblock read again and compared with the one the read-only open read.
 * Any difference (another writer came between), or a device that will not
 * open for writing: false, the read-only handles left as they were.
 * Else the read-only handles are closed and the new ones put in their place.
 */
static bool reopen_devs_rw(struct bch_fs *c)
{
	struct bch_blockdev *nbd[BCH_SB_MEMBERS_MAX] = { 0 };
	bool ok = true;

	for (unsigned i = 0; i < c->nr_devs && ok; i++) {
		struct bch_dev *ca = c->devs[i];
		struct bch_sb *sb = NULL;

		if (!ca)
			continue;
		ok = !bch_dev_open(bch_dev_path(ca->bdev), 0, &nbd[i]) &&
		     !bch_sb_read(nbd[i], &sb, NULL) &&
		     bch_sb_bytes(sb) == bch_sb_bytes(ca->disk_sb) &&
		     !memcmp(sb, ca->disk_sb, bch_sb_bytes(sb));
		free(sb);
	}
	for (unsigned i = 0; i < c->nr_devs; i++) {
		if (!nbd[i])
			continue;
		if (!ok) {
			bch_dev_close(nbd[i]);
			continue;
		}
		bch_dev_close(c->devs[i]->bdev);
		c->devs[i]->bdev = nbd[i];
	}
	return ok;
}

int bch_fs_read_write(struct bch_fs *c)
{
	if (!can_read_write(c) || !reopen_devs_rw(c))
		return 1;
	c->read_only = false;
	bch_opt_set(&c->opts, Opt_read_only, 0);
	c->err_msg[0] = 0;
	c->inum_next = 0;	/* recomputed from the inodes btree at the first create */
	int r = start_rw(c);
	if (r)
		c->read_only = true;	/* as a failed open: nothing more is written */
	return r;
}

int bch_fs_close(struct bch_fs *c)
{
	int r = 0;

	if (!c)
		return 0;
	/*
	 * Stripes nothing points into any more go, before the sync (ec_move.h).
	 * Best effort: a failure (memory, an unreadable node) leaves them for
	 * fsck or compaction, the filesystem consistent either way.
	 */
	uint64_t ec_deleted;
	if (!c->read_only && !c->emergency_ro && bch_ec_close_unused(c, &ec_deleted))
		c->err_msg[0] = 0;
	if (!c->read_only && !c->emergency_ro) {
		bool alloc_current = false;
		/*
		 * A gc point (replicas.h): entries whose last key went this session
		 * go.  After the sync, which writes every node (moving those with a
		 * copy on a missing member): it reads clean nodes only, and changes
		 * no bucket.
		 */
		if (!(r = bch_alloc_btree_sync(c, &alloc_current)) && !(r = bch_replicas_gc_at_close(c)))
			/*
			 * Degraded, a missing member's alloc keys were left as they were
			 * while its pointers came and went: the next open recounts them
			 * from the pointers (device online, or the member given again).
			 */
			r = write_clean(c, alloc_current && !c->devs_missing);
		if (!r)
			r = bch_alloc_discard_free(c);	/* every free is durable now */
	}
	if (!r && c->emergency_ro)
		r = -BCH_ERR_fs_emergency_ro;
	fs_free(c);
	return r;
}

int bch_fs_open_journal_only(char * const *paths, unsigned nr, const struct bch_opts *opts,
			     struct bch_fs **ret, char *err, size_t errlen)
{
	struct bch_fs *c = calloc(1, sizeof(*c));
	int r;

	if (!c)
		return -ENOMEM;
	pthread_mutex_init(&c->lock, NULL);
	bch_opts_default(&c->opts);
	c->read_only = true;
	bch_opt_set(&c->opts, Opt_read_only, 1);
	if (opts && opts->v[Opt_degraded])
		bch_opt_set(&c->opts, Opt_degraded, 1);
	if (opts && opts->v[Opt_very_degraded])
		bch_opt_set(&c->opts, Opt_very_degraded, 1);
	if (!nr)
		r = bch_fs_err(c, -EINVAL, "no devices");
	else if (!(r = open_devices(c, paths, nr)) && !(r = missing_refusal(c))) {
		struct bch_opts sbo;
		bch_opts_from_sb(&sbo, c->sb);
		for (unsigned i = 0; i < BCH_OPT_NR; i++)
			if (bch_opt_table[i].flags & OPT_FS)
				c->opts.v[i] = sbo.v[i];
		if (!(r = bch_crypt_open(c, c->err_msg, sizeof(c->err_msg))))
			r = bch_fs_journal_init(c);
	}
	if (r) {
		snprintf(err, errlen, "%s", c->err_msg[0] ? c->err_msg : bch_err_str(r));
		fs_free(c);
		return r;
	}
	*ret = c;
	return 0;
}

int bch_fs_init_empty(char * const *paths, unsigned nr, char *err, size_t errlen)
{
	struct bch_fs *c;
	int r = fs_open(paths, nr, NULL, true, &c);

	if (!r)
		r = bch_btree_create_roots(c);
	/* the root directory (owned by whoever formats, as mke2fs does) and lost+found */
	if (!r)
		r = bch_fs_create_root(c, 0755, getuid(), getgid());
	/* from here on every member set is marked as it is used (replicas.h) */
	if (!r)
		c->sb->compat |= BCH_COMPAT_REPLICAS_KEPT;
	if (r) {
		snprintf(err, errlen, "%s", c->err_msg[0] ? c->err_msg : bch_err_str(r));
		c->read_only = true;
		fs_free(c);
		return r;
	}
	r = bch_fs_close(c);
	if (r)
		snprintf(err, errlen, "creating the btrees: %s", bch_err_str(r));
	return r;
}
