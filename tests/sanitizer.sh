# Sanitizer settings for every suite, in one place; sourced (sh) by
# tests/run-all.sh (unit phase), tests/cli/run.sh, tests/fsck/run.sh and
# tests/damage/campaign.sh.  The sanitizer build is build/unit-tests and
# build/san/bcachefs (make build/san/bcachefs: ASan + UBSan, LeakSanitizer
# on, -O1 -g, UBSan built not to recover); a suite runs that binary with
# BCH=build/san/bcachefs.
#
#   san_env [DIR]   export ASAN_OPTIONS, UBSAN_OPTIONS and LSAN_OPTIONS: any
#                   finding (memory error, undefined behaviour, leak at exit)
#                   stops the process with exit 86 (none of the commands'
#                   documented codes, so an expected failure status cannot
#                   hide it).  With DIR, reports are written to DIR/san.PID
#                   instead of stderr: they then reach the test from a
#                   daemon whose stderr is gone (fusemount) and do not
#                   disturb output compared byte for byte (fsck golden cases).
#   san_wait DIR    wait (up to 20 s) for the processes still running with
#                   reports going to DIR: a fusemount daemon finishes closing
#                   (and LeakSanitizer checks it) after its unmount returned.
#   san_reports DIR print the reports under DIR (indented); status 1 if any.
#
# Without a sanitizer runtime in the binary these variables do nothing, so
# the suites set them whatever BCH is.

SAN_EXITCODE=86

san_env() {
	_san_log=
	if [ -n "${1:-}" ]; then
		mkdir -p "$1"
		_san_log=:log_path=$(cd "$1" && pwd)/san
	fi
	ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:exitcode=$SAN_EXITCODE$_san_log
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=$SAN_EXITCODE$_san_log
	LSAN_OPTIONS=exitcode=$SAN_EXITCODE
	export ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS
}

san_reports() {
	[ -d "$1" ] || return 0
	_san_found=0
	for _f in "$1"/san.*; do
		[ -s "$_f" ] || continue
		_san_found=1
		echo "sanitizer report $(basename "$_f"):"
		sed 's/^/    /' "$_f" | head -60
	done
	[ "$_san_found" = 0 ]
}

san_wait() {
	_san_n=0
	while [ $_san_n -lt 200 ] &&
	      grep -lqsF "log_path=$(cd "$1" 2>/dev/null && pwd)/san" /proc/[0-9]*/environ 2>/dev/null; do
		sleep 0.1
		_san_n=$((_san_n + 1))
	done
}
