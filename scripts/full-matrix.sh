#!/usr/bin/env bash
# full-matrix.sh: the collectives integration programs (coll_rank, rooted_rank,
# sym_rank) in their full modes over every rank count, placement,
# fragmentation, direction and sync mode, one strata-run job per combination.
#
#   scripts/full-matrix.sh [--build-dir DIR] [--quick] [--timeout S] [--logs DIR] [--filter REGEX]
#
#   --build-dir DIR  build tree with bin/strata-run, bin/coll_rank, bin/rooted_rank,
#                    bin/sym_rank (default: build)
#   --quick          shorter sweep: the programs' --quick mode, ranks 2 5 8,
#                    fragmentation none | halves:8192, loose sync plus one strict
#                    column (fixed:4096)
#   --timeout S      per-run limit, passed to strata-run --timeout (default 900; quick 300)
#   --logs DIR       where the output of failed runs goes (default: a new /tmp directory)
#   --filter REGEX   only the runs whose description matches (grep -E)
#
# Each process of a run may use at most its share of 80% of the machine's
# memory as address space (ulimit -v, at most 4 GiB): a run that balloons
# fails instead of waking the OOM killer.
#
# Full matrix: ranks 1 2 3 5 8 11 x placements (one host, --hosts 2 [n >= 2],
# --topology 'package:2 numa:2 core:2 pu:1') x fragmentation (none, fixed:4096,
# halves:8192) x sync (loose, strict) x direction (push, pull; coll_rank and
# rooted_rank: pull applies to broadcast / scatter, the other collectives push;
# sym_rank has no direction and runs once per combination).
# Prints one line per run (PASS/FAIL, seconds, the run) and a summary with the
# total wall time; exits 1 if any run failed.
set -u

build=build
quick=0
timeout=""
logs=""
filter=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build="$2"; shift 2 ;;
    --quick) quick=1; shift ;;
    --timeout) timeout="$2"; shift 2 ;;
    --logs) logs="$2"; shift 2 ;;
    --filter) filter="$2"; shift 2 ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    *) echo "full-matrix.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
bin="$build/bin"
for p in strata-run coll_rank rooted_rank sym_rank; do
  if [ ! -x "$bin/$p" ]; then
    echo "full-matrix.sh: $bin/$p not found; build it first (cmake --build $build --target $p)" >&2
    exit 2
  fi
done
[ -n "$timeout" ] || timeout=$([ $quick = 1 ] && echo 300 || echo 900)
[ -n "$logs" ] || logs=$(mktemp -d /tmp/strata-full-matrix.XXXXXX)
mkdir -p "$logs"

topo='package:2 numa:2 core:2 pu:1'
if [ $quick = 1 ]; then
  ranks="2 5 8"
  frags="none halves:8192 fixed:4096"
  mode="--quick"
else
  ranks="1 2 3 5 8 11"
  frags="none fixed:4096 halves:8192"
  mode=""
fi

mem_kb=$(awk '/^MemTotal:/ { print $2 }' /proc/meminfo)
pass=0
fail=0
failed_runs=()
start_all=$(date +%s.%N)

# run NAME LAUNCHER_ARGS PROGRAM ARGS...: one job, one line.
run() {
  local launcher="$1"; shift
  local prog="$1"; shift
  local desc="$prog $launcher -- $*"
  if [ -n "$filter" ] && ! echo "$desc" | grep -Eq -- "$filter"; then return; fi
  local log="$logs/run-$((pass + fail + 1)).log"
  local t0 t1 rc secs
  t0=$(date +%s.%N)
  # Memory guard: each process of the job gets at most its share of 80% of the
  # machine's memory as address space (max 4 GiB), so a run that balloons fails
  # by itself instead of waking the OOM killer on a shared machine.
  local n
  n=$(echo "$launcher" | sed -E 's/.*-n ([0-9]+).*/\1/')
  local vlimit=$((mem_kb * 8 / 10 / n))
  [ $vlimit -gt 4194304 ] && vlimit=4194304
  # strata-run enforces the limit (exit 124); the outer timeout is a backstop.
  (
    ulimit -v $vlimit
    eval "timeout $((timeout + 60)) \"$bin/strata-run\" $launcher --timeout $timeout -- \"$bin/$prog\" $*"
  ) >"$log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  if [ $rc -eq 0 ] && grep -q "$prog: OK" "$log"; then
    pass=$((pass + 1))
    printf 'PASS %7ss  %s\n' "$secs" "$desc"
    rm -f "$log"
  else
    fail=$((fail + 1))
    failed_runs+=("$desc (exit $rc, log $log)")
    printf 'FAIL %7ss  %s  (exit %d, log %s)\n' "$secs" "$desc" "$rc" "$log"
  fi
}

for n in $ranks; do
  placements=("-n $n")
  [ "$n" -ge 2 ] && placements+=("-n $n --hosts 2")
  placements+=("-n $n --topology '$topo'")
  for place in "${placements[@]}"; do
    for frag in $frags; do
      for sync in loose strict; do
        # Quick: strict sync only with fixed:4096, fixed:4096 only strict.
        if [ $quick = 1 ]; then
          if [ "$frag" = fixed:4096 ] && [ $sync = loose ]; then continue; fi
          if [ "$frag" != fixed:4096 ] && [ $sync = strict ]; then continue; fi
        fi
        s=""
        [ $sync = strict ] && s="--strict"
        f=""
        [ "$frag" != none ] && f="--fragment $frag"
        [ "$frag" = none ] && f="--fragment none"
        for dir in push pull; do
          run "$place" coll_rank $mode $f $s --direction $dir
          run "$place" rooted_rank $mode $f $s --direction $dir
        done
        run "$place" sym_rank $mode $f $s
      done
    done
  done
done

end_all=$(date +%s.%N)
total=$(awk -v a="$start_all" -v b="$end_all" 'BEGIN { printf "%.0f", b - a }')
echo "----"
echo "full-matrix: $pass passed, $fail failed, $((pass + fail)) runs, total wall time ${total}s ($(($total / 60))m$(($total % 60))s)$([ $quick = 1 ] && echo ', quick')"
if [ $fail -gt 0 ]; then
  echo "failed runs:"
  for r in "${failed_runs[@]}"; do echo "  $r"; done
  exit 1
fi
rmdir "$logs" 2>/dev/null || true
exit 0
