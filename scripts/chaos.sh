#!/usr/bin/env bash
# Chaos run: installs missing packages and builds (like scripts/demo.sh),
# starts a private RabbitMQ node and the three services on free loopback ports
# (all state in a temp dir), and drives payments through random faults:
#
#   - outbox_demo creates payments for CHAOS_DURATION with --retry: a failed
#     CreatePayment is retried with the same idempotency key until it succeeds
#     (as a client of an idempotent API would), and it records the payment ids
#     it was given;
#   - meanwhile, every CHAOS_INTERVAL a random target is hit: payment_service,
#     accounting_service or recovery_service is killed with SIGKILL and started
#     again with the same environment, port and database; or (1 in
#     CHAOS_BROKER_ODDS faults) the broker is stopped and started again on the
#     same data directory;
#   - then it waits for quiescence (nothing SENDING, or CHAOS_QUIESCE_TIMEOUT),
#     audits ALL payments and vouchers (outbox_demo --report_all) and runs
#     outbox_check on both databases.
#
# Report: payments created, faults injected by kind, SENT/SENDING/FAILED,
# vouchers, lost (acknowledged to the client but missing from payment.db, or
# without a voucher after quiescence), duplicated (payments with more than one
# voucher), outbox_check's verdict. Exit 0 only if lost == 0, duplicated == 0,
# outbox_check is OK and no service died on its own (one we did not kill).
#
# recovery_service runs with RECOVERY_BASE_DELAY=1s, RECOVERY_MAX_DELAY=5s,
# RECOVERY_LEASE_TTL=3s and RECOVERY_MAX_ATTEMPTS=1000 (payment_service gets the
# same backoff and max attempts), so nothing becomes FAILED during the chaos and
# the backlog drains quickly afterwards.
#
#   scripts/chaos.sh                CHAOS_DURATION=30s CHAOS_SEED=1234 scripts/chaos.sh
#
# Env: CHAOS_DURATION (60s; whole seconds, "s" optional), CHAOS_INTERVAL (2-6:
# seconds between two faults, "N" or "LO-HI" for a random pause in [LO, HI] in
# steps of 0.1 s), CHAOS_SEED (random, printed: the same seed gives the same
# sequence of targets and pauses), CHAOS_BROKER_ODDS (5), CHAOS_CONCURRENCY (4
# client threads), CHAOS_QUIESCE_TIMEOUT (120s); KEEP=1 keeps the temp dir,
# SKIP_BUILD=1 uses the binaries already in BUILD_DIR (build), BUILD_TYPE (RelWithDebInfo, as scripts/test.sh).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
SCRIPT=chaos
# shellcheck source=SCRIPTDIR/lib/services.sh
source "$ROOT/scripts/lib/services.sh"

DURATION=$(seconds "${CHAOS_DURATION:-60s}" CHAOS_DURATION 30s)
INTERVAL=${CHAOS_INTERVAL:-2-6}
if [[ $INTERVAL =~ ^([0-9]+)-([0-9]+)$ ]] && ((BASH_REMATCH[1] <= BASH_REMATCH[2])); then
  interval_lo=$((BASH_REMATCH[1] * 10)) interval_hi=$((BASH_REMATCH[2] * 10))
elif [[ $INTERVAL =~ ^[0-9]+$ ]]; then
  interval_lo=$((INTERVAL * 10)) interval_hi=$((INTERVAL * 10))
else
  echo "chaos: CHAOS_INTERVAL must be N or LO-HI seconds (got '$INTERVAL')" >&2; exit 2
fi
((interval_hi > 0)) || { echo "chaos: CHAOS_INTERVAL must be > 0" >&2; exit 2; }
SEED=${CHAOS_SEED:-$(($(od -An -tu2 -N2 /dev/urandom)))}
[[ $SEED =~ ^[0-9]+$ ]] || { echo "chaos: CHAOS_SEED must be a number" >&2; exit 2; }
BROKER_ODDS=${CHAOS_BROKER_ODDS:-5}
[[ $BROKER_ODDS =~ ^[1-9][0-9]*$ ]] || { echo "chaos: CHAOS_BROKER_ODDS must be >= 1" >&2; exit 2; }
CONCURRENCY=${CHAOS_CONCURRENCY:-4}
QUIESCE_TIMEOUT=${CHAOS_QUIESCE_TIMEOUT:-120s}

build_binaries

WORK=$(mktemp -d -t outbox-chaos.XXXXXX)
SERVICES=(payment_service accounting_service recovery_service)
declare -A faults=([payment_service]=0 [accounting_service]=0 [recovery_service]=0 [broker]=0)
unexpected=()         # services found dead that we had not killed
driver=''
result=1

# now_ms: sets NOW_MS to the wall clock in milliseconds (no subshell, so the
# seeded RANDOM sequence stays this shell's alone).
now_ms() { local t=${EPOCHREALTIME//[.,]/}; NOW_MS=$((10#$t / 1000)); }
now_ms
T0=$NOW_MS
# stamp: sets STAMP to the time since the start, e.g. "t+12.3s".
stamp() { now_ms; local d=$(((NOW_MS - T0) / 100)); STAMP="t+$((d / 10)).$((d % 10))s"; }

# shellcheck disable=SC2317  # invoked by the trap
cleanup() {
  trap - EXIT INT TERM
  if [[ -n $driver ]]; then kill -TERM "$driver" 2>/dev/null || true; fi
  stop_services
  finish_work "*.log, broker/log/, chaos.log"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start NAME: start_service; exits 1 if NAME does not log its started line within 30 s.
start() {
  start_service "$1" && return 0
  echo "chaos: $1 (pid ${pid_of[$1]}) did not log ${1}_started within 30 s" >&2
  exit 1
}

# took: sets TOOK to the time since $1 (ms), e.g. "0.3 s".
took() { now_ms; local d=$(((NOW_MS - $1) / 100)); TOOK="$((d / 10)).$((d % 10)) s"; }

# kill_service NAME: SIGKILL, reap, start again.
kill_service() {
  local name=$1 old=${pid_of[$1]} at
  stamp
  at=$NOW_MS
  kill -KILL "$old" 2>/dev/null || true
  wait "$old" 2>/dev/null || true
  start "$name"
  faults[$name]=$((faults[$name] + 1))
  took "$at"
  log "$STAMP kill -9 $name (pid $old); restarted as pid ${pid_of[$name]} (up after $TOOK)"
}

restart_broker() {
  local at
  stamp
  at=$NOW_MS
  bash scripts/rabbitmq_node.sh stop "$WORK/broker" >>"$WORK/chaos.log" 2>&1
  bash scripts/rabbitmq_node.sh start "$WORK/broker" >>"$WORK/chaos.log" 2>&1
  faults[broker]=$((faults[broker] + 1))
  took "$at"
  log "$STAMP broker stopped and started again (up after $TOOK)"
}

# creating: the driver is still creating payments (it prints "created" when done).
creating() { alive "$driver" && ! grep -q '^outbox_demo: created' "$WORK/driver.out"; }

log() { echo "chaos: $*" | tee -a "$WORK/chaos.log"; }

# check_services: restarts (and records) any service that died on its own.
check_services() {
  local name
  for name in "${SERVICES[@]}"; do
    if ! alive "${pid_of[$name]}"; then
      wait "${pid_of[$name]}" 2>/dev/null || true
      unexpected+=("$name")
      stamp
      log "$STAMP UNEXPECTED: $name (pid ${pid_of[$name]}) died on its own; starting it again"
      tail -n 5 "$WORK/$name.log" | sed 's/^/    /'
      start "$name"
    fi
  done
}

start_broker
retry_env=(RECOVERY_BASE_DELAY=1s RECOVERY_MAX_DELAY=5s RECOVERY_MAX_ATTEMPTS=1000)
service_envs
payment_service_env+=("${retry_env[@]}")
recovery_service_env+=(RECOVERY_LEASE_TTL=3s "${retry_env[@]}")
for name in "${SERVICES[@]}"; do
  start "$name"
  echo "chaos: started $name (pid ${pid_of[$name]}), log $WORK/$name.log"
done

demo() {
  "$BIN/outbox_demo" --payment_addr="127.0.0.1:$payment_port" \
    --accounting_addr="127.0.0.1:$accounting_port" "$@"
}

echo
echo "=== chaos: ${DURATION}s of payments, a fault every ${INTERVAL}s, seed $SEED (CHAOS_SEED=$SEED repeats the schedule) ==="
"$BIN/outbox_demo" --payment_addr="127.0.0.1:$payment_port" --wait_healthy=60 \
  --count=0 --wait_sent=false >/dev/null || { echo "chaos: payment_service is not healthy" >&2; exit 1; }
demo --duration="${DURATION}s" --retry --timeout=120s --concurrency="$CONCURRENCY" --skip_checks \
  --wait_sent=false --write_ids="$WORK/acked.ids" >"$WORK/driver.out" 2>"$WORK/driver.err" &
driver=$!
now_ms
T0=$NOW_MS
RANDOM=$SEED
while creating; do
  pause=$((interval_lo + RANDOM % (interval_hi - interval_lo + 1)))
  pick=$((RANDOM % (3 * BROKER_ODDS)))  # 3 of them: broker; the rest split over the services
  now_ms
  wake=$((NOW_MS + pause * 100))
  while ((NOW_MS < wake)) && creating; do sleep 0.1; now_ms; done
  creating || break
  check_services
  if ((pick < 3)); then
    restart_broker
  else
    kill_service "${SERVICES[$(((pick - 3) % 3))]}"
  fi
done
stamp
log "$STAMP the driver stopped creating payments; no more faults"
driver_rc=0
wait "$driver" || driver_rc=$?
driver=''
check_services
sed 's/^/  /' "$WORK/driver.out"
if [[ -s $WORK/driver.err ]]; then
  echo "  driver stderr ($(wc -l <"$WORK/driver.err") lines, first 5):"
  head -n 5 "$WORK/driver.err" | sed 's/^/    /'
fi

echo
echo "=== quiescence: waiting up to $QUIESCE_TIMEOUT for nothing to be SENDING, then auditing everything ==="
set +e
demo --count=0 --report_all --expect_ids="$WORK/acked.ids" --wait_healthy=60 \
  --timeout="$QUIESCE_TIMEOUT" | tee "$WORK/report.txt"
report_rc=${PIPESTATUS[0]}
echo
echo "=== outbox_check (both databases) ==="
outbox_check_both
check_rc=$?
set -e
check_services

# field LABEL: the first number after LABEL at the start of a report line.
field() { awk -v l="$1" 'index($0, l " ") == 1 { sub("^" l " +", ""); print $1 + 0; exit }' "$WORK/report.txt"; }
acked=$(wc -l <"$WORK/acked.ids")
gave_up=$(grep -o '[0-9]* given up' "$WORK/driver.out" | grep -o '^[0-9]*' || echo '?')
retried=$(grep -o '[0-9]* calls retried' "$WORK/driver.out" | grep -o '^[0-9]*' || echo '?')
lost=$(field "lost")
duplicated=$(field "duplicates")
not_found=$(field "rows not found")
without=$(field "without voucher")
total_faults=$((faults[payment_service] + faults[accounting_service] + faults[recovery_service] + faults[broker]))

ok=1
[[ $lost == 0 && $duplicated == 0 && $check_rc == 0 && ${#unexpected[@]} == 0 ]] || ok=0
echo
echo "=== chaos report (seed $SEED, ${DURATION}s, interval ${INTERVAL}s) ==="
printf '%-28s %s\n' "payments created" "$acked acknowledged to the client ($retried create calls retried, $gave_up given up; driver exit $driver_rc)"
printf '%-28s %s\n' "payments in payment.db" "$(field "payments checked")"
printf '%-28s %s\n' "faults injected" "$total_faults: payment_service ${faults[payment_service]}, accounting_service ${faults[accounting_service]}, recovery_service ${faults[recovery_service]}, broker ${faults[broker]}"
printf '%-28s %s\n' "outbox SENT" "$(field "outbox SENT")"
printf '%-28s %s\n' "outbox SENDING" "$(field "outbox SENDING")"
printf '%-28s %s\n' "outbox FAILED" "$(field "outbox FAILED")"
printf '%-28s %s\n' "went through recovery" "$(field "attempts > 1") (attempts > 1)"
printf '%-28s %s\n' "vouchers" "$(field "vouchers")"
printf '%-28s %s\n' "lost" "$lost ($not_found acknowledged but not in payment.db, $without without voucher)"
printf '%-28s %s\n' "duplicated" "$duplicated (payments with more than one voucher)"
printf '%-28s %s\n' "outbox_demo audit" "$(grep '^RESULT' "$WORK/report.txt" | awk '{print $2}') (exit $report_rc)"
printf '%-28s %s\n' "outbox_check" "$(grep '^result:' "$WORK/outbox_check.txt" | sed 's/^result: //' || echo "no result (exit $check_rc)")"
printf '%-28s %s\n' "died on their own" "${#unexpected[@]}${unexpected[*]:+ (${unexpected[*]})}"
if ((ok)); then result=0; fi
printf '%-28s %s\n' "RESULT" "$([[ $result == 0 ]] && echo OK || echo FAILED)"
exit "$result"
