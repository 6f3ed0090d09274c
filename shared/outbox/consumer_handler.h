#pragma once

// What the idempotent consumer (idempotent_consumer.h) drives for each
// batch: the type-erased handler, and what it reports. The library's
// SqliteMessageHandler<M> (shared/sqlite/sqlite_message_handler.h) and
// PgMessageHandler<M> (shared/postgres/pg_message_handler.h) implement it
// over the adopter's decode, apply-one-message and answer, and own the
// inbox step and the transaction. A handler for another store
// implements ConsumerHandler itself, and with it the inbox step: it must
// pass the same tests.
#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "shared/outbox/message.h"

namespace outbox {

class ProcessedLog;  // repository.h

// What the handler did with one message of a batch.
struct Applied {
  // True: applied before (its id, or its business key, is known); nothing
  // new was written and `reference` names what the first copy made.
  bool duplicate = false;
  std::string reference;  // the adopter's id of what it made (a shipment, an invoice)
  // Not empty: a business reject (Rejects); nothing was written for the
  // message. Its reply must say so, with this reason.
  std::string rejected_reason;
  // Not empty: refused by Rejects, new, and its publisher does not
  // understand business rejects (AnswersRejects): the delivery is
  // dead-lettered with this reason instead of answered.
  std::string dead_letter_reason;
};

// A table of the adopter's that names, by business key, what applying a
// message made, and is kept as long as that (accounting: vouchers by
// payment_id): the handlers' applied_by_key (SqliteHandlerOptions,
// PgHandlerOptions). A message id the inbox does not know whose key is
// found here was applied before: under another message id, or before its id
// was pruned from the inbox. Looked up once per new message: key_column
// should be UNIQUE.
struct AppliedByKey {
  std::string table;             // e.g. "shipments"
  std::string key_column;        // the business key, e.g. "order_id"
  std::string reference_column;  // what the reply names, e.g. "shipment_id"
};

// One reply and the messages of the batch it answers (their indexes).
struct Reply {
  OutgoingMessage message;  // its topic is the reply queue
  std::vector<size_t> answers;
};

// One message of an applied batch, as Replies sees it.
template <typename Message>
struct Answered {
  const Message& message;
  const Delivery& delivery;
  const Applied& applied;
  const std::string& reply_to;
};

// The side of a handler the consumer drives, one batch at a time.
class ConsumerHandler {
 public:
  virtual ~ConsumerHandler() = default;
  // A new batch: forget the last one's messages.
  virtual void Clear() = 0;
  // Decodes and checks one delivery (its signature is checked already) and
  // keeps it as the batch's next message; `delivery` outlives the batch. An
  // error keeps nothing: the delivery is dead-lettered with the error's
  // message as the reason.
  virtual absl::Status Add(const Delivery& delivery) = 0;
  // Applies what Add kept, in one transaction: one Applied each, in order.
  // A message applied before changes nothing and is reported as a
  // duplicate. An error means nothing was applied. One that says the store
  // cannot write (StoreUnavailable, dead_letter.h) holds the batch until it
  // can; any other error has the consumer apply the messages one at a time
  // (Clear, Add and ApplyBatch each) and dead-letter the one refused.
  virtual absl::StatusOr<std::vector<Applied>> ApplyBatch() = 0;
  // The replies to the applied batch; `reply_to[i]` is where message i's
  // reply goes (its delivery's reply_to, or the consumer's default). A
  // message with a dead_letter_reason is not answered: the consumer uses
  // that to ask for one message's reply alone.
  virtual std::vector<Reply> Answer(const std::vector<Applied>& applied,
                                    const std::vector<std::string>& reply_to) = 0;
  // The inbox of the processed ids, which the consumer role prunes by age
  // (Consumer::Options::inbox_retention); null: the handler keeps its ids
  // itself, and prunes them itself.
  virtual ProcessedLog* processed_log() { return nullptr; }
};

}  // namespace outbox
