#!/usr/bin/env bash
# One-command demo: installs missing packages, builds, starts a private
# RabbitMQ node and the three services (payment, accounting, recovery) on free
# loopback ports (all state in a temp dir), then runs two phases:
#
#   1. healthy  outbox_demo creates DEMO_PAYMENTS payments, checks replays and
#               bad input, waits until all are SENT with one voucher each, and
#               prints its report.
#   2. fault    accounting_service is stopped (SIGTERM); DEMO_OUTAGE_PAYMENTS
#               payments are created while it is down and pile up as SENDING;
#               recovery_service re-publishes them meanwhile (linear backoff,
#               RECOVERY_BASE_DELAY); after DEMO_OUTAGE accounting is started
#               again (same port and database), the backlog drains, and a final
#               report shows how many payments went through recovery, that all
#               ended SENT with exactly one voucher, and outbox_check's verdict
#               on both databases.
#
#   scripts/demo.sh                 DEMO_PAYMENTS=1000 DEMO_OUTAGE=20s scripts/demo.sh
#
# Env: DEMO_PAYMENTS (300), DEMO_OUTAGE_PAYMENTS (200), DEMO_OUTAGE (8s; whole
# seconds, "s" optional), DEMO_CONCURRENCY (8), DEMO_TIMEOUT (60s: the longest
# wait for all payments to turn SENT, per phase), RECOVERY_BASE_DELAY (1s here;
# with the default RECOVERY_MAX_ATTEMPTS=10 a row is failed after about 45 s
# without accounting), other RECOVERY_* / service variables are passed through;
# KEEP=1 keeps the temp dir, SKIP_BUILD=1 uses the binaries already in
# BUILD_DIR (build), BUILD_TYPE (Release).
# Exit status 0 only if both phases and outbox_check are OK, recovery did
# re-publish during the outage, and no service died on its own.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
SCRIPT=demo
# shellcheck source=SCRIPTDIR/lib/services.sh
source "$ROOT/scripts/lib/services.sh"

PAYMENTS=${DEMO_PAYMENTS:-300}
OUTAGE_PAYMENTS=${DEMO_OUTAGE_PAYMENTS:-200}
OUTAGE=$(seconds "${DEMO_OUTAGE:-8s}" DEMO_OUTAGE 8s)
CONCURRENCY=${DEMO_CONCURRENCY:-8}
TIMEOUT=${DEMO_TIMEOUT:-60s}
BASE_DELAY=${RECOVERY_BASE_DELAY:-1s}

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
  stop_services
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

start_broker
service_envs
payment_service_env+=(RECOVERY_BASE_DELAY="$BASE_DELAY")
recovery_service_env+=(RECOVERY_BASE_DELAY="$BASE_DELAY")
start accounting_service
start payment_service
start recovery_service

demo() {
  "$BIN/outbox_demo" --payment_addr="127.0.0.1:$payment_port" \
    --accounting_addr="127.0.0.1:$accounting_port" --concurrency="$CONCURRENCY" "$@"
}
# republished: messages recovery_service has re-published so far (from its log).
republished() {
  awk '$3 == "republished" { for (i = 4; i <= NF; ++i) if ($i ~ /^messages=/) n += substr($i, 10) }
       END { print n + 0 }' "$WORK/recovery_service.log"
}

echo
echo "=== phase 1: healthy run ($PAYMENTS payments) ==="
set +e
demo --wait_healthy=60 --count="$PAYMENTS" --timeout="$TIMEOUT" | tee "$WORK/phase1.report"
phase1=${PIPESTATUS[0]}
set -e

echo
echo "=== phase 2: accounting_service down for ${OUTAGE}s, $OUTAGE_PAYMENTS payments meanwhile ==="
republished_before=$(republished)
stop_status=0
stop_service accounting_service TERM
down_at=$SECONDS
echo "demo: stopped accounting_service (SIGTERM, exit status $stop_status)"
set +e
demo --count="$OUTAGE_PAYMENTS" --skip_checks --wait_sent=false --write_ids="$WORK/phase2.ids"
phase2_create=$?
set -e
outage_sending='?'
while ((SECONDS - down_at < OUTAGE)); do
  sleep "$((OUTAGE - (SECONDS - down_at) < 2 ? OUTAGE - (SECONDS - down_at) : 2))"
  printf 'demo: t+%2ds  ' "$((SECONDS - down_at))"
  snapshot=$(demo --count=0 --wait_sent=false --expect_ids="$WORK/phase2.ids" || true)
  echo "${snapshot/#outbox_demo: payments of --expect_ids/phase-2 payments}; recovery re-published $(($(republished) - republished_before)) messages"
  if [[ $snapshot =~ SENDING\ ([0-9]+) ]]; then outage_sending=${BASH_REMATCH[1]}; fi
done
back_ms=$(date +%s%3N)
start accounting_service
echo "demo: accounting_service is back after $((SECONDS - down_at))s (same port and database); waiting for the backlog to drain"
set +e
demo --count=0 --expect_ids="$WORK/phase2.ids" --wait_healthy=60 --timeout="$TIMEOUT" |
  tee "$WORK/phase2.report"
phase2=${PIPESTATUS[0]}
set -e
republished_total=$(($(republished) - republished_before))

echo
echo "=== outbox_check (both databases) ==="
check=0
outbox_check_both || check=$?

died=()
for name in "${!pid_of[@]}"; do alive "${pid_of[$name]}" || died+=("$name"); done

p2_total=$(wc -l <"$WORK/phase2.ids")
p2_retried=$(field "$WORK/phase2.report" "attempts > 1")
p2_sent=$(field "$WORK/phase2.report" "outbox SENT")
p2_sending=$(field "$WORK/phase2.report" "outbox SENDING")
p2_failed=$(field "$WORK/phase2.report" "outbox FAILED")
p2_vouchers=$(field "$WORK/phase2.report" "vouchers")
p2_dups=$(field "$WORK/phase2.report" "duplicates")
p2_lost=$(field "$WORK/phase2.report" "lost")
verdict() { if [[ $1 == 0 ]]; then echo OK; else echo "FAILED (exit $1)"; fi; }
ok=1
[[ $phase1 == 0 && $phase2_create == 0 && $phase2 == 0 && $check == 0 && ${#died[@]} == 0 ]] || ok=0
[[ ${p2_retried:-0} -gt 0 ]] || ok=0

echo
echo "=== demo report ==="
printf '%-34s %s\n' "phase 1 (healthy)" "$(verdict "$phase1"), $(field "$WORK/phase1.report" "outbox SENT") / $PAYMENTS payments SENT"
printf '%-34s %s\n' "phase 2 payments" "$p2_total / $OUTAGE_PAYMENTS created while accounting was down (${OUTAGE}s)"
printf '%-34s %s\n' "  SENDING during the outage" "$outage_sending (just before accounting came back)"
printf '%-34s %s\n' "  went through recovery" "${p2_retried:-?} (attempts > 1; recovery re-published $republished_total messages)"
printf '%-34s %s\n' "  SENT / SENDING / FAILED" "${p2_sent:-?} / ${p2_sending:-?} / ${p2_failed:-?}"
printf '%-34s %s\n' "  vouchers" "${p2_vouchers:-?}"
printf '%-34s %s\n' "  duplicates" "${p2_dups:-?} (payments with more than one voucher)"
printf '%-34s %s\n' "  lost" "${p2_lost:-?}"
newest=$(awk '$1 == "newest" && $2 == "sent_at" { print $3 }' "$WORK/phase2.report")
if [[ ${p2_sending:-1} == 0 && ${p2_failed:-1} == 0 && -n $newest ]]; then
  drain_ms=$(($(date -d "$newest" +%s%3N) - back_ms))
  drained="all SENT $((drain_ms / 1000)).$(printf '%03d' $((drain_ms % 1000))) s after accounting_service was started again"
else
  drained="NOT all SENT"
fi
printf '%-34s %s\n' "  drained" "$drained"
printf '%-34s %s\n' "phase 2 (accounting outage)" "$(verdict "$phase2")"
printf '%-34s %s\n' "outbox_check" "$(verdict "$check") ($(grep '^result:' "$WORK/outbox_check.txt" || echo 'no result'))"
if ((${#died[@]} > 0)); then printf '%-34s %s\n' "services died" "${died[*]}"; fi
if [[ ${p2_retried:-0} -le 0 ]]; then
  printf '%-34s %s\n' "recovery" "NOTHING went through recovery (outage too short?)"
fi
if ((ok)); then result=0; fi
printf '%-34s %s\n' "RESULT" "$([[ $result == 0 ]] && echo OK || echo FAILED)"
exit "$result"
