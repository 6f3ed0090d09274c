#!/usr/bin/env bash
# A network fault lab on simulated hosts. Each process group runs in a Linux
# network namespace of its own, like a host: three RabbitMQ nodes (one
# cluster, quorum queues), payment_service, accounting_service, two
# recovery_service instances and the load client, joined by veth pairs to a
# bridge in a namespace of the lab's own, on 10.213.0.0/24. Faults are nft
# drop rules inside the namespaces (Jepsen's iptables drops) and SIGSTOP;
# the root namespace is never touched. Helpers: scripts/lib/netlab.sh.
#
#   netlab.sh run [FAULT[,FAULT...]|all]   build the lab, run the fault(s) under load, print one table
#   netlab.sh clean             remove setups left by a netlab.sh that is gone
#   netlab.sh selftest          the plumbing only: namespaces, bridge, ping, a cut,
#                               a process started in a namespace and killed by pid
#
# Faults (each for FAULT_SECS under RATE payments/s from outbox_bench):
#   pay-cut          payment <-> every broker dropped
#   acc-cut          accounting <-> every broker dropped
#   recovery-cut     the active recovery instance <-> every broker dropped
#   broker-follower  a node not leading PAY_QUEUE cut off from every other host (a minority)
#   broker-leader    the node leading PAY_QUEUE cut off from every other host
#                    (the leader on the minority side)
#   pay-oneway       payment sends to the brokers but receives nothing back
#   flapping         every 5-10 s a new random split of brokers and services in two halves, for FLAP_SECS
#   pay-slow         payment's link limited to SLOW_RATE by tc tbf
#   recovery-pause   SIGSTOP of the active recovery for LEASE_TTL + 10 s, then SIGCONT
#   skew-ahead       the standby recovery restarted SKEW_SECS ahead (libfaketime): it takes the lease
#   skew-behind      the standby restarted SKEW_SECS behind; the holder paused until the standby
#                    takes over, then resumed: it takes the lease back and the slow one is fenced
#   (the three lease faults also keep acks from payment, as pay-oneway does,
#   so that rows fall due and both instances have something to claim)
#   netem-lossy      200 ms +- 50 ms delay and 5 % loss on payment's link (only with netem)
#
# After each fault heals, the client's ledger (every acknowledged create) is
# checked against both databases: each payment stored with its amount, SENT,
# with exactly one voucher of the same amount; no FAILED row; outbox_check
# exits 0 and PRAGMA integrity_check passes on both files; every quorum
# queue has 3 of 3 members online; no recovery alert is active; and every re-publish a recovery instance logged was claimed while
# the lease row named that instance (a trigger the lab adds to payment.db
# records the lease inside each claim's own transaction). Columns: acked
# (creates the client was answered OK), lost (acked but missing, with another
# amount, not SENT or without voucher), dups (payments with more than one
# voucher), heal (fault end -> the latest sent_at of the rows created before
# it, i.e. when the last payment made so far was delivered), FAILED,
# attempts (the rows' publishes, avg/max, lost ones included), copies
# (messages accounting took from PAY_QUEUE per acked payment), errors
# (failed/skipped creates and their gRPC codes), stale (claims by an instance
# the lease did not name: must be 0), both (messages re-published by both
# instances), quorum (fewest online members of a quorum queue), alerts (left
# active), check (outbox_check, and PRAGMA integrity_check of both files).
#
# Settings (environment): RATE (300), FAULT_SECS (30), PRE (10 s of load
# before the fault), POST (10 s after), LEASE_TTL (10), SKEW_SECS (30),
# FLAP_SECS (60), SLOW_RATE (1mbit), HEAL_TIMEOUT (300), BUILD_DIR (build),
# PARTITION_HANDLING (the brokers' cluster_partition_handling, autoheal;
# Mnesia only), METADATA (where the brokers keep their metadata: mnesia, the
# default, or khepri, RabbitMQ 4.x only: the feature flag khepri_db is
# enabled once the cluster is formed; Raft, no partition handling),
# REPAIR_BROKERS (1: when a node still reports a partition 120 s after a
# fault, its RabbitMQ is not running, or it holds quorum queue members that
# stay offline, restart it, as an operator would, and say so; 0: leave the
# cluster so and fail the fault on its quorum; the default, auto, is 1 on
# RabbitMQ 3.x, whose autoheal needed it, and 0 on 4.x),
# The broker line: the host's RabbitMQ, or 4.0 through
# `scripts/rabbitmq40.sh run scripts/netlab.sh run ...`; the table names
# the version and metadata store of each row.
# KEEP=1 keeps the work dir (logs, databases).
# Needs root. Exit status: 0 every fault passed, 1 otherwise or on error.
set -Eeuo pipefail

cd "$(dirname "$0")/.."
SCRIPT=netlab
RATE=${RATE:-300}
FAULT_SECS=${FAULT_SECS:-30}
PRE=${PRE:-10}
POST=${POST:-10}
WARMUP=2
LEASE_TTL=${LEASE_TTL:-10}
HEAL_TIMEOUT=${HEAL_TIMEOUT:-300}
SKEW_SECS=${SKEW_SECS:-30}
FLAP_SECS=${FLAP_SECS:-60}
PARTITION_HANDLING=${PARTITION_HANDLING:-autoheal}
METADATA=${METADATA:-mnesia}
REPAIR_BROKERS=${REPAIR_BROKERS:-auto}
BROKER=
FLAP_MIN=5
FLAP_MAX=10
FLAP_HOSTS=(b1 b2 b3 pay acc rec1 rec2)
SLOW_RATE=${SLOW_RATE:-1mbit}
FAULTS=(pay-cut acc-cut recovery-cut broker-follower broker-leader pay-oneway flapping pay-slow
  recovery-pause skew-ahead skew-behind)
WORK=
BIN=
result=1
sleeper=
flapper=
bench_pid=
fault_victim=
last_error=
any_failed=0
declare -a table_rows=()
declare -a repairs=()

# shellcheck source=scripts/lib/netlab.sh
source scripts/lib/netlab.sh
# shellcheck source=scripts/lib/sqlite.sh
source scripts/lib/sqlite.sh

# cleanup: on any exit: stops the load and the services, removes every
# namespace of this run; keeps $WORK on failure or with KEEP=1.
cleanup() {
  local rc=$?
  trap - EXIT INT TERM ERR
  if [[ $rc != 0 && $result != 0 && -n $last_error ]]; then
    echo "$SCRIPT: stopped (status $rc); the last command that failed: $last_error" >&2
  fi
  if [[ -n $sleeper ]]; then kill "$sleeper" 2>/dev/null || true; fi
  stop_flapping
  if [[ -n $bench_pid ]]; then kill "$bench_pid" 2>/dev/null || true; fi
  stop_services
  remove_lab "$LAB_PREFIX"
  if [[ -n $WORK && -d $WORK ]]; then
    if [[ $result == 0 && ${KEEP:-0} != 1 ]]; then
      rm -rf "$WORK"
    else
      echo "$SCRIPT: logs and databases kept in $WORK" >&2
    fi
  fi
  exit "$rc"
}

# pause_s SECONDS: sleeps, interruptible by SIGINT/SIGTERM (bash runs traps only between commands).
pause_s() {
  sleep "$1" &
  sleeper=$!
  wait "$sleeper" || true
  sleeper=
}

# setup: namespaces, network, cluster and services.
setup() {
  BIN=$(cd "${BUILD_DIR:-build}/bin" && pwd) || die "no ${BUILD_DIR:-build}/bin: build first (scripts/build.sh)"
  local b
  for b in payment_service accounting_service recovery_service outbox_bench outbox_check outboxctl; do
    [[ -x $BIN/$b ]] || die "$BIN/$b is missing"
  done
  [[ -x $RMQ_BIN/rabbitmq-server ]] || die "rabbitmq-server is not installed (scripts/install_deps.sh)"
  broker_params
  WORK=$(mktemp -d -t oblab.XXXXXX)
  log "work dir $WORK; namespaces $LAB_PREFIX-*"
  make_network
  ping_all || die "the simulated hosts cannot reach each other"
  log "network up: ${#LAB_HOSTS[@]} hosts on $LAB_NET.0/24"
  start_cluster
  log "RabbitMQ $BROKER cluster up: rabbit@b1, rabbit@b2, rabbit@b3 (REPAIR_BROKERS=$REPAIR_BROKERS)"
  start_services
  add_claim_audit
  log "services up: payment $(ip_of pay), accounting $(ip_of acc), recovery $(ip_of rec1) and $(ip_of rec2)"
}

# broker_params: checks METADATA against the broker's version, resolves
# REPAIR_BROKERS=auto and sets BROKER ("4.0.5/khepri"), the table's column.
broker_params() {
  local version
  version=$(broker_version)
  case $METADATA in
    mnesia) ;;
    khepri) [[ $version == [4-9].* ]] || die "METADATA=khepri needs RabbitMQ 4.x (the nodes run $version)" ;;
    *) die "METADATA must be mnesia or khepri, not '$METADATA'" ;;
  esac
  case $REPAIR_BROKERS in
    0 | 1) ;;
    auto) if [[ $version == 3.* ]]; then REPAIR_BROKERS=1; else REPAIR_BROKERS=0; fi ;;
    *) die "REPAIR_BROKERS must be 0, 1 or auto, not '$REPAIR_BROKERS'" ;;
  esac
  BROKER=$version/$METADATA
}

# ---------------------------------------------------------------- faults

# fault_start NAME: injects the fault; sets fault_victim to what it hit (not
# run in a subshell: it may start processes whose pids this shell must keep).
fault_start() {
  local victim others
  fault_victim=
  case $1 in
    pay-cut) cut_host pay b1 b2 b3; fault_victim="payment" ;;
    acc-cut) cut_host acc b1 b2 b3; fault_victim="accounting" ;;
    recovery-cut)
      victim=$(lease_holder_or rec1)
      cut_host "$victim" b1 b2 b3
      fault_victim="$victim"
      ;;
    broker-follower | broker-leader)
      victim=$(queue_leader PAY_QUEUE) || victim=b1
      [[ $1 == broker-follower ]] && victim=$(printf '%s\n' b1 b2 b3 | grep -vx "$victim" | shuf -n 1)
      mapfile -t others < <(other_hosts "$victim")
      cut_host "$victim" "${others[@]}"
      fault_victim="$victim"
      ;;
    pay-oneway) deafen_host pay b1 b2 b3; fault_victim="payment (inbound)" ;;
    flapping) start_flapping; fault_victim="random halves of ${FLAP_HOSTS[*]}" ;;
    pay-slow) in_host pay tc qdisc add dev eth0 root tbf rate "$SLOW_RATE" burst 32kbit latency 400ms; fault_victim="payment ($SLOW_RATE)" ;;
    recovery-pause)
      victim=$(lease_holder_or rec1)
      withhold_acks
      kill -STOP "${svc_pid[$victim]}"
      fault_victim="$victim"
      ;;
    skew-ahead)
      # The standby's clock runs ahead: the holder's lease looks expired to it.
      victim=$(other_recovery "$(lease_holder_or rec1)")
      withhold_acks
      restart_recovery "$victim" "+${SKEW_SECS}s"
      fault_victim="$victim (+${SKEW_SECS} s)"
      ;;
    skew-behind)
      # The standby's clock runs behind; the holder stalls until the standby
      # has taken over, then resumes: the slow clock's lease, already expired
      # by everyone else's clock, is taken back and its holder is fenced.
      victim=$(other_recovery "$(lease_holder_or rec1)")
      withhold_acks
      restart_recovery "$victim" "-${SKEW_SECS}s"
      kill -STOP "${svc_pid[$(other_recovery "$victim")]}"
      fault_victim="$victim (-${SKEW_SECS} s; $(other_recovery "$victim") paused)"
      ;;
    netem-lossy) in_host pay tc qdisc add dev eth0 root netem delay 200ms 50ms loss 5%; fault_victim="payment" ;;
    *) die "unknown fault $1" ;;
  esac
}

# fault_stop NAME VICTIM: heals it.
fault_stop() {
  local inst=${2%% *}
  case $1 in
    recovery-pause) kill -CONT "${svc_pid[$inst]}"; heal_all ;;
    skew-ahead) restart_recovery "$inst"; heal_all ;;
    skew-behind)
      kill -CONT "${svc_pid[$(other_recovery "$inst")]}"
      await_lease "$(other_recovery "$inst")" 30 || log "skew-behind: the lease did not go back to $(other_recovery "$inst")"
      restart_recovery "$inst"
      heal_all
      ;;
    flapping) stop_flapping; heal_all ;;
    pay-slow) in_host pay tc qdisc del dev eth0 root ;;
    netem-lossy) in_host pay tc qdisc del dev eth0 root ;;
    *) heal_all ;;
  esac
}

# fault_length NAME: seconds the fault lasts.
fault_length() {
  case $1 in
    recovery-pause) echo $((LEASE_TTL + 10)) ;;
    skew-behind) echo $((LEASE_TTL + SKEW_SECS + 10)) ;;  # until the slow clock sees the lease expire
    flapping) echo "$FLAP_SECS" ;;
    *) echo "$FAULT_SECS" ;;
  esac
}

# other_hosts HOST: every host but HOST.
other_hosts() {
  local h
  for h in "${LAB_HOSTS[@]}"; do [[ $h == "$1" ]] || echo "$h"; done
}

# withhold_acks: payment hears nothing from the brokers (its publishes still
# go out), so no row is acknowledged and rows fall due: during the lease
# faults both recovery instances have something to claim.
withhold_acks() {
  deafen_host pay b1 b2 b3
}

# other_recovery INSTANCE: the other recovery instance.
other_recovery() {
  if [[ $1 == rec1 ]]; then echo rec2; else echo rec1; fi
}

# lease_holder_or DEFAULT: the lease holder, DEFAULT if none.
lease_holder_or() {
  local h
  h=$(lease_holder)
  echo "${h:-$1}"
}

# await_lease INSTANCE SECONDS: waits until INSTANCE holds the lease; 1 on timeout.
await_lease() {
  local deadline=$((SECONDS + $2))
  while ((SECONDS < deadline)); do
    [[ $(lease_holder) == "$1" ]] && return 0
    sleep 0.5
  done
  return 1
}

# flap_loop: until killed, every FLAP_MIN..FLAP_MAX s heals and splits
# FLAP_HOSTS into two random halves cut from each other (the load client
# keeps its links: creates are measured, not blocked).
flap_loop() {
  local hosts half a
  while true; do
    heal_all
    mapfile -t hosts < <(printf '%s\n' "${FLAP_HOSTS[@]}" | shuf)
    half=$((1 + RANDOM % (${#hosts[@]} - 1)))
    for a in "${hosts[@]:0:half}"; do cut_host "$a" "${hosts[@]:half}"; done
    log "flapping: {${hosts[*]:0:half}} | {${hosts[*]:half}}"
    sleep $((FLAP_MIN + RANDOM % (FLAP_MAX - FLAP_MIN + 1)))
  done
}

start_flapping() {
  flap_loop &
  flapper=$!
}

stop_flapping() {
  if [[ -n $flapper ]]; then
    kill "$flapper" 2>/dev/null || true
    wait "$flapper" 2>/dev/null || true
  fi
  flapper=
}

# ---------------------------------------------------------------- measuring

# await_healed SINCE_MS: once no row created before SINCE_MS is SENDING, the
# heal in seconds (one decimal): the latest sent_at of those rows (the
# payments' own time stamps, written when accounting's reply was applied)
# minus SINCE_MS, 0.0 if all were SENT before it; "timeout" after HEAL_TIMEOUT.
await_healed() {
  local since=$1 n last deadline=$((SECONDS + HEAL_TIMEOUT))
  while ((SECONDS < deadline)); do
    n=$(pdb "SELECT count(*) FROM outbox WHERE status = 'SENDING' AND created_at <= $since;") || n=
    if [[ $n == 0 ]]; then
      last=$(pdb "SELECT coalesce(max(sent_at), 0) FROM outbox
                   WHERE status = 'SENT' AND created_at <= $since;") || last=
      [[ $last =~ ^[0-9]+$ ]] || { sleep 0.5; continue; }
      awk -v ms=$((last - since)) 'BEGIN { printf "%.1f\n", (ms > 0 ? ms : 0) / 1000 }'
      return 0
    fi
    sleep 0.5
  done
  echo timeout
}

# await_all_sent: waits up to HEAL_TIMEOUT for no SENDING row at all.
await_all_sent() {
  local deadline=$((SECONDS + HEAL_TIMEOUT))
  while ((SECONDS < deadline)); do
    [[ $(pdb "SELECT count(*) FROM outbox WHERE status = 'SENDING';" || true) == 0 ]] && return 0
    sleep 1
  done
  return 1
}

# json_figure FILE NAME: the figure NAME from outbox_bench's --json line, as an integer.
json_figure() {
  { grep -o "\"$2\":[0-9.]*" "$1" || true; } | tail -1 | sed -E 's/.*://; s/\..*//'
}

# error_codes FILE: outbox_bench's "create errors" codes (e.g. "code14=3"), or "-".
error_codes() {
  local codes
  codes=$(sed -nE 's/.*create errors +(( code[0-9]+=[0-9]+)+);.*/\1/p' "$1" | tail -1 | tr -s ' ' | sed 's/^ //; s/ /,/g')
  echo "${codes:--}"
}

# deliveries: PAY_QUEUE messages accounting has taken so far (vouchers booked + duplicates answered).
deliveries() {
  echo $(($(metric acc outbox_vouchers_created_total) + $(metric acc outbox_duplicates_total)))
}

# claim_log SINCE_LINE_REC1 SINCE_LINE_REC2: the re-publishes each recovery
# instance logged after those line numbers, as "instance,message_id,attempt" lines.
claim_log() {
  local inst from
  for inst in rec1 rec2; do
    if [[ $inst == rec1 ]]; then from=$1; else from=$2; fi
    tail -n +"$((from + 1))" "$WORK/$inst.log" | awk -v inst="$inst" '
      $3 == "message_republished" || $3 == "message_republish_failed" {
        m = ""; a = ""
        for (i = 4; i <= NF; i++) {
          if ($i ~ /^message_id=/) m = substr($i, 12)
          if ($i ~ /^attempt=/) a = substr($i, 9)
        }
        print inst "," m "," a
      }'
  done
}

# partitioned_node: the node that sees the fewest running nodes among those
# whose view still lists a partition, or nothing when no node's does.
partitioned_node() {
  local b out running worst='' fewest=4
  for b in "${BROKERS[@]}"; do
    out=$(node_view "$b")
    [[ $out =~ ^\{([0-9]+),\[(.+)\]\}$ ]] || continue
    running=${BASH_REMATCH[1]}
    ((running < fewest)) && { fewest=$running; worst=$b; }
  done
  echo "$worst"
}

# restart_node B WHY: what an operator does when RabbitMQ leaves node B
# broken after the network has healed (docs/deployment.md#clustering): logs
# WHY and restarts the whole node (a stop_app/start_app was seen to hang in
# Erlang's `global` after a partition); adds B to `repaired`.
restart_node() {
  log "$name: $2; restarting it"
  (restart_broker "$1") || log "$name: $1 did not restart (logs in $WORK/$1/log)"
  repaired+=("$1")
}

# repair_partition: restarts the node whose view still lists a partition,
# at most twice, until the cluster is whole.
repair_partition() {
  local b
  for _ in 1 2; do
    b=$(partitioned_node)
    [[ -n $b ]] || return 0
    restart_node "$b" "$b still reports a partition"
    cluster_whole b1 60 && return 0
  done
}

# stuck_node: a node whose Erlang VM answers but whose RabbitMQ is not
# running (its start hung), or nothing.
stuck_node() {
  local b
  for b in "${BROKERS[@]}"; do
    [[ $(rmq "$b" 15 eval 'rabbit:is_running().' 2>/dev/null) == false ]] && { echo "$b"; return 0; }
  done
  return 0
}

# offline_member_node: the node holding the most quorum queue members that
# are not online, asked of the first node that answers; nothing when every
# member is online.
offline_member_node() {
  local b out
  for b in "${BROKERS[@]}"; do
    out=$(rmq "$b" 20 list_queues name type members online --formatter json 2>/dev/null) || continue
    jq -r '[.[] | select(.type == "quorum") | (.members - .online)[]] | group_by(.) |
      max_by(length) | .[0] // empty | ltrimstr("rabbit@")' <<<"$out" 2>/dev/null
    return 0
  done
}

# settle_cluster: waits up to 120 s for the cluster to be whole, then up to
# 120 s for every quorum queue member to be online. With REPAIR_BROKERS=1 a
# cluster not whole by then is repaired first: a node that still lists a
# partition is restarted (repair_partition); if it is still not whole, a
# node whose RabbitMQ is not running (its start hung) is restarted, and the
# quorum wait is cut to 10 s unless that made it whole. A node whose quorum
# queue members stay offline (its start hung in Erlang's `global` after
# autoheal restarted it) is restarted last, and the quorum waited for again.
# Sets `quorum` (await_quorum_whole's answer) and adds to `repaired`.
settle_cluster() {
  local b wait=120
  if ! cluster_whole b1 120; then
    log "$name: the cluster is not whole after 120 s (b1's view)"
    if ((REPAIR_BROKERS)); then
      repair_partition
      if ! cluster_whole b1 5; then
        wait=10
        b=$(stuck_node)
        if [[ -n $b ]]; then
          restart_node "$b" "RabbitMQ on $b is not running (its start hung)"
          cluster_whole b1 60 && wait=120
        fi
      fi
    fi
  fi
  quorum=$(await_quorum_whole "$wait")
  [[ $quorum != 3/3 ]] && ((REPAIR_BROKERS)) || return 0
  b=$(offline_member_node)
  [[ -n $b ]] || return 0
  restart_node "$b" "quorum queue members on $b stay offline"
  cluster_whole b1 60 || log "$name: the cluster is not whole 60 s after restarting $b (b1's view)"
  quorum=$(await_quorum_whole)
}

# await_quorum_whole [SECONDS]: waits up to SECONDS (120) for every quorum
# queue to have its 3 members online; prints "3/3" or the worst "n/3".
await_quorum_whole() {
  local deadline worst=0 b n
  deadline=$((SECONDS + ${1:-120}))
  while ((SECONDS < deadline)); do
    # Any node's answer will do: after autoheal has restarted nodes, one
    # node's list_queues has been seen to hang on a queue for minutes while
    # the others answered at once with every member online.
    for b in b1 b2 b3; do
      n=$(rmq "$b" 20 list_queues name type online --formatter json 2>/dev/null |
        jq -r '[.[] | select(.type == "quorum") | (.online | length)] | min // 0' 2>/dev/null) || n=
      [[ $n =~ ^[0-9]+$ ]] || continue
      ((n > worst)) && worst=$n
      [[ $worst == 3 ]] && break 2
    done
    sleep 2
  done
  echo "$worst/3"
}

# await_no_alerts: waits up to 90 s until neither recovery instance holds an
# active alert; prints how many are left.
await_no_alerts() {
  local deadline=$((SECONDS + 90)) n
  while true; do
    n=$(($(metric rec1 outbox_alerts_active) + $(metric rec2 outbox_alerts_active)))
    ((n == 0 || SECONDS >= deadline)) && break
    sleep 2
  done
  echo "$n"
}

# judge NAME LEDGER DELIVERED REC1_FROM REC2_FROM: checks the run's ledger
# against both databases and the claims against the lease; prints
# "acked lost dups attempts copies failed stale both".
judge() {
  local name=$1 ledger=$2 delivered=$3 db=$WORK/$1.judge.db
  claim_log "$4" "$5" >"$WORK/$name.claims.csv"
  sqlite_write "$db" "CREATE TABLE ledger (payment_id TEXT PRIMARY KEY, amount INTEGER, message_id TEXT);" \
    "CREATE TABLE claims (instance TEXT, message_id TEXT, attempt INTEGER);" \
    ".mode csv" ".import $ledger ledger" ".import $WORK/$name.claims.csv claims"
  sqlite_write "$db" -noheader -separator ' ' \
    "ATTACH 'file:$WORK/payment.db?mode=ro' AS p;" "ATTACH 'file:$WORK/accounting.db?mode=ro' AS a;" "
    WITH checked AS (
      SELECT l.payment_id,
             EXISTS (SELECT 1 FROM p.payments x WHERE x.payment_id = l.payment_id AND x.amount_minor = l.amount) AS stored,
             (SELECT o.status FROM p.outbox o WHERE o.message_id = l.message_id) AS status,
             (SELECT o.attempts FROM p.outbox o WHERE o.message_id = l.message_id) AS attempts,
             (SELECT count(*) FROM a.vouchers v WHERE v.payment_id = l.payment_id AND v.amount_minor = l.amount) AS vouchers
      FROM ledger l)
    SELECT count(*),
           sum(NOT stored OR coalesce(status, '') != 'SENT' OR vouchers = 0),
           sum(vouchers > 1),
           printf('%.2f/%d', avg(attempts), max(attempts)),
           printf('%.2f', $delivered * 1.0 / max(count(*), 1)),
           (SELECT count(*) FROM p.outbox WHERE status = 'FAILED'),
           (SELECT count(*) FROM claims c WHERE NOT EXISTS (SELECT 1 FROM p.netlab_claims n
              WHERE n.message_id = c.message_id AND n.attempts = c.attempt AND n.holder = c.instance)),
           (SELECT count(*) FROM (SELECT message_id FROM claims GROUP BY message_id HAVING count(DISTINCT instance) > 1))
    FROM checked;"
}

# run_fault NAME: one fault under load; appends a row to table_rows; sets
# any_failed=1 if it failed a check (it returns 0, so `set -e` holds inside it).
run_fault() {
  local name=$1 length victim t_fault t_heal heal bench_out ledger rec1_from rec2_from delivered0
  local acked lost dups attempts copies failed_rows stale both failed skipped codes quorum alerts check_rc verdict
  local repaired=() restarted=
  local stem=$name n=2
  # A fault named twice in one run (flapping is random) keeps each run's files.
  while [[ -e $WORK/$stem.ledger.csv ]]; do stem=$name.$n n=$((n + 1)); done
  bench_out=$WORK/$stem.bench.txt
  ledger=$WORK/$stem.ledger.csv
  length=$(fault_length "$name")
  rec1_from=$(wc -l <"$WORK/rec1.log")
  rec2_from=$(wc -l <"$WORK/rec2.log")
  delivered0=$(deliveries)
  log "$name: load at $RATE/s for $((WARMUP + PRE + length + POST)) s, fault for $length s after $((WARMUP + PRE)) s"
  ip netns exec "$(ns_of load)" "$BIN/outbox_bench" --payment_addr="$(ip_of pay):50051" \
    --accounting_addr="$(ip_of acc):50052" --rate="$RATE" --warmup="${WARMUP}s" \
    --duration="$((PRE + length + POST))s" --drain_timeout="${HEAL_TIMEOUT}s" \
    --label="$name" --ledger="$ledger" --json >"$bench_out" 2>&1 &
  bench_pid=$!
  pause_s $((WARMUP + PRE))
  t_fault=$(now_ms)
  fault_start "$name"
  victim=$fault_victim
  log "$name: fault on $victim (lease: $(lease_holder))"
  pause_s "$length"
  fault_stop "$name" "$victim"
  t_heal=$(now_ms)
  log "$name: healed after $(((t_heal - t_fault) / 1000)) s (lease: $(lease_holder))"
  heal=$(await_healed "$t_heal")
  log "$name: rows created before the heal all SENT, the last $heal s after it (sent_at)"
  wait "$bench_pid" || log "$name: outbox_bench exited non-zero (see $bench_out)"
  bench_pid=
  await_all_sent || log "$name: rows still SENDING after $HEAL_TIMEOUT s"
  settle_cluster
  alerts=$(await_no_alerts)
  log "$name: quorum members $quorum, alerts left $alerts"
  failed=$(json_figure "$bench_out" create_failed)
  skipped=$(json_figure "$bench_out" create_skipped)
  codes=$(error_codes "$bench_out")
  read -r acked lost dups attempts copies failed_rows stale both < <(judge "$stem" "$ledger" \
    "$(($(deliveries) - delivered0))" "$rec1_from" "$rec2_from")
  check_rc=0
  "$BIN/outbox_check" --payment_db="$WORK/payment.db" --accounting_db="$WORK/accounting.db" \
    >"$WORK/$stem.check.txt" 2>&1 || check_rc=$?
  integrity=$(files_integrity "$WORK/$stem.integrity.txt")
  verdict=OK
  if [[ $check_rc != 0 || $integrity != ok || $lost != 0 || $dups != 0 || $failed_rows != 0 || $stale != 0 ||
    $heal == timeout || $quorum != 3/3 || $alerts != 0 || ${acked:-0} == 0 ]]; then
    verdict=FAILED
  fi
  if ((${#repaired[@]})); then
    restarted=", restarted ${repaired[*]}"
    repairs+=("$name: ${repaired[*]}")
  fi
  table_rows+=("$(table_row "$name" "$BROKER" "${length}s" "$acked" "$lost" "$dups" "$heal" \
    "$failed_rows" "$attempts" "$copies" "${failed:-?}/${skipped:-?} $codes" "$stale" "$both" \
    "$quorum" "$alerts" "$verdict (check $check_rc, files $integrity$restarted)")")
  log "$name: acked=$acked lost=$lost dups=$dups heal=$heal attempts=$attempts copies=$copies FAILED=$failed_rows errors=$failed/$skipped $codes stale_claims=$stale both=$both quorum=$quorum alerts=$alerts check=$check_rc files=$integrity${repaired[*]:+ restarted=${repaired[*]}}"
  if [[ $verdict != OK ]]; then any_failed=1; fi
}

# files_integrity OUT: "ok" when PRAGMA integrity_check passes on both
# database files (their full answers go to OUT), else "BAD". It compares
# every index with its table, which outbox_check does not.
files_integrity() {
  local f verdict=ok answer
  : >"$1"
  for f in payment.db accounting.db; do
    answer=$(sqlite3 -readonly -batch -noheader -cmd '.timeout 10000' "$WORK/$f" \
      'PRAGMA integrity_check' 2>&1) || true
    printf '%s: %s\n' "$f" "$answer" >>"$1"
    [[ $answer == ok ]] || verdict=BAD
  done
  echo "$verdict"
}

# table_row COLUMNS...: one aligned line of the table.
table_row() {
  printf '%-15s %-13s %-5s %6s %4s %4s %7s %6s %-9s %6s %-16s %5s %4s %6s %6s %s\n' "$@"
}

# print_table: the results, one row per fault.
print_table() {
  echo
  table_row fault broker secs acked lost dups "heal(s)" FAILED attempts copies "errors" stale both quorum alerts check
  printf '%s\n' "${table_rows[@]}"
  if ((${#repairs[@]})); then
    echo
    echo "RabbitMQ left a node partitioned or its queue members offline after the network healed; the lab restarted it (fault: nodes):"
    printf '  %s\n' "${repairs[@]}"
  fi
}

# ---------------------------------------------------------------- commands

# cmd_run [FAULT|all]: the lab, the faults, the table.
cmd_run() {
  local which=${1:-all} faults=() f
  if [[ $which == all ]]; then faults=("${FAULTS[@]}"); else IFS=, read -r -a faults <<<"$which"; fi
  for f in "${faults[@]}"; do
    [[ " ${FAULTS[*]} netem-lossy " == *" $f "* ]] || die "unknown fault '$f' (one of: ${FAULTS[*]} netem-lossy, or all)"
  done
  clean_stale
  require_namespaces
  setup
  if netem_present; then
    [[ $which == all ]] && faults+=(netem-lossy)
  else
    echo "netem: absent, latency/loss faults skipped"
    [[ $which == netem-lossy ]] && die "netem-lossy needs netem"
  fi
  for f in "${faults[@]}"; do
    run_fault "$f"
  done
  print_table
  "$BIN/outbox_check" --payment_db="$WORK/payment.db" --accounting_db="$WORK/accounting.db" |
    sed -n '/^payments:/,/^vouchers:/p'
  if ((any_failed == 0)); then
    result=0
    echo "RESULT OK"
  else
    echo "RESULT FAILED"
    last_error=  # a verdict, not a stop
    exit 1
  fi
}

# cmd_selftest: the plumbing without brokers or services.
cmd_selftest() {
  local pid _
  clean_stale
  require_namespaces
  WORK=$(mktemp -d -t oblab.XXXXXX)
  make_network
  ping_all || die "selftest: ping between hosts failed"
  echo "selftest: ${#LAB_HOSTS[@]} hosts ping each other"
  cut_host pay b1 b2 b3
  if in_host pay ping -c 1 -W 1 -q "$(ip_of b1)" >/dev/null 2>&1; then die "selftest: the cut did not hold"; fi
  in_host acc ping -c 1 -W 1 -q "$(ip_of b1)" >/dev/null 2>&1 || die "selftest: the cut hit another host"
  heal_all
  in_host pay ping -c 1 -W 1 -q "$(ip_of b1)" >/dev/null 2>&1 || die "selftest: the heal did not"
  echo "selftest: cut pay <-> brokers held and healed"
  deafen_host pay b1
  if in_host pay ping -c 1 -W 1 -q "$(ip_of b1)" >/dev/null 2>&1; then die "selftest: one-way drop did not hold"; fi
  heal_all
  echo "selftest: one-way drop held and healed"
  ip netns exec "$(ns_of pay)" sleep 300 &
  pid=$!
  for _ in $(seq 50); do [[ $(pids_in_ns "$(ns_of pay)") == "$pid" ]] && break; sleep 0.1; done
  [[ $(pids_in_ns "$(ns_of pay)") == "$pid" ]] || die "selftest: pid $pid not found in $(ns_of pay)"
  kill -TERM "$pid"
  wait "$pid" 2>/dev/null || true
  [[ -z $(pids_in_ns "$(ns_of pay)") ]] || die "selftest: pid $pid still in $(ns_of pay)"
  echo "selftest: a process in a namespace found and killed by pid"
  if netem_present; then echo "netem: present"; else echo "netem: absent, latency/loss faults skipped"; fi
  result=0
  echo "RESULT OK"
}

trap cleanup EXIT
trap 'last_error="line $LINENO: $BASH_COMMAND"' ERR
trap 'exit 130' INT
trap 'exit 143' TERM

case ${1:-} in
  run) cmd_run "${2:-all}" ;;
  clean)
    [[ $(id -u) == 0 ]] || die "needs root"
    clean_stale
    result=0
    ;;
  selftest) cmd_selftest ;;
  *) echo "usage: $0 run [FAULT[,FAULT...]|all] | clean | selftest" >&2; exit 2 ;;
esac
