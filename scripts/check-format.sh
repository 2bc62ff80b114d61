#!/usr/bin/env bash
# Fails if any C++ file in the tree is not clang-formatted (.clang-format).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bad=$(git ls-files '*.cpp' '*.hpp' '*.h' | xargs -r clang-format --dry-run -Werror 2>&1 | grep -c 'error:' || true)
if [ "$bad" != 0 ]; then
  echo "check-format: clang-format would change files; run: git ls-files '*.cpp' '*.hpp' | xargs clang-format -i" >&2
  git ls-files '*.cpp' '*.hpp' '*.h' | xargs -r clang-format --dry-run 2>&1 | grep 'warning:' | cut -d: -f1 | sort -u >&2
  exit 1
fi
echo "check-format: clean"
