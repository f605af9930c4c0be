#!/bin/sh
# Run every test suite; the last line is the summary of counts.
#   unit   Criterion tests of the library (ASan + UBSan build)
#   cli    tests/cli/*.sh: the real binary on image files (and loop devices)
#   fsck   tests/fsck/<case>/: golden fsck cases (damage, -y, then -n)
#   cli-encrypted, fsck-encrypted  the round-trip test and the golden cases
#          once more on encrypted filesystems (ENCRYPTED=1)
#   damage tests/damage/campaign.sh: the corruption campaign (files kept after
#          damage to one structure, fsck -y and extract; ~30 cases)
# SOAK=1 makes the randomized tests run longer (make soak; the campaign runs
# every structure x damage kind x 3 seeds).
set -u
cd "$(dirname "$0")/.."
passed=0 failed=0 skipped=0

echo "== unit tests (ASan+UBSan)"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	./build/unit-tests --jobs 2 --short-filename 2>&1 | tee build/unit.log | grep -Ev '^\[----\]|^\[PASS\]' || true
syn=$(grep -a 'Synthesis:' build/unit.log | tail -1)
if [ -z "$syn" ]; then
	echo "unit tests did not report (crashed?)"
	failed=$((failed + 1))
else
	t=$(echo "$syn" | sed -n 's/.*Tested: *\([0-9]*\).*/\1/p')
	p=$(echo "$syn" | sed -n 's/.*Passing: *\([0-9]*\).*/\1/p')
	passed=$((passed + p))
	failed=$((failed + t - p))
fi

# suite NAME CMD...: run a shell suite whose last line is "NAME: N passed, N failed, N skipped"
suite() {
	echo "== $1 tests"
	_name=$1; shift
	"$@" > "build/$_name.log" 2>&1
	set -- "$_name"
	cat "build/$1.log"
	line=$(grep "^$1:" "build/$1.log" | tail -1)
	if [ -z "$line" ]; then
		echo "$1 tests did not report"
		failed=$((failed + 1))
		return
	fi
	passed=$((passed + $(echo "$line" | sed -n 's/.* \([0-9]*\) passed.*/\1/p')))
	failed=$((failed + $(echo "$line" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')))
	skipped=$((skipped + $(echo "$line" | sed -n 's/.* \([0-9]*\) skipped.*/\1/p')))
}
suite cli tests/cli/run.sh
suite fsck tests/fsck/run.sh
# encrypted (issue 21): the same round-trip test and golden cases on encrypted
# filesystems; under make check the round trip with 1000 files and the cases of
# tests/fsck/encrypted-quick (one or more of each kind of damage), all of them
# under make soak
if [ -n "${SOAK:-}" ]; then
	suite cli-encrypted env ENCRYPTED=1 tests/cli/run.sh t16-files-roundtrip.sh
	suite fsck-encrypted env ENCRYPTED=1 tests/fsck/run.sh
else
	suite cli-encrypted env ENCRYPTED=1 FILES_N=1000 tests/cli/run.sh t16-files-roundtrip.sh
	suite fsck-encrypted env ENCRYPTED=1 tests/fsck/run.sh $(grep -v '^#' tests/fsck/encrypted-quick)
fi
suite damage tests/damage/campaign.sh

echo "TOTAL: $passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
