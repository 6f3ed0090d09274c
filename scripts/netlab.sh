#!/usr/bin/env bash
# A network fault lab on simulated hosts. Each process group runs in a Linux
# network namespace of its own, like a host: three RabbitMQ nodes (one
# cluster, quorum queues), payment_service, accounting_service, two
# recovery_service instances and the load client, joined by veth pairs to a
# bridge in a namespace of the lab's own, on 10.213.0.0/24. Faults are nft
# drop rules inside the namespaces (Jepsen's iptables drops) and SIGSTOP;
# the root namespace is never touched. With STORE=postgres the services'
# databases are PostgreSQL's (scripts/postgres_node.sh): a primary in the
# host pg1 and its synchronous standby (remote_apply) in pg2, payment and
# recovery on the database outbox, accounting on the database accounting,
# each service's URI naming both hosts with target_session_attrs=read-write,
# the password in PGPASSFILE. `run` is scripts/netlab/lab.py
# (Debian's Python 3: runs the faults, collects the ledger and the databases'
# state, judges them with judge.py, prints the table), which calls the Bash
# plumbing scripts/lib/netlab_ns.sh (namespaces, bridge, veths, nft, tc, the
# brokers and services started in their namespaces; scripts/lib/netlab.sh).
#
#   netlab.sh run [FAULT[,FAULT...]|all]   build the lab, run the fault(s) under load, print one table
#                               (in order; "all" in the list is every fault: all,flapping repeats one)
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
# With STORE=postgres only (and in its "all"):
#   pay-db-cut       payment and both recovery instances <-> the primary (pg1) dropped
#   pg-standby-cut   the primary <-> its synchronous standby dropped: commits wait for it
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
# it, i.e. when the last payment made so far was delivered), db-heal
# (PostgreSQL: below), whole (fault
# end -> b1 sees 3 running nodes and no partition, "no" if not within 120 s),
# FAILED,
# attempts (the rows' publishes, avg/max, lost ones included), copies
# (messages accounting took from PAY_QUEUE per acked payment), errors
# (failed/skipped creates and their gRPC codes at the client; "refused N":
# the creates payment_service answered with an error, from its log, which
# the client's channel sends again while UNAVAILABLE, client/channel.h), stale (claims by an instance
# the lease did not name: must be 0), both (messages re-published by both
# instances), quorum (fewest online members of a quorum queue), alerts (left
# active), check (outbox_check, and PRAGMA integrity_check of both files).
# On PostgreSQL: the ledger is judged by the same query on copies of the
# tables it reads (psql COPY over the primary's socket into SQLite files,
# WORK/<fault>.outbox.db and .accounting.db); the claim audit is a PL/pgSQL
# trigger of the same table; outbox_check and the integrity checks are
# SQLite's, skipped, and the check column says so; db-heal is the fault's
# end -> the first payment committed on the primary after it (its outbox rows
# counted every 0.1 s; "no" fails the fault), "-" on SQLite. The log line
# "payments committed while the fault lasted" says whether any create got
# through during it.
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
# STORE (sqlite, the default, or postgres), PG_OPTIONS (appended to the
# services' URIs, e.g. "&tcp_user_timeout=5000&keepalives_idle=5"; default
# none: libpq's and the services' own settings), PG_WAL_TIMEOUT (seconds:
# the replication link's timeouts on both ends, wal_sender_timeout,
# wal_receiver_timeout and the standby's TCP keepalives, tcp_user_timeout and
# connect_timeout, so that the standby reconnects within about that after a
# cut; default none: PostgreSQL's 60 s and TCP's retransmission backoff).
# KEEP=1 keeps the work dir (logs, databases).
# Needs root. Exit status: 0 every fault passed, 1 otherwise or on error.
# The judging's own tests: scripts/netlab/judge_test.py (ctest netlab.judge).
set -Eeuo pipefail

cd "$(dirname "$0")/.."
SCRIPT=netlab
WORK=
result=1
last_error=

# shellcheck source=scripts/lib/netlab.sh
source scripts/lib/netlab.sh

# cleanup: on any exit of selftest: removes every namespace of this run and the work dir.
cleanup() {
  local rc=$?
  trap - EXIT INT TERM ERR
  if [[ $rc != 0 && $result != 0 && -n $last_error ]]; then
    echo "$SCRIPT: stopped (status $rc); the last command that failed: $last_error" >&2
  fi
  remove_lab "$LAB_PREFIX"
  [[ -n $WORK && -d $WORK ]] && rm -rf "$WORK"
  exit "$rc"
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

case ${1:-} in
  run)
    # The same process becomes the lab: the namespaces' owner pid is this one.
    export LAB_PREFIX
    exec /usr/bin/python3 scripts/netlab/lab.py run "${2:-all}"
    ;;
  clean)
    [[ $(id -u) == 0 ]] || die "needs root"
    clean_stale
    ;;
  selftest)
    trap cleanup EXIT
    trap 'last_error="line $LINENO: $BASH_COMMAND"' ERR
    trap 'exit 130' INT
    trap 'exit 143' TERM
    cmd_selftest
    ;;
  *) echo "usage: $0 run [FAULT[,FAULT...]|all] | clean | selftest" >&2; exit 2 ;;
esac
