#!/usr/bin/env bash
# README command 2: set up, build, run every test (CTest, each test with a timeout).
#   STRATA_TEST_LABEL=... restricts to a CTest label regex;
#   STRATA_TEST_EXCLUDE=... excludes tests matching a regex.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir="${STRATA_BUILD_DIR:-$here/build}"
# --slurm: the NetSlurm test starts Slurm on the emulated cluster (it skips without it).
bash "$here/scripts/setup.sh" --no-tune --slurm --build-dir "$build_dir" -- "$@"
args=(--test-dir "$build_dir" --output-on-failure --timeout 300 -j 2)
[ -n "${STRATA_TEST_LABEL:-}" ] && args+=(-L "$STRATA_TEST_LABEL")
[ -n "${STRATA_TEST_EXCLUDE:-}" ] && args+=(-E "$STRATA_TEST_EXCLUDE")
# Every skipped test is named with its reason; a multi-host test that skipped
# on a machine where the emulated cluster works fails the run (scripts/skip-report.py).
rc=0
ctest "${args[@]}" || rc=$?
python3 "$here/scripts/skip-report.py" "$build_dir" || rc=1
exit "$rc"
