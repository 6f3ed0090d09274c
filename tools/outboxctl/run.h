#pragma once

// One outboxctl command from start to finish: the call (calls.h), then the
// table or JSON (render.h), and the exit code. The servers are reached
// through Connections, so the process-wide part (channels) stays in one
// place and a test can hand in mocks of the stubs.
#include <iosfwd>
#include <memory>
#include <string>

#include "service_kit/cli.h"
#include "service_kit/grpc/channel_security.h"
#include "tools/outboxctl/calls.h"
#include "tools/outboxctl/command.h"

namespace outbox::ctl {

class Connections {
 public:
  virtual ~Connections() = default;
  virtual std::unique_ptr<OpsStub> Ops(const std::string& addr) = 0;
  virtual std::unique_ptr<::payment::v1::PaymentService::StubInterface> Payments(
      const std::string& addr) = 0;
  virtual std::unique_ptr<::accounting::v1::AccountingService::StubInterface> Accounting(
      const std::string& addr) = 0;
  virtual std::unique_ptr<::grpc::health::v1::Health::StubInterface> Health(
      const std::string& addr) = 0;
  // Called once before any stub: how channels are secured (TLS files, the
  // token file). INVALID_ARGUMENT when a file is unusable.
  virtual absl::Status Secure(const TlsClientFiles& tls, const std::string& token_file) {
    return absl::OkStatus();
  }
};

// Channels to each address: plaintext, or TLS and a bearer token once
// Secure() was given files.
class GrpcConnections final : public Connections {
 public:
  absl::Status Secure(const TlsClientFiles& tls, const std::string& token_file) override;
  std::unique_ptr<OpsStub> Ops(const std::string& addr) override;
  std::unique_ptr<::payment::v1::PaymentService::StubInterface> Payments(
      const std::string& addr) override;
  std::unique_ptr<::accounting::v1::AccountingService::StubInterface> Accounting(
      const std::string& addr) override;
  std::unique_ptr<::grpc::health::v1::Health::StubInterface> Health(
      const std::string& addr) override;

 private:
  std::shared_ptr<grpc::Channel> ChannelTo(const std::string& addr) const;
  std::shared_ptr<grpc::ChannelCredentials> credentials_ = grpc::InsecureChannelCredentials();
  std::string token_;
};

// Runs `command`; the result goes to `out`, a failed call's one line to
// `err`. Returns kExitOk, or kExitFailure for a failed call or a server that
// is not SERVING.
int Execute(const Command& command, Connections& connections, std::ostream& out, std::ostream& err);

// For main: parses argv[1..] (environment defaults from getenv) and runs the
// command; a usage error prints one line and the usage line to `err` and
// returns kExitUsage.
int RunCommandLine(const std::vector<std::string>& args, Connections& connections,
                   std::ostream& out, std::ostream& err);

}  // namespace outbox::ctl
