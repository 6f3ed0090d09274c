#include "shared/sqlite/consistency.h"

#include <SQLiteCpp/SQLiteCpp.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace outbox {
namespace {

int64_t Count(SQLite::Database& db, const std::string& sql) {
  return db.execAndGet(sql).getInt64();
}

}  // namespace

std::string ConsistencyReport::ToString() const {
  std::string out = absl::StrCat(ok ? "OK" : "NOT CONSISTENT", " sending=", sending, " sent=", sent,
                                 " failed=", failed, " archived=", archived, " inbox=", inbox,
                                 " unapplied=", unapplied, " unknown=", unknown);
  for (const auto& [name, count] : broken) absl::StrAppend(&out, " [", name, ": ", count, "]");
  return out;
}

absl::StatusOr<ConsistencyReport> CheckConsistency(const std::string& producer_db,
                                                   const std::string& consumer_db,
                                                   const ConsistencyOptions& options) {
  for (const std::string& path : {producer_db, consumer_db}) {
    if (!std::filesystem::exists(path)) return absl::NotFoundError(absl::StrCat("no ", path));
  }
  try {
    SQLite::Database db(producer_db, SQLite::OPEN_READONLY);
    db.setBusyTimeout(5000);
    SQLite::Statement attach(db, "ATTACH DATABASE ? AS consumer");
    attach.bind(1, consumer_db);
    attach.exec();
    SQLite::Transaction snapshot(db);  // one read snapshot of both files
    const std::string inbox = absl::StrCat("consumer.\"", options.inbox.table, "\"");
    ConsistencyReport r;
    r.sending = Count(db, "SELECT count(*) FROM outbox WHERE status = 'SENDING'");
    r.sent = Count(db, "SELECT count(*) FROM outbox WHERE status = 'SENT'");
    r.failed = Count(db, "SELECT count(*) FROM outbox WHERE status = 'FAILED'");
    r.archived = Count(db, "SELECT count(*) FROM outbox_archive");
    r.inbox = Count(db, absl::StrCat("SELECT count(*) FROM ", inbox));
    r.unapplied = Count(
        db, absl::StrCat("SELECT count(*) FROM (SELECT message_id FROM outbox WHERE status = "
                         "'SENT' UNION ALL SELECT message_id FROM outbox_archive) p WHERE NOT "
                         "EXISTS (SELECT 1 FROM ",
                         inbox, " i WHERE i.message_id = p.message_id)"));
    r.unknown = Count(db, absl::StrCat("SELECT count(*) FROM ", inbox,
                                       " i WHERE NOT EXISTS (SELECT 1 FROM outbox o WHERE "
                                       "o.message_id = i.message_id) AND NOT EXISTS (SELECT 1 "
                                       "FROM outbox_archive a WHERE a.message_id = i.message_id)"));
    for (const auto& [name, sql] : options.invariants) {
      const int64_t n = Count(db, sql);
      if (n != 0) r.broken.emplace_back(name, n);
    }
    r.ok = r.sending == 0 && (options.allow_failed || r.failed == 0) && r.unapplied == 0 &&
           (options.other_producers || r.unknown == 0) && r.broken.empty();
    return r;
  } catch (const SQLite::Exception& e) {
    return absl::InternalError(
        absl::StrCat("read ", producer_db, " and ", consumer_db, ": ", e.what()));
  }
}

absl::StatusOr<ConsistencyReport> WaitUntilConsistent(const std::string& producer_db,
                                                      const std::string& consumer_db,
                                                      const ConsistencyOptions& options,
                                                      absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    absl::StatusOr<ConsistencyReport> report = CheckConsistency(producer_db, consumer_db, options);
    if ((report.ok() && report->ok) || absl::Now() >= deadline) return report;
    absl::SleepFor(absl::Milliseconds(100));
  }
}

}  // namespace outbox
