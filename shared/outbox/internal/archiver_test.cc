#include "shared/outbox/internal/archiver.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

#include "shared/outbox/internal/state_machine.h"
#include "shared/testing/fakes.h"
#include "shared/testing/status_matchers.h"

namespace outbox {
namespace {

using ::outbox::testing::InMemoryOutbox;
using ::outbox::testing::ManualClock;

class ArchiverTest : public ::testing::Test {
 protected:
  // A row acknowledged now.
  void Sent(const std::string& id) {
    outbox_.Add(NewOutboxMessage({id, "order", "p-" + id, "EVENTS", "OrderPlaced", "REPLIES", ""},
                                 clock_.NowMillis(), RetryPolicy{}));
    ASSERT_OK(outbox_.RecordAcks({id}));
  }
  // An operator's action recorded now.
  void Audited(const std::string& action) { outbox_.audit.emplace(clock_.NowMillis(), action); }
  std::string Metrics() { return metrics_.Render(); }

  ManualClock clock_;
  InMemoryOutbox outbox_{clock_};
  MetricsRegistry metrics_;
};

TEST_F(ArchiverTest, MovesSentRowsPastTheRetentionInBatches) {
  Archiver archiver(outbox_, clock_, metrics_, Retention{absl::Hours(1), absl::Hours(24), {}, 2});
  for (const char* id : {"a", "b", "c", "d", "e"}) Sent(id);
  clock_.Advance(absl::Minutes(30));
  Sent("young");
  EXPECT_EQ(archiver.Run().archived, 0);
  clock_.Advance(absl::Minutes(31));
  const Archiver::Pass pass = archiver.Run();
  EXPECT_EQ(pass.archived, 5);  // three batches, the last one short
  EXPECT_EQ(pass.archive_pruned, 0);
  EXPECT_EQ(outbox_.archived, 5);
  EXPECT_EQ(outbox_.archive.size(), 5u);
  EXPECT_EQ(outbox_.Row("young").status, OutboxStatus::kSent);
  EXPECT_EQ(archiver.archived(), 5);
  EXPECT_NE(Metrics().find("outbox_archived_total 5"), std::string::npos);
}

// Archived rows go once acknowledged longer ago than the archive's
// retention, audit records once older than the audit's; each in batches,
// each counted, and the watermark follows.
TEST_F(ArchiverTest, PrunesTheArchiveAndTheAuditTrailPastTheirRetentions) {
  const absl::Time start = clock_.Now();
  Archiver archiver(outbox_, clock_, metrics_,
                    Retention{absl::Hours(1), absl::Hours(48), absl::Hours(24 * 365), 2});
  for (const char* id : {"a", "b", "c"}) Sent(id);
  Audited("redrive_message");
  Audited("acknowledge_group");
  Audited("redrive_all");
  clock_.Advance(absl::Hours(24));
  Sent("d");
  Audited("repair");
  clock_.Advance(absl::Hours(2));
  EXPECT_EQ(archiver.Run().archived, 4);

  clock_.Advance(absl::Hours(23));  // a, b and c were acknowledged 49 hours ago, d 25
  Archiver::Pass pass = archiver.Run();
  EXPECT_EQ(pass.archive_pruned, 3);  // two batches, the last one short
  EXPECT_EQ(pass.audit_pruned, 0);
  ASSERT_EQ(outbox_.archive.size(), 1u);
  EXPECT_EQ(outbox_.archive[0].message_id, "d");
  EXPECT_EQ(outbox_.archive_pruned_before, absl::ToUnixMillis(clock_.Now() - absl::Hours(48)));
  EXPECT_EQ(outbox_.audit.size(), 4u);

  clock_.Advance(absl::Hours(24 * 365) - absl::Hours(49) + absl::Minutes(1));
  pass = archiver.Run();
  EXPECT_EQ(pass.audit_pruned, 3);  // those made at the start; "repair" is a day younger
  ASSERT_EQ(outbox_.audit.size(), 1u);
  EXPECT_EQ(outbox_.audit.begin()->second, "repair");
  EXPECT_EQ(outbox_.audit_pruned_before, absl::ToUnixMillis(start + absl::Minutes(1)));
  EXPECT_EQ(pass.archive_pruned, 1);

  EXPECT_EQ(archiver.archive_pruned(), 4);
  EXPECT_EQ(archiver.audit_pruned(), 3);
  EXPECT_NE(Metrics().find("outbox_archive_pruned_total 4"), std::string::npos) << Metrics();
  EXPECT_NE(Metrics().find("outbox_audit_pruned_total 3"), std::string::npos) << Metrics();
}

TEST_F(ArchiverTest, AZeroRetentionKeepsEveryArchivedRowAndAuditRecord) {
  Archiver archiver(outbox_, clock_, metrics_,
                    Retention{absl::Hours(1), absl::ZeroDuration(), absl::ZeroDuration(), 10});
  Sent("a");
  Audited("redrive_message");
  clock_.Advance(absl::Hours(24 * 10000));
  const Archiver::Pass pass = archiver.Run();
  EXPECT_EQ(pass.archived, 1);
  EXPECT_EQ(pass.archive_pruned, 0);
  EXPECT_EQ(pass.audit_pruned, 0);
  EXPECT_EQ(outbox_.archive.size(), 1u);
  EXPECT_EQ(outbox_.audit.size(), 1u);
  EXPECT_EQ(outbox_.archive_pruned_before, 0);
}

// A pass is bounded (20 batches of each kind); one that stops at the bound
// says so, and the next carries on.
TEST_F(ArchiverTest, APassThatStopsAtItsBoundIsBehind) {
  Archiver archiver(outbox_, clock_, metrics_, Retention{absl::Hours(1), absl::Hours(2), {}, 2});
  for (int i = 0; i < 45; ++i) Sent(absl::StrCat("m", i));
  clock_.Advance(absl::Minutes(61));
  Archiver::Pass pass = archiver.Run();
  EXPECT_EQ(pass.archived, 40);
  EXPECT_TRUE(pass.behind);
  pass = archiver.Run();
  EXPECT_EQ(pass.archived, 5);
  EXPECT_FALSE(pass.behind);
  clock_.Advance(absl::Hours(1));
  pass = archiver.Run();
  EXPECT_EQ(pass.archive_pruned, 40);
  EXPECT_TRUE(pass.behind);
  pass = archiver.Run();
  EXPECT_EQ(pass.archive_pruned, 5);
  EXPECT_FALSE(pass.behind);
}

TEST_F(ArchiverTest, StopsAtAFailureAndWhenAskedToStop) {
  for (const char* id : {"a", "b", "c"}) Sent(id);
  Audited("redrive_message");
  clock_.Advance(absl::Hours(24 * 400));
  bool stopping = true;
  Archiver archiver(outbox_, clock_, metrics_,
                    Retention{absl::Hours(1), absl::Hours(1), absl::Hours(1), 1},
                    [&stopping] { return stopping; });
  Archiver::Pass pass = archiver.Run();
  EXPECT_EQ(pass.archived + pass.archive_pruned + pass.audit_pruned, 0);
  stopping = false;
  outbox_.fail_with = absl::UnavailableError("database is locked");
  pass = archiver.Run();
  EXPECT_EQ(pass.archived + pass.archive_pruned + pass.audit_pruned, 0);
  outbox_.fail_with = absl::OkStatus();
  pass = archiver.Run();
  EXPECT_EQ(pass.archived, 3);
  EXPECT_EQ(pass.archive_pruned, 3);
  EXPECT_EQ(pass.audit_pruned, 1);
}

}  // namespace
}  // namespace outbox
