#!/usr/bin/env bash
# consumer_test.sh BUILD_DIR CONSUMER_SRC
set -euo pipefail
build=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
# 1. CMake package
flags=${STRATA_CONSUMER_FLAGS:-}
cmake -S "$src" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="$flags" >/dev/null
cmake --build "$work/cmake-build" -j 2 >/dev/null
out=$("$work/cmake-build/consumer")
echo "cmake consumer: $out"
[[ "$out" == "strata "* ]] || { echo "unexpected output from the CMake consumer" >&2; exit 1; }
# 2. pkg-config
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig:$work/prefix/lib/x86_64-linux-gnu/pkgconfig"
# The .pc file leaves the language standard to the consumer.
if pkg-config --cflags strata | grep -q -- '-std='; then echo "strata.pc forces a -std= flag" >&2; exit 1; fi
# shellcheck disable=SC2046,SC2086
c++ -std=c++17 $flags "$src/main.cpp" -o "$work/pc-consumer" $(pkg-config --cflags --libs strata)
out=$("$work/pc-consumer")
echo "pkg-config consumer: $out"
[[ "$out" == "strata "* ]] || { echo "unexpected output from the pkg-config consumer" >&2; exit 1; }
