#!/usr/bin/env bash
# Checks docker-compose.yml: valid with the four broker passwords set, rejected
# without any one of them (no default password), each service on its own
# broker user, the `cluster` profile's nodes and URL list, no guest account
# anywhere, gRPC TLS and tokens on in every service (certificates mounted
# read-only), and the `shards` profile's payment shards and reply queues.
#   bash tests/compose_config_test.sh [path/to/docker-compose.yml]
set -euo pipefail
file=${1:-$(cd "$(dirname "$0")/.." && pwd)/docker-compose.yml}
command -v docker-compose >/dev/null || { echo "FAIL: docker-compose not installed" >&2; exit 1; }
# An empty env file, so a developer's .env beside the compose file cannot hide a missing password.
no_env=$(mktemp)
trap 'rm -f "$no_env"' EXIT

passwords=(RABBITMQ_PASSWORD PAYMENT_BROKER_PASSWORD ACCOUNTING_BROKER_PASSWORD RECOVERY_BROKER_PASSWORD)
all=()
for p in "${passwords[@]}"; do all+=("$p=test-only-$p"); done
config=$(env "${all[@]}" docker-compose --env-file "$no_env" -f "$file" config) \
  || { echo "FAIL: docker-compose config rejects $file" >&2; exit 1; }
for p in "${passwords[@]}"; do
  if env "${all[@]}" -u "$p" docker-compose --env-file "$no_env" -f "$file" config -q 2>/dev/null; then
    echo "FAIL: $file is accepted without $p" >&2; exit 1
  fi
done
# Each service logs in as its own broker user, with its own password.
for s in payment accounting recovery; do
  upper=$(tr '[:lower:]' '[:upper:]' <<<"$s")
  grep -q "AMQP_URL: amqp://outbox-$s:test-only-${upper}_BROKER_PASSWORD@rabbitmq" <<<"$config" \
    || { echo "FAIL: ${s}_service does not use broker user outbox-$s" >&2; exit 1; }
done
if grep -q 'amqp://outbox:' <<<"$config"; then
  echo "FAIL: a service uses the admin broker user" >&2; exit 1
fi
# Profile `cluster`: three nodes, and services that list all three with quorum queues.
cluster=$(env "${all[@]}" RABBITMQ_ERLANG_COOKIE=test-cookie \
  docker-compose --env-file "$no_env" -f "$file" --profile cluster config) \
  || { echo "FAIL: docker-compose --profile cluster config rejects $file" >&2; exit 1; }
for node in rabbit-1 rabbit-2 rabbit-3; do
  grep -q "hostname: $node" <<<"$cluster" || { echo "FAIL: profile cluster has no $node" >&2; exit 1; }
done
urls=$(grep -cE 'AMQP_URL: amqp://outbox-(payment|accounting|recovery):test-only-[A-Z]+_BROKER_PASSWORD@rabbit-1:5672,rabbit-2:5672,rabbit-3:5672/%2F' <<<"$cluster")
quorum=$(grep -c 'QUEUE_TYPE: quorum' <<<"$cluster")
[[ $urls == 3 && $quorum == 3 ]] \
  || { echo "FAIL: profile cluster: $urls of 3 services list the nodes, $quorum use quorum queues" >&2; exit 1; }
if grep -qi guest "$file"; then
  echo "FAIL: $file mentions guest" >&2; exit 1
fi
# gRPC TLS, tokens and the message key in all eleven services (docker-compose
# config shows the cluster and shards profiles' too).
config=$(env "${all[@]}" docker-compose --env-file "$no_env" -f "$file" config)
# expect COUNT TEXT: exactly COUNT lines of the resolved config end in TEXT
# (after a space, a slash or a colon).
expect() {
  local n
  n=$(awk -v t="$2" '{ s = substr($0, length($0) - length(t) + 1); p = substr($0, length($0) - length(t), 1) }
    s == t && (p == " " || p == "/" || p == ":") { n++ } END { print n + 0 }' <<<"$config")
  [[ $n == "$1" ]] || { echo "FAIL: expected '$2' $1 times in the resolved config, found $n" >&2; exit 1; }
}
expect 11 "TLS_CERT_FILE: /certs/server.pem"
expect 11 "TLS_KEY_FILE: /certs/server.key"
expect 11 "TLS_CA_FILE: /certs/ca.pem"
expect 11 "certs/compose:/certs:ro"
expect 7 "API_TOKEN_FILE: /certs/api.token"
expect 4 "OPS_TOKEN_FILE: /certs/ops.token"
expect 11 "MESSAGE_KEYS_FILE: /certs/message.keys"
# Profile `shards`: two payment shards that know each other, each with its
# own reply queue (its recovery's too), declared by their accounting.
expect 2 "PAYMENT_SHARDS: 127.0.0.1:50071,127.0.0.1:50072"
expect 2 "ACC_QUEUE: shards.ACC_QUEUE.s0"
expect 2 "ACC_QUEUE: shards.ACC_QUEUE.s1"
expect 1 "REPLY_QUEUES: shards.ACC_QUEUE.s0,shards.ACC_QUEUE.s1"
echo "PASS: $file"
