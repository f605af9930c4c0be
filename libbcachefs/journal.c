// SPDX-License-Identifier: GPL-2.0
/*
 * journal.c - the write-ahead log (see journal.h for the contract).
 *
 * Ordering: an entry is written after a flush of every device (so the nodes
 * it links in are durable first) and flushed itself before it counts as
 * durable.  An entry written only because it is full (write_full) skips
 * its own flush: the next flush of the devices (the next entry's preflush,
 * a node write that needs it, an fsync) makes it durable, so a run of full
 * entries costs one flush each.  Until then j->written is ahead of
 * j->durable, and its last_seq frees no bucket; when the next reservation
 * does not fit without what it frees, or with stubs (a stub follows its
 * entry's flush), the entry is flushed at once as before.  Every flush
 * of all devices is counted (flush_gen): a node whose hints cover its
 * children's appends waits for one, not for a journal entry.  A flush with
 * nothing written since the last reaches no device (blockdev.c), and the
 * first entry of a session opened clean has no preflush.
 *
 * The writer's queue: a full entry is sealed in its own buffer and handed
 * to the writer thread (journal_submit; journal_writer.c), which does the
 * preflush, the write and, with stubs, the entry's flush and its stub, while
 * requests fill the open entry.  Up to BCH_JWRITER_QUEUE sealed entries
 * wait there at once, written one after the other in sequence order: a
 * commit waits for the writer only when all of them are busy (or for
 * whatever needs every entry written: a flush, the ring short of room).
 * An entry's places in the ring are taken at submission, so fits() and
 * place() see them; it counts as written at submission (every user of
 * j->written as "on disk" goes through flush_devs(), which waits for all
 * of them) and as durable only when reaped (jwriter_reap_one), oldest
 * first: its preflush, which followed the previous entry's write, makes
 * the entries before it durable, and its own flush, if any, itself.  A
 * failed job fails every job queued after it (they are not written): the
 * first failure is the filesystem's error, j->written goes back to the
 * entry before it, and nothing after the hole counts as written.  The
 * hole is remembered (j->lost, journal_lost()), as is a failed write in
 * line: no entry is written past it, and every later flush that reaches
 * it answers the failure (an fsync retried, a second file's, one after
 * bch_journal_seq_durable_now() reaped it), never 0, until a new open.
 *
 * Space: each journal device has a ring of buckets.  An entry for sequence s
 * goes to metadata_replicas devices, starting with device s % nr (so the
 * devices share the load).  On each device it is written at the current
 * offset of the current bucket, or at the start of the next bucket when it
 * does not fit — which needs the next bucket to hold nothing at or after
 * last_seq_ondisk.  Transactions leave room in every bucket for one more
 * entry (roots and a reserve for the btree's internal updates, a relink
 * for every node pinned in the next buckets among them: reserve_u64s()): when the
 * ring is full, reclaim flushes every pin (all of them protect durable
 * entries, as the open entry is written first; node writes may add internal
 * updates, which the reserve holds) and that entry records the new last_seq,
 * which frees the buckets.  Internal reservations never reclaim, so node
 * writes never recurse into more node writes.
 *
 * The reclaim rule (flush_open): a flush writes only when the open entry is
 * needed (open_entry_needed), and a flush from the top whose entry would eat
 * into the reserve reclaims first (make_room).  Flushes that may not reclaim
 * (may_reclaim) use the reserve like internal reservations; the next flush
 * from the top restores it.  An entry with no place is refused before
 * anything is written (journal_full, not read-only).
 *
 * The open entry: reservations append sub-entries to a buffer; the buffer
 * becomes a jset when it is written.  res_get makes sure, before anything is
 * added, that the open entry plus the new data will fit somewhere, so
 * writing an entry never has to wait.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bcachefs.h"
#include "blockdev.h"
#include "btree.h"
#include "checksum.h"
#include "crypt.h"
#include "errcode.h"
#include "journal.h"
#include "journal_writer.h"
#include "super.h"

#define JOURNAL_ENTRY_MAX_BYTES	(1U << 20)

struct journal_dev {
	unsigned	dev;
	unsigned	nr;		/* ring slots */
	uint64_t	*bucket;	/* device bucket of each slot */
	uint64_t	*bucket_seq;	/* newest sequence written in each slot, 0 = none */
	unsigned	cur;		/* slot being filled */
	unsigned	cur_off;	/* sectors used in it */
	unsigned	bucket_sectors;
};

/*
 * An entry in flight with the writer thread (journal_writer.h), as the
 * journal sees it: what it makes written and durable once reaped.
 */
struct jflight {
	struct bch_jwriter_job	job;		/* devices, offsets, buffers */
	bool			gen_read;	/* flush_gen asked once the job was begun:
						 * its preflush is not counted (jwriter_reap_one()) */
	struct bch_jset		*js;		/* the entry (job.buf), freed at reap */
	struct bch_jset		*stub;		/* its stub (job.stub), freed at reap */
	uint64_t		seq;
	uint64_t		last_seq;	/* of the entry */
	uint64_t		covers;		/* j->written before this job: durable once
						 * its preflush is done */
	uint64_t		covers_last_seq;
};

struct bch_journal {
	struct journal_dev	devs[BCH_SB_MEMBERS_MAX];
	unsigned		nr_devs;
	unsigned		nr_wdevs;	/* devs[0..nr_wdevs) get new entries: the
						 * read-write members (all, if none is) */
	unsigned		replicas;
	bool			stubs;		/* write a stub of each entry to target
						 * replicas (version 2, one copy) */
	uint64_t		stub_max;	/* read: newest seq a valid stub names */
	unsigned		block_sectors;
	unsigned		csum_type;
	unsigned		max_u64s;	/* payload of one entry, roots included */
	unsigned		extra_u64s;	/* encrypted: the nonce entry each entry starts with */
	uint64_t		nonce_max;	/* encrypted: highest counter of a valid entry */

	uint64_t		seq;		/* the open entry */
	uint64_t		seen_max;	/* read: newest seq a header vouched for,
						 * valid entry or not (new entries go after it) */
	size_t			read_window_max;	/* read: most bytes of a bucket held at once */
	uint64_t		*bad;		/* read: seqs of entries whose header is good
						 * and body is not (damaged, or torn by a crash) */
	size_t			nr_bad;
	uint64_t		durable;	/* newest written and flushed */
	uint64_t		flush_gen;	/* flushes of every device done (flush_devs) */
	uint64_t		written;	/* newest entry written: durable, or durable
						 * at the next flush of the devices */
	uint64_t		written_last_seq;	/* last_seq of that entry */
	bool			clean_start;	/* opened clean: the first entry needs no
						 * preflush (bch_journal_clean_start) */
	uint64_t		last_seq_ondisk;	/* last_seq of that entry */
	uint64_t		lost;		/* first seq whose entry may be lost (a
						 * write or flush failed), 0: none.  Never
						 * durable, nor anything after it: every
						 * flush at or past it answers lost_ret and
						 * nothing more is written (journal_lost()) */
	int			lost_ret;
	bool			started;

	uint64_t		*buf;		/* sub-entries of the open entry */
	unsigned		buf_u64s;
	unsigned		reserved;	/* held by an outstanding reservation */
	bool			pending;	/* the open entry has a user: something
						 * since the last write (a reservation, a
						 * seq handed out) needs it written */
	uint64_t		*last_roots;	/* roots of the last entry written */
	unsigned		last_roots_u64s;
	bool			reclaiming;	/* inside reclaim: no nested reclaim */
	/*
	 * bch_journal_restore_reserve() found the reserve kept at kept_seq
	 * with roots of kept_roots words: still so while the open entry is the
	 * same, the roots too, and nothing but ordinary reservations (each
	 * fits the reserve, fits()) came since.  kept false: look again
	 * (internal reservations, devices, spill, start).
	 */
	bool			kept;
	uint64_t		kept_seq;
	unsigned		kept_roots;
	uint64_t		debt_upto;	/* pins up to this seq ... */
	unsigned		debt_pins;	/* ... are this many: what reclaim writes
						 * to free the next buckets (reserve_u64s()) */

	struct bch_journal_pin	pins;		/* list head, oldest first */
	unsigned		(*roots_u64s)(struct bch_fs *c);
	void			(*roots_fill)(struct bch_fs *c, struct bch_jset_entry *dst);
	int			(*spill)(struct bch_fs *c);	/* roots elsewhere (fs.c) */
	struct bch_jwriter	wr;		/* the writer thread and its queue */
	struct jflight		fl[BCH_JWRITER_QUEUE];	/* in flight, in wr's order */
	unsigned		fl_first;	/* the oldest */
	unsigned		fl_nr;
};

static inline struct bch_journal *J(struct bch_fs *c)
{
	return c->journal;
}

static int jwriter_reap(struct bch_fs *c);
static int jwriter_reap_done(struct bch_fs *c);
static void jwriter_exit(struct bch_fs *c);

static unsigned roots_u64s(struct bch_fs *c)
{
	return J(c)->roots_u64s ? J(c)->roots_u64s(c) : 0;
}

/* Sectors an entry of u64s payload takes on disk. */
/* Sectors of a jset whose u64s field is u64s. */
static unsigned jset_sectors(struct bch_journal *j, unsigned u64s)
{
	unsigned bytes = sizeof(struct bch_jset) + u64s * 8;
	unsigned block = j->block_sectors << BCH_SECTOR_SHIFT;

	return (bytes + block - 1) / block * j->block_sectors;
}

/* Sectors of an entry written with u64s of payload (and the nonce entry, encrypted). */
static unsigned entry_sectors(struct bch_journal *j, unsigned u64s)
{
	return jset_sectors(j, u64s + j->extra_u64s);
}

/* ----------------------------------------------------------- init / exit */

/*
 * How many places an entry wants on a version-2 filesystem: its copies
 * (metadata_replicas), or with one copy the entry and its stub.
 */
static unsigned targets_wanted(struct bch_fs *c)
{
	unsigned mr = c->opts.v[Opt_metadata_replicas];

	if (!bch_fs_has_v2(c))
		return 0;
	return mr > 1 ? mr : 2;
}

/*
 * Lanes (version 2): with fewer journal devices than targets wanted, the
 * ring with the most buckets is split in two halves (its buckets in the
 * superblock's order: the first half stays, the second becomes a lane of
 * its own), while a ring has four buckets or more.  A lane is a journal_dev
 * like any other: entries are read from every bucket whatever the lanes,
 * so how a ring was split in an earlier session does not matter; the
 * halves are as far apart as the journal's buckets are.
 */
static int split_lanes(struct bch_fs *c, struct bch_journal *j)
{
	unsigned want = targets_wanted(c);

	while (j->nr_devs < want && j->nr_devs < BCH_SB_MEMBERS_MAX) {
		struct journal_dev *big = NULL;
		for (unsigned i = 0; i < j->nr_devs; i++)
			if (!big || j->devs[i].nr > big->nr)
				big = &j->devs[i];
		if (!big || big->nr < 4)
			break;
		unsigned half = big->nr / 2;
		struct journal_dev *lane = &j->devs[j->nr_devs];
		*lane = *big;
		lane->nr = big->nr - half;
		lane->bucket = malloc(lane->nr * sizeof(*lane->bucket));
		if (!lane->bucket)
			return -ENOMEM;
		memcpy(lane->bucket, big->bucket + half, lane->nr * sizeof(*lane->bucket));
		big->nr = half;
		j->nr_devs++;
	}
	return 0;
}

int bch_fs_journal_init(struct bch_fs *c)
{
	struct bch_sb_field_journal *f = bch_sb_get_journal(c->sb);
	struct bch_journal *j = calloc(1, sizeof(*j));
	int ret;

	if (!j)
		return -ENOMEM;
	c->journal = j;
	j->block_sectors = c->sb->block_size;
	j->csum_type = c->crypt ? BCH_CSUM_chacha20_poly1305 : c->opts.v[Opt_metadata_checksum];
	j->extra_u64s = c->crypt ? 2 : 0;
	j->pins.next = j->pins.prev = &j->pins;

	unsigned runs = f ? (f->field.u64s * 8 - sizeof(f->field)) / sizeof(f->runs[0]) : 0;
	for (unsigned r = 0; r < runs; r++) {
		unsigned dev = f->runs[r].dev;
		struct journal_dev *jd = NULL;

		if (bch_dev_missing(c, dev))
			continue;	/* not given (degraded): neither read nor written */
		for (unsigned i = 0; i < j->nr_devs; i++)
			if (j->devs[i].dev == dev)
				jd = &j->devs[i];
		if (!jd) {
			jd = &j->devs[j->nr_devs++];
			jd->dev = dev;
			jd->bucket_sectors = bch_sb_member(c->sb, dev)->bucket_size;
		}
		uint64_t *b = realloc(jd->bucket, (jd->nr + f->runs[r].nr) * sizeof(*b));
		if (!b)
			return -ENOMEM;
		jd->bucket = b;
		for (unsigned i = 0; i < f->runs[r].nr; i++)
			jd->bucket[jd->nr++] = f->runs[r].start + i;
	}
	if (!j->nr_devs && c->devs_missing)
		return bch_fs_err(c, -BCH_ERR_device_missing, "no journal device was given");
	if (!j->nr_devs)
		return bch_fs_err(c, -BCH_ERR_journal_bad, "the superblock lists no journal buckets");

	if ((ret = split_lanes(c, j)))
		return ret;
	unsigned min_bucket = UINT32_MAX;
	for (unsigned i = 0; i < j->nr_devs; i++) {
		struct journal_dev *jd = &j->devs[i];
		jd->bucket_seq = calloc(jd->nr, sizeof(uint64_t));
		if (!jd->bucket_seq)
			return -ENOMEM;
		if (jd->bucket_sectors < min_bucket)
			min_bucket = jd->bucket_sectors;
	}
	/* one entry, plus the marker's block(s), fits in a bucket */
	unsigned bytes = (min_bucket << BCH_SECTOR_SHIFT) / 2;
	if (bytes > JOURNAL_ENTRY_MAX_BYTES)
		bytes = JOURNAL_ENTRY_MAX_BYTES;
	j->max_u64s = (bytes - sizeof(struct bch_jset)) / 8 - j->extra_u64s;
	j->buf = malloc(j->max_u64s * 8);
	if (!j->buf)
		return -ENOMEM;
	bch_journal_devs_update(c);
	return 0;
}

void bch_journal_devs_update(struct bch_fs *c)
{
	struct bch_journal *j = J(c);

	if (!j)
		return;
	jwriter_reap(c);	/* its devices are the old ones (a failure is the fs's error) */
	j->kept = false;
	/* read-write members first: only they get new entries */
	j->nr_wdevs = 0;
	for (unsigned i = 0; i < j->nr_devs; i++)
		if (bch_sb_member(c->sb, j->devs[i].dev)->state == BCH_MEMBER_STATE_rw) {
			struct journal_dev t = j->devs[j->nr_wdevs];
			j->devs[j->nr_wdevs++] = j->devs[i];
			j->devs[i] = t;
		}
	if (!j->nr_wdevs)
		j->nr_wdevs = j->nr_devs;
	j->replicas = c->opts.v[Opt_metadata_replicas];
	if (j->replicas > j->nr_wdevs)
		j->replicas = j->nr_wdevs;
	if (!j->replicas)
		j->replicas = 1;
	j->stubs = bch_fs_has_v2(c) && j->replicas == 1 && j->nr_wdevs > 1;
}

void bch_fs_journal_exit(struct bch_fs *c)
{
	struct bch_journal *j = J(c);

	if (!j)
		return;
	jwriter_exit(c);
	for (unsigned i = 0; i < j->nr_devs; i++) {
		free(j->devs[i].bucket);
		free(j->devs[i].bucket_seq);
	}
	free(j->buf);
	free(j->last_roots);
	free(j->bad);
	free(j);
	c->journal = NULL;
}

void bch_journal_set_roots_fn(struct bch_fs *c, unsigned (*u64s)(struct bch_fs *c),
			      void (*fill)(struct bch_fs *c, struct bch_jset_entry *dst))
{
	J(c)->roots_u64s = u64s;
	J(c)->roots_fill = fill;
}

void bch_journal_set_spill_fn(struct bch_fs *c, int (*fn)(struct bch_fs *c))
{
	J(c)->spill = fn;
}

/* ---------------------------------------------------------------- reading */

struct jlocation {
	uint64_t	seq;
	uint64_t	last_seq;
	unsigned	jdev;		/* index into j->devs */
	unsigned	slot;
	unsigned	offset;		/* sectors into the bucket */
	unsigned	sectors;
};

static uint32_t jset_hdr_csum(const struct bch_jset *js)
{
	return ~bch_crc32c(~0U, &js->magic, BCH_JSET_HDR_BYTES);
}

/*
 * Is the entry at p (room bytes until the bucket's end) a valid jset of ours?
 * 0, -BCH_ERR_journal_bad (why says why), or the dl error of a checksum
 * library that cannot be loaded: the entry may be good, callers stop.
 */
static int jset_entries_check(const struct bch_jset *js, char *why, size_t whylen);

static int jset_validate(struct bch_fs *c, const struct bch_jset *js, size_t room,
			 char *why, size_t whylen)
{
	if (room < sizeof(*js) || js->magic != BCH_JSET_MAGIC)
		return snprintf(why, whylen, "no entry"), -BCH_ERR_journal_bad;
	if (memcmp(js->fs_uuid, c->sb->uuid, BCH_UUID_SIZE))
		return snprintf(why, whylen, "entry of another filesystem"), -BCH_ERR_journal_bad;
	if (sizeof(*js) + (size_t)js->u64s * 8 > room)
		return snprintf(why, whylen, "entry overruns its bucket"), -BCH_ERR_journal_bad;
	unsigned csum_type = js->flags & 0xf;
	bool mac = csum_type == BCH_CSUM_chacha20_poly1305;
	if (!bch_csum_type_valid(csum_type))
		return snprintf(why, whylen, "bad checksum type"), -BCH_ERR_journal_bad;
	if (mac != bch_fs_encrypted(c))
		return snprintf(why, whylen, "%s", mac ? "encrypted entry on a filesystem without encryption"
				: "unencrypted entry on an encrypted filesystem"), -BCH_ERR_journal_bad;
	const struct bch_jset_entry *ne = (const void *)js->_data;
	if (mac && (js->u64s < 2 || ne->type != BCH_JSET_ENTRY_nonce || ne->u64s != 1))
		return snprintf(why, whylen, "no nonce entry"), -BCH_ERR_journal_bad;
	int ret = mac ? bch_crypt_jset_verify(c, ne->_data[0], js->seq, &js->magic,
					      sizeof(*js) - sizeof(js->csum) + 16, js->_data + 2,
					      ((size_t)js->u64s - 2) * 8, js->csum)
		      : bch_csum_verify(csum_type, &js->magic,
					sizeof(*js) - sizeof(js->csum) + js->u64s * 8, js->csum);
	if (bch_err_is_dl(ret))	/* not a bad entry: callers pass it up */
		return snprintf(why, whylen, "%s", bch_err_str(ret)), ret;
	if (ret)
		return snprintf(why, whylen, mac ? "bad MAC" : "bad checksum"), -BCH_ERR_journal_bad;
	if (mac && c->journal && ne->_data[0] > J(c)->nonce_max)
		J(c)->nonce_max = ne->_data[0];	/* authentic: the counter went at least this far */
	if ((js->flags & BCH_JSET_HDR_CSUM) ? js->hdr_csum != jset_hdr_csum(js) : js->hdr_csum != 0)
		return snprintf(why, whylen, "bad header checksum"), -BCH_ERR_journal_bad;
	if (!js->seq || js->last_seq > js->seq)
		return snprintf(why, whylen, "bad sequence numbers"), -BCH_ERR_journal_bad;
	if (mac)
		return 0;	/* sub-entries are checked once decrypted (jset_open()) */
	return jset_entries_check(js, why, whylen);
}

/* Sub-entries stay inside the entry. */
static int jset_entries_check(const struct bch_jset *js, char *why, size_t whylen)
{
	const __le64 *p = js->_data, *end = js->_data + js->u64s;
	while (p < end) {
		const struct bch_jset_entry *e = (const void *)p;
		if (p + 1 + e->u64s > end)
			return snprintf(why, whylen, "sub-entry overruns the entry"), -BCH_ERR_journal_bad;
		p += 1 + e->u64s;
	}
	return 0;
}

/*
 * A validated entry, made readable: decrypted in place when encrypted (its
 * sub-entries then checked), else as it is.
 */
static int jset_open(struct bch_fs *c, struct bch_jset *js, char *why, size_t whylen)
{
	if ((js->flags & 0xf) != BCH_CSUM_chacha20_poly1305)
		return 0;
	const struct bch_jset_entry *ne = (const void *)js->_data;
	if (bch_crypt_jset_decrypt(c, ne->_data[0], js->seq, &js->magic,
				   sizeof(*js) - sizeof(js->csum) + 16, js->_data + 2,
				   ((size_t)js->u64s - 2) * 8, js->csum))
		return snprintf(why, whylen, "bad MAC"), -BCH_ERR_journal_bad;
	return jset_entries_check(js, why, whylen);
}

/*
 * Reading a bucket through a window: the bytes of one bucket from base on,
 * len of them, in a buffer grown only as far as the largest read (a bucket
 * is up to megabytes, mostly unwritten: a whole-bucket buffer made the
 * open's memory peak).  A scan reads JWIN_BYTES at a time and further only
 * for an entry whose header claims more.
 */
#define JWIN_BYTES	(64U << 10)

struct jwin {
	char		*buf;
	size_t		cap;		/* bytes allocated */
	struct journal_dev *jd;		/* the bucket held: jd's slot, */
	unsigned	slot;
	size_t		base;		/* from this byte of it, */
	size_t		len;		/* this many (0: nothing held) */
};

static void jwin_free(struct jwin *w)
{
	free(w->buf);
	memset(w, 0, sizeof(*w));
}

/*
 * Make bytes [from, from + need) of bucket slot of jd readable at
 * jwin_at(w, from), reading at least want bytes from from (both capped at
 * the bucket's end; from, need and want multiples of 512).
 */
static int jwin_get(struct bch_fs *c, struct jwin *w, struct journal_dev *jd, unsigned slot,
		    size_t from, size_t need, size_t want)
{
	size_t bucket = (size_t)jd->bucket_sectors << BCH_SECTOR_SHIFT;

	if (need > bucket - from)
		need = bucket - from;
	if (w->jd == jd && w->slot == slot && w->len && from >= w->base &&
	    from + need <= w->base + w->len)
		return 0;
	if (want < need)
		want = need;
	if (want > bucket - from)
		want = bucket - from;
	if (want > w->cap) {
		free(w->buf);
		w->len = 0;
		w->cap = want;
		if (!(w->buf = bch_dev_alloc_buf(want)))
			return w->cap = 0, -ENOMEM;
	}
	w->jd = jd;
	w->slot = slot;
	w->base = from;
	w->len = 0;
	if (want > J(c)->read_window_max)
		J(c)->read_window_max = want;
	int ret = bch_dev_read(c->devs[jd->dev]->bdev, w->buf, want,
			       ((jd->bucket[slot] * jd->bucket_sectors) << BCH_SECTOR_SHIFT) + from);
	if (ret)
		return bch_fs_err(c, ret, "%s: reading journal bucket %" PRIu64 ": %s",
				  bch_dev_path(c->devs[jd->dev]->bdev), jd->bucket[slot],
				  bch_err_str(ret));
	w->len = want;
	return 0;
}

static void *jwin_at(const struct jwin *w, size_t from)
{
	return w->buf + (from - w->base);
}

static int loc_cmp(const void *a, const void *b)
{
	const struct jlocation *x = a, *y = b;

	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/*
 * An entry that failed validation: when its header is ours and its header
 * checksum vouches for its sequence numbers, remember the seq (the entry was
 * written, and is now damaged or was torn by a crash).
 */
static void note_bad_entry(struct bch_fs *c, struct bch_journal *j, const struct bch_jset *js,
			   size_t room)
{
	if (room < sizeof(*js) || js->magic != BCH_JSET_MAGIC ||
	    memcmp(js->fs_uuid, c->sb->uuid, BCH_UUID_SIZE) || !(js->flags & BCH_JSET_HDR_CSUM) ||
	    js->hdr_csum != jset_hdr_csum(js) || !js->seq || js->last_seq > js->seq)
		return;
	for (size_t i = 0; i < j->nr_bad; i++)
		if (j->bad[i] == js->seq)
			return;
	uint64_t *n = realloc(j->bad, (j->nr_bad + 1) * sizeof(*n));
	if (!n)
		return;	/* only a report is lost */
	j->bad = n;
	j->bad[j->nr_bad++] = js->seq;
	if (js->seq > j->seen_max)
		j->seen_max = js->seq;
}

/* Is there a valid entry of seq among locs (sorted)? */
static bool have_entry(const struct jlocation *locs, size_t nr, uint64_t seq)
{
	size_t lo = 0, hi = nr;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (locs[mid].seq < seq)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < nr && locs[lo].seq == seq;
}

/* Record entries from..to as missing for fsck's pass 2. */
static void add_gap(struct bch_fs *c, uint64_t from, uint64_t to)
{
	c->journal_gaps = realloc(c->journal_gaps, (c->nr_journal_gaps + 1) * sizeof(*c->journal_gaps));
	if (!c->journal_gaps)
		abort();
	c->journal_gaps[c->nr_journal_gaps][0] = from;
	c->journal_gaps[c->nr_journal_gaps++][1] = to;
}

/*
 * Entries after the newest valid one (top) that were written all the same:
 * the superblock says the last read-write session began with an entry newer
 * than top, or entries newer than top have good headers and bad bodies, or
 * a stub (version 2, written once its entry was durable) names an entry
 * newer than top.  The
 * one entry right after top with a bad body and nothing after it is what a
 * crash leaves (a torn write, never acknowledged); anything more is loss.
 * Returns the newest lost seq, or 0 when nothing is lost.
 */
static uint64_t lost_tail(struct bch_fs *c, struct bch_journal *j, const struct jlocation *locs,
			  size_t nr, uint64_t top)
{
	uint64_t lost = 0, bad_max = 0;

	for (size_t i = 0; i < j->nr_bad; i++)
		if (j->bad[i] > bad_max && !have_entry(locs, nr, j->bad[i]))
			bad_max = j->bad[i];
	if (bad_max > top + 1)
		lost = bad_max;
	/* a stub is written after its entry was flushed: that entry was acknowledged */
	if (j->stub_max > top && j->stub_max > lost)
		lost = j->stub_max;
	if (c->sb->journal_seq_open > top && c->sb->journal_seq_open > lost)
		lost = c->sb->journal_seq_open;
	if (lost && bad_max > lost)
		lost = bad_max;
	if (!lost && bad_max == top + 1)
		c->journal_torn = bad_max;	/* reported, not an error: a crash does this */
	return lost;
}

/*
 * Is js a valid stub (BCH_JSET_STUB) of this filesystem?  Its header
 * checksum is all that vouches for it.
 */
static bool stub_valid(struct bch_fs *c, const struct bch_jset *js, size_t room)
{
	return room >= sizeof(*js) && js->magic == BCH_JSET_MAGIC &&
	       (js->flags & BCH_JSET_STUB) && (js->flags & BCH_JSET_HDR_CSUM) &&
	       (js->flags & 0xf) == BCH_CSUM_none && !js->u64s &&
	       !memcmp(js->fs_uuid, c->sb->uuid, BCH_UUID_SIZE) &&
	       js->hdr_csum == jset_hdr_csum(js) && js->seq && js->last_seq <= js->seq;
}

/* What scan_bucket() adds to: every valid entry found, and the newest so far. */
struct scan_state {
	struct jlocation	**locs;
	size_t			*nr, *cap;
	uint64_t		best_seq;
};

/*
 * The entry (or what looks like one) at byte from of the bucket w reads,
 * readable whole: the block there, and as much more as a header of this
 * filesystem claims, up to the bucket's end.
 */
static int jwin_entry(struct bch_fs *c, struct bch_journal *j, struct jwin *w,
		      struct journal_dev *jd, unsigned slot, size_t from,
		      const struct bch_jset **js)
{
	size_t block = (size_t)j->block_sectors << BCH_SECTOR_SHIFT;
	size_t want = JWIN_BYTES > block ? JWIN_BYTES : block;
	int ret = jwin_get(c, w, jd, slot, from, block, want);

	if (ret)
		return ret;
	*js = jwin_at(w, from);
	if ((*js)->magic != BCH_JSET_MAGIC || memcmp((*js)->fs_uuid, c->sb->uuid, BCH_UUID_SIZE))
		return 0;	/* nothing more to read: no entry of ours */
	size_t need = (sizeof(**js) + (size_t)(*js)->u64s * 8 + block - 1) / block * block;
	if (need > block && (ret = jwin_get(c, w, jd, slot, from, need, want)))
		return ret;
	*js = jwin_at(w, from);
	return 0;
}

/* Read bucket slot of j->devs[d] (through w) and record each valid entry in it. */
static int scan_bucket(struct bch_fs *c, struct bch_journal *j, unsigned d, unsigned slot,
		       struct jwin *w, struct scan_state *st)
{
	struct journal_dev *jd = &j->devs[d];
	size_t bytes = (size_t)jd->bucket_sectors << BCH_SECTOR_SHIFT;
	char why[80];
	int ret;

	for (unsigned off = 0; off < jd->bucket_sectors; ) {
		const struct bch_jset *js;
		if ((ret = jwin_entry(c, j, w, jd, slot, (size_t)off << 9, &js)))
			return ret;
		if (stub_valid(c, js, bytes - ((size_t)off << 9))) {
			/* says its entry was written; takes a block of the lane */
			if (js->seq > j->stub_max)
				j->stub_max = js->seq;
			if (js->seq > j->seen_max)
				j->seen_max = js->seq;
			if (js->seq > jd->bucket_seq[slot])
				jd->bucket_seq[slot] = js->seq;
			if (js->seq > st->best_seq) {
				st->best_seq = js->seq;
				jd->cur = slot;
				jd->cur_off = off + j->block_sectors;
			}
			off += j->block_sectors;
			continue;
		}
		ret = jset_validate(c, js, bytes - ((size_t)off << 9), why, sizeof(why));
		if (bch_err_is_dl(ret))
			return bch_fs_err(c, ret, "journal bucket %" PRIu64 ": %s",
					  jd->bucket[slot], why);
		if (ret) {
			note_bad_entry(c, j, js, bytes - ((size_t)off << 9));
			off += j->block_sectors;
			continue;
		}
		if (js->seq > j->seen_max)
			j->seen_max = js->seq;
		if (*st->nr == *st->cap) {
			*st->cap = *st->cap ? *st->cap * 2 : 256;
			struct jlocation *n = realloc(*st->locs, *st->cap * sizeof(**st->locs));
			if (!n)
				return -ENOMEM;
			*st->locs = n;
		}
		unsigned sectors = jset_sectors(j, js->u64s);
		(*st->locs)[(*st->nr)++] = (struct jlocation) { js->seq, js->last_seq, d, slot, off, sectors };
		if (js->seq > jd->bucket_seq[slot])
			jd->bucket_seq[slot] = js->seq;
		if (js->seq > st->best_seq) {
			st->best_seq = js->seq;
			jd->cur = slot;
			jd->cur_off = off + sectors;
		}
		off += sectors;
	}
	return 0;
}

/*
 * Every bucket of every device read whole (a slow path: see
 * bch_journal_read()).  Entries already found are found again: replay and
 * the checks skip a seq seen twice.
 */
static int scan_all(struct bch_fs *c, struct bch_journal *j, struct jlocation **locs,
		    size_t *nr, size_t *cap)
{
	int ret = 0;

	for (unsigned d = 0; d < j->nr_devs && !ret; d++) {
		struct journal_dev *jd = &j->devs[d];
		struct scan_state st = { .locs = locs, .nr = nr, .cap = cap };

		if (!c->devs[jd->dev] || !c->devs[jd->dev]->bdev)
			continue;
		struct jwin w = { 0 };
		for (unsigned sl = 0; sl < jd->nr && !ret; sl++)
			ret = scan_bucket(c, j, d, sl, &w, &st);
		jwin_free(&w);
	}
	return ret;
}

/* Do locs (sorted) hold every entry from the newest's last_seq on, and no stub names a newer one? */
static bool replay_range_whole(struct bch_journal *j, const struct jlocation *locs, size_t nr)
{
	uint64_t want = locs[nr - 1].last_seq;

	for (size_t i = 0; i < nr; i++) {
		if (locs[i].seq < want)
			continue;
		if (locs[i].seq > want)
			return false;
		want++;
	}
	return j->stub_max <= locs[nr - 1].seq;
}

enum { HEAD_EMPTY, HEAD_ENTRY, HEAD_ODD };

/*
 * The first entry of bucket slot: HEAD_ENTRY with its sequence number in
 * *seq, HEAD_EMPTY when the first block is zeros (never written), HEAD_ODD
 * otherwise (torn, damaged, another filesystem's: the caller reads it whole).
 * An entry with a header checksum is dated from its first block; an older
 * one is read whole and its checksum verified.
 */
static int read_head(struct bch_fs *c, struct journal_dev *jd, unsigned slot, struct jwin *win,
		     uint64_t *seq)
{
	struct bch_journal *j = J(c);
	size_t block = (size_t)j->block_sectors << BCH_SECTOR_SHIFT;
	size_t bucket = (size_t)jd->bucket_sectors << BCH_SECTOR_SHIFT;
	char why[80];
	int ret;

	*seq = 0;
	if (block > bucket)
		block = bucket;
	if ((ret = jwin_get(c, win, jd, slot, 0, block, block)))
		return ret;
	const uint64_t *w = jwin_at(win, 0);
	size_t i;
	for (i = 0; i < block / 8 && !w[i]; i++)
		;
	if (i == block / 8)
		return HEAD_EMPTY;
	const struct bch_jset *js = jwin_at(win, 0);
	if (js->magic != BCH_JSET_MAGIC || memcmp(js->fs_uuid, c->sb->uuid, BCH_UUID_SIZE))
		return HEAD_ODD;
	size_t need = sizeof(*js) + (size_t)js->u64s * 8;
	if (need > bucket)
		return HEAD_ODD;
	if (js->flags & BCH_JSET_HDR_CSUM) {
		/* the header vouches for its sequence numbers: the rest is read when needed */
		if (js->hdr_csum != jset_hdr_csum(js) || !js->seq || js->last_seq > js->seq)
			return HEAD_ODD;
		*seq = js->seq;
		return HEAD_ENTRY;
	}
	need = (need + 511) & ~(size_t)511;
	if (need > block && (ret = jwin_get(c, win, jd, slot, 0, need, need)))
		return ret;
	js = jwin_at(win, 0);
	if ((ret = jset_validate(c, js, bucket, why, sizeof(why))))
		return bch_err_is_dl(ret)
			? bch_fs_err(c, ret, "journal bucket %" PRIu64 ": %s", jd->bucket[slot], why)
			: HEAD_ODD;
	*seq = js->seq;
	return HEAD_ENTRY;
}

int bch_journal_read(struct bch_fs *c,
		     int (*fn)(struct bch_fs *c, struct bch_jset *j, void *priv),
		     void *priv, uint64_t *newest)
{
	struct bch_journal *j = J(c);
	struct jlocation *locs = NULL;
	size_t nr = 0, cap = 0;
	struct jwin win = { 0 };
	void *buf = NULL;
	char why[80];
	int ret = 0;

	*newest = 0;
	for (unsigned d = 0; d < j->nr_devs; d++) {
		struct journal_dev *jd = &j->devs[d];
		struct scan_state st = { .locs = &locs, .nr = &nr, .cap = &cap };

		if (!c->devs[jd->dev] || !c->devs[jd->dev]->bdev)
			continue;	/* missing device (degraded): others may hold copies */
		uint64_t *first = calloc(jd->nr ? jd->nr : 1, sizeof(*first));
		bool *done = calloc(jd->nr ? jd->nr : 1, sizeof(*done));
		if (!first || !done) {
			free(first);
			free(done);
			ret = -ENOMEM;
			goto out;
		}
		/*
		 * Phase 1: the head of every bucket.  Entries fill a bucket from its
		 * start in sequence order, so the first entry dates the bucket.  A
		 * head that is neither empty (zeros) nor a valid entry of ours is
		 * read whole, as anything unexpected is.
		 */
		bch_dev_advise_random(c->devs[jd->dev]->bdev, true);
		/* every head at once: one synchronous read each is slow on a big ring */
		for (unsigned sl = 0; sl < jd->nr; sl++)
			bch_dev_willneed(c->devs[jd->dev]->bdev,
					 (jd->bucket[sl] * jd->bucket_sectors) << BCH_SECTOR_SHIFT,
					 (uint64_t)j->block_sectors << BCH_SECTOR_SHIFT);
		for (unsigned sl = 0; sl < jd->nr && !ret; sl++) {
			int h = read_head(c, jd, sl, &win, &first[sl]);
			if (first[sl] > j->seen_max)
				j->seen_max = first[sl];
			if (h < 0)
				ret = h;
			else if (h == HEAD_ODD) {
				ret = scan_bucket(c, j, d, sl, &win, &st);
				done[sl] = true;
			}
		}
		bch_dev_advise_random(c->devs[jd->dev]->bdev, false);
		/*
		 * Phase 2: the newest bucket whole: the newest entry and its
		 * last_seq.  A header may vouch for an entry whose body was torn
		 * by a crash: then the bucket before it in sequence order, and so
		 * on while a bucket not read could start after the newest entry
		 * found.
		 */
		for (;;) {
			uint64_t best = 0;
			for (size_t i = 0; i < nr; i++)
				if (locs[i].jdev == d && locs[i].seq > best)
					best = locs[i].seq;
			int newest_slot = -1;
			for (unsigned sl = 0; sl < jd->nr; sl++)
				if (first[sl] && !done[sl] &&
				    (newest_slot < 0 || first[sl] > first[newest_slot]))
					newest_slot = sl;
			/* done when no bucket left unread can start after the newest entry found */
			if (ret || newest_slot < 0 || first[newest_slot] <= best)
				break;
			ret = scan_bucket(c, j, d, newest_slot, &win, &st);
			done[newest_slot] = true;
		}
		/*
		 * Phase 3: every bucket that may hold entries from last_seq on: those
		 * that start at or after it, and the one before the first of them.
		 */
		uint64_t need = 0;
		for (size_t i = 0; i < nr; i++)
			if (locs[i].jdev == d && (!need || locs[i].seq > locs[need - 1].seq))
				need = i + 1;
		uint64_t from = need ? locs[need - 1].last_seq : UINT64_MAX;
		for (unsigned sl = 0; sl < jd->nr && !ret; sl++) {
			if (!first[sl] || done[sl])
				continue;
			bool wanted = first[sl] >= from;
			if (!wanted) {
				/* the next bucket in sequence order starts after from? */
				uint64_t next = UINT64_MAX;
				for (unsigned o = 0; o < jd->nr; o++)
					if (first[o] > first[sl] && first[o] < next)
						next = first[o];
				wanted = next > from;
			}
			if (wanted) {
				ret = scan_bucket(c, j, d, sl, &win, &st);
				done[sl] = true;
			} else {
				jd->bucket_seq[sl] = first[sl];	/* all older than last_seq: reusable */
			}
		}
		free(first);
		free(done);
		if (ret)
			goto out;
	}
	if (!nr)
		goto out;

	qsort(locs, nr, sizeof(*locs), loc_cmp);
	/*
	 * Phase 3 takes buckets in sequence order as one ring's: a ring split
	 * in lanes in an earlier session than this one (or split differently)
	 * interleaves two rings, and the bucket "before" may be the other
	 * lane's.  A replay range with a hole, or a stub newer than the newest
	 * entry, reads every bucket before anything is called missing.
	 */
	if (!replay_range_whole(j, locs, nr)) {
		if ((ret = scan_all(c, j, &locs, &nr, &cap)))
			goto out;
		qsort(locs, nr, sizeof(*locs), loc_cmp);
	}
	struct jlocation *top = &locs[nr - 1];
	uint64_t last_seq = top->last_seq, want = last_seq;
	*newest = top->seq;
	j->durable = top->seq;
	j->last_seq_ondisk = last_seq;

	/*
	 * Damage the replay would not notice: entries with good headers and bad
	 * bodies that no other device has a good copy of, inside what is
	 * replayed (reported with the gaps below) or after the newest entry.
	 */
	uint64_t lost = fn ? lost_tail(c, j, locs, nr, top->seq) : 0;
	if (lost) {
		if (!c->opts.v[Opt_fsck]) {
			ret = bch_fs_err(c, -BCH_ERR_journal_missing,
					 "journal: entries %" PRIu64 " to at least %" PRIu64 " missing or "
					 "damaged (the newest readable is %" PRIu64 "); run fsck",
					 top->seq + 1, lost, top->seq);
			goto out;
		}
	}

	jwin_free(&win);
	if (fn) {
		/* as big as the largest entry replayed (a bucket's size would all be resident) */
		size_t max_bytes = 512;
		for (size_t i = 0; i < nr; i++)
			if (locs[i].seq >= want && ((size_t)locs[i].sectors << 9) > max_bytes)
				max_bytes = (size_t)locs[i].sectors << 9;
		buf = bch_dev_alloc_buf(max_bytes);
		if (!buf) {
			ret = -ENOMEM;
			goto out;
		}
		for (size_t i = 0; i < nr; i++) {
			struct jlocation *l = &locs[i];
			if (l->seq < want)
				continue;	/* older, or a replica already replayed */
			if (l->seq > want) {
				if (!c->opts.v[Opt_fsck]) {
					ret = bch_fs_err(c, -BCH_ERR_journal_missing,
							 "journal: entry %" PRIu64 " missing (replaying %" PRIu64
							 "..%" PRIu64 ")", want, last_seq, top->seq);
					goto out;
				}
				/* fsck: replay what is there; fsck reports the gap (pass 2) */
				add_gap(c, want, l->seq - 1);
				want = l->seq;
			}
			struct journal_dev *jd = &j->devs[l->jdev];
			size_t bytes = (size_t)l->sectors << 9;
			ret = bch_dev_read(c->devs[jd->dev]->bdev, buf, bytes,
					   ((jd->bucket[l->slot] * jd->bucket_sectors) + l->offset) << 9);
			if (!ret && (ret = jset_validate(c, buf, bytes, why, sizeof(why))) &&
			    !bch_err_is_dl(ret))
				ret = -BCH_ERR_journal_bad;	/* changed under us */
			if (!ret && (ret = jset_open(c, buf, why, sizeof(why))))
				ret = -BCH_ERR_journal_bad;
			if (ret) {
				bch_fs_err(c, ret, "journal entry %" PRIu64 ": %s", l->seq, bch_err_str(ret));
				goto out;
			}
			ret = fn(c, buf, priv);
			if (ret)
				goto out;
			want++;
		}
		if (lost)	/* how far the lost tail went is not known */
			add_gap(c, top->seq + 1, UINT64_MAX);
	}
out:
	jwin_free(&win);
	free(buf);
	free(locs);
	return ret;
}

size_t bch_journal_read_window_max(struct bch_fs *c)
{
	return J(c) ? J(c)->read_window_max : 0;
}

/* ---------------------------------------------------------------- writing */

/* Distinct devices the copies of an entry land on (lanes of one device count once). */
static unsigned copy_devices(struct bch_journal *j)
{
	unsigned n = 0;
	uint64_t seen = 0;

	for (unsigned i = 0; i < j->nr_wdevs; i++)
		if (!(seen & (1ULL << j->devs[i].dev))) {
			seen |= 1ULL << j->devs[i].dev;
			n++;
		}
	return n < j->replicas ? n : j->replicas;
}

int bch_journal_start(struct bch_fs *c, uint64_t min_seq)
{
	struct bch_journal *j = J(c);
	unsigned required = c->opts.v[Opt_metadata_replicas_required];

	/* metadata_replicas_required: that many devices take every entry, or no writing */
	if (required > copy_devices(j))
		return bch_fs_err(c, -BCH_ERR_device_missing,
				  "metadata_replicas_required=%u but only %u device%s can take journal "
				  "copies; open it read-only", required, copy_devices(j),
				  copy_devices(j) == 1 ? "" : "s");

	j->seq = j->durable + 1;
	if (j->seq < min_seq)
		j->seq = min_seq;
	/* never reuse the seq of an entry that was written, even a lost one */
	if (j->seq <= j->seen_max)
		j->seq = j->seen_max + 1;
	if (j->seq <= c->sb->journal_seq_open)
		j->seq = c->sb->journal_seq_open + 1;
	j->kept = false;
	if (j->last_seq_ondisk == 0)
		j->last_seq_ondisk = j->seq;
	j->buf_u64s = 0;
	j->started = true;
	return 0;
}

void bch_journal_clean_start(struct bch_fs *c)
{
	J(c)->clean_start = true;
}

static struct journal_dev *target(struct bch_journal *j, uint64_t seq, unsigned k)
{
	return &j->devs[(seq + k) % j->nr_wdevs];
}

static bool slot_free(struct bch_journal *j, struct journal_dev *jd, unsigned slot)
{
	return !jd->bucket_seq[slot] || jd->bucket_seq[slot] < j->last_seq_ondisk;
}

/*
 * Where would an entry of `sectors` (plus the marker reserve, unless it is
 * the marker itself) go on jd: the current slot, the next one, or nowhere
 * (-1) because the next slot still holds needed entries.
 */
static int place(struct bch_journal *j, struct journal_dev *jd, unsigned sectors,
		 unsigned reserve, unsigned *slot, unsigned *off)
{
	if (jd->cur_off + sectors + reserve <= jd->bucket_sectors) {
		*slot = jd->cur;
		*off = jd->cur_off;
		return 0;
	}
	unsigned next = (jd->cur + 1) % jd->nr;
	if (sectors + reserve > jd->bucket_sectors || !slot_free(j, jd, next))
		return -1;
	*slot = next;
	*off = 0;
	return 0;
}

/*
 * Room every bucket keeps for the entry that follows reclaim: roots plus the
 * btree's internal updates (node moves relinking their parents) made while
 * reclaiming.  Only internal reservations may use it.
 */
#define INTERNAL_RESERVE_U64S(j)	((j)->max_u64s / 4)

/* One relink: a pointer key with a copy per metadata replica, and its header. */
static unsigned relink_u64s(struct bch_fs *c)
{
	unsigned r = c->opts.v[Opt_metadata_replicas] ? c->opts.v[Opt_metadata_replicas] : 1;

	if (r > BCH_REPLICAS_MAX)
		r = BCH_REPLICAS_MAX;
	return 1 + BCH_BKEY_U64s + (sizeof(struct bch_btree_ptr) + r * sizeof(struct bch_extent_ptr)) / 8;
}

/* The newest sequence in the slot after the current one of any write device. */
static uint64_t next_slot_seq_all(struct bch_journal *j)
{
	uint64_t seq = 0;

	for (unsigned i = 0; i < j->nr_wdevs; i++) {
		struct journal_dev *jd = &j->devs[i];
		uint64_t s = jd->bucket_seq[(jd->cur + 1) % jd->nr];
		if (s > seq)
			seq = s;
	}
	return seq;
}

/*
 * The internal reserve an ordinary reservation keeps.  Reclaim frees the
 * next bucket of each ring by writing every node pinned in it, and each
 * write may be a move (with 4k nodes, every write of a node written before
 * is one) that relinks the node in its parent: an internal update, which
 * cannot wait for a bucket to be freed, since it is what frees one.  So the
 * reserve holds a relink (and a quarter more, for splits) for every node
 * pinned in the next buckets, on top of the quarter of an entry it always
 * kept: that quarter covers the nodes the reservation's own keys pin (a
 * commit of 4k nodes pins 41 at most, 500 words of relinks), splits of
 * parents and the roots.  Pins in newer buckets wait for their bucket to be
 * next, when the open entry has a bucket of its own.  Past what an entry
 * can keep, no ordinary reservation fits, and reclaim runs while the room
 * for its relinks is still there.  (journal_evict: 4 buckets of 64 KiB, 4k
 * nodes, 1 MiB cache, every 7th of 20000 keys changed: reclaim's relinks
 * ran out of the fixed quarter, one device with two copies in a commit,
 * two devices with two copies at close.)  Counting every pin instead of
 * the next buckets' halved btree-bench's inserts (300k keys: 149k-261k/s to
 * 84k-100k/s) and doubled its image.
 */
static unsigned reserve_u64s(struct bch_fs *c)
{
	struct bch_journal *j = J(c);
	uint64_t upto = next_slot_seq_all(j);

	if (upto != j->debt_upto) {
		j->debt_upto = upto;
		j->debt_pins = 0;
		for (struct bch_journal_pin *p = j->pins.next; p != &j->pins && p->seq <= upto; p = p->next)
			j->debt_pins++;
	}
	uint64_t debt = (uint64_t)j->debt_pins * relink_u64s(c);

	debt += debt / 4 + INTERNAL_RESERVE_U64S(j);
	return debt < 2 * j->max_u64s ? debt : 2 * j->max_u64s;	/* fits nothing */
}


/*
 * What a stub keeps after it: the quarter and a roots-only entry (as before
 * the pins counted: whether an entry gets a stub does not depend on them).
 */
static unsigned marker_sectors(struct bch_fs *c)
{
	return entry_sectors(J(c), roots_u64s(c) + INTERNAL_RESERVE_U64S(J(c))) +
	       entry_sectors(J(c), roots_u64s(c));
}

/*
 * Internal reservations keep room for one roots-only entry, so the entry
 * that records an advanced last_seq after reclaim can always be written;
 * ordinary ones also keep the internal reserve (reserve_u64s()).
 */
static bool __fits(struct bch_fs *c, uint64_t seq, unsigned u64s, bool internal, unsigned roots)
{
	struct bch_journal *j = J(c);
	unsigned slot, off;
	unsigned sectors = entry_sectors(j, u64s + roots);
	unsigned keep = internal ? 0 : reserve_u64s(c);
	/* kept after it: a roots-only entry, and for an ordinary one the reserve's entry too */
	unsigned reserve = entry_sectors(j, roots) + (internal ? 0 : entry_sectors(j, roots + keep));

	if ((uint64_t)u64s + roots + keep > j->max_u64s)
		return false;
	for (unsigned k = 0; k < j->replicas; k++)
		if (place(j, target(j, seq, k), sectors, reserve, &slot, &off))
			return false;
	return true;
}

static bool fits(struct bch_fs *c, uint64_t seq, unsigned u64s, bool internal)
{
	/* each once: a commit asks several times (its 4 KiB write: ~23 sums of the roots) */
	return __fits(c, seq, u64s, internal, roots_u64s(c));
}

/*
 * What the last entry written said the roots were: a flush with nothing else
 * new writes nothing when they have not changed since.
 */
static void remember_roots(struct bch_journal *j, const __le64 *roots, unsigned u64s)
{
	if (u64s > j->last_roots_u64s || !j->last_roots) {
		uint64_t *n = realloc(j->last_roots, (u64s ? u64s : 1) * 8);
		if (!n) {
			j->last_roots_u64s = UINT32_MAX;	/* unknown: compare unequal */
			return;
		}
		j->last_roots = n;
	}
	memcpy(j->last_roots, roots, u64s * 8);
	j->last_roots_u64s = u64s;
}

static bool roots_changed(struct bch_fs *c)
{
	struct bch_journal *j = J(c);
	unsigned u64s = roots_u64s(c);

	if (!j->roots_fill || !u64s)
		return u64s != j->last_roots_u64s;
	if (u64s != j->last_roots_u64s)
		return true;
	uint64_t *now = calloc(u64s, 8);
	if (!now)
		return true;
	j->roots_fill(c, (struct bch_jset_entry *)now);
	bool changed = memcmp(now, j->last_roots, u64s * 8) != 0;
	free(now);
	return changed;
}

/* Would writing the open entry now make anything durable that is not? */
static bool open_entry_needed(struct bch_fs *c)
{
	struct bch_journal *j = J(c);

	return j->buf_u64s || j->pending || roots_changed(c);
}

/* One place an entry (or its stub) is written to. */
struct jwrite {
	struct journal_dev	*jd;
	unsigned		slot, off, sectors;
};

static int jwrite_one(struct bch_fs *c, const struct jwrite *w, const void *buf, size_t bytes)
{
	struct bch_dev *ca = c->devs[w->jd->dev];
	int ret;

	if (!ca || !ca->bdev)
		return bch_fs_err(c, -BCH_ERR_device_missing, "journal device %u missing", w->jd->dev);
	ret = bch_dev_write(ca->bdev, buf, bytes,
			    ((w->jd->bucket[w->slot] * w->jd->bucket_sectors) + w->off) << BCH_SECTOR_SHIFT);
	if (ret)
		bch_fs_err(c, ret, "%s: writing journal entry: %s", bch_dev_path(ca->bdev),
			   bch_err_str(ret));
	return ret;
}

/* The stub of entry js (bcachefs_format.h, BCH_JSET_STUB): its header, one block. */
static struct bch_jset *stub_build(struct bch_fs *c, const struct bch_jset *js)
{
	size_t bytes = (size_t)J(c)->block_sectors << BCH_SECTOR_SHIFT;
	struct bch_jset *st = bch_dev_alloc_buf(bytes);

	if (!st)
		return NULL;
	memset(st, 0, bytes);
	st->magic = BCH_JSET_MAGIC;
	memcpy(st->fs_uuid, js->fs_uuid, BCH_UUID_SIZE);
	st->seq = js->seq;
	st->last_seq = js->last_seq;
	st->version = js->version;
	st->flags = BCH_CSUM_none | BCH_JSET_HDR_CSUM | BCH_JSET_STUB;
	st->u64s = 0;
	st->hdr_csum = jset_hdr_csum(st);
	return st;
}

static int stub_write(struct bch_fs *c, const struct jwrite *w, const struct bch_jset *js)
{
	struct bch_jset *st = stub_build(c, js);
	int ret;

	if (!st)
		return -ENOMEM;
	ret = jwrite_one(c, w, st, (size_t)J(c)->block_sectors << BCH_SECTOR_SHIFT);
	free(st);
	return ret;
}

/*
 * The stub of entry js, once the entry is durable, and not flushed itself
 * (the next entry's preflush or the close does): a stub on disk means its
 * entry was acknowledged.  Best effort: a lane with no room outside its
 * reserve gets none, and a failed stub write fails nothing.
 */
static void write_stub(struct bch_fs *c, const struct bch_jset *js)
{
	struct bch_journal *j = J(c);
	struct journal_dev *jd = target(j, js->seq, j->replicas);
	struct jwrite w;

	if (place(j, jd, j->block_sectors, marker_sectors(c), &w.slot, &w.off))
		return;
	w.jd = jd;
	w.sectors = j->block_sectors;
	if (!stub_write(c, &w, js)) {
		jd->cur = w.slot;
		jd->cur_off = w.off + w.sectors;
		if (js->seq > jd->bucket_seq[w.slot])
			jd->bucket_seq[w.slot] = js->seq;
	}
	c->err_msg[0] = 0;
}

/*
 * The member's discard option: buckets whose entries are all older than the
 * last_seq now on disk are discarded (recovery reads from last_seq on; a
 * discarded bucket reads as empty or as the old entries) and become empty
 * slots.  Best effort, as for buckets (alloc.c).
 */
static void journal_discard(struct bch_fs *c, struct bch_journal *j)
{
	for (unsigned d = 0; d < j->nr_devs; d++) {
		struct journal_dev *jd = &j->devs[d];
		struct bch_dev *ca = c->devs[jd->dev];
		if (!ca || !ca->bdev || !bch_sb_member(c->sb, jd->dev)->discard)
			continue;
		for (unsigned sl = 0; sl < jd->nr; sl++)
			if (sl != jd->cur && jd->bucket_seq[sl] && jd->bucket_seq[sl] < j->last_seq_ondisk) {
				uint64_t bytes = (uint64_t)jd->bucket_sectors << BCH_SECTOR_SHIFT;
				bch_dev_discard(ca->bdev, jd->bucket[sl] * bytes, bytes);
				jd->bucket_seq[sl] = 0;
			}
	}
}

/* ------------------------------------------------------- journal writer */

/*
 * Entries from seq on may be lost (a write or a flush failed): none of
 * them, nor any later one, is ever counted written or durable, and no
 * entry is written any more (one past the hole would not replay, or would
 * replay over it).  Every flush of a seq at or past the first such seq
 * answers ret, the first failure's; a flush of an earlier one (written
 * before, only a flush of the devices away) still works.  Cleared only by
 * a new open (a remount): the journal is read again from the disk then.
 */
static void journal_lost(struct bch_fs *c, uint64_t seq, int ret)
{
	struct bch_journal *j = J(c);

	if (j->lost && j->lost <= seq)
		return;
	j->lost = seq;
	j->lost_ret = ret;
	if (j->written >= seq) {
		j->written = j->durable;
		j->written_last_seq = j->last_seq_ondisk;
	}
}

/* Does a flush of seq reach a lost entry?  Its error, else 0. */
static int lost_check(struct bch_journal *j, uint64_t seq)
{
	return j->lost && seq >= j->lost ? j->lost_ret : 0;
}

/*
 * Wait for the oldest entry in flight and account for it: written, and
 * its preflush made the entries written before it durable (and counts as
 * a flush of every device unless flush_gen was asked once it was begun: a
 * hint taken then may postdate the flush's start).  A failure is the
 * filesystem's error: the entry is not written, nor is any queued after
 * it (journal_writer.h (4)): they are waited for here too.
 */
static int jwriter_reap_one(struct bch_fs *c)
{
	struct bch_journal *j = J(c);
	struct jflight *f = &j->fl[j->fl_first];
	int ret = bch_jwriter_wait(&j->wr);
	bool gen_read = f->gen_read;

	j->fl_first = (j->fl_first + 1) % BCH_JWRITER_QUEUE;
	j->fl_nr--;
	free(f->js);
	free(f->stub);
	f->js = f->stub = NULL;
	f->job.buf = f->job.stub = NULL;
	f->gen_read = false;
	if (ret && f->job.cancelled && j->lost)
		return ret;	/* lost with an earlier entry, which said so */
	if (ret) {
		/*
		 * A failed write followed its preflush: what that covered is
		 * durable.  A failed flush leaves everything since the last
		 * good one in doubt.  (A cancelled job with no loss before it
		 * cannot be told apart: taken as lost itself.)
		 */
		j->written = f->covers;
		j->written_last_seq = f->covers_last_seq;
		if (f->job.preflush && !f->job.failed_flush && !f->job.cancelled &&
		    f->covers > j->durable) {
			j->durable = f->covers;
			j->last_seq_ondisk = f->covers_last_seq;
		}
		journal_lost(c, f->job.failed_flush ? j->durable + 1 : f->seq, ret);
		if (f->job.failed_bd)
			bch_fs_err(c, ret, "%s: %s journal entry %" PRIu64 ": %s",
				   bch_dev_path(f->job.failed_bd),
				   f->job.failed_flush ? "flushing before" : "writing", f->seq,
				   bch_err_str(ret));
		else
			bch_fs_err(c, ret, "journal entry %" PRIu64 ": not written: %s", f->seq,
				   bch_err_str(ret));
		bch_fs_error(c, ret, false);
		while (j->fl_nr)
			jwriter_reap_one(c);
		return ret;
	}
	if (f->job.preflush) {
		j->flush_gen += !gen_read;
		if (f->covers > j->durable) {
			j->durable = f->covers;
			j->last_seq_ondisk = f->covers_last_seq;
			journal_discard(c, j);
		}
	}
	if (f->job.flush) {
		j->durable = f->seq;
		j->last_seq_ondisk = f->last_seq;
		journal_discard(c, j);
	}
	return 0;
}

/* Wait for every entry in flight, oldest first. */
static int jwriter_reap(struct bch_fs *c)
{
	int ret = 0;

	while (!ret && J(c)->fl_nr)
		ret = jwriter_reap_one(c);
	return ret;
}

/* Account for the entries in flight the writer is done with; never waits. */
static int jwriter_reap_done(struct bch_fs *c)
{
	int ret = 0;

	while (!ret && J(c)->fl_nr && bch_jwriter_done(&J(c)->wr))
		ret = jwriter_reap_one(c);
	return ret;
}

/* Stop the writer (the filesystem closes): the entry in flight is waited for. */
static void jwriter_exit(struct bch_fs *c)
{
	jwriter_reap(c);
	bch_jwriter_stop(&J(c)->wr);
}

/*
 * Flush every device: each write issued before is durable after.  Counted
 * (flush_gen), so a btree node that must follow such a flush (its parent's
 * hints, btree_update.c) can tell whether one came since.  The entry in
 * flight is waited for first: the flush makes it durable too.
 */
static int flush_devs(struct bch_fs *c)
{
	int ret;

	if (c->journal && (ret = jwriter_reap(c)))
		return ret;

	for (unsigned i = 0; i < BCH_SB_MEMBERS_MAX; i++)
		if (c->devs[i] && c->devs[i]->bdev && (ret = bch_dev_flush(c->devs[i]->bdev)))
			return ret;
	if (c->journal) {
		struct bch_journal *j = J(c);
		j->flush_gen++;
		/* an entry written without its flush (write_full) is durable now */
		if (j->written > j->durable) {
			j->durable = j->written;
			j->last_seq_ondisk = j->written_last_seq;
			journal_discard(c, j);
		}
	}
	return 0;
}

int bch_journal_flush_devs(struct bch_fs *c)
{
	int ret = flush_devs(c);

	return ret ? bch_fs_err(c, ret, "flushing the devices: %s", bch_err_str(ret)) : 0;
}

uint64_t bch_journal_flush_gen(struct bch_fs *c)
{
	if (!c->journal)
		return 0;
	struct bch_journal *j = J(c);
	/* a flush begun (in flight or done) may predate what the caller's value is for */
	unsigned begun = j->fl_nr ? bch_jwriter_begun(&j->wr) : 0;

	for (unsigned i = 0; i < begun && i < j->fl_nr; i++)
		j->fl[(j->fl_first + i) % BCH_JWRITER_QUEUE].gen_read = true;
	return j->flush_gen;
}

/*
 * Hand the open entry, sealed in js, to the writer (written because it is
 * full, so no one waits for it): its places (and its stub's) are taken and
 * the open entry moves on now, as if it were written; the preflush, the
 * write and, with flush, the entry's flush and its stub run while requests
 * fill the next entry.  It counts as written and (with flush) durable only
 * once reaped.  false (nothing changed): write it in line, as without the
 * writer (it could not start, a device is missing, no memory).
 */
static bool journal_submit(struct bch_fs *c, struct bch_jset *js, size_t bytes, unsigned sectors,
			   bool flush)
{
	struct bch_journal *j = J(c);
	struct jflight *f = &j->fl[(j->fl_first + j->fl_nr) % BCH_JWRITER_QUEUE];
	struct bch_jwriter_job *w = &f->job;
	unsigned slot[BCH_REPLICAS_MAX], off[BCH_REPLICAS_MAX], st_slot = 0, st_off = 0;
	struct journal_dev *st_jd = NULL;

	if (j->replicas > BCH_REPLICAS_MAX || j->fl_nr >= BCH_JWRITER_QUEUE)
		return false;
	/* the stub's place: a lane no copy goes to (write_stub()) */
	if (flush && j->stubs && j->replicas < j->nr_wdevs) {
		st_jd = target(j, j->seq, j->replicas);
		struct bch_dev *ca = c->devs[st_jd->dev];
		if (!ca || !ca->bdev ||
		    place(j, st_jd, j->block_sectors, marker_sectors(c), &st_slot, &st_off))
			st_jd = NULL;	/* none, as write_stub() */
	}
	for (unsigned k = 0; k < j->replicas; k++) {
		struct journal_dev *jd = target(j, j->seq, k);
		struct bch_dev *ca = c->devs[jd->dev];
		if (!ca || !ca->bdev || place(j, jd, sectors, 0, &slot[k], &off[k]))
			return false;
		w->bd[k] = ca->bdev;
		w->off[k] = ((jd->bucket[slot[k]] * jd->bucket_sectors) + off[k]) << BCH_SECTOR_SHIFT;
	}
	f->stub = st_jd ? stub_build(c, js) : NULL;
	if (st_jd && !f->stub)
		return false;
	if (!bch_jwriter_start(&j->wr)) {
		free(f->stub);
		f->stub = NULL;
		return false;
	}
	w->stub = f->stub;
	if (st_jd) {
		w->stub_bd = c->devs[st_jd->dev]->bdev;
		w->stub_bytes = (size_t)j->block_sectors << BCH_SECTOR_SHIFT;
		w->stub_off = ((st_jd->bucket[st_slot] * st_jd->bucket_sectors) + st_off)
			      << BCH_SECTOR_SHIFT;
		st_jd->cur = st_slot;
		st_jd->cur_off = st_off + j->block_sectors;
		if (j->seq > st_jd->bucket_seq[st_slot])
			st_jd->bucket_seq[st_slot] = j->seq;
	}
	w->flush = flush;
	f->last_seq = js->last_seq;
	w->nr = j->replicas;
	w->nr_flush = 0;
	for (unsigned i = 0; i < BCH_SB_MEMBERS_MAX; i++)
		if (c->devs[i] && c->devs[i]->bdev)
			w->flush_bd[w->nr_flush++] = c->devs[i]->bdev;
	w->preflush = !j->clean_start;
	w->buf = f->js = js;
	w->bytes = bytes;
	f->seq = j->seq;
	f->covers = j->written;
	f->covers_last_seq = j->written_last_seq;
	f->gen_read = false;
	j->fl_nr++;
	bch_jwriter_submit(&j->wr, w);

	for (unsigned k = 0; k < j->replicas; k++) {
		struct journal_dev *jd = target(j, j->seq, k);
		jd->cur = slot[k];
		jd->cur_off = off[k] + sectors;
		if (j->seq > jd->bucket_seq[slot[k]])
			jd->bucket_seq[slot[k]] = j->seq;
	}
	j->clean_start = false;
	j->written = j->seq;
	j->written_last_seq = js->last_seq;
	j->seq++;
	j->buf_u64s = 0;
	j->pending = false;
	return true;
}

/*
 * An entry's buffer, page-aligned (direct I/O): zeroed only where nothing
 * is copied in: the header with its first head words (the nonce entry,
 * filled field by field) and the tail after its u64s words (zeroing all of
 * it, twice, was a quarter of a 4 KiB random write's journal cost).
 */
static struct bch_jset *entry_buf(size_t bytes, unsigned u64s, unsigned head)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t used = sizeof(struct bch_jset) + (size_t)u64s * 8;
	void *p;

	if (used > bytes || head > u64s || posix_memalign(&p, page > 0 ? page : 4096, bytes))
		return NULL;
	memset(p, 0, sizeof(struct bch_jset) + (size_t)head * 8);
	memset((char *)p + used, 0, bytes - used);
	return p;
}

/*
 * Write the open entry (roots added now) and, with flush, flush it: it
 * becomes durable.  Without (an entry written because it is full, which no
 * one waits for): durable at the next flush of the devices, which the next
 * entry's preflush is, so a run of full entries costs one flush each, not
 * two.  Until then j->written is ahead of j->durable, and its last_seq
 * frees nothing.  async (write_full): handed to the writer thread when it
 * can be (journal_submit), else written here.
 */
static int journal_write_flush(struct bch_fs *c, bool flush, bool async)
{
	struct bch_journal *j = J(c);
	unsigned r = roots_u64s(c), u64s = j->buf_u64s + r;
	unsigned sectors = entry_sectors(j, u64s);
	unsigned extra = j->extra_u64s;
	uint64_t counter = 0;
	__le64 *roots = NULL;	/* encrypted: a plain copy of the entry's roots */
	size_t bytes = (size_t)sectors << BCH_SECTOR_SHIFT;
	struct bch_jset *js;
	int ret = 0;

	if (c->read_only)
		return -BCH_ERR_fs_read_only;
	if (j->lost)
		return j->lost_ret;	/* never past the hole */
	if (c->emergency_ro)
		return -BCH_ERR_fs_emergency_ro;
	/*
	 * Entries land in order: handed to the writer, behind those in flight
	 * (the oldest waited for when the queue is full); written here, after
	 * all of them.
	 */
	if ((ret = async ? jwriter_reap_done(c) : jwriter_reap(c)))
		return ret;
	if (async && j->fl_nr == BCH_JWRITER_QUEUE && (ret = jwriter_reap_one(c)))
		return ret;
	/*
	 * Nowhere to put it: nothing is written and nothing changes (the
	 * caller may reclaim and try again), so the filesystem stays writable.
	 */
	for (unsigned k = 0; k < j->replicas; k++) {
		struct journal_dev *jd = target(j, j->seq, k);
		unsigned slot, off;

		if (place(j, jd, sectors, 0, &slot, &off))
			return bch_fs_err(c, -BCH_ERR_journal_full, "journal full on device %u",
					  jd->dev);
	}
	/* encrypted: the counter value is durable before it is used (crypt.h) */
	if (extra && (ret = bch_crypt_nonce_take(c, &counter)))
		return ret;
	if (counter > j->nonce_max)
		j->nonce_max = counter;
	u64s += extra;
	if (!(js = entry_buf(bytes, u64s, extra)))
		return -ENOMEM;
	js->magic = BCH_JSET_MAGIC;
	memcpy(js->fs_uuid, c->sb->uuid, BCH_UUID_SIZE);
	js->seq = j->seq;
	js->last_seq = j->pins.next != &j->pins ? j->pins.next->seq : j->seq;
	if (js->last_seq > j->seq)
		js->last_seq = j->seq;
	js->version = bch_fs_write_version(c);
	js->flags = (j->csum_type & 0xf) | BCH_JSET_HDR_CSUM;
	js->u64s = u64s;
	js->hdr_csum = jset_hdr_csum(js);
	if (extra) {
		struct bch_jset_entry *ne = (struct bch_jset_entry *)js->_data;
		ne->u64s = 1;
		ne->type = BCH_JSET_ENTRY_nonce;
		ne->_data[0] = counter;
	}
	memcpy(js->_data + extra, j->buf, j->buf_u64s * 8);
	if (r && j->roots_fill)
		j->roots_fill(c, (struct bch_jset_entry *)(js->_data + extra + j->buf_u64s));
	if (extra) {
		/* sealed in place; the roots kept plain for remember_roots() below */
		if (r && !(roots = malloc((size_t)r * 8))) {
			free(js);
			return -ENOMEM;
		}
		if (r)
			memcpy(roots, js->_data + (u64s - r), (size_t)r * 8);
		ret = bch_crypt_jset_encrypt(c, counter, js->seq, &js->magic,
					     sizeof(*js) - sizeof(js->csum) + extra * 8, js->_data + extra,
					     (size_t)(u64s - extra) * 8, &js->csum);
	} else {
		ret = bch_checksum(j->csum_type, &js->magic, sizeof(*js) - sizeof(js->csum) + u64s * 8,
				   &js->csum);
	}
	if (ret)
		bch_fs_err(c, ret, "journal entry %" PRIu64 ": %s", (uint64_t)j->seq,
			   bch_err_str(ret));
	if (!ret && async && journal_submit(c, js, bytes, sectors, flush)) {
		remember_roots(j, roots ? roots : js->_data + (u64s - r), r);
		free(roots);
		return 0;	/* js is the writer's now */
	}
	if (!ret && j->fl_nr && (ret = jwriter_reap(c))) {
		free(roots);
		free(js);
		return ret;	/* the writer could not take it (forked): in line, after those */
	}

	/*
	 * Preflush: every write issued before this entry (btree nodes the
	 * entry links in, on any device) must be durable before the entry can
	 * land, or a power cut could keep the entry and lose what it points to.
	 */
	if (!ret && !j->clean_start && (ret = flush_devs(c)))
		bch_fs_err(c, ret, "flushing before journal entry %" PRIu64 ": %s",
			   (uint64_t)j->seq, bch_err_str(ret));
	j->clean_start = false;

	/*
	 * The copies (and the stub) are written, then each device written to
	 * is flushed once: two lanes of one device cost one flush.
	 */
	struct jwrite w[BCH_REPLICAS_MAX + 1];
	unsigned nw = 0;
	for (unsigned k = 0; k < j->replicas && !ret; k++) {
		struct journal_dev *jd = target(j, j->seq, k);
		if (place(j, jd, sectors, 0, &w[nw].slot, &w[nw].off)) {
			ret = bch_fs_err(c, -BCH_ERR_journal_full, "journal full on device %u", jd->dev);
			break;
		}
		w[nw].jd = jd;
		w[nw].sectors = sectors;
		ret = jwrite_one(c, &w[nw++], js, bytes);
	}
	for (unsigned i = 0; i < nw && !ret && flush; i++) {
		bool flushed = false;
		for (unsigned k = 0; k < i; k++)
			flushed |= w[k].jd->dev == w[i].jd->dev;
		struct bch_dev *ca = c->devs[w[i].jd->dev];
		if (!flushed && (ret = bch_dev_flush(ca->bdev)))
			bch_fs_err(c, ret, "%s: flushing journal entry %" PRIu64 ": %s",
				   bch_dev_path(ca->bdev), (uint64_t)j->seq, bch_err_str(ret));
	}
	for (unsigned i = 0; i < nw && !ret; i++) {
		struct journal_dev *jd = w[i].jd;
		jd->cur = w[i].slot;
		jd->cur_off = w[i].off + w[i].sectors;
		if (j->seq > jd->bucket_seq[w[i].slot])
			jd->bucket_seq[w[i].slot] = j->seq;
	}
	if (!ret) {
		j->written = j->seq;
		j->written_last_seq = js->last_seq;
		if (flush) {
			j->durable = j->seq;
			j->last_seq_ondisk = js->last_seq;
			journal_discard(c, j);
		}
		/* the stub: its entry is durable (no stub, no write_full without flush) */
		if (flush && j->stubs && j->replicas < j->nr_wdevs)
			write_stub(c, js);
		j->seq++;
		j->buf_u64s = 0;
		j->pending = false;
		remember_roots(j, roots ? roots : js->_data + (u64s - r), r);
	} else {
		/* an entry not written; with a failed preflush, those not flushed since either */
		if (!j->lost)
			journal_lost(c, j->durable + 1, ret);
		bch_fs_error(c, ret, false);
	}
	free(roots);
	free(js);
	return ret;
}

static int journal_write(struct bch_fs *c)
{
	return journal_write_flush(c, true, false);
}

/*
 * The open entry has no room for u64s more: written, its flush left to the
 * next one when the reservation then fits.  When it still does not (the
 * ring is short of room), flushed now, as an entry always was: the last_seq
 * it records frees buckets only once it is durable, so what comes next
 * (make_room, an internal update) sees the ring it saw before.  With stubs
 * (one copy in lanes) always flushed: a stub follows its entry's flush, and
 * placed later it would take lane room the reservations since did not count.
 * Either way the writer thread does it when it can (journal_submit): the
 * entry's flush, if any, is the writer's, and its stub's place is taken now.
 */
static int write_full(struct bch_fs *c, unsigned u64s, bool internal)
{
	struct bch_journal *j = J(c);
	int ret = journal_write_flush(c, j->stubs && j->replicas < j->nr_wdevs, true);

	if (!ret && !fits(c, j->seq, u64s, internal) && j->written > j->durable)
		ret = bch_journal_flush_devs(c);
	return ret;
}

/* Flush the pins (oldest first) whose sequence is durable and at most upto. */
static int reclaim_upto(struct bch_fs *c, uint64_t upto)
{
	struct bch_journal *j = J(c);
	int ret = 0;

	while (!ret && j->pins.next != &j->pins && j->pins.next->seq <= j->durable &&
	       j->pins.next->seq <= upto) {
		struct bch_journal_pin *p = j->pins.next;
		uint64_t seq = p->seq;

		ret = p->flush(c, p, seq);
		/* flush drops the pin (and may free it): only look if still listed */
		if (!ret && j->pins.next == p && p->seq == seq)
			bch_journal_pin_drop(c, p);
	}
	return ret;
}

static int reclaim_durable(struct bch_fs *c)
{
	return reclaim_upto(c, UINT64_MAX);
}

/* The newest sequence in the slot after the current one of any target device. */
static uint64_t next_slot_seq(struct bch_journal *j)
{
	uint64_t seq = 0;

	for (unsigned k = 0; k < j->replicas; k++) {
		struct journal_dev *jd = target(j, j->seq, k);
		uint64_t s = jd->bucket_seq[(jd->cur + 1) % jd->nr];
		if (s > seq)
			seq = s;
	}
	return seq;
}

/*
 * The ring has no room even for the entry that would record an advanced
 * last_seq (only a journal left full on disk by an older version, or the
 * reserve used up by flushes that could not reclaim): write back every
 * pinned node, let the spill function record the roots elsewhere (the clean
 * record), and then nothing the ring holds is needed.  Only when the open
 * entry holds no keys (they would have to be durable first).
 */
static int spill(struct bch_fs *c, unsigned u64s)
{
	struct bch_journal *j = J(c);
	int ret;

	if (!j->spill || j->buf_u64s)
		return bch_fs_err(c, -BCH_ERR_journal_full, "journal full: nothing left to reclaim");
	c->err_msg[0] = 0;
	if ((ret = reclaim_durable(c)))
		return ret;
	if (j->buf_u64s || j->pins.next != &j->pins)
		return bch_fs_err(c, -BCH_ERR_journal_full,
				  "journal full: nodes written back still need the journal");
	/*
	 * The clean record names the roots as they are now: every node written
	 * back above (a new root and its halves among them, written without a
	 * journal flush: btree.h invariant (6)) is durable before it lands.
	 */
	if ((ret = bch_journal_flush_devs(c)))
		return ret;
	if ((ret = j->spill(c)))
		return ret;
	j->last_seq_ondisk = j->seq;	/* every bucket is free */
	j->kept = false;
	return fits(c, j->seq, j->buf_u64s + u64s, false) ? 0
		: bch_fs_err(c, -BCH_ERR_journal_full, "journal full: no room after spilling");
}

/*
 * The reserve kept for the coming entries too: with fewer replicas than
 * write devices, entries take turns on the devices (target()), so the
 * device of the next entry is not the open one's.  An entry grown by
 * internal updates (evictions' moves relink through the reserve) and then
 * written from the top can leave its device short of the reserve with
 * nothing restoring it: the next entry there is opened with no room for
 * reclaim's own updates (journal full at close).  Checked while the open
 * entry's device has the room those updates need.
 */
static bool reserve_kept(struct bch_fs *c, unsigned u64s)
{
	struct bch_journal *j = J(c);

	if (!fits(c, j->seq, j->buf_u64s + u64s, false))
		return false;
	for (unsigned k = 1; k < j->nr_wdevs; k++)
		if (!fits(c, j->seq + k, 0, false))
			return false;
	return true;
}

/*
 * Make room for u64s more in the open entry, keeping the reserve: flush the
 * pins (their node writes may add internal updates to the open entry, which
 * the bucket's reserve holds), then write the open entry, which records the
 * advanced last_seq and so frees buckets.  Writes at least one entry unless
 * there is room already.
 */
static int make_room(struct bch_fs *c, unsigned u64s)
{
	struct bch_journal *j = J(c);
	int ret = 0;

	j->reclaiming = true;
	if (reserve_kept(c, u64s))
		goto out;
	/* a full entry written without its flush: durable first, so its pins can go */
	if (j->written > j->durable && (ret = bch_journal_flush_devs(c)))
		goto out;
	for (unsigned tries = 0; tries < 3 && !ret; tries++) {
		bool open_fits = fits(c, j->seq, j->buf_u64s + u64s, false);

		if (open_fits && (reserve_kept(c, u64s) || tries))
			goto out;
		/*
		 * Enough to free the next bucket: the pins up to its newest entry
		 * (fewer node writes, so fewer internal updates to hold).  The
		 * last try takes them all.  Only the coming entries short of
		 * the reserve: the next buckets of every device, once.
		 */
		uint64_t upto = !open_fits ? next_slot_seq(j) : next_slot_seq_all(j);
		if (!(ret = reclaim_upto(c, tries < 2 ? upto : UINT64_MAX)))
			ret = journal_write(c);
	}
	if (ret == -BCH_ERR_journal_full || (!ret && !fits(c, j->seq, j->buf_u64s + u64s, false)))
		ret = spill(c, u64s);
out:
	j->reclaiming = false;
	return ret;
}

/*
 * May a flush reclaim (write btree nodes)?  Not from inside reclaim, a btree
 * operation (no_shrink: a node write, split or move is under way) or the
 * allocator's own flush (called while a node is being allocated): those
 * writes would nest.  They write the open entry with the reserve instead;
 * the next flush from the top reclaims.
 */
static bool may_reclaim(struct bch_fs *c)
{
	return !J(c)->reclaiming && !c->alloc_flushing && !(c->roots && c->roots->no_shrink);
}

/*
 * Make the open entry durable.  The reclaim rule: when writing it would eat
 * into the reserve every bucket keeps (the room for the entry that records an
 * advanced last_seq), reclaim first, so the journal never ends up full with
 * nothing able to free it, whatever the workload.
 */
static int flush_open(struct bch_fs *c, bool reclaim)
{
	struct bch_journal *j = J(c);
	uint64_t want = j->seq;
	int ret;

	if (reclaim && !fits(c, j->seq, j->buf_u64s, false)) {
		if ((ret = make_room(c, 0)))
			return ret;
		if (j->durable >= want)
			return 0;
	}
	return journal_write(c);
}

int bch_journal_res_get(struct bch_fs *c, unsigned u64s, struct bch_journal_res *res)
{
	struct bch_journal *j = J(c);
	int ret;

	if (c->read_only || !j->started)
		return -BCH_ERR_fs_read_only;
	if (c->emergency_ro)
		return -BCH_ERR_fs_emergency_ro;
	/* the roots summed once (~140 instructions a sum, every commit) */
	unsigned roots = roots_u64s(c);
	if (u64s + roots > j->max_u64s)
		return bch_fs_err(c, -EINVAL, "transaction too big for one journal entry "
				  "(%u of at most %u words)", u64s, j->max_u64s - roots);
	res->wrote = false;
	if (!__fits(c, j->seq, j->buf_u64s + u64s, false, roots)) {
		res->wrote = true;
		if (j->buf_u64s && (ret = write_full(c, u64s, false)))
			return ret;
		if ((ret = make_room(c, u64s)))
			return ret;
	}
	res->seq = j->seq;
	res->u64s = u64s;
	res->used = 0;
	j->reserved = u64s;
	j->pending = true;
	return 0;
}

int bch_journal_restore_reserve(struct bch_fs *c)
{
	struct bch_journal *j = J(c);
	int ret;

	if (c->read_only || c->emergency_ro || !j->started || !may_reclaim(c))
		return 0;
	/* a commit asks once: the same answer as the last one's, mostly (fits() x2: 0.6k) */
	unsigned roots = roots_u64s(c);
	if (j->kept && j->kept_seq == j->seq && j->kept_roots == roots)
		return 0;
	if (reserve_kept(c, 0)) {
		j->kept = true;
		j->kept_seq = j->seq;
		j->kept_roots = roots;
		return 0;
	}
	/* the open entry written only when it is what eats the reserve */
	if (j->buf_u64s && !fits(c, j->seq, j->buf_u64s, false) && (ret = write_full(c, 0, false)))
		return ret;
	return make_room(c, 0);
}

int bch_journal_res_get_internal(struct bch_fs *c, unsigned u64s, struct bch_journal_res *res)
{
	struct bch_journal *j = J(c);
	int ret;

	if (c->read_only || !j->started)
		return -BCH_ERR_fs_read_only;
	j->kept = false;	/* may eat into the reserve */
	if (!fits(c, j->seq, j->buf_u64s + u64s, true)) {
		if (j->buf_u64s && (ret = write_full(c, u64s, true)))
			return ret;
		/* no reclaim here: what that entry's last_seq frees takes its flush */
		if (!fits(c, j->seq, u64s, true) && j->written > j->durable &&
		    (ret = bch_journal_flush_devs(c)))
			return ret;
		if (!fits(c, j->seq, u64s, true))
			return bch_fs_err(c, -BCH_ERR_journal_full,
					  "journal full (no room for a btree update)");
	}
	res->seq = j->seq;
	res->u64s = u64s;
	res->used = 0;
	j->pending = true;
	return 0;
}

void *bch_journal_res_add(struct bch_fs *c, struct bch_journal_res *res, unsigned type,
			  unsigned btree_id, unsigned level, unsigned data_u64s)
{
	struct bch_journal *j = J(c);
	struct bch_jset_entry *e;

	if (res->used + 1 + data_u64s > res->u64s)
		abort();	/* caller reserved too little: a bug, not bad input */
	e = (struct bch_jset_entry *)(j->buf + j->buf_u64s);
	memset(e, 0, sizeof(*e));
	e->u64s = data_u64s;
	e->btree_id = btree_id;
	e->level = level;
	e->type = type;
	j->buf_u64s += 1 + data_u64s;
	res->used += 1 + data_u64s;
	return e->_data;
}

void bch_journal_res_put(struct bch_fs *c, struct bch_journal_res *res)
{
	J(c)->reserved = 0;
	res->u64s = res->used;
}

int bch_journal_flush_seq(struct bch_fs *c, uint64_t seq)
{
	struct bch_journal *j = J(c);
	int ret;

	/*
	 * The entry in flight may be the one asked for, and flushed by the
	 * writer; or it failed, and seq is lost with it.
	 */
	if (seq > j->durable && (ret = jwriter_reap(c)))
		return ret;
	if (seq <= j->durable)
		return 0;
	if ((ret = lost_check(j, seq)))
		return ret;
	if (c->read_only)
		return -BCH_ERR_fs_read_only;
	if (seq <= j->written)	/* written, not flushed: a flush of the devices */
		return bch_journal_flush_devs(c);
	if (c->emergency_ro)
		return -BCH_ERR_fs_emergency_ro;
	return flush_open(c, may_reclaim(c));
}

int bch_journal_flush(struct bch_fs *c)
{
	int ret;

	if (c->read_only)
		return -BCH_ERR_fs_read_only;
	if (!J(c)->started)
		return 0;
	if ((ret = jwriter_reap(c)))	/* waited for in any case; may be flushed already */
		return ret;
	if (J(c)->lost)			/* everything so far: the lost entries too */
		return J(c)->lost_ret;
	if (!open_entry_needed(c))	/* at most a written entry to flush */
		return J(c)->written > J(c)->durable ? bch_journal_flush_devs(c) : 0;
	if (c->emergency_ro)
		return -BCH_ERR_fs_emergency_ro;
	return flush_open(c, may_reclaim(c));
}

int bch_journal_flush_step(struct bch_fs *c, uint64_t *seq)
{
	struct bch_journal *j = J(c);
	int ret;

	if (c->read_only)
		return -BCH_ERR_fs_read_only;
	if (!j->started)
		return 0;
	if (!*seq && !(*seq = bch_journal_seq_needed(c)))
		return 0;
	if (*seq <= j->durable)
		return 0;
	if ((ret = jwriter_reap_done(c)) || *seq <= j->durable)
		return ret;
	if ((ret = lost_check(j, *seq)))
		return ret;
	if (j->fl_nr) {
		/*
		 * The open entry goes behind those in flight when it can (its
		 * preflush makes them durable, its flush itself); else, or when
		 * *seq is in flight, its turn comes once the writer is done.
		 */
		if (*seq > j->written && j->fl_nr < BCH_JWRITER_QUEUE && may_reclaim(c) &&
		    fits(c, j->seq, j->buf_u64s, false) && (ret = journal_write_flush(c, true, true)))
			return ret;
		return 1;
	}
	/* written without its flush, or a reclaim first: in line, as bch_journal_flush() */
	if (*seq <= j->written || !may_reclaim(c) || !fits(c, j->seq, j->buf_u64s, false))
		return bch_journal_flush_seq(c, *seq);
	if ((ret = journal_write_flush(c, true, true)))
		return ret;
	return *seq > j->durable;	/* handed to the writer, or written in line */
}

void bch_journal_flush_wait(struct bch_fs *c)
{
	bch_jwriter_wait_idle(&J(c)->wr);
}

bool bch_journal_open_has_keys(struct bch_fs *c, unsigned btree_id, unsigned level)
{
	struct bch_journal *j = J(c);

	for (unsigned off = 0; off < j->buf_u64s; ) {
		const struct bch_jset_entry *e = (const void *)(j->buf + off);
		if (e->type == BCH_JSET_ENTRY_btree_keys && e->btree_id == btree_id &&
		    e->level == level)
			return true;
		off += 1 + e->u64s;
	}
	return false;
}

/* Whoever asks for the open seq makes something depend on it being written. */
uint64_t bch_journal_cur_seq(struct bch_fs *c)
{
	J(c)->pending = true;
	return J(c)->seq;
}

uint64_t bch_journal_nonce_max(struct bch_fs *c)
{
	return c->journal ? J(c)->nonce_max : 0;
}

uint64_t bch_journal_seq_open(struct bch_fs *c)
{
	return J(c)->seq;
}

uint64_t bch_journal_seq_durable(struct bch_fs *c)
{
	return J(c)->durable;
}

uint64_t bch_journal_seq_needed(struct bch_fs *c)
{
	struct bch_journal *j = J(c);

	if (!j || !j->started || c->read_only)
		return 0;
	if (open_entry_needed(c))
		return j->seq;
	/* after a loss, everything handed out so far (j->written is before the hole) */
	return j->lost ? j->seq - 1 : j->written;
}

uint64_t bch_journal_seq_durable_now(struct bch_fs *c)
{
	struct bch_journal *j = J(c);

	if (!j)
		return 0;
	/* writes done but not reaped: their flushes may have made more durable */
	(void)jwriter_reap_done(c);	/* a failure stays the journal's (j->lost): every later flush */
	return j->durable;
}

uint64_t bch_journal_last_seq(struct bch_fs *c)
{
	struct bch_journal *j = J(c);

	return j->pins.next != &j->pins ? j->pins.next->seq : j->seq;
}

/* ------------------------------------------------------------------ pins */

void bch_journal_pin_add(struct bch_fs *c, struct bch_journal_pin *pin, uint64_t seq,
			 bch_journal_pin_flush_fn flush)
{
	struct bch_journal *j = J(c);
	struct bch_journal_pin *p;

	if (pin->seq && pin->seq <= seq)
		return;
	if (pin->seq)
		bch_journal_pin_drop(c, pin);
	pin->seq = seq;
	pin->flush = flush;
	/* keep the list sorted: walk back from the newest */
	for (p = j->pins.prev; p != &j->pins && p->seq > seq; p = p->prev)
		;
	pin->prev = p;
	pin->next = p->next;
	p->next->prev = pin;
	p->next = pin;
	if (seq <= j->debt_upto)
		j->debt_pins++;
}

void bch_journal_pin_drop(struct bch_fs *c, struct bch_journal_pin *pin)
{
	if (!pin->seq)
		return;
	if (pin->seq <= J(c)->debt_upto)
		J(c)->debt_pins--;
	pin->prev->next = pin->next;
	pin->next->prev = pin->prev;
	pin->next = pin->prev = NULL;
	pin->seq = 0;
}

int bch_journal_reclaim_all(struct bch_fs *c)
{
	struct bch_journal *j = J(c);
	int ret;

	if (c->read_only)
		return 0;
	if ((ret = bch_journal_flush(c)))
		return ret;
	if ((ret = reclaim_durable(c)))
		return ret;
	if (j->pins.next != &j->pins)
		return bch_fs_err(c, -EIO, "journal pins left after reclaim");
	/*
	 * Record that nothing older than this entry is needed, unless the
	 * newest durable entry says so already (written with no pin left, and
	 * nothing since needs an entry): a second one would say the same.
	 */
	if (j->last_seq_ondisk == j->durable && j->durable && !open_entry_needed(c))
		return 0;
	return journal_write(c);
}
