#!/usr/bin/env bash
# One-command demo: installs missing packages, builds, starts a private
# RabbitMQ node and the three services (payment, accounting, recovery) on free
# loopback ports (all state in a temp dir), then runs three phases:
#
#   1. healthy  outbox_demo creates DEMO_PAYMENTS payments, checks replays and
#               bad input, waits until all are SENT with one voucher each, and
#               prints its report.
#   2. fault    accounting_service is stopped (SIGTERM); DEMO_OUTAGE_PAYMENTS
#               payments are created while it is down and wait as SENDING, their
#               first copy in PAY_QUEUE. recovery_service sees nobody consuming
#               PAY_QUEUE: it re-publishes nothing, spends no attempt (with
#               RECOVERY_BASE_DELAY=1s and RECOVERY_MAX_ATTEMPTS=3 a blind retrier
#               would fail every row within 3 s) and raises one alert,
#               OutboxConsumerDown, at a real Alertmanager when Debian's
#               prometheus-alertmanager is installed (else in its log). After
#               DEMO_OUTAGE accounting is started again (same port and database):
#               every row turns SENT, the alert resolves, and a final report shows
#               the queue depth per payment during the outage, rows FAILED, alerts
#               raised and still active, the drain time, one voucher each, and
#               outbox_check's verdict on both databases.
#   3. reject   one payment in GBP, a currency accounting does not keep here
#               (ACCEPTED_CURRENCIES=EUR,USD): accounting answers with a business
#               reject, and payment_service closes its row FAILED at once (one
#               publish, no retry). outboxctl shows its history and failure
#               group, the operator acknowledges the group, and the audit
#               trail shows who did it.
#
#   scripts/demo.sh                 DEMO_PAYMENTS=1000 DEMO_OUTAGE=20s scripts/demo.sh
#
# Env: DEMO_PAYMENTS (300), DEMO_OUTAGE_PAYMENTS (200), DEMO_OUTAGE (15s; whole
# seconds, "s" optional), DEMO_CONCURRENCY (8), DEMO_TIMEOUT (60s: the longest
# wait for all payments to turn SENT, per phase), RECOVERY_BASE_DELAY (1s here),
# RECOVERY_MAX_ATTEMPTS (3 here), other RECOVERY_* / service variables are
# passed through; KEEP=1 keeps the temp dir, SKIP_BUILD=1 uses the binaries
# already in BUILD_DIR (build), BUILD_TYPE (RelWithDebInfo, as scripts/test.sh).
# gRPC runs with TLS and bearer tokens (certificates from scripts/dev_certs.sh
# and random API/ops tokens in the temp dir's certs/); DEMO_PLAINTEXT=1 turns
# both off. The operator's console (console/gateway.py) runs beside them: its
# address and the ops token file to sign in with are printed at the start, and
# with chromium installed an overview of it is saved at the end of each phase
# in DEMO_SHOTS (default BUILD_DIR/demo-console/; docs/images/demo/ holds the
# ones the README shows, made with DEMO_SHOTS=docs/images/demo).
# Exit status 0 only if the three phases and outbox_check are OK, PAY_QUEUE held at
# most 1.1 messages per payment during the outage, no row FAILED, at most 2
# alerts were raised and none is active at the end, every row was SENT within
# 10 s of accounting's return, and no service died on its own.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
SCRIPT=demo
# shellcheck source=SCRIPTDIR/lib/services.sh
source "$ROOT/scripts/lib/services.sh"

PAYMENTS=${DEMO_PAYMENTS:-300}
OUTAGE_PAYMENTS=${DEMO_OUTAGE_PAYMENTS:-200}
OUTAGE=$(seconds "${DEMO_OUTAGE:-15s}" DEMO_OUTAGE 15s)
CONCURRENCY=${DEMO_CONCURRENCY:-8}
TIMEOUT=${DEMO_TIMEOUT:-60s}
BASE_DELAY=${RECOVERY_BASE_DELAY:-1s}
MAX_ATTEMPTS=${RECOVERY_MAX_ATTEMPTS:-3}

build_binaries

WORK=$(mktemp -d -t outbox-demo.XXXXXX)
result=1

# stop_service NAME SIGNAL: signals it, waits for the exit (SIGKILL after 15 s), reaps it.
stop_service() {
  local name=$1 sig=$2 pid=${pid_of[$1]:-}
  [[ -n $pid ]] || return 0
  kill "-$sig" "$pid" 2>/dev/null || true
  await_exit "$pid" 150
  wait "$pid" 2>/dev/null && stop_status=0 || stop_status=$?
  unset "pid_of[$name]"
}

# shellcheck disable=SC2317  # invoked by the trap
cleanup() {
  trap - EXIT INT TERM
  if [[ -n ${shots_pid:-} ]]; then
    (echo quit >&"$shots") 2>/dev/null || true
    exec {shots}>&-
    for _ in $(seq 300); do alive "$shots_pid" || break; sleep 0.1; done
    kill -TERM "$shots_pid" 2>/dev/null || true  # it quits its browser on SIGTERM
    await_exit "$shots_pid" 50
  fi
  stop_services
  if [[ -n ${am_pid:-} ]]; then kill -TERM "$am_pid" 2>/dev/null || true; await_exit "$am_pid" 50; fi
  if [[ -n ${console_pid:-} ]]; then kill -TERM "$console_pid" 2>/dev/null || true; await_exit "$console_pid" 50; fi
  finish_work "*.log, broker/log/"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start NAME: start_service, then says so (as before, it goes on after 30 s without the started line).
start() {
  start_service "$1" || true
  echo "demo: started $1 (pid ${pid_of[$1]}), log $WORK/$1.log"
}

# field FILE LABEL: the first number after LABEL at the start of a report line.
field() { awk -v l="$2" 'index($0, l " ") == 1 { sub("^" l " +", ""); print $1 + 0; exit }' "$1"; }

# A real Alertmanager when Debian's package is there: the alert an operator sees.
alertmanager_url='' am_pid=''
if command -v prometheus-alertmanager >/dev/null; then
  free_port am_port
  printf 'route:\n  receiver: default\n  group_wait: 1s\nreceivers:\n  - name: default\n' >"$WORK/alertmanager.yml"
  prometheus-alertmanager --config.file="$WORK/alertmanager.yml" --storage.path="$WORK/alertmanager-data" \
    --web.listen-address="127.0.0.1:$am_port" --cluster.listen-address= >"$WORK/alertmanager.log" 2>&1 &
  am_pid=$!
  alertmanager_url="http://127.0.0.1:$am_port"
  echo "demo: Alertmanager at $alertmanager_url (pid $am_pid)"
fi
# am_alerts: "name name ..." of the alerts Alertmanager holds active now.
am_alerts() {
  [[ -n $alertmanager_url ]] || return 0
  curl -s "$alertmanager_url/api/v2/alerts" | grep -o '"alertname":"[A-Za-z]*"' | cut -d'"' -f4 | sort | uniq -c |
    awk '{ printf "%s%s x%s", (NR > 1 ? ", " : ""), $2, $1 }' || true
}

start_broker
free_port recovery_metrics_port
service_envs
client_security=()
pay_security=() ops_security=()
if [[ ${DEMO_PLAINTEXT:-0} != 1 ]]; then
  grpc_security "$WORK/certs"
  echo "demo: gRPC with TLS and tokens (CA, certificates and tokens in $WORK/certs)"
  pay_security=(--tls_ca_file="$WORK/certs/ca.pem" --token_file="$WORK/certs/api.token")
  ops_security=(--tls_ca_file="$WORK/certs/ca.pem" --token_file="$WORK/certs/ops.token")
fi
# debug: one line per payment per step, each with its trace id (the story below).
export OUTBOX_LOG_LEVEL=${OUTBOX_LOG_LEVEL:-debug}
payment_service_env+=(RECOVERY_BASE_DELAY="$BASE_DELAY" RECOVERY_MAX_ATTEMPTS="$MAX_ATTEMPTS")
accounting_service_env+=(ACCEPTED_CURRENCIES="${ACCEPTED_CURRENCIES:-EUR,USD}")
recovery_service_env+=(RECOVERY_BASE_DELAY="$BASE_DELAY" RECOVERY_MAX_ATTEMPTS="$MAX_ATTEMPTS"
  RECOVERY_HOUSEKEEPING_EVERY=1s RECOVERY_METRICS_LISTEN="127.0.0.1:$recovery_metrics_port"
  ALERTMANAGER_URL="$alertmanager_url")
start accounting_service
start payment_service
start recovery_service

# The operator's console (console/gateway.py) on recovery's ops API: open it
# while the demo runs. With chromium installed, a headless browser keeps its
# overview open and saves a screenshot of it at the end of each phase.
console_pid='' shots_pid='' shots_dir=$(realpath -m "${DEMO_SHOTS:-${BUILD_DIR:-build}/demo-console}")
free_port console_port
console_flags=(--listen "127.0.0.1:$console_port" --ops "recovery=127.0.0.1:$recovery_port")
ops_token_file=''
if [[ ${DEMO_PLAINTEXT:-0} != 1 ]]; then
  console_flags+=(--ops_ca "$WORK/certs/ca.pem")
  ops_token_file=$WORK/certs/ops.token
fi
/usr/bin/python3 console/gateway.py "${console_flags[@]}" >"$WORK/console.log" 2>&1 &
console_pid=$!
echo "demo: console at http://127.0.0.1:$console_port/ (ops token: ${ops_token_file:-none, the API is open})"
if [[ -x /usr/bin/chromedriver ]]; then
  mkdir -p "$shots_dir"
  exec {shots}> >(exec /usr/bin/python3 console/screenshots.py "http://127.0.0.1:$console_port/" \
    "$ops_token_file" "$shots_dir" --follow >"$WORK/screenshots.log" 2>&1)
  shots_pid=$!
  # Its page samples from sign-in on: wait for it, so the chart covers phase 1.
  for _ in $(seq 300); do
    grep -q '^screenshots: following' "$WORK/screenshots.log" 2>/dev/null && break
    alive "$shots_pid" || break
    sleep 0.1
  done
fi
# console_shot NAME: the console's overview now, as $shots_dir/console-NAME.png.
console_shot() {
  [[ -n $shots_pid ]] || return 0
  local path="$shots_dir/console-$1.png"
  (echo "$1" >&"$shots") 2>/dev/null || return 0
  # Saved before the demo goes on: its next step changes what the page shows.
  for _ in $(seq 150); do
    grep -qF "screenshots: $path" "$WORK/screenshots.log" 2>/dev/null && break
    alive "$shots_pid" || break
    sleep 0.1
  done
  echo "demo: console overview: $path"
}

demo() {
  "$BIN/outbox_demo" --payment_addr="127.0.0.1:$payment_port" \
    --accounting_addr="127.0.0.1:$accounting_port" --concurrency="$CONCURRENCY" \
    "${client_security[@]}" "$@"
}
# metric NAME: recovery_service's current value of a metric series (its /metrics), 0 if absent.
metric() {  # awk reads to the end: curl must not lose its pipe (exit 23 under pipefail)
  curl -s "127.0.0.1:$recovery_metrics_port/metrics" |
    awk -v n="$1" '!found && index($0, n " ") == 1 { print $NF + 0; found = 1 } END { if (!found) print 0 }'
}
# log_count WORD: lines of recovery_service's log whose event is WORD.
log_count() { awk -v w="$1" '$3 == w { n++ } END { print n + 0 }' "$WORK/recovery_service.log"; }

echo
echo "=== phase 1: healthy run ($PAYMENTS payments) ==="
set +e
demo --wait_healthy=60 --count="$PAYMENTS" --timeout="$TIMEOUT" | tee "$WORK/phase1.report"
phase1=${PIPESTATUS[0]}
set -e
console_shot phase1-healthy

echo
echo "=== phase 2: accounting_service down for ${OUTAGE}s, $OUTAGE_PAYMENTS payments meanwhile ==="
republished_before=$(metric outbox_republished_total)
alerts_before=$(log_count alert)
stop_status=0
stop_service accounting_service TERM
down_at=$SECONDS
echo "demo: stopped accounting_service (SIGTERM, exit status $stop_status)"
set +e
demo --count="$OUTAGE_PAYMENTS" --skip_checks --wait_sent=false --write_ids="$WORK/phase2.ids"
phase2_create=$?
set -e
outage_sending='?' max_depth=0 outage_failed=0 outage_alerts=''
while ((SECONDS - down_at < OUTAGE)); do
  sleep "$((OUTAGE - (SECONDS - down_at) < 3 ? OUTAGE - (SECONDS - down_at) : 3))"
  printf 'demo: t+%2ds  ' "$((SECONDS - down_at))"
  snapshot=$(demo --count=0 --wait_sent=false --expect_ids="$WORK/phase2.ids" || true)
  depth=$(metric "outbox_queue_ready{queue=\"PAY_QUEUE\"}")
  ((depth > max_depth)) && max_depth=$depth
  outage_failed=$(metric 'outbox_rows{status="FAILED"}')
  outage_alerts=$(am_alerts)
  echo "${snapshot/#outbox_demo: payments of --expect_ids/phase-2 payments}; PAY_QUEUE $depth ready," \
    "$(metric 'outbox_queue_consumers{queue="PAY_QUEUE"}') consumers; held $(metric outbox_delivery_held)," \
    "re-published $(($(metric outbox_republished_total) - republished_before)); Alertmanager: ${outage_alerts:-none}"
  if [[ $snapshot =~ SENDING\ ([0-9]+) ]]; then outage_sending=${BASH_REMATCH[1]}; fi
done
console_shot phase2-outage
back_ms=$(date +%s%3N)
start accounting_service
echo "demo: accounting_service is back after $((SECONDS - down_at))s (same port and database); waiting for the backlog to drain"
set +e
demo --count=0 --expect_ids="$WORK/phase2.ids" --wait_healthy=60 --timeout="$TIMEOUT" |
  tee "$WORK/phase2.report"
phase2=${PIPESTATUS[0]}
set -e
republished_total=$(($(metric outbox_republished_total) - republished_before))
# The alert resolves at the next round; give it a moment to reach Alertmanager.
for _ in $(seq 20); do
  [[ $(metric outbox_alerts_active) == 0 && -z $(am_alerts) ]] && break
  sleep 0.5
done
alerts_raised=$(($(log_count alert) - alerts_before))
alerts_active=$(metric outbox_alerts_active)
am_after=$(am_alerts)

echo
echo "=== outbox_check (both databases) ==="
check=0
outbox_check_both || check=$?

echo
# One payment of the outage, followed through the three logs by its trace id.
story_payment=$(head -n 1 "$WORK/phase2.ids" | awk '{ print $1 }')
story_trace=$(grep -h -o "payment_created payment_id=$story_payment .*trace_id=[0-9a-f]*" "$WORK/payment_service.log" |
  head -n 1 | sed 's/.*trace_id=//')
if [[ -n $story_trace ]]; then
  echo "=== one payment's story: grep trace_id=$story_trace over the three logs ==="
  grep -h "trace_id=$story_trace" "$WORK"/payment_service.log "$WORK"/accounting_service.log \
    "$WORK"/recovery_service.log | sort | cut -c1-220
fi

echo
echo "=== phase 3: a payment accounting will never book (a business reject) ==="
ctl_pay() { "$BIN/outboxctl" --payment_addr="127.0.0.1:$payment_port" "${pay_security[@]}" "$@"; }
ctl_ops() { "$BIN/outboxctl" --recovery_addr="127.0.0.1:$recovery_port" "${ops_security[@]}" "$@"; }
phase3=1
reject_id=$(ctl_pay --json payment create --idempotency_key="demo-reject-$$" --payer=alice \
  --payee=bob --amount=4200 --currency=GBP | grep -o '"payment_id": *"[^"]*"' | head -n 1 |
  sed 's/.*"\([^"]*\)"$/\1/') || true
echo "demo: created payment ${reject_id:-?} in GBP; accounting keeps EUR and USD"
for _ in $(seq 50); do
  [[ -n $reject_id ]] || break
  if ctl_pay payment get "$reject_id" | grep -q 'outbox.status *FAILED'; then phase3=0; break; fi
  sleep 0.2
done
if ((phase3 == 0)); then
  ctl_ops history "$reject_id" | tee "$WORK/reject.history"
  grep -q '^now: FAILED, attempts 1 of .*, rejected: ' "$WORK/reject.history" || phase3=1
  ctl_ops failures --kind rejected
  group=$(ctl_ops --json failures --kind rejected | grep -o '"group": *"[0-9a-f]*"' | head -n 1 |
    sed 's/.*"\([0-9a-f]*\)"$/\1/')
  ctl_ops acknowledge --group="$group" || phase3=1
  ctl_ops audit --limit 1
fi
console_shot phase3-reject

died=()
for name in "${!pid_of[@]}"; do alive "${pid_of[$name]}" || died+=("$name"); done

p2_total=$(wc -l <"$WORK/phase2.ids")
p2_sent=$(field "$WORK/phase2.report" "outbox SENT")
p2_sending=$(field "$WORK/phase2.report" "outbox SENDING")
p2_failed=$(field "$WORK/phase2.report" "outbox FAILED")
p2_vouchers=$(field "$WORK/phase2.report" "vouchers")
p2_dups=$(field "$WORK/phase2.report" "duplicates")
p2_lost=$(field "$WORK/phase2.report" "lost")
verdict() { if [[ $1 == 0 ]]; then echo OK; else echo "FAILED (exit $1)"; fi; }
ok=1
[[ $phase1 == 0 && $phase2_create == 0 && $phase2 == 0 && $check == 0 && $phase3 == 0 &&
  ${#died[@]} == 0 ]] || ok=0
# The figures an operator would hold the system to.
((max_depth * 10 <= p2_total * 11)) || ok=0
((outage_failed == 0 && ${p2_failed:-1} == 0)) || ok=0
((alerts_raised <= 2 && alerts_active == 0)) && [[ -z $am_after ]] || ok=0

echo
echo "=== demo report ==="
printf '%-34s %s\n' "phase 1 (healthy)" "$(verdict "$phase1"), $(field "$WORK/phase1.report" "outbox SENT") / $PAYMENTS payments SENT"
printf '%-34s %s\n' "phase 2 payments" "$p2_total / $OUTAGE_PAYMENTS created while accounting was down (${OUTAGE}s)"
printf '%-34s %s\n' "  SENDING during the outage" "$outage_sending (just before accounting came back)"
printf '%-34s %s\n' "  PAY_QUEUE during the outage" "at most $max_depth messages ($(awk -v d="$max_depth" -v p="$p2_total" 'BEGIN { printf "%.2f", p ? d / p : 0 }') per payment; limit 1.10)"
printf '%-34s %s\n' "  recovery" "held re-publishing while nobody consumed (re-published $republished_total, FAILED during outage $outage_failed)"
printf '%-34s %s\n' "  alerts" "$alerts_raised raised (limit 2); active at the end: $alerts_active$([[ -n $alertmanager_url ]] && echo ", at Alertmanager: ${am_after:-none} (during: ${outage_alerts:-none})")"
printf '%-34s %s\n' "  SENT / SENDING / FAILED" "${p2_sent:-?} / ${p2_sending:-?} / ${p2_failed:-?}"
printf '%-34s %s\n' "  vouchers" "${p2_vouchers:-?}"
printf '%-34s %s\n' "  duplicates" "${p2_dups:-?} (payments with more than one voucher)"
printf '%-34s %s\n' "  lost" "${p2_lost:-?}"
newest=$(awk '$1 == "newest" && $2 == "sent_at" { print $3 }' "$WORK/phase2.report")
if [[ ${p2_sending:-1} == 0 && ${p2_failed:-1} == 0 && -n $newest ]]; then
  drain_ms=$(($(date -d "$newest" +%s%3N) - back_ms))
  drained="all SENT $((drain_ms / 1000)).$(printf '%03d' $((drain_ms % 1000))) s after accounting_service was started again (limit 10 s)"
  ((drain_ms <= 10000)) || ok=0
else
  drained="NOT all SENT"
  ok=0
fi
printf '%-34s %s\n' "  drained" "$drained"
printf '%-34s %s\n' "phase 2 (accounting outage)" "$(verdict "$phase2")"
printf '%-34s %s\n' "phase 3 (business reject)" "$(verdict "$phase3")$( ((phase3 == 0)) && echo ": FAILED (rejected) after 1 publish, no retry; its group acknowledged")"
printf '%-34s %s\n' "outbox_check" "$(verdict "$check") ($(grep '^result:' "$WORK/outbox_check.txt" || echo 'no result'))"
if ((${#died[@]} > 0)); then printf '%-34s %s\n' "services died" "${died[*]}"; fi
if ((ok)); then result=0; fi
printf '%-34s %s\n' "RESULT" "$([[ $result == 0 ]] && echo OK || echo FAILED)"
exit "$result"
