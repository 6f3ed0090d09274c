#pragma once

// What outboxctl prints: aligned tables and field lists for people, protobuf
// JSON for scripts. Plain functions of the responses, unit-tested.
#include <string>
#include <utility>
#include <vector>

#include <google/protobuf/message.h>
#include <google/protobuf/timestamp.pb.h>

#include "accounting/v1/accounting.pb.h"
#include "ops/v1/ops.pb.h"
#include "payment/v1/payment.pb.h"

namespace outbox::ctl {

using Row = std::vector<std::string>;

// Columns left-aligned, two spaces apart, the header first; no trailing blanks.
std::string Table(const Row& header, const std::vector<Row>& rows);
// "name   value" lines, the values aligned.
std::string Fields(const std::vector<std::pair<std::string, std::string>>& fields);

// UTC, milliseconds: 2026-01-02T03:04:05.678Z; "-" when unset.
std::string TimeText(const google::protobuf::Timestamp& t, bool set);

std::string RenderStats(const ::ops::v1::Stats& stats);
// `more` when rows beyond the limit may remain.
std::string RenderMessages(const std::string& status,
                           const google::protobuf::RepeatedPtrField<::ops::v1::OutboxMessage>& rows,
                           bool more);
std::string RenderMessage(const ::ops::v1::OutboxMessage& m);
std::string RenderRedriveFailed(const ::ops::v1::RedriveFailedResponse& r);
std::string RenderFailureGroups(const ::ops::v1::ListFailureGroupsResponse& r);
std::string RenderAcknowledged(const ::ops::v1::AcknowledgeFailureResponse& r);
// The message's timeline: created (attempt 1), each event, and where it is now.
std::string RenderHistory(const ::ops::v1::History& h);
std::string RenderAudit(const ::ops::v1::ListAuditResponse& r);
std::string RenderRetryPolicy(const ::ops::v1::RetryPolicy& p);
std::string RenderDeadLetters(const std::string& queue,
                              const ::ops::v1::ListDeadLettersResponse& r);
std::string RenderDeadLettersRedriven(const std::string& queue,
                                      const ::ops::v1::RedriveDeadLettersResponse& r);
std::string RenderPayment(const ::payment::v1::Payment& p);
// The payment made (or replayed: the same key and request seen before).
std::string RenderCreatedPayment(const ::payment::v1::CreatePaymentResponse& r);
std::string RenderVoucher(const ::accounting::v1::Voucher& v);

// One line of protobuf JSON: proto field names, fields at their default shown.
std::string ToJson(const google::protobuf::Message& message);

}  // namespace outbox::ctl
