# shellcheck shell=bash
# The plumbing of scripts/netlab.sh (sourced, not run): simulated hosts as
# Linux network namespaces on a bridge of their own, the RabbitMQ cluster and
# the services inside them, nft faults, and the clean-up.
#
# Every namespace is named "$LAB_PREFIX-<host>" with LAB_PREFIX=oblab-<pid of
# the harness>, so a namespace whose owner is dead is a stale one. The bridge
# lives in "$LAB_PREFIX-switch"; every host has one veth, eth0, whose peer is
# a port of that bridge. Nothing is created in the root namespace: no
# interface, route or firewall rule, and no default route anywhere.
# `ip netns exec` mounts /etc/netns/<namespace>/hosts over /etc/hosts for
# what it runs: that is how the brokers' names (b1, b2, b3) resolve.
#
# The sourcing script (scripts/lib/netlab_ns.sh, the commands lab.py calls;
# scripts/netlab.sh for selftest and clean) sets WORK (its temp dir), BIN
# (the binaries) and SCRIPT (the prefix of its messages), and runs with
# `set -euo pipefail`.

# shellcheck source=SCRIPTDIR/broker_users.sh
source "$(dirname "${BASH_SOURCE[0]}")/broker_users.sh"  # BROKER_USERS, broker_permissions
# shellcheck source=SCRIPTDIR/rabbitmq_conf.sh
source "$(dirname "${BASH_SOURCE[0]}")/rabbitmq_conf.sh"  # RMQ_BIN, deprecated_features_conf

LAB_NET=10.213.0                     # the private /24 used only inside the namespaces
LAB_PREFIX=${LAB_PREFIX:-oblab-$$}   # owner pid in every namespace name
BROKERS=(b1 b2 b3)
LAB_HOSTS=(b1 b2 b3 pay acc rec1 rec2 load)
declare -A HOST_OCTET=([b1]=11 [b2]=12 [b3]=13 [pay]=21 [rec1]=31 [rec2]=32 [acc]=41 [load]=51
  [pg1]=61 [pg2]=62)
METRICS_PORT=9100                    # every service's /metrics, on its own address
# STORE=postgres: the services' databases on PostgreSQL, a primary in pg1 and
# its synchronous standby in pg2 (scripts/postgres_node.sh); sqlite: files in WORK.
STORE=${STORE:-sqlite}
PG_NODE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/postgres_node.sh
PG_LAB_PORT=5432                     # each server on its own host's address
PG_OPTIONS=${PG_OPTIONS:-}           # appended to the services' URIs (e.g. &tcp_user_timeout=5000)
PG_WAL_TIMEOUT=${PG_WAL_TIMEOUT:-}   # seconds: the replication link's timeouts (empty: PostgreSQL's)
if [[ $STORE == postgres ]]; then
  LAB_HOSTS+=(pg1 pg2)
elif [[ $STORE != sqlite ]]; then
  echo "netlab: STORE must be sqlite or postgres, not '$STORE'" >&2
  exit 1
fi
FAKETIME_LIB=/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1

# die MESSAGE: prints it and exits 1 (the EXIT trap cleans up).
die() {
  echo "$SCRIPT: $*" >&2
  exit 1
}

# log MESSAGE: a timestamped progress line on stderr.
log() {
  echo "$SCRIPT: $(date -u +%H:%M:%S) $*" >&2
}

# now_ms: Unix time in milliseconds.
now_ms() {
  date +%s%3N
}

# ns_of HOST: the namespace name of a simulated host.
ns_of() {
  echo "$LAB_PREFIX-$1"
}

# ip_of HOST: the host's address.
ip_of() {
  echo "$LAB_NET.${HOST_OCTET[$1]}"
}

# in_host HOST CMD...: runs CMD in the host's namespace (and its /etc/hosts).
# Not for `&`: a backgrounded function is a subshell, so $! would not be
# CMD's pid; background `ip netns exec "$(ns_of HOST)" CMD` itself.
in_host() {
  local host=$1
  shift
  ip netns exec "$(ns_of "$host")" "$@"
}

# ---------------------------------------------------------------- namespaces

# require_namespaces: exits 1 unless we are root and a namespace can be made.
require_namespaces() {
  local err
  [[ $(id -u) == 0 ]] || die "needs root (network namespaces, nft); run as root"
  command -v ip >/dev/null || die "ip (iproute2) is missing: bash scripts/install_deps.sh"
  command -v nft >/dev/null || die "nft (nftables) is missing: bash scripts/install_deps.sh"
  if ! err=$(ip netns add "$LAB_PREFIX-switch" 2>&1); then
    die "cannot create network namespaces: $err"
  fi
}

# make_switch: the bridge br0 in the harness's own namespace (made by require_namespaces).
make_switch() {
  local sw
  sw=$(ns_of switch)
  ip -n "$sw" link set lo up
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 up
}

# write_hosts_file HOST: /etc/netns/<ns>/hosts, read by whatever `ip netns exec` runs there.
write_hosts_file() {
  local dir b
  dir=/etc/netns/$(ns_of "$1")
  mkdir -p "$dir"
  {
    echo "127.0.0.1 localhost"
    echo "127.0.0.1 $(hostname)"
    for b in "${BROKERS[@]}"; do echo "$(ip_of "$b") $b"; done
  } >"$dir/hosts"
}

# add_host HOST: its namespace, loopback, and eth0 (veth) plugged into the bridge.
# The veth pair is made inside the switch namespace, its host end moved
# straight into the host's namespace: neither end ever exists in the root one.
add_host() {
  local host=$1 ns sw port
  ns=$(ns_of "$host")
  sw=$(ns_of switch)
  port=v-$host
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip -n "$sw" link add "$port" type veth peer name eth0 netns "$ns"
  ip -n "$sw" link set "$port" master br0
  ip -n "$sw" link set "$port" up
  ip -n "$ns" addr add "$(ip_of "$host")/24" dev eth0
  ip -n "$ns" link set eth0 up
  write_hosts_file "$host"
}

# make_network: the switch and every host.
make_network() {
  local h
  make_switch
  for h in "${LAB_HOSTS[@]}"; do add_host "$h"; done
}

# ping_all: every host reaches every other one (one ping each); returns 1 naming the first pair that fails.
ping_all() {
  local a b
  for a in "${LAB_HOSTS[@]}"; do
    for b in "${LAB_HOSTS[@]}"; do
      [[ $a == "$b" ]] && continue
      if ! in_host "$a" ping -c 1 -W 1 -q "$(ip_of "$b")" >/dev/null 2>&1; then
        echo "$SCRIPT: $a cannot reach $b" >&2
        return 1
      fi
    done
  done
}

# ns_inode NAMESPACE: the inode of the namespace (as /proc/PID/ns/net shows it).
ns_inode() {
  stat -L -c %i "/run/netns/$1" 2>/dev/null
}

# pids_in_ns NAMESPACE: every process whose network namespace it is.
pids_in_ns() {
  local inode link p
  inode=$(ns_inode "$1") || return 0
  for p in /proc/[0-9]*; do
    link=$(readlink "$p/ns/net" 2>/dev/null) || continue
    [[ $link == "net:[$inode]" ]] && echo "${p#/proc/}"
  done
  return 0
}

# kill_ns_processes NAMESPACE: SIGCONT and SIGTERM to each process in it (so a
# SIGSTOPped one can exit), up to 10 s to go, then SIGKILL for the rest.
# This is how the brokers' beam and epmd processes go too.
kill_ns_processes() {
  local ns=$1 pids p _
  mapfile -t pids < <(pids_in_ns "$ns")
  ((${#pids[@]})) || return 0
  for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for _ in $(seq 100); do
    mapfile -t pids < <(pids_in_ns "$ns")
    ((${#pids[@]})) || return 0
    sleep 0.1
  done
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  sleep 0.2
}

# remove_lab PREFIX: stops every process in the namespaces named PREFIX-*,
# deletes them (their veths and the bridge go with them) and their /etc/netns dirs.
remove_lab() {
  local prefix=$1 ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
    [[ $ns == "$prefix"-* ]] || continue
    kill_ns_processes "$ns"
    ip netns del "$ns" 2>/dev/null || echo "$SCRIPT: could not delete namespace $ns" >&2
  done
  for ns in /etc/netns/"$prefix"-*; do
    [[ -d $ns ]] && rm -rf "$ns"
  done
  return 0
}

# owner_alive PID: PID is a running netlab.sh or the lab.py it became (a
# reused pid does not count).
owner_alive() {
  tr "\\0" " " 2>/dev/null <"/proc/$1/cmdline" | grep -qE "netlab(\\.sh|/lab\\.py)"
}

# clean_stale: removes every oblab-<pid>-* setup whose owner is not running.
clean_stale() {
  local ns pid owners=() d
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
    [[ $ns =~ ^oblab-([0-9]+)- ]] && owners+=("${BASH_REMATCH[1]}")
  done
  for d in /etc/netns/oblab-*; do
    [[ -d $d && $(basename "$d") =~ ^oblab-([0-9]+)- ]] && owners+=("${BASH_REMATCH[1]}")
  done
  ((${#owners[@]})) || return 0
  for pid in $(printf '%s\n' "${owners[@]}" | sort -u); do
    [[ $pid == "$$" || oblab-$pid == "$LAB_PREFIX" ]] && continue
    if owner_alive "$pid"; then
      log "oblab-$pid-* belongs to a running netlab.sh (pid $pid): left alone"
      continue
    fi
    log "removing stale setup oblab-$pid-*"
    remove_lab "oblab-$pid"
  done
}

# ---------------------------------------------------------------- faults (nft)

# drop_between HOST WAYS PEER...: in HOST's namespace (a table of its own;
# Jepsen's iptables drops), drops the packets HOST receives from each PEER,
# and with WAYS=both also those it sends to them.
drop_between() {
  local host=$1 ways=$2 peers=() p output=''
  shift 2
  for p in "$@"; do peers+=("$(ip_of "$p")"); done
  if [[ $ways == both ]]; then
    output='chain output { type filter hook output priority 0; policy accept; ip daddr @peers drop; }'
  fi
  in_host "$host" nft -f - <<EOF
table inet oblab_fault {
  set peers { type ipv4_addr; elements = { $(IFS=,; echo "${peers[*]}") } }
  chain input { type filter hook input priority 0; policy accept; ip saddr @peers drop; }
  $output
}
EOF
}

# cut_host HOST PEER...: drops every packet between HOST and each PEER, both ways.
cut_host() { drop_between "$1" both "${@:2}"; }

# deafen_host HOST PEER...: HOST still sends to each PEER but receives nothing from it.
deafen_host() { drop_between "$1" in "${@:2}"; }

# heal_host HOST: removes HOST's fault table (no-op if it has none).
heal_host() {
  in_host "$1" nft delete table inet oblab_fault 2>/dev/null || true
}

# heal_all: removes every host's fault table.
heal_all() {
  local h
  for h in "${LAB_HOSTS[@]}"; do heal_host "$h"; done
}

# netem_present: whether this kernel has netem (tried on the switch's loopback only).
netem_present() {
  local sw
  sw=$(ns_of switch)
  if ip netns exec "$sw" tc qdisc add dev lo root netem delay 1ms >/dev/null 2>&1; then
    ip netns exec "$sw" tc qdisc del dev lo root >/dev/null 2>&1 || true
    return 0
  fi
  return 1
}

# ---------------------------------------------------------------- RabbitMQ cluster

# broker_env B: the environment (NAME=value lines) that node B's server and every rabbitmqctl call share.
broker_env() {
  local d=$WORK/$1
  echo "HOME=$d/home"
  echo "RABBITMQ_NODENAME=rabbit@$1"
  echo "RABBITMQ_NODE_PORT=5672"
  echo "RABBITMQ_DIST_PORT=25672"
  echo "RABBITMQ_MNESIA_BASE=$d/mnesia"
  echo "RABBITMQ_LOG_BASE=$d/log"
  echo "RABBITMQ_CONFIG_FILE=$d/rabbitmq.conf"
  echo "RABBITMQ_ADVANCED_CONFIG_FILE=$d/advanced.config"
  echo "RABBITMQ_ENABLED_PLUGINS_FILE=$d/enabled_plugins"
  echo "RABBITMQ_CONF_ENV_FILE=$d/rabbitmq-env.conf"
  echo "RABBITMQ_PID_FILE=$d/rabbitmq.pid"
}

# broker_version: the RabbitMQ release the nodes run (e.g. 3.10.8, 4.0.5),
# read from the server's directory under RMQ_LIB; no node need be running.
broker_version() {
  local d
  for d in "$RMQ_LIB"/lib/rabbitmq_server-*; do
    [[ -d $d ]] && { echo "${d##*/rabbitmq_server-}"; return 0; }
  done
  echo unknown
}

# rmq B SECONDS ARGS...: rabbitmqctl against node B, run in B's namespace, bounded in time.
rmq() {
  local b=$1 t=$2 env
  shift 2
  mapfile -t env < <(broker_env "$b")
  in_host "$b" env "${env[@]}" timeout "$t" "$RMQ_BIN/rabbitmqctl" -q -n "rabbit@$b" "$@"
}

# add_broker_user B USER: adds USER on node B, the password read from stdin.
# The command line is exactly `add_user USER` (the node from broker_env's
# RABBITMQ_NODENAME): the rabbitmqctl wrapper of RabbitMQ 4.0 gives the CLI
# no stdin unless the line prompts, which it judges by the number of words.
add_broker_user() {
  local env
  mapfile -t env < <(broker_env "$1")
  in_host "$1" env "${env[@]}" timeout 60 "$RMQ_BIN/rabbitmqctl" add_user "$2"
}

# write_broker_config B COOKIE: node B's data dir, cookie and rabbitmq.conf
# (listens on its own address; ticks every 10 s; partitions handled as
# PARTITION_HANDLING says).
write_broker_config() {
  local b=$1 d=$WORK/$1
  mkdir -p "$d/home" "$d/mnesia" "$d/log"
  printf %s "$2" >"$d/home/.erlang.cookie"
  chmod 400 "$d/home/.erlang.cookie"
  echo '[].' >"$d/enabled_plugins"
  : >"$d/rabbitmq-env.conf"
  (
    umask 077
    cat >"$d/rabbitmq.conf" <<EOF
listeners.tcp.1 = $(ip_of "$b"):5672
default_vhost = /
default_user = outbox
default_pass = $(openssl rand -hex 16)
default_user_tags.administrator = true
log.console = false
log.file.level = info
net_ticktime = 10
cluster_partition_handling = $PARTITION_HANDLING
$(deprecated_features_conf cluster)
EOF
  )
}

# start_broker B: starts node B's server in its namespace and waits until it has booted.
start_broker() {
  local b=$1 d=$WORK/$1 env server deadline
  mapfile -t env < <(broker_env "$b")
  rm -f "$d/rabbitmq.pid"
  ip netns exec "$(ns_of "$b")" env "${env[@]}" setsid "$RMQ_BIN/rabbitmq-server" >>"$d/server.out" 2>&1 </dev/null &
  server=$!
  deadline=$((SECONDS + 180))
  until [[ -s $d/rabbitmq.pid ]]; do
    kill -0 "$server" 2>/dev/null || { tail -n 20 "$d/server.out" >&2; die "broker $b exited at start"; }
    ((SECONDS < deadline)) || die "broker $b wrote no pid file in 180 s"
    sleep 0.5
  done
  rmq "$b" 180 wait "$d/rabbitmq.pid" >/dev/null 2>&1 || die "broker $b did not start (logs in $d/log)"
  rmq "$b" 180 await_startup >/dev/null 2>&1 || die "broker $b did not finish booting"
}

# restart_broker B: stops node B's Erlang VM (rabbitmqctl stop, else SIGKILL
# to its pid after 60 s) and starts it again with its data; it rejoins the
# cluster by itself. Dies (in a subshell: returns 1) if it does not boot.
restart_broker() {
  local b=$1 d=$WORK/$1 pid deadline
  pid=$(cat "$d/rabbitmq.pid" 2>/dev/null) || pid=
  rmq "$b" 60 stop >/dev/null 2>&1 || { [[ -n $pid ]] && kill -KILL "$pid" 2>/dev/null; } || true
  deadline=$((SECONDS + 30))
  while [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; do
    ((SECONDS < deadline)) || die "broker $b (pid $pid) did not stop"
    sleep 0.5
  done
  start_broker "$b"
}

# join_broker B: node B drops its own data and joins rabbit@b1.
join_broker() {
  local b=$1
  {
    rmq "$b" 60 stop_app && rmq "$b" 60 reset && rmq "$b" 60 join_cluster rabbit@b1 &&
      rmq "$b" 120 start_app
  } >>"$WORK/$b/join.log" 2>&1 || die "broker $b could not join rabbit@b1 (see $WORK/$b/join.log)"
}

# node_view B: node B's view of the cluster, "{Running,[PartitionedFrom...]}",
# or nothing when it does not answer.
node_view() {
  rmq "$1" 15 eval '{length(rabbit_nodes:all_running()), rabbit_node_monitor:partitions()}.' 2>/dev/null || true
}

# cluster_whole B [SECONDS]: waits until node B sees 3 running nodes and no partition; returns 1 on timeout.
cluster_whole() {
  local b=$1 deadline=$((SECONDS + ${2:-180})) out
  while ((SECONDS < deadline)); do
    out=$(node_view "$b")
    [[ $out == "{3,[]}" ]] && return 0
    sleep 1
  done
  return 1
}

# create_broker_users: one user per service with the permissions of docs/security.md
# (scripts/lib/broker_users.sh), passwords in $WORK/users/<user>.password.
create_broker_users() {
  local user perms
  export OUTBOX_PAY_QUEUES='([A-Za-z0-9_-]+\.)*PAY[A-Za-z0-9_-]*'
  export OUTBOX_ACC_QUEUES='([A-Za-z0-9_-]+\.)*ACC[A-Za-z0-9_-]*(\.s[0-9]+)?'
  mkdir -p "$WORK/users"
  for user in $BROKER_USERS; do
    (umask 077; openssl rand -hex 16 | tr -d '\n' >"$WORK/users/$user.password")
    add_broker_user b1 "$user" <"$WORK/users/$user.password" >/dev/null 2>&1 || die "cannot add broker user $user"
    mapfile -t perms < <(broker_permissions "$user")
    rmq b1 60 set_permissions -p / "$user" "${perms[@]}" >/dev/null 2>&1 || die "cannot set permissions of $user"
  done
}

# start_cluster: three nodes in b1..b3, b2 and b3 joined to b1, whole, with the service users.
start_cluster() {
  local cookie b pids=() p
  cookie=$(openssl rand -hex 20)
  for b in "${BROKERS[@]}"; do write_broker_config "$b" "$cookie"; done
  for b in "${BROKERS[@]}"; do
    (start_broker "$b") &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || die "a broker did not start"; done
  join_broker b2
  join_broker b3
  cluster_whole b1 180 || die "the cluster did not become whole"
  [[ $METADATA == khepri ]] && enable_khepri
  create_broker_users
}

# enable_khepri: moves the formed cluster's metadata from Mnesia to Khepri
# (feature flag khepri_db, opt-in in RabbitMQ 4.0: it cannot be disabled),
# and checks that every node reports it enabled.
enable_khepri() {
  local b
  rmq b1 300 enable_feature_flag --opt-in khepri_db >>"$WORK/b1/join.log" 2>&1 ||
    die "could not enable khepri_db (see $WORK/b1/join.log)"
  for b in "${BROKERS[@]}"; do
    [[ $(rmq "$b" 30 eval 'rabbit_khepri:is_enabled().' 2>/dev/null) == true ]] ||
      die "khepri_db is not enabled on $b"
  done
  cluster_whole b1 60 || die "the cluster is not whole after enabling khepri_db"
}

# ---------------------------------------------------------------- PostgreSQL

# pg_bin: the PostgreSQL binaries the nodes run (scripts/postgres_node.sh's PG_BIN).
pg_bin() {
  sed -n 's/^PG_BIN=//p' "$WORK/pg1/node.env"
}

# pg_sql DB SQL: runs SQL as outbox on the primary over its socket in
# WORK/pg1 (a socket file reaches across namespaces: no cut hits it).
pg_sql() {
  PGPASSFILE=$WORK/pg1/pgpass "$(pg_bin)/psql" -X -q -v ON_ERROR_STOP=1 -At -h "$WORK/pg1" -p "$PG_LAB_PORT" \
    -U outbox -d "$1" -c "$2"
}

# start_pg: the primary in pg1, its synchronous standby (remote_apply) in
# pg2, each listening on its host's address and taking logins from the lab's
# /24; the database accounting beside outbox (payment's and recovery's).
start_pg() {
  local h
  chmod 711 "$WORK"  # the server's user (postgres) reaches WORK/pg1 and WORK/pg2
  for h in pg1 pg2; do
    local -a node_env=(PG_LISTEN="$(ip_of "$h")" PG_ALLOW="$LAB_NET.0/24" PG_PORT="$PG_LAB_PORT")
    if [[ $h == pg1 ]]; then
      in_host pg1 env "${node_env[@]}" bash "$PG_NODE" fresh "$WORK/pg1" >>"$WORK/pg.log" 2>&1 ||
        { tail -n 20 "$WORK/pg.log" >&2; die "the PostgreSQL primary did not start in pg1"; }
    else
      in_host pg2 env "${node_env[@]}" bash "$PG_NODE" standby "$WORK/pg1" "$WORK/pg2" >>"$WORK/pg.log" 2>&1 ||
        { tail -n 20 "$WORK/pg.log" >&2; die "the PostgreSQL standby did not start in pg2"; }
    fi
  done
  pg_sql postgres "CREATE DATABASE accounting" >/dev/null || die "cannot create the database accounting"
  [[ -z $PG_WAL_TIMEOUT ]] || pg_wal_timeout "$PG_WAL_TIMEOUT"
}

# pg_sql_at NODE SQL: runs SQL as outbox on the node in WORK/NODE (pg1, pg2), database postgres.
pg_sql_at() {
  PGPASSFILE=$WORK/pg1/pgpass "$(pg_bin)/psql" -X -q -v ON_ERROR_STOP=1 -At -h "$WORK/$1" -p "$PG_LAB_PORT" \
    -U outbox -d postgres -c "$2"
}

# pg_wal_timeout SECS: the replication link gives up after SECS without an
# answer, on both ends (wal_sender_timeout, wal_receiver_timeout, and the
# standby's connection to the primary: TCP keepalives, tcp_user_timeout,
# connect_timeout), so that after a cut the standby connects again within
# about SECS (plus wal_retrieve_retry_interval) instead of waiting out TCP's
# retransmission backoff. Waits until the standby is synchronous again.
pg_wal_timeout() {
  local secs=$1 conninfo state deadline
  [[ $secs =~ ^[1-9][0-9]*$ ]] || die "PG_WAL_TIMEOUT=$secs: whole seconds"
  conninfo=$(pg_sql_at pg2 "SHOW primary_conninfo") || die "cannot read the standby's primary_conninfo"
  conninfo+=" keepalives_idle=1 keepalives_interval=1 keepalives_count=$secs"
  conninfo+=" tcp_user_timeout=$((secs * 1000)) connect_timeout=$secs"
  { pg_sql_at pg1 "ALTER SYSTEM SET wal_sender_timeout = '${secs}s'" &&
    pg_sql_at pg1 "SELECT pg_reload_conf()" &&
    pg_sql_at pg2 "ALTER SYSTEM SET wal_receiver_timeout = '${secs}s'" &&
    pg_sql_at pg2 "ALTER SYSTEM SET primary_conninfo = '${conninfo//\'/\'\'}'" &&
    pg_sql_at pg2 "SELECT pg_reload_conf()"; } >/dev/null || die "cannot set the replication timeouts"
  deadline=$((SECONDS + 60))
  state=
  until [[ $state == sync ]]; do
    ((SECONDS < deadline)) || die "the standby is not synchronous again after PG_WAL_TIMEOUT (state: ${state:-none})"
    sleep 0.2
    [[ $(pg_sql_at pg2 "SELECT count(*) FROM pg_stat_wal_receiver
           WHERE status = 'streaming' AND conninfo LIKE '%tcp_user_timeout=$((secs * 1000))%'") == 1 ]] ||
      continue
    state=$(pg_sql_at pg1 "SELECT sync_state FROM pg_stat_replication") || state=
  done
}

# stop_pg: stops both servers (pg_ctl stop -m fast; no-op for one not running).
stop_pg() {
  local h
  for h in pg2 pg1; do
    [[ -d $WORK/$h ]] && bash "$PG_NODE" stop "$WORK/$h" >>"$WORK/pg.log" 2>&1
  done
  return 0
}

# pg_url DB: a service's URI for DB, both hosts, the read-write one wins;
# the password comes from PGPASSFILE (WORK/pg1/pgpass), never the URI.
pg_url() {
  echo "postgresql://outbox@$(ip_of pg1):$PG_LAB_PORT,$(ip_of pg2):$PG_LAB_PORT/$1?target_session_attrs=read-write$PG_OPTIONS"
}

# ---------------------------------------------------------------- services

# amqp_url USER FIRST: the service's URL listing every node, starting at broker FIRST (1-3).
amqp_url() {
  local user=$1 first=$2 i hosts=()
  for i in 0 1 2; do hosts+=("$(ip_of "b$(((first - 1 + i) % 3 + 1))"):5672"); done
  echo "amqp://$user@$(IFS=,; echo "${hosts[*]}")/%2F"
}

# common_env USER FIRST: the settings every service shares (broker user, quorum queues, message keys).
common_env() {
  echo "AMQP_URL=$(amqp_url "$1" "$2")"
  echo "AMQP_PASSWORD_FILE=$WORK/users/$1.password"
  echo "QUEUE_TYPE=quorum"
  echo "MESSAGE_KEYS_FILE=$WORK/message.keys"
}

# store_of payment|accounting: the service's store setting (a file in WORK, or a URI).
store_of() {
  if [[ $STORE == postgres ]]; then
    case $1 in payment) pg_url outbox ;; accounting) pg_url accounting ;; esac
  else
    echo "$WORK/$1.db"
  fi
}

# exec_service INSTANCE [SKEW]: becomes the service INSTANCE (pay, acc,
# rec1, rec2) in its namespace, with its settings, logging to
# $WORK/INSTANCE.log: `ip netns exec` and env exec, so the caller's child pid
# is the service's own. The broker URLs start at different nodes, so the
# connections spread. With SKEW (e.g. +30s or -30s) a recovery's wall clock
# is shifted by libfaketime (the monotonic clock is left alone, as on a host
# whose clock is simply set wrong).
exec_service() {
  local inst=$1 skew=${2:-} binary env=() faked=()
  case $inst in
    acc)
      binary=accounting_service
      mapfile -t env < <(common_env outbox-accounting 2)
      env+=(ACCOUNTING_DB="$(store_of accounting)" ACCOUNTING_LISTEN="$(ip_of acc):50052"
        ACCOUNTING_METRICS_LISTEN="$(ip_of acc):$METRICS_PORT")
      ;;
    pay)
      binary=payment_service
      mapfile -t env < <(common_env outbox-payment 1)
      env+=(PAYMENT_DB="$(store_of payment)" PAYMENT_LISTEN="$(ip_of pay):50051"
        PAYMENT_METRICS_LISTEN="$(ip_of pay):$METRICS_PORT")
      ;;
    rec1 | rec2)
      binary=recovery_service
      mapfile -t env < <(common_env outbox-recovery 3)
      if [[ -n $skew ]]; then
        [[ -e $FAKETIME_LIB ]] || die "$FAKETIME_LIB is missing: bash scripts/install_deps.sh (faketime)"
        faked=(LD_PRELOAD="$FAKETIME_LIB" FAKETIME="$skew" FAKETIME_DONT_FAKE_MONOTONIC=1)
      fi
      env+=(PAYMENT_DB="$(store_of payment)" RECOVERY_LISTEN="$(ip_of "$inst"):50053"
        RECOVERY_METRICS_LISTEN="$(ip_of "$inst"):$METRICS_PORT" RECOVERY_INSTANCE_ID="$inst"
        RECOVERY_LEASE_TTL="${LEASE_TTL}s")
      ;;
    *) die "no service $inst" ;;
  esac
  [[ $STORE == postgres ]] && env+=(PGPASSFILE="$WORK/pg1/pgpass")
  exec ip netns exec "$(ns_of "$inst")" env "${faked[@]}" "${env[@]}" "$BIN/$binary" >>"$WORK/$inst.log" 2>&1 </dev/null
}
