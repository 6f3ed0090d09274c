#pragma once

// The contract of the outbox seams (shared/outbox/repository.h), one suite
// that every implementation runs: the in-memory fake and each SQLite store.
// The fake and the real store can then never disagree silently.
//
// Include this header in exactly one .cc of a test binary (it defines the
// TEST_Ps), and instantiate the suites there for each implementation:
//
//   INSTANTIATE_TEST_SUITE_P(Sqlite, OutboxContractTest,
//                            ::testing::Values(OutboxImpl{"sqlite", MakeSqlite}),
//                            OutboxImplName);
//
// An implementation is a factory of an OutboxUnderTest: the seams, a way to
// store a row as its producer would have written it, and a way to read it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "shared/outbox/internal/state_machine.h"
#include "shared/outbox/repository.h"
#include "shared/testing/manual_clock.h"
#include "shared/testing/status_matchers.h"
#include "shared/testing/under_test.h"

namespace outbox::testing {

class OutboxContractTest : public ::testing::TestWithParam<OutboxImpl> {
 protected:
  static constexpr int64_t kT0 = 1'700'000'000'000;  // a fixed "now", unix ms

  void SetUp() override { impl_ = GetParam().make(clock_); }

  // A row as the producer writes it at `created_at`: SENDING, attempt 1
  // made, first retry due after the policy's first delay.
  OutboxMessage Row(const std::string& id, int64_t created_at = kT0) {
    return NewOutboxMessage(
        {id, "order", "o-" + id, "EVENTS", "OrderPlaced", "REPLIES", "body-" + id, ""}, created_at,
        policy_);
  }
  // A row its consumer acknowledged at `sent_at`.
  OutboxMessage Sent(const std::string& id, int64_t sent_at) {
    OutboxMessage row = Row(id);
    row.status = OutboxStatus::kSent;
    row.sent_at = sent_at;
    row.updated_at = sent_at;
    return row;
  }
  void Add(const OutboxMessage& row) { impl_.add(row); }
  OutboxMessage Get(const std::string& id) {
    std::optional<OutboxMessage> row = impl_.get(id);
    EXPECT_TRUE(row.has_value()) << "no row " << id;
    return row.value_or(OutboxMessage{});
  }
  bool Exists(const std::string& id) { return impl_.get(id).has_value(); }
  OutboxRepository& outbox() { return *impl_.outbox; }
  RecoveryRepository& recovery() { return *impl_.recovery; }
  bool HasOutbox() const { return impl_.outbox != nullptr; }
  bool HasRecovery() const { return impl_.recovery != nullptr; }
  bool HasRetention() const { return HasRecovery() && impl_.archived && impl_.audit; }

  ManualClock clock_{kT0};
  RetryPolicy policy_ = [] {
    RetryPolicy p;
    p.base_delay = absl::Seconds(2);
    p.max_delay = absl::Seconds(10);
    p.max_attempts = 3;
    return p;
  }();
  OutboxUnderTest impl_;
};

#define OUTBOX_CONTRACT_NEEDS(what) \
  if (!Has##what()) GTEST_SKIP() << GetParam().name << " has no " #what " seam"

TEST_P(OutboxContractTest, RecoveryGetsARowByItsMessageIdAndNotFoundOtherwise) {
  OUTBOX_CONTRACT_NEEDS(Recovery);
  Add(Row("m1"));
  auto row = recovery().Get("m1");
  ASSERT_OK(row);
  EXPECT_EQ(row->message_id, "m1");
  EXPECT_EQ(row->status, OutboxStatus::kSending);
  EXPECT_EQ(row->biz_key, "o-m1");
  EXPECT_THAT(recovery().Get("unknown").status(), StatusIs(absl::StatusCode::kNotFound));
}

TEST_P(OutboxContractTest, AnAckClosesASendingRowOnceAndSkipsUnknownIds) {
  OUTBOX_CONTRACT_NEEDS(Outbox);
  Add(Row("m1"));
  clock_.Advance(absl::Milliseconds(40));
  auto tally = outbox().RecordAcks({"m1", "unknown"});
  ASSERT_OK(tally);
  EXPECT_EQ(tally->closed, 1);
  EXPECT_EQ(tally->late, 0);
  EXPECT_EQ(tally->create_to_sent_ms, (std::vector<int64_t>{40}));
  OutboxMessage row = Get("m1");
  EXPECT_EQ(row.status, OutboxStatus::kSent);
  EXPECT_EQ(row.sent_at, kT0 + 40);

  tally = outbox().RecordAcks({"m1"});  // a duplicate reply changes nothing
  ASSERT_OK(tally);
  EXPECT_EQ(tally->changed(), 0);
  EXPECT_EQ(Get("m1").sent_at, kT0 + 40);
}

TEST_P(OutboxContractTest, ALateAckTurnsAFailedRowSent) {
  OUTBOX_CONTRACT_NEEDS(Outbox);
  OutboxMessage failed = Row("m1");
  failed.status = OutboxStatus::kFailed;
  failed.attempts = 3;
  failed.last_error = "no acknowledgement";
  Add(failed);
  auto tally = outbox().RecordAcks({"m1"});
  ASSERT_OK(tally);
  EXPECT_EQ(tally->closed, 0);
  EXPECT_EQ(tally->late, 1);
  EXPECT_EQ(Get("m1").status, OutboxStatus::kSent);
}

TEST_P(OutboxContractTest, APublishFailureIsNotedAndTheRowStaysSending) {
  OUTBOX_CONTRACT_NEEDS(Outbox);
  Add(Row("m1"));
  ASSERT_OK(outbox().RecordPublishFailure({"m1"}, "nacked by broker"));
  OutboxMessage row = Get("m1");
  EXPECT_EQ(row.status, OutboxStatus::kSending);
  EXPECT_EQ(row.last_error, "nacked by broker");
  EXPECT_EQ(row.attempts, 1);
}

TEST_P(OutboxContractTest, TakenOverAreTheClosedAndTheRepublishedRows) {
  OUTBOX_CONTRACT_NEEDS(Outbox);
  Add(Row("fresh"));
  OutboxMessage republished = Row("republished");
  republished.attempts = 2;
  Add(republished);
  Add(Row("acked"));
  ASSERT_OK(outbox().RecordAcks({"acked"}));
  auto taken = outbox().TakenOver({"fresh", "republished", "acked", "unknown"});
  ASSERT_OK(taken);
  EXPECT_THAT(*taken, ::testing::UnorderedElementsAre("republished", "acked"));
}

TEST_P(OutboxContractTest, ClaimTakesDueSendingRowsOldestDueFirstUpToTheLimit) {
  OUTBOX_CONTRACT_NEEDS(Recovery);
  Add(Row("later", kT0 + 500));  // due at kT0 + 2500
  Add(Row("first", kT0));        // due at kT0 + 2000
  Add(Row("third", kT0 + 900));  // due at kT0 + 2900
  Add(Row("not_due", kT0 + 5000));
  OutboxMessage sent = Row("sent");
  sent.status = OutboxStatus::kSent;
  Add(sent);
  auto claimed = recovery().ClaimDue(kT0 + 3000, 2, "", policy_);
  ASSERT_OK(claimed);
  ASSERT_EQ(claimed->to_publish.size(), 2u);
  EXPECT_EQ(claimed->to_publish[0].message_id, "first");
  EXPECT_EQ(claimed->to_publish[1].message_id, "later");
  EXPECT_TRUE(claimed->exhausted.empty());
  // Attempt 2 is stored: its last publish now, the next after 2 x base.
  OutboxMessage first = Get("first");
  EXPECT_EQ(first.attempts, 2);
  EXPECT_EQ(first.last_attempt_at, kT0 + 3000);
  EXPECT_EQ(first.next_retry_at, kT0 + 3000 + 4000);
  EXPECT_EQ(Get("third").attempts, 1);  // over the limit: left for the next claim
  EXPECT_EQ(Get("not_due").attempts, 1);
}

TEST_P(OutboxContractTest, AClaimedRowOverItsBudgetIsFailedWithTheReason) {
  OUTBOX_CONTRACT_NEEDS(Recovery);
  OutboxMessage spent = Row("spent");
  spent.attempts = 3;  // max_attempts publishes made
  Add(spent);
  auto claimed = recovery().ClaimDue(kT0 + 60'000, 10, "", policy_);
  ASSERT_OK(claimed);
  EXPECT_TRUE(claimed->to_publish.empty());
  ASSERT_EQ(claimed->exhausted.size(), 1u);
  OutboxMessage row = Get("spent");
  EXPECT_EQ(row.status, OutboxStatus::kFailed);
  EXPECT_FALSE(row.last_error.empty());
  auto failed = recovery().ListFailed(10);
  ASSERT_OK(failed);
  ASSERT_EQ(failed->size(), 1u);
  EXPECT_EQ((*failed)[0].message_id, "spent");
}

// A business reject closes the row FAILED at once (kind rejected, the
// consumer's reason), once; the row then alerts by failure group, not by
// itself, and one group holds every reject of the same shape.
TEST_P(OutboxContractTest, ARejectFailsTheRowAtOnceAndGroupsItByItsShape) {
  OUTBOX_CONTRACT_NEEDS(Outbox);
  for (const char* id : {"r1", "r2", "ok"}) Add(Row(id));
  auto changed = outbox().RecordRejects(
      {{"r1", "amount 501 over 500"}, {"r2", "amount 7000 over 500"}, {"unknown", "no"}});
  ASSERT_OK(changed);
  EXPECT_EQ(*changed, 2);
  EXPECT_EQ(*outbox().RecordRejects({{"r1", "amount 501 over 500"}}), 0);  // a copy's reply
  OutboxMessage r1 = Get("r1");
  EXPECT_EQ(r1.status, OutboxStatus::kFailed);
  EXPECT_EQ(r1.failure_kind, "rejected");
  EXPECT_EQ(r1.last_error, "amount 501 over 500");
  EXPECT_EQ(r1.attempts, 1);
  EXPECT_EQ(Get("ok").status, OutboxStatus::kSending);
  if (!HasRecovery()) return;
  EXPECT_EQ(recovery().ListFailed(10)->size(), 0u);
  auto groups = recovery().FailureGroups(10, "");
  ASSERT_OK(groups);
  ASSERT_EQ(groups->size(), 1u);
  EXPECT_EQ((*groups)[0].count, 2);
  EXPECT_EQ((*groups)[0].kind, "rejected");
  EXPECT_EQ((*groups)[0].topic, "EVENTS");
  EXPECT_EQ((*groups)[0].pattern, "amount # over #");
  EXPECT_EQ((*groups)[0].group, r1.failure_group);
  EXPECT_EQ(recovery().FailureGroups(10, "exhausted")->size(), 0u);
}

TEST_P(OutboxContractTest, FailedRowsAreListedOldestFirst) {
  OUTBOX_CONTRACT_NEEDS(Recovery);
  for (const char* id : {"zz", "aa", "mm"}) {  // written in this order
    OutboxMessage row = Row(id);
    row.status = OutboxStatus::kFailed;
    Add(row);
  }
  auto failed = recovery().ListFailed(2);
  ASSERT_OK(failed);
  ASSERT_EQ(failed->size(), 2u);
  EXPECT_EQ((*failed)[0].message_id, "zz");
  EXPECT_EQ((*failed)[1].message_id, "aa");
}

TEST_P(OutboxContractTest, OnlyTheLeaseHolderClaims) {
  OUTBOX_CONTRACT_NEEDS(Recovery);
  Add(Row("m1"));
  auto held = recovery().TryAcquireLease("r1", kT0, 10'000);
  ASSERT_OK(held);
  EXPECT_TRUE(*held);
  held = recovery().TryAcquireLease("r2", kT0 + 1000, 10'000);
  ASSERT_OK(held);
  EXPECT_FALSE(*held);  // r1's lease is still valid
  EXPECT_THAT(recovery().ClaimDue(kT0 + 3000, 10, "r2", policy_),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(Get("m1").attempts, 1);  // the fenced claim changed nothing
  auto lease = recovery().Lease();
  ASSERT_OK(lease);
  EXPECT_EQ(lease->holder, "r1");
  EXPECT_EQ(lease->expires_at, kT0 + 10'000);

  ASSERT_OK(recovery().ReleaseLease("r1", kT0 + 2000));
  held = recovery().TryAcquireLease("r2", kT0 + 2000, 10'000);
  ASSERT_OK(held);
  EXPECT_TRUE(*held);
  auto claimed = recovery().ClaimDue(kT0 + 3000, 10, "r2", policy_);
  ASSERT_OK(claimed);
  EXPECT_EQ(claimed->to_publish.size(), 1u);
}

TEST_P(OutboxContractTest, AnExpiredLeaseIsTakenOver) {
  OUTBOX_CONTRACT_NEEDS(Recovery);
  ASSERT_OK(recovery().TryAcquireLease("r1", kT0, 10'000));
  auto held = recovery().TryAcquireLease("r2", kT0 + 10'000, 10'000);
  ASSERT_OK(held);
  EXPECT_TRUE(*held);
}

TEST_P(OutboxContractTest, DeferringPushesDueRowsBackWithoutSpendingAnAttempt) {
  OUTBOX_CONTRACT_NEEDS(Recovery);
  Add(Row("m1"));
  Add(Row("m2"));
  // m2's publish failed: no copy of it is queued, so it stays due.
  ASSERT_OK(recovery().RecordPublishFailure({"m2"}, "publish confirm timed out", kT0 + 100));
  auto deferred = recovery().DeferDue(kT0 + 3000, 10, "", policy_);
  ASSERT_OK(deferred);
  EXPECT_EQ(*deferred, 1);
  OutboxMessage row = Get("m1");
  EXPECT_EQ(row.attempts, 1);
  EXPECT_GT(row.next_retry_at, kT0 + 3000);
  EXPECT_EQ(row.status, OutboxStatus::kSending);
  EXPECT_LE(Get("m2").next_retry_at, kT0 + 3000);
}

TEST_P(OutboxContractTest, ArchivingMovesOnlySentRowsAckedBeforeTheCutoff) {
  OUTBOX_CONTRACT_NEEDS(Recovery);
  Add(Sent("old1", kT0 + 100));
  Add(Sent("old2", kT0 + 100));
  Add(Sent("new", kT0 + 9000));
  Add(Row("sending"));
  auto moved = recovery().ArchiveSent(kT0 + 5000, 1);
  ASSERT_OK(moved);
  EXPECT_EQ(*moved, 1);
  moved = recovery().ArchiveSent(kT0 + 5000, 10);
  ASSERT_OK(moved);
  EXPECT_EQ(*moved, 1);
  EXPECT_FALSE(Exists("old1"));
  EXPECT_FALSE(Exists("old2"));
  EXPECT_TRUE(Exists("new"));
  EXPECT_TRUE(Exists("sending"));
}

// Retention deletes archived rows by their acknowledgement, oldest first, a
// batch at a time, and nothing else: not a live row, not an audit record.
// The watermark says below which acknowledgement rows may be gone; it only
// rises.
TEST_P(OutboxContractTest, PruningTheArchiveDeletesOldArchivedRowsAndRaisesItsWatermark) {
  OUTBOX_CONTRACT_NEEDS(Retention);
  Add(Sent("old1", kT0 + 100));
  Add(Sent("old2", kT0 + 200));
  Add(Sent("young", kT0 + 9000));
  Add(Sent("live", kT0 + 20'000));  // acknowledged after the archive's cutoff
  Add(Row("sending"));
  impl_.add_audit(kT0, "redrive_message");
  auto moved = recovery().ArchiveSent(kT0 + 10'000, 10);
  ASSERT_OK(moved);
  ASSERT_EQ(*moved, 3);

  auto pruned = recovery().PruneArchive(kT0 + 100, 10);  // none acknowledged before it
  ASSERT_OK(pruned);
  EXPECT_EQ(*pruned, 0);
  EXPECT_EQ(impl_.archive_pruned_before(), 0);

  pruned = recovery().PruneArchive(kT0 + 5000, 1);
  ASSERT_OK(pruned);
  EXPECT_EQ(*pruned, 1);
  EXPECT_THAT(impl_.archived(), ::testing::UnorderedElementsAre("old2", "young"));
  EXPECT_EQ(impl_.archive_pruned_before(), kT0 + 5000);
  pruned = recovery().PruneArchive(kT0 + 5000, 10);
  ASSERT_OK(pruned);
  EXPECT_EQ(*pruned, 1);
  EXPECT_THAT(impl_.archived(), ::testing::ElementsAre("young"));

  // A longer retention later (an earlier cutoff) deletes what is older than
  // it and leaves the watermark where it was.
  Add(Sent("straggler", kT0 + 300));
  ASSERT_OK(recovery().ArchiveSent(kT0 + 10'000, 10));
  pruned = recovery().PruneArchive(kT0 + 1000, 10);
  ASSERT_OK(pruned);
  EXPECT_EQ(*pruned, 1);
  EXPECT_EQ(impl_.archive_pruned_before(), kT0 + 5000);

  EXPECT_THAT(impl_.archived(), ::testing::ElementsAre("young"));
  EXPECT_TRUE(Exists("live"));
  EXPECT_TRUE(Exists("sending"));
  EXPECT_THAT(impl_.audit(), ::testing::ElementsAre("redrive_message"));
  EXPECT_EQ(impl_.audit_pruned_before(), 0);
}

TEST_P(OutboxContractTest, PruningTheAuditDeletesOnlyOlderRecords) {
  OUTBOX_CONTRACT_NEEDS(Retention);
  impl_.add_audit(kT0 + 100, "redrive_message");
  impl_.add_audit(kT0 + 200, "acknowledge_group");
  impl_.add_audit(kT0 + 9000, "redrive_all");
  Add(Sent("archived", kT0 + 100));
  ASSERT_OK(recovery().ArchiveSent(kT0 + 1000, 10));

  auto pruned = recovery().PruneAudit(kT0 + 5000, 1);
  ASSERT_OK(pruned);
  EXPECT_EQ(*pruned, 1);
  EXPECT_THAT(impl_.audit(), ::testing::ElementsAre("acknowledge_group", "redrive_all"));
  EXPECT_EQ(impl_.audit_pruned_before(), kT0 + 5000);
  pruned = recovery().PruneAudit(kT0 + 5000, 10);
  ASSERT_OK(pruned);
  EXPECT_EQ(*pruned, 1);
  pruned = recovery().PruneAudit(kT0 + 5000, 10);
  ASSERT_OK(pruned);
  EXPECT_EQ(*pruned, 0);
  EXPECT_THAT(impl_.audit(), ::testing::ElementsAre("redrive_all"));
  EXPECT_THAT(impl_.archived(), ::testing::ElementsAre("archived"));
  EXPECT_EQ(impl_.archive_pruned_before(), 0);
}

TEST_P(OutboxContractTest, BacklogAndAckProgressReadTheTable) {
  OUTBOX_CONTRACT_NEEDS(Recovery);
  Add(Row("old", kT0));
  Add(Row("young", kT0 + 4000));
  Add(Sent("acked", kT0 + 700));
  auto backlog = recovery().CountSendingOlderThan(kT0 + 1000);
  ASSERT_OK(backlog);
  EXPECT_EQ(*backlog, 1);
  auto progress = recovery().ReadAckProgress();
  ASSERT_OK(progress);
  EXPECT_EQ(progress->last_acked_at, kT0 + 700);
  EXPECT_EQ(progress->first_due_at, kT0 + 2000);  // "old": created kT0, first retry after 2 s
  EXPECT_EQ(progress->first_due_published_at, kT0);
}

#undef OUTBOX_CONTRACT_NEEDS

}  // namespace outbox::testing
