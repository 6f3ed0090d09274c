#!/usr/bin/env bash
# Builds with gcc sanitizers in their own build dirs and runs ctest there.
#   scripts/sanitize.sh [asan|tsan|all] [ctest args...]
# asan: AddressSanitizer + UndefinedBehaviorSanitizer (incl. LeakSanitizer)
#       in build-asan/; tsan: ThreadSanitizer in build-tsan/. Extra arguments
# go to ctest (default `-L 'unit|integration'`, e.g. `scripts/sanitize.sh
# asan -L e2e`). Exits non-zero if a build or any test fails.
# Env: SANITIZE_TARGETS (space-separated cmake targets to build instead of
# all; e.g. only the test programs a label needs). ccache is used when
# installed (set CCACHE_DISABLE=1 for a cold build). OUTBOX_TEST_TIME_SCALE
# (a whole number): how many times the integration and e2e tests' time
# budgets are multiplied (their ctest TIMEOUT and the waits inside them,
# tests/CMakeLists.txt); default 3 for asan, 6 for tsan, whose services run
# that much slower than a normal build's.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-asan}"
shift || true
(($# > 0)) || set -- -L 'unit|integration'
bash scripts/install_deps.sh

launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi

run() {  # run NAME FLAGS TIME_SCALE: configure, build and test build-NAME/
  local dir="build-$1" flags="$2" scale="${OUTBOX_TEST_TIME_SCALE:-$3}"
  shift 3  # the rest goes to ctest
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++ "${launcher[@]}" \
    -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
    -DCMAKE_EXE_LINKER_FLAGS="$flags" -DOUTBOX_TEST_TIME_SCALE="$scale" || return
  # shellcheck disable=SC2086  # SANITIZE_TARGETS is a list
  cmake --build "$dir" -j"$(nproc)" ${SANITIZE_TARGETS:+--target $SANITIZE_TARGETS} || return
  ctest --test-dir "$dir" --output-on-failure --timeout 900 "$@"
}

# The first report ends the process with an error (the test fails) and
# prints the stack; the services the e2e tests spawn inherit these too.
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:check_initialization_order=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:history_size=4:suppressions=$PWD/scripts/tsan.supp"

asan="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
tsan="-fsanitize=thread -fno-omit-frame-pointer"
status=0
case "$mode" in
  asan) run asan "$asan" 3 "$@" || status=$? ;;
  tsan) run tsan "$tsan" 6 "$@" || status=$? ;;
  all)
    run asan "$asan" 3 "$@" || status=$?
    run tsan "$tsan" 6 "$@" || status=$? ;;
  *) echo "usage: $0 [asan|tsan|all] [ctest args...]" >&2; exit 2 ;;
esac
exit "$status"
