#!/usr/bin/env bash
# Screenshots of the operator's console from a real run, for docs/operations.md:
# a private RabbitMQ node and the three services with TLS and named ops
# tokens (as scripts/demo.sh runs them), accounting keeping EUR and USD up to
# 1,000,000 minor units, payments of which some are rejected (GBP, over the
# limit), one re-driven and re-rejected, one group acknowledged, a message
# that is not a payment dead-lettered, payments created while the overview
# samples; then the console (console/gateway.py) and headless chromium
# (console/screenshots.py) save docs/images/console-<page>.png.
#
#   scripts/console_screenshots.sh [OUTDIR]     (default docs/images)
#
# Env: SKIP_BUILD=1 uses the binaries already in BUILD_DIR (build); KEEP=1
# keeps the temp dir.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
SCRIPT=console_screenshots
OUTDIR=$(realpath -m "${1:-docs/images}")
# shellcheck source=SCRIPTDIR/lib/services.sh
source "$ROOT/scripts/lib/services.sh"

build_binaries
[[ -x /usr/bin/chromium && -x /usr/bin/chromedriver ]] || bash scripts/install_deps.sh
[[ -x $BIN/outboxctl ]] || { echo "$SCRIPT: $BIN/outboxctl is missing" >&2; exit 1; }

WORK=$(mktemp -d -t outbox-screenshots.XXXXXX)
result=1
console_pid=''
# shellcheck disable=SC2317  # invoked by the trap
cleanup() {
  trap - EXIT INT TERM
  if [[ -n $console_pid ]]; then kill -TERM "$console_pid" 2>/dev/null || true; await_exit "$console_pid" 50; fi
  stop_services
  finish_work "*.log"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start_broker
service_envs
grpc_security "$WORK/certs"
# A named ops token, so the audit trail says who acted.
(umask 077 && echo "alice $(cat "$WORK/certs/ops.token")" >"$WORK/certs/ops.tokens")
recovery_service_env+=(OPS_TOKEN_FILE="$WORK/certs/ops.tokens" RECOVERY_HOUSEKEEPING_EVERY=1s)
accounting_service_env+=(ACCEPTED_CURRENCIES=EUR,USD MAX_AMOUNT_MINOR=1000000)
for name in accounting_service payment_service recovery_service; do
  start_service "$name" || { echo "$SCRIPT: $name did not start" >&2; exit 1; }
done

pay=(--payment_addr="127.0.0.1:$payment_port" --tls_ca_file="$WORK/certs/ca.pem"
     --token_file="$WORK/certs/api.token")
ctl() {
  "$BIN/outboxctl" --recovery_addr="127.0.0.1:$recovery_port" --tls_ca_file="$WORK/certs/ca.pem" \
    --token_file="$WORK/certs/ops.token" "$@"
}
for i in $(seq 40); do
  amount=$((1000 + 37 * i)) currency=EUR description="order $i"
  ((i % 10 == 3)) && amount=$((2500000 + i))            # over accounting's limit
  ((i % 8 == 5)) && currency=GBP description="order $i, shipped to Leeds"
  "$BIN/outboxctl" "${pay[@]}" --json payment create --idempotency_key="shot-$i" --payer="acct-$((i % 7))" \
    --payee=shop-1 --amount="$amount" --currency="$currency" --description="$description" \
    >>"$WORK/payments.json"
done
# Wait until nothing is SENDING.
for _ in $(seq 100); do
  ctl --json stats | grep -q '"sending": *"\?0"\?,' && break
  sleep 0.3
done
# Operator actions for the audit trail: a dry run and a re-drive of the GBP
# group (rejected again), an acknowledgement of the over-the-limit group.
ctl --json failures >"$WORK/groups.json"
group_of() {  # WORD: the failure group whose example error says WORD
  /usr/bin/python3 -c 'import json, sys; print([g["group"] for g in json.load(open(sys.argv[1]))["groups"] if sys.argv[2] in g["example_error"]][0])' \
    "$WORK/groups.json" "$1"
}
gbp=$(group_of GBP)
limit=$(group_of limit)
ctl redrive --group="$gbp" --dry-run >/dev/null
ctl redrive --group="$gbp" >/dev/null
ctl acknowledge --group="$limit" --dry-run >/dev/null
ctl acknowledge --group="$limit" >/dev/null
# A message that is not a payment: accounting dead-letters it (unsigned).
amqp-publish --url="$(cat "$WORK/broker/amqp_url")" -e outbox.payments -r PAY_QUEUE \
  -p -C application/x-protobuf -t PaymentCreated -b 'not a payment event' || true
example=$(sed -n 's/.*"payment_id": *"\([^"]*\)".*/\1/p' "$WORK/payments.json" | sed -n 5p)

free_port console_port
/usr/bin/python3 console/gateway.py --listen "127.0.0.1:$console_port" \
  --ops "shard0=127.0.0.1:$recovery_port" --ops_ca "$WORK/certs/ca.pem" >"$WORK/console.log" 2>&1 &
console_pid=$!
for _ in $(seq 50); do grep -q console_started "$WORK/console.log" && break; sleep 0.1; done
echo "$SCRIPT: console at http://127.0.0.1:$console_port/"
# Payments while the overview samples, so its chart has something to draw.
"$BIN/outbox_demo" --payment_addr="127.0.0.1:$payment_port" --tls_ca_file="$WORK/certs/ca.pem" \
  --token_file="$WORK/certs/api.token" --count=30000 --concurrency=1 --skip_checks \
  --wait_sent=false >"$WORK/load.log" 2>&1 &
load_pid=$!
mkdir -p "$OUTDIR"
/usr/bin/python3 console/screenshots.py "http://127.0.0.1:$console_port/" "$WORK/certs/ops.token" \
  "$OUTDIR" --message="$example" --samples=8
kill -TERM "$load_pid" 2>/dev/null || true
wait "$load_pid" 2>/dev/null || true
result=0
