#pragma once

// The gRPC calls outboxctl makes, one thin function each over the generated
// StubInterface (so a mock can stand in), each with its own deadline. The
// gRPC status becomes an absl::Status here and nowhere else.
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "accounting/v1/accounting.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "ops/v1/ops.grpc.pb.h"
#include "payment/v1/payment.grpc.pb.h"
#include "tools/outboxctl/command.h"

namespace outbox::ctl {

using OpsStub = ::ops::v1::OutboxOps::StubInterface;

absl::StatusOr<::ops::v1::Stats> GetStats(OpsStub& ops, absl::Duration timeout);
// Pages through ListMessages (`page_size` rows a call) until `limit` rows or
// the last page; next_page_token is set when more rows may remain.
absl::StatusOr<::ops::v1::ListMessagesResponse> ListMessages(OpsStub& ops,
                                                             ::ops::v1::MessageStatus status,
                                                             int limit, int page_size,
                                                             absl::Duration timeout);
absl::StatusOr<::ops::v1::OutboxMessage> GetMessage(OpsStub& ops, const std::string& message_id,
                                                    absl::Duration timeout);
// The calls that change something carry the operator's `reason` ("" for
// none), which their audit record keeps.
absl::StatusOr<::ops::v1::OutboxMessage> RedriveMessage(OpsStub& ops, const std::string& message_id,
                                                        const std::string& reason,
                                                        absl::Duration timeout);
// Every FAILED row (`group` empty) or those of one failure group.
absl::StatusOr<::ops::v1::RedriveFailedResponse> RedriveFailed(
    OpsStub& ops, bool dry_run, const std::string& group, bool include_rejected_and_acknowledged,
    const std::string& reason, absl::Duration timeout);
absl::StatusOr<::ops::v1::ListFailureGroupsResponse> ListFailureGroups(OpsStub& ops,
                                                                       const std::string& kind,
                                                                       int limit,
                                                                       absl::Duration timeout);
// One message (`message_id`) or a group.
absl::StatusOr<::ops::v1::AcknowledgeFailureResponse> AcknowledgeFailure(
    OpsStub& ops, const std::string& message_id, const std::string& group, bool dry_run,
    const std::string& reason, absl::Duration timeout);
absl::StatusOr<::ops::v1::History> GetHistory(OpsStub& ops, const std::string& id,
                                              absl::Duration timeout);
absl::StatusOr<::ops::v1::ListAuditResponse> ListAudit(OpsStub& ops, int limit,
                                                       absl::Duration timeout);
absl::StatusOr<::ops::v1::RetryPolicy> GetRetryPolicy(OpsStub& ops, absl::Duration timeout);
absl::StatusOr<::ops::v1::ListDeadLettersResponse> ListDeadLetters(OpsStub& ops,
                                                                   const std::string& queue,
                                                                   int limit,
                                                                   absl::Duration timeout);
absl::StatusOr<::ops::v1::RedriveDeadLettersResponse> RedriveDeadLetters(OpsStub& ops,
                                                                         const std::string& queue,
                                                                         int limit,
                                                                         const std::string& reason,
                                                                         absl::Duration timeout);
absl::StatusOr<::payment::v1::Payment> GetPayment(
    ::payment::v1::PaymentService::StubInterface& payments, const std::string& payment_id,
    absl::Duration timeout);
absl::StatusOr<::payment::v1::CreatePaymentResponse> CreatePayment(
    ::payment::v1::PaymentService::StubInterface& payments, const NewPayment& payment,
    absl::Duration timeout);
absl::StatusOr<::accounting::v1::Voucher> GetVoucher(
    ::accounting::v1::AccountingService::StubInterface& accounting, const std::string& payment_id,
    absl::Duration timeout);
// The server's overall health (service "").
absl::StatusOr<::grpc::health::v1::HealthCheckResponse> CheckHealth(
    ::grpc::health::v1::Health::StubInterface& health, absl::Duration timeout);

}  // namespace outbox::ctl
