#!/usr/bin/env bash
# A private RabbitMQ node for tests and demos, without a service manager
# (a node of its own, not the system service). Everything lives under DIR; the node listens on 127.0.0.1.
#
#   rabbitmq_node.sh start DIR   start (or restart) the node; writes DIR/broker.env
#                                and DIR/amqp_url (the admin user). A DIR that already
#                                has broker.env keeps its ports, node name, users and
#                                passwords.
#   rabbitmq_node.sh stop DIR    stop it (no-op if it is not running)
#   rabbitmq_node.sh fresh DIR   stop a stale node left in DIR, wipe DIR, start
#
# AMQP_PORT / DIST_PORT pick the ports of a new node (default: free random ones).
# NODE_COOKIE sets a new node's Erlang cookie (default: random), and
# NODE_EXTRA_CONF holds lines added to its rabbitmq.conf: both for nodes that
# form a cluster
# (scripts/rabbitmq_cluster.sh sources this file). NODE_ERL_ARGS holds Erlang VM
# flags for a new node's beam (after RabbitMQ's own, so they win: e.g.
# `+S 1:1`), kept in DIR/broker.env for its restarts.
# AMQP_TLS_DIR=D gives a new node a TLS listener as well (the plaintext one
# stays): D holds ca.pem, server.pem and server.key (scripts/dev_certs.sh D).
# Clients present a certificate only if they want to; one is verified against
# D/ca.pem. The amqps URL goes to DIR/amqps_url and broker.env (AMQPS_URL,
# AMQPS_PORT, AMQP_TLS_CA_FILE); AMQPS_PORT picks its port.
#
# A new node also gets one broker user per service with the least permissions
# it needs (docs/security.md, broker users): outbox-payment, outbox-accounting,
# outbox-recovery. For each, DIR/users/<user>.url is its AMQP URL without a
# password and DIR/users/<user>.password (mode 0600) the password, for
# AMQP_URL and AMQP_PASSWORD_FILE. The permissions cover queue names matching
# OUTBOX_PAY_QUEUES / OUTBOX_ACC_QUEUES (regexes; the defaults match PAY_QUEUE
# and ACC_QUEUE, the tests' PAY_<n> and ACC_<n>, dotted prefixes such as
# bench.1.PAY, and payment shards' reply queues such as ACC_QUEUE.s0).
set -euo pipefail

die() { echo "rabbitmq_node: $*" >&2; exit 1; }

# shellcheck source=scripts/lib/broker_users.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/broker_users.sh"
# shellcheck source=scripts/lib/rabbitmq_conf.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/rabbitmq_conf.sh"  # RMQ_BIN, deprecated_features_conf
read -r -a SERVICE_USERS <<<"$BROKER_USERS"

# Ports in use in any state, so we also avoid ones in TIME_WAIT.
used_ports() {
  local _ addr
  cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | while read -r _ addr _; do
    if [[ $addr == *:* ]]; then echo $((16#${addr##*:})); fi
  done
}

# A random port in [lo, lo+span) not in use and not in $2 (a list to avoid).
pick_port() {
  local lo=$1 avoid=$2 used p _
  used=" $(used_ports | tr '\n' ' ') $avoid "
  for _ in $(seq 200); do
    p=$((lo + RANDOM % 10000))
    [[ $used == *" $p "* ]] || { echo "$p"; return; }
  done
  die "no free port near $lo"
}

# The Erlang CLI names itself after the hostname, so it must resolve.
ensure_hostname_resolves() {
  local h
  h=$(hostname)
  getent hosts localhost >/dev/null || die "localhost does not resolve"
  if ! getent hosts "$h" >/dev/null; then
    [[ $(id -u) == 0 ]] || die "hostname $h does not resolve; add it to /etc/hosts"
    echo "127.0.0.1 $h" >>/etc/hosts
  fi
}

# Exports the environment the server and every CLI call must share.
node_env() {
  export HOME=$RABBITMQ_HOME_DIR
  export RABBITMQ_NODENAME=$RABBITMQ_NODE
  export RABBITMQ_NODE_IP_ADDRESS=127.0.0.1
  export RABBITMQ_NODE_PORT=$AMQP_PORT
  export RABBITMQ_DIST_PORT=$DIST_PORT
  export RABBITMQ_CTL_DIST_PORT_MIN=$((DIST_PORT + 10000))
  export RABBITMQ_CTL_DIST_PORT_MAX=$((DIST_PORT + 10010))
  export RABBITMQ_MNESIA_BASE=$DIR/mnesia
  export RABBITMQ_LOG_BASE=$DIR/log
  export RABBITMQ_CONFIG_FILE=$DIR/rabbitmq.conf
  export RABBITMQ_ADVANCED_CONFIG_FILE=$DIR/advanced.config
  export RABBITMQ_ENABLED_PLUGINS_FILE=$DIR/enabled_plugins
  export RABBITMQ_CONF_ENV_FILE=$DIR/rabbitmq-env.conf
  export RABBITMQ_PID_FILE=$RABBITMQ_PIDFILE
  export ERL_EPMD_ADDRESS=127.0.0.1  # only matters if this node starts epmd
  export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}${NODE_ERL_ARGS:+ $NODE_ERL_ARGS}"
  export RABBITMQ_CTL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
}

# rabbitmqctl can hang when the node does not answer: always bound it.
ctl() { timeout "$1" "$RMQ_BIN/rabbitmqctl" -q -n "$RABBITMQ_NODE" "${@:2}" >/dev/null 2>&1; }

# The service users, once, on a new node (add_user reads the password from
# stdin, so it never shows in ps). The command line is exactly `add_user USER`,
# the node named by RABBITMQ_NODENAME (node_env): the rabbitmqctl wrapper of
# late 3.12 releases and of 4.0 (3.10's reads stdin always) starts the CLI
# with `-noinput` unless the line prompts, which it judges by the number of
# words, so `-q -n NODE add_user USER` would wait for a password it cannot read.
create_service_users() {
  local user perms out
  for user in "${SERVICE_USERS[@]}"; do
    out=$(timeout 60 "$RMQ_BIN/rabbitmqctl" add_user "$user" <"$DIR/users/$user.password" 2>&1) ||
      die "cannot add broker user $user: $(tr '\n' ' ' <<<"$out")"
    mapfile -t perms < <(broker_permissions "$user")
    ctl 60 set_permissions -p / "$user" "${perms[@]}" || die "cannot set permissions of $user"
  done
  : >"$DIR/users/.created"
}

start_failed() {
  local pid
  if pid=$(node_pid); then kill -TERM "$pid" 2>/dev/null || true; fi
  kill -TERM "$1" 2>/dev/null || true
  tail -n 30 "$DIR/server.out" >&2 || true
  die "node $RABBITMQ_NODE did not start; logs in $DIR/log and $DIR/server.out"
}

# The node's pid if its process is alive and really is this node's beam
# (its command line names our private HOME), so a reused pid is never killed.
node_pid() {
  local pid
  pid=$(cat "$RABBITMQ_PIDFILE" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "-home $RABBITMQ_HOME_DIR " || return 1
  echo "$pid"
}

load_env() {
  # shellcheck disable=SC1091
  source "$DIR/broker.env"
  node_env
}

cmd_start() {
  ensure_hostname_resolves
  mkdir -p "$DIR"
  if [[ -f $DIR/broker.env ]]; then
    load_env
    if [[ -n ${AMQP_TLS_DIR:-} && -z ${AMQPS_PORT:-} ]]; then
      die "$DIR holds a node without TLS; AMQP_TLS_DIR applies to new nodes only (use fresh)"
    fi
    if node_pid >/dev/null; then echo "rabbitmq_node: $RABBITMQ_NODE already running"; return; fi
    [[ -d $DIR/users ]] || die "$DIR has no users/ (made by an older rabbitmq_node.sh): use 'fresh'"
  else
    AMQP_PORT=${AMQP_PORT:-$(pick_port 10000 "")}
    DIST_PORT=${DIST_PORT:-$(pick_port 20000 "$AMQP_PORT")}
    RABBITMQ_NODE=outbox$AMQP_PORT@localhost
    RABBITMQ_PIDFILE=$DIR/rabbitmq.pid
    RABBITMQ_HOME_DIR=$DIR/home
    RABBITMQ_USER=outbox
    RABBITMQ_PASSWORD=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
    AMQP_URL=amqp://$RABBITMQ_USER:$RABBITMQ_PASSWORD@127.0.0.1:$AMQP_PORT/%2F
    AMQP_TLS_DIR=${AMQP_TLS_DIR:-}
    AMQPS_PORT=${AMQPS_PORT:-}
    AMQPS_URL=
    if [[ -n $AMQP_TLS_DIR ]]; then
      AMQP_TLS_DIR=$(cd "$AMQP_TLS_DIR" 2>/dev/null && pwd) || die "AMQP_TLS_DIR: no directory $AMQP_TLS_DIR"
      for f in ca.pem server.pem server.key; do
        [[ -r $AMQP_TLS_DIR/$f ]] || die "AMQP_TLS_DIR: cannot read $AMQP_TLS_DIR/$f (make it with scripts/dev_certs.sh)"
      done
      AMQPS_PORT=${AMQPS_PORT:-$(pick_port 10000 "$AMQP_PORT $DIST_PORT")}
      AMQPS_URL=amqps://$RABBITMQ_USER:$RABBITMQ_PASSWORD@127.0.0.1:$AMQPS_PORT/%2F
    fi
    OUTBOX_PAY_QUEUES=${OUTBOX_PAY_QUEUES:-'([A-Za-z0-9_-]+\.)*PAY[A-Za-z0-9_-]*'}
    OUTBOX_ACC_QUEUES=${OUTBOX_ACC_QUEUES:-'([A-Za-z0-9_-]+\.)*ACC[A-Za-z0-9_-]*(\.s[0-9]+)?'}
    (umask 077; cat >"$DIR/broker.env" <<EOF
AMQP_URL=$AMQP_URL
RABBITMQ_NODE=$RABBITMQ_NODE
RABBITMQ_PIDFILE=$RABBITMQ_PIDFILE
RABBITMQ_HOME_DIR=$RABBITMQ_HOME_DIR
AMQP_PORT=$AMQP_PORT
DIST_PORT=$DIST_PORT
RABBITMQ_USER=$RABBITMQ_USER
RABBITMQ_PASSWORD=$RABBITMQ_PASSWORD
AMQPS_URL=$AMQPS_URL
AMQPS_PORT=$AMQPS_PORT
AMQP_TLS_CA_FILE=${AMQP_TLS_DIR:+$AMQP_TLS_DIR/ca.pem}
OUTBOX_PAY_QUEUES='$OUTBOX_PAY_QUEUES'
OUTBOX_ACC_QUEUES='$OUTBOX_ACC_QUEUES'
NODE_ERL_ARGS='${NODE_ERL_ARGS:-}'
EOF
    echo "$AMQP_URL" >"$DIR/amqp_url"
    if [[ -n $AMQPS_URL ]]; then echo "$AMQPS_URL" >"$DIR/amqps_url"; fi
    mkdir -p "$DIR/users"
    for user in "${SERVICE_USERS[@]}"; do
      od -An -tx1 -N16 /dev/urandom | tr -d ' \n' >"$DIR/users/$user.password"
      echo "amqp://$user@127.0.0.1:$AMQP_PORT/%2F" >"$DIR/users/$user.url"
    done)
    mkdir -p "$RABBITMQ_HOME_DIR" "$DIR/mnesia" "$DIR/log"
    if [[ -n ${NODE_COOKIE:-} ]]; then printf %s "$NODE_COOKIE"; else od -An -tx1 -N20 /dev/urandom | tr -d ' \n'; fi \
      >"$RABBITMQ_HOME_DIR/.erlang.cookie"
    chmod 400 "$RABBITMQ_HOME_DIR/.erlang.cookie"
    # The consistent-hash exchange routes payment events to accounting shards.
    echo '[rabbitmq_consistent_hash_exchange].' >"$DIR/enabled_plugins"
    : >"$DIR/rabbitmq-env.conf"
    # The default user is created on first boot only (fresh mnesia), so no guest.
    (umask 077; cat >"$DIR/rabbitmq.conf" <<EOF
listeners.tcp.1 = 127.0.0.1:$AMQP_PORT
default_vhost = /
default_user = $RABBITMQ_USER
default_pass = $RABBITMQ_PASSWORD
default_user_tags.administrator = true
default_permissions.configure = .*
default_permissions.read = .*
default_permissions.write = .*
log.console = false
log.file.level = info
$(deprecated_features_conf)
EOF
    )
    if [[ -n ${NODE_EXTRA_CONF:-} ]]; then printf '%s\n' "$NODE_EXTRA_CONF" >>"$DIR/rabbitmq.conf"; fi
    # TLS 1.2+ only. 127.0.0.2 is loopback too but not in the dev certificate:
    # tests dial it to see hostname verification refuse the broker.
    if [[ -n $AMQPS_URL ]]; then cat >>"$DIR/rabbitmq.conf" <<EOF
listeners.ssl.1 = 127.0.0.1:$AMQPS_PORT
listeners.ssl.2 = 127.0.0.2:$AMQPS_PORT
ssl_options.cacertfile = $AMQP_TLS_DIR/ca.pem
ssl_options.certfile = $AMQP_TLS_DIR/server.pem
ssl_options.keyfile = $AMQP_TLS_DIR/server.key
ssl_options.verify = verify_peer
ssl_options.fail_if_no_peer_cert = false
ssl_options.versions.1 = tlsv1.3
ssl_options.versions.2 = tlsv1.2
EOF
    fi
    node_env
  fi
  rm -f "$RABBITMQ_PIDFILE"
  setsid "$RMQ_BIN/rabbitmq-server" >>"$DIR/server.out" 2>&1 </dev/null &
  local server=$! deadline=$((SECONDS + 120))
  trap 'start_failed "$server"' INT TERM  # interrupted: don't leave a half-started node
  # rabbitmqctl wait would block until its timeout if the server died before
  # writing its pid file (e.g. port taken), so watch for that ourselves first.
  until [[ -s $RABBITMQ_PIDFILE ]]; do
    if ! kill -0 "$server" 2>/dev/null || ((SECONDS > deadline)); then start_failed "$server"; fi
    sleep 0.2
  done
  if ! { ctl 120 wait "$RABBITMQ_PIDFILE" && ctl 120 await_startup; }; then start_failed "$server"; fi
  [[ -f $DIR/users/.created ]] || create_service_users
  echo "rabbitmq_node: $RABBITMQ_NODE ready on 127.0.0.1:$AMQP_PORT${AMQPS_PORT:+, TLS on 127.0.0.1:$AMQPS_PORT} (env: $DIR/broker.env)"
}

cmd_stop() {
  [[ -f $DIR/broker.env ]] || return 0
  load_env
  local pid transient=""
  pid=$(node_pid) || { rm -f "$RABBITMQ_PIDFILE"; return 0; }
  if [[ ${OUTBOX_CHECK_QUEUES:-} == 1 ]]; then
    # Queues that are neither durable nor exclusive (a deprecated feature of
    # RabbitMQ 4.0: scripts/lib/rabbitmq_conf.sh).
    transient=$(timeout 60 "$RMQ_BIN/rabbitmqctl" -q -n "$RABBITMQ_NODE" list_queues --no-table-headers \
      name durable exclusive 2>/dev/null | awk '$2 == "false" && $3 == "false" { print $1 }') || true
  fi
  # stop returns once the process is gone; if it fails, fall back to signals.
  if ! ctl 30 stop "$RABBITMQ_PIDFILE"; then
    echo "rabbitmq_node: rabbitmqctl stop failed; killing pid $pid" >&2
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$RABBITMQ_PIDFILE"
  echo "rabbitmq_node: $RABBITMQ_NODE stopped"
  if [[ -n $transient ]]; then
    echo "rabbitmq_node: transient non-exclusive queues were declared (deprecated in RabbitMQ 4.0): $(echo $transient)" >&2
    return 1
  fi
}

# Sourced (by rabbitmq_cluster.sh): the functions only.
[[ ${BASH_SOURCE[0]} == "$0" ]] || return 0
[[ $# == 2 ]] || die "usage: $0 start|stop|fresh DIR"
[[ -x $RMQ_BIN/rabbitmq-server ]] || die "rabbitmq-server is not installed (scripts/install_deps.sh)"
[[ $1 == stop && ! -d $2 ]] && exit 0
mkdir -p "$2"
DIR=$(cd "$2" && pwd)
case $1 in
  start) cmd_start ;;
  stop) cmd_stop ;;
  fresh) (cmd_stop); rm -rf "$DIR"; mkdir -p "$DIR"; cmd_start ;;
  *) die "usage: $0 start|stop|fresh DIR" ;;
esac
