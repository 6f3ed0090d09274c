// A 3-node RabbitMQ cluster with quorum queues (scripts/rabbitmq_cluster.sh,
// started once for this file by its ctest fixture). Clients fail over from
// node to node; under load, killing the node that leads PAY_QUEUE, or pausing
// one node past the cluster's net_ticktime, loses and duplicates nothing.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <iostream>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "shared/amqp/internal/amqp_dialer.h"
#include "shared/testing/status_matchers.h"
#include "tests/support/cluster.h"
#include "tests/support/load.h"

namespace outbox::testing {
namespace {

const Env kQuorum = {{"QUEUE_TYPE", "quorum"},         {"RECOVERY_BASE_DELAY", "500ms"},
                     {"RECOVERY_MAX_DELAY", "2s"},     {"RECOVERY_MAX_ATTEMPTS", "1000"},
                     {"RECOVERY_IDLE_SLEEP", "200ms"}, {"RECOVERY_LEASE_TTL", "2s"}};

int Count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// "node=..." of every amqp_connected line after the first one per connection:
// the reconnects, each naming the node it reached.
std::string Reconnects(const std::string& log) {
  std::map<std::string, int> seen;
  std::map<std::string, int> to;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (!absl::StrContains(line, " amqp_connected ")) continue;
    const std::string conn = LogField(std::string(line), "amqp_connected", "connection");
    if (seen[conn]++ == 0) continue;
    ++to[LogField(std::string(line), "amqp_connected", "node")];
  }
  std::string out;
  for (const auto& [node, n] : to) absl::StrAppend(&out, out.empty() ? "" : ",", node, "x", n);
  return out.empty() ? "none" : out;
}

class ClusterTest : public ::testing::Test {
 protected:
  int SentCount(ServiceSet& services) {
    try {
      int sent = 0;
      for (const auto& p : services.AllPayments())
        sent += p.outbox().status() == ::payment::v1::SENT;
      return sent;
    } catch (const std::exception&) {
      return -1;
    }
  }

  // After a fault: every payment SENT, one voucher each, outbox_check clean;
  // prints what the services saw.
  void ExpectSettled(ServiceSet& services, PaymentLoad& load, int total, const std::string& what) {
    load.Join();
    ASSERT_EQ(load.created(), total);
    const int sent = WaitAllSent(services, total, absl::Seconds(240));
    const CheckResult check = RunChecker(services);
    std::set<std::string> vouchered;
    int duplicates = 0;
    for (const auto& v : services.AllVouchers())
      duplicates += !vouchered.insert(v.payment_id()).second;
    int lost = 0;
    for (const auto& p : services.AllPayments()) lost += vouchered.count(p.payment_id()) == 0;
    std::string logs;
    for (Process* p :
         {&services.payment(), &services.accounting(), &services.recovery("r").process}) {
      logs += p->Log();
    }
    std::cout << what << ": payments=" << total << " SENT=" << sent
              << " vouchers=" << vouchered.size() << " lost=" << lost
              << " duplicate_vouchers=" << duplicates << " client_retries=" << load.retries()
              << " connections_lost=" << Count(logs, " amqp_connection_lost ")
              << " reconnected_to(payment)=" << Reconnects(services.payment().Log())
              << " reconnected_to(accounting)=" << Reconnects(services.accounting().Log())
              << " outbox_check_exit=" << check.exit_code << "\n";
    EXPECT_EQ(sent, total);
    EXPECT_EQ(lost, 0);
    EXPECT_EQ(duplicates, 0);
    EXPECT_EQ(vouchered.size(), static_cast<size_t>(total));
    EXPECT_EQ(check.exit_code, 0) << check.output;
    EXPECT_TRUE(services.payment().Running());
    EXPECT_TRUE(services.accounting().Running());
    if (HasFailure()) {  // the connection events, to see where it stalled
      for (absl::string_view line : absl::StrSplit(logs, '\n')) {
        if (absl::StrContains(line, " amqp_") || absl::StrContains(line, "warning")) {
          std::cout << line << "\n";
        }
      }
      std::cout << cluster_.Queues();
    }
  }

  // Seconds from `since` until SENT passes `sent_before` + 50 again (up to
  // 180 s): a figure of the cluster and the machine, printed, not asserted.
  // The guarantee (every payment SENT once, nothing lost) is ExpectSettled's.
  double SecondsUntilFlowing(ServiceSet& services, int sent_before, absl::Time since) {
    PollUntil([&] { return SentCount(services) >= sent_before + 50; }, absl::Seconds(180),
              absl::Milliseconds(200));
    return absl::ToDoubleSeconds(absl::Now() - since);
  }

  TestCluster cluster_;
};

// A loopback port that refuses connections while this lives.
class ClosedPort {
 public:
  ClosedPort() : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), len), 0);
    EXPECT_EQ(getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len), 0);
    port_ = ntohs(a.sin_port);
  }
  ~ClosedPort() { close(fd_); }
  int port() const { return port_; }

 private:
  int fd_;
  int port_ = 0;
};

// The URL list, the quorum topology, dead-lettering, basic.get and passive
// declare, against the real cluster.
TEST_F(ClusterTest, DialerFailsOverAndQuorumQueuesDeadLetter) {
  ClosedPort dead;
  // A node that refuses comes first: the dialer goes on to node 1.
  std::string list = cluster_.amqp_url();
  list.insert(list.find('@') + 1, absl::StrCat("127.0.0.1:", dead.port(), ","));
  auto url = AmqpUrl::Parse(list);
  ASSERT_OK(url);
  ASSERT_EQ(url->Nodes().size(), 4u);
  // The connection idles while rabbitmqctl answers below (seconds on a busy
  // machine), and rabbitmq-c sends heartbeats only when it is used: with the
  // default 3 s the broker would close it after 6 s of that silence.
  url->heartbeat = absl::Seconds(60);
  const std::string queue = UniqueName("QQ");
  const std::string dlq = Topology::DeadLetterQueue(queue);
  AmqpDialer dialer(*url, Topology{{queue}, "quorum"}, "cluster-itest",
                    [](AmqpConnection& c) { return c.EnableConfirms(); });
  auto conn = dialer.Get();
  ASSERT_OK(conn);
  EXPECT_EQ(dialer.node(), absl::StrCat("127.0.0.1:", cluster_.Port(1)));

  const std::string queues = cluster_.Queues();
  EXPECT_TRUE(absl::StrContains(queues, absl::StrCat(queue, "\tquorum"))) << queues;
  EXPECT_TRUE(absl::StrContains(queues, absl::StrCat(dlq, "\tquorum"))) << queues;
  const int leader = cluster_.Leader(queue);
  EXPECT_GE(leader, 1);
  EXPECT_LE(leader, 3);

  std::vector<OutgoingMessage> messages;
  for (int i = 0; i < 3; ++i) messages.push_back({queue, absl::StrCat("qq-", i), "body", "", "T"});
  auto confirmed = (*conn)->PublishConfirmed(messages, absl::Seconds(10));
  ASSERT_OK(confirmed);
  for (bool c : *confirmed) EXPECT_TRUE(c);
  auto first = (*conn)->Get(queue);
  ASSERT_OK(first);
  ASSERT_NE(first->delivery_tag, 0u);
  EXPECT_EQ(first->message_id, "qq-0");
  ASSERT_OK((*conn)->Reject(first->delivery_tag));
  uint32_t parked = 0;
  EXPECT_TRUE(PollUntil(
      [&] {
        auto n = (*conn)->MessageCount(dlq);
        parked = n.ok() ? *n : 0;
        return parked == 1;
      },
      absl::Seconds(10)));
  EXPECT_EQ(parked, 1u) << "a rejected message reaches the quorum DLQ";
  auto state = (*conn)->Inspect(queue);
  ASSERT_OK(state);
  EXPECT_EQ(state->ready, 2);

  // A dropped connection moves on to the next node.
  dialer.Reset(absl::UnavailableError("test"));
  conn = dialer.Get();
  ASSERT_OK(conn);
  EXPECT_EQ(dialer.node(), absl::StrCat("127.0.0.1:", cluster_.Port(2)));
  auto again = (*conn)->Inspect(queue);
  ASSERT_OK(again);
  EXPECT_EQ(again->ready, 2);  // the same queue, seen from another node
  EXPECT_OK((*conn)->DeleteQueue(queue));
  EXPECT_OK((*conn)->DeleteQueue(dlq));
}

TEST_F(ClusterTest, KillingThePayQueueLeaderLosesNothing) {
  constexpr int kPayments = 600;
  ServiceSet services(cluster_.broker(), kQuorum);
  services.StartAll();
  services.StartRecovery("r");
  PaymentLoad load(services, "kill-", kPayments, 4, absl::Milliseconds(25));
  ASSERT_TRUE(PollUntil([&] { return load.created() >= 100; }, absl::Seconds(60)));

  const int victim = cluster_.Leader(services.pay_queue());
  const int sent_before = SentCount(services);
  const absl::Time killed = absl::Now();
  ASSERT_EQ(kill(cluster_.Pid(victim), SIGKILL), 0);
  int new_leader = victim;
  ASSERT_TRUE(PollUntil(
      [&] {
        new_leader = cluster_.Leader(services.pay_queue());
        return new_leader != victim;
      },
      absl::Seconds(60), absl::Milliseconds(200)));
  const double election = absl::ToDoubleSeconds(absl::Now() - killed);
  const double flowing = SecondsUntilFlowing(services, sent_before, killed);
  cluster_.StartNode(victim);
  const double rejoined = absl::ToDoubleSeconds(absl::Now() - killed);
  std::cout << "kill -9 of node " << victim << " (" << cluster_.Name(victim)
            << ", PAY_QUEUE leader): new leader node " << new_leader << " after " << election
            << " s, payments SENT again after " << flowing << " s, node back in the cluster after "
            << rejoined << " s\n";
  ExpectSettled(services, load, kPayments, "after kill -9 of the leader");
}

TEST_F(ClusterTest, ANodePausedPastNetTicktimeLosesNothing) {
  constexpr int kPayments = 600;
  ServiceSet services(cluster_.broker(), kQuorum);
  services.StartAll();
  services.StartRecovery("r");
  PaymentLoad load(services, "pause-", kPayments, 4, absl::Milliseconds(25));
  ASSERT_TRUE(PollUntil([&] { return load.created() >= 100; }, absl::Seconds(60)));

  // The PAY_QUEUE leader: the node whose pause the queue must survive.
  const int victim = cluster_.Leader(services.pay_queue());
  const pid_t pid = cluster_.Pid(victim);
  const int sent_before = SentCount(services);
  const absl::Time stopped = absl::Now();
  ASSERT_EQ(kill(pid, SIGSTOP), 0);
  // Held until the others have elected a new leader and 25 s have passed:
  // past net_ticktime (10 s; the others declare it down) and past the
  // clients' heartbeat timeout (2 x kAmqpHeartbeat, 6 s; they give up on it
  // and fail over).
  auto elapsed = [&] { return absl::ToDoubleSeconds(absl::Now() - stopped); };
  int new_leader = victim;
  double election = -1, flowing = -1;
  const bool moved = PollUntil(
      [&] {
        if (new_leader == victim) {
          new_leader = cluster_.Leader(services.pay_queue());
          if (new_leader != victim) election = elapsed();
        }
        if (flowing < 0 && SentCount(services) >= sent_before + 50) flowing = elapsed();
        return new_leader != victim && elapsed() >= 25;
      },
      absl::Seconds(60), absl::Milliseconds(500));
  ASSERT_EQ(kill(pid, SIGCONT), 0);
  const absl::Time resumed = absl::Now();
  ASSERT_TRUE(moved) << "no new PAY_QUEUE leader while node " << victim << " was paused";
  if (flowing < 0) flowing = SecondsUntilFlowing(services, sent_before, stopped);
  cluster_.WaitWhole();
  std::cout << "SIGSTOP of node " << victim << " (" << cluster_.Name(victim)
            << ", PAY_QUEUE leader) for " << absl::ToDoubleSeconds(resumed - stopped)
            << " s: new leader node " << new_leader << " seen after " << election
            << " s, payments SENT again after " << flowing << " s ("
            << (flowing < absl::ToDoubleSeconds(resumed - stopped) ? "while paused"
                                                                   : "after SIGCONT")
            << ")"
            << ", cluster whole again " << absl::ToDoubleSeconds(absl::Now() - resumed)
            << " s after SIGCONT\n";
  ExpectSettled(services, load, kPayments, "after SIGSTOP/SIGCONT of the leader");
}

}  // namespace
}  // namespace outbox::testing
