#!/bin/bash
# pg-passfiles' command (docker-compose.yml, profile `pg`): libpq's password
# file of each database role, from the environment, into the volume its
# services mount read-only at /pgpass (PGPASSFILE=/pgpass/pgpass), owned by
# the services' user (uid 10001, docker/Dockerfile), mode 0600. Run to
# completion before the services start, at every `up`, so a changed
# password reaches them with the next `up`.
set -euo pipefail
# write DIR ROLE PASSWORD: DIR/pgpass for ROLE on any host, port and database.
write() {
  [[ -n $3 ]] || { echo "pg-passfiles: set the password of role $2" >&2; exit 1; }
  (umask 077 && printf '*:*:*:%s:%s\n' "$2" "$(printf '%s' "$3" | sed 's/[\\:]/\\&/g')" >"$1/pgpass.new")
  chown 10001 "$1/pgpass.new"
  mv "$1/pgpass.new" "$1/pgpass"
  echo "pg-passfiles: $1/pgpass for role $2"
}
write /out/payment payment "${PAYMENT_DB_PASSWORD:-}"
write /out/accounting accounting "${ACCOUNTING_DB_PASSWORD:-}"
