#include "tests/support/services.h"

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "loadgen/listing.h"
#include "shared/base/ids.h"

namespace outbox::testing {

std::string BinaryPath(const std::string& name) { return absl::StrCat(OUTBOX_BIN_DIR, "/", name); }

ServiceSet::ServiceSet(std::map<std::string, std::string> extra_env)
    : ServiceSet(TestBroker(), std::move(extra_env)) {}

ServiceSet::ServiceSet(Broker broker, std::map<std::string, std::string> extra_env)
    : broker_(std::move(broker)),
      dir_(MakeTempDir("outbox_e2e")),
      pay_queue_(UniqueName("PAY")),
      acc_queue_(UniqueName("ACC")),
      message_keys_file_(dir_ + "/message.keys"),
      extra_env_(std::move(extra_env)) {
  UuidGenerator secret;
  const std::string text = absl::StrCat(UniqueName("e2e"), " ", secret.NewId(), secret.NewId(), "\n");
  auto keys = MessageKeys::Parse(text);
  if (!keys.ok()) throw std::runtime_error(std::string(keys.status().message()));
  message_keys_ = std::make_unique<MessageKeys>(*std::move(keys));
  std::ofstream(message_keys_file_) << text;
  std::filesystem::permissions(message_keys_file_, std::filesystem::perms::owner_read |
                                                       std::filesystem::perms::owner_write);
}

OutgoingMessage ServiceSet::Signed(OutgoingMessage m) const {
  m.signature = message_keys_->Sign(m);
  return m;
}

ServiceSet::~ServiceSet() {
  for (auto& [name, r] : recoveries_) r->process.Terminate();
  payment_.Terminate();
  accounting_.Terminate();
  if (std::getenv("OUTBOX_KEEP_TEST_DIRS") == nullptr) std::filesystem::remove_all(dir_);
}

Env ServiceSet::ServiceEnv(const std::string& broker_user) const {
  std::map<std::string, std::string> env = {
      {"AMQP_URL", broker_.amqp_url},
      {"PAY_QUEUE", pay_queue_},
      {"ACC_QUEUE", acc_queue_},
      {"PAYMENT_DB", dir_ + "/payment.db"},
      {"ACCOUNTING_DB", dir_ + "/accounting.db"},
      {"MESSAGE_KEYS_FILE", message_keys_file_},
  };
  if (!broker_user.empty()) {
    const BrokerUser user = ServiceBrokerUser(broker_, broker_user);
    env["AMQP_URL"] = user.url;
    env["AMQP_PASSWORD_FILE"] = user.password_file;
  }
  for (const auto& [k, v] : extra_env_) env[k] = v;
  return env;
}

int ServiceSet::StartService(Process& p, const std::string& name, const std::string& event,
                             std::map<std::string, std::string> env, const std::string& log_name) {
  const std::string log_path =
      absl::StrCat(dir_, "/", log_name.empty() ? name : log_name, ".log");
  auto starts = [&](const std::string& log) {
    int n = 0;
    for (size_t at = log.find(event); at != std::string::npos; at = log.find(event, at + 1)) ++n;
    return n;
  };
  // A restart appends to the same log: wait for one more start line than before.
  const int before = starts(p.log_path().empty() ? "" : p.Log());
  p.Start(BinaryPath(name), {}, env, log_path);
  std::string log;
  PollUntil([&] {
    log = p.Log();
    return starts(log) > before || !p.Running();
  }, absl::Seconds(30), absl::Milliseconds(50));
  int bound = 0;
  if (starts(log) <= before || !absl::SimpleAtoi(LogField(log, event, "port"), &bound) || bound == 0) {
    throw std::runtime_error(absl::StrCat(name, " did not start; log:\n", p.Log()));
  }
  return bound;
}

void ServiceSet::StartAccounting(Env extra_env) {
  auto env = ServiceEnv("outbox-accounting");
  for (const auto& [k, v] : extra_env) env[k] = v;
  // Keep the port across restarts so clients reconnect to the same address.
  env["ACCOUNTING_LISTEN"] = absl::StrCat("127.0.0.1:", accounting_port_);
  accounting_port_ = StartService(accounting_, "accounting_service", "accounting_service_started",
                                  env);
  if (!accounting_channel_) {
    accounting_channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", accounting_port_),
                                              grpc::InsecureChannelCredentials());
    accounting_stub_ = ::accounting::v1::AccountingService::NewStub(accounting_channel_);
  }
}

void ServiceSet::StartPayment(Env extra_env) {
  auto env = ServiceEnv("outbox-payment");
  for (const auto& [k, v] : extra_env) env[k] = v;
  env["PAYMENT_LISTEN"] = absl::StrCat("127.0.0.1:", payment_port_);
  payment_port_ = StartService(payment_, "payment_service", "payment_service_started", env);
  if (!payment_channel_) {
    payment_channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", payment_port_),
                                           grpc::InsecureChannelCredentials());
    payment_stub_ = ::payment::v1::PaymentService::NewStub(payment_channel_);
  }
}

ServiceSet::Recovery& ServiceSet::StartRecovery(const std::string& instance, Env extra_env) {
  auto& slot = recoveries_[instance];
  if (!slot) slot = std::make_unique<Recovery>();
  Recovery& r = *slot;
  auto env = ServiceEnv("outbox-recovery");
  env["RECOVERY_INSTANCE_ID"] = instance;
  env["RECOVERY_LISTEN"] = absl::StrCat("127.0.0.1:", r.port);
  for (const auto& [k, v] : extra_env) env[k] = v;
  r.port = StartService(r.process, "recovery_service", "recovery_service_started", env,
                        absl::StrCat("recovery_", instance));
  if (!r.ops) {
    r.ops = ::ops::v1::OutboxOps::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", r.port), grpc::InsecureChannelCredentials()));
  }
  return r;
}

std::vector<::payment::v1::Payment> ServiceSet::AllPayments() {
  std::vector<::payment::v1::Payment> out;
  const absl::Status s = loadgen::ForEachPayment(
      *payment_stub_, ::payment::v1::OUTBOX_STATUS_UNSPECIFIED, Scaled(absl::Seconds(10)),
      [&](const ::payment::v1::Payment& p) { out.push_back(p); });
  if (!s.ok()) throw std::runtime_error(std::string(s.message()));
  return out;
}

std::vector<::accounting::v1::Voucher> ServiceSet::AllVouchers() {
  std::vector<::accounting::v1::Voucher> out;
  const absl::Status s = loadgen::ForEachVoucher(
      *accounting_stub_, Scaled(absl::Seconds(10)),
      [&](const ::accounting::v1::Voucher& v) { out.push_back(v); });
  if (!s.ok()) throw std::runtime_error(std::string(s.message()));
  return out;
}

}  // namespace outbox::testing
