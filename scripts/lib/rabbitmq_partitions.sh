# shellcheck shell=bash
# How a node of a 3-node RabbitMQ cluster handles a network partition; used
# by scripts/rabbitmq_cluster.sh and the network lab (scripts/lib/netlab.sh).
# docker/rabbitmq/partitions-rabbit-*.conf hold the same lines for the
# docker-compose cluster.
#
# A node pauses (stops its listeners and closes its clients' connections)
# while it can reach none of the other nodes: in a split only the side with
# two nodes keeps running, as pause_minority would, and its nodes are not
# restarted when the split ends; the paused node starts again and rejoins.
# autoheal alone restarts a losing side only after the split has ended, and
# when that side holds two of the three nodes the quorum queues stop
# confirming until they are back (several seconds after the network healed).
# A partition seen while every node runs, which pausing does not prevent
# (a node frozen by SIGSTOP past the tick time comes back still partitioned),
# is healed by autoheal, the `recover` setting.

# partition_handling SELF NODE...: the rabbitmq.conf lines for node SELF of
# the cluster of NODE... (full node names; SELF may be among them).
partition_handling() {
  local self=$1 n i=0
  echo 'cluster_partition_handling = pause_if_all_down'
  echo 'cluster_partition_handling.pause_if_all_down.recover = autoheal'
  for n in "${@:2}"; do
    [[ $n == "$self" ]] && continue
    i=$((i + 1))
    echo "cluster_partition_handling.pause_if_all_down.nodes.$i = $n"
  done
}
