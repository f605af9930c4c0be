#!/bin/sh
# The corruption campaign (suite "damage" of tests/run-all.sh): damage one
# structure of an image built from a seeded source tree, run fsck -n, -y, -n,
# extract the tree and count the files intact, missing and wrong.  The work
# is done by campaign.py next to this script (see its header for the cases,
# the properties asserted and the environment: SOAK=1 for the large run,
# DAMAGE_REPORT_ONLY=1 to report violations without failing, DAMAGE_SEEDS,
# DAMAGE_TREE_SEED, DAMAGE_KEEP=1).  Arguments are passed on, e.g.
#   tests/damage/campaign.sh --case 'r1-32k-clean/btree:extents:L1/zero@3' --keep
# Last line: "damage: N passed, N failed, N skipped".
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
if ! command -v python3 >/dev/null; then	# make check installs it: not a skip
	echo "FAIL damage: no python3 (scripts/install-deps.sh test installs it)"
	echo "damage: 0 passed, 1 failed, 0 skipped"
	exit 1
fi
# BCH=PATH (or B=PATH) runs another binary (BCH=build/san/bcachefs: the
# sanitizer build); a sanitizer report from any command fails the run.
B=${BCH:-${B:-$root/bcachefs}}
case $B in /*) ;; *) B=$PWD/$B ;; esac
if [ ! -x "$B" ]; then
	echo "FAIL damage: build $B first"
	echo "damage: 0 passed, 1 failed, 0 skipped"
	exit 1
fi
export B
. "$root/tests/sanitizer.sh"
san=$(mktemp -d "${TMPDIR:-/tmp}/bch-san-damage.XXXXXX")
out=$san.out
(san_env "$san" && python3 "$here/campaign.py" "$@"; echo $? >"$san.rc") | tee "$out"
rc=$(cat "$san.rc")
san_wait "$san"
if ! san_reports "$san"; then
	last=$(grep '^damage: ' "$out" | tail -1)
	p=$(echo "$last" | sed -n 's/.* \([0-9]*\) passed.*/\1/p')
	f=$(echo "$last" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')
	s=$(echo "$last" | sed -n 's/.* \([0-9]*\) skipped.*/\1/p')
	echo "FAIL damage: sanitizer reports above"
	echo "damage: ${p:-0} passed, $((${f:-0} + 1)) failed, ${s:-0} skipped"
	rc=1
fi
rm -rf "$san" "$out" "$san.rc"
exit $rc
