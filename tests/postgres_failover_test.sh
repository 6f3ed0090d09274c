#!/usr/bin/env bash
# scripts/postgres_node.sh on real servers: a primary and its synchronous
# standby; while the primary waits for the standby no commit is acknowledged;
# transactions committed, the primary SIGKILLed under a stream of them, the
# standby promoted, and every acknowledged transaction is there. The password
# shows in no output of the script and in no URL; stop leaves no process.
#   bash tests/postgres_failover_test.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
node=$root/scripts/postgres_node.sh
fail() { echo "FAIL: $*" >&2; exit 1; }

base=$(mktemp -d "${TMPDIR:-/tmp}/pg-failover.XXXXXX")
chmod 755 "$base"  # the server's user (postgres, under root) must reach it
P=$base/primary
S=$base/standby
out=$base/script.out
writer=""
cleanup() {
  [[ -z $writer ]] || kill "$writer" 2>/dev/null || true
  bash "$node" stop "$S" >/dev/null 2>&1 || true
  bash "$node" stop "$P" >/dev/null 2>&1 || true
  rm -rf "$base"
}
trap cleanup EXIT

run() { bash "$node" "$@" | tee -a "$out"; }  # the script, its output kept
q() {  # DIR SQL: one query as outbox, through the node's URL
  local url
  url=$(run url "$1")
  "$PG_BIN/psql" -X -q -At -v ON_ERROR_STOP=1 "$url" -c "$2"
}
# A process by pid and start time (a pid used again is another process).
stat_of() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null; }
alive() { [[ -n $(stat_of "$1") && $(stat_of "$1" | awk '{print $1}') != Z ]]; }
same_process() {  # PID:START
  alive "${1%:*}" && [[ $(stat_of "${1%:*}" | awk '{print $20}') == "${1#*:}" ]]
}
processes_of() {  # DIR: PID:START of the postmaster and of its children
  local pid p
  pid=$(bash "$node" pid "$1")
  for p in "$pid" $(ps -o pid= --ppid "$pid"); do
    echo "$p:$(stat_of "$p" | awk '{print $20}')"
  done
}
wait_sync() {  # DIR of the primary: its standby is synchronous again
  local deadline=$((SECONDS + 60))
  until [[ $(q "$1" "SELECT sync_state FROM pg_stat_replication") == sync ]]; do
    ((SECONDS < deadline)) || fail "the standby did not become synchronous again"
    sleep 0.1
  done
}

t0=$SECONDS
run fresh "$P" >/dev/null
run standby "$P" "$S" >/dev/null
eval "$(run env "$P")"  # PG_BIN
[[ $(stat -c %a "$P/password") == 600 ]] || fail "password file mode $(stat -c %a "$P/password")"
pids=()
keep_pids() { mapfile -t -O "${#pids[@]}" pids < <(processes_of "$1"); }
keep_pids "$P"
keep_pids "$S"
[[ $(q "$P" "SELECT application_name, sync_state FROM pg_stat_replication") == "$(
  sed -n 's/^NODE_NAME=//p' "$S/node.env")|sync" ]] || fail "the standby is not the primary's synchronous standby"
[[ $(q "$S" "SELECT pg_is_in_recovery()") == t ]] || fail "the standby is not in recovery"

q "$P" "CREATE TABLE t (id int PRIMARY KEY, tx int NOT NULL)"

# The primary waits for the standby: with the standby down, a commit waits
# (wait event SyncRep) and is not acknowledged; cancelled, psql is told so.
bash "$node" stop "$S" >>"$out"
"$PG_BIN/psql" -X -At "$(run url "$P")" -c "INSERT INTO t VALUES (0, 0)" >"$base/waiting.out" 2>&1 &
waiting=$!
deadline=$((SECONDS + 60))
until [[ -n ${backend:-} ]]; do
  ((SECONDS < deadline)) || fail "no commit waits for the standby"
  alive "$waiting" || fail "a commit was acknowledged without the standby: $(cat "$base/waiting.out")"
  sleep 0.05
  backend=$(q "$P" "SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep'")
done
q "$P" "SELECT pg_cancel_backend($backend)" >/dev/null
wait "$waiting" || true
grep -q "canceling wait for synchronous replication" "$base/waiting.out" ||
  fail "the cancelled commit: $(cat "$base/waiting.out")"
run start "$S" >/dev/null
wait_sync "$P"
keep_pids "$S"

# Transactions of three rows each; psql echoes a transaction's number once
# its COMMIT is acknowledged (the \echo runs after the server's reply).
transactions() {  # FROM TO
  local i
  for ((i = $1; i <= $2; i++)); do
    printf 'BEGIN;\n'
    printf 'INSERT INTO t VALUES (%d, %d), (%d, %d), (%d, %d);\n' \
      $((3 * i)) "$i" $((3 * i + 1)) "$i" $((3 * i + 2)) "$i"
    printf 'COMMIT;\n\\echo %d\n' "$i"
  done
}
transactions 1 200 | "$PG_BIN/psql" -X -q -At -v ON_ERROR_STOP=1 "$(run url "$P")" >"$base/acked"
[[ $(wc -l <"$base/acked") == 200 ]] || fail "200 transactions, $(wc -l <"$base/acked") acknowledged"

# A stream of them, and the primary SIGKILLed in its midst.
transactions 201 100000 | "$PG_BIN/psql" -X -q -At -v ON_ERROR_STOP=1 "$(run url "$P")" \
  >>"$base/acked" 2>"$base/writer.err" &
writer=$!
deadline=$((SECONDS + 60))
until (($(wc -l <"$base/acked") >= 400)); do
  ((SECONDS < deadline)) || fail "the stream of transactions does not move: $(cat "$base/writer.err")"
  alive "$writer" || fail "the writer stopped: $(cat "$base/writer.err")"
  sleep 0.05
done
keep_pids "$P"
run kill "$P" >/dev/null
wait "$writer" && fail "the writer outlived the primary"
writer=""

run promote "$S" >/dev/null
[[ $(q "$S" "SELECT pg_is_in_recovery()") == f ]] || fail "the promoted standby is still in recovery"
q "$S" "SELECT DISTINCT tx FROM t WHERE tx > 0 ORDER BY tx" >"$base/present"
missing=$(sort -n "$base/acked" | comm -23 - <(sort -n "$base/present") | head -5)
[[ -z $missing ]] || fail "acknowledged transactions missing on the promoted standby: $missing"
[[ $(q "$S" "SELECT count(*) FROM t WHERE tx > 0 GROUP BY tx HAVING count(*) <> 3") == "" ]] ||
  fail "a transaction is there in part"
[[ $(q "$S" "SELECT count(*) FROM t WHERE id = 0") == 1 ]] || fail "the row committed on the primary alone is not there"
acked=$(wc -l <"$base/acked")
present=$(wc -l <"$base/present")
# The promoted node takes writes; the multi-host URL finds it.
[[ $("$PG_BIN/psql" -X -q -At "$(run url "$P" "$S")" -c "INSERT INTO t VALUES (-1, -1) RETURNING id") == -1 ]] ||
  fail "the multi-host URL does not reach the promoted primary"

keep_pids "$S"
run stop "$S" >/dev/null
for p in "${pids[@]}"; do
  if same_process "$p"; then fail "pid ${p%:*} ($(tr '\0' ' ' <"/proc/${p%:*}/cmdline")) outlived stop or kill"; fi
done
for f in /proc/[0-9]*/cmdline; do
  if grep -qF "$base" "$f" 2>/dev/null; then fail "a process of $base is left: $(tr '\0' ' ' <"$f")"; fi
done

# The password: in no output of the script, no URL, no file of the standby's
# configuration.
password=$(cat "$P/password")
[[ ${#password} -ge 32 ]] || fail "a short password"
[[ $(cat "$S/password") == "$password" ]] || fail "the standby's password differs"
if grep -qF "$password" "$out"; then fail "the password is in the script's output"; fi
if grep -qF "$password" "$S/data/postgresql.auto.conf" "$S/data/node.conf" "$S/data/postgresql.conf"; then
  fail "the password is in the standby's configuration"
fi
echo "PASS: $acked transactions acknowledged, $present on the promoted standby (PostgreSQL $(
  "$PG_BIN/postgres" -V | awk '{print $3}'), $((SECONDS - t0)) s)"
