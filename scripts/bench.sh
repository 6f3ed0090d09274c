#!/usr/bin/env bash
# Benchmarks, end to end, on this machine: builds a Release tree, starts a
# private RabbitMQ node and release builds of payment_service and
# accounting_service, then runs
#   1. outbox_bench closed loop (throughput), with same-run baselines
#      (raw SQLite commits, raw broker publish+consume, naive outbox);
#   2. outbox_bench open loop at a fixed offered rate, against fresh services
#      and databases (create->SENT latency, peak RSS under that load);
#   3. outbox_bench open loop at the same rate with recovery_service running,
#      while accounting_service is killed for BENCH_OUTAGE and started again
#      (backlog at its return, and the rate at which it drains to SENT);
#   4. claim_bench: recovery's claim of 1,000 due rows in a 5,000,000-row outbox;
#   5. the load curve (only when BENCH_RUNS names it): open loops at
#      CURVE_RATES and saturation, each on fresh services: CPU, context
#      switches, fsyncs and broker messages per payment, and p50/p99
#      latencies, and at each rate the CPU floor of the parts alone, as a
#      table, a CSV and a PNG (scripts/lib/bench_curve.sh).
# outbox_bench prints CPU time per payment for every process over each whole
# run (warm-up, window and drain to SENT): the figure to judge by, since
# throughput on a shared machine measures the neighbours too.
# Everything it starts is stopped on exit. Figures swing with the machine's
# load: compare only figures from the same run.
#
# Environment knobs (defaults in brackets):
#   BENCH_RUNS [throughput,latency,drain,claim]  which of the runs above to do
#                            (curve: add it, or BENCH_RUNS=curve alone)
#   CURVE_RATES, CURVE_DURATION, CURVE_ROUNDS, CURVE_BUILDS, CURVE_FSYNC, CURVE_PLOT,
#   CURVE_FLOOR, CURVE_FLOOR_TIME, CURVE_BROKERS (the curve on several RabbitMQ releases),
#   BENCH_OUT                the curve's knobs (scripts/lib/bench_curve.sh)
#   BENCH_DURATION [20s]     measured drive phase of each outbox_bench run
#   BENCH_WARMUP [3s]        warm-up before it
#   BENCH_CONCURRENCY [64]   calls in flight in the closed-loop run
#   BENCH_RATE [1000]        offered calls/s in the open-loop and drain runs
#   BENCH_OUTAGE [60s]       how long accounting_service is down in the drain run
#                            (whole seconds or minutes, e.g. 10s, 2m; 0 skips the run)
#   BENCH_OUTAGE_SIGNAL [KILL]  how it is stopped: KILL (a crash: its unacked
#                            deliveries come again and are deduplicated) or TERM
#   CLAIM_ROWS [5000000]     SENT rows claim_bench fills the outbox with
#   BENCH_BUILD_DIR [build-release]   BENCH_SKIP_BUILD=1 uses it as it is
#   BENCH_JOBS [2]           parallel compile jobs
#   BENCH_KEEP=1             keep the temp dir (logs, databases) afterwards
#   BENCH_JSON=1             outbox_bench also prints a JSON line per run
#   BENCH_PROFILE=1          perf-record payment_service (and accounting_service) during the
#                            throughput run and print where their CPU went (installs linux-perf)
#   BENCH_ACCOUNTING_SHARDS [1]  accounting instances M (docs/deployment.md, Accounting shards): payment
#                            events hashed by payment id over M queues, one accounting_service
#                            with its own accounting.db each
#   BENCH_TLS=1              gRPC with TLS and an API token (scripts/dev_certs.sh
#                            certificates in the temp dir); default plaintext, as
#                            the figures in docs/performance.md were taken
#   BENCH_STORE [sqlite]     the services' store: sqlite (a file per service in the run's
#                            dir) or postgres (a private PostgreSQL primary of
#                            scripts/postgres_node.sh in the temp dir, a fresh database per
#                            service and run, PAYMENT_DB / ACCOUNTING_DB its URI, the password
#                            in PGPASSFILE). Several, e.g. sqlite,postgres: the curve runs
#                            every point on each (interleaved), the other runs on the first.
#                            The curve counts PostgreSQL's CPU (the postmaster and its
#                            children) as a column of its own and runs bench/pg_floor on
#                            the server (serial and 64 payments per commit) as the store's
#                            floor; needs pg_floor built beside outbox_bench
#   BENCH_PG_STANDBY=1       with postgres: a synchronous standby too (remote_apply), its CPU
#                            counted with the primary's
#   BENCH_PAYMENT_SHARDS [1] payment_service instances, each with its own payment.db
#                            and reply queue (docs/deployment.md, Payment shards); outbox_bench
#                            sends each call to its key's shard. Peak RSS is shard
#                            0's; CPU is shown for every shard.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BENCH_BUILD_DIR:-$ROOT/build-release}
DURATION=${BENCH_DURATION:-20s}
WARMUP=${BENCH_WARMUP:-3s}
CONCURRENCY=${BENCH_CONCURRENCY:-64}
RATE=${BENCH_RATE:-1000}
CLAIM_ROWS=${CLAIM_ROWS:-5000000}
JOBS=${BENCH_JOBS:-2}
JSON=$([[ ${BENCH_JSON:-0} == 1 ]] && echo true || echo false)
TLS=${BENCH_TLS:-0}
SHARDS=${BENCH_PAYMENT_SHARDS:-1}
[[ $SHARDS =~ ^[1-9][0-9]*$ ]] || { echo "bench: BENCH_PAYMENT_SHARDS must be a positive number" >&2; exit 2; }
ACC_SHARDS=${BENCH_ACCOUNTING_SHARDS:-1}
[[ $ACC_SHARDS =~ ^[1-9][0-9]*$ ]] || { echo "bench: BENCH_ACCOUNTING_SHARDS must be a positive number" >&2; exit 2; }
IFS=, read -r -a STORES <<<"${BENCH_STORE:-sqlite}"
for s in "${STORES[@]}"; do
  [[ $s == sqlite || $s == postgres ]] || { echo "bench: BENCH_STORE: sqlite or postgres, not '$s'" >&2; exit 2; }
done
((${#STORES[@]} > 0)) || { echo "bench: BENCH_STORE is empty" >&2; exit 2; }
STORE=${STORES[0]}  # the store of the runs but the curve's, and start_services'
if [[ " ${STORES[*]} " == *" postgres "* ]] && ((SHARDS > 1 || ACC_SHARDS > 1)); then
  echo "bench: BENCH_STORE=postgres runs without shards" >&2
  exit 2
fi

say() { echo "bench: $*" >&2; }
die() { say "$*"; exit 1; }

# ---------------------------------------------------------------- build
if [[ ${BENCH_SKIP_BUILD:-0} != 1 ]]; then
  if [[ -x $ROOT/scripts/install_deps.sh ]]; then "$ROOT/scripts/install_deps.sh"; fi
  say "building Release tree in $BUILD_DIR"
  # Build output goes to stderr: stdout is the report.
  cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
  targets=(payment_service accounting_service recovery_service outbox_bench)
  # claim_bench exists once recovery_service's store does (bench/CMakeLists.txt).
  if cmake --build "$BUILD_DIR" --target help | grep -w claim_bench >/dev/null; then
    targets+=(claim_bench)
  fi
  [[ " ${STORES[*]} " != *" postgres "* ]] || targets+=(pg_floor)
  cmake --build "$BUILD_DIR" -j"$JOBS" --target "${targets[@]}" >&2
fi
BIN=$BUILD_DIR/bin
for b in payment_service accounting_service recovery_service outbox_bench; do
  [[ -x $BIN/$b ]] || die "$BIN/$b is missing (build it, or unset BENCH_SKIP_BUILD)"
done

# ---------------------------------------------------------------- clean-up
WORK=$(mktemp -d "${TMPDIR:-/tmp}/outbox_bench.XXXXXX")
BROKER_DIR=$WORK/broker
PIDS=()  # services we started and have not stopped yet
CHILD=   # the step running now (see run)

# Runs a step in the background and waits for it: a signal then interrupts
# the wait at once (bash would defer the trap until a foreground child ends).
run() {
  "$@" &
  CHILD=$!
  local rc=0
  wait "$CHILD" || rc=$?
  CHILD=
  return "$rc"
}

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
  [[ -n $CHILD ]] && stop_pid "$CHILD"
  stop_services
  "$ROOT/scripts/rabbitmq_node.sh" stop "$WORK/broker" >/dev/null 2>&1 || true
  pg_stop
  if declare -F curve_brokers_stop >/dev/null; then curve_brokers_stop; fi
  if [[ ${BENCH_KEEP:-0} == 1 || $rc != 0 ]]; then
    say "logs and databases kept in $WORK"
  else
    rm -rf "$WORK"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------- PostgreSQL
# With BENCH_STORE=postgres: one primary (and with BENCH_PG_STANDBY=1 its
# synchronous standby) for the whole run, in $WORK/pg; each run of the
# services gets databases of its own on it.
PG_DIR=$WORK/pg
PG_NODES=()        # node dirs, primary first
PG_SERVER_PIDS=()  # their postmasters
pg_start() {
  [[ " ${STORES[*]} " == *" postgres "* ]] || return 0
  local node=$ROOT/scripts/postgres_node.sh d
  chmod 711 "$WORK"  # the server's user (postgres, under root) must reach $PG_DIR
  say "starting a private PostgreSQL primary$([[ ${BENCH_PG_STANDBY:-0} == 1 ]] && echo " and its synchronous standby")"
  PG_NODES=("$PG_DIR/primary")
  bash "$node" fresh "$PG_DIR/primary" >/dev/null
  if [[ ${BENCH_PG_STANDBY:-0} == 1 ]]; then
    PG_NODES+=("$PG_DIR/standby")
    bash "$node" standby "$PG_DIR/primary" "$PG_DIR/standby" >/dev/null
  fi
  for d in "${PG_NODES[@]}"; do PG_SERVER_PIDS+=("$(bash "$node" pid "$d")"); done
  PG_PORT=$(bash "$node" env "$PG_DIR/primary" | sed -n 's/^export PGPORT=//p')
  PG_BINDIR=$(bash "$node" env "$PG_DIR/primary" | sed -n 's/^export PG_BIN=//p')
  PGPASS_FILE=$PG_DIR/primary/pgpass
  echo "PostgreSQL: $("$PG_BINDIR/postgres" --version), primary on 127.0.0.1:$PG_PORT" \
    "$([[ ${BENCH_PG_STANDBY:-0} == 1 ]] && echo "with a synchronous standby (remote_apply)" || echo "alone")"
}
pg_stop() {
  local i
  for ((i = ${#PG_NODES[@]} - 1; i >= 0; i--)); do
    bash "$ROOT/scripts/postgres_node.sh" stop "${PG_NODES[i]}" >/dev/null 2>&1 || true
  done
}

# pg_url DB: the URI of database DB on the primary, no password (PGPASSFILE).
pg_url() {
  echo "postgresql://outbox@127.0.0.1:$PG_PORT/$1"
}

# pg_fresh_db NAME: creates database NAME (dropped first) on the primary.
pg_fresh_db() {
  local sql
  for sql in "DROP DATABASE IF EXISTS $1" "CREATE DATABASE $1"; do
    PGPASSFILE=$PGPASS_FILE PGOPTIONS='-c client_min_messages=warning' "$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -h "$PG_DIR/primary" \
      -p "$PG_PORT" -U outbox -d outbox -c "$sql" >/dev/null || die "PostgreSQL: $sql failed"
  done
}

# pg_cpu_ticks: utime + stime so far of every PostgreSQL server process, in
# clock ticks: each postmaster, its live children, and its children that
# exited and were waited for (its cutime + cstime).
pg_cpu_ticks() {
  local pid child sum=0 t
  for pid in "${PG_SERVER_PIDS[@]}"; do
    t=$(awk '{ sub(/^.*\) /, ""); print $12 + $13 + $14 + $15 }' "/proc/$pid/stat")
    sum=$((sum + t))
    for child in $(ps -o pid= --ppid "$pid"); do
      t=$(awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$child/stat" 2>/dev/null) || t=0
      sum=$((sum + ${t:-0}))
    done
  done
  echo "$sum"
}

# store_db RUN NAME FILE: sets DB, the database of service NAME in RUN: FILE
# on SQLite; on PostgreSQL (STORE) a fresh database named after both.
store_db() {
  if [[ $STORE == sqlite ]]; then
    DB=$3
    return
  fi
  local name=${2}_${1//[^A-Za-z0-9]/_}
  name=${name,,}
  name=${name:0:63}
  pg_fresh_db "$name"
  DB=$(pg_url "$name")
}

# ---------------------------------------------------------------- services
# shellcheck source=SCRIPTDIR/lib/bench_curve.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/bench_curve.sh"  # curve_setup, curve_run

# wanted RUN: whether BENCH_RUNS names RUN.
wanted() {
  [[ ,${BENCH_RUNS:-throughput,latency,drain,claim}, == *,$1,* ]]
}

# The curve's knobs, checked before the broker's start-up.
if wanted curve; then curve_setup; fi

# The run's node, unless only the curve runs, on nodes of its own (CURVE_BROKERS).
if [[ -z ${CURVE_BROKERS:-} ]] || wanted throughput || wanted latency || wanted drain; then
  say "starting a private RabbitMQ node (takes ~15 s)"
  # In the foreground: interrupted half-way, the node could be left running.
  "$ROOT/scripts/rabbitmq_node.sh" start "$BROKER_DIR" >/dev/null
  AMQP_URL=$(cat "$BROKER_DIR/amqp_url")
fi

# gRPC security for every run: none, or TLS + API token (BENCH_TLS=1).
SERVICE_SECURITY=() CLIENT_SECURITY=()
if [[ $TLS == 1 ]]; then
  say "gRPC with TLS and an API token (certificates in $WORK/certs)"
  bash "$ROOT/scripts/dev_certs.sh" "$WORK/certs" >/dev/null
  (umask 077 && head -c 32 /dev/urandom | base64 >"$WORK/certs/api.token")
  SERVICE_SECURITY=(TLS_CERT_FILE="$WORK/certs/server.pem" TLS_KEY_FILE="$WORK/certs/server.key"
    API_TOKEN_FILE="$WORK/certs/api.token")
  CLIENT_SECURITY=(--tls_ca_file="$WORK/certs/ca.pem" --token_file="$WORK/certs/api.token")
fi

# start_service NAME RUN_DIR ENV...: starts build-release/bin/NAME with its log
# in RUN_DIR, waits for "<NAME>_started ... port=N"; sets PORT and PID.
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
  # The first port= (a PostgreSQL database in the line names its server's port after it).
  PORT=$(grep -oE ' port=[0-9]+' <<<"$line" | head -n 1 | cut -d= -f2)
  [[ $PORT =~ ^[0-9]+$ && $PORT != 0 ]] || die "$name: no port in: $line"
}

# shellcheck source=SCRIPTDIR/lib/ports.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/ports.sh"  # free_port

# start_services RUN: fresh databases and queues under $WORK/RUN; sets
# COMMON_ENV and ACCOUNTING_ENV (shard 0's, for a restart, with ACCOUNTING_LISTEN).
start_services() {
  local run=$1 dir=$WORK/$1
  mkdir -p "$dir"
  [[ -s $WORK/message.keys ]] ||  # the services sign and check every message
    (umask 077 && echo "bench $(openssl rand -hex 32)" >"$WORK/message.keys")
  COMMON_ENV=(PAY_QUEUE="bench.$run.PAY" ACC_QUEUE="bench.$run.ACC" ACCOUNTING_SHARDS="$ACC_SHARDS"
    MESSAGE_KEYS_FILE="$WORK/message.keys" "${SERVICE_SECURITY[@]}")
  [[ $STORE == sqlite ]] || COMMON_ENV+=(PGPASSFILE="$PGPASS_FILE")
  local common=("${COMMON_ENV[@]}") users=$BROKER_DIR/users k db logs acc_env
  # Each service on its own broker user (scripts/rabbitmq_node.sh).
  # Payment shards: every shard's address is known before any starts.
  local ports=() addrs="" reply_queues="" port
  if ((SHARDS > 1)); then
    for ((k = 0; k < SHARDS; k++)); do
      free_port port
      ports+=("$port")
      addrs+="${addrs:+,}127.0.0.1:${ports[k]}"
      reply_queues+="${reply_queues:+,}bench.$run.ACC.s$k"
    done
  fi
  # ACCOUNTING_ADDRS / MORE_ACCOUNTING_PIDS: every shard's, for outbox_bench.
  ACCOUNTING_ADDRS='' MORE_ACCOUNTING_PIDS=''
  for ((k = 0; k < ACC_SHARDS; k++)); do
    db=$dir/accounting.db logs=$dir
    if ((ACC_SHARDS > 1)); then  # a log of its own: start_service reads the port from it
      db=$dir/accounting-$k.db logs=$dir/accounting-$k
      mkdir -p "$logs"
    fi
    store_db "$run" accounting "$db"
    db=$DB
    acc_env=("${common[@]}" AMQP_URL="$(cat "$users/outbox-accounting.url")"
      AMQP_PASSWORD_FILE="$users/outbox-accounting.password" ACCOUNTING_SHARD="$k" ACCOUNTING_DB="$db"
      REPLY_QUEUES="$reply_queues")
    start_service accounting_service "$logs" "${acc_env[@]}" ACCOUNTING_LISTEN=127.0.0.1:0
    if ((k == 0)); then
      ACCOUNTING_ENV=("${acc_env[@]}") ACCOUNTING_PORT=$PORT ACCOUNTING_PID=$PID
    else
      MORE_ACCOUNTING_PIDS+=${MORE_ACCOUNTING_PIDS:+,}$PID
    fi
    ACCOUNTING_ADDRS+=${ACCOUNTING_ADDRS:+,}127.0.0.1:$PORT
  done
  # Payment's /metrics: outbox_bench reads the messages it published and received there.
  free_port port
  PAYMENT_METRICS=127.0.0.1:$port
  if ((SHARDS == 1)); then
    store_db "$run" payment "$dir/payment.db"
    PAYMENT_DB_OF_RUN=$DB
    start_service payment_service "$dir" "${common[@]}" \
      AMQP_URL="$(cat "$users/outbox-payment.url")" AMQP_PASSWORD_FILE="$users/outbox-payment.password" \
      PAYMENT_DB="$DB" PAYMENT_LISTEN=127.0.0.1:0 PAYMENT_METRICS_LISTEN="$PAYMENT_METRICS"
    PAYMENT_ADDR=127.0.0.1:$PORT PAYMENT_PID=$PID OTHER_PAYMENT_PIDS=
    return
  fi
  PAYMENT_METRICS=''  # one shard's counts are not the system's
  OTHER_PAYMENT_PIDS=
  for ((k = SHARDS - 1; k >= 0; k--)); do  # shard 0 last: its PID is --payment_pid
    mkdir -p "$dir/s$k"
    start_service payment_service "$dir/s$k" "${common[@]}" \
      AMQP_URL="$(cat "$users/outbox-payment.url")" AMQP_PASSWORD_FILE="$users/outbox-payment.password" \
      PAYMENT_DB="$dir/s$k/payment.db" PAYMENT_LISTEN="127.0.0.1:${ports[k]}" \
      ACC_QUEUE="bench.$run.ACC.s$k" PAYMENT_SHARDS="$addrs" PAYMENT_SHARD_INDEX="$k"
    ((k == 0)) || OTHER_PAYMENT_PIDS="$PID${OTHER_PAYMENT_PIDS:+,}$OTHER_PAYMENT_PIDS"
  done
  PAYMENT_ADDR=$addrs PAYMENT_PID=$PID
}

# start_recovery RUN: recovery_service (defaults, RECOVERY_RATE included) on
# RUN's payment database and queues, after start_services RUN.
start_recovery() {
  local dir=$WORK/$1 users=$BROKER_DIR/users
  start_service recovery_service "$dir" "${COMMON_ENV[@]}" \
    AMQP_URL="$(cat "$users/outbox-recovery.url")" AMQP_PASSWORD_FILE="$users/outbox-recovery.password" \
    PAYMENT_DB="$PAYMENT_DB_OF_RUN" RECOVERY_LISTEN=127.0.0.1:0
}

# seconds DURATION: whole seconds of "90", "90s" or "2m".
seconds() {
  case $1 in
    *[0-9]m) echo $((${1%m} * 60)) ;;
    *[0-9]s) echo "${1%s}" ;;
    *) echo "$1" ;;
  esac | grep -xE '[0-9]+' || die "not whole seconds or minutes: $1"
}

# bench_args: sets BENCH_ARGS, outbox_bench's flags for the services running now.
bench_args() {
  BENCH_ARGS=(--payment_addr="$PAYMENT_ADDR" --accounting_addr="$ACCOUNTING_ADDRS"
    --payment_pid="$PAYMENT_PID" --other_payment_pids="$OTHER_PAYMENT_PIDS" --accounting_pid="$ACCOUNTING_PID"
    ${MORE_ACCOUNTING_PIDS:+--more_accounting_pids="$MORE_ACCOUNTING_PIDS"}
    --broker_pid="$(cat "$BROKER_DIR/rabbitmq.pid" 2>/dev/null || echo 0)"
    ${PAYMENT_METRICS:+--payment_metrics="$PAYMENT_METRICS"}
    --duration="$DURATION" --warmup="$WARMUP" --json="$JSON" "${CLIENT_SECURITY[@]}")
}

run_outbox_bench() {  # extra outbox_bench flags (a flag given again wins)...
  bench_args
  run "$BIN/outbox_bench" "${BENCH_ARGS[@]}" "$@"
}

echo "outbox benchmarks on $(hostname), $(nproc) cores, $(date -u +%Y-%m-%dT%H:%M:%SZ), $SHARDS payment shard(s)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
((ACC_SHARDS == 1)) || echo "accounting shards: $ACC_SHARDS (BENCH_ACCOUNTING_SHARDS)"
pg_start

# profile_start NAME PID / profile_report: perf samples (call graphs) of a service while it runs.
profile_pids=()
profile_start() {
  [[ ${BENCH_PROFILE:-0} == 1 ]] || return 0
  perf record -q -F 499 -g -p "$2" -o "$WORK/$1.perf.data" >/dev/null 2>&1 &
  profile_pids+=($!)
}
profile_report() {
  [[ ${BENCH_PROFILE:-0} == 1 ]] || return 0
  local pid name
  for pid in "${profile_pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
  for pid in "${profile_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  for name in payment_service accounting_service; do
    echo
    echo "== profile: $name during the throughput run (perf, 499 Hz, self time) =="
    echo "-- by library --"
    perf report -i "$WORK/$name.perf.data" --stdio --no-children --sort dso --percent-limit 2 \
      2>/dev/null | grep -E '^ +[0-9]' | sed -E 's/ +$//' | head -12
    echo "-- top functions --"
    perf report -i "$WORK/$name.perf.data" --stdio --no-children --sort dso,symbol -g none \
      --percent-limit 1 2>/dev/null | grep -E '^ +[0-9]' | sed -E 's/ +- +- *$//; s/ +$//' | head -25
  done
}
if [[ ${BENCH_PROFILE:-0} == 1 ]] && ! command -v perf >/dev/null; then
  apt-get install -y -q linux-perf >/dev/null || die "BENCH_PROFILE=1 needs perf (linux-perf)"
fi

# wal_sizes RUN: the services' WAL files at the end of a run (SQLite removes
# them at close, so while the services still run). The writer checkpoints
# once a commit leaves 1,024 pages (about 4 MiB) in the log and the next
# commit starts it over, so under a steady load each stays a little over
# 4 MiB; a log that only grows shows here.
wal_sizes() {
  local f line=""
  while IFS= read -r f; do
    line+="${line:+, }${f#"$WORK/$1/"} $(awk '{printf "%.1f MiB", $1 / 1048576}' <<<"$(stat -c %s "$f")")"
  done < <(find "$WORK/$1" -name '*.db-wal' | sort)
  printf '  %-45s%s\n' "WAL files at the end of the run" "${line:-none}"
}

# 1. Throughput: closed loop, baselines measured first in the same process.
if wanted throughput; then
  start_services throughput
  profile_start payment_service "$PAYMENT_PID"
  profile_start accounting_service "$ACCOUNTING_PID"
  echo
  run_outbox_bench --label=throughput --concurrency="$CONCURRENCY" \
    --baselines=true --amqp_url="$AMQP_URL" --scratch_dir="$WORK/throughput"
  wal_sizes throughput
  profile_report
  stop_services
fi

# 2. Latency and memory at a fixed offered rate, with fresh services.
if wanted latency; then
  start_services latency
  echo
  run_outbox_bench --label=latency --rate="$RATE"
  wal_sizes latency
  stop_services
fi

# 3. Drain after an accounting outage, recovery_service running (its
# defaults): load at the offered rate; after the warm-up and 5 s,
# accounting_service is killed (SIGKILL by default: an outage is a crash or a
# lost host, not a polite stop) for BENCH_OUTAGE while payments queue up;
# the load ends a second before it starts again on the same port and
# database. outbox_bench reads the restart time from the mark file and
# reports the backlog then and how fast it drained to SENT.
OUTAGE_S=$(seconds "${BENCH_OUTAGE:-60s}")
wanted drain || OUTAGE_S=0
OUTAGE_SIGNAL=${BENCH_OUTAGE_SIGNAL:-KILL}
[[ $OUTAGE_SIGNAL == KILL || $OUTAGE_SIGNAL == TERM ]] || die "BENCH_OUTAGE_SIGNAL: KILL or TERM"
if ((OUTAGE_S > 0 && (SHARDS > 1 || ACC_SHARDS > 1))); then
  echo
  echo "drain run: skipped with shards (it stops and restarts the one accounting_service)"
elif ((OUTAGE_S > 0)); then
  start_services drain
  start_recovery drain
  mark=$WORK/drain/accounting_back
  echo
  bench_args
  "$BIN/outbox_bench" "${BENCH_ARGS[@]}" --label=drain --rate="$RATE" \
    --duration="$((OUTAGE_S + 4))s" --outage_mark_file="$mark" --drain_timeout=600s &
  CHILD=$!
  sleep "$(($(seconds "$WARMUP") + 5))" & wait $!
  say "drain: SIG$OUTAGE_SIGNAL accounting_service (pid $ACCOUNTING_PID), down for ${OUTAGE_S}s"
  kill -"$OUTAGE_SIGNAL" "$ACCOUNTING_PID"
  wait "$ACCOUNTING_PID" 2>/dev/null || true
  left=()
  for pid in "${PIDS[@]}"; do [[ $pid == "$ACCOUNTING_PID" ]] || left+=("$pid"); done
  PIDS=("${left[@]}")
  sleep "$OUTAGE_S" & wait $!
  date +%s%3N >"$mark.tmp" && mv "$mark.tmp" "$mark"  # before its start: startup counts
  mkdir -p "$WORK/drain/restart"
  start_service accounting_service "$WORK/drain/restart" "${ACCOUNTING_ENV[@]}" \
    ACCOUNTING_LISTEN="127.0.0.1:$ACCOUNTING_PORT"
  say "drain: accounting_service back (pid $PID)"
  rc=0
  wait "$CHILD" || rc=$?
  CHILD=
  ((rc == 0)) || die "outbox_bench (drain) failed: $rc"
  stop_services
fi

# 4. Recovery's claim in a big outbox.
echo
if ! wanted claim; then
  :
elif [[ -x $BIN/claim_bench ]]; then
  mkdir -p "$WORK/claim"
  run "$BIN/claim_bench" --rows="$CLAIM_ROWS" --dir="$WORK/claim"
else
  echo "claim_bench: $BIN/claim_bench was not built (it needs recovery_lib): skipped"
fi

# 5. The load curve: a point per offered rate, each on fresh services.
if wanted curve; then
  curve_run
fi
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
