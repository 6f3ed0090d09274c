#include "payment_service/payment_codec.h"

#include <utility>

#include "absl/strings/str_cat.h"
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
  event.set_batch_replies_accepted(true);
  event.set_rejects_accepted(true);
  return event.SerializeAsString();
}

namespace {

absl::StatusOr<Acknowledgement> ToAcknowledgement(const events::v1::PaymentAccounted& event) {
  if (event.message_id().empty()) return absl::InvalidArgumentError("message_id is empty");
  Acknowledgement ack;
  ack.message_id = event.message_id();
  ack.biz_key = event.payment_id();
  ack.duplicate = event.duplicate();
  ack.traceparent = event.traceparent();
  ack.rejected_reason = event.rejected_reason();
  ack.answered_at = event.accounted_at_unix_ms();  // every accounting has sent it
  return ack;
}

}  // namespace

absl::StatusOr<Acknowledgement> DecodePaymentAccounted(const std::string& body) {
  events::v1::PaymentAccounted event;
  if (!event.ParseFromString(body)) {
    return absl::InvalidArgumentError("body is not a PaymentAccounted protobuf");
  }
  return ToAcknowledgement(event);
}

absl::StatusOr<std::vector<Acknowledgement>> DecodePaymentsAccounted(const std::string& body) {
  events::v1::PaymentsAccounted batch;
  if (!batch.ParseFromString(body)) {
    return absl::InvalidArgumentError("body is not a PaymentsAccounted protobuf");
  }
  if (batch.accounted().empty()) return absl::InvalidArgumentError("accounted is empty");
  std::vector<Acknowledgement> acks;
  acks.reserve(static_cast<size_t>(batch.accounted_size()));
  for (const events::v1::PaymentAccounted& event : batch.accounted()) {
    auto ack = ToAcknowledgement(event);
    if (!ack.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("accounted[", acks.size(), "]: ", ack.status().message()));
    }
    acks.push_back(std::move(ack).value());
  }
  return acks;
}

absl::StatusOr<std::vector<Acknowledgement>> DecodeAccountingReply(const Delivery& reply) {
  if (reply.type == kPaymentsAccountedType) return DecodePaymentsAccounted(reply.body);
  auto ack = DecodePaymentAccounted(reply.body);
  if (!ack.ok()) return ack.status();
  return std::vector<Acknowledgement>{std::move(ack).value()};
}

}  // namespace outbox::payment
