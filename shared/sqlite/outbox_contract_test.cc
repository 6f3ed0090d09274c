// The seams' contracts (shared/testing/outbox_contract.h, inbox_contract.h),
// run against the in-memory fakes and against the library's SQLite stores:
// the producer's SqliteOutbox and recovery's RecoveryStore on one file, and
// the consumer's inbox.
#include "shared/testing/outbox_contract.h"

#include "shared/testing/inbox_contract.h"

#include <memory>
#include <optional>
#include <stdexcept>

#include "shared/sqlite/audit.h"
#include "shared/sqlite/inbox.h"
#include "shared/sqlite/outbox_table.h"
#include "shared/sqlite/recovery_store.h"
#include "shared/sqlite/sqlite_file.h"
#include "shared/sqlite/sqlite_outbox.h"
#include "shared/testing/fakes.h"
#include "shared/testing/temp_dir.h"

namespace outbox::testing {
namespace {

OutboxUnderTest MakeFake(ManualClock& clock) {
  auto fake = std::make_shared<InMemoryOutbox>(clock);
  OutboxUnderTest t;
  t.outbox = fake.get();
  t.recovery = fake.get();
  t.add = [fake](const OutboxMessage& row) { fake->Add(row); };
  t.get = [fake](const std::string& id) -> std::optional<OutboxMessage> {
    try {
      return fake->Row(id);
    } catch (const std::out_of_range&) {
      return std::nullopt;
    }
  };
  t.archived = [fake] {
    std::vector<std::string> ids;
    for (const OutboxMessage& row : fake->archive) ids.push_back(row.message_id);
    return ids;
  };
  t.add_audit = [fake](int64_t at, const std::string& action) { fake->audit.emplace(at, action); };
  t.audit = [fake] {
    std::vector<std::string> actions;
    for (const auto& [at, action] : fake->audit) actions.push_back(action);
    return actions;
  };
  t.archive_pruned_before = [fake] { return fake->archive_pruned_before; };
  t.audit_pruned_before = [fake] { return fake->audit_pruned_before; };
  t.owner = fake;
  return t;
}

const DbSchema& ProducerSchema() {
  static const DbSchema* const schema = new DbSchema{{{"outbox tables", CreateOutboxTable}}};
  return *schema;
}

// SqliteOutbox and RecoveryStore on one file, as a producer and its
// recovery share it; rows written and read on a connection of the test's.
struct SqliteStores {
  TempDir dir{"outbox_contract"};
  std::unique_ptr<SqliteFile> file;
  std::unique_ptr<SqliteOutbox> outbox;
  std::unique_ptr<RecoveryStore> recovery;
  std::unique_ptr<SQLite::Database> raw;
};

OutboxUnderTest MakeSqlite(ManualClock& clock) {
  auto s = std::make_shared<SqliteStores>();
  const std::string path = s->dir.path() + "/producer.db";
  auto file = OpenSqliteFile(path, DbOptions{}, &ProducerSchema());
  EXPECT_OK(file);
  if (!file.ok()) return {};
  s->file = std::move(file).value();
  s->outbox = std::make_unique<SqliteOutbox>(*s->file, clock);
  auto recovery = RecoveryStore::Open(path, DbOptions{}, ProducerDb{&ProducerSchema()});
  EXPECT_OK(recovery);
  if (!recovery.ok()) return {};
  s->recovery = std::move(recovery).value();
  s->raw = std::make_unique<SQLite::Database>(path, SQLite::OPEN_READWRITE);
  s->raw->setBusyTimeout(5000);
  OutboxUnderTest t;
  t.outbox = s->outbox.get();
  t.recovery = s->recovery.get();
  t.add = [s](const OutboxMessage& row) { OutboxInserter(*s->raw).Insert(row); };
  t.get = [s](const std::string& id) { return OutboxStateTable(*s->raw).Load(id); };
  auto strings = [s](const std::string& sql) {
    std::vector<std::string> out;
    SQLite::Statement stmt(*s->raw, sql);
    while (stmt.executeStep()) out.push_back(stmt.getColumn(0).getString());
    return out;
  };
  auto watermark = [s](const std::string& table) -> int64_t {
    SQLite::Statement stmt(*s->raw, "SELECT pruned_before FROM outbox_retention WHERE name = ?");
    stmt.bind(1, table);
    return stmt.executeStep() ? stmt.getColumn(0).getInt64() : 0;
  };
  t.archived = [strings] {
    return strings("SELECT message_id FROM outbox_archive ORDER BY rowid");
  };
  t.add_audit = [s](int64_t at, const std::string& action) {
    AppendAudit(*s->raw, AuditRecord{0, at, "alice", action, "target", false, 1, "ok"});
  };
  t.audit = [strings] { return strings("SELECT action FROM outbox_audit ORDER BY id"); };
  t.archive_pruned_before = [watermark] { return watermark("outbox_archive"); };
  t.audit_pruned_before = [watermark] { return watermark("outbox_audit"); };
  t.owner = s;
  return t;
}

INSTANTIATE_TEST_SUITE_P(Library, OutboxContractTest,
                         ::testing::Values(OutboxImpl{"Fake", MakeFake},
                                           OutboxImpl{"SqliteOutboxAndRecoveryStore", MakeSqlite}),
                         OutboxImplName);

InboxUnderTest MakeFakeInbox() {
  auto fake = std::make_shared<InMemoryProcessedLog>();
  InboxUnderTest t;
  t.log = fake.get();
  t.add = [fake](const std::string& id, int64_t at) { fake->rows.emplace(at, id); };
  t.count = [fake] { return static_cast<int64_t>(fake->rows.size()); };
  t.has = [fake](const std::string& id) {
    for (const auto& [at, kept] : fake->rows) {
      if (kept == id) return true;
    }
    return false;
  };
  t.owner = fake;
  return t;
}

struct SqliteInbox {
  TempDir dir{"inbox_contract"};
  std::unique_ptr<SqliteFile> file;
  std::unique_ptr<SqliteProcessedLog> log;
};

const DbSchema& ConsumerSchema() {
  static const DbSchema* const schema =
      new DbSchema{{{"inbox", [](SQLite::Database& db) { CreateInboxTable(db); }}}};
  return *schema;
}

InboxUnderTest MakeSqliteInbox() {
  auto s = std::make_shared<SqliteInbox>();
  auto file = OpenSqliteFile(s->dir.path() + "/consumer.db", DbOptions{}, &ConsumerSchema());
  EXPECT_OK(file);
  if (!file.ok()) return {};
  s->file = std::move(file).value();
  s->log = std::make_unique<SqliteProcessedLog>(*s->file);
  InboxUnderTest t;
  t.log = s->log.get();
  t.add = [s](const std::string& id, int64_t at) {
    EXPECT_OK(s->file->Write([&](SQLite::Database& db) {
      Inbox(db).Record(id, "key-" + id, "ref-" + id, at);
      return absl::OkStatus();
    }));
  };
  t.count = [s] {
    int64_t n = -1;
    EXPECT_OK(s->file->Read("count the inbox", [&](SQLite::Database& db) {
      n = db.execAndGet("SELECT count(*) FROM inbox").getInt64();
      return absl::OkStatus();
    }));
    return n;
  };
  t.has = [s](const std::string& id) {
    bool found = false;
    EXPECT_OK(s->file->Read("find in the inbox", [&](SQLite::Database& db) {
      found = Inbox(db).Find(id).has_value();
      return absl::OkStatus();
    }));
    return found;
  };
  t.owner = s;
  return t;
}

INSTANTIATE_TEST_SUITE_P(Library, InboxContractTest,
                         ::testing::Values(InboxImpl{"Fake", MakeFakeInbox},
                                           InboxImpl{"SqliteProcessedLog", MakeSqliteInbox}),
                         InboxImplName);

}  // namespace
}  // namespace outbox::testing
