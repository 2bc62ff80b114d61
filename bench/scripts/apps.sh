#!/usr/bin/env bash
# The applications measured on 2 ranks pinned one per core: each app with
# strata (strata-run -n 2 --bind core), Open MPI (mpirun.openmpi -n 2
# --bind-to core, the <app>-mpi twin) and MPICH (mpirun.mpich -n 2 -bind-to
# core, the <app>-mpich twin), the median of RUNS runs (rounds interleave the
# backends, so load drift hits them alike). Prints a markdown table and, unless
# --no-doc, rewrites the text between
#   <!-- apps:begin --> ... <!-- apps:end -->
# in docs/performance.md.
#
#   fft3d --grid GRID --iters ITERS, slab and pencil (1x2 grid), transpose modes
#         blocking / overlap / pipelined (strata: on_block compute nodes; MPI:
#         MPI_Waitany order), plus strata's Future::then variant and, when
#         fft3d was built with strata::openmp, --runtime openmp (every step an
#         OpenMP task, the alltoalls detached tasks: variant "openmp");
#         ms per forward+inverse (slowest rank), comm_wait_ms in parentheses;
#         and --mode comm (the transposes alone, 10x ITERS) for the overlap
#         floor table: CPU work (FFT + pack + kernel) against the link time
#   asp --n ASP_N, blocking and pipelined broadcast schedules; ms per solve
#   multigrid MG_ARGS, when $BUILD/bin/multigrid exists (its twins when they
#         exist); the "total" of its "multigrid: time" line (MG_TIME_REGEX, a
#         sed -E regex with one group), halo wait in parentheses; the process
#         wall time (start-up included) if the regex does not match
#
# usage: bench/scripts/apps.sh [--skip-build] [--no-doc] [--quick]
#   --skip-build  use the binaries already in $BUILD
#   --no-doc      print the table only
#   --quick       RUNS=1, GRID=64, ASP_N=512 (a smoke run)
# environment: BUILD (default build-release; built as Release unless --skip-build),
#   APPS (the apps to run: "fft3d asp multigrid"), RUNS (3), GRID (128x128x64), ITERS (5), CHUNKS (4), ASP_N (1024),
#   MG_ARGS (--n 128 --cycles 5), MG_TIME_REGEX, DOC (docs/performance.md),
#   TIMEOUT (300 s per run), NP (ranks, 2), HOSTS (virtual hosts, 1; MPI then
#   over TCP only), NET (a link rate such as 10gbit: the emulated cluster,
#   strata-run --net and MPI under strata-net as in bench/README.md; root)
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build-release}
RUNS=${RUNS:-3}
APPS=${APPS:-fft3d asp multigrid}
GRID=${GRID:-128x128x64}
ITERS=${ITERS:-5}
CHUNKS=${CHUNKS:-4}
ASP_N=${ASP_N:-1024}
MG_ARGS=${MG_ARGS:---n 128 --cycles 5}
MG_TIME_REGEX=${MG_TIME_REGEX:-^multigrid: time +total ([0-9.]+) ms.*}
MG_WAIT_REGEX=${MG_WAIT_REGEX:-^multigrid: time .* halo wait ([0-9.]+) ms.*}
DOC=${DOC:-$ROOT/docs/performance.md}
TIMEOUT=${TIMEOUT:-300}
NP=${NP:-2}
HOSTS=${HOSTS:-1}
NET=${NET:-}
build=1
doc=1
for a in "$@"; do
  case "$a" in
    --skip-build) build=0 ;;
    --no-doc) doc=0 ;;
    --quick) RUNS=1; GRID=64; ASP_N=512 ;;
    -h | --help) sed -n '2,28p' "$0"; exit 0 ;;
    *) echo "apps.sh: unknown argument '$a'" >&2; exit 2 ;;
  esac
done
log() { echo "apps.sh: $*" >&2; }
BIN=$BUILD/bin

if [ "$build" = 1 ]; then
  log "building Release in $BUILD"
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null || exit 1
  targets=(strata-run)
  have=$(cmake --build "$BUILD" --target help)
  for t in fft3d fft3d-mpi fft3d-mpich asp asp-mpi asp-mpich multigrid multigrid-mpi multigrid-mpich; do
    if grep -q "^$t:" <<<"$have"; then targets+=("$t"); fi
  done
  cmake --build "$BUILD" -j2 --target "${targets[@]}" || exit 1
fi
[ -x "$BIN/strata-run" ] || { log "no $BIN/strata-run (build first or set BUILD)"; exit 1; }

OUT=$(mktemp -d "${TMPDIR:-/tmp}/strata-apps.XXXXXX")
REC=$OUT/records.tsv # app, problem, variant, backend, value_ms, wait_ms
CPU=$OUT/cpu.tsv     # fft3d: problem, variant, backend, fft_ms, pack_ms, user_ms, sys_ms, irq_ms, sent_mb
: >"$REC"
: >"$CPU"

# run BACKEND APP ARGS...: prints the program's output; returns its status.
PIN=$ROOT/bench/scripts/pin.sh
net_ompi='exec mpirun.openmpi --allow-run-as-root --bind-to none --hostfile "$STRATA_NET_HOSTFILE" --mca plm_rsh_agent "$STRATA_NET_RSH" --mca btl tcp,self --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 -n '$NP' "$@"'
net_mpich='exec mpiexec.mpich -launcher ssh -launcher-exec "$STRATA_NET_RSH" -f "$STRATA_NET_MPICH_HOSTS" -bind-to none -genv UCX_TLS tcp,self -genv UCX_NET_DEVICES eth0 -n '$NP' "$@"'
run() {
  local backend=$1 app=$2
  shift 2
  local hosts=() ompi_tcp=() mpich_tcp=()
  if [ "$HOSTS" -gt 1 ]; then
    hosts=(--hosts "$HOSTS")
    ompi_tcp=(--mca btl tcp,self)
    mpich_tcp=(-genv UCX_TLS tcp,self -genv UCX_NET_DEVICES lo)
  fi
  if [ -n "$NET" ]; then
    local net=("$BIN/strata-net" --hosts "$HOSTS" --rate "$NET" --slots $(((NP + HOSTS - 1) / HOSTS)) --timeout "$TIMEOUT" --)
    case $backend in
      strata) "$BIN/strata-run" -n "$NP" --hosts "$HOSTS" --net "$NET" --bind core --timeout "$TIMEOUT" -- "$BIN/$app" "$@" ;;
      openmpi) "${net[@]}" sh -c "$net_ompi" sh "$PIN" "$BIN/$app-mpi" "$@" ;;
      mpich) "${net[@]}" sh -c "$net_mpich" sh "$PIN" "$BIN/$app-mpich" "$@" ;;
    esac
    return
  fi
  case $backend in
    strata) "$BIN/strata-run" -n "$NP" "${hosts[@]}" --bind core --timeout "$TIMEOUT" -- "$BIN/$app" "$@" ;;
    openmpi) timeout "$TIMEOUT" mpirun.openmpi --allow-run-as-root -n "$NP" --bind-to core "${ompi_tcp[@]}" "$BIN/$app-mpi" "$@" ;;
    mpich) timeout "$TIMEOUT" mpirun.mpich -n "$NP" -bind-to core "${mpich_tcp[@]}" "$BIN/$app-mpich" "$@" ;;
  esac
}
available() { # available BACKEND APP
  case $1 in
    strata) [ -x "$BIN/$2" ] ;;
    openmpi) [ -x "$BIN/$2-mpi" ] && command -v mpirun.openmpi >/dev/null ;;
    mpich) [ -x "$BIN/$2-mpich" ] && command -v mpirun.mpich >/dev/null ;;
  esac
}

wanted() { [[ " $APPS " == *" $1 "* ]]; }
# fft3d built with strata::openmp (it links libgomp) runs --runtime openmp.
have_omp=0
[ -x "$BIN/fft3d" ] && ldd "$BIN/fft3d" 2>/dev/null | grep -q libgomp && have_omp=1
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for ((r = 1; r <= RUNS; ++r)); do
  for backend in strata openmpi mpich; do
    if wanted fft3d && available $backend fft3d; then
      for decomp in slab pencil; do
        modes="all comm"
        [ $backend = strata ] && modes="all then comm"
        [ $backend = strata ] && [ "$have_omp" = 1 ] && modes="$modes openmp"
        for m in $modes; do
          log "round $r: fft3d $decomp --mode $m on $backend"
          if [ "$m" = openmp ]; then
            mode_args=(--runtime openmp)
          else
            mode_args=(--mode "$m")
          fi
          iters=$ITERS
          [ "$m" = comm ] && iters=$((ITERS * 10)) # transfers alone: more of them, for the 10 ms irq ticks
          out=$(run $backend fft3d --grid "$GRID" --decomp $decomp "${mode_args[@]}" --iters "$iters" --chunks "$CHUNKS" 2>&1)
          rc=$?
          [ $rc = 0 ] || { log "fft3d failed ($rc):"; echo "$out" >&2; }
          # fft3d: MODE total_ms fft_ms pack_ms comm_wait_ms in_comm_ms other_ms
          awk -v d=$decomp -v b=$backend -v g="$GRID" \
            '$1 == "fft3d:" && $2 ~ /^(blocking|overlap|pipelined|then|openmp)$/ && $3 ~ /^[0-9.]+$/ {
               printf "fft3d\t%s %s\t%s\t%s\t%s\t%s\n", g, d, $2, b, $3, $6 }' <<<"$out" >>"$REC"
          # fft3d: cpu MODE user_ms U sys_ms S irq_ms I sent_mb M (after its MODE line: fft_ms, pack_ms)
          awk -v d=$decomp -v b=$backend -v g="$GRID" \
            '$1 == "fft3d:" && $3 ~ /^[0-9.]+$/ { fft[$2] = $4; pack[$2] = $5 }
             $1 == "fft3d:" && $2 == "cpu" {
               printf "%s %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", g, d, $3, b, fft[$3], pack[$3], $5, $7, $9, $11 }' \
            <<<"$out" >>"$CPU"
        done
      done
    fi
    if wanted asp && available $backend asp; then
      log "round $r: asp --n $ASP_N on $backend"
      out=$(run $backend asp --n "$ASP_N" 2>&1)
      rc=$?
      [ $rc = 0 ] || { log "asp failed ($rc):"; echo "$out" >&2; }
      # asp: MODE total_ms compute_ms comm_wait_ms other_ms
      awk -v b=$backend -v n="$ASP_N" '$1 == "asp:" && $2 ~ /^(blocking|pipelined)$/ && $3 ~ /^[0-9.]+$/ {
          printf "asp\tn=%s\t%s\t%s\t%s\t%s\n", n, $2, b, $3, $5 }' <<<"$out" >>"$REC"
    fi
    if wanted multigrid && available $backend multigrid; then
      halos=window
      [ $backend = strata ] && halos="window graph" # graph: CollOptions::compute (strata only)
      for halo in $halos; do
        log "round $r: multigrid $MG_ARGS --halo $halo on $backend"
        t0=$(date +%s.%N)
        # shellcheck disable=SC2086
        out=$(run $backend multigrid $MG_ARGS --halo $halo 2>&1)
        rc=$?
        t1=$(date +%s.%N)
        [ $rc = 0 ] || { log "multigrid failed ($rc):"; echo "$out" >&2; }
        ms=$(sed -nE "s/$MG_TIME_REGEX/\\1/p" <<<"$out" | head -1)
        wait=$(sed -nE "s/$MG_WAIT_REGEX/\\1/p" <<<"$out" | head -1)
        variant="solve"
        [ $halo = graph ] && variant="solve-graph"
        if [ -z "$ms" ]; then
          ms=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) * 1000 }')
          variant="run"
        fi
        [ $rc = 0 ] && printf 'multigrid\t%s\t%s\t%s\t%s\t%s\n' "$MG_ARGS" $variant $backend "$ms" "${wait:--}" >>"$REC"
      done
    fi
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

table=$OUT/table.md
python3 - "$REC" "$RUNS" >"$table" <<'EOF' || exit 1
import statistics, sys
rec, runs = sys.argv[1], int(sys.argv[2])
cells = {}
order = []
for line in open(rec):
    app, prob, var, back, val, wait = line.rstrip("\n").split("\t")
    key = (app, prob, var)
    if key not in cells:
        cells[key] = {}
        order.append(key)
    cells[key].setdefault(back, []).append((float(val), None if wait == "-" else float(wait)))
def fmt(v):
    return f"{v:.1f}" if v >= 10 else f"{v:.2f}"
def med(xs):
    return statistics.median(xs) if xs else None
print("| app | problem | variant | strata | Open MPI | MPICH | strata / Open MPI | strata / MPICH |")
print("|---|---|---|---|---|---|---|---|")
names = {"blocking": "blocking", "overlap": "overlap", "pipelined": "pipelined",
         "then": "pipelined, Future::then (strata only)", "run": "whole run (process wall time)",
         "solve": "V-cycles", "solve-graph": "V-cycles, --halo graph (strata only)"}
for key in order:
    app, prob, var = key
    c = cells[key]
    row = [app, prob, names.get(var, var)]
    m = {}
    for b in ("strata", "openmpi", "mpich"):
        vals = c.get(b, [])
        if not vals:
            row.append("-")
            continue
        t = med([v for v, _ in vals])
        waits = [w for _, w in vals if w is not None]
        m[b] = t
        s = fmt(t) + (f" ({fmt(med(waits))})" if waits else "")
        if len(vals) != runs:
            s += f" [{len(vals)} of {runs} runs]"
        row.append(s)
    for b in ("openmpi", "mpich"):
        row.append(f"{m['strata'] / m[b]:.2f}" if "strata" in m and b in m and m[b] > 0 else "-")
    print("| " + " | ".join(row) + " |")
EOF
floor=$OUT/floor.md
python3 - "$REC" "$CPU" "$NET" >"$floor" <<'EOF' || exit 1
import re, statistics, sys
rec, cpu, net = sys.argv[1:4]
m = re.fullmatch(r"([0-9.]+)([kmg]?)bit", net.strip().lower()) if net else None
rate = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)] if m else None
times, parts = {}, {}
for line in open(rec):
    app, prob, var, back, val, _ = line.rstrip("\n").split("\t")
    if app == "fft3d" and var != "comm":
        times.setdefault(prob, {}).setdefault((back, var), []).append(float(val))
for line in open(cpu):
    prob, var, back, fft, pack, user, sys_, irq, sent = line.rstrip("\n").split("\t")
    parts.setdefault(prob, {}).setdefault((back, var), []).append(
        (float(fft or 0), float(pack or 0), float(user), float(sys_), float(irq), float(sent)))
med = statistics.median
names = {"strata": "strata", "openmpi": "Open MPI", "mpich": "MPICH"}
print("| problem | compute ms (FFT + pack) | kernel ms (sys + irq) | link ms | floor ms | best strata ms (variant) "
      "| best MPI ms (variant) | strata / floor | MPI / floor | strata / MPI |")
print("|---|---|---|---|---|---|---|---|---|---|")
for prob, cells in times.items():
    p = parts.get(prob, {})
    # Compute: the blocking variant's FFT + packing (nothing overlaps them), the lowest backend.
    comp = [med([f + k for f, k, *_ in v]) for (b, var), v in p.items() if var == "blocking"]
    # Kernel: the transfers alone (--mode comm): system + softirq/irq time, the lowest backend.
    kern = [med([x[3] + x[4] for x in v]) for (b, var), v in p.items() if var == "comm"]
    sent = [med([x[5] for x in v]) for (b, var), v in p.items() if var == "comm"]
    if not comp or not kern:
        continue
    c, k = min(comp), min(kern)
    link = max(sent) * 8e6 / rate * 1e3 if rate and sent else 0.0
    fl = max(c + k, link)
    def best(backs):
        return min(((med(v), b, var) for (b, var), v in cells.items() if b in backs), default=None)
    s, mp = best({"strata"}), best({"openmpi", "mpich"})
    if not s or not mp:
        continue
    print(f"| {prob} | {c:.1f} | {k:.1f} | {link:.1f} | **{fl:.1f}** | {s[0]:.1f} ({s[2]}) "
          f"| {mp[0]:.1f} ({names[mp[1]]} {mp[2]}) | {s[0] / fl:.2f} | {mp[0] / fl:.2f} | {s[0] / mp[0]:.2f} |")
EOF
cat "$table"
if [ -s "$floor" ] && [ "$(wc -l <"$floor")" -gt 2 ]; then
  echo
  cat "$floor"
fi

if [ "$doc" = 1 ]; then
  section=$OUT/section.md
  {
    echo "Generated by \`bench/scripts/apps.sh\` on $(date '+%Y-%m-%d %H:%M') (BUILD=${BUILD#"$ROOT"/}, RUNS=$RUNS)."
    echo
    echo "- Machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc --all) CPUs; 2 ranks pinned one per core: \`strata-run -n 2 --bind core\`, \`mpirun.openmpi -n 2 --bind-to core\`, \`mpirun.mpich -n 2 -bind-to core\`."
    echo "- MPI: Open MPI $(dpkg-query -W -f '${Version}' libopenmpi3 2>/dev/null || echo '?'), MPICH $(dpkg-query -W -f '${Version}' libmpich12 2>/dev/null || echo '?'); FFTW $(dpkg-query -W -f '${Version}' libfftw3-double3 2>/dev/null || echo '?') with FFTW_ESTIMATE plans."
    echo "- Load average (1, 5, 15 min) before: ${load_before}; after: ${load_after}. The machine is shared with other engineers' builds and tests: a load above ~1 inflates every number (2 cores, 2 ranks)."
    echo "- Cells: median of $RUNS runs in ms; fft3d: one forward+inverse, slowest rank, mean \`comm_wait_ms\` in parentheses (time the main thread was blocked in alltoalls; in strata's pipelined modes it includes the unpack and FFTs run inside the executor meanwhile); asp: the whole solve, slowest rank, mean broadcast wait in parentheses; multigrid (when built): \`--n\` etc. in the problem column, the total of its \`multigrid: time\` line, mean halo wait in parentheses. Ratios below 1: strata faster."
    echo "- fft3d: \`--grid $GRID --iters $ITERS --chunks $CHUNKS --mode all\` (and \`--mode then\` on strata), \`--decomp slab\` and \`--decomp pencil\` (1x2 process grid: the first transpose is between the 2 ranks, the second within 1-rank column communicators, a local copy); asp: \`--n $ASP_N\`."
    echo
    cat "$table"
    echo
    echo "fft3d's overlap floor (docs/apps.md, \"The overlap floor\"): the larger of a rank's CPU work per forward+inverse (FFT + packing of the blocking variant, plus the kernel's system and softirq/irq time for the transposes alone, \`--mode comm\`; each part the lowest over the backends) and the link time of its bytes at NET=${NET:-none}:"
    echo
    cat "$floor"
  } >"$section"
  python3 - "$DOC" "$section" <<'EOF' || exit 1
import sys
doc, sec = sys.argv[1:3]
text = open(doc).read()
b, e = "<!-- apps:begin -->", "<!-- apps:end -->"
if b not in text or e not in text:
    sys.exit(f"apps.sh: {doc} has no {b} ... {e} markers")
head, rest = text.split(b, 1)
_, tail = rest.split(e, 1)
open(doc, "w").write(head + b + "\n" + open(sec).read().rstrip() + "\n" + e + tail)
EOF
  log "rewrote the apps section of $DOC"
fi
log "records in $REC"
