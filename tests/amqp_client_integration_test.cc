// shared/amqp_client against a real RabbitMQ node.
#include "service_kit/topology.h"
#include "shared/amqp/internal/amqp_client.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <iostream>
#include <iterator>
#include <set>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "shared/amqp/internal/amqp_dialer.h"
#include "shared/amqp/internal/amqp_transport.h"
#include "shared/testing/manual_clock.h"
#include "shared/testing/status_matchers.h"
#include "tests/support/broker.h"
#include "tests/support/process.h"
#include "tests/support/raw_amqp.h"

namespace outbox {
namespace {

using ::outbox::testing::StatusIs;
using testing::PollUntil;

// A TCP listener on 127.0.0.1, on a port of its own (written to *port).
int ListenOnLoopback(int backlog, int* port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  listen(fd, backlog);
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  *port = ntohs(addr.sin_port);
  return fd;
}

// A loopback port that black-holes connects, like a host cut off by a
// firewall that drops: a listener that never accepts, its accept queue
// filled, so the kernel drops every further SYN.
class BlackHole {
 public:
  BlackHole() {
    listener_ = ListenOnLoopback(0, &port_);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port_));
    // Connect until one does not complete: the queue is full from there on.
    for (int i = 0; i < 16; ++i) {
      const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
      connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
      fillers_.push_back(fd);
      pollfd p{fd, POLLOUT, 0};
      if (poll(&p, 1, 200) == 0) break;
    }
  }
  ~BlackHole() {
    for (int fd : fillers_) close(fd);
    close(listener_);
  }
  int port() const { return port_; }

 private:
  int listener_ = -1;
  int port_ = 0;
  std::vector<int> fillers_;
};

// A TCP relay between one client and the broker that can go silent: it then
// stops passing bytes either way and keeps both sockets open, as a link
// whose packets are dropped does.
class SilentableLink {
 public:
  SilentableLink(const std::string& host, int broker_port) {
    listener_ = ListenOnLoopback(4, &port_);
    thread_ = std::thread([this, host, broker_port] { Run(host, broker_port); });
  }
  ~SilentableLink() {
    stop_ = true;
    shutdown(listener_, SHUT_RDWR);
    close(listener_);
    thread_.join();
  }
  int port() const { return port_; }
  void GoSilent() { silent_ = true; }

 private:
  void Run(const std::string& host, int broker_port) {
    const int client = accept(listener_, nullptr, nullptr);
    if (client < 0) return;
    const int broker = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(broker_port));
    inet_pton(AF_INET, host.c_str(), &addr.sin_addr);
    if (connect(broker, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      close(client);
      return;
    }
    char buf[65536];
    while (!stop_) {
      if (silent_) {  // nothing read, nothing written, nothing closed
        absl::SleepFor(absl::Milliseconds(50));
        continue;
      }
      pollfd fds[2] = {{client, POLLIN, 0}, {broker, POLLIN, 0}};
      if (poll(fds, 2, 50) <= 0) continue;
      for (int i = 0; i < 2; ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        const ssize_t n = read(fds[i].fd, buf, sizeof(buf));
        if (n <= 0) {
          stop_ = true;
          break;
        }
        if (write(fds[1 - i].fd, buf, static_cast<size_t>(n)) != n) stop_ = true;
      }
    }
    close(client);
    close(broker);
  }

  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<bool> silent_{false};
  std::thread thread_;
};

class AmqpClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    broker_ = testing::TestBroker();
    auto url = AmqpUrl::Parse(broker_.amqp_url);
    ASSERT_OK(url);
    url_ = *url;
    queue_ = testing::UniqueName("itest");
    admin_ = Connect("admin");
    ASSERT_OK(admin_->DeclareQueue(queue_, ""));
  }
  void TearDown() override {
    if (admin_ && admin_->healthy()) {
      admin_->DeleteQueue(queue_).IgnoreError();
      admin_->DeleteQueue(Topology::DeadLetterQueue(queue_)).IgnoreError();
    }
  }
  std::unique_ptr<AmqpConnection> Connect(const std::string& name) {
    auto c = AmqpConnection::Connect(url_, name);
    EXPECT_OK(c);
    return c.ok() ? std::move(c).value() : nullptr;
  }
  std::vector<OutgoingMessage> Messages(int n) {
    std::vector<OutgoingMessage> out;
    for (int i = 0; i < n; ++i) {
      out.push_back({queue_, absl::StrCat("m", i), absl::StrCat("body-", i), "reply-here", "T"});
    }
    return out;
  }

  testing::Broker broker_;
  AmqpUrl url_;
  std::string queue_;
  std::unique_ptr<AmqpConnection> admin_;
};

TEST_F(AmqpClientTest, PipelinedPublishIsConfirmedAndConsumedInBatches) {
  auto pub = Connect("pub");
  ASSERT_OK(pub->EnableConfirms());
  auto confirmed = pub->PublishConfirmed(Messages(500), absl::Seconds(10));
  ASSERT_OK(confirmed);
  for (bool c : *confirmed) ASSERT_TRUE(c);

  auto sub = Connect("sub");
  ASSERT_OK(sub->Consume(queue_, 100));
  std::set<std::string> seen;
  size_t largest_batch = 0;
  ASSERT_TRUE(PollUntil(
      [&] {
        auto batch = sub->NextDeliveries(100, absl::Milliseconds(200));
        EXPECT_OK(batch);
        if (!batch.ok() || batch->empty()) return seen.size() == 500;
        largest_batch = std::max(largest_batch, batch->size());
        for (const auto& d : *batch) {
          EXPECT_EQ(d.body, absl::StrCat("body-", d.message_id.substr(1)));
          EXPECT_EQ(d.reply_to, "reply-here");
          EXPECT_EQ(d.type, "T");
          seen.insert(d.message_id);
        }
        EXPECT_OK(sub->Ack(batch->back().delivery_tag, true));
        return seen.size() == 500;
      },
      absl::Seconds(30), absl::Milliseconds(1)));
  EXPECT_GT(largest_batch, 1u);  // batches, not one by one
  auto left = admin_->MessageCount(queue_);
  ASSERT_OK(left);
  EXPECT_EQ(*left, 0u);
}

TEST_F(AmqpClientTest, SlidingWindowKeepsPublishingWhileConfirmsArrive) {
  auto pub = Connect("pub");
  ASSERT_OK(pub->EnableConfirms());
  std::vector<OutgoingMessage> all = Messages(2000);
  all[777].topic = queue_ + "-nowhere";  // one unroutable in the stream
  constexpr size_t kWindow = 64;
  size_t next = 0, confirmed = 0, failed = 0, max_in_flight = 0;
  std::vector<Confirm> settled;
  ASSERT_TRUE(PollUntil(
      [&] {
        while (next < all.size() && pub->unconfirmed() < kWindow) {
          EXPECT_OK(pub->Publish(all[next++]));
        }
        max_in_flight = std::max(max_in_flight, pub->unconfirmed());
        settled.clear();
        EXPECT_OK(pub->ReadConfirms(absl::Milliseconds(50), &settled));
        for (const auto& c : settled) c.ok ? ++confirmed : ++failed;
        return confirmed + failed == all.size();
      },
      absl::Seconds(30), absl::ZeroDuration()));
  EXPECT_EQ(confirmed, all.size() - 1);
  EXPECT_EQ(failed, 1u);
  EXPECT_EQ(pub->unconfirmed(), 0u);
  EXPECT_LE(max_in_flight, kWindow);
  EXPECT_GT(max_in_flight, 1u);  // more than one in flight at a time
  auto count = admin_->MessageCount(queue_);
  ASSERT_OK(count);
  EXPECT_EQ(*count, all.size() - 1);
}

TEST_F(AmqpClientTest, UnroutableMessageIsNotConfirmed) {
  auto pub = Connect("pub");
  ASSERT_OK(pub->EnableConfirms());
  std::vector<OutgoingMessage> m = Messages(2);
  m[1].topic = queue_ + "-does-not-exist";
  auto confirmed = pub->PublishConfirmed(m, absl::Seconds(10));
  ASSERT_OK(confirmed);
  EXPECT_TRUE((*confirmed)[0]);
  EXPECT_FALSE((*confirmed)[1]);
}

TEST_F(AmqpClientTest, RejectedMessageGoesToTheDeadLetterQueueAndRequeueRedelivers) {
  auto pub = Connect("pub");
  ASSERT_OK(pub->EnableConfirms());
  ASSERT_OK(pub->PublishConfirmed(Messages(2), absl::Seconds(10)));
  auto sub = Connect("sub");
  ASSERT_OK(sub->Consume(queue_, 10));
  std::vector<Delivery> got;
  ASSERT_TRUE(PollUntil(
      [&] {
        auto b = sub->NextDeliveries(10, absl::Milliseconds(100));
        if (b.ok()) got.insert(got.end(), b->begin(), b->end());
        return got.size() >= 2;
      },
      absl::Seconds(10)));
  ASSERT_OK(sub->Reject(got[0].delivery_tag));
  ASSERT_OK(sub->Requeue(got[1].delivery_tag, false));
  std::vector<Delivery> again;
  ASSERT_TRUE(PollUntil(
      [&] {
        auto b = sub->NextDeliveries(10, absl::Milliseconds(100));
        if (b.ok()) again.insert(again.end(), b->begin(), b->end());
        return !again.empty();
      },
      absl::Seconds(10)));
  EXPECT_EQ(again[0].message_id, got[1].message_id);
  EXPECT_TRUE(again[0].redelivered);
  ASSERT_OK(sub->Ack(again[0].delivery_tag, false));

  const std::string dlq = Topology::DeadLetterQueue(queue_);
  Delivery dead;
  ASSERT_TRUE(PollUntil(
      [&] {
        auto d = admin_->Get(dlq);
        if (d.ok() && d->delivery_tag != 0) dead = *d;
        return dead.delivery_tag != 0;
      },
      absl::Seconds(10)));
  EXPECT_EQ(dead.message_id, got[0].message_id);
  EXPECT_EQ(dead.body, got[0].body);
  ASSERT_OK(admin_->Ack(dead.delivery_tag, false));
}

TEST_F(AmqpClientTest, AQueueBrowserTakesGivesBackAndSendsOnWithConfirms) {
  auto pub = Connect("pub");
  ASSERT_OK(pub->EnableConfirms());
  ASSERT_OK(pub->PublishConfirmed(Messages(2), absl::Seconds(10)));
  AmqpQueueBrowser browser(url_, "browser");
  ASSERT_OK(browser.Connect());
  auto ready = [&] {
    auto state = browser.Inspect(queue_);
    return state.ok() ? state->ready : -1;
  };
  ASSERT_TRUE(PollUntil([&] { return ready() == 2; }, absl::Seconds(10)));
  auto first = browser.Take(queue_);
  ASSERT_OK(first);
  EXPECT_EQ(first->message_id, "m0");
  ASSERT_OK(browser.Requeue(first->delivery_tag, /*multiple=*/true));
  ASSERT_TRUE(PollUntil([&] { return ready() == 2; }, absl::Seconds(10)));
  auto again = browser.Take(queue_);
  ASSERT_OK(again);
  EXPECT_EQ(again->message_id, "m0");
  EXPECT_TRUE(again->redelivered);
  // Sent on through the default exchange, then acked: still two in the queue.
  auto sent = browser.PublishConfirmed("", Forward(*again, queue_), absl::Seconds(10));
  ASSERT_OK(sent);
  EXPECT_TRUE(*sent);
  ASSERT_OK(browser.Ack(again->delivery_tag));
  auto lost =
      browser.PublishConfirmed("", Forward(*again, queue_ + "-does-not-exist"), absl::Seconds(10));
  ASSERT_OK(lost);
  EXPECT_FALSE(*lost);  // returned: no queue for it
  ASSERT_TRUE(PollUntil([&] { return ready() == 2; }, absl::Seconds(10)));
  EXPECT_TRUE(absl::IsNotFound(browser.Inspect(queue_ + "-missing").status()));
}

TEST_F(AmqpClientTest, InspectingAMissingQueueIsNotFoundAndCostsNeitherChannelNorConnection) {
  auto pub = Connect("pub");
  ASSERT_OK(pub->EnableConfirms());
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(absl::IsNotFound(pub->Inspect(queue_ + ".missing").status()));
    ASSERT_TRUE(pub->healthy());
    // The publishing channel keeps confirm mode, and inspecting works again.
    auto confirmed = pub->PublishConfirmed(Messages(1), absl::Seconds(10));
    ASSERT_OK(confirmed);
    EXPECT_TRUE((*confirmed)[0]);
    auto state = pub->Inspect(queue_);
    ASSERT_OK(state);
    EXPECT_EQ(state->ready, i + 1);
  }
}

TEST_F(AmqpClientTest, ExchangesRouteEachQueueByItsNameAndDeadLettersToItsDlq) {
  const std::string routed = queue_ + ".routed";
  ASSERT_OK(admin_->DeclareQueue(routed, "", kPaymentsExchange));
  auto pub = Connect("pub");
  ASSERT_OK(pub->EnableConfirms());
  pub->PublishThrough(kPaymentsExchange);
  std::vector<bool> unroutable;
  auto confirmed = pub->PublishConfirmed(
      {{routed, "x1", "b", "", "T"}, {queue_, "x2", "b", "", "T"}}, absl::Seconds(10), &unroutable);
  ASSERT_OK(confirmed);
  EXPECT_TRUE((*confirmed)[0]);
  // queue_ is not bound to the exchange: returned, not confirmed.
  EXPECT_FALSE((*confirmed)[1]);
  EXPECT_TRUE(unroutable[1]);
  auto d = admin_->Get(routed);
  ASSERT_OK(d);
  ASSERT_EQ(d->message_id, "x1");
  ASSERT_OK(admin_->Reject(d->delivery_tag));
  const std::string dlq = Topology::DeadLetterQueue(routed);
  EXPECT_TRUE(
      PollUntil([&] { return admin_->MessageCount(dlq).value_or(0) == 1; }, absl::Seconds(5)));
  admin_->DeleteQueue(routed).IgnoreError();
  admin_->DeleteQueue(dlq).IgnoreError();
}

// The broker's refusals keep their meaning as status codes (callers test
// absl::IsNotFound, not the text): each refusal closes the channel.
TEST_F(AmqpClientTest, ConsumingAMissingQueueIsNotFound) {
  auto sub = Connect("sub");
  absl::Status s = sub->Consume(queue_ + ".missing", 10);
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_NE(s.message().find("404 NOT_FOUND"), std::string::npos) << s;
  EXPECT_FALSE(sub->healthy());
}

TEST_F(AmqpClientTest, RedeclaringAQueueWithOtherArgumentsIsFailedPrecondition) {
  auto conn = Connect("redeclare");
  // queue_ is a classic queue: 406 PRECONDITION_FAILED (inequivalent arg).
  absl::Status s = conn->DeclareQueue(queue_, "quorum");
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(s.message().find("406 PRECONDITION_FAILED"), std::string::npos) << s;
}

// A quorum queue counts every return of a message, and RabbitMQ 4.0 drops
// one returned 20 times from a queue with nowhere to dead-letter to. What is
// parked in a DLQ is looked at again and again (each sweep, each listing)
// and must stay.
TEST_F(AmqpClientTest, AQuorumDeadLetterQueueKeepsAMessageHoweverOftenItIsReturned) {
  const std::string queue = queue_ + ".quorum";
  const std::string dlq = Topology::DeadLetterQueue(queue);
  ASSERT_OK(admin_->DeclareQueue(queue, "quorum"));
  auto pub = Connect("pub");
  ASSERT_OK(pub->EnableConfirms());
  auto confirmed = pub->PublishConfirmed({{dlq, "parked", "body", "", "T"}}, absl::Seconds(10));
  ASSERT_OK(confirmed);
  ASSERT_TRUE((*confirmed)[0]);
  for (int returns = 0; returns < 30; ++returns) {
    Delivery d;
    ASSERT_TRUE(PollUntil(
        [&] {
          auto got = admin_->Get(dlq);
          if (got.ok()) d = *got;
          return d.delivery_tag != 0;
        },
        absl::Seconds(10)))
        << "the message was dropped after " << returns << " returns";
    EXPECT_EQ(d.message_id, "parked");
    ASSERT_OK(admin_->Requeue(d.delivery_tag, /*multiple=*/false));
  }
  EXPECT_OK(admin_->DeleteQueue(queue));
  EXPECT_OK(admin_->DeleteQueue(dlq));
}

// A quorum DLQ an earlier release declared has no x-delivery-limit, and a
// declare with other arguments is refused: it is taken as it is (with a
// warning), so an upgrade does not stop the services from connecting.
TEST_F(AmqpClientTest, AQuorumDeadLetterQueueDeclaredWithoutALimitIsTakenAsItIs) {
  const std::string queue = queue_ + ".older";
  const std::string dlq = Topology::DeadLetterQueue(queue);
  ASSERT_OK(testing::DeclarePlainQuorumQueue(broker_.amqp_url, dlq));
  auto conn = Connect("upgrade");
  ASSERT_OK(conn->DeclareQueue(queue, "quorum"));
  EXPECT_TRUE(conn->healthy());
  EXPECT_OK(conn->Inspect(queue));
  EXPECT_OK(conn->DeleteQueue(queue));
  EXPECT_OK(conn->DeleteQueue(dlq));
}

// The URL of a service's broker user, with its password.
AmqpUrl ServiceUserUrl(const testing::Broker& broker, const std::string& name) {
  const testing::BrokerUser user = testing::ServiceBrokerUser(broker, name);
  auto url = AmqpUrl::Parse(user.url);
  EXPECT_OK(url);
  if (!url.ok()) return {};
  std::ifstream in(user.password_file);
  url->password.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  absl::StripAsciiWhitespace(&url->password);
  return *url;
}

TEST_F(AmqpClientTest, WhatAUsersPermissionsForbidIsPermissionDenied) {
  // outbox-recovery may configure only the DLQs' locks and read only the DLQs.
  const AmqpUrl url = ServiceUserUrl(broker_, "outbox-recovery");
  for (const bool declare : {true, false}) {
    auto conn = AmqpConnection::Connect(url, "recovery-user");
    ASSERT_OK(conn);
    absl::Status s =
        declare ? (*conn)->DeclareQueue(queue_ + ".mine", "") : (*conn)->Consume(queue_, 10);
    EXPECT_TRUE(absl::IsPermissionDenied(s)) << s;
    EXPECT_NE(s.message().find("403 ACCESS_REFUSED"), std::string::npos) << s;
  }
}

// Recovery's user takes and gives back a dead-letter queue's lock (an
// exclusive queue it declares and deletes), and no other queue's; a lock
// refused closes neither the connection nor its channel.
TEST_F(AmqpClientTest, RecoverysUserLocksTheDeadLetterQueuesOnly) {
  auto conn = AmqpConnection::Connect(ServiceUserUrl(broker_, "outbox-recovery"), "recovery-user");
  ASSERT_OK(conn);
  AmqpConnection& c = **conn;
  const std::string pay = testing::UniqueName("PAY");
  for (const std::string& queue : {queue_ + ".DLQ", pay}) {
    auto locked = c.Lock(queue);
    EXPECT_THAT(locked, StatusIs(absl::StatusCode::kPermissionDenied)) << queue;
    EXPECT_TRUE(c.healthy());
  }
  const std::string dlq = DeadLetterQueueOf(pay);
  auto locked = c.Lock(dlq);
  ASSERT_OK(locked);
  EXPECT_TRUE(*locked);
  auto other =
      AmqpConnection::Connect(ServiceUserUrl(broker_, "outbox-recovery"), "recovery-other");
  ASSERT_OK(other);
  auto refused = (*other)->Lock(dlq);
  ASSERT_OK(refused);
  EXPECT_FALSE(*refused);  // 405 RESOURCE_LOCKED
  EXPECT_TRUE((*other)->healthy());
  EXPECT_OK(c.Unlock(dlq));
  auto taken = (*other)->Lock(dlq);
  ASSERT_OK(taken);
  EXPECT_TRUE(*taken);
  EXPECT_OK((*other)->Unlock(dlq));
  EXPECT_TRUE(absl::IsNotFound(admin_->Inspect(LockQueueOf(dlq)).status()));  // deleted
}

// A consumer whose queue is not declared yet (its writer declares it) asks
// again after 250 ms, not after a backoff that grows with each attempt.
TEST_F(AmqpClientTest, ADialerWaitsBrieflyForAQueueNotDeclaredYet) {
  const std::string later = queue_ + ".later";
  testing::ManualClock clock;
  AmqpDialer dialer(
      url_, Topology{}, "consumer", [&](AmqpConnection& c) { return c.Consume(later, 10); }, clock);
  for (int attempt = 0; attempt < 4; ++attempt) {
    auto conn = dialer.Get();
    EXPECT_TRUE(absl::IsNotFound(conn.status())) << attempt << ": " << conn.status();
    clock.Advance(absl::Milliseconds(249));
    EXPECT_EQ(dialer.Get().status().message(), "amqp: waiting to reconnect") << attempt;
    clock.Advance(absl::Milliseconds(1));
  }
  ASSERT_OK(admin_->DeclareQueue(later, ""));
  auto conn = dialer.Get();
  EXPECT_OK(conn);
  admin_->DeleteQueue(later).IgnoreError();
  admin_->DeleteQueue(Topology::DeadLetterQueue(later)).IgnoreError();
}

TEST_F(AmqpClientTest, BadCredentialsAndClosedPortAreUnavailable) {
  AmqpUrl bad = url_;
  bad.password = "wrong";
  auto c = AmqpConnection::Connect(bad, "bad");
  EXPECT_TRUE(absl::IsUnavailable(c.status())) << c.status();
  EXPECT_EQ(c.status().message().find("wrong"), std::string::npos);  // no password in errors
  bad = url_;
  bad.port = 1;
  c = AmqpConnection::Connect(bad, "closed");
  EXPECT_TRUE(absl::IsUnavailable(c.status())) << c.status();
}

// A connect to a host that does not answer gives up after its own short
// timeout (not after SYN retransmissions that double up to 31 s), so the
// dialer can try again on a fresh socket soon after a cut ends.
TEST_F(AmqpClientTest, AConnectToABlackHoledPortGivesUpWithinItsTimeout) {
  BlackHole hole;
  AmqpUrl unanswered = url_;
  unanswered.host = "127.0.0.1";
  unanswered.port = hole.port();
  const absl::Time start = absl::Now();
  auto c = AmqpConnection::Connect(unanswered, "black-holed");
  const absl::Duration took = absl::Now() - start;
  std::cout << "connect to a black-holed port: " << c.status() << " after "
            << absl::FormatDuration(took) << "\n";
  EXPECT_TRUE(absl::IsUnavailable(c.status())) << c.status();
  // The timeout, not a refusal; bounded by it (the margin is for a busy machine).
  EXPECT_GE(took, kAmqpConnectTimeout - absl::Milliseconds(100));
  EXPECT_LT(took, kAmqpConnectTimeout + absl::Seconds(3));
}

// A link that goes silent both ways (packets dropped, nothing closed) is
// noticed by a consumer waiting for deliveries: it hears not even the
// broker's heartbeats, and after two heartbeat intervals the connection is
// dead, whatever TCP would wait.
TEST_F(AmqpClientTest, AConsumerNoticesASilentLinkWithinTwoHeartbeats) {
  SilentableLink link(url_.host == "localhost" ? "127.0.0.1" : url_.host, url_.port);
  AmqpUrl via = url_;
  via.host = "127.0.0.1";
  via.port = link.port();
  auto sub = AmqpConnection::Connect(via, "silent-link");
  ASSERT_OK(sub);
  ASSERT_OK((*sub)->Consume(queue_, 10));
  auto first = (*sub)->NextDeliveries(10, absl::Milliseconds(200));
  ASSERT_OK(first);
  link.GoSilent();
  const absl::Time silent_since = absl::Now();
  absl::Status dead;
  while (dead.ok() && absl::Now() - silent_since < absl::Seconds(60)) {
    auto next = (*sub)->NextDeliveries(10, absl::Milliseconds(200));
    if (!next.ok()) dead = next.status();
  }
  const absl::Duration noticed = absl::Now() - silent_since;
  std::cout << "a silent link noticed after " << absl::FormatDuration(noticed) << ": " << dead
            << "\n";
  EXPECT_THAT(dead, StatusIs(absl::StatusCode::kUnavailable)) << "a silent link was never noticed";
  EXPECT_FALSE((*sub)->healthy());
  // Two heartbeat intervals, with a margin a busy machine cannot use up.
  EXPECT_LT(noticed, 2 * kAmqpHeartbeat + absl::Seconds(5));
}

}  // namespace
}  // namespace outbox
