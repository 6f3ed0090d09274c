// The ledger (a consumer handler) tested with the library's fakes: the
// broker is a FakeConsumer and a FakePublisher, time a ManualClock, the
// ledger a real SQLite file in a TempDir. Then the whole flow, producer to
// consumer, checked with the kit's consistency check.
#include "rewards.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "shared/observability/metrics.h"
#include "shared/outbox/internal/idempotent_consumer.h"
#include "shared/testing/consistency.h"
#include "shared/testing/fakes.h"
#include "shared/testing/manual_clock.h"
#include "shared/testing/status_matchers.h"
#include "shared/testing/temp_dir.h"

namespace rewards {
namespace {

using ::outbox::testing::DeliveryOf;
using ::outbox::testing::FakeConsumer;
using ::outbox::testing::FakePublisher;
using ::outbox::testing::IsConsistent;
using ::outbox::testing::ManualClock;

outbox::Delivery PointsDelivery(const std::string& award_id, const std::string& body,
                                const std::string& type = "PointsEarned") {
  outbox::Delivery d;
  d.message_id = award_id;
  d.type = type;
  d.reply_to = kReplies;
  d.body = body;
  return d;
}

// The ledger behind an IdempotentConsumer, on the fakes.
class LedgerTest : public ::testing::Test {
 protected:
  static outbox::ConsumerOptions Options() {
    outbox::ConsumerOptions o;
    o.queue = kQueue;
    o.default_reply_to = kReplies;
    return o;
  }

  std::unique_ptr<outbox::SqliteFile> Open(const std::string& name,
                                           const outbox::DbSchema& schema) {
    auto file = outbox::OpenSqliteFile(dir_.path() + "/" + name, {}, &schema);
    EXPECT_OK(file);
    return file.ok() ? std::move(file).value() : nullptr;
  }

  outbox::TempDir dir_{"rewards_test"};
  ManualClock clock_;
  std::unique_ptr<outbox::SqliteFile> ledger_file_ = Open("ledger.db", LedgerSchema());
  Ledger ledger_{*ledger_file_, clock_};
  FakeConsumer queue_;
  FakePublisher replies_;
  outbox::MetricsRegistry metrics_;
  outbox::IdempotentConsumer consumer_{queue_, replies_, ledger_, clock_, metrics_, Options()};
};

TEST_F(LedgerTest, BooksAnAwardOnceAndAnswersEveryCopy) {
  queue_.Push(PointsDelivery("award-1", "ada:50"));
  queue_.Push(PointsDelivery("award-1", "ada:50"));  // the broker delivered it twice
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(Balance(*ledger_file_, "ada"), 50);
  EXPECT_EQ(consumer_.booked(), 1);
  ASSERT_EQ(replies_.published.size(), 2u);
  for (const outbox::OutgoingMessage& reply : replies_.published) {
    EXPECT_EQ(reply.topic, kReplies);
  }
  EXPECT_EQ(queue_.acked.size(), 2u);
}

TEST_F(LedgerTest, AnAwardOverTheLimitIsRefusedNotBooked) {
  queue_.Push(PointsDelivery("award-2", "ada:20000"));
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(Balance(*ledger_file_, "ada"), 0);
  EXPECT_EQ(consumer_.rejected(), 1);
  EXPECT_EQ(replies_.published.size(), 1u);  // its producer learns why
  EXPECT_EQ(queue_.acked.size(), 1u);
}

TEST_F(LedgerTest, WhatIsNotPointsEarnedIsDeadLettered) {
  queue_.Push(PointsDelivery("award-3", "ada:50", "SomethingElse"));
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(Balance(*ledger_file_, "ada"), 0);
  ASSERT_EQ(queue_.dead_lettered.size(), 1u);
  EXPECT_EQ(queue_.dead_lettered[0].message_id, "award-3");
}

// Producer to consumer: each award written with its message, delivered
// (one twice), booked, acknowledged; both files then agree.
TEST_F(LedgerTest, EveryAwardIsBookedOnceAndTheFilesAgree) {
  std::unique_ptr<outbox::SqliteFile> rewards_file = Open("rewards.db", RewardsSchema());
  ASSERT_NE(rewards_file, nullptr);
  outbox::SqliteOutbox outbox(*rewards_file, clock_);
  std::vector<std::string> ids;
  for (const auto& [id, member, points] :
       {std::tuple<std::string, std::string, int64_t>{"a-1", "ada", 10},
        {"a-2", "bob", 20},
        {"a-3", "ada", 30}}) {
    auto message = AwardPoints(outbox, id, member, points);
    ASSERT_OK(message);
    queue_.Push(DeliveryOf(*message));
    ids.push_back(id);
  }
  queue_.Push(PointsDelivery("a-2", "bob:20"));  // a copy, as after a lost ack

  const std::string rewards_db = dir_.path() + "/rewards.db";
  const std::string ledger_db = dir_.path() + "/ledger.db";
  const outbox::testing::ConsistencyOptions options{
      {{"award missing from the ledger",
        "SELECT count(*) FROM awards a WHERE NOT EXISTS "
        "(SELECT 1 FROM consumer.ledger l WHERE l.award_id = a.award_id)"},
       {"points booked differ from those awarded",
        "SELECT count(*) FROM awards a JOIN consumer.ledger l ON l.award_id = a.award_id "
        "WHERE l.points != a.points"}}};
  // Written, not yet delivered: the rows are SENDING and the ledger is empty.
  auto before = outbox::testing::CheckConsistency(rewards_db, ledger_db, options);
  ASSERT_OK(before);
  EXPECT_FALSE(before->ok);
  EXPECT_EQ(before->sending, 3);
  EXPECT_THAT(before->ToString(), ::testing::HasSubstr("award missing from the ledger: 3"));

  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(Balance(*ledger_file_, "ada"), 40);
  EXPECT_EQ(Balance(*ledger_file_, "bob"), 20);
  EXPECT_EQ(consumer_.duplicates(), 1);
  // The producer's ack listener closes each row its reply names.
  auto tally = outbox.RecordAcks(ids);
  ASSERT_OK(tally);
  EXPECT_EQ(tally->closed, 3);
  EXPECT_TRUE(IsConsistent(rewards_db, ledger_db, options));
}

}  // namespace
}  // namespace rewards
