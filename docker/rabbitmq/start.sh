#!/bin/sh
# The rabbitmq container's command: the server, then the services' broker
# users (scripts/lib/broker_users.sh) with passwords from the environment,
# set at every start, so a changed password takes effect with a restart.
# /tmp/outbox-users-ready tells the healthcheck they are in place.
set -eu
# shellcheck disable=SC1091  # scripts/lib/broker_users.sh, mounted beside this script
. "$(dirname "$0")/broker_users.sh"
# PAY_QUEUE and its accounting shards PAY_QUEUE-<k> (docs/deployment.md, Accounting shards).
export OUTBOX_PAY_QUEUES="${OUTBOX_PAY_QUEUES:-${PAY_QUEUE:-PAY_QUEUE}(-[0-9]+)?}"
export OUTBOX_ACC_QUEUES="${OUTBOX_ACC_QUEUES:-${ACC_QUEUE:-ACC_QUEUE}}"
rm -f /tmp/outbox-users-ready

rabbitmq-server &
server=$!
trap 'rabbitmqctl stop >/dev/null 2>&1 || kill -TERM "$server"' TERM INT
rabbitmqctl -q wait --pid "$server" --timeout 120
rabbitmqctl -q await_startup

password_of() {
  case $1 in
    outbox-payment) printf '%s' "${PAYMENT_BROKER_PASSWORD:?}" ;;
    outbox-accounting) printf '%s' "${ACCOUNTING_BROKER_PASSWORD:?}" ;;
    outbox-recovery) printf '%s' "${RECOVERY_BROKER_PASSWORD:?}" ;;
  esac
}
for user in $BROKER_USERS; do
  # From stdin, so no password shows in ps. No option on these lines: the
  # rabbitmqctl of late 3.12 releases and of 4.0 reads stdin only when the
  # line is exactly `add_user USER` or `change_password USER`.
  password_of "$user" | rabbitmqctl add_user "$user" >/dev/null 2>&1 ||
    password_of "$user" | rabbitmqctl change_password "$user" >/dev/null
  perms=$(broker_permissions "$user")
  rabbitmqctl -q set_permissions -p / "$user" \
    "$(echo "$perms" | sed -n 1p)" "$(echo "$perms" | sed -n 2p)" "$(echo "$perms" | sed -n 3p)"
done
touch /tmp/outbox-users-ready
echo "outbox: broker users $BROKER_USERS ready"
# A trapped signal ends a wait early: wait until the server is really gone.
status=0
while kill -0 "$server" 2>/dev/null; do wait "$server" || status=$?; done
exit "$status"
