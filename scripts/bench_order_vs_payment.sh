#!/usr/bin/env bash
# Committed messages per second of two producers on one machine, in one run,
# on one private RabbitMQ node, interleaved (payment, order, payment, order...):
#   payment  payment_service at saturation: outbox_bench's closed loop
#            (PAYMENT_CONCURRENCY CreatePayment calls in flight over gRPC),
#            accounting_service answering; the figure is outbox_bench's
#            create_per_s (payments whose CreatePayment returned OK per second
#            of the measured window), as scripts/bench.sh's throughput run.
#   order    examples/order_service (the example's own code on the library's
#            outbox::Producer): bench/order_bench, ORDER_THREADS threads
#            calling OrderService::Place, a library consumer answering; the
#            figure is its committed orders per second of the measured window.
# Each run has fresh databases and queues. Prints every run's figure, the
# median of each side and order/payment. It prints figures and asserts
# nothing about them; figures swing with the machine's load (printed
# before and after each run).
#
# Usage: scripts/bench_order_vs_payment.sh [ROUNDS (3)]
# Env (defaults in brackets):
#   BENCH_BIN [build/bin]       payment_service, accounting_service, outbox_bench, order_bench
#   BENCH_DURATION [10s]        measured phase of each run
#   BENCH_WARMUP [3s]           warm-up before it (not counted)
#   PAYMENT_CONCURRENCY [64]    outbox_bench's calls in flight (scripts/bench.sh's default)
#   ORDER_THREADS [32]          order_bench's callers of Place
#   BENCH_KEEP=1                keep the temp dir (logs, reports)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROUNDS=${1:-3}
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "bench_order_vs_payment: ROUNDS must be a positive number" >&2; exit 2; }
BIN=$(cd "${BENCH_BIN:-$ROOT/build/bin}" && pwd)
DURATION=${BENCH_DURATION:-10s}
WARMUP=${BENCH_WARMUP:-3s}
CONCURRENCY=${PAYMENT_CONCURRENCY:-64}
THREADS=${ORDER_THREADS:-32}
for b in payment_service accounting_service outbox_bench order_bench; do
  [[ -x $BIN/$b ]] || { echo "bench_order_vs_payment: $BIN/$b is missing (build it)" >&2; exit 2; }
done
command -v jq >/dev/null || bash "$ROOT/scripts/install_deps.sh"

say() { echo "bench_order_vs_payment: $*" >&2; }
die() { say "$*"; exit 1; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/order_vs_payment.XXXXXX")
BROKER_DIR=$WORK/broker
PIDS=()
# The binaries are copied first: a rebuild of BENCH_BIN during the run
# changes neither side.
mkdir "$WORK/bin"
for b in payment_service accounting_service outbox_bench order_bench; do cp "$BIN/$b" "$WORK/bin/"; done
BIN_FROM=$BIN BIN=$WORK/bin

stop_pid() {  # SIGTERM, wait up to 20 s, then SIGKILL
  local pid=$1 _
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
stop_services() {
  local pid
  for pid in "${PIDS[@]}"; do stop_pid "$pid"; done
  PIDS=()
}
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  stop_services
  "$ROOT/scripts/rabbitmq_node.sh" stop "$BROKER_DIR" >/dev/null 2>&1 || true
  if [[ ${BENCH_KEEP:-0} == 1 || $rc != 0 ]]; then say "kept $WORK"; else rm -rf "$WORK"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# start_service NAME DIR ENV...: BIN/NAME with its log in DIR, until it logs
# "<NAME>_started ... port=N"; sets PORT and PID.
start_service() {
  local name=$1 dir=$2 log line deadline
  shift 2
  log=$dir/$name.log
  env "$@" "$BIN/$name" >>"$log" 2>&1 </dev/null &
  PID=$!
  PIDS+=("$PID")
  deadline=$((SECONDS + 30))
  until line=$(grep -m1 "${name}_started" "$log" 2>/dev/null); do
    if ! kill -0 "$PID" 2>/dev/null || ((SECONDS > deadline)); then
      tail -n 20 "$log" >&2 || true
      die "$name did not start (log: $log)"
    fi
    sleep 0.1
  done
  PORT=$(sed -nE 's/.* port=([0-9]+).*/\1/p' <<<"$line")
  [[ $PORT =~ ^[0-9]+$ && $PORT != 0 ]] || die "$name: no port in: $line"
}

load() { cut -d' ' -f1-3 /proc/loadavg; }

# payment ROUND: payment_service and accounting_service on fresh files and
# queues, outbox_bench's closed loop; appends create_per_s to PAYMENT.
PAYMENT=()
payment() {
  local dir=$WORK/payment.$1 users=$BROKER_DIR/users acc_port acc_pid figure
  mkdir -p "$dir"
  local common=(PAY_QUEUE="obench.$1.PAY" ACC_QUEUE="obench.$1.ACC" MESSAGE_KEYS_FILE="$WORK/message.keys")
  start_service accounting_service "$dir" "${common[@]}" ACCOUNTING_DB="$dir/accounting.db" \
    AMQP_URL="$(cat "$users/outbox-accounting.url")" AMQP_PASSWORD_FILE="$users/outbox-accounting.password" \
    ACCOUNTING_LISTEN=127.0.0.1:0
  acc_port=$PORT acc_pid=$PID
  start_service payment_service "$dir" "${common[@]}" PAYMENT_DB="$dir/payment.db" \
    AMQP_URL="$(cat "$users/outbox-payment.url")" AMQP_PASSWORD_FILE="$users/outbox-payment.password" \
    PAYMENT_LISTEN=127.0.0.1:0
  echo "== round $1: payment_service, outbox_bench --concurrency=$CONCURRENCY (load average before: $(load))"
  "$BIN/outbox_bench" --label="payment-$1" --payment_addr="127.0.0.1:$PORT" \
    --accounting_addr="127.0.0.1:$acc_port" --payment_pid="$PID" --accounting_pid="$acc_pid" \
    --broker_pid="$(cat "$BROKER_DIR/rabbitmq.pid" 2>/dev/null || echo 0)" \
    --concurrency="$CONCURRENCY" --duration="$DURATION" --warmup="$WARMUP" --json=true \
    >"$dir/report.txt"
  stop_services
  figure=$(grep '^{' "$dir/report.txt" | tail -n1 | jq -r .create_per_s)
  [[ $figure != null && -n $figure ]] || die "no create_per_s in $dir/report.txt"
  grep -E 'create throughput|create latency|sustained payments|drain after' "$dir/report.txt" || true
  echo "  payment_service committed per second: $figure   (load average after: $(load))"
  PAYMENT+=("$figure")
}

# order ROUND: order_bench on fresh files and queues; appends committed_per_s to ORDER.
ORDER=()
order() {
  local dir=$WORK/order.$1 figure
  mkdir -p "$dir"
  echo "== round $1: order_service, order_bench --threads=$THREADS (load average before: $(load))"
  "$BIN/order_bench" --label="order-$1" --amqp_url="$(cat "$BROKER_DIR/amqp_url")" \
    --threads="$THREADS" --duration="$DURATION" --warmup="$WARMUP" --dir="$dir/files" --json=true \
    >"$dir/report.txt" 2>"$dir/order_bench.log"
  figure=$(grep '^{' "$dir/report.txt" | tail -n1 | jq -r .committed_per_s)
  [[ $figure != null && -n $figure ]] || die "no committed_per_s in $dir/report.txt"
  grep -v '^{' "$dir/report.txt" | tail -n +2
  echo "  order_service committed per second: $figure   (load average after: $(load))"
  ORDER+=("$figure")
}

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "order_service vs payment_service on $(hostname), $(nproc) cores, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "binaries from $BIN_FROM, built (UTC):$(for b in payment_service accounting_service outbox_bench order_bench; do
  printf ' %s %s' "$b" "$(date -u -r "$BIN_FROM/$b" +%H:%M:%S)"; done)"
echo "$ROUNDS rounds; $DURATION measured after $WARMUP warm-up"
echo "load average before: $(load)"
say "starting a private RabbitMQ node (takes ~15 s)"
"$ROOT/scripts/rabbitmq_node.sh" start "$BROKER_DIR" >/dev/null
(umask 077 && echo "bench $(openssl rand -hex 32)" >"$WORK/message.keys")

for ((round = 1; round <= ROUNDS; round++)); do
  payment "$round"
  order "$round"
done

p=$(median "${PAYMENT[@]}")
o=$(median "${ORDER[@]}")
echo
echo "committed messages per second, median of $ROUNDS interleaved rounds"
printf '  %-50s %10.0f   (%s)\n' "payment_service (outbox_bench, $CONCURRENCY in flight)" "$p" "${PAYMENT[*]}"
printf '  %-50s %10.0f   (%s)\n' "order_service (order_bench, $THREADS callers)" "$o" "${ORDER[*]}"
awk -v o="$o" -v p="$p" 'BEGIN { printf "  %-50s %10.2f\n", "order / payment", (p > 0 ? o / p : 0) }'
echo "load average after: $(load)"
