#include "payment_service/payment_store.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <deque>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "shared/outbox/internal/state_machine.h"
#include "shared/sqlite/internal/group_writer.h"
#include "shared/sqlite/internal/sqlite_outbox.h"
#include "shared/testing/fakes.h"
#include "shared/testing/status_matchers.h"

namespace outbox::payment {
namespace {

using ::outbox::testing::RecordingRelay;
using ::outbox::testing::StatusIs;
using ::testing::HasSubstr;

// Hands out the ids it was given first, then "id-1", "id-2", ...
class ScriptedIds final : public IdGenerator {
 public:
  std::string NewId() override {
    if (script.empty()) return absl::StrCat("id-", ++next_);
    std::string id = script.front();
    script.pop_front();
    return id;
  }
  std::deque<std::string> script;

 private:
  int next_ = 0;
};

// CreatePayment's business write on the group writer the producer runs.
// Group() queues its requests on a writer whose thread never ran and
// stops it, so they are committed in ONE group, in their order.
class PaymentStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/payment_store_test.XXXXXX";
    dir_ = mkdtemp(tmpl);
    auto store = PaymentStore::Open(dir_ + "/payment.db", DbOptions{});
    ASSERT_OK(store);
    store_ = std::move(store).value();
    RetryPolicy retry;
    retry.max_attempts = 5;
    outbox_ = std::make_unique<SqliteOutbox>(store_->file(), SystemClock::Get(), retry);
  }
  void TearDown() override {
    writer_.reset();
    outbox_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  PaymentInput Input(const std::string& key, int64_t amount = 100) {
    return {key, "alice", "bob", amount, "EUR", "d"};
  }

  PaymentCreator Creator() {
    return PaymentCreator(
        [this](MessageSpec spec, BusinessWrite business, GroupWriter::WriteDone done) {
          spec.topic = "PAY_QUEUE";
          spec.reply_to = "ACC_QUEUE";
          writer_->WriteAsync(std::move(spec), std::move(business), std::move(done));
        },
        *store_, ids_, SystemClock::Get());
  }

  std::vector<CreateOutcome> Group(const std::vector<PaymentInput>& inputs) {
    writer_ = std::make_unique<GroupWriter>(store_->file(), *outbox_, relay_, SystemClock::Get(),
                                            metrics_, GroupWriterOptions{});
    const int64_t groups = writer_->groups_committed();  // the registry's, over the test
    std::vector<CreateOutcome> outcomes(inputs.size());
    PaymentCreator creator = Creator();
    for (size_t i = 0; i < inputs.size(); ++i) {
      creator.CreateAsync(inputs[i], absl::StrCat("trace-", i),
                          [&outcomes, i](CreateOutcome out) { outcomes[i] = std::move(out); });
    }
    writer_->Stop();  // never started: commits the queue here, as one group
    EXPECT_EQ(writer_->groups_committed(), groups + 1);
    return outcomes;
  }

  // What recovery or accounting's reply would do, from another connection.
  void Exec(const std::string& sql) {
    SQLite::Database other(dir_ + "/payment.db", SQLite::OPEN_READWRITE);
    other.exec(sql);
  }

  std::string dir_;
  ScriptedIds ids_;
  MetricsRegistry metrics_;
  RecordingRelay relay_;
  std::unique_ptr<PaymentStore> store_;
  std::unique_ptr<SqliteOutbox> outbox_;
  std::unique_ptr<GroupWriter> writer_;
};

TEST_F(PaymentStoreTest, WritesPaymentAndOutboxRowTogether) {
  auto out = Group({Input("k1"), Input("k2")});
  ASSERT_EQ(out.size(), 2u);
  ASSERT_OK(out[0].status);
  ASSERT_OK(out[1].status);
  EXPECT_FALSE(out[1].replayed);
  auto got = store_->Get(out[1].record.payment_id);
  ASSERT_OK(got);
  EXPECT_EQ(got->id, out[1].record.id);
  EXPECT_EQ(got->created_at, out[1].record.created_at);
  EXPECT_EQ(got->input.idempotency_key, "k2");
  EXPECT_EQ(got->outbox.status, OutboxStatus::kSending);
  EXPECT_EQ(got->outbox.message_id, out[1].record.outbox.message_id);
  EXPECT_EQ(got->outbox.biz_key, out[1].record.payment_id);
  EXPECT_EQ(got->outbox.attempts, 1);
  // Everything needed to publish it again is stored with the row.
  EXPECT_EQ(got->outbox.topic, "PAY_QUEUE");
  EXPECT_EQ(got->outbox.message_type, "PaymentCreated");
  EXPECT_EQ(got->outbox.reply_to, "ACC_QUEUE");
  EXPECT_EQ(got->outbox.traceparent, "trace-1");
  EXPECT_EQ(got->outbox.max_attempts, 5);
  EXPECT_EQ(got->outbox.id, out[1].record.outbox.id);
  EXPECT_EQ(relay_.ids().size(), 2u);  // both handed to the relay once committed
}

TEST_F(PaymentStoreTest, ReplaysTheSameRequestAndRefusesADifferentOne) {
  auto first = Group({Input("k1")});
  ASSERT_OK(first[0].status);
  // The same key twice in a later group, and once with another amount.
  auto again = Group({Input("k1"), Input("k1"), Input("k1", 999)});
  ASSERT_OK(again[0].status);
  EXPECT_TRUE(again[0].replayed);
  EXPECT_TRUE(again[1].replayed);
  EXPECT_EQ(again[0].record.payment_id, first[0].record.payment_id);
  EXPECT_EQ(again[0].record.outbox.message_id, first[0].record.outbox.message_id);
  EXPECT_EQ(again[0].record.outbox.traceparent, "trace-0");  // the first request's
  EXPECT_THAT(again[2].status,
              StatusIs(absl::StatusCode::kAlreadyExists,
                       HasSubstr(absl::StrCat("idempotency_key 'k1' was already used for a "
                                              "different payment (",
                                              first[0].record.payment_id, ")"))));
  auto page = store_->List(std::nullopt, 0, 100);
  ASSERT_OK(page);
  EXPECT_EQ(page->items.size(), 1u);
  EXPECT_EQ(relay_.ids().size(), 1u);  // a replay is not published again
}

TEST_F(PaymentStoreTest, DuplicatesInOneGroupAreOnePayment) {
  auto out = Group({Input("k5"), Input("k5"), Input("k5", 7)});
  ASSERT_OK(out[0].status);
  EXPECT_FALSE(out[0].replayed);
  ASSERT_OK(out[1].status);
  EXPECT_TRUE(out[1].replayed);
  EXPECT_EQ(out[1].record.payment_id, out[0].record.payment_id);
  EXPECT_EQ(out[1].record.id, out[0].record.id);
  EXPECT_EQ(out[1].record.outbox.message_id, out[0].record.outbox.message_id);
  EXPECT_EQ(out[1].record.outbox.traceparent, "trace-0");
  EXPECT_THAT(out[2].status,
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("idempotency_key 'k5'")));
  EXPECT_EQ(store_->List(std::nullopt, 0, 100)->items.size(), 1u);
  EXPECT_EQ(relay_.ids().size(), 1u);
}

TEST_F(PaymentStoreTest, AFailingRequestFailsAlone) {
  // Payment ids, then message ids: the second request's message id clashes.
  ids_.script = {"pay-a", "dup", "pay-b", "dup", "pay-c", "msg-c"};
  auto out = Group({Input("k2"), Input("k4"), Input("k3")});
  EXPECT_OK(out[0].status);
  EXPECT_THAT(out[1].status,
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("outbox.message_id")));
  EXPECT_OK(out[2].status);
  auto page = store_->List(std::nullopt, 0, 100);
  ASSERT_OK(page);
  ASSERT_EQ(page->items.size(), 2u);  // no payment row left without its outbox row
  EXPECT_EQ(page->items[0].input.idempotency_key, "k2");
  EXPECT_EQ(page->items[1].input.idempotency_key, "k3");
  // The refused request's key is free again.
  EXPECT_OK(Group({Input("k4")})[0].status);
}

// The business write's statements are kept across groups; none may hold
// the writer's read snapshot past its transaction, or a commit by another
// process (recovery's claim) would leave every later write SQLITE_BUSY.
TEST_F(PaymentStoreTest, KeptStatementsSurviveAnotherProcesssCommitBetweenGroups) {
  auto first = Group({Input("k1"), Input("k2")});
  ASSERT_OK(first[0].status);
  Exec("UPDATE outbox SET attempts = 2 WHERE message_id = '" + first[1].record.outbox.message_id +
       "'");
  auto replay = Group({Input("k1"), Input("k1", 5)});  // a found key leaves nothing mid-step
  EXPECT_TRUE(replay[0].replayed);
  Exec("UPDATE outbox SET attempts = 3 WHERE message_id = '" + first[1].record.outbox.message_id +
       "'");
  auto out = Group({Input("k3")});
  ASSERT_OK(out[0].status);
  EXPECT_EQ(store_->Get(out[0].record.payment_id)->outbox.status, OutboxStatus::kSending);
}

TEST_F(PaymentStoreTest, CreateWaitsForTheCommitAndIsRefusedOnceStopping) {
  writer_ = std::make_unique<GroupWriter>(store_->file(), *outbox_, relay_, SystemClock::Get(),
                                          metrics_, GroupWriterOptions{});
  writer_->Start();
  PaymentCreator creator = Creator();
  CreateOutcome out = creator.Create(Input("k1"));
  ASSERT_OK(out.status);
  EXPECT_OK(store_->Get(out.record.payment_id));
  writer_->Stop();
  EXPECT_TRUE(absl::IsUnavailable(creator.Create(Input("k2")).status));
}

TEST_F(PaymentStoreTest, ListsPagesAndFiltersByStatus) {
  std::vector<PaymentInput> inputs;
  for (int i = 0; i < 5; ++i) inputs.push_back(Input(absl::StrCat("k", i)));
  auto out = Group(inputs);
  Exec("UPDATE outbox SET status = 'SENT', sent_at = 5 WHERE message_id IN ('" +
       out[1].record.outbox.message_id + "', '" + out[3].record.outbox.message_id + "')");
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
  EXPECT_EQ(sent->items[0].outbox.message_id, out[1].record.outbox.message_id);
  auto sending = store_->List(OutboxStatus::kSending, 0, 2);
  ASSERT_EQ(sending->items.size(), 2u);
  EXPECT_EQ(sending->items[0].outbox.message_id, out[0].record.outbox.message_id);
  EXPECT_EQ(sending->items[1].outbox.message_id, out[2].record.outbox.message_id);
  auto sending2 = store_->List(OutboxStatus::kSending, sending->next_cursor, 2);
  ASSERT_EQ(sending2->items.size(), 1u);
  EXPECT_EQ(sending2->items[0].outbox.message_id, out[4].record.outbox.message_id);
  EXPECT_EQ(sending2->next_cursor, 0);
  EXPECT_TRUE(store_->List(OutboxStatus::kFailed, 0, 10)->items.empty());
  EXPECT_TRUE(absl::IsNotFound(store_->Get("missing").status()));
}

}  // namespace
}  // namespace outbox::payment
