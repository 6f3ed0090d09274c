#pragma once

// Authenticated messages. Anyone who can publish to the broker could forge an
// event (a change booked for something that never happened) or an
// acknowledgement (a row marked SENT that was never booked). So every message
// carries an HMAC-SHA256 over what its consumer acts on, keyed by a secret
// the services share and named by a key id so keys can rotate: the
// sender signs with its first key; a receiver accepts any key it holds.
// Consumers check it before anything else and dead-letter what fails.
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "shared/outbox/message.h"
#include "shared/outbox/transport.h"

namespace outbox {

// The AMQP header that carries "<key id>:<64 hex digits>".
inline constexpr char kSignatureHeader[] = "x-outbox-signature";

class MessageKeys {
 public:
  // One key per line, "<key id> <secret>"; blank lines and lines starting
  // with '#' are ignored. Ids are 1-64 of [A-Za-z0-9._-] and unique; a secret
  // has at least 32 bytes (e.g. `openssl rand -hex 32`). The first key signs.
  // INVALID_ARGUMENT says which line is wrong, never showing a secret.
  static absl::StatusOr<MessageKeys> Parse(absl::string_view text);

  const std::string& signing_key_id() const { return keys_.front().id; }
  std::vector<std::string> key_ids() const;

  // The header value for `message`, signed with the first key.
  std::string Sign(const OutgoingMessage& message) const;
  // OK when `delivery` carries a signature, by a key held here, over its
  // message id, type, reply_to, body (its raw bytes, fields this build does
  // not know included) and shard key, when it has one. UNAUTHENTICATED
  // otherwise, saying which (missing, malformed, unknown key id, wrong
  // signature). Compared in constant time.
  absl::Status Verify(const Delivery& delivery) const;

 private:
  struct Mac;  // OpenSSL's keyed HMAC context
  struct Key {
    std::string id;
    std::string secret;
    std::shared_ptr<const Mac> mac;  // shared: MessageKeys stays copyable
  };
  explicit MessageKeys(std::vector<Key> keys);

  std::vector<Key> keys_;  // never empty
};

// A publisher that signs each message before handing it to `inner`; with no
// keys it passes messages through unsigned. Everything else is `inner`'s.
class SigningPublisher final : public MessagePublisher {
 public:
  SigningPublisher(MessagePublisher& inner, const MessageKeys* keys) : inner_(inner), keys_(keys) {}

  absl::StatusOr<uint64_t> Publish(const OutgoingMessage& message) override;
  absl::Status ReadConfirms(absl::Duration wait, std::vector<Confirm>* settled) override {
    return inner_.ReadConfirms(wait, settled);
  }
  absl::StatusOr<QueueState> Inspect(const std::string& queue) override {
    return inner_.Inspect(queue);
  }
  absl::Status Connect() override { return inner_.Connect(); }
  bool connected() const override { return inner_.connected(); }
  void Reset(const absl::Status& why) override { inner_.Reset(why); }
  absl::Status Poll(absl::Duration wait) override { return inner_.Poll(wait); }
  bool up() const override { return inner_.up(); }
  int64_t drops() const override { return inner_.drops(); }

 private:
  MessagePublisher& inner_;
  const MessageKeys* keys_;
};

// What a consumer checks first: with keys, the delivery's signature (see
// MessageKeys::Verify); without keys (unsigned messages allowed) always OK.
absl::Status CheckSignature(const MessageKeys* keys, const Delivery& delivery);

}  // namespace outbox
