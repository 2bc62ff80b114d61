#!/usr/bin/env bash
# Two soaks (docs/reliability.md).
# 1. Reference soak: N random collectives in total (all kinds, v-variants,
#    datatypes, ops with a non-commutative user op, in place, random roots,
#    split communicators, up to 16 in flight, loose and strict sync), each
#    checked against a local reference on every rank
#    (tests/reliability/chaos_rank.cpp --ref), on 1, 2, 3 and 5 ranks and on
#    2 ranks over 2 virtual hosts (libfabric tcp): N/5 calls each. Prints the
#    calls checked and the mismatches per run.
# 2. Resource soak: creates and frees N communicators (dup + one
# allreduce), N windows and N shared allocations (Engine::allocate, 64 KiB)
# on each rank count, printing RSS and the mapping count (/proc/self/maps
# lines) ten times per run; a run fails when either grows beyond a small bound
# after the first sample (tests/reliability/rel_rank.cpp, --soak). Then the
# 16-bit id space: 70,000 communicators and windows created and freed.
#   bash scripts/soak.sh [N]        (default 100000: calls of the reference
#                                     soak, rounds of the resource soak; the CI
#                                     variants are Soak.ReferenceShort, 3,000
#                                     calls, and Soak.MemoryAndMappingsStayFlat, 2,000)
#   SOAK_PARTS="reference resources" which soaks to run (default both)
#   SOAK_SEED=S                      seed of the reference soak (default 1)
#   STRATA_BUILD_DIR=...            build tree (default build/)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="${STRATA_BUILD_DIR:-$here/build}"
n="${1:-100000}"
parts="${SOAK_PARTS:-reference resources}"
seed="${SOAK_SEED:-1}"
[ -x "$build/bin/rel_rank" ] && [ -x "$build/bin/chaos_rank" ] ||
  cmake --build "$build" -j2 --target rel_rank chaos_rank strata-run
fail=0
if [[ " $parts " == *" reference "* ]]; then
  per=$((n / 5))
  total=0 bad=0
  for cfg in "-n 1" "-n 2" "-n 3" "-n 5" "-n 2 --hosts 2"; do
    t0=$(date +%s)
    out=$("$build/bin/strata-run" $cfg --timeout 7200 -- "$build/bin/chaos_rank" --ref "$per" --seed "$seed" 2>&1) || fail=1
    t1=$(date +%s)
    line=$(echo "$out" | grep -m1 "^REF rank 0:" || true)
    calls=$(echo "$line" | awk '{ print $4 }')
    mism=$(echo "$out" | grep "^REF rank" | grep -v MISMATCH | awk '{ s += $7 } END { print s + 0 }')
    echo "soak: reference, $cfg: ${calls:-0} calls checked on each rank, $mism mismatches (all ranks), $((t1 - t0)) s"
    echo "$out" | grep -E "MISMATCH|ERROR|FAILED" | head -5 || true
    total=$((total + ${calls:-0}))
    bad=$((bad + mism))
    [ -n "$line" ] || fail=1
  done
  echo "soak: reference: $total calls checked (per rank, summed over the runs), $bad mismatches"
  [ "$bad" -eq 0 ] || fail=1
fi
if [[ " $parts " != *" resources "* ]]; then
  [ "$fail" -eq 0 ] && echo "soak: OK" || { echo "soak: FAILED"; exit 1; }
  exit 0
fi
# Small windows: the soak is about what stays behind, not the slot memory.
export STRATA_SLOT_BYTES=4096 STRATA_CREDITS=1
for ranks in 1 2 3; do
  echo "soak: $n rounds on $ranks rank(s)"
  out=$("$build/bin/strata-run" -n "$ranks" --timeout 3600 -- "$build/bin/rel_rank" --soak "$n" 2>&1) || fail=1
  echo "$out" | grep -E "after|soak of|FAILED|soak OK" || true
done
echo "soak: 70000 communicators and windows on 1 rank (16-bit ids, reused after free)"
"$build/bin/strata-run" -n 1 --timeout 600 -- "$build/bin/rel_rank" --ids 70000 || fail=1
left=$(ls /dev/shm 2>/dev/null | grep -c '^strata' || true)
echo "soak: strata names left in /dev/shm: $left"
[ "$fail" -eq 0 ] && echo "soak: OK" || { echo "soak: FAILED"; exit 1; }
