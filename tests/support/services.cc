#include "tests/support/services.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <SQLiteCpp/SQLiteCpp.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/listing.h"
#include "client/sharded_payment_stub.h"
#include "service_kit/shard_of_payment.h"
#include "shared/base/internal/ids.h"
#include "shared/postgres/pg_connection.h"
#include "shared/testing/pg_servers.h"

namespace outbox::testing {

std::string BinaryPath(const std::string& name) {
  const char* dir = std::getenv("OUTBOX_E2E_BIN_DIR");
  return absl::StrCat(dir != nullptr && *dir != 0 ? dir : OUTBOX_BIN_DIR, "/", name);
}

bool OnPostgres() {
  const char* store = std::getenv("OUTBOX_E2E_STORE");
  return store != nullptr && std::string(store) == "postgres";
}

namespace {

// The test run's PostgreSQL server (the ctest fixture's): the URL of its
// database outbox, the server's pgpass as passfile, for the test's own
// connections; the URI of a database `name` without either, for the
// services; and the pgpass, their PGPASSFILE.
struct PgServer {
  std::string admin_url;
  std::string uri_prefix;  // postgresql://outbox@host:port/
  std::string pgpass;
};

const PgServer& TestPostgres() {
  static const PgServer* const server = [] {
    const char* dir = std::getenv("OUTBOX_TEST_PG_DIR");
    if (dir == nullptr || *dir == 0) {
      throw std::runtime_error(
          "OUTBOX_E2E_STORE=postgres needs OUTBOX_TEST_PG_DIR: run the test through ctest, "
          "whose fixture starts a private PostgreSQL server");
    }
    auto* s = new PgServer;
    s->admin_url = PgServers::UrlOf(dir);
    s->pgpass = PgNodePgpass(dir);
    const std::string base = s->admin_url.substr(0, s->admin_url.find('?'));
    s->uri_prefix = base.substr(0, base.rfind('/') + 1);
    if (s->admin_url.empty() || s->uri_prefix.empty()) {
      throw std::runtime_error(absl::StrCat("no PostgreSQL server in ", dir));
    }
    return s;
  }();
  return *server;
}

// `db` (a service's URI) with the server's pgpass, for the test's connections.
std::string TestConninfo(const std::string& db) {
  return PgUrlWith(db, "passfile=" + TestPostgres().pgpass);
}

}  // namespace

ServiceSet::ServiceSet(std::map<std::string, std::string> extra_env)
    : ServiceSet(TestBroker(), std::move(extra_env)) {}

ServiceSet::ServiceSet(Broker broker, std::map<std::string, std::string> extra_env)
    : broker_(std::move(broker)),
      dir_(MakeTempDir("outbox_e2e")),
      pay_queue_(UniqueName("PAY")),
      acc_queue_(UniqueName("ACC")),
      message_keys_file_(dir_ + "/message.keys"),
      extra_env_(std::move(extra_env)) {
  payment_db_ = OnPostgres() ? NewDatabase("pay") : dir_ + "/payment.db";
  accounting_db_ = OnPostgres() ? NewDatabase("acc") : dir_ + "/accounting.db";
  UuidGenerator secret;
  const std::string text =
      absl::StrCat(UniqueName("e2e"), " ", secret.NewId(), secret.NewId(), "\n");
  auto keys = MessageKeys::Parse(text);
  if (!keys.ok()) throw std::runtime_error(std::string(keys.status().message()));
  message_keys_ = std::make_unique<MessageKeys>(*std::move(keys));
  std::ofstream(message_keys_file_) << text;
  std::filesystem::permissions(
      message_keys_file_, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
}

OutgoingMessage ServiceSet::Signed(OutgoingMessage m) const {
  m.signature = message_keys_->Sign(m);
  return m;
}

ServiceSet::~ServiceSet() {
  for (auto& [name, r] : recoveries_) r->process.Terminate();
  for (auto& p : shard_processes_) p->Terminate();
  for (auto& [shard, a] : accounting_shards_) a->process.Terminate();
  payment_.Terminate();
  accounting_.Terminate();
  if (std::getenv("OUTBOX_KEEP_TEST_DIRS") == nullptr) {
    std::filesystem::remove_all(dir_);
    // Best effort: the next run's server is fresh anyway.
    if (!pg_databases_.empty()) {
      auto admin = PgConnection::Open(TestPostgres().admin_url);
      for (const std::string& name : pg_databases_) {
        if (admin.ok()) (void)(*admin)->Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
      }
    }
  }
}

std::string ServiceSet::NewDatabase(const std::string& what) {
  static std::atomic<int> next{0};
  const std::string name =
      absl::AsciiStrToLower(absl::StrCat("e2e_", getpid(), "_", next++, "_", what));
  auto admin = PgConnection::Open(TestPostgres().admin_url);
  if (!admin.ok()) throw std::runtime_error(std::string(admin.status().message()));
  const absl::Status made = (*admin)->Exec("CREATE DATABASE " + name);
  if (!made.ok()) throw std::runtime_error(std::string(made.message()));
  pg_databases_.push_back(name);
  return TestPostgres().uri_prefix + name;
}

int64_t ServiceSet::Count(const std::string& db, const std::string& sql) const {
  if (IsPgConninfo(db)) {
    auto conn = PgConnection::Open(TestConninfo(db));
    if (!conn.ok()) throw std::runtime_error(std::string(conn.status().message()));
    auto r = (*conn)->Query(sql);
    int64_t n = 0;
    if (!r.ok() || r->rows() != 1 || !absl::SimpleAtoi(r->Get(0, 0), &n)) {
      throw std::runtime_error(absl::StrCat(sql, ": ", r.status().ToString()));
    }
    return n;
  }
  SQLite::Database file(db, SQLite::OPEN_READONLY);
  return file.execAndGet(sql).getInt64();
}

Env ServiceSet::ServiceEnv(const std::string& broker_user) const {
  std::map<std::string, std::string> env = {
      {"AMQP_URL", broker_.amqp_url},    {"PAY_QUEUE", pay_queue_},
      {"ACC_QUEUE", acc_queue_},         {"PAYMENT_DB", payment_db_},
      {"ACCOUNTING_DB", accounting_db_}, {"MESSAGE_KEYS_FILE", message_keys_file_},
  };
  if (OnPostgres()) env["PGPASSFILE"] = TestPostgres().pgpass;
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
  const std::string log_path = absl::StrCat(dir_, "/", log_name.empty() ? name : log_name, ".log");
  auto starts = [&](const std::string& log) {
    int n = 0;
    for (size_t at = log.find(event); at != std::string::npos; at = log.find(event, at + 1)) ++n;
    return n;
  };
  // A restart appends to the same log: wait for one more start line than before.
  const int before = starts(p.log_path().empty() ? "" : p.Log());
  p.Start(binary_dir_.empty() ? BinaryPath(name) : absl::StrCat(binary_dir_, "/", name), {}, env,
          log_path);
  std::string log;
  PollUntil(
      [&] {
        log = p.Log();
        return starts(log) > before || !p.Running();
      },
      absl::Seconds(30), absl::Milliseconds(50));
  int bound = 0;
  if (starts(log) <= before || !absl::SimpleAtoi(LogField(log, event, "port"), &bound) ||
      bound == 0) {
    throw std::runtime_error(absl::StrCat(name, " did not start; log:\n", p.Log()));
  }
  return bound;
}

void ServiceSet::StartAccounting(Env extra_env) {
  auto env = ServiceEnv("outbox-accounting");
  // Accounting declares the payment shards' reply queues (it writes them).
  for (int k = 0; k < payment_shard_count(); ++k) {
    absl::StrAppend(&env["REPLY_QUEUES"], k == 0 ? "" : ",", shard_acc_queue(k));
  }
  for (const auto& [k, v] : extra_env) env[k] = v;
  // Keep the port across restarts so clients reconnect to the same address.
  env["ACCOUNTING_LISTEN"] = absl::StrCat("127.0.0.1:", accounting_port_);
  accounting_port_ =
      StartService(accounting_, "accounting_service", "accounting_service_started", env);
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

ServiceSet::AccountingShard& ServiceSet::StartAccountingShard(int shard, Env extra_env) {
  auto& slot = accounting_shards_[shard];
  if (!slot) slot = std::make_unique<AccountingShard>();
  AccountingShard& a = *slot;
  if (a.db.empty()) {  // the same store on a restart
    a.db = OnPostgres() ? NewDatabase(absl::StrCat("acc", shard))
                        : absl::StrCat(dir_, "/accounting-", shard, ".db");
  }
  auto env = ServiceEnv("outbox-accounting");
  env["ACCOUNTING_SHARD"] = absl::StrCat(shard);
  env["ACCOUNTING_DB"] = a.db;
  env["ACCOUNTING_LISTEN"] = absl::StrCat("127.0.0.1:", a.port);  // the same port on a restart
  for (const auto& [k, v] : extra_env) env[k] = v;
  a.port = StartService(a.process, "accounting_service", "accounting_service_started", env,
                        absl::StrCat("accounting_", shard));
  if (!a.api) {
    a.api = ::accounting::v1::AccountingService::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", a.port), grpc::InsecureChannelCredentials()));
  }
  return a;
}

std::string ServiceSet::accounting_dbs() const {
  if (accounting_shards_.empty()) return accounting_db_;
  std::string dbs;
  for (const auto& [shard, a] : accounting_shards_) {
    absl::StrAppend(&dbs, dbs.empty() ? "" : ",", a->db);
  }
  return dbs;
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
    r.ops = ::ops::v1::OutboxOps::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", r.port),
                                                              grpc::InsecureChannelCredentials()));
  }
  return r;
}

namespace {

// A loopback port nobody listens on now. Shards must know every shard's
// address before any starts, so theirs cannot be bound as port 0.
int UnusedLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    throw std::runtime_error("cannot bind a loopback port");
  }
  close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace

void ServiceSet::UsePaymentShards(int count) {
  if (!shard_ports_.empty()) throw std::logic_error("UsePaymentShards called twice");
  for (int k = 0; k < count; ++k) {
    int port = UnusedLoopbackPort();
    for (int tries = 0;
         std::find(shard_ports_.begin(), shard_ports_.end(), port) != shard_ports_.end() &&
         tries < 10;
         ++tries) {
      port = UnusedLoopbackPort();
    }
    shard_ports_.push_back(port);
    shard_processes_.push_back(std::make_unique<Process>());
    payment_shard_dbs_.push_back(OnPostgres() ? NewDatabase(absl::StrCat("pay_s", k))
                                              : absl::StrCat(dir_, "/payment.s", k, ".db"));
  }
}

std::string ServiceSet::payment_shard_db(int k) const {
  return payment_shard_dbs_.at(static_cast<size_t>(k));
}
std::string ServiceSet::shard_acc_queue(int k) const {
  return absl::StrCat(acc_queue_, ".s", k);
}
std::string ServiceSet::payment_shard_address(int k) const {
  return absl::StrCat("127.0.0.1:", shard_ports_.at(static_cast<size_t>(k)));
}
std::string ServiceSet::payment_shard_addresses() const {
  std::string out;
  for (int k = 0; k < payment_shard_count(); ++k) {
    absl::StrAppend(&out, k == 0 ? "" : ",", payment_shard_address(k));
  }
  return out;
}

Env ServiceSet::PaymentShardEnv(int k) const {
  return {{"PAYMENT_DB", payment_shard_db(k)},
          {"ACC_QUEUE", shard_acc_queue(k)},
          {"PAYMENT_SHARDS", payment_shard_addresses()},
          {"PAYMENT_SHARD_INDEX", absl::StrCat(k)}};
}

void ServiceSet::StartPaymentShard(int k, Env extra_env) {
  auto env = ServiceEnv("outbox-payment");
  for (const auto& [key, v] : PaymentShardEnv(k)) env[key] = v;
  for (const auto& [key, v] : extra_env) env[key] = v;
  env["PAYMENT_LISTEN"] = payment_shard_address(k);
  StartService(payment_shard(k), "payment_service", "payment_service_started", env,
               absl::StrCat("payment_s", k));
}

ServiceSet::Recovery& ServiceSet::StartShardRecovery(int k, const std::string& instance,
                                                     Env extra_env) {
  Env env = PaymentShardEnv(k);
  env.erase("PAYMENT_SHARDS");
  env.erase("PAYMENT_SHARD_INDEX");
  for (const auto& [key, v] : extra_env) env[key] = v;
  return StartRecovery(instance, env);
}

std::unique_ptr<::payment::v1::PaymentService::StubInterface> ServiceSet::PaymentShardsStub()
    const {
  return client::NewPaymentStub(client::SplitAddresses(payment_shard_addresses()));
}

std::unique_ptr<::payment::v1::PaymentService::Stub> ServiceSet::PaymentShardStub(int k) const {
  return ::payment::v1::PaymentService::NewStub(
      grpc::CreateChannel(payment_shard_address(k), grpc::InsecureChannelCredentials()));
}

std::vector<::payment::v1::Payment> ServiceSet::AllPayments() {
  std::vector<::payment::v1::Payment> out;
  std::unique_ptr<::payment::v1::PaymentService::StubInterface> shards;
  if (payment_shard_count() > 0) shards = PaymentShardsStub();
  const absl::Status s = client::ForEachPayment(
      shards ? *shards : *payment_stub_, ::payment::v1::OUTBOX_STATUS_UNSPECIFIED,
      Scaled(absl::Seconds(10)), [&](const ::payment::v1::Payment& p) { out.push_back(p); });
  if (!s.ok()) throw std::runtime_error(std::string(s.message()));
  return out;
}

std::vector<::accounting::v1::Voucher> ServiceSet::ShardVouchers(int shard) {
  std::vector<::accounting::v1::Voucher> out;
  const absl::Status s =
      client::ForEachVoucher(*accounting_shard(shard).api, Scaled(absl::Seconds(10)),
                             [&](const ::accounting::v1::Voucher& v) { out.push_back(v); });
  if (!s.ok()) throw std::runtime_error(std::string(s.message()));
  return out;
}

std::vector<int> ServiceSet::accounting_shard_ids() const {
  std::vector<int> ids;
  for (const auto& [shard, a] : accounting_shards_) ids.push_back(shard);
  return ids;
}

std::vector<::accounting::v1::Voucher> ServiceSet::AllVouchers() {
  std::vector<::accounting::v1::Voucher> out;
  const absl::Status s =
      client::ForEachVoucher(*accounting_stub_, Scaled(absl::Seconds(10)),
                             [&](const ::accounting::v1::Voucher& v) { out.push_back(v); });
  if (!s.ok()) throw std::runtime_error(std::string(s.message()));
  return out;
}

}  // namespace outbox::testing
