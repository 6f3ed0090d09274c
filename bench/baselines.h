#pragma once

// What the parts underneath can do on their own, measured on the same machine
// in the same run: SQLite commits, pipelined RabbitMQ publish+consume, the
// gRPC layer with nothing behind it, and the naive one-round-trip-per-item
// outbox. Each also says what one unit of its work costs in CPU, so that the
// design's CPU floor per payment can be composed from them.
#include <cmath>
#include <functional>
#include <memory>
#include <string>

#include "absl/random/random.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "shared/amqp/internal/amqp_client.h"

namespace SQLite {
class Database;
class Statement;
}  // namespace SQLite

namespace outbox::bench {

// Bytes of every payload and message body the baselines and floors write.
inline constexpr int kPayloadBytes = 200;

struct SqliteBaseline {
  double tx2_per_s = NAN;         // 2-row transactions per second
  double rows_per_s_tx100 = NAN;  // rows per second in 100-row transactions
  double cpu_us_per_row = NAN;    // CPU per row in 100-row transactions (the group-commit shape)
};

// WAL, synchronous=FULL (the services' default), in a scratch file in `dir`.
absl::StatusOr<SqliteBaseline> MeasureSqlite(const std::string& dir, absl::Duration each);

struct BrokerBaseline {
  double publish_per_s = NAN;  // confirmed publishes per second, while consuming
  double flow_per_s = NAN;     // messages published AND consumed per second
  // The broker's CPU per message published with a confirm, delivered and
  // acked (NaN without `broker_pid`).
  double cpu_us_per_message = NAN;
};

// One thread publishes persistent messages in confirmed batches of 256 (the
// fast path's window) while another consumes with prefetch 256 and acks with
// `multiple`: the broker's own ceiling for the pattern the services use.
absl::StatusOr<BrokerBaseline> MeasureBroker(const AmqpUrl& url, absl::Duration time,
                                             int broker_pid);

// The naive outbox, one item at a time: commit the row, publish and wait for
// the confirm, commit "sent". What the design's batching is measured against.
// Items per second.
absl::StatusOr<double> MeasureNaive(const std::string& dir, const AmqpUrl& url,
                                    absl::Duration time);

struct GrpcBaseline {
  double calls_per_s = NAN;
  double server_cpu_us_per_call = NAN;  // the trivial server process's CPU per call
};

// CreatePayment calls/s through the bench's driver, with the system run's
// concurrency and channels, against a trivial payment.v1.PaymentService
// (gRPC's sync server, as the services use) in a child process of its own,
// so its CPU can be read apart from the client's (bench/trivial_server.h).
absl::StatusOr<GrpcBaseline> MeasureGrpc(int concurrency, int channels, absl::Duration time);

// A random key like a UUID (32 hex digits), so that index inserts land where
// the services' would.
std::string RandomKey(absl::BitGen& gen);

// The table the SQLite baseline and floor write, created on `db`: a key
// like the services' (RandomKey) under a unique index and a kPayloadBytes
// payload per row.
class ScratchTable {
 public:
  explicit ScratchTable(SQLite::Database& db);
  ~ScratchTable();
  // One write transaction (BEGIN IMMEDIATE ... COMMIT) of `rows` inserts.
  void Commit(int rows);

 private:
  SQLite::Database& db_;
  std::unique_ptr<SQLite::Statement> insert_;
  absl::BitGen gen_;
  const std::string payload_;
};

// A scratch SQLite file, `<dir>/<label with '_' for ' '>_<pid>.db`, opened
// as the services open their writer (WAL, synchronous=FULL, its checkpoints
// following its commits): runs `body` on it under the write lock (SQLite's
// exceptions become a status naming `label`), then closes it and removes
// its files, whatever `body` returned.
absl::Status WithScratchWriter(const std::string& dir, const std::string& label,
                               const std::function<absl::Status(SQLite::Database& db)>& body);

}  // namespace outbox::bench
