#!/usr/bin/env bash
# Changes the number of accounting shards M (docs/deployment.md, Accounting shards) in
# three checked steps; the operator stops and starts the services in between:
#
#   1. stop every payment_service and recovery_service instance (SIGTERM)
#   reshard_accounting.sh drain FROM        waits until accounting has consumed
#        every queue of the FROM layout (no message ready or unacknowledged);
#        refuses while ACC_QUEUE still has a consumer (a payment_service runs)
#   2. stop the accounting instances
#   reshard_accounting.sh switch FROM TO    checks again, then deletes the
#        queues the TO layout does not have (only if empty; their DLQs too,
#        which must be empty: a dead letter is re-driven to the queue it left)
#   3. start accounting shards 0..TO-1 and payment_service with
#        ACCOUNTING_SHARDS=TO; recovery stays stopped
#   reshard_accounting.sh settle            waits until payment has consumed
#        every acknowledgement that was waiting in ACC_QUEUE, so each payment
#        booked under FROM is SENT and will never be re-published
#   4. start recovery_service with ACCOUNTING_SHARDS=TO
#
# Why: the hash ring of TO sends some payments to another shard than FROM
# did. A copy of such a payment published after the switch (a recovery
# re-publish of a row whose acknowledgement was still on its way) would find
# no dedup record there and book a second voucher. Draining the queues and
# consuming the acknowledgements first leaves SENDING only rows that no shard
# has booked, and those may go anywhere.
#
# Environment:
#   PAY_QUEUE [PAY_QUEUE], ACC_QUEUE [ACC_QUEUE]   as the services have them
#   REPLY_QUEUES    with payment shards: every shard's reply queue, comma-separated,
#                   as accounting has them (ACC_QUEUE.s0,ACC_QUEUE.s1,...); they
#                   replace ACC_QUEUE in every check below
#   BROKER_DIR      a node of scripts/rabbitmq_node.sh (its rabbitmqctl is used), or
#   RABBITMQCTL     a rabbitmqctl command line, e.g. "docker compose exec -T rabbitmq rabbitmqctl"
#   RESHARD_TIMEOUT [300]   seconds each waiting step waits before it gives up (exit 1)
set -euo pipefail

PAY_QUEUE=${PAY_QUEUE:-PAY_QUEUE}
ACC_QUEUE=${ACC_QUEUE:-ACC_QUEUE}
TIMEOUT=${RESHARD_TIMEOUT:-300}
# The queues payment_service instances consume: one per payment shard.
IFS=, read -r -a REPLIES <<<"${REPLY_QUEUES:-$ACC_QUEUE}"
((${#REPLIES[@]} > 0)) || REPLIES=("$ACC_QUEUE")

if [[ -n ${RABBITMQCTL:-} ]]; then
  read -r -a CTL <<<"$RABBITMQCTL"
elif [[ -n ${BROKER_DIR:-} ]]; then
  [[ -f $BROKER_DIR/broker.env ]] || die "BROKER_DIR: no node in $BROKER_DIR"
  DIR=$(cd "$BROKER_DIR" && pwd)
  # shellcheck source=scripts/rabbitmq_node.sh
  source "$(dirname "${BASH_SOURCE[0]}")/rabbitmq_node.sh"
  load_env
  CTL=(timeout 60 "$RMQ_BIN/rabbitmqctl" -n "$RABBITMQ_NODE")
else
  echo "reshard_accounting: set BROKER_DIR or RABBITMQCTL" >&2
  exit 1
fi
# After sourcing rabbitmq_node.sh, which has a die of its own.
die() { echo "reshard_accounting: $*" >&2; exit 1; }
say() { echo "reshard_accounting: $*"; }
[[ $TIMEOUT =~ ^[0-9]+$ ]] || die "RESHARD_TIMEOUT must be whole seconds"

# queues M: the payment-event queues of the layout with M shards (as
# ServiceConfig::payment_event_queues names them).
queues() {
  local k
  if (($1 == 1)); then echo "$PAY_QUEUE"; return; fi
  for ((k = 0; k < $1; k++)); do echo "$PAY_QUEUE-$k"; done
}

shards_arg() {
  if ! [[ $1 =~ ^[1-9][0-9]*$ ]] || (($1 > 64)); then die "shard counts are 1..64 (got '$1')"; fi
}

# Every queue: "name ready unacked consumers", one a line.
STATS=
refresh() {
  STATS=$("${CTL[@]}" -q list_queues --no-table-headers name messages_ready \
    messages_unacknowledged consumers 2>/dev/null) || die "rabbitmqctl list_queues failed"
}
# qstat QUEUE: "ready unacked consumers" of QUEUE, or nothing when it does not exist.
qstat() { awk -v q="$1" '$1 == q { print $2, $3, $4 }' <<<"$STATS"; }

# Payment consumes its reply queue: a consumer there means a payment_service
# (shard) runs. Prints the first reply queue with a consumer.
payment_stopped() {
  local q s
  for q in "${REPLIES[@]}"; do
    s=$(qstat "$q")
    if [[ -n $s && ${s##* } != 0 ]]; then
      echo "$q"
      return 1
    fi
  done
}

# drained M: every queue of layout M is empty (or gone). Prints what is not.
drained() {
  local q s r u c ok=0
  for q in $(queues "$1"); do
    s=$(qstat "$q")
    [[ -n $s ]] || continue
    read -r r u c <<<"$s"
    if ((r + u > 0)); then
      ok=1
      echo "$q: $r ready, $u unacknowledged, $c consumers"
      ((c > 0)) || echo "$q has no consumer: start its accounting shard"
    fi
  done
  return "$ok"
}

cmd_drain() {
  local from=$1 deadline=$((SECONDS + TIMEOUT)) left
  refresh
  local busy
  busy=$(payment_stopped) || die "$busy still has a consumer: stop every payment_service (and recovery_service) first"
  until refresh && left=$(drained "$from"); do
    ((SECONDS < deadline)) || die "not drained after ${TIMEOUT}s: $left"
    sleep 1
  done
  busy=$(payment_stopped) || die "a payment_service started meanwhile ($busy has a consumer): stop it and run drain again"
  say "the $from-shard layout is drained; stop the accounting instances, then: switch $from TO"
}

cmd_switch() {
  local from=$1 to=$2 left q dlq s keep busy
  [[ $from != "$to" ]] || die "FROM and TO are the same"
  refresh
  busy=$(payment_stopped) || die "$busy has a consumer: payment_service must stay stopped until the switch"
  left=$(drained "$from") || die "not drained: $left (run drain first)"
  keep=" $(queues "$to" | tr '\n' ' ') "
  for q in $(queues "$from"); do
    [[ $keep == *" $q "* ]] && continue
    dlq=$q.DLQ
    s=$(qstat "$dlq")
    if [[ -n $s && ${s%% *} != 0 ]]; then
      die "$dlq holds ${s%% *} dead letters: re-drive them (outboxctl) and drain again, or purge them, before $q goes"
    fi
  done
  for q in $(queues "$from"); do
    [[ $keep == *" $q "* ]] && continue
    for dlq in "$q" "$q.DLQ"; do
      [[ -n $(qstat "$dlq") ]] || continue
      "${CTL[@]}" -q delete_queue --if-empty "$dlq" >/dev/null || die "cannot delete $dlq (not empty?)"
      say "deleted $dlq"
    done
  done
  # M > 1 -> M = 1 leaves <PAY_QUEUE>.hash without
  # shard bindings: it routes nothing and may stay.
  say "switched $from -> $to shards; start accounting shards 0..$((to - 1)) and payment_service" \
    "with ACCOUNTING_SHARDS=$to (recovery stays stopped), then: settle"
}

cmd_settle() {
  local deadline=$((SECONDS + TIMEOUT)) s r u c q waiting
  # FIFO: once a reply queue is seen empty with nothing unacknowledged and
  # its payment_service consuming, every acknowledgement that waited there
  # has been applied.
  while :; do
    refresh
    waiting=
    for q in "${REPLIES[@]}"; do
      s=$(qstat "$q")
      if [[ -n $s ]]; then
        read -r r u c <<<"$s"
        ((c > 0 && r + u == 0)) && continue
      fi
      waiting+=" $q (${s:-missing})"
    done
    [[ -z $waiting ]] && break
    ((SECONDS < deadline)) || die "not settled after ${TIMEOUT}s:$waiting; is every payment_service running?"
    sleep 0.5
  done
  say "acknowledgements applied; start recovery_service with the new ACCOUNTING_SHARDS"
}

[[ $# -ge 1 ]] || die "usage: $0 drain FROM | switch FROM TO | settle"
case $1 in
  drain) [[ $# == 2 ]] || die "usage: $0 drain FROM"; shards_arg "$2"; cmd_drain "$2" ;;
  switch) [[ $# == 3 ]] || die "usage: $0 switch FROM TO"; shards_arg "$2"; shards_arg "$3"; cmd_switch "$2" "$3" ;;
  settle) [[ $# == 1 ]] || die "usage: $0 settle"; cmd_settle ;;
  *) die "usage: $0 drain FROM | switch FROM TO | settle" ;;
esac
