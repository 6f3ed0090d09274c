#include "shared/sqlite/internal/sqlite_outbox.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>
#include <thread>

#include "shared/outbox/internal/state_machine.h"
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

// A wait told to stop (a work loop's shutdown) ends at its next poll,
// long before its deadline, naming what is still SENDING.
TEST_F(SqliteOutboxTest, AWaitUntilClosedEndsWhenToldToStop) {
  Write("m1");
  int asked = 0;
  auto waited = outbox_->WaitUntilClosed(absl::InfiniteFuture(), absl::Milliseconds(1),
                                         [&] { return ++asked == 3; });
  EXPECT_THAT(waited.status(), StatusIs(absl::StatusCode::kCancelled));
  EXPECT_NE(waited.status().message().find("1 outbox rows still SENDING"), std::string::npos)
      << waited.status();
  EXPECT_EQ(asked, 3);
  ASSERT_OK(outbox_->RecordAcks({"m1"}));
  waited =
      outbox_->WaitUntilClosed(absl::InfiniteFuture(), absl::Milliseconds(1), [] { return true; });
  ASSERT_OK(waited);  // nothing SENDING: the counts, whatever `stop` says
  EXPECT_EQ(waited->sent, 1);
}

// The library's ALREADY_EXISTS (the message id or the business key has a
// row) is told apart from the adopter's own, returned or from its tables.
TEST_F(SqliteOutboxTest, TheOutboxRowsAlreadyExistsIsToldFromTheAdopters) {
  ASSERT_OK(file_->Write([](SQLite::Database& db) {
    db.exec("CREATE TABLE orders (order_id TEXT PRIMARY KEY)");
    return absl::OkStatus();
  }));
  auto write = [&](const std::string& id, const std::string& key,
                   const std::function<absl::Status(SQLite::Database&)>& business) {
    return outbox_->Write({id, "order", key, "orders", "OrderPlaced", "replies", "{}"}, business)
        .status();
  };
  auto nothing = [](SQLite::Database&) { return absl::OkStatus(); };
  ASSERT_OK(write("m1", "o-1", nothing));

  const absl::Status same_id = write("m1", "o-2", nothing);
  EXPECT_THAT(same_id, StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_TRUE(IsOutboxRowExists(same_id)) << same_id;
  const absl::Status same_key = write("m2", "o-1", nothing);
  EXPECT_THAT(same_key, StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_TRUE(IsOutboxRowExists(same_key)) << same_key;

  const absl::Status returned = write("m3", "o-3", [](SQLite::Database&) {
    return absl::AlreadyExistsError("order o-3 is placed already");
  });
  EXPECT_THAT(returned, StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_FALSE(IsOutboxRowExists(returned));
  auto place = [](SQLite::Database& db) {
    db.exec("INSERT INTO orders VALUES ('o-4')");
    return absl::OkStatus();
  };
  ASSERT_OK(write("m4", "o-4", place));
  const absl::Status constraint = write("m5", "o-5", place);  // orders' own primary key
  EXPECT_THAT(constraint, StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_FALSE(IsOutboxRowExists(constraint)) << constraint;
  EXPECT_FALSE(IsOutboxRowExists(absl::OkStatus()));
}

// The adopter's step when a row closes commits with the row's new state; a
// step that fails rolls back its own writes and the row closes all the same.
class RowClosedTest : public SqliteOutboxTest {
 protected:
  void SetUp() override {
    SqliteOutboxTest::SetUp();
    ASSERT_OK(file_->Write([](SQLite::Database& db) {
      db.exec("CREATE TABLE confirmed (message_id TEXT PRIMARY KEY, status TEXT)");
      return absl::OkStatus();
    }));
  }
  std::string Confirmed(const std::string& id) {
    std::string status = "none";
    EXPECT_OK(file_->Read("confirmed", [&](SQLite::Database& db) {
      SQLite::Statement q(db, "SELECT status FROM confirmed WHERE message_id = ?");
      q.bind(1, id);
      if (q.executeStep()) status = q.getColumn(0).getString();
      return absl::OkStatus();
    }));
    return status;
  }
};

TEST_F(RowClosedTest, RunsInTheTransactionThatClosesTheRowForSentAndRejected) {
  std::vector<std::string> seen;
  outbox_->set_on_closed([&](SQLite::Database& db, const OutboxMessage& row) {
    seen.push_back(row.message_id);
    SQLite::Statement insert(db, "INSERT INTO confirmed VALUES (?, ?)");
    insert.bind(1, row.message_id);
    insert.bind(2, std::string(StatusName(row.status)));
    insert.exec();
    return absl::OkStatus();
  });
  Write("m1");
  Write("m2");
  ASSERT_OK(outbox_->RecordAcks({"m1", "unknown"}));
  ASSERT_OK(outbox_->RecordAcks({"m1"}));  // already SENT: nothing closes
  ASSERT_OK(outbox_->RecordRejects({{"m2", "out of stock"}}));
  EXPECT_EQ(seen, (std::vector<std::string>{"m1", "m2"}));
  EXPECT_EQ(Confirmed("m1"), "SENT");
  EXPECT_EQ(Confirmed("m2"), "FAILED");
}

TEST_F(RowClosedTest, AFailingStepRollsBackItsOwnWritesAndTheRowClosesAllTheSame) {
  outbox_->set_on_closed([&](SQLite::Database& db, const OutboxMessage& row) {
    SQLite::Statement insert(db, "INSERT INTO confirmed VALUES (?, 'half')");
    insert.bind(1, row.message_id);
    insert.exec();
    if (row.message_id == "m1") return absl::InternalError("the shop is closed");
    db.exec("INSERT INTO no_such_table VALUES (1)");  // throws
    return absl::OkStatus();
  });
  Write("m1");
  Write("m2");
  ASSERT_OK(outbox_->RecordAcks({"m1", "m2"}));
  EXPECT_EQ(Confirmed("m1"), "none");
  EXPECT_EQ(Confirmed("m2"), "none");
  auto m1 = outbox_->Get("m1");
  ASSERT_OK(m1);
  EXPECT_EQ(m1->status, OutboxStatus::kSent);
  auto m2 = outbox_->Get("m2");
  ASSERT_OK(m2);
  EXPECT_EQ(m2->status, OutboxStatus::kSent);
}

// A producer's schema in one call: the adopter's tables and the outbox's,
// as version 1; opened again, nothing runs twice.
TEST(ProducerSchemaTest, MakesTheAdoptersTablesAndTheOutboxInVersionOne) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "producer_schema_test.db").string();
  std::filesystem::remove(path);
  const DbSchema schema = outbox::ProducerSchema(
      "CREATE TABLE orders (id TEXT PRIMARY KEY); CREATE TABLE lines (id TEXT)");
  for (int open = 0; open < 2; ++open) {
    auto file = OpenSqliteFile(path, {}, &schema);
    ASSERT_OK(file);
    ASSERT_OK((*file)->Read("look", [&](SQLite::Database& db) {
      EXPECT_EQ(SchemaVersion(db), 1);
      for (const char* table : {"orders", "lines", "outbox", "outbox_archive", "recovery_lease"}) {
        EXPECT_TRUE(db.tableExists(table)) << table;
      }
      return absl::OkStatus();
    }));
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace outbox
