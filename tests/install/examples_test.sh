#!/usr/bin/env bash
# examples_test.sh BUILD_DIR EXAMPLES_SRC: installs the built tree into a temporary prefix, builds every
# program of examples/ against it (one configure, one build) and runs each under the installed strata-run,
# checking the line it prints. Extra examples (e.g. mpi_interop) run when their binary was built.
set -euo pipefail
build=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
flags=${STRATA_CONSUMER_FLAGS:-}
# oneTBB's flow graph header (graph_task::destruct_and_deallocate casts a task to its derived type after
# its destructor ran) trips UBSan's vptr check: a false positive outside strata, for examples/flow_graph.
if [[ "$flags" == *undefined* ]]; then flags="$flags -fno-sanitize=vptr"; fi
cmake -S "$src" -B "$work/examples" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="$flags" >"$work/configure.log" ||
  { cat "$work/configure.log"; exit 1; }
cmake --build "$work/examples" -j 2 >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
run="$work/prefix/bin/strata-run"
fail=0
# check NAME RANKS EXPECTED-REGEX: runs the example, prints its output, fails on a missing line or exit status.
check() {
  local name=$1 n=$2 want=$3 out rc=0
  out=$(STRATA_TUNING=off "$run" -n "$n" --timeout 60 -- "$work/examples/$name/$name" 2>&1) || rc=$?
  printf '%s -n %s (exit %s): %s\n' "$name" "$n" "$rc" "$out"
  if [[ $rc -ne 0 ]] || ! grep -Eq "$want" <<<"$out"; then
    echo "FAILED: $name -n $n did not print /$want/" >&2
    fail=1
  fi
}
check allreduce 2 '^allreduce: 2 ranks, sum 3 on every rank: OK$'
check allreduce 3 '^allreduce: 3 ranks, sum 6 on every rank: OK$'
check futures 2 '^futures: 4 allreduces, 4 continuations, app tasks on one arena: OK$'
check plan_loop 2 '^plan_loop: 100 starts of one persistent allreduce: OK$'
check plan_loop 3 '^plan_loop: 100 starts of one persistent allreduce: OK$'
check halo 2 '^halo: 2 ranks, 20 exchanges, ghosts verified: OK$'
check halo 3 '^halo: 3 ranks, 20 exchanges, ghosts verified: OK$'
check flow_graph 2 '^flow_graph: 8 allreduces as async nodes, in order: OK$'
check survive 3 '^survive: rank 0 done: 60 iterations verified, 3 members, 0 shrink\(s\)$'
# The runtime adapters' examples: required when strata installed the adapter (its header is there).
if [[ -f "$work/prefix/include/strata/starpu.hpp" ]]; then
  # fast_unwind_on_malloc=0: see tests/runtimes/test_runtimes.cpp (StarPU's hwloc plugin under LeakSanitizer).
  STARPU_SILENT=1 ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0" check starpu 2 '^starpu: 2 ranks, 4 allreduces between StarPU tasks, sums verified: OK$'
else
  echo "starpu: strata::starpu not installed (StarPU 1.3 not found at configure time), not run"
fi
if [[ -f "$work/prefix/include/strata/openmp.hpp" ]]; then
  check openmp 2 '^openmp: 2 ranks, 8 allreduces as detached tasks, sums verified: OK$'
  check openmp 3 '^openmp: 3 ranks, 8 allreduces as detached tasks, sums verified: OK$'
else
  echo "openmp: strata::openmp not installed (no OpenMP at configure time), not run"
fi
# strata inside an MPI program, under the MPI's own launcher (not under sanitizers: Open MPI's
# plugins are not LeakSanitizer-clean, see .ci/run).
if [[ -x "$work/examples/mpi_interop/mpi_interop" && -z "$flags" ]] && command -v mpirun >/dev/null &&
  command -v timeout >/dev/null; then
  launch=(mpirun -n 2)
  if mpirun --version 2>&1 | grep -q "Open MPI"; then launch=(mpirun --allow-run-as-root --oversubscribe -n 2); fi
  rc=0
  out=$(timeout 90 "${launch[@]}" "$work/examples/mpi_interop/mpi_interop" 2>&1) || rc=$?
  printf 'mpi_interop under %s (exit %s): %s\n' "${launch[*]}" "$rc" "$out"
  if [[ $rc -ne 0 ]] || ! grep -Eq '^mpi_interop: 2 ranks, strata allreduce == MPI_Allreduce: OK$' <<<"$out"; then
    echo "FAILED: mpi_interop" >&2
    fail=1
  fi
else
  echo "mpi_interop: not built or no mpirun here (strata::mpi needs an MPI), not run"
fi
exit $fail
