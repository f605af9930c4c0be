// SPDX-License-Identifier: GPL-2.0
/*
 * cmd_fs_usage.c - `bcachefs fs usage [-h] [--json] FS|PATH`: the space of a
 * filesystem as bch_fs_space() (alloc.h) defines it, the figures statfs
 * gives df too; file data and its compression ratio; the rebalance work
 * pending; and every member slot in use, online or not, with its state,
 * its buckets and live data per type (online ones), cached data and
 * fragmentation, its I/O since the filesystem was opened (since mount when
 * a mount daemon answers, else this command's own reads), and its error
 * counters (super.h, bch_dev_errors_get()); erasure-coded data, parity and
 * reclaimable stripe space per member and in total (ec_usage.h).
 *
 * Opens read-only (writes nothing).  Bucket figures come from the bucket
 * state built at open; the compression ratio from one pass over the extent
 * keys (sectors of file data they cover / sectors they take on disk); the
 * pending work from bch_rebalance_pending() (a walk over the work keys).
 * Fragmentation of a device: the space of its user-data buckets that holds
 * no live data (bucket space - live sectors), which copygc can win back.
 * A PATH inside a fusemount names that mount (cmd_mount_holding()).
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <uuid/uuid.h>

#include "alloc.h"
#include "bcachefs.h"
#include "blockdev.h"
#include "btree.h"
#include "cmds.h"
#include "ec_usage.h"
#include "snapshot.h"
#include "errcode.h"
#include "extents.h"
#include "fs.h"
#include "fs_ops.h"
#include "fsname.h"
#include "rebalance.h"
#include "reflink.h"
#include "super.h"
#include "opts.h"

static void usage(FILE *f)
{
	fprintf(f,
"Usage: bcachefs fs usage [-h] [--json] [-o degraded] DEVICE[:DEVICE...] | UUID=<uuid> | PATH\n"
"Show the space of a filesystem: size, used, free, reserve, reclaimable,\n"
"promised and available (defined in man bcachefs, fs usage: df shows size,\n"
"used and available); file data and its compression ratio; the rebalance\n"
"work pending; and every member with its state (rw, ro, failed, spare) and\n"
"whether it is online (an offline member stays listed), its buckets and live\n"
"data per type, cached data, fragmentation, I/O since the filesystem was\n"
"opened, and its error counters (read, write, checksum: see device stats).\n"
"PATH is a mountpoint or any directory or file inside a mount (the daemon\n"
"answers, I/O counted since the mount); devices are opened read-only.\n"
"Sizes are bytes; -h prints them in binary units (k, M, G, T).\n"
"\n"
"  -h, --human-readable   human sizes\n"
"      --json             one JSON object (man bcachefs: JSON OUTPUT)\n"
"  -o degraded            members may be missing when the others hold a copy of\n"
"                         everything (each missing one is named on stderr);\n"
"     very_degraded       even when some data has no copy left\n"
"      --help             this text\n"
"\n"
"Exit: 0 done, 1 failure, 16 usage error.\n");
}

static const char *data_names[] = {
#define x(n, id) [id] = #n,
	BCH_DATA_TYPES()
#undef x
};

static bool human;

static const char *sz(uint64_t bytes, char *buf, size_t len)
{
	if (human)
		bch_human_size(bytes, buf, len);
	else
		snprintf(buf, len, "%" PRIu64, bytes);
	return buf;
}

/* A member opened degraded without its device has done no I/O. */
static void dev_io(const struct bch_dev *ca, struct bch_dev_io_stats *io)
{
	memset(io, 0, sizeof(*io));
	if (ca->bdev)
		bch_dev_io_stats(ca->bdev, io);
}

/* Cached copies on a device (sectors), whatever bucket they share. */
static uint64_t cached_sectors(const struct bch_dev_usage *u)
{
	return u->cached_sectors;
}

/*
 * Bytes of a device's user-data buckets that hold no live data (cached
 * copies sharing them included: they are dropped when the space is needed).
 */
static uint64_t fragmented(const struct bch_dev_usage *u, uint64_t bucket_bytes)
{
	uint64_t space = u->buckets[BCH_DATA_user] * bucket_bytes, live = u->sectors[BCH_DATA_user] << 9;

	return space > live ? space - live : 0;
}

static double pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * part / whole : 0.0;
}

static const char *err_names[] = {
#define x(n, id) [id] = #n,
	BCH_DEV_ERROR_TYPES()
#undef x
};

static bool member_online(const struct bch_fs *c, unsigned d)
{
	return c->devs[d] && c->devs[d]->bdev;
}

static const char *state_name(const struct bch_member *m)
{
	return m->state < BCH_MEMBER_STATE_NR ? bch_member_state_names[m->state] : "unknown";
}

/* The error counters of member d: JSON object "errors". */
static void json_errors(struct bch_json *j, struct bch_fs *c, unsigned d)
{
	uint64_t n[BCH_DEV_ERROR_NR], reset;

	bch_dev_errors_get(c, d, n, &reset);
	json_open(j, "errors", false);
	for (unsigned t = 0; t < BCH_DEV_ERROR_NR; t++)
		json_u64(j, err_names[t], n[t]);
	if (reset)
		json_time(j, "reset_time", reset, 0);
	else
		json_null(j, "reset_time");
	json_close(j);
}

static void text_errors(FILE *f, struct bch_fs *c, unsigned d)
{
	uint64_t n[BCH_DEV_ERROR_NR], reset;

	bch_dev_errors_get(c, d, n, &reset);
	fprintf(f, "  errors: %" PRIu64 " read, %" PRIu64 " write, %" PRIu64 " checksum%s\n",
		n[BCH_DEV_ERROR_read], n[BCH_DEV_ERROR_write], n[BCH_DEV_ERROR_checksum],
		reset ? " (since the last reset)" : "");
}

/* Erasure coding's figures (ec_usage.h), in bytes: JSON object "erasure_coded". */
static void json_ec(struct bch_json *j, const struct bch_ec_dev_usage *e)
{
	json_open(j, "erasure_coded", false);
	json_u64(j, "data", e->data << 9);
	json_u64(j, "parity", e->parity << 9);
	json_u64(j, "reclaimable", e->reclaimable << 9);
	json_close(j);
}

static void text_ec(FILE *f, const char *lead, const struct bch_ec_dev_usage *e)
{
	char a[32], b[32], cc[32];

	fprintf(f, "%s%s data, %s parity, %s reclaimable\n", lead, sz(e->data << 9, a, sizeof(a)),
		sz(e->parity << 9, b, sizeof(b)), sz(e->reclaimable << 9, cc, sizeof(cc)));
}

static void json_device(struct bch_json *j, struct bch_fs *c, unsigned d,
			const struct bch_dev_usage *u, const struct bch_ec_usage *ec)
{
	struct bch_member *m = bch_sb_member(c->sb, d);
	uint64_t bs = (uint64_t)m->bucket_size << 9;
	bool online = member_online(c, d);

	json_open(j, NULL, false);
	json_u64(j, "index", d);
	if (online)
		json_string(j, "path", bch_dev_path(c->devs[d]->bdev));
	else
		json_null(j, "path");
	json_string(j, "state", state_name(m));
	json_bool(j, "online", online);
	json_u64(j, "size", (online ? u->nbuckets : m->nbuckets) * bs);
	json_u64(j, "bucket_size", bs);
	json_errors(j, c, d);
	json_ec(j, &ec->dev[d]);	/* from the keys: known for an offline member too */
	if (!online) {		/* its buckets are not read: no usage */
		json_close(j);
		return;
	}
	uint64_t frag = fragmented(u, bs);
	json_u64(j, "free_buckets", u->free_buckets);
	json_u64(j, "cached_data", cached_sectors(u) << 9);
	json_u64(j, "fragmented", frag);
	json_double(j, "fragmented_percent", pct(frag, u->buckets[BCH_DATA_user] * bs), 1);
	for (unsigned t = 0; t < BCH_DATA_NR; t++) {
		json_open(j, data_names[t], false);
		json_u64(j, "buckets", u->buckets[t]);
		json_u64(j, "bytes", u->sectors[t] << 9);
		json_u64(j, "space", u->buckets[t] * bs);
		json_u64(j, "cached_bytes", u->cached_by_type[t] << 9);
		json_close(j);
	}
	struct bch_dev_io_stats io;
	dev_io(c->devs[d], &io);
	json_u64(j, "reads", io.reads);
	json_u64(j, "read_bytes", io.read_bytes);
	json_u64(j, "writes", io.writes);
	json_u64(j, "write_bytes", io.write_bytes);
	json_close(j);
}

static void text_device(FILE *f, struct bch_fs *c, unsigned d, const struct bch_dev_usage *u,
			const struct bch_ec_usage *ec)
{
	struct bch_member *m = bch_sb_member(c->sb, d);
	uint64_t bs = (uint64_t)m->bucket_size << 9;
	char a[32], b[32], cc[32];

	if (!member_online(c, d)) {
		fprintf(f, "\nDevice %u: (not open) %s, offline\n", d, state_name(m));
		fprintf(f, "  size %s; its buckets were not read (the filesystem runs without it)\n",
			sz(m->nbuckets * bs, a, sizeof(a)));
		if (ec->stripes)
			text_ec(f, "  erasure coded: ", &ec->dev[d]);
		text_errors(f, c, d);
		return;
	}
	fprintf(f, "\nDevice %u: %s %s, online\n", d, bch_dev_path(c->devs[d]->bdev), state_name(m));
	fprintf(f, "  %-10s %12s %10s %14s\n", "type", "buckets", "", "live data");
	for (unsigned t = 0; t < BCH_DATA_NR; t++) {
		if (t == BCH_DATA_cached && !u->buckets[t])
			continue;
		fprintf(f, "  %-10s %12" PRIu64 " %10s %14s\n", data_names[t], u->buckets[t],
		       sz(u->buckets[t] * bs, cc, sizeof(cc)),
		       t == BCH_DATA_free ? "" : sz(u->sectors[t] << 9, b, sizeof(b)));
	}
	fprintf(f, "  %-10s %12" PRIu64 " %10s\n", "total", u->nbuckets, sz(u->nbuckets * bs, a, sizeof(a)));
	uint64_t frag = fragmented(u, bs);
	fprintf(f, "  cached data: %s; fragmented: %s (%.1f%% of user-data buckets)\n",
		sz(cached_sectors(u) << 9, a, sizeof(a)), sz(frag, b, sizeof(b)),
		pct(frag, u->buckets[BCH_DATA_user] * bs));
	if (ec->stripes)
		text_ec(f, "  erasure coded: ", &ec->dev[d]);
	struct bch_dev_io_stats io;
	dev_io(c->devs[d], &io);
	fprintf(f, "  I/O since open: %" PRIu64 " reads (%s), %" PRIu64 " writes (%s)\n",
		io.reads, sz(io.read_bytes, a, sizeof(a)), io.writes, sz(io.write_bytes, b, sizeof(b)));
	text_errors(f, c, d);
}

int bch_fs_usage_print(FILE *f, struct bch_fs *c, bool json, bool human_units)
{
	human = human_units;
	/* compression: file sectors the extents cover vs sectors they take */
	uint64_t logical = 0, ondisk = 0, nr_extents = 0;
	struct btree_iter it;
	const struct bch_bkey *k;
	int ierr = 0;
	bch_btree_iter_init(&it, c, BCH_BTREE_ID_extents, POS_MIN, POS_MAX);
	while ((k = bch_btree_iter_next(&it, &ierr)))
		if (k->type == BCH_BKEY_extent) {
			logical += k->size;
			ondisk += bch_extent_disk_sectors(k);
			nr_extents++;
		}
	bch_btree_iter_exit(&it);
	if (ierr)
		return ierr;
	/* shared extents (reflink.h): held once, by the indirect extents */
	struct bch_reflink_usage ru;
	if ((ierr = bch_reflink_usage(c, &ru)))
		return ierr;
	logical += ru.indirect_sectors;
	nr_extents += ru.indirect_keys;
	if (c->roots->r[BCH_BTREE_ID_reflink].key) {
		struct btree_iter rit;
		bch_btree_iter_init(&rit, c, BCH_BTREE_ID_reflink, POS_MIN, POS_MAX);
		while ((k = bch_btree_iter_next(&rit, &ierr))) {
			struct bch_bkey *x = bch_reflink_v_to_extent(k);
			if (x)
				ondisk += bch_extent_disk_sectors(x);
			free(x);
		}
		bch_btree_iter_exit(&rit);
		if (ierr)
			return ierr;
	}

	struct bch_rebalance_pending pend;
	int r = bch_rebalance_pending(c, &pend);
	if (r)
		return r;
	struct bch_ec_usage *ec = malloc(sizeof(*ec));
	if (!ec)
		return -ENOMEM;
	if ((r = bch_ec_usage(c, ec))) {
		free(ec);
		return r;
	}
	/* per subvolume: what its own snapshot's extents take (every copy) */
	unsigned nr_sv, nr_snaps;
	const struct bch_subvol_info *svs = bch_subvols(c, &nr_sv);
	const struct bch_snap_info *snaps = bch_snaps(c, &nr_snaps);
	uint64_t *snap_sectors = NULL;
	if ((r = bch_snapshot_usage(c, &snap_sectors))) {
		free(ec);
		return r;
	}
	uint64_t *sv_bytes = calloc(nr_sv + 1, sizeof(*sv_bytes));
	if (!sv_bytes) {
		free(snap_sectors);
		free(ec);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < nr_sv; i++) {
		if (!nr_snaps)	/* no snapshot keys: subvolume 0 holds every extent */
			sv_bytes[i] = snap_sectors[0] << 9;
		for (unsigned x = 0; x < nr_snaps; x++)
			if (snaps[x].id == svs[i].v.snapshot)
				sv_bytes[i] = snap_sectors[x] << 9;
	}
	free(snap_sectors);

	/* the figures statfs (df) shows too: alloc.h, struct bch_fs_space */
	struct bch_fs_space sp;
	bch_fs_space(c, &sp);
	struct bch_dev_usage u[BCH_SB_MEMBERS_MAX];
	for (unsigned d = 0; d < c->nr_devs; d++)
		if (c->devs[d])
			bch_dev_usage_get(c, d, &u[d]);
		else
			memset(&u[d], 0, sizeof(u[d]));
	char uuid[37], a[32], b[32], cc[32];
	uuid_unparse(c->sb->user_uuid, uuid);
	double ratio = ondisk ? (double)logical / ondisk : 1.0;

	if (json) {
		struct bch_json j;

		json_begin(&j, f, false);
		json_uuid(&j, "uuid", c->sb->user_uuid);
		json_u64(&j, "size", sp.size);
		json_u64(&j, "used", sp.used);
		json_u64(&j, "free", sp.free);
		json_u64(&j, "reserve", sp.reserve);
		json_u64(&j, "reclaimable", sp.reclaimable);
		json_u64(&j, "promised", sp.promised);
		json_u64(&j, "data_replicas", sp.replicas);
		json_u64(&j, "available", sp.available);
		json_u64(&j, "reserved", sp.promised);	/* the old name of promised */
		json_u64(&j, "data_bytes", logical << 9);
		json_u64(&j, "data_disk_bytes", ondisk << 9);
		json_u64(&j, "extents", nr_extents);
		json_double(&j, "compression_ratio", ratio, 3);
		json_u64(&j, "reflinked_bytes", ru.shared_sectors << 9);
		json_u64(&j, "reflink_indirect_bytes", ru.indirect_sectors << 9);
		json_u64(&j, "reflink_indirect_extents", ru.indirect_keys);
		json_u64(&j, "reflink_saved_bytes", ru.shared_sectors > ru.indirect_sectors
			 ? (ru.shared_sectors - ru.indirect_sectors) << 9 : 0);
		json_open(&j, "rebalance_pending", false);
		json_u64(&j, "inodes", pend.inodes);
		json_bool(&j, "scan", pend.scan);
		json_u64(&j, "target", pend.sectors_target << 9);
		json_u64(&j, "compression", pend.sectors_compression << 9);
		json_u64(&j, "waiting_for_space", pend.sectors_waiting << 9);
		json_u64(&j, "stripe", pend.sectors_stripe << 9);
		json_close(&j);
		json_open(&j, "erasure_coded", false);
		json_u64(&j, "stripes", ec->stripes);
		json_u64(&j, "stripes_empty", ec->stripes_empty);
		json_u64(&j, "data", ec->total.data << 9);
		json_u64(&j, "parity", ec->total.parity << 9);
		json_u64(&j, "reclaimable", ec->total.reclaimable << 9);
		json_close(&j);
		json_open(&j, "devices", true);
		for (unsigned d = 0; d < c->nr_devs; d++) {
			struct bch_member *m = bch_sb_member(c->sb, d);
			if (m && bch_member_exists(m))
				json_device(&j, c, d, &u[d], ec);
		}
		json_close(&j);
		json_open(&j, "subvolumes", true);
		for (unsigned i = 0; i < nr_sv; i++) {
			char path[4096];
			if (bch_fs_subvol_path(c, svs[i].id, path, sizeof(path)))
				snprintf(path, sizeof(path), "?");
			json_open(&j, NULL, false);
			json_u64(&j, "id", svs[i].id);
			json_string(&j, "path", path);
			json_u64(&j, "exclusive_bytes", sv_bytes[i]);
			json_close(&j);
		}
		json_end(&j);
		free(sv_bytes);
		free(ec);
		return 0;
	}
	fprintf(f, "Filesystem:        %s\n", uuid);
	/* one value a line (scripts read "Key: value"); what they mean: man bcachefs, fs usage */
	fprintf(f, "Size:              %s\n", sz(sp.size, a, sizeof(a)));
	fprintf(f, "Used:              %s\n", sz(sp.used, a, sizeof(a)));
	fprintf(f, "Free:              %s\n", sz(sp.free, a, sizeof(a)));
	fprintf(f, "Reserve:           %s\n", sz(sp.reserve, a, sizeof(a)));
	fprintf(f, "Reclaimable:       %s\n", sz(sp.reclaimable, a, sizeof(a)));
	fprintf(f, "Promised:          %s\n", sz(sp.promised, a, sizeof(a)));
	fprintf(f, "Available:         %s\n", sz(sp.available, a, sizeof(a)));
	fprintf(f, "  used = size - free: buckets holding anything (superblock, journal, btree, data, cached)\n"
		   "  reserve: free space new data may not take (each data member's metadata reserve,\n"
		   "    all the free space of members that take no new data)\n"
		   "  reclaimable: used space new data takes all the same (cached data, the rest of\n"
		   "    the open data buckets); promised: preallocated by fallocate, not yet written\n"
		   "  available = (free - reserve + reclaimable - promised) / %u (data_replicas)\n"
		   "  df shows size, used and available (man bcachefs, fs usage)\n", sp.replicas);
	fprintf(f, "File data:         %s in %" PRIu64 " extents, %s on disk per copy (compression ratio %.2f)\n",
	       sz(logical << 9, a, sizeof(a)), nr_extents, sz(ondisk << 9, b, sizeof(b)), ratio);
	if (ru.indirect_keys)
		fprintf(f, "Shared (reflink): %s of files point at %s held once in %" PRIu64
			" indirect extents (saves %s)\n", sz(ru.shared_sectors << 9, a, sizeof(a)),
			sz(ru.indirect_sectors << 9, b, sizeof(b)), ru.indirect_keys,
			sz(ru.shared_sectors > ru.indirect_sectors
			   ? (ru.shared_sectors - ru.indirect_sectors) << 9 : 0, cc, sizeof(cc)));
	if (!pend.scan && !pend.sectors_target && !pend.sectors_compression && !pend.sectors_stripe)
		fprintf(f, "Rebalance pending: none\n");
	else
		fprintf(f, "Rebalance pending: %s off its target, %s to recompress, %s of it "
			"waiting for space (%" PRIu64 " files)%s; %s to stripe\n",
			sz(pend.sectors_target << 9, a, sizeof(a)),
			sz(pend.sectors_compression << 9, b, sizeof(b)),
			sz(pend.sectors_waiting << 9, cc, sizeof(cc)), pend.inodes,
			pend.scan ? "; a scan of every file is pending" : "",
			sz(pend.sectors_stripe << 9, a, sizeof(a)));
	if (ec->stripes) {
		fprintf(f, "Erasure coded:     %" PRIu64 " stripes (%" PRIu64 " with no live data): ",
			ec->stripes, ec->stripes_empty);
		text_ec(f, "", &ec->total);
		fprintf(f, "  data: file data in stripes' data blocks; parity: their parity blocks;\n"
			   "  reclaimable: stripe space no live data uses (stripe compaction gives it back)\n");
	}
	if (nr_sv > 1) {
		fprintf(f, "Subvolumes:        space only each one's own snapshot holds (every copy)\n");
		for (unsigned i = 0; i < nr_sv; i++) {
			char path[4096];
			if (bch_fs_subvol_path(c, svs[i].id, path, sizeof(path)))
				snprintf(path, sizeof(path), "?");
			fprintf(f, "  %-5u %10s  %s\n", svs[i].id, sz(sv_bytes[i], a, sizeof(a)), path);
		}
	}
	free(sv_bytes);
	for (unsigned d = 0; d < c->nr_devs; d++) {
		struct bch_member *m = bch_sb_member(c->sb, d);
		if (m && bch_member_exists(m))
			text_device(f, c, d, &u[d], ec);
	}
	free(ec);
	return 0;
}

/*
 * A path inside a fusemount (MNT/subdir, a file in it), as btrfs takes:
 * the mountpoint of the fuse.bcachefs mount that holds it (the longest
 * mountpoint that is a prefix), into mnt.  False when it is in none.
 */
struct holding {
	const char	*real;
	char		*mnt;
	size_t		len, best;
};

/* the deepest mount point at or above h->real */
static bool mount_holds(const char *point, char *src, dev_t dev, void *priv)
{
	struct holding *h = priv;
	size_t n = strlen(point);

	(void)src;
	(void)dev;
	bool in = !strcmp(point, "/") ||
		(!strncmp(h->real, point, n) && (h->real[n] == '/' || !h->real[n]));
	if (in && n > h->best && n < h->len) {
		h->best = n;
		snprintf(h->mnt, h->len, "%s", point);
	}
	return false;
}

bool cmd_mount_holding(const char *path, char *mnt, size_t len)
{
	char real[PATH_MAX];
	struct holding h = { real, mnt, len, 0 };

	if (!realpath(path, real))
		return false;
	cmd_each_mount(mount_holds, &h);
	return h.best > 0;
}

static int cmd_fs_usage(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "human-readable",	no_argument, NULL, 'h' },
		{ "json",		no_argument, NULL, 'j' },
		{ "help",		no_argument, NULL, 'H' },
		{ NULL }
	};
	struct bch_opts opts;
	bool json = false;
	int o;

	memset(&opts, 0, sizeof(opts));
	while ((o = getopt_long(argc, argv, "ho:", longopts, NULL)) != -1)
		switch (o) {
		case 'h': human = true; break;
		case 'j': json = true; break;
		case 'o':
			if (cmd_open_opts_parse("fs usage", &opts, optarg))
				return EXIT_USAGE;
			break;
		case 'H': usage(stdout); return EXIT_OK;
		default: return cmd_opt_err("fs usage", argv, "ho:");
		}
	if (optind >= argc) {
		usage(stderr);
		return EXIT_USAGE;
	}
	/* a directory, or a file inside a mount: the mount that holds it */
	char mnt[PATH_MAX];
	struct stat st;
	if (argc - optind == 1 && !stat(argv[optind], &st) &&
	    (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)) && cmd_mount_holding(argv[optind], mnt, sizeof(mnt)))
		argv[optind] = mnt;
	struct cmd_fs fs;
	int rr = cmd_fs_resolve("fs usage", argv + optind, argc - optind, &fs);
	if (rr)
		return rr;
	/* a mounted filesystem: the daemon answers */
	if (fs.mounted) {
		char buf[65536];
		const char *name = json ? "bcachefs.usage.json" : human ? "bcachefs.usage.h" : "bcachefs.usage";
		ssize_t n = getxattr(fs.mnt, name, buf, sizeof(buf) - 1);
		if (n < 0) {
			cmd_err("fs usage", "%s: the fusemount daemon did not answer (%s)", fs.mnt,
				strerror(errno));
			return EXIT_FAIL;
		}
		fwrite(buf, 1, n, stdout);
		return EXIT_OK;
	}
	unsigned nr = fs.nr;
	char **devs = fs.devs, err[512];
	struct bch_fs *c;

	bch_opt_set(&opts, Opt_read_only, 1);
	int r = bch_fs_open(devs, nr, &opts, &c, err, sizeof(err));
	if (r) {
		cmd_err("fs usage", "%s", err);
		free_devs(devs);
		return EXIT_FAIL;
	}
	cmd_note_degraded("fs usage", c, devs, nr);

	r = bch_fs_usage_print(stdout, c, json, human);
	if (r)
		cmd_err("fs usage", "reading extents and rebalance work: %s", c->err_msg[0] ? c->err_msg : bch_err_str(r));
	int cr = bch_fs_close(c);
	free_devs(devs);
	return r || cr ? EXIT_FAIL : EXIT_OK;
}


/* `bcachefs fs SUBCOMMAND`: filesystem-wide commands (usage, for now). */
int cmd_fs(int argc, char *argv[])
{
	if (argc >= 2 && !strcmp(argv[1], "usage"))
		return cmd_fs_usage(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "timestats"))
		return cmd_fs_timestats(argc - 1, argv + 1);
	FILE *f = argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) ? stdout : stderr;
	if (f == stderr && argc >= 2) cmd_err("fs", "unknown %s '%s' (see bcachefs fs --help)", argv[1][0] == '-' ? "option" : "subcommand", argv[1]);
	fprintf(f, "Usage: bcachefs fs COMMAND [OPTION]... FS\n"
		   "Filesystem-wide commands:\n"
		   "  usage      space used and free, per device and data type (fs usage --help)\n"
		   "  timestats  what a fusemount's requests cost, per request type\n"
		   "             (fs timestats --help)\n");
	return f == stdout ? EXIT_OK : EXIT_USAGE;
}
