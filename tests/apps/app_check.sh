#!/usr/bin/env bash
# Runs one small application instance and checks its result.
#   app_check.sh asp            -- COMMAND...  exit 0 and "asp: check: 0 mismatches ... OK"
#   app_check.sh fft3d          -- COMMAND...  exit 0, "fft3d: check OK", every printed error < 1e-10,
#                                              a check line for each of blocking, overlap, pipelined
#   app_check.sh fft3d:M1,M2    -- COMMAND...  the same with check lines for exactly modes M1, M2
#   app_check.sh fft3d-cpu:B    -- COMMAND...  exit 0, a timing and a `cpu` line per mode, CPU time > 0,
#                                              and each mode's sent_mb equal to B (the transposes' bytes)
#   app_check.sh cholesky[:XxY] -- COMMAND...  exit 0, "cholesky: check ...: OK", a result line (and grid XxY)
#   app_check.sh 'error:REGEX'  -- COMMAND...  nonzero exit (not a timeout) and output matching REGEX
# COMMAND carries its own timeout (strata-run --timeout, or timeout(1) for mpirun).
set -u
kind=$1
shift
[ "${1:-}" = "--" ] && shift
# StarPU and the reference BLAS are built without frame pointers: under ASan,
# LeakSanitizer's fast unwinder stops inside them, the stack shows
# "<unknown module>" and lsan_suppressions.txt's libstarpu entry cannot match
# (tests/runtimes does the same for its StarPU ranks).
case $kind in
  cholesky*) [ -n "${ASAN_OPTIONS:-}" ] && export ASAN_OPTIONS="$ASAN_OPTIONS:fast_unwind_on_malloc=0" ;;
esac
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
fail() {
  echo "app_check: FAILED: $*" >&2
  exit 1
}
[ $rc -eq 124 ] && fail "timed out"
case $kind in
  asp)
    [ $rc -eq 0 ] || fail "exit status $rc"
    grep -Eq '^asp: check: 0 mismatches .*: OK$' <<<"$out" || fail "no successful check line"
    [ "$(grep -c '^asp: \(blocking\|pipelined\) ' <<<"$out")" -eq 2 ] || fail "expected timings of both modes"
    ;;
  fft3d | fft3d:*)
    [ $rc -eq 0 ] || fail "exit status $rc"
    grep -q '^fft3d: check OK' <<<"$out" || fail "no 'fft3d: check OK'"
    modes=blocking,overlap,pipelined
    [ "$kind" != fft3d ] && modes=${kind#fft3d:}
    lines=$(grep -E '^fft3d: check (blocking|overlap|pipelined|then|openmp) *:' <<<"$out")
    [ "$(wc -l <<<"$lines")" -eq "$(tr ',' '\n' <<<"$modes" | wc -l)" ] || fail "expected check lines for $modes"
    for m in ${modes//,/ }; do
      grep -Eq "^fft3d: check $m *:" <<<"$lines" || fail "no check line for mode $m"
      grep -Eq "^fft3d: $m +[0-9]" <<<"$out" || fail "no timing line for mode $m"
    done
    grep -q 'vs FFTW 3D' <<<"$lines" || fail "small grid not compared with the FFTW 3D reference"
    # every error printed (numbers like 3.1e-16) must be below 1e-10
    for e in $(grep -Eo '[0-9]\.[0-9]+e[-+][0-9]+' <<<"$lines"); do
      awk -v e="$e" 'BEGIN { exit !(e + 0 < 1e-10) }' || fail "error $e is not below 1e-10"
    done
    ;;
  fft3d-cpu:*)
    [ $rc -eq 0 ] || fail "exit status $rc"
    want=${kind#fft3d-cpu:}
    cpu=$(grep -E '^fft3d: cpu [a-z]+ +user_ms [0-9.]+ sys_ms [0-9.]+ irq_ms [0-9.]+ sent_mb [0-9.]+' <<<"$out")
    [ -n "$cpu" ] || fail "no cpu line"
    # (user + system: the kernel splits a short run's time between them by tick samples)
    while read -r _ _ mode _ user _ sys _ _ _ sent _; do
      grep -Eq "^fft3d: $mode +[0-9]" <<<"$out" || fail "no timing line for mode $mode"
      awk -v u="$user" -v s="$sys" 'BEGIN { exit !(u + s > 0) }' || fail "mode $mode: CPU time $user + $sys is not positive"
      [ "$sent" = "$want" ] || fail "mode $mode: sent_mb $sent, expected $want"
    done <<<"$cpu"
    ;;
  cholesky | cholesky:*)
    [ $rc -eq 0 ] || fail "exit status $rc"
    grep -Eq '^cholesky: check .*: OK$' <<<"$out" || fail "no successful check line"
    grep -Eq '^cholesky: result mode=strata time_ms=[0-9.]+ gflops=[0-9.]+' <<<"$out" || fail "no result line"
    if [ "$kind" != cholesky ]; then
      grep -Eq "^cholesky: .*, grid ${kind#cholesky:} " <<<"$out" || fail "not run on the grid ${kind#cholesky:}"
    fi
    ;;
  error:*)
    [ $rc -ne 0 ] || fail "expected a failure, got exit status 0"
    grep -Eq "${kind#error:}" <<<"$out" || fail "output does not match '${kind#error:}'"
    ;;
  *) fail "unknown kind '$kind'" ;;
esac
echo "app_check: OK"
