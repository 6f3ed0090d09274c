#include "tools/outboxctl/calls.h"

#include <algorithm>

#include "absl/time/clock.h"
#include "service_kit/grpc/grpc_status.h"

namespace outbox::ctl {
namespace {

void SetDeadline(grpc::ClientContext& ctx, absl::Duration timeout) {
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
}

// One unary call: a fresh context with the deadline, the status converted.
template <typename Stub, typename Request, typename Response, typename Method>
absl::StatusOr<Response> Call(Stub& stub, Method method, const Request& request,
                              absl::Duration timeout) {
  grpc::ClientContext ctx;
  SetDeadline(ctx, timeout);
  Response response;
  const grpc::Status status = (stub.*method)(&ctx, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

}  // namespace

absl::StatusOr<::ops::v1::Stats> GetStats(OpsStub& ops, absl::Duration timeout) {
  return Call<OpsStub, ::ops::v1::GetStatsRequest, ::ops::v1::Stats>(ops, &OpsStub::GetStats, {},
                                                                     timeout);
}

absl::StatusOr<::ops::v1::ListMessagesResponse> ListMessages(OpsStub& ops,
                                                             ::ops::v1::MessageStatus status,
                                                             int limit, int page_size,
                                                             absl::Duration timeout) {
  ::ops::v1::ListMessagesResponse all;
  ::ops::v1::ListMessagesRequest request;
  request.set_status(status);
  while (all.messages_size() < limit) {
    request.set_page_size(std::min(page_size, limit - all.messages_size()));
    auto page = Call<OpsStub, ::ops::v1::ListMessagesRequest, ::ops::v1::ListMessagesResponse>(
        ops, &OpsStub::ListMessages, request, timeout);
    if (!page.ok()) return page.status();
    for (auto& m : *page->mutable_messages()) *all.add_messages() = std::move(m);
    all.set_next_page_token(page->next_page_token());
    if (page->next_page_token().empty() || page->messages().empty()) break;
    request.set_page_token(page->next_page_token());
  }
  return all;
}

absl::StatusOr<::ops::v1::OutboxMessage> GetMessage(OpsStub& ops, const std::string& message_id,
                                                    absl::Duration timeout) {
  ::ops::v1::GetMessageRequest request;
  request.set_message_id(message_id);
  return Call<OpsStub, ::ops::v1::GetMessageRequest, ::ops::v1::OutboxMessage>(
      ops, &OpsStub::GetMessage, request, timeout);
}

absl::StatusOr<::ops::v1::OutboxMessage> RedriveMessage(OpsStub& ops, const std::string& message_id,
                                                        const std::string& reason,
                                                        absl::Duration timeout) {
  ::ops::v1::RedriveMessageRequest request;
  request.set_message_id(message_id);
  request.set_reason(reason);
  return Call<OpsStub, ::ops::v1::RedriveMessageRequest, ::ops::v1::OutboxMessage>(
      ops, &OpsStub::RedriveMessage, request, timeout);
}

absl::StatusOr<::ops::v1::RedriveFailedResponse> RedriveFailed(
    OpsStub& ops, bool dry_run, const std::string& group, bool include_rejected_and_acknowledged,
    const std::string& reason, absl::Duration timeout) {
  ::ops::v1::RedriveFailedRequest request;
  request.set_dry_run(dry_run);
  request.set_group(group);
  request.set_include_rejected_and_acknowledged(include_rejected_and_acknowledged);
  request.set_reason(reason);
  return Call<OpsStub, ::ops::v1::RedriveFailedRequest, ::ops::v1::RedriveFailedResponse>(
      ops, &OpsStub::RedriveFailed, request, timeout);
}

absl::StatusOr<::ops::v1::ListFailureGroupsResponse> ListFailureGroups(OpsStub& ops,
                                                                       const std::string& kind,
                                                                       int limit,
                                                                       absl::Duration timeout) {
  ::ops::v1::ListFailureGroupsRequest request;
  request.set_kind(kind);
  request.set_limit(limit);
  return Call<OpsStub, ::ops::v1::ListFailureGroupsRequest, ::ops::v1::ListFailureGroupsResponse>(
      ops, &OpsStub::ListFailureGroups, request, timeout);
}

absl::StatusOr<::ops::v1::AcknowledgeFailureResponse> AcknowledgeFailure(
    OpsStub& ops, const std::string& message_id, const std::string& group, bool dry_run,
    const std::string& reason, absl::Duration timeout) {
  ::ops::v1::AcknowledgeFailureRequest request;
  request.set_message_id(message_id);
  request.set_group(group);
  request.set_dry_run(dry_run);
  request.set_reason(reason);
  return Call<OpsStub, ::ops::v1::AcknowledgeFailureRequest, ::ops::v1::AcknowledgeFailureResponse>(
      ops, &OpsStub::AcknowledgeFailure, request, timeout);
}

absl::StatusOr<::ops::v1::History> GetHistory(OpsStub& ops, const std::string& id,
                                              absl::Duration timeout) {
  ::ops::v1::GetHistoryRequest request;
  request.set_id(id);
  return Call<OpsStub, ::ops::v1::GetHistoryRequest, ::ops::v1::History>(ops, &OpsStub::GetHistory,
                                                                         request, timeout);
}

absl::StatusOr<::ops::v1::ListAuditResponse> ListAudit(OpsStub& ops, int limit,
                                                       absl::Duration timeout) {
  ::ops::v1::ListAuditRequest request;
  request.set_page_size(limit);
  return Call<OpsStub, ::ops::v1::ListAuditRequest, ::ops::v1::ListAuditResponse>(
      ops, &OpsStub::ListAudit, request, timeout);
}

absl::StatusOr<::ops::v1::RetryPolicy> GetRetryPolicy(OpsStub& ops, absl::Duration timeout) {
  return Call<OpsStub, ::ops::v1::GetRetryPolicyRequest, ::ops::v1::RetryPolicy>(
      ops, &OpsStub::GetRetryPolicy, {}, timeout);
}

absl::StatusOr<::ops::v1::ListDeadLettersResponse> ListDeadLetters(OpsStub& ops,
                                                                   const std::string& queue,
                                                                   int limit,
                                                                   absl::Duration timeout) {
  ::ops::v1::ListDeadLettersRequest request;
  request.set_queue(queue);
  request.set_limit(limit);
  return Call<OpsStub, ::ops::v1::ListDeadLettersRequest, ::ops::v1::ListDeadLettersResponse>(
      ops, &OpsStub::ListDeadLetters, request, timeout);
}

absl::StatusOr<::ops::v1::RedriveDeadLettersResponse> RedriveDeadLetters(OpsStub& ops,
                                                                         const std::string& queue,
                                                                         int limit,
                                                                         const std::string& reason,
                                                                         absl::Duration timeout) {
  ::ops::v1::RedriveDeadLettersRequest request;
  request.set_queue(queue);
  request.set_limit(limit);
  request.set_reason(reason);
  return Call<OpsStub, ::ops::v1::RedriveDeadLettersRequest, ::ops::v1::RedriveDeadLettersResponse>(
      ops, &OpsStub::RedriveDeadLetters, request, timeout);
}

absl::StatusOr<::payment::v1::Payment> GetPayment(
    ::payment::v1::PaymentService::StubInterface& payments, const std::string& payment_id,
    absl::Duration timeout) {
  using Stub = ::payment::v1::PaymentService::StubInterface;
  ::payment::v1::GetPaymentRequest request;
  request.set_payment_id(payment_id);
  return Call<Stub, ::payment::v1::GetPaymentRequest, ::payment::v1::Payment>(
      payments, &Stub::GetPayment, request, timeout);
}

absl::StatusOr<::payment::v1::CreatePaymentResponse> CreatePayment(
    ::payment::v1::PaymentService::StubInterface& payments, const NewPayment& payment,
    absl::Duration timeout) {
  using Stub = ::payment::v1::PaymentService::StubInterface;
  ::payment::v1::CreatePaymentRequest request;
  request.set_idempotency_key(payment.idempotency_key);
  request.set_payer_account(payment.payer);
  request.set_payee_account(payment.payee);
  request.set_amount_minor(payment.amount_minor);
  request.set_currency(payment.currency);
  request.set_description(payment.description);
  return Call<Stub, ::payment::v1::CreatePaymentRequest, ::payment::v1::CreatePaymentResponse>(
      payments, &Stub::CreatePayment, request, timeout);
}

absl::StatusOr<::accounting::v1::Voucher> GetVoucher(
    ::accounting::v1::AccountingService::StubInterface& accounting, const std::string& payment_id,
    absl::Duration timeout) {
  using Stub = ::accounting::v1::AccountingService::StubInterface;
  ::accounting::v1::GetVoucherRequest request;
  request.set_payment_id(payment_id);
  return Call<Stub, ::accounting::v1::GetVoucherRequest, ::accounting::v1::Voucher>(
      accounting, &Stub::GetVoucher, request, timeout);
}

absl::StatusOr<::grpc::health::v1::HealthCheckResponse> CheckHealth(
    ::grpc::health::v1::Health::StubInterface& health, absl::Duration timeout) {
  using Stub = ::grpc::health::v1::Health::StubInterface;
  return Call<Stub, ::grpc::health::v1::HealthCheckRequest,
              ::grpc::health::v1::HealthCheckResponse>(health, &Stub::Check, {}, timeout);
}

}  // namespace outbox::ctl
