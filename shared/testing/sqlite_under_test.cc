#include "shared/testing/sqlite_under_test.h"

#include <thread>
#include <utility>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>

#include "absl/synchronization/barrier.h"
#include "shared/sqlite/inbox.h"
#include "shared/sqlite/internal/audit.h"
#include "shared/sqlite/outbox_table.h"
#include "shared/testing/status_matchers.h"

namespace outbox::testing {

OutboxUnderTest SqliteOutboxUnderTest(const std::string& path, OutboxRepository* outbox,
                                      RecoveryRepository* recovery, std::shared_ptr<void> owner) {
  std::shared_ptr<SQLite::Database> raw;
  try {
    raw = std::make_shared<SQLite::Database>(path, SQLite::OPEN_READWRITE);
    raw->setBusyTimeout(5000);
  } catch (const SQLite::Exception& e) {
    ADD_FAILURE() << "cannot open " << path << ": " << e.what();
    return {};
  }
  SQLite::Database* const db = raw.get();  // kept open by the owner below
  OutboxUnderTest t;
  t.outbox = outbox;
  t.recovery = recovery;
  t.add = [db](const OutboxMessage& row) { OutboxInserter(*db).Insert(row); };
  t.get = [db](const std::string& id) { return OutboxStateTable(*db).Load(id); };
  auto strings = [db](const std::string& sql) {
    std::vector<std::string> out;
    SQLite::Statement stmt(*db, sql);
    while (stmt.executeStep()) out.push_back(stmt.getColumn(0).getString());
    return out;
  };
  auto watermark = [db](const std::string& table) -> int64_t {
    SQLite::Statement stmt(*db, "SELECT pruned_before FROM outbox_retention WHERE name = ?");
    stmt.bind(1, table);
    return stmt.executeStep() ? stmt.getColumn(0).getInt64() : 0;
  };
  t.archived = [strings] {
    return strings("SELECT message_id FROM outbox_archive ORDER BY rowid");
  };
  t.add_audit = [db](int64_t at, const std::string& action) {
    AppendAudit(*db, AuditRecord{0, at, "alice", action, "target", false, 1, "ok"});
  };
  t.audit = [strings] { return strings("SELECT action FROM outbox_audit ORDER BY id"); };
  t.archive_pruned_before = [watermark] { return watermark("outbox_archive"); };
  t.audit_pruned_before = [watermark] { return watermark("outbox_audit"); };
  // The test's connection closes first, then the caller's stores and files.
  t.owner = std::make_shared<std::pair<std::shared_ptr<void>, std::shared_ptr<SQLite::Database>>>(
      std::move(owner), std::move(raw));
  return t;
}

InboxUnderTest SqliteInboxUnderTest(SqliteFile& file, ProcessedLog* log,
                                    std::shared_ptr<void> owner) {
  SqliteFile* f = &file;
  InboxUnderTest t;
  t.log = log;
  t.add = [f](const std::string& id, int64_t at) {
    EXPECT_OK(f->Write([&](SQLite::Database& db) {
      Inbox(db).Record(id, "key-" + id, "ref-" + id, at);
      return absl::OkStatus();
    }));
  };
  t.count = [f] {
    int64_t n = -1;
    EXPECT_OK(f->Read("count the inbox", [&](SQLite::Database& db) {
      n = db.execAndGet("SELECT count(*) FROM inbox").getInt64();
      return absl::OkStatus();
    }));
    return n;
  };
  t.has = [f](const std::string& id) {
    bool found = false;
    EXPECT_OK(f->Read("find in the inbox", [&](SQLite::Database& db) {
      found = Inbox(db).Find(id).has_value();
      return absl::OkStatus();
    }));
    return found;
  };
  t.owner = std::move(owner);
  return t;
}

std::vector<absl::Status> OpenAtOnce(const std::string& path, int openers, const DbSchema& schema) {
  std::vector<absl::Status> results(openers);
  absl::Barrier* start = new absl::Barrier(openers);  // the last one through deletes it
  std::vector<std::thread> threads;
  for (int i = 0; i < openers; ++i) {
    threads.emplace_back([&, i] {
      if (start->Block()) delete start;
      results[i] = OpenSqliteFile(path, DbOptions{}, &schema).status();
    });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

}  // namespace outbox::testing
