#!/bin/sh
# Run every tests/cli/*.sh test (or those named on the command line) with the
# built binary, each in its own temp directory.  A test passes on exit 0,
# is skipped on exit 77.  Last line: "cli: N passed, N failed, N skipped".
# A part of a test that cannot run here (skip_part in lib.sh: no /dev/fuse,
# not root, ...) is counted as one skipped too, printed with its reason as
# "SKIP NAME (part): WHY" under the test's own line.
# ENCRYPTED=1 runs them on encrypted filesystems: $B is tests/encrypted.sh,
# which adds --encrypted and a passphrase file to every format; the
# passphrase file is exported as BCACHEFS_PASSPHRASE_FILE (and $PF), and the
# last line starts "cli-encrypted:".
# BCH=PATH runs another binary as $B (BCH=build/san/bcachefs: the sanitizer
# build); the sanitizer options (tests/sanitizer.sh) write any report to a
# directory of the test's own, and a report fails the test whatever its exit.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
B=${BCH:-$root/bcachefs}
case $B in /*) ;; *) B=$PWD/$B ;; esac
[ -x "$B" ] || { echo "cli: no binary $B"; echo "cli: 0 passed, 1 failed, 0 skipped"; exit 1; }
export B ROOT="$root"
. "$root/tests/sanitizer.sh"
label=cli
if [ "${ENCRYPTED:-0}" = 1 ]; then
	label=cli-encrypted
	PF=$(mktemp "${TMPDIR:-/tmp}/bch-cli-pass.XXXXXX")
	printf 'cli tests, encrypted\n' > "$PF"
	chmod 644 "$PF"	# tests that run commands as another user (t31) read it too
	trap 'rm -f "$PF"' EXIT
	export ENCRYPTED BCH_BIN="$B" B="$root/tests/encrypted.sh" PF BCACHEFS_PASSPHRASE_FILE="$PF"
fi
pass=0 fail=0 skip=0
tests=${*:-$(ls "$here"/t*.sh)}
tests=$(for t in $tests; do case $t in /*) echo "$t" ;; */*) echo "$PWD/$t" ;; *) echo "$here/$t" ;; esac; done)
for t in $tests; do
	name=$(basename "$t" .sh)
	dir=$(mktemp -d "${TMPDIR:-/tmp}/bch-cli-$name.XXXXXX")
	san=$(mktemp -d "${TMPDIR:-/tmp}/bch-san-$name.XXXXXX")
	BCH_SKIPS=$dir.skips
	: > "$BCH_SKIPS"
	t0=$(date +%s)
	(export BCH_SKIPS && san_env "$san" && cd "$dir" && . "$here/lib.sh" && . "$t") >"$dir/log" 2>&1
	rc=$?
	secs=$(($(date +%s) - t0))
	san_wait "$san"
	san_reports "$san" >"$dir/san.log" || rc=$SAN_EXITCODE
	rm -rf "$san"
	case $rc in
	0)  pass=$((pass + 1)); echo "PASS $name (${secs} s)${BCH_BIN:+ encrypted}"; rm -rf "$dir" ;;
	77) skip=$((skip + 1)); echo "SKIP $name: $(grep '^SKIP' "$dir/log" | head -1)"; rm -rf "$dir" ;;
	*)  fail=$((fail + 1)); echo "FAIL $name (exit $rc; kept $dir)"; sed 's/^/    /' "$dir/log" | tail -40
	    [ -s "$dir/san.log" ] && sed 's/^/    /' "$dir/san.log" | head -80 ;;
	esac
	# parts skipped (whatever the test's result), each counted and named
	while IFS= read -r why; do
		skip=$((skip + 1))
		echo "SKIP $name (part): $why"
	done < "$BCH_SKIPS"
	rm -f "$BCH_SKIPS"
done
echo "$label: $pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
