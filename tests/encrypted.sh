#!/bin/sh
# The ENCRYPTED=1 parameter of the CLI tests and the fsck golden cases (issue
# 21): the same scripts, run once more on encrypted filesystems.
# tests/cli/run.sh and tests/fsck/run.sh, given ENCRYPTED=1, export
#   BCH_BIN                   the real binary
#   B                         this script
#   BCACHEFS_PASSPHRASE_FILE  a file holding the test passphrase
# and this script passes every command to the real binary unchanged, except
# that `format` gains --encrypted --passphrase-file $BCACHEFS_PASSPHRASE_FILE:
# every filesystem a test makes is encrypted, and every later command that
# opens one finds the key through BCACHEFS_PASSPHRASE_FILE, without a prompt.
# With BCH_UNLOCK=1 (tests/fsck/run.sh sets it, inside its own session
# keyring from `keyctl session`), a format that succeeded is followed by
# `unlock -k session` of its last device: later commands then take the key
# from the keyring instead of running scrypt on the passphrase each time (a
# key left stale by a later format with the same UUID falls back to the
# passphrase file).
# (A wrapper rather than a shell function, so that the fsck case scripts,
# which run in their own `sh`, and commands run through `sh -c "$B ..."` use
# it too.)  The real binary is exec'd, so messages still name `bcachefs`.
[ -n "${BCH_BIN:-}" ] && [ -n "${BCACHEFS_PASSPHRASE_FILE:-}" ] || {
	echo "tests/encrypted.sh: needs BCH_BIN and BCACHEFS_PASSPHRASE_FILE" >&2; exit 2; }
# Called by another name (a test's `ln -s "$B" mkfs.bcachefs`), it is that
# name's command: the real binary chooses by argv[0], which exec cannot pass
# (mount(8)'s helper names are not wrapped: t60 links the real binary).
case ${0##*/} in
mkfs.bcachefs) set -- format "$@" ;;
fsck.bcachefs) set -- fsck "$@" ;;
esac
if [ "${1:-}" = format ] || [ "${1:-}" = mkfs ]; then
	shift
	[ "${BCH_UNLOCK:-0}" = 1 ] || exec "$BCH_BIN" format --encrypted --passphrase-file "$BCACHEFS_PASSPHRASE_FILE" "$@"
	"$BCH_BIN" format --encrypted --passphrase-file "$BCACHEFS_PASSPHRASE_FILE" "$@" || exit
	for dev; do :; done
	"$BCH_BIN" unlock -q -k session --passphrase-file "$BCACHEFS_PASSPHRASE_FILE" "$dev" >/dev/null 2>&1
	exit 0
fi
exec "$BCH_BIN" "$@"
