#include "shared/sqlite/internal/recovery_store.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "shared/outbox/internal/failure.h"
#include "shared/sqlite/internal/operator_store.h"
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

// Runs SQL in another process (the sqlite3 shell), which closes the file when
// done: as the last connection to it anywhere, it would checkpoint and delete
// -wal and -shm.
void WriteFromAnotherProcess(const std::string& path, const std::string& sql) {
  const std::string command =
      absl::StrCat("sqlite3 -cmd '.timeout 5000' '", path, "' \"", sql, "\" >/dev/null");
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
}

int64_t CountOrders(SqliteFile& file) {
  int64_t n = -1;
  EXPECT_OK(file.Read("count orders", [&](SQLite::Database& db) {
    n = db.execAndGet("SELECT count(*) FROM orders").getInt64();
    return absl::OkStatus();
  }));
  return n;
}

// A producer that runs its recovery in-process opens one file through both
// entry points. Neither may open or close the file outside SQLite: POSIX locks
// belong to the process, so closing any descriptor of the file would drop the
// locks of every connection, and another process's last close would then
// delete the WAL under them (a frozen snapshot, updates overwritten).
TEST(SqliteLocksTest, AFileOpenedTwiceInOneProcessKeepsItsLocks) {
  char tmpl[] = "/tmp/recovery_store_test.XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string path = dir + "/orders.db";
  {
    auto producer = OpenSqliteFile(path, DbOptions{}, &ProducerSchema());
    ASSERT_OK(producer);
    auto recovery = RecoveryStore::Open(path, DbOptions{}, kProducer);
    ASSERT_OK(recovery);
    auto tool = OpenSqliteFile(path, DbOptions{}, &ProducerSchema());
    ASSERT_OK(tool);
    tool->reset();
    ASSERT_EQ(CountOrders(**producer), 0);

    WriteFromAnotherProcess(path, "INSERT INTO orders VALUES ('o-1')");
    EXPECT_TRUE(std::filesystem::exists(path + "-wal")) << "the other process was the last one";
    EXPECT_TRUE(std::filesystem::exists(path + "-shm"));
    EXPECT_EQ(CountOrders(**producer), 1);
    auto counts = OperatorStore(**recovery).Counts();
    ASSERT_OK(counts);

    WriteFromAnotherProcess(path, "INSERT INTO orders VALUES ('o-2')");
    EXPECT_EQ(CountOrders(**producer), 2);
    ASSERT_OK((*producer)->Write([](SQLite::Database& db) {
      db.exec("INSERT INTO orders VALUES ('o-3')");
      return absl::OkStatus();
    }));
    WriteFromAnotherProcess(path, "INSERT INTO orders SELECT 'o-' || (count(*) + 1) FROM orders");
    EXPECT_EQ(CountOrders(**producer), 4);
  }
  SQLite::Database after(path, SQLite::OPEN_READONLY);
  EXPECT_EQ(
      after.execAndGet("SELECT group_concat(id, ',') FROM (SELECT id FROM orders ORDER BY id)")
          .getString(),
      "o-1,o-2,o-3,o-4");
  std::filesystem::remove_all(dir);
}

class RecoveryStoreTest : public testing::ProducerFileTest {};

TEST_F(RecoveryStoreTest, ClaimsDueRowsWithLinearBackoffAndFailsExhaustedOnes) {
  Insert("due1", OutboxStatus::kSending, 1, 1000);
  Insert("due2", OutboxStatus::kSending, 2, 900);
  Insert("later", OutboxStatus::kSending, 1, 99'999);
  Insert("done", OutboxStatus::kSent, 1, 0, 5);
  Insert("spent", OutboxStatus::kSending, 3, 500);

  auto c = store_->ClaimDue(10'000, 10, "", policy_);
  ASSERT_OK(c);
  ASSERT_EQ(c->to_publish.size(), 2u);
  EXPECT_EQ(c->to_publish[0].message_id, "due2");  // oldest due first
  EXPECT_EQ(c->to_publish[0].attempts, 3);
  EXPECT_EQ(c->to_publish[0].next_retry_at, 10'000 + 5'000);  // 2s*3 capped at 5s
  EXPECT_EQ(c->to_publish[1].attempts, 2);
  EXPECT_EQ(c->to_publish[1].next_retry_at, 10'000 + 4'000);  // 2s*2
  ASSERT_EQ(c->exhausted.size(), 1u);
  EXPECT_EQ(c->exhausted[0].message_id, "spent");
  EXPECT_EQ(store_->Get("spent")->status, OutboxStatus::kFailed);

  // Claimed rows are not due again until their new next_retry_at.
  auto again = store_->ClaimDue(10'001, 10, "", policy_);
  ASSERT_OK(again);
  EXPECT_TRUE(again->to_publish.empty());
  EXPECT_TRUE(again->exhausted.empty());
  EXPECT_EQ(store_->Get("due1")->last_attempt_at, 10'000);
  // The stored row carries what a re-publish needs.
  EXPECT_EQ(c->to_publish[0].message_type, "OrderPlaced");
  EXPECT_EQ(c->to_publish[0].reply_to, "order-replies");
}

// The adopter's step runs in the claim that turns a row FAILED, for that
// row alone; what it writes commits with it.
TEST_F(RecoveryStoreTest, ARowTurnedFailedRunsTheRowClosedStepInTheClaim) {
  raw_->exec("CREATE TABLE failed_orders (biz_key TEXT PRIMARY KEY, status TEXT)");
  store_->set_on_closed([](SQLite::Database& db, const OutboxMessage& row) {
    SQLite::Statement insert(db, "INSERT INTO failed_orders VALUES (?, ?)");
    insert.bind(1, row.biz_key);
    insert.bind(2, std::string(StatusName(row.status)));
    insert.exec();
    return absl::OkStatus();
  });
  Insert("due", OutboxStatus::kSending, 1, 1000);
  Insert("spent", OutboxStatus::kSending, 3, 500);
  ASSERT_OK(store_->ClaimDue(10'000, 10, "", policy_));
  SQLite::Statement rows(*raw_, "SELECT biz_key, status FROM failed_orders");
  ASSERT_TRUE(rows.executeStep());
  EXPECT_EQ(rows.getColumn(0).getString(), "order-spent");
  EXPECT_EQ(rows.getColumn(1).getString(), "FAILED");
  EXPECT_FALSE(rows.executeStep());
}

TEST_F(RecoveryStoreTest, ABigScatteredClaimSavesEveryRowAndKeepsTheDueOrder) {
  // 1,200 due rows, each on its own pages between SENT ones (more pages than
  // SQLite's default cache holds), due in the reverse of their id order.
  constexpr int kDue = 1200;
  raw_->exec("BEGIN");
  OutboxInserter insert(*raw_);
  for (int i = 0; i < kDue; ++i) {
    for (int j = 0; j < 3; ++j) {
      OutboxMessage sent;
      sent.message_id = absl::StrCat("sent-", i, "-", j);
      sent.biz_type = "order";
      sent.biz_key = sent.message_id;
      sent.topic = "orders";
      sent.payload = std::string(1000, 's');
      sent.status = OutboxStatus::kSent;
      sent.attempts = 1;
      sent.max_attempts = 3;
      sent.created_at = sent.updated_at = sent.sent_at = 1;
      insert.Insert(sent);
    }
    OutboxMessage due;
    due.message_id = absl::StrCat("due-", i);
    due.biz_type = "order";
    due.biz_key = due.message_id;
    due.topic = "orders";
    due.payload = std::string(1000, 'd');
    due.status = OutboxStatus::kSending;
    due.attempts = i % 10 == 0 ? 3 : 1;  // every tenth has spent its budget
    due.max_attempts = 3;
    due.next_retry_at = 5000 - i;
    due.created_at = due.updated_at = 1;
    insert.Insert(due);
  }
  raw_->exec("COMMIT");

  auto c = store_->ClaimDue(10'000, kDue, "", policy_);
  ASSERT_OK(c);
  ASSERT_EQ(c->to_publish.size(), static_cast<size_t>(kDue - kDue / 10));
  ASSERT_EQ(c->exhausted.size(), static_cast<size_t>(kDue / 10));
  EXPECT_EQ(c->to_publish.front().message_id, "due-1199");  // oldest due first
  EXPECT_EQ(c->to_publish.back().message_id, "due-1");
  EXPECT_EQ(c->exhausted.front().message_id, "due-1190");
  // Every row was saved, whatever order it was written in.
  SQLite::Statement saved(*raw_, R"sql(
    SELECT SUM(status = 'SENDING' AND attempts = 2 AND next_retry_at = 14000
               AND last_attempt_at = 10000),
           SUM(status = 'FAILED' AND attempts = 3)
    FROM outbox WHERE message_id LIKE 'due-%')sql");
  ASSERT_TRUE(saved.executeStep());
  EXPECT_EQ(saved.getColumn(0).getInt(), kDue - kDue / 10);
  EXPECT_EQ(saved.getColumn(1).getInt(), kDue / 10);
  auto again = store_->ClaimDue(10'001, kDue, "", policy_);
  ASSERT_OK(again);
  EXPECT_TRUE(again->to_publish.empty());
}

TEST_F(RecoveryStoreTest, DeferPushesDueRowsWithoutSpendingAttempts) {
  Insert("due1", OutboxStatus::kSending, 1, 1000);
  Insert("due2", OutboxStatus::kSending, 2, 900);
  Insert("later", OutboxStatus::kSending, 1, 99'999);
  Insert("done", OutboxStatus::kSent, 1, 0, 5);

  auto n = store_->DeferDue(10'000, 10, "", policy_);
  ASSERT_OK(n);
  EXPECT_EQ(*n, 2);
  EXPECT_EQ(store_->Get("due1")->attempts, 1);
  EXPECT_EQ(store_->Get("due1")->next_retry_at, 10'000 + 2'000);  // one step of attempt 1
  EXPECT_EQ(store_->Get("due2")->attempts, 2);
  EXPECT_EQ(store_->Get("due2")->next_retry_at, 10'000 + 4'000);
  EXPECT_EQ(store_->Get("later")->next_retry_at, 99'999);
  EXPECT_EQ(*store_->DeferDue(10'001, 10, "", policy_), 0);
  ASSERT_OK(store_->TryAcquireLease("a", 10'000, 5'000));
  EXPECT_TRUE(absl::IsFailedPrecondition(store_->DeferDue(20'000, 10, "b", policy_).status()));
}

TEST_F(RecoveryStoreTest, ClaimUsesTheStatusNextRetryIndex) {
  const std::string plan = store_->ExplainClaim();
  EXPECT_NE(plan.find("outbox_status_next_retry"), std::string::npos) << plan;
}

TEST_F(RecoveryStoreTest, OnlyTheLeaseHolderClaims) {
  Insert("m", OutboxStatus::kSending, 1, 0);
  ASSERT_TRUE(*store_->TryAcquireLease("a", 1000, 5000));
  EXPECT_FALSE(*store_->TryAcquireLease("b", 2000, 5000));
  EXPECT_TRUE(*store_->TryAcquireLease("a", 3000, 5000));  // renew
  EXPECT_TRUE(absl::IsFailedPrecondition(store_->ClaimDue(4000, 10, "b", policy_).status()));
  // a's lease expires at 8000: b takes over, and a is fenced off.
  EXPECT_TRUE(*store_->TryAcquireLease("b", 8000, 5000));
  EXPECT_TRUE(absl::IsFailedPrecondition(store_->ClaimDue(8001, 10, "a", policy_).status()));
  auto c = store_->ClaimDue(8001, 10, "b", policy_);
  ASSERT_OK(c);
  EXPECT_EQ(c->to_publish.size(), 1u);
  // Giving the lease up lets another take it at once.
  ASSERT_OK(store_->ReleaseLease("b", 9000));
  EXPECT_TRUE(*store_->TryAcquireLease("a", 9000, 5000));
  EXPECT_EQ(store_->Lease()->holder, "a");
}

// Claims write history only off the happy path: a re-publish and the
// exhaustion, by the lease holder; the archive takes a row's history along.
TEST_F(RecoveryStoreTest, ClaimsWriteHistoryAndTheArchiveRemovesIt) {
  Insert("retry", OutboxStatus::kSending, 1, 1000);
  Insert("spent", OutboxStatus::kSending, 3, 1000);
  ASSERT_OK(store_->TryAcquireLease("rec-1", 1500, 10000));
  ASSERT_OK(store_->ClaimDue(1500, 10, "rec-1", policy_));
  OutboxMessage row;
  auto retry = ops_->History("retry", &row);
  ASSERT_EQ(retry->size(), 1u);
  EXPECT_EQ((*retry)[0].event, kEventRepublished);
  EXPECT_EQ((*retry)[0].detail, "attempt 2");
  EXPECT_EQ((*retry)[0].instance, "rec-1");
  auto spent = ops_->History("spent", &row);
  ASSERT_EQ(spent->size(), 1u);
  EXPECT_EQ((*spent)[0].event, kEventFailed);
  EXPECT_EQ(row.failure_kind, kFailureExhausted);
  EXPECT_THAT((*spent)[0].detail, ::testing::HasSubstr("exhausted: no acknowledgement after 3"));
  // The acknowledgement of a retried row is noted too; then it is archived.
  {
    SQLite::Transaction tx(*raw_);
    RecordAcks(*raw_, {"retry"}, 2000);
    tx.commit();
  }
  EXPECT_EQ(ops_->History("retry", &row)->size(), 2u);
  EXPECT_EQ(*store_->ArchiveSent(3000, 10), 1);
  EXPECT_EQ(CountHistory(*raw_), 1);  // "spent"'s only
}

TEST_F(RecoveryStoreTest, ArchivesOldSentRowsInBoundedBatches) {
  for (int i = 0; i < 7; ++i) Insert(absl::StrCat("old", i), OutboxStatus::kSent, 1, 0, 100 + i);
  Insert("new", OutboxStatus::kSent, 1, 0, 10'000);
  Insert("pending", OutboxStatus::kSending, 1, 0);
  EXPECT_EQ(*store_->ArchiveSent(5'000, 3), 3);
  EXPECT_EQ(*store_->ArchiveSent(5'000, 3), 3);
  EXPECT_EQ(*store_->ArchiveSent(5'000, 3), 1);
  EXPECT_EQ(*store_->ArchiveSent(5'000, 3), 0);
  auto counts = ops_->Counts();
  EXPECT_EQ(counts->sent, 1);
  EXPECT_EQ(counts->sending, 1);
  EXPECT_EQ(counts->archived, 7);
}

// The watermark row of `table` in outbox_retention: pruned_before,
// pruned_rows; {0, 0} when there is none.
std::pair<int64_t, int64_t> Watermark(SQLite::Database& db, const std::string& table) {
  SQLite::Statement stmt(db,
                         "SELECT pruned_before, pruned_rows FROM outbox_retention WHERE name = ?");
  stmt.bind(1, table);
  if (!stmt.executeStep()) return {0, 0};
  return {stmt.getColumn(0).getInt64(), stmt.getColumn(1).getInt64()};
}

std::vector<std::string> Strings(SQLite::Database& db, const std::string& sql) {
  std::vector<std::string> out;
  SQLite::Statement stmt(db, sql);
  while (stmt.executeStep()) out.push_back(stmt.getColumn(0).getString());
  return out;
}

// Archived rows are deleted by acknowledgement, oldest first, a bounded
// batch per transaction, each with the watermark; nothing else goes.
TEST_F(RecoveryStoreTest, PrunesTheArchiveInBoundedBatchesWithItsWatermark) {
  // Acknowledged out of id order: the pick follows sent_at, not the rowid.
  for (int i = 0; i < 7; ++i) Insert(absl::StrCat("old", i), OutboxStatus::kSent, 1, 0, 700 - i);
  Insert("young", OutboxStatus::kSent, 1, 0, 4'000);
  ASSERT_EQ(*store_->ArchiveSent(5'000, 100), 8);
  Insert("live", OutboxStatus::kSent, 1, 0, 50);  // acknowledged long ago, never archived
  Insert("pending", OutboxStatus::kSending, 1, 0);
  raw_->exec("INSERT INTO orders VALUES ('o-1')");
  ASSERT_OK(ops_->RecordAudit(AuditRecord{0, 10, "alice", "redrive_all", "FAILED", false, 0,
                                          "ok"}));  // older than every cutoff below

  EXPECT_EQ(*store_->PruneArchive(690, 10), 0);  // old6 is 694: none acknowledged before 690
  EXPECT_EQ(Watermark(*raw_, "outbox_archive"), std::make_pair(int64_t{0}, int64_t{0}));
  EXPECT_EQ(*store_->PruneArchive(3'000, 3), 3);
  EXPECT_EQ(Strings(*raw_, "SELECT message_id FROM outbox_archive ORDER BY sent_at"),
            (std::vector<std::string>{"old3", "old2", "old1", "old0", "young"}));
  EXPECT_EQ(Watermark(*raw_, "outbox_archive"), std::make_pair(int64_t{3'000}, int64_t{3}));
  EXPECT_EQ(*store_->PruneArchive(3'000, 3), 3);
  EXPECT_EQ(*store_->PruneArchive(3'000, 3), 1);
  EXPECT_EQ(*store_->PruneArchive(3'000, 3), 0);
  // An earlier cutoff (a longer retention) never lowers the watermark.
  EXPECT_EQ(*store_->PruneArchive(1'000, 3), 0);
  EXPECT_EQ(Watermark(*raw_, "outbox_archive"), std::make_pair(int64_t{3'000}, int64_t{7}));

  EXPECT_EQ(Strings(*raw_, "SELECT message_id FROM outbox_archive"),
            std::vector<std::string>{"young"});
  EXPECT_EQ(Strings(*raw_, "SELECT message_id FROM outbox ORDER BY id"),
            (std::vector<std::string>{"live", "pending"}));
  EXPECT_EQ(raw_->execAndGet("SELECT count(*) FROM orders").getInt64(), 1);
  EXPECT_EQ(ops_->Audit(0, 10)->size(), 1u);
  EXPECT_EQ(Watermark(*raw_, "outbox_audit"), std::make_pair(int64_t{0}, int64_t{0}));
  // The delete walks the index, never the table.
  SQLite::Statement plan(*raw_,
                         "EXPLAIN QUERY PLAN SELECT rowid FROM outbox_archive WHERE sent_at < 1 "
                         "ORDER BY sent_at LIMIT 1");
  ASSERT_TRUE(plan.executeStep());
  EXPECT_THAT(plan.getColumn(3).getString(), ::testing::HasSubstr("outbox_archive_sent_at"));
}

TEST_F(RecoveryStoreTest, PrunesTheAuditTrailByAgeInBoundedBatches) {
  for (int i = 0; i < 5; ++i) {
    ASSERT_OK(ops_->RecordAudit(
        AuditRecord{0, 100 + i, "alice", absl::StrCat("action", i), "FAILED", false, 0, "ok"}));
  }
  ASSERT_OK(ops_->RecordAudit(AuditRecord{0, 9'000, "bob", "repair", "t", false, 1, "ok"}));
  Insert("archived", OutboxStatus::kSent, 1, 0, 10);
  ASSERT_EQ(*store_->ArchiveSent(5'000, 10), 1);

  EXPECT_EQ(*store_->PruneAudit(5'000, 2), 2);
  EXPECT_EQ(Watermark(*raw_, "outbox_audit"), std::make_pair(int64_t{5'000}, int64_t{2}));
  EXPECT_EQ(*store_->PruneAudit(5'000, 2), 2);
  EXPECT_EQ(*store_->PruneAudit(5'000, 2), 1);
  EXPECT_EQ(*store_->PruneAudit(5'000, 2), 0);
  auto audit = ops_->Audit(0, 10);
  ASSERT_OK(audit);
  ASSERT_EQ(audit->size(), 1u);
  EXPECT_EQ((*audit)[0].action, "repair");
  EXPECT_EQ(Watermark(*raw_, "outbox_audit"), std::make_pair(int64_t{5'000}, int64_t{5}));
  EXPECT_EQ(ops_->Counts()->archived, 1);
  EXPECT_EQ(Watermark(*raw_, "outbox_archive"), std::make_pair(int64_t{0}, int64_t{0}));
}

// A producer whose schema lacks CreateOutboxRetentionTables: pruning says
// so, and recovery adds nothing to the file.
TEST_F(RecoveryStoreTest, PruningNeedsTheRetentionTables) {
  static const DbSchema* const schema = new DbSchema{{
      {"outbox tables, before retention",
       [](SQLite::Database& db) {
         CreateOutboxTable(db);
         db.exec("DROP TABLE outbox_retention");
       }},
  }};
  const ProducerDb producer{schema, "order_service", "ORDERS_DB", "orders", "orders database"};
  const std::string path = dir_ + "/older.db";
  ASSERT_OK(OpenSqliteFile(path, DbOptions{}, schema));
  auto store = RecoveryStore::Open(path, DbOptions{}, producer);
  ASSERT_OK(store);
  EXPECT_THAT((*store)->PruneArchive(1'000, 10),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       ::testing::HasSubstr("CreateOutboxRetentionTables")));
  EXPECT_THAT((*store)->PruneAudit(1'000, 10), StatusIs(absl::StatusCode::kFailedPrecondition));
  SQLite::Database db(path, SQLite::OPEN_READONLY);
  EXPECT_FALSE(db.tableExists("outbox_retention"));
}

TEST_F(RecoveryStoreTest, NeverCreatesTheFileOrTheSchema) {
  const std::string missing = dir_ + "/elsewhere/orders.db";
  auto store = RecoveryStore::Open(missing, DbOptions{}, kProducer);
  EXPECT_TRUE(absl::IsNotFound(store.status())) << store.status();
  EXPECT_NE(store.status().message().find(missing), std::string::npos) << store.status();
  EXPECT_FALSE(std::filesystem::exists(missing));

  const std::string empty = dir_ + "/empty.db";
  {  // a database file with no table at all
    SQLite::Database db(empty, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
  }
  store = RecoveryStore::Open(empty, DbOptions{}, kProducer);
  EXPECT_TRUE(absl::IsNotFound(store.status())) << store.status();
  EXPECT_NE(store.status().message().find("has schema version 0, not"), std::string::npos)
      << store.status();
  SQLite::Database db(empty, SQLite::OPEN_READONLY);
  EXPECT_FALSE(db.tableExists("outbox"));
  EXPECT_FALSE(db.tableExists("recovery_lease"));
}

// Recovery changes no schema: an older file waits for its producer to
// upgrade it, a newer one is refused and left as it is.
TEST_F(RecoveryStoreTest, WaitsForAnOlderSchemaAndRefusesANewerOne) {
  const DbSchema& schema = ProducerSchema();
  const std::string older = dir_ + "/older.db";
  {
    SQLite::Database db(older, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    ASSERT_OK(UpgradeSchema(db, older, schema, schema.latest() - 1));
  }
  auto store = RecoveryStore::Open(older, DbOptions{}, kProducer);
  EXPECT_TRUE(absl::IsNotFound(store.status())) << store.status();
  {
    SQLite::Database db(older, SQLite::OPEN_READONLY);
    EXPECT_EQ(SchemaVersion(db), schema.latest() - 1);
  }

  const std::string newer = dir_ + "/newer.db";
  {
    SQLite::Database db(newer, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    db.exec(absl::StrCat("PRAGMA user_version = ", schema.latest() + 1));
  }
  store = RecoveryStore::OpenWhenCreated(newer, DbOptions{}, kProducer, absl::Seconds(30), nullptr);
  EXPECT_TRUE(absl::IsFailedPrecondition(store.status())) << store.status();
  EXPECT_NE(store.status().message().find(
                absl::StrCat(newer, " has schema version ", schema.latest() + 1, "; this ")),
            std::string::npos)
      << store.status();
  EXPECT_FALSE(std::filesystem::exists(newer + "-wal"));
  EXPECT_FALSE(std::filesystem::exists(newer + "-shm"));
}

TEST_F(RecoveryStoreTest, GivesUpWaitingWithTheFailedPreconditionNamingThePath) {
  const std::string missing = dir_ + "/missing.db";
  int waits = 0;
  auto store = RecoveryStore::OpenWhenCreated(
      missing, DbOptions{}, kProducer, absl::Milliseconds(300),
      [&](const absl::Status& why) {
        ++waits;
        EXPECT_TRUE(absl::IsNotFound(why)) << why;
      },
      absl::Milliseconds(20));
  EXPECT_TRUE(absl::IsFailedPrecondition(store.status())) << store.status();
  EXPECT_EQ(store.status().message(),
            absl::StrCat("orders database ", missing,
                         " does not exist after 300ms; is ORDERS_DB right? order_service "
                         "creates it"));
  EXPECT_EQ(waits, 1);
  EXPECT_FALSE(std::filesystem::exists(missing));
}

TEST_F(RecoveryStoreTest, OpensOnceTheProducerCreatesTheSchema) {
  const std::string path = dir_ + "/later.db";
  int waits = 0;
  auto store = RecoveryStore::OpenWhenCreated(
      path, DbOptions{}, kProducer, absl::Seconds(30),
      [&](const absl::Status&) {
        ++waits;
        CreateProducerDb(path);  // the producer comes up meanwhile
      },
      absl::Milliseconds(20));
  ASSERT_OK(store);
  EXPECT_EQ(waits, 1);
  auto counts = OperatorStore(**store).Counts();
  ASSERT_OK(counts);
  EXPECT_EQ(counts->sending, 0);
}

}  // namespace
}  // namespace outbox
