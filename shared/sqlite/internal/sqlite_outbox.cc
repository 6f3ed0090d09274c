#include "shared/sqlite/internal/sqlite_outbox.h"

#include <optional>

#include "shared/base/status_macros.h"
#include "shared/outbox/internal/rows_closed.h"
#include "shared/sqlite/outbox_table.h"

namespace outbox {

SqliteOutbox::SqliteOutbox(SqliteFile& file, const Clock& clock, RetryPolicy retry)
    : file_(file), clock_(clock), retry_(retry) {}

absl::StatusOr<OutgoingMessage> SqliteOutbox::Write(
    const MessageSpec& spec, const std::function<absl::Status(SQLite::Database&)>& business) {
  OutboxMessage row = NewOutboxMessage(spec, clock_.NowMillis(), retry_);
  RETURN_IF_ERROR(file_.Write([&](SQLite::Database& db) -> absl::Status {
    RETURN_IF_ERROR(business(db));
    row.id = OutboxInserter(db).Insert(row);
    return absl::OkStatus();
  }));
  return ToOutgoing(row);
}

absl::StatusOr<OutboxMessage> SqliteOutbox::Get(const std::string& message_id) {
  std::optional<OutboxMessage> row;
  RETURN_IF_ERROR(file_.Read("load outbox row", [&](SQLite::Database& reader) {
    row = OutboxStateTable(reader).Load(message_id);
    return absl::OkStatus();
  }));
  if (!row) return absl::NotFoundError("no outbox row for message_id " + message_id);
  return *std::move(row);
}

absl::StatusOr<SqliteOutbox::Counts> SqliteOutbox::CountRows() {
  Counts counts;
  RETURN_IF_ERROR(file_.Read("count outbox rows", [&](SQLite::Database& reader) {
    SQLite::Statement by_status(reader, "SELECT status, count(*) FROM outbox GROUP BY status");
    while (by_status.executeStep()) {
      const std::string status = by_status.getColumn(0).getString();
      const int64_t n = by_status.getColumn(1).getInt64();
      if (status == "SENDING") counts.sending = n;
      if (status == "SENT") counts.sent = n;
      if (status == "FAILED") counts.failed = n;
    }
    return absl::OkStatus();
  }));
  return counts;
}

absl::StatusOr<SqliteOutbox::Counts> SqliteOutbox::WaitUntilClosed(
    absl::Time deadline, absl::Duration poll, const std::function<bool()>& stop) {
  return internal::WaitUntilRowsClosed([this] { return CountRows(); }, deadline, poll, stop);
}

absl::StatusOr<AckTally> SqliteOutbox::RecordAcks(const std::vector<std::string>& message_ids) {
  AckTally tally;
  RETURN_IF_ERROR(file_.Write([&](SQLite::Database& writer) {
    tally = outbox::RecordAcks(writer, message_ids, clock_.NowMillis(), on_closed_);
    return absl::OkStatus();
  }));
  return tally;
}

absl::Status SqliteOutbox::RecordPublishFailure(const std::vector<std::string>& message_ids,
                                                const std::string& error) {
  return file_.Write([&](SQLite::Database& writer) {
    outbox::RecordPublishFailure(writer, message_ids, error, clock_.NowMillis(), "relay");
    return absl::OkStatus();
  });
}

absl::StatusOr<int> SqliteOutbox::RecordRejects(const std::vector<Rejection>& rejects) {
  int changed = 0;
  RETURN_IF_ERROR(file_.Write([&](SQLite::Database& writer) {
    changed = outbox::RecordRejects(writer, rejects, clock_.NowMillis(), on_closed_);
    return absl::OkStatus();
  }));
  return changed;
}

absl::StatusOr<std::vector<std::string>> SqliteOutbox::TakenOver(
    const std::vector<std::string>& message_ids) {
  std::vector<std::string> taken;
  RETURN_IF_ERROR(file_.Read("read taken over", [&](SQLite::Database& reader) {
    taken = outbox::TakenOver(reader, message_ids);
    return absl::OkStatus();
  }));
  return taken;
}

}  // namespace outbox
