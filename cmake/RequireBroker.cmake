# Where the run's RabbitMQ node lives (cmake/BrokerFixture.cmake starts and
# stops it), and outbox_require_broker for the tests that need it. The
# top-level CMakeLists.txt includes this before any directory adds a test, so
# every directory can call it.
set(OUTBOX_TEST_BROKER_DIR ${CMAKE_BINARY_DIR}/test_broker)
set(OUTBOX_TEST_BROKER_TLS_DIR ${CMAKE_BINARY_DIR}/test_broker_tls)
set(OUTBOX_NODE_SCRIPT ${PROJECT_SOURCE_DIR}/scripts/rabbitmq_node.sh)

# outbox_require_broker(<test>...): each test needs the node and learns where
# it lives and how to stop/start it (only restart tests should).
function(outbox_require_broker)
  foreach(test IN LISTS ARGN)
    set_property(TEST ${test} APPEND PROPERTY FIXTURES_REQUIRED broker)
    set_property(TEST ${test} APPEND PROPERTY ENVIRONMENT
      OUTBOX_TEST_BROKER_DIR=${OUTBOX_TEST_BROKER_DIR}
      OUTBOX_NODE_SCRIPT=${OUTBOX_NODE_SCRIPT})
  endforeach()
endfunction()
