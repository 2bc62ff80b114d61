#!/usr/bin/env bash
# Idempotent set-up: installs the Debian packages strata needs that are missing
# (apt-get update only when an install needs it), then configures and builds.
#   scripts/setup.sh [--mpi] [--slurm] [--no-build] [--no-tune] [--build-dir DIR] [-- extra cmake args]
# --mpi also installs Open MPI and MPICH (for the baselines in bench/) and
# starpu-examples (StarPU-MPI's mpi_cholesky, bench/scripts/cholesky.sh's peer).
# --slurm also installs Slurm and munge (scripts/slurm-emulated.sh: srun
# --mpi=pmix across the emulated cluster; scripts/test.sh asks for it).
# After a build, writes a quick tuning table for this machine (strata-tune
# --quick, about 1 min; docs/tuning.md) when there is none yet at the default
# location; never for a Debug or sanitizer build, never with --no-tune (what
# scripts/test.sh and CI use), never when STRATA_TUNING is set. A failure only warns.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir="${STRATA_BUILD_DIR:-$here/build}"
want_mpi=0
want_slurm=0
do_build=1
do_tune=1
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --mpi) want_mpi=1 ;;
    --slurm) want_slurm=1 ;;
    --no-build) do_build=0 ;;
    --no-tune) do_tune=0 ;;
    --build-dir) build_dir="$2"; shift ;;
    --) shift; extra=("$@"); break ;;
    *) echo "setup.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
  shift
done

pkgs=(build-essential cmake ninja-build pkg-config clang-format
      libtbb-dev libfabric-dev libfabric-bin libhwloc-dev hwloc libspdlog-dev libfmt-dev libgtest-dev
      libfftw3-dev libcli11-dev nlohmann-json3-dev libpmix-dev libopenmpi-dev openmpi-bin iproute2 procps python3
      libstarpu-dev libstarpu-1.3-9   # StarPU 1.3: strata::starpu, its test and examples/starpu
      libblas-dev)                    # cblas.h + libblas.so.3 for apps/cholesky and its tests
if [ "$want_mpi" = 1 ]; then
  pkgs+=(libmpich-dev mpich gnuplot-nox starpu-examples)  # starpu-examples: mpi_cholesky, cholesky's peer
fi
if [ "$want_slurm" = 1 ]; then
  pkgs+=(slurmd slurmctld slurm-client munge)
fi

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  sudo_cmd=()
  [ "$(id -u)" = 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  if ! "${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${missing[@]}" >/tmp/strata-apt.log 2>&1; then
    "${sudo_cmd[@]}" apt-get update >>/tmp/strata-apt.log 2>&1
    "${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${missing[@]}" >>/tmp/strata-apt.log 2>&1 \
      || { echo "setup: apt-get failed, see /tmp/strata-apt.log" >&2; tail -20 /tmp/strata-apt.log >&2; exit 1; }
  fi
fi

if [ "$do_build" = 1 ]; then
  if [ ! -f "$build_dir/CMakeCache.txt" ]; then
    cmake -S "$here" -B "$build_dir" -G Ninja "${extra[@]}" >/dev/null
  elif [ ${#extra[@]} -gt 0 ]; then
    cmake "$build_dir" "${extra[@]}" >/dev/null
  fi
  cmake --build "$build_dir" -j "$(nproc)"
fi

# A quick tuning table for a new user (docs/tuning.md, "setup.sh").
if [ "$do_build" = 1 ] && [ "$do_tune" = 1 ] && [ -z "${STRATA_TUNING:-}" ] && [ -x "$build_dir/bin/strata-tune" ]; then
  cache="$build_dir/CMakeCache.txt"
  if grep -q '^STRATA_SANITIZE:[A-Z]*=.' "$cache" || grep -qi '^CMAKE_BUILD_TYPE:[A-Z]*=debug' "$cache"; then
    :  # timings of a sanitizer / Debug build would mislead the table
  else
    table="${XDG_CONFIG_HOME:-${HOME:-}/.config}/strata/tuning.json"
    if [ -n "${HOME:-}${XDG_CONFIG_HOME:-}" ] && [ ! -e "$table" ]; then
      echo "setup: measuring this machine for its tuning table (strata-tune --quick, about 1 min; --no-tune skips)" >&2
      "$build_dir/bin/strata-tune" --quick >&2 \
        || echo "setup: strata-tune failed; engines use the built-in defaults (run it again later)" >&2
    fi
  fi
fi
