# One private RabbitMQ node per test run, shared by every test that needs it.
set(OUTBOX_TEST_BROKER_DIR ${CMAKE_BINARY_DIR}/test_broker)
set(OUTBOX_NODE_SCRIPT ${PROJECT_SOURCE_DIR}/scripts/rabbitmq_node.sh)

add_test(NAME broker_start COMMAND bash ${OUTBOX_NODE_SCRIPT} fresh ${OUTBOX_TEST_BROKER_DIR})
set_tests_properties(broker_start PROPERTIES FIXTURES_SETUP broker LABELS "integration;e2e" TIMEOUT 180)
add_test(NAME broker_stop COMMAND bash ${OUTBOX_NODE_SCRIPT} stop ${OUTBOX_TEST_BROKER_DIR})
set_tests_properties(broker_stop PROPERTIES FIXTURES_CLEANUP broker LABELS "integration;e2e" TIMEOUT 120)

function(outbox_require_broker)
  foreach(test ${ARGN})
    set_property(TEST ${test} APPEND PROPERTY FIXTURES_REQUIRED broker)
    set_property(TEST ${test} APPEND PROPERTY ENVIRONMENT
      OUTBOX_TEST_BROKER_DIR=${OUTBOX_TEST_BROKER_DIR}
      OUTBOX_NODE_SCRIPT=${OUTBOX_NODE_SCRIPT})
  endforeach()
endfunction()
