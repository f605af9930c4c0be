// SPDX-License-Identifier: GPL-2.0
/*
 * cmd_fs_usage.c - `bcachefs fs usage [-h] [--json] DEVICE[:DEVICE...]`:
 * size, used and free space of the filesystem and of each device, per data
 * type, cached data and fragmentation per device, the compression ratio of
 * file data, the rebalance work pending, and each device's I/O counters
 * (requests and bytes since the filesystem was opened: since mount when a
 * mount daemon answers, else this command's own reads).
 *
 * Opens read-only (writes nothing).  Bucket figures come from the bucket
 * state built at open; the compression ratio from one pass over the extent
 * keys (sectors of file data they cover / sectors they take on disk); the
 * pending work from bch_rebalance_pending() (a walk over the work keys).
 * Fragmentation of a device: the space of its user-data buckets that holds
 * no live data (bucket space - live sectors), which copygc can win back.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <uuid/uuid.h>

#include "alloc.h"
#include "bcachefs.h"
#include "blockdev.h"
#include "btree.h"
#include "cmds.h"
#include "errcode.h"
#include "extents.h"
#include "fs.h"
#include "fs_ops.h"
#include "fsname.h"
#include "rebalance.h"
#include "super.h"

static void usage(FILE *f)
{
	fprintf(f,
"Usage: bcachefs fs usage [-h] [--json] [-o degraded] DEVICE[:DEVICE...] | UUID=<uuid> | MOUNTPOINT\n"
"Show the space of a filesystem: size, used and free, per device and per data\n"
"type (superblock, journal, btree, user data), cached data and fragmentation\n"
"(space in user-data buckets not holding live data) per device, the\n"
"compression ratio of file data, and the rebalance work pending (data off its\n"
"background_target, data not in its background_compression, how much of it\n"
"waits for space, and whether a scan of every file is pending).\n"
"Sizes are bytes; -h prints them in binary units (k, M, G, T).\n"
"Opens the filesystem read-only.\n"
"Each device also shows its I/O since the filesystem was opened (reads,\n"
"writes: requests and bytes): for a MOUNTPOINT, since the mount; for\n"
"devices, only this command's own reads.\n"
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

	struct bch_rebalance_pending pend;
	int r = bch_rebalance_pending(c, &pend);
	if (r)
		return r;

	struct statvfs sv;
	bch_fs_statfs(c, &sv);
	uint64_t total = 0, used = 0, free_b = 0;
	struct bch_dev_usage u[BCH_SB_MEMBERS_MAX];
	for (unsigned d = 0; d < c->nr_devs; d++) {
		struct bch_member *m = bch_sb_member(c->sb, d);
		if (!c->devs[d])
			continue;
		bch_dev_usage_get(c, d, &u[d]);
		uint64_t bs = (uint64_t)m->bucket_size << 9;
		total += u[d].nbuckets * bs;
		free_b += u[d].free_buckets * bs;
	}
	used = total - free_b;
	char uuid[37], a[32], b[32], cc[32];
	uuid_unparse(c->sb->user_uuid, uuid);
	double ratio = ondisk ? (double)logical / ondisk : 1.0;

	if (json) {
		struct bch_json j;

		json_begin(&j, f, false);
		json_uuid(&j, "uuid", c->sb->user_uuid);
		json_u64(&j, "size", total);
		json_u64(&j, "used", used);
		json_u64(&j, "free", free_b);
		json_u64(&j, "available", (uint64_t)sv.f_bavail * sv.f_frsize);
		json_u64(&j, "reserved", c->reserved_sectors << 9);
		json_u64(&j, "data_bytes", logical << 9);
		json_u64(&j, "data_disk_bytes", ondisk << 9);
		json_u64(&j, "extents", nr_extents);
		json_double(&j, "compression_ratio", ratio, 3);
		json_open(&j, "rebalance_pending", false);
		json_u64(&j, "inodes", pend.inodes);
		json_bool(&j, "scan", pend.scan);
		json_u64(&j, "target", pend.sectors_target << 9);
		json_u64(&j, "compression", pend.sectors_compression << 9);
		json_u64(&j, "waiting_for_space", pend.sectors_waiting << 9);
		json_close(&j);
		json_open(&j, "devices", true);
		for (unsigned d = 0; d < c->nr_devs; d++) {
			if (!c->devs[d])
				continue;
			struct bch_member *m = bch_sb_member(c->sb, d);
			uint64_t bs = (uint64_t)m->bucket_size << 9, frag = fragmented(&u[d], bs);
			struct bch_dev_io_stats io;

			json_open(&j, NULL, false);
			json_u64(&j, "index", d);
			json_string(&j, "path", bch_dev_path(c->devs[d]->bdev));
			json_u64(&j, "size", u[d].nbuckets * bs);
			json_u64(&j, "bucket_size", bs);
			json_u64(&j, "free_buckets", u[d].free_buckets);
			json_u64(&j, "cached_data", cached_sectors(&u[d]) << 9);
			json_u64(&j, "fragmented", frag);
			json_double(&j, "fragmented_percent", pct(frag, u[d].buckets[BCH_DATA_user] * bs), 1);
			for (unsigned t = 0; t < BCH_DATA_NR; t++) {
				json_open(&j, data_names[t], false);
				json_u64(&j, "buckets", u[d].buckets[t]);
				json_u64(&j, "bytes", u[d].sectors[t] << 9);
				json_close(&j);
			}
			dev_io(c->devs[d], &io);
			json_u64(&j, "reads", io.reads);
			json_u64(&j, "read_bytes", io.read_bytes);
			json_u64(&j, "writes", io.writes);
			json_u64(&j, "write_bytes", io.write_bytes);
			json_close(&j);
		}
		json_end(&j);
	} else {
		fprintf(f, "Filesystem:        %s\n", uuid);
		fprintf(f, "Size:              %s\n", sz(total, a, sizeof(a)));
		fprintf(f, "Used:              %s\n", sz(used, a, sizeof(a)));
		fprintf(f, "Free:              %s\n", sz(free_b, a, sizeof(a)));
		fprintf(f, "Available:         %s (free space for file data, reserve excluded)\n",
		       sz((uint64_t)sv.f_bavail * sv.f_frsize, a, sizeof(a)));
		if (c->reserved_sectors)
			fprintf(f, "Reserved:          %s (preallocated by fallocate, not yet written)\n",
				sz(c->reserved_sectors << 9, a, sizeof(a)));
		fprintf(f, "File data:         %s in %" PRIu64 " extents, %s on disk per copy (compression ratio %.2f)\n",
		       sz(logical << 9, a, sizeof(a)), nr_extents, sz(ondisk << 9, b, sizeof(b)), ratio);
		if (!pend.scan && !pend.sectors_target && !pend.sectors_compression)
			fprintf(f, "Rebalance pending: none\n");
		else
			fprintf(f, "Rebalance pending: %s off its target, %s to recompress, %s of it "
				"waiting for space (%" PRIu64 " files)%s\n",
				sz(pend.sectors_target << 9, a, sizeof(a)),
				sz(pend.sectors_compression << 9, b, sizeof(b)),
				sz(pend.sectors_waiting << 9, cc, sizeof(cc)), pend.inodes,
				pend.scan ? "; a scan of every file is pending" : "");
		for (unsigned d = 0; d < c->nr_devs; d++) {
			if (!c->devs[d])
				continue;
			struct bch_member *m = bch_sb_member(c->sb, d);
			uint64_t bs = (uint64_t)m->bucket_size << 9;
			fprintf(f, "\nDevice %u: %s\n", d, bch_dev_path(c->devs[d]->bdev));
			fprintf(f, "  %-10s %12s %10s %14s\n", "type", "buckets", "", "live data");
			for (unsigned t = 0; t < BCH_DATA_NR; t++) {
				if (t == BCH_DATA_cached && !u[d].buckets[t])
					continue;
				fprintf(f, "  %-10s %12" PRIu64 " %10s %14s\n", data_names[t], u[d].buckets[t],
				       sz(u[d].buckets[t] * bs, cc, sizeof(cc)),
				       t == BCH_DATA_free ? "" : sz(u[d].sectors[t] << 9, b, sizeof(b)));
			}
			fprintf(f, "  %-10s %12" PRIu64 " %10s\n", "total", u[d].nbuckets, sz(u[d].nbuckets * bs, a, sizeof(a)));
			uint64_t frag = fragmented(&u[d], bs);
			fprintf(f, "  cached data: %s; fragmented: %s (%.1f%% of user-data buckets)\n",
				sz(cached_sectors(&u[d]) << 9, a, sizeof(a)), sz(frag, b, sizeof(b)),
				pct(frag, u[d].buckets[BCH_DATA_user] * bs));
			struct bch_dev_io_stats io;
			dev_io(c->devs[d], &io);
			fprintf(f, "  I/O since open: %" PRIu64 " reads (%s), %" PRIu64 " writes (%s)\n",
				io.reads, sz(io.read_bytes, a, sizeof(a)), io.writes, sz(io.write_bytes, b, sizeof(b)));
		}
	}
	return 0;
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
	FILE *f = argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) ? stdout : stderr;
	if (f == stderr && argc >= 2) cmd_err("fs", "unknown %s '%s' (see bcachefs fs --help)", argv[1][0] == '-' ? "option" : "subcommand", argv[1]);
	fprintf(f, "Usage: bcachefs fs usage [-h] [--json] [-o degraded] DEVICE[:DEVICE...] | MOUNTPOINT\n"
		   "Filesystem-wide commands:\n"
		   "  usage    space used and free, per device and data type\n");
	return f == stdout ? EXIT_OK : EXIT_USAGE;
}
