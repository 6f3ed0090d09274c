#!/usr/bin/env bash
# Checks docker-compose.yml: valid with RABBITMQ_PASSWORD set, rejected without
# it (no default password), and no guest account anywhere.
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
echo "PASS: $file"
