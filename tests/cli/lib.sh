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

# encrypted: true when the tests run with ENCRYPTED=1 (tests/cli/run.sh): every
# `$B format` makes an encrypted filesystem, with the passphrase in $PF
encrypted() { [ "${ENCRYPTED:-0}" = 1 ]; }
# plain_only REASON: skip a test that cannot mean the same thing encrypted
plain_only() { ! encrypted || skip "not run encrypted: $*"; }
