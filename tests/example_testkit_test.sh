#!/usr/bin/env bash
# The test kit as an adopter gets it: BUILD's package installed into a temp
# prefix without the kit (component Unspecified) and then with it (component
# testkit); examples/testkit_adopter configured, built and tested against
# that prefix alone. Also: the package without the kit is found with
# GoogleTest out of reach and defines no outbox::testkit, and asking it for
# the kit fails.
#   bash tests/example_testkit_test.sh BUILD
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: example_testkit_test.sh BUILD}" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() {  # LOG COMMAND...: quiet unless it fails
  local log=$1; shift
  "$@" >"$log" 2>&1 || { cat "$log" >&2; echo "FAIL: $*" >&2; exit 1; }
}
run "$tmp/install.log" cmake --install "$build" --prefix "$tmp/bare" --component Unspecified
cp -a "$tmp/bare" "$tmp/prefix"
run "$tmp/install-kit.log" cmake --install "$build" --prefix "$tmp/prefix" --component testkit

# The package alone needs no GoogleTest; asking for the kit it lacks fails.
mkdir "$tmp/plain"
cat >"$tmp/plain/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.16)
project(plain LANGUAGES CXX)
find_package(outbox CONFIG REQUIRED ${WANT})
if(TARGET outbox::testkit OR TARGET GTest::gtest)
  message(FATAL_ERROR "the package without COMPONENTS testkit brought in the test kit or GoogleTest")
endif()
CMAKE
for prefix in bare prefix; do
  run "$tmp/plain-$prefix.log" cmake -S "$tmp/plain" -B "$tmp/plain-$prefix" \
    -DCMAKE_PREFIX_PATH="$tmp/$prefix" -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON \
    -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON
done
if cmake -S "$tmp/plain" -B "$tmp/plain-want" -DCMAKE_PREFIX_PATH="$tmp/bare" \
     -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON -DWANT="COMPONENTS;testkit" >"$tmp/want.log" 2>&1; then
  echo "FAIL: COMPONENTS testkit was found in a prefix without the kit" >&2; exit 1
fi
grep -q "test kit is not installed" "$tmp/want.log" \
  || { cat "$tmp/want.log" >&2; echo "FAIL: the missing kit is not named" >&2; exit 1; }

# The adopter's build, with the build's compiler, flags (sanitizers), build
# type and launcher, against the prefix alone.
cache() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }
start=$SECONDS
run "$tmp/configure.log" cmake -S "$root/examples/testkit_adopter" -B "$tmp/build" \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON \
  -DCMAKE_CXX_COMPILER="$(cache CMAKE_CXX_COMPILER)" -DCMAKE_CXX_FLAGS="$(cache CMAKE_CXX_FLAGS)" \
  -DCMAKE_EXE_LINKER_FLAGS="$(cache CMAKE_EXE_LINKER_FLAGS)" \
  -DCMAKE_BUILD_TYPE="$(cache CMAKE_BUILD_TYPE)" \
  -DCMAKE_CXX_COMPILER_LAUNCHER="$(cache CMAKE_CXX_COMPILER_LAUNCHER)"
run "$tmp/build.log" cmake --build "$tmp/build" -j2
built=$SECONDS
"$tmp/build/rewards_test" --gtest_brief=1
echo "OK: examples/testkit_adopter built in $((built - start)) s and passed on the installed kit"
