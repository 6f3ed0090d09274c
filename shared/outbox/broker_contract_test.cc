// The broker seam's contract (shared/testing/broker_contract.h) against the
// fakes the workers' tests use; tests/amqp_broker_contract_test.cc runs it
// against the AMQP adapters on the test broker.
#include "shared/testing/broker_contract.h"

namespace outbox::testing {
namespace {

INSTANTIATE_TEST_SUITE_P(Library, BrokerContractTest,
                         ::testing::Values(BrokerImpl{"Fakes", MakeFakeBroker}), BrokerImplName);

}  // namespace
}  // namespace outbox::testing
