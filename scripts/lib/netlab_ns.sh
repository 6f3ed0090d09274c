#!/usr/bin/env bash
# The network lab's plumbing as commands, for scripts/netlab/lab.py (which
# runs the faults and judges them): namespaces, the bridge, veths, nft drops,
# the RabbitMQ cluster's nodes and the services started in their
# namespaces. Each call does one thing and exits; the functions are
# scripts/lib/netlab.sh's. The caller sets LAB_PREFIX (oblab-<its pid>),
# WORK (its temp dir) and BIN (the binaries); METADATA and
# PARTITION_HANDLING for start-cluster, LEASE_TTL for start-service, STORE
# (sqlite or postgres: with postgres the hosts pg1 and pg2 too) and
# PG_OPTIONS for the network and the services.
#
#   netlab_ns.sh network             namespaces, bridge, every host, all ping
#   netlab_ns.sh start-cluster       the three nodes, joined, whole, users
#   netlab_ns.sh restart-broker B    stop node B's VM (by pid if need be) and start it
#   netlab_ns.sh rmq B SECS ARGS...  rabbitmqctl against node B from its namespace
#   netlab_ns.sh broker-version      the RabbitMQ release the nodes run
#   netlab_ns.sh cut HOST PEER...    drop HOST <-> each PEER, both ways
#   netlab_ns.sh deafen HOST PEER... drop what HOST receives from each PEER
#   netlab_ns.sh heal-all            remove every host's drops
#   netlab_ns.sh in-host HOST CMD... exec CMD in HOST's namespace (its pid is CMD's)
#   netlab_ns.sh start-service INST [SKEW]
#                                    exec the service INST (pay, acc, rec1, rec2)
#                                    in its namespace with its settings; SKEW
#                                    (+30s, -30s) shifts a recovery's wall clock
#   netlab_ns.sh start-pg            PostgreSQL: the primary in pg1, its synchronous standby in pg2
#   netlab_ns.sh stop-pg             stop both servers
#   netlab_ns.sh pg-sql DB SQL       SQL on the primary over its socket (psql -At)
#   netlab_ns.sh netem-present       exit 0 if the kernel has netem
#   netlab_ns.sh remove-lab          stop every process in LAB_PREFIX-*, delete them
#   netlab_ns.sh clean-stale         remove setups whose owner is gone
#   netlab_ns.sh ip HOST             the host's address
set -Eeuo pipefail
SCRIPT=netlab
: "${LAB_PREFIX:?LAB_PREFIX (oblab-<owner pid>) is not set}"
WORK=${WORK:-}
BIN=${BIN:-}
METADATA=${METADATA:-mnesia}
PARTITION_HANDLING=${PARTITION_HANDLING:-autoheal}
LEASE_TTL=${LEASE_TTL:-10}
# shellcheck source=scripts/lib/netlab.sh
source "$(dirname "${BASH_SOURCE[0]}")/netlab.sh"

cmd=${1:-}
(($#)) && shift
case $cmd in
  network)
    require_namespaces
    make_network
    ping_all || die "the simulated hosts cannot reach each other"
    ;;
  start-cluster) start_cluster ;;
  restart-broker) restart_broker "$1" ;;
  rmq) rmq "$@" ;;
  broker-version) broker_version ;;
  cut) cut_host "$@" ;;
  deafen) deafen_host "$@" ;;
  heal-all) heal_all ;;
  in-host)
    host=$1
    shift
    exec ip netns exec "$(ns_of "$host")" "$@"
    ;;
  start-service) exec_service "$@" ;;
  start-pg) start_pg ;;
  stop-pg) stop_pg ;;
  pg-sql) pg_sql "$@" ;;
  netem-present) netem_present ;;
  remove-lab) remove_lab "$LAB_PREFIX" ;;
  clean-stale) clean_stale ;;
  ip) ip_of "$1" ;;
  *) sed -n '2,/^set -E/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac
