# shellcheck shell=bash
# Shared by scripts/demo.sh and scripts/chaos.sh (sourced, not run): build
# check, a private RabbitMQ node, the three services on free loopback ports,
# and their shutdown. The sourcing script runs from the repository root with
# `set -euo pipefail` and sets SCRIPT (the prefix of its messages), WORK (its
# temp dir) and result (0 once it has succeeded; it decides what cleanup keeps).
# Sets BIN, payment_port, accounting_port, recovery_port and the
# NAME_env arrays through the functions below.

declare -A pid_of=()  # service name -> pid of the running instance
# shellcheck source=SCRIPTDIR/ports.sh
source "$(dirname "${BASH_SOURCE[0]}")/ports.sh"  # free_port

# seconds VALUE VAR EXAMPLE: prints VALUE ("8s" or "8") as whole seconds; exits 2 naming VAR otherwise.
seconds() {
  local v=${1%s}
  [[ $v =~ ^[0-9]+$ ]] || { echo "$SCRIPT: $2 must be whole seconds, e.g. $3 (got '$1')" >&2; exit 2; }
  echo "$v"
}

# build_binaries: builds (unless SKIP_BUILD=1), sets BIN to BUILD_DIR/bin and exits 1 if a binary is missing.
# The same build type and directory as scripts/test.sh (scripts/build.sh's
# defaults), so a demo after the tests rebuilds nothing.
build_binaries() {
  local b
  if [[ ${SKIP_BUILD:-0} != 1 ]]; then
    bash scripts/build.sh
  fi
  BIN=$(cd "${BUILD_DIR:-build}/bin" && pwd)
  for b in payment_service accounting_service recovery_service outbox_demo outbox_check; do
    [[ -x $BIN/$b ]] || { echo "$SCRIPT: $BIN/$b is missing" >&2; exit 1; }
  done
}

# alive PID: the process exists and is not a zombie.
alive() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [[ ${stat%% *} != Z ]]
}

# await_exit PID TENTHS: waits up to TENTHS tenths of a second for PID to exit, then SIGKILLs it.
await_exit() {
  local _
  for _ in $(seq "$2"); do alive "$1" || break; sleep 0.1; done
  kill -KILL "$1" 2>/dev/null || true
}

# stop_services: SIGTERMs every running service, gives each up to 10 s to shut down cleanly, then SIGKILLs it.
stop_services() {
  local name
  for name in "${!pid_of[@]}"; do kill -TERM "${pid_of[$name]}" 2>/dev/null || true; done
  for name in "${!pid_of[@]}"; do await_exit "${pid_of[$name]}" 100; done
}

# finish_work KEPT: stops the private broker, then removes $WORK (result 0, no KEEP=1) or says it keeps KEPT there.
finish_work() {
  bash scripts/rabbitmq_node.sh stop "$WORK/broker" || true
  # shellcheck disable=SC2154  # result is the sourcing script's
  if [[ $result == 0 && ${KEEP:-0} != 1 ]]; then
    rm -rf "$WORK"
    echo "$SCRIPT: removed $WORK (logs, databases); KEEP=1 keeps it"
  else
    echo "$SCRIPT: logs and databases kept in $WORK ($1)"
  fi
}

# start_broker: starts the private RabbitMQ node in $WORK/broker (the services' broker users in
# $WORK/broker/users) and picks the three service ports.
start_broker() {
  bash scripts/rabbitmq_node.sh start "$WORK/broker"
  payment_port='' accounting_port='' recovery_port=''
  free_port payment_port
  free_port accounting_port
  free_port recovery_port
}

# message_keys FILE: writes a fresh message signing key ("<key id> <secret>", mode 0600) to FILE
# unless it exists; the three services share it (MESSAGE_KEYS_FILE).
message_keys() {
  [[ -s $1 ]] && return 0
  (umask 077 && echo "k$(date +%Y%m%d%H%M%S) $(openssl rand -hex 32)" >"$1")
}

# broker_user USER: AMQP_URL and AMQP_PASSWORD_FILE settings for the service's own broker user.
broker_user() {
  echo "AMQP_URL=$(cat "$WORK/broker/users/$1.url")"
  echo "AMQP_PASSWORD_FILE=$WORK/broker/users/$1.password"
}

# service_envs: sets each NAME_env to its broker user, listen address, database and message keys
# ($WORK/message.keys, made here); scripts append their own settings.
service_envs() {
  local payment accounting recovery
  message_keys "$WORK/message.keys"
  mapfile -t payment < <(broker_user outbox-payment)
  mapfile -t accounting < <(broker_user outbox-accounting)
  mapfile -t recovery < <(broker_user outbox-recovery)
  # shellcheck disable=SC2034  # used through start_service's nameref
  {
    accounting_service_env=("${accounting[@]}" ACCOUNTING_LISTEN="127.0.0.1:$accounting_port"
      ACCOUNTING_DB="$WORK/accounting.db" MESSAGE_KEYS_FILE="$WORK/message.keys")
    payment_service_env=("${payment[@]}" PAYMENT_LISTEN="127.0.0.1:$payment_port"
      PAYMENT_DB="$WORK/payment.db" MESSAGE_KEYS_FILE="$WORK/message.keys")
    recovery_service_env=("${recovery[@]}" RECOVERY_LISTEN="127.0.0.1:$recovery_port"
      PAYMENT_DB="$WORK/payment.db" MESSAGE_KEYS_FILE="$WORK/message.keys")
  }
}

# grpc_security DIR: gRPC TLS and tokens on, as in production: a throwaway CA
# and certificates (scripts/dev_certs.sh) and random API and ops tokens, all in
# DIR; adds them to the NAME_env arrays (service_envs first) and sets
# client_security, the flags outbox_demo needs to reach the services.
grpc_security() {
  local dir=$1 tls
  bash scripts/dev_certs.sh "$dir" >/dev/null
  (
    umask 077
    head -c 32 /dev/urandom | base64 >"$dir/api.token"
    head -c 32 /dev/urandom | base64 >"$dir/ops.token"
  )
  tls=(TLS_CERT_FILE="$dir/server.pem" TLS_KEY_FILE="$dir/server.key" TLS_CA_FILE="$dir/ca.pem")
  # shellcheck disable=SC2034  # used through start_service's nameref and by the caller
  {
    payment_service_env+=("${tls[@]}" API_TOKEN_FILE="$dir/api.token")
    accounting_service_env+=("${tls[@]}" API_TOKEN_FILE="$dir/api.token")
    recovery_service_env+=("${tls[@]}" OPS_TOKEN_FILE="$dir/ops.token")
    client_security=(--tls_ca_file="$dir/ca.pem" --token_file="$dir/api.token")
  }
}

# start_service NAME: runs $BIN/NAME with the environment in the array NAME_env, appending to
# $WORK/NAME.log, and waits up to 30 s for a new "NAME_started" line: returns 1 if it does not
# come, exits 1 if NAME dies first.
start_service() {
  local name=$1 before pid _
  local -n env_ref=${name}_env
  before=$(grep -c "${name}_started" "$WORK/$name.log" 2>/dev/null || true)
  env "${env_ref[@]}" "$BIN/$name" >>"$WORK/$name.log" 2>&1 &
  pid=$!
  pid_of[$name]=$pid
  for _ in $(seq 300); do
    (($(grep -c "${name}_started" "$WORK/$name.log" || true) > before)) && return 0
    alive "$pid" || { tail -n 5 "$WORK/$name.log" >&2; echo "$SCRIPT: $name exited at start" >&2; exit 1; }
    sleep 0.1
  done
  return 1
}

# outbox_check_both: runs outbox_check on both databases (output also in $WORK/outbox_check.txt); returns its status.
outbox_check_both() {
  "$BIN/outbox_check" --payment_db="$WORK/payment.db" --accounting_db="$WORK/accounting.db" |
    tee "$WORK/outbox_check.txt"
  return "${PIPESTATUS[0]}"
}
