#pragma once

// The test run's RabbitMQ node, started once by the ctest fixture
// (cmake/BrokerFixture.cmake). Tests never skip when it is missing: they fail.
#include <string>

namespace outbox::testing {

struct Broker {
  std::string dir;
  std::string amqp_url;
  // The node's TLS listener (the fixture always gives it one) and the
  // directory of its dev certificates: ca.pem, client.pem, client.key.
  std::string amqps_url;
  std::string tls_dir;
};

// Reads OUTBOX_TEST_BROKER_DIR; aborts the test program if it is not set up
// (the TLS listener included).
Broker TestBroker();

// A service's own broker user, made by scripts/rabbitmq_node.sh: its URL
// (no password in it) and the file holding its password, for AMQP_URL and
// AMQP_PASSWORD_FILE. `user` is outbox-payment, outbox-accounting or
// outbox-recovery; aborts if the node has no such user.
struct BrokerUser {
  std::string url;
  std::string password_file;
};
BrokerUser ServiceBrokerUser(const Broker& broker, const std::string& user);

// Stops / starts the same node (same URL). For tests of broker restarts only.
void StopBroker(const Broker& broker);
void StartBroker(const Broker& broker);

// A name unique to this test process, for queue names and temp dirs.
std::string UniqueName(const std::string& prefix);

}  // namespace outbox::testing
