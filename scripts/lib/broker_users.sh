# shellcheck shell=sh
# The services' broker users and their permissions (docs/security.md, broker
# users), for scripts/rabbitmq_node.sh and docker/rabbitmq/start.sh (sourced;
# POSIX sh). Queue names are regexes: OUTBOX_PAY_QUEUES, OUTBOX_ACC_QUEUES.
# A user may bind only queues it may feed, so binding opens no way in.
# Accounting shards (docs/deployment.md, Accounting shards): the shard queues
# "<pay>-<k>" must match OUTBOX_PAY_QUEUES too, and payment alone declares,
# feeds (exchange.bind) and binds the consistent-hash exchange
# "<pay queue>.hash" (a name that P and A do not match, so no other user
# may read, so bind to, it). Recovery declares nothing but the dead-letter
# queues' locks "<queue>.DLQ.lock" (exclusive queues of its connection,
# LockQueueOf in shared/outbox/transport.h), which it may not bind.

# shellcheck disable=SC2034  # read by the scripts that source this
BROKER_USERS="outbox-payment outbox-accounting outbox-recovery"

# broker_permissions USER: its configure, write and read regexes, one a line.
broker_permissions() {
  pay=${OUTBOX_PAY_QUEUES:?} acc=${OUTBOX_ACC_QUEUES:?}
  case $1 in
    outbox-payment)
      echo "^(outbox\\.payments(\\.dead-letters)?|($pay)\\.hash|$pay|$pay\\.DLQ)\$"
      echo "^(outbox\\.payments(\\.dead-letters)?|($pay)\\.hash|$pay|$pay\\.DLQ)\$"
      echo "^(outbox\\.payments(\\.dead-letters)?|($pay)\\.hash|$pay|$acc)\$" ;;
    outbox-accounting)
      echo "^(outbox\\.replies(\\.dead-letters)?|$acc|$acc\\.DLQ)\$"
      echo "^(outbox\\.replies(\\.dead-letters)?|$acc|$acc\\.DLQ)\$"
      echo "^(outbox\\.replies(\\.dead-letters)?|$acc|$pay)\$" ;;
    outbox-recovery)
      echo "^($pay|$acc)\\.DLQ\\.lock\$"
      echo '^outbox\.(payments|replies)$'
      echo "^($pay|$acc)\\.DLQ\$" ;;
    *) return 1 ;;
  esac
}
