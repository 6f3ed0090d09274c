# shellcheck shell=bash
# The load curve, BENCH_RUNS=curve of scripts/bench.sh, which sources this
# file, calls curve_setup before it starts the broker and curve_run after its
# other runs. Both use bench.sh's helpers and state (start_services,
# stop_services, run_outbox_bench, PIDS, WORK, BIN, BROKER_DIR, say, die,
# and for PostgreSQL STORES, pg_url, pg_cpu_ticks, PG_SERVER_PIDS, PGPASS_FILE).
#
# One outbox_bench run per point of CURVE_RATES: an open loop at each rate,
# and "sat", a closed loop at BENCH_CONCURRENCY. Every point gets fresh
# services and databases; the broker node is the run's. While it runs,
# `perf stat` counts the fsync and fdatasync calls of payment_service,
# accounting_service and the broker (in-kernel tracepoint counters: no
# ptrace stop per system call, as strace would add). Each point prints one
# row; the rows go to $BENCH_OUT/curve.csv, the plot to $BENCH_OUT/curve.png
# (scripts/plot_curve.py), and each point's whole report to $BENCH_OUT/reports/.
#
# Before each round of a numeric point, with the services stopped, the
# floor: `outbox_bench --floor_rate=POINT` measures each part alone paced at
# that rate (a gRPC call to a trivial server, a broker message on the run's
# node, a 2-row SQLite transaction) and the CPU floor per payment they
# compose (bench/floor.h); its figures go in the point's row(s).
#
# With BENCH_STORE=postgres (scripts/bench.sh) the services run on the run's
# PostgreSQL server, each point on fresh databases, and the CPU of the
# server's processes (the postmaster and its children, /proc/<pid>/stat
# utime + stime, over outbox_bench's run) is the column cpu_us_postgres and
# part of cpu_us_system; the point's floor keeps its gRPC and broker parts
# (its SQLite part and the payment's sum stay empty), and before the first
# point, once per round, PostgreSQL's own floor: bench/pg_floor on that
# server (one 2-row transaction per commit, then 64 payments per commit with
# an INSERT per row and with an INSERT per table), printed and kept in
# reports/. With several
# stores (BENCH_STORE=sqlite,postgres) every point runs on each, as with
# several builds; the build column names the store.
#
# Knobs:
#   CURVE_RATES [100,200,500,1000,2000,sat]  offered payments/s; sat = closed loop
#   CURVE_DURATION [20s]    measured phase of each point (BENCH_WARMUP before it)
#   CURVE_ROUNDS [1]        how many times each point is run (per build)
#   CURVE_BUILDS            LABEL=BIN_DIR,LABEL=BIN_DIR...: the services of several
#                           builds, interleaved point by point (A, B, A, B...);
#                           ratios are to the first. Default: BENCH_BUILD_DIR's bin/
#   CURVE_FSYNC [1]         0: no fsync counting (no perf needed)
#   CURVE_FLOOR [1]         0: no floor runs (their columns stay empty)
#   CURVE_FLOOR_TIME [10s]  time of each part of a floor run (four parts)
#   CURVE_PLOT [1]          0: no PNG (no matplotlib needed)
#   CURVE_IDLE [10]         seconds of the idle point (each build, each round,
#                           before the loads: the three services with no load);
#                           0 skips it. Rows to $BENCH_OUT/idle.csv
#   CURVE_BROKERS           VERSION[+TAG] ...: the curve on several RabbitMQ
#                           nodes of its own, started together, every point run
#                           on each (interleaved, the order reversed every other
#                           round); ratios are to the first. VERSION is a release
#                           prefix (3.10, 4.0): the host's package if it is that
#                           release, else the root file system OUTBOX_RABBITMQ_ROOT
#                           names (default /var/cache/outbox/rabbitmq-4.0,
#                           scripts/rabbitmq40.sh). +TAG adds the rabbitmq.conf
#                           lines of CURVE_BROKER_CONF_TAG and the Erlang VM flags
#                           of CURVE_BROKER_ERL_TAG (e.g. CURVE_BROKERS="4.0 4.0+s1"
#                           CURVE_BROKER_ERL_s1="+S 1:1"). Default: the run's node
#   BENCH_OUT [a new /tmp/outbox_curve.* dir]   where the CSV, PNG and reports go

# The CSV's columns, in order. Per payment: everything from cpu_us_* to
# broker_msgs, and cpu_us_postgres. Times are ms. cpu_us_system is payment +
# accounting + broker (+ postgres on PostgreSQL).
CURVE_COLUMNS=(build point round offered_per_s concurrency achieved_per_s sent_per_s payments
  cpu_us_payment cpu_us_accounting cpu_us_broker cpu_us_system cpu_us_client
  switches_payment switches_accounting switches_broker
  fsyncs_payment fsyncs_accounting fsyncs_broker broker_msgs
  create_p50_ms create_p99_ms to_sent_p50_ms to_sent_p99_ms skipped failed load1
  floor_us_grpc floor_us_broker_msg floor_us_sqlite_tx floor_us_payment
  broker rss_mib_payment rss_mib_accounting rss_mib_broker store cpu_us_postgres)

# The CSV's figures that outbox_bench's JSON line gives, in the CSV's order;
# curve_point fills in the rest (the point, payments, fsyncs, load, the floor).
CURVE_JSON_FRONT='.create_per_s, .sustained_sent_per_s'
CURVE_JSON_CPU='.cpu_us_per_payment_payment, .cpu_us_per_payment_accounting,
  .cpu_us_per_payment_broker, .cpu_us_per_payment_system, .cpu_us_per_payment_client,
  .switches_per_payment_payment, .switches_per_payment_accounting, .switches_per_payment_broker'
CURVE_JSON_BACK='.broker_messages_per_payment, .create_p50_ms, .create_p99_ms,
  .to_sent_p50_ms, .to_sent_p99_ms, .create_skipped, .create_failed'

# The floor's figures (outbox_bench --floor_rate), in the CSV's order: the
# trivial gRPC server per call, the broker per persistent message, SQLite per
# transaction, and the floor per payment they compose.
CURVE_JSON_FLOOR='.floor_us_grpc_server, .floor_us_broker_per_message, .floor_us_sqlite_tx,
  .floor_us_per_payment'
CURVE_FLOOR_NONE=,,,  # the floor's fields when it was not run (sat, CURVE_FLOOR=0)

# Peak RSS of the services (VmHWM, MiB), after the floor's fields.
CURVE_JSON_RSS='.payment_peak_rss_mib, .accounting_peak_rss_mib'

# Figures as CSV fields: null (not measured) is an empty field.
CURVE_JQ_CSV='map(if . == null then "" else tostring end) | join(",")'

# curve_fsync_start DIR: a `perf stat` per process, counting its fsync and
# fdatasync calls into DIR/fsync.<key>, until curve_fsync_stop.
FSYNC_PIDS=()
curve_fsync_start() {
  local dir=$1 key pid
  FSYNC_PIDS=()
  [[ $CURVE_FSYNC == 1 ]] || return 0
  for key in payment accounting broker; do
    case $key in
      payment) pid=$PAYMENT_PID ;;
      accounting) pid=$ACCOUNTING_PID ;;
      broker) pid=$(cat "$BROKER_DIR/rabbitmq.pid") ;;
    esac
    perf stat -x, -e syscalls:sys_enter_fsync,syscalls:sys_enter_fdatasync -p "$pid" \
      -o "$dir/fsync.$key" >/dev/null 2>&1 &
    FSYNC_PIDS+=($!)
    PIDS+=($!)  # stopped on exit like a service
  done
}

# curve_fsync_stop DIR: stops the counters; sets FSYNCS[key] (empty if unknown).
declare -A FSYNCS
curve_fsync_stop() {
  local dir=$1 pid key left=()
  FSYNCS=([payment]='' [accounting]='' [broker]='')
  [[ $CURVE_FSYNC == 1 ]] || return 0
  for pid in "${FSYNC_PIDS[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
  for pid in "${FSYNC_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do [[ " ${FSYNC_PIDS[*]} " == *" $pid "* ]] || left+=("$pid"); done
  PIDS=("${left[@]}")
  FSYNC_PIDS=()
  for key in payment accounting broker; do
    # "count,,event,...": both events counted, or nothing.
    FSYNCS[$key]=$(awk -F, '$3 ~ /^syscalls:sys_enter_f(data)?sync$/ {
        if ($1 ~ /^[0-9]+$/) { n += $1; seen++ } }
      END { if (seen == 2) print n }' "$dir/fsync.$key" 2>/dev/null)
  done
}

# curve_row CSV_LINE SERIES: prints it as a row of the table, SERIES (the
# build, the broker or both) in the build column.
curve_row() {
  awk -F, -v w="$CURVE_WIDTH" -v series="$2" '
    function f(v, fmt) { return v == "" ? "n/a" : sprintf(fmt, v) }
    {
      offered = $2 == "sat" ? "sat(" $5 ")" : $4
      printf "%-8s %-" w "s %8s %8s |%6s %6s %6s %6s %6s |%6s %6s %6s |%6s %6s %6s |%5s |%7s %7s |%7s %7s |%6s %6s %6s %6s |%5s %5s %5s\n",
        offered, series, f($6, "%.0f"), f($8, "%.0f"),
        f($9, "%.0f"), f($10, "%.0f"), f($11, "%.0f"), f($37, "%.0f"), f($12, "%.0f"),
        f($14, "%.2f"), f($15, "%.2f"), f($16, "%.2f"),
        f($17, "%.3f"), f($18, "%.3f"), f($19, "%.3f"), f($20, "%.2f"),
        f($21, "%.1f"), f($22, "%.1f"), f($23, "%.1f"), f($24, "%.1f"),
        f($28, "%.0f"), f($29, "%.0f"), f($30, "%.0f"), f($31, "%.0f"),
        f($33, "%.0f"), f($34, "%.0f"), f($35, "%.0f")
    }' <<<"$1"
}

curve_header() {
  printf "%-8s %-${CURVE_WIDTH}s %8s %8s |%-35s|%-20s |%-20s |%5s |%-15s |%-15s |%-27s |%-s\n" \
    offered build achieved payments " CPU µs per payment" " switches/payment" \
    " fsyncs/payment" msgs " create ms" " create->SENT ms" " floor µs (parts alone)" " RSS MiB"
  printf "%-8s %-${CURVE_WIDTH}s %8s %8s |%6s %6s %6s %6s %6s |%6s %6s %6s |%6s %6s %6s |%5s |%7s %7s |%7s %7s |%6s %6s %6s %6s |%5s %5s %5s\n" \
    "per s" "" "per s" "" pay acc broker pg sum pay acc broker pay acc broker "/pay" \
    p50 p99 p50 p99 grpc brk/m sql/tx pay pay acc brk
}

# curve_use_broker K: the run's broker for what follows (the caller makes
# BROKER_DIR and AMQP_URL local): CURVE_BROKERS' K-th node, or the run's
# own (K empty or no CURVE_BROKERS).
curve_use_broker() {
  ((${#CURVE_BROKER_LABELS[@]} > 0)) || return 0
  BROKER_DIR=${CURVE_BROKER_DIRS[$1]}
  AMQP_URL=$(cat "$BROKER_DIR/amqp_url")
}

# curve_run_suffix K: "-" and broker K's label in a run's name, whose queue
# names the services' broker users may use only with [A-Za-z0-9_-] and dots
# (scripts/rabbitmq_node.sh): "+TAG" becomes "_TAG".
curve_run_suffix() {
  local label=${CURVE_BROKER_LABELS[${1:-0}]-}
  [[ -z $label ]] || echo "-${label//+/_}"
}

# curve_series B K: the build column's name of build B on broker K.
curve_series() {
  local nb=${#CURVE_BROKER_LABELS[@]}
  if ((nb == 0)); then
    echo "${CURVE_LABELS[$1]}"
  elif ((${#CURVE_LABELS[@]} == 1)); then
    echo "${CURVE_BROKER_LABELS[$2]}"
  else
    echo "${CURVE_LABELS[$1]}@${CURVE_BROKER_LABELS[$2]}"
  fi
}

# curve_floor POINT ROUND K: outbox_bench --floor_rate=POINT while no services
# run, on broker K; sets CURVE_FLOOR_FIELDS, its CSV fields.
curve_floor() {
  local point=$1 round=$2 run json BROKER_DIR=$BROKER_DIR AMQP_URL=${AMQP_URL:-}
  curve_use_broker "$3"
  run=floor-$point-r$round$(curve_run_suffix "$3")
  mkdir -p "$WORK/$run"
  run "$BIN/outbox_bench" --label="$run" --floor_rate="$point" --floor_time="$CURVE_FLOOR_TIME" \
    --amqp_url="$AMQP_URL" --broker_pid="$(cat "$BROKER_DIR/rabbitmq.pid")" \
    --scratch_dir="$WORK/$run" --json=true >"$CURVE_OUT/reports/$run.txt" ||
    die "outbox_bench ($run) failed: $CURVE_OUT/reports/$run.txt"
  json=$(grep '^{' "$CURVE_OUT/reports/$run.txt" | tail -n 1)
  [[ -n $json ]] || die "$run: no JSON line in $CURVE_OUT/reports/$run.txt"
  CURVE_FLOOR_FIELDS=$(jq -r "[$CURVE_JSON_FLOOR] | $CURVE_JQ_CSV" <<<"$json")
}

# rss_mib PID: its resident set now, MiB (empty if unknown).
rss_mib() {
  awk '/^VmRSS:/ { printf "%.1f", $2 / 1024 }' "/proc/$1/status" 2>/dev/null || true
}

# curve_point B POINT ROUND K: one point on fresh services of build B on
# broker K; appends its row, with CURVE_FLOOR_FIELDS, to the CSV and prints it.
curve_point() {
  local label=${CURVE_LABELS[$1]} bin=${CURVE_DIRS[$1]} point=$2 round=$3 run json payments load1 line
  local BROKER_DIR=$BROKER_DIR AMQP_URL=${AMQP_URL:-} broker='' broker_rss series
  local STORE=${CURVE_STORES[$1]} pg_before='' pg_after='' pg_us=''
  curve_use_broker "$4"
  broker=${CURVE_BROKER_LABELS[${4:-0}]-}
  series=$(curve_series "$1" "$4")
  run=curve-$label$(curve_run_suffix "$4")-$point-r$round
  load1=$(cut -d' ' -f1 /proc/loadavg)
  # The services of this build (BIN only for the call); outbox_bench stays BENCH_BUILD_DIR's.
  BIN=$bin start_services "$run"
  local load=(--rate="$point")
  [[ $point == sat ]] && load=(--concurrency="$CONCURRENCY")
  curve_fsync_start "$WORK/$run"
  [[ $STORE == sqlite ]] || pg_before=$(pg_cpu_ticks)
  run_outbox_bench --label="$run" "${load[@]}" --duration="$CURVE_DURATION" --json=true \
    >"$CURVE_OUT/reports/$run.txt" || die "outbox_bench ($run) failed: $CURVE_OUT/reports/$run.txt"
  [[ $STORE == sqlite ]] || pg_after=$(pg_cpu_ticks)
  curve_fsync_stop "$WORK/$run"
  broker_rss=$(rss_mib "$(cat "$BROKER_DIR/rabbitmq.pid")")
  stop_services
  json=$(grep '^{' "$CURVE_OUT/reports/$run.txt" | tail -n 1)
  [[ -n $json ]] || die "$run: no JSON line in $CURVE_OUT/reports/$run.txt"
  # Payments made over the whole run (warm-up included), as the per-payment
  # figures divide by: from the whole run's heading.
  payments=$(sed -nE 's/^CPU per payment, whole run .* ([0-9]+) payments\)$/\1/p' \
    "$CURVE_OUT/reports/$run.txt")
  if [[ -n $pg_before ]]; then
    pg_us=$(awk -v a="$pg_before" -v b="$pg_after" -v hz="$(getconf CLK_TCK)" -v p="$payments" \
      'BEGIN { if (p > 0) printf "%.1f", 1e6 * (b - a) / hz / p }')
  fi
  local per=() key
  for key in payment accounting broker; do
    per+=("$(awk -v n="${FSYNCS[$key]}" -v p="$payments" \
      'BEGIN { if (n != "" && p > 0) printf "%.4f", n / p }')")
  done
  if [[ $point == sat ]]; then
    line="$label,$point,$round,,$CONCURRENCY,"
  else
    line="$label,$point,$round,$point,,"
  fi
  line+=$(jq -r "[$CURVE_JSON_FRONT] | $CURVE_JQ_CSV" <<<"$json")
  line+=",$payments,"
  line+=$(jq -r --arg pg "$pg_us" "[$CURVE_JSON_CPU]
    | if \$pg != \"\" then .[3] += (\$pg | tonumber) else . end | $CURVE_JQ_CSV" <<<"$json")
  line+=",${per[0]},${per[1]},${per[2]},"
  line+=$(jq -r "[$CURVE_JSON_BACK] | $CURVE_JQ_CSV" <<<"$json")
  local floor=$CURVE_FLOOR_FIELDS
  # On PostgreSQL the floor's SQLite part and its sum are not this store's.
  [[ $STORE == sqlite ]] || floor=$(awk -F, -v OFS=, '{ $3 = ""; $4 = ""; print }' <<<"$floor")
  line+=",$load1,$floor,$broker,"
  line+=$(jq -r "[$CURVE_JSON_RSS] | $CURVE_JQ_CSV" <<<"$json")
  line+=",$broker_rss,$STORE,$pg_us"
  echo "$line" >>"$CURVE_CSV"
  curve_row "$line" "$series"
}

# cpu_ticks PID: utime + stime of PID so far, in clock ticks.
cpu_ticks() {
  awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"
}

# curve_idle B ROUND K: build B's three services started on fresh databases
# with no load, on broker K, settled for 3 s, then their CPU and the
# broker's over CURVE_IDLE seconds, as % of one core; a row of idle.csv.
curve_idle() {
  local label=${CURVE_LABELS[$1]} bin=${CURVE_DIRS[$1]} round=$2 run pids=()
  local STORE=${CURVE_STORES[$1]}
  local BROKER_DIR=$BROKER_DIR AMQP_URL=${AMQP_URL:-} broker
  curve_use_broker "$3"
  broker=${CURVE_BROKER_LABELS[${3:-0}]-}
  local before=() i hz line=$label,$round sum=0 pct
  run=idle-$label$(curve_run_suffix "$3")-r$round
  BIN=$bin start_services "$run"
  BIN=$bin start_recovery "$run"
  pids=("$PAYMENT_PID" "$ACCOUNTING_PID" "$PID" "$(cat "$BROKER_DIR/rabbitmq.pid")")
  sleep 3
  for i in "${!pids[@]}"; do before[i]=$(cpu_ticks "${pids[i]}"); done
  sleep "$CURVE_IDLE"
  hz=$(getconf CLK_TCK)
  for i in "${!pids[@]}"; do
    pct=$(awk -v a="${before[i]}" -v b="$(cpu_ticks "${pids[i]}")" -v hz="$hz" -v s="$CURVE_IDLE" \
      'BEGIN { printf "%.2f", 100 * (b - a) / hz / s }')
    line+=",$pct"
    ((i < 3)) && sum=$(awk -v a="$sum" -v b="$pct" 'BEGIN { printf "%.2f", a + b }')
  done
  stop_services
  line+=",$sum,$broker"
  echo "$line" >>"$CURVE_OUT/idle.csv"
  awk -F, -v series="$(curve_series "$1" "$3")" '{
    printf "idle     %-12s round %s: %% of a core: payment %s, accounting %s, recovery %s (services %s), broker %s\n",
    series, $2, $3, $4, $5, $7, $6 }' <<<"$line"
}

# curve_ratio POINT: with several builds or brokers, each one's median
# system CPU per payment and broker CPU per payment at POINT over the first's.
curve_ratio() {
  local series=() b k
  for ((b = 0; b < ${#CURVE_LABELS[@]}; b++)); do
    for k in "${CURVE_BROKER_ORDER[@]}"; do series+=("$(curve_series "$b" "$k")"); done
  done
  awk -F, -v point="$1" -v series="${series[*]}" -v brokers="${#CURVE_BROKER_LABELS[@]}" \
    -v builds="${#CURVE_LABELS[@]}" '
    function median(s,   a, n, i, j, t) {
      n = split(s, a, " ")
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
      return n == 0 ? "" : (n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2)
    }
    NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    $2 == point && $12 != "" {
      key = brokers == 0 ? $1 : builds == 1 ? $col["broker"] : $1 "@" $col["broker"]
      v[key] = v[key] " " $12; w[key] = w[key] " " $11
    }
    END {
      n = split(series, s, " ")
      base = median(v[s[1]]); wbase = median(w[s[1]])
      for (i = 2; i <= n; i++) {
        m = median(v[s[i]]); mw = median(w[s[i]])
        if (base > 0 && m != "") out = out sprintf("  %s/%s %.2fx", s[i], s[1], m / base)
        if (wbase > 0 && mw != "") wout = wout sprintf("  %s/%s %.2fx", s[i], s[1], mw / wbase)
      }
      if (out != "") printf "%-8s system CPU per payment (median):%s\n", "", out
      if (brokers > 1 && wout != "") printf "%-8s broker CPU per payment (median):%s\n", "", wout
    }' "$CURVE_CSV"
}

# curve_broker_root VERSION: prints the rootfs file system holding that
# RabbitMQ release ("" for the host's own package), or fails.
curve_broker_root() {
  local v=$1 rootfs dir
  for rootfs in "" "${OUTBOX_RABBITMQ_ROOT:-/var/cache/outbox/rabbitmq-4.0}"; do
    for dir in "$rootfs"/usr/lib/rabbitmq/lib/rabbitmq_server-*; do
      dir=${dir##*rabbitmq_server-}
      if [[ $dir == "$v" || $dir == "$v".* ]]; then
        echo "$rootfs"
        return 0
      fi
    done
  done
  return 1
}

# curve_brokers_start: starts CURVE_BROKERS' nodes (none without it) and
# prints what each runs.
curve_brokers_start() {
  local k label tag rootfs erts otp
  for k in "${!CURVE_BROKER_LABELS[@]}"; do
    label=${CURVE_BROKER_LABELS[k]} tag='' rootfs=${CURVE_BROKER_ROOTS[k]}
    [[ $label == *+* ]] && tag=${label#*+}
    say "starting RabbitMQ node $label (takes ~15 s)"
    local conf_var=CURVE_BROKER_CONF_$tag erl_var=CURVE_BROKER_ERL_$tag
    OUTBOX_RABBITMQ_ROOT=$rootfs NODE_EXTRA_CONF=${tag:+${!conf_var:-}} NODE_ERL_ARGS=${tag:+${!erl_var:-}} \
      "$ROOT/scripts/rabbitmq_node.sh" start "${CURVE_BROKER_DIRS[k]}" >/dev/null
    erts=$(tr '\0' ' ' <"/proc/$(cat "${CURVE_BROKER_DIRS[k]}/rabbitmq.pid")/cmdline" |
      sed -nE 's|.*/erts-([0-9.]+)/.*|\1|p')
    otp=$(cat "$rootfs"/usr/lib/erlang/releases/*/OTP_VERSION 2>/dev/null | head -n 1)
    printf 'broker %-12s RabbitMQ %s, Erlang/OTP %s (erts %s)%s%s\n' "$label" \
      "$(basename "$rootfs"/usr/lib/rabbitmq/lib/rabbitmq_server-* | sed 's/^rabbitmq_server-//')" \
      "$otp" "$erts" "${tag:+, conf: $(tr '\n' ';' <<<"${!conf_var:-}" | sed 's/;$//')}" \
      "${tag:+, VM flags: ${!erl_var:-}}"
  done
}

# curve_brokers_stop: stops CURVE_BROKERS' nodes (bench.sh's clean-up).
curve_brokers_stop() {
  local k
  for k in "${!CURVE_BROKER_DIRS[@]}"; do
    OUTBOX_RABBITMQ_ROOT=${CURVE_BROKER_ROOTS[k]} \
      "$ROOT/scripts/rabbitmq_node.sh" stop "${CURVE_BROKER_DIRS[k]}" >/dev/null 2>&1 || true
  done
}

# curve_setup: checks the knobs, gets perf and matplotlib if they are
# needed and missing, makes BENCH_OUT.
curve_setup() {
  CURVE_RATES=${CURVE_RATES:-100,200,500,1000,2000,sat}
  CURVE_DURATION=${CURVE_DURATION:-20s}
  CURVE_ROUNDS=${CURVE_ROUNDS:-1}
  CURVE_FSYNC=${CURVE_FSYNC:-1}
  CURVE_IDLE=${CURVE_IDLE:-10}
  [[ $CURVE_IDLE =~ ^[0-9]+$ ]] || die "CURVE_IDLE: whole seconds, not '$CURVE_IDLE'"
  CURVE_FLOOR=${CURVE_FLOOR:-1}
  CURVE_FLOOR_TIME=${CURVE_FLOOR_TIME:-10s}
  local builds=() p b label dir
  IFS=, read -r -a CURVE_POINTS <<<"$CURVE_RATES"
  for p in "${CURVE_POINTS[@]}"; do
    [[ $p == sat || $p =~ ^[1-9][0-9]*$ ]] || die "CURVE_RATES: payments/s or sat, not '$p'"
  done
  [[ $CURVE_ROUNDS =~ ^[1-9][0-9]*$ ]] || die "CURVE_ROUNDS must be a positive number"
  [[ $CURVE_FLOOR == [01] ]] || die "CURVE_FLOOR: 1 or 0, not '$CURVE_FLOOR'"
  [[ $CURVE_FLOOR_TIME =~ ^[1-9][0-9]*(ms|s|m)$ ]] ||
    die "CURVE_FLOOR_TIME: a duration such as 10s, not '$CURVE_FLOOR_TIME'"
  ((SHARDS == 1 && ACC_SHARDS == 1)) || die "the curve runs without shards"
  IFS=, read -r -a builds <<<"${CURVE_BUILDS:-$(basename "$BUILD_DIR")=$BIN}"
  CURVE_LABELS=() CURVE_DIRS=() CURVE_STORES=() CURVE_WIDTH=5  # the table's build column
  local store
  for b in "${builds[@]}"; do
    label=${b%%=*} dir=${b#*=}
    [[ $b == *=* && $label =~ ^[A-Za-z0-9_-]+$ ]] || die "CURVE_BUILDS: LABEL=BIN_DIR, LABEL of [A-Za-z0-9_-], not '$b'"
    for p in payment_service accounting_service; do
      [[ -x $dir/$p ]] || die "CURVE_BUILDS: $dir/$p is missing"
    done
    # Each build on each store (BENCH_STORE): the label names the store when there are several.
    # shellcheck disable=SC2153 # STORES is bench.sh's
    for store in "${STORES[@]}"; do
      if ((${#STORES[@]} == 1)); then
        CURVE_LABELS+=("$label")
      elif ((${#builds[@]} == 1)); then
        CURVE_LABELS+=("$store")
      else
        CURVE_LABELS+=("$label-$store")
      fi
      CURVE_DIRS+=("$(cd "$dir" && pwd)") CURVE_STORES+=("$store")
    done
  done
  if [[ " ${STORES[*]} " == *" postgres "* && $CURVE_FLOOR == 1 && ! -x $BIN/pg_floor ]]; then
    die "the floor on PostgreSQL needs $BIN/pg_floor (cmake --build ... --target pg_floor); CURVE_FLOOR=0 goes without"
  fi
  CURVE_BROKER_LABELS=() CURVE_BROKER_ROOTS=() CURVE_BROKER_DIRS=() CURVE_BROKER_ORDER=('')
  local rootfs version
  for b in ${CURVE_BROKERS:-}; do
    [[ $b =~ ^[0-9]+(\.[0-9]+)*(\+[A-Za-z0-9_]+)?$ ]] ||
      die "CURVE_BROKERS: VERSION or VERSION+TAG (e.g. 3.10 4.0 4.0+s1), not '$b'"
    [[ " ${CURVE_BROKER_LABELS[*]} " != *" $b "* ]] || die "CURVE_BROKERS: $b twice"
    version=${b%%+*}
    rootfs=$(curve_broker_root "$version") ||
      die "CURVE_BROKERS: no RabbitMQ $version on the host or in ${OUTBOX_RABBITMQ_ROOT:-/var/cache/outbox/rabbitmq-4.0} (scripts/rabbitmq40.sh setup)"
    CURVE_BROKER_LABELS+=("$b") CURVE_BROKER_ROOTS+=("$rootfs") CURVE_BROKER_DIRS+=("$WORK/broker-$b")
  done
  ((${#CURVE_BROKER_LABELS[@]} == 0)) || CURVE_BROKER_ORDER=("${!CURVE_BROKER_LABELS[@]}")
  for ((b = 0; b < ${#CURVE_LABELS[@]}; b++)); do
    for p in "${CURVE_BROKER_ORDER[@]}"; do
      label=$(curve_series "$b" "$p")
      ((${#label} <= CURVE_WIDTH)) || CURVE_WIDTH=${#label}
    done
  done
  if [[ $CURVE_FSYNC == 1 ]]; then
    command -v perf >/dev/null || apt-get install -y -q linux-perf >/dev/null ||
      die "fsync counting needs perf (linux-perf); CURVE_FSYNC=0 goes without"
    perf stat -e syscalls:sys_enter_fdatasync -- true >/dev/null 2>&1 ||
      die "perf cannot count syscalls:sys_enter_fdatasync (tracefs mounted? root?); CURVE_FSYNC=0 goes without"
  fi
  if [[ ${CURVE_PLOT:-1} == 1 ]] && ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
    apt-get install -y -q --no-install-recommends python3-matplotlib >/dev/null ||
      die "the plot needs python3-matplotlib; CURVE_PLOT=0 goes without"
  fi
  CURVE_OUT=${BENCH_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/outbox_curve.XXXXXX")}
  mkdir -p "$CURVE_OUT/reports"
  CURVE_OUT=$(cd "$CURVE_OUT" && pwd)
  CURVE_CSV=$CURVE_OUT/curve.csv
  (IFS=,; echo "${CURVE_COLUMNS[*]}") >"$CURVE_CSV"
}

# curve_pg_floor ROUND: PostgreSQL's own floor on the run's server, no
# services running: bench/pg_floor, CURVE_FLOOR_TIME per shape; prints its
# lines and keeps its report in reports/.
curve_pg_floor() {
  local out=$CURVE_OUT/reports/pg-floor-r$1.txt secs pids
  secs=$(awk -v t="$CURVE_FLOOR_TIME" 'BEGIN {
    n = t + 0; if (t ~ /ms$/) n /= 1000; else if (t ~ /m$/) n *= 60; print n }')
  pids=$(IFS=,; echo "${PG_SERVER_PIDS[*]}")
  PGPASSFILE=$PGPASS_FILE run "$BIN/pg_floor" --conninfo="$(pg_url outbox)" --server_pids="$pids" \
    --seconds="$secs" --group=64 --shapes=serial,grouped,batched >"$out" ||
    die "pg_floor failed: $out"
  sed -nE 's/^(serial|grouped|batched) /pg floor r'"$1"' \1 /p' "$out"
}

# curve_order ROUND: sets ORDER, the brokers' indices for that round (the
# first order in odd rounds, reversed in even ones).
curve_order() {
  local i n=${#CURVE_BROKER_ORDER[@]}
  ORDER=()
  for ((i = 0; i < n; i++)); do
    if (($1 % 2)); then ORDER+=("${CURVE_BROKER_ORDER[i]}"); else ORDER+=("${CURVE_BROKER_ORDER[n - 1 - i]}"); fi
  done
}

# curve_run: the whole curve, then the CSV's path and the plot.
curve_run() {
  local p b k round ORDER=() floors=()
  echo
  curve_brokers_start
  echo "load curve: $CURVE_RATES payments/s (sat: $CONCURRENCY in flight), ${CURVE_DURATION} each" \
    "after ${WARMUP} warm-up, $CURVE_ROUNDS round(s), builds: ${CURVE_LABELS[*]}${CURVE_BROKER_LABELS[*]:+, brokers: ${CURVE_BROKER_LABELS[*]}}"
  echo "per payment over the whole run (warm-up, window, drain to SENT); fsyncs: fsync + fdatasync;" \
    "RSS: the services' peak (VmHWM), the broker's at the point's end (VmRSS)"
  if [[ $CURVE_FLOOR == 1 ]]; then
    echo "floor: each part alone at the point's rate, ${CURVE_FLOOR_TIME} each, services stopped:" \
      "trivial gRPC server per call, broker per persistent message, SQLite per 2-row tx;" \
      "pay = grpc + 2 x brk/m + 2 x sql/tx"
  fi
  if [[ $CURVE_FLOOR == 1 && " ${STORES[*]} " == *" postgres "* ]]; then
    echo "PostgreSQL's floor (bench/pg_floor, services stopped, once per round before the points):" \
      "2-row transactions, one per commit (serial), 64 payments per commit with an INSERT per row" \
      "(grouped) and with an INSERT per table (batched); server CPU from its postmaster and children"
  fi
  echo "rows also go to $CURVE_CSV"
  if ((CURVE_IDLE > 0)); then
    echo "build,round,payment_pct,accounting_pct,recovery_pct,broker_pct,services_pct,broker" >"$CURVE_OUT/idle.csv"
    for ((round = 1; round <= CURVE_ROUNDS; round++)); do
      curve_order "$round"
      for ((b = 0; b < ${#CURVE_LABELS[@]}; b++)); do
        for k in "${ORDER[@]}"; do
          say "curve: idle, $(curve_series "$b" "$k"), round $round/$CURVE_ROUNDS"
          curve_idle "$b" "$round" "$k"
        done
      done
    done
  fi
  if [[ $CURVE_FLOOR == 1 && " ${STORES[*]} " == *" postgres "* ]]; then
    for ((round = 1; round <= CURVE_ROUNDS; round++)); do
      say "curve: PostgreSQL's floor, round $round/$CURVE_ROUNDS"
      curve_pg_floor "$round"
    done
  fi
  curve_header
  for p in "${CURVE_POINTS[@]}"; do
    for ((round = 1; round <= CURVE_ROUNDS; round++)); do
      curve_order "$round"
      floors=()
      for k in "${ORDER[@]}"; do
        floors[${k:-0}]=$CURVE_FLOOR_NONE
        if [[ $CURVE_FLOOR == 1 && $p != sat ]]; then
          say "curve: floor at $p/s${k:+ on ${CURVE_BROKER_LABELS[k]}}, round $round/$CURVE_ROUNDS"
          curve_floor "$p" "$round" "$k"
          floors[${k:-0}]=$CURVE_FLOOR_FIELDS
        fi
      done
      for ((b = 0; b < ${#CURVE_LABELS[@]}; b++)); do
        for k in "${ORDER[@]}"; do
          CURVE_FLOOR_FIELDS=${floors[${k:-0}]}
          say "curve: point $p, $(curve_series "$b" "$k"), round $round/$CURVE_ROUNDS"
          curve_point "$b" "$p" "$round" "$k"
        done
      done
    done
    ((${#CURVE_LABELS[@]} * ${#CURVE_BROKER_ORDER[@]} == 1)) || curve_ratio "$p"
  done
  echo "CSV: $CURVE_CSV"
  echo "reports: $CURVE_OUT/reports/"
  [[ ${CURVE_PLOT:-1} == 1 ]] || return 0
  /usr/bin/python3 "$ROOT/scripts/plot_curve.py" "$CURVE_CSV" "$CURVE_OUT/curve.png" \
    --title "outbox load curve: $(hostname), $(nproc) cores, ${CURVE_DURATION} per point, $(date -u +%Y-%m-%d)" ||
    die "plot failed (the CSV is written)"
  echo "plot: $CURVE_OUT/curve.png"
}
