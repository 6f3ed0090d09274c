# shellcheck shell=bash
# Container health and secrets for scripts/compose_demo.sh and
# scripts/compose_profiles.sh (sourced). The sourcing script defines dc, its
# docker-compose command line, and die, and sources scripts/lib/services.sh
# (message_keys).

# container_secrets DIR: new gRPC TLS certificates (scripts/dev_certs.sh), API
# and ops tokens and the message signing key in DIR, every run. The containers
# run as uid 10001 (docker/Dockerfile), which must read the keys and tokens
# (mode 0600).
container_secrets() {
  local dir=$1
  rm -rf "$dir"
  bash scripts/dev_certs.sh "$dir" >/dev/null
  (umask 077 && head -c 32 /dev/urandom | base64 >"$dir/api.token" &&
    head -c 32 /dev/urandom | base64 >"$dir/ops.token")
  message_keys "$dir/message.keys"  # scripts/lib/services.sh
  chown -R 10001 "$dir" 2>/dev/null || sudo chown -R 10001 "$dir" ||
    die "cannot hand $dir to uid 10001 (the containers' user)"
}

# health NAME: the container's health status (starting, healthy, unhealthy), or its state, or "absent".
health() {
  local id
  id=$(dc ps -q "$1" 2>/dev/null)
  [[ -n $id ]] || { echo absent; return; }
  docker inspect -f '{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}' "$id"
}
# await_healthy SECONDS NAME...: polls until every NAME is healthy; returns 1 after SECONDS.
await_healthy() {
  local limit=$1 start=$SECONDS name all
  shift
  while :; do
    all=1
    for name in "$@"; do [[ $(health "$name") == healthy ]] || all=0; done
    ((all)) && return 0
    ((SECONDS - start < limit)) || return 1
    sleep 2
  done
}
