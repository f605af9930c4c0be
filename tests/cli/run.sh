#!/bin/sh
# Run every tests/cli/*.sh test (or those named on the command line) with the
# built binary, each in its own temp directory.  A test passes on exit 0,
# is skipped on exit 77.  Last line: "cli: N passed, N failed, N skipped".
# ENCRYPTED=1 runs them on encrypted filesystems: $B is tests/encrypted.sh,
# which adds --encrypted and a passphrase file to every format; the
# passphrase file is exported as BCACHEFS_PASSPHRASE_FILE (and $PF), and the
# last line starts "cli-encrypted:".
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
export B="$root/bcachefs" ROOT="$root"
label=cli
if [ "${ENCRYPTED:-0}" = 1 ]; then
	label=cli-encrypted
	PF=$(mktemp "${TMPDIR:-/tmp}/bch-cli-pass.XXXXXX")
	printf 'cli tests, encrypted\n' > "$PF"
	trap 'rm -f "$PF"' EXIT
	export ENCRYPTED BCH_BIN="$B" B="$root/tests/encrypted.sh" PF BCACHEFS_PASSPHRASE_FILE="$PF"
fi
pass=0 fail=0 skip=0
tests=${*:-$(ls "$here"/t*.sh)}
tests=$(for t in $tests; do case $t in /*) echo "$t" ;; */*) echo "$PWD/$t" ;; *) echo "$here/$t" ;; esac; done)
for t in $tests; do
	name=$(basename "$t" .sh)
	dir=$(mktemp -d "${TMPDIR:-/tmp}/bch-cli-$name.XXXXXX")
	t0=$(date +%s)
	(cd "$dir" && . "$here/lib.sh" && . "$t") >"$dir/log" 2>&1
	rc=$?
	secs=$(($(date +%s) - t0))
	case $rc in
	0)  pass=$((pass + 1)); echo "PASS $name (${secs} s)${BCH_BIN:+ encrypted}"; rm -rf "$dir" ;;
	77) skip=$((skip + 1)); echo "SKIP $name: $(grep '^SKIP' "$dir/log" | head -1)"; rm -rf "$dir" ;;
	*)  fail=$((fail + 1)); echo "FAIL $name (exit $rc; kept $dir)"; sed 's/^/    /' "$dir/log" | tail -40 ;;
	esac
done
echo "$label: $pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
