#pragma once

// The operator API (ops.v1.OutboxOps) served by recovery_service.
#include "ops/v1/ops.grpc.pb.h"
#include "service_kit/grpc/server_security.h"
#include "shared/base/clock.h"
#include "shared/observability/internal/alerts.h"
#include "shared/outbox/internal/dead_letters.h"
#include "shared/outbox/internal/operator_repository.h"
#include "shared/outbox/internal/recovery_loop.h"
#include "shared/outbox/repository.h"

namespace outbox::recovery {

class OutboxOpsImpl final : public ::ops::v1::OutboxOps::Service {
 public:
  // `store` is the loop's (its lease, failure groups and rows), `operator_store`
  // the operator's verbs on the same database (a SQLite file or PostgreSQL).
  OutboxOpsImpl(RecoveryRepository& store, OperatorRepository& operator_store,
                const RecoveryLoop& worker, const Alerter& alerter, DeadLetters& dead_letters,
                const Clock& clock, BearerTokenCheck auth = {}, RetryPolicy retry = {})
      : store_(store),
        operator_store_(operator_store),
        worker_(worker),
        alerter_(alerter),
        dead_letters_(dead_letters),
        clock_(clock),
        auth_(std::move(auth)),
        retry_(std::move(retry)) {}

  grpc::Status ListMessages(grpc::ServerContext*, const ::ops::v1::ListMessagesRequest*,
                            ::ops::v1::ListMessagesResponse*) override;
  grpc::Status GetMessage(grpc::ServerContext*, const ::ops::v1::GetMessageRequest*,
                          ::ops::v1::OutboxMessage*) override;
  grpc::Status RedriveMessage(grpc::ServerContext*, const ::ops::v1::RedriveMessageRequest*,
                              ::ops::v1::OutboxMessage*) override;
  grpc::Status RedriveFailed(grpc::ServerContext*, const ::ops::v1::RedriveFailedRequest*,
                             ::ops::v1::RedriveFailedResponse*) override;
  grpc::Status ListFailureGroups(grpc::ServerContext*, const ::ops::v1::ListFailureGroupsRequest*,
                                 ::ops::v1::ListFailureGroupsResponse*) override;
  grpc::Status AcknowledgeFailure(grpc::ServerContext*, const ::ops::v1::AcknowledgeFailureRequest*,
                                  ::ops::v1::AcknowledgeFailureResponse*) override;
  grpc::Status GetHistory(grpc::ServerContext*, const ::ops::v1::GetHistoryRequest*,
                          ::ops::v1::History*) override;
  grpc::Status ListAudit(grpc::ServerContext*, const ::ops::v1::ListAuditRequest*,
                         ::ops::v1::ListAuditResponse*) override;
  grpc::Status GetRetryPolicy(grpc::ServerContext*, const ::ops::v1::GetRetryPolicyRequest*,
                              ::ops::v1::RetryPolicy*) override;
  grpc::Status GetStats(grpc::ServerContext*, const ::ops::v1::GetStatsRequest*,
                        ::ops::v1::Stats*) override;
  grpc::Status ListDeadLetters(grpc::ServerContext*, const ::ops::v1::ListDeadLettersRequest*,
                               ::ops::v1::ListDeadLettersResponse*) override;
  grpc::Status RedriveDeadLetters(grpc::ServerContext*, const ::ops::v1::RedriveDeadLettersRequest*,
                                  ::ops::v1::RedriveDeadLettersResponse*) override;

 private:
  RecoveryRepository& store_;
  OperatorRepository& operator_store_;
  const RecoveryLoop& worker_;
  const Alerter& alerter_;
  DeadLetters& dead_letters_;
  const Clock& clock_;
  // The ops tokens (OPS_TOKEN_FILE), to name the caller in audit records;
  // the check itself runs before any handler (Serving, call_gate.h).
  const BearerTokenCheck auth_;
  const RetryPolicy retry_;
};

}  // namespace outbox::recovery
