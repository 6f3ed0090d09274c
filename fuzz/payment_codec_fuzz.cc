// ACC_QUEUE bodies as payment's ack listener decodes them: a reply of its
// own and a batch reply.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "fuzz/fuzz_check.h"
#include "payment_service/payment_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  auto ack = outbox::payment::DecodePaymentAccounted(body);
  if (ack.ok()) {
    FUZZ_CHECK(!ack->message_id.empty());
  } else {
    FUZZ_CHECK(absl::IsInvalidArgument(ack.status()));
  }
  auto acks = outbox::payment::DecodePaymentsAccounted(body);
  if (!acks.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(acks.status()));
    return 0;
  }
  FUZZ_CHECK(!acks->empty());
  for (const auto& a : *acks) FUZZ_CHECK(!a.message_id.empty());
  return 0;
}
