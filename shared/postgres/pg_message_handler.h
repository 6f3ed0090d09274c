#pragma once

// The consumer's handler on PostgreSQL (the consumer role drives it), the
// counterpart of SqliteMessageHandler<M> and SqliteApply
// (shared/sqlite/sqlite_message_handler.h), with the same virtuals and the
// same answers: the library owns the inbox step and the transaction, the
// adopter writes what one new message changes.
//
// For each batch, ONE transaction on the handler's PgSession, and in it a
// few statements for the whole batch, not a few per message:
//   1. the messages' ids are looked up in the inbox (PgInbox), and their
//      business keys in the adopter's table when the options name one
//      (applied_by_key). Found: it was applied before, and is answered as a
//      duplicate with the reference its first copy made (a message found by
//      its key alone is recorded by id too);
//   2. a new message only is judged by Rejects: refused, nothing is written
//      and it is answered with a reject, or dead-lettered for a publisher
//      that does not understand rejects (AnswersRejects);
//   3. the new messages' ids are claimed in the inbox (PgInbox::ClaimAll), in
//      message id order; then, in delivery order, ApplyAll(tx, messages)
//      makes their changes and returns their references, recorded with the
//      claims, in the same transaction. ApplyAll calls Apply for each
//      message unless the adopter writes it for many rows at once.
// Several consumers may share one inbox (one database, a handler and a
// session each). Two copies of a message applied at the same time book
// once: the second claim waits on the first's uncommitted row, and once
// that commits the second copy is answered as a duplicate with the first's
// reference; its Apply never runs. Claims taken in one order make
// consumers wait on each other, not deadlock.
//
// The batch commits once. An error anywhere rolls the whole batch back.
// While the store cannot write (its link lost and not opened again, a full
// disk, a read-only standby, a lock or statement timeout, refused
// credentials: StoreUnavailable, dead_letter.h) the consumer holds the batch
// and applies it again later; after any other error it applies the messages
// one at a time and dead-letters the one refused.
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "shared/base/clock.h"
#include "shared/outbox/consumer_handler.h"
#include "shared/outbox/internal/typed_handler.h"
#include "shared/postgres/pg_connection.h"
#include "shared/postgres/pg_inbox.h"
#include "shared/postgres/pg_session.h"

namespace outbox {

struct PgHandlerOptions {
  // The inbox table (CreatePgInboxTable, pg_schema.h).
  std::string inbox_table = "inbox";
  // Unset: a message is known by its message id only.
  std::optional<AppliedByKey> applied_by_key;
};

namespace internal {

// The batch step of PgMessageHandler, apart from the message type.
class PgInboxApplier {
 public:
  PgInboxApplier(PgSession& session, const Clock& clock, PgHandlerOptions options);

  // The adopter's half, asked by index into the batch.
  struct Steps {
    std::function<std::string(size_t)> rejects;
    std::function<bool(size_t)> answers_rejects;
    // The references of the messages at these indices, in their order.
    std::function<absl::StatusOr<std::vector<std::string>>(PgConnection&,
                                                           const std::vector<size_t>&)>
        apply;
  };
  absl::StatusOr<std::vector<Applied>> ApplyBatch(const std::vector<InboxEntry>& batch,
                                                  const Steps& steps);
  PgInbox& inbox() { return inbox_; }

 private:
  PgSession& session_;
  const Clock& clock_;
  const PgHandlerOptions options_;
  PgInbox inbox_;
};

}  // namespace internal

// What the adopter writes, over its own message type: Decode and Apply;
// Rejects, AnswersRejects, BusinessKey and Replies if it needs them (as
// documented on SqliteMessageHandler).
template <typename Message>
class PgMessageHandler : public internal::TypedHandler<Message> {
 public:
  // `session`'s database holds the inbox table and whatever Apply writes;
  // the handler books each batch in a transaction on it, and the consumer
  // role prunes the inbox through it. One session per consumer.
  PgMessageHandler(PgSession& session, const Clock& clock, PgHandlerOptions options = {})
      : internal::TypedHandler<Message>(clock), applier_(session, clock, std::move(options)) {}

  // Makes the change of a NEW message inside the batch's transaction, on
  // `tx`: insert, update, as the business needs, and return the reference
  // of what it made (an id its reply names). Never begin, commit or roll
  // back on `tx`. An error, or an exception thrown, rolls the whole batch
  // back: UNAVAILABLE (a passing failure) holds the batch to be applied
  // again; any other error (a constraint, a missing table: PgStatus's
  // codes) dead-letters this message and the others are applied without
  // it. Called once per new message per attempt: after a serialization
  // failure or a deadlock the transaction starts over and Apply runs again,
  // so keep nothing of it outside `tx`.
  virtual absl::StatusOr<std::string> Apply(PgConnection& tx, const Message& message) = 0;

  // Apply for several new messages of one batch at once, in delivery order,
  // their business keys distinct: one reference per message, in their
  // order. The rules of Apply hold (one error rolls the whole batch back).
  // By default Apply for each; override it to write all the rows in a few
  // statements (e.g. one INSERT ... SELECT FROM unnest): on PostgreSQL each
  // statement is a round trip.
  virtual absl::StatusOr<std::vector<std::string>> ApplyAll(
      PgConnection& tx, const std::vector<const Message*>& messages) {
    std::vector<std::string> references;
    for (const Message* message : messages) {
      absl::StatusOr<std::string> made = Apply(tx, *message);
      if (!made.ok()) return made.status();
      references.push_back(*std::move(made));
    }
    return references;
  }

 private:
  absl::StatusOr<std::vector<Applied>> ApplyBatch() final {
    return applier_.ApplyBatch(this->entries(),
                               {[this](size_t i) { return this->Rejects(this->message(i)); },
                                [this](size_t i) { return this->AnswersRejects(this->message(i)); },
                                [this](PgConnection& tx, const std::vector<size_t>& indices) {
                                  std::vector<const Message*> messages;
                                  messages.reserve(indices.size());
                                  for (size_t i : indices) messages.push_back(&this->message(i));
                                  return ApplyAll(tx, messages);
                                }});
  }

  ProcessedLog* processed_log() final { return &applier_.inbox(); }

  internal::PgInboxApplier applier_;
};

// The shortest handler, as SqliteApply: the deliveries of one message
// type, each applied by a function given the delivery as it came; its
// shard_key is the business key. A delivery of another type is
// dead-lettered.
//
//   outbox::PgApply shipping(*session, "OrderPlaced", ShipOrder);
class PgApply final : public PgMessageHandler<Delivery> {
 public:
  using Function =
      std::function<absl::StatusOr<std::string>(PgConnection& tx, const Delivery& message)>;

  PgApply(PgSession& session, std::string type, Function apply, PgHandlerOptions options = {},
          const Clock& clock = SystemClock::Get())
      : PgMessageHandler(session, clock, std::move(options)),
        type_(std::move(type)),
        apply_(std::move(apply)) {}

  absl::StatusOr<Delivery> Decode(const Delivery& delivery) override {
    if (delivery.type != type_) {
      return absl::InvalidArgumentError("a message of type '" + delivery.type + "', not " + type_);
    }
    return delivery;
  }
  std::string BusinessKey(const Delivery& message) override { return message.shard_key; }
  absl::StatusOr<std::string> Apply(PgConnection& tx, const Delivery& message) override {
    return apply_(tx, message);
  }

 private:
  const std::string type_;
  const Function apply_;
};

}  // namespace outbox
