#include "accounting_service/accounting_codec.h"

#include "absl/strings/str_cat.h"
#include "events/v1/events.pb.h"

namespace outbox::accounting {

absl::StatusOr<PaymentEvent> DecodePaymentCreated(const std::string& body,
                                                  const std::string& amqp_message_id,
                                                  int64_t max_amount_minor) {
  events::v1::PaymentCreated msg;
  if (!msg.ParseFromString(body)) {
    return absl::InvalidArgumentError("body is not a PaymentCreated protobuf");
  }
  PaymentEvent e;
  e.message_id = msg.message_id();
  e.payment_id = msg.payment_id();
  e.payer_account = msg.payer_account();
  e.payee_account = msg.payee_account();
  e.amount_minor = msg.amount_minor();
  e.currency = msg.currency();
  e.batch_replies_accepted = msg.batch_replies_accepted();
  e.rejects_accepted = msg.rejects_accepted();
  absl::Status s = ValidatePaymentEvent(e, max_amount_minor);
  if (!s.ok()) return s;
  if (!amqp_message_id.empty() && amqp_message_id != e.message_id) {
    return absl::InvalidArgumentError(absl::StrCat(
        "AMQP message_id '", amqp_message_id, "' differs from the body's '", e.message_id, "'"));
  }
  return e;
}

namespace {

void Fill(const Accounted& a, int64_t accounted_at_ms, events::v1::PaymentAccounted* msg) {
  msg->set_message_id(a.message_id);
  msg->set_payment_id(a.payment_id);
  msg->set_voucher_id(a.voucher_id);
  msg->set_duplicate(a.duplicate);
  msg->set_accounted_at_unix_ms(accounted_at_ms);
  msg->set_traceparent(a.traceparent);
  msg->set_rejected_reason(a.rejected_reason);
}

}  // namespace

std::string EncodePaymentAccounted(const std::string& message_id, const std::string& payment_id,
                                   const std::string& voucher_id, bool duplicate,
                                   int64_t accounted_at_ms) {
  return EncodePaymentAccounted({message_id, payment_id, voucher_id, duplicate}, accounted_at_ms);
}

std::string EncodePaymentAccounted(const Accounted& accounted, int64_t accounted_at_ms) {
  events::v1::PaymentAccounted msg;
  Fill(accounted, accounted_at_ms, &msg);
  return msg.SerializeAsString();
}

std::string EncodePaymentsAccounted(const std::vector<Accounted>& accounted,
                                    int64_t accounted_at_ms) {
  events::v1::PaymentsAccounted msg;
  for (const Accounted& a : accounted) Fill(a, accounted_at_ms, msg.add_accounted());
  return msg.SerializeAsString();
}

}  // namespace outbox::accounting
