// The broker seam's contract (shared/testing/broker_contract.h) against the
// AMQP adapters on the test run's RabbitMQ node: AmqpPublisher declaring a
// queue of the test's own (with its DLQ), AmqpConsumer on it and two
// AmqpQueueBrowsers. shared/outbox/broker_contract_test.cc runs it against
// the fakes.
#include "shared/testing/broker_contract.h"

#include <memory>

#include "shared/amqp/amqp_url.h"
#include "shared/amqp/internal/amqp_client.h"
#include "shared/amqp/internal/amqp_transport.h"
#include "tests/support/broker.h"

namespace outbox::testing {
namespace {

// The links, and an admin connection that deletes the queues after.
struct AmqpLinks {
  AmqpUrl url;
  std::string queue;
  std::unique_ptr<AmqpPublisher> publisher;
  std::unique_ptr<AmqpConsumer> consumer;
  std::unique_ptr<AmqpQueueBrowser> browser;
  std::unique_ptr<AmqpQueueBrowser> other_browser;

  ~AmqpLinks() {
    publisher.reset();
    consumer.reset();
    browser.reset();
    other_browser.reset();
    auto admin = AmqpConnection::Connect(url, "contract-admin");
    if (!admin.ok()) return;
    (*admin)->DeleteQueue(queue).IgnoreError();
    (*admin)->DeleteQueue(DeadLetterQueueOf(queue)).IgnoreError();
  }
};

BrokerUnderTest MakeAmqp() {
  auto url = AmqpUrl::Parse(TestBroker().amqp_url);
  EXPECT_OK(url);
  if (!url.ok()) return {};
  auto links = std::make_shared<AmqpLinks>();
  links->url = *url;
  links->queue = UniqueName("contract");
  Topology topology;
  topology.queues = {links->queue};  // through the default exchange, as tests declare
  links->publisher = std::make_unique<AmqpPublisher>(*url, topology, "contract-publisher");
  links->consumer = std::make_unique<AmqpConsumer>(*url, topology, "contract-consumer",
                                                   links->queue, /*prefetch=*/10);
  links->browser = std::make_unique<AmqpQueueBrowser>(*url, "contract-browser");
  links->other_browser = std::make_unique<AmqpQueueBrowser>(*url, "contract-other-browser");
  BrokerUnderTest b;
  b.publisher = links->publisher.get();
  b.consumer = links->consumer.get();
  b.browser = links->browser.get();
  b.other_browser = links->other_browser.get();
  b.queue = links->queue;
  b.unrouted_topic = links->queue + ".nowhere";
  b.missing_queue = links->queue + ".missing";
  b.owner = links;
  return b;
}

INSTANTIATE_TEST_SUITE_P(Amqp, BrokerContractTest,
                         ::testing::Values(BrokerImpl{"AmqpOnTheTestBroker", MakeAmqp}),
                         BrokerImplName);

}  // namespace
}  // namespace outbox::testing
