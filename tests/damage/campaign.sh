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
if ! command -v python3 >/dev/null; then
	echo "SKIP damage: python3 not found"
	echo "damage: 0 passed, 0 failed, 1 skipped"
	exit 0
fi
if [ ! -x "$here/../../bcachefs" ] && [ -z "${B:-}" ]; then
	echo "FAIL damage: build ./bcachefs first"
	echo "damage: 0 passed, 1 failed, 0 skipped"
	exit 1
fi
exec python3 "$here/campaign.py" "$@"
