// The PostgreSQL stores under the seams' contracts (shared/testing/
// outbox_contract.h, inbox_contract.h), the same suites the fakes and the
// SQLite stores pass, and what is PostgreSQL's own: the versioned schema,
// claims that skip each other's rows, Write's one transaction, a broken
// link opened again. One server of scripts/postgres_node.sh for the whole
// binary; each test gets a schema of its own (search_path) in its database.
#include "shared/testing/outbox_contract.h"

#include "shared/testing/inbox_contract.h"

#include <atomic>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/barrier.h"
#include "shared/base/status_macros.h"
#include "shared/outbox/internal/history_events.h"
#include "shared/postgres/internal/pg_outbox.h"
#include "shared/postgres/internal/pg_recovery_store.h"
#include "shared/postgres/pg_connection.h"
#include "shared/postgres/pg_inbox.h"
#include "shared/postgres/pg_outbox_table.h"
#include "shared/postgres/pg_schema.h"
#include "shared/postgres/pg_session.h"
#include "shared/testing/pg_servers.h"

namespace outbox::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

PgServersEnvironment* const kServer = AddPgServers("pg_store_test");

// A schema of its own for each test, made now: the connection string that
// works in it (its search_path). Names are unique on the binary's server.
std::string FreshSchema() {
  static std::atomic<int> next{0};
  // A statement waiting on a lock fails after 10 s: a claim that waits for
  // rows it must skip fails, not hangs.
  return FreshPgSchema(kServer->url(), absl::StrCat("t", next++), "%20-clock_timeout%3D10s");
}

// PgOutbox and PgRecoveryStore on one database, each on a connection of
// its own as a producer and its recovery would be; the test's rows written
// and read on a third.
struct PgStores {
  std::unique_ptr<PgSession> producer_session;
  std::unique_ptr<PgSession> recovery_session;
  std::unique_ptr<PgConnection> test;
  std::unique_ptr<PgOutbox> outbox;
  std::unique_ptr<PgRecoveryStore> recovery;
};

std::shared_ptr<PgStores> OpenStores(const std::string& conninfo, const Clock& clock) {
  auto s = std::make_shared<PgStores>();
  auto producer = PgSession::Open(conninfo);
  auto recovery = PgSession::Open(conninfo);
  auto test = PgConnection::Open(conninfo);
  EXPECT_OK(producer);
  EXPECT_OK(recovery);
  EXPECT_OK(test);
  if (!producer.ok() || !recovery.ok() || !test.ok()) return nullptr;
  s->producer_session = std::move(producer).value();
  s->recovery_session = std::move(recovery).value();
  s->test = std::move(test).value();
  EXPECT_OK(UpgradePgSchema(*s->producer_session, PgOutboxSchema()));
  RetryPolicy retry;
  s->outbox = std::make_unique<PgOutbox>(*s->producer_session, clock, retry);
  s->recovery = std::make_unique<PgRecoveryStore>(*s->recovery_session);
  return s;
}

OutboxUnderTest MakePg(ManualClock& clock) {
  std::shared_ptr<PgStores> s = OpenStores(FreshSchema(), clock);
  if (s == nullptr) return {};
  PgConnection* const conn = s->test.get();
  OutboxUnderTest t;
  t.outbox = s->outbox.get();
  t.recovery = s->recovery.get();
  t.add = [conn](const OutboxMessage& row) { EXPECT_OK(InsertPgOutboxRow(*conn, row)); };
  t.get = [conn](const std::string& id) -> std::optional<OutboxMessage> {
    auto row = LoadPgOutboxRow(*conn, id);
    EXPECT_OK(row);
    return row.ok() ? *row : std::nullopt;
  };
  t.archived = [conn] {
    return PgStrings(*conn, "SELECT message_id FROM outbox_archive ORDER BY id");
  };
  t.add_audit = [conn](int64_t at, const std::string& action) {
    EXPECT_OK(
        conn->Query("INSERT INTO outbox_audit (at, actor, action, target, dry_run, rows, "
                    "outcome) VALUES ($1, 'alice', $2, 'target', 0, 1, 'ok')",
                    {std::to_string(at), action}));
  };
  t.audit = [conn] { return PgStrings(*conn, "SELECT action FROM outbox_audit ORDER BY id"); };
  auto watermark = [conn](const std::string& table) -> int64_t {
    auto r = conn->Query("SELECT pruned_before FROM outbox_retention WHERE name = $1", {table});
    EXPECT_OK(r);
    int64_t v = 0;
    if (r.ok() && r->rows() > 0) EXPECT_TRUE(absl::SimpleAtoi(r->Get(0, 0), &v));
    return v;
  };
  t.archive_pruned_before = [watermark] { return watermark("outbox_archive"); };
  t.audit_pruned_before = [watermark] { return watermark("outbox_audit"); };
  t.owner = s;
  return t;
}

INSTANTIATE_TEST_SUITE_P(Postgres, OutboxContractTest,
                         ::testing::Values(OutboxImpl{"PgOutboxAndPgRecoveryStore", MakePg}),
                         OutboxImplName);

struct PgInboxStores {
  std::unique_ptr<PgSession> session;
  std::unique_ptr<PgConnection> test;
  std::unique_ptr<PgInbox> inbox;
};

const PgSchema& InboxSchema() {
  static const PgSchema* const schema = new PgSchema{
      "consumer", {{"inbox", [](PgConnection& conn) { return CreatePgInboxTable(conn); }}}};
  return *schema;
}

InboxUnderTest MakePgInbox() {
  const std::string conninfo = FreshSchema();
  auto s = std::make_shared<PgInboxStores>();
  auto session = PgSession::Open(conninfo);
  auto test = PgConnection::Open(conninfo);
  EXPECT_OK(session);
  EXPECT_OK(test);
  if (!session.ok() || !test.ok()) return {};
  s->session = std::move(session).value();
  s->test = std::move(test).value();
  EXPECT_OK(UpgradePgSchema(*s->session, InboxSchema()));
  s->inbox = std::make_unique<PgInbox>(*s->session);
  PgConnection* const conn = s->test.get();
  PgInbox* const inbox = s->inbox.get();
  InboxUnderTest t;
  t.log = inbox;
  t.add = [conn, inbox](const std::string& id, int64_t at) {
    EXPECT_OK(inbox->Record(*conn, id, "key-" + id, "ref-" + id, at));
  };
  t.count = [conn] { return PgCount(*conn, "SELECT count(*) FROM inbox"); };
  t.has = [conn, inbox](const std::string& id) {
    auto found = inbox->Find(*conn, id);
    EXPECT_OK(found);
    return found.ok() && found->has_value();
  };
  t.owner = s;
  return t;
}

INSTANTIATE_TEST_SUITE_P(Postgres, InboxContractTest,
                         ::testing::Values(InboxImpl{"PgInbox", MakePgInbox}), InboxImplName);

// --- The schema.

PgMigration CreateTable(const std::string& table) {
  return {"create " + table, [table](PgConnection& conn) {
            return conn.Exec(absl::StrCat("CREATE TABLE ", table, " (id INTEGER)"));
          }};
}

TEST(PgSchemaTest, MigrationsRunInOrderOnceAndRecordTheVersion) {
  auto session = PgSession::Open(FreshSchema());
  ASSERT_OK(session);
  PgSchema schema{"app", {CreateTable("a"), CreateTable("b")}};
  ASSERT_OK(UpgradePgSchema(**session, schema));
  ASSERT_OK(UpgradePgSchema(**session, schema));  // up to date: nothing runs twice
  schema.migrations.push_back(CreateTable("c"));
  ASSERT_OK(UpgradePgSchema(**session, schema));
  ASSERT_OK((*session)->Transaction("check", [](PgConnection& conn) -> absl::Status {
    EXPECT_EQ(*PgSchemaVersion(conn, "app"), 3);
    EXPECT_EQ(*PgSchemaVersion(conn, "other"), 0);
    EXPECT_EQ(PgCount(conn, "SELECT count(*) FROM c"), 0);
    return absl::OkStatus();
  }));
}

TEST(PgSchemaTest, ANewerDatabaseIsRefusedUntouched) {
  auto session = PgSession::Open(FreshSchema());
  ASSERT_OK(session);
  const PgSchema newer{"app", {CreateTable("a"), CreateTable("b"), CreateTable("c")}};
  ASSERT_OK(UpgradePgSchema(**session, newer));
  const PgSchema older{"app", {CreateTable("a"), CreateTable("x")}};
  EXPECT_THAT(UpgradePgSchema(**session, older),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("version 3")));
  ASSERT_OK((*session)->Transaction("check", [](PgConnection& conn) -> absl::Status {
    EXPECT_EQ(*PgSchemaVersion(conn, "app"), 3);
    EXPECT_EQ(PgCount(conn, "SELECT count(*) FROM pg_tables WHERE tablename = 'x'"), 0);
    return absl::OkStatus();
  }));
}

TEST(PgSchemaTest, AFailedMigrationLeavesNothingAndTheVersionBefore) {
  auto session = PgSession::Open(FreshSchema());
  ASSERT_OK(session);
  PgSchema schema{"app", {CreateTable("a")}};
  ASSERT_OK(UpgradePgSchema(**session, schema));
  schema.migrations.push_back({"half done", [](PgConnection& conn) {
                                 EXPECT_OK(conn.Exec("CREATE TABLE half (id INTEGER)"));
                                 return conn.Exec("CREATE TABLE a (id INTEGER)");  // exists
                               }});
  EXPECT_THAT(UpgradePgSchema(**session, schema), Not(IsOk()));
  ASSERT_OK((*session)->Transaction("check", [](PgConnection& conn) -> absl::Status {
    EXPECT_EQ(*PgSchemaVersion(conn, "app"), 1);
    EXPECT_EQ(PgCount(conn, "SELECT count(*) FROM pg_tables WHERE tablename = 'half'"), 0);
    return absl::OkStatus();
  }));
}

// Openers released at the same moment, as processes starting together
// would: each migration runs once whoever wins, and every opener succeeds.
TEST(PgSchemaTest, OpenersStartingTogetherApplyEachMigrationOnce) {
  const std::string conninfo = FreshSchema();
  {
    auto setup = PgConnection::Open(conninfo);
    ASSERT_OK(setup);
    ASSERT_OK((*setup)->Exec("CREATE TABLE applied (what TEXT)"));
  }
  auto note = [](const std::string& what) -> PgMigration {
    return {what, [what](PgConnection& conn) {
              return conn.Query("INSERT INTO applied VALUES ($1)", {what}).status();
            }};
  };
  const PgSchema schema{"app", {note("one"), note("two"), note("three")}};
  constexpr int kOpeners = 4;
  std::vector<std::unique_ptr<PgSession>> sessions;
  for (int i = 0; i < kOpeners; ++i) {
    auto s = PgSession::Open(conninfo);
    ASSERT_OK(s);
    sessions.push_back(std::move(s).value());
  }
  std::vector<absl::Status> results(kOpeners);
  absl::Barrier start(kOpeners);
  std::vector<std::thread> threads;
  for (int i = 0; i < kOpeners; ++i) {
    threads.emplace_back([&, i] {
      start.Block();
      results[i] = UpgradePgSchema(*sessions[i], schema);
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : results) EXPECT_OK(s);
  auto conn = PgConnection::Open(conninfo);
  ASSERT_OK(conn);
  EXPECT_THAT(PgStrings(**conn, "SELECT what FROM applied ORDER BY what"),
              ElementsAre("one", "three", "two"));
}

// Recovery opens what its producer made, and never makes it.
TEST(PgSchemaTest, AReaderWaitsForTheProducersVersionAndRefusesANewerOne) {
  auto session = PgSession::Open(FreshSchema());
  ASSERT_OK(session);
  const PgSchema schema{"app", {CreateTable("a"), CreateTable("b")}};
  EXPECT_THAT(CheckPgSchema(**session, schema),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("holds no schema app")));
  ASSERT_OK(UpgradePgSchema(**session, PgSchema{"app", {CreateTable("a")}}));
  EXPECT_THAT(CheckPgSchema(**session, schema), StatusIs(absl::StatusCode::kNotFound));
  ASSERT_OK(UpgradePgSchema(**session, schema));
  EXPECT_OK(CheckPgSchema(**session, schema));
  EXPECT_THAT(CheckPgSchema(**session, PgSchema{"app", {CreateTable("a")}}),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

// The library's own schema row is "outbox": an adopter's schema left
// unnamed, or named so, would have its migration 1 taken for the library's,
// recorded already, and never run.
TEST(PgSchemaTest, AnAdoptersSchemaNeedsANameOfItsOwn) {
  auto session = PgSession::Open(FreshSchema());
  ASSERT_OK(session);
  ASSERT_OK(UpgradePgSchema(**session, PgOutboxSchema()));
  PgSchema unnamed;
  unnamed.migrations = {CreateTable("orders")};
  EXPECT_THAT(UpgradePgSchema(**session, unnamed),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("has no name")));
  EXPECT_THAT(CheckPgSchema(**session, unnamed), StatusIs(absl::StatusCode::kInvalidArgument));
  const PgSchema libraryname{"outbox", {CreateTable("orders")}};
  EXPECT_THAT(UpgradePgSchema(**session, libraryname),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("the library's")));
  ASSERT_OK((*session)->Transaction("check", [](PgConnection& conn) -> absl::Status {
    EXPECT_EQ(PgCount(conn, "SELECT count(*) FROM pg_tables WHERE tablename = 'orders'"), 0);
    EXPECT_EQ(*PgSchemaVersion(conn, "outbox"), 1);
    return absl::OkStatus();
  }));
  ASSERT_OK(UpgradePgSchema(**session, PgSchema{"orders", {CreateTable("orders")}}));
  ASSERT_OK((*session)->Transaction("check", [](PgConnection& conn) -> absl::Status {
    EXPECT_EQ(PgCount(conn, "SELECT count(*) FROM orders"), 0);
    EXPECT_EQ(*PgSchemaVersion(conn, "orders"), 1);
    return absl::OkStatus();
  }));
}

// PgConsumerSchema: the consumer's tables and its inbox in migration 1.
TEST(PgSchemaTest, AConsumersSchemaHoldsItsTablesAndTheInbox) {
  auto session = PgSession::Open(FreshSchema());
  ASSERT_OK(session);
  const PgSchema schema = PgConsumerSchema(
      "shipping",
      "CREATE TABLE shipments (order_id TEXT PRIMARY KEY); CREATE TABLE parcels (id TEXT)",
      "shipping_inbox");
  EXPECT_EQ(schema.latest(), 1);
  ASSERT_OK(UpgradePgSchema(**session, schema));
  ASSERT_OK(UpgradePgSchema(**session, schema));  // up to date: nothing runs twice
  const PgInbox inbox(**session, "shipping_inbox");
  ASSERT_OK((*session)->Transaction("check", [&](PgConnection& conn) -> absl::Status {
    EXPECT_EQ(*PgSchemaVersion(conn, "shipping"), 1);
    EXPECT_EQ(PgCount(conn, "SELECT count(*) FROM shipments"), 0);
    EXPECT_EQ(PgCount(conn, "SELECT count(*) FROM parcels"), 0);
    EXPECT_EQ(PgCount(conn,
                      "SELECT count(*) FROM pg_indexes WHERE indexname = "
                      "'shipping_inbox_processed_at'"),
              1);
    EXPECT_OK(inbox.Record(conn, "m-1", "o-1", "ship-1", 5));
    auto found = inbox.Find(conn, "m-1");
    EXPECT_OK(found);
    if (found.ok()) EXPECT_EQ(found->value_or(""), "ship-1");
    return absl::OkStatus();
  }));
  EXPECT_THAT(UpgradePgSchema(**session, PgConsumerSchema("", "CREATE TABLE x (id TEXT)")),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(PgSchemaTest, TheOutboxTablesHaveTheSqliteColumns) {
  auto session = PgSession::Open(FreshSchema());
  ASSERT_OK(session);
  ASSERT_OK(UpgradePgSchema(**session, PgOutboxSchema()));
  ASSERT_OK((*session)->Transaction("check", [](PgConnection& conn) -> absl::Status {
    for (const char* table : {"outbox", "outbox_archive"}) {
      EXPECT_EQ(PgCount(conn, absl::StrCat("SELECT count(*) FROM information_schema.columns WHERE "
                                           "table_schema = current_schema() AND table_name = '",
                                           table, "'")),
                22)
          << table;
    }
    for (const char* table : {"recovery_lease", "outbox_history", "outbox_audit",
                              "outbox_retention", "schema_version"}) {
      EXPECT_EQ(PgCount(conn, absl::StrCat("SELECT count(*) FROM pg_tables WHERE schemaname = "
                                           "current_schema() AND tablename = '",
                                           table, "'")),
                1)
          << table;
    }
    return absl::OkStatus();
  }));
}

// --- The stores.

class PgStoreTest : public ::testing::Test {
 protected:
  static constexpr int64_t kT0 = 1'700'000'000'000;

  void SetUp() override {
    conninfo_ = FreshSchema();
    stores_ = OpenStores(conninfo_, clock_);
    ASSERT_NE(stores_, nullptr);
  }
  OutboxMessage Row(const std::string& id, int64_t created_at = kT0) {
    return NewOutboxMessage(
        {id, "order", "o-" + id, "EVENTS", "OrderPlaced", "REPLIES", "body-" + id, ""}, created_at,
        policy_);
  }
  PgConnection& test() { return *stores_->test; }

  ManualClock clock_{kT0};
  RetryPolicy policy_ = [] {
    RetryPolicy p;
    p.base_delay = absl::Seconds(2);
    p.max_attempts = 3;
    return p;
  }();
  std::string conninfo_;
  std::shared_ptr<PgStores> stores_;
};

TEST_F(PgStoreTest, WriteCommitsTheBusinessRowsAndTheOutboxRowTogether) {
  ASSERT_OK(test().Exec("CREATE TABLE orders (id TEXT PRIMARY KEY)"));
  auto written = stores_->outbox->Write(
      {"m1", "order", "o-1", "EVENTS", "OrderPlaced", "REPLIES", std::string("a\0b\xff", 4), ""},
      [](PgConnection& conn) { return conn.Query("INSERT INTO orders VALUES ('o-1')").status(); });
  ASSERT_OK(written);
  EXPECT_EQ(written->message_id, "m1");
  EXPECT_EQ(written->body, std::string("a\0b\xff", 4));
  auto row = stores_->outbox->Get("m1");
  ASSERT_OK(row);
  EXPECT_EQ(row->payload, std::string("a\0b\xff", 4));
  EXPECT_EQ(row->status, OutboxStatus::kSending);
  EXPECT_EQ(row->created_at, kT0);

  // The business step fails: no outbox row either.
  EXPECT_THAT(stores_->outbox->Write({"m2", "order", "o-2", "EVENTS", "OrderPlaced", "", "", ""},
                                     [](PgConnection& conn) -> absl::Status {
                                       EXPECT_OK(conn.Query("INSERT INTO orders VALUES ('o-2')"));
                                       return absl::FailedPreconditionError("out of stock");
                                     }),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("out of stock")));
  // The outbox row fails (the business key is taken): no business row either.
  EXPECT_THAT(
      stores_->outbox->Write({"m3", "order", "o-1", "EVENTS", "OrderPlaced", "", "", ""},
                             [](PgConnection& conn) {
                               return conn.Query("INSERT INTO orders VALUES ('o-3')").status();
                             }),
      StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_THAT(PgStrings(test(), "SELECT id FROM orders ORDER BY id"), ElementsAre("o-1"));
  EXPECT_EQ(PgCount(test(), "SELECT count(*) FROM outbox"), 1);
}

// A row another transaction holds (a claim in flight elsewhere, an
// acknowledgement being recorded) is skipped, not waited for nor taken.
TEST_F(PgStoreTest, AClaimSkipsRowsAnotherTransactionHolds) {
  for (const char* id : {"a", "b", "c", "d"}) ASSERT_OK(InsertPgOutboxRow(test(), Row(id)));
  ASSERT_OK(test().Exec("BEGIN"));
  ASSERT_OK(test().Query("SELECT id FROM outbox WHERE message_id IN ('a', 'c') FOR UPDATE"));
  auto claimed = stores_->recovery->ClaimDue(kT0 + 3000, 10, "", policy_);
  ASSERT_OK(test().Exec("COMMIT"));
  ASSERT_OK(claimed);
  std::vector<std::string> ids;
  for (const OutboxMessage& m : claimed->to_publish) ids.push_back(m.message_id);
  EXPECT_THAT(ids, ::testing::UnorderedElementsAre("b", "d"));
  claimed = stores_->recovery->ClaimDue(kT0 + 3000, 10, "", policy_);
  ASSERT_OK(claimed);
  ids.clear();
  for (const OutboxMessage& m : claimed->to_publish) ids.push_back(m.message_id);
  EXPECT_THAT(ids, ::testing::UnorderedElementsAre("a", "c"));
}

// Two recovery processes claiming from one table at the same time, each on
// its own connection: every due row is claimed once, by one of them.
TEST_F(PgStoreTest, TwoStoresClaimingAtOnceNeverClaimARowTwice) {
  constexpr int kRows = 400;
  ASSERT_OK(test().Exec("BEGIN"));
  for (int i = 0; i < kRows; ++i) ASSERT_OK(InsertPgOutboxRow(test(), Row(absl::StrCat("m", i))));
  ASSERT_OK(test().Exec("COMMIT"));
  std::vector<std::unique_ptr<PgSession>> sessions;
  std::vector<std::unique_ptr<PgRecoveryStore>> stores;
  for (int i = 0; i < 2; ++i) {
    auto s = PgSession::Open(conninfo_);
    ASSERT_OK(s);
    sessions.push_back(std::move(s).value());
    stores.push_back(std::make_unique<PgRecoveryStore>(*sessions.back()));
  }
  std::vector<std::vector<std::string>> claimed(2);
  absl::Barrier start(2);
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      start.Block();
      while (true) {
        auto c = stores[i]->ClaimDue(kT0 + 3000, 7, "", policy_);
        EXPECT_OK(c);
        if (!c.ok() || c->to_publish.empty()) break;
        for (const OutboxMessage& m : c->to_publish) claimed[i].push_back(m.message_id);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::set<std::string> all;
  for (const auto& ids : claimed) {
    for (const std::string& id : ids) EXPECT_TRUE(all.insert(id).second) << id << " claimed twice";
  }
  EXPECT_EQ(all.size(), static_cast<size_t>(kRows));
  EXPECT_EQ(PgCount(test(), "SELECT count(*) FROM outbox WHERE attempts = 2"), kRows);
  RecordProperty("claimed_by_first", static_cast<int>(claimed[0].size()));
  RecordProperty("claimed_by_second", static_cast<int>(claimed[1].size()));
}

TEST_F(PgStoreTest, TransitionsLeaveTheHistorySqliteLeaves) {
  ASSERT_OK(InsertPgOutboxRow(test(), Row("m1")));
  EXPECT_THAT(stores_->recovery->ClaimDue(kT0 + 3000, 10, "r1", policy_),  // nobody's lease
              StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_OK(stores_->recovery->ClaimDue(kT0 + 3000, 10, "", policy_));
  clock_.SetMillis(kT0 + 3100);
  ASSERT_OK(stores_->outbox->RecordAcks({"m1"}));
  EXPECT_THAT(PgStrings(test(), "SELECT event || ' ' || detail FROM outbox_history ORDER BY id"),
              ElementsAre("republished attempt 2", "acknowledged after 2 attempts"));
  // Archived with the row.
  ASSERT_OK(stores_->recovery->ArchiveSent(kT0 + 5000, 10));
  EXPECT_EQ(PgCount(test(), "SELECT count(*) FROM outbox_history"), 0);
}

// The acknowledgements of a batch close their rows in one statement: the
// rows one statement writes share its command id (cmin).
TEST_F(PgStoreTest, AcknowledgementsCloseTheirRowsInOneStatement) {
  for (const char* id : {"a", "b", "c", "d"}) ASSERT_OK(InsertPgOutboxRow(test(), Row(id)));
  clock_.SetMillis(kT0 + 700);
  auto tally = stores_->outbox->RecordAcks({"c", "a", "unknown", "b", "a"});
  ASSERT_OK(tally);
  EXPECT_EQ(tally->closed, 3);
  EXPECT_EQ(tally->late, 0);
  EXPECT_THAT(tally->create_to_sent_ms, ElementsAre(700, 700, 700));
  EXPECT_THAT(PgStrings(test(), "SELECT message_id || ' ' || status || ' ' || (updated_at - " +
                                    std::to_string(kT0) + ") FROM outbox ORDER BY message_id"),
              ElementsAre("a SENT 700", "b SENT 700", "c SENT 700", "d SENDING 0"));
  EXPECT_EQ(
      PgCount(test(), "SELECT count(*) FROM outbox WHERE sent_at = " + std::to_string(kT0 + 700)),
      3);
  EXPECT_EQ(PgCount(test(), "SELECT count(DISTINCT cmin::text) FROM outbox WHERE status = 'SENT'"),
            1);
  EXPECT_EQ(PgCount(test(), "SELECT count(*) FROM outbox_history"), 0);
  tally = stores_->outbox->RecordAcks({"a"});  // again: already SENT
  ASSERT_OK(tally);
  EXPECT_EQ(tally->changed(), 0);
}

TEST_F(PgStoreTest, TheRowClosedStepCommitsWithTheRowOrAloneRollsBack) {
  ASSERT_OK(test().Exec("CREATE TABLE confirmed (id TEXT)"));
  for (const char* id : {"ok", "bad"}) ASSERT_OK(InsertPgOutboxRow(test(), Row(id)));
  stores_->outbox->set_on_closed([](PgConnection& conn, const OutboxMessage& row) {
    RETURN_IF_ERROR(conn.Query("INSERT INTO confirmed VALUES ($1)", {row.message_id}).status());
    if (row.message_id == "bad") return absl::InternalError("hook refused");
    return absl::OkStatus();
  });
  auto tally = stores_->outbox->RecordAcks({"ok", "bad"});
  ASSERT_OK(tally);
  EXPECT_EQ(tally->closed, 2);
  EXPECT_THAT(PgStrings(test(), "SELECT id FROM confirmed"), ElementsAre("ok"));
  EXPECT_EQ(PgCount(test(), "SELECT count(*) FROM outbox WHERE status = 'SENT'"), 2);
}

// The server ends the idle session (a restart, a failover): the next call
// finds the link gone at BEGIN and connects again; one cut off in the middle
// of a transaction fails UNAVAILABLE and the call after it connects again.
TEST_F(PgStoreTest, ALostLinkIsOpenedAgain) {
  ASSERT_OK(InsertPgOutboxRow(test(), Row("m1")));
  ASSERT_OK(stores_->recovery->Get("m1"));
  // The store's session ends; gone before this returns (the timeout is a
  // bound, not a wait).
  ASSERT_OK(test().Exec(
      "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE pid <> "
      "pg_backend_pid() AND datname = current_database() AND application_name = 'outbox' AND "
      "backend_type = 'client backend'"));
  EXPECT_OK(stores_->recovery->Get("m1"));

  PgSession& session = *stores_->producer_session;
  EXPECT_THAT(
      session.Transaction("cut off",
                          [](PgConnection& conn) {
                            return conn.Exec("SELECT pg_terminate_backend(pg_backend_pid())");
                          }),
      StatusIs(absl::StatusCode::kUnavailable, HasSubstr("cut off")));
  EXPECT_OK(session.Transaction("after", [](PgConnection& conn) { return conn.Exec("SELECT 1"); }));
}

TEST_F(PgStoreTest, AnInboxRecordsAnIdOnce) {
  auto session = PgSession::Open(conninfo_);
  ASSERT_OK(session);
  ASSERT_OK(UpgradePgSchema(**session, InboxSchema()));
  PgInbox inbox(**session);
  ASSERT_OK((*session)->Transaction("apply", [&](PgConnection& conn) -> absl::Status {
    auto found = inbox.Find(conn, "m1");
    EXPECT_OK(found);
    EXPECT_FALSE(found->has_value());
    return inbox.Record(conn, "m1", "o-1", "shipment-7", kT0);
  }));
  auto found = inbox.Find(test(), "m1");
  ASSERT_OK(found);
  EXPECT_EQ(found->value_or(""), "shipment-7");
  EXPECT_THAT(inbox.Record(test(), "m1", "o-1", "shipment-8", kT0),
              StatusIs(absl::StatusCode::kAlreadyExists));
}

}  // namespace
}  // namespace outbox::testing
