# The scaffolding of the e2e scripts that run the three services on the
# test run's RabbitMQ node (ctest's broker fixture), each with its own queues
# and files in a temp dir. Source it with the caller's build dir as $1 and a
# tag for its queues in $E2E_TAG; it sets root, build, bin, url, scale, tmp,
# store, pay_db, acc_db, tag, pid_of, port_of and common, traps EXIT (stops
# every service it started, drops the databases it made; on failure prints
# the end of each log), and defines
#   fail MESSAGE, expect_eq WHAT GOT WANT, sql QUERY (on the payment store),
#   new_db NAME, db_read DB QUERY, start NAME LISTEN_VAR [VAR=VALUE...],
#   stop NAME, wait_for WHAT SQL-ON-PAYMENT-DB WANT.
#
# The store ($store): SQLite files in $tmp by default. With
# OUTBOX_E2E_STORE=postgres (ctest's outbox_require_postgres) databases of
# the script's own on the test run's PostgreSQL server (OUTBOX_TEST_PG_DIR,
# cmake/PostgresFixture.cmake), made by new_db, dropped at exit. The
# services get libpq URIs without a password and PGPASSFILE, the server's
# pgpass, in common. Only a script whose checks hold on either store (it
# reads the stores through sql and db_read alone) may run there: it sets
# E2E_STORES=any before sourcing this; the others refuse PostgreSQL.
# shellcheck shell=bash
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(cd "${1:?usage: $(basename "$0") BUILD}" && pwd)
bin=$build/bin
[[ -n ${OUTBOX_TEST_BROKER_DIR:-} ]] || { echo "FAIL: OUTBOX_TEST_BROKER_DIR is not set (run through ctest)" >&2; exit 1; }
url=$(cat "$OUTBOX_TEST_BROKER_DIR/amqp_url")
scale=${OUTBOX_TEST_TIME_SCALE:-1}  # sanitizer builds: longer deadlines (tests/CMakeLists.txt)
# shellcheck source=SCRIPTDIR/../../scripts/lib/sqlite.sh
source "$root/scripts/lib/sqlite.sh"

store=sqlite
if [[ ${OUTBOX_E2E_STORE:-} == postgres ]]; then
  [[ ${E2E_STORES:-} == any ]] || { echo "FAIL: $(basename "$0") runs on SQLite only" >&2; exit 1; }
  [[ -f ${OUTBOX_TEST_PG_DIR:-}/node.env ]] ||
    { echo "FAIL: OUTBOX_E2E_STORE=postgres needs OUTBOX_TEST_PG_DIR (run through ctest)" >&2; exit 1; }
  store=postgres
  pg_passfile=$OUTBOX_TEST_PG_DIR/pgpass
  pg_psql=$(sed -n 's/^PG_BIN=//p' "$OUTBOX_TEST_PG_DIR/node.env")/psql
  # The server's URI, database outbox: postgresql://outbox@HOST:PORT/outbox?passfile=...
  pg_url=$(bash "${OUTBOX_PG_NODE_SCRIPT:-$root/scripts/postgres_node.sh}" url "$OUTBOX_TEST_PG_DIR")
  pg_prefix=${pg_url%%\?*}
  pg_prefix=${pg_prefix%/*}/  # postgresql://outbox@HOST:PORT/
  pg_names=e2e_sh_$$_${RANDOM}_  # every database this script makes starts so
fi

tmp=$(mktemp -d)
tag=${E2E_TAG:?set E2E_TAG}.$$.$RANDOM  # this run's own queues
declare -A pid_of=() port_of=()

# psql on the database of URI: unaligned, no headers, as sqlite3 prints.
pg_sql() {  # URI SQL
  PGPASSFILE=$pg_passfile "$pg_psql" -X -q -v ON_ERROR_STOP=1 -At -d "$1" -c "$2"
}
# new_db NAME: a store of its own for a service, as its PAYMENT_DB or
# ACCOUNTING_DB: the file $tmp/NAME.db, or on PostgreSQL a database made now
# (its URI).
new_db() {
  if [[ $store == sqlite ]]; then echo "$tmp/$1.db"; return; fi
  [[ $1 =~ ^[a-z0-9_]+$ ]] || { echo "FAIL: new_db $1: [a-z0-9_] only" >&2; return 1; }
  pg_sql "${pg_prefix}postgres" "CREATE DATABASE $pg_names$1" >/dev/null
  echo "$pg_prefix$pg_names$1"
}
# db_read DB QUERY: QUERY's rows on a store of new_db's, columns joined by |.
db_read() {
  if [[ $store == sqlite ]]; then sqlite_read "$1" "$2"; else pg_sql "$1" "$2"; fi
}
drop_dbs() {
  [[ $store == postgres ]] || return 0
  local name
  for name in $(pg_sql "${pg_prefix}postgres" \
    "SELECT datname FROM pg_database WHERE starts_with(datname, '$pg_names')" 2>/dev/null); do
    pg_sql "${pg_prefix}postgres" "DROP DATABASE IF EXISTS $name WITH (FORCE)" >/dev/null 2>&1 || true
  done
}

cleanup() {
  local rc=$? name _
  for name in "${!pid_of[@]}"; do kill -TERM "${pid_of[$name]}" 2>/dev/null || true; done
  for name in "${!pid_of[@]}"; do
    for _ in $(seq 100); do kill -0 "${pid_of[$name]}" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "${pid_of[$name]}" 2>/dev/null || true
  done
  if ((rc != 0)); then
    for log in "$tmp"/*.log "$tmp"/*.out; do
      [[ -f $log ]] || continue
      echo "--- last lines of $(basename "$log")" >&2
      tail -n 25 "$log" >&2
    done
  fi
  drop_dbs
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
pay_db=$(new_db payment)
acc_db=$(new_db accounting)

fail() { echo "FAIL: $*" >&2; exit 1; }
expect_eq() {  # WHAT GOT WANT
  [[ $2 == "$3" ]] || fail "$1: got '$2', want '$3'"
  echo "ok: $1"
}

(umask 077 && echo "e2e$RANDOM $(openssl rand -hex 32)" >"$tmp/message.keys")
common=(AMQP_URL="$url" PAY_QUEUE="PAY.$tag" ACC_QUEUE="ACC.$tag" PAYMENT_DB="$pay_db"
        ACCOUNTING_DB="$acc_db" MESSAGE_KEYS_FILE="$tmp/message.keys" RETRY_BASE_DELAY=1s)
[[ $store == sqlite ]] || common+=(PGPASSFILE="$pg_passfile")

# started_port: the port= of the *_started lines on stdin, the field's and not
# one inside a quoted value after it (a PostgreSQL store's db="... port=N").
started_port() { sed -n 's/^[^"]*_started [^"]* port=\([0-9]*\).*/\1/p'; }
start() {  # NAME LISTEN_VAR [VAR=VALUE...]: starts $bin/NAME, waits for its next NAME_started line
  local name=$1 listen=$2 before now _ line
  shift 2
  before=$(grep -c "${name}_started" "$tmp/$name.log" 2>/dev/null) || true
  env "${common[@]}" "$@" "$listen=127.0.0.1:${port_of[$name]:-0}" "$bin/$name" >>"$tmp/$name.log" 2>&1 &
  pid_of[$name]=$!
  for _ in $(seq $((300 * scale))); do
    now=$(grep -c "${name}_started" "$tmp/$name.log" 2>/dev/null) || true  # no log yet: ""
    if ((${now:-0} > ${before:-0})); then
      line=$(grep "${name}_started" "$tmp/$name.log" | tail -n 1)
      port_of[$name]=$(started_port <<<"$line")
      return 0
    fi
    kill -0 "${pid_of[$name]}" 2>/dev/null || fail "$name exited at start"
    sleep 0.1
  done
  fail "$name did not start within $((30 * scale)) s"
}
stop() {  # NAME: SIGTERM, then waits for it to exit
  local _
  kill -TERM "${pid_of[$1]}"
  for _ in $(seq $((300 * scale))); do kill -0 "${pid_of[$1]}" 2>/dev/null || break; sleep 0.1; done
  wait "${pid_of[$1]}" || fail "$1 did not exit cleanly after SIGTERM"
  unset "pid_of[$1]"
}
sql() { db_read "$pay_db" "$1"; }
wait_for() {  # WHAT SQL-ON-PAYMENT-DB WANT: polls until the query answers WANT
  local deadline=$((SECONDS + 60 * scale)) got
  while :; do
    got=$(sql "$2")
    [[ $got == "$3" ]] && { echo "ok: $1"; return 0; }
    ((SECONDS < deadline)) || fail "$1: got '$got' after $((60 * scale)) s, want '$3'"
    sleep 0.2
  done
}
