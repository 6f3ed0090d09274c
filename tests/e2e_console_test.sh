#!/usr/bin/env bash
# The operator's console (console/) over the real services, used as a person
# would, in headless chromium (Debian's chromium, chromium-driver and
# python3-selenium), over two payment shards (each its own store and
# recovery_service: two ops endpoints, a and b). accounting_service keeps only
# EUR and books at most 1,000,000 minor units: of shard a's 14 payments, 4 in
# GBP (one of them with markup in its description) and 3 over the limit are
# rejected and end FAILED in two failure groups; shard b has 2 GBP rejects; a
# body that is not a payment event (with markup) is dead-lettered. Then:
# - over HTTP (curl): the Content-Security-Policy, a missing token answered
#   401 with Connect's error JSON, a wrong one 403, a non-JSON post 415, the
#   shard list only with the token;
# - in the browser (tests/console_browser_test.py): a wrong token refused
#   with a clear message; the overview's live figures and chart; the groups;
#   an acknowledgement after the dry run's count is confirmed, with a
#   reason; a cancelled re-drive; the audit trail naming the token's holder
#   and the reason; a message's timeline and payload, re-driven after
#   confirming; markup in data and errors shown as text, never run; a
#   wrong queue's error, gone with the next listing; the dead letter
#   inspected and re-driven; the shard switcher showing shard b's own
#   figures; a malformed link at start-up;
# - the audit trail in shard a's store, and no token in the console's log
#   (on PostgreSQL, no password of the server in any log either).
# The stores: SQLite files (e2e.console), or with OUTBOX_E2E_STORE=postgres
# (e2e.pg.console) a database of its own for each shard and for accounting
# on the run's PostgreSQL server (tests/lib/e2e_services.sh); the same checks.
#   bash tests/e2e_console_test.sh BUILD   (through ctest: the broker fixture,
#                                           and the PostgreSQL one for e2e.pg.console)
set -euo pipefail
E2E_TAG=console
E2E_STORES=any
# shellcheck source=SCRIPTDIR/lib/e2e_services.sh
source "$(dirname "$0")/lib/e2e_services.sh"

for f in /usr/bin/chromium /usr/bin/chromedriver; do
  [[ -x $f ]] || fail "$f is missing (scripts/install_deps.sh installs chromium and chromium-driver)"
done

alice=$(openssl rand -hex 16)
(umask 077 && printf 'alice %s\nbob %s\n' "$alice" "$(openssl rand -hex 16)" >"$tmp/ops.tokens")

# start_other LABEL BINARY [VAR=VALUE...]: another instance of BINARY (start() keys by binary
# name), logged to $tmp/LABEL.log; sets pid_of[LABEL] and port_of[LABEL].
start_other() {
  local label=$1 binary=$2 _
  shift 2
  env "${common[@]}" "$@" "$bin/$binary" >"$tmp/$label.log" 2>&1 &
  pid_of[$label]=$!
  for _ in $(seq $((300 * scale))); do
    grep -q "${binary}_started" "$tmp/$label.log" && break
    kill -0 "${pid_of[$label]}" 2>/dev/null || fail "$label exited at start"
    sleep 0.1
  done
  port_of[$label]=$(grep "${binary}_started" "$tmp/$label.log" | started_port || true)
  [[ -n ${port_of[$label]} ]] || fail "$label did not start"
}

# Two payment shards (docs/deployment.md, Payment shards), each with its own
# store, reply queue and recovery_service (its ops endpoint), and one
# accounting. A shard's address must be known before it starts.
read -r p0 p1 < <(/usr/bin/python3 -c 'import socket; s = [socket.socket() for _ in range(2)]; [x.bind(("127.0.0.1", 0)) for x in s]; print(*[x.getsockname()[1] for x in s])')
shards=(PAYMENT_SHARDS="127.0.0.1:$p0,127.0.0.1:$p1" MAX_AMOUNT_MINOR=1000000000)
start accounting_service ACCOUNTING_LISTEN MAX_AMOUNT_MINOR=1000000 ACCEPTED_CURRENCIES=EUR \
  REPLY_QUEUES="ACC.$tag.s0,ACC.$tag.s1"
port_of[payment_service]=$p0
start payment_service PAYMENT_LISTEN "${shards[@]}" PAYMENT_SHARD_INDEX=0 ACC_QUEUE="ACC.$tag.s0"
start recovery_service RECOVERY_LISTEN OPS_TOKEN_FILE="$tmp/ops.tokens" ACC_QUEUE="ACC.$tag.s0" \
  RECOVERY_HOUSEKEEPING_EVERY=1s
pay1_db=$(new_db payment1)
start_other payment1 payment_service "${shards[@]}" PAYMENT_SHARD_INDEX=1 ACC_QUEUE="ACC.$tag.s1" \
  PAYMENT_DB="$pay1_db" PAYMENT_LISTEN="127.0.0.1:$p1"
start_other recovery1 recovery_service OPS_TOKEN_FILE="$tmp/ops.tokens" ACC_QUEUE="ACC.$tag.s1" \
  PAYMENT_DB="$pay1_db" RECOVERY_LISTEN=127.0.0.1:0 RECOVERY_HOUSEKEEPING_EVERY=1s
ops=127.0.0.1:${port_of[recovery_service]}
ops1=127.0.0.1:${port_of[recovery1]}
shard_pay=("127.0.0.1:$p0" "127.0.0.1:$p1")

# pay_on SHARD KEY [outboxctl payment create flags...]: a payment on payment shard SHARD under
# the first key KEY-<n> that hashes there (the other shard refuses a key and writes nothing);
# its JSON in $tmp/created.json.
pay_on() {
  local shard=$1 key=$2 n
  shift 2
  for n in $(seq 64); do
    if "$bin/outboxctl" --payment_addr="${shard_pay[$shard]}" --json payment create \
      --idempotency_key="$key-$n" --payer=A --payee=B "$@" >"$tmp/created.json" 2>"$tmp/create.err"; then
      return 0
    fi
    grep -q FAILED_PRECONDITION "$tmp/create.err" || fail "payment create: $(cat "$tmp/create.err")"
  done
  fail "no key $key-<n> hashes to shard $shard"
}

xss_text='<script>window.__xss=1</script>"><img src=x onerror="window.__xss=2">'
for i in $(seq 14); do
  amount=$((100 * i)) currency=EUR description="order $i"
  ((i > 7 && i <= 10)) && amount=$((2000000 + i))  # 3 over accounting's limit
  ((i > 10)) && currency=GBP                       # 4 in a currency accounting does not keep
  ((i == 14)) && description=$xss_text
  pay_on 0 "console-k$i" --amount="$amount" --currency="$currency" --description="$description"
  cp "$tmp/created.json" "$tmp/payment.$i.json"
done
for i in 1 2; do pay_on 1 "console-b$i" --amount=100 --currency=GBP; done  # shard 1: 2 rejects
xss_key=$(sed -n 's/.*"payment_id": *"\([^"]*\)".*/\1/p' "$tmp/payment.14.json" | head -n 1)
[[ -n $xss_key ]] || fail "no payment id in $(cat "$tmp/payment.14.json")"
wait_for "no row left SENDING" "SELECT count(*) FROM outbox WHERE status = 'SENDING'" 0
expect_eq "rejected rows" "$(sql "SELECT count(*) FROM outbox WHERE failure_kind = 'rejected'")" 7
deadline=$((SECONDS + 30 * scale))
until [[ $(db_read "$pay1_db" "SELECT count(*) FROM outbox WHERE status = 'FAILED'") == 2 ]]; do
  ((SECONDS < deadline)) || fail "shard 1's rejects did not end FAILED"
  sleep 0.2
done
echo "ok: shard 1's rejected rows"

# A dead letter: a body that is not a payment event (unsigned), with markup.
amqp-publish --url="$url" -e outbox.payments -r "PAY.$tag" -t PaymentCreated \
  -b 'not a payment: <img src=x onerror="window.__xss=4">'
deadline=$((SECONDS + 30 * scale))
until grep -q dead_letter "$tmp/accounting_service.log"; do
  ((SECONDS < deadline)) || fail "accounting did not dead-letter the message"
  sleep 0.2
done

/usr/bin/python3 "$root/console/gateway.py" --listen 127.0.0.1:0 --ops "a=$ops" \
  --ops "b=$ops1" >"$tmp/console.log" 2>&1 &
pid_of[console]=$!
for _ in $(seq $((100 * scale))); do
  grep -q console_started "$tmp/console.log" && break
  kill -0 "${pid_of[console]}" 2>/dev/null || fail "the console exited at start"
  sleep 0.1
done
url=$(sed -n 's/.*console_started url=\([^ ]*\).*/\1/p' "$tmp/console.log")
[[ -n $url ]] || fail "the console did not start"
echo "console at $url"

# --- HTTP, as curl sees it.
headers=$(curl -sS -D - -o /dev/null "$url")
grep -qi "^content-security-policy: .*script-src 'self';" <<<"$headers" || fail "CSP: $headers"
call() {  # METHOD [curl args...]: prints "HTTP-status body"
  local method=$1
  shift
  curl -sS -o "$tmp/call.out" -w '%{http_code} ' -X POST "$@" "$url""ops.v1.OutboxOps/$method"
  cat "$tmp/call.out"
}
expect_eq "GetStats with alice's token" \
  "$(call GetStats -H 'Content-Type: application/json' -H "Authorization: Bearer $alice" -d '{}' |
     sed 's/ .*"failed": "\([0-9]*\)".*/ failed \1/')" "200 failed 7"
got=$(call GetStats -H 'Content-Type: application/json' -d '{}')
[[ $got == '401 {"code": "unauthenticated", '* ]] || fail "no token: $got"
echo "ok: no token: $got"
got=$(call RedriveFailed -H 'Content-Type: application/json' -H 'Authorization: Bearer wrong' -d '{}')
[[ $got == '403 {"code": "permission_denied", '* ]] || fail "wrong token: $got"
echo "ok: wrong token: $got"
got=$(call GetStats -H "Authorization: Bearer $alice" -d '{}')
[[ $got == 415* ]] || fail "a form post: $got"
echo "ok: a post that is not JSON: $got"
got=$(curl -sS -w ' %{http_code}' "$url""console/v1/shards")
[[ $got == *'"code": "unauthenticated"'*' 401' ]] || fail "the shard list without a token: $got"
got=$(curl -sS -H "Authorization: Bearer $alice" "$url""console/v1/shards")
[[ $got == *'"name": "a"'*'"name": "b"'* ]] || fail "the shard list: $got"
echo "ok: the shard list wants the token: $got"
got=$(call GetStats -H 'Content-Type: application/json' -H "Authorization: Bearer $alice" \
  -H 'Outbox-Shard: b' -d '{}')
[[ $got == 200*'"failed": "2"'* ]] || fail "shard b's stats: $got"
echo "ok: Outbox-Shard picks shard b"

# --- The browser.
/usr/bin/python3 "$root/tests/console_browser_test.py" "$url" "$alice" "$xss_key" 2 "PAY.$tag"

# --- What the browser did, in the stores.
gbp_group=$(sql "SELECT DISTINCT failure_group FROM outbox WHERE failure_kind = 'rejected'
                 AND message_id IN (SELECT message_id FROM outbox o2 WHERE o2.biz_key = '$xss_key')")
expect_eq "acknowledged by alice, from the console (the group's 4 less the one re-driven)" \
  "$(sql "SELECT count(*) FROM outbox WHERE acknowledged_by = 'alice'")" 3
expect_eq "the audit trail's change to rows" \
  "$(sql "SELECT actor, action, target, rows, outcome, reason FROM outbox_audit WHERE dry_run = 0
          AND action NOT LIKE '%dead_letters' ORDER BY id")" \
  "alice|acknowledge_group|$gbp_group|4|ok|GBP is not kept: known, ticket 42
alice|redrive_message|$(sql "SELECT message_id FROM outbox WHERE biz_key = '$xss_key'")|1|ok|"
expect_eq "every audit record by alice" "$(sql "SELECT count(*) FROM outbox_audit WHERE actor != 'alice'")" 0
if grep -q -e "$alice" -e 'Bearer' "$tmp/console.log"; then fail "a token in the console's log"; fi
echo "ok: no token in the console's log ($(grep -c console_call "$tmp/console.log") calls logged)"
if [[ $store == postgres ]]; then
  if grep -qF -f "$OUTBOX_TEST_PG_DIR/password" "$tmp"/*.log; then fail "the server's password in a log"; fi
  echo "ok: no password of the server in the logs"
fi
echo "PASS"
