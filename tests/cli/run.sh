#!/bin/sh
# Run every tests/cli/*.sh test (or those named on the command line) with the
# built binary, each in its own temp directory.  A test passes on exit 0,
# is skipped on exit 77.  Last line: "cli: N passed, N failed, N skipped".
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
export B="$root/bcachefs" ROOT="$root"
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
	0)  pass=$((pass + 1)); echo "PASS $name (${secs} s)"; rm -rf "$dir" ;;
	77) skip=$((skip + 1)); echo "SKIP $name: $(grep '^SKIP' "$dir/log" | head -1)"; rm -rf "$dir" ;;
	*)  fail=$((fail + 1)); echo "FAIL $name (exit $rc; kept $dir)"; sed 's/^/    /' "$dir/log" | tail -40 ;;
	esac
done
echo "cli: $pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
