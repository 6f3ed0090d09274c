#!/usr/bin/env bash
# Builds (installing missing packages first) and runs every test; extra
# arguments go to ctest (e.g. `scripts/test.sh -L unit`). Exits with ctest's status.
# Env: as scripts/build.sh (BUILD_TYPE, BUILD_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
exec ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure --timeout 600 "$@"
