#pragma once

// What a store's message handler (SqliteMessageHandler<M>,
// PgMessageHandler<M>) shares whatever the store: the adopter's virtuals
// over its own message type (Decode, BusinessKey, Rejects, AnswersRejects,
// Replies in the library's reply format), the batch Add keeps, and Answer.
// The store's handler adds Apply on its own transaction, ApplyBatch and
// processed_log; the virtuals are documented on SqliteMessageHandler
// (shared/sqlite/sqlite_message_handler.h).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "shared/base/clock.h"
#include "shared/outbox/consumer_handler.h"
#include "shared/outbox/internal/reply_format.h"
#include "shared/outbox/message.h"

namespace outbox {

namespace internal {

// One message of a batch as the inbox step sees it.
struct InboxEntry {
  std::string message_id;
  std::string key;  // "" = none
};

template <typename Message>
class TypedHandler : public ConsumerHandler {
 public:
  virtual absl::StatusOr<Message> Decode(const Delivery& delivery) = 0;
  virtual std::string BusinessKey(const Message& message) {
    (void)message;
    return "";
  }
  virtual std::string Rejects(const Message& message) {
    (void)message;
    return "";
  }
  virtual bool AnswersRejects(const Message& message) {
    (void)message;
    return true;
  }
  virtual std::vector<Reply> Replies(const std::vector<Answered<Message>>& batch) {
    const int64_t now = clock_.NowMillis();
    std::vector<Reply> replies;
    replies.reserve(batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {
      replies.push_back({DefaultReply(batch[i].reply_to, batch[i].delivery.message_id,
                                      BusinessKey(batch[i].message), batch[i].applied, now),
                         {i}});
    }
    return replies;
  }

 protected:
  explicit TypedHandler(const Clock& clock) : clock_(clock) {}

  // The batch Add kept, in delivery order.
  const std::vector<InboxEntry>& entries() const { return entries_; }
  const Message& message(size_t i) const { return messages_[i]; }
  Message& message(size_t i) { return messages_[i]; }
  const Clock& clock() const { return clock_; }

 private:
  void Clear() final {
    messages_.clear();
    deliveries_.clear();
    entries_.clear();
  }
  absl::Status Add(const Delivery& delivery) final {
    if (delivery.message_id.empty()) {
      return absl::InvalidArgumentError("no message_id: the message cannot be deduplicated");
    }
    absl::StatusOr<Message> m = Decode(delivery);
    if (!m.ok()) return m.status();
    entries_.push_back({delivery.message_id, BusinessKey(*m)});
    messages_.push_back(std::move(m).value());
    deliveries_.push_back(&delivery);
    return absl::OkStatus();
  }
  std::vector<Reply> Answer(const std::vector<Applied>& applied,
                            const std::vector<std::string>& reply_to) final {
    std::vector<Answered<Message>> batch;
    std::vector<size_t> index_of;  // batch[k] is message index_of[k]
    batch.reserve(messages_.size());
    for (size_t i = 0; i < messages_.size(); ++i) {
      if (!applied[i].dead_letter_reason.empty()) continue;  // dead-lettered, not answered
      batch.push_back({messages_[i], *deliveries_[i], applied[i], reply_to[i]});
      index_of.push_back(i);
    }
    std::vector<Reply> replies = Replies(batch);
    for (Reply& r : replies) {
      for (size_t& k : r.answers) k = index_of.at(k);
    }
    return replies;
  }

  const Clock& clock_;
  std::vector<Message> messages_;
  std::vector<const Delivery*> deliveries_;
  std::vector<InboxEntry> entries_;
};

}  // namespace internal
}  // namespace outbox
