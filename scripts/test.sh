#!/usr/bin/env bash
# Builds (installing missing packages first) and runs every test; extra
# arguments go to ctest (e.g. `scripts/test.sh -L unit`). Exits with ctest's status.
# Two tests run at a time (CTEST_PARALLEL_LEVEL, default 2): they keep apart by
# queue names, ports and temporary directories, and those that restart the
# shared broker or must see no connection drop hold the `broker_node` lock.
# Env: as scripts/build.sh (BUILD_TYPE, BUILD_DIR), CTEST_PARALLEL_LEVEL.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
exec ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure --timeout 600 \
  --parallel "${CTEST_PARALLEL_LEVEL:-2}" "$@"
