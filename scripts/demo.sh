#!/usr/bin/env bash
# README command 1: set up, build, then run the main job on this machine:
# 4 ranks over 2 virtual hosts (shared memory inside a host, libfabric between
# them): the discovered topology, then a verified 3D FFT (fft3d --check).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$here/scripts/setup.sh"
bin="$here/build/bin"
"$bin/strata-run" -n 4 --hosts 2 --timeout 120 -- "$bin/strata-demo" --bytes 65536
if [ -x "$bin/fft3d" ]; then
  exec "$bin/strata-run" -n 4 --hosts 2 --timeout 300 -- "$bin/fft3d" --grid 32 --check "$@"
fi
echo "demo: fft3d was not built (FFTW missing?)" >&2
exit 1
