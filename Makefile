# bcachefs toolchain: one binary, `bcachefs`.
#
#   make            build ./bcachefs (installs missing Debian packages first, as root)
#   make check      unit tests (ASan+UBSan), CLI, fsck and damage tests, then a
#                   sample of those again with build/san/bcachefs (tests/san-sample)
#   make san        every CLI test and fsck case with build/san/bcachefs, the
#                   binary under ASan + UBSan + LeakSanitizer (BCH= for the runners)
#   make demo       format an example image and show it
#   make install    PREFIX=/usr/local DESTDIR= (binary, links, man pages, bash completion)
#   make uninstall  the same PREFIX, DESTDIR, MOUNT_HELPER_DIR: removes what install put there
#   make deb        Debian package (debian/) into build/deb/ (installs its
#                   Build-Depends first, as root: apt-get build-dep)
#   make soak | fuzz | bench   long runs, not part of check (soak: all of
#                   the cli and fsck suites with build/san/bcachefs too)
#   make bench-tiering         only the tiering benchmarks (bench/README)
#   make bench-devices         only the device benchmarks (bench/README)
#   make bench-crypt           only the encryption benchmarks (bench/README)
#   make bench-metacopies      the cost of metadata copies on one device
#   make bench-snapshots       snapshot creation against tree size, snapshot delete against rm -r
#   make bench-snapshot-diff   subvolume diff against rsync -an (bench/snapshot_diff.sh)

PREFIX	?= /usr/local
DESTDIR	?=
datarootdir ?= $(PREFIX)/share
CC	?= cc

PKGS	= uuid libsodium
# Headers only: these are dlopen()ed on first use (libbcachefs/dl.h), so a
# command that never calls one does not map it at startup: libarchive
# (cmd/archive_dl.c, tar verbs; ~3.4 MB of dependencies), fuse3
# (cmd/fuse_dl.c, fusemount), zlib, liblz4, libzstd (libbcachefs/compress.c,
# a compressed extent), libxxhash (libbcachefs/checksum.c, xxhash64) and
# libblkid (cmd/cmd_format.c, probing a device before format), libkeyutils
# (cmd/keyring.c, the kernel keyring of encrypted filesystems), libisal
# (libbcachefs/ec.c, Reed-Solomon coding of erasure-coded stripes).
DL_PKGS	= libarchive fuse3 zlib liblz4 libzstd libxxhash blkid libkeyutils libisal

# Install build dependencies when pkg-config cannot find them (see scripts/install-deps.sh).
# (Not for goals that build nothing: clean, uninstall.)
ifneq ($(if $(MAKECMDGOALS),$(filter-out clean uninstall,$(MAKECMDGOALS)),all),)
ifeq ($(shell pkg-config --exists $(PKGS) $(DL_PKGS) criterion 2>/dev/null && test -e /usr/include/libscrypt.h && test -e /usr/include/libaio.h && echo ok),)
DEPS_RC := $(shell scripts/install-deps.sh build >&2; echo $$?)
ifneq ($(DEPS_RC),0)
$(error missing build dependencies; see the message above)
endif
endif
endif

VERSION	:= $(shell cat VERSION 2>/dev/null || echo 0.1)
WARN	= -Wall -Wextra -Wno-sign-compare -Wno-missing-field-initializers -Wshadow=local -Werror=implicit-function-declaration
CFLAGS	?= -O2 -g
CFLAGS	+= -std=gnu11 $(WARN) -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -DBCH_VERSION_STRING='"$(VERSION)"' \
	   -Ilibbcachefs -I. $(shell pkg-config --cflags $(PKGS) $(DL_PKGS))
# uuid, libsodium (SipHash, XChaCha20-Poly1305), libaio and libscrypt (the
# passphrase's key) are linked from their -dev packages' static archives:
# only the few functions used are copied in, instead of four shared libraries
# mapped at every start (about 280 KB less resident memory for every command;
# fsck -f -n of the benchmark tree 4.23 -> 3.95 MB).
STATIC_LIBS = -Wl,-Bstatic $(shell pkg-config --libs $(PKGS)) -laio -lscrypt -Wl,-Bdynamic
LDLIBS	= $(STATIC_LIBS) -lpthread -lm
# The functions fsck -f -n runs are laid out first and together
# (scripts/fsck-text-order.sh makes the list): the kernel maps a binary's
# text in 64 KiB blocks around each page used, and fsck's were spread over
# nearly all of it (1M files: 990 -> 640 KB of the binary resident, peak RSS
# 3.72 -> 3.26 MB).  Needs gold's --section-ordering-file; without gold the
# link is as before.
TEXT_ORDER = scripts/fsck-text-order.txt
ifneq ($(shell $(CC) -fuse-ld=gold -Wl,--version 2>/dev/null | grep -c 'GNU gold'),0)
ORDER_CFLAGS  = -ffunction-sections
ORDER_LDFLAGS = -fuse-ld=gold -Wl,--section-ordering-file=$(TEXT_ORDER)
endif

SAN	= -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

LIB_SRCS := $(sort $(wildcard libbcachefs/*.c))
CMD_SRCS := $(sort $(wildcard cmd/*.c)) bcachefs.c
UNIT_SRCS := $(sort $(wildcard tests/unit/*_test.c))
UNIT_SRCS += $(sort $(wildcard tests/lib/*.c))

OBJ	= build/obj
SOBJ	= build/san

LIB_OBJS  := $(LIB_SRCS:%.c=$(OBJ)/%.o)
CMD_OBJS  := $(CMD_SRCS:%.c=$(OBJ)/%.o)
SLIB_OBJS := $(LIB_SRCS:%.c=$(SOBJ)/%.o)
UNIT_OBJS := $(UNIT_SRCS:%.c=$(SOBJ)/%.o)
SCMD_OBJS := $(CMD_SRCS:%.c=$(SOBJ)/%.o)

all: bcachefs build/bcachefs.bash

bcachefs: $(LIB_OBJS) $(CMD_OBJS) $(TEXT_ORDER)
	$(CC) $(CFLAGS) $(LDFLAGS) $(ORDER_LDFLAGS) -o $@ $(filter %.o,$^) $(LDLIBS)

# Each object directory keeps the compile command its objects were built
# with (.flags, rewritten only when it changes): objects depend on it, so a
# change of flags (CFLAGS on the command line, gold found or not) rebuilds
# them instead of linking objects built the other way.
OBJ_FLAGS  := $(CC) $(CPPFLAGS) $(CFLAGS) $(ORDER_CFLAGS)
SOBJ_FLAGS := $(CC) $(CFLAGS) -O1 $(SAN)
ifneq ($(filter-out clean uninstall,$(or $(MAKECMDGOALS),all)),)
$(foreach d,OBJ SOBJ,$(if $(filter-out $(file <$($(d))/.flags),$($(d)_FLAGS))$(filter-out $($(d)_FLAGS),$(file <$($(d))/.flags)),\
	$(shell mkdir -p $($(d)))$(file >$($(d))/.flags,$($(d)_FLAGS))))
endif

$(OBJ)/%.o: %.c $(OBJ)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(ORDER_CFLAGS) -MMD -MP -c -o $@ $<

$(SOBJ)/%.o: %.c $(SOBJ)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -O1 $(SAN) -MMD -MP -c -o $@ $<

build/unit-tests: $(SLIB_OBJS) $(UNIT_OBJS)
	$(CC) $(CFLAGS) $(SAN) -o $@ $^ $(LDLIBS) $(shell pkg-config --libs criterion)

# The binary under ASan + UBSan (LeakSanitizer on), from the same objects and
# flags as the unit tests: the CLI, fsck and damage suites run with it as
# BCH=build/san/bcachefs (tests/sanitizer.sh sets the sanitizer options;
# make check runs the sample in tests/san-sample, make soak everything).
# The runtimes are linked statically: GCC's shared libubsan next to libasan
# ignores log_path and writes to stderr, which a fusemount daemon has closed.
# Linked aside and renamed: a suite running it meanwhile never finds it half written.
build/san/bcachefs: $(SLIB_OBJS) $(SCMD_OBJS)
	$(CC) $(CFLAGS) $(SAN) -static-libasan -static-libubsan -o $@.tmp $^ $(LDLIBS)
	mv -f $@.tmp $@

# The random-operation stress program (tests/stress/, used by tests/cli/t26-stress.sh).
build/fsstress: tests/stress/fsstress.c
	@mkdir -p build
	$(CC) $(CFLAGS) -o $@ $<

-include $(shell find build -name '*.d' 2>/dev/null)

test-deps:
	@scripts/install-deps.sh test

unit: build/unit-tests
	. tests/sanitizer.sh && san_env && ./build/unit-tests --jobs 2 $(UNIT_ARGS)

cli: bcachefs build/fsstress test-deps
	@tests/cli/run.sh $(CLI_ARGS)

# Everything: unit tests, then CLI tests; the last line is the summary.
check: test-deps bcachefs build/unit-tests build/san/bcachefs build/fsstress
	@tests/run-all.sh

demo: bcachefs
	@scripts/demo.sh

# Every CLI test and fsck case with the sanitizer binary (make soak runs them too).
san: build/san/bcachefs build/fsstress test-deps
	@BCH=build/san/bcachefs tests/cli/run.sh $(CLI_ARGS); c=$$?; \
	 BCH=build/san/bcachefs tests/fsck/run.sh; f=$$?; [ $$c = 0 ] && [ $$f = 0 ]

soak: bcachefs build/unit-tests build/san/bcachefs build/fsstress
	@SOAK=1 tests/run-all.sh

# libFuzzer targets (clang); FUZZ_TIME seconds each.  Crashes land in build/fuzz/.
FUZZ_TIME ?= 60
FUZZ_TARGETS := $(patsubst fuzz/%.c,build/fuzz/%,$(wildcard fuzz/*_fuzz.c))
build/fuzz/%: fuzz/%.c $(LIB_SRCS)
	@mkdir -p build/fuzz
	clang -g -O1 -fsanitize=fuzzer,address,undefined -std=gnu11 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 \
		-Ilibbcachefs -I. $(shell pkg-config --cflags $(PKGS) $(DL_PKGS)) -o $@ $< $(LIB_SRCS) $(LDLIBS)
fuzz:
	@scripts/install-deps.sh fuzz
	@$(MAKE) --no-print-directory $(FUZZ_TARGETS)
	@for t in $(FUZZ_TARGETS); do \
		mkdir -p build/fuzz/corpus-$$(basename $$t); \
		echo "== $$t ($(FUZZ_TIME)s)"; \
		$$t -max_total_time=$(FUZZ_TIME) -artifact_prefix=build/fuzz/ build/fuzz/corpus-$$(basename $$t) || exit 1; \
	done

build/btree-bench: bench/btree_bench.c $(LIB_OBJS)
	@scripts/install-deps.sh bench	# liblmdb-dev: the peer it is measured against
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS) -llmdb

# bench/free_bench.c: the engine's cost of fusemount's forgets, one commit each or batched
build/free-bench: bench/free_bench.c $(LIB_OBJS)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

build/lat4k: bench/lat4k.c
	@mkdir -p build
	$(CC) $(CFLAGS) -o $@ $<

# bench/fuse_floor.sh's instrument: a FUSE daemon that keeps all in memory
build/fuse-floor: bench/fuse_floor.c
	@mkdir -p build
	$(CC) $(CFLAGS) $(shell pkg-config --cflags fuse3) -o $@ $< $(shell pkg-config --libs fuse3)

bench: bcachefs
	@scripts/install-deps.sh bench
	@$(MAKE) --no-print-directory build/btree-bench build/lat4k build/fuse-floor
	@bench/run.sh

# The tiering benchmarks of issue 19 alone (root, FUSE): promote, rebalance
# vs cp, copygc write amplification, foreground latency under rebalance.
bench-tiering: bcachefs
	@scripts/install-deps.sh bench
	@$(MAKE) --no-print-directory build/lat4k
	@bench/tiering.sh; bench/rebalance.sh; bench/copygc.sh; bench/fuse-latency.sh

# The device benchmarks of issue 20 alone: evacuate vs cp -a, device add time.
bench-devices: bcachefs
	@scripts/install-deps.sh bench
	@bench/evacuate.sh; bench/device-add.sh

# The encryption benchmarks of issue 21: fusemount encrypted vs unencrypted vs
# gocryptfs, format --source encrypted vs not (bench/crypt.sh).
bench-crypt: bcachefs
	@scripts/install-deps.sh bench
	@bench/crypt.sh

# The cost of metadata copies on one device (issue 29): format, fsck and the
# FUSE rows with --metadata-replicas=1 and =2 (bench/metacopies.sh).
bench-metacopies: bcachefs
	@scripts/install-deps.sh bench
	@bench/metacopies.sh

# What snapshots cost (issue 30): creation against tree size, deleting a
# snapshot that alone holds 1 GiB against rm -r (bench/snapshots.sh).
bench-snapshots: bcachefs
	@scripts/install-deps.sh bench
	@bench/snapshots.sh
# subvolume diff against rsync -an of the two trees (issue 30): NFILES (default
# 1M), NCHANGE (100), EXTRACT=0 to make the host trees without image extract.
bench-snapshot-diff: bcachefs
	@scripts/install-deps.sh bench
	@bench/snapshot_diff.sh

# mount(8) looks for mount.fuse.bcachefs in /sbin only (not $(PREFIX)/sbin):
# install also links it there, unless MOUNT_HELPER_DIR is empty or is
# $(PREFIX)/sbin.  Without that link `mount -t fuse.bcachefs` still works
# through mount.fuse3, which runs `bcachefs DEV MNT -o OPTS` (bcachefs.c).
MOUNT_HELPER_DIR ?= /sbin
install: bcachefs build/bcachefs.bash
	install -d $(DESTDIR)$(PREFIX)/sbin $(DESTDIR)$(datarootdir)/man/man8 $(DESTDIR)$(datarootdir)/man/man5 \
		$(DESTDIR)$(datarootdir)/bash-completion/completions
	install -m 0755 bcachefs $(DESTDIR)$(PREFIX)/sbin/bcachefs
	ln -sf bcachefs $(DESTDIR)$(PREFIX)/sbin/mkfs.bcachefs
	ln -sf bcachefs $(DESTDIR)$(PREFIX)/sbin/fsck.bcachefs
	ln -sf bcachefs $(DESTDIR)$(PREFIX)/sbin/mount.fuse.bcachefs
	if [ -n "$(MOUNT_HELPER_DIR)" ] && [ "$(MOUNT_HELPER_DIR)" != "$(PREFIX)/sbin" ]; then \
		install -d $(DESTDIR)$(MOUNT_HELPER_DIR) && \
		ln -sf $(PREFIX)/sbin/bcachefs $(DESTDIR)$(MOUNT_HELPER_DIR)/mount.fuse.bcachefs; fi
	install -m 0644 man/bcachefs.8 $(DESTDIR)$(datarootdir)/man/man8/bcachefs.8
	install -m 0644 man/bcachefs-format.5 $(DESTDIR)$(datarootdir)/man/man5/bcachefs-format.5
	install -m 0644 build/bcachefs.bash $(DESTDIR)$(datarootdir)/bash-completion/completions/bcachefs
	ln -sf bcachefs $(DESTDIR)$(datarootdir)/bash-completion/completions/mkfs.bcachefs
	ln -sf bcachefs $(DESTDIR)$(datarootdir)/bash-completion/completions/fsck.bcachefs

# Removes what install put in place, and nothing else: the files and links it
# installs (the /sbin mount helper only while it is the link install made);
# directories stay, another package may use them.
uninstall:
	rm -f $(DESTDIR)$(PREFIX)/sbin/bcachefs $(DESTDIR)$(PREFIX)/sbin/mkfs.bcachefs \
		$(DESTDIR)$(PREFIX)/sbin/fsck.bcachefs $(DESTDIR)$(PREFIX)/sbin/mount.fuse.bcachefs
	if [ -n "$(MOUNT_HELPER_DIR)" ] && [ "$(MOUNT_HELPER_DIR)" != "$(PREFIX)/sbin" ] && \
	   [ "$$(readlink $(DESTDIR)$(MOUNT_HELPER_DIR)/mount.fuse.bcachefs)" = "$(PREFIX)/sbin/bcachefs" ]; then \
		rm -f $(DESTDIR)$(MOUNT_HELPER_DIR)/mount.fuse.bcachefs; fi
	rm -f $(DESTDIR)$(datarootdir)/man/man8/bcachefs.8 $(DESTDIR)$(datarootdir)/man/man5/bcachefs-format.5
	rm -f $(DESTDIR)$(datarootdir)/bash-completion/completions/bcachefs \
		$(DESTDIR)$(datarootdir)/bash-completion/completions/mkfs.bcachefs \
		$(DESTDIR)$(datarootdir)/bash-completion/completions/fsck.bcachefs

clean:
	rm -rf build bcachefs

.PHONY: all check unit cli san demo soak bench bench-tiering bench-devices bench-crypt bench-metacopies bench-snapshots bench-snapshot-diff fuzz install uninstall clean test-deps

# The man page's option list is generated from the option table.
man: man/bcachefs.8
man/bcachefs.8: man/bcachefs.8.in bcachefs
	./bcachefs help-opts --man > build/opts.roff
	sed -e '/^\.\\" BEGIN OPTIONS TABLE/r build/opts.roff' man/bcachefs.8.in > $@
.PHONY: man

# bash completion, generated from the binary's command and option tables.
build/bcachefs.bash: bcachefs scripts/gen-completion.py
	@mkdir -p build
	python3 scripts/gen-completion.py ./bcachefs > $@.tmp && mv $@.tmp $@
completion: build/bcachefs.bash
.PHONY: completion

# The Debian package, built from a copy of the source tree (the files git
# knows, or all but build/) in $(DEB_DIR)/src: the .deb, .buildinfo and
# .changes land in $(DEB_DIR) (default build/deb/), and this tree's own build
# is left alone.  DEB_REUSE=1 copies this tree's build (binary, objects,
# completion) along and skips the clean, so only the packaging runs (the
# cheap path tests/cli/t40-deb.sh takes under make check; make soak and
# releases build from scratch).  First the Build-Depends of debian/control
# (scripts/install-deps.sh deb: as root apt-get build-dep installs them,
# otherwise it prints that apt-get line and stops).
DEB_DIR ?= build/deb
DEB_REUSE ?=
deb: $(if $(DEB_REUSE),bcachefs build/bcachefs.bash)
	@scripts/install-deps.sh deb
	rm -rf $(DEB_DIR)/src $(DEB_DIR)/bcachefs-tools-own*_* && mkdir -p $(DEB_DIR)/src
	if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then \
		git ls-files -z -co --exclude-standard | xargs -0 sh -c 'for f; do [ -e "$$f" ] && printf "%s\0" "$$f"; done' _ | \
			tar --null -T - -cf - | tar -xf - -C $(DEB_DIR)/src; \
	else \
		tar --exclude=./build -cf - . | tar -xf - -C $(DEB_DIR)/src; \
	fi
	$(if $(DEB_REUSE),tar -cf - bcachefs build/obj build/bcachefs.bash | tar -xf - -C $(DEB_DIR)/src)
	cd $(DEB_DIR)/src && dpkg-buildpackage -us -uc -b -Jauto $(if $(DEB_REUSE),-nc) $(DEB_ARGS)
	@ls $(DEB_DIR)/*.deb
.PHONY: deb
