#!/usr/bin/env bash
# The stranger's check of server reflection, run by hand (not part of
# scripts/test.sh: it needs Node and the npm registry). A Node client with
# none of our protos (@grpc/grpc-js and grpc-js-reflection-client, installed
# into BUILD_DIR/reflection_stranger, never into the repository) lists the
# services of each server through reflection v1 and v1alpha, resolves every
# one to its file descriptor, calls grpc.health.v1.Health/Check (SERVING) and
# one lookup per service of ours (NOT_FOUND) with clients built from those
# descriptors. See scripts/reflection_stranger/check.js.
#
#   scripts/reflection_stranger.sh                       # private broker + the three services, then the check
#   scripts/reflection_stranger.sh 127.0.0.1:50051 ...   # servers already running
#
# Env: SKIP_BUILD=1 uses the binaries already in BUILD_DIR (build); KEEP=1
# keeps the temp dir. Exit status 0 only if every check passed.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
SCRIPT=reflection_stranger
# shellcheck source=SCRIPTDIR/lib/services.sh
source "$ROOT/scripts/lib/services.sh"

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  if [[ $(id -u) == 0 ]]; then
    apt-get install -y -q nodejs npm >/dev/null
  else
    echo "$SCRIPT: needs node and npm (apt-get install nodejs npm)" >&2
    exit 1
  fi
fi
NODE_DIR=${BUILD_DIR:-build}/reflection_stranger
mkdir -p "$NODE_DIR"
cp scripts/reflection_stranger/package.json scripts/reflection_stranger/*.js "$NODE_DIR/"
if [[ ! -d $NODE_DIR/node_modules/grpc-js-reflection-client ]]; then
  (cd "$NODE_DIR" && npm install --no-audit --no-fund --loglevel=error >/dev/null)
fi

if (($# > 0)); then
  exec node "$NODE_DIR/check.js" "$@"
fi

build_binaries
WORK=$(mktemp -d -t outbox-reflection.XXXXXX)
result=1
# shellcheck disable=SC2317  # invoked by the trap
cleanup() {
  trap - EXIT INT TERM
  stop_services
  finish_work "*.log"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start_broker
service_envs
for name in accounting_service payment_service recovery_service; do
  start_service "$name" || { echo "$SCRIPT: $name did not start" >&2; exit 1; }
done
node "$NODE_DIR/check.js" "127.0.0.1:$payment_port" "127.0.0.1:$accounting_port" "127.0.0.1:$recovery_port"
result=0
