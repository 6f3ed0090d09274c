#pragma once

// Queue messages as earlier builds published them (tests/fixtures/messages):
// `<name>.bin` is the body, `<name>.txt` the AMQP properties and headers its
// consumer reads, one `key=value` a line ('#' starts a comment).
#include <string>

#include "absl/status/statusor.h"
#include "shared/outbox/message.h"
#include "shared/outbox/message_auth.h"

namespace outbox::testing {

// The delivery a consumer receives for fixture `name` in `dir`, as the AMQP
// adapter fills it in. INVALID_ARGUMENT for a key it does not know, so a
// typo in a fixture cannot pass unnoticed; NOT_FOUND for a missing file.
absl::StatusOr<Delivery> ReadMessageFixture(const std::string& dir, const std::string& name);

// The test key the fixtures are signed with: `dir`/fixture.keys.
absl::StatusOr<MessageKeys> ReadFixtureKeys(const std::string& dir);

}  // namespace outbox::testing
