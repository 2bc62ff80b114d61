#!/usr/bin/env bash
# Failure handling without strata-run (docs/reliability.md): strata's own
# detection under Open MPI's mpirun (PMIx bootstrap). Three scenarios, each
# bounded, each printing one "mpirun-failures: <name>: OK" or FAILED line:
#   stop     a rank SIGSTOPped mid-loop (chaos_rank --chaos): every survivor's
#            calls fail naming it within STRATA_TIMEOUT + 1.5 s (the shm
#            backend sees the peer stopped in /proc; no launcher involved);
#   report   rank 2 never posts an allreduce; SIGUSR2 to mpirun (which
#            forwards it): every rank writes its report and rank 0 merges
#            them: "rank(s) 2 never posted it";
#   orphan   mpirun SIGKILLed while its ranks wait in a call: every rank exits
#            within 3 s (the watchdog sees the PMIx server gone) instead of
#            waiting forever;
#   hosts    (needs the emulated cluster: root, strata-net) 2 ranks on 2
#            virtual hosts under mpirun (strata-net), one SIGSTOPped: the
#            other fails naming it within STRATA_TIMEOUT + 1.5 s of the stop
#            (heartbeats between hosts; no launcher, no /proc across hosts).
#   scripts/mpirun-failures.sh BUILD_DIR [SCENARIO ...]   (default: stop report orphan)
set -uo pipefail
build=${1:-build}
shift || true
scenarios=" ${*:-stop report orphan} "
bin="$build/bin"
mpirun=/usr/bin/mpirun
[ -x "$mpirun" ] || { echo "mpirun-failures: FAILED: $mpirun is missing (scripts/setup.sh installs openmpi-bin)"; exit 1; }
work=$(mktemp -d /tmp/strata-mpirun-failures.XXXXXX)
cleanup() {
  pkill -KILL -P $$ 2>/dev/null
  pkill -KILL -f "$bin/rel_rank --hang" 2>/dev/null
  pkill -KILL -f "$bin/chaos_rank --chaos $work" 2>/dev/null
  pkill -KILL -f "strata-net --hosts 2 --rate 10gbit --timeout 80" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
fails=0
unset STRATA_RDV STRATA_RANK STRATA_SIZE
mpi=("$mpirun" --allow-run-as-root --oversubscribe -n 3)

gone() {  # pid gone or a zombie
  local st
  st=$(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null) || return 0
  [ "$st" = Z ]
}
wait_until() {  # seconds, command...
  local t=$1
  shift
  for _ in $(seq 1 $((t * 20))); do "$@" && return 0; sleep 0.05; done
  return 1
}
count_in() { [ "$(grep -c "$2" "$1" 2>/dev/null)" -ge "$3" ]; }
# chaos_rank --chaos in $d: SIGSTOP rank 1 at a random-free moment, wait
# (bounded) for the survivors' done files given as arguments, then kill it;
# sets $worst to the latest survivor error after the stop (s).
stop_rank1() {
  sleep 0.5
  local victim
  victim=$(cat "$d/pid.1")
  date +%s%N >"$d/kill"
  kill -STOP "$victim"
  local f all
  for _ in $(seq 1 300); do
    all=1
    for f in "$@"; do [ -f "$d/$f" ] || all=0; done
    [ "$all" = 1 ] && break
    sleep 0.05
  done
  kill -KILL "$victim" 2>/dev/null
  worst=$(grep -o "last error [0-9.]* s after the kill" "$d/out" | awk '{m = $3 > m ? $3 : m} END {print m + 0}')
}
# One scenario's verdict: name, ok (0/1), text; on failure the scenario's output follows.
verdict() {
  if [ "$2" = 1 ]; then
    echo "mpirun-failures: $1: OK ($3)"
  else
    echo "mpirun-failures: $1: FAILED ($3)"
    [ -f "$d/out" ] && sed 's/^/  | /' "$d/out" | tail -20
    fails=$((fails + 1))
  fi
}

# ---- stop
if [[ "$scenarios" == *" stop "* ]]; then
d="$work/stop"
mkdir -p "$d"
STRATA_TIMEOUT=2000 timeout 60 "${mpi[@]}" -x STRATA_TIMEOUT "$bin/chaos_rank" --chaos "$d" --seed 7 >"$d/out" 2>&1 &
mp=$!
if wait_until 20 test -f "$d/pid.2"; then
  stop_rank1 done.0 done.2
  wait "$mp" 2>/dev/null
  named=$(grep -c "errors naming rank 1, 0 other" "$d/out")
  ok=0
  [ "$named" = 2 ] && awk -v w="$worst" 'BEGIN {exit !(w > 0 && w <= 3.5)}' && ok=1
  verdict stop "$ok" "named by $named survivor(s); last error ${worst} s after SIGSTOP, STRATA_TIMEOUT 2 s"
else
  verdict stop 0 "ranks did not start"
fi
kill -KILL "$mp" 2>/dev/null
fi

# ---- report
if [[ "$scenarios" == *" report "* ]]; then
d="$work/report"
mkdir -p "$d"
STRATA_REPORT_DIR="$d/reports" timeout 60 "${mpi[@]}" -x STRATA_REPORT_DIR "$bin/rel_rank" --hang never >"$d/out" 2>&1 &
mp=$!
if wait_until 20 count_in "$d/out" "HANG rank .: posted" 3; then
  sleep 0.3
  kill -USR2 "$(pgrep -P "$mp" -x mpirun || echo "$mp")"
  ok=0
  wait_until 10 count_in "$d/out" "never posted it" 1 && ok=1
  verdict report "$ok" "$(grep -m1 'never posted it' "$d/out" | sed 's/^ *//')"
else
  verdict report 0 "ranks did not post"
fi
pkill -KILL -P "$mp" 2>/dev/null
kill -KILL "$mp" 2>/dev/null
wait "$mp" 2>/dev/null
fi

# ---- orphan
if [[ "$scenarios" == *" orphan "* ]]; then
d="$work/orphan"
mkdir -p "$d"
timeout 60 "${mpi[@]}" "$bin/rel_rank" --hang never >"$d/out" 2>&1 &
tp=$!
if wait_until 20 count_in "$d/out" "HANG rank .: posted" 3; then
  mp=$(pgrep -P "$tp" -x mpirun || echo "$tp")
  ranks=$(pgrep -P "$mp" -f "rel_rank --hang" | tr '\n' ' ')
  kill -KILL "$mp"
  all_gone() {
    for p in $ranks; do gone "$p" || return 1; done
    return 0
  }
  ok=0
  [ -n "$ranks" ] && wait_until 3 all_gone && ok=1
  verdict orphan "$ok" "ranks $ranks after mpirun was killed"
  [ "$ok" = 1 ] || for p in $ranks; do kill -KILL "$p" 2>/dev/null; done
else
  verdict orphan 0 "ranks did not post"
fi
kill -KILL "$tp" 2>/dev/null
fi

# ---- hosts
if [[ "$scenarios" == *" hosts "* ]]; then
d="$work/hosts"
mkdir -p "$d"
inner='exec mpirun.openmpi --allow-run-as-root --bind-to none --hostfile "$STRATA_NET_HOSTFILE" --mca plm_rsh_agent "$STRATA_NET_RSH" --mca btl tcp,self --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0 -x STRATA_TIMEOUT -n 2 "$@"'
STRATA_TIMEOUT=2000 timeout 90 "$bin/strata-net" --hosts 2 --rate 10gbit --timeout 80 -- sh -c "$inner" sh \
  "$bin/chaos_rank" --chaos "$d" --seed 3 >"$d/out" 2>&1 &
mp=$!
if wait_until 30 test -f "$d/pid.1"; then
  stop_rank1 done.0
  ok=0
  grep -q "errors naming rank 1, 0 other" "$d/out" && grep -q "sent no heartbeat" "$d/out" &&
    awk -v w="$worst" 'BEGIN {exit !(w > 0 && w <= 3.5)}' && ok=1
  verdict hosts "$ok" "rank 0 named rank 1 (no heartbeat) ${worst} s after SIGSTOP, STRATA_TIMEOUT 2 s"
else
  verdict hosts 0 "ranks did not start"
fi
kill -KILL "$mp" 2>/dev/null
wait "$mp" 2>/dev/null
fi

[ "$fails" = 0 ] && echo "mpirun-failures: OK" || echo "mpirun-failures: FAILED ($fails)"
[ "$fails" = 0 ]
