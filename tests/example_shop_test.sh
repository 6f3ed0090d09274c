#!/usr/bin/env bash
# A second system on the installed package, through faults: BUILD is
# installed into a temp prefix, examples/shop is built there on its own
# (find_package(outbox) from that prefix only), and its processes run against
# the test run's RabbitMQ node: shop_shipping and shop_recovery throughout,
# shop_orders placing orders while
#   a. the node is stopped and started again (rabbitmq_node.sh stop/start),
#   b. shop_shipping is stopped for 10 s and started again,
#   c. shop_orders is SIGKILLed mid-range and restarted to finish it,
#   d. shop_orders is SIGKILLed while the node is down, so that the orders it
#      committed meanwhile reach shipping only through shop_recovery.
# Then shop_check must find every order shipped exactly once and every outbox
# row SENT. Prints how long each phase took; deadlines only catch a hang.
#   bash tests/example_shop_test.sh BUILD   (through ctest: the broker fixture)
# SHOP_BUILD_JOBS sets the build's parallelism (default 2); SHOP_TEST_LOGS=DIR
# keeps the processes' logs there.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: example_shop_test.sh BUILD}" && pwd)
[[ -n ${OUTBOX_TEST_BROKER_DIR:-} ]] || { echo "FAIL: OUTBOX_TEST_BROKER_DIR is not set (run through ctest)" >&2; exit 1; }
broker_dir=$OUTBOX_TEST_BROKER_DIR
url=$(cat "$broker_dir/amqp_url")
node_script=$root/scripts/rabbitmq_node.sh
scale=${OUTBOX_TEST_TIME_SCALE:-1}  # sanitizer builds: longer deadlines (tests/CMakeLists.txt)

tmp=$(mktemp -d)
run=$tmp/run
mkdir "$run"
queue=shop.orders.$$.$RANDOM  # this run's own queues: nothing left over from another run
pids=()                       # every process started, stopped on exit
broker_down=0

cleanup() {
  local rc=$? pid _
  if ((broker_down)); then bash "$node_script" start "$broker_dir" >>"$run/broker.log" 2>&1 || true; fi
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  if ((rc != 0)); then
    for log in "$run"/*.log; do
      [[ -f $log ]] || continue
      echo "--- last lines of $(basename "$log")" >&2
      tail -n 15 "$log" >&2
    done
  fi
  if [[ -n ${SHOP_TEST_LOGS:-} ]]; then
    mkdir -p "$SHOP_TEST_LOGS"
    cp "$run"/*.log "$SHOP_TEST_LOGS"/ 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 143' TERM  # a signal ends the script through cleanup too
trap 'exit 130' INT

fail() { echo "FAIL: $*" >&2; exit 1; }
now() { echo "$EPOCHREALTIME"; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# --- Build examples/shop against the installed package alone.
cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" || { cat "$tmp/install.log" >&2; exit 1; }
# The build's compiler, flags (sanitizers), build type and launcher (ccache).
cache() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }
cmake -S "$root/examples/shop" -B "$tmp/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON -DCMAKE_CXX_COMPILER="$(cache CMAKE_CXX_COMPILER)" \
  -DCMAKE_CXX_FLAGS="$(cache CMAKE_CXX_FLAGS)" -DCMAKE_EXE_LINKER_FLAGS="$(cache CMAKE_EXE_LINKER_FLAGS)" \
  -DCMAKE_BUILD_TYPE="$(cache CMAKE_BUILD_TYPE)" \
  -DCMAKE_CXX_COMPILER_LAUNCHER="$(cache CMAKE_CXX_COMPILER_LAUNCHER)" >"$tmp/configure.log" \
  || { cat "$tmp/configure.log" >&2; exit 1; }
cmake --build "$tmp/build" -j "${SHOP_BUILD_JOBS:-2}" >"$tmp/build.log" || { cat "$tmp/build.log" >&2; exit 1; }
bin=$tmp/build

# --- The processes, every message signed with one key set.
keys=$tmp/message_keys
printf 'shop-1 %s\n' "$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')" >"$keys"
chmod 600 "$keys"
# Secure by default: without --message_keys or --allow_unsigned a role
# refuses to start.
if refused=$("$bin/shop_shipping" --amqp_url="$url" --db="$tmp/refused.db" 2>&1); then
  fail "shop_shipping started with no message keys"
fi
grep -q 'no message keys' <<<"$refused" || fail "shop_shipping with no message keys: $refused"
start_shipping() {
  "$bin/shop_shipping" --amqp_url="$url" --db="$run/shipping.db" --queue="$queue" --message_keys="$keys" \
    >>"$run/shipping.log" 2>&1 &
  shipping_pid=$!
  pids+=("$shipping_pid")
}
start_recovery() {
  "$bin/shop_recovery" --amqp_url="$url" --db="$run/shop.db" --queue="$queue" --message_keys="$keys" \
    >>"$run/recovery.log" 2>&1 &
  recovery_pid=$!
  pids+=("$recovery_pid")
}
start_orders() {  # FIRST COUNT PACE_MS
  echo "=== shop_orders --first=$1 --orders=$2 --pace_ms=$3" >>"$run/orders.log"
  "$bin/shop_orders" --amqp_url="$url" --db="$run/shop.db" --queue="$queue" --message_keys="$keys" \
    --first="$1" --orders="$2" --pace_ms="$3" >>"$run/orders.log" 2>&1 &
  orders_pid=$!
  pids+=("$orders_pid")
}
check() { "$bin/shop_check" --shop_db="$run/shop.db" --shipping_db="$run/shipping.db" "$@"; }
placed() {  # how many orders shop.db holds (0 before it exists)
  local n
  n=$(check 2>/dev/null | sed -n 's/.* orders=\([0-9]*\).*/\1/p') || true
  echo "${n:-0}"
}
wait_placed() {  # N: until shop.db holds N orders
  local deadline=$((SECONDS + 120 * scale))
  until (($(placed) >= $1)); do
    ((SECONDS < deadline)) || fail "fewer than $1 orders placed after $((120 * scale)) s"
    sleep 0.1
  done
}
wait_exit() {  # PID WHAT: waits (up to 180 s) for PID to exit 0
  local deadline=$((SECONDS + 180 * scale)) rc=0
  while kill -0 "$1" 2>/dev/null; do
    ((SECONDS < deadline)) || fail "$2 still running after $((180 * scale)) s"
    sleep 0.2
  done
  wait "$1" || rc=$?
  ((rc == 0)) || fail "$2 exited with status $rc"
}
stop_process() {  # PID WHAT: SIGTERM, then waits for a clean exit
  kill -TERM "$1"
  wait_exit "$1" "$2 (after SIGTERM)"
}

per_phase=300
total=$((4 * per_phase))
started=$(now)
echo "queue $queue; $per_phase orders per phase"
start_shipping
start_recovery

# --- a. The broker node stopped and started while orders are placed.
t=$(now)
start_orders 0 "$per_phase" 20
wait_placed 50
down=$(now)
broker_down=1
bash "$node_script" stop "$broker_dir" >>"$run/broker.log" 2>&1 || fail "cannot stop the broker node"
sleep 2  # orders go on committing while the node is away
bash "$node_script" start "$broker_dir" >>"$run/broker.log" 2>&1 || fail "cannot start the broker node"
broker_down=0
down_for=$(since "$down")
wait_exit "$orders_pid" "shop_orders (phase a)"
echo "a. broker restart: node down ${down_for} s (stop, 2 s, start); orders 0..$((per_phase - 1)) all SENT $(since "$t") s after the first was placed"

# --- b. shop_shipping away for 10 s while orders are placed.
t=$(now)
start_orders "$per_phase" "$per_phase" 20
wait_placed $((per_phase + 50))
out=$(now)
stop_process "$shipping_pid" "shop_shipping"
sleep 10
start_shipping
out_for=$(since "$out")
wait_exit "$orders_pid" "shop_orders (phase b)"
echo "b. consumer outage: shop_shipping away ${out_for} s; orders $per_phase..$((2 * per_phase - 1)) all SENT $(since "$t") s after the first was placed"

# --- c. shop_orders SIGKILLed mid-range, then restarted to finish it.
t=$(now)
first=$((2 * per_phase))
start_orders "$first" "$per_phase" 20
wait_placed $((first + 100))
kill -KILL "$orders_pid"
wait "$orders_pid" 2>/dev/null || true
at_kill=$(($(placed) - first))
restart=$(now)
start_orders "$first" "$per_phase" 0
wait_exit "$orders_pid" "shop_orders (phase c, restarted)"
resumed=$(grep 'shop_orders: placed' "$run/orders.log" | tail -n 1)
echo "c. producer SIGKILL: killed with $at_kill of $per_phase placed; restart (${resumed#shop_orders: }) had orders $first..$((first + per_phase - 1)) all SENT $(since "$restart") s later ($(since "$t") s for the phase)"

# --- d. shop_orders SIGKILLed while the node is down: what it committed
# meanwhile never left its relay, and the restarted run skips those orders.
t=$(now)
first=$((3 * per_phase))
# Placed slowly (30 s for the phase), so that orders are still being placed
# once the node is down: stopping it took longer than 6 s on a loaded
# machine, and at 20 ms per order all of them were placed before that.
start_orders "$first" "$per_phase" 100
wait_placed $((first + 50))
broker_down=1
bash "$node_script" stop "$broker_dir" >>"$run/broker.log" 2>&1 || fail "cannot stop the broker node"
before=$(placed)
wait_placed $((before + 20))
kill -KILL "$orders_pid"
wait "$orders_pid" 2>/dev/null || true
stranded=$(($(placed) - before))
bash "$node_script" start "$broker_dir" >>"$run/broker.log" 2>&1 || fail "cannot start the broker node"
broker_down=0
restart=$(now)
start_orders "$first" "$per_phase" 0
wait_exit "$orders_pid" "shop_orders (phase d, restarted)"
echo "d. producer SIGKILL with the node down: at least $stranded orders committed while the node was down (left to recovery); restarted, orders $first..$((first + per_phase - 1)) all SENT $(since "$restart") s later ($(since "$t") s for the phase)"

# --- The whole: every order shipped once, no row SENDING or FAILED.
t=$(now)
deadline=$((SECONDS + 180 * scale))
until result=$(check --expect_orders="$total"); do
  ((SECONDS < deadline)) || { echo "$result" >&2; fail "the shop is not consistent after $((180 * scale)) s"; }
  sleep 0.5
done
echo "check passed $(since "$t") s after the last phase ($(since "$started") s in all): ${result#shop_check: }"
stop_process "$shipping_pid" "shop_shipping"
stop_process "$recovery_pid" "shop_recovery"
grep -h '^shop_shipping: SIGTERM' "$run/shipping.log" | sed 's/^/  /'
grep -h '^shop_recovery: SIGTERM' "$run/recovery.log" | sed 's/^/  /'
echo "PASS"
