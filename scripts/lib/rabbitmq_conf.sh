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

# deprecated_features_conf: the deprecated features the tests deny, as
# rabbitmq.conf lines, if the installed server knows the setting (RabbitMQ
# 3.13 and later; 3.10 would refuse the unknown key and not boot). Denied, a
# use fails (a client's declare is refused) where a permitted one only logs
# a warning, so a test notices before a RabbitMQ that removes the feature
# does. transient_nonexcl_queues stays permitted on every node: RabbitMQ
# 4.0.5 checks that no queue uses it while it boots, before its queue table
# is loaded on a node that has data (a restart) or has just joined a
# cluster, takes the missing table for a use, and refuses to start
# (failed_to_deny_deprecated_features), about one restart in two here.
# Instead the test node's stop at the end of a run fails if any queue is
# transient and not exclusive (rabbitmq_node.sh, OUTBOX_CHECK_QUEUES=1):
# every queue the services declare is durable.
deprecated_features_conf() {
  local schema features=(global_qos classic_queue_mirroring ram_node_type)
  for schema in "$RMQ_LIB"/lib/rabbitmq_server-*/plugins/rabbit-*/priv/schema/rabbit.schema; do
    # shellcheck disable=SC2016  # the schema's own text, $name included
    grep -qF '"deprecated_features.permit.$name"' "$schema" 2>/dev/null || continue
    printf 'deprecated_features.permit.%s = false\n' "${features[@]}"
    return 0
  done
}
