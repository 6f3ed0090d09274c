#!/usr/bin/env bash
# The outbox libraries as a package: BUILD is installed into a temp prefix,
# examples/order_service and examples/library_snippets (the code of
# docs/library.md) are configured and built there on their own
# (find_package(outbox) from that prefix only), and run against the test
# run's RabbitMQ node: an OrderPlaced relayed, its reply closing the row;
# the snippets' producer, consumer and recovery booking each order once,
# every message signed; the page's test of the consumer's handler passes
# over the installed test kit. The snippets, which do not ask for the
# component postgres, configure without looking for libpq
# (examples/pg_adopter, which does, is example.pg_adopter's).
#   bash tests/example_package_test.sh BUILD   (through ctest: the broker fixture)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: example_package_test.sh BUILD}" && pwd)
[[ -n ${OUTBOX_TEST_BROKER_DIR:-} ]] || { echo "FAIL: OUTBOX_TEST_BROKER_DIR is not set (run through ctest)" >&2; exit 1; }
url=$(cat "$OUTBOX_TEST_BROKER_DIR/amqp_url")

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" || { cat "$tmp/install.log" >&2; exit 1; }
# The build's compiler, flags (sanitizers), build type and launcher (ccache):
# the example compiles as the libraries did.
cache() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }
configure() {  # SOURCE BUILD
  cmake -S "$1" -B "$2" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
    -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON -DCMAKE_CXX_COMPILER="$(cache CMAKE_CXX_COMPILER)" \
    -DCMAKE_CXX_FLAGS="$(cache CMAKE_CXX_FLAGS)" -DCMAKE_EXE_LINKER_FLAGS="$(cache CMAKE_EXE_LINKER_FLAGS)" \
    -DCMAKE_BUILD_TYPE="$(cache CMAKE_BUILD_TYPE)" \
    -DCMAKE_CXX_COMPILER_LAUNCHER="$(cache CMAKE_CXX_COMPILER_LAUNCHER)" >"$tmp/configure.log" \
    || { cat "$tmp/configure.log" >&2; exit 1; }
  cmake --build "$2" -j2
}
configure "$root/examples/order_service" "$tmp/build"
ORDER_TEST_AMQP_URL=$url "$tmp/build/order_service_test"
configure "$root/examples/library_snippets" "$tmp/snippets"
if grep -q '^PostgreSQL_LIBRARY' "$tmp/snippets/CMakeCache.txt"; then
  echo "FAIL: find_package(outbox) without COMPONENTS postgres looked for libpq" >&2; exit 1
fi
# The page's test of the consumer's handler, over the installed test kit.
[[ -x $tmp/snippets/shipping_test ]] || { echo "FAIL: shipping_test was not built (no test kit installed?)" >&2; exit 1; }
"$tmp/snippets/shipping_test"
mkdir "$tmp/run"
# One key set for the snippets' process: every message signed and checked.
printf 'k1 %s\n' "$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')" >"$tmp/keys"
"$tmp/snippets/library_snippets" "$url" "$tmp/run" "$tmp/keys"
