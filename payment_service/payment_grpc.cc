#include "payment_service/payment_grpc.h"

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "service_kit/grpc/grpc_status.h"
#include "service_kit/grpc/paging.h"
#include "service_kit/grpc/proto_convert.h"
#include "shared/observability/internal/trace.h"
#include "shared/observability/log.h"

namespace outbox::payment {

void ToProto(const PaymentRecord& r, ::payment::v1::Payment* out) {
  out->set_payment_id(r.payment_id);
  out->set_idempotency_key(r.input.idempotency_key);
  out->set_payer_account(r.input.payer_account);
  out->set_payee_account(r.input.payee_account);
  out->set_amount_minor(r.input.amount_minor);
  out->set_currency(r.input.currency);
  out->set_description(r.input.description);
  SetTimestamp(r.created_at, out->mutable_created_at());
  ::payment::v1::OutboxMessage* o = out->mutable_outbox();
  o->set_message_id(r.outbox.message_id);
  o->set_status(OutboxStatusToProto<::payment::v1::OutboxStatus>(r.outbox.status));
  o->set_attempts(r.outbox.attempts);
  o->set_max_attempts(r.outbox.max_attempts);
  o->set_last_error(r.outbox.last_error);
  o->set_trace_id(TraceIdOf(r.outbox.traceparent));
  if (r.outbox.status == OutboxStatus::kSending)
    SetTimestamp(r.outbox.next_retry_at, o->mutable_next_retry_at());
  if (r.outbox.sent_at > 0) SetTimestamp(r.outbox.sent_at, o->mutable_sent_at());
  if (r.outbox.last_attempt_at > 0)
    SetTimestamp(r.outbox.last_attempt_at, o->mutable_last_attempt_at());
}

namespace {

// The reply to a committed (or refused) CreatePayment.
grpc::Status FinishCreate(const CreateOutcome& outcome, grpc::CallbackServerContext* context,
                          const ::payment::v1::CreatePaymentRequest* req,
                          ::payment::v1::CreatePaymentResponse* resp) {
  if (!outcome.status.ok()) {
    if (!absl::IsAlreadyExists(outcome.status)) {
      LogError("create_payment_failed", {KV("idempotency_key", req->idempotency_key()),
                                         KV("error", outcome.status.message())});
    }
    return ToGrpcStatus(outcome.status);
  }
  ToProto(outcome.record, resp->mutable_payment());
  resp->set_replayed(outcome.replayed);
  // The trace the payment belongs to (a replay: the first request's).
  if (!outcome.record.outbox.traceparent.empty()) {
    context->AddInitialMetadata(kTraceparentHeader, outcome.record.outbox.traceparent);
  }
  return grpc::Status::OK;
}

}  // namespace

grpc::ServerUnaryReactor* PaymentServiceImpl::CreatePayment(
    grpc::CallbackServerContext* context, const ::payment::v1::CreatePaymentRequest* req,
    ::payment::v1::CreatePaymentResponse* resp) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (grpc::Status elsewhere = shard_.CheckKey(*context, req->idempotency_key()); !elsewhere.ok()) {
    reactor->Finish(elsewhere);
    return reactor;
  }
  PaymentInput input;
  input.idempotency_key = req->idempotency_key();
  input.payer_account = req->payer_account();
  input.payee_account = req->payee_account();
  input.amount_minor = req->amount_minor();
  input.currency = req->currency();
  input.description = req->description();
  absl::Status valid = ValidatePaymentInput(input, max_amount_minor_);
  if (!valid.ok()) {
    reactor->Finish(ToGrpcStatus(valid));
    return reactor;
  }

  // The caller's trace continues here (or starts here): payment_service's
  // span, stored with the outbox row and sent with its message.
  std::string incoming;
  auto header = context->client_metadata().find(kTraceparentHeader);
  if (header != context->client_metadata().end()) {
    incoming.assign(header->second.data(), header->second.size());
  }
  std::string traceparent = ContinueOrStart(incoming).Traceparent();
  // The context, the request, the response and the reactor live until
  // Finish: the producer's writer thread fills the reply after the commit (cheap:
  // Finish only starts sending it).
  creator_.CreateAsync(std::move(input), std::move(traceparent),
                       [context, req, resp, reactor](CreateOutcome outcome) {
                         reactor->Finish(FinishCreate(outcome, context, req, resp));
                       });
  return reactor;
}

grpc::Status PaymentServiceImpl::GetPayment(grpc::ServerContext* context,
                                            const ::payment::v1::GetPaymentRequest* req,
                                            ::payment::v1::Payment* resp) {
  if (req->payment_id().empty()) {
    return ToGrpcStatus(absl::InvalidArgumentError("payment_id is required"));
  }
  if (grpc::Status elsewhere = shard_.CheckPaymentId(*context, req->payment_id());
      !elsewhere.ok()) {
    return elsewhere;
  }
  auto record = store_.Get(req->payment_id());
  if (!record.ok()) return ToGrpcStatus(record.status());
  ToProto(*record, resp);
  return grpc::Status::OK;
}

grpc::Status PaymentServiceImpl::ListPayments(grpc::ServerContext* context,
                                              const ::payment::v1::ListPaymentsRequest* req,
                                              ::payment::v1::ListPaymentsResponse* resp) {
  auto paging = ParsePageRequest(req->page_size(), req->page_token());
  if (!paging.ok()) return ToGrpcStatus(paging.status());
  auto status = OutboxStatusFromNumber(req->status());
  if (!status.ok()) return ToGrpcStatus(status.status());
  auto page = store_.List(*status, paging->after_id, paging->limit);
  if (!page.ok()) return ToGrpcStatus(page.status());
  for (const PaymentRecord& r : page->items) ToProto(r, resp->add_payments());
  resp->set_next_page_token(NextPageToken(page->next_cursor));
  return grpc::Status::OK;
}

}  // namespace outbox::payment
