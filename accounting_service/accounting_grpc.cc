#include "accounting_service/accounting_grpc.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/time_util.h"
#include "service_kit/grpc/grpc_status.h"
#include "service_kit/grpc/paging.h"
#include "shared/observability/internal/trace.h"

namespace outbox::accounting {
namespace {

void ToProto(const Voucher& v, ::accounting::v1::Voucher* out) {
  out->set_voucher_id(v.voucher_id);
  out->set_payment_id(v.payment_id);
  out->set_message_id(v.message_id);
  out->set_debit_account(v.debit_account);
  out->set_credit_account(v.credit_account);
  out->set_amount_minor(v.amount_minor);
  out->set_currency(v.currency);
  *out->mutable_created_at() =
      google::protobuf::util::TimeUtil::MillisecondsToTimestamp(v.created_at);
  out->set_trace_id(TraceIdOf(v.traceparent));
}

}  // namespace

grpc::Status AccountingServiceImpl::GetVoucher(grpc::ServerContext* context,
                                               const ::accounting::v1::GetVoucherRequest* req,
                                               ::accounting::v1::Voucher* resp) {
  if (req->payment_id().empty()) {
    return ToGrpcStatus(absl::InvalidArgumentError("payment_id is required"));
  }
  auto v = store_.GetByPayment(req->payment_id());
  if (!v.ok()) return ToGrpcStatus(v.status());
  ToProto(*v, resp);
  return grpc::Status::OK;
}

grpc::Status AccountingServiceImpl::ListVouchers(grpc::ServerContext* context,
                                                 const ::accounting::v1::ListVouchersRequest* req,
                                                 ::accounting::v1::ListVouchersResponse* resp) {
  auto paging = ParsePageRequest(req->page_size(), req->page_token());
  if (!paging.ok()) return ToGrpcStatus(paging.status());
  auto page = store_.List(paging->after_id, paging->limit);
  if (!page.ok()) return ToGrpcStatus(page.status());
  for (const Voucher& v : page->items) ToProto(v, resp->add_vouchers());
  resp->set_next_page_token(NextPageToken(page->next_cursor));
  return grpc::Status::OK;
}

}  // namespace outbox::accounting
