#!/usr/bin/env bash
# The PostgreSQL snippets of docs/library.md as an adopter gets them: BUILD's
# package installed into a temp prefix as the page says (component
# Unspecified: the package without the test kit, outbox::postgres
# included), examples/pg_adopter configured and built against that prefix
# alone (find_package(outbox COMPONENTS postgres)), and run against a private
# PostgreSQL server of scripts/postgres_node.sh (the shop's database and
# shipping's) and the test run's RabbitMQ node: each order booked once,
# every row SENT, recovery started on the shop's database, every message
# signed.
#   bash tests/example_pg_adopter_test.sh BUILD   (through ctest: the broker fixture)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: example_pg_adopter_test.sh BUILD}" && pwd)
[[ -n ${OUTBOX_TEST_BROKER_DIR:-} ]] || { echo "FAIL: OUTBOX_TEST_BROKER_DIR is not set (run through ctest)" >&2; exit 1; }
url=$(cat "$OUTBOX_TEST_BROKER_DIR/amqp_url")
node=$root/scripts/postgres_node.sh

tmp=$(mktemp -d "${TMPDIR:-/tmp}/pg-adopter.XXXXXX")
chmod 755 "$tmp"  # the server's user (postgres, under root) must reach it
cleanup() {
  bash "$node" stop "$tmp/pg" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
run() {  # LOG COMMAND...: quiet unless it fails
  local log=$1; shift
  "$@" >"$log" 2>&1 || { cat "$log" >&2; echo "FAIL: $*" >&2; exit 1; }
}
run "$tmp/install.log" cmake --install "$build" --prefix "$tmp/prefix" --component Unspecified
# The build's compiler, flags (sanitizers), build type and launcher (ccache).
cache() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }
run "$tmp/configure.log" cmake -S "$root/examples/pg_adopter" -B "$tmp/build" \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON \
  -DCMAKE_CXX_COMPILER="$(cache CMAKE_CXX_COMPILER)" -DCMAKE_CXX_FLAGS="$(cache CMAKE_CXX_FLAGS)" \
  -DCMAKE_EXE_LINKER_FLAGS="$(cache CMAKE_EXE_LINKER_FLAGS)" \
  -DCMAKE_BUILD_TYPE="$(cache CMAKE_BUILD_TYPE)" \
  -DCMAKE_CXX_COMPILER_LAUNCHER="$(cache CMAKE_CXX_COMPILER_LAUNCHER)"
run "$tmp/build.log" cmake --build "$tmp/build" -j2

run "$tmp/pg.log" bash "$node" fresh "$tmp/pg"
eval "$(bash "$node" env "$tmp/pg")"  # PG_BIN, PGHOST, PGPASSFILE, ...
"$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -c "CREATE DATABASE shop" -c "CREATE DATABASE shipping"
db=$(bash "$node" url "$tmp/pg")  # postgresql://outbox@host:port/outbox?passfile=...
shop_db=${db/\/outbox\?//shop?}
shipping_db=${db/\/outbox\?//shipping?}
[[ $shop_db != "$db" ]] || { echo "FAIL: no database name in $db" >&2; exit 1; }

printf 'k1 %s\n' "$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')" >"$tmp/keys"
chmod 600 "$tmp/keys"
"$tmp/build/pg_adopter" "$shop_db" "$shipping_db" "$url" "$tmp/keys"
