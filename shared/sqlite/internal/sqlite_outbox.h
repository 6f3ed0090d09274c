#pragma once

// The producer's outbox repository on a SQLite file (OutboxRepository, for
// the Relay and the AckListener): acknowledgements close rows, publish
// failures are recorded, and rows recovery took over are told apart. The
// adopter writes its business rows and the outbox row together with
// Write(), in one transaction of the same file.
#include <functional>
#include <string>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "shared/base/clock.h"
#include "shared/outbox/internal/state_machine.h"
#include "shared/outbox/message.h"
#include "shared/outbox/repository.h"
#include "shared/sqlite/outbox_table.h"
#include "shared/sqlite/sqlite_file.h"

namespace outbox {

class SqliteOutbox final : public OutboxRepository {
 public:
  // `file` holds the outbox tables (CreateOutboxTable in its schema) and
  // outlives this; `retry` is the budget stamped on each new row.
  SqliteOutbox(SqliteFile& file, const Clock& clock, RetryPolicy retry = {});

  // One write transaction: `business` writes the adopter's own rows (throw
  // SQLite::Exception or return an error to roll everything back), then the
  // outbox row for `spec` is inserted. Returns the message to hand to the
  // Relay once this returns (the commit is durable then).
  absl::StatusOr<OutgoingMessage> Write(
      const MessageSpec& spec, const std::function<absl::Status(SQLite::Database&)>& business);
  // The budget stamped on each new row.
  const RetryPolicy& retry() const { return retry_; }
  // The adopter's step when a row turns SENT or is rejected
  // (outbox_table.h); set before any worker uses this repository.
  void set_on_closed(RowClosed on_closed) { on_closed_ = std::move(on_closed); }
  const RowClosed& on_closed() const { return on_closed_; }

  // The row's current state; NOT_FOUND for an unknown message id.
  absl::StatusOr<OutboxMessage> Get(const std::string& message_id);

  // Rows by status in `outbox` (archived rows not counted), on this
  // producer's own connection: "are my rows closed?".
  using Counts = OutboxRowCounts;  // message.h
  absl::StatusOr<Counts> CountRows();
  // Waits until no row is SENDING (each SENT, or FAILED for an operator)
  // and returns the counts then; DEADLINE_EXCEEDED, naming how many are
  // still SENDING, if `deadline` comes first, and CANCELLED so once `stop`
  // (when given; asked at each poll) returns true, e.g. ShutdownRequested
  // (shared/runtime/signals.h). Rows close only while an AckListener reads
  // the reply queue: a batch job calls this before it stops its listener
  // and exits.
  absl::StatusOr<Counts> WaitUntilClosed(absl::Time deadline,
                                         absl::Duration poll = absl::Milliseconds(100),
                                         const std::function<bool()>& stop = nullptr);

  // OutboxRepository.
  absl::StatusOr<AckTally> RecordAcks(const std::vector<std::string>& message_ids) override;
  absl::StatusOr<int> RecordRejects(const std::vector<Rejection>& rejects) override;
  absl::Status RecordPublishFailure(const std::vector<std::string>& message_ids,
                                    const std::string& error) override;
  // Rows no longer SENDING, or re-published by recovery already.
  absl::StatusOr<std::vector<std::string>> TakenOver(
      const std::vector<std::string>& message_ids) override;

 private:
  SqliteFile& file_;
  const Clock& clock_;
  const RetryPolicy retry_;
  RowClosed on_closed_;
};

}  // namespace outbox
