// PgPaymentStore on a server of scripts/postgres_node.sh: CreatePayment's
// business write in PgGroupWriter's groups (replay, conflict, one key in one
// group, the same key from two writers at once), the reads (paging, status
// filter) and the schema (a newer database refused untouched). One server
// for the binary; each test gets a PostgreSQL schema (search_path) of its own.
#include "payment_service/payment_pg_store.h"

#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/base/internal/mutex.h"
#include "shared/postgres/internal/pg_group_writer.h"
#include "shared/postgres/internal/pg_outbox.h"
#include "shared/testing/fakes.h"
#include "shared/testing/pg_servers.h"
#include "shared/testing/status_matchers.h"

namespace outbox::payment {
namespace {

using ::outbox::testing::AddPgServers;
using ::outbox::testing::FreshPgSchema;
using ::outbox::testing::PgServersEnvironment;
using ::outbox::testing::PgUrlWith;
using ::outbox::testing::RecordingRelay;
using ::outbox::testing::StatusIs;
using ::testing::HasSubstr;

PgServersEnvironment* const kServer = AddPgServers("payment_pg_store_test");

// Hands out "id-1", "id-2", ... (payment ids and message ids alike).
class CountingIds final : public IdGenerator {
 public:
  std::string NewId() override { return absl::StrCat(prefix, "-", ++next_); }
  std::string prefix = "id";

 private:
  std::atomic<int> next_{0};
};

// One process's writing side: a session, its outbox and a group writer
// feeding a recording relay.
struct Writer {
  explicit Writer(const std::string& conninfo) {
    auto opened = PgSession::Open(conninfo);
    EXPECT_OK(opened);
    session = std::move(opened).value();
    outbox = std::make_unique<PgOutbox>(*session, SystemClock::Get(), RetryPolicy{});
    writer = std::make_unique<PgGroupWriter>(*session, *outbox, relay, SystemClock::Get(), metrics,
                                             PgGroupWriterOptions{});
  }
  ~Writer() { writer->Stop(); }

  // Queues on the writer; `hold` (when set) runs after the business write.
  PaymentCreator Creator(IdGenerator& ids, std::function<void()> hold = nullptr) {
    return PaymentCreator(
        [this, hold](MessageSpec spec, std::shared_ptr<const NewPayment> payment,
                     std::shared_ptr<CreateOutcome> outcome, GroupWriter::WriteDone done) {
          spec.topic = "PAY_QUEUE";
          spec.reply_to = "ACC_QUEUE";
          writer->WriteAsync(
              std::move(spec),
              [payment, outcome, hold](PgConnection& conn) {
                absl::Status s = PgPaymentStore::WritePayment(conn, *payment, *outcome);
                if (hold) hold();
                return s;
              },
              std::move(done));
        },
        ids, SystemClock::Get());
  }

  MetricsRegistry metrics;
  RecordingRelay relay;
  std::unique_ptr<PgSession> session;
  std::unique_ptr<PgOutbox> outbox;
  std::unique_ptr<PgGroupWriter> writer;
};

class PgPaymentStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> next{0};
    schema_ = absl::StrCat("t", next++);
    conninfo_ = FreshPgSchema(kServer->url(), schema_);
    ASSERT_FALSE(conninfo_.empty());
    auto admin = PgConnection::Open(kServer->url());
    ASSERT_OK(admin);
    admin_ = std::move(admin).value();
  }

  void OpenStore() {
    auto store = PgPaymentStore::Open(conninfo_);
    ASSERT_OK(store);
    store_ = std::move(store).value();
  }

  PaymentInput Input(const std::string& key, int64_t amount = 100) {
    return {key, "alice", "bob", amount, "EUR", "d"};
  }

  // The requests committed in ONE group, in their order: queued on a writer
  // whose thread never ran, then Stop() commits them here.
  std::vector<CreateOutcome> Group(const std::vector<PaymentInput>& inputs) {
    Writer w(conninfo_);
    PaymentCreator creator = w.Creator(ids_);
    std::vector<CreateOutcome> outcomes(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      creator.CreateAsync(inputs[i], absl::StrCat("trace-", i),
                          [&outcomes, i](CreateOutcome out) { outcomes[i] = std::move(out); });
    }
    w.writer->Stop();
    EXPECT_EQ(w.writer->groups_committed(), 1);
    return outcomes;
  }

  int64_t Count(const std::string& sql) { return ::outbox::testing::PgCount(*admin_, sql); }

  std::string schema_;
  std::string conninfo_;
  std::unique_ptr<PgConnection> admin_;
  CountingIds ids_;
  std::unique_ptr<PgPaymentStore> store_;
};

TEST_F(PgPaymentStoreTest, WritesReplaysAndRefusesADifferentRequest) {
  OpenStore();
  auto first = Group({Input("k1"), Input("k2")});
  ASSERT_OK(first[0].status);
  ASSERT_OK(first[1].status);
  EXPECT_FALSE(first[0].replayed);
  EXPECT_GT(first[1].record.id, first[0].record.id);
  auto got = store_->Get(first[1].record.payment_id);
  ASSERT_OK(got);
  EXPECT_EQ(got->input.idempotency_key, "k2");
  EXPECT_EQ(got->input.amount_minor, 100);
  EXPECT_EQ(got->id, first[1].record.id);
  EXPECT_EQ(got->outbox.message_id, first[1].record.outbox.message_id);
  EXPECT_EQ(got->outbox.status, OutboxStatus::kSending);
  EXPECT_EQ(got->outbox.traceparent, "trace-1");

  auto again = Group({Input("k1"), Input("k1", 7)});
  ASSERT_OK(again[0].status);
  EXPECT_TRUE(again[0].replayed);
  EXPECT_EQ(again[0].record.payment_id, first[0].record.payment_id);
  EXPECT_EQ(again[0].record.id, first[0].record.id);
  EXPECT_EQ(again[0].record.outbox.message_id, first[0].record.outbox.message_id);
  EXPECT_EQ(again[0].record.outbox.traceparent, "trace-0");
  EXPECT_THAT(again[1].status,
              StatusIs(absl::StatusCode::kAlreadyExists,
                       HasSubstr("idempotency_key 'k1' was already used for a different payment (" +
                                 first[0].record.payment_id + ")")));
  EXPECT_EQ(Count("SELECT count(*) FROM " + schema_ + ".payments"), 2);
  EXPECT_EQ(Count("SELECT count(*) FROM " + schema_ + ".outbox"), 2);
  EXPECT_THAT(store_->Get("missing").status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("'missing'")));
}

TEST_F(PgPaymentStoreTest, OneKeyTwiceInOneGroupIsOnePayment) {
  OpenStore();
  PaymentInput other = Input("k5");
  other.amount_minor += 1;
  auto out = Group({Input("k5"), Input("k5"), Input("k6"), other});
  ASSERT_OK(out[0].status);
  // As on SQLite: the same request again in the group is a replay of the
  // first, SENDING with it; another request with the key is refused.
  ASSERT_OK(out[1].status);
  EXPECT_TRUE(out[1].replayed);
  EXPECT_EQ(out[1].record.payment_id, out[0].record.payment_id);
  EXPECT_EQ(out[1].record.outbox.status, OutboxStatus::kSending);
  ASSERT_OK(out[2].status);
  EXPECT_THAT(out[3].status, StatusIs(absl::StatusCode::kAlreadyExists,
                                      HasSubstr("already used for a different payment")));
  EXPECT_EQ(Count("SELECT count(*) FROM " + schema_ + ".payments"), 2);
  // Once committed, the same request is a replay.
  auto later = Group({Input("k5")});
  EXPECT_TRUE(later[0].replayed);
  EXPECT_EQ(later[0].record.payment_id, out[0].record.payment_id);
}

// Two processes' groups on one database: B's insert of a key that A's open
// transaction holds waits for A's commit, then replays A's payment.
TEST_F(PgPaymentStoreTest, TheSameKeyFromTwoWritersAtOnceIsOnePayment) {
  OpenStore();
  Writer a(conninfo_);
  Writer b(conninfo_);
  a.writer->Start();
  b.writer->Start();
  Notification a_wrote, release, a_done, b_done;
  CountingIds a_ids, b_ids;
  a_ids.prefix = "a";
  b_ids.prefix = "b";
  PaymentCreator creator_a = a.Creator(a_ids, [&] {
    a_wrote.Notify();
    release.WaitForNotification();
  });
  PaymentCreator creator_b = b.Creator(b_ids);
  CreateOutcome out_a, out_b;
  creator_a.CreateAsync(Input("kc"), "", [&](CreateOutcome out) {
    out_a = std::move(out);
    a_done.Notify();
  });
  a_wrote.WaitForNotification();  // A's row is in, uncommitted
  creator_b.CreateAsync(Input("kc"), "", [&](CreateOutcome out) {
    out_b = std::move(out);
    b_done.Notify();
  });
  // B waits on A's row lock.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (Count("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'") < 1 &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(Count("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"), 1);
  release.Notify();
  a_done.WaitForNotification();
  b_done.WaitForNotification();
  ASSERT_OK(out_a.status);
  EXPECT_FALSE(out_a.replayed);
  ASSERT_OK(out_b.status);
  EXPECT_TRUE(out_b.replayed);
  EXPECT_EQ(out_b.record.payment_id, out_a.record.payment_id);
  EXPECT_EQ(out_b.record.outbox.message_id, out_a.record.outbox.message_id);
  EXPECT_EQ(Count("SELECT count(*) FROM " + schema_ + ".payments"), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM " + schema_ + ".outbox"), 1);
  EXPECT_EQ(b.relay.ids().size(), 0u);  // B published nothing
}

TEST_F(PgPaymentStoreTest, ListsPagesAndFiltersByStatus) {
  OpenStore();
  std::vector<PaymentInput> inputs;
  for (int i = 0; i < 5; ++i) inputs.push_back(Input(absl::StrCat("k", i)));
  auto out = Group(inputs);
  for (const CreateOutcome& o : out) ASSERT_OK(o.status);
  ASSERT_OK(admin_->Exec("UPDATE " + schema_ + ".outbox SET status = 'SENT', sent_at = 5 " +
                         "WHERE message_id IN ('" + out[1].record.outbox.message_id + "', '" +
                         out[3].record.outbox.message_id + "')"));
  auto p1 = store_->List(std::nullopt, 0, 2);
  ASSERT_OK(p1);
  ASSERT_EQ(p1->items.size(), 2u);
  ASSERT_GT(p1->next_cursor, 0);
  auto p2 = store_->List(std::nullopt, p1->next_cursor, 2);
  ASSERT_OK(p2);
  EXPECT_EQ(p2->items[0].input.idempotency_key, "k2");
  auto p3 = store_->List(std::nullopt, p2->next_cursor, 2);
  ASSERT_OK(p3);
  EXPECT_EQ(p3->items.size(), 1u);
  EXPECT_EQ(p3->next_cursor, 0);
  auto sent = store_->List(OutboxStatus::kSent, 0, 100);
  ASSERT_OK(sent);
  ASSERT_EQ(sent->items.size(), 2u);
  EXPECT_EQ(sent->items[0].outbox.message_id, out[1].record.outbox.message_id);
  EXPECT_EQ(sent->items[0].outbox.sent_at, 5);
  auto sending = store_->List(OutboxStatus::kSending, 0, 2);
  ASSERT_OK(sending);
  ASSERT_EQ(sending->items.size(), 2u);
  EXPECT_EQ(sending->items[1].outbox.message_id, out[2].record.outbox.message_id);
  auto sending2 = store_->List(OutboxStatus::kSending, sending->next_cursor, 2);
  ASSERT_OK(sending2);
  ASSERT_EQ(sending2->items.size(), 1u);
  EXPECT_EQ(sending2->items[0].outbox.message_id, out[4].record.outbox.message_id);
  EXPECT_EQ(sending2->next_cursor, 0);
  EXPECT_TRUE(store_->List(OutboxStatus::kFailed, 0, 10)->items.empty());
}

TEST_F(PgPaymentStoreTest, OpenUpgradesBothSchemasAndRefusesANewerDatabaseUntouched) {
  OpenStore();
  OpenStore();  // at the latest already
  EXPECT_EQ(Count("SELECT version FROM " + schema_ + ".schema_version WHERE name = 'outbox'"),
            PgOutboxSchema().latest());
  EXPECT_EQ(Count("SELECT version FROM " + schema_ + ".schema_version WHERE name = 'payment'"),
            PaymentPgSchema().latest());

  // A fresh database whose payment schema is newer than this program's.
  const std::string newer = schema_ + "n";
  ASSERT_OK(admin_->Exec(absl::StrCat("CREATE SCHEMA ", newer, "; CREATE TABLE ", newer,
                                      ".schema_version (name TEXT PRIMARY KEY, version INTEGER "
                                      "NOT NULL); INSERT INTO ",
                                      newer, ".schema_version VALUES ('payment', ",
                                      PaymentPgSchema().latest() + 1, ")")));
  auto refused = PgPaymentStore::Open(
      PgUrlWith(kServer->url(), absl::StrCat("options=-csearch_path%3D", newer)));
  EXPECT_THAT(refused.status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("schema payment has version " +
                                 std::to_string(PaymentPgSchema().latest() + 1))));
  // Nothing made: not the outbox tables either.
  EXPECT_EQ(
      Count("SELECT count(*) FROM information_schema.tables WHERE table_schema = '" + newer + "'"),
      1);
}

}  // namespace
}  // namespace outbox::payment
