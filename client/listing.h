#pragma once

// Reading back what a load created: every payment or voucher, page by page,
// and the wait until the outbox has nothing left SENDING.
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "accounting/v1/accounting.grpc.pb.h"
#include "payment/v1/payment.grpc.pb.h"

namespace outbox::client {

inline constexpr int kListPageSize = 1000;  // the services' largest page

// Every payment with outbox `status` (OUTBOX_STATUS_UNSPECIFIED: any), in
// pages of kListPageSize; the first failed page ends it with
// "ListPayments: <message>".
absl::Status ForEachPayment(payment::v1::PaymentService::StubInterface& stub,
                            payment::v1::OutboxStatus status, absl::Duration call_timeout,
                            const std::function<void(const payment::v1::Payment&)>& on_payment);

// Every voucher, the same way ("ListVouchers: <message>").
absl::Status ForEachVoucher(accounting::v1::AccountingService::StubInterface& stub,
                            absl::Duration call_timeout,
                            const std::function<void(const accounting::v1::Voucher&)>& on_voucher);

// Polls every `poll` until no SENDING payment is of interest (`of_interest`
// null: every payment is) or `deadline` passes; true if that was seen. A
// failed listing counts as not yet (the service may be restarting).
bool AwaitNoneSending(payment::v1::PaymentService::StubInterface& stub,
                      const std::function<bool(const std::string& payment_id)>& of_interest,
                      absl::Time deadline, absl::Duration call_timeout,
                      absl::Duration poll = absl::Milliseconds(200));

}  // namespace outbox::client
