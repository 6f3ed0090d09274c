#!/usr/bin/env bash
# A private 3-node RabbitMQ cluster on loopback, for tests and demos. Each node
# is a rabbitmq_node.sh node in DIR/node1..3 (own name, ports, data dir),
# with one shared Erlang cookie; nodes 2 and 3 join node 1 with
# `rabbitmqctl join_cluster`.
#
#   rabbitmq_cluster.sh start DIR        start (or restart) the cluster, wait for 3 running
#                                        nodes; writes DIR/amqp_urls and DIR/nodes
#   rabbitmq_cluster.sh stop DIR         stop every node (no-op if none runs)
#   rabbitmq_cluster.sh fresh DIR        stop what DIR holds, wipe it, start
#   rabbitmq_cluster.sh wait DIR         wait until every node sees 3 running nodes, no partition
#   rabbitmq_cluster.sh start-node DIR I start node I again (after a kill), then wait
#   rabbitmq_cluster.sh queues DIR       print "NAME TYPE LEADER" for every queue
#   rabbitmq_cluster.sh leader DIR QUEUE print the number (1-3) of the node leading quorum QUEUE
#
# DIR/amqp_urls: the URL the services take, amqp://user:pass@127.0.0.1:P1,...:P3/%2F
# (the admin user); DIR/users/<user>.url and .password: each service's own user
# (node 1's user: the others took it over when they joined; their own
# broker.env URLs are stale). DIR/nodes: one line per node, "I NODENAME
# PIDFILE AMQP_PORT", for tests that kill, stop or SIGSTOP one node.
# The nodes tick every 10 s (net_ticktime) and heal partitions by themselves
# (cluster_partition_handling = autoheal: the side with fewer clients
# restarts). pause_minority would not do: a node paused (SIGSTOP) past the
# tick time is back before it notices it was alone, and the partition stays.
# SC2034: DIR is read by the node script's functions (load_env).
# shellcheck disable=SC1090,SC1091,SC2034  # sources the node script and per-node env files
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NODE_SCRIPT=$HERE/rabbitmq_node.sh
source "$NODE_SCRIPT"  # pick_port, ensure_hostname_resolves, load_env, node_pid, RMQ_BIN
NODES=(1 2 3)

die() { echo "rabbitmq_cluster: $*" >&2; exit 1; }

# rabbitmqctl on node I, with that node's environment; output shown.
ctl_on() {
  local i=$1 t=$2
  shift 2
  (DIR=$CLUSTER/node$i; load_env; timeout "$t" "$RMQ_BIN/rabbitmqctl" -q -n "$RABBITMQ_NODE" "$@")
}

node_name() { (source "$CLUSTER/node$1/broker.env"; echo "$RABBITMQ_NODE"); }

# Runs the node script for all nodes at once (a restarted cluster's nodes
# wait for each other, so one at a time could stall); fails if any fails.
all_nodes() {
  local verb=$1 pids=() i rc=0
  for i in "${NODES[@]}"; do
    (
      if [[ -f $CLUSTER/cluster.env ]]; then
        source "$CLUSTER/cluster.env"
        export NODE_COOKIE
        AMQP_PORT=$(eval "echo \$AMQP_PORT_$i") DIST_PORT=$(eval "echo \$DIST_PORT_$i") \
          NODE_EXTRA_CONF=$'net_ticktime = 10\ncluster_partition_handling = autoheal' \
          exec bash "$NODE_SCRIPT" "$verb" "$CLUSTER/node$i"
      fi
      exec bash "$NODE_SCRIPT" "$verb" "$CLUSTER/node$i"
    ) >"$CLUSTER/node$i.$verb.log" 2>&1 &
    pids+=($!)
  done
  for i in "${NODES[@]}"; do
    if ! wait "${pids[$((i - 1))]}"; then
      rc=1
      echo "rabbitmq_cluster: node $i failed to $verb:" >&2
      tail -n 20 "$CLUSTER/node$i.$verb.log" >&2
    fi
  done
  return $rc
}

# Every node answers, sees all 3 running, and knows of no partition.
cmd_wait() {
  local deadline=$((SECONDS + ${1:-180})) i out ok
  while true; do
    ok=1
    for i in "${NODES[@]}"; do
      out=$(ctl_on "$i" 10 eval \
        '{length(rabbit_nodes:all_running()), rabbit_node_monitor:partitions()}.' 2>/dev/null) || out=
      [[ $out == "{3,[]}" ]] || { ok=0; break; }
    done
    ((ok)) && return 0
    ((SECONDS < deadline)) || die "cluster in $CLUSTER not whole after ${1:-180} s (node $i: ${out:-no answer})"
    sleep 1
  done
}

write_files() {
  local i hosts=() user pass
  user=$(source "$CLUSTER/node1/broker.env"; echo "$RABBITMQ_USER")
  pass=$(source "$CLUSTER/node1/broker.env"; echo "$RABBITMQ_PASSWORD")
  : >"$CLUSTER/nodes"
  for i in "${NODES[@]}"; do
    (
      source "$CLUSTER/node$i/broker.env"
      echo "$i $RABBITMQ_NODE $RABBITMQ_PIDFILE $AMQP_PORT" >>"$CLUSTER/nodes"
    )
    hosts+=("127.0.0.1:$(source "$CLUSTER/node$i/broker.env"; echo "$AMQP_PORT")")
  done
  (IFS=,; umask 077; echo "amqp://$user:$pass@${hosts[*]}/%2F" >"$CLUSTER/amqp_urls")
  # The services' broker users are node 1's (nodes 2 and 3 took its data when
  # they joined): DIR/users/<user>.url lists every node, .password is node 1's.
  mkdir -p "$CLUSTER/users"
  local f
  for f in "$CLUSTER"/node1/users/*.password; do
    user=$(basename "$f" .password)
    install -m 600 "$f" "$CLUSTER/users/$user.password"
    (IFS=,; echo "amqp://$user@${hosts[*]}/%2F" >"$CLUSTER/users/$user.url")
  done
}

cmd_start() {
  ensure_hostname_resolves
  mkdir -p "$CLUSTER"
  if [[ ! -f $CLUSTER/cluster.env ]]; then
    local avoid="" i a d
    {
      echo "NODE_COOKIE=$(od -An -tx1 -N20 /dev/urandom | tr -d ' \n')"
      for i in "${NODES[@]}"; do
        a=$(pick_port 10000 "$avoid"); avoid+=" $a"
        d=$(pick_port 20000 "$avoid"); avoid+=" $d"
        echo "AMQP_PORT_$i=$a"
        echo "DIST_PORT_$i=$d"
      done
    } >"$CLUSTER/cluster.env.tmp"
    chmod 600 "$CLUSTER/cluster.env.tmp"
    mv "$CLUSTER/cluster.env.tmp" "$CLUSTER/cluster.env"
  fi
  all_nodes start || { (all_nodes stop) || true; die "cluster did not start; logs in $CLUSTER/node*/"; }
  local node1 i
  node1=$(node_name 1)
  for i in 2 3; do
    [[ -f $CLUSTER/node$i/joined ]] && continue
    # A fresh node drops its own data (and user) and takes node 1's.
    { ctl_on "$i" 60 stop_app && ctl_on "$i" 60 reset && ctl_on "$i" 60 join_cluster "$node1" &&
      ctl_on "$i" 120 start_app; } >>"$CLUSTER/node$i.join.log" 2>&1 ||
      { tail -n 20 "$CLUSTER/node$i.join.log" >&2; die "node $i could not join $node1"; }
    touch "$CLUSTER/node$i/joined"
  done
  # On RabbitMQ 4.x the metadata moves to Khepri (Raft), as deployment.md
  # recommends: with Mnesia, 4.0.5's autoheal left a node partitioned for
  # minutes after a pause or a cut (the network lab, e2e.cluster).
  if [[ ! -f $CLUSTER/khepri && $(ctl_on 1 30 version 2>/dev/null) == 4.* ]]; then
    ctl_on 1 300 enable_feature_flag --opt-in khepri_db >>"$CLUSTER/node1.join.log" 2>&1 ||
      { tail -n 20 "$CLUSTER/node1.join.log" >&2; die "could not enable khepri_db"; }
    touch "$CLUSTER/khepri"
  fi
  cmd_wait 180
  write_files
  echo "rabbitmq_cluster: 3 nodes running; URL list in $CLUSTER/amqp_urls"
}

cmd_stop() {
  [[ -f $CLUSTER/cluster.env ]] || return 0
  local i pid
  # A node left SIGSTOPped by a failed test would not answer stop.
  for i in "${NODES[@]}"; do
    [[ -f $CLUSTER/node$i/broker.env ]] || continue
    if pid=$(DIR=$CLUSTER/node$i; load_env; node_pid); then kill -CONT "$pid" 2>/dev/null || true; fi
  done
  all_nodes stop
}

cmd_start_node() {
  [[ $1 =~ ^[123]$ ]] || die "node must be 1, 2 or 3, not '$1'"
  [[ -f $CLUSTER/node$1/broker.env ]] || die "no node $1 in $CLUSTER"
  bash "$NODE_SCRIPT" start "$CLUSTER/node$1" >"$CLUSTER/node$1.start.log" 2>&1 ||
    { tail -n 20 "$CLUSTER/node$1.start.log" >&2; die "node $1 did not start"; }
  cmd_wait 180
}

# "NAME TYPE LEADER" per queue, from the first node that answers.
cmd_queues() {
  local i
  for i in "${NODES[@]}"; do
    ctl_on "$i" 10 list_queues --no-table-headers name type leader 2>/dev/null && return
  done
  die "no node of $CLUSTER answers"
}

# Reads the leader from the queue record, which each node holds locally: it
# answers while another node is down or paused (list_queues may not).
# Each node gets 5 s (rabbitmqctl's own start is most of it), times the
# tests' OUTBOX_TEST_TIME_SCALE: a sanitizer run loads the 2 cores enough
# that the CLI alone took over 5 s on every node.
cmd_leader() {
  [[ $1 =~ ^[A-Za-z0-9_.-]+$ ]] || die "bad queue name '$1'"
  local i j leader t=$((5 * ${OUTBOX_TEST_TIME_SCALE:-1}))
  # Asked node by node, for up to 30 s: on a busy machine every node's
  # rabbitmqctl may miss its 5 s once.
  local deadline=$((SECONDS + 30 * ${OUTBOX_TEST_TIME_SCALE:-1}))
  while :; do
    for i in "${NODES[@]}"; do
      leader=$(ctl_on "$i" "$t" eval "{ok, Q} = rabbit_amqqueue:lookup(rabbit_misc:r(<<\"/\">>, queue, <<\"$1\">>)),
        {_, Node} = amqqueue:get_pid(Q), Node." 2>/dev/null) || continue
      leader=${leader//\'/}
      for j in "${NODES[@]}"; do
        [[ $(node_name "$j") == "$leader" ]] && { echo "$j"; return; }
      done
      die "queue $1 is led by '$leader', not one of this cluster's nodes"
    done
    ((SECONDS < deadline)) || break
    sleep 1
  done
  die "no node of $CLUSTER answers, or no quorum queue $1, for 30 s"
}

usage="usage: $0 start|stop|fresh|wait|queues DIR | start-node DIR I | leader DIR QUEUE"
[[ $# -ge 2 ]] || die "$usage"
[[ -x $RMQ_BIN/rabbitmq-server ]] || die "rabbitmq-server is not installed (scripts/install_deps.sh)"
[[ $1 == stop && ! -d $2 ]] && exit 0
mkdir -p "$2"
CLUSTER=$(cd "$2" && pwd)
case $1 in
  start) cmd_start ;;
  stop) cmd_stop ;;
  fresh) (cmd_stop) || true; rm -rf "$CLUSTER"; mkdir -p "$CLUSTER"; cmd_start ;;
  wait) cmd_wait 180 ;;
  queues) cmd_queues ;;
  start-node) [[ $# == 3 ]] || die "$usage"; cmd_start_node "$3" ;;
  leader) [[ $# == 3 ]] || die "$usage"; cmd_leader "$3" ;;
  *) die "$usage" ;;
esac
