#!/usr/bin/env bash
# Builds Release and measures the transport (the transport benchmark) on 2 ranks
# pinned one per core: put_with_signal / get latency and put bandwidth for
# every backend (strata shm; libfabric with tcp;ofi_rxm and shm) in both
# progress modes (ProgressServer thread, inline), each beside the memcpy
# ceiling of the same run; the idle CPU of an engine; the raw libfabric
# provider (tests/transport_fabric/fabric_raw_pingpong) for comparison, with
# the backend's hints and its bandwidth measured like strata's put (windows of
# 8 writes drained each time, both directions, the slower counts; the former
# sliding-window figure is kept for reference). Then rewrites the transport
# section of docs/performance.md.
#
# usage: bench/scripts/transport.sh [--quick] [--skip-build] [--no-doc]
#   --quick       sizes 8:1M, 2 s idle (a smoke run; the doc says so)
#   --skip-build  use the binaries already in $BUILD
#   --no-doc      measure only; results stay in $OUT
# environment: BUILD (default build-release), SIZES (8:64M), IDLE_SECONDS (5),
#   RAW_SIZES ("1048576 4194304"), TIMEOUT per run in s (600), OUT (results dir),
#   DOC (docs/performance.md), CONFIGS (space-separated subset of the tags below),
#   EXTRA (more strata-bench options, e.g. --off-cache). The raw provider runs
#   right after the inline configuration of the same provider.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build-release}
SIZES=${SIZES:-8:64M}
IDLE_SECONDS=${IDLE_SECONDS:-5}
RAW_SIZES=${RAW_SIZES:-"1048576 4194304"}
TIMEOUT=${TIMEOUT:-600}
DOC=${DOC:-$ROOT/docs/performance.md}
EXTRA=${EXTRA:-}
build=1
doc=1
quick=0
for a in "$@"; do
  case "$a" in
    --quick) quick=1; SIZES=8:1M; IDLE_SECONDS=2; RAW_SIZES=1048576 ;;
    --skip-build) build=0 ;;
    --no-doc) doc=0 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "transport.sh: unknown argument '$a'" >&2; exit 2 ;;
  esac
done
OUT=${OUT:-$BUILD/bench-results/transport-$(date +%Y%m%d-%H%M%S)}

# tag | environment of the run (same-host pair, so STRATA_INTRA picks the backend)
ALL_CONFIGS=(
  "shm-server|STRATA_INTRA=shm STRATA_PROGRESS_THREADS=1"
  "shm-inline|STRATA_INTRA=shm STRATA_PROGRESS_THREADS=0"
  "ofi-tcp-server|STRATA_INTRA=fabric STRATA_PROVIDER=tcp;ofi_rxm STRATA_PROGRESS_THREADS=1"
  "ofi-tcp-inline|STRATA_INTRA=fabric STRATA_PROVIDER=tcp;ofi_rxm STRATA_PROGRESS_THREADS=0"
  "ofi-shm-server|STRATA_INTRA=fabric STRATA_PROVIDER=shm STRATA_PROGRESS_THREADS=1"
  "ofi-shm-inline|STRATA_INTRA=fabric STRATA_PROVIDER=shm STRATA_PROGRESS_THREADS=0"
)

log() { echo "transport.sh: $*" >&2; }

if [ "$build" = 1 ]; then
  log "building Release in $BUILD"
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null || exit 1
  cmake --build "$BUILD" -j2 --target strata-bench strata-run || exit 1
  # The raw provider program belongs to the fabric tests; optional.
  if ! cmake --build "$BUILD" -j2 --target fabric_raw_pingpong >/dev/null 2>&1; then
    log "fabric_raw_pingpong did not build: no raw-provider comparison"
  fi
fi
BENCH=$BUILD/bin/strata-bench
RUN=$BUILD/bin/strata-run
RAW=$BUILD/bin/fabric_raw_pingpong
for b in "$BENCH" "$RUN"; do
  [ -x "$b" ] || { log "missing $b"; exit 1; }
done

mkdir -p "$OUT"
: >"$OUT/manifest.txt"
{ echo "before: $(uptime)"; } >"$OUT/load.txt"
log "results in $OUT"

# Raw provider right after strata's runs of the same provider, so both see
# the same machine state (the cores are shared with other work).
raw_runs() {
  local prov=$1 ptag size sock rdv r0 rc0 rc1 rc
  if [ ! -x "$RAW" ]; then
    log "no $RAW: raw-provider comparison for $prov skipped"
    return
  fi
  ptag=${prov//;/-}
  for size in $RAW_SIZES; do
    log "raw libfabric $prov $size B"
    sock="$OUT/rdv-$ptag-$size.sock"
    python3 "$ROOT/bench/scripts/fabric_rdv.py" "$sock" 2 &
    rdv=$!
    for _ in $(seq 50); do [ -S "$sock" ] && break; sleep 0.1; done
    # Pinned like strata-run --bind core: rank r on core r.
    taskset -c 0 timeout 120 "$RAW" "$sock" 0 2 "$prov" "$size" >"$OUT/raw-$ptag-$size.txt" 2>"$OUT/raw-$ptag-$size.err" &
    r0=$!
    taskset -c 1 timeout 120 "$RAW" "$sock" 1 2 "$prov" "$size" >/dev/null 2>>"$OUT/raw-$ptag-$size.err"
    rc1=$?
    wait "$r0"
    rc0=$?
    wait "$rdv" 2>/dev/null
    rc=$((rc0 != 0 ? rc0 : rc1))
    echo "raw|$prov|$size|$rc" >>"$OUT/manifest.txt"
  done
}

for c in "${ALL_CONFIGS[@]}"; do
  tag=${c%%|*}
  envs=${c#*|}
  if [ -n "${CONFIGS:-}" ] && [[ " $CONFIGS " != *" $tag "* ]]; then continue; fi
  log "transport $tag ($envs) sizes $SIZES"
  read -r -a envarr <<<"$envs"
  # shellcheck disable=SC2086
  env "${envarr[@]}" "$RUN" -n 2 --bind core --timeout "$TIMEOUT" -- "$BENCH" --transport --sizes "$SIZES" \
    --json "$OUT/transport-$tag.json" $EXTRA >"$OUT/transport-$tag.txt" 2>"$OUT/transport-$tag.err"
  rc=$?
  echo "transport|$tag|$envs|$rc" >>"$OUT/manifest.txt"
  [ "$rc" = 0 ] || log "  $tag failed (status $rc): $(grep -v '^#' "$OUT/transport-$tag.err" | head -3 | tr '\n' ' ')"
  case "$tag" in
    ofi-tcp-inline) raw_runs "tcp;ofi_rxm" ;;
    ofi-shm-inline) raw_runs shm ;;
  esac
done

for mode in server inline; do
  threads=1
  [ "$mode" = inline ] && threads=0
  log "idle $mode ${IDLE_SECONDS}s"
  STRATA_PROGRESS_THREADS=$threads "$RUN" -n 2 --bind core --timeout "$TIMEOUT" -- "$BENCH" --idle "$IDLE_SECONDS" \
    --json "$OUT/idle-$mode.json" >"$OUT/idle-$mode.txt" 2>"$OUT/idle-$mode.err"
  echo "idle|$mode|STRATA_PROGRESS_THREADS=$threads|$?" >>"$OUT/manifest.txt"
done

{ echo "after: $(uptime)"; } >>"$OUT/load.txt"
cmdline="bench/scripts/transport.sh $*"
if [ "$doc" = 1 ]; then
  python3 "$ROOT/bench/scripts/transport_report.py" "$OUT" "$DOC" "$cmdline" "$quick" || exit 1
  log "updated $DOC"
fi
# Exit non-zero when any run failed, after the report recorded it.
if grep -q '|[1-9][0-9]*$' "$OUT/manifest.txt"; then
  log "some runs failed:"
  grep '|[1-9][0-9]*$' "$OUT/manifest.txt" >&2
  exit 1
fi
exit 0
