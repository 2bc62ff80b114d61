#!/usr/bin/env bash
# Runs one small multigrid instance (with --check) and checks its output:
#   exit 0, a residual line per V-cycle, a steady reduction, the solution hash,
#   and "check: max |u - u(1 rank, 1 box)| = ... OK" (the single-rank solve in
#   the same process: the solution does not depend on the decomposition).
#   multigrid_check.sh [--hash HEX] -- COMMAND...   (--hash: the hash must be HEX too)
# COMMAND carries its own timeout (strata-run --timeout, or timeout(1) for mpirun).
set -u
hash=""
if [ "${1:-}" = "--hash" ]; then
  hash=$2
  shift 2
fi
[ "${1:-}" = "--" ] && shift
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
fail() {
  echo "multigrid_check: FAILED: $*" >&2
  exit 1
}
[ $rc -eq 124 ] && fail "timed out"
[ $rc -eq 0 ] || fail "exit status $rc"
cycles=$(grep -Ec '^multigrid: cycle +[0-9]+ +residual [0-9.e+-]+ +factor 0\.[0-9]+$' <<<"$out")
[ "$cycles" -ge 2 ] || fail "expected a residual line with a factor < 1 per V-cycle"
grep -Eq '^multigrid: mean reduction factor per V-cycle 0\.[0-9]+ \(steady\)$' <<<"$out" || fail "no steady reduction"
grep -Eq '^multigrid: time +total .* compute .* overlapped .* halo wait' <<<"$out" || fail "no timing breakdown"
grep -Eq '^multigrid: check: max \|u - u\(1 rank, 1 box\)\| = .*: OK$' <<<"$out" || fail "no successful check line"
if [ -n "$hash" ]; then
  grep -q "^multigrid: solution hash $hash " <<<"$out" || fail "solution hash is not $hash"
fi
echo "multigrid_check: OK"
