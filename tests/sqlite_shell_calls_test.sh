#!/usr/bin/env bash
# Every call of the sqlite3 shell in scripts/ and tests/ either goes through
# scripts/lib/sqlite.sh (sqlite_write turns the shell's own checkpoint off;
# see there why) or is opened -readonly. Prints each offending line and
# exits 1 if one is found. Usage: sqlite_shell_calls_test.sh [ROOT]
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"
bad=0
while IFS= read -r hit; do
  file=${hit%%:*}
  rest=${hit#*:}
  line=${rest#*:}
  # The helper itself, this check, and the list of packages to install.
  [[ $file == scripts/lib/sqlite.sh || $file == tests/sqlite_shell_calls_test.sh ]] && continue
  [[ $file == scripts/install_deps.sh ]] && continue
  # Comments, `command -v sqlite3`, and words like sqlite3_... or .../sqlite3.h.
  [[ $line =~ ^[[:space:]]*# ]] && continue
  [[ $line =~ command\ -v\ sqlite3 ]] && continue
  # Python's sqlite3 module is not the shell (a script that writes a live
  # file through it sets PRAGMA wal_autocheckpoint=0 itself: scripts/netlab/lab.py).
  [[ $file == *.py && $line =~ ^[[:space:]]*import\ sqlite3[[:space:]]*$ ]] && continue
  [[ $line =~ sqlite3[[:space:]]+-readonly ]] && continue
  echo "not through scripts/lib/sqlite.sh and not -readonly: $hit"
  bad=1
done < <(grep -rnE '(^|[^[:alnum:]_./-])sqlite3([[:space:]]|$|\))' --include='*.sh' --include='*.bash' \
           --include='*.py' scripts tests .ci 2>/dev/null || true)
if ((bad)); then
  echo "FAIL: a shell that writes must be sqlite_write (PRAGMA wal_autocheckpoint=0)" >&2
  exit 1
fi
echo "ok: every sqlite3 shell call in scripts/ and tests/ is sqlite_write, sqlite_read or -readonly"
