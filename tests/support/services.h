#pragma once

// The real binaries, wired to the test broker with queues and stores of
// their own, and gRPC clients to them over real sockets.
//
// The store: SQLite files in dir() by default; with OUTBOX_E2E_STORE=postgres
// (the e2e.pg.* tests) databases of the ServiceSet's own on the test run's
// PostgreSQL server (OUTBOX_TEST_PG_DIR, cmake/PostgresFixture.cmake): one
// for payment and its recoveries, one for accounting and one per accounting
// or payment shard, each made by the constructor (or the shard's start) and
// dropped by the destructor. The services get libpq URIs without a password
// and PGPASSFILE, the server's pgpass.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "accounting/v1/accounting.grpc.pb.h"
#include "ops/v1/ops.grpc.pb.h"
#include "payment/v1/payment.grpc.pb.h"
#include "shared/outbox/message_auth.h"
#include "tests/support/broker.h"
#include "tests/support/process.h"

namespace outbox::testing {

using Env = std::map<std::string, std::string>;

// Whether this test process runs the services on PostgreSQL
// (OUTBOX_E2E_STORE=postgres).
bool OnPostgres();

class ServiceSet {
 public:
  // `extra_env` is added to every service's environment (e.g. RECOVERY_BASE_DELAY).
  explicit ServiceSet(std::map<std::string, std::string> extra_env = {});
  // Against another broker, e.g. the test cluster (its amqp_url lists the nodes).
  ServiceSet(Broker broker, std::map<std::string, std::string> extra_env);
  ~ServiceSet();

  // `extra_env` applies to this start only (e.g. OUTBOX_FAILPOINTS).
  void StartAccounting(Env extra_env = {});
  void StartPayment(Env extra_env = {});
  void StartAll() {
    StartAccounting();
    StartPayment();
  }

  // Accounting shard `shard` of ACCOUNTING_SHARDS (give it in the
  // constructor's extra_env, so every service has the same M): a process of
  // its own with its own accounting-<shard>.db and gRPC port.
  struct AccountingShard {
    Process process;
    int port = 0;
    std::string db;
    std::unique_ptr<::accounting::v1::AccountingService::Stub> api;
  };
  AccountingShard& StartAccountingShard(int shard, Env extra_env = {});
  AccountingShard& accounting_shard(int shard) { return *accounting_shards_.at(shard); }
  // The accounting.db files in use, comma-separated as outbox_check takes
  // them: the shards' when any was started, else accounting.db (on
  // PostgreSQL, the databases' URIs).
  std::string accounting_dbs() const;
  // The services' store settings as they get them (PAYMENT_DB,
  // ACCOUNTING_DB): a file path, or on PostgreSQL a libpq URI.
  const std::string& payment_db() const { return payment_db_; }
  const std::string& accounting_db() const { return accounting_db_; }
  // The number `sql` selects in `db` (one of the settings above), read
  // beside the services, while they run or not: a SQLite file opened
  // read-only, or the PostgreSQL database. Throws when it cannot.
  int64_t Count(const std::string& db, const std::string& sql) const;
  // Every voucher of one accounting shard, paging through its ListVouchers.
  std::vector<::accounting::v1::Voucher> ShardVouchers(int shard);
  // The accounting shards started so far.
  std::vector<int> accounting_shard_ids() const;

  struct Recovery {
    Process process;
    int port = 0;
    std::unique_ptr<::ops::v1::OutboxOps::Stub> ops;
  };
  // Starts a recovery_service instance named `instance` (its lease holder id).
  Recovery& StartRecovery(const std::string& instance, Env extra_env = {});
  Recovery& recovery(const std::string& instance) { return *recoveries_.at(instance); }

  // Services started from now on run dir/<binary> (an earlier build, for
  // upgrade tests); "" = this build's (the default).
  void UseBinariesFrom(std::string dir) { binary_dir_ = std::move(dir); }

  int payment_port() const { return payment_port_; }
  int accounting_port() const { return accounting_port_; }
  Process& payment() { return payment_; }
  Process& accounting() { return accounting_; }
  const Broker& broker() const { return broker_; }
  const std::string& dir() const { return dir_; }
  const std::string& pay_queue() const { return pay_queue_; }
  const std::string& acc_queue() const { return acc_queue_; }
  // The services sign and check messages with these keys (MESSAGE_KEYS_FILE,
  // a random secret per ServiceSet); `Signed` signs a hand-made message the
  // way the services do, so a test can inject one they accept.
  const MessageKeys& message_keys() const { return *message_keys_; }
  const std::string& message_keys_file() const { return message_keys_file_; }
  OutgoingMessage Signed(OutgoingMessage m) const;
  // The services' settings with the admin broker user; with `broker_user`,
  // that service's own user (scripts/rabbitmq_node.sh), as Start* use.
  Env ServiceEnv(const std::string& broker_user = "") const;

  ::payment::v1::PaymentService::Stub& payments() { return *payment_stub_; }
  ::accounting::v1::AccountingService::Stub& accounting_api() { return *accounting_stub_; }
  std::shared_ptr<grpc::Channel> payment_channel() const { return payment_channel_; }
  std::shared_ptr<grpc::Channel> accounting_channel() const { return accounting_channel_; }

  // Payment shards (docs/deployment.md, Payment shards), beside the single payment
  // service above: UsePaymentShards(n) picks n loopback ports; accounting
  // started after it declares each shard's reply queue <acc_queue>.s<k>
  // (REPLY_QUEUES). Shard k runs
  // with its own <dir>/payment.s<k>.db, PAYMENT_SHARDS (every shard's
  // address) and PAYMENT_SHARD_INDEX=k; its recoveries with the same db and
  // reply queue. Accounting keeps ACC_QUEUE. While shards are in use,
  // AllPayments and PaymentLoad go through a client that routes by the key.
  void UsePaymentShards(int count);
  void StartPaymentShard(int k, Env extra_env = {});
  Recovery& StartShardRecovery(int k, const std::string& instance, Env extra_env = {});
  int payment_shard_count() const { return static_cast<int>(shard_ports_.size()); }
  Process& payment_shard(int k) { return *shard_processes_.at(static_cast<size_t>(k)); }
  std::string payment_shard_db(int k) const;
  std::string shard_acc_queue(int k) const;
  std::string payment_shard_address(int k) const;
  std::string payment_shard_addresses() const;  // "127.0.0.1:p0,127.0.0.1:p1,..."
  Env PaymentShardEnv(int k) const;             // what shard k and its recoveries add to ServiceEnv
  // A client of every shard that routes by the key (client/sharded_payment_stub.h),
  // and one of shard k alone.
  std::unique_ptr<::payment::v1::PaymentService::StubInterface> PaymentShardsStub() const;
  std::unique_ptr<::payment::v1::PaymentService::Stub> PaymentShardStub(int k) const;

  // Every payment, paging through ListPayments (of every shard, with shards).
  std::vector<::payment::v1::Payment> AllPayments();
  // Every voucher, paging through ListVouchers.
  std::vector<::accounting::v1::Voucher> AllVouchers();

 private:
  int StartService(Process& p, const std::string& name, const std::string& event,
                   std::map<std::string, std::string> env, const std::string& log_name = "");

  // On PostgreSQL: a database of its own, made now; its URI for the
  // services. `what` names it ("pay", "acc", "acc1", ...).
  std::string NewDatabase(const std::string& what);

  Broker broker_;
  std::string binary_dir_;
  std::string dir_;
  std::string payment_db_;
  std::string accounting_db_;
  std::vector<std::string> pg_databases_;  // made by NewDatabase, dropped at the end
  std::vector<std::string> payment_shard_dbs_;
  std::string pay_queue_;
  std::string acc_queue_;
  std::string message_keys_file_;
  std::unique_ptr<MessageKeys> message_keys_;
  std::map<std::string, std::string> extra_env_;
  std::map<std::string, std::unique_ptr<Recovery>> recoveries_;
  std::map<int, std::unique_ptr<AccountingShard>> accounting_shards_;
  Process payment_;
  Process accounting_;
  int payment_port_ = 0;
  int accounting_port_ = 0;
  std::shared_ptr<grpc::Channel> payment_channel_;
  std::shared_ptr<grpc::Channel> accounting_channel_;
  std::unique_ptr<::payment::v1::PaymentService::Stub> payment_stub_;
  std::unique_ptr<::accounting::v1::AccountingService::Stub> accounting_stub_;
  std::vector<int> shard_ports_;
  std::vector<std::unique_ptr<Process>> shard_processes_;
};

// The build's binary `name`; $OUTBOX_E2E_BIN_DIR/name when that is set (a
// copy of the binaries, kept apart from a build going on meanwhile).
std::string BinaryPath(const std::string& name);

}  // namespace outbox::testing
