#!/usr/bin/env bash
# The outbox library alone: configures shared/ without any service's code,
# builds the libraries, the test kit and their tests, and runs them (all
# unit tests, no broker). Extra arguments go to ctest (e.g. `-R Relay`).
# Env: BUILD_TYPE (RelWithDebInfo), LIB_BUILD_DIR (build-lib), JOBS (nproc).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${LIB_BUILD_DIR:-build-lib}
cmake -S shared -B "$dir" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}"
cmake --build "$dir" -j"${JOBS:-$(nproc)}"
exec ctest --test-dir "$dir" --output-on-failure --timeout 600 "$@"
