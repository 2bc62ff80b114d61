#!/usr/bin/env bash
# algorithms.sh: algorithm ratios of the rooted collectives and allreduce
# (docs/algorithms.md), measured with strata-bench --coll under strata-run.
#
#   bench/scripts/algorithms.sh [--build-dir DIR] [--iters N] [--sizes SPEC] [--out DIR]
#
#   --build-dir DIR  build tree with bin/strata-run and bin/strata-bench (default: build)
#   --iters N        timed repetitions per size (default 30; 5 untimed first)
#   --sizes SPEC     strata-bench sizes (default 8:16M, powers of two)
#   --out DIR        keep the JSON records there (default: a new /tmp directory)
#
# Two launches: -n 2 (one host) and -n 4 --topology 'package:2 numa:2 core:1 pu:1'
# (two packages of two NUMA regions: package and NUMA tree levels). For bcast, reduce,
# gather, scatter and allreduce it runs
#   tree (hierarchical, default fragmentation, push)   the baseline
#   single (single-level tree)                          -> hierarchical / flat
#   tree --fragment none | fixed:32768 | halves:8192    -> fragmented / unfragmented
#   tree --direction pull (bcast, scatter)              -> pull / push
# and prints, per launch, each ratio table: one row per size, one column per
# collective, ratio of the medians (median over ranks of each rank's median
# time per call); < 1 means the first variant is faster. The last row is the
# median of the ratios over sizes. Everything runs on whatever machine this is:
# on a shared, loaded machine the ratios are noisy.
set -u

build=build
iters=30
sizes=8:16M
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build="$2"; shift 2 ;;
    --iters) iters="$2"; shift 2 ;;
    --sizes) sizes="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "algorithms.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for p in strata-run strata-bench; do
  if [ ! -x "$build/bin/$p" ]; then
    echo "algorithms.sh: $build/bin/$p not found; build it first" >&2
    exit 2
  fi
done
[ -n "$out" ] || out=$(mktemp -d /tmp/strata-algorithms.XXXXXX)
mkdir -p "$out"
colls=bcast,reduce,gather,scatter,allreduce
t_start=$(date +%s)
status=0

# bench LAUNCH_TAG LAUNCHER_ARGS CONFIG_TAG COLLS BENCH_ARGS...
bench() {
  local tag="$1" launcher="$2" cfg="$3" which="$4"
  shift 4
  local json="$out/$tag.$cfg.json"
  local t0=$(date +%s)
  if eval "\"$build/bin/strata-run\" $launcher --timeout 900 -- \"$build/bin/strata-bench\" --coll $which \
        --sizes $sizes --iters $iters --warmup 5 --quiet --json \"$json\" $*" >"$out/$tag.$cfg.log" 2>&1; then
    echo "# $tag $cfg: $(( $(date +%s) - t0 )) s" >&2
  else
    echo "# $tag $cfg: FAILED (see $out/$tag.$cfg.log)" >&2
    status=1
  fi
}

for launch in "n2|-n 2" "n4numa|-n 4 --topology 'package:2 numa:2 core:1 pu:1'"; do
  tag="${launch%%|*}"
  l="${launch#*|}"
  bench "$tag" "$l" tree "$colls" --algo tree
  bench "$tag" "$l" single "$colls" --algo single
  bench "$tag" "$l" frag-none "$colls" --algo tree --fragment none
  bench "$tag" "$l" frag-fixed32k "$colls" --algo tree --fragment fixed:32768
  bench "$tag" "$l" frag-halves8k "$colls" --algo tree --fragment halves:8192
  bench "$tag" "$l" pull bcast,scatter --algo tree --direction pull
done

python3 - "$out" <<'EOF'
import json, os, statistics, sys

out = sys.argv[1]
colls = ["bcast", "reduce", "gather", "scatter", "allreduce"]

def load(tag, cfg):
    path = os.path.join(out, f"{tag}.{cfg}.json")
    t = {}
    if not os.path.exists(path):
        return t
    for r in json.load(open(path)):
        if r.get("library") != "strata":
            continue
        t[(r["collective"], r["bytes"])] = r["median_us"]
    return t

def size(b):
    for unit, k in (("M", 1 << 20), ("K", 1 << 10)):
        if b >= k and b % k == 0:
            return f"{b // k}{unit}"
    return str(b)

def table(title, num, den, which):
    print(f"\n{title}")
    sizes = sorted({b for (c, b) in den if c in which})
    print("  " + f"{'bytes':>8}" + "".join(f"{c:>11}" for c in which))
    ratios = {c: [] for c in which}
    for b in sizes:
        row = []
        for c in which:
            if (c, b) in num and (c, b) in den and den[(c, b)] > 0:
                q = num[(c, b)] / den[(c, b)]
                ratios[c].append(q)
                row.append(f"{q:11.2f}")
            else:
                row.append(f"{'-':>11}")
        print("  " + f"{size(b):>8}" + "".join(row))
    print("  " + f"{'median':>8}" + "".join(
        f"{statistics.median(ratios[c]):11.2f}" if ratios[c] else f"{'-':>11}" for c in which))

for tag, title in (("n2", "-n 2 (one host)"), ("n4numa", "-n 4 --topology 'package:2 numa:2 core:1 pu:1'")):
    tree, single = load(tag, "tree"), load(tag, "single")
    none, fixed, halves = load(tag, "frag-none"), load(tag, "frag-fixed32k"), load(tag, "frag-halves8k")
    pull = load(tag, "pull")
    print(f"\n=== {title}: ratios of median times (< 1: the first variant is faster)")
    table("hierarchical / flat (tree / single)", tree, single, colls)
    table("fragmented fixed:32768 / unfragmented (none)", fixed, none, colls)
    table("fragmented halves:8192 / unfragmented (none)", halves, none, colls)
    table("pull / push (tree)", pull, tree, ["bcast", "scatter"])
EOF
echo
echo "algorithms.sh: total $(( $(date +%s) - t_start )) s; JSON in $out"
exit $status
