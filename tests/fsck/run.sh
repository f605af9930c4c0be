#!/bin/sh
# fsck golden cases, in the e2fsprogs style.  Each tests/fsck/<case>/ holds
#   script   builds and damages an image in the current directory (with $B
#            the binary) and writes the device list to ./devs
#   expect.1 output and exit status of `bcachefs fsck -y DEVS`
#   expect.2 output and exit status of a second run, `bcachefs fsck -n DEVS`
#   expect.0 (optional) output of the first run, `bcachefs fsck -n DEVS` on the
#            damaged image (where -n finds the damage its own way, e.g. the
#            bucket recount it does in pass 3 instead of at open)
#   check    (optional) run after both: what the damage did not touch is intact
#   args     (optional) extra fsck options for both runs (e.g. -c)
# Both runs use -f: a cleanly closed filesystem is checked all the same.
# Before -y, a `fsck -n` run must change no byte of any device and must exit
# with bit 4 set whenever -y repairs something.
# UPDATE=1 rewrites the expect files from the current output (review the diff!).
# ENCRYPTED=1 runs the same cases on encrypted filesystems (tests/encrypted.sh:
# every format gets --encrypted and a passphrase file) against the same expect
# files, after normalising the words the cipher changes (encrypted_norm below);
# the cases of tests/fsck/encrypted-skip, which cannot mean the same thing
# encrypted, are skipped, each for the reason given there.
# BCH=PATH runs another binary as $B (BCH=build/san/bcachefs: the sanitizer
# build); sanitizer reports (tests/sanitizer.sh) go to a directory of the
# case's own, not into the compared output, and any report fails the case.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
B=${BCH:-$root/bcachefs}
case $B in /*) ;; *) B=$PWD/$B ;; esac
export B BCH="$B"
. "$root/tests/sanitizer.sh"
pass=0 fail=0 skipped=0
cases=${*:-$(cd "$here" && ls -d */ | tr -d /)}
enc=${ENCRYPTED:-0}
label=fsck; [ "$enc" = 1 ] && label=fsck-encrypted
if [ "$enc" = 1 ] && [ -z "${BCH_BIN:-}" ]; then
	[ "${UPDATE:-0}" = 1 ] && { echo "$label: UPDATE=1 with ENCRYPTED=1 would write normalised output; refused"; exit 2; }
	BCACHEFS_PASSPHRASE_FILE=$(mktemp "${TMPDIR:-/tmp}/bch-fsck-pass.XXXXXX")
	printf 'fsck golden cases, encrypted\n' > "$BCACHEFS_PASSPHRASE_FILE"
	trap 'rm -f "$BCACHEFS_PASSPHRASE_FILE"' EXIT
	export BCH_BIN="$B" BCACHEFS_PASSPHRASE_FILE
	# each format is unlocked into a session keyring of our own (dropped
	# when the run ends): a passphrase costs an scrypt run per command.
	# keyctl's "Joined session keyring: N" goes to /dev/null, the run's own
	# stderr (fd 3) does not.
	if command -v keyctl >/dev/null && keyctl session - true >/dev/null 2>&1; then
		export BCH_UNLOCK=1
		keyctl session - sh -c 'exec 2>&3 3>&-; exec sh "$@"' sh "$0" "$@" 3>&2 2>/dev/null
		exit
	fi
fi
# The encrypted runs drive the real binary (BCH_BIN) through the wrapper.
# Set here, not only where BCH_BIN is first set: the run under the session
# keyring and the FSCK_JOBS parts are new runs of this script, whose B came
# from BCH, the real binary, and so once ran every case unencrypted.
if [ "$enc" = 1 ]; then
	B=$root/tests/encrypted.sh
	export B
fi
# encrypted_norm FILE: with ENCRYPTED=1, fsck's output (FILE, out.N of case
# $c) in the words of an unencrypted run.  The one word the cipher changes: a
# Poly1305 MAC stands where the checksum was, so a damaged btree node or
# journal entry is "bad MAC" -> "bad checksum" (the expect files name no
# checksum type).  And the numbers a case lists in its encrypted-numbers
# file: encrypted, every node read from disk is rewritten elsewhere before it
# is appended to, so nodes take other buckets and file data lands in other
# buckets, at other sectors and gens.  That file holds expect lines with
# each number that may differ written <n> ('#' lines are comments); an output
# line that matches one (digits where <n> is, all else the same) becomes the
# one expect.N line that matches it.  The plain run compares every number.
encrypted_norm() {
	[ "$enc" = 1 ] || return 0
	sed -e 's/bad MAC/bad checksum/g' "$1" > "$1.norm" && mv "$1.norm" "$1"
	_t=$here/$c/encrypted-numbers _e=$here/$c/expect.${1##*.}
	[ -f "$_t" ] && [ -f "$_e" ] || return 0
	awk -v T="$_t" -v E="$_e" '
	# is l the template t, with a run of digits for each <n>?
	function fits(l, t,   n, p, i) {
		n = split(t, p, "<n>")
		for (i = 1; i <= n; i++) {
			if (i > 1) {
				if (!match(l, /^[0-9]+/))
					return 0
				l = substr(l, RLENGTH + 1)
			}
			if (substr(l, 1, length(p[i])) != p[i])
				return 0
			l = substr(l, length(p[i]) + 1)
		}
		return l == ""
	}
	BEGIN {
		while ((getline x < T) > 0)
			if (x !~ /^#/ && x != "")
				t[++nt] = x
		while ((getline x < E) > 0)
			e[++ne] = x
		for (i = 1; i <= nt; i++) {
			hits = 0
			for (j = 1; j <= ne; j++)
				if (fits(e[j], t[i])) {
					hits++
					r[i] = e[j]
				}
			if (hits != 1)
				delete r[i]	# none or ambiguous: compared as is
		}
	}
	{
		for (i = 1; i <= nt; i++)
			if ((i in r) && fits($0, t[i])) {
				print r[i]
				next
			}
		print
	}' "$1" > "$1.norm" && mv "$1.norm" "$1"
}
# encrypted_skip CASE: the reason CASE is skipped encrypted, or nothing
encrypted_skip() {
	[ "$enc" = 1 ] && sed -n "s/^$1[[:space:]][[:space:]]*//p" "$here/encrypted-skip" 2>/dev/null
}
# The cases are independent (each in its own directory): FSCK_JOBS (default
# 2, the cores make check is sized for) run at once, each a run of this
# script over every FSCK_JOBS-th case; their summaries are added up.
jobs=${FSCK_JOBS:-2}
if [ "$jobs" -gt 1 ] && [ -z "${FSCK_PART:-}" ] && [ "$(echo $cases | wc -w)" -gt 1 ]; then
	logs=$(mktemp -d "${TMPDIR:-/tmp}/bch-fsck-parts.XXXXXX")
	i=0
	while [ $i -lt "$jobs" ]; do
		part=$(echo $cases | tr ' ' '\n' | awk -v j="$jobs" -v i="$i" 'NR % j == i')
		FSCK_PART=$i sh "$0" $part > "$logs/$i" 2>&1 &
		i=$((i + 1))
	done
	wait
	cat "$logs"/*
	pass=$(sed -n "s/^$label: \([0-9]*\) passed.*/\1/p" "$logs"/* | awk '{s += $1} END {print s + 0}')
	fail=$(sed -n "s/^$label: [0-9]* passed, \([0-9]*\) failed.*/\1/p" "$logs"/* | awk '{s += $1} END {print s + 0}')
	skipped=$(sed -n "s/^$label: .* failed, \([0-9]*\) skipped.*/\1/p" "$logs"/* | awk '{s += $1} END {print s + 0}')
	[ "$(grep -c "^$label: " "$logs"/* | awk -F: '{s += $2} END {print s + 0}')" = "$jobs" ] || fail=$((fail + 1))
	rm -rf "$logs"
	echo "$label: $pass passed, $fail failed, $skipped skipped"
	[ "$fail" = 0 ]
	exit
fi
for c in $cases; do
	why=$(encrypted_skip "$c")
	if [ -n "$why" ]; then
		skipped=$((skipped + 1)); echo "SKIP $c (encrypted): $why"; continue
	fi
	dir=$(mktemp -d "${TMPDIR:-/tmp}/bch-fsck-$c.XXXXXX")
	san=$(mktemp -d "${TMPDIR:-/tmp}/bch-san-$c.XXXXXX")
	san_env "$san"
	t0=$(date +%s)
	ok=true why=
	(cd "$dir" && sh "$here/$c/script") >"$dir/script.log" 2>&1 || { ok=false; why="script failed: $(tail -3 "$dir/script.log")"; }
	if $ok; then
		devs=$(cat "$dir/devs")
		args=$(cat "$here/$c/args" 2>/dev/null || true)
		# an encrypted run checks it made encrypted images (it once ran
		# them all in the clear and passed); a superblock too damaged to
		# show is left to the case's own expect files
		if [ "$enc" = 1 ] && (cd "$dir" && "$BCH_BIN" show-super "${devs%% *}") >"$dir/sb.out" 2>&1 &&
		   ! grep -q '^Encrypted: *yes$' "$dir/sb.out"; then
			ok=false; why="ENCRYPTED=1 but the case's filesystem is not encrypted"
		fi
	fi
	if $ok; then
		sums_before=$(cd "$dir" && sha256sum $devs)
		(cd "$dir" && "$B" fsck -f -n $args $devs) >"$dir/out.0" 2>&1
		rc0=$?
		# -n checks passes 5-8 on two threads (fsck_files_run.c): the one
		# thread's output, byte for byte, and its exit status
		(cd "$dir" && BCACHEFS_FSCK_ONE_THREAD=1 "$B" fsck -f -n $args $devs) >"$dir/out.0s" 2>&1
		rc0s=$?
		if [ "$rc0" != "$rc0s" ] || ! cmp -s "$dir/out.0" "$dir/out.0s"; then
			ok=false; why="fsck -n: two threads (exit $rc0) and one (exit $rc0s) differ:
$(diff "$dir/out.0s" "$dir/out.0" | head -20)"
		fi
		encrypted_norm "$dir/out.0"
		sums_after=$(cd "$dir" && sha256sum $devs)
		[ "$sums_before" = "$sums_after" ] || { ok=false; why="fsck -n changed a device"; }
		if [ -f "$here/$c/expect.0" ]; then
			echo "Exit status is $rc0" >>"$dir/out.0"
			if [ "${UPDATE:-0}" = 1 ]; then
				cp "$dir/out.0" "$here/$c/expect.0"
			elif ! cmp -s "$dir/out.0" "$here/$c/expect.0"; then
				ok=false; why="fsck -n (first) output differs from expect.0:
$(diff "$here/$c/expect.0" "$dir/out.0" | head -20)"
			fi
		fi
		for run in 1 2; do
			flag=-y; [ $run = 2 ] && flag=-n
			(cd "$dir" && "$B" fsck -f $flag $args $devs; echo "Exit status is $?") >"$dir/out.$run" 2>&1
			encrypted_norm "$dir/out.$run"
			rcr=$(sed -n 's/^Exit status is //p' "$dir/out.$run")
			if [ "${rcr:-0}" -ge 128 ]; then
				ok=false; why="$why
fsck $flag crashed (exit $rcr)"
			elif [ "${UPDATE:-0}" = 1 ]; then
				cp "$dir/out.$run" "$here/$c/expect.$run"
			elif ! cmp -s "$dir/out.$run" "$here/$c/expect.$run"; then
				ok=false
				why="$why
fsck $flag output differs from expect.$run:
$(diff "$here/$c/expect.$run" "$dir/out.$run" | head -20)"
			fi
		done
		if [ -f "$here/$c/check" ] && ! (cd "$dir" && sh "$here/$c/check") >"$dir/check.log" 2>&1; then
			ok=false; why="$why
check failed: $(tail -5 "$dir/check.log")"
		fi
		rc1=$(sed -n 's/^Exit status is //p' "$dir/out.1")
		if [ $((rc1 & 1)) = 1 ] && [ $((rc0 & 4)) != 4 ]; then
			ok=false; why="$why
fsck -n exited $rc0 although -y repaired something"
		fi
	fi
	san_wait "$san"
	if ! san_reports "$san" >"$dir/san.log"; then
		ok=false; why="$why
$(head -80 "$dir/san.log")"
	fi
	rm -rf "$san"
	if $ok; then
		pass=$((pass + 1)); echo "PASS $c ($(($(date +%s) - t0)) s)"; rm -rf "$dir"
	else
		fail=$((fail + 1)); echo "FAIL $c (kept $dir): $why"
	fi
done
echo "$label: $pass passed, $fail failed, $skipped skipped"
[ "$fail" = 0 ]
