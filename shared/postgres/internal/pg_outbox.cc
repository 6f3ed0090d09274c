#include "shared/postgres/internal/pg_outbox.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"

namespace outbox {

PgOutbox::PgOutbox(PgSession& session, const Clock& clock, RetryPolicy retry)
    : session_(session), clock_(clock), retry_(std::move(retry)) {}

absl::StatusOr<OutgoingMessage> PgOutbox::Write(
    const MessageSpec& spec, const std::function<absl::Status(PgConnection&)>& business) {
  OutboxMessage row = NewOutboxMessage(spec, clock_.NowMillis(), retry_);
  RETURN_IF_ERROR(session_.Transaction("write an outbox row", [&](PgConnection& conn) {
    RETURN_IF_ERROR(business(conn));
    ASSIGN_OR_RETURN(row.id, InsertPgOutboxRow(conn, row));
    return absl::OkStatus();
  }));
  return ToOutgoing(row);
}

absl::StatusOr<std::optional<OutboxMessage>> LoadPgOutboxRow(PgConnection& conn,
                                                             const std::string& message_id) {
  ASSIGN_OR_RETURN(PgResult r, conn.Query(absl::StrCat("SELECT ", kPgOutboxColumns,
                                                       " FROM outbox o WHERE o.message_id = $1"),
                                          {message_id}));
  if (r.rows() == 0) return std::optional<OutboxMessage>();
  return std::optional<OutboxMessage>(ReadPgOutboxRow(r, 0));
}

absl::StatusOr<OutboxMessage> PgOutbox::Get(const std::string& message_id) {
  std::optional<OutboxMessage> row;
  RETURN_IF_ERROR(session_.Transaction("get message", [&](PgConnection& conn) {
    ASSIGN_OR_RETURN(row, LoadPgOutboxRow(conn, message_id));
    return absl::OkStatus();
  }));
  if (!row) return absl::NotFoundError(absl::StrCat("message '", message_id, "' not found"));
  return *std::move(row);
}

absl::StatusOr<AckTally> PgOutbox::RecordAcks(const std::vector<std::string>& message_ids) {
  AckTally tally;
  RETURN_IF_ERROR(session_.Transaction("record acknowledgements", [&](PgConnection& conn) {
    ASSIGN_OR_RETURN(tally, PgRecordAcks(conn, message_ids, clock_.NowMillis(), on_closed_));
    return absl::OkStatus();
  }));
  return tally;
}

absl::StatusOr<int> PgOutbox::RecordRejects(const std::vector<Rejection>& rejects) {
  int changed = 0;
  RETURN_IF_ERROR(session_.Transaction("record rejects", [&](PgConnection& conn) {
    ASSIGN_OR_RETURN(changed, PgRecordRejects(conn, rejects, clock_.NowMillis(), on_closed_));
    return absl::OkStatus();
  }));
  return changed;
}

absl::Status PgOutbox::RecordPublishFailure(const std::vector<std::string>& message_ids,
                                            const std::string& error) {
  return session_.Transaction("record publish failures", [&](PgConnection& conn) {
    return PgRecordPublishFailure(conn, message_ids, error, clock_.NowMillis(), "relay");
  });
}

absl::StatusOr<std::vector<std::string>> PgOutbox::TakenOver(
    const std::vector<std::string>& message_ids) {
  std::vector<std::string> taken;
  RETURN_IF_ERROR(session_.Transaction("find rows taken over", [&](PgConnection& conn) {
    ASSIGN_OR_RETURN(taken, PgTakenOver(conn, message_ids));
    return absl::OkStatus();
  }));
  return taken;
}

}  // namespace outbox
