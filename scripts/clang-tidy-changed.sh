#!/usr/bin/env bash
# Developer check (not a CI stage): runs clang-tidy (.clang-tidy at the root)
# on the .cpp files changed relative to a base revision.
#   scripts/clang-tidy-changed.sh [BASE]        BASE defaults to main
#   STRATA_BUILD_DIR=build-debug scripts/clang-tidy-changed.sh   another build's compile_commands.json
# Changed = committed on this branch since it left BASE, staged, unstaged or
# untracked. Needs a configured build (CMAKE_EXPORT_COMPILE_COMMANDS, which
# scripts/setup.sh and every preset in CMakePresets.json turn on).
# Exit status: 0 clean or nothing to check, 1 clang-tidy found something, 2 set-up problem.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
base="${1:-main}"
build_dir="${STRATA_BUILD_DIR:-$here/build}"
tidy="${CLANG_TIDY:-}"
if [ -z "$tidy" ]; then
  for c in clang-tidy clang-tidy-16 clang-tidy-15 clang-tidy-14; do
    if command -v "$c" >/dev/null 2>&1; then tidy="$c"; break; fi
  done
fi
if [ -z "$tidy" ]; then
  echo "clang-tidy-changed: clang-tidy is not installed (Debian: sudo apt-get install -y clang-tidy)," >&2
  echo "  or set CLANG_TIDY=/path/to/clang-tidy" >&2
  exit 2
fi
if [ ! -f "$build_dir/compile_commands.json" ]; then
  echo "clang-tidy-changed: no $build_dir/compile_commands.json; configure first (bash scripts/setup.sh," >&2
  echo "  or cmake --preset release), or set STRATA_BUILD_DIR" >&2
  exit 2
fi
if ! git rev-parse --verify -q "$base^{commit}" >/dev/null; then
  echo "clang-tidy-changed: unknown base revision '$base'" >&2
  exit 2
fi
mapfile -t files < <({
  git diff --name-only --diff-filter=ACMR "$(git merge-base "$base" HEAD)" -- '*.cpp'
  git diff --name-only --diff-filter=ACMR -- '*.cpp'
  git diff --name-only --cached --diff-filter=ACMR -- '*.cpp'
  git ls-files --others --exclude-standard -- '*.cpp'
} | sort -u)
# Only files the build compiles (compile_commands.json names them by absolute path).
checked=()
for f in "${files[@]}"; do
  [ -n "$f" ] && [ -f "$f" ] || continue
  if grep -qF "\"$here/$f\"" "$build_dir/compile_commands.json"; then
    checked+=("$f")
  else
    echo "clang-tidy-changed: skipping $f (not in $build_dir/compile_commands.json)" >&2
  fi
done
if [ ${#checked[@]} -eq 0 ]; then
  echo "clang-tidy-changed: no changed .cpp file against $base"
  exit 0
fi
echo "clang-tidy-changed: $("$tidy" --version | grep -m1 -o 'version [0-9.]*'), ${#checked[@]} file(s) against $base"
# GCC-only warning flags in the compile commands (-Wno-tsan) are unknown to clang.
rc=0
for f in "${checked[@]}"; do
  "$tidy" -p "$build_dir" --quiet --extra-arg=-Wno-unknown-warning-option "$f" || rc=1
done
[ "$rc" = 0 ] && echo "clang-tidy-changed: clean"
exit "$rc"
