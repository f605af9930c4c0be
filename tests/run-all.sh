#!/bin/sh
# Run every test suite; the last line is the summary of counts.
#   unit   Criterion tests of the library (ASan + UBSan build)
#   cli    tests/cli/*.sh: the real binary on image files (and loop devices)
#   fsck   tests/fsck/<case>/: golden fsck cases (damage, -y, then -n)
#   damage tests/damage/campaign.sh: the corruption campaign (files kept after
#          damage to one structure, fsck -y and extract; ~30 cases)
#   san-*  cli, fsck and damage again with the sanitizer binary
#          (build/san/bcachefs, BCH=): the fixed sample in tests/san-sample
# SOAK=1 makes the randomized tests run longer (make soak; the campaign runs
# every structure x damage kind x 3 seeds) and runs every CLI test and fsck
# case with the sanitizer binary (the campaign's make check subset).
set -u
cd "$(dirname "$0")/.."
passed=0 failed=0 skipped=0

. tests/sanitizer.sh
now() { date +%s; }
t_start=$(now)

echo "== unit tests (ASan+UBSan)"
(san_env && ./build/unit-tests --jobs 2 --short-filename) 2>&1 | tee build/unit.log |
	grep -Ev '^\[----\]|^\[PASS\]' || true
echo "unit: $(($(now) - t_start)) s"
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

# suite LOG CMD...: run a shell suite whose last line is "NAME: N passed, N
# failed, N skipped", its output also in build/LOG.log
suite() {
	log=build/$1.log; shift
	echo "== $(basename "$log" .log) tests"
	t0=$(now)
	"$@" > "$log" 2>&1
	cat "$log"
	echo "$(basename "$log" .log): $(($(now) - t0)) s"
	line=$(grep -E '^[a-z]+: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped' "$log" | tail -1)
	if [ -z "$line" ]; then
		echo "$(basename "$log" .log) tests did not report"
		failed=$((failed + 1))
		return
	fi
	passed=$((passed + $(echo "$line" | sed -n 's/.* \([0-9]*\) passed.*/\1/p')))
	failed=$((failed + $(echo "$line" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')))
	skipped=$((skipped + $(echo "$line" | sed -n 's/.* \([0-9]*\) skipped.*/\1/p')))
}
suite cli tests/cli/run.sh
suite fsck tests/fsck/run.sh
suite damage tests/damage/campaign.sh

# The commands under ASan + UBSan + LeakSanitizer (tests/sanitizer.sh).
sample() { sed -n "s/^$1[[:space:]]\{1,\}\([^[:space:]]*\).*/\1/p" tests/san-sample; }
if [ "${SOAK:-0}" = 1 ]; then
	suite san-cli env BCH=build/san/bcachefs tests/cli/run.sh
	suite san-fsck env BCH=build/san/bcachefs tests/fsck/run.sh
	suite san-damage env BCH=build/san/bcachefs SOAK= tests/damage/campaign.sh
else
	suite san-cli env BCH=build/san/bcachefs tests/cli/run.sh $(sample cli | sed 's/$/.sh/')
	suite san-fsck env BCH=build/san/bcachefs tests/fsck/run.sh $(sample fsck)
	suite san-damage env BCH=build/san/bcachefs tests/damage/campaign.sh \
		$(sample damage | sed 's/^/--case /')
fi

echo "total: $(($(now) - t_start)) s"

echo "TOTAL: $passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
