#include "payment_service/payment_writer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"

namespace outbox::payment {
namespace {

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
};

TEST_F(PaymentWriterTest, ConcurrentCallersAreCommittedAndPublishedAfterCommit) {
  absl::Mutex mu;
  std::vector<OutgoingMessage> published;
  WriterOptions options;
  options.backoff.base = absl::Seconds(3);
  options.max_attempts = 7;
  PaymentWriter writer(*store_, clock_, ids_, options, [&](std::vector<OutgoingMessage> m) {
    // Called after the commit: the rows are already visible.
    for (const auto& msg : m) {
      auto page = store_->List(std::nullopt, 0, 1000);
      bool found = false;
      for (const auto& p : page->payments) found |= p.outbox.message_id == msg.message_id;
      EXPECT_TRUE(found) << msg.message_id;
    }
    absl::MutexLock lock(&mu);
    published.insert(published.end(), m.begin(), m.end());
  });
  writer.Start();
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
  absl::MutexLock lock(&mu);
  ASSERT_EQ(published.size(), static_cast<size_t>(kThreads * kEach));
  EXPECT_EQ(published[0].routing_key, "PAY_QUEUE");
  EXPECT_EQ(published[0].reply_to, "ACC_QUEUE");
}

TEST_F(PaymentWriterTest, ReplayIsNotPublishedAgainAndConflictIsRefused) {
  int published = 0;
  PaymentWriter writer(*store_, clock_, ids_, WriterOptions{},
                       [&](std::vector<OutgoingMessage> m) { published += m.size(); });
  writer.Start();
  PaymentInput in{"same", "alice", "bob", 100, "USD", ""};
  CreateOutcome a = writer.Create(in);
  CreateOutcome b = writer.Create(in);
  in.amount_minor = 200;
  CreateOutcome c = writer.Create(in);
  writer.Stop();
  ASSERT_TRUE(a.status.ok());
  EXPECT_FALSE(a.replayed);
  EXPECT_TRUE(b.replayed);
  EXPECT_EQ(a.record.payment_id, b.record.payment_id);
  EXPECT_TRUE(absl::IsAlreadyExists(c.status));
  EXPECT_EQ(published, 1);
}

}  // namespace
}  // namespace outbox::payment
