#include "rewards.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "shared/sqlite/inbox.h"
#include "shared/sqlite/outbox_table.h"

namespace rewards {

const outbox::DbSchema& RewardsSchema() {
  static const outbox::DbSchema schema{{{"awards and the outbox", [](SQLite::Database& db) {
                                           db.exec(
                                               "CREATE TABLE awards (award_id TEXT PRIMARY KEY, "
                                               "member TEXT NOT NULL, points INTEGER NOT NULL)");
                                           outbox::CreateOutboxTable(db);
                                         }}}};
  return schema;
}

const outbox::DbSchema& LedgerSchema() {
  static const outbox::DbSchema schema{{{"ledger and the inbox", [](SQLite::Database& db) {
                                           db.exec(
                                               "CREATE TABLE ledger (award_id TEXT PRIMARY KEY, "
                                               "member TEXT NOT NULL, points INTEGER NOT NULL)");
                                           outbox::CreateInboxTable(db);
                                         }}}};
  return schema;
}

absl::StatusOr<outbox::OutgoingMessage> AwardPoints(outbox::SqliteOutbox& outbox,
                                                    const std::string& award_id,
                                                    const std::string& member, int64_t points) {
  outbox::MessageSpec spec;
  spec.message_id = award_id;
  spec.biz_type = "award";
  spec.biz_key = award_id;
  spec.topic = kQueue;
  spec.message_type = "PointsEarned";
  spec.reply_to = kReplies;
  spec.payload = absl::StrCat(member, ":", points);
  return outbox.Write(spec, [&](SQLite::Database& tx) {
    SQLite::Statement insert(tx, "INSERT INTO awards VALUES (?, ?, ?)");
    insert.bind(1, award_id);
    insert.bind(2, member);
    insert.bind(3, points);
    insert.exec();
    return absl::OkStatus();
  });
}

absl::StatusOr<PointsEarned> Ledger::Decode(const outbox::Delivery& d) {
  std::vector<std::string> parts = absl::StrSplit(d.body, ':');
  PointsEarned m;
  if (d.type != "PointsEarned" || parts.size() != 2 || parts[0].empty() ||
      !absl::SimpleAtoi(parts[1], &m.points) || m.points <= 0) {
    return absl::InvalidArgumentError("not a PointsEarned");
  }
  m.award_id = d.message_id;
  m.member = parts[0];
  return m;
}

std::string Ledger::Rejects(const PointsEarned& m) {
  return m.points > kMaxPoints ? absl::StrCat(m.points, " points is over ", kMaxPoints) : "";
}

absl::StatusOr<std::string> Ledger::Apply(SQLite::Database& tx, const PointsEarned& m) {
  SQLite::Statement insert(tx, "INSERT INTO ledger VALUES (?, ?, ?)");
  insert.bind(1, m.award_id);
  insert.bind(2, m.member);
  insert.bind(3, m.points);
  insert.exec();
  return "ledger-" + m.award_id;
}

int64_t Balance(outbox::SqliteFile& ledger, const std::string& member) {
  int64_t points = -1;
  const absl::Status read = ledger.Read("read a balance", [&](SQLite::Database& db) {
    SQLite::Statement sum(db, "SELECT coalesce(sum(points), 0) FROM ledger WHERE member = ?");
    sum.bind(1, member);
    sum.executeStep();
    points = sum.getColumn(0).getInt64();
    return absl::OkStatus();
  });
  return read.ok() ? points : -1;
}

}  // namespace rewards
