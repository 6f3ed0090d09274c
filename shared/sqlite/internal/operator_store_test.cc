#include "shared/sqlite/internal/operator_store.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "shared/outbox/internal/failure.h"
#include "shared/sqlite/internal/recovery_store.h"
#include "shared/sqlite/outbox_table.h"
#include "shared/sqlite/schema.h"
#include "shared/testing/manual_clock.h"
#include "shared/testing/producer_file_fixture.h"
#include "shared/testing/status_matchers.h"

namespace outbox {
namespace {

using ::outbox::testing::StatusIs;

using ::outbox::testing::CreateProducerDb;
using ::outbox::testing::ProducerSchema;
const ProducerDb& kProducer = testing::Producer();

// The operator's verbs (ops_) on a producer's file, beside the loop's store
// (store_) on the same file.
class OperatorStoreTest : public testing::ProducerFileTest {};

TEST_F(OperatorStoreTest, RedriveOnlyTakesFailedRows) {
  Insert("f1", OutboxStatus::kFailed, 3, 0);
  Insert("f2", OutboxStatus::kFailed, 3, 0);
  Insert("s", OutboxStatus::kSending, 1, 0);
  EXPECT_THAT(ops_->Redrive("s", 5, "ops").status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(ops_->Redrive("nope", 5, "ops").status(), StatusIs(absl::StatusCode::kNotFound));
  auto r = ops_->Redrive("f1", 5, "ops");
  ASSERT_OK(r);
  EXPECT_EQ(r->status, OutboxStatus::kSending);
  EXPECT_EQ(r->attempts, 0);
  EXPECT_EQ(r->next_retry_at, 5);
  EXPECT_EQ(*ops_->RedriveFailed("", /*dry_run=*/true, 6, "ops"), 1);
  EXPECT_EQ(store_->Get("f2")->status, OutboxStatus::kFailed);
  EXPECT_EQ(*ops_->RedriveFailed("", /*dry_run=*/false, 6, "ops"), 1);
  auto counts = ops_->Counts();
  EXPECT_EQ(counts->sending, 3);
  EXPECT_EQ(counts->failed, 0);
}

// An operator's re-drive restarts the max age: a row older than it is
// published again at its first claim, with a whole budget, and expires only
// the max age after the re-drive. A row never re-driven expires by its
// creation.
TEST_F(OperatorStoreTest, ARedriveRestartsTheMaxAge) {
  constexpr int64_t kHour = 3'600'000;
  policy_.max_age = absl::Hours(1);
  Insert("one", OutboxStatus::kFailed, 3, 0, 0, /*created_at=*/1);
  Insert("paged", OutboxStatus::kFailed, 3, 0, 0, /*created_at=*/1);
  Insert("never", OutboxStatus::kSending, 1, 0, 0, /*created_at=*/1);
  const int64_t now = 2 * kHour;
  ASSERT_OK(ops_->Redrive("one", now, "ops"));
  ASSERT_OK(ops_->RedriveFailed("", /*dry_run=*/false, now, "ops"));

  auto c = store_->ClaimDue(now + 1, 10, "", policy_);
  ASSERT_OK(c);
  ASSERT_EQ(c->to_publish.size(), 2u);
  EXPECT_EQ(c->to_publish[0].attempts, 1);
  EXPECT_EQ(c->to_publish[1].attempts, 1);
  ASSERT_EQ(c->exhausted.size(), 1u);
  EXPECT_EQ(c->exhausted[0].message_id, "never");
  EXPECT_EQ(c->exhausted[0].failure_kind, "expired");

  auto later = store_->ClaimDue(now + kHour + 1, 10, "", policy_);
  ASSERT_OK(later);
  EXPECT_TRUE(later->to_publish.empty());
  ASSERT_EQ(later->exhausted.size(), 2u);
  EXPECT_EQ(later->exhausted[0].failure_kind, "expired");
}

// The re-drive's restart is kept in the row, not read from the history, which
// keeps a message's newest kHistoryPerMessage events only: a row re-driven
// past its max age and claimed more often than that still counts its age
// from the re-drive.
TEST_F(OperatorStoreTest, ARedriveOutlivesTheHistoryOfItsClaims) {
  constexpr int64_t kHour = 3'600'000;
  auto topics = ParseTopicRetry("orders:max_attempts=100,max_age=1h", policy_);
  ASSERT_OK(topics);
  policy_.topics = *topics;
  Insert("long", OutboxStatus::kFailed, 3, 0, 0, /*created_at=*/1);
  const int64_t redriven_at = 3 * kHour;
  ASSERT_OK(ops_->Redrive("long", redriven_at, "ops"));

  int64_t now = redriven_at;
  for (int claim = 1; claim <= kHistoryPerMessage + 6; ++claim) {
    auto c = store_->ClaimDue(now, 10, "", policy_);
    ASSERT_OK(c);
    ASSERT_EQ(c->to_publish.size(), 1u) << "claim " << claim;
    ASSERT_TRUE(c->exhausted.empty()) << "claim " << claim << ": " << c->exhausted[0].last_error;
    now = c->to_publish[0].next_retry_at;
  }
  ASSERT_LT(now, redriven_at + kHour);
  OutboxMessage row;
  auto history = ops_->History("long", &row);
  ASSERT_OK(history);
  for (const HistoryEvent& e : *history) EXPECT_NE(e.event, kEventRedriven);  // trimmed
  EXPECT_EQ(row.restarted_at, redriven_at);

  auto expired = store_->ClaimDue(redriven_at + kHour + 1, 10, "", policy_);
  ASSERT_OK(expired);
  ASSERT_EQ(expired->exhausted.size(), 1u);
  EXPECT_EQ(expired->exhausted[0].failure_kind, "expired");
}

// A re-driven row in the file: a reject the consumer made before the
// re-drive (a late or replayed reply) leaves it SENDING, one made after it
// fails it.
TEST_F(OperatorStoreTest, ARejectMadeBeforeTheRedriveLeavesTheRowSending) {
  Insert("r", OutboxStatus::kFailed, 3, 0);
  ASSERT_OK(ops_->Redrive("r", 5'000, "ops"));
  EXPECT_EQ(RecordRejects(*raw_, {{"r", "over the limit", /*answered_at=*/4'000}}, 6'000), 0);
  auto row = store_->Get("r");
  ASSERT_OK(row);
  EXPECT_EQ(row->status, OutboxStatus::kSending);
  EXPECT_EQ(row->restarted_at, 5'000);
  EXPECT_EQ(RecordRejects(*raw_, {{"r", "over the limit", /*answered_at=*/5'500}}, 6'000), 1);
  EXPECT_EQ(store_->Get("r")->status, OutboxStatus::kFailed);
  EXPECT_EQ(store_->Get("r")->failure_kind, "rejected");
}

// A paged action whose page fails at COMMIT (here a deferred foreign key,
// as a full disk would at a WAL commit): the first page's failure is in the
// audit trail on its own, a later page's in the action's record; nothing of
// a failed page is changed.
TEST_F(OperatorStoreTest, APagedActionThatFailsAtCommitIsAudited) {
  Insert("f1", OutboxStatus::kFailed, 3, 0);
  Insert("f2", OutboxStatus::kFailed, 3, 0);
  raw_->exec(R"sql(
    CREATE TABLE parent (id INTEGER PRIMARY KEY);
    CREATE TABLE child (p INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED);
    CREATE TABLE poisoned (message_id TEXT);
    CREATE TRIGGER poison AFTER UPDATE ON outbox
      WHEN new.message_id IN (SELECT message_id FROM poisoned)
      BEGIN INSERT INTO child VALUES (42); END;
    INSERT INTO poisoned VALUES ('f1');
  )sql");
  EXPECT_FALSE(ops_->RedriveFailed("", /*dry_run=*/false, 5, "alice", /*page=*/1).ok());
  EXPECT_EQ(store_->Get("f1")->status, OutboxStatus::kFailed);
  auto audit = ops_->Audit(0, 10);
  ASSERT_OK(audit);
  ASSERT_EQ(audit->size(), 1u);
  EXPECT_EQ((*audit)[0].actor, "alice");
  EXPECT_EQ((*audit)[0].action, "redrive_all");
  EXPECT_EQ((*audit)[0].rows, 0);
  EXPECT_THAT((*audit)[0].outcome, ::testing::HasSubstr("FOREIGN KEY"));

  raw_->exec("UPDATE poisoned SET message_id = 'f2'");
  EXPECT_FALSE(ops_->RedriveFailed("", /*dry_run=*/false, 6, "bob", /*page=*/1).ok());
  EXPECT_EQ(store_->Get("f1")->status, OutboxStatus::kSending);
  EXPECT_EQ(store_->Get("f2")->status, OutboxStatus::kFailed);
  audit = ops_->Audit(0, 10);
  ASSERT_EQ(audit->size(), 2u);
  EXPECT_EQ((*audit)[0].actor, "bob");
  EXPECT_EQ((*audit)[0].rows, 1);
  EXPECT_THAT((*audit)[0].outcome, ::testing::HasSubstr("stopped after 1 rows"));
}

// Every action is in the audit trail, newest first, the failed ones with
// their error; each changed row has a history event naming the operator.
TEST_F(OperatorStoreTest, OperatorActionsAreAuditedAndInTheRowsHistory) {
  Insert("f1", OutboxStatus::kFailed, 3, 0);
  Insert("s", OutboxStatus::kSending, 1, 0);
  ASSERT_OK(ops_->Redrive("f1", 5, "alice"));
  EXPECT_FALSE(ops_->Redrive("s", 6, "bob").ok());
  auto audit = ops_->Audit(0, 10);
  ASSERT_OK(audit);
  ASSERT_EQ(audit->size(), 2u);
  EXPECT_EQ((*audit)[0].actor, "bob");
  EXPECT_EQ((*audit)[0].action, "redrive_message");
  EXPECT_EQ((*audit)[0].target, "s");
  EXPECT_EQ((*audit)[0].rows, 0);
  EXPECT_THAT((*audit)[0].outcome, ::testing::HasSubstr("only FAILED messages"));
  EXPECT_EQ((*audit)[1].actor, "alice");
  EXPECT_EQ((*audit)[1].rows, 1);
  EXPECT_EQ((*audit)[1].outcome, "ok");
  // Paging: below the newest record's id.
  auto older = ops_->Audit((*audit)[0].id, 10);
  ASSERT_EQ(older->size(), 1u);
  EXPECT_EQ((*older)[0].actor, "alice");
  OutboxMessage row;
  auto history = ops_->History("order-f1", &row);  // by business key
  ASSERT_OK(history);
  EXPECT_EQ(row.message_id, "f1");
  ASSERT_EQ(history->size(), 1u);
  EXPECT_EQ((*history)[0].event, kEventRedriven);
  EXPECT_EQ((*history)[0].instance, "alice");
  EXPECT_THAT(ops_->History("nothing", &row).status(), StatusIs(absl::StatusCode::kNotFound));
}

// A message's history keeps its newest kHistoryPerMessage events.
TEST_F(OperatorStoreTest, HistoryIsBoundedPerMessage) {
  Insert("m", OutboxStatus::kSending, 1, 0);
  for (int i = 0; i < kHistoryPerMessage + 10; ++i) {
    HistoryLog(*raw_).Append("m", i, "test", kEventPublishFailed, absl::StrCat("n", i));
  }
  OutboxMessage row;
  auto events = ops_->History("m", &row);
  ASSERT_EQ(events->size(), static_cast<size_t>(kHistoryPerMessage));
  EXPECT_EQ(events->back().detail, absl::StrCat("n", kHistoryPerMessage + 9));
  EXPECT_EQ(events->front().detail, "n10");
}

// FAILED rows group by topic, kind and error shape; a group is re-driven
// and acknowledged in pages, audited once with the rows it changed.
TEST_F(OperatorStoreTest, FailureGroupsAreListedRedrivenAndAcknowledgedInPages) {
  for (int i = 0; i < 7; ++i) Insert(absl::StrCat("a", i), OutboxStatus::kSending, 1, 0);
  for (int i = 0; i < 3; ++i) Insert(absl::StrCat("b", i), OutboxStatus::kSending, 1, 0);
  {
    SQLite::Transaction tx(*raw_);
    std::vector<Rejection> rejects;
    for (int i = 0; i < 7; ++i) {
      rejects.push_back({absl::StrCat("a", i), absl::StrCat("amount ", 100 + i, " over 50")});
    }
    RecordRejects(*raw_, rejects, 10);
    tx.commit();
  }
  ASSERT_OK(store_->ClaimDue(100, 10, "", policy_));  // b*: attempts 1 -> 2 (not failed yet)
  raw_->exec("UPDATE outbox SET attempts = 3, next_retry_at = 0 WHERE message_id LIKE 'b%'");
  ASSERT_OK(store_->ClaimDue(200, 10, "", policy_));  // b*: exhausted
  auto groups = store_->FailureGroups(10, "");
  ASSERT_OK(groups);
  ASSERT_EQ(groups->size(), 2u);
  const FailureGroup& rejected = (*groups)[0];
  EXPECT_EQ(rejected.count, 7);
  EXPECT_EQ(rejected.kind, kFailureRejected);
  EXPECT_EQ(rejected.pattern, "amount # over #");
  EXPECT_EQ(rejected.group, FailureGroupOf("orders", kFailureRejected, "amount 1 over 2"));
  EXPECT_EQ((*groups)[1].count, 3);
  EXPECT_EQ((*groups)[1].kind, kFailureExhausted);
  EXPECT_EQ(store_->FailureGroups(10, kFailureExhausted)->size(), 1u);
  // Rejected and acknowledged rows alert by group, not one by one.
  EXPECT_EQ(store_->ListFailed(100)->size(), 3u);

  EXPECT_EQ(*ops_->AcknowledgeGroup((*groups)[1].group, false, 300, "carol", 2), 3);
  EXPECT_EQ(store_->ListFailed(100)->size(), 0u);
  EXPECT_EQ(store_->FailureGroups(10, "")->at(1).acknowledged, 3);

  EXPECT_EQ(*ops_->RedriveFailed(rejected.group, /*dry_run=*/true, 400, "dave", 3), 7);
  EXPECT_EQ(ops_->Counts()->failed, 10);
  EXPECT_EQ(*ops_->RedriveFailed(rejected.group, /*dry_run=*/false, 500, "dave", 3), 7);
  EXPECT_EQ(ops_->Counts()->failed, 3);
  EXPECT_EQ(store_->Get("a0")->failure_group, "");
  auto audit = ops_->Audit(0, 10);
  ASSERT_EQ(audit->size(), 3u);
  EXPECT_EQ((*audit)[0].action, "redrive_group");
  EXPECT_EQ((*audit)[0].rows, 7);
  EXPECT_EQ((*audit)[0].outcome, "ok");
  EXPECT_FALSE((*audit)[0].dry_run);
  EXPECT_TRUE((*audit)[1].dry_run);
  EXPECT_EQ((*audit)[2].action, "acknowledge_group");
  EXPECT_EQ((*audit)[2].actor, "carol");
}

TEST_F(OperatorStoreTest, ListsByStatusOldestFirstInPages) {
  for (int i = 0; i < 5; ++i) Insert(absl::StrCat("sent", i), OutboxStatus::kSent, 1, 0, 10 + i);
  Insert("sending", OutboxStatus::kSending, 1, 0);
  auto p1 = ops_->List(OutboxStatus::kSent, 0, 3);
  ASSERT_OK(p1);
  ASSERT_EQ(p1->items.size(), 3u);
  EXPECT_EQ(p1->items[0].message_id, "sent0");
  auto p2 = ops_->List(OutboxStatus::kSent, p1->next_cursor, 3);
  ASSERT_EQ(p2->items.size(), 2u);
  EXPECT_EQ(p2->items[1].message_id, "sent4");
  EXPECT_EQ(p2->next_cursor, 0);
  auto sending = ops_->List(OutboxStatus::kSending, 0, 10);
  ASSERT_EQ(sending->items.size(), 1u);
  EXPECT_EQ(sending->items[0].message_id, "sending");
}

TEST_F(OperatorStoreTest, MetricsShowRowsByStatusAndTheOldestSendingAge) {
  ::outbox::testing::ManualClock clock(100'000);
  MetricsRegistry metrics;
  ops_->RegisterMetrics(metrics, clock);
  EXPECT_NE(metrics.Render().find("\noutbox_oldest_sending_age_seconds 0\n"), std::string::npos)
      << metrics.Render();

  Insert("old_sent", OutboxStatus::kSent, 1, 0, 50'000, 10'000);  // not SENDING: ignored
  Insert("oldest", OutboxStatus::kSending, 1, 0, 0, 40'000);
  Insert("newer", OutboxStatus::kSending, 1, 0, 0, 90'000);
  Insert("failed", OutboxStatus::kFailed, 3, 0, 0, 20'000);
  const std::string text = metrics.Render();
  EXPECT_NE(text.find("\noutbox_oldest_sending_age_seconds 60\n"), std::string::npos) << text;
  EXPECT_NE(text.find("outbox_rows{status=\"SENDING\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("outbox_rows{status=\"FAILED\"} 1\n"), std::string::npos) << text;
  EXPECT_EQ(*ops_->OldestSendingCreatedAt(), 40'000);
}

}  // namespace
}  // namespace outbox
