#!/usr/bin/env bash
# strata-sim speed target: a 4096-rank 16 MiB broadcast (128 hosts x
# 2 packages x 2 NUMA x 8 cores), compiled and simulated in under a minute.
# Usage: bash bench/scripts/sim_speed.sh [build-dir]   (exit 1 when over budget)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
BUILD=${1:-build}
SIM="$BUILD/bin/strata-sim"
[ -x "$SIM" ] || { echo "sim_speed: $SIM not built (cmake --build $BUILD --target strata-sim)" >&2; exit 2; }
budget=60
t0=$(date +%s%N)
"$SIM" --hosts 128 --topology "package:2 numa:2 core:8 pu:1" --coll broadcast --bytes 16M --critical 3
t1=$(date +%s%N)
ms=$(( (t1 - t0) / 1000000 ))
echo "sim_speed: 4096 ranks, 16 MiB broadcast: $((ms / 1000)).$(printf %03d $((ms % 1000))) s wall (budget ${budget} s)"
if (( ms > budget * 1000 )); then
  echo "sim_speed: over budget" >&2
  exit 1
fi
