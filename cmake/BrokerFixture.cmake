# One private RabbitMQ node per ctest run, shared by every test that needs it
# (start-up costs 12-16 s, so never one per test). Tests keep apart by queue
# name or vhost and find the node through $OUTBOX_TEST_BROKER_DIR/broker.env.
# The node has a TLS listener as well, with certificates that dev_certs.sh
# makes anew for each run (CA, server and client, in OUTBOX_TEST_BROKER_TLS_DIR).
# Its directories and outbox_require_broker are RequireBroker.cmake's.
include(${CMAKE_CURRENT_LIST_DIR}/RequireBroker.cmake)

# "fresh" stops a node that a killed earlier run left behind, wipes it, starts anew.
add_test(NAME broker_start
  COMMAND bash -c [[bash "$0" "$1" >/dev/null && AMQP_TLS_DIR="$1" exec bash "$2" fresh "$3"]]
          ${PROJECT_SOURCE_DIR}/scripts/dev_certs.sh ${OUTBOX_TEST_BROKER_TLS_DIR}
          ${OUTBOX_NODE_SCRIPT} ${OUTBOX_TEST_BROKER_DIR})
set_tests_properties(broker_start PROPERTIES
  FIXTURES_SETUP broker LABELS "integration;e2e" TIMEOUT 180)
# It fails if the run declared a transient non-exclusive queue (a feature
# RabbitMQ 4.0 deprecates; scripts/lib/rabbitmq_conf.sh says why the node
# cannot deny it).
add_test(NAME broker_stop COMMAND env OUTBOX_CHECK_QUEUES=1 bash ${OUTBOX_NODE_SCRIPT} stop ${OUTBOX_TEST_BROKER_DIR})
set_tests_properties(broker_stop PROPERTIES
  FIXTURES_CLEANUP broker LABELS "integration;e2e" TIMEOUT 120)
