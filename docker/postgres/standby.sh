#!/bin/bash
# pg-standby's command (docker-compose.yml, profile `pg`), run by the
# postgres image's entrypoint as root. At the first start (no PG_VERSION in
# PGDATA) a base backup of PRIMARY_HOST with `pg_basebackup -R`:
# standby.signal and a primary_conninfo that names the passfile, not the
# password. Then the server as the user postgres, with the arguments given
# (its cluster_name is the application_name the primary's
# synchronous_standby_names waits for). Once promoted it starts as a
# primary. The superuser's password (POSTGRES_PASSWORD) goes into a
# passfile owned by postgres, written at every start.
set -euo pipefail
primary=${PRIMARY_HOST:?set PRIMARY_HOST}
password=${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}
user=${POSTGRES_USER:-postgres}
passfile=/var/lib/postgresql/replication.pgpass
# A passfile's fields escape \ and :.
(umask 077 && printf '*:*:*:%s:%s\n' "$user" "$(printf '%s' "$password" | sed 's/[\\:]/\\&/g')" >"$passfile")
chown postgres:postgres "$passfile"
mkdir -p "$PGDATA"
chown postgres:postgres "$PGDATA"
chmod 700 "$PGDATA"
if [[ ! -s $PGDATA/PG_VERSION ]]; then
  find "$PGDATA" -mindepth 1 -delete  # what a base backup cut short left
  echo "standby: pg_basebackup from $primary"
  gosu postgres pg_basebackup -D "$PGDATA" -R -X stream -c fast \
    -d "host=$primary port=5432 user=$user passfile=$passfile"
fi
exec gosu postgres postgres -D "$PGDATA" -c listen_addresses='*' \
  -c unix_socket_directories=/var/run/postgresql "$@"
