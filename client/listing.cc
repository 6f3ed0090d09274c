#include "client/listing.h"

#include "absl/time/clock.h"
#include "client/channel.h"

namespace outbox::client {
namespace {

// Sends `request` with each page's token until the last page; `call` makes
// one gRPC call, `on_page` takes one answer.
template <typename Request, typename Response, typename Call, typename OnPage>
absl::Status ForEachPage(absl::string_view what, absl::Duration call_timeout, Request request,
                         const Call& call, const OnPage& on_page) {
  request.set_page_size(kListPageSize);
  do {
    grpc::ClientContext ctx;
    SetTimeout(&ctx, call_timeout);
    Response response;
    absl::Status s = FromGrpc(call(&ctx, request, &response), what);
    if (!s.ok()) return s;
    on_page(response);
    request.set_page_token(response.next_page_token());
  } while (!request.page_token().empty());
  return absl::OkStatus();
}

}  // namespace

absl::Status ForEachPayment(payment::v1::PaymentService::StubInterface& stub,
                            payment::v1::OutboxStatus status, absl::Duration call_timeout,
                            const std::function<void(const payment::v1::Payment&)>& on_payment) {
  payment::v1::ListPaymentsRequest request;
  request.set_status(status);
  return ForEachPage<payment::v1::ListPaymentsRequest, payment::v1::ListPaymentsResponse>(
      "ListPayments", call_timeout, request,
      [&](grpc::ClientContext* ctx, const auto& req, auto* resp) {
        return stub.ListPayments(ctx, req, resp);
      },
      [&](const payment::v1::ListPaymentsResponse& resp) {
        for (const auto& p : resp.payments()) on_payment(p);
      });
}

absl::Status ForEachVoucher(accounting::v1::AccountingService::StubInterface& stub,
                            absl::Duration call_timeout,
                            const std::function<void(const accounting::v1::Voucher&)>& on_voucher) {
  return ForEachPage<accounting::v1::ListVouchersRequest, accounting::v1::ListVouchersResponse>(
      "ListVouchers", call_timeout, accounting::v1::ListVouchersRequest(),
      [&](grpc::ClientContext* ctx, const auto& req, auto* resp) {
        return stub.ListVouchers(ctx, req, resp);
      },
      [&](const accounting::v1::ListVouchersResponse& resp) {
        for (const auto& v : resp.vouchers()) on_voucher(v);
      });
}

bool AwaitNoneSending(payment::v1::PaymentService::StubInterface& stub,
                      const std::function<bool(const std::string& payment_id)>& of_interest,
                      absl::Time deadline, absl::Duration call_timeout, absl::Duration poll) {
  // Listing only SENDING rows keeps each poll proportional to the backlog,
  // not the table; with every payment of interest, one row answers.
  auto none_sending = [&] {
    if (!of_interest) {
      // Over payment shards (sharded_payment_stub.h) a page may be empty with a
      // token for the next shard: go on until a row or the end.
      payment::v1::ListPaymentsRequest req;
      req.set_page_size(1);
      req.set_status(payment::v1::SENDING);
      do {
        grpc::ClientContext ctx;
        SetTimeout(&ctx, call_timeout);
        payment::v1::ListPaymentsResponse resp;
        if (!stub.ListPayments(&ctx, req, &resp).ok() || resp.payments_size() > 0) return false;
        req.set_page_token(resp.next_page_token());
      } while (!req.page_token().empty());
      return true;
    }
    int64_t sending = 0;
    const absl::Status s = ForEachPayment(
        stub, payment::v1::SENDING, call_timeout,
        [&](const payment::v1::Payment& p) { sending += of_interest(p.payment_id()); });
    return s.ok() && sending == 0;
  };
  while (true) {
    if (none_sending()) return true;
    if (absl::Now() > deadline) return false;
    absl::SleepFor(poll);
  }
}

}  // namespace outbox::client
