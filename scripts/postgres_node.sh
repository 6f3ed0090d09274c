#!/usr/bin/env bash
# A private PostgreSQL server for tests and development, without a service
# manager and never the system's cluster: everything lives under DIR, the
# server listens on 127.0.0.1 (a free port; PG_LISTEN picks another
# address) and on a Unix socket in DIR.
#
#   postgres_node.sh fresh DIR             stop a node left in DIR, wipe DIR, initdb, start a primary
#   postgres_node.sh standby PRIMARY DIR   wipe DIR, start a synchronous standby of the node in PRIMARY
#   postgres_node.sh start DIR             start the node in DIR again (after stop or kill)
#   postgres_node.sh stop DIR              stop it (pg_ctl stop -m fast; no-op if it is not running)
#   postgres_node.sh kill DIR              SIGKILL its postmaster and the postmaster's children
#   postgres_node.sh promote DIR           promote a standby to primary
#   postgres_node.sh url DIR [DIR...]      its libpq URI, no password (several nodes: one URI, the
#                                          read-write one wins: target_session_attrs=read-write)
#   postgres_node.sh env DIR               shell exports for psql & co. (PGHOST, PGPORT, ...)
#   postgres_node.sh pid DIR               the postmaster's pid (fails if it is not running)
#
# Layout of DIR: data/ (the cluster), server.log, node.env (port, role,
# binaries), password (the role outbox's password, mode 0600, never printed),
# pgpass (libpq's password file for the caller) and server.pgpass (the same,
# owned by the server's user, for the standby's WAL receiver).
# The role outbox is the cluster's superuser; its database is outbox. Every
# connection, the socket's too, authenticates with the password (SCRAM).
#
# A standby is a pg_basebackup of the primary that streams from it and is
# named in the primary's synchronous_standby_names with synchronous_commit =
# remote_apply: a commit is acknowledged once the standby has applied it, so
# it survives the primary's SIGKILL and is readable on the standby. A
# primary started again after its standby's promotion is a primary of its
# own (two timelines), still waiting for that standby.
#
# PostgreSQL refuses to run as root: run by root, the server and initdb run as
# the user postgres (that the Debian package creates), DIR then belongs to it
# and DIR's parent must be searchable by it. PG_BIN picks the binaries
# (default: the newest /usr/lib/postgresql/*/bin). PG_PORT picks a new node's
# port. PG_LISTEN picks a new node's one TCP address (default 127.0.0.1), for
# a server in a network namespace of its own (scripts/netlab.sh); PG_ALLOW
# (a CIDR, default PG_LISTEN/32) is where password logins and a standby's
# replication may come from besides 127.0.0.1 and the socket. A standby
# streams from its primary's address; url names each node's. Paths may hold
# only [A-Za-z0-9/._-].
set -euo pipefail

die() { echo "postgres_node: $*" >&2; exit 1; }

DB_USER=outbox
DB_NAME=outbox
ADDR_RE='^[0-9]{1,3}(\.[0-9]{1,3}){3}$'

# Ports in use in any state, so we also avoid ones in TIME_WAIT.
used_ports() {
  local _ addr
  cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | while read -r _ addr _; do
    if [[ $addr == *:* ]]; then echo $((16#${addr##*:})); fi
  done
}

pick_port() {
  local used p _
  used=" $(used_ports | tr '\n' ' ') "
  for _ in $(seq 200); do
    p=$((30000 + RANDOM % 10000))
    [[ $used == *" $p "* ]] || { echo "$p"; return; }
  done
  die "no free port"
}

find_bin() {
  if [[ -n ${PG_BIN:-} ]]; then echo "$PG_BIN"; return; fi
  local d
  d=$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin -type d 2>/dev/null | sort -V | tail -1)
  [[ -x $d/initdb ]] || die "no PostgreSQL server under /usr/lib/postgresql (scripts/install_deps.sh)"
  echo "$d"
}

# The server's user: the caller, or postgres when the caller is root.
AS=()
SERVER_USER=$(id -un)
server_user_setup() {
  if [[ $(id -u) == 0 ]]; then
    getent passwd postgres >/dev/null || die "running as root needs the user postgres (package postgresql)"
    AS=(runuser -u postgres --)
    SERVER_USER=postgres
  fi
}

# A file only its owner can read, written from stdin.
private_file() {  # FILE OWNER
  (umask 077; cat >"$1")
  [[ $2 == "$(id -un)" ]] || chown "$2" "$1"
}

load_env() {
  [[ -f $DIR/node.env ]] || die "$DIR holds no node (use fresh or standby)"
  # shellcheck disable=SC1091
  source "$DIR/node.env"
  PGADDR_NODE=${PGADDR_NODE:-127.0.0.1}  # a node.env that names no address
}

# node_addr DIR: the TCP address of the node in DIR.
node_addr() {
  local a
  a=$(node_var "$1" PGADDR_NODE)
  echo "${a:-127.0.0.1}"
}

# listen_setup: PGADDR_NODE and ALLOW_NET of a new node, from PG_LISTEN and PG_ALLOW.
listen_setup() {
  PGADDR_NODE=${PG_LISTEN:-127.0.0.1}
  [[ $PGADDR_NODE =~ $ADDR_RE ]] || die "PG_LISTEN=$PGADDR_NODE: an IPv4 address"
  ALLOW_NET=${PG_ALLOW:-$PGADDR_NODE/32}
  [[ $ALLOW_NET =~ ^[0-9.]+/[0-9]{1,2}$ ]] || die "PG_ALLOW=$ALLOW_NET: an IPv4 CIDR"
}

# The postmaster's pid if it is alive and really serves DIR/data (its command
# line names that data directory), so a reused pid is never signalled.
postmaster_pid() {
  local pid
  pid=$(head -1 "$DIR/data/postmaster.pid" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF -- " -D $DIR/data " || return 1
  echo "$pid"
}

node_var() { sed -n "s/^$2=//p" "$1/node.env"; }  # DIR NAME: a value of its node.env

# Runs SQL as outbox over a node's socket; the password comes from pgpass.
sql_at() {  # NODE_DIR PORT DB SQL
  PGPASSFILE=$1/pgpass "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -At -h "$1" -p "$2" \
    -U "$DB_USER" -d "$3" -c "$4"
}
sql() { sql_at "$DIR" "$PGPORT_NODE" "$@"; }  # DB SQL, on this node

start_server() {
  rm -f "$DIR/server.log"
  if ! "${AS[@]}" "$PG_BIN/pg_ctl" start -w -t 60 -D "$DIR/data" -l "$DIR/server.log" >/dev/null; then
    tail -n 20 "$DIR/server.log" >&2 || true
    die "the server in $DIR did not start (log: $DIR/server.log)"
  fi
}

write_env() {  # ROLE
  cat >"$DIR/node.env" <<EOF
PG_BIN=$PG_BIN
PGPORT_NODE=$PGPORT_NODE
PGADDR_NODE=$PGADDR_NODE
NODE_ROLE=$1
NODE_NAME=$NODE_NAME
SERVER_USER=$SERVER_USER
PRIMARY_DIR=${PRIMARY_DIR:-}
EOF
}

# The settings that name this node (the rest of postgresql.conf is shared
# with its standbys through pg_basebackup).
write_node_conf() {
  cat >"$DIR/data/node.conf" <<EOF
port = $PGPORT_NODE
listen_addresses = '$PGADDR_NODE'
unix_socket_directories = '$DIR'
cluster_name = '$NODE_NAME'
EOF
  [[ -z ${AS[*]} ]] || chown postgres "$DIR/data/node.conf"
}

new_dir() {
  mkdir -p "$DIR"
  if [[ -n ${AS[*]} ]]; then
    chown postgres "$DIR"
    "${AS[@]}" test -w "$DIR" || die "the user postgres cannot reach $DIR: make its parents searchable (chmod o+x)"
  fi
}

cmd_fresh() {
  cmd_stop >/dev/null
  rm -rf "$DIR"
  new_dir
  PG_BIN=$(find_bin)
  PGPORT_NODE=${PG_PORT:-$(pick_port)}
  NODE_NAME=node$PGPORT_NODE
  listen_setup
  local password
  password=$(od -An -tx1 -N24 /dev/urandom | tr -d ' \n')
  printf '%s\n' "$password" | private_file "$DIR/password" "$(id -un)"
  printf '*:*:*:%s:%s\n' "$DB_USER" "$password" | private_file "$DIR/pgpass" "$(id -un)"
  printf '*:*:*:%s:%s\n' "$DB_USER" "$password" | private_file "$DIR/server.pgpass" "$SERVER_USER"
  # initdb reads the password from a file its user can read; gone right after.
  printf '%s\n' "$password" | private_file "$DIR/initdb.pw" "$SERVER_USER"
  if ! "${AS[@]}" "$PG_BIN/initdb" -D "$DIR/data" -U "$DB_USER" --pwfile="$DIR/initdb.pw" \
    -A scram-sha-256 -E UTF8 --no-locale --no-sync >"$DIR/initdb.log" 2>&1; then
    rm -f "$DIR/initdb.pw"
    cat "$DIR/initdb.log" >&2
    die "initdb failed"
  fi
  rm -f "$DIR/initdb.pw"
  # WAL for streaming standbys. Dynamic shared memory in files under data/
  # (mmap), so a killed server leaves nothing in /dev/shm. The address it
  # listens on is node.conf's.
  cat >>"$DIR/data/postgresql.conf" <<EOF

# postgres_node.sh
wal_level = replica
max_wal_senders = 10
max_replication_slots = 10
wal_keep_size = '256MB'
hot_standby = on
dynamic_shared_memory_type = mmap
shared_buffers = '32MB'
max_connections = 50
logging_collector = off
include_if_exists = 'node.conf'
EOF
  {
    cat <<EOF
local   all          all                     scram-sha-256
host    all          all        127.0.0.1/32 scram-sha-256
local   replication  all                     scram-sha-256
host    replication  all        127.0.0.1/32 scram-sha-256
EOF
    if [[ $ALLOW_NET != 127.0.0.1/32 ]]; then
      printf 'host    all          all        %s scram-sha-256\n' "$ALLOW_NET"
      printf 'host    replication  all        %s scram-sha-256\n' "$ALLOW_NET"
    fi
  } >"$DIR/data/pg_hba.conf"
  write_node_conf
  write_env primary
  start_server
  sql postgres "CREATE DATABASE $DB_NAME" >/dev/null
  echo "postgres_node: primary $NODE_NAME ready on $PGADDR_NODE:$PGPORT_NODE (url: $0 url $DIR)"
}

cmd_standby() {
  local primary=$1
  [[ -f $primary/node.env ]] || die "$primary holds no node"
  local PRIMARY_PORT PRIMARY_BIN PRIMARY_ADDR
  PRIMARY_PORT=$(node_var "$primary" PGPORT_NODE)
  PRIMARY_ADDR=$(node_addr "$primary")
  PRIMARY_BIN=$(node_var "$primary" PG_BIN)
  cmd_stop >/dev/null
  rm -rf "$DIR"
  new_dir
  PG_BIN=$PRIMARY_BIN
  PGPORT_NODE=${PG_PORT:-$(pick_port)}
  NODE_NAME=node$PGPORT_NODE
  listen_setup
  PRIMARY_DIR=$primary
  cp "$primary/password" "$DIR/password"
  cp "$primary/pgpass" "$DIR/pgpass"
  private_file "$DIR/server.pgpass" "$SERVER_USER" <"$primary/pgpass"
  # pg_basebackup -R: standby.signal and a primary_conninfo that names the
  # passfile (not the password); the WAL receiver's application_name is the
  # node's cluster_name (node.conf). The primary's postgresql.auto.conf and
  # node.conf come along: the standby gets its own node.conf, and a
  # synchronous_standby_names of the primary's would make the standby, once
  # promoted, wait for standbys it does not have.
  if ! "${AS[@]}" "$PG_BIN/pg_basebackup" -D "$DIR/data" -R -X stream -c fast --no-sync \
    -d "host=$PRIMARY_ADDR port=$PRIMARY_PORT user=$DB_USER passfile=$DIR/server.pgpass" \
    >"$DIR/basebackup.log" 2>&1; then
    cat "$DIR/basebackup.log" >&2
    die "pg_basebackup from $primary failed"
  fi
  "${AS[@]}" sed -i '/^synchronous_standby_names/d' "$DIR/data/postgresql.auto.conf"
  write_node_conf
  write_env standby
  start_server
  # Then the primary waits for it: every commit is applied here before the
  # primary acknowledges it.
  local names
  names=$(cat "$primary/standbys" 2>/dev/null || true)
  names=${names:+$names, }$NODE_NAME
  echo "$names" >"$primary/standbys"
  { sql_at "$primary" "$PRIMARY_PORT" postgres "ALTER SYSTEM SET synchronous_standby_names = 'FIRST 1 ($names)'" &&
    sql_at "$primary" "$PRIMARY_PORT" postgres "ALTER SYSTEM SET synchronous_commit = 'remote_apply'" &&
    sql_at "$primary" "$PRIMARY_PORT" postgres "SELECT pg_reload_conf()" >/dev/null; } ||
    die "cannot make $DIR the primary's synchronous standby"
  local deadline=$((SECONDS + 60)) state=""
  until [[ $state == sync ]]; do
    ((SECONDS < deadline)) || die "$NODE_NAME is not the primary's synchronous standby (state: ${state:-none})"
    sleep 0.1
    state=$(sql_at "$primary" "$PRIMARY_PORT" postgres \
      "SELECT sync_state FROM pg_stat_replication WHERE application_name = '$NODE_NAME'") || state=""
  done
  echo "postgres_node: synchronous standby $NODE_NAME of $primary ready on $PGADDR_NODE:$PGPORT_NODE"
}

cmd_start() {
  load_env
  if postmaster_pid >/dev/null; then echo "postgres_node: $NODE_NAME already running"; return; fi
  start_server
  echo "postgres_node: $NODE_ROLE $NODE_NAME ready on $PGADDR_NODE:$PGPORT_NODE"
}

cmd_stop() {
  [[ -f $DIR/node.env ]] || return 0
  load_env
  postmaster_pid >/dev/null || return 0
  "${AS[@]}" "$PG_BIN/pg_ctl" stop -w -t 60 -m fast -D "$DIR/data" >/dev/null
  echo "postgres_node: $NODE_NAME stopped"
}

# SIGKILL for the postmaster and every child of it at once, as in a machine's
# crash: the postmaster is stopped first so that it forks no more, then its
# children (each its own process group) and it are killed by pid. kill
# returns once none of them is left. Then the System V segment that only a
# clean shutdown removes.
cmd_kill() {
  load_env
  local pid shmid pids p
  pid=$(postmaster_pid) || die "$NODE_NAME is not running"
  shmid=$(sed -n 7p "$DIR/data/postmaster.pid" | awk '{print $2}')
  kill -STOP "$pid"
  mapfile -t pids < <(echo "$pid"; children_of "$pid")
  kill -KILL "${pids[@]}" 2>/dev/null || true  # some may have gone already
  local deadline=$((SECONDS + 30))
  # Gone, not a zombie either: a new postmaster would take a zombie's pid in
  # postmaster.pid for a running server.
  for p in "${pids[@]}"; do
    while [[ -e /proc/$p ]]; do
      ((SECONDS < deadline)) || die "pid $p of $NODE_NAME is still there after SIGKILL"
      sleep 0.02
    done
  done
  if [[ $shmid =~ ^[0-9]+$ ]]; then ipcrm -m "$shmid" 2>/dev/null || true; fi
  echo "postgres_node: $NODE_NAME killed (postmaster $pid, $((${#pids[@]} - 1)) children)"
}

children_of() { ps -o pid= --ppid "$1" | tr -d ' ' || true; }


cmd_promote() {
  load_env
  [[ $NODE_ROLE == standby ]] || die "$NODE_NAME is not a standby"
  postmaster_pid >/dev/null || die "$NODE_NAME is not running"
  "${AS[@]}" "$PG_BIN/pg_ctl" promote -w -t 60 -D "$DIR/data" >/dev/null || die "cannot promote $NODE_NAME"
  PRIMARY_DIR=""
  write_env primary
  echo "postgres_node: $NODE_NAME promoted to primary"
}

url_of() {  # DIRS...: hosts, then the first's passfile
  local d hosts=() port
  for d in "$@"; do
    [[ -f $d/node.env ]] || die "$d holds no node"
    port=$(node_var "$d" PGPORT_NODE)
    hosts+=("$(node_addr "$d"):$port")
  done
  local IFS=,
  local url="postgresql://$DB_USER@${hosts[*]}/$DB_NAME?passfile=$1/pgpass"
  (($# == 1)) || url+="&target_session_attrs=read-write"
  echo "$url"
}

cmd_env() {
  load_env
  cat <<EOF
export PG_BIN=$PG_BIN
export PGHOST=$DIR
export PGPORT=$PGPORT_NODE
export PGUSER=$DB_USER
export PGDATABASE=$DB_NAME
export PGPASSFILE=$DIR/pgpass
EOF
}

[[ ${BASH_SOURCE[0]} == "$0" ]] || return 0
usage="usage: $0 fresh|start|stop|kill|promote|env|pid DIR | standby PRIMARY_DIR DIR | url DIR..."
(($# >= 2)) || die "$usage"
abs() {
  [[ $1 =~ ^[A-Za-z0-9/._-]+$ ]] || die "$1: a path of [A-Za-z0-9/._-] only"
  mkdir -p "$(dirname "$1")"
  echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
}
server_user_setup
cmd=$1
shift
case $cmd in
  url)
    dirs=()
    for d in "$@"; do dirs+=("$(abs "$d")"); done
    url_of "${dirs[@]}"
    exit 0
    ;;
  standby)
    (($# == 2)) || die "$usage"
    P=$(abs "$1")
    DIR=$(abs "$2")
    cmd_standby "$P"
    exit 0
    ;;
esac
(($# == 1)) || die "$usage"
[[ $cmd == stop && ! -d $1 ]] && exit 0
DIR=$(abs "$1")
case $cmd in
  fresh) cmd_fresh ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  kill) cmd_kill ;;
  promote) cmd_promote ;;
  env) cmd_env ;;
  pid) load_env; postmaster_pid ;;
  *) die "$usage" ;;
esac
