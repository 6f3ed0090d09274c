// PAY_QUEUE bodies as accounting decodes them: any bytes, any AMQP message id.
// Input: one length byte n, then n bytes of AMQP message_id, then the body.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "accounting_service/accounting_codec.h"
#include "accounting_service/voucher.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const char* p = reinterpret_cast<const char*>(data) + 1;
  const size_t id_len = std::min<size_t>(data[0], size - 1);
  const std::string amqp_message_id(p, id_len);
  const std::string body(p + id_len, size - 1 - id_len);

  auto event = outbox::accounting::DecodePaymentCreated(body, amqp_message_id);
  if (!event.ok()) {
    // Poison is dead-lettered, so it must be told apart from an outage.
    FUZZ_CHECK(absl::IsInvalidArgument(event.status()));
    return 0;
  }
  // What decodes is valid and carries the message id the broker showed.
  FUZZ_CHECK(outbox::accounting::ValidatePaymentEvent(*event).ok());
  FUZZ_CHECK(amqp_message_id.empty() || amqp_message_id == event->message_id);
  FUZZ_CHECK(event->amount_minor > 0 && event->currency.size() == 3);
  return 0;
}
