/* SPDX-License-Identifier: GPL-2.0 */
#ifndef _BCH_TESTS_IORECORD_H
#define _BCH_TESTS_IORECORD_H

/*
 * iorecord.h - record the writes and flushes of a workload, then rebuild the
 * devices as a power cut at any point of it could have left them.
 *
 * A crash test goes:
 *
 *	r = iorec_new(nr_devs);
 *	iorec_attach(r, 0, dev0);	  snapshot dev0, install the hook
 *	iorec_attach(r, 1, dev1);
 *	... run the workload on dev0, dev1 ...
 *	for each cut point c in 0 .. iorec_nr_events(r), for a few seeds s:
 *		iorec_plan(r, &(struct iorec_cut){ .at = c, .seed = s,
 *				.keep_pct = 50, .torn = true }, &plan);
 *		iorec_write_image(r, &plan, 0, "crash0.img");
 *		iorec_write_image(r, &plan, 1, "crash1.img");
 *		open the images, run fsck, check what was fsynced before c;
 *		on failure print iorec_plan_describe() and the seed;
 *		iorec_plan_free(&plan);
 *	iorec_free(r);
 *
 * The model of a power cut at event `at` (events [0, at) were issued):
 *   (1) Durable: a write to device d issued before the last flush of d in
 *       [0, at) is on d, whole.  Flushes are per device: flushing d says
 *       nothing about another device's writes, as on real hardware.
 *   (2) Unflushed: every later write of [0, at) survives or not, each
 *       independently with probability keep_pct/100, drawn from a PRNG
 *       seeded with cut->seed (the same seed gives the same plan).
 *   (3) Torn: with cut->torn, one surviving unflushed write that spans a
 *       512-byte sector boundary is cut at one such boundary (absolute on
 *       the device, chosen by the PRNG): only the sectors before it land.
 *   (4) Surviving writes land in issue order, so of two overlapping writes
 *       that both survive, the later one wins.
 *   One plan covers all devices, so the images of one plan form a single,
 *   consistent crash state of the whole filesystem.
 *
 * Memory: the recorder keeps a copy of each device at attach time and of
 * every write's data; meant for test-sized images.  The hook is thread-safe
 * (a mutex orders events from several threads).  Reads are not recorded.
 * Discards are not seen (bch_dev_discard() does nothing while a hook is set).
 *
 * Errors are negative errno values; pointers come back through out-params.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "blockdev.h"

struct iorec;

enum iorec_type { IOREC_WRITE, IOREC_FLUSH };

/* One recorded event.  data/len are zero for flushes. */
struct iorec_event {
	enum iorec_type	type;
	unsigned	dev;		/* index given to iorec_attach() */
	uint64_t	offset;		/* bytes */
	size_t		len;
	const void	*data;		/* owned by the recorder */
};

/* Where and how power is lost; see the model above. */
struct iorec_cut {
	size_t		at;		/* events [0, at) were issued */
	uint64_t	seed;		/* picks survivors and the tear */
	unsigned	keep_pct;	/* 0..100: chance an unflushed write survives */
	bool		torn;		/* tear one surviving unflushed write */
};

/*
 * What a cut leaves: for each event in [0, at), how many bytes of it land
 * (a write's full len, 0, or a sector-aligned prefix when torn; 0 for
 * flushes).  Filled by iorec_plan(), freed by iorec_plan_free().
 */
struct iorec_plan {
	size_t		at;
	size_t		*bytes;		/* [at] */
	size_t		torn_event;	/* index of the torn write, or SIZE_MAX */
	size_t		nr_durable;	/* writes kept by rule (1) */
	size_t		nr_unflushed;	/* writes subject to rule (2) */
	size_t		nr_kept;	/* of those, how many survive (torn included) */
};

/* A recorder for devices 0 .. nr_devs-1.  NULL on allocation failure. */
struct iorec *iorec_new(unsigned nr_devs);

/* Detach every device still attached and free everything. */
void iorec_free(struct iorec *r);

/*
 * Record dev as device idx: read its whole contents as the base image and
 * install the recording hook (replacing any other).  dev stays the caller's;
 * call iorec_detach() or iorec_free() before closing it.  -EINVAL if idx is
 * out of range or already attached, -ENOMEM, or the read error.
 */
int iorec_attach(struct iorec *r, unsigned idx, struct bch_blockdev *dev);

/* Remove the hook from device idx; the recording is kept. */
void iorec_detach(struct iorec *r, unsigned idx);

/*
 * Follow device idx (attached already) through reopens by path: from now
 * on every read-write bch_dev_open() of the same file as path (same inode)
 * gets the recording hook of idx, as the library calls that close the
 * filesystem and open its members again need (device add, drop, resize).
 * The handle given to iorec_attach() is forgotten (iorec_detach() no
 * longer touches it: it may be closed by the code under test), and still
 * records until closed.  One recorder follows at a time (the open notice
 * is process-wide): -EBUSY if another does; -EINVAL if idx was never
 * attached; -errno from stat(2).
 */
int iorec_follow(struct iorec *r, unsigned idx, const char *path);

/*
 * Stop following (iorec_free() does it too).  Handles opened while
 * following keep recording: close them before iorec_free().
 */
void iorec_unfollow(struct iorec *r);

size_t iorec_nr_events(const struct iorec *r);
const struct iorec_event *iorec_event(const struct iorec *r, size_t i);

/*
 * Decide what survives a cut (rules 1-3).  -EINVAL if cut->at is past the
 * last event or keep_pct > 100, -ENOMEM.
 */
int iorec_plan(const struct iorec *r, const struct iorec_cut *cut,
	       struct iorec_plan *plan);
void iorec_plan_free(struct iorec_plan *plan);

/*
 * One line per event of the plan, for failure messages:
 * "#12 dev 0 off 8192 len 4096: durable|kept|lost|torn at 1024" for writes,
 * "#13 dev 0 flush" for flushes.
 * Returns a malloc'd string (caller frees), NULL on allocation failure.
 */
char *iorec_plan_describe(const struct iorec *r, const struct iorec_plan *plan);

/*
 * The image of device idx after the plan: base snapshot plus the bytes the
 * plan lets land, in issue order.  *img is malloc'd (caller frees); *len is
 * the device size at attach time, or more if recorded writes reached past it
 * (the device was grown), the same for every plan.  -EINVAL if idx was
 * never attached.
 */
int iorec_image(const struct iorec *r, const struct iorec_plan *plan,
		unsigned idx, void **img, size_t *len);

/* iorec_image() written to a new (or truncated) file at path. */
int iorec_write_image(const struct iorec *r, const struct iorec_plan *plan,
		      unsigned idx, const char *path);

#endif /* _BCH_TESTS_IORECORD_H */
