#include "shared/postgres/pg_outbox_table.h"

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/observability/log.h"
#include "shared/outbox/internal/state_machine.h"

namespace outbox {
namespace {

int64_t Int64(const PgResult& r, int row, int column) {
  int64_t v = 0;
  return absl::SimpleAtoi(r.Get(row, column), &v) ? v : 0;
}

std::string Text(const PgResult& r, int row, int column) {
  return std::string(r.Get(row, column));
}

}  // namespace

// The payload travels as hex: the text protocol carries no NUL byte.
const char* const kPgOutboxColumns =
    "o.id, o.message_id, o.biz_type, o.biz_key, o.topic, o.message_type, o.reply_to, "
    "encode(o.payload, 'hex'), o.status, o.attempts, o.max_attempts, o.next_retry_at, "
    "o.last_attempt_at, o.last_error, o.created_at, o.updated_at, o.sent_at, o.traceparent, "
    "o.failure_kind, o.failure_group, o.acknowledged_by, o.restarted_at";

std::string PgTextArray(const std::vector<std::string>& values) {
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += '"';
    for (char c : values[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  out += '}';
  return out;
}

OutboxMessage ReadPgOutboxRow(const PgResult& r, int row) {
  OutboxMessage m;
  int c = 0;
  m.id = Int64(r, row, c++);
  m.message_id = Text(r, row, c++);
  m.biz_type = Text(r, row, c++);
  m.biz_key = Text(r, row, c++);
  m.topic = Text(r, row, c++);
  m.message_type = Text(r, row, c++);
  m.reply_to = Text(r, row, c++);
  m.payload = absl::HexStringToBytes(r.Get(row, c++));
  m.status = ParseStatus(r.Get(row, c++)).value_or(OutboxStatus::kSending);
  m.attempts = static_cast<int>(Int64(r, row, c++));
  m.max_attempts = static_cast<int>(Int64(r, row, c++));
  m.next_retry_at = Int64(r, row, c++);
  m.last_attempt_at = Int64(r, row, c++);
  m.last_error = Text(r, row, c++);
  m.created_at = Int64(r, row, c++);
  m.updated_at = Int64(r, row, c++);
  m.sent_at = Int64(r, row, c++);
  m.traceparent = Text(r, row, c++);
  m.failure_kind = Text(r, row, c++);
  m.failure_group = Text(r, row, c++);
  m.acknowledged_by = Text(r, row, c++);
  m.restarted_at = Int64(r, row, c++);
  return m;
}

absl::StatusOr<int64_t> InsertPgOutboxRow(PgConnection& conn, const OutboxMessage& row) {
  ASSIGN_OR_RETURN(PgResult r, conn.Query(R"sql(
        INSERT INTO outbox (message_id, biz_type, biz_key, topic, message_type, reply_to, payload,
                            status, attempts, max_attempts, next_retry_at, last_attempt_at,
                            last_error, created_at, updated_at, sent_at, traceparent,
                            failure_kind, failure_group, acknowledged_by, restarted_at)
        VALUES ($1, $2, $3, $4, $5, $6, decode($7, 'hex'), $8, $9, $10, $11, $12, $13, $14, $15,
                $16, $17, $18, $19, $20, $21)
        RETURNING id)sql",
                                          {row.message_id,
                                           row.biz_type,
                                           row.biz_key,
                                           row.topic,
                                           row.message_type,
                                           row.reply_to,
                                           absl::BytesToHexString(row.payload),
                                           std::string(StatusName(row.status)),
                                           std::to_string(row.attempts),
                                           std::to_string(row.max_attempts),
                                           std::to_string(row.next_retry_at),
                                           std::to_string(row.last_attempt_at),
                                           row.last_error,
                                           std::to_string(row.created_at),
                                           std::to_string(row.updated_at),
                                           std::to_string(row.sent_at),
                                           row.traceparent,
                                           row.failure_kind,
                                           row.failure_group,
                                           row.acknowledged_by,
                                           std::to_string(row.restarted_at)}));
  return Int64(r, 0, 0);
}

absl::StatusOr<std::map<std::string, OutboxMessage>> LockPgOutboxRows(
    PgConnection& conn, const std::vector<std::string>& message_ids) {
  std::map<std::string, OutboxMessage> rows;
  if (message_ids.empty()) return rows;
  ASSIGN_OR_RETURN(PgResult r, conn.Query(absl::StrCat("SELECT ", kPgOutboxColumns,
                                                       " FROM outbox o WHERE o.message_id = "
                                                       "ANY($1::text[]) ORDER BY o.id FOR UPDATE"),
                                          {PgTextArray(message_ids)}));
  for (int i = 0; i < r.rows(); ++i) {
    OutboxMessage m = ReadPgOutboxRow(r, i);
    rows.emplace(m.message_id, std::move(m));
  }
  return rows;
}

absl::Status SavePgOutboxRow(PgConnection& conn, const OutboxMessage& row) {
  return conn
      .Query(R"sql(
        UPDATE outbox SET status = $2, attempts = $3, next_retry_at = $4, last_attempt_at = $5,
                          last_error = $6, updated_at = $7, sent_at = $8, failure_kind = $9,
                          failure_group = $10, acknowledged_by = $11, restarted_at = $12
        WHERE id = $1)sql",
             {std::to_string(row.id), std::string(StatusName(row.status)),
              std::to_string(row.attempts), std::to_string(row.next_retry_at),
              std::to_string(row.last_attempt_at), row.last_error, std::to_string(row.updated_at),
              std::to_string(row.sent_at), row.failure_kind, row.failure_group, row.acknowledged_by,
              std::to_string(row.restarted_at)})
      .status();
}

absl::Status AppendPgHistory(PgConnection& conn, const std::string& message_id, int64_t at_ms,
                             const std::string& instance, const std::string& event,
                             const std::string& detail) {
  RETURN_IF_ERROR(conn.Query("INSERT INTO outbox_history (message_id, at, instance, event, "
                             "detail) VALUES ($1, $2, $3, $4, $5)",
                             {message_id, std::to_string(at_ms), instance, event, detail})
                      .status());
  return conn
      .Query(absl::StrCat("DELETE FROM outbox_history WHERE message_id = $1 AND id <= ("
                          "SELECT id FROM outbox_history WHERE message_id = $1 "
                          "ORDER BY id DESC LIMIT 1 OFFSET ",
                          kHistoryPerMessage, ")"),
             {message_id})
      .status();
}

absl::Status RunPgRowClosed(const PgRowClosed& on_closed, PgConnection& conn,
                            const OutboxMessage& row) {
  if (!on_closed) return absl::OkStatus();
  RETURN_IF_ERROR(conn.Exec("SAVEPOINT row_closed"));
  const absl::Status status = on_closed(conn, row);
  if (!status.ok()) {
    RETURN_IF_ERROR(conn.Exec("ROLLBACK TO SAVEPOINT row_closed"));
    LogWarning("row_closed_hook_failed",
               {KV("message_id", row.message_id), KV("status", StatusName(row.status)),
                KV("error", status.ToString())});
  }
  return conn.Exec("RELEASE SAVEPOINT row_closed");
}

absl::Status SavePgOutboxRows(PgConnection& conn, const std::vector<const OutboxMessage*>& rows) {
  if (rows.empty()) return absl::OkStatus();
  std::vector<std::vector<std::string>> cols(12);
  for (const OutboxMessage* row : rows) {
    cols[0].push_back(std::to_string(row->id));
    cols[1].push_back(std::string(StatusName(row->status)));
    cols[2].push_back(std::to_string(row->attempts));
    cols[3].push_back(std::to_string(row->next_retry_at));
    cols[4].push_back(std::to_string(row->last_attempt_at));
    cols[5].push_back(row->last_error);
    cols[6].push_back(std::to_string(row->updated_at));
    cols[7].push_back(std::to_string(row->sent_at));
    cols[8].push_back(row->failure_kind);
    cols[9].push_back(row->failure_group);
    cols[10].push_back(row->acknowledged_by);
    cols[11].push_back(std::to_string(row->restarted_at));
  }
  std::vector<PgParam> params;
  for (const std::vector<std::string>& col : cols) params.emplace_back(PgTextArray(col));
  ASSIGN_OR_RETURN(PgResult r, conn.Query(R"sql(
        UPDATE outbox AS o SET status = u.status, attempts = u.attempts::integer,
                               next_retry_at = u.next_retry_at::bigint,
                               last_attempt_at = u.last_attempt_at::bigint,
                               last_error = u.last_error, updated_at = u.updated_at::bigint,
                               sent_at = u.sent_at::bigint, failure_kind = u.failure_kind,
                               failure_group = u.failure_group,
                               acknowledged_by = u.acknowledged_by,
                               restarted_at = u.restarted_at::bigint
        FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                    $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::text[])
             AS u (id, status, attempts, next_retry_at, last_attempt_at, last_error, updated_at,
                   sent_at, failure_kind, failure_group, acknowledged_by, restarted_at)
        WHERE o.id = u.id::bigint)sql",
                                          params));
  if (r.affected() != static_cast<int>(rows.size())) {
    return absl::InternalError(
        absl::StrCat("outbox: ", r.affected(), " of ", rows.size(), " rows stored"));
  }
  return absl::OkStatus();
}

absl::StatusOr<AckTally> PgRecordAcks(PgConnection& conn, const std::vector<std::string>& ids,
                                      int64_t now_ms, const PgRowClosed& on_closed) {
  ASSIGN_OR_RETURN(auto rows, LockPgOutboxRows(conn, ids));
  AckTally tally;
  // Without a step per closed row, the rows are stored in one statement.
  const bool one_by_one = static_cast<bool>(on_closed);
  std::vector<const OutboxMessage*> closed;
  for (const std::string& id : ids) {
    auto it = rows.find(id);
    if (it == rows.end()) continue;
    OutboxMessage& row = it->second;
    const bool retried = row.attempts > 1;
    const bool was_failed = row.status == OutboxStatus::kFailed;
    const std::string failed_with = row.last_error;
    switch (OnAck(row, now_ms)) {
      case AckEffect::kClosed: ++tally.closed; break;
      case AckEffect::kLateClosed: ++tally.late; break;
      case AckEffect::kAlreadySent: continue;
    }
    tally.create_to_sent_ms.push_back(now_ms - row.created_at);
    if (one_by_one) {
      RETURN_IF_ERROR(SavePgOutboxRow(conn, row));
      RETURN_IF_ERROR(RunPgRowClosed(on_closed, conn, row));
    } else {
      closed.push_back(&row);
    }
    if (retried || was_failed) {  // published once and acknowledged: the row says it all
      RETURN_IF_ERROR(AppendPgHistory(
          conn, id, now_ms, "consumer", kEventAcknowledged,
          was_failed
              ? absl::StrCat("after ", row.attempts, " attempts, while FAILED (", failed_with, ")")
              : absl::StrCat("after ", row.attempts, " attempts")));
    }
  }
  RETURN_IF_ERROR(SavePgOutboxRows(conn, closed));
  return tally;
}

absl::StatusOr<int> PgRecordRejects(PgConnection& conn, const std::vector<Rejection>& rejects,
                                    int64_t now_ms, const PgRowClosed& on_closed) {
  std::vector<std::string> ids;
  for (const Rejection& r : rejects) ids.push_back(r.message_id);
  ASSIGN_OR_RETURN(auto rows, LockPgOutboxRows(conn, ids));
  int changed = 0;
  for (const Rejection& r : rejects) {
    auto it = rows.find(r.message_id);
    if (it == rows.end() || !OnReject(it->second, r.reason, now_ms, r.answered_at)) continue;
    RETURN_IF_ERROR(SavePgOutboxRow(conn, it->second));
    RETURN_IF_ERROR(RunPgRowClosed(on_closed, conn, it->second));
    RETURN_IF_ERROR(
        AppendPgHistory(conn, r.message_id, now_ms, "consumer", kEventRejected, r.reason));
    ++changed;
  }
  return changed;
}

absl::Status PgRecordPublishFailure(PgConnection& conn, const std::vector<std::string>& ids,
                                    const std::string& error, int64_t now_ms,
                                    const std::string& instance) {
  ASSIGN_OR_RETURN(auto rows, LockPgOutboxRows(conn, ids));
  for (const std::string& id : ids) {
    auto it = rows.find(id);
    if (it == rows.end() || !OnPublishFailure(it->second, error, now_ms)) continue;
    RETURN_IF_ERROR(SavePgOutboxRow(conn, it->second));
    RETURN_IF_ERROR(AppendPgHistory(conn, id, now_ms, instance, kEventPublishFailed,
                                    absl::StrCat("attempt ", it->second.attempts, ": ", error)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> PgTakenOver(PgConnection& conn,
                                                     const std::vector<std::string>& ids) {
  std::vector<std::string> taken;
  if (ids.empty()) return taken;
  ASSIGN_OR_RETURN(PgResult r, conn.Query("SELECT message_id FROM outbox WHERE message_id = "
                                          "ANY($1::text[]) AND (status <> 'SENDING' OR "
                                          "attempts > 1)",
                                          {PgTextArray(ids)}));
  std::vector<std::string> found;
  for (int i = 0; i < r.rows(); ++i) found.push_back(Text(r, i, 0));
  // In the order asked, as the SQLite store answers.
  for (const std::string& id : ids) {
    if (std::find(found.begin(), found.end(), id) != found.end()) taken.push_back(id);
  }
  return taken;
}

}  // namespace outbox
