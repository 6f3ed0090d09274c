// The dead-letter queues on the real binaries. What recovery keeps parked
// (a copy of a FAILED row, a forgery) stays however often it is looked at,
// also over quorum queues, whose broker counts every look (RabbitMQ 4.0 drops
// a message returned 20 times). And recovery's dead-letter connection, idle
// between housekeeping passes by design, keeps its heartbeats: a healthy
// system left idle loses no broker connection.
#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/channel.h"
#include "shared/amqp/internal/amqp_client.h"
#include "shared/observability/internal/http_client.h"
#include "shared/testing/status_matchers.h"
#include "tests/support/alertmanager.h"
#include "tests/support/load.h"
#include "tests/support/queue_sink.h"
#include "tests/support/raw_amqp.h"
#include "tests/support/services.h"

namespace outbox::testing {
namespace {

// Every copy of a payment's message is dead-lettered until its row FAILs
// (two attempts); housekeeping, with its sweep of the dead-letter queues,
// five times a second.
const Env kQuorumEnv = {{"QUEUE_TYPE", "quorum"},         {"RECOVERY_BASE_DELAY", "300ms"},
                        {"RECOVERY_MAX_DELAY", "1s"},     {"RECOVERY_MAX_ATTEMPTS", "2"},
                        {"RECOVERY_IDLE_SLEEP", "100ms"}, {"RECOVERY_HOUSEKEEPING_EVERY", "200ms"}};

// The message ids ListDeadLetters shows for `queue`.
std::map<std::string, int> Listed(ServiceSet::Recovery& recovery, const std::string& queue) {
  grpc::ClientContext ctx;
  ::ops::v1::ListDeadLettersRequest req;
  req.set_queue(queue);
  ::ops::v1::ListDeadLettersResponse resp;
  EXPECT_OK(client::FromGrpc(recovery.ops->ListDeadLetters(&ctx, req, &resp), "ListDeadLetters"));
  std::map<std::string, int> ids;
  for (const auto& m : resp.messages()) ++ids[m.message_id()];
  return ids;
}

TEST(DeadLettersTest, WhatIsKeptParkedStaysHoweverOftenItIsLookedAt) {
  constexpr int kListings = 25;
  constexpr int kPasses = 30;
  ServiceSet services(kQuorumEnv);
  Alertmanager alertmanager(services.dir());
  const Env alerting = {{"ALERTMANAGER_URL", alertmanager.url()}};
  services.StartPayment(alerting);
  auto& recovery = services.StartRecovery("r", alerting);
  const std::string dlq = DeadLetterQueueOf(services.pay_queue());
  auto url = AmqpUrl::Parse(services.broker().amqp_url);
  ASSERT_OK(url);
  // Connections of the test's own, each opened where it is used (one left
  // idle would be closed by the broker for missed heartbeats).
  auto connect = [&]() -> std::unique_ptr<AmqpConnection> {
    auto c = AmqpConnection::Connect(*url, "test-admin");
    return c.ok() ? *std::move(c) : nullptr;
  };
  // The queues are as payment_service declared them, not as this test would.
  ASSERT_TRUE(PollUntil(
      [&] {
        auto c = connect();
        return c != nullptr && c->Inspect(dlq).ok();
      },
      absl::Seconds(30)));

  // A consumer that is not accounting dead-letters every copy: the row FAILs.
  std::string failed_id;
  {
    QueueSink sink(services.broker().amqp_url, services.pay_queue(), QueueSink::Mode::kDeadLetter,
                   "quorum");
    failed_id = CreatePayments(services, "failed-", 1).at(0).outbox().message_id();
    ASSERT_TRUE(PollUntil([&] { return OpsStats(recovery).failed() == 1; }, absl::Seconds(30)));
  }
  // A payment accounting books, and a forged copy of its message parked by
  // someone who may publish to the broker: signed with a key the services
  // do not hold, so the sweep keeps it although its row is SENT.
  services.StartAccounting(alerting);
  const std::string booked_id = CreatePayments(services, "booked-", 1).at(0).outbox().message_id();
  ASSERT_TRUE(PollUntil(
      [&] {
        for (const auto& p : services.AllPayments()) {
          if (p.outbox().message_id() == booked_id) {
            return p.outbox().status() == ::payment::v1::SENT;
          }
        }
        return false;
      },
      absl::Seconds(30)));
  auto forger = MessageKeys::Parse(services.message_keys().signing_key_id() +
                                   " a-secret-the-services-do-not-hold-0123456789");
  ASSERT_OK(forger);
  OutgoingMessage forged{dlq, booked_id, "a forged body", services.acc_queue(), "PaymentCreated"};
  forged.signature = forger->Sign(forged);
  auto publisher = connect();
  ASSERT_NE(publisher, nullptr);
  ASSERT_OK(publisher->EnableConfirms());
  auto confirmed = publisher->PublishConfirmed({forged}, absl::Seconds(10));
  ASSERT_OK(confirmed);
  ASSERT_TRUE((*confirmed)[0]);

  // Both are parked and OutboxDeadLetters fires.
  std::string alerts;
  ASSERT_TRUE(PollUntil(
      [&] {
        alerts = alertmanager.Alerts();
        return alerts.find("OutboxDeadLetters") != std::string::npos &&
               alerts.find(dlq) != std::string::npos;
      },
      absl::Seconds(30), absl::Milliseconds(300)))
      << alerts;

  // 25 listings, each showing both.
  for (int i = 1; i <= kListings; ++i) {
    const std::map<std::string, int> listed = Listed(recovery, services.pay_queue());
    ASSERT_TRUE(listed.count(failed_id) && listed.count(booked_id))
        << "listing " << i << " no longer shows both";
  }
  // And 30 housekeeping passes: each takes every parked message and gives
  // back what it keeps, one delivery more for each, as are the listings and
  // this test's own looks (DeliveryCounts). Both still there, delivered that
  // often, so the passes happened.
  int own_looks = 0;
  std::map<std::string, int64_t> counts;
  const bool looked_at_enough = PollUntil(
      [&] {
        auto now = DeliveryCounts(services.broker().amqp_url, dlq);
        const int64_t wanted = kListings + kPasses + own_looks;
        ++own_looks;
        if (!now.ok()) return false;
        counts = *now;
        // A pass may hold a message while the test looks: then it is not seen.
        return counts.count(failed_id) && counts.count(booked_id) && counts[failed_id] >= wanted &&
               counts[booked_id] >= wanted;
      },
      absl::Seconds(120), absl::Milliseconds(200));
  std::string seen;
  for (const auto& [id, n] : counts) absl::StrAppend(&seen, id, " delivered ", n, " times; ");
  ASSERT_TRUE(looked_at_enough) << "after " << own_looks << " looks of the test: " << seen;
  std::cout << "kept dead letters: " << seen << "\n";

  const std::map<std::string, int> listed = Listed(recovery, services.pay_queue());
  EXPECT_TRUE(listed.count(failed_id)) << failed_id;
  EXPECT_TRUE(listed.count(booked_id)) << booked_id;
  alerts = alertmanager.Alerts();
  EXPECT_NE(alerts.find("OutboxDeadLetters"), std::string::npos) << alerts;
  EXPECT_GE(OpsStats(recovery).alerts_active(), 1);
  EXPECT_EQ(recovery.process.Log().find("dead_letter_settled_removed"), std::string::npos);
}

// outbox_amqp_connection_drops_total over every connection of `metrics`.
double Drops(const std::string& metrics) {
  double total = 0;
  for (absl::string_view line : absl::StrSplit(metrics, '\n')) {
    if (!absl::StartsWith(line, "outbox_amqp_connection_drops_total{")) continue;
    double n = 0;
    const size_t space = line.rfind(' ');
    if (space != absl::string_view::npos && absl::SimpleAtod(line.substr(space + 1), &n)) {
      total += n;
    }
  }
  return total;
}

// Left idle, a healthy system keeps every broker connection, also the one
// that is idle by design: recovery's dead-letter connection between
// housekeeping passes. Passes four heartbeats apart (the broker closes a
// connection silent for two) and an idle span of five passes.
TEST(DeadLettersTest, NoConnectionIsDroppedWhileIdle) {
  const int payment_metrics = FreeLoopbackPort();
  const int accounting_metrics = FreeLoopbackPort();
  const int recovery_metrics = FreeLoopbackPort();
  ServiceSet services(
      Env{{"AMQP_HEARTBEAT", "2s"},
          {"RECOVERY_HOUSEKEEPING_EVERY", "8s"},
          {"PAYMENT_METRICS_LISTEN", absl::StrCat("127.0.0.1:", payment_metrics)},
          {"ACCOUNTING_METRICS_LISTEN", absl::StrCat("127.0.0.1:", accounting_metrics)},
          {"RECOVERY_METRICS_LISTEN", absl::StrCat("127.0.0.1:", recovery_metrics)}});
  services.StartAll();
  auto& recovery = services.StartRecovery("r");
  CreatePayments(services, "idle-", 3);
  ASSERT_EQ(WaitAllSent(services, 3, absl::Seconds(30)), 3);
  auto scrape = [](int port) {
    auto r = HttpGet(absl::StrCat("http://127.0.0.1:", port, "/metrics"), absl::Seconds(5));
    return r.ok() ? r->body : std::string();
  };
  const std::string dead_letters_up = "outbox_amqp_connected{connection=\"dead_letters\"} 1";
  // The lease holder's first housekeeping pass opens the dead-letter connection.
  ASSERT_TRUE(
      PollUntil([&] { return scrape(recovery_metrics).find(dead_letters_up) != std::string::npos; },
                absl::Seconds(30)));

  std::string metrics;
  const bool dropped = PollUntil(
      [&] {
        metrics = scrape(payment_metrics) + scrape(accounting_metrics) + scrape(recovery_metrics);
        return Drops(metrics) > 0;
      },
      absl::Seconds(40), absl::Milliseconds(500));
  EXPECT_FALSE(dropped) << metrics;
  EXPECT_NE(scrape(recovery_metrics).find(dead_letters_up), std::string::npos);
  for (Process* p : {&services.payment(), &services.accounting(), &recovery.process}) {
    const std::string log = p->Log();
    EXPECT_EQ(log.find("amqp_connection_lost"), std::string::npos) << log;
  }
}

}  // namespace
}  // namespace outbox::testing
