#!/usr/bin/env bash
# Checks docker-compose.yml: valid with RABBITMQ_PASSWORD set, rejected without
# it (no default password), the `cluster` profile's nodes and URL list, and no
# guest account anywhere.
#   bash tests/compose_config_test.sh [path/to/docker-compose.yml]
set -euo pipefail
file=${1:-$(cd "$(dirname "$0")/.." && pwd)/docker-compose.yml}
command -v docker-compose >/dev/null || { echo "FAIL: docker-compose not installed" >&2; exit 1; }
# An empty env file, so a developer's .env beside the compose file cannot hide a missing password.
no_env=$(mktemp)
trap 'rm -f "$no_env"' EXIT

RABBITMQ_PASSWORD=test-only docker-compose --env-file "$no_env" -f "$file" config -q \
  || { echo "FAIL: docker-compose config rejects $file" >&2; exit 1; }
if env -u RABBITMQ_PASSWORD docker-compose --env-file "$no_env" -f "$file" config -q 2>/dev/null; then
  echo "FAIL: $file is accepted without RABBITMQ_PASSWORD" >&2; exit 1
fi
# Profile `cluster`: three nodes, and services that list all three with quorum queues.
cluster=$(RABBITMQ_PASSWORD=test-only RABBITMQ_ERLANG_COOKIE=test-cookie \
  docker-compose --env-file "$no_env" -f "$file" --profile cluster config) \
  || { echo "FAIL: docker-compose --profile cluster config rejects $file" >&2; exit 1; }
for node in rabbit-1 rabbit-2 rabbit-3; do
  grep -q "hostname: $node" <<<"$cluster" || { echo "FAIL: profile cluster has no $node" >&2; exit 1; }
done
urls=$(grep -c 'AMQP_URL: amqp://outbox:test-only@rabbit-1:5672,rabbit-2:5672,rabbit-3:5672/%2F' <<<"$cluster")
quorum=$(grep -c 'QUEUE_TYPE: quorum' <<<"$cluster")
[[ $urls == 3 && $quorum == 3 ]] \
  || { echo "FAIL: profile cluster: $urls of 3 services list the nodes, $quorum use quorum queues" >&2; exit 1; }
if grep -qi guest "$file"; then
  echo "FAIL: $file mentions guest" >&2; exit 1
fi
echo "PASS: $file"
