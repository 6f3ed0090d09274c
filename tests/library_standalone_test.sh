#!/usr/bin/env bash
# shared/ stands alone: no file in it includes a service's code, and
# `cmake -S shared` configures without the rest of the tree (no gRPC, no
# service_kit), with the library's test binaries and the test kit as targets.
# Building and running them all is scripts/test_library.sh.
#   bash tests/library_standalone_test.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
status=0
services='payment_service|accounting_service|recovery_service|service_kit|checker|client|tools|proto|tests|examples|bench'
if grep -rnE "#include \"($services)/" "$root/shared"; then
  echo "FAIL: the files above in shared/ include code from outside the library"; status=1
fi
if grep -nE "outbox_(payment_db|service_kit|grpc|proto|cli|test_support)|_lib\b" "$root"/shared/CMakeLists.txt "$root"/shared/*/CMakeLists.txt; then
  echo "FAIL: shared/'s CMake files above link targets from outside the library"; status=1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! cmake -S "$root/shared" -B "$tmp/build" >"$tmp/configure.log" 2>&1; then
  cat "$tmp/configure.log"; echo "FAIL: shared/ does not configure on its own"; exit 1
fi
if grep -n "CMake Warning" -A5 "$tmp/configure.log"; then
  echo "FAIL: configuring shared/ alone warns"; status=1
fi
targets=$(cmake --build "$tmp/build" --target help)
for t in outbox_core outbox_workers outbox_sqlite outbox_amqp outbox_testing \
         outbox_core_unit_test outbox_workers_unit_test outbox_consumer_unit_test \
         outbox_contract_test shared_unit_test; do
  grep -qE "^\.\.\. $t\$" <<<"$targets" || { echo "FAIL: shared/ alone has no target $t"; status=1; }
done
[[ $status == 0 ]] && echo "OK: shared/ configures alone and includes nothing outside it"
exit $status
