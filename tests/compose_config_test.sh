#!/usr/bin/env bash
# Checks docker-compose.yml: valid with RABBITMQ_PASSWORD set, rejected without
# it (no default password), no guest account anywhere, and gRPC TLS and tokens
# on in all three services (certificates mounted read-only).
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
if grep -qi guest "$file"; then
  echo "FAIL: $file mentions guest" >&2; exit 1
fi
config=$(RABBITMQ_PASSWORD=test-only docker-compose --env-file "$no_env" -f "$file" config)
# expect COUNT TEXT: exactly COUNT lines of the resolved config end in TEXT
# (after a space, a slash or a colon).
expect() {
  local n
  n=$(awk -v t="$2" '{ s = substr($0, length($0) - length(t) + 1); p = substr($0, length($0) - length(t), 1) }
    s == t && (p == " " || p == "/" || p == ":") { n++ } END { print n + 0 }' <<<"$config")
  [[ $n == "$1" ]] || { echo "FAIL: expected '$2' $1 times in the resolved config, found $n" >&2; exit 1; }
}
expect 3 "TLS_CERT_FILE: /certs/server.pem"
expect 3 "TLS_KEY_FILE: /certs/server.key"
expect 3 "TLS_CA_FILE: /certs/ca.pem"
expect 3 "certs/compose:/certs:ro"
expect 2 "API_TOKEN_FILE: /certs/api.token"
expect 1 "OPS_TOKEN_FILE: /certs/ops.token"
echo "PASS: $file"
