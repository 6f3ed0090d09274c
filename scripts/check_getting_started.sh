#!/usr/bin/env bash
# Runs docs/getting-started.md as a reader would: every ```sh block, in
# order, in one bash (set -euo pipefail) from the repository root. It runs in
# a network namespace of its own, so the page's fixed ports (50051-50053)
# and its broker are private to this run and cannot meet another process's;
# whatever the page leaves running is killed by pid at the end. Needs root
# (unshare --net). Exit status: the page's.
#
#   scripts/check_getting_started.sh [PAGE]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PAGE=$(realpath "${1:-$ROOT/docs/getting-started.md}")

if [[ ${OUTBOX_PAGE_NETNS:-} != "$PAGE" ]]; then
  [[ $(id -u) == 0 ]] || { echo "check_getting_started: needs root (unshare --net)" >&2; exit 1; }
  command -v ip >/dev/null || { echo "check_getting_started: needs ip (iproute2; scripts/install_deps.sh)" >&2; exit 1; }
  exec unshare --net --fork -- env OUTBOX_PAGE_NETNS="$PAGE" bash "$0" "$PAGE"
fi

ip link set lo up
script=$(mktemp -t getting-started.XXXXXX.sh)
# The page's sh blocks, and nothing else: ```text, ```console and the like
# are shown, not run.
awk '/^```sh[[:space:]]*$/ { on = 1; next } /^```/ { if (on) print ""; on = 0; next } on' \
  "$PAGE" >"$script"
[[ -s $script ]] || { echo "check_getting_started: no sh blocks in $PAGE" >&2; exit 1; }

netns=$(readlink /proc/self/ns/net)
cleanup() {
  local rc=$? proc pid
  for proc in /proc/[0-9]*; do
    pid=${proc#/proc/}
    [[ $pid == "$$" || $pid == "$PPID" ]] && continue
    [[ $(readlink "$proc/ns/net" 2>/dev/null) == "$netns" ]] && kill -KILL "$pid" 2>/dev/null
  done
  rm -f "$script"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cd "$ROOT"
echo "check_getting_started: running $(grep -c . "$script") lines of $PAGE"
bash -euo pipefail -x "$script"
echo "PASS: every command of ${PAGE#"$ROOT"/} ran"
