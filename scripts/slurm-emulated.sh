#!/usr/bin/env bash
# Slurm on the emulated cluster: strata-net makes H virtual hosts (network +
# UTS namespaces, shaped links), this script starts one munged, slurmctld in
# host 0 and one slurmd per host, waits until every node is idle, then runs
#   srun --mpi=pmix -N H -n N COMMAND...
# from host 0: strata bootstraps from Slurm's PMIx server (no strata-run).
# Everything it started is stopped on every exit path; strata-net removes the
# namespaces. docs/cluster.md, "Slurm".
#
#   scripts/slurm-emulated.sh [--build DIR] [--hosts H] [--ntasks N] [--rate RATE] [--timeout S] -- COMMAND...
#
# Needs root, network namespaces (strata-net --check) and Debian's Slurm:
#   apt-get install slurmd slurmctld slurm-client munge
# (scripts/setup.sh --slurm). Exit status 77 with one line when any of that is
# missing (the test that runs it then skips with that line). SLURM_EMU_KEEP=1
# keeps the scratch directory (configuration and daemon logs) for debugging.
# SLURM_EMU_KILL_ON_BAD_EXIT=0 lets the step go on when a task fails (srun
# --kill-on-bad-exit=0; default 1), for the survivors of revoke and shrink.
set -euo pipefail

BUILD=build
HOSTS=2
NTASKS=
RATE=10gbit
TIMEOUT=300
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=$2; shift 2 ;;
    --hosts) HOSTS=$2; shift 2 ;;
    --ntasks) NTASKS=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "slurm-emulated: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ $# -gt 0 ] || { echo "slurm-emulated: no COMMAND after --" >&2; exit 2; }
NTASKS=${NTASKS:-$HOSTS}

skip() { echo "slurm-emulated: skipped: $*"; exit 77; }
for b in slurmctld slurmd srun sinfo munged; do
  command -v "$b" >/dev/null 2>&1 ||
    skip "$b not installed (apt-get install slurmd slurmctld slurm-client munge, or scripts/setup.sh --slurm)"
done
compgen -G '/usr/lib/*/slurm-wlm/mpi_pmix.so' >/dev/null || skip "Slurm's mpi_pmix plugin not found"
[ -f /etc/munge/munge.key ] || skip "/etc/munge/munge.key missing (the munge package creates it)"
NET="$BUILD/bin/strata-net"
[ -x "$NET" ] || { echo "slurm-emulated: $NET not built" >&2; exit 2; }
why=$("$NET" --check 2>&1) || skip "no emulated cluster here: $why"

T=$(mktemp -d /tmp/strata-slurm.XXXXXX)
chmod 755 "$T"
cleanup() {
  # munged writes its seed file as it exits: wait for it (bounded) before removing $T.
  if [ -f "$T/munged.pid" ]; then
    local m
    m=$(cat "$T/munged.pid")
    kill "$m" 2>/dev/null || true
    for ((k = 0; k < 100; k++)); do kill -0 "$m" 2>/dev/null || break; sleep 0.05; done
  fi
  [ -n "${SLURM_EMU_KEEP:-}" ] && echo "slurm-emulated: kept $T" || rm -rf "$T"
}
trap cleanup EXIT INT TERM

# One munged for every virtual host: they share the file system, so the
# daemons of all hosts authenticate through the same socket.
munged --force --socket="$T/munge.sock" --pid-file="$T/munged.pid" --seed-file="$T/munge.seed" \
  --log-file="$T/munged.log" --key-file=/etc/munge/munge.key ||
  skip "munged did not start: $(tail -1 "$T/munged.log" 2>/dev/null)"

# The part that runs inside host 0 (strata-net's COMMAND).
cat >"$T/inner.sh" <<'INNER'
#!/usr/bin/env bash
set -uo pipefail
T=$1; NTASKS=$2; shift 2
IFS=, read -r -a ADDRS <<<"$STRATA_NET_HOSTS"
H=${#ADDRS[@]}
# Each virtual host's own host name (its UTS namespace): slurmctld and slurmd
# check theirs against the configuration.
NAMES=()
for ((i = 0; i < H; i++)); do NAMES+=("$($STRATA_NET_RSH "${ADDRS[$i]}" hostname -s)"); done
CPUS=$(nproc)
{
  echo "ClusterName=strataemu"
  echo "SlurmctldHost=${NAMES[0]}(${ADDRS[0]})"
  echo "AuthType=auth/munge"
  echo "AuthInfo=socket=$T/munge.sock"
  echo "CredType=cred/munge"
  echo "SlurmUser=root"
  echo "SlurmdUser=root"
  echo "StateSaveLocation=$T/ctld"
  echo "SlurmdSpoolDir=$T/spool-%n"
  echo "SlurmctldPidFile=$T/ctld.pid"
  echo "SlurmdPidFile=$T/slurmd-%n.pid"
  echo "SlurmctldLogFile=$T/ctld.log"
  echo "SlurmdLogFile=$T/slurmd-%n.log"
  echo "ProctrackType=proctrack/linuxproc"
  echo "TaskPlugin=task/none"
  echo "SelectType=select/cons_tres"
  echo "SelectTypeParameters=CR_CPU"
  echo "SchedulerType=sched/builtin"
  echo "MpiDefault=pmix"
  echo "SwitchType=switch/none"
  echo "ReturnToService=2"
  echo "SlurmdParameters=config_overrides"
  echo "JobAcctGatherType=jobacct_gather/none"
  echo "AccountingStorageType=accounting_storage/none"
  echo "MailProg=/bin/true"
  # The nodes differ in TmpFS only (below): no warning about that.
  echo "DebugFlags=NO_CONF_HASH"
  for ((i = 0; i < H; i++)); do
    echo "NodeName=${NAMES[$i]} NodeAddr=${ADDRS[$i]} CPUs=$CPUS State=UNKNOWN"
  done
  echo "PartitionName=emu Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES"
} >"$T/slurm.conf"
mkdir -p "$T/ctld"
export SLURM_CONF=$T/slurm.conf
# The virtual hosts share one file system: each slurmd gets its own TmpFS,
# where the PMIx plugin makes its per-step directories (with one /tmp the
# second node's step failed on "File exists").
for ((i = 0; i < H; i++)); do
  mkdir -p "$T/conf-${NAMES[$i]}" "$T/tmp-${NAMES[$i]}"
  { cat "$SLURM_CONF"; echo "TmpFS=$T/tmp-${NAMES[$i]}"; } >"$T/conf-${NAMES[$i]}/slurm.conf"
done
pids=()
stop() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
}
trap stop EXIT
slurmctld -D -i -f "$SLURM_CONF" >>"$T/ctld.out" 2>&1 &
pids+=($!)
for ((i = 0; i < H; i++)); do
  mkdir -p "$T/spool-${NAMES[$i]}"
  conf=$T/conf-${NAMES[$i]}/slurm.conf
  $STRATA_NET_RSH "${ADDRS[$i]}" env SLURM_CONF="$conf" slurmd -D -f "$conf" -N "${NAMES[$i]}" \
    >>"$T/slurmd-${NAMES[$i]}.out" 2>&1 &
  pids+=($!)
done
# Every node idle (bounded: 60 s).
idle=0
for ((k = 0; k < 120; k++)); do
  kill -0 "${pids[0]}" 2>/dev/null || break  # slurmctld gave up: its log says why
  idle=$(timeout 5 sinfo -h -N -o '%N %t' 2>/dev/null | awk '$2 == "idle"' | wc -l)
  [ "$idle" -ge "$H" ] && break
  sleep 0.5
done
if [ "${idle:-0}" -lt "$H" ]; then
  echo "slurm-emulated: only ${idle:-0} of $H nodes came up; sinfo:" >&2
  sinfo -N >&2 || true
  tail -n 5 "$T"/ctld.log "$T"/slurmd-*.log >&2 2>/dev/null || true
  exit 1
fi
echo "slurm-emulated: $H nodes idle: $(sinfo -h -N -o '%N(%t)' | tr '\n' ' ')"
srun --mpi=pmix -N "$H" -n "$NTASKS" --kill-on-bad-exit="${SLURM_EMU_KILL_ON_BAD_EXIT:-1}" "$@"
INNER
chmod +x "$T/inner.sh"

"$NET" --hosts "$HOSTS" --rate "$RATE" --timeout "$TIMEOUT" -- "$T/inner.sh" "$T" "$NTASKS" "$@"
