#!/usr/bin/env bash
# docker-compose's `cluster`, `shards` and `pg` profiles brought up for real
# (the default profile is scripts/compose_demo.sh's). By hand only: CI has no
# Docker (`compose.config` checks the file there).
#
#   cluster  rabbit-1..3 and payment_cluster, accounting_cluster, recovery_cluster
#            (quorum queues, every node in AMQP_URL). Shows the cluster
#            (`rabbitmqctl cluster_status`), the quorum queues with their leader
#            and members, which node each service's connections are on; runs
#            PROFILE_PAYMENTS payments (build/bin/outbox_demo) and STRANGER_PAYMENTS
#            from a client without our protos (scripts/reflection_stranger/payments.js,
#            over TLS with the token, after check.js's reflection check). Then,
#            under a small load (outbox_demo --duration=LOAD_DURATION, 2 threads),
#            `docker stop`s (STOP_MODE=kill: `docker kill`s) the node leading PAY_QUEUE;
#            the stranger's payments made
#            while it is down must turn SENT; the load must end all SENT; the node
#            is started again and must rejoin (3 running, every queue 3 members).
#   shards   payment_s0, payment_s1 (with recovery_s0, recovery_s1) and
#            accounting_shards on the default broker. PROFILE_PAYMENTS payments
#            routed by key (outbox_demo with both shards' addresses), the count
#            per shard; the stranger sends STRANGER_PAYMENTS to shard 0 only, follows
#            the wrong-shard answers' address, waits for SENT and asks the wrong
#            shard for a payment; outbox_check per shard (--payment_id_prefix=s<k>-).
#   pg       pg-primary and its synchronous standby pg-standby, payment_pg_1 and
#            payment_pg_2 on one database behind payment_pg (127.0.0.1:50081, the one
#            address), accounting_pg and recovery_pg. Shows the replication
#            (pg_stat_replication, synchronous_commit); PROFILE_PAYMENTS payments and
#            STRANGER_PAYMENTS from the stranger through the one address, and how many
#            each replica created (its outbox_payments_created_total). Then, under a
#            load (outbox_demo --duration=LOAD_DURATION, 4 threads, --retry: a failed
#            create is asked again with the same key), `docker kill`s pg-primary and
#            promotes pg-standby (SELECT pg_promote() through docker exec); 10 more
#            payments from the stranger after it. Checks that every create was
#            answered OK, every payment is SENT with one voucher, the rows are exactly
#            the payments acknowledged, none lost, and outbox_check on the PostgreSQL
#            URIs; prints the promotion's time, the longest create, the calls retried
#            and the seconds from the kill until every row was SENT.
# Each profile ends with outbox_check on its volumes or databases and `docker-compose down -v`.
#
#   scripts/compose_profiles.sh [cluster|shards|pg|all]   (all: cluster, shards, then pg)
#
# Env: PROFILE_PAYMENTS (200), STRANGER_PAYMENTS (20), LOAD_DURATION (40s), STOP_MODE (stop|kill),
# COMPOSE_PROJECT_NAME (outboxprofiles), KEEP_UP=1 (leaves the last profile up),
# DEMO_OUT (a new /tmp/outbox-compose-profiles.XXXXXX: reports and logs),
# BUILD_DIR (build: outbox_demo and the stranger's node_modules), the passwords
# (PostgreSQL's too) and RABBITMQ_ERLANG_COOKIE (random), REBUILD (1: `up --build`;
# 0: the images that exist are used as they are, e.g. outbox-services:local built
# once, and only missing ones are built). The profiles' published ports must be free.
# Exit status 0 only if every step of every profile asked for held; the last
# line is RESULT OK or RESULT FAILED.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
SCRIPT=compose_profiles
# shellcheck source=SCRIPTDIR/lib/services.sh
source "$ROOT/scripts/lib/services.sh"  # seconds, message_keys

WHICH=${1:-all}
case $WHICH in
  cluster) profiles=(cluster) ;;
  shards) profiles=(shards) ;;
  pg) profiles=(pg) ;;
  all) profiles=(cluster shards pg) ;;
  *) echo "usage: $0 [cluster|shards|pg|all]" >&2; exit 2 ;;
esac
PAYMENTS=${PROFILE_PAYMENTS:-200}
STRANGER=${STRANGER_PAYMENTS:-20}
LOAD=$(seconds "${LOAD_DURATION:-40s}" LOAD_DURATION 40s)
STOP_MODE=${STOP_MODE:-stop}
[[ $STOP_MODE == stop || $STOP_MODE == kill ]] || { echo "STOP_MODE is stop or kill, not $STOP_MODE" >&2; exit 2; }
OUT=${DEMO_OUT:-$(mktemp -d -t outbox-compose-profiles.XXXXXX)}
mkdir -p "$OUT"
BUILD_DIR=${BUILD_DIR:-build}
BIN=$ROOT/$BUILD_DIR/bin
NODE_DIR=$ROOT/$BUILD_DIR/reflection_stranger
CERTS=$ROOT/certs/compose
export COMPOSE_PROJECT_NAME=${COMPOSE_PROJECT_NAME:-outboxprofiles}
random() { od -An -N16 -tx1 /dev/urandom | tr -d ' \n'; }
for p in RABBITMQ_PASSWORD PAYMENT_BROKER_PASSWORD ACCOUNTING_BROKER_PASSWORD RECOVERY_BROKER_PASSWORD \
  RABBITMQ_ERLANG_COOKIE POSTGRES_PASSWORD PAYMENT_DB_PASSWORD ACCOUNTING_DB_PASSWORD; do
  [[ -n ${!p:-} ]] || export "$p=$(random)"
done
export RETRY_BASE_DELAY=${RETRY_BASE_DELAY:-1s} RETRY_MAX_ATTEMPTS=${RETRY_MAX_ATTEMPTS:-10}
BUILD_FLAG=(--build)
case ${REBUILD:-1} in
  1) ;;
  0) BUILD_FLAG=() ;;
  *) echo "REBUILD is 1 or 0, not $REBUILD" >&2; exit 2 ;;
esac

say() { echo "$SCRIPT: $*"; }
die() { echo "$SCRIPT: $*" >&2; exit 1; }

# --- tools: Docker (the local stand-in images), the host client, the stranger's Node modules ---
if [[ -e $ROOT/../shared/docker/local-images.sh ]]; then
  say "making the local images (../shared/docker/local-images.sh)"
  bash "$ROOT/../shared/docker/local-images.sh" >"$OUT/local-images.log" 2>&1 ||
    die "local-images.sh failed ($OUT/local-images.log)"
fi
command -v docker-compose >/dev/null || die "docker-compose is not installed"
docker info >/dev/null 2>&1 || die "no Docker daemon answers"
missing=()
command -v jq >/dev/null || missing+=(jq)
command -v curl >/dev/null || missing+=(curl)  # the pg replicas' /metrics
if ((${#missing[@]} > 0)); then
  say "installing ${missing[*]}"
  SUDO=()
  [[ $(id -u) == 0 ]] || SUDO=(sudo)
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" \
    >"$OUT/apt.log" 2>&1 || die "apt-get install ${missing[*]} failed: $OUT/apt.log"
fi
if [[ ! -x $BIN/outbox_demo ]]; then
  say "building the host client (scripts/build.sh)"
  BUILD_DIR=$BUILD_DIR bash scripts/build.sh
fi
[[ -x $BIN/outbox_demo ]] || die "$BIN/outbox_demo is missing"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  die "needs node and npm (apt-get install nodejs npm)"
fi
mkdir -p "$NODE_DIR"
cp scripts/reflection_stranger/package.json scripts/reflection_stranger/*.js "$NODE_DIR/"
if [[ ! -d $NODE_DIR/node_modules/grpc-js-reflection-client ]]; then
  (cd "$NODE_DIR" && npm install --no-audit --no-fund --loglevel=error >/dev/null)
fi

# --- helpers (the current profile in $PROFILE) ---
PROFILE=''
dc() { docker-compose --profile "$PROFILE" "$@"; }
# shellcheck source=SCRIPTDIR/lib/compose.sh
source "$ROOT/scripts/lib/compose.sh"  # container_secrets, health, await_healthy (through dc)
ports_free() {
  local busy=() port
  for port in "$@"; do (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && busy+=("$port"); done
  ((${#busy[@]} == 0)) || die "ports already in use on 127.0.0.1: ${busy[*]} (another docker-compose up?)"
}
demo() { "$BIN/outbox_demo" --tls_ca_file="$CERTS/ca.pem" --token_file="$CERTS/api.token" "$@"; }
# stranger SCRIPT ARGS...: the Node client over TLS with the API token (STRANGER_TOKEN_FILE overrides).
stranger() {
  STRANGER_TLS_CA_FILE=$CERTS/ca.pem STRANGER_TOKEN_FILE=${STRANGER_TOKEN_FILE:-$CERTS/api.token} \
    NODE_OPTIONS=--no-deprecation node "$NODE_DIR/$1" "${@:2}"
}
# reflection_check PAYMENT... -- RECOVERY...: check.js; recovery's ops API takes the ops token.
reflection_check() {
  local api=() ops=()
  while (($# > 0)) && [[ $1 != -- ]]; do api+=("$1"); shift; done
  (($# > 0)) && shift
  ops=("$@")
  stranger check.js "${api[@]}" && STRANGER_TOKEN_FILE=$CERTS/ops.token stranger check.js "${ops[@]}"
}
# connections SERVICE...: each AMQP connection's node, from its last amqp_connected log line.
connections() {
  local s
  for s in "$@"; do
    dc logs --no-color "$s" 2>/dev/null | grep -o 'amqp_connected connection=[^ ]* node=[^ ]*' |
      awk -v s="$s" '{ sub("connection=", "", $2); last[$2] = $3 } END { for (c in last) printf "  %s: %s %s\n", s, c, last[c] }' |
      sort
  done
}
# amqp_events SERVICE...: the connection losses and reconnections in the logs, with their time.
amqp_events() {
  local s
  for s in "$@"; do
    dc logs --no-color "$s" 2>/dev/null | grep -E 'amqp_connection_lost|amqp_connected' |
      sed -E 's/^[^|]*\| //; s/ url=[^ ]*//' | tail -n "${EVENTS_TAIL:-4}" | sed "s/^/  $s: /"
  done
}
# ctl NODE ARGS...: rabbitmqctl on one broker container.
ctl() { dc exec -T "$1" rabbitmqctl -q "${@:2}"; }
field() { awk -v l="$2" 'index($0, l " ") == 1 { sub("^" l " +", ""); print $1 + 0; exit }' "$1"; }
# report_totals REPORT: REPORT_TOTALS = "N payments, N SENT, lost N, duplicates N" from an
# outbox_demo --report_all report; fails unless every payment is SENT, none lost, none twice.
report_totals() {
  local total sent lost dups
  total=$(field "$1" "payments checked")
  sent=$(field "$1" "outbox SENT")
  lost=$(field "$1" "lost")
  dups=$(field "$1" "duplicates")
  REPORT_TOTALS="$total payments, $sent SENT, lost $lost, duplicates $dups"
  [[ -n $total && $sent == "$total" && $lost == 0 && $dups == 0 ]]
}
# outbox_check VOLUME_SUFFIX_PAYMENT VOLUME_SUFFIX_ACCOUNTING [FLAG...]: the checker in the image, on the volumes.
outbox_check() {
  docker run --rm -v "${COMPOSE_PROJECT_NAME}_$1:/data/payment" -v "${COMPOSE_PROJECT_NAME}_$2:/data/accounting" \
    outbox-services:local outbox_check --payment_db=/data/payment/payment.db \
    --accounting_db=/data/accounting/accounting.db "${@:3}"
}
down() {
  dc logs --no-color >"$OUT/$PROFILE-compose.log" 2>&1 || true
  if [[ ${KEEP_UP:-0} == 1 ]]; then
    say "KEEP_UP=1: profile $PROFILE still up (project $COMPOSE_PROJECT_NAME); stop with:" \
      "COMPOSE_PROJECT_NAME=$COMPOSE_PROJECT_NAME RABBITMQ_PASSWORD=x PAYMENT_BROKER_PASSWORD=x" \
      "ACCOUNTING_BROKER_PASSWORD=x RECOVERY_BROKER_PASSWORD=x docker-compose --profile $PROFILE down -v"
    return
  fi
  dc down -v >>"$OUT/compose-down.log" 2>&1 || true
  say "$PROFILE: docker-compose down -v done"
}
# up SERVICE...: fresh certificates and tokens, then `up -d --build` (REBUILD=0: `up -d`) of the named services.
up() {
  container_secrets "$CERTS"  # scripts/lib/compose.sh
  # A fresh start: what an earlier run of this project left (KEEP_UP=1) goes, volumes too.
  dc down -v >>"$OUT/compose-down.log" 2>&1 || true
  local start=$SECONDS
  dc up -d "${BUILD_FLAG[@]}" "$@" >"$OUT/$PROFILE-up.log" 2>&1 || { tail -n 30 "$OUT/$PROFILE-up.log" >&2; return 1; }
  say "$PROFILE: docker-compose up -d ${BUILD_FLAG[*]:+${BUILD_FLAG[*]} }$* returned after $((SECONDS - start))s"
}
# up_healthy "SERVICE..." CONTAINER...: `up` the services, then wait (400 s) until
# every container is healthy; sets HEALTHY_S, the seconds from up to healthy.
up_healthy() {
  local t0=$SECONDS to_up c
  read -ra to_up <<<"$1"
  shift
  up "${to_up[@]}" || return 1
  await_healthy 400 "$@" || {
    for c in "$@"; do echo "  $c: $(health "$c")" >&2; done
    say "$PROFILE: not every container became healthy within 400 s"
    return 1
  }
  HEALTHY_S=$((SECONDS - t0))
  say "$PROFILE: every container healthy ${HEALTHY_S}s after up"
}

declare -A verdicts
current=''
# shellcheck disable=SC2317  # invoked by the trap
cleanup() {
  trap - EXIT INT TERM
  if [[ -n $current ]]; then PROFILE=$current; down; fi
  say "reports and logs in $OUT"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- cluster ---
run_cluster() {
  PROFILE=cluster current=cluster
  local ok=1 services=(rabbit-1 rabbit-2 rabbit-3 payment_cluster accounting_cluster recovery_cluster)
  ports_free 5682 5683 5684 50061 50062 50063
  echo "=== cluster: up ==="
  up_healthy "payment_cluster accounting_cluster recovery_cluster" "${services[@]}" || return 1
  local healthy_s=$HEALTHY_S
  ctl rabbit-1 cluster_status --formatter json >"$OUT/cluster-status.json"
  local running
  running=$(jq -r '.running_nodes | sort | join(", ")' "$OUT/cluster-status.json")
  say "cluster: rabbitmqctl cluster_status: running nodes $running; partitions: $(jq -c '.partitions' "$OUT/cluster-status.json")"
  [[ $(jq '.running_nodes | length' "$OUT/cluster-status.json") == 3 ]] || ok=0
  ctl rabbit-1 list_queues name type leader members --formatter json >"$OUT/cluster-queues.json"
  echo "--- quorum queues (rabbitmqctl list_queues name type leader members) ---"
  jq -r '.[] | "  \(.name): \(.type), leader \(.leader), members \(.members | join(" "))"' "$OUT/cluster-queues.json"
  [[ $(jq '[.[] | select(.type != "quorum" or (.members | length) != 3)] | length' "$OUT/cluster-queues.json") == 0 &&
    $(jq length "$OUT/cluster-queues.json") -gt 0 ]] || { say "cluster: a queue is not a 3-member quorum queue"; ok=0; }
  echo "--- the services' AMQP connections (each one's last amqp_connected log line) ---"
  connections payment_cluster accounting_cluster recovery_cluster
  echo
  echo "=== cluster: $PAYMENTS payments (outbox_demo), then the stranger ==="
  demo --payment_addr=127.0.0.1:50061 --accounting_addr=127.0.0.1:50062 --wait_healthy=60 \
    --count="$PAYMENTS" --timeout=120s >"$OUT/cluster-healthy.report" 2>&1 || ok=0
  tail -n 22 "$OUT/cluster-healthy.report"
  reflection_check 127.0.0.1:50061 127.0.0.1:50062 -- 127.0.0.1:50063 >"$OUT/cluster-reflection.txt" 2>&1 || ok=0
  grep 'reflection_stranger:' "$OUT/cluster-reflection.txt"
  STRANGER_RUN=cluster-healthy stranger payments.js "$STRANGER" 127.0.0.1:50061 || ok=0

  echo
  echo "=== cluster: docker $STOP_MODE the node leading PAY_QUEUE under load (${LOAD}s, 2 threads) ==="
  local leader node survivor
  leader=$(jq -r '.[] | select(.name == "PAY_QUEUE") | .leader' "$OUT/cluster-queues.json")
  node=${leader#rabbit@}
  [[ $node =~ ^rabbit-[123]$ ]] || { say "cluster: no leader of PAY_QUEUE ($leader)"; return 1; }
  survivor=rabbit-1
  [[ $node == rabbit-1 ]] && survivor=rabbit-2
  demo --payment_addr=127.0.0.1:50061 --accounting_addr=127.0.0.1:50062 --duration="${LOAD}s" \
    --concurrency=2 --retry --skip_checks --timeout=180s --write_ids="$OUT/cluster-load.ids" \
    >"$OUT/cluster-load.report" 2>&1 &
  local load_pid=$! load=0
  sleep $((LOAD / 4))
  # docker stop: SIGTERM, so the node shuts down cleanly (hands its leaderships over), then
  # SIGKILL after 10 s; docker kill: SIGKILL at once. The leader is polled on a surviving node meanwhile.
  local stop_at=$SECONDS stop_pid stop_began
  stop_began=$(date -u +%H:%M:%S.%3N)
  docker "$STOP_MODE" "$(dc ps -q "$node")" >/dev/null &
  stop_pid=$!
  local new_leader='' elected='' stopped_s=''
  for _ in $(seq 120); do
    if [[ -z $stopped_s ]] && ! kill -0 "$stop_pid" 2>/dev/null; then stopped_s=$((SECONDS - stop_at)); fi
    if [[ -z $elected ]]; then
      new_leader=$(timeout 10 docker-compose --profile "$PROFILE" exec -T "$survivor" rabbitmqctl -q list_queues name leader --formatter json 2>/dev/null |
        jq -r '.[] | select(.name == "PAY_QUEUE") | .leader' || true)
      [[ -n $new_leader && $new_leader != "$leader" ]] && elected=$((SECONDS - stop_at))
    fi
    [[ -n $elected && -n $stopped_s ]] && break
    sleep 1
  done
  wait "$stop_pid" || { say "cluster: docker $STOP_MODE $node failed"; ok=0; }
  say "cluster: docker $STOP_MODE $node (PAY_QUEUE's leader) began at $stop_began UTC and returned after ${stopped_s:-?}s;" \
    "PAY_QUEUE's leader ${new_leader:-?} seen ${elected:-not within 120}s after it began"
  [[ -n $elected ]] || ok=0
  local st0=$SECONDS stranger_s=''
  if STRANGER_RUN=cluster-outage STRANGER_TIMEOUT_S=120 stranger payments.js 10 127.0.0.1:50061; then
    stranger_s=$((SECONDS - st0))s
    say "cluster: the stranger's 10 payments made with $node down were SENT ${stranger_s} after it began"
  else
    ok=0
  fi
  ctl "$survivor" cluster_status --formatter json | jq -c '{running_nodes, disk_nodes}' | sed "s/^/$SCRIPT: cluster: with $node down: /"
  echo "--- the services' connection losses and reconnections (last lines of their logs) ---"
  amqp_events payment_cluster accounting_cluster recovery_cluster
  wait "$load_pid" || load=$?
  tail -n 22 "$OUT/cluster-load.report"
  ((load == 0)) || { say "cluster: the load run failed (exit $load)"; ok=0; }
  local start_at=$SECONDS rejoined=''
  docker start "$(dc ps -q "$node")" >/dev/null
  if await_healthy 300 rabbit-1 rabbit-2 rabbit-3; then
    rejoined=$((SECONDS - start_at))
    say "cluster: $node started again; all three nodes healthy (3 online) ${rejoined}s later"
  else
    say "cluster: $node did not rejoin within 300 s"; ok=0
  fi
  ctl rabbit-1 cluster_status --formatter json >"$OUT/cluster-status-after.json"
  say "cluster: running nodes after: $(jq -r '.running_nodes | sort | join(", ")' "$OUT/cluster-status-after.json")"
  [[ $(jq '.running_nodes | length' "$OUT/cluster-status-after.json") == 3 ]] || ok=0
  ctl rabbit-1 list_queues name leader members online --formatter json >"$OUT/cluster-queues-after.json"
  jq -r '.[] | "  \(.name): leader \(.leader), online \(.online | length) of \(.members | length)"' \
    "$OUT/cluster-queues-after.json"

  echo
  echo "=== cluster: every payment (outbox_demo --report_all), outbox_check ==="
  demo --payment_addr=127.0.0.1:50061 --accounting_addr=127.0.0.1:50062 --count=0 --report_all \
    --timeout=120s >"$OUT/cluster-all.report" 2>&1 || ok=0
  tail -n 18 "$OUT/cluster-all.report"
  outbox_check payment_cluster_data accounting_cluster_data | tee "$OUT/cluster-check.txt" || ok=0
  report_totals "$OUT/cluster-all.report" || ok=0
  cluster_summary="$REPORT_TOTALS; healthy ${healthy_s}s after up;"
  cluster_summary+=" docker $STOP_MODE $node (leader): new leader seen after ${elected:-?}s;"
  cluster_summary+=" the load's creates $(grep -o 'p99 .*' "$OUT/cluster-load.report" | head -n 1), $(grep -o '[0-9]* calls retried' "$OUT/cluster-load.report" || echo '? calls retried');"
  cluster_summary+=" stranger's 10 during the stop SENT: ${stranger_s:-NO}; rejoined ${rejoined:-NO}s after docker start"
  down
  current=''
  return $((1 - ok))
}

# --- shards ---
run_shards() {
  PROFILE=shards current=shards
  local ok=1 services=(rabbitmq payment_s0 payment_s1 accounting_shards recovery_s0 recovery_s1)
  ports_free 5672 15672 50071 50072 50073 50074 50075
  echo "=== shards: up ==="
  up_healthy "payment_s0 payment_s1 accounting_shards recovery_s0 recovery_s1" "${services[@]}" || return 1
  local healthy_s=$HEALTHY_S
  ctl rabbitmq list_queues name type consumers --formatter json |
    jq -r '.[] | select(.name | startswith("shards.")) | "  \(.name): \(.type), \(.consumers) consumer(s)"'

  echo
  echo "=== shards: $PAYMENTS payments routed by key (outbox_demo, both shards' addresses) ==="
  demo --payment_addr=127.0.0.1:50071,127.0.0.1:50072 --accounting_addr=127.0.0.1:50073 --wait_healthy=60 \
    --count="$PAYMENTS" --timeout=120s --write_ids="$OUT/shards.ids" >"$OUT/shards-healthy.report" 2>&1 || ok=0
  tail -n 22 "$OUT/shards-healthy.report"
  local s0 s1
  s0=$(grep -c '^s0-' "$OUT/shards.ids" || true)
  s1=$(grep -c '^s1-' "$OUT/shards.ids" || true)
  say "shards: payment ids by shard: s0- $s0, s1- $s1"
  ((s0 > 0 && s1 > 0 && s0 + s1 == PAYMENTS)) || ok=0

  echo
  echo "=== shards: the stranger calls shard 0 only and follows the answers ==="
  reflection_check 127.0.0.1:50071 127.0.0.1:50072 127.0.0.1:50073 -- 127.0.0.1:50074 127.0.0.1:50075 \
    >"$OUT/shards-reflection.txt" 2>&1 || ok=0
  grep 'reflection_stranger:' "$OUT/shards-reflection.txt"
  STRANGER_RUN=shards stranger payments.js "$STRANGER" 127.0.0.1:50071,127.0.0.1:50072 |
    tee "$OUT/shards-stranger.txt" || ok=0
  grep -q '^stranger: OK' "$OUT/shards-stranger.txt" || ok=0

  echo
  echo "=== shards: every payment, outbox_check per shard ==="
  demo --payment_addr=127.0.0.1:50071,127.0.0.1:50072 --accounting_addr=127.0.0.1:50073 --count=0 \
    --report_all --timeout=120s >"$OUT/shards-all.report" 2>&1 || ok=0
  tail -n 18 "$OUT/shards-all.report"
  local k checks=''
  for k in 0 1; do
    echo "--- outbox_check shard $k (payment_s${k}_data, accounting_shards_data, --payment_id_prefix=s$k-) ---"
    if outbox_check "payment_s${k}_data" accounting_shards_data --payment_id_prefix="s$k-" |
      tee "$OUT/shards-check-s$k.txt"; then checks+=" s$k OK"; else checks+=" s$k FAILED"; ok=0; fi
  done
  report_totals "$OUT/shards-all.report" || ok=0
  shards_summary="$REPORT_TOTALS; outbox_demo's by shard s0 $s0 / s1 $s1;"
  shards_summary+=" stranger: $(grep -o '[0-9]* first sent to a shard that does not own the key' "$OUT/shards-stranger.txt" || echo '?');"
  shards_summary+=" outbox_check$checks; healthy ${healthy_s}s after up"
  down
  current=''
  return $((1 - ok))
}

# --- pg ---
# pg_sql NODE DB SQL: psql as the superuser on the node's socket (trusted inside
# its container), unaligned, one row a line; through `docker exec` (its
# container's id looked up once), which starts in a fraction of
# docker-compose's time: the promotion and the polls below are timed.
declare -A pg_container=()
pg_sql() {
  [[ -n ${pg_container[$1]:-} ]] || pg_container[$1]=$(dc ps -q "$1")
  docker exec "${pg_container[$1]}" psql -X -q -At -v ON_ERROR_STOP=1 -h /var/run/postgresql -U postgres -d "$2" -c "$3"
}
# created_on PORT: outbox_payments_created_total on the /metrics at 127.0.0.1:PORT (0 if absent).
created_on() {
  curl -s "http://127.0.0.1:$1/metrics" |
    awk '!found && index($0, "outbox_payments_created_total ") == 1 { print $NF + 0; found = 1 } END { if (!found) print 0 }'
}
# pg_check: outbox_check in the image on the profile's network, on both
# databases by the URIs the services use, each role's passfile from its volume.
pg_check() {
  local hosts=pg-primary:5432,pg-standby:5432
  docker run --rm --network "${COMPOSE_PROJECT_NAME}_default" \
    -v "${COMPOSE_PROJECT_NAME}_pg_payment_passfile:/pgpass/payment:ro" \
    -v "${COMPOSE_PROJECT_NAME}_pg_accounting_passfile:/pgpass/accounting:ro" outbox-services:local outbox_check \
    --payment_db="postgresql://payment@$hosts/payments?target_session_attrs=read-write&passfile=/pgpass/payment/pgpass" \
    --accounting_db="postgresql://accounting@$hosts/accounting?target_session_attrs=read-write&passfile=/pgpass/accounting/pgpass"
}
ms_now() { date +%s%3N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b - a) / 1000 }'; }  # FROM_MS TO_MS
# failed_creates SERVICE...: "COUNT FIRST_MS LAST_MS" of the create_payment_failed
# lines in the services' logs (calls answered with an error; gRPC's retry policy
# and outbox_demo's --retry ask again with the same key).
failed_creates() {
  local s stamps
  stamps=$(for s in "$@"; do dc logs --no-color "$s" 2>/dev/null; done |
    grep -o '[0-9T:.-]*Z error create_payment_failed' | cut -d' ' -f1 | sort || true)
  if [[ -z $stamps ]]; then echo "0 0 0"; return; fi
  echo "$(wc -l <<<"$stamps") $(date -u -d "$(head -n 1 <<<"$stamps")" +%s%3N) $(date -u -d "$(tail -n 1 <<<"$stamps")" +%s%3N)"
}

run_pg() {
  PROFILE=pg current=pg
  pg_container=()
  local ok=1 services=(rabbitmq pg-primary pg-standby payment_pg_1 payment_pg_2 payment_pg accounting_pg recovery_pg)
  local addr=127.0.0.1:50081 acc=127.0.0.1:50082
  ports_free 5672 15672 50081 50082 50083 9181 9182
  echo "=== pg: up ==="
  up_healthy "payment_pg accounting_pg recovery_pg" "${services[@]}" || return 1
  local healthy_s=$HEALTHY_S version replication commit_mode
  version=$(pg_sql pg-primary postgres 'SHOW server_version' | tr -d '\r')
  replication=$(pg_sql pg-primary postgres "SELECT application_name || ' ' || state || ' ' || sync_state FROM pg_stat_replication" | tr -d '\r')
  commit_mode=$(pg_sql pg-primary postgres 'SHOW synchronous_commit' | tr -d '\r')
  say "pg: PostgreSQL $version; pg-primary's standbys (pg_stat_replication): ${replication:-none}; synchronous_commit $commit_mode;" \
    "pg-standby in recovery: $(pg_sql pg-standby postgres 'SELECT pg_is_in_recovery()' | tr -d '\r')"
  [[ $replication == "pg_standby streaming sync" && $commit_mode == remote_apply ]] ||
    { say "pg: pg-standby is not the primary's synchronous standby with remote_apply"; ok=0; }

  echo
  echo "=== pg: $PAYMENTS payments through $addr (outbox_demo), then the stranger ==="
  demo --payment_addr=$addr --accounting_addr=$acc --wait_healthy=60 --count="$PAYMENTS" --timeout=120s \
    --write_ids="$OUT/pg-healthy.ids" >"$OUT/pg-healthy.report" 2>&1 || ok=0
  tail -n 22 "$OUT/pg-healthy.report"
  reflection_check $addr $acc -- 127.0.0.1:50083 >"$OUT/pg-reflection.txt" 2>&1 || ok=0
  grep 'reflection_stranger:' "$OUT/pg-reflection.txt"
  STRANGER_RUN=pg-healthy stranger payments.js "$STRANGER" $addr | tee "$OUT/pg-stranger.txt" || ok=0
  grep -q '^stranger: OK' "$OUT/pg-stranger.txt" || ok=0
  local a0 b0
  a0=$(created_on 9181) b0=$(created_on 9182)
  say "pg: created by payment_pg_1 $a0, by payment_pg_2 $b0 (outbox_payments_created_total)"
  ((a0 > 0 && b0 > 0)) || { say "pg: a replica created nothing through $addr"; ok=0; }

  echo
  echo "=== pg: docker kill pg-primary under load (${LOAD}s, 4 threads), SELECT pg_promote() on pg-standby ==="
  demo --payment_addr=$addr --accounting_addr=$acc --duration="${LOAD}s" --concurrency=4 --retry --skip_checks \
    --timeout=180s --write_ids="$OUT/pg-load.ids" >"$OUT/pg-load.report" 2>&1 &
  local load_pid=$! load=0
  local load_start_ms kill_ms killed_ms promoted_ms='' load_end_ms primary
  load_start_ms=$(ms_now)
  sleep $((LOAD / 4))
  primary=$(dc ps -q pg-primary)
  kill_ms=$(ms_now)
  docker kill "$primary" >/dev/null || { say "pg: docker kill pg-primary failed"; ok=0; }
  killed_ms=$(ms_now)
  # pg_promote waits (60 s at most) until the standby has left recovery and takes writes.
  if [[ $(pg_sql pg-standby postgres 'SELECT pg_promote(true, 60)' | tr -d '\r') == t ]]; then
    promoted_ms=$(ms_now)
  else
    say "pg: pg_promote() on pg-standby failed"; ok=0
  fi
  say "pg: docker kill pg-primary at $(date -u -d "@${kill_ms:0:10}" +%H:%M:%S).${kill_ms:10} UTC, $(secs "$load_start_ms" "$kill_ms")s into the load," \
    "returned after $(secs "$kill_ms" "$killed_ms")s; pg_promote() returned $([[ -n $promoted_ms ]] && secs "$kill_ms" "$promoted_ms" || echo '?')s after the kill"
  # The rows written before the kill, polled on the new primary (every 0.2 s,
  # plus docker exec's own time) until none is left unSENT.
  local left drained_ms='' _
  for _ in $(seq 600); do
    [[ -n $promoted_ms ]] || break
    left=$(pg_sql pg-standby payments "SELECT count(*) FROM outbox WHERE status <> 'SENT' AND created_at <= $kill_ms" | tr -d '\r') || left=''
    if [[ $left == 0 ]]; then drained_ms=$(ms_now); break; fi
    sleep 0.2
  done
  say "pg: every row written before the kill SENT $([[ -n $drained_ms ]] && secs "$kill_ms" "$drained_ms" || echo 'NOT within 120')s after it (polled on pg-standby)"
  [[ -n $drained_ms ]] || ok=0
  wait "$load_pid" || load=$?
  load_end_ms=$(ms_now)  # outbox_demo exits once every row of its load is SENT
  tail -n 22 "$OUT/pg-load.report"
  ((load == 0)) || { say "pg: the load run failed (exit $load)"; ok=0; }
  local given_up retried longest create_s failed first_fail last_fail creates_failed
  given_up=$(sed -n 's/^create retries .*calls retried, \([0-9]*\) payments given up$/\1/p' "$OUT/pg-load.report")
  retried=$(sed -n 's/^create retries *\([0-9]*\) calls retried.*/\1/p' "$OUT/pg-load.report")
  longest=$(sed -n 's/^create latency .*max \([0-9.]*\) ms$/\1/p' "$OUT/pg-load.report")
  create_s=$(sed -n 's/^create phase *\([0-9.]*\) s .*/\1/p' "$OUT/pg-load.report")
  [[ $given_up == 0 ]] || { say "pg: creates given up: ${given_up:-?}"; ok=0; }
  read -r failed first_fail last_fail < <(failed_creates payment_pg_1 payment_pg_2)
  if ((failed > 0)); then
    creates_failed="$failed calls failed from $(secs "$kill_ms" "$first_fail")s to $(secs "$kill_ms" "$last_fail")s after the kill ($(secs "$first_fail" "$last_fail")s)"
  else
    creates_failed="no call failed"
  fi
  say "pg: creates: $creates_failed (create_payment_failed in the replicas' logs), each asked again with its key;" \
    "longest create ${longest:-?} ms, outbox_demo retried ${retried:-?} calls (the rest were the channel's retry policy's), gave up on ${given_up:-?}"
  local a1 b1
  a1=$(created_on 9181) b1=$(created_on 9182)
  say "pg: during the load payment_pg_1 created $((a1 - a0)), payment_pg_2 $((b1 - b0))"
  ((a1 > a0 && b1 > b0)) || { say "pg: a replica created nothing during the load"; ok=0; }
  say "pg: pg-primary after the kill: $(docker inspect -f '{{.State.Status}} (exit {{.State.ExitCode}}, restarts {{.RestartCount}})' "$primary");" \
    "the services' restarts: $(for s in payment_pg_1 payment_pg_2 accounting_pg recovery_pg; do
      printf '%s %s ' "$s" "$(docker inspect -f '{{.RestartCount}}' "$(dc ps -q "$s")")"; done)"
  local st_after=''
  if STRANGER_RUN=pg-after STRANGER_TIMEOUT_S=120 stranger payments.js 10 $addr | tee "$OUT/pg-stranger-after.txt" &&
    grep -q '^stranger: OK' "$OUT/pg-stranger-after.txt"; then st_after=yes; else ok=0; fi

  echo
  echo "=== pg: every payment (outbox_demo --report_all, with every id acknowledged), outbox_check ==="
  cat "$OUT/pg-healthy.ids" "$OUT/pg-load.ids" >"$OUT/pg-acked.ids"
  demo --payment_addr=$addr --accounting_addr=$acc --count=0 --report_all --expect_ids="$OUT/pg-acked.ids" \
    --timeout=120s >"$OUT/pg-all.report" 2>&1 || ok=0
  tail -n 20 "$OUT/pg-all.report"
  local check=OK
  pg_check | tee "$OUT/pg-check.txt" || { check=FAILED; ok=0; }
  report_totals "$OUT/pg-all.report" || ok=0
  # On the new primary: the rows against the payments acknowledged (outbox_demo's
  # ids files and the stranger's creates), the vouchers against both.
  local acked rows vouchers
  acked=$(($(wc -l <"$OUT/pg-acked.ids") + STRANGER + 10))
  rows=$(pg_sql pg-standby payments 'SELECT count(*) FROM outbox' | tr -d '\r')
  vouchers=$(pg_sql pg-standby accounting 'SELECT count(*) FROM vouchers' | tr -d '\r')
  say "pg: rows in outbox $rows, vouchers $vouchers, payments acknowledged $acked"
  [[ $rows == "$acked" && $vouchers == "$acked" ]] || { say "pg: rows or vouchers differ from the payments acknowledged"; ok=0; }
  local creates_until_s all_sent_s
  creates_until_s=$(awk -v a="$load_start_ms" -v k="$kill_ms" -v c="${create_s:-0}" 'BEGIN { printf "%.2f", (a + c * 1000 - k) / 1000 }')
  all_sent_s=$(secs "$kill_ms" "$load_end_ms")
  say "pg: every row of the load SENT ${all_sent_s}s after the kill (its creates went on ${creates_until_s}s after it)"
  pg_summary="$REPORT_TOTALS; PostgreSQL $version, healthy ${healthy_s}s after up;"
  pg_summary+=" created by payment_pg_1/_2: $a0/$b0 before the load, $((a1 - a0))/$((b1 - b0)) during it;"
  pg_summary+=" docker kill pg-primary: promoted $([[ -n $promoted_ms ]] && secs "$kill_ms" "$promoted_ms" || echo '?')s after;"
  pg_summary+=" creates: $creates_failed, longest ${longest:-?} ms, ${given_up:-?} given up;"
  pg_summary+=" rows written before the kill SENT $([[ -n $drained_ms ]] && secs "$kill_ms" "$drained_ms" || echo 'NO')s after it,"
  pg_summary+=" every row ${all_sent_s}s after it (creates until ${creates_until_s}s);"
  pg_summary+=" stranger's 10 after it SENT: ${st_after:-NO}; outbox_check $check"
  down
  current=''
  return $((1 - ok))
}

cluster_summary='' shards_summary='' pg_summary=''
for p in "${profiles[@]}"; do
  case $p in
    cluster) if run_cluster; then verdicts[$p]=OK; else verdicts[$p]=FAILED; fi ;;
    shards) if run_shards; then verdicts[$p]=OK; else verdicts[$p]=FAILED; fi ;;
    pg) if run_pg; then verdicts[$p]=OK; else verdicts[$p]=FAILED; fi ;;
  esac
  [[ -z $current ]] || { PROFILE=$current; down; current=''; }
  echo
done
echo "=== compose profiles report ==="
result=0
for p in "${profiles[@]}"; do
  summary_var=${p}_summary
  printf '%-10s %-7s %s\n' "$p" "${verdicts[$p]}" "${!summary_var}"
  [[ ${verdicts[$p]} == OK ]] || result=1
done
printf '%-10s %s\n' "RESULT" "$([[ $result == 0 ]] && echo OK || echo FAILED)"
exit "$result"
