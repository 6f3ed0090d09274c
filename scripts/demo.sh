#!/usr/bin/env bash
# One-command demo: installs missing packages, builds, starts a private
# RabbitMQ node and the services on free loopback ports (all state in a temp
# dir), runs build/bin/outbox_demo against them and prints its report.
#
#   scripts/demo.sh                 DEMO_PAYMENTS=1000 scripts/demo.sh
# Env: DEMO_PAYMENTS (300), DEMO_CONCURRENCY (8), DEMO_TIMEOUT (60s), KEEP=1 keeps
# the temp dir, SKIP_BUILD=1 uses the binaries already in BUILD_DIR (build).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

if [[ ${SKIP_BUILD:-0} != 1 ]]; then
  BUILD_TYPE=${BUILD_TYPE:-Release} bash scripts/build.sh
fi
BIN=$(cd "${BUILD_DIR:-build}/bin" && pwd)
for b in payment_service accounting_service outbox_demo; do
  [[ -x $BIN/$b ]] || { echo "demo: $BIN/$b is missing" >&2; exit 1; }
done

WORK=$(mktemp -d -t outbox-demo.XXXXXX)
pids=()
result=1

# shellcheck disable=SC2317  # invoked by the trap
cleanup() {
  trap - EXIT INT TERM
  local pid
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do  # give each up to 10 s to shut down cleanly
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  bash scripts/rabbitmq_node.sh stop "$WORK/broker" || true
  if [[ $result == 0 && ${KEEP:-0} != 1 ]]; then
    rm -rf "$WORK"
    echo "demo: removed $WORK (logs, databases); KEEP=1 keeps it"
  else
    echo "demo: logs and databases kept in $WORK (*.log, broker/log/)"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# free_port VAR: sets VAR to a free loopback port not handed out before in this run.
taken=" "
free_port() {
  local used=" " addr p _
  while read -r _ addr _; do
    if [[ $addr == *:* ]]; then used+="$((16#${addr##*:})) "; fi
  done < <(cat /proc/net/tcp /proc/net/tcp6 2>/dev/null)
  while :; do
    p=$((30100 + RANDOM % 2600))  # below the kernel's ephemeral range
    [[ $used$taken == *" $p "* ]] || break
  done
  taken+="$p "
  printf -v "$1" '%s' "$p"
}

# start_service NAME VAR=VALUE...: runs $BIN/NAME with that environment, logging to $WORK/NAME.log.
start_service() {
  local name=$1
  shift
  env "$@" "$BIN/$name" >"$WORK/$name.log" 2>&1 &
  pids+=("$!")
  echo "demo: started $name (pid $!), log $WORK/$name.log"
}

bash scripts/rabbitmq_node.sh start "$WORK/broker"
AMQP_URL=$(cat "$WORK/broker/amqp_url")
payment_port='' accounting_port='' recovery_port=''
free_port payment_port
free_port accounting_port
free_port recovery_port

start_service accounting_service AMQP_URL="$AMQP_URL" \
  ACCOUNTING_LISTEN="127.0.0.1:$accounting_port" ACCOUNTING_DB="$WORK/accounting.db"
start_service payment_service AMQP_URL="$AMQP_URL" \
  PAYMENT_LISTEN="127.0.0.1:$payment_port" PAYMENT_DB="$WORK/payment.db"
if [[ -x $BIN/recovery_service ]]; then
  start_service recovery_service AMQP_URL="$AMQP_URL" \
    RECOVERY_LISTEN="127.0.0.1:$recovery_port" PAYMENT_DB="$WORK/payment.db"
fi

set +e
"$BIN/outbox_demo" --payment_addr="127.0.0.1:$payment_port" \
  --accounting_addr="127.0.0.1:$accounting_port" --wait_healthy=60 \
  --count="${DEMO_PAYMENTS:-300}" --concurrency="${DEMO_CONCURRENCY:-8}" \
  --timeout="${DEMO_TIMEOUT:-60s}"
result=$?
set -e
for pid in "${pids[@]}"; do
  kill -0 "$pid" 2>/dev/null || { echo "demo: service pid $pid died during the demo" >&2; result=1; }
done
exit "$result"
