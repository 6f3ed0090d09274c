#pragma once

// How a process signs and checks its messages, chosen once and handed to
// each of its roles (shared/roles/): one key set signs what the relay, the
// consumer's replies and recovery send, and checks what the consumer and the
// ack listener receive. A Signing left unset makes every role refuse to
// start: running unsigned is asked for by name, with Signing::Unsigned().
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "shared/outbox/message_auth.h"

namespace outbox {

class Signing {
 public:
  // Not chosen: Required() fails, so a role built with it does not start.
  Signing() = default;

  // Signs with the first key of `keys`, accepts messages signed by any.
  static Signing With(MessageKeys keys);
  // The keys in the file at `path`, one "<key id> <secret>" a line
  // (MessageKeys::Parse). NOT_FOUND when it cannot be read,
  // INVALID_ARGUMENT naming the file when a line is wrong; a file every
  // user may read is accepted with a warning (message_keys_file_too_open).
  static absl::StatusOr<Signing> FromKeyFile(const std::string& path);
  // Messages are sent unsigned and accepted unsigned: anyone who can publish
  // to the broker can forge events and acknowledgements. Only for a broker
  // nobody else can publish to (a test's own node).
  static Signing Unsigned();

  // With() or FromKeyFile(): messages are signed and checked.
  bool signs() const { return keys_ != nullptr; }
  // The keys; null when unsigned or not chosen.
  const MessageKeys* keys() const { return keys_.get(); }
  // OK once the keys or Unsigned() are chosen; FAILED_PRECONDITION naming
  // `role` otherwise.
  absl::Status Required(absl::string_view role) const;
  // For a start line: "key <id>", "unsigned" or "not chosen".
  std::string Describe() const;

 private:
  bool chosen_ = false;
  std::shared_ptr<const MessageKeys> keys_;  // shared: each role's copy holds the same keys
};

}  // namespace outbox
