# shellcheck shell=bash
# Container health for scripts/compose_demo.sh and scripts/compose_profiles.sh
# (sourced). The sourcing script defines dc, its docker-compose command line.

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
