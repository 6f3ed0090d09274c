#pragma once

// The CPU floor of one payment at an offered rate R: each part underneath,
// alone, paced open loop at R (the load curve's schedule), and what one unit
// of its work costs in CPU at that rate, idle time between ticks included:
// - gRPC: CreatePayment through the bench's driver, one call per tick,
//   against the trivial server process (bench/trivial_server.h);
// - the broker: one persistent ~200-byte message per tick, published with a
//   confirm, consumed and acked, on a fresh durable classic queue; and the
//   same with transient messages, for what persistence costs;
// - SQLite: one 2-row transaction per tick, WAL, synchronous=FULL.
// Composed by FloorPerPayment: a payment is one call, two messages
// (PaymentCreated and its reply) and two commits (payment's, and
// accounting's voucher).
#include <cmath>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "shared/amqp/amqp_url.h"

namespace outbox::bench {

// The schedule of an open loop: tick i is due at start + i / rate, whatever
// happened before (a late tick is not skipped; its work starts at once).
class Ticks {
 public:
  Ticks(double rate, absl::Time start) : interval_(absl::Seconds(1) / rate), start_(start) {}
  absl::Time due() const { return start_ + interval_ * taken_; }
  void Take() { ++taken_; }
  int64_t taken() const { return taken_; }

 private:
  const absl::Duration interval_;
  const absl::Time start_;
  int64_t taken_ = 0;
};

struct GrpcFloor {
  double server_us_per_call = NAN;  // the trivial server process's CPU
  double client_us_per_call = NAN;  // this process's (the driver's) CPU
  double calls_per_s = NAN;         // achieved
};

struct BrokerFloor {
  double us_per_message = NAN;  // the broker's CPU (NaN without its pid)
  double fsyncs_per_message = NAN;
  double messages_per_s = NAN;  // consumed, over the paced time
};

struct SqliteFloor {
  double us_per_tx = NAN;  // the committing thread's CPU, checkpoints included
  double fsyncs_per_tx = NAN;
  double tx_per_s = NAN;  // achieved
};

struct FloorParts {
  GrpcFloor grpc;
  BrokerFloor broker;            // persistent messages
  BrokerFloor broker_transient;  // the same, delivery mode 1: not in the floor
  SqliteFloor sqlite;
};

inline constexpr int kFloorMessagesPerPayment = 2;  // PaymentCreated and its reply
inline constexpr int kFloorCommitsPerPayment = 2;   // the payment's and the voucher's

// gRPC server per call + 2 x broker per persistent message + 2 x SQLite per
// transaction, in µs; NaN when a part could not be measured.
double FloorPerPayment(const FloorParts& parts);

// How FloorPerPayment adds up, with the figures: "gRPC server 120 µs + 2 x
// broker 400 µs + 2 x SQLite tx 50 µs".
std::string FloorComposition(const FloorParts& parts);

// CreatePayment at `rate` over `channels` connections to a trivial server.
absl::StatusOr<GrpcFloor> MeasureGrpcFloor(double rate, int channels, absl::Duration time);

// One publisher connection (confirms on; at most 256 unconfirmed, the
// services' publish window: at low rates each confirm is back before the
// next tick, so it waits for each as the services do) and one consumer
// connection (prefetch 256, accounting's; each delivery acked), on a queue of
// their own, deleted afterwards. `broker_pid` 0: no CPU figure.
absl::StatusOr<BrokerFloor> MeasureBrokerFloor(const AmqpUrl& url, double rate, absl::Duration time,
                                               int broker_pid, bool persistent);

// In a scratch file in `dir`, opened as the services open theirs.
absl::StatusOr<SqliteFloor> MeasureSqliteFloor(const std::string& dir, double rate,
                                               absl::Duration time);

}  // namespace outbox::bench
