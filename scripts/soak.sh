#!/usr/bin/env bash
# Resource soak: creates and frees N communicators (dup + one
# allreduce), N windows and N shared allocations (Engine::allocate, 64 KiB)
# on each rank count, printing RSS and the mapping count (/proc/self/maps
# lines) ten times per run; a run fails when either grows beyond a small bound
# after the first sample (tests/reliability/rel_rank.cpp, --soak). Then the
# 16-bit id space: 70,000 communicators and windows created and freed.
#   bash scripts/soak.sh [N]        (default 100000; the CI variant is the
#                                     Soak.MemoryAndMappingsStayFlat test, 2,000)
#   STRATA_BUILD_DIR=...            build tree (default build/)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="${STRATA_BUILD_DIR:-$here/build}"
n="${1:-100000}"
[ -x "$build/bin/rel_rank" ] || cmake --build "$build" -j2 --target rel_rank strata-run
# Small windows: the soak is about what stays behind, not the slot memory.
export STRATA_SLOT_BYTES=4096 STRATA_CREDITS=1
fail=0
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
