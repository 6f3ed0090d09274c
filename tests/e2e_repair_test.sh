#!/usr/bin/env bash
# outbox_check --repair on the real services and files. The three services
# run against the test run's RabbitMQ node (queues of their own) and book 5
# payments; then, with accounting_service stopped, the files are damaged as
# real faults leave them:
#   p1  its voucher and processed id gone (accounting.db restored to an older point)
#   p2  its voucher gone, its processed id kept (a voucher row deleted by hand)
#   p3  archived by retention, and its voucher and processed id gone
#   p4  FAILED although booked (its acknowledgement lost, its attempts spent)
#   p5  untouched
# outbox_check finds them; `--repair` (a dry run) changes no row and writes
# its audit records; `--repair --apply` sends p1 and p3 again and closes p4,
# and names p2 as an operator's task; the task done as it says, a second
# apply sends p2. Every payment then has exactly one voucher, the checker is
# clean, a third apply changes nothing, and outbox_audit holds each run.
#   bash tests/e2e_repair_test.sh BUILD   (through ctest: the broker fixture)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: e2e_repair_test.sh BUILD}" && pwd)
bin=$build/bin
[[ -n ${OUTBOX_TEST_BROKER_DIR:-} ]] || { echo "FAIL: OUTBOX_TEST_BROKER_DIR is not set (run through ctest)" >&2; exit 1; }
url=$(cat "$OUTBOX_TEST_BROKER_DIR/amqp_url")
scale=${OUTBOX_TEST_TIME_SCALE:-1}  # sanitizer builds: longer deadlines (tests/CMakeLists.txt)
# shellcheck source=SCRIPTDIR/../scripts/lib/sqlite.sh
source "$root/scripts/lib/sqlite.sh"

tmp=$(mktemp -d)
pay_db=$tmp/payment.db
acc_db=$tmp/accounting.db
tag=repair.$$.$RANDOM  # this run's own queues
declare -A pid_of=() port_of=()

cleanup() {
  local rc=$? name _
  for name in "${!pid_of[@]}"; do kill -TERM "${pid_of[$name]}" 2>/dev/null || true; done
  for name in "${!pid_of[@]}"; do
    for _ in $(seq 100); do kill -0 "${pid_of[$name]}" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "${pid_of[$name]}" 2>/dev/null || true
  done
  if ((rc != 0)); then
    for log in "$tmp"/*.log "$tmp"/*.out; do
      [[ -f $log ]] || continue
      echo "--- last lines of $(basename "$log")" >&2
      tail -n 25 "$log" >&2
    done
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

fail() { echo "FAIL: $*" >&2; exit 1; }
expect_eq() {  # WHAT GOT WANT
  [[ $2 == "$3" ]] || fail "$1: got '$2', want '$3'"
  echo "ok: $1"
}

(umask 077 && echo "e2e$RANDOM $(openssl rand -hex 32)" >"$tmp/message.keys")
common=(AMQP_URL="$url" PAY_QUEUE="PAY.$tag" ACC_QUEUE="ACC.$tag" PAYMENT_DB="$pay_db"
        ACCOUNTING_DB="$acc_db" MESSAGE_KEYS_FILE="$tmp/message.keys" RETRY_BASE_DELAY=1s)

start() {  # NAME LISTEN_VAR: starts $bin/NAME, waits for its next NAME_started line
  local name=$1 before _ line
  before=$(grep -c "${name}_started" "$tmp/$name.log" 2>/dev/null || true)
  env "${common[@]}" "$2=127.0.0.1:${port_of[$name]:-0}" "$bin/$name" >>"$tmp/$name.log" 2>&1 &
  pid_of[$name]=$!
  for _ in $(seq $((300 * scale))); do
    if (($(grep -c "${name}_started" "$tmp/$name.log" || true) > before)); then
      line=$(grep "${name}_started" "$tmp/$name.log" | tail -n 1)
      port_of[$name]=$(sed -n 's/.* port=\([0-9]*\).*/\1/p' <<<"$line")
      return 0
    fi
    kill -0 "${pid_of[$name]}" 2>/dev/null || fail "$name exited at start"
    sleep 0.1
  done
  fail "$name did not start within $((30 * scale)) s"
}
stop() {  # NAME: SIGTERM, then waits for it to exit
  local _
  kill -TERM "${pid_of[$1]}"
  for _ in $(seq $((300 * scale))); do kill -0 "${pid_of[$1]}" 2>/dev/null || break; sleep 0.1; done
  wait "${pid_of[$1]}" || fail "$1 did not exit cleanly after SIGTERM"
  unset "pid_of[$1]"
}
wait_for() {  # WHAT SQL-ON-PAYMENT-DB WANT: polls until the query answers WANT
  local deadline=$((SECONDS + 60 * scale)) got
  while :; do
    got=$(sqlite_read "$pay_db" "$2")
    [[ $got == "$3" ]] && { echo "ok: $1"; return 0; }
    ((SECONDS < deadline)) || fail "$1: got '$got' after $((60 * scale)) s, want '$3'"
    sleep 0.2
  done
}
check() {  # ARGS: outbox_check on the pair, output in $tmp/check.out; sets rc
  rc=0
  "$bin/outbox_check" --payment_db="$pay_db" --accounting_db="$acc_db" "$@" >"$tmp/check.out" 2>&1 || rc=$?
}
# Every row of the outbox and the archive, but their payloads.
rows() {
  sqlite_read "$pay_db" "SELECT message_id, status, attempts, next_retry_at, sent_at, last_error,
    updated_at, 'live' FROM outbox UNION ALL SELECT message_id, status, attempts, next_retry_at,
    sent_at, last_error, updated_at, 'archived' FROM outbox_archive ORDER BY 1"
}
audit() { sqlite_read "$pay_db" "SELECT actor, action, target, dry_run, rows, outcome FROM outbox_audit ORDER BY id"; }

# --- The services book 5 payments.
start accounting_service ACCOUNTING_LISTEN
start payment_service PAYMENT_LISTEN
start recovery_service RECOVERY_LISTEN
for i in 1 2 3 4 5; do
  "$bin/outboxctl" --payment_addr="127.0.0.1:${port_of[payment_service]}" payment create \
    --idempotency_key="k$i" --payer=A --payee=B --amount=$((100 * i)) --currency=EUR >/dev/null
done
wait_for "5 payments SENT" "SELECT count(*) FROM outbox WHERE status = 'SENT'" 5
declare -A p=() m=()
for i in 1 2 3 4 5; do
  p[$i]=$(sqlite_read "$pay_db" "SELECT payment_id FROM payments WHERE idempotency_key = 'k$i'")
  m[$i]=$(sqlite_read "$pay_db" "SELECT message_id FROM outbox WHERE biz_key = '${p[$i]}'")
done
expect_eq "5 vouchers" "$(sqlite_read "$acc_db" "SELECT count(*) FROM vouchers")" 5

# --- The faults, with accounting stopped.
stop accounting_service
sqlite_write "$acc_db" \
  "DELETE FROM vouchers WHERE payment_id IN ('${p[1]}', '${p[2]}', '${p[3]}')" \
  "DELETE FROM processed_messages WHERE payment_id IN ('${p[1]}', '${p[3]}')"
sqlite_write "$pay_db" "BEGIN IMMEDIATE" \
  "INSERT INTO outbox_archive SELECT * FROM outbox WHERE message_id = '${m[3]}'" \
  "DELETE FROM outbox WHERE message_id = '${m[3]}'" \
  "UPDATE outbox SET status = 'FAILED', failure_kind = 'exhausted', failure_group = 'x',
     last_error = 'no acknowledgement after 10 attempts' WHERE message_id = '${m[4]}'" \
  "COMMIT"
start accounting_service ACCOUNTING_LISTEN

check
expect_eq "outbox_check on the damaged pair exits" "$rc" 1
grep -q "FAIL sent_without_voucher *3 " "$tmp/check.out" || fail "sent_without_voucher is not 3: $(cat "$tmp/check.out")"
grep -q "FAIL failed_with_voucher *1 " "$tmp/check.out" || fail "failed_with_voucher is not 1: $(cat "$tmp/check.out")"

# --- A dry run: no row changes, its audit records are written (actor: the OS user).
before=$(rows)
check --repair
cat "$tmp/check.out"
expect_eq "the dry run exits (p2 needs an operator)" "$rc" 1
expect_eq "rows after the dry run" "$(rows)" "$before"
grep -q "DELETE FROM processed_messages WHERE message_id = '${m[2]}'" "$tmp/check.out" ||
  fail "the dry run does not say what to do about ${p[2]}"
user=$(id -un)
expect_eq "the dry run's audit records" "$(audit)" "$user|repair|sent_without_voucher|1|1|ok
$user|repair|archived_without_voucher|1|1|ok
$user|repair|failed_with_voucher|1|1|ok"
expect_eq "history after the dry run" "$(sqlite_read "$pay_db" "SELECT count(*) FROM outbox_history")" 0

# --- Applied: p1 and p3 go out again and are booked once, p4 is closed.
check --repair --apply --actor=e2e-operator
cat "$tmp/check.out"
expect_eq "the apply exits (p2 needs an operator)" "$rc" 1
expect_eq "the apply's audit records" "$(audit | tail -n 3)" "e2e-operator|repair|sent_without_voucher|0|1|ok
e2e-operator|repair|archived_without_voucher|0|1|ok
e2e-operator|repair|failed_with_voucher|0|1|ok"
expect_eq "history events" "$(sqlite_read "$pay_db" "SELECT message_id, instance, event FROM outbox_history ORDER BY message_id")" \
  "$(printf '%s\n' "${m[1]}|e2e-operator|repaired" "${m[3]}|e2e-operator|repaired" "${m[4]}|e2e-operator|repaired" | sort)"
expect_eq "p3 is back in outbox" "$(sqlite_read "$pay_db" "SELECT count(*) FROM outbox_archive")" 0
wait_for "p1, p3 and p4 SENT" "SELECT count(*) FROM outbox WHERE status = 'SENT'
  AND biz_key IN ('${p[1]}', '${p[3]}', '${p[4]}')" 3
expect_eq "p1 and p3 booked once each" "$(sqlite_read "$acc_db" "SELECT count(*) FROM vouchers
  WHERE payment_id IN ('${p[1]}', '${p[3]}')")" 2

# --- p2: the operator's task as the repair wrote it, then the repair again.
stop accounting_service
sqlite_write "$acc_db" "DELETE FROM processed_messages WHERE message_id = '${m[2]}'"
start accounting_service ACCOUNTING_LISTEN
check --repair --apply --actor=e2e-operator
cat "$tmp/check.out"
expect_eq "the second apply exits" "$rc" 0
wait_for "every payment SENT" "SELECT count(*) FROM outbox WHERE status = 'SENT'" 5

# --- The end: one voucher each, from its outbox row's message; the checker clean.
expect_eq "vouchers" "$(sqlite_read "$acc_db" "SELECT count(*), count(DISTINCT payment_id) FROM vouchers")" "5|5"
for i in 1 2 3 4 5; do
  expect_eq "p$i's voucher's message" \
    "$(sqlite_read "$acc_db" "SELECT message_id FROM vouchers WHERE payment_id = '${p[$i]}'")" "${m[$i]}"
done
check
expect_eq "outbox_check after the repair exits" "$rc" 0
before=$(rows)
records=$(audit | wc -l)
check --repair --apply --actor=e2e-operator
expect_eq "a third apply exits" "$rc" 0
grep -q "nothing to repair" "$tmp/check.out" || fail "a third apply found something: $(cat "$tmp/check.out")"
expect_eq "rows after a third apply" "$(rows)" "$before"
expect_eq "audit records after a third apply" "$(audit | wc -l)" "$records"
echo "outbox_audit:"
sqlite_read "$pay_db" "SELECT id, at, actor, action, target, dry_run, rows, outcome FROM outbox_audit ORDER BY id"
echo "PASS"
