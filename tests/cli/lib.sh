# Helpers for CLI tests; sourced by tests/cli/run.sh into each test's shell.
# Each test runs in its own empty directory ($PWD) with $B the binary.

fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }
skip() { echo "SKIP: $*" >&2; exit 77; }

# run CMD...: run with stdout in ./out, stderr in ./err, status in $rc
run() { "$@" >out 2>err; rc=$?; }

# expect_rc N CMD...: CMD must exit N
expect_rc() {
	want=$1; shift
	run "$@"
	[ "$rc" = "$want" ] || fail "'$*' exited $rc, want $want
--- stdout:
$(head -c 2000 out)
--- stderr:
$(head -c 2000 err)"
}

# expect_in FILE PATTERN: grep -E PATTERN in FILE
expect_in() {
	grep -Eq -- "$2" "$1" || fail "expected /$2/ in $1:
$(head -c 3000 "$1")"
}
expect_not_in() {
	! grep -Eq -- "$2" "$1" || fail "did not expect /$2/ in $1:
$(head -c 3000 "$1")"
}

# the value of "Key:   value" from show-super output in ./out
field() { sed -n "s/^ *$1: *//p" out | head -1; }

# sha FILE: content hash, to prove a file was not written
sha() { sha256sum "$1" | cut -d' ' -f1; }

# flip_byte FILE OFFSET: invert every bit of the byte at OFFSET (a fixed byte
# written over ciphertext would already be there once in 256 runs)
flip_byte() {
	_v=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
	printf "\\$(printf '%03o' $((_v ^ 255)))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}

# encrypted: true when the tests run with ENCRYPTED=1 (tests/cli/run.sh): every
# `$B format` makes an encrypted filesystem, with the passphrase in $PF
encrypted() { [ "${ENCRYPTED:-0}" = 1 ]; }
# plain_only REASON: skip a test that cannot mean the same thing encrypted
plain_only() { ! encrypted || skip "not run encrypted: $*"; }

# What may skip and what must fail.  `make check` installs every tool the
# tests drive (scripts/install-deps.sh test): one missing means the machine
# was not set up, and a test that went on without it would pass having
# checked nothing, so it fails.  A test skips (exit 77, or skip_part for one
# part of it) only for what a machine can truly lack: /dev/fuse (a container
# without the device), root, loop devices, mount namespaces.
# need CMD...: fail unless every CMD is on PATH
need() {
	for c; do
		command -v "$c" >/dev/null ||
			fail "no $c: make check installs it (scripts/install-deps.sh test)"
	done
}
# need_fuse: skip the test without /dev/fuse; fail without fusermount3 (fuse3)
need_fuse() { [ -c /dev/fuse ] || skip "no /dev/fuse on this machine"; need fusermount3; }
# need_root: skip the test unless run as root
need_root() { [ "$(id -u)" = 0 ] || skip "needs root: $*"; }
# skip_part WHAT: one part of a test cannot run here; the rest goes on.
# tests/cli/run.sh counts each as skipped and prints WHAT beside the test's
# result (a passing test's log is deleted, so an echo would be lost).
skip_part() {
	echo "part skipped: $*" >&2
	[ -z "${BCH_SKIPS:-}" ] || echo "$*" >> "$BCH_SKIPS"
}
# fuse_part WHAT: true when the FUSE part WHAT can run; without /dev/fuse it
# is recorded as skipped (false); without fusermount3 the test fails
fuse_part() {
	[ -c /dev/fuse ] || { skip_part "$*: no /dev/fuse on this machine"; return 1; }
	need fusermount3
}
# root_part WHAT: true when run as root; else WHAT is recorded as skipped
root_part() { [ "$(id -u)" = 0 ] || { skip_part "$*: needs root"; return 1; }; }

# traced_mount SYSCALLS IMAGE MNT [BIN]: the daemon in the foreground under
# strace (its SYSCALLS to ./trace), in the background as $spid, once MNT is
# mounted; fails with strace's messages when it is not.  The caller unmounts
# MNT, then waits for $spid.
traced_mount() {
	strace -f -qq -e trace="$1" -o trace ${4:-$B} fusemount -f "$2" "$3" 2>strace.err &
	spid=$!
	for i in $(seq 100); do mountpoint -q "$3" && return 0; sleep 0.1; done
	fail "$3 not mounted under strace: $(cat strace.err)"
}
