#!/usr/bin/env bash
# docs/environment.md is generated from the STRATA_* registry
# (transport/src/env_registry.cpp) by `strata-info --env-markdown`.
#   scripts/gen-env-doc.sh [STRATA_INFO]          rewrite docs/environment.md
#   scripts/gen-env-doc.sh --check [STRATA_INFO]  exit 1 (with a diff) when it differs
# STRATA_INFO defaults to ${STRATA_BUILD_DIR:-build}/bin/strata-info.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
check=0
if [ "${1:-}" = "--check" ]; then
  check=1
  shift
fi
info="${1:-${STRATA_BUILD_DIR:-$here/build}/bin/strata-info}"
doc="$here/docs/environment.md"
if [ ! -x "$info" ]; then
  echo "gen-env-doc.sh: $info is not an executable (build strata-info first, or pass its path)" >&2
  exit 2
fi
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
"$info" --env-markdown >"$tmp"
if [ "$check" = 1 ]; then
  if ! diff -u "$doc" "$tmp"; then
    echo "gen-env-doc.sh: docs/environment.md is out of date with the registry; run scripts/gen-env-doc.sh" >&2
    exit 1
  fi
  echo "docs/environment.md is up to date"
else
  cp "$tmp" "$doc"
  echo "wrote $doc"
fi
