# One private PostgreSQL server per ctest run (scripts/postgres_node.sh), for
# the e2e tests' PostgreSQL variants, started once like the broker of
# BrokerFixture.cmake. Each test's services create databases of their own on
# it (tests/support/services.h); the directory is wiped by the next run's
# "fresh". Tests find the server through $OUTBOX_TEST_PG_DIR (node.env,
# pgpass) and the script through $OUTBOX_PG_NODE_SCRIPT.
set(OUTBOX_TEST_PG_DIR ${CMAKE_BINARY_DIR}/test_postgres)
set(OUTBOX_PG_NODE_SCRIPT ${PROJECT_SOURCE_DIR}/scripts/postgres_node.sh)

# "fresh" stops a server that a killed earlier run left behind, wipes it, starts anew.
add_test(NAME postgres_start COMMAND bash ${OUTBOX_PG_NODE_SCRIPT} fresh ${OUTBOX_TEST_PG_DIR})
set_tests_properties(postgres_start PROPERTIES
  FIXTURES_SETUP postgres_server LABELS "e2e;postgres" TIMEOUT 120)
add_test(NAME postgres_stop COMMAND bash ${OUTBOX_PG_NODE_SCRIPT} stop ${OUTBOX_TEST_PG_DIR})
set_tests_properties(postgres_stop PROPERTIES
  FIXTURES_CLEANUP postgres_server LABELS "e2e;postgres" TIMEOUT 120)

# outbox_require_postgres(<test>...): each test needs the server and runs its
# services on PostgreSQL (OUTBOX_E2E_STORE=postgres).
function(outbox_require_postgres)
  foreach(test IN LISTS ARGN)
    set_property(TEST ${test} APPEND PROPERTY FIXTURES_REQUIRED postgres_server)
    set_property(TEST ${test} APPEND PROPERTY ENVIRONMENT
      OUTBOX_E2E_STORE=postgres
      OUTBOX_TEST_PG_DIR=${OUTBOX_TEST_PG_DIR}
      OUTBOX_PG_NODE_SCRIPT=${OUTBOX_PG_NODE_SCRIPT})
  endforeach()
endfunction()
