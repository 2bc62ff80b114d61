#!/usr/bin/env bash
# Measures every algorithm of every collective at every size with strata-bench
# and prints, per collective, a table of median latencies (us) with the fastest
# algorithm per size: the measurements behind the automatic selection
# (engine/src/api_symmetric.cpp, engine/src/comm.hpp choose(); docs/algorithms.md,
# "Automatic selection").
#
# usage: bench/scripts/decision.sh [--build DIR] [--ranks N] [--sizes SPEC] [--colls a,b]
#                                  [--launch 'extra strata-run args'] [--out DIR]
#   defaults: --build build, --ranks 2, --sizes 8,64,512,4K,32K,256K,1M,4M,16M,
#             --colls bcast,reduce,allreduce,allgather,alltoall,reduce_scatter,gather,scatter
# Every run is pinned one rank per core (strata-run --bind core) unless
# --launch overrides it (e.g. --launch "--topology 'package:2 numa:2 core:1 pu:1'").
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$ROOT/build
RANKS=2
SIZES=8,64,512,4K,32K,256K,1M,4M,16M
COLLS=bcast,reduce,allreduce,allgather,alltoall,reduce_scatter,gather,scatter
LAUNCH="--bind core"
OUT=
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    --sizes) SIZES=$2; shift 2 ;;
    --colls) COLLS=$2; shift 2 ;;
    --launch) LAUNCH=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "decision.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
OUT=${OUT:-$BUILD/bench-results/decision-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
for b in strata-run strata-bench; do
  [ -x "$BUILD/bin/$b" ] || { echo "decision.sh: $BUILD/bin/$b missing (build it first)" >&2; exit 2; }
done

# Algorithm names per collective (docs/algorithms.md); "auto" is the built-in choice.
algos_of() {
  case "$1" in
    bcast) echo "auto tree single tree:pull single:pull" ;;
    reduce) echo "auto tree single" ;;
    allreduce) echo "auto tree single rd rabenseifner ring hier" ;;
    allgather) echo "auto ring rd bruck hier numa-ring" ;;
    alltoall) echo "auto pairwise bruck pull" ;;
    reduce_scatter) echo "auto ring rh pairwise" ;;
    gather) echo "auto tree single flat ring" ;;
    scatter) echo "auto tree single flat ring tree:pull" ;;
    *) echo "auto" ;;
  esac
}

echo "decision.sh: $RANKS ranks, strata-run $LAUNCH, sizes $SIZES; load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
IFS=, read -r -a colls <<<"$COLLS"
for coll in "${colls[@]}"; do
  for spec in $(algos_of "$coll"); do
    algo=${spec%%:*}
    dir=
    [ "$spec" != "$algo" ] && dir=${spec#*:}
    extra=(--algo "$algo")
    [ -n "$dir" ] && extra+=(--direction "$dir")
    json="$OUT/$coll-${spec/:/-}.json"
    echo "decision.sh: $coll $spec" >&2
    # shellcheck disable=SC2086
    eval "\"$BUILD/bin/strata-run\" -n $RANKS $LAUNCH --timeout 600 -- \"$BUILD/bin/strata-bench\"" \
      --coll "$coll" --sizes "$SIZES" --no-memcpy --quiet --json "$json" "${extra[@]}" \
      >"$OUT/$coll-${spec/:/-}.log" 2>&1 || echo "decision.sh: $coll $spec failed (see $OUT)" >&2
  done
done

python3 - "$OUT" "$RANKS" <<'EOF'
import glob, json, os, sys
out, ranks = sys.argv[1], sys.argv[2]
tables = {}
for f in sorted(glob.glob(os.path.join(out, "*.json"))):
    name = os.path.basename(f)[:-5]
    try:
        recs = json.load(open(f))
    except ValueError:
        continue
    for r in recs:
        if r.get("library") != "strata":
            continue
        coll = r["collective"]
        algo = name[len(coll) + 1:] if name.startswith(coll + "-") else name
        tables.setdefault(coll, {}).setdefault(r["bytes"], {})[algo] = r["median_us"]
def human(b):
    for s, m in (("M", 1 << 20), ("K", 1 << 10)):
        if b >= m and b % m == 0:
            return f"{b // m}{s}"
    return str(b)
print(f"# Algorithm latencies, {ranks} ranks (median us; fastest in bold; `auto` = built-in choice)\n")
for coll, rows in tables.items():
    algos = sorted({a for d in rows.values() for a in d}, key=lambda a: (a != "auto", a))
    print(f"## {coll}\n")
    print("| bytes | " + " | ".join(algos) + " | fastest | auto / fastest |")
    print("|---:|" + "---:|" * (len(algos) + 2))
    for b in sorted(rows):
        d = rows[b]
        named = {a: v for a, v in d.items() if a != "auto"}
        best = min(named, key=named.get) if named else None
        cells = []
        for a in algos:
            v = d.get(a)
            s = "-" if v is None else (f"{v:.3g}" if v < 100 else f"{v:.0f}")
            cells.append(f"**{s}**" if a == best else s)
        ratio = f"{d['auto'] / named[best]:.2f}" if best and "auto" in d else "-"
        print(f"| {human(b)} | " + " | ".join(cells) + f" | {best} | {ratio} |")
    print()
EOF
echo "decision.sh: raw results in $OUT" >&2
