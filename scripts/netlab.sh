#!/usr/bin/env bash
# A network fault lab on simulated hosts. Each process group runs in a Linux
# network namespace of its own, like a host: three RabbitMQ nodes (one
# cluster, quorum queues), payment_service, accounting_service, two
# recovery_service instances and the load client, joined by veth pairs to a
# bridge in a namespace of the lab's own, on 10.213.0.0/24. Faults are nft
# drop rules inside the namespaces (Jepsen's iptables drops) and SIGSTOP;
# the root namespace is never touched. Helpers: scripts/lib/netlab.sh.
#
#   netlab.sh run [FAULT|all]   build the lab, run the fault(s) under load, print one table
#   netlab.sh clean             remove setups left by a netlab.sh that is gone
#   netlab.sh selftest          the plumbing only: namespaces, bridge, ping, a cut,
#                               a process started in a namespace and killed by pid
#
# Faults (each for FAULT_SECS under RATE payments/s from outbox_bench):
#   pay-cut          payment <-> every broker dropped
#   acc-cut          accounting <-> every broker dropped
#   recovery-cut     the active recovery instance <-> every broker dropped
#   broker-minority  the node leading PAY_QUEUE cut off from every other host
#   pay-oneway       payment sends to the brokers but receives nothing back
#   recovery-pause   SIGSTOP of the active recovery for LEASE_TTL + 10 s, then SIGCONT
#   netem-lossy      200 ms +- 50 ms delay and 5 % loss on payment's link (only with netem)
#
# After each fault heals: every payment the client was told of is SENT with
# one voucher, no FAILED row, outbox_check exits 0. Columns: payments (the
# client's acknowledged creates), lost (acknowledged but missing, not SENT or
# without voucher), duplicates (payments with more than one voucher), heal
# (fault end -> every row created before it SENT), publishes per payment
# (the outbox rows' attempts, avg/max: copies sent towards PAY_QUEUE), create
# errors (failed/skipped calls at the client), check (outbox_check).
#
# Settings (environment): RATE (300), FAULT_SECS (30), PRE (10 s of load
# before the fault), POST (10 s after), LEASE_TTL (10), HEAL_TIMEOUT (300),
# BUILD_DIR (build), KEEP=1 keeps the work dir (logs, databases).
# Needs root. Exit status: 0 every fault passed, 1 otherwise or on error.
set -euo pipefail

cd "$(dirname "$0")/.."
SCRIPT=netlab
RATE=${RATE:-300}
FAULT_SECS=${FAULT_SECS:-30}
PRE=${PRE:-10}
POST=${POST:-10}
WARMUP=2
LEASE_TTL=${LEASE_TTL:-10}
HEAL_TIMEOUT=${HEAL_TIMEOUT:-300}
FAULTS=(pay-cut acc-cut recovery-cut broker-minority pay-oneway recovery-pause)
WORK=
BIN=
result=1
sleeper=
bench_pid=
any_failed=0
declare -a table_rows=()

# shellcheck source=scripts/lib/netlab.sh
source scripts/lib/netlab.sh

# cleanup: on any exit: stops the load and the services, removes every
# namespace of this run; keeps $WORK on failure or with KEEP=1.
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ -n $sleeper ]]; then kill "$sleeper" 2>/dev/null || true; fi
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
  WORK=$(mktemp -d -t oblab.XXXXXX)
  log "work dir $WORK; namespaces $LAB_PREFIX-*"
  make_network
  ping_all || die "the simulated hosts cannot reach each other"
  log "network up: ${#LAB_HOSTS[@]} hosts on $LAB_NET.0/24"
  start_cluster
  log "RabbitMQ cluster up: rabbit@b1, rabbit@b2, rabbit@b3"
  start_services
  log "services up: payment $(ip_of pay), accounting $(ip_of acc), recovery $(ip_of rec1) and $(ip_of rec2)"
}

# ---------------------------------------------------------------- faults

# fault_start NAME: injects the fault; prints what it hit.
fault_start() {
  local victim others
  case $1 in
    pay-cut) cut_host pay b1 b2 b3; echo "payment" ;;
    acc-cut) cut_host acc b1 b2 b3; echo "accounting" ;;
    recovery-cut)
      victim=$(lease_holder)
      victim=${victim:-rec1}
      cut_host "$victim" b1 b2 b3
      echo "$victim"
      ;;
    broker-minority)
      victim=$(queue_leader PAY_QUEUE) || victim=b1
      mapfile -t others < <(other_hosts "$victim")
      cut_host "$victim" "${others[@]}"
      echo "$victim"
      ;;
    pay-oneway) deafen_host pay b1 b2 b3; echo "payment (inbound)" ;;
    recovery-pause)
      victim=$(lease_holder)
      victim=${victim:-rec1}
      kill -STOP "${svc_pid[$victim]}"
      echo "$victim"
      ;;
    netem-lossy) in_host pay tc qdisc add dev eth0 root netem delay 200ms 50ms loss 5%; echo "payment" ;;
    *) die "unknown fault $1" ;;
  esac
}

# fault_stop NAME VICTIM: heals it.
fault_stop() {
  case $1 in
    recovery-pause) kill -CONT "${svc_pid[$2]}" ;;
    netem-lossy) in_host pay tc qdisc del dev eth0 root ;;
    *) heal_all ;;
  esac
}

# fault_length NAME: seconds the fault lasts.
fault_length() {
  if [[ $1 == recovery-pause ]]; then echo $((LEASE_TTL + 10)); else echo "$FAULT_SECS"; fi
}

# other_hosts HOST: every host but HOST.
other_hosts() {
  local h
  for h in "${LAB_HOSTS[@]}"; do [[ $h == "$1" ]] || echo "$h"; done
}

# ---------------------------------------------------------------- measuring

# await_healed SINCE_MS: seconds (one decimal) from SINCE_MS until no row created
# before it is SENDING; "timeout" after HEAL_TIMEOUT.
await_healed() {
  local since=$1 n deadline=$((SECONDS + HEAL_TIMEOUT))
  while ((SECONDS < deadline)); do
    n=$(pdb "SELECT count(*) FROM outbox WHERE status = 'SENDING' AND created_at <= $since;") || n=
    if [[ $n == 0 ]]; then
      awk -v ms=$(($(now_ms) - since)) 'BEGIN { printf "%.1f\n", ms / 1000 }'
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

# run_fault NAME: one fault under load; appends a row to table_rows; sets
# any_failed=1 if it failed a check (it returns 0, so `set -e` holds inside it).
run_fault() {
  local name=$1 before_id length victim t_fault t_heal heal bench_out key prefix
  local ok failed skipped found unsettled lost dups copies failed_rows check_rc verdict whole=""
  bench_out=$WORK/$name.bench.txt
  length=$(fault_length "$name")
  before_id=$(pdb "SELECT coalesce(max(id), 0) FROM payments;")
  log "$name: load at $RATE/s for $((WARMUP + PRE + length + POST)) s, fault for $length s after $((WARMUP + PRE)) s"
  ip netns exec "$(ns_of load)" "$BIN/outbox_bench" --payment_addr="$(ip_of pay):50051" \
    --accounting_addr="$(ip_of acc):50052" --rate="$RATE" --warmup="${WARMUP}s" \
    --duration="$((PRE + length + POST))s" --drain_timeout="${HEAL_TIMEOUT}s" \
    --label="$name" --json >"$bench_out" 2>&1 &
  bench_pid=$!
  pause_s $((WARMUP + PRE))
  t_fault=$(now_ms)
  victim=$(fault_start "$name")
  log "$name: fault on $victim (lease: $(lease_holder))"
  pause_s "$length"
  if [[ $name == recovery-pause ]]; then
    log "$name: lease before SIGCONT: $(lease_holder)"
  fi
  fault_stop "$name" "$victim"
  t_heal=$(now_ms)
  log "$name: healed after $(( (t_heal - t_fault) / 1000 )) s (lease: $(lease_holder))"
  heal=$(await_healed "$t_heal")
  log "$name: rows created before the heal all SENT: $heal s"
  if [[ $name == broker-minority ]]; then
    if cluster_whole "$(other_hosts "$victim" | grep '^b' | head -1)" 120; then whole=" (cluster whole)"; else whole=" (cluster NOT whole)"; fi
  fi
  wait "$bench_pid" || log "$name: outbox_bench exited non-zero (see $bench_out)"
  bench_pid=
  await_all_sent || log "$name: rows still SENDING after $HEAL_TIMEOUT s"
  ok=$(json_figure "$bench_out" create_ok)
  failed=$(json_figure "$bench_out" create_failed)
  skipped=$(json_figure "$bench_out" create_skipped)
  key=$(pdb "SELECT idempotency_key FROM payments WHERE id > $before_id AND idempotency_key LIKE 'm-%' LIMIT 1;")
  prefix=${key%-*}-
  found=$(pdb "SELECT count(*) FROM payments WHERE idempotency_key LIKE '$prefix%';")
  unsettled=$(pdb "SELECT count(*) FROM payments p JOIN outbox o ON o.biz_type = 'payment' AND o.biz_key = p.payment_id
      WHERE p.idempotency_key LIKE '$prefix%'
        AND (o.status != 'SENT' OR NOT EXISTS (SELECT 1 FROM acc.vouchers v WHERE v.payment_id = p.payment_id));")
  lost=$(( ${ok:-0} > found ? ${ok:-0} - found + unsettled : unsettled ))
  dups=$(pdb "SELECT count(*) FROM (SELECT v.payment_id FROM acc.vouchers v JOIN payments p ON p.payment_id = v.payment_id
      WHERE p.idempotency_key LIKE '$prefix%' GROUP BY v.payment_id HAVING count(*) > 1);")
  copies=$(pdb "SELECT printf('%.2f/%d', avg(o.attempts), max(o.attempts)) FROM payments p
      JOIN outbox o ON o.biz_type = 'payment' AND o.biz_key = p.payment_id WHERE p.idempotency_key LIKE '$prefix%';")
  failed_rows=$(pdb "SELECT count(*) FROM outbox WHERE status = 'FAILED';")
  check_rc=0
  "$BIN/outbox_check" --payment_db="$WORK/payment.db" --accounting_db="$WORK/accounting.db" \
    >"$WORK/$name.check.txt" 2>&1 || check_rc=$?
  verdict=OK
  if [[ $check_rc != 0 || $lost != 0 || $dups != 0 || $failed_rows != 0 || $heal == timeout || -z $ok ]]; then
    verdict=FAILED
  fi
  table_rows+=("$(printf '%-16s %-9s %6s %5s %5s %8s %9s %-12s %-9s %s' "$name" "${length}s" \
    "${ok:-?}" "$lost" "$dups" "$heal" "$failed_rows" "$copies" "${failed:-?}/${skipped:-?}" \
    "$verdict (check $check_rc)$whole")")
  log "$name: ok=$ok failed=$failed skipped=$skipped found=$found lost=$lost dups=$dups heal=$heal copies=$copies FAILED=$failed_rows check=$check_rc"
  if [[ $verdict != OK ]]; then any_failed=1; fi
}

# print_table: the results, one row per fault.
print_table() {
  echo
  printf '%-16s %-9s %6s %5s %5s %8s %9s %-12s %-9s %s\n' fault duration payments lost dups "heal(s)" FAILED \
    "publ/pay" "errors" check
  printf '%s\n' "${table_rows[@]}"
}

# ---------------------------------------------------------------- commands

# cmd_run [FAULT|all]: the lab, the faults, the table.
cmd_run() {
  local which=${1:-all} faults=() f
  if [[ $which == all ]]; then faults=("${FAULTS[@]}"); else faults=("$which"); fi
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
  *) echo "usage: $0 run [FAULT|all] | clean | selftest" >&2; exit 2 ;;
esac
