#include "shared/postgres/pg_producer.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "shared/base/internal/mutex.h"
#include "shared/base/status_macros.h"
#include "shared/outbox/internal/rows_closed.h"
#include "shared/postgres/internal/pg_recovery_store.h"
#include "shared/roles/internal/producer_links.h"
#include "shared/roles/internal/role_options.h"

namespace outbox {
namespace {

absl::Status Validate(PgProducer::Options& options) {
  RETURN_IF_ERROR(internal::ValidateProducerLinks(options, "PgProducer"));
  if (options.on_closed) {
    return absl::InvalidArgumentError(
        "PgProducer: options.on_closed is SQLite's; set options.pg_on_closed");
  }
  if (absl::Status s = options.pg_group_commit.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("PgProducer: options.pg_group_commit.", s.message()));
  }
  return absl::OkStatus();
}

// Recovery's options: its own settings, with what the producer states once.
Recovery::Options RecoveryOptionsOf(const PgProducer::Options& options) {
  Recovery::Options recovery = options.recovery;
  recovery.amqp = options.amqp;
  recovery.signing = options.signing;
  recovery.queue = options.queue;
  recovery.reply_queue = options.reply_queue;
  recovery.clock = options.clock;
  recovery.metrics = options.metrics;
  recovery.recovery.retry = options.retry;
  if (recovery.recovery.instance_id.empty()) {
    recovery.recovery.instance_id = internal::DefaultInstanceId(options.queue);
  }
  return recovery;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PgProducer>> PgProducer::Start(absl::string_view conninfo,
                                                              Options options) {
  RETURN_IF_ERROR(Validate(options));
  std::unique_ptr<Recovery::Options> recovery_options;
  if (options.recovery_in_process) {
    // Checked before anything connects.
    recovery_options = std::make_unique<Recovery::Options>(RecoveryOptionsOf(options));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<PgSession> writer, PgSession::Open(conninfo));
  ASSIGN_OR_RETURN(std::unique_ptr<PgSession> acks, PgSession::Open(conninfo));
  std::unique_ptr<PgSession> recovery_session;
  if (recovery_options != nullptr) {
    ASSIGN_OR_RETURN(recovery_session, PgSession::Open(conninfo));
  }
  internal::ProducerLinks links = internal::DialProducerLinks(options);
  ASSIGN_OR_RETURN(std::unique_ptr<PgProducer> producer,
                   Create(*writer, *acks, std::move(options), std::move(links.publisher),
                          std::move(links.replies)));
  producer->own_writer_session_ = std::move(writer);
  producer->own_acks_session_ = std::move(acks);
  producer->StartWorkers();
  if (recovery_options != nullptr) {
    auto store = std::make_unique<PgRecoveryStore>(*recovery_session);
    store->set_instance(recovery_options->recovery.instance_id);
    store->set_on_closed(producer->options_.pg_on_closed);
    producer->own_recovery_session_ = std::move(recovery_session);
    ASSIGN_OR_RETURN(producer->recovery_,
                     Recovery::Start(std::move(*recovery_options), std::move(store)));
  }
  return producer;
}

absl::StatusOr<std::unique_ptr<PgProducer>> PgProducer::Start(const Config& config,
                                                              const PgSchema* schema,
                                                              PgRowClosed on_closed) {
  if (!IsPgConninfo(config.db)) {
    return absl::InvalidArgumentError(
        "PgProducer: config.db is not a postgresql:// URI (a SQLite file: Producer::Start)");
  }
  if (config.on_closed) {
    return absl::InvalidArgumentError(
        "PgProducer: config.on_closed is SQLite's; pass the closing step to Start");
  }
  Options options;
  static_cast<Producer::Options&>(options) = ProducerOptionsOf(config);
  options.pg_on_closed = std::move(on_closed);
  options.recovery_in_process = config.recovery_in_process;
  options.recovery = ::outbox::RecoveryOptionsOf(config);
  {
    ASSIGN_OR_RETURN(std::unique_ptr<PgSession> session, PgSession::Open(config.db));
    RETURN_IF_ERROR(UpgradePgSchema(*session, PgOutboxSchema()));
    if (schema != nullptr) RETURN_IF_ERROR(UpgradePgSchema(*session, *schema));
  }
  return Start(config.db, std::move(options));
}

absl::StatusOr<std::unique_ptr<PgProducer>> PgProducer::Create(
    PgSession& writer, PgSession& acks, Options options,
    std::unique_ptr<MessagePublisher> publisher, std::unique_ptr<MessageConsumer> replies) {
  RETURN_IF_ERROR(Validate(options));
  return std::unique_ptr<PgProducer>(
      new PgProducer(writer, acks, std::move(options), std::move(publisher), std::move(replies)));
}

PgProducer::PgProducer(PgSession& writer, PgSession& acks, Options options,
                       std::unique_ptr<MessagePublisher> publisher,
                       std::unique_ptr<MessageConsumer> replies)
    : options_(std::move(options)),
      acks_session_(acks),
      publisher_(std::move(publisher)),
      replies_(std::move(replies)),
      signing_publisher_(*publisher_, options_.signing.keys()),
      writer_outbox_(writer, internal::ClockOr(options_.clock), options_.retry),
      outbox_(acks, internal::ClockOr(options_.clock), options_.retry),
      relay_(signing_publisher_, outbox_, internal::ClockOr(options_.clock),
             internal::MetricsOr(options_.metrics, own_metrics_),
             internal::RelayOptionsOf(options_)),
      writer_(writer, writer_outbox_, relay_, internal::ClockOr(options_.clock),
              internal::MetricsOr(options_.metrics, own_metrics_), options_.pg_group_commit),
      ack_repository_(outbox_, writer_),
      acks_(*replies_, ack_repository_, options_.decode_reply,
            internal::MetricsOr(options_.metrics, own_metrics_),
            internal::AckListenerOptionsOf(options_)) {
  outbox_.set_on_closed(options_.pg_on_closed);
  writer_.Start();
}

PgProducer::~PgProducer() {
  Stop();
}

void PgProducer::StartWorkers() {
  relay_.Start();
  acks_.Start();
}

void PgProducer::Stop() {
  if (recovery_ != nullptr) recovery_->Stop();
  acks_.Stop();
  writer_.Stop();  // it hands what it commits to the relay
  relay_.Stop();
}

void PgProducer::WriteAsync(MessageSpec spec, PgBusinessWrite business,
                            PgGroupWriter::WriteDone done) {
  if (spec.message_id.empty()) spec.message_id = ids_.NewId();
  if (spec.topic.empty()) spec.topic = options_.queue;
  if (spec.reply_to.empty()) spec.reply_to = options_.reply_queue;
  writer_.WriteAsync(std::move(spec), std::move(business), std::move(done));
}

absl::StatusOr<OutboxRowCounts> PgProducer::CountRows() {
  OutboxRowCounts counts;
  RETURN_IF_ERROR(acks_session_.Transaction("count outbox rows", [&](PgConnection& conn) {
    counts = {};
    ASSIGN_OR_RETURN(PgResult r, conn.Query("SELECT status, count(*) FROM outbox GROUP BY status"));
    for (int i = 0; i < r.rows(); ++i) {
      int64_t n = 0;
      if (!absl::SimpleAtoi(r.Get(i, 1), &n)) {
        return absl::InternalError("count outbox rows: not a count");
      }
      if (r.Get(i, 0) == "SENDING") counts.sending = n;
      if (r.Get(i, 0) == "SENT") counts.sent = n;
      if (r.Get(i, 0) == "FAILED") counts.failed = n;
    }
    return absl::OkStatus();
  }));
  return counts;
}

absl::StatusOr<OutboxRowCounts> PgProducer::WaitUntilClosed(absl::Time deadline,
                                                            absl::Duration poll) {
  return internal::WaitUntilRowsClosed([this] { return CountRows(); }, deadline, poll, nullptr);
}

absl::StatusOr<OutboxRowCounts> PgProducer::WaitUntilClosed(absl::Time deadline,
                                                            const std::function<bool()>& stop) {
  return internal::WaitUntilRowsClosed([this] { return CountRows(); }, deadline,
                                       absl::Milliseconds(100), stop);
}

absl::StatusOr<std::string> PgProducer::Write(MessageSpec spec, PgBusinessWrite business) {
  absl::StatusOr<OutboxMessage> written;
  Notification done;
  WriteAsync(std::move(spec), std::move(business), [&](absl::StatusOr<OutboxMessage> row) {
    written = std::move(row);
    done.Notify();
  });
  done.WaitForNotification();
  if (!written.ok()) return written.status();
  return written->message_id;
}

}  // namespace outbox
