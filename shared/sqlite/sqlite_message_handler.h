#pragma once

// The consumer's handler on a SQLite file (IdempotentConsumer drives it):
// the library owns the inbox step and the transaction, the adopter writes
// what one new message changes.
//
// For each batch, ONE write transaction on the adopter's file (BEGIN
// IMMEDIATE on its writer, under the writer's mutex) and, for each message
// in delivery order:
//   1. its message id is looked up in the inbox, and its business key in the
//      adopter's table when the options name one (applied_by_key). Found:
//      it was applied before. Nothing is applied, and it is answered as a
//      duplicate with the reference its first copy made, whatever the rules
//      say today (a message found by its key alone is recorded by id too);
//   2. a new message only is judged by Rejects: refused, nothing is written
//      and it is answered with a reject, or dead-lettered for a publisher
//      that does not understand rejects (AnswersRejects);
//   3. Apply(tx, message) makes its change and returns its reference; the
//      library records the message id, business key and reference in the
//      inbox, in the same transaction.
// The batch commits once. An error anywhere (Apply's, a SQLite exception)
// rolls the whole batch back. While the store cannot write (busy, locked, a
// full disk, an I/O error: StoreUnavailable, dead_letter.h) the consumer
// holds the batch and applies it again later; after any other error it
// applies the messages one at a time and dead-letters the one refused
// (idempotent_consumer.h).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>

#include "absl/status/statusor.h"
#include "shared/base/clock.h"
#include "shared/outbox/consumer_handler.h"
#include "shared/outbox/internal/reply_format.h"
#include "shared/outbox/internal/typed_handler.h"
#include "shared/sqlite/inbox.h"
#include "shared/sqlite/sqlite_file.h"

namespace outbox {

struct SqliteHandlerOptions {
  InboxTable inbox;  // where the ids of applied messages are kept
  // Unset: a message is known by its message id only.
  std::optional<AppliedByKey> applied_by_key;
};

namespace internal {

// The batch step of SqliteMessageHandler, apart from the message type.
class InboxApplier {
 public:
  InboxApplier(SqliteFile& file, const Clock& clock, SqliteHandlerOptions options);
  ~InboxApplier();

  using Entry = InboxEntry;
  // The adopter's half, asked by index into the batch.
  struct Steps {
    std::function<std::string(size_t)> rejects;
    std::function<bool(size_t)> answers_rejects;
    std::function<absl::StatusOr<std::string>(SQLite::Database&, size_t)> apply;
  };
  absl::StatusOr<std::vector<Applied>> ApplyBatch(const std::vector<Entry>& batch,
                                                  const Steps& steps);
  const Clock& clock() const { return clock_; }

 private:
  struct Statements;
  SqliteFile& file_;
  const Clock& clock_;
  const SqliteHandlerOptions options_;
  // Prepared on the writer at the first batch (an error there is that
  // batch's), then kept: no SQL text parsed per batch. Used only inside
  // file_.WithWriter, under the writer's mutex.
  std::unique_ptr<Statements> statements_;
};

}  // namespace internal

// What the adopter writes, over its own message type: Decode and Apply;
// Rejects, AnswersRejects, BusinessKey and Replies if it needs them. The
// virtuals other than Apply are internal::TypedHandler's
// (shared/outbox/internal/typed_handler.h), the same for every store:
//
// absl::StatusOr<Message> Decode(const Delivery& delivery) = 0;
//   The message in `delivery`, checked; an error dead-letters it (say why).
//   Never for a passing failure: those must fail Apply with UNAVAILABLE. (A
//   delivery without a message_id is dead-lettered before Decode: it cannot
//   be deduplicated.)
// std::string BusinessKey(const Message& message);
//   The business key the message is about (an order id), "" if none (the
//   default): kept in the inbox beside the message id, and looked up in
//   applied_by_key.
// std::string Rejects(const Message& message);
//   Why the business will never accept this well-formed message ("" = it
//   may; the default). Asked only about a message not applied before:
//   refused, it is not applied and not kept in the inbox (a copy is judged
//   again), and is answered with a business reject. Only answer rejects to
//   publishers that understand them (docs/library.md, "Business rejects").
// bool AnswersRejects(const Message& message);
//   Whether `message`'s publisher understands business rejects (true by
//   default). False: a new message that Rejects refuses is dead-lettered
//   with the reason.
// std::vector<Reply> Replies(const std::vector<Answered<Message>>& batch);
//   The replies, each message answered by exactly one of them (one reply
//   per message, or one listing several messages of the same reply queue),
//   duplicates and rejects included. By default one reply per message in
//   the library's format (shared/outbox/internal/reply_format.h), the one
//   the producer role's ack listener reads.
template <typename Message>
class SqliteMessageHandler : public internal::TypedHandler<Message> {
 public:
  // `file`'s schema holds the inbox table (CreateInboxTable) and whatever
  // Apply writes. The handler books each batch through file.WithWriter.
  SqliteMessageHandler(SqliteFile& file, const Clock& clock, SqliteHandlerOptions options = {})
      : internal::TypedHandler<Message>(clock),
        inbox_(file, options.inbox),
        applier_(file, clock, std::move(options)) {}

  // Makes the change of a NEW message inside the batch's transaction, on
  // `tx` (the file's writer): insert, update, as the business needs, and
  // return the reference of what it made (an id its reply names). Never
  // begin, commit or roll back on `tx`. An error, or an exception thrown,
  // rolls the whole batch back: UNAVAILABLE (a passing failure, as SQLite's
  // busy) holds the batch to be applied again; any other error, or a
  // SQLite::Exception that is not about the store (a constraint, a missing
  // table), dead-letters this message and the others are applied without
  // it. Called once per new message per attempt: after SQLITE_BUSY the
  // transaction starts over and Apply runs again, so keep nothing of it
  // outside `tx`.
  virtual absl::StatusOr<std::string> Apply(SQLite::Database& tx, const Message& message) = 0;

 private:
  absl::StatusOr<std::vector<Applied>> ApplyBatch() final {
    return applier_.ApplyBatch(
        this->entries(),
        {[this](size_t i) { return this->Rejects(this->message(i)); },
         [this](size_t i) { return this->AnswersRejects(this->message(i)); },
         [this](SQLite::Database& tx, size_t i) { return Apply(tx, this->message(i)); }});
  }

  ProcessedLog* processed_log() final { return &inbox_; }

  SqliteProcessedLog inbox_;  // the same table, as the consumer role prunes it
  internal::InboxApplier applier_;
};

// The shortest handler: the deliveries of one message type, each applied by
// a function given the delivery as it came. Its body is the producer's
// payload; its shard_key is the producer's business key (MessageSpec's
// biz_key, signed with the body), kept in the inbox and looked up in
// applied_by_key. A delivery of another type is dead-lettered.
//
//   outbox::SqliteApply shipping(*file, "OrderPlaced", ShipOrder);
class SqliteApply final : public SqliteMessageHandler<Delivery> {
 public:
  using Function =
      std::function<absl::StatusOr<std::string>(SQLite::Database& tx, const Delivery& message)>;

  SqliteApply(SqliteFile& file, std::string type, Function apply, SqliteHandlerOptions options = {},
              const Clock& clock = SystemClock::Get())
      : SqliteMessageHandler(file, clock, std::move(options)),
        type_(std::move(type)),
        apply_(std::move(apply)) {}

  absl::StatusOr<Delivery> Decode(const Delivery& delivery) override {
    if (delivery.type != type_) {
      return absl::InvalidArgumentError("a message of type '" + delivery.type + "', not " + type_);
    }
    return delivery;
  }
  std::string BusinessKey(const Delivery& message) override { return message.shard_key; }
  absl::StatusOr<std::string> Apply(SQLite::Database& tx, const Delivery& message) override {
    return apply_(tx, message);
  }

 private:
  const std::string type_;
  const Function apply_;
};

}  // namespace outbox
