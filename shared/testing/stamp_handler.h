#pragma once

// A small adopter of the consumer for the library's own tests: a Stamp
// message (type "Stamp", body "<key>:<count>") whose Apply inserts a row
// into `stamps` each time it runs. The table has no unique constraint, so
// only the library's inbox keeps a message from being applied twice.
// Header-only; the test links outbox_sqlite.
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "shared/outbox/consumer_handler.h"
#include "shared/sqlite/inbox.h"
#include "shared/sqlite/schema.h"
#include "shared/sqlite/sqlite_file.h"
#include "shared/sqlite/sqlite_message_handler.h"

namespace outbox::testing {

struct Stamp {
  std::string message_id;
  std::string key;
  int64_t count = 0;
  bool rejects_accepted = true;  // type "Stamp"; "StampV1" publishers understand no rejects
};

// Migration 1: stamps (no unique constraint) and the inbox.
inline const DbSchema& StampSchema() {
  static const DbSchema* const schema =
      new DbSchema{{{"stamps and the inbox", [](SQLite::Database& db) {
                       db.exec(
                           "CREATE TABLE stamps (id INTEGER PRIMARY KEY, key TEXT NOT NULL, "
                           "count INTEGER NOT NULL, reference TEXT NOT NULL)");
                       CreateInboxTable(db);
                     }}}};
  return *schema;
}

// A stamp as its publisher sends it.
inline Delivery StampDelivery(const std::string& message_id, const std::string& key,
                              int64_t count = 1, const std::string& reply_to = "stamps.done",
                              const std::string& type = "Stamp") {
  Delivery d;
  d.message_id = message_id;
  d.reply_to = reply_to;
  d.type = type;
  d.body = absl::StrCat(key, ":", count);
  return d;
}

// The table as a Stamp handler finds a business key in it.
inline const AppliedByKey kStampsByKey{"stamps", "key", "reference"};

class StampHandler final : public SqliteMessageHandler<Stamp> {
 public:
  StampHandler(SqliteFile& file, const Clock& clock, SqliteHandlerOptions options = {})
      : SqliteMessageHandler(file, clock, std::move(options)) {}

  int64_t limit = 100;              // Rejects a count over it
  bool one_reply = false;           // one reply per reply queue, listing its messages
  absl::Status fail_apply;          // when not OK, Apply returns it
  int applies = 0;                  // Apply calls
  std::vector<std::string> judged;  // message ids Rejects was asked about
  // A stamp with this key makes that step throw std::runtime_error, as an
  // adopter's bug would ("" = none).
  std::string decode_throws, apply_throws, replies_throw;

  absl::StatusOr<Stamp> Decode(const Delivery& d) override {
    std::vector<std::string> parts = absl::StrSplit(d.body, ':');
    if (!decode_throws.empty() && parts[0] == decode_throws) {
      throw std::runtime_error("Decode broke on " + parts[0]);
    }
    Stamp s;
    if ((d.type != "Stamp" && d.type != "StampV1") || parts.size() != 2 || parts[0].empty() ||
        !absl::SimpleAtoi(parts[1], &s.count)) {
      return absl::InvalidArgumentError("not a Stamp");
    }
    s.message_id = d.message_id;
    s.key = parts[0];
    s.rejects_accepted = d.type == "Stamp";
    return s;
  }
  std::string BusinessKey(const Stamp& s) override { return s.key; }
  std::string Rejects(const Stamp& s) override {
    judged.push_back(s.message_id);
    return s.count > limit ? absl::StrCat("count ", s.count, " over ", limit) : "";
  }
  bool AnswersRejects(const Stamp& s) override { return s.rejects_accepted; }
  absl::StatusOr<std::string> Apply(SQLite::Database& tx, const Stamp& s) override {
    ++applies;
    if (!fail_apply.ok()) return fail_apply;
    if (!apply_throws.empty() && s.key == apply_throws) {
      throw std::runtime_error("Apply broke on " + s.key);
    }
    const std::string reference = absl::StrCat("stamp-", s.key, "-", applies);
    SQLite::Statement insert(tx, "INSERT INTO stamps (key, count, reference) VALUES (?, ?, ?)");
    insert.bind(1, s.key);
    insert.bind(2, static_cast<int64_t>(s.count));
    insert.bind(3, reference);
    insert.exec();
    return reference;
  }
  // Each reply's body lists what it answers, "<message id>=<outcome>" per
  // message joined by ',': "new:<ref>", "duplicate:<ref>" or "rejected:<reason>".
  std::vector<Reply> Replies(const std::vector<Answered<Stamp>>& batch) override {
    std::vector<Reply> replies;
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!replies_throw.empty() && batch[i].message.key == replies_throw) {
        throw std::runtime_error("Replies broke on " + batch[i].message.key);
      }
      const Applied& a = batch[i].applied;
      const std::string outcome = !a.rejected_reason.empty()
                                      ? "rejected:" + a.rejected_reason
                                      : (a.duplicate ? "duplicate:" : "new:") + a.reference;
      const std::string entry = batch[i].message.message_id + "=" + outcome;
      if (one_reply && !replies.empty() && replies.back().message.topic == batch[i].reply_to) {
        replies.back().message.body += "," + entry;
        replies.back().answers.push_back(i);
        continue;
      }
      OutgoingMessage m;
      m.topic = batch[i].reply_to;
      m.message_id = batch[i].message.message_id + ".done";
      m.type = "Stamped";
      m.body = entry;
      replies.push_back({m, {i}});
    }
    return replies;
  }
};

// Opens (or creates) `path` with StampSchema(), for a test: null on failure.
inline std::unique_ptr<SqliteFile> OpenStampFile(const std::string& path) {
  auto file = OpenSqliteFile(path, DbOptions{}, &StampSchema());
  return file.ok() ? std::move(file).value() : nullptr;
}

// Rows in `table` of `file` (read on the writer); -1 if it cannot be read.
inline int64_t CountRows(SqliteFile& file, const std::string& table) {
  int64_t n = -1;
  const absl::Status read = file.WithWriter("count " + table, [&](SQLite::Database& db) {
    n = db.execAndGet("SELECT count(*) FROM " + table).getInt64();
    return absl::OkStatus();
  });
  return read.ok() ? n : -1;
}

}  // namespace outbox::testing
