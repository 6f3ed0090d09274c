#include "tools/outboxctl/run.h"

#include <cstdlib>
#include <iostream>
#include <ostream>

#include "tools/outboxctl/render.h"

namespace outbox::ctl {
namespace {

::ops::v1::MessageStatus StatusNamed(const std::string& name) {
  ::ops::v1::MessageStatus status = ::ops::v1::MESSAGE_STATUS_UNSPECIFIED;
  ::ops::v1::MessageStatus_Parse(name, &status);
  return status;
}

// Prints the response (table or JSON), or the failed call's one line.
template <typename Response, typename RenderFn>
int Print(const Command& c, const absl::StatusOr<Response>& response, const char* server,
          const std::string& addr, std::ostream& out, std::ostream& err, RenderFn render) {
  if (!response.ok()) {
    err << kProgram << ": " << response.status().ToString() << " (" << server << " at " << addr
        << ")\n";
    return kExitFailure;
  }
  out << (c.json ? ToJson(*response) : render(*response));
  return kExitOk;
}

constexpr char kRecovery[] = "recovery_service";

// The commands of recovery_service's ops API.
int ExecuteOps(const Command& c, Connections& connections, std::ostream& out, std::ostream& err) {
  const std::string& ops_addr = c.recovery_addr;
  switch (c.verb) {
    case Verb::kStats:
      return Print(c, GetStats(*connections.Ops(ops_addr), c.timeout), kRecovery, ops_addr, out,
                   err, RenderStats);
    case Verb::kList:
      return Print(c,
                   ListMessages(*connections.Ops(ops_addr), StatusNamed(c.status), c.limit,
                                c.page_size, c.timeout),
                   kRecovery, ops_addr, out, err, [&](const ::ops::v1::ListMessagesResponse& r) {
                     return RenderMessages(c.status, r.messages(), !r.next_page_token().empty());
                   });
    case Verb::kGet:
      return Print(c, GetMessage(*connections.Ops(ops_addr), c.arg, c.timeout), kRecovery, ops_addr,
                   out, err, RenderMessage);
    case Verb::kRedrive:
      return Print(c, RedriveMessage(*connections.Ops(ops_addr), c.arg, c.reason, c.timeout),
                   kRecovery, ops_addr, out, err, RenderMessage);
    case Verb::kRedriveAllFailed:
    case Verb::kRedriveGroup:
      return Print(c,
                   RedriveFailed(*connections.Ops(ops_addr), c.dry_run, c.group,
                                 c.include_rejected_and_acknowledged, c.reason, c.timeout),
                   kRecovery, ops_addr, out, err, RenderRedriveFailed);
    case Verb::kFailures:
      return Print(c, ListFailureGroups(*connections.Ops(ops_addr), c.kind, c.limit, c.timeout),
                   kRecovery, ops_addr, out, err, RenderFailureGroups);
    case Verb::kAcknowledge:
    case Verb::kAcknowledgeGroup:
      return Print(c,
                   AcknowledgeFailure(*connections.Ops(ops_addr), c.arg, c.group, c.dry_run,
                                      c.reason, c.timeout),
                   kRecovery, ops_addr, out, err, RenderAcknowledged);
    case Verb::kHistory:
      return Print(c, GetHistory(*connections.Ops(ops_addr), c.arg, c.timeout), kRecovery, ops_addr,
                   out, err, RenderHistory);
    case Verb::kAudit:
      return Print(c, ListAudit(*connections.Ops(ops_addr), c.limit, c.timeout), kRecovery,
                   ops_addr, out, err, RenderAudit);
    case Verb::kPolicy:
      return Print(c, GetRetryPolicy(*connections.Ops(ops_addr), c.timeout), kRecovery, ops_addr,
                   out, err, RenderRetryPolicy);
    case Verb::kDeadLettersList:
      return Print(c, ListDeadLetters(*connections.Ops(ops_addr), c.queue, c.limit, c.timeout),
                   kRecovery, ops_addr, out, err, [&](const ::ops::v1::ListDeadLettersResponse& r) {
                     return RenderDeadLetters(c.queue, r);
                   });
    case Verb::kDeadLettersRedrive:
      return Print(
          c, RedriveDeadLetters(*connections.Ops(ops_addr), c.queue, c.limit, c.reason, c.timeout),
          kRecovery, ops_addr, out, err, [&](const ::ops::v1::RedriveDeadLettersResponse& r) {
            return RenderDeadLettersRedriven(c.queue, r);
          });
    default: return kExitUsage;
  }
}

// health ADDR: the check's answer, and exit 0 only when SERVING.
int ExecuteHealth(const Command& c, Connections& connections, std::ostream& out,
                  std::ostream& err) {
  auto health = CheckHealth(*connections.Health(c.arg), c.timeout);
  const int printed =
      Print(c, health, "health check", c.arg, out, err,
            [&](const ::grpc::health::v1::HealthCheckResponse& r) {
              return c.arg + "  " +
                     ::grpc::health::v1::HealthCheckResponse::ServingStatus_Name(r.status()) + "\n";
            });
  if (printed != kExitOk) return printed;
  return health->status() == ::grpc::health::v1::HealthCheckResponse::SERVING ? kExitOk
                                                                              : kExitFailure;
}

}  // namespace

absl::Status GrpcConnections::Secure(const TlsClientFiles& tls, const std::string& token_file) {
  auto credentials = ChannelCredentialsFrom(tls);
  if (!credentials.ok()) return credentials.status();
  credentials_ = *std::move(credentials);
  token_.clear();
  if (!token_file.empty()) {
    std::string warning;
    auto token = ReadTokenFile(token_file, "token_file", &warning);
    if (!token.ok()) return token.status();
    if (!warning.empty()) std::cerr << kProgram << ": warning: " << warning << "\n";
    token_ = *std::move(token);
  }
  return absl::OkStatus();
}

std::shared_ptr<grpc::Channel> GrpcConnections::ChannelTo(const std::string& addr) const {
  return CreateChannelWithToken(addr, credentials_, grpc::ChannelArguments(), token_);
}

std::unique_ptr<OpsStub> GrpcConnections::Ops(const std::string& addr) {
  return ::ops::v1::OutboxOps::NewStub(ChannelTo(addr));
}
std::unique_ptr<::payment::v1::PaymentService::StubInterface> GrpcConnections::Payments(
    const std::string& addr) {
  return ::payment::v1::PaymentService::NewStub(ChannelTo(addr));
}
std::unique_ptr<::accounting::v1::AccountingService::StubInterface> GrpcConnections::Accounting(
    const std::string& addr) {
  return ::accounting::v1::AccountingService::NewStub(ChannelTo(addr));
}
std::unique_ptr<::grpc::health::v1::Health::StubInterface> GrpcConnections::Health(
    const std::string& addr) {
  return ::grpc::health::v1::Health::NewStub(ChannelTo(addr));
}

int Execute(const Command& c, Connections& connections, std::ostream& out, std::ostream& err) {
  if (c.verb != Verb::kHelp && c.verb != Verb::kVersion) {
    absl::Status secured =
        connections.Secure({c.tls_ca_file, c.tls_cert_file, c.tls_key_file}, c.token_file);
    if (!secured.ok()) {
      err << kProgram << ": " << secured.message() << "\n";
      return kExitUsage;
    }
  }
  switch (c.verb) {
    case Verb::kHelp: out << HelpText(); return kExitOk;
    case Verb::kVersion: out << VersionLine(kProgram) << "\n"; return kExitOk;
    case Verb::kStats:
    case Verb::kList:
    case Verb::kGet:
    case Verb::kRedrive:
    case Verb::kRedriveAllFailed:
    case Verb::kRedriveGroup:
    case Verb::kFailures:
    case Verb::kAcknowledge:
    case Verb::kAcknowledgeGroup:
    case Verb::kHistory:
    case Verb::kAudit:
    case Verb::kPolicy:
    case Verb::kDeadLettersList:
    case Verb::kDeadLettersRedrive: return ExecuteOps(c, connections, out, err);
    case Verb::kPaymentGet:
      return Print(c, GetPayment(*connections.Payments(c.payment_addr), c.arg, c.timeout),
                   "payment_service", c.payment_addr, out, err, RenderPayment);
    case Verb::kPaymentCreate:
      return Print(c, CreatePayment(*connections.Payments(c.payment_addr), c.payment, c.timeout),
                   "payment_service", c.payment_addr, out, err, RenderCreatedPayment);
    case Verb::kVoucherGet:
      return Print(c, GetVoucher(*connections.Accounting(c.accounting_addr), c.arg, c.timeout),
                   "accounting_service", c.accounting_addr, out, err, RenderVoucher);
    case Verb::kHealth: return ExecuteHealth(c, connections, out, err);
  }
  return kExitUsage;
}

int RunCommandLine(const std::vector<std::string>& args, Connections& connections,
                   std::ostream& out, std::ostream& err) {
  auto command = ParseCommand(args, [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr || *v == '\0') return std::nullopt;
    return std::string(v);
  });
  if (!command.ok()) {
    err << kProgram << ": " << command.status().message() << "\n"
        << UsageLine(kProgram, kSynopsis) << " (--help lists the commands)\n";
    return kExitUsage;
  }
  return Execute(*command, connections, out, err);
}

}  // namespace outbox::ctl
