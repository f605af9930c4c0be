// SPDX-License-Identifier: GPL-2.0
/*
 * cmd_format.c - `bcachefs format` (also `mkfs`, `mkfs.bcachefs`).
 *
 * Options come from the option table (opts.h): every OPT_FORMAT option is a
 * --long-option (dashes or underscores), every OPT_DEVICE option applies to
 * the devices that follow it on the command line (until changed).
 *
 * The 2015 spelling: `-C DEV` names a device (a "cache" device in the old
 * bcache tools, here simply a member), and `--tier N` puts the following
 * devices on tier N, which becomes the label "tierN".  When devices sit on
 * two or more tiers and no target was given, the lowest tier becomes the
 * foreground, promote and metadata target and the highest the background
 * target: new writes land on the fast tier and move to the slow one.
 * Devices given before the first --tier are on tier 0.
 *
 * The smallest image (--source onto a new image file without --fs-size, or
 * --fs-size=min): the tree is measured (plan_min_size), the geometry chosen
 * for the estimate (bch_format_dev.plan_size: bucket, node size, journal,
 * metadata copies), the tree copied into a larger sparse file and the file
 * shrunk to what is used plus --headroom (shrink_new, cmd_image_shrink.c).
 *
 * --source with --encrypted and a passphrase: the passphrase's scrypt runs on
 * a thread of its own while the tree is copied (kdf_start()), and the key is
 * wrapped with it when the copy ends, or fails (kdf_finish()); until then the
 * superblocks hold a zero wrapped key, so a format killed during the copy
 * leaves an image no passphrase opens (it held part of the tree only).
 */
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <blkid.h>
#include <sodium.h>
#include <uuid/uuid.h>

#include "bcachefs.h"
#include "blockdev.h"
#include "cmds.h"
#include "copy.h"
#include "crypt.h"
#include "dl.h"
#include "fs.h"
#include "errcode.h"
#include "fs_ops.h"
#include "format.h"
#include "image_shrink.h"
#include "opts.h"
#include "passphrase.h"
#include "spec.h"
#include "super.h"

enum {
	O_fs_label = 256, O_uuid, O_force, O_quiet, O_cache, O_tier, O_replicas,
	O_help, O_no_btrees, O_source, O_passphrase_file, O_no_passphrase, O_headroom, O_json, O_subvolume,
	O_spec_base = 512, O_table_base = 1024,
};

/* "      --name=VALUE            help", wrapping after long names. */
static void opt_help_line(FILE *f, const struct bch_option *o)
{
	char name[64];

	snprintf(name, sizeof(name), "--%s%s", o->name, o->type == BCH_OPT_BOOL ? "" : "=VALUE");
	for (char *p = name + 2; *p && *p != '='; p++)
		if (*p == '_')
			*p = '-';
	if (strlen(name) < 24)
		fprintf(f, "      %-24s%s\n", name, o->help);
	else
		fprintf(f, "      %s\n%30s%s\n", name, "", o->help);
}

static void format_usage(FILE *f)
{
	fprintf(f,
"Usage: bcachefs format [OPTION]... DEVICE...\n"
"Create a filesystem on one or more devices or image files.\n"
"\n"
"Filesystem options:\n"
"  -L, --fs-label=LABEL        filesystem label\n"
"  -U, --uuid=UUID             user-visible UUID (default: random)\n"
"      --replicas=N            sets both data_replicas and metadata_replicas\n"
"                              (each copy on its own device of durability >= 1)\n");
	for (unsigned i = 0; i < BCH_OPT_NR; i++) {
		const struct bch_option *o = &bch_opt_table[i];

		if (!(o->flags & OPT_FORMAT))
			continue;
		opt_help_line(f, o);
	}
	fprintf(f, "\nDevice options (apply to the devices that follow them):\n");
	for (unsigned i = 0; i < BCH_OPT_NR; i++) {
		const struct bch_option *o = &bch_opt_table[i];

		if (!(o->flags & OPT_DEVICE))
			continue;
		opt_help_line(f, o);
	}
	fprintf(f,
"  -C, --cache=DEVICE          a device (2015 spelling of a positional DEVICE)\n"
"      --tier=N                following devices are on tier N (label \"tierN\")\n"
"\n"
"      --source=DIR            copy the tree under DIR into the new filesystem\n"
"                              (files, sparse files, hard links, symlinks, devices,\n"
"                              fifos, xattrs, owners, modes, times in ns)\n"
"      --subvolume=NAME        with --source: the tree goes into a new subvolume NAME\n"
"                              at the root (more variants: bcachefs subvolume)\n"
"      --fs-size=min           with --source: the smallest image file for the tree\n"
"                              (the default when the image file does not exist)\n"
"      --headroom=PCT%%|SIZE    with the smallest image: empty space kept for file\n"
"                              data, a percentage of the bytes in use or a size\n"
"                              (default 5%%)\n"
"      --json                  a summary for scripts (sizes in bytes)\n"
"%s"
"      --passphrase-file=FILE  with --encrypted: the passphrase, one line of FILE\n"
"                              (default: asked twice on the terminal, or one line\n"
"                              of stdin when it is not a terminal)\n"
"      --no-passphrase         with --encrypted: store the key in the clear\n"
"                              (set one later with set-passphrase)\n"
"  -f, --force                 overwrite an existing filesystem or partition table\n"
"  -q, --quiet                 print nothing on success\n"
"  -h, --help                  this text\n"
"\n"
"Sizes take k, M, G, T suffixes (powers of 1024). Image files that do not exist\n"
"are created when --fs-size is given, or with --source just large enough for\n"
"the tree plus the headroom (bucket, journal and metadata copies chosen for that\n"
"size; grow it later with device resize). SOURCE_DATE_EPOCH and -U make the\n"
"image reproducible.\n"
"Small btree nodes need larger buckets (a 1 MiB write must fit half a node and\n"
"one journal entry, half a bucket; a bucket holds at least 4 blocks): with 4k\n"
"blocks and one replica, 4k nodes need 64k buckets, 8k and 16k nodes 32k.\n"
"Without --bucket-size, format picks a bucket size that works; a smaller one\n"
"given is refused (exit 16) before anything is written.\n"
"Exit codes: 0 success, 1 failure (device error, existing data), 16 usage error.\n",
	spec_help);
}

struct format_state {
	struct bch_opts		opts;
	const char		*target_names[BCH_OPT_NR];
	struct bch_format_dev	cur;		/* device options in effect */
	struct bch_format_dev	*devs;
	unsigned		nr_devs;
	int			tier;		/* -1: not given */
	int			tiers_seen[8];
	char			tier_labels[8][16];	/* "tierN", labels of --tier */
	struct bch_format_args	args;
	bool			force, quiet;
	const char		*source;	/* --source: directory to copy in */
	const char		*subvolume;	/* --subvolume: into a new subvolume of this name */
	struct bch_spec		spec;		/* with --source: owners, times, --spec */
	const char		*passphrase_file;
	bool			no_passphrase;
	bool			min_size;	/* --fs-size=min, or --source onto a new file */
	const char		*headroom;	/* --headroom */
	struct image_headroom	hr;
	bool			json;
	uint64_t		files, bytes;	/* copied */
	struct image_shrink_plan sp;
	struct image_shrink_result sr;
};

static void add_dev(struct format_state *s, const char *path)
{
	s->devs = realloc(s->devs, (s->nr_devs + 1) * sizeof(*s->devs));
	if (!s->devs)
		abort();
	s->devs[s->nr_devs] = s->cur;
	s->devs[s->nr_devs].path = path;
	if (s->tier >= 0 && !s->cur.label) {
		char *l = s->tier_labels[s->tier];

		snprintf(l, sizeof(s->tier_labels[0]), "tier%d", s->tier);
		s->devs[s->nr_devs].label = l;
		s->tiers_seen[s->tier] = 1;
	}
	s->nr_devs++;
}

static struct option *build_longopts(void)
{
	static const struct option fixed[] = {
		{ "fs-label",	required_argument, NULL, O_fs_label },
		{ "fs_label",	required_argument, NULL, O_fs_label },
		{ "uuid",	required_argument, NULL, O_uuid },
		{ "force",	no_argument,	   NULL, O_force },
		{ "quiet",	no_argument,	   NULL, O_quiet },
		{ "cache",	required_argument, NULL, O_cache },
		{ "tier",	required_argument, NULL, O_tier },
		{ "replicas",	required_argument, NULL, O_replicas },
		{ "superblock-only", no_argument,  NULL, O_no_btrees },
		{ "source",	required_argument, NULL, O_source },
		{ "passphrase-file", required_argument, NULL, O_passphrase_file },
		{ "no-passphrase", no_argument,	   NULL, O_no_passphrase },
		{ "headroom",	required_argument, NULL, O_headroom },
		{ "json",	no_argument,	   NULL, O_json },
		{ "subvolume",	required_argument, NULL, O_subvolume },
		{ "help",	no_argument,	   NULL, O_help },
	};
	unsigned nfixed = sizeof(fixed) / sizeof(fixed[0]), n = nfixed;
	struct option *o = calloc(nfixed + SPEC_NR_OPTS + 2 * BCH_OPT_NR + 1, sizeof(*o));

	if (!o)
		abort();
	memcpy(o, fixed, sizeof(fixed));
	for (unsigned i = 0; i < SPEC_NR_OPTS; i++, n++)
		o[n] = (struct option) { spec_longopts[i].name, spec_longopts[i].has_arg, NULL, O_spec_base + i };
	for (unsigned i = 0; i < BCH_OPT_NR; i++) {
		const struct bch_option *opt = &bch_opt_table[i];
		int has_arg = opt->type == BCH_OPT_BOOL ? optional_argument : required_argument;

		if (!(opt->flags & (OPT_FORMAT | OPT_DEVICE)))
			continue;
		o[n++] = (struct option) { opt->name, has_arg, NULL, O_table_base + i };
		if (strchr(opt->name, '_')) {
			char *dashed = strdup(opt->name);
			for (char *p = dashed; *p; p++)
				if (*p == '_')
					*p = '-';
			o[n++] = (struct option) { dashed, has_arg, NULL, O_table_base + i };
		}
	}
	return o;
}

/* Free what build_longopts() made: the array and the dashed names it strdup()ed. */
static void free_longopts(struct option *o)
{
	for (struct option *p = o; p->name; p++)
		if (p->val >= O_table_base && p->val < O_table_base + BCH_OPT_NR &&
		    p->name != bch_opt_table[p->val - O_table_base].name)
			free((char *)p->name);
	free(o);
}

static int table_opt(struct format_state *s, enum bch_opt_id id, const char *arg)
{
	const struct bch_option *o = &bch_opt_table[id];
	char err[256];
	uint64_t v;

	if (o->type == BCH_OPT_TARGET) {
		s->target_names[id] = arg;
		return 0;
	}
	if (id == Opt_fs_size && arg && !strcmp(arg, "min")) {
		s->min_size = true;
		s->cur.size = 0;
		return 0;
	}
	if (o->type == BCH_OPT_STR) {	/* label */
		s->cur.label = arg;
		return 0;
	}
	if (bch_opt_parse(id, arg ? arg : "", &v, err, sizeof(err))) {
		cmd_err("format", "%s", err);
		return -1;
	}
	switch (id) {
	case Opt_fs_size:	s->cur.size = v; s->min_size = false;	break;
	case Opt_bucket_size:	s->cur.bucket_size = v;		break;
	case Opt_durability:	s->cur.durability = v;		break;
	case Opt_discard:	s->cur.discard = v;		break;
	default:		bch_opt_set(&s->opts, id, v);	break;
	}
	return 0;
}

static int parse_args(struct format_state *s, int argc, char *argv[])
{
	struct option *longopts = build_longopts();
	char *end;
	int c, ret = 0;

	while (!ret && (c = getopt_long(argc, argv, "-L:U:fqC:h", longopts, NULL)) != -1) {
		switch (c) {
		case 1:
		case 'C':
		case O_cache:
			add_dev(s, optarg);
			break;
		case 'L':
		case O_fs_label:
			if (strlen(optarg) > BCH_SB_LABEL_SIZE) {
				cmd_err("format", "label '%s' longer than %u bytes", optarg,
					BCH_SB_LABEL_SIZE);
				ret = -1;
			}
			s->args.fs_label = optarg;
			break;
		case 'U':
		case O_uuid:
			if (uuid_parse(optarg, s->args.user_uuid)) {
				cmd_err("format", "'%s' is not a UUID", optarg);
				ret = -1;
			}
			s->args.have_uuid = true;
			break;
		case 'f': case O_force:		s->force = true;		break;
		case 'q': case O_quiet:		s->quiet = true;		break;
		case O_no_btrees:		s->args.no_btrees = true;	break;
		case O_source:			s->source = optarg;		break;
		case O_passphrase_file:		s->passphrase_file = optarg;	break;
		case O_no_passphrase:		s->no_passphrase = true;	break;
		case O_headroom:		s->headroom = optarg;		break;
		case O_json:			s->json = true;			break;
		case O_subvolume:		s->subvolume = optarg;		break;
		case 'h': case O_help:
			free_longopts(longopts);
			format_usage(stdout);
			exit(EXIT_OK);
		case O_tier:
			s->tier = strtol(optarg, &end, 10);
			if (*end || !*optarg || s->tier < 0 || s->tier > 7) {
				cmd_err("format", "--tier: '%s' is not a tier (0..7)", optarg);
				ret = -1;
			}
			break;
		case O_replicas:
			if ((ret = table_opt(s, Opt_data_replicas, optarg)) == 0)
				ret = table_opt(s, Opt_metadata_replicas, optarg);
			break;
		case '?':
			ret = cmd_opt_err("format", argv, "-L:U:fqC:h");
			break;
		default:
			if (c >= O_table_base && c < O_table_base + BCH_OPT_NR)
				ret = table_opt(s, c - O_table_base, optarg);
			else if (c >= O_spec_base && c < O_spec_base + SPEC_NR_OPTS)
				ret = spec_opt(&s->spec, c - O_spec_base, optarg, "format");
			else
				ret = -1;
		}
	}
	free_longopts(longopts);
	return ret;
}

/* Default targets for the 2015 tier spelling. */
static void tier_targets(struct format_state *s)
{
	static char lo_name[16], hi_name[16];
	int lo = -1, hi = -1;

	for (int t = 0; t < 8; t++)
		if (s->tiers_seen[t]) {
			if (lo < 0)
				lo = t;
			hi = t;
		}
	if (lo < 0)
		return;
	/* Devices named before the first --tier (e.g. `-C ssd --tier 1 hdd`) are tier 0. */
	for (unsigned i = 0; i < s->nr_devs; i++)
		if (!s->devs[i].label) {
			s->devs[i].label = "tier0";
			lo = 0;
		}
	if (lo == hi)
		return;
	snprintf(lo_name, sizeof(lo_name), "tier%d", lo);
	snprintf(hi_name, sizeof(hi_name), "tier%d", hi);
	if (!s->target_names[Opt_foreground_target])
		s->target_names[Opt_foreground_target] = lo_name;
	if (!s->target_names[Opt_promote_target])
		s->target_names[Opt_promote_target] = lo_name;
	if (!s->target_names[Opt_metadata_target])
		s->target_names[Opt_metadata_target] = lo_name;
	if (!s->target_names[Opt_background_target])
		s->target_names[Opt_background_target] = hi_name;
}

/*
 * libblkid, loaded only when format probes a device (dl.h): linked, it was
 * mapped into every command.  Member x is blkid_x.
 */
#define BLKID_DL_SONAME		"libblkid.so.1"		/* Debian package libblkid1 */
#define BLKID_DL_FUNCS()			\
	x(new_probe_from_filename)		\
	x(probe_enable_superblocks)		\
	x(probe_set_superblocks_flags)		\
	x(probe_enable_partitions)		\
	x(do_safeprobe)				\
	x(probe_lookup_value)			\
	x(free_probe)

static struct blkid_dl {
#define x(name)	BCH_DL_MEMBER(name, blkid_##name)
	BLKID_DL_FUNCS()
#undef x
} blkid;

static const struct bch_dl_sym blkid_syms[] = {
#define x(name)	BCH_DL_SYM(struct blkid_dl, name, blkid_##name, NULL)
	BLKID_DL_FUNCS()
#undef x
};

static struct bch_dl_lib blkid_lib = BCH_DL_LIB(BLKID_DL_SONAME, -ELIBACC, blkid_syms, &blkid);

/*
 * What is on the device already?  Fills what[] and returns 1 if a
 * filesystem, partition table or bcachefs superblock was found, 0 if not,
 * or a negative error (printed) when it cannot tell: libblkid is missing.
 */
int cmd_probe_existing(const char *path, bool skip_ours, char *what, size_t len)
{
	struct bch_blockdev *bd;
	struct bch_sb *sb = NULL;
	bool found = false;
	const char *val;

	if (access(path, F_OK))
		return 0;
	/* our own format first: blkid does not know it */
	if (!skip_ours && !bch_dev_open(path, BCH_DEV_RDONLY | BCH_DEV_NO_LOCK, &bd)) {
		if (!bch_sb_read(bd, &sb, NULL)) {
			char uuid[37];
			uuid_unparse(sb->user_uuid, uuid);
			snprintf(what, len, "a bcachefs filesystem (UUID %s)", uuid);
			found = true;
		}
		free(sb);
		bch_dev_close(bd);
		if (found)
			return 1;
	}

	int r = bch_dl_load(&blkid_lib);
	if (r) {
		cmd_err("format", "cannot load %s to look for an existing filesystem on %s: %s "
			"(--force formats without looking)", blkid_lib.soname, path, blkid_lib.why);
		return r;
	}
	blkid_probe pr = blkid.new_probe_from_filename(path);
	if (!pr)
		return 0;
	blkid.probe_enable_superblocks(pr, 1);
	blkid.probe_set_superblocks_flags(pr, BLKID_SUBLKS_TYPE | BLKID_SUBLKS_LABEL);
	blkid.probe_enable_partitions(pr, 1);
	if (!blkid.do_safeprobe(pr)) {
		if (!blkid.probe_lookup_value(pr, "TYPE", &val, NULL)) {
			snprintf(what, len, "a filesystem of type %s", val);
			found = true;
		} else if (!blkid.probe_lookup_value(pr, "PTTYPE", &val, NULL)) {
			snprintf(what, len, "a partition table of type %s", val);
			found = true;
		}
	}
	blkid.free_probe(pr);
	return found;
}

/* The smallest image: the tree under --source as bch_format_min_estimate() counts it. */
static struct tree_measure {
	uint64_t	block, data, inodes, names;
} tm;

static int measure_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)flag;
	tm.inodes++;
	tm.names += strlen(path + f->base) + 1;
	if (S_ISREG(st->st_mode)) {
		uint64_t whole = ((uint64_t)st->st_size + tm.block - 1) / tm.block * tm.block;
		uint64_t alloc = ((uint64_t)st->st_blocks * 512 + tm.block - 1) / tm.block * tm.block;
		tm.data += alloc < whole ? alloc : whole;	/* holes stay holes */
	} else if (S_ISLNK(st->st_mode)) {
		tm.names += st->st_size;
	}
	ssize_t x = llistxattr(path, NULL, 0);
	if (x > 0)
		tm.names += 4 * x;	/* names, and values seldom longer */
	return 0;
}

/*
 * --fs-size=min (or --source onto a new image file): measure the tree and
 * size the image to copy into (bch_format_min_room) and the geometry for
 * the shrunk one (bch_format_min_estimate).  0, or an exit code after a
 * message.
 */
static int plan_min_size(struct format_state *s)
{
	struct bch_format_dev *d = &s->devs[0];
	struct stat st;
	char a[32];

	if (!s->source) {
		cmd_err("format", "--fs-size=min needs --source (the tree to size the image for)");
		return EXIT_USAGE;
	}
	if (s->nr_devs != 1) {
		cmd_err("format", "the smallest image is one image file (%u devices given)", s->nr_devs);
		return EXIT_USAGE;
	}
	if (!stat(d->path, &st) && !S_ISREG(st.st_mode)) {
		cmd_err("format", "%s: --fs-size=min makes an image file, not a device", d->path);
		return EXIT_USAGE;
	}
	if (image_headroom_parse(s->headroom ? s->headroom : IMAGE_HEADROOM_DEFAULT, &s->hr)) {
		cmd_err("format", "--headroom '%s' does not fit: not a percentage (0..%u%%) or a "
			"size up to 1T", s->headroom, IMAGE_HEADROOM_MAX_PCT);
		return EXIT_USAGE;
	}
	memset(&tm, 0, sizeof(tm));
	tm.block = s->opts.v[Opt_block_size];
	if (nftw(s->source, measure_one, 64, FTW_PHYS)) {
		cmd_err("format", "--source %s: %s", s->source, strerror(errno));
		return EXIT_FAIL;
	}
	uint64_t hr = s->hr.is_pct ? tm.data * s->hr.pct_x100 / 10000 : s->hr.bytes;
	d->plan_size = bch_format_min_estimate(tm.data, tm.inodes, tm.names, hr, &s->opts);
	/* small trees: smaller nodes, so that the empty ones and the 64 buckets cost less */
	if (!bch_opt_is_set(&s->opts, Opt_btree_node_size)) {
		bch_opt_set(&s->opts, Opt_btree_node_size,
			    bch_format_min_node_size(d->plan_size, s->opts.v[Opt_btree_node_size],
						     s->opts.v[Opt_block_size]));
		d->plan_size = bch_format_min_estimate(tm.data, tm.inodes, tm.names, hr, &s->opts);
	}
	d->size = bch_format_min_room(d->plan_size);
	if (!s->quiet && !s->json) {
		bch_human_size(tm.data, a, sizeof(a));
		printf("Tree:        %" PRIu64 " inodes, %s of file data in blocks\n", tm.inodes, a);
	}
	return 0;
}

/* The smallest image: move the data down and cut the file (cmd_image_shrink.c). */
static int shrink_new(struct format_state *s, struct bch_fs **cp)
{
	char **paths = calloc(1, sizeof(*paths)), err[512];
	unsigned nr = 1;
	struct bch_opts o;
	int r;

	if (!paths || !(paths[0] = strdup(s->devs[0].path)))
		return -ENOMEM;
	bch_opts_default(&o);
	if (!(r = image_shrink_plan(*cp, &s->hr, &s->sp, err, sizeof(err))))
		r = image_shrink_run(cp, &paths, &nr, &o, &s->sp, isatty(2) && !s->quiet && !s->json,
				     &s->sr, err, sizeof(err));
	if (r)
		cmd_err("format", "%s: shrinking to the smallest image: %s", s->devs[0].path, err);
	for (unsigned i = 0; i < nr; i++)
		free(paths[i]);
	free(paths);
	return r;
}

/*
 * format --source with a passphrase: its scrypt (0.1-0.3 s of one core) on a
 * thread of its own while the tree is copied in, the key wrapped with it at
 * the end (crypt.h, bch_crypt_wrap_prepare()).  In mlocked memory.
 */
struct kdf_job {
	struct bch_sb_field_crypt	f;	/* a copy: scrypt's parameters and salt */
	const char			*pass;
	size_t				len;
	uint8_t				wk[BCH_KEY_BYTES];
	int				r;
	pthread_t			th;
	bool				started;
};

static void *kdf_run(void *p)
{
	struct kdf_job *k = p;

	k->r = bch_crypt_kdf(&k->f, k->pass, k->len, k->wk);
	return NULL;
}

static struct kdf_job *kdf_start(struct bch_fs *c, const char *pass)
{
	const struct bch_sb_field_crypt *f = bch_sb_crypt(c->sb);
	struct kdf_job *k = f ? sodium_malloc(sizeof(*k)) : NULL;

	if (!k)
		return NULL;
	memset(k, 0, sizeof(*k));
	k->f = *f;
	k->pass = pass;
	k->len = strlen(pass);
	k->started = !pthread_create(&k->th, NULL, kdf_run, k);
	return k;
}

/*
 * The key wrapped and the superblocks written, also after a failed copy:
 * the image then opens with the passphrase, as it did with the key wrapped
 * at format.
 */
static int kdf_finish(struct bch_fs *c, struct kdf_job *k)
{
	int r;

	if (!k)
		return -ENOMEM;
	if (k->started)
		pthread_join(k->th, NULL);
	else
		kdf_run(k);	/* no thread: here */
	r = k->r;
	if (!r)
		r = bch_crypt_wrap_finish_fs(c, k->wk);
	sodium_free(k);		/* wipes the wrapping key */
	return r;
}

/* format --source: open the new filesystem and copy the tree in. */
static int populate(struct format_state *s)
{
	char **paths = calloc(s->nr_devs, sizeof(*paths)), err[512];
	struct bch_fs *c;
	struct bch_opts o;
	struct copy_ctx x;
	int r;

	for (unsigned i = 0; i < s->nr_devs; i++)
		paths[i] = (char *)s->devs[i].path;
	bch_opts_default(&o);
	r = bch_fs_open(paths, s->nr_devs, &o, &c, err, sizeof(err));
	free(paths);
	if (r) {
		cmd_err("format", "opening the new filesystem: %s", err);
		return EXIT_FAIL;
	}
	struct kdf_job *kdf = s->args.wrap_later ? kdf_start(c, s->args.passphrase) : NULL;
	/* --subvolume: the tree goes into a new subvolume at the root */
	uint64_t top = BCH_ROOT_INO;
	if (s->subvolume && (r = bch_fs_subvol_create(c, BCH_ROOT_INO, s->subvolume, 0755, getuid(), getgid(),
						     &top))) {
		cmd_err("format", "--subvolume %s: %s%s%s%s", s->subvolume, strerror(-r),
			c->err_msg[0] ? " (" : "", c->err_msg, c->err_msg[0] ? ")" : "");
		if (s->args.wrap_later)
			kdf_finish(c, kdf);
		bch_fs_close(c);
		return EXIT_FAIL;
	}
	if ((r = copy_ctx_init(&x, c, "format")) == 0) {
		x.spec = &s->spec;
		r = copy_in(&x, s->source, top, NULL);
	}
	copy_progress_done(&x);
	s->files = x.files;
	s->bytes = x.bytes;
	if (!r && !s->quiet && !s->json)
		printf("Copied:      %" PRIu64 " files, %" PRIu64 " bytes from %s\n", x.files, x.bytes,
		       s->source);
	if (!r && (r = spec_apply(&s->spec, c, top, "format")) == 0 && s->spec.nr &&
	    !s->quiet && !s->json)
		printf("Spec:        %" PRIu64 " created, %" PRIu64 " modified, %" PRIu64 " xattrs from %s\n",
		       s->spec.created, s->spec.modified, s->spec.xattrs, s->spec.file);
	copy_ctx_exit(&x);
	int kr = s->args.wrap_later ? kdf_finish(c, kdf) : 0;
	if (kr) {
		cmd_err("format", "wrapping the key with the passphrase: %s%s%s%s", bch_err_str(kr),
			c->err_msg[0] ? " (" : "", c->err_msg, c->err_msg[0] ? ")" : "");
		r = r ? r : kr;
	}
	if (!r && s->min_size)
		r = shrink_new(s, &c);
	int cr = c ? bch_fs_close(c) : 0;
	if (cr && !r) {
		cmd_err("format", "closing the new filesystem: %s", bch_err_str(cr));
		r = cr;
	}
	return r ? EXIT_FAIL : 0;
}

int cmd_format(int argc, char *argv[])
{
	struct format_state s = { .tier = -1 };
	char err[512], what[128];
	int ret;

	bch_opts_default(&s.opts);
	s.cur.durability = 1;

	if (parse_args(&s, argc, argv)) {
		fprintf(stderr, "Try 'bcachefs format --help'.\n");
		ret = EXIT_USAGE;
		goto out;
	}
	if (!s.nr_devs) {
		cmd_err("format", "no devices given");
		fprintf(stderr, "Try 'bcachefs format --help'.\n");
		ret = EXIT_USAGE;
		goto out;
	}
	tier_targets(&s);
	if (s.source) {
		struct stat st;
		if (stat(s.source, &st) || !S_ISDIR(st.st_mode)) {
			cmd_err("format", "--source %s: %s", s.source,
				errno && !S_ISDIR(st.st_mode) ? strerror(errno) : "not a directory");
			ret = EXIT_USAGE;
			goto out;
		}
		if (s.args.no_btrees) {
			cmd_err("format", "--source needs the btrees (not --superblock-only)");
			ret = EXIT_USAGE;
			goto out;
		}
		/* a new image file without a size: the smallest one */
		if (s.nr_devs == 1 && !s.devs[0].size && access(s.devs[0].path, F_OK) && errno == ENOENT)
			s.min_size = true;
	}
	if (s.subvolume && (!s.source || !*s.subvolume || strchr(s.subvolume, '/') ||
			    !strcmp(s.subvolume, ".") || !strcmp(s.subvolume, "..") ||
			    strlen(s.subvolume) > 255)) {
		cmd_err("format", s.source ? "--subvolume %s: a name (no '/', 1 to 255 bytes)"
					   : "--subvolume needs --source (the tree to put in it)", s.subvolume);
		ret = EXIT_USAGE;
		goto out;
	}
	if (s.headroom && !s.min_size) {
		cmd_err("format", "--headroom is for the smallest image (--source, no --fs-size)");
		ret = EXIT_USAGE;
		goto out;
	}
	/* every spec line checked before anything is written */
	if (spec_active(&s.spec) && !s.source) {
		cmd_err("format", "--all-root, --uid-map, --gid-map, --timestamp and --spec need --source");
		ret = EXIT_USAGE;
		goto out;
	}
	if ((ret = spec_load(&s.spec, "format")))
		goto out;
	if (s.min_size && (ret = plan_min_size(&s)))
		goto out;

	if ((s.passphrase_file || s.no_passphrase) && !s.opts.v[Opt_encrypted]) {
		cmd_err("format", "--%s needs --encrypted",
			s.no_passphrase ? "no-passphrase" : "passphrase-file");
		ret = EXIT_USAGE;
		goto out;
	}
	if (s.passphrase_file && s.no_passphrase) {
		cmd_err("format", "--passphrase-file and --no-passphrase contradict each other");
		ret = EXIT_USAGE;
		goto out;
	}

	for (unsigned i = 0; i < s.nr_devs && !s.force; i++) {
		int found = cmd_probe_existing(s.devs[i].path, false, what, sizeof(what));
		if (found < 0) {
			ret = EXIT_FAIL;
			goto out;
		}
		if (found) {
			cmd_err("format", "%s contains %s; use --force to overwrite it",
				s.devs[i].path, what);
			ret = EXIT_FAIL;
			goto out;
		}
	}

	/* the passphrase last, once nothing else can refuse */
	char *pass = NULL;
	if (s.opts.v[Opt_encrypted] && !s.no_passphrase) {
		size_t len;
		ret = bch_passphrase_read(s.passphrase_file, "Enter passphrase: ", true, &pass, &len,
					  err, sizeof(err));
		if (ret) {
			cmd_err("format", "%s", ret == -BCH_ERR_key_missing
				? "--encrypted: no passphrase given (stdin ended); --passphrase-file "
				  "FILE, or --no-passphrase"
				: err);
			ret = EXIT_FAIL;
			goto out;
		}
		s.args.passphrase = pass;
		/* with --source its scrypt runs beside the copy (populate()) */
		s.args.wrap_later = s.source != NULL;
	}

	ret = bch_format(s.devs, s.nr_devs, &s.opts, s.target_names, &s.args,
			 err, sizeof(err));
	if (ret) {
		bch_passphrase_free(pass);
		s.args.passphrase = NULL;
		cmd_err("format", "%s", err);
		ret = ret == -BCH_ERR_opt_invalid || ret == -EINVAL ? EXIT_USAGE : EXIT_FAIL;
		goto out;
	}

	if (s.source)
		ret = populate(&s);
	bch_passphrase_free(pass);
	s.args.passphrase = NULL;
	if (ret)
		goto out;

	if (s.json) {
		struct bch_json j;
		struct stat st;

		json_begin(&j, stdout, false);
		json_string(&j, "image", s.devs[0].path);
		json_bool(&j, "smallest", s.min_size);
		if (s.source) {
			json_u64(&j, "files", s.files);
			json_u64(&j, "bytes", s.bytes);
		}
		if (s.min_size) {
			json_u64(&j, "estimate", s.devs[0].plan_size);
			json_u64(&j, "used_bytes", s.sp.used_bytes);
			json_u64(&j, "headroom_bytes", s.sp.headroom_bytes);
			json_u64(&j, "min_size", s.sp.min_bytes);
			json_u64(&j, "moved_bytes", s.sr.moved_bytes);
		}
		if (s.source)
			spec_json(&s.spec, &j);
		if (!stat(s.devs[0].path, &st))
			json_u64(&j, "size", st.st_size);
		json_end(&j);
	} else if (!s.quiet) {
		struct bch_blockdev *bd;
		struct bch_sb *sb;
		char uuid[37], size[32];

		if (!bch_dev_open(s.devs[0].path, BCH_DEV_RDONLY | BCH_DEV_NO_LOCK, &bd)) {
			if (!bch_sb_read(bd, &sb, NULL)) {
				uuid_unparse(sb->user_uuid, uuid);
				printf("UUID:        %s\n", uuid);
				printf("Label:       %.*s\n", BCH_SB_LABEL_SIZE, sb->label);
				for (unsigned i = 0; i < s.nr_devs; i++) {
					struct bch_member *m = bch_sb_member(sb, i);
					bch_human_size(m->nbuckets * m->bucket_size * 512ULL,
						       size, sizeof(size));
					printf("Device %-4u %s: %s\n", i, s.devs[i].path, size);
				}
				if (s.min_size) {
					char a[32], b[32];
					struct stat st = { 0 };
					stat(s.devs[0].path, &st);
					bch_human_size(s.sp.min_bytes, a, sizeof(a));
					bch_human_size(s.sp.headroom_bytes, b, sizeof(b));
					printf("Smallest:    %" PRIu64 " bytes (%s without the headroom of %s; "
					       "metadata copies %u)\n", (uint64_t)st.st_size, a, b,
					       (unsigned)sb->opts[bch_opt_table[Opt_metadata_replicas].sb_slot]);
				}
				free(sb);
			}
			bch_dev_close(bd);
		}
	}
	ret = EXIT_OK;
out:
	spec_exit(&s.spec);
	free(s.devs);
	return ret;
}
