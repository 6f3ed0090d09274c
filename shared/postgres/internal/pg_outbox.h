#pragma once

// The producer's outbox repository on PostgreSQL (OutboxRepository, for the
// Relay and the AckListener), the counterpart of SqliteOutbox: the adopter
// writes its business rows and the outbox row together with Write(), in one
// transaction on the same connection; acknowledgements, rejects and publish
// failures apply state_machine.h's transitions to rows locked FOR UPDATE.
// Thread-safe: calls take turns on one connection (PgSession).
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "shared/base/clock.h"
#include "shared/outbox/internal/state_machine.h"
#include "shared/outbox/message.h"
#include "shared/outbox/repository.h"
#include "shared/postgres/pg_connection.h"
#include "shared/postgres/pg_outbox_table.h"
#include "shared/postgres/pg_session.h"

namespace outbox {

class PgOutbox final : public OutboxRepository {
 public:
  // `session` reaches a database with the outbox tables
  // (CreatePgOutboxTables in its schema) and outlives this; `retry` is the
  // budget stamped on each new row.
  PgOutbox(PgSession& session, const Clock& clock, RetryPolicy retry = {});

  // One transaction: `business` writes the adopter's own rows on the
  // connection it is given (an error it returns rolls everything back), then
  // the outbox row for `spec` is inserted. Returns the message to hand to
  // the Relay (the commit is done then). ALREADY_EXISTS when the message id
  // or the business key is there already.
  absl::StatusOr<OutgoingMessage> Write(const MessageSpec& spec,
                                        const std::function<absl::Status(PgConnection&)>& business);

  const RetryPolicy& retry() const { return retry_; }
  // The adopter's step when a row turns SENT or is rejected
  // (PgRowClosed); set before any worker uses this repository.
  void set_on_closed(PgRowClosed on_closed) { on_closed_ = std::move(on_closed); }

  // The row's current state; NOT_FOUND for an unknown message id.
  absl::StatusOr<OutboxMessage> Get(const std::string& message_id);

  // OutboxRepository.
  absl::StatusOr<AckTally> RecordAcks(const std::vector<std::string>& message_ids) override;
  absl::StatusOr<int> RecordRejects(const std::vector<Rejection>& rejects) override;
  absl::Status RecordPublishFailure(const std::vector<std::string>& message_ids,
                                    const std::string& error) override;
  absl::StatusOr<std::vector<std::string>> TakenOver(
      const std::vector<std::string>& message_ids) override;

 private:
  PgSession& session_;
  const Clock& clock_;
  const RetryPolicy retry_;
  PgRowClosed on_closed_;
};

// The row with `message_id` in the caller's transaction, or nullopt.
absl::StatusOr<std::optional<OutboxMessage>> LoadPgOutboxRow(PgConnection& conn,
                                                             const std::string& message_id);

}  // namespace outbox
