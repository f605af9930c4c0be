// SPDX-License-Identifier: GPL-2.0
/*
 * spec.c - owner maps and mksquashfs pseudo-file definitions (see spec.h).
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>

#include "bcachefs.h"
#include "cmds.h"
#include "fs_ops.h"
#include "spec.h"

#define ID_MAX		0xfffffffeULL	/* (uint32_t)-1 means "no id" */

struct spec_line {
	unsigned	lineno;
	char		kind;		/* lower case */
	char		*path;		/* relative to the root, no leading '/' */
	mode_t		mode;		/* permission bits */
	uint32_t	uid, gid;
	int64_t		time;		/* seconds; INT64_MIN: none given */
	dev_t		rdev;
	char		ftype;		/* i: 's' or 'f' */
	char		*arg;		/* s: target; l: link target; x: name */
	char		*val;		/* x: the value */
	size_t		val_len;
};

const struct option spec_longopts[SPEC_NR_OPTS] = {
	{ "all-root",	no_argument,	   NULL, 0 },
	{ "uid-map",	required_argument, NULL, 1 },
	{ "gid-map",	required_argument, NULL, 2 },
	{ "spec",	required_argument, NULL, 3 },
	{ "timestamp",	required_argument, NULL, 4 },
};

const char spec_help[] =
"      --all-root              every file owned by 0:0 (after the maps)\n"
"      --uid-map=MAP           change owners: +N or -N (an offset), a table\n"
"      --gid-map=MAP           FROM:TO[:COUNT][,...] (ids not in it kept), or\n"
"                              @FILE with one FROM:TO[:COUNT] a line\n"
"      --timestamp=SECONDS     every atime and mtime set to SECONDS (an epoch)\n"
"      --spec=FILE             mksquashfs pseudo-file definitions applied on top:\n"
"                              PATH d|m MODE UID GID; PATH b|c MODE UID GID MAJ MIN;\n"
"                              PATH s MODE UID GID TARGET; PATH i MODE UID GID s|f;\n"
"                              PATH l TARGET; PATH x NAME=VALUE; upper case D M B C\n"
"                              S I take a TIME after the kind (no root needed)\n";

/* ------------------------------------------------------------- maps */

static int parse_u32(const char *p, char **end, uint32_t *v)
{
	if (!isdigit((unsigned char)*p))
		return -1;
	errno = 0;
	unsigned long long n = strtoull(p, end, 10);
	if (errno || n > ID_MAX)
		return -1;
	*v = n;
	return 0;
}

/* One FROM:TO[:COUNT] at p, up to a ',' or the end. */
static int map_add_range(struct spec_map *m, const char *p, char **end)
{
	struct spec_range r = { .count = 1 };

	if (parse_u32(p, end, &r.from) || **end != ':' || parse_u32(*end + 1, end, &r.to))
		return -1;
	if (**end == ':' && (parse_u32(*end + 1, end, &r.count) || !r.count))
		return -1;
	if ((uint64_t)r.from + r.count - 1 > ID_MAX || (uint64_t)r.to + r.count - 1 > ID_MAX)
		return -1;
	m->r = realloc(m->r, (m->nr + 1) * sizeof(*m->r));
	if (!m->r)
		abort();
	m->r[m->nr++] = r;
	return 0;
}

static int map_parse_file(struct spec_map *m, const char *file, const char *opt, const char *cmd)
{
	FILE *f = fopen(file, "r");
	char line[256];
	unsigned lineno = 0;

	if (!f) {
		cmd_err(cmd, "--%s: %s: %s", opt, file, strerror(errno));
		return EXIT_USAGE;
	}
	while (fgets(line, sizeof(line), f)) {
		char *p = line, *end;
		lineno++;
		while (isspace((unsigned char)*p))
			p++;
		if (!*p || *p == '#')
			continue;
		if (map_add_range(m, p, &end) || (*end && !isspace((unsigned char)*end))) {
			line[strcspn(line, "\n")] = 0;
			cmd_err(cmd, "--%s: %s:%u: '%s' is not FROM:TO[:COUNT]", opt, file, lineno, line);
			fclose(f);
			return EXIT_USAGE;
		}
	}
	fclose(f);
	return 0;
}

static int map_parse(struct spec_map *m, const char *arg, const char *opt, const char *cmd)
{
	char *end;

	free(m->r);
	*m = (struct spec_map) { .set = true };
	if (arg[0] == '@')
		return map_parse_file(m, arg + 1, opt, cmd);
	if (arg[0] == '+' || arg[0] == '-') {
		uint32_t n;
		if (parse_u32(arg + 1, &end, &n) || *end)
			goto bad;
		m->offset = arg[0] == '-' ? -(int64_t)n : n;
		return 0;
	}
	for (const char *p = arg;; p = end + 1) {
		if (map_add_range(m, p, &end))
			goto bad;
		if (!*end)
			return 0;
		if (*end != ',')
			goto bad;
	}
bad:
	cmd_err(cmd, "--%s: '%s' is not +N, -N, FROM:TO[:COUNT][,...] or @FILE", opt, arg);
	return EXIT_USAGE;
}

static int map_id(const struct spec_map *m, uint32_t *id)
{
	if (!m->set)
		return 0;
	if (!m->nr) {
		int64_t v = (int64_t)*id + m->offset;
		if (v < 0 || v > (int64_t)ID_MAX)
			return -ERANGE;
		*id = v;
		return 0;
	}
	for (size_t i = 0; i < m->nr; i++)
		if (*id >= m->r[i].from && *id - m->r[i].from < m->r[i].count) {
			*id = m->r[i].to + (*id - m->r[i].from);
			return 0;
		}
	return 0;
}

int spec_map_owner(const struct bch_spec *s, uint32_t *uid, uint32_t *gid)
{
	int r;

	if (!s)
		return 0;
	if ((r = map_id(&s->uid, uid)) || (r = map_id(&s->gid, gid)))
		return r;
	if (s->all_root)
		*uid = *gid = 0;
	return 0;
}

void spec_map_time(const struct bch_spec *s, int64_t *atime, int64_t *mtime)
{
	if (s && s->epoch_set)
		*atime = *mtime = s->epoch * 1000000000LL;
}

int spec_map_stat(const struct bch_spec *s, struct stat *st)
{
	uint32_t uid = st->st_uid, gid = st->st_gid;
	int r;

	if (!s)
		return 0;
	if ((r = spec_map_owner(s, &uid, &gid)))
		return r;
	st->st_uid = uid;
	st->st_gid = gid;
	if (s->epoch_set)
		st->st_atim = st->st_mtim = (struct timespec) { .tv_sec = s->epoch };
	return 0;
}

bool spec_active(const struct bch_spec *s)
{
	return s->all_root || s->uid.set || s->gid.set || s->epoch_set || s->file;
}

int spec_opt(struct bch_spec *s, int idx, const char *arg, const char *cmd)
{
	char *end;

	switch (idx) {
	case 0:
		s->all_root = true;
		return 0;
	case 1:
		return map_parse(&s->uid, arg, "uid-map", cmd);
	case 2:
		return map_parse(&s->gid, arg, "gid-map", cmd);
	case 3:
		s->file = arg;
		return 0;
	case 4:
		errno = 0;
		s->epoch = strtoll(arg, &end, 10);
		if (errno || !*arg || *end || s->epoch < 0 || s->epoch > (INT64_MAX / 1000000000LL)) {
			cmd_err(cmd, "--timestamp: '%s' is not a number of seconds", arg);
			return EXIT_USAGE;
		}
		s->epoch_set = true;
		return 0;
	}
	return EXIT_USAGE;
}

/* ------------------------------------------------------------ parsing */

struct parse {
	const struct bch_spec	*s;
	const char		*cmd;
	unsigned		lineno;
	char			*p;		/* the rest of the line */
};

static int __attribute__((format(printf, 2, 3))) perr(struct parse *ps, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cmd_err(ps->cmd, "%s:%u: %s", ps->s->file, ps->lineno, msg);
	return EXIT_USAGE;
}

static void skip_blanks(struct parse *ps)
{
	while (*ps->p == ' ' || *ps->p == '\t')
		ps->p++;
}

/* The next word, in place: "quotes" group, \ escapes (as mksquashfs). NULL at the end. */
static char *word(struct parse *ps)
{
	char *out, *w;
	bool quoted = false;

	skip_blanks(ps);
	if (!*ps->p)
		return NULL;
	w = out = ps->p;
	while (*ps->p && (quoted || (*ps->p != ' ' && *ps->p != '\t'))) {
		if (*ps->p == '"') {
			quoted = !quoted;
			ps->p++;
		} else if (*ps->p == '\\' && ps->p[1]) {
			*out++ = ps->p[1];
			ps->p += 2;
		} else {
			*out++ = *ps->p++;
		}
	}
	if (*ps->p)
		ps->p++;
	*out = 0;
	return w;
}

static int need(struct parse *ps, char **w, const char *what)
{
	if (!(*w = word(ps)))
		return perr(ps, "%s missing", what);
	return 0;
}

static int parse_mode(struct parse *ps, mode_t *mode)
{
	char *w, *end;
	int r;

	if ((r = need(ps, &w, "mode")))
		return r;
	unsigned long v = strtoul(w, &end, 8);
	if (!*w || *end || *w == '-' || *w == '+' || v > 07777)
		return perr(ps, "bad mode '%s' (octal, at most 7777)", w);
	*mode = v;
	return 0;
}

static int parse_owner(struct parse *ps, bool group, uint32_t *id)
{
	const char *what = group ? "gid" : "uid";
	char *w, *end;
	int r;

	if ((r = need(ps, &w, what)))
		return r;
	if (isdigit((unsigned char)*w)) {
		if (parse_u32(w, &end, id) || *end)
			return perr(ps, "bad %s '%s'", what, w);
		return 0;
	}
	if (group) {
		struct group *g = getgrnam(w);
		if (g) {
			*id = g->gr_gid;
			return 0;
		}
	} else {
		struct passwd *pw = getpwnam(w);
		if (pw) {
			*id = pw->pw_uid;
			return 0;
		}
	}
	return perr(ps, "unknown %s '%s' (a number, or a name in the host's %s)",
		    group ? "group" : "user", w, group ? "group file" : "passwd");
}

static int parse_num(struct parse *ps, const char *what, unsigned long max, unsigned long *v)
{
	char *w, *end;
	int r;

	if ((r = need(ps, &w, what)))
		return r;
	errno = 0;
	*v = strtoul(w, &end, 10);
	if (!isdigit((unsigned char)*w) || *end || errno || *v > max)
		return perr(ps, "bad %s '%s'", what, w);
	return 0;
}

/* A path of the tree: no "." or ".." component, relative to the root. */
static int clean_path(struct parse *ps, char *w, char **ret)
{
	while (*w == '/')
		w++;
	size_t n = strlen(w);
	while (n && w[n - 1] == '/')
		w[--n] = 0;
	if (!*w) {		/* the root: only m, d and x (checked by the caller) */
		*ret = strdup("");
		return 0;
	}
	for (char *c = w; *c;) {
		size_t l = strcspn(c, "/");
		if (!l)
			return perr(ps, "path '%s' has an empty component", w);
		if ((l == 1 && c[0] == '.') || (l == 2 && c[0] == '.' && c[1] == '.'))
			return perr(ps, "path '%s' leaves the tree or has a '.' component", w);
		c += l;
		if (*c)
			c++;
	}
	*ret = strdup(w);
	return 0;
}

static int hexval(int c)
{
	return isdigit(c) ? c - '0' : isxdigit(c) ? tolower(c) - 'a' + 10 : -1;
}

static int parse_xattr(struct parse *ps, struct spec_line *l)
{
	char *w, *eq;
	int r;

	if ((r = need(ps, &w, "NAME=VALUE")))
		return r;
	if (!(eq = strchr(w, '=')) || eq == w)
		return perr(ps, "'%s' is not NAME=VALUE", w);
	*eq++ = 0;
	if (!strchr(w, '.'))
		return perr(ps, "xattr name '%s' has no namespace (user., security., trusted.)", w);
	l->arg = strdup(w);
	/* setfattr's encodings, as mksquashfs: 0x hex, 0t text, 0s base64 (not taken) */
	if (!strncmp(eq, "0s", 2) || !strncmp(eq, "0S", 2))
		return perr(ps, "xattr value '%s': base64 (0s) is not supported; give 0x hex", eq);
	if (!strncmp(eq, "0t", 2) || !strncmp(eq, "0T", 2))
		eq += 2;
	else if (!strncmp(eq, "0x", 2) || !strncmp(eq, "0X", 2)) {
		size_t n = strlen(eq + 2);
		if (!n || n % 2)
			return perr(ps, "xattr value '%s': an even number of hex digits after 0x", eq);
		l->val = malloc(n / 2 + 1);
		for (size_t i = 0; i < n / 2; i++) {
			int hi = hexval((unsigned char)eq[2 + 2 * i]), lo = hexval((unsigned char)eq[3 + 2 * i]);
			if (hi < 0 || lo < 0)
				return perr(ps, "xattr value '%s': not hex", eq);
			l->val[i] = hi << 4 | lo;
		}
		l->val_len = n / 2;
		return 0;
	}
	l->val = strdup(eq);
	l->val_len = strlen(eq);
	return 0;
}

static int parse_line(struct parse *ps, struct spec_line *l)
{
	char *w;
	unsigned long maj, min;
	int r;

	if ((r = need(ps, &w, "path")) || (r = clean_path(ps, w, &l->path)))
		return r;
	if ((r = need(ps, &w, "kind")))
		return r;
	if (strlen(w) != 1)
		return perr(ps, "unknown kind '%s'", w);
	char k = w[0];
	l->kind = tolower((unsigned char)k);
	l->time = INT64_MIN;
	if (!*l->path && !strchr("dmxDM", k))
		return perr(ps, "kind '%c' cannot name the root '/'", k);
	switch (k) {
	case 'f': case 'F':
		return perr(ps, "kind '%c' (a file from a command) is not supported: put the file in the tree", k);
	case 'R':
		return perr(ps, "kind 'R' (a file from a reference) is not supported");
	case 'L':
		return perr(ps, "kind 'L' (a link to a pseudo file) is not supported: use 'l'");
	case 'l':
		if ((r = need(ps, &w, "link target")) || (r = clean_path(ps, w, &l->arg)))
			return r;
		goto end;
	case 'x':
		if ((r = parse_xattr(ps, l)))
			return r;
		goto end;
	case 'D': case 'M': case 'B': case 'C': case 'S': case 'I': {
		unsigned long t;
		if ((r = parse_num(ps, "time", INT64_MAX / 1000000000LL, &t)))
			return r;
		l->time = t;
		break;
	}
	case 'd': case 'm': case 'b': case 'c': case 's': case 'i':
		break;
	default:
		return perr(ps, "unknown kind '%s' (d m b c s i l x, D M B C S I)", w);
	}
	if ((r = parse_mode(ps, &l->mode)) || (r = parse_owner(ps, false, &l->uid)) ||
	    (r = parse_owner(ps, true, &l->gid)))
		return r;
	switch (l->kind) {
	case 'b': case 'c':
		if ((r = parse_num(ps, "major", 4095, &maj)) || (r = parse_num(ps, "minor", (1UL << 20) - 1, &min)))
			return r;
		l->rdev = makedev(maj, min);
		break;
	case 's':
		skip_blanks(ps);
		if (!*ps->p)
			return perr(ps, "symlink target missing");
		l->arg = strdup(ps->p);
		return 0;
	case 'i':
		if ((r = need(ps, &w, "s or f")))
			return r;
		if (strcmp(w, "s") && strcmp(w, "f"))
			return perr(ps, "'%s': i takes s (socket) or f (fifo)", w);
		l->ftype = w[0];
		break;
	}
end:
	skip_blanks(ps);
	if (*ps->p)
		return perr(ps, "unexpected '%s' at the end", ps->p);
	return 0;
}

int spec_load(struct bch_spec *s, const char *cmd)
{
	struct parse ps = { .s = s, .cmd = cmd };
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int r = 0;

	if (!s->file)
		return 0;
	FILE *f = fopen(s->file, "r");
	if (!f) {
		cmd_err(cmd, "--spec %s: %s", s->file, strerror(errno));
		return EXIT_USAGE;
	}
	while (!r && (len = getline(&line, &cap, f)) >= 0) {
		ps.lineno++;
		while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = 0;
		ps.p = line;
		skip_blanks(&ps);
		if (!*ps.p || *ps.p == '#')
			continue;
		if (strlen(ps.p) != (size_t)len - (ps.p - line)) {
			r = perr(&ps, "a NUL byte in the line");
			break;
		}
		s->lines = realloc(s->lines, (s->nr + 1) * sizeof(*s->lines));
		if (!s->lines)
			abort();
		struct spec_line *l = &s->lines[s->nr++];
		memset(l, 0, sizeof(*l));
		l->lineno = ps.lineno;
		r = parse_line(&ps, l);
	}
	free(line);
	fclose(f);
	return r;
}

void spec_json(const struct bch_spec *s, struct bch_json *j)
{
	if (!s->file) {
		json_null(j, "spec");
		return;
	}
	json_open(j, "spec", false);
	json_string(j, "file", s->file);
	json_u64(j, "entries", s->nr);
	json_u64(j, "created", s->created);
	json_u64(j, "modified", s->modified);
	json_u64(j, "xattrs", s->xattrs);
	json_close(j);
}

void spec_exit(struct bch_spec *s)
{
	for (size_t i = 0; i < s->nr; i++) {
		free(s->lines[i].path);
		free(s->lines[i].arg);
		free(s->lines[i].val);
	}
	free(s->lines);
	free(s->uid.r);
	free(s->gid.r);
	s->lines = NULL;
	s->uid.r = s->gid.r = NULL;
	s->nr = 0;
}

/* ------------------------------------------------------------ applying */

static int64_t default_time(const struct bch_spec *s)
{
	const char *sde = getenv("SOURCE_DATE_EPOCH");

	if (s->epoch_set)
		return s->epoch * 1000000000LL;
	if (sde && *sde)
		return strtoll(sde, NULL, 10) * 1000000000LL;
	return BCH_TIME_NOW;
}

static int aerr(const struct bch_spec *s, const char *cmd, const struct spec_line *l, const char *what,
		int r)
{
	cmd_err(cmd, "%s:%u: %s: %s: %s", s->file, l->lineno, l->path, what, strerror(-r));
	return r;
}

/*
 * Look up the n bytes of path under root one name at a time: every
 * directory on the way must be a directory of the tree, not a symlink, so a
 * line never reaches outside root (import-tar into a directory).
 */
static int walk(struct bch_fs *c, uint64_t root, const char *path, size_t n, uint64_t *inum)
{
	char name[256];
	struct stat st;
	int r;

	*inum = root;
	for (size_t i = 0, l; i < n; i += l + 1) {
		l = strcspn(path + i, "/");
		if (l > n - i)
			l = n - i;
		if (l >= sizeof(name))
			return -ENAMETOOLONG;
		memcpy(name, path + i, l);
		name[l] = 0;
		if ((r = bch_fs_getattr(c, *inum, &st)))
			return r;
		if (!S_ISDIR(st.st_mode))
			return S_ISLNK(st.st_mode) ? -ELOOP : -ENOTDIR;
		if ((r = bch_fs_lookup(c, *inum, name, inum)))
			return r;
	}
	return 0;
}

/* Split path into its directory (looked up) and the last name. */
static int parent_of(struct bch_fs *c, uint64_t root, const char *path, uint64_t *dir, const char **name)
{
	const char *slash = strrchr(path, '/');
	uint64_t d;
	struct stat st;
	int r;

	*name = slash ? slash + 1 : path;
	if ((r = walk(c, root, path, slash ? slash - path : 0, &d)) ||
	    (r = bch_fs_getattr(c, d, &st)))
		return r;
	if (!S_ISDIR(st.st_mode))
		return S_ISLNK(st.st_mode) ? -ELOOP : -ENOTDIR;
	*dir = d;
	return 0;
}

static int apply_line(struct bch_spec *s, struct bch_fs *c, uint64_t root, const struct spec_line *l,
		      const char *cmd)
{
	uint64_t dir, inum, target;
	const char *name;
	struct stat st;
	int r, exists;

	if ((r = parent_of(c, root, l->path, &dir, &name)))
		return aerr(s, cmd, l, "looking up its directory", r);
	if (*l->path)
		r = bch_fs_lookup(c, dir, name, &inum);
	else
		inum = root;	/* "/": the root itself */
	if (r && r != -ENOENT)
		return aerr(s, cmd, l, "looking up", r);
	exists = !r;
	if (exists && (r = bch_fs_getattr(c, inum, &st)))
		return aerr(s, cmd, l, "reading", r);

	switch (l->kind) {
	case 'x':
		if (!exists)
			return aerr(s, cmd, l, "setting xattr", -ENOENT);
		if ((r = bch_fs_setxattr(c, inum, l->arg, l->val, l->val_len, 0)))
			return aerr(s, cmd, l, "setting xattr", r);
		s->xattrs++;
		return 0;
	case 'l':
		if (exists)
			return aerr(s, cmd, l, "linking", -EEXIST);
		if ((r = walk(c, root, l->arg, strlen(l->arg), &target)))
			return aerr(s, cmd, l, "looking up the link target", r);
		if ((r = bch_fs_link(c, target, dir, name)))
			return aerr(s, cmd, l, "linking", r);
		s->created++;
		return 0;
	case 'm':
		if (!exists)
			return aerr(s, cmd, l, "modifying", -ENOENT);
		break;
	case 'd':
		if (exists && !S_ISDIR(st.st_mode))
			return aerr(s, cmd, l, "making a directory", -EEXIST);
		if (!exists && (r = bch_fs_create(c, dir, name, S_IFDIR | l->mode, 0, l->uid, l->gid, &inum)))
			return aerr(s, cmd, l, "making a directory", r);
		break;
	default: {
		if (exists)
			return aerr(s, cmd, l, "creating", -EEXIST);
		if (l->kind == 's') {
			r = bch_fs_symlink(c, dir, name, l->arg, l->uid, l->gid, &inum);
		} else {
			mode_t t = l->kind == 'b' ? S_IFBLK : l->kind == 'c' ? S_IFCHR :
				   l->ftype == 's' ? S_IFSOCK : S_IFIFO;
			r = bch_fs_create(c, dir, name, t | l->mode, l->rdev, l->uid, l->gid, &inum);
		}
		if (r)
			return aerr(s, cmd, l, "creating", r);
	}
	}
	if (exists)
		s->modified++;
	else
		s->created++;

	int64_t t = l->time != INT64_MIN ? l->time * 1000000000LL : default_time(s);
	struct bch_setattr sa = {
		.valid	= BCH_SETATTR_UID | BCH_SETATTR_GID,
		.uid	= l->uid,
		.gid	= l->gid,
		.mode	= l->mode,
	};
	if (l->kind != 's')
		sa.valid |= BCH_SETATTR_MODE;
	/* a modified entry keeps its times unless M gives one */
	if (l->time != INT64_MIN || !exists) {
		sa.valid |= BCH_SETATTR_ATIME | BCH_SETATTR_MTIME;
		sa.atime = sa.mtime = t;
	}
	if ((r = bch_fs_setattr(c, inum, &sa)))
		return aerr(s, cmd, l, "setting attributes", r);
	return 0;
}

int spec_apply(struct bch_spec *s, struct bch_fs *c, uint64_t root, const char *cmd)
{
	int r;

	for (size_t i = 0; i < s->nr; i++)
		if ((r = apply_line(s, c, root, &s->lines[i], cmd)))
			return r;
	return 0;
}
