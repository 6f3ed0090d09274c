#!/usr/bin/env bash
# Every C++ file of the tree is laid out as .clang-format says; prints the
# files that are not and how to fix them. Debian 12's clang-format 14 and
# Debian 13's clang-format 19 lay out the tree alike; where they would not
# (a few constructs), the code is written in a form both leave as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "clang-format is missing: bash scripts/install_deps.sh" >&2; exit 1; }
# The tree's own sources: not build outputs, not other worktrees' copies.
mapfile -t files < <(find . -type d \( -name 'build*' -o -name '.git' -o -name node_modules -o -name '.cache' \) -prune \
  -o \( -name '*.cc' -o -name '*.h' \) -type f -print | sort)
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if ((${#bad[@]})); then
  printf 'not formatted: %s\n' "${bad[@]}" >&2
  echo "fix: clang-format -i ${bad[*]}" >&2
  exit 1
fi
echo "${#files[@]} files formatted ($(clang-format --version | sed 's/^.*clang-format //'))"
