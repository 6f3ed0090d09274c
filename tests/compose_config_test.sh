#!/usr/bin/env bash
# Checks docker-compose.yml: valid with the four broker passwords set, rejected
# without any one of them (no default password), each service on its own
# broker user, the `cluster` profile's nodes and URL list, no guest account
# anywhere, gRPC TLS and tokens on in every service (certificates mounted
# read-only), the `shards` profile's payment shards and reply queues, every
# published port on loopback only, the brokers on RabbitMQ 4.0 with its
# deprecated features denied (conf.d), the images' Debian release from DEBIAN_RELEASE
# (12 unless set), the console on recovery_service's ops API over TLS,
# serving HTTPS, no host port published twice, and the `pg` profile: a
# primary and its synchronous standby (remote_apply) on the PostgreSQL of
# DEBIAN_RELEASE's Debian, the services on both hosts with
# target_session_attrs=read-write and a read-only passfile, no password in
# a URI or in the file, two payment replicas behind the one proxy address.
#   bash tests/compose_config_test.sh [path/to/docker-compose.yml]
set -euo pipefail
file=${1:-$(cd "$(dirname "$0")/.." && pwd)/docker-compose.yml}
command -v docker-compose >/dev/null || { echo "FAIL: docker-compose not installed" >&2; exit 1; }
# An empty env file, so a developer's .env beside the compose file cannot hide a missing password.
no_env=$(mktemp)
trap 'rm -f "$no_env"' EXIT

passwords=(RABBITMQ_PASSWORD PAYMENT_BROKER_PASSWORD ACCOUNTING_BROKER_PASSWORD RECOVERY_BROKER_PASSWORD)
all=()
for p in "${passwords[@]}"; do all+=("$p=test-only-$p"); done
config=$(env "${all[@]}" docker-compose --env-file "$no_env" -f "$file" config) \
  || { echo "FAIL: docker-compose config rejects $file" >&2; exit 1; }
for p in "${passwords[@]}"; do
  if env "${all[@]}" -u "$p" docker-compose --env-file "$no_env" -f "$file" config -q 2>/dev/null; then
    echo "FAIL: $file is accepted without $p" >&2; exit 1
  fi
done
# Each service logs in as its own broker user, with its own password.
for s in payment accounting recovery; do
  upper=$(tr '[:lower:]' '[:upper:]' <<<"$s")
  grep -q "AMQP_URL: amqp://outbox-$s:test-only-${upper}_BROKER_PASSWORD@rabbitmq" <<<"$config" \
    || { echo "FAIL: ${s}_service does not use broker user outbox-$s" >&2; exit 1; }
done
if grep -q 'amqp://outbox:' <<<"$config"; then
  echo "FAIL: a service uses the admin broker user" >&2; exit 1
fi
# Profile `cluster`: three nodes, and services that list all three with quorum queues.
cluster=$(env "${all[@]}" RABBITMQ_ERLANG_COOKIE=test-cookie \
  docker-compose --env-file "$no_env" -f "$file" --profile cluster config) \
  || { echo "FAIL: docker-compose --profile cluster config rejects $file" >&2; exit 1; }
for node in rabbit-1 rabbit-2 rabbit-3; do
  grep -q "hostname: $node" <<<"$cluster" || { echo "FAIL: profile cluster has no $node" >&2; exit 1; }
done
urls=$(grep -cE 'AMQP_URL: amqp://outbox-(payment|accounting|recovery):test-only-[A-Z]+_BROKER_PASSWORD@rabbit-1:5672,rabbit-2:5672,rabbit-3:5672/%2F' <<<"$cluster")
quorum=$(grep -c 'QUEUE_TYPE: quorum' <<<"$cluster")
[[ $urls == 3 && $quorum == 3 ]] \
  || { echo "FAIL: profile cluster: $urls of 3 services list the nodes, $quorum use quorum queues" >&2; exit 1; }
if grep -qi guest "$file"; then
  echo "FAIL: $file mentions guest" >&2; exit 1
fi
# gRPC TLS, tokens and the message key in every service of every profile,
# read from the resolved config as JSON: Compose 2 (Debian 13) prints it and
# shows every profile's services with --profile '*'; Compose 1 (Debian 12)
# shows them all anyway, answers --format json with its usage (and status 0),
# and, a Python program, has PyYAML beside it to convert its YAML.
is_config() { [[ -n $1 ]] && jq -e '.services | type == "object"' >/dev/null 2>&1 <<<"$1"; }
# resolve [VAR=VALUE...]: the resolved config of every profile as JSON, with
# the passwords (and VAR=VALUE) in the environment.
resolve() {
  local json
  json=$(env "${all[@]}" RABBITMQ_ERLANG_COOKIE=test-cookie "$@" \
    docker-compose --env-file "$no_env" -f "$file" --profile '*' config --format json 2>/dev/null) || json=
  if ! is_config "$json"; then
    json=$(env "${all[@]}" RABBITMQ_ERLANG_COOKIE=test-cookie "$@" \
      docker-compose --env-file "$no_env" -f "$file" --profile '*' config |
      /usr/bin/python3 -c 'import json, sys, yaml; json.dump(yaml.safe_load(sys.stdin), sys.stdout)') || json=
  fi
  is_config "$json" || { echo "FAIL: cannot read the resolved config of $file as JSON" >&2; exit 1; }
  printf '%s' "$json"
}
resolved=$(resolve)
# q JQ [JSON]: the answer of jq -r over the resolved config (or JSON).
# `ours` is each of our services as {name, binary, env, certs}, certs being
# its volume at /certs as {source, read_only}; `mounts` a service's volumes
# as {source, target, read_only} (Compose 1 writes them as SRC:DST:MODE
# strings), `ports` its published ports as {host_ip, published, target}
# (Compose 1 writes IP:PUBLISHED:TARGET/PROTOCOL strings).
# The definitions sit in a heredoc: jq's own words stay out of the shell's.
JQ_DEFS=$(cat <<'JQ'
def mounts: [(.volumes // [])[]
  | if type == "string" then split(":") | {source: .[0], target: .[1], read_only: (.[2] == "ro")}
    else {source, target, read_only: (.read_only // false)} end];
def ports: [(.ports // [])[]
  | if type == "string" then (split("/")[0] | split(":")) as $p
      | {host_ip: (if ($p | length) == 3 then $p[0] else "" end),
         published: (if ($p | length) >= 2 then $p[-2] else "" end), target: $p[-1]}
    else {host_ip: (.host_ip // ""), published: (.published // "" | tostring), target: (.target | tostring)} end];
def ours: .services | to_entries[]
| select((.value.command // [])[0] | IN("payment_service", "accounting_service", "recovery_service"))
| {name: .key, binary: .value.command[0], env: (.value.environment // {}),
   certs: (.value | mounts | map(select(.target == "/certs")) | first)};
JQ
)
q() {
  jq -r "$JQ_DEFS
$1" <<<"${2:-$resolved}"
}
# Every service the file defines is in it (their names from the file itself),
# and ours are among them.
want=$(awk '/^services:/ { on = 1; next } /^[^ #]/ { on = 0 } on && /^  [A-Za-z0-9_.-]+:/ { sub(/^  /, ""); sub(/:.*/, ""); print }' "$file" | sort | tr '\n' ' ')
got=$(q '.services | keys[]' | sort | tr '\n' ' ')
[[ $got == "$want" ]] || { echo "FAIL: the resolved config has services $got, the file $want" >&2; exit 1; }
[[ $(q '[ours] | length') -gt 0 ]] || { echo "FAIL: no service runs payment_service, accounting_service or recovery_service" >&2; exit 1; }
# check WHAT JQ: every service passes the jq test (on one of `ours`), else name those that do not.
check() {
  local bad
  bad=$(q "[ours | select(($2) | not) | .name] | join(\" \")")
  [[ -z $bad ]] || { echo "FAIL: $1: not in $bad" >&2; exit 1; }
}
check "gRPC TLS" '.env.TLS_CERT_FILE == "/certs/server.pem" and .env.TLS_KEY_FILE == "/certs/server.key" and .env.TLS_CA_FILE == "/certs/ca.pem"'
check "certificates mounted read-only" '.certs != null and (.certs.source | endswith("/certs/compose")) and .certs.read_only == true'
check "the message key" '.env.MESSAGE_KEYS_FILE == "/certs/message.keys"'
check "the API token (payment, accounting)" '.binary == "recovery_service" or .env.API_TOKEN_FILE == "/certs/api.token"'
check "the ops token (recovery)" '.binary != "recovery_service" or .env.OPS_TOKEN_FILE == "/certs/ops.token"'
# Profile `shards`: two payment shards that know each other, each with its
# own reply queue (its recovery's too), declared by their accounting.
for k in 0 1; do
  [[ $(q ".services.payment_s$k.environment.PAYMENT_SHARDS") == 127.0.0.1:50071,127.0.0.1:50072 ]] ||
    { echo "FAIL: payment_s$k does not list both payment shards" >&2; exit 1; }
  for s in payment recovery; do
    [[ $(q ".services.${s}_s$k.environment.ACC_QUEUE") == "shards.ACC_QUEUE.s$k" ]] ||
      { echo "FAIL: ${s}_s$k does not use reply queue shards.ACC_QUEUE.s$k" >&2; exit 1; }
  done
done
[[ $(q '.services.accounting_shards.environment.REPLY_QUEUES') == shards.ACC_QUEUE.s0,shards.ACC_QUEUE.s1 ]] ||
  { echo "FAIL: accounting_shards does not declare both reply queues" >&2; exit 1; }
# Every published port of every profile on loopback only.
bad=$(q '[.services | to_entries[] | select(.value | ports | any(.host_ip != "127.0.0.1")) | .key] | join(" ")')
[[ -z $bad ]] || { echo "FAIL: published beyond 127.0.0.1: $bad" >&2; exit 1; }
# Every broker (the default one and the cluster's) is RabbitMQ 4.0 and denies
# the deprecated features its conf.d files (read here) name: global QoS,
# classic queue mirroring and RAM nodes everywhere, and transient
# non-exclusive queues on the single broker (a 4.0 node joining a cluster
# that denies them refuses to start).
brokers=$(q '[.services | to_entries[] | select(.value.image // "" | startswith("rabbitmq:")) | .key] | join(" ")')
[[ $brokers == "rabbit-1 rabbit-2 rabbit-3 rabbitmq" ]] || { echo "FAIL: brokers are '$brokers'" >&2; exit 1; }
for broker in $brokers; do
  [[ $(q ".services[\"$broker\"].image") == rabbitmq:4.0-management ]] ||
    { echo "FAIL: $broker is not rabbitmq:4.0-management" >&2; exit 1; }
  denied=$(q ".services[\"$broker\"] | mounts[] | select(.target | test(\"^/etc/rabbitmq/conf.d/[^/]+[.]conf$\")) | .source" |
    while read -r conf; do
      [[ -r $conf ]] || { echo "FAIL: $broker mounts $conf, which is not there" >&2; echo MISSING; }
      sed -n 's/^deprecated_features[.]permit[.]\([a-z_]*\) *= *false *$/\1/p' "$conf" 2>/dev/null
    done | sort | tr '\n' ' ')
  want="classic_queue_mirroring global_qos ram_node_type "
  [[ $broker == rabbitmq ]] && want="classic_queue_mirroring global_qos ram_node_type transient_nonexcl_queues "
  [[ $denied == "$want" ]] || { echo "FAIL: $broker denies '$denied', not '$want'" >&2; exit 1; }
done
# Every image built here is on Debian 12, or on DEBIAN_RELEASE's.
builds='[.services | to_entries[] | select(.value.build) | "\(.key)=\(.value.build.args.DEBIAN_RELEASE // "unset")"] | unique | join(" ")'
for release in 12 13; do
  if [[ $release == 12 ]]; then json=$resolved; else json=$(resolve DEBIAN_RELEASE=13); fi
  bad=$(q "[$builds | split(\" \")[] | select(endswith(\"=$release\") | not)] | join(\" \")" "$json")
  [[ -z $bad ]] || { echo "FAIL: not built on Debian $release: $bad" >&2; exit 1; }
done
# The console: its own image, TLS to recovery_service's ops port (the name it
# dials is recovery_service's, or an alias a certificate can carry: no "_"),
# HTTPS to the browser with the compose certificates, published on loopback.
console=$(q '.services.console // empty | @json')
[[ -n $console ]] || { echo "FAIL: no console service" >&2; exit 1; }
cq() { q "$1" "$console"; }
[[ $(cq '.build.dockerfile') == docker/console.Dockerfile ]] || { echo "FAIL: console: not built from docker/console.Dockerfile" >&2; exit 1; }
[[ $(cq '.environment.CONSOLE_TLS_CERT + " " + .environment.CONSOLE_TLS_KEY') == "/certs/server.pem /certs/server.key" ]] ||
  { echo "FAIL: console: does not serve HTTPS with /certs/server.pem" >&2; exit 1; }
[[ $(cq '.environment.CONSOLE_OPS_CA') == /certs/ca.pem ]] || { echo "FAIL: console: ops API not over TLS with /certs/ca.pem" >&2; exit 1; }
[[ $(cq 'mounts | map(select(.target == "/certs")) | first | "\(.source | endswith("/certs/compose")) \(.read_only)"') == "true true" ]] ||
  { echo "FAIL: console: certs/compose not mounted read-only at /certs" >&2; exit 1; }
recovery_port=$(q '.services.recovery_service.environment.RECOVERY_LISTEN | split(":")[-1]')
recovery_names=" recovery_service $(q '.services.recovery_service.networks.default.aliases // [] | join(" ")') "
read -ra specs <<<"$(cq '.environment.CONSOLE_OPS')"
[[ ${#specs[@]} -gt 0 ]] || { echo "FAIL: console: no CONSOLE_OPS" >&2; exit 1; }
for spec in "${specs[@]}"; do
  addr=${spec#*=}
  [[ $recovery_names == *" ${addr%:*} "* && ${addr##*:} == "$recovery_port" && ${addr%:*} != *_* ]] ||
    { echo "FAIL: console: $spec is not recovery_service's ops port by a name its certificate can carry" >&2; exit 1; }
done
listen_port=$(cq '.environment.CONSOLE_LISTEN | split(":")[-1]')
[[ $(cq "[ports[] | select(.target == \"$listen_port\")] | length") == 1 ]] ||
  { echo "FAIL: console: its port $listen_port is not published" >&2; exit 1; }
# No host port is published twice, whichever profiles run together.
dups=$(q '[.services | to_entries[] | .value | ports[] | "\(.host_ip):\(.published)"] | group_by(.) | map(select(length > 1) | .[0]) | join(" ")')
[[ -z $dups ]] || { echo "FAIL: published by more than one service: $dups" >&2; exit 1; }

# Profile `pg`: the services on PostgreSQL.
pg_fail() { echo "FAIL: profile pg: $*" >&2; exit 1; }
pg_dir=$(dirname "$file")/docker/postgres
# Its passwords come from the environment only: with them set the
# containers get them, without them nothing (the file holds no default).
pg_pw=(POSTGRES_PASSWORD=test-only-pg PAYMENT_DB_PASSWORD=test-only-pay ACCOUNTING_DB_PASSWORD=test-only-acc)
with_pw=$(resolve "${pg_pw[@]}")
[[ $(q '.services["pg-primary"].environment | "\(.POSTGRES_PASSWORD) \(.PAYMENT_DB_PASSWORD) \(.ACCOUNTING_DB_PASSWORD)"' "$with_pw") == "test-only-pg test-only-pay test-only-acc" &&
  $(q '.services["pg-standby"].environment.POSTGRES_PASSWORD' "$with_pw") == test-only-pg &&
  $(q '.services["pg-passfiles"].environment | "\(.PAYMENT_DB_PASSWORD) \(.ACCOUNTING_DB_PASSWORD)"' "$with_pw") == "test-only-pay test-only-acc" ]] ||
  pg_fail "the PostgreSQL passwords do not reach pg-primary, pg-standby and pg-passfiles from the environment"
bad=$(q '[.services | to_entries[] | select(.value.profiles // [] | index("pg")) | .value.environment // {} | to_entries[]
  | select(.key | test("PASSWORD")) | select(.value != "") | .key] | unique | join(" ")')
[[ -z $bad ]] || pg_fail "a default for $bad"
if grep -q 'test-only-pay\|test-only-acc\|test-only-pg' <<<"$(q '[.services[] | .environment // {} | to_entries[] | select(.key | test("PASSWORD") | not) | .value] | join(" ")' "$with_pw")"; then
  pg_fail "a PostgreSQL password is in a setting other than a password's"
fi
# The primary and its synchronous standby.
pcmd=$(q '.services["pg-primary"].command | join(" ")')
scmd=$(q '.services["pg-standby"].command | join(" ")')
standby_name=$(sed -n 's/.*-c cluster_name=\([a-z_0-9]*\).*/\1/p' <<<"$scmd")
[[ -n $standby_name && $pcmd == postgres\ * && $pcmd == *"-c synchronous_standby_names=FIRST 1 ($standby_name)"* &&
  $pcmd == *"-c synchronous_commit=remote_apply"* && $pcmd == *"-c wal_level=replica"* ]] ||
  pg_fail "pg-primary does not wait for pg-standby ($standby_name) with remote_apply: $pcmd"
[[ $scmd == "bash /etc/outbox/standby.sh "* && $scmd != *synchronous_standby_names* ]] ||
  pg_fail "pg-standby is not started by standby.sh, or would wait for a standby once promoted: $scmd"
[[ $(q '.services["pg-standby"] | mounts[] | select(.target == "/etc/outbox/standby.sh") | "\(.source | endswith("/docker/postgres/standby.sh")) \(.read_only)"') == "true true" &&
  $(q '.services["pg-standby"].environment.PRIMARY_HOST') == pg-primary ]] ||
  pg_fail "pg-standby does not run docker/postgres/standby.sh (read-only) against pg-primary"
grep -q 'pg_basebackup .*-R ' "$pg_dir/standby.sh" || pg_fail "standby.sh makes no pg_basebackup -R"
[[ $(q '.services["pg-primary"] | mounts[] | select(.target | startswith("/docker-entrypoint-initdb.d/")) | .source | endswith("/docker/postgres/init-outbox.sh")') == true ]] ||
  pg_fail "pg-primary does not run docker/postgres/init-outbox.sh at its first start"
# The PostgreSQL of DEBIAN_RELEASE's Debian: 15 on 12, 17 on 13.
for node in pg-primary pg-standby pg-passfiles; do
  [[ $(q ".services[\"$node\"].build.context | endswith(\"/docker/postgres\")") == true ]] || pg_fail "$node is not built from docker/postgres"
done
for pair in 12:15 13:17; do
  grep -qx "FROM postgres:${pair#*:} AS debian-${pair%:*}" "$pg_dir/Dockerfile" ||
    pg_fail "docker/postgres/Dockerfile does not take postgres:${pair#*:} on Debian ${pair%:*}"
done
grep -qx 'FROM debian-${DEBIAN_RELEASE}' "$pg_dir/Dockerfile" || pg_fail "docker/postgres/Dockerfile does not follow DEBIAN_RELEASE"
# Every service of ours in the profile: both hosts, the read-write one, no
# password in the URI, the passfile from a read-only volume that
# pg-passfiles writes, pg's own queues.
pg_ours=$(q '[ours | select(.env.PAYMENT_DB // .env.ACCOUNTING_DB // "" | startswith("postgresql://")) | .name] | join(" ")')
[[ -n $pg_ours ]] || pg_fail "no service on postgresql://"
for s in $pg_ours; do
  svc=$(q ".services[\"$s\"] | @json")
  url=$(q '.environment.PAYMENT_DB // .environment.ACCOUNTING_DB' "$svc")
  [[ $url =~ ^postgresql://(payment|accounting)@pg-primary:5432,pg-standby:5432/(payments|accounting)\?target_session_attrs=read-write$ ]] ||
    pg_fail "$s: $url is not both hosts with target_session_attrs=read-write, without a password"
  [[ $(q '.profiles // [] | index("pg") != null' "$svc") == true ]] || pg_fail "$s is not in profile pg only"
  pass=$(q '.environment.PGPASSFILE // ""' "$svc")
  vol=$(q "mounts[] | select(.target == \"${pass%/*}\") | select(.read_only) | .source" "$svc")
  [[ -n $pass && -n $vol && $(q ".services[\"pg-passfiles\"] | [mounts[] | select(.source == \"$vol\")] | length") == 1 ]] ||
    pg_fail "$s: PGPASSFILE ($pass) is not in a read-only volume that pg-passfiles writes"
  [[ $(q '"\(.environment.PAY_QUEUE) \(.environment.ACC_QUEUE)"' "$svc") == "pg.PAY_QUEUE pg.ACC_QUEUE" ]] ||
    pg_fail "$s does not use the queues pg.PAY_QUEUE and pg.ACC_QUEUE"
done
for queue in pg.PAY_QUEUE:OUTBOX_PAY_QUEUES pg.ACC_QUEUE:OUTBOX_ACC_QUEUES; do
  grep -qE "^($(q ".services.rabbitmq.environment.${queue#*:}"))\$" <<<"${queue%%:*}" ||
    pg_fail "the broker's ${queue#*:} does not let the services use ${queue%%:*}"
done
# Two payment replicas, reached at one address: the proxy's servers are
# exactly them, and no replica publishes its gRPC port.
replicas=$(q '[ours | select(.binary == "payment_service" and (.env.PAYMENT_DB // "" | startswith("postgresql://"))) | .name] | sort | join(" ")')
servers=$(awk '$1 == "server" { sub(/:.*/, "", $3); print $3 }' "$(dirname "$file")/docker/haproxy/haproxy.cfg" | sort | tr '\n' ' ')
[[ $replicas == "payment_pg_1 payment_pg_2" && $servers == "payment_pg_1 payment_pg_2 " ]] ||
  pg_fail "the payment replicas are '$replicas', the proxy's servers '$servers'"
for r in $replicas; do
  [[ $(q ".services[\"$r\"] | [ports[] | select(.target == \"50051\")] | length") == 0 ]] ||
    pg_fail "$r publishes its gRPC port: clients reach the replicas through payment_pg only"
done
[[ $(q '.services.payment_pg | [ports[] | "\(.host_ip):\(.published)->\(.target)"] | join(" ")') == "127.0.0.1:50081->50051" &&
  $(q '.services.payment_pg.build.context | endswith("/docker/haproxy")') == true ]] ||
  pg_fail "payment_pg is not the proxy (docker/haproxy) on 127.0.0.1:50081"
echo "PASS: $file"
