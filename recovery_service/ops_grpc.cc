#include "recovery_service/ops_grpc.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "service_kit/grpc/grpc_status.h"
#include "service_kit/grpc/paging.h"
#include "service_kit/grpc/proto_convert.h"
#include "shared/observability/internal/trace.h"
#include "shared/observability/log.h"
#include "shared/outbox/internal/failure.h"

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
  out->set_failure_kind(r.failure_kind);
  out->set_failure_group(r.failure_group);
  out->set_acknowledged_by(r.acknowledged_by);
}

void SetDuration(absl::Duration d, google::protobuf::Duration* out) {
  const int64_t ns = absl::ToInt64Nanoseconds(d);
  out->set_seconds(ns / 1000000000);
  out->set_nanos(static_cast<int32_t>(ns % 1000000000));
}

// A group id as FailureGroupOf makes them: 12 lower-case hex digits.
absl::Status CheckGroupId(const std::string& group) {
  bool ok = group.size() == 12;
  for (char c : group) ok = ok && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("group '", group,
                                                 "' is not a failure group id (12 hex digits, as "
                                                 "ListFailureGroups shows them)"));
}

// An operator's reason, kept in the audit record: optional, short, one line.
constexpr size_t kMaxReasonBytes = 500;
absl::Status CheckReason(const std::string& reason) {
  if (reason.size() > kMaxReasonBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("reason is ", reason.size(), " bytes; at most ", kMaxReasonBytes));
  }
  for (unsigned char c : reason) {
    if (c < 0x20 || c == 0x7f) {
      return absl::InvalidArgumentError("reason holds a control character (one line of text)");
    }
  }
  return absl::OkStatus();
}

}  // namespace

grpc::Status OutboxOpsImpl::ListMessages(grpc::ServerContext* context,
                                         const ::ops::v1::ListMessagesRequest* req,
                                         ::ops::v1::ListMessagesResponse* resp) {
  auto status = OutboxStatusFromNumber(req->status());
  if (!status.ok() || !status->has_value()) {
    return ToGrpcStatus(absl::InvalidArgumentError("status is required: SENDING, SENT or FAILED"));
  }
  auto paging = ParsePageRequest(req->page_size(), req->page_token());
  if (!paging.ok()) return ToGrpcStatus(paging.status());
  auto page = operator_store_.List(**status, paging->after_id, paging->limit);
  if (!page.ok()) return ToGrpcStatus(page.status());
  for (const OutboxMessage& r : page->items) ToProto(r, resp->add_messages());
  resp->set_next_page_token(NextPageToken(page->next_cursor));
  return grpc::Status::OK;
}

grpc::Status OutboxOpsImpl::GetMessage(grpc::ServerContext* context,
                                       const ::ops::v1::GetMessageRequest* req,
                                       ::ops::v1::OutboxMessage* resp) {
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
  if (req->message_id().empty())
    return ToGrpcStatus(absl::InvalidArgumentError("message_id is required"));
  if (absl::Status s = CheckReason(req->reason()); !s.ok()) return ToGrpcStatus(s);
  const std::string actor = auth_.Actor(*context);
  auto row = operator_store_.Redrive(req->message_id(), clock_.NowMillis(), actor, req->reason());
  if (!row.ok()) return ToGrpcStatus(row.status());
  LogInfo("message_redriven",
          {KV("message_id", req->message_id()), KV("actor", actor), KV("reason", req->reason())});
  ToProto(*row, resp);
  return grpc::Status::OK;
}

grpc::Status OutboxOpsImpl::RedriveFailed(grpc::ServerContext* context,
                                          const ::ops::v1::RedriveFailedRequest* req,
                                          ::ops::v1::RedriveFailedResponse* resp) {
  if (!req->group().empty()) {
    if (absl::Status s = CheckGroupId(req->group()); !s.ok()) return ToGrpcStatus(s);
  }
  if (absl::Status s = CheckReason(req->reason()); !s.ok()) return ToGrpcStatus(s);
  const std::string actor = auth_.Actor(*context);
  auto n = operator_store_.RedriveFailed(req->group(), req->dry_run(), clock_.NowMillis(), actor,
                                         /*page=*/1000, req->include_rejected_and_acknowledged(),
                                         req->reason());
  if (!n.ok()) return ToGrpcStatus(n.status());
  if (!req->dry_run()) {
    LogInfo("failed_messages_redriven", {KV("messages", *n), KV("group", req->group()),
                                         KV("actor", actor), KV("reason", req->reason())});
  }
  resp->set_count(*n);
  resp->set_dry_run(req->dry_run());
  return grpc::Status::OK;
}

grpc::Status OutboxOpsImpl::ListFailureGroups(grpc::ServerContext* context,
                                              const ::ops::v1::ListFailureGroupsRequest* req,
                                              ::ops::v1::ListFailureGroupsResponse* resp) {
  if (req->limit() < 0)
    return ToGrpcStatus(absl::InvalidArgumentError("limit must not be negative"));
  const std::string& kind = req->kind();
  if (!kind.empty() && kind != kFailureExhausted && kind != kFailureRejected &&
      kind != kFailureExpired) {
    return ToGrpcStatus(absl::InvalidArgumentError(
        absl::StrCat("kind '", kind, "' is not exhausted, rejected or expired")));
  }
  auto groups = store_.FailureGroups(
      req->limit() == 0 ? kDefaultPageSize : std::min(req->limit(), kMaxPageSize), kind);
  if (!groups.ok()) return ToGrpcStatus(groups.status());
  for (const FailureGroup& g : *groups) {
    auto* out = resp->add_groups();
    out->set_group(g.group);
    out->set_topic(g.topic);
    out->set_kind(g.kind);
    out->set_pattern(g.pattern);
    out->set_count(g.count);
    out->set_acknowledged(g.acknowledged);
    SetTimestamp(g.first_seen, out->mutable_first_seen());
    SetTimestamp(g.last_seen, out->mutable_last_seen());
    out->set_example_message_id(g.example_message_id);
    out->set_example_error(g.example_error);
  }
  return grpc::Status::OK;
}

grpc::Status OutboxOpsImpl::AcknowledgeFailure(grpc::ServerContext* context,
                                               const ::ops::v1::AcknowledgeFailureRequest* req,
                                               ::ops::v1::AcknowledgeFailureResponse* resp) {
  if (req->message_id().empty() == req->group().empty()) {
    return ToGrpcStatus(absl::InvalidArgumentError("give exactly one of message_id and group"));
  }
  if (absl::Status s = CheckReason(req->reason()); !s.ok()) return ToGrpcStatus(s);
  const std::string actor = auth_.Actor(*context);
  const int64_t now = clock_.NowMillis();
  if (!req->message_id().empty()) {
    if (req->dry_run()) {
      return ToGrpcStatus(absl::InvalidArgumentError("dry_run is for a group only"));
    }
    auto row = operator_store_.AcknowledgeFailure(req->message_id(), now, actor, req->reason());
    if (!row.ok()) return ToGrpcStatus(row.status());
    resp->set_count(1);
  } else {
    if (absl::Status s = CheckGroupId(req->group()); !s.ok()) return ToGrpcStatus(s);
    auto n = operator_store_.AcknowledgeGroup(req->group(), req->dry_run(), now, actor,
                                              /*page=*/1000, req->reason());
    if (!n.ok()) return ToGrpcStatus(n.status());
    resp->set_count(*n);
  }
  resp->set_dry_run(req->dry_run());
  if (!req->dry_run()) {
    LogInfo("failures_acknowledged",
            {KV("message_id", req->message_id()), KV("group", req->group()),
             KV("rows", resp->count()), KV("actor", actor), KV("reason", req->reason())});
  }
  return grpc::Status::OK;
}

grpc::Status OutboxOpsImpl::GetHistory(grpc::ServerContext* context,
                                       const ::ops::v1::GetHistoryRequest* req,
                                       ::ops::v1::History* resp) {
  if (req->id().empty()) {
    return ToGrpcStatus(
        absl::InvalidArgumentError("id is required (a message id or business key)"));
  }
  OutboxMessage row;
  auto events = operator_store_.History(req->id(), &row);
  if (!events.ok()) return ToGrpcStatus(events.status());
  ToProto(row, resp->mutable_message());
  for (const HistoryEvent& e : *events) {
    auto* out = resp->add_events();
    SetTimestamp(e.at, out->mutable_at());
    out->set_instance(e.instance);
    out->set_event(e.event);
    out->set_detail(e.detail);
  }
  return grpc::Status::OK;
}

grpc::Status OutboxOpsImpl::ListAudit(grpc::ServerContext* context,
                                      const ::ops::v1::ListAuditRequest* req,
                                      ::ops::v1::ListAuditResponse* resp) {
  // Newest first: the token is the last record's id, the next page is below it.
  auto paging = ParsePageRequest(req->page_size(), req->page_token());
  if (!paging.ok()) return ToGrpcStatus(paging.status());
  auto records = operator_store_.Audit(paging->after_id, paging->limit + 1);
  if (!records.ok()) return ToGrpcStatus(records.status());
  const bool more = static_cast<int>(records->size()) > paging->limit;
  if (more) records->pop_back();
  for (const AuditRecord& r : *records) {
    auto* out = resp->add_records();
    out->set_id(r.id);
    SetTimestamp(r.at, out->mutable_at());
    out->set_actor(r.actor);
    out->set_action(r.action);
    out->set_target(r.target);
    out->set_dry_run(r.dry_run);
    out->set_rows(r.rows);
    out->set_outcome(r.outcome);
    out->set_reason(r.reason);
  }
  if (more && !records->empty()) resp->set_next_page_token(NextPageToken(records->back().id));
  return grpc::Status::OK;
}

grpc::Status OutboxOpsImpl::GetRetryPolicy(grpc::ServerContext* context,
                                           const ::ops::v1::GetRetryPolicyRequest*,
                                           ::ops::v1::RetryPolicy* resp) {
  auto add = [&](const std::string& topic, const RetryPolicy& p) {
    auto* out = resp->add_policies();
    out->set_topic(topic);
    SetDuration(p.base_delay, out->mutable_base_delay());
    SetDuration(p.max_delay, out->mutable_max_delay());
    out->set_max_attempts(p.max_attempts);
    SetDuration(p.max_age, out->mutable_max_age());
  };
  add("", retry_);
  for (const auto& [topic, unused] : retry_.topics) add(topic, retry_.ForTopic(topic));
  return grpc::Status::OK;
}

grpc::Status OutboxOpsImpl::GetStats(grpc::ServerContext* context,
                                     const ::ops::v1::GetStatsRequest*, ::ops::v1::Stats* resp) {
  auto counts = operator_store_.Counts();
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
  if (req->limit() < 0)
    return ToGrpcStatus(absl::InvalidArgumentError("limit must not be negative"));
  if (absl::Status s = CheckReason(req->reason()); !s.ok()) return ToGrpcStatus(s);
  // It can cause bookings: audited like every action that changes something.
  const std::string actor = auth_.Actor(*context);
  // What moved before an error went back to its queue all the same: recorded too.
  const DeadLettersRedriven n = dead_letters_.Redrive(req->queue(), req->limit(), actor);
  AuditRecord audit{0,
                    clock_.NowMillis(),
                    actor,
                    "redrive_dead_letters",
                    req->queue(),
                    false,
                    n.moved,
                    n.status.ok() ? "ok" : std::string(n.status.message())};
  audit.reason = req->reason();
  operator_store_.RecordAudit(audit).IgnoreError();  // logged by RecordAudit
  if (!n.status.ok()) {
    if (n.moved == 0) return ToGrpcStatus(n.status);
    return ToGrpcStatus(absl::Status(
        n.status.code(),
        absl::StrCat(n.moved, " moved back before the re-drive stopped: ", n.status.message())));
  }
  resp->set_count(n.moved);
  return grpc::Status::OK;
}

}  // namespace outbox::recovery
