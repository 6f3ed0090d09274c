#include "bench/floor.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bench/baselines.h"
#include "bench/create_driver.h"
#include "bench/fsync_counter.h"
#include "bench/process_stats.h"
#include "bench/report.h"
#include "bench/trivial_server.h"
#include "client/channel.h"
#include "client/request.h"
#include "shared/amqp/internal/amqp_client.h"
#include "shared/base/status_macros.h"
#include "shared/sqlite/sqlite_file.h"

namespace outbox::bench {
namespace {

constexpr int kPublishWindow = 256;    // the raw broker baseline's confirm window
constexpr int kConsumePrefetch = 256;  // accounting_service's --prefetch
constexpr int kMaxInFlightCalls = 20000;

}  // namespace

double FloorPerPayment(const FloorParts& parts) {
  return parts.grpc.server_us_per_call + kFloorMessagesPerPayment * parts.broker.us_per_message +
         kFloorCommitsPerPayment * parts.sqlite.us_per_tx;
}

std::string FloorComposition(const FloorParts& parts) {
  return absl::StrFormat("gRPC server %s + %d x broker %s + %d x SQLite tx %s",
                         Micros(parts.grpc.server_us_per_call), kFloorMessagesPerPayment,
                         Micros(parts.broker.us_per_message), kFloorCommitsPerPayment,
                         Micros(parts.sqlite.us_per_tx));
}

absl::StatusOr<GrpcFloor> MeasureGrpcFloor(double rate, int channels, absl::Duration time) {
  ASSIGN_OR_RETURN(std::unique_ptr<TrivialServerProcess> server, TrivialServerProcess::Start());
  std::vector<std::unique_ptr<PaymentStub>> stubs;
  for (int i = 0; i < channels; ++i) {
    auto channel = client::NewChannel(absl::StrCat("127.0.0.1:", server->port()));
    if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
      return absl::UnavailableError("gRPC floor: cannot connect to the trivial server");
    }
    stubs.push_back(::payment::v1::PaymentService::NewStub(channel));
  }
  DriveResult r;
  std::vector<double> cpu;
  {
    const CpuMeter meter({{"trivial gRPC server", "grpc_server", server->pid()},
                          {"outbox_bench (client)", "client", 0}});
    CreateDriver driver(std::move(stubs), client::RandomRunId());
    r = driver.OpenLoop(rate, absl::ZeroDuration(), time, kMaxInFlightCalls);
    cpu = meter.Used();
  }
  if (r.failed > 0) return absl::UnavailableError(absl::StrCat("gRPC floor: ", r.first_error));
  GrpcFloor out;
  const double calls = static_cast<double>(r.ok_all);
  out.server_us_per_call = Div(1e6 * cpu[0], calls);
  out.client_us_per_call = Div(1e6 * cpu[1], calls);
  out.calls_per_s = static_cast<double>(r.ok_in_window) / absl::ToDoubleSeconds(time);
  return out;
}

namespace {

// Takes deliveries and acks each one until `published` (-1 while
// publishing) are consumed, giving up 30 s after the publisher is done.
absl::Status ConsumeAndAck(AmqpConnection& sub, const std::atomic<int64_t>& published,
                           int64_t* consumed) {
  absl::Time drain_deadline = absl::InfiniteFuture();
  while (true) {
    const int64_t target = published.load();
    if (target >= 0) {
      if (*consumed >= target) return absl::OkStatus();
      if (drain_deadline == absl::InfiniteFuture())
        drain_deadline = absl::Now() + absl::Seconds(30);
      if (absl::Now() > drain_deadline) {
        return absl::DeadlineExceededError("broker floor: the consumer did not drain the queue");
      }
    }
    ASSIGN_OR_RETURN(std::vector<Delivery> got,
                     sub.NextDeliveries(kConsumePrefetch, absl::Milliseconds(100)));
    for (const Delivery& d : got) {
      RETURN_IF_ERROR(sub.Ack(d.delivery_tag, /*multiple=*/false));
      ++*consumed;
    }
  }
}

// Publishes one message per tick until `end` and waits for the last
// confirms; between ticks it reads confirms. Returns the messages confirmed.
absl::StatusOr<int64_t> PublishPaced(AmqpConnection& pub, const std::string& queue, double rate,
                                     absl::Time start, absl::Time end) {
  OutgoingMessage m;
  m.topic = queue;
  m.body.assign(kPayloadBytes, 'b');
  Ticks ticks(rate, start);
  int64_t confirmed = 0;
  std::vector<Confirm> settled;
  auto read_confirms = [&](absl::Duration wait) -> absl::Status {
    settled.clear();
    RETURN_IF_ERROR(pub.ReadConfirms(wait, &settled));
    confirmed +=
        std::count_if(settled.begin(), settled.end(), [](const Confirm& c) { return c.ok; });
    return absl::OkStatus();
  };
  while (ticks.due() < end) {
    const absl::Time now = absl::Now();
    const bool window_full = pub.unconfirmed() >= static_cast<size_t>(kPublishWindow);
    if (now >= ticks.due() && !window_full) {
      m.message_id = absl::StrCat("floor-", ticks.taken());
      RETURN_IF_ERROR(pub.Publish(m).status());
      ticks.Take();
    } else if (pub.unconfirmed() == 0) {
      absl::SleepFor(ticks.due() - now);
    } else {
      RETURN_IF_ERROR(read_confirms(window_full ? absl::Seconds(1) : ticks.due() - now));
    }
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (pub.unconfirmed() > 0 && absl::Now() < deadline) {
    RETURN_IF_ERROR(read_confirms(absl::Seconds(1)));
  }
  if (pub.unconfirmed() > 0) return absl::DeadlineExceededError("broker floor: confirms missing");
  return confirmed;
}

absl::StatusOr<BrokerFloor> RunBrokerFloor(AmqpConnection& pub, AmqpConnection& sub,
                                           const std::string& queue, double rate,
                                           absl::Duration time, int broker_pid) {
  RETURN_IF_ERROR(sub.Consume(queue, kConsumePrefetch));
  std::atomic<int64_t> published{-1};  // the messages confirmed, once the publisher is done
  int64_t consumed = 0;
  absl::Status consumer_status;
  const FsyncCounter fsyncs(broker_pid);
  const double cpu_before = broker_pid > 0 ? CpuSeconds(broker_pid) : NAN;
  const absl::Time start = absl::Now();
  std::thread consumer([&] { consumer_status = ConsumeAndAck(sub, published, &consumed); });
  absl::StatusOr<int64_t> confirmed = PublishPaced(pub, queue, rate, start, start + time);
  published.store(confirmed.ok() ? *confirmed : 0);
  consumer.join();
  const double cpu = broker_pid > 0 ? CpuSeconds(broker_pid) - cpu_before : NAN;
  const double fsync_count = broker_pid > 0 ? fsyncs.Count() : NAN;
  RETURN_IF_ERROR(confirmed.status());
  RETURN_IF_ERROR(consumer_status);
  BrokerFloor out;
  const double messages = static_cast<double>(consumed);
  out.us_per_message = Div(1e6 * cpu, messages);
  out.fsyncs_per_message = Div(fsync_count, messages);
  out.messages_per_s = messages / absl::ToDoubleSeconds(time);
  return out;
}

}  // namespace

absl::StatusOr<BrokerFloor> MeasureBrokerFloor(const AmqpUrl& url, double rate, absl::Duration time,
                                               int broker_pid, bool persistent) {
  const std::string queue =
      absl::StrCat("bench.floor.", persistent ? "persistent." : "transient.", getpid());
  ASSIGN_OR_RETURN(auto pub, AmqpConnection::Connect(url, "outbox-bench-floor-publish"));
  RETURN_IF_ERROR(pub->DeclareQueue(queue, "classic"));
  auto floor = [&]() -> absl::StatusOr<BrokerFloor> {
    RETURN_IF_ERROR(pub->EnableConfirms());
    pub->PublishPersistent(persistent);
    ASSIGN_OR_RETURN(auto sub, AmqpConnection::Connect(url, "outbox-bench-floor-consume"));
    return RunBrokerFloor(*pub, *sub, queue, rate, time, broker_pid);
  }();
  // On a connection of its own: a failure above may have broken the publisher's.
  auto admin = AmqpConnection::Connect(url, "outbox-bench-floor-cleanup");
  if (admin.ok()) {
    (void)(*admin)->DeleteQueue(queue);
    (void)(*admin)->DeleteQueue(Topology::DeadLetterQueue(queue));
  }
  return floor;
}

absl::StatusOr<SqliteFloor> MeasureSqliteFloor(const std::string& dir, double rate,
                                               absl::Duration time) {
  SqliteFloor out;
  RETURN_IF_ERROR(WithScratchWriter(dir, "sqlite floor", [&](SQLite::Database& db) {
    ScratchTable table(db);
    const FsyncCounter fsyncs(0);  // this thread's: it commits and checkpoints
    const double cpu_before = ThreadCpuSeconds();
    const absl::Time start = absl::Now();
    Ticks ticks(rate, start);
    while (ticks.due() < start + time) {
      absl::SleepFor(ticks.due() - absl::Now());
      table.Commit(2);
      ticks.Take();
    }
    const double txs = static_cast<double>(ticks.taken());
    out.us_per_tx = Div(1e6 * (ThreadCpuSeconds() - cpu_before), txs);
    out.fsyncs_per_tx = Div(fsyncs.Count(), txs);
    out.tx_per_s = txs / absl::ToDoubleSeconds(absl::Now() - start);
    return absl::OkStatus();
  }));
  return out;
}

}  // namespace outbox::bench
