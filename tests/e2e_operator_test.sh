#!/usr/bin/env bash
# Failures an operator can act on, on the real services and files, and
# through a client that is not ours. accounting_service keeps only EUR and
# books at most 1,000,000 minor units; payment_service takes up to 10^9. Of
# 60 payments, 20 are over accounting's limit and 5 in GBP:
# - accounting answers the 25 with business rejects; payment_service closes
#   them FAILED (kind rejected) at once: one publish each, no retry, and the
#   time from create to FAILED is printed as a figure (p50/p99);
# - the 35 others are SENT and wrote no history row (the happy path);
# - recovery groups the rejects into two failure groups and raises one
#   OutboxMessagesRejected alert per group (its log);
# - tests/reflection_ops_client.py (Python grpcio, the ops API learnt by
#   reflection only) lists the groups, reads a history, re-drives the GBP
#   group (dry run, then for real) and acknowledges the other, under the
#   named token "alice"; the audit trail shows each action with its rows
#   under alice, and outboxctl prints the same groups, history and audit;
# - outboxctl acts with a reason (--reason), which the audit trail keeps and
#   `outboxctl audit` prints; a reason that is not one line is refused.
#   bash tests/e2e_operator_test.sh BUILD   (through ctest: the broker fixture)
#   bash tests/e2e_repair_test.sh BUILD   (through ctest: the broker fixture)
set -euo pipefail
E2E_TAG=operator
# shellcheck source=SCRIPTDIR/lib/e2e_services.sh
source "$(dirname "$0")/lib/e2e_services.sh"

# Two operators' tokens; the stranger uses alice's.
alice=$(openssl rand -hex 16)
(umask 077 && printf 'alice %s\nbob %s\n' "$alice" "$(openssl rand -hex 16)" >"$tmp/ops.tokens")
start accounting_service ACCOUNTING_LISTEN MAX_AMOUNT_MINOR=1000000 ACCEPTED_CURRENCIES=EUR
start payment_service PAYMENT_LISTEN MAX_AMOUNT_MINOR=1000000000
start recovery_service RECOVERY_LISTEN OPS_TOKEN_FILE="$tmp/ops.tokens" \
  RECOVERY_HOUSEKEEPING_EVERY=1s

pay=127.0.0.1:${port_of[payment_service]}
ops=127.0.0.1:${port_of[recovery_service]}
for i in $(seq 60); do
  amount=$((100 * i)) currency=EUR
  ((i % 3 == 0)) && amount=$((2000000 + i))  # 20 over accounting's limit
  ((i % 3 == 1 && i <= 13)) && currency=GBP   # 5 in a currency accounting does not keep
  "$bin/outboxctl" --payment_addr="$pay" payment create --idempotency_key="k$i" --payer=A \
    --payee=B --amount="$amount" --currency="$currency" >/dev/null
done
wait_for "no row left SENDING" "SELECT count(*) FROM outbox WHERE status = 'SENDING'" 0
expect_eq "SENT rows" "$(sql "SELECT count(*) FROM outbox WHERE status = 'SENT'")" 35
expect_eq "rejected rows: FAILED, kind rejected, one publish each" \
  "$(sql "SELECT count(*), max(attempts) FROM outbox WHERE status = 'FAILED'
          AND failure_kind = 'rejected'")" "25|1"
expect_eq "history rows of the happy path" \
  "$(sql "SELECT count(*) FROM outbox_history h JOIN outbox o USING (message_id)
          WHERE o.status = 'SENT'")" 0
expect_eq "each reject's history: one 'rejected' event" \
  "$(sql "SELECT count(*) FROM outbox_history WHERE event = 'rejected'")" 25
expect_eq "vouchers (the rejected payments have none)" \
  "$(sqlite_read "$acc_db" "SELECT count(*) FROM vouchers")" 35
grep -q "payment_rejected" "$tmp/accounting_service.log" || fail "accounting logged no payment_rejected"
# The figure: create -> FAILED of the rejected rows (ms), as p50 and p99.
sql "SELECT updated_at - created_at FROM outbox WHERE failure_kind = 'rejected' ORDER BY 1" \
  >"$tmp/reject_ms"
n=$(wc -l <"$tmp/reject_ms")
echo "figure: create -> FAILED (rejected) over $n rows: p50 $(sed -n "$(((n + 1) / 2))p" \
  "$tmp/reject_ms") ms, p99 $(sed -n "$(((n * 99 + 99) / 100))p" "$tmp/reject_ms") ms"

# One alert per reject reason, not per row.
deadline=$((SECONDS + 30 * scale))
until (($(grep -c 'OutboxMessagesRejected' "$tmp/recovery_service.log" || true) > 0)); do
  ((SECONDS < deadline)) || fail "no OutboxMessagesRejected alert"
  sleep 0.5
done
groups_alerted=$(grep 'alert_raised\|alert_fired\|OutboxMessagesRejected' "$tmp/recovery_service.log" |
  grep -o 'failure_group[=:"]*[0-9a-f]\{12\}' | sort -u | wc -l)
expect_eq "failure groups alerted" "$groups_alerted" 2

# --- The stranger: reflection only, alice's token.
stranger() { /usr/bin/python3 "$root/tests/reflection_ops_client.py" "$ops" "$alice" "$@"; }
stranger ListFailureGroups '{}' >"$tmp/groups.json"
# group_of WORD: "<group> <rows>" of the failure group whose example error says WORD (the
# Python on one line: tests/commands_installed_test.sh reads each line as shell).
group_of() {
  /usr/bin/python3 -c 'import json, sys; g = [g for g in json.load(open(sys.argv[1]))["groups"] if sys.argv[2] in g["example_error"]]; print(g[0]["group"], g[0]["count"])' \
    "$tmp/groups.json" "$1"
}
read -r gbp_group gbp_count < <(group_of GBP)
read -r limit_group limit_count < <(group_of limit)
expect_eq "the GBP group's rows" "$gbp_count" 5
expect_eq "the over-the-limit group's rows" "$limit_count" 20
example=$(sql "SELECT biz_key FROM outbox WHERE failure_group = '$limit_group' LIMIT 1")
stranger GetHistory "{\"id\": \"$example\"}" >"$tmp/history.json"
grep -q '"event": "rejected"' "$tmp/history.json" || fail "history: $(cat "$tmp/history.json")"
stranger RedriveFailed "{\"group\": \"$gbp_group\", \"dry_run\": true}" >"$tmp/dry.json"
grep -q '"count": "5"' "$tmp/dry.json" || fail "dry run: $(cat "$tmp/dry.json")"
expect_eq "the dry run changed nothing" \
  "$(sql "SELECT count(*) FROM outbox WHERE failure_group = '$gbp_group'")" 5
stranger RedriveFailed "{\"group\": \"$gbp_group\"}" >/dev/null
stranger AcknowledgeFailure "{\"group\": \"$limit_group\"}" >/dev/null
# Re-driven, the GBP payments are rejected again: one more publish each.
wait_for "the re-driven GBP rows rejected again" \
  "SELECT count(*) FROM outbox WHERE failure_kind = 'rejected' AND attempts = 1
     AND message_id IN (SELECT message_id FROM outbox_history WHERE event = 'redriven')" 5
expect_eq "acknowledged rows" \
  "$(sql "SELECT count(*) FROM outbox WHERE acknowledged_by = 'alice'")" 20
expect_eq "the audit trail" \
  "$(sql "SELECT actor, action, target, dry_run, rows, outcome FROM outbox_audit ORDER BY id")" \
  "alice|redrive_group|$gbp_group|1|5|ok
alice|redrive_group|$gbp_group|0|5|ok
alice|acknowledge_group|$limit_group|0|20|ok"
# A wrong token is refused and changes nothing.
if /usr/bin/python3 "$root/tests/reflection_ops_client.py" "$ops" wrong RedriveFailed '{}' \
  >"$tmp/denied.out"; then fail "a wrong token was accepted"; fi
grep -q PERMISSION_DENIED "$tmp/denied.out" || fail "wrong token: $(cat "$tmp/denied.out")"

# --- outboxctl shows the same.
ctl() { "$bin/outboxctl" --recovery_addr="$ops" --token_file=<(echo "$alice") "$@"; }
ctl failures >"$tmp/failures.out"
grep -q "$limit_group .* rejected *20 *20 " "$tmp/failures.out" || fail "failures: $(cat "$tmp/failures.out")"
ctl history "$example" >"$tmp/timeline.out"
grep -q "rejected" "$tmp/timeline.out" && grep -q "acknowledged by alice" "$tmp/timeline.out" ||
  fail "history: $(cat "$tmp/timeline.out")"
ctl audit --limit 2 >"$tmp/audit.out"
[[ $(grep -c alice "$tmp/audit.out") == 2 ]] || fail "audit: $(cat "$tmp/audit.out")"
# Why, with who and what.
gbp_message=$(sql "SELECT message_id FROM outbox WHERE failure_group = '$gbp_group' ORDER BY id
                   LIMIT 1")
reason="known: accounting keeps EUR only (ticket 42)"
ctl acknowledge "$gbp_message" --reason "$reason" >/dev/null
ctl redrive --group="$gbp_group" --dry-run --reason="counting before the rate change" >/dev/null
if ctl acknowledge "$gbp_message" --reason $'two\nlines' >/dev/null 2>"$tmp/reason.err"; then
  fail "a reason of two lines was taken"
fi
grep -q "INVALID_ARGUMENT.*control character" "$tmp/reason.err" || fail "reason: $(cat "$tmp/reason.err")"
expect_eq "the audit trail's reasons" \
  "$(sql "SELECT actor, action, target, dry_run, rows, reason FROM outbox_audit WHERE reason != ''
          ORDER BY id")" \
  "alice|acknowledge_message|$gbp_message|0|1|$reason
alice|redrive_group|$gbp_group|1|5|counting before the rate change"
ctl audit --limit 2 >"$tmp/audit.out"
grep -q "acknowledge_message .* $reason\$" "$tmp/audit.out" || fail "audit: $(cat "$tmp/audit.out")"
ctl policy >"$tmp/policy.out"
grep -q "(default)" "$tmp/policy.out" || fail "policy: $(cat "$tmp/policy.out")"
echo "PASS"
