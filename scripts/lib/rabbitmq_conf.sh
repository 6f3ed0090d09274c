# shellcheck shell=bash
# The lines every private test node's rabbitmq.conf shares, for
# scripts/rabbitmq_node.sh and scripts/lib/netlab.sh (sourced), and which
# RabbitMQ they run.

# The host's RabbitMQ package, or the one in the root file system named by
# OUTBOX_RABBITMQ_ROOT (another Debian release's; scripts/rabbitmq40.sh
# builds one and runs the tests against it): RMQ_BIN holds the commands,
# RMQ_LIB the server's files.
if [[ -n ${OUTBOX_RABBITMQ_ROOT:-} ]]; then
  RMQ_BIN=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/rabbitmq_root_bin
  RMQ_LIB=$OUTBOX_RABBITMQ_ROOT/usr/lib/rabbitmq
else
  RMQ_BIN=/usr/lib/rabbitmq/bin  # the /usr/sbin wrappers would switch to the rabbitmq user
  RMQ_LIB=/usr/lib/rabbitmq
fi

# deprecated_features_conf [cluster]: the deprecated features the tests deny,
# as rabbitmq.conf lines, if the installed server knows the setting (RabbitMQ
# 3.13 and later; 3.10 would refuse the unknown key and not boot). Denied, a
# use fails (declaring a transient non-exclusive queue closes the connection)
# where a permitted one only logs a warning, so a test notices before a
# RabbitMQ that removes the feature does.
# The nodes of a cluster (`cluster`) leave transient_nonexcl_queues
# permitted: RabbitMQ 4.0 refuses to start a node that has just joined a
# cluster denying it (failed_to_deny_deprecated_features), as it checks that
# no queue uses the feature before the node has a copy of the queue table.
# The single test node denies it, and every queue declared is durable.
deprecated_features_conf() {
  local schema features=(global_qos classic_queue_mirroring ram_node_type)
  [[ ${1:-} == cluster ]] || features=(transient_nonexcl_queues "${features[@]}")
  for schema in "$RMQ_LIB"/lib/rabbitmq_server-*/plugins/rabbit-*/priv/schema/rabbit.schema; do
    # shellcheck disable=SC2016  # the schema's own text, $name included
    grep -qF '"deprecated_features.permit.$name"' "$schema" 2>/dev/null || continue
    printf 'deprecated_features.permit.%s = false\n' "${features[@]}"
    return 0
  done
}
