#!/usr/bin/env bash
# Writes the generated seeds of fuzz/corpus/: valid messages encoded from the
# protos with protoc, and small SQLite files with the services' schemas.
# Run from anywhere; needs protoc and sqlite3. Hand-written seeds and crash
# inputs in the corpus are left alone.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
corpus="$root/fuzz/corpus"
encode() {  # encode <type> <proto> <text>
  printf '%s' "$3" | protoc -I "$root/proto" --encode="$1" "$root/proto/$2"
}
mkdir -p "$corpus"/{accounting_codec,payment_codec,create_payment,amqp_url,settings,outbox_check}

created='message_id: "m-1" payment_id: "p-1" payer_account: "acc-a" payee_account: "acc-b" amount_minor: 1250 currency: "EUR" description: "rent" created_at_unix_ms: 1700000000000'
# accounting_codec input: a length byte, the AMQP message id, the body.
{ printf '\x03m-1'; encode events.v1.PaymentCreated events/v1/events.proto "$created"; } \
  > "$corpus/accounting_codec/valid_with_amqp_id"
{ printf '\x00'; encode events.v1.PaymentCreated events/v1/events.proto "$created"; } \
  > "$corpus/accounting_codec/valid_no_amqp_id"
{ printf '\x03m-2'; encode events.v1.PaymentCreated events/v1/events.proto "$created"; } \
  > "$corpus/accounting_codec/amqp_id_differs"
{ printf '\x00'; encode events.v1.PaymentCreated events/v1/events.proto \
    'message_id: "m-1" payment_id: "p-1" payer_account: "x" payee_account: "x" amount_minor: -5 currency: "eur"'; } \
  > "$corpus/accounting_codec/invalid_fields"
printf '\x00\xff\xff\xff' > "$corpus/accounting_codec/not_protobuf"

encode events.v1.PaymentAccounted events/v1/events.proto \
  'message_id: "m-1" payment_id: "p-1" voucher_id: "v-1" accounted_at_unix_ms: 1700000000000' \
  > "$corpus/payment_codec/valid"
encode events.v1.PaymentAccounted events/v1/events.proto \
  'message_id: "m-1" payment_id: "p-1" voucher_id: "v-1" duplicate: true' \
  > "$corpus/payment_codec/valid_duplicate"
encode events.v1.PaymentAccounted events/v1/events.proto 'payment_id: "p-1"' \
  > "$corpus/payment_codec/no_message_id"
printf '\x0a\xff' > "$corpus/payment_codec/truncated"

encode payment.v1.CreatePaymentRequest payment/v1/payment.proto \
  'idempotency_key: "k-1" payer_account: "acc-a" payee_account: "acc-b" amount_minor: 1250 currency: "EUR" description: "rent"' \
  > "$corpus/create_payment/valid"
encode payment.v1.CreatePaymentRequest payment/v1/payment.proto \
  'idempotency_key: "k-2" payer_account: "acc-a" payee_account: "acc-b" amount_minor: 1 currency: "USD"' \
  > "$corpus/create_payment/valid_no_description"
encode payment.v1.CreatePaymentRequest payment/v1/payment.proto \
  'idempotency_key: "k-3" payer_account: "acc-a" payee_account: "acc-a" amount_minor: 0 currency: "usd"' \
  > "$corpus/create_payment/invalid"
encode payment.v1.CreatePaymentRequest payment/v1/payment.proto \
  'idempotency_key: "k\t4" payer_account: "acc-a" payee_account: "acc-b" amount_minor: 9223372036854775807 currency: "EUR" description: "z\u00fcrich"' \
  > "$corpus/create_payment/control_char_key"

printf 'amqp://guest:guest@127.0.0.1:5672/%%2F' > "$corpus/amqp_url/default"
printf 'amqp://user:secret@rabbit:5673/orders' > "$corpus/amqp_url/vhost"
printf 'amqp://localhost' > "$corpus/amqp_url/host_only"
printf 'amqps://u:p@h:5671/' > "$corpus/amqp_url/tls"
printf 'amqp://u:p,w@h1:5672,h2,[::1]:5674/%%2F' > "$corpus/amqp_url/cluster"
printf 'amqp://[::1]:99999/' > "$corpus/amqp_url/ipv6_bad_port"
printf 'http://nope' > "$corpus/amqp_url/wrong_scheme"

printf '500ms' > "$corpus/settings/millis"
printf '1h30m' > "$corpus/settings/hours_minutes"
printf 'inf' > "$corpus/settings/inf"
printf -- '-1.5s' > "$corpus/settings/negative"
printf 'normal' > "$corpus/settings/durability"
printf '9223372036854775807' > "$corpus/settings/int_max"

# outbox_check reads the input as both databases: one file with both schemas.
db="$corpus/outbox_check/both_schemas"
rm -f "$db"
sqlite3 "$db" <<'SQL'
PRAGMA page_size=512;
CREATE TABLE payments (id INTEGER PRIMARY KEY, payment_id TEXT NOT NULL UNIQUE, idempotency_key TEXT NOT NULL UNIQUE, payer_account TEXT NOT NULL, payee_account TEXT NOT NULL, amount_minor INTEGER NOT NULL CHECK (amount_minor > 0), currency TEXT NOT NULL, description TEXT NOT NULL, created_at INTEGER NOT NULL);
CREATE TABLE outbox (id INTEGER PRIMARY KEY, message_id TEXT NOT NULL UNIQUE, biz_type TEXT NOT NULL, biz_key TEXT NOT NULL, topic TEXT NOT NULL, payload BLOB NOT NULL, status TEXT NOT NULL CHECK (status IN ('SENDING','SENT','FAILED')), attempts INTEGER NOT NULL DEFAULT 0, max_attempts INTEGER NOT NULL, next_retry_at INTEGER NOT NULL, last_attempt_at INTEGER NOT NULL DEFAULT 0, last_error TEXT NOT NULL DEFAULT '', created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, sent_at INTEGER NOT NULL DEFAULT 0, UNIQUE (biz_type, biz_key));
CREATE TABLE recovery_lease (name TEXT PRIMARY KEY, holder TEXT NOT NULL, expires_at INTEGER NOT NULL);
CREATE TABLE vouchers (id INTEGER PRIMARY KEY, voucher_id TEXT NOT NULL UNIQUE, payment_id TEXT NOT NULL UNIQUE, message_id TEXT NOT NULL, debit_account TEXT NOT NULL, credit_account TEXT NOT NULL, amount_minor INTEGER NOT NULL CHECK (amount_minor > 0), currency TEXT NOT NULL, created_at INTEGER NOT NULL);
CREATE TABLE processed_messages (message_id TEXT PRIMARY KEY, payment_id TEXT NOT NULL, voucher_id TEXT NOT NULL, processed_at INTEGER NOT NULL) WITHOUT ROWID;
INSERT INTO payments VALUES (1, 'p-1', 'k-1', 'acc-a', 'acc-b', 1250, 'EUR', 'rent', 1699999990000);
INSERT INTO payments VALUES (2, 'p-2', 'k-2', 'acc-a', 'acc-b', 10, 'EUR', '', 1699999990000);
INSERT INTO outbox VALUES (1, 'm-1', 'payment', 'p-1', 'PAY_QUEUE', x'0a036d2d31', 'SENT', 1, 5, 0, 1699999990000, '', 1699999990000, 1699999990000, 1699999991000);
INSERT INTO outbox VALUES (2, 'm-2', 'payment', 'p-2', 'PAY_QUEUE', x'0a036d2d32', 'SENDING', 1, 5, 1699999000000, 1699999990000, 'nack', 1690000000000, 1699999990000, 0);
INSERT INTO vouchers VALUES (1, 'v-1', 'p-1', 'm-1', 'acc-a', 'acc-b', 1250, 'EUR', 1699999991000);
INSERT INTO processed_messages VALUES ('m-1', 'p-1', 'v-1', 1699999991000);
SQL
head -c 1500 "$db" > "$corpus/outbox_check/truncated_db"
printf 'SQLite format 3\0garbage' > "$corpus/outbox_check/header_only"
printf 'not a database\n' > "$corpus/outbox_check/text"
