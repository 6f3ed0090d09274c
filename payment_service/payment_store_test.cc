#include "payment_service/payment_store.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "shared/outbox/state_machine.h"
#include "shared/testing/status_matchers.h"

namespace outbox::payment {
namespace {

using ::outbox::testing::StatusIs;
using ::testing::HasSubstr;

class PaymentStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/payment_store_test.XXXXXX";
    dir_ = mkdtemp(tmpl);
    auto store = PaymentStore::Open(dir_ + "/payment.db", DbOptions{});
    ASSERT_OK(store);
    store_ = std::move(store).value();
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  NewPayment Make(const std::string& key, int64_t amount = 100) {
    NewPayment n;
    n.input = {key, "alice", "bob", amount, "EUR", "d"};
    n.payment_id = absl::StrCat("pay-", ++seq_);
    RetryPolicy retry;
    retry.max_attempts = 5;
    n.outbox = NewOutboxMessage({absl::StrCat("msg-", seq_), kBizType, n.payment_id, "PAY_QUEUE",
                                 kPaymentCreatedType, "ACC_QUEUE", "payload"},
                                10, retry);
    return n;
  }

  std::string dir_;
  int seq_ = 0;
  std::unique_ptr<PaymentStore> store_;
};

TEST_F(PaymentStoreTest, WritesPaymentAndOutboxRowTogether) {
  auto out = store_->CreateBatch({Make("k1"), Make("k2")});
  ASSERT_EQ(out.size(), 2u);
  ASSERT_OK(out[0].status);
  ASSERT_OK(out[1].status);
  auto got = store_->Get(out[1].record.payment_id);
  ASSERT_OK(got);
  EXPECT_EQ(got->input.idempotency_key, "k2");
  EXPECT_EQ(got->outbox.status, OutboxStatus::kSending);
  EXPECT_EQ(got->outbox.message_id, "msg-2");
  EXPECT_EQ(got->outbox.attempts, 1);
  // Everything needed to publish it again is stored with the row.
  EXPECT_EQ(got->outbox.topic, "PAY_QUEUE");
  EXPECT_EQ(got->outbox.message_type, "PaymentCreated");
  EXPECT_EQ(got->outbox.reply_to, "ACC_QUEUE");
  EXPECT_EQ(got->outbox.max_attempts, 5);
  EXPECT_EQ(got->outbox.id, out[1].record.outbox.id);
}

TEST_F(PaymentStoreTest, ReplaysTheSameRequestAndRefusesADifferentOne) {
  auto first = store_->CreateBatch({Make("k1")});
  ASSERT_OK(first[0].status);
  // Same key twice in one group and once more later: one payment only.
  auto again = store_->CreateBatch({Make("k1"), Make("k1"), Make("k1", 999)});
  EXPECT_TRUE(again[0].replayed);
  EXPECT_TRUE(again[1].replayed);
  EXPECT_EQ(again[0].record.payment_id, first[0].record.payment_id);
  EXPECT_TRUE(absl::IsAlreadyExists(again[2].status)) << again[2].status;
  auto page = store_->List(std::nullopt, 0, 100);
  ASSERT_OK(page);
  EXPECT_EQ(page->items.size(), 1u);
}

TEST_F(PaymentStoreTest, AFailingRequestFailsAlone) {
  NewPayment bad = Make("k2");
  NewPayment good = Make("k3");
  bad.outbox.message_id = "dup";
  NewPayment clash = Make("k4");
  clash.outbox.message_id = "dup";  // unique message_id violated by the second
  auto out = store_->CreateBatch({bad, clash, good});
  EXPECT_OK(out[0].status);
  EXPECT_THAT(out[1].status,
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("outbox.message_id")));
  EXPECT_OK(out[2].status);
  auto page = store_->List(std::nullopt, 0, 100);
  ASSERT_OK(page);
  ASSERT_EQ(page->items.size(), 2u);  // no payment row left without its outbox row
  EXPECT_EQ(page->items[0].input.idempotency_key, "k2");
  EXPECT_EQ(page->items[1].input.idempotency_key, "k3");
}

TEST_F(PaymentStoreTest, MarkSentIsIdempotentAndIgnoresUnknownIds) {
  auto out = store_->CreateBatch({Make("k1"), Make("k2")});
  auto changed = store_->RecordAcks({"msg-1", "msg-1", "nope"}, 500);
  ASSERT_OK(changed);
  EXPECT_EQ(changed->closed, 1);
  EXPECT_EQ(changed->late, 0);
  changed = store_->RecordAcks({"msg-1"}, 600);
  ASSERT_OK(changed);
  EXPECT_EQ(changed->changed(), 0);
  auto got = store_->Get(out[0].record.payment_id);
  EXPECT_EQ(got->outbox.status, OutboxStatus::kSent);
  EXPECT_EQ(got->outbox.sent_at, 500);
}

// The group commit's statements are kept across groups; none may hold the
// writer's read snapshot past its transaction, or a commit by another
// process (recovery's claim) would leave every later write SQLITE_BUSY.
TEST_F(PaymentStoreTest, KeptStatementsSurviveAnotherProcesssCommitBetweenGroups) {
  ASSERT_OK(store_->CreateBatch({Make("k1"), Make("k2")})[0].status);
  ASSERT_OK(store_->RecordAcks({"unknown", "msg-1"}, 500));  // the last load finds its row
  {
    SQLite::Database other(dir_ + "/payment.db", SQLite::OPEN_READWRITE);
    other.exec("UPDATE outbox SET attempts = 2 WHERE message_id = 'msg-2'");
  }
  auto out = store_->CommitGroup({Make("k3")}, {"msg-2"}, 700, nullptr);
  ASSERT_OK(out[0].status);
  ASSERT_OK(store_->RecordAcks({"msg-3"}, 800));
  EXPECT_EQ(store_->Get(out[0].record.payment_id)->outbox.status, OutboxStatus::kSent);
}

TEST_F(PaymentStoreTest, ALateAcknowledgementClosesAFailedRow) {
  auto out = store_->CreateBatch({Make("k1")});
  {
    // What recovery does when the budget is spent.
    SQLite::Database db(dir_ + "/payment.db", SQLite::OPEN_READWRITE);
    db.exec("UPDATE outbox SET status = 'FAILED', last_error = 'no acknowledgement'");
  }
  auto changed = store_->RecordAcks({"msg-1"}, 700);
  ASSERT_OK(changed);
  EXPECT_EQ(changed->closed, 0);
  EXPECT_EQ(changed->late, 1);
  auto got = store_->Get(out[0].record.payment_id);
  EXPECT_EQ(got->outbox.status, OutboxStatus::kSent);
  EXPECT_EQ(got->outbox.sent_at, 700);
  EXPECT_EQ(got->outbox.last_error, "no acknowledgement");  // why it had failed
}

TEST_F(PaymentStoreTest, ListsPagesAndFiltersByStatus) {
  std::vector<NewPayment> batch;
  for (int i = 0; i < 5; ++i) batch.push_back(Make(absl::StrCat("k", i)));
  store_->CreateBatch(batch);
  ASSERT_OK(store_->RecordAcks({"msg-2", "msg-4"}, 5));
  auto p1 = store_->List(std::nullopt, 0, 2);
  ASSERT_OK(p1);
  ASSERT_EQ(p1->items.size(), 2u);
  ASSERT_GT(p1->next_cursor, 0);
  auto p2 = store_->List(std::nullopt, p1->next_cursor, 2);
  auto p3 = store_->List(std::nullopt, p2->next_cursor, 2);
  EXPECT_EQ(p3->items.size(), 1u);
  EXPECT_EQ(p3->next_cursor, 0);
  auto sent = store_->List(OutboxStatus::kSent, 0, 100);
  ASSERT_EQ(sent->items.size(), 2u);
  EXPECT_EQ(sent->items[0].outbox.message_id, "msg-2");
  auto sending = store_->List(OutboxStatus::kSending, 0, 2);
  ASSERT_EQ(sending->items.size(), 2u);
  EXPECT_EQ(sending->items[0].outbox.message_id, "msg-1");
  EXPECT_EQ(sending->items[1].outbox.message_id, "msg-3");
  auto sending2 = store_->List(OutboxStatus::kSending, sending->next_cursor, 2);
  ASSERT_EQ(sending2->items.size(), 1u);
  EXPECT_EQ(sending2->items[0].outbox.message_id, "msg-5");
  EXPECT_EQ(sending2->next_cursor, 0);
  EXPECT_TRUE(store_->List(OutboxStatus::kFailed, 0, 10)->items.empty());
  EXPECT_TRUE(absl::IsNotFound(store_->Get("missing").status()));
}

}  // namespace
}  // namespace outbox::payment
