#!/bin/sh
# Run every test suite; the last line is the summary of counts.
#   unit   Criterion tests of the library (ASan + UBSan build)
#   cli    tests/cli/*.sh: the real binary on image files (and loop devices)
#   fsck   tests/fsck/<case>/: golden fsck cases (damage, -y, then -n)
#   cli-encrypted, fsck-encrypted  the round-trip test and the golden cases
#          once more on encrypted filesystems (ENCRYPTED=1)
#   damage tests/damage/campaign.sh: the corruption campaign (files kept after
#          damage to one structure, fsck -y and extract; ~30 cases)
#   san-*  cli, fsck and damage again with the sanitizer binary
#          (build/san/bcachefs, BCH=): the fixed sample in tests/san-sample
# The cli suite runs beside the others, which run one after another (two
# cores: the size make check is made for).
# SOAK=1 makes the randomized tests run longer (make soak; the campaign runs
# every structure x damage kind x 3 seeds) and runs every CLI test and fsck
# case with the sanitizer binary (the campaign's make check subset).
set -u
cd "$(dirname "$0")/.."
passed=0 failed=0 skipped=0

. tests/sanitizer.sh
now() { date +%s; }

# Image files go to a tmpfs when there is one (BCH_TEST_TMPDIR for the unit
# tests, TMPDIR for the others; set BCH_TEST_TMPDIR=/tmp to use the disk):
# the tests' fdatasync() calls then cost nothing.  On the 2-core VM the unit
# phase spent most of its time waiting on them (4 suites: 169 s -> 34 s).
if [ -z "${BCH_TEST_TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ] &&
   [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ]; then
	BCH_TEST_TMPDIR=/dev/shm
fi
BCH_TEST_TMPDIR=${BCH_TEST_TMPDIR:-${TMPDIR:-/tmp}}
TMPDIR=$BCH_TEST_TMPDIR
export BCH_TEST_TMPDIR TMPDIR
echo "temporary files in $TMPDIR"
t_start=$(now)

echo "== unit tests (ASan+UBSan)"
# Criterion's Synthesis line (2.4) leaves skipped tests out of every count,
# so a skipped test would vanish: the TAP report beside it names each one
# ("ok - SUITE::NAME  # SKIP REASON"), counted and printed here.
rm -f build/unit.tap
(san_env && ./build/unit-tests --jobs 2 --short-filename --tap=build/unit.tap) 2>&1 | tee build/unit.log |
	grep -Ev '^\[----\]|^\[PASS\]' || true
echo "unit: $(($(now) - t_start)) s"
syn=$(grep -a 'Synthesis:' build/unit.log | tail -1)
if [ -z "$syn" ]; then
	echo "unit tests did not report (crashed?)"
	failed=$((failed + 1))
else
	t=$(echo "$syn" | sed -n 's/.*Tested: *\([0-9]*\).*/\1/p')
	p=$(echo "$syn" | sed -n 's/.*Passing: *\([0-9]*\).*/\1/p')
	s=0
	if [ -f build/unit.tap ]; then
		grep -a '^ok - .*# SKIP' build/unit.tap |
			sed 's/^ok - \([^ ]*\) *# SKIP */SKIP unit \1: /' > build/unit.skipped
		cat build/unit.skipped
		s=$(wc -l < build/unit.skipped)
	else
		echo "unit tests wrote no TAP report: their skips cannot be counted"
		failed=$((failed + 1))
	fi
	echo "unit: $p passed, $((t - p)) failed, $s skipped"
	passed=$((passed + p))
	failed=$((failed + t - p))
	skipped=$((skipped + s))
fi

# run LOG CMD...: run a shell suite (last line "NAME: N passed, N failed, N
# skipped") with its output in build/LOG.log, then its seconds
run() {
	log=build/$1.log; shift
	t0=$(now)
	"$@" > "$log" 2>&1
	echo "$(($(now) - t0))" > "$log.secs"
}
# report LOG: print a suite's output and add up its counts
report() {
	log=build/$1.log
	echo "== $1 tests"
	cat "$log"
	echo "$1: $(cat "$log.secs" 2>/dev/null) s"
	line=$(grep -E '^[a-z-]+: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped' "$log" | tail -1)
	if [ -z "$line" ]; then
		echo "$1 tests did not report"
		failed=$((failed + 1))
		return
	fi
	passed=$((passed + $(echo "$line" | sed -n 's/.* \([0-9]*\) passed.*/\1/p')))
	failed=$((failed + $(echo "$line" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')))
	skipped=$((skipped + $(echo "$line" | sed -n 's/.* \([0-9]*\) skipped.*/\1/p')))
}

# The same suites with the commands under ASan + UBSan + LeakSanitizer
# (tests/sanitizer.sh): the sample in tests/san-sample, or all with SOAK=1.
sample() { sed -n "s/^$1[[:space:]]\{1,\}\([^[:space:]]*\).*/\1/p" tests/san-sample; }
san_cli() {
	if [ "${SOAK:-0}" = 1 ]; then set --; else set -- $(sample cli | sed 's/$/.sh/'); fi
	run san-cli env BCH=build/san/bcachefs tests/cli/run.sh "$@"
}
san_fsck() {
	if [ "${SOAK:-0}" = 1 ]; then set --; else set -- $(sample fsck); fi
	run san-fsck env BCH=build/san/bcachefs FSCK_JOBS=1 tests/fsck/run.sh "$@"
}
san_damage() {	# with SOAK=1 the campaign's make check subset
	set -- $(sample damage | sed 's/^/--case /')
	[ "${SOAK:-0}" = 1 ] && set --
	run san-damage env BCH=build/san/bcachefs SOAK= tests/damage/campaign.sh "$@"
}

# Encrypted (issue 21): the same round-trip test and golden cases on encrypted
# filesystems (ENCRYPTED=1); under make check the round trip with 1000 files
# and the cases of tests/fsck/encrypted-quick (one or more of each kind of
# damage), all of them under make soak.
cli_encrypted() {
	if [ "${SOAK:-0}" = 1 ]; then
		run cli-encrypted env ENCRYPTED=1 tests/cli/run.sh t16-files-roundtrip.sh
	else
		run cli-encrypted env ENCRYPTED=1 FILES_N=1000 tests/cli/run.sh t16-files-roundtrip.sh
	fi
}
fsck_encrypted() {
	if [ "${SOAK:-0}" = 1 ]; then set --; else set -- $(grep -v '^#' tests/fsck/encrypted-quick); fi
	run fsck-encrypted env ENCRYPTED=1 FSCK_JOBS=1 tests/fsck/run.sh "$@"
}

# Two lanes at once, one core each: the CLI tests run one after another and
# mostly wait (FUSE, sleeps), so the other suites (fsck cases one at a time,
# the campaign, the sanitizer samples) share the time instead of following
# them (make check on 2 cores: cli 299 s beside the rest's 212 s).  Each
# test keeps its own directory; the output is printed in a fixed order.
# The second lane's suites end first (about 270 s against the CLI tests'
# 530), so it then takes these CLI tests, which hold nothing global (no
# mount, loop device or process lookup: they may run beside any other
# test): about 130 s moved, both lanes near 400 s.
cli_b="t54-spec-owners t16-files-roundtrip t56-image-update t05-bad-arguments t35-device-lost
	t48-nochecksum-damage"
cli_a=$(cd tests/cli && for t in t*.sh; do
	case " $(echo $cli_b) " in *" ${t%.sh} "*) ;; *) echo "$t" ;; esac
done)
echo "== cli, fsck, damage tests, then a sample with the sanitizer binary (two lanes)"
{ run cli tests/cli/run.sh $cli_a; cli_encrypted; } &
lane_a=$!
run fsck env FSCK_JOBS=1 tests/fsck/run.sh
run damage tests/damage/campaign.sh
run compat tests/compat/run.sh
fsck_encrypted
san_fsck
san_damage
san_cli
run cli-b tests/cli/run.sh $(for t in $cli_b; do echo "$t.sh"; done)
wait $lane_a
for s in cli cli-b cli-encrypted fsck fsck-encrypted damage san-cli san-fsck san-damage; do
	report $s
done
report compat

echo "total: $(($(now) - t_start)) s"

echo "TOTAL: $passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
