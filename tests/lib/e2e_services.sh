# The scaffolding of the e2e scripts that run the three services on the
# test run's RabbitMQ node (ctest's broker fixture), each with its own queues
# and files in a temp dir. Source it with the caller's build dir as $1 and a
# tag for its queues in $E2E_TAG; it sets root, build, bin, url, scale, tmp,
# pay_db, acc_db, tag, pid_of, port_of and common, traps EXIT (stops every
# service it started; on failure prints the end of each log), and defines
#   fail MESSAGE, expect_eq WHAT GOT WANT, sql QUERY (on payment.db),
#   start NAME LISTEN_VAR [VAR=VALUE...], stop NAME,
#   wait_for WHAT SQL-ON-PAYMENT-DB WANT.
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

tmp=$(mktemp -d)
pay_db=$tmp/payment.db
acc_db=$tmp/accounting.db
tag=${E2E_TAG:?set E2E_TAG}.$$.$RANDOM  # this run's own queues
declare -A pid_of=() port_of=()

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
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

fail() { echo "FAIL: $*" >&2; exit 1; }
expect_eq() {  # WHAT GOT WANT
  [[ $2 == "$3" ]] || fail "$1: got '$2', want '$3'"
  echo "ok: $1"
}

(umask 077 && echo "e2e$RANDOM $(openssl rand -hex 32)" >"$tmp/message.keys")
common=(AMQP_URL="$url" PAY_QUEUE="PAY.$tag" ACC_QUEUE="ACC.$tag" PAYMENT_DB="$pay_db"
        ACCOUNTING_DB="$acc_db" MESSAGE_KEYS_FILE="$tmp/message.keys" RETRY_BASE_DELAY=1s)

start() {  # NAME LISTEN_VAR [VAR=VALUE...]: starts $bin/NAME, waits for its next NAME_started line
  local name=$1 listen=$2 before _ line
  shift 2
  before=$(grep -c "${name}_started" "$tmp/$name.log" 2>/dev/null || true)
  env "${common[@]}" "$@" "$listen=127.0.0.1:${port_of[$name]:-0}" "$bin/$name" >>"$tmp/$name.log" 2>&1 &
  pid_of[$name]=$!
  for _ in $(seq $((300 * scale))); do
    if (($(grep -c "${name}_started" "$tmp/$name.log" || true) > before)); then
      line=$(grep "${name}_started" "$tmp/$name.log" | tail -n 1)
      port_of[$name]=$(sed -n 's/.* port=\([0-9]*\).*/\1/p' <<<"$line")
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
sql() { sqlite_read "$pay_db" "$1"; }
wait_for() {  # WHAT SQL-ON-PAYMENT-DB WANT: polls until the query answers WANT
  local deadline=$((SECONDS + 60 * scale)) got
  while :; do
    got=$(sql "$2")
    [[ $got == "$3" ]] && { echo "ok: $1"; return 0; }
    ((SECONDS < deadline)) || fail "$1: got '$got' after $((60 * scale)) s, want '$3'"
    sleep 0.2
  done
}
