#include "shared/sqlite/sqlite_outbox.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "shared/outbox/state_machine.h"
#include "shared/sqlite/outbox_table.h"
#include "shared/sqlite/schema.h"
#include "shared/testing/manual_clock.h"
#include "shared/testing/status_matchers.h"

namespace outbox {
namespace {

using ::outbox::testing::ManualClock;
using ::outbox::testing::StatusIs;

const DbSchema& ProducerSchema() {
  static const DbSchema* const schema = new DbSchema{{{"outbox tables", CreateOutboxTable}}};
  return *schema;
}

class SqliteOutboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sqlite_outbox_test.XXXXXX";
    dir_ = mkdtemp(tmpl);
    auto file = OpenSqliteFile(dir_ + "/producer.db", DbOptions{}, &ProducerSchema());
    ASSERT_OK(file);
    file_ = std::move(file).value();
    outbox_ = std::make_unique<SqliteOutbox>(*file_, clock_);
  }
  void TearDown() override {
    outbox_.reset();
    file_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Write(const std::string& id) {
    ASSERT_OK(outbox_->Write({id, "order", "o-" + id, "orders", "OrderPlaced", "replies", "{}"},
                             [](SQLite::Database&) { return absl::OkStatus(); }));
  }

  std::string dir_;
  ManualClock clock_;
  std::unique_ptr<SqliteFile> file_;
  std::unique_ptr<SqliteOutbox> outbox_;
};

// A batch job asks whether its rows are closed before it exits: counts on
// its own connection, and a wait with a deadline.
TEST_F(SqliteOutboxTest, CountsRowsAndWaitsUntilNoneIsSending) {
  Write("m1");
  Write("m2");
  Write("m3");
  auto counts = outbox_->CountRows();
  ASSERT_OK(counts);
  EXPECT_EQ(counts->sending, 3);
  EXPECT_EQ(counts->sent, 0);

  ASSERT_OK(outbox_->RecordAcks({"m1"}));
  ASSERT_OK(outbox_->RecordRejects({{"m2", "out of stock"}}));
  auto waited = outbox_->WaitUntilClosed(absl::Now() + absl::Milliseconds(50));
  EXPECT_THAT(waited.status(), StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_NE(waited.status().message().find("1 outbox rows still SENDING"), std::string::npos)
      << waited.status();

  std::thread ack([&] {
    absl::SleepFor(absl::Milliseconds(100));
    EXPECT_OK(outbox_->RecordAcks({"m3"}));
  });
  waited = outbox_->WaitUntilClosed(absl::Now() + absl::Seconds(10), absl::Milliseconds(10));
  ack.join();
  ASSERT_OK(waited);
  EXPECT_EQ(waited->sending, 0);
  EXPECT_EQ(waited->sent, 2);
  EXPECT_EQ(waited->failed, 1);
}

}  // namespace
}  // namespace outbox
