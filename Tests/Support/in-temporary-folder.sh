#!/usr/bin/env bash
# Runs a command (a test run) with TMPDIR set to a folder of its own, removed
# when the command ends: the state folders of the servers the tests start,
# their downloads and databases go there (Foundation's NSTemporaryDirectory()
# reads TMPDIR), so a run leaves nothing behind in /tmp (a run used to leave
# some 200 state folders, hundreds of megabytes, each time).
# KEEP_TEST_TMP=1 keeps the folder (its path is printed), to look into a failure.
set -uo pipefail
folder="$(mktemp -d "${TMPDIR:-/tmp}/hydra-test-run.XXXXXX")" || exit 1
export TMPDIR="$folder/"
"$@"
status=$?
if [ "${KEEP_TEST_TMP:-0}" = 1 ]; then
    echo "test files kept in $folder"
else
    rm -rf "$folder"
fi
exit "$status"
