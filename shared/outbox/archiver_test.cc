#include "shared/outbox/archiver.h"

#include <gtest/gtest.h>

#include "shared/outbox/state_machine.h"
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

  ManualClock clock_;
  InMemoryOutbox outbox_{clock_};
  MetricsRegistry metrics_;
};

TEST_F(ArchiverTest, MovesSentRowsPastTheRetentionInBatches) {
  Archiver archiver(outbox_, clock_, metrics_, absl::Hours(1), /*batch=*/2);
  for (const char* id : {"a", "b", "c", "d", "e"}) Sent(id);
  clock_.Advance(absl::Minutes(30));
  Sent("young");
  EXPECT_EQ(archiver.Run(), 0);
  clock_.Advance(absl::Minutes(31));
  EXPECT_EQ(archiver.Run(), 5);  // three batches, the last one short
  EXPECT_EQ(outbox_.archived, 5);
  EXPECT_EQ(outbox_.Row("young").status, OutboxStatus::kSent);
  EXPECT_EQ(archiver.archived(), 5);
  EXPECT_NE(metrics_.Render().find("outbox_archived_total 5"), std::string::npos);
}

TEST_F(ArchiverTest, StopsAtAFailureAndWhenAskedToStop) {
  for (const char* id : {"a", "b", "c"}) Sent(id);
  clock_.Advance(absl::Hours(2));
  bool stopping = true;
  Archiver archiver(outbox_, clock_, metrics_, absl::Hours(1), /*batch=*/1,
                    [&stopping] { return stopping; });
  EXPECT_EQ(archiver.Run(), 0);
  stopping = false;
  outbox_.fail_with = absl::UnavailableError("database is locked");
  EXPECT_EQ(archiver.Run(), 0);
  outbox_.fail_with = absl::OkStatus();
  EXPECT_EQ(archiver.Run(), 3);
}

}  // namespace
}  // namespace outbox
