#!/usr/bin/env bash
# A long run at a steady load, to show that nothing grows that should level
# off. Starts a private RabbitMQ node and the three services (defaults,
# except short archival settings so that archival runs many times), offers
# SOAK_RATE payments/s with outbox_bench in one-minute rounds, and after each
# round samples, per process (payment, accounting, recovery, the broker):
# RSS, open file descriptors and threads; the sizes of payment.db,
# accounting.db and their WAL files; rows per table; the broker's queue
# depths; the round's create p99. Writes soak.csv and soak.png (gnuplot),
# then judges the last third of the run by a fitted slope per minute (Theil-Sen)
# for each series against a stated bound (soak.txt), and checks that every
# payment is SENT with one voucher (outbox_check).
#
#   scripts/soak.sh [DURATION]      DURATION in whole minutes (30m by default; "m" optional)
#   scripts/soak.sh --judge DIR     judge and plot DIR/soak.csv of an earlier run again
#
# Short retention settings so that archival (RECOVERY_RETENTION=2m) and the
# pruning of processed message ids (PROCESSED_RETENTION=2m) run many times.
#
# Env: SOAK_RATE (1000), SOAK_OUT (results directory; default a new temp
# dir), SOAK_BROKER_DIR (an existing node's directory, scripts/rabbitmq_node.sh
# layout, instead of a private one: the tests' shared node), KEEP=1,
# SKIP_BUILD=1, BUILD_DIR (build). Exit 0 only if every bound holds, every
# round drained, and outbox_check is clean.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
SCRIPT=soak
# shellcheck source=SCRIPTDIR/lib/services.sh
source "$ROOT/scripts/lib/services.sh"
# shellcheck source=SCRIPTDIR/lib/sqlite.sh
source "$ROOT/scripts/lib/sqlite.sh"

minutes=${1:-30m}
minutes=${minutes%m}
if [[ $minutes != --judge && ! $minutes =~ ^[1-9][0-9]*$ ]]; then
  echo "soak: DURATION must be whole minutes, e.g. 30m" >&2
  exit 2
fi
RATE=${SOAK_RATE:-1000}
# The series that must level off, and the largest slope per minute allowed
# over the last third of the run. Tables that keep business records (payments,
# the archive, vouchers) grow with the load by design; their bound is the
# load itself plus 10 % (see docs/operations.md, "Long runs").
declare -A bound=(
  [payment_rss_kib]=1024 [accounting_rss_kib]=1024 [recovery_rss_kib]=1024 [broker_rss_kib]=4096
  [payment_fds]=0.5 [accounting_fds]=0.5 [recovery_fds]=0.5 [broker_fds]=2
  [payment_threads]=0.5 [accounting_threads]=0.5 [recovery_threads]=0.5
  [payment_wal_kib]=2048 [accounting_wal_kib]=2048
  [outbox_rows]=$((RATE * 6)) [pay_queue_ready]=$((RATE)) [acc_queue_ready]=$((RATE))
  [payments_rows]=$((RATE * 66)) [archive_rows]=$((RATE * 66))
  [vouchers_rows]=$((RATE * 66)) [processed_rows]=$((RATE * 6))
  [create_p99_ms]=5
)

# The CSV's columns, in order.
columns=(minute
  payment_rss_kib accounting_rss_kib recovery_rss_kib broker_rss_kib
  payment_fds accounting_fds recovery_fds broker_fds
  payment_threads accounting_threads recovery_threads
  payment_db_kib payment_wal_kib accounting_db_kib accounting_wal_kib
  payments_rows outbox_rows archive_rows vouchers_rows processed_rows
  pay_queue_ready acc_queue_ready create_p99_ms created create_failed not_sent)

# judge_and_plot: slopes per minute of every bounded series over the last
# third of $OUT/soak.csv (at least the last 3 samples) against its bound,
# into $OUT/soak.txt; draws $OUT/soak.png. Sets ok=0 if a series grows.
judge_and_plot() {
  local minutes from slope verdict i col
  minutes=$(($(wc -l <"$OUT/soak.csv") - 1))
  total=$(awk -F, 'NR > 1 { s += $25 } END { print s + 0 }' "$OUT/soak.csv")
  from=$((minutes - minutes / 3 + 1))
  ((minutes - from + 1 >= 3)) || from=$((minutes > 3 ? minutes - 2 : 1))
  ok=1
{
  echo "soak: $minutes minutes at ${RATE}/s, $total payments; slopes per minute over minutes $from..$minutes"
  printf '%-20s %14s %14s %s\n' series slope/min bound verdict
  for i in "${!columns[@]}"; do
    col=${columns[$i]}
    [[ -n ${bound[$col]:-} ]] || continue
    # Theil-Sen: the median of the slopes between every two samples, so one
    # stalled minute (another process on the machine) does not make a trend.
    slope=$(awk -F, -v c=$((i + 1)) -v from="$from" 'NR > 1 && $1 >= from { n++; x[n] = $1; y[n] = $c }
      END {
        m = 0
        for (a = 1; a <= n; a++) for (b = a + 1; b <= n; b++) if (x[b] != x[a]) s[++m] = (y[b] - y[a]) / (x[b] - x[a])
        for (a = 2; a <= m; a++) { v = s[a]; for (b = a - 1; b >= 1 && s[b] > v; b--) s[b + 1] = s[b]; s[b + 1] = v }
        printf "%.3f", m == 0 ? 0 : (m % 2 ? s[(m + 1) / 2] : (s[m / 2] + s[m / 2 + 1]) / 2)
      }' "$OUT/soak.csv")
    verdict=ok
    awk -v s="$slope" -v b="${bound[$col]}" 'BEGIN { exit !(s <= b) }' || { verdict=GROWS; ok=0; }
    printf '%-20s %14s %14s %s\n' "$col" "$slope" "${bound[$col]}" "$verdict"
  done
} | tee "$OUT/soak.txt"
grep -q GROWS "$OUT/soak.txt" && ok=0

gnuplot <<EOF || echo "soak: gnuplot failed; the CSV is complete" >&2
set datafile separator ','
set terminal pngcairo size 1400,1000 font ',9' noenhanced
set output '$OUT/soak.png'
set multiplot layout 3,2 title "outbox soak: ${minutes} min at ${RATE}/s"
set key left top
set xlabel 'minute'
set ylabel 'MiB'
set title 'RSS'
plot for [c=2:5] '$OUT/soak.csv' using 1:(column(c)/1024) with lines title columnhead(c)
set ylabel 'count'
set title 'open fds and threads'
plot for [c=6:12] '$OUT/soak.csv' using 1:c with lines title columnhead(c)
set ylabel 'MiB'
set title 'database and WAL sizes'
plot for [c=13:16] '$OUT/soak.csv' using 1:(column(c)/1024) with lines title columnhead(c)
set ylabel 'rows'
set title 'rows per table'
plot for [c=17:21] '$OUT/soak.csv' using 1:c with lines title columnhead(c)
set ylabel 'messages'
set title 'broker queue depth (ready)'
plot for [c=22:23] '$OUT/soak.csv' using 1:c with lines title columnhead(c)
set ylabel 'ms'
set title 'create p99 per round'
plot '$OUT/soak.csv' using 1:24 with lines title 'create_p99_ms'
unset multiplot
EOF
}

# --judge DIR: judge and plot an existing DIR/soak.csv again, nothing else.
if [[ ${1:-} == --judge ]]; then
  OUT=${2:?--judge needs the results directory}
  [[ -s $OUT/soak.csv ]] || { echo "soak: no $OUT/soak.csv" >&2; exit 2; }
  judge_and_plot
  ((ok)) && exit 0 || exit 1
fi

build_binaries
[[ -x $BIN/outbox_bench ]] || { echo "soak: $BIN/outbox_bench is missing" >&2; exit 1; }
if ! command -v gnuplot >/dev/null; then
  echo "soak: installing gnuplot-nox (for soak.png)"
  SUDO=()
  [[ $(id -u) == 0 ]] || SUDO=(sudo)
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    gnuplot-nox >/dev/null || { echo "soak: apt-get install gnuplot-nox failed" >&2; exit 1; }
fi

WORK=$(mktemp -d -t outbox-soak.XXXXXX)
OUT=${SOAK_OUT:-$(mktemp -d -t outbox-soak-results.XXXXXX)}
mkdir -p "$OUT"
result=1
declare -A pid_of=()
cleanup() {
  stop_services
  # A node we did not start is not ours to stop.
  if [[ -n ${SOAK_BROKER_DIR:-} ]]; then rm -f "$WORK/broker"; fi
  finish_work "logs"
}
trap cleanup EXIT

if [[ -n ${SOAK_BROKER_DIR:-} ]]; then
  ln -s "$SOAK_BROKER_DIR" "$WORK/broker"
  payment_port='' accounting_port='' recovery_port=''
  free_port payment_port
  free_port accounting_port
  free_port recovery_port
else
  start_broker
fi
# shellcheck disable=SC1091
source "$WORK/broker/broker.env"
service_envs
queues=(PAY_QUEUE=soak.PAY ACC_QUEUE=soak.ACC)
# Processed message ids older than 2 minutes are pruned (the dedup table
# levels off like the outbox); payments, vouchers and the archive are kept.
accounting_service_env+=("${queues[@]}" PROCESSED_RETENTION=2m)
payment_service_env+=("${queues[@]}")
# Archival many times per run: SENT rows older than 2 minutes, every 10 s.
recovery_service_env+=("${queues[@]}" RECOVERY_RETENTION=2m RECOVERY_HOUSEKEEPING_EVERY=10s)
for s in accounting_service payment_service recovery_service; do
  start_service "$s" || { echo "soak: $s did not start" >&2; exit 1; }
done

ctl() {
  HOME=$RABBITMQ_HOME_DIR RABBITMQ_CTL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}" \
    RABBITMQ_CTL_DIST_PORT_MIN=$((DIST_PORT + 10000)) RABBITMQ_CTL_DIST_PORT_MAX=$((DIST_PORT + 10010)) \
    timeout 30 rabbitmqctl -q -n "$RABBITMQ_NODE" "$@"
}
# The samplers print one number (0 when there is nothing to read) and never fail.
status_of() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status" 2>/dev/null || true; }
fds_of() { find "/proc/$1/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l || true; }
size_kib() { if [[ -f $1 ]]; then echo $(($(stat -c %s "$1") / 1024)); else echo 0; fi; }
rows() { sqlite_read "$1" "SELECT count(*) FROM $2" 2>/dev/null || true; }
queue_ready() { { ctl list_queues name messages_ready 2>/dev/null || true; } | awk -v q="$1" '$1 == q { print $2 }'; }
figure() { { grep -o "\"$2\":[-0-9.eE+a-z]*" "$1" || true; } | tail -1 | cut -d: -f2; }

broker_pid=$(cat "$RABBITMQ_PIDFILE")
(IFS=,; echo "${columns[*]}") >"$OUT/soak.csv"

echo "soak: ${minutes} one-minute rounds at ${RATE}/s; samples in $OUT/soak.csv"
drained=1
for ((m = 1; m <= minutes; m++)); do
  round=$WORK/round-$m.txt
  "$BIN/outbox_bench" --payment_addr="127.0.0.1:$payment_port" \
    --accounting_addr="127.0.0.1:$accounting_port" --rate="$RATE" --duration=60s --warmup=0s \
    --drain_timeout=60s --label="soak-$m" --json >"$round" 2>&1 || drained=0
  created=$(figure "$round" create_ok)
  created=${created%.*}
  row=("$m")
  for name in payment_service accounting_service recovery_service; do
    row+=("$(status_of "${pid_of[$name]}" VmRSS)")
  done
  row+=("$(status_of "$broker_pid" VmRSS)")
  for pid in "${pid_of[payment_service]}" "${pid_of[accounting_service]}" "${pid_of[recovery_service]}" "$broker_pid"; do
    row+=("$(fds_of "$pid")")
  done
  for name in payment_service accounting_service recovery_service; do
    row+=("$(status_of "${pid_of[$name]}" Threads)")
  done
  row+=("$(size_kib "$WORK/payment.db")" "$(size_kib "$WORK/payment.db-wal")"
    "$(size_kib "$WORK/accounting.db")" "$(size_kib "$WORK/accounting.db-wal")")
  row+=("$(rows "$WORK/payment.db" payments)" "$(rows "$WORK/payment.db" outbox)"
    "$(rows "$WORK/payment.db" outbox_archive)" "$(rows "$WORK/accounting.db" vouchers)"
    "$(rows "$WORK/accounting.db" processed_messages)")
  row+=("$(queue_ready soak.PAY)" "$(queue_ready soak.ACC)")
  row+=("$(figure "$round" create_p99_ms)" "${created:-0}" "$(figure "$round" create_failed)"
    "$(figure "$round" measured_not_sent)")
  for i in "${!row[@]}"; do [[ -n ${row[$i]} ]] || row[i]=0; done
  (IFS=,; echo "${row[*]}") >>"$OUT/soak.csv"
  echo "soak: minute $m: created ${row[24]}, create p99 ${row[23]} ms, payment RSS ${row[1]} KiB, outbox rows ${row[17]}, archive ${row[18]}"
  for name in payment_service accounting_service recovery_service; do
    alive "${pid_of[$name]}" || { echo "soak: $name died" >&2; exit 1; }
  done
done

judge_and_plot

stop_services
if outbox_check_both >/dev/null; then check=0; else check=1; fi
vouchers=$(rows "$WORK/accounting.db" vouchers)
payments=$(rows "$WORK/payment.db" payments)
echo "soak: $payments payments, $vouchers vouchers, outbox_check $( ((check == 0)) && echo clean || echo FAILED), every round drained: $( ((drained)) && echo yes || echo no)" |
  tee -a "$OUT/soak.txt"
cp "$WORK"/*.log "$OUT/" 2>/dev/null || true
if ((ok && drained && check == 0 && payments == vouchers)); then
  result=0
  echo "soak: PASS ($OUT/soak.csv, $OUT/soak.png, $OUT/soak.txt)"
else
  echo "soak: FAIL ($OUT/soak.txt)" >&2
fi
exit "$result"
