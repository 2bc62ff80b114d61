#!/usr/bin/env bash
# Chaos test (docs/reliability.md, "Chaos"): random collectives of random
# kinds, sizes, communicators (dup, splits) and sync modes
# (tests/reliability/chaos_rank.cpp --chaos) on one host and on 2 and 3
# virtual hosts (libfabric tcp on loopback), while one random rank is
#   self   SIGKILLed by itself after a random number of calls,
#   kill   SIGKILLed by this script at a random moment,
#   stop   SIGSTOPped by this script and held past STRATA_TIMEOUT; strata-run must then kill it (fencing).
# Every round must end with: each survivor's pending futures failed with
# peer_dead or timeout naming the victim, the last one within STRATA_TIMEOUT
# + 1 s of the kill (or stop); strata-run exiting non-zero and naming the
# victim; no process, /dev/shm name, job directory or socket of the job left.
#   bash scripts/chaos.sh [ROUNDS]    (default 30; test_chaos runs 3)
#   STRATA_BUILD_DIR=...              build tree (default build/)
#   CHAOS_SEED=S                      first round's seed (default: from the clock)
#   CHAOS_TIMEOUT_MS=T                STRATA_TIMEOUT of the ranks (default 2000)
#   CHAOS_METHODS="self kill stop"    the methods drawn from (default all three)
#   CHAOS_CONFIGS="-n 3;-n 2 --hosts 2" the launcher configurations drawn from
# Prints one line per round and the totals: runs, kills, survivors' errors,
# hangs, leaks, worst kill-to-last-error time. Exit 0 when every round passed.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="${STRATA_BUILD_DIR:-$here/build}"
rounds="${1:-30}"
seed="${CHAOS_SEED:-$(date +%s)}"
tmo_ms="${CHAOS_TIMEOUT_MS:-2000}"
[ -x "$build/bin/chaos_rank" ] || cmake --build "$build" -j2 --target chaos_rank strata-run
RANDOM=$seed
IFS=";" read -r -a configs <<<"${CHAOS_CONFIGS:--n 3;-n 4;-n 2 --hosts 2;-n 4 --hosts 2;-n 3 --hosts 3;-n 5 --hosts 2}"
read -r -a methods <<<"${CHAOS_METHODS:-self kill stop}"
runs=0 kills=0 errors=0 hangs=0 leaks=0 failed=0 worst=0
limit=$(awk -v t="$tmo_ms" 'BEGIN { printf "%.3f", t / 1000 + 1 }')
# Waits (bounded, polling files: the ranks write them) until N files match $1*.
wait_files() {
  local pattern=$1 want=$2 secs=$3 t=0
  while [ "$(ls "$pattern"* 2>/dev/null | wc -l)" -lt "$want" ]; do
    sleep 0.05
    t=$((t + 1))
    [ "$t" -ge $((secs * 20)) ] && return 1
  done
  return 0
}
echo "chaos: $rounds round(s), seed $seed, STRATA_TIMEOUT=$tmo_ms ms, limit $limit s"
for ((round = 1; round <= rounds; round++)); do
  cfg=${configs[$((RANDOM % ${#configs[@]}))]}
  n=$(echo "$cfg" | awk '{ print $2 }')
  method=${methods[$((RANDOM % ${#methods[@]}))]}
  # Rotate the methods over the first rounds, so a short run covers each.
  [ "$round" -le "${#methods[@]}" ] && method=${methods[$((round - 1))]}
  victim=$((RANDOM % n))
  rseed=$((seed + round))
  dir=$(mktemp -d /tmp/strata-chaos.XXXXXX)
  extra=()
  [ "$method" = self ] && extra=(--self-kill $((RANDOM % 300)))
  CHAOS_VICTIM=$victim STRATA_TIMEOUT=$tmo_ms "$build/bin/strata-run" $cfg --on-failure continue \
    --timeout $((tmo_ms / 1000 + 40)) -- "$build/bin/chaos_rank" --chaos "$dir" --seed "$rseed" "${extra[@]}" \
    >"$dir/out" 2>&1 &
  lpid=$!
  problem=""
  if [ "$method" != self ]; then
    if wait_files "$dir/pid." "$n" 30; then
      # The random moment of the kill (not synchronization: any moment must work).
      sleep "0.$((RANDOM % 10))$((RANDOM % 10))"
      vpid=$(cat "$dir/pid.$victim")
      date +%s%N >"$dir/kill"
      if [ "$method" = kill ]; then
        kill -KILL "$vpid" 2>/dev/null || problem="victim already gone"
      else
        kill -STOP "$vpid" 2>/dev/null || problem="victim already gone"
        # Held until every survivor reported (bounded), at least STRATA_TIMEOUT.
        wait_files "$dir/done." $((n - 1)) $((tmo_ms / 1000 + 15)) || true
        # strata-run fences a rank it declared dead: the stopped victim must be gone (bounded wait).
        for _ in $(seq 1 100); do kill -0 "$vpid" 2>/dev/null || break; sleep 0.05; done
        if kill -0 "$vpid" 2>/dev/null; then
          problem="$problem; the stopped victim was not killed by strata-run (fencing)"
          kill -KILL "$vpid" 2>/dev/null
        fi
      fi
    else
      problem="ranks did not start"
    fi
  fi
  wait "$lpid"
  rc=$?
  runs=$((runs + 1))
  out=$(cat "$dir/out")
  # The launcher: non-zero, the victim named as killed.
  [ "$rc" -eq 0 ] && problem="$problem; launcher exited 0"
  [ "$rc" -eq 124 ] && { hangs=$((hangs + 1)); problem="$problem; launcher timed out (hang)"; }
  echo "$out" | grep -q "strata-run: rank $victim (pid [0-9]*) killed by signal SIGKILL" || problem="$problem; launcher did not name rank $victim"
  echo "$out" | grep -q "killed by signal" && kills=$((kills + 1))
  # The survivors.
  nd=0
  for ((r = 0; r < n; r++)); do
    [ "$r" -eq "$victim" ] && continue
    if [ ! -f "$dir/done.$r" ]; then
      problem="$problem; rank $r did not finish"
      hangs=$((hangs + 1))
      continue
    fi
    read -r after named errs others <"$dir/done.$r"
    nd=$((nd + 1))
    errors=$((errors + errs))
    [ "$named" -ne "$victim" ] && problem="$problem; rank $r named rank $named"
    [ "$others" -ne 0 ] && problem="$problem; rank $r had $others other error(s)"
    [ "$errs" -lt 1 ] && problem="$problem; rank $r saw no error"
    if awk -v a="$after" -v l="$limit" 'BEGIN { exit !(a > l || a < 0) }'; then
      problem="$problem; rank $r: last error $after s after the kill (limit $limit)"
    fi
    worst=$(awk -v a="$after" -v w="$worst" 'BEGIN { print (a > w ? a : w) }')
  done
  # Leaks: processes, /dev/shm names, the job directory, sockets.
  leak=""
  for f in "$dir"/pid.*; do
    [ -f "$f" ] || continue
    p=$(cat "$f")
    [ -d "/proc/$p" ] && leak="$leak process $p;"
    if command -v ss >/dev/null && ss -tanpx 2>/dev/null | grep -q "pid=$p,"; then leak="$leak socket of $p;"; fi
  done
  pgrep -f "$dir" >/dev/null && leak="$leak processes with $dir;"
  if [ -f "$dir/shm_prefix" ]; then
    prefix=$(cat "$dir/shm_prefix")
    left=$(ls /dev/shm 2>/dev/null | grep -c "^$prefix" || true)
    [ "$left" -ne 0 ] && leak="$leak $left /dev/shm name(s) $prefix*;"
  fi
  [ -f "$dir/job_dir" ] && [ -e "$(cat "$dir/job_dir")" ] && leak="$leak job directory $(cat "$dir/job_dir");"
  [ -n "$leak" ] && { leaks=$((leaks + 1)); problem="$problem; leak:$leak"; }
  problem=${problem#; }
  if [ -z "$problem" ]; then
    echo "chaos: round $round: $cfg, $method rank $victim, $nd survivor(s) failed naming it: OK"
    rm -rf "$dir"
  else
    failed=$((failed + 1))
    echo "chaos: round $round: $cfg, $method rank $victim (seed $rseed): FAILED: $problem (output in $dir/out)"
  fi
done
echo "chaos: runs $runs, kills $kills, survivors' errors $errors, hangs $hangs, leaks $leaks, worst kill-to-last-error ${worst} s (limit $limit s), failed rounds $failed"
[ "$failed" -eq 0 ] && echo "chaos: OK" || { echo "chaos: FAILED"; exit 1; }
