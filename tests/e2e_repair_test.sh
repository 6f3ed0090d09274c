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
E2E_TAG=repair
# shellcheck source=SCRIPTDIR/lib/e2e_services.sh
source "$(dirname "$0")/lib/e2e_services.sh"
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
# The repair's own events (recovery may already have re-published the rows it
# made due, which adds a republished event of its own).
expect_eq "history events" "$(sqlite_read "$pay_db" "SELECT message_id, instance, event FROM outbox_history
  WHERE event = 'repaired' ORDER BY message_id")" \
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
