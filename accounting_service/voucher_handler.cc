#include "accounting_service/voucher_handler.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "accounting_service/accounting_codec.h"
#include "shared/base/status_macros.h"
#include "shared/observability/internal/trace.h"
#include "shared/observability/log.h"

namespace outbox::accounting {

absl::StatusOr<PaymentEvent> DecodePaymentDelivery(const Delivery& delivery) {
  // The booking rules are applied after the inbox (Rejects), not by the
  // codec: a payment booked before is answered as booked whatever they say.
  ASSIGN_OR_RETURN(PaymentEvent event,
                   DecodePaymentCreated(delivery.body, delivery.message_id, INT64_MAX));
  event.traceparent = delivery.traceparent;
  return event;
}

std::vector<Reply> AccountingReplies(const std::vector<Answered<PaymentEvent>>& batch,
                                     int64_t now) {
  std::vector<Reply> replies;
  // Publishers that accept batch replies: one reply per reply queue, listing
  // every message of theirs in this batch, new and duplicate alike.
  std::map<std::string, size_t> batch_for_queue;         // -> its index in `replies`
  std::map<size_t, std::vector<Accounted>> batch_lists;  // by that index
  for (size_t i = 0; i < batch.size(); ++i) {
    const PaymentEvent& e = batch[i].message;
    const Applied& o = batch[i].applied;
    if (!o.rejected_reason.empty()) {
      LogWarning("payment_rejected",
                 {KV("payment_id", e.payment_id), KV("message_id", e.message_id),
                  KV("reason", o.rejected_reason)});
    } else if (LogEnabled(LogLevel::kDebug)) {
      LogDebug(o.duplicate ? "payment_duplicate" : "voucher_booked",
               {KV("payment_id", e.payment_id), KV("message_id", e.message_id),
                KV("trace_id", TraceIdOf(e.traceparent)), KV("voucher_id", o.reference),
                KV("redelivered", batch[i].delivery.redelivered)});
    }
    // Each reply continues the payment's trace as accounting's span: a
    // reply of its own in its header, a batch reply per message.
    const std::string traceparent =
        e.traceparent.empty() ? "" : ContinueOrStart(e.traceparent).Traceparent();
    if (!e.batch_replies_accepted) {  // an older publisher: a reply of its own
      replies.push_back(
          {{batch[i].reply_to, e.message_id,
            EncodePaymentAccounted(
                {e.message_id, e.payment_id, o.reference, o.duplicate, "", o.rejected_reason}, now),
            "", kPaymentAccountedType, traceparent},
           {i}});
      continue;
    }
    auto [it, first] = batch_for_queue.try_emplace(batch[i].reply_to, replies.size());
    if (first) {
      replies.push_back({{batch[i].reply_to, "", "", "", kPaymentsAccountedType, ""}, {}});
    }
    replies[it->second].answers.push_back(i);
    batch_lists[it->second].push_back(
        {e.message_id, e.payment_id, o.reference, o.duplicate, traceparent, o.rejected_reason});
  }
  for (const auto& [index, list] : batch_lists) {
    // Its id names the first message it answers and how many it does.
    replies[index].message.message_id = absl::StrCat(list.front().message_id, "+", list.size());
    replies[index].message.body = EncodePaymentsAccounted(list, now);
  }
  return replies;
}

}  // namespace outbox::accounting
