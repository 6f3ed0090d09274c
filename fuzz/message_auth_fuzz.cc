// Message keys files and signed deliveries as a consumer checks them: any
// keys file text, any signature header, any message. Input: one length byte
// n, n bytes of keys file, then "<signature>\n<message id>\n<reply_to>\n<body>".
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "fuzz/fuzz_check.h"
#include "shared/outbox/message_auth.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const char* p = reinterpret_cast<const char*>(data) + 1;
  const size_t keys_len = std::min<size_t>(data[0], size - 1);
  auto keys = outbox::MessageKeys::Parse(std::string(p, keys_len));
  if (!keys.ok()) {
    FUZZ_CHECK(keys.status().code() == absl::StatusCode::kInvalidArgument);
    return 0;
  }
  std::vector<std::string> parts =
      absl::StrSplit(std::string(p + keys_len, size - 1 - keys_len), absl::MaxSplits('\n', 3));
  parts.resize(4);
  outbox::Delivery d;
  d.signature = parts[0];
  d.message_id = parts[1];
  d.reply_to = parts[2];
  d.body = parts[3];
  d.type = "PaymentCreated";
  absl::Status verdict = keys->Verify(d);
  // Only two answers: accepted, or unauthenticated (dead-lettered).
  FUZZ_CHECK(verdict.ok() || verdict.code() == absl::StatusCode::kUnauthenticated);
  const std::string good = keys->Sign({"Q", d.message_id, d.body, d.reply_to, d.type, "", ""});
  // What the signing key signs verifies; anything accepted is the signature
  // some held key makes (here: the signing key's, when the ids match).
  if (verdict.ok() && d.signature.rfind(keys->signing_key_id() + ":", 0) == 0) {
    FUZZ_CHECK(d.signature == good);
  }
  d.signature = good;
  FUZZ_CHECK(keys->Verify(d).ok());
  // One changed hex digit is refused.
  d.signature.back() = d.signature.back() == '0' ? '1' : '0';
  FUZZ_CHECK(keys->Verify(d).code() == absl::StatusCode::kUnauthenticated);
  return 0;
}
