#!/usr/bin/env bash
# PostgreSQL's floor (bench/pg_floor.cc) on private servers of
# scripts/postgres_node.sh, started in a temp dir of their own and stopped
# on exit: a primary alone, then the same primary with a synchronous standby
# (remote_apply: each commit is applied on the standby before it is
# acknowledged), the standby's server CPU counted with the primary's.
#
#   scripts/bench_pg_floor.sh [pg_floor flags...]     e.g. --seconds=10 --parallel=8 --group=64
#
# BENCH_BUILD_DIR picks the build (default build/, binaries in its bin/);
# PG_FLOOR_STANDBY=0 skips the standby.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
node=$root/scripts/postgres_node.sh
bin=${BENCH_BUILD_DIR:-$root/build}/bin/pg_floor
[[ -x $bin ]] || { echo "bench_pg_floor: no $bin (cmake --build build --target pg_floor)" >&2; exit 1; }

base=$(mktemp -d "${TMPDIR:-/tmp}/pg-floor.XXXXXX")
chmod 755 "$base"  # the server's user (postgres, under root) must reach it
P=$base/primary
S=$base/standby
cleanup() {
  bash "$node" stop "$S" >/dev/null 2>&1 || true
  bash "$node" stop "$P" >/dev/null 2>&1 || true
  rm -rf "$base"
}
trap cleanup EXIT

echo "bench_pg_floor: commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)," \
  "$(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
bash "$node" fresh "$P" >/dev/null
"$(bash "$node" env "$P" | sed -n 's/^export PG_BIN=//p')/postgres" --version
echo "== primary alone"
"$bin" --conninfo="$(bash "$node" url "$P")" --server_pids="$(bash "$node" pid "$P")" "$@"
if [[ ${PG_FLOOR_STANDBY:-1} != 0 ]]; then
  bash "$node" standby "$P" "$S" >/dev/null
  echo "== primary and its synchronous standby (remote_apply)"
  "$bin" --conninfo="$(bash "$node" url "$P")" \
    --server_pids="$(bash "$node" pid "$P"),$(bash "$node" pid "$S")" "$@"
fi
echo "bench_pg_floor: load average $(cut -d' ' -f1-3 /proc/loadavg)"
