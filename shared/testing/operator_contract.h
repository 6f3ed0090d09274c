#pragma once

// The contract of the operator's verbs (OperatorRepository,
// shared/outbox/internal/operator_repository.h), one suite that each store
// runs: OperatorStore on a SQLite file (operator_store_test.cc) and
// PgOperatorStore on PostgreSQL (pg_operator_store_test.cc), each beside the
// loop's store of the same database. A behaviour in which they differ is a
// bug in one of them.
//
// Include this header in exactly one .cc of a test binary (it defines the
// TEST_Ps) and instantiate OperatorContractTest there:
//
//   INSTANTIATE_TEST_SUITE_P(Sqlite, OperatorContractTest,
//                            ::testing::Values(OperatorImpl{"sqlite", MakeSqlite}),
//                            OperatorImplName);
//
// Stays in this tree; not part of the test kit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "shared/outbox/internal/failure.h"
#include "shared/outbox/internal/operator_repository.h"
#include "shared/outbox/repository.h"
#include "shared/outbox/retry_policy.h"
#include "shared/testing/manual_clock.h"
#include "shared/testing/status_matchers.h"

namespace outbox::testing {

struct OperatorUnderTest {
  OperatorRepository* ops = nullptr;              // the operator's verbs
  RecoveryRepository* store = nullptr;            // the loop's store, on the same database
  std::function<void(const OutboxMessage&)> add;  // store a row as its producer would
  // The consumer's rejects, as the producer's store records them: rows changed.
  std::function<int(const std::vector<Rejection>&, int64_t now_ms)> reject;
  // Runs a statement of SQL both databases read alike.
  std::function<void(const std::string& sql)> exec;
  // Appends a history event as the stores do (keeping the newest 64).
  std::function<void(const std::string& message_id, int64_t at, const std::string& instance,
                     const std::string& event, const std::string& detail)>
      add_history;
  // From now on, a transaction that changes this row fails at its COMMIT
  // (a deferred constraint, as a full disk would), and no other row's does.
  std::function<void(const std::string& message_id)> fail_commit_of;
  std::shared_ptr<void> owner;  // keeps the stores and their database alive
};

struct OperatorImpl {
  std::string name;
  std::function<OperatorUnderTest()> make;
};

inline void PrintTo(const OperatorImpl& impl, std::ostream* os) {
  *os << impl.name;
}

inline std::string OperatorImplName(const ::testing::TestParamInfo<OperatorImpl>& info) {
  return info.param.name;
}

class OperatorContractTest : public ::testing::TestWithParam<OperatorImpl> {
 protected:
  // history.h's names and bound, which both stores keep.
  static constexpr int kHistoryKept = 64;
  static constexpr char kRedriven[] = "redriven";
  static constexpr char kPublishFailed[] = "publish_failed";

  void SetUp() override {
    impl_ = GetParam().make();
    ASSERT_NE(impl_.ops, nullptr);
    ASSERT_NE(impl_.store, nullptr);
    policy_.base_delay = absl::Seconds(2);
    policy_.max_delay = absl::Seconds(5);
    policy_.max_attempts = 3;
  }
  void TearDown() override { impl_ = {}; }

  OperatorRepository& ops() { return *impl_.ops; }
  RecoveryRepository& store() { return *impl_.store; }
  int Reject(const std::vector<Rejection>& rejects, int64_t now_ms) {
    return impl_.reject(rejects, now_ms);
  }
  void Insert(const std::string& id, OutboxStatus status, int attempts, int64_t next_retry_at,
              int64_t sent_at = 0, int64_t created_at = 1) {
    OutboxMessage r;
    r.message_id = id;
    r.biz_type = "order";
    r.biz_key = "order-" + id;
    r.topic = "orders";
    r.message_type = "OrderPlaced";
    r.reply_to = "order-replies";
    r.payload = "p";
    r.status = status;
    r.attempts = attempts;
    r.max_attempts = 3;
    r.next_retry_at = next_retry_at;
    r.created_at = created_at;
    r.updated_at = created_at;
    r.sent_at = sent_at;
    impl_.add(r);
  }

  OperatorUnderTest impl_;
  RetryPolicy policy_;
};

TEST_P(OperatorContractTest, RedriveOnlyTakesFailedRows) {
  Insert("f1", OutboxStatus::kFailed, 3, 0);
  Insert("f2", OutboxStatus::kFailed, 3, 0);
  Insert("s", OutboxStatus::kSending, 1, 0);
  EXPECT_THAT(ops().Redrive("s", 5, "ops").status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(ops().Redrive("nope", 5, "ops").status(), StatusIs(absl::StatusCode::kNotFound));
  auto r = ops().Redrive("f1", 5, "ops");
  ASSERT_OK(r);
  EXPECT_EQ(r->status, OutboxStatus::kSending);
  EXPECT_EQ(r->attempts, 0);
  EXPECT_EQ(r->next_retry_at, 5);
  EXPECT_EQ(*ops().RedriveFailed("", /*dry_run=*/true, 6, "ops"), 1);
  EXPECT_EQ(store().Get("f2")->status, OutboxStatus::kFailed);
  EXPECT_EQ(*ops().RedriveFailed("", /*dry_run=*/false, 6, "ops"), 1);
  auto counts = ops().Counts();
  EXPECT_EQ(counts->sending, 3);
  EXPECT_EQ(counts->failed, 0);
}

// An operator's re-drive restarts the max age: a row older than it is
// published again at its first claim, with a whole budget, and expires only
// the max age after the re-drive. A row never re-driven expires by its
// creation.
TEST_P(OperatorContractTest, ARedriveRestartsTheMaxAge) {
  constexpr int64_t kHour = 3'600'000;
  policy_.max_age = absl::Hours(1);
  Insert("one", OutboxStatus::kFailed, 3, 0, 0, /*created_at=*/1);
  Insert("paged", OutboxStatus::kFailed, 3, 0, 0, /*created_at=*/1);
  Insert("never", OutboxStatus::kSending, 1, 0, 0, /*created_at=*/1);
  const int64_t now = 2 * kHour;
  ASSERT_OK(ops().Redrive("one", now, "ops"));
  ASSERT_OK(ops().RedriveFailed("", /*dry_run=*/false, now, "ops"));

  auto c = store().ClaimDue(now + 1, 10, "", policy_);
  ASSERT_OK(c);
  ASSERT_EQ(c->to_publish.size(), 2u);
  EXPECT_EQ(c->to_publish[0].attempts, 1);
  EXPECT_EQ(c->to_publish[1].attempts, 1);
  ASSERT_EQ(c->exhausted.size(), 1u);
  EXPECT_EQ(c->exhausted[0].message_id, "never");
  EXPECT_EQ(c->exhausted[0].failure_kind, "expired");

  auto later = store().ClaimDue(now + kHour + 1, 10, "", policy_);
  ASSERT_OK(later);
  EXPECT_TRUE(later->to_publish.empty());
  ASSERT_EQ(later->exhausted.size(), 2u);
  EXPECT_EQ(later->exhausted[0].failure_kind, "expired");
}

// The re-drive's restart is kept in the row, not read from the history, which
// keeps a message's newest kHistoryKept events only: a row re-driven
// past its max age and claimed more often than that still counts its age
// from the re-drive.
TEST_P(OperatorContractTest, ARedriveOutlivesTheHistoryOfItsClaims) {
  constexpr int64_t kHour = 3'600'000;
  auto topics = ParseTopicRetry("orders:max_attempts=100,max_age=1h", policy_);
  ASSERT_OK(topics);
  policy_.topics = *topics;
  Insert("long", OutboxStatus::kFailed, 3, 0, 0, /*created_at=*/1);
  const int64_t redriven_at = 3 * kHour;
  ASSERT_OK(ops().Redrive("long", redriven_at, "ops"));

  int64_t now = redriven_at;
  for (int claim = 1; claim <= kHistoryKept + 6; ++claim) {
    auto c = store().ClaimDue(now, 10, "", policy_);
    ASSERT_OK(c);
    ASSERT_EQ(c->to_publish.size(), 1u) << "claim " << claim;
    ASSERT_TRUE(c->exhausted.empty()) << "claim " << claim << ": " << c->exhausted[0].last_error;
    now = c->to_publish[0].next_retry_at;
  }
  ASSERT_LT(now, redriven_at + kHour);
  OutboxMessage row;
  auto history = ops().History("long", &row);
  ASSERT_OK(history);
  for (const HistoryEvent& e : *history) EXPECT_NE(e.event, kRedriven);  // trimmed
  EXPECT_EQ(row.restarted_at, redriven_at);

  auto expired = store().ClaimDue(redriven_at + kHour + 1, 10, "", policy_);
  ASSERT_OK(expired);
  ASSERT_EQ(expired->exhausted.size(), 1u);
  EXPECT_EQ(expired->exhausted[0].failure_kind, "expired");
}

// A re-driven row in the file: a reject the consumer made before the
// re-drive (a late or replayed reply) leaves it SENDING, one made after it
// fails it.
TEST_P(OperatorContractTest, ARejectMadeBeforeTheRedriveLeavesTheRowSending) {
  Insert("r", OutboxStatus::kFailed, 3, 0);
  ASSERT_OK(ops().Redrive("r", 5'000, "ops"));
  EXPECT_EQ(Reject({{"r", "over the limit", /*answered_at=*/4'000}}, 6'000), 0);
  auto row = store().Get("r");
  ASSERT_OK(row);
  EXPECT_EQ(row->status, OutboxStatus::kSending);
  EXPECT_EQ(row->restarted_at, 5'000);
  EXPECT_EQ(Reject({{"r", "over the limit", /*answered_at=*/5'500}}, 6'000), 1);
  EXPECT_EQ(store().Get("r")->status, OutboxStatus::kFailed);
  EXPECT_EQ(store().Get("r")->failure_kind, "rejected");
}

// A paged action whose page fails at COMMIT (here a deferred foreign key,
// as a full disk would at a WAL commit): the first page's failure is in the
// audit trail on its own, a later page's in the action's record; nothing of
// a failed page is changed.
TEST_P(OperatorContractTest, APagedActionThatFailsAtCommitIsAudited) {
  Insert("f1", OutboxStatus::kFailed, 3, 0);
  Insert("f2", OutboxStatus::kFailed, 3, 0);
  impl_.fail_commit_of("f1");
  const absl::Status first =
      ops().RedriveFailed("", /*dry_run=*/false, 5, "alice", /*page=*/1).status();
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(store().Get("f1")->status, OutboxStatus::kFailed);
  auto audit = ops().Audit(0, 10);
  ASSERT_OK(audit);
  ASSERT_EQ(audit->size(), 1u);
  EXPECT_EQ((*audit)[0].actor, "alice");
  EXPECT_EQ((*audit)[0].action, "redrive_all");
  EXPECT_EQ((*audit)[0].rows, 0);
  EXPECT_EQ((*audit)[0].outcome, first.message());

  impl_.fail_commit_of("f2");
  const absl::Status second =
      ops().RedriveFailed("", /*dry_run=*/false, 6, "bob", /*page=*/1).status();
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(store().Get("f1")->status, OutboxStatus::kSending);
  EXPECT_EQ(store().Get("f2")->status, OutboxStatus::kFailed);
  audit = ops().Audit(0, 10);
  ASSERT_EQ(audit->size(), 2u);
  EXPECT_EQ((*audit)[0].actor, "bob");
  EXPECT_EQ((*audit)[0].rows, 1);
  EXPECT_THAT((*audit)[0].outcome, ::testing::HasSubstr("stopped after 1 rows"));
  EXPECT_THAT((*audit)[0].outcome, ::testing::HasSubstr(std::string(second.message())));
}

// Every action is in the audit trail, newest first, the failed ones with
// their error; each changed row has a history event naming the operator.
TEST_P(OperatorContractTest, OperatorActionsAreAuditedAndInTheRowsHistory) {
  Insert("f1", OutboxStatus::kFailed, 3, 0);
  Insert("s", OutboxStatus::kSending, 1, 0);
  ASSERT_OK(ops().Redrive("f1", 5, "alice"));
  EXPECT_FALSE(ops().Redrive("s", 6, "bob").ok());
  auto audit = ops().Audit(0, 10);
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
  auto older = ops().Audit((*audit)[0].id, 10);
  ASSERT_EQ(older->size(), 1u);
  EXPECT_EQ((*older)[0].actor, "alice");
  OutboxMessage row;
  auto history = ops().History("order-f1", &row);  // by business key
  ASSERT_OK(history);
  EXPECT_EQ(row.message_id, "f1");
  ASSERT_EQ(history->size(), 1u);
  EXPECT_EQ((*history)[0].event, kRedriven);
  EXPECT_EQ((*history)[0].instance, "alice");
  EXPECT_THAT(ops().History("nothing", &row).status(), StatusIs(absl::StatusCode::kNotFound));
}

// A message's history keeps its newest kHistoryKept events.
TEST_P(OperatorContractTest, HistoryIsBoundedPerMessage) {
  Insert("m", OutboxStatus::kSending, 1, 0);
  for (int i = 0; i < kHistoryKept + 10; ++i) {
    impl_.add_history("m", i, "test", kPublishFailed, absl::StrCat("n", i));
  }
  OutboxMessage row;
  auto events = ops().History("m", &row);
  ASSERT_EQ(events->size(), static_cast<size_t>(kHistoryKept));
  EXPECT_EQ(events->back().detail, absl::StrCat("n", kHistoryKept + 9));
  EXPECT_EQ(events->front().detail, "n10");
}

// FAILED rows group by topic, kind and error shape; a group is re-driven
// and acknowledged in pages, audited once with the rows it changed.
TEST_P(OperatorContractTest, FailureGroupsAreListedRedrivenAndAcknowledgedInPages) {
  for (int i = 0; i < 7; ++i) Insert(absl::StrCat("a", i), OutboxStatus::kSending, 1, 0);
  for (int i = 0; i < 3; ++i) Insert(absl::StrCat("b", i), OutboxStatus::kSending, 1, 0);
  {
    std::vector<Rejection> rejects;
    for (int i = 0; i < 7; ++i) {
      rejects.push_back({absl::StrCat("a", i), absl::StrCat("amount ", 100 + i, " over 50")});
    }
    EXPECT_EQ(Reject(rejects, 10), 7);
  }
  ASSERT_OK(store().ClaimDue(100, 10, "", policy_));  // b*: attempts 1 -> 2 (not failed yet)
  impl_.exec("UPDATE outbox SET attempts = 3, next_retry_at = 0 WHERE message_id LIKE 'b%'");
  ASSERT_OK(store().ClaimDue(200, 10, "", policy_));  // b*: exhausted
  auto groups = store().FailureGroups(10, "");
  ASSERT_OK(groups);
  ASSERT_EQ(groups->size(), 2u);
  const FailureGroup& rejected = (*groups)[0];
  EXPECT_EQ(rejected.count, 7);
  EXPECT_EQ(rejected.kind, kFailureRejected);
  EXPECT_EQ(rejected.pattern, "amount # over #");
  EXPECT_EQ(rejected.group, FailureGroupOf("orders", kFailureRejected, "amount 1 over 2"));
  EXPECT_EQ((*groups)[1].count, 3);
  EXPECT_EQ((*groups)[1].kind, kFailureExhausted);
  EXPECT_EQ(store().FailureGroups(10, kFailureExhausted)->size(), 1u);
  // Rejected and acknowledged rows alert by group, not one by one.
  EXPECT_EQ(store().ListFailed(100)->size(), 3u);

  EXPECT_EQ(*ops().AcknowledgeGroup((*groups)[1].group, false, 300, "carol", 2), 3);
  EXPECT_EQ(store().ListFailed(100)->size(), 0u);
  EXPECT_EQ(store().FailureGroups(10, "")->at(1).acknowledged, 3);

  EXPECT_EQ(*ops().RedriveFailed(rejected.group, /*dry_run=*/true, 400, "dave", 3), 7);
  EXPECT_EQ(ops().Counts()->failed, 10);
  EXPECT_EQ(*ops().RedriveFailed(rejected.group, /*dry_run=*/false, 500, "dave", 3), 7);
  EXPECT_EQ(ops().Counts()->failed, 3);
  EXPECT_EQ(store().Get("a0")->failure_group, "");
  auto audit = ops().Audit(0, 10);
  ASSERT_EQ(audit->size(), 3u);
  EXPECT_EQ((*audit)[0].action, "redrive_group");
  EXPECT_EQ((*audit)[0].rows, 7);
  EXPECT_EQ((*audit)[0].outcome, "ok");
  EXPECT_FALSE((*audit)[0].dry_run);
  EXPECT_TRUE((*audit)[1].dry_run);
  EXPECT_EQ((*audit)[2].action, "acknowledge_group");
  EXPECT_EQ((*audit)[2].actor, "carol");
}

TEST_P(OperatorContractTest, ListsByStatusOldestFirstInPages) {
  for (int i = 0; i < 5; ++i) Insert(absl::StrCat("sent", i), OutboxStatus::kSent, 1, 0, 10 + i);
  Insert("sending", OutboxStatus::kSending, 1, 0);
  auto p1 = ops().List(OutboxStatus::kSent, 0, 3);
  ASSERT_OK(p1);
  ASSERT_EQ(p1->items.size(), 3u);
  EXPECT_EQ(p1->items[0].message_id, "sent0");
  auto p2 = ops().List(OutboxStatus::kSent, p1->next_cursor, 3);
  ASSERT_EQ(p2->items.size(), 2u);
  EXPECT_EQ(p2->items[1].message_id, "sent4");
  EXPECT_EQ(p2->next_cursor, 0);
  auto sending = ops().List(OutboxStatus::kSending, 0, 10);
  ASSERT_EQ(sending->items.size(), 1u);
  EXPECT_EQ(sending->items[0].message_id, "sending");
}

TEST_P(OperatorContractTest, MetricsShowRowsByStatusAndTheOldestSendingAge) {
  ManualClock clock(100'000);
  MetricsRegistry metrics;
  ops().RegisterMetrics(metrics, clock);
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
  EXPECT_EQ(*ops().OldestSendingCreatedAt(), 40'000);
}

}  // namespace outbox::testing
