#include "recovery_service/ops_grpc.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "service_kit/grpc/grpc_status.h"
#include "service_kit/grpc/paging.h"
#include "service_kit/grpc/proto_convert.h"
#include "shared/observability/log.h"
#include "shared/observability/trace.h"

namespace outbox::recovery {
namespace {

void ToProto(const OutboxMessage& r, ::ops::v1::OutboxMessage* out) {
  out->set_id(r.id);
  out->set_message_id(r.message_id);
  out->set_biz_type(r.biz_type);
  out->set_biz_key(r.biz_key);
  out->set_topic(r.topic);
  out->set_payload(r.payload);
  out->set_status(OutboxStatusToProto<::ops::v1::MessageStatus>(r.status));
  out->set_attempts(r.attempts);
  out->set_max_attempts(r.max_attempts);
  SetTimestamp(r.next_retry_at, out->mutable_next_retry_at());
  if (r.last_attempt_at > 0) SetTimestamp(r.last_attempt_at, out->mutable_last_attempt_at());
  out->set_last_error(r.last_error);
  SetTimestamp(r.created_at, out->mutable_created_at());
  SetTimestamp(r.updated_at, out->mutable_updated_at());
  if (r.sent_at > 0) SetTimestamp(r.sent_at, out->mutable_sent_at());
  out->set_traceparent(r.traceparent);
  out->set_trace_id(TraceIdOf(r.traceparent));
  out->set_message_type(r.message_type);
  out->set_reply_to(r.reply_to);
}

}  // namespace

grpc::Status OutboxOpsImpl::ListMessages(grpc::ServerContext* context,
                                         const ::ops::v1::ListMessagesRequest* req,
                                         ::ops::v1::ListMessagesResponse* resp) {
  if (grpc::Status denied = auth_.Check(*context); !denied.ok()) return denied;
  auto status = OutboxStatusFromNumber(req->status());
  if (!status.ok() || !status->has_value()) {
    return ToGrpcStatus(absl::InvalidArgumentError("status is required: SENDING, SENT or FAILED"));
  }
  auto paging = ParsePageRequest(req->page_size(), req->page_token());
  if (!paging.ok()) return ToGrpcStatus(paging.status());
  auto page = store_.List(**status, paging->after_id, paging->limit);
  if (!page.ok()) return ToGrpcStatus(page.status());
  for (const OutboxMessage& r : page->items) ToProto(r, resp->add_messages());
  resp->set_next_page_token(NextPageToken(page->next_cursor));
  return grpc::Status::OK;
}

grpc::Status OutboxOpsImpl::GetMessage(grpc::ServerContext* context,
                                       const ::ops::v1::GetMessageRequest* req,
                                       ::ops::v1::OutboxMessage* resp) {
  if (grpc::Status denied = auth_.Check(*context); !denied.ok()) return denied;
  if (req->message_id().empty())
    return ToGrpcStatus(absl::InvalidArgumentError("message_id is required"));
  auto row = store_.Get(req->message_id());
  if (!row.ok()) return ToGrpcStatus(row.status());
  ToProto(*row, resp);
  return grpc::Status::OK;
}

grpc::Status OutboxOpsImpl::RedriveMessage(grpc::ServerContext* context,
                                           const ::ops::v1::RedriveMessageRequest* req,
                                           ::ops::v1::OutboxMessage* resp) {
  if (grpc::Status denied = auth_.Check(*context); !denied.ok()) return denied;
  if (req->message_id().empty())
    return ToGrpcStatus(absl::InvalidArgumentError("message_id is required"));
  auto row = store_.Redrive(req->message_id(), clock_.NowMillis());
  if (!row.ok()) return ToGrpcStatus(row.status());
  LogInfo("message_redriven", {KV("message_id", req->message_id())});
  ToProto(*row, resp);
  return grpc::Status::OK;
}

grpc::Status OutboxOpsImpl::RedriveFailed(grpc::ServerContext* context,
                                          const ::ops::v1::RedriveFailedRequest* req,
                                          ::ops::v1::RedriveFailedResponse* resp) {
  if (grpc::Status denied = auth_.Check(*context); !denied.ok()) return denied;
  auto n = store_.RedriveAllFailed(req->dry_run(), clock_.NowMillis());
  if (!n.ok()) return ToGrpcStatus(n.status());
  if (!req->dry_run()) LogInfo("failed_messages_redriven", {KV("messages", *n)});
  resp->set_count(*n);
  resp->set_dry_run(req->dry_run());
  return grpc::Status::OK;
}

grpc::Status OutboxOpsImpl::GetStats(grpc::ServerContext* context,
                                     const ::ops::v1::GetStatsRequest*, ::ops::v1::Stats* resp) {
  if (grpc::Status denied = auth_.Check(*context); !denied.ok()) return denied;
  auto counts = store_.Counts();
  if (!counts.ok()) return ToGrpcStatus(counts.status());
  resp->set_sending(counts->sending);
  resp->set_sent(counts->sent);
  resp->set_failed(counts->failed);
  if (counts->oldest_sending_created_at > 0) {
    resp->set_oldest_sending_age_seconds(
        std::max<double>(0, (clock_.NowMillis() - counts->oldest_sending_created_at) / 1000.0));
  }
  resp->set_lease_held(worker_.lease_held());
  auto lease = store_.Lease();
  if (lease.ok() && lease->expires_at > clock_.NowMillis()) resp->set_lease_holder(lease->holder);
  resp->set_republished_total(worker_.republished());
  resp->set_publish_failures_total(worker_.publish_failures());
  resp->set_failed_total(worker_.failed());
  resp->set_alerts_sent_total(alerter_.delivered());
  resp->set_archived_total(counts->archived);
  resp->set_delivery_hold(DeliveryHoldName(worker_.hold()));
  const QueueState queue = worker_.last_queue();
  resp->set_pay_queue_ready(queue.ready);
  resp->set_pay_queue_consumers(queue.consumers);
  resp->set_deferred_total(worker_.deferred());
  resp->set_alerts_active(worker_.active_alerts());
  resp->set_alerts_resolved_total(alerter_.resolved());
  return grpc::Status::OK;
}

grpc::Status OutboxOpsImpl::ListDeadLetters(grpc::ServerContext* context,
                                            const ::ops::v1::ListDeadLettersRequest* req,
                                            ::ops::v1::ListDeadLettersResponse* resp) {
  if (grpc::Status denied = auth_.Check(*context); !denied.ok()) return denied;
  if (req->limit() < 0)
    return ToGrpcStatus(absl::InvalidArgumentError("limit must not be negative"));
  auto peek = dead_letters_.Peek(
      req->queue(), req->limit() == 0 ? kDefaultPageSize : std::min(req->limit(), kMaxPageSize));
  if (!peek.ok()) return ToGrpcStatus(peek.status());
  for (const Delivery& d : peek->messages) {
    auto* m = resp->add_messages();
    m->set_message_id(d.message_id);
    m->set_body(d.body);
    m->set_type(d.type);
  }
  resp->set_total(peek->total);
  return grpc::Status::OK;
}

grpc::Status OutboxOpsImpl::RedriveDeadLetters(grpc::ServerContext* context,
                                               const ::ops::v1::RedriveDeadLettersRequest* req,
                                               ::ops::v1::RedriveDeadLettersResponse* resp) {
  if (grpc::Status denied = auth_.Check(*context); !denied.ok()) return denied;
  if (req->limit() < 0)
    return ToGrpcStatus(absl::InvalidArgumentError("limit must not be negative"));
  auto n = dead_letters_.Redrive(req->queue(), req->limit());
  if (!n.ok()) return ToGrpcStatus(n.status());
  resp->set_count(*n);
  return grpc::Status::OK;
}

}  // namespace outbox::recovery
