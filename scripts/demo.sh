#!/usr/bin/env bash
# README command 1: set up, build, run the main multi-rank demo on this machine
# (4 ranks over 2 virtual hosts).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$here/scripts/setup.sh"
exec "$here/build/bin/strata-run" -n 4 --hosts 2 --timeout 120 --tag-output -- "$here/build/bin/strata-demo" "$@"
