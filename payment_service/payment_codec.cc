#include "payment_service/payment_codec.h"

#include "events/v1/events.pb.h"

namespace outbox::payment {

std::string EncodePaymentCreated(const std::string& message_id, const std::string& payment_id,
                                 const PaymentInput& input, int64_t created_at_ms) {
  events::v1::PaymentCreated event;
  event.set_message_id(message_id);
  event.set_payment_id(payment_id);
  event.set_payer_account(input.payer_account);
  event.set_payee_account(input.payee_account);
  event.set_amount_minor(input.amount_minor);
  event.set_currency(input.currency);
  event.set_description(input.description);
  event.set_created_at_unix_ms(created_at_ms);
  return event.SerializeAsString();
}

absl::StatusOr<Acknowledgement> DecodePaymentAccounted(const std::string& body) {
  events::v1::PaymentAccounted event;
  if (!event.ParseFromString(body)) {
    return absl::InvalidArgumentError("body is not a PaymentAccounted protobuf");
  }
  if (event.message_id().empty()) return absl::InvalidArgumentError("message_id is empty");
  Acknowledgement ack;
  ack.message_id = event.message_id();
  ack.biz_key = event.payment_id();
  ack.duplicate = event.duplicate();
  return ack;
}

}  // namespace outbox::payment
