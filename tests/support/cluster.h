#pragma once

// The 3-node RabbitMQ cluster of e2e.cluster, started once for the test file
// by its ctest fixture (scripts/rabbitmq_cluster.sh). Tests never skip when it
// is missing: they fail.
#include <sys/types.h>
#include <string>

#include "tests/support/broker.h"

namespace outbox::testing {

class TestCluster {
 public:
  // Reads OUTBOX_TEST_CLUSTER_DIR; aborts the test program if it is not set up.
  TestCluster();

  // As a Broker for ServiceSet: amqp_url is the list of the three nodes.
  const Broker& broker() const { return broker_; }
  const std::string& amqp_url() const { return broker_.amqp_url; }

  // Node i (1-3): its beam process, its name, its AMQP port.
  pid_t Pid(int node) const;
  std::string Name(int node) const;
  int Port(int node) const;
  // The node leading quorum queue `queue` (1-3).
  int Leader(const std::string& queue) const;
  // "NAME TYPE LEADER" lines for every queue.
  std::string Queues() const;
  // Starts node i again after a kill, and waits for the cluster to be whole.
  void StartNode(int node) const;
  // Waits until every node sees three running nodes and no partition.
  void WaitWhole() const;

 private:
  std::string Run(const std::string& args) const;  // the cluster script's stdout
  Broker broker_;
};

}  // namespace outbox::testing
