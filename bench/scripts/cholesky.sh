#!/usr/bin/env bash
# apps/cholesky (StarPU tasks, tagged strata broadcasts of the panel tiles)
# against Debian's StarPU-MPI mpi_cholesky example (tiles moved point to point
# from their owners), on the emulated cluster: 2 virtual hosts, shaped links.
# Everything but the communication is pinned: the same matrix size and tile
# count, single precision, the same tile kernels through the same
# libblas.so.3 (checked below), the same 2D block-cyclic grid (passed to both
# as -dblockx X -dblocky Y), priorities on, STARPU_NCPU=1 and
# STARPU_WORKERS_NOBIND=1 (StarPU 1.3 would bind every rank's worker to CPU 0;
# with it the worker stays on the CPU the launcher pinned the rank to).
#
# For every net in NETS and rank count in NPS (ranks split over 2 hosts), ROUNDS
# interleaved rounds of:
#   strata        strata-run -n NP --hosts 2 --net NET --bind core -- cholesky -size SIZE -nblocks NBLOCKS
#   peer          strata-net --hosts 2 --rate NET -- mpirun.openmpi ... -n NP pin.sh mpi_cholesky -size SIZE
#                 -nblocks NBLOCKS (Open MPI's TCP BTL over the emulated links, bench/README.md)
#   compute-only  the strata command with --compute-only: the same tasks, no communication
# then a markdown table: GFlop/s best and median of each library, the floor =
# max(compute alone, link time), each library's distance to the floor (floor
# GFlop/s / its best GFlop/s, 1.00 = on the floor) and strata / peer.
#   compute alone: the fastest compute-only run of the row;
#   link time: the bytes this broadcast pattern must move across the busiest
#   link direction (each panel tile once to every other host that needs it;
#   printed by cholesky as link_ms) at the link rate.
# GFlop/s = (N^3/3 + N^2/2 + N/6) / time, as both programs print it.
#
# usage: bench/scripts/cholesky.sh [--skip-build] [--quick]
#   --skip-build  use the binaries already in $BUILD
#   --quick       SIZE=960 NBLOCKS=4 ROUNDS=1 NETS=100mbit NPS=2 (a functional run)
# environment: BUILD (default build-release; built as Release unless --skip-build),
#   NETS ("10gbit 1gbit 100mbit"), NPS ("2 4"), ROUNDS (3), SIZE (3840), NBLOCKS (12),
#   GRID_2 (2x1), GRID_4 (2x2): the grid for each rank count, as XxY = dblockx x dblocky,
#   PEER (/usr/lib/x86_64-linux-gnu/starpu/mpi/mpi_cholesky), TIMEOUT (600 s per run),
#   STRATA_ENV (extra VAR=VALUE settings for the strata runs only, e.g. STRATA_PROVIDER=net),
#   OUT (a directory for the logs; default a new one under $TMPDIR)
# Needs root (network namespaces: docs/cluster.md).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build-release}
NETS=${NETS:-10gbit 1gbit 100mbit}
NPS=${NPS:-2 4}
ROUNDS=${ROUNDS:-3}
SIZE=${SIZE:-3840}
NBLOCKS=${NBLOCKS:-12}
GRID_2=${GRID_2:-2x1}
GRID_4=${GRID_4:-2x2}
PEER=${PEER:-/usr/lib/x86_64-linux-gnu/starpu/mpi/mpi_cholesky}
TIMEOUT=${TIMEOUT:-600}
STRATA_ENV=${STRATA_ENV:-}
HOSTS=2
build=1
for a in "$@"; do
  case "$a" in
    --skip-build) build=0 ;;
    --quick) SIZE=960; NBLOCKS=4; ROUNDS=1; NETS=100mbit; NPS=2 ;;
    -h | --help) sed -n '2,40p' "$0"; exit 0 ;;
    *) echo "cholesky.sh: unknown argument '$a'" >&2; exit 2 ;;
  esac
done
log() { echo "cholesky.sh: $*" >&2; }
BIN=$BUILD/bin

if [ "$build" = 1 ]; then
  log "building Release in $BUILD"
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null || exit 1
  cmake --build "$BUILD" -j2 --target cholesky strata-run strata-net || exit 1
fi
for b in "$BIN/cholesky" "$BIN/strata-run" "$BIN/strata-net" "$PEER"; do
  [ -x "$b" ] || { log "no $b (build first, set BUILD, or install starpu-examples for the peer)"; exit 1; }
done
command -v mpirun.openmpi >/dev/null || { log "no mpirun.openmpi (Open MPI runs the peer)"; exit 1; }

# Both programs must load the same libblas.so.3 (Debian's alternatives pick it).
blas_of() { ldd "$1" | awk '$1 == "libblas.so.3" { print $3 }' | xargs -r readlink -f; }
blas_strata=$(blas_of "$BIN/cholesky")
blas_peer=$(blas_of "$PEER")
if [ -z "$blas_strata" ] || [ "$blas_strata" != "$blas_peer" ]; then
  log "the two programs load different BLAS: cholesky '$blas_strata', mpi_cholesky '$blas_peer'"
  exit 1
fi
blas_pkg=$(dpkg -S "$blas_strata" 2>/dev/null | cut -d: -f1 | head -1)
blas_ver=$([ -n "$blas_pkg" ] && dpkg-query -W -f '${Version}' "$blas_pkg" 2>/dev/null)
log "BLAS of both: libblas.so.3 -> $blas_strata (${blas_pkg:-?} ${blas_ver:-?})"

OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/strata-cholesky.XXXXXX")}
mkdir -p "$OUT"
REC=$OUT/records.tsv # net, np, grid, kind, round, value (gflops), time_ms, link_ms, busiest_link_MB
: >"$REC"
export STARPU_NCPU=1 STARPU_WORKERS_NOBIND=1

# The busiest link direction of a run, from the counters strata-run --net-stats
# and strata-net print ("...: host H (ADDR) link: received X MB, sent Y MB").
busiest() { awk '/ link: received / { r = $(NF-4) + 0; s = $(NF-1) + 0; m = (r > m ? r : m); m = (s > m ? s : m) }
                 END { printf "%.1f", m + 0 }' "$1"; }

run_strata() { # run_strata NET NP X Y LOG [--compute-only]
  local net=$1 np=$2 x=$3 y=$4 out=$5
  shift 5
  # shellcheck disable=SC2086
  env $STRATA_ENV "$BIN/strata-run" -n "$np" --hosts $HOSTS --net "$net" --bind core --net-stats --timeout "$TIMEOUT" \
    -- "$BIN/cholesky" -size "$SIZE" -nblocks "$NBLOCKS" -dblockx "$x" -dblocky "$y" "$@" >"$out" 2>&1
}
run_peer() { # run_peer NET NP X Y LOG
  local net=$1 np=$2 x=$3 y=$4 out=$5
  # shellcheck disable=SC2016  # expanded by the shell strata-net starts inside host 0
  "$BIN/strata-net" --hosts $HOSTS --rate "$net" --slots $(((np + HOSTS - 1) / HOSTS)) --timeout "$TIMEOUT" -- \
    sh -c 'exec mpirun.openmpi --allow-run-as-root --bind-to none --hostfile "$STRATA_NET_HOSTFILE" \
             --mca plm_rsh_agent "$STRATA_NET_RSH" --mca btl tcp,self --mca btl_tcp_if_include eth0 \
             --mca oob_tcp_if_include eth0 -x STARPU_NCPU -x STARPU_WORKERS_NOBIND -n "$0" "$@"' \
    "$np" "$ROOT/bench/scripts/pin.sh" "$PEER" -size "$SIZE" -nblocks "$NBLOCKS" -dblockx "$x" -dblocky "$y" \
    >"$out" 2>&1
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for ((r = 1; r <= ROUNDS; ++r)); do
  for net in $NETS; do
    for np in $NPS; do
      gv=GRID_$np
      grid=${!gv:-}
      [ -n "$grid" ] || { log "no grid for $np ranks: set GRID_$np=XxY"; exit 2; }
      x=${grid%x*} y=${grid#*x}
      for kind in strata peer compute-only; do
        lg=$OUT/$kind-$net-n$np-r$r.log
        log "round $r/$ROUNDS: $kind, $np ranks ($grid) on $HOSTS hosts at $net"
        case $kind in
          strata) run_strata "$net" "$np" "$x" "$y" "$lg" ;;
          compute-only) run_strata "$net" "$np" "$x" "$y" "$lg" --compute-only ;;
          peer) run_peer "$net" "$np" "$x" "$y" "$lg" ;;
        esac
        rc=$?
        if [ $rc != 0 ]; then
          log "$kind failed (exit $rc), log $lg:"
          tail -n 15 "$lg" >&2
          continue
        fi
        if [ $kind = peer ]; then
          ms=$(sed -nE 's/^Computation time \(in ms\): *([0-9.]+).*/\1/p' "$lg" | head -1)
          gf=$(sed -nE 's/^Synthetic GFlops *: *([0-9.]+).*/\1/p' "$lg" | head -1)
          link=-
        else
          line=$(grep -m1 '^cholesky: result ' "$lg")
          ms=$(sed -nE 's/.* time_ms=([0-9.]+).*/\1/p' <<<"$line")
          gf=$(sed -nE 's/.* gflops=([0-9.]+).*/\1/p' <<<"$line")
          link=$(sed -nE 's/.* link_ms=([0-9.]+).*/\1/p' <<<"$line")
        fi
        if [ -z "$ms" ] || [ -z "$gf" ]; then
          log "$kind printed no result, log $lg"
          continue
        fi
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$net" "$np" "$grid" "$kind" "$r" "$gf" "$ms" "$link" \
          "$(busiest "$lg")" >>"$REC"
      done
    done
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

echo "Generated by \`bench/scripts/cholesky.sh\` on $(date '+%Y-%m-%d %H:%M'): N=$SIZE, $NBLOCKS x $NBLOCKS tiles, $HOSTS emulated hosts, $ROUNDS round(s); BLAS $blas_strata (${blas_pkg:-?} ${blas_ver:-?}) for both; load average before ${load_before}, after ${load_after}${STRATA_ENV:+; strata runs with $STRATA_ENV}."
echo
python3 - "$REC" "$SIZE" "$ROUNDS" <<'EOF'
import statistics, sys
rec, n, rounds = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
flops = n * n * n / 3 + n * n / 2 + n / 6
rows, order = {}, []
slow_floor = False
for line in open(rec):
    net, np, grid, kind, _, gf, ms, link, mb = line.rstrip("\n").split("\t")
    key = (net, np, grid)
    if key not in rows:
        rows[key] = {}
        order.append(key)
    rows[key].setdefault(kind, []).append((float(gf), float(ms), None if link == "-" else float(link), float(mb)))
print("| net | ranks (grid) | strata GFlop/s best / median | peer GFlop/s best / median | floor GFlop/s (compute ms, link ms) "
      "| strata to floor | peer to floor | strata / peer (best) | MB on the busiest link: strata / peer |")
print("|---|---|---|---|---|---|---|---|---|")
def cell(v):
    if not v:
        return "-"
    g = [x[0] for x in v]
    s = f"{max(g):.2f} / {statistics.median(g):.2f}"
    return s + (f" [{len(v)} of {rounds}]" if len(v) != rounds else "")
for key in order:
    net, np, grid = key
    c = rows[key]
    s, p, f = c.get("strata", []), c.get("peer", []), c.get("compute-only", [])
    floor = "-"
    to = {}
    if f:
        comp_ms = min(x[1] for x in f)
        link_ms = max(x[2] or 0 for x in f)
        floor_gf = flops / (max(comp_ms, link_ms) / 1e3) / 1e9
        floor = f"{floor_gf:.2f} ({comp_ms:.0f}, {link_ms:.0f})"
        for name, v in (("strata", s), ("peer", p)):
            if v:
                d = floor_gf / max(x[0] for x in v)
                to[name] = f"{d:.2f}x" + (" (!)" if d < 0.95 else "")
                slow_floor = slow_floor or d < 0.95
    ratio = f"{max(x[0] for x in s) / max(x[0] for x in p):.2f}" if s and p else "-"
    mb = lambda v: f"{statistics.median([x[3] for x in v]):.1f}" if v else "-"
    print(f"| {net} | {np} ({grid}) | {cell(s)} | {cell(p)} | {floor} | {to.get('strata', '-')} | {to.get('peer', '-')} "
          f"| {ratio} | {mb(s)} / {mb(p)} |")
if slow_floor:
    print()
    print("(!) faster than the floor: that row's compute-only runs were slowed (machine load?); rerun it.")
EOF
log "logs and records in $OUT"
