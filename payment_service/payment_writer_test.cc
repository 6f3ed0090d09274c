#include "payment_service/payment_writer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "shared/base/mutex.h"
#include "shared/testing/manual_clock.h"
#include "shared/testing/sequential_ids.h"
#include "shared/testing/status_matchers.h"

namespace outbox::payment {
namespace {

using ::outbox::testing::ManualClock;
using ::outbox::testing::SequentialIds;

// The relay the writer hands committed messages to.
class RecordingRelay final : public RelayQueue {
 public:
  explicit RecordingRelay(std::function<void(const std::vector<OutgoingMessage>&)> check = {})
      : check_(std::move(check)) {}
  using RelayQueue::Enqueue;
  void Enqueue(std::vector<OutgoingMessage> messages, absl::Time /*written_at*/) override {
    if (check_) check_(messages);
    MutexLock lock(&mu_);
    published_.insert(published_.end(), messages.begin(), messages.end());
  }
  std::vector<OutgoingMessage> published() {
    MutexLock lock(&mu_);
    return published_;
  }

 private:
  std::function<void(const std::vector<OutgoingMessage>&)> check_;
  Mutex mu_;
  std::vector<OutgoingMessage> published_ ABSL_GUARDED_BY(mu_);
};

class PaymentWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/payment_writer_test.XXXXXX";
    dir_ = mkdtemp(tmpl);
    store_ = std::move(PaymentStore::Open(dir_ + "/payment.db", DbOptions{})).value();
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::string dir_;
  std::unique_ptr<PaymentStore> store_;
  ManualClock clock_{1'000'000};
  SequentialIds ids_{"id-"};
  MetricsRegistry metrics_;
};

TEST_F(PaymentWriterTest, ConcurrentCallersAreCommittedAndPublishedAfterCommit) {
  WriterOptions options;
  options.retry.base_delay = absl::Seconds(3);
  options.retry.max_attempts = 7;
  RecordingRelay relay([&](const std::vector<OutgoingMessage>& m) {
    // Called after the commit: the rows are already visible.
    for (const auto& msg : m) {
      auto page = store_->List(std::nullopt, 0, 1000);
      bool found = false;
      for (const auto& p : page->items) found |= p.outbox.message_id == msg.message_id;
      EXPECT_TRUE(found) << msg.message_id;
    }
  });
  PaymentWriter writer(*store_, clock_, ids_, metrics_, options);
  writer.Start(relay);
  constexpr int kThreads = 8;
  constexpr int kEach = 25;
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        PaymentInput in{absl::StrCat("k", t, "-", i), "alice", "bob", 100 + i, "USD", ""};
        CreateOutcome out = writer.Create(in);
        if (out.status.ok() && !out.replayed) ++ok;
        EXPECT_EQ(out.record.outbox.attempts, 1);
        EXPECT_EQ(out.record.outbox.max_attempts, 7);
        EXPECT_EQ(out.record.outbox.next_retry_at, 1'000'000 + 3000);
      }
    });
  }
  for (auto& t : threads) t.join();
  writer.Stop();
  EXPECT_EQ(ok.load(), kThreads * kEach);
  const std::vector<OutgoingMessage> published = relay.published();
  ASSERT_EQ(published.size(), static_cast<size_t>(kThreads * kEach));
  EXPECT_EQ(published[0].topic, "PAY_QUEUE");
  EXPECT_EQ(published[0].reply_to, "ACC_QUEUE");
  EXPECT_EQ(published[0].type, "PaymentCreated");
  EXPECT_EQ(writer.payments_created(), kThreads * kEach);
}

TEST_F(PaymentWriterTest, ReplayIsNotPublishedAgainAndConflictIsRefused) {
  RecordingRelay relay;
  PaymentWriter writer(*store_, clock_, ids_, metrics_, WriterOptions{});
  writer.Start(relay);
  PaymentInput in{"same", "alice", "bob", 100, "USD", ""};
  CreateOutcome a = writer.Create(in);
  CreateOutcome b = writer.Create(in);
  in.amount_minor = 200;
  CreateOutcome c = writer.Create(in);
  writer.Stop();
  ASSERT_OK(a.status);
  EXPECT_FALSE(a.replayed);
  EXPECT_TRUE(b.replayed);
  EXPECT_EQ(a.record.payment_id, b.record.payment_id);
  EXPECT_TRUE(absl::IsAlreadyExists(c.status));
  EXPECT_EQ(relay.published().size(), 1u);
}

TEST_F(PaymentWriterTest, CreateAsyncCompletesOnTheWriterThreadAfterTheCommit) {
  RecordingRelay relay;
  PaymentWriter writer(*store_, clock_, ids_, metrics_, WriterOptions{});
  writer.Start(relay);
  constexpr int kCalls = 50;
  Mutex mu;
  std::vector<CreateOutcome> outcomes;
  std::set<std::thread::id> threads;
  bool committed_before_done = true;
  for (int i = 0; i < kCalls; ++i) {
    writer.CreateAsync(
        {absl::StrCat("async-", i), "alice", "bob", 100, "USD", ""}, "", [&](CreateOutcome out) {
          // The row is in the database when the caller hears of it.
          const bool stored = out.status.ok() && store_->Get(out.record.payment_id).ok();
          MutexLock lock(&mu);
          committed_before_done &= stored;
          threads.insert(std::this_thread::get_id());
          outcomes.push_back(std::move(out));
        });
  }
  {
    MutexLock lock(&mu);
    auto all_done = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu) { return outcomes.size() == kCalls; };
    mu.Await(absl::Condition(&all_done));
    EXPECT_TRUE(committed_before_done);
    // All on the writer's own thread, none on the callers'.
    EXPECT_EQ(threads.size(), 1u);
    EXPECT_EQ(threads.count(std::this_thread::get_id()), 0u);
  }
  writer.Stop();
  EXPECT_EQ(relay.published().size(), static_cast<size_t>(kCalls));

  // Once stopped, a call is refused at once, on the caller's thread.
  bool refused = false;
  writer.CreateAsync({"late", "alice", "bob", 100, "USD", ""}, "",
                     [&](CreateOutcome out) { refused = absl::IsUnavailable(out.status); });
  EXPECT_TRUE(refused);
}

TEST_F(PaymentWriterTest, AcknowledgementsRideTheGroupCommit) {
  RecordingRelay relay;
  PaymentWriter writer(*store_, clock_, ids_, metrics_, WriterOptions{});
  writer.Start(relay);
  CreateOutcome a = writer.Create({"k1", "alice", "bob", 100, "USD", ""});
  CreateOutcome b = writer.Create({"k2", "alice", "bob", 100, "USD", ""});
  clock_.Advance(absl::Seconds(1));
  auto marked = writer.RecordAcks({a.record.outbox.message_id, "unknown"});
  ASSERT_OK(marked);
  EXPECT_EQ(marked->closed, 1);
  ASSERT_OK(writer.RecordPublishFailure({b.record.outbox.message_id}, "nack"));
  writer.Stop();
  EXPECT_EQ(store_->Get(a.record.payment_id)->outbox.status, OutboxStatus::kSent);
  EXPECT_EQ(store_->Get(a.record.payment_id)->outbox.sent_at, 1'001'000);
  EXPECT_EQ(store_->Get(b.record.payment_id)->outbox.last_error, "nack");
  EXPECT_TRUE(absl::IsUnavailable(writer.RecordAcks({"x"}).status()));
}

// With a linger, acknowledgements that find no payment queued wait for the
// next one and share its commit: one transaction (one fsync) for both.
TEST_F(PaymentWriterTest, AcknowledgementsLingerForTheNextPaymentsCommit) {
  RecordingRelay relay;
  WriterOptions options;
  options.ack_linger = absl::Seconds(30);  // the payment below ends it, not the time
  PaymentWriter writer(*store_, clock_, ids_, metrics_, options);
  writer.Start(relay);
  CreateOutcome a = writer.Create({"k1", "alice", "bob", 100, "USD", ""});
  const int64_t groups = writer.groups_committed();
  absl::StatusOr<AckTally> marked;
  std::thread acks([&] { marked = writer.RecordAcks({a.record.outbox.message_id}); });
  // Once the writer lingers with the acknowledgement, a payment arrives.
  while (writer.ack_lingers() == 0) absl::SleepFor(absl::Milliseconds(1));
  CreateOutcome b = writer.Create({"k2", "alice", "bob", 100, "USD", ""});
  ASSERT_OK(b.status);
  acks.join();
  ASSERT_OK(marked);
  EXPECT_EQ(marked->closed, 1);
  EXPECT_EQ(writer.groups_committed(), groups + 1) << "the ack and the payment in one commit";
  // Stopping ends a linger at once: the acknowledgement is committed alone.
  CreateOutcome c = writer.Create({"k3", "alice", "bob", 100, "USD", ""});
  std::thread last([&] { marked = writer.RecordAcks({c.record.outbox.message_id}); });
  while (writer.ack_lingers() == 1) absl::SleepFor(absl::Milliseconds(1));
  writer.Stop();
  last.join();
  ASSERT_OK(marked);
  EXPECT_EQ(store_->Get(c.record.payment_id)->outbox.status, OutboxStatus::kSent);
}

TEST_F(PaymentWriterTest, EachRowTurnedSentIsTimedFromItsCreation) {
  RecordingRelay relay;
  PaymentWriter writer(*store_, clock_, ids_, metrics_, WriterOptions{});
  writer.Start(relay);
  CreateOutcome a = writer.Create({"k1", "alice", "bob", 100, "USD", ""});
  CreateOutcome b = writer.Create({"k2", "alice", "bob", 100, "USD", ""});
  clock_.Advance(absl::Milliseconds(1500));
  ASSERT_OK(writer.RecordAcks({a.record.outbox.message_id}));
  clock_.Advance(absl::Seconds(20));
  // b after 21.5 s; a again changes nothing and is not timed twice.
  ASSERT_OK(writer.RecordAcks({b.record.outbox.message_id, a.record.outbox.message_id}));
  writer.Stop();
  const std::string text = metrics_.Render();
  EXPECT_NE(text.find("# TYPE outbox_create_to_sent_seconds histogram\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("\noutbox_create_to_sent_seconds_count 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\noutbox_create_to_sent_seconds_sum 23\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\noutbox_create_to_sent_seconds_bucket{le=\"1\"} 0\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("\noutbox_create_to_sent_seconds_bucket{le=\"2.5\"} 1\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("\noutbox_create_to_sent_seconds_bucket{le=\"30\"} 2\n"), std::string::npos)
      << text;
}

TEST_F(PaymentWriterTest, WhileAccountingLagsNewPaymentsWaitForItsAcks) {
  RecordingRelay relay;
  WriterOptions options;
  options.max_unsent = 2;
  options.max_hold = absl::Minutes(1);  // only acks end this hold
  PaymentWriter writer(*store_, clock_, ids_, metrics_, options);
  writer.Start(relay);
  std::vector<CreateOutcome> made;
  for (int i = 0; i < 3; ++i) {
    made.push_back(writer.Create({absl::StrCat("k", i), "alice", "bob", 100, "USD", ""}));
    ASSERT_OK(made.back().status);
  }
  EXPECT_EQ(writer.holds(), 0);  // no acks yet: nothing is held for them
  // Acks flow, and 2 payments are still SENDING: accounting lags.
  ASSERT_OK(writer.RecordAcks({made[0].record.outbox.message_id}));
  Notification created;
  CreateOutcome late;
  writer.CreateAsync({"k3", "alice", "bob", 100, "USD", ""}, "", [&](CreateOutcome out) {
    late = std::move(out);
    created.Notify();
  });
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (writer.holds() == 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  ASSERT_EQ(writer.holds(), 1);
  EXPECT_FALSE(created.HasBeenNotified());
  // The next ack is committed on its own; the backlog is under the bound
  // again, so the held payment goes into the next group.
  ASSERT_OK(writer.RecordAcks({made[1].record.outbox.message_id}));
  ASSERT_TRUE(created.WaitForNotificationWithTimeout(absl::Seconds(30)));
  ASSERT_OK(late.status);
  writer.Stop();
  EXPECT_EQ(relay.published().size(), 4u);
}

TEST_F(PaymentWriterTest, WithoutAcksNothingIsHeld) {
  // Accounting away: the backlog grows, callers are not held for it.
  RecordingRelay relay;
  WriterOptions options;
  options.max_unsent = 1;
  options.max_hold = absl::Minutes(1);
  PaymentWriter writer(*store_, clock_, ids_, metrics_, options);
  writer.Start(relay);
  for (int i = 0; i < 5; ++i) {
    ASSERT_OK(writer.Create({absl::StrCat("k", i), "alice", "bob", 100, "USD", ""}).status);
  }
  writer.Stop();
  EXPECT_EQ(writer.holds(), 0);
  EXPECT_EQ(relay.published().size(), 5u);
}

}  // namespace
}  // namespace outbox::payment
