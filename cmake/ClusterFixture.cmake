# A private 3-node RabbitMQ cluster for the tests that need one (e2e.cluster),
# started once per ctest run like the single node of BrokerFixture.cmake.
# Tests find it through $OUTBOX_TEST_CLUSTER_DIR (amqp_urls, nodes) and drive
# it (kill, restart, leader) with $OUTBOX_CLUSTER_SCRIPT.
set(OUTBOX_TEST_CLUSTER_DIR ${CMAKE_BINARY_DIR}/test_cluster)
set(OUTBOX_CLUSTER_SCRIPT ${PROJECT_SOURCE_DIR}/scripts/rabbitmq_cluster.sh)

# "fresh" stops a cluster that a killed earlier run left behind, wipes it, starts anew.
add_test(NAME cluster_start COMMAND bash ${OUTBOX_CLUSTER_SCRIPT} fresh ${OUTBOX_TEST_CLUSTER_DIR})
set_tests_properties(cluster_start PROPERTIES FIXTURES_SETUP cluster LABELS e2e TIMEOUT 400)
add_test(NAME cluster_stop COMMAND bash ${OUTBOX_CLUSTER_SCRIPT} stop ${OUTBOX_TEST_CLUSTER_DIR})
set_tests_properties(cluster_stop PROPERTIES FIXTURES_CLEANUP cluster LABELS e2e TIMEOUT 120)

function(outbox_require_cluster)
  foreach(test IN LISTS ARGN)
    set_property(TEST ${test} APPEND PROPERTY FIXTURES_REQUIRED cluster)
    set_property(TEST ${test} APPEND PROPERTY ENVIRONMENT
      OUTBOX_TEST_CLUSTER_DIR=${OUTBOX_TEST_CLUSTER_DIR}
      OUTBOX_CLUSTER_SCRIPT=${OUTBOX_CLUSTER_SCRIPT})
  endforeach()
endfunction()
