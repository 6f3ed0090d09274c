#!/usr/bin/env bash
# Installs missing packages, then configures and builds into build/ (binaries
# in build/bin/). Env: BUILD_TYPE (RelWithDebInfo), BUILD_DIR (build).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
cmake -S . -B "${BUILD_DIR:-build}" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}"
cmake --build "${BUILD_DIR:-build}" -j"$(nproc)"
